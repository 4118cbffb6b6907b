// SPDX-License-Identifier: Apache-2.0
// JIT perf maps (/tmp/perf-PID.map, as `node --perf-basic-prof` and other JITs write them): names of JIT code.
#include "symbolize/perf_map.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace stackprov::symbolize {
namespace {

bool parse_hex(const std::string& s, size_t* pos, uint64_t* out) {
  while (*pos < s.size() && (s[*pos] == ' ' || s[*pos] == '\t')) ++*pos;
  if (s.compare(*pos, 2, "0x") == 0 || s.compare(*pos, 2, "0X") == 0) *pos += 2;
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
  return load_file(dir + "/perf-" + std::to_string(pid) + ".map");
}

std::shared_ptr<const PerfMap> PerfMap::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  std::vector<Entry> lines;
  std::string line;
  while (std::getline(in, line)) {
    size_t pos = 0;
    Entry e;
    if (!parse_hex(line, &pos, &e.start) || !parse_hex(line, &pos, &e.size) || e.size == 0 ||
        e.start + e.size < e.start)
      continue;
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    e.name = line.substr(pos);
    while (!e.name.empty() && (e.name.back() == '\r' || e.name.back() == ' ')) e.name.pop_back();
    lines.push_back(std::move(e));
  }
  return from_entries(path, std::move(lines));
}

std::shared_ptr<const PerfMap> PerfMap::from_entries(std::string path, std::vector<Entry> lines) {
  auto m = std::make_shared<PerfMap>();
  m->path_ = std::move(path);
  std::erase_if(lines, [](const Entry& e) { return e.size == 0 || e.start + e.size < e.start; });
  // Later lines win: insert from the last, keeping only the parts no later line covered.
  std::vector<Entry> kept;  // disjoint pieces, unsorted
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // sorted disjoint ranges already claimed
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const uint64_t s = it->start, e = it->start + it->size;
    bool overlaps = false;
    auto at = std::lower_bound(taken.begin(), taken.end(), std::make_pair(s, uint64_t(0)));
    if (at != taken.end() && at->first < e) overlaps = true;
    if (at != taken.begin() && std::prev(at)->second > s) overlaps = true;
    if (overlaps) continue;  // older code at an address newer code took over
    taken.insert(at, {s, e});
    kept.push_back(std::move(*it));
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
