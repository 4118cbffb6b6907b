// SPDX-License-Identifier: Apache-2.0
// arm64 arch_ops: conversions against the kernel struct layouts, PAC stripping, x29 chain and rt_sigframe restore.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <vector>

#include "arch/arch_ops.hpp"

using namespace stackprov::arch;
using namespace stackprov::arch::arm64;

namespace {

struct Mem64 {
  std::map<uint64_t, uint8_t> bytes;
  void put64(uint64_t a, uint64_t v) {
    for (int i = 0; i < 8; i++) bytes[a + i] = static_cast<uint8_t>(v >> (8 * i));
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
};

/// 34 words regs[31], sp, pc, pstate with value 100 + index.
std::vector<uint64_t> user_pt_regs() {
  std::vector<uint64_t> w(34);
  for (int i = 0; i < 34; i++) w[i] = 100 + i;
  return w;
}

}  // namespace

TEST_CASE("arm64 user_pt_regs, pt_regs and NT_PRSTATUS conversions", "[arch][arm64]") {
  auto w = user_pt_regs();
  Regs r;
  REQUIRE(regs_from_user_regs(w.data(), w.size() * 8, &r).ok());
  for (int i = 0; i < 33; i++) CHECK(r.get(i) == static_cast<uint64_t>(100 + i));
  CHECK(r.get(kSp) == 131);
  CHECK(r.get(kPc) == 132);
  CHECK_FALSE(regs_from_user_regs(w.data(), 33 * 8, &r).ok());
  REQUIRE(regs_from_pt_regs(w.data(), w.size() * 8, &r).ok());
  CHECK(r.get(kLr) == 130);

  // struct elf_prstatus on LP64: pr_reg at 112, 392 bytes (checked with aarch64-linux-gnu-gcc).
  std::vector<uint8_t> pr(392, 0xee);
  std::memcpy(pr.data() + 112, w.data(), 34 * 8);
  REQUIRE(regs_from_prstatus(pr.data(), pr.size(), &r).ok());
  CHECK(r.get(kX0) == 100);
  CHECK(r.get(kFp) == 129);
  CHECK(r.get(kPc) == 132);
  CHECK_FALSE(regs_from_prstatus(pr.data(), 112 + 34 * 8 - 1, &r).ok());
}

TEST_CASE("arm64 ucontext: uc_mcontext at 176, regs after fault_address", "[arch][arm64]") {
  std::vector<uint8_t> uc(176 + 8 + 34 * 8, 0);
  auto w = user_pt_regs();
  std::memcpy(uc.data() + 184, w.data(), 34 * 8);
  Regs r;
  REQUIRE(regs_from_ucontext(uc.data(), uc.size(), &r).ok());
  CHECK(r.get(kX0) == 100);
  CHECK(r.get(kSp) == 131);
  CHECK(r.get(kPc) == 132);
  CHECK_FALSE(regs_from_ucontext(uc.data(), 200, &r).ok());
}

TEST_CASE("arm64 perf regs: X0..LR, SP, PC at bits 0..32", "[arch][arm64]") {
  std::vector<uint64_t> v(33);
  for (int i = 0; i < 33; i++) v[i] = 7 * i;
  Regs r;
  REQUIRE(regs_from_perf(kPerfRegsMask, v.data(), v.size(), &r).ok());
  CHECK(r.get(kFp) == 7 * 29);
  CHECK(r.get(kSp) == 7 * 31);
  CHECK(r.get(kPc) == 7 * 32);
  // Only sp and pc sampled: packed in bit order.
  uint64_t two[2] = {0x1000, 0x2000};
  REQUIRE(regs_from_perf((1ull << 31) | (1ull << 32), two, 2, &r).ok());
  CHECK(r.get(kSp) == 0x1000);
  CHECK(r.get(kPc) == 0x2000);
  CHECK_FALSE(r.has(kX0));
  CHECK_FALSE(regs_from_perf(kPerfRegsMask, v.data(), 32, &r).ok());
}

TEST_CASE("arm64 strips pointer-authentication bits from return addresses", "[arch][arm64]") {
  // PACIASP-signed x30 as seen under qemu-aarch64 (signature in bits 48..54).
  CHECK(Traits::strip_return_address(0x003e005500000850ull) == 0x0000005500000850ull);
  CHECK(Traits::strip_return_address(0x0000ffffa0001234ull) == 0x0000ffffa0001234ull);
}

TEST_CASE("arm64 x29 frame-record chain", "[arch][arm64]") {
  Mem64 m;
  m.put64(0x8000, 0x8100);                    // saved x29
  m.put64(0x8008, 0x0012005500000abcull);     // signed x30
  Regs r{};
  r.set(kSp, 0x7f00);
  r.set(kFp, 0x8000);
  r.set(kPc, 0x5500000100);
  uint64_t cfa = 0;
  REQUIRE(fp_step(r, m, &cfa) == StepOutcome::kOk);
  CHECK(cfa == 0x8010);
  CHECK(r.get(kSp) == 0x8010);
  CHECK(r.get(kFp) == 0x8100);
  CHECK(r.get(kPc) == 0x5500000abcull);
  CHECK(r.get(kLr) == 0x5500000abcull);
  Regs bad = r;
  bad.set(kFp, 0x8004);
  CHECK(fp_step(bad, m, &cfa) == StepOutcome::kNotApplicable);
  bad.set(kFp, 0);
  CHECK(fp_step(bad, m, &cfa) == StepOutcome::kEnd);
  bad.set(kFp, 0x9000);
  CHECK(fp_step(bad, m, &cfa) == StepOutcome::kMemory);
}

TEST_CASE("arm64 rt_sigframe: siginfo 128 + uc_mcontext 176 + 8 from sp", "[arch][arm64]") {
  // __kernel_rt_sigreturn / qemu sigtramp: mov x8, #139; svc #0 (0xd2801168, 0xd4000001).
  const uint8_t tramp[8] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
  CHECK(Ops<Traits>::sigreturn_kind(tramp) == kSigreturnRt);
  uint8_t other[8] = {0x1f, 0x20, 0x03, 0xd5, 0x01, 0x00, 0x00, 0xd4};  // nop; svc #0
  CHECK(Ops<Traits>::sigreturn_kind(other) == 0);

  Mem64 m;
  const uint64_t frame = 0x10000;
  for (int i = 0; i < 33; i++) m.put64(frame + 312 + 8 * i, 0x1000 + i);
  Regs r{};
  r.set(kSp, frame);
  r.set(kPc, 0x5502864000);
  uint64_t cfa = 0;
  REQUIRE(signal_step(r, m, &cfa) == StepOutcome::kOk);
  CHECK(cfa == frame);
  CHECK(r.get(kX0) == 0x1000);
  CHECK(r.get(kLr) == 0x1000 + 30);
  CHECK(r.get(kSp) == 0x1000 + 31);
  CHECK(r.get(kPc) == 0x1000 + 32);
}

TEST_CASE("arm64 scan plausibility: BL and BLR before the return address", "[arch][arm64]") {
  const uint8_t bl[4] = {0x10, 0x00, 0x00, 0x94};   // bl +0x40
  const uint8_t blr[4] = {0x00, 0x02, 0x3f, 0xd6};  // blr x16
  const uint8_t ret[4] = {0xc0, 0x03, 0x5f, 0xd6};  // ret
  CHECK(preceded_by_call(bl));
  CHECK(preceded_by_call(blr));
  CHECK_FALSE(preceded_by_call(ret));
}

TEST_CASE("arm64 call kinds: BLRAA is an indirect call and a return pad", "[arch][arm64]") {
  CHECK(call_kind(0x94000010u) == CallKind::kBl);
  CHECK(call_kind(0xd63f0200u) == CallKind::kBlr);    // blr x16
  CHECK(call_kind(0xd73f0a11u) == CallKind::kBlra);   // blraa x16, x17
  CHECK(call_kind(0xd65f03c0u) == CallKind::kNone);   // ret
  const uint8_t blraa[4] = {0x11, 0x0a, 0x3f, 0xd7};
  CHECK(preceded_by_indirect_call(blraa));
  CHECK_FALSE(preceded_by_call(blraa));
  // Return pads of bl, ret, blraa at 0x2000: pad = call + 4.
  const uint8_t code[12] = {0x10, 0x00, 0x00, 0x94, 0xc0, 0x03, 0x5f, 0xd6, 0x11, 0x0a, 0x3f, 0xd7};
  std::vector<CallSite> calls;
  Ops<Traits>::for_each_call(code, sizeof code, 0x2000, false, nullptr, [&](const CallSite& c) { calls.push_back(c); });
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].pad == 0x2004);
  CHECK(calls[1].addr == 0x2008);
  CHECK(calls[1].pad == 0x200c);
}

