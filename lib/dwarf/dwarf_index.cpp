// SPDX-License-Identifier: Apache-2.0
// DWARF 2–5 unit headers, abbreviations, attribute forms, range lists and the per-unit subroutine address map.
#include "dwarf/dwarf_index.hpp"

#include "dwarf/dwarf_index_internal.hpp"

#include "core/once.hpp"

#include "dwarf/split_dwarf.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <unordered_map>

namespace stackprov::dwarf {


namespace {

/// Size of a value of `form` in unit `u`, or -1 when it varies (LEB128, strings, blocks, indirect).
int fixed_form_size(uint16_t form, const DwarfIndex::Unit& u) {
  const int offset = u.is64 ? 8 : 4;
  switch (form) {
    case kFormAddr: return u.addr_size;
    case kFormData1: case kFormFlag: case kFormRef1: case kFormStrx1: case kFormAddrx1: return 1;
    case kFormData2: case kFormRef2: case kFormStrx2: case kFormAddrx2: return 2;
    case kFormStrx3: case kFormAddrx3: return 3;
    case kFormData4: case kFormRef4: case kFormRefSup4: case kFormStrx4: case kFormAddrx4: return 4;
    case kFormData8: case kFormRef8: case kFormRefSig8: case kFormRefSup8: return 8;
    case kFormData16: return 16;
    case kFormStrp: case kFormLineStrp: case kFormSecOffset: case kFormStrpSup: case kFormGnuRefAlt:
    case kFormGnuStrpAlt:
      return offset;
    case kFormRefAddr: return u.version <= 2 ? u.addr_size : offset;
    case kFormFlagPresent: case kFormImplicitConst: return 0;
    default: return -1;
  }
}

/// Reads the abbreviation declaration after its code (tag, children, attribute specs appended
/// to `specs`) into `a`. False on a truncated or over-long table.
bool read_abbrev(Cursor& c, Abbrev* a, std::vector<AttrSpec>* specs) {
  const uint64_t tag = c.uleb();
  a->tag = tag > 0xffff ? 0 : static_cast<uint16_t>(tag);
  a->children = c.u8() != 0;
  a->valid = true;
  a->first = static_cast<uint32_t>(specs->size());
  for (;;) {
    const uint64_t at = c.uleb(), form = c.uleb();
    if (!c.ok) return false;
    if (at == 0 && form == 0) break;
    AttrSpec sp;
    sp.at = at > 0xffff ? 0 : static_cast<uint16_t>(at);
    sp.form = static_cast<uint16_t>(form > 0xffff ? 0 : form);
    if (form == kFormImplicitConst) sp.implicit = c.sleb();
    if (specs->size() >= kMaxAbbrevs) return false;
    specs->push_back(sp);
  }
  a->count = static_cast<uint32_t>(specs->size() - a->first);
  return c.ok;
}

}  // namespace

bool parse_abbrevs(const DwarfSections& s, const DwarfIndex::Unit& u, AbbrevTable* t) {
  const uint64_t off = u.abbrev_offset;
  if (off >= s.abbrev.size) return false;
  Cursor c(s.abbrev, off, s.big_endian);
  std::vector<std::pair<uint64_t, Abbrev>> all;
  while (c.ok) {
    uint64_t code = c.uleb();
    if (!c.ok) return false;
    if (code == 0) break;
    Abbrev a;
    if (!read_abbrev(c, &a, &t->specs)) return false;
    // The DIE walk skips DIEs it does not read in one step when their size is fixed.
    int64_t size = 0;
    for (uint32_t i = a.first; i < a.first + a.count && size >= 0; i++) {
      const int f = fixed_form_size(t->specs[i].form, u);
      size = f < 0 || size + f > INT32_MAX ? -1 : size + f;
    }
    a.fixed_size = static_cast<int32_t>(size);
    if (all.size() >= kMaxAbbrevs) return false;
    all.emplace_back(code, a);
  }
  uint64_t max_code = 0;
  for (auto& p : all) max_code = std::max(max_code, p.first);
  if (max_code < 4 * all.size() + 64) {
    t->dense.resize(max_code + 1);
    for (auto& p : all) t->dense[p.first] = p.second;
  } else {
    std::stable_sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first < b.first; });
    t->sparse = std::move(all);
  }
  t->ok = true;
  return true;
}

namespace {

/// Only the abbreviation `want` of `u`'s table, into `t` (reused; its `sparse` holds it): build()
/// reads one DIE per unit, and a unit's whole table is parsed when the unit is first looked up.
bool find_abbrev(const DwarfSections& s, const DwarfIndex::Unit& u, uint64_t want, AbbrevTable* t) {
  t->dense.clear();
  t->sparse.clear();
  t->specs.clear();
  t->ok = false;
  if (u.abbrev_offset >= s.abbrev.size) return false;
  Cursor c(s.abbrev, u.abbrev_offset, s.big_endian);
  for (size_t n = 0; c.ok && n < kMaxAbbrevs; n++) {
    const uint64_t code = c.uleb();
    if (!c.ok || code == 0) return false;
    Abbrev a;
    t->specs.clear();  // only the wanted declaration's specs are kept
    if (!read_abbrev(c, &a, &t->specs)) return false;
    if (code == want) {
      t->sparse.emplace_back(code, a);
      t->ok = true;
      return true;
    }
  }
  return false;
}

}  // namespace

/// The block of `v->u` bytes at the cursor: `v->str`/`v->str_len` name it, the cursor skips it.
static bool read_block(Cursor& c, AttrVal* v) {
  if (!c.ok) return false;
  v->str = reinterpret_cast<const char*>(c.data + c.pos);
  v->str_len = static_cast<size_t>(v->u);
  return c.skip(v->u);
}

