// SPDX-License-Identifier: Apache-2.0
// Building symbol bundles from module files and signing stored ones (DSSE envelope, log entry,
// inclusion proof and checkpoint as the store's sidecars): what sprov_bundle_build and
// sprov_bundle_store_sign do, and trace capture with --bundle --sign.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "symbolize/bundle_store.hpp"

namespace stackprov::pipeline {

/// The name of a bundle's module identity kind (1..3), "unknown" for other values.
const char* bundle_id_kind_name(int kind) noexcept;
/// A module identity in its own format's key form (sprov_id_key, Python Frame.module_key, `stack
/// --json`'s module_key): ELF build-id hex, the PDB symbol-server key (GUID + age), the PE code-id
/// key, the Mach-O UUID (8-4-4-4-12); "" for no identity or one of the wrong length.
std::string module_key(const ModuleId& id);

/// What a bundle is built of: input files, each module's name (empty: the file's basename), the
/// directories of separate debug files (empty: the default), and whether the debug files go in.
struct BundleBuildInput {
  std::vector<std::string> paths;
  std::vector<std::string> names;  ///< parallel to paths, or empty
  std::vector<std::string> debug_dirs;
  bool include_debug = false;
  /// Called before the first file and after each (files done, files, bytes done, bytes); may be empty.
  std::function<void(size_t, size_t, uint64_t, uint64_t)> progress;
};

/// The bundle file of `in`'s modules (deterministic bytes). SPROV_ERR_INVALID_ARG when two files
/// have the same identity; the builders' errors otherwise.
Result<std::vector<uint8_t>> build_bundle(const BundleBuildInput& in);

/// Whether `key` can sign into the log `log_dir` whose checkpoints `log_key` (empty: `key`) signs;
/// fails before anything is stored or logged.
Status check_signing(const std::string& key, const std::string& log_dir, const std::string& log_key);

/// Signs stored bundle `digest`: a DSSE envelope of its modules (predicate
/// https://stackprov.dev/symbol-bundle/v1), appended to the log once, a checkpoint and an inclusion
/// proof, all three kept as the bundle's sidecars (dsse.json, tlog-proof, checkpoint). Returns the
/// entry's log index.
Result<uint64_t> sign_stored_bundle(symbolize::BundleStore& store, const std::string& digest, const std::string& key,
                                    const std::string& log_dir, const std::string& log_key);

/// The path of stored bundle `digest`'s sidecar `name` when it is a regular file, else
/// SPROV_ERR_NOT_FOUND naming the bundle, the sidecar, the store and the path.
Result<std::string> sidecar_file(const symbolize::BundleStore& store, const std::string& digest, const std::string& name);

/// The key id (hex) of the public key of a key file (a private key names its public key too).
Result<std::string> key_id(const std::string& key_path);

}  // namespace stackprov::pipeline
