// SPDX-License-Identifier: Apache-2.0
// mips32 arch_ops: o32 conversions in both byte orders, sigreturn frames and prologue analysis on real encodings.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <vector>

#include "arch/arch_ops.hpp"

using namespace stackprov::arch;
using namespace stackprov::arch::mips32;

namespace {

struct Mem32 {
  bool be;
  std::map<uint64_t, uint8_t> bytes;
  void put32(uint64_t a, uint32_t v) {
    for (int i = 0; i < 4; i++) bytes[a + i] = static_cast<uint8_t>(v >> (be ? 8 * (3 - i) : 8 * i));
  }
  void put64(uint64_t a, uint64_t v) {
    for (int i = 0; i < 8; i++) bytes[a + i] = static_cast<uint8_t>(v >> (be ? 8 * (7 - i) : 8 * i));
  }
  bool read(uint64_t a, void* buf, size_t n) {
    auto* out = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < n; i++) {
      auto it = bytes.find(a + i);
      if (it == bytes.end()) return false;
      out[i] = it->second;
    }
    return true;
  }
  std::vector<uint8_t> span(uint64_t a, size_t n) {
    std::vector<uint8_t> v(n);
    REQUIRE(read(a, v.data(), n));
    return v;
  }
};

}  // namespace

TEMPLATE_TEST_CASE_SIG("mips32 NT_PRSTATUS and elf_gregset_t: pr_reg at 72, EF_R0 = 6, EF_CP0_EPC = 40",
                       "[arch][mips32]", ((bool BE), BE), true, false) {
  Mem32 m{BE, {}};
  // struct elf_prstatus (o32) is 256 bytes (checked with mips-linux-gnu-gcc); fill it.
  for (uint64_t i = 0; i < 256; i += 4) m.put32(i, 0xdeadbeef);
  for (int i = 0; i < 32; i++) m.put32(72 + 4 * (6 + i), 0x400000 + i);
  m.put32(72 + 4 * 40, 0x401234);  // EF_CP0_EPC
  auto bytes = m.span(0, 256);
  Regs r;
  REQUIRE(regs_from_prstatus(bytes.data(), bytes.size(), BE, &r).ok());
  CHECK(r.get(kZero) == 0x400000);
  CHECK(r.get(kSp) == 0x400000 + 29);
  CHECK(r.get(kRa) == 0x400000 + 31);
  CHECK(r.get(kPc) == 0x401234);
  CHECK_FALSE(regs_from_prstatus(bytes.data(), 72 + 179, BE, &r).ok());
  REQUIRE(regs_from_user_regs(bytes.data() + 72, 180, BE, &r).ok());
  CHECK(r.get(kPc) == 0x401234);
}

TEMPLATE_TEST_CASE_SIG("mips32 pt_regs and ucontext layouts", "[arch][mips32]", ((bool BE), BE), true, false) {
  Mem32 m{BE, {}};
  for (uint64_t a = 0; a < 32; a += 4) m.put32(a, 0);
  for (int i = 0; i < 32; i++) m.put32(32 + 4 * i, 0x1000 + i);  // pad0[8] then regs[32]
  for (uint64_t a = 160; a < 184; a += 4) m.put32(a, 0);
  m.put32(180, 0x402000);  // cp0_epc
  auto pt = m.span(0, 184);
  Regs r;
  REQUIRE(regs_from_pt_regs(pt.data(), pt.size(), BE, &r).ok());
  CHECK(r.get(kSp) == 0x1000 + 29);
  CHECK(r.get(kPc) == 0x402000);

  // ucontext_t: uc_mcontext at 24; sc_pc at +8, sc_regs[32] (u64) at +16 (mips-linux-gnu-gcc offsetof).
  Mem32 u{BE, {}};
  for (uint64_t a = 0; a < 24 + 16 + 256; a += 4) u.put32(a, 0);
  u.put64(24 + 8, 0x403000);
  for (int i = 0; i < 32; i++) u.put64(24 + 16 + 8 * i, 0x2000 + i);
  auto uc = u.span(0, 24 + 16 + 256);
  REQUIRE(regs_from_ucontext(uc.data(), uc.size(), BE, &r).ok());
  CHECK(r.get(kPc) == 0x403000);
  CHECK(r.get(kRa) == 0x2000 + 31);
  CHECK_FALSE(regs_from_ucontext(uc.data(), uc.size() - 1, BE, &r).ok());
}

