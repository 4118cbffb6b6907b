// SPDX-License-Identifier: Apache-2.0
// Bundle modules of Mach-O images: the first-frame rows computed from the code at build time.
#include "pipeline/macho_bundle.hpp"

#include <algorithm>
#include <iterator>
#include <map>

#include "arch/x86_64/insn_length.hpp"
#include "macho/macho_object.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/compact_source.hpp"
#include "unwind/module_unwind.hpp"

namespace stackprov::pipeline {

namespace {

constexpr uint64_t kMaxMachoCodeBytes = uint64_t{1} << 30;  // the DWARF range builder's bound

/// arm64 BL, BLR and BLRAA/BLRAB/BLRAAZ/BLRABZ (Arm ARM C6.2): a caller's return address follows one.
bool arm64_is_call(uint32_t w) {
  return (w & 0xfc000000) == 0x94000000 || (w & 0xfffffc1f) == 0xd63f0000 || (w & 0xfefff800) == 0xd63f0800;
}

}  // namespace

Result<size_t> add_first_frame_rows(const object::ObjectImage& image_in, bundle::ModuleContents* m) {
  const auto* mo = dynamic_cast<const macho::MachoObject*>(&image_in);
  if (mo == nullptr) return size_t{0};
  auto holder = std::shared_ptr<const object::ObjectImage>(&image_in, [](const object::ObjectImage*) {});
  auto lm = unwind::LoadedModule::load(holder, object::DebugFileOptions{});
  if (!lm) return lm.error();
  const auto* src = dynamic_cast<const unwind::CompactUnwindSource*>(lm.value()->source());
  if (src == nullptr) return size_t{0};
  const bool x86 = image_in.arch() == Arch::kX86_64;
  if (!x86 && image_in.arch() != Arch::kArm64) return size_t{0};
  const unwind::RowParams& params = lm.value()->row_params();
  unwind::RuleQuery exact;
  exact.params = params;
  exact.exact_pc = true;
  auto body_at = [&](uint64_t pc) {
    unwind::UnwindRule body;
    if (src->rule(pc, params, &body) != dwarf::CfiStatus::kOk) body.kind = unwind::UnwindRule::kFull;
    return unwind::to_record(pc, body);
  };
  std::map<uint64_t, bundle::UnwindRowRecord> rows;
  for (const bundle::UnwindRowRecord& r : m->unwind_rows) rows[r.pc] = r;
  std::map<uint64_t, bundle::UnwindRowRecord> found;  // pc -> the row the code asks for there
  uint64_t total = 0;
  std::vector<uint8_t> code;
  const std::vector<uint64_t>& starts = mo->function_starts();
  for (const object::CodeSection& sec : image_in.code_sections()) {
    if (sec.end <= sec.addr) continue;
    total += sec.end - sec.addr;
    if (sec.end - sec.addr > kMaxMachoCodeBytes || total > kMaxMachoCodeBytes)
      return make_error(SPROV_ERR_INVALID_ARG, "%s: executable sections exceed the %llu-byte limit",
                        image_in.path().c_str(), static_cast<unsigned long long>(kMaxMachoCodeBytes));
    // The section cut at the function starts inside it: each piece decoded from its start.
    std::vector<uint64_t> cuts{sec.addr};
    for (auto it = std::upper_bound(starts.begin(), starts.end(), sec.addr); it != starts.end() && *it < sec.end; ++it)
      cuts.push_back(*it);
    cuts.push_back(sec.end);
    for (size_t f = 0; f + 1 < cuts.size(); f++) {
      const uint64_t begin = cuts[f], end = cuts[f + 1];
      if (end <= begin) continue;
      code.assign(end - begin + 16, x86 ? 0xcc : 0x00);  // the last instruction may be decoded past the end
      if (!image_in.read_code(begin, code.data(), end - begin)) continue;
      for (uint64_t pc = begin; pc < end;) {
        const uint8_t* p = code.data() + (pc - begin);
        size_t len = 4;
        bool call = false;
        if (x86) {
          arch::x86_64::CallKind ck;
          len = arch::x86_64::insn_length(p, code.size() - (pc - begin), &ck);
          call = ck != arch::x86_64::CallKind::kNone;
        } else {
          if (end - pc < 4) break;
          call = arm64_is_call(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                               static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
        }
        const bundle::UnwindRowRecord body = body_at(pc);
        if (len == 0) {  // undecodable: no boundary is known past here, the body's rule from here on
          found[pc] = body;
          break;
        }
        const unwind::RuleLookup l = src->lookup(pc, exact);
        const bool first_frame = !l.cache && l.rule.kind != unwind::UnwindRule::kInvalid;
        const bundle::UnwindRowRecord r = first_frame ? unwind::to_record(pc, l.rule) : body;
        found[pc] = r;
        // A caller's lookup pc (its return address - 1) lies inside the call: the body's rule there.
        if (call && !unwind::same_rule(r, body)) {
          bundle::UnwindRowRecord after = body;
          after.pc = pc + 1;
          found[pc + 1] = after;
        }
        pc += len;
      }
    }
  }
  size_t added = 0;
  for (auto& [pc, r] : found) {
    auto it = rows.find(pc);
    if (it != rows.end() && unwind::same_rule(it->second, r)) continue;
    auto below = rows.upper_bound(pc);
    if (it == rows.end() && below != rows.begin() && unwind::same_rule(std::prev(below)->second, r)) continue;
    rows[pc] = r;
    added++;
  }
  m->unwind_rows = unwind::merge_equal_rows(rows);
  return added;
}

}  // namespace stackprov::pipeline
