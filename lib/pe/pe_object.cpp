// SPDX-License-Identifier: Apache-2.0
// PeObject: a checked PE/COFF reader (PE32 and PE32+) as an object::ObjectImage, and PE's registry entry.
#include "pe/pe_object.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "core/mapped_file.hpp"
#include "core/module_cache.hpp"
#include "core/open_file.hpp"
#include "pe/pe_bytes.hpp"

namespace stackprov::pe {

namespace {

constexpr uint32_t kLfanewAt = 0x3c;
constexpr size_t kCoffHeader = 20;
constexpr size_t kSectionHeader = 40;
constexpr size_t kSymbolSize = 18;  // COFF symbol table entries, before the string table
constexpr size_t kDebugEntrySize = 28;

bool sniff_pe(std::span<const uint8_t> head) {
  // "MZ" and a PE header offset: the "PE\0\0" signature itself may lie past the sniffed bytes.
  return head.size() >= kLfanewAt + 4 && head[0] == 'M' && head[1] == 'Z' && le32(head.data() + kLfanewAt) >= 0x40;
}

Result<std::shared_ptr<object::ObjectImage>> open_pe(const std::string& path) {
  auto o = PeObject::open(path);
  if (!o.ok()) return std::move(o).error();
  return std::shared_ptr<object::ObjectImage>(o.value());
}

Result<std::shared_ptr<object::ObjectImage>> pe_from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto o = PeObject::from_bytes(std::move(bytes), std::move(name));
  if (!o.ok()) return std::move(o).error();
  return std::shared_ptr<object::ObjectImage>(o.value());
}

}  // namespace

const object::Format kPeFormat{"pe", sniff_pe, open_pe, pe_from_bytes, nullptr};

std::string symbol_server_key(const ModuleId& id) {
  if (id.kind != IdKind::kPdbGuidAge || id.len != 20) return {};
  const uint8_t* g = id.bytes;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08X%04X%04X", le32(g), le16(g + 4), le16(g + 6));
  std::string out = buf;
  for (int i = 8; i < 16; i++) {
    std::snprintf(buf, sizeof buf, "%02X", g[i]);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%X", le32(g + 16));
  return out + buf;
}

/// Whether every character of a key is a hex digit (any case).
static bool all_hex_digits(std::string_view key) {
  return std::all_of(key.begin(), key.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

/// The hex digits key[at, at + n) (checked by all_hex_digits, n <= 8) as a number.
static uint32_t key_hex_value(std::string_view key, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = at; i < at + n; i++)
    v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(key[i]))
                                           ? key[i] - '0'
                                           : std::tolower(static_cast<unsigned char>(key[i])) - 'a' + 10);
  return v;
}

Result<ModuleId> pdb_id_from_key(std::string_view key) {
  const bool hex = all_hex_digits(key);
  if (!hex || key.size() < 33 || key.size() > 40)
    return make_error(SPROV_ERR_INVALID_ARG, "invalid pdb-guid-age key '%.*s' (expected a symbol-server key: the GUID's "
                      "32 hex digits, then the age in 1 to 8 hex digits)", static_cast<int>(std::min<size_t>(key.size(), 140)),
                      key.data());
  auto value = [&key](size_t at, size_t n) { return key_hex_value(key, at, n); };
  uint8_t b[20];
  const uint32_t d1 = value(0, 8), d2 = value(8, 4), d3 = value(12, 4), age = value(32, key.size() - 32);
  for (int i = 0; i < 4; i++) b[i] = static_cast<uint8_t>(d1 >> (8 * i));  // Data1..3 little-endian, as RSDS stores them
  for (int i = 0; i < 2; i++) b[4 + i] = static_cast<uint8_t>(d2 >> (8 * i));
  for (int i = 0; i < 2; i++) b[6 + i] = static_cast<uint8_t>(d3 >> (8 * i));
  for (int i = 0; i < 8; i++) b[8 + i] = static_cast<uint8_t>(value(16 + 2 * i, 2));  // Data4 as written
  for (int i = 0; i < 4; i++) b[16 + i] = static_cast<uint8_t>(age >> (8 * i));
  return ModuleId::from_bytes(b, sizeof b, IdKind::kPdbGuidAge);
}

