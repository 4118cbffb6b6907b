// SPDX-License-Identifier: Apache-2.0
// Compares FdeIndex and find_row on binaries compiled at test time with `readelf --debug-dump=frames-interp`.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dwarf/cfi.hpp"
#include "unit/dwarf/readelf_frames.hpp"

using namespace stackprov::dwarf;
using namespace stackprov::test;

namespace {

const char* kProgram = R"(
#include <alloca.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
volatile int sink;
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int uses_alloca(int n) {
  char* p = alloca(n);
  memset(p, n, n);
  return p[n / 2] + leaf(n);
}
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int with_fp(int a, int b) {
  volatile char buf[100];
  buf[a % 100] = b;
  return buf[b % 100] + uses_alloca(a);
}
__attribute__((noinline)) long many_regs(long a, long b, long c, long d, long e, long f) {
  long r = 0;
  for (long i = 0; i < a; i++) {
    r += leaf(i) * b + c;
    r ^= leaf((int)(r + d)) + e * f;
    sink = (int)r;
  }
  return r + with_fp((int)a, (int)b);
}
__attribute__((noinline)) int variadic(int n, ...) {
  va_list ap;
  va_start(ap, n);
  int s = 0;
  for (int i = 0; i < n; i++) s += va_arg(ap, int);
  va_end(ap);
  return s;
}
__attribute__((noinline)) int recurse(int n) { return n <= 0 ? leaf(n) : recurse(n - 1) + recurse(n - 2); }
int main(int argc, char** argv) {
  (void)argv;
  printf("%ld\n", many_regs(argc, 2, 3, 4, 5, 6) + variadic(3, 1, 2, 3) + recurse(argc + 3));
  return 0;
}
)";

/// Checks one cell of readelf's table against our rule; returns false (with INFO) when it differs.
void check_cell(const std::string& col, const std::string& cell, const RegRule& rule) {
  INFO("column " << col << " readelf '" << cell << "'");
  if (cell == "u") {
    CHECK((rule.kind == RegRuleKind::kUnspecified || rule.kind == RegRuleKind::kUndefined));
  } else if (cell == "s") {
    CHECK(rule.kind == RegRuleKind::kSameValue);
  } else if (cell == "exp") {
    CHECK(rule.kind == RegRuleKind::kExpression);
  } else if (cell == "vexp") {
    CHECK(rule.kind == RegRuleKind::kValExpression);
  } else if (cell[0] == 'c' && (cell[1] == '+' || cell[1] == '-')) {
    CHECK(rule.kind == RegRuleKind::kOffset);
    CHECK(rule.offset == std::stoll(cell.substr(1)));
  } else if (cell[0] == 'v' && (cell[1] == '+' || cell[1] == '-')) {
    CHECK(rule.kind == RegRuleKind::kValOffset);
    CHECK(rule.offset == std::stoll(cell.substr(1)));
  } else {
    const size_t open = cell.find('(');
    const std::string name =
        open == std::string::npos ? cell : cell.substr(open + 1, cell.find(')') - open - 1);
    CHECK(rule.kind == RegRuleKind::kRegister);
    CHECK(static_cast<int>(rule.reg) == x86_reg(name));
  }
}

