/* SPDX-License-Identifier: Apache-2.0 */
/* Events shared by memleak.bpf.c (the BPF side) and memleak.cpp (the loader). */
#ifndef STACKPROV_EXAMPLE_MEMLEAK_H
#define STACKPROV_EXAMPLE_MEMLEAK_H

#define ML_STACK_MAX (64 * 1024) /* largest --stack-bytes */
#define ML_SHADOW_MAX 16         /* shadow-stack records per thread */
#define ML_REGS_WORDS 21         /* x86_64 struct pt_regs: 168 bytes */

enum ml_kind {
  ML_MALLOC = 0,
  ML_CALLOC = 1,
  ML_REALLOC = 2,
  ML_POSIX_MEMALIGN = 3,
  ML_ALIGNED_ALLOC = 4,
  ML_MEMALIGN = 5,
  ML_VALLOC = 6,
  ML_FREE = 7,
  ML_KINDS = 8,
};

enum ml_event_type {
  ML_EV_ALLOC_ENTRY = 1, /* a sampled allocation starts: regs + stack + shadow stack */
  ML_EV_ALLOC_RET = 2,   /* it returned: the pointer (0: failed) */
  ML_EV_FREE = 3,        /* a sampled (live) pointer was freed */
  ML_EV_ALLOC_FRAMES = 4, /* shim mode: a sampled allocation unwound in the process (frames, no stack) */
};

/* One record of the per-thread shadow stack (what a pending uretprobe replaced):
 * the real return address and the address of the stack slot that held it (the sp at
 * entry on x86_64). Same layout as the library's struct sprov_shadow_entry. */
struct ml_shadow {
  __u64 return_address;
  __u64 slot;
};

struct ml_event_head {
  __u32 type;
  __u32 kind;
  __u32 pid;
  __u32 tid;
  __u64 ptr;     /* ALLOC_RET / FREE: the pointer; ALLOC_ENTRY: realloc's old pointer */
  __u64 size;    /* ALLOC_ENTRY: bytes requested; ALLOC_RET: the sampling weight in bytes */
};

struct ml_alloc_entry {
  struct ml_event_head h;
  __u64 regs[ML_REGS_WORDS]; /* struct pt_regs of the thread at the allocator's entry */
  __u64 stack_addr;          /* user address of stack[0] (the sp) */
  __u32 stack_len;           /* bytes copied */
  __u32 shadow_count;
  __u64 entry_pc;            /* shim mode: the libc allocator the preloaded sampler called (frame 0
                                of the report, as at a uprobe on it); 0: the regs are at its entry */
  struct ml_shadow shadow[ML_SHADOW_MAX];
  __u8 stack[ML_STACK_MAX];  /* only stack_len bytes are sent */
};

#define ML_ENTRY_FIXED (sizeof(struct ml_alloc_entry) - ML_STACK_MAX)

/* Shim mode, unwound in the process by the sampler (through the library's raw entry point, on the
 * thread's live stack: nothing copied). Frames as sprov_raw_frame gives them, innermost first; the
 * walk starts in the sampler itself (the loader drops those frames and puts entry_pc first, as for
 * ML_EV_ALLOC_ENTRY). Only `count` frames are sent. */
#define ML_FRAMES_MAX 128
struct ml_frame {
  __u64 pc;
  __s32 method;  /* sprov_method */
  __u32 flags;   /* SPROV_FRAME_* */
};

struct ml_alloc_frames {
  struct ml_event_head h;
  __u64 entry_pc;     /* as in ml_alloc_entry */
  __u32 count;        /* frames sent */
  __s32 stop_reason;  /* sprov_stop_reason of the walk */
  struct ml_frame frames[ML_FRAMES_MAX];
};

#define ML_FRAMES_FIXED (sizeof(struct ml_alloc_frames) - ML_FRAMES_MAX * sizeof(struct ml_frame))

/* Shim mode (-- COMMAND with --sample-bytes: stackprov-memleak-preload.so samples in the process):
 * the sampler writes its events into a ring in shared memory (a memfd the loader creates and the
 * command inherits, STACKPROV_MEMLEAK_RING_FD), so no sampled event enters the kernel. Layout: this
 * head, then at ML_SHM_DATA_OFFSET a ring of data_bytes (a power of two) holding records of a
 * struct ml_shm_record and `len` bytes (an ml_event_head, or an ml_alloc_entry whose stack holds
 * stack_len bytes), each padded to 8 bytes. A record never wraps: len ML_SHM_SKIP means "the rest
 * of the ring up to its end is unused". Samplers (threads) serialize on `lock`; head and tail are
 * byte counts that only grow (head: the samplers, release; tail: the loader, release). */
#define ML_SHM_MAGIC 0x676e6972706c6d73ull /* "smlpring" */
#define ML_SHM_DATA_OFFSET 4096
#define ML_SHM_SKIP 0xffffffffu
#define ML_SHM_HEADROOM (1u << 20) /* kept for free records: a sample is not sent into it */

struct ml_shm_head {
  __u64 magic;
  __u64 data_bytes;
  __u64 head;
  __u64 tail;
  __u32 lock;
  __u32 reserved;
  __u64 samples; /* sampled allocations */
  __u64 dropped; /* samples not written: the ring was full but for its last ML_SHM_HEADROOM bytes */
  __u64 lost_frees; /* free records not written: the ring was full */
  __u64 reserved2; /* 0 (was "samples not tracked": sampled blocks are tagged now, nothing is lost) */
  __u64 unwound; /* samples unwound in the process (ML_EV_ALLOC_FRAMES); the rest sent their stack */
  __u64 reused;  /* of those, walks reused from the sampler's per-thread cache (preload.c) */
};

struct ml_shm_record {
  __u32 len;
  __u32 reserved;
};

#endif
