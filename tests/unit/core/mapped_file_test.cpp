// SPDX-License-Identifier: Apache-2.0
// map_file against a file truncated while mapped (doc/hardening.md, attack 4): zeros and a fault
// flag instead of SIGBUS; SIGBUS outside our mappings still reaches the handler installed before
// ours, or the default action; the module file size bound (attack 3).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/mapped_file.hpp"
#include "elf/elf_image.hpp"

using namespace stackprov;

namespace {

std::string temp_file(const std::string& name, size_t size, uint8_t fill) {
  char tmpl[] = "/tmp/sprov-mapped-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string p = std::string(tmpl) + "/" + name;
  const int fd = open(p.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
  REQUIRE(fd >= 0);
  std::vector<uint8_t> bytes(size, fill);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  return p;
}

/// Runs `fn` in a child; returns its wait status.
template <class Fn>
int in_child(Fn&& fn) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    fn();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

void exit_42(int, siginfo_t*, void*) { _exit(42); }

}  // namespace

TEST_CASE("a guarded mapping of a file truncated under it reads zeros and says so", "[mapped-file][sigbus]") {
  const std::string p = temp_file("f", 64 * 1024, 0xa5);
  const int fd = open(p.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  auto m = map_file(fd, 64 * 1024, false, p);
  close(fd);
  REQUIRE(m);
  const volatile uint8_t* bytes = static_cast<const uint8_t*>(m.value());
  CHECK(bytes[40000] == 0xa5);
  CHECK_FALSE(file_map_faulted(m.value()));
  const uint64_t before = file_fault_count();
  REQUIRE(truncate(p.c_str(), 4096) == 0);  // as the file's owner would, with the file mapped here
  CHECK(bytes[100] == 0xa5);                // still in the file
  CHECK(bytes[40000] == 0);                 // past its new end: SIGBUS before, zeros now
  CHECK(file_map_faulted(m.value()));
  CHECK(file_fault_count() > before);
  unmap_file(m.value(), 64 * 1024);
}

TEST_CASE("an ElfImage whose file is truncated reports the change, without SIGBUS", "[mapped-file][sigbus]") {
  // A copy of this test program (an ELF file with section headers at its end).
  char tmpl[] = "/tmp/sprov-mapped-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string copy = std::string(tmpl) + "/self";
  REQUIRE(system(("cp /proc/" + std::to_string(getpid()) + "/exe " + copy).c_str()) == 0);
  auto img = elf::ElfImage::open(copy);
  REQUIRE(img);
  CHECK_FALSE(img.value()->file_changed());
  REQUIRE(truncate(copy.c_str(), 4096) == 0);
  // Every section's bytes are read (a symbol lookup, a CFI walk would do the same): no signal.
  volatile uint64_t sum = 0;
  int read = 0;
  for (const char* name : {".symtab", ".strtab", ".eh_frame", ".text", ".rodata"}) {
    auto s = img.value()->section(name);
    if (!s || s->data == nullptr) continue;
    ++read;
    const volatile uint8_t* d = s->data;
    for (size_t i = 0; i < s->size; i += 512) sum = sum + d[i];
  }
  CHECK(read >= 3);
  CHECK(img.value()->file_changed());
}

// The chaining cases run in a fresh process (this test program executed again, running only the
// hidden case below), so that no earlier case has installed the library's handler yet.
TEST_CASE("sigbus child", "[.sigbus-child]") {
  const char* mode = getenv("SPROV_SIGBUS_CHILD");
  const char* p = getenv("SPROV_SIGBUS_FILE");
  // Only as the re-executed child; an exclusion-only test spec ("~[tag]") also selects hidden cases.
  if (mode == nullptr || p == nullptr) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  if (strcmp(mode, "embedder") == 0) {  // the embedder's own handler, installed before the library's
    sa.sa_sigaction = exit_42;
    sa.sa_flags = SA_SIGINFO;
  } else {
    sa.sa_handler = SIG_DFL;  // none (a sanitizer's own handler is taken away too)
  }
  sigaction(SIGBUS, &sa, nullptr);
  const int fd = open(p, O_RDONLY);
  auto ours = map_file(fd, 64 * 1024, false, p);  // installs the library's handler: the first mapping
  void* theirs = mmap(nullptr, 64 * 1024, PROT_READ, MAP_PRIVATE, fd, 0);  // not the library's
  if (!ours || theirs == MAP_FAILED || truncate(p, 4096) != 0) _exit(1);
  if (strcmp(mode, "kill") == 0) {  // a SIGBUS sent, not a fault: the default action, as without us
    raise(SIGBUS);
    _exit(4);  // swallowed
  }
  const volatile uint8_t* b = static_cast<const uint8_t*>(ours.value());
  if (b[40000] != 0 || !file_map_faulted(ours.value())) _exit(2);  // ours: zeros, flagged
  (void)static_cast<const volatile uint8_t*>(theirs)[40000];       // theirs: the earlier handler
  _exit(3);
}

TEST_CASE("a SIGBUS outside stackprov's mappings reaches the earlier handler or the default action",
          "[mapped-file][sigbus][sigbus-chain]") {
  for (const char* mode : {"embedder", "default", "kill"}) {
    const std::string p = temp_file("g", 64 * 1024, 1);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      setenv("SPROV_SIGBUS_CHILD", mode, 1);
      setenv("SPROV_SIGBUS_FILE", p.c_str(), 1);
      execl("/proc/self/exe", "unit_core", "[.sigbus-child]", static_cast<char*>(nullptr));
      _exit(11);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    INFO(mode);
    if (strcmp(mode, "embedder") == 0) {
      REQUIRE(WIFEXITED(st));
      CHECK(WEXITSTATUS(st) == 42);  // 2: our mapping was not repaired; 3: the fault was swallowed
    } else {  // "default", "kill": as without the library
      REQUIRE(WIFSIGNALED(st));
      CHECK(WTERMSIG(st) == SIGBUS);
    }
  }
}

TEST_CASE("the copy guard reads the file into memory the library owns", "[mapped-file]") {
  const std::string p = temp_file("c", 64 * 1024, 7);
  const int st = in_child([&] {
    set_file_guard(FileGuard::kCopy);
    const int fd = open(p.c_str(), O_RDONLY);
    auto m = map_file(fd, 64 * 1024, false, p);
    if (!m || truncate(p.c_str(), 4096) != 0) _exit(1);
    if (static_cast<const volatile uint8_t*>(m.value())[40000] != 7) _exit(3);  // the copy keeps the bytes
    unmap_file(m.value(), 64 * 1024);
    _exit(0);
  });
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("module files above the size bound are refused, naming file, size and limit", "[mapped-file]") {
  const std::string p = temp_file("sparse.so", 16, 0);
  // 4 TiB, sparse: as a target can grow its library (truncate64: also with a 32-bit off_t).
  REQUIRE(truncate64(p.c_str(), int64_t{4} << 40) == 0);
  auto img = elf::ElfImage::open(p);
  REQUIRE_FALSE(img);
  CHECK(img.error().message.find(p) != std::string::npos);
  if (sizeof(off_t) >= 8) {
    CHECK(img.error().code == SPROV_ERR_LIMIT);
    CHECK(img.error().message.find(p + " is 4398046511104 bytes, above the limit of 4294967296 bytes") !=
          std::string::npos);
  } else {  // a 32-bit off_t: fstat itself refuses the size (EOVERFLOW), before any mapping
    CHECK(img.error().code == -EOVERFLOW);
  }
  CHECK(check_file_size(p, uint64_t{4} << 30));
  CHECK_FALSE(check_file_size(p, (uint64_t{4} << 30) + 1));
}
