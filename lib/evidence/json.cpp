// SPDX-License-Identifier: Apache-2.0
// Bounded JSON parsing and typed field access with errors that name the JSON path.
#include "evidence/json.hpp"

namespace stackprov::evidence {

Result<Json> parse_json(std::string_view text, const char* what) {
  if (text.size() > kMaxDocumentBytes)
    return make_error(SPROV_ERR_LIMIT, "%s: %zu bytes exceed the %zu-byte limit", what, text.size(),
                      kMaxDocumentBytes);
  // Bound the nesting depth before handing the text to the recursive parser.
  int depth = 0;
  bool in_str = false, esc = false;
  for (char c : text) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        return make_error(SPROV_ERR_LIMIT, "%s: JSON nesting deeper than %d", what, kMaxJsonDepth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(SPROV_ERR_JSON, "%s: not valid JSON", what);
  return j;
}

std::string canonical_json(const Json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::strict);
}

namespace {
const char* type_name(Json::value_t t) {
  switch (t) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    default: return "a value";
  }
}
}  // namespace

Result<const Json*> get_field(const Json& obj, const char* key, const char* path, Json::value_t type) {
  if (!obj.is_object()) return make_error(SPROV_ERR_JSON, "%s is not an object", path);
  auto it = obj.find(key);
  if (it == obj.end()) return make_error(SPROV_ERR_JSON, "%s.%s is missing", path, key);
  bool ok = it->type() == type ||
            (type == Json::value_t::number_integer && it->type() == Json::value_t::number_unsigned);
  if (!ok) return make_error(SPROV_ERR_JSON, "%s.%s is not %s", path, key, type_name(type));
  return &*it;
}

Result<std::string> get_string(const Json& obj, const char* key, const char* path) {
  auto f = get_field(obj, key, path, Json::value_t::string);
  if (!f) return f.error();
  return f.value()->get<std::string>();
}

Result<int64_t> get_int64(const Json& obj, const char* key, const char* path) {
  if (!obj.is_object()) return make_error(SPROV_ERR_JSON, "%s is not an object", path);
  auto it = obj.find(key);
  if (it == obj.end()) return make_error(SPROV_ERR_JSON, "%s.%s is missing", path, key);
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    std::string s = it->get<std::string>();
    bool neg = !s.empty() && s[0] == '-';
    auto v = parse_u64(neg ? std::string_view(s).substr(1) : std::string_view(s), key);
    if (!v || v.value() > static_cast<uint64_t>(INT64_MAX))
      return make_error(SPROV_ERR_JSON, "%s.%s = '%s' is not an int64", path, key, s.substr(0, 32).c_str());
    return neg ? -static_cast<int64_t>(v.value()) : static_cast<int64_t>(v.value());
  }
  return make_error(SPROV_ERR_JSON, "%s.%s is not an integer", path, key);
}

Result<Bytes> get_base64(const Json& obj, const char* key, const char* path) {
  auto s = get_string(obj, key, path);
  if (!s) return s.error();
  auto b = base64_decode(s.value(), B64Alphabet::kStandard, key);
  if (!b) return make_error(SPROV_ERR_BASE64, "%s.%s: %s", path, key, b.error().message.c_str());
  return b;
}

}  // namespace stackprov::evidence
