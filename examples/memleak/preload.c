// SPDX-License-Identifier: Apache-2.0
// stackprov-memleak's in-process sampler (LD_PRELOAD, `-- COMMAND` with --sample-bytes N > 0).
//
// Interposes malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc, memalign,
// valloc and malloc_usable_size, forwards each to glibc, and decides in the process which
// allocations are sampled: a per-thread byte counter with exponential intervals of mean N
// (tcmalloc's scheme: an allocation of SIZE bytes is sampled with probability 1 - exp(-SIZE/N),
// independently of the others). A sampled allocation is unwound here, through the library's raw
// entry point on the thread's live stack, and its frames go with the pointer into a ring shared
// with the loader (memleak.h, struct ml_shm_head); the loader drops this library's frames and puts
// frame 0 at the glibc function the call went to, so the stack reads as the uprobe-on-malloc mode
// reports it (the fallback sends registers and a copy of the stack, as a uprobe would, and the
// loader unwinds). Sampled blocks carry a tag in front (below); a free (or realloc) of one writes
// a free record.
// Nothing enters the kernel, not even for a sample: on the VM of doc/benchmarks.md a uprobe on a
// marker function cost ~1.4 us per trap plus ~2.5 us of BPF program, three times the 5% budget of
// bench/memleak's malloc-heavy loop at --sample-bytes 524288.
//
// Environment (set by stackprov-memleak): STACKPROV_MEMLEAK_RING_FD (the shared ring, a memfd;
// absent: nothing is sampled and every call is only forwarded), STACKPROV_MEMLEAK_SAMPLE_BYTES=N,
// STACKPROV_MEMLEAK_MIN_SIZE=BYTES (smaller ones are ignored), STACKPROV_MEMLEAK_STACK_BYTES.
// A forked child stops sampling (the loader traces one process). glibc only (the __libc_* entry
// points avoid dlsym's own allocations while bootstrapping).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>

#include "memleak.h"
#include "stackprov/fast.h"
#include "stackprov/stackprov.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);

extern void* __libc_stack_end;  // ld.so: the main thread's initial stack pointer (argc)

// Captures the caller's view of the registers a CFI walk needs, in struct pt_regs layout
// (memleak.h ML_REGS_WORDS): r15 r14 r13 r12 rbp rbx, rip = this function's entry, rsp = the sp at
// its entry (its return address at [rsp]), and that return address in the orig_rax word (the
// caller copies the stack after the return, when the slot has been reused). Frame 0 of the walk.
__asm__(".text\n.type stackprov_memleak_capture,@function\n.p2align 4\nstackprov_memleak_capture:\n"
        ".cfi_startproc\n"
        "mov %r15, 0(%rdi)\nmov %r14, 8(%rdi)\nmov %r13, 16(%rdi)\nmov %r12, 24(%rdi)\n"
        "mov %rbp, 32(%rdi)\nmov %rbx, 40(%rdi)\nmov (%rsp), %rax\nmov %rax, 120(%rdi)\n"
        "lea stackprov_memleak_capture(%rip), %rax\nmov %rax, 128(%rdi)\nmov %rsp, 152(%rdi)\nret\n"
        ".cfi_endproc\n.size stackprov_memleak_capture,.-stackprov_memleak_capture\n");
void stackprov_memleak_capture(uint64_t* regs);
enum { PT_ORIG_RAX = 15, PT_RIP = 16, PT_RSP = 19 };  // struct pt_regs word indexes

// ------------------------------------------------------------------ configuration

static uint64_t g_mean;      // N; 0: not sampling
static uint64_t g_min_size;  // --min-size
static uint64_t g_stack_bytes = 16384;
static struct ml_shm_head* g_ring;  // NULL: no loader, or a forked child
static uint32_t g_pid;
static atomic_int g_configured;     // 0, 1 (in progress), 2
static __thread int t_busy __attribute__((tls_model("initial-exec")));  // inside the sampler: no sampling

static uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  return v ? strtoull(v, NULL, 10) : dflt;
}

static void forked_child(void) { g_ring = NULL; }
static void make_log2_table(void);

static struct ml_shm_head* map_ring(void) {
  const char* v = getenv("STACKPROV_MEMLEAK_RING_FD");
  if (!v) return NULL;
  int fd = atoi(v);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= ML_SHM_DATA_OFFSET) return NULL;
  // faulted in at once: a page fault per page of records, in the traced loop, costs more than the
  // samples themselves
  void* m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (m == MAP_FAILED) return NULL;
  struct ml_shm_head* r = (struct ml_shm_head*)m;
  uint64_t size = r->data_bytes;
  // A program that COMMAND runs inherits the variable, not the fd (closed below): the number may
  // be another file there, left alone.
  if (r->magic != ML_SHM_MAGIC || size <= ML_SHM_HEADROOM || (size & (size - 1)) ||
      size + ML_SHM_DATA_OFFSET > (uint64_t)st.st_size) {
    munmap(m, (size_t)st.st_size);
    return NULL;
  }
  close(fd);  // the mapping stays; the program does not see an fd it did not open
  return r;
}

