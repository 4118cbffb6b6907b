// SPDX-License-Identifier: Apache-2.0
// Bundle-backed modules: the CFI rung from a bundle's unwind rows on hand-built stacks (every row kind, hostile rows, the cache).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "arch/x86_64/registers.hpp"
#include "bundle/format.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwinder.hpp"

using namespace stackprov;
using namespace stackprov::unwind;
namespace x64 = stackprov::arch::x86_64;

namespace {

constexpr uint64_t kBias = 0x400000;
constexpr uint64_t kStack = 0x70000000;

/// Target memory: 8-byte words at addresses; everything else unreadable.
struct WordMem {
  std::map<uint64_t, uint64_t> words;
  bool read(uint64_t addr, void* buf, size_t len) {
    auto* out = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < len; i++) {
      const uint64_t a = addr + i;
      auto it = words.find(a & ~7ull);
      if (it == words.end()) return false;
      out[i] = static_cast<uint8_t>(it->second >> (8 * (a & 7)));
    }
    return true;
  }
};

bundle::UnwindRowRecord row(uint64_t pc, uint8_t kind) {
  bundle::UnwindRowRecord r;
  r.pc = pc;
  r.kind = kind;
  return r;
}

/// One module (build-id 01020304) with rows, by link-time pc:
///  0x1000 cfa = rsp+16, ra at cfa-8, rbx at cfa-16     0x1100 full (needs the interpreter)
///  0x1200 end of stack                                  0x1300 cfa = r200 + 8 (hostile)
///  0x1400 no info                                       0x1500 full, signal frame ('S')
std::vector<uint8_t> make_bundle() {
  bundle::ModuleContents m;
  m.id.bytes = {1, 2, 3, 4};
  m.name = "unit.so";
  bundle::UnwindRowRecord a = row(0x1000, bundle::UnwindRowRecord::kCfaReg);
  a.cfa_reg = x64::kRsp;
  a.cfa_off = 16;
  a.ra_kind = bundle::UnwindRowRecord::kRaAtCfa;
  a.ra_reg = x64::kRip;
  a.ra_off = -1;
  a.nsaved = 1;
  a.saved_reg[0] = x64::kRbx;
  a.saved_off[0] = -2;
  m.unwind_rows.push_back(a);
  m.unwind_rows.push_back(row(0x1100, bundle::UnwindRowRecord::kFull));
  m.unwind_rows.push_back(row(0x1200, bundle::UnwindRowRecord::kEndOfStack));
  bundle::UnwindRowRecord h = a;
  h.pc = 0x1300;
  h.cfa_reg = 200;
  m.unwind_rows.push_back(h);
  m.unwind_rows.push_back(row(0x1400, bundle::UnwindRowRecord::kNoInfo));
  bundle::UnwindRowRecord s = row(0x1500, bundle::UnwindRowRecord::kFull);
  s.signal_frame = true;
  m.unwind_rows.push_back(s);
  bundle::BundleContents c;
  c.modules.push_back(m);
  auto bytes = bundle::write_bundle(c);
  REQUIRE(bytes.ok());
  return bytes.value();
}

struct Fixture {
  std::vector<uint8_t> bytes = make_bundle();
  std::shared_ptr<LoadedModule> mod;
  ModuleTable table;
  RuleCache cache;
  WordMem mem;
  Fixture() {
    auto rd = bundle::BundleReader::open(bytes.data(), bytes.size());
    REQUIRE(rd.ok());
    LoadedModule::BundleSource src;
    src.reader = std::make_shared<const bundle::BundleReader>(std::move(rd).value());
    src.index = 0;
    src.digest = "sha256:test";
    auto m = LoadedModule::load_bundle(std::move(src), Arch::kX86_64, false);
    REQUIRE(m.ok());
    mod = m.value();
    ModuleSlot slot;
    slot.start = kBias + 0x1000;
    slot.end = kBias + 0x2000;
    slot.bias = kBias;
    slot.module = mod.get();
    slot.snapshot_index = 0;
    table.add(slot, mod);
    table.finish();
  }
  WalkResult walk(uint64_t pc, uint64_t rbp, bool use_fp) {
    WalkOptions opts;
    opts.use_frame_pointer = use_fp;
    Unwinder<x64::Traits, WordMem> uw(table, cache, opts, mem);
    Unwinder<x64::Traits, WordMem>::Regs regs{};
    regs.set(x64::kRip, pc);
    regs.set(x64::kRsp, kStack);
    regs.set(x64::kRbp, rbp);
    WalkResult out;
    uw.walk(regs, false, &out);
    return out;
  }
};

}  // namespace

