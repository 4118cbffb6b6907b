// SPDX-License-Identifier: Apache-2.0
// The bundles of traces: staging stores for resolve and replay, a trace's bundle built at capture,
// the trace store's index of its bundles.
#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "bundle/format.hpp"
#include "core/context.hpp"
#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "object/object_image.hpp"
#include "pipeline/bundle_build.hpp"
#include "pipeline/trace.hpp"

namespace stackprov::pipeline {

namespace {

/// The sidecars a signed bundle has, in the order they are copied.
constexpr const char* kSidecars[] = {"dsse.json", "tlog-proof", "checkpoint"};

/// `e` prefixed with what was being done (the error's code kept).
Error prefixed(const std::string& what, const Error& e) {
  return make_error(e.code, "%s: %s", what.c_str(), e.message.c_str());
}

/// The signing sidecars of bundle `dig` ("sha256:<hex>") from one store to another (those present).
Status copy_sidecars(const symbolize::BundleStore& from, symbolize::BundleStore& to, const std::string& dig) {
  for (const char* name : kSidecars) {
    auto sp = sidecar_file(from, dig, name);
    if (!sp) continue;
    auto text = read_text_file(sp.value(), 16u << 20);
    if (!text) return text.error();
    if (Status st = to.put_sidecar(dig, name, text.value()); !st) return prefixed(std::string("sidecar ") + name + " of " + dig, st.error());
  }
  return {};
}

}  // namespace

Result<std::string> read_text_file(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(SPROV_ERR_IO, "cannot open '%s': %s", path.c_str(), strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > limit) return make_error(SPROV_ERR_LIMIT, "'%s' is %zu bytes, above the limit %zu", path.c_str(), s.size(), limit);
  return s;
}

std::optional<std::string> find_bundle(const symbolize::BundleStore& store, const ModuleId& id) {
  if (id.empty() || id.len > bundle::kMaxIdBytes) return std::nullopt;
  auto f = store.find(id.kind, std::span<const uint8_t>(id.bytes, id.len));
  if (!f || !f.value()) return std::nullopt;
  return *f.value();
}


std::string bare_sha256(const std::string& digest) {
  return digest.rfind("sha256:", 0) == 0 ? digest.substr(7) : digest;
}

void remove_tree(const std::string& dir) {
  if (dir.empty()) return;
  nftw(
      dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : 0; }, 16,
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
  auto store = symbolize::BundleStore::open(s->dir_, true);
  if (!store) return prefixed("staging bundle store '" + s->dir_ + "'", store.error());
  s->store_.emplace(std::move(store).value());
  return s;
}

BundleStaging::~BundleStaging() {
  store_.reset();
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
  auto d = store_->put(row->blob, symbolize::BundleStore::Index::kModules);
  if (!d) return prefixed("bundle sha256:" + hex + " of the trace store", d.error());
  const std::string dig = std::string("sha256:") + hex;
  for (auto [name, text] : {std::pair{"dsse.json", &row->dsse_envelope}, std::pair{"tlog-proof", &row->tlog_proof},
                            std::pair{"checkpoint", &row->checkpoint}}) {
    if (text->empty()) continue;
    if (Status st = store_->put_sidecar(dig, name, *text); !st)
      return prefixed(std::string("sidecar ") + name + " of bundle " + dig, st.error());
  }
  note(hex);
  return {};
}

Result<std::string> BundleStaging::add_file(const std::string& path) {
  auto d = store_->put_file(path, symbolize::BundleStore::Index::kModules);
  if (!d) return prefixed("bundle file '" + path + "'", d.error());
  std::string hex = bare_sha256(d.value());
  note(hex);
  return hex;
}

Status BundleStaging::add_from_bundle_store(const symbolize::BundleStore& other, const std::string& digest) {
  const std::string dig = "sha256:" + bare_sha256(digest);
  auto p = other.blob_path(dig);
  if (!p) return prefixed("bundle " + dig, p.error());
  auto d = store_->put_file(p.value(), symbolize::BundleStore::Index::kModules);
  if (!d) return prefixed("bundle " + dig, d.error());
  if (Status st = copy_sidecars(other, *store_, dig); !st) return st;
  note(bare_sha256(digest));
  return {};
}

Status BundleStaging::copy_to(symbolize::BundleStore& other, const std::string& digest) const {
  const std::string dig = "sha256:" + bare_sha256(digest);
  auto p = store_->blob_path(dig);
  if (!p) return prefixed("bundle " + dig, p.error());
  auto bytes = read_text_file(p.value(), size_t{1} << 40);
  if (!bytes) return bytes.error();
  auto d = other.put(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
                     symbolize::BundleStore::Index::kNone);
  if (!d) return prefixed("storing bundle " + dig + " in '" + other.dir() + "'", d.error());
  return copy_sidecars(*store_, other, dig);
}

std::string BundleStaging::blob_path(const std::string& sha256) const {
  auto p = store_->blob_path("sha256:" + bare_sha256(sha256));
  return p ? p.value() : "";
}

std::string BundleStaging::sidecar_path(const std::string& sha256, const char* name) const {
  auto p = sidecar_file(*store_, "sha256:" + bare_sha256(sha256), name);
  return p ? p.value() : "";
}

// ----------------------------------------------------------------- indexes

std::vector<std::string> trace_bundles(const trace::Trace& t) {
  std::set<std::string> s;
  if (!t.symbol_bundle_sha256.empty()) s.insert(t.symbol_bundle_sha256);
  for (const auto& th : t.threads)
    for (const auto& f : th.frames)
      if (!f.bundle_sha256.empty()) s.insert(f.bundle_sha256);
  return {s.begin(), s.end()};
}

Result<std::string> bundle_index_json(const uint8_t* data, size_t len) {
  auto r = bundle::BundleReader::open(data, len);
  if (!r) return prefixed("bundle", r.error());
  evidence::Json mods = evidence::Json::array();
  for (const bundle::ModuleView& m : r.value().modules())
    mods.push_back({{"id_kind", bundle_id_kind_name(static_cast<int>(m.id_kind))},
                    {"id", evidence::hex_encode(m.id.data(), m.id.size())},
                    {"name", std::string(m.name)}});
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

Status export_bundle(trace::Store& store, const std::string& hex, symbolize::BundleStore& to) {
  auto row = store.get_symbol_bundle(hex);
  if (!row) return row.error();
  auto d = to.put(row->blob, symbolize::BundleStore::Index::kModules);
  if (!d) return d.error();
  for (auto [name, text] : {std::pair{"dsse.json", &row->dsse_envelope}, std::pair{"tlog-proof", &row->tlog_proof},
                            std::pair{"checkpoint", &row->checkpoint}}) {
    if (text->empty()) continue;
    if (Status st = to.put_sidecar(d.value(), name, *text); !st) return st;
  }
  return {};
}

const char* platform_of_snapshot(const memory::Snapshot& s) {
  for (const auto& m : s.modules)
    if (!m.build_id.empty() && m.path != kVdsoName) return platform_of(m.build_id.kind);
  return platform_of(IdKind::kNone);
}

// ----------------------------------------------------------------- a trace's bundle

Result<std::string> build_trace_bundle(Session& session, trace::Store& ts, symbolize::BundleStore& bstore,
                                       const std::vector<trace::Thread>& threads, const memory::Snapshot& s0,
                                       const CaptureOptions& opts, std::string* warnings) {
  std::set<std::string> touched, no_id;
  for (const auto& t : threads)
    for (const auto& f : t.frames) {
      if (!f.module_build_id.empty()) touched.insert(f.module_build_id);
      else if (!f.module_path.empty()) no_id.insert(f.module_path);
    }
  for (const auto& p : no_id) *warnings += "module " + p + " has no build-id: not in the bundle\n";
  BundleBuildInput in;
  std::set<std::string> seen;
  for (const auto& m : s0.modules) {
    if (m.build_id.empty() || !touched.count(m.build_id.hex()) || seen.count(m.build_id.hex())) continue;
    // [vdso] and other anonymous images have no file; a minidump's module (C:\...) has one when the
    // capture found it (open_path).
    if (m.open_path.empty() && (m.path.empty() || m.path[0] != '/')) {
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
                                                       : session.ctx.host_path(m.path);
    const std::string what = "module " + m.path + " (build-id " + m.build_id.hex() + "): ";
    auto img = object::open(path);
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
    if (img.value()->id() != m.build_id) {
      *warnings += what + "'" + path + "' is another build (build-id " +
                   (img.value()->id().empty() ? std::string("none") : img.value()->id().hex()) +
                   "): not in the bundle\n";
      continue;
    }
    seen.insert(m.build_id.hex());
    in.paths.push_back(path);
    // Modules are named by their basename in the process, not by the /proc/PID/root/... path read.
    const size_t slash = m.path.find_last_of(platform_of(m.build_id.kind) == std::string_view("windows") ? "/\\" : "/");
    in.names.push_back(slash == std::string::npos ? m.path : m.path.substr(slash + 1));
  }
  if (in.paths.empty()) return make_error(SPROV_ERR_NOT_FOUND, "no module of the trace has a file to build a bundle from");
  // Separate debug files are looked up where the context looks for them.
  in.debug_dirs = session.ctx.config().debug_dirs;
  auto bytes = build_bundle(in);
  if (!bytes) return prefixed("building the trace's bundle", bytes.error());
  const std::string digest = evidence::digest_string(evidence::sha256(bytes->data(), bytes->size()));
  trace::SymbolBundleRow row;
  row.sha256 = bare_sha256(digest);
  row.os = platform_of_snapshot(s0);
  row.blob = std::move(bytes.value());
  auto idx = bundle_index_json(row.blob.data(), row.blob.size());
  if (!idx) return idx.error();
  row.index_json = idx.value();
  if (auto d = bstore.put(row.blob, symbolize::BundleStore::Index::kModules); !d)
    return prefixed("storing bundle in '" + bstore.dir() + "'", d.error());
  if (!opts.sign_key.empty()) {
    auto index = sign_stored_bundle(bstore, digest, opts.sign_key, opts.log_dir, opts.log_key);
    if (!index) return prefixed("signing " + digest, index.error());
    for (auto [name, text] : {std::pair{"dsse.json", &row.dsse_envelope}, std::pair{"tlog-proof", &row.tlog_proof},
                              std::pair{"checkpoint", &row.checkpoint}}) {
      auto p = sidecar_file(bstore, digest, name);
      if (!p) return prefixed(name, p.error());
      auto t = read_text_file(p.value(), 16u << 20);
      if (!t) return t.error();
      *text = std::move(t.value());
    }
    if (auto kid = key_id(opts.sign_key)) row.signer = kid.value();
    row.rekor_tile_ref = opts.log_dir + "#" + std::to_string(index.value());
  }
  if (Status st = ts.put_symbol_bundle(row); !st) return st.error();
  return row.sha256;
}

}  // namespace stackprov::pipeline
