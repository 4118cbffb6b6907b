/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov public C ABI for evidence: digests, keys, DSSE envelopes, a local transparency log, Sigstore verification. */
#ifndef STACKPROV_BUNDLE_H
#define STACKPROV_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "stackprov/errors.h"

#ifndef SPROV_API
#if defined(_WIN32)
#define SPROV_API __declspec(dllexport)
#else
#define SPROV_API __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------------------
 * Conventions (as in stackprov.h): 0 on success, negative errno or SPROV_ERR_*
 * on failure with a thread-local last error naming the offending value.
 * Buffers returned through `char** out` are NUL-terminated, allocated by the
 * library, and released with sprov_free(); `*out_len` (if not NULL) excludes
 * the NUL. All functions are thread-safe except on the same sprov_tlog handle.
 * Private keys are read from files and are never copied into error messages.
 * ------------------------------------------------------------------------- */

#define SPROV_DIGEST_STRLEN 72 /* "sha256:" + 64 hex + NUL, rounded up */
#define SPROV_KEY_ID_STRLEN 65 /* 64 hex + NUL */

/* SHA-256 of a file as "sha256:<64 lower-case hex>" into out (>= SPROV_DIGEST_STRLEN bytes). */
SPROV_API int sprov_digest_file(const char* path, char* out, size_t out_size);

/* ------------------------------------------------------------------- keys */

/* Generates an ECDSA P-256 key. The private key (SEC1 PEM) is written to
 * private_path with mode 0600 and must not exist yet; the public key (SPKI PEM)
 * to public_path. key_id (may be NULL, else >= SPROV_KEY_ID_STRLEN bytes)
 * receives the key id: lower-case hex SHA-256 of the DER SubjectPublicKeyInfo. */
SPROV_API int sprov_key_generate(const char* private_path, const char* public_path, char* key_id,
                                 size_t key_id_size);
/* Key id of a PEM/DER public key, certificate or P-256 private key file. */
SPROV_API int sprov_key_id(const char* key_path, char* key_id, size_t key_id_size);

/* ------------------------------------------------------------------- DSSE */

struct sprov_sign_opts {
  size_t sz;
  const char* subject_name;   /* statement subject name; NULL: the file's base name */
  const char* predicate_type; /* NULL: "https://stackprov.dev/provenance/v1" */
  const char* predicate_json; /* a JSON object; NULL: {} */
};
#define sprov_sign_opts__last_field predicate_json

/* Signs an in-toto Statement v1 whose single subject is the file's sha256 with
 * the P-256 key at key_path; *out is the DSSE envelope JSON (one line + '\n'). */
SPROV_API int sprov_dsse_sign_file(const char* key_path, const char* artifact_path,
                                   const struct sprov_sign_opts* opts, char** out, size_t* out_len);
/* Signs an arbitrary payload: *out is the DSSE envelope JSON. */
SPROV_API int sprov_dsse_sign(const char* key_path, const char* payload_type, const void* payload,
                              size_t payload_len, char** out, size_t* out_len);

struct sprov_dsse_verify_opts {
  size_t sz;
  const char* const* key_paths; /* trusted public keys / certificates (PEM or DER files) */
  size_t key_count;
  uint32_t threshold;           /* distinct trusted keys needed; 0: 1 */
  uint32_t reserved;            /* must be 0 */
  const char* payload_type;     /* accepted payloadType; NULL: application/vnd.in-toto+json */
  const char* subject_digest;   /* "sha256:<hex>": the statement must name it; NULL: not checked */
};
#define sprov_dsse_verify_opts__last_field subject_digest

/* Verifies a DSSE envelope (JSON bytes). SPROV_ERR_SIGNATURE when fewer than
 * threshold distinct keys verify, SPROV_ERR_POLICY for an unsupported payloadType,
 * SPROV_ERR_DIGEST_MISMATCH when no subject has subject_digest. */
SPROV_API int sprov_dsse_verify(const void* envelope, size_t len, const struct sprov_dsse_verify_opts* opts);

/* --------------------------------------------------- transparency log */

/* A local append-only log in the C2SP tlog-tiles layout (see doc/provenance.md).
 * One handle per thread; several processes may append (they take a file lock). */
typedef struct sprov_tlog sprov_tlog;

/* Creates an empty log in dir (created if needed) with checkpoints signed by the
 * P-256 key at key_path under the origin (also the note key name). Also writes
 * dir/log.pub and dir/trusted_root.json (a Sigstore-format trusted root for the log). */
SPROV_API int sprov_tlog_init(const char* dir, const char* origin, const char* key_path, sprov_tlog** out);
SPROV_API int sprov_tlog_open(const char* dir, sprov_tlog** out);
SPROV_API void sprov_tlog_free(sprov_tlog* log);
/* Committed number of entries (may be ahead of the signed checkpoint). */
SPROV_API uint64_t sprov_tlog_size(const sprov_tlog* log);
/* Appends entries (each 1..65535 bytes) in one crash-safe step; *first_index gets the index of the first. */
SPROV_API int sprov_tlog_append(sprov_tlog* log, const void* const* entries, const size_t* lens, size_t count,
                                uint64_t* first_index);
/* sprov_tlog_append, then (with key_path) a checkpoint of the new size signed with the log's key,
 * under one lock: the key is read and checked against the log's before anything is written, so a
 * wrong key, a public key or an unreadable key file leaves the log unchanged. *note (may be NULL)
 * receives the signed checkpoint (release with sprov_free). key_path NULL: sprov_tlog_append. */
