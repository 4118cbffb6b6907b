/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* BPF side, shared by the library's kernel sampler (lib/perf/bpf/kernel_sampler.bpf.c) and
 * examples/memleak: a per-CPU array of event counters the loader sums and reports. Include after
 * vmlinux.h and bpf_helpers.h; SPROV_BPF_STATS(n) defines the map `stats` of n counters and
 * stat_inc(k). */
#ifndef STACKPROV_BPF_STATS_H
#define STACKPROV_BPF_STATS_H

#define SPROV_BPF_STATS(n)                                  \
  struct {                                                  \
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                \
    __uint(max_entries, (n));                               \
    __type(key, __u32);                                     \
    __type(value, __u64);                                   \
  } stats SEC(".maps");                                     \
  static __always_inline void stat_inc(__u32 k) {           \
    __u64* v = bpf_map_lookup_elem(&stats, &k);             \
    if (v) *v += 1;                                         \
  }

#endif
