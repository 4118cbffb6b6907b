// SPDX-License-Identifier: Apache-2.0
// What a resolver tried for a module or an address and why it did not answer: the record behind `--verbose`.
#pragma once

#include <cstdint>
#include <string>

namespace stackprov::symbolize {

/// Values equal enum sprov_attempt_outcome.
enum class AttemptOutcome : int32_t {
  kAnswered = 0,           ///< this step answered the address
  kFound = 1,              ///< the file or table is there and the step uses it
  kMissing = 2,            ///< nothing at that path (or the server has no such file)
  kIdentityMismatch = 3,   ///< a file with another build-id (the reason names both)
  kCrcMismatch = 4,        ///< a .gnu_debuglink candidate with another CRC32 (both named)
  kUnreadable = 5,         ///< there, but not readable as what it should be (the error says why)
  kFetchFailed = 6,        ///< a server did not deliver (connection refused, timeout, ...)
  kNoDwarf = 7,            ///< the file has no DWARF (.debug_info)
  kNotCovered = 8,         ///< the module has DWARF, but no unit covers the address
  kNoSymbols = 9,          ///< no such symbol table, or no symbol covers the address
  kSkipped = 10,           ///< the step could not run (no store, DEBUGINFOD_URLS unset, ...)
  kNotAnswered = 11,       ///< no step of the policy answered the address
};

/// "answered", "found", "missing", "identity mismatch", ...
const char* attempt_outcome_name(AttemptOutcome o);

/// One thing a step of the resolver policy tried. Module-level attempts (the files and servers
/// looked at) are the same for every address of a module; `per_address` ones (which step
/// answered, DWARF that does not cover the address) are about one address.
struct ResolveAttempt {
  std::string resolver;   ///< the policy step: "bundle", "dwarf", "debuginfod", "gopclntab", "symtab", "dynsym"
  std::string looked_at;  ///< the path or URL looked at; "" when the step looked at nothing
  AttemptOutcome outcome = AttemptOutcome::kMissing;
  std::string reason;     ///< why, naming the values (both build-ids, the server's error); may be ""
  bool per_address = false;
};

}  // namespace stackprov::symbolize