TEST_CASE("bundle rows map to compact rules; hostile rows are invalid", "[unwind][bundle]") {
  Fixture f;
  CHECK(f.mod->bundle() != nullptr);
  CHECK_FALSE(f.mod->has_elf());
  CHECK(f.mod->bundle_rule(0x0fff, x64::Traits::kNumRegs).kind == UnwindRule::kNoInfo);  // before the first row
  const UnwindRule a = f.mod->bundle_rule(0x10ff, x64::Traits::kNumRegs);
  CHECK(a.kind == UnwindRule::kCfaReg);
  CHECK(a.cfa_reg == x64::kRsp);
  CHECK(a.cfa_off == 16);
  CHECK(a.nsaved == 1);
  CHECK(a.saved_reg[0] == x64::kRbx);
  CHECK(a.saved_off[0] == -2);
  CHECK(f.mod->bundle_rule(0x1100, x64::Traits::kNumRegs).kind == UnwindRule::kFull);
  CHECK(f.mod->bundle_rule(0x1234, x64::Traits::kNumRegs).kind == UnwindRule::kEndOfStack);
  CHECK(f.mod->bundle_rule(0x1300, x64::Traits::kNumRegs).kind == UnwindRule::kInvalid);  // r200
  CHECK(f.mod->bundle_rule(0x1400, x64::Traits::kNumRegs).kind == UnwindRule::kNoInfo);
  const UnwindRule s = f.mod->bundle_rule(0x1500, x64::Traits::kNumRegs);
  CHECK(s.kind == UnwindRule::kFull);
  CHECK(s.signal_frame == 1);
  // A register number valid for x86_64 but beyond a smaller register file is refused too.
  CHECK(f.mod->bundle_rule(0x1000, 4).kind == UnwindRule::kInvalid);
  uint8_t code[4];
  CHECK_FALSE(f.mod->read_code(0x1000, code, sizeof code));
  CHECK(f.mod->debug_frame() == nullptr);
}

TEST_CASE("the CFI rung answers from bundle rows: cfa_reg, then end of stack", "[unwind][bundle]") {
  Fixture f;
  // Frame 0 at 0x1010 (cfa = rsp+16): [rsp] = saved rbx, [rsp+8] = return address 0x1201,
  // whose caller lookup (0x1200) is the end-of-stack row.
  f.mem.words[kStack] = 0x55;
  f.mem.words[kStack + 8] = kBias + 0x1201;
  for (int pass = 0; pass < 2; pass++) {  // the second walk is served by the rule cache
    WalkResult r = f.walk(kBias + 0x1010, 0, true);
    REQUIRE(r.frames.size() == 2);
    CHECK(r.frames[0].method == Method::kContext);
    CHECK(r.frames[0].cfa == kStack + 16);
    CHECK(r.frames[1].pc == kBias + 0x1201);
    CHECK(r.frames[1].sp == kStack + 16);
    CHECK(r.frames[1].method == Method::kCfiBundle);
    CHECK(r.frames[0].flags == 0);
    CHECK(r.stop == StopReason::kEndOfStack);
  }
  CHECK(f.cache.hits() >= 2);
}

TEST_CASE("a full bundle row falls to the next rung and flags the frame", "[unwind][bundle]") {
  Fixture f;
  // Frame 0 at 0x1110 (full row). Without frame pointers: stop, flagged.
  WalkResult r = f.walk(kBias + 0x1110, 0, false);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.stop == StopReason::kNoUnwindInfo);
  CHECK(r.frames[0].flags == Frame::kFlagCfiNotInBundle);
  // With a frame record at rbp = [saved rbp, return address 0x1010 + bias]: the frame pointer finds the caller.
  const uint64_t fp = kStack + 0x40;
  f.mem.words[fp] = 0;
  f.mem.words[fp + 8] = kBias + 0x1011;
  r = f.walk(kBias + 0x1110, fp, true);
  REQUIRE(r.frames.size() >= 2);
  CHECK(r.frames[0].flags == Frame::kFlagCfiNotInBundle);
  CHECK(r.frames[1].method == Method::kFramePointer);
  CHECK(r.frames[1].pc == kBias + 0x1011);
}

TEST_CASE("a full signal-frame row restores the kernel's signal frame", "[unwind][bundle]") {
  Fixture f;
  // The trampoline's sp points at the ucontext; gregs at offset 40 (uc_flags, uc_link, uc_stack),
  // in the kernel's order r8..r15 rdi rsi rbp rbx rdx rax rcx rsp rip.
  const uint64_t gregs = kStack + 40;
  for (int i = 0; i < 17; i++) f.mem.words[gregs + 8 * i] = 0x1000 + i;
  f.mem.words[gregs + 8 * 15] = kStack + 0x800;       // interrupted rsp
  f.mem.words[gregs + 8 * 16] = kBias + 0x1020;       // interrupted rip (exact pc)
  f.mem.words[kStack + 0x800] = 0x77;                 // its saved rbx
  f.mem.words[kStack + 0x808] = kBias + 0x1201;       // its return address: end of stack
  WalkResult r = f.walk(kBias + 0x1500, 0, false);
  REQUIRE(r.frames.size() == 3);
  CHECK(r.frames[0].flags == Frame::kFlagCfiNotInBundle);
  CHECK(r.frames[1].method == Method::kSignal);
  CHECK(r.frames[1].pc == kBias + 0x1020);
  CHECK_FALSE(r.frames[1].lookup_prev);
  CHECK(r.frames[2].method == Method::kCfiBundle);
  CHECK(r.frames[2].pc == kBias + 0x1201);
  CHECK(r.stop == StopReason::kEndOfStack);
}

TEST_CASE("hostile and missing rows stop the walk with their reason", "[unwind][bundle]") {
  Fixture f;
  WalkResult r = f.walk(kBias + 0x1310, 0, false);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.stop == StopReason::kBadCfi);
  CHECK(r.frames[0].flags == 0);
  r = f.walk(kBias + 0x1410, 0, false);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.stop == StopReason::kNoUnwindInfo);
  CHECK(r.frames[0].flags == 0);
}
