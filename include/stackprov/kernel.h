/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI, kernel + user in one capture (doc/kernel-stacks.md): the event the eBPF
 * sampler sends per sample, and the entry point that turns one event into a stitched stack. */
#ifndef STACKPROV_KERNEL_H
#define STACKPROV_KERNEL_H

/* The event layout is shared with the BPF program (lib/perf/kernel_sampler.bpf.c), which is
 * compiled with clang -target bpf against vmlinux.h: there, the fixed-width types are the
 * kernel's. */
#ifdef __bpf__
typedef __u8 sprov_kev_u8;
typedef __u32 sprov_kev_u32;
typedef __u64 sprov_kev_u64;
#else
#include "stackprov/fast.h"
typedef uint8_t sprov_kev_u8;
typedef uint32_t sprov_kev_u32;
typedef uint64_t sprov_kev_u64;
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SPROV_KERNEL_EVENT_MAGIC 0x4b565053u /* "SPVK" */
#define SPROV_KERNEL_EVENT_VERSION 1u
#define SPROV_KERNEL_MAX_FRAMES 127     /* kernel frames per event (bpf_get_stack's buffer) */
#define SPROV_KERNEL_MAX_STACK 65536    /* user stack bytes per event */
#define SPROV_KERNEL_PT_REGS_WORDS 21   /* x86_64 struct pt_regs: 168 bytes */

/* sprov_kernel_event.kind: what fired. */
enum sprov_kernel_event_kind {
  SPROV_KEV_CPU_CLOCK = 1,    /* a perf_event (cpu-clock at a frequency) sample */
  SPROV_KEV_SCHED_SWITCH = 2, /* the tracepoint sched:sched_switch, the thread switched out (off-CPU) */
};

/* sprov_kernel_event.flags */
enum sprov_kernel_event_flags {
  SPROV_KEV_USER_REGS = 1u << 0, /* user_regs hold the thread's user-mode registers (bpf_task_pt_regs:
                                    the registers saved at its entry into the kernel, or the sampled
                                    ones when the sample landed in user mode); clear for a kernel thread */
  SPROV_KEV_IN_KERNEL = 1u << 1, /* the sample landed in kernel mode: kernel_ips[0] is the interrupted
                                    (or, for a tracepoint, the calling) instruction */
  SPROV_KEV_STACK_SHORT = 1u << 2, /* the user stack was copied page by page and stopped at a page that
                                      could not be read before the requested size */
};

/* One ring-buffer event of the eBPF sampler (little-endian, the host's layout; the sampler sends
 * only the first SPROV_KERNEL_EVENT_FIXED + stack_len bytes). */
struct sprov_kernel_event {
  sprov_kev_u32 magic;        /* SPROV_KERNEL_EVENT_MAGIC */
  sprov_kev_u32 version;      /* SPROV_KERNEL_EVENT_VERSION */
  sprov_kev_u32 kind;         /* sprov_kernel_event_kind */
  sprov_kev_u32 flags;        /* sprov_kernel_event_flags */
  sprov_kev_u32 pid;          /* tgid */
  sprov_kev_u32 tid;
  sprov_kev_u64 time_ns;      /* bpf_ktime_get_ns: CLOCK_MONOTONIC (perf record -k CLOCK_MONOTONIC) */
  sprov_kev_u32 cpu;
  sprov_kev_u32 kernel_count; /* entries of kernel_ips (bpf_get_stack, innermost first) */
  sprov_kev_u64 stack_addr;   /* user address of stack[0]: the user sp */
  sprov_kev_u32 stack_len;    /* bytes of stack copied */
  sprov_kev_u32 reserved;     /* 0 */
  char comm[16];              /* bpf_get_current_comm */
  sprov_kev_u64 user_regs[SPROV_KERNEL_PT_REGS_WORDS]; /* x86_64 struct pt_regs (SPROV_REGS_PT_REGS) */
  sprov_kev_u64 kernel_ips[SPROV_KERNEL_MAX_FRAMES];
  sprov_kev_u8 stack[SPROV_KERNEL_MAX_STACK];
};
#define SPROV_KERNEL_EVENT_FIXED (sizeof(struct sprov_kernel_event) - SPROV_KERNEL_MAX_STACK)

#ifndef __bpf__
/* ------------------------------------------------------- the sampler */

/* The library's eBPF sampler (lib/perf/bpf/kernel_sampler.bpf.c; `stackprov record --with-kernel`
 * uses it through sprov_record). Needs root (CAP_BPF + CAP_PERFMON) and a build that has it:
 * native x86_64 Linux with the kernel's BTF at build time, not a cross or sanitizer build (then
 * sprov_kernel_sampler_open fails with SPROV_ERR_UNSUPPORTED saying why). */
typedef struct sprov_kernel_sampler sprov_kernel_sampler;

enum sprov_kernel_sampler_flags {
  SPROV_KERNEL_SAMPLER_OFF_CPU = 1u << 0, /* at sched:sched_switch (off-CPU) instead of cpu-clock */
};

