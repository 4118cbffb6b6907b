// SPDX-License-Identifier: Apache-2.0
// Bundle reader (formats 2 to 8): validates header, section and module tables at open; each module's string table and indexes once on first use; every record as it is decoded.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cinttypes>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "core/mapped_file.hpp"
#include "core/once.hpp"
#include "bundle/entropy.hpp"
#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"
#include "bundle/lz.hpp"
#include "bundle/rangecoder.hpp"

namespace stackprov::bundle {

using namespace layout;

namespace {

struct Slice {
  uint64_t first = 0;
  uint64_t count = 0;
};

struct ModuleMeta {
  uint32_t version = 0;  // the file's format (2 or 3)
  Slice strings, stroffs, findex, fdata, pindex, pdata, rindex, rdata, blob;
  uint64_t base = 0, nranges = 0, npads = 0, nrows = 0, str_bytes = 0;
  uint32_t name_len = 0;
};

/// Per-module state, built and validated once (call_once, core/once.hpp) on first use: the
/// decompressed string table and the checked indexes.
struct ModuleIndex {
  stackprov::OnceFlag once;
  bool ok = false;
  Error err;
  std::string strings;
  std::vector<uint32_t> offs;
  std::vector<uint32_t> lens;  // of string i, without its NUL
  // Format 3: the module's codes (read from the front of its group and row data).
  std::vector<entropy::Code> range_codes, row_codes;
  std::vector<entropy::Code> pad_codes;  // format 4
  /// Format 7: the module's row table (decoded and checked with the string table), each table
  /// row's successors (succ[succ_off[t] .. succ_off[t + 1]), by rank) and the pc-delta context of
  /// each pair, and the block codes (RowBlkCtx7, then the pair contexts).
  std::vector<UnwindRowRecord> row_table;
  std::vector<uint32_t> succ_off, succ;
  std::vector<uint16_t> succ_ctx;
  std::vector<entropy::Code> row_blk_codes;
  /// Format 5: the module's symbol-name records, decoded and checked with its string table and (format
  /// 6) its depth-0 ranges on the first symbol lookup (sym_once).
  struct Sym {
    uint64_t start, end, sym_start;
    uint32_t name;  ///< a string index (kNone: ""); from the string count on: edited[name - count]
  };
  stackprov::OnceFlag sym_once;
  bool sym_ok = false;
  Error sym_err;
  std::vector<Sym> syms;
  std::deque<std::string> edited;  ///< format 6: names made from a range's function (stable addresses)
  /// Format 8: the module's range records per depth, decoded and checked on the first range use
  /// (ranges_once; rangecoder.hpp), each depth sorted by start for a binary search.
  stackprov::OnceFlag ranges_once;
  bool ranges_ok = false;
  Error ranges_err;
  std::vector<std::vector<Range8>> r8;
};

Error bad(const char* fmt, ...) STACKPROV_PRINTF(1, 2);
Error bad(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string what = format_message_v(fmt, ap);
  va_end(ap);
  return make_error(SPROV_ERR_BUNDLE, "bundle: %s", what.c_str());
}

inline constexpr uint32_t kNone = UINT32_MAX;  // string index of "" before a list's first record

/// One decoded range record (string fields are table indexes, kNone = "").
struct Rec {
  uint64_t start = 0, end = 0;
  uint32_t fn = kNone, file = kNone, line = 0, column = 0;
  uint32_t call_file = kNone, call_line = 0, call_column = 0;
  bool inherit = false;
  uint8_t cls = kClassFirst;  // format 4: this record's class (rec_class), the next one's head context
};

/// An index entry: {u32 start - base, u32 data offset}.
struct Entry {
  uint64_t i;  // its index
  uint64_t start;
  uint64_t off, end;  // data bytes [off, end) within the module's data slice
};

}  // namespace

struct BundleReader::Impl {
  const uint8_t* sec[kSectionTypeCount + 1] = {};
  uint64_t sec_len[kSectionTypeCount + 1] = {};
  const uint8_t* symtab_sec = nullptr;  // kSecSymtabRanges, optional
  uint64_t symtab_len = 0;
  /// Per module: its symbol-table intervals {u32 start - base, u32 length} in symtab_sec, and their count.
  std::vector<std::pair<const uint8_t*, uint32_t>> symtab;
  const uint8_t* symbols_sec = nullptr;  // kSecSymbols, optional (format 5)
  uint64_t symbols_len = 0;
  /// Per module: its symbol-name records' bytes in symbols_sec (null: none) and their count.
  struct SymBlock {
    const uint8_t* p = nullptr;
    uint64_t nbytes = 0;
    uint32_t n = 0;
  };
  std::vector<SymBlock> symbols;
  const uint8_t* calls_sec = nullptr;  // kSecCallSites, optional (format 5)
  uint64_t calls_len = 0;
  /// Per module: its call-site bytes in calls_sec (null: none) and its site and function counts.
  struct CallBlock {
    const uint8_t* p = nullptr;
    uint64_t nbytes = 0;
    uint32_t nsites = 0, nfuncs = 0, nnames = 0;
  };
  std::vector<CallBlock> calls;
  Status decode_symbols(size_t mi, ModuleIndex& ix, uint64_t budget) const;
  /// The module's index with its symbol-name records decoded (once, on the first symbol lookup).
  Result<const ModuleIndex*> symbol_index(size_t mi, uint64_t budget) const;
  std::vector<ModuleMeta> meta;
  std::unique_ptr<ModuleIndex[]> index;

  Status build_index(size_t mi, ModuleIndex& ix) const;
  Result<const ModuleIndex*> module_index(size_t mi) const;
  /// module_index with (format 8) the range records decoded, once, on the first range use.
  Result<const ModuleIndex*> range_index(size_t mi) const;

  const uint8_t* idx_entry(uint32_t sec_type, const Slice& s, uint64_t i) const {
    return sec[sec_type] + (s.first + i) * kIndexEntrySize;
  }
  /// Last entry with start <= rel (false: none).
  bool find_entry(uint32_t sec_type, const Slice& s, const Slice& data, uint64_t rel, Entry* out) const {
    uint64_t lo = 0, hi = s.count;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (ld32(idx_entry(sec_type, s, mid)) <= rel)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0) return false;
    entry(sec_type, s, data, lo - 1, out);
    return true;
  }
  void entry(uint32_t sec_type, const Slice& s, const Slice& data, uint64_t i, Entry* out) const {
    const uint8_t* e = idx_entry(sec_type, s, i);
    out->i = i;
    out->start = ld32(e);
    out->off = ld32(e + 4);
    out->end = i + 1 < s.count ? ld32(idx_entry(sec_type, s, i + 1) + 4) : data.count;
  }
  Cursor data_cursor(uint32_t sec_type, const Slice& data, const Entry& e) const {
    const uint8_t* p = sec[sec_type] + data.first;
    return Cursor{p + e.off, p + e.end};
  }
};

