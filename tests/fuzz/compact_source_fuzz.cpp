// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the compact-unwind source (lib/unwind/compact_source.*) over a hostile Mach-O image: the
// table made from its __unwind_info and __eh_frame, every entry's start and end looked up as a caller's
// pc and as frame 0's (the first-frame analysis reading the image's code), the DWARF-mode rows, and
// the bundle row starts.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "arch/arm64/registers.hpp"
#include "arch/x86_64/registers.hpp"
#include "macho/macho_object.hpp"
#include "unwind/compiled_rows.hpp"
#include "unwind/compact_source.hpp"

using namespace stackprov;

// Input: a Mach-O file (the seeds in corpus/compact_source/ are the unicorn oracle's fixtures).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = macho::MachoObject::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz", {});
  if (!r.ok()) return 0;
  const macho::MachoObject& o = *r.value();
  const auto tables = o.unwind_tables();
  auto src = unwind::make_source(o, tables);
  if (!src.ok() || src.value() == nullptr) return 0;
  const unwind::UnwindSource& s = *src.value();
  if (s.method() != unwind::Method::kCompactUnwind) __builtin_trap();
  unwind::RuleQuery q;
  q.params = o.arch() == Arch::kArm64 ? unwind::row_params_of<arch::arm64::Traits>() : unwind::row_params_of<arch::x86_64::Traits>();
  const std::vector<uint64_t> starts = s.row_starts();
  size_t n = 0;
  for (uint64_t at : starts) {
    if (++n > 512) break;
    for (uint64_t pc : {at, at + 1, at + 4, at - 1}) {
      for (bool exact : {false, true}) {
        q.exact_pc = exact;
        const unwind::RuleLookup l = s.lookup(pc, q);
        if (l.rule.kind == unwind::UnwindRule::kCfaReg && (l.rule.cfa_reg >= q.params.num_regs || l.rule.nsaved > 12))
          __builtin_trap();
        for (int i = 0; i < l.rule.nsaved; i++)
          if (l.rule.saved_reg[i] >= q.params.num_regs) __builtin_trap();  // the unwinder indexes its registers with them
        if (l.rule.kind == unwind::UnwindRule::kFull || l.rule.kind == unwind::UnwindRule::kInvalid) {
          unwind::FullRow row;
          (void)s.full_row(pc, q, &row);
        }
      }
    }
  }
  return 0;
}