/// Compares find_row at `pc` with readelf's row; returns the number of cells compared.
int compare_row(const CfiSection& sec, const FdeInfo& fde, const RefFde& ref, const RefTable& cie_table,
                uint64_t pc) {
  INFO("pc 0x" << std::hex << pc << " fde 0x" << ref.offset);
  const RefTable& t = ref.table.rows.empty() ? cie_table : ref.table;
  REQUIRE_FALSE(t.rows.empty());
  // readelf prints the CIE's initial row at LOC 0; it applies from pc_begin.
  size_t idx = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const uint64_t loc = ref.table.rows.empty() ? ref.pc_begin : t.rows[i].loc;
    if (loc <= pc) idx = i;
  }
  const RefRow& row = t.rows[idx];
  uint64_t want_start = ref.table.rows.empty() ? ref.pc_begin : row.loc;
  uint64_t want_end = ref.pc_end;
  if (!ref.table.rows.empty()) {
    for (const RefRow& r : t.rows) {
      if (r.loc > pc) {
        want_end = r.loc;
        break;
      }
    }
  }
  CfiRow got;
  REQUIRE(find_row(sec, fde, pc, &got) == CfiStatus::kOk);
  CHECK(got.start == want_start);
  CHECK(got.end == want_end);
  const std::string& cfa = row.cells[0];
  int compared = 1;
  if (cfa == "exp") {
    CHECK(got.cfa.kind == CfaRule::Kind::kExpression);
  } else {
    const size_t sign = cfa.find_first_of("+-");
    REQUIRE(sign != std::string::npos);
    CHECK(got.cfa.kind == CfaRule::Kind::kRegOffset);
    CHECK(static_cast<int>(got.cfa.reg) == x86_reg(cfa.substr(0, sign)));
    CHECK(got.cfa.offset == std::stoll(cfa.substr(sign)));
  }
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const int reg = x86_reg(t.columns[c]);
    if (reg < 0 || reg >= kMaxCfiRegs) continue;
    check_cell(t.columns[c], row.cells[c + 1], got.regs[reg]);
    ++compared;
  }
  return compared;
}

struct Binary {
  std::string path;
  std::vector<uint8_t> eh_frame, eh_frame_hdr;
  SectionInfo eh_info, hdr_info, text_info;
  RefFrames ref;
  CfiSection sec() const {
    CfiSection s;
    s.data = eh_frame.data();
    s.size = eh_frame.size();
    s.vaddr = eh_info.addr;
    s.text_vaddr = text_info.addr;
    s.data_vaddr = hdr_info.addr;
    s.is_eh_frame = true;
    s.addr_size = 8;
    return s;
  }
};

bool load(const TmpDir& dir, const std::string& flags, Binary* b) {
  const std::string src = dir.path + "/prog.c";
  std::ofstream(src) << kProgram;
  b->path = dir.path + "/prog";
  const std::string cmd = "cc " + flags + " -o '" + b->path + "' '" + src + "' 2>&1";
  const std::string log = run(cmd + "; echo rc=$?");
  // cc is installed by make deps (build-essential): a fixture that does not build fails the test.
  if (log.find("rc=0") == std::string::npos) FAIL("compile failed: " << cmd << "\n" << log);
  auto secs = read_sections(b->path);
  b->eh_info = secs[".eh_frame"];
  b->hdr_info = secs[".eh_frame_hdr"];
  b->text_info = secs[".text"];
  REQUIRE(b->eh_info.present);
  b->eh_frame = section_bytes(dir, b->path, ".eh_frame");
  REQUIRE(b->eh_frame.size() == b->eh_info.size);
  if (b->hdr_info.present) {
    b->eh_frame_hdr = section_bytes(dir, b->path, ".eh_frame_hdr");
    REQUIRE(b->eh_frame_hdr.size() == b->hdr_info.size);
  }
  b->ref = parse_frames_interp(run("readelf --debug-dump=frames-interp '" + b->path + "'"));
  REQUIRE_FALSE(b->ref.fdes.empty());
  return true;
}

/// For every FDE readelf lists: lookups at both ends find it; rows match on a sample of pcs.
void check_against_readelf(const Binary& b, const FdeIndex& idx, size_t row_stride) {
  const CfiSection sec = b.sec();
  uint64_t last_end = 0;
  size_t checked = 0, rows_compared = 0;
  for (size_t i = 0; i < b.ref.fdes.size(); ++i) {
    const RefFde& ref = b.ref.fdes[i];
    if (ref.pc_end == ref.pc_begin) continue;
    INFO("FDE at 0x" << std::hex << ref.offset << " pc 0x" << ref.pc_begin << "..0x" << ref.pc_end);
    FdeInfo f;
    REQUIRE(idx.lookup(sec, ref.pc_begin, &f) == CfiStatus::kOk);
    CHECK(f.fde_offset == ref.offset);
    CHECK(f.cie_offset == ref.cie);
    CHECK(f.pc_end == ref.pc_end);
    REQUIRE(idx.lookup(sec, ref.pc_end - 1, &f) == CfiStatus::kOk);
    CHECK(f.fde_offset == ref.offset);
    last_end = std::max(last_end, ref.pc_end);
    ++checked;
    if (i % row_stride != 0) continue;
    auto cie = b.ref.cies.find(ref.cie);
    REQUIRE(cie != b.ref.cies.end());
    std::set<uint64_t> pcs = {ref.pc_begin, ref.pc_end - 1, ref.pc_begin + (ref.pc_end - ref.pc_begin) / 2};
    for (const RefRow& r : ref.table.rows) {
      pcs.insert(r.loc);
      if (r.loc > ref.pc_begin) pcs.insert(r.loc - 1);
    }
    for (uint64_t pc : pcs) {
      if (pc < ref.pc_begin || pc >= ref.pc_end) continue;
      rows_compared += compare_row(sec, f, ref, cie->second, pc);
    }
  }
  FdeInfo f;
  CHECK(idx.lookup(sec, last_end, &f) == CfiStatus::kNotFound);
  CHECK(checked > 0);
  CHECK(rows_compared > 0);
}

}  // namespace

