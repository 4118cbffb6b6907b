// SPDX-License-Identifier: Apache-2.0
// sprov_process_kernel_stack (stack --kernel): /proc's kernel frames above a thread's stack, its state
// (read, unreadable, running, stale) decided by the saved user pc/sp against the captured registers.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "capi/internal.hpp"

using namespace stackprov;

namespace {

constexpr uint64_t kUserPc = 0x7f0000001234, kUserSp = 0x7ffc00001000;

memory::KernelFrame kernel_frame(const std::string& name, uint64_t off) {
  memory::KernelFrame f;
  f.symbol = name;
  f.offset = off;
  f.size = 0x100;
  return f;
}

struct KernelFixture {
  sprov_process proc;
  sprov_stack stack;
  KernelFixture() {
    auto snap = std::make_unique<sprov_snapshot>();
    snap->snap.tid = 7;
    snap->snap.arch = Arch::kX86_64;
    snap->snap.set_reg(16, kUserPc);  // rip
    snap->snap.set_reg(7, kUserSp);   // rsp
    proc.threads.push_back(std::move(snap));
    proc.kernel_read = true;
    memory::KernelThread k;
    k.tid = 7;
    k.readable = true;
    k.syscall.kind = memory::SyscallState::Kind::kInSyscall;
    k.syscall.nr = 230;
    k.syscall.pc = kUserPc;
    k.syscall.sp = kUserSp;
    k.frames = {kernel_frame("hrtimer_nanosleep", 0x74), kernel_frame("do_syscall_64", 0x71)};
    k.frames[1].module = "";
    proc.kernel.push_back(k);
    unwind::Frame f0, f1;
    f0.pc = kUserPc;
    f0.sp = kUserSp;
    f0.method = unwind::Method::kContext;
    f1.pc = 0x401000;
    f1.method = unwind::Method::kCfiEhFrame;
    f1.lookup_prev = true;
    stack.frames = {f0, f1};
    stack.stop = unwind::StopReason::kEndOfStack;
    stack.modules = std::make_shared<std::vector<memory::SnapshotModule>>();
  }
  sprov_stack* merge() {
    sprov_stack* out = nullptr;
    REQUIRE(sprov_process_kernel_stack(&proc, 0, &stack, &out) == 0);
    return out;
  }
  static sprov_kernel_stack_info info(const sprov_stack* st) {
    sprov_kernel_stack_info i = {};
    i.sz = sizeof(i);
    REQUIRE(sprov_stack_kernel_info(st, &i) == 0);
    return i;
  }
  static std::string render(const sprov_stack* st, uint32_t flags) {
    sprov_render_opts o = {};
    o.sz = sizeof(o);
    o.flags = flags;
    o.tid = 7;
    char* text = nullptr;
    REQUIRE(sprov_stack_render(nullptr, st, &o, &text, nullptr) == 0);
    std::string s = text;
    sprov_free(text);
    return s;
  }
};

}  // namespace

TEST_CASE("kernel merge: read, the boundary on the first user frame only", "[kernel]") {
  KernelFixture fx;
  sprov_stack* st = fx.merge();
  REQUIRE(sprov_stack_frame_count(st) == 4);
  const sprov_kernel_stack_info i = KernelFixture::info(st);
  CHECK(i.state == SPROV_KSTACK_READ);
  CHECK(i.frame_count == 2);
  CHECK(i.syscall == 230);
  CHECK(i.user_pc == kUserPc);
  CHECK(std::string(i.reason).empty());
  for (size_t k = 0; k < 4; k++) {
    sprov_frame fr = {};
    fr.sz = sizeof(fr);
    REQUIRE(sprov_stack_frame(st, k, &fr) == 0);
    CHECK(fr.domain == (k < 2 ? SPROV_DOMAIN_KERNEL : SPROV_DOMAIN_USER));
    CHECK(fr.method == (k < 2 ? SPROV_METHOD_KERNEL_STACK : k == 2 ? SPROV_METHOD_CONTEXT : SPROV_METHOD_CFI_EH_FRAME));
    CHECK(((fr.flags & SPROV_FRAME_KERNEL_USER_BOUNDARY) != 0) == (k == 2));
    sprov_kernel_frame kfr = {};
    kfr.sz = sizeof(kfr);
    const int rc = sprov_stack_kernel_frame(st, k, &kfr);
    if (k < 2) {
      REQUIRE(rc == 0);
      CHECK(std::string(kfr.symbol) == (k == 0 ? "hrtimer_nanosleep" : "do_syscall_64"));
      CHECK(std::string(kfr.module) == "[kernel.kallsyms]");
      CHECK(kfr.prototype == nullptr);  // not asked for
    } else {
      CHECK(rc == SPROV_ERR_NOT_FOUND);
    }
  }
  CHECK(KernelFixture::render(st, 0) ==
        "TID 7:\n"
        "kernel: system call 230, user sp 0x7ffc00001000 pc 0x7f0000001234\n"
        "#0  0x0000000000000000 hrtimer_nanosleep+0x74 - [kernel.kallsyms] [kernel_stack]\n"
        "#1  0x0000000000000000 do_syscall_64+0x71 - [kernel.kallsyms] [kernel_stack]\n"
        "#2  0x00007f0000001234 ?? - ?? [context, kernel_user_boundary]\n"
        "#3  0x0000000000401000 ?? - ?? [cfi_eh_frame]\n"
        "stop: end_of_stack\n");
  // Merged once; the other merges refuse a stack with its kernel segment.
  sprov_stack* twice = nullptr;
  CHECK(sprov_process_kernel_stack(&fx.proc, 0, st, &twice) == SPROV_ERR_INVALID_ARG);
  CHECK(sprov_process_interleave(&fx.proc, 0, st, SPROV_RUNTIME_INTERLEAVE, &twice) == SPROV_ERR_INVALID_ARG);
  sprov_stack_free(st);
  // Without the merge nothing changes: no kernel line, no flag.
  CHECK(KernelFixture::render(&fx.stack, 0).find("kernel") == std::string::npos);
}

