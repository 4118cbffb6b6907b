// SPDX-License-Identifier: Apache-2.0
// CLI helpers shared by the subcommands: option parsing ("--name value", "--name=value", flags, "--") and a JSON reader.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stackprov/stackprov.h"

namespace stackprov_cli {

/// GNU-style option parser, the one convention of every command:
///  - long options "--name value" and "--name=value" for the names in `with_value`, "--name" for
///    those in `flags` ("--name=x" on a flag is an error);
///  - `aliases` maps other spellings to those names: a one-letter alias is a short option
///    ("-o FILE" or "-oFILE" for a value; "-j" for a flag), a longer one another long name
///    ("out" for "output"); values are kept under the name aliased, so get("output") finds "-o";
///  - "-h"/"--help" set `help`; "-" alone and anything else not starting with "-" is a positional;
///  - "--" ends the options: every later argument is a positional, and `dashdash` is the index in
///    `pos` where they start (-1 without "--").
/// The first problem (unknown option, missing value, value given to a flag) is kept in `error`,
/// naming the option as it was typed.
struct Args {
  using Aliases = std::vector<std::pair<std::string, std::string>>;  // {alias, name}
  std::vector<std::pair<std::string, std::string>> opts;
  std::vector<std::string> pos;
  std::string error;
  bool help = false;
  long dashdash = -1;

  Args(int argc, char** argv, const std::vector<std::string>& with_value, const std::vector<std::string>& flags,
       const Aliases& aliases = {});

  /// The last value of option `n` (a flag's is ""), or nullptr when absent.
  const char* get(const std::string& n) const;
  /// Every value of option `n`, in command-line order.
  std::vector<std::string> all(const std::string& n) const;
  bool has(const std::string& n) const { return get(n) != nullptr; }
  /// How many times option `n` was given.
  size_t count(const std::string& n) const;
  /// The first of `names` given more than once (without the dashes), or "".
  std::string repeated(const std::vector<std::string>& names) const;
};

/// One line on stderr, "stackprov CMD: MSG (see 'stackprov CMD --help')"; returns 2.
int usage_error(const char* cmd, const std::string& msg);

/// The exit codes of every command (each --help ends with its "Exit status" section).
inline constexpr int kExitOk = 0;     // the work was done
inline constexpr int kExitFail = 1;   // the work failed (one line on stderr says what and why)
inline constexpr int kExitUsage = 2;  // bad command line: an unknown option, a missing or bad value

/// The bundle identity bytes (hex, as sprov_bundle_find_module and sprov_symbolizer_addr_id take
/// them: the GUID as the RSDS record stores it, then the age u32 little-endian) of a PDB's
/// symbol-server key (32 hex digits of the GUID in the usual order, then the age in 1 to 8 hex
/// digits, as in a symbol store's NAME.pdb/KEY/NAME.pdb); "" when `key` is not one.
std::string pdb_key_id_hex(std::string_view key);
/// The inverse: the symbol-server key of 40 hex digits of pdb-guid-age identity bytes ("" else).
std::string pdb_id_hex_key(std::string_view id_hex);
/// The macho-uuid identity bytes (32 lower-case hex digits) of a UUID, with or without its dashes
/// ("" when `uuid` is not one). All three are the C ABI's sprov_id_from_key / sprov_id_key.
std::string uuid_id_hex(std::string_view uuid);
/// The pe-code-id identity bytes (hex: TimeDateStamp then SizeOfImage, u32 little-endian each) of a
/// code id key (TimeDateStamp as 8 hex digits, then SizeOfImage in 1 to 8 hex digits, as in a
/// symbol store's NAME/KEY/NAME); "" when `key` is not one.
std::string code_id_key_id_hex(std::string_view key);
/// The inverse: the key ("%08X%x") of 16 hex digits of pe-code-id identity bytes ("" else).
std::string code_id_hex_key(std::string_view id_hex);

/// "" when `path` names something that is not a directory (or does not exist yet), else
/// "'PATH' is a directory" -- for options and arguments that name a file.
std::string directory_given(const std::string& path);

/// "" when `dir` is an existing directory, else why it cannot be the bundle store a command reads
/// ("bundle store 'DIR' does not exist", as the library says it, or "is not a directory").
std::string store_not_found(const std::string& dir);

/// Writes `data` to `path` through PATH.tmp and a rename, so that a failed write leaves no partial
/// file; "" or the error (naming the path; a directory is said to be one).
std::string write_file_atomic(const std::string& path, std::string_view data);

/// "sha256:" and 64 lower-case hex digits: a bundle's (or file's) digest as the commands print it.
bool is_sha256_digest(const std::string& s);

/// A non-negative decimal integer (digits only, no sign, no overflow).
bool parse_uint(const char* s, uint64_t* out);

/// A parsed JSON value: enough to read the documents the C ABI returns (reports, events). Numbers
/// keep their text (counts print exactly; `number()` converts).
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  std::string text;  // a string's value or a number's text
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* get(std::string_view key) const {
    if (kind != kObject) return nullptr;
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
  /// A member's string (or number text); "" when absent or null.
  std::string str(std::string_view key) const {
    const Json* j = get(key);
    return j && (j->kind == kString || j->kind == kNumber) ? j->text : "";
  }
  double number(std::string_view key, double dflt = 0) const {
    const Json* j = get(key);
    return j && j->kind == kNumber ? strtod(j->text.c_str(), nullptr) : dflt;
  }
  const std::vector<Json>& array(std::string_view key) const {
    static const std::vector<Json> kEmpty;
    const Json* j = get(key);
    return j && j->kind == kArray ? j->items : kEmpty;
  }
};

/// Parses one JSON document (whitespace around it allowed); false when it cannot be read as
/// JSON or nests deeper than 64. A number's text is kept as written, not validated.
bool parse_json(std::string_view text, Json* out);

/// A buffer the library returned (char** out, size_t* out_len), released with sprov_free.
struct LibStr {
  char* p = nullptr;
  size_t len = 0;
  LibStr() = default;
  LibStr(const LibStr&) = delete;
  LibStr& operator=(const LibStr&) = delete;
  ~LibStr() { sprov_free(p); }
  std::string_view view() const { return p ? std::string_view(p, len) : std::string_view(); }
  std::string str() const { return std::string(view()); }
};

}  // namespace stackprov_cli
