/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI for traces: capture into a store, resolve, replay under perturbations, the gate. */
#ifndef STACKPROV_TRACE_H
#define STACKPROV_TRACE_H

#include "stackprov/stackprov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------------------
 * Traces (doc/traces.md): an incident's stacks captured as evidence -- every
 * thread's snapshot (gzip, content-addressed) and its frames with how each was
 * found and resolved -- in a trace store: SQLite ("sqlite:PATH", the default
 * $XDG_DATA_HOME/stackprov/traces.db) or PostgreSQL ("postgresql://...", a
 * libpq URI). Conventions as in stackprov.h. Built only when the library was
 * configured with STACKPROV_TRACE (the default for native builds); otherwise
 * every function fails with SPROV_ERR_UNSUPPORTED.
 * ------------------------------------------------------------------------- */

#define SPROV_TRACE_ID_STRLEN 37 /* UUID 8-4-4-4-12 + NUL */

typedef struct sprov_trace_store sprov_trace_store;

/* The default store URL: $STACKPROV_STORE when it is a store URL (sqlite:... or
 * postgresql://...; a directory there is the bundle store's), else
 * "sqlite:$XDG_DATA_HOME/stackprov/traces.db". */
SPROV_API int sprov_trace_store_default_url(char** out, size_t* out_len);
/* Opens (SQLite: creating) the store and applies its migrations. url NULL or "": the default. */
SPROV_API int sprov_trace_store_open(const char* url, sprov_trace_store** out);
SPROV_API void sprov_trace_store_free(sprov_trace_store* store);
/* The store's URL with any password replaced by "***" (owned by the handle). */
SPROV_API const char* sprov_trace_store_url(const sprov_trace_store* store);

/* ---------------------------------------------------------------- capture */

enum sprov_trace_flags {
  /* capture: build one symbol bundle of every module the trace's frames touch,
   * store it in the trace store (symbol_bundles) and in the context's bundle
   * store, and record it as the trace's symbol_bundle_sha256 */
  SPROV_TRACE_BUNDLE = 1u << 0,
  /* resolve: bundles only, no module file, debug file or network */
  SPROV_TRACE_OFFLINE = 1u << 1,
};

struct sprov_trace_capture_opts {
  size_t sz;
  uint32_t flags;          /* SPROV_TRACE_BUNDLE */
  uint32_t max_frames;     /* per thread; 0: 256 */
  const char* sign_key;    /* with SPROV_TRACE_BUNDLE: sign the bundle with this P-256 key (PEM) */
  const char* log_dir;     /* ... and append the envelope to this transparency log (required with sign_key) */
  const char* log_key;     /* the log's checkpoint key; NULL: sign_key */
};
#define sprov_trace_capture_opts__last_field log_key

/* Unwinds and resolves every thread of `proc` (sprov_process_capture or
 * sprov_process_open_core with the same context), and stores the trace: the
 * threads' snapshots as its captured data, every frame with its provenance.
 * JIT frames are named from the process's perf map (/tmp/perf-PID.map; an
 * online context), and the map entries they use are kept in the captured
 * data: sprov_trace_resolve (also offline) and replay name them without the
 * map (doc/traces.md "Capture").
 * A process captured with SPROV_PROCESS_KERNEL_STACKS | SPROV_PROCESS_KERNEL_BTF
 * (stackprov/kernel.h) also gets its threads' kernel segments stored: each
 * thread's /proc kernel stack as sprov_process_kernel_stack gives it (names,
 * offsets, BTF prototypes; no address), with the running kernel's build-id
 * and the sha256 of /sys/kernel/btf/vmlinux (doc/traces.md "Kernel
 * segments"). A thread without one, or no kernel segment at all (no BTF, no
 * stack readable: not root), is a warning of the context's log, never an error.
 * id (>= SPROV_TRACE_ID_STRLEN bytes) receives the new trace's id. The trace
 * is stored whole or not at all. */
SPROV_API int sprov_trace_capture(sprov_context* ctx, const sprov_process* proc, sprov_trace_store* store,
                                  const struct sprov_trace_capture_opts* opts, char* id, size_t id_size);

/* ---------------------------------------------------------------- resolve */

struct sprov_trace_resolve_opts {
  size_t sz;
  uint32_t flags;                /* SPROV_TRACE_OFFLINE */
  uint32_t reserved;             /* must be 0 */
  const char* const* bundles;    /* "sha256:<hex>" in the trace store or the context's bundle store, or files */
  size_t bundle_count;
};
#define sprov_trace_resolve_opts__last_field bundle_count

/* Resolves a stored trace again from its captured data -- unwinding and naming
 * every thread -- with the trace's own bundle, the given bundles and every
 * bundle of the trace store that holds one of its modules, and replaces its
 * frames in one transaction. *report (may be NULL; sprov_free) receives a JSON
 * summary {"trace_id","frames","named","with_lines","symbol_coverage_pct",
 * "resolvers":{name:count},"bundles":[...]}. */
SPROV_API int sprov_trace_resolve(sprov_context* ctx, sprov_trace_store* store, const char* trace_id,
                                  const struct sprov_trace_resolve_opts* opts, char** report, size_t* report_len);

