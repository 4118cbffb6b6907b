// SPDX-License-Identifier: Apache-2.0
// Helpers for the ELF tests: temp dirs, running tools (readelf, objcopy, nm, cc) and parsing their output.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace stackprov::elf::testing {

/// Output and exit status of a shell command (stderr goes to the test's stderr).
struct CmdResult {
  int status = -1;
  std::string out;
};

inline CmdResult run(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool have_tool(const std::string& tool) {
  return run("command -v " + tool + " >/dev/null 2>&1").status == 0;
}

inline bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

inline std::vector<uint8_t> read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

inline void write_bytes(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A mkdtemp directory removed with its contents when the object dies.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/stackprov_elf_XXXXXX";
    const char* d = mkdtemp(tmpl);
    path_ = d != nullptr ? d : "/tmp";
  }
  ~TempDir() {
    if (path_ != "/tmp") run("rm -rf '" + path_ + "'");
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Compiles C `source` into `out` with `flags`; returns true on success.
inline bool compile_c(const TempDir& dir, const std::string& source, const std::string& flags,
                      const std::string& out, const std::string& compiler = "cc") {
  const std::string src = out + ".c";
  write_file(src, source);
  return run(compiler + " " + flags + " -o '" + out + "' '" + src + "' 2>&1").status == 0;
}

/// "Build ID: <hex>" from readelf -n.
inline std::string readelf_build_id(const std::string& path) {
  std::istringstream in(run("readelf -n '" + path + "' 2>/dev/null").out);
  std::string line;
  while (std::getline(in, line)) {
    const auto k = line.find("Build ID: ");
    if (k != std::string::npos) {
      std::string id = line.substr(k + 10);
      while (!id.empty() && (id.back() == ' ' || id.back() == '\r')) id.pop_back();
      return id;
    }
  }
  return {};
}

/// One row of readelf -S -W.
struct ReadelfSection {
  std::string name;
  std::string type;
  uint64_t addr = 0;
  uint64_t off = 0;
  uint64_t size = 0;
  std::string flags;
};

inline std::vector<ReadelfSection> readelf_sections(const std::string& path) {
  std::vector<ReadelfSection> out;
  std::istringstream in(run("readelf -S -W '" + path + "' 2>/dev/null").out);
  std::string line;
  while (std::getline(in, line)) {
    // "  [Nr] Name Type Address Off Size ES Flg Lk Inf Al"
    const auto lb = line.find('[');
    const auto rb = line.find(']');
    if (lb == std::string::npos || rb == std::string::npos || rb < lb) continue;
    const std::string nr = line.substr(lb + 1, rb - lb - 1);
    if (nr.find_first_not_of(" 0123456789") != std::string::npos || nr.find_first_of("0123456789") == std::string::npos) continue;
    std::istringstream f(line.substr(rb + 1));
    ReadelfSection s;
    std::string addr, off, size, es;
    if (!(f >> s.name)) continue;
    if (s.name == "NULL") continue;  // section 0 has no name
    f >> s.type >> addr >> off >> size >> es;
    std::string rest;
    std::getline(f, rest);
    std::istringstream r(rest);
    std::string first;
    r >> first;
    // Flags are absent for some sections; then the first token is Lk (a number).
    s.flags = first.find_first_not_of("0123456789") == std::string::npos ? "" : first;
    s.addr = std::stoull(addr, nullptr, 16);
    s.off = std::stoull(off, nullptr, 16);
    s.size = std::stoull(size, nullptr, 16);
    out.push_back(s);
  }
  return out;
}

/// One row of readelf -l -W "Program Headers".
struct ReadelfPhdr {
  std::string type;
  uint64_t offset = 0, vaddr = 0, filesz = 0, memsz = 0, align = 0;
  std::string flags;
};

inline std::vector<ReadelfPhdr> readelf_phdrs(const std::string& path) {
  std::vector<ReadelfPhdr> out;
  std::istringstream in(run("readelf -l -W '" + path + "' 2>/dev/null").out);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.find("Program Headers:") != std::string::npos) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.find("Section to Segment") != std::string::npos) break;
    if (line.find("[Requesting") != std::string::npos) continue;
    std::istringstream f(line);
    ReadelfPhdr p;
    std::string off, va, pa, fs, ms;
    if (!(f >> p.type) || p.type == "Type") continue;
    if (!(f >> off >> va >> pa >> fs >> ms)) continue;
    if (off.rfind("0x", 0) != 0) continue;
    // Flags are one to three letters separated by spaces ("R E", "RW ", "R").
    std::string tok, flags;
    std::vector<std::string> toks;
    while (f >> tok) toks.push_back(tok);
    if (toks.empty()) continue;
    p.align = std::stoull(toks.back(), nullptr, 16);
    toks.pop_back();
    for (const auto& t : toks) flags += t;
    p.flags = flags;
    p.offset = std::stoull(off, nullptr, 16);
    p.vaddr = std::stoull(va, nullptr, 16);
    p.filesz = std::stoull(fs, nullptr, 16);
    p.memsz = std::stoull(ms, nullptr, 16);
    out.push_back(p);
  }
  return out;
}

}  // namespace stackprov::elf::testing