static void configure(void) {
  int state = atomic_load_explicit(&g_configured, memory_order_acquire);
  if (state == 2) return;
  int zero = 0;
  if (state == 1 || !atomic_compare_exchange_strong(&g_configured, &zero, 1)) {
    while (atomic_load_explicit(&g_configured, memory_order_acquire) != 2) sched_yield();
    return;
  }
  t_busy++;
  g_pid = (uint32_t)getpid();
  g_min_size = env_u64("STACKPROV_MEMLEAK_MIN_SIZE", 0);
  g_stack_bytes = env_u64("STACKPROV_MEMLEAK_STACK_BYTES", 16384);
  if (g_stack_bytes > ML_STACK_MAX) g_stack_bytes = ML_STACK_MAX;
  g_ring = map_ring();
  if (g_ring) {
    pthread_atfork(NULL, NULL, forked_child);
    make_log2_table();
    g_mean = env_u64("STACKPROV_MEMLEAK_SAMPLE_BYTES", 0);
  }
  t_busy--;
  atomic_store_explicit(&g_configured, 2, memory_order_release);
}

static int g_constructed;  // this library's constructor has run (see "unwinding in the process")
static atomic_int g_setup_armed;  // set up the unwinding at the main thread's next allocation
static __thread int64_t t_until __attribute__((tls_model("initial-exec")));

__attribute__((constructor)) static void init(void) {
  configure();
  g_constructed = 1;
  // The unwinding is set up (the process's modules read, ~2 ms) at the main thread's first
  // allocation from outside this library, before the program's own work, not at its first sample
  // (sample_this): its next allocation takes the slow path.
  if (g_ring && g_mean) {
    t_until = 0;
    atomic_store(&g_setup_armed, 1);
  }
}

// ------------------------------------------------------------------ sampling

// t_until (declared above): bytes still to allocate on this thread before the next sample: an
// allocation of SIZE >= t_until is sampled, then a fresh interval is drawn (not carried over: the
// draws stay memoryless, so each allocation is sampled with probability 1 - exp(-SIZE/N) whatever
// came before). 0: not drawn yet.
static __thread uint64_t t_rng __attribute__((tls_model("initial-exec")));

static uint64_t next_random(void) {
  if (UNLIKELY(t_rng == 0)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t_rng = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uintptr_t)&t_rng << 16) ^
            (uint64_t)getpid() ^ 1;
  }
  t_rng ^= t_rng >> 12;  // xorshift64* (Vigna)
  t_rng ^= t_rng << 25;
  t_rng ^= t_rng >> 27;
  return t_rng * 0x2545F4914F6CDD1Dull;
}

// log2(1 + i/256), i = 0..256: -ln(u) by table and linear interpolation (error < 3e-6 in log2,
// far below what the sampling's estimates resolve), not libm's log (~80 ns per sample here).
static double g_log2_table[257];

static void make_log2_table(void) {
  for (int i = 0; i <= 256; i++) g_log2_table[i] = log2(1.0 + i / 256.0);
}

// -ln(R / 2^53) for R in [1, 2^53].
static double neg_ln_unit(uint64_t r) {
  int lz = __builtin_clzll(r);
  uint64_t frac = (r << lz) << 1;  // R = 2^(63-lz) * (1 + frac / 2^64)
  unsigned i = (unsigned)(frac >> 56);
  double t = (double)(frac << 8) * 0x1.0p-64;
  double l2 = (double)(63 - lz) + g_log2_table[i] + t * (g_log2_table[i + 1] - g_log2_table[i]);
  return (53.0 - l2) * 0.69314718055994530942;
}

// An exponential interval of mean N, rounded up to whole bytes (>= 1): P(ceil(X) <= s) = P(X <= s).
static int64_t draw_interval(void) {
  double x = ceil(neg_ln_unit((next_random() >> 11) + 1) * (double)g_mean);
  if (x < 1) x = 1;
  if (x > 0x1p62) x = 0x1p62;
  return (int64_t)x;
}

// The slow path: first call on the thread, or a sample is due.
__attribute__((noinline)) static int sample_slow(size_t size) {
  if (t_busy) return 0;
  configure();
  if (g_mean == 0) {
    t_until = INT64_MAX;  // not sampling: never here again on this thread
    return 0;
  }
  if (t_until <= 0) t_until = draw_interval();
  if ((uint64_t)size < (uint64_t)t_until) {
    t_until -= (int64_t)size;
    return 0;
  }
  t_until = draw_interval();
  return 1;
}

