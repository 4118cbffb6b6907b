// SPDX-License-Identifier: Apache-2.0
// Bundle writer: validates neutral records, sorts them and serialises the canonical file (doc/bundles.md).

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"

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
  if (kind < 1 || kind > 3)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module id kind %d is not 1..3", kind);
  if (m.id.bytes.empty() || m.id.bytes.size() > kMaxIdBytes)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: id of %zu bytes is not 1..%zu",
                      label.c_str(), m.id.bytes.size(), kMaxIdBytes);
  if (m.id.kind != IdKind::kElfBuildId && m.id.bytes.size() != (m.id.kind == IdKind::kPdbGuidAge ? 20u : 16u))
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
  }
  std::sort(m.ranges.begin(), m.ranges.end(), [](const RangeRecord& a, const RangeRecord& b) {
    return a.depth != b.depth ? a.depth < b.depth : a.start < b.start;
  });
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

/// A module's string table: sorted unique strings, "" at offset 0, each NUL-terminated.
struct StringTable {
  std::vector<uint8_t> bytes;
  std::unordered_map<std::string_view, uint32_t> offsets;

  uint32_t ref(const std::string& s) const { return offsets.at(s); }
};

Result<StringTable> build_strings(const ModuleContents& m) {
  std::vector<std::string_view> all;
  all.push_back("");
  all.push_back(m.name);
  for (const RangeRecord& r : m.ranges) {
    all.push_back(r.function);
    all.push_back(r.file);
    all.push_back(r.call_file);
  }
  for (const ReturnPadRecord& p : m.return_pads)
    for (const FrameRecord& f : p.frames) {
      all.push_back(f.function);
      all.push_back(f.file);
    }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  StringTable t;
  for (std::string_view s : all) {
    if (t.bytes.size() + s.size() + 1 > UINT32_MAX)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: string table exceeds 4 GiB",
                        module_label(m).c_str());
    t.offsets.emplace(s, static_cast<uint32_t>(t.bytes.size()));
    t.bytes.insert(t.bytes.end(), s.begin(), s.end());
    t.bytes.push_back(0);
  }
  return t;
}

size_t align_up(size_t v) { return (v + kSectionAlign - 1) & ~(kSectionAlign - 1); }

}  // namespace