TEST_CASE("mips32 perf regs: PC at bit 0, $1..$31 at bits 1..31", "[arch][mips32]") {
  std::vector<uint64_t> v(32);
  for (int i = 0; i < 32; i++) v[i] = 0x100 + i;
  Regs r;
  REQUIRE(regs_from_perf(kPerfRegsMask, v.data(), v.size(), &r).ok());
  CHECK(r.get(kPc) == 0x100);
  CHECK(r.get(kSp) == 0x100 + 29);
  CHECK(r.get(kZero) == 0);
}

TEMPLATE_TEST_CASE_SIG("mips32 sigreturn trampolines and sigframe restore", "[arch][mips32]", ((bool BE), BE),
                       true, false) {
  using O = Ops<TraitsT<BE>>;
  Mem32 code{BE, {}};
  code.put32(0, 0x24021061);  // li v0, 4193 (rt_sigreturn)
  code.put32(4, 0x0000000c);  // syscall
  code.put32(8, 0x24021017);  // li v0, 4119 (sigreturn)
  code.put32(12, 0x0000000c);
  CHECK(O::sigreturn_kind(code.span(0, 8).data()) == kSigreturnRt);
  CHECK(O::sigreturn_kind(code.span(8, 8).data()) == kSigreturnOld);
  CHECK(O::sigreturn_kind(code.span(4, 8).data()) == 0);

  for (int kind : {kSigreturnRt, kSigreturnOld}) {
    Mem32 m{BE, {}};
    const uint64_t frame = 0x7fff0000;
    const uint64_t sc = frame + (kind == kSigreturnRt ? 176 : 24);  // rt_sigframe / sigframe
    m.put64(sc, 0);  // sc_regmask, sc_status
    m.put64(sc + 8, 0x4007f8);
    for (int i = 0; i < 32; i++) m.put64(sc + 16 + 8 * i, 0x3000 + i);
    Regs r{};
    r.set(kSp, frame);
    r.set(kPc, 0x3ffbe000);
    uint64_t cfa = 0;
    REQUIRE(O::signal_step(r, m, kind, &cfa) == StepOutcome::kOk);
    CHECK(cfa == frame);
    CHECK(r.get(kPc) == 0x4007f8);
    CHECK(r.get(kSp) == 0x3000 + 29);
    CHECK(r.get(kRa) == 0x3000 + 31);
  }
}