TEST_CASE("PIE -O2 binary: .eh_frame_hdr and build() agree with readelf", "[cfi][readelf]") {
  TmpDir dir;
  REQUIRE_FALSE(dir.path.empty());
  Binary b;
  if (!load(dir, "-O2 -fasynchronous-unwind-tables", &b)) return;
  REQUIRE(b.hdr_info.present);
  const CfiSection sec = b.sec();

  FdeIndex hdr_idx, built;
  REQUIRE(FdeIndex::from_eh_frame_hdr(b.eh_frame_hdr.data(), b.eh_frame_hdr.size(), b.hdr_info.addr, sec,
                                      &hdr_idx) == CfiStatus::kOk);
  REQUIRE(FdeIndex::build(sec, &built) == CfiStatus::kOk);
  size_t nonempty = 0;
  for (const RefFde& r : b.ref.fdes) nonempty += r.pc_end > r.pc_begin;
  CHECK(built.size() == nonempty);
  CHECK(hdr_idx.size() == b.ref.fdes.size());

  check_against_readelf(b, hdr_idx, 1);
  check_against_readelf(b, built, 1);

  // Both indexes agree on every FDE, and on the pcs between them.
  for (const RefFde& r : b.ref.fdes) {
    for (uint64_t pc : {r.pc_begin, r.pc_end - 1, r.pc_end, r.pc_begin - 1}) {
      FdeInfo a, c;
      const CfiStatus sa = hdr_idx.lookup(sec, pc, &a);
      const CfiStatus sc = built.lookup(sec, pc, &c);
      CHECK(sa == sc);
      if (sa == CfiStatus::kOk && sc == CfiStatus::kOk) CHECK(a.fde_offset == c.fde_offset);
    }
  }
}

TEST_CASE("-O0 frame-pointer binary rows match readelf", "[cfi][readelf]") {
  TmpDir dir;
  Binary b;
  if (!load(dir, "-O0 -fno-omit-frame-pointer -no-pie", &b)) return;
  FdeIndex built;
  REQUIRE(FdeIndex::build(b.sec(), &built) == CfiStatus::kOk);
  check_against_readelf(b, built, 1);
}

TEST_CASE("static binary without .eh_frame_hdr: only build() works", "[cfi][readelf]") {
  TmpDir dir;
  Binary b;
  if (!load(dir, "-O2 -static", &b)) return;
  // Debian 12's ld writes no .eh_frame_hdr for -static unless asked (--eh-frame-hdr): the case
  // this test is about. A toolchain that does is a different case, and fails here by name.
  INFO("cc -O2 -static wrote an .eh_frame_hdr: this toolchain does not give the case under test");
  REQUIRE_FALSE(b.hdr_info.present);
  FdeIndex hdr_idx;
  CHECK(FdeIndex::from_eh_frame_hdr(nullptr, 0, 0, b.sec(), &hdr_idx) == CfiStatus::kBadCfi);
  FdeIndex built;
  REQUIRE(FdeIndex::build(b.sec(), &built) == CfiStatus::kOk);
  CHECK(built.size() > 100);  // libc's FDEs
  check_against_readelf(b, built, 5);
}
