// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_profile (perf.data / capture file samples as snapshots) and sprov_record.
#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "capi/internal.hpp"
#include "elf/debug_file.hpp"
#include "elf/elf_image.hpp"
#include "memory/live_readers.hpp"
#include "runtime/python.hpp"
#include "perf/profile.hpp"
#include "perf/kernel_sampler.hpp"
#include "perf/recorder.hpp"
#include "stackprov/kernel.h"

using namespace stackprov;
using namespace stackprov::capi;

struct sprov_profile {
  sprov_context* ctx = nullptr;
  std::unique_ptr<perf::Profile> prof;
  sprov_snapshot snap;  // reused between samples
  uint32_t current_list = UINT32_MAX;
  perf::SampleView view;
  std::string kernel_id_hex, running_id_hex;  // for sprov_profile_info
  std::set<std::string> vdso_loaded;          // vDSO build-ids already in the context's module cache
};

namespace {

/// CPython's frames for `record --python`: per process, its interpreter (found as a live capture
/// finds it, in the module files the recorder checked against the process's listing) and a
/// runtime::PythonSampler over process_vm_readv.
class CPythonRecordSampler final : public perf::RuntimeSampler {
 public:
  explicit CPythonRecordSampler(object::DebugFileOptions dopts) : dopts_(std::move(dopts)) {}
  bool attach(uint32_t pid, const perf::ModuleList& l, perf::PyEval* eval, std::string* warning) override {
    for (size_t k = 0; k < l.modules.size() && k < l.images.size(); k++) {
      const memory::SnapshotModule& m = l.modules[k];
      const std::shared_ptr<elf::ElfImage>& image = l.images[k];
      if (image == nullptr || !runtime::may_hold_python(m.path)) continue;
      // The layout's DWARF and the cold part's symbol: the separate debug file, else the module's own.
      auto debug = elf::find_debug_file(*image, dopts_);
      const elf::ElfImage* dwarf = debug.ok()                                ? debug.value().get()
                                   : image->section(".debug_info").has_value() ? image.get()
                                                                               : nullptr;
      auto found = runtime::find_python(*image, m.load_bias, m.build_id.hex(), runtime::read_image_file(*image), dwarf);
      if (!found.ok()) {
        *warning = found.error().message + ": its Python frames are not read";
        continue;
      }
      if (!found.value() || found.value()->eval.empty()) continue;
      Proc& p = procs_[pid];
      p.target = *found.value();
      p.mem = std::make_unique<memory::ProcessVmReader>(static_cast<pid_t>(pid));
      p.sampler = std::make_unique<runtime::PythonSampler>(*p.mem, p.target);
      p.debug = debug.ok() ? std::move(debug).value() : nullptr;
      p.image = image;
      eval->description = p.target.description;
      for (const runtime::PythonTarget::Range& r : p.target.eval) eval->ranges.emplace_back(r.start, r.end);
      return true;
    }
    return false;
  }
  uint8_t read(uint32_t pid, uint32_t tid, std::vector<Frame>* frames, std::string* problem) override {
    auto it = procs_.find(pid);
    if (it == procs_.end()) return runtime::PythonStackRead::kNoThread;
    runtime::PythonStackRead r = it->second.sampler->read(static_cast<int64_t>(tid));
    for (runtime::PythonFrame& f : r.frames)
      frames->push_back(Frame{std::move(f.function), std::move(f.qualname), std::move(f.file), f.line,
                              static_cast<uint8_t>((f.is_entry ? perf::PyFrameRef::kEntry : 0) |
                                                   (f.owner == 1 ? perf::PyFrameRef::kGenerator : 0))});
    *problem = std::move(r.problem);
    return r.state;
  }
  void forget(uint32_t pid) override { procs_.erase(pid); }

 private:
  struct Proc {
    runtime::PythonTarget target;
    std::unique_ptr<memory::ProcessVmReader> mem;
    std::unique_ptr<runtime::PythonSampler> sampler;
    std::shared_ptr<elf::ElfImage> image, debug;  // kept while the layout's sources are in use
  };
  object::DebugFileOptions dopts_;
  std::map<uint32_t, Proc> procs_;
};

}  // namespace

