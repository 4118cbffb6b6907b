/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI, profiler path: perf_event sampling, perf.data import, per-sample snapshots. */
#ifndef STACKPROV_PERF_H
#define STACKPROV_PERF_H

#include "stackprov/stackprov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- profile */

/* A sampled profile: the samples of a perf.data file (`perf record` with
 * --call-graph dwarf, -g, or neither) or of a stackprov capture file
 * (`sprov_record`), with the module list of each sampled process as of each
 * sample's time. A sample with user registers and stack is turned into a
 * snapshot that sprov_unwinder_unwind walks offline (MODE_DWARF); the user
 * frames of the others are its recorded call chain or ip
 * (sprov_profile_sample_stack); kernel frames are named by
 * sprov_profile_kernel_symbol. Use one profile from one thread at a time. */
typedef struct sprov_profile sprov_profile;

enum sprov_profile_format {
  SPROV_PROFILE_PERF_DATA = 1, /* perf.data, "PERFILE2", little-endian */
  SPROV_PROFILE_CAPTURE = 2,   /* stackprov capture file, "SPROVCAP" */
};

enum sprov_profile_open_flags {
  /* A perf.data file is read once: no sample is indexed at open, sprov_profile_next hands them
     out while the file is read (see sprov_profile_next). Ignored for a capture file. */
  SPROV_PROFILE_OPEN_STREAM = 1u << 0,
};

struct sprov_profile_open_opts {
  size_t sz;
  uint32_t flags;    /* sprov_profile_open_flags */
  uint32_t reserved; /* must be 0 */
};
#define sprov_profile_open_opts__last_field reserved

/* Opens `path` (format detected from its magic) and indexes its samples.
 * perf.data: header, attributes, feature sections (build-ids, cmdline, arch),
 * MMAP/MMAP2/COMM/FORK/EXIT/LOST and SAMPLE records (ordered by time, as perf
 * script orders them). Module files are opened under the context's sysroot;
 * a build-id recorded in the file that differs from the module file's is
 * reported in sprov_profile_info.warnings. Big-endian, pipe-mode and
 * compressed (perf record -z) files are refused with SPROV_ERR_UNSUPPORTED;
 * malformed files with SPROV_ERR_BAD_FORMAT / SPROV_ERR_TRUNCATED /
 * SPROV_ERR_LIMIT and a message naming the field and offset. A file that ends
 * early (inside the data or feature sections of a perf.data, before the END
 * record of a capture file) opens: every complete record is read and
 * sprov_profile_info.truncation says what is lost. One that ends inside the
 * header or the attributes is refused (SPROV_ERR_TRUNCATED, naming the offset). */
SPROV_API int sprov_profile_open(sprov_context* ctx, const char* path, const struct sprov_profile_open_opts* opts,
                                 sprov_profile** out);
SPROV_API void sprov_profile_free(sprov_profile* prof);

/* How a profile's kernel frames get names (sprov_profile_kernel_symbol). */
enum sprov_kernel_naming {
  SPROV_KERNEL_NAMED = 1,       /* the recording's kernel build-id is the running kernel's: /proc/kallsyms */
  SPROV_KERNEL_UNCHECKED = 2,   /* the recording holds no kernel build-id: /proc/kallsyms, unchecked */
  SPROV_KERNEL_MISMATCH = 3,    /* recorded on another kernel build: left unnamed */
  SPROV_KERNEL_UNAVAILABLE = 4, /* the running kernel's build-id or /proc/kallsyms cannot be read
                                   (or shows zero addresses: kernel.kptr_restrict): left unnamed */
  SPROV_KERNEL_CACHED = 5,      /* recorded on another kernel build: named from perf's build-id cache copy of
                                   its kallsyms ($PERF_BUILDID_DIR or ~/.debug, [kernel.kallsyms]/BUILD-ID/
                                   kallsyms), as perf script names it */
};