std::string code_id_key(const ModuleId& id) {
  if (id.kind != IdKind::kPeCodeId || id.len != 8) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08X%x", le32(id.bytes), le32(id.bytes + 4));
  return buf;
}

ModuleId code_id(uint32_t timestamp, uint32_t size_of_image) {
  uint8_t b[8];
  for (int i = 0; i < 4; i++) {
    b[i] = static_cast<uint8_t>(timestamp >> (8 * i));
    b[4 + i] = static_cast<uint8_t>(size_of_image >> (8 * i));
  }
  return ModuleId::from_bytes(b, sizeof b, IdKind::kPeCodeId);
}

Result<ModuleId> code_id_from_key(std::string_view key) {
  const bool hex = all_hex_digits(key);
  if (!hex || key.size() < 9 || key.size() > 16)
    return make_error(SPROV_ERR_INVALID_ARG, "invalid pe-code-id key '%.*s' (expected a code id: TimeDateStamp as 8 hex "
                      "digits, then SizeOfImage in 1 to 8 hex digits)", static_cast<int>(std::min<size_t>(key.size(), 140)),
                      key.data());
  auto value = [&key](size_t at, size_t n) { return key_hex_value(key, at, n); };
  return code_id(value(0, 8), value(8, key.size() - 8));
}

std::string identity_key(const ModuleId& id) {
  if (id.kind == IdKind::kPeCodeId) return "code-id " + code_id_key(id);
  return symbol_server_key(id);
}

ModuleId pdb_id(const CodeView& cv) {
  uint8_t b[20];
  std::memcpy(b, cv.guid, 16);
  for (int i = 0; i < 4; i++) b[16 + i] = static_cast<uint8_t>(cv.age >> (8 * i));
  return ModuleId::from_bytes(b, sizeof b, IdKind::kPdbGuidAge);
}

PeObject::~PeObject() {
  if (map_ != nullptr) unmap_file(map_, size_);
}

Result<std::shared_ptr<PeObject>> PeObject::open(const std::string& path) {
  std::shared_ptr<PeObject> o(new PeObject());
  o->path_ = path;
  // Regular files only, opened inside a target's root, size-bounded, mapped guarded: a file another
  // user truncates while mapped reads as zeros past its new end (core/mapped_file.hpp).
  auto mapped = map_regular_file(path);
  if (!mapped) return std::move(mapped).error();
  o->map_ = mapped.value().base;
  o->data_ = static_cast<const uint8_t*>(o->map_);
  o->size_ = mapped.value().size;
  o->identity_ = mapped.value().identity;
  o->target_root_ = target_root_of(path);
  if (o->size_ < 0x40)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: %lld bytes are too few for a PE file", path.c_str(),
                      static_cast<long long>(o->size_));
  if (Status s = o->parse(); !s) return s.error();
  return o;
}

Result<std::shared_ptr<PeObject>> PeObject::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<PeObject> o(new PeObject());
  o->path_ = std::move(name);
  o->owned_ = std::move(bytes);
  o->data_ = o->owned_.data();
  o->size_ = o->owned_.size();
  if (Status s = o->parse(); !s) return s.error();
  return o;
}

bool PeObject::file_changed() const { return map_ != nullptr && file_map_faulted(map_); }

