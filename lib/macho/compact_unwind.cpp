// SPDX-License-Identifier: Apache-2.0
// The __unwind_info decoder (compact_unwind.hpp): the section's arrays and pages checked, lookups, and
// the x86_64 and arm64 encodings as rules.
#include "macho/compact_unwind.hpp"

#include <algorithm>
#include <cinttypes>

#include "macho/macho_bytes.hpp"

namespace stackprov::macho {

namespace {

constexpr size_t kHeaderSize = 28;      // unwind_info_section_header: 7 x u32
constexpr size_t kIndexEntrySize = 12;  // unwind_info_section_header_index_entry
constexpr size_t kLsdaEntrySize = 8;    // unwind_info_section_header_lsda_index_entry
constexpr size_t kRegularEntrySize = 8;
constexpr size_t kCompressedEntrySize = 4;

Error truncated(const char* what, uint64_t off, uint64_t len, size_t size) {
  return make_error(SPROV_ERR_TRUNCATED, "__unwind_info: %s at 0x%" PRIx64 "+0x%" PRIx64 " is beyond the section (0x%zx bytes)",
                    what, off, len, size);
}

bool inside(uint64_t off, uint64_t len, size_t size) { return off <= size && len <= size - off; }

}  // namespace

Result<CompactUnwindTable> CompactUnwindTable::parse(std::span<const uint8_t> s) {
  CompactUnwindTable t;
  const uint8_t* b = s.data();
  if (s.size() < kHeaderSize) return truncated("header", 0, kHeaderSize, s.size());
  UnwindInfoHeader& h = t.header_;
  h.version = le32(b);
  h.common_encodings_offset = le32(b + 4);
  h.common_encodings_count = le32(b + 8);
  h.personalities_offset = le32(b + 12);
  h.personalities_count = le32(b + 16);
  h.index_offset = le32(b + 20);
  h.index_count = le32(b + 24);
  if (h.version != kUnwindSectionVersion)
    return make_error(SPROV_ERR_CFI, "__unwind_info: version %u (only 1 is defined)", h.version);
  if (h.common_encodings_count > kMaxCommonEncodings)
    return make_error(SPROV_ERR_LIMIT, "__unwind_info: %u common encodings (at most 127)", h.common_encodings_count);
  if (h.personalities_count > kMaxPersonalities)
    return make_error(SPROV_ERR_LIMIT, "__unwind_info: %u personalities (at most 3)", h.personalities_count);
  if (h.index_count < 1 || h.index_count > kMaxIndexEntries)
    return make_error(SPROV_ERR_LIMIT, "__unwind_info: %u first-level entries (1 to %u: at least the sentinel)", h.index_count,
                      kMaxIndexEntries);
  if (!inside(h.common_encodings_offset, uint64_t{h.common_encodings_count} * 4, s.size()))
    return truncated("common encodings", h.common_encodings_offset, uint64_t{h.common_encodings_count} * 4, s.size());
  if (!inside(h.personalities_offset, uint64_t{h.personalities_count} * 4, s.size()))
    return truncated("personalities", h.personalities_offset, uint64_t{h.personalities_count} * 4, s.size());
  if (!inside(h.index_offset, uint64_t{h.index_count} * kIndexEntrySize, s.size()))
    return truncated("first-level index", h.index_offset, uint64_t{h.index_count} * kIndexEntrySize, s.size());
  for (uint32_t i = 0; i < h.common_encodings_count; i++) t.common_.push_back(le32(b + h.common_encodings_offset + 4 * i));
  for (uint32_t i = 0; i < h.personalities_count; i++) t.personalities_.push_back(le32(b + h.personalities_offset + 4 * i));
  for (uint32_t i = 0; i < h.index_count; i++) {
    const uint8_t* e = b + h.index_offset + uint64_t{i} * kIndexEntrySize;
    IndexEntry x{le32(e), le32(e + 4), le32(e + 8)};
    if (i > 0 && x.function_offset < t.index_.back().function_offset)
      return make_error(SPROV_ERR_CFI, "__unwind_info: first-level entry %u's function offset 0x%x is below entry %u's 0x%x", i,
                        x.function_offset, i - 1, t.index_.back().function_offset);
    if (i > 0 && x.lsda_index_offset < t.index_.back().lsda_index_offset)
      return make_error(SPROV_ERR_CFI, "__unwind_info: first-level entry %u's LSDA offset 0x%x is below entry %u's 0x%x", i,
                        x.lsda_index_offset, i - 1, t.index_.back().lsda_index_offset);
    t.index_.push_back(x);
  }
  if (t.index_.back().second_level_offset != 0)
    return make_error(SPROV_ERR_CFI, "__unwind_info: the last first-level entry (the sentinel) names a page at 0x%x",
                      t.index_.back().second_level_offset);
  // The LSDA array: from the first entry's LSDA offset to the sentinel's.
  const uint32_t lsda_begin = t.index_.front().lsda_index_offset, lsda_end = t.index_.back().lsda_index_offset;
  if ((lsda_end - lsda_begin) % kLsdaEntrySize != 0 || !inside(lsda_begin, lsda_end - lsda_begin, s.size()))
    return truncated("LSDA array", lsda_begin, lsda_end - lsda_begin, s.size());
  for (uint32_t o = lsda_begin; o < lsda_end; o += kLsdaEntrySize) t.lsdas_.push_back({le32(b + o), le32(b + o + 4)});
  for (size_t i = 0; i < t.index_.size(); i++)
    if ((t.index_[i].lsda_index_offset - lsda_begin) % kLsdaEntrySize != 0)
      return make_error(SPROV_ERR_CFI, "__unwind_info: first-level entry %zu's LSDA offset 0x%x is not on an entry", i,
                        t.index_[i].lsda_index_offset);

  auto check_encoding = [&](uint32_t enc, size_t page, size_t entry) -> Status {
    const uint32_t pers = (enc & kEncodingPersonalityMask) >> 28;
    if (pers > h.personalities_count)
      return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu entry %zu: encoding 0x%08x names personality %u of %u", page, entry,
                        enc, pers, h.personalities_count);
    return {};
  };
  // Pages may not share bytes: every entry and page encoding decoded is a distinct word of the
  // section, so that first-level entries naming one page many times cannot multiply the work.
  uint64_t words = 0;
  auto count_words = [&](uint64_t n, size_t page) -> Status {
    words += n;
    if (words > s.size() / 4)
      return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu brings the page entries past the %zu words the section holds", page,
                        s.size() / 4);
    return {};
  };
  for (size_t i = 0; i + 1 < t.index_.size(); i++) {
    const IndexEntry& ie = t.index_[i];
    const uint32_t page_end = t.index_[i + 1].function_offset;
    SecondLevelPage pg;
    pg.section_offset = ie.second_level_offset;
    pg.base_function_offset = ie.function_offset;
    if (!inside(ie.second_level_offset, 8, s.size())) return truncated("second-level page header", ie.second_level_offset, 8, s.size());
    const uint8_t* p = b + ie.second_level_offset;
    pg.kind = le32(p);
    const uint32_t entry_off = le16(p + 4), entry_count = le16(p + 6);
    if (Status st = count_words(entry_count, i); !st) return st.error();
    // The last page may end with an entry at the sentinel's offset: ld64.lld-16 puts the sentinel at
    // the start of a last function that has no unwind information (encoding 0) and lists that function
    // too. find() never reaches it (an address at or past the sentinel is outside the table), as in
    // libunwind.
    const bool last_page = i + 2 == t.index_.size();
    auto entry_in_range = [&](uint32_t fo, size_t k) -> Status {
      if (fo < ie.function_offset || (fo >= page_end && !(last_page && fo == page_end)) ||
          (k > 0 && fo <= pg.entries.back().function_offset))
        return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu entry %zu: function offset 0x%x outside [0x%x, 0x%x) or not "
                          "above the entry before it", i, k, fo, ie.function_offset, page_end);
      return {};
    };
    if (pg.kind == kSecondLevelRegular) {
      if (!inside(uint64_t{ie.second_level_offset} + entry_off, uint64_t{entry_count} * kRegularEntrySize, s.size()))
        return truncated("regular page entries", uint64_t{ie.second_level_offset} + entry_off, uint64_t{entry_count} * kRegularEntrySize,
                         s.size());
      for (uint32_t k = 0; k < entry_count; k++) {
        const uint8_t* e = p + entry_off + k * kRegularEntrySize;
        PageEntry x{le32(e), le32(e + 4), -1};
        if (Status st = entry_in_range(x.function_offset, k); !st) return st.error();
        if (Status st = check_encoding(x.encoding, i, k); !st) return st.error();
        pg.entries.push_back(x);
      }
    } else if (pg.kind == kSecondLevelCompressed) {
      if (!inside(ie.second_level_offset, 12, s.size())) return truncated("compressed page header", ie.second_level_offset, 12, s.size());
      const uint32_t enc_off = le16(p + 8), enc_count = le16(p + 10);
      if (!inside(uint64_t{ie.second_level_offset} + entry_off, uint64_t{entry_count} * kCompressedEntrySize, s.size()))
        return truncated("compressed page entries", uint64_t{ie.second_level_offset} + entry_off,
                         uint64_t{entry_count} * kCompressedEntrySize, s.size());
      if (!inside(uint64_t{ie.second_level_offset} + enc_off, uint64_t{enc_count} * 4, s.size()))
        return truncated("page encodings", uint64_t{ie.second_level_offset} + enc_off, uint64_t{enc_count} * 4, s.size());
      if (h.common_encodings_count + enc_count > 256)
        return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu has %u encodings after %u common ones (an index holds 256)", i,
                          enc_count, h.common_encodings_count);
      if (Status st = count_words(enc_count, i); !st) return st.error();
      for (uint32_t k = 0; k < enc_count; k++) pg.local_encodings.push_back(le32(p + enc_off + 4 * k));
      for (uint32_t k = 0; k < entry_count; k++) {
        const uint32_t v = le32(p + entry_off + k * kCompressedEntrySize);
        const uint32_t idx = v >> 24;
        PageEntry x;
        x.function_offset = ie.function_offset + (v & 0x00ffffff);
        x.encoding_index = static_cast<int32_t>(idx);
        if (idx < h.common_encodings_count) x.encoding = t.common_[idx];
        else if (idx - h.common_encodings_count < enc_count) x.encoding = pg.local_encodings[idx - h.common_encodings_count];
        else
          return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu entry %u: encoding index %u past the %u common and %u page encodings",
                            i, k, idx, h.common_encodings_count, enc_count);
        if (x.function_offset < ie.function_offset)  // the 24-bit offset wrapped past 4 GiB
          return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu entry %u: function offset wraps", i, k);
        if (Status st = entry_in_range(x.function_offset, k); !st) return st.error();
        if (Status st = check_encoding(x.encoding, i, k); !st) return st.error();
        pg.entries.push_back(x);
      }
    } else {
      return make_error(SPROV_ERR_CFI, "__unwind_info: page %zu at 0x%x has kind %u (2 regular or 3 compressed)", i,
                        ie.second_level_offset, pg.kind);
    }
    t.pages_.push_back(std::move(pg));
  }
  return t;
}