// Counts SIZE bytes; true when this allocation is sampled.
static inline int sample_due(size_t size) {
  if (UNLIKELY(size < g_min_size)) return 0;
  if (LIKELY((uint64_t)size < (uint64_t)t_until)) {
    t_until -= (int64_t)size;
    return 0;
  }
  return sample_slow(size);
}

// ------------------------------------------------------------------ sampled blocks carry a tag

// A sampled allocation is made 16 bytes (or its alignment) larger and handed out at Q past glibc's
// block REAL: Q[-2] holds REAL and Q[-1] the tag, TAG ^ Q. `free` tells a sampled block by that
// one word, which for every other pointer is glibc's chunk header (size and flags: bit 63 is never
// set, so it cannot equal a tag), in the cache line glibc's free reads next anyway; a block glibc
// frees is never seen again through an old tag (glibc writes the header of every block it hands
// out). So the common free costs a compare, with no table and no shared state; the sampled ones
// (one per N bytes) pay the extra bytes. A sampled block freed by glibc directly (__libc_free),
// not through free or realloc, would be corrupt: nothing in glibc or the programs we know does it.
#define TAG 0xa1b2c3d4e5f60718ull  // bit 63 set

static inline int tagged(const void* q) {
  return ((const uint64_t*)q)[-1] == (TAG ^ (uint64_t)(uintptr_t)q);
}

static inline void* real_of(const void* q) { return (void*)(uintptr_t)((const uint64_t*)q)[-2]; }

static void* tag_block(void* real, size_t off) {
  if (!real) return NULL;
  char* q = (char*)real + off;
  ((uint64_t*)q)[-2] = (uint64_t)(uintptr_t)real;
  ((uint64_t*)q)[-1] = TAG ^ (uint64_t)(uintptr_t)q;
  return q;
}

// ------------------------------------------------------------------ the ring shared with the loader

// This thread holds the ring's lock: a signal handler that frees a sampled block (or samples)
// meanwhile must not wait for it (it would wait for itself): its record is dropped and counted.
static __thread int t_ring_held __attribute__((tls_model("initial-exec")));

// 0: not taken (this thread already holds it).
static int ring_lock(struct ml_shm_head* r) {
  if (t_ring_held) return 0;
  for (int spins = 0; __atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE); spins++) {
    if (spins > 64) sched_yield();
    else __builtin_ia32_pause();
  }
  t_ring_held = 1;
  return 1;
}

static void ring_unlock(struct ml_shm_head* r) {
  t_ring_held = 0;
  __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
}

// Room for a record of LEN bytes at *head (the lock held), leaving KEEP bytes free: its payload, or
// NULL when the ring is that full. *head moves past it; storing *head into r->head publishes it.
// Samples keep ML_SHM_HEADROOM for the frees, so that a free is not lost behind samples the loader
// has not read yet (a phantom leak).
static void* ring_reserve(struct ml_shm_head* r, uint64_t* head, uint32_t len, uint64_t keep) {
  uint64_t size = r->data_bytes - keep, tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
  uint64_t need = sizeof(struct ml_shm_record) + (((uint64_t)len + 7) & ~(uint64_t)7);
  uint64_t pos = *head & (r->data_bytes - 1), h = *head, end = r->data_bytes - pos;
  char* data = (char*)r + ML_SHM_DATA_OFFSET;
  if (end < need) {  // no record wraps: skip to the start
    if (h + end + need - tail > size) return NULL;
    ((struct ml_shm_record*)(data + pos))->len = ML_SHM_SKIP;
    h += end;
    pos = 0;
  } else if (h + need - tail > size) {
    return NULL;
  }
  struct ml_shm_record* rec = (struct ml_shm_record*)(data + pos);
  rec->len = len;
  rec->reserved = 0;
  *head = h + need;
  return rec + 1;
}

static __thread uint32_t t_tid __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_stack_lo __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_stack_hi __attribute__((tls_model("initial-exec")));

static uint32_t thread_id(void) {
  if (UNLIKELY(t_tid == 0)) t_tid = (uint32_t)syscall(SYS_gettid);
  return t_tid;
}

// Bytes of stack from sp: up to WANT (0: all), within this thread's stack (the main thread: up to
// 512 bytes above its initial sp, argv's pointers; no frame lies above it). A stack this library
// does not know (sigaltstack, a coroutine's) is taken to the end of sp's page only.
static uint64_t stack_extent(uint64_t sp, uint64_t want) {
  if (UNLIKELY(t_stack_hi == 0)) {
    // Every thread's bounds from glibc (the main thread's from its [stack] mapping and the stack
    // rlimit): an sp outside them (a coroutine, a sigaltstack) is not taken for the thread's stack.
    pthread_attr_t attr;
    void* addr = NULL;
    size_t bytes = 0;
    t_busy++;  // pthread_getattr_np allocates
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &addr, &bytes);
      pthread_attr_destroy(&attr);
    }
    t_busy--;
    t_stack_lo = (uint64_t)(uintptr_t)addr;
    t_stack_hi = addr ? t_stack_lo + bytes : 1;
    uint64_t top = (uint64_t)(uintptr_t)__libc_stack_end + 512;
    if (thread_id() == g_pid && addr && top > t_stack_lo && top < t_stack_hi) t_stack_hi = top;
  }
  uint64_t room = sp >= t_stack_lo && sp < t_stack_hi ? t_stack_hi - sp : 4096 - (sp & 4095);
  return want && want < room ? want : room;
}

