// SPDX-License-Identifier: Apache-2.0
// The eBPF kernel sampler's loader (kernel_sampler.hpp).
#include "perf/kernel_sampler.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "stackprov/kernel.h"

#ifdef STACKPROV_HAVE_KERNEL_SAMPLER
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "stackprov_kernel_bpf.skel.h"
#endif

namespace stackprov::perf {

#ifdef STACKPROV_HAVE_KERNEL_SAMPLER

struct KernelSampler::Impl {
  stackprov_kernel_bpf* skel = nullptr;
  ring_buffer* rb = nullptr;
  /// libbpf's links: each owns its perf event fd (destroying it disables the event and closes the fd).
  std::vector<bpf_link*> links;
  /// Links to a caller's perf events (attach_perf_event with keep_samples): kernel bpf_link fds made
  /// with bpf_link_create, which hold the event themselves; closing one detaches the program and
  /// neither disables nor closes the caller's event.
  std::vector<int> link_fds;
  size_t attached = 0;  ///< perf events attach_cpu_clock opened and attached
  const std::function<void(const uint8_t*, size_t)>* fn = nullptr;
  int seen = 0;
  ~Impl() {
    for (bpf_link* l : links) bpf_link__destroy(l);
    for (int fd : link_fds) close(fd);
    if (rb) ring_buffer__free(rb);
    if (skel) stackprov_kernel_bpf__destroy(skel);
  }
};

bool KernelSampler::available(std::string* why) {
  if (why) why->clear();
  return true;
}

Result<std::unique_ptr<KernelSampler>> KernelSampler::open(const KernelSamplerOptions& o) {
  std::unique_ptr<KernelSampler> s(new KernelSampler());
  s->impl_ = std::make_unique<Impl>();
  Impl& m = *s->impl_;
  m.skel = stackprov_kernel_bpf__open();
  if (!m.skel) return make_error(-errno, "opening the eBPF sampler: %s", strerror(errno));
  m.skel->rodata->target_tgid = o.tgid;
  m.skel->rodata->stack_bytes = o.stack_bytes > SPROV_KERNEL_MAX_STACK ? SPROV_KERNEL_MAX_STACK : o.stack_bytes;
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return make_error(-EINVAL, "libbpf_num_possible_cpus: %d", ncpu);
  bpf_map__set_max_entries(m.skel->maps.scratch, static_cast<uint32_t>(ncpu));
  if (int rc = stackprov_kernel_bpf__load(m.skel); rc != 0)
    return make_error(rc < 0 ? rc : -EINVAL,
                      "loading the eBPF sampler: %s (needs root, or CAP_BPF and CAP_PERFMON, and a kernel with BTF)",
                      strerror(rc < 0 ? -rc : EINVAL));
  m.rb = ring_buffer__new(
      bpf_map__fd(m.skel->maps.events),
      [](void* ctx, void* data, size_t len) -> int {
        auto* impl = static_cast<Impl*>(ctx);
        impl->seen++;
        if (impl->fn) (*impl->fn)(static_cast<const uint8_t*>(data), len);
        return 0;
      },
      &m, nullptr);
  if (!m.rb) return make_error(-errno, "the eBPF sampler's ring buffer: %s", strerror(errno));
  return s;
}

KernelSampler::~KernelSampler() = default;

Status KernelSampler::attach_perf_event(int fd, bool keep_samples) {
  if (keep_samples) {
    // Not bpf_program__attach_perf_event: it enables the event when attaching, and disables and
    // closes it when the link goes; the caller's event (another program's, shared through
    // pidfd_getfd) must stay as its owner set it. The kernel's link takes its own reference to the
    // event, so the copy of the fd made for it is closed at once.
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return make_error(-errno, "perf event fd %d: %s", fd, strerror(errno));
    const int link = bpf_link_create(bpf_program__fd(impl_->skel->progs.on_perf_event_keep), copy, BPF_PERF_EVENT, nullptr);
    const int e = errno;
    close(copy);
    if (link < 0) return make_error(-e, "attaching the eBPF sampler to perf event fd %d: %s", fd, strerror(e));
    impl_->link_fds.push_back(link);
    return {};
  }
  bpf_link* l = bpf_program__attach_perf_event(impl_->skel->progs.on_cpu_clock, fd);
  if (!l) return make_error(-errno, "attaching the eBPF sampler to a perf event: %s", strerror(errno));
  impl_->links.push_back(l);
  return {};
}

Status KernelSampler::attach_sched_switch() {
  bpf_link* l = bpf_program__attach(impl_->skel->progs.on_sched_switch);
  if (!l) return make_error(-errno, "attaching the eBPF sampler to sched:sched_switch: %s", strerror(errno));
  impl_->links.push_back(l);
  return {};
}

Status KernelSampler::drain(const std::function<void(const uint8_t*, size_t)>& fn) {
  impl_->fn = &fn;
  const int n = ring_buffer__consume(impl_->rb);
  impl_->fn = nullptr;
  if (n < 0) return make_error(n, "reading the eBPF sampler's ring buffer: %s", strerror(-n));
  return {};
}

Result<int> KernelSampler::poll(int timeout_ms, const std::function<void(const uint8_t*, size_t)>& fn) {
  impl_->fn = &fn;
  impl_->seen = 0;
  const int n = ring_buffer__poll(impl_->rb, timeout_ms);
  impl_->fn = nullptr;
  if (n < 0 && n != -EINTR) return make_error(n, "reading the eBPF sampler's ring buffer: %s", strerror(-n));
  return impl_->seen;
}

Status KernelSampler::attach_cpu_clock(int64_t pid, uint32_t frequency) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (d == nullptr) {
    const int e = errno;
    return make_error(e == ENOENT ? -ESRCH : -e, "%s: %s", task.c_str(), strerror(e));
  }
  std::vector<int> tids;
  while (dirent* e = readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(atoi(e->d_name));
  closedir(d);
  const int ncpu = libbpf_num_possible_cpus();
  for (int tid : tids) {
    for (int cpu = 0; cpu < ncpu; cpu++) {
      perf_event_attr a{};
      a.size = sizeof(a);
      a.type = PERF_TYPE_SOFTWARE;
      a.config = PERF_COUNT_SW_CPU_CLOCK;
      a.freq = 1;
      a.sample_freq = frequency;
      a.inherit = 1;
      const int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
      if (fd < 0) {
        if (errno == ESRCH || errno == ENODEV || errno == EINVAL) break;  // exited meanwhile, offline CPU
        return make_error(-errno, "perf_event_open (cpu-clock, tid %d, cpu %d): %s", tid, cpu, strerror(errno));
      }
      // Attached, the link owns the fd (it closes it); not attached, it is closed here.
      if (Status st = attach_perf_event(fd); !st.ok()) {
        close(fd);
        return st;
      }
      impl_->attached++;
    }
  }
  if (impl_->attached == 0) return make_error(-ESRCH, "no thread of pid %lld could be sampled", static_cast<long long>(pid));
  return {};
}

uint64_t KernelSampler::dropped() const {
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return 0;
  std::vector<uint64_t> v(static_cast<size_t>(ncpu));
  uint32_t key = 0;  // ST_DROPS
  if (bpf_map__lookup_elem(impl_->skel->maps.stats, &key, sizeof(key), v.data(), v.size() * 8, 0) != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t x : v) sum += x;
  return sum;
}

#else  // !STACKPROV_HAVE_KERNEL_SAMPLER

#ifndef STACKPROV_KERNEL_SAMPLER_WHY
#define STACKPROV_KERNEL_SAMPLER_WHY "not configured"
#endif

struct KernelSampler::Impl {};

bool KernelSampler::available(std::string* why) {
  if (why) *why = STACKPROV_KERNEL_SAMPLER_WHY;
  return false;
}

Result<std::unique_ptr<KernelSampler>> KernelSampler::open(const KernelSamplerOptions&) {
  return make_error(SPROV_ERR_UNSUPPORTED, "this build has no eBPF kernel sampler: %s", STACKPROV_KERNEL_SAMPLER_WHY);
}

KernelSampler::~KernelSampler() = default;
Status KernelSampler::attach_perf_event(int, bool) { return make_error(SPROV_ERR_UNSUPPORTED, "no eBPF kernel sampler"); }
Status KernelSampler::attach_sched_switch() { return make_error(SPROV_ERR_UNSUPPORTED, "no eBPF kernel sampler"); }
Status KernelSampler::drain(const std::function<void(const uint8_t*, size_t)>&) {
  return make_error(SPROV_ERR_UNSUPPORTED, "no eBPF kernel sampler");
}
Result<int> KernelSampler::poll(int, const std::function<void(const uint8_t*, size_t)>&) {
  return make_error(SPROV_ERR_UNSUPPORTED, "no eBPF kernel sampler");
}
Status KernelSampler::attach_cpu_clock(int64_t, uint32_t) { return make_error(SPROV_ERR_UNSUPPORTED, "no eBPF kernel sampler"); }
uint64_t KernelSampler::dropped() const { return 0; }

#endif

}  // namespace stackprov::perf
