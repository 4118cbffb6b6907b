// SPDX-License-Identifier: Apache-2.0
// Threads of a trace unwound and named with a context's policy; a stored trace resolved again.
#include <algorithm>
#include <map>
#include <optional>
#include <thread>

#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "pipeline/tail_call_frames.hpp"
#include "pipeline/trace.hpp"
#include "runtime/python.hpp"
#include "symbolize/demangle.hpp"

#include "stackprov/stackprov.h"

namespace stackprov::pipeline {

namespace {

/// One frame of a stack as the trace records it, with the resolver chain's answer (`res`, named
/// by `names`, innermost first).
trace::Frame to_trace_frame(const StackView& st, size_t i, const symbolize::Resolution& res,
                            const std::vector<std::string>& names) {
  trace::Frame f;
  const unwind::Frame& fr = (*st.frames)[i];
  f.ip = fr.pc;
  if (fr.module_index >= 0 && static_cast<size_t>(fr.module_index) < st.modules->size()) {
    const memory::SnapshotModule& m = (*st.modules)[fr.module_index];
    f.module_path = m.path;
    f.module_offset = fr.pc - m.load_bias;
    if (m.build_id.len) {
      f.module_build_id = evidence::hex_encode(m.build_id.bytes, m.build_id.len);
      if (m.build_id.kind != IdKind::kElfBuildId) f.module_id_kind = id_kind_name(m.build_id.kind);
    }
  }
  f.symbol_offset_known = false;  // until the resolver gives the function's start
  f.unwind_method = method_name(static_cast<int>(fr.method));
  if (fr.flags & SPROV_FRAME_JIT) f.unwind_method += "+jit";  // a pc in the perf map's JIT code
  if (fr.flags & SPROV_FRAME_INFERRED) f.unwind_method += "+inferred";  // a tail-call frame: not on the stack
  f.resolver = "none";
  if (res.resolver == symbolize::ResolvedBy::kNone) return f;
  f.resolver = res.provenance.empty() ? resolver_name(static_cast<int>(res.resolver)) : res.provenance;
  f.source = res.source;
  // A file read through the process's root is recorded by its path there (/proc/PID/root/usr/...
  // means nothing once the process is gone).
  if (f.source.rfind("/proc/", 0) == 0) {
    const size_t root = f.source.find("/root/");
    if (root != std::string::npos && f.source.find_first_not_of("0123456789", 6) == root) f.source = f.source.substr(root + 5);
  }
  f.bundle_sha256 = bare_sha256(res.bundle_digest);
  const symbolize::ResolvedFrame& phys = res.frames.back();
  f.symbol = names.back();
  if (phys.has_start_address && f.module_offset >= phys.start_address) {
    f.symbol_offset = f.module_offset - phys.start_address;
    f.symbol_offset_known = true;
  }
  // Source lines and inline chains: the one rule (dwarf, debuginfod, bundle, gopclntab).
  if (!resolver_gives_lines(static_cast<int>(res.resolver))) return f;
  f.file = phys.file;
  f.line = phys.line;
  f.column = phys.column;
  // The resolver lists the innermost inlined function first; the trace, outermost first.
  for (size_t k = res.frames.size() - 1; k-- > 0;) {
    trace::InlineFrame in;
    in.function = names[k];
    in.file = res.frames[k].file;
    in.line = res.frames[k].line;
    in.column = res.frames[k].column;
    f.inline_chain.push_back(std::move(in));
  }
  return f;
}

/// A Python frame of a snapshot's runtime section (doc/runtime-frames.md "Traces") as a trace frame:
/// no instruction pointer and no module; its function the code object's qualified name, its file
/// and line as read at capture.
trace::Frame python_trace_frame(const memory::SnapshotRuntime::Frame& p) {
  trace::Frame f;
  f.symbol = p.qualname;
  f.symbol_offset_known = false;
  f.file = p.file;
  f.line = p.line;
  f.resolver = "python";
  f.unwind_method = "runtime";
  return f;
}

/// `natives` (one per walked frame) with the Python frames of `s`'s runtime section each right
/// before the evaluation-loop activation that runs it, as `stack` interleaves them.
std::vector<trace::Frame> with_python_frames(const memory::Snapshot& s, const std::vector<unwind::Frame>& walked,
                                             std::vector<trace::Frame> natives) {
  const memory::SnapshotRuntime& rt = s.runtime;
  if (!rt.has_thread || rt.frames.empty()) return natives;
  std::vector<bool> evals, entries;
  for (const unwind::Frame& f : walked) {
    // An inferred tail-call frame is no activation on the stack: it runs no interpreter frames.
    bool eval = f.module_index >= 0 && f.method != unwind::Method::kRuntime && !(f.flags & unwind::Frame::kFlagInferred);
    const uint64_t at = f.lookup_prev ? f.pc - 1 : f.pc;
    bool in = false;
    for (const memory::SnapshotRuntime::Range& r : rt.eval) in = in || (at >= r.start && at < r.end);
    evals.push_back(eval && in);
  }
  for (const memory::SnapshotRuntime::Frame& p : rt.frames) entries.push_back(p.is_entry);
  const std::vector<size_t> taken = runtime::python_frames_per_native(evals, entries);
  std::vector<trace::Frame> out;
  out.reserve(natives.size() + rt.frames.size());
  size_t next = 0;
  for (size_t k = 0; k < natives.size(); ++k) {
    for (const size_t end = next + (k < taken.size() ? taken[k] : 0); next < end; ++next)
      out.push_back(python_trace_frame(rt.frames[next]));
    out.push_back(std::move(natives[k]));
  }
  for (; next < rt.frames.size(); ++next) out.push_back(python_trace_frame(rt.frames[next]));
  return out;
}

/// A module table of one module list, with what its walks' stacks name their frames by.
struct Table {
  unwind::ModuleTable table;
  std::vector<memory::SnapshotModule> modules;
  std::vector<std::shared_ptr<unwind::LoadedModule>> loaded;
};

/// One worker's unwinder and namer: module tables by module list, a rule cache, a resolver chain.
class ThreadResolver {
 public:
  ThreadResolver(Session& s, uint32_t max_frames, std::shared_ptr<const symbolize::PerfMap> jit, bool tail_calls)
      : session_(s), jit_(std::move(jit)), chain_(resolver_chain(s.ctx.config())), tail_calls_(tail_calls) {
    opts_.max_frames = max_frames ? max_frames : 256;
    opts_.scan_words = 64;
    scratch_.frames.reserve(opts_.max_frames);
  }

