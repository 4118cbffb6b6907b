// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_process_open_core — a sprov_process from an ELF core file (one snapshot per thread).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "capi/internal.hpp"
#include "core/context.hpp"
#include "core/signals.hpp"
#include "elf/core_file.hpp"
#include "memory/core_capture.hpp"

using namespace stackprov;
using namespace stackprov::capi;

extern "C" {

SPROV_API int sprov_process_open_core(sprov_context* ctx, const char* core_path,
                                      const struct sprov_process_opts* opts, sprov_process** out) {
  return guard([&] {
    if (ctx == nullptr || core_path == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_open_core: NULL %s",
                             ctx == nullptr ? "ctx" : core_path == nullptr ? "core_path" : "out"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_process_opts), "sprov_process_opts")) return e;
    memory::CoreCaptureOptions copts;
    copts.tid = SPROV_OPTS_GET(opts, sprov_process_opts, tid, int64_t{0});
    if (copts.tid < 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "tid %lld is negative", static_cast<long long>(copts.tid)));
    const uint32_t max_bytes = SPROV_OPTS_GET(opts, sprov_process_opts, max_stack_bytes, 0u);
    if (max_bytes > kMaxStackBytes)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "max_stack_bytes %u exceeds %u", max_bytes, kMaxStackBytes));
    copts.max_stack_bytes = max_bytes ? max_bytes : kProcessDefaultStackBytes;
    RuntimeCapture runtime;
    if (int e = prepare_runtime_capture(opts, &runtime)) return e;
    if (SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u) & (SPROV_PROCESS_KERNEL_STACKS | SPROV_PROCESS_KERNEL_BTF))
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "SPROV_PROCESS_KERNEL_STACKS is for live processes: a core holds no kernel stack"));
    if (const char* sp = SPROV_OPTS_GET(opts, sprov_process_opts, symbol_path, nullptr); sp != nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "symbol_path %s is only read for minidumps", sp));
    if (const char* exe = SPROV_OPTS_GET(opts, sprov_process_opts, exe, nullptr); exe != nullptr) {
      struct stat st;
      if (stat(exe, &st) != 0) {
        const int e = errno;
        return fail(make_error(e == ENOENT ? SPROV_ERR_NOT_FOUND : -e, "exe %s: %s", exe, std::strerror(e)));
      }
      copts.exe = exe;
    }
    copts.sysroot = ctx->ctx.config().sysroot;
    copts.offline = ctx->ctx.config().offline;
    if (copts.offline && !copts.exe.empty())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "exe %s: the context is offline (SPROV_CTX_OFFLINE): no module "
                             "file is opened", copts.exe.c_str()));

    auto core = elf::CoreFile::open(core_path);
    if (!core.ok()) return fail(core.error());
    auto cap = memory::capture_core(*core.value(), copts, [&](memory::Snapshot& s, memory::MemoryReader& rd) {
      prewalk_record(ctx, s, rd);
      capture_runtime(ctx, s, rd, &runtime);
    });
    if (!cap.ok()) return fail(cap.error());

    auto proc = std::make_unique<sprov_process>();
    std::string proc_warnings_extra;
    proc->pid = cap.value().pid;
    proc->from_core = true;
    // Modules to be unwound from bundles (offline, or a missing file with a store): one note
    // per module without one, so that a walk that falls back or stops there is explained.
    if ((ctx->ctx.config().has_bundle_store || ctx->ctx.config().offline) && !cap.value().threads.empty()) {
      const memory::Snapshot& s0 = cap.value().threads.front();
      for (const memory::SnapshotModule& m : s0.modules) {
        if (m.path == kVdsoName) continue;
        if (!ctx->ctx.config().offline) {
          struct stat st;
          const std::string host = !s0.module_root.empty() ? join_root(s0.module_root, m.path) : ctx->ctx.host_path(m.path);
          if (stat(host.c_str(), &st) == 0) continue;
        }
        auto b = find_module_bundle(ctx, m);
        if (!b.ok())
          proc_warnings_extra += b.error().message +
                                 ": its frames are unwound without CFI (frame pointer) or the walk stops there\n";
      }
    }
    proc->warnings = std::move(cap.value().warnings) + proc_warnings_extra + runtime.warnings;
    proc->runtime = std::move(runtime);
    const memory::CoreCapture& c = cap.value();
    for (memory::Snapshot& s : cap.value().threads) {
      // The kernel's pr_fname is the thread group leader's comm; no other thread's name is in a core.
      proc->thread_names.push_back(s.tid == c.pid ? c.program_name : std::string());
      auto h = std::make_unique<sprov_snapshot>();
      h->snap = std::move(s);
      attach_runtime(proc->runtime, h->snap);  // serialized with the thread (snapshot section 5)
      proc->threads.push_back(std::move(h));
    }
    proc->program = c.program_name;
    proc->command_line = c.program_args;
    sprov_process_info& info = proc->info;
    const Arch arch = core.value()->arch();
    if (c.signal.signal != 0) {
      info.signal = c.signal.signal;
      info.signal_tid = c.signal.tid;
      proc->signal_name = signal_name(arch, c.signal.signal);
      proc->signal_description = signal_description(arch, c.signal.signal);
      if (c.signal.has_siginfo) {
        const elf::CoreSiginfo& si = c.signal.siginfo;
        info.has_siginfo = 1;
        info.signal_code = si.code;
        proc->signal_code_name = signal_code_name(arch, c.signal.signal, si.code);
        if (signal_has_fault_address(arch, c.signal.signal, si.code)) {
          info.has_fault_address = 1;
          info.fault_address = si.addr;
        }
      }
    }
    if (c.truncated) info.flags |= SPROV_PROCESS_CORE_TRUNCATED;
    if (c.build_id_mismatch) info.flags |= SPROV_PROCESS_BUILD_ID_MISMATCH;
    if (!proc->warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "%s", proc->warnings.c_str());
    *out = proc.release();
    return 0;
  });
}

}  // extern "C"
