// SPDX-License-Identifier: Apache-2.0
// Finding the PDB of a PE image (issue 33): beside the image, at the RSDS path, in the debug
// directories and in local symbol-store layouts, its GUID and age checked against the image's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "object/object_image.hpp"
#include "pdb/pdb_file.hpp"

namespace stackprov::pdb {

/// What the image says of its PDB (a PE's CodeView RSDS record), as plain values: lib/pdb does not
/// read PE files (lib/pe is the same layer).
struct PdbWanted {
  std::string image_path;   ///< the PE file
  std::string target_root;  ///< "/proc/PID/root" when the image is a target's file, else ""
  std::string rsds_path;    ///< the PDB path the linker wrote (may be a Windows path)
  ModuleId id;              ///< kPdbGuidAge: GUID as stored + age
};

/// Finds and opens the PDB, trying in order:
///  1. beside the image: the RSDS path's base name in the image's directory;
///  2. the RSDS path itself (a POSIX absolute path; a target's under its root);
///  3. for each debug directory DIR (under the sysroot, or the target's root): DIR/NAME.pdb, then
///     the symbol-store layout DIR/NAME.pdb/KEY/NAME.pdb (KEY = guid_age_key(id)).
/// A candidate whose GUID+age differ from the image's is rejected; when no candidate serves, the
/// first such rejection is the error (SPROV_ERR_BUILD_ID_MISMATCH naming both keys), else
/// SPROV_ERR_NOT_FOUND naming the places searched. `looked_at`, when given, receives each place with
/// what was there (rule "beside-image", "rsds-path", "debug-dir", "symbol-store").
Result<std::shared_ptr<PdbFile>> find_pdb(const PdbWanted& want, const object::DebugFileOptions& opts,
                                          std::vector<object::DebugFileCandidate>* looked_at = nullptr);

}  // namespace stackprov::pdb
