// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_process_open_minidump -- a sprov_process from a Windows minidump (one snapshot per thread).
#include <unordered_map>
#include <cstring>

#include "capi/internal.hpp"
#include "memory/minidump_capture.hpp"
#include "minidump/minidump.hpp"
#include "pe/pe_object.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

std::vector<std::string> split_path(const char* s) {
  std::vector<std::string> out;
  if (s == nullptr) return out;
  std::string cur;
  for (const char* p = s;; p++) {
    if (*p == ':' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

std::string id_note(const memory::MinidumpModuleInfo& m, const ModuleId& id) {
  std::string line = "module " + m.name + ": ";
  switch (m.id_source) {
    case memory::IdSource::kNone:
      line += std::string("no identity (the dump's CodeView record is empty, ") +
              (m.headers_in_memory ? "the image headers in its memory have no RSDS record"
                                   : "the image headers are not in its memory") +
              (m.file.empty() ? ", no module file was found)" : ", the module file has no RSDS record)");
      break;
    case memory::IdSource::kCodeView: line += "identity " + pe::symbol_server_key(id) + " from the dump's CodeView record"; break;
    case memory::IdSource::kMemory: line += "identity " + pe::symbol_server_key(id) +
                                            " from the image headers in the dump's memory (the CodeView record is empty)"; break;
    case memory::IdSource::kFile:
      line += "identity " + pe::symbol_server_key(id) + " from the module file (the CodeView record is empty, " +
              (m.headers_in_memory ? "the image headers in the dump's memory have no RSDS record)"
                                   : "the image headers are not in the dump's memory)");
      break;
    case memory::IdSource::kModuleList:
      line += "identity " + pe::identity_key(id) + " from the dump's module list (TimeDateStamp, SizeOfImage; " +
              "the CodeView record is empty, " +
              (m.headers_in_memory ? "the image headers in its memory have no RSDS record"
                                   : "the image headers are not in its memory") +
              (m.file.empty() ? ", no module file was found)" : ", the module file has no RSDS record)");
      break;
  }
  line += m.file.empty() ? "; no module file" : "; file " + m.file;
  return line + "\n";
}

}  // namespace

extern "C" {

SPROV_API int sprov_process_open_minidump(sprov_context* ctx, const char* path, const struct sprov_process_opts* opts,
                                          sprov_process** out) {
  return guard([&] {
    if (ctx == nullptr || path == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_open_minidump: NULL %s",
                             ctx == nullptr ? "ctx" : path == nullptr ? "path" : "out"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_process_opts), "sprov_process_opts")) return e;
    memory::MinidumpCaptureOptions mopts;
    mopts.tid = SPROV_OPTS_GET(opts, sprov_process_opts, tid, int64_t{0});
    if (mopts.tid < 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "tid %lld is negative", static_cast<long long>(mopts.tid)));
    const uint32_t max_bytes = SPROV_OPTS_GET(opts, sprov_process_opts, max_stack_bytes, 0u);
    if (max_bytes > kMaxStackBytes)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "max_stack_bytes %u exceeds %u", max_bytes, kMaxStackBytes));
    mopts.max_stack_bytes = max_bytes ? max_bytes : kProcessDefaultStackBytes;
    if (const char* exe = SPROV_OPTS_GET(opts, sprov_process_opts, exe, nullptr); exe != nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "exe %s: a minidump names its modules; give their directory as "
                             "symbol_path", exe));
    if (SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_opts.flags 0x%x: no capture flag applies to a minidump",
                             SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u)));
    mopts.symbol_path = split_path(SPROV_OPTS_GET(opts, sprov_process_opts, symbol_path, nullptr));
    mopts.offline = ctx->ctx.config().offline;

    auto dump = minidump::Minidump::open(path);
    if (!dump.ok()) return fail(dump.error());
    auto cap = memory::capture_minidump(*dump.value(), mopts,
                                        [&](memory::Snapshot& s, memory::MemoryReader& rd) { prewalk_record(ctx, s, rd); });
    if (!cap.ok()) return fail(cap.error());
    memory::MinidumpCapture& c = cap.value();

    auto proc = std::make_unique<sprov_process>();
    proc->pid = c.pid;
    proc->from_core = true;  // no live process behind it
    proc->warnings = std::move(c.warnings);
    const auto& dmods = dump.value()->modules();
    std::unordered_map<uint64_t, const ModuleId*> id_at;  // base -> identity: one pass, not modules^2
    for (const memory::SnapshotModule& m : c.threads.front().modules) id_at[m.start] = &m.build_id;
    for (size_t i = 0; i < c.modules.size() && i < dmods.size(); i++) {
      auto it = id_at.find(dmods[i].base);
      proc->notes += id_note(c.modules[i], it != id_at.end() ? *it->second : ModuleId{});
    }
    for (memory::Snapshot& s : c.threads) {
      proc->thread_names.emplace_back();
      auto h = std::make_unique<sprov_snapshot>();
      h->snap = std::move(s);
      proc->threads.push_back(std::move(h));
    }
    sprov_process_info& info = proc->info;
    if (c.has_exception) {
      info.has_exception = 1;
      info.exception_code = c.exception.code;
      info.exception_address = c.exception.address;
      info.exception_tid = c.exception.thread_id;
      proc->exception_name = minidump::exception_name(c.exception.code);
      if (!c.exception.context.size)
        proc->warnings += "the exception stream has no context: thread " + std::to_string(c.exception.thread_id) +
                          " is shown with its thread-list context\n";
    }
    if (!proc->warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "%s", proc->warnings.c_str());
    *out = proc.release();
    return 0;
  });
}

}  // extern "C"
