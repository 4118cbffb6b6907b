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
  // Each find_row reruns the program from the FDE's start: rows merged into one (equal rules) do
  // not fill slots, so the calls are counted too, or 100,000 one-byte advances would cost 10^10 ops.
  for (uint64_t calls = 0; pc < fde.pc_end; calls++) {
    CompiledRow& r = out[n];
    r.offset = static_cast<uint32_t>(pc - fde.pc_begin);
    if (n + 1 == cap || calls >= 2 * uint64_t{cap}) {  // the rest of the FDE goes to the interpreter
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
  if (nslots_ == 0) return;
  begins_.reset(new uint64_t[nslots_]);
  rows_.reset(new std::atomic<const FdeRows*>[nslots_]);
  for (size_t i = 0; i < nslots_; i++) {
    begins_[i] = index.entry_pc(sec, i);
    rows_[i].store(nullptr, std::memory_order_relaxed);
  }
  // About one FDE per page: the smallest power of two >= span / FDEs (at least 16 bytes).
  base_ = begins_[0];
  const uint64_t span = begins_[nslots_ - 1] - base_ + 1;
  shift_ = 4;
  while (shift_ < 63 && (span >> shift_) > nslots_) shift_++;
  npages_ = static_cast<uint32_t>(((span - 1) >> shift_) + 1);
  pages_.reset(new uint32_t[npages_ + 1]);
  size_t i = 0;
  for (uint32_t k = 0; k <= npages_; k++) {
    const uint64_t page_start = k == npages_ ? UINT64_MAX : base_ + (static_cast<uint64_t>(k) << shift_);
    while (i < nslots_ && begins_[i] < page_start) i++;
    pages_[k] = static_cast<uint32_t>(i);
  }
}

CompiledCfi::~CompiledCfi() {
  for (size_t i = 0; i < nslots_; i++) std::free(const_cast<FdeRows*>(rows_[i].load(std::memory_order_relaxed)));
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
  void* mem = std::malloc(FdeRows::bytes(n));
  if (mem == nullptr) throw std::bad_alloc();
  auto* fr = new (mem) FdeRows();
  fr->status = st;
  if (st == dwarf::CfiStatus::kOk) {
    fr->pc_begin = fde.pc_begin;
    fr->pc_end = fde.pc_end;
    if (fde.pc_end - fde.pc_begin > UINT32_MAX) fr->status = dwarf::CfiStatus::kUnsupported;
  }
  fr->count = n;
  auto* offsets = reinterpret_cast<uint32_t*>(fr + 1);
  auto* rules = reinterpret_cast<UnwindRule*>(offsets + n);
  for (uint32_t k = 0; k < n; k++) {
    offsets[k] = rows[k].offset;
    new (&rules[k]) UnwindRule(rows[k].rule);
  }
  const FdeRows* expected = nullptr;
  if (!rows_[i].compare_exchange_strong(expected, fr, std::memory_order_acq_rel, std::memory_order_acquire)) {
    std::free(mem);  // another thread published the same rows first (FdeRows and UnwindRule are trivially destructible)
    return expected;
  }
  compiled_.fetch_add(1, std::memory_order_relaxed);
  return fr;
}

size_t CompiledCfi::find_fde(uint64_t pc) const {
  if (nslots_ == 0 || pc < base_) return nslots_;
  // FDEs of earlier pages start below pc, of later pages above it: the answer is
  // in [pages_[k] - 1, pages_[k + 1]).
  const uint64_t k = std::min<uint64_t>((pc - base_) >> shift_, npages_);
  const uint64_t* lo = begins_.get() + pages_[k];
  const uint64_t* hi = begins_.get() + (k == npages_ ? nslots_ : pages_[k + 1]);
  // pages_[0] is 0 and begins_[0] <= pc: at least one key is <= pc.
  return static_cast<size_t>(std::upper_bound(lo, hi, pc) - begins_.get()) - 1;
}

dwarf::CfiStatus CompiledCfi::lookup(uint64_t pc, const RowParams& p, UnwindRule* rule) const {
  if (!(p == params_)) return dwarf::CfiStatus::kUnsupported;
  const size_t i = find_fde(pc);
  if (i == nslots_) return dwarf::CfiStatus::kNotFound;
  const FdeRows* fr = rows_[i].load(std::memory_order_acquire);
  if (fr == nullptr) fr = compile(i);
  if (fr->status != dwarf::CfiStatus::kOk) return fr->status;
  if (pc < fr->pc_begin || pc >= fr->pc_end || fr->count == 0) return dwarf::CfiStatus::kNotFound;
  const uint32_t off = static_cast<uint32_t>(pc - fr->pc_begin);
  const uint32_t* offsets = fr->offsets();
  // Last row whose offset <= off (offsets[0] is 0).
  uint32_t r = 0, hi = fr->count;
  while (hi - r > 1) {
    const uint32_t mid = r + (hi - r) / 2;
    if (offsets[mid] <= off) r = mid; else hi = mid;
  }
  *rule = fr->rules()[r];
  return dwarf::CfiStatus::kOk;
}

}  // namespace stackprov::unwind
