// SPDX-License-Identifier: Apache-2.0
// `stackprov bundle build|inspect|lookup`: write a symbol bundle for an ELF file, describe one, resolve addresses through one.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "bundle/export.hpp"
#include "bundle/format.hpp"
#include "command.hpp"
#include "core/types.hpp"
#include "elf/elf_image.hpp"
#include "evidence/encoding.hpp"
#include "symbolize/bundle_builder.hpp"
#include "symbolize/bundle_store.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/module_unwind.hpp"

namespace {

using namespace stackprov;

const char kHelp[] =
    "usage: stackprov bundle build FILE [--out PATH] [--name NAME] [--debug-file-directory DIR]...\n"
    "       stackprov bundle inspect BUNDLE [--json]\n"
    "       stackprov bundle lookup BUNDLE [--build-id HEX] ADDRESS...\n"
    "       stackprov bundle unwind BUNDLE [--build-id HEX] ADDRESS...\n"
    "       stackprov bundle export BUNDLE --format symbol-index-json|symbfile [--build-id HEX] [--out FILE]\n"
    "                                     [--store DIR]\n\n"
    "build    writes a symbol bundle (doc/bundles.md) for the ELF FILE: its GNU build-id, name,\n"
    "         sha256 of the file and of its debug file, and the address ranges with inline chains\n"
    "         of every executable byte its DWARF describes (found in FILE or its separate debug file).\n"
    "         and the unwind rows of its .eh_frame/.debug_frame (as the unwinder reads them).\n"
    "         No return pads yet. The output is deterministic.\n"
    "         --out PATH    where to write (default: <basename of FILE>.sbundle in the current directory)\n"
    "         --name NAME   module name stored in the bundle (default: the basename of FILE)\n"
    "         --debug-file-directory DIR   search DIR for separate debug files (repeatable;\n"
    "                       default /usr/lib/debug)\n"
    "         Prints the bundle's identity, sha256:<hex> of its bytes.\n"
    "inspect  prints each module: build-id, name, file/debug sha256, range/pad/unwind-row counts\n"
    "         (--json: one JSON object).\n"
    "lookup   resolves module-relative (link-time) ADDRESSes (hex with 0x, or decimal) through the\n"
    "         bundle alone and prints, like llvm-symbolizer --inlining, for each inline frame\n"
    "         innermost first: the function (linkage name) and file:line:column, then a blank line;\n"
    "         \"??\" and \"??:0:0\" when the bundle has no range there. --build-id picks the module\n"
    "         (required when the bundle holds more than one).\n"
    "unwind   prints the unwind row covering each ADDRESS, one line each: x86_64 rows in\n"
    "         llvm-dwarfdump's notation (\"CFA=RSP+16: RBX=[CFA-16], RIP=[CFA-8]\"; other\n"
    "         architectures: DWARF register numbers \"r7\"), or \"end-of-stack\", \"full\" (the row\n"
    "         needs the CFI interpreter), \"none\" (no unwind information).\n"
    "export   writes the bundle's records in another format (default: to stdout): symbol-index-json\n"
    "         (doc/symbol-index.md; every module, or the one --build-id names) or symbfile (Elastic's\n"
    "         symb-proto, lib/bundle/symbfile.proto; one module: --build-id when there are several).\n"
    "         BUNDLE is a bundle file or sha256:HEX, a bundle in the store (--store DIR; default\n"
    "         $STACKPROV_STORE, else $XDG_DATA_HOME/stackprov/store).\n";

int fail(const std::string& msg) {
  fprintf(stderr, "stackprov bundle: %s\n", msg.c_str());
  return 1;
}
int usage(const std::string& msg) {
  fprintf(stderr, "stackprov bundle: %s (see 'stackprov bundle --help')\n", msg.c_str());
  return 2;
}

std::string hex_of(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string basename_of(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

int cmd_build(int argc, char** argv) {
  std::string file, out, name;
  symbolize::BundleBuildOptions opts;
  bool custom_dirs = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* opt, std::string* dst) {
      if (i + 1 >= argc) return false;
      *dst = argv[++i];
      (void)opt;
      return true;
    };
    if (a == "--out") {
      if (!value("--out", &out)) return usage("--out needs a value");
    } else if (a == "--name") {
      if (!value("--name", &name)) return usage("--name needs a value");
    } else if (a == "--debug-file-directory") {
      std::string d;
      if (!value("--debug-file-directory", &d)) return usage("--debug-file-directory needs a value");
      if (!custom_dirs) opts.debug.debug_dirs.clear();
      custom_dirs = true;
      opts.debug.debug_dirs.push_back(d);
    } else if (a.rfind("--", 0) == 0) {
      return usage("unknown option '" + a + "'");
    } else if (file.empty()) {
      file = a;
    } else {
      return usage("unexpected argument '" + a + "' (build takes one FILE)");
    }
  }
  if (file.empty()) return usage("build needs a FILE");
  opts.name = name;
  auto mc = symbolize::build_module_contents(file, opts);
  if (!mc) return fail(mc.error().message);
  // Unwind rows: the unwinder's own CFI lookup over the same file (lib/unwind).
  auto img = elf::ElfImage::open(file);
  if (!img) return fail(img.error().message);
  auto lm = unwind::LoadedModule::load(img.value(), opts.debug);
  if (!lm) return fail(lm.error().message);
  auto rows = unwind::bundle_unwind_rows(*lm.value());
  if (!rows) return fail(rows.error().message);
  mc.value().unwind_rows = std::move(rows.value());
  bundle::BundleContents bc;
  bc.modules.push_back(std::move(mc.value()));
  auto bytes = bundle::write_bundle(bc);
  if (!bytes) return fail(bytes.error().message);
  if (out.empty()) out = basename_of(file) + ".sbundle";
  FILE* f = fopen(out.c_str(), "wb");
  if (!f) return fail("cannot create '" + out + "': " + strerror(errno));
  const std::vector<uint8_t>& b = bytes.value();
  const bool ok = fwrite(b.data(), 1, b.size(), f) == b.size();
  if (fclose(f) != 0 || !ok) return fail("cannot write '" + out + "': " + strerror(errno));
  printf("%s\n", evidence::digest_string(evidence::sha256(b.data(), b.size())).c_str());
  return 0;
}

const char* kind_name(bundle::IdKind k) {
  switch (k) {
    case bundle::IdKind::kElfBuildId: return "elf-build-id";
    case bundle::IdKind::kPdbGuidAge: return "pdb-guid-age";
    case bundle::IdKind::kMachoUuid: return "macho-uuid";
  }
  return "unknown";
}

int cmd_inspect(int argc, char** argv) {
  std::string file;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") json = true;
    else if (a.rfind("--", 0) == 0) return usage("unknown option '" + a + "'");
    else if (file.empty()) file = a;
    else return usage("unexpected argument '" + a + "' (inspect takes one BUNDLE)");
  }
  if (file.empty()) return usage("inspect needs a BUNDLE");
  auto r = bundle::BundleReader::open_file(file);
  if (!r) return fail(r.error().message);
  const auto& mods = r.value().modules();
  const std::string digest = evidence::digest_string(evidence::sha256(r.value().data(), r.value().size()));
  if (json) {
    printf("{\"bundle\":%s,\"size\":%zu,\"modules\":[", json_str(digest).c_str(), r.value().size());
    for (size_t i = 0; i < mods.size(); ++i) {
      const auto& m = mods[i];
      printf("%s{\"id_kind\":\"%s\",\"id\":\"%s\",\"name\":%s,\"sha256_file\":\"%s\",\"sha256_debug\":\"%s\","
             "\"ranges\":%" PRIu64 ",\"return_pads\":%" PRIu64 ",\"unwind_rows\":%" PRIu64 ",\"debug_blob\":%zu}",
             i ? "," : "", kind_name(m.id_kind), hex_of(m.id.data(), m.id.size()).c_str(), json_str(m.name).c_str(),
             hex_of(m.sha256_file.data(), 32).c_str(), hex_of(m.sha256_debug.data(), 32).c_str(), m.range_count,
             m.pad_count, m.unwind_count, m.debug_blob.size());
    }
    printf("]}\n");
    return 0;
  }
  printf("bundle %s (%zu bytes, %zu module%s)\n", digest.c_str(), r.value().size(), mods.size(),
         mods.size() == 1 ? "" : "s");
  for (const auto& m : mods) {
    printf("module %s %s name %s\n", kind_name(m.id_kind), hex_of(m.id.data(), m.id.size()).c_str(),
           std::string(m.name).c_str());
    printf("  sha256_file  %s\n  sha256_debug %s\n", hex_of(m.sha256_file.data(), 32).c_str(),
           hex_of(m.sha256_debug.data(), 32).c_str());
    printf("  ranges %" PRIu64 " return_pads %" PRIu64 " unwind_rows %" PRIu64 " debug_blob %zu bytes\n",
           m.range_count, m.pad_count, m.unwind_count, m.debug_blob.size());
  }
  return 0;
}

