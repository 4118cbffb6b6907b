/* SPDX-License-Identifier: Apache-2.0 */
/* Raw unwinding of a stopped child: ptrace registers (user_regs_struct, pt_regs, perf layout) + a
   process_vm_readv stack copy + an address space from /proc/PID/maps, against eu-stack on the same
   stopped process.  Usage: fast_ptrace EU_STACK */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fast_check.h"
#include "stackprov/stackprov.h"

enum { kMax = 128 };

static void die(const char* what) {
  fprintf(stderr, "fast_ptrace: %s: %s (%s)\n", what, strerror(errno), sprov_last_error_message());
  exit(2);
}

/* ---------------------------------------------------------------- the child */

static volatile int g_sink;
__attribute__((noinline)) static void park3(int fd) {
  if (write(fd, "r", 1) != 1) _exit(3);
  for (;;) pause();
}
__attribute__((noinline)) static void park2(int fd) {
  park3(fd);
  g_sink++;
}
__attribute__((noinline)) static void park1(int fd) {
  park2(fd);
  g_sink++;
}

/* ------------------------------------------------------------- the tracer */

/* Waits until the child sleeps in pause() (/proc/PID/syscall starts with SYS_pause = 34). */
static void wait_in_pause(pid_t pid) {
  char path[64], buf[64];
  snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
  for (int i = 0; i < 5000; i++) {
    FILE* f = fopen(path, "r");
    if (f) {
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = 0;
      if (strncmp(buf, "34 ", 3) == 0) return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "fast_ptrace: child %d never reached pause(): %s\n", (int)pid, buf);
  exit(2);
}

/* The [stack] mapping's end above sp, from /proc/PID/maps. */
static uint64_t stack_end(pid_t pid, uint64_t sp) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) die("maps");
  uint64_t end = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long a, b;
    if (sscanf(line, "%llx-%llx", &a, &b) == 2 && sp >= a && sp < b) end = b;
  }
  fclose(f);
  return end;
}

