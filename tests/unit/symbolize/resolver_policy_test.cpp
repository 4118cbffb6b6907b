// SPDX-License-Identifier: Apache-2.0
// ResolverPolicy: the step order doc/bundles.md "Resolver policy" gives for policy lists.
#include <catch2/catch.hpp>

#include "symbolize/resolver_chain.hpp"

using stackprov::symbolize::ResolverPolicy;
using Step = ResolverPolicy::Step;

TEST_CASE("resolver policy: the default list asks the bundle before DWARF") {
  auto p = ResolverPolicy::from_names({"debuginfod", "bundle", "dwarf", "symtab", "dynsym", "demangle"}, false);
  CHECK(p.order == std::vector<Step>{Step::kBundle, Step::kDwarf, Step::kSymtab, Step::kDynsym});
  CHECK(p.debuginfod);
  CHECK(p.dwarf);
  CHECK(p.demangle);
}

TEST_CASE("resolver policy: order is kept; debuginfod places the DWARF step only without dwarf") {
  auto p = ResolverPolicy::from_names({"dwarf", "bundle"}, false);
  CHECK(p.order == std::vector<Step>{Step::kDwarf, Step::kBundle});
  CHECK_FALSE(p.demangle);
  CHECK_FALSE(p.debuginfod);
  auto q = ResolverPolicy::from_names({"symtab", "debuginfod", "bundle"}, false);
  CHECK(q.order == std::vector<Step>{Step::kSymtab, Step::kDwarf, Step::kBundle});
  CHECK(q.debuginfod);
  CHECK_FALSE(q.dwarf);
}

TEST_CASE("resolver policy: the library default puts gopclntab after DWARF, before the symbol tables") {
  auto p = ResolverPolicy::from_names({"debuginfod", "bundle", "dwarf", "gopclntab", "symtab", "dynsym", "demangle"},
                                      false);
  CHECK(p.order == std::vector<Step>{Step::kBundle, Step::kDwarf, Step::kGopclntab, Step::kSymtab, Step::kDynsym});
  CHECK(ResolverPolicy::from_names({"gopclntab", "dwarf"}, true).order.empty());  // offline: never a module file
}

TEST_CASE("resolver policy: offline keeps the bundle step alone") {
  auto p = ResolverPolicy::from_names({"debuginfod", "bundle", "dwarf", "symtab", "dynsym", "demangle"}, true);
  CHECK(p.order == std::vector<Step>{Step::kBundle});
  CHECK_FALSE(p.debuginfod);
  CHECK_FALSE(p.dwarf);
  CHECK(p.demangle);
  CHECK(ResolverPolicy::from_names({"dwarf", "symtab"}, true).order.empty());
}
