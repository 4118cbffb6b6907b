// SPDX-License-Identifier: Apache-2.0
// C ABI shims for symbol bundles (include/stackprov/symbol_bundle.h): build, open, inspect, look up, the store.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bundle/export.hpp"
#include "bundle/format.hpp"
#include "capi/internal.hpp"
#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "macho/macho_object.hpp"
#include "pe/pe_object.hpp"
#include "pipeline/bundle_build.hpp"
#include "symbolize/bundle_store.hpp"

#include "stackprov/symbol_bundle.h"

using namespace stackprov;
using stackprov::capi::check_opts;
using stackprov::capi::fail;
using stackprov::capi::guard;
using stackprov::capi::guard_value;

/// Strings of one module, NUL-terminated, made at open (the C views point here).
struct BundleModuleStrings {
  std::string id_hex, name, sha256_file, sha256_debug;
};

struct sprov_bundle {
  std::vector<uint8_t> owned;  // sprov_bundle_open_buf's copy (the reader points into it)
  std::optional<bundle::BundleReader> reader;
  std::string digest;
  std::vector<BundleModuleStrings> strings;
};

namespace {

Error null_arg(const char* name) { return make_error(SPROV_ERR_INVALID_ARG, "%s is NULL", name); }

int give_string(const std::string& s, char** out, size_t* out_len) {
  if (out == nullptr) return fail(null_arg("out"));
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return fail(make_error(SPROV_ERR_NOMEM, "cannot allocate %zu bytes", s.size() + 1));
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  *out = p;
  if (out_len) *out_len = s.size();
  return 0;
}

int copy_cstr(const std::string& s, char* out, size_t size, const char* what) {
  if (out == nullptr || size <= s.size())
    return fail(make_error(SPROV_ERR_BUFFER_TOO_SMALL, "%s needs %zu bytes, buffer has %zu", what, s.size() + 1,
                           out ? size : 0));
  std::memcpy(out, s.c_str(), s.size() + 1);
  return 0;
}

Result<bundle::IdKind> id_kind_of(int kind) {
  switch (kind) {
    case SPROV_BUNDLE_ID_ELF_BUILD_ID: return bundle::IdKind::kElfBuildId;
    case SPROV_BUNDLE_ID_PDB_GUID_AGE: return bundle::IdKind::kPdbGuidAge;
    case SPROV_BUNDLE_ID_MACHO_UUID: return bundle::IdKind::kMachoUuid;
    case SPROV_BUNDLE_ID_PE_CODE_ID: return bundle::IdKind::kPeCodeId;
    default:
      return make_error(SPROV_ERR_INVALID_ARG,
                        "id kind %d is not 1 (elf-build-id), 2 (pdb-guid-age), 3 (macho-uuid) or 4 (pe-code-id)", kind);
  }
}

Result<evidence::Bytes> id_bytes(const char* id_hex) {
  if (!id_hex) return null_arg("id_hex");
  std::string_view s(id_hex);
  if (s.empty() || s.size() > 2 * bundle::kMaxIdBytes)
    return make_error(SPROV_ERR_INVALID_ARG, "'%.*s' is not a module identity (1..%zu bytes of hex)",
                      static_cast<int>(std::min<size_t>(s.size(), 140)), id_hex, bundle::kMaxIdBytes);
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto b = evidence::hex_decode(lower, "module identity");
  if (!b) return make_error(SPROV_ERR_INVALID_ARG, "'%s' is not a hex module identity: %s", id_hex, b.error().message.c_str());
  return b;
}

/// Wraps an opened reader: digest and the modules' C strings.
int finish_open(std::unique_ptr<sprov_bundle> b, Result<bundle::BundleReader> r, sprov_bundle** out) {
  if (!r) return fail(r.error());
  b->reader.emplace(std::move(r).value());
  b->digest = evidence::digest_string(evidence::sha256(b->reader->data(), b->reader->size()));
  for (const bundle::ModuleView& m : b->reader->modules())
    b->strings.push_back({evidence::hex_encode(m.id.data(), m.id.size()), std::string(m.name),
                          evidence::hex_encode(m.sha256_file.data(), 32), evidence::hex_encode(m.sha256_debug.data(), 32)});
  *out = b.release();
  return 0;
}

int check_module(const sprov_bundle* b, size_t module) {
  if (!b) return fail(null_arg("bundle"));
  if (module >= b->reader->modules().size())
    return fail(make_error(SPROV_ERR_INVALID_ARG, "module index %zu: the bundle %s has %zu module(s)", module,
                           b->digest.c_str(), b->reader->modules().size()));
  return 0;
}

std::string reg_name(uint8_t r, bool x86_64) {
  static const char* const kX86[17] = {"RAX", "RDX", "RCX", "RBX", "RSI", "RDI", "RBP", "RSP", "R8",
                                       "R9",  "R10", "R11", "R12", "R13", "R14", "R15", "RIP"};
  if (x86_64 && r < 17) return kX86[r];
  char b[8];
  snprintf(b, sizeof b, "r%u", static_cast<unsigned>(r));
  return b;
}

std::string signed_off(int64_t v, bool omit_zero) {
  if (v == 0 && omit_zero) return "";
  char b[24];
  snprintf(b, sizeof b, "%+lld", static_cast<long long>(v));
  return b;
}

/// The row in llvm-dwarfdump-14's notation (registers by number, the return address last).
std::string row_text(const bundle::UnwindRowRecord& r, int addr_size, bool x86_64) {
  switch (r.kind) {
    case bundle::UnwindRowRecord::kEndOfStack: return "end-of-stack";
    case bundle::UnwindRowRecord::kFull: return "full";
    case bundle::UnwindRowRecord::kNoInfo: return "none";
    default: break;
  }
  std::string s = "CFA=" + reg_name(r.cfa_reg, x86_64) + signed_off(r.cfa_off, true) + ":";
  std::vector<std::pair<uint8_t, int8_t>> saved;
  for (int i = 0; i < r.nsaved && i < bundle::kMaxSavedRegs; ++i) saved.emplace_back(r.saved_reg[i], r.saved_off[i]);
  std::sort(saved.begin(), saved.end());
  const char* sep = " ";
  for (const auto& [reg, off] : saved) {
    s += sep + reg_name(reg, x86_64) + "=[CFA" + signed_off(int64_t{off} * addr_size, true) + "]";
    sep = ", ";
  }
  if (r.ra_kind == bundle::UnwindRowRecord::kRaAtCfa)
    s += sep + reg_name(r.ra_reg, x86_64) + "=[CFA" + signed_off(int64_t{r.ra_off} * addr_size, true) + "]";
  else if (r.ra_kind == bundle::UnwindRowRecord::kRaSameValue)
    s += sep + reg_name(r.ra_reg, x86_64) + "=same";
  return s;
}

/// sprov_bundle_build's arguments (options already checked by check_opts) converted, and the
/// bundle built (pipeline::build_bundle).
Result<std::vector<uint8_t>> build_from_args(const char* const* paths, size_t count,
                                             const struct sprov_bundle_build_opts* opts) {
  if (count == 0 || !paths) return make_error(SPROV_ERR_INVALID_ARG, "no input files (count %zu)", count);
  if (count > bundle::kMaxModules)
    return make_error(SPROV_ERR_LIMIT, "%zu input files exceed the limit of %zu modules", count, bundle::kMaxModules);
  const char* const* names = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, names, nullptr);
  const char* const* dirs = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, debug_dirs, nullptr);
  const size_t ndirs = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, debug_dir_count, size_t{0});
  const uint32_t flags = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, flags, 0u);
  const sprov_bundle_progress_fn progress = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, progress, nullptr);
  void* pctx = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, progress_ctx, nullptr);
  if (flags & ~uint32_t{SPROV_BUNDLE_INCLUDE_DEBUG})
    return make_error(SPROV_ERR_INVALID_ARG, "sprov_bundle_build_opts.flags 0x%x has unknown bits", flags);
  if (SPROV_OPTS_GET(opts, sprov_bundle_build_opts, reserved, 0u) != 0)
    return make_error(SPROV_ERR_INVALID_ARG, "sprov_bundle_build_opts.reserved is not 0");
  if (ndirs > 0 && !dirs) return null_arg("debug_dirs");
  pipeline::BundleBuildInput in;
  for (size_t i = 0; i < ndirs; ++i) {
    if (!dirs[i]) return null_arg("debug_dirs[i]");
    in.debug_dirs.emplace_back(dirs[i]);
  }
  for (size_t i = 0; i < count; ++i) {
    if (!paths[i]) return null_arg("paths[i]");
    in.paths.emplace_back(paths[i]);
    in.names.emplace_back(names && names[i] ? names[i] : "");
  }
  in.include_debug = flags & SPROV_BUNDLE_INCLUDE_DEBUG;
  if (progress)
    in.progress = [progress, pctx](size_t done, size_t n, uint64_t bytes_done, uint64_t bytes) {
      progress(pctx, done, n, bytes_done, bytes);
    };
  return pipeline::build_bundle(in);
}

