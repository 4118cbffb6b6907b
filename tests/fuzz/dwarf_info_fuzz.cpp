// SPDX-License-Identifier: Apache-2.0
// Fuzz target: DwarfIndex (.debug_info/abbrev/line/str/str_offsets/addr/ranges/rnglists), dwz and split-DWARF references,
// its call sites and gdb's tail-call chain search over them (dwarf/tail_calls.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dwarf/dwarf_index.hpp"
#include "dwarf/tail_calls.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;
using namespace stackprov::dwarf;

// Input sections (scripts/fuzz-corpus.py, in this order): .debug_info, .debug_abbrev, .debug_line,
// .debug_line_str, .debug_str, .debug_str_offsets, .debug_addr, .debug_ranges, .debug_rnglists,
// then the dwz supplementary file's .debug_info, .debug_abbrev, .debug_str, then one DWO's
// .debug_info.dwo, .debug_abbrev.dwo, .debug_str.dwo, .debug_str_offsets.dwo, .debug_rnglists.dwo,
// .debug_line.dwo, then the probe addresses (u64 each).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SectionBytes s[19];
  fuzz::split_sections(data, size, s, 19);
  DwarfSections main{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[11], false, {}, {}, {}};
  DwarfIndexLimits limits;
  limits.max_nodes_per_unit = size_t{1} << 16;
  limits.memory_budget = size_t{16} << 20;
  auto ix = DwarfIndex::build(main, limits);
  if (!ix.ok()) return 0;
  DwarfIndex& index = *ix.value();
  if (!s[9].empty()) {
    DwarfSections alt;
    alt.info = s[9];
    alt.abbrev = s[10];
    alt.str = s[11];
    if (auto a = DwarfIndex::build(alt, limits); a.ok()) index.set_supplementary(std::move(a).value());
  }
  const DwoSections dwo{s[12], s[13], s[14], s[15], s[16], s[17], nullptr, "fuzz.dwo"};
  index.set_dwo_loader([&dwo](uint64_t, std::string_view, std::string_view, DwoSections* out) {
    if (dwo.info.empty()) return false;
    *out = dwo;
    return true;
  });
  std::vector<DwarfFrame> frames;
  size_t n = 0;
  for (size_t i = 0; i + 8 <= s[18].size && n < 64; i += 8, n++) {
    const uint64_t addr = fuzz::word_at(s[18].data, s[18].size, i);
    frames.clear();
    const bool found = index.lookup(addr, &frames);
    if (!found && !frames.empty()) __builtin_trap();  // not covered: no frames (the header's contract)
    for (size_t k = 1; k < frames.size(); k++)
      if (!frames[k].has_function) __builtin_trap();  // only an innermost frame may lack a function
  }
  // Call sites: what each probe's function tail-calls, each site found again by its return pc, and
  // the chain search between every pair of probes (bounded: a hostile call graph ends).
  TailCallQueries q;
  q.call_site_at = [&](uint64_t ret, CallSiteInfo* out) { return index.call_site_at(ret, out); };
  q.function_entry = [&](uint64_t pc, uint64_t* e) { return index.function_entry(pc, e); };
  q.tail_calls_of = [&](uint64_t e, std::vector<CallSiteInfo>* out) { return index.tail_calls_of(e, out); };
  q.target_address = [](const CallSiteInfo& cs, uint64_t* out) {
    *out = cs.target_addr;
    return cs.target == CallSiteInfo::Target::kAddress;
  };
  TailCallLimits tl;
  tl.max_steps = 4096;
  std::vector<CallSiteInfo> sites;
  std::vector<uint64_t> rets;
  for (size_t i = 0; i + 8 <= s[18].size && i < 64 * 8; i += 8) {
    const uint64_t addr = fuzz::word_at(s[18].data, s[18].size, i);
    uint64_t entry = 0;
    if (!index.function_entry(addr, &entry)) continue;
    if (!index.tail_calls_of(entry, &sites)) continue;
    for (const CallSiteInfo& cs : sites) {
      if (!cs.tail_call) __builtin_trap();  // only tail-call sites are listed
      CallSiteInfo again;  // hostile DWARF may place it outside its unit's ranges: not found then
      if (index.call_site_at(cs.return_pc, &again) && again.return_pc != cs.return_pc) __builtin_trap();
      if (rets.size() < 16) rets.push_back(cs.return_pc);
    }
    rets.push_back(addr);
  }
  for (uint64_t caller : rets)
    for (uint64_t callee : rets)
      if (tail_call_frames(q, caller, callee, tl).size() > tl.max_depth) __builtin_trap();
  // Determinism after eviction (the header's promise): the first probe again gives the same chain.
  if (s[18].size >= 8) {
    const uint64_t addr = fuzz::word_at(s[18].data, s[18].size, 0);
    std::vector<DwarfFrame> a, b;
    const bool fa = index.lookup(addr, &a);
    index.evict_all();
    const bool fb = index.lookup(addr, &b);
    if (fa != fb || a.size() != b.size()) __builtin_trap();
    for (size_t i = 0; i < a.size(); i++)
      if (a[i].name != b[i].name || a[i].line != b[i].line || a[i].file != b[i].file) __builtin_trap();
  }
  return 0;
}
