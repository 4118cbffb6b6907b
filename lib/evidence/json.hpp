// SPDX-License-Identifier: Apache-2.0
// JSON for evidence formats: bounded parsing (nlohmann), canonical output (RFC 8785 subset), typed field access.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "evidence/encoding.hpp"

namespace stackprov::evidence {

using Json = nlohmann::json;

inline constexpr int kMaxJsonDepth = 64;

/// Parses JSON after checking size and nesting depth; errors are SPROV_ERR_JSON naming `what`.
Result<Json> parse_json(std::string_view text, const char* what);

/// Canonical JSON: keys sorted, no whitespace, UTF-8 kept (RFC 8785 for documents
/// without floating-point numbers, which is all that our formats use).
std::string canonical_json(const Json& j);

/// Field access that names the JSON path in its error.
Result<const Json*> get_field(const Json& obj, const char* key, const char* path, Json::value_t type);
Result<std::string> get_string(const Json& obj, const char* key, const char* path);
/// int64 carried as a decimal string (protobuf JSON) or as a number.
Result<int64_t> get_int64(const Json& obj, const char* key, const char* path);
Result<Bytes> get_base64(const Json& obj, const char* key, const char* path);

}  // namespace stackprov::evidence