namespace {

/// Checks that [first, first + count) lies within `limit` and follows the previous
/// module's slice (the canonical layout has the slices back to back).
Status check_slice(size_t mi, const char* what, Slice s, uint64_t expected_first, uint64_t limit) {
  if (s.first != expected_first)
    return bad("module %zu: %s start at %" PRIu64 ", expected %" PRIu64, mi, what, s.first, expected_first);
  if (s.count > limit || s.first > limit - s.count)
    return bad("module %zu: %s count %" PRIu64 " at %" PRIu64 " exceeds the section's %" PRIu64, mi, what, s.count,
               s.first, limit);
  return {};
}

/// Where a record's fields come from. Format 2: bytes and varints (no contexts).
struct ByteSrc {
  static constexpr bool kCfaDelta = false;  // format 2 stores the cfa offset itself
  Cursor c;
  bool ctx4 = false;  // format 4's head and length contexts (never in format 2)
  uint8_t sym(unsigned) { return c.u8(); }
  uint64_t u(unsigned) { return c.uleb(); }
  int64_t s(unsigned) { return c.sleb(); }
  bool ok() const { return c.ok(); }
  void fail() { c.bad = true; }
  bool more() const { return c.left() > 0; }
  bool at_end() const { return c.left() == 0; }
  uint64_t units_left() const { return c.left(); }  // bytes
};
/// Format 3: each field decoded with its context's code.
struct BitSrc {
  static constexpr bool kCfaDelta = true;  // a delta from the previous row's
  entropy::BitReader r;
  const entropy::Code* codes;
  bool ctx4 = false;  // format 4: heads and lengths in the contexts of the records' classes
  uint8_t sym(unsigned k) { return static_cast<uint8_t>(codes[k].get(r)); }
  uint64_t u(unsigned k) { return codes[k].get_uint(r); }
  int64_t s(unsigned k) { return entropy::unzigzag(codes[k].get_uint(r)); }
  bool ok() const { return !r.bad(); }
  void fail() { r.set_bad(); }
  bool more() const { return true; }  // format 3 blocks say how many rows they hold
  bool at_end() { return r.at_padded_end(); }
  uint64_t units_left() const { return r.bits_left(); }  // bits
};

/// A string index read from a record: < n, or an error naming it.
template <class Src>
bool read_str(Src& c, unsigned ctx, uint32_t n, uint32_t* out) {
  const uint64_t v = c.u(ctx);
  if (v >= n) {
    c.fail();
    return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

template <class Src>
bool read_u32(Src& c, unsigned ctx, uint32_t* out) {
  const uint64_t v = c.u(ctx);
  if (v > UINT32_MAX) {
    c.fail();
    return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

/// Decodes one range record of a depth list into `r` (state: the previous record of the list).
template <class Src>
Status read_record(Src& c, size_t mi, uint64_t gstart, uint32_t depth, uint64_t prev_end, uint32_t nstr, Rec& r) {
  const unsigned deep = depth > 0 ? 1 : 0;
  const uint8_t head = c.sym(c.ctx4 ? kCtxHead4 + deep * kHeadClasses + r.cls : kCtxHead + deep);
  const unsigned cls = rec_class(head);
  uint64_t len = c.u(c.ctx4 ? kCtxLen4 + deep * kLenClasses + cls : kCtxLen + deep);
  const unsigned fc = c.ctx4 && r.cls == kClassFirst ? kCtxFirstFn - kCtxFn : 0;  // format 4: a list's first record
  r.cls = static_cast<uint8_t>(cls);
  uint64_t gap = 0;
  if (depth > 0) {
    if (len & 1) gap = c.u(kCtxGap);
    len >>= 1;
  }
  if (head & kRecFn) read_str(c, kCtxFn + fc + deep, nstr, &r.fn);
  r.inherit = (head & kRecInherit) != 0;
  if (!r.inherit) {
    if (head & kRecFile) read_str(c, kCtxFile + fc + deep, nstr, &r.file);
    const unsigned lc = head >> kRecLineShift;
    const int64_t dl = lc == kRecLineEscape ? c.s(kCtxLine + fc + deep) : static_cast<int64_t>(lc) - kRecLineBias;
    const bool dl_ok = dl >= -static_cast<int64_t>(UINT32_MAX) && dl <= static_cast<int64_t>(UINT32_MAX);
    const int64_t line = dl_ok ? static_cast<int64_t>(r.line) + dl : -1;  // no signed overflow
    if (!dl_ok || line < 0 || line > static_cast<int64_t>(UINT32_MAX))
      return bad("module %zu: group at 0x%" PRIx64 ": depth %u line delta %" PRId64 " from %u", mi, gstart, depth, dl,
                 r.line);
    r.line = static_cast<uint32_t>(line);
    if (head & kRecColumn) read_u32(c, kCtxCol + fc + deep, &r.column);
  }
  if (head & kRecCall) {
    const uint8_t ext = c.sym(kCtxCallExt);
    if (ext & kCallFile) read_str(c, kCtxCallFile, nstr, &r.call_file);
    const unsigned lc = ext >> kCallLineShift;
    const int64_t dl = lc == kCallLineEscape ? c.s(kCtxCallLine) : static_cast<int64_t>(lc) - kCallLineBias;
    const bool dl_ok = dl >= -static_cast<int64_t>(UINT32_MAX) && dl <= static_cast<int64_t>(UINT32_MAX);
    const int64_t line = dl_ok ? static_cast<int64_t>(r.call_line) + dl : -1;  // no signed overflow
    if (!dl_ok || line < 0 || line > static_cast<int64_t>(UINT32_MAX))
      return bad("module %zu: group at 0x%" PRIx64 ": depth %u call line delta %" PRId64 " from %u", mi, gstart, depth,
                 dl, r.call_line);
    r.call_line = static_cast<uint32_t>(line);
    if (ext & kCallColumn) read_u32(c, kCtxCallCol, &r.call_column);
  }
  if (!c.ok())
    return bad("module %zu: group at 0x%" PRIx64 ": depth %u record truncated or out of range (string index beyond %u)",
               mi, gstart, depth, nstr);
  if (len == 0 || len > UINT32_MAX)
    return bad("module %zu: group at 0x%" PRIx64 ": depth %u record length %" PRIu64, mi, gstart, depth, len);
  if (gap > UINT64_MAX - prev_end || prev_end + gap > UINT64_MAX - len)
    return bad("module %zu: group at 0x%" PRIx64 ": depth %u record gap %" PRIu64 " wraps around", mi, gstart, depth,
               gap);
  r.start = prev_end + gap;
  r.end = r.start + len;
  return {};
}

Status bad_ndepth(size_t mi, uint64_t gstart, uint64_t nd) {
  return bad("module %zu: group at 0x%" PRIx64 " has %" PRIu64 " depth lists (1..%u)", mi, gstart, nd,
             kMaxInlineDepth + 1);
}

/// A format-2 group: uleb ndepth, then per depth a list header (uleb (count << 1 | continues),
/// uleb nbytes) and its records; a list is a cursor of its own (skipped by its byte count).
struct GroupV2 {
  using Src = ByteSrc;
  static constexpr bool kSequential = false;
  Cursor c;
  ByteSrc list{Cursor{nullptr, nullptr}};

  Status begin(size_t mi, uint64_t gstart, uint64_t* nd) {
    *nd = c.uleb();
    if (!c.ok() || *nd == 0 || *nd > kMaxInlineDepth + 1) return bad_ndepth(mi, gstart, *nd);
    return {};
  }
  /// `continues`: the list's last record goes on as the first record of the same depth in the
  /// next group (one range record split at a group boundary).
  Status next_list(size_t mi, uint64_t gstart, uint32_t depth, uint64_t* count, bool* continues) {
    const uint64_t head = c.uleb();
    *count = head >> 1;
    *continues = (head & 1) != 0;
    const uint64_t nbytes = c.uleb();
    if (!c.ok() || nbytes > c.left() || *count == 0 || *count > nbytes)
      return bad("module %zu: group at 0x%" PRIx64 ": depth %u list of %" PRIu64 " records in %" PRIu64
                 " bytes exceeds the group", mi, gstart, depth, *count, nbytes);
    list = ByteSrc{Cursor{c.p, c.p + nbytes}};
    c.p += nbytes;
    return {};
  }
  ByteSrc& src() { return list; }
  Status end_list(size_t, uint64_t, uint32_t) { return {}; }  // the list's cursor ended at its byte count
  Status finish(size_t mi, uint64_t gstart) {
    if (c.left() != 0) return bad("module %zu: group at 0x%" PRIx64 " has %zu trailing bytes", mi, gstart, c.left());
    return {};
  }
};

/// A format-3 group: one bit stream; the depth count and each list's (count << 1 | continues)
/// in their contexts, the lists' records one after another.
struct GroupV3 {
  using Src = BitSrc;
  static constexpr bool kSequential = true;  // a list is passed by decoding it
  BitSrc bits;
  uint64_t ndepth = 0;
  bool has_end = false;  // format 4, the depth-0 list of a group with deeper lists says its bits
  uint64_t list_end = 0;  // then: the bit position where the list's records end

  Status begin(size_t mi, uint64_t gstart, uint64_t* nd) {
    *nd = bits.u(kCtxNdepth);
    if (!bits.ok() || *nd == 0 || *nd > kMaxInlineDepth + 1) return bad_ndepth(mi, gstart, *nd);
    ndepth = *nd;
    return {};
  }
  Status next_list(size_t mi, uint64_t gstart, uint32_t depth, uint64_t* count, bool* continues) {
    const uint64_t head = bits.u(kCtxListHead);
    *count = head >> 1;
    *continues = (head & 1) != 0;
    has_end = bits.ctx4 && depth == 0 && ndepth > 1;
    const uint64_t nbits = has_end ? bits.u(kCtxListBits) : bits.r.bits_left();
    // A record takes at least 2 bits (a head and a length symbol): the count is bounded by the
    // group's bits, so a hostile count ends the loops that read it soon.
    if (!bits.ok() || *count == 0 || nbits > bits.r.bits_left() || *count > nbits / 2)
      return bad("module %zu: group at 0x%" PRIx64 ": depth %u list of %" PRIu64 " records in %" PRIu64
                 " bits (%" PRIu64 " left) exceeds the group", mi, gstart, depth, *count, nbits, bits.r.bits_left());
    list_end = bits.r.consumed() + nbits;
    return {};
  }
  /// Format 4: after a list's records, the position must be the one its bit count said.
  Status end_list(size_t mi, uint64_t gstart, uint32_t depth) {
    if (has_end && bits.r.consumed() != list_end)
      return bad("module %zu: group at 0x%" PRIx64 ": depth %u list ends at bit %" PRIu64 ", its count says %" PRIu64,
                 mi, gstart, depth, bits.r.consumed(), list_end);
    return {};
  }
  /// Moves to the next list without decoding the rest of this one (false: format 3, decode it).
  bool skip_rest() {
    if (!has_end) return false;
    bits.r.skip_bits(list_end - bits.r.consumed());  // list_end is past the records read so far
    return true;
  }
  BitSrc& src() { return bits; }
  Status finish(size_t mi, uint64_t gstart) {
    if (!bits.r.at_padded_end())
      return bad("module %zu: group at 0x%" PRIx64 " has %" PRIu64 " bits after its records (or nonzero padding)", mi,
                 gstart, bits.r.bits_left());
    return {};
  }
};

struct PadHead {
  uint64_t addr;
  bool explicit_frames;
};

/// Where a block's pads come from (formats 2 and 3: varints; format 4: codes), and how many the
/// block holds (formats 2 and 3: until its bytes end).
template <class Src>
Status read_pad_head(Src& c, size_t mi, uint64_t prev, PadHead* out) {
  const uint64_t v = c.u(kCtxPadHead);
  if (!c.ok()) return bad("module %zu: return pad after 0x%" PRIx64 " truncated", mi, prev);
  const uint64_t delta = v >> 1;
  if (delta > UINT64_MAX - prev) return bad("module %zu: return pad delta %" PRIu64 " wraps around", mi, delta);
  out->addr = prev + delta;
  out->explicit_frames = (v & 1) != 0;
  return {};
}

struct PadFrame {
  uint32_t fn, file, line, column;
};

template <class Src>
Status read_pad_frames(Src& c, size_t mi, uint64_t addr, uint32_t nstr, std::vector<PadFrame>* out) {
  const uint64_t n = c.u(kCtxPadFrames);
  if (!c.ok() || n == 0 || n > kMaxInlineDepth + 1)
    return bad("module %zu: return pad 0x%" PRIx64 " has %" PRIu64 " frames (1..%u)", mi, addr, n, kMaxInlineDepth + 1);
  out->resize(n);
  for (PadFrame& f : *out) {
    read_str(c, kCtxPadFn, nstr, &f.fn);
    read_str(c, kCtxPadFile, nstr, &f.file);
    read_u32(c, kCtxPadLine, &f.line);
    read_u32(c, kCtxPadCol, &f.column);
  }
  if (!c.ok())
    return bad("module %zu: return pad 0x%" PRIx64 " frames truncated or out of range (string index beyond %u)", mi,
               addr, nstr);
  return {};
}

/// Decodes one unwind row; `r` holds the previous row of the block (zero before the first),
/// `prev_head` its head byte.
template <class Src>
Status read_row(Src& c, size_t mi, uint64_t prev, uint8_t& prev_head, unsigned& cls, UnwindRowRecord& r) {
  const uint64_t delta = c.u(c.ctx4 ? kCtxRowDelta4 + cls : kCtxRowDelta);
  const uint8_t mask = c.sym(c.ctx4 ? kCtxRowMask4 + cls : kCtxRowMask);
  if (!c.ok()) return bad("module %zu: unwind row after 0x%" PRIx64 " truncated", mi, prev);
  if (delta > UINT64_MAX - prev) return bad("module %zu: unwind row delta %" PRIu64 " wraps around", mi, delta);
  r.pc = prev + delta;
  if (mask & 0x80) return bad("module %zu: unwind row 0x%" PRIx64 " has field mask 0x%x", mi, r.pc, mask);
  const uint8_t head = (mask & kRowHead) ? c.sym(kCtxRowHead) : prev_head;
  prev_head = head;
  r.kind = head & 7;
  r.signal_frame = (head & kRowHeadSignal) != 0;
  r.from_debug_frame = (head & kRowHeadDebugFrame) != 0;
  r.ra_kind = head >> 5;
  if (r.kind < UnwindRowRecord::kCfaReg || r.kind > UnwindRowRecord::kNoInfo)
    return bad("module %zu: unwind row 0x%" PRIx64 " has kind %u", mi, r.pc, r.kind);
  if (r.ra_kind > UnwindRowRecord::kRaUnspecified)
    return bad("module %zu: unwind row 0x%" PRIx64 " has ra kind %u", mi, r.pc, r.ra_kind);
  if (mask & kRowCfaReg) r.cfa_reg = c.sym(kCtxRowCfaReg);
  if (mask & kRowCfaOff) {
    int64_t v = c.s(c.ctx4 ? kCtxRowCfaOff4 + cls : kCtxRowCfaOff);
    if (Src::kCfaDelta) v = v < INT64_MIN / 2 || v > INT64_MAX / 2 ? INT64_MAX : v + r.cfa_off;  // no overflow
    if (v < INT32_MIN || v > INT32_MAX) return bad("module %zu: unwind row 0x%" PRIx64 " cfa offset %" PRId64, mi, r.pc, v);
    r.cfa_off = static_cast<int32_t>(v);
  }
  cls = row_class(mask);
  if (mask & kRowRaReg) r.ra_reg = c.sym(kCtxRowRaReg);
  if (mask & kRowRaOff) r.ra_off = static_cast<int8_t>(c.sym(kCtxRowRaOff));
  if (mask & kRowSaved) {
    const uint8_t kb = c.sym(kCtxRowKeepAdd);
    const unsigned keep = kb >> 4, add = kb & 15u;
    if (keep > r.nsaved || keep + add > kMaxSavedRegs)
      return bad("module %zu: unwind row 0x%" PRIx64 " keeps %u of %u saved registers and adds %u", mi, r.pc, keep,
                 r.nsaved, add);
    r.nsaved = static_cast<uint8_t>(keep + add);
    for (size_t k = keep; k < r.nsaved; k++) {
      if (mask & kRowPacked) {
        const uint8_t v = c.sym(c.ctx4 ? kCtxRowPacked4 + static_cast<unsigned>(k) : kCtxRowPacked);
        r.saved_reg[k] = v >> 4;
        r.saved_off[k] = static_cast<int8_t>(-static_cast<int>(v & 15) - 1);
      } else {
        r.saved_reg[k] = c.sym(kCtxRowSavedReg);
        r.saved_off[k] = static_cast<int8_t>(c.sym(kCtxRowSavedOff));
      }
    }
  }
  if (!c.ok()) return bad("module %zu: unwind row 0x%" PRIx64 " truncated", mi, r.pc);
  return {};
}

/// Format 7: a module's row table, successor lists and block codes, from the front of its row data
/// (the `first_off` bytes before its first block), each value checked.
Status decode_row_table7(const uint8_t* p, uint32_t first_off, size_t mi, uint64_t nrows, ModuleIndex& ix) {
  std::vector<entropy::Code> tab(kRowTabCtxCount7);
  BitSrc c{entropy::BitReader(p, p + first_off), nullptr, true};
  for (unsigned k = 0; k < kRowTabCtxCount7; k++)
    if (!tab[k].read(c.r)) return bad("module %zu: unwind-row table code %u of %u is not a valid canonical code", mi, k, kRowTabCtxCount7);
  if (c.r.get(static_cast<unsigned>((8 - c.r.consumed() % 8) % 8)) != 0 || c.r.bad())
    return bad("module %zu: unwind-row table codes end with nonzero padding or are cut short", mi);
  c.codes = tab.data();
  // A table row takes 2 bits at least (pc delta, mask), a successor 2 (index, flag).
  const uint64_t n = c.u(kCtx7Count);
  if (!c.ok() || n == 0 || n > nrows || n > c.r.bits_left() / 2)
    return bad("module %zu: unwind-row table of %" PRIu64 " rows (the module has %" PRIu64 ", %" PRIu64 " bits left)", mi, n,
               nrows, c.r.bits_left());
  ix.row_table.resize(static_cast<size_t>(n));
  uint8_t prev_head = 0;
  unsigned cls = 0;
  for (uint64_t t = 0; t < n; t++) {
    UnwindRowRecord next = t == 0 ? UnwindRowRecord{} : ix.row_table[t - 1];
    if (Status st = read_row(c, mi, t == 0 ? 0 : t - 1, prev_head, cls, next); !st) return st;
    for (size_t i = next.nsaved; i < kMaxSavedRegs; i++) {
      next.saved_reg[i] = 0;
      next.saved_off[i] = 0;
    }
    if (next.pc != t || (t > 0 && row_compare7(ix.row_table[t - 1], next) >= 0))
      return bad("module %zu: unwind-row table row %" PRIu64 " (pc field %" PRIu64 ") is not after the one before", mi, t,
                 next.pc);
    ix.row_table[t] = next;
  }
  ix.succ_off.assign(static_cast<size_t>(n) + 1, 0);
  unsigned npair = 0;
  for (uint64_t t = 0; t < n; t++) {
    const uint64_t k = c.u(kCtx7SuccCount);
    if (!c.ok() || k > n || k > nrows - ix.succ.size() || k > c.r.bits_left() / 2)
      return bad("module %zu: unwind-row table row %" PRIu64 " has %" PRIu64 " successors (of %" PRIu64 " rows)", mi, t, k, n);
    for (uint64_t i = 0; i < k; i++) {
      const int64_t d = c.s(kCtx7Succ);
      const uint8_t flag = c.sym(kCtx7PairFlag);
      if (!c.ok() || d < -static_cast<int64_t>(t) || d >= static_cast<int64_t>(n - t) || flag > 1)
        return bad("module %zu: unwind-row table row %" PRIu64 ": successor %" PRIu64 " at %+" PRId64 " (flag %u) is outside the %" PRIu64
                   " rows, or cut short", mi, t, i, d, flag, n);
      const uint64_t j = static_cast<uint64_t>(static_cast<int64_t>(t) + d);
      const UnwindRowRecord &a = ix.row_table[t], &b = ix.row_table[j];
      if (flag != 0 && npair == kMaxPairCtx7)
        return bad("module %zu: unwind-row table has more than %u pc-delta contexts of pairs", mi, kMaxPairCtx7);
      ix.succ.push_back(static_cast<uint32_t>(j));
      ix.succ_ctx.push_back(static_cast<uint16_t>(flag != 0 ? kRowBlkCtxCount7 + npair++
                                                             : kCtx7Delta + row_delta_class7(b.kind, a.cfa_off, b.cfa_off, b.nsaved)));
    }
    ix.succ_off[t + 1] = static_cast<uint32_t>(ix.succ.size());
  }
  ix.row_blk_codes.resize(kRowBlkCtxCount7 + npair);
  for (unsigned k = 0; k < kRowBlkCtxCount7 + npair; k++)
    if (!ix.row_blk_codes[k].read(c.r))
      return bad("module %zu: unwind-row block code %u of %u is not a valid canonical code", mi, k, kRowBlkCtxCount7 + npair);
  if (!c.r.at_padded_end())
    return bad("module %zu: unwind-row table and codes leave %" PRIu64 " bits before the first data offset %u", mi,
               c.r.bits_left(), first_off);
  return {};
}

}  // namespace

Status BundleReader::Impl::build_index(size_t mi, ModuleIndex& ix) const {
  const ModuleMeta& m = meta[mi];
  const uint8_t* zs = sec[kSecStrings] + m.strings.first + m.name_len + 1;
  const size_t zn = static_cast<size_t>(m.strings.count - m.name_len - 1);
  if (!(m.version >= 4 ? lz::decompress_coded(zs, zn, static_cast<size_t>(m.str_bytes), &ix.strings)
                       : lz::decompress(zs, zn, static_cast<size_t>(m.str_bytes), &ix.strings)))
    return bad("module %zu: string table of %zu compressed bytes does not decompress to %" PRIu64 " bytes", mi, zn,
               m.str_bytes);
  if (!ix.strings.empty() && ix.strings.back() != '\0')
    return bad("module %zu: string table does not end with NUL", mi);
  if (m.version >= 3) {
    // Format 3 stores no offsets: string i starts after the i-th NUL of the table.
    for (size_t off = 0; off < ix.strings.size();) {
      ix.offs.push_back(static_cast<uint32_t>(off));
      off += std::strlen(ix.strings.data() + off) + 1;  // terminated: the table ends with NUL
    }
  }
  if (m.version == 2) ix.offs.resize(m.stroffs.count);
  for (uint64_t i = 0; m.version == 2 && i < m.stroffs.count; i++) {
    const uint32_t off = ld32(sec[kSecStrOffs] + (m.stroffs.first + i) * kStrOffSize);
    if (off >= m.str_bytes)
      return bad("module %zu: string %" PRIu64 " at offset %u beyond the table of %" PRIu64, mi, i, off, m.str_bytes);
    // Strings are stored one after another (the writer's layout): offsets rise and each starts
    // after a NUL, so the lengths below scan the table once. Equal or overlapping offsets would let
    // a few bytes of table cost count × length (a 1 MiB string named a million times: hours).
    if (i > 0 && (off <= ix.offs[i - 1] || ix.strings[off - 1] != '\0'))
      return bad("module %zu: string %" PRIu64 " at offset %u does not start after string %" PRIu64 " (offset %u)", mi,
                 i, off, i - 1, ix.offs[i - 1]);
    ix.offs[i] = off;
  }
  ix.lens.resize(ix.offs.size());
  for (size_t i = 0; i < ix.offs.size(); i++) {  // terminated: the table ends with NUL
    const size_t n = std::strlen(ix.strings.data() + ix.offs[i]);
    if (n > kMaxStringBytes)
      return bad("module %zu: string %zu of %zu bytes exceeds the limit of %zu", mi, i, n, kMaxStringBytes);
    ix.lens[i] = static_cast<uint32_t>(n);
  }
  struct IndexCheck {
    uint32_t sec, data_sec;
    Slice idx, data;
    const char* what;
    std::vector<entropy::Code>* codes;  // format 3: the tables in front of the data
    unsigned ncodes;
  };
  const bool v3 = m.version >= 3;
  if (m.version >= 8 && m.findex.count != 0)  // format 8: the ranges are one stream (decoded by range_index)
    return bad("module %zu: %" PRIu64 " group index entries in a format-%u file (it has none)", mi, m.findex.count,
               m.version);
  for (const IndexCheck& k :
       {IndexCheck{kSecFuncIndex, kSecFuncData, m.findex, m.fdata, "group", v3 ? &ix.range_codes : nullptr,
                   m.version >= 4 ? kRangeCtxCount4 : kRangeCtxCount},
        IndexCheck{kSecPadIndex, kSecPadData, m.pindex, m.pdata, "return-pad block",
                   m.version >= 4 ? &ix.pad_codes : nullptr, kPadCtxCount},
        IndexCheck{kSecRowIndex, kSecRowData, m.rindex, m.rdata, "unwind-row block", v3 ? &ix.row_codes : nullptr,
                   m.version >= 7 ? 0u : m.version >= 4 ? kRowCtxCount4 : kRowCtxCount}}) {
    if (k.sec == kSecFuncIndex && m.version >= 8) continue;
    if (k.idx.count == 0 && k.data.count != 0)
      return bad("module %zu: %" PRIu64 " %s bytes without an index", mi, k.data.count, k.what);
    uint32_t first_off = 0;  // format 3: the tables' bytes
    if (k.codes != nullptr && k.idx.count > 0) {
      first_off = ld32(idx_entry(k.sec, k.idx, 0) + 4);
      if (first_off == 0 || first_off > k.data.count)
        return bad("module %zu: %s tables of %u bytes (the first data offset) are empty or beyond %" PRIu64 " bytes", mi,
                   k.what, first_off, k.data.count);
      const uint8_t* p = sec[k.data_sec] + k.data.first;
      if (k.ncodes == 0) {  // format 7's rows: the row table and the block codes
        if (Status st = decode_row_table7(p, first_off, mi, m.nrows, ix); !st) return st;
      } else {
        entropy::BitReader r(p, p + first_off);
        k.codes->resize(k.ncodes);
        for (unsigned c = 0; c < k.ncodes; c++)
          if (!(*k.codes)[c].read(r))
            return bad("module %zu: %s code %u of %u is not a valid canonical code", mi, k.what, c, k.ncodes);
        if (!r.at_padded_end())
          return bad("module %zu: %s tables leave %" PRIu64 " bits before the first data offset %u", mi, k.what,
                     r.bits_left(), first_off);
      }
    }
    for (uint64_t i = 0; i < k.idx.count; i++) {
      const uint8_t* e = idx_entry(k.sec, k.idx, i);
      const uint32_t start = ld32(e), off = ld32(e + 4);
      if (i == 0 ? off != first_off : (start <= ld32(e - kIndexEntrySize) || off <= ld32(e - kIndexEntrySize + 4)))
        return bad("module %zu: %s %" PRIu64 " (start 0x%x, data offset %u) is not after the one before", mi, k.what, i,
                   start, off);
      if (off >= k.data.count)
        return bad("module %zu: %s %" PRIu64 " data offset %u beyond %" PRIu64 " bytes", mi, k.what, i, off,
                   k.data.count);
    }
  }
  // Format 4 pad blocks hold kPadBlock pads each, the last one the rest.
  if (m.version >= 4 && m.pindex.count != (m.npads + kPadBlock - 1) / kPadBlock)
    return bad("module %zu: %" PRIu64 " return-pad blocks for %" PRIu64 " pads (%zu a block)", mi, m.pindex.count,
               m.npads, kPadBlock);
  // Format 3 row blocks hold kRowBlock3 rows each, the last one the rest.
  if (v3 && m.rindex.count != (m.nrows + kRowBlock3 - 1) / kRowBlock3)
    return bad("module %zu: %" PRIu64 " unwind-row blocks for %" PRIu64 " rows (%zu a block)", mi, m.rindex.count,
               m.nrows, kRowBlock3);
  return {};
}

static Status decode_coded_symbols(const BundleReader::Impl& im, size_t mi, ModuleIndex& ix, uint64_t budget);

/// Format 6: the `n` codes at the front of a module's symbol-name or call-site block, then zero bits
/// to a byte boundary.
static Status read_block_codes(entropy::BitReader& r, unsigned n, size_t mi, const char* what,
                               std::vector<entropy::Code>& codes) {
  codes.resize(n);
  for (unsigned k = 0; k < n; k++)
    if (!codes[k].read(r)) return bad("module %zu: %s code %u of %u is not a valid canonical code", mi, what, k, n);
  const unsigned pad = static_cast<unsigned>((8 - r.consumed() % 8) % 8);
  if (r.get(pad) != 0 || r.bad()) return bad("module %zu: %s codes end with nonzero padding or cut short", mi, what);
  return {};
}

Status BundleReader::Impl::decode_symbols(size_t mi, ModuleIndex& ix, uint64_t budget) const {
  if (mi >= symbols.size() || symbols[mi].p == nullptr) return {};
  const SymBlock& b = symbols[mi];
  if (meta[mi].version >= 6) return decode_coded_symbols(*this, mi, ix, budget);
  Cursor c{b.p, b.p + b.nbytes};
  ix.syms.reserve(b.n);
  uint64_t prev_end = 0;
  for (uint32_t i = 0; i < b.n; i++) {
    const uint64_t gap = c.uleb(), length = c.uleb(), name = c.uleb();
    const uint64_t back = (name & 1) != 0 ? c.uleb() : 0;
    if (!c.ok()) return bad("module %zu: symbol-name record %u of %u is cut short or over-long", mi, i, b.n);
    if (gap > UINT64_MAX - prev_end || length == 0 || length > UINT64_MAX - (prev_end + gap))
      return bad("module %zu: symbol-name record %u at +0x%" PRIx64 " after 0x%" PRIx64 " length 0x%" PRIx64
                 " is empty or wraps around", mi, i, gap, prev_end, length);
    const uint64_t start = prev_end + gap;
    if ((name & 1) != 0 && (back == 0 || back > start))
      return bad("module %zu: symbol-name record %u at 0x%" PRIx64 ": its symbol starts 0x%" PRIx64 " before it", mi, i,
                 start, back);
    if ((name >> 1) >= ix.offs.size())
      return bad("module %zu: symbol-name record %u at 0x%" PRIx64 " names string %" PRIu64 " of %zu", mi, i, start,
                 name >> 1, ix.offs.size());
    ix.syms.push_back({start, start + length, start - back, static_cast<uint32_t>(name >> 1)});
    prev_end = start + length;
  }
  if (c.left() != 0)
    return bad("module %zu: %zu bytes after its %u symbol-name records", mi, c.left(), b.n);
  return {};
}

Result<const ModuleIndex*> BundleReader::Impl::symbol_index(size_t mi, uint64_t budget) const {
  auto ixr = range_index(mi);  // format 6's names refer to depth-0 ranges
  if (!ixr) return ixr;
  ModuleIndex& ix = index[mi];
  stackprov::call_once(ix.sym_once, [&] {
    Status s = decode_symbols(mi, ix, budget);
    ix.sym_ok = s.ok();
    if (!ix.sym_ok) {
      ix.sym_err = s.error();
      ix.syms.clear();
      ix.edited.clear();
    }
  });
  if (!ix.sym_ok) return ix.sym_err;
  return &ix;
}

Result<const ModuleIndex*> BundleReader::Impl::range_index(size_t mi) const {
  auto ixr = module_index(mi);
  if (!ixr || meta[mi].version < 8) return ixr;
  ModuleIndex& ix = index[mi];
  stackprov::call_once(ix.ranges_once, [&] {
    const ModuleMeta& m = meta[mi];
    Status s = decode_ranges8(sec[kSecFuncData] + m.fdata.first, static_cast<size_t>(m.fdata.count), mi, m.nranges,
                              static_cast<uint32_t>(ix.offs.size()), &ix.r8);
    ix.ranges_ok = s.ok();
    if (!ix.ranges_ok) {
      ix.ranges_err = s.error();
      ix.r8.clear();
    }
  });
  if (!ix.ranges_ok) return ix.ranges_err;
  return &ix;
}

Result<const ModuleIndex*> BundleReader::Impl::module_index(size_t mi) const {
  if (mi >= meta.size()) return bad("module index %zu out of %zu", mi, meta.size());
  ModuleIndex& ix = index[mi];
  stackprov::call_once(ix.once, [&] {
    Status s = build_index(mi, ix);
    ix.ok = s.ok();
    if (!ix.ok) {
      ix.err = s.error();
      ix.strings.clear();
      ix.offs.clear();
      ix.lens.clear();
    }
  });
  if (!ix.ok) return ix.err;
  return &ix;
}

BundleReader::BundleReader() : impl_(std::make_unique<Impl>()) {}
BundleReader::BundleReader(BundleReader&& o) noexcept { *this = std::move(o); }
BundleReader& BundleReader::operator=(BundleReader&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) unmap_file(map_, map_len_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    map_ = std::exchange(o.map_, nullptr);
    map_len_ = std::exchange(o.map_len_, 0);
    modules_ = std::move(o.modules_);
    impl_ = std::move(o.impl_);
  }
  return *this;
}
BundleReader::~BundleReader() {
  if (map_ != nullptr) unmap_file(map_, map_len_);
}

Result<BundleReader> BundleReader::open(const uint8_t* data, size_t len) {
  if (data == nullptr || len < kHeaderSize) return bad("%zu bytes are shorter than the %zu-byte header", len, kHeaderSize);
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0) return bad("bad magic (not a stackprov symbol bundle)");
  const uint32_t version = ld32(data + 8);
  if (version < kMinFormatVersion || version > kFormatVersion)
    return bad("format version %u, this reader knows %u..%u", version, kMinFormatVersion, kFormatVersion);
  const uint32_t nsec = ld32(data + 12);
  if (nsec > kMaxSections) return bad("section count %u exceeds %u", nsec, kMaxSections);
  const uint64_t file_size = ld64(data + 16);
  if (file_size != len) return bad("header says %" PRIu64 " bytes, the file has %zu", file_size, len);
  if (ld32(data + 24) != 0 || ld32(data + 28) != 0) return bad("header flags 0x%x/0x%x", ld32(data + 24), ld32(data + 28));
  const uint64_t table_end = kHeaderSize + static_cast<uint64_t>(nsec) * kSectionEntrySize;
  if (table_end > len) return bad("section table of %u entries ends at %" PRIu64 " beyond %zu bytes", nsec, table_end, len);

  BundleReader rd;
  Impl& im = *rd.impl_;
  rd.data_ = data;
  rd.size_ = len;
  struct Span {
    uint64_t off, len;
  };
  std::vector<Span> spans;
  bool seen[kSectionTypeCount + 1] = {};
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t* e = data + kHeaderSize + i * kSectionEntrySize;
    const uint32_t type = ld32(e), flags = ld32(e + 4);
    const uint64_t off = ld64(e + 8), slen = ld64(e + 16);
    if (flags != 0) return bad("section %u (type %u) has flags 0x%x", i, type, flags);
    if (off % kSectionAlign != 0 || off < table_end || off > len || slen > len - off)
      return bad("section %u (type %u) at %" PRIu64 " length %" PRIu64 " is outside [%" PRIu64 ", %zu) or unaligned", i,
                 type, off, slen, table_end, len);
    spans.push_back({off, slen});
    if (type == 0 || (type > kSectionTypeCount && (type & kSectionOptionalBit) == 0))
      return bad("section %u has unknown type %u", i, type);
    if (type == kSecSymtabRanges) {
      if (im.symtab_sec != nullptr) return bad("section type 0x%x appears twice", type);
      im.symtab_sec = data + off;
      im.symtab_len = slen;
      continue;
    }
    if (type == kSecSymbols) {
      if (im.symbols_sec != nullptr) return bad("section type 0x%x appears twice", type);
      if (version < 5) return bad("section type 0x%x (symbol names) in a format-%u bundle: it is format 5's", type, version);
      im.symbols_sec = data + off;
      im.symbols_len = slen;
      continue;
    }
    if (type == kSecCallSites) {
      if (im.calls_sec != nullptr) return bad("section type 0x%x appears twice", type);
      if (version < 5) return bad("section type 0x%x (call sites) in a format-%u bundle: it is format 5's", type, version);
      im.calls_sec = data + off;
      im.calls_len = slen;
      continue;
    }
    if (type > kSectionTypeCount) continue;  // optional, unknown: skipped
    if (seen[type]) return bad("section type %u appears twice", type);
    seen[type] = true;
    im.sec[type] = data + off;
    im.sec_len[type] = slen;
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.off < b.off; });
  for (size_t i = 1; i < spans.size(); i++)
    if (spans[i - 1].off + spans[i - 1].len > spans[i].off)
      return bad("sections at %" PRIu64 " and %" PRIu64 " overlap", spans[i - 1].off, spans[i].off);
  // The file ends where its last section ends, padded to 8 bytes (canonical layout).
  const uint64_t last_end = spans.empty() ? table_end : std::max(table_end, spans.back().off + spans.back().len);
  const uint64_t want_len = (last_end + kSectionAlign - 1) & ~static_cast<uint64_t>(kSectionAlign - 1);
  if (want_len != len) return bad("the sections end at %" PRIu64 " (padded %" PRIu64 "), the file has %zu bytes",
                                  last_end, want_len, len);
  for (uint32_t t = kSecModules; t < kSecBlobs; t++)
    if (!seen[t]) return bad("required section type %u is missing", t);
  static const size_t kRecSize[kSectionTypeCount + 1] = {
      0, kModuleSize, 1, kStrOffSize, kIndexEntrySize, 1, kIndexEntrySize, 1, kIndexEntrySize, 1, 1};
  uint64_t nrec[kSectionTypeCount + 1] = {};
  for (uint32_t t = 1; t <= kSectionTypeCount; t++) {
    if (im.sec_len[t] % kRecSize[t] != 0)
      return bad("section type %u length %" PRIu64 " is not a multiple of %zu", t, im.sec_len[t], kRecSize[t]);
    nrec[t] = im.sec_len[t] / kRecSize[t];
  }
  if (nrec[kSecModules] > kMaxModules) return bad("module count %" PRIu64 " exceeds %zu", nrec[kSecModules], kMaxModules);

