// SPDX-License-Identifier: Apache-2.0
// Bundle writer: validates neutral records, sorts them and serialises the canonical file (format 8; formats 2 to 7 for tests) (doc/bundles.md).

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "bundle/entropy.hpp"
#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"
#include "bundle/lz.hpp"
#include "bundle/rangecoder.hpp"

namespace stackprov::bundle {
namespace {

using namespace layout;

std::string hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (uint8_t c : b) {
    s.push_back(d[c >> 4]);
    s.push_back(d[c & 15]);
  }
  return s;
}

std::string module_label(const ModuleContents& m) {
  return std::to_string(static_cast<int>(m.id.kind)) + ":" + hex(m.id.bytes);
}

Status check_string(const ModuleContents& m, const std::string& s, const char* what) {
  if (s.size() > kMaxStringBytes)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: %s of %zu bytes exceeds %zu",
                      module_label(m).c_str(), what, s.size(), kMaxStringBytes);
  if (std::memchr(s.data(), 0, s.size()) != nullptr)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: %s \"%.64s\" contains a NUL byte",
                      module_label(m).c_str(), what, s.c_str());
  return {};
}

/// Validates one module and sorts its records in place (ranges by depth then start,
/// pads by address, rows by pc).
Status prepare_module(ModuleContents& m) {
  const std::string label = module_label(m);
  const int kind = static_cast<int>(m.id.kind);
  if (kind < 1 || kind > kMaxIdKind)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module id kind %d is not 1..%d", kind, int{kMaxIdKind});
  if (m.id.bytes.empty() || m.id.bytes.size() > kMaxIdBytes)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: id of %zu bytes is not 1..%zu",
                      label.c_str(), m.id.bytes.size(), kMaxIdBytes);
  if (m.id.kind != IdKind::kElfBuildId &&
      m.id.bytes.size() != (m.id.kind == IdKind::kPdbGuidAge ? 20u : m.id.kind == IdKind::kPeCodeId ? 8u : 16u))
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: id of %zu bytes has the wrong size for its kind",
                      label.c_str(), m.id.bytes.size());
  if (auto s = check_string(m, m.name, "name"); !s) return s;
  if (m.ranges.size() > kMaxRecords || m.return_pads.size() > kMaxRecords || m.unwind_rows.size() > kMaxRecords)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: more than %" PRIu64 " records",
                      label.c_str(), kMaxRecords);

  for (const RangeRecord& r : m.ranges) {
    if (r.length == 0)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: range at 0x%" PRIx64 " has length 0",
                        label.c_str(), r.start);
    if (r.start + r.length < r.start)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: range 0x%" PRIx64 "+0x%x wraps around",
                        label.c_str(), r.start, r.length);
    if (r.depth > kMaxInlineDepth)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: range at 0x%" PRIx64 " has depth %u > %u",
                        label.c_str(), r.start, r.depth, kMaxInlineDepth);
    if (auto s = check_string(m, r.function, "function"); !s) return s;
    if (auto s = check_string(m, r.file, "file"); !s) return s;
    if (auto s = check_string(m, r.call_file, "call file"); !s) return s;
    if (r.from_symtab && r.depth != 0)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: symbol-table range at 0x%" PRIx64
                        " has depth %u (only depth 0 can come from the symbol table)", label.c_str(), r.start, r.depth);
  }
  std::sort(m.ranges.begin(), m.ranges.end(), [](const RangeRecord& a, const RangeRecord& b) {
    return a.depth != b.depth ? a.depth < b.depth : a.start < b.start;
  });
  // Symbol-name records (format 5): sorted, not empty, not overlapping, the symbol at or before.
  if (m.symbols.size() > kMaxRecords)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: more than %" PRIu64 " symbol-name records",
                      label.c_str(), kMaxRecords);
  std::sort(m.symbols.begin(), m.symbols.end(),
            [](const SymbolRecord& a, const SymbolRecord& b) { return a.addr < b.addr; });
  for (size_t i = 0; i < m.symbols.size(); i++) {
    const SymbolRecord& r = m.symbols[i];
    if (r.length == 0 || r.addr + r.length < r.addr || r.sym_start > r.addr)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: symbol-name record 0x%" PRIx64 "+0x%" PRIx64
                        " (symbol at 0x%" PRIx64 ") is empty, wraps around or starts before its symbol",
                        label.c_str(), r.addr, r.length, r.sym_start);
    if (i > 0 && m.symbols[i - 1].addr + m.symbols[i - 1].length > r.addr)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: symbol-name records at 0x%" PRIx64
                        " and 0x%" PRIx64 " overlap", label.c_str(), m.symbols[i - 1].addr, r.addr);
    if (auto s = check_string(m, r.name, "symbol name"); !s) return s;
  }
  // Call sites: unique return pcs; functions: unique entries, each in one of its own ranges, no
  // range of any function overlapping another's, tails naming tail-call sites.
  if (m.call_sites.size() > kMaxRecords || m.call_functions.size() > kMaxRecords || m.call_symbols.size() > kMaxRecords)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: %zu call sites, %zu functions or %zu names exceed %" PRIu64,
                      label.c_str(), m.call_sites.size(), m.call_functions.size(), m.call_symbols.size(), kMaxRecords);
  for (const CallSiteRecord& r : m.call_sites) {
    if (r.has_target && !r.target_name.empty())
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: call site 0x%" PRIx64
                        " has both a target address and a name ('%s')", label.c_str(), r.return_pc, r.target_name.c_str());
    if (auto s = check_string(m, r.target_name, "call-site target"); !s) return s;
  }
  std::sort(m.call_symbols.begin(), m.call_symbols.end(),
            [](const CallSymbolRecord& a, const CallSymbolRecord& b) { return a.name < b.name; });
  for (size_t i = 0; i < m.call_symbols.size(); i++) {
    if (m.call_symbols[i].name.empty() || (i > 0 && m.call_symbols[i].name == m.call_symbols[i - 1].name))
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: call-site name '%s' is empty or appears twice",
                        label.c_str(), m.call_symbols[i].name.c_str());
    if (auto s = check_string(m, m.call_symbols[i].name, "call-site name"); !s) return s;
  }
  std::sort(m.call_sites.begin(), m.call_sites.end(),
            [](const CallSiteRecord& a, const CallSiteRecord& b) { return a.return_pc < b.return_pc; });
  for (size_t i = 1; i < m.call_sites.size(); i++)
    if (m.call_sites[i].return_pc == m.call_sites[i - 1].return_pc)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: two call sites return to 0x%" PRIx64,
                        label.c_str(), m.call_sites[i].return_pc);
  std::sort(m.call_functions.begin(), m.call_functions.end(),
            [](const CallFunctionRecord& a, const CallFunctionRecord& b) { return a.entry < b.entry; });
  std::vector<std::pair<uint64_t, uint64_t>> all;
  for (size_t i = 0; i < m.call_functions.size(); i++) {
    CallFunctionRecord& f = m.call_functions[i];
    if (i > 0 && f.entry == m.call_functions[i - 1].entry)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: two call-site functions at 0x%" PRIx64,
                        label.c_str(), f.entry);
    std::sort(f.ranges.begin(), f.ranges.end());
    bool has_entry = false;
    for (const auto& [lo, hi] : f.ranges) {
      if (lo >= hi)
        return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: call-site function at 0x%" PRIx64
                          " has the empty range 0x%" PRIx64 "..0x%" PRIx64, label.c_str(), f.entry, lo, hi);
      has_entry |= f.entry >= lo && f.entry < hi;
    }
    if (!has_entry || f.ranges.size() > kMaxCallFunctionRanges)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: call-site function at 0x%" PRIx64 " has %zu ranges"
                        " (1..%" PRIu64 ") and its entry must lie in one", label.c_str(), f.entry, f.ranges.size(),
                        kMaxCallFunctionRanges);
    all.insert(all.end(), f.ranges.begin(), f.ranges.end());
    for (uint64_t t : f.tails) {
      auto it = std::lower_bound(m.call_sites.begin(), m.call_sites.end(), t,
                                 [](const CallSiteRecord& s, uint64_t a) { return s.return_pc < a; });
      if (it == m.call_sites.end() || it->return_pc != t || !it->tail_call)
        return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: call-site function at 0x%" PRIx64
                          " names 0x%" PRIx64 ", which is not one of its tail-call sites", label.c_str(), f.entry, t);
    }
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); i++)
    if (all[i - 1].second > all[i].first)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: call-site function ranges 0x%" PRIx64 "..0x%" PRIx64
                        " and 0x%" PRIx64 "..0x%" PRIx64 " overlap", label.c_str(), all[i - 1].first, all[i - 1].second,
                        all[i].first, all[i].second);
  // A symbol-table range has no inlined record inside (no depth-1 record overlaps it).
  {
    const auto d1 = std::find_if(m.ranges.begin(), m.ranges.end(), [](const RangeRecord& r) { return r.depth > 0; });
    const auto d2 = std::find_if(d1, m.ranges.end(), [](const RangeRecord& r) { return r.depth > 1; });
    for (auto it = m.ranges.begin(); it != d1; ++it) {
      if (!it->from_symtab) continue;
      const uint64_t end = it->start + it->length;
      // k: the first depth-1 record starting after it->start; k - 1 starts at or before it.
      const auto k = std::upper_bound(d1, d2, it->start, [](uint64_t a, const RangeRecord& r) { return a < r.start; });
      const bool hit_after = k != d2 && k->start < end;
      const bool hit_before = k != d1 && (k - 1)->start + (k - 1)->length > it->start;
      if (hit_after || hit_before)
        return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: symbol-table range 0x%" PRIx64
                          "+0x%x has inlined records inside", label.c_str(), it->start, it->length);
    }
  }
  // Per depth: no overlap; a range of depth d > 0 lies inside the addresses covered by
  // depth d - 1 (adjacent records of one depth, e.g. one per line row, cover together).
  struct Run {
    uint64_t start, end;
  };
  std::vector<Run> prev_runs;  // merged coverage of the previous depth
  for (size_t i = 0; i < m.ranges.size();) {
    const uint16_t depth = m.ranges[i].depth;
    if (depth > 0 && (prev_runs.empty() || m.ranges[i - 1].depth + 1 != depth))
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: range at 0x%" PRIx64
                        " has depth %u but no range has depth %u", label.c_str(), m.ranges[i].start, depth,
                        depth - 1u);
    std::vector<Run> runs;
    size_t j = i;
    for (; j < m.ranges.size() && m.ranges[j].depth == depth; j++) {
      const RangeRecord& r = m.ranges[j];
      const uint64_t end = r.start + r.length;
      if (j > i) {
        const RangeRecord& p = m.ranges[j - 1];
        if (p.start + p.length > r.start)
          return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: ranges at 0x%" PRIx64 " and 0x%" PRIx64
                            " overlap at depth %u", label.c_str(), p.start, r.start, depth);
      }
      if (depth > 0) {
        auto it = std::upper_bound(prev_runs.begin(), prev_runs.end(), r.start,
                                   [](uint64_t a, const Run& x) { return a < x.start; });
        if (it == prev_runs.begin() || (it - 1)->end < end)
          return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: inlined range 0x%" PRIx64 "+0x%x at depth %u"
                            " is not inside a range of depth %u", label.c_str(), r.start, r.length, depth,
                            depth - 1u);
      }
      if (!runs.empty() && runs.back().end == r.start)
        runs.back().end = end;
      else
        runs.push_back({r.start, end});
    }
    prev_runs = std::move(runs);
    i = j;
  }

  for (const ReturnPadRecord& p : m.return_pads) {
    if (p.frames.empty() || p.frames.size() > kMaxInlineDepth + 1)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: return pad 0x%" PRIx64 " has %zu frames (1..%u)",
                        label.c_str(), p.addr, p.frames.size(), kMaxInlineDepth + 1);
    for (const FrameRecord& f : p.frames) {
      if (auto s = check_string(m, f.function, "function"); !s) return s;
      if (auto s = check_string(m, f.file, "file"); !s) return s;
    }
  }
  std::sort(m.return_pads.begin(), m.return_pads.end(),
            [](const ReturnPadRecord& a, const ReturnPadRecord& b) { return a.addr < b.addr; });
  for (size_t i = 1; i < m.return_pads.size(); i++)
    if (m.return_pads[i].addr == m.return_pads[i - 1].addr)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: two return pads at 0x%" PRIx64, label.c_str(),
                        m.return_pads[i].addr);

  for (const UnwindRowRecord& r : m.unwind_rows) {
    if (r.kind < UnwindRowRecord::kCfaReg || r.kind > UnwindRowRecord::kNoInfo)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: unwind row 0x%" PRIx64 " has kind %u",
                        label.c_str(), r.pc, r.kind);
    if (r.nsaved > kMaxSavedRegs)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: unwind row 0x%" PRIx64 " saves %u registers (max %d)",
                        label.c_str(), r.pc, r.nsaved, kMaxSavedRegs);
    if (r.ra_kind > UnwindRowRecord::kRaUnspecified)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: unwind row 0x%" PRIx64 " has ra kind %u",
                        label.c_str(), r.pc, r.ra_kind);
  }
  std::sort(m.unwind_rows.begin(), m.unwind_rows.end(),
            [](const UnwindRowRecord& a, const UnwindRowRecord& b) { return a.pc < b.pc; });
  for (size_t i = 1; i < m.unwind_rows.size(); i++)
    if (m.unwind_rows[i].pc == m.unwind_rows[i - 1].pc)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: two unwind rows at 0x%" PRIx64, label.c_str(),
                        m.unwind_rows[i].pc);
  return {};
}

