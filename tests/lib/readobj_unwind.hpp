// SPDX-License-Identifier: Apache-2.0
// Peer-output parser: `llvm-readobj-14 --unwind` of a PE32+ image (x64), one record per RUNTIME_FUNCTION.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace stackprov::test {

/// One line of an UnwindCodes list, e.g. "0x0F: SAVE_NONVOL reg=RBX, offset=0x28": the operands as
/// printed (size= is decimal, offset= hex; reg= a name such as RBX or XMM6; errcode= yes or no).
struct ReadobjUnwindCode {
  unsigned prolog_offset = 0;
  std::string op;
  std::map<std::string, std::string> operands;
  /// A numeric operand (0x… hex, else decimal); nullopt when absent.
  std::optional<uint64_t> number(const std::string& key) const {
    auto it = operands.find(key);
    if (it == operands.end()) return std::nullopt;
    return std::strtoull(it->second.c_str(), nullptr, 0);
  }
};

/// A chained RUNTIME_FUNCTION as printed (virtual addresses).
struct ReadobjChained {
  uint64_t start = 0, end = 0, unwind_info = 0;
};

/// Addresses are as printed: virtual addresses (image base included).
struct ReadobjRuntimeFunction {
  uint64_t start = 0, end = 0, unwind_info = 0;
  unsigned version = 0;
  unsigned flags = 0;
  unsigned prolog_size = 0;
  std::optional<unsigned> frame_register;  ///< nullopt: "-"
  std::optional<unsigned> frame_offset;    ///< as stored (unscaled); nullopt: "-"
  unsigned code_count = 0;                 ///< UnwindCodeCount: slots
  std::vector<ReadobjUnwindCode> codes;
  std::optional<uint64_t> handler;
  std::optional<ReadobjChained> chained;
};

namespace readobj_detail {
inline std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}
/// The last "(0x…)" of a line: readobj prints "sym +0x10 (0x140001010)" or "(0x140001010)".
inline uint64_t paren_hex(const std::string& line) {
  size_t p = line.rfind("(0x");
  return p == std::string::npos ? 0 : std::strtoull(line.c_str() + p + 1, nullptr, 16);
}
inline bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace readobj_detail

/// Parses the UnwindInformation list; unknown lines are ignored.
inline std::vector<ReadobjRuntimeFunction> parse_readobj_unwind(const std::string& text) {
  using namespace readobj_detail;
  std::vector<ReadobjRuntimeFunction> out;
  std::istringstream in(text);
  std::string raw;
  ReadobjRuntimeFunction* cur = nullptr;
  bool in_codes = false, in_flags = false, in_chained = false;
  while (std::getline(in, raw)) {
    const std::string l = trim(raw);
    if (l == "RuntimeFunction {") {
      out.emplace_back();
      cur = &out.back();
      in_codes = in_flags = in_chained = false;
      continue;
    }
    if (!cur) continue;
    if (in_codes) {
      if (l == "]") {
        in_codes = false;
        continue;
      }
      // "0x27: SAVE_XMM128 reg=XMM6, offset=0x0"
      ReadobjUnwindCode c;
      c.prolog_offset = static_cast<unsigned>(std::strtoul(l.c_str(), nullptr, 16));
      std::istringstream words(l.substr(l.find(':') + 1));
      words >> c.op;
      std::string kv;
      while (words >> kv) {
        if (!kv.empty() && kv.back() == ',') kv.pop_back();
        size_t eq = kv.find('=');
        if (eq != std::string::npos) c.operands[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      cur->codes.push_back(c);
      continue;
    }
    if (in_flags) {
      if (l == "]") in_flags = false;
      continue;
    }
    if (in_chained) {
      if (l == "}") {
        in_chained = false;
      } else if (starts(l, "StartAddress:")) {
        cur->chained->start = paren_hex(l);
      } else if (starts(l, "EndAddress:")) {
        cur->chained->end = paren_hex(l);
      } else if (starts(l, "UnwindInfoAddress:")) {
        cur->chained->unwind_info = paren_hex(l);
      }
      continue;
    }
    const std::string value = l.find(':') == std::string::npos ? std::string() : trim(l.substr(l.find(':') + 1));
    if (starts(l, "StartAddress:")) {
      cur->start = paren_hex(l);
    } else if (starts(l, "EndAddress:")) {
      cur->end = paren_hex(l);
    } else if (starts(l, "UnwindInfoAddress:")) {
      cur->unwind_info = paren_hex(l);
    } else if (starts(l, "Version:")) {
      cur->version = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 0));
    } else if (starts(l, "Flags [")) {
      cur->flags = static_cast<unsigned>(paren_hex(l));
      in_flags = l.back() != ']';
    } else if (starts(l, "PrologSize:")) {
      cur->prolog_size = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 0));
    } else if (starts(l, "FrameRegister:")) {
      if (value != "-") cur->frame_register = static_cast<unsigned>(paren_hex(l));
    } else if (starts(l, "FrameOffset:")) {
      if (value != "-") cur->frame_offset = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 0));
    } else if (starts(l, "UnwindCodeCount:")) {
      cur->code_count = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 0));
    } else if (starts(l, "UnwindCodes [")) {
      in_codes = true;
    } else if (starts(l, "Handler:")) {
      cur->handler = paren_hex(l);
    } else if (l == "Chained {") {
      cur->chained.emplace();
      in_chained = true;
    }
  }
  return out;
}

}  // namespace stackprov::test