  Result<std::vector<trace::Frame>> frames(const memory::Snapshot& s) {
    if (Status st = check_unwindable(s); !st) return st.error();
    Table& t = table(s);
    // JIT code: a trace's captured entries stand for the process's perf map (read offline too).
    std::shared_ptr<const symbolize::PerfMap> jit = jit_;
    if (!jit && s.pid > 0 && !session_.ctx.config().offline) jit = maps_.get(s.pid);
    unwind::WalkOptions o = opts_;
    o.jit_ranges = jit ? &jit->ranges() : nullptr;
    unwind::walk_snapshot(s, t.table, cache_, o, &scratch_);
    const std::vector<unwind::Frame>* walked = &scratch_.frames;
    symbolize::DwarfResolver* dwarf = chain_->dwarf();
    const bool offline = session_.ctx.config().offline;
    if (tail_calls_ && ((dwarf != nullptr && !offline) || chain_->bundles().enabled())) {
      // gdb's tail-call frames from the modules' DWARF call sites, as `stack` adds them: a module's
      // file when it is there (online), else its bundle's call-site section.
      const CallSitesOf sites_of = [&](int32_t index) -> std::shared_ptr<ModuleCallSites> {
        const size_t i = static_cast<size_t>(index);
        if (dwarf != nullptr && !offline) {
          auto mod = naming_module(session_, t.modules[i], i < t.loaded.size() ? t.loaded[i] : nullptr, s.module_root);
          if (mod.ok() && mod.value()->object()) return dwarf_call_sites(*dwarf, mod.value()->object());
        }
        return bundle_sites_.get(chain_->bundles(), t.modules[i]);
      };
      with_tails_ = with_tail_call_frames(scratch_.frames, t.modules, sites_of);
      walked = &with_tails_;
    }
    StackView view;
    view.frames = walked;
    view.modules = &t.modules;
    view.loaded = &t.loaded;
    view.module_root = s.module_root;
    view.pid = s.pid;
    view.jit = jit;
    const bool demangle = chain_->policy().demangle;
    std::vector<trace::Frame> out;
    out.reserve(walked->size());
    symbolize::Resolution res;
    std::vector<std::string> names;
    for (size_t k = 0; k < walked->size(); ++k) {
      resolve_frame(session_, *chain_, maps_, view, k, symbolize::SymtabPolicy::kWithDebugFile, &res);
      names.resize(res.frames.size());
      for (size_t n = 0; n < res.frames.size(); ++n) {
        const std::string& raw = res.frames[n].function;
        names[n] = !demangle || !symbolize::maybe_mangled(raw) ? raw : demangled(raw, false);
      }
      out.push_back(to_trace_frame(view, k, res, names));
    }
    return with_python_frames(s, *walked, std::move(out));
  }