struct sprov_profile_info {
  size_t sz;
  int32_t format;              /* sprov_profile_format */
  uint32_t sample_stack_user;  /* stack bytes requested per sample */
  uint64_t samples;
  uint64_t lost;               /* samples the kernel reported lost (LOST / LOST_SAMPLES) */
  uint64_t records;
  uint64_t module_lists;       /* distinct module lists */
  uint64_t sample_regs_user;   /* perf register mask */
  const char* cmdline;         /* recorded command line; "" when none. Owned by the profile */
  const char* warnings;        /* findings, one per line; "" when none. Owned by the profile */
  /* The sampling event (of the first attribute). */
  const char* event;           /* "cpu-clock", "task-clock", "cycles", ... ("event" when not known) */
  uint64_t frequency;          /* samples per second in frequency mode, else 0 */
  uint64_t period;             /* the fixed sample period when not in frequency mode, else 0 */
  uint32_t clock;              /* 1: cpu-clock / task-clock, periods count nanoseconds */
  int32_t kernel_naming;       /* sprov_kernel_naming */
  const char* kernel_build_id;         /* hex, as the recording holds it; "" when none */
  const char* running_kernel_build_id; /* hex, from /sys/kernel/notes; "" when unreadable */
  const char* kernel_note;     /* one line: how kernel frames are named, or why they are not.
                                  kernel_naming and kernel_note can change after the first
                                  sprov_profile_kernel_symbol call (kallsyms is read then);
                                  valid until the next call on the profile */
  /* A file that ends early (issue 36); all three are 0 / "" for a complete file. */
  uint64_t missing_bytes;      /* bytes of the perf.data data section past the end of the file;
                                  for a capture file cut before its END record the bytes its
                                  header's final counts (version 3) say are missing; UINT64_MAX:
                                  unknown (an older capture file, one written to a pipe, or a
                                  copy whose counts are from a flush before the end) */
  uint64_t partial_bytes;      /* bytes of a partial last record that were dropped */
  const char* truncation;      /* one line naming the file and the loss (bytes missing, partial
                                  record, records read; the records lost: unknown for perf.data,
                                  which does not count them; for a capture file what its header
                                  counts, exactly or "at least", else unknown); "" when the file
                                  is complete. Owned by the profile */
};
SPROV_API int sprov_profile_info(const sprov_profile* prof, struct sprov_profile_info* out);

enum sprov_profile_sample_flags {
  SPROV_PROFILE_SAMPLE_NO_USER_REGS = 1u << 0, /* no user registers/stack: snapshot is NULL */
  SPROV_PROFILE_SAMPLE_NEW_MODULES = 1u << 1,  /* the snapshot's module list changed */
  SPROV_PROFILE_SAMPLE_KERNEL_MODE = 1u << 2,  /* sampled in kernel mode: ip is a kernel address */
  SPROV_PROFILE_SAMPLE_RUNTIME = 1u << 3,      /* the recording read the thread's CPython frames with this
                                                  sample (sprov_record with SPROV_RECORD_PYTHON):
                                                  runtime_state says how; sprov_profile_interleave
                                                  merges them */
};
/* How a sample's runtime frames were read (sprov_profile_sample.runtime_state), and how
 * sprov_profile_interleave merged them. */
enum sprov_profile_runtime_state {
  SPROV_PROFILE_RUNTIME_NONE = 0,      /* none recorded (no interpreter in the process, or not asked for) */
  SPROV_PROFILE_RUNTIME_READ = 1,      /* the thread's frame chain, whole and unchanged while it was read */
  SPROV_PROFILE_RUNTIME_TORN = 2,      /* the chain changed while it was read: no frames kept */
  SPROV_PROFILE_RUNTIME_DAMAGED = 3,   /* unchanged while read but cut short (bad memory): the frames read */
  SPROV_PROFILE_RUNTIME_NO_THREAD = 4, /* the interpreter has no thread state for the thread */
  SPROV_PROFILE_RUNTIME_MISMATCH = 5,  /* sprov_profile_interleave only: the frames were read after the
                                          sample and do not fit its native stack (more evaluation-loop
                                          activations than entry frames, or, for a native stack walked
                                          to its end, another number): not merged */
};

