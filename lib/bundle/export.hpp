// SPDX-License-Identifier: Apache-2.0
// Bundle export: a module's records as symbol_index.json (doc/symbol-index.md) or Elastic's symbfile (lib/bundle/symbfile.proto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "core/error.hpp"

namespace stackprov::bundle {

struct SymbolIndexOptions {
  /// The bundle's identity, `sha256:<hex>`, written as "bundle" (the caller computes it:
  /// content addressing belongs to the evidence layer). Empty: the key is omitted.
  std::string bundle_id;
  /// Export this module only (index into BundleReader::modules()); unset: every module.
  std::optional<size_t> module;
};

/// symbol_index.json (schema in doc/symbol-index.md): per module its identity, name,
/// file/debug sha256, every range record (depth, start, length, function, file:line:column,
/// call site) in the reader's order (depth, then start), and every return pad with its inline
/// chain in address order. Deterministic: fixed key order, one record per line, addresses as
/// "0x..." strings, strings escaped per RFC 8259 (invalid UTF-8 bytes become U+FFFD).
Result<std::string> export_symbol_index_json(const BundleReader& reader, const SymbolIndexOptions& opts);

/// The symbfile bytes of `module`: the magic "symbfile", then length- and type-prefixed
/// protobuf messages: Header, one StringTableV1 (the module's strings, sorted), one RangeV1
/// per range record (reader order; VA as setElfVA for the first record, then deltaElfVA from
/// the previous record; the record's line as a one-row LineTable at offset 0), then one
/// ReturnPadV1 per return pad (address order; VA = pad address - 1, as symbfile defines it).
/// Columns have no symbfile field and are not exported. Deterministic.
Result<std::vector<uint8_t>> export_symbfile(const BundleReader& reader, size_t module);

/// symbfile message types (MessageType in symbfile.proto). Values are on disk.
enum class SymbfileType : uint32_t { kHeader = 1, kRangeV1 = 2, kReturnPadV1 = 3, kStringTableV1 = 4 };

}  // namespace stackprov::bundle
