// SPDX-License-Identifier: Apache-2.0
// Building symbol bundles from module files; signing stored bundles into a transparency log.
#include "pipeline/bundle_build.hpp"

#include <sys/stat.h>

#include <optional>
#include <tuple>

#include "bundle/format.hpp"
#include "dwarf/object_sections.hpp"
#include "evidence/dsse.hpp"
#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "evidence/keys.hpp"
#include "evidence/note.hpp"
#include "evidence/tlog.hpp"
#include "macho/macho_object.hpp"
#include "object/object_image.hpp"
#include "pe/pe_object.hpp"
#include "pipeline/macho_bundle.hpp"
#include "pipeline/object_bundle.hpp"
#include "pipeline/pe_bundle.hpp"
#include "symbolize/bundle_builder.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/module_unwind.hpp"

namespace stackprov::pipeline {

namespace {

std::string base_name(const std::string& p) {
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

uint64_t file_size(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

/// Whether `image` (of a format other than ELF) has a separate debug file its DWARF is in (a Mach-O
/// image's dSYM, found by UUID): its ranges then come from the DWARF builder, which finds it as the
/// resolver does. A debug file of another build is an error (SPROV_ERR_BUILD_ID_MISMATCH naming
/// both identities), not a bundle of the symbols alone.
Result<bool> has_debug_file(const object::ObjectImage& image, const symbolize::BundleBuildOptions& opts) {
  auto d = image.find_debug_file(opts.debug);
  if (d.ok()) return true;
  if (d.error().code == SPROV_ERR_BUILD_ID_MISMATCH) return d.error();
  return false;
}

/// One module: ranges (builder), unwind rows (the unwinder's CFI lookup), the debug file.
Result<bundle::ModuleContents> build_module(const std::string& path, const symbolize::BundleBuildOptions& opts,
                                            bool include_debug) {
  // A file of another registered object format (lib/object): its identity, symbols and unwind
  // source's rows; when it has DWARF (a mingw PE), its ranges, inline chains and return pads are
  // the DWARF builder's. ELF (and what no format claims: ELF's errors) goes to the DWARF builder below.
  const object::Format* format = object::sniff_path(path);  // its head only: an ELF file is opened once, below
  if (format != nullptr && format->name != "elf") {
    auto obj = object::open(path);
    if (!obj.ok()) return std::move(obj).error();
    auto mc = object_module_contents(obj.value(), opts.name.empty() ? base_name(path) : opts.name);
    Result<bool> debug_file = false;
    if (mc.ok() && !has_pdb(*obj.value()) && dwarf::dwarf_sections(*obj.value()).info.empty())
      debug_file = has_debug_file(*obj.value(), opts);
    if (!debug_file) return debug_file.error();
    if (mc.ok() && has_pdb(*obj.value())) {  // a PE with a PDB: its ranges are the PDB's (doc/windows.md)
      if (Status st = add_pdb_ranges(*obj.value(), opts.debug, &mc.value()); !st) return st.error();
    } else if (mc.ok() && (!dwarf::dwarf_sections(*obj.value()).info.empty() || debug_file.value() ||
                           !obj.value()->debug_map_ranges().empty())) {  // a Mach-O debug map's objects: the resolver's
      auto dm = symbolize::build_module_contents(path, opts, nullptr);
      if (!dm) return dm.error();
      mc.value().ranges = std::move(dm.value().ranges);
      mc.value().return_pads = std::move(dm.value().return_pads);
      mc.value().sha256_debug = dm.value().sha256_debug;
    }
    if (mc.ok()) {  // x64 epilogs: the rows of a frame 0 stopped in one (the code is not in the bundle)
      auto n = add_epilog_rows(*obj.value(), &mc.value());
      if (!n) return n.error();
      // Mach-O: the prologue/epilogue rows of a frame 0 (compact unwind describes bodies only).
      auto ff = add_first_frame_rows(*obj.value(), &mc.value());
      if (!ff) return ff.error();
    }
    if (mc.ok() && include_debug) {
      const auto bytes = obj.value()->file_bytes();
      mc.value().debug_blob.assign(bytes.begin(), bytes.end());
    }
    return mc;
  }
  symbolize::BundleBuildReport rep;
  auto mc = symbolize::build_module_contents(path, opts, &rep);
  if (!mc) return mc.error();
  auto img = object::open(path);
  if (!img) return img.error();
  auto lm = unwind::LoadedModule::load(img.value(), opts.debug);
  if (!lm) return lm.error();
  auto rows = unwind::bundle_unwind_rows(*lm.value());
  if (!rows) return rows.error();
  mc.value().unwind_rows = std::move(rows.value());
  if (include_debug) {
    const std::string& dbg = rep.debug_file.empty() ? path : rep.debug_file;
    auto bytes = evidence::read_file(dbg, size_t{4} << 30);
    if (!bytes) return make_error(bytes.error().code, "--include-debug: '%s': %s", dbg.c_str(), bytes.error().message.c_str());
    mc.value().debug_blob = std::move(bytes.value());
  }
  return mc;
}

/// `r` prefixed with what was being done (the error's code kept).
Error prefixed(const std::string& what, const Error& e) {
  return make_error(e.code, "%s: %s", what.c_str(), e.message.c_str());
}

/// The in-toto predicate of a signed bundle: its modules' identities and names (canonical JSON).
std::string bundle_predicate(const bundle::BundleReader& r) {
  evidence::Json mods = evidence::Json::array();
  for (const auto& m : r.modules()) {
    mods.push_back({{"id_kind", bundle_id_kind_name(static_cast<int>(m.id_kind))},
                    {"id", evidence::hex_encode(m.id.data(), m.id.size())},
                    {"name", m.name},
                    {"sha256_file", evidence::hex_encode(m.sha256_file.data(), m.sha256_file.size())}});
  }
  return evidence::canonical_json(evidence::Json{{"modules", mods}});
}

/// A DSSE envelope (in-toto statement) over the file at `artifact`, signed with `key_path`.
Result<std::string> sign_file(const std::string& key_path, const std::string& artifact, const std::string& subject,
                              const std::string& predicate_type, const std::string& predicate_json) {
  auto key = evidence::SigningKey::load(key_path);
  if (!key) return key.error();
  auto h = evidence::sha256_file(artifact);
  if (!h) return h.error();
  auto predicate = evidence::parse_json(predicate_json, "predicate_json");
  if (!predicate) return predicate.error();
  std::string stmt = evidence::make_statement({evidence::Subject{subject, h.value()}}, predicate_type, predicate.value());
  auto env = evidence::sign_envelope(evidence::kInTotoPayloadType, stmt, key.value());
  if (!env) return env.error();
  return evidence::serialize_envelope(env.value());
}

/// The checkpoint of `log` signed with `key_path` (which must be the log's key).
Result<std::string> signed_checkpoint(evidence::Tlog& log, const std::string& key_path) {
  auto key = evidence::SigningKey::load(key_path);
  if (!key) return key.error();
  if (Status st = log.check_key(key.value(), key_path); !st) return st.error();
  return log.sign_checkpoint(key.value());
}

/// Appends `entry` to `log` and signs the new checkpoint with `key_path`: the entry's index.
Result<uint64_t> append_signed(evidence::Tlog& log, std::string_view entry, const std::string& key_path,
                               std::string* note) {
  auto key = evidence::SigningKey::load(key_path);
  if (!key) return key.error();
  if (Status st = log.check_key(key.value(), key_path); !st) return st.error();
  return log.append({entry}, &key.value(), note);
}

}  // namespace

const char* bundle_id_kind_name(int kind) noexcept {
  // A bundle stores kinds 1..4 (SPROV_BUNDLE_ID_*, the values of IdKind); 0 is not a bundle's.
  if (kind < 1 || kind > kMaxIdKind) return "unknown";
  return id_kind_name(static_cast<IdKind>(kind));
}

std::string module_key(const ModuleId& id) {
  switch (id.kind) {
    case IdKind::kElfBuildId: return id.empty() ? std::string() : id.hex();
    case IdKind::kPdbGuidAge: return pe::symbol_server_key(id);
    case IdKind::kPeCodeId: return pe::code_id_key(id);
    case IdKind::kMachoUuid: return macho::uuid_string(id);
    default: return {};
  }
}

Result<std::vector<uint8_t>> build_bundle(const BundleBuildInput& in) {
  symbolize::BundleBuildOptions bo;
  if (!in.debug_dirs.empty()) bo.debug.debug_dirs = in.debug_dirs;
  const size_t count = in.paths.size();
  uint64_t total = 0, done = 0;
  for (const auto& p : in.paths) total += file_size(p);
  if (in.progress) in.progress(0, count, 0, total);
  bundle::BundleContents bc;
  std::vector<std::string> from;  // input file of each module, to name duplicates
  for (size_t i = 0; i < count; ++i) {
    const std::string& path = in.paths[i];
    bo.name = i < in.names.size() && !in.names[i].empty() ? in.names[i] : base_name(path);
    if (in.progress) {  // within a module: its share of the input bytes, by executable bytes scanned
      const uint64_t size = file_size(path);
      bo.progress = [&in, i, count, done, size, total](double f) {
        in.progress(i, count, done + static_cast<uint64_t>(f * static_cast<double>(size)), total);
      };
    }
    auto mc = build_module(path, bo, in.include_debug);
    if (!mc) return mc.error();
    for (size_t j = 0; j < bc.modules.size(); ++j)
      if (bc.modules[j].id.kind == mc.value().id.kind && bc.modules[j].id.bytes == mc.value().id.bytes)
        return make_error(SPROV_ERR_INVALID_ARG, "'%s' and '%s' have the same build-id %s: one bundle holds a module once",
                          from[j].c_str(), path.c_str(), evidence::hex_encode(mc.value().id.bytes).c_str());
    bc.modules.push_back(std::move(mc.value()));
    from.push_back(path);
    done += file_size(path);
    if (in.progress) in.progress(i + 1, count, done, total);
  }
  return bundle::write_bundle(std::move(bc));
}

Status check_signing(const std::string& key, const std::string& log_dir, const std::string& log_key_in) {
  if (key.empty()) return make_error(SPROV_ERR_INVALID_ARG, "signing needs a key (key_path)");
  if (log_dir.empty()) return make_error(SPROV_ERR_INVALID_ARG, "signing needs a transparency log (log_dir)");
  const std::string& log_key = log_key_in.empty() ? key : log_key_in;
  auto signer = evidence::SigningKey::load(key);
  if (!signer) return signer.error();
  auto checkpoint_key = log_key == key ? signer : evidence::SigningKey::load(log_key);
  if (!checkpoint_key) return checkpoint_key.error();
  auto log = evidence::Tlog::open(log_dir);
  if (!log) return log.error();
  return log.value().check_key(checkpoint_key.value(), log_key);
}

Result<uint64_t> sign_stored_bundle(symbolize::BundleStore& store, const std::string& digest, const std::string& key,
                                    const std::string& log_dir, const std::string& log_key_in) {
  // Keys and log first: a key that cannot sign leaves the log and the store as they were.
  if (Status st = check_signing(key, log_dir, log_key_in); !st) return st.error();
  const std::string& log_key = log_key_in.empty() ? key : log_key_in;
  auto blob = store.blob_path(digest);
  if (!blob) return blob.error();
  auto reader = bundle::BundleReader::open_file(blob.value());
  if (!reader) return reader.error();
  auto env = sign_file(key, blob.value(), digest, "https://stackprov.dev/symbol-bundle/v1", bundle_predicate(reader.value()));
  if (!env) return prefixed("sign with key '" + key + "'", env.error());
  auto log = evidence::Tlog::open(log_dir);
  if (!log) return prefixed("log '" + log_dir + "'", log.error());
  std::string note;
  uint64_t index = 0;
  auto found = log.value().find(env.value());
  if (!found) return prefixed("log '" + log_dir + "'", found.error());
  if (found.value()) {
    index = *found.value();
    auto n = signed_checkpoint(log.value(), log_key);
    if (!n) return prefixed("checkpoint of log '" + log_dir + "' with key '" + log_key + "'", n.error());
    note = std::move(n.value());
  } else {
    auto i = append_signed(log.value(), env.value(), log_key, &note);
    if (!i) return prefixed("append to log '" + log_dir + "'", i.error());
    index = i.value();
  }
  auto proof = log.value().prove(index);
  if (!proof) return prefixed("inclusion proof of log entry " + std::to_string(index), proof.error());
  for (auto [name, text] : {std::tuple{"dsse.json", env.value()}, std::tuple{"tlog-proof", evidence::format_tlog_proof(proof.value())},
                            std::tuple{"checkpoint", note}}) {
    if (Status st = store.put_sidecar(digest, name, text); !st) return st.error();
  }
  return index;
}

Result<std::string> sidecar_file(const symbolize::BundleStore& store, const std::string& digest, const std::string& name) {
  auto p = store.sidecar_path(digest, name);
  if (!p) return p.error();
  struct stat st;
  if (stat(p.value().c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(SPROV_ERR_NOT_FOUND, "bundle %s has no '%s' sidecar in store '%s' (%s)", digest.c_str(), name.c_str(),
                      store.dir().c_str(), p.value().c_str());
  return p;
}

Result<std::string> key_id(const std::string& key_path) {
  auto k = evidence::load_public_key(key_path.c_str(), true);
  if (!k) return k.error();
  return k.value().key_id_hex();
}

}  // namespace stackprov::pipeline