static void fill_head(struct ml_event_head* h, uint32_t type, uint32_t kind, const void* p, uint64_t size) {
  h->type = type;
  h->kind = kind;
  h->pid = g_pid;
  h->tid = thread_id();
  h->ptr = (uint64_t)(uintptr_t)p;
  h->size = size;
}

// A sampled allocation: registers, stack and frame 0's pc (FN), then the pointer (the loader pairs
// an ML_EV_ALLOC_ENTRY with the next ML_EV_ALLOC_RET of the same thread), as the BPF side sends.
__attribute__((noinline)) static void send_sample(struct ml_shm_head* r, void* p, uint64_t size, unsigned kind,
                                                  void* fn) {
  uint64_t regs[ML_REGS_WORDS] = {0};
  stackprov_memleak_capture(regs);
  uint64_t sp = regs[PT_RSP], ra = regs[PT_ORIG_RAX];
  regs[PT_ORIG_RAX] = 0;
  uint64_t len = stack_extent(sp, g_stack_bytes);
  if (!ring_lock(r)) {  // a signal handler's allocation while this thread writes the ring
    __atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  uint64_t head = r->head;
  struct ml_alloc_entry* e =
      (struct ml_alloc_entry*)ring_reserve(r, &head, (uint32_t)(ML_ENTRY_FIXED + len), ML_SHM_HEADROOM);
  struct ml_event_head* ret =
      e ? (struct ml_event_head*)ring_reserve(r, &head, sizeof(struct ml_event_head), ML_SHM_HEADROOM) : NULL;
  if (ret) {
    fill_head(&e->h, ML_EV_ALLOC_ENTRY, kind, NULL, size);
    memcpy(e->regs, regs, sizeof(e->regs));
    e->stack_addr = sp;
    e->stack_len = (uint32_t)len;
    e->shadow_count = 0;
    e->entry_pc = (uint64_t)(uintptr_t)fn;
    memcpy(e->stack, (const void*)(uintptr_t)sp, len);
    if (len >= 8) memcpy(e->stack, &ra, 8);  // the slot held the capture's return address
    fill_head(ret, ML_EV_ALLOC_RET, kind, p, size);
    __atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
  } else {
    r->dropped++;
  }
  r->samples++;
  ring_unlock(r);
}

// ------------------------------------------------------------------ unwinding in the process
//
// The default: a sample is unwound here, on the thread's live stack, through the library's raw
// entry point (sprov_unwinder_unwind_raw with this process's sprov_address_space), and only its
// frames go into the ring (ML_EV_ALLOC_FRAMES, ~0.2 KiB), as tcmalloc and heaptrack unwind in the
// process. Copying the stack instead (ML_EV_ALLOC_ENTRY, the loader unwinds; ~9 KiB per sample in
// bench/memleak's loop) cost more than the rest of the sampler together, and at one sample per
// ~254 iterations filled the ring faster than the loader drained it. The copy stays as the
// fallback (the library could not be set up) and STACKPROV_MEMLEAK_UNWIND=loader selects it.
// Set up at the first sample after this library's constructor has run (a sample taken while the
// shared objects are still being initialized copies the stack): nothing of the library is used
// before the dynamic linker has initialized it. Everything here runs with t_busy set, so the
// library's own allocations are forwarded to glibc unsampled.
static atomic_int g_inproc;  // 0: not tried, 1: ready, -1: copy the stack instead
static sprov_context* g_ctx;
static sprov_address_space* g_as;
static pthread_mutex_t g_inproc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_uw_key;
// Walks of this thread kept for reuse (see send_unwound): a stack whose walk started at the same
// pc and sp, from the same caller, and whose return-address slots (CFA - 8 of each frame, x86_64)
// still hold the return addresses the walk found there, walks to the same frames: each frame's
// CFA follows from its pc and the CFA below it (CFI rules at fixed offsets, the frame sizes
// fixed). Not kept: walks that did not end at the end of the stack, frames whose return address
// was not at CFA - 8 (signal frames, repaired trampolines), stacks deeper than WC_FRAMES. What a
// check of the return addresses cannot see: a function with a variable-size frame (alloca, VLA)
// whose size changed while the frames below it moved back to the same sp, with the old return
// addresses still in the stack where the walk read them; that sample would get the stack of the
// earlier one.
#define WC_ENTRIES 16
#define WC_FRAMES 48
struct wc_entry {
  uint64_t pc0, sp0, caller, generation;
  uint32_t n;
  int32_t stop_reason;
  uint64_t slot[WC_FRAMES];  // slot[k]: CFA of frame k - 8, holding pc[k + 1]
  uint64_t last_slot, last_value;  // the outermost frame's CFA - 8 and what it held (0: none)
  struct ml_frame frames[WC_FRAMES];
};

struct thread_state {
  sprov_unwinder* uw;
  struct wc_entry cache[WC_ENTRIES];
};

static __thread struct thread_state* t_state __attribute__((tls_model("initial-exec")));
static __thread int t_exiting __attribute__((tls_model("initial-exec")));  // its state freed

// At thread exit (pthread key destructor). Destructors of keys created later may still allocate
// on this thread: their samples take the copying path (thread_state() says none from here on).
static void free_thread_state(void* p) {
  struct thread_state* ts = (struct thread_state*)p;
  t_exiting = 1;
  t_state = NULL;
  sprov_unwinder_free(ts->uw);
  __libc_free(ts);
}

static int inproc_setup(void) {
  int state = atomic_load_explicit(&g_inproc, memory_order_acquire);
  if (state != 0) return state;
  pthread_mutex_lock(&g_inproc_lock);
  state = atomic_load_explicit(&g_inproc, memory_order_relaxed);
  if (state == 0) {
    const char* mode = getenv("STACKPROV_MEMLEAK_UNWIND");
    SPROV_OPTS(sprov_context_opts, co, .log_level = SPROV_LOG_ERROR);
    SPROV_OPTS(sprov_address_space_opts, ao);  // pid 0: this process
    state = -1;
    if (!(mode && strcmp(mode, "loader") == 0) && pthread_key_create(&g_uw_key, free_thread_state) == 0) {
      if (sprov_context_new(&co, &g_ctx) == 0 && sprov_address_space_new(g_ctx, &ao, &g_as) == 0) state = 1;
    }
    atomic_store_explicit(&g_inproc, state, memory_order_release);
  }
  pthread_mutex_unlock(&g_inproc_lock);
  return state;
}

static struct thread_state* thread_state(void) {
  if (LIKELY(t_state != NULL)) return t_state;
  if (t_exiting) return NULL;
  struct thread_state* ts = (struct thread_state*)__libc_calloc(1, sizeof(*ts));
  if (!ts) return NULL;
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = ML_FRAMES_MAX);
  if (sprov_unwinder_new(g_ctx, &uo, &ts->uw) != 0) {
    __libc_free(ts);
    return NULL;
  }
  pthread_setspecific(g_uw_key, ts);  // freed when the thread ends
  return t_state = ts;
}

