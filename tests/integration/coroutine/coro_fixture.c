/* SPDX-License-Identifier: Apache-2.0 */
/* Walks inside a ucontext coroutine (issue 35, "Coroutine and async boundaries"; doc/async-stacks.md).
 * main switches with swapcontext into a coroutine made by makecontext on a static stack (uc_link =
 * the resumer's context); three functions deep the coroutine captures its own snapshot and unwinds it.
 * Oracles: glibc's backtrace() (libgcc's unwinder) taken in the same function, and the registers
 * glibc's swapcontext saved in the resumer's ucontext_t.
 *  1. Unregistered: our caller frames are backtrace()'s, one for one, ending at the coroutine's entry
 *     trampoline (glibc's __start_context) with the reason coroutine_entry; the entry carries the
 *     uc_link annotation: the context is &resumer_ctx, its pc and sp the rip and rsp swapcontext saved
 *     there (gregs[REG_RIP], gregs[REG_RSP]).
 *  2. Registered (sprov_async_register_stack(stack, size, &resumer_ctx)): the coroutine yields, another
 *     resumer function switches back into it; its capture's walk is the coroutine's frames as in 1,
 *     then the frame at the saved rip (method async_boundary), then exactly the callers backtrace()
 *     gave in the resumer right before its swapcontext, all of domain async; the snapshot survives
 *     serialization with the same frames; they equal, pc and sp, a walk of a snapshot built by hand from
 *     the saved context (its registers, its stack, /proc/self/maps). Registration errors (overlap, limit, unknown) are checked.
 * Exit 0 when all holds; every difference is printed.
 * With --sleep the fixture stops inside the coroutine instead (for `stackprov stack --pid`,
 * check_cli.py): it prints "ready <&resumer_ctx> <saved rip> <saved rsp>" and waits to be killed. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "stackprov/stackprov.h"

#define FIXTURE_FN __attribute__((noinline, noipa, used))
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

static ucontext_t resumer_ctx, coro_ctx;
static char stack[256 * 1024];
static int failures;
static sprov_context* ctx;
static int sleep_mode;

/* One capture inside the coroutine: backtrace() there, the snapshot, and the resumer's saved rip/rsp
 * at that moment. */
struct capture {
  void* bt[64];
  int bt_n;
  sprov_snapshot* snap;
  uint64_t saved_rip, saved_rsp;
};
static struct capture cap[2];
/* A snapshot built by hand from the resumer's saved context (registers from resumer_ctx, its stack
 * from the saved rsp to the end of that mapping, the modules of /proc/self/maps), taken in capture 1:
 * its walk is "a walk from the saved context". */
static sprov_snapshot* from_saved;
/* backtrace() in the registered resumer right before its swapcontext. */
static void* rbt[64];
static int rbt_n;

#define CHECK(c, ...)                 \
  do {                                \
    if (!(c)) {                       \
      printf("FAIL: " __VA_ARGS__);   \
      printf("\n");                   \
      failures++;                     \
    }                                 \
  } while (0)

static void snapshot_saved_context(void) {
  static char maps[1 << 16];
  FILE* f = fopen("/proc/self/maps", "r");
  size_t len = f ? fread(maps, 1, sizeof maps - 1, f) : 0;
  if (f) fclose(f);
  maps[len] = 0;
  const greg_t* g = resumer_ctx.uc_mcontext.gregs;
  const uint64_t rsp = (uint64_t)g[REG_RSP];
  uint64_t end = 0;
  for (char* line = maps; *line;) {
    unsigned long long lo = 0, hi = 0;
    if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && rsp >= lo && rsp < hi) end = hi;
    char* nl = strchr(line, '\n');
    if (!nl) break;
    line = nl + 1;
  }
  /* DWARF numbers: rbx 3, rbp 6, rsp 7, r12-r15 12-15, rip 16. */
  if (end == 0 || sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &from_saved) != 0 ||
      sprov_snapshot_set_reg(from_saved, 16, (uint64_t)g[REG_RIP]) != 0 || sprov_snapshot_set_reg(from_saved, 7, rsp) != 0 ||
      sprov_snapshot_set_reg(from_saved, 6, (uint64_t)g[REG_RBP]) != 0 ||
      sprov_snapshot_set_reg(from_saved, 3, (uint64_t)g[REG_RBX]) != 0 ||
      sprov_snapshot_set_reg(from_saved, 12, (uint64_t)g[REG_R12]) != 0 ||
      sprov_snapshot_set_reg(from_saved, 13, (uint64_t)g[REG_R13]) != 0 ||
      sprov_snapshot_set_reg(from_saved, 14, (uint64_t)g[REG_R14]) != 0 ||
      sprov_snapshot_set_reg(from_saved, 15, (uint64_t)g[REG_R15]) != 0 ||
      sprov_snapshot_add_memory(from_saved, rsp, (const void*)(uintptr_t)rsp, (size_t)(end - rsp)) != 0 ||
      sprov_snapshot_add_maps(ctx, from_saved, maps) != 0) {
    printf("FAIL: a snapshot of the saved context: %s\n", sprov_last_error_message());
    exit(1);
  }
}