Status PeObject::parse() {
  const char* p = path_.c_str();
  auto bad = [&](const char* what, uint64_t v) {
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: %s (0x%" PRIx64 ")", p, what, v);
  };
  if (size_ < 0x40 || data_[0] != 'M' || data_[1] != 'Z') return bad("not a PE file: no MZ header", size_);
  const uint32_t lfanew = le32(data_ + kLfanewAt);
  if (lfanew > size_ || size_ - lfanew < 4 + kCoffHeader) return bad("PE header offset beyond the file", lfanew);
  if (std::memcmp(data_ + lfanew, "PE\0\0", 4) != 0) return bad("not a PE file: no PE signature at the header offset", lfanew);
  const uint8_t* coff = data_ + lfanew + 4;
  machine_ = le16(coff);
  const uint32_t nsec = le16(coff + 2);
  timestamp_ = le32(coff + 4);
  const uint32_t symtab_off = le32(coff + 8), nsyms = le32(coff + 12);
  const uint32_t opt_size = le16(coff + 16);
  switch (machine_) {
    case kMachineAmd64: arch_ = Arch::kX86_64; break;
    case kMachineArm64: arch_ = Arch::kArm64; break;
    default: return bad("machine type not supported (x86-64 0x8664 and arm64 0xaa64 are)", machine_);
  }
  const uint64_t opt_at = uint64_t{lfanew} + 4 + kCoffHeader;
  if (opt_size < 2 || opt_at + opt_size > size_) return bad("optional header beyond the file", opt_size);
  const uint8_t* opt = data_ + opt_at;
  const uint16_t magic = le16(opt);
  if (magic != 0x20b && magic != 0x10b) return bad("optional header magic is neither PE32+ 0x20b nor PE32 0x10b", magic);
  pe32plus_ = magic == 0x20b;
  const uint32_t dirs_at = pe32plus_ ? 112 : 96;
  if (opt_size < dirs_at) return bad("optional header too short", opt_size);
  image_base_ = pe32plus_ ? le64(opt + 24) : le32(opt + 28);
  size_of_image_ = le32(opt + 56);
  size_of_headers_ = le32(opt + 60);
  const uint32_t ndirs = le32(opt + dirs_at - 4);
  if (ndirs > 16 || dirs_at + uint64_t{ndirs} * 8 > opt_size)
    return bad("data directory count beyond the optional header (at most 16)", ndirs);
  for (uint32_t i = 0; i < ndirs; i++) dirs_.push_back({le32(opt + dirs_at + 8 * i), le32(opt + dirs_at + 8 * i + 4)});

  // Sections; long names "/123" are offsets into the COFF string table after the symbols.
  if (nsec > kMaxSections) return bad("section count exceeds 4096", nsec);
  const uint64_t sec_at = opt_at + opt_size;
  if (sec_at + uint64_t{nsec} * kSectionHeader > size_) return bad("section table beyond the file", nsec);
  const uint64_t strtab_at = uint64_t{symtab_off} + uint64_t{nsyms} * kSymbolSize;
  const bool have_strtab = symtab_off != 0 && strtab_at + 4 <= size_;
  const uint64_t strtab_size = have_strtab ? std::min<uint64_t>(le32(data_ + strtab_at), size_ - strtab_at) : 0;
  symtab_off_ = symtab_off;
  nsyms_ = nsyms;
  strtab_at_ = have_strtab ? strtab_at : 0;
  strtab_size_ = strtab_size;
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t* h = data_ + sec_at + uint64_t{i} * kSectionHeader;
    Section s;
    s.name.assign(reinterpret_cast<const char*>(h), strnlen(reinterpret_cast<const char*>(h), 8));
    if (s.name.size() > 1 && s.name[0] == '/') {
      uint64_t off = 0;
      bool digits = true;
      for (size_t k = 1; k < s.name.size(); k++) {
        digits = digits && s.name[k] >= '0' && s.name[k] <= '9';
        off = off * 10 + static_cast<uint64_t>(s.name[k] - '0');
      }
      if (!digits || !have_strtab || off < 4 || off >= strtab_size)
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: section %u's long name \"%s\" is outside the COFF string table (%" PRIu64
                          " bytes)", p, i, s.name.c_str(), strtab_size);
      const char* n = reinterpret_cast<const char*>(data_ + strtab_at + off);
      s.name.assign(n, strnlen(n, static_cast<size_t>(strtab_size - off)));
    }
    s.vsize = le32(h + 8);
    s.rva = le32(h + 12);
    s.raw_size = le32(h + 16);
    s.raw_offset = le32(h + 20);
    s.characteristics = le32(h + 36);
    if (s.raw_size != 0 && (s.raw_offset > size_ || s.raw_size > size_ - s.raw_offset))
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: section %s's raw data 0x%x+0x%x is beyond the file (%zu bytes)", p,
                        s.name.c_str(), s.raw_offset, s.raw_size, size_);
    if (uint64_t{s.rva} + std::max(s.vsize, s.raw_size) > (uint64_t{1} << 32))
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: section %s at RVA 0x%x wraps past 4 GiB", p, s.name.c_str(), s.rva);
    sections_.push_back(std::move(s));
  }

  // The debug directory: every entry; the first CodeView RSDS record is the identity.
  const DataDirectory dd = directory(kDirDebug);
  if (dd.size != 0) {
    const uint32_t n = dd.size / kDebugEntrySize;
    if (n > kMaxDebugEntries) return bad("debug directory has more than 64 entries", n);
    const auto dir = at_rva(dd.rva, n * static_cast<uint32_t>(kDebugEntrySize));
    if (dir.empty()) return bad("debug directory outside the sections", dd.rva);
    for (uint32_t i = 0; i < n; i++) {
      const uint8_t* e = dir.data() + i * kDebugEntrySize;
      DebugEntry d{le32(e + 12), le32(e + 16), le32(e + 20), le32(e + 24)};
      debug_.push_back(d);
      if (d.type != kDebugTypeCodeView || codeview_) continue;
      // The record by its file offset (the RVA may be 0 for a record not loaded).
      if (d.file_offset > size_ || d.size > size_ - d.file_offset || d.size < 24) continue;
      const uint8_t* r = data_ + d.file_offset;
      if (std::memcmp(r, "RSDS", 4) != 0) continue;  // NB10 (PDB 2.0) and others: no GUID
      CodeView cv;
      std::memcpy(cv.guid, r + 4, 16);
      cv.age = le32(r + 20);
      cv.pdb_path.assign(reinterpret_cast<const char*>(r + 24), strnlen(reinterpret_cast<const char*>(r + 24), d.size - 24));
      id_ = pdb_id(cv);
      codeview_ = std::move(cv);
    }
  }
  // No CodeView record (mingw without --build-id, wine's own DLLs): the code id, TimeDateStamp and
  // SizeOfImage, as symbol stores key such images (doc/windows.md "Code identity": weaker).
  if (id_.empty()) id_ = code_id(timestamp_, size_of_image_);
  return {};
}