TEST_CASE("arm64 __startcontext and a swapcontext's saved registers (glibc's ucontext_t)", "[arch][arm64]") {
  // Debian 12's aarch64 libc.so.6 at 0x3f980, where makecontext's x30 points (llvm-objdump-14 -d):
  // nop; mov x0, x19; cbnz x0, 0x3f8c0 <setcontext>; b 0x3cf70 <exit>.
  const uint8_t start[16] = {0x1f, 0x20, 0x03, 0xd5, 0xe0, 0x03, 0x13, 0xaa,
                             0xc0, 0xf9, 0xff, 0xb5, 0x79, 0xf5, 0xff, 0x17};
  CHECK(Ops<Traits>::kCoroutineEntryLen == 16);
  CHECK(Ops<Traits>::coroutine_entry(start));
  uint8_t other[16];
  std::memcpy(other, start + 4, 12);  // without the landing pad (older glibc)
  std::memcpy(other + 12, start, 4);
  CHECK(Ops<Traits>::coroutine_entry(other));
  std::memcpy(other, start, sizeof other);
  other[0] = 0x5f;
  other[1] = 0x24;  // bti c
  CHECK(Ops<Traits>::coroutine_entry(other));
  other[0] = 0x3f;  // hint #33: not a landing pad
  CHECK_FALSE(Ops<Traits>::coroutine_entry(other));
  std::memcpy(other, start, sizeof other);
  other[6] = 0x14;  // mov x0, x20
  CHECK_FALSE(Ops<Traits>::coroutine_entry(other));
  std::memcpy(other, start, sizeof other);
  other[8] = 0xc1;  // cbnz x1
  CHECK_FALSE(Ops<Traits>::coroutine_entry(other));
  std::memcpy(other, start, sizeof other);
  other[15] = 0x94;  // bl, not b
  CHECK_FALSE(Ops<Traits>::coroutine_entry(other));

  // uc_link: x19 (makecontext.c), an annotation read from the entry's registers.
  Mem64 m;
  Regs r{};
  uint64_t slot = 1, link = 0;
  CHECK_FALSE(Ops<Traits>::coroutine_uc_link(r, 0, m, &slot, &link));
  r.set(19, 0x4000a000);
  REQUIRE(Ops<Traits>::coroutine_uc_link(r, 0, m, &slot, &link));
  CHECK(slot == 0);
  CHECK(link == 0x4000a000);

  // The resumer's context: regs at 184 (setcontext's ldp x18, x19, [x0, #328] = 184 + 18 * 8),
  // sp at 432, pc at 440 (ldr x2, [x0, #432]).
  CHECK(Ops<Traits>::kUcontextSp == 432);
  CHECK(Ops<Traits>::kUcontextPc == 440);
  const uint64_t uc = 0x20000;
  for (int i = 0; i < 33; i++) m.put64(uc + 184 + 8 * i, 0x7000 + i);
  Regs res{};
  REQUIRE(Ops<Traits>::resume_regs(m, uc, res));
  CHECK_FALSE(res.has(0));
  CHECK_FALSE(res.has(18));
  CHECK(res.get(19) == 0x7000 + 19);
  CHECK(res.get(kFp) == 0x7000 + 29);
  CHECK(res.get(kLr) == 0x7000 + 30);
  CHECK(res.get(kSp) == 0x7000 + 31);
  CHECK(res.get(kPc) == 0x7000 + 32);
  CHECK_FALSE(Ops<Traits>::resume_regs(m, 0x90000, res));  // unreadable
}
