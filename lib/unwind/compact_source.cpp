// SPDX-License-Identifier: Apache-2.0
#include "unwind/compact_source.hpp"

#include <algorithm>
#include <unordered_set>

#include "macho/macho_object.hpp"
#include "unwind/first_frame.hpp"

namespace stackprov::unwind {
namespace {

constexpr uint8_t kX86Rsp = 7, kX86Rbp = 6, kX86Ra = 16;
constexpr uint8_t kArmSp = 31, kArmFp = 29, kArmLr = 30;

/// UNWIND_X86_64_MODE_DWARF / UNWIND_ARM64_MODE_DWARF (compact_unwind_encoding.h).
bool is_dwarf_mode(Arch arch, uint32_t encoding) {
  return (encoding & macho::kEncodingModeMask) == (arch == Arch::kX86_64 ? 0x04000000u : 0x03000000u);
}

/// A decoded encoding (not DWARF, not none) as a compact rule; false when a slot is too far from
/// the cfa for the rule's int8 words.
bool to_rule(const macho::CompactRule& c, const RowParams& p, UnwindRule* out) {
  UnwindRule r;
  r.kind = UnwindRule::kCfaReg;
  const bool x86 = c.arch == Arch::kX86_64;
  if (c.kind == macho::CompactRule::Kind::kFramePointer) {
    r.cfa_reg = x86 ? kX86Rbp : kArmFp;
    r.cfa_off = 16;
  } else {
    r.cfa_reg = x86 ? kX86Rsp : kArmSp;
    r.cfa_off = static_cast<int32_t>(c.stack_size);
  }
  const uint8_t ra_reg = x86 ? kX86Ra : kArmLr;
  r.ra_reg = ra_reg;
  if (c.ra_in_lr) r.ra_kind = UnwindRule::kRaSameValue;  // ra = lr
  for (uint8_t i = 0; i < c.nsaved; i++) {
    const macho::CompactRule::Saved& s = c.saved[i];
    if (s.offset % 8 != 0 || s.offset / 8 < INT8_MIN || s.offset / 8 > INT8_MAX) return false;
    const auto words = static_cast<int8_t>(s.offset / 8);
    if (s.reg == ra_reg) {
      r.ra_kind = UnwindRule::kRaAtCfa;
      r.ra_off = words;
      continue;
    }
    // arm64's d8-d15 are not in the register state; nothing a caller's rule reads.
    if (s.reg >= p.num_regs || s.reg >= 64 || ((p.callee_saved >> s.reg) & 1) == 0) continue;
    if (r.nsaved == UnwindRule::kMaxSaved) return false;
    r.saved_reg[r.nsaved] = s.reg;
    r.saved_off[r.nsaved++] = words;
  }
  *out = r;
  return true;
}

}  // namespace

Result<std::unique_ptr<UnwindSource>> CompactUnwindSource::make(const object::UnwindTable& table,
                                                                const object::ObjectImage& image) {
  const auto* mo = dynamic_cast<const macho::MachoObject*>(&image);
  if (mo == nullptr)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: a compact_unwind table outside a Mach-O image", image.path().c_str());
  if (image.arch() != Arch::kX86_64 && image.arch() != Arch::kArm64)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: compact unwind of architecture %s", image.path().c_str(),
                      arch_name(image.arch()));
  auto t = macho::CompactUnwindTable::parse({table.data.data, table.data.size});
  if (!t.ok()) return make_error(t.error().code, "%s: %s", image.path().c_str(), t.error().message.c_str());
  std::vector<uint64_t> starts = mo->function_starts();
  std::sort(starts.begin(), starts.end());
  std::unique_ptr<CompactUnwindSource> s(
      new CompactUnwindSource(image, image.arch(), mo->text_vmaddr(), std::move(t).value(), std::move(starts)));
  if (table.aux.data != nullptr && table.aux.size > 0) {
    dwarf::CfiSection& c = s->eh_;
    c.data = table.aux.data;
    c.size = table.aux.size;
    c.vaddr = table.aux.addr;
    c.is_eh_frame = true;
    c.big_endian = false;
    c.addr_size = 8;
    c.vendor_ops = image.arch() == Arch::kArm64 ? dwarf::CfiVendorOps::kAarch64 : dwarf::CfiVendorOps::kNone;
    if (auto text = image.section("__TEXT,__text")) c.text_vaddr = text->addr;
  }
  return std::unique_ptr<UnwindSource>(std::move(s));
}

