// SPDX-License-Identifier: Apache-2.0
// A module's DWARF sections from a neutral object image, asked for by the DWARF standard's names.
#pragma once

#include <memory>
#include <string_view>

#include "dwarf/dwarf_index.hpp"
#include "object/object_image.hpp"

namespace stackprov::dwarf {

/// The bytes of section `name` of `obj` (its DWARF standard name, ".debug_info", ".debug_info.dwo":
/// the format translates, object_image.hpp); empty when absent or unreadable. Borrowed from `obj`.
inline SectionBytes section_bytes(const object::ObjectImage& obj, std::string_view name) {
  SectionBytes b;
  if (auto sec = obj.section(name); sec && sec->data != nullptr) {
    b.data = sec->data;
    b.size = sec->size;
  }
  return b;
}

/// The .debug_* sections of `obj` as borrowed views (decompressed); looked up once per file. The
/// location lists are looked up (and inflated) on their first use (DwarfSections::locations), also
/// borrowed from `obj`.
inline DwarfSections dwarf_sections(const object::ObjectImage& obj) {
  DwarfSections s;
  s.info = section_bytes(obj, ".debug_info");
  s.abbrev = section_bytes(obj, ".debug_abbrev");
  s.line = section_bytes(obj, ".debug_line");
  s.line_str = section_bytes(obj, ".debug_line_str");
  s.str = section_bytes(obj, ".debug_str");
  s.str_offsets = section_bytes(obj, ".debug_str_offsets");
  s.addr = section_bytes(obj, ".debug_addr");
  s.ranges = section_bytes(obj, ".debug_ranges");
  s.rnglists = section_bytes(obj, ".debug_rnglists");
  s.lazy_locations = std::make_shared<LazyLocations>();
  s.lazy_locations->load = [o = &obj](SectionBytes* loc, SectionBytes* loclists) {
    *loc = section_bytes(*o, ".debug_loc");
    *loclists = section_bytes(*o, ".debug_loclists");
  };
  s.big_endian = obj.big_endian();
  return s;
}

}  // namespace stackprov::dwarf