static uint32_t unwind(sprov_unwinder* uw, sprov_address_space* as, int format, const void* regs, size_t len,
                       uint64_t mask, uint64_t sp, const void* stack, size_t stack_len, uint64_t* pcs, int* stop) {
  SPROV_OPTS(sprov_raw_input, in, .regs_format = format, .regs = regs, .regs_len = len, .regs_mask = mask,
             .stack_addr = sp, .stack = stack, .stack_len = stack_len);
  struct sprov_unwind_buf buf = {.sz = sizeof buf, .pcs = pcs, .capacity = kMax};
  if (sprov_unwinder_unwind_raw(uw, as, &in, &buf) != 0) die("sprov_unwinder_unwind_raw");
  *stop = buf.stop_reason;
  return buf.count;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fast_ptrace EU_STACK\n");
    return 2;
  }
  int fds[2];
  if (pipe(fds) != 0) die("pipe");
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    close(fds[0]);
    park1(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  char c;
  if (read(fds[0], &c, 1) != 1) die("child start");
  wait_in_pause(child);

  /* Stop it, take its registers and stack, let it go (back into pause()). */
  if (ptrace(PTRACE_SEIZE, child, 0, 0) != 0) die("PTRACE_SEIZE");
  if (ptrace(PTRACE_INTERRUPT, child, 0, 0) != 0) die("PTRACE_INTERRUPT");
  int status;
  if (waitpid(child, &status, __WALL) != child) die("waitpid");
  struct user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, child, 0, &regs) != 0) die("PTRACE_GETREGS");
  const uint64_t sp = regs.rsp, end = stack_end(child, sp);
  size_t len = end > sp ? (size_t)(end - sp) : 0;
  if (len > (512u << 10)) len = 512u << 10;
  unsigned char* stack = malloc(len);
  struct iovec local = {stack, len}, remote = {(void*)(uintptr_t)sp, len};
  if (process_vm_readv(child, &local, 1, &remote, 1, 0) != (ssize_t)len) die("process_vm_readv");
  if (ptrace(PTRACE_DETACH, child, 0, 0) != 0) die("PTRACE_DETACH");

  sprov_context* ctx = NULL;
  if (sprov_context_new(NULL, &ctx) != 0) die("sprov_context_new");
  SPROV_OPTS(sprov_address_space_opts, ao, .pid = child);
  sprov_address_space* as = NULL;
  if (sprov_address_space_new(ctx, &ao, &as) != 0) die("sprov_address_space_new");
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMax);
  sprov_unwinder* uw = NULL;
  if (sprov_unwinder_new(ctx, &uo, &uw) != 0) die("sprov_unwinder_new");

  uint64_t pcs[kMax], pt[kMax], pf[kMax];
  int stop, stop_pt, stop_pf;
  const uint32_t n = unwind(uw, as, SPROV_REGS_PTRACE, &regs, sizeof regs, 0, sp, stack, len, pcs, &stop);
  /* eBPF pt_regs: user_regs_struct's first 21 words (arch/x86/include/asm/ptrace.h). */
  const uint32_t npt = unwind(uw, as, SPROV_REGS_PT_REGS, &regs, 21 * 8, 0, sp, stack, len, pt, &stop_pt);
  /* perf sample_regs_user 0xff0fff: AX BX CX DX SI DI BP SP IP FLAGS CS SS, R8..R15
     (arch/x86/include/uapi/asm/perf_regs.h), values in bit order. */
  const uint64_t perf[20] = {regs.rax, regs.rbx, regs.rcx, regs.rdx, regs.rsi, regs.rdi, regs.rbp,
                             regs.rsp, regs.rip, regs.eflags, regs.cs, regs.ss, regs.r8, regs.r9,
                             regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15};
  const uint32_t npf = unwind(uw, as, SPROV_REGS_PERF, perf, sizeof perf, 0xff0fffull, sp, stack, len, pf, &stop_pf);
  CHECK(stop == SPROV_STOP_END_OF_STACK, "stop reason %s", sprov_stop_reason_name(stop));
  CHECK(npt == n && npf == n && stop_pt == stop && stop_pf == stop, "pt_regs %u / perf %u / ptrace %u frames", npt,
        npf, n);
  for (uint32_t i = 0; i < n && i < npt && i < npf; i++)
    CHECK(pt[i] == pcs[i] && pf[i] == pcs[i], "frame %u: ptrace 0x%llx pt_regs 0x%llx perf 0x%llx", i,
          (unsigned long long)pcs[i], (unsigned long long)pt[i], (unsigned long long)pf[i]);

  /* eu-stack on the same process, still in the same pause(). */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s -p %d 2>&1", argv[1], (int)child);
  FILE* p = popen(cmd, "r");
  if (!p) die("popen eu-stack");
  char line[1024];
  uint64_t eu[kMax];
  uint32_t neu = 0;
  while (fgets(line, sizeof line, p)) {
    unsigned idx;
    unsigned long long pc;
    if (sscanf(line, " #%u 0x%llx", &idx, &pc) == 2 && neu < kMax && idx == neu) eu[neu++] = pc;
    else if (neu == 0 && strstr(line, "TID") == NULL && strstr(line, "PID") == NULL) fprintf(stderr, "eu-stack: %s", line);
  }
  int rc = pclose(p);
  CHECK(rc == 0 && neu >= 4, "%s exited with %d after %u frames", argv[1], rc, neu);
  CHECK(n >= neu, "%u frames, eu-stack %u", n, neu);
  for (uint32_t i = 0; i < neu && i < n; i++)
    CHECK(pcs[i] == eu[i], "frame %u: raw 0x%llx, eu-stack 0x%llx", i, (unsigned long long)pcs[i],
          (unsigned long long)eu[i]);

  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  sprov_unwinder_free(uw);
  sprov_address_space_free(as);
  sprov_context_free(ctx);
  free(stack);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("fast_ptrace: %u frames from ptrace/pt_regs/perf registers equal eu-stack's %u\n", n, neu);
  return 0;
}