// The walk ended at a pc in no module: a library mapped since the address space was read
// (dlopen). Re-read /proc/self/maps, one thread at a time, at most once per 100 ms.
static int refresh_modules(void) {
  static _Atomic uint64_t last_ns;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, last = atomic_load(&last_ns);
  if (now - last < 100000000u || !atomic_compare_exchange_strong(&last_ns, &last, now)) return 0;
  if (pthread_mutex_trylock(&g_inproc_lock) != 0) return 0;
  int ok = sprov_address_space_refresh(g_as) == 0;
  pthread_mutex_unlock(&g_inproc_lock);
  return ok;
}

// Unwinds the caller's stack in the process and sends the frames; 0: not done (send the stack).
// The walk starts at the return from the capture (pc = that return address, sp above it): every
// frame from there up is intact while the library runs below this frame (the locals written since
// lie below the saved registers and return address the walk reads). Inlined, as is sampled(),
// into the allocator's slow path, so the walk has one frame of this library to cross, not three.
__attribute__((always_inline)) static inline int send_unwound(struct ml_shm_head* r, void* p, uint64_t size, unsigned kind,
                                                 void* fn, const void* caller) {
  struct thread_state* ts = thread_state();
  if (!ts) return 0;
  uint64_t regs[ML_REGS_WORDS] = {0};
  stackprov_memleak_capture(regs);
  regs[PT_RIP] = regs[PT_ORIG_RAX];
  regs[PT_ORIG_RAX] = 0;
  regs[PT_RSP] += 8;
  const uint64_t sp = regs[PT_RSP], pc0 = regs[PT_RIP], generation = sprov_address_space_generation(g_as);
  struct wc_entry* w = &ts->cache[((sp >> 4) ^ (pc0 * 0x9E3779B97F4A7C15ull) ^ (uintptr_t)caller) % WC_ENTRIES];
  struct ml_frame frames[ML_FRAMES_MAX];
  const struct ml_frame* out = frames;
  uint32_t n = 0;
  int32_t stop = 0;
  int hit = w->n && w->pc0 == pc0 && w->sp0 == sp && w->caller == (uintptr_t)caller && w->generation == generation;
  for (uint32_t k = 0; hit && k + 1 < w->n; k++)
    hit = *(const uint64_t*)(uintptr_t)w->slot[k] == w->frames[k + 1].pc;
  // The walk ended there (an undefined return address, or a 0 read as the end): the word must
  // still be what it was, or the stack may go on now.
  if (hit && w->last_slot) hit = *(const uint64_t*)(uintptr_t)w->last_slot == w->last_value;
  if (hit) {
    out = w->frames;
    n = w->n;
    stop = w->stop_reason;
  } else {
    uint64_t len = stack_extent(sp, 0);
    SPROV_OPTS(sprov_raw_input, in, .regs_format = SPROV_REGS_PT_REGS, .flags = SPROV_RAW_PC_IS_RETURN_ADDRESS);
    in.regs = regs;
    in.regs_len = sizeof(regs);
    in.stack_addr = sp;
    in.stack = (const void*)(uintptr_t)sp;
    in.stack_len = len;
    struct sprov_raw_frame raw[ML_FRAMES_MAX];
    struct sprov_unwind_buf buf;
    memset(&buf, 0, sizeof(buf));
    buf.sz = sizeof(buf);
    buf.frames = raw;
    buf.capacity = ML_FRAMES_MAX;
    buf.frame_sz = sizeof(struct sprov_raw_frame);
    if (sprov_unwinder_unwind_raw(ts->uw, g_as, &in, &buf) != 0) return 0;
    if (buf.stop_reason == SPROV_STOP_INVALID_PC && refresh_modules()) {
      buf.count = 0;
      if (sprov_unwinder_unwind_raw(ts->uw, g_as, &in, &buf) != 0) return 0;
    }
    n = buf.count < ML_FRAMES_MAX ? buf.count : ML_FRAMES_MAX;
    stop = buf.stop_reason;
    for (uint32_t i = 0; i < n; i++) {
      frames[i].pc = raw[i].pc;
      frames[i].method = raw[i].method;
      frames[i].flags = raw[i].flags;
    }
    // Keep the walk when each return address was read at CFA - 8 of the frame below it, inside
    // the stack range the walk had.
    int keep = stop == SPROV_STOP_END_OF_STACK && n >= 1 && n <= WC_FRAMES;
    for (uint32_t k = 0; keep && k + 1 < n; k++) {
      uint64_t slot = raw[k].cfa - 8;
      keep = raw[k].cfa >= sp + 8 && slot + 8 <= sp + len &&
             *(const uint64_t*)(uintptr_t)slot == raw[k + 1].pc;
      w->slot[k] = slot;
    }
    w->n = 0;
    if (keep) {
      uint64_t last = raw[n - 1].cfa - 8;
      w->last_slot = w->last_value = 0;
      if (raw[n - 1].cfa >= sp + 8 && last + 8 <= sp + len) {
        w->last_slot = last;
        w->last_value = *(const uint64_t*)(uintptr_t)last;
      }
      memcpy(w->frames, frames, n * sizeof(frames[0]));
      w->pc0 = pc0;
      w->sp0 = sp;
      w->caller = (uintptr_t)caller;
      w->generation = buf.generation;
      w->stop_reason = stop;
      w->n = n;
    }
  }
  if (!ring_lock(r)) {  // a signal handler's allocation while this thread writes the ring
    __atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
    return 1;
  }
  uint64_t head = r->head;
  struct ml_alloc_frames* e = (struct ml_alloc_frames*)ring_reserve(
      r, &head, (uint32_t)(ML_FRAMES_FIXED + n * sizeof(struct ml_frame)), ML_SHM_HEADROOM);
  struct ml_event_head* ret =
      e ? (struct ml_event_head*)ring_reserve(r, &head, sizeof(struct ml_event_head), ML_SHM_HEADROOM) : NULL;
  if (ret) {
    fill_head(&e->h, ML_EV_ALLOC_FRAMES, kind, NULL, size);
    e->entry_pc = (uint64_t)(uintptr_t)fn;
    e->count = n;
    e->stop_reason = stop;
    memcpy(e->frames, out, n * sizeof(struct ml_frame));
    fill_head(ret, ML_EV_ALLOC_RET, kind, p, size);
    __atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
    r->unwound++;
    r->reused += hit;
  } else {
    r->dropped++;
  }
  r->samples++;
  ring_unlock(r);
  return 1;
}