/// build_from_args into `v`, its digest copied to `digest` (when not NULL): 0 or the failure's code.
int build_bundle(const char* const* paths, size_t count, const struct sprov_bundle_build_opts* opts,
                 std::vector<uint8_t>* v, char* digest, size_t digest_size) {
  auto bytes = build_from_args(paths, count, opts);
  if (!bytes) return fail(bytes.error());
  *v = std::move(bytes).value();
  if (!digest) return 0;
  return copy_cstr(evidence::digest_string(evidence::sha256(v->data(), v->size())), digest, digest_size, "digest");
}

}  // namespace

extern "C" {

static_assert(SPROV_BUNDLE_ID_ELF_BUILD_ID == static_cast<int>(IdKind::kElfBuildId) &&
              SPROV_BUNDLE_ID_PDB_GUID_AGE == static_cast<int>(IdKind::kPdbGuidAge) &&
              SPROV_BUNDLE_ID_MACHO_UUID == static_cast<int>(IdKind::kMachoUuid) &&
              SPROV_BUNDLE_ID_PE_CODE_ID == static_cast<int>(IdKind::kPeCodeId));

SPROV_API const char* sprov_bundle_id_kind_name(int kind) { return pipeline::bundle_id_kind_name(kind); }

SPROV_API int sprov_bundle_id_kind_parse(const char* name, int* kind) {
  return guard([&] {
    if (!name) return fail(null_arg("name"));
    if (!kind) return fail(null_arg("kind"));
    for (int k = SPROV_BUNDLE_ID_ELF_BUILD_ID; k <= SPROV_BUNDLE_ID_PE_CODE_ID; k++)
      if (std::strcmp(name, pipeline::bundle_id_kind_name(k)) == 0) {
        *kind = k;
        return 0;
      }
    return fail(make_error(SPROV_ERR_INVALID_ARG, "invalid id kind '%.*s' (expected elf-build-id, pdb-guid-age, macho-uuid or pe-code-id)",
                           static_cast<int>(std::min<size_t>(std::strlen(name), 100)), name));
  });
}

SPROV_API int sprov_id_key(int id_kind, const char* id_hex, char** out, size_t* out_len) {
  return guard([&] {
    auto kind = id_kind_of(id_kind);
    if (!kind) return fail(kind.error());
    auto b = id_bytes(id_hex);
    if (!b) return fail(b.error());
    const char* name = pipeline::bundle_id_kind_name(id_kind);
    const ModuleId id = ModuleId::from_bytes(b->data(), b->size(), static_cast<IdKind>(*kind));
    const std::string key = pipeline::module_key(id);
    if (key.empty())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "'%s' is not a %s identity (%zu bytes; expected %d)", id_hex, name,
                             b->size(), *kind == bundle::IdKind::kPdbGuidAge ? 20
                                        : *kind == bundle::IdKind::kPeCodeId ? 8 : 16));
    return give_string(key, out, out_len);
  });
}

