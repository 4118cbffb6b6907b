/* SPDX-License-Identifier: Apache-2.0 */
/* A SIGPROF sampling profiler (1 kHz, 10 s) on stackprov's signal-handler entry point, over threads that
   malloc/free and dlopen/dlclose while another thread updates the address space. Every sample must walk
   to _start / clone3 / start_thread (named by llvm-symbolizer) or end with a stated reason; sampled stacks
   must equal the snapshot unwinder's on a copy of the same registers and stack bytes; no deadlock.
   Usage: fast_sigprof DL_LIB LLVM_SYMBOLIZER [SECONDS] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "stackprov/stackprov.h"

/* kRedZone: the System V x86_64 red zone below sp, which the kernel leaves intact when it delivers a
   signal. The CFI of an epilogue still names save slots there after the pops (glibc's __cxa_finalize at
   `pop %r14` restores rbp from CFA-48 = sp-24), and the signal walk reads them: the copy must hold them
   too, or the snapshot walk loses rbp where the signal walk does not. */
enum { kMaxFrames = 64, kMaxSamples = 14000, kCopyEvery = 16, kMaxCopies = 200, kCopyBytes = 64 << 10,
       kRedZone = 128, kThreads = 4, kMaxGens = 1 << 16 };

struct sample {
  uint64_t pcs[kMaxFrames];
  uint64_t generation;
  uint32_t count;
  int32_t stop;
  int32_t rc;
  int32_t copy; /* index into the thread's copies, -1 */
};

struct copy {
  ucontext_t uc;
  uint64_t sp; /* where the copy starts: the interrupted sp less the red zone */
  uint32_t len;
  struct sprov_raw_frame frames[kMaxFrames];
  unsigned char stack[kCopyBytes];
};

struct tstate {
  const char* role;
  sprov_unwinder* uw;
  uint64_t stack_hi;
  struct sample* samples;
  uint32_t n;
  struct copy* copies;
  uint32_t ncopies;
  uint32_t dropped;
  timer_t timer;
};

static sprov_context* g_ctx;
static sprov_address_space* g_as;
static __thread struct tstate* tls_state;
static atomic_int g_stop;
static atomic_uint g_unregistered;
static struct tstate g_threads[kThreads];
static char* g_gen_maps[kMaxGens]; /* the maps text each generation was published from */
static const char* g_lib;
static volatile uint64_t g_sink;

static void fatal(const char* what) {
  fprintf(stderr, "fast_sigprof: %s: %s (%s)\n", what, strerror(errno), sprov_last_error_message());
  exit(2);
}

/* ------------------------------------------------------------ signal handler */

static void on_prof(int sig, siginfo_t* si, void* ucv) {
  (void)sig;
  (void)si;
  const int saved = errno;
  struct tstate* t = tls_state;
  if (t == NULL) {
    atomic_fetch_add(&g_unregistered, 1);
    errno = saved;
    return;
  }
  if (t->n >= kMaxSamples) {
    t->dropped++;
    errno = saved;
    return;
  }
  struct sample* s = &t->samples[t->n];
  struct copy* c = NULL;
  if (t->n % kCopyEvery == 0 && t->ncopies < kMaxCopies) c = &t->copies[t->ncopies];
  struct sprov_raw_frame frames[kMaxFrames];
  struct sprov_unwind_buf buf = {.sz = sizeof buf, .frames = c ? c->frames : frames, .pcs = s->pcs,
                                 .capacity = kMaxFrames, .frame_sz = sizeof(struct sprov_raw_frame)};
  s->rc = sprov_unwinder_unwind_signal(t->uw, g_as, ucv, &buf);
  s->count = buf.count;
  s->stop = buf.stop_reason;
  s->generation = buf.generation;
  s->copy = -1;
  if (c != NULL && s->rc == 0) {
    const ucontext_t* uc = ucv;
    c->uc = *uc;
    c->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP] - kRedZone;
    uint64_t len = t->stack_hi - c->sp;
    c->len = (uint32_t)(len < kCopyBytes ? len : kCopyBytes);
    memcpy(c->stack, (const void*)(uintptr_t)c->sp, c->len);
    s->copy = (int32_t)t->ncopies++;
  }
  t->n++;
  errno = saved;
}

