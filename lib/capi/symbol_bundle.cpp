// SPDX-License-Identifier: Apache-2.0
// C ABI shims for symbol bundles (include/stackprov/symbol_bundle.h): build, open, inspect, look up, the store.
#include <sys/stat.h>

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
#include "elf/elf_image.hpp"
#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "evidence/keys.hpp"
#include "evidence/tlog.hpp"
#include "object/object_image.hpp"
#include "pipeline/object_bundle.hpp"
#include "symbolize/bundle_builder.hpp"
#include "symbolize/bundle_store.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/module_unwind.hpp"

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

struct sprov_bundle_store {
  explicit sprov_bundle_store(symbolize::BundleStore s) : store(std::move(s)) {}
  symbolize::BundleStore store;
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

std::string base_name(const std::string& p) {
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

Result<bundle::IdKind> id_kind_of(int kind) {
  switch (kind) {
    case SPROV_BUNDLE_ID_ELF_BUILD_ID: return bundle::IdKind::kElfBuildId;
    case SPROV_BUNDLE_ID_PDB_GUID_AGE: return bundle::IdKind::kPdbGuidAge;
    case SPROV_BUNDLE_ID_MACHO_UUID: return bundle::IdKind::kMachoUuid;
    default: return make_error(SPROV_ERR_INVALID_ARG, "id kind %d is not 1 (elf-build-id), 2 (pdb-guid-age) or 3 (macho-uuid)", kind);
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

uint64_t file_size(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

/// One module: ranges (builder), unwind rows (the unwinder's CFI lookup), the debug file.
Result<bundle::ModuleContents> build_module(const std::string& path, const symbolize::BundleBuildOptions& opts,
                                            bool include_debug) {
  // A file of another registered object format (lib/object): its identity, symbols and unwind
  // source's rows. ELF (and what no format claims: ELF's errors) goes to the DWARF builder below.
  const object::Format* format = object::sniff_path(path);  // its head only: an ELF file is opened once, below
  if (format != nullptr && format->name != "elf") {
    auto obj = object::open(path);
    if (!obj.ok()) return std::move(obj).error();
    auto mc = pipeline::object_module_contents(obj.value(), opts.name.empty() ? base_name(path) : opts.name);
    if (mc.ok() && include_debug) {
      const auto bytes = obj.value()->file_bytes();
      mc.value().debug_blob.assign(bytes.begin(), bytes.end());
    }
    return mc;
  }
  symbolize::BundleBuildReport rep;
  auto mc = symbolize::build_module_contents(path, opts, &rep);
  if (!mc) return mc.error();
  auto img = elf::ElfImage::open(path);
  if (!img) return img.error();
  auto lm = unwind::LoadedModule::load(img.value(), opts.debug);
  if (!lm) return lm.error();
  auto rows = unwind::bundle_unwind_rows(*lm.value());
  if (!rows) return rows.error();
  mc.value().unwind_rows = std::move(rows.value());
  if (include_debug) {
    const std::string& dbg = rep.debug_file.empty() ? path : rep.debug_file;
    auto bytes = evidence::read_file(dbg, size_t{4} << 30);
    if (!bytes) return make_error(bytes.error().code, "--include-debug: '%s': %s", dbg.c_str(), bytes.error().message.c_str());
    mc.value().debug_blob = std::move(bytes.value());
  }
  return mc;
}

}  // namespace

extern "C" {

static_assert(SPROV_BUNDLE_ID_ELF_BUILD_ID == static_cast<int>(IdKind::kElfBuildId) &&
              SPROV_BUNDLE_ID_PDB_GUID_AGE == static_cast<int>(IdKind::kPdbGuidAge) &&
              SPROV_BUNDLE_ID_MACHO_UUID == static_cast<int>(IdKind::kMachoUuid));

SPROV_API const char* sprov_bundle_id_kind_name(int kind) {
  // A bundle stores kinds 1..3 (SPROV_BUNDLE_ID_*, the values of IdKind); 0 is not a bundle's.
  if (kind < 1 || kind > kMaxIdKind) return "unknown";
  return id_kind_name(static_cast<IdKind>(kind));
}

SPROV_API int sprov_bundle_build(const char* const* paths, size_t count, const struct sprov_bundle_build_opts* opts,
                                 void** out, size_t* out_len, char* digest, size_t digest_size) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_bundle_build_opts), "sprov_bundle_build_opts")) return rc;
    if (!out) return fail(null_arg("out"));
    if (count == 0 || !paths) return fail(make_error(SPROV_ERR_INVALID_ARG, "no input files (count %zu)", count));
    if (count > bundle::kMaxModules)
      return fail(make_error(SPROV_ERR_LIMIT, "%zu input files exceed the limit of %zu modules", count, bundle::kMaxModules));
    const char* const* names = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, names, nullptr);
    const char* const* dirs = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, debug_dirs, nullptr);
    const size_t ndirs = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, debug_dir_count, size_t{0});
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, flags, 0u);
    const sprov_bundle_progress_fn progress = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, progress, nullptr);
    void* pctx = SPROV_OPTS_GET(opts, sprov_bundle_build_opts, progress_ctx, nullptr);
    if (flags & ~uint32_t{SPROV_BUNDLE_INCLUDE_DEBUG})
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_bundle_build_opts.flags 0x%x has unknown bits", flags));
    if (SPROV_OPTS_GET(opts, sprov_bundle_build_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_bundle_build_opts.reserved is not 0"));
    if (ndirs > 0 && !dirs) return fail(null_arg("debug_dirs"));
    symbolize::BundleBuildOptions bo;
    if (ndirs > 0) {
      bo.debug.debug_dirs.clear();
      for (size_t i = 0; i < ndirs; ++i) {
        if (!dirs[i]) return fail(null_arg("debug_dirs[i]"));
        bo.debug.debug_dirs.emplace_back(dirs[i]);
      }
    }
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!paths[i]) return fail(null_arg("paths[i]"));
      total += file_size(paths[i]);
    }
    if (progress) progress(pctx, 0, count, 0, total);
    bundle::BundleContents bc;
    std::vector<std::string> from;  // input file of each module, to name duplicates
    for (size_t i = 0; i < count; ++i) {
      bo.name = names && names[i] ? names[i] : base_name(paths[i]);
      auto mc = build_module(paths[i], bo, flags & SPROV_BUNDLE_INCLUDE_DEBUG);
      if (!mc) return fail(mc.error());
      for (size_t j = 0; j < bc.modules.size(); ++j)
        if (bc.modules[j].id.kind == mc.value().id.kind && bc.modules[j].id.bytes == mc.value().id.bytes)
          return fail(make_error(SPROV_ERR_INVALID_ARG, "'%s' and '%s' have the same build-id %s: one bundle holds a module once",
                                 from[j].c_str(), paths[i], evidence::hex_encode(mc.value().id.bytes).c_str()));
      bc.modules.push_back(std::move(mc.value()));
      from.emplace_back(paths[i]);
      done += file_size(paths[i]);
      if (progress) progress(pctx, i + 1, count, done, total);
    }
    auto bytes = bundle::write_bundle(bc);
    if (!bytes) return fail(bytes.error());
    const std::vector<uint8_t>& v = bytes.value();
    if (digest) {
      if (int rc = copy_cstr(evidence::digest_string(evidence::sha256(v.data(), v.size())), digest, digest_size, "digest"))
        return rc;
    }
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
    void* bytes = nullptr;
    size_t len = 0;
    if (int rc = sprov_bundle_build(paths, count, opts, &bytes, &len, digest, digest_size)) return rc;
    auto st = evidence::write_file_atomic(out_path, std::string_view(static_cast<const char*>(bytes), len), 0644);
    std::free(bytes);
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
      return fail(make_error(SPROV_ERR_NOT_FOUND, "no module with %s %s in bundle %s", sprov_bundle_id_kind_name(id_kind),
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
      return fail(make_error(SPROV_ERR_NOT_FOUND, "no bundle for %s %s in store '%s'", sprov_bundle_id_kind_name(id_kind),
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
    auto p = s->store.sidecar_path(digest, name);
    if (!p) return fail(p.error());
    struct stat st;
    if (stat(p.value().c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return fail(make_error(SPROV_ERR_NOT_FOUND, "bundle %s has no '%s' sidecar in store '%s' (%s)", digest, name,
                             s->store.dir().c_str(), p.value().c_str()));
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

namespace {

/// Frees a malloc'd C ABI result at scope exit.
struct CFree {
  void* p = nullptr;
  ~CFree() { std::free(p); }
};

/// The last error of a nested C ABI call, prefixed with what was being done.
int fail_nested(const std::string& what) {
  return fail(make_error(last_error_code(), "%s: %s", what.c_str(), last_error_message()));
}

/// The in-toto predicate of a signed bundle: its modules' identities and names (canonical JSON).
std::string bundle_predicate(const bundle::BundleReader& r) {
  evidence::Json mods = evidence::Json::array();
  for (const auto& m : r.modules()) {
    mods.push_back({{"id_kind", sprov_bundle_id_kind_name(static_cast<int>(m.id_kind))},
                    {"id", evidence::hex_encode(m.id.data(), m.id.size())},
                    {"name", m.name},
                    {"sha256_file", evidence::hex_encode(m.sha256_file.data(), m.sha256_file.size())}});
  }
  return evidence::canonical_json(evidence::Json{{"modules", mods}});
}

}  // namespace

extern "C" {

SPROV_API int sprov_bundle_sign_check(const struct sprov_bundle_sign_opts* opts) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_bundle_sign_opts), "sprov_bundle_sign_opts")) return rc;
    const char* key = SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, key_path, nullptr);
    const char* log_dir = SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_dir, nullptr);
    const char* log_key = SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_key, nullptr);
    if (!key || !*key) return fail(make_error(SPROV_ERR_INVALID_ARG, "signing needs a key (key_path)"));
    if (!log_dir || !*log_dir) return fail(make_error(SPROV_ERR_INVALID_ARG, "signing needs a transparency log (log_dir)"));
    if (!log_key || !*log_key) log_key = key;
    auto signer = evidence::SigningKey::load(key);
    if (!signer) return fail(signer.error());
    auto checkpoint_key = strcmp(log_key, key) == 0 ? signer : evidence::SigningKey::load(log_key);
    if (!checkpoint_key) return fail(checkpoint_key.error());
    auto log = evidence::Tlog::open(log_dir);
    if (!log) return fail(log.error());
    if (Status st = log.value().check_key(checkpoint_key.value(), log_key); !st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_bundle_store_sign(sprov_bundle_store* s, const char* digest, const struct sprov_bundle_sign_opts* opts,
                                      uint64_t* log_index) {
  return guard([&] {
    if (!s) return fail(null_arg("store"));
    if (!digest) return fail(null_arg("digest"));
    // Keys and log first: a key that cannot sign leaves the log and the store as they were.
    if (int rc = sprov_bundle_sign_check(opts)) return rc;
    const char* key = SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, key_path, nullptr);
    const char* log_dir = SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_dir, nullptr);
    const char* log_key = SPROV_OPTS_GET(opts, sprov_bundle_sign_opts, log_key, nullptr);
    if (!log_key || !*log_key) log_key = key;
    auto blob = s->store.blob_path(digest);
    if (!blob) return fail(blob.error());
    auto reader = bundle::BundleReader::open_file(blob.value());
    if (!reader) return fail(reader.error());
    const std::string predicate = bundle_predicate(reader.value());
    sprov_sign_opts so{};
    so.sz = sizeof so;
    so.subject_name = digest;
    so.predicate_type = "https://stackprov.dev/symbol-bundle/v1";
    so.predicate_json = predicate.c_str();
    CFree env, note, proof;
    size_t env_len = 0, note_len = 0, proof_len = 0;
    char* p = nullptr;
    if (sprov_dsse_sign_file(key, blob.value().c_str(), &so, &p, &env_len) != 0)
      return fail_nested(std::string("sign with key '") + key + "'");
    env.p = p;
    sprov_tlog* log = nullptr;
    if (sprov_tlog_open(log_dir, &log) != 0) return fail_nested(std::string("log '") + log_dir + "'");
    struct LogCloser {
      sprov_tlog* l;
      ~LogCloser() { sprov_tlog_free(l); }
    } closer{log};
    uint64_t index = 0;
    if (sprov_tlog_find(log, env.p, env_len, &index) == 0) {
      if (sprov_tlog_checkpoint(log, log_key, &p, &note_len) != 0)
        return fail_nested(std::string("checkpoint of log '") + log_dir + "' with key '" + log_key + "'");
    } else {
      if (sprov_last_error() != SPROV_ERR_NOT_FOUND) return fail_nested(std::string("log '") + log_dir + "'");
      const void* entries[1] = {env.p};
      const size_t lens[1] = {env_len};
      if (sprov_tlog_append_checkpoint(log, entries, lens, 1, log_key, &index, &p, &note_len) != 0)
        return fail_nested(std::string("append to log '") + log_dir + "'");
    }
    note.p = p;
    if (sprov_tlog_prove(log, index, &p, &proof_len) != 0)
      return fail_nested("inclusion proof of log entry " + std::to_string(index));
    proof.p = p;
    for (auto [name, data, len] : {std::tuple{"dsse.json", env.p, env_len}, std::tuple{"tlog-proof", proof.p, proof_len},
                                   std::tuple{"checkpoint", note.p, note_len}}) {
      auto st = s->store.put_sidecar(digest, name, std::string_view(static_cast<const char*>(data), len));
      if (!st) return fail(st.error());
    }
    if (log_index) *log_index = index;
    return 0;
  });
}

}  // extern "C"