SPROV_API int sprov_id_from_key(int id_kind, const char* key, char** out_hex, size_t* out_len) {
  return guard([&] {
    auto kind = id_kind_of(id_kind);
    if (!kind) return fail(kind.error());
    if (!key) return fail(null_arg("key"));
    if (!out_hex) return fail(null_arg("out_hex"));
    const std::string_view k(key);
    Result<ModuleId> id = ModuleId{};
    if (*kind == bundle::IdKind::kPdbGuidAge) {
      id = pe::pdb_id_from_key(k);
    } else if (*kind == bundle::IdKind::kMachoUuid) {
      id = macho::uuid_from_string(k);
    } else if (*kind == bundle::IdKind::kPeCodeId) {
      id = pe::code_id_from_key(k);
    } else {
      id = ModuleId::from_hex(k, IdKind::kElfBuildId);
      if (id->empty() || k.size() % 2 != 0)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "invalid elf-build-id '%.*s' (expected an even number of hex digits, "
                               "2 to %zu)", static_cast<int>(std::min<size_t>(k.size(), 140)), key, 2 * ModuleId::kMax));
    }
    if (!id) return fail(id.error());
    return give_string(id->hex(), out_hex, out_len);
  });
}

SPROV_API int sprov_bundle_build(const char* const* paths, size_t count, const struct sprov_bundle_build_opts* opts,
                                 void** out, size_t* out_len, char* digest, size_t digest_size) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_bundle_build_opts), "sprov_bundle_build_opts")) return rc;
    if (!out) return fail(null_arg("out"));
    std::vector<uint8_t> v;
    if (int rc = build_bundle(paths, count, opts, &v, digest, digest_size)) return rc;
    void* p = std::malloc(v.empty() ? 1 : v.size());
    if (!p) return fail(make_error(SPROV_ERR_NOMEM, "cannot allocate %zu bytes", v.size()));
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    *out = p;
    if (out_len) *out_len = v.size();
    return 0;
  });
}

