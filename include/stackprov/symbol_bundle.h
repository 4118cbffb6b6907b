/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI for symbol bundles: build, open, inspect, look up, and the content-addressed store. */
#ifndef STACKPROV_SYMBOL_BUNDLE_H
#define STACKPROV_SYMBOL_BUNDLE_H

#include "stackprov/stackprov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------------------
 * Symbol bundles (doc/bundles.md): one file per set of modules, identified by
 * the sha256 of its bytes ("sha256:<hex>"), holding per module its identity,
 * name, file/debug sha256, address ranges with inline chains, return pads,
 * unwind rows and optionally the debug file. Conventions as in stackprov.h:
 * 0 on success, negative errno or SPROV_ERR_* with a thread-local last error
 * naming the offending value; strings returned through `char** out` are
 * released with sprov_free().
 * ------------------------------------------------------------------------- */

/* Module identity kinds (values as on disk). */
enum sprov_bundle_id_kind {
  SPROV_BUNDLE_ID_ELF_BUILD_ID = 1, /* ELF NT_GNU_BUILD_ID descriptor bytes */
  SPROV_BUNDLE_ID_PDB_GUID_AGE = 2, /* 16-byte GUID as in the RSDS record, then age u32 LE */
  SPROV_BUNDLE_ID_MACHO_UUID = 3,   /* Mach-O LC_UUID */
  SPROV_BUNDLE_ID_PE_CODE_ID = 4,   /* PE code id: TimeDateStamp then SizeOfImage, u32 LE each (8 bytes) */
};
/* "elf-build-id", "pdb-guid-age", "macho-uuid", "pe-code-id"; "unknown" otherwise. */
SPROV_API const char* sprov_bundle_id_kind_name(int kind);
/* The kind of a name ("elf-build-id", "pdb-guid-age", "macho-uuid", "pe-code-id");
 * SPROV_ERR_INVALID_ARG naming `name` and the four names otherwise. */
SPROV_API int sprov_bundle_id_kind_parse(const char* name, int* kind);
/* A module identity as the platform's tools write it (its "key"), from its bytes in hex as a
 * bundle stores them (sprov_bundle_module.id_hex, sprov_frame.module_id): elf-build-id the
 * lower-case hex (readelf -n); pdb-guid-age the symbol-server key -- the GUID's Data1, Data2,
 * Data3, Data4 as 32 upper-case hex digits, then the age in upper-case hex without leading zeros,
 * as in NAME.pdb/KEY/NAME.pdb and `stack --minidump`'s notes; macho-uuid the UUID 8-4-4-4-12 in
 * upper case (llvm-dwarfdump --uuid, macOS); pe-code-id TimeDateStamp as 8 upper-case hex digits
 * then SizeOfImage in lower-case hex (a symbol store's NAME/KEY/NAME). *out is allocated
 * (sprov_free). Errors (SPROV_ERR_INVALID_ARG) name the kind and the value: bad hex, a PDB
 * identity that is not 20 bytes, a UUID that is not 16, a code id that is not 8. */
SPROV_API int sprov_id_key(int id_kind, const char* id_hex, char** out, size_t* out_len);
/* The reverse: the identity bytes, lower-case hex as a bundle stores them and
 * sprov_symbolizer_addr_id takes them, of a key: elf-build-id hex of any case; pdb-guid-age a
 * symbol-server key (32 hex digits of GUID, then 1 to 8 of age, any case); macho-uuid the UUID
 * with or without its dashes, any case; pe-code-id 8 hex digits of TimeDateStamp then 1 to 8 of
 * SizeOfImage, any case. Errors (SPROV_ERR_INVALID_ARG) name the key and the
 * form expected. *out_hex is allocated (sprov_free). */
SPROV_API int sprov_id_from_key(int id_kind, const char* key, char** out_hex, size_t* out_len);

/* ------------------------------------------------------------------ build */

/* Progress of a build, called once before the first module (modules_done 0),
 * after each module, and within a large module after every MiB of its executable
 * bytes scanned (modules_done unchanged, bytes_done counting that module's share of
 * its file by the executable bytes done). bytes_* count the input files' sizes. */
