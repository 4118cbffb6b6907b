// SPDX-License-Identifier: Apache-2.0
// Capture of a process's threads into a stored trace: frames with provenance, captured data, bundle.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "core/context.hpp"
#include "pipeline/bundle_build.hpp"
#include "pipeline/trace.hpp"

namespace stackprov::pipeline {

namespace {

std::string thread_name(int64_t pid, int64_t tid) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%lld/task/%lld/comm", static_cast<long long>(pid), static_cast<long long>(tid));
  std::ifstream in(path);
  std::string name;
  if (in) std::getline(in, name);
  if (name.size() > 256) name.resize(256);
  return name;
}

/// The entries of `map` that cover a pc of a frame outside every module (its pc, or pc - 1
/// for a return address), each once, in address order: the bounded part of a perf map that a
/// trace keeps.
trace::CapturedJit jit_entries(const symbolize::PerfMap* map, const std::vector<trace::Thread>& threads) {
  trace::CapturedJit out;
  if (!map) return out;
  out.path = map->path();
  std::set<uint64_t> seen;
  for (const auto& th : threads)
    for (const auto& f : th.frames) {
      if (!f.module_path.empty()) continue;
      for (uint64_t pc : {f.ip, f.ip - 1})
        if (const symbolize::PerfMap::Entry* e = map->find(pc); e && seen.insert(e->start).second)
          out.entries.push_back(*e);
    }
  std::sort(out.entries.begin(), out.entries.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return out;
}

/// The main executable's build-id: the module of the main thread's outermost frame that has a
/// module (_start), else the lowest-addressed module with a build-id.
std::string main_build_id(const std::vector<trace::Thread>& threads, const memory::Snapshot* s0, int64_t pid) {
  const trace::Thread* main = nullptr;
  for (const auto& t : threads)
    if (static_cast<int64_t>(t.tid) == pid) main = &t;
  if (!main && !threads.empty()) main = &threads.front();
  if (main)
    for (auto it = main->frames.rbegin(); it != main->frames.rend(); ++it)
      if (!it->module_path.empty() && !it->module_build_id.empty()) return it->module_build_id;
  if (s0)
    for (const auto& m : s0->modules)
      if (!m.build_id.empty() && m.path != kVdsoName) return m.build_id.hex();
  return "";
}

/// The trace's bundle (opts.bundle): built, signed and indexed in a private staging store, copied
/// by content into the session's bundle store with the store's bundles of the other modules, and
/// the trace's frames named again from the staged bundles.
Status attach_bundle(Session& session, trace::Store& store, const CapturedProcess& proc, const CaptureOptions& opts,
                     const std::shared_ptr<const symbolize::PerfMap>& jit, trace::Trace& t) {
  const ContextConfig& cfg = session.ctx.config();
  const memory::Snapshot& s0 = *proc.threads.front();
  // The bundle is built from the target's files: it is built, signed and indexed in a private
  // staging store, and goes into the user's bundle store by content only, attached to its
  // trace. It never creates or replaces an id entry there (doc/bundles.md "Who indexes"): a
  // target that forges another module's build-id cannot change what the store serves.
  std::optional<symbolize::BundleStore> bs;
  if (cfg.has_bundle_store) {
    auto opened = symbolize::BundleStore::open(cfg.bundle_store, true);
    if (!opened) return make_error(opened.error().code, "bundle store: %s", opened.error().message.c_str());
    bs.emplace(std::move(opened).value());
  }
  auto staged = BundleStaging::create();
  if (!staged) return staged.error();
  BundleStaging& staging = *staged.value();
  std::string warnings;
  auto b = build_trace_bundle(session, store, staging.store(), t.threads, s0, opts, &warnings);
  if (!warnings.empty()) session.ctx.log(SPROV_LOG_WARN, "%s", warnings.c_str());
  if (!b) return b.error();
  t.symbol_bundle_sha256 = b.value();
  if (bs) {
    if (Status st = staging.copy_to(*bs, b.value()); !st) return st;
    // Modules the trace's bundle does not hold are named by what the user's store serves.
    std::map<std::pair<IdKind, std::string>, ModuleId> ids;  // by kind and hex: each once, in order
    for (const auto& th : t.threads)
      for (const auto& f : th.frames)
        if (const ModuleId id = trace::frame_module_id(f); !id.empty()) ids.emplace(std::pair{id.kind, id.hex()}, id);
    for (const auto& [key, g] : ids) {
      if (find_bundle(staging.store(), g)) continue;
      auto d = find_bundle(*bs, g);
      if (!d) continue;
      if (Status st = staging.add_from_bundle_store(*bs, *d); !st) return st;
    }
  }
  // The trace records the resolution its bundle gives (the one replay and offline resolve
  // reproduce); offsets from function starts, which bundles do not carry, are kept from the
  // resolution from the files.
  auto bs_session = derived_session(session, staging.dir(), false, 0);
  auto again = resolve_threads(*bs_session, proc.threads, opts.max_frames, 1, jit, true);
  if (!again) return again.error();
  for (size_t i = 0; i < again->size(); ++i) (*again)[i].name = t.threads[i].name;
  carry_symbol_offsets(t.threads, again.value());
  t.threads = std::move(again.value());
  if (!opts.sign_key.empty()) t.dsse_ref = "dsse:sha256:" + b.value();
  return {};
}

}  // namespace

Status check_capture_signing(const CaptureOptions& opts) {
  if (opts.sign_key.empty()) return {};
  Status st = check_signing(opts.sign_key, opts.log_dir, opts.log_key);
  if (!st) return make_error(st.error().code, "signing: %s", st.error().message.c_str());
  return {};
}

Result<std::string> capture_trace(Session& session, trace::Store& store, const CapturedProcess& proc,
                                  const CaptureOptions& opts) {
  if (proc.threads.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "process %lld: no threads captured", static_cast<long long>(proc.pid));
  const memory::Snapshot& s0 = *proc.threads.front();
  // JIT code: the process's perf map, read once for every walk; the entries the frames touch
  // are kept in the captured data (resolve and replay use them when the map is gone).
  // A Windows or macOS target's pid (a minidump, a raw state) names no process of this machine.
  const bool linux_target = std::string_view(platform_of_snapshot(s0)) == "linux";
  std::shared_ptr<const symbolize::PerfMap> jit = (s0.pid > 0 && linux_target && !session.ctx.config().offline)
                                                      ? symbolize::PerfMap::load_pid(s0.pid)
                                                      : nullptr;
  // Tail-call frames (inferred from the modules' DWARF call sites) are recorded as `stack` shows them.
  auto threads = resolve_threads(session, proc.threads, opts.max_frames, 1, jit, true);
  if (!threads) return threads.error();

  trace::Trace t;
  auto uuid = trace::new_uuid();
  if (!uuid) return uuid.error();
  t.id = uuid.value();
  t.platform = platform_of_snapshot(s0);
  t.arch = arch_name(s0.arch);
  t.captured_at = trace::now_rfc3339();
  t.threads = std::move(threads.value());
  std::vector<trace::CapturedThread> cap;
  for (size_t i = 0; i < proc.threads.size(); ++i) {
    trace::CapturedThread c;
    c.tid = static_cast<uint64_t>(proc.threads[i]->tid);
    // The name read while the thread was stopped (live: comm; core: the main thread's), else
    // comm now for a live process.
    c.name = i < proc.thread_names.size() ? proc.thread_names[i] : "";
    if (c.name.empty() && !proc.from_core) c.name = thread_name(proc.pid, proc.threads[i]->tid);
    c.snapshot = *proc.threads[i];
    t.threads[i].name = c.name;
    cap.push_back(std::move(c));
  }
  t.build_id = main_build_id(t.threads, &s0, proc.pid);
  const std::vector<uint8_t> data =
      trace::serialize_capture(cap, jit_entries(jit.get(), t.threads), kernel_section(session, proc));
  if (Status st = trace::set_trace_data(t, data.data(), data.size()); !st) return st.error();
  if (opts.bundle)
    if (Status st = attach_bundle(session, store, proc, opts, jit, t); !st) return st.error();
  if (Status st = store.put_trace(t); !st) return st.error();
  return t.id;
}

}  // namespace stackprov::pipeline