SPROV_API int sprov_bundle_build_file(const char* const* paths, size_t count, const struct sprov_bundle_build_opts* opts,
                                      const char* out_path, char* digest, size_t digest_size) {
  return guard([&] {
    if (!out_path) return fail(null_arg("out_path"));
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_bundle_build_opts), "sprov_bundle_build_opts")) return rc;
    std::vector<uint8_t> v;
    if (int rc = build_bundle(paths, count, opts, &v, digest, digest_size)) return rc;
    auto st = evidence::write_file_atomic(out_path, std::string_view(reinterpret_cast<const char*>(v.data()), v.size()), 0644);
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_bundle_open_file(const char* path, sprov_bundle** out) {
  return guard([&] {
    if (!path) return fail(null_arg("path"));
    if (!out) return fail(null_arg("out"));
    return finish_open(std::make_unique<sprov_bundle>(), bundle::BundleReader::open_file(path), out);
  });
}

SPROV_API int sprov_bundle_open_buf(const void* data, size_t len, sprov_bundle** out) {
  return guard([&] {
    if (!data && len) return fail(null_arg("data"));
    if (!out) return fail(null_arg("out"));
    auto b = std::make_unique<sprov_bundle>();
    b->owned.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + len);
    auto r = bundle::BundleReader::open(b->owned.data(), b->owned.size());
    return finish_open(std::move(b), std::move(r), out);
  });
}

SPROV_API int sprov_bundle_open_digest(const sprov_bundle_store* store, const char* digest, sprov_bundle** out) {
  return guard([&] {
    if (!store) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    if (!out) return fail(null_arg("out"));
    auto p = store->store.blob_path(digest);
    if (!p) return fail(p.error());
    auto r = bundle::BundleReader::open_file(p.value());
    if (!r) return fail(make_error(r.error().code, "%s in store '%s': %s", digest, store->store.dir().c_str(),
                                   r.error().message.c_str()));
    return finish_open(std::make_unique<sprov_bundle>(), std::move(r), out);
  });
}

SPROV_API void sprov_bundle_free(sprov_bundle* b) { delete b; }

SPROV_API int sprov_bundle_digest(const sprov_bundle* b, char* out, size_t out_size) {
  return guard([&] {
    if (!b) return fail(null_arg("bundle"));
    return copy_cstr(b->digest, out, out_size, "digest");
  });
}

SPROV_API uint64_t sprov_bundle_size(const sprov_bundle* b) { return b ? b->reader->size() : 0; }
SPROV_API size_t sprov_bundle_module_count(const sprov_bundle* b) {
  return guard_value<size_t>(0, [&]() -> size_t { return b ? b->reader->modules().size() : 0; });
}

