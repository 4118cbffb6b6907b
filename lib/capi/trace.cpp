// SPDX-License-Identifier: Apache-2.0
// C ABI: trace stores, capture of a process into a trace (frames with provenance, captured data, bundles), offline resolve, queries.
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "capi/trace_internal.hpp"
#include "core/context.hpp"
#include "elf/elf_image.hpp"
#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "stackprov/bundle.h"
#include "trace/events.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace stackprov::capi {

namespace {

/// Frees a malloc'd C ABI result at scope exit.
struct CFree {
  void* p = nullptr;
  ~CFree() { std::free(p); }
};

/// The last error of a nested C ABI call, prefixed with what was being done.
Error nested_error(const std::string& what) {
  return make_error(sprov_last_error(), "%s: %s", what.c_str(), sprov_last_error_message());
}


Result<std::string> read_file(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(SPROV_ERR_IO, "cannot open '%s': %s", path.c_str(), strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > limit) return make_error(SPROV_ERR_LIMIT, "'%s' is %zu bytes, above the limit %zu", path.c_str(), s.size(), limit);
  return s;
}

std::string mask_password(const std::string& url) {
  // postgresql://user:secret@host/... -> postgresql://user:***@host/...
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t at = url.find('@', scheme + 3);
  if (at == std::string::npos) return url;
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

std::string thread_name(int64_t pid, int64_t tid) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%lld/task/%lld/comm", static_cast<long long>(pid), static_cast<long long>(tid));
  std::ifstream in(path);
  std::string name;
  if (in) std::getline(in, name);
  if (name.size() > 256) name.resize(256);
  return name;
}

}  // namespace

// A malloc'd copy of `s` for an out parameter (released with sprov_free).
int give_string(const std::string& s, char** out, size_t* out_len) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return fail(Error{SPROV_ERR_NOMEM, "allocation failed"});
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  *out = p;
  if (out_len) *out_len = s.size();
  return 0;
}

std::string bare_sha256(const std::string& digest) {
  return digest.rfind("sha256:", 0) == 0 ? digest.substr(7) : digest;
}

void remove_tree(const std::string& dir) {
  if (dir.empty()) return;
  nftw(
      dir.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : 0; }, 16,
      FTW_DEPTH | FTW_PHYS);
}

// ----------------------------------------------------------------- staging

Result<std::unique_ptr<BundleStaging>> BundleStaging::create() {
  const char* tmp = getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/stackprov-bundles-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    return make_error(SPROV_ERR_IO, "cannot create a staging directory '%s': %s", tmpl.c_str(), strerror(errno));
  std::unique_ptr<BundleStaging> s(new BundleStaging());
  s->dir_ = buf.data();
  if (sprov_bundle_store_open(s->dir_.c_str(), SPROV_BUNDLE_STORE_CREATE, &s->store_) != 0)
    return nested_error("staging bundle store '" + s->dir_ + "'");
  return s;
}

BundleStaging::~BundleStaging() {
  sprov_bundle_store_free(store_);
  remove_tree(dir_);
}

void BundleStaging::note(const std::string& sha256) {
  if (std::find(added_.begin(), added_.end(), sha256) == added_.end()) added_.push_back(sha256);
}

Status BundleStaging::add_from_trace_store(trace::Store& s, const std::string& digest) {
  const std::string hex = bare_sha256(digest);
  auto row = s.get_symbol_bundle(hex);
  if (!row) {
    if (row.error().code == SPROV_ERR_NOT_FOUND)
      return make_error(SPROV_ERR_NOT_FOUND, "bundle sha256:%s is not in the trace store", hex.c_str());
    return row.error();
  }
  char d[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_store_put(store_, row->blob.data(), row->blob.size(), d, sizeof d) != 0)
    return nested_error("bundle sha256:" + hex + " of the trace store");
  const std::string dig = std::string("sha256:") + hex;
  for (auto [name, text] : {std::pair{"dsse.json", &row->dsse_envelope}, std::pair{"tlog-proof", &row->tlog_proof},
                            std::pair{"checkpoint", &row->checkpoint}}) {
    if (text->empty()) continue;
    if (sprov_bundle_store_put_sidecar(store_, dig.c_str(), name, text->data(), text->size()) != 0)
      return nested_error(std::string("sidecar ") + name + " of bundle " + dig);
  }
  note(hex);
  return {};
}

Result<std::string> BundleStaging::add_file(const std::string& path) {
  char d[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_store_put_file(store_, path.c_str(), d, sizeof d) != 0) return nested_error("bundle file '" + path + "'");
  std::string hex = bare_sha256(d);
  note(hex);
  return hex;
}

