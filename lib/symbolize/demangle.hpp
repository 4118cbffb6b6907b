// SPDX-License-Identifier: Apache-2.0
// Symbol demangling for C++ (Itanium) and Rust (legacy and v0) through libiberty, Microsoft C++ through LLVM's.
#pragma once

#include <string>
#include <string_view>

namespace stackprov::symbolize {

/// Demangles `name` (Itanium C++ `_Z…`, Rust legacy `_ZN…17h<hash>E`, Rust v0
/// `_R…`). Returns the input unchanged when it is not a mangled name or
/// demangling fails or gives an empty text (a Rust v0 "_RC0"). Symbol-version suffixes (`@GLIBC_2.2.5`, `@@…`) are kept
/// after the demangled name. Thread-safe.
std::string demangle(std::string_view name);

/// demangle() as llvm-symbolizer-14 prints Itanium names (llvm::itaniumDemangle):
/// libiberty's text with LLVM's spelling of what both decode alike — clone
/// suffixes " (.constprop.0.cold)" for " [clone .constprop.0] [clone .cold]",
/// closures "'lambda'(int)", "'lambda0'(int)" for "{lambda(int)#1}",
/// "{lambda(int)#2}", "'unnamed'" for "{unnamed type#1}", and "> >" for every
/// template closing ">>" (not operator>>). Other names (Rust, C) as demangle().
/// Names the two demanglers decode differently otherwise (template-argument
/// expressions, names LLVM 14 cannot demangle) keep libiberty's text. Thread-safe.
std::string demangle_llvm(std::string_view name);

/// False when demangle() and demangle_llvm() return `name` unchanged for certain:
/// it does not start with `_Z`, `_R`, `_GLOBAL_` or `?` (C names, most of a C program's).
/// Microsoft names (`?...`, PDB publics) are demangled as llvm-symbolizer-14 prints them when the
/// build links LLVM's demangler (STACKPROV_HAVE_MS_DEMANGLE), else kept.
inline bool maybe_mangled(std::string_view name) {
  return (name.size() > 1 && name[0] == '_' && (name[1] == 'Z' || name[1] == 'R' || name[1] == 'G')) ||
         (name.size() > 1 && name[0] == '?');
}

}  // namespace stackprov::symbolize