TEMPLATE_TEST_CASE_SIG("mips32 prologue analysis: addiu sp, sp, -N / sw ra, M(sp)", "[arch][mips32]",
                       ((bool BE), BE), true, false) {
  using O = Ops<TraitsT<BE>>;
  Mem32 text{BE, {}};
  const uint64_t prev = 0x400100, fn = 0x400108;
  text.put32(prev, 0x03e00008);      // jr ra (end of the previous function)
  text.put32(prev + 4, 0);           // nop
  text.put32(fn + 0, 0x27bdffd8);    // addiu sp, sp, -40
  text.put32(fn + 4, 0xafbf0024);    // sw ra, 36(sp)
  text.put32(fn + 8, 0xafb00020);    // sw s0, 32(sp)
  text.put32(fn + 12, 0x0c100200);   // jal ...
  text.put32(fn + 16, 0x00000000);   // nop (delay slot)
  text.put32(fn + 20, 0x8fbf0024);   // lw ra, 36(sp)
  auto code = [&](uint64_t a, void* buf, size_t n) { return text.read(a, buf, n); };

  Mem32 stack{BE, {}};
  const uint64_t sp = 0x7ff00000;
  stack.put32(sp + 36, 0x400500);  // saved ra
  stack.put32(sp + 32, 0x5555);    // saved s0

  // A caller frame: pc is the return address after the jal's delay slot.
  Regs r{};
  r.set(kPc, fn + 20);
  r.set(kSp, sp);
  r.set(kRa, fn + 20);
  uint64_t cfa = 0;
  REQUIRE(O::prologue_step(r, stack, code, false, &cfa) == StepOutcome::kOk);
  CHECK(cfa == sp + 40);
  CHECK(r.get(kSp) == sp + 40);
  CHECK(r.get(kPc) == 0x400500);
  CHECK(r.get(kS0) == 0x5555);

  // Frame 0 stopped before `sw ra` ran: ra is still in $ra.
  Regs early{};
  early.set(kPc, fn + 4);
  early.set(kSp, sp);
  early.set(kRa, 0x400600);
  REQUIRE(O::prologue_step(early, stack, code, true, &cfa) == StepOutcome::kOk);
  CHECK(early.get(kPc) == 0x400600);
  CHECK(early.get(kSp) == sp + 40);
  // ... but a caller frame must have saved $ra.
  early.set(kPc, fn + 4);
  early.set(kSp, sp);
  CHECK(O::prologue_step(early, stack, code, false, &cfa) == StepOutcome::kNotApplicable);

  // A leaf with no frame (pc right after the previous function's jr ra): cfa = sp, pc = $ra.
  Regs leaf{};
  leaf.set(kPc, fn);
  leaf.set(kSp, sp);
  leaf.set(kRa, 0x400700);
  REQUIRE(O::prologue_step(leaf, stack, code, true, &cfa) == StepOutcome::kOk);
  CHECK(leaf.get(kPc) == 0x400700);
  CHECK(cfa == sp);
}

TEMPLATE_TEST_CASE_SIG("mips32 prologue analysis: glibc's __start clears $ra: end of stack", "[arch][mips32]",
                       ((bool BE), BE), true, false) {
  using O = Ops<TraitsT<BE>>;
  // Debian 12 mipsel crt1.o __start (glibc sysdeps/mips/start.S), from its disassembly:
  // `move $31, $0` marks the outermost frame; $ra is never saved.
  const uint32_t start[] = {0x03e00008, 0x00000000,  // previous function: jr ra; nop
                            0x04110001, 0x00000000,  // bal 1f; nop
                            0x3c1c0002, 0x279c8394, 0x039fe021,  // gp setup
                            0x0000f825,              // move ra, zero
                            0x8f848018, 0x8fa50000, 0x27a60004, 0x2401fff8, 0x03a1e824,
                            0x27bdffe0,              // addiu sp, sp, -32
                            0x00003825, 0xafa00010, 0xafa20014, 0xafbd0018, 0x8f998054,
                            0x0320f809, 0x00000000,  // jalr t9 (__libc_start_main); nop
                            0x1000ffff, 0x00000000};  // hlt: b hlt; nop
  Mem32 text{BE, {}};
  const uint64_t base = 0x400690 - 4 * 21;  // the words above, ending where crt1 puts hlt
  for (size_t i = 0; i < sizeof(start) / 4; i++) text.put32(base + 4 * i, start[i]);
  auto code = [&](uint64_t a, void* buf, size_t n) { return text.read(a, buf, n); };
  Mem32 stack{BE, {}};
  const uint64_t sp = 0x7ff00640;
  const uint64_t ret = base + 4 * 21;  // the return address of the jalr: 0x40068c + 4
  REQUIRE(ret == 0x400690);
  Regs r{};
  r.set(kPc, ret);
  r.set(kSp, sp);
  r.set(kRa, ret);
  uint64_t cfa = 0;
  REQUIRE(O::prologue_step(r, stack, code, false, &cfa) == StepOutcome::kOk);
  CHECK(r.get(kPc) == 0);  // the zero __start put in $ra: the walk reports end_of_stack
  CHECK(cfa == sp + 32);

  // The same function without the `move ra, zero`: a caller frame that did not save $ra is
  // still not unwindable by prologue analysis (no made-up return address).
  text.put32(base + 4 * 7, 0x00000000);
  Regs r2{};
  r2.set(kPc, ret);
  r2.set(kSp, sp);
  r2.set(kRa, ret);
  CHECK(O::prologue_step(r2, stack, code, false, &cfa) == StepOutcome::kNotApplicable);
}

