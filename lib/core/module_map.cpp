// SPDX-License-Identifier: Apache-2.0
// /proc/PID/maps parsing (fs/proc/task_mmu.c show_map_vma format) and reading.
#include "core/module_map.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace stackprov {

namespace {

constexpr size_t kMaxLines = 1000000;
/// Longest line text quoted in an error message (make_error formats into 512 bytes).
constexpr int kQuotedLineMax = 160;

/// Splits one line into fields without allocating; everything is a view into the line.
class LineScanner {
 public:
  explicit LineScanner(std::string_view line) : s_(line) {}

  void skip_spaces() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) pos_++;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  bool expect(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  /// Hex number of 1..16 digits.
  bool hex(uint64_t* out) { return number(16, 16, out); }
  /// Decimal number of 1..20 digits without overflow.
  bool dec(uint64_t* out) { return number(10, 20, out); }
  std::string_view take(size_t n) {
    if (pos_ + n > s_.size()) return {};
    std::string_view v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  std::string_view rest() const { return pos_ < s_.size() ? s_.substr(pos_) : std::string_view{}; }
  bool at_space() const { return pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t'); }

 private:
  bool number(int base, int max_digits, uint64_t* out) {
    uint64_t v = 0;
    int digits = 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (base == 16 && c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (base == 16 && c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        break;
      if (digits == max_digits) return false;
      if (base == 10 && v > (UINT64_MAX - static_cast<uint64_t>(d)) / 10) return false;
      v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
      digits++;
      pos_++;
    }
    if (digits == 0) return false;
    *out = v;
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Error bad_line(size_t line_no, const char* what, std::string_view line) {
  const int shown = line.size() > static_cast<size_t>(kQuotedLineMax)
                        ? kQuotedLineMax
                        : static_cast<int>(line.size());
  return make_error(SPROV_ERR_BAD_FORMAT, "maps line %zu: %s: '%.*s%s'", line_no, what, shown,
                    line.data(), line.size() > static_cast<size_t>(shown) ? "..." : "");
}

/// Parses `start-end perms offset major:minor inode [path]`.
Result<MapsEntry> parse_line(size_t line_no, std::string_view line) {
  LineScanner sc(line);
  MapsEntry e;
  if (!sc.hex(&e.start)) return bad_line(line_no, "bad start address", line);
  if (!sc.expect('-')) return bad_line(line_no, "expected '-' after the start address", line);
  if (!sc.hex(&e.end)) return bad_line(line_no, "bad end address", line);
  if (e.end <= e.start) return bad_line(line_no, "end address not above start address", line);
  if (!sc.at_space()) return bad_line(line_no, "expected a space after the address range", line);
  sc.skip_spaces();
  const std::string_view perms = sc.take(4);
  if (perms.size() != 4 || (perms[0] != 'r' && perms[0] != '-') ||
      (perms[1] != 'w' && perms[1] != '-') || (perms[2] != 'x' && perms[2] != '-') ||
      (perms[3] != 'p' && perms[3] != 's'))
    return bad_line(line_no, "bad permissions", line);
  e.readable = perms[0] == 'r';
  e.writable = perms[1] == 'w';
  e.executable = perms[2] == 'x';
  e.shared = perms[3] == 's';
  if (!sc.at_space()) return bad_line(line_no, "expected a space after the permissions", line);
  sc.skip_spaces();
  if (!sc.hex(&e.offset)) return bad_line(line_no, "bad file offset", line);
  if (!sc.at_space()) return bad_line(line_no, "expected a space after the offset", line);
  sc.skip_spaces();
  uint64_t major = 0, minor = 0;
  if (!sc.hex(&major) || !sc.expect(':') || !sc.hex(&minor) || major > UINT32_MAX ||
      minor > UINT32_MAX)
    return bad_line(line_no, "bad device (major:minor)", line);
  e.dev_major = static_cast<uint32_t>(major);
  e.dev_minor = static_cast<uint32_t>(minor);
  if (!sc.at_space()) return bad_line(line_no, "expected a space after the device", line);
  sc.skip_spaces();
  if (!sc.dec(&e.inode)) return bad_line(line_no, "bad inode", line);
  if (!sc.at_end() && !sc.at_space()) return bad_line(line_no, "junk after the inode", line);
  sc.skip_spaces();
  // The path is the rest of the line verbatim: it may contain spaces and end in " (deleted)".
  e.path.assign(sc.rest());
  return e;
}

}  // namespace

Result<std::vector<MapsEntry>> parse_maps(std::string_view text) {
  std::vector<MapsEntry> out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    line_no++;
    if (line_no > kMaxLines)
      return make_error(SPROV_ERR_LIMIT, "maps listing exceeds %zu lines", kMaxLines);
    if (line.empty()) continue;
    auto e = parse_line(line_no, line);
    if (!e) return std::move(e).error();
    out.push_back(std::move(e).value());
  }
  return out;
}

int read_proc_text(const char* path, std::string* out) {
  out->clear();
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  // procfs reports size 0: read until EOF.
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return -err;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (size_t{256} << 20)) {  // a target with a million long-named mappings
      close(fd);
      return -EFBIG;
    }
  }
  close(fd);
  return 0;
}

Result<std::string> read_maps_text(int pid) {
  if (pid < 0) return make_error(SPROV_ERR_INVALID_ARG, "invalid pid %d", pid);
  char path[64];
  if (pid == 0)
    snprintf(path, sizeof(path), "/proc/self/maps");
  else
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
  std::string text;
  const int rc = read_proc_text(path, &text);
  if (rc == -ENOENT) return make_error(-ENOENT, "%s: no such process", path);
  // A process that exits while its maps are read yields ESRCH.
  if (rc == -ESRCH) return make_error(-ESRCH, "%s: no such process", path);
  if (rc == -EACCES || rc == -EPERM) return make_error(rc, "%s: permission denied", path);
  if (rc != 0) return make_error(rc, "%s: %s", path, strerror(-rc));
  return text;
}

}  // namespace stackprov