SPROV_API int sprov_bundle_module_info(const sprov_bundle* b, size_t index, struct sprov_bundle_module* out) {
  return guard([&] {
    if (int rc = check_module(b, index)) return rc;
    const bundle::ModuleView& m = b->reader->modules()[index];
    const BundleModuleStrings& s = b->strings[index];
    sprov_bundle_module full{};
    full.sz = sizeof full;
    full.id_kind = static_cast<uint32_t>(m.id_kind);
    full.id_len = static_cast<uint32_t>(m.id.size());
    full.id_hex = s.id_hex.c_str();
    full.name = s.name.c_str();
    full.sha256_file = s.sha256_file.c_str();
    full.sha256_debug = s.sha256_debug.c_str();
    full.range_count = m.range_count;
    full.pad_count = m.pad_count;
    full.unwind_row_count = m.unwind_count;
    full.debug_blob_size = m.debug_blob.size();
    return capi::fill_out(out, full, "sprov_bundle_module");
  });
}

SPROV_API int sprov_bundle_find_module(const sprov_bundle* b, int id_kind, const char* id_hex, size_t* index) {
  return guard([&] {
    if (!b) return fail(null_arg("bundle"));
    if (!index) return fail(null_arg("index"));
    auto kind = id_kind_of(id_kind);
    if (!kind) return fail(kind.error());
    auto id = id_bytes(id_hex);
    if (!id) return fail(id.error());
    const bundle::ModuleView* m = b->reader->find_module(kind.value(), id.value());
    if (!m)
      return fail(make_error(SPROV_ERR_NOT_FOUND, "no module with %s %s in bundle %s", pipeline::bundle_id_kind_name(id_kind),
                             evidence::hex_encode(id.value()).c_str(), b->digest.c_str()));
    *index = m->index;
    return 0;
  });
}

SPROV_API int sprov_bundle_lookup(const sprov_bundle* b, size_t module, uint64_t addr, struct sprov_bundle_chain** out) {
  return guard([&] {
    if (int rc = check_module(b, module)) return rc;
    if (!out) return fail(null_arg("out"));
    auto chain = b->reader->lookup(module, addr);
    if (b->reader->file_changed())  // whatever it answered came from zeros, not the file
      return fail(make_error(SPROV_ERR_IO, "the file of bundle %s was truncated while mapped: no answer is given from it",
                             b->digest.c_str()));
    if (!chain) return fail(chain.error());
    const auto& v = chain.value();  // outermost first
    // One block: the chain header, the frames, then the NUL-terminated strings.
    size_t strings = 0;
    for (const auto& f : v) strings += f.function.size() + f.file.size() + 2;
    const size_t head = sizeof(sprov_bundle_chain);
    const size_t frames = v.size() * sizeof(sprov_bundle_frame);
    char* mem = static_cast<char*>(std::malloc(head + frames + strings + 1));
    if (!mem) return fail(make_error(SPROV_ERR_NOMEM, "cannot allocate an inline chain of %zu frames", v.size()));
    auto* c = reinterpret_cast<sprov_bundle_chain*>(mem);
    auto* fr = reinterpret_cast<sprov_bundle_frame*>(mem + head);
    char* str = mem + head + frames;
    auto put = [&str](std::string_view s) {
      const char* p = str;
      if (!s.empty()) std::memcpy(str, s.data(), s.size());
      str[s.size()] = '\0';
      str += s.size() + 1;
      return p;
    };
    for (size_t i = 0; i < v.size(); ++i) {
      const bundle::FrameView& f = v[v.size() - 1 - i];  // innermost first
      fr[i].function = put(f.function);
      fr[i].file = put(f.file);
      fr[i].line = f.line;
      fr[i].column = f.column;
    }
    c->count = v.size();
    c->frames = v.empty() ? nullptr : fr;
    *out = c;
    return 0;
  });
}

SPROV_API int sprov_bundle_unwind_row_text(const sprov_bundle* b, size_t module, uint64_t addr, char** out,
                                           size_t* out_len) {
  return guard([&] {
    if (int rc = check_module(b, module)) return rc;
    auto row = b->reader->unwind_row(module, addr);
    if (!row) return fail(row.error());
    // The bundle does not record the architecture: x86_64 names and 8-byte words (other
    // registers print by number).
    return give_string(row.value().found ? row_text(row.value().row, 8, true) : "none", out, out_len);
  });
}

