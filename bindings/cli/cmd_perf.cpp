// SPDX-License-Identifier: Apache-2.0
// `stackprov record` and `stackprov perf-import`: sample with perf_event, unwind and symbolize samples offline.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "command.hpp"
#include "print.hpp"
#include "profile_output.hpp"
#include "stackprov/stackprov.h"
#ifdef STACKPROV_HAVE_PPROF
#include "pprof_writer.hpp"
#endif

namespace {

using stackprov_cli::json_escape;

constexpr uint64_t kTruncationSlack = 4096;  // a walk that fails this close to the copy's end was cut short

/// Symbol names cached per (module, link-time address, exact-pc-or-return-address).
class SymbolCache {
 public:
  explicit SymbolCache(sprov_symbolizer* sym) : sym_(sym) {
    names_.push_back("[unknown]");
    linkage_.push_back("");
    starts_.push_back(0);
  }
  /// Name id of frame `i` of `stack` (module list `list`, module index `mod`).
  uint32_t lookup(const sprov_stack* stack, size_t i, const sprov_frame& fr, uint32_t list, bool exact) {
    if (fr.module_index < 0 || fr.module_path == nullptr) return 0;
    if (list >= list_mods_.size()) list_mods_.resize(list + 1);
    auto& mods = list_mods_[list];
    if (static_cast<size_t>(fr.module_index) >= mods.size()) mods.resize(fr.module_index + 1, -1);
    int32_t& mid = mods[fr.module_index];
    if (mid < 0) {
      auto [it, fresh] = module_ids_.emplace(fr.module_path, static_cast<int32_t>(module_ids_.size()));
      mid = it->second;
    }
    const uint64_t key = (static_cast<uint64_t>(mid) << 41) | (exact ? 1ull << 40 : 0) | (fr.module_offset & ((1ull << 40) - 1));
    const bool cacheable = fr.module_offset < (1ull << 40) && mid < (1 << 22);
    if (cacheable) {
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        hits_++;
        return it->second;
      }
    }
    misses_++;
    SPROV_OPTS(sprov_symbol, s);
    uint32_t id = 0;
    if (sprov_symbolizer_frame(sym_, stack, i, &s) == 0 && s.resolver != SPROV_RESOLVER_NONE && s.name) {
      std::string n = s.name;
      for (char& c : n)
        if (c == ';' || c == '\n') c = ':';
      auto [it, fresh] = name_ids_.emplace(n + '\0' + (s.linkage_name ? s.linkage_name : "") + '\0' +
                                               std::to_string(mid) + ':' + std::to_string(s.sym_addr),
                                           static_cast<uint32_t>(names_.size()));
      if (fresh) {
        names_.push_back(n);
        linkage_.push_back(s.linkage_name ? s.linkage_name : "");
        starts_.push_back(s.sym_addr);
      }
      id = it->second;
    }
    if (cacheable) cache_.emplace(key, id);
    return id;
  }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::string>& linkage() const { return linkage_; }
  /// Link-time start address of the symbol behind a name id.
  const std::vector<uint64_t>& starts() const { return starts_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  sprov_symbolizer* sym_;
  std::vector<std::vector<int32_t>> list_mods_;
  std::unordered_map<std::string, int32_t> module_ids_;
  std::unordered_map<uint64_t, uint32_t> cache_;
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::vector<std::string> names_, linkage_;
  std::vector<uint64_t> starts_;
  uint64_t hits_ = 0, misses_ = 0;
};

enum class Format { kFolded, kSvg, kJson, kPprof, kNone };

void import_usage(FILE* f) {
  fprintf(f,
          "usage: stackprov perf-import FILE [--format folded|svg|json|pprof|none] [-o OUT] [--sysroot DIR]\n"
          "                             [--max-frames N] [--title TEXT] [--quiet]\n\n"
          "Reads a perf.data file written by `perf record --call-graph dwarf` (or a capture file written by\n"
          "`stackprov record`), unwinds every sample's copied user stack offline with stackprov's unwinder,\n"
          "symbolizes the frames and writes:\n"
          "  folded  one line per unique stack, `comm;root;...;leaf COUNT` (flamegraph.pl, inferno)\n"
          "  svg     a self-contained flame graph (hover: name and percentage; click: zoom)\n"
          "  json    JSON Lines, one object per sample, frames leaf first\n"
          "  pprof   gzip-compressed pprof profile.proto (one Sample per unique stack, label comm)\n"
          "  none    only the summary on stderr (benchmarks)\n"
          "Identical stacks are aggregated by XXH3 of their pc sequence. Walks cut short by the copied stack\n"
          "size are marked truncated. A summary (samples, lost, truncated, rate) goes to stderr.\n");
}

int cmd_perf_import(int argc, char** argv) {
  const char* in = nullptr;
  const char* out_path = nullptr;
  const char* sysroot = nullptr;
  std::string title = "Flame Graph";
  Format fmt = Format::kFolded;
  uint32_t max_frames = 0;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    auto need = [&](const char* opt) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "stackprov perf-import: %s needs a value\n", opt);
        exit(2);
      }
      return argv[++i];
    };
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      import_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
      const char* v = need(a);
      if (!strcmp(v, "folded")) fmt = Format::kFolded;
      else if (!strcmp(v, "svg")) fmt = Format::kSvg;
      else if (!strcmp(v, "json")) fmt = Format::kJson;
      else if (!strcmp(v, "none")) fmt = Format::kNone;
      else if (!strcmp(v, "pprof")) {
#ifdef STACKPROV_HAVE_PPROF
        fmt = Format::kPprof;
#else
        fprintf(stderr, "stackprov perf-import: this build has no pprof output (Protobuf was not found at build time)\n");
        return 2;
#endif
      }
      else {
        fprintf(stderr, "stackprov perf-import: unknown format '%s' (folded, svg, json, pprof, none)\n", v);
        return 2;
      }
    } else if (!strcmp(a, "-o")) {
      out_path = need(a);
    } else if (!strcmp(a, "--sysroot")) {
      sysroot = need(a);
    } else if (!strcmp(a, "--title")) {
      title = need(a);
    } else if (!strcmp(a, "--max-frames")) {
      max_frames = static_cast<uint32_t>(strtoul(need(a), nullptr, 10));
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      quiet = true;
    } else if (a[0] == '-' && a[1] != 0) {
      fprintf(stderr, "stackprov perf-import: unknown option '%s'\n", a);
      return 2;
    } else if (in == nullptr) {
      in = a;
    } else {
      fprintf(stderr, "stackprov perf-import: more than one input ('%s', '%s')\n", in, a);
      return 2;
    }
  }
  if (in == nullptr) {
    import_usage(stderr);
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  SPROV_OPTS(sprov_context_opts, copts, .sysroot = sysroot);
  sprov_context* ctx = nullptr;
  sprov_profile* prof = nullptr;
  sprov_unwinder* uw = nullptr;
  sprov_symbolizer* sym = nullptr;
  SPROV_OPTS(sprov_unwinder_opts, uopts, .max_frames = max_frames);
  if (sprov_context_new(&copts, &ctx) != 0 || sprov_profile_open(ctx, in, nullptr, &prof) != 0 ||
      sprov_unwinder_new(ctx, &uopts, &uw) != 0 || sprov_symbolizer_new(ctx, nullptr, &sym) != 0) {
    fprintf(stderr, "stackprov perf-import: %s\n", sprov_last_error_message());
    sprov_symbolizer_free(sym);
    sprov_unwinder_free(uw);
    sprov_profile_free(prof);
    sprov_context_free(ctx);
    return 1;
  }
  SPROV_OPTS(sprov_profile_info, info);
  sprov_profile_info(prof, &info);
  if (info.warnings[0] && !quiet) stackprov_cli::print_warnings(stderr, info.warnings);
  FILE* out = stdout;
  if (out_path != nullptr && strcmp(out_path, "-") != 0) {
    out = fopen(out_path, "wb");
    if (out == nullptr) {
      fprintf(stderr, "stackprov perf-import: %s: %s\n", out_path, strerror(errno));
      return 1;
    }
  }
  SymbolCache cache(sym);
  stackprov_cli::StackAggregator agg;
  std::vector<std::string> comms;
  std::unordered_map<std::string, uint32_t> comm_ids;
  std::vector<uint64_t> pcs;
  std::vector<uint32_t> names;
  std::string line;
#ifdef STACKPROV_HAVE_PPROF
  std::vector<stackprov_cli::PprofMapping> pp_mappings;
  std::map<std::pair<std::string, uint64_t>, uint32_t> pp_mapping_ids;  // (path, start) -> id
  stackprov_cli::PprofFrameMappings pp_frames;
#endif
  uint64_t truncated = 0, no_regs = 0, frames_total = 0, failed = 0;
  int rc = 0;
  for (uint64_t i = 0; i < info.samples; i++) {
    SPROV_OPTS(sprov_profile_sample, s);
    if (sprov_profile_sample(prof, i, &s) != 0) {
      if (failed++ == 0) fprintf(stderr, "stackprov perf-import: sample %llu: %s\n", static_cast<unsigned long long>(i),
                                 sprov_last_error_message());
      continue;
    }
    pcs.clear();
    names.clear();
    if (fmt == Format::kJson) {
      line.clear();
      char head[160];
      snprintf(head, sizeof(head), "{\"time\":%llu,\"pid\":%lld,\"tid\":%lld,\"comm\":\"",
               static_cast<unsigned long long>(s.time), static_cast<long long>(s.pid), static_cast<long long>(s.tid));
      line += head;
      line += json_escape(s.comm);
      line += "\",\"frames\":[";
    }
    bool first = true;
    auto json_frame = [&](uint64_t pc, const char* fn, const char* linkage, uint64_t sym_start, const char* module,
                          uint64_t off, const char* method) {
      char b[96];
      snprintf(b, sizeof(b), "%s{\"pc\":\"0x%llx\",\"function\":", first ? "" : ",", static_cast<unsigned long long>(pc));
      line += b;
      if (fn) line += "\"" + json_escape(fn) + "\"";
      else line += "null";
      line += ",\"linkage_name\":";
      if (linkage && *linkage) line += "\"" + json_escape(linkage) + "\"";
      else line += "null";
      if (fn) {
        snprintf(b, sizeof(b), ",\"symbol_start\":\"0x%llx\"", static_cast<unsigned long long>(sym_start));
        line += b;
      }
      line += ",\"module\":";
      if (module) line += "\"" + json_escape(module) + "\"";
      else line += "null";
      snprintf(b, sizeof(b), ",\"module_offset\":\"0x%llx\",\"method\":\"%s\"}", static_cast<unsigned long long>(off), method);
      line += b;
      first = false;
    };
    for (uint32_t k = 0; k < s.kernel_ip_count; k++) {
      pcs.push_back(s.kernel_ips[k]);
      names.push_back(0);
      if (fmt == Format::kJson) json_frame(s.kernel_ips[k], nullptr, nullptr, 0, "[kernel.kallsyms]", s.kernel_ips[k], "kernel");
    }
    bool trunc = false;
    int stop = SPROV_STOP_NONE;
    if (s.snapshot == nullptr) {
      no_regs++;
    } else {
      sprov_stack* stack = nullptr;
      if (sprov_unwinder_unwind(uw, s.snapshot, &stack) != 0) {
        if (failed++ == 0) fprintf(stderr, "stackprov perf-import: sample %llu: %s\n", static_cast<unsigned long long>(i),
                                   sprov_last_error_message());
      } else {
        const size_t n = sprov_stack_frame_count(stack);
        stop = sprov_stack_stop_reason(stack);
        int prev_method = SPROV_METHOD_NONE;
        SPROV_OPTS(sprov_frame, fr);
        for (size_t k = 0; k < n; k++) {
          if (sprov_stack_frame(stack, k, &fr) != 0) break;
          const bool exact = k == 0 || fr.method == SPROV_METHOD_SIGNAL;
          const uint32_t id = cache.lookup(stack, k, fr, s.module_list, exact);
          pcs.push_back(fr.pc);
          names.push_back(id);
#ifdef STACKPROV_HAVE_PPROF
          if (fmt == Format::kPprof && fr.module_index >= 0) {
            SPROV_OPTS(sprov_module_info, mi);
            if (sprov_snapshot_module(s.snapshot, static_cast<size_t>(fr.module_index), &mi) == 0 && mi.path) {
              auto [mit, mfresh] = pp_mapping_ids.emplace(std::make_pair(std::string(mi.path), mi.start),
                                                          static_cast<uint32_t>(pp_mappings.size() + 1));
              if (mfresh) {
                stackprov_cli::PprofMapping m;
                m.start = mi.start;
                m.limit = mi.end;
                m.file_offset = mi.file_offset;
                m.filename = mi.path;
                static const char* hex = "0123456789abcdef";
                for (uint32_t b = 0; b < mi.build_id_len; b++) {
                  m.build_id += hex[mi.build_id[b] >> 4];
                  m.build_id += hex[mi.build_id[b] & 15];
                }
                pp_mappings.push_back(std::move(m));
              }
              pp_frames.emplace(std::make_pair(fr.pc, id), mit->second);
            }
          }
#endif
          if (fmt == Format::kJson)
            json_frame(fr.pc, id ? cache.names()[id].c_str() : nullptr, id ? cache.linkage()[id].c_str() : nullptr,
                       cache.starts()[id], fr.module_path, fr.module_offset, sprov_method_name(fr.method));
          prev_method = fr.method;
        }
        (void)prev_method;
        frames_total += n;
        if ((stop == SPROV_STOP_MEMORY_UNREADABLE || stop == SPROV_STOP_SP_NOT_ADVANCING) && n > 0) {
          const uint64_t stack_end = s.sp + s.stack_size;
          trunc = s.stack_size >= s.stack_requested || fr.sp + kTruncationSlack >= stack_end;
        }
        sprov_stack_free(stack);
      }
    }
    if (trunc) truncated++;
    auto [cit, fresh] = comm_ids.emplace(s.comm, static_cast<uint32_t>(comms.size()));
    if (fresh) comms.push_back(s.comm);
    if (fmt == Format::kJson) {
      line += "],\"truncated\":";
      line += trunc ? "true" : "false";
      line += ",\"stop_reason\":\"";
      line += sprov_stop_reason_name(stop);
      line += "\"}\n";
      fwrite(line.data(), 1, line.size(), out);
    } else if (fmt != Format::kNone) {
      agg.add(cit->second, pcs, names);
    }
  }
  if (fmt == Format::kFolded || fmt == Format::kSvg) {
    auto folded = stackprov_cli::fold(agg, comms, cache.names());
    if (fmt == Format::kFolded) stackprov_cli::write_folded(out, folded);
    else stackprov_cli::write_flamegraph_svg(out, folded, title);
  }
#ifdef STACKPROV_HAVE_PPROF
  if (fmt == Format::kPprof) {
    std::string err;
    if (!stackprov_cli::write_pprof(out, agg, comms, cache.names(), cache.linkage(), pp_mappings, pp_frames, &err)) {
      fprintf(stderr, "stackprov perf-import: pprof: %s\n", err.c_str());
      rc = 1;
    }
  }
#endif
  if (out != stdout && fclose(out) != 0) {
    fprintf(stderr, "stackprov perf-import: %s: write failed\n", out_path);
    rc = 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet || fmt == Format::kNone)
    fprintf(stderr,
            "stackprov perf-import: %llu samples (%llu lost, %llu without user registers, %llu truncated, %llu failed), "
            "%llu frames, %llu unique stacks, %llu hash collisions, symbol cache %llu hits / %llu misses, %.3f s, "
            "%.0f samples/s\n",
            static_cast<unsigned long long>(info.samples), static_cast<unsigned long long>(info.lost),
            static_cast<unsigned long long>(no_regs), static_cast<unsigned long long>(truncated),
            static_cast<unsigned long long>(failed), static_cast<unsigned long long>(frames_total),
            static_cast<unsigned long long>(agg.entries().size()), static_cast<unsigned long long>(agg.collisions()),
            static_cast<unsigned long long>(cache.hits()), static_cast<unsigned long long>(cache.misses()), secs,
            secs > 0 ? static_cast<double>(info.samples) / secs : 0.0);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_profile_free(prof);
  sprov_context_free(ctx);
  return rc;
}

