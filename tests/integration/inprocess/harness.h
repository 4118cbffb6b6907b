/* SPDX-License-Identifier: Apache-2.0 */
/* In-process integration harness: capture at a probe, unwind, compare with independent oracles. */
#ifndef STACKPROV_TESTS_INPROCESS_HARNESS_H
#define STACKPROV_TESTS_INPROCESS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "stackprov/stackprov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keep fixture functions as real, separate frames: no inlining, no IPA clones
 * (.constprop/.isra names), and an empty asm after each call defeats tail calls. */
#if defined(__clang__)
#define FIXTURE_FN __attribute__((noinline, used))
#else
#define FIXTURE_FN __attribute__((noinline, noipa, used))
#endif
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

enum { kProbeMaxFrames = 1024 };

/* One element of the expected call chain, innermost first. `name` is a
 * function name the symbolizer must report (a ".cold"/" [clone" suffix is
 * accepted), or "..." for any number (>= 0) of frames outside the fixture
 * (libc internals). `method_after`: the method expected for the frame found
 * by stepping out of this one; 0 means the variant's default for fixture code. */
struct chain_elem {
  const char* name;
  int method_after;
};

/* What a probe site expects. Filled by the fixture before probe_capture runs. */
struct expectation {
  const struct chain_elem* chain;
  size_t chain_len;
  int bt_complete;      /* 1: backtrace() must cover the whole stack, same frame count */
  int fp_oracle_frames; /* >0: walk this many rbp-chain links at the probe and compare */
  uint32_t unwind_flags; /* sprov_unwind_flags for the unwinder */
  uint64_t signal_pc;   /* !=0: the interrupted pc (from ucontext); that frame's method is signal */
  uint64_t signal_sp;   /* the interrupted sp (from ucontext) */
  uint64_t restorer;    /* !=0: the handler's return address (sa_restorer) */
  uint64_t extra_ra;    /* !=0: a return address recorded by asm code ... */
  size_t extra_ra_index; /* ... that must be the pc of this frame index */
};

/* Everything captured at the probe, checked later by harness_check. */
struct probe {
  sprov_snapshot* snap;
  int err;
  void* bt[kProbeMaxFrames];
  int bt_n;
  uint64_t fp_ra[kProbeMaxFrames]; /* return addresses from the rbp chain walk */
  int fp_n;
  int captured;
};

extern struct probe g_probe;
extern struct expectation g_expect;

/* Parses argv: argv[1] is the variant name (for the report), argv[2] the mode.
 * Creates the shared sprov_context. Returns the mode string. */
const char* harness_init(int argc, char** argv);

/* The probe: sprov_snapshot_capture_self and backtrace() from the same
 * function, so that stackprov frame i and backtrace entry i are the same frame
 * for i >= 1 (both frame 0s lie in probe_capture, at different call sites).
 * Also walks the rbp chain when g_expect.fp_oracle_frames > 0. */
void probe_capture(void);

/* Unwinds g_probe.snap and compares it with every oracle; prints a report
 * (lines "SPROV i pc method name", "BT i pc", "FAIL ...") and returns the
 * number of failed checks. Also does the offline round trips. */
int harness_check(void);

/* Prints the summary and returns the process exit status. */
int harness_finish(int failures);

/* The variant's method for frames stepped out of fixture code (from the
 * FIXTURE_OWN_METHOD compile definition: cfi_eh_frame or cfi_debug_frame). */
int harness_own_method(void);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_TESTS_INPROCESS_HARNESS_H */
