// SPDX-License-Identifier: Apache-2.0
// The SQLite trace store (default): one file, WAL, versioned migrations, one transaction per trace.
#include <sqlite3.h>

#include <chrono>
#include <string>
#include <thread>

#include "evidence/encoding.hpp"
#include "trace/store.hpp"
#include "trace/store_rows.hpp"

namespace stackprov::trace {
namespace {

/// Migration N takes the schema from version N-1 to N. Version 1 is the seed's schema with
/// SQLite types (UUID, TIMESTAMP, JSONB -> TEXT; BYTEA -> BLOB; FLOAT -> REAL).
const char* const kMigrations[] = {
    // 1: the seed's schema
    R"SQL(
CREATE TABLE traces(
  trace_id TEXT PRIMARY KEY,
  platform TEXT,
  captured_at TEXT,
  build_id TEXT,
  symbol_bundle_sha256 TEXT,
  dsse_ref TEXT);
CREATE TABLE frames(
  trace_id TEXT REFERENCES traces,
  frame_index INT,
  ip BIGINT,
  module_path TEXT,
  module_build_id TEXT,
  resolved_symbol TEXT,
  symbol_offset BIGINT,
  resolver TEXT,
  PRIMARY KEY(trace_id, frame_index));
CREATE TABLE symbol_bundles(
  sha256 TEXT PRIMARY KEY,
  os TEXT,
  bundle_blob BLOB,
  index_json TEXT,
  signer TEXT,
  rekor_tile_ref TEXT);
CREATE TABLE replays(
  replay_id TEXT PRIMARY KEY,
  trace_id TEXT REFERENCES traces,
  seed BIGINT,
  started_at TEXT,
  finished_at TEXT,
  replay_success_ratio REAL,
  verify_time_ms INT,
  verifier_version TEXT,
  notes TEXT);
)SQL",
    // 2: arch, captured data, threads, the full frame provenance, replay coverage
    R"SQL(
CREATE TABLE trace_data(
  sha256 TEXT PRIMARY KEY,
  raw_size BIGINT NOT NULL,
  gzip BLOB NOT NULL);
ALTER TABLE traces ADD COLUMN arch TEXT;
ALTER TABLE traces ADD COLUMN data_sha256 TEXT REFERENCES trace_data(sha256);
CREATE TABLE threads(
  trace_id TEXT NOT NULL REFERENCES traces,
  thread_index INT NOT NULL,
  tid BIGINT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY(trace_id, thread_index));
ALTER TABLE frames ADD COLUMN thread_index INT NOT NULL DEFAULT 0;
ALTER TABLE frames ADD COLUMN module_offset BIGINT;
ALTER TABLE frames ADD COLUMN file TEXT;
ALTER TABLE frames ADD COLUMN line BIGINT;
ALTER TABLE frames ADD COLUMN column_no BIGINT;
ALTER TABLE frames ADD COLUMN inline_chain TEXT;
ALTER TABLE frames ADD COLUMN source TEXT;
ALTER TABLE frames ADD COLUMN bundle_sha256 TEXT;
ALTER TABLE frames ADD COLUMN unwind_method TEXT;
ALTER TABLE replays ADD COLUMN symbol_coverage_pct REAL;
CREATE INDEX traces_by_time ON traces(captured_at, trace_id);
)SQL",
    // 3: a bundle's signature evidence (DSSE envelope, tlog proof, checkpoint); replays by trace
    R"SQL(
ALTER TABLE symbol_bundles ADD COLUMN dsse_envelope TEXT;
ALTER TABLE symbol_bundles ADD COLUMN tlog_proof TEXT;
ALTER TABLE symbol_bundles ADD COLUMN checkpoint TEXT;
CREATE INDEX replays_by_trace ON replays(trace_id, started_at, replay_id);
)SQL",
};
static_assert(sizeof kMigrations / sizeof kMigrations[0] == kSchemaVersion);

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK && s_; }
  sqlite3_stmt* get() { return s_; }
  void text(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void blob(int i, const Bytes& v) { sqlite3_bind_blob64(s_, i, v.data(), v.size(), SQLITE_TRANSIENT); }
  void i64(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void dbl(int i, double v) { sqlite3_bind_double(s_, i, v); }
  void null(int i) { sqlite3_bind_null(s_, i); }
  /// Empty text as SQL NULL.
  void text_or_null(int i, const std::string& v) {
    if (v.empty()) null(i); else text(i, v);
  }
  int step() { return sqlite3_step(s_); }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string col_text(int i) {
    const unsigned char* p = sqlite3_column_text(s_, i);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, i))) : std::string();
  }
  Bytes col_blob(int i) {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s_, i));
    size_t n = static_cast<size_t>(sqlite3_column_bytes(s_, i));
    return p ? Bytes(p, p + n) : Bytes();
  }
  int64_t col_i64(int i) { return sqlite3_column_int64(s_, i); }
  double col_dbl(int i) { return sqlite3_column_double(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  Error err(const char* what) const {
    return make_error(SPROV_ERR_IO, "sqlite store %s: %s: %s", path_.c_str(), what, sqlite3_errmsg(db_));
  }
  Status exec(const char* sql, const char* what) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : sqlite3_errmsg(db_);
      sqlite3_free(msg);
      return make_error(SPROV_ERR_IO, "sqlite store %s: %s: %s", path_.c_str(), what, m.c_str());
    }
    return {};
  }
  void rollback() { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

  /// The store's names are plain tables: a view named "frames" (a hostile file's) could generate
  /// rows of any size or number from a few bytes (zeroblob, recursive CTEs).
  Status check_tables() {
    static const char* const kTables[] = {"schema_version", "traces", "frames", "symbol_bundles",
                                          "replays", "trace_data", "threads"};
    for (const char* name : kTables) {
      Stmt q(db_, "SELECT type FROM sqlite_master WHERE name = ?");
      q.text(1, name);
      if (!q.ok()) return err("reading the schema");
      const int rc = q.step();
      if (rc == SQLITE_ROW && q.col_text(0) == "table") continue;
      return make_error(SPROV_ERR_BAD_FORMAT, "sqlite store %s: '%s' is %s, not a table of this store",
                        path_.c_str(), name, rc == SQLITE_ROW ? ("a " + q.col_text(0)).c_str() : "missing");
    }
    return {};
  }

  Result<int> read_version() {
    Stmt has(db_, "SELECT name FROM sqlite_master WHERE type='table' AND name IN ('schema_version','traces')");
    if (!has.ok()) return err("reading the schema");
    bool have_version = false, have_traces = false;
    int rc;
    while ((rc = has.step()) == SQLITE_ROW) {
      std::string n = has.col_text(0);
      have_version |= n == "schema_version";
      have_traces |= n == "traces";
    }
    if (rc != SQLITE_DONE) return err("reading the schema");
    if (!have_version) return have_traces ? 1 : 0;  // the seed's tables without a version table: 1
    Stmt v(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
    if (!v.ok() || v.step() != SQLITE_ROW) return err("reading schema_version");
    // A store from elsewhere is hostile input: a version below 1 (or beyond int) would index the
    // migrations out of bounds and run whatever bytes lie there as SQL.
    const int64_t version = v.col_i64(0);
    if (version < 0 || version > INT32_MAX)
      return make_error(SPROV_ERR_BAD_FORMAT, "sqlite store %s: schema_version %lld is not a schema version",
                        path_.c_str(), static_cast<long long>(version));
    return static_cast<int>(version);
  }

  Status migrate() {
    if (auto st = exec("BEGIN IMMEDIATE", "locking for migrations"); !st) return st;
    auto v = read_version();
    if (!v) {
      rollback();
      return v.error();
    }
    int version = *v;
    if (version > kSchemaVersion) {
      rollback();
      return make_error(SPROV_ERR_UNSUPPORTED,
                        "sqlite store %s has schema version %d, newer than this build's %d: use a newer stackprov",
                        path_.c_str(), version, kSchemaVersion);
    }
    Status st = exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
                     "creating schema_version");
    for (int n = version + 1; st && n <= kSchemaVersion; ++n) {
      st = exec(kMigrations[n - 1], ("migration " + std::to_string(n)).c_str());
      if (!st) break;
      Stmt ins(db_, "INSERT INTO schema_version(version, applied_at) VALUES(?, ?)");
      ins.i64(1, n);
      ins.text(2, now_rfc3339());
      if (ins.step() != SQLITE_DONE) st = err("recording the schema version");
    }
    if (st && version == 1) {  // a seed database without a version row for 1
      Stmt ins(db_, "INSERT OR IGNORE INTO schema_version(version, applied_at) VALUES(1, ?)");
      ins.text(1, now_rfc3339());
      if (ins.step() != SQLITE_DONE) st = err("recording the schema version");
    }
    if (st) st = exec("COMMIT", "committing migrations");
    if (!st) rollback();
    return st;
  }

  Status put_trace(const Trace& t) override {
    if (auto st = validate_trace(t); !st) return st;
    if (auto st = exec("BEGIN IMMEDIATE", "beginning a trace"); !st) return st;
    Status st = put_trace_rows(t);
    if (st) st = exec("COMMIT", "committing a trace");
    if (!st) rollback();
    return st;
  }

  Status put_trace_rows(const Trace& t) {
    {
      Stmt s(db_, "INSERT OR IGNORE INTO trace_data(sha256, raw_size, gzip) VALUES(?,?,?)");
      if (!s.ok()) return err("preparing trace_data");
      s.text(1, t.data_sha256);
      s.i64(2, static_cast<int64_t>(t.data_size));
      s.blob(3, t.data_gzip);
      if (s.step() != SQLITE_DONE) return err("inserting trace_data");
    }
    {
      Stmt s(db_,
             "INSERT INTO traces(trace_id, platform, captured_at, build_id, symbol_bundle_sha256, dsse_ref, arch, data_sha256)"
             " VALUES(?,?,?,?,?,?,?,?)");
      if (!s.ok()) return err("preparing traces");
      s.text(1, t.id);
      s.text(2, t.platform);
      s.text(3, t.captured_at);
      s.text(4, t.build_id);
      s.text(5, t.symbol_bundle_sha256);
      s.text(6, t.dsse_ref);
      s.text(7, t.arch);
      s.text(8, t.data_sha256);
      if (s.step() != SQLITE_DONE) return err(("inserting trace " + t.id).c_str());
    }
    return insert_threads(t.id, t.threads);
  }

  /// The threads and frames rows of a trace (put_trace, replace_frames): frame_index counts
  /// across threads in order, thread_index is the thread's position.
  Status insert_threads(const std::string& trace_id, const std::vector<Thread>& threads) {
    Stmt th(db_, "INSERT INTO threads(trace_id, thread_index, tid, name) VALUES(?,?,?,?)");
    Stmt fr(db_,
            "INSERT INTO frames(trace_id, frame_index, ip, module_path, module_build_id, resolved_symbol, symbol_offset,"
            " resolver, thread_index, module_offset, file, line, column_no, inline_chain, source, bundle_sha256,"
            " unwind_method) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (!th.ok() || !fr.ok()) return err("preparing threads/frames");
    int64_t frame_index = 0;
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      const Thread& thread = threads[ti];
      th.reset();
      th.text(1, trace_id);
      th.i64(2, static_cast<int64_t>(ti));
      th.i64(3, detail::to_db(thread.tid));
      th.text(4, thread.name);
      if (th.step() != SQLITE_DONE) return err("inserting a thread");
      for (const Frame& f : thread.frames) {
        fr.reset();
        fr.text(1, trace_id);
        fr.i64(2, frame_index++);
        fr.i64(3, detail::to_db(f.ip));
        fr.text(4, f.module_path);
        fr.text(5, f.module_build_id);
        fr.text(6, f.symbol);
        fr.i64(7, detail::to_db(f.symbol_offset));
        fr.text(8, f.resolver);
        fr.i64(9, static_cast<int64_t>(ti));
        fr.i64(10, detail::to_db(f.module_offset));
        fr.text(11, f.file);
        fr.i64(12, f.line);
        fr.i64(13, f.column);
        fr.text(14, detail::inline_chain_json(f.inline_chain));
        fr.text(15, f.source);
        fr.text(16, f.bundle_sha256);
        fr.text(17, f.unwind_method);
        if (fr.step() != SQLITE_DONE) return err("inserting a frame");
      }
    }
    return {};
  }

  Result<Trace> get_trace(std::string_view id) override {
    std::string sid(id.substr(0, 64));
    if (!is_uuid(id)) return make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a lower-case UUID", sid.c_str());
    // One read transaction: a consistent view of the trace and its frames.
    if (auto st = exec("BEGIN", "beginning a read"); !st) return st.error();
    auto r = get_trace_rows(sid);
    rollback();
    return r;
  }

  Result<Trace> get_trace_rows(const std::string& id) {
    Trace t;
    {
      Stmt s(db_,
             "SELECT t.trace_id, t.platform, t.arch, t.captured_at, t.build_id, t.symbol_bundle_sha256, t.dsse_ref,"
             " t.data_sha256, d.raw_size, d.gzip FROM traces t LEFT JOIN trace_data d ON d.sha256 = t.data_sha256"
             " WHERE t.trace_id = ?");
      if (!s.ok()) return err("preparing a trace query");
      s.text(1, id);
      int rc = s.step();
      if (rc == SQLITE_DONE) return make_error(SPROV_ERR_NOT_FOUND, "trace %s not in sqlite store %s", id.c_str(), path_.c_str());
      if (rc != SQLITE_ROW) return err("reading a trace");
      t.id = s.col_text(0);
      t.platform = s.col_text(1);
      t.arch = s.col_text(2);
      t.captured_at = s.col_text(3);
      t.build_id = s.col_text(4);
      t.symbol_bundle_sha256 = s.col_text(5);
      t.dsse_ref = s.col_text(6);
      t.data_sha256 = s.col_text(7);
      t.data_size = static_cast<uint64_t>(s.col_i64(8));
      t.data_gzip = s.col_blob(9);
    }
    {
      Stmt s(db_, "SELECT thread_index, tid, name FROM threads WHERE trace_id = ? ORDER BY thread_index LIMIT ?");
      if (!s.ok()) return err("preparing a thread query");
      s.text(1, id);
      s.i64(2, static_cast<int64_t>(kMaxThreads));
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) {
        int64_t ti = s.col_i64(0);
        if (ti != static_cast<int64_t>(t.threads.size()))
          return make_error(SPROV_ERR_BAD_FORMAT, "trace %s: thread indexes not contiguous", id.c_str());
        t.threads.push_back({detail::from_db(s.col_i64(1)), s.col_text(2), {}});
      }
      if (rc != SQLITE_DONE) return err("reading threads");
    }
    Stmt s(db_,
           "SELECT thread_index, ip, module_path, module_build_id, module_offset, resolved_symbol, symbol_offset, file,"
           " line, column_no, inline_chain, resolver, source, bundle_sha256, unwind_method FROM frames"
           " WHERE trace_id = ? ORDER BY frame_index LIMIT ?");
    if (!s.ok()) return err("preparing a frame query");
    s.text(1, id);
    s.i64(2, static_cast<int64_t>(kMaxFramesPerTrace));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Frame f;
      f.ip = detail::from_db(s.col_i64(1));
      f.module_path = s.col_text(2);
      f.module_build_id = s.col_text(3);
      f.module_offset = detail::from_db(s.col_i64(4));
      f.symbol = s.col_text(5);
      f.symbol_offset = detail::from_db(s.col_i64(6));
      f.file = s.col_text(7);
      f.line = static_cast<uint32_t>(s.col_i64(8));
      f.column = static_cast<uint32_t>(s.col_i64(9));
      auto chain = detail::parse_inline_chain(s.col_text(10));
      if (!chain) return chain.error();
      f.inline_chain = std::move(chain.value());
      f.resolver = s.col_text(11);
      f.source = s.col_text(12);
      f.bundle_sha256 = s.col_text(13);
      f.unwind_method = s.col_text(14);
      if (auto st = detail::place_frame(t, static_cast<uint64_t>(s.col_i64(0)), std::move(f)); !st) return st.error();
    }
    if (rc != SQLITE_DONE) return err("reading frames");
    return t;
  }

  Result<std::vector<TraceSummary>> list_traces(size_t limit) override {
    Stmt s(db_,
           "SELECT t.trace_id, t.platform, t.arch, t.captured_at, t.build_id,"
           " (SELECT COUNT(*) FROM frames f WHERE f.trace_id = t.trace_id)"
           " FROM traces t ORDER BY t.captured_at, t.trace_id LIMIT ?");
    if (!s.ok()) return err("preparing list_traces");
    s.i64(1, limit > INT64_MAX ? INT64_MAX : static_cast<int64_t>(limit));
    std::vector<TraceSummary> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW)
      out.push_back({s.col_text(0), s.col_text(1), s.col_text(2), s.col_text(3), s.col_text(4),
                     static_cast<uint64_t>(s.col_i64(5))});
    if (rc != SQLITE_DONE) return err("listing traces");
    return out;
  }

  Status put_replay(const Replay& r) override {
    if (auto st = validate_replay(r); !st) return st;
    Stmt s(db_,
           "INSERT INTO replays(replay_id, trace_id, seed, started_at, finished_at, replay_success_ratio, verify_time_ms,"
           " verifier_version, notes, symbol_coverage_pct) VALUES(?,?,?,?,?,?,?,?,?,?)");
    if (!s.ok()) return err("preparing replays");
    s.text(1, r.replay_id);
    s.text(2, r.trace_id);
    s.i64(3, r.seed);
    s.text(4, r.started_at);
    s.text(5, r.finished_at);
    s.dbl(6, r.replay_success_ratio);
    s.i64(7, r.verify_time_ms);
    s.text(8, r.verifier_version);
    if (r.notes_json.empty()) s.null(9); else s.text(9, r.notes_json);
    s.dbl(10, r.symbol_coverage_pct);
    if (s.step() != SQLITE_DONE) return err(("inserting replay " + r.replay_id).c_str());
    return {};
  }

  Status put_symbol_bundle(const SymbolBundleRow& b) override {
    std::string h = evidence::hex_encode(evidence::sha256(b.blob));
    if (h != b.sha256)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "symbol bundle %s: its bytes hash to %s",
                        b.sha256.substr(0, 80).c_str(), h.c_str());
    if (auto st = detail::validate_symbol_bundle(b); !st) return st;
    // Content-addressed: a second put keeps blob, os and index_json; signature columns that are
    // non-empty in the new row replace the stored ones (a bundle signed after it was stored).
    Stmt s(db_,
           "INSERT INTO symbol_bundles(sha256, os, bundle_blob, index_json, signer, rekor_tile_ref, dsse_envelope,"
           " tlog_proof, checkpoint) VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT(sha256) DO UPDATE SET"
           " signer = COALESCE(NULLIF(excluded.signer, ''), symbol_bundles.signer),"
           " rekor_tile_ref = COALESCE(NULLIF(excluded.rekor_tile_ref, ''), symbol_bundles.rekor_tile_ref),"
           " dsse_envelope = COALESCE(NULLIF(excluded.dsse_envelope, ''), symbol_bundles.dsse_envelope),"
           " tlog_proof = COALESCE(NULLIF(excluded.tlog_proof, ''), symbol_bundles.tlog_proof),"
           " checkpoint = COALESCE(NULLIF(excluded.checkpoint, ''), symbol_bundles.checkpoint)");
    if (!s.ok()) return err("preparing symbol_bundles");
    s.text(1, b.sha256);
    s.text(2, b.os);
    s.blob(3, b.blob);
    s.text_or_null(4, b.index_json);
    s.text(5, b.signer);
    s.text(6, b.rekor_tile_ref);
    s.text_or_null(7, b.dsse_envelope);
    s.text_or_null(8, b.tlog_proof);
    s.text_or_null(9, b.checkpoint);
    if (s.step() != SQLITE_DONE) return err(("storing symbol bundle " + b.sha256).c_str());
    return {};
  }

  Result<SymbolBundleRow> get_symbol_bundle(std::string_view sha256) override {
    std::string h(sha256.substr(0, 80));
    if (sha256.size() != 64 || !is_lower_hex(sha256, 64))
      return make_error(SPROV_ERR_INVALID_ARG, "symbol bundle '%s' is not 64 lower-case hex", h.c_str());
    Stmt s(db_,
           "SELECT sha256, os, bundle_blob, index_json, signer, rekor_tile_ref, dsse_envelope, tlog_proof, checkpoint"
           " FROM symbol_bundles WHERE sha256 = ?");
    if (!s.ok()) return err("preparing a symbol bundle query");
    s.text(1, h);
    int rc = s.step();
    if (rc == SQLITE_DONE) return make_error(SPROV_ERR_NOT_FOUND, "symbol bundle %s not in sqlite store %s", h.c_str(), path_.c_str());
    if (rc != SQLITE_ROW) return err("reading a symbol bundle");
    SymbolBundleRow b{s.col_text(0), s.col_text(1), s.col_blob(2), s.col_text(3), s.col_text(4),
                      s.col_text(5), s.col_text(6), s.col_text(7), s.col_text(8)};
    if (evidence::hex_encode(evidence::sha256(b.blob)) != b.sha256)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "symbol bundle %s: stored bytes do not hash to their address", h.c_str());
    return b;
  }

  Result<std::vector<SymbolBundleRow>> list_symbol_bundles() override {
    Stmt s(db_, "SELECT sha256, index_json FROM symbol_bundles ORDER BY sha256");
    if (!s.ok()) return err("preparing list_symbol_bundles");
    std::vector<SymbolBundleRow> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      SymbolBundleRow b;
      b.sha256 = s.col_text(0);
      b.index_json = s.col_text(1);
      out.push_back(std::move(b));
    }
    if (rc != SQLITE_DONE) return err("listing symbol bundles");
    return out;
  }

  Status replace_frames(std::string_view trace_id, const std::vector<Thread>& threads,
                        std::string_view symbol_bundle_sha256) override {
    std::string id(trace_id.substr(0, 64)), bundle(symbol_bundle_sha256.substr(0, 80));
    if (!is_uuid(trace_id)) return make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a lower-case UUID", id.c_str());
    if (!symbol_bundle_sha256.empty() && (symbol_bundle_sha256.size() != 64 || !is_lower_hex(symbol_bundle_sha256, 64)))
      return make_error(SPROV_ERR_INVALID_ARG, "trace %s: symbol bundle '%s' is not 64 lower-case hex", id.c_str(),
                        bundle.c_str());
    if (auto st = detail::validate_threads(threads); !st) return st;
    if (auto st = exec("BEGIN IMMEDIATE", "beginning a frame replacement"); !st) return st;
    Status st = replace_frames_rows(id, threads, bundle);
    if (st) st = exec("COMMIT", "committing a frame replacement");
    if (!st) rollback();
    return st;
  }

  Status replace_frames_rows(const std::string& id, const std::vector<Thread>& threads, const std::string& bundle) {
    {
      Stmt s(db_, "UPDATE traces SET symbol_bundle_sha256 = ? WHERE trace_id = ?");
      if (!s.ok()) return err("preparing a trace update");
      s.text(1, bundle);
      s.text(2, id);
      if (s.step() != SQLITE_DONE) return err(("updating trace " + id).c_str());
      if (sqlite3_changes(db_) == 0)
        return make_error(SPROV_ERR_NOT_FOUND, "trace %s not in sqlite store %s", id.c_str(), path_.c_str());
    }
    for (const char* sql : {"DELETE FROM frames WHERE trace_id = ?", "DELETE FROM threads WHERE trace_id = ?"}) {
      Stmt s(db_, sql);
      if (!s.ok()) return err("preparing a frame deletion");
      s.text(1, id);
      if (s.step() != SQLITE_DONE) return err(("deleting the frames of trace " + id).c_str());
    }
    return insert_threads(id, threads);
  }

  Result<std::vector<Replay>> list_replays(std::string_view trace_id) override {
    std::string id(trace_id.substr(0, 64));
    if (!is_uuid(trace_id)) return make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a lower-case UUID", id.c_str());
    Stmt s(db_,
           "SELECT replay_id, trace_id, seed, started_at, finished_at, replay_success_ratio, symbol_coverage_pct,"
           " verify_time_ms, verifier_version, notes FROM replays WHERE trace_id = ? ORDER BY started_at, replay_id");
    if (!s.ok()) return err("preparing list_replays");
    s.text(1, id);
    std::vector<Replay> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Replay r;
      r.replay_id = s.col_text(0);
      r.trace_id = s.col_text(1);
      r.seed = s.col_i64(2);
      r.started_at = s.col_text(3);
      r.finished_at = s.col_text(4);
      r.replay_success_ratio = s.col_dbl(5);
      r.symbol_coverage_pct = s.col_dbl(6);
      r.verify_time_ms = s.col_i64(7);
      r.verifier_version = s.col_text(8);
      r.notes_json = s.col_text(9);
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return err(("listing the replays of trace " + id).c_str());
    return out;
  }

  Result<int> schema_version() override { return read_version(); }
  StoreKind kind() const override { return StoreKind::kSqlite; }

 private:
  sqlite3* db_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (auto st = evidence::make_dirs(path.substr(0, slash)); !st) return st.error();
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return make_error(SPROV_ERR_IO, "sqlite store %s: cannot open: %s", path.c_str(), m.c_str());
  }
  sqlite3_busy_timeout(db, 60000);
  // A store file from elsewhere is hostile input: no writes to the schema through SQL tricks
  // (DEFENSIVE), no functions run from views or triggers it defines (TRUSTED_SCHEMA off), and no
  // string or blob above the largest a store holds (captured data: kMaxDataBytes, gzip'ed).
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, static_cast<int>(kMaxDataBytes + (1u << 20)));
  auto store = std::make_unique<SqliteStore>(db, path);
  // WAL: readers never block the writer; synchronous=FULL: a commit is on disk when put returns.
  const char* kConfigure = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON";
  Status st = store->exec(kConfigure, "configuring");
  // Switching a new database to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY there
  // without calling the busy handler while another connection holds it (concurrent captures into
  // one new store: integration_trace_capture_kill). Retry for the busy timeout's 60 s.
  for (int waited_ms = 0; !st && waited_ms < 60000; waited_ms += 10) {
    const int code = sqlite3_errcode(db) & 0xff;
    if (code != SQLITE_BUSY && code != SQLITE_LOCKED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = store->exec(kConfigure, "configuring");
  }
  if (!st) return st.error();
  if (auto st = store->migrate(); !st) return st.error();
  if (auto st = store->check_tables(); !st) return st.error();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace stackprov::trace
