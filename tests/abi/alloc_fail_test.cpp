// SPDX-License-Identifier: Apache-2.0
// Allocation-failure injection over the C ABI: operator new throws at the Nth allocation, for every N.
//
// A scenario of C API calls (context, capture_self, serialize/deserialize, unwind, frames, stats,
// symbolize, snapshot accessors, a symbol bundle) runs with the Nth allocation failing: every N up
// to 300, then 300 more spread over the rest, then past the end. Expected (issue 18): no exception leaves a
// sprov_* call; a call that fails returns SPROV_ERR_NOMEM with sprov_last_error() ==
// SPROV_ERR_NOMEM and a message starting "out of memory", sets its out-pointer to NULL, and the
// scenario stops there; a run without injection gives the same stack as the first one.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "stackprov/stackprov.h"
#include "stackprov/symbol_bundle.h"

namespace {

long g_count = 0;       // allocations so far in this run
long g_fail_at = -1;    // the allocation that throws (1-based); -1: none
bool g_injected = false;
bool g_paused = false;  // the test's own allocations (its strings) are neither counted nor failed

void* counted_alloc(std::size_t n) {
  if (g_fail_at >= 0 && !g_paused && ++g_count == g_fail_at) {
    g_injected = true;
    throw std::bad_alloc();
  }
  void* p = std::malloc(n ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

int g_failures = 0;
std::string g_where;

struct Pause {
  Pause() { g_paused = true; }
  ~Pause() { g_paused = false; }
};

/// Checks one call's outcome: 0, or SPROV_ERR_NOMEM as the last error with its message. Returns
/// true to continue the scenario.
bool ok(int rc, const char* call) {
  if (rc == 0) return true;
  const char* msg = sprov_last_error_message();
  if (rc != SPROV_ERR_NOMEM || sprov_last_error() != SPROV_ERR_NOMEM || std::strncmp(msg, "out of memory", 13) != 0) {
    if (g_failures++ < 20)
      std::fprintf(stderr, "FAIL %s: %s returned %d (last error %d: %s), expected 0 or SPROV_ERR_NOMEM\n",
                   g_where.c_str(), call, rc, sprov_last_error(), msg);
  }
  return false;
}

/// The stack's frames as text (pc, symbol), for comparing a clean run with the reference.
std::string scenario(const char* bundle_path) {
  std::string out;
  sprov_context* ctx = nullptr;
  if (!ok(sprov_context_new(nullptr, &ctx), "sprov_context_new")) return out;
  sprov_snapshot* snap = nullptr;
  sprov_snapshot* again = nullptr;
  sprov_unwinder* uw = nullptr;
  sprov_stack* st = nullptr;
  sprov_symbolizer* sym = nullptr;
  sprov_bundle* b = nullptr;
  void* bytes = nullptr;
  size_t len = 0;
  do {
    if (!ok(sprov_snapshot_capture_self(ctx, nullptr, &snap), "sprov_snapshot_capture_self")) break;
    if (!ok(sprov_snapshot_serialize(snap, &bytes, &len), "sprov_snapshot_serialize")) break;
    if (!ok(sprov_snapshot_deserialize(bytes, len, &again), "sprov_snapshot_deserialize")) break;
    uint64_t v = 0;
    if (!ok(sprov_snapshot_reg(again, 7, &v), "sprov_snapshot_reg")) break;
    struct sprov_module_info mi = {};
    mi.sz = sizeof(mi);
    if (!ok(sprov_snapshot_module(again, 0, &mi), "sprov_snapshot_module")) break;
    if (!ok(sprov_unwinder_new(ctx, nullptr, &uw), "sprov_unwinder_new")) break;
    if (!ok(sprov_unwinder_unwind(uw, again, &st), "sprov_unwinder_unwind")) break;
    struct sprov_unwinder_stats us = {};
    us.sz = sizeof(us);
    if (!ok(sprov_unwinder_stats(uw, &us), "sprov_unwinder_stats")) break;
    if (!ok(sprov_symbolizer_new(ctx, nullptr, &sym), "sprov_symbolizer_new")) break;
    bool stop = false;
    for (size_t i = 0; i < sprov_stack_frame_count(st) && !stop; i++) {
      struct sprov_frame f = {};
      f.sz = sizeof(f);
      struct sprov_symbol s = {};
      s.sz = sizeof(s);
      stop = !ok(sprov_stack_frame(st, i, &f), "sprov_stack_frame") ||
             !ok(sprov_symbolizer_frame(sym, st, i, &s), "sprov_symbolizer_frame");
      // Frames up to main's caller site: main calls the scenario from three places.
      if (!stop && !(s.name && std::strcmp(s.name, "main") == 0)) {
        Pause p;
        out += std::to_string(f.module_offset) + " " + (s.name ? s.name : "?") + "\n";
      }
    }
    if (stop) break;
    if (!ok(sprov_bundle_open_file(bundle_path, &b), "sprov_bundle_open_file")) break;
    char digest[80];
    if (!ok(sprov_bundle_digest(b, digest, sizeof digest), "sprov_bundle_digest")) break;
    Pause p;
    out += digest;
  } while (false);
  // A failed call leaves its out-pointer NULL (a later free of it must be harmless either way).
  sprov_bundle_free(b);
  sprov_symbolizer_free(sym);
  sprov_stack_free(st);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(again);
  sprov_free(bytes);
  sprov_snapshot_free(snap);
  sprov_context_free(ctx);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: alloc_fail_test BUNDLE\n");
    return 2;
  }
  g_where = "reference run";
  g_fail_at = 1L << 62;  // counted, never reached
  const std::string reference = scenario(argv[1]);
  const long total = g_count;
  g_fail_at = -1;
  std::fprintf(stderr, "reference run: %ld allocations\n", total);
  if (reference.empty() || g_failures) {
    std::fprintf(stderr, "FAIL the reference run (no injection) failed\n");
    return 1;
  }
  // Every allocation point up to kDense, then an even spread of kSpread more over the rest (one
  // run costs a capture and module loads: all ~2,500 points would take minutes), then one past
  // the end, which must run clean.
  const long kDense = std::getenv("ALLOC_FAIL_ALL") ? 1L << 40 : 300, kSpread = 300;
  const long stride = total > kDense ? std::max(1L, (total - kDense) / kSpread) : 1;
  long n = 1, injected = 0;
  for (; n < total + 2; n = n < kDense ? n + 1 : n + stride) {
    g_where = "allocation " + std::to_string(n) + " failing";
    if (std::getenv("ALLOC_FAIL_VERBOSE")) std::fprintf(stderr, "%s\n", g_where.c_str());
    g_count = 0;
    g_fail_at = n;
    g_injected = false;
    try {
      scenario(argv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAIL %s: an exception crossed the C ABI: %s\n", g_where.c_str(), e.what());
      return 1;
    }
    g_fail_at = -1;
    if (!g_injected) break;  // the whole scenario ran with fewer than n allocations
    injected++;
  }
  if (n < total) {
    std::fprintf(stderr, "FAIL allocation %ld was never reached: the scenario allocates less than the reference (%ld)\n",
                 n, total);
    g_failures++;
  }
  g_where = "clean run after the injections";
  g_fail_at = -1;
  std::fprintf(stderr, "reference run: %ld allocations\n", total);
  if (const std::string clean = scenario(argv[1]); clean != reference) {
    std::fprintf(stderr, "FAIL a clean run after the injections gives other frames than the reference:\n%s\n---- reference:\n%s\n",
                 clean.c_str(), reference.c_str());
    g_failures++;
  }
  std::printf("%ld allocations in the scenario, %ld allocation points injected, %d failure(s)\n", total, injected,
              g_failures);
  return g_failures ? 1 : 0;
}
