// SPDX-License-Identifier: Apache-2.0
// C ABI: a live thread's kernel stack (/proc, read before the capture) merged above its unwound user stack.
#include <cinttypes>
#include <cstdio>

#include "capi/internal.hpp"
#include "stackprov/kernel.h"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

/// The kernel thread read for `tid`, or null when none was (a thread that appeared later).
const memory::KernelThread* kernel_thread_of(const sprov_process* proc, int64_t tid) {
  for (const memory::KernelThread& k : proc->kernel)
    if (k.tid == tid) return &k;
  return nullptr;
}

/// The segment for thread `tid` whose captured frame 0 is `top` (null: no user frame).
KernelSegment segment_of(const sprov_process* proc, int64_t tid, const unwind::Frame* top) {
  KernelSegment seg;
  const memory::KernelThread* k = kernel_thread_of(proc, tid);
  if (k == nullptr) {
    seg.state = SPROV_KSTACK_UNREADABLE;
    seg.reason = "the thread appeared after the kernel stacks were read";
    return seg;
  }
  using Kind = memory::SyscallState::Kind;
  seg.syscall = k->syscall.kind == Kind::kInSyscall ? k->syscall.nr : -1;
  seg.user_sp = k->syscall.sp;
  seg.user_pc = k->syscall.pc;
  if (!k->readable) {
    seg.state = k->syscall.kind == Kind::kRunning && !k->why.empty() && k->why.rfind("running", 0) == 0
                    ? SPROV_KSTACK_RUNNING
                    : SPROV_KSTACK_UNREADABLE;
    seg.reason = k->why;
    return seg;
  }
  // The kernel frames belong to the captured user stack only if the thread did not return to user
  // mode in between: the user pc and sp the kernel saved are then the captured frame 0's.
  if (top == nullptr || top->pc != k->syscall.pc || top->sp != k->syscall.sp) {
    char b[192];
    snprintf(b, sizeof b,
             "the thread left the kernel before the capture (saved user pc 0x%" PRIx64 " sp 0x%" PRIx64
             ", captured pc 0x%" PRIx64 " sp 0x%" PRIx64 ")",
             k->syscall.pc, k->syscall.sp, top ? top->pc : 0, top ? top->sp : 0);
    seg.state = SPROV_KSTACK_STALE;
    seg.reason = b;
    return seg;
  }
  seg.state = SPROV_KSTACK_READ;
  seg.frames = k->frames;
  for (const memory::KernelFrame& f : seg.frames)
    seg.modules.push_back(f.module.empty() ? std::string("[kernel.kallsyms]") : "[" + f.module + "]");
  return seg;
}

}  // namespace

namespace stackprov::capi {

KernelSegment process_kernel_segment(const sprov_process* proc, size_t index, const sprov_stack* user) {
  // The captured user pc and sp: the snapshot's registers (x86_64 DWARF rip 16, rsp 7), else the
  // stack's frame 0 (a stack of runtime frames only, --python=only, has no native frame 0).
  const memory::Snapshot& snap = proc->threads[index]->snap;
  unwind::Frame regs0;
  const unwind::Frame* top = nullptr;
  if (snap.arch == Arch::kX86_64 && snap.has_reg(16) && snap.has_reg(7)) {
    regs0.pc = snap.regs[16];
    regs0.sp = snap.regs[7];
    top = &regs0;
  } else if (user && !user->frames.empty() && user->frames[0].method == unwind::Method::kContext) {
    top = &user->frames[0];
  }
  KernelSegment seg = segment_of(proc, snap.tid, top);
  if (proc->btf) {
    seg.with_btf = true;
    seg.protos.resize(seg.frames.size());
    for (size_t i = 0; i < seg.frames.size(); i++) proc->btf->lookup(seg.frames[i].symbol, &seg.protos[i]);
  }
  return seg;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_process_kernel_stack(const sprov_process* proc, size_t index, const sprov_stack* user,
                                         sprov_stack** out) {
  return guard([&] {
    if (proc == nullptr || user == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_kernel_stack: NULL %s",
                             proc == nullptr ? "proc" : user == nullptr ? "user" : "out"));
    *out = nullptr;
    if (index >= proc->threads.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "thread index %zu out of range (%zu threads)", index,
                             proc->threads.size()));
    if (!proc->kernel_read)
      return fail(make_error(SPROV_ERR_UNSUPPORTED,
                             "sprov_process_kernel_stack: the process was not captured with "
                             "SPROV_PROCESS_KERNEL_STACKS"));
    if (user->kernel.state != SPROV_KSTACK_NONE)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_kernel_stack: the stack has its kernel segment"));
    auto st = std::make_unique<sprov_stack>(*user);
    st->kernel = capi::process_kernel_segment(proc, index, user);
    const size_t k = st->kernel.frames.size();
    if (k > 0) {
      unwind::Frame kf;
      kf.method = unwind::Method::kKernelStack;
      kf.domain = unwind::Domain::kKernel;
      st->frames.insert(st->frames.begin(), k, kf);
      if (!st->regs.empty()) st->regs.insert(st->regs.begin(), k, unwind::FrameRegs{});
      if (!st->runtime_of.empty()) st->runtime_of.insert(st->runtime_of.begin(), k, -1);
      for (int64_t& n : st->runtime_native)
        if (n >= 0) n += static_cast<int64_t>(k);
      for (unwind::CoroutineLink& l : st->links) l.frame += static_cast<uint32_t>(k);
    }
    *out = st.release();
    return 0;
  });
}

SPROV_API int sprov_stack_kernel_info(const sprov_stack* stack, struct sprov_kernel_stack_info* out) {
  return guard([&] {
    if (stack == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_kernel_info: stack is NULL"));
    struct sprov_kernel_stack_info i = {};
    i.sz = sizeof(i);
    i.state = stack->kernel.state;
    i.frame_count = static_cast<uint32_t>(stack->kernel.frames.size());
    i.syscall = stack->kernel.syscall;
    i.user_sp = stack->kernel.user_sp;
    i.user_pc = stack->kernel.user_pc;
    i.reason = stack->kernel.reason.c_str();
    return fill_out(out, i, "sprov_kernel_stack_info");
  });
}

SPROV_API int sprov_stack_kernel_frame(const sprov_stack* stack, size_t index, struct sprov_kernel_frame* out) {
  return guard([&] {
    if (stack == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_kernel_frame: stack is NULL"));
    if (index >= stack->frames.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                             stack->frames.size()));
    if (index >= stack->kernel.frames.size())
      return fail(make_error(SPROV_ERR_NOT_FOUND, "frame %zu is not a kernel frame", index));
    const memory::KernelFrame& f = stack->kernel.frames[index];
    struct sprov_kernel_frame o = {};
    o.sz = sizeof(o);
    o.symbol = f.symbol.c_str();
    o.symbol_offset = f.offset;
    o.symbol_size = f.size;
    o.module = stack->kernel.modules[index].c_str();
    if (stack->kernel.with_btf && stack->kernel.protos[index].func_id != 0) {
      const perf::BtfPrototype& p = stack->kernel.protos[index];
      o.prototype = p.text.c_str();
      o.btf_func_id = p.func_id;
      o.flags = p.approximate ? static_cast<uint32_t>(SPROV_KERNEL_FRAME_BTF_APPROXIMATE) : 0u;
    }
    return fill_out(out, o, "sprov_kernel_frame");
  });
}

}  // extern "C"
