// SPDX-License-Identifier: Apache-2.0
// Context logging and path helpers.
#include "core/context.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <cstdarg>
#include <cstdio>

namespace stackprov {

void Context::log(int level, const char* fmt, ...) const {
  if (cfg_.log_fn == nullptr || level > cfg_.log_level) return;
  char buf[1024];
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  // A longer message (several findings, one per line) whole, up to 1 MiB; cut only if memory fails.
  if (n >= static_cast<int>(sizeof(buf))) {
    std::string big;
    try {
      big.resize(std::min(static_cast<size_t>(n), size_t{1} << 20) + 1);
    } catch (...) {
      big.clear();
    }
    if (!big.empty()) {
      vsnprintf(big.data(), big.size(), fmt, again);
      va_end(again);
      cfg_.log_fn(cfg_.log_user, level, big.c_str());
      return;
    }
  }
  va_end(again);
  cfg_.log_fn(cfg_.log_user, level, buf);
}

std::string Context::host_path(const std::string& path) const {
  if (cfg_.sysroot.empty() || path.empty() || path[0] != '/') return path;
  return join_root(cfg_.sysroot, path);
}

std::string join_root(const std::string& root, const std::string& path) {
  if (root.empty()) return path;
  if (path.empty() || path[0] != '/') return root + path;
  std::vector<std::string_view> parts;
  const std::string_view p(path);
  for (size_t i = 0; i < p.size();) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    const std::string_view c = p.substr(i, j - i);
    if (c == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!c.empty() && c != ".") {
      parts.push_back(c);
    }
    i = j + 1;
  }
  std::string out = root;
  for (std::string_view c : parts) (out += '/') += c;
  if (parts.empty() || path.back() == '/') out += '/';
  return out;
}

std::vector<std::string> split_path_list(const char* list) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  std::string cur;
  for (const char* p = list;; p++) {
    if (*p == ':' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur.push_back(*p);
    }
  }
  return out;
}

}  // namespace stackprov
