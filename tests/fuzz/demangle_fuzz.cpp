// SPDX-License-Identifier: Apache-2.0
// Fuzz target: symbol names from hostile binaries through demangle() and demangle_llvm() (libiberty's
// Itanium and Rust demanglers, then the LLVM spelling rewrites, which are ours).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "symbolize/demangle.hpp"

using namespace stackprov::symbolize;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A name from a string table ends at its first NUL.
  std::string_view name(reinterpret_cast<const char*>(data), size);
  name = name.substr(0, name.find('\0'));
  const std::string a = demangle(name), b = demangle_llvm(name);
  // Invariants: a name that is not mangled comes back unchanged; a symbol version ("@VER", "@@VER")
  // follows the demangled name unchanged; nothing comes back empty from a non-empty name. A
  // Microsoft C++ name ('?' first) has no symbol version: its '@'s are part of the mangling.
  if (!maybe_mangled(name) && (a != name || b != name)) __builtin_trap();
  if (!name.empty() && (a.empty() || b.empty())) __builtin_trap();
  const size_t at = name.find('@');
  if (at != std::string_view::npos && name[0] != '?') {
    const std::string_view ver = name.substr(at);
    for (const std::string* s : {&a, &b})
      if (s->size() < ver.size() || std::string_view(*s).substr(s->size() - ver.size()) != ver) __builtin_trap();
  }
  return 0;
}
