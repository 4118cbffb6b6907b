// SPDX-License-Identifier: Apache-2.0
// Raw machine state in (issue 34): one thread's registers, memory blocks and modules as a JSON
// document (doc/raw-state.md), turned into a Snapshot that unwinds and symbolizes like a core's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "memory/snapshot.hpp"

namespace stackprov::object {
class ObjectImage;
}

namespace stackprov::memory {

/// The snapshot module of image `im` (file `path`) placed at load bias `bias`: from its lowest to its
/// highest loaded segment with file bytes, with the image's identity (raw states, the Mach capture).
/// SPROV_ERR_INVALID_ARG naming the path when it has no loaded segment.
Result<SnapshotModule> module_of_image(const object::ObjectImage& im, uint64_t bias, const std::string& path);

/// Parses one raw state document. Each module file is opened (object::open: any registered format)
/// to place it: its load bias from `load_address` (the runtime address of the file's first byte:
/// a Mach-O image's mach header, an ELF file's offset-0 mapping), its range from its loaded
/// segments, its identity from the file (a document's `identity`, when given, must equal it).
/// Relative module paths are relative to `base_dir`. Errors: SPROV_ERR_JSON for the document's
/// shape, naming the JSON path and the value; the module's error when it cannot be opened;
/// SPROV_ERR_BUILD_ID_MISMATCH naming both identities; SPROV_ERR_INVALID_ARG for an architecture,
/// register or overlapping block. Thread-safe (no shared state).
/// `offline`: no module file is opened (the context is offline: its modules come from bundles by
/// identity); each module then needs `identity`, `link_address` and `size`. Without `offline` a
/// module whose file is missing (ENOENT, ENOTDIR) is placed from those three too, when given (its
/// unwind and symbol data then come from a bundle store, by identity: pipeline/module_source).
Result<Snapshot> snapshot_from_raw_state(std::string_view json, const std::string& base_dir, bool offline = false);

/// The state files named by `path`: the file itself, or every regular `*.json` file directly in the
/// directory `path`, sorted by name (at most 65,536). Errors name the path.
Result<std::vector<std::string>> raw_state_files(const std::string& path);
/// The same for files ending in `suffix` (".snap": serialized snapshots); `what` names them in errors.
Result<std::vector<std::string>> state_files(const std::string& path, const std::string& suffix, const char* what);

}  // namespace stackprov::memory
