// SPDX-License-Identifier: Apache-2.0
// bench/cross: offline unwinding of foreign (arm64, mips32 BE/LE) core files on the host, in ns/frame.
// Each core is opened with sprov_process_open_core (sysroot /usr/<triple>); every thread snapshot is
// unwound N times with one sprov_unwinder (warm: rule cache filled) and with a fresh unwinder per
// walk (cold: empty rule cache; the context, hence its module cache, is shared). Public ABI only.
// Every walk must end with end_of_stack (the fixture's chain ends at _start / the thread entry),
// and the cores of one build and mode (same fixture, same chain) must give the same number of
// frames on every arch; otherwise the benchmark fails. The x86_64 figures are those of the
// x86_64 cores given in the same run (nothing is read from other benchmarks).
//   bench_cross [--iters N] [--cold-iters N] [--out FILE.json]
//               LABEL:CORE:EXE:SYSROOT...   (SYSROOT empty: none)
#include <stackprov/stackprov.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

/// Frame counts by "<build>-<mode>" (the core's name without its arch) and arch, for the cross-arch check.
std::map<std::string, std::map<std::string, uint64_t>> g_chain_frames;
std::vector<std::string> g_failures;

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
  const char* base = strrchr(in.core.c_str(), '/');
  const std::string core_name = base ? base + 1 : in.core;
  if (nthreads == 0) g_failures.push_back(core_name + ": no threads");
  for (size_t t = 0; t < nthreads; ++t) {  // warm-up, and the answers checked
    pass_frames += walk(uw, sprov_process_thread(proc, t), &stop);
    if (stop != SPROV_STOP_END_OF_STACK)
      g_failures.push_back(core_name + ": thread " + std::to_string(t) + " stopped with " +
                           sprov_stop_reason_name(stop) + ", not end_of_stack");
  }
  // "<label>-<build>-<mode>.core" -> "<build>-<mode>"
  std::string key = core_name;
  if (key.compare(0, in.label.size() + 1, in.label + "-") == 0) key = key.substr(in.label.size() + 1);
  if (key.size() > 5 && key.compare(key.size() - 5, 5, ".core") == 0) key.resize(key.size() - 5);
  g_chain_frames[key][in.label] = pass_frames;
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

}  // namespace

int main(int argc, char** argv) {
  unsigned iters = 20000, cold_iters = 2000;
  std::string out;
  std::vector<Input> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) {
      iters = static_cast<unsigned>(atoi(argv[++i]));
    } else if (a == "--cold-iters" && i + 1 < argc) {
      cold_iters = static_cast<unsigned>(atoi(argv[++i]));
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else {
      Input in;
      std::vector<std::string> parts;
      std::stringstream ss(a);
      std::string p;
      while (std::getline(ss, p, ':')) parts.push_back(p);
      if (parts.size() < 3) {
        fprintf(stderr, "usage: bench_cross [--iters N] [--cold-iters N] [--out F.json] "
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
  for (const auto& [key, by_arch] : g_chain_frames) {
    if (by_arch.size() < 2) continue;
    const uint64_t first = by_arch.begin()->second;
    for (const auto& [arch, frames] : by_arch)
      if (frames != first) {
        std::string line = key + ": frame counts differ across arches:";
        for (const auto& [a2, f2] : by_arch) line += " " + a2 + " " + std::to_string(f2);
        g_failures.push_back(line);
        break;
      }
  }
  auto warm_of = [&](const std::string& l) {
    const Result& r = results[l];
    return r.warm_frames ? r.warm_ns / static_cast<double>(r.warm_frames) : 0.0;
  };
  auto cold_of = [&](const std::string& l) {
    const Result& r = results[l];
    return r.cold_frames ? r.cold_ns / static_cast<double>(r.cold_frames) : 0.0;
  };
  const bool have_x86 = results.count("x86_64") && warm_of("x86_64") > 0;
  printf("%-10s %6s %12s %16s %16s %18s\n", "arch", "cores", "frames/pass", "warm ns/frame", "cold ns/frame",
         "warm vs x86_64");
  for (const std::string& l : order) {
    Result& r = results[l];
    double w = warm_of(l), c = cold_of(l);
    printf("%-10s %6zu %12llu %16.1f %16.1f %17.2fx\n", l.c_str(), r.snapshots,
           static_cast<unsigned long long>(r.frames_per_pass), w, c, have_x86 ? w / warm_of("x86_64") : 0.0);
    for (const std::string& s : r.cores) printf("    %s\n", s.c_str());
  }
  for (const std::string& f : g_failures) printf("FAIL %s\n", f.c_str());
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
                 "\"cold_ns_per_frame\": %.2f, \"warm_over_x86_64\": %.2f, \"cores\": [",
              i ? "," : "", order[i].c_str(), r.snapshots, static_cast<unsigned long long>(r.frames_per_pass),
              warm_of(order[i]), cold_of(order[i]), have_x86 ? warm_of(order[i]) / warm_of("x86_64") : 0.0);
      for (size_t k = 0; k < r.cores.size(); ++k) fprintf(f, "%s\"%s\"", k ? ", " : "", r.cores[k].c_str());
      fprintf(f, "]}");
    }
    fprintf(f, "\n  },\n  \"failed_cores\": %d,\n  \"failures\": [", failed);
    for (size_t k = 0; k < g_failures.size(); ++k) fprintf(f, "%s\"%s\"", k ? ", " : "", g_failures[k].c_str());
    fprintf(f, "]\n}\n");
    fclose(f);
    printf("wrote %s\n", out.c_str());
  }
  return failed || !g_failures.empty() ? 1 : 0;
}
