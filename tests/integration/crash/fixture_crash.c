/* SPDX-License-Identifier: Apache-2.0 */
/* Crash-frame fixture: frames a crash reporter must not lose. Built for the host and, in a cross
 * build, for arm64/mips32 (run under qemu-user).
 *
 * Usage: fixture_crash MODE
 *   null_call      caller_fn calls through a NULL function pointer; the SIGSEGV handler
 *                  captures itself, unwinds, and checks: a signal frame at pc 0 (the kernel's
 *                  saved pc, read from the handler's ucontext), then the caller recovered from
 *                  the return address the call left ([sp] on x86_64, lr on arm64, ra on mips),
 *                  tagged bad_pc_return, equal to that saved value, then b_fn a_fn main.
 *   wild_call      the same through a pointer into unmapped memory (0x10000).
 *   sigtramp       arm64 only: the handler returns through our own copy of the kernel vDSO's
 *                  __kernel_rt_sigreturn (same instructions, same CFI directives, installed as
 *                  SA_RESTORER), and the crash is a NULL store in crasher(); the walk must show
 *                  crasher (the frame the signal hit, pc = the ucontext's pc) right after the
 *                  signal frame, not skip to its caller as that CFI alone would.
 *   core_null      crash through a NULL function pointer with the default action (for cores).
 *   core_wild      the same through 0x10000.
 *   core_handler   crash triage: threads "sprov-idle" (in pause) and "sprov-crash"; the latter
 *                  stores through NULL in crasher(); the SIGSEGV handler (SA_RESETHAND) stores
 *                  to 0x40, which kills the process with SIGSEGV, si_addr 0x40, inside the
 *                  handler: the core has handler, sigreturn trampoline, crasher, b_fn, a_fn.
 *   live_threads   threads "sprov-idle" and "sprov-worker" wait in pause(); prints
 *                  "ready PID" and waits until killed (for live thread names).
 * Exit 0 = pass, 1 = mismatch (each printed with FAIL), 2 = setup error. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "stackprov/stackprov.h"

#if defined(__clang__)  /* clang has no noipa (nor GCC's interprocedural register allocation it stops) */
#define FN __attribute__((noinline, used))
#else
#define FN __attribute__((noinline, noipa, used))
#endif
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

typedef void (*fn_t)(void);
static volatile fn_t g_target;
static volatile int* volatile g_null_ptr;
static const char* g_mode = "null_call";

FN void caller_fn(void) {
  g_target();
  NO_TAIL_CALL();
}
FN void crasher(void) {
  *g_null_ptr = 1;
  NO_TAIL_CALL();
}
FN void b_fn(void) {
  if (strcmp(g_mode, "sigtramp") == 0 || strcmp(g_mode, "core_handler") == 0)
    crasher();
  else
    caller_fn();
  NO_TAIL_CALL();
}
FN void a_fn(void) {
  b_fn();
  NO_TAIL_CALL();
}

/* The interrupted pc and the return address a call through a bad pointer left, from the
 * context the kernel (or qemu-user) saved: the oracle for the frames after the signal frame. */
