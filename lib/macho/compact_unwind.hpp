// SPDX-License-Identifier: Apache-2.0
// Mach-O compact unwind (__TEXT,__unwind_info), decoded and checked: the two-level index, regular and
// compressed second-level pages, personality and LSDA arrays, and each x86_64 and arm64 encoding as
// a plain rule (where the CFA is, where the return address and the saved registers are).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

// Format: Apple's <mach-o/compact_unwind_encoding.h> (as in LLVM libunwind,
// include/mach-o/compact_unwind_encoding.h): unwind_info_section_header, the first-level
// unwind_info_section_header_index_entry array (its last entry a sentinel), the
// unwind_info_section_header_lsda_index_entry array, UNWIND_SECOND_LEVEL_REGULAR (2) and
// UNWIND_SECOND_LEVEL_COMPRESSED (3) pages, and the UNWIND_X86_64_* / UNWIND_ARM64_* encodings.
// Their meaning as LLVM libunwind's CompactUnwinder.hpp applies them; the bounds checked are those
// of dyld's CompactUnwind valid() and libunwind's getInfoFromCompactEncodingSection.
//
// Error convention: SPROV_ERR_TRUNCATED when an array or page reaches past the section,
// SPROV_ERR_CFI when the bytes are there but malformed (unsorted offsets, an encoding index past
// the encodings, an unknown mode or register), SPROV_ERR_LIMIT past the limits below. Messages name
// the offending index or page and the value. Nothing throws but std::bad_alloc.
// Thread-safety: a CompactUnwindTable is immutable after parse; everything here is pure.

namespace stackprov::macho {

inline constexpr uint32_t kUnwindSectionVersion = 1;
inline constexpr uint32_t kSecondLevelRegular = 2;
inline constexpr uint32_t kSecondLevelCompressed = 3;
inline constexpr uint32_t kEncodingModeMask = 0x0f000000;
inline constexpr uint32_t kEncodingHasLsda = 0x40000000;
inline constexpr uint32_t kEncodingPersonalityMask = 0x30000000;
inline constexpr uint32_t kEncodingIsStart = 0x80000000;
/// Limits on what a hostile section may declare (the format's own fields bound the rest).
inline constexpr uint32_t kMaxIndexEntries = 1u << 20;
inline constexpr uint32_t kMaxCommonEncodings = 127;  ///< a compressed entry's 8-bit index holds common + local
inline constexpr uint32_t kMaxPersonalities = 3;      ///< two bits of the encoding

/// unwind_info_section_header.
struct UnwindInfoHeader {
  uint32_t version = 0;
  uint32_t common_encodings_offset = 0, common_encodings_count = 0;
  uint32_t personalities_offset = 0, personalities_count = 0;
  uint32_t index_offset = 0, index_count = 0;
};

/// A first-level index entry. Function offsets here and below are from the image's base (the
/// __TEXT segment's vmaddr). The last entry is the sentinel: the end of the last function, page 0.
struct IndexEntry {
  uint32_t function_offset = 0;
  uint32_t second_level_offset = 0;  ///< from the section's start; 0 in the sentinel
  uint32_t lsda_index_offset = 0;    ///< from the section's start: this page's first LSDA entry
};

struct LsdaEntry {
  uint32_t function_offset = 0;
  uint32_t lsda_offset = 0;  ///< from the image's base
};

/// One function's entry in a second-level page.
struct PageEntry {
  uint32_t function_offset = 0;  ///< from the image's base (a compressed entry's 24 bits plus the page's base)
  uint32_t encoding = 0;
  int32_t encoding_index = -1;  ///< compressed pages: the 8-bit index (common, then the page's own); -1 regular
};

/// A second-level page, decoded.
struct SecondLevelPage {
  uint32_t section_offset = 0;  ///< where it starts in the section
  uint32_t kind = 0;            ///< kSecondLevelRegular or kSecondLevelCompressed
  uint32_t base_function_offset = 0;  ///< its first-level entry's function offset
  std::vector<uint32_t> local_encodings;  ///< compressed: the page's own encodings (indices from the common count)
  std::vector<PageEntry> entries;
};

/// What the section says about the function holding an address.
struct FunctionUnwind {
  uint32_t start = 0, end = 0;  ///< function offsets: [start, end) has this encoding
  uint32_t encoding = 0;        ///< 0: no unwind information (a leaf at the top frame only)
  /// The personality's slot: the image offset of the pointer to the personality routine
  /// (personalities array entry (encoding >> 28 & 3) - 1); 0 without one.
  uint32_t personality = 0;
  uint32_t lsda = 0;  ///< image offset of the LSDA when the encoding has UNWIND_HAS_LSDA, else 0
};

/// The __unwind_info section, checked once: the header's arrays inside the section, version 1, the
/// first-level entries' function offsets ascending with a sentinel last, their LSDA offsets
/// ascending inside the LSDA array, every page inside the section and of kind 2 or 3, its entries
/// inside it, their function offsets strictly ascending within the page's range, no more entries
/// and page encodings in all than the section has words (pages do not share bytes), every compressed
/// encoding index inside common + local encodings, and every encoding's personality index within
/// the personalities array.
class CompactUnwindTable {
 public:
  static Result<CompactUnwindTable> parse(std::span<const uint8_t> section);