std::optional<FunctionUnwind> CompactUnwindTable::find(uint32_t fo) const {
  // The last first-level entry at or before fo, the sentinel excluded.
  if (index_.size() < 2 || fo < index_.front().function_offset || fo >= index_.back().function_offset) return std::nullopt;
  auto it = std::upper_bound(index_.begin(), index_.end() - 1, fo,
                             [](uint32_t v, const IndexEntry& e) { return v < e.function_offset; });
  const size_t i = static_cast<size_t>(it - index_.begin()) - 1;
  const SecondLevelPage& pg = pages_[i];
  auto e = std::upper_bound(pg.entries.begin(), pg.entries.end(), fo,
                            [](uint32_t v, const PageEntry& x) { return v < x.function_offset; });
  if (e == pg.entries.begin()) return std::nullopt;
  FunctionUnwind out;
  out.start = (e - 1)->function_offset;
  out.encoding = (e - 1)->encoding;
  out.end = e != pg.entries.end() ? e->function_offset : index_[i + 1].function_offset;
  if (const uint32_t pers = (out.encoding & kEncodingPersonalityMask) >> 28; pers != 0) out.personality = personalities_[pers - 1];
  if ((out.encoding & kEncodingHasLsda) != 0) {
    // This page's part of the LSDA array, by function offset.
    const uint32_t lsda_base = index_.front().lsda_index_offset;
    const size_t lo = (index_[i].lsda_index_offset - lsda_base) / 8, hi = (index_[i + 1].lsda_index_offset - lsda_base) / 8;
    auto l = std::lower_bound(lsdas_.begin() + static_cast<std::ptrdiff_t>(lo), lsdas_.begin() + static_cast<std::ptrdiff_t>(hi),
                              out.start, [](const LsdaEntry& x, uint32_t v) { return x.function_offset < v; });
    if (l != lsdas_.begin() + static_cast<std::ptrdiff_t>(hi) && l->function_offset == out.start) out.lsda = l->lsda_offset;
  }
  return out;
}

