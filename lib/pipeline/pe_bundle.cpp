// SPDX-License-Identifier: Apache-2.0
// Bundle modules of PE images: ranges from the PDB, epilog rows from the code.
#include "pipeline/pe_bundle.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "arch/x86_64/insn_length.hpp"
#include "evidence/encoding.hpp"
#include "pdb/pdb_find.hpp"
#include "pe/pe_object.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/pdata_source.hpp"

namespace stackprov::pipeline {

namespace {

constexpr uint64_t kMaxCodeBytes = uint64_t{1} << 30;  // the DWARF range builder's bound

/// One frame of an answer as the bundle keeps it.
using FrameKey = std::tuple<std::string, std::string, uint32_t, uint32_t>;

FrameKey key_of(const pdb::Frame& f) { return {f.function, f.has_file ? f.file : std::string(), f.line, f.column}; }

}  // namespace

bool has_pdb(const object::ObjectImage& image) {
  const auto* pe = dynamic_cast<const pe::PeObject*>(&image);
  return pe != nullptr && pe->codeview().has_value() && !pe->codeview()->pdb_path.empty() &&
         image.id().kind == IdKind::kPdbGuidAge;
}

Status add_pdb_ranges(const object::ObjectImage& image, const object::DebugFileOptions& opts, bundle::ModuleContents* m,
                      std::string* pdb_path) {
  if (!has_pdb(image))
    return make_error(SPROV_ERR_INVALID_ARG, "%s: not a PE image whose CodeView record names a PDB",
                      image.path().c_str());
  const auto& pe = dynamic_cast<const pe::PeObject&>(image);
  pdb::PdbWanted want;
  want.image_path = image.path();
  want.target_root = image.target_root();
  want.rsds_path = pe.codeview()->pdb_path;
  want.id = image.id();
  auto f = pdb::find_pdb(want, opts);
  if (!f) return f.error();
  pdb::PdbFile& pdb = *f.value();
  std::vector<std::pair<uint64_t, uint64_t>> code;
  uint64_t total = 0;
  for (const object::CodeSection& c : image.code_sections()) {
    if (c.end <= c.addr) continue;
    total += c.end - c.addr;
    if (c.end - c.addr > kMaxCodeBytes || total > kMaxCodeBytes)
      return make_error(SPROV_ERR_INVALID_ARG, "%s: executable sections exceed the %llu-byte limit",
                        image.path().c_str(), static_cast<unsigned long long>(kMaxCodeBytes));
    code.emplace_back(c.addr, c.end);
  }
  std::sort(code.begin(), code.end());
  // Per depth the open range and the chain (outermost first) it was opened for: a depth-d range
  // goes on while frames 0..d are the same, so it never leaves its caller's range.
  std::vector<bundle::RangeRecord> ranges;
  std::vector<bundle::RangeRecord> open;
  std::vector<FrameKey> open_keys;
  auto close_from = [&](size_t d) {
    while (open.size() > d) {
      ranges.push_back(std::move(open.back()));
      open.pop_back();
      open_keys.pop_back();
    }
  };
  std::vector<FrameKey> chain;
  for (const auto& [lo, hi] : code) {
    close_from(0);
    for (uint64_t a = lo; a < hi; a++) {
      auto ans = pdb.lookup(a, pe.image_base());
      if (!ans) return make_error(ans.error().code, "%s: %s", pdb.path().c_str(), ans.error().message.c_str());
      const std::vector<pdb::Frame>& fr = ans.value().frames;  // innermost first
      chain.clear();
      const bool none = fr.empty() || (fr.size() == 1 && fr[0].function.empty() && !fr[0].has_file);
      if (!none)
        for (auto it = fr.rbegin(); it != fr.rend(); ++it) chain.push_back(key_of(*it));
      if (chain.size() > bundle::kMaxInlineDepth + 1) chain.resize(bundle::kMaxInlineDepth + 1);
      size_t same = 0;  // open depths that go on
      while (same < open.size() && same < chain.size() && open_keys[same] == chain[same] &&
             open[same].start + open[same].length == a && open[same].length < UINT32_MAX)
        same++;
      close_from(same);
      for (size_t d = same; d < chain.size(); d++) {
        bundle::RangeRecord r;
        r.start = a;
        r.length = 0;
        r.depth = static_cast<uint16_t>(d);
        std::tie(r.function, r.file, r.line, r.column) = chain[d];
        if (d > 0) {
          r.call_file = std::get<1>(chain[d - 1]);
          r.call_line = std::get<2>(chain[d - 1]);
          r.call_column = std::get<3>(chain[d - 1]);
        }
        open.push_back(std::move(r));
        open_keys.push_back(chain[d]);
      }
      for (bundle::RangeRecord& r : open) r.length++;
    }
  }
  close_from(0);
  if (pdb.file_changed())
    return make_error(SPROV_ERR_TRUNCATED, "%s: the PDB shrank while it was read", pdb.path().c_str());
  std::sort(ranges.begin(), ranges.end(), [](const bundle::RangeRecord& x, const bundle::RangeRecord& y) {
    return std::tie(x.depth, x.start) < std::tie(y.depth, y.start);
  });
  m->ranges = std::move(ranges);
  m->pdb_lines = true;
  auto h = evidence::sha256_file(pdb.path());
  if (!h) return h.error();
  m->sha256_debug = h.value();
  if (pdb_path != nullptr) *pdb_path = pdb.path();
  return {};
}

Result<size_t> add_epilog_rows(const object::ObjectImage& image_in, bundle::ModuleContents* m) {
  auto holder = std::shared_ptr<const object::ObjectImage>(&image_in, [](const object::ObjectImage*) {});
  auto lm = unwind::LoadedModule::load(holder, object::DebugFileOptions{});
  if (!lm) return lm.error();
  const auto* src = dynamic_cast<const unwind::PdataSource*>(lm.value()->source());
  if (src == nullptr) return size_t{0};
  const unwind::RowParams& params = lm.value()->row_params();
  unwind::RuleQuery exact;
  exact.params = params;
  exact.exact_pc = true;
  std::map<uint64_t, bundle::UnwindRowRecord> rows;
  for (const bundle::UnwindRowRecord& r : m->unwind_rows) rows[r.pc] = r;
  // The rule a pc gets from the rows so far (the last row at or below it).
  auto row_at = [&rows](uint64_t pc) -> const bundle::UnwindRowRecord* {
    auto it = rows.upper_bound(pc);
    return it == rows.begin() ? nullptr : &std::prev(it)->second;
  };
  size_t added = 0;
  uint64_t total = 0;
  std::vector<uint8_t> code;
  for (const auto& [begin, end] : src->functions()) {
    if (end <= begin || end - begin > kMaxCodeBytes) continue;  // read_pdata checked begin < end; bound the work
    total += end - begin;
    if (total > kMaxCodeBytes)
      return make_error(SPROV_ERR_INVALID_ARG, "%s: functions exceed the %llu-byte limit", image_in.path().c_str(),
                        static_cast<unsigned long long>(kMaxCodeBytes));
    code.resize(end - begin + 16, 0xcc);  // the last instruction may be decoded past the end
    if (!image_in.read_code(begin, code.data(), end - begin)) continue;
    std::vector<std::pair<uint64_t, bundle::UnwindRowRecord>> found;  // this function's epilog rows
    bool in_epilog = false;
    for (uint64_t pc = begin; pc < end;) {
      arch::x86_64::CallKind call;
      const size_t len = arch::x86_64::insn_length(code.data() + (pc - begin), code.size() - (pc - begin), &call);
      const unwind::RuleLookup l = src->lookup(pc, exact);
      // An exact pc's answer the rule cache may not keep is an epilog's (PdataSource::lookup).
      const bool epilog = !l.cache && l.rule.kind != unwind::UnwindRule::kInvalid &&
                          l.rule.kind != unwind::UnwindRule::kNoInfo;
      if (epilog) {
        found.emplace_back(pc, unwind::to_record(pc, l.rule));
      } else if (in_epilog) {  // back in the body: its rule again
        unwind::UnwindRule body;
        if (src->rule(pc, params, &body) != dwarf::CfiStatus::kOk) body.kind = unwind::UnwindRule::kFull;
        found.emplace_back(pc, unwind::to_record(pc, body));
      }
      in_epilog = epilog;
      if (len == 0) break;  // undecodable: no boundary is known past here
      pc += len;
    }
    for (auto& [pc, r] : found) {
      const bundle::UnwindRowRecord* cur = row_at(pc);
      if (cur != nullptr && unwind::same_rule(*cur, r) && cur->pc != pc) continue;
      rows[pc] = r;
      added++;
    }
    // After the function's last epilog its body rule holds until the next row (found ends there).
  }
  m->unwind_rows = unwind::merge_equal_rows(rows);
  return added;
}

}  // namespace stackprov::pipeline