  struct SliceField {
    size_t field;
    uint32_t sec;
    Slice ModuleMeta::*member;
    const char* what;
  };
  static const SliceField kSlices[] = {
      {kModStrings, kSecStrings, &ModuleMeta::strings, "strings"},
      {kModStrOffs, kSecStrOffs, &ModuleMeta::stroffs, "string offsets"},
      {kModFuncIndex, kSecFuncIndex, &ModuleMeta::findex, "group index"},
      {kModFuncData, kSecFuncData, &ModuleMeta::fdata, "group data"},
      {kModPadIndex, kSecPadIndex, &ModuleMeta::pindex, "return-pad index"},
      {kModPadData, kSecPadData, &ModuleMeta::pdata, "return-pad data"},
      {kModRowIndex, kSecRowIndex, &ModuleMeta::rindex, "unwind-row index"},
      {kModRowData, kSecRowData, &ModuleMeta::rdata, "unwind-row data"},
      {kModBlob, kSecBlobs, &ModuleMeta::blob, "debug blob"},
  };
  const size_t nmod = static_cast<size_t>(nrec[kSecModules]);
  im.meta.resize(nmod);
  rd.modules_.resize(nmod);
  uint64_t next[std::size(kSlices)] = {};  // where the next module's slices start
  for (size_t mi = 0; mi < nmod; mi++) {
    const uint8_t* r = im.sec[kSecModules] + mi * kModuleSize;
    ModuleMeta& m = im.meta[mi];
    ModuleView& v = rd.modules_[mi];
    const uint8_t kind = r[kModIdKind], id_len = r[kModIdLen];
    if (kind < 1 || kind > kMaxIdKind) return bad("module %zu has id kind %u", mi, kind);
    if (id_len == 0 || id_len > kMaxIdBytes) return bad("module %zu has id length %u (1..%zu)", mi, id_len, kMaxIdBytes);
    if ((kind == 2 && id_len != 20) || (kind == 3 && id_len != 16) || (kind == 4 && id_len != 8))
      return bad("module %zu: id length %u is wrong for id kind %u", mi, id_len, kind);
    for (size_t i = id_len; i < kMaxIdBytes; i++)
      if (r[kModId + i] != 0) return bad("module %zu: id byte %zu past its length %u is not zero", mi, i, id_len);
    const uint16_t mflags = ld16(r + kModFlags);
    if ((mflags & ~kModFlagPdbLines) != 0 || (mflags != 0 && version < 4))
      return bad("module %zu has flags 0x%x (format %u knows %s)", mi, mflags, version, version < 4 ? "none" : "0x1");
    for (size_t k = 0; k < std::size(kSlices); k++) {
      const SliceField& f = kSlices[k];
      Slice& s = m.*(f.member);
      s = Slice{ld64(r + f.field), ld64(r + f.field + 8)};
      if (auto st = check_slice(mi, f.what, s, next[k], nrec[f.sec]); !st) return st.error();
      next[k] = s.first + s.count;
    }
    m.version = version;
    if (version >= 3 && m.stroffs.count != 0)
      return bad("module %zu: %" PRIu64 " string offsets in a format-%u file (it stores none)", mi, m.stroffs.count,
                 version);
    m.base = ld64(r + kModBase);
    m.nranges = ld64(r + kModRangeCount);
    m.npads = ld64(r + kModPadCount);
    m.nrows = ld64(r + kModRowCount);
    m.str_bytes = ld64(r + kModStrBytes);
    m.name_len = ld32(r + kModName);
    for (uint64_t c : {m.nranges, m.npads, m.nrows})
      if (c > kMaxRecords) return bad("module %zu: record count %" PRIu64 " exceeds %" PRIu64, mi, c, kMaxRecords);
    if (m.str_bytes > kMaxStrBytes || m.stroffs.count > m.str_bytes)
      return bad("module %zu: %" PRIu64 " strings in %" PRIu64 " bytes (at most %" PRIu64 ")", mi, m.stroffs.count,
                 m.str_bytes, kMaxStrBytes);
    const uint8_t* st = im.sec[kSecStrings] + m.strings.first;
    if (m.name_len > kMaxStringBytes || m.name_len >= m.strings.count || st[m.name_len] != 0)
      return bad("module %zu: name of %u bytes is not NUL-terminated within the %" PRIu64 " string bytes", mi,
                 m.name_len, m.strings.count);
    const uint64_t zbytes = m.strings.count - m.name_len - 1;
    if (zbytes == 0) return bad("module %zu: the compressed string table is empty", mi);
    if (m.str_bytes > kMaxStrRatio * zbytes + kMaxStrRatio)
      return bad("module %zu: %" PRIu64 " string bytes from %" PRIu64 " compressed bytes exceed the ratio %" PRIu64, mi,
                 m.str_bytes, zbytes, kMaxStrRatio);

    v.index = mi;
    v.id_kind = static_cast<IdKind>(kind);
    v.id = std::span<const uint8_t>(r + kModId, id_len);
    v.name = std::string_view(reinterpret_cast<const char*>(st), m.name_len);
    std::memcpy(v.sha256_file.data(), r + kModShaFile, 32);
    std::memcpy(v.sha256_debug.data(), r + kModShaDebug, 32);
    v.range_count = m.nranges;
    v.pad_count = m.npads;
    v.pdb_lines = (mflags & kModFlagPdbLines) != 0;
    v.unwind_count = m.nrows;
    if (m.blob.count > 0) v.debug_blob = std::span<const uint8_t>(im.sec[kSecBlobs] + m.blob.first, m.blob.count);
    if (mi > 0) {
      const ModuleView& p = rd.modules_[mi - 1];
      const bool less = p.id_kind != v.id_kind ? p.id_kind < v.id_kind
                                               : std::lexicographical_compare(p.id.begin(), p.id.end(), v.id.begin(),
                                                                              v.id.end());
      if (!less) return bad("module %zu is not sorted after module %zu by identity", mi, mi - 1);
    }
  }
  for (size_t k = 0; k < std::size(kSlices); k++)
    if (next[k] != nrec[kSlices[k].sec])
      return bad("section type %u holds %" PRIu64 " records, the modules use %" PRIu64, kSlices[k].sec,
                 nrec[kSlices[k].sec], next[k]);
  // Symbol-table ranges: O(entries), checked here (heads in module order, intervals sorted,
  // not touching, within the module's 4 GiB above its base).
  im.symtab.assign(nmod, {nullptr, 0});
  if (im.symtab_sec != nullptr) {
    if (im.symtab_len % 8 != 0)
      return bad("symbol-table ranges section length %" PRIu64 " is not a multiple of 8", im.symtab_len);
    const uint64_t n = im.symtab_len / 8;
    uint64_t i = 0;
    int64_t prev_mod = -1;
    while (i < n) {
      const uint8_t* h = im.symtab_sec + i * 8;
      const uint32_t mi = ld32(h), cnt = ld32(h + 4);
      if (static_cast<int64_t>(mi) <= prev_mod || mi >= nmod)
        return bad("symbol-table ranges: module index %u after %" PRId64 " (of %zu modules)", mi, prev_mod, nmod);
      if (cnt == 0 || cnt > n - i - 1)
        return bad("symbol-table ranges of module %u: %u intervals, %" PRIu64 " entries left", mi, cnt, n - i - 1);
      uint64_t prev_end = 0;
      for (uint32_t k = 0; k < cnt; k++) {
        const uint8_t* e = h + 8 + uint64_t{k} * 8;
        const uint64_t lo = ld32(e), len32 = ld32(e + 4);
        if (len32 == 0 || lo + len32 > (uint64_t{1} << 32) || (k > 0 && lo <= prev_end))
          return bad("symbol-table ranges of module %u: interval %u at +0x%" PRIx64 " length %" PRIu64
                     " is empty, beyond 4 GiB or not after the previous one", mi, k, lo, len32);
        prev_end = lo + len32;
      }
      im.symtab[mi] = {h + 8, cnt};
      prev_mod = mi;
      i += uint64_t{cnt} + 1;
    }
  }
  // Symbol names (format 5): heads in module order, each block's bytes within the section; the
  // records themselves are decoded with the module's string table on its first lookup.
  im.symbols.assign(nmod, {});
  for (uint64_t at = 0, prev_mod = 0, first = 1; im.symbols_sec != nullptr && at < im.symbols_len; first = 0) {
    if (im.symbols_len - at < kSymbolsHeadSize)
      return bad("symbol names: a head at %" PRIu64 " of the %" PRIu64 "-byte section is cut short", at, im.symbols_len);
    const uint8_t* h = im.symbols_sec + at;
    const uint32_t mi = ld32(h), cnt = ld32(h + 4);
    const uint64_t nbytes = ld64(h + 8);
    if ((first == 0 && mi <= prev_mod) || mi >= nmod)
      return bad("symbol names: module index %u after %" PRIu64 " (of %zu modules)", mi, first ? 0 : prev_mod, nmod);
    at += kSymbolsHeadSize;
    // Format 5: 3 bytes a record at least; format 6: 2 bits (a head, a gap).
    const uint64_t units = version >= 6 ? nbytes * 8 : nbytes;
    const uint64_t unit = version >= 6 ? kMinSymbolRecordBits : kMinSymbolRecordBytes;
    if (nbytes > im.symbols_len - at || cnt == 0 || cnt > units / unit)
      return bad("symbol names of module %u: %u records in %" PRIu64 " bytes (%" PRIu64 " left; %" PRIu64 " %s a record at least)",
                 mi, cnt, nbytes, im.symbols_len - at, unit, version >= 6 ? "bits" : "bytes");
    im.symbols[mi] = {im.symbols_sec + at, nbytes, cnt};
    rd.modules_[mi].symbol_count = cnt;
    at += nbytes;
    prev_mod = mi;
  }
  // Call sites: heads in module order, each block's bytes within the section; the records are
  // decoded by call_sites().
  im.calls.assign(nmod, {});
  for (uint64_t at = 0, prev_mod = 0, first = 1; im.calls_sec != nullptr && at < im.calls_len; first = 0) {
    if (im.calls_len - at < kCallSitesHeadSize)
      return bad("call sites: a head at %" PRIu64 " of the %" PRIu64 "-byte section is cut short", at, im.calls_len);
    const uint8_t* h = im.calls_sec + at;
    const uint32_t mi = ld32(h), nsites = ld32(h + 4), nfuncs = ld32(h + 8), nnames = ld32(h + 12);
    const uint64_t nbytes = ld64(h + 16);
    if ((first == 0 && mi <= prev_mod) || mi >= nmod)
      return bad("call sites: module index %u after %" PRIu64 " (of %zu modules)", mi, first ? 0 : prev_mod, nmod);
    at += kCallSitesHeadSize;
    // Format 5: so many bytes an item at least; format 6: bits.
    const uint64_t units = nbytes > im.calls_len - at ? 0 : version >= 6 ? nbytes * 8 : nbytes;
    if (nbytes > im.calls_len - at || (nsites == 0 && nfuncs == 0 && nnames == 0) ||
        uint64_t{nsites} * kMinCallSiteBytes + uint64_t{nfuncs} * kMinCallFunctionBytes +
                uint64_t{nnames} * kMinCallSymbolBytes > units)
      return bad("call sites of module %u: %u sites, %u functions and %u names in %" PRIu64 " bytes (%" PRIu64
                 " left; %zu %s a site, %zu a function and %zu a name at least)",
                 mi, nsites, nfuncs, nnames, nbytes, im.calls_len - at, kMinCallSiteBytes,
                 version >= 6 ? "bits" : "bytes", kMinCallFunctionBytes, kMinCallSymbolBytes);
    im.calls[mi] = {im.calls_sec + at, nbytes, nsites, nfuncs, nnames};
    rd.modules_[mi].call_site_count = nsites;
    rd.modules_[mi].call_function_count = nfuncs;
    rd.modules_[mi].call_symbol_count = nnames;
    at += nbytes;
    prev_mod = mi;
  }
  im.index = std::make_unique<ModuleIndex[]>(nmod);
  return rd;
}