std::span<const uint8_t> PeObject::at_rva(uint32_t rva, uint32_t len) const {
  const uint64_t end = uint64_t{rva} + len;
  if (end <= size_of_headers_ && end <= size_) return {data_ + rva, len};
  for (const Section& s : sections_) {
    if (rva < s.rva || end > uint64_t{s.rva} + s.raw_size) continue;
    return {data_ + s.raw_offset + (rva - s.rva), len};
  }
  return {};
}

std::string_view PeObject::string_at_rva(uint32_t rva) const {
  for (const Section& s : sections_) {
    if (rva < s.rva || rva - s.rva >= s.raw_size) continue;
    const char* p = reinterpret_cast<const char*>(data_ + s.raw_offset + (rva - s.rva));
    const size_t room = s.raw_size - (rva - s.rva);
    const size_t n = strnlen(p, room);
    return n < room ? std::string_view(p, n) : std::string_view();
  }
  return {};
}

void PeObject::load_coff_symbols() const {
  // PE/COFF specification, "COFF Symbol Table": 18-byte records, Name[8] (or 0 + a string table
  // offset), Value u32, SectionNumber i16, Type u16, StorageClass u8, NumberOfAuxSymbols u8.
  if (symtab_off_ == 0 || nsyms_ == 0) return;
  if (symtab_off_ > size_ || uint64_t{nsyms_} * kSymbolSize > size_ - symtab_off_) return;
  const uint8_t* tab = data_ + symtab_off_;
  short_names_.reserve(size_t{nsyms_} * 9);  // never reallocated below: the views stay valid
  for (uint32_t i = 0; i < nsyms_; i++) {
    const uint8_t* r = tab + size_t{i} * kSymbolSize;
    CoffSymbol c;
    c.value = le32(r + 8);
    c.section = static_cast<int16_t>(le16(r + 12));
    c.type = le16(r + 14);
    c.storage_class = r[16];
    c.aux_count = r[17];
    c.index = i;
    i += c.aux_count;  // auxiliary records follow their symbol (a count past the table ends the loop)
    if (le32(r) == 0) {
      const uint32_t off = le32(r + 4);
      if (strtab_size_ == 0 || off < 4 || off >= strtab_size_) continue;
      const char* n = reinterpret_cast<const char*>(data_ + strtab_at_ + off);
      const size_t len = strnlen(n, static_cast<size_t>(strtab_size_ - off));
      if (len == strtab_size_ - off) continue;  // not NUL-terminated inside the table
      c.name = std::string_view(n, len);
    } else {
      const size_t len = strnlen(reinterpret_cast<const char*>(r), 8);
      const size_t at = short_names_.size();
      short_names_.insert(short_names_.end(), r, r + len);
      short_names_.push_back('\0');
      c.name = std::string_view(short_names_.data() + at, len);
    }
    coff_.push_back(c);
  }
}

