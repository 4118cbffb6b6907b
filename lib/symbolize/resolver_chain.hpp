// SPDX-License-Identifier: Apache-2.0
// The resolver chain: a policy (debuginfod, bundle, dwarf, gopclntab, symtab, dynsym, demangle) tried in order, per-frame provenance.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "object/object_image.hpp"
#include "symbolize/bundle_resolver.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "symbolize/gopclntab.hpp"
#include "symbolize/pdb_resolver.hpp"
#include "symbolize/resolve_attempt.hpp"

namespace stackprov::symbolize {

/// doc/bundles.md "Resolver policy". The answering steps are tried in the
/// order of the list: "bundle" (the module's bundle, by identity), "dwarf"
/// (DWARF of the module or its debug file; a PE image's PDB first), "gopclntab" (a Go binary's
/// pclntab: names, lines and inline chains, also when stripped), "symtab" and "dynsym" (symbol
/// tables, when DWARF has no answer). "debuginfod" lets the DWARF step fetch
/// the debug file from DEBUGINFOD_URLS when none is on disk (it never
/// re-downloads a local file); its position counts only when "dwarf" is
/// absent (the DWARF step then sits there). "demangle" makes names demangled.
/// So the default "debuginfod,bundle,dwarf,..." asks the store's bundle
/// first, then local DWARF, fetching from debuginfod only when none is local. Offline: only "bundle" runs
/// (no module file, debug file or network is opened).
struct ResolverPolicy {
  enum class Step { kBundle, kDwarf, kGopclntab, kSymtab, kDynsym };
  std::vector<Step> order;
  bool debuginfod = false;
  bool dwarf = false;  ///< local DWARF ("dwarf" in the list)
  bool demangle = false;
  bool offline = false;

  /// From validated names (ContextConfig::resolvers).
  static ResolverPolicy from_names(const std::vector<std::string>& names, bool offline);
  bool has(Step s) const;
};

/// One module as the chain sees it: its file (null when unknown or offline)
/// and its identity (the snapshot's or the caller's; else the file's).
struct ChainModule {
  std::shared_ptr<const object::ObjectImage> image;
  ModuleId build_id;
};

/// Resolves module addresses through the policy's steps in order and records
/// which step answered (Resolution::resolver, source, bundle_digest).
/// Thread-safe as its resolvers are.
class ResolverChain {
 public:
  /// `store_dir`: nullopt = no store (the bundle step never answers).
  ResolverChain(ResolverPolicy policy, DwarfResolverOptions dwarf_opts, std::optional<std::string> store_dir);

  const ResolverPolicy& policy() const { return policy_; }
  BundleResolver& bundles() { return bundles_; }
  /// The DWARF step's resolver; null when no step needs it (offline, bundle-only).
  DwarfResolver* dwarf() { return dwarf_.get(); }

  /// Fills `out` (at least one frame; resolver kNone when no step answers)
  /// and returns whether a step answered. A failing bundle step (store
  /// unreadable, identity mismatch with a given bundle, hostile bundle) does
  /// not answer; its error goes to `*bundle_error` and the next steps run:
  /// the caller decides whether the error is fatal.
  bool resolve(const ChainModule& m, uint64_t addr, SymtabPolicy symtab_policy, Resolution* out,
               std::optional<Error>* bundle_error);

  /// What each step of the policy looked at for module `m`, in the policy's order, and why each
  /// did not serve (ResolveAttempt, not per_address). The DWARF step's files and servers are
  /// known only when the chain was made with DwarfResolverOptions::record_attempts; the other
  /// steps are looked at when this is called (nothing is kept for it otherwise).
  void explain_module(const ChainModule& m, std::vector<ResolveAttempt>* out);
  /// For `addr` of `m` and the chain's answer to it: each step before the answering one that
  /// looked and did not cover it (the DWARF step: "no DWARF covering the address"), then the
  /// answering step (kAnswered: the answer's provenance and source) or kNotAnswered. per_address.
  void explain_address(const ChainModule& m, uint64_t addr, const Resolution& answer,
                       std::vector<ResolveAttempt>* out);

  /// True when some step can answer without a module file (the bundle step).
  bool answers_without_file() const { return policy_.has(ResolverPolicy::Step::kBundle) && bundles_.enabled(); }

 private:
  ResolverPolicy policy_;
  std::unique_ptr<DwarfResolver> dwarf_;  ///< null when no step needs it (offline, bundle-only)
  BundleResolver bundles_;
  GoResolver go_;  ///< the "gopclntab" step (doc/runtime-frames.md "Go")
  /// A PE image's PDB, asked at the DWARF step before DWARF (doc/windows.md "PDB symbols"); null
  /// when no step needs it.
  std::unique_ptr<PdbResolver> pdb_;
};

}  // namespace stackprov::symbolize