 private:
  /// The table of `s`'s module list: made once per list (key 0: every time).
  Table& table(const memory::Snapshot& s) {
    const uint64_t key = modules_key(s);
    auto it = key ? tables_.find(key) : tables_.end();
    if (it != tables_.end() && it->second.modules.size() == s.modules.size()) return it->second;
    Table& t = tables_[key];
    t = Table{};
    t.modules = s.modules;
    load_module_table(session_, s, t.table, t.loaded);
    t.table.key = key;
    return t;
  }

  Session& session_;
  std::shared_ptr<const symbolize::PerfMap> jit_;
  std::unique_ptr<symbolize::ResolverChain> chain_;
  symbolize::PerfMaps maps_;
  unwind::WalkOptions opts_;
  unwind::RuleCache cache_;
  unwind::WalkResult scratch_;
  bool tail_calls_ = false;
  std::vector<unwind::Frame> with_tails_;
  BundleCallSitesCache bundle_sites_;
  std::map<uint64_t, Table> tables_;
};

}  // namespace

Result<std::vector<trace::Thread>> resolve_threads(Session& session, const std::vector<const memory::Snapshot*>& snaps,
                                                   uint32_t max_frames, uint32_t workers,
                                                   std::shared_ptr<const symbolize::PerfMap> jit, bool tail_calls) {
  std::vector<trace::Thread> out(snaps.size());
  std::vector<std::optional<Error>> errors(snaps.size());
  workers = std::max<uint32_t>(1, std::min<uint32_t>(workers, static_cast<uint32_t>(std::max<size_t>(1, snaps.size()))));
  auto work = [&](uint32_t w) {
    ThreadResolver r(session, max_frames, jit, tail_calls);
    for (size_t i = w; i < snaps.size(); i += workers) {
      const int64_t tid = snaps[i]->tid;
      out[i].tid = static_cast<uint64_t>(tid);
      auto frames = r.frames(*snaps[i]);
      if (!frames) {
        errors[i] = make_error(frames.error().code, "thread %lld: %s", static_cast<long long>(tid),
                               frames.error().message.c_str());
        continue;
      }
      out[i].frames = std::move(frames.value());
    }
  };
  if (workers == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (uint32_t w = 0; w < workers; ++w) pool.emplace_back(work, w);
    for (auto& t : pool) t.join();
  }
  for (auto& e : errors)
    if (e) return *e;
  return out;
}

Result<std::vector<trace::CapturedThread>> captured_threads(const trace::Trace& t, trace::CapturedJit* jit,
                                                            trace::CapturedKernel* kernel) {
  auto raw = trace::trace_data(t);
  if (!raw) return raw.error();
  return trace::deserialize_capture(raw->data(), raw->size(), jit, kernel);
}

std::shared_ptr<const symbolize::PerfMap> captured_perf_map(const trace::CapturedJit& jit) {
  if (jit.entries.empty()) return nullptr;
  return symbolize::PerfMap::from_entries(jit.path, jit.entries);
}

bool frame_covered(const trace::Frame& f) {
  if (f.symbol.empty()) return false;
  // A frame whose resolver gives lines is covered only with them (resolver_gives_lines).
  const bool dwarf_class = f.resolver == "bundle" || f.resolver == "dwarf" || f.resolver.rfind("debuginfod", 0) == 0 ||
                           f.resolver == "gopclntab";
  return !dwarf_class || (!f.file.empty() && f.line != 0);
}

namespace {

/// The indices of a thread's unwound (not inferred) frames, in order.
std::vector<size_t> unwound(const std::vector<trace::Frame>& frames) {
  std::vector<size_t> out;
  for (size_t i = 0; i < frames.size(); ++i)
    if (!trace::frame_inferred(frames[i])) out.push_back(i);
  return out;
}

}  // namespace

void carry_symbol_offsets(const std::vector<trace::Thread>& before, std::vector<trace::Thread>& after) {
  std::map<uint64_t, const trace::Thread*> by_tid;
  for (const auto& t : before) by_tid[t.tid] = &t;
  for (auto& t : after) {
    auto it = by_tid.find(t.tid);
    if (it == by_tid.end()) continue;
    const auto& old = it->second->frames;
    // The same site named the same way: the old frame's known offset.
    auto carry = [](trace::Frame& f, const trace::Frame& o) {
      if (!f.symbol_offset_known && o.symbol_offset_known && f.symbol == o.symbol && f.module_path == o.module_path &&
          f.module_offset == o.module_offset) {
        f.symbol_offset = o.symbol_offset;
        f.symbol_offset_known = true;
      }
    };
    const std::vector<size_t> a = unwound(t.frames), b = unwound(old);
    for (size_t k = 0; k < a.size() && k < b.size(); ++k) carry(t.frames[a[k]], old[b[k]]);
    // The inferred frames themselves.
    for (size_t i = 0; i < t.frames.size() && i < old.size(); ++i)
      if (trace::frame_inferred(t.frames[i]) && trace::frame_inferred(old[i])) carry(t.frames[i], old[i]);
  }
}

void carry_inferred_frames(const std::vector<trace::Thread>& before, std::vector<trace::Thread>& after) {
  std::map<uint64_t, const trace::Thread*> by_tid;
  for (const auto& t : before) by_tid[t.tid] = &t;
  for (auto& t : after) {
    auto it = by_tid.find(t.tid);
    if (it == by_tid.end()) continue;
    const auto& old = it->second->frames;
    if (unwound(t.frames).size() != t.frames.size() || unwound(old).size() == old.size()) continue;
    // Old unwound frame k's ip -> the inferred frames recorded after it (before the next unwound one).
    std::vector<trace::Frame> out;
    out.reserve(t.frames.size() + old.size());
    size_t k_old = 0;  // index into old
    for (size_t i = 0; i < t.frames.size(); ++i) {
      out.push_back(t.frames[i]);
      // The recorded unwound frame with this frame's rank.
      while (k_old < old.size() && trace::frame_inferred(old[k_old])) ++k_old;
      if (k_old >= old.size()) continue;
      const bool same_here = old[k_old].ip == t.frames[i].ip;
      size_t j = k_old + 1;
      while (j < old.size() && trace::frame_inferred(old[j])) ++j;
      const bool same_next = j < old.size() && i + 1 < t.frames.size() && old[j].ip == t.frames[i + 1].ip;
      if (same_here && same_next)
        for (size_t m = k_old + 1; m < j; ++m) out.push_back(old[m]);
      k_old = j;
    }
    t.frames = std::move(out);
  }
}

Result<std::string> resolve_trace(Session& session, trace::Store& store, const std::string& trace_id,
                                  const std::vector<std::string>& given, bool offline) {
  auto t = store.get_trace(trace_id);
  if (!t) return t.error();
  trace::CapturedJit cjit;
  auto cap = captured_threads(t.value(), &cjit);
  if (!cap) return cap.error();

  auto staging = BundleStaging::create();
  if (!staging) return staging.error();
  BundleStaging& stg = *staging.value();
  const ContextConfig& cfg = session.ctx.config();
  // The bundles given, then the trace's own, then every bundle of the store for its modules.
  for (const std::string& g : given) {
    if (g.rfind("sha256:", 0) == 0) {
      Status st = stg.add_from_trace_store(store, g);
      if (!st && st.error().code == SPROV_ERR_NOT_FOUND && cfg.has_bundle_store) {
        if (auto bs = symbolize::BundleStore::open(cfg.bundle_store, false)) st = stg.add_from_bundle_store(bs.value(), g);
      }
      if (!st) return make_error(st.error().code, "bundle '%s': %s", g.c_str(), st.error().message.c_str());
    } else {
      auto h = stg.add_file(g);
      if (!h) return h.error();
      // Kept with the trace, so that replay finds it too.
      trace::SymbolBundleRow row;
      row.sha256 = h.value();
      // The trace's platform (the bundle names its modules); a trace stored without one is Linux's.
      row.os = t.value().platform.empty() ? platform_of(IdKind::kNone) : t.value().platform;
      auto bytes = read_text_file(g, trace::kMaxDataBytes);
      if (!bytes) return bytes.error();
      row.blob.assign(bytes->begin(), bytes->end());
      auto idx = bundle_index_json(row.blob.data(), row.blob.size());
      if (!idx) return idx.error();
      row.index_json = idx.value();
      if (Status st = store.put_symbol_bundle(row); !st) return st.error();
    }
  }
  std::vector<std::string> ids;
  for (const auto& c : cap.value())
    for (const auto& m : c.snapshot.modules)
      if (!m.build_id.empty()) ids.push_back(m.build_id.hex());
  auto more = store_bundles_for(store, ids);
  if (!more) return more.error();
  std::vector<std::string> all = trace_bundles(t.value());
  all.insert(all.end(), more->begin(), more->end());
  for (const auto& b : all) {
    Status st = stg.add_from_trace_store(store, b);
    if (!st) return st.error();
  }
  // Offline: bundles only, no module file, debug file or network.
  std::unique_ptr<Session> rs = derived_session(session, stg.dir(), offline, 0);
  std::vector<const memory::Snapshot*> snaps;
  for (const auto& c : cap.value()) snaps.push_back(&c.snapshot);
  auto threads = resolve_threads(*rs, snaps, 256, 1, captured_perf_map(cjit), true);
  if (!threads) return threads.error();
  for (size_t i = 0; i < threads->size() && i < t->threads.size(); ++i) (*threads)[i].name = t->threads[i].name;
  carry_inferred_frames(t->threads, threads.value());
  carry_symbol_offsets(t->threads, threads.value());
  std::string bundle = t->symbol_bundle_sha256;
  if (bundle.empty() && !stg.bundles().empty()) bundle = stg.bundles().front();
  if (Status st = store.replace_frames(trace_id, threads.value(), bundle); !st) return st.error();

  size_t frames = 0, named = 0, lines = 0, covered = 0;
  std::map<std::string, size_t> resolvers;
  for (const auto& th : threads.value())
    for (const auto& f : th.frames) {
      ++frames;
      if (!f.symbol.empty()) ++named;
      if (!f.file.empty() && f.line) ++lines;
      if (frame_covered(f)) ++covered;
      ++resolvers[f.resolver];
    }
  evidence::Json j;
  j["trace_id"] = trace_id;
  j["frames"] = frames;
  j["named"] = named;
  j["with_lines"] = lines;
  j["offline"] = offline;
  j["covered"] = covered;
  j["symbol_coverage_pct"] = frames ? 100.0 * static_cast<double>(covered) / static_cast<double>(frames) : 0.0;
  j["resolvers"] = evidence::Json::object();
  for (const auto& [k, v] : resolvers) j["resolvers"][k] = v;
  j["bundles"] = evidence::Json::array();
  for (const auto& b : stg.bundles()) j["bundles"].push_back("sha256:" + b);
  return j.dump(-1, ' ', false, evidence::Json::error_handler_t::replace);
}

}  // namespace stackprov::pipeline