typedef void (*sprov_bundle_progress_fn)(void* ctx, size_t modules_done, size_t module_count,
                                         uint64_t bytes_done, uint64_t bytes_total);

enum sprov_bundle_build_flags {
  SPROV_BUNDLE_INCLUDE_DEBUG = 1u << 0, /* embed each module's debug file (or the file itself) */
};

struct sprov_bundle_build_opts {
  size_t sz;
  const char* const* names;       /* per input file: module name; NULL (or a NULL entry): the basename */
  const char* const* debug_dirs;  /* where separate debug files are searched; NULL: /usr/lib/debug */
  size_t debug_dir_count;
  uint32_t flags;                 /* enum sprov_bundle_build_flags */
  uint32_t reserved;              /* must be 0 */
  sprov_bundle_progress_fn progress; /* may be NULL */
  void* progress_ctx;
};
#define sprov_bundle_build_opts__last_field progress_ctx

/* Builds one bundle holding a module for each ELF file of paths[0..count)
 * (each needs a GNU build-id; two files with the same build-id are refused,
 * naming both). Deterministic: equal inputs give equal bytes. *out (released
 * with sprov_free) receives the bundle bytes, *out_len their count; digest
 * (may be NULL, else >= SPROV_DIGEST_STRLEN bytes) its "sha256:<hex>". */
SPROV_API int sprov_bundle_build(const char* const* paths, size_t count, const struct sprov_bundle_build_opts* opts,
                                 void** out, size_t* out_len, char* digest, size_t digest_size);

/* As sprov_bundle_build, written to out_path (temp file + fsync + rename: readers never see a
 * partial bundle; mode 0644). */
SPROV_API int sprov_bundle_build_file(const char* const* paths, size_t count, const struct sprov_bundle_build_opts* opts,
                                      const char* out_path, char* digest, size_t digest_size);

/* --------------------------------------------------------------- reading */

/* An open bundle: immutable, validated at open (header, sections, module
 * table; each module's records on first use). Thread-safe. */
typedef struct sprov_bundle sprov_bundle;
typedef struct sprov_bundle_store sprov_bundle_store;

/* Maps the bundle file at path. */
SPROV_API int sprov_bundle_open_file(const char* path, sprov_bundle** out);
/* Copies len bytes and opens them. */
SPROV_API int sprov_bundle_open_buf(const void* data, size_t len, sprov_bundle** out);
/* Opens the store's blob "sha256:<hex>" (or 64 bare hex digits). */
SPROV_API int sprov_bundle_open_digest(const sprov_bundle_store* store, const char* digest, sprov_bundle** out);
SPROV_API void sprov_bundle_free(sprov_bundle* b);

/* "sha256:<hex>" of the bundle's bytes (out >= SPROV_DIGEST_STRLEN bytes). */
SPROV_API int sprov_bundle_digest(const sprov_bundle* b, char* out, size_t out_size);
SPROV_API uint64_t sprov_bundle_size(const sprov_bundle* b);
SPROV_API size_t sprov_bundle_module_count(const sprov_bundle* b);

/* A module of an open bundle. Strings are NUL-terminated and owned by the
 * bundle (valid until sprov_bundle_free). sha256s are 64 hex digits (zeros:
 * unknown). */
struct sprov_bundle_module {
  size_t sz;
  uint32_t id_kind;        /* enum sprov_bundle_id_kind */
  uint32_t id_len;         /* identity bytes */
  const char* id_hex;      /* identity, lower-case hex */
  const char* name;
  const char* sha256_file;
  const char* sha256_debug;
  uint64_t range_count;
  uint64_t pad_count;
  uint64_t unwind_row_count;
  uint64_t debug_blob_size; /* bytes of the embedded debug file; 0: none */
};
#define sprov_bundle_module__last_field debug_blob_size

/* Fills *out (set out->sz first) for module `index` (0..module_count-1). */
SPROV_API int sprov_bundle_module_info(const sprov_bundle* b, size_t index, struct sprov_bundle_module* out);
/* Index of the module with this identity (hex, any case); SPROV_ERR_NOT_FOUND naming it. */
SPROV_API int sprov_bundle_find_module(const sprov_bundle* b, int id_kind, const char* id_hex, size_t* index);