FIXTURE_FN static void capture_here(int which) {
  struct capture* c = &cap[which];
  c->bt_n = backtrace(c->bt, 64);
  c->saved_rip = (uint64_t)resumer_ctx.uc_mcontext.gregs[REG_RIP];
  c->saved_rsp = (uint64_t)resumer_ctx.uc_mcontext.gregs[REG_RSP];
  if (which == 1) snapshot_saved_context();
  if (sleep_mode) {
    printf("ready 0x%llx 0x%llx 0x%llx\n", (unsigned long long)(uintptr_t)&resumer_ctx,
           (unsigned long long)c->saved_rip, (unsigned long long)c->saved_rsp);
    fflush(stdout);
    for (;;) pause();
  }
  if (sprov_snapshot_capture_self(ctx, NULL, &c->snap) != 0) {
    printf("FAIL: capture: %s\n", sprov_last_error_message());
    exit(1);
  }
  NO_TAIL_CALL();
}

FIXTURE_FN static void coro_leaf(int n) {
  if (n > 0) capture_here(n - 2);
  NO_TAIL_CALL();
}

FIXTURE_FN static void coro_mid(int n) {
  coro_leaf(n + 1);
  NO_TAIL_CALL();
}

FIXTURE_FN static void coro_entry(void) {
  coro_mid(1); /* capture 0 */
  swapcontext(&coro_ctx, &resumer_ctx); /* yield */
  coro_mid(2); /* capture 1 */
  NO_TAIL_CALL();
}

FIXTURE_FN static void resume_registered(void) {
  rbt_n = backtrace(rbt, 64);
  swapcontext(&resumer_ctx, &coro_ctx);
  NO_TAIL_CALL();
}

FIXTURE_FN static void drive(void) {
  resume_registered();
  NO_TAIL_CALL();
}

static struct sprov_frame frame_of(const sprov_stack* st, size_t i) {
  struct sprov_frame f;
  memset(&f, 0, sizeof f);
  f.sz = sizeof f;
  sprov_stack_frame(st, i, &f);
  return f;
}

static void print_stack(const char* tag, sprov_symbolizer* sym, const sprov_stack* st) {
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    struct sprov_frame f = frame_of(st, i);
    struct sprov_symbol s;
    memset(&s, 0, sizeof s);
    s.sz = sizeof s;
    const char* name = sprov_symbolizer_frame(sym, st, i, &s) == 0 && s.name ? s.name : "??";
    printf("%s %zu pc 0x%llx %s domain %d %s\n", tag, i, (unsigned long long)f.pc, sprov_method_name(f.method),
           f.domain, name);
  }
  printf("%s stop %s\n", tag, sprov_stop_reason_name(sprov_stack_stop_reason(st)));
}

/* The coroutine's part of a walk: frame 0 and backtrace()'s frame 0 are capture_here (at the
 * sprov_snapshot_capture_self and backtrace() call sites); every caller frame must be backtrace()'s,
 * one for one, the last one __start_context, annotated with uc_link = &resumer_ctx. Returns the index
 * of the entry frame. */
