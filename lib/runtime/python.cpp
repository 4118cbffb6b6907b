// SPDX-License-Identifier: Apache-2.0
// CPython 3.11 frames read from a target's memory: the interpreter state, each thread's _PyInterpreterFrame chain.
#include "runtime/python.hpp"

#include <elf.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <unordered_map>
#include <set>
#include <unordered_set>

#include "stackprov/errors.h"

namespace stackprov::runtime {

const PythonLayout& python311_layout() {
  // CPython v3.11.2, 64-bit release build (no Py_DEBUG/Py_TRACE_REFS); checked against
  // `gdb -batch -ex 'ptype /o struct _ts' ...` on Debian's python3.11 with python3.11-dbg
  // (tests/integration/python_runtime/runtime_check.py "layout" compares every field).
  static const PythonLayout kLayout = [] {
    PythonLayout l;
    l.runtime_interpreters_head = 0x28;  // pycore_runtime.h: interpreters { mutex, next_id, head }
    l.interp_next = 0;                   // pycore_interp.h: struct _is { next; threads { ... head } }
    l.interp_threads_head = 0x10;
    l.tstate_next = 8;                   // cpython/pystate.h: struct _ts { prev, next, interp, ... }
    l.tstate_native_thread_id = 160;
    l.tstate_cframe = 56;
    l.cframe_current_frame = 8;          // _PyCFrame { uint8_t use_tracing; current_frame; previous }
    l.frame_code = 32;                   // pycore_frame.h: f_func f_globals f_builtins f_locals f_code
    l.frame_previous = 48;
    l.frame_prev_instr = 56;
    l.frame_is_entry = 68;
    l.frame_owner = 69;
    l.object_type = 8;                   // PyObject { ob_refcnt, ob_type }
    l.type_name = 24;                    // PyTypeObject: PyVarObject (24 bytes), tp_name
    l.code_firstlineno = 72;             // cpython/code.h (3.11 _PyCode_DEF)
    l.code_filename = 112;
    l.code_name = 120;
    l.code_qualname = 128;
    l.code_linetable = 136;
    l.code_adaptive = 184;
    l.unicode_length = 16;               // cpython/unicodeobject.h
    l.unicode_state = 32;
    l.unicode_ascii_data = 48;
    l.unicode_compact_data = 72;
    l.bytes_size = 16;                   // PyVarObject.ob_size
    l.bytes_data = 32;                   // PyBytesObject.ob_sval
    l.tstate_thread_id = 152;            // cpython/pystate.h: struct _ts { ..., async_exc, thread_id, ... }
    l.interp_modules = 888;              // pycore_interp.h: struct _is { ..., modules, ... }
    l.module_dict = 16;                  // moduleobject.c: PyModuleObject { ob_base, md_dict, ... }
    l.dict_keys = 32;                    // cpython/dictobject.h: { ob_base, ma_used, ma_version_tag, ma_keys, ma_values }
    l.dict_values = 40;
    l.keys_log2_size = 8;                // pycore_dict.h: { dk_refcnt, dk_log2_size, dk_log2_index_bytes, dk_kind,
    l.keys_log2_index_bytes = 9;         //   dk_version, dk_usable, dk_nentries, dk_indices[] }
    l.keys_kind = 10;
    l.keys_nentries = 24;
    l.keys_indices = 32;
    l.type_flags = 168;                  // cpython/object.h: PyTypeObject.tp_flags
    l.type_dictoffset = 288;             //   tp_dictoffset
    l.heaptype_cached_keys = 872;        //   PyHeapTypeObject.ht_cached_keys
    l.long_digits = 24;                  // cpython/longintrepr.h: { PyVarObject ob_base; digit ob_digit[1]; }
    return l;
  }();
  return kLayout;
}

const char* known_python_build(std::string_view build_id_hex) {
  struct Known {
    const char* build_id;
    const char* what;
  };
  static const Known kKnown[] = {
      {"c561f3aa7232f2bd6ac6d56bd475f1c154a00486", "Debian 12 python3.11 3.11.2-6+deb12u9 amd64 /usr/bin/python3.11"},
  };
  for (const Known& k : kKnown)
    if (build_id_hex == k.build_id) return k.what;
  return nullptr;
}

namespace {

uint64_t le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

/// Symbols by name in one symbol table section (64-bit little-endian ELF).
std::optional<NamedSymbol> find_in_table(const elf::ElfImage& image, size_t index, std::string_view name) {
  auto syms = image.section_at(index);
  if (!syms) return std::nullopt;
  auto strs = image.section_at(syms->link);
  if (!strs || strs->data == nullptr) return std::nullopt;
  constexpr size_t kSymSize = sizeof(Elf64_Sym);
  for (size_t off = 0; off + kSymSize <= syms->size; off += kSymSize) {
    const uint8_t* s = syms->data + off;
    const uint64_t name_off = le(s, 4);
    if (name_off >= strs->size) continue;
    const char* str = reinterpret_cast<const char*>(strs->data) + name_off;
    const size_t max = strs->size - name_off;
    const size_t len = strnlen(str, max);
    if (len == max || std::string_view(str, len) != name) continue;
    if (le(s + 6, 2) == SHN_UNDEF) continue;
    return NamedSymbol{le(s + 8, 8), le(s + 16, 8)};
  }
  return std::nullopt;
}

}  // namespace

bool may_hold_python(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return base.substr(0, 6) == "python" || base.substr(0, 9) == "libpython";
}

ReadFileFn read_image_file(const elf::ElfImage& image) {
  return [&image](uint64_t vaddr, void* buf, size_t len) {
    for (const elf::ProgramHeader& ph : image.program_headers()) {
      if (ph.type != 1 /* PT_LOAD */ || vaddr < ph.vaddr || vaddr - ph.vaddr > ph.filesz ||
          len > ph.filesz - (vaddr - ph.vaddr))
        continue;
      const uint64_t off = ph.offset + (vaddr - ph.vaddr);
      if (off > image.file_size() || len > image.file_size() - off) return false;
      std::memcpy(buf, image.file_data() + off, len);
      return true;
    }
    return false;
  };
}

std::optional<NamedSymbol> find_symbol(const elf::ElfImage& image, std::string_view name) {
  if (!image.is_64bit() || image.big_endian()) return std::nullopt;
  // Each table is scanned once even when hostile headers name it many times.
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (uint32_t type : {uint32_t{SHT_DYNSYM}, uint32_t{SHT_SYMTAB}}) {
    for (size_t i = 1; i < image.section_count(); i++) {
      if (image.section_type(i) != type) continue;
      const auto sec = image.section_at(i);
      if (!sec || !seen.emplace(sec->offset, sec->size).second) continue;
      if (auto s = find_in_table(image, i, name)) return s;
    }
  }
  return std::nullopt;
}

Result<std::optional<PythonTarget>> find_python(const elf::ElfImage& image, uint64_t load_bias,
                                                std::string_view build_id_hex, const ReadFileFn& read_file,
                                                const elf::ElfImage* debug_image) {
  const auto runtime = find_symbol(image, "_PyRuntime");
  if (!runtime) return std::optional<PythonTarget>{};
  const auto eval = find_symbol(image, "_PyEval_EvalFrameDefault");
  if (!eval || eval->size == 0)
    return make_error(SPROV_ERR_NOT_FOUND, "%s has _PyRuntime but no sized _PyEval_EvalFrameDefault symbol",
                      image.path().c_str());
  PythonTarget t;
  if (const auto ver = find_symbol(image, "Py_Version")) {
    uint8_t b[4];
    if (read_file(ver->addr, b, 4)) t.version_hex = static_cast<uint32_t>(le(b, 4));
  }
  const unsigned major = t.version_hex >> 24, minor = (t.version_hex >> 16) & 0xff, micro = (t.version_hex >> 8) & 0xff;
  if (image.arch() != Arch::kX86_64)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: CPython frames are read on x86_64 only (doc/runtime-frames.md)",
                      image.path().c_str());
  if (major != 3 || minor != 11) {
    if (t.version_hex == 0)
      return make_error(SPROV_ERR_UNSUPPORTED, "%s: CPython without Py_Version (before 3.11): only 3.11 frames are "
                        "read (doc/runtime-frames.md)", image.path().c_str());
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: CPython %u.%u.%u: only 3.11 frames are read (doc/runtime-frames.md)",
                      image.path().c_str(), major, minor, micro);
  }
  // Py_DEBUG builds (python3.11d) have other structure layouts (_Py_RefTotal exists only there).
  if (find_symbol(image, "_Py_RefTotal"))
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: CPython %u.%u.%u debug build (Py_DEBUG): its layout is not in the "
                      "table (doc/runtime-frames.md)", image.path().c_str(), major, minor, micro);
  t.runtime_addr = runtime->addr + load_bias;
  t.eval.push_back({eval->addr + load_bias, eval->addr + load_bias + eval->size});
  auto cold = find_symbol(image, "_PyEval_EvalFrameDefault.cold");
  if (!cold && debug_image != nullptr) cold = find_symbol(*debug_image, "_PyEval_EvalFrameDefault.cold");
  if (cold && cold->size != 0) t.eval.push_back({cold->addr + load_bias, cold->addr + load_bias + cold->size});
  t.layout = python311_layout();
  std::string description;
  const char* known = known_python_build(build_id_hex);
  std::string dwarf_error;
  if (known != nullptr) {
    description = format_message("CPython %u.%u.%u (layout table: %s)", major, minor, micro, known);
  } else if (debug_image != nullptr) {
    auto from_dwarf = python311_layout_from_dwarf(debug_image->path());
    if (from_dwarf.ok()) {
      t.layout = from_dwarf.value();
      description = format_message("CPython %u.%u.%u (layout from DWARF: %s)", major, minor, micro,
                                   debug_image->path().c_str());
    } else {
      dwarf_error = from_dwarf.error().message;
    }
  }
  if (known == nullptr && (debug_image == nullptr || !dwarf_error.empty()))
    description = format_message("CPython %u.%u.%u (build-id %.*s not in the layout table, %s: the 3.11 release "
                                 "layout is assumed)", major, minor, micro, static_cast<int>(build_id_hex.size()),
                                 build_id_hex.data(), debug_image == nullptr ? "no debug file" : dwarf_error.c_str());
  t.description = std::move(description);
  return std::optional<PythonTarget>{std::move(t)};
}