Result<std::vector<uint8_t>> write_bundle(const BundleContents& contents) {
  if (contents.modules.size() > kMaxModules)
    return make_error(SPROV_ERR_BUNDLE, "bundle writer: %zu modules exceed %zu", contents.modules.size(),
                      kMaxModules);
  std::vector<ModuleContents> mods = contents.modules;
  for (ModuleContents& m : mods)
    if (auto s = prepare_module(m); !s) return s.error();
  std::sort(mods.begin(), mods.end(), [](const ModuleContents& a, const ModuleContents& b) {
    return a.id.kind != b.id.kind ? a.id.kind < b.id.kind : a.id.bytes < b.id.bytes;
  });
  for (size_t i = 1; i < mods.size(); i++)
    if (mods[i].id.kind == mods[i - 1].id.kind && mods[i].id.bytes == mods[i - 1].id.bytes)
      return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s appears twice", module_label(mods[i]).c_str());

  std::vector<StringTable> strings;
  strings.reserve(mods.size());
  for (const ModuleContents& m : mods) {
    auto t = build_strings(m);
    if (!t) return std::move(t).error();
    strings.push_back(std::move(t.value()));
  }

  // Section payloads.
  std::vector<uint8_t> sec[kSectionTypeCount + 1];
  uint64_t n_ranges = 0, n_pads = 0, n_frames = 0, n_rows = 0;
  bool any_blob = false;
  for (size_t mi = 0; mi < mods.size(); mi++) {
    const ModuleContents& m = mods[mi];
    const StringTable& st = strings[mi];
    uint8_t rec[kModuleSize] = {};
    rec[kModIdKind] = static_cast<uint8_t>(m.id.kind);
    rec[kModIdLen] = static_cast<uint8_t>(m.id.bytes.size());
    st32(rec + kModName, st.ref(m.name));
    std::memcpy(rec + kModId, m.id.bytes.data(), m.id.bytes.size());
    std::memcpy(rec + kModShaFile, m.sha256_file.data(), 32);
    std::memcpy(rec + kModShaDebug, m.sha256_debug.data(), 32);
    st64(rec + kModStrings, sec[kSecStrings].size());
    st64(rec + kModStrings + 8, st.bytes.size());
    sec[kSecStrings].insert(sec[kSecStrings].end(), st.bytes.begin(), st.bytes.end());

    st64(rec + kModRanges, n_ranges);
    st64(rec + kModRanges + 8, m.ranges.size());
    for (const RangeRecord& r : m.ranges) {
      uint8_t b[kRangeSize] = {};
      st64(b, r.start);
      st32(b + 8, r.length);
      st16(b + 12, r.depth);
      st32(b + 16, st.ref(r.function));
      st32(b + 20, st.ref(r.file));
      st32(b + 24, r.line);
      st32(b + 28, r.column);
      st32(b + 32, st.ref(r.call_file));
      st32(b + 36, r.call_line);
      st32(b + 40, r.call_column);
      sec[kSecRanges].insert(sec[kSecRanges].end(), b, b + kRangeSize);
    }
    n_ranges += m.ranges.size();

    st64(rec + kModPads, n_pads);
    st64(rec + kModPads + 8, m.return_pads.size());
    const uint64_t frames_first = n_frames;
    uint64_t local_frames = 0;
    for (const ReturnPadRecord& p : m.return_pads) {
      if (local_frames > UINT32_MAX - p.frames.size() || local_frames + p.frames.size() > kMaxRecords)
        return make_error(SPROV_ERR_BUNDLE, "bundle writer: module %s: more than %" PRIu64 " return-pad frames",
                          module_label(m).c_str(), kMaxRecords);
      uint8_t b[kPadSize] = {};
      st64(b, p.addr);
      st32(b + 8, static_cast<uint32_t>(local_frames));
      st32(b + 12, static_cast<uint32_t>(p.frames.size()));
      sec[kSecPads].insert(sec[kSecPads].end(), b, b + kPadSize);
      for (const FrameRecord& f : p.frames) {
        uint8_t fb[kPadFrameSize] = {};
        st32(fb, st.ref(f.function));
        st32(fb + 4, st.ref(f.file));
        st32(fb + 8, f.line);
        st32(fb + 12, f.column);
        sec[kSecPadFrames].insert(sec[kSecPadFrames].end(), fb, fb + kPadFrameSize);
      }
      local_frames += p.frames.size();
    }
    n_pads += m.return_pads.size();
    n_frames += local_frames;
    st64(rec + kModPadFrames, frames_first);
    st64(rec + kModPadFrames + 8, local_frames);

    st64(rec + kModUnwind, n_rows);
    st64(rec + kModUnwind + 8, m.unwind_rows.size());
    for (const UnwindRowRecord& r : m.unwind_rows) {
      uint8_t b[kUnwindSize] = {};
      st64(b, r.pc);
      b[8] = r.kind;
      b[9] = r.cfa_reg;
      b[10] = r.ra_kind;
      b[11] = r.ra_reg;
      st32(b + 12, static_cast<uint32_t>(r.cfa_off));
      b[16] = static_cast<uint8_t>(r.ra_off);
      b[17] = r.nsaved;
      b[18] = static_cast<uint8_t>((r.signal_frame ? kRowSignalFrame : 0) |
                                   (r.from_debug_frame ? kRowFromDebugFrame : 0));
      // Only the first nsaved pairs are meaningful; the rest are written as zero.
      for (int i = 0; i < r.nsaved; i++) {
        b[20 + i] = r.saved_reg[static_cast<size_t>(i)];
        b[32 + i] = static_cast<uint8_t>(r.saved_off[static_cast<size_t>(i)]);
      }
      sec[kSecUnwind].insert(sec[kSecUnwind].end(), b, b + kUnwindSize);
    }
    n_rows += m.unwind_rows.size();

    st64(rec + kModBlob, sec[kSecBlobs].size());
    st64(rec + kModBlob + 8, m.debug_blob.size());
    sec[kSecBlobs].insert(sec[kSecBlobs].end(), m.debug_blob.begin(), m.debug_blob.end());
    any_blob |= !m.debug_blob.empty();
    sec[kSecModules].insert(sec[kSecModules].end(), rec, rec + kModuleSize);
  }

  // Layout: header, section table, sections in type order, each 8-aligned (zero padding).
  const uint32_t nsec = any_blob ? kSectionTypeCount : kSectionTypeCount - 1;
  size_t off = align_up(kHeaderSize + nsec * kSectionEntrySize);
  uint64_t sec_off[kSectionTypeCount + 1] = {};
  for (uint32_t t = 1; t <= nsec; t++) {
    sec_off[t] = off;
    off = align_up(off + sec[t].size());
  }
  std::vector<uint8_t> out(off, 0);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  st32(out.data() + 8, kFormatVersion);
  st32(out.data() + 12, nsec);
  st64(out.data() + 16, out.size());
  for (uint32_t t = 1; t <= nsec; t++) {
    uint8_t* e = out.data() + kHeaderSize + (t - 1) * kSectionEntrySize;
    st32(e, t);
    st64(e + 8, sec_off[t]);
    st64(e + 16, sec[t].size());
    if (!sec[t].empty()) std::memcpy(out.data() + sec_off[t], sec[t].data(), sec[t].size());
  }
  return out;
}

}  // namespace stackprov::bundle