/// The signing sidecars of bundle `dig` ("sha256:<hex>") from one store to another (those present).
static Status copy_sidecars(sprov_bundle_store* from, sprov_bundle_store* to, const std::string& dig) {
  for (const char* name : {"dsse.json", "tlog-proof", "checkpoint"}) {
    char* sp = nullptr;
    if (sprov_bundle_store_sidecar_path(from, dig.c_str(), name, &sp, nullptr) != 0) continue;
    CFree side{sp};
    auto text = read_file(sp, 16u << 20);
    if (!text) return text.error();
    if (sprov_bundle_store_put_sidecar(to, dig.c_str(), name, text->data(), text->size()) != 0)
      return nested_error(std::string("sidecar ") + name + " of " + dig);
  }
  return {};
}

Status BundleStaging::add_from_bundle_store(sprov_bundle_store* other, const std::string& digest) {
  const std::string dig = "sha256:" + bare_sha256(digest);
  char* p = nullptr;
  if (sprov_bundle_store_blob_path(other, dig.c_str(), &p, nullptr) != 0) return nested_error("bundle " + dig);
  CFree blob{p};
  char d[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_store_put_file(store_, p, d, sizeof d) != 0) return nested_error("bundle " + dig);
  if (Status st = copy_sidecars(other, store_, dig); !st) return st;
  note(bare_sha256(digest));
  return {};
}

Status BundleStaging::copy_to(sprov_bundle_store* other, const std::string& digest) const {
  const std::string dig = "sha256:" + bare_sha256(digest);
  char* p = nullptr;
  if (sprov_bundle_store_blob_path(store_, dig.c_str(), &p, nullptr) != 0) return nested_error("bundle " + dig);
  CFree blob{p};
  auto bytes = read_file(p, size_t{1} << 40);
  if (!bytes) return bytes.error();
  char d[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_store_put_blob(other, bytes->data(), bytes->size(), d, sizeof d) != 0)
    return nested_error(std::string("storing bundle ") + dig + " in '" + sprov_bundle_store_dir(other) + "'");
  return copy_sidecars(store_, other, dig);
}

std::string BundleStaging::blob_path(const std::string& sha256) const {
  char* p = nullptr;
  const std::string dig = "sha256:" + bare_sha256(sha256);
  if (sprov_bundle_store_blob_path(store_, dig.c_str(), &p, nullptr) != 0) return "";
  std::string s = p;
  sprov_free(p);
  return s;
}

std::string BundleStaging::sidecar_path(const std::string& sha256, const char* name) const {
  char* p = nullptr;
  const std::string dig = "sha256:" + bare_sha256(sha256);
  if (sprov_bundle_store_sidecar_path(store_, dig.c_str(), name, &p, nullptr) != 0) return "";
  std::string s = p;
  sprov_free(p);
  return s;
}

// ----------------------------------------------------------------- helpers

Result<std::vector<trace::CapturedThread>> captured_threads(const trace::Trace& t, trace::CapturedJit* jit) {
  auto raw = trace::trace_data(t);
  if (!raw) return raw.error();
  return trace::deserialize_capture(raw->data(), raw->size(), jit);
}

std::shared_ptr<const symbolize::PerfMap> captured_perf_map(const trace::CapturedJit& jit) {
  if (jit.entries.empty()) return nullptr;
  return symbolize::PerfMap::from_entries(jit.path, jit.entries);
}

std::vector<std::string> trace_bundles(const trace::Trace& t) {
  std::set<std::string> s;
  if (!t.symbol_bundle_sha256.empty()) s.insert(t.symbol_bundle_sha256);
  for (const auto& th : t.threads)
    for (const auto& f : th.frames)
      if (!f.bundle_sha256.empty()) s.insert(f.bundle_sha256);
  return {s.begin(), s.end()};
}

Result<std::string> bundle_index_json(const uint8_t* data, size_t len) {
  sprov_bundle* b = nullptr;
  if (sprov_bundle_open_buf(data, len, &b) != 0) return nested_error("bundle");
  evidence::Json mods = evidence::Json::array();
  for (size_t i = 0; i < sprov_bundle_module_count(b); ++i) {
    sprov_bundle_module m{};
    m.sz = sizeof m;
    if (sprov_bundle_module_info(b, i, &m) != 0) {
      sprov_bundle_free(b);
      return nested_error("bundle module " + std::to_string(i));
    }
    mods.push_back({{"id_kind", sprov_bundle_id_kind_name(static_cast<int>(m.id_kind))},
                    {"id", m.id_hex},
                    {"name", m.name}});
  }
  sprov_bundle_free(b);
  return evidence::canonical_json(evidence::Json{{"modules", mods}});
}

