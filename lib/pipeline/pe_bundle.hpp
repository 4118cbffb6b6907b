// SPDX-License-Identifier: Apache-2.0
// A bundle module's ranges from a PE image's PDB (issue 33, doc/windows.md "Bundles of PE+PDB"):
// functions, file:line:column and inline chains exactly as the PDB resolver answers them, and the
// x64 epilog rows that let a frame 0 stopped in an epilog unwind offline as with the image.
#pragma once

#include <memory>
#include <string>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "object/object_image.hpp"

namespace stackprov::pipeline {

/// Whether `image` is a PE whose CodeView record names a PDB (the PDB resolver's rule): its ranges
/// then come from that PDB.
bool has_pdb(const object::ObjectImage& image);

/// Replaces `m`'s ranges with the PDB's answer (pdb::PdbFile::lookup, llvm-symbolizer-14's) at every
/// byte of every code section, runs of equal answers merged: per inline depth d a range whose
/// function and position are frame d's and whose call site is frame d - 1's, nested inside the
/// range of depth d - 1. The PDB is found as the resolver finds it (pdb::find_pdb: beside the image,
/// the RSDS path, each debug directory and its symbol-store layout NAME.pdb/KEY/NAME.pdb); its
/// GUID+age must be the image's. Sets sha256_debug to the PDB's sha256; `pdb_path`, when given,
/// receives the PDB used. Errors: find_pdb's (SPROV_ERR_NOT_FOUND naming the places,
/// SPROV_ERR_BUILD_ID_MISMATCH naming both keys), a malformed PDB's, SPROV_ERR_INVALID_ARG for
/// code sections over 1 GiB.
Status add_pdb_ranges(const object::ObjectImage& image, const object::DebugFileOptions& opts, bundle::ModuleContents* m,
                      std::string* pdb_path = nullptr);

/// Adds to `m`'s unwind rows (the pdata source's, sorted) the rows of every x64 epilog of `image`'s
/// RUNTIME_FUNCTIONs: the instructions of each function are decoded from its start
/// (arch/x86_64/insn_length), and at each instruction boundary where RtlVirtualUnwind would
/// recognise an epilog (pe::plan_x64_step with an exact pc) a row with that step's rule, and after
/// the epilog a row with the function body's rule again. A caller's pc (a return address - 1) is
/// never at such a boundary, so the rows change nothing for caller frames. No-op for an image
/// without a pdata table. Returns the number of rows added or replaced (epilog and after-epilog rows).
Result<size_t> add_epilog_rows(const object::ObjectImage& image, bundle::ModuleContents* m);

}  // namespace stackprov::pipeline
