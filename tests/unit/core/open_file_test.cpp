// SPDX-License-Identifier: Apache-2.0
// open_regular_file inside a process's root and HeldRoot (doc/hardening.md, attack 2).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/open_file.hpp"

using namespace stackprov;

TEST_CASE("a held root keeps a process's files openable after it exits, with several holders", "[open-file][proc-root]") {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) pause();
  }
  const std::string path = "/proc/" + std::to_string(child) + "/root/etc/passwd";
  auto first = HeldRoot::hold(child);
  auto second = HeldRoot::hold(child);
  REQUIRE(first);
  REQUIRE(second);
  second.reset();  // the newer holder goes first: the older one must still be used
  kill(child, SIGKILL);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  int err = 0;
  int fd = open_regular_file(path, &err);
  CHECK(fd >= 0);  // through `first`; /proc/PID is gone
  if (fd >= 0) close(fd);
}

TEST_CASE("paths inside a process's root are parsed strictly", "[open-file][proc-root]") {
  // Only "/proc/<digits>/root" (and map_files) name a process's root; near misses are plain paths.
  CHECK(target_root_of("/proc/12/rootx/a").empty());
  CHECK(target_root_of("/proc/x12/root/a").empty());
  CHECK(target_root_of("/tmp/proc/12/root/a").empty());
  // Our own process shares our root: nothing to translate.
  CHECK(target_root_of("/proc/" + std::to_string(getpid()) + "/root/etc/passwd").empty());
  CHECK(under_root_of("/usr/lib/libc.so.6", "/usr/lib/debug") == "/usr/lib/debug");
  CHECK(relative_names_stay_in_root("/usr/lib"));
  CHECK(relative_names_stay_in_root("/proc/" + std::to_string(getpid()) + "/map_files"));
}