size_t align_up(size_t v) { return (v + kSectionAlign - 1) & ~(kSectionAlign - 1); }

/// Where a record's fields go. Format 2: bytes and varints (the context is not written).
struct ByteSink {
  std::vector<uint8_t>& b;
  void sym(unsigned, uint8_t v) { b.push_back(v); }
  void u(unsigned, uint64_t v) { put_uleb(b, v); }
  void s(unsigned, int64_t v) { put_sleb(b, v); }
};
/// Format 3, first pass: symbol counts per context.
struct CountSink {
  std::vector<entropy::Counts>& counts;
  void sym(unsigned ctx, uint8_t v) { counts[ctx][v]++; }
  void u(unsigned ctx, uint64_t v) {
    unsigned n;
    uint64_t x;
    counts[ctx][entropy::int_symbol(v, &n, &x)]++;
  }
  void s(unsigned ctx, int64_t v) { u(ctx, entropy::zigzag(v)); }
};
/// Format 3, second pass: the codes.
struct BitSink {
  entropy::BitWriter& w;
  const std::vector<entropy::Code>& codes;
  void sym(unsigned ctx, uint8_t v) { codes[ctx].put(w, v); }
  void u(unsigned ctx, uint64_t v) { codes[ctx].put_uint(w, v); }
  void s(unsigned ctx, int64_t v) { codes[ctx].put_uint(w, entropy::zigzag(v)); }
};

/// Format 4, the list bit counts: the bits a record costs with `codes` (no output).
struct CostSink {
  const std::vector<entropy::Code>& codes;
  uint64_t bits = 0;
  void sym(unsigned ctx, uint8_t v) { bits += codes[ctx].lengths()[v]; }
  void u(unsigned ctx, uint64_t v) {
    unsigned n;
    uint64_t x;
    bits += codes[ctx].lengths()[entropy::int_symbol(v, &n, &x)] + n;
  }
  void s(unsigned ctx, int64_t v) { u(ctx, entropy::zigzag(v)); }
};

/// Canonical codes for `counts`, written to `w` in context order, then a byte boundary.
std::vector<entropy::Code> make_codes(const std::vector<entropy::Counts>& counts, entropy::BitWriter& w) {
  std::vector<entropy::Code> codes(counts.size());
  for (size_t i = 0; i < counts.size(); i++) {
    codes[i].assign(entropy::build_lengths(counts[i]));
    codes[i].write(w);
  }
  w.align();
  return codes;
}

bool same_pos(const std::string& file, uint32_t line, uint32_t col, const std::string& f2, uint32_t l2, uint32_t c2) {
  return line == l2 && col == c2 && file == f2;
}

/// The input ranges per depth (views into the sorted vector), with chain lookups.
struct DepthIndex {
  std::vector<std::span<const RangeRecord>> by_depth;

  explicit DepthIndex(const std::vector<RangeRecord>& sorted) {
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j].depth == sorted[i].depth) j++;
      by_depth.emplace_back(sorted.data() + i, j - i);
      i = j;
    }
    build_runs();
  }
  /// The record of depth `d` whose start is the last <= a, or nullptr.
  const RangeRecord* last_at(size_t d, uint64_t a) const {
    if (d >= by_depth.size()) return nullptr;
    auto s = by_depth[d];
    auto it = std::upper_bound(s.begin(), s.end(), a, [](uint64_t x, const RangeRecord& r) { return x < r.start; });
    return it == s.begin() ? nullptr : &*(it - 1);
  }
  const RangeRecord* covering(size_t d, uint64_t a) const {
    const RangeRecord* r = last_at(d, a);
    return r != nullptr && a - r->start < r->length ? r : nullptr;
  }
  /// The chain at `a` as BundleReader::lookup answers it (outermost first).
  std::vector<FrameRecord> chain(uint64_t a) const {
    std::vector<const RangeRecord*> hits;
    for (size_t d = 0; d < by_depth.size(); d++) {
      const RangeRecord* r = covering(d, a);
      if (r == nullptr) break;
      hits.push_back(r);
    }
    std::vector<FrameRecord> out;
    for (size_t i = 0; i < hits.size(); i++) {
      if (i + 1 < hits.size())
        out.push_back({hits[i]->function, hits[i + 1]->call_file, hits[i + 1]->call_line, hits[i + 1]->call_column});
      else
        out.push_back({hits[i]->function, hits[i]->file, hits[i]->line, hits[i]->column});
    }
    return out;
  }
  /// Whether the piece [start, end) of `r` (depth d) takes its position from the deeper
  /// records: the one at `start` has it as call site and deeper records cover the whole
  /// piece (so a lookup never answers the piece's own position).
  bool inherits(const RangeRecord& r, uint64_t start, uint64_t end) const {
    const RangeRecord* c = covering(r.depth + 1u, start);
    if (c == nullptr || !same_pos(c->call_file, c->call_line, c->call_column, r.file, r.line, r.column)) return false;
    const auto& rs = runs[r.depth + 1u];
    auto it = std::upper_bound(rs.begin(), rs.end(), start,
                               [](uint64_t a, const std::pair<uint64_t, uint64_t>& x) { return a < x.first; });
    return it != rs.begin() && end <= (it - 1)->second;
  }
  /// Per depth: the merged address runs its records cover.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> runs;
  void build_runs() {
    runs.resize(by_depth.size());
    for (size_t d = 0; d < by_depth.size(); d++)
      for (const RangeRecord& r : by_depth[d]) {
        if (!runs[d].empty() && runs[d].back().second == r.start)
          runs[d].back().second = r.start + r.length;
        else
          runs[d].emplace_back(r.start, r.start + r.length);
      }
  }
};

