// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/* stackprov-memleak, the BPF side: uprobes on the allocator entry points of the libc the
 * target maps, a uretprobe for the returned pointers, and (--scope) an entry probe + uretprobe
 * on a function of the program. A sampled allocation sends the thread's registers (struct
 * pt_regs), the top --stack-bytes of its user stack and its shadow stack (the return addresses
 * that pending uretprobes replaced with the [uprobes] trampoline) to a ring buffer; the loader
 * unwinds it with stackprov. Frees of sampled (live) pointers are sent too; all others stay
 * in the kernel. Built with clang-14 -target bpf against a vmlinux.h dumped at build time. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "memleak.h"
#include "perf/bpf/copy_user_stack.h"
#include "perf/bpf/stats.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (frozen .rodata: the verifier sees constants). */
const volatile __u32 target_tgid = 0;
const volatile __u64 stack_bytes = 16384;
const volatile __u64 sample_bytes = 0;  /* 0: every allocation */
const volatile __u64 min_size = 0;
const volatile __u32 scope_on = 0;
/* -ln((i + 0.5) / 256) * 1024: exponential intervals between samples (mean sample_bytes). */
const volatile __u32 exp_table[256] = {};

struct ml_thread {
  __s64 until_sample;   /* bytes to allocate before the next sample; <= 0: draw again */
  __u32 depth;          /* allocator calls in progress (realloc -> malloc inside glibc) */
  __u32 sampled;        /* the outermost call in progress is sampled */
  __u32 kind;
  __u32 shadow_n;       /* --scope functions pending on this thread (records kept: <= ML_SHADOW_MAX) */
  __u64 size;
  __u64 old;            /* realloc's pointer */
  __u64 memptr;         /* posix_memalign's void** */
  struct ml_shadow shadow[ML_SHADOW_MAX];
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, struct ml_thread);
} threads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1 << 21);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u64);
  __type(value, __u8);
} live SEC(".maps");

/* One scratch event per CPU, indexed by the CPU number (max_entries is set to the number of
 * possible CPUs by the loader): a per-CPU array cannot hold 64 KiB values. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ml_alloc_entry);
} scratch SEC(".maps");

#define ML_RING_BYTES (64u << 20)
/* Room kept for the small events (returns, frees): a stack event is not sent (the allocation is
 * then not sampled at all, so no return or free of it follows) when less than this is free, so
 * that a return or a free is not lost behind stack events, which would leave a phantom leak. */
#define ML_RING_HEADROOM (4u << 20)
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, ML_RING_BYTES);
} events SEC(".maps");

enum { ST_RB_DROPS, ST_LIVE_FULL, ST_STACK_SHORT, ST_SAMPLED, ST_CALLS, ST_RB_BUSY, ST_N };
SPROV_BPF_STATS(ST_N)

static __always_inline struct ml_thread* thread_get(__u32 tid) {
  struct ml_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (t) return t;
  struct ml_thread zero = {};
  bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
  return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline int our_process(__u64 pid_tgid) {
  return target_tgid == 0 || (__u32)(pid_tgid >> 32) == target_tgid;
}

/* The loader polls the ring every 100 ms: wake it only when the ring is a quarter full, so that a
 * traced thread does not pay a wake-up per event. */
static __always_inline __u64 wakeup_flags(void) {
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ML_RING_BYTES / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void send_small(__u32 type, __u32 kind, __u64 pid_tgid, __u64 ptr, __u64 size) {
  struct ml_event_head h = {.type = type, .kind = kind, .pid = pid_tgid >> 32, .tid = (__u32)pid_tgid,
                            .ptr = ptr, .size = size};
  if (bpf_ringbuf_output(&events, &h, sizeof(h), wakeup_flags())) stat_inc(ST_RB_DROPS);
}

static __always_inline void free_ptr(__u64 pid_tgid, __u64 p) {
  if (p && bpf_map_delete_elem(&live, &p) == 0) send_small(ML_EV_FREE, ML_FREE, pid_tgid, p, 0);
}

/* Copies [sp, sp + stack_bytes) into e->stack (lib/perf/bpf/copy_user_stack.h). */
static __always_inline __u32 copy_stack(struct ml_alloc_entry* e, __u64 sp) {
  int short_copy = 0;
  __u32 len = sprov_bpf_copy_user_stack(e->stack, sp, stack_bytes, ML_STACK_MAX, &short_copy);
  if (short_copy) stat_inc(ST_STACK_SHORT);
  return len;
}

/* Sends the thread's registers, stack and shadow stack (ML_EV_ALLOC_ENTRY); 1 when sent. */
static __always_inline int send_stack(struct pt_regs* ctx, struct ml_thread* t, __u64 pid_tgid, __u32 kind,
                                      __u64 size, __u64 old) {
  if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ML_RING_BYTES - ML_RING_HEADROOM) {
    stat_inc(ST_RB_BUSY);
    return 0;
  }
  __u32 cpu = bpf_get_smp_processor_id();
  struct ml_alloc_entry* e = bpf_map_lookup_elem(&scratch, &cpu);
  if (!e) return 0;
  stat_inc(ST_SAMPLED);
  e->h.type = ML_EV_ALLOC_ENTRY;
  e->h.kind = kind;
  e->h.pid = pid_tgid >> 32;
  e->h.tid = (__u32)pid_tgid;
  e->h.ptr = old;
  e->h.size = size;
  e->entry_pc = 0; /* the registers are at the allocator's entry */
  bpf_probe_read_kernel(e->regs, sizeof(e->regs), ctx);
  __u64 sp = PT_REGS_SP(ctx);
  e->stack_addr = sp;
  __u32 n = t->shadow_n;
  e->shadow_count = n > ML_SHADOW_MAX ? ML_SHADOW_MAX : n;
  __builtin_memcpy(e->shadow, t->shadow, sizeof(e->shadow));
  __u64 len = copy_stack(e, sp);
  if (len > ML_STACK_MAX) len = ML_STACK_MAX;
  e->stack_len = (__u32)len;
  __u64 out = ML_ENTRY_FIXED + len;
  asm volatile("" : "+r"(out)); /* keep the bound check below on the register the helper gets */
  if (out > sizeof(struct ml_alloc_entry)) out = sizeof(struct ml_alloc_entry);
  if (bpf_ringbuf_output(&events, e, out, wakeup_flags())) {
    stat_inc(ST_RB_DROPS);
    return 0;
  }
  return 1;
}

static __always_inline int on_alloc(struct pt_regs* ctx, __u32 kind, __u64 size, __u64 old, __u64 memptr) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!our_process(pid_tgid)) return 0;
  struct ml_thread* t = thread_get((__u32)pid_tgid);
  if (!t) return 0;
  if (t->depth++ > 0) return 0; /* inside another allocator call: the outer one is counted */
  stat_inc(ST_CALLS);
  t->sampled = 0;
  t->kind = kind;
  t->size = size;
  t->old = old;
  t->memptr = memptr;
  if (scope_on && t->shadow_n == 0) return 0;
  if (size < min_size) return 0;
  if (sample_bytes) {
    if (t->until_sample <= 0) {
      __u32 r = bpf_get_prandom_u32() & 255;
      t->until_sample += (__s64)((exp_table[r] * sample_bytes) >> 10) + 1;
    }
    t->until_sample -= (__s64)size;
    if (t->until_sample > 0) return 0;
    t->until_sample = 0; /* sampled: the next interval is drawn afresh (memoryless, as the shim) */
  }
  t->sampled = send_stack(ctx, t, pid_tgid, kind, size, old);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(malloc_entry, __u64 size) { return on_alloc(ctx, ML_MALLOC, size, 0, 0); }

