// SPDX-License-Identifier: Apache-2.0
// DwarfIndex::parameters: a subprogram's formal parameters, their types and location lists (`stack --args`).
#include <string>
#include <string_view>
#include <utility>

#include "dwarf/dwarf_index.hpp"
#include "dwarf/dwarf_index_internal.hpp"

namespace stackprov::dwarf {

namespace {

constexpr int kMaxTypeDepth = 16;                   ///< typedef/cv/pointer links followed for one type
constexpr size_t kMaxParams = 1024;                 ///< parameters read per subprogram
constexpr size_t kMaxEnumerators = 4096;            ///< enumerators read per enumeration
constexpr size_t kMaxLocEntries = size_t{1} << 16;  ///< entries read per location list
constexpr size_t kMaxChildDies = size_t{1} << 20;   ///< DIEs stepped over among a subprogram's children

// DW_ATE_* (DWARF 5 section 7.8).
constexpr uint64_t kAteBoolean = 0x02, kAteFloat = 0x04, kAteSigned = 0x05, kAteSignedChar = 0x06,
                   kAteUnsigned = 0x07, kAteUnsignedChar = 0x08;

/// What parameters and types need of one DIE.
struct DieAttrs {
  uint16_t tag = 0;
  bool children = false;
  std::string_view name;
  bool has_name = false;
  uint64_t type = 0, origin = 0, byte_size = 0, encoding = 0;
  bool has_type = false, has_origin = false, has_byte_size = false;
  AttrVal location, const_value, frame_base;
  bool has_location = false, has_const = false, has_frame_base = false;
  size_t end = 0;  ///< past the attributes: the first child, when `children`
};

bool read_attrs(const DwarfIndex::Unit& u, uint64_t off, DieAttrs* out) {
  *out = DieAttrs{};
  DwarfIndex::Unit& mu = const_cast<DwarfIndex::Unit&>(u);
  const DwarfSections& s = *u.s;
  stackprov::call_once(mu.abbrev_once, [&] { parse_abbrevs(s, mu, &mu.abbrevs); });
  if (!u.abbrevs.ok || off < u.die_offset || off >= u.end) return false;
  Cursor c(s.info, static_cast<size_t>(off), s.big_endian);
  c.end = static_cast<size_t>(u.end);
  const uint64_t code = c.uleb();
  const Abbrev* ab = c.ok && code != 0 ? u.abbrevs.find(code) : nullptr;
  if (ab == nullptr) return false;
  out->tag = ab->tag;
  out->children = ab->children;
  for (uint32_t i = 0; i < ab->count; i++) {
    const AttrSpec& sp = u.abbrevs.specs[ab->first + i];
    AttrVal v;
    if (!read_attr(c, u, sp.form, sp.implicit, &v)) return false;
    bool alt = false;
    switch (sp.at) {
      case kAtName: out->name = attr_string(s, u, v); out->has_name = true; break;
      case kAtType: out->has_type = attr_ref(u, v, &out->type, &alt) && !alt; break;
      case kAtAbstractOrigin: out->has_origin = attr_ref(u, v, &out->origin, &alt) && !alt; break;
      case kAtByteSize: out->byte_size = v.u; out->has_byte_size = is_constant_form(v.form); break;
      case kAtEncoding: out->encoding = v.u; break;
      case kAtLocation: out->location = v; out->has_location = true; break;
      case kAtConstValue: out->const_value = v; out->has_const = true; break;
      case kAtFrameBase: out->frame_base = v; out->has_frame_base = true; break;
      default: break;
    }
  }
  out->end = c.pos;
  return c.ok;
}

/// Steps over the children of a DIE whose attributes the cursor has passed (`children`: its
/// abbreviation says it has some). False on malformed or over-long input.
bool skip_children(const DwarfIndex::Unit& u, Cursor& c, bool children, size_t* budget) {
  size_t depth = children ? 1 : 0;
  while (depth > 0) {
    if (!c.ok || c.pos >= c.end || (*budget)-- == 0) return false;
    const uint64_t code = c.uleb();
    if (!c.ok) return false;
    if (code == 0) {
      depth--;
      continue;
    }
    const Abbrev* ab = u.abbrevs.find(code);
    if (ab == nullptr) return false;
    if (ab->fixed_size >= 0) {
      c.skip(static_cast<uint64_t>(ab->fixed_size));
    } else {
      for (uint32_t i = 0; i < ab->count && c.ok; i++) {
        const AttrSpec& sp = u.abbrevs.specs[ab->first + i];
        AttrVal v;
        read_attr(c, u, sp.form, sp.implicit, &v);
      }
    }
    if (ab->children && ++depth > 4096) return false;
  }
  return c.ok;
}

}  // namespace

ParamInfo::Where DwarfIndex::location_at(const Unit& u, uint16_t form, uint64_t value, const uint8_t* block,
                                         size_t block_len, uint64_t pc, const uint8_t** expr, size_t* expr_len) const {
  if (is_block_form(form)) {
    if (block_len == 0) return ParamInfo::Where::kOptimizedOut;  // an empty location: gdb's <optimized out>
    *expr = block;
    *expr_len = block_len;
    return ParamInfo::Where::kExpr;
  }
  const DwarfSections& s = *u.s;
  const unsigned as = u.addr_size;
  if (u.is_dwo || (as != 4 && as != 8)) return ParamInfo::Where::kUnreadable;
  const auto [loc, loclists] = s.locations();
  const uint64_t all_ones = as == 8 ? ~uint64_t{0} : 0xffffffffu;
  uint64_t off = 0;
  if (form == kFormLoclistx) {
    const unsigned w = u.is64 ? 8 : 4;
    if (value > loclists.size / w) return ParamInfo::Where::kUnreadable;
    Cursor ic(loclists, static_cast<size_t>(u.loclists_base + value * w), s.big_endian);
    off = u.loclists_base + ic.fixed(w);
    if (!ic.ok) return ParamInfo::Where::kUnreadable;
  } else if (form == kFormSecOffset || (u.version < 4 && (form == kFormData4 || form == kFormData8))) {
    off = value;
  } else {
    return ParamInfo::Where::kUnreadable;
  }
  auto addrx = [&](uint64_t index, uint64_t* a) {
    AttrVal v;
    v.form = kFormAddrx;
    v.u = index;
    return attr_address(s, u, v, a);
  };
  uint64_t base = u.base_address;
  if (u.version < 5) {  // .debug_loc: (begin, end) pairs, a base address selection, (0, 0) ends
    if (off >= loc.size) return ParamInfo::Where::kUnreadable;
    Cursor c(loc, static_cast<size_t>(off), s.big_endian);
    for (size_t n = 0; n < kMaxLocEntries && c.ok; n++) {
      const uint64_t lo = c.fixed(as), hi = c.fixed(as);
      if (!c.ok) break;
      if (lo == 0 && hi == 0) return ParamInfo::Where::kOptimizedOut;
      if (lo == all_ones) {
        base = hi;
        continue;
      }
      const uint64_t len = c.u16();
      const size_t at = c.pos;
      if (!c.skip(len)) break;
      if (pc >= base + lo && pc < base + hi) {
        if (len == 0) return ParamInfo::Where::kOptimizedOut;
        *expr = c.data + at;
        *expr_len = static_cast<size_t>(len);
        return ParamInfo::Where::kExpr;
      }
    }
    return ParamInfo::Where::kUnreadable;
  }
  // .debug_loclists (DWARF 5 section 2.6.2, DW_LLE_*).
  if (off >= loclists.size) return ParamInfo::Where::kUnreadable;
  Cursor c(loclists, static_cast<size_t>(off), s.big_endian);
  const uint8_t* dflt = nullptr;
  size_t dflt_len = 0;
  bool have_dflt = false;
  for (size_t n = 0; n < kMaxLocEntries && c.ok; n++) {
    const uint8_t kind = c.u8();
    if (!c.ok) break;
    uint64_t lo = 0, hi = 0;
    bool ranged = true;
    switch (kind) {
      case 0:  // end_of_list
        if (have_dflt && dflt_len > 0) {
          *expr = dflt;
          *expr_len = dflt_len;
          return ParamInfo::Where::kExpr;
        }
        return ParamInfo::Where::kOptimizedOut;
      case 1:  // base_addressx
        if (!addrx(c.uleb(), &base)) return ParamInfo::Where::kUnreadable;
        continue;
      case 2: {  // startx_endx
        const uint64_t a = c.uleb(), b = c.uleb();
        if (!addrx(a, &lo) || !addrx(b, &hi)) return ParamInfo::Where::kUnreadable;
        break;
      }
      case 3: {  // startx_length
        const uint64_t a = c.uleb();
        if (!addrx(a, &lo)) return ParamInfo::Where::kUnreadable;
        hi = lo + c.uleb();
        break;
      }
      case 4:  // offset_pair
        lo = base + c.uleb();
        hi = base + c.uleb();
        break;
      case 5: ranged = false; break;  // default_location
      case 6: base = c.fixed(as); continue;  // base_address
      case 7: lo = c.fixed(as); hi = c.fixed(as); break;  // start_end
      case 8: lo = c.fixed(as); hi = lo + c.uleb(); break;  // start_length
      default: return ParamInfo::Where::kUnreadable;
    }
    const uint64_t len = c.uleb();
    const size_t at = c.pos;
    if (!c.skip(len)) break;
    if (!ranged) {
      dflt = c.data + at;
      dflt_len = static_cast<size_t>(len);
      have_dflt = true;
    } else if (pc >= lo && pc < hi) {
      if (len == 0) return ParamInfo::Where::kOptimizedOut;
      *expr = c.data + at;
      *expr_len = static_cast<size_t>(len);
      return ParamInfo::Where::kExpr;
    }
  }
  return ParamInfo::Where::kUnreadable;
}

void DwarfIndex::param_type(const Unit& u, uint64_t die_off, int depth, ParamType* out) const {
  *out = ParamType{};
  const Unit* tu = (die_off >= u.die_offset && die_off < u.end) ? &u : unit_at_offset(die_off);
  if (tu != nullptr && tu->is_dwo != u.is_dwo) tu = nullptr;  // a skeleton's offsets are not its DWO's
  DieAttrs a;
  if (depth > kMaxTypeDepth || tu == nullptr || !read_attrs(*tu, die_off, &a)) return;
  auto target = [&](ParamType* t) {
    if (a.has_type) {
      param_type(*tu, a.type, depth + 1, t);
    } else {
      *t = ParamType{};
      t->name = "void";
    }
  };
  switch (a.tag) {
    case kTagBaseType: {
      out->name = std::string(a.name);
      // gdb's spelling of gcc's C integer names (its DWARF reader shortens them).
      static constexpr std::pair<std::string_view, std::string_view> kGdbNames[] = {
          {"long int", "long"},
          {"long unsigned int", "unsigned long"},
          {"short int", "short"},
          {"short unsigned int", "unsigned short"},
          {"long long int", "long long"},
          {"long long unsigned int", "unsigned long long"},
      };
      for (const auto& [dwarf_name, gdb_name] : kGdbNames)
        if (a.name == dwarf_name) out->name = std::string(gdb_name);
      out->size = static_cast<uint32_t>(a.byte_size);
      const bool sized = a.has_byte_size && (a.byte_size == 1 || a.byte_size == 2 || a.byte_size == 4 || a.byte_size == 8);
      if (!sized) break;
      switch (a.encoding) {
        case kAteBoolean: out->kind = ParamType::Kind::kBool; break;
        case kAteFloat:
          if (a.byte_size == 4 || a.byte_size == 8) out->kind = ParamType::Kind::kFloat;
          break;
        case kAteSigned: out->kind = ParamType::Kind::kSigned; break;
        case kAteUnsigned: out->kind = ParamType::Kind::kUnsigned; break;
        case kAteSignedChar:
          out->kind = a.byte_size == 1 ? ParamType::Kind::kChar : ParamType::Kind::kSigned;
          break;
        case kAteUnsignedChar:
          out->kind = a.byte_size == 1 ? ParamType::Kind::kUChar : ParamType::Kind::kUnsigned;
          break;
        default: break;
      }
      break;
    }
    case kTagTypedef: {
      target(out);
      if (!a.has_type) out->kind = ParamType::Kind::kUnsupported;
      out->name = std::string(a.name);
      break;
    }
    case kTagConstType: case kTagVolatileType: case kTagRestrictType: case kTagAtomicType: {
      target(out);
      const char* q = a.tag == kTagConstType ? "const" : a.tag == kTagVolatileType ? "volatile"
                      : a.tag == kTagRestrictType ? "restrict" : "_Atomic";
      if (out->name.empty()) break;
      // gdb: "const char", "char * const" (a qualified pointer puts the qualifier after the '*').
      out->name = out->name.back() == '*' ? out->name + " " + q : std::string(q) + " " + out->name;
      break;
    }
    case kTagPointerType: {
      ParamType t;
      target(&t);
      out->kind = ParamType::Kind::kPointer;
      out->size = a.has_byte_size ? static_cast<uint32_t>(a.byte_size) : tu->addr_size;
      if (out->size != 4 && out->size != 8) out->kind = ParamType::Kind::kUnsupported;
      out->points_to_char = t.kind == ParamType::Kind::kChar || t.kind == ParamType::Kind::kUChar;
      // A pointer to a function, an array, ...: gdb's spelling wraps the declarator; left unknown.
      if (!t.name.empty()) out->name = t.name + (t.name.back() == '*' ? "*" : " *");
      break;
    }
    case kTagEnumerationType: {
      out->name = a.has_name ? "enum " + std::string(a.name) : "enum {...}";
      if (!a.has_byte_size || (a.byte_size != 1 && a.byte_size != 2 && a.byte_size != 4 && a.byte_size != 8)) break;
      out->size = static_cast<uint32_t>(a.byte_size);
      if (a.has_type) {
        ParamType under;
        param_type(*tu, a.type, depth + 1, &under);
        out->enum_signed = under.kind == ParamType::Kind::kSigned || under.kind == ParamType::Kind::kChar;
      }
      Cursor c(tu->s->info, a.end, tu->s->big_endian);
      c.end = static_cast<size_t>(tu->end);
      size_t budget = kMaxChildDies;
      bool ok = a.children;
      while (ok && c.ok && out->enumerators.size() < kMaxEnumerators) {
        const size_t at = c.pos;
        const uint64_t code = c.uleb();
        if (!c.ok || code == 0) break;
        DieAttrs e;
        if (!read_attrs(*tu, at, &e)) {
          ok = false;
          break;
        }
        c.pos = e.end;
        if (e.tag == kTagEnumerator && e.has_const && is_constant_form(e.const_value.form)) {
          if (e.const_value.form == kFormSdata && static_cast<int64_t>(e.const_value.u) < 0 && !a.has_type)
            out->enum_signed = true;
          out->enumerators.emplace_back(e.const_value.u, e.name);
        }
        ok = skip_children(*tu, c, e.children, &budget);
      }
      if (ok) out->kind = ParamType::Kind::kEnum;
      break;
    }
    case kTagStructureType: out->name = a.has_name ? "struct " + std::string(a.name) : "struct {...}"; break;
    case kTagUnionType: out->name = a.has_name ? "union " + std::string(a.name) : "union {...}"; break;
    case kTagClassType: out->name = std::string(a.name); break;
    default: break;  // arrays, functions, references, pointers to members: no spelling, no value
  }
}

bool DwarfIndex::parameters(uint64_t pc, FrameParams* out) const {
  *out = FrameParams{};
  const int64_t ui = unit_covering(pc);
  const UnitCalls* uc = ui < 0 ? nullptr : unit_calls(static_cast<size_t>(ui));
  const int64_t fi = uc ? function_at(*uc, pc) : -1;
  if (fi < 0) return false;
  const Unit& u = *units_[static_cast<size_t>(ui)];
  const Unit& w = u.has_dwo && u.dwo ? *u.dwo : u;  // the unit unit_calls walked
  DieAttrs sub;
  if (!read_attrs(w, uc->funcs[static_cast<size_t>(fi)].die, &sub) || sub.tag != kTagSubprogram) return false;
  out->addr_size = w.addr_size;
  out->big_endian = w.s->big_endian;
  if (sub.has_frame_base) {
    out->has_frame_base = location_at(w, sub.frame_base.form, sub.frame_base.u,
                                      reinterpret_cast<const uint8_t*>(sub.frame_base.str), sub.frame_base.str_len, pc,
                                      &out->frame_base, &out->frame_base_len) == ParamInfo::Where::kExpr;
  }
  if (!sub.children) return true;
  Cursor c(w.s->info, sub.end, w.s->big_endian);
  c.end = static_cast<size_t>(w.end);
  size_t budget = kMaxChildDies;
  while (c.ok && out->params.size() < kMaxParams) {
    const size_t at = c.pos;
    const uint64_t code = c.uleb();
    if (!c.ok || code == 0) break;
    DieAttrs d;
    if (!read_attrs(w, at, &d)) break;
    c.pos = d.end;
    if (d.tag == kTagFormalParameter) {
      ParamInfo p;
      p.name = d.name;
      // The name and type of a concrete instance's parameter are its abstract origin's.
      bool has_name = d.has_name, has_type = d.has_type;
      uint64_t type_off = d.type;
      const Unit* tu = &w;  // the unit of the DIE whose DW_AT_type is used
      const Unit* ou = &w;
      DieAttrs o = d;
      for (int hop = 0; hop < kMaxRefChain && (!has_name || !has_type) && o.has_origin; hop++) {
        const uint64_t off = o.origin;
        const Unit* nu = (off >= ou->die_offset && off < ou->end) ? ou : unit_at_offset(off);
        if (nu == nullptr || nu->is_dwo != w.is_dwo) break;
        DieAttrs next;
        if (!read_attrs(*nu, off, &next)) break;
        if (!has_name && next.has_name) p.name = next.name, has_name = true;
        if (!has_type && next.has_type) type_off = next.type, tu = nu, has_type = true;
        o = next;
        ou = nu;
      }
      if (has_type) param_type(*tu, type_off, 0, &p.type);
      if (d.has_location) {
        p.where = location_at(w, d.location.form, d.location.u, reinterpret_cast<const uint8_t*>(d.location.str),
                              d.location.str_len, pc, &p.expr, &p.expr_len);
      } else if (d.has_const) {
        p.where = is_constant_form(d.const_value.form) ? ParamInfo::Where::kConst : ParamInfo::Where::kUnreadable;
        p.const_value = d.const_value.u;
      }
      out->params.push_back(std::move(p));
    }
    if (!skip_children(w, c, d.children, &budget)) break;
  }
  return true;
}

}  // namespace stackprov::dwarf
