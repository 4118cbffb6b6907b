// SPDX-License-Identifier: Apache-2.0
// Demangling through libiberty: Itanium C++, Rust legacy and v0, with symbol-version suffixes kept; Microsoft
// C++ names (PDB publics) through LLVM's demangler when the build has it.
#include "symbolize/demangle.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>

#include <demangle.h>  // libiberty

#if STACKPROV_HAVE_MS_DEMANGLE
#include <llvm/Demangle/Demangle.h>  // llvm-14-dev's libLLVMDemangle.a
#endif

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
    // An empty text ("_RC0": a crate root with an empty name) names nothing: keep the symbol.
    CString out(rust_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI));
    if (out && out.get()[0] != '\0') return std::string(out.get());
    return std::nullopt;
  }
  if (starts_with(name, "_ZN")) {
    // Rust legacy symbols are Itanium-shaped paths ending in "17h<16 hex>E".
    // DMGL_VERBOSE keeps the "::h<hash>" component, as llvm-symbolizer-14
    // prints it; libiberty additionally decodes "$LT$", "$u20$", ".." escapes.
    CString out(rust_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE));
    if (out && out.get()[0] != '\0') return std::string(out.get());
  }
  if (starts_with(name, "_Z") || starts_with(name, "_GLOBAL_")) {
    CString out(cplus_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_GNU_V3));
    if (out && out.get()[0] != '\0') return std::string(out.get());
  }
  return std::nullopt;
}

/// "'lambda'", "'lambda0'"...: LLVM prints the discriminator digits as mangled
/// (none for the first closure, then 0, 1...); libiberty counts from #1.
std::string llvm_count(std::string_view hash_number) {
  const long n = std::strtol(std::string(hash_number).c_str(), nullptr, 10);
  return n <= 1 ? std::string() : std::to_string(n - 2);
}

/// "{lambda(ARGS)#N}" -> "'lambdaC'(ARGS)" and "{unnamed type#N}" -> "'unnamedC'", at any depth.
std::string llvm_closures(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t l = s.find("{lambda(", i);
    const size_t u = s.find("{unnamed type#", i);
    const size_t at = std::min(l, u);
    if (at == std::string_view::npos) break;
    out.append(s.substr(i, at - i));
    if (at == u) {
      const size_t close = s.find('}', at);
      const std::string_view num = s.substr(at + 14, close == std::string_view::npos ? 0 : close - at - 14);
      if (close == std::string_view::npos || num.empty() ||
          num.find_first_not_of("0123456789") != std::string_view::npos) {
        out.push_back(s[at]);
        i = at + 1;
        continue;
      }
      out += "'unnamed" + llvm_count(num) + "'";
      i = close + 1;
      continue;
    }
    // The parameter list's closing parenthesis, then "#N}".
    size_t k = at + 8;
    int depth = 1;
    for (; k < s.size() && depth > 0; k++) depth += s[k] == '(' ? 1 : s[k] == ')' ? -1 : 0;
    const size_t close = k < s.size() && s[k] == '#' ? s.find('}', k) : std::string_view::npos;
    const std::string_view num = close == std::string_view::npos ? std::string_view() : s.substr(k + 1, close - k - 1);
    if (depth != 0 || num.empty() || num.find_first_not_of("0123456789") != std::string_view::npos) {
      out.push_back(s[at]);
      i = at + 1;
      continue;
    }
    out += "'lambda" + llvm_count(num) + "'(" + llvm_closures(s.substr(at + 8, k - 1 - (at + 8))) + ")";
    i = close + 1;
  }
  out.append(s.substr(std::min(i, s.size())));
  return out;
}

/// libiberty's Itanium text in llvm::itaniumDemangle's (LLVM 14) spelling.
std::string llvm_spelling(std::string s) {
  // Clone suffixes: libiberty splits ".isra.0.cold" into " [clone .isra.0] [clone .cold]", LLVM
  // prints the whole suffix once: " (.isra.0.cold)".
  std::string suffix;
  size_t end = s.size();
  while (end > 0 && s[end - 1] == ']') {
    const size_t k = s.rfind(" [clone .", end - 1);
    if (k == std::string::npos || s.find(']', k) != end - 1) break;
    suffix.insert(0, s, k + 8, end - 1 - (k + 8));
    end = k;
  }
  if (!suffix.empty()) s = s.substr(0, end) + " (" + suffix + ")";
  s = llvm_closures(s);
  // libiberty separates the template arguments of operator< and operator<< by a space, LLVM does not.
  for (const auto& [gnu, llvm] : {std::pair<std::string_view, std::string_view>{"operator<< <", "operator<<<"},
                                  {"operator< <", "operator<<"}})
    for (size_t i = s.find(gnu); i != std::string::npos; i = s.find(gnu, i + llvm.size()))
      s.replace(i, gnu.size(), llvm);
  for (size_t i = s.find("decltype(nullptr)"); i != std::string::npos; i = s.find("decltype(nullptr)", i))
    s.replace(i, 17, "std::nullptr_t");
  // LLVM 14 drops the name of a constructor or destructor of a class with an ABI tag:
  // "failure[abi:cxx11]::failure(...)" is "failure[abi:cxx11]::(...)".
  for (size_t t = s.find("[abi:"); t != std::string::npos; t = s.find("[abi:", t + 1)) {
    size_t b = t;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(s[b - 1])) || s[b - 1] == '_')) b--;
    size_t e = t;  // past every tag; npos when one is not closed ("_ZN6[abi:6E" reads as a name "[abi:6")
    while (e < s.size() && s.compare(e, 5, "[abi:") == 0) {
      const size_t close = s.find(']', e);
      e = close == std::string::npos ? close : close + 1;
    }
    if (e == std::string::npos || s.compare(e, 2, "::") != 0 || b == t) continue;
    const std::string cls = s.substr(b, t - b);
    const size_t n = e + 2 + (s.compare(e + 2, 1, "~") == 0 ? 1 : 0);
    if (s.compare(n, cls.size(), cls) == 0 && n + cls.size() < s.size() && s[n + cls.size()] == '(')
      s.erase(n, cls.size());
  }
  // LLVM separates every template-closing '>' from a previous one.
  for (size_t i = s.find(">>"); i != std::string::npos; i = s.find(">>", i + 1)) {
    if (i >= 8 && s.compare(i - 8, 8, "operator") == 0) {
      i++;  // operator>> / operator>>=
      continue;
    }
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(i) + 1, ' ');  // a char: GCC 12's -Wrestrict false positive (PR 105329) on insert(pos, const char*)
  }
  return s;
}