const std::vector<CoffSymbol>& PeObject::coff_symbols() const {
  stackprov::call_once(coff_once_, [&] { load_coff_symbols(); });
  return coff_;
}

void PeObject::load_exports() const {
  // PE/COFF specification, "The .edata Section": the export directory table (ordinal base @16,
  // address table entries @20, name pointers @24, export address table RVA @28, name pointer
  // RVA @32, ordinal table RVA @36), then the three tables.
  const DataDirectory ed = directory(kDirExport);
  if (ed.size < 40) return;
  const auto dir = at_rva(ed.rva, 40);
  if (dir.empty()) return;
  const uint32_t base = le32(dir.data() + 16), naddr = le32(dir.data() + 20), nnames = le32(dir.data() + 24);
  if (naddr > kMaxExports || nnames > kMaxExports) return;
  const auto eat = at_rva(le32(dir.data() + 28), naddr * 4);
  const auto names = at_rva(le32(dir.data() + 32), nnames * 4);
  const auto ords = at_rva(le32(dir.data() + 36), nnames * 2);
  if ((naddr != 0 && eat.empty()) || (nnames != 0 && (names.empty() || ords.empty()))) return;
  std::vector<std::string_view> name_of(naddr);
  for (uint32_t i = 0; i < nnames; i++) {
    const uint16_t o = le16(ords.data() + 2 * size_t{i});
    if (o < naddr && name_of[o].empty()) name_of[o] = string_at_rva(le32(names.data() + 4 * size_t{i}));
  }
  for (uint32_t i = 0; i < naddr; i++) {
    Export e;
    e.rva = le32(eat.data() + 4 * size_t{i});
    if (e.rva == 0) continue;  // an unused ordinal
    e.ordinal = base + i;
    e.name = name_of[i];
    e.forwarder = e.rva >= ed.rva && e.rva - ed.rva < ed.size;
    exports_.push_back(e);
  }
}

const std::vector<Export>& PeObject::exports() const {
  stackprov::call_once(exports_once_, [&] { load_exports(); });
  return exports_;
}

