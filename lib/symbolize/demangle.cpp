// SPDX-License-Identifier: Apache-2.0
// Demangling through libiberty: Itanium C++, Rust legacy and v0, with symbol-version suffixes kept.
#include "symbolize/demangle.hpp"

#include <cstdlib>
#include <memory>
#include <optional>

#include <demangle.h>  // libiberty

namespace stackprov::symbolize {

namespace {

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using CString = std::unique_ptr<char, FreeDeleter>;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// Demangles one name without a version suffix; nullopt when it is not
/// mangled or demangling fails. The options are explicit (style bits
/// included) so libiberty's global current_demangling_style is never read,
/// and every entry point used here is reentrant.
std::optional<std::string> demangle_bare(const std::string& name) {
  if (starts_with(name, "_R")) {
    // Rust v0 (RFC 2603). Without DMGL_VERBOSE the crate disambiguators
    // ("[ca63f166dbe9294]") are dropped, which is what llvm-symbolizer-14
    // and llvm-cxxfilt-14 print.
    CString out(rust_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI));
    if (out) return std::string(out.get());
    return std::nullopt;
  }
  if (starts_with(name, "_ZN")) {
    // Rust legacy symbols are Itanium-shaped paths ending in "17h<16 hex>E".
    // DMGL_VERBOSE keeps the "::h<hash>" component, as llvm-symbolizer-14
    // prints it; libiberty additionally decodes "$LT$", "$u20$", ".." escapes.
    CString out(rust_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE));
    if (out) return std::string(out.get());
  }
  if (starts_with(name, "_Z") || starts_with(name, "_GLOBAL_")) {
    CString out(cplus_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_GNU_V3));
    if (out) return std::string(out.get());
  }
  return std::nullopt;
}

}  // namespace

std::string demangle(std::string_view name) {
  // ELF symbol versions follow the name as "@VER" or "@@VER" (as printed by
  // nm -D and readelf --dyn-syms); mangled names never contain '@'.
  const size_t at = name.find('@');
  const std::string bare(name.substr(0, at));
  auto out = demangle_bare(bare);
  if (!out) return std::string(name);
  if (at != std::string_view::npos) out->append(name.substr(at));
  return std::move(*out);
}

}  // namespace stackprov::symbolize
