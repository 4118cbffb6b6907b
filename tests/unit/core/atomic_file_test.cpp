// SPDX-License-Identifier: Apache-2.0
// AtomicFile and open_lock_file against the attacks of doc/hardening.md (attack 5): a symlink or
// FIFO planted at the names another user can predict, a lock held by someone else.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

#include "core/atomic_file.hpp"

using namespace stackprov;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/sprov-atomic-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("write_file_atomic never writes through a planted symlink", "[atomic-file]") {
  const std::string d = temp_dir();
  const std::string victim = d + "/victim", out = d + "/out.xml";
  { std::ofstream(victim) << "precious\n"; }
  // The old CLI writer opened "PATH.tmp" with fopen("wb"): a symlink there redirected the write.
  REQUIRE(symlink(victim.c_str(), (out + ".tmp").c_str()) == 0);
  REQUIRE(write_file_atomic(out, "report\n", 0640));
  CHECK(slurp(victim) == "precious\n");
  CHECK(slurp(out) == "report\n");
  struct stat st;
  REQUIRE(lstat(out.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0640);
  // A symlink at the output path itself is replaced, its target untouched.
  const std::string out2 = d + "/out2";
  REQUIRE(symlink(victim.c_str(), out2.c_str()) == 0);
  REQUIRE(write_file_atomic(out2, "x"));
  CHECK(slurp(victim) == "precious\n");
  REQUIRE(lstat(out2.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  // No replace: an existing file stays and the error names it (a private key is never overwritten).
  auto no = write_file_atomic(out, "other", 0600, true, /*replace=*/false);
  REQUIRE_FALSE(no);
  CHECK(no.error().message.find(out + "' exists") != std::string::npos);
  CHECK(slurp(out) == "report\n");
  // A directory as the output is named.
  auto dir = write_file_atomic(d, "x");
  REQUIRE_FALSE(dir);
  CHECK(dir.error().message.find("is a directory") != std::string::npos);
  // Nothing else was left behind: victim, out, out.tmp (the planted link), out2.
  int n = 0;
  for (const char* name : {"victim", "out.xml", "out.xml.tmp", "out2"}) n += access((d + "/" + name).c_str(), F_OK) == 0 || errno != ENOENT;
  CHECK(n == 4);
}

TEST_CASE("an uncommitted AtomicFile leaves nothing", "[atomic-file]") {
  const std::string d = temp_dir();
  std::string tmp;
  {
    auto f = AtomicFile::create(d + "/o", 0644);
    REQUIRE(f);
    tmp = f.value().temp_path();
    REQUIRE(f.value().write("partial"));
    CHECK(access(tmp.c_str(), F_OK) == 0);
  }
  CHECK(access(tmp.c_str(), F_OK) != 0);
  CHECK(access((d + "/o").c_str(), F_OK) != 0);
}

TEST_CASE("open_lock_file refuses a planted symlink or FIFO and gives up on a held lock", "[atomic-file]") {
  const std::string d = temp_dir();
  const std::string victim = d + "/victim", lock = d + "/lock";
  REQUIRE(symlink(victim.c_str(), lock.c_str()) == 0);
  auto r = open_lock_file(lock, 100);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("'" + lock + "' is a symbolic link") != std::string::npos);
  CHECK(access(victim.c_str(), F_OK) != 0);  // the old open(O_CREAT) created the link's target
  REQUIRE(unlink(lock.c_str()) == 0);
  REQUIRE(mkfifo(lock.c_str(), 0600) == 0);
  r = open_lock_file(lock, 100);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("not a regular file") != std::string::npos);
  REQUIRE(unlink(lock.c_str()) == 0);

  auto held = open_lock_file(lock, 100);
  REQUIRE(held);
  // Another open file description (as another process would have) cannot take it: the old code
  // waited forever; now it gives up after the timeout, naming the file.
  const auto t0 = std::chrono::steady_clock::now();
  auto second = open_lock_file(lock, 300);
  const auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(second);
  CHECK(second.error().message.find("'" + lock + "' is locked by another process") != std::string::npos);
  CHECK(waited >= std::chrono::milliseconds(300));
  close(held.value());
  auto again = open_lock_file(lock, 300);
  REQUIRE(again);
  close(again.value());
  if (geteuid() == 0) {  // another user's lock file
    REQUIRE(chown(lock.c_str(), 65534, 65534) == 0);
    r = open_lock_file(lock, 100);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("owned by another user") != std::string::npos);
  }
}
