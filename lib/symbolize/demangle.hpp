// SPDX-License-Identifier: Apache-2.0
// Symbol demangling for C++ (Itanium) and Rust (legacy and v0) through libiberty.
#pragma once

#include <string>
#include <string_view>

namespace stackprov::symbolize {

/// Demangles `name` (Itanium C++ `_Z…`, Rust legacy `_ZN…17h<hash>E`, Rust v0
/// `_R…`). Returns the input unchanged when it is not a mangled name or
/// demangling fails. Symbol-version suffixes (`@GLIBC_2.2.5`, `@@…`) are kept
/// after the demangled name. Thread-safe.
std::string demangle(std::string_view name);

}  // namespace stackprov::symbolize