namespace {

/// A function symbol candidate: the symbol, the end of its code section, its preference.
struct Candidate {
  object::Symbol sym;
  uint64_t end = 0;
  int rank = 0;
};

/// Sorts by address, keeps the highest rank of each address (the first in table order among
/// equals) and sizes each to the next kept address or its section's end.
std::vector<object::Symbol> sized_functions(std::vector<Candidate> c) {
  std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.sym.addr < b.sym.addr; });
  std::vector<Candidate> kept;
  for (size_t i = 0; i < c.size();) {
    size_t pick = i, j = i + 1;
    for (; j < c.size() && c[j].sym.addr == c[i].sym.addr; j++)
      if (c[j].rank > c[pick].rank) pick = j;
    kept.push_back(c[pick]);
    i = j;
  }
  std::vector<object::Symbol> out;
  out.reserve(kept.size());
  for (size_t i = 0; i < kept.size(); i++) {
    uint64_t end = kept[i].end;
    if (i + 1 < kept.size()) end = std::min(end, kept[i + 1].sym.addr);
    object::Symbol s = kept[i].sym;
    s.size = end - s.addr;  // > 0: addresses are distinct and below their section's end
    out.push_back(s);
  }
  return out;
}

}  // namespace

void PeObject::load_functions() const {
  // The end of section `sec` (1-based) when it holds code, else 0.
  auto code_end = [&](uint32_t sec) -> uint64_t {
    if (sec == 0 || sec > sections_.size()) return 0;
    const Section& s = sections_[sec - 1];
    if ((s.characteristics & (kScnCode | kScnExecute)) == 0) return 0;
    return image_base_ + s.rva + std::max(s.vsize, s.raw_size);
  };
  std::vector<Candidate> cands;
  for (const CoffSymbol& c : coff_symbols()) {
    if (c.section <= 0 || (c.storage_class != kClassExternal && c.storage_class != kClassStatic)) continue;
    if (c.section_definition() || c.name.empty()) continue;
    const uint32_t sec = static_cast<uint32_t>(c.section);
    const uint64_t end = code_end(sec);
    if (end == 0) continue;
    const uint64_t addr = image_base_ + sections_[sec - 1].rva + c.value;
    if (addr >= end) continue;
    // One name per address: a function's over a label's, EXTERNAL over STATIC, then table order.
    const int rank = ((c.type >> 4) == kDtypeFunction ? 2 : 0) + (c.storage_class == kClassExternal ? 1 : 0);
    cands.push_back({object::Symbol{addr, 0, c.name}, end, rank});
  }
  if (cands.empty()) {
    // No COFF symbols (a stripped image, lld-link's and MSVC's): the named exports of code.
    for (const Export& e : exports()) {
      if (e.forwarder || e.name.empty()) continue;
      for (size_t k = 0; k < sections_.size(); k++) {
        const uint64_t end = code_end(static_cast<uint32_t>(k + 1));
        const uint64_t addr = image_base_ + e.rva;
        if (end != 0 && e.rva >= sections_[k].rva && addr < end) {
          // The first code section holding it: hostile overlapping section headers must not make
          // one export into thousands of candidates.
          cands.push_back({object::Symbol{addr, 0, e.name}, end, 0});
          break;
        }
      }
    }
  }
  functions_ = sized_functions(std::move(cands));
}

std::vector<object::Symbol> PeObject::symbols() const {
  stackprov::call_once(functions_once_, [&] { load_functions(); });
  return functions_;
}

std::optional<object::Symbol> PeObject::symbol_at(uint64_t addr) const {
  stackprov::call_once(functions_once_, [&] { load_functions(); });
  auto it = std::upper_bound(functions_.begin(), functions_.end(), addr,
                             [](uint64_t a, const object::Symbol& s) { return a < s.addr; });
  if (it == functions_.begin()) return std::nullopt;
  --it;
  if (addr - it->addr >= it->size) return std::nullopt;
  return *it;
}