#ifdef _WIN32
constexpr int kBundleOpenFlags = O_RDONLY | O_BINARY;  // the win64 build: mingw's open() has no other flag
#else
constexpr int kBundleOpenFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
#endif

Result<BundleReader> BundleReader::open_file(const std::string& path) {
  const int fd = ::open(path.c_str(), kBundleOpenFlags);
  if (fd < 0) return make_error(-errno, "bundle: cannot open %s: %s", path.c_str(), strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(-e, "bundle: cannot stat %s: %s", path.c_str(), strerror(e));
  }
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return make_error(SPROV_ERR_BUNDLE, "bundle: %s is not a non-empty regular file (%lld bytes)", path.c_str(),
                      static_cast<long long>(st.st_size));
  }
  const size_t len = static_cast<size_t>(st.st_size);
  auto mapped = map_file(fd, len, false, "bundle: " + path);  // guarded: a truncation is no SIGBUS
  ::close(fd);
  if (!mapped) return std::move(mapped).error();
  void* p = mapped.value();
  auto rd = open(static_cast<const uint8_t*>(p), len);
  if (!rd) {
    unmap_file(p, len);
    Error err = std::move(rd).error();
    err.message = path + ": " + err.message;
    return err;
  }
  rd->map_ = p;
  rd->map_len_ = len;
  return rd;
}

