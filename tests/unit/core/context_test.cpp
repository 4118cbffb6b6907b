// SPDX-License-Identifier: Apache-2.0
// join_root: guest paths from hostile input stay under the sysroot, as a chroot resolves "..".
#include <catch2/catch.hpp>

#include <string>

#include "core/context.hpp"

using stackprov::join_root;

TEST_CASE("join_root resolves '..' as a chroot does: never above the root", "[core][hostile]") {
  // Expectations from chroot(2) path resolution ("/.." is "/"), written out by hand.
  struct Case {
    const char *root, *path, *want;
  } cases[] = {
      {"/sr", "/lib/libc.so.6", "/sr/lib/libc.so.6"},
      {"/sr", "/../../etc/shadow", "/sr/etc/shadow"},
      {"/sr", "/lib/../../../../home/u/x.so", "/sr/home/u/x.so"},
      {"/sr", "/usr/./lib//x.so", "/sr/usr/lib/x.so"},
      {"/sr", "/a/b/../c", "/sr/a/c"},
      {"/sr", "/..", "/sr/"},
      {"/sr", "/lib/", "/sr/lib/"},
      {"/sr", "[vdso]", "/sr[vdso]"},  // not absolute: as before (callers pass absolute paths only)
      {"", "/../etc/x", "/../etc/x"},    // no root: the host's own path, untouched
      {"/.", "/abs/path", "/./abs/path"},  // core_capture's "host paths already" root
  };
  for (const Case& c : cases) {
    INFO(c.root << " + " << c.path);
    CHECK(join_root(c.root, c.path) == c.want);
  }
  stackprov::ContextConfig cfg;
  cfg.sysroot = "/sr";
  stackprov::Context ctx(cfg);
  CHECK(ctx.host_path("/lib/../../x") == "/sr/x");
  CHECK(ctx.host_path("[heap]") == "[heap]");
}
