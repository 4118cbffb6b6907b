// SPDX-License-Identifier: Apache-2.0
// CFI row -> compact UnwindRule translation and the rule cache storage.
#include "unwind/unwind_rule.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>


namespace stackprov::unwind {

using dwarf::RegRuleKind;

UnwindRule translate_row(const dwarf::CfiRow& row, int addr_size, int num_regs, uint64_t keep_saved) {
  UnwindRule r;
  r.signal_frame = row.signal_frame ? 1 : 0;
  const int ra = row.ra_reg;
  if (ra >= dwarf::kMaxCfiRegs) {
    r.kind = UnwindRule::kFull;
    return r;
  }
  if (row.regs[ra].kind == RegRuleKind::kUndefined) {
    r.kind = UnwindRule::kEndOfStack;
    return r;
  }
  r.kind = UnwindRule::kFull;
  if (row.cfa.kind != dwarf::CfaRule::Kind::kRegOffset || row.cfa.reg >= num_regs ||
      row.cfa.offset > INT32_MAX || row.cfa.offset < INT32_MIN)
    return r;
  UnwindRule out;
  out.kind = UnwindRule::kCfaReg;
  out.signal_frame = r.signal_frame;
  out.cfa_reg = static_cast<uint8_t>(row.cfa.reg);
  out.cfa_off = static_cast<int32_t>(row.cfa.offset);
  out.ra_reg = static_cast<uint8_t>(ra);
  auto word_off = [&](int64_t off, int8_t* dst) {
    if (off % addr_size != 0) return false;
    int64_t w = off / addr_size;
    if (w < INT8_MIN || w > INT8_MAX) return false;
    *dst = static_cast<int8_t>(w);
    return true;
  };
  for (int reg = 0; reg < dwarf::kMaxCfiRegs; reg++) {
    const dwarf::RegRule& rr = row.regs[reg];
    if (reg == ra) {
      if (rr.kind == RegRuleKind::kOffset) {
        if (!word_off(rr.offset, &out.ra_off)) return r;
        out.ra_kind = UnwindRule::kRaAtCfa;
      } else if (rr.kind == RegRuleKind::kSameValue) {
        out.ra_kind = UnwindRule::kRaSameValue;
      } else if (rr.kind == RegRuleKind::kUnspecified) {
        out.ra_kind = UnwindRule::kRaUnspecified;
      } else {
        return r;
      }
      continue;
    }
    switch (rr.kind) {
      case RegRuleKind::kUnspecified:
      case RegRuleKind::kSameValue:
        break;
      case RegRuleKind::kOffset:
        if (reg >= num_regs) break;  // a register this arch does not track
        if (reg >= 64 || ((keep_saved >> reg) & 1) == 0) break;  // dead in the caller
        if (out.nsaved >= UnwindRule::kMaxSaved) return r;
        if (!word_off(rr.offset, &out.saved_off[out.nsaved])) return r;
        out.saved_reg[out.nsaved++] = static_cast<uint8_t>(reg);
        break;
      case RegRuleKind::kUndefined:
        if (reg >= num_regs || reg >= 64 || ((keep_saved >> reg) & 1) == 0) break;
        return r;  // the interpreter path marks it invalid
      default:
        if (reg >= num_regs || reg >= 64 || ((keep_saved >> reg) & 1) == 0) break;
        return r;
    }
  }
  return out;
}

void RuleCache::FreeDeleter::operator()(void* p) const { std::free(p); }

RuleCache::RuleCache() : block_(std::calloc(kEntries + kWays, sizeof(Entry))) {
  static_assert(std::is_trivially_copyable_v<Entry>, "entries are zero-filled by calloc");
  if (!block_) throw std::bad_alloc();
  constexpr uintptr_t kSetBytes = sizeof(Entry) * kWays;
  const auto at = reinterpret_cast<uintptr_t>(block_.get());
  entries_ = reinterpret_cast<Entry*>((at + kSetBytes - 1) & ~(kSetBytes - 1));
  // The quick table: one entry more, so that entries start on a 32-byte boundary (two to a line).
  static_assert(std::is_trivially_copyable_v<QuickEntry>, "quick entries are zero-filled by calloc");
  quick_block_.reset(std::calloc((size_t{1} << kQuickBits) + 1, sizeof(QuickEntry)));
  if (quick_block_) {
    const auto q = reinterpret_cast<uintptr_t>(quick_block_.get());
    quick_ = reinterpret_cast<QuickEntry*>((q + sizeof(QuickEntry) - 1) & ~(sizeof(QuickEntry) - 1));
  }
}

void RuleCache::clear() {
  std::memset(static_cast<void*>(entries_), 0, kEntries * sizeof(Entry));
  prologues_.reset();
  quick_table_ = 0;  // the next quick_begin() draws a new stamp
}

void RuleCache::insert_prologue(uint64_t rel_pc, bool exact_pc, uint32_t generation, const arch::PrologueInfo& info) {
  static_assert(kPrologueEntries == 256, "prologue_slot keeps the top 8 bits");
  if (!prologues_) prologues_ = std::make_unique<PrologueEntry[]>(kPrologueEntries);
  const uint64_t key = rel_pc << 1 | (exact_pc ? 1 : 0);
  PrologueEntry& e = prologues_[prologue_slot(key, generation)];
  e.key = key;
  e.generation = generation;
  e.info = info;
}

}  // namespace stackprov::unwind