uint32_t python311_addr2line(const uint8_t* table, size_t len, int firstlineno, int64_t addrq) {
  if (addrq < 0) return firstlineno > 0 ? static_cast<uint32_t>(firstlineno) : 0;
  size_t i = 0;
  auto byte = [&](uint8_t* b) {
    if (i >= len) return false;
    *b = table[i++];
    return true;
  };
  auto varint = [&](uint64_t* v) {
    uint8_t b;
    if (!byte(&b)) return false;
    uint64_t val = b & 63;
    unsigned shift = 0;
    while (b & 64) {
      if (!byte(&b)) return false;
      shift += 6;
      if (shift >= 64) return false;
      val |= static_cast<uint64_t>(b & 63) << shift;
    }
    *v = val;
    return true;
  };
  auto svarint = [&](int64_t* v) {
    uint64_t u;
    if (!varint(&u)) return false;
    *v = (u & 1) ? -static_cast<int64_t>(u >> 1) : static_cast<int64_t>(u >> 1);
    return true;
  };
  int64_t line = firstlineno;
  int64_t addr = 0;
  uint8_t first;
  while (byte(&first)) {
    const int code = (first >> 3) & 15;
    const int64_t end = addr + (first & 7) + 1;
    bool has_line = true;
    uint64_t skip;
    uint8_t b;
    int64_t delta = 0;
    if (code == 15) {
      has_line = false;  // no location
    } else if (code == 14) {  // long form: line delta, end line delta, column, end column
      if (!svarint(&delta) || !varint(&skip) || !varint(&skip) || !varint(&skip)) return 0;
    } else if (code == 13) {  // no column
      if (!svarint(&delta)) return 0;
    } else if (code >= 10) {  // one-line forms: line delta code-10, column, end column
      delta = code - 10;
      if (!byte(&b) || !byte(&b)) return 0;
    } else {  // short form: same line
      if (!byte(&b)) return 0;
    }
    // Hostile tables: wrap instead of overflowing (a line outside 1..UINT32_MAX reads as 0).
    line = static_cast<int64_t>(static_cast<uint64_t>(line) + static_cast<uint64_t>(delta));
    if (addr <= addrq && addrq < end) return has_line && line > 0 && line <= UINT32_MAX ? static_cast<uint32_t>(line) : 0;
    addr = end;
  }
  return 0;
}

