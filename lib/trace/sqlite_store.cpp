// SPDX-License-Identifier: Apache-2.0
// The SQLite trace store (default): one file, WAL, versioned migrations, one transaction per trace.
#include <sqlite3.h>

#include <chrono>
#include <string>
#include <thread>

#include "evidence/encoding.hpp"
#include "trace/store.hpp"
#include "trace/store_table.hpp"

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
    // 4: the kind of a frame's module identity (NULL: an ELF build-id, as every older row)
    R"SQL(
ALTER TABLE frames ADD COLUMN module_id_kind TEXT;
)SQL",
    // 5: an unknown symbol offset is NULL (before: 0, which a bundle frame also had at its
    // function's start; traces written then read a bundle frame's 0 as unknown, and still do)
    R"SQL(
UPDATE frames SET symbol_offset = NULL WHERE symbol_offset = 0 AND resolver LIKE 'bundle%';
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

/// A row's values bound in column order (the row functions of store_table.hpp).
struct Bind {
  Stmt& s;
  int n = 0;
  void text(const std::string& v) { s.text(++n, v); }
  void text_or_null(const std::string& v) { s.text_or_null(++n, v); }
  void i64(int64_t v) { s.i64(++n, v); }
  void null() { s.null(++n); }
  void real(double v) { s.dbl(++n, v); }
  void blob(const Bytes& v) { s.blob(++n, v); }
};

/// The current result row's columns in order (the Row of store_table.hpp's row functions).
struct Columns {
  Stmt& s;
  int n = 0;
  std::string text() { return s.col_text(n++); }
  int64_t i64() { return s.col_i64(n++); }
  /// Whether the next column is SQL NULL (it is still read by the next call).
  bool next_is_null() { return sqlite3_column_type(s.get(), n) == SQLITE_NULL; }
  double real() { return s.col_dbl(n++); }
  Bytes blob() { return s.col_blob(n++); }
};

/// SQLite's dialect: "?" parameters; every column reads as stored (UUIDs, times and JSON are TEXT).
constexpr detail::Dialect kDialect{
    .param = [](size_t) { return std::string("?"); },
    .read = [](detail::ColumnType, const std::string& name) { return name; },
    .insert_kept_prefix = "INSERT OR IGNORE INTO ",
    .insert_kept_suffix = "",
    .bytewise = "",
};

