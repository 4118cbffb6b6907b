// SPDX-License-Identifier: Apache-2.0
// Test helpers: run a tool, temporary directories, and `readelf --debug-dump=frames-interp` tables parsed.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace stackprov::test {

inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

inline std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

struct TmpDir {
  std::string path;
  TmpDir() {
    char tmpl[] = "/tmp/stackprov_dwarf_XXXXXX";
    const char* p = mkdtemp(tmpl);
    path = p ? p : "";
  }
  ~TmpDir() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
};

struct SectionInfo {
  uint64_t addr = 0, size = 0;
  bool present = false;
};

inline std::map<std::string, SectionInfo> read_sections(const std::string& bin) {
  std::map<std::string, SectionInfo> out;
  std::istringstream in(run("readelf -SW '" + bin + "'"));
  std::string line;
  // "  [18] .eh_frame_hdr     PROGBITS        0000000000002004 002004 000034 00   A  0   0  4"
  std::regex re(R"(\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+))");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, re)) {
      out[m[1]] = SectionInfo{std::stoull(m[2], nullptr, 16), std::stoull(m[3], nullptr, 16), true};
    }
  }
  return out;
}

inline std::vector<uint8_t> section_bytes(const TmpDir& dir, const std::string& bin, const std::string& name) {
  const std::string out = dir.path + "/sec" + name + ".bin";
  std::system(("objcopy -O binary --only-section=" + name + " '" + bin + "' '" + out + "'").c_str());
  return slurp(out);
}

// readelf's x86_64 register names (binutils dwarf.c dwarf_regnames_x86_64).
inline int x86_reg(const std::string& name) {
  static const std::map<std::string, int> kRegs = {
      {"rax", 0}, {"rdx", 1}, {"rcx", 2}, {"rbx", 3}, {"rsi", 4},  {"rdi", 5},  {"rbp", 6},
      {"rsp", 7}, {"r8", 8},  {"r9", 9},  {"r10", 10}, {"r11", 11}, {"r12", 12}, {"r13", 13},
      {"r14", 14}, {"r15", 15}, {"rip", 16}, {"ra", 16}};
  auto it = kRegs.find(name);
  return it == kRegs.end() ? -1 : it->second;
}

struct RefRow {
  uint64_t loc;
  std::vector<std::string> cells;  // CFA, then one per column
};

struct RefTable {
  std::vector<std::string> columns;  // register names after CFA
  std::vector<RefRow> rows;
};

struct RefFde {
  uint64_t offset, cie, pc_begin, pc_end;
  RefTable table;  // empty rows: the CIE's initial row applies
};

struct RefFrames {
  std::map<uint64_t, RefTable> cies;
  std::vector<RefFde> fdes;
};

inline RefFrames parse_frames_interp(const std::string& text) {
  RefFrames out;
  std::istringstream in(text);
  std::string line;
  std::regex cie_re(R"(^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE)");
  std::regex fde_re(R"(^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+))");
  std::regex row_re(R"(^([0-9a-f]{8,16}) (.*)$)");
  RefTable* cur = nullptr;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, fde_re)) {
      out.fdes.push_back(RefFde{std::stoull(m[1], nullptr, 16), std::stoull(m[2], nullptr, 16),
                                std::stoull(m[3], nullptr, 16), std::stoull(m[4], nullptr, 16), {}});
      cur = &out.fdes.back().table;
    } else if (std::regex_search(line, m, cie_re)) {
      cur = &out.cies[std::stoull(m[1], nullptr, 16)];
    } else if (cur && line.find("LOC") != std::string::npos && line.find("CFA") != std::string::npos) {
      std::istringstream h(line);
      std::string tok;
      h >> tok >> tok;  // LOC CFA
      cur->columns.clear();
      while (h >> tok) cur->columns.push_back(tok);
    } else if (cur && std::regex_match(line, m, row_re)) {
      RefRow r{std::stoull(m[1], nullptr, 16), {}};
      std::istringstream cells(m[2].str());
      std::string tok;
      while (cells >> tok) {
        // DW_CFA_register cells read "r9 (r9)" or "r1 (rdx)": keep them as one cell.
        if (tok[0] == '(' && !r.cells.empty()) {
          r.cells.back() += " " + tok;
        } else {
          r.cells.push_back(tok);
        }
      }
      if (r.cells.size() == cur->columns.size() + 1) cur->rows.push_back(r);
    }
  }
  return out;
}

}  // namespace stackprov::test