/* One frame of an inline chain. */
struct sprov_bundle_frame {
  const char* function; /* linkage (mangled) name; "" when unknown */
  const char* file;     /* "" when unknown */
  uint32_t line;
  uint32_t column;
};
/* An inline chain: frames[0] is the INNERMOST frame (the inlined function the
 * address is in; its file:line:column is the address's own position), and
 * frames[count-1] the outermost, concrete function (whose position is the
 * call site of frames[count-2]) -- the order llvm-symbolizer --inlining prints.
 * One allocation: release the chain with sprov_free(). */
struct sprov_bundle_chain {
  size_t count; /* 0: no range covers the address (not an error) */
  const struct sprov_bundle_frame* frames;
};

/* The inline chain at module-relative (ELF: link-time) address addr. */
SPROV_API int sprov_bundle_lookup(const sprov_bundle* b, size_t module, uint64_t addr, struct sprov_bundle_chain** out);
/* The unwind row covering addr as text (x86_64 register names, llvm-dwarfdump
 * notation, e.g. "CFA=RSP+16: RBX=[CFA-16], RIP=[CFA-8]"), or "end-of-stack",
 * "full" (needs the CFI interpreter), "none" (no unwind information). */
SPROV_API int sprov_bundle_unwind_row_text(const sprov_bundle* b, size_t module, uint64_t addr, char** out,
                                           size_t* out_len);

/* Export formats (doc/symbol-index.md). */
enum sprov_bundle_export_format {
  SPROV_BUNDLE_EXPORT_SYMBOL_INDEX_JSON = 1, /* symbol_index.json: every module, or *module */
  SPROV_BUNDLE_EXPORT_SYMBFILE = 2,          /* Elastic symbfile of one module (lib/bundle/symbfile.proto) */
};
/* Exports the bundle's records: *out (released with sprov_free) and *out_len. module: the
 * module index, or NULL for every module (JSON) or the only module (symbfile; a bundle of
 * several modules is refused naming their count). Deterministic. */
SPROV_API int sprov_bundle_export(const sprov_bundle* b, int format, const size_t* module, void** out,
                                  size_t* out_len);

/* ----------------------------------------------------------------- store */

/* A content-addressed store directory (layout, concurrency: doc/bundles.md
 * "Store"). Writers never lock; every write is temp + fsync + rename. */
enum sprov_bundle_store_flags {
  SPROV_BUNDLE_STORE_CREATE = 1u << 0, /* create the store if missing */
};

/* The default store directory: $STACKPROV_STORE, else $XDG_DATA_HOME/stackprov/store,
 * else $HOME/.local/share/stackprov/store. */
SPROV_API int sprov_bundle_store_default_dir(char** out, size_t* out_len);
/* Opens the store at dir (NULL or "": the default directory). The store's directories must
 * belong to the calling user (or root) and be writable by no one else: SPROV_ERR_INVALID_ARG
 * naming the directory otherwise. */
SPROV_API int sprov_bundle_store_open(const char* dir, uint32_t flags, sprov_bundle_store** out);
SPROV_API void sprov_bundle_store_free(sprov_bundle_store* s);
/* The store's directory (owned by the handle). */
SPROV_API const char* sprov_bundle_store_dir(const sprov_bundle_store* s);

/* Validates and stores a bundle (bytes or a file) and indexes its modules: their id entries now
 * name this bundle (replacing any). Indexing is an explicit act of the store's user (bundles of
 * files the user names); a bundle built from a target's files goes in with
 * sprov_bundle_store_put_blob. digest (>= SPROV_DIGEST_STRLEN bytes) receives "sha256:<hex>". */
SPROV_API int sprov_bundle_store_put(sprov_bundle_store* s, const void* data, size_t len, char* digest,
                                     size_t digest_size);
