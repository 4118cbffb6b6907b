// SPDX-License-Identifier: Apache-2.0
// bench/cross: offline unwinding of foreign (arm64, mips32 BE/LE) core files on the host, in ns/frame.
// Each core is opened with sprov_process_open_core (sysroot /usr/<triple>); every thread snapshot is
// unwound N times with one sprov_unwinder (warm: rule cache filled) and with a fresh unwinder per
// walk (cold: empty rule cache; the context, hence its module cache, is shared). Public ABI only.
//   bench_cross [--iters N] [--cold-iters N] [--out FILE.json] [--x86-json unwind.json]
//               LABEL:CORE:EXE:SYSROOT...   (SYSROOT empty: none)
#include <stackprov/stackprov.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Input {
  std::string label, core, exe, sysroot;
};

struct Result {
  size_t snapshots = 0;
  uint64_t frames_per_pass = 0;  // frames of one walk over every snapshot
  double warm_ns = 0, cold_ns = 0;
  uint64_t warm_frames = 0, cold_frames = 0;
  std::vector<std::string> cores;  // "name: N frames (stop)"
};

uint64_t walk(sprov_unwinder* uw, const sprov_snapshot* snap, int* stop) {
  sprov_stack* st = nullptr;
  if (sprov_unwinder_unwind(uw, snap, &st) != 0) return 0;
  uint64_t n = sprov_stack_frame_count(st);
  if (stop != nullptr) *stop = sprov_stack_stop_reason(st);
  sprov_stack_free(st);
  return n;
}

bool bench_core(const Input& in, unsigned iters, unsigned cold_iters, Result* r) {
  SPROV_OPTS(sprov_context_opts, co, .sysroot = in.sysroot.empty() ? nullptr : in.sysroot.c_str());
  sprov_context* ctx = nullptr;
  if (sprov_context_new(&co, &ctx) != 0) return false;
  SPROV_OPTS(sprov_process_opts, po, .exe = in.exe.c_str());
  sprov_process* proc = nullptr;
  if (sprov_process_open_core(ctx, in.core.c_str(), &po, &proc) != 0) {
    fprintf(stderr, "bench_cross: %s: %s\n", in.core.c_str(), sprov_last_error_message());
    sprov_context_free(ctx);
    return false;
  }
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = 256);
  sprov_unwinder* uw = nullptr;
  sprov_unwinder_new(ctx, &uo, &uw);
  size_t nthreads = sprov_process_thread_count(proc);
  uint64_t pass_frames = 0;
  int stop = 0;
  for (size_t t = 0; t < nthreads; ++t) pass_frames += walk(uw, sprov_process_thread(proc, t), &stop);  // warm-up
  const char* base = strrchr(in.core.c_str(), '/');
  char line[512];
  snprintf(line, sizeof line, "%s: %zu thread(s), %llu frames (stop %s)", base ? base + 1 : in.core.c_str(),
           nthreads, static_cast<unsigned long long>(pass_frames), sprov_stop_reason_name(stop));
  r->cores.push_back(line);
  r->snapshots += nthreads;
  r->frames_per_pass += pass_frames;

  uint64_t frames = 0;
  auto t0 = Clock::now();
  for (unsigned i = 0; i < iters; ++i)
    for (size_t t = 0; t < nthreads; ++t) frames += walk(uw, sprov_process_thread(proc, t), nullptr);
  r->warm_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  r->warm_frames += frames;
  sprov_unwinder_free(uw);

  frames = 0;
  t0 = Clock::now();
  for (unsigned i = 0; i < cold_iters; ++i) {
    for (size_t t = 0; t < nthreads; ++t) {
      sprov_unwinder* fresh = nullptr;
      sprov_unwinder_new(ctx, &uo, &fresh);
      frames += walk(fresh, sprov_process_thread(proc, t), nullptr);
      sprov_unwinder_free(fresh);
    }
  }
  r->cold_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  r->cold_frames += frames;
  sprov_process_free(proc);
  sprov_context_free(ctx);
  return true;
}

