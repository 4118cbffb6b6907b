// SPDX-License-Identifier: Apache-2.0
// Compiled unwind rows of the system libc (x86_64) against the rows `readelf --debug-dump=frames-interp` prints.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "arch/x86_64/registers.hpp"
#include "object/object_image.hpp"
#include "unit/dwarf/readelf_frames.hpp"
#include "unwind/compiled_rows.hpp"
#include "unwind/module_unwind.hpp"

using namespace stackprov;
using namespace stackprov::unwind;
using namespace stackprov::test;

namespace {

/// One row of readelf's table with the pcs it covers.
struct PeerRow {
  uint64_t pc = 0;
  uint64_t end = 0;                          // the next row, or the FDE's end
  std::string cfa;                           // "rsp+8", "rbp+16", "exp"
  std::map<std::string, std::string> regs;  // column -> cell ("c-8", "u", "s", "exp", "r9 (r9)", ...)
};

std::vector<PeerRow> peer_rows(const RefFrames& f) {
  std::vector<PeerRow> out;
  for (const RefFde& fde : f.fdes) {
    if (fde.pc_end <= fde.pc_begin) continue;
    // An FDE without its own rows: readelf prints nothing; the CIE's initial row applies.
    const RefTable& t = fde.table.rows.empty() ? f.cies.at(fde.cie) : fde.table;
    for (size_t i = 0; i < t.rows.size(); i++) {
      if (fde.table.rows.empty() && i > 0) break;
      PeerRow r;
      r.pc = fde.table.rows.empty() ? fde.pc_begin : t.rows[i].loc;
      r.end = fde.table.rows.empty() || i + 1 == t.rows.size() ? fde.pc_end : t.rows[i + 1].loc;
      r.cfa = t.rows[i].cells[0];
      for (size_t c = 0; c < t.columns.size(); c++) r.regs[t.columns[c]] = t.rows[i].cells[c + 1];
      out.push_back(r);
    }
  }
  return out;
}

/// "c-16" -> true, -16.
bool cfa_slot(const std::string& cell, int64_t* off) {
  if (cell.size() < 3 || cell[0] != 'c' || (cell[1] != '+' && cell[1] != '-')) return false;
  *off = std::stoll(cell.substr(1));
  return true;
}

/// The compact rule readelf's row calls for, derived from the peer's text alone:
/// CFA = reg+off and ra = c+8n with every callee-saved register (rbx, rbp,
/// r12..r15) at c+8n or unchanged: kCfaReg; ra undefined: kEndOfStack;
/// anything else: kFull (the interpreter).
UnwindRule expected_rule(const PeerRow& r) {
  UnwindRule want;
  want.kind = UnwindRule::kFull;
  auto ra = r.regs.find("ra");
  if (ra != r.regs.end() && ra->second == "u") {
    want.kind = UnwindRule::kEndOfStack;
    return want;
  }
  std::smatch m;
  static const std::regex cfa_re(R"(^([a-z0-9]+)([+-][0-9]+)$)");
  if (!std::regex_match(r.cfa, m, cfa_re) || x86_reg(m[1]) < 0) return want;
  int64_t ra_off = 0;
  if (ra == r.regs.end() || !cfa_slot(ra->second, &ra_off) || ra_off % 8 != 0) return want;
  UnwindRule out;
  out.kind = UnwindRule::kCfaReg;
  out.cfa_reg = static_cast<uint8_t>(x86_reg(m[1]));
  out.cfa_off = static_cast<int32_t>(std::stoll(m[2]));
  out.ra_off = static_cast<int8_t>(ra_off / 8);
  for (const auto& [name, cell] : r.regs) {
    const int reg = x86_reg(name);
    if (reg == 16) continue;
    if (reg < 0 || ((arch::x86_64::Traits::kCalleeSaved >> reg) & 1) == 0) continue;  // dead in the caller
    int64_t off = 0;
    // readelf prints "u" for a column no rule has named yet (unspecified: unchanged),
    // "s" for same-value: neither is restored.
    if (cell == "s" || cell == "u") continue;
    if (!cfa_slot(cell, &off) || off % 8 != 0) return want;
    out.saved_reg[out.nsaved] = static_cast<uint8_t>(reg);
    out.saved_off[out.nsaved++] = static_cast<int8_t>(off / 8);
  }
  return out;
}

std::string libc_path() {
  std::string p = run("cc -print-file-name=libc.so.6");
  while (!p.empty() && p.back() == '\n') p.pop_back();
  return p;
}

std::vector<PeerRow> libc_rows(const std::string& libc) {
  return peer_rows(parse_frames_interp(run("readelf --debug-dump=frames-interp '" + libc + "'")));
}

/// libc.so.6 loaded as the unwinder loads a module (its rows not compiled yet).
std::shared_ptr<LoadedModule> load_libc(const std::string& libc) {
  auto img = object::open(libc);
  REQUIRE(img.ok());
  auto mod = LoadedModule::load(img.value(), {});
  REQUIRE(mod.ok());
  REQUIRE(mod.value()->has_eh_frame());
  return mod.value();
}

struct Checked {
  size_t rows = 0, cfa_reg = 0, full = 0, end = 0;
};

/// Looks up the first and last pc of every peer row; the compiled rule must be what the row calls for.
Checked check_rows(const LoadedModule& mod, const std::vector<PeerRow>& rows) {
  const RowParams p = row_params_of<arch::x86_64::Traits>();
  Checked c;
  for (const PeerRow& r : rows) {
    if (r.end <= r.pc) continue;
    const UnwindRule want = expected_rule(r);
    for (uint64_t pc : {r.pc, r.end - 1}) {
      INFO("pc 0x" << std::hex << pc << " CFA " << r.cfa << " ra " << (r.regs.count("ra") ? r.regs.at("ra") : "-"));
      UnwindRule got;
      REQUIRE(mod.compiled_rule(pc, false, p, &got) == dwarf::CfiStatus::kOk);
      REQUIRE(static_cast<int>(got.kind) == static_cast<int>(want.kind));
      if (want.kind != UnwindRule::kCfaReg) continue;
      CHECK(got.cfa_reg == want.cfa_reg);
      CHECK(got.cfa_off == want.cfa_off);
      CHECK(got.ra_kind == UnwindRule::kRaAtCfa);
      CHECK(got.ra_off == want.ra_off);
      std::map<int, int> gs, ws;
      for (int i = 0; i < got.nsaved; i++) gs[got.saved_reg[i]] = got.saved_off[i];
      for (int i = 0; i < want.nsaved; i++) ws[want.saved_reg[i]] = want.saved_off[i];
      CHECK(gs == ws);
    }
    c.rows++;
    c.cfa_reg += want.kind == UnwindRule::kCfaReg;
    c.full += want.kind == UnwindRule::kFull;
    c.end += want.kind == UnwindRule::kEndOfStack;
  }
  return c;
}

}  // namespace