bool same_frames(const std::vector<FrameRecord>& a, const std::vector<FrameRecord>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++)
    if (a[i].function != b[i].function || !same_pos(a[i].file, a[i].line, a[i].column, b[i].file, b[i].line, b[i].column))
      return false;
  return true;
}

/// A module's string table: the strings its records name, most referenced first (ties
/// by bytes), each NUL-terminated; compressed with lz::compress.
struct StringTable {
  std::vector<uint8_t> raw;
  std::vector<uint32_t> offs;
  std::unordered_map<std::string_view, uint32_t> index;

  uint32_t ref(const std::string& s) const { return index.at(s); }
};

/// Serialised per-module parts, in section order.
struct ModuleParts {
  std::vector<uint8_t> strings;  // name, NUL, compressed table
  uint64_t str_bytes = 0;
  std::vector<uint32_t> offs;
  std::vector<uint8_t> func_index, func_data, pad_index, pad_data, row_index, row_data;
  std::vector<uint8_t> symbols;  // format 5: the module's symbol-name records (kSecSymbols)
  std::vector<uint8_t> calls;    // format 5: the module's call sites and functions (kSecCallSites)
  uint64_t base = 0;
};

class ModuleEncoder {
 public:
  ModuleEncoder(const ModuleContents& m, const std::string& label, uint32_t version)
      : m_(m), label_(label), version_(version), dx_(m.ranges) {}

