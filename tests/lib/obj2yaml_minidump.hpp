// SPDX-License-Identifier: Apache-2.0
// obj2yaml-14's listing of a minidump (the peer the minidump reader is compared with), read into
// plain values: system info's architecture, threads, modules, MemoryList ranges and the exception.
// Text in, values out: the test runs the tool (tests/unit/minidump/fixtures.cmake) and compares.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace stackprov::testlib {

struct YamlThread {
  uint64_t id = 0, suspend_count = 0, teb = 0, stack_start = 0;
  std::vector<uint8_t> context, stack;
};
struct YamlModule {
  uint64_t base = 0, size = 0, checksum = 0, timestamp = 0;
  std::string name;
  std::vector<uint8_t> codeview;
};
struct YamlRange {
  uint64_t start = 0;
  std::vector<uint8_t> content;
};
struct YamlException {
  bool present = false;
  uint64_t thread_id = 0, code = 0, address = 0, num_params = 0;
  std::map<int, uint64_t> params;  ///< obj2yaml prints the non-zero ones
  std::vector<uint8_t> context;
};
struct YamlMinidump {
  std::string arch;  ///< "AMD64", ...
  std::vector<YamlThread> threads;
  std::vector<YamlModule> modules;
  std::vector<YamlRange> memory;
  YamlException exception;
  std::vector<std::string> stream_types;  ///< in directory order, as printed ("ThreadList", "0xFFF0")
};

namespace obj2yaml_detail {
inline std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}
/// A scalar: 'quoted' ('' is a quote) or plain.
inline std::string scalar(std::string v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') {
    std::string out;
    for (size_t i = 1; i + 1 < v.size(); i++) {
      out += v[i];
      if (v[i] == '\'' && v[i + 1] == '\'') i++;
    }
    return out;
  }
  return v;
}
inline uint64_t num(const std::string& v) { return std::stoull(scalar(v), nullptr, 0); }
inline std::vector<uint8_t> hex_bytes(const std::string& v) {
  const std::string h = scalar(v);
  if (h.size() % 2) throw std::runtime_error("odd hex content in obj2yaml output");
  std::vector<uint8_t> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); i++) out[i] = static_cast<uint8_t>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
  return out;
}
}  // namespace obj2yaml_detail

/// Parses obj2yaml-14's output for a minidump. Throws std::runtime_error on a line it cannot read
/// in the streams it knows.
inline YamlMinidump parse_obj2yaml_minidump(const std::string& text) {
  using namespace obj2yaml_detail;
  YamlMinidump d;
  std::istringstream in(text);
  std::string line, stream;
  bool in_stack = false;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    const std::string value = line.substr(colon + 1);
    const bool item = key.rfind("- ", 0) == 0;
    if (item) key = trim(key.substr(2));
    if (key == "Type" && item && line.rfind("  - Type:", 0) == 0) {
      stream = scalar(value);
      d.stream_types.push_back(stream);
      continue;
    }
    if (stream == "SystemInfo" && key == "Processor Arch") d.arch = scalar(value);
    if (stream == "ThreadList") {
      if (key == "Thread Id" && item) {
        d.threads.emplace_back();
        in_stack = false;
      }
      if (d.threads.empty()) continue;
      YamlThread& t = d.threads.back();
      if (key == "Thread Id") t.id = num(value);
      else if (key == "Suspend Count") t.suspend_count = num(value);
      else if (key == "Environment Block") t.teb = num(value);
      else if (key == "Context") t.context = hex_bytes(value);
      else if (key == "Stack") in_stack = true;
      else if (key == "Start of Memory Range" && in_stack) t.stack_start = num(value);
      else if (key == "Content" && in_stack) t.stack = hex_bytes(value);
    } else if (stream == "ModuleList") {
      if (key == "Base of Image" && item) d.modules.emplace_back();
      if (d.modules.empty()) continue;
      YamlModule& m = d.modules.back();
      if (key == "Base of Image") m.base = num(value);
      else if (key == "Size of Image") m.size = num(value);
      else if (key == "Checksum") m.checksum = num(value);
      else if (key == "Time Date Stamp") m.timestamp = num(value);
      else if (key == "Module Name") m.name = scalar(value);
      else if (key == "CodeView Record") m.codeview = hex_bytes(value);
    } else if (stream == "MemoryList") {
      if (key == "Start of Memory Range" && item) {
        d.memory.emplace_back();
        d.memory.back().start = num(value);
      } else if (key == "Content" && !d.memory.empty()) {
        d.memory.back().content = hex_bytes(value);
      }
    } else if (stream == "Exception") {
      YamlException& e = d.exception;
      e.present = true;
      if (key == "Thread ID") e.thread_id = num(value);
      else if (key == "Exception Code") e.code = num(value);
      else if (key == "Exception Address") e.address = num(value);
      else if (key == "Number of Parameters") e.num_params = num(value);
      else if (key.rfind("Parameter ", 0) == 0) e.params[std::stoi(key.substr(10))] = num(value);
      else if (key == "Thread Context") e.context = hex_bytes(value);
    }
  }
  return d;
}

inline YamlMinidump read_obj2yaml_minidump(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_obj2yaml_minidump(ss.str());
}

}  // namespace stackprov::testlib
