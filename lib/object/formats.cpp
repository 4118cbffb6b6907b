// SPDX-License-Identifier: Apache-2.0
// The built-in object formats, sniffed in this order. Adding a format: its folder under lib/ with
// an ObjectImage implementation and a Format, and one line here (doc/architecture.md).
#ifndef _WIN32
#include "elf/elf_object.hpp"
#endif
#include "macho/macho_object.hpp"
#include "object/object_image.hpp"
#include "pe/pe_object.hpp"

namespace stackprov::object {

std::span<const Format* const> builtin_formats() {
  static const Format* const kFormats[] = {
#ifndef _WIN32  // the win64 build has no ELF reader (libelf, libdw: cmake/win64.cmake)
      &elf::kElfFormat,
#endif
      &pe::kPeFormat,
      &macho::kMachoFormat,
  };
  return kFormats;
}

}  // namespace stackprov::object
