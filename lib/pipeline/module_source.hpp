// SPDX-License-Identifier: Apache-2.0
// The module-source chain (issue 32): where a snapshot module's unwind and symbol data comes from
// -- the vDSO from the snapshot's bytes; offline, its bundle; else the file (of any registered
// object format) checked against the snapshot's identity, the bundle instead of a missing file or
// another build, and last an image rebuilt from the process's memory -- cached by identity.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/context.hpp"
#include "core/error.hpp"
#include "core/module_cache.hpp"
#include "memory/snapshot.hpp"
#include "unwind/module_unwind.hpp"

namespace stackprov::pipeline {

/// What the chain reads and updates: the context's configuration (sysroot, debug directories,
/// bundle store, offline), its module cache, and the count of modules loaded.
struct ModuleSources {
  const Context& context;
  const ContextConfig& config;
  ModuleCache<unwind::LoadedModule>& cache;
  std::atomic<uint64_t>& loaded;
  std::string host_path(const std::string& p) const { return context.host_path(p); }
};

/// The bundle a context's store names for a snapshot module (by its identity).
struct ModuleBundle {
  std::string digest;     ///< "sha256:<hex>"
  std::string path;       ///< the blob's file
  std::string store_dir;
};
/// SPROV_ERR_NOT_FOUND (naming the module, its build-id and the store) when there
/// is no store, no build-id or no bundle for it.
Result<ModuleBundle> find_module_bundle(const ContextConfig& cfg, const memory::SnapshotModule& m);

/// Loads (or finds in the cache) the unwind/symbol data of module `m` of `snap` (may be null: no
/// vDSO bytes, no memory image). Offline no file is opened: the module is backed by its bundle
/// (LoadedModule::bundle(), no image). Otherwise its file under `module_root` (a process's root, a
/// sysroot; "" for as is) or m.open_path, identity-checked; a file that is missing or another
/// build while a bundle store is configured gives way to the bundle; last, an image rebuilt from
/// the snapshot's memory. Callers that need the ELF image check has_elf().
Result<std::shared_ptr<unwind::LoadedModule>> acquire_module(ModuleSources& ctx, const memory::Snapshot* snap,
                                                             const memory::SnapshotModule& m,
                                                             const std::string& module_root);

}  // namespace stackprov::pipeline