/* Where a sample's user frames come from. */
enum sprov_profile_mode {
  SPROV_PROFILE_MODE_DWARF = 1,     /* user registers + copied stack, unwound offline by
                                       sprov_unwinder_unwind (perf record --call-graph dwarf,
                                       sprov_record) */
  SPROV_PROFILE_MODE_CALLCHAIN = 2, /* the kernel's PERF_SAMPLE_CALLCHAIN: user_ips (perf record -g,
                                       frame pointers), as perf script shows them; kernel threads */
  SPROV_PROFILE_MODE_IP = 3,        /* only the sampled ip (plain perf record) */
};

struct sprov_profile_sample {
  size_t sz;
  uint64_t time;             /* perf clock, ns */
  int64_t pid;
  int64_t tid;
  const char* comm;          /* thread name at the sample's time; owned by the profile */
  uint64_t ip;               /* the sampled pc (exact, not a return address) */
  uint64_t sp;
  uint64_t stack_size;       /* user stack bytes copied from sp upward */
  uint64_t stack_requested;  /* bytes that were asked for (copies stop there) */
  const sprov_snapshot* snapshot; /* borrowed; valid until the next sprov_profile_sample or
                                     sprov_profile_next call on this profile or sprov_profile_free */
  const uint64_t* kernel_ips;     /* kernel part of the callchain, leaf first; borrowed likewise */
  uint32_t kernel_ip_count;
  uint32_t flags;            /* sprov_profile_sample_flags */
  uint32_t module_list;      /* id of the sample's module list */
  uint32_t reserved;
  const uint64_t* user_ips;  /* user part of the callchain, leaf first: the user pc, then return
                                addresses (MODE_CALLCHAIN); borrowed like kernel_ips */
  uint32_t user_ip_count;
  int32_t mode;              /* sprov_profile_mode */
  uint64_t period;           /* PERF_SAMPLE_PERIOD (ns for clock events); 0 when not recorded */
  const sprov_snapshot* modules; /* the sample's module list (registers and memory only when
                                    snapshot is not NULL), to map user_ips and ip to modules;
                                    borrowed like snapshot */
  /* When sz covers them (issue 36). The index in `modules` of the process's program: the file
     its last recorded exec mapped first (a script's interpreter, as the kernel runs it) — unless
     that is the dynamic loader run as `ld.so PROG`, then PROG —, or, when the recording holds no
     exec (perf record -p, sprov_record of a running process), the module whose file is an
     executable (ET_EXEC, or a PIE: DF_1_PIE, or PT_INTERP without DT_SONAME), never a library or
     the dynamic loader. -1 when not known (no such module; a capture file written before). */
  int32_t main_module;
  uint32_t reserved2;        /* 0 */
  /* When sz covers them: the CPython frames recorded with the sample (SPROV_PROFILE_SAMPLE_RUNTIME). */
  int32_t runtime_state;          /* sprov_profile_runtime_state (NONE .. NO_THREAD) */
  uint32_t runtime_frame_count;   /* frames kept (READ, DAMAGED), innermost first */
};

/* Fills `out` with sample `index` (0 .. samples-1) and builds its snapshot.
 * The profile reuses one snapshot per call: its module list is replaced only
 * when the sample's list differs from the previous call's, so an unwinder
 * keeps its module table between samples of the same mapping state. */
SPROV_API int sprov_profile_sample(sprov_profile* prof, size_t index, struct sprov_profile_sample* out);

/* The next sample in time order, filled as sprov_profile_sample fills it; `*index` is its index
 * (for sprov_profile_sample_stack and sprov_profile_interleave), SIZE_MAX when no sample was handed
 * out (an error with *index set is that sample's, as sprov_profile_sample's; the next call goes
 * on with the sample after it). Returns SPROV_ERR_NOT_FOUND after
 * the last sample. On a profile opened with SPROV_PROFILE_OPEN_STREAM (a perf.data file), the
 * file is read once, in order, and its samples handed out in the same order as the index gives
 * them: records are held until perf's FINISHED_ROUND records show that no older one follows
 * (perf's ordered-events queue), at most 256 MiB of them. Only the sample handed out last can be
 * asked for by index; sprov_profile_info counts the samples, records and lost samples read so
 * far, and its module lists, warnings and truncation are complete after SPROV_ERR_NOT_FOUND.
 * When the order cannot be kept (no FINISHED_ROUND records in more than the cap, a round older
 * than records handed out, a malformed record) before the first sample was handed out, the file
 * is read with the index instead, transparently; after, SPROV_ERR_LIMIT with a message saying
 * why: open the file again without the flag and start over (the same samples, or the error the
 * index gives). On a profile opened without the flag, each indexed sample in turn. */
