// SPDX-License-Identifier: Apache-2.0
#include "unwind/pdata_source.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "pe/pe_object.hpp"

namespace stackprov::unwind {
namespace {

/// x64 register number (UNWIND_CODE, CONTEXT order) -> DWARF register number.
constexpr uint8_t kDwarfOf[pe::kX64Regs] = {0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr uint8_t kDwarfRip = 16;

/// The loaded image's bytes at an RVA, copied through ObjectImage::read_code into a buffer of the
/// caller's (one per lookup: the source is shared by threads).
struct ReadBuf {
  const object::ObjectImage* image;
  uint64_t image_base;
  uint8_t data[640];
};

pe::ImageReader reader_over(ReadBuf& b) {
  return [&b](uint32_t rva, uint32_t len) -> std::span<const uint8_t> {
    if (len > sizeof(b.data) || !b.image->read_code(b.image_base + rva, b.data, len)) return {};
    return {b.data, len};
  };
}

bool read_code_at(const void* ctx, uint32_t rva, uint8_t* buf, uint32_t len) {
  const ReadBuf& b = *static_cast<const ReadBuf*>(ctx);
  return b.image->read_code(b.image_base + rva, buf, len);
}

/// The plan as a compact rule: every location relative to the cfa's register, in words.
bool to_compact(const pe::X64Plan& p, UnwindRule* out) {
  if (p.machine_frame || p.rsp.offset < INT32_MIN || p.rsp.offset > INT32_MAX) return false;
  UnwindRule r;
  r.kind = UnwindRule::kCfaReg;
  r.cfa_reg = kDwarfOf[p.rsp.base];
  r.cfa_off = static_cast<int32_t>(p.rsp.offset);
  auto words = [&p](const pe::X64Loc& l, int8_t* w) {
    if (l.base != p.rsp.base) return false;
    const int64_t d = l.offset - p.rsp.offset;
    if (d % 8 != 0 || d / 8 < -128 || d / 8 > 127) return false;
    *w = static_cast<int8_t>(d / 8);
    return true;
  };
  r.ra_kind = UnwindRule::kRaAtCfa;
  r.ra_reg = kDwarfRip;  // the return address column (what a row printer names)
  if (!words(p.ra, &r.ra_off)) return false;
  for (uint8_t reg = 0; reg < pe::kX64Regs; reg++) {
    if ((p.saved & (1u << reg)) == 0) continue;
    if (r.nsaved == UnwindRule::kMaxSaved || !words(p.saved_at[reg], &r.saved_off[r.nsaved])) return false;
    r.saved_reg[r.nsaved++] = kDwarfOf[reg];
  }
  *out = r;
  return true;
}

/// Writes DW_OP_breg<dwarf(base)> offset [DW_OP_deref] into the row's own expression bytes.
bool put_expr(FullRow* out, size_t* used, const pe::X64Loc& l, bool deref, uint32_t* off, uint32_t* len) {
  uint8_t tmp[16];
  size_t n = 0;
  tmp[n++] = static_cast<uint8_t>(0x70 + kDwarfOf[l.base]);  // DW_OP_breg0 + n
  int64_t v = l.offset;
  for (;;) {  // SLEB128
    const uint8_t byte = v & 0x7f;
    v >>= 7;
    const bool done = (v == 0 && (byte & 0x40) == 0) || (v == -1 && (byte & 0x40) != 0);
    tmp[n++] = done ? byte : static_cast<uint8_t>(byte | 0x80);
    if (done) break;
  }
  if (deref) tmp[n++] = 0x06;  // DW_OP_deref
  if (*used + n > sizeof(out->own_exprs)) return false;
  std::memcpy(out->own_exprs + *used, tmp, n);
  *off = static_cast<uint32_t>(*used);
  *len = static_cast<uint32_t>(n);
  *used += n;
  return true;
}

/// The plan as an interpreter row: the cfa is rsp' (read from the machine frame after one), each
/// location cfa-relative where it can be, else an expression over the frame's register.
bool to_full_row(const pe::X64Plan& p, uint64_t rel, FullRow* out) {
  out->row = dwarf::CfiRow{};
  out->from_debug_frame = false;
  dwarf::CfiRow& row = out->row;
  row.start = rel;
  row.end = rel + 1;
  row.ra_reg = kDwarfRip;
  row.signal_frame = p.machine_frame;
  size_t used = 0;
  if (p.machine_frame) {
    row.cfa.kind = dwarf::CfaRule::Kind::kExpression;
    if (!put_expr(out, &used, p.rsp_slot, true, &row.cfa.expr_offset, &row.cfa.expr_len)) return false;
  } else {
    row.cfa.kind = dwarf::CfaRule::Kind::kRegOffset;
    row.cfa.reg = kDwarfOf[p.rsp.base];
    row.cfa.offset = p.rsp.offset;
  }
  auto put = [&](uint8_t col, const pe::X64Loc& l) {
    dwarf::RegRule& rr = row.regs[col];
    if (!p.machine_frame && l.base == p.rsp.base) {
      rr.kind = dwarf::RegRuleKind::kOffset;
      rr.offset = l.offset - p.rsp.offset;
      return true;
    }
    rr.kind = dwarf::RegRuleKind::kExpression;
    return put_expr(out, &used, l, false, &rr.expr_offset, &rr.expr_len);
  };
  if (!put(kDwarfRip, p.ra)) return false;
  for (uint8_t reg = 0; reg < pe::kX64Regs; reg++)
    if ((p.saved & (1u << reg)) != 0 && !put(kDwarfOf[reg], p.saved_at[reg])) return false;
  out->own_section = dwarf::CfiSection{};
  out->own_section.data = out->own_exprs;
  out->own_section.size = used;
  out->own_section.addr_size = 8;
  out->section = &out->own_section;
  return true;
}

}  // namespace

Result<std::unique_ptr<UnwindSource>> PdataSource::make(const object::UnwindTable& table,
                                                        const object::ObjectImage& image) {
  const auto* pe_image = dynamic_cast<const pe::PeObject*>(&image);
  if (pe_image == nullptr)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: a pdata table outside a PE image", image.path().c_str());
  auto rows = pe::read_pdata({table.data.data, table.data.size});
  if (!rows.ok()) return make_error(rows.error().code, "%s: %s", image.path().c_str(), rows.error().message.c_str());
  return std::unique_ptr<UnwindSource>(new PdataSource(image, pe_image->image_base(), std::move(rows.value())));
}

Result<pe::X64Plan> PdataSource::plan(uint64_t rel, bool exact) const {
  if (rel < image_base_ || rel - image_base_ > UINT32_MAX)
    return make_error(SPROV_ERR_NO_MODULE, "%s: address 0x%llx outside the image", image_.path().c_str(),
                      static_cast<unsigned long long>(rel));
  ReadBuf buf{&image_, image_base_, {}};
  return pe::plan_x64_step(reader_over(buf), table_, static_cast<uint32_t>(rel - image_base_), exact, read_code_at,
                           &buf);
}

dwarf::CfiStatus PdataSource::rule(uint64_t rel, const RowParams& p, UnwindRule* out) const {
  *out = UnwindRule{};
  if (p.addr_size != 8) return dwarf::CfiStatus::kUnsupported;
  auto pl = plan(rel, false);
  if (!pl.ok()) return dwarf::CfiStatus::kBadCfi;
  if (!to_compact(pl.value(), out)) {
    *out = UnwindRule{};
    out->kind = UnwindRule::kFull;
    out->signal_frame = pl.value().machine_frame ? 1 : 0;
  }
  return dwarf::CfiStatus::kOk;
}

RuleLookup PdataSource::lookup(uint64_t rel, const RuleQuery& q) const {
  RuleLookup l;
  if (!q.may_allocate) {  // decoding a chain allocates
    l.rule.kind = UnwindRule::kNoInfo;
    l.cache = false;
    return l;
  }
  auto pl = plan(rel, q.exact_pc);
  if (!pl.ok()) {
    l.rule.kind = UnwindRule::kInvalid;
    return l;
  }
  if (!to_compact(pl.value(), &l.rule)) {
    l.rule = UnwindRule{};
    l.rule.kind = UnwindRule::kFull;
    l.rule.signal_frame = pl.value().machine_frame ? 1 : 0;
  }
  l.cache = !pl.value().in_epilog;  // an exact pc's answer; the same rel as a return address is not one
  return l;
}

dwarf::CfiStatus PdataSource::full_row(uint64_t rel, const RuleQuery& q, FullRow* out) const {
  auto pl = plan(rel, q.exact_pc);
  if (!pl.ok()) return pl.error().code == SPROV_ERR_NO_MODULE ? dwarf::CfiStatus::kNotFound : dwarf::CfiStatus::kBadCfi;
  return to_full_row(pl.value(), rel, out) ? dwarf::CfiStatus::kOk : dwarf::CfiStatus::kUnsupported;
}

std::vector<uint64_t> PdataSource::row_starts() const {
  std::vector<uint64_t> out;
  // Code outside every RUNTIME_FUNCTION is a leaf (the return address at [rsp]): a row at each code
  // section's start covers the leaves before the first function (wine's ntdll puts its syscall
  // stubs there), as the rows at each function's end cover the gaps after it.
  for (const object::CodeSection& c : image_.code_sections())
    if (c.end > c.addr) out.push_back(c.addr);
  ReadBuf buf{&image_, image_base_, {}};
  const pe::ImageReader img = reader_over(buf);
  for (const pe::RuntimeFunction& f : table_) {
    out.push_back(image_base_ + f.begin);
    if ((f.unwind_rva & 1) == 0) {
      auto info = pe::decode_unwind_info(img, f.unwind_rva);
      if (info.ok())
        for (const pe::UnwindCode& c : info.value().codes)
          if (c.prolog_offset != 0 && f.begin + c.prolog_offset < f.end) out.push_back(image_base_ + f.begin + c.prolog_offset);
    }
    out.push_back(image_base_ + f.end);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> PdataSource::functions() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.reserve(table_.size());
  for (const pe::RuntimeFunction& f : table_) out.emplace_back(image_base_ + f.begin, image_base_ + f.end);
  return out;
}

const TableKind kPdataKind{"pdata", PdataSource::make};

}  // namespace stackprov::unwind
