// SPDX-License-Identifier: Apache-2.0
// On-disk layout of the bundle file, formats 2 to 7 (doc/bundles.md "Layout"): offsets, sizes,
// little-endian and varint codecs, the entropy coder's contexts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/leb128.hpp"

namespace stackprov::bundle::layout {

inline constexpr uint8_t kMagic[8] = {'S', 'P', 'R', 'V', 'B', 'N', 'D', 'L'};

// Header: magic[8] u32 version, u32 section_count, u64 file_size, u32 flags, u32 reserved.
inline constexpr size_t kHeaderSize = 32;
// Section table entry: u32 type, u32 flags, u64 offset, u64 length.
inline constexpr size_t kSectionEntrySize = 24;
inline constexpr size_t kSectionAlign = 8;
/// Section types with this bit set are optional: readers skip the ones they do not know.
inline constexpr uint32_t kSectionOptionalBit = 0x80000000u;

enum SectionType : uint32_t {
  kSecModules = 1,    ///< fixed module records
  kSecStrings = 2,    ///< per module: NUL-terminated strings
  kSecStrOffs = 3,    ///< per module: u32 byte offset of string i in its string bytes
  kSecFuncIndex = 4,  ///< per module: 8-byte group entries {u32 start - base, u32 data offset}
  kSecFuncData = 5,   ///< per module: varint group blobs (ranges by depth)
  kSecPadIndex = 6,   ///< per module: 8-byte pad-block entries {u32 addr - base, u32 data offset}
  kSecPadData = 7,    ///< per module: varint pad blocks
  kSecRowIndex = 8,   ///< per module: 8-byte row-block entries {u32 pc - base, u32 data offset}
  kSecRowData = 9,    ///< per module: varint row blocks
  kSecBlobs = 10,     ///< per module: embedded debug files (only present when one is non-empty)
};
inline constexpr uint32_t kSectionTypeCount = 10;
/// Optional: 8-byte entries; per module with symbol-table ranges, in module order, a head
/// {u32 module index, u32 n} then n intervals {u32 start - base, u32 length}, sorted, not
/// touching (adjacent ranges merged). Present only when some module has such a range.
inline constexpr uint32_t kSecSymtabRanges = kSectionOptionalBit | 1u;
/// Optional (written from format 5; doc/bundles.md "Symbol names"): per module with symbol-name
/// records, in module order, a 16-byte head {u32 module index, u32 n, u64 nbytes} then nbytes of n
/// records, each uleb (addr - the previous record's end; the first: addr), uleb length (> 0),
/// uleb (name string index << 1 | back), [uleb (addr - sym_start), when back]; names are indexes
/// into the module's string table. Present only when some module has such a record.
inline constexpr uint32_t kSecSymbols = kSectionOptionalBit | 2u;
inline constexpr size_t kSymbolsHeadSize = 16;
/// Optional (written from format 5; doc/bundles.md "Call sites"): per module with call-site facts,
/// in module order, a 24-byte head {u32 module index, u32 sites, u32 functions, u32 names, u64
/// nbytes}, then nbytes: the sites, each uleb (return pc - the previous one's; the first: return
/// pc), u8 flags (kCallSiteTail, kCallSiteTarget, kCallSiteName), [sleb (target - return pc)] or
/// [uleb name string index]; the functions, each uleb (entry - the previous entry; the first:
/// entry), uleb ranges (>= 1), sleb (first low - entry), uleb length (> 0), per further range uleb
/// (low - the previous high), uleb length; uleb tails, per tail uleb site index; the names, sorted
/// by bytes, each uleb string index, u8 global (0, 1), uleb address. Strings are the module's
/// table's. Present only when some module has a site, a function or a name.
inline constexpr uint32_t kSecCallSites = kSectionOptionalBit | 3u;
inline constexpr size_t kCallSitesHeadSize = 24;
inline constexpr uint8_t kCallSiteTail = 1;    ///< DW_AT_call_tail_call
inline constexpr uint8_t kCallSiteTarget = 2;  ///< the target's entry follows
inline constexpr uint8_t kCallSiteName = 4;    ///< the target's name follows (not with kCallSiteTarget)
/// A site takes 2 bytes at least, a function 5, a name 3: 2 sites + 5 functions + 3 names <= nbytes.
inline constexpr size_t kMinCallSiteBytes = 2;
inline constexpr size_t kMinCallFunctionBytes = 5;
inline constexpr size_t kMinCallSymbolBytes = 3;
/// Ranges of one function (a subprogram split by many nested ones stays far below).
inline constexpr uint64_t kMaxCallFunctionRanges = 1u << 16;
/// A record takes 3 bytes at least: n <= nbytes / 3.
inline constexpr size_t kMinSymbolRecordBytes = 3;

// ---- format 6 (doc/bundles.md "Format 6"): the two sections above entropy-coded (bundle/entropy.hpp).
// A module's block (after the same head) is one bit stream: its codes in context order, the records
// with the fields above each in its context, then zero bits to a byte boundary.
/// Format 6's symbol-name record head (coded given the previous record's kind, kSymKinds for the
/// first): kind | back << 2 | run << 3. Kinds: the name is the depth-0 range function at the record's
/// address; that function with `cut` trailing bytes cut and a suffix string appended; a string index;
/// a string (the prefix) followed by another (the suffix). `run` (kSymRun): the record ends where the
/// run of contiguous depth-0 ranges of one function at its address ends (no length field).
inline constexpr unsigned kSymSame = 0;
inline constexpr unsigned kSymEdited = 1;
inline constexpr unsigned kSymString = 2;
inline constexpr unsigned kSymJoined = 3;
inline constexpr unsigned kSymKinds = 4;
inline constexpr uint8_t kSymBack = 4;
inline constexpr uint8_t kSymRun = 8;
enum SymCtx : unsigned {
  kCtxSymHead,                           // + the previous record's kind (kSymKinds: none)
  kCtxSymGap = kCtxSymHead + kSymKinds + 1,
  kCtxSymLen,                            // + this record's kind
  kCtxSymBackOff = kCtxSymLen + kSymKinds,  // addr - sym_start
  kCtxSymName,                           // kSymString: string index
  kCtxSymCut,                            // kSymEdited: bytes cut from the function's name
  kCtxSymSuffix,                         // kSymEdited, kSymJoined: string index of what is appended
  kCtxSymPrefix,                         // kSymJoined: string index of the prefix
  kSymCtxCount,
};
/// Format 6: a record takes 2 bits at least (head, gap): n <= nbytes * 8 / 2.
inline constexpr uint64_t kMinSymbolRecordBits = 2;
/// Format 6 call-site flag: the target is the entry of call-site function `index` (uint follows);
/// never with kCallSiteTarget or kCallSiteName. A name's head: global | kCallNameFunction (its
/// address is a function's entry: the index follows instead of the address).
inline constexpr uint8_t kCallSiteFunction = 8;
inline constexpr uint8_t kCallNameFunction = 2;
enum CallCtx : unsigned {
  kCtxCsDelta,   // return pc delta
  kCtxCsFlags,
  kCtxCsTarget,  // sleb target - return pc
  kCtxCsFunc,    // kCallSiteFunction: function index
  kCtxCsName,    // kCallSiteName: string index
  kCtxCfDelta,   // function entry delta
  kCtxCfRanges,
  kCtxCfLow,     // first low - entry
  kCtxCfGap,     // low - the previous high
  kCtxCfLen,
  kCtxCfTails,
  kCtxCfTail,    // format 6: site index - the previous one's (the first: - the first site after the lowest low)
  kCtxCnName,    // name string index
  kCtxCnHead,    // global (format 6: | kCallNameFunction)
  kCtxCnAddr,
  kCtxCnFunc,    // format 6: function index
  kCallCtxCount,
};

// Module record (320 bytes), offsets. A "slice" is u64 first, u64 count, in units of the
// section's records (bytes for STRINGS, *_DATA and BLOBS; 4 bytes for STROFFS; 8 bytes for
// the *_INDEX sections); modules' slices follow each other in module order.
inline constexpr size_t kModuleSize = 320;
inline constexpr size_t kModIdKind = 0;      // u8
inline constexpr size_t kModIdLen = 1;       // u8
inline constexpr size_t kModFlags = 2;       // u16: kModFlagPdbLines, else 0
/// Module flag (format 4): the ranges are a PDB's (ModuleContents::pdb_lines). Readers before it
/// refuse a module with flags ("module N has flags 0x1").
inline constexpr uint16_t kModFlagPdbLines = 1;
inline constexpr size_t kModName = 4;        // u32 name length: STRINGS slice = name, NUL, LZ stream
inline constexpr size_t kModId = 8;          // u8[64], zero past id_len
inline constexpr size_t kModShaFile = 72;    // u8[32]
inline constexpr size_t kModShaDebug = 104;  // u8[32]
inline constexpr size_t kModBase = 136;      // u64: index entries hold addresses - base
inline constexpr size_t kModStrings = 144;   // slice of STRINGS
inline constexpr size_t kModStrOffs = 160;   // slice of STROFFS
inline constexpr size_t kModFuncIndex = 176; // slice of FUNC_INDEX
inline constexpr size_t kModFuncData = 192;  // slice of FUNC_DATA
inline constexpr size_t kModPadIndex = 208;  // slice of PAD_INDEX
inline constexpr size_t kModPadData = 224;   // slice of PAD_DATA
inline constexpr size_t kModRowIndex = 240;  // slice of ROW_INDEX
inline constexpr size_t kModRowData = 256;   // slice of ROW_DATA
inline constexpr size_t kModBlob = 272;      // slice of BLOBS
inline constexpr size_t kModRangeCount = 288;  // u64
inline constexpr size_t kModPadCount = 296;    // u64
inline constexpr size_t kModRowCount = 304;    // u64
inline constexpr size_t kModStrBytes = 312;    // u64 decompressed string bytes (lz.hpp)
inline constexpr uint64_t kMaxStrBytes = uint64_t{1} << 30;
/// Decompressed string bytes <= kMaxStrRatio x compressed bytes + kMaxStrRatio: a reader
/// never allocates more than that for a small hostile file. The writer stores the table
/// uncompressed (one literal run) when compression would exceed the ratio.
inline constexpr uint64_t kMaxStrRatio = 64;

inline constexpr size_t kIndexEntrySize = 8;
inline constexpr size_t kStrOffSize = 4;

// Group (function) blob: uleb ndepth, then per depth: uleb count, uleb nbytes, records.
// Record: u8 head, uleb length (depth > 0: length << 1 | has_gap), [uleb gap from the previous
// record's end, when has_gap],
// [uleb fn], [uleb file], [sleb line delta], [uleb column], [call: see kCallFile]; strings are indexes into the module's table. Fields not present keep
// the previous record's value of the same depth list ("" / 0 before the first record).
inline constexpr uint8_t kRecFn = 1;        // function index follows
inline constexpr uint8_t kRecFile = 2;      // file index follows
inline constexpr uint8_t kRecColumn = 4;    // column follows
inline constexpr uint8_t kRecCall = 8;      // call file, line, column follow
inline constexpr uint8_t kRecInherit = 16;  // file:line:column = the call site of the deeper record at start
// kRecCall: u8 ext, [uleb call_file], [sleb call-line delta], [uleb call_column].
inline constexpr uint8_t kCallFile = 1;    // call file index follows
inline constexpr uint8_t kCallColumn = 2;  // call column follows
inline constexpr unsigned kCallLineShift = 2;  // ext >> 2: call-line delta + 31 (0..62); 63: sleb follows
inline constexpr int kCallLineBias = 31;
inline constexpr unsigned kCallLineEscape = 63;
inline constexpr unsigned kRecLineShift = 5;  // head >> 5: line delta + 3 (0..6); 7: sleb follows
inline constexpr int kRecLineBias = 3;
inline constexpr unsigned kRecLineEscape = 7;
/// Writer: a group closes after this many depth-0 records (bounds the records a lookup
/// decodes; deeper ranges crossing the boundary are split, see doc/bundles.md) ...
inline constexpr size_t kGroupTarget = 16;
/// ... or once this many records of all depths start in it.
inline constexpr size_t kGroupRecords = 48;
/// Format 3: the same two limits (no cut where the function changes).
inline constexpr size_t kGroupTarget3 = 64;
inline constexpr size_t kGroupRecords3 = 192;

// ---- format 3 (doc/bundles.md "Format 3"): the same records, entropy-coded (bundle/entropy.hpp).
// A module's group data starts with its range tables (one canonical code per context, in
// context order, then zero bits to a byte boundary); the first group index entry's data offset
// is their byte length. A group is a bit stream (zero-padded to a byte): the code kCtxNdepth's
// depth count, then per depth: (count << 1 | continues) in kCtxListHead, the records (no byte
// count: a lookup decodes the lists before the one it needs). A record has format 2's fields in
// format 2's order, each coded in its context (two contexts where depth 0 and deeper differ).
// Row data likewise starts with the row tables; a block holds kRowBlock3 rows (the last one the
// rest), with format 2's fields and the cfa offset as a delta from the previous row's.
// Format 3 stores no string offsets: the table's strings follow each other, NUL-terminated.
enum RangeCtx : unsigned {
  kCtxNdepth,
  kCtxListHead,
  kCtxHead,      // + 1 for depth > 0
  kCtxLen = kCtxHead + 2,
  kCtxGap = kCtxLen + 2,
  kCtxFn,
  kCtxFile = kCtxFn + 2,
  kCtxLine = kCtxFile + 2,
  kCtxCol = kCtxLine + 2,
  kCtxCallExt = kCtxCol + 2,
  kCtxCallFile,
  kCtxCallLine,
  kCtxCallCol,
  kRangeCtxCount,  ///< format 3's contexts
  // Format 4 (doc/bundles.md "Format 4"): format 3's contexts, whose head and length contexts stay
  // unused (empty codes), then a record's head in the context of the previous record's class in the
  // list, and its length in the context of its own class (kRecClass); each for depth 0 and deeper.
  kCtxHead4 = kRangeCtxCount,                     // + deep * kHeadClasses + previous class
  kCtxLen4 = kCtxHead4 + 2 * 18,                  // + deep * kLenClasses + own class
  kCtxListBits = kCtxLen4 + 2 * 17,  // the depth-0 list's bits (groups with deeper lists)
  // The first record of a list codes its function, file, line and column from nothing (the line
  // "delta" is the line itself): each in a context of its own, + deep.
  kCtxFirstFn,
  kCtxFirstFile = kCtxFirstFn + 2,
  kCtxFirstLine = kCtxFirstFile + 2,
  kCtxFirstCol = kCtxFirstLine + 2,
  kRangeCtxCount4 = kCtxFirstCol + 2,
};
/// Format 4: a record's class, from its head: (line nibble << 1 | column follows) (0..15), or
/// kClassInherit for an inherited position; kClassFirst stands for "no previous record" (the
/// first record of a list). Heads are coded given the previous class (18 contexts a depth class),
/// lengths given their own record's class (17).
inline constexpr unsigned kClassInherit = 16;
inline constexpr unsigned kClassFirst = 17;
inline constexpr unsigned kHeadClasses = 18;
inline constexpr unsigned kLenClasses = 17;
inline constexpr unsigned rec_class(uint8_t head) {
  if ((head & kRecInherit) != 0) return kClassInherit;
  return ((head >> kRecLineShift) << 1) | ((head & kRecColumn) != 0 ? 1u : 0u);
}
static_assert(kCtxLen4 == kCtxHead4 + 2 * kHeadClasses && kCtxListBits == kCtxLen4 + 2 * kLenClasses);
static_assert(kCtxFirstFile - kCtxFile == kCtxFirstFn - kCtxFn && kCtxFirstLine - kCtxLine == kCtxFirstFn - kCtxFn &&
              kCtxFirstCol - kCtxCol == kCtxFirstFn - kCtxFn);
/// Format 4: an index entry per kGroupsPerEntry groups (the last one the rest). The entry's data
/// starts with a byte header: uleb (groups − 1), then per group after the first uleb (its start −
/// the previous group's start, > 0) and uleb (the previous group's bytes, > 0); the groups' bit
/// streams follow one another (the last one runs to the entry's end).
inline constexpr size_t kGroupsPerEntry = 16;
/// Format 4 groups: up to this many depth-0 records, or this many records of all depths.
inline constexpr size_t kGroupTarget4 = 64;
inline constexpr size_t kGroupRecords4 = 192;
enum RowCtx : unsigned {
  kCtxRowDelta,
  kCtxRowMask,
  kCtxRowHead,
  kCtxRowCfaReg,
  kCtxRowCfaOff,
  kCtxRowRaReg,
  kCtxRowRaOff,
  kCtxRowKeepAdd,
  kCtxRowPacked,
  kCtxRowSavedReg,
  kCtxRowSavedOff,
  kRowCtxCount,  ///< format 3's contexts
  // Format 4: format 3's pc delta, mask, cfa offset and packed-pair contexts stay unused (empty
  // codes); the first three are coded given the previous row's class (kRowClasses: the block's
  // first row, else 1 + (cfa offset changed) + 2 × (saved registers changed)), a packed pair given
  // its place among the row's saved registers (0..kMaxSavedRegs − 1).
  kCtxRowDelta4 = kRowCtxCount,
  kCtxRowMask4 = kCtxRowDelta4 + 5,
  kCtxRowCfaOff4 = kCtxRowMask4 + 5,
  kCtxRowPacked4 = kCtxRowCfaOff4 + 5,
  kRowCtxCount4 = kCtxRowPacked4 + 12,
};
inline constexpr unsigned kRowClasses = 5;
/// Format 4: a row's class from its field mask (the next row's context).
inline constexpr unsigned row_class(uint8_t mask) {
  return 1u + ((mask & 2) != 0 ? 1u : 0u) + ((mask & 16) != 0 ? 2u : 0u);  // kRowCfaOff, kRowSaved
}

// ---- format 7 (doc/bundles.md "Format 7"): unwind rows as indexes into a per-module row table.
// A module's row data starts with its row table: the table codes (RowTabCtx7, in order), uint N (the
// distinct rows), the N rows sorted by row_key7, each coded as a format-4 row against the table row
// before it (format 4's row contexts; its pc the row's table index), then per table row uint (its
// successor count) and per successor sint (successor - row) and a symbol 0/1 (the pair has a pc-delta
// context of its own); then the block codes (RowBlkCtx7 in order, then one code per flagged pair, in
// table order), zero bits to a byte. A block holds kRowBlock3 rows: the first as uint (its table
// index), each next one as its rank in the previous row's successor list (not coded when the list
// has one entry) and its pc delta (> 0) in its pair's context, else in its class's (row_delta_class7).
enum RowTabCtx7 : unsigned {
  // 0 .. kRowCtxCount4 - 1: format 4's row contexts, for the table rows (format 3's stay empty).
  kCtx7Count = kRowCtxCount4,  // N
  kCtx7SuccCount,              // a table row's successor count
  kCtx7Succ,                   // successor - row (signed)
  kCtx7PairFlag,               // 1: the pair has its own pc-delta context
  kRowTabCtxCount7,
};
inline constexpr unsigned kRankBuckets7 = 5;   // successor-list lengths 2, 3-4, 5-8, 9-16, more
inline constexpr unsigned kDeltaClasses7 = 7;  // row_delta_class7
enum RowBlkCtx7 : unsigned {
  kCtx7First,                                 // a block's first row: its table index
  kCtx7Rank,                                  // + rank_bucket7(successor-list length)
  kCtx7Delta = kCtx7Rank + kRankBuckets7,     // + row_delta_class7(previous, this)
  kRowBlkCtxCount7 = kCtx7Delta + kDeltaClasses7,  // then the pair contexts
};
/// At most this many pairs get a pc-delta context of their own (a reader refuses more).
inline constexpr unsigned kMaxPairCtx7 = 256;
/// The writer gives a pair its own pc-delta context when it occurs at least this often in blocks.
inline constexpr uint64_t kPairCtxMin7 = 24;
inline constexpr unsigned rank_bucket7(uint64_t n) {  // n >= 2
  return n <= 2 ? 0u : n <= 4 ? 1u : n <= 8 ? 2u : n <= 16 ? 3u : 4u;
}
/// The pc-delta class of a row given the previous one: 0 not kind 1 (cfa_reg), else 1 + (its cfa
/// offset grew 0, shrank 1, stayed 2) + 3 when it saves registers.
inline constexpr unsigned row_delta_class7(uint8_t kind, int32_t prev_cfa_off, int32_t cfa_off, uint8_t nsaved) {
  if (kind != 1) return 0;
  const unsigned dir = cfa_off > prev_cfa_off ? 0u : cfa_off < prev_cfa_off ? 1u : 2u;
  return 1 + dir + (nsaved > 0 ? 3u : 0u);
}
/// The row table's order (every field but the pc; saved pairs beyond nsaved are not compared):
/// kind, signal frame, debug frame, ra kind, cfa register, ra register, ra offset, the saved pairs
/// (register, offset) as a sequence compared pair by pair (a prefix first), then the cfa offset.
template <class Row>
int row_compare7(const Row& a, const Row& b) {
  auto cmp = [](auto x, auto y) { return x < y ? -1 : y < x ? 1 : 0; };
  int c = 0;
  if ((c = cmp(a.kind, b.kind)) != 0 || (c = cmp(a.signal_frame, b.signal_frame)) != 0 ||
      (c = cmp(a.from_debug_frame, b.from_debug_frame)) != 0 || (c = cmp(a.ra_kind, b.ra_kind)) != 0 ||
      (c = cmp(a.cfa_reg, b.cfa_reg)) != 0 || (c = cmp(a.ra_reg, b.ra_reg)) != 0 || (c = cmp(a.ra_off, b.ra_off)) != 0)
    return c;
  for (size_t i = 0; i < a.nsaved && i < b.nsaved; i++)
    if ((c = cmp(a.saved_reg[i], b.saved_reg[i])) != 0 || (c = cmp(a.saved_off[i], b.saved_off[i])) != 0) return c;
  if ((c = cmp(a.nsaved, b.nsaved)) != 0) return c;
  return cmp(a.cfa_off, b.cfa_off);
}

// Pad block: per pad uleb (delta << 1 | explicit); explicit: uleb nframes, frames of
// uleb fn, uleb file, uleb line, uleb column. Implicit: the chain of lookup(addr - 1).
inline constexpr size_t kPadBlock = 32;
// Format 4: pad data starts with the pad codes (as the row data with the row codes); a block is a
// bit stream of kPadBlock pads (the last one the rest), the same fields each in its context, then
// zero bits to a byte boundary.
enum PadCtx : unsigned {
  kCtxPadHead,    // delta << 1 | explicit
  kCtxPadFrames,  // frame count
  kCtxPadFn,
  kCtxPadFile,
  kCtxPadLine,
  kCtxPadCol,
  kPadCtxCount,
};
// Row block: per row uleb pc delta (0 for the block's first row), u8 mask, [u8 head: mask
// kRowHead; head = kind | signal << 3 | debug_frame << 4 | ra_kind << 5, else the previous
// row's], then the fields the mask names, changed from the previous row of the block (all
// zero before the first row).
inline constexpr size_t kRowBlock = 16;
inline constexpr size_t kRowBlock3 = 64;  ///< format 3: an index entry per 64 rows (a lookup decodes ~1 us)
inline constexpr uint8_t kRowCfaReg = 1;   // u8
inline constexpr uint8_t kRowCfaOff = 2;   // sleb
inline constexpr uint8_t kRowRaReg = 4;    // u8
inline constexpr uint8_t kRowRaOff = 8;    // u8 (i8)
inline constexpr uint8_t kRowSaved = 16;   // u8 keep << 4 | add: keep the previous row's first `keep`
                                           // pairs, then add x (u8 reg, u8 (i8) off)
inline constexpr uint8_t kRowHead = 32;    // head byte follows
inline constexpr uint8_t kRowPacked = 64;  // added pairs are one byte each: reg << 4 | (-off - 1)
inline constexpr uint8_t kRowHeadSignal = 8;
inline constexpr uint8_t kRowHeadDebugFrame = 16;

inline uint16_t ld16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t ld32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t ld64(const uint8_t* p) {
  return static_cast<uint64_t>(ld32(p)) | (static_cast<uint64_t>(ld32(p + 4)) << 32);
}
inline void st16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void st32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void st64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

inline void put_uleb(std::vector<uint8_t>& out, uint64_t v) { append_uleb128(out, v); }
inline void put_sleb(std::vector<uint8_t>& out, int64_t v) { append_sleb128(out, v); }

/// Bounds-checked varint cursor over [p, end). Any read past the end or an over-long
/// varint sets `bad` and returns 0; callers check `bad` (or ok()) before using values.
struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
  bool bad = false;

  bool ok() const { return !bad; }
  size_t left() const { return static_cast<size_t>(end - p); }
  uint8_t u8() {
    if (p >= end) {
      bad = true;
      return 0;
    }
    return *p++;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    const uint8_t* q = read_uleb128(p, end, &v);
    if (q == nullptr) {
      bad = true;
      return 0;
    }
    p = q;
    return v;
  }
  int64_t sleb() {
    int64_t v = 0;
    const uint8_t* q = read_sleb128(p, end, &v);
    if (q == nullptr) {
      bad = true;
      return 0;
    }
    p = q;
    return v;
  }
};

}  // namespace stackprov::bundle::layout