bool BundleReader::file_changed() const { return map_ != nullptr && file_map_faulted(map_); }

const ModuleView* BundleReader::find_module(IdKind kind, std::span<const uint8_t> id) const {
  auto it = std::lower_bound(modules_.begin(), modules_.end(), 0, [&](const ModuleView& v, int) {
    if (v.id_kind != kind) return v.id_kind < kind;
    return std::lexicographical_compare(v.id.begin(), v.id.end(), id.begin(), id.end());
  });
  if (it == modules_.end() || it->id_kind != kind || !std::equal(it->id.begin(), it->id.end(), id.begin(), id.end()))
    return nullptr;
  return &*it;
}

namespace {

std::string_view str_at(const ModuleIndex& ix, uint32_t i) {
  if (i == kNone || i >= ix.offs.size()) return {};
  return std::string_view(ix.strings.data() + ix.offs[i], ix.lens[i]);
}
uint64_t str_len(const ModuleIndex& ix, uint32_t i) { return i == kNone || i >= ix.offs.size() ? 0 : ix.lens[i]; }
/// A symbol-name record's name (ModuleIndex::Sym::name): a string, or a name format 6 made by an edit.
std::string_view sym_name(const ModuleIndex& ix, uint32_t i) {
  if (i != kNone && i >= ix.offs.size() && i - ix.offs.size() < ix.edited.size()) return ix.edited[i - ix.offs.size()];
  return str_at(ix, i);
}

/// Bytes of names ranges() and return_pads() may copy out: 1 GiB + 64 × the bundle's size. A record
/// costs 2 bytes and names strings of up to 1 MiB, so a small hostile bundle could otherwise ask
/// for terabytes; the writer's own output stays far below (names are shared, records are many).
uint64_t copy_budget(size_t bundle_bytes) { return (uint64_t{1} << 30) + 64 * uint64_t{bundle_bytes}; }

}  // namespace

Result<BundleReader::SymbolLookup> BundleReader::symbol(size_t module, uint64_t rel_addr) const {
  SymbolLookup out;
  if (module >= impl_->symbols.size() || impl_->symbols[module].p == nullptr) return out;
  auto ix = impl_->symbol_index(module, copy_budget(size_));
  if (!ix) return ix.error();
  const auto& v = ix.value()->syms;
  auto it = std::upper_bound(v.begin(), v.end(), rel_addr,
                             [](uint64_t a, const ModuleIndex::Sym& e) { return a < e.start; });
  if (it == v.begin() || rel_addr >= std::prev(it)->end) return out;
  --it;
  out.found = true;
  out.name = sym_name(*ix.value(), it->name);
  out.sym_start = it->sym_start;
  return out;
}

Result<std::vector<SymbolRecord>> BundleReader::symbols(size_t module) const {
  std::vector<SymbolRecord> out;
  if (module >= impl_->symbols.size() || impl_->symbols[module].p == nullptr) return out;
  auto ix = impl_->symbol_index(module, copy_budget(size_));
  if (!ix) return ix.error();
  uint64_t budget = copy_budget(size_);
  out.reserve(ix.value()->syms.size());
  for (const ModuleIndex::Sym& e : ix.value()->syms) {
    const std::string_view name = sym_name(*ix.value(), e.name);
    if (name.size() > budget) return bad("module %zu: symbol names exceed the copy budget of this bundle", module);
    budget -= name.size();
    out.push_back({e.start, e.end - e.start, e.sym_start, std::string(name)});
  }
  return out;
}

namespace {

/// A module's call-site block (layout kSecCallSites, CallCtx) from `c`: format 5 varints (ByteSrc),
/// format 6 codes (BitSrc: a target or a name's address may be a function's index). `string` copies
/// out a name by its string index, checked.
template <class Src, class Str>
Status read_call_block(Src& c, bool v6, size_t module, const BundleReader::Impl::CallBlock& b, Str string,
                       CallSiteTable& out) {
  const char* unit = v6 ? "bits" : "bytes";
  const uint8_t known = kCallSiteTail | kCallSiteTarget | kCallSiteName | (v6 ? kCallSiteFunction : 0);
  std::vector<std::pair<size_t, uint64_t>> by_index;  // format 6: sites whose target is function #i
  out.sites.reserve(b.nsites);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < b.nsites; i++) {
    const uint64_t delta = c.u(kCtxCsDelta);
    const uint8_t flags = c.sym(kCtxCsFlags);
    if (c.ok() && ((flags & ~known) != 0 || std::popcount(static_cast<unsigned>(
                                                 flags & (kCallSiteTarget | kCallSiteName | kCallSiteFunction))) > 1))
      return bad("module %zu: call site %u at 0x%" PRIx64 " has unknown flags 0x%x", module, i, prev + delta, flags);
    const int64_t to = (flags & kCallSiteTarget) != 0 ? c.s(kCtxCsTarget) : 0;
    const uint64_t fi = (flags & kCallSiteFunction) != 0 ? c.u(kCtxCsFunc) : 0;
    const uint64_t name = (flags & kCallSiteName) != 0 ? c.u(kCtxCsName) : 0;
    if (!c.ok()) return bad("module %zu: call site %u of %u is cut short or over-long", module, i, b.nsites);
    if ((i > 0 && delta == 0) || delta > UINT64_MAX - prev)
      return bad("module %zu: call site %u: return pc 0x%" PRIx64 " + 0x%" PRIx64 " is not after the previous one",
                 module, i, prev, delta);
    CallSiteRecord r;
    r.return_pc = prev + delta;
    r.tail_call = (flags & kCallSiteTail) != 0;
    r.has_target = (flags & (kCallSiteTarget | kCallSiteFunction)) != 0;
    r.target = r.return_pc + static_cast<uint64_t>(to);  // modulo 2^64, as written
    if ((flags & kCallSiteFunction) != 0) {
      if (fi >= b.nfuncs)
        return bad("module %zu: call site %u at 0x%" PRIx64 " calls function %" PRIu64 " of %u", module, i, r.return_pc,
                   fi, b.nfuncs);
      by_index.emplace_back(out.sites.size(), fi);
    }
    if ((flags & kCallSiteName) != 0)
      if (Status st = string(name, "call site", r.return_pc, &r.target_name); !st) return st;
    out.sites.push_back(r);
    prev = r.return_pc;
  }
  out.functions.reserve(b.nfuncs);
  prev = 0;
  for (uint32_t i = 0; i < b.nfuncs; i++) {
    const uint64_t delta = c.u(kCtxCfDelta), nranges = c.u(kCtxCfRanges);
    if (!c.ok() || (i > 0 && delta == 0) || delta > UINT64_MAX - prev)
      return bad("module %zu: call-site function %u of %u: cut short, or entry 0x%" PRIx64 " + 0x%" PRIx64
                 " not after the previous one", module, i, b.nfuncs, prev, delta);
    CallFunctionRecord f;
    f.entry = prev + delta;
    if (nranges == 0 || nranges > kMaxCallFunctionRanges || nranges > c.units_left() / 2)
      return bad("module %zu: call-site function at 0x%" PRIx64 " has %" PRIu64 " ranges (1..%" PRIu64
                 ", 2 %s each, %" PRIu64 " %s left)", module, f.entry, nranges, kMaxCallFunctionRanges, unit,
                 c.units_left(), unit);
    uint64_t at = f.entry;
    bool has_entry = false;
    for (uint64_t k = 0; k < nranges; k++) {
      uint64_t low = 0;
      if (k == 0) {
        low = f.entry + static_cast<uint64_t>(c.s(kCtxCfLow));
      } else {
        const uint64_t gap = c.u(kCtxCfGap);
        low = at + gap;
        if (gap > UINT64_MAX - at) return bad("module %zu: call-site function at 0x%" PRIx64 ": range %" PRIu64
                                              " wraps around", module, f.entry, k);
      }
      const uint64_t len = c.u(kCtxCfLen);
      if (!c.ok() || len == 0 || len > UINT64_MAX - low)
        return bad("module %zu: call-site function at 0x%" PRIx64 ": range %" PRIu64 " at 0x%" PRIx64 " length 0x%" PRIx64
                   " is cut short, empty or wraps around", module, f.entry, k, low, len);
      f.ranges.emplace_back(low, low + len);
      has_entry |= f.entry >= low && f.entry < low + len;
      at = low + len;
    }
    if (!has_entry)
      return bad("module %zu: call-site function's entry 0x%" PRIx64 " is in none of its ranges", module, f.entry);
    const uint64_t ntails = c.u(kCtxCfTails);
    if (!c.ok() || ntails > c.units_left())
      return bad("module %zu: call-site function at 0x%" PRIx64 " has %" PRIu64 " tail calls (%" PRIu64 " %s left)",
                 module, f.entry, ntails, c.units_left(), unit);
    // Format 6: each tail's site index from the previous one's, the first from the first site at or
    // after the function's lowest address.
    uint64_t si = static_cast<uint64_t>(
        std::lower_bound(out.sites.begin(), out.sites.end(), f.ranges[0].first,
                         [](const CallSiteRecord& x, uint64_t a) { return x.return_pc < a; }) -
        out.sites.begin());
    for (uint64_t k = 0; k < ntails; k++) {
      si = v6 ? si + static_cast<uint64_t>(c.s(kCtxCfTail)) : c.u(kCtxCfTail);  // modulo 2^64: checked below
      if (!c.ok() || si >= out.sites.size() || !out.sites[si].tail_call)
        return bad("module %zu: call-site function at 0x%" PRIx64 ": tail call %" PRIu64 " names site %" PRIu64
                   " of %zu, not a tail-call site", module, f.entry, k, si, out.sites.size());
      f.tails.push_back(out.sites[si].return_pc);
    }
    out.functions.push_back(std::move(f));
    prev = out.functions.back().entry;
  }
  for (const auto& [site, fi] : by_index) out.sites[site].target = out.functions[fi].entry;
  out.symbols.reserve(b.nnames);
  for (uint32_t i = 0; i < b.nnames; i++) {
    const uint64_t si = c.u(kCtxCnName);
    const uint8_t head = c.sym(kCtxCnHead);
    const bool head_ok = head <= (v6 ? (1 | kCallNameFunction) : 1);
    const uint64_t addr = head_ok && (head & kCallNameFunction) != 0 ? c.u(kCtxCnFunc) : c.u(kCtxCnAddr);
    if (!c.ok() || !head_ok)
      return bad("module %zu: call-site name %u of %u is cut short, or its global byte %u is not 0 or 1", module, i,
                 b.nnames, head);
    if ((head & kCallNameFunction) != 0 && addr >= b.nfuncs)
      return bad("module %zu: call-site name %u is at function %" PRIu64 " of %u", module, i, addr, b.nfuncs);
    CallSymbolRecord y;
    y.addr = (head & kCallNameFunction) != 0 ? out.functions[addr].entry : addr;
    if (Status st = string(si, "call-site name", y.addr, &y.name); !st) return st;
    if (y.name.empty() || (i > 0 && y.name <= out.symbols.back().name))
      return bad("module %zu: call-site name %u '%s' is empty or not after '%s'", module, i, y.name.c_str(),
                 i > 0 ? out.symbols.back().name.c_str() : "");
    y.global = (head & 1) != 0;
    out.symbols.push_back(std::move(y));
  }
  if (!c.at_end())
    return bad("module %zu: %" PRIu64 " %s after its %u call sites, %u functions and %u names", module, c.units_left(),
               unit, b.nsites, b.nfuncs, b.nnames);
  return {};
}

}  // namespace