Result<std::vector<std::string>> store_bundles_for(trace::Store& s, const std::vector<std::string>& build_ids) {
  std::vector<std::string> out;
  if (build_ids.empty()) return out;
  auto rows = s.list_symbol_bundles();
  if (!rows) return rows.error();
  const std::set<std::string> want(build_ids.begin(), build_ids.end());
  for (const auto& r : rows.value()) {
    auto j = evidence::parse_json(r.index_json, "symbol_bundles.index_json");
    if (!j || !j->is_object() || !j->contains("modules") || !(*j)["modules"].is_array()) continue;
    for (const auto& m : (*j)["modules"]) {
      if (m.is_object() && m.contains("id") && m["id"].is_string() && want.count(m["id"].get<std::string>())) {
        out.push_back(r.sha256);
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool frame_covered(const trace::Frame& f) {
  if (f.symbol.empty()) return false;
  // A frame whose resolver gives lines is covered only with them (resolver_gives_lines).
  const bool dwarf_class = f.resolver == "bundle" || f.resolver == "dwarf" || f.resolver.rfind("debuginfod", 0) == 0 ||
                           f.resolver == "gopclntab";
  return !dwarf_class || (!f.file.empty() && f.line != 0);
}

void carry_symbol_offsets(const std::vector<trace::Thread>& before, std::vector<trace::Thread>& after) {
  std::map<uint64_t, const trace::Thread*> by_tid;
  for (const auto& t : before) by_tid[t.tid] = &t;
  for (auto& t : after) {
    auto it = by_tid.find(t.tid);
    if (it == by_tid.end()) continue;
    const auto& old = it->second->frames;
    for (size_t i = 0; i < t.frames.size() && i < old.size(); ++i) {
      trace::Frame& f = t.frames[i];
      const trace::Frame& o = old[i];
      if (f.symbol_offset == 0 && o.symbol_offset != 0 && f.symbol == o.symbol && f.module_path == o.module_path &&
          f.module_offset == o.module_offset)
        f.symbol_offset = o.symbol_offset;
    }
  }
}

std::unique_ptr<sprov_context> derived_context(const sprov_context* base, const std::string& bundle_store, bool offline,
                                               uint32_t module_cache_capacity) {
  ContextConfig cfg = base->ctx.config();
  cfg.has_bundle_store = !bundle_store.empty();
  cfg.bundle_store = bundle_store;
  cfg.offline = offline;
  if (module_cache_capacity) cfg.module_cache_capacity = module_cache_capacity;
  return std::make_unique<sprov_context>(std::move(cfg));
}

namespace {

/// One frame of a stack as the trace records it, with the resolver chain's answer.
trace::Frame to_trace_frame(sprov_symbolizer* sym, const sprov_stack* stack, size_t i) {
  trace::Frame f;
  sprov_frame fr{};
  fr.sz = sizeof fr;
  if (sprov_stack_frame(stack, i, &fr) != 0) return f;
  f.ip = fr.pc;
  if (fr.module_path) {
    f.module_path = fr.module_path;
    f.module_offset = fr.module_offset;
  }
  if (fr.module_id && fr.module_id_len) {
    f.module_build_id = evidence::hex_encode(fr.module_id, fr.module_id_len);
    if (fr.id_kind != SPROV_ID_ELF_BUILD_ID) f.module_id_kind = id_kind_name(static_cast<IdKind>(fr.id_kind));
  }
  f.unwind_method = sprov_method_name(fr.method);
  if (fr.flags & SPROV_FRAME_JIT) f.unwind_method += "+jit";  // a pc in the perf map's JIT code
  f.resolver = "none";
  sprov_symbol_info info{};
  info.sz = sizeof info;
  if (sprov_symbolizer_frame_ex(sym, stack, i, 0, &info) != 0 || info.frame_count == 0) return f;
  if (info.resolver == SPROV_RESOLVER_NONE) return f;
  std::vector<sprov_symbol_frame> chain(info.frame_count);
  for (uint32_t k = 0; k < info.frame_count; ++k) {
    chain[k] = {};
    chain[k].sz = sizeof chain[k];
    if (sprov_symbolizer_inline_frame(sym, k, &chain[k]) != 0) return f;
  }
  f.resolver = info.resolver_name ? info.resolver_name : "";
  f.source = info.source_path ? info.source_path : "";
  // A file read through the process's root is recorded by its path there (/proc/PID/root/usr/...
  // means nothing once the process is gone).
  if (f.source.rfind("/proc/", 0) == 0) {
    const size_t root = f.source.find("/root/");
    if (root != std::string::npos && f.source.find_first_not_of("0123456789", 6) == root) f.source = f.source.substr(root + 5);
  }
  f.bundle_sha256 = bare_sha256(info.bundle_digest ? info.bundle_digest : "");
  const sprov_symbol_frame& phys = chain.back();
  f.symbol = phys.name ? phys.name : "";
  if (phys.has_start_address && f.module_offset >= phys.start_address) f.symbol_offset = f.module_offset - phys.start_address;
  // Source lines and inline chains: the one rule (dwarf, debuginfod, bundle, gopclntab).
  if (!resolver_gives_lines(info.resolver)) return f;
  f.file = phys.file ? phys.file : "";
  f.line = phys.line;
  f.column = phys.column;
  // The symbolizer lists the innermost inlined function first; the trace, outermost first.
  for (size_t k = info.frame_count - 1; k-- > 0;) {
    trace::InlineFrame in;
    in.function = chain[k].name ? chain[k].name : "";
    in.file = chain[k].file ? chain[k].file : "";
    in.line = chain[k].line;
    in.column = chain[k].column;
    f.inline_chain.push_back(std::move(in));
  }
  return f;
}

}  // namespace

Result<std::vector<trace::Thread>> resolve_threads(sprov_context* ctx, const std::vector<const sprov_snapshot*>& snaps,
                                                   uint32_t max_frames, uint32_t workers,
                                                   std::shared_ptr<const symbolize::PerfMap> jit) {
  std::vector<trace::Thread> out(snaps.size());
  std::vector<std::optional<Error>> errors(snaps.size());
  workers = std::max<uint32_t>(1, std::min<uint32_t>(workers, static_cast<uint32_t>(std::max<size_t>(1, snaps.size()))));
  auto work = [&](uint32_t w) {
    sprov_unwinder_opts uo{};
    uo.sz = sizeof uo;
    uo.max_frames = max_frames;
    sprov_unwinder* uw = nullptr;
    sprov_symbolizer* sym = nullptr;
    if (sprov_unwinder_new(ctx, &uo, &uw) != 0 || sprov_symbolizer_new(ctx, nullptr, &sym) != 0) {
      const Error e = nested_error("unwinder");
      for (size_t i = w; i < snaps.size(); i += workers) errors[i] = e;
      sprov_unwinder_free(uw);
      return;
    }
    uw->captured_jit = jit;
    for (size_t i = w; i < snaps.size(); i += workers) {
      const int64_t tid = sprov_snapshot_tid(snaps[i]);
      out[i].tid = static_cast<uint64_t>(tid);
      sprov_stack* st = nullptr;
      if (sprov_unwinder_unwind(uw, snaps[i], &st) != 0) {
        errors[i] = nested_error("thread " + std::to_string(tid));
        continue;
      }
      const size_t n = sprov_stack_frame_count(st);
      out[i].frames.reserve(n);
      for (size_t k = 0; k < n; ++k) out[i].frames.push_back(to_trace_frame(sym, st, k));
      sprov_stack_free(st);
    }
    sprov_symbolizer_free(sym);
    sprov_unwinder_free(uw);
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

}  // namespace stackprov::capi

namespace {

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

/// The platform of a capture (trace "platform", bundle "os"): that of its first module's identity
/// kind (platform_of), the vDSO aside; "linux" when no module has an identity.
const char* platform_of_snapshot(const memory::Snapshot& s) {
  for (const auto& m : s.modules)
    if (!m.build_id.empty() && m.path != kVdsoName) return platform_of(m.build_id.kind);
  return platform_of(IdKind::kNone);
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

/// Builds one bundle of every module (with a build-id and a file) the frames touch, stores it in
/// the trace store and in `bstore`, signs it when asked. Returns its 64-hex sha256.
Result<std::string> build_trace_bundle(sprov_context* ctx, sprov_trace_store* ts, sprov_bundle_store* bstore,
                                       const std::vector<trace::Thread>& threads, const memory::Snapshot& s0,
                                       const char* sign_key, const char* log_dir, const char* log_key,
                                       std::string* warnings) {
  std::set<std::string> touched, no_id;
  for (const auto& t : threads)
    for (const auto& f : t.frames) {
      if (!f.module_build_id.empty()) touched.insert(f.module_build_id);
      else if (!f.module_path.empty()) no_id.insert(f.module_path);
    }
  for (const auto& p : no_id) *warnings += "module " + p + " has no build-id: not in the bundle\n";
  std::vector<std::string> paths, name_store;
  std::set<std::string> seen;
  for (const auto& m : s0.modules) {
    if (m.build_id.empty() || !touched.count(m.build_id.hex()) || seen.count(m.build_id.hex())) continue;
    if (m.path.empty() || m.path[0] != '/') {  // [vdso] and other anonymous images have no file
      *warnings += "module " + m.path + " (build-id " + m.build_id.hex() + ") has no file: not in the bundle\n";
      continue;
    }
    // The target's own file, never the host's file at the same path (whose build-id the target
    // can forge: doc/hardening.md, attack 2): the mapped file when the path names another
    // (map_files), else the path inside the target's root (open_regular_file resolves
    // /proc/PID/root/... with RESOLVE_IN_ROOT; the capture holds that root open, so this works
    // after the process exited), checked against the file the capture identified from its maps
    // line (inode, device, mtime) and against the build-id.
    const std::string path = !m.open_path.empty()      ? m.open_path
                             : !s0.module_root.empty() ? join_root(s0.module_root, m.path)
                                                       : ctx->ctx.host_path(m.path);
    const std::string what = "module " + m.path + " (build-id " + m.build_id.hex() + "): ";
    auto img = elf::ElfImage::open(path);
    if (!img) {
      *warnings += what + "'" + path + "' " +
                   (img.error().code == -ENOENT ? std::string("is missing") : "cannot be read (" + img.error().message + ")") +
                   ": not in the bundle\n";
      continue;
    }
    const FileIdentity* fid = img.value()->file_identity();
    if (m.file.known() && fid != nullptr && (fid->ino != m.file.ino || fid->mtime_ns != m.file.mtime_ns)) {
      *warnings += what + "'" + path + "' is not the file the process maps (changed since the capture): not in the bundle\n";
      continue;
    }
    // The file at the path may be another build (a library replaced since the process mapped it,
    // the module described from the process's memory): never bundled for this build-id.
    if (img.value()->build_id() != m.build_id) {
      *warnings += what + "'" + path + "' is another build (build-id " +
                   (img.value()->build_id().empty() ? std::string("none") : img.value()->build_id().hex()) +
                   "): not in the bundle\n";
      continue;
    }
    seen.insert(m.build_id.hex());
    paths.push_back(path);
    const size_t slash = m.path.rfind('/');
    name_store.push_back(slash == std::string::npos ? m.path : m.path.substr(slash + 1));
  }
  if (paths.empty()) return make_error(SPROV_ERR_NOT_FOUND, "no module of the trace has a file to build a bundle from");
  std::vector<const char*> pp, names;
  for (const auto& p : paths) pp.push_back(p.c_str());
  // Modules are named by their basename in the process, not by the /proc/PID/root/... path read.
  for (const auto& n : name_store) names.push_back(n.c_str());
  // Separate debug files are looked up where the context looks for them.
  std::vector<const char*> dirs;
  for (const auto& d : ctx->ctx.config().debug_dirs) dirs.push_back(d.c_str());
  sprov_bundle_build_opts bo{};
  bo.sz = sizeof bo;
  bo.names = names.data();
  bo.debug_dirs = dirs.empty() ? nullptr : dirs.data();
  bo.debug_dir_count = dirs.size();
  void* bytes = nullptr;
  size_t len = 0;
  char digest[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_build(pp.data(), pp.size(), &bo, &bytes, &len, digest, sizeof digest) != 0)
    return nested_error("building the trace's bundle");
  CFree free_bytes{bytes};
  trace::SymbolBundleRow row;
  row.sha256 = bare_sha256(digest);
  row.os = platform_of_snapshot(s0);
  row.blob.assign(static_cast<uint8_t*>(bytes), static_cast<uint8_t*>(bytes) + len);
  auto idx = bundle_index_json(row.blob.data(), row.blob.size());
  if (!idx) return idx.error();
  row.index_json = idx.value();
  char d2[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_store_put(bstore, bytes, len, d2, sizeof d2) != 0)
    return nested_error(std::string("storing bundle in '") + sprov_bundle_store_dir(bstore) + "'");
  if (sign_key && *sign_key) {
    sprov_bundle_sign_opts so{};
    so.sz = sizeof so;
    so.key_path = sign_key;
    so.log_dir = log_dir;
    so.log_key = log_key;
    uint64_t index = 0;
    if (sprov_bundle_store_sign(bstore, digest, &so, &index) != 0) return nested_error(std::string("signing ") + digest);
    for (auto [name, text] : {std::pair{"dsse.json", &row.dsse_envelope}, std::pair{"tlog-proof", &row.tlog_proof},
                              std::pair{"checkpoint", &row.checkpoint}}) {
      char* p = nullptr;
      if (sprov_bundle_store_sidecar_path(bstore, digest, name, &p, nullptr) != 0) return nested_error(name);
      CFree fp{p};
      auto t = read_file(p, 16u << 20);
      if (!t) return t.error();
      *text = std::move(t.value());
    }
    char kid[128];
    if (sprov_key_id(sign_key, kid, sizeof kid) == 0) row.signer = kid;
    row.rekor_tile_ref = std::string(log_dir) + "#" + std::to_string(index);
  }
  if (Status st = ts->store->put_symbol_bundle(row); !st) return st.error();
  return row.sha256;
}

}  // namespace

extern "C" {

SPROV_API int sprov_trace_store_default_url(char** out, size_t* out_len) {
  return guard([&] {
    if (!out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_store_default_url: NULL out"));
    auto u = trace::default_store_url();
    if (!u) return fail(u.error());
    return give_string(u.value(), out, out_len);
  });
}

SPROV_API int sprov_trace_store_open(const char* url, sprov_trace_store** out) {
  return guard([&] {
    if (!out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_store_open: NULL out"));
    *out = nullptr;
    std::string u = url ? url : "";
    if (u.empty()) {
      auto d = trace::default_store_url();
      if (!d) return fail(d.error());
      u = d.value();
    }
    auto s = trace::open_store(u);
    if (!s) return fail(s.error());
    auto h = std::make_unique<sprov_trace_store>();
    h->store = std::move(s.value());
    h->url = mask_password(u);
    *out = h.release();
    return 0;
  });
}

SPROV_API void sprov_trace_store_free(sprov_trace_store* store) { delete store; }

SPROV_API const char* sprov_trace_store_url(const sprov_trace_store* store) { return store ? store->url.c_str() : ""; }

SPROV_API int sprov_trace_capture(sprov_context* ctx, const sprov_process* proc, sprov_trace_store* store,
                                  const struct sprov_trace_capture_opts* opts, char* id, size_t id_size) {
  return guard([&] {
    if (!ctx) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: NULL ctx"));
    if (!proc) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: NULL proc"));
    if (!store) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: NULL store"));
    if (!id || id_size < SPROV_TRACE_ID_STRLEN)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: id buffer of %zu bytes, needs %d", id ? id_size : 0,
                             SPROV_TRACE_ID_STRLEN));
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_capture_opts), "sprov_trace_capture_opts")) return rc;
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_TRACE_BUNDLE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture_opts.flags 0x%x: only SPROV_TRACE_BUNDLE is known",
                             flags));
    uint32_t max_frames = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, max_frames, 0u);
    if (max_frames == 0) max_frames = 256;
    if (max_frames > 65536)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture_opts.max_frames %u exceeds 65536", max_frames));
    const char* sign_key = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, sign_key, nullptr);
    const char* log_dir = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, log_dir, nullptr);
    const char* log_key = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, log_key, nullptr);
    if (sign_key && *sign_key && !(flags & SPROV_TRACE_BUNDLE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sign_key '%s' given without SPROV_TRACE_BUNDLE: only bundles are signed",
                             sign_key));
    if (sign_key && *sign_key && (!log_dir || !*log_dir))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sign_key '%s' needs a transparency log (log_dir)", sign_key));
    if (sign_key && *sign_key) {  // keys that cannot sign: fail before anything is stored
      sprov_bundle_sign_opts so{};
      so.sz = sizeof so;
      so.key_path = sign_key;
      so.log_dir = log_dir;
      so.log_key = log_key;
      if (sprov_bundle_sign_check(&so) != 0) return fail(nested_error("signing"));
    }
    if (proc->threads.empty()) return fail(make_error(SPROV_ERR_NOT_FOUND, "process %lld: no threads captured",
                                                      static_cast<long long>(proc->pid)));

    std::vector<const sprov_snapshot*> snaps;
    for (const auto& t : proc->threads) snaps.push_back(t.get());
    const memory::Snapshot& s0 = proc->threads.front()->snap;
    // JIT code: the process's perf map, read once for every walk; the entries the frames touch
    // are kept in the captured data (resolve and replay use them when the map is gone).
    std::shared_ptr<const symbolize::PerfMap> jit =
        (s0.pid > 0 && !ctx->ctx.config().offline) ? symbolize::PerfMap::load_pid(s0.pid) : nullptr;
    auto threads = resolve_threads(ctx, snaps, max_frames, 1, jit);
    if (!threads) return fail(threads.error());

    trace::Trace t;
    auto uuid = trace::new_uuid();
    if (!uuid) return fail(uuid.error());
    t.id = uuid.value();
    t.platform = platform_of_snapshot(s0);
    t.arch = arch_name(s0.arch);
    t.captured_at = trace::now_rfc3339();
    t.threads = std::move(threads.value());
    std::vector<trace::CapturedThread> cap;
    for (size_t i = 0; i < proc->threads.size(); ++i) {
      trace::CapturedThread c;
      c.tid = static_cast<uint64_t>(proc->threads[i]->snap.tid);
      // The name read while the thread was stopped (live: comm; core: the main thread's), else
      // comm now for a live process.
      c.name = i < proc->thread_names.size() ? proc->thread_names[i] : "";
      if (c.name.empty() && !proc->from_core) c.name = thread_name(proc->pid, proc->threads[i]->snap.tid);
      c.snapshot = proc->threads[i]->snap;
      t.threads[i].name = c.name;
      cap.push_back(std::move(c));
    }
    t.build_id = main_build_id(t.threads, &s0, proc->pid);
    const std::vector<uint8_t> data = trace::serialize_capture(cap, jit_entries(jit.get(), t.threads));
    if (Status st = trace::set_trace_data(t, data.data(), data.size()); !st) return fail(st.error());

    if (flags & SPROV_TRACE_BUNDLE) {
      const ContextConfig& cfg = ctx->ctx.config();
      // The bundle is built from the target's files: it is built, signed and indexed in a private
      // staging store, and goes into the user's bundle store by content only, attached to its
      // trace. It never creates or replaces an id entry there (doc/bundles.md "Who indexes"): a
      // target that forges another module's build-id cannot change what the store serves.
      sprov_bundle_store* bs = nullptr;
      if (cfg.has_bundle_store &&
          sprov_bundle_store_open(cfg.bundle_store.c_str(), SPROV_BUNDLE_STORE_CREATE, &bs) != 0)
        return fail(nested_error("bundle store"));
      struct StoreHandle {
        sprov_bundle_store* s;
        ~StoreHandle() { sprov_bundle_store_free(s); }
      } user_store{bs};
      auto staged = BundleStaging::create();
      if (!staged) return fail(staged.error());
      BundleStaging& staging = *staged.value();
      std::string warnings;
      auto b = build_trace_bundle(ctx, store, staging.store(), t.threads, s0, sign_key, log_dir, log_key, &warnings);
      if (!warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "%s", warnings.c_str());
      if (!b) return fail(b.error());
      t.symbol_bundle_sha256 = b.value();
      if (bs) {
        if (Status st = staging.copy_to(bs, b.value()); !st) return fail(st.error());
        // Modules the trace's bundle does not hold are named by what the user's store serves.
        std::set<std::string> ids;
        for (const auto& th : t.threads)
          for (const auto& f : th.frames)
            if (!f.module_build_id.empty()) ids.insert(f.module_build_id);
        for (const std::string& g : ids) {
          char d[SPROV_DIGEST_STRLEN];
          if (sprov_bundle_store_find(staging.store(), SPROV_BUNDLE_ID_ELF_BUILD_ID, g.c_str(), d, sizeof d) == 0 ||
              sprov_bundle_store_find(bs, SPROV_BUNDLE_ID_ELF_BUILD_ID, g.c_str(), d, sizeof d) != 0)
            continue;
          if (Status st = staging.add_from_bundle_store(bs, d); !st) return fail(st.error());
        }
      }
      // The trace records the resolution its bundle gives (the one replay and offline resolve
      // reproduce); offsets from function starts, which bundles do not carry, are kept from the
      // resolution from the files.
      auto bctx = derived_context(ctx, staging.dir(), false, 0);
      auto again = resolve_threads(bctx.get(), snaps, max_frames, 1, jit);
      if (!again) return fail(again.error());
      for (size_t i = 0; i < again->size(); ++i) (*again)[i].name = t.threads[i].name;
      carry_symbol_offsets(t.threads, again.value());
      t.threads = std::move(again.value());
      if (sign_key && *sign_key) t.dsse_ref = "dsse:sha256:" + b.value();
    }
    if (Status st = store->store->put_trace(t); !st) return fail(st.error());
    snprintf(id, id_size, "%s", t.id.c_str());
    return 0;
  });
}