TEST_CASE("mips32 scan plausibility: jal/jalr/bal at ra - 8", "[arch][mips32]") {
  CHECK(is_call(0x0c100200));        // jal
  CHECK(is_call(0x0320f809));        // jalr t9
  CHECK(is_call(0x04110010));        // bal
  CHECK_FALSE(is_call(0x03e00008));  // jr ra
}

TEST_CASE("mips32 call kinds: BLTZAL is a return pad only", "[arch][mips32]") {
  CHECK(call_kind(0x0c100200) == CallKind::kJal);
  CHECK(call_kind(0x0320f809) == CallKind::kJalr);
  CHECK(call_kind(0x04110010) == CallKind::kBgezal);  // bal
  CHECK(call_kind(0x04900010) == CallKind::kBltzal);  // bltzal a0
  CHECK_FALSE(is_call(0x04900010));
  CHECK(is_indirect_call(0x0320f809));
  CHECK_FALSE(is_indirect_call(0x0c100200));
  // Return pads of jal, nop, bltzal at 0x400002 (words from 0x400004), both byte orders: pad = call + 8.
  for (const bool be : {false, true}) {
    Mem32 m{be, {}};
    m.put32(0x400000, 0x0c100200);  // before addr: skipped
    m.put32(0x400004, 0x0c100200);
    m.put32(0x400008, 0x00000000);
    m.put32(0x40000c, 0x04900010);
    uint8_t code[14];
    REQUIRE(m.read(0x400002, code, sizeof code));
    std::vector<CallSite> calls;
    auto add = [&](const CallSite& c) { calls.push_back(c); };
    if (be)
      Ops<TraitsBE>::for_each_call(code, sizeof code, 0x400002, true, nullptr, add);
    else
      Ops<TraitsLE>::for_each_call(code, sizeof code, 0x400002, false, nullptr, add);
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].addr == 0x400004);
    CHECK(calls[0].pad == 0x40000c);
    CHECK(calls[1].addr == 0x40000c);
    CHECK(calls[1].pad == 0x400014);
  }
}