SEC("uprobe")
int BPF_KPROBE(calloc_entry, __u64 nmemb, __u64 size) { return on_alloc(ctx, ML_CALLOC, nmemb * size, 0, 0); }

SEC("uprobe")
int BPF_KPROBE(realloc_entry, __u64 old, __u64 size) { return on_alloc(ctx, ML_REALLOC, size, old, 0); }

SEC("uprobe")
int BPF_KPROBE(posix_memalign_entry, __u64 memptr, __u64 align, __u64 size) {
  return on_alloc(ctx, ML_POSIX_MEMALIGN, size, 0, memptr);
}

SEC("uprobe")
int BPF_KPROBE(aligned_alloc_entry, __u64 align, __u64 size) { return on_alloc(ctx, ML_ALIGNED_ALLOC, size, 0, 0); }

SEC("uprobe")
int BPF_KPROBE(memalign_entry, __u64 align, __u64 size) { return on_alloc(ctx, ML_MEMALIGN, size, 0, 0); }

SEC("uprobe")
int BPF_KPROBE(valloc_entry, __u64 size) { return on_alloc(ctx, ML_VALLOC, size, 0, 0); }

SEC("uprobe")
int BPF_KPROBE(free_entry, __u64 p) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (our_process(pid_tgid)) free_ptr(pid_tgid, p);
  return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ret) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!our_process(pid_tgid)) return 0;
  __u32 tid = (__u32)pid_tgid;
  struct ml_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (!t || t->depth == 0) return 0;
  if (--t->depth > 0) return 0;
  __u64 p = ret;
  if (t->kind == ML_POSIX_MEMALIGN) {
    p = 0;
    if ((__u32)ret == 0 && t->memptr) bpf_probe_read_user(&p, sizeof(p), (const void*)t->memptr);
  }
  /* realloc frees its pointer when it succeeds, and for size 0 (glibc returns NULL then) */
  if (t->kind == ML_REALLOC && t->old && (p != 0 || t->size == 0)) free_ptr(pid_tgid, t->old);
  if (!t->sampled) return 0;
  t->sampled = 0;
  if (p) {
    __u8 one = 1;
    if (bpf_map_update_elem(&live, &p, &one, BPF_ANY)) stat_inc(ST_LIVE_FULL);
  }
  send_small(ML_EV_ALLOC_RET, t->kind, pid_tgid, p, t->size);
  return 0;
}

/* --scope FUNC: entry records the real return address and its slot (a shadow-stack record:
 * the uretprobe below replaces that slot with the [uprobes] trampoline right after this
 * program runs); the return pops it. */
SEC("uprobe")
int BPF_KPROBE(scope_entry) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!our_process(pid_tgid)) return 0;
  struct ml_thread* t = thread_get((__u32)pid_tgid);
  if (!t) return 0;
  __u64 sp = PT_REGS_SP(ctx);
  __u64 ra = 0;
  bpf_probe_read_user(&ra, sizeof(ra), (const void*)sp);
  __u32 n = t->shadow_n;
  if (n < ML_SHADOW_MAX) {
    t->shadow[n & (ML_SHADOW_MAX - 1)].return_address = ra;
    t->shadow[n & (ML_SHADOW_MAX - 1)].slot = sp;
  }
  t->shadow_n = n + 1;
  return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(scope_return) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!our_process(pid_tgid)) return 0;
  __u32 tid = (__u32)pid_tgid;
  struct ml_thread* t = bpf_map_lookup_elem(&threads, &tid);
  if (t && t->shadow_n > 0) t->shadow_n -= 1;
  return 0;
}