// Reads one attribute value of `form` (DWARF 5 section 7.5.6).
bool read_attr(Cursor& c, const DwarfIndex::Unit& u, uint16_t form, int64_t implicit, AttrVal* v) {
  for (int indirections = 0; indirections < 4; indirections++) {
    v->form = form;
    switch (form) {
      case kFormAddr: v->u = c.fixed(u.addr_size); return c.ok;
      // Blocks: `str` points at the bytes, `str_len` is their length.
      case kFormBlock2: v->u = c.u16(); return read_block(c, v);
      case kFormBlock4: v->u = c.u32(); return read_block(c, v);
      case kFormBlock: case kFormExprloc: v->u = c.uleb(); return read_block(c, v);
      case kFormBlock1: v->u = c.u8(); return read_block(c, v);
      case kFormData1: case kFormFlag: case kFormRef1: case kFormStrx1: case kFormAddrx1: v->u = c.u8(); return c.ok;
      case kFormData2: case kFormRef2: case kFormStrx2: case kFormAddrx2: v->u = c.u16(); return c.ok;
      case kFormStrx3: case kFormAddrx3: v->u = c.fixed(3); return c.ok;
      case kFormData4: case kFormRef4: case kFormRefSup4: case kFormStrx4: case kFormAddrx4: v->u = c.u32(); return c.ok;
      case kFormData8: case kFormRef8: case kFormRefSig8: case kFormRefSup8: v->u = c.u64(); return c.ok;
      case kFormData16: c.skip(16); return c.ok;
      case kFormString: {
        std::string_view s = c.cstr();
        v->str = s.data();
        v->str_len = s.size();
        return c.ok;
      }
      case kFormSdata: v->u = static_cast<uint64_t>(c.sleb()); return c.ok;
      case kFormUdata: case kFormRefUdata: case kFormStrx: case kFormAddrx: case kFormLoclistx:
      case kFormRnglistx: case kFormGnuAddrIndex: case kFormGnuStrIndex:
        v->u = c.uleb();
        return c.ok;
      case kFormStrp: case kFormLineStrp: case kFormSecOffset: case kFormStrpSup: case kFormGnuRefAlt:
      case kFormGnuStrpAlt:
        v->u = c.offset(u.is64);
        return c.ok;
      case kFormRefAddr: v->u = u.version <= 2 ? c.fixed(u.addr_size) : c.offset(u.is64); return c.ok;
      case kFormFlagPresent: v->u = 1; return true;
      case kFormImplicitConst: v->u = static_cast<uint64_t>(implicit); return true;
      case kFormIndirect: form = static_cast<uint16_t>(c.uleb()); if (!c.ok) return false; continue;
      default: c.fail(); return false;
    }
  }
  c.fail();
  return false;
}

std::string_view attr_string(const DwarfSections& s, const DwarfIndex::Unit& u, const AttrVal& v) {
  switch (v.form) {
    case kFormString: return std::string_view(v.str, v.str_len);
    case kFormStrp: return section_string(s.str, v.u);
    case kFormLineStrp: return section_string(s.line_str, v.u);
    case kFormGnuStrpAlt: case kFormStrpSup: return section_string(s.str_sup, v.u);
    case kFormStrx: case kFormStrx1: case kFormStrx2: case kFormStrx3: case kFormStrx4: case kFormGnuStrIndex: {
      const unsigned w = u.is64 ? 8 : 4;
      if (v.u > (s.str_offsets.size / w)) return {};
      Cursor c(s.str_offsets, static_cast<size_t>(u.str_offsets_base + v.u * w), s.big_endian);
      uint64_t off = c.fixed(w);
      return c.ok ? section_string(s.str, off) : std::string_view();
    }
    default: return {};  // non-strings
  }
}

bool attr_address(const DwarfSections& s, const DwarfIndex::Unit& u, const AttrVal& v, uint64_t* out) {
  switch (v.form) {
    case kFormAddr: *out = v.u; return true;
    case kFormAddrx: case kFormAddrx1: case kFormAddrx2: case kFormAddrx3: case kFormAddrx4: case kFormGnuAddrIndex: {
      if (u.addr_size == 0 || v.u > s.addr.size / u.addr_size) return false;
      Cursor c(s.addr, static_cast<size_t>(u.addr_base + v.u * u.addr_size), s.big_endian);
      *out = c.fixed(u.addr_size);
      return c.ok;
    }
    default: return false;
  }
}

bool attr_ref(const DwarfIndex::Unit& u, const AttrVal& v, uint64_t* out, bool* alt) {
  *alt = false;
  switch (v.form) {
    case kFormRef1: case kFormRef2: case kFormRef4: case kFormRef8: case kFormRefUdata:
      *out = u.offset + v.u;
      return v.u < u.end - u.offset;
    case kFormRefAddr: *out = v.u; return true;
    case kFormGnuRefAlt: case kFormRefSup4: case kFormRefSup8: *out = v.u; *alt = true; return true;
    default: return false;  // ref_sig8: type units are not needed for names of code
  }
}

// Address ranges of a DW_AT_ranges value (DWARF 4 .debug_ranges, DWARF 5 .debug_rnglists).
static void attr_ranges(const DwarfSections& s, const DwarfIndex::Unit& u, const AttrVal& v,
                        std::vector<std::pair<uint64_t, uint64_t>>* out) {
  const unsigned as = u.addr_size;
  if (as != 4 && as != 8 && as != 2) return;
  uint64_t base = u.base_address;
  if (u.version < 5) {
    if (v.form != kFormSecOffset && v.form != kFormData4 && v.form != kFormData8) return;
    const uint64_t roff = v.u + u.ranges_base;
    if (roff < v.u || roff >= s.ranges.size) return;
    Cursor c(s.ranges, static_cast<size_t>(roff), s.big_endian);
    const uint64_t max = as == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * as)) - 1;
    for (size_t i = 0; i < kMaxRangeEntries && c.ok; i++) {
      uint64_t a = c.fixed(as), b = c.fixed(as);
      if (!c.ok || (a == 0 && b == 0)) break;
      if (a == max) {
        base = b;
        continue;
      }
      out->emplace_back(a + base, b + base);
    }
    return;
  }
  uint64_t off = v.u;
  if (v.form == kFormRnglistx) {
    const unsigned w = u.is64 ? 8 : 4;
    if (v.u > s.rnglists.size / w) return;
    Cursor ic(s.rnglists, static_cast<size_t>(u.rnglists_base + v.u * w), s.big_endian);
    off = u.rnglists_base + ic.fixed(w);
    if (!ic.ok) return;
  } else if (v.form != kFormSecOffset) {
    return;
  }
  if (off >= s.rnglists.size) return;
  Cursor c(s.rnglists, static_cast<size_t>(off), s.big_endian);
  auto addrx = [&](uint64_t idx, uint64_t* a) {
    AttrVal av;
    av.form = kFormAddrx;
    av.u = idx;
    return attr_address(s, u, av, a);
  };
  for (size_t i = 0; i < kMaxRangeEntries && c.ok; i++) {
    uint8_t kind = c.u8();
    uint64_t a = 0, b = 0;
    switch (kind) {
      case 0: return;  // DW_RLE_end_of_list
      case 1:          // DW_RLE_base_addressx
        if (!addrx(c.uleb(), &base)) return;
        break;
      case 2: {  // DW_RLE_startx_endx
        uint64_t x = c.uleb(), y = c.uleb();
        if (addrx(x, &a) && addrx(y, &b)) out->emplace_back(a, b);
        break;
      }
      case 3: {  // DW_RLE_startx_length
        uint64_t x = c.uleb(), len = c.uleb();
        if (addrx(x, &a)) out->emplace_back(a, a + len);
        break;
      }
      case 4:  // DW_RLE_offset_pair
        a = c.uleb();
        b = c.uleb();
        out->emplace_back(base + a, base + b);
        break;
      case 5: base = c.fixed(as); break;  // DW_RLE_base_address
      case 6:                             // DW_RLE_start_end
        a = c.fixed(as);
        b = c.fixed(as);
        out->emplace_back(a, b);
        break;
      case 7:  // DW_RLE_start_length
        a = c.fixed(as);
        b = c.uleb();
        out->emplace_back(a, a + b);
        break;
      default: return;
    }
  }
}

