/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI, fast path: unwinding into caller buffers, address spaces, raw registers + stack bytes, signal handlers. */
#ifndef STACKPROV_FAST_H
#define STACKPROV_FAST_H

#include "stackprov/stackprov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------------------
 * The fast path (doc/fast-path.md)
 *
 * Profilers, perf consumers and eBPF agents unwind many stacks and cannot
 * afford a sprov_snapshot and a sprov_stack per sample. The entry points here
 * write frames into buffers the caller owns:
 *
 *   sprov_unwinder_unwind_into    a snapshot            -> caller buffers
 *   sprov_unwinder_unwind_raw     registers + stack bytes + address space -> caller buffers
 *   sprov_unwinder_unwind_signal  a signal handler's ucontext + this thread's stack
 *                                 + address space       -> caller buffers (async-signal-safe)
 *
 * Allocation and locks: a sprov_unwinder reserves its frame scratch when it is
 * created (opts.max_frames) and its rule cache is fixed-size, so a walk neither
 * allocates nor locks, except the first time it meets something:
 *   - sprov_unwinder_unwind_into builds the unwinder's module table when the
 *     snapshot's module list differs from the previous one (loads modules);
 *   - the first miss in an FDE compiles that FDE's rows (allocates once per FDE;
 *     published without a lock, doc/unwind-tables.md);
 *   - the first walk of a pid reads its perf map, /tmp/perf-PID.map (JIT code;
 *     sprov_unwinder_unwind_into and _unwind_raw, doc/fast-path.md);
 *   - the first use of a module's separate debug file for .debug_frame loads it
 *     (pass SPROV_UNWIND_NO_DEBUG_FRAME, or SPROV_AS_LOAD_DEBUG_FRAME when
 *     building the address space).
 * sprov_unwinder_unwind_signal does none of these: it compiles no rows (a miss
 * runs the CFI interpreter and caches its compact rule), reads no perf map (it
 * uses the one sprov_unwinder_set_stack read) and never uses .debug_frame files
 * that are not loaded yet.
 * Failures of the first two entry points (bad arguments) set the thread's last
 * error, which allocates; sprov_unwinder_unwind_signal only returns the code.
 * ------------------------------------------------------------------------- */

/* One unwound frame in a caller buffer. A fixed layout (no sz): arrays of it
 * are passed with their element size (sprov_unwind_buf.frame_sz), so a library
 * that knows a longer struct writes only the caller's prefix. */
struct sprov_raw_frame {
  uint64_t pc;            /* the unwound pc; a return address when flags has SPROV_FRAME_RETURN_ADDRESS
                             (symbolize at pc - 1) */
  uint64_t sp;
  uint64_t cfa;           /* 0 when unknown (the outermost frame, a scan) */
  uint64_t module_offset; /* pc - load_bias of the module (link-time address); 0 without a module */
  int32_t module_index;   /* into the snapshot's module list, or the address space generation's
                             (sprov_unwind_buf.generation, sprov_address_space_module); -1 when none */
  int32_t method;         /* sprov_method */
  uint32_t flags;         /* SPROV_FRAME_* (stackprov.h) */
  uint32_t reserved;      /* 0 */
};

/* Where a walk writes. Set sz = sizeof(struct sprov_unwind_buf), give `frames`
 * (with frame_sz = sizeof(struct sprov_raw_frame)) and/or `pcs` with room for
 * `capacity` entries each. The walk stops after `capacity` frames (or the
 * unwinder's max_frames, whichever is smaller) with SPROV_STOP_MAX_FRAMES. */
struct sprov_unwind_buf {
  size_t sz;
  struct sprov_raw_frame* frames; /* NULL: not wanted */
  uint64_t* pcs;                  /* NULL: not wanted; pcs[i] == frames[i].pc */
  uint32_t capacity;              /* entries in frames and pcs */
  uint32_t frame_sz;              /* sizeof(struct sprov_raw_frame) as the caller knows it (>= 40) */
  /* Filled by the walk: */
  uint32_t count;                 /* frames written */
  int32_t stop_reason;            /* sprov_stop_reason */
  uint64_t generation;            /* the address space generation the walk used; 0 for a snapshot */
  uint32_t repaired;              /* return addresses taken from shadow-stack records (trampolines) */
  uint32_t reserved;
};