namespace {

struct CodeInfo {
  std::string function, qualname, file;
  int firstlineno = 0;
  std::vector<uint8_t> linetable;
  /// What the names and the table were read from (a sampler checks them on every use).
  uint64_t type = 0, name_ptr = 0, qualname_ptr = 0, file_ptr = 0, table_ptr = 0;
};

/// Reads objects of the target with every length checked and every failure named.
class PyReader {
 public:
  PyReader(memory::MemoryReader& mem, const PythonLayout& l, const PythonLimits& lim) : mem_(mem), l_(l), lim_(lim) {}

  bool u64(uint64_t a, uint64_t* v) {
    uint8_t b[8];
    if (a > UINT64_MAX - 8 || !mem_.read(a, b, 8)) return false;
    *v = le(b, 8);
    return true;
  }
  bool u32(uint64_t a, uint32_t* v) {
    uint8_t b[4];
    if (a > UINT64_MAX - 4 || !mem_.read(a, b, 4)) return false;
    *v = static_cast<uint32_t>(le(b, 4));
    return true;
  }
  /// Reads [addr, addr + span) in one call (one system call on a live target); the fields are
  /// then taken from the copy with f64/f32/f8 at offsets below `span`.
  bool load(uint64_t addr, uint64_t span) {
    return span <= sizeof(block_) && addr <= UINT64_MAX - span && mem_.read(addr, block_, span);
  }
  uint64_t f64(uint32_t off) const { return le(block_ + off, 8); }
  uint32_t f32(uint32_t off) const { return static_cast<uint32_t>(le(block_ + off, 4)); }
  uint8_t f8(uint32_t off) const { return block_[off]; }

  /// tp_name of an object's type ("" when unreadable), cached by type address.
  std::string type_name(uint64_t obj) {
    uint64_t type = 0;
    if (!u64(obj + l_.object_type, &type) || type == 0) return "";
    auto it = types_.find(type);
    if (it != types_.end()) return it->second;
    std::string name;
    uint64_t name_ptr = 0;
    if (u64(type + l_.type_name, &name_ptr) && name_ptr != 0) {
      char c;
      for (uint64_t k = 0; k < 64 && mem_.read(name_ptr + k, &c, 1) && c != '\0'; k++) name.push_back(c);
    }
    if (types_.size() < 1024) types_.emplace(type, name);
    return name;
  }