std::optional<macho::CompactRule> CompactUnwindSource::compact_rule(uint64_t rel) const {
  if (rel < base_ || rel - base_ > UINT32_MAX) return std::nullopt;
  auto e = table_.find(static_cast<uint32_t>(rel - base_));
  if (!e) return std::nullopt;
  const macho::CodeReader code = [this](uint64_t vaddr, void* buf, size_t len) { return image_.read_code(vaddr, buf, len); };
  auto r = arch_ == Arch::kX86_64 ? macho::decode_x86_64(e->encoding, base_ + e->start, code) : macho::decode_arm64(e->encoding);
  if (!r.ok()) return std::nullopt;
  return r.value();
}

dwarf::CfiStatus CompactUnwindSource::body_rule(uint64_t rel, const RowParams& p, UnwindRule* out,
                                                macho::FunctionUnwind* entry) const {
  *out = UnwindRule{};
  out->kind = UnwindRule::kNoInfo;
  if (p.addr_size != 8) return dwarf::CfiStatus::kUnsupported;
  if (rel < base_ || rel - base_ > UINT32_MAX) return dwarf::CfiStatus::kOk;
  auto e = table_.find(static_cast<uint32_t>(rel - base_));
  if (!e) return dwarf::CfiStatus::kOk;
  *entry = *e;
  const macho::CodeReader code = [this](uint64_t vaddr, void* buf, size_t len) { return image_.read_code(vaddr, buf, len); };
  auto c = arch_ == Arch::kX86_64 ? macho::decode_x86_64(e->encoding, base_ + e->start, code) : macho::decode_arm64(e->encoding);
  if (!c.ok()) {
    out->kind = UnwindRule::kInvalid;
    return dwarf::CfiStatus::kBadCfi;
  }
  switch (c.value().kind) {
    case macho::CompactRule::Kind::kNone:
      return dwarf::CfiStatus::kOk;  // kNoInfo: the later rungs (frame pointer) take a caller's frame
    case macho::CompactRule::Kind::kDwarf: {
      if (eh_.data == nullptr) {
        out->kind = UnwindRule::kInvalid;
        return dwarf::CfiStatus::kBadCfi;
      }
      dwarf::FdeInfo fde;
      dwarf::CfiRow row;
      if (dwarf::decode_fde(eh_, c.value().fde_offset, &fde) != dwarf::CfiStatus::kOk || rel < fde.pc_begin || rel >= fde.pc_end ||
          dwarf::find_row(eh_, fde, rel, &row) != dwarf::CfiStatus::kOk) {
        out->kind = UnwindRule::kInvalid;
        return dwarf::CfiStatus::kBadCfi;
      }
      *out = translate_row(row, p.addr_size, p.num_regs, p.callee_saved);
      return dwarf::CfiStatus::kOk;
    }
    default:
      if (!to_rule(c.value(), p, out)) {
        *out = UnwindRule{};
        return dwarf::CfiStatus::kUnsupported;
      }
      return dwarf::CfiStatus::kOk;
  }
}

dwarf::CfiStatus CompactUnwindSource::rule(uint64_t rel, const RowParams& p, UnwindRule* out) const {
  macho::FunctionUnwind e;
  return body_rule(rel, p, out, &e);
}

void CompactUnwindSource::function_bounds(uint64_t rel, const macho::FunctionUnwind& e, uint64_t* start, uint64_t* end) const {
  *start = base_ + e.start;
  *end = base_ + e.end;
  auto it = std::upper_bound(starts_.begin(), starts_.end(), rel);
  if (it != starts_.end()) *end = std::min(*end, *it);
  if (it != starts_.begin()) *start = std::max(*start, *(it - 1));
}

