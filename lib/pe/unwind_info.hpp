// SPDX-License-Identifier: Apache-2.0
// The x64 .pdata table (RUNTIME_FUNCTION) and its .xdata UNWIND_INFO records, decoded and checked.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/error.hpp"

// Format: Microsoft, "x64 exception handling" (learn.microsoft.com/cpp/build/exception-handling-x64):
// struct RUNTIME_FUNCTION, struct UNWIND_INFO, struct UNWIND_CODE. Version 2's UWOP_EPILOG codes are
// not in that page; their layout is the one wine (dlls/ntdll/unwind.c, dump_unwind_info) and LLVM's
// unwind-v2 writer use, see decode_unwind_info.
//
// Error convention (every function here): SPROV_ERR_TRUNCATED when a record reaches outside the
// bytes it was given (the .pdata span, the image reader's spans), SPROV_ERR_CFI when the bytes are
// there but malformed, SPROV_ERR_LIMIT when a chain is longer than kMaxChainDepth. Messages name the
// offending entry or RVA and value. Nothing throws but std::bad_alloc.
// Thread-safety: the functions are pure; they may run concurrently if the ImageReader may.

namespace stackprov::pe {

/// Reads `len` bytes of the loaded image at relative virtual address `rva`. Returns the bytes, or an
/// empty (or shorter) span when they are not all inside the image. The decoders read nothing else,
/// and use a span only until their next call of the reader (one reused buffer is enough).
using ImageReader = std::function<std::span<const uint8_t>(uint32_t rva, uint32_t len)>;

/// An ImageReader over bytes laid out as the loaded image from `base_rva` on (a section's bytes at
/// its VirtualAddress - base_rva). Does not own `image`: keep it alive while the reader is used.
ImageReader flat_image_reader(std::span<const uint8_t> image, uint32_t base_rva = 0);

/// One .pdata entry: the function's code [begin, end) and the RVA of its UNWIND_INFO.
struct RuntimeFunction {
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t unwind_rva = 0;
  bool operator==(const RuntimeFunction&) const = default;
};
inline constexpr uint32_t kRuntimeFunctionSize = 12;

/// The .pdata table (the exception directory, data directory 3), checked: a whole number of
/// 12-byte entries, each begin < end, sorted and disjoint (entry i ends at or before entry i+1
/// begins). Errors name the entry's index and values. The unwind RVAs are not followed here.
Result<std::vector<RuntimeFunction>> read_pdata(std::span<const uint8_t> pdata);

/// Binary search of a table read_pdata accepted: the entry whose [begin, end) holds `rva`, or
/// nullptr (no entry: a leaf function, whose return address is at [rsp]).
const RuntimeFunction* find_function(std::span<const RuntimeFunction> table, uint32_t rva);

/// UNWIND_CODE operations (UnwindOp, the low nibble of an unwind code's second byte).
enum class UnwindOp : uint8_t {
  kPushNonvol = 0,      ///< push reg (info = register); 1 slot
  kAllocLarge = 1,      ///< sub rsp, n: info 0: n = next u16 * 8 (2 slots); info 1: n = next u32 (3 slots)
  kAllocSmall = 2,      ///< sub rsp, info * 8 + 8; 1 slot
  kSetFpreg = 3,        ///< lea frame_register, [rsp + frame_offset]; 1 slot
  kSaveNonvol = 4,      ///< mov [rsp + next u16 * 8], reg; 2 slots
  kSaveNonvolFar = 5,   ///< mov [rsp + next u32], reg; 3 slots
  kEpilog = 6,          ///< version 2 only: an epilog descriptor (UnwindInfo::epilogs); 1 slot
  kSpareCode = 7,       ///< never valid
  kSaveXmm128 = 8,      ///< movaps [rsp + next u16 * 16], xmm(info); 2 slots
  kSaveXmm128Far = 9,   ///< movaps [rsp + next u32], xmm(info); 3 slots
  kPushMachframe = 10,  ///< the CPU pushed a machine frame; info 1: with an error code; 1 slot
};

/// One prolog operation in file order, its operand slots consumed.
struct UnwindCode {
  uint8_t prolog_offset = 0;  ///< CodeOffset: offset of the end of the instruction from the function start
  UnwindOp op = UnwindOp::kPushNonvol;
  /// OpInfo: the register (PUSH_NONVOL, SAVE_*), the ALLOC_LARGE form, PUSH_MACHFRAME's error-code flag.
  uint8_t info = 0;
  uint8_t slots = 1;  ///< 16-bit slots this operation takes in the code array (1 to 3)
  /// The decoded operand in bytes: ALLOC_* the allocation size, SAVE_* the offset from the frame
  /// base (scaled: x8 or x16 for the short forms, as is for _FAR), SET_FPREG the frame offset
  /// (x16); 0 for PUSH_NONVOL and PUSH_MACHFRAME.
  uint32_t value = 0;
};

/// A version-2 epilog: it starts `offset_from_end` bytes before the function's end and is `size`
/// bytes long (every epilog of one info has the same size).
struct Epilog {
  uint16_t offset_from_end = 0;
  uint8_t size = 0;
  bool operator==(const Epilog&) const = default;
};

inline constexpr uint8_t kFlagEHandler = 1;   ///< UNW_FLAG_EHANDLER
inline constexpr uint8_t kFlagUHandler = 2;   ///< UNW_FLAG_UHANDLER
inline constexpr uint8_t kFlagChainInfo = 4;  ///< UNW_FLAG_CHAININFO
inline constexpr uint32_t kMaxChainDepth = 32;

/// One UNWIND_INFO, decoded.
struct UnwindInfo {
  uint32_t rva = 0;  ///< where it was read
  uint8_t version = 0;
  uint8_t flags = 0;  ///< kFlag* bits
  uint8_t prolog_size = 0;
  uint8_t code_count = 0;      ///< CountOfCodes: slots in the code array, epilog slots and operands included
  uint8_t frame_register = 0;  ///< 0: none; else the register SET_FPREG sets (x64 numbering: 5 = rbp)
  uint8_t frame_offset = 0;    ///< the frame register's offset from rsp, already x16 (0 to 240)
  std::vector<UnwindCode> codes;  ///< prolog codes in file order (epilog slots excluded)
  uint8_t epilog_size = 0;        ///< version 2 with EPILOG codes: the first descriptor's size
  std::vector<Epilog> epilogs;    ///< version 2: in file order; padding descriptors (offset 0) dropped
  uint32_t handler_rva = 0;       ///< UNW_FLAG_EHANDLER/UHANDLER: the language handler
  uint32_t handler_data_rva = 0;  ///< and where its language-specific data starts
  std::optional<RuntimeFunction> chained;  ///< UNW_FLAG_CHAININFO: the primary entry this one continues
};

/// Decodes the UNWIND_INFO at `rva`: versions 1 and 2, every UWOP_* operation. Checked: the RVA is
/// 4-byte aligned; version 1 or 2; only the three defined flags, and never CHAININFO with a
/// handler; every operation's operand slots within CountOfCodes (an ALLOC_LARGE whose extra slot
/// is missing is an error, not a read of the padding); ALLOC_LARGE info 0 or 1; PUSH_MACHFRAME info
/// 0 or 1; SET_FPREG only with a frame register; op 6 only in version 2 and only before the prolog
/// codes (UWOP_EPILOG: the first gives the epilogs' size and, with OpInfo bit 0, an epilog at the
/// function's end; each further one an epilog start counted back from the end, CodeOffset |
/// OpInfo << 8, 0 being padding); ops 7 and 11 to 15 rejected. Reads the header, the code array
/// (rounded up to an even count), then the handler RVA or the chained RUNTIME_FUNCTION — at most
/// 4 + 512 + 12 bytes, each through one call of `img`.
Result<UnwindInfo> decode_unwind_info(const ImageReader& img, uint32_t rva);

/// The infos that describe function `f`: its own, then each UNW_FLAG_CHAININFO link's, in order.
/// At most kMaxChainDepth infos (SPROV_ERR_LIMIT); an info reached twice is a cycle
/// (SPROV_ERR_CFI naming the RVA); a chained entry must have begin < end. Version-2 epilogs of
/// the first info must lie inside f.
Result<std::vector<UnwindInfo>> decode_chain(const ImageReader& img, const RuntimeFunction& f);

}  // namespace stackprov::pe