SPROV_API int sprov_profile_next(sprov_profile* prof, size_t* index, struct sprov_profile_sample* out);

/* The user frames of sample `index` that are not unwound, as a stack for sprov_stack_frame,
 * sprov_symbolizer_frame and sprov_symbolizer_frame_ex: MODE_CALLCHAIN: user_ips (frame 0 the
 * user pc, then return addresses, looked up at pc - 1, as perf script lists them); MODE_IP: the
 * sampled ip (no frame when it is a kernel address). Frames have method SPROV_METHOD_CALLCHAIN,
 * sp and cfa 0, the module of the sample's module list that holds the pc (module_index -1
 * outside every module); the stop reason is end_of_stack, or max_frames when more than
 * `max_frames` (0: 256) user frames were recorded. A MODE_DWARF sample is refused with
 * SPROV_ERR_INVALID_ARG (unwind its snapshot). Does not change what sprov_profile_sample
 * returned. Free with sprov_stack_free. */
SPROV_API int sprov_profile_sample_stack(sprov_profile* prof, size_t index, uint32_t max_frames, sprov_stack** out);

/* A new stack with the CPython frames recorded with sample `index` merged into `native`, that
 * sample's unwound user frames (sprov_unwinder_unwind of its snapshot), as sprov_process_interleave
 * merges a live capture's: each Python frame right before the _PyEval_EvalFrameDefault activation
 * that runs it (the recording's PYEVAL ranges of the sample's process), frames method
 * SPROV_METHOD_RUNTIME named by sprov_stack_runtime_frame (frame and code addresses 0: a recording
 * keeps neither). The frames were read from the running process right after the sample was taken
 * (doc/runtime-frames.md "Recordings"): when they cannot be that moment's — more activations than
 * entry frames, or a native walk that reached the end of the stack with another number of
 * activations — nothing is merged and `*state` is SPROV_PROFILE_RUNTIME_MISMATCH. `*state` (may be
 * NULL) is otherwise the sample's runtime_state; a sample without runtime frames gives a copy.
 * Free with sprov_stack_free. */
SPROV_API int sprov_profile_interleave(sprov_profile* prof, size_t index, const sprov_stack* native, sprov_stack** out,
                                       int32_t* state);
/* A kernel address of a sample (kernel_ips, or ip with SPROV_PROFILE_SAMPLE_KERNEL_MODE) named
 * as perf script names it: from /proc/kallsyms (kernel and loaded modules), read once, with
 * perf's choice among aliases, relocated by the recorded `_text` (KASLR). Only when the
 * recording's kernel build-id is the running kernel's (or it holds none; kernel_naming says
 * which). */
struct sprov_kernel_symbol {
  size_t sz;
  const char* name;    /* NULL when unnamed (other kernel, unreadable kallsyms, no symbol) */
  const char* module;  /* "[kernel.kallsyms]" or "[MODULE]"; NULL when unnamed. Owned by the profile */
  uint64_t start;      /* symbol start, in the recording's addresses */
  uint64_t offset;     /* address - start */
};

/* Fills `out` for `addr`; an unnamed address is not an error (name NULL). */
SPROV_API int sprov_profile_kernel_symbol(sprov_profile* prof, uint64_t addr, struct sprov_kernel_symbol* out);

/* -------------------------------------------------------------- recording */