struct sprov_kernel_sampler_opts {
  size_t sz;
  int64_t pid;         /* the process (its threads as of now; cpu-clock events are inherited by later ones) */
  uint32_t flags;      /* sprov_kernel_sampler_flags */
  uint32_t frequency;  /* cpu-clock: samples per second per thread; 0: 999 */
  uint32_t stack_size; /* user stack bytes copied per event, <= SPROV_KERNEL_MAX_STACK; 0: 8192 */
  uint32_t reserved;   /* 0 */
};
#define sprov_kernel_sampler_opts__last_field reserved

/* Loads and attaches the sampler. Errors: SPROV_ERR_INVALID_ARG, SPROV_ERR_UNSUPPORTED (not in this
 * build), -ESRCH (no such process), -EPERM/-EACCES (not root). */
SPROV_API int sprov_kernel_sampler_open(const struct sprov_kernel_sampler_opts* opts, sprov_kernel_sampler** out);
/* Waits up to timeout_ms (0: not at all) for events and calls fn for each (a struct
 * sprov_kernel_event of `len` bytes, valid during the call). Returns the number of events or an error. */
typedef void (*sprov_kernel_event_fn)(const void* event, size_t len, void* arg);
SPROV_API int sprov_kernel_sampler_poll(sprov_kernel_sampler* s, int timeout_ms, sprov_kernel_event_fn fn, void* arg);
/* Events the ring buffer had no room for. */
SPROV_API uint64_t sprov_kernel_sampler_dropped(const sprov_kernel_sampler* s);
SPROV_API void sprov_kernel_sampler_free(sprov_kernel_sampler* s);

/* ------------------------------------------------------- stitching */

/* The kernel's symbol table (/proc/kallsyms read as perf reads it, lib/perf/kernel_symbols). */
typedef struct sprov_kernel_symbols sprov_kernel_symbols;
/* Reads `kallsyms_path` (NULL: /proc/kallsyms). Errors: the file's errno, SPROV_ERR_NOT_FOUND
 * (addresses hidden: kernel.kptr_restrict, or no symbol). */
SPROV_API int sprov_kernel_symbols_open(const char* kallsyms_path, sprov_kernel_symbols** out);
SPROV_API void sprov_kernel_symbols_free(sprov_kernel_symbols* ks);

/* One frame of a stitched stack, innermost first: the kernel's frames (domain
 * SPROV_DOMAIN_KERNEL, method SPROV_METHOD_CALLCHAIN, named from kallsyms), then the user frames
 * unwound from the event's user registers and stack bytes with stackprov's unwinder (domain
 * SPROV_DOMAIN_USER). The first user frame after a kernel frame carries
 * SPROV_FRAME_KERNEL_USER_BOUNDARY: the segment changes there, and its registers are the user
 * pt_regs the kernel saved (the event's user_regs). */
#define SPROV_FRAME_KERNEL_USER_BOUNDARY (1u << 8)
struct sprov_stitched_frame {
  uint64_t pc;            /* kernel: the address bpf_get_stack gave; user: as sprov_raw_frame.pc */
  uint64_t sp;            /* user frames; 0 for kernel frames */
  uint64_t symbol_offset; /* kernel: pc - symbol start; user: module_offset */
  const char* symbol;     /* kernel: the kallsyms name (owned by the sprov_kernel_symbols), NULL when
                             none; user: NULL (symbolize pc with a sprov_symbolizer) */
  const char* module;     /* kernel: "[kernel.kallsyms]" or "[MODULE]" as perf script names it; user: NULL */
  int32_t domain;         /* enum sprov_domain */
  int32_t method;         /* enum sprov_method */
  int32_t module_index;   /* user: into the address space generation of the walk; -1 otherwise */
  uint32_t flags;         /* SPROV_FRAME_* and SPROV_FRAME_KERNEL_USER_BOUNDARY */
};

struct sprov_stitch_result {
  size_t sz;
  uint32_t count;          /* frames written */
  uint32_t kernel_count;   /* of them, kernel frames (the first ones) */
  int32_t user_stop_reason; /* sprov_stop_reason of the user walk; SPROV_STOP_NONE without user regs */
  uint32_t reserved;
  uint64_t generation;     /* the address space generation the user walk used */
};
#define sprov_stitch_result__last_field generation

/* Turns one sampler event (`event`, `len` bytes: at least SPROV_KERNEL_EVENT_FIXED + stack_len)
 * into a stitched stack in `frames` (room for `capacity`). `as` is the address space of the
 * event's process, `ks` the kernel's symbols (NULL: kernel frames unnamed). Errors:
 * SPROV_ERR_INVALID_ARG (NULL, capacity 0), SPROV_ERR_BAD_FORMAT (magic, version, a count or
 * length past its bound), SPROV_ERR_TRUNCATED (len shorter than the event says), those of
 * sprov_unwinder_unwind_raw. */
SPROV_API int sprov_kernel_event_stitch(sprov_unwinder* uw, const sprov_address_space* as,
                                        const sprov_kernel_symbols* ks, const void* event, size_t len,
                                        struct sprov_stitched_frame* frames, size_t capacity,
                                        struct sprov_stitch_result* out);
#endif

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_KERNEL_H */
