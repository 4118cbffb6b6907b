// SPDX-License-Identifier: Apache-2.0
// The bundle store: content-addressed symbol bundles in a directory, with a per-OS id map (build-id -> bundle).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bundle/format.hpp"
#include "core/error.hpp"

namespace stackprov::symbolize {

/// Layout under the store directory (doc/bundles.md "Store"):
///   store.json                          {"format":"stackprov-bundle-store","version":1}
///   blobs/sha256/<hh>/<hex>             a bundle's bytes, named by their sha256 (read-only)
///   ids/linux/elf-build-id/<hex>        "sha256:<hex>\n": the bundle holding that module
///   ids/windows/pdb-guid-age/<hex>      (GUID bytes as in the RSDS record, then age u32 LE)
///   ids/windows/pe-code-id/<hex>        (TimeDateStamp u32 LE, then SizeOfImage u32 LE)
///   ids/macos/macho-uuid/<hex>
///   sigs/sha256/<hh>/<hex>.<name>       sidecars of a bundle (DSSE envelope, log proof, ...)
///   tmp/                                temporary files; every write is temp + fsync + rename
/// Writers never lock: a blob's name is its content, and an id entry is replaced whole by
/// rename(2), so concurrent writers (threads or processes) leave either the old or the new
/// file, never a torn one. When two writers store different bundles holding the same module,
/// the last rename wins; both blobs stay.
///
/// Who may create an id entry (doc/bundles.md "Who indexes", doc/hardening.md attack 1): only an
/// explicit act of the store's user (put with Index::kModules: `bundle build`/`bundle put` of
/// files the user names, promote()). A bundle that a capture builds from a target's files is
/// stored by content only (Index::kNone), attached to its trace, and never indexed, so a target
/// that forges a build-id cannot replace what the store serves for that id.
/// The store directory and its ids/ tree must belong to the user running stackprov (or root)
/// and be writable by no one else; open() refuses a store otherwise, naming the directory.
class BundleStore {
 public:
  /// The default directory: $STACKPROV_STORE if set, else $XDG_DATA_HOME/stackprov/store,
  /// else $HOME/.local/share/stackprov/store. Error when none of them is set.
  static Result<std::string> default_dir();
  /// Opens the store at `dir` ("" = default_dir()). With `create`, makes the directory
  /// tree and store.json when missing; without, a directory that is not a store is an
  /// error naming it. A URL (scheme://) is rejected: bundle stores are directories.
  static Result<BundleStore> open(const std::string& dir, bool create);

  const std::string& dir() const { return dir_; }

  /// Whether put() indexes the bundle's modules (creates or replaces their id entries).
  enum class Index { kNone, kModules };
  /// Validates `bytes` as a bundle (header and module table), writes the blob (unless
  /// present) and, with Index::kModules, an id entry for each of its modules. Returns "sha256:<hex>".
  Result<std::string> put(std::span<const uint8_t> bytes, Index index);
  /// put() of a bundle file's bytes.
  Result<std::string> put_file(const std::string& path, Index index);
  /// Indexes the modules of the stored bundle `digest` (an explicit act: `bundle promote`).
  Status promote(std::string_view digest);

  /// The digest of the bundle the id map names for this module, or nullopt.
  Result<std::optional<std::string>> find(bundle::IdKind kind, std::span<const uint8_t> id) const;
  /// The blob path of "sha256:<hex>" (or bare hex); SPROV_ERR_NOT_FOUND naming it if absent.
  Result<std::string> blob_path(std::string_view digest) const;

  /// Sidecar files of a bundle: `name` is [a-z0-9.-]{1,32} (e.g. "dsse.json", "tlog-proof",
  /// "checkpoint"); the bundle must be in the store.
  Status put_sidecar(std::string_view digest, std::string_view name, std::string_view data);
  Result<std::string> sidecar_path(std::string_view digest, std::string_view name) const;

  /// Every digest in the store, sorted.
  Result<std::vector<std::string>> list() const;

  struct FsckReport {
    size_t blobs = 0;           ///< blobs checked
    size_t modules = 0;         ///< modules in them
    size_t ids = 0;             ///< id entries checked
    size_t sidecars = 0;        ///< sidecar files checked
    std::vector<std::string> errors;    ///< each names the file and what is wrong
    std::vector<std::string> warnings;  ///< recoverable: leftover temp files
    size_t unindexed = 0;               ///< modules of stored bundles with no id entry naming their bundle
  };
  /// Re-hashes every blob, opens and validates it (every module's records), checks that
  /// every id entry names a present blob holding that module, warns when another stored bundle
  /// holds a different file (sha256_file, zero = unknown) under an indexed id (a forged
  /// build-id, or another build of the file), counts the
  /// modules stored by content only, and that every sidecar belongs to a present blob and, for the
  /// known names, parses: "dsse.json" a DSSE envelope whose in-toto statement names the
  /// blob's digest, "tlog-proof" a tlog-proof@v1, "checkpoint" a signed checkpoint note.
  /// Signatures are not verified (fsck holds no trusted key: trace-verify does that).
  /// Does not change the store.
  Result<FsckReport> fsck() const;

  /// The id-map path component of a kind: "linux/elf-build-id", ...
  static const char* id_dir(bundle::IdKind kind);

 private:
  explicit BundleStore(std::string dir) : dir_(std::move(dir)) {}
  void check_sidecars(FsckReport* rep) const;
  Status write_atomic(const std::string& path, std::string_view data, unsigned mode) const;
  std::string dir_;
};

/// Parses "sha256:<64 hex>" or "<64 hex>" into lowercase hex; the error names the value.
Result<std::string> parse_bundle_digest(std::string_view s);

}  // namespace stackprov::symbolize