/* Unwinds a snapshot like sprov_unwinder_unwind, into `buf` (no sprov_stack).
 * module_index refers to the snapshot's module list. Errors: SPROV_ERR_INVALID_ARG
 * (NULL, capacity 0, frame_sz below 40 while frames is given, neither frames
 * nor pcs), SPROV_ERR_UNSUPPORTED (architecture). Not async-signal-safe (see above). */
SPROV_API int sprov_unwinder_unwind_into(sprov_unwinder* uw, const sprov_snapshot* snap, struct sprov_unwind_buf* buf);

/* ----------------------------------------------------------- address space */

/* The module table of one process: its executable file mappings (and the
 * vDSO) resolved to loaded modules through the context's module cache, plus the
 * ranges of `[uprobes]` mappings (return-address trampolines). Built from
 * /proc/PID/maps or from perf MMAP/MMAP2 records, updated incrementally.
 *
 * Generations: every update that changes the table publishes a new immutable
 * generation; numbers only grow (0: the empty table of a new address space, 1:
 * the first table published, e.g. the /proc/PID/maps read at creation). Readers (the unwind entry
 * points) never block and never wait for a writer: a walk pins the current
 * generation for its duration with one atomic increment on that generation's
 * slot and releases it with another. Updates are serialized among themselves
 * by a mutex (they never run in signal handlers); an update frees a previous
 * generation only once every reader that pinned it has released it (a fixed
 * ring of 8 slots with enter/exit counters, doc/fast-path.md "Generations").
 * If all 8 slots hold generations still pinned, an update waits for a
 * reader to leave, up to 2 s, then fails with -EBUSY.
 *
 * Thread safety: unwinding through an address space is allowed from any thread
 * and from signal handlers while other threads update it; updates may come
 * from any thread (serialized). sprov_address_space_free must not run while a
 * walk or an update uses the address space. */
typedef struct sprov_address_space sprov_address_space;

enum sprov_address_space_flags {
  SPROV_AS_EMPTY = 1u << 0,           /* do not read /proc/PID/maps: start with no mappings (perf records) */
  SPROV_AS_LOAD_DEBUG_FRAME = 1u << 1, /* load every module's separate debug file (.debug_frame) when the
                                          module enters the table, so that no walk loads it later */
};

struct sprov_address_space_opts {
  size_t sz;
  int64_t pid;       /* the process; 0: the calling process. Names /proc/PID/maps and /proc/PID/root */
  uint32_t flags;    /* sprov_address_space_flags */
  int32_t arch;      /* sprov_arch of the process; 0: this host's */
  int32_t endian;    /* sprov_endian (mips32); ignored when arch is 0 */
  uint32_t reserved; /* must be 0 */
  const char* root;  /* module files are opened as root + path. NULL: "/proc/PID/root" for another
                        live process, else the context's sysroot ("" = as is) */
};
#define sprov_address_space_opts__last_field root

/* Creates an address space; unless SPROV_AS_EMPTY, reads /proc/PID/maps and
 * publishes generation 1 (SPROV_AS_EMPTY: generation 0, no modules). Errors:
 * -ESRCH/-EACCES reading the maps, SPROV_ERR_INVALID_ARG, SPROV_ERR_UNSUPPORTED
 * (an architecture this build does not unwind). */
SPROV_API int sprov_address_space_new(sprov_context* ctx, const struct sprov_address_space_opts* opts,
                                      sprov_address_space** out);
/* Frees every generation. No walk or update may be using it. Accepts NULL. */
SPROV_API void sprov_address_space_free(sprov_address_space* as);

/* Re-reads /proc/PID/maps and replaces the mappings with it; publishes a new
 * generation only when the module table changed. */
SPROV_API int sprov_address_space_refresh(sprov_address_space* as);
/* Replaces the mappings with a /proc/PID/maps listing (exec semantics). */
SPROV_API int sprov_address_space_load_maps(sprov_address_space* as, const char* maps_text);

/* One mapping, as mmap created it. */
struct sprov_mapping {
  size_t sz;
  uint64_t start;
  uint64_t end;
  uint64_t file_offset;
  const char* path;        /* "/path", "[vdso]", "[uprobes]"; "" or NULL for anonymous memory */
  const uint8_t* build_id; /* as perf MMAP2 records it; NULL: read from the file */
  uint32_t build_id_len;
  uint32_t prot;           /* PROT_* bits; mappings without PROT_EXEC only end the code they cover */
};
#define sprov_mapping__last_field prot

