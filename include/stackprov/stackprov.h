/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI: capture, unwind and symbolize native call stacks. */
#ifndef STACKPROV_STACKPROV_H
#define STACKPROV_STACKPROV_H

#include <stddef.h>
#include <stdint.h>

#include "stackprov/errors.h"
#include "stackprov/bundle.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SPROV_API __declspec(dllexport)
#else
#define SPROV_API __attribute__((visibility("default")))
#endif

/* ----------------------------------------------------------------------------
 * Conventions
 *
 * - Functions return 0 on success, a negative errno for OS failures, or a
 *   negative SPROV_ERR_* code (see errors.h). On failure a thread-local last
 *   error is set; it persists until the next failing call on that thread
 *   (it is not cleared by successful calls or by reading it).
 * - Handles are opaque. Every *_new has a matching *_free that accepts NULL.
 * - Option structs start with `size_t sz`. Initialise them with SPROV_OPTS so
 *   that sz is set and unnamed fields are zero. A library that is newer than
 *   the caller reads only the first sz bytes; a library that is older rejects a
 *   struct whose bytes past its own size are non-zero (SPROV_ERR_OPTS_TAIL).
 * - Output structs also start with `size_t sz`: set it to sizeof(the struct)
 *   before the call; the library fills at most sz bytes.
 * - Thread safety: a sprov_context is thread-safe. A sprov_unwinder and a
 *   sprov_symbolizer are used by one thread at a time (make one per thread).
 *   Snapshots and stacks are immutable once built and may be shared.
 * ------------------------------------------------------------------------- */

#define SPROV_VERSION_MAJOR 0
#define SPROV_VERSION_MINOR 1
#define SPROV_VERSION_PATCH 0
#define SPROV_VERSION_STRING "0.1.0"
#define SPROV_VERSION_NUMBER \
  (SPROV_VERSION_MAJOR * 10000 + SPROV_VERSION_MINOR * 100 + SPROV_VERSION_PATCH)

/* Options structs end at their last field (no tail padding; tests/abi checks it), so the bytes
 * an older caller's sz covers are all fields it set.
 * Declare and zero-initialise an options struct with its size set:
 *   SPROV_OPTS(sprov_unwinder_opts, o, .max_frames = 64);
 * Fields not named are zero. Plain ISO C (C99/C11, no GNU extension: compiles without a
 * warning under -std=c11 -pedantic); in C++ (C++20 designated initializers: name fields in
 * declaration order) the same through a lambda that silences -Wmissing-field-initializers. */