bool parse_addr(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  *out = strtoull(hex ? s.c_str() + 2 : s.c_str(), &end, hex ? 16 : 10);
  return errno == 0 && end && *end == '\0' && end != (hex ? s.c_str() + 2 : s.c_str());
}

/// What `lookup` and `unwind` share: BUNDLE [--build-id HEX] ADDRESS..., the bundle opened and
/// its module chosen (by build-id, or the only one). Addresses stay text: each is checked when
/// its turn comes, after the answers before it are printed.
struct ModuleQuery {
  std::optional<bundle::BundleReader> reader;
  size_t module = 0;
  std::vector<std::string> addrs;
};

/// 0 with *q filled, or the exit code of the error it printed.
int open_query(int argc, char** argv, const char* verb, ModuleQuery* q) {
  std::string file, build_id;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--build-id") {
      if (i + 1 >= argc) return usage("--build-id needs a value");
      build_id = argv[++i];
    } else if (a.rfind("--", 0) == 0) {
      return usage("unknown option '" + a + "'");
    } else if (file.empty()) {
      file = a;
    } else {
      q->addrs.push_back(a);
    }
  }
  if (file.empty()) return usage(std::string(verb) + " needs a BUNDLE");
  auto r = bundle::BundleReader::open_file(file);
  if (!r) return fail(r.error().message);
  const bundle::BundleReader& reader = q->reader.emplace(std::move(r).value());
  if (!build_id.empty()) {
    const BuildId id = BuildId::from_hex(build_id);
    if (id.empty()) return usage("--build-id '" + build_id + "' is not a hex build-id");
    const bundle::ModuleView* m =
        reader.find_module(bundle::IdKind::kElfBuildId, std::span<const uint8_t>(id.bytes, id.len));
    if (!m) return fail("no module with build-id " + build_id + " in '" + file + "'");
    q->module = m->index;
  } else if (reader.modules().size() != 1) {
    return usage("'" + file + "' holds " + std::to_string(reader.modules().size()) +
                 " modules: name one with --build-id");
  }
  return 0;
}

