/* SPDX-License-Identifier: Apache-2.0 */
/* C11 client of the fast path (stackprov/fast.h) checked against glibc's backtrace() and dl_iterate_phdr. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "fast_check.h"
#include "stackprov/stackprov.h"

#define REQUIRE_OK(call)                                                                   \
  do {                                                                                     \
    int e_ = (call);                                                                       \
    if (e_ != 0) {                                                                         \
      fprintf(stderr, "FATAL %s:%d: %s = %d (%s)\n", __FILE__, __LINE__, #call, e_,        \
              sprov_last_error_message());                                                 \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

enum { kMax = 128 };

static sprov_context* g_ctx;
static sprov_address_space* g_as;
static volatile int g_sink;

/* ------------------------------------------------------------ the probe chain */

struct probe {
  void* bt[kMax];
  int bt_n;
  sprov_snapshot* snap;
};

__attribute__((noinline)) static int chain3(struct probe* p) {
  p->bt_n = backtrace(p->bt, kMax);
  int e = sprov_snapshot_capture_self(g_ctx, NULL, &p->snap);
  g_sink++;
  return e;
}
__attribute__((noinline)) static int chain2(struct probe* p) {
  int r = chain3(p);
  g_sink++;
  return r;
}
__attribute__((noinline)) static int chain1(struct probe* p) {
  int r = chain2(p);
  g_sink++;
  return r;
}

/* backtrace()'s entries 1.. are the return addresses of chain3's callers; frame 0 of a
   capture_self snapshot is the return address after the capture call (differs from
   backtrace's frame 0, which is after the backtrace call), its callers are the same. */
static void expect_callers_match(const char* what, const uint64_t* pcs, uint32_t n, const struct probe* p) {
  CHECK(p->bt_n >= 5, "%s: backtrace() gave %d frames", what, p->bt_n);
  CHECK(n == (uint32_t)p->bt_n, "%s: %u frames, backtrace() %d", what, n, p->bt_n);
  for (int i = 1; i < p->bt_n && (uint32_t)i < n; i++)
    CHECK(pcs[i] == (uint64_t)(uintptr_t)p->bt[i], "%s: frame %d pc 0x%llx, backtrace() %p", what, i,
          (unsigned long long)pcs[i], p->bt[i]);
}

/* -------------------------------------------------- unwind_into vs sprov_stack */

/* The pcs-only walk of `snap` equals its frames' walk (pcs, count, stop reason: `want`, `n`, `stop`)
   with the whole buffer, and with every capacity from 1 to n + 1 the frames' walk with that capacity. */
static void expect_pcs_only(const char* what, sprov_unwinder* uw, const sprov_snapshot* snap, const uint64_t* want,
                            uint32_t n, int32_t stop) {
  uint64_t only[kMax];
  struct sprov_unwind_buf ob = {.sz = sizeof ob, .pcs = only, .capacity = kMax};
  REQUIRE_OK(sprov_unwinder_unwind_into(uw, snap, &ob));
  CHECK(ob.count == n && ob.stop_reason == stop, "%s: pcs only: %u frames, stop %s; with frames %u, stop %s", what,
        ob.count, sprov_stop_reason_name(ob.stop_reason), n, sprov_stop_reason_name(stop));
  for (uint32_t i = 0; i < n && i < ob.count; i++)
    CHECK(only[i] == want[i], "%s: pcs only: frame %u pc 0x%llx, with frames 0x%llx", what, i,
          (unsigned long long)only[i], (unsigned long long)want[i]);
  for (uint32_t cap = 1; cap <= n + 1 && cap <= kMax; cap++) {
    struct sprov_raw_frame fr[kMax];
    uint64_t a[kMax], b[kMax];
    struct sprov_unwind_buf fb = {.sz = sizeof fb, .frames = fr, .pcs = a, .capacity = cap,
                                  .frame_sz = sizeof(struct sprov_raw_frame)};
    struct sprov_unwind_buf pb = {.sz = sizeof pb, .pcs = b, .capacity = cap};
    REQUIRE_OK(sprov_unwinder_unwind_into(uw, snap, &fb));
    REQUIRE_OK(sprov_unwinder_unwind_into(uw, snap, &pb));
    CHECK(pb.count == fb.count && pb.stop_reason == fb.stop_reason && memcmp(a, b, fb.count * sizeof a[0]) == 0,
          "%s: capacity %u: pcs only %u frames, stop %s; with frames %u, stop %s", what, cap, pb.count,
          sprov_stop_reason_name(pb.stop_reason), fb.count, sprov_stop_reason_name(fb.stop_reason));
  }
}