/* mmap semantics: the new mapping replaces what it overlaps. */
SPROV_API int sprov_address_space_add_mapping(sprov_address_space* as, const struct sprov_mapping* m);
/* munmap semantics: [start, end) holds no module afterwards. */
SPROV_API int sprov_address_space_remove_range(sprov_address_space* as, uint64_t start, uint64_t end);
/* exec: the process has a new address space; drops every mapping. */
SPROV_API int sprov_address_space_exec(sprov_address_space* as);
/* Applies one perf record as the kernel writes it (perf_event_header first,
 * `len` = header.size; perf.data and mmap ring buffers share the layout):
 * MMAP and MMAP2 (with or without build-ids) add a mapping, COMM with
 * PERF_RECORD_MISC_COMM_EXEC resets; records of other pids and other types are
 * ignored (returns 0). Decoding is perf.h's (lib/perf/perf_data). Errors:
 * SPROV_ERR_TRUNCATED / SPROV_ERR_BAD_FORMAT naming the field. */
SPROV_API int sprov_address_space_perf_record(sprov_address_space* as, const void* rec, size_t len);
/* Applies every MMAP/MMAP2/COMM(exec) record of the address space's pid in a
 * perf.data file, in perf script's order (by time), and publishes once.
 * Errors: those of sprov_profile_open for the file. */
SPROV_API int sprov_address_space_load_perf_data(sprov_address_space* as, const char* path);

/* The current generation number. Async-signal-safe. */
SPROV_API uint64_t sprov_address_space_generation(const sprov_address_space* as);
/* Modules of the current generation, sorted by start. Strings are owned by
 * the address space and valid until the next update: call these from the
 * thread that updates it (or while no update runs). */
SPROV_API size_t sprov_address_space_module_count(const sprov_address_space* as);
SPROV_API int sprov_address_space_module(const sprov_address_space* as, size_t index, struct sprov_module_info* out);
/* Findings (unreadable module files, build-id mismatches), one per line; "" when none.
 * Valid until the next update. */
SPROV_API const char* sprov_address_space_warnings(const sprov_address_space* as);

/* ----------------------------------------------------------- raw unwinding */

/* Layout of sprov_raw_input.regs. */
enum sprov_regs_format {
  /* uint64_t values indexed by DWARF register number of the architecture
     (x86_64: 0..16, rip = 16; arm64: x0..x30, sp = 31, pc = 32; mips32: 0..31, pc = 37);
     regs_mask: bit i set = value i valid (0: every value given is valid). */
  SPROV_REGS_DWARF = 1,
  /* ptrace PTRACE_GETREGS / NT_PRSTATUS regset: x86_64 struct user_regs_struct (216 bytes),
     arm64 struct user_pt_regs (272 bytes), mips32 the o32 elf_gregset_t (45 words). */
  SPROV_REGS_PTRACE = 2,
  /* perf PERF_SAMPLE_REGS_USER: the u64 values in mask bit order, regs_mask = the event's
     sample_regs_user (x86_64: arch/x86/include/uapi/asm/perf_regs.h, AX..R15 at bits 0..23;
     arm64: arch/arm64/include/uapi/asm/perf_regs.h, X0..X29, LR, SP, PC at bits 0..32;
     mips32: arch/mips/include/uapi/asm/perf_regs.h, PC at bit 0, $1..$31 at bits 1..31). */
  SPROV_REGS_PERF = 3,
  /* The kernel's struct pt_regs as an eBPF program sees it (x86_64: 168 bytes; arm64: the
     user_pt_regs prefix, 272 bytes; mips32: o32, cp0_epc at 180). */
  SPROV_REGS_PT_REGS = 4,
  /* ucontext_t of the architecture (a signal handler's third argument). */
  SPROV_REGS_UCONTEXT = 5,
};

/* A shadow-stack record: what a uretprobe (or another return-address
 * trampoline) replaced. The entry probe records the real return address and
 * the address of the stack slot that held it (x86_64: the sp at function
 * entry; arm64/mips32, where the return address is in a register at entry: the
 * sp at entry, and the record serves the return-address slot the function saves
 * below it). */
