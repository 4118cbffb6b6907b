// SPDX-License-Identifier: Apache-2.0
// /proc/PID/task/TID/{stack,syscall} parsers (stack --kernel): the kernel's formats (fs/proc/base.c
// proc_pid_stack "[<0>] %pB\n", proc_pid_syscall) and hostile text.
#include <catch2/catch.hpp>

#include <string>

#include "memory/kernel_stack.hpp"
#include "stackprov/errors.h"

using namespace stackprov::memory;

TEST_CASE("kernel stack: the kernel's lines, with and without a module", "[memory][kernel]") {
  // Read from this machine's /proc (6.1+): %pB is sym+0xoff/0xsize, a module's in brackets, with
  // its build-id after a space under CONFIG_STACKTRACE_BUILD_ID.
  auto r = parse_kernel_stack(
      "[<0>] hrtimer_nanosleep+0x74/0xf0\n"
      "[<0>] nfs_wait_bit_killable+0x1c/0x80 [nfs]\n"
      "[<0>] ext4_sync_file+0x2/0x3 [ext4 0123456789abcdef]\n"
      "[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e\n");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 4);
  CHECK((*r)[0].symbol == "hrtimer_nanosleep");
  CHECK((*r)[0].offset == 0x74);
  CHECK((*r)[0].size == 0xf0);
  CHECK((*r)[0].module.empty());
  CHECK((*r)[1].symbol == "nfs_wait_bit_killable");
  CHECK((*r)[1].module == "nfs");
  CHECK((*r)[2].module == "ext4");
  CHECK((*r)[3].symbol == "entry_SYSCALL_64_after_hwframe");
  CHECK((*r)[3].offset == 0x76);
  // A running thread: the kernel prints nothing.
  auto empty = parse_kernel_stack("");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("kernel stack: hostile text is refused naming the line", "[memory][kernel][hostile]") {
  for (const char* bad : {"[<0>] foo+0x1/0x2",                 // no newline (truncated read)
                          "foo+0x1/0x2\n",                      // no address
                          "[<0>] foo\n",                        // no offset
                          "[<0>] foo+0x1\n",                    // no size
                          "[<0>] foo+0xzz/0x2\n",               // not hex
                          "[<0>] foo+0x11111111111111111/0x2\n", // 17 digits
                          "[<0>] +0x1/0x2\n",                   // no name
                          "[<0>] foo+0x1/0x2 nfs\n",            // module not in brackets
                          "[<0>] foo+0x1/0x2 []\n",             // empty module
                          "[<0>] f\x01o+0x1/0x2\n"}) {          // control byte in the name
    auto r = parse_kernel_stack(bad);
    INFO(bad);
    REQUIRE(!r.ok());
    CHECK((r.error().code == SPROV_ERR_BAD_FORMAT || r.error().code == SPROV_ERR_TRUNCATED));
    CHECK(r.error().message.find("line 1") != std::string::npos);
  }
  std::string many;
  for (size_t i = 0; i <= kMaxKernelFrames; i++) many += "[<0>] f+0x1/0x2\n";
  auto r = parse_kernel_stack(many);
  REQUIRE(!r.ok());
  CHECK(r.error().code == SPROV_ERR_LIMIT);
  auto long_line = parse_kernel_stack("[<0>] " + std::string(600, 'a') + "+0x1/0x2\n");
  REQUIRE(!long_line.ok());
  CHECK(long_line.error().code == SPROV_ERR_LIMIT);
}

TEST_CASE("syscall: running, blocked outside a system call, in one", "[memory][kernel]") {
  auto running = parse_syscall("running\n");
  REQUIRE(running.ok());
  CHECK(running->kind == SyscallState::Kind::kRunning);
  auto blocked = parse_syscall("-1 0x7ffc7253a7c8 0x7f633d713503\n");
  REQUIRE(blocked.ok());
  CHECK(blocked->kind == SyscallState::Kind::kNotInSyscall);
  CHECK(blocked->nr == -1);
  CHECK(blocked->sp == 0x7ffc7253a7c8);
  CHECK(blocked->pc == 0x7f633d713503);
  auto in = parse_syscall("230 0x0 0x0 0x7ffc7253a7e0 0x7ffc7253a820 0x0 0x0 0x7ffc7253a7c8 0x7f633d713503\n");
  REQUIRE(in.ok());
  CHECK(in->kind == SyscallState::Kind::kInSyscall);
  CHECK(in->nr == 230);
  CHECK(in->args[2] == 0x7ffc7253a7e0);
  CHECK(in->sp == 0x7ffc7253a7c8);
  CHECK(in->pc == 0x7f633d713503);
  for (const char* bad : {"", "running", "230 0x0\n", "-1 0x1 0x2 0x3\n", "x 0x1 0x2\n", "-1 0x1  0x2\n",
                          "1 0x0 0x0 0x0 0x0 0x0 0x0 0x0 zz\n", "-1 1 2\n"}) {
    INFO(bad);
    auto r = parse_syscall(bad);
    REQUIRE(!r.ok());
    CHECK(r.error().code == SPROV_ERR_BAD_FORMAT);
  }
}