/* ----------------------------------------------------------------- workload */

static void register_thread(struct tstate* t, const char* role) {
  t->role = role;
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMaxFrames);
  if (sprov_unwinder_new(g_ctx, &uo, &t->uw) != 0) fatal("sprov_unwinder_new");
  if (sprov_unwinder_set_stack(t->uw, 0, 0) != 0) fatal("sprov_unwinder_set_stack");
  pthread_attr_t attr;
  void* lo;
  size_t size;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &lo, &size);
  pthread_attr_destroy(&attr);
  t->stack_hi = (uint64_t)(uintptr_t)lo + size;
  t->samples = calloc(kMaxSamples, sizeof(struct sample));
  t->copies = calloc(kMaxCopies, sizeof(struct copy));
  if (!t->samples || !t->copies) fatal("calloc");
  tls_state = t; /* from here on this thread's samples are taken */
  /* SIGPROF to this thread every millisecond of wall-clock time (hrtimer-backed, unlike
     ITIMER_PROF and CPU-time clocks, which tick at CONFIG_HZ). */
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = gettid();
  if (timer_create(CLOCK_MONOTONIC, &sev, &t->timer) != 0) fatal("timer_create");
  struct itimerspec its = {{0, 1000 * 1000}, {0, 1000 * 1000}};
  if (timer_settime(t->timer, 0, &its, NULL) != 0) fatal("timer_settime");
}

static void unregister_thread(struct tstate* t) {
  timer_delete(t->timer);
  tls_state = NULL;
}

__attribute__((noinline)) static uint64_t spin(int depth, uint64_t x) {
  if (depth > 0) return spin(depth - 1, x * 31 + 7) + 1;
  for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1;
  return x;
}

__attribute__((noinline)) static void churn(int depth) {
  if (depth > 0) {
    churn(depth - 1);
    g_sink++;
    return;
  }
  void* p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc((size_t)(16 + (i * 977) % 4000));
    memset(p[i], i, 16);
  }
  for (int i = 0; i < 64; i++) free(p[i]);
}

static void* malloc_thread(void* arg) {
  register_thread(arg, "malloc");
  while (!atomic_load(&g_stop)) churn(6);
  unregister_thread(arg);
  return NULL;
}

static void* dl_thread(void* arg) {
  register_thread(arg, "dlopen");
  while (!atomic_load(&g_stop)) {
    void* h = dlopen(g_lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      fprintf(stderr, "dlopen %s: %s\n", g_lib, dlerror());
      exit(2);
    }
    uint64_t (*work)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "fast_dl_work");
    if (work == NULL) {
      fprintf(stderr, "dlsym fast_dl_work: %s\n", dlerror());
      exit(2);
    }
    g_sink += work(200);
    dlclose(h);
  }
  unregister_thread(arg);
  return NULL;
}

static void* spin_thread(void* arg) {
  register_thread(arg, "spin");
  while (!atomic_load(&g_stop)) g_sink += spin(40, g_sink);
  unregister_thread(arg);
  return NULL;
}

/* Publishes the process's maps (as read here) whenever they change; never sampled. */
static void* maps_thread(void* arg) {
  (void)arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  char* text = malloc(1 << 20);
  while (!atomic_load(&g_stop)) {
    FILE* f = fopen("/proc/self/maps", "r");
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[n] = 0;
    if (sprov_address_space_load_maps(g_as, text) != 0) fatal("sprov_address_space_load_maps");
    const uint64_t g = sprov_address_space_generation(g_as);
    if (g < kMaxGens && g_gen_maps[g] == NULL) g_gen_maps[g] = strdup(text);
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  free(text);
  return NULL;
}

static void* watchdog(void* arg) {
  const int seconds = *(const int*)arg;
  struct timespec ts = {seconds, 0};
  nanosleep(&ts, NULL);
  fprintf(stderr, "fast_sigprof: DEADLOCK: the run did not finish within %d s\n", seconds);
  _exit(1);
}

/* -------------------------------------------------------------- checking */

static int failures;

/* The function llvm-symbolizer names for module file offset `off` of `path`. */
static void symbolize(const char* llvm, const char* path, uint64_t addr, char* out, size_t outsz) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s --obj='%s' --functions=linkage 0x%llx 2>&1", llvm, path, (unsigned long long)addr);
  FILE* p = popen(cmd, "r");
  if (!p) fatal("popen llvm-symbolizer");
  if (!fgets(out, (int)outsz, p)) snprintf(out, outsz, "(no output from %s)", llvm);
  out[strcspn(out, "\n")] = 0;
  pclose(p);
}

