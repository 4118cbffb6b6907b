// SPDX-License-Identifier: Apache-2.0
// Peer-output parser: `llvm-pdbutil-14 dump --summary --modules --symbols --publics` (LLVM 14's
// DumpOutputStyle/MinimalSymbolDumper text) -> GUID, age, modules, procedure and public records.
#pragma once

#include <cstdint>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace stackprov::test {

struct PdbutilProc {
  uint32_t module = 0;
  uint32_t offset = 0;  ///< record offset in the module stream
  std::string kind;     ///< "S_GPROC32", "S_LPROC32", "S_GPROC32_ID", "S_LPROC32_ID"
  std::string name;
  uint32_t end = 0, segment = 0, code_offset = 0, code_size = 0;
};

struct PdbutilPublic {
  std::string name;
  bool function = false;
  uint32_t segment = 0, offset = 0;
};

struct PdbutilModule {
  std::string name, obj;
  uint32_t stream = 0xffff;
};

struct PdbutilDump {
  std::string key;  ///< GUID's 32 hex digits (uppercase) then the age in uppercase hex
  uint32_t age = 0;
  std::vector<PdbutilModule> modules;
  std::vector<PdbutilProc> procs;
  std::vector<PdbutilPublic> publics;
};

/// Parses the dump; sections are told apart by their titles ("Summary", "Modules", "Public
/// Symbols", "Symbols"). Lines pdbutil prints as "addr = 0001:0096" are section:offset in decimal.
inline PdbutilDump parse_pdbutil_dump(const std::string& text) {
  PdbutilDump d;
  std::istringstream in(text);
  std::string line, section;
  const std::regex title(R"(^\s*(Summary|Modules|Public Symbols|Symbols)\s*$)");
  const std::regex age(R"(^\s*Age: (\d+)\s*$)");
  const std::regex guid(R"(^\s*GUID: \{([0-9A-F]{8})-([0-9A-F]{4})-([0-9A-F]{4})-([0-9A-F]{4})-([0-9A-F]{12})\}\s*$)");
  const std::regex mod(R"(^\s*Mod (\d{4}) \| `(.*)`:\s*$)");
  const std::regex obj(R"(^\s*Obj: `(.*)`:\s*$)");
  const std::regex stream(R"(^\s*debug stream: (\d+), # files)");
  const std::regex rec(R"(^\s*(\d+) \| (S_[A-Z0-9_]+) \[size = \d+\](?: `(.*)`)?\s*$)");
  const std::regex proc_fields(R"(parent = \d+, end = (\d+), addr = (\d+):(\d+), code size = (\d+))");
  const std::regex pub_fields(R"(flags = (.*), addr = (\d+):(\d+))");
  std::string guid_hex;
  uint32_t cur_mod = 0;
  enum { kNone, kProc, kPub } pending = kNone;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, title)) {
      section = m[1];
      pending = kNone;
      continue;
    }
    if (section == "Summary") {
      if (std::regex_match(line, m, age)) d.age = static_cast<uint32_t>(std::stoul(m[1]));
      if (std::regex_match(line, m, guid)) guid_hex = std::string(m[1]) + std::string(m[2]) + std::string(m[3]) +
                                                       std::string(m[4]) + std::string(m[5]);
    } else if (section == "Modules") {
      if (std::regex_match(line, m, mod)) d.modules.push_back({m[2], "", 0xffff});
      else if (!d.modules.empty() && std::regex_match(line, m, obj)) d.modules.back().obj = m[1];
      else if (!d.modules.empty() && std::regex_search(line, m, stream))
        d.modules.back().stream = static_cast<uint32_t>(std::stoul(m[1]));
    } else if (section == "Symbols") {
      if (std::regex_match(line, m, mod)) {
        cur_mod = static_cast<uint32_t>(std::stoul(m[1]));
        pending = kNone;
      } else if (std::regex_match(line, m, rec)) {
        const std::string kind = m[2];
        pending = kNone;
        if (kind == "S_GPROC32" || kind == "S_LPROC32" || kind == "S_GPROC32_ID" || kind == "S_LPROC32_ID") {
          PdbutilProc p;
          p.module = cur_mod;
          p.offset = static_cast<uint32_t>(std::stoul(m[1]));
          p.kind = kind;
          p.name = m[3];
          d.procs.push_back(p);
          pending = kProc;
        }
      } else if (pending == kProc && std::regex_search(line, m, proc_fields)) {
        PdbutilProc& p = d.procs.back();
        p.end = static_cast<uint32_t>(std::stoul(m[1]));
        p.segment = static_cast<uint32_t>(std::stoul(m[2]));
        p.code_offset = static_cast<uint32_t>(std::stoul(m[3]));
        p.code_size = static_cast<uint32_t>(std::stoul(m[4]));
        pending = kNone;
      }
    } else if (section == "Public Symbols") {
      if (std::regex_match(line, m, rec) && m[2] == "S_PUB32") {
        d.publics.push_back({m[3], false, 0, 0});
        pending = kPub;
      } else if (pending == kPub && std::regex_search(line, m, pub_fields)) {
        PdbutilPublic& p = d.publics.back();
        p.function = std::string(m[1]).find("function") != std::string::npos;
        p.segment = static_cast<uint32_t>(std::stoul(m[2]));
        p.offset = static_cast<uint32_t>(std::stoul(m[3]));
        pending = kNone;
      }
    }
  }
  if (!guid_hex.empty()) {
    std::ostringstream k;
    k << guid_hex << std::uppercase << std::hex << d.age;
    d.key = k.str();
  }
  return d;
}

}  // namespace stackprov::test