SPROV_API int sprov_trace_resolve(sprov_context* ctx, sprov_trace_store* store, const char* trace_id,
                                  const struct sprov_trace_resolve_opts* opts, char** report, size_t* report_len) {
  return guard([&] {
    if (!ctx) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve: NULL ctx"));
    if (!store) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve: NULL store"));
    if (!trace_id) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve: NULL trace_id"));
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_resolve_opts), "sprov_trace_resolve_opts")) return rc;
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_TRACE_OFFLINE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve_opts.flags 0x%x: only SPROV_TRACE_OFFLINE is known",
                             flags));
    if (uint32_t r = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, reserved, 0u); r != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve_opts.reserved = %u: must be 0", r));
    const char* const* given = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, bundles, nullptr);
    const size_t given_n = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, bundle_count, size_t{0});
    if (given_n && !given) return fail(make_error(SPROV_ERR_INVALID_ARG, "bundle_count %zu with NULL bundles", given_n));
    if (!trace::is_uuid(trace_id))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));
    auto t = store->store->get_trace(trace_id);
    if (!t) return fail(t.error());
    trace::CapturedJit cjit;
    auto cap = captured_threads(t.value(), &cjit);
    if (!cap) return fail(cap.error());

    auto staging = BundleStaging::create();
    if (!staging) return fail(staging.error());
    BundleStaging& stg = *staging.value();
    // The bundles given, then the trace's own, then every bundle of the store for its modules.
    for (size_t i = 0; i < given_n; ++i) {
      if (!given[i]) return fail(make_error(SPROV_ERR_INVALID_ARG, "bundles[%zu] is NULL", i));
      const std::string g = given[i];
      if (g.rfind("sha256:", 0) == 0) {
        Status st = stg.add_from_trace_store(*store->store, g);
        if (!st && st.error().code == SPROV_ERR_NOT_FOUND && ctx->ctx.config().has_bundle_store) {
          sprov_bundle_store* bs = nullptr;
          if (sprov_bundle_store_open(ctx->ctx.config().bundle_store.c_str(), 0, &bs) == 0) {
            st = stg.add_from_bundle_store(bs, g);
            sprov_bundle_store_free(bs);
          }
        }
        if (!st) return fail(make_error(st.error().code, "bundle '%s': %s", g.c_str(), st.error().message.c_str()));
      } else {
        auto h = stg.add_file(g);
        if (!h) return fail(h.error());
        // Kept with the trace, so that replay finds it too.
        trace::SymbolBundleRow row;
        row.sha256 = h.value();
        // The trace's platform (the bundle names its modules); a trace stored without one is Linux's.
        row.os = t.value().platform.empty() ? platform_of(IdKind::kNone) : t.value().platform;
        auto bytes = read_file(g, trace::kMaxDataBytes);
        if (!bytes) return fail(bytes.error());
        row.blob.assign(bytes->begin(), bytes->end());
        auto idx = bundle_index_json(row.blob.data(), row.blob.size());
        if (!idx) return fail(idx.error());
        row.index_json = idx.value();
        if (Status st = store->store->put_symbol_bundle(row); !st) return fail(st.error());
      }
    }
    std::vector<std::string> ids;
    for (const auto& c : cap.value())
      for (const auto& m : c.snapshot.modules)
        if (!m.build_id.empty()) ids.push_back(m.build_id.hex());
    auto more = store_bundles_for(*store->store, ids);
    if (!more) return fail(more.error());
    std::vector<std::string> all = trace_bundles(t.value());
    all.insert(all.end(), more->begin(), more->end());
    for (const auto& b : all) {
      Status st = stg.add_from_trace_store(*store->store, b);
      if (!st) return fail(st.error());
    }
    const bool offline = flags & SPROV_TRACE_OFFLINE;
    // Offline: bundles only, no module file, debug file or network.
    std::unique_ptr<sprov_context> rctx = derived_context(ctx, stg.dir(), offline, 0);
    std::vector<std::unique_ptr<sprov_snapshot>> owned;
    std::vector<const sprov_snapshot*> snaps;
    for (auto& c : cap.value()) {
      auto h = std::make_unique<sprov_snapshot>();
      h->snap = std::move(c.snapshot);
      snaps.push_back(h.get());
      owned.push_back(std::move(h));
    }
    auto threads = resolve_threads(rctx.get(), snaps, 256, 1, captured_perf_map(cjit));
    if (!threads) return fail(threads.error());
    for (size_t i = 0; i < threads->size() && i < t->threads.size(); ++i) (*threads)[i].name = t->threads[i].name;
    carry_symbol_offsets(t->threads, threads.value());
    std::string bundle = t->symbol_bundle_sha256;
    if (bundle.empty() && !stg.bundles().empty()) bundle = stg.bundles().front();
    if (Status st = store->store->replace_frames(trace_id, threads.value(), bundle); !st) return fail(st.error());

    if (report) {
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
      return give_string(j.dump(-1, ' ', false, evidence::Json::error_handler_t::replace), report, report_len);
    }
    return 0;
  });
}

