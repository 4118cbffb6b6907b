/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI, profiler path: perf_event sampling, perf.data import, per-sample snapshots. */
#ifndef STACKPROV_PERF_H
#define STACKPROV_PERF_H

#include "stackprov/stackprov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- profile */

/* A sampled profile: the samples of a perf.data file (`perf record
 * --call-graph dwarf`) or of a stackprov capture file (`sprov_record`), with
 * the module list of each sampled process as of each sample's time. Each
 * sample is turned into a snapshot (user registers, the copied user stack,
 * the module list) that sprov_unwinder_unwind walks offline. Use one profile
 * from one thread at a time. */
typedef struct sprov_profile sprov_profile;

enum sprov_profile_format {
  SPROV_PROFILE_PERF_DATA = 1, /* perf.data, "PERFILE2", little-endian */
  SPROV_PROFILE_CAPTURE = 2,   /* stackprov capture file, "SPROVCAP" */
};

struct sprov_profile_open_opts {
  size_t sz;
  uint32_t flags;    /* reserved, 0 */
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
 * SPROV_ERR_LIMIT and a message naming the field and offset. */
SPROV_API int sprov_profile_open(sprov_context* ctx, const char* path, const struct sprov_profile_open_opts* opts,
                                 sprov_profile** out);
SPROV_API void sprov_profile_free(sprov_profile* prof);

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
};
SPROV_API int sprov_profile_info(const sprov_profile* prof, struct sprov_profile_info* out);

enum sprov_profile_sample_flags {
  SPROV_PROFILE_SAMPLE_NO_USER_REGS = 1u << 0, /* no user context: snapshot is NULL */
  SPROV_PROFILE_SAMPLE_NEW_MODULES = 1u << 1,  /* the snapshot's module list changed */
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
  const sprov_snapshot* snapshot; /* borrowed; valid until the next sprov_profile_sample
                                     call on this profile or sprov_profile_free */
  const uint64_t* kernel_ips;     /* kernel part of the callchain, leaf first; borrowed likewise */
  uint32_t kernel_ip_count;
  uint32_t flags;            /* sprov_profile_sample_flags */
  uint32_t module_list;      /* id of the sample's module list */
  uint32_t reserved;
};

/* Fills `out` with sample `index` (0 .. samples-1) and builds its snapshot.
 * The profile reuses one snapshot per call: its module list is replaced only
 * when the sample's list differs from the previous call's, so an unwinder
 * keeps its module table between samples of the same mapping state. */
SPROV_API int sprov_profile_sample(sprov_profile* prof, size_t index, struct sprov_profile_sample* out);

/* -------------------------------------------------------------- recording */

struct sprov_record_opts {
  size_t sz;
  int64_t pid;               /* record this existing process (all its threads), or 0 */
  const char* const* argv;   /* or start this command (NULL-terminated); exactly one of pid/argv */
  const char* output;        /* capture file to write */
  uint32_t frequency;        /* samples per second per thread; 0: 999 */
  uint32_t stack_size;       /* user stack bytes per sample, multiple of 8, <= 65528; 0: 8192 */
  uint32_t duration_ms;      /* stop after this long; 0: when the target exits (or SIGINT) */
  uint32_t flags;            /* reserved, 0 */
};
#define sprov_record_opts__last_field flags

struct sprov_record_result {
  size_t sz;
  uint64_t samples;
  uint64_t lost;             /* samples the kernel dropped (ring buffer full): never hidden */
  uint64_t threads;          /* threads seen */
  int32_t exit_status;       /* of the started command (wait status), -1 when none */
  uint32_t reserved;
};

/* Samples the target with perf_event_open (cpu-clock at `frequency`,
 * PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER, one event per CPU and
 * thread with inherit, so threads created later are followed; MMAP2 with
 * build-ids, COMM, FORK and EXIT track the module map) and writes a capture
 * file that sprov_profile_open reads. Blocks until the duration elapsed, the
 * target exited or SIGINT arrived. Errors: -EACCES/-EPERM (with a
 * perf_event_paranoid hint), -ESRCH, SPROV_ERR_INVALID_ARG, SPROV_ERR_IO. */
SPROV_API int sprov_record(sprov_context* ctx, const struct sprov_record_opts* opts, struct sprov_record_result* out);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_PERF_H */