  /// A str object as UTF-8 (compact strings: every str a code object holds).
  bool unicode(uint64_t obj, std::string* out, std::string* why) {
    if (obj == 0 || type_name(obj) != "str") {
      *why = "object 0x" + hex(obj) + " is not a str";
      return false;
    }
    uint64_t length = 0;
    uint32_t state = 0;
    if (!u64(obj + l_.unicode_length, &length) || !u32(obj + l_.unicode_state, &state)) {
      *why = "str 0x" + hex(obj) + " unreadable";
      return false;
    }
    const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4)) {
      *why = "str 0x" + hex(obj) + " is not a compact string (state 0x" + hex(state) + ")";
      return false;
    }
    const uint64_t n = std::min<uint64_t>(length, lim_.max_string_bytes);
    std::vector<uint8_t> data(n * kind);
    const uint64_t at = obj + (ascii ? l_.unicode_ascii_data : l_.unicode_compact_data);
    if (!data.empty() && !mem_.read(at, data.data(), data.size())) {
      *why = "str 0x" + hex(obj) + ": data unreadable";
      return false;
    }
    out->clear();
    for (uint64_t k = 0; k < n; k++) put_utf8(out, static_cast<uint32_t>(le(&data[k * kind], kind)));
    if (length > n) *out += "...";
    return true;
  }

  /// The live entries of a dict's keys object (values from `values` for a split table, else from
  /// the entries), at most max_dict_entries: fn(key, value) returns true to stop. False (with
  /// `why`) when the keys object is unreadable or malformed.
  template <class Fn>
  bool keys_items(uint64_t keys, uint64_t values, Fn&& fn, std::string* why) {
    const uint64_t head = std::max({l_.keys_log2_size, l_.keys_log2_index_bytes, l_.keys_kind}) + 1;
    if (keys == 0 || !load(keys, std::max<uint64_t>(head, l_.keys_nentries + 8))) {
      *why = "dict keys 0x" + hex(keys) + " unreadable";
      return false;
    }
    const unsigned log2_size = f8(l_.keys_log2_size), log2_index = f8(l_.keys_log2_index_bytes), kind = f8(l_.keys_kind);
    const uint64_t nentries = f64(l_.keys_nentries);
    // dk_indices holds 2^log2_size indices of 1, 2, 4 or 8 bytes (pycore_dict.h DK_LOG_SIZE, DK_ENTRIES).
    if (log2_size > 30 || log2_index < log2_size || log2_index > log2_size + 3 || kind > 2 ||
        nentries > (uint64_t{1} << log2_size)) {
      *why = "dict keys 0x" + hex(keys) + " malformed (log2 size " + std::to_string(log2_size) + ", index bytes 2^" +
             std::to_string(log2_index) + ", kind " + std::to_string(kind) + ", " + std::to_string(nentries) +
             " entries)";
      return false;
    }
    if (dict_budget_ == 0) {
      *why = "the budget of " + std::to_string(lim_.max_dict_entries) + " dict entries is spent";
      return false;
    }
    const uint64_t n = std::min<uint64_t>(nentries, dict_budget_);
    dict_budget_ -= n;
    const uint64_t esize = kind == 0 ? 24 : 16;  // PyDictKeyEntry {hash, key, value}, PyDictUnicodeEntry {key, value}
    const uint64_t at = keys + l_.keys_indices + (uint64_t{1} << log2_index);
    std::vector<uint8_t> e(n * esize), v(values != 0 ? n * 8 : 0);
    if ((!e.empty() && !mem_.read(at, e.data(), e.size())) || (!v.empty() && !mem_.read(values, v.data(), v.size()))) {
      *why = "dict entries at 0x" + hex(at) + " unreadable";
      return false;
    }
    for (uint64_t i = 0; i < n; i++) {
      const uint8_t* p = &e[i * esize + (kind == 0 ? 8 : 0)];
      const uint64_t key = le(p, 8), value = values != 0 ? le(&v[i * 8], 8) : le(p + 8, 8);
      if (key != 0 && value != 0 && fn(key, value)) break;
    }
    return true;
  }

  /// A dict object's entries (keys_items), after checking that it is a dict.
  template <class Fn>
  bool dict_items(uint64_t dict, Fn&& fn, std::string* why) {
    if (dict == 0 || type_name(dict) != "dict") {
      *why = "object 0x" + hex(dict) + " is not a dict";
      return false;
    }
    uint64_t keys = 0, values = 0;
    if (!u64(dict + l_.dict_keys, &keys) || !u64(dict + l_.dict_values, &values)) {
      *why = "dict 0x" + hex(dict) + " unreadable";
      return false;
    }
    return keys_items(keys, values, fn, why);
  }

  /// The value of the str key `name` in a dict's entries (0 when absent).
  template <class Items>
  uint64_t find_str(Items&& items, std::string_view name, std::string* why) {
    uint64_t found = 0;
    std::string k, ignored;
    const bool ok = items([&](uint64_t key, uint64_t value) {
      uint64_t length = 0;
      if (!u64(key + l_.unicode_length, &length) || length != name.size()) return false;
      if (unicode(key, &k, &ignored) && k == name) found = value;
      return found != 0;
    }, why);
    if (ok && found == 0) *why = "no '" + std::string(name) + "'";
    return ok ? found : 0;
  }

  /// An int object's value when it is non-negative and fits 64 bits (30-bit digits), else nullopt.
  std::optional<uint64_t> small_int(uint64_t obj) {
    if (obj == 0 || type_name(obj) != "int") return std::nullopt;
    uint64_t size = 0;
    if (!u64(obj + l_.bytes_size, &size) || static_cast<int64_t>(size) < 0 || size > 3) return std::nullopt;
    uint32_t digit[3] = {0, 0, 0};
    if (size > 0 && !mem_.read(obj + l_.long_digits, digit, size * 4)) return std::nullopt;
    for (uint32_t& d : digit) d &= 0x3fffffff;  // PyLong_SHIFT 30
    // 30 + 30 + 4 bits: a third digit over 15 does not fit 64 bits (no __int128 on 32-bit targets).
    if (digit[2] > 0xf) return std::nullopt;
    return uint64_t{digit[0]} | (uint64_t{digit[1]} << 30) | (uint64_t{digit[2]} << 60);
  }

  /// An object's instance attribute `name` (its __dict__: 3.11's managed dict -- values before
  /// the object with the type's cached keys, or a materialised dict -- else tp_dictoffset), 0 when absent.
  uint64_t attribute(uint64_t obj, std::string_view name, std::string* why) {
    uint64_t type = 0, flags = 0, dictoffset = 0;
    if (obj < 32 || !u64(obj + l_.object_type, &type) || type == 0 || !u64(type + l_.type_flags, &flags) ||
        !u64(type + l_.type_dictoffset, &dictoffset)) {
      *why = "object 0x" + hex(obj) + " unreadable";
      return 0;
    }
    uint64_t dict = 0;
    if (flags & (1u << 4)) {  // Py_TPFLAGS_MANAGED_DICT: values at obj - 4 words, dict at obj - 3 (pycore_object.h)
      uint64_t values = 0, keys = 0;
      if (!u64(obj - 32, &values) || !u64(obj - 24, &dict)) {
        *why = "object 0x" + hex(obj) + ": managed dict unreadable";
        return 0;
      }
      if (values != 0) {
        if (!u64(type + l_.heaptype_cached_keys, &keys)) {
          *why = "type 0x" + hex(type) + ": cached keys unreadable";
          return 0;
        }
        return find_str([&](auto&& fn, std::string* w) { return keys_items(keys, values, fn, w); }, name, why);
      }
    } else if (static_cast<int64_t>(dictoffset) > 0 && dictoffset < 4096 && !u64(obj + dictoffset, &dict)) {
      *why = "object 0x" + hex(obj) + ": __dict__ unreadable";
      return 0;
    }
    return find_str([&](auto&& fn, std::string* w) { return dict_items(dict, fn, w); }, name, why);
  }

  /// A sampler's reader: a cached code object is checked against the target on every use.
  void set_validate(bool v) { validate_ = v; }
  void reset_linetable_budget() { linetable_read_ = 0; }
  uint64_t code_reads() const { return code_reads_; }

  const CodeInfo* code(uint64_t addr, std::string* why) {
    // In 64 bits: a layout from hostile DWARF with an offset near UINT32_MAX must not wrap to a small
    // span that load() accepts (then f64 would read 4 GiB past block_).
    const uint64_t span = std::max({uint64_t{l_.code_name} + 8, uint64_t{l_.code_qualname} + 8,
                                    uint64_t{l_.code_filename} + 8, uint64_t{l_.code_linetable} + 8,
                                    uint64_t{l_.code_firstlineno} + 4, uint64_t{l_.object_type} + 8});
    auto it = codes_.find(addr);
    if (it != codes_.end()) {
      if (!validate_) return &it->second;
      const CodeInfo& c = it->second;
      if (load(addr, span) && f64(l_.object_type) == c.type && f64(l_.code_name) == c.name_ptr &&
          f64(l_.code_qualname) == c.qualname_ptr && f64(l_.code_filename) == c.file_ptr &&
          f64(l_.code_linetable) == c.table_ptr && static_cast<int32_t>(f32(l_.code_firstlineno)) == c.firstlineno)
        return &c;
      cached_bytes_ -= std::min(cached_bytes_, c.linetable.size() + c.function.size() + c.qualname.size() + c.file.size());
      codes_.erase(it);  // freed and reused, or unreadable now: read again
    }
    code_reads_++;
    if (addr == 0 || addr % 8 != 0) {
      *why = "code object pointer 0x" + hex(addr) + " is not aligned";
      return nullptr;
    }
    if (type_name(addr) != "code") {
      *why = "0x" + hex(addr) + " is not a code object";
      return nullptr;
    }
    CodeInfo c;
    if (!load(addr, span)) {
      *why = "code object 0x" + hex(addr) + " unreadable";
      return nullptr;
    }
    const uint64_t name = f64(l_.code_name), qualname = f64(l_.code_qualname), file = f64(l_.code_filename),
                   table = f64(l_.code_linetable);
    c.firstlineno = static_cast<int32_t>(f32(l_.code_firstlineno));
    c.type = f64(l_.object_type);
    c.name_ptr = name;
    c.qualname_ptr = qualname;
    c.file_ptr = file;
    c.table_ptr = table;
    if (!unicode(name, &c.function, why) || !unicode(qualname, &c.qualname, why) || !unicode(file, &c.file, why))
      return nullptr;
    uint64_t size = 0;
    if (type_name(table) != "bytes" || !u64(table + l_.bytes_size, &size) || size > lim_.max_linetable_bytes) {
      *why = "co_linetable 0x" + hex(table) + " of code 0x" + hex(addr) + " is not a readable bytes object";
      return nullptr;
    }
    // Line tables read from the target, all code objects together, stay within a budget: a hostile
    // target with many code objects sharing one 1 MiB table would have us copy 2^18 MiB. Past it,
    // frames keep their names and lose their lines.
    if (size > kLinetableBudget - std::min(linetable_read_, kLinetableBudget)) size = 0;
    c.linetable.resize(size);
    if (size > 0 && !mem_.read(table + l_.bytes_data, c.linetable.data(), size)) {
      *why = "co_linetable 0x" + hex(table) + " unreadable";
      return nullptr;
    }
    linetable_read_ += size;
    // The cache holds at most 65536 code objects and 64 MiB of their tables and names.
    const size_t cost = size + c.function.size() + c.qualname.size() + c.file.size();
    if (codes_.size() >= 65536 || cached_bytes_ + cost > (64u << 20)) {
      codes_.clear();
      cached_bytes_ = 0;
    }
    cached_bytes_ += cost;
    return &codes_.emplace(addr, std::move(c)).first->second;
  }

  static std::string hex(uint64_t v) {
    char b[24];
    snprintf(b, sizeof(b), "%" PRIx64, v);
    return b;
  }

 private:
  static void put_utf8(std::string* s, uint32_t c) {
    if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;
    if (c < 0x80) {
      s->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      s->push_back(static_cast<char>(0xc0 | (c >> 6)));
      s->push_back(static_cast<char>(0x80 | (c & 63)));
    } else if (c < 0x10000) {
      s->push_back(static_cast<char>(0xe0 | (c >> 12)));
      s->push_back(static_cast<char>(0x80 | ((c >> 6) & 63)));
      s->push_back(static_cast<char>(0x80 | (c & 63)));
    } else {
      s->push_back(static_cast<char>(0xf0 | (c >> 18)));
      s->push_back(static_cast<char>(0x80 | ((c >> 12) & 63)));
      s->push_back(static_cast<char>(0x80 | ((c >> 6) & 63)));
      s->push_back(static_cast<char>(0x80 | (c & 63)));
    }
  }

  memory::MemoryReader& mem_;
  const PythonLayout& l_;
  const PythonLimits& lim_;
  std::unordered_map<uint64_t, std::string> types_;
  std::unordered_map<uint64_t, CodeInfo> codes_;
  size_t cached_bytes_ = 0;     ///< line tables and names held by codes_
  uint64_t linetable_read_ = 0;  ///< bytes of line tables read from the target so far
  bool validate_ = false;
  uint64_t code_reads_ = 0;
  static constexpr uint64_t kLinetableBudget = uint64_t{256} << 20;
  uint8_t block_[1024];
  uint64_t dict_budget_ = lim_.max_dict_entries;  ///< dict entries all lookups of one read may visit
};

