// SPDX-License-Identifier: Apache-2.0
// JIT perf maps (/tmp/perf-PID.map, as `node --perf-basic-prof` and other JITs write them): names of JIT code.
#include "symbolize/perf_map.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <map>

#include "core/open_file.hpp"

namespace stackprov::symbolize {
namespace {

bool parse_hex(std::string_view s, size_t* pos, uint64_t* out) {
  while (*pos < s.size() && (s[*pos] == ' ' || s[*pos] == '\t')) ++*pos;
  if (s.substr(*pos, 2) == "0x" || s.substr(*pos, 2) == "0X") *pos += 2;
  const size_t begin = *pos;
  uint64_t v = 0;
  while (*pos < s.size() && isxdigit(static_cast<unsigned char>(s[*pos])) && *pos - begin < 16) {
    const char c = s[*pos];
    v = v << 4 | static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    ++*pos;
  }
  if (*pos == begin || (*pos < s.size() && s[*pos] != ' ' && s[*pos] != '\t')) return false;
  *out = v;
  return true;
}

}  // namespace

std::shared_ptr<const PerfMap> PerfMap::load_pid(int64_t pid, const std::string& dir) {
  if (pid <= 0) return nullptr;
  const std::string path = dir + "/perf-" + std::to_string(pid) + ".map";
  // As perf reads it: the map must belong to the process's owner or to root (anyone can write
  // /tmp/perf-PID.map for a process that never made one).
  struct stat map_st, proc_st;
  if (stat(path.c_str(), &map_st) != 0) return nullptr;
  if (stat(("/proc/" + std::to_string(pid)).c_str(), &proc_st) == 0 && map_st.st_uid != 0 &&
      map_st.st_uid != proc_st.st_uid)
    return nullptr;
  return load_file(path);
}

std::shared_ptr<const PerfMap> PerfMap::load_file(const std::string& path) {
  // A regular file only (a FIFO or a device named /tmp/perf-PID.map would block or never end),
  // read up to kMaxFileBytes.
  int err = 0;
  const int fd = open_regular_file(path, &err);
  if (fd < 0) return nullptr;
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() >= kMaxFileBytes) {
      text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);  // whole lines only
      break;
    }
  }
  close(fd);
  return parse(path, text);
}

std::shared_ptr<const PerfMap> PerfMap::parse(std::string path, std::string_view text) {
  std::vector<Entry> lines;
  for (size_t begin = 0; begin < text.size();) {
    size_t nl = text.find('\n', begin);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(begin, nl - begin);
    begin = nl + 1;
    size_t pos = 0;
    Entry e;
    if (!parse_hex(line, &pos, &e.start) || !parse_hex(line, &pos, &e.size) || e.size == 0 ||
        e.start + e.size < e.start)
      continue;
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    std::string_view name = line.substr(pos);
    while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.remove_suffix(1);
    e.name = std::string(name);
    lines.push_back(std::move(e));
  }
  return from_entries(std::move(path), std::move(lines));
}

std::shared_ptr<const PerfMap> PerfMap::from_entries(std::string path, std::vector<Entry> lines) {
  auto m = std::make_shared<PerfMap>();
  m->path_ = std::move(path);
  std::erase_if(lines, [](const Entry& e) { return e.size == 0 || e.start + e.size < e.start; });
  // Later lines win: a line any later line overlaps names code that was freed and reused, and is
  // dropped as a whole (even when that later line was itself replaced). From the last line back,
  // `later` is the union of the lines seen so far, as disjoint [start, end) ranges by start; each
  // line costs O(log n) amortized, so a JIT's map of a million lines is not quadratic.
  std::vector<Entry> kept;  // disjoint, unsorted
  std::map<uint64_t, uint64_t> later;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    uint64_t s = it->start, e = it->start + it->size;
    auto at = later.upper_bound(s);  // the first range starting after s
    const bool overlaps = (at != later.end() && at->first < e) || (at != later.begin() && std::prev(at)->second > s);
    if (!overlaps) kept.push_back(std::move(*it));
    // Merge [s, e) into the union, absorbing the ranges it touches.
    if (at != later.begin() && std::prev(at)->second >= s) {
      --at;
      s = at->first;
      e = std::max(e, at->second);
      at = later.erase(at);
    }
    while (at != later.end() && at->first <= e) {
      e = std::max(e, at->second);
      at = later.erase(at);
    }
    later.emplace_hint(at, s, e);
  }
  std::sort(kept.begin(), kept.end(), [](const Entry& a, const Entry& b) { return a.start < b.start; });
  m->entries_ = std::move(kept);
  for (const Entry& e : m->entries_) {
    if (!m->ranges_.empty() && m->ranges_.back().second == e.start) m->ranges_.back().second = e.start + e.size;
    else m->ranges_.emplace_back(e.start, e.start + e.size);
  }
  if (m->entries_.empty()) return nullptr;
  return m;
}

const PerfMap::Entry* PerfMap::find(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return addr - it->start < it->size ? &*it : nullptr;
}

std::shared_ptr<const PerfMap> PerfMaps::get(int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = maps_.find(pid);
  if (it != maps_.end()) return it->second;
  auto m = PerfMap::load_pid(pid);
  maps_.emplace(pid, m);
  return m;
}

}  // namespace stackprov::symbolize