static size_t check_coroutine_part(const char* tag, sprov_symbolizer* sym, const sprov_stack* st,
                                   const struct capture* c) {
  const size_t n = sprov_stack_frame_count(st);
  for (int i = 1; i < c->bt_n; i++) {
    if ((size_t)i >= n) {
      CHECK(0, "%s: %zu frames, backtrace() has %d", tag, n, c->bt_n);
      break;
    }
    struct sprov_frame f = frame_of(st, (size_t)i);
    CHECK(f.pc == (uint64_t)(uintptr_t)c->bt[i], "%s frame %d: pc 0x%llx, backtrace 0x%llx", tag, i,
          (unsigned long long)f.pc, (unsigned long long)(uintptr_t)c->bt[i]);
    CHECK(f.domain == SPROV_DOMAIN_USER, "%s frame %d: domain %d, want user", tag, i, f.domain);
  }
  const size_t entry = (size_t)c->bt_n - 1;
  if (entry < n) {
    struct sprov_symbol s;
    memset(&s, 0, sizeof s);
    s.sz = sizeof s;
    const char* name = sprov_symbolizer_frame(sym, st, entry, &s) == 0 && s.name ? s.name : "??";
    CHECK(strcmp(name, "__start_context") == 0, "%s: frame %zu is %s, want __start_context", tag, entry, name);
  }
  CHECK(sprov_stack_coroutine_link_count(st) == 1, "%s: %zu coroutine links, want 1", tag,
        sprov_stack_coroutine_link_count(st));
  struct sprov_coroutine_link l;
  memset(&l, 0, sizeof l);
  l.sz = sizeof l;
  if (sprov_stack_coroutine_link(st, 0, &l) == 0) {
    printf("%s uc_link frame %llu slot 0x%llx context 0x%llx pc 0x%llx sp 0x%llx %s+0x%llx\n", tag,
           (unsigned long long)l.frame, (unsigned long long)l.slot, (unsigned long long)l.context,
           (unsigned long long)l.pc, (unsigned long long)l.sp, l.module_path ? l.module_path : "??",
           (unsigned long long)l.module_offset);
    CHECK(l.frame == entry, "%s: the link annotates frame %llu, want %zu", tag, (unsigned long long)l.frame, entry);
    CHECK(l.context == (uint64_t)(uintptr_t)&resumer_ctx, "%s: uc_link 0x%llx, want &resumer_ctx %p", tag,
          (unsigned long long)l.context, (void*)&resumer_ctx);
    CHECK(l.has_regs && l.pc == c->saved_rip && l.sp == c->saved_rsp,
          "%s: uc_link context pc 0x%llx sp 0x%llx (has_regs %u), swapcontext saved rip 0x%llx rsp 0x%llx", tag,
          (unsigned long long)l.pc, (unsigned long long)l.sp, l.has_regs, (unsigned long long)c->saved_rip,
          (unsigned long long)c->saved_rsp);
  }
  return entry;
}

