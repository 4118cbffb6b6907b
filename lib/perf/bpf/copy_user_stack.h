/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* BPF side, shared by the library's kernel sampler (lib/perf/bpf/kernel_sampler.bpf.c) and
 * examples/memleak: copying the top of the current thread's user stack. Include after vmlinux.h,
 * bpf_helpers.h and bpf_core_read.h. */
#ifndef STACKPROV_BPF_COPY_USER_STACK_H
#define STACKPROV_BPF_COPY_USER_STACK_H

/* Copies up to `want` bytes from the user address `sp` into dst (room for `max` bytes, a constant
 * multiple of 4096) and returns the bytes copied; *short_out is set when the copy went page by page
 * and stopped at a page that could not be read. bpf_probe_read_user is all-or-nothing: one read of
 * the whole size, or (when it crosses the end of the stack mapping) a read up to the next page
 * boundary, then page by page until one faults. The main thread: nothing an unwinder needs lies
 * above the initial stack pointer (argc) but argv's pointers, so the copy stops 512 bytes above it
 * (mm->start_stack) instead of failing at the end of the mapping. */
static __always_inline __u32 sprov_bpf_copy_user_stack(__u8* dst, __u64 sp, __u64 want, const __u32 max,
                                                       int* short_out) {
  if (want > max) want = max;
  struct task_struct* task = bpf_get_current_task_btf();
  __u64 top = BPF_CORE_READ(task, mm, start_stack);
  if (top && sp < top && top + 512 - sp < want) want = top + 512 - sp;
  if (want == 0) return 0;
  if (bpf_probe_read_user(dst, want, (const void*)sp) == 0) return want;
  *short_out = 1;
  __u64 first = 4096 - (sp & 4095);
  if (first > want) first = want;
  if (first == 0 || first > 4096) return 0;
  if (bpf_probe_read_user(dst, first, (const void*)sp)) return 0;
  __u32 len = first;
  for (int i = 0; i < max / 4096; i++) {
    __u64 n = want - len;
    if (len >= want) break;
    if (n > 4096) n = 4096;
    if (len > max - 4096 || n == 0) break;
    if (bpf_probe_read_user(dst + len, n, (const void*)(sp + len))) break;
    len += n;
  }
  return len;
}

#endif