SPROV_API int sprov_bundle_store_put_file(sprov_bundle_store* s, const char* path, char* digest, size_t digest_size);
/* Stores a bundle by content only: no id entry is created or replaced (doc/bundles.md "Who
 * indexes"). It is found by its digest (a trace's bundle), never by a module identity. */
SPROV_API int sprov_bundle_store_put_blob(sprov_bundle_store* s, const void* data, size_t len, char* digest,
                                          size_t digest_size);
/* Indexes the modules of the stored bundle `digest` (re-hashed first): the explicit act that
 * makes a bundle stored by content serve its modules' identities. */
SPROV_API int sprov_bundle_store_promote(sprov_bundle_store* s, const char* digest);
/* The digest of the bundle the id map names for this module identity (hex);
 * SPROV_ERR_NOT_FOUND naming the identity and the store when none. */
SPROV_API int sprov_bundle_store_find(const sprov_bundle_store* s, int id_kind, const char* id_hex, char* digest,
                                      size_t digest_size);
/* Path of a stored bundle's blob; SPROV_ERR_NOT_FOUND when absent. */
SPROV_API int sprov_bundle_store_blob_path(const sprov_bundle_store* s, const char* digest, char** out,
                                           size_t* out_len);
/* Sidecar files of a stored bundle, name [a-z0-9.-]{1,32}: "dsse.json" (DSSE
 * envelope), "tlog-proof" (C2SP tlog-proof@v1), "checkpoint" (signed note). */
SPROV_API int sprov_bundle_store_put_sidecar(sprov_bundle_store* s, const char* digest, const char* name,
                                             const void* data, size_t len);
/* Path of a sidecar; SPROV_ERR_NOT_FOUND naming it when absent. */
SPROV_API int sprov_bundle_store_sidecar_path(const sprov_bundle_store* s, const char* digest, const char* name,
                                              char** out, size_t* out_len);

struct sprov_bundle_sign_opts {
  size_t sz;
  const char* key_path;  /* P-256 private key (PEM) that signs the envelope */
  const char* log_dir;   /* transparency log directory (stackprov log init) the envelope is appended to */
  const char* log_key;   /* key that signs the log's new checkpoint; NULL: key_path */
};
#define sprov_bundle_sign_opts__last_field log_key
/* Checks, without writing anything, what sprov_bundle_store_sign would sign with: key_path is a
 * P-256 private key, log_dir is a transparency log and log_key (default key_path) the private key
 * of its checkpoints. Call it before storing a bundle that is to be signed, so that a key that
 * cannot sign leaves nothing behind. */
SPROV_API int sprov_bundle_sign_check(const struct sprov_bundle_sign_opts* opts);
/* Signs the stored bundle `digest`: a DSSE envelope over an in-toto statement whose subject is
 * the bundle's sha256 and whose predicate (type https://stackprov.dev/symbol-bundle/v1) lists
 * its modules' identities; appends the envelope to the log (once: the same bundle signed again
 * gives the same envelope, RFC 6979), signs a checkpoint and stores envelope, tlog-proof@v1 and
 * checkpoint as the sidecars "dsse.json", "tlog-proof", "checkpoint". *log_index (may be NULL)
 * receives the entry's index. The keys are checked first (sprov_bundle_sign_check): when they
 * cannot sign, neither the log nor the store changes. */
SPROV_API int sprov_bundle_store_sign(sprov_bundle_store* s, const char* digest, const struct sprov_bundle_sign_opts* opts,
                                      uint64_t* log_index);
/* Checks the whole store (doc/bundles.md "fsck"): re-hashes every blob,
 * validates it, checks the id map both ways and the sidecars' structure.
 * *report: one line per finding, "error <path>: <what>" or "warning <path>:
 * <what>", then "checked <B> blobs, <M> modules, <I> id entries, <S> sidecars" (followed by
 * "; <U> modules stored by content only (not indexed)" when U > 0).
 * *errors (may be NULL) receives the number of error lines. Returns 0 when the
 * check ran (errors or not). */
SPROV_API int sprov_bundle_store_fsck(const sprov_bundle_store* s, char** report, size_t* report_len, size_t* errors);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_SYMBOL_BUNDLE_H */