static void test_unwind_into(const struct probe* p) {
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMax);
  sprov_unwinder* uw = NULL;
  REQUIRE_OK(sprov_unwinder_new(g_ctx, &uo, &uw));
  sprov_stack* st = NULL;
  REQUIRE_OK(sprov_unwinder_unwind(uw, p->snap, &st));

  struct sprov_raw_frame frames[kMax];
  uint64_t pcs[kMax];
  struct sprov_unwind_buf buf = {.sz = sizeof buf, .frames = frames, .pcs = pcs, .capacity = kMax,
                                 .frame_sz = sizeof(struct sprov_raw_frame)};
  REQUIRE_OK(sprov_unwinder_unwind_into(uw, p->snap, &buf));
  CHECK(buf.count == sprov_stack_frame_count(st), "unwind_into %u frames, unwind %zu", buf.count,
        sprov_stack_frame_count(st));
  CHECK(buf.stop_reason == sprov_stack_stop_reason(st), "stop %d vs %d", buf.stop_reason, sprov_stack_stop_reason(st));
  CHECK(buf.stop_reason == SPROV_STOP_END_OF_STACK, "stop reason %s", sprov_stop_reason_name(buf.stop_reason));
  CHECK(buf.generation == 0, "a snapshot walk has generation 0, got %llu", (unsigned long long)buf.generation);
  for (uint32_t i = 0; i < buf.count && i < sprov_stack_frame_count(st); i++) {
    struct sprov_frame f = {.sz = sizeof f};
    REQUIRE_OK(sprov_stack_frame(st, i, &f));
    CHECK(frames[i].pc == f.pc && pcs[i] == f.pc, "frame %u pc 0x%llx vs 0x%llx", i, (unsigned long long)frames[i].pc,
          (unsigned long long)f.pc);
    CHECK(frames[i].sp == f.sp && frames[i].cfa == f.cfa, "frame %u sp/cfa", i);
    CHECK(frames[i].method == f.method && frames[i].module_index == f.module_index, "frame %u method %d/%d", i,
          frames[i].method, f.method);
    CHECK(frames[i].module_offset == f.module_offset, "frame %u module_offset", i);
    CHECK(frames[i].flags == f.flags, "frame %u flags 0x%x vs 0x%x", i, frames[i].flags, f.flags);
    /* capture_self: every frame's pc is a return address */
    CHECK(frames[i].flags & SPROV_FRAME_RETURN_ADDRESS, "frame %u flags 0x%x lack RETURN_ADDRESS", i, frames[i].flags);
  }
  expect_callers_match("unwind_into", pcs, buf.count, p);

  /* pcs alone (a profiler's walk: no frame records, Unwinder::walk_pcs): backtrace()'s callers, and
     the frames' walk at every capacity (max_frames inside and after the common run). */
  expect_pcs_only("unwind_into", uw, p->snap, pcs, buf.count, buf.stop_reason);
  expect_callers_match("unwind_into pcs only", pcs, buf.count, p);

  /* pcs only, and a buffer smaller than the stack: max_frames. */
  uint64_t few[3];
  struct sprov_unwind_buf small = {.sz = sizeof small, .pcs = few, .capacity = 3};
  REQUIRE_OK(sprov_unwinder_unwind_into(uw, p->snap, &small));
  CHECK(small.count == 3 && small.stop_reason == SPROV_STOP_MAX_FRAMES, "capacity 3: %u frames, stop %s", small.count,
        sprov_stop_reason_name(small.stop_reason));
  CHECK(few[0] == pcs[0] && few[2] == pcs[2], "capacity 3: pcs differ");

  /* An older caller whose frame struct is 40 bytes long: nothing is written past each 40. */
  unsigned char old[4 * 40 + 8];
  memset(old, 0xab, sizeof old);
  struct sprov_unwind_buf ob = {.sz = sizeof ob, .frames = (struct sprov_raw_frame*)(void*)old, .capacity = 4,
                                .frame_sz = 40};
  REQUIRE_OK(sprov_unwinder_unwind_into(uw, p->snap, &ob));
  uint64_t pc1;
  memcpy(&pc1, old + 40, 8);
  CHECK(ob.count == 4 && pc1 == pcs[1], "frame_sz 40: frame 1 pc 0x%llx", (unsigned long long)pc1);
  CHECK(old[4 * 40] == 0xab, "frame_sz 40: wrote past the buffer");

  /* Bad buffers are refused with a message. */
  struct sprov_unwind_buf none = {.sz = sizeof none, .capacity = 4};
  CHECK(sprov_unwinder_unwind_into(uw, p->snap, &none) == SPROV_ERR_INVALID_ARG, "no frames, no pcs accepted");
  CHECK(strstr(sprov_last_error_message(), "neither frames nor pcs") != NULL, "message: %s", sprov_last_error_message());

  sprov_stack_free(st);
  sprov_unwinder_free(uw);
}