// readelf, not llvm-dwarfdump-14: LLVM 14's row printer does not restore the CFA
// rule at DW_CFA_restore_state (libc's memcpy variants show rsp+8 where readelf,
// the interpreter and the code say rsp+64).
TEST_CASE("compiled rows of libc.so.6 match readelf --debug-dump=frames-interp", "[unwind][compiled][peer]") {
  const std::string libc = libc_path();
  INFO("libc: " << libc << "; readelf (binutils, scripts/install-deps.sh) must be installed");
  const std::vector<PeerRow> rows = libc_rows(libc);
  REQUIRE(rows.size() > 1000);
  const auto mod = load_libc(libc);

  const Checked c = check_rows(*mod, rows);
  CHECK(c.rows == rows.size());
  // The libc rows exercise every outcome: compact rules, interpreter rows (CFA
  // expressions, registers saved in registers), the end of the stack (clone3, _start).
  CHECK(c.cfa_reg > 1000);
  CHECK(c.full > 0);
  CHECK(c.end > 0);

  // Gaps between FDEs and pcs below every FDE: no rule.
  UnwindRule got;
  CHECK(mod->compiled_rule(0, false, row_params_of<arch::x86_64::Traits>(), &got) == dwarf::CfiStatus::kNotFound);
  // Another architecture's parameters are refused, not misapplied.
  CHECK(mod->compiled_rule(rows[0].pc, false, RowParams{4, 38, 0}, &got) ==
        dwarf::CfiStatus::kUnsupported);
}

TEST_CASE("compiled rows are published safely to concurrent lookups", "[unwind][compiled][peer]") {
  const std::string libc = libc_path();
  const std::vector<PeerRow> rows = libc_rows(libc);
  REQUIRE(rows.size() > 1000);
  const auto mod = load_libc(libc);
  // Four threads compile the same FDEs at once (each FDE is published by one of
  // them); each thread's answers must still be the peer's. Catch2 assertions
  // are not thread-safe: the threads count mismatches.
  const RowParams p = row_params_of<arch::x86_64::Traits>();
  std::vector<size_t> bad(4, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (const PeerRow& r : rows) {
        if (r.end <= r.pc) continue;
        UnwindRule got;
        const UnwindRule want = expected_rule(r);
        if (mod->compiled_rule(r.pc, false, p, &got) != dwarf::CfiStatus::kOk || got.kind != want.kind ||
            (want.kind == UnwindRule::kCfaReg && (got.cfa_reg != want.cfa_reg || got.cfa_off != want.cfa_off ||
                                                  got.ra_off != want.ra_off || got.nsaved != want.nsaved)))
          bad[t]++;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(bad == std::vector<size_t>(4, 0));
}
