// SPDX-License-Identifier: Apache-2.0
// `stackprov bundle build|inspect|lookup|unwind|export|fsck`: symbol bundles and their store, through the public C ABI only.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "stackprov/stackprov.h"

namespace {

const char kHelp[] =
    "usage: stackprov bundle build [--store DIR] [--sign KEY --log DIR [--log-key LOGKEY]] [--include-debug]\n"
    "                              [-o PATH] [--name NAME] [--debug-file-directory DIR]...\n"
    "                              [--symbol-path DIR]... FILE...\n"
    "       stackprov bundle inspect BUNDLE [--store DIR] [--json]\n"
    "       stackprov bundle lookup BUNDLE [--store DIR] [--build-id HEX|--pdb-key KEY|--code-id KEY]\n"
    "                                  ADDRESS...\n"
    "       stackprov bundle unwind BUNDLE [--store DIR] [--build-id HEX|--pdb-key KEY|--code-id KEY]\n"
    "                                  ADDRESS...\n"
    "       stackprov bundle export BUNDLE --format symbol-index-json|symbfile [--build-id HEX] [-o FILE]\n"
    "                                     [--store DIR]\n"
    "       stackprov bundle put [--store DIR] BUNDLEFILE...\n"
    "       stackprov bundle promote [--store DIR] sha256:HEX...\n"
    "       stackprov bundle fsck [--store DIR]\n\n"
    "options (which subcommand takes which: the usage above):\n"
    "  --store DIR   the bundle store (doc/bundles.md \"Store\"); default $STACKPROV_STORE, else\n"
    "                $XDG_DATA_HOME/stackprov/store, else $HOME/.local/share/stackprov/store.\n"
    "                build: put the bundle into the store (created if missing) and index its\n"
    "                modules\n"
    "  -o, --output PATH   build: also (or, without --store/--sign, only) write the bundle to PATH\n"
    "                (default without a store: <basename of the first FILE>.sbundle here;\n"
    "                --out: the same); export: write to PATH instead of stdout\n"
    "  --name NAME   build: module name stored in the bundle (one FILE only; default: its basename)\n"
    "  --debug-file-directory DIR   build: search DIR for separate debug files (repeatable;\n"
    "                default /usr/lib/debug)\n"
    "  --symbol-path DIR   build: a symbol store of PDBs, DIR/NAME.pdb/KEY/NAME.pdb (repeatable;\n"
    "                searched after the debug file directories)\n"
    "  --include-debug   build: embed each module's debug file (or the file itself) in the bundle\n"
    "  --sign KEY    build: sign the bundle (implies the store): a DSSE envelope over an in-toto\n"
    "                statement whose subject is the bundle's sha256, signed with the private\n"
    "                key KEY (P-256), appended to the transparency log --log DIR, whose\n"
    "                checkpoint the private key LOGKEY (default KEY) signs; the envelope, its\n"
    "                tlog-proof@v1 and the checkpoint are stored beside the bundle (sidecars\n"
    "                dsse.json, tlog-proof, checkpoint). KEY and LOGKEY are checked before\n"
    "                anything is written: a key that cannot sign leaves the store, the log\n"
    "                and PATH as they were. Verify with\n"
    "                'stackprov trace-verify --bundle sha256:HEX --dsse --rekor'.\n"
    "  --log DIR     build, with --sign: the transparency log ('stackprov log init')\n"
    "  --log-key LOGKEY   build, with --sign: the private key that signs the log's checkpoint\n"
    "                (default KEY)\n"
    "  --json        inspect: one JSON object\n"
    "  --build-id HEX   lookup, unwind, export: the module of that GNU build-id\n"
    "  --pdb-key KEY    lookup, unwind: the PE module of that PDB symbol-server key\n"
    "  --code-id KEY    lookup, unwind: the PE module of that code id\n"
    "  --format symbol-index-json|symbfile   export: the format written\n"
    "  -h, --help    this text\n\n"
    "BUNDLE is a bundle file, or sha256:HEX: the bundle of that digest in the store.\n\n"
    "build    writes one symbol bundle (doc/bundles.md) with a module for each ELF FILE: its GNU\n"
    "         build-id, name, sha256 of the file and of its debug file, the address ranges with\n"
    "         inline chains of every executable byte its DWARF describes (found in FILE or its\n"
    "         separate debug file), the unwind rows of its .eh_frame/.debug_frame and a return pad\n"
    "         after every call. A FILE without DWARF gets symbol-table ranges only (no lines, no\n"
    "         pads). A PE FILE is keyed by its PDB GUID+age (pdb-guid-age), its ranges from its PDB\n"
    "         (clang-cl/lld-link: found as 'symbolize' finds it, also under --debug-file-directory\n"
    "         DIR as DIR/NAME.pdb/KEY/NAME.pdb) or its DWARF (mingw), its unwind rows from .pdata\n"
    "         with the rows of its epilogs. The output is deterministic. Prints the bundle's identity,\n"
    "         sha256:<hex>.\n"
    "         Progress (modules, bytes, ETA) goes to stderr when it is a terminal and the input\n"
    "         is large; nothing otherwise.\n"
    "inspect  prints each module: id kind and hex, name, file/debug sha256, range/pad/unwind-row\n"
    "         counts (--json: one JSON object).\n"
    "lookup   resolves module-relative (link-time) ADDRESSes (hex with 0x, or decimal) through the\n"
    "         bundle alone and prints, like llvm-symbolizer --inlining, for each inline frame\n"
    "         innermost first: the function (linkage name) and file:line:column, then a blank line;\n"
    "         \"??\" and \"??:0:0\" when the bundle has no range there. --build-id picks the module\n"
    "         (required when the bundle holds more than one), or --pdb-key KEY a PE module by its\n"
    "         PDB's symbol-server key (GUID hex + age hex, as in NAME.pdb/KEY/NAME.pdb), or\n"
    "         --code-id KEY a PE module without a CodeView record by its code id (TimeDateStamp\n"
    "         as 8 hex digits + SizeOfImage hex, as in NAME/KEY/NAME; weaker than a PDB key).\n"
    "unwind   prints the unwind row covering each ADDRESS, one line each: x86_64 rows in\n"
    "         llvm-dwarfdump's notation (\"CFA=RSP+16: RBX=[CFA-16], RIP=[CFA-8]\"; other\n"
    "         architectures: DWARF register numbers \"r7\"), or \"end-of-stack\", \"full\" (the row\n"
    "         needs the CFI interpreter), \"none\" (no unwind information).\n"
    "export   writes the bundle's records in another format (default: to stdout; -o FILE, --output\n"
    "         FILE: to FILE): symbol-index-json (doc/symbol-index.md; every module, or the one\n"
    "         --build-id names) or symbfile (Elastic's symb-proto, lib/bundle/symbfile.proto; one\n"
    "         module: --build-id when there are several).\n"
    "put      stores bundle files and indexes their modules (the store then serves them by\n"
    "         identity); prints each one's sha256:<hex>. Indexing is this explicit act only:\n"
    "         bundles that trace-capture builds from a target's files are stored by content,\n"
    "         attached to their trace, and never indexed (doc/bundles.md \"Who indexes\").\n"
    "promote  indexes the modules of bundles already stored by content (a trace's bundle the\n"
    "         user has checked), replacing the id entries that named other bundles.\n"
    "fsck     checks the store: every blob re-hashed and validated, the id map both ways, an\n"
    "         id entry whose bundle disagrees with another stored bundle for the same id (two\n"
    "         different files claiming one build-id: a warning), the sidecars' structure; counts the\n"
    "         modules stored by content only. Errors on stdout, warnings on stderr.\n"
    "A store whose directories belong to another user (other than root) or are writable by\n"
    "others is refused (doc/bundles.md \"Store\").\n\n"
    "Exit status: 0 done (fsck: the store is clean); 1 the work failed (a file, bundle, key or\n"
    "the store could not be read or written; fsck: errors found); 2 usage error.\n";

int fail(const std::string& msg) {
  fprintf(stderr, "stackprov bundle: %s\n", msg.c_str());
  return 1;
}
int fail_lib(const std::string& what = "") {
  return fail(what.empty() ? std::string(sprov_last_error_message()) : what + ": " + sprov_last_error_message());
}
int usage(const std::string& msg) { return stackprov_cli::usage_error("bundle", msg); }

/// -o FILE, --output FILE and --out FILE (its older spelling).
const stackprov_cli::Args::Aliases kOutputAliases = {{"o", "output"}, {"out", "output"}};

/// A subcommand's options (argv[1] is the subcommand, so the positionals are what follows it).
stackprov_cli::Args parse(int argc, char** argv, const std::vector<std::string>& with_value,
                          const std::vector<std::string>& flags) {
  return stackprov_cli::Args(argc - 1, argv + 1, with_value, flags, kOutputAliases);
}

/// 0, or the usage error of a parse problem or of an option in `single` given twice.
int check_args(const stackprov_cli::Args& a, const std::vector<std::string>& single) {
  if (!a.error.empty()) return usage(a.error);
  if (std::string r = a.repeated(single); !r.empty()) return usage("option --" + r + " given twice");
  return 0;
}

/// 0, or the usage error for an input FILE (or BUNDLE file) that is a directory.
int check_not_directory(const std::string& path, const char* what) {
  std::string dir = stackprov_cli::directory_given(path);
  return dir.empty() ? 0 : usage(dir + ", not " + what);
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

/// Owners of C ABI handles and buffers.
struct Store {
  sprov_bundle_store* s = nullptr;
  ~Store() { sprov_bundle_store_free(s); }
};
struct Bundle {
  sprov_bundle* b = nullptr;
  ~Bundle() { sprov_bundle_free(b); }
};
struct Buf {
  void* p = nullptr;
  ~Buf() { sprov_free(p); }
  std::string_view view(size_t len) const { return std::string_view(static_cast<const char*>(p), len); }
};

/// Opens the store at `dir` ("" = the default directory); 0 or the exit code of the error it printed.
int open_store(const std::string& dir, bool create, Store* out) {
  if (sprov_bundle_store_open(dir.empty() ? nullptr : dir.c_str(), create ? SPROV_BUNDLE_STORE_CREATE : 0, &out->s) != 0)
    return fail_lib();
  return 0;
}

/// BUNDLE as a file, or sha256:HEX through the store; 0 or the exit code of the error it printed.
int open_bundle_arg(const std::string& arg, const std::string& store_dir, Bundle* out) {
  if (arg.rfind("sha256:", 0) == 0) {
    Store st;
    if (int rc = open_store(store_dir, false, &st)) return rc;
    if (sprov_bundle_open_digest(st.s, arg.c_str(), &out->b) != 0) return fail_lib();
    return 0;
  }
  if (int rc = check_not_directory(arg, "a bundle file")) return rc;
  if (sprov_bundle_open_file(arg.c_str(), &out->b) != 0) return fail_lib();
  return 0;
}

// ------------------------------------------------------------------ build

/// Progress on a terminal: modules, MB, ETA from the bytes done so far.
struct Progress {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool shown = false;
  static void report(void* ctx, size_t done, size_t count, uint64_t bytes_done, uint64_t bytes_total) {
    auto* p = static_cast<Progress*>(ctx);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
    char eta[32] = "?";
    if (bytes_done > 0 && bytes_total >= bytes_done)
      snprintf(eta, sizeof eta, "%.0fs", secs * static_cast<double>(bytes_total - bytes_done) / static_cast<double>(bytes_done));
    fprintf(stderr, "\rstackprov bundle: module %zu/%zu, %.1f/%.1f MB, ETA %s   ", done, count, bytes_done / 1e6,
            bytes_total / 1e6, done == count ? "0s" : eta);
    if (done == count) fputc('\n', stderr);
    p->shown = true;
  }
};

/// Input size from which a terminal shows progress.
constexpr uint64_t kProgressMinBytes = 4000000;

uint64_t total_size(const std::vector<std::string>& files) {
  uint64_t n = 0;
  for (const auto& f : files)
    if (FILE* fp = fopen(f.c_str(), "rb")) {
      if (fseek(fp, 0, SEEK_END) == 0) n += static_cast<uint64_t>(std::max(0L, ftell(fp)));
      fclose(fp);
    }
  return n;
}

/// Signs the stored bundle `digest` and stores envelope, proof and checkpoint as its sidecars.
int sign_stored(Store& st, const std::string& digest, const sprov_bundle_sign_opts& so, const std::string& log_dir) {
  uint64_t index = 0;
  if (sprov_bundle_store_sign(st.s, digest.c_str(), &so, &index) != 0) return fail_lib("sign");
  fprintf(stderr, "stackprov bundle: signed %s, log '%s' entry %" PRIu64 "\n", digest.c_str(), log_dir.c_str(), index);
  return 0;
}

int cmd_build(int argc, char** argv) {
  const auto a = parse(argc, argv,
                       {"output", "name", "store", "sign", "log", "log-key", "debug-file-directory", "symbol-path"},
                       {"include-debug"});
  if (int rc = check_args(a, {"output", "name", "store", "sign", "log", "log-key"})) return rc;
  const std::vector<std::string>& files = a.pos;
  // A symbol path is one more debug directory (a PE's PDB as DIR/NAME.pdb and DIR/NAME.pdb/KEY/NAME.pdb),
  // after the default one when none is given: as 'stackprov symbolize --symbol-path'.
  std::vector<std::string> dirs = a.all("debug-file-directory");
  const std::vector<std::string> symbol_paths = a.all("symbol-path");
  if (dirs.empty() && !symbol_paths.empty()) dirs.push_back("/usr/lib/debug");
  dirs.insert(dirs.end(), symbol_paths.begin(), symbol_paths.end());
  auto value = [&](const char* n) { return std::string(a.has(n) ? a.get(n) : ""); };
  std::string out = value("output"), name = value("name"), store_dir = value("store"), key = value("sign"),
              log_dir = value("log"), log_key = value("log-key");
  const bool has_store = a.has("store"), include_debug = a.has("include-debug");
  if (files.empty()) return usage("build needs a FILE");
  for (const auto& f : files)
    if (int rc = check_not_directory(f, "an ELF file")) return rc;
  if (!out.empty())
    if (int rc = check_not_directory(out, "a file to write")) return rc;
  if (!name.empty() && files.size() != 1) return usage("--name names one module: give one FILE");
  if (a.has("sign") && key.empty()) return usage("--sign needs a KEY");
  if (!key.empty() && log_dir.empty()) return usage("--sign KEY needs --log DIR (the transparency log)");
  if (key.empty() && (!log_dir.empty() || !log_key.empty())) return usage("--log and --log-key go with --sign KEY");
  if (log_key.empty()) log_key = key;
  const bool to_store = has_store || !key.empty();

  std::vector<const char*> paths, dirp;
  for (const auto& f : files) paths.push_back(f.c_str());
  for (const auto& d : dirs) dirp.push_back(d.c_str());
  const char* names[1] = {name.c_str()};
  Progress prog;
  const bool show = isatty(STDERR_FILENO) && total_size(files) >= kProgressMinBytes;
  SPROV_OPTS(sprov_bundle_build_opts, o, .names = name.empty() ? nullptr : names,
             .debug_dirs = dirp.empty() ? nullptr : dirp.data(), .debug_dir_count = dirp.size(),
             .flags = include_debug ? uint32_t{SPROV_BUNDLE_INCLUDE_DEBUG} : 0u, .reserved = 0,
             .progress = show ? &Progress::report : nullptr, .progress_ctx = &prog);
  // Keys that cannot sign fail here, before the store, the log or PATH is written.
  SPROV_OPTS(sprov_bundle_sign_opts, so, .key_path = key.c_str(), .log_dir = log_dir.c_str(),
             .log_key = log_key.c_str());
  if (!key.empty() && sprov_bundle_sign_check(&so) != 0) return fail_lib("sign");
  Buf bytes;
  size_t len = 0;
  char digest[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_build(paths.data(), paths.size(), &o, &bytes.p, &len, digest, sizeof digest) != 0) return fail_lib();
  if (to_store) {
    Store st;
    if (int rc = open_store(store_dir, true, &st)) return rc;
    if (sprov_bundle_store_put(st.s, bytes.p, len, digest, sizeof digest) != 0) return fail_lib();
    if (!key.empty())
      if (int rc = sign_stored(st, digest, so, log_dir)) return rc;
  }
  if (!out.empty() || !to_store) {
    if (out.empty()) {
      const size_t slash = files[0].rfind('/');
      out = (slash == std::string::npos ? files[0] : files[0].substr(slash + 1)) + ".sbundle";
    }
    const std::string err = stackprov_cli::write_file_atomic(out, bytes.view(len));
    if (!err.empty()) return fail(err);
  }
  printf("%s\n", digest);
  return 0;
}

// --------------------------------------------------------------- inspect

int cmd_inspect(int argc, char** argv) {
  const auto a = parse(argc, argv, {"store"}, {"json"});
  if (int rc = check_args(a, {"store"})) return rc;
  if (a.pos.empty()) return usage("inspect needs a BUNDLE");
  if (a.pos.size() > 1) return usage("unexpected argument '" + a.pos[1] + "' (inspect takes one BUNDLE)");
  const std::string arg = a.pos[0], store_dir = a.has("store") ? a.get("store") : "";
  const bool json = a.has("json");
  Bundle b;
  if (int rc = open_bundle_arg(arg, store_dir, &b)) return rc;
  char digest[SPROV_DIGEST_STRLEN];
  if (sprov_bundle_digest(b.b, digest, sizeof digest) != 0) return fail_lib();
  const size_t n = sprov_bundle_module_count(b.b);
  const unsigned long long size = sprov_bundle_size(b.b);
  std::vector<sprov_bundle_module> mods(n);
  for (size_t i = 0; i < n; ++i) {
    mods[i].sz = sizeof mods[i];
    if (sprov_bundle_module_info(b.b, i, &mods[i]) != 0) return fail_lib();
  }
  if (json) {
    printf("{\"bundle\":%s,\"size\":%llu,\"modules\":[", json_str(digest).c_str(), size);
    for (size_t i = 0; i < n; ++i) {
      const auto& m = mods[i];
      printf("%s{\"id_kind\":\"%s\",\"id\":\"%s\",\"name\":%s,\"sha256_file\":\"%s\",\"sha256_debug\":\"%s\","
             "\"ranges\":%" PRIu64 ",\"return_pads\":%" PRIu64 ",\"unwind_rows\":%" PRIu64 ",\"debug_blob\":%" PRIu64 "}",
             i ? "," : "", sprov_bundle_id_kind_name(static_cast<int>(m.id_kind)), m.id_hex, json_str(m.name).c_str(),
             m.sha256_file, m.sha256_debug, m.range_count, m.pad_count, m.unwind_row_count, m.debug_blob_size);
    }
    printf("]}\n");
    return 0;
  }
  printf("bundle %s (%llu bytes, %zu module%s)\n", digest, size, n, n == 1 ? "" : "s");
  for (const auto& m : mods) {
    printf("module %s %s name %s\n", sprov_bundle_id_kind_name(static_cast<int>(m.id_kind)), m.id_hex, m.name);
    printf("  sha256_file  %s\n  sha256_debug %s\n", m.sha256_file, m.sha256_debug);
    printf("  ranges %" PRIu64 " return_pads %" PRIu64 " unwind_rows %" PRIu64 " debug_blob %" PRIu64 " bytes\n",
           m.range_count, m.pad_count, m.unwind_row_count, m.debug_blob_size);
  }
  return 0;
}

// ------------------------------------------------------- lookup, unwind

bool parse_addr(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  *out = strtoull(hex ? s.c_str() + 2 : s.c_str(), &end, hex ? 16 : 10);
  return errno == 0 && end && *end == '\0' && end != (hex ? s.c_str() + 2 : s.c_str());
}

/// What `lookup` and `unwind` share: BUNDLE [--store DIR] [--build-id HEX] ADDRESS..., the
/// bundle opened and its module chosen (by build-id, or the only one). Addresses stay text:
/// each is checked when its turn comes, after the answers before it are printed.
struct ModuleQuery {
  Bundle bundle;
  size_t module = 0;
  std::vector<std::string> addrs;
};

/// The identities a bundle holds, for an error ("pdb-guid-age key KEY (id HEX), elf-build-id HEX").
std::string held_modules(const sprov_bundle* b) {
  std::string s;
  const size_t n = sprov_bundle_module_count(b);
  for (size_t i = 0; i < n && i < 4; i++) {
    sprov_bundle_module m{};
    m.sz = sizeof m;
    if (sprov_bundle_module_info(b, i, &m) != 0) continue;
    const std::string key = m.id_kind == SPROV_BUNDLE_ID_PDB_GUID_AGE ? stackprov_cli::pdb_id_hex_key(m.id_hex)
                            : m.id_kind == SPROV_BUNDLE_ID_PE_CODE_ID ? stackprov_cli::code_id_hex_key(m.id_hex)
                                                                      : "";
    s += std::string(s.empty() ? "" : ", ") + sprov_bundle_id_kind_name(static_cast<int>(m.id_kind)) +
         (key.empty() ? " " : " key " + key + " (id ") + m.id_hex + (key.empty() ? "" : ")");
  }
  if (n > 4) s += ", ... (" + std::to_string(n) + " modules)";
  return s.empty() ? "no module" : s;
}

/// 0 with *q filled, or the exit code of the error it printed.
int open_query(int argc, char** argv, const char* verb, ModuleQuery* q) {
  const auto a = parse(argc, argv, {"build-id", "pdb-key", "code-id", "store"}, {});
  if (int rc = check_args(a, {"build-id", "pdb-key", "code-id", "store"})) return rc;
  if (a.pos.empty()) return usage(std::string(verb) + " needs a BUNDLE");
  const std::string arg = a.pos[0], build_id = a.has("build-id") ? a.get("build-id") : "",
                    pdb_key = a.has("pdb-key") ? a.get("pdb-key") : "",
                    code_key = a.has("code-id") ? a.get("code-id") : "",
                    store_dir = a.has("store") ? a.get("store") : "";
  if (!build_id.empty() + !pdb_key.empty() + !code_key.empty() > 1)
    return usage("give one of --build-id '" + build_id + "', --pdb-key '" + pdb_key + "' and --code-id '" + code_key +
                 "'");
  const std::string pdb_id = stackprov_cli::pdb_key_id_hex(pdb_key);
  if (!pdb_key.empty() && pdb_id.empty())
    return usage("--pdb-key '" + pdb_key +
                 "' is not a PDB symbol-server key (32 hex digits of the GUID, then the age in hex)");
  const std::string code_id = stackprov_cli::code_id_key_id_hex(code_key);
  if (!code_key.empty() && code_id.empty())
    return usage("--code-id '" + code_key +
                 "' is not a PE code id (TimeDateStamp as 8 hex digits, then SizeOfImage in hex)");
  q->addrs.assign(a.pos.begin() + 1, a.pos.end());
  if (int rc = open_bundle_arg(arg, store_dir, &q->bundle)) return rc;
  const size_t n = sprov_bundle_module_count(q->bundle.b);
  if (!pdb_id.empty()) {
    if (sprov_bundle_find_module(q->bundle.b, SPROV_BUNDLE_ID_PDB_GUID_AGE, pdb_id.c_str(), &q->module) != 0)
      return fail("no module with pdb-guid-age key " + pdb_key + " (id " + pdb_id + ") in '" + arg + "': it holds " +
                  held_modules(q->bundle.b));
  } else if (!code_id.empty()) {
    if (sprov_bundle_find_module(q->bundle.b, SPROV_BUNDLE_ID_PE_CODE_ID, code_id.c_str(), &q->module) != 0)
      return fail("no module with pe-code-id key " + code_key + " (id " + code_id + ") in '" + arg + "': it holds " +
                  held_modules(q->bundle.b));
  } else if (!build_id.empty()) {
    if (sprov_bundle_find_module(q->bundle.b, SPROV_BUNDLE_ID_ELF_BUILD_ID, build_id.c_str(), &q->module) != 0)
      return sprov_last_error() == SPROV_ERR_INVALID_ARG
                 ? usage("--build-id '" + build_id + "' is not a hex build-id")
                 : fail("no module with build-id " + build_id + " in '" + arg + "'");
  } else if (n != 1) {
    return usage("'" + arg + "' holds " + std::to_string(n) + " modules: name one with --build-id, --pdb-key or --code-id");
  }
  return 0;
}

int cmd_lookup(int argc, char** argv) {
  ModuleQuery q;
  if (int rc = open_query(argc, argv, "lookup", &q)) return rc;
  for (const std::string& s : q.addrs) {
    uint64_t addr = 0;
    if (!parse_addr(s, &addr)) return usage("'" + s + "' is not an address (hex with 0x, or decimal)");
    sprov_bundle_chain* chain = nullptr;
    if (sprov_bundle_lookup(q.bundle.b, q.module, addr, &chain) != 0) return fail_lib();
    if (chain->count == 0) printf("??\n??:0:0\n");
    for (size_t i = 0; i < chain->count; ++i) {  // innermost first
      const sprov_bundle_frame& f = chain->frames[i];
      printf("%s\n%s:%u:%u\n", *f.function ? f.function : "??", *f.file ? f.file : "??", f.line, f.column);
    }
    printf("\n");
    sprov_free(chain);
  }
  fflush(stdout);
  return 0;
}

int cmd_unwind(int argc, char** argv) {
  ModuleQuery q;
  if (int rc = open_query(argc, argv, "unwind", &q)) return rc;
  for (const std::string& s : q.addrs) {
    uint64_t addr = 0;
    if (!parse_addr(s, &addr)) return usage("'" + s + "' is not an address (hex with 0x, or decimal)");
    char* text = nullptr;
    if (sprov_bundle_unwind_row_text(q.bundle.b, q.module, addr, &text, nullptr) != 0) return fail_lib();
    printf("%s\n", text);
    sprov_free(text);
  }
  fflush(stdout);
  return 0;
}

// ---------------------------------------------------------------- export

int cmd_export(int argc, char** argv) {
  const auto a = parse(argc, argv, {"format", "output", "build-id", "store"}, {});
  if (int rc = check_args(a, {"format", "output", "build-id", "store"})) return rc;
  if (a.pos.empty()) return usage("export needs a BUNDLE");
  if (a.pos.size() > 1) return usage("unexpected argument '" + a.pos[1] + "' (export takes one BUNDLE)");
  auto value = [&](const char* n) { return std::string(a.has(n) ? a.get(n) : ""); };
  const std::string arg = a.pos[0], format = value("format"), out = value("output"), build_id = value("build-id"),
                    store_dir = value("store");
  if (!out.empty())
    if (int rc = check_not_directory(out, "a file to write")) return rc;
  if (format != "symbol-index-json" && format != "symbfile")
    return usage("export needs --format symbol-index-json or --format symbfile");
  Bundle b;
  if (int rc = open_bundle_arg(arg, store_dir, &b)) return rc;
  size_t module = 0;
  const bool one = !build_id.empty();
  if (one && sprov_bundle_find_module(b.b, SPROV_BUNDLE_ID_ELF_BUILD_ID, build_id.c_str(), &module) != 0)
    return sprov_last_error() == SPROV_ERR_INVALID_ARG ? usage("--build-id '" + build_id + "' is not a hex build-id")
                                                       : fail("no module with build-id " + build_id + " in '" + arg + "'");
  const size_t n = sprov_bundle_module_count(b.b);
  if (format == "symbfile" && !one && n != 1)
    return usage("'" + arg + "' holds " + std::to_string(n) + " modules and a symbfile holds one: name it with --build-id");
  Buf bytes;
  size_t len = 0;
  const int fmt = format == "symbfile" ? SPROV_BUNDLE_EXPORT_SYMBFILE : SPROV_BUNDLE_EXPORT_SYMBOL_INDEX_JSON;
  if (sprov_bundle_export(b.b, fmt, one ? &module : nullptr, &bytes.p, &len) != 0) return fail_lib();
  if (!out.empty()) {
    const std::string err = stackprov_cli::write_file_atomic(out, bytes.view(len));
    return err.empty() ? 0 : fail(err);
  }
  const bool ok = fwrite(bytes.p, 1, len, stdout) == len;
  if (fflush(stdout) != 0 || !ok) return fail(std::string("cannot write to standard output: ") + strerror(errno));
  return 0;
}

// ------------------------------------------------------------------ fsck

int cmd_fsck(int argc, char** argv) {
  const auto a = parse(argc, argv, {"store"}, {});
  if (int rc = check_args(a, {"store"})) return rc;
  if (!a.pos.empty()) return usage("unexpected argument '" + a.pos[0] + "' (fsck takes [--store DIR])");
  const std::string store_dir = a.has("store") ? a.get("store") : "";
  Store st;
  if (int rc = open_store(store_dir, false, &st)) return rc;
  char* report = nullptr;
  size_t errors = 0;
  if (sprov_bundle_store_fsck(st.s, &report, nullptr, &errors) != 0) return fail_lib("fsck");
  // Errors and the summary on stdout, warnings on stderr.
  for (char *line = report, *nl; *line; line = nl + 1) {
    nl = strchr(line, '\n');
    if (!nl) break;
    *nl = '\0';
    fprintf(strncmp(line, "warning ", 8) == 0 ? stderr : stdout, "%s\n", line);
  }
  sprov_free(report);
  printf("%s: %s\n", sprov_bundle_store_dir(st.s), errors ? "ERRORS" : "clean");
  return errors ? 1 : 0;
}

// ------------------------------------------------------------------ put, promote

int cmd_put(int argc, char** argv, bool promote) {
  const char* sub = promote ? "promote" : "put";
  const auto a = parse(argc, argv, {"store"}, {});
  if (int rc = check_args(a, {"store"})) return rc;
  if (a.pos.empty()) return usage(std::string(sub) + (promote ? " needs sha256:HEX" : " needs a BUNDLEFILE"));
  for (const auto& p : a.pos) {
    if (promote && !stackprov_cli::is_sha256_digest(p))
      return usage("invalid digest '" + p + "' (expected sha256:<64 lowercase hex digits>)");
    if (!promote)
      if (int rc = check_not_directory(p, "a bundle file")) return rc;
  }
  Store st;
  if (int rc = open_store(a.has("store") ? a.get("store") : "", !promote, &st)) return rc;
  for (const auto& p : a.pos) {
    char digest[SPROV_DIGEST_STRLEN];
    if (promote ? sprov_bundle_store_promote(st.s, p.c_str()) : sprov_bundle_store_put_file(st.s, p.c_str(), digest, sizeof digest))
      return fail_lib(p);
    printf("%s\n", promote ? p.c_str() : digest);
  }
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
  if (sub == "fsck") return cmd_fsck(argc, argv);
  if (sub == "put") return cmd_put(argc, argv, false);
  if (sub == "promote") return cmd_put(argc, argv, true);
  return usage("unknown subcommand '" + sub + "' (build, inspect, lookup, unwind, export, put, promote or fsck)");
}

}  // namespace

STACKPROV_COMMAND("bundle", "symbol bundles: build them (into a store, signed), inspect, look addresses and unwind rows up, fsck the store", cmd_bundle);
