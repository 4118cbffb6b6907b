// SPDX-License-Identifier: Apache-2.0
// A live thread's kernel stack and system call from /proc/PID/task/TID/{stack,syscall}: checked parsers and the reader.
#include "memory/kernel_stack.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "stackprov/errors.h"

namespace stackprov::memory {

namespace {

/// The line for an error message: at most 80 bytes, control bytes as '?'.
std::string ks_shown(std::string_view s) {
  std::string o(s.substr(0, 80));
  for (char& c : o)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return o;
}

/// "0x" followed by 1-16 hex digits, the whole of `s`.
bool ks_parse_hex(std::string_view s, uint64_t* out) {
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || s[1] != 'x') return false;
  uint64_t v = 0;
  for (size_t i = 2; i < s.size(); i++) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

/// A decimal system call number (-1, or 0..999999), the whole of `s`.
bool ks_parse_nr(std::string_view s, int64_t* out) {
  if (s == "-1") {
    *out = -1;
    return true;
  }
  if (s.empty() || s.size() > 6) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

/// Splits `s` at single spaces into at most `max` fields; false when there are more, or an
/// empty field (two spaces, a leading or trailing one).
bool ks_split(std::string_view s, std::string_view* fields, size_t max, size_t* n) {
  *n = 0;
  while (true) {
    const size_t sp = s.find(' ');
    const std::string_view f = s.substr(0, sp);
    if (f.empty() || *n == max) return false;
    fields[(*n)++] = f;
    if (sp == std::string_view::npos) return true;
    s.remove_prefix(sp + 1);
  }
}

/// A symbol name as the kernel prints it: printable, no spaces, 1-255 bytes (KSYM_NAME_LEN 512
/// on new kernels; names are far shorter).
bool ks_plausible_name(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

Result<std::vector<KernelFrame>> parse_kernel_stack(std::string_view text) {
  if (text.size() > kMaxKernelText)
    return make_error(SPROV_ERR_LIMIT, "kernel stack: %zu bytes exceed %zu", text.size(), kMaxKernelText);
  std::vector<KernelFrame> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos)
      return make_error(SPROV_ERR_TRUNCATED, "kernel stack: line %zu '%s' has no newline", line_no + 1,
                        ks_shown(text).c_str());
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    line_no++;
    if (line.size() > kMaxKernelLine)
      return make_error(SPROV_ERR_LIMIT, "kernel stack: line %zu is %zu bytes (at most %zu)", line_no, line.size(),
                        kMaxKernelLine);
    if (out.size() == kMaxKernelFrames)
      return make_error(SPROV_ERR_LIMIT, "kernel stack: more than %zu frames", kMaxKernelFrames);
    // "[<ADDR>] " then %pB: "sym+0xOFF/0xSIZE", optionally " [module]" or " [module BUILDID]".
    if (line.size() < 4 || line.substr(0, 2) != "[<")
      return make_error(SPROV_ERR_BAD_FORMAT, "kernel stack: line %zu '%s' does not start with '[<'", line_no,
                        ks_shown(line).c_str());
    const size_t close = line.find(">] ");
    uint64_t addr = 0;
    const std::string_view a = line.substr(2, close == std::string_view::npos ? 0 : close - 2);
    if (close == std::string_view::npos || !(a == "0" || ks_parse_hex(a, &addr) || ks_parse_hex("0x" + std::string(a), &addr)))
      return make_error(SPROV_ERR_BAD_FORMAT, "kernel stack: line %zu '%s': no address in '[<...>] '", line_no,
                        ks_shown(line).c_str());
    std::string_view rest = line.substr(close + 3);
    KernelFrame f;
    if (const size_t sp = rest.find(' '); sp != std::string_view::npos) {
      std::string_view mod = rest.substr(sp + 1);
      rest = rest.substr(0, sp);
      if (mod.size() < 3 || mod.front() != '[' || mod.back() != ']')
        return make_error(SPROV_ERR_BAD_FORMAT, "kernel stack: line %zu '%s': module '%s' not in brackets", line_no,
                          ks_shown(line).c_str(), ks_shown(mod).c_str());
      mod = mod.substr(1, mod.size() - 2);
      mod = mod.substr(0, mod.find(' '));  // "[mod BUILDID]" (CONFIG_STACKTRACE_BUILD_ID)
      if (!ks_plausible_name(mod))
        return make_error(SPROV_ERR_BAD_FORMAT, "kernel stack: line %zu: module name '%s'", line_no,
                          ks_shown(mod).c_str());
      f.module = mod;
    }
    const size_t plus = rest.rfind('+');
    const size_t slash = rest.rfind('/');
    if (plus == std::string_view::npos || slash == std::string_view::npos || slash < plus ||
        !ks_plausible_name(rest.substr(0, plus)) || !ks_parse_hex(rest.substr(plus + 1, slash - plus - 1), &f.offset) ||
        !ks_parse_hex(rest.substr(slash + 1), &f.size))
      return make_error(SPROV_ERR_BAD_FORMAT, "kernel stack: line %zu '%s': not 'symbol+0xOFF/0xSIZE'", line_no,
                        ks_shown(line).c_str());
    f.symbol = rest.substr(0, plus);
    out.push_back(std::move(f));
  }
  return out;
}

Result<SyscallState> parse_syscall(std::string_view text) {
  SyscallState s;
  if (text.size() > 512 || text.empty() || text.back() != '\n')
    return make_error(SPROV_ERR_BAD_FORMAT, "syscall: '%s' is not one line", ks_shown(text).c_str());
  text.remove_suffix(1);
  if (text == "running") return s;
  std::string_view f[9];
  size_t n = 0;
  if (!ks_split(text, f, 9, &n) || (n != 3 && n != 9) || !ks_parse_nr(f[0], &s.nr) || (n == 3) != (s.nr == -1))
    return make_error(SPROV_ERR_BAD_FORMAT, "syscall: '%s' is neither 'running', '-1 SP PC' nor 'NR A1..A6 SP PC'",
                      ks_shown(text).c_str());
  for (size_t i = 1; i < n; i++) {
    uint64_t v = 0;
    if (!ks_parse_hex(f[i], &v))
      return make_error(SPROV_ERR_BAD_FORMAT, "syscall: field %zu '%s' is not 0xHEX", i + 1, ks_shown(f[i]).c_str());
    if (i + 2 < n) s.args[i - 1] = v;
  }
  ks_parse_hex(f[n - 2], &s.sp);
  ks_parse_hex(f[n - 1], &s.pc);
  s.kind = s.nr < 0 ? SyscallState::Kind::kNotInSyscall : SyscallState::Kind::kInSyscall;
  return s;
}

namespace {

/// Reads at most kMaxKernelText bytes of a /proc file; -errno on failure, -EFBIG when longer.
int ks_read_bounded(const std::string& path, std::string* out) {
  out->clear();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;
  char buf[4096];
  int rc = 0;
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = -errno;
      break;
    }
    if (n == 0) break;
    if (out->size() + static_cast<size_t>(n) > kMaxKernelText) {
      rc = -EFBIG;
      break;
    }
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return rc;
}

std::string ks_why_unreadable(const std::string& path, int rc) {
  std::string w = path + ": " + strerror(-rc);
  if (rc == -EACCES || rc == -EPERM) w += " (reading a kernel stack needs root: CAP_SYS_ADMIN)";
  return w;
}

}  // namespace

KernelThread read_kernel_thread(int64_t pid, int64_t tid) {
  KernelThread t;
  t.tid = tid;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
  std::string text;
  auto syscall_state = [&](Result<SyscallState>* out) {
    if (int rc = ks_read_bounded(dir + "syscall", &text); rc != 0) {
      t.why = ks_why_unreadable(dir + "syscall", rc);
      return false;
    }
    *out = parse_syscall(text);
    if (!out->ok()) {
      t.why = dir + "syscall: " + out->error().message;
      return false;
    }
    return true;
  };
  Result<SyscallState> before = SyscallState{}, after = SyscallState{};
  if (!syscall_state(&before)) return t;
  if (int rc = ks_read_bounded(dir + "stack", &text); rc != 0) {
    t.why = ks_why_unreadable(dir + "stack", rc);
    return t;
  }
  auto frames = parse_kernel_stack(text);
  if (!frames.ok()) {
    t.why = dir + "stack: " + frames.error().message;
    return t;
  }
  if (!syscall_state(&after)) return t;
  const SyscallState& b = before.value();
  const SyscallState& a = after.value();
  t.syscall = a;
  if (b.kind == SyscallState::Kind::kRunning || a.kind == SyscallState::Kind::kRunning || b.nr != a.nr ||
      b.sp != a.sp || b.pc != a.pc) {
    t.syscall.kind = SyscallState::Kind::kRunning;
    t.why = "running on a CPU (the kernel shows no stack of a running thread)";
    return t;
  }
  if (a.sp == 0 && a.pc == 0) {
    t.why = "a kernel thread (no user registers)";
    return t;
  }
  t.readable = true;
  t.frames = std::move(frames.value());
  return t;
}

std::vector<KernelThread> read_kernel_threads(int64_t pid, int64_t tid) {
  std::vector<KernelThread> out;
  if (tid != 0) {
    out.push_back(read_kernel_thread(pid, tid));
    return out;
  }
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  std::vector<int64_t> tids;
  while (const dirent* e = readdir(d)) {
    if (tids.size() >= 65536) break;
    char* end = nullptr;
    const long long v = strtoll(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) tids.push_back(v);
  }
  closedir(d);
  std::sort(tids.begin(), tids.end());
  for (int64_t t : tids) out.push_back(read_kernel_thread(pid, t));
  return out;
}

}  // namespace stackprov::memory
