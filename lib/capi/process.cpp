// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_process — live multi-thread capture (ptrace) and its accessors; cores are in core.cpp.
#include <algorithm>
#include <cerrno>
#include <limits>

#include "capi/internal.hpp"
#include "memory/process_capture.hpp"

using namespace stackprov;
using namespace stackprov::capi;

extern "C" {

SPROV_API int sprov_process_capture(sprov_context* ctx, int64_t pid, const struct sprov_process_opts* opts,
                                    sprov_process** out) {
  return guard([&] {
    if (ctx == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_capture: NULL %s", ctx ? "out" : "ctx"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_process_opts), "sprov_process_opts")) return e;
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "invalid pid %lld", static_cast<long long>(pid)));
    const int64_t tid = SPROV_OPTS_GET(opts, sprov_process_opts, tid, int64_t{0});
    if (tid < 0 || tid > std::numeric_limits<pid_t>::max())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "invalid tid %lld", static_cast<long long>(tid)));
    uint32_t max_bytes = SPROV_OPTS_GET(opts, sprov_process_opts, max_stack_bytes, 0u);
    if (max_bytes == 0) max_bytes = kProcessDefaultStackBytes;
    if (max_bytes > kMaxStackBytes)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "max_stack_bytes %u exceeds %u", max_bytes, kMaxStackBytes));
    RuntimeCapture runtime;
    if (int e = prepare_runtime_capture(opts, &runtime)) return e;
    if (const char* sp = SPROV_OPTS_GET(opts, sprov_process_opts, symbol_path, nullptr); sp != nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "symbol_path %s is only read for minidumps", sp));
    if (const char* exe = SPROV_OPTS_GET(opts, sprov_process_opts, exe, nullptr); exe != nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_process_opts.exe (\"%s\") is for core files; it must be NULL for a live "
                             "process",
                             exe));

    auto prewalk = [&](memory::Snapshot& s, memory::MemoryReader& live) {
      prewalk_record(ctx, s, live);
      capture_runtime(ctx, s, live, &runtime);  // every thread is still stopped
    };
    // Kernel stacks before attaching: a ptrace stop moves a blocked thread out of its system call
    // (into ptrace_stop), so /proc would show the stop's stack instead.
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u);
    const bool kernel = flags & SPROV_PROCESS_KERNEL_STACKS;
    if ((flags & SPROV_PROCESS_KERNEL_BTF) && !kernel)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "SPROV_PROCESS_KERNEL_BTF needs SPROV_PROCESS_KERNEL_STACKS"));
    std::shared_ptr<const perf::KernelBtf> btf;
    if (flags & SPROV_PROCESS_KERNEL_BTF) {  // before the threads are stopped: ~0.1 s to parse and index
      auto b = perf::KernelBtf::open();
      if (!b.ok()) return fail(b.error());
      btf = std::move(b).value();
    }
    std::vector<memory::KernelThread> kernel_threads;
    if (kernel) kernel_threads = memory::read_kernel_threads(pid, tid);
    auto root = HeldRoot::hold(pid);  // before the capture: the root the maps lines are read in
    auto cap = memory::capture_process(static_cast<pid_t>(pid), static_cast<pid_t>(tid), max_bytes, prewalk);
    if (!cap.ok()) return fail(cap.error());

    auto proc = std::make_unique<sprov_process>();
    proc->pid = cap->pid;
    proc->root = std::move(root);
    proc->warnings = std::move(cap->warnings) + runtime.warnings;
    proc->runtime = std::move(runtime);
    std::sort(cap->threads.begin(), cap->threads.end(),
              [](const memory::Snapshot& a, const memory::Snapshot& b) { return a.tid < b.tid; });
    proc->threads.reserve(cap->threads.size());
    proc->program = cap->program_name;
    proc->kernel_read = kernel;
    proc->kernel = std::move(kernel_threads);
    proc->btf = std::move(btf);
    for (memory::Snapshot& s : cap->threads) {
      auto name = cap->thread_names.find(s.tid);
      proc->thread_names.push_back(name != cap->thread_names.end() ? name->second : std::string());
      auto h = std::make_unique<sprov_snapshot>();
      h->snap = std::move(s);
      attach_runtime(proc->runtime, h->snap);  // serialized with the thread (snapshot section 5)
      proc->threads.push_back(std::move(h));
    }
    if (!proc->warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "process %lld: %s", static_cast<long long>(pid),
                                              proc->warnings.c_str());
    *out = proc.release();
    return 0;
  });
}

SPROV_API void sprov_process_free(sprov_process* proc) { delete proc; }

SPROV_API int64_t sprov_process_pid(const sprov_process* proc) { return proc ? proc->pid : 0; }

SPROV_API size_t sprov_process_thread_count(const sprov_process* proc) { return proc ? proc->threads.size() : 0; }

SPROV_API const sprov_snapshot* sprov_process_thread(const sprov_process* proc, size_t index) {
  return guard_value<const sprov_snapshot*>(nullptr, [&]() -> const sprov_snapshot* {
    if (proc == nullptr) {
      fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_thread: proc is NULL"));
      return nullptr;
    }
    if (index >= proc->threads.size()) {
      fail(make_error(SPROV_ERR_INVALID_ARG, "thread index %zu out of range (%zu threads)", index,
                      proc->threads.size()));
      return nullptr;
    }
    return proc->threads[index].get();
  });
}

SPROV_API const char* sprov_process_warnings(const sprov_process* proc) {
  return proc ? proc->warnings.c_str() : "";
}

SPROV_API const char* sprov_process_notes(const sprov_process* proc) { return proc ? proc->notes.c_str() : ""; }

SPROV_API int sprov_process_get_info(const sprov_process* proc, struct sprov_process_info* out) {
  return guard([&] {
    if (proc == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_get_info: NULL %s", proc ? "out" : "proc"));
    struct sprov_process_info s = proc->info;
    s.sz = sizeof(s);
    s.program = proc->program.c_str();
    s.command_line = proc->command_line.c_str();
    s.signal_name = proc->signal_name.c_str();
    s.signal_description = proc->signal_description.c_str();
    s.signal_code_name = proc->signal_code_name.c_str();
    s.exception_name = proc->exception_name.c_str();
    return fill_out(out, s, "sprov_process_info");
  });
}

SPROV_API const char* sprov_process_thread_name(const sprov_process* proc, size_t index) {
  return guard_value<const char*>(nullptr, [&]() -> const char* {
    if (proc == nullptr || index >= proc->thread_names.size()) {
      fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_thread_name: %s",
                      proc ? "index out of range" : "proc is NULL"));
      return nullptr;
    }
    return proc->thread_names[index].c_str();
  });
}

}  // extern "C"
