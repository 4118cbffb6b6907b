// SPDX-License-Identifier: Apache-2.0
// JIT code named by /tmp/perf-PID.map: sprov_unwinder_unwind_into walks through it as sprov_unwinder_unwind does.
#include <catch2/catch.hpp>

#if defined(__x86_64__)
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "stackprov/stackprov.h"
#include "lib/jit_emit.h"

namespace {

sprov_context* g_jit_ctx = nullptr;
sprov_snapshot* g_jit_snap = nullptr;

extern "C" __attribute__((noinline, used)) void jit_into_callback() {
  REQUIRE(sprov_snapshot_capture_self(g_jit_ctx, nullptr, &g_jit_snap) == 0);
  asm volatile("" ::: "memory");
}

/// A frame-pointer function without CFI (tests/lib/jit_emit.h). Its call returns to offset 16.
size_t emit_caller(uint8_t* p, void* target) { return jit_emit_fp_caller(p, target); }

struct F {
  uint64_t pc, sp;
  uint32_t flags;
  bool operator==(const F& o) const { return pc == o.pc && sp == o.sp && flags == o.flags; }
};

}  // namespace

TEST_CASE("unwind_into takes the perf map's JIT ranges as sprov_unwinder_unwind does", "[unwind][jit]") {
  auto* code = static_cast<uint8_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(code != MAP_FAILED);
  const size_t len = emit_caller(code, reinterpret_cast<void*>(&jit_into_callback));
  REQUIRE(mprotect(code, 4096, PROT_READ | PROT_EXEC) == 0);
  const std::string map = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  FILE* f = std::fopen(map.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fprintf(f, "%lx %zx jit_into_test\n", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(code)), len);
  std::fclose(f);

  REQUIRE(sprov_context_new(nullptr, &g_jit_ctx) == 0);
  reinterpret_cast<void (*)()>(code)();
  REQUIRE(g_jit_snap != nullptr);

  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(g_jit_ctx, nullptr, &uw) == 0);
  sprov_stack* st = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, g_jit_snap, &st) == 0);
  std::vector<F> want;
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    sprov_frame fr;
    std::memset(&fr, 0, sizeof fr);
    fr.sz = sizeof fr;
    REQUIRE(sprov_stack_frame(st, i, &fr) == 0);
    want.push_back(F{fr.pc, fr.sp, fr.flags});
  }
  sprov_stack_free(st);
  sprov_unwinder_free(uw);

  // A fresh unwinder, so that nothing of the first walk is reused.
  REQUIRE(sprov_unwinder_new(g_jit_ctx, nullptr, &uw) == 0);
  std::vector<sprov_raw_frame> raw(256);
  sprov_unwind_buf buf;
  std::memset(&buf, 0, sizeof buf);
  buf.sz = sizeof buf;
  buf.frames = raw.data();
  buf.frame_sz = sizeof(sprov_raw_frame);
  buf.capacity = static_cast<uint32_t>(raw.size());
  REQUIRE(sprov_unwinder_unwind_into(uw, g_jit_snap, &buf) == 0);
  std::vector<F> got;
  for (uint32_t i = 0; i < buf.count; i++) got.push_back(F{raw[i].pc, raw[i].sp, raw[i].flags});
  sprov_unwinder_free(uw);
  std::remove(map.c_str());  // read by each unwinder's first walk of this pid
  sprov_snapshot_free(g_jit_snap);
  sprov_context_free(g_jit_ctx);
  munmap(code, 4096);

  // The JIT function's frame: its call's return address (offset 16 of the emitted code), flagged
  // JIT; its caller (this test, reached through the JIT code's frame pointer) follows.
  const uint64_t jit_ret = reinterpret_cast<uintptr_t>(code) + 16;
  size_t at = want.size();
  for (size_t i = 0; i < want.size(); i++)
    if (want[i].pc == jit_ret) at = i;
  INFO("jit code at 0x" << std::hex << reinterpret_cast<uintptr_t>(code) << ", frames: " << [&] {
    std::string d;
    char b[64];
    for (const F& x : want) {
      std::snprintf(b, sizeof b, " %llx/%x", static_cast<unsigned long long>(x.pc), x.flags);
      d += b;
    }
    return d;
  }());
  REQUIRE(at + 1 < want.size());
  CHECK((want[at].flags & SPROV_FRAME_JIT) != 0);
  CHECK((want[at + 1].flags & SPROV_FRAME_JIT) == 0);
  CHECK(got == want);
}
#endif
