// SPDX-License-Identifier: Apache-2.0
// Separate debug files: build-id paths under debug directories and .gnu_debuglink with CRC check.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "elf/elf_image.hpp"
#include "object/object_image.hpp"

namespace stackprov::elf {

using DebugFileOptions = object::DebugFileOptions;

/// Finds the separate debug file of `image`, in this order:
///  1. <debug_dir>/.build-id/<xx>/<rest>.debug for each debug dir;
///  2. .gnu_debuglink: the binary's dir, its .debug/ subdir, then
///     <debug_dir>/<binary's dir>/ — accepted only when the CRC32 matches.
/// A candidate whose build-id differs from the image's is rejected; if that is
/// the only candidate the error is SPROV_ERR_BUILD_ID_MISMATCH naming both ids.
/// SPROV_ERR_NOT_FOUND (naming the places searched) when nothing is found.
/// `looked_at`, when given, receives each path in the order above with what was there.
Result<std::shared_ptr<ElfImage>> find_debug_file(const ElfImage& image,
                                                  const DebugFileOptions& opts,
                                                  std::vector<object::DebugFileCandidate>* looked_at = nullptr);

}  // namespace stackprov::elf
