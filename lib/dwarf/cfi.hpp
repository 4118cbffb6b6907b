// SPDX-License-Identifier: Apache-2.0
// DWARF call frame information: CIE/FDE decoding, the CFA program interpreter, FDE lookup indexes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stackprov::dwarf {

/// Highest DWARF register number + 1 that a CFI row tracks. Covers x86_64
/// (0..16), arm64 (0..32 incl. pc/ra columns) and mips32 (0..31, hi/lo, pc).
constexpr int kMaxCfiRegs = 40;

/// Architecture-specific DW_CFA opcodes a section may contain; each arch's
/// traits name theirs (Traits::kCfiVendorOps, arch/<isa>/registers.hpp).
enum class CfiVendorOps : uint8_t {
  kNone = 0,
  /// "DWARF for the Arm 64-bit Architecture" (aadwarf64) 4.4.3: 0x2d
  /// DW_CFA_AARCH64_negate_ra_state (elsewhere DW_CFA_GNU_window_save, SPARC) and
  /// 0x2c DW_CFA_AARCH64_negate_ra_state_with_pc (PAuth_LR). Both toggle whether
  /// the return address is PAC-signed; neither has operands. The unwinder strips
  /// the PAC bits from every arm64 return address (Traits::strip_return_address),
  /// so the state itself is not kept.
  kAarch64 = 1,
};

/// Outcome of a CFI operation. Hot-path code returns these, never allocates.
enum class CfiStatus : uint8_t {
  kOk = 0,
  kNotFound,     ///< no FDE covers the address
  kBadCfi,       ///< malformed bytes, unknown op, bounds exceeded
  kUnsupported,  ///< valid but not handled (e.g. an unknown augmentation)
};

/// A read-only view of an .eh_frame or .debug_frame section.
struct CfiSection {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t vaddr = 0;       ///< link-time address of data[0] (for DW_EH_PE_pcrel)
  uint64_t text_vaddr = 0;  ///< for DW_EH_PE_textrel
  uint64_t data_vaddr = 0;  ///< for DW_EH_PE_datarel (.eh_frame_hdr / GOT address)
  bool is_eh_frame = true;  ///< .eh_frame (CIE id 0, pc-relative pointers) vs .debug_frame
  bool big_endian = false;
  uint8_t addr_size = 8;    ///< 4 or 8
  /// The architecture's own DW_CFA opcodes (its traits' kCfiVendorOps).
  CfiVendorOps vendor_ops = CfiVendorOps::kNone;
};

/// Register rule kinds, DWARF 5 section 6.4.1.
enum class RegRuleKind : uint8_t {
  kUnspecified = 0,  ///< no rule given; treated as same-value for callee-saved registers
  kUndefined,        ///< value not recoverable (for the RA column: end of stack)
  kSameValue,        ///< unchanged from the callee
  kOffset,           ///< saved at *(CFA + offset)
  kValOffset,        ///< value is CFA + offset
  kRegister,         ///< value is in register `reg`
  kExpression,       ///< saved at *(eval(expr) with CFA pushed)
  kValExpression,    ///< value is eval(expr) with CFA pushed
};

struct RegRule {
  RegRuleKind kind = RegRuleKind::kUnspecified;
  uint16_t reg = 0;
  int64_t offset = 0;
  uint32_t expr_offset = 0;  ///< into CfiSection::data
  uint32_t expr_len = 0;
};

struct CfaRule {
  enum class Kind : uint8_t { kRegOffset = 0, kExpression = 1 };
  Kind kind = Kind::kRegOffset;
  uint16_t reg = 0;
  int64_t offset = 0;
  uint32_t expr_offset = 0;  ///< into CfiSection::data
  uint32_t expr_len = 0;
};

/// The unwind row that applies at one pc.
struct CfiRow {
  uint64_t start = 0;  ///< first link-time pc the row applies to
  uint64_t end = 0;    ///< one past the last pc it applies to
  CfaRule cfa;
  RegRule regs[kMaxCfiRegs];
  uint16_t ra_reg = 0;        ///< return-address column from the CIE
  bool signal_frame = false;  ///< CIE augmentation 'S'
};