/* --------------------------------------------- the address space vs the loader */

struct phdr_check {
  int objects;
};

static int check_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct phdr_check* c = data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    const uint64_t at = (uint64_t)info->dlpi_addr + ph->p_vaddr;
    size_t n = sprov_address_space_module_count(g_as);
    int found = 0;
    for (size_t m = 0; m < n; m++) {
      struct sprov_module_info mi = {.sz = sizeof mi};
      REQUIRE_OK(sprov_address_space_module(g_as, m, &mi));
      if (at < mi.start || at >= mi.end) continue;
      found = 1;
      CHECK(mi.load_bias == (uint64_t)info->dlpi_addr, "%s: load bias 0x%llx, the loader's 0x%llx", mi.path,
            (unsigned long long)mi.load_bias, (unsigned long long)info->dlpi_addr);
      if (info->dlpi_name[0] == '/') {
        char* real = realpath(info->dlpi_name, NULL);
        CHECK(real && strcmp(mi.path, real) == 0, "path %s vs %s (%s)", mi.path, info->dlpi_name, real ? real : "?");
        free(real);
      }
      if (strncmp(info->dlpi_name, "linux-vdso", 10) == 0) CHECK(strcmp(mi.path, "[vdso]") == 0, "vdso named %s", mi.path);
    }
    CHECK(found, "object '%s': code at 0x%llx is in no module of the address space", info->dlpi_name,
          (unsigned long long)at);
    c->objects++;
  }
  return 0;
}

static void test_address_space(void) {
  struct phdr_check c = {0};
  dl_iterate_phdr(check_object, &c);
  CHECK(c.objects >= 3, "dl_iterate_phdr saw %d code segments", c.objects);
  CHECK(sprov_address_space_generation(g_as) == 1, "generation %llu after new",
        (unsigned long long)sprov_address_space_generation(g_as));
  /* Nothing changed: a refresh publishes no new generation. */
  REQUIRE_OK(sprov_address_space_refresh(g_as));
  CHECK(sprov_address_space_generation(g_as) == 1, "generation %llu after an idle refresh",
        (unsigned long long)sprov_address_space_generation(g_as));
}

/* ------------------------------------- incremental updates and perf MMAP2 records */

struct libc_code {
  uint64_t start, end, offset, bias;
  char path[4096];
};

static int find_libc(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct libc_code* c = data;
  if (strstr(info->dlpi_name, "/libc.so") == NULL) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    c->start = (info->dlpi_addr + ph->p_vaddr) & ~4095ull;
    c->end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + 4095) & ~4095ull;
    c->offset = ph->p_offset & ~4095ull;
    c->bias = info->dlpi_addr;
    char* real = realpath(info->dlpi_name, NULL);
    snprintf(c->path, sizeof c->path, "%s", real ? real : info->dlpi_name);
    free(real);
    return 1;
  }
  return 0;
}

/* A PERF_RECORD_MMAP2 (include/uapi/linux/perf_event.h) without build-id, as the kernel writes it. */
static size_t mmap2_record(unsigned char* rec, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
                           uint32_t prot, const char* path) {
  const size_t name = (strlen(path) + 1 + 7) & ~(size_t)7, size = 8 + 64 + name;
  memset(rec, 0, size);
  const uint32_t type = 10;
  const uint16_t misc = 2 /* PERF_RECORD_MISC_USER */, sz = (uint16_t)size;
  memcpy(rec, &type, 4);
  memcpy(rec + 4, &misc, 2);
  memcpy(rec + 6, &sz, 2);
  memcpy(rec + 8, &pid, 4);
  memcpy(rec + 12, &pid, 4);
  memcpy(rec + 16, &start, 8);
  memcpy(rec + 24, &len, 8);
  memcpy(rec + 32, &pgoff, 8);
  memcpy(rec + 64, &prot, 4);
  memcpy(rec + 72, path, strlen(path));
  return size;
}