struct sprov_shadow_entry {
  uint64_t return_address;
  uint64_t slot;
};

enum sprov_raw_flags {
  SPROV_RAW_PC_IS_RETURN_ADDRESS = 1u << 0, /* frame 0's pc is a return address (a call-site capture) */
};

/* Registers + a stack byte range (+ shadow-stack records) of one thread of the
 * address space's process. */
struct sprov_raw_input {
  size_t sz;
  int32_t regs_format;      /* sprov_regs_format */
  uint32_t flags;           /* sprov_raw_flags */
  const void* regs;
  size_t regs_len;          /* bytes at regs */
  uint64_t regs_mask;       /* SPROV_REGS_DWARF / SPROV_REGS_PERF, see above */
  uint64_t stack_addr;      /* target address of stack[0] (normally the sp) */
  const void* stack;        /* copied stack bytes; NULL with stack_len 0: no stack */
  size_t stack_len;
  /* Optional shadow stack (at most 64 records are used): a return address read
     from a stack slot (or, arm64/mips32, from the return-address register) that lies
     in a `[uprobes]` mapping of the address space is replaced by the record with the
     smallest slot >= the slot address (the register: >= the sp), each record used
     once; the frame found through it gets method SPROV_METHOD_TRAMPOLINE. */
  const struct sprov_shadow_entry* shadow;
  size_t shadow_count;
};
#define sprov_raw_input__last_field shadow_count

/* Unwinds raw registers and stack bytes of a thread of `as`'s process into
 * `buf`, without building a snapshot. Reads outside the stack range fail (the
 * walk stops with SPROV_STOP_MEMORY_UNREADABLE or takes another rung); code
 * bytes come from the module files. module_index refers to generation
 * buf->generation of `as`. No allocation, no lock on success (see the top of
 * this file). Errors: SPROV_ERR_INVALID_ARG (NULL, unknown format or flags,
 * bad buffer), SPROV_ERR_TRUNCATED (regs_len too short for the format),
 * SPROV_ERR_UNSUPPORTED (a format the architecture does not have). */
SPROV_API int sprov_unwinder_unwind_raw(sprov_unwinder* uw, const sprov_address_space* as,
                                        const struct sprov_raw_input* in, struct sprov_unwind_buf* buf);

/* ------------------------------------------------------- signal handlers */

/* Registers the stack of the thread that will call
 * sprov_unwinder_unwind_signal with `uw`: [lo, hi). lo = hi = 0: the calling
 * thread's own stack (pthread_getattr_np). Also reads this process's perf map
 * (/tmp/perf-PID.map, unless the context is offline): the JIT code it names is
 * unwound by frame pointer in the signal handler; call it again to take up
 * entries a JIT wrote since. Not async-signal-safe: call it in the thread
 * before installing or unblocking the sampling signal. */
SPROV_API int sprov_unwinder_set_stack(sprov_unwinder* uw, uint64_t lo, uint64_t hi);

/* Unwinds the interrupted context of the calling thread from its signal
 * handler: registers from `ucontext` (the handler's third argument), stack
 * memory read in place between the interrupted sp and the registered top
 * (other reads through process_vm_readv on the own process, which fails
 * instead of faulting), modules from `as`. Async-signal-safe: no allocation,
 * no lock, no stdio, no last error; only this thread's `uw` is touched (one
 * unwinder per thread). .debug_frame is used only where already loaded
 * (SPROV_AS_LOAD_DEBUG_FRAME). Frame 0 is the interrupted pc (exact, not a
 * return address). The sp must lie in the registered stack (a handler that
 * interrupted code running on a sigaltstack is refused). Needs about 6 KiB of
 * the handler's stack. Returns 0, SPROV_ERR_INVALID_ARG (NULL, bad buffer, no
 * stack registered, the sp outside it) or SPROV_ERR_UNSUPPORTED (`as` is not
 * the calling process's, created with pid 0 or getpid()). */
SPROV_API int sprov_unwinder_unwind_signal(sprov_unwinder* uw, const sprov_address_space* as, const void* ucontext,
                                           struct sprov_unwind_buf* buf);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_FAST_H */
