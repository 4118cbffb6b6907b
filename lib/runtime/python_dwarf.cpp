// SPDX-License-Identifier: Apache-2.0
// The CPython 3.11 structure layout read from an interpreter's DWARF (its separate debug file), via libdw.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "runtime/python.hpp"
#include "stackprov/errors.h"

namespace stackprov::runtime {

namespace {

/// Follows DW_AT_type through typedefs and qualifiers to the structure it names.
std::optional<Dwarf_Die> strip_to_struct(Dwarf_Die die) {
  for (int hops = 0; hops < 16; hops++) {
    const int tag = dwarf_tag(&die);
    if (tag == DW_TAG_structure_type) return die;
    if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type) return std::nullopt;
    Dwarf_Attribute attr;
    Dwarf_Die next;
    if (dwarf_attr(&die, DW_AT_type, &attr) == nullptr || dwarf_formref_die(&attr, &next) == nullptr)
      return std::nullopt;
    die = next;
  }
  return std::nullopt;
}

/// The member `name` of structure `s`: its byte offset and its type's structure (if any).
std::optional<uint64_t> member(Dwarf_Die s, const char* name, Dwarf_Die* type_struct = nullptr) {
  Dwarf_Die child;
  if (dwarf_child(&s, &child) != 0) return std::nullopt;
  do {
    if (dwarf_tag(&child) != DW_TAG_member) continue;
    const char* n = dwarf_diename(&child);
    if (n == nullptr || std::strcmp(n, name) != 0) continue;
    Dwarf_Attribute attr;
    Dwarf_Word off = 0;
    if (dwarf_attr(&child, DW_AT_data_member_location, &attr) == nullptr || dwarf_formudata(&attr, &off) != 0)
      return std::nullopt;
    if (type_struct != nullptr) {
      Dwarf_Die t;
      if (dwarf_attr(&child, DW_AT_type, &attr) == nullptr || dwarf_formref_die(&attr, &t) == nullptr)
        return std::nullopt;
      auto st = strip_to_struct(t);
      if (!st) return std::nullopt;
      *type_struct = *st;
    }
    return off;
  } while (dwarf_siblingof(&child, &child) == 0);
  return std::nullopt;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

Result<PythonLayout> python311_layout_from_dwarf(const std::string& debug_path) {
  Fd fd;
  fd.fd = open(debug_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd.fd < 0) return make_error(-errno, "%s: %s", debug_path.c_str(), std::strerror(errno));
  Dwarf* dbg = dwarf_begin(fd.fd, DWARF_C_READ);
  if (dbg == nullptr)
    return make_error(SPROV_ERR_DWARF, "%s: no DWARF (%s)", debug_path.c_str(), dwarf_errmsg(-1));
  // Top-level types by name (struct tag names and typedef names), first definition wins.
  static const char* const kWanted[] = {"pyruntimestate", "_is", "_ts", "_PyCFrame", "_PyInterpreterFrame",
                                        "_object", "_typeobject", "PyCodeObject", "PyASCIIObject",
                                        "PyCompactUnicodeObject", "PyVarObject", "PyBytesObject", "PyDictObject",
                                        "_dictkeysobject", "PyModuleObject", "_heaptypeobject", "_longobject"};
  std::map<std::string, Dwarf_Die> found;
  Dwarf_CU* cu = nullptr;
  Dwarf_Die cudie;
  uint8_t unit_type = 0;
  while (found.size() < std::size(kWanted) &&
         dwarf_get_units(dbg, cu, &cu, nullptr, &unit_type, &cudie, nullptr) == 0) {
    Dwarf_Die child;
    if (dwarf_child(&cudie, &child) != 0) continue;
    do {
      const int tag = dwarf_tag(&child);
      if (tag != DW_TAG_structure_type && tag != DW_TAG_typedef) continue;
      const char* n = dwarf_diename(&child);
      if (n == nullptr || found.count(n)) continue;
      bool wanted = false;
      for (const char* w : kWanted) wanted = wanted || std::strcmp(w, n) == 0;
      if (!wanted) continue;
      auto s = strip_to_struct(child);
      if (!s || dwarf_hasattr(&*s, DW_AT_declaration) || !dwarf_hasattr(&*s, DW_AT_byte_size)) continue;
      found.emplace(n, *s);
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  std::string missing;
  for (const char* w : kWanted)
    if (!found.count(w)) missing += std::string(missing.empty() ? "" : ", ") + w;
  if (!missing.empty()) {
    dwarf_end(dbg);
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no DWARF definition of %s", debug_path.c_str(), missing.c_str());
  }
  PythonLayout l;
  std::string bad;
  auto get = [&](const char* type, const char* field, uint32_t* out, Dwarf_Die* nested = nullptr) {
    auto off = member(found[type], field, nested);
    if (!off || *off > UINT32_MAX) bad += std::string(bad.empty() ? "" : ", ") + type + "." + field;
    else *out = static_cast<uint32_t>(*off);
  };
  auto size_of = [&](const char* type, uint32_t* out) {
    Dwarf_Attribute attr;
    Dwarf_Word v = 0;
    if (dwarf_attr(&found[type], DW_AT_byte_size, &attr) == nullptr || dwarf_formudata(&attr, &v) != 0 || v > UINT32_MAX)
      bad += std::string(bad.empty() ? "" : ", ") + "sizeof " + type;
    else *out = static_cast<uint32_t>(v);
  };
  Dwarf_Die interpreters, threads;
  uint32_t outer = 0, inner = 0;
  get("pyruntimestate", "interpreters", &outer, &interpreters);
  if (bad.empty()) {
    auto head = member(interpreters, "head");
    if (!head) bad += "pyruntimestate.interpreters.head";
    else inner = static_cast<uint32_t>(*head);
  }
  l.runtime_interpreters_head = outer + inner;
  get("_is", "next", &l.interp_next);
  get("_is", "threads", &outer, &threads);
  if (bad.empty()) {
    auto head = member(threads, "head");
    if (!head) bad += "_is.threads.head";
    else l.interp_threads_head = outer + static_cast<uint32_t>(*head);
  }
  get("_ts", "next", &l.tstate_next);
  get("_ts", "native_thread_id", &l.tstate_native_thread_id);
  get("_ts", "cframe", &l.tstate_cframe);
  get("_PyCFrame", "current_frame", &l.cframe_current_frame);
  get("_PyInterpreterFrame", "f_code", &l.frame_code);
  get("_PyInterpreterFrame", "previous", &l.frame_previous);
  get("_PyInterpreterFrame", "prev_instr", &l.frame_prev_instr);
  get("_PyInterpreterFrame", "is_entry", &l.frame_is_entry);
  get("_PyInterpreterFrame", "owner", &l.frame_owner);
  get("_object", "ob_type", &l.object_type);
  get("_typeobject", "tp_name", &l.type_name);
  get("PyCodeObject", "co_firstlineno", &l.code_firstlineno);
  get("PyCodeObject", "co_filename", &l.code_filename);
  get("PyCodeObject", "co_name", &l.code_name);
  get("PyCodeObject", "co_qualname", &l.code_qualname);
  get("PyCodeObject", "co_linetable", &l.code_linetable);
  get("PyCodeObject", "co_code_adaptive", &l.code_adaptive);
  get("PyASCIIObject", "length", &l.unicode_length);
  get("PyASCIIObject", "state", &l.unicode_state);
  size_of("PyASCIIObject", &l.unicode_ascii_data);
  size_of("PyCompactUnicodeObject", &l.unicode_compact_data);
  get("PyVarObject", "ob_size", &l.bytes_size);
  get("PyBytesObject", "ob_sval", &l.bytes_data);
  get("_ts", "thread_id", &l.tstate_thread_id);
  get("_is", "modules", &l.interp_modules);
  get("PyModuleObject", "md_dict", &l.module_dict);
  get("PyDictObject", "ma_keys", &l.dict_keys);
  get("PyDictObject", "ma_values", &l.dict_values);
  get("_dictkeysobject", "dk_log2_size", &l.keys_log2_size);
  get("_dictkeysobject", "dk_log2_index_bytes", &l.keys_log2_index_bytes);
  get("_dictkeysobject", "dk_kind", &l.keys_kind);
  get("_dictkeysobject", "dk_nentries", &l.keys_nentries);
  get("_dictkeysobject", "dk_indices", &l.keys_indices);
  get("_typeobject", "tp_flags", &l.type_flags);
  get("_typeobject", "tp_dictoffset", &l.type_dictoffset);
  get("_heaptypeobject", "ht_cached_keys", &l.heaptype_cached_keys);
  get("_longobject", "ob_digit", &l.long_digits);
  dwarf_end(dbg);
  if (!bad.empty())
    return make_error(SPROV_ERR_DWARF, "%s: CPython 3.11 members not found: %s", debug_path.c_str(), bad.c_str());
  return l;
}

}  // namespace stackprov::runtime
