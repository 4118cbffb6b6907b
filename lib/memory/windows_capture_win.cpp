// SPDX-License-Identifier: Apache-2.0
// Live-process capture on Windows: OpenProcess, Toolhelp thread list, SuspendThread, GetThreadContext,
// ReadProcessMemory of the stacks, the psapi module list; every thread resumed on every path.
#include "memory/windows_capture.hpp"

#include <windows.h>
#include <psapi.h>
#include <tlhelp32.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "pe/loaded_image.hpp"

namespace stackprov::memory {

namespace {

/// A Windows error as the capture's negative errno (what a caller can act on), the error number kept
/// in the message.
int errno_of(DWORD e) {
  switch (e) {
    case ERROR_ACCESS_DENIED: return -EPERM;
    case ERROR_INVALID_PARAMETER: return -ESRCH;  // OpenProcess/OpenThread of an id that is not there
    default: return SPROV_ERR_CAPTURE;
  }
}

struct Handle {
  HANDLE h = nullptr;
  explicit Handle(HANDLE v) : h(v == INVALID_HANDLE_VALUE ? nullptr : v) {}
  ~Handle() {
    if (h != nullptr) CloseHandle(h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

/// The threads this capture suspended: resumed and closed by the destructor, on every path.
struct SuspendedThreads {
  struct Entry {
    DWORD tid;
    HANDLE h;
  };
  std::vector<Entry> list;
  ~SuspendedThreads() {
    for (const Entry& e : list) {
      ResumeThread(e.h);
      CloseHandle(e.h);
    }
  }
};

std::string utf8(const wchar_t* w, size_t n) {
  if (n == 0) return "";
  const int len = WideCharToMultiByte(CP_UTF8, 0, w, static_cast<int>(n), nullptr, 0, nullptr, nullptr);
  if (len <= 0) return "";
  std::string s(static_cast<size_t>(len), '\0');
  WideCharToMultiByte(CP_UTF8, 0, w, static_cast<int>(n), s.data(), len, nullptr, nullptr);
  return s;
}

/// The ids of the threads of `pid`, sorted; an empty list with *err set when the snapshot fails.
std::vector<DWORD> list_threads(DWORD pid, DWORD* err) {
  std::vector<DWORD> out;
  Handle snap(CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0));
  if (snap.h == nullptr) {
    *err = GetLastError();
    return out;
  }
  THREADENTRY32 te;
  te.dwSize = sizeof te;
  // A system-wide list: bounded by what the kernel returns, each entry checked for its size.
  for (BOOL ok = Thread32First(snap.h, &te); ok; ok = Thread32Next(snap.h, &te)) {
    if (te.dwSize >= offsetof(THREADENTRY32, th32OwnerProcessID) + sizeof te.th32OwnerProcessID &&
        te.th32OwnerProcessID == pid)
      out.push_back(te.th32ThreadID);
    te.dwSize = sizeof te;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// Bytes readable from `sp` up in the committed pages of the allocation holding `sp` (a stack is one
/// reservation: committed from the guard page up to its base), at most `limit`.
uint64_t stack_extent(HANDLE proc, uint64_t sp, uint64_t limit) {
  MEMORY_BASIC_INFORMATION mbi;
  if (VirtualQueryEx(proc, reinterpret_cast<LPCVOID>(sp), &mbi, sizeof mbi) != sizeof mbi || mbi.State != MEM_COMMIT)
    return 0;
  const void* const alloc = mbi.AllocationBase;
  uint64_t end = reinterpret_cast<uint64_t>(mbi.BaseAddress) + mbi.RegionSize;
  // Each region is at least a page: the loop ends after limit / 4096 + 1 queries at most.
  while (end - sp < limit) {
    if (VirtualQueryEx(proc, reinterpret_cast<LPCVOID>(end), &mbi, sizeof mbi) != sizeof mbi ||
        mbi.AllocationBase != alloc || mbi.State != MEM_COMMIT || (mbi.Protect & (PAGE_GUARD | PAGE_NOACCESS)) != 0 ||
        mbi.RegionSize == 0)
      break;
    end = reinterpret_cast<uint64_t>(mbi.BaseAddress) + mbi.RegionSize;
  }
  return std::min(end - sp, limit);
}

/// The modules of `proc` as minidump::Module values (base, SizeOfImage, TimeDateStamp from the
/// loaded headers, the path), for plan_pe_module.
std::vector<minidump::Module> list_modules(HANDLE proc, ReadProcessMemoryReader& reader, std::string* warnings) {
  std::vector<minidump::Module> out;
  std::vector<HMODULE> mods(1024);
  DWORD need = 0;
  if (!EnumProcessModulesEx(proc, mods.data(), static_cast<DWORD>(mods.size() * sizeof(HMODULE)), &need,
                            LIST_MODULES_64BIT)) {
    *warnings += "EnumProcessModulesEx failed (error " + std::to_string(GetLastError()) + "): no module list\n";
    return out;
  }
  const size_t n = std::min<size_t>(need / sizeof(HMODULE), mods.size());
  std::vector<wchar_t> path(32768);  // the longest Windows path
  if (need / sizeof(HMODULE) > mods.size())
    *warnings += "more than " + std::to_string(mods.size()) + " modules: the first ones are kept\n";
  for (size_t i = 0; i < n; i++) {
    MODULEINFO mi;
    const DWORD len = GetModuleFileNameExW(proc, mods[i], path.data(), static_cast<DWORD>(path.size()));
    if (!GetModuleInformation(proc, mods[i], &mi, sizeof mi) || len == 0) {
      *warnings += "module at " + std::to_string(reinterpret_cast<uint64_t>(mods[i])) + ": no name or size (error " +
                   std::to_string(GetLastError()) + "): left out\n";
      continue;
    }
    minidump::Module m;
    m.base = reinterpret_cast<uint64_t>(mi.lpBaseOfDll);
    m.size = mi.SizeOfImage;
    m.name = utf8(path.data(), std::min<size_t>(len, path.size()));
    auto h = pe::read_loaded_headers(
        [&](uint64_t rva, void* buf, size_t l) {
          return rva < m.size && l <= m.size - rva && reader.read(m.base + rva, buf, l);
        },
        "module " + m.name);
    if (h.ok()) m.timestamp = h.value().timestamp;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

bool ReadProcessMemoryReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  if (addr + len < addr) return false;
  SIZE_T got = 0;
  if (!ReadProcessMemory(static_cast<HANDLE>(process_), reinterpret_cast<LPCVOID>(addr), buf, len, &got)) {
    last_error_ = GetLastError();
    return false;
  }
  return got == len;
}

Result<ProcessCapture> capture_windows_process(uint32_t pid, const WindowsCaptureOptions& opts,
                                               const WhileStopped& while_stopped) {
  if (pid == GetCurrentProcessId())
    return make_error(SPROV_ERR_CAPTURE, "process %u is the calling process: its threads cannot all be suspended", pid);
  Handle proc(OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, FALSE, pid));
  if (proc.h == nullptr) {
    const DWORD e = GetLastError();
    return make_error(errno_of(e), "OpenProcess of process %u: Windows error %lu", pid, static_cast<unsigned long>(e));
  }
  BOOL wow64 = FALSE;
  if (IsWow64Process(proc.h, &wow64) && wow64)
    return make_error(SPROV_ERR_UNSUPPORTED, "process %u is a 32-bit process (WOW64): only x64 processes are captured",
                      pid);
  DWORD list_err = 0;
  std::vector<DWORD> tids = list_threads(pid, &list_err);
  if (tids.empty())
    return make_error(list_err != 0 ? errno_of(list_err) : -ESRCH, "process %u: no thread listed (Windows error %lu)",
                      pid, static_cast<unsigned long>(list_err));
  if (opts.only_tid != 0) {
    if (!std::binary_search(tids.begin(), tids.end(), static_cast<DWORD>(opts.only_tid)))
      return make_error(-ESRCH, "thread %u is not a thread of process %u", opts.only_tid, pid);
    tids.assign(1, opts.only_tid);
  }
  ProcessCapture out;
  out.pid = pid;
  SuspendedThreads stopped;
  for (DWORD tid : tids) {
    const HANDLE th = OpenThread(THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT | THREAD_QUERY_INFORMATION, FALSE, tid);
    if (th == nullptr) {
      out.warnings += "thread " + std::to_string(tid) + ": OpenThread failed (error " + std::to_string(GetLastError()) +
                      "; it may have exited)\n";
      continue;
    }
    if (SuspendThread(th) == static_cast<DWORD>(-1)) {
      out.warnings += "thread " + std::to_string(tid) + ": SuspendThread failed (error " +
                      std::to_string(GetLastError()) + ")\n";
      CloseHandle(th);
      continue;
    }
    stopped.list.push_back({tid, th});
  }
  if (stopped.list.empty())
    return make_error(SPROV_ERR_CAPTURE, "process %u: no thread could be suspended: %s", pid, out.warnings.c_str());

  ReadProcessMemoryReader reader(proc.h);
  Snapshot base;
  base.arch = Arch::kX86_64;
  base.endian = Endian::kLittle;
  base.pid = pid;
  std::vector<SnapshotModule> mods;
  MinidumpCaptureOptions mopts = opts.modules;
  mopts.own_module_paths = true;
  const TargetRead read = [&](uint64_t addr, void* buf, size_t len) { return reader.read(addr, buf, len); };
  bool first = true;
  for (const minidump::Module& m : list_modules(proc.h, reader, &out.warnings)) {
    PlannedModule plan = plan_pe_module(m, read, "process", mopts, &out.warnings);
    if (first) {
      const size_t k = m.name.find_last_of("\\/");
      out.program_name = k == std::string::npos ? m.name : m.name.substr(k + 1);
      first = false;
    }
    if (plan.snap.end > plan.snap.start) mods.push_back(std::move(plan.snap));
  }
  if (Status s = base.set_modules(std::move(mods)); !s.ok())
    return make_error(s.error().code, "process %u: module list: %s", pid, s.error().message.c_str());

  uint64_t stack_budget = kMaxTotalStackBytes;
  uint64_t copies_left = kMaxThreadModuleCopies / std::max<uint64_t>(1, base.modules.size());
  for (const SuspendedThreads::Entry& e : stopped.list) {
    const std::string tname = "thread " + std::to_string(e.tid);
    if (copies_left == 0) {
      out.warnings += "process " + std::to_string(pid) + ": more threads than the limit for " +
                      std::to_string(base.modules.size()) + " modules; " + tname + " and later ones skipped\n";
      break;
    }
    copies_left--;
    alignas(16) CONTEXT ctx;
    std::memset(&ctx, 0, sizeof ctx);
    ctx.ContextFlags = CONTEXT_FULL;
    if (!GetThreadContext(e.h, &ctx)) {
      out.warnings += tname + ": GetThreadContext failed (error " + std::to_string(GetLastError()) + "): skipped\n";
      continue;
    }
    const uint64_t gpr[16] = {ctx.Rax, ctx.Rcx, ctx.Rdx, ctx.Rbx, ctx.Rsp, ctx.Rbp, ctx.Rsi, ctx.Rdi,
                              ctx.R8,  ctx.R9,  ctx.R10, ctx.R11, ctx.R12, ctx.R13, ctx.R14, ctx.R15};
    Snapshot s = base;
    s.tid = e.tid;
    set_x64_context(s, ctx.Rip, gpr, true);
    const uint64_t extent = stack_extent(proc.h, ctx.Rsp, std::min<uint64_t>(opts.max_stack_bytes, stack_budget));
    if (extent == 0 && stack_budget == 0) {
      out.warnings += tname + ": no stack copied: all threads' stacks together reached " +
                      std::to_string(kMaxTotalStackBytes >> 20) + " MiB\n";
    } else if (extent == 0) {
      out.warnings += tname + ": rsp " + std::to_string(ctx.Rsp) + " is not in committed memory: no stack copied\n";
    } else {
      stack_budget -= extent;
      std::vector<uint8_t> stack(extent);
      if (!reader.read(ctx.Rsp, stack.data(), stack.size()))
        out.warnings += tname + ": ReadProcessMemory of its stack failed (error " + std::to_string(reader.last_error()) +
                        ")\n";
      else if (Status st = s.add_memory(ctx.Rsp, stack.data(), stack.size()); !st.ok())
        out.warnings += tname + ": stack copy skipped: " + st.error().message + "\n";
    }
    if (while_stopped) while_stopped(s, reader);
    out.threads.push_back(std::move(s));
  }
  if (out.threads.empty())
    return make_error(SPROV_ERR_CAPTURE, "process %u: no thread's context could be read: %s", pid, out.warnings.c_str());
  return out;
}

}  // namespace stackprov::memory
