// SPDX-License-Identifier: Apache-2.0
// Split DWARF: .debug_cu_index parsing and the .dwo/.dwp finder behind DwarfIndex's DwoLoader.
#include "dwarf/split_dwarf.hpp"

#include <algorithm>

#include "core/open_file.hpp"
#include "dwarf/object_sections.hpp"

namespace stackprov::dwarf {

namespace {
constexpr uint32_t kMaxDwpUnits = 1u << 24;
constexpr uint32_t kMaxDwpColumns = 16;

SectionBytes slice(SectionBytes s, const DwpIndex::Contribution& c) {
  if (!c.present) return s;
  if (s.empty() || c.offset > s.size || c.size > s.size - c.offset) return {};
  return SectionBytes{s.data + c.offset, static_cast<size_t>(c.size)};
}

}  // namespace

Result<DwpIndex> DwpIndex::parse(SectionBytes s, bool be) {
  DwpIndex ix;
  Cursor c(s, 0, be);
  uint32_t version = c.u32();
  // DWARF 5: uhalf version (5) + uhalf padding; read as one u32 that is 5 on little-endian.
  if (be && (version >> 16) == 5) version = 5;
  if ((version & 0xffff) == 5) version = 5;
  const uint32_t columns = c.u32(), units = c.u32(), slots = c.u32();
  if (!c.ok) return make_error(SPROV_ERR_DWARF, ".debug_cu_index: truncated header");
  if (version != 2 && version != 5) return make_error(SPROV_ERR_DWARF, ".debug_cu_index: version %u", version);
  if (columns == 0 || columns > kMaxDwpColumns || units > kMaxDwpUnits || slots > kMaxDwpUnits * 2u ||
      units > slots)
    return make_error(SPROV_ERR_DWARF, ".debug_cu_index: bad sizes (%u columns, %u units, %u slots)", columns, units,
                      slots);
  const uint64_t need = 16 + uint64_t{slots} * 12 + uint64_t{columns} * 4 + uint64_t{units} * columns * 8;
  if (need > s.size) return make_error(SPROV_ERR_DWARF, ".debug_cu_index: %u units do not fit", units);
  const size_t sig_at = 16, idx_at = sig_at + size_t{slots} * 8, col_at = idx_at + size_t{slots} * 4;
  const size_t off_at = col_at + size_t{columns} * 4, size_at = off_at + size_t{units} * columns * 4;
  std::vector<uint32_t> ids(columns);
  Cursor cc(s, col_at, be);
  for (uint32_t i = 0; i < columns; i++) ids[i] = cc.u32();
  ix.version_ = version;
  for (uint32_t slot = 0; slot < slots; slot++) {
    Cursor sc(s, sig_at + size_t{slot} * 8, be);
    const uint64_t sig = sc.u64();
    Cursor ic(s, idx_at + size_t{slot} * 4, be);
    const uint32_t row = ic.u32();
    if (!sc.ok || !ic.ok) break;
    if (row == 0 || row > units) continue;  // empty slot (or corrupt index)
    Row r;
    for (uint32_t col = 0; col < columns; col++) {
      Cursor oc(s, off_at + (size_t{row - 1} * columns + col) * 4, be);
      Cursor zc(s, size_at + (size_t{row - 1} * columns + col) * 4, be);
      Contribution k{oc.u32(), zc.u32(), true};
      if (!oc.ok || !zc.ok) continue;
      const uint32_t id = ids[col];
      // DW_SECT_*: 1 INFO, 3 ABBREV, 4 LINE, 6 STR_OFFSETS; v5 8 RNGLISTS (v2: 8 is MACRO).
      if (id == 1) r.info = k;
      else if (id == 3) r.abbrev = k;
      else if (id == 4) r.line = k;
      else if (id == 6) r.str_offsets = k;
      else if (id == 8 && version == 5) r.rnglists = k;
    }
    ix.rows_.emplace_back(sig, r);
  }
  std::sort(ix.rows_.begin(), ix.rows_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return ix;
}

bool DwpIndex::find(uint64_t dwo_id, Row* out) const {
  auto it = std::lower_bound(rows_.begin(), rows_.end(), dwo_id,
                             [](const std::pair<uint64_t, Row>& p, uint64_t id) { return p.first < id; });
  if (it == rows_.end() || it->first != dwo_id) return false;
  *out = it->second;
  return true;
}

bool find_dwo_unit(SectionBytes info, bool be, uint64_t dwo_id, uint64_t* pos) {
  size_t p = static_cast<size_t>(*pos);
  for (size_t n = 0; n < (size_t{1} << 20) && p < info.size; n++) {
    Cursor c(info, p, be);
    bool is64 = false;
    const uint64_t len = c.initial_length(&is64);
    if (!c.ok || len > c.remaining() || len < 7) return false;
    const size_t end = c.pos + static_cast<size_t>(len);
    const uint16_t version = c.u16();
    if (version >= 5) {
      const uint8_t type = c.u8();
      c.u8();
      c.offset(is64);
      const uint64_t id = c.u64();
      if (c.ok && type == 5 && (dwo_id == 0 || id == dwo_id)) {
        *pos = p;
        return true;
      }
    } else if (version >= 2) {
      *pos = p;  // DWARF 4 .debug_info.dwo holds compile units only (types are in .debug_types.dwo)
      return true;
    }
    p = end;
  }
  return false;
}

SplitDwarfFiles::SplitDwarfFiles(std::string binary_path, std::vector<std::string> dwp_candidates)
    : dwp_candidates_(std::move(dwp_candidates)) {
  const size_t slash = binary_path.rfind('/');
  binary_dir_ = slash == std::string::npos ? "." : binary_path.substr(0, slash == 0 ? 1 : slash);
}

bool SplitDwarfFiles::open_dwp() {
  if (dwp_tried_) return dwp_ != nullptr;
  dwp_tried_ = true;
  for (const auto& p : dwp_candidates_) {
    auto img = object::open(p);
    if (!img.ok()) continue;
    auto ix = DwpIndex::parse(section_bytes(**img, ".debug_cu_index"), (*img)->big_endian());
    if (!ix.ok()) continue;
    dwp_ = std::move(img).value();
    dwp_index_ = std::move(ix).value();
    return true;
  }
  return false;
}

std::string SplitDwarfFiles::dwp_path() {
  std::lock_guard<std::mutex> lock(mu_);
  return dwp_ ? dwp_->path() : std::string();
}

bool SplitDwarfFiles::load(uint64_t dwo_id, std::string_view dwo_name, std::string_view comp_dir, DwoSections* out) {
  std::lock_guard<std::mutex> lock(mu_);
  DwpIndex::Row row;
  if (dwo_id != 0 && open_dwp() && dwp_index_.find(dwo_id, &row)) {
    const object::ObjectImage& f = *dwp_;
    out->info = slice(section_bytes(f, ".debug_info.dwo"), row.info);
    out->abbrev = slice(section_bytes(f, ".debug_abbrev.dwo"), row.abbrev);
    out->line = slice(section_bytes(f, ".debug_line.dwo"), row.line);
    out->str_offsets = slice(section_bytes(f, ".debug_str_offsets.dwo"), row.str_offsets);
    out->rnglists = slice(section_bytes(f, ".debug_rnglists.dwo"), row.rnglists);
    out->str = section_bytes(f, ".debug_str.dwo");
    out->owner = dwp_;
    out->path = dwp_->path();
    return !out->info.empty() && !out->abbrev.empty();
  }
  if (dwo_name.empty()) return false;
  std::vector<std::string> cands;
  const std::string name(dwo_name);
  // Names from the (possibly a target's) DWARF resolve in the binary's root: a target's
  // comp_dir or absolute dwo_name never opens a host file (core/open_file.hpp under_root_of).
  // The unit found must carry the skeleton's dwo_id (find_dwo_unit below).
  const bool target = !target_root_of(binary_dir_).empty();
  if (name.front() == '/') {
    cands.push_back(under_root_of(binary_dir_, name));
  } else if (target && !relative_names_stay_in_root(binary_dir_)) {
    // A target's module read through map_files: no directory of its own to anchor relative
    // names in (".." from /proc/PID/map_files leads to the host's files); only absolute ones.
  } else {
    // A relative comp_dir of a target's module has no anchor in its root (it would be opened
    // relative to our working directory): left out.
    if (!comp_dir.empty() && (comp_dir.front() == '/' || !target))
      cands.push_back(under_root_of(binary_dir_, std::string(comp_dir) + "/" + name));
    cands.push_back(binary_dir_ + "/" + name);
    const size_t slash = name.rfind('/');
    if (slash != std::string::npos) cands.push_back(binary_dir_ + "/" + name.substr(slash + 1));
  }
  for (const auto& p : cands) {
    std::shared_ptr<const object::ObjectImage> f;
    if (auto it = dwos_.find(p); it != dwos_.end()) {
      f = it->second;
    } else {
      auto img = object::open(p);
      if (!img.ok()) {
        dwos_.emplace(p, nullptr);
        continue;
      }
      f = std::move(img).value();
      dwos_.emplace(p, f);
    }
    if (!f) continue;
    SectionBytes info = section_bytes(*f, ".debug_info.dwo");
    uint64_t pos = 0;
    if (!find_dwo_unit(info, f->big_endian(), dwo_id, &pos)) continue;
    out->info = info;
    out->abbrev = section_bytes(*f, ".debug_abbrev.dwo");
    out->line = section_bytes(*f, ".debug_line.dwo");
    out->str_offsets = section_bytes(*f, ".debug_str_offsets.dwo");
    out->rnglists = section_bytes(*f, ".debug_rnglists.dwo");
    out->str = section_bytes(*f, ".debug_str.dwo");
    out->owner = f;
    out->path = f->path();
    return !out->abbrev.empty();
  }
  return false;
}

}  // namespace stackprov::dwarf