namespace {

// x86_64 (compact_unwind_encoding.h).
constexpr uint32_t kX86ModeRbpFrame = 0x01000000, kX86ModeStackImmd = 0x02000000, kX86ModeStackInd = 0x03000000,
                   kX86ModeDwarf = 0x04000000;
constexpr uint32_t kX86RbpFrameRegisters = 0x00007fff, kX86RbpFrameOffset = 0x00ff0000;
constexpr uint32_t kX86StackSize = 0x00ff0000, kX86StackAdjust = 0x0000e000, kX86StackRegCount = 0x00001c00,
                   kX86StackRegPermutation = 0x000003ff;
constexpr uint32_t kDwarfSectionOffset = 0x00ffffff;
// UNWIND_X86_64_REG_* (1 rbx, 2 r12, 3 r13, 4 r14, 5 r15, 6 rbp) as DWARF numbers.
constexpr uint8_t kX86DwarfOf[7] = {0, 3, 12, 13, 14, 15, 6};
constexpr uint8_t kX86DwarfRbp = 6, kX86DwarfRa = 16;

// arm64.
constexpr uint32_t kArmModeFrameless = 0x02000000, kArmModeDwarf = 0x03000000, kArmModeFrame = 0x04000000;
constexpr uint32_t kArmFramelessStackSize = 0x00fff000;
constexpr uint32_t kArmPairFlags = 0x00000f1f;  // X19_X20 .. X27_X28 (0x1-0x10), D8_D9 .. D14_D15 (0x100-0x800)

uint32_t shift_of(uint32_t mask) { return static_cast<uint32_t>(__builtin_ctz(mask)); }
uint32_t field(uint32_t enc, uint32_t mask) { return (enc & mask) >> shift_of(mask); }

void add_saved(CompactRule& r, uint8_t reg, int32_t off) {
  if (r.nsaved < CompactRule::kMaxSaved) r.saved[r.nsaved++] = {reg, off};
}

}  // namespace

