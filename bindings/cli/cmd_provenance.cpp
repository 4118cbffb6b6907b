// SPDX-License-Identifier: Apache-2.0
// CLI: keygen, sign, log (init/append/checkpoint/prove/consistency/verify...), trace-verify, verify-sigstore.
#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "stackprov/bundle.h"
#include "stackprov/stackprov.h"
#include "stackprov/trace.h"

namespace {

using stackprov_cli::Args;
using stackprov_cli::directory_given;
using stackprov_cli::kExitFail;
using stackprov_cli::kExitOk;
using stackprov_cli::kExitUsage;
using stackprov_cli::parse_uint;
using stackprov_cli::usage_error;

/// -o FILE, --output FILE, and --out FILE (its older spelling), for every command that writes a file.
const Args::Aliases kOutputAliases = {{"o", "output"}, {"out", "output"}};

int fail(const char* cmd, const std::string& msg) {
  fprintf(stderr, "stackprov %s: %s\n", cmd, msg.c_str());
  return kExitFail;
}

int lib_error(const char* cmd, const char* what = nullptr) {
  fprintf(stderr, "stackprov %s: %s%s%s\n", cmd, what ? what : "", what ? ": " : "", sprov_last_error_message());
  return kExitFail;
}

bool read_all(const std::string& path, std::string* out, std::string* err) {
  if (path != "-")
    if (std::string dir = directory_given(path); !dir.empty()) {
      *err = dir + ", not a file";
      return false;
    }
  FILE* f = path == "-" ? stdin : fopen(path.c_str(), "rb");
  if (!f) {
    *err = "cannot open '" + path + "': " + strerror(errno);
    return false;
  }
  char buf[65536];
  size_t n;
  out->clear();
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
    out->append(buf, n);
    if (out->size() > (64u << 20)) {
      *err = "'" + path + "' is larger than 64 MiB";
      if (f != stdin) fclose(f);
      return false;
    }
  }
  bool bad = ferror(f);
  if (f != stdin) fclose(f);
  if (bad) *err = "read error on '" + path + "'";
  return !bad;
}

/// `data` to standard output (path NULL or "-") or to the file `path` (write_file_atomic).
bool write_out(const char* path, const char* data, size_t len, std::string* err) {
  if (!path || std::string(path) == "-") {
    fwrite(data, 1, len, stdout);
    return true;
  }
  *err = stackprov_cli::write_file_atomic(path, std::string_view(data, len));
  return err->empty();
}

// ------------------------------------------------------------------ keygen