/// Follows one thread's frame chain from its current frame (innermost first).
void read_frames(PyReader& rd, const PythonLayout& l, const PythonLimits& lim, uint64_t frame, PythonThread* t,
                 uint64_t* budget) {
  std::unordered_set<uint64_t> seen;
  const uint64_t span = std::max({uint64_t{l.frame_code} + 8, uint64_t{l.frame_prev_instr} + 8,
                                  uint64_t{l.frame_previous} + 8, uint64_t{l.frame_is_entry} + 1,
                                  uint64_t{l.frame_owner} + 1});  // 64-bit: see PyReader::code
  while (frame != 0) {
    if (t->frames.size() >= lim.max_frames) {
      t->problem = "more than " + std::to_string(lim.max_frames) + " Python frames: the rest are left out";
      return;
    }
    if (*budget == 0) {
      t->problem = "the budget of " + std::to_string(lim.max_total_frames) +
                   " Python frames for all threads is spent: the rest are left out";
      return;
    }
    --*budget;
    if (frame % 8 != 0) {
      t->problem = "frame pointer 0x" + PyReader::hex(frame) + " is not aligned";
      return;
    }
    if (!seen.insert(frame).second) {
      t->problem = "frame 0x" + PyReader::hex(frame) + " repeats: the chain has a cycle";
      return;
    }
    PythonFrame f;
    f.frame_addr = frame;
    if (!rd.load(frame, span)) {
      t->problem = "frame 0x" + PyReader::hex(frame) + " unreadable";
      return;
    }
    f.code_addr = rd.f64(l.frame_code);
    const uint64_t prev_instr = rd.f64(l.frame_prev_instr), previous = rd.f64(l.frame_previous);
    const uint8_t is_entry = rd.f8(l.frame_is_entry);
    f.owner = rd.f8(l.frame_owner);
    std::string why;
    const CodeInfo* c = rd.code(f.code_addr, &why);
    if (c == nullptr) {
      t->problem = "frame 0x" + PyReader::hex(frame) + ": " + why;
      return;
    }
    f.is_entry = is_entry != 0;
    f.function = c->function;
    f.qualname = c->qualname;
    f.file = c->file;
    // prev_instr - first code unit, in code units (_PyInterpreterFrame_LASTI); -1 before the first.
    const int64_t lasti = static_cast<int64_t>(prev_instr - (f.code_addr + l.code_adaptive)) / 2;
    f.line = python311_addr2line(c->linetable.data(), c->linetable.size(), c->firstlineno, lasti);
    t->frames.push_back(std::move(f));
    frame = previous;
  }
}

