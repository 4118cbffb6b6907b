// SPDX-License-Identifier: Apache-2.0
// The win64 build's Windows-only pieces under wine (part of unit_memory there): ReadProcessMemoryReader
// against the bytes themselves and an address never mapped, the capture's refusals,
// and open_regular_file's refusal of network, pipe and directory names.
#include <windows.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>

#include "core/open_file.hpp"
#include "memory/windows_capture.hpp"

using namespace stackprov;

TEST_CASE("ReadProcessMemoryReader reads what is there and fails on what is not", "[windows]") {
  memory::ReadProcessMemoryReader r(GetCurrentProcess());
  static const char kText[] = "stackprov ReadProcessMemory";
  char buf[sizeof kText] = {};
  REQUIRE(r.read(reinterpret_cast<uint64_t>(kText), buf, sizeof buf));
  CHECK(std::memcmp(buf, kText, sizeof buf) == 0);
  CHECK(r.read(reinterpret_cast<uint64_t>(kText), buf, 0));
  // Wine reads another process's memory (and, through the server, its own) by /proc/PID/mem, which
  // also reads pages Windows would refuse (PAGE_NOACCESS, reserved, released: wine keeps them mapped
  // PROT_NONE): only addresses unmapped on the host fail there. The first page never is mapped.
  char* p = static_cast<char*>(VirtualAlloc(nullptr, 4096, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE));
  REQUIRE(p != nullptr);
  std::memset(p, 0x5a, 4096);
  char page[16];
  REQUIRE(r.read(reinterpret_cast<uint64_t>(p + 4080), page, 16));
  CHECK(page[15] == 0x5a);
  VirtualFree(p, 0, MEM_RELEASE);
  CHECK_FALSE(r.read(16, page, 8));
  CHECK((r.last_error() == ERROR_PARTIAL_COPY || r.last_error() == ERROR_NOACCESS));
  CHECK_FALSE(r.read(~uint64_t{0} - 4, page, 16));  // wraps
}

TEST_CASE("capture_windows_process refuses its own process and unknown ones", "[windows]") {
  memory::WindowsCaptureOptions o;
  auto self = memory::capture_windows_process(GetCurrentProcessId(), o, nullptr);
  REQUIRE_FALSE(self.ok());
  CHECK(self.error().code == SPROV_ERR_CAPTURE);
  CHECK(self.error().message.find("calling process") != std::string::npos);
  // Process ids are multiples of 4 on Windows: 0x7ffffffc is none.
  auto none = memory::capture_windows_process(0x7ffffffc, o, nullptr);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == -ESRCH);
  CHECK(none.error().message.find("2147483644") != std::string::npos);
}

TEST_CASE("open_regular_file on Windows opens files only, never network or device names", "[windows]") {
  char exe[MAX_PATH];
  const DWORD n = GetModuleFileNameA(nullptr, exe, sizeof exe);
  REQUIRE(n > 0);
  int err = 0;
  const int fd = open_regular_file(std::string(exe, n), &err);
  REQUIRE(fd >= 0);
  char mz[2] = {};
  CHECK(_read(fd, mz, 2) == 2);
  CHECK((mz[0] == 'M' && mz[1] == 'Z'));
  _close(fd);
  for (const char* bad : {"\\\\server\\share\\x.dll", "//server/share/x.dll", "\\\\.\\pipe\\stackprov", "\\\\.\\COM1"}) {
    err = 0;
    CHECK(open_regular_file(bad, &err) == -1);
    CHECK(err == EINVAL);
  }
  err = 0;
  CHECK(open_regular_file("C:\\windows", &err) == -1);  // a directory
  CHECK(err == EINVAL);
  err = 0;
  CHECK(open_regular_file("C:\\windows\\no such file.dll", &err) == -1);
  CHECK(err == ENOENT);
}
