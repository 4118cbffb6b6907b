// SPDX-License-Identifier: Apache-2.0
// Peer-output parsers for Mach-O: llvm-objdump-16 --macho (--private-headers, --unwind-info,
// --function-starts, --exports-trie), llvm-nm-16 -n and llvm-dwarfdump-16 --uuid, as printed by LLVM 16.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace stackprov::test {

/// Runs `cmd` (stderr joined) and returns its output.
inline std::string run_peer(const std::string& cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  if (!p) return out;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p.get())) > 0;) out.append(buf.data(), n);
  return out;
}

inline uint64_t num(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 0); }

/// One "Load command N" block of --private-headers: its "key value" lines (the first word is the
/// key, the rest the value), and the "Section" blocks inside it.
struct ObjdumpLoadCommand {
  std::map<std::string, std::string> fields;
  std::vector<std::map<std::string, std::string>> sections;
};

inline std::vector<ObjdumpLoadCommand> objdump_load_commands(const std::string& text) {
  std::vector<ObjdumpLoadCommand> out;
  std::istringstream in(text);
  std::string line;
  std::map<std::string, std::string>* cur = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("Load command ", 0) == 0) {
      out.emplace_back();
      cur = &out.back().fields;
      continue;
    }
    if (out.empty()) continue;
    if (line == "Section") {
      out.back().sections.emplace_back();
      cur = &out.back().sections.back();
      continue;
    }
    std::istringstream l(line);
    std::string key, rest;
    if (!(l >> key)) continue;
    std::getline(l, rest);
    const size_t b = rest.find_first_not_of(' ');
    (*cur)[key] = b == std::string::npos ? "" : rest.substr(b);
  }
  return out;
}

/// --unwind-info.
struct ObjdumpUnwindInfo {
  uint64_t version = 0, common_offset = 0, common_count = 0, personality_offset = 0, personality_count = 0,
           index_offset = 0, index_count = 0;
  std::vector<uint32_t> common;
  std::vector<uint32_t> personalities;
  struct Index {
    uint32_t function_offset, page_offset, lsda_offset;
  };
  std::vector<Index> index;
  struct Lsda {
    uint32_t function_offset, lsda_offset;
  };
  std::vector<Lsda> lsdas;
  struct Entry {
    uint32_t function_offset, encoding;
    int index;  ///< -1: a regular page's entry ("encoding=0x...")
  };
  struct Page {
    uint32_t section_offset, base;
    std::vector<Entry> entries;
  };
  std::vector<Page> pages;
};