/// threading.get_ident() -> Thread._name of an interpreter: sys.modules["threading"]._active.
/// Empty when the program never imported threading or a step cannot be read (`why`).
std::unordered_map<uint64_t, std::string> thread_names(PyReader& rd, const PythonLayout& l, uint64_t interp,
                                                       std::string* why) {
  std::unordered_map<uint64_t, std::string> out;
  uint64_t modules = 0;
  if (!rd.u64(interp + l.interp_modules, &modules)) {
    *why = "interpreter 0x" + PyReader::hex(interp) + " unreadable";
    return out;
  }
  auto in_dict = [&](uint64_t dict) { return [&rd, dict](auto&& fn, std::string* w) { return rd.dict_items(dict, fn, w); }; };
  const uint64_t threading = rd.find_str(in_dict(modules), "threading", why);
  uint64_t md = 0;
  if (threading == 0 || rd.type_name(threading) != "module" || !rd.u64(threading + l.module_dict, &md)) return out;
  const uint64_t active = rd.find_str(in_dict(md), "_active", why);
  if (active == 0) return out;
  std::string w, name;
  rd.dict_items(active, [&](uint64_t key, uint64_t thread) {
    const std::optional<uint64_t> ident = rd.small_int(key);
    const uint64_t n = ident ? rd.attribute(thread, "_name", &w) : 0;
    if (n != 0 && rd.unicode(n, &name, &w)) out.emplace(*ident, name);
    return false;
  }, why);
  return out;
}

}  // namespace