SPROV_API int sprov_bundle_export(const sprov_bundle* b, int format, const size_t* module, void** out,
                                  size_t* out_len) {
  return guard([&] {
    if (!b) return fail(null_arg("bundle"));
    if (!out) return fail(null_arg("out"));
    if (module)
      if (int rc = check_module(b, *module)) return rc;
    std::vector<uint8_t> bytes;
    if (format == SPROV_BUNDLE_EXPORT_SYMBFILE) {
      const size_t n = b->reader->modules().size();
      if (!module && n != 1)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "bundle %s holds %zu modules and a symbfile holds one: name it",
                               b->digest.c_str(), n));
      auto r = bundle::export_symbfile(*b->reader, module ? *module : 0);
      if (!r) return fail(r.error());
      bytes = std::move(r).value();
    } else if (format == SPROV_BUNDLE_EXPORT_SYMBOL_INDEX_JSON) {
      bundle::SymbolIndexOptions opts;
      opts.bundle_id = b->digest;
      if (module) opts.module = *module;
      auto r = bundle::export_symbol_index_json(*b->reader, opts);
      if (!r) return fail(r.error());
      bytes.assign(r.value().begin(), r.value().end());
    } else {
      return fail(make_error(SPROV_ERR_INVALID_ARG, "export format %d is not 1 (symbol-index-json) or 2 (symbfile)",
                             format));
    }
    void* p = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (!p) return fail(make_error(SPROV_ERR_NOMEM, "cannot allocate %zu bytes", bytes.size()));
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    *out = p;
    if (out_len) *out_len = bytes.size();
    return 0;
  });
}

SPROV_API int sprov_bundle_store_default_dir(char** out, size_t* out_len) {
  return guard([&] {
    auto d = symbolize::BundleStore::default_dir();
    if (!d) return fail(d.error());
    return give_string(d.value(), out, out_len);
  });
}

SPROV_API int sprov_bundle_store_open(const char* dir, uint32_t flags, sprov_bundle_store** out) {
  return guard([&] {
    if (!out) return fail(null_arg("out"));
    if (flags & ~uint32_t{SPROV_BUNDLE_STORE_CREATE})
      return fail(make_error(SPROV_ERR_INVALID_ARG, "store flags 0x%x have unknown bits", flags));
    auto s = symbolize::BundleStore::open(dir ? dir : "", flags & SPROV_BUNDLE_STORE_CREATE);
    if (!s) return fail(s.error());
    *out = new sprov_bundle_store(std::move(s).value());
    return 0;
  });
}

SPROV_API void sprov_bundle_store_free(sprov_bundle_store* s) { delete s; }

SPROV_API const char* sprov_bundle_store_dir(const sprov_bundle_store* s) {
  return guard_value<const char*>("", [&]() -> const char* { return s ? s->store.dir().c_str() : ""; });
}

SPROV_API int sprov_bundle_store_put(sprov_bundle_store* s, const void* data, size_t len, char* digest,
                                     size_t digest_size) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!data && len) return fail(null_arg("data"));
    auto d = s->store.put(std::span<const uint8_t>(static_cast<const uint8_t*>(data), len),
                          symbolize::BundleStore::Index::kModules);
    if (!d) return fail(d.error());
    return digest ? copy_cstr(d.value(), digest, digest_size, "digest") : 0;
  });
}

SPROV_API int sprov_bundle_store_put_blob(sprov_bundle_store* s, const void* data, size_t len, char* digest,
                                          size_t digest_size) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!data && len) return fail(null_arg("data"));
    auto d = s->store.put(std::span<const uint8_t>(static_cast<const uint8_t*>(data), len),
                          symbolize::BundleStore::Index::kNone);
    if (!d) return fail(d.error());
    return digest ? copy_cstr(d.value(), digest, digest_size, "digest") : 0;
  });
}

SPROV_API int sprov_bundle_store_promote(sprov_bundle_store* s, const char* digest) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    auto st = s->store.promote(digest);
    return st ? 0 : fail(st.error());
  });
}

