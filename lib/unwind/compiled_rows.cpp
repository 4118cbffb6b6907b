// SPDX-License-Identifier: Apache-2.0
// Compiled unwind tables: per-FDE row compilation and the lock-free lazily filled per-section table.
#include "unwind/compiled_rows.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace stackprov::unwind {

namespace {

/// Rows compiled per FDE before the rest of it is left to the interpreter
/// (hand-written assembly with thousands of rows; compiling is quadratic in
/// the FDE's program length, as each row re-runs it from the start).
constexpr uint32_t kMaxRowsPerFde = 512;

}  // namespace

uint32_t compile_fde_rows(const dwarf::CfiSection& sec, const dwarf::FdeInfo& fde, const RowParams& p,
                          CompiledRow* out, uint32_t cap) {
  if (cap == 0 || fde.pc_end <= fde.pc_begin) return 0;
  uint32_t n = 0;
  uint64_t pc = fde.pc_begin;
  dwarf::CfiRow row;
  while (pc < fde.pc_end) {
    CompiledRow& r = out[n];
    r.offset = static_cast<uint32_t>(pc - fde.pc_begin);
    if (n + 1 == cap) {  // the last slot: the rest of the FDE goes to the interpreter
      r.rule = UnwindRule{};
      r.rule.kind = UnwindRule::kFull;
      r.rule.signal_frame = fde.signal_frame ? 1 : 0;
      return n + 1;
    }
    const dwarf::CfiStatus st = dwarf::find_row(sec, fde, pc, &row);
    if (st != dwarf::CfiStatus::kOk || row.end <= pc) {
      r.rule = UnwindRule{};  // kInvalid: the interpreter rejects the program from here on
      return n + 1;
    }
    r.rule = translate_row(row, p.addr_size, p.num_regs, p.callee_saved);
    r.rule.from_debug_frame = sec.is_eh_frame ? 0 : 1;
    // Merge with the previous row when the rule is the same (e.g. DW_CFA_GNU_args_size,
    // or rules for registers the compact rule does not carry).
    if (n > 0 && std::memcmp(&out[n - 1].rule, &r.rule, sizeof(UnwindRule)) == 0) {
      // keep the earlier row; it now extends to row.end
    } else {
      n++;
    }
    pc = row.end;
  }
  return n;
}

CompiledCfi::CompiledCfi(const dwarf::CfiSection& sec, const dwarf::FdeIndex& index, const RowParams& params)
    : sec_(sec), index_(index), nslots_(index.size()), params_(params) {
  if (nslots_ > 0) {
    slots_.reset(new Slot[nslots_]);
    for (size_t i = 0; i < nslots_; i++) {
      slots_[i].pc_begin = index.entry_pc(sec, i);
      slots_[i].rows.store(nullptr, std::memory_order_relaxed);
    }
  }
}

CompiledCfi::~CompiledCfi() {
  for (size_t i = 0; i < nslots_; i++) std::free(const_cast<FdeRows*>(slots_[i].rows.load(std::memory_order_relaxed)));
}

const FdeRows* CompiledCfi::compile(size_t i) const {
  dwarf::FdeInfo fde;
  const dwarf::CfiStatus st = index_.decode_entry(sec_, i, &fde);
  std::vector<CompiledRow> rows;
  uint32_t n = 0;
  if (st == dwarf::CfiStatus::kOk && fde.pc_end > fde.pc_begin && fde.pc_end - fde.pc_begin <= UINT32_MAX) {
    rows.resize(kMaxRowsPerFde);
    n = compile_fde_rows(sec_, fde, params_, rows.data(), kMaxRowsPerFde);
  }
  void* mem = std::malloc(sizeof(FdeRows) + n * sizeof(CompiledRow));
  if (mem == nullptr) throw std::bad_alloc();
  auto* fr = new (mem) FdeRows();
  fr->status = st;
  if (st == dwarf::CfiStatus::kOk) {
    fr->pc_begin = fde.pc_begin;
    fr->pc_end = fde.pc_end;
    if (fde.pc_end - fde.pc_begin > UINT32_MAX) fr->status = dwarf::CfiStatus::kUnsupported;
  }
  fr->count = n;
  std::copy(rows.begin(), rows.begin() + n, reinterpret_cast<CompiledRow*>(fr + 1));
  const FdeRows* expected = nullptr;
  if (!slots_[i].rows.compare_exchange_strong(expected, fr, std::memory_order_acq_rel, std::memory_order_acquire)) {
    std::free(fr);  // another thread published the same rows first
    return expected;
  }
  compiled_.fetch_add(1, std::memory_order_relaxed);
  return fr;
}

dwarf::CfiStatus CompiledCfi::lookup(uint64_t pc, const RowParams& p, UnwindRule* rule) const {
  if (!(p == params_)) return dwarf::CfiStatus::kUnsupported;
  // Last slot whose pc_begin <= pc (the FDE index's order).
  size_t lo = 0, n = nslots_;
  while (n > 0) {
    const size_t half = n / 2;
    if (slots_[lo + half].pc_begin <= pc) {
      lo += half + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  if (lo == 0) return dwarf::CfiStatus::kNotFound;
  const size_t i = lo - 1;
  const FdeRows* fr = slots_[i].rows.load(std::memory_order_acquire);
  if (fr == nullptr) fr = compile(i);
  if (fr->status != dwarf::CfiStatus::kOk) return fr->status;
  if (pc < fr->pc_begin || pc >= fr->pc_end || fr->count == 0) return dwarf::CfiStatus::kNotFound;
  const uint32_t off = static_cast<uint32_t>(pc - fr->pc_begin);
  const CompiledRow* rows = fr->rows();
  // Last row whose offset <= off (rows[0].offset is 0).
  uint32_t r = 0, hi = fr->count;
  while (hi - r > 1) {
    const uint32_t mid = r + (hi - r) / 2;
    if (rows[mid].offset <= off) r = mid; else hi = mid;
  }
  *rule = rows[r].rule;
  return dwarf::CfiStatus::kOk;
}

}  // namespace stackprov::unwind