Result<CompactRule> decode_x86_64(uint32_t enc, uint64_t function_start, const CodeReader& code) {
  CompactRule r;
  r.arch = Arch::kX86_64;
  r.encoding = enc;
  const uint32_t mode = enc & kEncodingModeMask;
  switch (mode) {
    case 0:
      if ((enc & ~(kEncodingIsStart | kEncodingHasLsda | kEncodingPersonalityMask)) != 0)
        return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: mode 0 with other bits set", enc);
      r.kind = CompactRule::Kind::kNone;
      return r;
    case kX86ModeRbpFrame: {
      // push rbp; mov rbp, rsp; the registers saved at rbp - 8 x offset upward. cfa = rbp + 16.
      r.kind = CompactRule::Kind::kFramePointer;
      add_saved(r, kX86DwarfRa, -8);
      add_saved(r, kX86DwarfRbp, -16);
      const uint32_t regs = field(enc, kX86RbpFrameRegisters), offset = field(enc, kX86RbpFrameOffset);
      int32_t at = -16 - 8 * static_cast<int32_t>(offset);
      for (int i = 0; i < 5; i++, at += 8) {
        const uint32_t reg = (regs >> (3 * i)) & 7;
        if (reg == 0) continue;
        if (reg > 6) return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: RBP frame register %d is %u (1 to 6)", enc, i, reg);
        if (at >= -16)
          return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: RBP frame register %d saved at rbp%+d, over the frame", enc,
                            i, at + 16);
        for (uint8_t k = 0; k < r.nsaved; k++)
          if (r.saved[k].reg == kX86DwarfOf[reg])
            return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: RBP frame register %d (%u) is saved twice", enc, i, reg);
        add_saved(r, kX86DwarfOf[reg], at);
      }
      return r;
    }
    case kX86ModeStackImmd:
    case kX86ModeStackInd: {
      r.kind = CompactRule::Kind::kFrameless;
      uint32_t size = field(enc, kX86StackSize);
      if (mode == kX86ModeStackImmd) {
        size *= 8;
      } else {
        // The size field is where the `sub rsp, imm32` immediate is, from the function's start.
        r.stack_indirect = true;
        r.stack_imm_offset = size;
        uint8_t insn[7];
        if (size < 3 || !code || !code(function_start + size - 3, insn, sizeof insn))
          return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: the stack size's immediate at function 0x%" PRIx64
                            " + 0x%x cannot be read", enc, function_start, size);
        if (insn[0] != 0x48 || insn[1] != 0x81 || insn[2] != 0xec)
          return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: function 0x%" PRIx64 " + 0x%x is not the immediate of a "
                            "`sub rsp, imm32` (48 81 EC; found %02x %02x %02x)", enc, function_start, size, insn[0], insn[1], insn[2]);
        const uint64_t total = uint64_t{le32(insn + 3)} + 8 * uint64_t{field(enc, kX86StackAdjust)};
        if (total > UINT32_MAX - 8)
          return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: stack size 0x%" PRIx64 " too large", enc, total);
        size = static_cast<uint32_t>(total);
      }
      r.stack_size = size;
      add_saved(r, kX86DwarfRa, -8);
      const uint32_t count = field(enc, kX86StackRegCount);
      uint32_t perm = field(enc, kX86StackRegPermutation);
      if (count > 6) return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: %u saved registers (at most 6)", enc, count);
      if (size < 8 + 8 * count)
        return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: stack size %u holds no %u registers and a return address",
                          enc, size, count);
      // The Lehmer code of the push order: digit i ranges over the 6 - i registers left
      // (libunwind CompactUnwinder_x86_64::stepWithCompactEncodingFrameless).
      static const uint32_t kRadix[7][6] = {{}, {1}, {5, 1}, {20, 4, 1}, {60, 12, 3, 1}, {120, 24, 6, 2, 1}, {120, 24, 6, 2, 1, 0}};
      static const uint32_t kLimit[7] = {1, 6, 30, 120, 360, 720, 720};
      if (perm >= kLimit[count])
        return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: permutation %u out of range for %u registers (< %u)", enc,
                          perm, count, kLimit[count]);
      uint32_t digit[6] = {};
      for (uint32_t i = 0; i < count; i++) {
        if (kRadix[count][i] == 0) break;  // six registers: the last digit is 0
        digit[i] = perm / kRadix[count][i];
        perm -= digit[i] * kRadix[count][i];
      }
      bool used[7] = {};
      int32_t at = -8 - 8 * static_cast<int32_t>(count);
      for (uint32_t i = 0; i < count; i++, at += 8) {
        if (digit[i] >= 6 - i)
          return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: permutation digit %u is %u (< %u)", enc, i, digit[i], 6 - i);
        uint32_t left = 0, reg = 0;
        for (uint32_t u = 1; u <= 6; u++) {
          if (used[u]) continue;
          if (left++ == digit[i]) {
            reg = u;
            break;
          }
        }
        used[reg] = true;
        add_saved(r, kX86DwarfOf[reg], at);
      }
      return r;
    }
    case kX86ModeDwarf:
      r.kind = CompactRule::Kind::kDwarf;
      r.fde_offset = enc & kDwarfSectionOffset;
      return r;
    default:
      return make_error(SPROV_ERR_CFI, "x86_64 compact encoding 0x%08x: mode %u (1 to 4 are defined)", enc, mode >> 24);
  }
}