/// The stackprov figures of bench/unwind's JSON (x86_64, live snapshots), as a JSON fragment.
std::string x86_figures(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str(), out;
  for (const char* key : {"stackprov_warm_ns_per_frame", "stackprov_cold_ns_per_frame"}) {
    size_t p = s.find(std::string("\"") + key + "\"");
    if (p == std::string::npos) continue;
    p = s.find(':', p);
    size_t e = s.find_first_of(",}\n", p);
    if (!out.empty()) out += ", ";
    out += std::string("\"") + key + "\": " + s.substr(p + 1, e - p - 1);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned iters = 20000, cold_iters = 2000;
  std::string out, x86_json;
  std::vector<Input> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) {
      iters = static_cast<unsigned>(atoi(argv[++i]));
    } else if (a == "--cold-iters" && i + 1 < argc) {
      cold_iters = static_cast<unsigned>(atoi(argv[++i]));
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--x86-json" && i + 1 < argc) {
      x86_json = argv[++i];
    } else {
      Input in;
      std::vector<std::string> parts;
      std::stringstream ss(a);
      std::string p;
      while (std::getline(ss, p, ':')) parts.push_back(p);
      if (parts.size() < 3) {
        fprintf(stderr, "usage: bench_cross [--iters N] [--cold-iters N] [--out F.json] [--x86-json F] "
                        "LABEL:CORE:EXE[:SYSROOT]...\n");
        return 2;
      }
      in.label = parts[0], in.core = parts[1], in.exe = parts[2];
      if (parts.size() > 3) in.sysroot = parts[3];
      inputs.push_back(in);
    }
  }
  if (inputs.empty()) {
    fprintf(stderr, "bench_cross: no cores\n");
    return 2;
  }
  std::vector<std::string> order;
  std::map<std::string, Result> results;
  int failed = 0;
  for (const Input& in : inputs) {
    if (!results.count(in.label)) order.push_back(in.label);
    if (!bench_core(in, iters, cold_iters, &results[in.label])) ++failed;
  }
  printf("%-10s %6s %12s %16s %16s\n", "arch", "cores", "frames/pass", "warm ns/frame", "cold ns/frame");
  for (const std::string& l : order) {
    Result& r = results[l];
    double w = r.warm_frames ? r.warm_ns / static_cast<double>(r.warm_frames) : 0;
    double c = r.cold_frames ? r.cold_ns / static_cast<double>(r.cold_frames) : 0;
    printf("%-10s %6zu %12llu %16.1f %16.1f\n", l.c_str(), r.snapshots,
           static_cast<unsigned long long>(r.frames_per_pass), w, c);
    for (const std::string& s : r.cores) printf("    %s\n", s.c_str());
  }
  std::string x86 = x86_json.empty() ? "" : x86_figures(x86_json);
  if (!x86.empty()) printf("x86_64 (bench/unwind, live snapshots): %s\n", x86.c_str());
  if (!out.empty()) {
    FILE* f = fopen(out.c_str(), "w");
    if (f == nullptr) {
      perror(out.c_str());
      return 1;
    }
    fprintf(f, "{\n  \"iters\": %u,\n  \"cold_iters\": %u,\n  \"arches\": {", iters, cold_iters);
    for (size_t i = 0; i < order.size(); ++i) {
      Result& r = results[order[i]];
      fprintf(f, "%s\n    \"%s\": {\"snapshots\": %zu, \"frames_per_pass\": %llu, \"warm_ns_per_frame\": %.2f, "
                 "\"cold_ns_per_frame\": %.2f}",
              i ? "," : "", order[i].c_str(), r.snapshots, static_cast<unsigned long long>(r.frames_per_pass),
              r.warm_frames ? r.warm_ns / static_cast<double>(r.warm_frames) : 0,
              r.cold_frames ? r.cold_ns / static_cast<double>(r.cold_frames) : 0);
    }
    fprintf(f, "\n  },\n  \"x86_64_bench_unwind\": {%s},\n  \"failed_cores\": %d\n}\n", x86.c_str(), failed);
    fclose(f);
    printf("wrote %s\n", out.c_str());
  }
  return failed ? 1 : 0;
}