int cmd_lookup(int argc, char** argv) {
  ModuleQuery q;
  if (int rc = open_query(argc, argv, "lookup", &q)) return rc;
  const bundle::BundleReader& reader = *q.reader;
  const size_t module = q.module;
  const std::vector<std::string>& addrs = q.addrs;
  for (const std::string& s : addrs) {
    uint64_t addr = 0;
    if (!parse_addr(s, &addr)) return usage("'" + s + "' is not an address (hex with 0x, or decimal)");
    auto chain = reader.lookup(module, addr);
    if (!chain) return fail(chain.error().message);
    const auto& v = chain.value();
    if (v.empty()) printf("??\n??:0:0\n");
    for (size_t i = v.size(); i-- > 0;) {
      const bundle::FrameView& f = v[i];
      printf("%s\n%s:%u:%u\n", f.function.empty() ? "??" : std::string(f.function).c_str(),
             f.file.empty() ? "??" : std::string(f.file).c_str(), f.line, f.column);
    }
    printf("\n");
  }
  fflush(stdout);
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

int cmd_unwind(int argc, char** argv) {
  ModuleQuery q;
  if (int rc = open_query(argc, argv, "unwind", &q)) return rc;
  const bundle::BundleReader& reader = *q.reader;
  const size_t module = q.module;
  const std::vector<std::string>& addrs = q.addrs;
  // The bundle does not record the architecture: x86_64 names and 8-byte words unless
  // the rows use registers x86_64 does not have (printed by number either way).
  for (const std::string& s : addrs) {
    uint64_t addr = 0;
    if (!parse_addr(s, &addr)) return usage("'" + s + "' is not an address (hex with 0x, or decimal)");
    auto row = reader.unwind_row(module, addr);
    if (!row) return fail(row.error().message);
    printf("%s\n", row.value().found ? row_text(row.value().row, 8, true).c_str() : "none");
  }
  fflush(stdout);
  return 0;
}

// ---- export (lib/bundle/export.hpp) ----

/// The path of the bundle an argument names: a file path, or `sha256:HEX`, a blob of the
/// store at `store_dir` ("" = BundleStore::default_dir()).
/// STORE: the one place of `export` where `sha256:` is resolved.
Result<std::string> resolve_bundle_path(const std::string& arg, const std::string& store_dir) {
  if (arg.rfind("sha256:", 0) != 0) return arg;
  auto store = symbolize::BundleStore::open(store_dir, false);
  if (!store) return std::move(store).error();
  return store.value().blob_path(arg);
}

int cmd_export(int argc, char** argv) {
  std::string arg, format, out, build_id, store_dir;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    std::string* dst = a == "--format"     ? &format
                       : a == "--out"      ? &out
                       : a == "--build-id" ? &build_id
                       : a == "--store"    ? &store_dir
                                           : nullptr;
    if (dst) {
      if (i + 1 >= argc) return usage(a + " needs a value");
      *dst = argv[++i];
    } else if (a.rfind("--", 0) == 0) {
      return usage("unknown option '" + a + "'");
    } else if (arg.empty()) {
      arg = a;
    } else {
      return usage("unexpected argument '" + a + "' (export takes one BUNDLE)");
    }
  }
  if (arg.empty()) return usage("export needs a BUNDLE");
  if (format != "symbol-index-json" && format != "symbfile")
    return usage("export needs --format symbol-index-json or --format symbfile");
  auto path = resolve_bundle_path(arg, store_dir);
  if (!path) return fail(path.error().message);
  auto r = bundle::BundleReader::open_file(path.value());
  if (!r) return fail(r.error().message);
  const bundle::BundleReader& reader = r.value();
  std::optional<size_t> module;
  if (!build_id.empty()) {
    const BuildId id = BuildId::from_hex(build_id);
    if (id.empty()) return usage("--build-id '" + build_id + "' is not a hex build-id");
    const bundle::ModuleView* m =
        reader.find_module(bundle::IdKind::kElfBuildId, std::span<const uint8_t>(id.bytes, id.len));
    if (!m) return fail("no module with build-id " + build_id + " in '" + arg + "'");
    module = m->index;
  }
  std::vector<uint8_t> bytes;
  if (format == "symbfile") {
    if (!module && reader.modules().size() != 1)
      return usage("'" + arg + "' holds " + std::to_string(reader.modules().size()) +
                   " modules and a symbfile holds one: name it with --build-id");
    auto b = bundle::export_symbfile(reader, module.value_or(0));
    if (!b) return fail(b.error().message);
    bytes = std::move(b).value();
  } else {
    bundle::SymbolIndexOptions opts;
    opts.bundle_id = evidence::digest_string(evidence::sha256(reader.data(), reader.size()));
    opts.module = module;
    auto j = bundle::export_symbol_index_json(reader, opts);
    if (!j) return fail(j.error().message);
    bytes.assign(j.value().begin(), j.value().end());
  }
  FILE* f = out.empty() ? stdout : fopen(out.c_str(), "wb");
  if (!f) return fail("cannot create '" + out + "': " + strerror(errno));
  const bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if ((f == stdout ? fflush(f) : fclose(f)) != 0 || !ok)
    return fail("cannot write '" + (out.empty() ? std::string("stdout") : out) + "': " + strerror(errno));
  return 0;
}

int cmd_bundle(int argc, char** argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(kHelp, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (int i = 2; i < argc; ++i)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(kHelp, stdout);
      return 0;
    }
  const std::string sub = argv[1];
  if (sub == "build") return cmd_build(argc, argv);
  if (sub == "inspect") return cmd_inspect(argc, argv);
  if (sub == "lookup") return cmd_lookup(argc, argv);
  if (sub == "unwind") return cmd_unwind(argc, argv);
  if (sub == "export") return cmd_export(argc, argv);
  return usage("unknown subcommand '" + sub + "' (build, inspect, lookup, unwind or export)");
}

}  // namespace

STACKPROV_COMMAND("bundle", "symbol bundles: build one for an ELF file, inspect it, look addresses and unwind rows up in it", cmd_bundle);