static void test_updates(void) {
  struct libc_code libc;
  memset(&libc, 0, sizeof libc);
  dl_iterate_phdr(find_libc, &libc);
  CHECK(libc.start != 0, "libc's code segment not found");
  if (libc.start == 0) return;
  SPROV_OPTS(sprov_address_space_opts, ao, .flags = SPROV_AS_EMPTY);
  sprov_address_space* as = NULL;
  REQUIRE_OK(sprov_address_space_new(g_ctx, &ao, &as));
  CHECK(sprov_address_space_generation(as) == 0 && sprov_address_space_module_count(as) == 0, "empty: gen %llu",
        (unsigned long long)sprov_address_space_generation(as));

  unsigned char rec[8192];
  size_t n = mmap2_record(rec, (uint32_t)getpid(), libc.start, libc.end - libc.start, libc.offset, 5, libc.path);
  REQUIRE_OK(sprov_address_space_perf_record(as, rec, n));
  struct sprov_module_info mi = {.sz = sizeof mi};
  CHECK(sprov_address_space_generation(as) == 1 && sprov_address_space_module_count(as) == 1, "MMAP2: gen %llu, %zu modules",
        (unsigned long long)sprov_address_space_generation(as), sprov_address_space_module_count(as));
  if (sprov_address_space_module_count(as) == 1) {
    REQUIRE_OK(sprov_address_space_module(as, 0, &mi));
    CHECK(strcmp(mi.path, libc.path) == 0 && mi.start == libc.start && mi.end == libc.end, "MMAP2 module %s", mi.path);
    CHECK(mi.load_bias == libc.bias, "MMAP2: load bias 0x%llx, the loader's 0x%llx", (unsigned long long)mi.load_bias,
          (unsigned long long)libc.bias);
    CHECK(mi.build_id_len == 20, "MMAP2: build-id of %u bytes read from %s", mi.build_id_len, mi.path);
  }
  /* Another process's record, and a data mapping elsewhere: nothing changes. */
  n = mmap2_record(rec, (uint32_t)getpid() + 1, 0x1000, 0x1000, 0, 5, libc.path);
  REQUIRE_OK(sprov_address_space_perf_record(as, rec, n));
  n = mmap2_record(rec, (uint32_t)getpid(), 0x10000, 0x1000, 0, 3, "/dev/zero");
  REQUIRE_OK(sprov_address_space_perf_record(as, rec, n));
  CHECK(sprov_address_space_generation(as) == 1, "ignored records published generation %llu",
        (unsigned long long)sprov_address_space_generation(as));
  /* munmap of the upper half: the module ends there. */
  const uint64_t mid = libc.start + (((libc.end - libc.start) / 2) & ~4095ull);
  REQUIRE_OK(sprov_address_space_remove_range(as, mid, libc.end));
  CHECK(sprov_address_space_generation(as) == 2 && sprov_address_space_module_count(as) == 1, "unmap: gen %llu",
        (unsigned long long)sprov_address_space_generation(as));
  REQUIRE_OK(sprov_address_space_module(as, 0, &mi));
  CHECK(mi.start == libc.start && mi.end == mid, "unmap: module 0x%llx-0x%llx, expected end 0x%llx",
        (unsigned long long)mi.start, (unsigned long long)mi.end, (unsigned long long)mid);
  /* A PERF_RECORD_COMM with PERF_RECORD_MISC_COMM_EXEC (1 << 13): a new address space. */
  unsigned char comm[32] = {0};
  const uint32_t type = 3, pid = (uint32_t)getpid();
  const uint16_t misc = 1u << 13, sz = 32;
  memcpy(comm, &type, 4);
  memcpy(comm + 4, &misc, 2);
  memcpy(comm + 6, &sz, 2);
  memcpy(comm + 8, &pid, 4);
  memcpy(comm + 12, &pid, 4);
  memcpy(comm + 16, "fast_client", 11);
  REQUIRE_OK(sprov_address_space_perf_record(as, comm, sizeof comm));
  CHECK(sprov_address_space_generation(as) == 3 && sprov_address_space_module_count(as) == 0, "exec: gen %llu, %zu modules",
        (unsigned long long)sprov_address_space_generation(as), sprov_address_space_module_count(as));
  /* add_mapping: the same module through the mapping struct. */
  struct sprov_mapping m = {.sz = sizeof m, .start = libc.start, .end = libc.end, .file_offset = libc.offset,
                            .path = libc.path, .prot = 5};
  REQUIRE_OK(sprov_address_space_add_mapping(as, &m));
  CHECK(sprov_address_space_module_count(as) == 1, "add_mapping: %zu modules", sprov_address_space_module_count(as));
  REQUIRE_OK(sprov_address_space_exec(as));
  CHECK(sprov_address_space_module_count(as) == 0, "exec: %zu modules", sprov_address_space_module_count(as));
  /* A truncated record is refused naming it. */
  CHECK(sprov_address_space_perf_record(as, rec, 20) == SPROV_ERR_TRUNCATED, "a 20-byte MMAP2 record accepted");
  sprov_address_space_free(as);
}