Result<CompactRule> decode_arm64(uint32_t enc) {
  CompactRule r;
  r.arch = Arch::kArm64;
  r.encoding = enc;
  const uint32_t mode = enc & kEncodingModeMask;
  // The pairs (x19, x20), ..., (x27, x28), (d8, d9), ..., (d14, d15), the first at `top` - 8
  // downward: libunwind CompactUnwinder_arm64.
  auto pairs = [&](int32_t top) -> Status {
    if ((enc & 0x00000fff & ~kArmPairFlags) != 0)
      return make_error(SPROV_ERR_CFI, "arm64 compact encoding 0x%08x: register flags 0x%03x outside the pairs'", enc, enc & 0xfff);
    int32_t at = top - 8;
    for (uint32_t k = 0; k < 5; k++)
      if ((enc & (1u << k)) != 0) {
        add_saved(r, static_cast<uint8_t>(19 + 2 * k), at);
        add_saved(r, static_cast<uint8_t>(20 + 2 * k), at - 8);
        at -= 16;
      }
    for (uint32_t k = 0; k < 4; k++)
      if ((enc & (0x100u << k)) != 0) {
        add_saved(r, static_cast<uint8_t>(72 + 2 * k), at);
        add_saved(r, static_cast<uint8_t>(73 + 2 * k), at - 8);
        at -= 16;
      }
    return {};
  };
  switch (mode) {
    case 0:
      if ((enc & ~(kEncodingIsStart | kEncodingHasLsda | kEncodingPersonalityMask)) != 0)
        return make_error(SPROV_ERR_CFI, "arm64 compact encoding 0x%08x: mode 0 with other bits set", enc);
      r.kind = CompactRule::Kind::kNone;
      r.ra_in_lr = true;
      return r;
    case kArmModeFrame:
      // stp fp, lr, [sp, #-16]!; mov fp, sp (the pairs below): cfa = fp + 16.
      r.kind = CompactRule::Kind::kFramePointer;
      add_saved(r, 30, -8);
      add_saved(r, 29, -16);
      if (Status s = pairs(-16); !s) return s.error();
      return r;
    case kArmModeFrameless:
      r.kind = CompactRule::Kind::kFrameless;
      r.ra_in_lr = true;
      r.stack_size = 16 * field(enc, kArmFramelessStackSize);
      if (Status s = pairs(0); !s) return s.error();
      if (r.nsaved * 8u > r.stack_size)
        return make_error(SPROV_ERR_CFI, "arm64 compact encoding 0x%08x: %u saved registers do not fit in %u stack bytes", enc, r.nsaved,
                          r.stack_size);
      return r;
    case kArmModeDwarf:
      r.kind = CompactRule::Kind::kDwarf;
      r.fde_offset = enc & kDwarfSectionOffset;
      return r;
    default:
      return make_error(SPROV_ERR_CFI, "arm64 compact encoding 0x%08x: mode %u (2 to 4 are defined)", enc, mode >> 24);
  }
}

}  // namespace stackprov::macho