// Ranges of a DIE as llvm's DWARFDie::getAddressRanges: low/high pc first, else DW_AT_ranges.
static void die_ranges(const DwarfSections& s, const DwarfIndex::Unit& u, const AttrVal* low, const AttrVal* high,
                       const AttrVal* ranges, std::vector<std::pair<uint64_t, uint64_t>>* out) {
  out->clear();
  uint64_t lo = 0;
  if (low && high && attr_address(s, u, *low, &lo)) {
    uint64_t hi = 0;
    if (is_constant_form(high->form)) {
      out->emplace_back(lo, lo + high->u);
      return;
    }
    if (attr_address(s, u, *high, &hi)) {
      out->emplace_back(lo, hi);
      return;
    }
  }
  if (ranges) attr_ranges(s, u, *ranges, out);
}

Result<std::unique_ptr<DwarfIndex>> DwarfIndex::build(const DwarfSections& s, const DwarfIndexLimits& limits) {
  std::unique_ptr<DwarfIndex> ix(new DwarfIndex());
  ix->s_ = s;
  ix->limits_ = limits;
  if (s.info.empty()) return make_error(SPROV_ERR_NO_SECTION, "no .debug_info");
  struct Endpoint {
    uint64_t addr;
    uint32_t unit;
    bool start;
  };
  std::vector<Endpoint> endpoints;
  std::vector<std::pair<uint64_t, uint64_t>> rs;
  AbbrevTable unit_abbrev;  // the unit DIE's abbreviation, reused
  size_t pos = 0;
  while (pos < s.info.size) {
    if (ix->units_.size() >= limits.max_units) return make_error(SPROV_ERR_LIMIT, ".debug_info: more than %zu units", limits.max_units);
    auto u = std::make_unique<Unit>();
    Cursor c(s.info, pos, s.big_endian);
    u->offset = pos;
    uint64_t len = c.initial_length(&u->is64);
    if (!c.ok || len > c.remaining() || len < 7)
      return make_error(SPROV_ERR_DWARF, ".debug_info at 0x%zx: bad unit length", pos);
    u->end = c.pos + len;
    c.end = static_cast<size_t>(u->end);
    u->version = c.u16();
    if (u->version < 2 || u->version > 5) {
      pos = static_cast<size_t>(u->end);  // unknown version: skip the unit, as llvm does
      continue;
    }
    if (u->version >= 5) {
      u->unit_type = c.u8();
      u->addr_size = c.u8();
      u->abbrev_offset = c.offset(u->is64);
      if (u->unit_type == 4 || u->unit_type == 5) u->dwo_id = c.u64();
      if (u->unit_type == 2 || u->unit_type == 6) {         // type units
        pos = static_cast<size_t>(u->end);
        continue;
      }
    } else {
      u->unit_type = 1;
      u->abbrev_offset = c.offset(u->is64);
      u->addr_size = c.u8();
    }
    if (!c.ok) return make_error(SPROV_ERR_DWARF, ".debug_info at 0x%zx: truncated unit header", pos);
    u->die_offset = c.pos;
    u->index = static_cast<uint32_t>(ix->units_.size());
    u->s = &ix->s_;
    if (u->version >= 5) u->str_offsets_base = u->is64 ? 16 : 8;
    pos = static_cast<size_t>(u->end);
    Unit& ur = *u;
    ix->units_.push_back(std::move(u));

    // The unit DIE: bases first (they may follow the attributes that need them).
    Cursor d(s.info, static_cast<size_t>(ur.die_offset), s.big_endian);
    d.end = static_cast<size_t>(ur.end);
    if (!find_abbrev(s, ur, d.uleb(), &unit_abbrev) || !d.ok) continue;
    const Abbrev* ab = &unit_abbrev.sparse.front().second;
    AttrVal low, high, ranges, comp_dir, dwo_name;
    bool has_low = false, has_high = false, has_ranges = false, has_comp_dir = false, has_dwo_name = false;
    for (uint32_t i = 0; i < ab->count && d.ok; i++) {
      const AttrSpec& sp = unit_abbrev.specs[ab->first + i];
      AttrVal v;
      if (!read_attr(d, ur, sp.form, sp.implicit, &v)) break;
      switch (sp.at) {
        case kAtLowPc: low = v; has_low = true; break;
        case kAtHighPc: high = v; has_high = true; break;
        case kAtRanges: ranges = v; has_ranges = true; break;
        case kAtStmtList: ur.has_stmt_list = true; ur.stmt_list = v.u; break;
        case kAtCompDir: comp_dir = v; has_comp_dir = true; break;
        case kAtStrOffsetsBase: ur.str_offsets_base = v.u; break;
        case kAtAddrBase: case kAtGnuAddrBase: ur.addr_base = v.u; break;
        case kAtRnglistsBase: ur.rnglists_base = v.u; break;
        case kAtLoclistsBase: ur.loclists_base = v.u; break;
        case kAtDwoName: case kAtGnuDwoName: dwo_name = v; has_dwo_name = true; break;
        case kAtGnuDwoId: ur.dwo_id = v.u; break;
        case kAtGnuRangesBase: ur.ranges_base = v.u; break;
        default: break;
      }
    }
    if (!d.ok) continue;
    if (has_comp_dir) {
      ur.comp_dir_val = comp_dir;
      ur.has_comp_dir = true;
      ur.comp_dir = attr_string(s, ur, comp_dir);
    }
    if (has_dwo_name) {
      ur.has_dwo = true;
      ur.dwo_name = attr_string(s, ur, dwo_name);
      ix->skeletons_++;
    }
    if (has_low) attr_address(s, ur, low, &ur.base_address);
    die_ranges(s, ur, has_low ? &low : nullptr, has_high ? &high : nullptr, has_ranges ? &ranges : nullptr, &rs);
    for (auto& r : rs) {
      if (r.first >= r.second) continue;
      endpoints.push_back({r.first, ur.index, true});
      endpoints.push_back({r.second, ur.index, false});
    }
  }
  // llvm DWARFDebugAranges::construct: a covered interval belongs to the
  // lowest-offset unit describing it; adjacent intervals of one unit merge.
  std::stable_sort(endpoints.begin(), endpoints.end(), [](const Endpoint& a, const Endpoint& b) { return a.addr < b.addr; });
  std::multiset<uint32_t> valid;
  uint64_t prev = ~uint64_t{0};
  for (const Endpoint& e : endpoints) {
    if (prev < e.addr && !valid.empty()) {
      if (!ix->aranges_.empty() && ix->aranges_.back().high == prev && valid.count(ix->aranges_.back().unit))
        ix->aranges_.back().high = e.addr;
      else
        ix->aranges_.push_back({prev, e.addr, *valid.begin()});
    }
    if (e.start) {
      valid.insert(e.unit);
    } else if (auto it = valid.find(e.unit); it != valid.end()) {
      valid.erase(it);
    }
    prev = e.addr;
  }
  return ix;
}

