// SPDX-License-Identifier: Apache-2.0
// Signal names per architecture vs the kernel's asm/signal.h of each (Debian's cross headers), descriptions vs gdb's `info signals`.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "core/signals.hpp"

using namespace stackprov;

namespace {

/// "#define SIGNAME <number>" lines of a kernel asm/signal.h: number -> name (first wins).
std::map<int, std::string> header_signals(const std::string& path) {
  std::ifstream in(path);
  std::map<int, std::string> out;
  std::string line;
  const std::regex re("^#define (SIG[A-Z0-9]+)\\s+([0-9]+)\\b");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re) && m[1] != "SIGRTMIN" && m[1] != "SIGSTKSZ" && m[1] != "SIGUNUSED")
      out.emplace(std::stoi(m[2]), m[1]);
  return out;
}

std::string command_output(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("signal names agree with each architecture's asm/signal.h", "[signals]") {
  const struct {
    Arch arch;
    const char* header;
    const char* package;
  } arches[] = {
      {Arch::kX86_64, "/usr/include/x86_64-linux-gnu/asm/signal.h", "linux-libc-dev"},
      {Arch::kArm64, "/usr/aarch64-linux-gnu/include/asm-generic/signal.h", "linux-libc-dev-arm64-cross"},
      {Arch::kMips32, "/usr/mipsel-linux-gnu/include/asm/signal.h", "linux-libc-dev-mipsel-cross"},
  };
  for (const auto& a : arches) {
    INFO(a.header << " (" << a.package << ", make deps)");
    const auto want = header_signals(a.header);
    REQUIRE(want.size() >= 28);
    for (const auto& [n, name] : want) {
      INFO(arch_name(a.arch) << " signal " << n);
      // The kernel spells 6 SIGIOT (SIGABRT is its alias there); gdb and glibc say SIGABRT.
      CHECK(signal_name(a.arch, n) == (name == "SIGIOT" ? std::string("SIGABRT") : name));
    }
    CHECK(signal_name(a.arch, 0).empty());
    CHECK(signal_name(a.arch, 34) == "SIG34");
    CHECK(signal_description(a.arch, 34) == "Real-time event 34");
  }
  CHECK(signal_name(Arch::kX86_64, 65) == "SIG65");
  CHECK(signal_name(Arch::kMips32, 100) == "SIG100");
}

TEST_CASE("signal descriptions are gdb's", "[signals][tools]") {
  const std::string table = command_output("gdb -nx -batch -ex 'info signals' 2>/dev/null");
  REQUIRE(table.find("SIGSEGV") != std::string::npos);  // gdb (make deps)
  // "SIGSEGV       Yes\tYes\tYes\t\tSegmentation fault"
  std::map<std::string, std::string> gdb;
  std::istringstream in(table);
  std::string line;
  const std::regex re("^(SIG[A-Z0-9]+)\\s+\\S+\\t\\S+\\t\\S+\\t\\t(.*)$");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, re)) gdb[m[1]] = m[2];
  int compared = 0;
  for (Arch arch : {Arch::kX86_64, Arch::kMips32})
    for (int n = 1; n <= 64; n++) {
      const std::string name = signal_name(arch, n);
      if (!gdb.count(name)) continue;  // SIGSTKFLT: not in gdb's table
      INFO(arch_name(arch) << " " << name);
      CHECK(signal_description(arch, n) == gdb[name]);
      compared++;
    }
  CHECK(compared >= 90);
}

TEST_CASE("si_code names and which signals carry a fault address", "[signals]") {
  CHECK(signal_code_name(Arch::kX86_64, 11, 1) == "SEGV_MAPERR");
  CHECK(signal_code_name(Arch::kX86_64, 11, 2) == "SEGV_ACCERR");
  CHECK(signal_code_name(Arch::kX86_64, 7, 2) == "BUS_ADRERR");
  CHECK(signal_code_name(Arch::kMips32, 10, 1) == "BUS_ADRALN");  // SIGBUS is 10 on MIPS
  CHECK(signal_code_name(Arch::kX86_64, 6, -6) == "SI_TKILL");
  CHECK(signal_code_name(Arch::kX86_64, 11, 0x80) == "SI_KERNEL");
  CHECK(signal_code_name(Arch::kX86_64, 11, -2) == "SI_TIMER");
  CHECK(signal_code_name(Arch::kMips32, 11, -3) == "SI_TIMER");
  CHECK(signal_code_name(Arch::kX86_64, 15, 7).empty());
  CHECK(signal_has_fault_address(Arch::kX86_64, 11, 1));
  CHECK(signal_has_fault_address(Arch::kMips32, 10, 2));
  CHECK(!signal_has_fault_address(Arch::kX86_64, 10, 2));  // SIGUSR1 on x86_64
  CHECK(!signal_has_fault_address(Arch::kX86_64, 11, 0x80));
  CHECK(!signal_has_fault_address(Arch::kX86_64, 11, -6));
  CHECK(!signal_has_fault_address(Arch::kX86_64, 6, 1));
}