Result<std::vector<PythonThread>> read_python_threads(memory::MemoryReader& mem, const PythonTarget& target,
                                                      const PythonLimits& limits) {
  const PythonLayout& l = target.layout;
  PyReader rd(mem, l, limits);
  std::vector<PythonThread> out;
  uint64_t interp = 0;
  if (!rd.u64(target.runtime_addr + l.runtime_interpreters_head, &interp))
    return make_error(SPROV_ERR_MEMORY_UNREADABLE, "_PyRuntime at 0x%" PRIx64 " is unreadable", target.runtime_addr);
  std::unordered_set<uint64_t> seen_interps, seen_threads;
  uint64_t budget = limits.max_total_frames;
  for (uint32_t i = 0; interp != 0 && i < limits.max_interpreters && seen_interps.insert(interp).second; i++) {
    const size_t first = out.size();
    uint64_t ts = 0;
    if (!rd.u64(interp + l.interp_threads_head, &ts)) break;
    for (uint32_t k = 0; ts != 0 && k < limits.max_threads && seen_threads.insert(ts).second; k++) {
      PythonThread t;
      t.tstate = ts;
      uint64_t tid = 0, cframe = 0, frame = 0;
      if (!rd.u64(ts + l.tstate_native_thread_id, &tid) || !rd.u64(ts + l.tstate_cframe, &cframe)) {
        t.problem = "thread state 0x" + PyReader::hex(ts) + " unreadable";
        out.push_back(std::move(t));
        break;
      }
      t.tid = static_cast<int64_t>(tid);
      if (!rd.u64(ts + l.tstate_thread_id, &t.ident)) t.ident = 0;
      if (cframe != 0 && !rd.u64(cframe + l.cframe_current_frame, &frame))
        t.problem = "_PyCFrame 0x" + PyReader::hex(cframe) + " unreadable";
      else
        read_frames(rd, l, limits, frame, &t, &budget);
      out.push_back(std::move(t));
      if (!rd.u64(ts + l.tstate_next, &ts)) break;
    }
    if (out.size() > first) {
      std::string why;
      const auto names = thread_names(rd, l, interp, &why);
      for (size_t k = first; k < out.size(); k++)
        if (auto it = names.find(out[k].ident); out[k].ident != 0 && it != names.end()) out[k].name = it->second;
    }
    if (!rd.u64(interp + l.interp_next, &interp)) break;
  }
  return out;
}

struct PythonSampler::Impl {
  Impl(memory::MemoryReader& mem, const PythonTarget& t, const PythonLimits& lim)
      : target(t), limits(lim), rd(mem, target.layout, limits) {
    rd.set_validate(true);
  }
  PythonTarget target;
  PythonLimits limits;
  PyReader rd;
  std::unordered_map<int64_t, uint64_t> tstates;  ///< native thread id -> PyThreadState
  /// Threads no walk found (a native thread that never runs Python: a BLAS worker), by the walk
  /// count at which they were last looked for: looked for again only after 64 more reads, so that a
  /// process's other threads do not cost a walk of every thread list per sample.
  std::unordered_map<int64_t, uint64_t> missing;
  uint64_t scans = 0, reads = 0;
  bool runtime_unreadable = false;  ///< the last walk could not read _PyRuntime

  /// Walks the interpreters' thread lists (bounded as read_python_threads), caching every thread.
  void scan() {
    scans++;
    const PythonLayout& l = target.layout;
    tstates.clear();
    uint64_t interp = 0;
    runtime_unreadable = !rd.u64(target.runtime_addr + l.runtime_interpreters_head, &interp);
    if (runtime_unreadable) return;
    std::unordered_set<uint64_t> seen_interps, seen_threads;
    for (uint32_t i = 0; interp != 0 && i < limits.max_interpreters && seen_interps.insert(interp).second; i++) {
      uint64_t ts = 0;
      if (!rd.u64(interp + l.interp_threads_head, &ts)) break;
      for (uint32_t k = 0; ts != 0 && k < limits.max_threads && seen_threads.insert(ts).second; k++) {
        uint64_t tid = 0;
        if (!rd.u64(ts + l.tstate_native_thread_id, &tid)) break;
        tstates.emplace(static_cast<int64_t>(tid), ts);
        if (!rd.u64(ts + l.tstate_next, &ts)) break;
      }
      if (!rd.u64(interp + l.interp_next, &interp)) break;
    }
  }
  /// The thread state of `tid` now (0: none).
  uint64_t tstate_of(int64_t tid) {
    for (int pass = 0; pass < 2; pass++) {
      auto it = tstates.find(tid);
      uint64_t now = 0;
      if (it != tstates.end() && rd.u64(it->second + target.layout.tstate_native_thread_id, &now) &&
          static_cast<int64_t>(now) == tid)
        return it->second;
      if (pass == 1) break;
      if (auto m = missing.find(tid); m != missing.end() && reads - m->second < 64 && !runtime_unreadable) return 0;
      scan();
    }
    if (missing.size() >= 65536) missing.clear();
    missing[tid] = reads;
    return 0;
  }
  /// The thread's _PyCFrame and current frame (false: unreadable).
  bool current(uint64_t ts, uint64_t* cframe, uint64_t* frame) {
    const PythonLayout& l = target.layout;
    *frame = 0;
    if (!rd.u64(ts + l.tstate_cframe, cframe)) return false;
    return *cframe == 0 || rd.u64(*cframe + l.cframe_current_frame, frame);
  }

  struct Raw {
    uint64_t frame, code, previous, prev_instr;
  };
  /// Names and files copied into one read's frames (a hostile chain of 65536 frames of one code
  /// object with 16 KiB names would be 3 GiB).
  static constexpr size_t kMaxReadBytes = size_t{16} << 20;

