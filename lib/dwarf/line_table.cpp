// SPDX-License-Identifier: Apache-2.0
// DWARF 2–5 line-number program decoder (DWARF 5 section 6.2) with llvm-symbolizer's lookup rules.
#include "dwarf/line_table.hpp"

#include <algorithm>
#include <climits>

namespace stackprov::dwarf {

namespace {

// DWARF 5 section 7.22: standard and extended opcodes, line-number content types.
enum : uint8_t {
  kLnsCopy = 1, kLnsAdvancePc, kLnsAdvanceLine, kLnsSetFile, kLnsSetColumn, kLnsNegateStmt,
  kLnsSetBasicBlock, kLnsConstAddPc, kLnsFixedAdvancePc, kLnsSetPrologueEnd, kLnsSetEpilogueBegin,
  kLnsSetIsa,
};
enum : uint8_t { kLneEndSequence = 1, kLneSetAddress = 2, kLneDefineFile = 3, kLneSetDiscriminator = 4 };
enum : uint64_t { kLnctPath = 1, kLnctDirectoryIndex = 2 };

Error bad(uint64_t offset, const char* what) {
  return make_error(SPROV_ERR_DWARF, ".debug_line at 0x%llx: %s", static_cast<unsigned long long>(offset), what);
}

/// Reads one attribute of a DWARF 5 directory/file entry; string forms give
/// *str, constant forms *num. False for a form that cannot appear here.
bool read_entry_form(Cursor& c, uint64_t form, bool is64, const LineSections& s, std::string_view* str,
                     uint64_t* num) {
  switch (form) {
    case kFormString: *str = c.cstr(); return c.ok;
    case kFormLineStrp: *str = section_string(s.line_str, c.offset(is64)); return c.ok;
    case kFormStrp: *str = section_string(s.str, c.offset(is64)); return c.ok;
    case kFormStrx: case kFormGnuStrIndex: c.uleb(); return c.ok;  // needs str_offsets_base: unsupported, name stays empty
    case kFormStrx1: c.skip(1); return c.ok;
    case kFormStrx2: c.skip(2); return c.ok;
    case kFormStrx3: c.skip(3); return c.ok;
    case kFormStrx4: c.skip(4); return c.ok;
    case kFormUdata: *num = c.uleb(); return c.ok;
    case kFormData1: *num = c.u8(); return c.ok;
    case kFormData2: *num = c.u16(); return c.ok;
    case kFormData4: *num = c.u32(); return c.ok;
    case kFormData8: *num = c.u64(); return c.ok;
    case kFormData16: c.skip(16); return c.ok;
    case kFormBlock: c.skip(c.uleb()); return c.ok;
    case kFormBlock1: c.skip(c.u8()); return c.ok;
    case kFormBlock2: c.skip(c.u16()); return c.ok;
    case kFormBlock4: c.skip(c.u32()); return c.ok;
    case kFormSdata: c.sleb(); return c.ok;
    default: return false;
  }
}

}  // namespace

void path_append(std::string* path, std::string_view part) {
  if (!path->empty() && path->back() == '/') {
    size_t i = part.find_first_not_of('/');
    if (i != std::string_view::npos) path->append(part.substr(i));
    return;
  }
  if (part.empty()) {
    if (!path->empty()) path->push_back('/');
    return;
  }
  if (!path->empty() && part.front() != '/') path->push_back('/');
  path->append(part);
}

Result<LineTable> LineTable::parse(const LineSections& s, uint64_t offset, uint8_t cu_addr_size,
                                   std::string_view comp_dir, const LineLimits& limits) {
  LineTable t;
  std::vector<LineRow> rows;  // decoded here, packed at the end
  t.comp_dir_ = comp_dir;
  if (s.line.empty() || offset >= s.line.size) return bad(offset, "offset outside .debug_line");
  Cursor c(s.line, offset, s.big_endian);
  bool is64 = false;
  uint64_t unit_length = c.initial_length(&is64);
  if (!c.ok || unit_length > c.remaining()) return bad(offset, "unit length exceeds the section");
  const size_t unit_end = c.pos + static_cast<size_t>(unit_length);
  c.end = unit_end;
  t.version_ = c.u16();
  if (t.version_ < 2 || t.version_ > 5) return bad(offset, "unsupported line table version");
  uint8_t addr_size = cu_addr_size;
  if (t.version_ >= 5) {
    addr_size = c.u8();
    c.u8();  // segment_selector_size
  }
  uint64_t header_length = c.offset(is64);
  if (!c.ok || header_length > c.remaining()) return bad(offset, "header length exceeds the unit");
  const size_t program_start = c.pos + static_cast<size_t>(header_length);
  const uint8_t min_inst = c.u8();
  uint8_t max_ops = 1;
  if (t.version_ >= 4) max_ops = c.u8();
  if (max_ops == 0) max_ops = 1;
  const bool default_is_stmt = c.u8() != 0;
  const int8_t line_base = c.s8();
  const uint8_t line_range = c.u8();
  const uint8_t opcode_base = c.u8();
  uint8_t std_lengths[256] = {};
  for (unsigned i = 1; i < opcode_base && c.ok; i++) std_lengths[i] = c.u8();
  if (!c.ok) return bad(offset, "truncated header");

  if (t.version_ >= 5) {
    for (int pass = 0; pass < 2; pass++) {  // 0: directories, 1: files
      uint8_t fmt_count = c.u8();
      std::pair<uint64_t, uint64_t> fmt[256];
      for (unsigned i = 0; i < fmt_count && c.ok; i++) fmt[i] = {c.uleb(), c.uleb()};
      uint64_t count = c.uleb();
      if (!c.ok) return bad(offset, "truncated entry format");
      if (count > limits.max_files || count > c.remaining()) return bad(offset, "too many directory/file entries");
      for (uint64_t e = 0; e < count; e++) {
        std::string_view path;
        uint64_t dir = 0;
        for (unsigned i = 0; i < fmt_count; i++) {
          std::string_view str;
          uint64_t num = 0;
          if (!read_entry_form(c, fmt[i].second, is64, s, &str, &num)) return bad(offset, "bad form in entry format");
          if (fmt[i].first == kLnctPath) path = str;
          if (fmt[i].first == kLnctDirectoryIndex) dir = num;
        }
        if (pass == 0)
          t.dirs_.push_back(path);
        else
          t.files_.push_back(FileEntry{path, dir});
      }
    }
  } else {
    for (;;) {
      std::string_view d = c.cstr();
      if (!c.ok) return bad(offset, "truncated include_directories");
      if (d.empty()) break;
      if (t.dirs_.size() >= limits.max_files) return bad(offset, "too many include directories");
      t.dirs_.push_back(d);
    }
    t.files_.push_back(FileEntry{});  // file 0 does not exist before DWARF 5
    for (;;) {
      std::string_view name = c.cstr();
      if (!c.ok) return bad(offset, "truncated file_names");
      if (name.empty()) break;
      uint64_t dir = c.uleb();
      c.uleb();  // mtime
      c.uleb();  // length
      if (!c.ok) return bad(offset, "truncated file entry");
      if (t.files_.size() >= limits.max_files) return bad(offset, "too many files");
      t.files_.push_back(FileEntry{name, dir});
    }
  }
  if (program_start > unit_end) return bad(offset, "header past the unit");
  c.pos = program_start;

  // The state machine (DWARF 5 section 6.2.2, table 6.3).
  LineRow row;
  uint32_t op_index = 0;
  auto reset = [&] {
    row = LineRow{};
    row.file = 1;
    row.line = 1;
    if (default_is_stmt) row.flags = LineRow::kIsStmt;
    op_index = 0;
  };
  reset();
  bool seq_open = false;
  LineSequence seq;
  auto advance = [&](uint64_t operation_advance) {
    uint64_t total = op_index + operation_advance;
    row.address += static_cast<uint64_t>(min_inst) * (total / max_ops);
    op_index = static_cast<uint32_t>(total % max_ops);
  };
  auto append = [&]() -> bool {
    if (rows.size() >= limits.max_rows) return false;
    if (!seq_open) {
      seq_open = true;
      seq.low = row.address;
      seq.first_row = static_cast<uint32_t>(rows.size());
    }
    rows.push_back(row);
    if (row.end_sequence()) {
      seq.high = row.address;
      seq.last_row = static_cast<uint32_t>(rows.size());
      if (seq.low < seq.high && seq.first_row < seq.last_row)
        t.sequences_.push_back(seq);
      else
        rows.resize(seq.first_row);  // llvm drops invalid sequences; keep no orphan rows
      seq_open = false;
    }
    row.discriminator = 0;
    row.flags &= static_cast<uint8_t>(~(LineRow::kBasicBlock | LineRow::kPrologueEnd | LineRow::kEpilogueBegin));
    return true;
  };

  while (c.ok && c.pos < unit_end) {
    uint8_t op = c.u8();
    if (op >= opcode_base) {
      if (line_range == 0) return bad(offset, "special opcode with line_range 0");
      uint8_t adjusted = op - opcode_base;
      advance(adjusted / line_range);
      row.line += static_cast<uint32_t>(static_cast<int32_t>(line_base) + adjusted % line_range);
      if (!append()) return bad(offset, "too many rows");
      continue;
    }
    switch (op) {
      case 0: {
        uint64_t len = c.uleb();
        if (!c.ok || len == 0 || len > c.remaining()) return bad(offset, "bad extended opcode length");
        const size_t next = c.pos + static_cast<size_t>(len);
        uint8_t sub = c.u8();
        switch (sub) {
          case kLneEndSequence:
            row.flags |= LineRow::kEndSequence;
            if (!append()) return bad(offset, "too many rows");
            reset();
            break;
          case kLneSetAddress: {
            uint64_t n = len - 1;
            if (t.version_ >= 5 && addr_size != 0 && n != addr_size) return bad(offset, "DW_LNE_set_address size");
            if (n != 1 && n != 2 && n != 4 && n != 8) return bad(offset, "DW_LNE_set_address size");
            row.address = c.fixed(static_cast<unsigned>(n));
            op_index = 0;
            break;
          }
          case kLneDefineFile: {
            std::string_view name = c.cstr();
            uint64_t dir = c.uleb();
            if (c.ok && t.files_.size() < limits.max_files) t.files_.push_back(FileEntry{name, dir});
            break;
          }
          case kLneSetDiscriminator:
            row.discriminator = static_cast<uint32_t>(c.uleb());
            break;
          default:
            break;
        }
        if (!c.ok) return bad(offset, "truncated extended opcode");
        c.pos = next;  // lengths are authoritative (unknown and over-long opcodes)
        break;
      }
      case kLnsCopy:
        if (!append()) return bad(offset, "too many rows");
        break;
      case kLnsAdvancePc: advance(c.uleb()); break;
      case kLnsAdvanceLine: row.line += static_cast<uint32_t>(c.sleb()); break;
      case kLnsSetFile: row.file = static_cast<uint32_t>(c.uleb()); break;
      case kLnsSetColumn: row.column = static_cast<uint16_t>(c.uleb()); break;
      case kLnsNegateStmt: row.flags ^= LineRow::kIsStmt; break;
      case kLnsSetBasicBlock: row.flags |= LineRow::kBasicBlock; break;
      case kLnsConstAddPc:
        if (line_range == 0) return bad(offset, "DW_LNS_const_add_pc with line_range 0");
        advance((255 - opcode_base) / line_range);
        break;
      case kLnsFixedAdvancePc:
        row.address += c.u16();
        op_index = 0;
        break;
      case kLnsSetPrologueEnd: row.flags |= LineRow::kPrologueEnd; break;
      case kLnsSetEpilogueBegin: row.flags |= LineRow::kEpilogueBegin; break;
      case kLnsSetIsa: c.uleb(); break;
      default:
        for (unsigned i = 0; i < std_lengths[op] && c.ok; i++) c.uleb();
        break;
    }
  }
  if (!c.ok) return bad(offset, "truncated line program");
  if (seq_open) rows.resize(seq.first_row);  // a sequence without DW_LNE_end_sequence is dropped
  // Pack: 32-bit offsets from each sequence's low when every row fits, else full addresses.
  bool narrow = true;
  for (const LineSequence& q : t.sequences_)
    for (uint32_t i = q.first_row; i < q.last_row && narrow; i++)
      narrow = rows[i].address >= q.low && rows[i].address - q.low <= UINT32_MAX;
  if (narrow) {
    t.addr32_.resize(rows.size());
    for (const LineSequence& q : t.sequences_)
      for (uint32_t i = q.first_row; i < q.last_row; i++) t.addr32_[i] = static_cast<uint32_t>(rows[i].address - q.low);
  } else {
    t.addr64_.resize(rows.size());
    for (size_t i = 0; i < rows.size(); i++) t.addr64_[i] = rows[i].address;
  }
  t.attrs_.resize(rows.size());
  for (size_t i = 0; i < rows.size(); i++) {
    const LineRow& r = rows[i];
    t.attrs_[i] = RowAttrs{r.line, r.file, r.column, r.flags};
    if (r.discriminator != 0) t.discriminators_.emplace_back(static_cast<uint32_t>(i), r.discriminator);
  }
  t.discriminators_.shrink_to_fit();
  std::stable_sort(t.sequences_.begin(), t.sequences_.end(),
                   [](const LineSequence& a, const LineSequence& b) { return a.high < b.high; });
  t.sequences_.shrink_to_fit();
  return t;
}

LineRow LineTable::decode(const LineSequence& seq, uint32_t row) const {
  LineRow r;
  r.address = row_address(seq, row);
  const RowAttrs& a = attrs_[row];
  r.line = a.line;
  r.file = a.file;
  r.column = a.column;
  r.flags = a.flags;
  if (!discriminators_.empty()) {
    auto it = std::lower_bound(discriminators_.begin(), discriminators_.end(), row,
                               [](const std::pair<uint32_t, uint32_t>& d, uint32_t i) { return d.first < i; });
    if (it != discriminators_.end() && it->first == row) r.discriminator = it->second;
  }
  return r;
}

std::vector<LineRow> LineTable::rows() const {
  std::vector<LineRow> out(attrs_.size());
  for (const LineSequence& q : sequences_)
    for (uint32_t i = q.first_row; i < q.last_row; i++) out[i] = decode(q, i);
  return out;
}

std::optional<LineRow> LineTable::lookup(uint64_t addr) const {
  auto it = std::upper_bound(sequences_.begin(), sequences_.end(), addr,
                             [](uint64_t a, const LineSequence& s) { return a < s.high; });
  if (it == sequences_.end() || addr < it->low || addr >= it->high) return std::nullopt;
  const LineSequence& q = *it;
  if (q.last_row - q.first_row < 2) return std::nullopt;
  // The last row (end_sequence) is never the answer: search rows [first + 1, last - 1).
  uint32_t pos;
  if (addr64_.empty()) {
    const uint32_t off = static_cast<uint32_t>(addr - q.low);  // < high - low, which fits (narrow table)
    pos = static_cast<uint32_t>(std::upper_bound(addr32_.begin() + q.first_row + 1, addr32_.begin() + q.last_row - 1, off) -
                                addr32_.begin());
  } else {
    pos = static_cast<uint32_t>(std::upper_bound(addr64_.begin() + q.first_row + 1, addr64_.begin() + q.last_row - 1, addr) -
                                addr64_.begin());
  }
  return decode(q, pos - 1);
}

bool LineTable::has_file(uint64_t index) const {
  if (version_ >= 5) return index < files_.size();
  return index != 0 && index < files_.size();
}

bool LineTable::file_path(uint64_t index, std::string* out) const {
  out->clear();
  if (!has_file(index)) return false;
  const FileEntry& f = files_[index];
  if (!f.name.empty() && f.name.front() == '/') {
    out->assign(f.name);
    return true;
  }
  std::string_view dir;
  if (version_ >= 5) {
    if (f.dir < dirs_.size()) dir = dirs_[f.dir];
  } else if (f.dir > 0 && f.dir <= dirs_.size()) {
    dir = dirs_[f.dir - 1];
  }
  if (!comp_dir_.empty() && (dir.empty() || dir.front() != '/')) path_append(out, comp_dir_);
  path_append(out, dir);
  path_append(out, f.name);
  return true;
}

size_t LineTable::memory_bytes() const {
  return sizeof(*this) + addr32_.capacity() * sizeof(uint32_t) + addr64_.capacity() * sizeof(uint64_t) +
         attrs_.capacity() * sizeof(RowAttrs) + discriminators_.capacity() * sizeof(discriminators_[0]) +
         sequences_.capacity() * sizeof(LineSequence) +
         files_.capacity() * sizeof(FileEntry) + dirs_.capacity() * sizeof(std::string_view);
}

}  // namespace stackprov::dwarf
