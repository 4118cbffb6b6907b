// SPDX-License-Identifier: Apache-2.0
// CLI output helpers: eu-stack-style text and JSON for unwound, symbolized stacks.
#pragma once

#include <cstdio>
#include <string>

#include "stackprov/stackprov.h"

namespace stackprov_cli {

/// Prints one thread in eu-stack style:
///   TID n:
///   #k  0xPC function+0xOFF - module [method]
///   stop: reason
void print_stack_text(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid);

/// Prints one thread as a JSON object (no trailing newline).
void print_stack_json(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid);

std::string json_escape(const char* s);
std::string hex_bytes(const uint8_t* p, size_t n);

}  // namespace stackprov_cli