#define SPROV_OPTS(TYPE, ...) SPROV_OPTS_I_(TYPE, __VA_ARGS__, )
#ifdef __cplusplus
#define SPROV_OPTS_I_(TYPE, NAME, ...)                                   \
  struct TYPE NAME = [&]() {                                             \
    _Pragma("GCC diagnostic push")                                       \
    _Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")   \
    struct TYPE sprov_opts_init_ = {.sz = sizeof(struct TYPE), __VA_ARGS__}; \
    _Pragma("GCC diagnostic pop")                                        \
    return sprov_opts_init_;                                             \
  }()
#else
#define SPROV_OPTS_I_(TYPE, NAME, ...) struct TYPE NAME = {.sz = sizeof(struct TYPE), __VA_ARGS__}
#endif

/* Library version as "MAJOR.MINOR.PATCH"; static storage. */
SPROV_API const char* sprov_version(void);
/* SPROV_VERSION_NUMBER of the library that is linked. */
SPROV_API uint32_t sprov_version_number(void);

/* Message for an error code (own codes, negative errno, 0). Static storage. */
SPROV_API const char* sprov_strerror(int err);
/* Code and message of this thread's last failure; 0 and "" if none yet.
 * The message names the offending value (path, address, section). Valid until
 * the next failing call on the same thread. */
SPROV_API int sprov_last_error(void);
SPROV_API const char* sprov_last_error_message(void);

/* Frees memory that the library returned to the caller (serialized buffers). */
SPROV_API void sprov_free(void* p);

/* ------------------------------------------------------------ output files */

/* The one way stackprov's clients create files (doc/hardening.md, attack 5): a unique temp
 * file beside `path` ("PATH.tmp.XXXXXX", created with O_EXCL, so a name another user planted,
 * a symlink among them, is never opened), fsync, then rename over `path` (which replaces a
 * symlink at `path` itself, never its target). `mode` is set with fchmod (0: 0644).
 * sprov_file_write writes `len` bytes of `data` in one call; a path that is a directory is
 * SPROV_ERR_INVALID_ARG naming it. */
SPROV_API int sprov_file_write(const char* path, const void* data, size_t len, unsigned mode);

/* Streaming form: create, write to sprov_output_file_fd(), then commit (fsync + rename; frees
 * the handle whatever the result). sprov_output_file_free without commit removes the temp file.
 * A handle is used by one thread at a time. */
typedef struct sprov_output_file sprov_output_file;
SPROV_API int sprov_output_file_create(const char* path, unsigned mode, sprov_output_file** out);
SPROV_API int sprov_output_file_fd(const sprov_output_file* f);
SPROV_API int sprov_output_file_commit(sprov_output_file* f);
SPROV_API void sprov_output_file_free(sprov_output_file* f);

/* ------------------------------------------------- files the library reads */

/* Module and debug files larger than this are refused (SPROV_ERR_LIMIT naming the file, its size
 * and the limit) instead of mapped, read or hashed: a target controls its own files' size (a
 * sparse 4 TiB library keeps its inode). Default 4 GiB, or $STACKPROV_MAX_FILE_SIZE (bytes) at
 * the first use; 0 restores the default. Process-wide. */
SPROV_API void sprov_set_max_file_size(uint64_t bytes);
SPROV_API uint64_t sprov_max_file_size(void);

/* How the library survives a mapped file that another user truncates (doc/hardening.md):
 * SPROV_FILE_GUARD_SIGBUS (default) maps files and installs, at the first mapping, a SIGBUS
 * handler that turns a fault in one of its mappings into zeros plus an error for the call that
 * read them, and passes every other SIGBUS to the handler installed before it (or the default
 * action); an embedder that installs its own SIGBUS handler later must chain to the previous one.
 * SPROV_FILE_GUARD_COPY installs no handler and copies each file into memory the library owns
 * (its size in memory). $STACKPROV_FILE_GUARD=copy selects it at the first use. Set it before
 * the first file is opened; process-wide. */
enum sprov_file_guard {
  SPROV_FILE_GUARD_SIGBUS = 0,
  SPROV_FILE_GUARD_COPY = 1,
};
SPROV_API int sprov_set_file_guard(int guard);

/* ------------------------------------------------------------------ enums */

enum sprov_arch {
  SPROV_ARCH_UNKNOWN = 0,
  SPROV_ARCH_X86_64 = 1,
  SPROV_ARCH_ARM64 = 2,
  SPROV_ARCH_MIPS32 = 3, /* big or little endian, see sprov_endian */
};

enum sprov_endian {
  SPROV_ENDIAN_LITTLE = 0,
  SPROV_ENDIAN_BIG = 1,
};

/* How a frame was found. */
enum sprov_method {
  SPROV_METHOD_NONE = 0,
  SPROV_METHOD_CONTEXT = 1,          /* frame 0: the captured registers */
  SPROV_METHOD_CFI_EH_FRAME = 2,     /* DWARF CFI from .eh_frame */
  SPROV_METHOD_CFI_DEBUG_FRAME = 3,  /* DWARF CFI from .debug_frame */
  SPROV_METHOD_FRAME_POINTER = 4,    /* frame-pointer chain */
  SPROV_METHOD_SCAN = 5,             /* stack scan (opt-in, least trusted) */
  SPROV_METHOD_SIGNAL = 6,           /* registers restored from a signal frame */
  SPROV_METHOD_CFI_PDATA = 7,        /* PE .pdata/.xdata (reserved) */
  SPROV_METHOD_COMPACT_UNWIND = 8,   /* Mach-O __unwind_info (doc/macos.md) */
  SPROV_METHOD_TRAMPOLINE = 9,       /* the return address read was a trampoline's (a uretprobe's
                                        `[uprobes]` page); the real one came from a shadow-stack
                                        record (sprov_raw_input.shadow, stackprov/fast.h) */
  SPROV_METHOD_PROLOGUE = 10,        /* prologue analysis (mips32) */
  SPROV_METHOD_BAD_PC_RETURN = 11,   /* caller of a frame whose pc is 0 or in no module (a call
                                        through a bad pointer): the return address the call left,
                                        at [sp] (x86_64), in lr (arm64) or ra (mips32) */
  SPROV_METHOD_CFI_BUNDLE = 12,      /* DWARF CFI compiled into a symbol bundle's unwind rows
                                        (the module's file was not read: SPROV_CTX_OFFLINE, or
                                        the file is missing and a bundle store is configured) */
  SPROV_METHOD_CALLCHAIN = 13,       /* taken from a perf sample's PERF_SAMPLE_CALLCHAIN (the kernel's
                                        frame-pointer walk, perf record -g) or its ip alone, not
                                        unwound by stackprov (sprov_profile_sample_stack) */
  SPROV_METHOD_RUNTIME = 14,         /* a language runtime's own frame: CPython 3.11 (a
                                        _PyInterpreterFrame read from the target's memory, not
                                        unwound: pc 0, no module, sp of the native frame that runs
                                        it; sprov_stack_runtime_frame names it), or a Go function's
                                        caller found by its pclntab SP delta (pcsp) where there is no
                                        CFI (doc/runtime-frames.md) */
  SPROV_METHOD_UNWIND_TABLE = 15,    /* an unwind table of a kind an embedder or a test registered
                                        (unwind/unwind_source.hpp), not one of the kinds above */
  SPROV_METHOD_TAIL_CALL = 16,       /* inferred, not on the stack: a function that tail-called (jumped
                                        to) the frame below it, recovered as gdb does from DWARF
                                        call-site information (DW_TAG_call_site with
                                        DW_AT_call_tail_call); flagged SPROV_FRAME_INFERRED, pc the
                                        return pc of its tail-call site (sprov_symbolizer_tail_calls) */
  SPROV_METHOD_ASYNC_BOUNDARY = 17,  /* the first frame past an async boundary (doc/async-stacks.md):
                                        registers from the saved context of a coroutine's registered
                                        resumer (sprov_async_register_stack), or, with the frame flag
                                        SPROV_FRAME_ASYNC_AWAITER, a return address an async stack
                                        frame recorded (an awaiting coroutine: sp 0, no registers) */
  SPROV_METHOD_KERNEL_STACK = 18,    /* a kernel frame read from /proc/PID/task/TID/stack before a live
                                        capture (SPROV_PROCESS_KERNEL_STACKS, sprov_process_kernel_stack,
                                        stackprov/kernel.h): a name and offset only, pc 0, domain
                                        SPROV_DOMAIN_KERNEL */
};

/* The rung of the unwinding ladder a method belongs to (doc/unwinding.md "Rungs and tables"). A
 * frame's method names its table where the rung has several (SPROV_METHOD_CFI_EH_FRAME,
 * _CFI_DEBUG_FRAME, _CFI_BUNDLE, _CFI_PDATA, _COMPACT_UNWIND, _UNWIND_TABLE are all
 * SPROV_RUNG_TABLE); a new table kind is a new method value of that rung, never a new rung. */
enum sprov_rung {
  SPROV_RUNG_NONE = 0,
  SPROV_RUNG_CONTEXT = 1,       /* the captured registers (frame 0) */
  SPROV_RUNG_TABLE = 2,         /* a module's unwind table */
  SPROV_RUNG_SIGNAL = 3,        /* a signal frame's saved registers (sigreturn trampolines) */
  SPROV_RUNG_RUNTIME = 4,       /* a language runtime's own records (Go pclntab, CPython frames) */
  SPROV_RUNG_FRAME_POINTER = 5, /* the frame-pointer chain */
  SPROV_RUNG_HEURISTIC = 6,     /* code analysis: prologue, the return address of a bad pc, scan */
  SPROV_RUNG_EXTERNAL = 7,      /* not unwound by stackprov: a perf call chain, a uretprobe's record, a
                                   context or async frame record a program registered */
  SPROV_RUNG_INFERRED = 8,      /* not on the stack: reconstructed from debug information (tail calls) */
};
SPROV_API int sprov_method_rung(int method);
SPROV_API const char* sprov_rung_name(int rung);

/* Why a walk stopped. */
enum sprov_stop_reason {
  SPROV_STOP_NONE = 0,
  SPROV_STOP_END_OF_STACK = 1,      /* CFI says the return address is undefined (or, on x86_64,
                                       "same value"), or a return address is 0 */
  SPROV_STOP_NO_UNWIND_INFO = 2,    /* no CFI and no usable fallback */
  SPROV_STOP_MEMORY_UNREADABLE = 3, /* a needed read failed (outside the snapshot) */
  SPROV_STOP_SP_NOT_ADVANCING = 4,  /* the caller's sp is not above the callee's */
  SPROV_STOP_MAX_FRAMES = 5,        /* the max_frames limit was reached */
  SPROV_STOP_BAD_CFI = 6,           /* CFI was malformed or its evaluation failed */
  SPROV_STOP_INVALID_PC = 7,        /* the unwound pc is not in any module */
  SPROV_STOP_ARCH_MISMATCH = 8,     /* a module's architecture differs from the snapshot's */
  SPROV_STOP_COROUTINE_ENTRY = 9,   /* the last frame is a coroutine's entry trampoline (x86_64:
                                       glibc's __start_context, where a makecontext function
                                       returns): the coroutine's own stack ends there */
};

/* Stable lower-case names: "cfi_eh_frame", "end_of_stack", "x86_64", ... */
SPROV_API const char* sprov_method_name(int method);
SPROV_API const char* sprov_stop_reason_name(int reason);
SPROV_API const char* sprov_arch_name(int arch);

/* ---------------------------------------------------------------- context */

typedef struct sprov_context sprov_context;

enum sprov_log_level {
  SPROV_LOG_ERROR = 0,
  SPROV_LOG_WARN = 1,
  SPROV_LOG_INFO = 2,
  SPROV_LOG_DEBUG = 3,
};

typedef void (*sprov_log_fn)(void* user, int level, const char* message);

struct sprov_context_opts {
  size_t sz;
  sprov_log_fn log_fn;          /* NULL: no logging */
  void* log_user;
  int log_level;                /* messages at or below this level are passed */
  uint32_t module_cache_capacity; /* loaded modules kept (one per build-id and file); 0: default 256 */
  const char* debug_dirs;       /* ':'-separated; NULL: "/usr/lib/debug" */
  const char* sysroot;          /* prefix for module paths; NULL: none */
  /* Symbol-bundle store directory (doc/bundles.md "Store") read by the "bundle"
   * resolver and by offline unwinding. NULL: no store; "": the default
   * ($STACKPROV_STORE, else $XDG_DATA_HOME/stackprov/store, else
   * ~/.local/share/stackprov/store). */
  const char* bundle_store;
  /* Resolver policy: comma-separated, tried in order, from "debuginfod",
   * "bundle", "dwarf", "gopclntab", "symtab", "dynsym", "demangle". NULL: the
   * Linux default "debuginfod,bundle,dwarf,gopclntab,symtab,dynsym,demangle"
   * (doc/bundles.md "Resolver policy"; gopclntab: doc/runtime-frames.md "Go").
   * An unknown name is SPROV_ERR_INVALID_ARG naming it. */
  const char* resolvers;
  uint32_t flags;               /* sprov_context_flags */
  uint32_t reserved;
};
#define sprov_context_opts__last_field reserved

enum sprov_context_flags {
  /* Offline: never open module files, debug files or the network; unwind and
   * name from the bundle store only (a module without a bundle is unnamed and
   * unwound by frame pointer / stops, with the reason). Covers opening cores
   * (module list and build-ids from the core alone; opts->exe is refused) and
   * unwinding snapshots; live captures (sprov_process_capture,
   * sprov_snapshot_capture_self) still read module files to list the modules:
   * capture with an online context, unwind the serialized snapshots offline. */
  SPROV_CTX_OFFLINE = 1u << 0,
};

/* Creates a context. Thread-safe object; free with sprov_context_free. */
SPROV_API int sprov_context_new(const struct sprov_context_opts* opts, sprov_context** out);
SPROV_API void sprov_context_free(sprov_context* ctx);

struct sprov_context_stats {
  size_t sz;
  uint64_t module_cache_hits;
  uint64_t module_cache_misses;
  uint64_t module_cache_evictions;
  uint64_t modules_loaded;
};
SPROV_API int sprov_context_stats(const sprov_context* ctx, struct sprov_context_stats* out);

/* --------------------------------------------------------------- snapshot */

/* A capture: registers of one thread, copies of memory (the stack), and the
 * module list with each module's identity. Immutable after capture or
 * deserialization, except through the sprov_snapshot_set_/add_ builders. */
typedef struct sprov_snapshot sprov_snapshot;

/* What a module's identity bytes are: a module is identified by them, never by its path or a
 * version string. The values are those of enum sprov_bundle_id_kind (symbol_bundle.h). */
enum sprov_id_kind {
  SPROV_ID_NONE = 0,          /* the module has no identity */
  SPROV_ID_ELF_BUILD_ID = 1,  /* ELF NT_GNU_BUILD_ID descriptor bytes (usually 20) */
  SPROV_ID_PDB_GUID_AGE = 2,  /* PE/PDB: the 16-byte GUID as in the RSDS record, then the age, u32 LE */
  SPROV_ID_MACHO_UUID = 3,    /* Mach-O LC_UUID, 16 bytes */
  SPROV_ID_PE_CODE_ID = 4,    /* PE without a CodeView record: TimeDateStamp then SizeOfImage, u32 LE each */
};

struct sprov_module_info {
  size_t sz;
  uint64_t start;        /* mapped range of the executable segment(s) */
  uint64_t end;
  uint64_t file_offset;  /* file offset of `start` */
  uint64_t load_bias;    /* runtime address - link-time address */
  const char* path;      /* as mapped; owned by the snapshot */
  const uint8_t* build_id; /* GNU build-id bytes; owned by the snapshot. Only an ELF build-id:
                              NULL for an identity of another kind (see id below) */
  uint32_t build_id_len;   /* 0 when the module has none */
  uint32_t flags;          /* reserved, 0 */
  /* The identity of any kind (when sz covers them). In: with id_kind != SPROV_ID_NONE, id and
   * id_len give it (build_id must then be NULL or the same ELF build-id); with SPROV_ID_NONE the
   * build_id fields do, as before. Out: always filled, owned by the snapshot. */
  int32_t id_kind;         /* enum sprov_id_kind */
  uint32_t id_len;         /* 1 to 64; 0 with SPROV_ID_NONE */
  const uint8_t* id;
};

struct sprov_capture_opts {
  size_t sz;
  uint32_t max_stack_bytes; /* stack bytes copied from sp upward; 0: 256 KiB */
  uint32_t skip_frames;     /* reserved, must be 0 */
};
#define sprov_capture_opts__last_field skip_frames

/* Captures the calling thread: its registers at the call site, its stack from
 * sp upward (bounded by max_stack_bytes and the stack mapping) and the
 * process's module list (from /proc/self/maps; build-ids read from the
 * module files). Not async-signal-safe (reads /proc and allocates). */
SPROV_API int sprov_snapshot_capture_self(sprov_context* ctx, const struct sprov_capture_opts* opts,
                                          sprov_snapshot** out);

/* Builds a snapshot by hand (any thread of any process, offline). */
SPROV_API int sprov_snapshot_new(int arch, int endian, sprov_snapshot** out);
/* Sets a register by DWARF register number of the snapshot's architecture. */
SPROV_API int sprov_snapshot_set_reg(sprov_snapshot* snap, uint32_t dwarf_reg, uint64_t value);
/* Adds a copy of target memory [addr, addr+len). Regions must not overlap. */
SPROV_API int sprov_snapshot_add_memory(sprov_snapshot* snap, uint64_t addr, const void* bytes,
                                        size_t len);
/* Adds a module. path is copied; build_id may be NULL to read it from the file. */
SPROV_API int sprov_snapshot_add_module(sprov_snapshot* snap, const struct sprov_module_info* mod);
/* Adds the executable mappings of a /proc/PID/maps listing; build-ids are read
 * from the files (under the context's sysroot, if any). */
SPROV_API int sprov_snapshot_add_maps(sprov_context* ctx, sprov_snapshot* snap, const char* maps_text);
SPROV_API void sprov_snapshot_set_ids(sprov_snapshot* snap, int64_t pid, int64_t tid);

SPROV_API void sprov_snapshot_free(sprov_snapshot* snap);

SPROV_API int sprov_snapshot_arch(const sprov_snapshot* snap);
SPROV_API int64_t sprov_snapshot_pid(const sprov_snapshot* snap);
SPROV_API int64_t sprov_snapshot_tid(const sprov_snapshot* snap);
/* Reads a captured register; SPROV_ERR_NOT_FOUND if it was not captured. */
SPROV_API int sprov_snapshot_reg(const sprov_snapshot* snap, uint32_t dwarf_reg, uint64_t* value);
/* Copies captured target memory [addr, addr+len) into buf; SPROV_ERR_MEMORY_UNREADABLE
 * when any byte is outside the snapshot's memory regions. */
SPROV_API int sprov_snapshot_read_memory(const sprov_snapshot* snap, uint64_t addr, void* buf, size_t len);
SPROV_API size_t sprov_snapshot_module_count(const sprov_snapshot* snap);
SPROV_API int sprov_snapshot_module(const sprov_snapshot* snap, size_t index,
                                    struct sprov_module_info* out);

/* Serializes to a self-describing, arch- and endian-tagged byte string; a thread of a process
 * captured with SPROV_PROCESS_RUNTIME_FRAMES carries the runtime frames read (an optional section,
 * read back by sprov_process_open_snapshot). *out is allocated by the library; release it with
 * sprov_free. */
SPROV_API int sprov_snapshot_serialize(const sprov_snapshot* snap, void** out, size_t* out_len);
/* Parses bytes from sprov_snapshot_serialize. Hostile input is rejected with
 * SPROV_ERR_SNAPSHOT and a message naming the bad field. */
SPROV_API int sprov_snapshot_deserialize(const void* bytes, size_t len, sprov_snapshot** out);

/* ---------------------------------------------------------------- process */

/* A multi-thread capture: one snapshot per thread of a live process or of an
 * ELF core file, sharing one module list. */
typedef struct sprov_process sprov_process;

struct sprov_process_opts {
  size_t sz;
  int64_t tid;              /* capture only this thread; 0: all threads */
  uint32_t max_stack_bytes; /* stack bytes copied per thread from sp upward; 0: 512 KiB */
  uint32_t flags;           /* sprov_process_capture_flags */
  const char* exe;          /* core files: path of the main program; NULL: from NT_FILE */
  /* Minidumps: directories, ':'-separated, searched for module files (DIR/NAME, then the
   * symbol-store layout DIR/NAME/<TIMESTAMP %08X><SIZEOFIMAGE %x>/NAME); NULL: none (wine's
   * drive Z: paths are still tried at the same host path). */
  const char* symbol_path;
};
#define sprov_process_opts__last_field symbol_path

/* sprov_process_opts.flags */
enum sprov_process_capture_flags {
  /* Also read the language runtimes' frames while the threads are stopped (live) or from the
   * core's memory: CPython 3.11 (doc/runtime-frames.md). A target without an interpreter is
   * not an error; an interpreter that cannot be read is a warning (sprov_process_warnings). */
  SPROV_PROCESS_RUNTIME_FRAMES = 1u << 0,
  /* Live captures: before attaching, read each thread's kernel stack and system call state from
   * /proc/PID/task/TID/{stack,syscall} (root only; doc/kernel-stacks.md "stack --kernel"); merge
   * them into a thread's stack with sprov_process_kernel_stack (stackprov/kernel.h). Refused for
   * cores, minidumps and raw state. */
  SPROV_PROCESS_KERNEL_STACKS = 1u << 1,
  /* With SPROV_PROCESS_KERNEL_STACKS: each kernel frame also gets its function's prototype from the
   * kernel's BTF, /sys/kernel/btf/vmlinux (sprov_kernel_frame.prototype). The capture fails with
   * SPROV_ERR_UNSUPPORTED in a build without libbpf, or the BTF's errno when it cannot be read. */
  SPROV_PROCESS_KERNEL_BTF = 1u << 2,
};

/* Attaches to every thread of `pid` with PTRACE_SEIZE + PTRACE_INTERRUPT,
 * reads registers (PTRACE_GETREGSET) and copies each stack (process_vm_readv,
 * falling back to /proc/PID/mem and PTRACE_PEEKDATA), reads the module list
 * (module files opened through /proc/PID/root, build-ids checked), copies the
 * vDSO from the target, and detaches from every thread before returning — also
 * on errors. Threads that appear or exit during the capture are handled and
 * reported (sprov_process_warnings), not fatal. Errors: -ESRCH (no such
 * process), -EPERM (with a ptrace_scope / CAP_SYS_PTRACE hint in the message). */
SPROV_API int sprov_process_capture(sprov_context* ctx, int64_t pid, const struct sprov_process_opts* opts,
                                    sprov_process** out);

/* Opens an ELF core file: threads from NT_PRSTATUS, memory from PT_LOAD, the
 * module list from NT_FILE (files under the context's sysroot; opts->exe for
 * the main program), the vDSO from the core's memory (NT_AUXV AT_SYSINFO_EHDR).
 * Each module's build-id is compared with the one in the core's memory where
 * present; a mismatch is reported (sprov_process_warning) with both ids. */
SPROV_API int sprov_process_open_core(sprov_context* ctx, const char* core_path,
                                      const struct sprov_process_opts* opts, sprov_process** out);

/* Opens a Windows minidump (x64; doc/windows.md "Minidumps") as a process: one snapshot per
 * thread with a context -- the thread of the exception stream first, with the exception's
 * context --, memory from MemoryList/Memory64List ([rsp, rsp + max_stack_bytes) copied per thread,
 * and what a first walk reads), modules from ModuleList with their pdb-guid-age identity: the
 * dump's CodeView record, else the image headers in the dump's memory (a full dump), else the
 * module file found on opts->symbol_path whose TimeDateStamp and SizeOfImage are the dump's
 * (sprov_process_notes says which, per module). The exception is in sprov_process_info.
 * opts->exe is refused. Hostile input: every offset, size and count is checked against the file;
 * errors SPROV_ERR_BAD_FORMAT, SPROV_ERR_TRUNCATED, SPROV_ERR_LIMIT name the stream and value;
 * SPROV_ERR_UNSUPPORTED for a dump of another architecture or without a usable thread. */
SPROV_API int sprov_process_open_minidump(sprov_context* ctx, const char* path,
                                          const struct sprov_process_opts* opts, sprov_process** out);
/* Opens raw machine state (doc/raw-state.md) as a process: `path` is one JSON document of one
 * thread's state -- arch, registers by name, memory blocks, modules by path and load address --
 * or a directory whose *.json files (in name order) are one thread each. Each module file is
 * opened to place it (its load bias, range and identity); a relative module path is relative to
 * the document's directory. A thread's name (sprov_process_thread_name) is its document's file
 * name; its tid the document's "tid", else its position from 1. opts->exe, symbol_path, flags and
 * tid must be unset. Errors name the document, the JSON path and the value (SPROV_ERR_JSON,
 * SPROV_ERR_INVALID_ARG, SPROV_ERR_BUILD_ID_MISMATCH, a module file's open error). */
SPROV_API int sprov_process_open_raw(sprov_context* ctx, const char* path, const struct sprov_process_opts* opts,
                                     sprov_process** out);
/* Opens serialized snapshots (sprov_snapshot_serialize) as a process: `path` is one snapshot file
 * or a directory whose *.snap files are one thread each; the threads are ordered by tid, as a live
 * capture's. A thread's name is its file's name. With SPROV_PROCESS_RUNTIME_FRAMES in opts->flags,
 * the runtime frames the capture read (snapshot section 5) are the process's, as if read now:
 * sprov_process_runtime, _runtime_frame_count/_frame, _runtime_thread_name and
 * sprov_process_interleave answer as they did for the captured process. opts->tid selects one
 * thread (SPROV_ERR_NOT_FOUND when no snapshot has it); exe and symbol_path must be unset. Errors
 * name the file (SPROV_ERR_SNAPSHOT with the field and offset, or the file's open error). */
SPROV_API int sprov_process_open_snapshot(sprov_context* ctx, const char* path, const struct sprov_process_opts* opts,
                                          sprov_process** out);
/* What a capture learned besides warnings, one line each: for a minidump, per module where its
 * identity and file came from ("module NAME: identity KEY from the dump's CodeView record|from the
 * image headers in the dump's memory (...)|from the module file (...); file PATH", or "module NAME:
 * no identity (...); no module file"; KEY is the symbol-server key). "" when none; owned by proc. */
SPROV_API const char* sprov_process_notes(const sprov_process* proc);

SPROV_API void sprov_process_free(sprov_process* proc);
SPROV_API int64_t sprov_process_pid(const sprov_process* proc);
/* Threads of a live capture are in ascending tid order; threads of a core are
 * in NT_PRSTATUS order, the thread that received the fatal signal first (gdb's
 * current thread: the first NT_PRSTATUS with a pr_cursig). */
SPROV_API size_t sprov_process_thread_count(const sprov_process* proc);
/* Borrowed: owned by proc, valid until sprov_process_free. */
SPROV_API const sprov_snapshot* sprov_process_thread(const sprov_process* proc, size_t index);
/* Non-fatal findings of the capture, one per line ("thread 123 exited during capture",
 * "module /lib/x.so: build-id mismatch: core has …, file has …"); "" when none. */
SPROV_API const char* sprov_process_warnings(const sprov_process* proc);

/* What a capture knows besides the threads' registers: names and, for a core,
 * the signal that terminated the process and where it hit (what gdb prints
 * first: "Core was generated by `./app'.", "Program terminated with signal
 * SIGSEGV, Segmentation fault."). Filled by sprov_process_get_info. Strings
 * are owned by the process and never NULL ("" when unknown). */
struct sprov_process_info {
  size_t sz;
  const char* program;      /* core: NT_PRPSINFO pr_fname (the main thread's comm); live: /proc/PID/comm */
  const char* command_line; /* core: NT_PRPSINFO pr_psargs (at most 80 bytes, one trailing space dropped,
                               as gdb prints it); live: "" */
  int64_t signal_tid;       /* the thread that received `signal`: thread index 0; 0 when no signal */
  int32_t signal;           /* core: pr_cursig of the first NT_PRSTATUS that has one (bfd's rule), a
                               signal number of the core's architecture; 0 for live captures */
  int32_t signal_code;      /* si_code of that thread's NT_SIGINFO (when has_siginfo) */
  uint64_t fault_address;   /* si_addr of that NT_SIGINFO (when has_fault_address) */
  uint32_t has_siginfo;     /* the signalled thread has an NT_SIGINFO note */
  uint32_t has_fault_address; /* SIGILL, SIGFPE, SIGSEGV, SIGBUS or SIGTRAP raised for an instruction
                                 (si_code > 0 and not SI_KERNEL): si_addr is the faulting address */
  const char* signal_name;        /* "SIGSEGV" (real-time: "SIG34"); "" without a signal */
  const char* signal_description; /* gdb's text: "Segmentation fault"; "" without a signal */
  const char* signal_code_name;   /* "SEGV_MAPERR", "SI_TKILL", ...; "" when unknown or no NT_SIGINFO */
  uint32_t flags;           /* sprov_process_flags: findings that leave the capture incomplete */
  uint32_t reserved;
  /* Minidumps (when sz covers them): the exception stream. */
  uint32_t exception_code;    /* ExceptionCode, e.g. 0xC0000005 (when has_exception) */
  uint32_t has_exception;     /* the dump has an exception stream */
  uint64_t exception_address; /* ExceptionAddress */
  int64_t exception_tid;      /* the thread it was raised in: thread index 0 when it has a context */
  const char* exception_name; /* "EXCEPTION_ACCESS_VIOLATION"; "" when unknown or none */
};

enum sprov_process_flags {
  SPROV_PROCESS_CORE_TRUNCATED = 1u << 0,    /* the core file is shorter than its headers say */
  SPROV_PROCESS_BUILD_ID_MISMATCH = 1u << 1, /* a module file's build-id differs from the core's copy */
};

/* Fills *out (set out->sz first). Errors: SPROV_ERR_INVALID_ARG (NULL). */
SPROV_API int sprov_process_get_info(const sprov_process* proc, struct sprov_process_info* out);
/* The name (comm) of thread `index`. Live: /proc/PID/task/TID/comm, read while
 * the thread was stopped. Core: the process name (NT_PRPSINFO pr_fname) for the
 * main thread (tid == pid), "" for the others: a Linux core holds no other
 * thread names (gdb 13 shows none for any core thread). Owned by proc; NULL
 * for a bad index. */
SPROV_API const char* sprov_process_thread_name(const sprov_process* proc, size_t index);

/* --------------------------------------------------------------- unwinder */

typedef struct sprov_unwinder sprov_unwinder;
typedef struct sprov_stack sprov_stack;

enum sprov_unwind_flags {
  SPROV_UNWIND_NO_FRAME_POINTER = 1u << 0, /* never fall back to the fp chain */
  SPROV_UNWIND_ALLOW_SCAN = 1u << 1,       /* allow stack scanning as last resort */
  SPROV_UNWIND_NO_DEBUG_FRAME = 1u << 2,   /* do not use .debug_frame */
  SPROV_UNWIND_KEEP_REGISTERS = 1u << 3,   /* keep each frame's registers (sprov_stack_frame_registers) */
};

struct sprov_unwinder_opts {
  size_t sz;
  uint32_t max_frames;      /* 0: 256; at most 65536 */
  uint32_t flags;           /* sprov_unwind_flags */
  uint32_t scan_words;      /* words examined per scan step; 0: 64 */
  uint32_t reserved;        /* must be 0 */
};
#define sprov_unwinder_opts__last_field reserved

/* An unwinder holds a rule cache; use it from one thread at a time. */
SPROV_API int sprov_unwinder_new(sprov_context* ctx, const struct sprov_unwinder_opts* opts,
                                 sprov_unwinder** out);
SPROV_API void sprov_unwinder_free(sprov_unwinder* uw);

/* Unwinds a snapshot into a stack. A walk that stops early is not an error:
 * the reason is in sprov_stack_stop_reason. */
SPROV_API int sprov_unwinder_unwind(sprov_unwinder* uw, const sprov_snapshot* snap,
                                    sprov_stack** out);

struct sprov_unwinder_stats {
  size_t sz;
  uint64_t rule_cache_hits;
  uint64_t rule_cache_misses;
  uint64_t frames;
  uint64_t walks;
};
SPROV_API int sprov_unwinder_stats(const sprov_unwinder* uw, struct sprov_unwinder_stats* out);

struct sprov_frame {
  size_t sz;
  uint64_t pc;            /* the unwound pc: a return address for caller frames */
  uint64_t sp;
  uint64_t cfa;           /* 0 when unknown (frame 0 before a step, scan) */
  uint64_t module_offset; /* pc - load_bias: the link-time address in the module file */
  int32_t method;         /* sprov_method */
  int32_t module_index;   /* into the snapshot's module list, -1 when none */
  const char* module_path;   /* owned by the stack; NULL when none */
  const uint8_t* build_id;   /* owned by the stack; only an ELF build-id (module_id: any kind) */
  uint32_t build_id_len;
  uint32_t flags;            /* SPROV_FRAME_* */
  /* The module's identity of any kind (when sz covers them; as sprov_module_info.id). */
  int32_t id_kind;           /* enum sprov_id_kind; SPROV_ID_NONE without a module or identity */
  uint32_t module_id_len;
  const uint8_t* module_id;  /* owned by the stack; NULL when none */
  int32_t domain;            /* enum sprov_domain: whose frame this is (when sz covers it) */
  uint32_t reserved;         /* 0 */
};

/* sprov_frame.domain: the segment of a stack a frame belongs to. Native user code today; a
 * runtime's own frame (a CPython function, SPROV_METHOD_RUNTIME from the interpreter's records);
 * the kernel's frames and async (coroutine) continuations are to come (issue "Segments"). */
enum sprov_domain {
  SPROV_DOMAIN_USER = 0,
  SPROV_DOMAIN_KERNEL = 1,
  SPROV_DOMAIN_RUNTIME = 2,
  SPROV_DOMAIN_ASYNC = 3,
};

/* sprov_frame.flags */
enum sprov_frame_flags {
  /* The step out of this frame found a bundle row that needs the full CFI interpreter
     (expressions, register rules: bundles do not carry them). The caller, if any, was found
     by a later rung (signal trampoline, frame pointer, ...); if none worked the walk stopped
     here with SPROV_STOP_NO_UNWIND_INFO. */
  SPROV_FRAME_CFI_NOT_IN_BUNDLE = 1u << 0,
  /* pc is a return address (every caller frame except one restored from a signal frame):
     symbolize and look up unwind info at pc - 1. Clear for frame 0 of an interrupted
     context and for frames restored from a signal frame (exact pcs). */
  SPROV_FRAME_RETURN_ADDRESS = 1u << 1,
  /* The pc lies in JIT code a perf map (/tmp/perf-PID.map) names, outside every module: the
     caller was found by frame pointer (doc/runtime-frames.md "JIT code"). */
  SPROV_FRAME_JIT = 1u << 2,
  /* The frame is not on the stack: no unwinding step found it, debug information says it was there
     (SPROV_METHOD_TAIL_CALL). Its sp is the sp of the frame below it, cfa 0; comparisons with
     unwinders that show only real frames (eu-stack, perf) leave it out. */
  SPROV_FRAME_INFERRED = 1u << 3,
  /* SPROV_METHOD_ASYNC_BOUNDARY: the frame is an awaiter taken from an async stack frame record
     (folly's AsyncStackFrame or struct sprov_async_frame), not from the physical stack; its pc is
     the return address the record holds (doc/async-stacks.md). Printed "async_boundary(awaiter)". */
  SPROV_FRAME_ASYNC_AWAITER = 1u << 4,
};

SPROV_API size_t sprov_stack_frame_count(const sprov_stack* stack);
SPROV_API int sprov_stack_frame(const sprov_stack* stack, size_t index, struct sprov_frame* out);
SPROV_API int sprov_stack_stop_reason(const sprov_stack* stack);
/* The registers of frame `index` as the walk knew them, in the architecture's DWARF numbering
 * (sprov_register_name): values[r] for r < count, bit r of *known set when register r is known
 * (0 in values otherwise). Frame 0: the captured registers; a caller frame: its pc, sp and the
 * callee-saved registers (restored by the unwind rule, or left unchanged by it: x86_64 rbx, rbp,
 * r12-r15; arm64 x19-x30; mips32 s0-s7, fp, ra); a frame restored from a signal frame: every
 * register it holds; an inferred frame (SPROV_FRAME_INFERRED): none. SPROV_ERR_NOT_FOUND when the
 * unwinder did not keep them (SPROV_UNWIND_KEEP_REGISTERS). */
SPROV_API int sprov_stack_frame_registers(const sprov_stack* stack, size_t index, uint64_t* values, size_t count,
                                          uint64_t* known);
/* The name of DWARF register `reg` of `arch` (enum sprov_arch): "rip", "x29", "sp", ...; NULL when
 * the architecture has no such register. */
SPROV_API const char* sprov_register_name(int arch, int reg);
SPROV_API void sprov_stack_free(sprov_stack* stack);

/* ------------------------------------------------------- async boundaries */

/* Where a ucontext coroutine continues when its function returns (doc/async-stacks.md): for each
 * frame of a stack that is a coroutine's entry trampoline (SPROV_STOP_COROUTINE_ENTRY, or a
 * boundary the walk crossed into a registered resumer), glibc's uc_link as makecontext left it on
 * the coroutine's stack. An annotation, never a frame: uc_link is where the coroutine goes on
 * return, not who called it. x86_64 only (glibc keeps the slot's address in rbx). */
struct sprov_coroutine_link {
  size_t sz;
  uint64_t frame;          /* index of the entry trampoline's frame in the stack */
  uint64_t slot;           /* where uc_link was read (the coroutine's stack) */
  uint64_t context;        /* uc_link: the ucontext_t resumed when the function returns; 0 (NULL):
                              the thread exits then */
  uint64_t pc;             /* that context's saved pc (x86_64 gregs[REG_RIP]) when has_regs: where
                              swapcontext returns, a return address (symbolize at pc - 1) */
  uint64_t sp;             /* its saved sp (gregs[REG_RSP]) when has_regs */
  uint32_t has_regs;       /* the context's registers were readable (live captures copy them; an
                              offline snapshot only holds what its capture copied) */
  int32_t module_index;    /* the module holding pc - 1, -1 when none */
  uint64_t module_offset;  /* pc - that module's load bias */
  const char* module_path; /* owned by the stack; NULL when none */
};
/* The number of coroutine links of a stack (0 for NULL). */
SPROV_API size_t sprov_stack_coroutine_link_count(const sprov_stack* stack);
/* Link `index` (0 = the innermost entry). Errors: SPROV_ERR_INVALID_ARG (NULL, index out of range). */
SPROV_API int sprov_stack_coroutine_link(const sprov_stack* stack, size_t index, struct sprov_coroutine_link* out);

/* Registered coroutine stacks (in-process, ucontext; doc/async-stacks.md "Registered resumers").
 * A program that runs coroutines on stacks of its own (makecontext + swapcontext) registers each
 * stack [lo, lo + size) with the ucontext_t its resumer saved (the first argument of the
 * swapcontext that switched into the coroutine). A walk that reaches the coroutine's entry
 * (SPROV_STOP_COROUTINE_ENTRY) with the entry's frame inside a registered stack goes on from the
 * registers saved in `resumer` (x86_64: rip, rsp, rbp, rbx, r12-r15; read when the walk reaches
 * it): the next frame has method SPROV_METHOD_ASYNC_BOUNDARY and every frame past it domain
 * SPROV_DOMAIN_ASYNC. sprov_snapshot_capture_self copies the registrations into the snapshot (they
 * are serialized with it) together with the memory the walk reads past the boundary, so the
 * snapshot unwinds the same later or elsewhere; a capture of another process or of a core sees
 * none. The resumer context must stay valid while registered (re-register when it moves).
 * Process-wide, thread-safe (a mutex), bounded: at most SPROV_ASYNC_MAX_STACKS stacks
 * (SPROV_ERR_LIMIT past that). Registering `lo` again replaces its entry. Not async-signal-safe. */
#define SPROV_ASYNC_MAX_STACKS 256
/* Errors: SPROV_ERR_INVALID_ARG (NULL lo or resumer, size 0, a range that wraps or overlaps
 * another registered stack), SPROV_ERR_LIMIT. */
SPROV_API int sprov_async_register_stack(const void* lo, size_t size, const void* resumer_ucontext);
/* Removes the stack registered at `lo`; SPROV_ERR_NOT_FOUND when none is. */
SPROV_API int sprov_async_unregister_stack(const void* lo);

/* Async stack records (C++20 coroutines, callbacks; doc/async-stacks.md "Async stack frames"),
 * the shape of folly's published ABI (folly/tracing/AsyncStack.h: AsyncStackRoot, AsyncStackFrame;
 * the offsets are the ones of folly's public header, checked by static assertions in the library).
 * A thread's current root describes the event loop (or callback site) running async work:
 * top_frame is the async frame running now, each frame's parent the frame awaiting it, and
 * stack_frame_ptr the frame pointer (__builtin_frame_address(0)) of the physical frame that
 * installed the root. A walk inserts the chain from top_frame, one frame per record (its
 * return_address; SPROV_METHOD_ASYNC_BOUNDARY with SPROV_FRAME_ASYNC_AWAITER, domain ASYNC), just
 * before the physical frame whose stack range holds stack_frame_ptr, then does the same for
 * next_root further out. A root whose frame the walk did not reach adds nothing. */
struct sprov_async_frame {
  struct sprov_async_frame* parent; /* the frame awaiting this one; NULL at the end of the chain */
  void* return_address;             /* where the parent resumes (e.g. __builtin_return_address(0)
                                       of the noinline function that suspended it); NULL: skipped */
  struct sprov_async_root* root;    /* folly's stackRoot; not read by stackprov */
};
struct sprov_async_root {
  struct sprov_async_frame* top_frame; /* folly: std::atomic<AsyncStackFrame*> */
  struct sprov_async_root* next_root;
  void* stack_frame_ptr;
  void* return_address;                /* not read by stackprov */
};
/* How a thread's current root is found at capture (sprov_snapshot_capture_self):
 *  - folly: the pthread key in the global `folly_async_stack_root_tls_key` (found with dlsym, so
 *    the symbol must be in the dynamic symbol table: libfolly.so exports it; a static link needs
 *    -rdynamic or -Wl,--export-dynamic-symbol=folly_async_stack_root_tls_key); its value points at
 *    folly's AsyncStackRootHolder, whose first member is the current root pointer. Used when the
 *    thread has no slot of its own. Not verified against a real folly build (Debian has none);
 *  - a slot: the calling thread hands stackprov the address of the variable where it keeps its
 *    current struct sprov_async_root* (a thread_local of the program): read at each capture of
 *    this thread. NULL unregisters. Thread-local: registers for the calling thread only. */
SPROV_API int sprov_async_set_thread_root_slot(struct sprov_async_root* const* slot);

/* ------------------------------------------------------- runtime frames */

/* A language runtime's frame, read from the target's memory (SPROV_METHOD_RUNTIME).
 * Strings are owned by the process or stack it came from and never NULL. */
struct sprov_runtime_frame {
  size_t sz;
  const char* runtime;       /* "python" */
  const char* function;      /* CPython: the code object's co_name */
  const char* qualname;      /* CPython: co_qualname ("Outer.method.<locals>.inner") */
  const char* file;          /* CPython: co_filename */
  uint32_t line;             /* from co_linetable at the frame's last instruction; 0 unknown */
  uint32_t flags;            /* SPROV_RUNTIME_FRAME_* */
  uint64_t frame_address;    /* the _PyInterpreterFrame in the target */
  uint64_t code_address;     /* its PyCodeObject */
  int64_t native_index;      /* in an interleaved stack: the native frame (a _PyEval_EvalFrameDefault
                                activation) that runs it; -1 when none was found */
};

enum sprov_runtime_frame_flags {
  SPROV_RUNTIME_FRAME_ENTRY = 1u << 0,     /* the first frame its eval activation ran (is_entry) */
  SPROV_RUNTIME_FRAME_GENERATOR = 1u << 1, /* owned by a generator/coroutine */
};

/* How sprov_process_interleave merges frames. */
enum sprov_runtime_mode {
  SPROV_RUNTIME_INTERLEAVE = 0, /* native frames, each eval activation preceded by the runtime
                                   frames it runs (innermost first), as py-spy dump --native */
  SPROV_RUNTIME_ONLY = 1,       /* the runtime frames alone, innermost first */
};

/* Runtime frames of thread `index` as captured (SPROV_PROCESS_RUNTIME_FRAMES), innermost first,
 * and a one-line description of the interpreter that was read ("" when none). */
SPROV_API size_t sprov_process_runtime_frame_count(const sprov_process* proc, size_t index);
SPROV_API int sprov_process_runtime_frame(const sprov_process* proc, size_t index, size_t frame,
                                          struct sprov_runtime_frame* out);
SPROV_API const char* sprov_process_runtime(const sprov_process* proc);
/* The runtime's name of thread `index` (CPython: the threading.Thread's name, e.g. "MainThread",
 * "worker-1", read from threading._active; CPython 3.11 does not give it to the OS thread, whose
 * name sprov_process_thread_name gives), "" when none was read. Owned by proc. */
SPROV_API const char* sprov_process_runtime_thread_name(const sprov_process* proc, size_t index);

/* A new stack with the runtime frames of thread `index` of `proc` merged into `native` (that
 * thread's unwound stack): each CPython frame goes right before the _PyEval_EvalFrameDefault
 * activation that runs it, counting activations outward and closing each at an entry frame;
 * frames no activation took (the native walk stopped early) follow the native frames with
 * native_index -1. The stop reason is the native one. A thread without runtime frames gives a
 * copy. Free with sprov_stack_free. */
SPROV_API int sprov_process_interleave(const sprov_process* proc, size_t index, const sprov_stack* native,
                                       int mode, sprov_stack** out);
/* Names frame `index` of a stack when its method is SPROV_METHOD_RUNTIME; SPROV_ERR_NOT_FOUND
 * for other frames. */
SPROV_API int sprov_stack_runtime_frame(const sprov_stack* stack, size_t index, struct sprov_runtime_frame* out);

/* ------------------------------------------------------------- symbolizer */

typedef struct sprov_symbolizer sprov_symbolizer;

enum sprov_resolver {
  SPROV_RESOLVER_NONE = 0,
  SPROV_RESOLVER_SYMTAB = 1,   /* .symtab of the module or its debug file */
  SPROV_RESOLVER_DYNSYM = 2,   /* .dynsym */
  SPROV_RESOLVER_DWARF = 3,    /* DWARF of the module or of its local debug file */
  SPROV_RESOLVER_DEBUGINFOD = 4, /* DWARF of a debug file fetched from debuginfod */
  SPROV_RESOLVER_BUNDLE = 5,   /* a symbol bundle (doc/bundles.md), source "sha256:<hex>" */
  SPROV_RESOLVER_GOPCLNTAB = 6, /* a Go binary's pclntab (doc/runtime-frames.md "Go"), also stripped */
  SPROV_RESOLVER_PERFMAP = 7,  /* a JIT's /tmp/perf-PID.map (doc/runtime-frames.md "JIT code") */
  SPROV_RESOLVER_PDB = 8,      /* a PE image's PDB, GUID+age checked (doc/windows.md "PDB symbols") */
};
SPROV_API const char* sprov_resolver_name(int resolver);
/* 1 when a frame this resolver named carries source lines and an inline chain (DWARF, debuginfod,
 * a bundle, a Go pclntab, a PDB), else 0: the one rule `stack`, Python and traces describe frames by. */
SPROV_API int sprov_resolver_gives_lines(int resolver);

struct sprov_symbolizer_opts {
  size_t sz;
  uint32_t flags;   /* sprov_symbolizer_flags */
  uint32_t reserved;
};
#define sprov_symbolizer_opts__last_field reserved

enum sprov_symbolizer_flags {
  SPROV_SYM_NO_DEMANGLE = 1u << 0,
  /* Record why each *_ex answer is what it is: sprov_symbolizer_attempt. Off, the
   * resolvers gather nothing for it. */
  SPROV_SYM_EXPLAIN = 1u << 1,
};

struct sprov_symbol {
  size_t sz;
  const char* name;          /* demangled (or raw if demangling is off/fails) */
  const char* linkage_name;  /* raw symbol name */
  uint64_t sym_addr;         /* symbol start, link-time address */
  uint64_t sym_size;
  uint64_t offset;           /* address - sym_addr */
  int32_t resolver;          /* sprov_resolver; SPROV_RESOLVER_NONE when unresolved */
  int32_t reserved;
  const char* source_path;   /* file the answer came from */
};

/* Strings in sprov_symbol are owned by the symbolizer and stay valid until it
 * is freed. */
SPROV_API int sprov_symbolizer_new(sprov_context* ctx, const struct sprov_symbolizer_opts* opts,
                                   sprov_symbolizer** out);
SPROV_API void sprov_symbolizer_free(sprov_symbolizer* sym);

/* Symbolizes frame `index` of `stack`. For caller frames the lookup uses pc-1
 * (inside the call instruction). An unresolved frame is not an error:
 * resolver is SPROV_RESOLVER_NONE. */
SPROV_API int sprov_symbolizer_frame(sprov_symbolizer* sym, const sprov_stack* stack, size_t index,
                                     struct sprov_symbol* out);
/* Symbolizes a link-time address (module offset as in sprov_frame) in a module file. */
SPROV_API int sprov_symbolizer_addr(sprov_symbolizer* sym, const char* module_path,
                                    uint64_t address, struct sprov_symbol* out);

/* DWARF symbolization with inline chains (lines, columns, discriminators).
 * The resolver chain is the context's policy (sprov_context_opts.resolvers,
 * doc/bundles.md "Resolver policy"), tried in order: "bundle" (the bundle of
 * the module's build-id in the context's bundle store, or the one given with
 * sprov_symbolizer_use_bundle; skipped without a store), "dwarf" (DWARF of
 * the module or of its separate debug file: build-id path under the
 * context's debug dirs, or .gnu_debuglink with CRC; used only when its
 * build-id matches; "debuginfod" lets it fetch the debug file), then
 * "symtab"/"dynsym" (symbol tables). The first step that answers is recorded
 * in sprov_symbol_info (resolver, source_path, bundle_digest). Without a
 * store the chain is DWARF then the symbol tables, as before. The
 * physical function's name comes from the symbol tables when one covers the
 * address, as llvm-symbolizer does (doc/symbols.md): without
 * SPROV_SYMBOLIZE_LLVM_COMPAT, a PLT stub (`sym@plt`), else the module's
 * .symtab, else the debug file's, else .dynsym, as sprov_symbolizer_frame. */
enum sprov_symbolize_flags {
  SPROV_SYMBOLIZE_SHORT_NAMES = 1u << 0, /* name = DW_AT_name (llvm --functions=short; with
                                            LLVM_COMPAT, as llvm, no symbol table is read) */
  SPROV_SYMBOLIZE_NO_DEMANGLE = 1u << 1, /* name is the raw linkage name */
  /* Name the physical function exactly as llvm-symbolizer-14 does: from the
   * module file's own .symtab, else its .dynsym (never the separate debug
   * file's .symtab nor MiniDebugInfo: resolver NONE, "??" in llvm), with
   * llvm's choice among symbols at one address and its nearest-symbol rule;
   * StartFileName "" for a DW_FORM_implicit_const DW_AT_decl_file; C++ names
   * demangled in LLVM's spelling (" (.cold)" clone suffixes, 'lambda'(int)
   * closures, "> >"; doc/symbolization.md lists what still differs). */
  SPROV_SYMBOLIZE_LLVM_COMPAT = 1u << 2,
  /* One frame, as llvm-symbolizer --no-inlines (symbolizeCode): the innermost
   * location and declaration (file, line, column, start line/file/address of
   * the innermost inlined function), named by the symbol that covers the
   * address (then its start address too), else by the innermost DWARF
   * function: libc.so.6+0x2a000 is internal_ucs4_loop_single, inlined into
   * __gconv_transform_internal_ucs4, as no .dynsym symbol covers it. With
   * SHORT_NAMES no symbol renames it (llvm's --functions=short). A bundle's
   * answer keeps the physical function's name. frame_count is then 1. */
  SPROV_SYMBOLIZE_NO_INLINES = 1u << 3,
};

/* One frame of an inline chain. Strings are never NULL ("" when unknown). */
struct sprov_symbol_frame {
  size_t sz;
  const char* name;          /* function: linkage name demangled (or DW_AT_name with SHORT_NAMES) */
  const char* linkage_name;  /* raw linkage name ("" when unknown) */
  const char* file;          /* source file, absolute when DWARF gives a comp_dir */
  uint32_t line;             /* 0 when unknown */
  uint32_t column;
  uint32_t discriminator;
  uint32_t start_line;       /* DW_AT_decl_line of the function */
  const char* start_file;    /* DW_AT_decl_file of the function */
  uint64_t start_address;    /* function start (symbol or DW_AT_low_pc) when has_start_address */
  uint32_t has_start_address;
  uint32_t reserved;
};

/* The answer for one address: the innermost frame's fields (frame 0),
 * the number of frames in the inline chain and the provenance. */
struct sprov_symbol_info {
  size_t sz;
  const char* name;
  const char* linkage_name;
  const char* file;
  uint32_t line;
  uint32_t column;
  uint32_t discriminator;
  uint32_t start_line;
  const char* start_file;
  uint64_t start_address;
  uint32_t has_start_address;
  uint32_t frame_count;      /* >= 1: innermost inlined function first, physical function last */
  int32_t resolver;          /* sprov_resolver: BUNDLE, DWARF, DEBUGINFOD, SYMTAB, DYNSYM or NONE */
  int32_t reserved;
  const char* resolver_name; /* "bundle", "bundle+symtab" (a bundle's symbol-table range:
                                no DWARF there), "dwarf", "debuginfod+dwarf", "symtab",
                                "minidebuginfo+symtab", "dynsym", "none" */
  const char* source_path;   /* file whose tables answered, the debuginfod URL, or
                                "sha256:<hex>" of the bundle ("" for NONE) */
  const char* source_build_id; /* lowercase hex build-id of that file (bundle: the
                                  module's) ("" when none) */
  const char* bundle_digest;   /* "sha256:<hex>" of the bundle that answered (resolver BUNDLE), else "" */
};

/* Symbolizes a link-time address of a module file with DWARF lines and the
 * inline chain. An address nothing covers is not an error: resolver is
 * SPROV_RESOLVER_NONE and frame_count is 1 with empty strings. Strings and the
 * frames stay valid until the next *_ex call on `sym` or sprov_symbolizer_free. */
SPROV_API int sprov_symbolizer_addr_ex(sprov_symbolizer* sym, const char* module_path, uint64_t address,
                                       uint32_t flags, struct sprov_symbol_info* out);
/* The same for frame `index` of `stack` (caller frames look up pc-1). */
SPROV_API int sprov_symbolizer_frame_ex(sprov_symbolizer* sym, const sprov_stack* stack, size_t index,
                                        uint32_t flags, struct sprov_symbol_info* out);
/* Symbolizes a link-time address of the module whose ELF GNU build-id is
 * `build_id` (hex), with no module file: only the policy's "bundle" step can
 * answer (resolver BUNDLE, bundle_digest and source_path "sha256:<hex>",
 * linkage names; start_* fields unknown). An address the bundle does not
 * cover is not an error (resolver NONE). Errors: bad hex, no "bundle" step or
 * no store (SPROV_ERR_INVALID_ARG), "no bundle for build-id <hex> in store
 * <dir>" (SPROV_ERR_NOT_FOUND), a given bundle without this module (both ids
 * named, SPROV_ERR_BUILD_ID_MISMATCH), an unreadable store or bundle. Works in
 * offline contexts. */
SPROV_API int sprov_symbolizer_addr_build_id(sprov_symbolizer* sym, const char* build_id, uint64_t address,
                                             uint32_t flags, struct sprov_symbol_info* out);
/* The same for the module of any identity kind: `id_kind` one of SPROV_BUNDLE_ID_*
 * (symbol_bundle.h: 1 ELF build-id, 2 PDB GUID+age, 3 Mach-O UUID, 4 PE code id), `id_hex` its
 * bytes in hex as a bundle stores them (PDB: the 16 GUID bytes as the RSDS record holds them, then
 * the age u32 little-endian; PE code id: TimeDateStamp then SizeOfImage, u32 little-endian each;
 * `stackprov bundle inspect` prints them). Errors as above, naming the kind;
 * SPROV_ERR_INVALID_ARG for another kind. sprov_symbolizer_addr_build_id(s, hex, ...) is
 * sprov_symbolizer_addr_id(s, SPROV_BUNDLE_ID_ELF_BUILD_ID, hex, ...). */
SPROV_API int sprov_symbolizer_addr_id(sprov_symbolizer* sym, int id_kind, const char* id_hex, uint64_t address,
                                       uint32_t flags, struct sprov_symbol_info* out);
/* Makes the "bundle" step answer every module from one bundle instead of the
 * store's id map: "sha256:<hex>" (a bundle in the context's store) or a bundle
 * file's path. A module that bundle does not hold is an error naming the
 * bundle's ids and the module's (never another bundle's answer). */
SPROV_API int sprov_symbolizer_use_bundle(sprov_symbolizer* sym, const char* bundle);
/* A new stack: `stack` with the tail-call frames gdb shows inserted where DWARF call-site
 * information says a function tail-called (jumped to) the frame below it, as gdb's
 * dwarf2/frame-tailcall.c does: the caller's call site (DW_AT_call_return_pc, else the GNU low_pc,
 * at the caller's return address) calls a function from which every chain of tail calls
 * (DW_AT_call_tail_call / DW_AT_GNU_tail_call sites of functions whose call sites are complete)
 * reaches the callee's function; the sites all chains share at their start and end become frames
 * (method SPROV_METHOD_TAIL_CALL, flag SPROV_FRAME_INFERRED, pc the site's return pc, looked up at
 * pc - 1, module the callee's). Nothing is inserted where the chains share nothing, where the
 * callee can reach itself by tail calls, where a target is not a function with DWARF or a symbol of
 * the same module, across modules, or below a frame not found by a CFI table. A module's DWARF is
 * read from its file; offline (SPROV_CTX_OFFLINE), or when its file is missing, from its bundle's
 * call-site section (doc/bundles.md "Call sites"; a bundle without one gives none). A stack
 * without such frames gives a copy. Before sprov_process_interleave (an interleaved stack is
 * refused). Free with sprov_stack_free. */
SPROV_API int sprov_symbolizer_tail_calls(sprov_symbolizer* sym, const sprov_stack* stack, sprov_stack** out);
/* Frame `index` (0 = innermost) of the inline chain of the last *_ex answer. */
SPROV_API int sprov_symbolizer_inline_frame(sprov_symbolizer* sym, size_t index, struct sprov_symbol_frame* out);

/* Arguments of a frame, as gdb's `info args` prints them (`stackprov stack --args`). */
enum sprov_arg_status {
  SPROV_ARG_VALUE = 0,          /* `value` is the value as gdb prints it */
  SPROV_ARG_OPTIMIZED_OUT = 1,  /* the DWARF says it has none at this pc (gdb: <optimized out>) */
  SPROV_ARG_UNKNOWN = 2,        /* not readable from what the unwind knows, or of a type not printed:
                                   `reason` says which (gdb may still know it, e.g. from an entry value) */
};

struct sprov_frame_arg {
  size_t sz;
  const char* name;    /* DW_AT_name (through DW_AT_abstract_origin); "" when none */
  const char* type;    /* the C type as gdb spells it ("int", "const char *", "enum color"); "" unknown */
  const char* value;   /* SPROV_ARG_VALUE: decimal integers, true/false, 65 'A' for chars, %.9g/%.17g
                          for float/double, 0x... for pointers (not the string gdb adds for a char
                          pointer), an enumerator's name; "" otherwise */
  const char* reason;  /* SPROV_ARG_UNKNOWN: why; "" otherwise */
  int32_t status;      /* enum sprov_arg_status */
  uint32_t reserved;
};

/* The formal parameters (DW_TAG_formal_parameter, in DWARF order) of the function of frame `index`
 * of `stack`, each with its value in that frame where its DWARF location (DW_AT_location: an
 * expression or the location list entry covering the frame's lookup pc; DW_AT_const_value) can be
 * evaluated from what the unwind knows: the frame's registers (the stack must come from an
 * unwinder with SPROV_UNWIND_KEEP_REGISTERS: frame 0 every captured register, a caller the
 * registers its unwind restored), its CFA (DW_OP_call_frame_cfa, the usual frame base of
 * DW_OP_fbreg) and `snap`'s memory (its copied stacks, a core's segments; NULL: no memory).
 * Integer, bool, char, float/double, pointer and enumeration types are printed; other types
 * (structs, unions, arrays, long double, ...) and DW_OP_entry_value, DW_OP_piece and unknown
 * registers give SPROV_ARG_UNKNOWN, never a guess. The frame's function is the physical one
 * (not an inlined copy). Sets *count (0: no DWARF for the frame's function, an inferred tail-call
 * frame, a runtime or JIT frame, or an offline context); read each with sprov_symbolizer_frame_arg
 * (valid until the next call on `sym`). */
SPROV_API int sprov_symbolizer_frame_args(sprov_symbolizer* sym, const sprov_snapshot* snap, const sprov_stack* stack,
                                          size_t index, size_t* count);
SPROV_API int sprov_symbolizer_frame_arg(const sprov_symbolizer* sym, size_t index, struct sprov_frame_arg* out);

/* One renderer for every command (doc/architecture.md "Rendering frames"): `stackprov stack`,
 * `trace-show`, `demo` and `python3 -m stackprov stack` print a thread's frames only through it.
 * Text is eu-stack's layout:
 *   TID n "name"[ (python thread "x")]:
 *   #k  0x%016 pc function+0xOFF - module [method[, cfi_not_in_bundle][, jit][, inferred]]
 *       inlined F at file:line:column   (with SPROV_RENDER_LINES: innermost first)
 *       file:line:column                (the physical function's position)
 *       registers: rip 0x... ...        (with SPROV_RENDER_REGS)
 *       arg NAME: TYPE = VALUE          (with SPROV_RENDER_ARGS, one per argument)
 *   stop: reason
 * A frame is named by the symbol tables with gdb's and perf's choice among aliases (the `stack`
 * rule, sprov_symbolizer_frame), else by the resolver chain (a bundle's name offline, without an
 * offset; a Go pclntab's with one); a sigreturn trampoline is "<signal handler called>".
 * With SPROV_RENDER_JSON one JSON object (`stack --json`'s thread) instead. */
enum sprov_render_flags {
  SPROV_RENDER_JSON = 1u << 0,   /* a JSON object instead of text */
  SPROV_RENDER_LINES = 1u << 1,  /* source lines and inline chains (the resolver chain per frame) */
  SPROV_RENDER_REGS = 1u << 2,   /* each frame's known registers (a stack unwound with
                                    SPROV_UNWIND_KEEP_REGISTERS; none known otherwise) */
  SPROV_RENDER_ARGS = 1u << 3,   /* each frame's arguments (sprov_symbolizer_frame_args, memory
                                    from opts->snapshot): "    arg NAME: TYPE = VALUE" lines */
  SPROV_RENDER_NO_INFERRED = 1u << 4,  /* sprov_trace_render only: leave out the inferred frames
                                          (tail-call frames), the others numbered from 0, as
                                          `stack --no-tail-calls` (a stack has them only when
                                          sprov_symbolizer_tail_calls added them) */
};
struct sprov_render_opts {
  size_t sz;
  uint32_t flags;            /* SPROV_RENDER_* */
  uint32_t reserved;         /* 0 */
  int64_t tid;               /* the thread's id in the header */
  const char* name;          /* the thread's name (NULL or "": none) */
  const char* runtime_name;  /* a Python thread's threading name (NULL or "": none) */
  const struct sprov_snapshot* snapshot;  /* SPROV_RENDER_ARGS: the memory arguments are read from
                                             (the stack's snapshot; NULL: registers only) */
};
#define sprov_render_opts__last_field snapshot
/* Renders `stack` (frames named with `sym`; NULL: unnamed) into a malloc'd string `*out`
 * (release with sprov_free), `*out_len` its length (may be NULL). Text ends with a newline;
 * JSON has none. */
SPROV_API int sprov_stack_render(sprov_symbolizer* sym, const sprov_stack* stack, const struct sprov_render_opts* opts,
                                 char** out, size_t* out_len);

/* Why an answer is what it is (`stackprov symbolize --verbose`). With SPROV_SYM_EXPLAIN in
 * sprov_symbolizer_opts.flags, each *_ex call also records what the steps of the resolver
 * policy tried for the module, in the policy's order, then what happened for the address:
 * the bundle looked up in the store, the module's own DWARF, each separate debug file path
 * (build-id path under each debug directory, each .gnu_debuglink place), each debuginfod URL
 * (one per server of DEBUGINFOD_URLS; libdebuginfod reports one errno for all of them), the Go
 * pclntab, the symbol tables; and for the address, DWARF that does not cover it and the step
 * that answered. The module's attempts are the same for every address of the module
 * (per_address 0): a caller prints them once per module. */
enum sprov_attempt_outcome {
  SPROV_ATTEMPT_ANSWERED = 0,          /* this step answered the address */
  SPROV_ATTEMPT_FOUND = 1,             /* the file or table is there and the step uses it */
  SPROV_ATTEMPT_MISSING = 2,           /* nothing there (a server: no server has it) */
  SPROV_ATTEMPT_IDENTITY_MISMATCH = 3, /* a file with another build-id (the reason names both) */
  SPROV_ATTEMPT_CRC_MISMATCH = 4,      /* a .gnu_debuglink candidate with another CRC32 */
  SPROV_ATTEMPT_UNREADABLE = 5,        /* there but unreadable (the reason says why) */
  SPROV_ATTEMPT_FETCH_FAILED = 6,      /* a server did not deliver: connection refused, timeout... */
  SPROV_ATTEMPT_NO_DWARF = 7,          /* the file has no .debug_info */
  SPROV_ATTEMPT_NOT_COVERED = 8,       /* the module has DWARF, but not for this address */
  SPROV_ATTEMPT_NO_SYMBOLS = 9,        /* no such symbol table */
  SPROV_ATTEMPT_SKIPPED = 10,          /* the step could not run (no store, DEBUGINFOD_URLS unset...) */
  SPROV_ATTEMPT_NOT_ANSWERED = 11,     /* no step answered the address */
};

/* One attempt. Strings are never NULL and stay valid until the next *_ex call on `sym`. */
struct sprov_resolve_attempt {
  size_t sz;
  const char* resolver;      /* the policy step: "bundle", "dwarf", "debuginfod", "gopclntab",
                                "symtab", "dynsym"; for ANSWERED the answer's resolver_name;
                                "none" for NOT_ANSWERED */
  const char* looked_at;     /* the path or URL looked at ("" when the step looked at nothing) */
  int32_t outcome;           /* sprov_attempt_outcome */
  uint32_t per_address;      /* 1: about this address; 0: about the module */
  const char* outcome_name;  /* "answered", "found", "missing", "identity mismatch", "crc mismatch",
                                "unreadable", "fetch failed", "no DWARF", "no DWARF covering the
                                address", "no symbols", "skipped", "not answered" */
  const char* reason;        /* why, naming the values: both build-ids, both CRCs, the
                                server's error ("Connection refused"); may be "" */
};

/* The number of attempts the last *_ex call recorded (0 without SPROV_SYM_EXPLAIN or NULL). */
SPROV_API size_t sprov_symbolizer_attempt_count(const sprov_symbolizer* sym);
/* Attempt `index` of the last *_ex call. */
SPROV_API int sprov_symbolizer_attempt(const sprov_symbolizer* sym, size_t index, struct sprov_resolve_attempt* out);

#ifdef __cplusplus
}
#endif

#include "stackprov/perf.h"
#include "stackprov/fast.h"
#include "stackprov/symbol_bundle.h"

#endif /* STACKPROV_STACKPROV_H */
