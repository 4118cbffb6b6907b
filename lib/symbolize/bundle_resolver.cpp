// SPDX-License-Identifier: Apache-2.0
// Bundle resolver: module identity -> its symbol bundle (store or given) -> inline chain, with provenance.
#include "symbolize/bundle_resolver.hpp"

#include <string_view>

#include "evidence/encoding.hpp"
#include "pdb/pdb_file.hpp"
#include "pe/pe_object.hpp"

namespace stackprov::symbolize {

namespace {

const char* kind_name(bundle::IdKind kind) {
  switch (kind) {
    case bundle::IdKind::kElfBuildId: return "elf-build-id";
    case bundle::IdKind::kPdbGuidAge: return "pdb-guid-age";
    case bundle::IdKind::kMachoUuid: return "macho-uuid";
    case bundle::IdKind::kPeCodeId: return "pe-code-id";
    case bundle::IdKind::kNone: break;  // no bundle holds an empty identity
  }
  return "unknown-id";
}

/// The identities a bundle holds, for the mismatch message (at most a few).
std::string held_ids(const bundle::BundleReader& r) {
  std::string s;
  size_t n = 0;
  for (const auto& m : r.modules()) {
    if (n == 4) {
      s += ", ... (" + std::to_string(r.modules().size()) + " modules)";
      break;
    }
    s += (n++ ? ", " : "") + module_id_string(m.id_kind, m.id);
  }
  return s.empty() ? std::string("no module") : s;
}

}  // namespace

std::string module_id_string(bundle::IdKind kind, std::span<const uint8_t> id) {
  std::string s = std::string(kind_name(kind)) + ":" + evidence::hex_encode(id.data(), id.size());
  if (kind == IdKind::kPdbGuidAge) {  // and the symbol-server key users know it by (NAME.pdb/KEY/NAME.pdb)
    const std::string key = pdb::guid_age_key(ModuleId::from_bytes(id.data(), id.size(), kind));
    if (!key.empty()) s += " (key " + key + ")";
  } else if (kind == IdKind::kPeCodeId) {  // and the key symbol stores file images under (NAME/KEY/NAME)
    const std::string key = pe::code_id_key(ModuleId::from_bytes(id.data(), id.size(), kind));
    if (!key.empty()) s += " (key " + key + ")";
  }
  return s;
}

Result<std::shared_ptr<const OpenBundle>> open_bundle_file(const std::string& path) {
  auto r = bundle::BundleReader::open_file(path);
  if (!r) return std::move(r).error();
  auto b = std::make_shared<OpenBundle>(OpenBundle{std::string(), path, std::move(r).value()});
  b->digest = evidence::digest_string(evidence::sha256(b->reader.data(), b->reader.size()));
  return std::shared_ptr<const OpenBundle>(std::move(b));
}

std::string BundleResolver::store_dir() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_ ? store_->dir() : std::string();
}

Result<const BundleStore*> BundleResolver::store() {
  // Called under mu_.
  if (store_) return &*store_;
  if (store_error_) return *store_error_;
  if (!store_dir_) return make_error(SPROV_ERR_NOT_FOUND, "no bundle store configured");
  auto s = BundleStore::open(*store_dir_, false);
  if (!s) {
    store_error_ = s.error();
    return std::move(s).error();
  }
  store_.emplace(std::move(s).value());
  return &*store_;
}

Result<std::shared_ptr<const OpenBundle>> BundleResolver::open_digest(const std::string& digest) {
  // Called under mu_.
  if (auto it = bundles_.find(digest); it != bundles_.end()) return it->second;
  auto st = store();
  if (!st) return std::move(st).error();
  auto path = st.value()->blob_path(digest);
  if (!path) return std::move(path).error();
  auto r = bundle::BundleReader::open_file(path.value());
  if (!r)
    return make_error(r.error().code, "bundle %s in store '%s': %s", digest.c_str(), st.value()->dir().c_str(),
                      r.error().message.c_str());
  // A blob is named by its sha256: checked once per open, so a blob altered in the store is not
  // used under a digest it does not have (its frames would carry that digest as provenance).
  const std::string actual =
      "sha256:" + evidence::hex_encode(evidence::sha256(r.value().data(), r.value().size()));
  if (actual != digest)
    return make_error(SPROV_ERR_DIGEST_MISMATCH, "bundle %s in store '%s': %s has sha256 %s (the blob was altered)",
                      digest.c_str(), st.value()->dir().c_str(), path.value().c_str(), actual.c_str() + 7);
  auto b = std::make_shared<const OpenBundle>(OpenBundle{digest, path.value(), std::move(r).value()});
  bundles_.emplace(digest, b);
  return std::shared_ptr<const OpenBundle>(b);
}

Status BundleResolver::use_bundle(const std::string& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const OpenBundle> b;
  if (spec.rfind("sha256:", 0) == 0) {
    auto hex = parse_bundle_digest(spec);
    if (!hex) return std::move(hex).error();
    auto r = open_digest("sha256:" + hex.value());
    if (!r) return std::move(r).error();
    b = std::move(r).value();
  } else {
    auto r = open_bundle_file(spec);
    if (!r) return std::move(r).error();
    b = std::move(r).value();
  }
  given_ = std::move(b);
  modules_.clear();
  return {};
}