extern "C" {

SPROV_API int sprov_profile_open(sprov_context* ctx, const char* path, const struct sprov_profile_open_opts* opts,
                                 sprov_profile** out) {
  return guard([&] {
    if (ctx == nullptr || path == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_open: NULL argument"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_profile_open_opts), "sprov_profile_open_opts")) return e;
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_profile_open_opts, flags, 0u);
    if (uint32_t f = flags & ~static_cast<uint32_t>(SPROV_PROFILE_OPEN_STREAM); f != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_open_opts.flags 0x%x: unknown flags", f));
    if (SPROV_OPTS_GET(opts, sprov_profile_open_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_open_opts.reserved must be 0"));
    auto p = perf::Profile::open(path, ctx->ctx.config().sysroot, (flags & SPROV_PROFILE_OPEN_STREAM) != 0);
    if (!p.ok()) return fail(p.error());
    auto* h = new sprov_profile();
    h->ctx = ctx;
    h->prof = std::move(p).value();
    h->snap.snap.module_root = ctx->ctx.config().sysroot;
    *out = h;
    return 0;
  });
}

SPROV_API void sprov_profile_free(sprov_profile* prof) { delete prof; }

SPROV_API int sprov_profile_info(const sprov_profile* prof, struct sprov_profile_info* out) {
  return guard([&] {
    if (prof == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_info: prof is NULL"));
    const perf::Profile& p = *prof->prof;
    struct sprov_profile_info i = {};
    i.sz = sizeof(i);
    i.format = static_cast<int32_t>(p.format());
    i.sample_stack_user = p.sample_stack_user();
    i.samples = p.samples().size();
    i.lost = p.lost();
    i.records = p.records();
    i.module_lists = p.lists().size();
    i.sample_regs_user = p.sample_regs_user();
    i.cmdline = p.cmdline().c_str();
    i.warnings = p.warnings().c_str();
    i.event = p.event().name.c_str();
    i.frequency = p.event().frequency;
    i.period = p.event().period;
    i.clock = p.event().clock ? 1 : 0;
    const perf::KernelNamer& k = p.kernel_namer();
    i.kernel_naming = static_cast<int32_t>(k.naming());
    auto* mut = const_cast<sprov_profile*>(prof);  // cached strings only
    mut->kernel_id_hex = p.kernel_build_id().empty() ? "" : p.kernel_build_id().hex();
    mut->running_id_hex = k.running_build_id().empty() ? "" : k.running_build_id().hex();
    i.kernel_build_id = mut->kernel_id_hex.c_str();
    i.running_kernel_build_id = mut->running_id_hex.c_str();
    i.kernel_note = k.note().c_str();
    i.missing_bytes = p.missing_bytes();
    i.partial_bytes = p.partial_bytes();
    i.truncation = p.truncation().c_str();
    return fill_out(out, i, "sprov_profile_info");
  });
}

namespace {
int fill_sample(sprov_profile* prof, size_t index, struct sprov_profile_sample* out) {
  const perf::Profile& p = *prof->prof;
  if (index >= p.samples().size())
    return fail(make_error(SPROV_ERR_INVALID_ARG, "sample index %zu out of range (%zu samples)", index,
                           p.samples().size()));
  bool changed = false;
  if (Status st = p.fill_snapshot(index, prof->snap.snap, &prof->current_list, &changed, &prof->view); !st.ok()) {
    prof->current_list = UINT32_MAX;  // the snapshot may be half-filled
    return fail(st.error());
  }
  if (changed) prof->snap.invalidate_modules_key();
  const perf::SampleRef& ref = p.samples()[index];
  const perf::SampleView& v = prof->view;
  struct sprov_profile_sample s = {};
  s.sz = sizeof(s);
  s.time = v.time;
  s.pid = ref.pid;
  s.tid = ref.tid;
  s.comm = ref.comm < p.comms().size() ? p.comms()[ref.comm].c_str() : "";
  s.ip = v.ip;
  s.sp = v.sp;
  s.stack_size = v.stack_len;
  s.stack_requested = v.stack_requested;
  s.snapshot = v.user_regs ? &prof->snap : nullptr;
  s.kernel_ips = v.kernel_ips.empty() ? nullptr : v.kernel_ips.data();
  s.kernel_ip_count = static_cast<uint32_t>(v.kernel_ips.size());
  s.flags = (v.user_regs ? 0u : static_cast<uint32_t>(SPROV_PROFILE_SAMPLE_NO_USER_REGS)) |
            (changed ? static_cast<uint32_t>(SPROV_PROFILE_SAMPLE_NEW_MODULES) : 0u) |
            (v.kernel_mode ? static_cast<uint32_t>(SPROV_PROFILE_SAMPLE_KERNEL_MODE) : 0u);
  s.module_list = ref.list;
  s.user_ips = v.user_ips.empty() ? nullptr : v.user_ips.data();
  s.user_ip_count = static_cast<uint32_t>(v.user_ips.size());
  s.mode = v.user_regs ? SPROV_PROFILE_MODE_DWARF : v.has_callchain ? SPROV_PROFILE_MODE_CALLCHAIN : SPROV_PROFILE_MODE_IP;
  s.period = v.period;
  s.modules = &prof->snap;
  s.main_module = ref.list < p.lists().size() ? p.lists()[ref.list]->main : -1;
  if (ref.py_at != 0) {
    perf::PySampleView py;
    if (Status st = p.python(index, &py); !st.ok()) return fail(st.error());
    s.flags |= SPROV_PROFILE_SAMPLE_RUNTIME;
    s.runtime_state = py.state == 0 ? int32_t{SPROV_PROFILE_RUNTIME_NO_THREAD} : int32_t{py.state};
    s.runtime_frame_count = static_cast<uint32_t>(py.frames.size());
  }
  return fill_out(out, s, "sprov_profile_sample");
}
}  // namespace

SPROV_API int sprov_profile_sample(sprov_profile* prof, size_t index, struct sprov_profile_sample* out) {
  return guard([&] {
    if (prof == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_sample: NULL argument"));
    return fill_sample(prof, index, out);
  });
}

SPROV_API int sprov_profile_next(sprov_profile* prof, size_t* index, struct sprov_profile_sample* out) {
  return guard([&] {
    if (prof == nullptr || index == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_next: NULL argument"));
    *index = SIZE_MAX;  // until a sample is handed out: an error then is the sample's
    prof->snap.snap.drop_views();  // the last sample's stack, borrowed from bytes the stream moves past
    auto more = prof->prof->next_sample(index);
    if (!more.ok()) return fail(more.error());
    if (!more.value()) return fail(make_error(SPROV_ERR_NOT_FOUND, "sprov_profile_next: no more samples"));
    return fill_sample(prof, *index, out);
  });
}

SPROV_API int sprov_profile_interleave(sprov_profile* prof, size_t index, const sprov_stack* native, sprov_stack** out,
                                       int32_t* state) {
  return guard([&] {
    if (prof == nullptr || native == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_interleave: NULL %s",
                             prof == nullptr ? "prof" : native == nullptr ? "native" : "out"));
    *out = nullptr;
    if (state != nullptr) *state = SPROV_PROFILE_RUNTIME_NONE;
    const perf::Profile& p = *prof->prof;
    if (native->kernel.state != SPROV_KSTACK_NONE || !native->runtime.empty())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_interleave: the stack is %s already",
                             native->runtime.empty() ? "merged with its kernel segment" : "interleaved"));
    perf::PySampleView py;
    if (Status st = p.python(index, &py); !st.ok()) return fail(st.error());
    int32_t result = !py.present    ? int32_t{SPROV_PROFILE_RUNTIME_NONE}
                     : py.state == 0 ? int32_t{SPROV_PROFILE_RUNTIME_NO_THREAD}
                                     : int32_t{py.state};
    std::vector<runtime::PythonFrame> frames;
    frames.reserve(py.frames.size());
    for (const perf::PyFrameRef& f : py.frames) {
      const perf::PyCode& c = p.py_codes()[f.code];  // checked when the file was indexed
      runtime::PythonFrame r;
      r.function = c.function;
      r.qualname = c.qualname;
      r.file = c.file;
      r.line = f.line;
      r.is_entry = (f.flags & perf::PyFrameRef::kEntry) != 0;
      r.owner = (f.flags & perf::PyFrameRef::kGenerator) ? 1 : 0;
      frames.push_back(std::move(r));
    }
    std::vector<runtime::PythonTarget::Range> eval;
    if (py.eval != nullptr)
      for (const auto& [lo, hi] : py.eval->ranges) eval.push_back({lo, hi});
    const size_t activations = capi::eval_activations(eval, native);
    size_t entries = 0;
    for (const runtime::PythonFrame& f : frames) entries += f.is_entry ? 1 : 0;
    // Read moments after the sample: the chain must fit the native stack of the sample's moment. A
    // damaged chain is cut short (its outer frames missing): only more entry frames than a whole
    // native stack has activations shows it is not that moment's.
    const bool whole = native->stop == unwind::StopReason::kEndOfStack;
    const bool damaged = py.state == runtime::PythonStackRead::kDamaged;
    const bool misfit = damaged ? whole && entries > activations
                                : activations > entries || (whole && activations != entries);
    if (!frames.empty() && (eval.empty() || misfit)) {
      frames.clear();
      result = SPROV_PROFILE_RUNTIME_MISMATCH;
    }
    *out = capi::interleave_runtime(eval, frames, native, SPROV_RUNTIME_INTERLEAVE).release();
    if (state != nullptr) *state = result;
    return 0;
  });
}

SPROV_API int sprov_profile_sample_stack(sprov_profile* prof, size_t index, uint32_t max_frames, sprov_stack** out) {
  return guard([&] {
    if (prof == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_sample_stack: NULL argument"));
    *out = nullptr;
    const perf::Profile& p = *prof->prof;
    perf::SampleView v;
    if (Status st = p.view(index, &v); !st.ok()) return fail(st.error());
    if (v.user_regs)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sample %zu has user registers and stack: unwind its snapshot", index));
    if (max_frames == 0) max_frames = 256;
    std::vector<uint64_t> pcs = v.has_callchain ? v.user_ips : std::vector<uint64_t>{};
    if (!v.has_callchain && !v.kernel_mode) pcs.push_back(v.ip);
    const std::shared_ptr<const perf::ModuleList>& list = p.lists().at(p.samples()[index].list);
    auto stack = std::make_unique<sprov_stack>();
    stack->modules = std::shared_ptr<const std::vector<memory::SnapshotModule>>(list, &list->modules);
    stack->module_root = prof->snap.snap.module_root;
    stack->pid = v.pid;
    stack->stop = unwind::StopReason::kEndOfStack;
    for (size_t i = 0; i < pcs.size(); i++) {
      if (i == max_frames) {
        stack->stop = unwind::StopReason::kMaxFrames;
        break;
      }
      unwind::Frame f;
      f.pc = pcs[i];
      f.method = unwind::Method::kCallchain;
      f.lookup_prev = i > 0;
      const uint64_t lookup = f.lookup_prev ? f.pc - 1 : f.pc;
      auto it = std::upper_bound(list->modules.begin(), list->modules.end(), lookup,
                                 [](uint64_t a, const memory::SnapshotModule& m) { return a < m.start; });
      if (it != list->modules.begin() && lookup < std::prev(it)->end) {
        f.module_index = static_cast<int32_t>(std::prev(it) - list->modules.begin());
        const memory::SnapshotModule& m = *std::prev(it);
        // The vDSO has no file: load it once into the context's module cache from its bytes,
        // where sprov_symbolizer_frame finds it by build-id.
        if (m.path == kVdsoName && !m.build_id.empty() && !p.vdso_bytes().empty() &&
            prof->vdso_loaded.insert(m.build_id.hex()).second) {
          memory::Snapshot vs;
          if (vs.add_memory(list->vdso_start, p.vdso_bytes().data(), p.vdso_bytes().size()).ok())
            (void)acquire_module(prof->ctx, &vs, m, stack->module_root);
        }
      }
      stack->frames.push_back(f);
    }
    *out = stack.release();
    return 0;
  });
}

SPROV_API int sprov_profile_kernel_symbol(sprov_profile* prof, uint64_t addr, struct sprov_kernel_symbol* out) {
  return guard([&] {
    if (prof == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_kernel_symbol: prof is NULL"));
    struct sprov_kernel_symbol k = {};
    k.sz = sizeof(k);
    uint64_t start = 0;
    if (const perf::KernelSymbols::Symbol* sym = prof->prof->kernel_namer().find(addr, &start)) {
      k.name = sym->name.data();  // NUL-terminated (KernelSymbols::Symbol)
      k.module = sym->module.data();
      k.start = start;
      k.offset = addr - start;
    }
    return fill_out(out, k, "sprov_kernel_symbol");
  });
}

SPROV_API int sprov_record(sprov_context* ctx, const struct sprov_record_opts* opts, struct sprov_record_result* out) {
  return guard([&] {
    if (ctx == nullptr || opts == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: NULL %s", ctx ? "opts" : "ctx"));
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_record_opts), "sprov_record_opts")) return e;
    perf::RecordOptions o;
    o.pid = SPROV_OPTS_GET(opts, sprov_record_opts, pid, int64_t{0});
    const char* const* argv = SPROV_OPTS_GET(opts, sprov_record_opts, argv, nullptr);
    const char* output = SPROV_OPTS_GET(opts, sprov_record_opts, output, nullptr);
    o.frequency = SPROV_OPTS_GET(opts, sprov_record_opts, frequency, 0u);
    o.stack_size = SPROV_OPTS_GET(opts, sprov_record_opts, stack_size, 0u);
    o.duration_ms = SPROV_OPTS_GET(opts, sprov_record_opts, duration_ms, 0u);
    const uint32_t f = SPROV_OPTS_GET(opts, sprov_record_opts, flags, 0u);
    if ((f & ~uint32_t{SPROV_RECORD_KERNEL | SPROV_RECORD_OFF_CPU | SPROV_RECORD_PYTHON}) != 0 ||
        (f & SPROV_RECORD_OFF_CPU && !(f & SPROV_RECORD_KERNEL)))
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_record_opts.flags 0x%x: only SPROV_RECORD_KERNEL (0x1), with or without "
                             "SPROV_RECORD_OFF_CPU (0x2), and SPROV_RECORD_PYTHON (0x4) are defined",
                             f));
    if (f & SPROV_RECORD_PYTHON) {
      object::DebugFileOptions dopts;
      dopts.debug_dirs = ctx->ctx.config().debug_dirs;
      dopts.sysroot = ctx->ctx.config().sysroot;
      o.python = std::make_shared<CPythonRecordSampler>(std::move(dopts));
    }
    if (f & SPROV_RECORD_KERNEL) o.kernel_mode = f & SPROV_RECORD_OFF_CPU ? perf::kKernelOffCpu : perf::kKernelCpuClock;
    using ProgressFn = void (*)(uint64_t, uint64_t, void*);
    if (ProgressFn fn = SPROV_OPTS_GET(opts, sprov_record_opts, progress, ProgressFn{nullptr})) {
      void* arg = SPROV_OPTS_GET(opts, sprov_record_opts, progress_arg, static_cast<void*>(nullptr));
      o.progress = [fn, arg](uint64_t samples, uint64_t lost) { fn(samples, lost, arg); };
    }
    if ((o.pid != 0) == (argv != nullptr && argv[0] != nullptr))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: give exactly one of pid (%lld) and argv",
                             static_cast<long long>(o.pid)));
    if (o.pid < 0) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: pid %lld", static_cast<long long>(o.pid)));
    if (output == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: output is NULL"));
    if (o.frequency == 0) o.frequency = 999;
    if (o.frequency > 100000)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: frequency %u exceeds 100000", o.frequency));
    if (o.stack_size == 0) o.stack_size = 8192;
    if (o.stack_size % 8 != 0 || o.stack_size > 65528)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: stack_size %u is not a multiple of 8 in [8, 65528]",
                             o.stack_size));
    for (size_t i = 0; argv != nullptr && argv[i] != nullptr; i++) o.argv.emplace_back(argv[i]);
    o.output = output;
    o.root = ctx->ctx.config().sysroot;
    perf::RecordStats stats;
    if (Status st = perf::record(o, &stats); !st.ok()) return fail(st.error());
    // One message per finding (a module left out or read from memory).
    for (size_t at = 0; at < stats.warnings.size();) {
      size_t nl = stats.warnings.find('\n', at);
      if (nl == std::string::npos) nl = stats.warnings.size();
      if (nl > at) ctx->ctx.log(SPROV_LOG_WARN, "%.*s", static_cast<int>(nl - at), stats.warnings.c_str() + at);
      at = nl + 1;
    }
    if (out != nullptr) {
      struct sprov_record_result r = {};
      r.sz = sizeof(r);
      r.samples = stats.samples;
      r.lost = stats.lost;
      r.threads = stats.threads;
      r.exit_status = stats.exit_status;
      r.python_read = stats.python_read;
      r.python_torn = stats.python_torn;
      r.python_damaged = stats.python_damaged;
      r.python_no_thread = stats.python_no_thread;
      r.python_processes = stats.python_processes;
      return fill_out(out, r, "sprov_record_result");
    }
    return 0;
  });
}