std::vector<object::Symbol> PeObject::symbolizer_symbols() const {
  // llvm-14: computeSymbolSizes (Object/SymbolSize.cpp) sorts every symbol record by (section
  // number, value) together with one end marker per section at ImageBase + VirtualAddress +
  // min(VirtualSize, SizeOfRawData); a symbol's size is the distance to the next higher entry.
  // SymbolizableObjectFile::addSymbol then keeps symbols of a section (1..count) whose type is
  // ST_Function (complex type function) or ST_Data (neither a FILE record nor a section
  // definition), at ImageBase + VirtualAddress + value.
  std::vector<object::Symbol> out;
  const std::vector<CoffSymbol>& all = coff_symbols();
  if (nsyms_ == 0 || symtab_off_ == 0) {
    // addCoffExportSymbols, only when the table has no record: every export, size 0.
    for (const Export& e : exports()) out.push_back(object::Symbol{image_base_ + e.rva, 0, e.name});
    return out;
  }
  struct Entry {
    uint32_t sec;
    uint64_t addr;
  };
  std::vector<Entry> marks;
  marks.reserve(all.size() + sections_.size());
  for (const CoffSymbol& c : all) marks.push_back({static_cast<uint32_t>(static_cast<int32_t>(c.section)), c.value});
  for (size_t k = 0; k < sections_.size(); k++) {
    const Section& s = sections_[k];
    marks.push_back({static_cast<uint32_t>(k + 1), image_base_ + s.rva + std::min(s.vsize, s.raw_size)});
  }
  std::sort(marks.begin(), marks.end(),
            [](const Entry& a, const Entry& b) { return a.sec != b.sec ? a.sec < b.sec : a.addr < b.addr; });
  for (const CoffSymbol& c : all) {
    if (c.section <= 0 || static_cast<uint32_t>(c.section) > sections_.size()) continue;
    if ((c.type >> 4) != kDtypeFunction && (c.storage_class == kClassFile || c.section_definition())) continue;
    const uint32_t sec = static_cast<uint32_t>(c.section);
    // The next entry of a higher value: in this section's run (its end marker at the latest).
    auto it = std::upper_bound(marks.begin(), marks.end(), Entry{sec, c.value},
                               [](const Entry& a, const Entry& b) { return a.sec != b.sec ? a.sec < b.sec : a.addr < b.addr; });
    const uint64_t size = it != marks.end() ? it->addr - c.value : 0;
    out.push_back(object::Symbol{image_base_ + sections_[sec - 1].rva + c.value, size, c.name});
  }
  return out;
}

std::optional<object::SectionRef> PeObject::section(std::string_view name) const {
  for (const Section& s : sections_) {
    if (s.name != name) continue;
    const uint32_t n = s.vsize != 0 ? std::min(s.vsize, s.raw_size) : s.raw_size;
    return object::SectionRef{s.name, data_ + s.raw_offset, n, image_base_ + s.rva};
  }
  return std::nullopt;
}

bool PeObject::read_code(uint64_t vaddr, void* buf, size_t len) const {
  if (vaddr < image_base_ || vaddr - image_base_ > UINT32_MAX || len > UINT32_MAX) return false;
  const auto b = at_rva(static_cast<uint32_t>(vaddr - image_base_), static_cast<uint32_t>(len));
  if (b.size() != len) return false;
  std::memcpy(buf, b.data(), len);
  return true;
}

std::vector<object::UnwindTable> PeObject::unwind_tables() const {
  const DataDirectory ex = directory(kDirException);
  if (ex.size == 0) return {};
  const auto b = at_rva(ex.rva, ex.size);
  if (b.empty()) return {};
  return {object::UnwindTable{"pdata", object::SectionRef{".pdata", b.data(), b.size(), image_base_ + ex.rva}, {}}};
}

std::vector<object::Segment> PeObject::loaded_segments() const {
  std::vector<object::Segment> out;
  for (const Section& s : sections_)
    if (s.raw_size != 0 && s.rva != 0)
      out.push_back({image_base_ + s.rva, s.raw_offset, s.vsize != 0 ? std::min(s.vsize, s.raw_size) : s.raw_size});
  return out;
}

std::vector<object::CodeSection> PeObject::code_sections() const {
  std::vector<object::CodeSection> out;
  for (const Section& s : sections_) {
    if ((s.characteristics & (kScnCode | kScnExecute)) == 0) continue;
    object::CodeSection c;
    c.addr = image_base_ + s.rva;
    c.end = c.addr + s.vsize;
    c.bytes = section(s.name);
    out.push_back(c);
  }
  return out;
}

}  // namespace stackprov::pe