Result<CallSiteTable> BundleReader::call_sites(size_t module) const {
  CallSiteTable out;
  if (module >= impl_->calls.size() || impl_->calls[module].p == nullptr) return out;
  const Impl::CallBlock& b = impl_->calls[module];
  auto ix = impl_->module_index(module);  // the string table, for names
  if (!ix) return ix.error();
  uint64_t budget = copy_budget(size_);
  auto string = [&](uint64_t si, const char* what, uint64_t where, std::string* out) -> Status {
    if (si >= ix.value()->offs.size())
      return bad("module %zu: %s at 0x%" PRIx64 " names string %" PRIu64 " of %zu", module, what, where, si,
                 ix.value()->offs.size());
    const uint64_t n = str_len(*ix.value(), static_cast<uint32_t>(si));
    if (n > budget) return bad("module %zu: call-site names exceed the copy budget of this bundle", module);
    budget -= n;
    *out = std::string(str_at(*ix.value(), static_cast<uint32_t>(si)));
    return {};
  };
  Status st;
  if (impl_->meta[module].version >= 6) {
    entropy::BitReader r(b.p, b.p + b.nbytes);
    std::vector<entropy::Code> codes;
    if (auto s = read_block_codes(r, kCallCtxCount, module, "call-site", codes); !s) return s.error();
    BitSrc c{r, codes.data()};
    st = read_call_block(c, true, module, b, string, out);
  } else {
    ByteSrc c{Cursor{b.p, b.p + b.nbytes}};
    st = read_call_block(c, false, module, b, string, out);
  }
  if (!st) return st.error();
  std::vector<std::pair<uint64_t, uint64_t>> all;  // every function's ranges: none may overlap
  for (const CallFunctionRecord& f : out.functions) all.insert(all.end(), f.ranges.begin(), f.ranges.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); i++)
    if (all[i - 1].second > all[i].first)
      return bad("module %zu: call-site function ranges 0x%" PRIx64 "..0x%" PRIx64 " and 0x%" PRIx64 "..0x%" PRIx64
                 " overlap", module, all[i - 1].first, all[i - 1].second, all[i].first, all[i].second);
  return out;
}

bool BundleReader::from_symtab(size_t module, uint64_t rel_addr) const {
  if (module >= impl_->symtab.size() || module >= impl_->meta.size()) return false;
  const auto [p, cnt] = impl_->symtab[module];
  const uint64_t base = impl_->meta[module].base;
  if (p == nullptr || rel_addr < base || rel_addr - base >= (uint64_t{1} << 32)) return false;
  const uint64_t a = rel_addr - base;
  uint32_t lo = 0, hi = cnt;  // first interval starting after a
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (ld32(p + uint64_t{mid} * 8) <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return false;
  const uint8_t* e = p + uint64_t{lo - 1} * 8;
  return a < uint64_t{ld32(e)} + ld32(e + 4);
}

namespace {

/// The inline chain at `rel_addr` from one group (BundleReader::lookup), for either format.
template <class G>
Status lookup_group(G& g, size_t module, uint64_t gstart, uint64_t rel_addr, const ModuleIndex& ix,
                    std::vector<FrameView>& out) {
  const uint32_t nstr = static_cast<uint32_t>(ix.offs.size());
  uint64_t nd = 0;
  if (auto s = g.begin(module, gstart, &nd); !s) return s;
  // Frames are appended as their depth is found; a deeper hit replaces the position of the
  // frame above it by its call site.
  out.reserve(8);
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t count = 0;
    bool continues = false;
    if (auto s = g.next_list(module, gstart, d, &count, &continues); !s) return s;
    auto& src = g.src();
    Rec r;
    uint64_t prev_end = gstart;
    bool hit = false;
    uint64_t k = 0;
    for (; k < count; k++) {
      if (auto s = read_record(src, module, gstart, d, prev_end, nstr, r); !s) return s;
      if (r.start > rel_addr) break;
      if (rel_addr < r.end) {
        hit = true;
        break;
      }
      prev_end = r.end;
    }
    if (!hit) break;
    if constexpr (G::kSequential) {  // the next list starts after this one's last record
      if (d + 1 < nd && !g.skip_rest()) {
        Rec t = r;
        for (k++; k < count; k++) {
          const uint64_t pe = t.end;
          if (auto s = read_record(src, module, gstart, d, pe, nstr, t); !s) return s;
        }
      }
    }
    if (!out.empty()) {
      FrameView& caller = out.back();
      caller.file = str_at(ix, r.call_file);
      caller.line = r.call_line;
      caller.column = r.call_column;
    }
    out.push_back({str_at(ix, r.fn), str_at(ix, r.file), r.line, r.column});
  }
  return {};
}

/// Every piece of one group per depth (`g` and `cont` sized by the group), for either format.
template <class G>
Status decode_group(G& gr, size_t module, uint64_t gstart, uint32_t nstr, std::vector<std::vector<Rec>>& g,
                    std::vector<bool>& cont) {
  uint64_t nd = 0;
  if (auto s = gr.begin(module, gstart, &nd); !s) return s;
  g.assign(nd, {});
  cont.assign(nd, false);
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t count = 0;
    bool continues = false;
    if (auto s = gr.next_list(module, gstart, d, &count, &continues); !s) return s;
    cont[d] = continues;
    // Pieces are bounded by the group's bytes (at least 2 bits each); the records they make
    // are counted against the module record at the end.
    Rec r;
    uint64_t prev_end = gstart;
    auto& src = gr.src();
    for (uint64_t k = 0; k < count; k++) {
      if (auto s = read_record(src, module, gstart, d, prev_end, nstr, r); !s) return s;
      g[d].push_back(r);
      prev_end = r.end;
    }
    if (auto s = gr.end_list(module, gstart, d); !s) return s;
  }
  return gr.finish(module, gstart);
}

/// Calls f(group) with the group of bytes `c` read in the module's format.
template <class F>
Status with_group(const ModuleMeta& m, const ModuleIndex& ix, const Cursor& c, F f) {
  if (m.version == 2) {
    GroupV2 g{c};
    return f(g);
  }
  GroupV3 g{BitSrc{entropy::BitReader(c.p, c.end), ix.range_codes.data(), m.version >= 4}};
  return f(g);
}

}  // namespace

namespace {

/// A group of an index entry: its start and its bytes.
struct SubGroup {
  uint64_t start;
  Cursor c;
};

/// The groups of index entry `e` (bytes `c`, start `start`): formats 2 and 3 one, format 4 the
/// entry's header (uleb groups − 1, then per further group uleb start delta and uleb bytes of the
/// one before), checked: 1..kGroupsPerEntry groups, starts rising below `limit` (the next entry's
/// start), every group at least a byte.
Status entry_groups(const ModuleMeta& m, size_t mi, uint64_t start, Cursor c, uint64_t limit, SubGroup* out,
                    size_t* n) {
  if (m.version <= 3) {
    out[0] = {start, c};
    *n = 1;
    return {};
  }
  const uint64_t k = c.uleb() + 1;
  if (!c.ok() || k == 0 || k > kGroupsPerEntry)
    return bad("module %zu: group entry at 0x%" PRIx64 " holds %" PRIu64 " groups (1..%zu)", mi, start, k,
               kGroupsPerEntry);
  uint64_t deltas[kGroupsPerEntry] = {}, bytes[kGroupsPerEntry] = {};
  for (uint64_t i = 1; i < k; i++) {
    deltas[i] = c.uleb();
    bytes[i - 1] = c.uleb();
  }
  if (!c.ok()) return bad("module %zu: group entry at 0x%" PRIx64 " has a truncated header", mi, start);
  uint64_t s = start;
  for (uint64_t i = 0; i < k; i++) {
    if (i > 0) {
      if (deltas[i] == 0 || deltas[i] >= limit - s)
        return bad("module %zu: group %" PRIu64 " of the entry at 0x%" PRIx64 " starts %" PRIu64
                   " bytes after the one before, not within 1..%" PRIu64, mi, i, start, deltas[i], limit - s - 1);
      s += deltas[i];
    }
    const uint64_t len = i + 1 < k ? bytes[i] : c.left();
    if (len == 0 || len > c.left())
      return bad("module %zu: group %" PRIu64 " of the entry at 0x%" PRIx64 " has %" PRIu64 " bytes of %zu left", mi, i,
                 start, len, c.left());
    out[i] = {s, Cursor{c.p, c.p + len}};
    c.p += len;
  }
  *n = static_cast<size_t>(k);
  return {};
}

}  // namespace

/// The group whose addresses hold `rel_addr` (`*found` false: none): its start and bytes, and where
/// the next group starts (`*next`; UINT64_MAX after the last).
static Status find_group(const BundleReader::Impl& im, size_t module, uint64_t rel_addr, SubGroup* out, uint64_t* next,
                         bool* found) {
  const ModuleMeta& m = im.meta[module];
  *found = false;
  Entry e;
  if (rel_addr < m.base || !im.find_entry(kSecFuncIndex, m.findex, m.fdata, rel_addr - m.base, &e)) return {};
  SubGroup sub[kGroupsPerEntry];
  size_t n = 0;
  // Group starts lie below the next entry's (then the binary search found the right entry).
  const uint64_t limit = e.i + 1 < m.findex.count ? m.base + ld32(im.idx_entry(kSecFuncIndex, m.findex, e.i + 1))
                                                  : UINT64_MAX;
  if (auto s = entry_groups(m, module, m.base + e.start, im.data_cursor(kSecFuncData, m.fdata, e), limit, sub, &n); !s)
    return s;
  size_t k = 0;
  while (k + 1 < n && sub[k + 1].start <= rel_addr) k++;
  *out = sub[k];
  *next = k + 1 < n ? sub[k + 1].start : limit;
  *found = true;
  return {};
}

namespace {

/// Format 8: the record of one depth holding `a` (relative to the module's base), or null.
const Range8* find_range8(const std::vector<Range8>& list, uint64_t a) {
  auto it = std::upper_bound(list.begin(), list.end(), a, [](uint64_t x, const Range8& r) { return x < r.start; });
  if (it == list.begin()) return nullptr;
  --it;
  return a < uint64_t{it->start} + it->len ? &*it : nullptr;
}

Rec rec_from8(const Range8& r, uint64_t base) {
  Rec x;
  x.start = base + r.start;
  x.end = x.start + r.len;
  x.fn = r.fn;
  x.file = r.file;
  x.line = r.line;
  x.column = r.col;
  x.call_file = r.call_file;
  x.call_line = r.call_line;
  x.call_column = r.call_col;
  return x;
}

}  // namespace

Result<std::vector<FrameView>> BundleReader::lookup(size_t module, uint64_t rel_addr) const {
  auto ixr = impl_->range_index(module);
  if (!ixr) return std::move(ixr).error();
  const ModuleIndex& ix = *ixr.value();
  std::vector<FrameView> out;
  if (const ModuleMeta& m = impl_->meta[module]; m.version >= 8) {  // a binary search per depth
    if (rel_addr < m.base || rel_addr - m.base > UINT32_MAX) return out;
    for (const std::vector<Range8>& list : ix.r8) {
      const Range8* r = find_range8(list, rel_addr - m.base);
      if (r == nullptr) break;
      if (!out.empty()) {
        FrameView& caller = out.back();
        caller.file = str_at(ix, r->call_file);
        caller.line = r->call_line;
        caller.column = r->call_col;
      }
      out.push_back({str_at(ix, r->fn), str_at(ix, r->file), r->line, r->col});
    }
    return out;
  }
  SubGroup g;
  uint64_t next = 0;
  bool found = false;
  if (auto s = find_group(*impl_, module, rel_addr, &g, &next, &found); !s) return s.error();
  if (!found) return out;
  const Status st = with_group(impl_->meta[module], ix, g.c,
                               [&](auto& gr) { return lookup_group(gr, module, g.start, rel_addr, ix, out); });
  if (!st) return st.error();
  return out;
}