  const UnwindInfoHeader& header() const { return header_; }
  const std::vector<uint32_t>& common_encodings() const { return common_; }
  /// Image offsets of the personality pointers (personality index 1 is [0]).
  const std::vector<uint32_t>& personalities() const { return personalities_; }
  /// First-level entries, the sentinel included.
  const std::vector<IndexEntry>& index() const { return index_; }
  const std::vector<LsdaEntry>& lsdas() const { return lsdas_; }
  /// The second-level pages in first-level order (the sentinel has none).
  const std::vector<SecondLevelPage>& pages() const { return pages_; }

  /// The entry of the function holding image offset `function_offset` (libunwind's lookup: the
  /// last first-level entry at or before it, then the last page entry at or before it; the range
  /// ends at the next entry, the next page's start or the sentinel). Nullopt outside the table.
  std::optional<FunctionUnwind> find(uint32_t function_offset) const;

 private:
  UnwindInfoHeader header_;
  std::vector<uint32_t> common_;
  std::vector<uint32_t> personalities_;
  std::vector<IndexEntry> index_;
  std::vector<LsdaEntry> lsdas_;
  std::vector<SecondLevelPage> pages_;
};

/// A compact encoding as a plain rule. Offsets are from the CFA (the caller's stack pointer after
/// the return, as DWARF defines it); registers use DWARF numbering (x86_64: rbx 3, rbp 6, r12-r15
/// 12-15, return address 16; arm64: x19-x28 19-28, fp 29, lr 30, d8-d15 72-79).
struct CompactRule {
  enum class Kind : uint8_t {
    kNone,          ///< encoding 0: no information (x86_64: return address at [sp]; arm64: in lr), first frame only
    kFramePointer,  ///< x86_64 RBP frame: cfa = rbp + 16; arm64 frame: cfa = fp + 16; ra = *(cfa - 8), fp = *(cfa - 16)
    kFrameless,     ///< cfa = sp + stack_size; x86_64: ra = *(cfa - 8); arm64: ra = lr
    kDwarf,         ///< the FDE at fde_offset in __eh_frame says
  };
  struct Saved {
    uint8_t reg = 0;     ///< DWARF register number
    int32_t offset = 0;  ///< the value is at cfa + offset
    bool operator==(const Saved&) const = default;
  };
  static constexpr size_t kMaxSaved = 18;  ///< arm64: 5 x-pairs and 4 d-pairs

  Kind kind = Kind::kNone;
  Arch arch = Arch::kUnknown;
  uint32_t encoding = 0;
  /// kFrameless: bytes from sp to the CFA (x86_64: the return address included).
  uint32_t stack_size = 0;
  /// x86_64 frameless indirect: the size was read from the function's `sub rsp, imm32` (the
  /// immediate at function start + stack_imm_offset) plus 8 x adjust.
  bool stack_indirect = false;
  uint32_t stack_imm_offset = 0;
  uint32_t fde_offset = 0;  ///< kDwarf: offset of the FDE in __eh_frame
  bool ra_in_lr = false;    ///< arm64 frameless (and kNone)
  uint8_t nsaved = 0;
  Saved saved[kMaxSaved] = {};
};

/// Reads `len` bytes of the image's code at link-time `vaddr`; false when they are not all there.
using CodeReader = std::function<bool(uint64_t vaddr, void* buf, size_t len)>;

/// Decodes an x86_64 encoding (UNWIND_X86_64_MODE_*) of the function starting at link-time
/// `function_start`: RBP frame (up to five saved registers, 3 bits each, at rbp - 8 x offset
/// upward), frameless immediate (stack size x 8), frameless indirect (the u32 at function_start +
/// the size field, which must be the immediate of a `sub rsp, imm32` (48 81 EC), plus adjust x 8;
/// read through `code`), the register permutation of frameless frames (the Lehmer code of up to six
/// registers out of rbx, r12-r15, rbp, pushed in that order), and DWARF (the FDE offset). Checked:
/// a register number 1 to 6, a permutation inside its count's range, a register count at most 6,
/// mode 1 to 4 (0 only with a zero encoding).
Result<CompactRule> decode_x86_64(uint32_t encoding, uint64_t function_start, const CodeReader& code);

/// Decodes an arm64 encoding (UNWIND_ARM64_MODE_*): frame (fp/lr at the top, then the x19-x28 and
/// d8-d15 pairs the flags name, downward), frameless (stack size x 16, return address in lr, the
/// pairs below the CFA) and DWARF (the FDE offset). Checked: mode 2 to 4 (0 only with a zero
/// encoding), no flag bits outside the pairs'.
Result<CompactRule> decode_arm64(uint32_t encoding);

}  // namespace stackprov::macho