// ------------------------------------------------------------- the eBPF sampler (stackprov/kernel.h)

struct sprov_kernel_sampler {
  std::unique_ptr<perf::KernelSampler> s;
};

SPROV_API int sprov_kernel_sampler_open(const struct sprov_kernel_sampler_opts* opts, sprov_kernel_sampler** out) {
  return guard([&] {
    if (opts == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_open: %s is NULL", opts ? "out" : "opts"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_kernel_sampler_opts), "sprov_kernel_sampler_opts")) return e;
    const int64_t pid = SPROV_OPTS_GET(opts, sprov_kernel_sampler_opts, pid, int64_t{0});
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_kernel_sampler_opts, flags, 0u);
    uint32_t freq = SPROV_OPTS_GET(opts, sprov_kernel_sampler_opts, frequency, 0u);
    uint32_t stack = SPROV_OPTS_GET(opts, sprov_kernel_sampler_opts, stack_size, 0u);
    if (pid <= 0 || pid > 4194304)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_open: pid %lld", static_cast<long long>(pid)));
    if (flags & ~uint32_t{SPROV_KERNEL_SAMPLER_OFF_CPU | SPROV_KERNEL_SAMPLER_EVENT_FDS})
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_opts.flags 0x%x: unknown bits", flags));
    if ((flags & SPROV_KERNEL_SAMPLER_OFF_CPU) && (flags & SPROV_KERNEL_SAMPLER_EVENT_FDS))
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_kernel_sampler_opts.flags 0x%x: OFF_CPU and EVENT_FDS exclude each other", flags));
    const int* fds = SPROV_OPTS_GET(opts, sprov_kernel_sampler_opts, event_fds, static_cast<const int*>(nullptr));
    const uint32_t nfds = SPROV_OPTS_GET(opts, sprov_kernel_sampler_opts, event_fd_count, 0u);
    if ((flags & SPROV_KERNEL_SAMPLER_EVENT_FDS) && (fds == nullptr || nfds == 0 || nfds > 65536))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_opts: EVENT_FDS with %u event fds%s (1 to 65536)",
                             nfds, fds == nullptr ? " and event_fds NULL" : ""));
    if (freq == 0) freq = 999;
    if (freq > 100000) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_open: frequency %u", freq));
    if (stack == 0) stack = 8192;
    if (stack > SPROV_KERNEL_MAX_STACK)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_open: stack_size %u, at most %d", stack,
                             SPROV_KERNEL_MAX_STACK));
    perf::KernelSamplerOptions o;
    o.tgid = static_cast<uint32_t>(pid);
    o.stack_bytes = stack;
    auto ks = perf::KernelSampler::open(o);
    if (!ks) return fail(std::move(ks).error());
    auto h = std::make_unique<sprov_kernel_sampler>();
    h->s = std::move(ks).value();
    Status st;
    if (flags & SPROV_KERNEL_SAMPLER_EVENT_FDS) {
      uint32_t attached = 0;
      for (uint32_t i = 0; i < nfds; i++) {
        Status a = h->s->attach_perf_event(fds[i], /*keep_samples=*/true);
        if (a.ok()) attached++;
        else if (st.ok()) st = make_error(SPROV_ERR_INVALID_ARG, "event fd %d: %s", fds[i], a.error().message.c_str());
      }
      if (attached > 0) st = {};
      else st = make_error(SPROV_ERR_INVALID_ARG, "none of the %u event fds takes the sampler (the first: %s)", nfds,
                           st.ok() ? "?" : st.error().message.c_str());
    } else {
      st = flags & SPROV_KERNEL_SAMPLER_OFF_CPU ? h->s->attach_sched_switch() : h->s->attach_cpu_clock(pid, freq);
    }
    if (!st.ok()) return fail(st.error());
    *out = h.release();
    return 0;
  });
}

SPROV_API int sprov_kernel_sampler_poll(sprov_kernel_sampler* s, int timeout_ms, sprov_kernel_event_fn fn, void* arg) {
  return guard([&] {
    if (s == nullptr || fn == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_sampler_poll: %s is NULL", s ? "fn" : "s"));
    auto n = s->s->poll(timeout_ms < 0 ? 0 : timeout_ms, [&](const uint8_t* e, size_t len) { fn(e, len, arg); });
    if (!n) return fail(std::move(n).error());
    return n.value();
  });
}

SPROV_API uint64_t sprov_kernel_sampler_dropped(const sprov_kernel_sampler* s) {
  return guard_value<uint64_t>(0, [&]() -> uint64_t { return s ? s->s->dropped() : 0; });
}

SPROV_API void sprov_kernel_sampler_free(sprov_kernel_sampler* s) { delete s; }

}  // extern "C"
