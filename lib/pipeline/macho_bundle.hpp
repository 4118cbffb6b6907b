// SPDX-License-Identifier: Apache-2.0
// Bundle modules of Mach-O images (issue 34, doc/macos.md "Bundles of Mach-O images"): the
// first-frame facts (prologue and epilogue rules, and the no-entry rule of frame 0) computed at build
// time, so that a frame 0 stopped in a prologue or an epilogue unwinds from the bundle alone exactly
// as with the image (the code is not in the bundle).
#pragma once

#include <cstddef>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "object/object_image.hpp"

namespace stackprov::pipeline {

/// Adds to `m`'s unwind rows (the compact-unwind source's body rows, sorted) the rows of every
/// instruction of `image`'s code whose exact-pc rule (CompactUnwindSource::lookup with exact_pc:
/// the first-frame analysis of a prologue or epilogue, or the return address where the call left it
/// for no entry / encoding 0) differs from the body rule at that pc. Functions are the code
/// sections cut at LC_FUNCTION_STARTS; x86_64 instructions are decoded from each function's start
/// (arch/x86_64/insn_length), arm64's are every 4 bytes. A caller's lookup pc (return address - 1)
/// is inside its call instruction, never at a boundary: where a call instruction's exact rule
/// differs from the body's, the row after its first byte is the body's again, so caller frames
/// get exactly the rules they get with the image. No-op (0) for an image without a compact-unwind
/// source. Returns the number of rows added or replaced. Errors: SPROV_ERR_INVALID_ARG for code
/// over 1 GiB.
Result<size_t> add_first_frame_rows(const object::ObjectImage& image, bundle::ModuleContents* m);

}  // namespace stackprov::pipeline
