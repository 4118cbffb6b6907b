// SPDX-License-Identifier: Apache-2.0
// CLI helpers shared by the subcommands (args.hpp): option parsing and a JSON reader.
#include "args.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace stackprov_cli {

namespace {

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}
  bool parse(Json* out) {
    if (!value(out, 0)) return false;
    ws();
    return p_ == end_;
  }

 private:
  const char* p_;
  const char* end_;

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool lit(const char* w) {
    const size_t n = strlen(w);
    if (static_cast<size_t>(end_ - p_) < n || memcmp(p_, w, n) != 0) return false;
    p_ += n;
    return true;
  }
  static void utf8(uint32_t c, std::string* o) {
    if (c < 0x80) {
      o->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      o->push_back(static_cast<char>(0xc0 | (c >> 6)));
      o->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
      o->push_back(static_cast<char>(0xe0 | (c >> 12)));
      o->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      o->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else {
      o->push_back(static_cast<char>(0xf0 | (c >> 18)));
      o->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
      o->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      o->push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  bool hex4(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      const char c = *p_;
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }
  bool string(std::string* o) {
    if (p_ >= end_ || *p_ != '"') return false;
    ++p_;
    while (p_ < end_ && *p_ != '"') {
      if (*p_ != '\\') {
        o->push_back(*p_++);
        continue;
      }
      if (++p_ >= end_) return false;
      const char e = *p_++;
      switch (e) {
        case '"': o->push_back('"'); break;
        case '\\': o->push_back('\\'); break;
        case '/': o->push_back('/'); break;
        case 'b': o->push_back('\b'); break;
        case 'f': o->push_back('\f'); break;
        case 'n': o->push_back('\n'); break;
        case 'r': o->push_back('\r'); break;
        case 't': o->push_back('\t'); break;
        case 'u': {
          uint32_t c = 0;
          if (!hex4(&c)) return false;
          if (c >= 0xd800 && c < 0xdc00 && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            p_ += 2;
            uint32_t lo = 0;
            if (!hex4(&lo) || lo < 0xdc00 || lo >= 0xe000) return false;
            c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
          }
          utf8(c, o);
          break;
        }
        default: return false;
      }
    }
    if (p_ >= end_) return false;
    ++p_;
    return true;
  }
  bool value(Json* v, int depth) {
    if (depth > 64) return false;
    ws();
    if (p_ >= end_) return false;
    const char c = *p_;
    if (c == '{') {
      ++p_;
      v->kind = Json::kObject;
      ws();
      if (p_ < end_ && *p_ == '}') return ++p_, true;
      for (;;) {
        ws();
        std::pair<std::string, Json> m;
        if (!string(&m.first)) return false;
        ws();
        if (p_ >= end_ || *p_++ != ':') return false;
        if (!value(&m.second, depth + 1)) return false;
        v->members.push_back(std::move(m));
        ws();
        if (p_ < end_ && *p_ == ',') {
          ++p_;
          continue;
        }
        return p_ < end_ && *p_++ == '}';
      }
    }
    if (c == '[') {
      ++p_;
      v->kind = Json::kArray;
      ws();
      if (p_ < end_ && *p_ == ']') return ++p_, true;
      for (;;) {
        Json item;
        if (!value(&item, depth + 1)) return false;
        v->items.push_back(std::move(item));
        ws();
        if (p_ < end_ && *p_ == ',') {
          ++p_;
          continue;
        }
        return p_ < end_ && *p_++ == ']';
      }
    }
    if (c == '"') {
      v->kind = Json::kString;
      return string(&v->text);
    }
    if (lit("true")) return v->kind = Json::kBool, v->boolean = true, true;
    if (lit("false")) return v->kind = Json::kBool, true;
    if (lit("null")) return v->kind = Json::kNull, true;
    const char* s = p_;
    while (p_ < end_ && (strchr("+-.eE", *p_) != nullptr || (*p_ >= '0' && *p_ <= '9'))) ++p_;
    if (p_ == s) return false;
    v->kind = Json::kNumber;
    v->text.assign(s, p_);
    return true;
  }
};

}  // namespace

bool parse_json(std::string_view text, Json* out) { return JsonParser(text).parse(out); }

Args::Args(int argc, char** argv, const std::vector<std::string>& with_value, const std::vector<std::string>& flags,
           const Aliases& aliases) {
  auto known = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  auto canonical = [&](const std::string& n) {
    for (const auto& [alias, name] : aliases)
      if (alias == n) return name;
    return n;
  };
  auto note = [&](const std::string& e) {
    if (error.empty()) error = e;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
      continue;
    }
    if (a == "--") {
      dashdash = static_cast<long>(pos.size());
      for (++i; i < argc; ++i) pos.emplace_back(argv[i]);
      break;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string typed = a.substr(2), val;
      bool has_eq = false;
      if (auto eq = typed.find('='); eq != std::string::npos) {
        val = typed.substr(eq + 1);
        typed = typed.substr(0, eq);
        has_eq = true;
      }
      const std::string name = typed.size() > 1 ? canonical(typed) : typed;
      const bool takes = known(with_value, name), flag = known(flags, name);
      if (!takes && !flag) {
        note("unknown option '--" + typed + "'");
        continue;
      }
      if (takes && !has_eq) {
        if (i + 1 >= argc) {
          note("option '--" + typed + "' needs a value");
          continue;
        }
        val = argv[++i];
      }
      if (flag && has_eq) note("option '--" + typed + "' takes no value");
      opts.emplace_back(name, val);
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {  // a short option: -o VALUE, -oVALUE, -f
      const std::string typed = a.substr(1, 1);
      std::string name;
      for (const auto& [alias, n] : aliases)
        if (alias == typed) name = n;
      const bool takes = !name.empty() && known(with_value, name), flag = !name.empty() && known(flags, name);
      if (!takes && !flag) {
        note("unknown option '-" + typed + "'");
        continue;
      }
      if (flag) {
        if (a.size() > 2) note("option '-" + typed + "' takes no value (in '" + a + "')");
        opts.emplace_back(name, "");
        continue;
      }
      if (a.size() > 2) {
        opts.emplace_back(name, a.substr(2));
      } else if (i + 1 >= argc) {
        note("option '-" + typed + "' needs a value");
      } else {
        opts.emplace_back(name, argv[++i]);
      }
      continue;
    }
    pos.push_back(a);
  }
}

const char* Args::get(const std::string& n) const {
  for (auto it = opts.rbegin(); it != opts.rend(); ++it)
    if (it->first == n) return it->second.c_str();
  return nullptr;
}

std::vector<std::string> Args::all(const std::string& n) const {
  std::vector<std::string> out;
  for (const auto& o : opts)
    if (o.first == n) out.push_back(o.second);
  return out;
}

size_t Args::count(const std::string& n) const {
  return static_cast<size_t>(std::count_if(opts.begin(), opts.end(), [&](const auto& o) { return o.first == n; }));
}

std::string Args::repeated(const std::vector<std::string>& names) const {
  for (const auto& n : names)
    if (count(n) > 1) return n;
  return "";
}

int usage_error(const char* cmd, const std::string& msg) {
  fprintf(stderr, "stackprov %s: %s (see 'stackprov %s --help')\n", cmd, msg.c_str(), cmd);
  return 2;
}

std::string directory_given(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "'" + path + "' is a directory";
  return "";
}

std::string store_not_found(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int e = errno;
    return "bundle store '" + dir + "' " + (e == ENOENT ? std::string("does not exist") : std::string("cannot be read: ") + strerror(e));
  }
  if (!S_ISDIR(st.st_mode)) return "bundle store '" + dir + "' is not a directory";
  return "";
}