RuleLookup CompactUnwindSource::lookup(uint64_t rel, const RuleQuery& q) const {
  RuleLookup l;
  macho::FunctionUnwind e;
  e.end = 0;
  const dwarf::CfiStatus st = body_rule(rel, q.params, &l.rule, &e);
  if (st != dwarf::CfiStatus::kOk) l.rule.kind = UnwindRule::kInvalid;
  if (!q.exact_pc) return l;
  // Frame 0: a prologue or epilogue, whose instructions say where sp is (DWARF mode: its rows describe
  // the prologue, but compilers seldom describe epilogues, so only those are analysed).
  const bool dwarf_mode = st == dwarf::CfiStatus::kOk && l.rule.kind != UnwindRule::kNoInfo && is_dwarf_mode(arch_, e.encoding);
  if (e.end > e.start) {
    uint64_t start, end;
    function_bounds(rel, e, &start, &end);
    const FirstFrameCode code = [this](uint64_t vaddr, void* buf, size_t len) { return image_.read_code(vaddr, buf, len); };
    auto ff = arch_ == Arch::kX86_64 ? x86_64_first_frame(start, end, rel, code, !dwarf_mode)
                                     : arm64_first_frame(start, end, rel, code, !dwarf_mode);
    if (ff) {
      l.rule = *ff;
      l.cache = false;
      return l;
    }
  }
  if (l.rule.kind == UnwindRule::kNoInfo) {
    // No entry, or encoding 0: the return address where a call left it (first frame only).
    UnwindRule r;
    r.kind = UnwindRule::kCfaReg;
    if (arch_ == Arch::kX86_64) {
      r.cfa_reg = kX86Rsp;
      r.cfa_off = 8;
      r.ra_reg = kX86Ra;
      r.ra_kind = UnwindRule::kRaAtCfa;
      r.ra_off = -1;
    } else {
      r.cfa_reg = kArmSp;
      r.cfa_off = 0;
      r.ra_reg = kArmLr;
      r.ra_kind = UnwindRule::kRaSameValue;
    }
    l.rule = r;
    l.cache = false;
  }
  return l;
}

dwarf::CfiStatus CompactUnwindSource::full_row(uint64_t rel, const RuleQuery&, FullRow* out) const {
  auto c = compact_rule(rel);
  if (!c) return dwarf::CfiStatus::kNotFound;
  if (c->kind != macho::CompactRule::Kind::kDwarf || eh_.data == nullptr) return dwarf::CfiStatus::kUnsupported;
  dwarf::FdeInfo fde;
  if (dwarf::CfiStatus s = dwarf::decode_fde(eh_, c->fde_offset, &fde); s != dwarf::CfiStatus::kOk) return s;
  if (rel < fde.pc_begin || rel >= fde.pc_end) return dwarf::CfiStatus::kBadCfi;
  out->section = &eh_;
  out->from_debug_frame = false;
  return dwarf::find_row(eh_, fde, rel, &out->row);
}

std::vector<uint64_t> CompactUnwindSource::row_starts() const {
  std::vector<uint64_t> out;
  // Each FDE's rows once (hostile entries may all name one FDE), and at most kRowBudget rows
  // interpreted in all: a bundle of a hostile image stays bounded in time.
  constexpr int kRowBudget = 1 << 20;
  int budget = kRowBudget;
  std::unordered_set<uint32_t> done_fdes;
  for (const macho::SecondLevelPage& pg : table_.pages())
    for (const macho::PageEntry& e : pg.entries) {
      const uint64_t start = base_ + e.function_offset;
      out.push_back(start);
      // DWARF mode: every row of the FDE (bounded), so that a bundle's rows follow the CFI.
      if (eh_.data == nullptr || !is_dwarf_mode(arch_, e.encoding)) continue;
      const uint32_t fde_offset = e.encoding & 0x00ffffff;
      if (!done_fdes.insert(fde_offset).second) continue;
      dwarf::FdeInfo fde;
      if (dwarf::decode_fde(eh_, fde_offset, &fde) != dwarf::CfiStatus::kOk) continue;
      uint64_t pc = std::max(start, fde.pc_begin);
      for (int k = 0; k < 4096 && pc < fde.pc_end && budget-- > 0; k++) {
        dwarf::CfiRow row;
        if (dwarf::find_row(eh_, fde, pc, &row) != dwarf::CfiStatus::kOk || row.end <= pc) break;
        out.push_back(pc);
        pc = row.end;
      }
      out.push_back(fde.pc_end);
    }
  if (!table_.index().empty()) out.push_back(base_ + table_.index().back().function_offset);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const TableKind kCompactUnwindKind{"compact_unwind", CompactUnwindSource::make};

}  // namespace stackprov::unwind