/* ----------------------------------------------------------------- replay */

struct sprov_trace_replay_opts {
  size_t sz;
  uint32_t seeds;              /* replays; 0: 5 */
  uint32_t flags;              /* reserved, must be 0 */
  uint64_t first_seed;         /* seeds first_seed .. first_seed+seeds-1; 0: 1 */
  double min_coverage_pct;     /* gate; < 0: the default 90 */
  double min_success_ratio;    /* gate; < 0: the default 0.95 */
  const char* const* key_paths;  /* public keys trusted for the bundles' DSSE envelopes */
  size_t key_count;
  const char* trusted_root_path; /* the log's pinned trusted_root.json for the inclusion proofs */
};
#define sprov_trace_replay_opts__last_field trusted_root_path

/* The outcome of a replay: figures, checks, per-seed results. */
typedef struct sprov_replay_report sprov_replay_report;

/* Exit statuses of the gate (sprov_replay_report_exit_code): 0 passed; the
 * first failed check in this order decides. */
enum sprov_gate_exit {
  SPROV_GATE_OK = 0,
  SPROV_GATE_COVERAGE = 3,    /* symbol_coverage_pct below the threshold */
  SPROV_GATE_SUCCESS = 4,     /* replay_success_ratio below the threshold */
  SPROV_GATE_DSSE = 5,        /* a bundle's DSSE envelope missing or not verified */
  SPROV_GATE_INCLUSION = 6,   /* a bundle's inclusion proof missing or not verified */
  SPROV_GATE_PLATFORM_ID = 7, /* a module's identity differs from its bundle's, or no bundle holds it */
};

/* Replays a stored trace `seeds` times: each seed unwinds and resolves the
 * captured data again under a perturbation drawn from it (doc/traces.md
 * "Replay") and compares frame by frame with the stored resolution; each
 * replay is recorded in the store. Then verifies the bundles' signatures and
 * inclusion proofs offline and the modules' identities, and evaluates the
 * gate. Returns 0 when the replay ran (the gate may still have failed: see
 * sprov_replay_report_exit_code). */
SPROV_API int sprov_trace_replay(sprov_context* ctx, sprov_trace_store* store, const char* trace_id,
                                 const struct sprov_trace_replay_opts* opts, sprov_replay_report** out);
SPROV_API void sprov_replay_report_free(sprov_replay_report* r);
/* SPROV_GATE_* */
SPROV_API int sprov_replay_report_exit_code(const sprov_replay_report* r);
SPROV_API double sprov_replay_report_coverage_pct(const sprov_replay_report* r);
SPROV_API double sprov_replay_report_success_ratio(const sprov_replay_report* r);

enum sprov_report_format {
  SPROV_REPORT_JSON = 1,    /* figures, checks and seeds with their mismatches */
  SPROV_REPORT_JUNIT = 2,   /* JUnit XML: one testcase per check and per seed */
  SPROV_REPORT_SUMMARY = 3, /* one line: "... % coverage, ... % success ...: PASS|FAIL <checks>" */
};
/* The report in a format; *out released with sprov_free. */
SPROV_API int sprov_replay_report_format(const sprov_replay_report* r, int format, char** out, size_t* out_len);

/* ------------------------------------------------------------------ query */

/* The stored trace as one trace.capture event line (doc/traces.md "Events"). */
SPROV_API int sprov_trace_get_json(sprov_trace_store* store, const char* trace_id, char** out, size_t* out_len);
/* The threads of a trace.capture event line (`event`, `len` bytes; sprov_trace_get_json's) as
 * sprov_stack_render prints a thread (`trace-show`, `demo`): the same header and frame lines, with
 * SPROV_RENDER_LINES the inline chain innermost first, then the physical function's position; no
 * "stop:" line (a trace does not record it). `flags`: SPROV_RENDER_LINES and
 * SPROV_RENDER_NO_INFERRED (without the tail-call frames a capture inferred, tagged
 * "[tail_call, inferred]" otherwise). A thread without
 * frames gets the line "    (no frames)". Release `*out` with sprov_free. */
SPROV_API int sprov_trace_render(const char* event, size_t len, uint32_t flags, char** out, size_t* out_len);
/* Every trace as a JSON array [{"trace_id","platform","arch","captured_at","build_id","frames"}]
 * ordered by capture time; at most `limit` (0: all). */
SPROV_API int sprov_trace_list_json(sprov_trace_store* store, size_t limit, char** out, size_t* out_len);
/* The replays of a trace as replay.result event lines, oldest first. */
SPROV_API int sprov_trace_replays_json(sprov_trace_store* store, const char* trace_id, char** out, size_t* out_len);
/* Copies a bundle of the trace store (blob and its DSSE envelope, tlog proof
 * and checkpoint when signed) into a bundle store directory, so that
 * sprov_trace_verify and the bundle commands can read it. */
SPROV_API int sprov_trace_store_export_bundle(sprov_trace_store* store, const char* digest,
                                              sprov_bundle_store* bundles);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_TRACE_H */
