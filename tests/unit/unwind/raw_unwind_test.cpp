// SPDX-License-Identifier: Apache-2.0
// Raw walks: every register layout of every architecture gives frame 0 the same pc and sp (layouts from the kernel's uapi headers).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "unwind/raw_unwind.hpp"

using namespace stackprov;
using namespace stackprov::unwind;

namespace {

constexpr uint64_t kPc = 0x40123456;
constexpr uint64_t kSp = 0x7ff01000;

struct Layout {
  RegsFormat format;
  std::vector<uint8_t> bytes;
  uint64_t mask = 0;
};

template <class T>
void put(std::vector<uint8_t>& b, size_t off, T v, bool big_endian = false) {
  if (b.size() < off + sizeof(T)) b.resize(off + sizeof(T));
  for (size_t i = 0; i < sizeof(T); i++) {
    const size_t shift = 8 * (big_endian ? sizeof(T) - 1 - i : i);
    b[off + i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> shift);
  }
}

/// Frame 0 of a walk over no modules: the pc and sp the layout carried.
Frame frame0(Arch arch, Endian endian, const Layout& l) {
  AddressSpaceVersion v;
  v.table.finish();
  RuleCache cache;
  WalkOptions opts;
  opts.max_frames = 4;
  WalkResult out;
  RawWalkInput in;
  in.format = l.format;
  in.regs = l.bytes.data();
  in.regs_len = l.bytes.size();
  in.regs_mask = l.mask;
  uint32_t repaired = 0;
  Status st = walk_raw(arch, endian, in, v, cache, opts, &out, &repaired);
  REQUIRE(st.ok());
  REQUIRE(!out.frames.empty());
  CHECK(out.frames[0].method == Method::kContext);
  CHECK(!out.frames[0].lookup_prev);  // an interrupted pc, not a return address
  return out.frames[0];
}

}  // namespace

TEST_CASE("raw walk: x86_64 ptrace, pt_regs, perf, ucontext and DWARF layouts") {
  std::vector<Layout> ls;
  Layout user{RegsFormat::kPtrace, {}};  // user_regs_struct: rip word 16, rsp word 19 (sys/user.h)
  put<uint64_t>(user.bytes, 16 * 8, kPc);
  put<uint64_t>(user.bytes, 19 * 8, kSp);
  put<uint64_t>(user.bytes, 26 * 8, 0);
  ls.push_back(user);
  Layout pt{RegsFormat::kPtRegs, std::vector<uint8_t>(user.bytes.begin(), user.bytes.begin() + 21 * 8)};
  ls.push_back(pt);
  Layout perf{RegsFormat::kPerf, {}, (1ull << 7) | (1ull << 8)};  // PERF_REG_X86_SP = 7, IP = 8
  put<uint64_t>(perf.bytes, 0, kSp);
  put<uint64_t>(perf.bytes, 8, kPc);
  ls.push_back(perf);
  Layout uc{RegsFormat::kUcontext, {}};  // gregs at 40: REG_RSP = 15, REG_RIP = 16
  put<uint64_t>(uc.bytes, 40 + 15 * 8, kSp);
  put<uint64_t>(uc.bytes, 40 + 16 * 8, kPc);
  ls.push_back(uc);
  Layout dw{RegsFormat::kDwarf, {}};  // rsp = 7, rip = 16
  put<uint64_t>(dw.bytes, 7 * 8, kSp);
  put<uint64_t>(dw.bytes, 16 * 8, kPc);
  ls.push_back(dw);
  for (const Layout& l : ls) {
    INFO("format " << static_cast<int>(l.format));
    Frame f = frame0(Arch::kX86_64, Endian::kLittle, l);
    CHECK(f.pc == kPc);
    CHECK(f.sp == kSp);
  }
}