/* ----------------------------------------------------- raw registers + stack */

struct raw_copy {
  uint64_t regs[64];
  uint64_t mask;
  uint64_t sp;
  unsigned char* stack;
  size_t len;
};

static void copy_raw(const sprov_snapshot* snap, struct raw_copy* rc) {
  memset(rc, 0, sizeof *rc);
  for (uint32_t r = 0; r < 64; r++)
    if (sprov_snapshot_reg(snap, r, &rc->regs[r]) == 0) rc->mask |= 1ull << r;
  const uint32_t sp_reg = sprov_snapshot_arch(snap) == SPROV_ARCH_X86_64 ? 7 : sprov_snapshot_arch(snap) == SPROV_ARCH_ARM64 ? 31 : 29;
  rc->sp = rc->regs[sp_reg];
  rc->stack = malloc(1 << 20);
  /* Pages first, then smaller pieces: sp is not page-aligned, so the copied stack's top is
     usually not sp + k * 4096 and the outermost frames live in that last partial piece. */
  for (size_t chunk = 4096; chunk >= 8; chunk /= 2)
    while (rc->len + chunk <= (1u << 20) &&
           sprov_snapshot_read_memory(snap, rc->sp + rc->len, rc->stack + rc->len, chunk) == 0)
      rc->len += chunk;
}

static void test_raw(const struct probe* p, struct raw_copy* rc) {
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMax);
  sprov_unwinder* uw = NULL;
  REQUIRE_OK(sprov_unwinder_new(g_ctx, &uo, &uw));
  CHECK(rc->len >= 4096, "stack copy of %zu bytes", rc->len);
  SPROV_OPTS(sprov_raw_input, in, .regs_format = SPROV_REGS_DWARF, .flags = SPROV_RAW_PC_IS_RETURN_ADDRESS,
             .regs = rc->regs, .regs_len = sizeof rc->regs, .regs_mask = rc->mask, .stack_addr = rc->sp,
             .stack = rc->stack, .stack_len = rc->len);
  struct sprov_raw_frame frames[kMax];
  uint64_t pcs[kMax];
  struct sprov_unwind_buf buf = {.sz = sizeof buf, .frames = frames, .pcs = pcs, .capacity = kMax,
                                 .frame_sz = sizeof(struct sprov_raw_frame)};
  REQUIRE_OK(sprov_unwinder_unwind_raw(uw, g_as, &in, &buf));
  CHECK(buf.stop_reason == SPROV_STOP_END_OF_STACK, "raw: stop %s", sprov_stop_reason_name(buf.stop_reason));
  CHECK(buf.generation == sprov_address_space_generation(g_as), "raw: generation %llu",
        (unsigned long long)buf.generation);
  expect_callers_match("raw dwarf regs", pcs, buf.count, p);
  for (uint32_t i = 0; i < buf.count; i++) {
    CHECK(frames[i].module_index >= 0, "raw frame %u in no module", i);
    if (frames[i].module_index < 0) continue;
    struct sprov_module_info mi = {.sz = sizeof mi};
    REQUIRE_OK(sprov_address_space_module(g_as, (size_t)frames[i].module_index, &mi));
    CHECK(frames[i].pc >= mi.start && frames[i].pc - 1 < mi.end, "raw frame %u outside its module %s", i, mi.path);
    CHECK(frames[i].module_offset == frames[i].pc - mi.load_bias, "raw frame %u module_offset", i);
  }

  /* Unknown format and truncated register blocks are errors naming the value. */
  SPROV_OPTS(sprov_raw_input, bad, .regs_format = 42, .regs = rc->regs, .regs_len = 8);
  CHECK(sprov_unwinder_unwind_raw(uw, g_as, &bad, &buf) == SPROV_ERR_INVALID_ARG, "format 42 accepted");
  CHECK(strstr(sprov_last_error_message(), "42") != NULL, "message: %s", sprov_last_error_message());
  SPROV_OPTS(sprov_raw_input, shortp, .regs_format = SPROV_REGS_PTRACE, .regs = rc->regs, .regs_len = 16);
  CHECK(sprov_unwinder_unwind_raw(uw, g_as, &shortp, &buf) == SPROV_ERR_TRUNCATED, "16-byte ptrace regs accepted");
  sprov_unwinder_free(uw);
}

