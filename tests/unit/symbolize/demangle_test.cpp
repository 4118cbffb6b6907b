// SPDX-License-Identifier: Apache-2.0
// demangle() on Itanium ABI spec examples, Rust v0 (RFC 2603) and legacy symbols, against c++filt/llvm-cxxfilt.
#include <catch2/catch.hpp>
#include <cstdio>
#include <unistd.h>
#include <string>
#include <thread>
#include <vector>

#include "symbolize/demangle.hpp"

using stackprov::symbolize::demangle;
using stackprov::symbolize::demangle_llvm;

namespace {

enum class Tool { kCxxFilt, kLlvmCxxFilt, kNone };

struct Vector {
  const char* mangled;
  const char* expected;
  Tool oracle;  // the independent tool whose default output we match
};

// Itanium C++ ABI, section 5.1 ("Mangling") examples and common library symbols.
const Vector kVectors[] = {
    {"_Z1fv", "f()", Tool::kCxxFilt},
    {"_Z1fi", "f(int)", Tool::kCxxFilt},
    {"_Z3foo3bar", "foo(bar)", Tool::kCxxFilt},
    {"_Zrm1XS_", "operator%(X, X)", Tool::kCxxFilt},
    {"_ZplR1XS0_", "operator+(X&, X&)", Tool::kCxxFilt},
    {"_ZlsRK1XS1_", "operator<<(X const&, X const&)", Tool::kCxxFilt},
    {"_ZN3FooIA4_iE3barE", "Foo<int [4]>::bar", Tool::kCxxFilt},
    {"_Z1fIiEvi", "void f<int>(int)", Tool::kCxxFilt},
    {"_Z5firstI3DuoEvS0_", "void first<Duo>(Duo)", Tool::kCxxFilt},
    {"_Z5firstI3DuoEvT_", "void first<Duo>(Duo)", Tool::kCxxFilt},
    {"_Z3fooIiFvdEiEvv", "void foo<int, void (double), int>()", Tool::kCxxFilt},
    {"_Z1fIFvvEEvv", "void f<void ()>()", Tool::kCxxFilt},
    {"_Z1fPFvvEM1SFvvE", "f(void (*)(), void (S::*)())", Tool::kCxxFilt},
    {"_ZN1N1TIiiE2mfES0_IddE", "N::T<int, int>::mf(N::T<double, double>)", Tool::kCxxFilt},
    {"_ZSt5state", "std::state", Tool::kCxxFilt},
    {"_ZNSt3_In4wardE", "std::_In::ward", Tool::kCxxFilt},
    {"_Z1fM1AKFvvE", "f(void (A::*)() const)", Tool::kCxxFilt},
    {"_ZN5Outer5InnerC2Ev", "Outer::Inner::Inner()", Tool::kCxxFilt},
    {"_ZdlPv", "operator delete(void*)", Tool::kCxxFilt},
    {"_ZTV1A", "vtable for A", Tool::kCxxFilt},
    {"_ZTI1A", "typeinfo for A", Tool::kCxxFilt},
    {"_ZNKSt6vectorIiSaIiEE4sizeEv", "std::vector<int, std::allocator<int> >::size() const",
     Tool::kCxxFilt},
    {"_ZZ4mainE1x", "main::x", Tool::kCxxFilt},
    {"_ZN9__gnu_cxx13new_allocatorIcE8allocateEmPKv",
     "__gnu_cxx::new_allocator<char>::allocate(unsigned long, void const*)", Tool::kCxxFilt},
    {"_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev",
     "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::~basic_string()",
     Tool::kCxxFilt},
    // GCC clone suffixes (libiberty's spelling; llvm prints "(.cold)").
    {"_Z3fooi.cold", "foo(int) [clone .cold]", Tool::kCxxFilt},
    // Rust legacy: the ::h<hash> is kept (llvm-symbolizer-14 prints it too), $-escapes decoded.
    {"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write::h0123456789abcdef", Tool::kCxxFilt},
    {"_ZN3std2rt10lang_start17h6f2ffb8ed4b1c6ecE", "std::rt::lang_start::h6f2ffb8ed4b1c6ec",
     Tool::kCxxFilt},
    {"_ZN71_$LT$Test$u20$$u2b$$u20$$u27$static$u20$as$u20$foo..Bar$LT$Test$GT$$GT$3bar17h930b740aba94f2c6E",
     "<Test + 'static as foo::Bar<Test>>::bar::h930b740aba94f2c6", Tool::kCxxFilt},
    // Rust v0 (RFC 2603 examples): crate disambiguators dropped, as llvm-symbolizer-14 prints.
    {"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example", Tool::kLlvmCxxFilt},
    {"_RNvNtCs15kBYyAo9fc_7mycrate8mymodule10myfunction", "mycrate::mymodule::myfunction",
     Tool::kLlvmCxxFilt},
    {"_RNvMsr_NtCs3ssYzQotkvD_3std4pathNtB5_7PathBuf3newCs15kBYyAo9fc_7mycrate",
     "<std::path::PathBuf>::new", Tool::kLlvmCxxFilt},
    {"_RNvC6_123foo3bar", "123foo::bar", Tool::kLlvmCxxFilt},
    {"_RINvNtC3std3mem8align_ofdE", "std::mem::align_of::<f64>", Tool::kLlvmCxxFilt},
    {"_RINbNbCskIICzLVDPPb_5alloc5alloc8box_freeDINbNiB4_5boxed5FnBoxuEp6OutputuEL_ECs1iopQbuBiw2_3std",
     "alloc::alloc::box_free::<dyn alloc::boxed::FnBox<(), Output = ()>>", Tool::kLlvmCxxFilt},
    // Not mangled, or not demanglable: returned unchanged.
    {"main", "main", Tool::kCxxFilt},
    {"_start", "_start", Tool::kCxxFilt},
    {"_GLOBAL__sub_I_main.cpp", "_GLOBAL__sub_I_main.cpp", Tool::kCxxFilt},
    {"_Zinvalid", "_Zinvalid", Tool::kCxxFilt},
    {"_RNCNvC8mycrate3foo0", "_RNCNvC8mycrate3foo0", Tool::kLlvmCxxFilt},
    {"", "", Tool::kNone},
};

std::string tool_output(const char* tool, const std::string& symbol) {
  const std::string cmd = std::string("printf '%s\\n' '") + symbol + "' | " + tool + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[1024];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  if (st != 0) return {};
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

TEST_CASE("Demangling vectors from the Itanium ABI, RFC 2603 and Rust legacy", "[demangle]") {
  size_t n = 0;
  for (const Vector& v : kVectors) {
    INFO(v.mangled);
    CHECK(demangle(v.mangled) == v.expected);
    n++;
  }
  CHECK(n >= 30);
}

TEST_CASE("Demangling agrees with c++filt and llvm-cxxfilt-14", "[demangle][tools]") {
  const bool have_gnu = !tool_output("c++filt", "_Z1fv").empty();
  const bool have_llvm = !tool_output("llvm-cxxfilt-14", "_Z1fv").empty();
  INFO("needs c++filt (binutils) and llvm-cxxfilt-14 (llvm-14): make deps");
  REQUIRE(have_gnu);
  REQUIRE(have_llvm);
  int compared = 0;
  for (const Vector& v : kVectors) {
    const std::string s = v.mangled;
    if (s.empty() || s.find('\'') != std::string::npos) continue;
    INFO(s);
    if (v.oracle == Tool::kCxxFilt) {
      CHECK(demangle(s) == tool_output("c++filt", s));
      compared++;
    } else if (v.oracle == Tool::kLlvmCxxFilt) {
      CHECK(demangle(s) == tool_output("llvm-cxxfilt-14", s));
      compared++;
    }
  }
  CHECK(compared >= 30);
}

TEST_CASE("demangle_llvm spells names as llvm-cxxfilt-14", "[demangle][tools]") {
  REQUIRE(!tool_output("llvm-cxxfilt-14", "_Z1fv").empty());  // llvm-14 (make deps)
  // What libiberty and LLVM 14 spell differently (GCC clones, closures, unnamed types,
  // operator< templates, nullptr_t, ABI-tagged constructors, nested template closes) and
  // what LLVM 14 cannot demangle at all (printed as is).
  const char* const names[] = {
      "_Z3fooi.cold",
      "_Z3fooi.isra.0.cold",
      "_Z3fooi.constprop.0.isra.0",
      "_ZZN7fixture4makeEiENKUliiE_clEii",
      "_ZZN7fixture4makeEiENKUliiE0_clEii",
      "_ZZN7fixture4makeEiENKUliiE1_clEii.cold",
      "_ZN1AUt_E",
      "_ZN1AUt0_E",
      "_ZStltIcSt11char_traitsIcESaIcEEbRKNSt7__cxx1112basic_stringIT_T0_T1_EESA_",
      "_ZStlsIcSt11char_traitsIcEERSt13basic_ostreamIT_T0_ES6_PKS3_",
      "_ZNSolsEDn",
      "_ZNSt8ios_base7failureB5cxx11C1EPKcRKSt10error_code",
      "_ZNSt8ios_base7failureB5cxx11D0Ev",
      "_ZZSt9call_onceIRFvvEJEEvRSt9once_flagOT_DpOT0_ENKUlvE0_clEv",
      "_ZSt14__relocate_a_1IiiENSt9enable_ifIXsrSt24__is_bitwise_relocatableIT_vE5valueEPS2_E4typeES4_S4_S4_RSaIT0_E",
      "_ZGTtNKSt11logic_error4whatEv",
      "_ZN1AI1BI1CIiEEE1fEv",
      "_ZN4core3fmt5write17h0123456789abcdefE",
      "malloc",
  };
  for (const char* n : names) {
    INFO(n);
    CHECK(demangle_llvm(n) == tool_output("llvm-cxxfilt-14", n));
  }
  CHECK(demangle_llvm("_Z3fooi.cold@@V1") == "foo(int) (.cold)@@V1");
  // fuzz_demangle (tests/fuzz/regress/demangle): a source name "[abi:6" reads as an ABI tag without its
  // ']', which once looped forever. LLVM 14 rejects these names; libiberty's text is kept (no
  // LLVM spelling applies), as for every name the two demangle differently.
  for (const char* n : {"_ZN6[abi:6E", "_ZN6[abi:6E3fooE", "_ZN3foo6[abi:xC2Ev"}) {
    INFO(n);
    CHECK(demangle_llvm(n) == demangle(n));
  }
  // fuzz_demangle (the campaign): "_RC0", a Rust v0 crate root with an empty name, demangles to
  // the empty string (llvm-cxxfilt-14 prints an empty line). A frame keeps its symbol instead.
  CHECK(tool_output("llvm-cxxfilt-14", "_RC0").empty());
  CHECK(demangle("_RC0") == "_RC0");
  CHECK(demangle_llvm("_RC0") == "_RC0");
}

TEST_CASE("demangle_llvm agrees with llvm-cxxfilt-14 on libstdc++'s exported names", "[demangle][tools]") {
  REQUIRE(!tool_output("llvm-cxxfilt-14", "_Z1fv").empty());  // llvm-14 (make deps)
  const std::string lib = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
  FILE* p = popen(("nm -D --defined-only " + lib + " | awk '$3 ~ /^_Z/ {sub(/@.*/, \"\", $3); print $3}' | sort -u")
                      .c_str(), "r");
  REQUIRE(p != nullptr);
  std::string all;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) all.append(buf, n);
  pclose(p);
  std::vector<std::string> names;
  for (size_t i = 0, e; i < all.size(); i = e + 1) {
    e = all.find('\n', i);
    if (e == std::string::npos) e = all.size();
    if (e > i) names.push_back(all.substr(i, e - i));
  }
  INFO(lib << " (libstdc++6, binutils' nm)");
  REQUIRE(names.size() > 3000);
  // One llvm-cxxfilt-14 run over every name (one per line, in order).
  const std::string list = "/tmp/sprov-demangle-" + std::to_string(getpid());
  FILE* f = fopen(list.c_str(), "w");
  REQUIRE(f != nullptr);
  for (const auto& s : names) fprintf(f, "%s\n", s.c_str());
  fclose(f);
  p = popen(("llvm-cxxfilt-14 < " + list).c_str(), "r");
  REQUIRE(p != nullptr);
  all.clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) all.append(buf, n);
  pclose(p);
  std::remove(list.c_str());
  size_t k = 0, same = 0;
  for (size_t i = 0, e; i < all.size() && k < names.size(); i = e + 1, k++) {
    e = all.find('\n', i);
    if (e == std::string::npos) e = all.size();
    const std::string want = all.substr(i, e - i);
    if (demangle_llvm(names[k]) == want) {
      same++;
    } else {
      UNSCOPED_INFO(names[k] << ": ours " << demangle_llvm(names[k]) << " | llvm " << want);
    }
  }
  CHECK(k == names.size());
  CHECK(same == names.size());
}

TEST_CASE("Symbol-version suffixes survive demangling", "[demangle]") {
  CHECK(demangle("_ZNSt9bad_allocD1Ev@@GLIBCXX_3.4") == "std::bad_alloc::~bad_alloc()@@GLIBCXX_3.4");
  CHECK(demangle("_ZdlPv@GLIBCXX_3.4") == "operator delete(void*)@GLIBCXX_3.4");
  CHECK(demangle("malloc@GLIBC_2.2.5") == "malloc@GLIBC_2.2.5");
  CHECK(demangle("_RNvCs15kBYyAo9fc_7mycrate7example@@V1") == "mycrate::example@@V1");
  CHECK(demangle("@@") == "@@");
  // A string_view that is not NUL-terminated is handled.
  const std::string big = "_Z1fvXXXX";
  CHECK(demangle(std::string_view(big).substr(0, 5)) == "f()");
}

TEST_CASE("Demangling is thread-safe", "[demangle]") {
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 2000; i++) {
        const Vector& v = kVectors[(i + t) % (sizeof kVectors / sizeof kVectors[0])];
        if (demangle(v.mangled) != v.expected) bad[t]++;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int b : bad) CHECK(b == 0);
}