TEST_CASE("raw walk: arm64 ptrace, pt_regs, perf, ucontext and DWARF layouts") {
  std::vector<Layout> ls;
  Layout user{RegsFormat::kPtrace, {}};  // user_pt_regs: regs[31], sp, pc, pstate
  put<uint64_t>(user.bytes, 31 * 8, kSp);
  put<uint64_t>(user.bytes, 32 * 8, kPc);
  put<uint64_t>(user.bytes, 33 * 8, 0);
  ls.push_back(user);
  ls.push_back(Layout{RegsFormat::kPtRegs, user.bytes});
  Layout perf{RegsFormat::kPerf, {}, (1ull << 31) | (1ull << 32)};  // PERF_REG_ARM64_SP = 31, PC = 32
  put<uint64_t>(perf.bytes, 0, kSp);
  put<uint64_t>(perf.bytes, 8, kPc);
  ls.push_back(perf);
  Layout uc{RegsFormat::kUcontext, {}};  // uc_mcontext at 176: fault_address, regs[31], sp, pc
  put<uint64_t>(uc.bytes, 176 + 8 + 31 * 8, kSp);
  put<uint64_t>(uc.bytes, 176 + 8 + 32 * 8, kPc);
  put<uint64_t>(uc.bytes, 176 + 8 + 33 * 8, 0);
  ls.push_back(uc);
  Layout dw{RegsFormat::kDwarf, {}};
  put<uint64_t>(dw.bytes, 31 * 8, kSp);
  put<uint64_t>(dw.bytes, 32 * 8, kPc);
  ls.push_back(dw);
  for (const Layout& l : ls) {
    INFO("format " << static_cast<int>(l.format));
    Frame f = frame0(Arch::kArm64, Endian::kLittle, l);
    CHECK(f.pc == kPc);
    CHECK(f.sp == kSp);
  }
}

TEST_CASE("raw walk: mips32 (both byte orders) ptrace, pt_regs, perf, ucontext and DWARF layouts") {
  for (Endian e : {Endian::kLittle, Endian::kBig}) {
    const bool be = e == Endian::kBig;
    std::vector<Layout> ls;
    Layout user{RegsFormat::kPtrace, {}};  // o32 elf_gregset_t: EF_R0 = 6, EF_CP0_EPC = 40, 45 words
    put<uint32_t>(user.bytes, (6 + 29) * 4, kSp, be);
    put<uint32_t>(user.bytes, 40 * 4, kPc, be);
    put<uint32_t>(user.bytes, 44 * 4, 0, be);
    ls.push_back(user);
    Layout pt{RegsFormat::kPtRegs, {}};  // pad0[8], regs[32] at 32, cp0_epc at 180
    put<uint32_t>(pt.bytes, 32 + 29 * 4, kSp, be);
    put<uint32_t>(pt.bytes, 180, kPc, be);
    ls.push_back(pt);
    Layout perf{RegsFormat::kPerf, {}, 1ull | (1ull << 29)};  // PERF_REG_MIPS_PC = 0, R29 = 29; u64 host order
    put<uint64_t>(perf.bytes, 0, kPc);
    put<uint64_t>(perf.bytes, 8, kSp);
    ls.push_back(perf);
    Layout uc{RegsFormat::kUcontext, {}};  // mcontext at 24: regmask, status, u64 pc, u64 regs[32]
    put<uint64_t>(uc.bytes, 24 + 8, kPc, be);
    put<uint64_t>(uc.bytes, 24 + 16 + 29 * 8, kSp, be);
    put<uint64_t>(uc.bytes, 24 + 16 + 32 * 8, 0, be);
    ls.push_back(uc);
    Layout dw{RegsFormat::kDwarf, {}};
    put<uint64_t>(dw.bytes, 29 * 8, kSp);
    put<uint64_t>(dw.bytes, 37 * 8, kPc);
    ls.push_back(dw);
    for (const Layout& l : ls) {
      INFO("format " << static_cast<int>(l.format) << (be ? " big-endian" : " little-endian"));
      Frame f = frame0(Arch::kMips32, e, l);
      CHECK(f.pc == kPc);
      CHECK(f.sp == kSp);
    }
  }
}

TEST_CASE("raw walk: short register blocks and unknown formats are errors") {
  AddressSpaceVersion v;
  v.table.finish();
  RuleCache cache;
  WalkOptions opts;
  WalkResult out;
  uint32_t repaired = 0;
  uint8_t few[16] = {};
  RawWalkInput in;
  in.regs = few;
  in.regs_len = sizeof few;
  in.format = RegsFormat::kPtrace;
  Status st = walk_raw(Arch::kArm64, Endian::kLittle, in, v, cache, opts, &out, &repaired);
  REQUIRE(!st.ok());
  CHECK(st.error().code == SPROV_ERR_TRUNCATED);
  in.format = static_cast<RegsFormat>(99);
  st = walk_raw(Arch::kX86_64, Endian::kLittle, in, v, cache, opts, &out, &repaired);
  REQUIRE(!st.ok());
  CHECK(st.error().message.find("99") != std::string::npos);
  in.format = RegsFormat::kDwarf;
  st = walk_raw(Arch::kUnknown, Endian::kLittle, in, v, cache, opts, &out, &repaired);
  CHECK(st.error().code == SPROV_ERR_UNSUPPORTED);
}