void record_usage(FILE* f) {
  fprintf(f,
          "usage: stackprov record [-F HZ] [--stack-size BYTES] [--duration S] [-o FILE] (-p PID | -- CMD ARGS...)\n\n"
          "Samples a process (all its threads, including threads created later) or a command with\n"
          "perf_event_open: cpu-clock at HZ (default 999), user registers and BYTES of user stack per sample\n"
          "(default 8192, at most 65528), MMAP2/COMM/FORK/EXIT for the module map, build-ids of the mapped\n"
          "modules. Writes a stackprov capture file (default stackprov.cap) that `stackprov perf-import`\n"
          "resolves offline. Lost samples are reported. Stops after --duration, when the target exits, or on\n"
          "Ctrl-C (a started command is then sent SIGTERM).\n");
}

int cmd_record(int argc, char** argv) {
  SPROV_OPTS(sprov_record_opts, o);
  const char* output = "stackprov.cap";
  int cmd_at = -1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    auto need = [&](const char* opt) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "stackprov record: %s needs a value\n", opt);
        exit(2);
      }
      return argv[++i];
    };
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      record_usage(stdout);
      return 0;
    } else if (!strcmp(a, "-F")) {
      o.frequency = static_cast<uint32_t>(strtoul(need(a), nullptr, 10));
    } else if (!strcmp(a, "--stack-size")) {
      o.stack_size = static_cast<uint32_t>(strtoul(need(a), nullptr, 10));
    } else if (!strcmp(a, "--duration")) {
      o.duration_ms = static_cast<uint32_t>(atof(need(a)) * 1000.0);
    } else if (!strcmp(a, "-o")) {
      output = need(a);
    } else if (!strcmp(a, "-p")) {
      o.pid = strtoll(need(a), nullptr, 10);
    } else if (!strcmp(a, "--")) {
      cmd_at = i + 1;
      break;
    } else {
      fprintf(stderr, "stackprov record: unknown option '%s'\n", a);
      return 2;
    }
  }
  std::vector<const char*> cmd;
  if (cmd_at > 0)
    for (int i = cmd_at; i < argc; i++) cmd.push_back(argv[i]);
  if ((o.pid != 0) == !cmd.empty()) {
    fprintf(stderr, "stackprov record: give exactly one of -p PID and -- CMD\n");
    return 2;
  }
  cmd.push_back(nullptr);
  if (cmd.size() > 1) o.argv = cmd.data();
  o.output = output;
  sprov_context* ctx = nullptr;
  if (sprov_context_new(nullptr, &ctx) != 0) {
    fprintf(stderr, "stackprov record: %s\n", sprov_last_error_message());
    return 1;
  }
  SPROV_OPTS(sprov_record_result, r);
  int rc = sprov_record(ctx, &o, &r);
  sprov_context_free(ctx);
  if (rc != 0) {
    fprintf(stderr, "stackprov record: %s\n", sprov_last_error_message());
    return 1;
  }
  fprintf(stderr, "stackprov record: %llu samples, %llu lost, %llu threads -> %s\n",
          static_cast<unsigned long long>(r.samples), static_cast<unsigned long long>(r.lost),
          static_cast<unsigned long long>(r.threads), output);
  return 0;
}

}  // namespace

STACKPROV_COMMAND("perf-import", "unwind and symbolize perf.data / capture-file samples: folded, svg, json, pprof", cmd_perf_import);
STACKPROV_COMMAND("record", "sample a process or command with perf_event into a capture file", cmd_record);