TEST_CASE("kernel merge: a thread that left the kernel, ran, or could not be read", "[kernel]") {
  SECTION("stale: the captured pc is not the saved one") {
    KernelFixture fx;
    fx.proc.kernel[0].syscall.pc = kUserPc + 2;
    sprov_stack* st = fx.merge();
    const sprov_kernel_stack_info i = KernelFixture::info(st);
    CHECK(i.state == SPROV_KSTACK_STALE);
    CHECK(i.frame_count == 0);
    CHECK(sprov_stack_frame_count(st) == 2);
    CHECK(std::string(i.reason).find("0x7f0000001236") != std::string::npos);
    CHECK(std::string(i.reason).find("0x7f0000001234") != std::string::npos);
    CHECK(KernelFixture::render(st, SPROV_RENDER_JSON).find("\"kernel\":{\"state\":\"stale\"") != std::string::npos);
    sprov_stack_free(st);
  }
  SECTION("running") {
    KernelFixture fx;
    fx.proc.kernel[0].readable = false;
    fx.proc.kernel[0].syscall.kind = memory::SyscallState::Kind::kRunning;
    fx.proc.kernel[0].why = "running on a CPU (the kernel shows no stack of a running thread)";
    sprov_stack* st = fx.merge();
    CHECK(KernelFixture::info(st).state == SPROV_KSTACK_RUNNING);
    CHECK(KernelFixture::render(st, 0).find("kernel: running: running on a CPU") != std::string::npos);
    sprov_stack_free(st);
  }
  SECTION("unreadable") {
    KernelFixture fx;
    fx.proc.kernel[0].readable = false;
    fx.proc.kernel[0].why = "/proc/1/task/7/stack: Permission denied (reading a kernel stack needs root)";
    sprov_stack* st = fx.merge();
    CHECK(KernelFixture::info(st).state == SPROV_KSTACK_UNREADABLE);
    CHECK(KernelFixture::render(st, 0).find("kernel: unreadable: /proc/1/task/7/stack") != std::string::npos);
    sprov_stack_free(st);
  }
  SECTION("a thread that appeared after the read") {
    KernelFixture fx;
    fx.proc.kernel[0].tid = 8;
    sprov_stack* st = fx.merge();
    CHECK(KernelFixture::info(st).state == SPROV_KSTACK_UNREADABLE);
    CHECK(std::string(KernelFixture::info(st).reason).find("appeared after") != std::string::npos);
    sprov_stack_free(st);
  }
  SECTION("not captured with SPROV_PROCESS_KERNEL_STACKS") {
    KernelFixture fx;
    fx.proc.kernel_read = false;
    sprov_stack* st = nullptr;
    CHECK(sprov_process_kernel_stack(&fx.proc, 0, &fx.stack, &st) == SPROV_ERR_UNSUPPORTED);
    CHECK(sprov_process_kernel_stack(&fx.proc, 1, &fx.stack, &st) == SPROV_ERR_INVALID_ARG);
  }
}