  Result<ModuleParts> encode() {
    // Which pads are implicit (their chain is lookup(addr - 1)).
    implicit_.resize(m_.return_pads.size());
    for (size_t i = 0; i < m_.return_pads.size(); i++) {
      const ReturnPadRecord& p = m_.return_pads[i];
      implicit_[i] = p.addr > 0 && same_frames(dx_.chain(p.addr - 1), p.frames);
    }
    build_strings();
    if (st_.raw.size() > kMaxStrBytes)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: string table of %zu bytes exceeds %" PRIu64,
                        label_.c_str(), st_.raw.size(), kMaxStrBytes);
    ModuleParts out;
    out.base = UINT64_MAX;
    for (const RangeRecord& r : m_.ranges) out.base = std::min(out.base, r.start);
    for (const ReturnPadRecord& p : m_.return_pads) out.base = std::min(out.base, p.addr);
    for (const UnwindRowRecord& r : m_.unwind_rows) out.base = std::min(out.base, r.pc);
    if (out.base == UINT64_MAX) out.base = 0;
    base_ = out.base;
    auto span_ok = [&](uint64_t a) -> Status {
      if (a - base_ > UINT32_MAX)
        return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: address 0x%" PRIx64
                          " is more than 4 GiB above the module's lowest address 0x%" PRIx64, label_.c_str(), a, base_);
      return {};
    };
    for (const RangeRecord& r : m_.ranges)
      if (auto s = span_ok(r.start); !s) return s.error();
    for (const ReturnPadRecord& p : m_.return_pads)
      if (auto s = span_ok(p.addr); !s) return s.error();
    for (const UnwindRowRecord& r : m_.unwind_rows)
      if (auto s = span_ok(r.pc); !s) return s.error();

    out.strings.assign(m_.name.begin(), m_.name.end());
    out.strings.push_back(0);
    std::vector<uint8_t> z = lz::compress(st_.raw.data(), st_.raw.size());
    if (version_ >= 4) z = lz::encode_coded(st_.raw.data(), z);  // the same sequences, entropy-coded
    if (st_.raw.size() > kMaxStrRatio * z.size() + kMaxStrRatio) {
      z = lz::store(st_.raw.data(), st_.raw.size());
      if (version_ >= 4) z = lz::encode_coded(st_.raw.data(), z);  // a literal costs 1 bit at least: ratio <= 8
    }
    out.strings.insert(out.strings.end(), z.begin(), z.end());
    out.str_bytes = st_.raw.size();
    out.offs = st_.offs;
    if (version_ >= 8) {
      if (auto st = encode_ranges(out); !st) return st.error();
    } else {
      encode_groups(out);
    }
    encode_pads(out);
    encode_rows(out);
    if (version_ >= 5) encode_symbols(out);
    if (version_ >= 5) encode_calls(out);
    for (const auto* v : {&out.func_data, &out.pad_data, &out.row_data})
      if (v->size() > UINT32_MAX)
        return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: encoded records exceed 4 GiB", label_.c_str());
    return out;
  }

 private:
  void build_strings() {
    std::unordered_map<std::string_view, uint64_t> freq;
    auto use = [&](const std::string& s) { freq[s]++; };
    for (const RangeRecord& r : m_.ranges) {
      use(r.function);
      use(r.file);
      use(r.call_file);
    }
    for (size_t i = 0; i < m_.return_pads.size(); i++)
      if (!implicit_[i])
        for (const FrameRecord& f : m_.return_pads[i].frames) {
          use(f.function);
          use(f.file);
        }
    if (version_ >= 5) {  // format 5: the symbol names and call-site names share the module's string table
      for (const CallSiteRecord& r : m_.call_sites)
        if (!r.has_target && !r.target_name.empty()) use(r.target_name);
      for (const CallSymbolRecord& r : m_.call_symbols) use(r.name);
      if (version_ == 5)
        for (const SymbolRecord& r : m_.symbols) use(r.name);
    }
    if (version_ >= 6) {  // format 6: only the strings a symbol name needs beyond the range's function
      classify_symbols(freq);
      for (const SymName& k : sym_names_) {
        if (k.kind != kSymSame) use(k.str);
        if (k.kind == kSymJoined) use(k.prefix);
      }
    }
    std::vector<std::pair<std::string_view, uint64_t>> all(freq.begin(), freq.end());
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    // Format 4: an index >= kIntDirect is coded as its symbol (bit width and the bit below the
    // top one) and raw low bits, so within one symbol's range the order costs nothing: there the
    // strings are sorted by bytes, which puts similar names next to each other for the LZ77.
    if (version_ >= 4)
      for (size_t lo = entropy::kIntDirect; lo < all.size();) {
        const unsigned n = static_cast<unsigned>(std::bit_width(lo));
        const size_t hi = std::min(all.size(), lo + (size_t{1} << (n - 2)));
        std::sort(all.begin() + static_cast<std::ptrdiff_t>(lo), all.begin() + static_cast<std::ptrdiff_t>(hi),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        lo = hi;
      }
    for (const auto& [s, n] : all) {
      st_.index.emplace(s, static_cast<uint32_t>(st_.offs.size()));
      st_.offs.push_back(static_cast<uint32_t>(std::min<size_t>(st_.raw.size(), UINT32_MAX)));
      st_.raw.insert(st_.raw.end(), s.begin(), s.end());
      st_.raw.push_back(0);
    }
  }

  /// How format 6 codes a symbol record's name (kSymSame, kSymEdited, kSymString, kSymJoined; layout
  /// SymCtx) and whether its length is its range run's (kSymRun).
  struct SymName {
    unsigned kind = kSymString;
    bool run = false;
    uint64_t cut = 0;    // kSymEdited: bytes cut from the function's name
    std::string str;     // kSymEdited, kSymJoined: the suffix; kSymString: the name
    std::string prefix;  // kSymJoined: the string the suffix is appended to
  };

  /// Format 6: each record's name as the range function at its address (the reader resolves it from
  /// the module's depth-0 ranges), that name edited (another tail: C1/C2 structor aliases, .cold and
  /// .lto_priv.0 parts, version suffixes), a string, or a string the table has anyway (`others`:
  /// ranges, pads, call sites) with a suffix (`memcpy@plt`); and whether the record ends where the run
  /// of contiguous depth-0 ranges of one function at its address ends (the reader finds that end too).
  void classify_symbols(const std::unordered_map<std::string_view, uint64_t>& others) {
    std::vector<std::pair<uint64_t, uint64_t>> runs;  // depth-0 runs of one function: [start, end)
    if (!dx_.by_depth.empty()) {
      const RangeRecord* prev = nullptr;
      for (const RangeRecord& r : dx_.by_depth[0]) {
        if (prev != nullptr && prev->start + prev->length == r.start && prev->function == r.function)
          runs.back().second = r.start + r.length;
        else
          runs.emplace_back(r.start, r.start + r.length);
        prev = &r;
      }
    }
    sym_names_.assign(m_.symbols.size(), {});
    for (size_t i = 0; i < m_.symbols.size(); i++) {
      const SymbolRecord& r = m_.symbols[i];
      SymName& k = sym_names_[i];
      auto run = std::upper_bound(runs.begin(), runs.end(), r.addr,
                                  [](uint64_t a, const std::pair<uint64_t, uint64_t>& x) { return a < x.first; });
      k.run = run != runs.begin() && r.addr < std::prev(run)->second && r.addr + r.length == std::prev(run)->second;
      const RangeRecord* f = dx_.covering(0, r.addr);
      if (f != nullptr && f->function == r.name) {
        k.kind = kSymSame;
        continue;
      }
      k.str = r.name;
      if (f != nullptr) {
        const std::string& fn = f->function;
        const size_t p = static_cast<size_t>(
            std::mismatch(fn.begin(), fn.end(), r.name.begin(), r.name.end()).first - fn.begin());
        if (p >= kMinEditPrefix && 2 * p >= r.name.size()) {
          k.kind = kSymEdited;
          k.cut = fn.size() - p;
          k.str = r.name.substr(p);
          continue;
        }
      }
      if (others.count(r.name) != 0) continue;
      for (size_t p = r.name.size(); p-- > 1;) {  // the longest prefix before a '@' or '.' the table has
        if ((r.name[p] != '@' && r.name[p] != '.') || others.count(std::string_view(r.name).substr(0, p)) == 0) continue;
        k.kind = kSymJoined;
        k.prefix = r.name.substr(0, p);
        k.str = r.name.substr(p);
        break;
      }
    }
  }
  /// Format 6 codes an edit only when the function's name and the symbol's share this many bytes
  /// (and at least half of the symbol's name).
  static constexpr size_t kMinEditPrefix = 4;

  /// Format 6's symbol-name fields (layout SymCtx) into `k`.
  template <class Sink>
  void symbol_fields(Sink& k) const {
    uint64_t prev_end = 0;
    unsigned prev_kind = kSymKinds;
    for (size_t i = 0; i < m_.symbols.size(); i++) {
      const SymbolRecord& r = m_.symbols[i];
      const SymName& n = sym_names_[i];
      const uint64_t back = r.addr - r.sym_start;
      k.sym(kCtxSymHead + prev_kind,
            static_cast<uint8_t>(n.kind | (back != 0 ? kSymBack : 0) | (n.run ? kSymRun : 0)));
      k.u(kCtxSymGap, r.addr - prev_end);
      if (!n.run) k.u(kCtxSymLen + n.kind, r.length);
      if (back != 0) k.u(kCtxSymBackOff, back);
      if (n.kind == kSymString) k.u(kCtxSymName, st_.ref(n.str));
      if (n.kind == kSymEdited) k.u(kCtxSymCut, n.cut);
      if (n.kind == kSymJoined) k.u(kCtxSymPrefix, st_.ref(n.prefix));
      if (n.kind == kSymEdited || n.kind == kSymJoined) k.u(kCtxSymSuffix, st_.ref(n.str));
      prev_end = r.addr + r.length;
      prev_kind = n.kind;
    }
  }

  /// One bit stream of `fields`' output: its codes in context order, the fields, zero bits to a byte.
  template <class Fields>
  static std::vector<uint8_t> coded_block(unsigned ncontexts, Fields fields) {
    std::vector<entropy::Counts> counts(ncontexts);
    CountSink cs{counts};
    fields(cs);
    entropy::BitWriter w;
    const std::vector<entropy::Code> codes = make_codes(counts, w);
    BitSink bs{w, codes};
    fields(bs);
    w.align();
    return std::move(w.bytes());
  }

  /// The symbol-name records (layout kSecSymbols): format 5 varints, addresses as gaps from the
  /// previous record's end; format 6 the same fields coded (SymCtx).
  void encode_symbols(ModuleParts& out) const {
    if (m_.symbols.empty()) return;
    if (version_ >= 6) {
      out.symbols = coded_block(kSymCtxCount, [&](auto& k) { symbol_fields(k); });
      return;
    }
    uint64_t prev_end = 0;
    for (const SymbolRecord& r : m_.symbols) {
      put_uleb(out.symbols, r.addr - prev_end);
      put_uleb(out.symbols, r.length);
      const uint64_t back = r.addr - r.sym_start;
      put_uleb(out.symbols, (uint64_t{st_.ref(r.name)} << 1) | (back != 0 ? 1 : 0));
      if (back != 0) put_uleb(out.symbols, back);
      prev_end = r.addr + r.length;
    }
  }

  /// The call-sites section's records (layout kSecCallSites, CallCtx), sorted by prepare_module:
  /// format 5 varints (ByteSink), format 6 codes; format 6 names a target or a name's address that is
  /// a kept function's entry by the function's index.
  template <class Sink>
  void call_fields(Sink& k) const {
    const bool v6 = version_ >= 6;
    auto function_index = [&](uint64_t entry) -> int64_t {  // -1: not a kept function's entry
      auto it = std::lower_bound(m_.call_functions.begin(), m_.call_functions.end(), entry,
                                 [](const CallFunctionRecord& f, uint64_t a) { return f.entry < a; });
      return v6 && it != m_.call_functions.end() && it->entry == entry ? it - m_.call_functions.begin() : -1;
    };
    auto site_index = [&](uint64_t pc) {  // the first site at or after pc
      return static_cast<uint64_t>(std::lower_bound(m_.call_sites.begin(), m_.call_sites.end(), pc,
                                                    [](const CallSiteRecord& s, uint64_t a) { return s.return_pc < a; }) -
                                   m_.call_sites.begin());
    };
    uint64_t prev = 0;
    for (const CallSiteRecord& r : m_.call_sites) {
      k.u(kCtxCsDelta, r.return_pc - prev);
      const bool named = !r.has_target && !r.target_name.empty();
      const int64_t fi = r.has_target ? function_index(r.target) : -1;
      k.sym(kCtxCsFlags, static_cast<uint8_t>((r.tail_call ? kCallSiteTail : 0) | (named ? kCallSiteName : 0) |
                                              (fi >= 0 ? kCallSiteFunction : r.has_target ? kCallSiteTarget : 0)));
      if (fi >= 0)
        k.u(kCtxCsFunc, static_cast<uint64_t>(fi));
      else if (r.has_target)
        k.s(kCtxCsTarget, static_cast<int64_t>(r.target - r.return_pc));
      if (named) k.u(kCtxCsName, st_.ref(r.target_name));
      prev = r.return_pc;
    }
    prev = 0;
    for (const CallFunctionRecord& f : m_.call_functions) {
      k.u(kCtxCfDelta, f.entry - prev);
      k.u(kCtxCfRanges, f.ranges.size());
      uint64_t at = 0;
      for (size_t i = 0; i < f.ranges.size(); i++) {
        if (i == 0)
          k.s(kCtxCfLow, static_cast<int64_t>(f.ranges[0].first - f.entry));
        else
          k.u(kCtxCfGap, f.ranges[i].first - at);
        k.u(kCtxCfLen, f.ranges[i].second - f.ranges[i].first);
        at = f.ranges[i].second;
      }
      k.u(kCtxCfTails, f.tails.size());
      uint64_t prev_site = site_index(f.ranges[0].first);
      for (uint64_t t : f.tails) {
        const uint64_t si = site_index(t);
        if (v6)
          k.s(kCtxCfTail, static_cast<int64_t>(si - prev_site));
        else
          k.u(kCtxCfTail, si);
        prev_site = si;
      }
      prev = f.entry;
    }
    for (const CallSymbolRecord& y : m_.call_symbols) {
      k.u(kCtxCnName, st_.ref(y.name));
      const int64_t fi = function_index(y.addr);
      k.sym(kCtxCnHead, static_cast<uint8_t>((y.global ? 1 : 0) | (fi >= 0 ? kCallNameFunction : 0)));
      if (fi >= 0)
        k.u(kCtxCnFunc, static_cast<uint64_t>(fi));
      else
        k.u(kCtxCnAddr, y.addr);
    }
  }

  void encode_calls(ModuleParts& out) const {
    if (m_.call_sites.empty() && m_.call_functions.empty() && m_.call_symbols.empty()) return;
    if (version_ >= 6) {
      out.calls = coded_block(kCallCtxCount, [&](auto& k) { call_fields(k); });
      return;
    }
    ByteSink k{out.calls};
    call_fields(k);
  }

  /// State of one depth list while encoding (see the reader's twin).
  struct ListState {
    const std::string* fn = &kEmpty;
    const std::string* file = &kEmpty;
    uint32_t line = 0, column = 0;
    const std::string* call_file = &kEmpty;
    uint32_t call_line = 0, call_column = 0;
    unsigned cls = kClassFirst;  // format 4: the previous record's class (rec_class)
  };
  static inline const std::string kEmpty;

  /// Encodes the piece [start, end) of `r` (the whole record, or its part inside one group).
  template <class Sink>
  void encode_record(Sink& k, const RangeRecord& r, uint64_t start, uint64_t end, uint64_t gap,
                     ListState& s) const {
    const unsigned deep = r.depth > 0 ? 1 : 0;
    uint8_t head = 0;
    if (r.function != *s.fn) head |= kRecFn;
    const bool inherit = r.depth + 1u < dx_.by_depth.size() && dx_.inherits(r, start, end);
    const uint64_t length = end - start;
    int64_t dline = 0;
    bool line_escape = false;
    if (inherit) {
      head |= kRecInherit;
    } else {
      if (r.file != *s.file) head |= kRecFile;
      if (r.column != s.column) head |= kRecColumn;
      dline = static_cast<int64_t>(r.line) - static_cast<int64_t>(s.line);
      if (dline >= -kRecLineBias && dline <= kRecLineBias)
        head |= static_cast<uint8_t>((dline + kRecLineBias) << kRecLineShift);
      else {
        head |= static_cast<uint8_t>(kRecLineEscape << kRecLineShift);
        line_escape = true;
      }
    }
    if (r.call_file != *s.call_file || r.call_line != s.call_line || r.call_column != s.call_column) head |= kRecCall;
    // Format 4: the head given the previous record's class, the length given this one's.
    const bool v4 = version_ >= 4;
    const unsigned cls = rec_class(head);
    k.sym(v4 ? kCtxHead4 + deep * kHeadClasses + s.cls : kCtxHead + deep, head);
    const unsigned len_ctx = v4 ? kCtxLen4 + deep * kLenClasses + cls : kCtxLen + deep;
    if (r.depth == 0)
      k.u(len_ctx, length);
    else
      k.u(len_ctx, (length << 1) | (gap != 0 ? 1 : 0));
    if (r.depth > 0 && gap != 0) k.u(kCtxGap, gap);
    const unsigned fc = v4 && s.cls == kClassFirst ? kCtxFirstFn - kCtxFn : 0;  // format 4: a list's first record
    if (head & kRecFn) k.u(kCtxFn + fc + deep, st_.ref(r.function));
    if (head & kRecFile) k.u(kCtxFile + fc + deep, st_.ref(r.file));
    if (line_escape) k.s(kCtxLine + fc + deep, dline);
    if (head & kRecColumn) k.u(kCtxCol + fc + deep, r.column);
    if (head & kRecCall) {
      const int64_t dl = static_cast<int64_t>(r.call_line) - static_cast<int64_t>(s.call_line);
      const bool small = dl >= -kCallLineBias && dl <= kCallLineBias;
      k.sym(kCtxCallExt, static_cast<uint8_t>((r.call_file != *s.call_file ? kCallFile : 0) |
                                              (r.call_column != s.call_column ? kCallColumn : 0) |
                                              ((small ? dl + kCallLineBias : kCallLineEscape) << kCallLineShift)));
      if (r.call_file != *s.call_file) k.u(kCtxCallFile, st_.ref(r.call_file));
      if (!small) k.s(kCtxCallLine, dl);
      if (r.call_column != s.call_column) k.u(kCtxCallCol, r.call_column);
    }
    s.fn = &r.function;
    if (!inherit) {
      s.file = &r.file;
      s.line = r.line;
      s.column = r.column;
    }
    s.call_file = &r.call_file;
    s.call_line = r.call_line;
    s.call_column = r.call_column;
    s.cls = cls;
  }

  /// Format 8: the module's range records as one range-coded stream (rangecoder.hpp), no group index.
  Status encode_ranges(ModuleParts& out) const {
    if (dx_.by_depth.empty()) return {};
    std::vector<std::vector<Range8>> depths(dx_.by_depth.size());
    for (size_t d = 0; d < dx_.by_depth.size(); d++) {
      depths[d].reserve(dx_.by_depth[d].size());
      for (const RangeRecord& r : dx_.by_depth[d]) {
        // Its end inside the module's 4 GiB too (the reader refuses a range past it).
        if (r.start - base_ + r.length > (uint64_t{1} << 32))
          return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: range at 0x%" PRIx64 " of length %u ends more than 4 GiB "
                            "above the module's lowest address 0x%" PRIx64, label_.c_str(), r.start, r.length, base_);
        Range8& o = depths[d].emplace_back();
        o.start = static_cast<uint32_t>(r.start - base_);
        o.len = r.length;
        o.fn = st_.ref(r.function);
        o.file = st_.ref(r.file);
        o.line = r.line;
        o.col = r.column;
        o.call_file = d > 0 || !r.call_file.empty() ? st_.ref(r.call_file) : kNone8;
        o.call_line = r.call_line;
        o.call_col = r.call_column;
      }
    }
    out.func_data = encode_ranges8(depths, static_cast<uint32_t>(st_.offs.size()));  // padded to kMaxRanges8PerByte
    return {};
  }

  void encode_groups(ModuleParts& out) const {
    if (dx_.by_depth.empty()) return;
    // Boundaries no deeper range crosses: the union of the open intervals (start, end).
    std::vector<std::pair<uint64_t, uint64_t>> deep;
    for (size_t d = 1; d < dx_.by_depth.size(); d++)
      for (const RangeRecord& r : dx_.by_depth[d]) deep.emplace_back(r.start, r.start + r.length);
    std::sort(deep.begin(), deep.end());
    std::vector<uint64_t> deep_starts;
    deep_starts.reserve(deep.size());
    for (const auto& iv : deep) deep_starts.push_back(iv.first);
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& iv : deep) {
      if (!merged.empty() && iv.first < merged.back().second)
        merged.back().second = std::max(merged.back().second, iv.second);
      else
        merged.push_back(iv);
    }
    size_t mp = 0;
    auto allowed = [&](uint64_t b) {
      while (mp < merged.size() && merged[mp].second <= b) mp++;
      return mp == merged.size() || !(merged[mp].first < b && b < merged[mp].second);
    };
    // Groups of contiguous depth-0 records: a new one where the code is not contiguous, where
    // the function changes (when no deeper range crosses there) and after kGroupTarget records
    // (deeper ranges crossing that boundary are split in two pieces, the first one flagged
    // "continues" in its list header).
    const auto d0 = dx_.by_depth[0];
    std::vector<std::pair<size_t, size_t>> groups;  // [first, last) of d0
    for (size_t i = 0; i < d0.size(); i++) {
      bool split = i == 0;
      if (!split) {
        const RangeRecord& p = d0[i - 1];
        const size_t count = i - groups.back().first;
        const bool ok = allowed(d0[i].start);
        const auto deep_before = [&](uint64_t a) {
          return static_cast<size_t>(std::lower_bound(deep_starts.begin(), deep_starts.end(), a) - deep_starts.begin());
        };
        const size_t deep = deep_before(d0[i].start) - deep_before(d0[groups.back().first].start);
        // Format 3 groups are larger and do not end where the function changes: each group's
        // index entry (8 bytes) and its lists' first records (coded without context) cost more
        // than the longer decode of a lookup (doc/bundles.md "Format 3").
        const bool v2 = version_ == 2;
        const size_t target = v2 ? kGroupTarget : version_ >= 4 ? kGroupTarget4 : kGroupTarget3;
        const size_t max_records = v2 ? kGroupRecords : version_ >= 4 ? kGroupRecords4 : kGroupRecords3;
        split = p.start + p.length != d0[i].start || count >= target || count + deep >= max_records ||
                (v2 && p.function != d0[i].function && ok);
      }
      if (split) {
        if (!groups.empty()) groups.back().second = i;
        groups.emplace_back(i, d0.size());
      }
    }
    struct Piece {
      const RangeRecord* r;
      uint64_t start, end;
    };
    std::vector<size_t> cursor(dx_.by_depth.size(), 0);
    struct Group {
      uint64_t start;
      std::vector<std::vector<Piece>> lists;  // per depth, the pieces inside the group
    };
    std::vector<Group> plan;
    plan.reserve(groups.size());
    for (const auto& [g0, g1] : groups) {
      const uint64_t gstart = d0[g0].start;
      const uint64_t gend = d0[g1 - 1].start + d0[g1 - 1].length;
      Group& g = plan.emplace_back(Group{gstart, {}});
      auto& lists = g.lists;
      lists.emplace_back();
      for (size_t i = g0; i < g1; i++) lists[0].push_back({&d0[i], d0[i].start, d0[i].start + d0[i].length});
      for (size_t d = 1; d < dx_.by_depth.size(); d++) {
        const auto sp = dx_.by_depth[d];
        size_t a = cursor[d];
        while (a < sp.size() && sp[a].start + sp[a].length <= gstart) a++;
        size_t b = a;
        std::vector<Piece> pcs;
        while (b < sp.size() && sp[b].start < gend) {
          const uint64_t end = sp[b].start + sp[b].length;
          pcs.push_back({&sp[b], std::max(sp[b].start, gstart), std::min(end, gend)});
          b++;
        }
        // The next group starts with the last record again when it continues past gend.
        cursor[d] = b > a && sp[b - 1].start + sp[b - 1].length > gend ? b - 1 : b;
        if (pcs.empty()) break;
        lists.push_back(std::move(pcs));
      }
    }
    auto list_head = [](const std::vector<Piece>& l) {
      const Piece& last = l.back();
      const bool continues = last.end < last.r->start + last.r->length;
      return (uint64_t{l.size()} << 1) | (continues ? 1 : 0);
    };
    auto add_index = [&](uint64_t gstart, size_t off) {
      uint8_t e[kIndexEntrySize];
      st32(e, static_cast<uint32_t>(gstart - base_));
      st32(e + 4, static_cast<uint32_t>(off));
      out.func_index.insert(out.func_index.end(), e, e + kIndexEntrySize);
    };
    // A group's fields into `k` (format 3: the codes; format 2 writes list byte counts, below).
    auto records = [&](auto& k, const std::vector<Piece>& l, uint64_t gstart) {
      ListState st;
      uint64_t prev_end = gstart;
      for (const Piece& p : l) {
        encode_record(k, *p.r, p.start, p.end, p.start - prev_end, st);
        prev_end = p.end;
      }
    };
    if (version_ == 2) {
      std::vector<uint8_t> list;
      for (const Group& g : plan) {
        add_index(g.start, out.func_data.size());
        put_uleb(out.func_data, g.lists.size());
        for (const auto& l : g.lists) {
          list.clear();
          ByteSink k{list};
          records(k, l, g.start);
          put_uleb(out.func_data, list_head(l));
          put_uleb(out.func_data, list.size());
          out.func_data.insert(out.func_data.end(), list.begin(), list.end());
        }
      }
      return;
    }
    std::vector<entropy::Counts> counts(version_ >= 4 ? kRangeCtxCount4 : kRangeCtxCount);
    CountSink cs{counts};
    for (const Group& g : plan) {
      cs.u(kCtxNdepth, g.lists.size());
      for (const auto& l : g.lists) {
        cs.u(kCtxListHead, list_head(l));
        records(cs, l, g.start);
      }
    }
    // Format 4: the depth-0 list of a group with deeper lists says its bits (a lookup skips the
    // rest of it; deeper lists are short). The counts are the bits of the other codes, which do
    // not depend on them; then they get their own code.
    std::vector<uint64_t> list_bits(plan.size(), 0);  // 0: the group has no deeper list
    if (version_ >= 4) {
      std::vector<entropy::Code> pre(counts.size());
      for (size_t i = 0; i < counts.size(); i++) pre[i].assign(entropy::build_lengths(counts[i]));
      for (size_t gi = 0; gi < plan.size(); gi++) {
        if (plan[gi].lists.size() < 2) continue;
        CostSink c{pre};
        records(c, plan[gi].lists[0], plan[gi].start);
        list_bits[gi] = c.bits;
        cs.u(kCtxListBits, c.bits);
      }
    }
    entropy::BitWriter w;
    const std::vector<entropy::Code> codes = make_codes(counts, w);
    if (version_ <= 3) {
      BitSink bs{w, codes};
      for (size_t gi = 0; gi < plan.size(); gi++) {
        const Group& g = plan[gi];
        add_index(g.start, w.bytes().size());
        bs.u(kCtxNdepth, g.lists.size());
        for (size_t li = 0; li < g.lists.size(); li++) {
          bs.u(kCtxListHead, list_head(g.lists[li]));
          records(bs, g.lists[li], g.start);
        }
        w.align();
      }
      out.func_data = std::move(w.bytes());
      return;
    }
    // Format 4: each group's bit stream by itself, then kGroupsPerEntry groups an index entry.
    out.func_data = std::move(w.bytes());
    std::vector<std::vector<uint8_t>> streams(plan.size());
    for (size_t gi = 0; gi < plan.size(); gi++) {
      const Group& g = plan[gi];
      entropy::BitWriter gw;
      BitSink bs{gw, codes};
      bs.u(kCtxNdepth, g.lists.size());
      for (size_t li = 0; li < g.lists.size(); li++) {
        bs.u(kCtxListHead, list_head(g.lists[li]));
        if (li == 0 && g.lists.size() > 1) bs.u(kCtxListBits, list_bits[gi]);
        records(bs, g.lists[li], g.start);
      }
      gw.align();
      streams[gi] = std::move(gw.bytes());
    }
    for (size_t b = 0; b < plan.size(); b += kGroupsPerEntry) {
      const size_t e = std::min(plan.size(), b + kGroupsPerEntry);
      add_index(plan[b].start, out.func_data.size());
      put_uleb(out.func_data, e - b - 1);
      for (size_t gi = b + 1; gi < e; gi++) {
        put_uleb(out.func_data, plan[gi].start - plan[gi - 1].start);
        put_uleb(out.func_data, streams[gi - 1].size());
      }
      for (size_t gi = b; gi < e; gi++)
        out.func_data.insert(out.func_data.end(), streams[gi].begin(), streams[gi].end());
    }
  }

  /// Every pad into `k` (contexts as format 4's; format 2 and 3 write them as varints), calling
  /// block(addr) before the first pad of each block.
  template <class Sink, class Block>
  void pads(Sink& k, Block block) const {
    uint64_t prev = 0;
    for (size_t i = 0; i < m_.return_pads.size(); i++) {
      const ReturnPadRecord& p = m_.return_pads[i];
      if (i % kPadBlock == 0) {
        block(p.addr);
        prev = p.addr;
      }
      k.u(kCtxPadHead, ((p.addr - prev) << 1) | (implicit_[i] ? 0 : 1));
      prev = p.addr;
      if (implicit_[i]) continue;
      k.u(kCtxPadFrames, p.frames.size());
      for (const FrameRecord& f : p.frames) {
        k.u(kCtxPadFn, st_.ref(f.function));
        k.u(kCtxPadFile, st_.ref(f.file));
        k.u(kCtxPadLine, f.line);
        k.u(kCtxPadCol, f.column);
      }
    }
  }

  void encode_pads(ModuleParts& out) const {
    auto add_index = [&](uint64_t addr, size_t off) {
      uint8_t e[kIndexEntrySize];
      st32(e, static_cast<uint32_t>(addr - base_));
      st32(e + 4, static_cast<uint32_t>(off));
      out.pad_index.insert(out.pad_index.end(), e, e + kIndexEntrySize);
    };
    if (version_ <= 3) {
      ByteSink k{out.pad_data};
      pads(k, [&](uint64_t addr) { add_index(addr, out.pad_data.size()); });
      return;
    }
    if (m_.return_pads.empty()) return;
    std::vector<entropy::Counts> counts(kPadCtxCount);
    CountSink cs{counts};
    pads(cs, [](uint64_t) {});
    entropy::BitWriter w;
    const std::vector<entropy::Code> codes = make_codes(counts, w);
    BitSink bs{w, codes};
    pads(bs, [&](uint64_t addr) {
      w.align();
      add_index(addr, w.bytes().size());
    });
    w.align();
    out.pad_data = std::move(w.bytes());
  }

  /// One row's fields against the previous row of its block `s` (zero before the first).
  template <class Sink>
  void encode_row(Sink& k, const UnwindRowRecord& r, const UnwindRowRecord& s, uint8_t& prev_head, unsigned& cls,
                  uint64_t delta) const {
    const bool v4 = version_ >= 4;
    k.u(v4 ? kCtxRowDelta4 + cls : kCtxRowDelta, delta);
    const uint8_t head = static_cast<uint8_t>(r.kind | (r.signal_frame ? kRowHeadSignal : 0) |
                                              (r.from_debug_frame ? kRowHeadDebugFrame : 0) | (r.ra_kind << 5));
    size_t keep = 0;  // common prefix with the previous row's saved registers
    while (keep < r.nsaved && keep < s.nsaved && r.saved_reg[keep] == s.saved_reg[keep] &&
           r.saved_off[keep] == s.saved_off[keep])
      keep++;
    const bool saved_same = keep == r.nsaved && keep == s.nsaved;
    bool packed = true;
    for (size_t i = keep; i < r.nsaved; i++)
      packed = packed && r.saved_reg[i] < 16 && r.saved_off[i] < 0 && r.saved_off[i] >= -16;
    const uint8_t mask = static_cast<uint8_t>(
        (r.cfa_reg != s.cfa_reg ? kRowCfaReg : 0) | (r.cfa_off != s.cfa_off ? kRowCfaOff : 0) |
        (r.ra_reg != s.ra_reg ? kRowRaReg : 0) | (r.ra_off != s.ra_off ? kRowRaOff : 0) |
        (saved_same ? 0 : kRowSaved) | (head != prev_head ? kRowHead : 0) |
        (!saved_same && packed && keep < r.nsaved ? kRowPacked : 0));
    prev_head = head;
    k.sym(v4 ? kCtxRowMask4 + cls : kCtxRowMask, mask);
    if (mask & kRowHead) k.sym(kCtxRowHead, head);
    if (mask & kRowCfaReg) k.sym(kCtxRowCfaReg, r.cfa_reg);
    if (mask & kRowCfaOff)
      k.s(v4 ? kCtxRowCfaOff4 + cls : kCtxRowCfaOff,
          version_ == 2 ? int64_t{r.cfa_off} : int64_t{r.cfa_off} - s.cfa_off);
    cls = row_class(mask);
    if (mask & kRowRaReg) k.sym(kCtxRowRaReg, r.ra_reg);
    if (mask & kRowRaOff) k.sym(kCtxRowRaOff, static_cast<uint8_t>(r.ra_off));
    if (mask & kRowSaved) {
      k.sym(kCtxRowKeepAdd, static_cast<uint8_t>(keep << 4 | (r.nsaved - keep)));
      for (size_t i = keep; i < r.nsaved; i++) {
        if (mask & kRowPacked) {
          k.sym(v4 ? kCtxRowPacked4 + static_cast<unsigned>(i) : kCtxRowPacked,
                static_cast<uint8_t>(r.saved_reg[i] << 4 | (-r.saved_off[i] - 1)));
        } else {
          k.sym(kCtxRowSavedReg, r.saved_reg[i]);
          k.sym(kCtxRowSavedOff, static_cast<uint8_t>(r.saved_off[i]));
        }
      }
    }
  }

  /// Every row into `k`, calling block(i, pc) before the first row of each block.
  template <class Sink, class Block>
  void rows(Sink& k, Block block) const {
    UnwindRowRecord s;
    uint64_t prev = 0;
    uint8_t prev_head = 0;
    unsigned cls = 0;
    for (size_t i = 0; i < m_.unwind_rows.size(); i++) {
      const UnwindRowRecord& r = m_.unwind_rows[i];
      if (i % (version_ == 2 ? kRowBlock : kRowBlock3) == 0) {
        block(r.pc);
        prev = r.pc;
        s = UnwindRowRecord{};
        s.nsaved = 0;
        prev_head = 0;
        cls = 0;
      }
      encode_row(k, r, s, prev_head, cls, r.pc - prev);
      prev = r.pc;
      s = r;
    }
  }

  void encode_rows(ModuleParts& out) const {
    auto add_index = [&](uint64_t pc, size_t off) {
      uint8_t e[kIndexEntrySize];
      st32(e, static_cast<uint32_t>(pc - base_));
      st32(e + 4, static_cast<uint32_t>(off));
      out.row_index.insert(out.row_index.end(), e, e + kIndexEntrySize);
    };
    if (version_ == 2) {
      ByteSink k{out.row_data};
      rows(k, [&](uint64_t pc) { add_index(pc, out.row_data.size()); });
      return;
    }
    if (m_.unwind_rows.empty()) return;
    if (version_ >= 7) {
      encode_rows7(out, add_index);
      return;
    }
    std::vector<entropy::Counts> counts(version_ >= 4 ? kRowCtxCount4 : kRowCtxCount);
    CountSink cs{counts};
    rows(cs, [](uint64_t) {});
    entropy::BitWriter w;
    const std::vector<entropy::Code> codes = make_codes(counts, w);
    BitSink bs{w, codes};
    rows(bs, [&](uint64_t pc) {
      w.align();
      add_index(pc, w.bytes().size());
    });
    w.align();
    out.row_data = std::move(w.bytes());
  }

  /// Format 7 (doc/bundles.md "Format 7"): the module's distinct rows once, with each row's
  /// successors, then blocks whose rows are ranks in the previous row's successor list and pc deltas.
  template <class AddIndex>
  void encode_rows7(ModuleParts& out, AddIndex add_index) const {
    const std::vector<UnwindRowRecord>& rows = m_.unwind_rows;
    auto less = [](const UnwindRowRecord& a, const UnwindRowRecord& b) { return row_compare7(a, b) < 0; };
    std::vector<UnwindRowRecord> table;
    table.reserve(rows.size());
    for (const UnwindRowRecord& r : rows) {
      UnwindRowRecord t = r;
      t.pc = 0;
      for (size_t i = t.nsaved; i < kMaxSavedRegs; i++) {
        t.saved_reg[i] = 0;
        t.saved_off[i] = 0;
      }
      table.push_back(t);
    }
    std::sort(table.begin(), table.end(), less);
    table.erase(std::unique(table.begin(), table.end(),
                            [](const UnwindRowRecord& a, const UnwindRowRecord& b) { return row_compare7(a, b) == 0; }),
                table.end());
    const size_t n = table.size();
    for (size_t t = 0; t < n; t++) table[t].pc = t;
    std::vector<uint32_t> idx(rows.size());
    for (size_t i = 0; i < rows.size(); i++)
      idx[i] = static_cast<uint32_t>(std::lower_bound(table.begin(), table.end(), rows[i], less) - table.begin());
    // Pairs (previous, this) inside blocks, and each table row's successors by count (ties: index).
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> pairs;
    for (size_t i = 1; i < rows.size(); i++)
      if (i % kRowBlock3 != 0) pairs[{idx[i - 1], idx[i]}]++;
    struct Succ {
      uint32_t row;
      uint64_t count;
      unsigned ctx;  // the pc-delta context
    };
    std::vector<std::vector<Succ>> succ(n);
    for (const auto& [pr, cnt] : pairs) {
      const UnwindRowRecord &a = table[pr.first], &b = table[pr.second];
      succ[pr.first].push_back({pr.second, cnt, kCtx7Delta + row_delta_class7(b.kind, a.cfa_off, b.cfa_off, b.nsaved)});
    }
    for (auto& l : succ)
      std::sort(l.begin(), l.end(), [](const Succ& a, const Succ& b) { return a.count != b.count ? a.count > b.count : a.row < b.row; });
    // The most frequent pairs (at least kPairCtxMin7 times, at most kMaxPairCtx7) get pc-delta contexts
    // of their own, numbered in table order.
    std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> freq;  // count, row, rank
    for (uint32_t t = 0; t < n; t++)
      for (uint32_t k = 0; k < succ[t].size(); k++)
        if (succ[t][k].count >= kPairCtxMin7) freq.emplace_back(succ[t][k].count, t, k);
    std::sort(freq.begin(), freq.end(), [](const auto& a, const auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::make_pair(std::get<1>(a), std::get<2>(a)) < std::make_pair(std::get<1>(b), std::get<2>(b));
    });
    if (freq.size() > kMaxPairCtx7) freq.resize(kMaxPairCtx7);
    std::sort(freq.begin(), freq.end(), [](const auto& a, const auto& b) {
      return std::make_pair(std::get<1>(a), std::get<2>(a)) < std::make_pair(std::get<1>(b), std::get<2>(b));
    });
    unsigned npair = 0;
    for (const auto& f : freq) succ[std::get<1>(f)][std::get<2>(f)].ctx = kRowBlkCtxCount7 + npair++;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> rank;
    for (uint32_t t = 0; t < n; t++)
      for (uint32_t k = 0; k < succ[t].size(); k++) rank[{t, succ[t][k].row}] = k;

    auto table_part = [&](auto& k) {
      k.u(kCtx7Count, n);
      uint8_t prev_head = 0;
      unsigned cls = 0;
      for (size_t t = 0; t < n; t++) encode_row(k, table[t], t == 0 ? UnwindRowRecord{} : table[t - 1], prev_head, cls, t == 0 ? 0 : 1);
      for (size_t t = 0; t < n; t++) {
        k.u(kCtx7SuccCount, succ[t].size());
        for (const Succ& x : succ[t]) {
          k.s(kCtx7Succ, static_cast<int64_t>(x.row) - static_cast<int64_t>(t));
          k.sym(kCtx7PairFlag, x.ctx >= kRowBlkCtxCount7 ? 1 : 0);
        }
      }
    };
    auto block_part = [&](auto& k, auto block) {
      for (size_t i = 0; i < rows.size(); i++) {
        if (i % kRowBlock3 == 0) {
          block(rows[i].pc);
          k.u(kCtx7First, idx[i]);
          continue;
        }
        const uint32_t p = idx[i - 1];
        const uint32_t r = rank.at({p, idx[i]});
        if (succ[p].size() > 1) k.u(kCtx7Rank + rank_bucket7(succ[p].size()), r);
        k.u(succ[p][r].ctx, rows[i].pc - rows[i - 1].pc);
      }
    };
    std::vector<entropy::Counts> tab_counts(kRowTabCtxCount7), blk_counts(kRowBlkCtxCount7 + npair);
    CountSink tc{tab_counts};
    table_part(tc);
    CountSink bc{blk_counts};
    block_part(bc, [](uint64_t) {});
    entropy::BitWriter w;
    const std::vector<entropy::Code> tab_codes = make_codes(tab_counts, w);
    BitSink ts{w, tab_codes};
    table_part(ts);
    const std::vector<entropy::Code> blk_codes = make_codes(blk_counts, w);
    BitSink bs{w, blk_codes};
    block_part(bs, [&](uint64_t pc) {
      w.align();
      add_index(pc, w.bytes().size());
    });
    w.align();
    out.row_data = std::move(w.bytes());
  }

  const ModuleContents& m_;
  std::string label_;
  uint32_t version_;
  DepthIndex dx_;
  std::vector<bool> implicit_;
  StringTable st_;
  std::vector<SymName> sym_names_;  // format 6: how each symbol record's name is coded
  uint64_t base_ = 0;
};

}  // namespace