  PythonStackRead read(int64_t tid) {
    PythonStackRead out;
    const PythonLayout& l = target.layout;
    reads++;
    rd.reset_linetable_budget();  // a sampler's budget is per read (its cache bounds what it keeps)
    const uint64_t ts = tstate_of(tid);
    if (ts == 0) {
      if (runtime_unreadable) {  // not "no thread": the interpreter itself cannot be read (ptrace rights?)
        out.state = PythonStackRead::kDamaged;
        out.problem = "_PyRuntime at 0x" + PyReader::hex(target.runtime_addr) + " is unreadable";
      }
      return out;
    }
    uint64_t cframe = 0, first = 0;
    if (!current(ts, &cframe, &first)) {
      out.state = PythonStackRead::kDamaged;
      out.problem = "thread state 0x" + PyReader::hex(ts) + " unreadable";
      return out;
    }
    const uint64_t span = std::max({uint64_t{l.frame_code} + 8, uint64_t{l.frame_prev_instr} + 8,
                                    uint64_t{l.frame_previous} + 8, uint64_t{l.frame_is_entry} + 1,
                                    uint64_t{l.frame_owner} + 1});  // 64-bit: see PyReader::code
    std::vector<Raw> raw;
    std::unordered_set<uint64_t> seen;
    std::string problem;
    size_t name_bytes = 0;  // copied into this read's frames: at most kMaxReadBytes
    uint64_t stop = 0;      // the frame the first pass could not take (0: none)
    bool stop_loaded = false;
    uint64_t stop_code = 0;
    for (uint64_t frame = first; frame != 0;) {
      if (out.frames.size() >= limits.max_frames) {
        problem = "more than " + std::to_string(limits.max_frames) + " Python frames: the rest are left out";
        break;
      }
      const char* bad = frame % 8 != 0              ? " is not aligned"
                        : !seen.insert(frame).second ? " repeats: the chain has a cycle"
                        : !rd.load(frame, span)      ? " unreadable"
                                                     : nullptr;
      if (bad != nullptr) {
        problem = "frame 0x" + PyReader::hex(frame) + bad;
        stop = frame;
        break;
      }
      Raw r{frame, rd.f64(l.frame_code), rd.f64(l.frame_previous), rd.f64(l.frame_prev_instr)};
      PythonFrame f;
      f.frame_addr = frame;
      f.code_addr = r.code;
      f.is_entry = rd.f8(l.frame_is_entry) != 0;
      f.owner = rd.f8(l.frame_owner);
      std::string why;
      const CodeInfo* c = rd.code(r.code, &why);
      if (c == nullptr) {
        problem = "frame 0x" + PyReader::hex(frame) + ": " + why;
        stop = frame;
        stop_loaded = true;
        stop_code = r.code;
        break;
      }
      name_bytes += c->function.size() + c->qualname.size() + c->file.size();
      if (name_bytes > kMaxReadBytes) {
        problem = "more than " + std::to_string(kMaxReadBytes >> 20) + " MiB of names in one chain: the rest are left out";
        break;
      }
      f.function = c->function;
      f.qualname = c->qualname;
      f.file = c->file;
      const int64_t lasti = static_cast<int64_t>(r.prev_instr - (r.code + l.code_adaptive)) / 2;
      f.line = python311_addr2line(c->linetable.data(), c->linetable.size(), c->firstlineno, lasti);
      out.frames.push_back(std::move(f));
      raw.push_back(r);
      frame = r.previous;
    }
    // The second pass: the same chain, unchanged but for the innermost frame's instruction.
    uint64_t cframe2 = 0, first2 = 0;
    std::string changed;
    if (!current(ts, &cframe2, &first2) || cframe2 != cframe || first2 != first) {
      changed = "the thread's current frame changed during the read";
    } else if (stop != 0 && (rd.load(stop, span) != stop_loaded || (stop_loaded && rd.f64(l.frame_code) != stop_code))) {
      changed = "frame 0x" + PyReader::hex(stop) + ", where the chain was cut short, changed during the read";
    } else {
      for (size_t i = 0; i < raw.size(); i++) {
        if (!rd.load(raw[i].frame, span) || rd.f64(l.frame_code) != raw[i].code ||
            rd.f64(l.frame_previous) != raw[i].previous || (i > 0 && rd.f64(l.frame_prev_instr) != raw[i].prev_instr)) {
          changed = "frame " + std::to_string(i) + " (0x" + PyReader::hex(raw[i].frame) + ") changed during the read";
          break;
        }
      }
    }
    if (!changed.empty()) {
      out.frames.clear();
      out.state = PythonStackRead::kTorn;
      out.problem = changed;
      return out;
    }
    out.state = problem.empty() ? PythonStackRead::kRead : PythonStackRead::kDamaged;
    out.problem = problem;
    return out;
  }
};

PythonSampler::PythonSampler(memory::MemoryReader& mem, const PythonTarget& target, const PythonLimits& limits)
    : impl_(std::make_unique<Impl>(mem, target, limits)) {}
PythonSampler::~PythonSampler() = default;
PythonStackRead PythonSampler::read(int64_t tid) { return impl_->read(tid); }
uint64_t PythonSampler::code_reads() const { return impl_->rd.code_reads(); }
uint64_t PythonSampler::thread_scans() const { return impl_->scans; }

std::vector<size_t> python_frames_per_native(const std::vector<bool>& runs_eval, const std::vector<bool>& is_entry) {
  std::vector<size_t> out(runs_eval.size(), 0);
  size_t next = 0;  // the innermost Python frame no activation has taken yet
  for (size_t i = 0; i < runs_eval.size() && next < is_entry.size(); i++) {
    if (!runs_eval[i]) continue;
    size_t end = next;
    while (end < is_entry.size() && !is_entry[end]) end++;
    if (end < is_entry.size()) end++;
    out[i] = end - next;
    next = end;
  }
  return out;
}

}  // namespace stackprov::runtime