DwarfIndex::~DwarfIndex() = default;

const DwarfIndex::Unit* DwarfIndex::unit_at_offset(uint64_t off) const {
  auto it = std::upper_bound(units_.begin(), units_.end(), off,
                             [](uint64_t o, const std::unique_ptr<Unit>& u) { return o < u->offset; });
  if (it == units_.begin()) return nullptr;
  --it;
  return off >= (*it)->die_offset && off < (*it)->end ? it->get() : nullptr;
}

std::shared_ptr<const DwarfIndex::UnitIndex> DwarfIndex::unit_index(size_t ui) const {
  Unit& u = *units_[ui];
  u.referenced.store(true, std::memory_order_relaxed);
  std::shared_ptr<const UnitIndex> result;
  size_t added = 0;
  {
    std::lock_guard<std::mutex> lock(u.mu);
    if (u.built) return u.built;
    auto ix = std::make_shared<UnitIndex>();
    if (u.has_comp_dir) u.comp_dir = attr_string(*u.s, u, u.comp_dir_val);  // str_sup may be known now
    // Split DWARF: the DIE tree is the DWO unit's; lines stay the skeleton's.
    Unit& w = (u.has_dwo && load_dwo(u)) ? *u.dwo : u;
    const DwarfSections& ws = *w.s;
    stackprov::call_once(w.abbrev_once, [&] { parse_abbrevs(ws, w, &w.abbrevs); });
    // Walk every DIE; subprograms and inlined subroutines become nodes, their
    // ranges are collected in pre-order (parents before children).
    struct Pending {
      uint64_t low, high;
      uint32_t node;
    };
    std::vector<Pending> pending;
    std::vector<std::pair<uint64_t, uint64_t>> rs;
    std::vector<int32_t> stack;
    int32_t parent = -1;
    Cursor c(ws.info, static_cast<size_t>(w.die_offset), ws.big_endian);
    c.end = static_cast<size_t>(w.end);
    bool root_done = false;
    while (w.abbrevs.ok && c.ok && c.pos < c.end && !root_done) {
      const uint64_t die_off = c.pos;
      const uint64_t code = c.uleb();
      if (!c.ok) break;
      if (code == 0) {
        if (stack.empty()) break;
        parent = stack.back();
        stack.pop_back();
        if (stack.empty()) root_done = true;
        continue;
      }
      const Abbrev* ab = w.abbrevs.find(code);
      if (ab == nullptr) break;
      const bool sub = ab->tag == kTagSubprogram || ab->tag == kTagInlinedSubroutine;
      AttrVal low, high, ranges;
      bool has_low = false, has_high = false, has_ranges = false;
      UnitIndex::Node n;
      if (!sub && ab->fixed_size >= 0) {
        c.skip(static_cast<uint64_t>(ab->fixed_size));
      } else for (uint32_t i = 0; i < ab->count && c.ok; i++) {
        const AttrSpec& sp = w.abbrevs.specs[ab->first + i];
        AttrVal v;
        if (!read_attr(c, w, sp.form, sp.implicit, &v)) break;
        if (!sub) continue;
        switch (sp.at) {
          case kAtLowPc: low = v; has_low = true; break;
          case kAtHighPc: high = v; has_high = true; break;
          case kAtRanges: ranges = v; has_ranges = true; break;
          case kAtCallFile: n.call_file = static_cast<uint32_t>(v.u); break;
          case kAtCallLine: n.call_line = static_cast<uint32_t>(v.u); break;
          case kAtCallColumn: n.call_column = static_cast<uint32_t>(v.u); break;
          case kAtGnuDiscriminator: n.discriminator = static_cast<uint32_t>(v.u); break;
          default: break;
        }
      }
      if (!c.ok) break;
      int32_t self = parent;
      if (sub) {
        if (ix->nodes.size() >= limits_.max_nodes_per_unit) break;
        n.die = die_off;
        n.parent = parent;
        n.is_subprogram = ab->tag == kTagSubprogram;
        if (has_low) n.has_low_pc = attr_address(ws, w, low, &n.low_pc);
        self = static_cast<int32_t>(ix->nodes.size());
        ix->nodes.push_back(n);
        die_ranges(ws, w, has_low ? &low : nullptr, has_high ? &high : nullptr, has_ranges ? &ranges : nullptr, &rs);
        for (auto& r : rs) pending.push_back({r.first, r.second, static_cast<uint32_t>(self)});
      }
      if (ab->children) {
        if (stack.size() >= limits_.max_depth) break;
        stack.push_back(parent);
        parent = self;
      } else if (stack.empty()) {
        break;  // a unit DIE without children
      }
    }
    // llvm DWARFUnit::updateAddressDieMap: later (inner) ranges overwrite and
    // split earlier (outer) ones.
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> m;
    for (const Pending& r : pending) {
      if (r.low == r.high) continue;
      auto b = m.upper_bound(r.low);
      if (b != m.begin() && r.low < (--b)->second.first) {
        if (r.high < b->second.first) m[r.high] = b->second;
        if (r.low > b->first) m[b->first].first = r.low;
      }
      m[r.low] = {r.high, r.node};
    }
    ix->map.reserve(m.size());
    for (auto& [lo, v] : m) ix->map.push_back({lo, v.first, v.second});
    if (u.has_stmt_list) {
      LineSections ls{s_.line, s_.line_str, s_.str, s_.big_endian};
      auto lt = LineTable::parse(ls, u.stmt_list, u.addr_size, u.comp_dir);
      if (lt.ok()) ix->lines = std::make_unique<LineTable>(std::move(lt).value());
    }
    if (ix->lines) {
      // Each path is built once per unit build and shared by every lookup (no string per frame).
      ix->files.resize(ix->lines->file_count());
      std::string path;
      for (size_t i = 0; i < ix->files.size(); i++)
        if (ix->lines->file_path(i, &path)) ix->files[i] = intern_path(path);
    }
    ix->nodes.shrink_to_fit();
    ix->bytes = sizeof(UnitIndex) + ix->nodes.capacity() * sizeof(UnitIndex::Node) +
                ix->map.capacity() * sizeof(UnitIndex::Entry) + ix->files.capacity() * sizeof(std::string_view) +
                (ix->lines ? ix->lines->memory_bytes() : 0);
    added = ix->bytes;
    u.built = ix;
    result = std::move(ix);
  }
  built_.fetch_add(1, std::memory_order_relaxed);
  if (bytes_.fetch_add(added, std::memory_order_relaxed) + added > limits_.memory_budget) enforce_budget(ui);
  return result;
}

