// SPDX-License-Identifier: Apache-2.0
// map_file: guarded file mappings (a registry of mapped ranges and a chaining SIGBUS handler) and
// the module file size bound.
#include "core/mapped_file.hpp"

#ifdef _WIN32
#include <io.h>
#include <windows.h>
#else
#include <signal.h>
#include <sys/mman.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/module_cache.hpp"
#include "core/open_file.hpp"

namespace stackprov {

namespace {

std::atomic<uint64_t> g_faults{0};
std::atomic<int> g_guard{-1};           // -1: not decided yet
std::atomic<uint64_t> g_max_bytes{0};   // 0: not decided yet

#ifndef _WIN32
/// One registered mapping. A slot is claimed by a CAS of `begin` from free (0) or a tombstone to
/// kClaimed; `end` is stored before `begin` is published, so the handler never sees a half-written
/// range. Slots form an open-addressed table keyed by the mapping's base (probing from
/// slot_of(base), at most kProbe slots), so that finding a mapping's slot costs a few loads.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<uint32_t> faulted{0};
};
constexpr uintptr_t kClaimed = 1, kTombstone = 2, kLastMarker = 2;
constexpr size_t kSlots = 8192;  // mappings at once; past that, files are copied (FileGuard::kCopy)
constexpr size_t kProbe = 64;
Slot g_slots[kSlots];
struct sigaction g_previous;
size_t g_page = 4096;
std::once_flag g_install_once;
bool g_installed = false;

void on_sigbus(int sig, siginfo_t* info, void* uctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  // BUS_ADRERR is what a mapping past the end of its file raises (mm/filemap.c: VM_FAULT_SIGBUS).
  if (info->si_code == BUS_ADRERR) {
    for (Slot& s : g_slots) {
      const uintptr_t b = s.begin.load(std::memory_order_acquire);
      if (b <= kLastMarker || a < b || a >= s.end.load(std::memory_order_relaxed)) continue;
      void* page = reinterpret_cast<void*>(a & ~(static_cast<uintptr_t>(g_page) - 1));
      if (mmap(page, g_page, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
        break;  // cannot repair: fall through to the previous handler
      s.faulted.store(1, std::memory_order_relaxed);
      g_faults.fetch_add(1, std::memory_order_relaxed);
      return;  // the access is retried and reads zeros
    }
  }
  // Not ours: the handler installed before ours, else the default action.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // A SIGBUS sent by kill(2) or raise(3) (si_code <= 0) faults nothing: as the earlier
  // disposition would, it is ignored (SIG_IGN) or ends the process (SIG_DFL, raised again).
  const bool sent = info->si_code <= 0;
  if (sent && !(g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_handler == SIG_IGN) return;
  // SIG_DFL (or SIG_IGN, which a fault cannot honour): restore it; a fault runs the access again
  // and the kernel applies the default action (a core dump at the right place).
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
  if (sent) raise(SIGBUS);
}

bool install_handler() {
  std::call_once(g_install_once, [] {
    const long p = sysconf(_SC_PAGESIZE);
    if (p > 0) g_page = static_cast<size_t>(p);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    g_installed = sigaction(SIGBUS, &sa, &g_previous) == 0;
  });
  return g_installed;
}

size_t slot_of(uintptr_t base) { return static_cast<size_t>((base >> 12) * 0x9E3779B97F4A7C15ull >> 51) % kSlots; }

Slot* claim_slot(uintptr_t base) {
  for (size_t i = 0, k = slot_of(base); i < kProbe; ++i, k = (k + 1) % kSlots) {
    Slot& s = g_slots[k];
    for (uintptr_t was : {uintptr_t{0}, kTombstone}) {
      uintptr_t expected = was;
      if (s.begin.load(std::memory_order_relaxed) == was &&
          s.begin.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel))
        return &s;
    }
  }
  return nullptr;
}

Slot* find_slot(const void* base) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  for (size_t i = 0, k = slot_of(b); i < kProbe; ++i, k = (k + 1) % kSlots) {
    const uintptr_t v = g_slots[k].begin.load(std::memory_order_acquire);
    if (v == b) return &g_slots[k];
    if (v == 0) return nullptr;  // the end of this probe chain
  }
  return nullptr;
}

Result<void*> copy_file(int fd, size_t len, const std::string& path) {
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return make_error(-errno, "%s: cannot allocate %zu bytes: %s", path.c_str(), len, strerror(errno));
  size_t off = 0;
  while (off < len) {
    const ssize_t n = pread(fd, static_cast<char*>(m) + off, len - off, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the file shrank: the rest stays zero, as a guarded mapping would read
    off += static_cast<size_t>(n);
  }
  if (off < len) {
    g_faults.fetch_add(1, std::memory_order_relaxed);
  }
  return m;
}
#endif  // !_WIN32

}  // namespace

void set_file_guard(FileGuard g) { g_guard.store(static_cast<int>(g)); }

FileGuard file_guard() {
  int g = g_guard.load();
  if (g < 0) {
    const char* e = getenv("STACKPROV_FILE_GUARD");
    g = static_cast<int>(e != nullptr && strcmp(e, "copy") == 0 ? FileGuard::kCopy : FileGuard::kSigbus);
    int expected = -1;
    if (!g_guard.compare_exchange_strong(expected, g)) g = expected;
  }
  return static_cast<FileGuard>(g);
}

#ifdef _WIN32
// Windows: a section view of the file. NTFS refuses to truncate a file below a mapped view
// (ERROR_USER_MAPPED_FILE), so a view cannot lose its pages under the reader: no guard is needed,
// and kCopy (the embedder owns the exception handlers) maps the same way.
Result<void*> map_file(int fd, size_t len, bool writable, const std::string& path) {
  if (len == 0) return make_error(SPROV_ERR_INVALID_ARG, "%s: empty file", path.c_str());
  const HANDLE h = reinterpret_cast<HANDLE>(_get_osfhandle(fd));
  if (h == INVALID_HANDLE_VALUE) return make_error(-EBADF, "%s: no handle for descriptor %d", path.c_str(), fd);
  const HANDLE sec = CreateFileMappingW(h, nullptr, writable ? PAGE_WRITECOPY : PAGE_READONLY, 0, 0, nullptr);
  if (sec == nullptr)
    return make_error(-EIO, "%s: CreateFileMapping: error %lu", path.c_str(), static_cast<unsigned long>(GetLastError()));
  void* m = MapViewOfFile(sec, writable ? FILE_MAP_COPY : FILE_MAP_READ, 0, 0, len);
  const DWORD e = GetLastError();
  CloseHandle(sec);  // the view keeps the section
  if (m == nullptr) return make_error(-EIO, "%s: MapViewOfFile: error %lu", path.c_str(), static_cast<unsigned long>(e));
  return m;
}

void unmap_file(void* base, size_t) {
  if (base != nullptr) UnmapViewOfFile(base);
}

bool file_map_faulted(const void*) { return false; }
#else
Result<void*> map_file(int fd, size_t len, bool writable, const std::string& path) {
  if (len == 0) return make_error(SPROV_ERR_INVALID_ARG, "%s: empty file", path.c_str());
  if (file_guard() == FileGuard::kCopy || !install_handler()) return copy_file(fd, len, path);
  // Nothing touches the mapping before its slot is published: no fault can come before.
  void* m = mmap(nullptr, len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) {
    const int e = errno;
    return make_error(-e, "%s: mmap: %s", path.c_str(), strerror(e));
  }
  Slot* slot = claim_slot(reinterpret_cast<uintptr_t>(m));
  if (slot == nullptr) {  // the table is full around this address: an unguarded mapping is no option
    munmap(m, len);
    return copy_file(fd, len, path);
  }
  slot->faulted.store(0, std::memory_order_relaxed);
  slot->end.store(reinterpret_cast<uintptr_t>(m) + len, std::memory_order_relaxed);
  slot->begin.store(reinterpret_cast<uintptr_t>(m), std::memory_order_release);
  return m;
}

void unmap_file(void* base, size_t len) {
  if (base == nullptr) return;
  if (Slot* s = find_slot(base)) {
    s->begin.store(kClaimed, std::memory_order_release);
    s->end.store(0, std::memory_order_relaxed);
    munmap(base, len);
    s->begin.store(kTombstone, std::memory_order_release);  // keeps later probe chains whole
    return;
  }
  munmap(base, len);
}

bool file_map_faulted(const void* base) {
  const Slot* s = find_slot(base);
  return s != nullptr && s->faulted.load(std::memory_order_relaxed) != 0;
}
#endif  // _WIN32

uint64_t file_fault_count() { return g_faults.load(std::memory_order_relaxed); }

uint64_t max_file_bytes() {
  uint64_t n = g_max_bytes.load();
  if (n == 0) {
    n = uint64_t{4} << 30;
    if (const char* e = getenv("STACKPROV_MAX_FILE_SIZE"); e != nullptr && *e) {
      char* end = nullptr;
      const unsigned long long v = strtoull(e, &end, 10);
      if (end != nullptr && *end == '\0' && v > 0) n = v;
    }
    uint64_t expected = 0;
    if (!g_max_bytes.compare_exchange_strong(expected, n)) n = expected;
  }
  return n;
}

void set_max_file_bytes(uint64_t n) { g_max_bytes.store(n == 0 ? uint64_t{4} << 30 : n); }

Status check_file_size(const std::string& path, uint64_t size) {
  const uint64_t limit = max_file_bytes();
  if (size <= limit) return {};
  return make_error(SPROV_ERR_LIMIT,
                    "%s is %llu bytes, above the limit of %llu bytes for a module or debug file "
                    "(raise it with STACKPROV_MAX_FILE_SIZE or sprov_set_max_file_size)",
                    path.c_str(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(limit));
}

Result<MappedRegularFile> map_regular_file(const std::string& path, int not_regular_code) {
  int open_err = 0;
  const int fd = open_regular_file(path, &open_err);
  if (fd < 0) {
    if (open_err == EINVAL) return make_error(not_regular_code, "%s: not a regular file", path.c_str());
    return make_error(-open_err, "%s: open: %s", path.c_str(), strerror(open_err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return make_error(-err, "%s: fstat: %s", path.c_str(), strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return make_error(not_regular_code, "%s: not a regular file", path.c_str());
  }
  if (Status lim = check_file_size(path, static_cast<uint64_t>(st.st_size)); !lim) {
    close(fd);
    return lim.error();
  }
  MappedRegularFile out;
  out.size = static_cast<size_t>(st.st_size);
  out.identity = file_identity_of(st);
  if (out.size != 0) {
    auto m = map_file(fd, out.size, false, path);
    close(fd);
    if (!m) return std::move(m).error();
    out.base = m.value();
  } else {
    close(fd);
  }
  return out;
}

}  // namespace stackprov
