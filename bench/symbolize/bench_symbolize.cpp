// SPDX-License-Identifier: Apache-2.0
// In-process symbolization benchmark through the C ABI: first-address latency, warm µs/address with the inline chain, heap and RSS.
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "stackprov/stackprov.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// CPU time of this process: the figure that other load on the machine disturbs least.
double cpu_s() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

size_t heap_in_use() { return mallinfo2().uordblks + mallinfo2().hblkhd; }

long peak_rss_kib() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/// Addresses the library failed to symbolize (every address is inside a function of the
/// module's symbol table: each must resolve); the benchmark fails when this is not 0.
size_t g_failed = 0;

/// One pass over `addrs`: every address with its whole inline chain; returns frames seen.
size_t pass(sprov_symbolizer* sym, const char* obj, const std::vector<uint64_t>& addrs, uint32_t flags,
            uint64_t* checksum) {
  size_t frames = 0;
  for (uint64_t a : addrs) {
    struct sprov_symbol_info info;
    memset(&info, 0, sizeof(info));
    info.sz = sizeof(info);
    if (sprov_symbolizer_addr_ex(sym, obj, a, flags, &info) != 0 || info.frame_count == 0 ||
        info.resolver == SPROV_RESOLVER_NONE) {
      if (g_failed++ == 0)
        fprintf(stderr, "bench_symbolize: 0x%llx: %s\n", static_cast<unsigned long long>(a), sprov_last_error_message());
      continue;
    }
    for (uint32_t i = 0; i < info.frame_count; i++) {
      struct sprov_symbol_frame f;
      memset(&f, 0, sizeof(f));
      f.sz = sizeof(f);
      if (sprov_symbolizer_inline_frame(sym, i, &f) != 0) {
        g_failed++;
        break;
      }
      *checksum += f.line + strlen(f.name) + strlen(f.file);
      frames++;
    }
  }
  return frames;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_symbolize OBJ ADDR_FILE   (prints one JSON object)\n");
    return 2;
  }
  const char* obj = argv[1];
  std::vector<uint64_t> addrs;
  if (FILE* f = fopen(argv[2], "r")) {
    char line[64];
    while (fgets(line, sizeof(line), f)) addrs.push_back(strtoull(line, nullptr, 0));
    fclose(f);
  }
  if (addrs.empty()) {
    fprintf(stderr, "bench_symbolize: no addresses in %s\n", argv[2]);
    return 2;
  }
  const size_t heap0 = heap_in_use();
  const long rss0 = peak_rss_kib();
  sprov_context* ctx = nullptr;
  sprov_symbolizer* sym = nullptr;
  if (sprov_context_new(nullptr, &ctx) != 0 || sprov_symbolizer_new(ctx, nullptr, &sym) != 0) {
    fprintf(stderr, "bench_symbolize: %s\n", sprov_last_error_message());
    return 1;
  }
  uint64_t sum = 0;
  // First address: module open, index build, the unit's DIEs and lines.
  double t0 = now_s();
  std::vector<uint64_t> first(addrs.begin(), addrs.begin() + 1);
  pass(sym, obj, first, 0, &sum);
  const double first_s = now_s() - t0;
  // Cold pass: every unit the set touches is built.
  t0 = now_s();
  pass(sym, obj, addrs, 0, &sum);
  const double cold_s = now_s() - t0;
  // Warm passes: demangled names (the default) and raw linkage names.
  t0 = now_s();
  double c0 = cpu_s();
  const size_t frames = pass(sym, obj, addrs, 0, &sum);
  const double warm_s = now_s() - t0, warm_cpu_s = cpu_s() - c0;
  t0 = now_s();
  c0 = cpu_s();
  pass(sym, obj, addrs, SPROV_SYMBOLIZE_NO_DEMANGLE, &sum);
  const double warm_raw_s = now_s() - t0, warm_raw_cpu_s = cpu_s() - c0;
  const size_t heap1 = heap_in_use();
  const long rss1 = peak_rss_kib();
  printf("{\"addresses\":%zu,\"frames\":%zu,\"first_address_ms\":%.3f,\"cold_pass_s\":%.4f,"
         "\"warm_us_per_address\":%.4f,\"warm_raw_us_per_address\":%.4f,\"warm_cpu_us_per_address\":%.4f,"
         "\"warm_raw_cpu_us_per_address\":%.4f,\"heap_bytes\":%zu,"
         "\"peak_rss_kib\":%ld,\"rss_before_kib\":%ld,\"checksum\":%" PRIu64 "}\n",
         addrs.size(), frames, first_s * 1e3, cold_s, warm_s * 1e6 / addrs.size(), warm_raw_s * 1e6 / addrs.size(),
         warm_cpu_s * 1e6 / addrs.size(), warm_raw_cpu_s * 1e6 / addrs.size(),
         heap1 > heap0 ? heap1 - heap0 : 0, rss1, rss0, sum);
  sprov_symbolizer_free(sym);
  sprov_context_free(ctx);
  if (g_failed != 0) {
    fprintf(stderr, "bench_symbolize: FAIL: %zu lookups failed\n", g_failed);
    return 1;
  }
  return 0;
}