/// LLVM prints the return type of a template function that encloses a local name
/// ("void std::call_once<...>(...)::'lambda0'()"), libiberty leaves it out. The
/// enclosing encoding ends at one of the 'E's of "_ZZ<encoding>E<entity>": the one
/// whose text alone is "RET PREFIX" with PREFIX followed by "::" in `text`.
std::string with_enclosing_return_type(const std::string& bare, std::string text) {
  if (!starts_with(bare, "_ZZ")) return text;
  for (size_t e = bare.find('E', 3); e != std::string::npos; e = bare.find('E', e + 1)) {
    const auto enc = demangle_bare("_Z" + bare.substr(3, e - 3));
    if (!enc) continue;
    for (size_t j = text.find("::"); j != std::string::npos && j < enc->size(); j = text.find("::", j + 1)) {
      const size_t r = enc->size() - j;  // where PREFIX would start in enc
      if (r >= 2 && (*enc)[r - 1] == ' ' && enc->compare(r, j, text, 0, j) == 0) return enc->substr(0, r) + text;
    }
  }
  return text;
}

}  // namespace

/// A Microsoft C++ name ("?norm2@Point@geo@@QEBAHXZ") as llvm-symbolizer-14 prints it
/// (LLVMSymbolizer::DemangleName: no access specifier, calling convention, member type or return
/// type); nullopt when it cannot be demangled or the build has no Microsoft demangler.
std::optional<std::string> demangle_ms(std::string_view name) {
#if STACKPROV_HAVE_MS_DEMANGLE
  const std::string s(name);
  int status = 0;
  CString out(llvm::microsoftDemangle(
      s.c_str(), nullptr, nullptr, nullptr, &status,
      llvm::MSDemangleFlags(llvm::MSDF_NoAccessSpecifier | llvm::MSDF_NoCallingConvention | llvm::MSDF_NoMemberType |
                            llvm::MSDF_NoReturnType)));
  if (status != 0 || !out) return std::nullopt;
  return std::string(out.get());
#else
  (void)name;
  return std::nullopt;
#endif
}

std::string demangle(std::string_view name) {
  if (!name.empty() && name[0] == '?') return demangle_ms(name).value_or(std::string(name));
  // ELF symbol versions follow the name as "@VER" or "@@VER" (as printed by
  // nm -D and readelf --dyn-syms); mangled names never contain '@'.
  const size_t at = name.find('@');
  const std::string bare(name.substr(0, at));
  auto out = demangle_bare(bare);
  if (!out) return std::string(name);
  if (at != std::string_view::npos) out->append(name.substr(at));
  return std::move(*out);
}

std::string demangle_llvm(std::string_view name) {
  if (!name.empty() && name[0] == '?') return demangle_ms(name).value_or(std::string(name));
  const size_t at = name.find('@');
  const std::string bare(name.substr(0, at));
  if (!starts_with(bare, "_Z") || starts_with(bare, "_R")) return demangle(name);
  // What LLVM 14's demangler rejects (it then prints the name as is): transaction clones and
  // unresolved names scoped in std:: ("srSt"), which libiberty decodes.
  if (starts_with(bare, "_ZGTt") || bare.find("srSt") != std::string::npos) return std::string(name);
  auto out = demangle_bare(bare);
  if (!out) return std::string(name);
  // Rust legacy names are Itanium-shaped but their text is rust_demangle's: leave them.
  if (out->find("::h") != std::string::npos && bare.size() > 20 && bare.compare(bare.size() - 20, 3, "17h") == 0)
    return demangle(name);
  std::string r = llvm_spelling(with_enclosing_return_type(bare, std::move(*out)));
  if (at != std::string_view::npos) r.append(name.substr(at));
  return r;
}

}  // namespace stackprov::symbolize