int main(int argc, char** argv) {
  sleep_mode = argc > 1 && strcmp(argv[1], "--sleep") == 0;
  if (sprov_context_new(NULL, &ctx) != 0) {
    printf("FAIL: context: %s\n", sprov_last_error_message());
    return 1;
  }
  getcontext(&coro_ctx);
  coro_ctx.uc_stack.ss_sp = stack;
  coro_ctx.uc_stack.ss_size = sizeof stack;
  coro_ctx.uc_link = &resumer_ctx;
  makecontext(&coro_ctx, coro_entry, 0);
  swapcontext(&resumer_ctx, &coro_ctx); /* capture 0, then the coroutine yields */

  /* Registration: errors first (overlap, unknown), then the stack with its resumer's context. */
  CHECK(sprov_async_register_stack(stack, sizeof stack, &resumer_ctx) == 0, "register: %s", sprov_last_error_message());
  CHECK(sprov_async_register_stack(stack + 4096, 4096, &resumer_ctx) == SPROV_ERR_INVALID_ARG,
        "an overlapping registration was accepted");
  CHECK(sprov_async_unregister_stack(stack + 1) == SPROV_ERR_NOT_FOUND, "unregistering an unknown stack did not fail");
  CHECK(sprov_async_register_stack(stack, sizeof stack, &resumer_ctx) == 0, "re-register: %s", sprov_last_error_message());
  drive(); /* capture 1; the coroutine returns to resumer_ctx, i.e. out of resume_registered's swapcontext */

  sprov_unwinder* uw = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_stack* st0 = NULL;
  sprov_stack* st1 = NULL;
  if (sprov_unwinder_new(ctx, NULL, &uw) != 0 || sprov_symbolizer_new(ctx, NULL, &sym) != 0 ||
      sprov_unwinder_unwind(uw, cap[0].snap, &st0) != 0 || sprov_unwinder_unwind(uw, cap[1].snap, &st1) != 0) {
    printf("FAIL: unwind: %s\n", sprov_last_error_message());
    return 1;
  }
  print_stack("unregistered", sym, st0);
  for (int i = 0; i < cap[0].bt_n; i++) printf("backtrace0 %d 0x%llx\n", i, (unsigned long long)(uintptr_t)cap[0].bt[i]);
  print_stack("registered", sym, st1);
  for (int i = 0; i < cap[1].bt_n; i++) printf("backtrace1 %d 0x%llx\n", i, (unsigned long long)(uintptr_t)cap[1].bt[i]);
  for (int i = 0; i < rbt_n; i++) printf("resumer backtrace %d 0x%llx\n", i, (unsigned long long)(uintptr_t)rbt[i]);

  /* 1. Unregistered: ends at the entry. */
  const size_t e0 = check_coroutine_part("unregistered", sym, st0, &cap[0]);
  CHECK(sprov_stack_frame_count(st0) == e0 + 1, "unregistered: %zu frames, backtrace() has %d",
        sprov_stack_frame_count(st0), cap[0].bt_n);
  CHECK(sprov_stack_stop_reason(st0) == SPROV_STOP_COROUTINE_ENTRY, "unregistered: stop reason %s, want coroutine_entry",
        sprov_stop_reason_name(sprov_stack_stop_reason(st0)));

  /* 2. Registered: the coroutine's frames, then the resumer's saved rip, then its callers. */
  const size_t e1 = check_coroutine_part("registered", sym, st1, &cap[1]);
  const size_t n1 = sprov_stack_frame_count(st1);
  CHECK(n1 == e1 + 1 + (size_t)rbt_n, "registered: %zu frames, want %zu (coroutine) + %d (resumer's backtrace())", n1, e1 + 1,
        rbt_n);
  if (e1 + 1 < n1) {
    struct sprov_frame b = frame_of(st1, e1 + 1);
    CHECK(b.method == SPROV_METHOD_ASYNC_BOUNDARY, "registered: frame %zu method %s, want async_boundary", e1 + 1,
          sprov_method_name(b.method));
    CHECK(b.pc == cap[1].saved_rip, "registered: boundary frame pc 0x%llx, swapcontext saved rip 0x%llx",
          (unsigned long long)b.pc, (unsigned long long)cap[1].saved_rip);
    CHECK(b.sp == cap[1].saved_rsp, "registered: boundary frame sp 0x%llx, saved rsp 0x%llx", (unsigned long long)b.sp,
          (unsigned long long)cap[1].saved_rsp);
  }
  for (int j = 0; j < rbt_n && e1 + 1 + (size_t)j < n1; j++) {
    struct sprov_frame f = frame_of(st1, e1 + 1 + (size_t)j);
    CHECK(f.domain == SPROV_DOMAIN_ASYNC, "registered: frame %zu domain %d, want async", e1 + 1 + (size_t)j, f.domain);
    if (j > 0)
      CHECK(f.pc == (uint64_t)(uintptr_t)rbt[j], "registered: frame %zu pc 0x%llx, resumer's backtrace %d 0x%llx",
            e1 + 1 + (size_t)j, (unsigned long long)f.pc, j, (unsigned long long)(uintptr_t)rbt[j]);
  }
  CHECK(sprov_stack_stop_reason(st1) == SPROV_STOP_END_OF_STACK, "registered: stop reason %s, want end_of_stack",
        sprov_stop_reason_name(sprov_stack_stop_reason(st1)));
  /* The frames past the boundary are a walk from the saved context, frame for frame. */
  sprov_stack* st_saved = NULL;
  if (sprov_unwinder_unwind(uw, from_saved, &st_saved) != 0) {
    printf("FAIL: unwinding the saved context: %s\n", sprov_last_error_message());
    return 1;
  }
  print_stack("from the saved context", sym, st_saved);
  CHECK(sprov_stack_frame_count(st_saved) == n1 - (e1 + 1), "from the saved context: %zu frames, past the boundary %zu",
        sprov_stack_frame_count(st_saved), n1 - (e1 + 1));
  for (size_t j = 0; j < sprov_stack_frame_count(st_saved) && e1 + 1 + j < n1; j++) {
    struct sprov_frame a = frame_of(st_saved, j), b = frame_of(st1, e1 + 1 + j);
    CHECK(a.pc == b.pc && a.sp == b.sp, "frame %zu past the boundary: pc 0x%llx sp 0x%llx, from the saved context 0x%llx 0x%llx",
          j, (unsigned long long)b.pc, (unsigned long long)b.sp, (unsigned long long)a.pc, (unsigned long long)a.sp);
  }
  CHECK(sprov_stack_stop_reason(st_saved) == sprov_stack_stop_reason(st1), "from the saved context: stop %s",
        sprov_stop_reason_name(sprov_stack_stop_reason(st_saved)));
  sprov_stack_free(st_saved);
  sprov_snapshot_free(from_saved);

  /* The registration and the memory past the boundary travel with the snapshot. */
  void* bytes = NULL;
  size_t len = 0;
  sprov_snapshot* back = NULL;
  sprov_stack* st2 = NULL;
  if (sprov_snapshot_serialize(cap[1].snap, &bytes, &len) != 0 || sprov_snapshot_deserialize(bytes, len, &back) != 0 ||
      sprov_unwinder_unwind(uw, back, &st2) != 0) {
    printf("FAIL: serialize/deserialize/unwind: %s\n", sprov_last_error_message());
    return 1;
  }
  CHECK(sprov_stack_frame_count(st2) == n1, "deserialized: %zu frames, want %zu", sprov_stack_frame_count(st2), n1);
  for (size_t i = 0; i < n1 && i < sprov_stack_frame_count(st2); i++) {
    struct sprov_frame a = frame_of(st1, i), b = frame_of(st2, i);
    CHECK(a.pc == b.pc && a.method == b.method && a.domain == b.domain, "deserialized: frame %zu differs", i);
  }

  CHECK(sprov_async_unregister_stack(stack) == 0, "unregister: %s", sprov_last_error_message());
  CHECK(sprov_async_unregister_stack(stack) == SPROV_ERR_NOT_FOUND, "unregistered twice");
  /* Bounded: SPROV_ASYNC_MAX_STACKS registrations, then SPROV_ERR_LIMIT. */
  static char small[SPROV_ASYNC_MAX_STACKS + 1][16];
  for (int i = 0; i < SPROV_ASYNC_MAX_STACKS; i++)
    CHECK(sprov_async_register_stack(small[i], 16, &resumer_ctx) == 0, "register small %d: %s", i, sprov_last_error_message());
  CHECK(sprov_async_register_stack(small[SPROV_ASYNC_MAX_STACKS], 16, &resumer_ctx) == SPROV_ERR_LIMIT,
        "registration past SPROV_ASYNC_MAX_STACKS was accepted");
  for (int i = 0; i < SPROV_ASYNC_MAX_STACKS; i++) sprov_async_unregister_stack(small[i]);

  sprov_free(bytes);
  sprov_stack_free(st0);
  sprov_stack_free(st1);
  sprov_stack_free(st2);
  sprov_snapshot_free(back);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(cap[0].snap);
  sprov_snapshot_free(cap[1].snap);
  sprov_context_free(ctx);
  printf("%s\n", failures ? "FAILED"
                          : "PASS: the coroutine's walk equals backtrace() and ends at its entry (coroutine_entry) with "
                            "uc_link's saved context; registered, it goes on at the resumer as its backtrace()");
  return failures ? 1 : 0;
}