TEST_CASE("mips32 __start_context and a swapcontext's saved registers (glibc's o32 ucontext_t)", "[arch][mips32]") {
  // Debian 12's mipsel libc.so.6 at 0x3df3c and mips (big-endian) libc.so.6 at 0x3dedc, where
  // makecontext's ra points (makecontext + 0xcc: its `addiu t9, t9, 204`), llvm-objdump-14 -d:
  // move gp,s1; beqz s0,+32; move a0,zero; move a0,s0; lw t9,-31880(gp); jalr t9; nop;
  // move gp,s1; move a0,v0; lw t9,-32740(gp); jalr t9.
  const uint32_t words[11] = {0x0220e025, 0x12000007, 0x00002025, 0x02002025, 0x8f998378, 0x0320f809,
                              0x00000000, 0x0220e025, 0x00402025, 0x8f99801c, 0x0320f809};
  for (bool be : {false, true}) {
    INFO((be ? "big" : "little") << "-endian");
    uint8_t code[44];
    auto put = [&](int i, uint32_t w) {
      for (int k = 0; k < 4; k++) code[4 * i + k] = static_cast<uint8_t>(w >> (be ? 8 * (3 - k) : 8 * k));
    };
    for (int i = 0; i < 11; i++) put(i, words[i]);
    const bool yes = be ? Ops<TraitsBE>::coroutine_entry(code) : Ops<TraitsLE>::coroutine_entry(code);
    CHECK(yes);
    CHECK(Ops<TraitsLE>::kCoroutineEntryLen == 44);
    // The bytes of the other order are no entry; nor is any word changed (beyond its offsets).
    const bool other = be ? Ops<TraitsLE>::coroutine_entry(code) : Ops<TraitsBE>::coroutine_entry(code);
    CHECK_FALSE(other);
    for (int i = 0; i < 11; i++) {
      put(i, words[i] ^ 0x00200000u);  // another register in the rs/rt field
      CHECK_FALSE((be ? Ops<TraitsBE>::coroutine_entry(code) : Ops<TraitsLE>::coroutine_entry(code)));
      put(i, words[i]);
    }
    put(1, 0x12000010);  // another branch offset: still the trampoline
    put(9, 0x8f997ff0);  // another GOT slot
    CHECK((be ? Ops<TraitsBE>::coroutine_entry(code) : Ops<TraitsLE>::coroutine_entry(code)));
    for (int i : {0, 2, 3, 7, 8}) put(i, words[i] & ~4u);  // each `move` as older binutils write it: addu
    CHECK((be ? Ops<TraitsBE>::coroutine_entry(code) : Ops<TraitsLE>::coroutine_entry(code)));
    put(8, (words[8] & ~0x3fu) | 0x23);  // subu a0, v0, zero: no move
    CHECK_FALSE((be ? Ops<TraitsBE>::coroutine_entry(code) : Ops<TraitsLE>::coroutine_entry(code)));
  }

  // uc_link: s0 (makecontext.S stores it in gregs[16]), an annotation read from the entry's registers.
  Mem32 m{false, {}};
  Regs r{};
  uint64_t slot = 1, link = 0;
  CHECK_FALSE(Ops<TraitsLE>::coroutine_uc_link(r, 0, m, &slot, &link));
  r.set(kS0, 0x4000a000);
  REQUIRE(Ops<TraitsLE>::coroutine_uc_link(r, 0, m, &slot, &link));
  CHECK(slot == 0);
  CHECK(link == 0x4000a000);

  // The resumer's context: uc_mcontext at 24 = { regmask, status, u64 pc, u64 gregs[32] }:
  // makecontext's stores `sw a1, 32(a0)` (pc) and `sw t0, 272(a0)` (gregs[29], sp); in big-endian
  // the low half of each 64-bit slot is at +4.
  CHECK(Ops<TraitsLE>::kUcontextPc == 32);
  CHECK(Ops<TraitsLE>::kUcontextSp == 272);
  CHECK(Ops<TraitsBE>::kUcontextPc == 36);
  CHECK(Ops<TraitsBE>::kUcontextSp == 276);
  for (bool be : {false, true}) {
    Mem32 mm{be, {}};
    const uint64_t uc = 0x20000;
    mm.put64(uc + 24, 0);         // regmask, status
    mm.put64(uc + 32, 0x400800);  // pc
    for (int i = 0; i < 32; i++) mm.put64(uc + 40 + 8 * i, 0x7000 + i);
    Regs res{};
    const bool ok = be ? Ops<TraitsBE>::resume_regs(mm, uc, res) : Ops<TraitsLE>::resume_regs(mm, uc, res);
    REQUIRE(ok);
    CHECK_FALSE(res.has(4));   // a0: not saved for the resumer's callers
    CHECK_FALSE(res.has(25));  // t9
    CHECK(res.get(kS0) == 0x7000 + 16);
    CHECK(res.get(kS7) == 0x7000 + 23);
    CHECK(res.get(kGp) == 0x7000 + 28);
    CHECK(res.get(kSp) == 0x7000 + 29);
    CHECK(res.get(kFp) == 0x7000 + 30);
    CHECK(res.get(kRa) == 0x7000 + 31);
    CHECK(res.get(kPc) == 0x400800);
    uint8_t w[4];
    REQUIRE(mm.read(uc + (be ? Ops<TraitsBE>::kUcontextSp : Ops<TraitsLE>::kUcontextSp), w, 4));
    CHECK(load_word(w, 4, be) == 0x7000 + 29);
  }
}
