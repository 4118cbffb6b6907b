// SPDX-License-Identifier: Apache-2.0
// A client of the public C ABI only (include/stackprov/kernel.h): samples PID with the library's eBPF
// sampler for SECONDS (off-CPU, sched:sched_switch; or, with --perf PERF_PID, on the sampling perf
// events of that running `perf record`, taken with pidfd_getfd: the same cpu-clock samples perf
// writes) and prints each event stitched by sprov_kernel_event_stitch, for kernel_check.py to compare
// with perf script:
//   E TID TIME_NS
//   K PC SYMBOL+0xOFF                       a kernel frame (kallsyms)
//   U PC MODULE_OFFSET RA BOUNDARY MODULE   a user frame (RA 1: a return address; BOUNDARY 1: the first
//                                           user frame, the kernel -> user segment change)
//   S STOP_REASON
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stackprov/kernel.h"

struct state {
  sprov_unwinder* uw;
  sprov_address_space* as;
  sprov_kernel_symbols* ks;
  int errors;
  const char* dump; /* STACKPROV_DUMP_EVENT: the first event's bytes go there (fuzz seeds) */
};

static void on_event(const void* event, size_t len, void* arg) {
  struct state* st = arg;
  struct sprov_kernel_event head;
  struct sprov_stitched_frame frames[256];
  struct sprov_stitch_result r;
  memset(&r, 0, sizeof r);
  r.sz = sizeof r;
  if (len < sizeof head - SPROV_KERNEL_MAX_STACK) return;
  memcpy(&head, event, sizeof head - SPROV_KERNEL_MAX_STACK);
  if (st->dump) {
    FILE* f = fopen(st->dump, "wb");
    if (f) {
      fwrite(event, 1, len, f);
      fclose(f);
    }
    st->dump = NULL;
  }
  if (sprov_kernel_event_stitch(st->uw, st->as, st->ks, event, len, frames, 256, &r) != 0) {
    if (st->errors++ < 5) fprintf(stderr, "stitch: %s\n", sprov_last_error_message());
    return;
  }
  printf("E %u %llu\n", head.tid, (unsigned long long)head.time_ns);
  for (uint32_t i = 0; i < r.count; i++) {
    const struct sprov_stitched_frame* f = &frames[i];
    if (f->domain == SPROV_DOMAIN_KERNEL) {
      printf("K %llx %s+0x%llx\n", (unsigned long long)f->pc, f->symbol ? f->symbol : "[unknown]",
             (unsigned long long)f->symbol_offset);
    } else {
      struct sprov_module_info mi;
      memset(&mi, 0, sizeof mi);
      mi.sz = sizeof mi;
      const char* path = "?";
      if (f->module_index >= 0 && sprov_address_space_module(st->as, (size_t)f->module_index, &mi) == 0 && mi.path)
        path = mi.path;
      printf("U %llx %llx %d %d %s\n", (unsigned long long)f->pc, (unsigned long long)f->symbol_offset,
             (f->flags & SPROV_FRAME_RETURN_ADDRESS) ? 1 : 0, (f->flags & SPROV_FRAME_KERNEL_USER_BOUNDARY) ? 1 : 0,
             path);
    }
  }
  printf("S %d\n", r.user_stop_reason);
}

/* The perf_event fds of process `perf_pid` (anon_inode:[perf_event] in /proc/PID/fd), duplicated
 * into this process with pidfd_getfd (needs PTRACE_MODE_ATTACH over it: root). Returns the count. */
static int perf_event_fds(long perf_pid, int* out, int max) {
  char dir[64], path[320], link[128];
  snprintf(dir, sizeof dir, "/proc/%ld/fd", perf_pid);
  const int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)perf_pid, 0);
  DIR* d = opendir(dir);
  int n = 0;
  if (pidfd < 0 || d == NULL) {
    if (d) closedir(d);
    if (pidfd >= 0) close(pidfd);
    return -1;
  }
  for (struct dirent* e; (e = readdir(d)) != NULL && n < max;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    const ssize_t k = readlink(path, link, sizeof link - 1);
    if (k <= 0) continue;
    link[k] = 0;
    if (strcmp(link, "anon_inode:[perf_event]") != 0) continue;
    const int fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(e->d_name), 0);
    if (fd >= 0) out[n++] = fd;
  }
  closedir(d);
  close(pidfd);
  return n;
}

int main(int argc, char** argv) {
  long perf_pid = 0;
  if (argc == 5 && strcmp(argv[1], "--perf") == 0) {
    perf_pid = strtol(argv[2], NULL, 10);
    argv += 2;
    argc -= 2;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: stitch_client [--perf PERF_PID] PID SECONDS\n");
    return 2;
  }
  const long pid = strtol(argv[1], NULL, 10);
  const double secs = strtod(argv[2], NULL);
  static int fds[4096];
  int nfds = 0;
  if (perf_pid > 0 && (nfds = perf_event_fds(perf_pid, fds, 4096)) <= 0) {
    fprintf(stderr, "stitch_client: no perf_event fd of pid %ld could be taken\n", perf_pid);
    return 1;
  }
  struct state st = {0};
  st.dump = getenv("STACKPROV_DUMP_EVENT");
  sprov_context* ctx = NULL;
  SPROV_OPTS(sprov_context_opts, copts);
  SPROV_OPTS(sprov_unwinder_opts, uopts);
  SPROV_OPTS(sprov_address_space_opts, aopts, .pid = pid);
  SPROV_OPTS(sprov_kernel_sampler_opts, kopts, .pid = pid, .flags = SPROV_KERNEL_SAMPLER_OFF_CPU);
  if (perf_pid > 0) {
    kopts.flags = SPROV_KERNEL_SAMPLER_EVENT_FDS;
    kopts.event_fds = fds;
    kopts.event_fd_count = (uint32_t)nfds;
  }
  sprov_kernel_sampler* ks = NULL;
  if (sprov_context_new(&copts, &ctx) != 0 || sprov_unwinder_new(ctx, &uopts, &st.uw) != 0 ||
      sprov_address_space_new(ctx, &aopts, &st.as) != 0 || sprov_kernel_symbols_open(NULL, &st.ks) != 0 ||
      sprov_kernel_sampler_open(&kopts, &ks) != 0) {
    fprintf(stderr, "stitch_client: %s\n", sprov_last_error_message());
    return 1;
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    if (sprov_kernel_sampler_poll(ks, 100, on_event, &st) < 0) {
      fprintf(stderr, "stitch_client: %s\n", sprov_last_error_message());
      return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
  sprov_kernel_sampler_poll(ks, 0, on_event, &st);
  fprintf(stderr, "stitch_client: %llu dropped, %d stitch errors\n",
          (unsigned long long)sprov_kernel_sampler_dropped(ks), st.errors);
  sprov_kernel_sampler_free(ks);
  for (int i = 0; i < nfds; i++) close(fds[i]);  /* ours: the sampler detached and left perf's events as they were */
  sprov_kernel_symbols_free(st.ks);
  sprov_address_space_free(st.as);
  sprov_unwinder_free(st.uw);
  sprov_context_free(ctx);
  return st.errors ? 1 : 0;
}
