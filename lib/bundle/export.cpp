// SPDX-License-Identifier: Apache-2.0
// Bundle export: symbol_index.json and symbfile (hand-encoded protobuf), from the BundleReader's public API only.
#include "bundle/export.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string_view>
#include <utility>

#include "core/leb128.hpp"

namespace stackprov::bundle {

namespace {

void append_hex(std::string& o, const uint8_t* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    o += kDigits[p[i] >> 4];
    o += kDigits[p[i] & 15];
  }
}

void append_addr(std::string& o, uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "\"0x%" PRIx64 "\"", v);
  o += b;
}

void append_uint(std::string& o, uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  o += b;
}

/// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 when the bytes there are not one.
size_t utf8_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; k++) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

/// A JSON string (RFC 8259): ", \ and controls escaped, valid UTF-8 kept, invalid bytes -> U+FFFD.
void append_json_str(std::string& o, std::string_view s) {
  o += '"';
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t n = utf8_len(s, i);
    if (n == 0) {
      o += "\\ufffd";
      i++;
      continue;
    }
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(c));
      o += b;
    } else {
      o.append(s.substr(i, n));
    }
    i += n;
  }
  o += '"';
}

void append_frame_pos(std::string& o, std::string_view file, uint32_t line, uint32_t column) {
  o += "\"file\":";
  append_json_str(o, file);
  o += ",\"line\":";
  append_uint(o, line);
  o += ",\"column\":";
  append_uint(o, column);
}

Status append_module_json(std::string& o, const BundleReader& reader, size_t mi) {
  const ModuleView& m = reader.modules()[mi];
  auto ranges = reader.ranges(mi);
  if (!ranges) return std::move(ranges).error();
  auto pads = reader.return_pads(mi);
  if (!pads) return std::move(pads).error();
  o += "{\"id_kind\":\"";
  o += id_kind_name(m.id_kind);
  o += "\",\"id\":\"";
  append_hex(o, m.id.data(), m.id.size());
  o += "\",\"name\":";
  append_json_str(o, m.name);
  o += ",\"sha256_file\":\"";
  append_hex(o, m.sha256_file.data(), 32);
  o += "\",\"sha256_debug\":\"";
  append_hex(o, m.sha256_debug.data(), 32);
  o += "\",\n \"ranges\":[";
  const char* sep = "\n  ";
  for (const RangeRecord& r : ranges.value()) {
    o += sep;
    sep = ",\n  ";
    o += "{\"start\":";
    append_addr(o, r.start);
    o += ",\"length\":";
    append_uint(o, r.length);
    o += ",\"depth\":";
    append_uint(o, r.depth);
    o += ",\"function\":";
    append_json_str(o, r.function);
    o += ',';
    append_frame_pos(o, r.file, r.line, r.column);
    if (r.depth > 0) {
      o += ",\"call_file\":";
      append_json_str(o, r.call_file);
      o += ",\"call_line\":";
      append_uint(o, r.call_line);
      o += ",\"call_column\":";
      append_uint(o, r.call_column);
    }
    if (r.from_symtab) o += ",\"symbol_table\":true";
    o += '}';
  }
  o += "],\n \"return_pads\":[";
  sep = "\n  ";
  for (const ReturnPadRecord& p : pads.value()) {
    o += sep;
    sep = ",\n  ";
    o += "{\"addr\":";
    append_addr(o, p.addr);
    o += ",\"frames\":[";
    const char* fsep = "";
    for (const FrameRecord& f : p.frames) {
      o += fsep;
      fsep = ",";
      o += "{\"function\":";
      append_json_str(o, f.function);
      o += ',';
      append_frame_pos(o, f.file, f.line, f.column);
      o += '}';
    }
    o += "]}";
  }
  o += "]}";
  return {};
}

// ---- protobuf wire format (https://protobuf.dev/programming-guides/encoding/), by hand.
enum WireType : uint32_t { kVarint = 0, kLen = 2 };

void put_varint(std::vector<uint8_t>& o, uint64_t v) { append_uleb128(o, v); }  // varints are ULEB128
void put_tag(std::vector<uint8_t>& o, uint32_t field, WireType wt) { put_varint(o, (uint64_t{field} << 3) | wt); }
void put_uint_field(std::vector<uint8_t>& o, uint32_t field, uint64_t v) {
  put_tag(o, field, kVarint);
  put_varint(o, v);
}
void put_sint_field(std::vector<uint8_t>& o, uint32_t field, int64_t v) {
  put_tag(o, field, kVarint);
  put_varint(o, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));  // zigzag
}
void put_bytes_field(std::vector<uint8_t>& o, uint32_t field, const void* p, size_t n) {
  put_tag(o, field, kLen);
  put_varint(o, n);
  const auto* b = static_cast<const uint8_t*>(p);
  o.insert(o.end(), b, b + n);
}
/// A packed repeated uint32 field (proto3's default encoding for repeated scalars).
void put_packed(std::vector<uint8_t>& o, uint32_t field, const std::vector<uint32_t>& vs) {
  if (vs.empty()) return;
  std::vector<uint8_t> body;
  for (uint32_t v : vs) put_varint(body, v);
  put_bytes_field(o, field, body.data(), body.size());
}
/// One symbfile message: varint length, varint type, then the protobuf bytes.
void put_message(std::vector<uint8_t>& out, SymbfileType type, const std::vector<uint8_t>& msg) {
  put_varint(out, msg.size());
  put_varint(out, static_cast<uint32_t>(type));
  out.insert(out.end(), msg.begin(), msg.end());
}