SPROV_API int sprov_tlog_append_checkpoint(sprov_tlog* log, const void* const* entries, const size_t* lens,
                                           size_t count, const char* key_path, uint64_t* first_index, char** note,
                                           size_t* note_len);
/* Signs a checkpoint of the committed size with the log's key; *out is the signed note. */
SPROV_API int sprov_tlog_checkpoint(sprov_tlog* log, const char* key_path, char** out, size_t* out_len);
/* Index of the first entry equal to the bytes; SPROV_ERR_NOT_FOUND if none. */
SPROV_API int sprov_tlog_find(sprov_tlog* log, const void* entry, size_t len, uint64_t* index);
/* Inclusion proof of entry `index` against the stored checkpoint, as C2SP tlog-proof@v1 text. */
SPROV_API int sprov_tlog_prove(sprov_tlog* log, uint64_t index, char** out, size_t* out_len);
/* Consistency proof from old_size to new_size (0: the stored checkpoint's size), as text:
 * "c2sp.org/stackprov-consistency@v1\nold <n>\nnew <n>\n" then one base64 hash per line. */
SPROV_API int sprov_tlog_consistency(sprov_tlog* log, uint64_t old_size, uint64_t new_size, char** out,
                                     size_t* out_len);
/* Writes a tile fragment for entry `index` into out_dir: the stored checkpoint, the tiles
 * (at most two per level) from which its inclusion proof is rebuilt, and a "fragment" file
 * naming the index. out_dir is a sparse tree in the tlog-tiles layout. */
SPROV_API int sprov_tlog_export_fragment(sprov_tlog* log, uint64_t index, const char* out_dir);
/* Offline: verifies a tile fragment directory for `entry` with a log key and origin. */
SPROV_API int sprov_tlog_verify_fragment(const char* dir, const void* entry, size_t entry_len,
                                         const char* log_key_path, const char* origin);
/* Re-derives every tile hash and the root from the entries; checks the checkpoint. */
SPROV_API int sprov_tlog_fsck(sprov_tlog* log);

/* Offline: verifies a tlog-proof@v1 for `entry` with a log key. The checkpoint must
 * be signed by the key under `origin` (the note key name, which is also the origin). */
SPROV_API int sprov_tlog_verify_proof(const void* proof, size_t proof_len, const void* entry, size_t entry_len,
                                      const char* log_key_path, const char* origin);
/* Offline: verifies that signed checkpoint new_note extends old_note (same origin/key)
 * with a proof from sprov_tlog_consistency. */
SPROV_API int sprov_tlog_verify_consistency(const char* old_note, const char* new_note, const char* proof,
                                            const char* log_key_path, const char* origin);

/* --------------------------------------------------------------- verify */

struct sprov_sigstore_opts {
  size_t sz;
  const char* artifact_path;   /* compare with the bundle's subject/digest; NULL: not compared */
  const char* artifact_digest; /* "sha256:<hex>", alternative to artifact_path */
};
#define sprov_sigstore_opts__last_field artifact_digest

/* Offline verification of a Sigstore bundle (v0.1-v0.3, Rekor v1/v2) against a
 * trusted root JSON file. On success *report (may be NULL) lists "ok <check>" and
 * "note <text>" lines. On failure the last error message starts with the failed
 * check ("checkpoint-signature: ...", "inclusion-proof: ...", "entry-body: ..."). */
SPROV_API int sprov_sigstore_verify(const char* bundle_path, const char* trusted_root_path,
                                    const struct sprov_sigstore_opts* opts, char** report, size_t* report_len);

/* A parsed trusted root, for verifying many bundles without re-reading it.
 * Immutable once built; may be shared between threads. */
typedef struct sprov_trusted_root sprov_trusted_root;
SPROV_API int sprov_trusted_root_new(const void* json, size_t len, sprov_trusted_root** out);
SPROV_API void sprov_trusted_root_free(sprov_trusted_root* root);
/* As sprov_sigstore_verify, for a bundle already in memory. Thread-safe. */
SPROV_API int sprov_sigstore_verify_buf(const sprov_trusted_root* root, const void* bundle, size_t len,
                                        const struct sprov_sigstore_opts* opts, char** report, size_t* report_len);

struct sprov_trace_verify_opts {
  size_t sz;
  const char* digest;            /* "sha256:<hex>" of the artifact (required) */
  const char* artifact_path;     /* optional: file whose sha256 must equal digest */
  const char* envelope_path;     /* DSSE envelope whose statement names digest (required) */
  uint32_t check_dsse;           /* verify the envelope's signatures */
  uint32_t check_log;            /* verify the envelope's inclusion in a log */
  const char* const* key_paths;  /* trusted signer keys, for check_dsse */
  size_t key_count;
  uint32_t threshold;            /* 0: 1 */
  uint32_t reserved;             /* must be 0 */
  const char* trusted_root_path; /* log keys (Sigstore trusted-root JSON); required with check_log (NULL: an error) */
  const char* log_dir;           /* local log: prove from its tiles and checkpoint */
  const char* proof_path;        /* or a tlog-proof@v1 file */
};
#define sprov_trace_verify_opts__last_field proof_path

/* Verifies an artifact's DSSE envelope and/or its inclusion in a transparency log,
 * offline. *report as for sprov_sigstore_verify. */
SPROV_API int sprov_trace_verify(const struct sprov_trace_verify_opts* opts, char** report, size_t* report_len);

#ifdef __cplusplus
}
#endif

#endif /* STACKPROV_BUNDLE_H */
