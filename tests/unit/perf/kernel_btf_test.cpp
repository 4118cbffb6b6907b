// SPDX-License-Identifier: Apache-2.0
// perf::KernelBtf (stack --kernel --with-btf): compiler clones get their source function's prototype,
// marked approximate; names BTF lacks are not guessed. Reads the running kernel's BTF.
#include <catch2/catch.hpp>

#include <string>

#include "perf/kernel_btf.hpp"
#include "stackprov/errors.h"

using stackprov::perf::BtfPrototype;
using stackprov::perf::KernelBtf;

TEST_CASE("kernel BTF: clone suffixes", "[perf][btf]") {
  bool clone = false;
  CHECK(KernelBtf::base_name("do_nanosleep.isra.0", &clone) == "do_nanosleep");
  CHECK(clone);
  CHECK(KernelBtf::base_name("tcp_v4_rcv.cold", &clone) == "tcp_v4_rcv");
  CHECK(clone);
  CHECK(KernelBtf::base_name("do_nanosleep", &clone) == "do_nanosleep");
  CHECK(!clone);
  CHECK(KernelBtf::base_name(".text", &clone) == ".text");  // a leading dot is no clone
  CHECK(!clone);
}

TEST_CASE("kernel BTF: prototypes of the running kernel, clones approximate", "[perf][btf]") {
  auto btf = KernelBtf::open();
  if (!btf.ok()) {
    // Only a build without libbpf may lack it (the eBPF sampler off); it says so.
    REQUIRE(btf.error().code == SPROV_ERR_UNSUPPORTED);
    CHECK(btf.error().message.find("libbpf") != std::string::npos);
    return;
  }
  CHECK((*btf)->function_count() > 1000);
  // hrtimer_nanosleep is in every stack of a nanosleep (kernel/time/hrtimer.c, since 2.6).
  BtfPrototype exact, isra, cold;
  REQUIRE((*btf)->lookup("hrtimer_nanosleep", &exact));
  CHECK(!exact.approximate);
  CHECK(exact.btf_name == "hrtimer_nanosleep");
  CHECK(exact.text.find("hrtimer_nanosleep(") != std::string::npos);
  REQUIRE((*btf)->lookup("hrtimer_nanosleep.isra.0", &isra));
  CHECK(isra.approximate);
  CHECK(isra.func_id == exact.func_id);
  CHECK(isra.text == exact.text);
  REQUIRE((*btf)->lookup("hrtimer_nanosleep.constprop.0", &cold));
  CHECK(cold.approximate);
  CHECK((*btf)->lookup("hrtimer_nanosleep.cold", &cold));
  // Assembly entry code has no BTF; no prefix or substring match is tried.
  BtfPrototype none;
  CHECK(!(*btf)->lookup("entry_SYSCALL_64_after_hwframe", &none));
  CHECK(!(*btf)->lookup("hrtimer_nanosle", &none));
  CHECK(!(*btf)->lookup("", &none));
}