namespace {

/// The depth-0 records of one group, kept while format 6's symbol names are resolved in address
/// order (each group is decoded once).
struct Depth0Cache {
  uint64_t lo = 1, hi = 0;  // the group's addresses [lo, hi): none yet
  std::vector<Rec> recs;
  uint64_t run_lo = 1, run_end = 0;  // the last run of one function walked (kSymRun): [run_lo, run_end)
};

/// The depth-0 record covering `addr` in `cache` (null: none), its group decoded first unless cached.
Status depth0_record(const BundleReader::Impl& im, size_t module, const ModuleIndex& ix, uint64_t addr,
                     Depth0Cache& cache, const Rec** out) {
  *out = nullptr;
  if (addr < cache.lo || addr >= cache.hi) {
    cache.recs.clear();
    cache.lo = 1;
    cache.hi = 0;
    if (const ModuleMeta& m = im.meta[module]; m.version >= 8) {  // the record itself (decoded in full)
      const Range8* r = ix.r8.empty() || addr < m.base ? nullptr : find_range8(ix.r8[0], addr - m.base);
      if (r == nullptr) return {};
      cache.recs.push_back(rec_from8(*r, m.base));
      cache.lo = cache.recs[0].start;
      cache.hi = cache.recs[0].end;
      *out = &cache.recs[0];
      return {};
    }
    SubGroup g;
    uint64_t next = 0;
    bool in_group = false;
    if (auto s = find_group(im, module, addr, &g, &next, &in_group); !s || !in_group) return s;
    const uint32_t nstr = static_cast<uint32_t>(ix.offs.size());
    const Status st = with_group(im.meta[module], ix, g.c, [&](auto& gr) -> Status {
      uint64_t nd = 0, count = 0;
      bool continues = false;
      if (auto s = gr.begin(module, g.start, &nd); !s) return s;
      if (auto s = gr.next_list(module, g.start, 0, &count, &continues); !s) return s;
      Rec r;
      uint64_t prev_end = g.start;
      for (uint64_t k = 0; k < count; k++) {
        if (auto s = read_record(gr.src(), module, g.start, 0, prev_end, nstr, r); !s) return s;
        cache.recs.push_back(r);
        prev_end = r.end;
      }
      return {};
    });
    if (!st) {
      cache.recs.clear();
      return st;
    }
    cache.lo = g.start;
    cache.hi = next;
  }
  auto it = std::upper_bound(cache.recs.begin(), cache.recs.end(), addr,
                             [](uint64_t a, const Rec& r) { return a < r.start; });
  if (it == cache.recs.begin() || addr >= std::prev(it)->end) return {};
  *out = &*std::prev(it);
  return {};
}

/// Where the run of contiguous depth-0 records with the function of the one covering `addr` ends
/// (kSymRun; `*end` 0: no record covers `addr`), across groups. The last run is kept: records rise and
/// do not overlap, so each run is walked once.
Status depth0_run_end(const BundleReader::Impl& im, size_t module, const ModuleIndex& ix, uint64_t addr,
                      Depth0Cache& cache, uint64_t* end) {
  *end = 0;
  if (addr >= cache.run_lo && addr < cache.run_end) {
    *end = cache.run_end;
    return {};
  }
  const Rec* r = nullptr;
  if (auto s = depth0_record(im, module, ix, addr, cache, &r); !s || r == nullptr) return s;
  const uint32_t fn = r->fn;
  // One function: equal names (a list's first record leaves "" unset, kNone, where a later one may
  // name the table's "").
  auto same = [&](const Rec& x) { return x.fn == fn || str_at(ix, x.fn) == str_at(ix, fn); };
  uint64_t e = r->end;
  for (size_t i = static_cast<size_t>(r - cache.recs.data());;) {
    if (i + 1 < cache.recs.size()) {
      if (cache.recs[i + 1].start != e || !same(cache.recs[i + 1])) break;
      e = cache.recs[++i].end;
      continue;
    }
    if (e != cache.hi) break;  // the run reaches its group's end: it may go on in the next group
    const Rec* n = nullptr;
    if (auto s = depth0_record(im, module, ix, e, cache, &n); !s) return s;
    if (n == nullptr || n->start != e || !same(*n)) break;
    i = static_cast<size_t>(n - cache.recs.data());
    e = n->end;
  }
  cache.run_lo = addr;
  cache.run_end = e;
  *end = e;
  return {};
}

}  // namespace

/// Format 6's symbol-name block of a module (layout SymCtx): its codes, then the records, each name
/// resolved from the module's depth-0 ranges (kSymSame, kSymEdited) or the string table; every value
/// checked, names made by edits counted against `budget`.
static Status decode_coded_symbols(const BundleReader::Impl& im, size_t mi, ModuleIndex& ix, uint64_t budget) {
  const BundleReader::Impl::SymBlock& b = im.symbols[mi];
  const uint32_t nstr = static_cast<uint32_t>(ix.offs.size());
  entropy::BitReader r(b.p, b.p + b.nbytes);
  std::vector<entropy::Code> codes;
  if (auto s = read_block_codes(r, kSymCtxCount, mi, "symbol-name", codes); !s) return s;
  ix.syms.reserve(b.n);
  Depth0Cache cache;
  uint64_t prev_end = 0;
  unsigned prev_kind = kSymKinds;
  for (uint32_t i = 0; i < b.n; i++) {
    const unsigned head = codes[kCtxSymHead + prev_kind].get(r);
    const unsigned kind = head & 3;
    if (r.bad() || (head & ~(3u | kSymBack | kSymRun)) != 0)
      return bad("module %zu: symbol-name record %u of %u: head %u (kind | back << 2 | run << 3) or cut short", mi, i,
                 b.n, head);
    const uint64_t gap = codes[kCtxSymGap].get_uint(r);
    uint64_t length = (head & kSymRun) != 0 ? 0 : codes[kCtxSymLen + kind].get_uint(r);
    const uint64_t back = (head & kSymBack) != 0 ? codes[kCtxSymBackOff].get_uint(r) : 0;
    uint64_t str = 0, cut = 0;
    if (kind == kSymString) str = codes[kCtxSymName].get_uint(r);
    if (kind == kSymEdited) cut = codes[kCtxSymCut].get_uint(r);
    if (kind == kSymJoined) cut = codes[kCtxSymPrefix].get_uint(r);  // the prefix's string index
    if (kind == kSymEdited || kind == kSymJoined) str = codes[kCtxSymSuffix].get_uint(r);
    if (r.bad()) return bad("module %zu: symbol-name record %u of %u is cut short", mi, i, b.n);
    if (gap > UINT64_MAX - prev_end)
      return bad("module %zu: symbol-name record %u at +0x%" PRIx64 " after 0x%" PRIx64 " wraps around", mi, i, gap,
                 prev_end);
    const uint64_t start = prev_end + gap;
    if ((head & kSymRun) != 0) {
      uint64_t end = 0;
      if (auto s = depth0_run_end(im, mi, ix, start, cache, &end); !s) return s;
      if (end == 0)
        return bad("module %zu: symbol-name record %u at 0x%" PRIx64 " runs to the end of the range there, but none"
                   " covers it", mi, i, start);
      length = end - start;
    }
    if (length == 0 || length > UINT64_MAX - start)
      return bad("module %zu: symbol-name record %u at 0x%" PRIx64 " length 0x%" PRIx64 " is empty or wraps around", mi,
                 i, start, length);
    if ((head & kSymBack) != 0 && (back == 0 || back > start))
      return bad("module %zu: symbol-name record %u at 0x%" PRIx64 ": its symbol starts 0x%" PRIx64 " before it", mi, i,
                 start, back);
    if (kind != kSymSame && (str >= nstr || (kind == kSymJoined && cut >= nstr)))
      return bad("module %zu: symbol-name record %u at 0x%" PRIx64 " names string %" PRIu64 " of %u", mi, i, start,
                 str >= nstr ? str : cut, nstr);
    uint32_t name = static_cast<uint32_t>(str);
    if (kind != kSymString) {
      std::string_view f;  // what the suffix is appended to
      if (kind == kSymJoined) {
        f = str_at(ix, static_cast<uint32_t>(cut));
        cut = 0;
      } else {
        const Rec* rec = nullptr;
        if (auto s = depth0_record(im, mi, ix, start, cache, &rec); !s) return s;
        if (rec == nullptr)
          return bad("module %zu: symbol-name record %u at 0x%" PRIx64 " (kind %u) names the range there, but none"
                     " covers it", mi, i, start, kind);
        name = rec->fn;
        f = str_at(ix, rec->fn);
      }
      if (kind != kSymSame) {
        const std::string_view suffix = str_at(ix, static_cast<uint32_t>(str));
        if (cut > f.size() || f.size() - cut + suffix.size() > kMaxStringBytes || f.size() - cut + suffix.size() > budget)
          return bad("module %zu: symbol-name record %u at 0x%" PRIx64 " cuts %" PRIu64 " bytes of the %zu of '%.*s' and"
                     " appends %zu (at most %zu bytes, within the copy budget)", mi, i, start, cut, f.size(),
                     static_cast<int>(std::min<size_t>(f.size(), 200)), f.data(), suffix.size(), kMaxStringBytes);
        budget -= f.size() - cut + suffix.size();
        std::string& e = ix.edited.emplace_back(f.substr(0, f.size() - cut));
        e += suffix;
        name = nstr + static_cast<uint32_t>(ix.edited.size() - 1);
      }
    }
    ix.syms.push_back({start, start + length, start - back, name});
    prev_end = start + length;
    prev_kind = kind;
  }
  if (!r.at_padded_end())
    return bad("module %zu: %" PRIu64 " bits after its %u symbol-name records (or nonzero padding)", mi, r.bits_left(),
               b.n);
  return {};
}

/// Calls f(src, count) with the pads of the block of index entry `e` in the module's format:
/// formats 2 and 3 varints until the block's bytes end (count unbounded), format 4 codes, `count`
/// pads (kPadBlock a block, the last one the rest; checked at first use).
template <class F>
static Status with_pad_block(const BundleReader::Impl& im, const ModuleMeta& m, const ModuleIndex& ix, const Entry& e,
                             F f) {
  const Cursor c = im.data_cursor(kSecPadData, m.pdata, e);
  if (m.version <= 3) {
    ByteSrc src{c};
    return f(src, UINT64_MAX);
  }
  BitSrc src{entropy::BitReader(c.p, c.end), ix.pad_codes.data()};
  return f(src, std::min<uint64_t>(kPadBlock, m.npads - e.i * kPadBlock));
}

Result<std::vector<FrameView>> BundleReader::return_pad(size_t module, uint64_t addr) const {
  auto ixr = impl_->module_index(module);
  if (!ixr) return std::move(ixr).error();
  const ModuleIndex& ix = *ixr.value();
  const ModuleMeta& m = impl_->meta[module];
  std::vector<FrameView> out;
  Entry e;
  if (addr < m.base || !impl_->find_entry(kSecPadIndex, m.pindex, m.pdata, addr - m.base, &e)) return out;
  bool implicit = false;  // the pad at `addr` is implicit: its chain is lookup(addr - 1)
  const Status st = with_pad_block(*impl_, m, ix, e, [&](auto& c, uint64_t count) -> Status {
    uint64_t prev = m.base + e.start;
    std::vector<PadFrame> frames;
    for (uint64_t n = 0; n < count && c.more(); n++) {
      PadHead h;
      if (auto s = read_pad_head(c, module, prev, &h); !s) return s;
      prev = h.addr;
      if (h.explicit_frames) {
        if (auto s = read_pad_frames(c, module, h.addr, static_cast<uint32_t>(ix.offs.size()), &frames); !s) return s;
      }
      if (h.addr < addr) continue;
      if (h.addr > addr) break;
      if (!h.explicit_frames) {
        if (h.addr == 0) return bad("module %zu: implicit return pad at address 0", module);
        implicit = true;
        return {};
      }
      out.resize(frames.size());
      for (size_t i = 0; i < frames.size(); i++)
        out[i] = {str_at(ix, frames[i].fn), str_at(ix, frames[i].file), frames[i].line, frames[i].column};
      return {};
    }
    return {};
  });
  if (!st) return st.error();
  if (implicit) return lookup(module, addr - 1);
  return out;
}

Result<std::vector<ReturnPadRecord>> BundleReader::return_pads(size_t module) const {
  auto ixr = impl_->module_index(module);
  if (!ixr) return std::move(ixr).error();
  const ModuleIndex& ix = *ixr.value();
  const ModuleMeta& m = impl_->meta[module];
  std::vector<ReturnPadRecord> out;
  std::vector<PadFrame> frames;
  uint64_t names = 0;  // bytes of names copied, against copy_budget()
  auto over_budget = [&](uint64_t addr) {
    return bad("module %zu: return pads up to 0x%" PRIx64 " name more than %" PRIu64
               " bytes of strings (1 GiB + 64 x the bundle's %zu bytes)", module, addr, copy_budget(size_), size_);
  };
  for (uint64_t b = 0; b < m.pindex.count; b++) {
    Entry e;
    impl_->entry(kSecPadIndex, m.pindex, m.pdata, b, &e);
    const Status st = with_pad_block(*impl_, m, ix, e, [&](auto& c, uint64_t count) -> Status {
      uint64_t prev = m.base + e.start;
      bool first = true;
      for (uint64_t n = 0; n < count && c.more(); n++) {
        PadHead h;
        if (auto s = read_pad_head(c, module, prev, &h); !s) return s;
        if ((first && h.addr != prev) || (!first && h.addr == prev) || (!out.empty() && h.addr <= out.back().addr))
          return bad("module %zu: return pad 0x%" PRIx64 " is out of order", module, h.addr);
        first = false;
        prev = h.addr;
        if (out.size() >= m.npads)
          return bad("module %zu: more return pads than the %" PRIu64 " declared", module, m.npads);
        ReturnPadRecord& p = out.emplace_back();
        p.addr = h.addr;
        if (h.explicit_frames) {
          if (auto s = read_pad_frames(c, module, h.addr, static_cast<uint32_t>(ix.offs.size()), &frames); !s) return s;
          for (const PadFrame& f : frames) {
            names += str_len(ix, f.fn) + str_len(ix, f.file);
            if (names > copy_budget(size_)) return over_budget(h.addr);
            p.frames.push_back({std::string(str_at(ix, f.fn)), std::string(str_at(ix, f.file)), f.line, f.column});
          }
        } else {
          if (h.addr == 0) return bad("module %zu: implicit return pad at address 0", module);
          auto ch = lookup(module, h.addr - 1);
          if (!ch) return std::move(ch).error();
          if (ch->empty())
            return bad("module %zu: implicit return pad 0x%" PRIx64 " has no range before it", module, h.addr);
          for (const FrameView& f : ch.value()) {
            names += f.function.size() + f.file.size();
            if (names > copy_budget(size_)) return over_budget(h.addr);
            p.frames.push_back({std::string(f.function), std::string(f.file), f.line, f.column});
          }
        }
      }
      if (!c.at_end())
        return bad("module %zu: return-pad block at 0x%" PRIx64 " has bits after its pads (or nonzero padding)", module,
                   m.base + e.start);
      return {};
    });
    if (!st) return st.error();
  }
  if (out.size() != m.npads)
    return bad("module %zu: %zu return pads, the module record says %" PRIu64, module, out.size(), m.npads);
  return out;
}