static void saved_context(const ucontext_t* uc, uint64_t* pc, uint64_t* ra) {
#if defined(__x86_64__)
  *pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
  *ra = *(const uint64_t*)(uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
  *pc = uc->uc_mcontext.pc;
  *ra = uc->uc_mcontext.regs[30];
#elif defined(__mips__)
  *pc = (uint32_t)uc->uc_mcontext.pc;
  *ra = (uint32_t)uc->uc_mcontext.gregs[31];
#else
#error "unsupported architecture"
#endif
}

static int is(const char* got, const char* want) {
  size_t n = strlen(want);
  return got != NULL && strncmp(got, want, n) == 0 && (got[n] == '\0' || got[n] == '.' || got[n] == '(');
}

static sprov_context* g_ctx;

FN void on_segv(int sig, siginfo_t* info, void* ucv) {
  (void)sig;
  (void)info;
  uint64_t want_pc = 0, want_ra = 0;
  saved_context((const ucontext_t*)ucv, &want_pc, &want_ra);
  sprov_snapshot* snap = NULL;
  sprov_unwinder* uw = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_stack* st = NULL;
  SPROV_OPTS(sprov_unwinder_opts, o, .max_frames = 64);
  if (sprov_snapshot_capture_self(g_ctx, NULL, &snap) != 0 || sprov_unwinder_new(g_ctx, &o, &uw) != 0 ||
      sprov_symbolizer_new(g_ctx, NULL, &sym) != 0 || sprov_unwinder_unwind(uw, snap, &st) != 0) {
    printf("FAIL setup: %s\n", sprov_last_error_message());
    _exit(2);
  }
  const size_t n = sprov_stack_frame_count(st);
  printf("mode %s: %zu frames, stop %s; ucontext pc 0x%llx, return address 0x%llx\n", g_mode, n,
         sprov_stop_reason_name(sprov_stack_stop_reason(st)), (unsigned long long)want_pc,
         (unsigned long long)want_ra);
  int fail = 0;
  size_t sig_at = n; /* the first signal frame */
  const char* names[64] = {0};
  struct sprov_frame fr[64];
  for (size_t i = 0; i < n && i < 64; i++) {
    memset(&fr[i], 0, sizeof(fr[i]));
    fr[i].sz = sizeof(fr[i]);
    sprov_stack_frame(st, i, &fr[i]);
    struct sprov_symbol s;
    memset(&s, 0, sizeof(s));
    s.sz = sizeof(s);
    sprov_symbolizer_frame(sym, st, i, &s);
    names[i] = s.name ? strdup(s.name) : NULL;
    if (sig_at == n && fr[i].method == SPROV_METHOD_SIGNAL) sig_at = i;
    printf("  #%-2zu pc 0x%llx sp 0x%llx %-14s %s\n", i, (unsigned long long)fr[i].pc,
           (unsigned long long)fr[i].sp, sprov_method_name(fr[i].method), names[i] ? names[i] : "?");
  }
  size_t i = sig_at;
  if (i >= n || i > 8) {
    printf("FAIL no signal frame within 8 frames of the handler\n");
    _exit(1);
  }
  if (fr[i].pc != want_pc) {
    printf("FAIL signal frame #%zu: pc 0x%llx, ucontext pc 0x%llx\n", i, (unsigned long long)fr[i].pc,
           (unsigned long long)want_pc);
    fail = 1;
  }
  const char* chain_null[] = {"caller_fn", "b_fn", "a_fn", "main"};
  const char* chain_tramp[] = {"crasher", "b_fn", "a_fn", "main"};
  const char** chain = chain_null;
  if (strcmp(g_mode, "sigtramp") == 0) {
    chain = chain_tramp;
    i++; /* the signal frame itself is crasher */
    if (!is(names[sig_at], "crasher")) {
      printf("FAIL signal frame #%zu is %s, not crasher (the frame the signal hit)\n", sig_at,
             names[sig_at] ? names[sig_at] : "?");
      fail = 1;
    }
  } else {
    i++;
    if (i >= n || fr[i].method != SPROV_METHOD_BAD_PC_RETURN || fr[i].pc != want_ra) {
      printf("FAIL frame #%zu after the bad pc: want pc 0x%llx method bad_pc_return, got 0x%llx %s\n", i,
             (unsigned long long)want_ra, i < n ? (unsigned long long)fr[i].pc : 0ull,
             i < n ? sprov_method_name(fr[i].method) : "(none)");
      fail = 1;
    }
  }
  for (size_t k = (chain == chain_tramp) ? 1 : 0; k < 4; k++, i++) {
    if (i >= n || !is(names[i], chain[k])) {
      printf("FAIL frame #%zu: want %s, got %s\n", i, chain[k], i < n && names[i] ? names[i] : "(none)");
      fail = 1;
      break;
    }
  }
  printf("%s\n", fail ? "FAILED" : "PASS");
  fflush(stdout);
  _exit(fail);
}

#if defined(__aarch64__)
/* A copy of arch/arm64/kernel/vdso/sigreturn.S (Linux 6.x): the "mysterious NOP" covered by the
 * FDE, .cfi_signal_frame, and CFI that describes the interrupted x29/x30 frame record. */
__asm__(
    ".text\n"
    ".p2align 2\n"
    ".cfi_startproc\n"
    ".cfi_signal_frame\n"
    ".cfi_def_cfa x29, 0\n"
    ".cfi_offset x29, 0 * 8\n"
    ".cfi_offset x30, 1 * 8\n"
    "nop\n"
    ".globl fixture_rt_sigreturn\n"
    ".type fixture_rt_sigreturn, %function\n"
    "fixture_rt_sigreturn:\n"
    "mov x8, #139\n" /* __NR_rt_sigreturn */
    "svc #0\n"
    ".cfi_endproc\n"
    ".size fixture_rt_sigreturn, .-fixture_rt_sigreturn\n");
void fixture_rt_sigreturn(void);

/* The kernel's struct sigaction (include/uapi/asm-generic/signal.h with SA_RESTORER). */
struct kernel_sigaction {
  void (*handler)(int, siginfo_t*, void*);
  unsigned long flags;
  void (*restorer)(void);
  uint64_t mask;
};
#define KERNEL_SA_RESTORER 0x04000000ul

static int install_with_restorer(void) {
  struct kernel_sigaction ka;
  memset(&ka, 0, sizeof(ka));
  ka.handler = on_segv;
  ka.flags = SA_SIGINFO | KERNEL_SA_RESTORER;
  ka.restorer = fixture_rt_sigreturn;
  return (int)syscall(SYS_rt_sigaction, SIGSEGV, &ka, NULL, sizeof(ka.mask));
}
#endif

/* core_handler: the handler faults again (si_addr 0x40); SA_RESETHAND made that fatal. */
static volatile int* volatile g_second_fault = (volatile int*)(uintptr_t)0x40;
FN void on_fault_again(int sig) {
  (void)sig;
  *g_second_fault = 2;
  NO_TAIL_CALL();
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_idle_ready;
static int g_main_ready; /* main is past pthread_create (out of clone3, whose parent side has no CFI) */

/* A named thread that counts itself ready and waits in pause() until the process dies. */
static void* parked_thread(void* name) {
  pthread_setname_np(pthread_self(), (const char*)name);
  pthread_mutex_lock(&g_lock);
  g_idle_ready++;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  for (;;) pause();
  return name;
}

static void wait_ready(int n) {
  pthread_mutex_lock(&g_lock);
  while (g_idle_ready < n) pthread_cond_wait(&g_cond, &g_lock);
  pthread_mutex_unlock(&g_lock);
}

static void* crash_thread(void* arg) {
  pthread_setname_np(pthread_self(), "sprov-crash");
  wait_ready(1);
  pthread_mutex_lock(&g_lock);
  while (!g_main_ready) pthread_cond_wait(&g_cond, &g_lock);
  pthread_mutex_unlock(&g_lock);
  a_fn();
  return arg;
}

static int threads_mode(void) {
  pthread_t idle, other;
  if (pthread_create(&idle, NULL, parked_thread, (void*)"sprov-idle") != 0) return 2;
  if (strcmp(g_mode, "live_threads") == 0) {
    if (pthread_create(&other, NULL, parked_thread, (void*)"sprov-worker") != 0) return 2;
    wait_ready(2);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) pause();
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fault_again;
  sa.sa_flags = SA_NODEFER | SA_RESETHAND;
  if (sigaction(SIGSEGV, &sa, NULL) != 0) return 2;
  if (pthread_create(&other, NULL, crash_thread, NULL) != 0) return 2;
  pthread_mutex_lock(&g_lock);
  g_main_ready = 1;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  pthread_join(other, NULL);
  return 2; /* not reached */
}

int main(int argc, char** argv) {
  if (argc > 1) g_mode = argv[1];
  if (strcmp(g_mode, "core_handler") == 0 || strcmp(g_mode, "live_threads") == 0) return threads_mode();
  if (strncmp(g_mode, "core_", 5) == 0) {
    g_target = strcmp(g_mode, "core_wild") == 0 ? (fn_t)(uintptr_t)0x10000 : (fn_t)0;
    a_fn();
    return 2; /* not reached */
  }
  if (sprov_context_new(NULL, &g_ctx) != 0) {
    fprintf(stderr, "sprov_context_new: %s\n", sprov_last_error_message());
    return 2;
  }
  /* The handler runs on the thread's own stack, so one capture covers every frame. */
  if (strcmp(g_mode, "sigtramp") == 0) {
#if defined(__aarch64__)
    if (install_with_restorer() != 0) {
      perror("rt_sigaction");
      return 2;
    }
#else
    fprintf(stderr, "sigtramp mode is arm64 only\n");
    return 2;
#endif
  } else {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSEGV, &sa, NULL) != 0) {
      perror("sigaction");
      return 2;
    }
    g_target = strcmp(g_mode, "wild_call") == 0 ? (fn_t)(uintptr_t)0x10000 : (fn_t)0;
  }
  a_fn();
  printf("FAIL no crash\n");
  return 1;
}
