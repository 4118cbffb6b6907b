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
  /* On the caller's own sampling perf events instead (event_fds: e.g. a profiler's, or `perf
   * record`'s taken with pidfd_getfd): the program runs at each of their overflows and the events'
   * own samples are still written (their owner sees the same samples); frequency unused. Events
   * that take no program (not sampling, one already attached) are skipped; none taking it is an
   * error. Only the target's (pid's) threads are sampled. */
  SPROV_KERNEL_SAMPLER_EVENT_FDS = 1u << 1,
};

struct sprov_kernel_sampler_opts {
  size_t sz;
  int64_t pid;         /* the process (its threads as of now; cpu-clock events are inherited by later ones) */
  uint32_t flags;      /* sprov_kernel_sampler_flags */
  uint32_t frequency;  /* cpu-clock: samples per second per thread; 0: 999 */
  uint32_t stack_size; /* user stack bytes copied per event, <= SPROV_KERNEL_MAX_STACK; 0: 8192 */
  uint32_t reserved;   /* 0 */
  /* When sz covers them, with SPROV_KERNEL_SAMPLER_EVENT_FDS: the perf event fds (1 to 65536; the
   * caller keeps them, the sampler does not close them). */
  const int* event_fds;
  uint32_t event_fd_count;
  uint32_t reserved2;  /* 0 */
};
#define sprov_kernel_sampler_opts__last_field reserved2

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

/* ------------------------------------------- kernel stacks of a live process (`stack --kernel`) */

/* What is known of a thread's kernel segment (sprov_stack_kernel_info). */
enum sprov_kernel_stack_state {
  SPROV_KSTACK_NONE = 0,       /* not asked for (no SPROV_PROCESS_KERNEL_STACKS, not merged) */
  SPROV_KSTACK_READ = 1,       /* the kernel frames are the thread's (blocked in the kernel; syscall,
                                  user_sp and user_pc from /proc/PID/task/TID/syscall, whose user pc and
                                  sp are the captured frame 0's) */
  SPROV_KSTACK_UNREADABLE = 2, /* reason says why: permission (root needed), the thread is gone, a
                                  kernel thread, a file that does not parse */
  SPROV_KSTACK_RUNNING = 3,    /* the thread ran on a CPU while it was read: the kernel shows no stack */
  SPROV_KSTACK_STALE = 4,      /* read, but the thread had left the kernel by the capture (its user pc
                                  or sp differ from the captured frame 0's): no kernel frames */
};

struct sprov_kernel_stack_info {
  size_t sz;
  int32_t state;         /* enum sprov_kernel_stack_state */
  uint32_t frame_count;  /* kernel frames at the top of the stack (indices 0 .. frame_count - 1) */
  int64_t syscall;       /* the system call number the thread is blocked in (x86_64 numbering); -1
                            blocked outside a system call, or unknown */
  uint64_t user_sp;      /* the user sp and pc the kernel saved (/proc/.../syscall); 0 unknown */
  uint64_t user_pc;
  const char* reason;    /* owned by the stack; "" when state is SPROV_KSTACK_READ */
};
#define sprov_kernel_stack_info__last_field reason

/* A kernel frame of a merged stack: the name /proc printed (addresses are not shown to anyone). */
struct sprov_kernel_frame {
  size_t sz;
  const char* symbol;      /* owned by the stack */
  uint64_t symbol_offset;  /* from the symbol's start */
  uint64_t symbol_size;
  const char* module;      /* "[kernel.kallsyms]" or "[MODULE]", as perf script names it; owned */
  /* SPROV_PROCESS_KERNEL_BTF: the function's C prototype from the kernel's BTF ("int
   * do_nanosleep(struct hrtimer_sleeper *t, enum hrtimer_mode mode)"; a pointer to a function is
   * written "void (*)(...)"), NULL when not asked for or BTF has no such function; owned. */
  const char* prototype;
  uint32_t btf_func_id;    /* the BTF FUNC type's id (bpftool btf dump's [ID]); 0 without prototype */
  uint32_t flags;          /* SPROV_KERNEL_FRAME_* */
};
enum sprov_kernel_frame_flags {
  /* The frame is a compiler clone (symbol "f.isra.0", "f.constprop.0", "f.cold", "f.part.0"): its
     prototype is f's, and its real arguments may differ (dropped or specialised by the compiler). */
  SPROV_KERNEL_FRAME_BTF_APPROXIMATE = 1u << 0,
};
#define sprov_kernel_frame__last_field flags

/* A new stack: thread `index`'s kernel frames (read before the capture, innermost first; method
 * SPROV_METHOD_KERNEL_STACK, domain SPROV_DOMAIN_KERNEL, pc 0) above `user`'s frames (that
 * thread's unwound stack, interleaved or not; copied unchanged). The first user frame after kernel
 * frames carries SPROV_FRAME_KERNEL_USER_BOUNDARY (sprov_stack_frame). A thread whose kernel stack
 * could not be read, was running, or had left the kernel by the capture gets no kernel frames, and
 * sprov_stack_kernel_info says why. The stop reason is the user walk's. Errors:
 * SPROV_ERR_INVALID_ARG (NULL, index out of range, a stack with kernel frames already),
 * SPROV_ERR_UNSUPPORTED (proc was not captured with SPROV_PROCESS_KERNEL_STACKS). Free with
 * sprov_stack_free. */
SPROV_API int sprov_process_kernel_stack(const sprov_process* proc, size_t index, const sprov_stack* user,
                                         sprov_stack** out);
/* The kernel segment's state of a stack (SPROV_KSTACK_NONE for a stack not merged). */
SPROV_API int sprov_stack_kernel_info(const sprov_stack* stack, struct sprov_kernel_stack_info* out);
/* Names frame `index` when its method is SPROV_METHOD_KERNEL_STACK; SPROV_ERR_NOT_FOUND otherwise. */
SPROV_API int sprov_stack_kernel_frame(const sprov_stack* stack, size_t index, struct sprov_kernel_frame* out);

/* ------------------------------------------------ kernel function prototypes (BTF) */

/* The kernel's BTF with its function names indexed (`perf-import --with-btf`, `stack --kernel
 * --with-btf`). Immutable after open: lookups from any thread. */
typedef struct sprov_kernel_btf sprov_kernel_btf;
/* Parses `path` (NULL: /sys/kernel/btf/vmlinux) with libbpf and indexes its FUNC names.
 * Errors: SPROV_ERR_UNSUPPORTED (a build without libbpf: the eBPF sampler off), a negative errno. */
SPROV_API int sprov_kernel_btf_open(const char* path, sprov_kernel_btf** out);
SPROV_API void sprov_kernel_btf_free(sprov_kernel_btf* btf);

struct sprov_kernel_prototype {
  size_t sz;
  const char* prototype;  /* the C prototype, as sprov_kernel_frame.prototype; owned by the library,
                             valid until this thread's next sprov_kernel_btf_lookup */
  uint32_t func_id;       /* the BTF FUNC's id */
  uint32_t flags;         /* SPROV_KERNEL_FRAME_BTF_APPROXIMATE for a compiler clone */
};
#define sprov_kernel_prototype__last_field flags
/* The prototype of kernel function `name` (as kallsyms or /proc print it; "f.isra.0" gets f's,
 * approximate). SPROV_ERR_NOT_FOUND when BTF has no such function (assembly, a name BTF lacks). */
SPROV_API int sprov_kernel_btf_lookup(const sprov_kernel_btf* btf, const char* name,
                                      struct sprov_kernel_prototype* out);

#endif /* !__bpf__ */

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_KERNEL_H */