// This library's own bytes (hidden: not the program's symbols of the same names).
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

// A sampled allocation that succeeded (a tagged block): tell the loader.
__attribute__((always_inline)) static inline void sampled(void* p, size_t size, unsigned kind, void* fn,
                                                         const void* caller) {
  struct ml_shm_head* r = g_ring;
  if (!p || !r) return;
  int saved_errno = errno;  // a successful allocation leaves errno alone (the walk may set it)
  t_busy++;  // the library's allocations are forwarded, not sampled
  int done = g_constructed && inproc_setup() == 1 && send_unwound(r, p, size, kind, fn, caller);
  if (!done) send_sample(r, p, size, kind, fn);
  t_busy--;
  errno = saved_errno;
}

__attribute__((noinline)) static void send_free(const void* p) {
  struct ml_shm_head* r = g_ring;
  if (!r) return;
  if (!ring_lock(r)) {  // a signal handler's free while this thread writes the ring
    __atomic_fetch_add(&r->lost_frees, 1, __ATOMIC_RELAXED);
    return;
  }
  uint64_t head = r->head;
  struct ml_event_head* h = (struct ml_event_head*)ring_reserve(r, &head, sizeof(struct ml_event_head), 0);
  if (h) {
    fill_head(h, ML_EV_FREE, ML_FREE, p, 0);
    __atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
  } else {
    r->lost_frees++;
  }
  ring_unlock(r);
}

