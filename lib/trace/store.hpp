// SPDX-License-Identifier: Apache-2.0
// Trace stores: one interface, SQLite (default, embedded) and PostgreSQL (libpq) backends, URL parsing, versioned migrations.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.hpp"

namespace stackprov::trace {

/// The schema version this build writes; migrations 1..kSchemaVersion are applied on open.
/// Version 1 is the seed's schema (traces, frames, symbol_bundles, replays); doc/traces.md.
inline constexpr int kSchemaVersion = 5;

enum class StoreKind { kSqlite, kPostgres };

struct StoreUrl {
  StoreKind kind = StoreKind::kSqlite;
  std::string path;      ///< SQLite: the database file
  std::string conninfo;  ///< PostgreSQL: the libpq connection URI, as given
};

/// "sqlite:PATH" (PATH non-empty; relative paths are taken as given) or
/// "postgresql://..." / "postgres://..." (handed to libpq). Errors name the value.
Result<StoreUrl> parse_store_url(std::string_view url);
/// $STACKPROV_STORE if it is a URL (sqlite:..., scheme://...; a directory there is the bundle
/// store's), else "sqlite:$XDG_DATA_HOME/stackprov/traces.db"
/// ($XDG_DATA_HOME defaults to $HOME/.local/share).
Result<std::string> default_store_url();

class Store {
 public:
  virtual ~Store() = default;
  /// Atomic: the trace, its threads, all its frames and its data in one transaction, or nothing.
  /// A trace id that exists already is an error; identical captured data is stored once.
  virtual Status put_trace(const Trace& t) = 0;
  virtual Result<Trace> get_trace(std::string_view id) = 0;
  /// Ordered by captured_at, then id; at most `limit` rows.
  virtual Result<std::vector<TraceSummary>> list_traces(size_t limit = SIZE_MAX) = 0;
  /// The trace must exist (foreign key).
  virtual Status put_replay(const Replay& r) = 0;
  /// Content-addressed: sha256 must be the hash of blob. Putting the same bundle again keeps
  /// its blob, os and index_json; its signature columns (signer, rekor_tile_ref, dsse_envelope,
  /// tlog_proof, checkpoint) are replaced by the new row's where those are non-empty (a bundle
  /// signed after it was stored).
  virtual Status put_symbol_bundle(const SymbolBundleRow& b) = 0;
  virtual Result<SymbolBundleRow> get_symbol_bundle(std::string_view sha256) = 0;
  /// The sha256 and index_json of every stored bundle (no blobs), ordered by sha256.
  virtual Result<std::vector<SymbolBundleRow>> list_symbol_bundles() = 0;
  /// Replaces a trace's threads and frames (and sets its symbol_bundle_sha256; empty clears it)
  /// in one transaction: a reader sees the old resolution or the new one, never a mix.
  /// SPROV_ERR_NOT_FOUND naming the id when the trace does not exist.
  virtual Status replace_frames(std::string_view trace_id, const std::vector<Thread>& threads,
                                std::string_view symbol_bundle_sha256) = 0;
  /// The replays of a trace, ordered by started_at, then replay_id. An unknown trace: empty.
  virtual Result<std::vector<Replay>> list_replays(std::string_view trace_id) = 0;
  /// The schema version of the open database (kSchemaVersion after a successful open).
  virtual Result<int> schema_version() = 0;
  virtual StoreKind kind() const = 0;
};

/// Opens (creating for SQLite: the file and its directory) and migrates the store.
/// A database whose schema is newer than kSchemaVersion is refused with both versions named.
Result<std::unique_ptr<Store>> open_store(std::string_view url);

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path);
Result<std::unique_ptr<Store>> open_postgres_store(const std::string& conninfo);

}  // namespace stackprov::trace