/* sprov_record_opts.flags (doc/kernel-stacks.md). */
enum sprov_record_flags {
  /* The samples are taken by the eBPF kernel sampler (include/stackprov/kernel.h): per sample the
   * kernel stack (bpf_get_stack), the thread's user registers (bpf_task_pt_regs) and its user stack,
   * on the cpu-clock perf events at `frequency`; the perf events only track the module map. The
   * capture file's samples have the same form as perf_event's (user registers + stack, the kernel
   * call chain, CLOCK_MONOTONIC times). SPROV_ERR_UNSUPPORTED in a build without the sampler (a
   * cross or sanitizer build, no kernel BTF, no libbpf: the message says which). */
  SPROV_RECORD_KERNEL = 1u << 0,
  /* With SPROV_RECORD_KERNEL: sample at the tracepoint sched:sched_switch instead (each time a
   * thread of the target switches out: off-CPU stacks; `frequency` unused, period 0). A started
   * command (argv) is traced until its exec (PTRACE_SEIZE, PTRACE_O_TRACEEXEC) and sampled from
   * there: none of its switches before the exec are recorded (a recorder that is itself traced, or
   * kernel.yama.ptrace_scope 3, fails with that errno). */
  SPROV_RECORD_OFF_CPU = 1u << 1,
  /* Read each sampled thread's CPython 3.11 frames (doc/runtime-frames.md "Recordings") from the
   * running target right after its sample arrives (one wakeup per sample), as py-spy's
   * non-blocking mode does: the thread is not stopped, so a read whose chain changed meanwhile is
   * detected and kept as torn (no frames). Processes without an interpreter are recorded as before.
   * The capture file is then version 4. Not with SPROV_RECORD_KERNEL (SPROV_ERR_UNSUPPORTED). */
  SPROV_RECORD_PYTHON = 1u << 2,
};

struct sprov_record_opts {
  size_t sz;
  int64_t pid;               /* record this existing process (all its threads), or 0 */
  const char* const* argv;   /* or start this command (NULL-terminated); exactly one of pid/argv */
  const char* output;        /* capture file to write */
  uint32_t frequency;        /* samples per second per thread; 0: 999 */
  uint32_t stack_size;       /* user stack bytes per sample, multiple of 8, <= 65528; 0: 8192 */
  uint32_t duration_ms;      /* stop after this long; 0: when the target exits (or SIGINT) */
  uint32_t flags;            /* enum sprov_record_flags; 0: perf_event samples */
  /* Called once when sampling has started (0, 0: the command runs, the events are enabled), then
   * from the recording loop about every 250 ms with the samples recorded and lost so far (e.g. a
   * live count on a terminal); NULL: none. It must not call back into the library. */
  void (*progress)(uint64_t samples, uint64_t lost, void* arg);
  void* progress_arg;
};
#define sprov_record_opts__last_field progress_arg

struct sprov_record_result {
  size_t sz;
  uint64_t samples;
  uint64_t lost;             /* samples the kernel dropped (ring buffer full): never hidden */
  uint64_t threads;          /* threads seen */
  int32_t exit_status;       /* of the started command (wait status), -1 when none */
  uint32_t reserved;
  /* When sz covers them, with SPROV_RECORD_PYTHON: samples whose CPython frames were read whole,
   * torn (changed during the read), damaged (cut short), or of a thread without a thread state;
   * processes found running an interpreter. */
  uint64_t python_read, python_torn, python_damaged, python_no_thread, python_processes;
};

/* Samples the target with perf_event_open (cpu-clock at `frequency`,
 * PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER + PERIOD + the kernel callchain, one event per CPU and
 * thread with inherit, so threads created later are followed; MMAP2 with
 * build-ids, COMM, FORK and EXIT track the module map) and writes a capture
 * file that sprov_profile_open reads. Blocks until the duration elapsed, the
 * target exited or SIGINT arrived. The file is written under a temp name
 * beside `output` and renamed to it on success: a failed recording leaves
 * no file (an existing `output` is kept). It records the running kernel's
 * build-id and `_text` so that kernel frames are named only on that kernel.
 * A module whose file at its path is not the file mapped (replaced or deleted
 * since) is described by the mapped one (/proc/PID/map_files, or its build-id
 * read from the target's memory); the findings go to the context's log
 * (SPROV_LOG_WARN).
 * Errors: -EACCES/-EPERM (with a perf_event_paranoid hint), -ESRCH, a
 * command that cannot be started (its execvp errno, e.g. -ENOENT),
 * SPROV_ERR_INVALID_ARG (incl. an output that is a directory, a frequency
 * above kernel.perf_event_max_sample_rate), SPROV_ERR_IO. */
SPROV_API int sprov_record(sprov_context* ctx, const struct sprov_record_opts* opts, struct sprov_record_result* out);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_PERF_H */