// ------------------------------------------------------------------ the interposed functions

typedef int (*posix_memalign_fn)(void**, size_t, size_t);
typedef void* (*aligned_alloc_fn)(size_t, size_t);
typedef size_t (*usable_size_fn)(void*);
static posix_memalign_fn g_posix_memalign;
static aligned_alloc_fn g_aligned_alloc;
static usable_size_fn g_usable_size;

// glibc's own definition of NAME: not dlsym(RTLD_NEXT), which finds another allocator the program
// links (tcmalloc, jemalloc) before glibc, whose blocks would then reach glibc's free.
static void* libc_symbol(const char* name) {
  t_busy++;  // dlopen and dlsym may allocate
  void* h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* f = h ? dlsym(h, name) : NULL;
  if (h) dlclose(h);  // a RTLD_NOLOAD handle: libc stays
  t_busy--;
  return f;
}

// The common case of malloc, calloc, free and realloc(NULL, n) is a test and a tail call into
// glibc (a jump: no frame of ours, no second return): the whole cost of the sampler there.
static inline int not_due(size_t size) {
  int64_t u = t_until;
  if (LIKELY((uint64_t)size < (uint64_t)u && size >= g_min_size)) {
    t_until = u - (int64_t)size;
    return 1;
  }
  return 0;
}

// Whether this allocation of SIZE is sampled (it counts SIZE bytes either way). CALLER: the
// allocator's return address; one inside this library is its own (the C++ runtime linked into it
// initializing: libstdc++'s emergency exception pool), not the program's, and is never sampled.
static int inproc_setup(void);

static int sample_this(size_t size, const void* caller) {
  const int own = (const char*)caller >= __ehdr_start && (const char*)caller < _end;
  const int due = sample_due(size);
  if (UNLIKELY(atomic_load_explicit(&g_setup_armed, memory_order_relaxed))) {
    if (own || t_busy) {
      t_until = 0;  // this library initializing itself: come back at the next allocation
    } else if (atomic_exchange(&g_setup_armed, 0)) {
      int saved_errno = errno;
      t_busy++;
      inproc_setup();
      t_busy--;
      errno = saved_errno;
    }
  }
  return due && g_ring && !own;
}

// The tag's room in front of a block aligned to ALIGN (a power of two): 16, or ALIGN.
static size_t tag_room(size_t align) { return align > 16 ? align : 16; }

__attribute__((noinline)) static void* malloc_slow(size_t size, const void* caller) {
  if (!sample_this(size, caller) || size > SIZE_MAX - 16) return __libc_malloc(size);
  void* q = tag_block(__libc_malloc(size + 16), 16);
  if (q) sampled(q, size, ML_MALLOC, (void*)__libc_malloc, caller);
  return q;
}

EXPORT void* malloc(size_t size) {
  if (not_due(size)) return __libc_malloc(size);
  return malloc_slow(size, __builtin_return_address(0));
}

__attribute__((noinline)) static void free_tagged(void* q) {
  send_free(q);
  __libc_free(real_of(q));
}

EXPORT void free(void* p) {
  if (LIKELY(p == NULL || !tagged(p))) return __libc_free(p);
  free_tagged(p);
}

__attribute__((noinline)) static void* calloc_slow(size_t n, size_t size, const void* caller) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total) || !sample_this(total, caller) || total > SIZE_MAX - 16)
    return __libc_calloc(n, size);
  void* q = tag_block(__libc_calloc(1, total + 16), 16);
  if (q) sampled(q, total, ML_CALLOC, (void*)__libc_calloc, caller);
  return q;
}

EXPORT void* calloc(size_t n, size_t size) {
  size_t total;
  if (!__builtin_mul_overflow(n, size, &total) && not_due(total)) return __libc_calloc(n, size);
  return calloc_slow(n, size, __builtin_return_address(0));
}