/* The mapping of `pc` in `maps`: its path and file offset of pc. */
static int map_of(const char* maps, uint64_t pc, char* path, size_t pathsz, uint64_t* file_off) {
  const char* l = maps;
  while (l && *l) {
    unsigned long long a, b, off;
    char perms[8];
    int consumed = 0;
    if (sscanf(l, "%llx-%llx %7s %llx %*s %*s%n", &a, &b, perms, &off, &consumed) == 4 && pc >= a && pc < b) {
      const char* p = l + consumed;
      while (*p == ' ') p++;
      size_t n = strcspn(p, "\n");
      if (n >= pathsz) n = pathsz - 1;
      memcpy(path, p, n);
      path[n] = 0;
      *file_off = pc - a + off;
      return 1;
    }
    l = strchr(l, '\n');
    if (l) l++;
  }
  return 0;
}

/* A snapshot of a copy (registers from the ucontext, the stack bytes, the generation's maps
   and the vDSO's bytes) unwound by sprov_unwinder_unwind: must equal the signal walk. */
static int compare_copy(sprov_unwinder* uw, const struct copy* c, const struct sample* s, const char* maps) {
  sprov_snapshot* snap = NULL;
  if (sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &snap) != 0) fatal("sprov_snapshot_new");
  static const int kGreg[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
                                REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int r = 0; r < 17; r++) sprov_snapshot_set_reg(snap, (uint32_t)r, (uint64_t)c->uc.uc_mcontext.gregs[kGreg[r]]);
  if (sprov_snapshot_add_memory(snap, c->sp, c->stack, c->len) != 0) fatal("add_memory");
  const char* v = strstr(maps, "[vdso]");
  if (v) {
    const char* line = v;
    while (line > maps && line[-1] != '\n') line--;
    unsigned long long a, b;
    if (sscanf(line, "%llx-%llx", &a, &b) == 2 && (a >= c->sp + c->len || b <= c->sp))
      sprov_snapshot_add_memory(snap, a, (const void*)(uintptr_t)a, b - a);
  }
  if (sprov_snapshot_add_maps(g_ctx, snap, maps) != 0) fatal("sprov_snapshot_add_maps");
  sprov_stack* st = NULL;
  if (sprov_unwinder_unwind(uw, snap, &st) != 0) fatal("sprov_unwinder_unwind");
  int bad = 0;
  const size_t n = sprov_stack_frame_count(st);
  if (n != s->count || sprov_stack_stop_reason(st) != s->stop) bad = 1;
  for (size_t i = 0; i < n && i < s->count && !bad; i++) {
    struct sprov_frame f = {.sz = sizeof f};
    sprov_stack_frame(st, i, &f);
    if (f.pc != c->frames[i].pc || f.sp != c->frames[i].sp || f.method != c->frames[i].method) bad = 1;
  }
  if (bad) {
    fprintf(stderr, "MISMATCH: signal walk %u frames (%s), snapshot walk %zu frames (%s)\n", s->count,
            sprov_stop_reason_name(s->stop), n, sprov_stop_reason_name(sprov_stack_stop_reason(st)));
    for (size_t i = 0; i < n || i < s->count; i++) {
      struct sprov_frame f = {.sz = sizeof f};
      if (i < n) sprov_stack_frame(st, i, &f);
      fprintf(stderr, "  #%zu signal 0x%llx %s | snapshot 0x%llx %s\n", i,
              (unsigned long long)(i < s->count ? c->frames[i].pc : 0),
              i < s->count ? sprov_method_name(c->frames[i].method) : "-", (unsigned long long)(i < n ? f.pc : 0),
              i < n ? sprov_method_name(f.method) : "-");
    }
  }
  sprov_stack_free(st);
  sprov_snapshot_free(snap);
  return !bad;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fast_sigprof DL_LIB LLVM_SYMBOLIZER [SECONDS]\n");
    return 2;
  }
  g_lib = argv[1];
  const char* llvm = argv[2];
  const int seconds = argc > 3 ? atoi(argv[3]) : 10;
  static int watchdog_s;
  watchdog_s = seconds + 15;
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog, &watchdog_s);

  if (sprov_context_new(NULL, &g_ctx) != 0) fatal("sprov_context_new");
  SPROV_OPTS(sprov_address_space_opts, ao, .pid = 0);
  if (sprov_address_space_new(g_ctx, &ao, &g_as) != 0) fatal("sprov_address_space_new");

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);

  pthread_t maps_tid, tids[kThreads - 1];
  pthread_create(&maps_tid, NULL, maps_thread, NULL);
  register_thread(&g_threads[0], "main");
  pthread_create(&tids[0], NULL, malloc_thread, &g_threads[1]);
  pthread_create(&tids[1], NULL, dl_thread, &g_threads[2]);
  pthread_create(&tids[2], NULL, spin_thread, &g_threads[3]);

  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    g_sink += spin(20, g_sink);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - t0.tv_sec) * 1000000000ll + (now.tv_nsec - t0.tv_nsec) < seconds * 1000000000ll);
  unregister_thread(&g_threads[0]);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < kThreads - 1; i++) pthread_join(tids[i], NULL);
  pthread_join(maps_tid, NULL);
  pthread_cancel(wd);

  /* ---- every sample: rc 0, and either end_of_stack at an outermost function or a stated reason */
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = kMaxFrames);
  sprov_unwinder* uw = NULL;
  if (sprov_unwinder_new(g_ctx, &uo, &uw) != 0) fatal("sprov_unwinder_new");
  static char final_maps[1 << 16];
  {
    FILE* f = fopen("/proc/self/maps", "r");
    size_t n = fread(final_maps, 1, sizeof final_maps - 1, f);
    fclose(f);
    final_maps[n] = 0;
  }
  uint32_t total = 0, ended = 0, reasons[16] = {0}, compared = 0, copies_bad = 0;
  struct {
    uint64_t pc;
    int ok;
  } named[256];
  int nnamed = 0;
  for (int t = 0; t < kThreads; t++) {
    struct tstate* ts = &g_threads[t];
    uint32_t thread_ended = 0;
    for (uint32_t i = 0; i < ts->n; i++) {
      const struct sample* s = &ts->samples[i];
      total++;
      if (s->rc != 0) {
        fprintf(stderr, "FAIL: %s sample %u: sprov_unwinder_unwind_signal returned %d\n", ts->role, i, s->rc);
        failures++;
        continue;
      }
      if (s->stop >= 0 && s->stop < 16) reasons[s->stop]++;
      if (s->stop != SPROV_STOP_END_OF_STACK) {
        /* A stated reason, and an explained one: the innermost frame is in code that was not in
           the generation the walk used (mapped by dlopen after it was published), or in the
           test library (its _init has no CFI). Anything else is a failure. */
        const uint64_t pc = s->count ? s->pcs[s->count - 1] : 0;
        const char* maps = s->generation < kMaxGens ? g_gen_maps[s->generation] : NULL;
        char path[512] = "";
        uint64_t off = 0;
        const int mapped = maps != NULL && map_of(maps, pc, path, sizeof path, &off) && path[0] == '/';
        if (s->stop == SPROV_STOP_NONE || s->count != 1 || (mapped && strstr(path, "libfast_dl_lib") == NULL)) {
          fprintf(stderr, "FAIL: %s sample %u: %s after %u frames, last pc 0x%llx in '%s'\n", ts->role, i,
                  sprov_stop_reason_name(s->stop), s->count, (unsigned long long)pc, path);
          failures++;
        }
      }
      if (s->stop != SPROV_STOP_END_OF_STACK && getenv("FAST_SIGPROF_VERBOSE")) {
        printf("%s sample %u: %s after %u frames:", ts->role, i, sprov_stop_reason_name(s->stop), s->count);
        for (uint32_t k = 0; k < s->count; k++) {
          char path[512] = "?";
          uint64_t off = 0;
          const char* maps = s->generation < kMaxGens && g_gen_maps[s->generation] ? g_gen_maps[s->generation] : final_maps;
          map_of(maps, s->pcs[k], path, sizeof path, &off);
          printf(" 0x%llx(%s+0x%llx)", (unsigned long long)s->pcs[k], strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
                 (unsigned long long)off);
        }
        printf("\n");
      }
      if (s->stop == SPROV_STOP_END_OF_STACK && s->count > 0) {
        /* The outermost frame must be _start (main) or clone3/start_thread (threads). */
        const uint64_t pc = s->pcs[s->count - 1];
        int k = 0;
        while (k < nnamed && named[k].pc != pc) k++;
        if (k == nnamed && nnamed < 256) {
          char path[512], name[512];
          uint64_t off;
          named[k].pc = pc;
          named[k].ok = 0;
          if (map_of(final_maps, pc - 1, path, sizeof path, &off)) {
            symbolize(llvm, path, off, name, sizeof name);
            named[k].ok = strcmp(name, "_start") == 0 || strcmp(name, "clone3") == 0 ||
                          strcmp(name, "__clone3") == 0 || strcmp(name, "start_thread") == 0;
            printf("outermost frame 0x%llx = %s+0x%llx: %s\n", (unsigned long long)pc, path,
                   (unsigned long long)off, name);
          }
          nnamed++;
        }
        if (k < nnamed && !named[k].ok) {
          fprintf(stderr, "FAIL: %s sample %u ends (end_of_stack) at 0x%llx, not _start/clone3/start_thread\n",
                  ts->role, i, (unsigned long long)pc);
          failures++;
        } else {
          ended++;
          thread_ended++;
        }
      }
      if (s->copy >= 0 && s->generation < kMaxGens && g_gen_maps[s->generation] != NULL) {
        compared++;
        if (!compare_copy(uw, &ts->copies[s->copy], s, g_gen_maps[s->generation])) copies_bad++;
      }
    }
    printf("thread %-6s: %u samples, %u walked to the outermost frame, %u dropped (buffer full)\n", ts->role, ts->n,
           thread_ended, ts->dropped);
    if (ts->n < 100) {
      fprintf(stderr, "FAIL: thread %s got only %u samples\n", ts->role, ts->n);
      failures++;
    }
  }
  printf("stop reasons:");
  for (int r = 0; r < 16; r++)
    if (reasons[r]) printf(" %s=%u", sprov_stop_reason_name(r), reasons[r]);
  printf("\n%u samples, %u reached _start/clone3 (%.1f%%), %u unregistered; %u compared with the snapshot "
         "unwinder, %u differ; generations published: %llu\n",
         total, ended, total ? 100.0 * ended / total : 0.0, atomic_load(&g_unregistered), compared, copies_bad,
         (unsigned long long)sprov_address_space_generation(g_as));
  if (copies_bad) failures++;
  if (compared < 50) {
    fprintf(stderr, "FAIL: only %u samples compared with the snapshot unwinder\n", compared);
    failures++;
  }
  /* Stated expectation: nearly every sample reaches the outermost frame (the rest are explained above). */
  if (total == 0 || ended * 100 < total * 90) {
    fprintf(stderr, "FAIL: %u of %u samples reached the outermost frame (< 90%%)\n", ended, total);
    failures++;
  }
  sprov_unwinder_free(uw);
  return failures ? 1 : 0;
}
