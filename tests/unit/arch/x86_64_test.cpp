// SPDX-License-Identifier: Apache-2.0
// x86_64 arch_ops: register conversions against the kernel/glibc structs, fp and signal steps on synthetic stacks.
#include <signal.h>
#include <sys/user.h>
#include <ucontext.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <vector>

#include "arch/x86_64/frame_pointer.hpp"
#include "arch/x86_64/registers.hpp"
#include "arch/x86_64/return_address.hpp"
#include "arch/x86_64/signal_frame.hpp"

using namespace stackprov::arch;
using namespace stackprov::arch::x86_64;

namespace {

/// Word-addressed fake memory.
struct FakeMem {
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

}  // namespace

TEST_CASE("user_regs_struct conversion follows <sys/user.h>", "[arch][x86_64]") {
  struct user_regs_struct u;
  std::memset(&u, 0, sizeof(u));
  u.rax = 1; u.rdx = 2; u.rcx = 3; u.rbx = 4; u.rsi = 5; u.rdi = 6; u.rbp = 7; u.rsp = 8;
  u.r8 = 9; u.r9 = 10; u.r10 = 11; u.r11 = 12; u.r12 = 13; u.r13 = 14; u.r14 = 15; u.r15 = 16;
  u.rip = 17;
  Regs r;
  REQUIRE(regs_from_user_regs(&u, sizeof(u), &r).ok());
  for (int i = 0; i < 17; i++) {
    REQUIRE(r.has(i));
    CHECK(r.get(i) == static_cast<uint64_t>(i + 1));  // DWARF order rax rdx rcx rbx rsi rdi rbp rsp r8.. rip
  }
  CHECK_FALSE(regs_from_user_regs(&u, sizeof(u) - 1, &r).ok());
  CHECK(regs_from_pt_regs(&u, 21 * 8, &r).ok());
  CHECK(r.get(kRip) == 17);
}

TEST_CASE("ucontext conversion follows glibc's ucontext_t", "[arch][x86_64]") {
  ucontext_t uc;
  std::memset(&uc, 0, sizeof(uc));
  uc.uc_mcontext.gregs[REG_RIP] = 0x1111;
  uc.uc_mcontext.gregs[REG_RSP] = 0x2222;
  uc.uc_mcontext.gregs[REG_RBP] = 0x3333;
  uc.uc_mcontext.gregs[REG_RBX] = 0x4444;
  uc.uc_mcontext.gregs[REG_R15] = 0x5555;
  uc.uc_mcontext.gregs[REG_RAX] = 0x6666;
  Regs r;
  REQUIRE(regs_from_ucontext(&uc, sizeof(uc), &r).ok());
  CHECK(r.get(kRip) == 0x1111);
  CHECK(r.get(kRsp) == 0x2222);
  CHECK(r.get(kRbp) == 0x3333);
  CHECK(r.get(kRbx) == 0x4444);
  CHECK(r.get(kR15) == 0x5555);
  CHECK(r.get(kRax) == 0x6666);
  CHECK_FALSE(regs_from_ucontext(&uc, 100, &r).ok());
}

TEST_CASE("perf sample_regs_user conversion packs by mask bit order", "[arch][x86_64]") {
  // mask 0xff0fff: AX BX CX DX SI DI BP SP IP FLAGS CS SS, R8..R15 (perf_regs.h)
  std::vector<uint64_t> v;
  for (int i = 0; i < 20; i++) v.push_back(100 + i);
  Regs r;
  REQUIRE(regs_from_perf(kPerfRegsMask, v.data(), v.size(), &r).ok());
  CHECK(r.get(kRax) == 100);
  CHECK(r.get(kRbx) == 101);
  CHECK(r.get(kRcx) == 102);
  CHECK(r.get(kRdx) == 103);
  CHECK(r.get(kRsp) == 107);
  CHECK(r.get(kRip) == 108);
  CHECK(r.get(kR8) == 112);
  CHECK(r.get(kR15) == 119);
  CHECK_FALSE(regs_from_perf(kPerfRegsMask, v.data(), 5, &r).ok());
}

TEST_CASE("capture_regs returns the caller's sp and a return address", "[arch][x86_64]") {
  uint64_t regs[17];
  stackprov_x86_64_capture_regs(regs);
  const uint64_t here = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  CHECK(regs[kRsp] <= here);             // inside our frame
  CHECK(here - regs[kRsp] < 64 * 1024);
  CHECK(regs[kRip] != 0);
}

TEST_CASE("frame-pointer step follows the rbp chain", "[arch][x86_64]") {
  FakeMem m;
  m.put64(0x7000, 0x7100);       // saved rbp
  m.put64(0x7008, 0x401234);     // return address
  Regs r{};
  r.set(kRsp, 0x6ff0);
  r.set(kRbp, 0x7000);
  r.set(kRip, 0x400000);
  uint64_t cfa = 0;
  REQUIRE(fp_step(r, m, &cfa) == StepOutcome::kOk);
  CHECK(cfa == 0x7010);
  CHECK(r.get(kRsp) == 0x7010);
  CHECK(r.get(kRbp) == 0x7100);
  CHECK(r.get(kRip) == 0x401234);
  Regs bad{};
  bad.set(kRsp, 0x8000);
  bad.set(kRbp, 0x7000);  // below sp: not a frame above us
  CHECK(fp_step(bad, m, &cfa) == StepOutcome::kNotApplicable);
  bad.set(kRbp, 0);
  CHECK(fp_step(bad, m, &cfa) == StepOutcome::kEnd);
  bad.set(kRsp, 0x100);
  bad.set(kRbp, 0x9000);  // unreadable
  CHECK(fp_step(bad, m, &cfa) == StepOutcome::kMemory);
}

TEST_CASE("signal step restores registers from a real ucontext layout", "[arch][x86_64]") {
  ucontext_t uc;
  std::memset(&uc, 0, sizeof(uc));
  uc.uc_mcontext.gregs[REG_RIP] = 0x401000;
  uc.uc_mcontext.gregs[REG_RSP] = 0x7ff000;
  uc.uc_mcontext.gregs[REG_RBP] = 0x7ff100;
  uc.uc_mcontext.gregs[REG_R12] = 42;
  FakeMem m;
  const uint64_t base = 0x10000;
  const auto* p = reinterpret_cast<const uint8_t*>(&uc);
  for (size_t i = 0; i < sizeof(uc); i++) m.bytes[base + i] = p[i];
  Regs r{};
  r.set(kRsp, base);
  uint64_t cfa = 0;
  REQUIRE(signal_step(r, m, &cfa) == StepOutcome::kOk);
  CHECK(cfa == base);
  CHECK(r.get(kRip) == 0x401000);
  CHECK(r.get(kRsp) == 0x7ff000);
  CHECK(r.get(kRbp) == 0x7ff100);
  CHECK(r.get(kR12) == 42);
}

TEST_CASE("sigreturn trampoline bytes are glibc's __restore_rt", "[arch][x86_64]") {
  // Disassembly of `mov $0xf,%rax; syscall` (objdump of glibc __restore_rt).
  const uint8_t restore_rt[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  CHECK(is_sigreturn_trampoline(restore_rt));
  uint8_t other[9];
  std::memcpy(other, restore_rt, 9);
  other[3] = 0x3c;  // exit
  CHECK_FALSE(is_sigreturn_trampoline(other));
}

TEST_CASE("call detection before a return address", "[arch][x86_64]") {
  const uint8_t call_rel32[7] = {0x90, 0x90, 0xe8, 0x10, 0x20, 0x30, 0x40};  // e8 rel32 ends at ra
  CHECK(preceded_by_call(call_rel32));
  const uint8_t e8_too_early[7] = {0x90, 0xe8, 0x10, 0x20, 0x30, 0x40, 0x00};
  CHECK_FALSE(preceded_by_call(e8_too_early));  // a call ending at ra-1 is not this call
  CHECK(preceded_by_call(call_rel32));
  const uint8_t call_rax[7] = {0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0};    // call *%rax
  CHECK(preceded_by_call(call_rax));
  const uint8_t call_mem[7] = {0x90, 0x90, 0x90, 0x90, 0xff, 0x50, 0x08};    // call *0x8(%rax)
  CHECK(preceded_by_call(call_mem));
  const uint8_t no_call[7] = {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3};
  CHECK_FALSE(preceded_by_call(no_call));
}

TEST_CASE("one decoder: call detection and return pads size instructions alike", "[arch][x86_64]") {
  // call *0x601040(,%rax,8): FF /2, SIB without a base (mod 0, base 5), so a disp32 follows.
  const uint8_t call_table[7] = {0xff, 0x14, 0xc5, 0x40, 0x10, 0x60, 0x00};
  CallKind kind;
  CHECK(insn_length(call_table, 7, &kind) == 7);
  CHECK(kind == CallKind::kIndirect);
  CHECK(preceded_by_call(call_table));
  CHECK(preceded_by_indirect_call(call_table));
  // Its first three bytes are no whole instruction: an address right after them is no return address.
  const uint8_t table_head[7] = {0x90, 0x90, 0x90, 0x90, 0xff, 0x14, 0xc5};
  CHECK_FALSE(preceded_by_call(table_head));
  CHECK_FALSE(preceded_by_indirect_call(table_head));
  // notrack call *%rax (3E FF D0): a prefixed call is still a call.
  const uint8_t notrack[7] = {0x90, 0x90, 0x90, 0x90, 0x3e, 0xff, 0xd0};
  CHECK(preceded_by_indirect_call(notrack));
  // lcall *(%rax) (FF /3): a return pad, not a scan candidate.
  const uint8_t far_call[7] = {0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0x18};
  CHECK_FALSE(preceded_by_call(far_call));
  CHECK(insn_length(far_call + 5, 2, &kind) == 2);
  CHECK(kind == CallKind::kFar);
  // Return pads: e8 rel32, nop, call *%rax, lcall *(%rax), ret at 0x1000.
  const uint8_t code[] = {0xe8, 0x00, 0x00, 0x00, 0x00, 0x90, 0xff, 0xd0, 0xff, 0x18, 0xc3};
  std::vector<CallSite> calls;
  size_t undecoded = 0;
  for_each_call(code, sizeof code, 0x1000, &undecoded, [&](const CallSite& c) { calls.push_back(c); });
  REQUIRE(calls.size() == 3);
  CHECK(calls[0].addr == 0x1000);
  CHECK(calls[0].length == 5);
  CHECK(calls[0].pad == 0x1005);
  CHECK(calls[1].pad == 0x1008);
  CHECK(calls[2].pad == 0x100a);
  CHECK(undecoded == 0);
}
