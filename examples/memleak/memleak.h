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
  struct ml_shadow shadow[ML_SHADOW_MAX];
  __u8 stack[ML_STACK_MAX];  /* only stack_len bytes are sent */
};

#define ML_ENTRY_FIXED (sizeof(struct ml_alloc_entry) - ML_STACK_MAX)

#endif