/* --------------------------------------- trampolines: a [uprobes] return address */

#if defined(__x86_64__)
static void test_trampoline(const struct probe* p, const struct raw_copy* rc) {
  /* The process's maps plus a [uprobes] page where nothing is mapped. */
  const uint64_t tramp = 0x10000, tramp_pc = tramp + 0x40;
  FILE* f = fopen("/proc/self/maps", "r");
  char* text = calloc(1, 1 << 20);
  size_t n = f ? fread(text, 1, (1 << 20) - 128, f) : 0;
  if (f) fclose(f);
  snprintf(text + n, 128, "%llx-%llx r-xp 00000000 00:00 0                          [uprobes]\n",
           (unsigned long long)tramp, (unsigned long long)(tramp + 0x1000));
  SPROV_OPTS(sprov_address_space_opts, ao, .flags = SPROV_AS_EMPTY);
  sprov_address_space* as = NULL;
  REQUIRE_OK(sprov_address_space_new(g_ctx, &ao, &as));
  REQUIRE_OK(sprov_address_space_load_maps(as, text));
  free(text);

  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMax);
  sprov_unwinder* uw = NULL;
  REQUIRE_OK(sprov_unwinder_new(g_ctx, &uo, &uw));
  struct sprov_raw_frame good[kMax], frames[kMax];
  struct sprov_unwind_buf buf = {.sz = sizeof buf, .frames = good, .capacity = kMax,
                                 .frame_sz = sizeof(struct sprov_raw_frame)};
  SPROV_OPTS(sprov_raw_input, in, .regs_format = SPROV_REGS_DWARF, .flags = SPROV_RAW_PC_IS_RETURN_ADDRESS,
             .regs = rc->regs, .regs_len = sizeof rc->regs, .regs_mask = rc->mask, .stack_addr = rc->sp,
             .stack = rc->stack, .stack_len = rc->len);
  REQUIRE_OK(sprov_unwinder_unwind_raw(uw, as, &in, &buf));
  const uint32_t good_n = buf.count;
  CHECK(good_n >= 4, "trampoline base walk: %u frames", good_n);
  (void)p;

  /* x86_64: the return address of frame 2 (chain2's return into chain1) sits at frame 1's cfa - 8. */
  const uint64_t slot = good[1].cfa - 8;
  unsigned char* stack = malloc(rc->len);
  memcpy(stack, rc->stack, rc->len);
  uint64_t real;
  memcpy(&real, stack + (slot - rc->sp), 8);
  CHECK(real == good[2].pc, "slot 0x%llx holds 0x%llx, frame 2 pc 0x%llx", (unsigned long long)slot,
        (unsigned long long)real, (unsigned long long)good[2].pc);
  memcpy(stack + (slot - rc->sp), &tramp_pc, 8);
  in.stack = stack;

  /* Without shadow records the walk shows the trampoline pc. */
  buf.frames = frames;
  REQUIRE_OK(sprov_unwinder_unwind_raw(uw, as, &in, &buf));
  CHECK(buf.count >= 3 && frames[2].pc == tramp_pc, "no records: frame 2 pc 0x%llx, expected the trampoline 0x%llx",
        (unsigned long long)frames[2].pc, (unsigned long long)tramp_pc);
  CHECK(frames[2].module_index == -1 && buf.repaired == 0, "no records: frame 2 module %d, repaired %u",
        frames[2].module_index, buf.repaired);

  /* With the record (real return address, slot) the frame is repaired and tagged; an
     unrelated record deeper in the stack is not used. */
  struct sprov_shadow_entry shadow[2] = {{real, slot}, {0x1234, rc->sp + rc->len - 8}};
  in.shadow = shadow;
  in.shadow_count = 2;
  REQUIRE_OK(sprov_unwinder_unwind_raw(uw, as, &in, &buf));
  CHECK(buf.count == good_n, "repaired: %u frames, untouched stack %u", buf.count, good_n);
  CHECK(buf.repaired == 1, "repaired %u", buf.repaired);
  for (uint32_t i = 0; i < buf.count && i < good_n; i++) {
    CHECK(frames[i].pc == good[i].pc && frames[i].sp == good[i].sp, "repaired frame %u pc 0x%llx vs 0x%llx", i,
          (unsigned long long)frames[i].pc, (unsigned long long)good[i].pc);
    const int want = i == 2 ? SPROV_METHOD_TRAMPOLINE : good[i].method;
    CHECK(frames[i].method == want, "repaired frame %u method %s, expected %s", i, sprov_method_name(frames[i].method),
          sprov_method_name(want));
  }
  free(stack);
  sprov_unwinder_free(uw);
  sprov_address_space_free(as);
}
#endif

