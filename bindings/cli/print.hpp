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
/// `pc` is the unwound value (a return address for caller frames), as eu-stack and gdb print it.
/// With `lines`, each frame also gets its source location and inline chain
/// (DWARF, through sprov_symbolizer_frame_ex).
void print_stack_text(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                      bool lines = true);

/// Prints one thread as a JSON object (no trailing newline):
///   {"tid":n,"frames":[{"index","pc","sp","cfa","module","build_id","module_offset","function",
///    "linkage_name","function_offset","resolver","source","bundle","method"}...],"stop_reason":"..."}
/// Addresses are "0x…" hex strings; unknown strings are "". With `lines`, resolver/source/bundle
/// are the resolver chain's (sprov_symbolizer_frame_ex), else the symbol tables'.
void print_stack_json(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                      bool lines = true);

/// eu-stack's process header: "PID n - process" (live) or "PID n - core".
void print_process_header_text(FILE* f, int64_t pid, bool core);

/// Prints each line of `text` (one finding per line) as "stackprov: warning: LINE".
void print_warnings(FILE* f, const char* text);

std::string json_escape(const char* s);
std::string hex_bytes(const uint8_t* p, size_t n);

}  // namespace stackprov_cli