SPROV_API int sprov_trace_get_json(sprov_trace_store* store, const char* trace_id, char** out, size_t* out_len) {
  return guard([&] {
    if (!store || !trace_id || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_get_json: NULL argument"));
    if (!trace::is_uuid(trace_id))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));
    auto t = store->store->get_trace(trace_id);
    if (!t) return fail(t.error());
    return give_string(trace::trace_capture_event(t.value()), out, out_len);
  });
}

SPROV_API int sprov_trace_list_json(sprov_trace_store* store, size_t limit, char** out, size_t* out_len) {
  return guard([&] {
    if (!store || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_list_json: NULL argument"));
    auto l = store->store->list_traces(limit ? limit : SIZE_MAX);
    if (!l) return fail(l.error());
    evidence::Json a = evidence::Json::array();
    for (const auto& s : l.value())
      a.push_back({{"trace_id", s.id},
                   {"platform", s.platform},
                   {"arch", s.arch},
                   {"captured_at", s.captured_at},
                   {"build_id", s.build_id},
                   {"frames", s.frame_count}});
    return give_string(a.dump(-1, ' ', false, evidence::Json::error_handler_t::replace), out, out_len);
  });
}

SPROV_API int sprov_trace_replays_json(sprov_trace_store* store, const char* trace_id, char** out, size_t* out_len) {
  return guard([&] {
    if (!store || !trace_id || !out)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replays_json: NULL argument"));
    if (!trace::is_uuid(trace_id))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));
    auto l = store->store->list_replays(trace_id);
    if (!l) return fail(l.error());
    std::string s;
    for (const auto& r : l.value()) s += trace::replay_result_event(r) + "\n";
    return give_string(s, out, out_len);
  });
}

SPROV_API int sprov_trace_store_export_bundle(sprov_trace_store* store, const char* digest, sprov_bundle_store* bundles) {
  return guard([&] {
    if (!store || !digest || !bundles)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_store_export_bundle: NULL argument"));
    const std::string hex = bare_sha256(digest);
    if (hex.size() != 64 || !trace::is_lower_hex(hex, 64))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "bundle digest '%s' is not sha256:<64 lower-case hex>", digest));
    auto row = store->store->get_symbol_bundle(hex);
    if (!row) return fail(row.error());
    char d[SPROV_DIGEST_STRLEN];
    if (sprov_bundle_store_put(bundles, row->blob.data(), row->blob.size(), d, sizeof d) != 0) return sprov_last_error();
    for (auto [name, text] : {std::pair{"dsse.json", &row->dsse_envelope}, std::pair{"tlog-proof", &row->tlog_proof},
                              std::pair{"checkpoint", &row->checkpoint}}) {
      if (text->empty()) continue;
      if (sprov_bundle_store_put_sidecar(bundles, d, name, text->data(), text->size()) != 0) return sprov_last_error();
    }
    return 0;
  });
}

}  // extern "C"