/* -------------------------------------------------------- signal handler */

static sprov_unwinder* g_sig_uw;
static struct sprov_raw_frame g_sig_frames[kMax];
static struct sprov_unwind_buf g_sig_buf;
static int g_sig_rc = -1;
static void* g_sig_bt[kMax];
static int g_sig_bt_n;

static void on_usr1(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)si;
  g_sig_rc = sprov_unwinder_unwind_signal(g_sig_uw, g_as, uc, &g_sig_buf);
  g_sig_bt_n = backtrace(g_sig_bt, kMax); /* warmed up in main(): no lazy loading here */
}

/* A snapshot taken in a signal handler: its walk crosses the sigreturn trampoline (a frame the
   pcs-only walk leaves to the ladder, then takes up again). backtrace() in the handler is the oracle. */
static sprov_snapshot* g_hsnap;
static void* g_hbt[kMax];
static int g_hbt_n;
static void on_usr2(int sig) {
  (void)sig;
  g_hbt_n = backtrace(g_hbt, kMax);
  if (sprov_snapshot_capture_self(g_ctx, NULL, &g_hsnap) != 0) g_hsnap = NULL;
}
static void __attribute__((noinline)) raise_usr2(void) {
  raise(SIGUSR2);
  __asm__ volatile("" ::: "memory");
}

static void test_pcs_only_signal(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr2;
  sigaction(SIGUSR2, &sa, NULL);
  raise_usr2();
  CHECK(g_hsnap != NULL, "capture in a signal handler failed");
  if (g_hsnap == NULL) return;
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMax);
  sprov_unwinder* uw = NULL;
  REQUIRE_OK(sprov_unwinder_new(g_ctx, &uo, &uw));
  struct sprov_raw_frame frames[kMax];
  uint64_t pcs[kMax];
  struct sprov_unwind_buf buf = {.sz = sizeof buf, .frames = frames, .pcs = pcs, .capacity = kMax,
                                 .frame_sz = sizeof(struct sprov_raw_frame)};
  REQUIRE_OK(sprov_unwinder_unwind_into(uw, g_hsnap, &buf));
  CHECK(buf.stop_reason == SPROV_STOP_END_OF_STACK, "handler snapshot: stop %s", sprov_stop_reason_name(buf.stop_reason));
  /* backtrace()'s frame 0 is in on_usr2 after its call, ours in the capture: from the signal frame
     (the trampoline, method signal) on they are the same return addresses. */
  uint32_t sig = 0;
  while (sig < buf.count && frames[sig].method != SPROV_METHOD_SIGNAL) sig++;
  CHECK(sig < buf.count, "handler snapshot: no frame found through the signal frame");
  int at = -1;
  for (int i = 0; i < g_hbt_n && at < 0 && sig < buf.count; i++)
    if ((uint64_t)(uintptr_t)g_hbt[i] == pcs[sig]) at = i;
  CHECK(at >= 0, "handler snapshot: the interrupted pc is not in backtrace()");
  if (at >= 0) {
    CHECK(buf.count - sig == (uint32_t)(g_hbt_n - at), "handler snapshot: %u frames after the signal, backtrace() %d",
          buf.count - sig, g_hbt_n - at);
    for (int i = at; i < g_hbt_n && sig + (uint32_t)(i - at) < buf.count; i++)
      CHECK((uint64_t)(uintptr_t)g_hbt[i] == pcs[sig + (uint32_t)(i - at)], "handler snapshot: frame %d, backtrace() %p",
            i, g_hbt[i]);
  }
  expect_pcs_only("handler snapshot", uw, g_hsnap, pcs, buf.count, buf.stop_reason);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(g_hsnap);
}