const detail::StoreSql& sql() {
  static const detail::StoreSql q = detail::store_sql(kDialect);
  return q;
}

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
      Stmt s(db_, sql().insert_trace_data.c_str());
      if (!s.ok()) return err("preparing trace_data");
      Bind b{s};
      detail::trace_data_values(b, t);
      if (s.step() != SQLITE_DONE) return err("inserting trace_data");
    }
    {
      Stmt s(db_, sql().insert_trace.c_str());
      if (!s.ok()) return err("preparing traces");
      Bind b{s};
      detail::trace_values(b, t);
      if (s.step() != SQLITE_DONE) return err(("inserting trace " + t.id).c_str());
    }
    return insert_threads(t.id, t.threads);
  }

  /// The threads and frames rows of a trace (put_trace, replace_frames).
  Status insert_threads(const std::string& trace_id, const std::vector<Thread>& threads) {
    Stmt th(db_, sql().insert_thread.c_str());
    Stmt fr(db_, sql().insert_frame.c_str());
    if (!th.ok() || !fr.ok()) return err("preparing threads/frames");
    int64_t frame_index = 0;
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      th.reset();
      Bind bt{th};
      detail::thread_values(bt, trace_id, ti, threads[ti]);
      if (th.step() != SQLITE_DONE) return err("inserting a thread");
      for (const Frame& f : threads[ti].frames) {
        fr.reset();
        Bind bf{fr};
        detail::frame_values(bf, trace_id, frame_index++, ti, f);
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
      Stmt s(db_, sql().select_trace.c_str());
      if (!s.ok()) return err("preparing a trace query");
      s.text(1, id);
      int rc = s.step();
      if (rc == SQLITE_DONE) return make_error(SPROV_ERR_NOT_FOUND, "trace %s not in sqlite store %s", id.c_str(), path_.c_str());
      if (rc != SQLITE_ROW) return err("reading a trace");
      Columns c{s};
      t = detail::read_trace(c);
    }
    {
      Stmt s(db_, sql().select_threads.c_str());
      if (!s.ok()) return err("preparing a thread query");
      s.text(1, id);
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) {
        Columns c{s};
        if (auto st = detail::read_thread(c, t); !st) return st.error();
      }
      if (rc != SQLITE_DONE) return err("reading threads");
    }
    Stmt s(db_, sql().select_frames.c_str());
    if (!s.ok()) return err("preparing a frame query");
    s.text(1, id);
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Columns c{s};
      if (auto st = detail::read_frame(c, t); !st) return st.error();
    }
    if (rc != SQLITE_DONE) return err("reading frames");
    return t;
  }

  Result<std::vector<TraceSummary>> list_traces(size_t limit) override {
    Stmt s(db_, sql().list_traces.c_str());
    if (!s.ok()) return err("preparing list_traces");
    s.i64(1, limit > INT64_MAX ? INT64_MAX : static_cast<int64_t>(limit));
    std::vector<TraceSummary> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Columns c{s};
      out.push_back(detail::read_trace_summary(c));
    }
    if (rc != SQLITE_DONE) return err("listing traces");
    return out;
  }

  Status put_replay(const Replay& r) override {
    if (auto st = validate_replay(r); !st) return st;
    Stmt s(db_, sql().insert_replay.c_str());
    if (!s.ok()) return err("preparing replays");
    Bind b{s};
    detail::replay_values(b, r);
    if (s.step() != SQLITE_DONE) return err(("inserting replay " + r.replay_id).c_str());
    return {};
  }

  Status put_symbol_bundle(const SymbolBundleRow& b) override {
    std::string h = evidence::hex_encode(evidence::sha256(b.blob));
    if (h != b.sha256)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "symbol bundle %s: its bytes hash to %s",
                        b.sha256.substr(0, 80).c_str(), h.c_str());
    if (auto st = detail::validate_symbol_bundle(b); !st) return st;
    Stmt s(db_, sql().put_symbol_bundle.c_str());
    if (!s.ok()) return err("preparing symbol_bundles");
    Bind bind{s};
    detail::symbol_bundle_values(bind, b);
    if (s.step() != SQLITE_DONE) return err(("storing symbol bundle " + b.sha256).c_str());
    return {};
  }

  Result<SymbolBundleRow> get_symbol_bundle(std::string_view sha256) override {
    std::string h(sha256.substr(0, 80));
    if (sha256.size() != 64 || !is_lower_hex(sha256, 64))
      return make_error(SPROV_ERR_INVALID_ARG, "symbol bundle '%s' is not 64 lower-case hex", h.c_str());
    Stmt s(db_, sql().get_symbol_bundle.c_str());
    if (!s.ok()) return err("preparing a symbol bundle query");
    s.text(1, h);
    int rc = s.step();
    if (rc == SQLITE_DONE) return make_error(SPROV_ERR_NOT_FOUND, "symbol bundle %s not in sqlite store %s", h.c_str(), path_.c_str());
    if (rc != SQLITE_ROW) return err("reading a symbol bundle");
    Columns c{s};
    SymbolBundleRow b = detail::read_symbol_bundle(c);
    if (evidence::hex_encode(evidence::sha256(b.blob)) != b.sha256)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "symbol bundle %s: stored bytes do not hash to their address", h.c_str());
    return b;
  }

  Result<std::vector<SymbolBundleRow>> list_symbol_bundles() override {
    Stmt s(db_, sql().list_symbol_bundles.c_str());
    if (!s.ok()) return err("preparing list_symbol_bundles");
    std::vector<SymbolBundleRow> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Columns c{s};
      out.push_back(detail::read_symbol_bundle_index(c));
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
      Stmt s(db_, sql().update_trace_bundle.c_str());
      if (!s.ok()) return err("preparing a trace update");
      s.text(1, bundle);
      s.text(2, id);
      if (s.step() != SQLITE_DONE) return err(("updating trace " + id).c_str());
      if (sqlite3_changes(db_) == 0)
        return make_error(SPROV_ERR_NOT_FOUND, "trace %s not in sqlite store %s", id.c_str(), path_.c_str());
    }
    for (const std::string* del : {&sql().delete_frames, &sql().delete_threads}) {
      Stmt s(db_, del->c_str());
      if (!s.ok()) return err("preparing a frame deletion");
      s.text(1, id);
      if (s.step() != SQLITE_DONE) return err(("deleting the frames of trace " + id).c_str());
    }
    return insert_threads(id, threads);
  }

  Result<std::vector<Replay>> list_replays(std::string_view trace_id) override {
    std::string id(trace_id.substr(0, 64));
    if (!is_uuid(trace_id)) return make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a lower-case UUID", id.c_str());
    Stmt s(db_, sql().list_replays.c_str());
    if (!s.ok()) return err("preparing list_replays");
    s.text(1, id);
    std::vector<Replay> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Columns c{s};
      out.push_back(detail::read_replay(c));
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