namespace {

/// Decodes the rows of one row block in order, each checked against the last (the first at the
/// block's start, each next one past it), calling visit(row) until it returns false. Format 2:
/// rows until the block's bytes end; format 3: `nrows` rows, then only zero padding.
template <class Src, class Visit>
Status decode_rows(Src& c, size_t module, uint64_t start, uint64_t nrows, Visit visit) {
  uint64_t prev = start;
  UnwindRowRecord r;
  r.kind = 0;
  bool first = true;
  uint8_t prev_head = 0;
  unsigned cls = 0;  // format 4: the previous row's class (0: none yet)
  // Format 2: each row consumes at least 2 bytes, bounded by the block; format 3: nrows.
  for (uint64_t n = 0; n < nrows && c.more(); n++) {
    UnwindRowRecord next = r;
    if (first) next = UnwindRowRecord{};
    if (auto s = read_row(c, module, prev, prev_head, cls, next); !s) return s.error();
    if ((first && next.pc != prev) || (!first && next.pc == prev))
      return bad("module %zu: unwind row 0x%" PRIx64 " is out of order", module, next.pc);
    first = false;
    if (!visit(next)) return {};
    prev = next.pc;
    r = next;
  }
  if constexpr (!Src::kCfaDelta) {
    return {};
  } else {
    if (!c.r.at_padded_end())
      return bad("module %zu: unwind-row block at 0x%" PRIx64 " has %" PRIu64 " bits after its %" PRIu64
                 " rows (or nonzero padding)", module, start, c.r.bits_left(), nrows);
    return {};
  }
}

}  // namespace

/// Format 7: the `nrows` rows of a block starting at `start`, each a table row reached from the
/// previous one by its rank among that one's successors; then only zero padding.
template <class Visit>
static Status decode_rows7(entropy::BitReader r, const ModuleIndex& ix, size_t module, uint64_t start, uint64_t nrows,
                    Visit visit) {
  const entropy::Code* codes = ix.row_blk_codes.data();
  uint64_t t = codes[kCtx7First].get_uint(r);
  if (r.bad() || t >= ix.row_table.size())
    return bad("module %zu: unwind-row block at 0x%" PRIx64 " starts with table row %" PRIu64 " of %zu (or is cut short)",
               module, start, t, ix.row_table.size());
  UnwindRowRecord row = ix.row_table[t];
  row.pc = start;
  if (!visit(row)) return {};
  for (uint64_t i = 1; i < nrows; i++) {
    const uint32_t lo = ix.succ_off[t], cnt = ix.succ_off[t + 1] - lo;
    if (cnt == 0)
      return bad("module %zu: unwind row after 0x%" PRIx64 " follows table row %" PRIu64 ", which has no successors", module,
                 row.pc, t);
    const uint64_t rank = cnt > 1 ? codes[kCtx7Rank + rank_bucket7(cnt)].get_uint(r) : 0;
    if (r.bad() || rank >= cnt)
      return bad("module %zu: unwind row after 0x%" PRIx64 " is successor %" PRIu64 " of %u (or is cut short)", module,
                 row.pc, rank, cnt);
    const uint64_t delta = codes[ix.succ_ctx[lo + rank]].get_uint(r);
    if (r.bad() || delta == 0 || delta > UINT64_MAX - row.pc)
      return bad("module %zu: unwind row after 0x%" PRIx64 " has pc delta %" PRIu64 " (zero, wrapping or cut short)", module,
                 row.pc, delta);
    t = ix.succ[lo + rank];
    const uint64_t pc = row.pc + delta;
    row = ix.row_table[t];
    row.pc = pc;
    if (!visit(row)) return {};
  }
  if (!r.at_padded_end())
    return bad("module %zu: unwind-row block at 0x%" PRIx64 " has %" PRIu64 " bits after its %" PRIu64
               " rows (or nonzero padding)", module, start, r.bits_left(), nrows);
  return {};
}

/// decode_rows over the block of index entry `e`, in the module's format.
template <class Visit>
static Status decode_row_block(const BundleReader::Impl& im, const ModuleMeta& m, const ModuleIndex& ix, size_t module,
                               const Entry& e, Visit visit) {
  const Cursor c = im.data_cursor(kSecRowData, m.rdata, e);
  if (m.version >= 7) {
    const uint64_t nrows = std::min<uint64_t>(kRowBlock3, m.nrows - e.i * kRowBlock3);  // checked at first use
    return decode_rows7(entropy::BitReader(c.p, c.end), ix, module, m.base + e.start, nrows, visit);
  }
  if (m.version == 2) {
    ByteSrc src{c};
    return decode_rows(src, module, m.base + e.start, UINT64_MAX, visit);
  }
  BitSrc src{entropy::BitReader(c.p, c.end), ix.row_codes.data(), m.version >= 4};
  const uint64_t nrows = std::min<uint64_t>(kRowBlock3, m.nrows - e.i * kRowBlock3);  // checked at first use
  return decode_rows(src, module, m.base + e.start, nrows, visit);
}

Result<BundleReader::RowLookup> BundleReader::unwind_row(size_t module, uint64_t rel_pc) const {
  auto ixr = impl_->module_index(module);
  if (!ixr) return std::move(ixr).error();
  const ModuleMeta& m = impl_->meta[module];
  RowLookup out;
  Entry e;
  if (rel_pc < m.base || !impl_->find_entry(kSecRowIndex, m.rindex, m.rdata, rel_pc - m.base, &e)) return out;
  UnwindRowRecord r;
  Status st = decode_row_block(*impl_, m, *ixr.value(), module, e, [&](const UnwindRowRecord& next) {
                                 if (next.pc > rel_pc) return false;
                                 r = next;
                                 out.found = true;
                                 return true;
                               });
  if (!st) return st.error();
  if (out.found) {
    out.row = r;
    for (size_t i = r.nsaved; i < kMaxSavedRegs; i++) {
      out.row.saved_reg[i] = 0;
      out.row.saved_off[i] = 0;
    }
  }
  return out;
}

Status BundleReader::check_unwind_rows(size_t module) const { return walk_unwind_rows(module, nullptr); }

Result<std::vector<UnwindRowRecord>> BundleReader::unwind_rows(size_t module) const {
  std::vector<UnwindRowRecord> rows;
  if (Status st = walk_unwind_rows(module, &rows); !st) return st.error();
  return rows;
}

Status BundleReader::walk_unwind_rows(size_t module, std::vector<UnwindRowRecord>* out) const {
  auto ixr = impl_->module_index(module);
  if (!ixr) return std::move(ixr).error();
  const ModuleMeta& m = impl_->meta[module];
  uint64_t rows = 0;
  for (uint64_t bi = 0; bi < m.rindex.count; bi++) {
    Entry e;
    impl_->entry(kSecRowIndex, m.rindex, m.rdata, bi, &e);
    // The rows of this block lie before the next block's start: beyond it no lookup reads them.
    uint64_t limit = UINT64_MAX;
    if (bi + 1 < m.rindex.count) {
      Entry next;
      impl_->entry(kSecRowIndex, m.rindex, m.rdata, bi + 1, &next);
      limit = m.base + next.start;
    }
    uint64_t past = 0;  // a row at or past the limit
    Status st = decode_row_block(*impl_, m, *ixr.value(), module, e, [&](const UnwindRowRecord& row) {
                                   if (row.pc >= limit) {
                                     past = row.pc;
                                     return false;
                                   }
                                   rows++;
                                   if (out != nullptr) out->push_back(row);
                                   return true;
                                 });
    if (!st) return st;
    if (past != 0)
      return bad("module %zu: unwind row 0x%" PRIx64 " of block %" PRIu64 " lies at or past the next block's start 0x%" PRIx64,
                 module, past, bi, limit);
  }
  if (rows != m.nrows)
    return bad("module %zu: %" PRIu64 " unwind rows in its blocks, the module table says %" PRIu64, module, rows, m.nrows);
  return {};
}

Result<std::vector<RangeRecord>> BundleReader::ranges(size_t module) const {
  auto ixr = impl_->range_index(module);
  if (!ixr) return std::move(ixr).error();
  const ModuleIndex& ix = *ixr.value();
  const ModuleMeta& m = impl_->meta[module];
  const uint32_t nstr = static_cast<uint32_t>(ix.offs.size());
  std::vector<std::vector<Rec>> all;  // per depth, over all groups
  std::vector<std::vector<Rec>> g;    // per depth, this group
  std::vector<bool> cont;             // per depth, this group: the last record continues
  std::vector<std::optional<Rec>> pending;  // per depth: a record continuing into the next group
  uint64_t total = 0;
  SubGroup sub[kGroupsPerEntry];
  size_t nsub = 0, si = 0;
  if (m.version >= 8) {  // decoded and checked by range_index; format 8 has no group index to walk below
    all.resize(ix.r8.size());
    for (size_t d = 0; d < ix.r8.size(); d++)
      for (const Range8& r : ix.r8[d]) all[d].push_back(rec_from8(r, m.base));
  }
  for (uint64_t gi = 0; gi < m.findex.count;) {
    Entry e;
    impl_->entry(kSecFuncIndex, m.findex, m.fdata, gi, &e);
    if (si == 0) {
      const uint64_t limit =
          gi + 1 < m.findex.count ? m.base + ld32(impl_->idx_entry(kSecFuncIndex, m.findex, gi + 1)) : UINT64_MAX;
      if (auto s = entry_groups(m, module, m.base + e.start, impl_->data_cursor(kSecFuncData, m.fdata, e), limit, sub,
                                &nsub);
          !s)
        return s.error();
    }
    const SubGroup& sg = sub[si];
    if (++si == nsub) {  // the entry's last group: the next one is the next entry's
      si = 0;
      gi++;
    }
    const uint64_t gstart = sg.start;
    const Status st =
        with_group(m, ix, sg.c, [&](auto& gr) { return decode_group(gr, module, gstart, nstr, g, cont); });
    if (!st) return st.error();
    const size_t nd = g.size();
    // Inherited positions: the call site of the deeper record covering the start.
    for (size_t d = nd; d-- > 0;) {
      for (Rec& r : g[d]) {
        if (!r.inherit) continue;
        const Rec* c2 = nullptr;
        if (d + 1 < nd) {
          auto it = std::upper_bound(g[d + 1].begin(), g[d + 1].end(), r.start,
                                     [](uint64_t a, const Rec& x) { return a < x.start; });
          if (it != g[d + 1].begin() && r.start < (it - 1)->end) c2 = &*(it - 1);
        }
        if (c2 == nullptr)
          return bad("module %zu: range 0x%" PRIx64 " at depth %zu inherits from no deeper range", module, r.start, d);
        r.file = c2->call_file;
        r.line = c2->call_line;
        r.column = c2->call_column;
      }
    }
    if (all.size() < nd) all.resize(nd);
    if (pending.size() < nd) pending.resize(nd);
    for (size_t d = 0; d < pending.size(); d++) {
      size_t from = 0;
      if (pending[d]) {  // the previous group's last record of this depth continues here
        Rec& p = *pending[d];
        if (d >= nd || g[d].empty() || g[d][0].start != p.end || g[d][0].fn != p.fn || g[d][0].file != p.file ||
            g[d][0].line != p.line || g[d][0].column != p.column || g[d][0].call_file != p.call_file ||
            g[d][0].call_line != p.call_line || g[d][0].call_column != p.call_column)
          return bad("module %zu: range 0x%" PRIx64 " at depth %zu continues into group 0x%" PRIx64
                     " but no equal record starts there", module, p.start, d, gstart);
        p.end = g[d][0].end;
        if (p.end - p.start > UINT32_MAX)
          return bad("module %zu: range 0x%" PRIx64 " at depth %zu is longer than 4 GiB", module, p.start, d);
        from = 1;
        if (!(d < nd && cont[d] && g[d].size() == 1)) {
          all[d].push_back(p);
          pending[d].reset();
        }
      }
      if (d >= nd) continue;
      for (size_t k = from; k < g[d].size(); k++) {
        if (k + 1 == g[d].size() && cont[d])
          pending[d] = g[d][k];
        else
          all[d].push_back(g[d][k]);
      }
    }
  }
  for (size_t d = 0; d < pending.size(); d++)
    if (pending[d]) return bad("module %zu: range 0x%" PRIx64 " at depth %zu continues past the last group", module,
                               pending[d]->start, d);
  for (const auto& v : all) total += v.size();
  if (total != m.nranges)
    return bad("module %zu: %" PRIu64 " range records, the module record says %" PRIu64, module, total, m.nranges);
  uint64_t names = 0;
  for (const auto& v : all)
    for (const Rec& r : v) names += str_len(ix, r.fn) + str_len(ix, r.file) + str_len(ix, r.call_file);
  if (names > copy_budget(size_))
    return bad("module %zu: its %" PRIu64 " range records name %" PRIu64 " bytes of strings, more than the %" PRIu64
               " a bundle of %zu bytes may (1 GiB + 64 x its size)", module, total, names, copy_budget(size_), size_);
  std::vector<RangeRecord> out;
  out.reserve(total);
  for (size_t d = 0; d < all.size(); d++)
    for (const Rec& r : all[d]) {
      RangeRecord& o = out.emplace_back();
      o.start = r.start;
      o.length = static_cast<uint32_t>(r.end - r.start);
      o.depth = static_cast<uint16_t>(d);
      o.function = str_at(ix, r.fn);
      o.file = str_at(ix, r.file);
      o.line = r.line;
      o.column = r.column;
      o.call_file = str_at(ix, r.call_file);
      o.call_line = r.call_line;
      o.call_column = r.call_column;
      if (d == 0 && from_symtab(module, r.start)) {
        // A symbol-table interval holds whole depth-0 records (the writer's merge of them).
        if (!from_symtab(module, r.end - 1))
          return bad("module %zu: range 0x%" PRIx64 " is only partly in a symbol-table interval", module, r.start);
        o.from_symtab = true;
      }
    }
  return out;
}

}  // namespace stackprov::bundle
