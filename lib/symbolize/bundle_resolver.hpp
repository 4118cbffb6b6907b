// SPDX-License-Identifier: Apache-2.0
// Bundle resolver: module identity -> its symbol bundle (store or given) -> inline chain, with provenance.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "symbolize/bundle_store.hpp"
#include "symbolize/dwarf_resolver.hpp"

namespace stackprov::symbolize {

/// An open bundle and its identity.
struct OpenBundle {
  std::string digest;  ///< "sha256:<hex>" of the file's bytes
  std::string path;    ///< where it was read from
  bundle::BundleReader reader;
};

/// "<kind>:<hex>" of a module identity, e.g. "elf-build-id:4f1c..." (for messages).
std::string module_id_string(bundle::IdKind kind, std::span<const uint8_t> id);

/// Answers addresses of modules from symbol bundles. The bundle of a module is
/// the one the store's id map names for its identity or, when one was given
/// with use_bundle(), that bundle. A bundle is used only when it holds a module
/// with exactly that identity: a given bundle without it is an error naming
/// both ids, and so is a store entry naming a bundle without it (a corrupt
/// store). Open bundles are cached per digest, id-map answers per identity
/// (a bundle put into the store after the first miss is seen by a new resolver).
/// Thread-safe: lookups of open bundles are lock-free reads of the reader;
/// the caches are guarded by a mutex.
class BundleResolver {
 public:
  /// `store_dir`: nullopt = no store, "" = BundleStore::default_dir(). The store
  /// is opened on first use; an error opening it is returned by every resolve().
  explicit BundleResolver(std::optional<std::string> store_dir) : store_dir_(std::move(store_dir)) {}

  /// Answers every module from `spec` instead of the store: "sha256:<hex>" (a
  /// bundle in the store) or a bundle file's path (its digest is computed).
  Status use_bundle(const std::string& spec);

  /// True when a store or a given bundle may answer.
  bool enabled() const { return store_dir_.has_value() || given_ != nullptr; }

  /// Fills `out` (resolver kBundle, source and bundle_digest "sha256:<hex>",
  /// frames innermost first with linkage names, not demangled) and returns
  /// true when the module's bundle covers `addr`; false when no bundle holds
  /// the module or its ranges do not cover `addr` (`*found_bundle` says which).
  /// Errors: the store cannot be opened, the bundle is unreadable or hostile,
  /// or the bundle's module identity differs (both ids named).
  /// `table_names` (SymtabPolicy::kWithDebugFile, outside llvm-symbolizer mode): the outermost
  /// frame is named by the bundle's symbol-name records (format 5) when it has them — the symbol
  /// tables' choice among aliases, with its start (has_start_address) — as DwarfResolver names it
  /// from the module's tables; an address only those records cover is answered with that one frame
  /// (provenance "bundle+symtab"). Otherwise the ranges' (llvm-symbolizer-14's) names, no start.
  Result<bool> resolve(bundle::IdKind kind, std::span<const uint8_t> id, uint64_t addr, Resolution* out,
                       bool* found_bundle = nullptr, bool table_names = false);

  /// The store directory in use ("" before the store is opened or without one).
  std::string store_dir() const;

  /// The bundle that holds the module (the given one, or the store's for its identity); null
  /// when none does. The errors of resolve().
  Result<std::shared_ptr<const OpenBundle>> bundle_of(bundle::IdKind kind, std::span<const uint8_t> id);

 private:
  struct ModuleRef {
    std::shared_ptr<const OpenBundle> bundle;  ///< null: no bundle for this identity
    size_t module = 0;
  };
  Result<const BundleStore*> store();
  Result<std::shared_ptr<const OpenBundle>> open_digest(const std::string& digest);
  Result<ModuleRef> module_ref(bundle::IdKind kind, std::span<const uint8_t> id);

  std::optional<std::string> store_dir_;
  mutable std::mutex mu_;
  std::optional<BundleStore> store_;
  std::optional<Error> store_error_;
  std::shared_ptr<const OpenBundle> given_;
  std::unordered_map<std::string, std::shared_ptr<const OpenBundle>> bundles_;  ///< by digest
  std::unordered_map<std::string, ModuleRef> modules_;                          ///< by kind byte + id bytes
};

/// Opens a bundle file and computes its digest (sha256 of the bytes).
Result<std::shared_ptr<const OpenBundle>> open_bundle_file(const std::string& path);

}  // namespace stackprov::symbolize