// Field numbers of symbfile.proto.
namespace range_f {
constexpr uint32_t kDeltaElfVA = 1, kLength = 2, kCallLine = 5, kDepth = 7, kLineTable = 8, kFuncRef = 9,
                   kFileRef = 10, kCallFileRef = 11, kSetElfVA = 12;
}
namespace line_table_f {
constexpr uint32_t kOffset = 1, kLineNumber = 2;
}
namespace pad_f {
constexpr uint32_t kDeltaElfVA = 1, kFunc = 2, kFile = 3, kLine = 4, kSetElfVA = 5;
}
namespace string_table_f {
constexpr uint32_t kStrings = 1;
}

}  // namespace

Result<std::string> export_symbol_index_json(const BundleReader& reader, const SymbolIndexOptions& opts) {
  const size_t n = reader.modules().size();
  if (opts.module && *opts.module >= n)
    return make_error(SPROV_ERR_BUNDLE, "bundle export: module %zu out of %zu", *opts.module, n);
  std::string o = "{\"format\":\"stackprov-symbol-index\",\"version\":1";
  if (!opts.bundle_id.empty()) {
    o += ",\"bundle\":";
    append_json_str(o, opts.bundle_id);
  }
  o += ",\"modules\":[\n";
  const char* sep = "";
  for (size_t mi = 0; mi < n; mi++) {
    if (opts.module && *opts.module != mi) continue;
    o += sep;
    sep = ",\n";
    if (auto s = append_module_json(o, reader, mi); !s) return s.error();
  }
  o += "\n]}\n";
  return o;
}

Result<std::vector<uint8_t>> export_symbfile(const BundleReader& reader, size_t module) {
  if (module >= reader.modules().size())
    return make_error(SPROV_ERR_BUNDLE, "bundle export: module %zu out of %zu", module, reader.modules().size());
  auto ranges = reader.ranges(module);
  if (!ranges) return std::move(ranges).error();
  auto pads = reader.return_pads(module);
  if (!pads) return std::move(pads).error();

  // The string table: every string the records use, sorted (deterministic), refs by position.
  std::map<std::string_view, uint32_t> refs;
  for (const RangeRecord& r : ranges.value()) {
    refs.emplace(r.function, 0);
    refs.emplace(r.file, 0);
    if (r.depth > 0) refs.emplace(r.call_file, 0);
  }
  for (const ReturnPadRecord& p : pads.value())
    for (const FrameRecord& f : p.frames) {
      refs.emplace(f.function, 0);
      refs.emplace(f.file, 0);
    }
  if (refs.size() > UINT32_MAX) return make_error(SPROV_ERR_BUNDLE, "bundle export: %zu strings", refs.size());

  std::vector<uint8_t> out = {'s', 'y', 'm', 'b', 'f', 'i', 'l', 'e'};
  put_message(out, SymbfileType::kHeader, {});
  std::vector<uint8_t> msg;
  uint32_t next = 0;
  for (auto& [s, ref] : refs) {
    ref = next++;
    put_bytes_field(msg, string_table_f::kStrings, s.data(), s.size());
  }
  put_message(out, SymbfileType::kStringTableV1, msg);

  // ELF VA of each record: absolute for the first, then the difference to the previous record's.
  bool first = true;
  uint64_t prev_va = 0;
  auto put_va = [&](uint32_t set_field, uint32_t delta_field, uint64_t va) {
    if (first) put_uint_field(msg, set_field, va);
    else put_sint_field(msg, delta_field, static_cast<int64_t>(va - prev_va));
    first = false;
    prev_va = va;
  };
  for (const RangeRecord& r : ranges.value()) {
    msg.clear();
    put_va(range_f::kSetElfVA, range_f::kDeltaElfVA, r.start);
    if (r.length != 0) put_uint_field(msg, range_f::kLength, r.length);
    put_uint_field(msg, range_f::kFuncRef, refs.at(r.function));
    put_uint_field(msg, range_f::kFileRef, refs.at(r.file));
    if (r.depth > 0) {
      if (r.call_line != 0) put_uint_field(msg, range_f::kCallLine, r.call_line);
      put_uint_field(msg, range_f::kCallFileRef, refs.at(r.call_file));
      put_uint_field(msg, range_f::kDepth, r.depth);
    }
    std::vector<uint8_t> table;
    put_packed(table, line_table_f::kOffset, {0});
    put_packed(table, line_table_f::kLineNumber, {r.line});
    put_bytes_field(msg, range_f::kLineTable, table.data(), table.size());
    put_message(out, SymbfileType::kRangeV1, msg);
  }
  for (const ReturnPadRecord& p : pads.value()) {
    if (p.addr == 0) return make_error(SPROV_ERR_BUNDLE, "bundle export: return pad at address 0");
    msg.clear();
    put_va(pad_f::kSetElfVA, pad_f::kDeltaElfVA, p.addr - 1);
    std::vector<uint32_t> funcs, files, lines;
    for (const FrameRecord& f : p.frames) {
      funcs.push_back(refs.at(f.function));
      files.push_back(refs.at(f.file));
      lines.push_back(f.line);
    }
    put_packed(msg, pad_f::kFunc, funcs);
    put_packed(msg, pad_f::kFile, files);
    put_packed(msg, pad_f::kLine, lines);
    put_message(out, SymbfileType::kReturnPadV1, msg);
  }
  return out;
}

}  // namespace stackprov::bundle
