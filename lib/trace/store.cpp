// SPDX-License-Identifier: Apache-2.0
// Store URLs (sqlite:PATH, postgresql://...), the default store location, and open_store.
#include "trace/store.hpp"

#include <cstdlib>

namespace stackprov::trace {

static Error bad_url(std::string_view url, const char* why) {
  std::string v(url.substr(0, 300));
  return make_error(SPROV_ERR_INVALID_ARG, "store URL '%s': %s", v.c_str(), why);
}

Result<StoreUrl> parse_store_url(std::string_view url) {
  if (url.empty()) return bad_url(url, "empty (expected sqlite:PATH or postgresql://...)");
  for (char c : url)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad_url(url, "contains a control character");
  StoreUrl u;
  if (url.rfind("sqlite:", 0) == 0) {
    u.kind = StoreKind::kSqlite;
    u.path = std::string(url.substr(7));
    if (u.path.rfind("//", 0) == 0) return bad_url(url, "use sqlite:PATH (sqlite:/abs/file.db), not sqlite://");
    if (u.path.empty()) return bad_url(url, "sqlite: needs a file path");
    return u;
  }
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
    u.kind = StoreKind::kPostgres;
    u.conninfo = std::string(url);
    return u;
  }
  return bad_url(url, "unknown scheme (expected sqlite:PATH or postgresql://...)");
}

Result<std::string> default_store_url() {
  // $STACKPROV_STORE is shared with the bundle store: a URL there is ours, a directory is theirs.
  const char* env = getenv("STACKPROV_STORE");
  if (env && *env) {
    const std::string_view v(env);
    if (v.substr(0, 7) == "sqlite:" || v.find("://") != std::string_view::npos) return std::string(env);
  }
  std::string base;
  const char* xdg = getenv("XDG_DATA_HOME");
  if (xdg && *xdg == '/') {
    base = xdg;
  } else {
    const char* home = getenv("HOME");
    if (!home || *home != '/')
      return make_error(SPROV_ERR_INVALID_ARG,
                        "no store given and neither XDG_DATA_HOME nor HOME is an absolute path");
    base = std::string(home) + "/.local/share";
  }
  return "sqlite:" + base + "/stackprov/traces.db";
}

Result<std::unique_ptr<Store>> open_store(std::string_view url) {
  auto u = parse_store_url(url);
  if (!u) return u.error();
  if (u->kind == StoreKind::kSqlite) return open_sqlite_store(u->path);
  return open_postgres_store(u->conninfo);
}

}  // namespace stackprov::trace

// ---- shared row helpers (store_rows.hpp)
#include "evidence/json.hpp"
#include "trace/store_rows.hpp"

namespace stackprov::trace::detail {

std::string inline_chain_json(const std::vector<InlineFrame>& chain) {
  evidence::Json a = evidence::Json::array();
  for (const InlineFrame& in : chain)
    a.push_back({{"function", in.function}, {"file", in.file}, {"line", in.line}, {"column", in.column}});
  return evidence::canonical_json(a);
}

Result<std::vector<InlineFrame>> parse_inline_chain(std::string_view json) {
  std::vector<InlineFrame> out;
  if (json.empty()) return out;
  auto j = evidence::parse_json(json, "frames.inline_chain");
  if (!j) return j.error();
  if (!j->is_array() || j->size() > kMaxInlineDepth)
    return make_error(SPROV_ERR_BAD_FORMAT, "frames.inline_chain: not an array of at most %zu entries",
                      kMaxInlineDepth);
  for (const auto& e : *j) {
    if (!e.is_object() || !e.contains("function") || !e["function"].is_string() || !e.contains("file") ||
        !e["file"].is_string() || !e.contains("line") || !e["line"].is_number_unsigned() ||
        !e.contains("column") || !e["column"].is_number_unsigned() || e["line"].get<uint64_t>() > UINT32_MAX ||
        e["column"].get<uint64_t>() > UINT32_MAX)
      return make_error(SPROV_ERR_BAD_FORMAT, "frames.inline_chain: malformed entry");
    out.push_back({e["function"].get<std::string>(), e["file"].get<std::string>(),
                   static_cast<uint32_t>(e["line"].get<uint64_t>()),
                   static_cast<uint32_t>(e["column"].get<uint64_t>())});
  }
  return out;
}

Status place_frame(Trace& t, uint64_t thread_index, Frame f) {
  if (thread_index >= kMaxThreads)
    return make_error(SPROV_ERR_BAD_FORMAT, "trace %s: frame with thread_index %llu out of range",
                      t.id.c_str(), static_cast<unsigned long long>(thread_index));
  while (t.threads.size() <= thread_index) t.threads.emplace_back();
  t.threads[thread_index].frames.push_back(std::move(f));
  return {};
}

}  // namespace stackprov::trace::detail