SPROV_API int sprov_bundle_store_put_file(sprov_bundle_store* s, const char* path, char* digest, size_t digest_size) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!path) return fail(null_arg("path"));
    auto d = s->store.put_file(path, symbolize::BundleStore::Index::kModules);
    if (!d) return fail(d.error());
    return digest ? copy_cstr(d.value(), digest, digest_size, "digest") : 0;
  });
}

SPROV_API int sprov_bundle_store_find(const sprov_bundle_store* s, int id_kind, const char* id_hex, char* digest,
                                      size_t digest_size) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    auto kind = id_kind_of(id_kind);
    if (!kind) return fail(kind.error());
    auto id = id_bytes(id_hex);
    if (!id) return fail(id.error());
    auto f = s->store.find(kind.value(), id.value());
    if (!f) return fail(f.error());
    if (!f.value())
      return fail(make_error(SPROV_ERR_NOT_FOUND, "no bundle for %s %s in store '%s'", pipeline::bundle_id_kind_name(id_kind),
                             evidence::hex_encode(id.value()).c_str(), s->store.dir().c_str()));
    return copy_cstr(*f.value(), digest, digest_size, "digest");
  });
}

SPROV_API int sprov_bundle_store_blob_path(const sprov_bundle_store* s, const char* digest, char** out,
                                           size_t* out_len) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    auto p = s->store.blob_path(digest);
    if (!p) return fail(p.error());
    return give_string(p.value(), out, out_len);
  });
}

SPROV_API int sprov_bundle_store_put_sidecar(sprov_bundle_store* s, const char* digest, const char* name,
                                             const void* data, size_t len) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    if (!name) return fail(null_arg("name"));
    if (!data && len) return fail(null_arg("data"));
    auto st = s->store.put_sidecar(digest, name, std::string_view(static_cast<const char*>(data), len));
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_bundle_store_sidecar_path(const sprov_bundle_store* s, const char* digest, const char* name,
                                              char** out, size_t* out_len) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    if (!name) return fail(null_arg("name"));
    auto p = pipeline::sidecar_file(s->store, digest, name);
    if (!p) return fail(p.error());
    return give_string(p.value(), out, out_len);
  });
}

SPROV_API int sprov_bundle_store_fsck(const sprov_bundle_store* s, char** report, size_t* report_len, size_t* errors) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    auto r = s->store.fsck();
    if (!r) return fail(r.error());
    const auto& rep = r.value();
    std::string text;
    for (const auto& e : rep.errors) text += "error " + e + "\n";
    for (const auto& w : rep.warnings) text += "warning " + w + "\n";
    text += "checked " + std::to_string(rep.blobs) + " blobs, " + std::to_string(rep.modules) + " modules, " +
            std::to_string(rep.ids) + " id entries, " + std::to_string(rep.sidecars) + " sidecars" +
            (rep.unindexed ? "; " + std::to_string(rep.unindexed) + " modules stored by content only (not indexed)" : "") +
            "\n";
    if (errors) *errors = rep.errors.size();
    return give_string(text, report, report_len);
  });
}

}  // extern "C"

extern "C" {

SPROV_API int sprov_bundle_sign_check(const struct sprov_bundle_sign_opts* opts) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_bundle_sign_opts), "sprov_bundle_sign_opts")) return rc;
    auto str = [](const char* s) { return std::string(s ? s : ""); };
    Status st = pipeline::check_signing(str(SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, key_path, nullptr)),
                                        str(SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_dir, nullptr)),
                                        str(SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_key, nullptr)));
    return st ? 0 : fail(st.error());
  });
}

SPROV_API int sprov_bundle_store_sign(sprov_bundle_store* s, const char* digest, const struct sprov_bundle_sign_opts* opts,
                                      uint64_t* log_index) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_bundle_sign_opts), "sprov_bundle_sign_opts")) return rc;
    auto str = [](const char* s) { return std::string(s ? s : ""); };
    auto index = pipeline::sign_stored_bundle(s->store, digest, str(SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, key_path, nullptr)),
                                              str(SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_dir, nullptr)),
                                              str(SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_key, nullptr)));
    if (!index) return fail(index.error());
    if (log_index) *log_index = index.value();
    return 0;
  });
}

}  // extern "C"
