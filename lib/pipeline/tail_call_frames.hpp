// SPDX-License-Identifier: Apache-2.0
// gdb's tail-call frames (DWARF call sites) inserted into an unwound stack: what `stack`
// (sprov_symbolizer_tail_calls) and a trace's capture (resolve_threads) both add.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "dwarf/dwarf_index.hpp"
#include "memory/snapshot.hpp"
#include "object/object_image.hpp"
#include "symbolize/bundle_resolver.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "unwind/frame.hpp"

namespace stackprov::pipeline {

/// What the tail-call search asks of one module, at its link-time addresses (dwarf::TailCallQueries
/// per module): its DWARF (dwarf_call_sites) or its bundle's call-site section (bundle_call_sites).
class ModuleCallSites {
 public:
  virtual ~ModuleCallSites() = default;
  virtual bool call_site_at(uint64_t ret, dwarf::CallSiteInfo* out) = 0;
  virtual bool function_entry(uint64_t pc, uint64_t* entry) = 0;
  virtual bool tail_calls_of(uint64_t entry, std::vector<dwarf::CallSiteInfo>* out) = 0;
  /// A function symbol by name, for a call site naming a declaration (gdb's minimal symbols);
  /// *global says whether it is global or weak. False when the module cannot say.
  virtual bool symbol_address(std::string_view name, uint64_t* addr, bool* global) = 0;
};

/// The call sites of module `index` of the stack's module list (null: none, e.g. no file and no bundle).
using CallSitesOf = std::function<std::shared_ptr<ModuleCallSites>(int32_t index)>;

/// A module's DWARF through `dwarf` (which must outlive the answer).
std::shared_ptr<ModuleCallSites> dwarf_call_sites(symbolize::DwarfResolver& dwarf,
                                                  std::shared_ptr<const object::ObjectImage> image);
/// Module `module` of a bundle, from its call-site section (doc/bundles.md "Call sites"), decoded
/// and checked now (the reader's errors, naming the value); a module without the section answers
/// nothing. The answer keeps its own copy: the reader may go.
Result<std::shared_ptr<ModuleCallSites>> bundle_call_sites(const bundle::BundleReader& reader, size_t module);

/// Bundle modules' call sites by module identity, each section decoded once (per cache).
class BundleCallSitesCache {
 public:
  /// Module `m`'s call sites from the bundle `bundles` gives for its identity (the store's, or the
  /// one given); null when no bundle holds it or `bundles` has neither. A bundle that cannot be read
  /// or whose section is hostile answers null too: that stack gets no tail-call frames there (the
  /// same bundle's errors surface when its frames are named).
  std::shared_ptr<ModuleCallSites> get(symbolize::BundleResolver& bundles, const memory::SnapshotModule& m);

 private:
  std::map<std::pair<const bundle::BundleReader*, size_t>, std::shared_ptr<ModuleCallSites>> cache_;
};

/// `frames` with gdb's tail-call frames inserted (doc/unwinding.md "Tail-call frames"): between a
/// frame and its caller found by a CFI table at a return address, the call sites all chains of
/// tail calls share (dwarf::tail_call_frames), asked of the modules that have a frame in the
/// stack through `sites_of` (each asked on its first question). Each inserted frame has method
/// kTailCall, flag kFlagInferred, pc its site's return pc, sp the callee's CFA, cfa 0. `origin`
/// (optional) receives, per output frame, its index in `frames`, or -1 for an inferred one. At most
/// 65536 frames are inferred.
std::vector<unwind::Frame> with_tail_call_frames(const std::vector<unwind::Frame>& frames,
                                                 const std::vector<memory::SnapshotModule>& modules,
                                                 const CallSitesOf& sites_of, std::vector<int64_t>* origin = nullptr);

/// The file of module `index` of the stack's module list for the search (null: none, e.g. no file).
using TailCallImageOf = std::function<std::shared_ptr<const object::ObjectImage>(int32_t index)>;

/// The same with every module's DWARF through `dwarf` (their files from `image_of`).
std::vector<unwind::Frame> with_tail_call_frames(symbolize::DwarfResolver& dwarf,
                                                 const std::vector<unwind::Frame>& frames,
                                                 const std::vector<memory::SnapshotModule>& modules,
                                                 const TailCallImageOf& image_of, std::vector<int64_t>* origin = nullptr);

}  // namespace stackprov::pipeline