Result<BundleResolver::ModuleRef> BundleResolver::module_ref(bundle::IdKind kind, std::span<const uint8_t> id) {
  // Cache key: the kind byte and the raw id bytes (no formatting on the warm path).
  std::string key(1, static_cast<char>(kind));
  key.append(reinterpret_cast<const char*>(id.data()), id.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = modules_.find(key); it != modules_.end()) return it->second;
  ModuleRef ref;
  if (given_) {
    const bundle::ModuleView* mv = given_->reader.find_module(kind, id);
    if (mv == nullptr)
      return make_error(SPROV_ERR_BUILD_ID_MISMATCH, "bundle %s ('%s') holds %s, not the module's %s", given_->digest.c_str(),
                        given_->path.c_str(), held_ids(given_->reader).c_str(), module_id_string(kind, id).c_str());
    ref.bundle = given_;
    ref.module = mv->index;
  } else {
    auto st = store();
    if (!st) return std::move(st).error();
    auto digest = st.value()->find(kind, id);
    if (!digest) return std::move(digest).error();
    if (digest.value()) {
      auto b = open_digest(*digest.value());
      if (!b) return std::move(b).error();
      const bundle::ModuleView* mv = b.value()->reader.find_module(kind, id);
      if (mv == nullptr)
        return make_error(SPROV_ERR_BUILD_ID_MISMATCH, "store '%s' maps %s to bundle %s, which holds %s (run stackprov bundle fsck)",
                          st.value()->dir().c_str(), module_id_string(kind, id).c_str(), b.value()->digest.c_str(),
                          held_ids(b.value()->reader).c_str());
      ref.bundle = std::move(b).value();
      ref.module = mv->index;
    }
  }
  modules_.emplace(key, ref);
  return ref;
}

Result<std::shared_ptr<const OpenBundle>> BundleResolver::bundle_of(bundle::IdKind kind, std::span<const uint8_t> id) {
  auto ref = module_ref(kind, id);
  if (!ref) return std::move(ref).error();
  return ref.value().bundle;
}

Result<bool> BundleResolver::resolve(bundle::IdKind kind, std::span<const uint8_t> id, uint64_t addr,
                                     Resolution* out, bool* found_bundle, bool table_names) {
  if (found_bundle) *found_bundle = false;
  if (id.empty()) return false;
  auto ref = module_ref(kind, id);
  if (!ref) return std::move(ref).error();
  if (!ref.value().bundle) return false;
  if (found_bundle) *found_bundle = true;
  const OpenBundle& b = *ref.value().bundle;
  auto chain = b.reader.lookup(ref.value().module, addr);
  if (b.reader.file_changed())
    return make_error(SPROV_ERR_IO, "bundle %s ('%s') was truncated while mapped: no answer is given from it",
                      b.digest.c_str(), b.path.c_str());
  if (!chain)
    return make_error(chain.error().code, "bundle %s: %s", b.digest.c_str(), chain.error().message.c_str());
  bundle::BundleReader::SymbolLookup sym;
  if (table_names) {
    auto s = b.reader.symbol(ref.value().module, addr);
    if (!s) return make_error(s.error().code, "bundle %s: %s", b.digest.c_str(), s.error().message.c_str());
    sym = s.value();
  }
  if (chain.value().empty() && !sym.found) return false;
  *out = Resolution{};
  // The bundle's chain is outermost first; a Resolution's is innermost first.
  const auto& frames = chain.value();
  out->frames.reserve(frames.size());
  for (size_t k = frames.size(); k-- > 0;) {
    ResolvedFrame f;
    f.linkage_name = std::string(frames[k].function);
    f.function = f.linkage_name;
    // Bundles carry linkage names only (no DW_AT_name): short names are the linkage names.
    f.short_function = f.linkage_name;
    f.file = std::string(frames[k].file);
    f.line = frames[k].line;
    f.column = frames[k].column;
    out->frames.push_back(std::move(f));
  }
  if (sym.found) {
    // The naming rule's name and start (doc/symbols.md "The alias rule"), as from the module's tables.
    if (out->frames.empty()) out->frames.emplace_back();
    ResolvedFrame& outer = out->frames.back();
    outer.linkage_name.assign(sym.name);
    outer.function = outer.short_function = outer.linkage_name;
    outer.has_start_address = true;
    outer.start_address = sym.sym_start;
  }
  out->resolver = ResolvedBy::kBundle;
  out->symbol_named = true;  // no record of which tables named it: keep the physical name
  out->source = b.digest;
  out->bundle_digest = b.digest;
  out->source_build_id = ModuleId::from_bytes(id.data(), id.size(), kind);
  out->pdb_lines = b.reader.modules()[ref.value().module].pdb_lines;
  // A symbol-table range (no DWARF there): the frame-level note, like "minidebuginfo+symtab".
  out->provenance =
      chain.value().empty() || b.reader.from_symtab(ref.value().module, addr) ? "bundle+symtab" : "bundle";
  return true;
}

}  // namespace stackprov::symbolize