std::string write_file_atomic(const std::string& path, std::string_view data) {
  if (std::string dir = directory_given(path); !dir.empty()) return dir + ", not a file";
  if (sprov_file_write(path.c_str(), data.data(), data.size(), 0644) != 0) return sprov_last_error_message();
  return "";
}

bool is_sha256_digest(const std::string& s) {
  if (s.size() != 71 || s.compare(0, 7, "sha256:") != 0) return false;
  return std::all_of(s.begin() + 7, s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool parse_uint(const char* s, uint64_t* out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (const char* p = s; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    if (v > (UINT64_MAX - static_cast<uint64_t>(*p - '0')) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  *out = v;
  return true;
}

namespace {

/// A key or identity converted by the C ABI (sprov_id_from_key / sprov_id_key); "" when refused.
template <class F>
std::string converted(F&& call) {
  char* out = nullptr;
  size_t n = 0;
  if (call(&out, &n) != 0) return {};
  std::string s(out, n);
  sprov_free(out);
  return s;
}

}  // namespace

std::string pdb_key_id_hex(std::string_view key) {
  const std::string k(key);
  return converted([&](char** out, size_t* n) { return sprov_id_from_key(SPROV_BUNDLE_ID_PDB_GUID_AGE, k.c_str(), out, n); });
}

std::string code_id_key_id_hex(std::string_view key) {
  const std::string k(key);
  return converted([&](char** out, size_t* n) { return sprov_id_from_key(SPROV_BUNDLE_ID_PE_CODE_ID, k.c_str(), out, n); });
}

std::string code_id_hex_key(std::string_view id) {
  if (id.size() != 16) return {};
  const std::string h(id);
  return converted([&](char** out, size_t* n) { return sprov_id_key(SPROV_BUNDLE_ID_PE_CODE_ID, h.c_str(), out, n); });
}

std::string pdb_id_hex_key(std::string_view id) {
  if (id.size() != 40) return {};
  const std::string h(id);
  return converted([&](char** out, size_t* n) { return sprov_id_key(SPROV_BUNDLE_ID_PDB_GUID_AGE, h.c_str(), out, n); });
}

std::string uuid_id_hex(std::string_view uuid) {
  const std::string u(uuid);
  return converted([&](char** out, size_t* n) { return sprov_id_from_key(SPROV_BUNDLE_ID_MACHO_UUID, u.c_str(), out, n); });
}

}  // namespace stackprov_cli