Result<std::vector<uint8_t>> write_bundle(const BundleContents& contents) { return write_bundle(contents, kFormatVersion); }

Result<std::vector<uint8_t>> write_bundle(const BundleContents& contents, uint32_t version) {
  BundleContents copy = contents;
  return write_bundle(std::move(copy), version);
}

Result<std::vector<uint8_t>> write_bundle(BundleContents&& contents, uint32_t version) {
  if (version < kMinFormatVersion || version > kFormatVersion)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: format version %u is not %u..%u", version, kMinFormatVersion,
                      kFormatVersion);
  if (contents.modules.size() > kMaxModules)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: %zu modules exceed %zu", contents.modules.size(),
                      kMaxModules);
  std::vector<ModuleContents> mods = std::move(contents.modules);
  for (ModuleContents& m : mods)
    if (auto s = prepare_module(m); !s) return s.error();
  std::sort(mods.begin(), mods.end(), [](const ModuleContents& a, const ModuleContents& b) {
    return a.id.kind != b.id.kind ? a.id.kind < b.id.kind : a.id.bytes < b.id.bytes;
  });
  for (size_t i = 1; i < mods.size(); i++)
    if (mods[i].id.kind == mods[i - 1].id.kind && mods[i].id.bytes == mods[i - 1].id.bytes)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s appears twice", module_label(mods[i]).c_str());

  std::vector<uint8_t> sec[kSectionTypeCount + 1];
  std::vector<uint8_t> symtab_sec;  // kSecSymtabRanges
  std::vector<uint8_t> symbols_sec;  // kSecSymbols (format 5)
  std::vector<uint8_t> calls_sec;    // kSecCallSites (format 5)
  bool any_blob = false;
  for (const ModuleContents& m : mods) {
    auto parts = ModuleEncoder(m, module_label(m), version).encode();
    if (!parts) return std::move(parts).error();
    const ModuleParts& p = parts.value();
    uint8_t rec[kModuleSize] = {};
    rec[kModIdKind] = static_cast<uint8_t>(m.id.kind);
    rec[kModIdLen] = static_cast<uint8_t>(m.id.bytes.size());
    if (m.pdb_lines && version < 4)
      return make_error(SPROV_ERR_BUNDLE, "module %s: ranges from a PDB need format 4 (writing format %u)",
                        module_label(m).c_str(), version);
    st16(rec + kModFlags, m.pdb_lines ? kModFlagPdbLines : uint16_t{0});
    st32(rec + kModName, static_cast<uint32_t>(m.name.size()));
    std::memcpy(rec + kModId, m.id.bytes.data(), m.id.bytes.size());
    std::memcpy(rec + kModShaFile, m.sha256_file.data(), 32);
    std::memcpy(rec + kModShaDebug, m.sha256_debug.data(), 32);
    st64(rec + kModBase, p.base);
    auto slice = [&](size_t field, SectionType t, const uint8_t* data, size_t bytes, size_t unit) {
      st64(rec + field, sec[t].size() / unit);
      st64(rec + field + 8, bytes / unit);
      sec[t].insert(sec[t].end(), data, data + bytes);
    };
    std::vector<uint8_t> offs(version == 2 ? p.offs.size() * kStrOffSize : 0);  // format 3: derived from the NULs
    for (size_t i = 0; i < offs.size() / kStrOffSize; i++) st32(offs.data() + i * kStrOffSize, p.offs[i]);
    slice(kModStrings, kSecStrings, p.strings.data(), p.strings.size(), 1);
    slice(kModStrOffs, kSecStrOffs, offs.data(), offs.size(), kStrOffSize);
    slice(kModFuncIndex, kSecFuncIndex, p.func_index.data(), p.func_index.size(), kIndexEntrySize);
    slice(kModFuncData, kSecFuncData, p.func_data.data(), p.func_data.size(), 1);
    slice(kModPadIndex, kSecPadIndex, p.pad_index.data(), p.pad_index.size(), kIndexEntrySize);
    slice(kModPadData, kSecPadData, p.pad_data.data(), p.pad_data.size(), 1);
    slice(kModRowIndex, kSecRowIndex, p.row_index.data(), p.row_index.size(), kIndexEntrySize);
    slice(kModRowData, kSecRowData, p.row_data.data(), p.row_data.size(), 1);
    slice(kModBlob, kSecBlobs, m.debug_blob.data(), m.debug_blob.size(), 1);
    any_blob |= !m.debug_blob.empty();
    st64(rec + kModRangeCount, m.ranges.size());
    st64(rec + kModPadCount, m.return_pads.size());
    st64(rec + kModRowCount, m.unwind_rows.size());
    st64(rec + kModStrBytes, p.str_bytes);
    sec[kSecModules].insert(sec[kSecModules].end(), rec, rec + kModuleSize);
    if (!p.symbols.empty()) {
      uint8_t head[kSymbolsHeadSize];
      st32(head, static_cast<uint32_t>(sec[kSecModules].size() / kModuleSize - 1));
      st32(head + 4, static_cast<uint32_t>(m.symbols.size()));
      st64(head + 8, p.symbols.size());
      symbols_sec.insert(symbols_sec.end(), head, head + kSymbolsHeadSize);
      symbols_sec.insert(symbols_sec.end(), p.symbols.begin(), p.symbols.end());
    }
    if (!p.calls.empty()) {
      uint8_t head[kCallSitesHeadSize] = {};
      st32(head, static_cast<uint32_t>(sec[kSecModules].size() / kModuleSize - 1));
      st32(head + 4, static_cast<uint32_t>(m.call_sites.size()));
      st32(head + 8, static_cast<uint32_t>(m.call_functions.size()));
      st32(head + 12, static_cast<uint32_t>(m.call_symbols.size()));
      st64(head + 16, p.calls.size());
      calls_sec.insert(calls_sec.end(), head, head + kCallSitesHeadSize);
      calls_sec.insert(calls_sec.end(), p.calls.begin(), p.calls.end());
    }
    // Symbol-table ranges: depth-0 records (sorted first by prepare_module), touching ones merged.
    std::vector<std::pair<uint64_t, uint64_t>> iv;
    for (const RangeRecord& r : m.ranges) {
      if (r.depth != 0) break;
      if (!r.from_symtab) continue;
      if (!iv.empty() && iv.back().second == r.start)
        iv.back().second += r.length;
      else
        iv.emplace_back(r.start, r.start + r.length);
    }
    if (!iv.empty()) {
      size_t w = 0;
      std::vector<uint8_t> ent(8 * (iv.size() + 1));
      st32(ent.data(), static_cast<uint32_t>(sec[kSecModules].size() / kModuleSize - 1));
      st32(ent.data() + 4, static_cast<uint32_t>(iv.size()));
      for (const auto& [lo, hi] : iv) {
        w += 8;
        if (hi - lo > UINT32_MAX)
          return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: symbol-table ranges 0x%" PRIx64
                            "..0x%" PRIx64 " exceed 4 GiB", module_label(m).c_str(), lo, hi);
        st32(ent.data() + w, static_cast<uint32_t>(lo - p.base));
        st32(ent.data() + w + 4, static_cast<uint32_t>(hi - lo));
      }
      symtab_sec.insert(symtab_sec.end(), ent.begin(), ent.end());
    }
  }

  // Layout: header, section table, sections in type order, each 8-aligned (zero padding).
  // Optional sections follow the required ones (type order: bit 31 set sorts last).
  const uint32_t nreq = any_blob ? kSectionTypeCount : kSectionTypeCount - 1;
  const uint32_t nsec =
      nreq + (symtab_sec.empty() ? 0 : 1) + (symbols_sec.empty() ? 0 : 1) + (calls_sec.empty() ? 0 : 1);
  size_t off = align_up(kHeaderSize + nsec * kSectionEntrySize);
  uint64_t sec_off[kSectionTypeCount + 1] = {};
  for (uint32_t t = 1; t <= nreq; t++) {
    sec_off[t] = off;
    off = align_up(off + sec[t].size());
  }
  const uint64_t symtab_off = off;
  off = align_up(off + symtab_sec.size());
  const uint64_t symbols_off = off;
  off = align_up(off + symbols_sec.size());
  const uint64_t calls_off = off;
  off = align_up(off + calls_sec.size());
  std::vector<uint8_t> out(off, 0);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  st32(out.data() + 8, version);
  st32(out.data() + 12, nsec);
  st64(out.data() + 16, out.size());
  if (!symtab_sec.empty()) {
    uint8_t* e = out.data() + kHeaderSize + nreq * kSectionEntrySize;
    st32(e, kSecSymtabRanges);
    st64(e + 8, symtab_off);
    st64(e + 16, symtab_sec.size());
    std::memcpy(out.data() + symtab_off, symtab_sec.data(), symtab_sec.size());
  }
  if (!symbols_sec.empty()) {
    uint8_t* e = out.data() + kHeaderSize + (nreq + (symtab_sec.empty() ? 0 : 1)) * kSectionEntrySize;
    st32(e, kSecSymbols);
    st64(e + 8, symbols_off);
    st64(e + 16, symbols_sec.size());
    std::memcpy(out.data() + symbols_off, symbols_sec.data(), symbols_sec.size());
  }
  if (!calls_sec.empty()) {
    uint8_t* e = out.data() + kHeaderSize + (nsec - 1) * kSectionEntrySize;
    st32(e, kSecCallSites);
    st64(e + 8, calls_off);
    st64(e + 16, calls_sec.size());
    std::memcpy(out.data() + calls_off, calls_sec.data(), calls_sec.size());
  }
  for (uint32_t t = 1; t <= nreq; t++) {
    uint8_t* e = out.data() + kHeaderSize + (t - 1) * kSectionEntrySize;
    st32(e, t);
    st64(e + 8, sec_off[t]);
    st64(e + 16, sec[t].size());
    if (!sec[t].empty()) std::memcpy(out.data() + sec_off[t], sec[t].data(), sec[t].size());
  }
  return out;
}

}  // namespace stackprov::bundle