static void test_signal(void) {
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMax);
  REQUIRE_OK(sprov_unwinder_new(g_ctx, &uo, &g_sig_uw));
  CHECK(sprov_unwinder_unwind_signal(g_sig_uw, g_as, &uo, &g_sig_buf) == SPROV_ERR_INVALID_ARG,
        "unwind_signal without a registered stack accepted");
  REQUIRE_OK(sprov_unwinder_set_stack(g_sig_uw, 0, 0));
  g_sig_buf.sz = sizeof g_sig_buf;
  g_sig_buf.frames = g_sig_frames;
  g_sig_buf.capacity = kMax;
  g_sig_buf.frame_sz = sizeof(struct sprov_raw_frame);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_usr1;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, NULL);
  raise(SIGUSR1);
  CHECK(g_sig_rc == 0, "unwind_signal returned %d", g_sig_rc);
  if (g_sig_rc != 0) return;
  CHECK(g_sig_buf.stop_reason == SPROV_STOP_END_OF_STACK, "signal: stop %s",
        sprov_stop_reason_name(g_sig_buf.stop_reason));
  CHECK(!(g_sig_frames[0].flags & SPROV_FRAME_RETURN_ADDRESS), "signal: frame 0 is the interrupted pc, flags 0x%x",
        g_sig_frames[0].flags);
  /* backtrace() in the handler lists the handler, the sigreturn trampoline, then the
     interrupted pc and its callers: those must be our frames, in order. */
  int at = -1;
  for (int i = 0; i < g_sig_bt_n && at < 0; i++)
    if ((uint64_t)(uintptr_t)g_sig_bt[i] == g_sig_frames[0].pc) at = i;
  CHECK(at >= 0, "signal: interrupted pc 0x%llx not in backtrace()", (unsigned long long)g_sig_frames[0].pc);
  if (at < 0) return;
  CHECK(g_sig_buf.count == (uint32_t)(g_sig_bt_n - at), "signal: %u frames, backtrace() %d after the signal frame",
        g_sig_buf.count, g_sig_bt_n - at);
  for (int i = at; i < g_sig_bt_n && (uint32_t)(i - at) < g_sig_buf.count; i++)
    CHECK((uint64_t)(uintptr_t)g_sig_bt[i] == g_sig_frames[i - at].pc, "signal: frame %d pc 0x%llx, backtrace() %p",
          i - at, (unsigned long long)g_sig_frames[i - at].pc, g_sig_bt[i]);
  sprov_unwinder_free(g_sig_uw);
}

int main(void) {
  void* warm[4];
  backtrace(warm, 4); /* loads libgcc_s now, not inside the signal handler */
  REQUIRE_OK(sprov_context_new(NULL, &g_ctx));
  SPROV_OPTS(sprov_address_space_opts, ao, .pid = 0);
  REQUIRE_OK(sprov_address_space_new(g_ctx, &ao, &g_as));

  struct probe p;
  memset(&p, 0, sizeof p);
  REQUIRE_OK(chain1(&p));
  test_unwind_into(&p);
  test_address_space();
  test_updates();
  struct raw_copy rc;
  copy_raw(p.snap, &rc);
  test_raw(&p, &rc);
#if defined(__x86_64__)
  test_trampoline(&p, &rc);
#endif
  test_signal();
  test_pcs_only_signal();

  free(rc.stack);
  sprov_snapshot_free(p.snap);
  sprov_address_space_free(g_as);
  sprov_context_free(g_ctx);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("fast_client: unwind_into, address space, raw regs, trampoline repair and signal unwinding agree with "
         "backtrace() and dl_iterate_phdr\n");
  return 0;
}