inline ObjdumpUnwindInfo objdump_unwind_info(const std::string& text) {
  ObjdumpUnwindInfo u;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  auto hexfield = [&](const char* label, uint64_t* v) {
    const size_t at = line.find(label);
    if (at != std::string::npos) *v = num(line.substr(line.rfind(' ') + 1));
  };
  const std::regex enc_re(R"(^\s+encoding\[\d+\]: (0x[0-9a-f]+))");
  const std::regex pers_re(R"(^\s+personality\[\d+\]: (0x[0-9a-f]+))");
  const std::regex index_re(R"(^\s+\[\d+\]: function offset=(0x[0-9a-f]+), 2nd level page offset=(0x[0-9a-f]+), LSDA offset=(0x[0-9a-f]+))");
  const std::regex lsda_re(R"(^\s+\[\d+\]: function offset=(0x[0-9a-f]+), LSDA offset=(0x[0-9a-f]+))");
  const std::regex page_re(R"(Second level index\[\d+\]: offset in section=(0x[0-9a-f]+), base function offset=(0x[0-9a-f]+))");
  const std::regex centry_re(R"(^\s+\[\d+\]: function offset=(0x[0-9a-f]+), encoding\[(\d+)\]=(0x[0-9a-f]+))");
  const std::regex rentry_re(R"(^\s+\[\d+\]: function offset=(0x[0-9a-f]+), encoding=(0x[0-9a-f]+))");
  enum { kNone, kCommon, kPers, kIndex, kLsda, kPages } where = kNone;
  while (std::getline(in, line)) {
    hexfield("Version:", &u.version);
    hexfield("Common encodings array section offset:", &u.common_offset);
    hexfield("Number of common encodings in array:", &u.common_count);
    hexfield("Personality function array section offset:", &u.personality_offset);
    hexfield("Number of personality functions in array:", &u.personality_count);
    hexfield("Index array section offset:", &u.index_offset);
    hexfield("Number of indices in array:", &u.index_count);
    if (line.find("Common encodings: (count") != std::string::npos) where = kCommon;
    else if (line.find("Personality functions: (count") != std::string::npos) where = kPers;
    else if (line.find("Top level indices: (count") != std::string::npos) where = kIndex;
    else if (line.find("LSDA descriptors:") != std::string::npos) where = kLsda;
    else if (line.find("Second level indices:") != std::string::npos) where = kPages;
    else if (where == kCommon && std::regex_search(line, m, enc_re)) u.common.push_back(static_cast<uint32_t>(num(m[1])));
    else if (where == kPers && std::regex_search(line, m, pers_re)) u.personalities.push_back(static_cast<uint32_t>(num(m[1])));
    else if (where == kIndex && std::regex_search(line, m, index_re))
      u.index.push_back({static_cast<uint32_t>(num(m[1])), static_cast<uint32_t>(num(m[2])), static_cast<uint32_t>(num(m[3]))});
    else if (where == kLsda && std::regex_search(line, m, lsda_re))
      u.lsdas.push_back({static_cast<uint32_t>(num(m[1])), static_cast<uint32_t>(num(m[2]))});
    else if (where == kPages && std::regex_search(line, m, page_re))
      u.pages.push_back({static_cast<uint32_t>(num(m[1])), static_cast<uint32_t>(num(m[2])), {}});
    else if (where == kPages && !u.pages.empty() && std::regex_search(line, m, centry_re))
      u.pages.back().entries.push_back({static_cast<uint32_t>(num(m[1])), static_cast<uint32_t>(num(m[3])), std::stoi(m[2])});
    else if (where == kPages && !u.pages.empty() && std::regex_search(line, m, rentry_re))
      u.pages.back().entries.push_back({static_cast<uint32_t>(num(m[1])), static_cast<uint32_t>(num(m[2])), -1});
  }
  return u;
}

/// Hex addresses one per line (--function-starts: "0000000100000420"; the file name line skipped).
inline std::vector<uint64_t> objdump_function_starts(const std::string& text) {
  std::vector<uint64_t> out;
  std::istringstream in(text);
  std::string line;
  const std::regex re(R"(^([0-9a-f]{8,16})$)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, re)) out.push_back(std::strtoull(m[1].str().c_str(), nullptr, 16));
  return out;
}

/// --exports-trie: "0x000003F0  _fp_frame" -> (offset, name).
inline std::vector<std::pair<uint64_t, std::string>> objdump_exports(const std::string& text) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::istringstream in(text);
  std::string line;
  const std::regex re(R"(^(0x[0-9A-Fa-f]+)\s+(\S+))");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) out.emplace_back(num(m[1]), m[2]);
  return out;
}

/// llvm-nm -n: "0000000100000420 T _leaf" (defined) or "                 U _x" (undefined).
struct NmSymbol {
  bool defined = false;
  uint64_t addr = 0;
  char type = 0;
  std::string name;
};

inline std::vector<NmSymbol> nm_symbols(const std::string& text) {
  std::vector<NmSymbol> out;
  std::istringstream in(text);
  std::string line;
  const std::regex def(R"(^([0-9a-f]{16}) (\S) (.+)$)");
  const std::regex undef(R"(^\s+(\S) (.+)$)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, def)) out.push_back({true, std::strtoull(m[1].str().c_str(), nullptr, 16), m[2].str()[0], m[3]});
    else if (std::regex_match(line, m, undef)) out.push_back({false, 0, m[1].str()[0], m[2]});
  }
  return out;
}

/// llvm-dwarfdump --uuid: "UUID: 4C4C44EA-5555-3144-A129-F8C17D330F3B (x86_64) PATH" -> arch -> UUID.
inline std::map<std::string, std::string> dwarfdump_uuids(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  const std::regex re(R"(^UUID: ([0-9A-F-]{36}) \((\S+)\))");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) out[m[2]] = m[1];
  return out;
}

}  // namespace stackprov::test