// Bytes usable at P (glibc's malloc_usable_size; a tagged block's less its tag room).
static size_t usable(void* p) {
  usable_size_fn f = g_usable_size;
  if (UNLIKELY(!f)) g_usable_size = f = (usable_size_fn)libc_symbol("malloc_usable_size");
  if (!p || !f) return 0;
  if (!tagged(p)) return f(p);
  char* real = (char*)real_of(p);
  size_t n = f(real), room = (size_t)((char*)p - real);
  return n > room ? n - room : 0;
}

EXPORT size_t malloc_usable_size(void* p) { return usable(p); }

// realloc where the old block is tagged or the new one is sampled: a new block, the bytes copied,
// the old one freed (glibc cannot resize a tagged block in place). Rare: one per N bytes.
__attribute__((noinline)) static void* realloc_slow(void* old, size_t size, const void* caller) {
  int due = sample_this(size, caller) && size <= SIZE_MAX - 16;
  if (old && !tagged(old) && !due) return __libc_realloc(old, size);
  if (old && size == 0) {  // glibc: realloc(p, 0) frees p and returns NULL
    free(old);
    return NULL;
  }
  void* q = due ? tag_block(__libc_malloc(size + 16), 16) : __libc_malloc(size);
  if (!q) return NULL;  // OLD stays valid
  if (old) {
    size_t keep = usable(old);
    memcpy(q, old, keep < size ? keep : size);
    free(old);
  }
  if (due) sampled(q, size, ML_REALLOC, (void*)__libc_realloc, caller);
  return q;
}

EXPORT void* realloc(void* old, size_t size) {
  if ((!old || !tagged(old)) && not_due(size)) return __libc_realloc(old, size);
  return realloc_slow(old, size, __builtin_return_address(0));
}

// glibc's reallocarray resizes with its own realloc, which does not know tagged blocks.
EXPORT void* reallocarray(void* old, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if ((!old || !tagged(old)) && not_due(total)) return __libc_realloc(old, total);
  return realloc_slow(old, total, __builtin_return_address(0));
}

// An aligned allocation: glibc's, or (sampled) one ALIGN larger with the tag in front, Q = REAL +
// tag_room(ALIGN) aligned as asked. ALIGN: a power of two (callers check).
static void* aligned_tagged(size_t align, size_t size) {
  size_t room = tag_room(align);
  if (size > SIZE_MAX - room) return NULL;
  return tag_block(__libc_memalign(align < 16 ? 16 : align, size + room), room);
}

EXPORT int posix_memalign(void** out, size_t align, size_t size) {
  posix_memalign_fn f = g_posix_memalign;
  if (UNLIKELY(!f)) g_posix_memalign = f = (posix_memalign_fn)libc_symbol("posix_memalign");
  if (UNLIKELY(!f)) return ENOMEM;
  int valid = align && !(align & (align - 1)) && align % sizeof(void*) == 0;
  if (LIKELY(!valid || !sample_this(size, __builtin_return_address(0)))) return f(out, align, size);
  void* q = aligned_tagged(align, size);
  if (!q) return ENOMEM;
  *out = q;
  sampled(q, size, ML_POSIX_MEMALIGN, (void*)f, __builtin_return_address(0));
  return 0;
}

EXPORT void* aligned_alloc(size_t align, size_t size) {
  aligned_alloc_fn f = g_aligned_alloc;
  if (UNLIKELY(!f)) g_aligned_alloc = f = (aligned_alloc_fn)libc_symbol("aligned_alloc");
  if (UNLIKELY(!f)) {
    errno = ENOMEM;
    return NULL;
  }
  int valid = align && !(align & (align - 1));
  if (LIKELY(!valid || !sample_this(size, __builtin_return_address(0)))) return f(align, size);
  void* q = aligned_tagged(align, size);
  if (!q) errno = ENOMEM;
  else sampled(q, size, ML_ALIGNED_ALLOC, (void*)f, __builtin_return_address(0));
  return q;
}

EXPORT void* memalign(size_t align, size_t size) {
  // glibc: an alignment that is not a power of two is rounded up to one
  size_t a = 1;
  while (a < align && a < ((size_t)1 << 62)) a <<= 1;
  if (LIKELY(!sample_this(size, __builtin_return_address(0))) || a < align) return __libc_memalign(align, size);
  void* q = aligned_tagged(a, size);
  if (!q) errno = ENOMEM;
  else sampled(q, size, ML_MEMALIGN, (void*)__libc_memalign, __builtin_return_address(0));
  return q;
}

EXPORT void* valloc(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (LIKELY(!sample_this(size, __builtin_return_address(0)))) return __libc_valloc(size);
  void* q = aligned_tagged(page, size);
  if (!q) errno = ENOMEM;
  else sampled(q, size, ML_VALLOC, (void*)__libc_valloc, __builtin_return_address(0));
  return q;
}