/// A decoded FDE (and the parts of its CIE the interpreter needs).
struct FdeInfo {
  uint64_t pc_begin = 0;  ///< link-time
  uint64_t pc_end = 0;
  uint32_t fde_offset = 0;
  uint32_t cie_offset = 0;
  uint32_t cie_instr_offset = 0;  ///< CIE initial instructions, into CfiSection::data
  uint32_t cie_instr_len = 0;
  uint32_t fde_instr_offset = 0;  ///< FDE instructions
  uint32_t fde_instr_len = 0;
  uint64_t code_align = 1;
  int64_t data_align = 1;
  uint16_t ra_reg = 0;
  uint8_t fde_encoding = 0;  ///< DW_EH_PE_* from the CIE 'R' augmentation
  bool signal_frame = false;
  uint8_t cie_version = 1;
  uint8_t addr_size = 8;        ///< CIE address_size (v4 .debug_frame) or CfiSection::addr_size
};

/// Decodes the FDE that starts at `fde_offset` (the offset of its length field)
/// and its CIE ('z', 'R', 'P', 'L', 'S' augmentations; 32- and 64-bit DWARF).
/// Every length is checked against the section bounds.
CfiStatus decode_fde(const CfiSection& sec, uint64_t fde_offset, FdeInfo* out);

/// Runs the CIE initial instructions and the FDE instructions up to `pc`
/// (link-time, pc_begin <= pc < pc_end) and writes the row in force at `pc`.
/// Supports every DW_CFA_* op of DWARF 5 plus DW_CFA_GNU_args_size and
/// DW_CFA_GNU_negative_offset_extended; remember/restore state uses a fixed
/// stack (depth 16). Bounded: at most `kMaxCfaOps` ops. No allocation.
CfiStatus find_row(const CfiSection& sec, const FdeInfo& fde, uint64_t pc, CfiRow* out);
constexpr uint32_t kMaxCfaOps = 100000;

/// Reads a DW_EH_PE-encoded pointer at data[*pos], advancing *pos. `field_vaddr`
/// is the link-time address of data[0] of the buffer (for pcrel). Returns false
/// on bounds errors or unsupported encodings (DW_EH_PE_indirect is rejected).
bool read_encoded_pointer(const uint8_t* data, size_t size, size_t* pos, uint8_t encoding,
                          uint64_t field_vaddr, const CfiSection& sec, uint64_t* out);

/// Sorted (pc_begin -> fde_offset) lookup for one CFI section.
///
/// Either views the binary search table of a .eh_frame_hdr in place (no
/// copy), or owns a table built by scanning every FDE of the section (used
/// for .debug_frame and when .eh_frame_hdr is missing, e.g. static binaries
/// linked without --eh-frame-hdr). Immutable after construction; lookups are
/// thread-safe and allocation-free.
class FdeIndex {
 public:
  FdeIndex() = default;

  /// Uses the search table of `.eh_frame_hdr` (bytes `hdr`, `hdr_size` at
  /// link-time address `hdr_vaddr`). Fails with kUnsupported when the table is
  /// absent or not in a binary-searchable encoding; callers then use build().
  static CfiStatus from_eh_frame_hdr(const uint8_t* hdr, size_t hdr_size, uint64_t hdr_vaddr,
                                     const CfiSection& eh_frame, FdeIndex* out);

  /// Scans every FDE of `sec` (CIEs skipped, zero terminators honoured) and
  /// builds a sorted table. Bounded by the section size.
  static CfiStatus build(const CfiSection& sec, FdeIndex* out);

  /// Finds the FDE covering `pc` (link-time) and decodes it into *fde.
  /// kNotFound when no FDE covers pc (including gaps between FDEs).
  CfiStatus lookup(const CfiSection& sec, uint64_t pc, FdeInfo* fde) const;

  /// Position (0 .. size() - 1) of the last entry whose pc_begin <= pc, or -1
  /// when pc is below every entry. The FDE there may still end before pc.
  /// No decoding: a binary search of the table only.
  ptrdiff_t find(const CfiSection& sec, uint64_t pc) const;
  /// pc_begin of entry `i` (link-time), as the table records it.
  uint64_t entry_pc(const CfiSection& sec, size_t i) const;
  /// Decodes the FDE of entry `i` (a position from find()).
  CfiStatus decode_entry(const CfiSection& sec, size_t i, FdeInfo* fde) const;

  size_t size() const { return hdr_table_ ? hdr_count_ : entries_.size(); }
  bool empty() const { return size() == 0; }

 private:
  struct Entry {
    uint64_t pc_begin;
    uint64_t fde_offset;
  };
  std::vector<Entry> entries_;           // built table, sorted by pc_begin
  const uint8_t* hdr_table_ = nullptr;   // in-place .eh_frame_hdr table (datarel|sdata4 pairs)
  size_t hdr_count_ = 0;
  uint64_t hdr_vaddr_ = 0;
};

}  // namespace stackprov::dwarf
