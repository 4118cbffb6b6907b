// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/* The library's eBPF sampler (doc/kernel-stacks.md): one ring-buffer event per sample of the
 * target process (struct sprov_kernel_event, include/stackprov/kernel.h) with the kernel stack
 * (bpf_get_stack), the thread's user registers (bpf_task_pt_regs of the current task: the context
 * holds kernel registers when the sample lands in the kernel) and a copy of its user stack. Two
 * attach points: a perf_event (cpu-clock at a frequency, per thread; lib/perf/recorder.cpp opens
 * it) and the tracepoint sched:sched_switch (off-CPU: the thread that switches out). Built at build
 * time with clang -target bpf against the running kernel's vmlinux.h (CO-RE), embedded as a libbpf
 * skeleton (cmake/bpf.cmake). No kprobes. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "perf/bpf/copy_user_stack.h"
#include "perf/bpf/stats.h"
#include "stackprov/kernel.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (frozen .rodata). */
const volatile __u32 target_tgid = 0;
const volatile __u64 stack_bytes = 8192;

/* One scratch event per CPU, indexed by the CPU number (max_entries: the loader sets the number of
 * possible CPUs; a per-CPU array cannot hold a 64 KiB value). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sprov_kernel_event);
} scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 32u << 20);
} events SEC(".maps");

/* Counters the loader reports: events lost (ring full), stacks copied short. */
enum { ST_DROPS, ST_SHORT, ST_SENT, ST_N };
SPROV_BPF_STATS(ST_N)

static __always_inline void sample(void* ctx, __u32 kind, int in_kernel) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if ((__u32)(pid_tgid >> 32) != target_tgid) return;
  __u32 cpu = bpf_get_smp_processor_id();
  struct sprov_kernel_event* e = bpf_map_lookup_elem(&scratch, &cpu);
  if (!e) return;
  e->magic = SPROV_KERNEL_EVENT_MAGIC;
  e->version = SPROV_KERNEL_EVENT_VERSION;
  e->kind = kind;
  e->flags = in_kernel ? SPROV_KEV_IN_KERNEL : 0;
  e->pid = pid_tgid >> 32;
  e->tid = (__u32)pid_tgid;
  e->time_ns = bpf_ktime_get_ns();
  e->cpu = cpu;
  e->reserved = 0;
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  long n = bpf_get_stack(ctx, e->kernel_ips, sizeof(e->kernel_ips), 0);
  e->kernel_count = n > 0 ? (__u32)((__u64)n / 8) : 0;
  e->stack_len = 0;
  e->stack_addr = 0;
  struct task_struct* task = bpf_get_current_task_btf();
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  __u64 len = 0;
  if (task->mm && regs) {
    bpf_probe_read_kernel(e->user_regs, sizeof(e->user_regs), regs);
    if ((e->user_regs[17] & 3) == 3) { /* cs: the registers of user mode */
      e->flags |= SPROV_KEV_USER_REGS;
      __u64 sp = e->user_regs[19];
      e->stack_addr = sp;
      int short_copy = 0;
      len = sprov_bpf_copy_user_stack(e->stack, sp, stack_bytes, SPROV_KERNEL_MAX_STACK, &short_copy);
      if (short_copy) {
        e->flags |= SPROV_KEV_STACK_SHORT;
        stat_inc(ST_SHORT);
      }
    }
  }
  if (len > SPROV_KERNEL_MAX_STACK) len = SPROV_KERNEL_MAX_STACK;
  e->stack_len = (__u32)len;
  __u64 out = SPROV_KERNEL_EVENT_FIXED + len;
  asm volatile("" : "+r"(out)); /* keep the bound check below on the register the helper gets */
  if (out > sizeof(struct sprov_kernel_event)) out = sizeof(struct sprov_kernel_event);
  if (bpf_ringbuf_output(&events, e, out, 0)) {
    stat_inc(ST_DROPS);
    return;
  }
  stat_inc(ST_SENT);
}

/* cpu-clock: ctx->regs are the interrupted registers (kernel ones when the sample landed in the
 * kernel). Returns 0: the perf event itself records nothing (its ring holds only the side-band
 * records: MMAP2, COMM, FORK, EXIT). */
SEC("perf_event")
int on_cpu_clock(struct bpf_perf_event_data* ctx) {
  __u64 cs = *(volatile __u64*)&ctx->regs.cs; /* the verifier takes only 8-byte context reads here */
  sample(ctx, SPROV_KEV_CPU_CLOCK, (cs & 3) != 3);
  return 0;
}

/* Another program's sampling perf event (sprov_kernel_sampler_opts.event_fds, e.g. a `perf record`'s
 * cpu-clock event): the same event, at the same overflow as the owner's own sample. Returns 1: the
 * event's own samples are still written, so its owner sees every sample this program sees. */
SEC("perf_event")
int on_perf_event_keep(struct bpf_perf_event_data* ctx) {
  __u64 cs = *(volatile __u64*)&ctx->regs.cs;
  sample(ctx, SPROV_KEV_CPU_CLOCK, (cs & 3) != 3);
  return 1;
}

/* sched:sched_switch: the thread switching out, in the kernel. Returns 1: 0 would suppress perf's
 * own samples of this tracepoint (a `perf record -e sched:sched_switch` running at the same time). */
SEC("tracepoint/sched/sched_switch")
int on_sched_switch(void* ctx) {
  sample(ctx, SPROV_KEV_SCHED_SWITCH, 1);
  return 1;
}