int cmd_keygen(int argc, char** argv) {
  Args a(argc, argv, {"output", "pub"}, {}, kOutputAliases);
  if (a.help) {
    printf("usage: stackprov keygen -o KEY [--pub PUB]\n\n"
           "options:\n"
           "  -o, --output KEY  the private key file to create (--out KEY: the same)\n"
           "  --pub PUB         the public key file (default KEY.pub)\n"
           "  -h, --help        this text\n\n"
           "Generates an ECDSA P-256 signing key (mbedTLS). The private key is written to KEY\n"
           "as SEC1 PEM with mode 0600 (KEY must not exist); the public key to PUB (default\n"
           "KEY.pub) as SPKI PEM. Prints the key id: hex SHA-256 of the DER public key.\n"
           "The private key is never printed. Sign with KEY; give KEY.pub to verifiers.\n\n"
           "Exit status: 0 the key was written; 1 it could not be (KEY or PUB exists, a write\n"
           "failed); 2 usage error.\n");
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error("keygen", a.error);
  if (!a.pos.empty()) return usage_error("keygen", "unexpected argument '" + a.pos[0] + "'");
  if (!a.has("output")) return usage_error("keygen", "-o KEY (the private key file to create) is required");
  std::string pub = a.has("pub") ? a.get("pub") : std::string(a.get("output")) + ".pub";
  for (const std::string& f : {std::string(a.get("output")), pub})
    if (std::string dir = directory_given(f); !dir.empty())
      return usage_error("keygen", dir + ": give a key file to create");
  char id[SPROV_KEY_ID_STRLEN];
  if (sprov_key_generate(a.get("output"), pub.c_str(), id, sizeof(id)) != 0) return lib_error("keygen");
  printf("private key: %s (mode 0600)\npublic key:  %s\nkey id:      %s\n", a.get("output"), pub.c_str(), id);
  return kExitOk;
}

// -------------------------------------------------------------------- sign

int cmd_sign(int argc, char** argv) {
  Args a(argc, argv, {"key", "output", "subject-name", "predicate-type", "predicate"}, {}, kOutputAliases);
  if (a.help) {
    printf("usage: stackprov sign --key KEY [-o ENVELOPE] [--subject-name NAME]\n"
           "                      [--predicate-type URI] [--predicate FILE.json] FILE\n\n"
           "options:\n"
           "  --key KEY              the private key (not KEY.pub)\n"
           "  -o, --output ENVELOPE  write the envelope JSON to ENVELOPE (default: standard output;\n"
           "                         --out: the same)\n"
           "  --subject-name NAME    the subject's name (default: FILE's base name)\n"
           "  --predicate-type URI   the statement's predicateType\n"
           "  --predicate FILE.json  the statement's predicate\n"
           "  -h, --help             this text\n\n"
           "Signs an in-toto Statement v1 whose subject is FILE's sha256 (name: NAME or FILE's\n"
           "base name) as a DSSE envelope (payloadType application/vnd.in-toto+json), with the\n"
           "P-256 private key KEY ('stackprov keygen') and an RFC 6979 deterministic ECDSA\n"
           "signature. The predicate type defaults to https://stackprov.dev/provenance/v1 and the\n"
           "predicate to {}.\n\n"
           "Exit status: 0 signed; 1 signing failed (the key cannot sign, FILE cannot be read,\n"
           "ENVELOPE cannot be written); 2 usage error.\n");
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error("sign", a.error);
  if (!a.has("key")) return usage_error("sign", "--key KEY is required");
  if (a.pos.size() != 1) return usage_error("sign", "exactly one FILE to sign is required");
  for (const char* f : {a.get("key"), a.pos[0].c_str(), a.get("output")})
    if (std::string dir = f ? directory_given(f) : ""; !dir.empty()) return usage_error("sign", dir + ", not a file");
  std::string predicate, err;
  if (a.has("predicate") && !read_all(a.get("predicate"), &predicate, &err)) return usage_error("sign", err);
  SPROV_OPTS(sprov_sign_opts, o, .subject_name = a.get("subject-name"), .predicate_type = a.get("predicate-type"),
             .predicate_json = a.has("predicate") ? predicate.c_str() : nullptr);
  char* env = nullptr;
  size_t len = 0;
  if (sprov_dsse_sign_file(a.get("key"), a.pos[0].c_str(), &o, &env, &len) != 0) return lib_error("sign");
  bool ok = write_out(a.get("output"), env, len, &err);
  sprov_free(env);
  if (!ok) return fail("sign", err);
  if (a.has("output")) {
    char d[SPROV_DIGEST_STRLEN];
    if (sprov_digest_file(a.pos[0].c_str(), d, sizeof(d)) == 0)
      fprintf(stderr, "signed %s (%s) -> %s\n", a.pos[0].c_str(), d, a.get("output"));
  }
  return kExitOk;
}

// --------------------------------------------------------------------- log

const char* kLogHelp =
    "usage: stackprov log init DIR --key KEY [--origin ORIGIN]\n"
    "       stackprov log append DIR [--key KEY] FILE...\n"
    "       stackprov log checkpoint DIR --key KEY\n"
    "       stackprov log prove DIR (--index N | --entry FILE) [-o PROOF]\n"
    "       stackprov log fragment DIR (--index N | --entry FILE) -o FRAGDIR\n"
    "       stackprov log consistency DIR --old N [--new M] [-o PROOF]\n"
    "       stackprov log verify DIR\n"
    "       stackprov log verify-proof --proof PROOF --entry FILE --log-key PUB --origin ORIGIN\n"
    "       stackprov log verify-fragment --fragment FRAGDIR --entry FILE --log-key PUB --origin ORIGIN\n"
    "       stackprov log verify-consistency --old-checkpoint A --new-checkpoint B --proof PROOF\n"
    "                                        --log-key PUB --origin ORIGIN\n\n"
    "options (which action takes which: the usage above, the actions below):\n"
    "  --key KEY          the log's private key, which signs its checkpoints\n"
    "  --origin ORIGIN    the log's origin (init: default 'stackprov.local/<base name of DIR>';\n"
    "                     verify-*: the origin the checkpoint must name)\n"
    "  --index N          the entry at index N\n"
    "  --entry FILE       the entry whose bytes are FILE's\n"
    "  --old N, --new M   sizes of the log\n"
    "  -o, --output FILE  writes the proof to FILE (default: standard output; --out: the same);\n"
    "                     fragment: the directory FRAGDIR\n"
    "  --proof PROOF      a proof file (C2SP tlog-proof@v1, or a consistency proof)\n"
    "  --fragment FRAGDIR a tile fragment directory ('log fragment')\n"
    "  --log-key PUB      the log's public key\n"
    "  --old-checkpoint A, --new-checkpoint B\n"
    "                     the checkpoints of verify-consistency\n"
    "  -h, --help         this text\n\n"
    "actions:\n"
    "  init DIR --key KEY [--origin ORIGIN]\n"
    "        create an empty log whose checkpoints KEY (P-256) signs; ORIGIN defaults to\n"
    "        'stackprov.local/<base name of DIR>' and is also the checkpoint key name\n"
    "  append DIR [--key KEY] FILE...\n"
    "        append each FILE ('-': standard input) as one entry (1..65535 bytes), all in\n"
    "        one crash-safe step; with --key also sign a new checkpoint, in the same step: a\n"
    "        KEY that is not the log's private key fails before anything is written. Prints\n"
    "        '<index> <FILE>' for each entry\n"
    "  checkpoint DIR --key KEY\n"
    "        sign a checkpoint of everything appended so far; prints it\n"
    "  prove DIR (--index N | --entry FILE) [-o PROOF]\n"
    "        inclusion proof against the stored checkpoint, as C2SP tlog-proof@v1\n"
    "  fragment DIR (--index N | --entry FILE) -o FRAGDIR\n"
    "        tile fragment: the checkpoint plus the tiles (at most 2 per level) that rebuild\n"
    "        the entry's inclusion proof, as a sparse tlog-tiles directory FRAGDIR\n"
    "  consistency DIR --old N [--new M] [-o PROOF]\n"
    "        consistency proof from size N to M (default: the stored checkpoint's size)\n"
    "  verify DIR\n"
    "        recompute every tile from the entries, the root, and check the checkpoint\n"
    "  verify-proof --proof PROOF --entry FILE --log-key PUB --origin ORIGIN\n"
    "        offline check of a tlog-proof@v1 for the entry\n"
    "  verify-fragment --fragment FRAGDIR --entry FILE --log-key PUB --origin ORIGIN\n"
    "        offline check of a tile fragment for the entry\n"
    "  verify-consistency --old-checkpoint A --new-checkpoint B --proof PROOF --log-key PUB --origin ORIGIN\n"
    "        offline check that checkpoint B extends checkpoint A\n\n"
    "A local append-only transparency log (RFC 9162 Merkle tree) stored in the C2SP\n"
    "tlog-tiles layout: DIR/tile/<L>/<N>[.p/<W>], DIR/tile/entries/<N>[.p/<W>],\n"
    "DIR/checkpoint (a C2SP signed note), plus DIR/log.json, DIR/log.pub,\n"
    "DIR/trusted_root.json and DIR/state (the committed size and root).\n\n"
    "KEY is a private key ('stackprov keygen'); PUB a public key (the log's DIR/log.pub).\n"
    "A failed action leaves the log as it was.\n\n"
    "Exit status: 0 done (verify*: verified); 1 the action failed (a check failed, the log or a\n"
    "file could not be read or written, KEY is not the log's key); 2 usage error.\n";

std::string default_origin(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto s = d.rfind('/');
  std::string base = s == std::string::npos ? d : d.substr(s + 1);
  std::string clean;
  for (char c : base) clean += (c == ' ' || c == '+' || c == '\n') ? '_' : c;
  return "stackprov.local/" + (clean.empty() ? std::string("log") : clean);
}

int log_open(const char* cmd, const std::string& dir, sprov_tlog** out) {
  if (sprov_tlog_open(dir.c_str(), out) != 0) return lib_error(cmd);
  return 0;
}

int cmd_log(int argc, char** argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(kLogHelp, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  std::string action = argv[1];
  Args a(argc - 1, argv + 1,
         {"key", "origin", "index", "entry", "output", "old", "new", "proof", "log-key",
          "old-checkpoint", "new-checkpoint", "fragment"},
         {}, kOutputAliases);
  if (a.help) {
    fputs(kLogHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error("log", a.error);
  std::string err;
  bool needs_dir = action != "verify-proof" && action != "verify-consistency" && action != "verify-fragment";
  if (needs_dir && a.pos.empty()) return usage_error("log", "'log " + action + "' needs a log directory");
  std::string dir = needs_dir ? a.pos[0] : "";
  if (a.has("output") && action != "fragment")  // -o names a file (fragment: a directory)
    if (std::string d = directory_given(a.get("output")); !d.empty()) return usage_error("log", d + ", not a file");

  if (action == "init") {
    if (!a.has("key")) return usage_error("log", "'log init' needs --key KEY");
    if (a.pos.size() != 1) return usage_error("log", "unexpected argument '" + a.pos[1] + "'");
    std::string origin = a.has("origin") ? a.get("origin") : default_origin(dir);
    sprov_tlog* log = nullptr;
    if (sprov_tlog_init(dir.c_str(), origin.c_str(), a.get("key"), &log) != 0) return lib_error("log init");
    sprov_tlog_free(log);
    printf("log %s initialised, origin '%s'\n", dir.c_str(), origin.c_str());
    return kExitOk;
  }
  if (action == "append") {
    if (a.pos.size() < 2) return usage_error("log", "'log append' needs at least one FILE");
    std::vector<std::string> data(a.pos.size() - 1);
    for (size_t i = 1; i < a.pos.size(); ++i)
      if (!read_all(a.pos[i], &data[i - 1], &err)) return usage_error("log", err);
    std::vector<const void*> ptrs;
    std::vector<size_t> lens;
    for (const auto& d : data) {
      ptrs.push_back(d.data());
      lens.push_back(d.size());
    }
    sprov_tlog* log = nullptr;
    if (int rc = log_open("log append", dir, &log)) return rc;
    uint64_t first = 0;
    // With --key: entries and checkpoint in one step, the key checked before anything is written.
    int rc = sprov_tlog_append_checkpoint(log, ptrs.data(), lens.data(), ptrs.size(), a.get("key"), &first, nullptr,
                                          nullptr);
    sprov_tlog_free(log);
    if (rc != 0) return lib_error("log append");
    for (size_t i = 0; i < data.size(); ++i) printf("%llu %s\n", (unsigned long long)(first + i), a.pos[i + 1].c_str());
    return kExitOk;
  }
  if (action == "checkpoint") {
    if (!a.has("key")) return usage_error("log", "'log checkpoint' needs --key KEY");
    sprov_tlog* log = nullptr;
    if (int rc = log_open("log checkpoint", dir, &log)) return rc;
    char* note = nullptr;
    size_t len = 0;
    int rc = sprov_tlog_checkpoint(log, a.get("key"), &note, &len);
    sprov_tlog_free(log);
    if (rc != 0) return lib_error("log checkpoint");
    fwrite(note, 1, len, stdout);
    sprov_free(note);
    return kExitOk;
  }
  if (action == "prove" || action == "fragment") {
    if (a.has("index") == a.has("entry"))
      return usage_error("log", "'log " + action + "' needs exactly one of --index N and --entry FILE");
    if (action == "fragment" && !a.has("output")) return usage_error("log", "'log fragment' needs -o FRAGDIR");
    sprov_tlog* log = nullptr;
    if (int rc = log_open("log prove", dir, &log)) return rc;
    uint64_t index = 0;
    if (a.has("index")) {
      if (!parse_uint(a.get("index"), &index)) {
        sprov_tlog_free(log);
        return usage_error("log", std::string("--index '") + a.get("index") + "' is not a non-negative integer");
      }
    } else {
      std::string entry;
      if (!read_all(a.get("entry"), &entry, &err)) {
        sprov_tlog_free(log);
        return usage_error("log", err);
      }
      if (sprov_tlog_find(log, entry.data(), entry.size(), &index) != 0) {
        sprov_tlog_free(log);
        return lib_error("log prove");
      }
    }
    if (action == "fragment") {
      int rc = sprov_tlog_export_fragment(log, index, a.get("output"));
      sprov_tlog_free(log);
      if (rc != 0) return lib_error("log fragment");
      printf("fragment for index %llu written to %s\n", (unsigned long long)index, a.get("output"));
      return kExitOk;
    }
    char* proof = nullptr;
    size_t len = 0;
    int rc = sprov_tlog_prove(log, index, &proof, &len);
    sprov_tlog_free(log);
    if (rc != 0) return lib_error("log prove");
    bool ok = write_out(a.get("output"), proof, len, &err);
    sprov_free(proof);
    return ok ? kExitOk : fail("log", err);
  }
  if (action == "consistency") {
    uint64_t old_size = 0, new_size = 0;
    if (!parse_uint(a.get("old"), &old_size)) return usage_error("log", "'log consistency' needs --old N (a non-negative integer)");
    if (a.has("new") && !parse_uint(a.get("new"), &new_size))
      return usage_error("log", std::string("--new '") + a.get("new") + "' is not a non-negative integer");
    sprov_tlog* log = nullptr;
    if (int rc = log_open("log consistency", dir, &log)) return rc;
    char* proof = nullptr;
    size_t len = 0;
    int rc = sprov_tlog_consistency(log, old_size, new_size, &proof, &len);
    sprov_tlog_free(log);
    if (rc != 0) return lib_error("log consistency");
    bool ok = write_out(a.get("output"), proof, len, &err);
    sprov_free(proof);
    return ok ? kExitOk : fail("log", err);
  }
  if (action == "verify") {
    sprov_tlog* log = nullptr;
    if (int rc = log_open("log verify", dir, &log)) return rc;
    int rc = sprov_tlog_fsck(log);
    uint64_t n = sprov_tlog_size(log);
    sprov_tlog_free(log);
    if (rc != 0) return lib_error("log verify");
    printf("log %s: OK, %llu entries, tiles, root and checkpoint verified\n", dir.c_str(), (unsigned long long)n);
    return kExitOk;
  }
  if (action == "verify-proof") {
    if (!a.has("proof") || !a.has("entry")) return usage_error("log", "'log verify-proof' needs --proof PROOF and --entry FILE");
    std::string proof, entry;
    if (!read_all(a.get("proof"), &proof, &err) || !read_all(a.get("entry"), &entry, &err)) return usage_error("log", err);
    if (!a.has("log-key") || !a.has("origin")) return usage_error("log", "'log verify-proof' needs --log-key PUB and --origin ORIGIN");
    if (sprov_tlog_verify_proof(proof.data(), proof.size(), entry.data(), entry.size(), a.get("log-key"), a.get("origin")) != 0) {
      fprintf(stderr, "stackprov log verify-proof: FAIL %s\n", sprov_last_error_message());
      return kExitFail;
    }
    printf("OK: %s is included in log '%s'\n", a.get("entry"), a.get("origin"));
    return kExitOk;
  }
  if (action == "verify-fragment") {
    if (!a.has("fragment") || !a.has("entry") || !a.has("log-key") || !a.has("origin"))
      return usage_error("log", "'log verify-fragment' needs --fragment FRAGDIR, --entry FILE, --log-key PUB and --origin ORIGIN");
    std::string entry;
    if (!read_all(a.get("entry"), &entry, &err)) return usage_error("log", err);
    if (sprov_tlog_verify_fragment(a.get("fragment"), entry.data(), entry.size(), a.get("log-key"), a.get("origin")) != 0) {
      fprintf(stderr, "stackprov log verify-fragment: FAIL %s\n", sprov_last_error_message());
      return kExitFail;
    }
    printf("OK: %s is included in log '%s' (tile fragment %s)\n", a.get("entry"), a.get("origin"), a.get("fragment"));
    return kExitOk;
  }
  if (action == "verify-consistency") {
    if (!a.has("old-checkpoint") || !a.has("new-checkpoint") || !a.has("proof") || !a.has("log-key") || !a.has("origin"))
      return usage_error("log", "'log verify-consistency' needs --old-checkpoint, --new-checkpoint, --proof, --log-key and --origin");
    std::string o, n, p;
    if (!read_all(a.get("old-checkpoint"), &o, &err) || !read_all(a.get("new-checkpoint"), &n, &err) ||
        !read_all(a.get("proof"), &p, &err))
      return usage_error("log", err);
    if (sprov_tlog_verify_consistency(o.c_str(), n.c_str(), p.c_str(), a.get("log-key"), a.get("origin")) != 0) {
      fprintf(stderr, "stackprov log verify-consistency: FAIL %s\n", sprov_last_error_message());
      return kExitFail;
    }
    printf("OK: checkpoint %s extends %s\n", a.get("new-checkpoint"), a.get("old-checkpoint"));
    return kExitOk;
  }
  return usage_error("log", "unknown action '" + action + "'");
}

// ------------------------------------------------------------ trace-verify

/// A path the C ABI returned (released with sprov_free), or "".
std::string take_path(char* p) {
  std::string s = p ? p : "";
  sprov_free(p);
  return s;
}

int trace_verify_fail(const std::string& check, const char* msg) {
  fprintf(stderr, "trace-verify: FAIL %s: %s\n", check.c_str(), msg);
  return kExitFail;
}

/// A trace store URL (doc/traces.md "Stores") rather than a bundle store directory.
bool is_trace_store_url(const std::string& s) {
  return s.rfind("sqlite:", 0) == 0 || s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }

/// A mkdtemp directory under $TMPDIR (default /tmp), removed with everything in it when the
/// object goes out of scope.
struct TempDir {
  std::string path;
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path.empty()) nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  bool create(const char* prefix, std::string* err) {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      *err = "cannot create a temporary directory '" + tmpl + "': " + strerror(errno);
      return false;
    }
    path = buf.data();
    return true;
  }
};

int cmd_trace_verify(int argc, char** argv) {
  Args a(argc, argv, {"bundle", "envelope", "artifact", "key", "threshold", "trusted-root", "log", "proof", "store"},
         {"dsse", "rekor"});
  if (a.help) {
    printf("usage: stackprov trace-verify --bundle sha256:HEX [--envelope ENVELOPE] [--artifact FILE]\n"
           "                              [--store DIR|URL]\n"
           "                              [--dsse --key PUB [--key PUB]... [--threshold N]]\n"
           "                              [--rekor --trusted-root FILE [--log DIR | --proof PROOF]]\n\n"
           "options:\n"
           "  --bundle sha256:HEX  the file's digest; ENVELOPE's in-toto statement must name it\n"
           "  --envelope ENVELOPE  the DSSE envelope (default: from the store, see --store)\n"
           "  --artifact FILE      also check that FILE hashes to that digest\n"
           "  --store DIR          a symbol-bundle store (doc/bundles.md; default as 'stackprov bundle'):\n"
           "                       without --envelope, the bundle's blob is re-hashed (as --artifact),\n"
           "                       the envelope is its 'dsse.json' sidecar and, for --rekor without\n"
           "                       --log/--proof, the proof its 'tlog-proof' sidecar. The store only\n"
           "                       supplies data: the keys are pinned by --key and --trusted-root,\n"
           "                       which is then required.\n"
           "  --store URL          a trace store (doc/traces.md: sqlite:PATH of an existing file,\n"
           "                       postgresql://... or postgres://...): without --envelope, the bundle,\n"
           "                       its envelope, proof and checkpoint are copied from the store's\n"
           "                       symbol_bundles into a temporary bundle store directory ($TMPDIR,\n"
           "                       default /tmp), verified from there as with --store DIR, and the\n"
           "                       directory is removed afterwards. Without --store, a\n"
           "                       $STACKPROV_STORE that is such a URL is used the same way\n"
           "                       (otherwise it names the bundle store directory).\n"
           "  --dsse               verify the DSSE signatures: at least N (default 1, at most 256)\n"
           "                       distinct keys among the --key files (PEM/DER public keys or\n"
           "                       certificates)\n"
           "  --rekor              verify that ENVELOPE (its exact bytes) is an entry of a\n"
           "                       transparency log, under a checkpoint signed by a log of the\n"
           "                       trusted root given by --trusted-root FILE (required: the\n"
           "                       log directory's own trusted_root.json is never trusted, since\n"
           "                       whoever writes DIR would decide what verifies). With --log the\n"
           "                       proof is built from the log's tiles; with --proof a C2SP\n"
           "                       tlog-proof@v1 file is used.\n"
           "  --key PUB            with --dsse: a public key (repeatable)\n"
           "  --threshold N        with --dsse: how many distinct keys must have signed, 1 to 256\n"
           "                       (default 1)\n"
           "  --trusted-root FILE  with --rekor: the log's pinned trusted_root.json (required)\n"
           "  --log DIR            with --rekor: build the proof from the log's tiles\n"
           "  --proof PROOF        with --rekor: a C2SP tlog-proof@v1 file\n"
           "  -h, --help           this text\n\n"
           "Offline verification of a content-addressed file's provenance, with the checks and data\n"
           "the options above select.\n"
           "PUB is a public key: a private key given as --key is refused (give KEY.pub).\n\n"
           "Exit status: 0 verified; 1 a check failed, or the store could not be read (one line\n"
           "names it); 2 usage error.\n");
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error("trace-verify", a.error);
  if (!a.pos.empty()) return usage_error("trace-verify", "unexpected argument '" + a.pos[0] + "'");
  if (!a.has("bundle")) return usage_error("trace-verify", "--bundle sha256:HEX is required");
  std::string digest = a.get("bundle");  // hex digits of either case
  std::transform(digest.begin(), digest.end(), digest.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!stackprov_cli::is_sha256_digest(digest))
    return usage_error("trace-verify", std::string("invalid --bundle value '") + a.get("bundle") +
                                           "' (expected sha256:<64 hex digits>)");
  bool dsse = a.has("dsse"), rekor = a.has("rekor");
  if (!dsse && !rekor) return usage_error("trace-verify", "nothing to verify: give --dsse, --rekor or both");
  auto keys = a.all("key");
  if (dsse && keys.empty()) return usage_error("trace-verify", "--dsse needs at least one --key PUB");
  uint64_t threshold = 1;
  if (a.has("threshold") && (!parse_uint(a.get("threshold"), &threshold) || threshold == 0 || threshold > 256))
    return usage_error("trace-verify", std::string("--threshold '") + a.get("threshold") + "' is not an integer in 1..256");
  // Without --envelope the evidence comes from the bundle store (sidecars of the blob).
  const bool from_store = !a.has("envelope");
  const bool store_proof = rekor && !a.has("log") && !a.has("proof");
  if (!from_store && rekor && !a.has("log") && !a.has("proof"))
    return usage_error("trace-verify", "--rekor needs --log DIR or --proof PROOF (or the store: no --envelope)");
  if (rekor && !a.has("trusted-root"))
    return usage_error("trace-verify", "--rekor needs --trusted-root FILE (the log's pinned trusted_root.json: "
                                       "a log directory or a store never vouches for itself)");
  std::string artifact = a.has("artifact") ? a.get("artifact") : "";
  std::string envelope = a.has("envelope") ? a.get("envelope") : "";
  std::string proof = a.has("proof") ? a.get("proof") : "";
  // A trace store URL (--store, else a $STACKPROV_STORE that is one): export the bundle into a
  // temporary bundle store first. `temp` removes that directory on every return below.
  std::string store_dir = a.has("store") ? a.get("store") : "";
  std::string trace_url;
  if (a.has("store") && is_trace_store_url(store_dir)) {
    trace_url = store_dir;
    struct stat st;  // an SQLite store is opened read-write and would be created: it must exist
    if (trace_url.rfind("sqlite:", 0) == 0 && trace_url.size() > 7 && stat(trace_url.c_str() + 7, &st) != 0)
      return usage_error("trace-verify", "--store '" + trace_url + "': " + (trace_url.c_str() + 7) + ": " + strerror(errno));
  } else if (a.has("store") && store_dir.find("://") != std::string::npos) {
    return usage_error("trace-verify", "--store '" + store_dir +
                                           "' is neither a directory nor a trace store URL (sqlite:PATH, "
                                           "postgresql://..., postgres://...)");
  } else if (!a.has("store")) {
    const char* env = getenv("STACKPROV_STORE");
    if (env && is_trace_store_url(env)) trace_url = env;
  }
  TempDir temp;
  if (from_store && !trace_url.empty()) {
    std::string err;
    if (!temp.create("stackprov-verify", &err)) return trace_verify_fail("store", err.c_str());
    store_dir = temp.path + "/bundles";
    sprov_trace_store* ts = nullptr;
    if (sprov_trace_store_open(trace_url.c_str(), &ts) != 0) return trace_verify_fail("store", sprov_last_error_message());
    sprov_bundle_store* bs = nullptr;
    int rc = sprov_bundle_store_open(store_dir.c_str(), SPROV_BUNDLE_STORE_CREATE, &bs);
    if (rc == 0) rc = sprov_trace_store_export_bundle(ts, a.get("bundle"), bs);
    std::string msg = rc != 0 ? sprov_last_error_message() : "";
    sprov_bundle_store_free(bs);
    sprov_trace_store_free(ts);
    if (rc != 0) return trace_verify_fail("store", msg.c_str());
  }
  if (from_store) {
    sprov_bundle_store* st = nullptr;
    if (sprov_bundle_store_open(store_dir.empty() ? nullptr : store_dir.c_str(), 0, &st) != 0)
      return trace_verify_fail("store", sprov_last_error_message());
    char* p = nullptr;
    int rc = 0;
    std::string check;
    if (artifact.empty()) {
      rc = sprov_bundle_store_blob_path(st, a.get("bundle"), &p, nullptr);
      artifact = take_path(rc == 0 ? p : nullptr);
      check = "artifact-digest";
    }
    if (rc == 0) {
      rc = sprov_bundle_store_sidecar_path(st, a.get("bundle"), "dsse.json", &p, nullptr);
      envelope = take_path(rc == 0 ? p : nullptr);
      check = "envelope";
    }
    if (rc == 0 && store_proof) {
      rc = sprov_bundle_store_sidecar_path(st, a.get("bundle"), "tlog-proof", &p, nullptr);
      proof = take_path(rc == 0 ? p : nullptr);
      check = "log-proof";
    }
    if (rc != 0) {
      std::string msg = sprov_last_error_message();
      sprov_bundle_store_free(st);
      return trace_verify_fail(check, msg.c_str());
    }
    sprov_bundle_store_free(st);
  }
  std::vector<const char*> kp;
  for (const auto& k : keys) kp.push_back(k.c_str());
  SPROV_OPTS(sprov_trace_verify_opts, o, .digest = a.get("bundle"), .artifact_path = artifact.empty() ? nullptr : artifact.c_str(),
             .envelope_path = envelope.c_str(), .check_dsse = dsse, .check_log = rekor,
             .key_paths = kp.empty() ? nullptr : kp.data(), .key_count = kp.size(),
             .threshold = static_cast<uint32_t>(threshold), .reserved = 0, .trusted_root_path = a.get("trusted-root"),
             .log_dir = a.get("log"), .proof_path = proof.empty() ? nullptr : proof.c_str());
  char* report = nullptr;
  size_t len = 0;
  if (sprov_trace_verify(&o, &report, &len) != 0) {
    fprintf(stderr, "trace-verify: FAIL %s\n", sprov_last_error_message());
    return kExitFail;
  }
  fwrite(report, 1, len, stdout);
  printf("trace-verify: OK %s\n", a.get("bundle"));
  sprov_free(report);
  return kExitOk;
}

// --------------------------------------------------------- verify-sigstore

int cmd_verify_sigstore(int argc, char** argv) {
  Args a(argc, argv, {"trusted-root", "artifact", "digest"}, {"quiet"});
  if (a.help) {
    printf("usage: stackprov verify-sigstore BUNDLE.json --trusted-root FILE\n"
           "                                 [--artifact FILE | --digest sha256:HEX] [--quiet]\n\n"
           "options:\n"
           "  --trusted-root FILE  the Sigstore trusted root (trusted_root.json) whose transparency\n"
           "                       logs the bundle's entries must come from (required)\n"
           "  --artifact FILE      the artifact whose digest the bundle must name\n"
           "  --digest sha256:HEX  that digest, without the file\n"
           "  --quiet              print only the last line (verify-sigstore: OK BUNDLE.json), no report\n"
           "  -h, --help           this text\n\n"
           "Offline verification of a Sigstore bundle (v0.1, v0.2, v0.3; Rekor v1 and v2 entries):\n"
           "  signed entry timestamp (Rekor v1, within the log key's validity window), Merkle\n"
           "  inclusion proof, checkpoint signature (ECDSA P-256 or Ed25519) and its root/size,\n"
           "  the log entry body against the bundle (hashedrekord 0.0.1/0.0.2, dsse 0.0.1,\n"
           "  intoto 0.0.2), certificate validity at integratedTime, the DSSE or message\n"
           "  signature with the bundle's leaf certificate key, the DSSE payloadType, and with\n"
           "  --artifact/--digest the artifact's digest (in-toto subject or messageDigest).\n"
           "NOT verified: the certificate chain to Fulcio, SCTs, identity policy (SAN/issuer),\n"
           "  RFC 3161 timestamps. See doc/provenance.md.\n\n"
           "Exit status: 0 verified; 1 a check failed (one line: the check and the values);\n"
           "2 usage error.\n");
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error("verify-sigstore", a.error);
  if (a.pos.size() != 1) return usage_error("verify-sigstore", "exactly one BUNDLE.json is required");
  if (!a.has("trusted-root")) return usage_error("verify-sigstore", "--trusted-root FILE is required");
  if (a.has("artifact") && a.has("digest")) return usage_error("verify-sigstore", "give --artifact or --digest, not both");
  for (const char* f : {a.pos[0].c_str(), a.get("trusted-root"), a.get("artifact")})
    if (std::string dir = f ? directory_given(f) : ""; !dir.empty())
      return usage_error("verify-sigstore", dir + ", not a file");
  SPROV_OPTS(sprov_sigstore_opts, o, .artifact_path = a.get("artifact"), .artifact_digest = a.get("digest"));
  char* report = nullptr;
  size_t len = 0;
  if (sprov_sigstore_verify(a.pos[0].c_str(), a.get("trusted-root"), &o, &report, &len) != 0) {
    fprintf(stderr, "verify-sigstore: FAIL %s: %s\n", a.pos[0].c_str(), sprov_last_error_message());
    return kExitFail;
  }
  if (!a.has("quiet")) fwrite(report, 1, len, stdout);
  printf("verify-sigstore: OK %s\n", a.pos[0].c_str());
  sprov_free(report);
  return kExitOk;
}

}  // namespace

STACKPROV_COMMAND("keygen", "generate an ECDSA P-256 signing key (private key file mode 0600)", cmd_keygen);
STACKPROV_COMMAND("sign", "sign a file's sha256 as an in-toto statement in a DSSE envelope", cmd_sign);
STACKPROV_COMMAND("log", "local transparency log: init, append, checkpoint, prove, verify", cmd_log);
STACKPROV_COMMAND("trace-verify", "verify a file's DSSE envelope and its log inclusion, offline", cmd_trace_verify);
STACKPROV_COMMAND("verify-sigstore", "verify a Sigstore bundle offline against a trusted root", cmd_verify_sigstore);
