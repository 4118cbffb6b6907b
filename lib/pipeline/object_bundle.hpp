// SPDX-License-Identifier: Apache-2.0
// A bundle module of a file of another object format than ELF (issue 32: a format is a plug-in
// all the way to offline resolution): its identity, symbol-table ranges and its unwind source's
// rows. ELF files keep their own builder (lib/symbolize/bundle_builder, DWARF ranges and pads).
#pragma once

#include <memory>
#include <string>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "object/object_image.hpp"

namespace stackprov::pipeline {

/// The bundle module of `image` named `name`: its identity (required: a bundle is found by it),
/// the sha256 of its file, a depth-0 symbol-table range per sized symbol (the first of
/// overlapping ones kept), and the rows of the unwind source of its first registered table kind
/// (none without one). Deterministic.
Result<bundle::ModuleContents> object_module_contents(std::shared_ptr<const object::ObjectImage> image,
                                                     const std::string& name);

}  // namespace stackprov::pipeline