void DwarfIndex::enforce_budget(size_t keep) const {
  std::lock_guard<std::mutex> lock(evict_mu_);
  const size_t n = units_.size();
  for (size_t step = 0; step < 2 * n && bytes_.load(std::memory_order_relaxed) > limits_.memory_budget; step++) {
    size_t i = clock_hand_++ % n;
    if (i == keep) continue;
    Unit& u = *units_[i];
    if (u.referenced.exchange(false, std::memory_order_relaxed)) continue;  // second chance
    std::lock_guard<std::mutex> ul(u.mu);
    if (!u.built) continue;
    bytes_.fetch_sub(u.built->bytes, std::memory_order_relaxed);
    u.built.reset();  // readers holding a copy keep theirs alive
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

void DwarfIndex::evict_all() const {
  for (auto& u : units_) {
    std::lock_guard<std::mutex> ul(u->mu);
    if (!u->built) continue;
    bytes_.fetch_sub(u->built->bytes, std::memory_order_relaxed);
    u->built.reset();
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

DwarfIndexStats DwarfIndex::stats() const {
  DwarfIndexStats st;
  st.units = units_.size();
  st.units_built = built_.load();
  st.units_evicted = evicted_.load();
  st.bytes = bytes_.load();
  return st;
}

bool DwarfIndex::read_die(const Unit& u, uint64_t die_off, DieInfo* out) const {
  *out = DieInfo{};
  Unit& mu = const_cast<Unit&>(u);
  const DwarfSections& s = *u.s;
  stackprov::call_once(mu.abbrev_once, [&] { parse_abbrevs(s, mu, &mu.abbrevs); });
  if (!u.abbrevs.ok) return false;
  Cursor c(s.info, static_cast<size_t>(die_off), s.big_endian);
  c.end = static_cast<size_t>(u.end);
  const Abbrev* ab = u.abbrevs.find(c.uleb());
  if (!c.ok || ab == nullptr) return false;
  out->tag = ab->tag;
  for (uint32_t i = 0; i < ab->count; i++) {
    const AttrSpec& sp = u.abbrevs.specs[ab->first + i];
    AttrVal v;
    if (!read_attr(c, u, sp.form, sp.implicit, &v)) return false;
    switch (sp.at) {
      case kAtName:
        if (!out->has_name) out->name = attr_string(s, u, v);
        out->has_name = true;
        break;
      case kAtLinkageName: case kAtMipsLinkageName:
        if (!out->has_linkage) out->linkage = attr_string(s, u, v);
        out->has_linkage = true;
        break;
      case kAtDeclFile:
        out->decl_file = v.u;
        out->has_decl_file = true;
        out->decl_file_implicit = sp.form == kFormImplicitConst;
        break;
      case kAtDeclLine: out->decl_line = v.u; out->has_decl_line = true; break;
      case kAtAbstractOrigin: attr_ref(u, v, &out->abstract_origin, &out->origin_alt); break;
      case kAtSpecification: attr_ref(u, v, &out->specification, &out->spec_alt); break;
      case kAtDeclaration: out->declaration = v.u != 0; break;
      case kAtLowPc: out->low = v; out->has_low = true; break;
      case kAtHighPc: out->high = v; out->has_high = true; break;
      case kAtRanges: out->ranges = v; out->has_ranges = true; break;
      default: break;
    }
  }
  return true;
}

// llvm DWARFDie::findRecursively: depth-first over abstract_origin and
// specification with a visited set; the specification is explored first.
// `self` is the built index of `u`'s unit (decl_file of a DIE in it needs no
// other unit's line table).
void DwarfIndex::resolve_names(const Unit& u, const UnitIndex* self, uint64_t die_off, DwarfFrame* f) const {
  struct Where {
    const DwarfIndex* ix;
    const Unit* unit;
    uint64_t off;
  };
  struct Seen {
    Where at;
    DieInfo info;
  };
  // The unit holding a reference's target: the same DWO unit (split units
  // have no cross-unit references), this index, or the dwz supplementary one.
  auto target = [](const DwarfIndex* ix, const Unit* from, uint64_t off, bool alt) -> Where {
    if (alt) {
      const DwarfIndex* a = ix->alt_.get();
      return Where{a, a ? a->unit_at_offset(off) : nullptr, off};
    }
    if (from->is_dwo) return Where{ix, off >= from->die_offset && off < from->end ? from : nullptr, off};
    return Where{ix, ix->unit_at_offset(off), off};
  };
  // Fixed-size: at most kMaxRefChain DIEs are visited, each pushes at most two.
  Seen chain[kMaxRefChain];  // visit order
  size_t nchain = 0;
  Where work[2 * kMaxRefChain + 1];
  size_t nwork = 0;
  work[nwork++] = Where{this, &u, die_off};
  while (nwork > 0 && nchain < kMaxRefChain) {
    Where w = work[--nwork];
    if (w.unit == nullptr || w.ix == nullptr) continue;
    bool seen = false;
    for (size_t i = 0; i < nchain; i++) seen |= chain[i].at.off == w.off && chain[i].at.unit == w.unit;
    if (seen) continue;
    Seen& s = chain[nchain];
    s.at = w;
    if (!w.ix->read_die(*w.unit, w.off, &s.info)) continue;
    nchain++;
    if (s.info.abstract_origin || s.info.origin_alt)
      work[nwork++] = target(w.ix, w.unit, s.info.abstract_origin, s.info.origin_alt);
    if (s.info.specification || s.info.spec_alt)
      work[nwork++] = target(w.ix, w.unit, s.info.specification, s.info.spec_alt);
  }
  // The DFS visit order equals findRecursively's, so the first DIE with the attribute wins.
  bool name = false, linkage = false, line = false;
  for (size_t i = 0; i < nchain; i++) {
    const Seen& s = chain[i];
    if (!name && s.info.has_name) f->name = s.info.name, name = true;
    if (!linkage && s.info.has_linkage) f->linkage_name = s.info.linkage, linkage = true;
    if (!line && s.info.has_decl_line) f->start_line = static_cast<uint32_t>(s.info.decl_line), line = true;
  }
  // DW_AT_decl_file found the same way, resolved in the line table of the
  // unit that holds the DIE carrying it (a DWO unit: its skeleton's).
  for (size_t i = 0; i < nchain; i++) {
    const Seen& s = chain[i];
    if (!s.info.has_decl_file) continue;
    const Unit* holder = s.at.unit;
    if (self != nullptr && s.at.ix == this && holder == &u) {
      unit_file(*self, s.info.decl_file, &f->start_file);
    } else if (auto ui = s.at.ix->unit_index(holder->index)) {
      s.at.ix->unit_file(*ui, s.info.decl_file, &f->start_file);  // a view into s.at.ix's pool
    }
    f->start_file_implicit_const = s.info.decl_file_implicit;
    return;
  }
}

void DwarfIndex::cached_names(const Unit& u, const UnitIndex* self, uint64_t die_off, DwarfFrame* f) const {
  constexpr size_t kMaxPerShard = size_t{1} << 13;
  // DIE offsets of a DWO unit are in its own file: keyed apart by their skeleton's index.
  const uint64_t key = u.is_dwo ? ((uint64_t{u.index} + 1) << 44) ^ die_off : die_off;
  NameShard& sh = names_[(key ^ (key >> 7) ^ (key >> 17)) % kNameShards];
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    if (auto it = sh.map.find(key); it != sh.map.end()) {
      const Names& n = it->second;
      f->name = n.name;
      f->linkage_name = n.linkage;
      f->start_file = n.start_file;
      f->start_line = n.start_line;
      f->start_file_implicit_const = n.start_file_implicit_const;
      return;
    }
  }
  resolve_names(u, self, die_off, f);
  Names n{f->name, f->linkage_name, f->start_file, f->start_line, f->start_file_implicit_const};
  std::lock_guard<std::mutex> lock(sh.mu);
  if (sh.map.size() >= kMaxPerShard) sh.map.clear();
  sh.map.emplace(key, n);
}

bool DwarfIndex::unit_file(const UnitIndex& ui, uint64_t index, std::string_view* out) const {
  *out = {};
  if (!ui.lines || !ui.lines->has_file(index) || index >= ui.files.size()) return false;
  *out = ui.files[index];
  return true;
}

std::string_view DwarfIndex::intern_path(const std::string& path) const {
  std::lock_guard<std::mutex> lock(paths_.mu);
  if (auto it = paths_.ids.find(path); it != paths_.ids.end()) return paths_.strings[it->second];
  const std::string& s = paths_.strings.emplace_back(path);
  paths_.ids.emplace(std::string_view(s), static_cast<uint32_t>(paths_.strings.size() - 1));
  return s;
}

void DwarfIndex::set_supplementary(std::unique_ptr<DwarfIndex> alt) {
  alt_ = std::move(alt);
  s_.str_sup = alt_ ? alt_->s_.str : SectionBytes{};
}

bool DwarfIndex::load_dwo(Unit& u) const {
  if (u.dwo_tried) return u.dwo != nullptr;
  u.dwo_tried = true;
  DwoSections ds;
  uint64_t pos = 0;
  if (!dwo_loader_ || !dwo_loader_(u.dwo_id, u.dwo_name, u.comp_dir, &ds) ||
      !find_dwo_unit(ds.info, s_.big_endian, u.dwo_id, &pos)) {
    dwo_missing_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto ms = std::make_unique<DwarfSections>(s_);
  ms->info = ds.info;
  ms->abbrev = ds.abbrev;
  ms->str = ds.str;
  ms->str_offsets = ds.str_offsets;
  ms->rnglists = ds.rnglists;
  auto d = std::make_unique<Unit>();
  Cursor c(ds.info, static_cast<size_t>(pos), s_.big_endian);
  d->offset = pos;
  const uint64_t len = c.initial_length(&d->is64);
  if (!c.ok || len > c.remaining() || len < 7) {
    dwo_missing_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  d->end = c.pos + len;
  c.end = static_cast<size_t>(d->end);
  d->version = c.u16();
  if (d->version >= 5) {
    d->unit_type = c.u8();
    d->addr_size = c.u8();
    d->abbrev_offset = c.offset(d->is64);
    d->dwo_id = c.u64();
    d->str_offsets_base = d->is64 ? 16 : 8;
    d->rnglists_base = d->is64 ? 20 : 12;
  } else {
    d->abbrev_offset = c.offset(d->is64);
    d->addr_size = c.u8();
  }
  if (!c.ok || d->version < 2 || d->version > 5) {
    dwo_missing_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  d->die_offset = c.pos;
  d->index = u.index;
  d->is_dwo = true;
  d->addr_base = u.addr_base;
  d->base_address = u.base_address;
  d->ranges_base = u.ranges_base;
  d->comp_dir = u.comp_dir;
  d->s = ms.get();
  u.dwo_sections = std::move(ms);
  u.dwo_owner = std::move(ds.owner);
  u.dwo = std::move(d);
  dwo_loaded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace {

void reset_frame(DwarfFrame* f) { *f = DwarfFrame{}; }

}  // namespace

bool DwarfIndex::lookup(uint64_t addr, std::vector<DwarfFrame>* frames) const {
  // Not cleared up front: resize() below keeps the elements' string buffers.
  auto ait = std::upper_bound(aranges_.begin(), aranges_.end(), addr,
                              [](uint64_t a, const Arange& r) { return a < r.low; });
  if (ait == aranges_.begin() || addr >= (ait - 1)->high) {
    frames->clear();
    return false;
  }
  --ait;
  const Unit& su = *units_[ait->unit];
  auto ui = unit_index(ait->unit);
  if (!ui) {
    frames->clear();
    return false;
  }
  const Unit& u = su.dwo ? *su.dwo : su;  // names live in the DWO unit of a skeleton
  const LineTable* lines = ui->lines.get();

  thread_local std::vector<uint32_t> chain;  // node indexes, innermost first
  chain.clear();
  auto eit = std::upper_bound(ui->map.begin(), ui->map.end(), addr,
                              [](uint64_t a, const UnitIndex::Entry& e) { return a < e.low; });
  if (eit != ui->map.begin() && addr < (eit - 1)->high) {
    for (int32_t n = static_cast<int32_t>((eit - 1)->node); n >= 0 && chain.size() < limits_.max_depth;) {
      chain.push_back(static_cast<uint32_t>(n));
      if (ui->nodes[n].is_subprogram) break;
      n = ui->nodes[n].parent;
    }
  }
  if (chain.empty()) {
    const std::optional<LineRow> row = lines ? lines->lookup(addr) : std::nullopt;
    if (row && lines->has_file(row->file)) {
      frames->resize(1);
      DwarfFrame& f = frames->front();
      reset_frame(&f);
      unit_file(*ui, row->file, &f.file);
      f.has_file = true;
      f.line = row->line;
      f.column = row->column;
      f.discriminator = row->discriminator;
    } else {
      frames->clear();
    }
    return true;
  }
  // The frames' strings keep their capacity from the caller's previous lookups.
  frames->resize(chain.size());
  const UnitIndex::Node* caller = nullptr;
  for (size_t i = 0; i < chain.size(); i++) {
    const UnitIndex::Node& n = ui->nodes[chain[i]];
    DwarfFrame& f = (*frames)[i];
    reset_frame(&f);
    f.has_function = true;
    cached_names(u, ui.get(), n.die, &f);
    f.has_start_address = n.has_low_pc;
    f.start_address = n.low_pc;
    if (i == 0) {
      const std::optional<LineRow> row = lines ? lines->lookup(addr) : std::nullopt;
      if (row && unit_file(*ui, row->file, &f.file)) {
        f.has_file = true;
        f.line = row->line;
        f.column = row->column;
        f.discriminator = row->discriminator;
      }
    } else {
      f.has_file = unit_file(*ui, caller->call_file, &f.file);
      f.line = caller->call_line;
      f.column = caller->call_column;
      f.discriminator = caller->discriminator;
    }
    caller = &n;
  }
  return true;
}

}  // namespace stackprov::dwarf

// ------------------------------------------------------------ call sites (tail-call frames)

namespace stackprov::dwarf {

bool is_block_form(uint16_t f) {
  return f == kFormBlock1 || f == kFormBlock2 || f == kFormBlock4 || f == kFormBlock || f == kFormExprloc;
}

namespace {

/// Bytes of a block form's length prefix when the block is empty (a one-byte ULEB128 0 for
/// DW_FORM_block and exprloc).
size_t empty_block_bytes(uint16_t f) { return f == kFormBlock2 ? 2 : f == kFormBlock4 ? 4 : 1; }

}  // namespace

int64_t DwarfIndex::unit_covering(uint64_t addr) const {
  auto ait = std::upper_bound(aranges_.begin(), aranges_.end(), addr,
                              [](uint64_t a, const Arange& r) { return a < r.low; });
  if (ait == aranges_.begin() || addr >= (ait - 1)->high) return -1;
  return static_cast<int64_t>((ait - 1)->unit);
}

// One walk over the unit's DIEs: subprograms (ranges, entry, whether their call sites are
// complete) and call sites (return pc, tail flag, target), as gdb's read_call_site_scope reads them.
const DwarfIndex::UnitCalls* DwarfIndex::unit_calls(size_t ui) const {
  Unit& u = *units_[ui];
  stackprov::call_once(u.calls_once, [&] {
    auto uc = std::make_unique<UnitCalls>();
    bool has_dwo = false;
    {
      std::lock_guard<std::mutex> lock(u.mu);
      if (u.has_comp_dir) u.comp_dir = attr_string(*u.s, u, u.comp_dir_val);
      has_dwo = u.has_dwo && load_dwo(u);
    }
    Unit& w = has_dwo ? *u.dwo : u;
    const DwarfSections& ws = *w.s;
    stackprov::call_once(w.abbrev_once, [&] { parse_abbrevs(ws, w, &w.abbrevs); });
    struct Pending {
      uint64_t low, high;
      uint32_t func;
    };
    std::vector<Pending> pending;
    std::vector<std::pair<uint64_t, uint64_t>> rs;
    std::vector<int32_t> stack;
    std::vector<std::pair<CallSiteInfo, int32_t>> sites;  // with the enclosing subprogram
    std::vector<bool> complete;
    int32_t func = -1;
    Cursor c(ws.info, static_cast<size_t>(w.die_offset), ws.big_endian);
    c.end = static_cast<size_t>(w.end);
    // Kept for the index's life (not under the memory budget): bounded per unit.
    const size_t max_items = std::min<size_t>(limits_.max_nodes_per_unit, kMaxCallSitesPerUnit);
    std::unordered_map<uint64_t, std::pair<CallSiteInfo::Target, uint64_t>> target_of;  // by DIE: read once
    std::unordered_map<uint64_t, std::string_view> name_of;
    while (w.abbrevs.ok && c.ok && c.pos < c.end) {
      const uint64_t die_at = c.pos;
      const uint64_t code = c.uleb();
      if (!c.ok) break;
      if (code == 0) {
        if (stack.empty()) break;
        func = stack.back();
        stack.pop_back();
        if (stack.empty()) break;
        continue;
      }
      const Abbrev* ab = w.abbrevs.find(code);
      if (ab == nullptr) break;
      const bool sub = ab->tag == kTagSubprogram;
      const bool cs = ab->tag == kTagCallSite || ab->tag == kTagGnuCallSite;
      AttrVal low, high, ranges, ret, origin, abstract;
      bool has_low = false, has_high = false, has_ranges = false, has_ret = false, has_origin = false,
           has_abstract = false, tail = false, all = false, target_expr = false;
      if (!sub && !cs && ab->fixed_size >= 0) {
        c.skip(static_cast<uint64_t>(ab->fixed_size));
      } else for (uint32_t i = 0; i < ab->count && c.ok; i++) {
        const AttrSpec& sp = w.abbrevs.specs[ab->first + i];
        AttrVal v;
        const size_t at = c.pos;
        if (!read_attr(c, w, sp.form, sp.implicit, &v)) break;
        if (!sub && !cs) continue;
        switch (sp.at) {
          case kAtLowPc: low = v; has_low = true; break;
          case kAtHighPc: high = v; has_high = true; break;
          case kAtRanges: ranges = v; has_ranges = true; break;
          case kAtCallReturnPc: ret = v; has_ret = true; break;
          case kAtCallTailCall: case kAtGnuTailCall: tail = tail || v.u != 0; break;
          case kAtCallAllCalls: case kAtCallAllTailCalls: case kAtGnuAllTailCallSites: case kAtGnuAllCallSites:
            all = all || v.u != 0;
            break;
          case kAtCallTarget: case kAtGnuCallSiteTarget:
            // An empty block counts as absent (gdb); any other needs the frame's registers.
            if (!is_block_form(sp.form) || c.pos - at != empty_block_bytes(sp.form)) target_expr = true;
            break;
          case kAtCallOrigin: origin = v; has_origin = true; break;
          case kAtAbstractOrigin: abstract = v; has_abstract = true; break;
          default: break;
        }
      }
      if (!c.ok) break;
      int32_t self = func;
      if (sub) {
        if (uc->funcs.size() >= max_items) break;
        self = static_cast<int32_t>(uc->funcs.size());
        UnitCalls::Func f;
        f.die = die_at;
        die_ranges(ws, w, has_low ? &low : nullptr, has_high ? &high : nullptr, has_ranges ? &ranges : nullptr, &rs);
        if (has_low) f.has_entry = attr_address(ws, w, low, &f.entry);
        if (!f.has_entry && !rs.empty()) {
          f.entry = rs.front().first;  // gdb: a function of several ranges starts at its first
          f.has_entry = true;
        }
        uc->funcs.push_back(std::move(f));
        complete.push_back(all);
        for (auto& r : rs) pending.push_back({r.first, r.second, static_cast<uint32_t>(self)});
      } else if (cs) {
        if (sites.size() >= max_items) break;
        CallSiteInfo s;
        s.tail_call = tail;
        const bool have_pc = has_ret ? attr_address(ws, w, ret, &s.return_pc)
                                     : has_low && attr_address(ws, w, low, &s.return_pc);
        if (!target_expr && (has_origin || has_abstract)) {
          uint64_t off = 0;
          bool alt = false;
          DieInfo t;
          const Unit* tu = nullptr;
          if (attr_ref(w, has_origin ? origin : abstract, &off, &alt) && !alt) {
            tu = (off >= w.die_offset && off < w.end) ? &w : unit_at_offset(off);
            if (tu != nullptr && tu->is_dwo != w.is_dwo) tu = nullptr;  // a skeleton's offsets are not its DWO's
          }
          if (auto hit = tu != nullptr ? target_of.find(off) : target_of.end(); hit != target_of.end()) {
            s.target = hit->second.first;
            s.target_addr = hit->second.second;
            if (s.target == CallSiteInfo::Target::kName) s.target_name = name_of[off];
          } else if (tu != nullptr && read_die(*tu, off, &t)) {
            if (t.declaration && t.specification == 0) {
              s.target_name = t.has_linkage ? t.linkage : t.name;
              if (!s.target_name.empty()) s.target = CallSiteInfo::Target::kName;
            } else {
              std::vector<std::pair<uint64_t, uint64_t>> trs;
              die_ranges(*tu->s, *tu, t.has_low ? &t.low : nullptr, t.has_high ? &t.high : nullptr,
                         t.has_ranges ? &t.ranges : nullptr, &trs);
              uint64_t lo = 0;
              bool have = t.has_low && attr_address(*tu->s, *tu, t.low, &lo);
              for (auto& r : trs)
                if (!have || r.first < lo) lo = r.first, have = true;
              if (have) {
                s.target = CallSiteInfo::Target::kAddress;
                s.target_addr = lo;
              }
            }
            target_of[off] = {s.target, s.target_addr};
            if (s.target == CallSiteInfo::Target::kName) name_of[off] = s.target_name;
          }
        }
        if (have_pc) sites.emplace_back(s, func);
      }
      if (ab->children) {
        if (stack.size() >= limits_.max_depth) break;
        stack.push_back(func);
        func = self;
      } else if (stack.empty()) {
        break;
      }
    }
    // Subprogram ranges: inner ones split outer ones (as the unit index's map).
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> m;
    for (const Pending& r : pending) {
      if (r.low >= r.high) continue;
      auto b = m.upper_bound(r.low);
      if (b != m.begin() && r.low < (--b)->second.first) {
        if (r.high < b->second.first) m[r.high] = b->second;
        if (r.low > b->first) m[b->first].first = r.low;
      }
      m[r.low] = {r.high, r.func};
    }
    for (auto& [lo, v] : m) uc->ranges.push_back({lo, v.first, v.second});
    // Sorted by return pc, the first DIE of each pc kept (gdb complains of and drops duplicates).
    std::stable_sort(sites.begin(), sites.end(),
                     [](const auto& a, const auto& b) { return a.first.return_pc < b.first.return_pc; });
    for (auto& [s, f] : sites) {
      if (!uc->sites.empty() && uc->sites.back().return_pc == s.return_pc) continue;
      const uint32_t idx = static_cast<uint32_t>(uc->sites.size());
      uc->sites.push_back(s);
      if (s.tail_call && f >= 0 && complete[static_cast<size_t>(f)]) uc->funcs[static_cast<size_t>(f)].tails.push_back(idx);
    }
    u.calls = std::move(uc);
  });
  return u.calls.get();
}

int64_t DwarfIndex::function_at(const UnitCalls& uc, uint64_t pc) {
  auto it = std::upper_bound(uc.ranges.begin(), uc.ranges.end(), pc,
                             [](uint64_t a, const UnitCalls::Range& r) { return a < r.low; });
  if (it == uc.ranges.begin() || pc >= (it - 1)->high) return -1;
  return (it - 1)->func;
}

bool DwarfIndex::call_site_at(uint64_t ret, CallSiteInfo* out) const {
  const int64_t ui = ret == 0 ? -1 : unit_covering(ret - 1);
  const UnitCalls* uc = ui < 0 ? nullptr : unit_calls(static_cast<size_t>(ui));
  if (uc == nullptr) return false;
  auto it = std::lower_bound(uc->sites.begin(), uc->sites.end(), ret,
                             [](const CallSiteInfo& s, uint64_t a) { return s.return_pc < a; });
  if (it == uc->sites.end() || it->return_pc != ret) return false;
  *out = *it;
  return true;
}

bool DwarfIndex::function_entry(uint64_t pc, uint64_t* entry) const {
  const int64_t ui = unit_covering(pc);
  const UnitCalls* uc = ui < 0 ? nullptr : unit_calls(static_cast<size_t>(ui));
  const int64_t f = uc ? function_at(*uc, pc) : -1;
  if (f < 0 || !uc->funcs[static_cast<size_t>(f)].has_entry) return false;
  *entry = uc->funcs[static_cast<size_t>(f)].entry;
  return true;
}

bool DwarfIndex::tail_calls_of(uint64_t entry, std::vector<CallSiteInfo>* out) const {
  out->clear();
  const int64_t ui = unit_covering(entry);
  const UnitCalls* uc = ui < 0 ? nullptr : unit_calls(static_cast<size_t>(ui));
  const int64_t f = uc ? function_at(*uc, entry) : -1;
  if (f < 0) return false;
  const UnitCalls::Func& fn = uc->funcs[static_cast<size_t>(f)];
  if (!fn.has_entry || fn.entry != entry) return false;
  // gdb's list is built by prepending: the last call site first (the chain search's answer depends
  // on the order only in a loop of tail calls, where gdb tries a function's first site only).
  for (auto it = fn.tails.rbegin(); it != fn.tails.rend(); ++it) out->push_back(uc->sites[*it]);
  return true;
}

void DwarfIndex::export_call_sites(CallSiteExport* out) const {
  out->functions.clear();
  out->sites.clear();
  for (size_t ui = 0; ui < units_.size(); ++ui) {
    const UnitCalls* uc = unit_calls(ui);
    if (uc == nullptr) continue;
    out->sites.insert(out->sites.end(), uc->sites.begin(), uc->sites.end());
    std::vector<int64_t> slot(uc->funcs.size(), -1);  // function -> its index in out->functions
    for (const UnitCalls::Range& r : uc->ranges) {
      const UnitCalls::Func& fn = uc->funcs[r.func];
      if (!fn.has_entry) continue;  // function_entry answers nothing there
      if (slot[r.func] < 0) {
        slot[r.func] = static_cast<int64_t>(out->functions.size());
        CallSiteExport::Function f;
        f.entry = fn.entry;
        for (auto it = fn.tails.rbegin(); it != fn.tails.rend(); ++it) f.tails.push_back(uc->sites[*it]);
        out->functions.push_back(std::move(f));
      }
      out->functions[static_cast<size_t>(slot[r.func])].ranges.emplace_back(r.low, r.high);
    }
  }
}

}  // namespace stackprov::dwarf
