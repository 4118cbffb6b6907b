// SPDX-License-Identifier: Apache-2.0
// Bundle unwind rows: walks executable sections row by row (find_row ranges) and translates each row.
#include "unwind/bundle_rows.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "unwind/arch_dispatch.hpp"
#include "unwind/unwind_rule.hpp"

namespace stackprov::unwind {

bundle::UnwindRowRecord to_record(uint64_t pc, const UnwindRule& r) {
  bundle::UnwindRowRecord o;
  o.pc = pc;
  switch (r.kind) {
    case UnwindRule::kCfaReg: o.kind = bundle::UnwindRowRecord::kCfaReg; break;
    case UnwindRule::kEndOfStack: o.kind = bundle::UnwindRowRecord::kEndOfStack; break;
    case UnwindRule::kNoInfo: o.kind = bundle::UnwindRowRecord::kNoInfo; break;
    default: o.kind = bundle::UnwindRowRecord::kFull; break;
  }
  o.signal_frame = r.signal_frame != 0;
  o.from_debug_frame = r.from_debug_frame != 0;
  if (o.kind != bundle::UnwindRowRecord::kCfaReg) return o;
  o.cfa_reg = r.cfa_reg;
  o.cfa_off = r.cfa_off;
  o.ra_kind = r.ra_kind;
  o.ra_reg = r.ra_reg;
  o.ra_off = r.ra_off;
  o.nsaved = std::min<uint8_t>(r.nsaved, bundle::kMaxSavedRegs);
  for (int i = 0; i < o.nsaved; ++i) {
    o.saved_reg[i] = r.saved_reg[i];
    o.saved_off[i] = r.saved_off[i];
  }
  return o;
}

bool same_rule(const bundle::UnwindRowRecord& a, const bundle::UnwindRowRecord& b) {
  return a.kind == b.kind && a.cfa_reg == b.cfa_reg && a.ra_kind == b.ra_kind && a.ra_reg == b.ra_reg &&
         a.cfa_off == b.cfa_off && a.ra_off == b.ra_off && a.nsaved == b.nsaved &&
         a.signal_frame == b.signal_frame && a.from_debug_frame == b.from_debug_frame &&
         a.saved_reg == b.saved_reg && a.saved_off == b.saved_off;
}

std::vector<bundle::UnwindRowRecord> merge_equal_rows(const std::map<uint64_t, bundle::UnwindRowRecord>& rows) {
  std::vector<bundle::UnwindRowRecord> out;
  out.reserve(rows.size());
  for (const auto& [pc, r] : rows) {
    if (!out.empty() && same_rule(out.back(), r)) continue;
    out.push_back(r);
  }
  return out;
}

Result<std::vector<bundle::UnwindRowRecord>> bundle_source_rows(const UnwindSource& src, const RowParams& p) {
  std::vector<uint64_t> starts = src.row_starts();
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  std::vector<bundle::UnwindRowRecord> out;
  for (uint64_t pc : starts) {
    UnwindRule rule;
    if (src.rule(pc, p, &rule) != dwarf::CfiStatus::kOk) rule.kind = UnwindRule::kFull;  // undecodable: no rule
    bundle::UnwindRowRecord r = to_record(pc, rule);
    if (!out.empty() && same_rule(out.back(), r)) continue;
    out.push_back(r);
  }
  return out;
}

Result<std::vector<bundle::UnwindRowRecord>> bundle_unwind_rows(const LoadedModule& mod) {
  if (mod.object() == nullptr) return make_error(SPROV_ERR_INVALID_ARG, "unwind rows: the module has no file");
  const object::ObjectImage& img = *mod.object();
  // The unwinder's register count for the module's arch (its traits): translate_row leaves a row
  // naming a register beyond it to the interpreter, as the unwinder's own rows do.
  int num_regs = 0;
  if (!with_arch_traits(img.arch(), img.big_endian() ? Endian::kBig : Endian::kLittle,
                        [&](auto traits) { num_regs = decltype(traits)::type::kNumRegs; }))
    return make_error(SPROV_ERR_INVALID_ARG, "%s: unwind rows for architecture '%s' are not supported",
                      img.path().c_str(), arch_name(img.arch()));
  const int addr_size = img.addr_size();
  std::vector<std::pair<uint64_t, uint64_t>> text;
  for (const object::CodeSection& c : img.code_sections())
    if (c.end > c.addr) text.emplace_back(c.addr, c.end);
  std::sort(text.begin(), text.end());
  // Bounded work on hostile headers: the same limit as the range builder's default.
  constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;
  constexpr uint64_t kMaxCallsPerFde = 4096;
  uint64_t total = 0;
  for (const auto& [lo, hi] : text) {
    total += hi - lo;
    if (hi - lo > kMaxTextBytes || total > kMaxTextBytes)
      return make_error(SPROV_ERR_INVALID_ARG, "%s: executable sections exceed the %llu-byte limit",
                        img.path().c_str(), static_cast<unsigned long long>(kMaxTextBytes));
  }

  std::vector<bundle::UnwindRowRecord> out;
  auto emit = [&](bundle::UnwindRowRecord r) {
    if (!out.empty() && same_rule(out.back(), r)) return;  // the previous row already applies
    if (!out.empty() && out.back().pc == r.pc) {
      out.back() = r;
      return;
    }
    out.push_back(r);
  };
  // The lowest FDE start above `a` in either index (UINT64_MAX: none), for skipping a gap whole;
  // a + 1 when a table is out of order (hostile: no skip then).
  auto next_fde_start = [&](uint64_t a) {
    uint64_t best = UINT64_MAX;
    auto above = [&](const dwarf::FdeIndex& ix, const dwarf::CfiSection& sec) {
      const ptrdiff_t i = ix.find(sec, a);  // the last entry starting at or below a
      if (static_cast<size_t>(i + 1) >= ix.size()) return;
      const uint64_t pc = ix.entry_pc(sec, static_cast<size_t>(i + 1));
      best = std::min(best, pc > a ? pc : a + 1);
    };
    if (mod.has_eh_frame()) above(mod.eh_index(), mod.eh_frame());
    if (const LoadedModule::DebugFrame* df = mod.debug_frame()) above(df->index, df->section);
    return best;
  };
  uint64_t prev_end = 0;
  for (const auto& [lo, hi] : text) {
    if (!out.empty() && lo != prev_end) {
      bundle::UnwindRowRecord gap;  // between sections: no rule
      gap.pc = prev_end;
      gap.kind = bundle::UnwindRowRecord::kNoInfo;
      if (gap.pc < lo) emit(gap);
    }
    uint64_t a = lo;
    uint64_t fde_begin = UINT64_MAX, fde_calls = 0;  // find_row calls in the current FDE
    while (a < hi) {
      dwarf::FdeInfo fde;
      dwarf::CfiRow row;
      const dwarf::CfiSection* sec = nullptr;
      bool from_debug = false;
      dwarf::CfiStatus st = mod.find_fde(a, true, &fde, &sec, &from_debug);  // as the unwinder looks up
      // Work bounds on hostile CFI: each find_row reruns the FDE's program from its start, so an
      // FDE gets at most kMaxCallsPerFde of them (the rest of it is left to the interpreter), and
      // no step is a single byte where the FDE or the gap between FDEs can be skipped whole.
      bool capped = false;
      const bool covered = st == dwarf::CfiStatus::kOk;  // an FDE covers a: fde is decoded
      if (covered) {
        if (fde.pc_begin != fde_begin) fde_begin = fde.pc_begin, fde_calls = 0;
        capped = ++fde_calls > kMaxCallsPerFde;
        if (!capped) st = dwarf::find_row(*sec, fde, a, &row);
      }
      UnwindRule rule;
      uint64_t next = a + 1;
      if (st == dwarf::CfiStatus::kOk && !capped) {
        rule = translate_row(row, addr_size, num_regs);
        rule.from_debug_frame = from_debug ? 1 : 0;
        if (row.end > a) next = std::min(row.end, hi);
      } else if (st == dwarf::CfiStatus::kNotFound) {
        rule.kind = UnwindRule::kNoInfo;
        next = std::max(next, std::min(next_fde_start(a), hi));
      } else {
        rule.kind = UnwindRule::kFull;  // the interpreter reports the malformed CFI
        next = std::max(next, std::min(covered ? fde.pc_end : next_fde_start(a), hi));
      }
      emit(to_record(a, rule));
      a = next;
    }
    prev_end = hi;
  }
  if (!out.empty()) {
    bundle::UnwindRowRecord end;
    end.pc = prev_end;
    end.kind = bundle::UnwindRowRecord::kNoInfo;
    emit(end);
  }
  return out;
}

}  // namespace stackprov::unwind
