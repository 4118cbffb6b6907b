// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL trace store (libpq): the seed's schema as migration 1, one transaction per trace, batched frame rows.
#include <dlfcn.h>
#include <libpq-fe.h>

#include <memory>
#include <string>
#include <type_traits>

#include "core/runtime_dl.hpp"
#include "evidence/encoding.hpp"
#include "trace/store.hpp"
#include "trace/store_table.hpp"

namespace stackprov::trace {
namespace {

/// libpq, opened on the first PostgreSQL store (dlopen): a program that never opens one
/// does not load libpq and the ~20 libraries it needs (Kerberos, LDAP, TLS), which would
/// cost every stackprov process milliseconds of dynamic linking at start.
struct Libpq {
  decltype(&::PQclear) PQclear = nullptr;
  decltype(&::PQcmdTuples) PQcmdTuples = nullptr;
  decltype(&::PQconnectdb) PQconnectdb = nullptr;
  decltype(&::PQerrorMessage) PQerrorMessage = nullptr;
  decltype(&::PQexec) PQexec = nullptr;
  decltype(&::PQexecParams) PQexecParams = nullptr;
  decltype(&::PQfinish) PQfinish = nullptr;
  decltype(&::PQfreemem) PQfreemem = nullptr;
  decltype(&::PQgetisnull) PQgetisnull = nullptr;
  decltype(&::PQgetlength) PQgetlength = nullptr;
  decltype(&::PQgetvalue) PQgetvalue = nullptr;
  decltype(&::PQntuples) PQntuples = nullptr;
  decltype(&::PQresultErrorMessage) PQresultErrorMessage = nullptr;
  decltype(&::PQresultStatus) PQresultStatus = nullptr;
  decltype(&::PQsetNoticeProcessor) PQsetNoticeProcessor = nullptr;
  decltype(&::PQstatus) PQstatus = nullptr;
  decltype(&::PQunescapeBytea) PQunescapeBytea = nullptr;
  std::string error;  ///< why libpq could not be loaded ("" when loaded)
};

const Libpq* load_libpq() {
  static const Libpq* lib = [] {
    auto* l = new Libpq();
    const char* why = "";
    void* h = runtime_dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL, &why);
    if (h == nullptr) {
      l->error = std::string("cannot load libpq.so.5 (Debian package libpq5): ") + why;
      return l;
    }
    auto sym = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
      if (*fn == nullptr && l->error.empty()) l->error = std::string("libpq.so.5 has no ") + name;
    };
    sym(&l->PQclear, "PQclear");
    sym(&l->PQcmdTuples, "PQcmdTuples");
    sym(&l->PQconnectdb, "PQconnectdb");
    sym(&l->PQerrorMessage, "PQerrorMessage");
    sym(&l->PQexec, "PQexec");
    sym(&l->PQexecParams, "PQexecParams");
    sym(&l->PQfinish, "PQfinish");
    sym(&l->PQfreemem, "PQfreemem");
    sym(&l->PQgetisnull, "PQgetisnull");
    sym(&l->PQgetlength, "PQgetlength");
    sym(&l->PQgetvalue, "PQgetvalue");
    sym(&l->PQntuples, "PQntuples");
    sym(&l->PQresultErrorMessage, "PQresultErrorMessage");
    sym(&l->PQresultStatus, "PQresultStatus");
    sym(&l->PQsetNoticeProcessor, "PQsetNoticeProcessor");
    sym(&l->PQstatus, "PQstatus");
    sym(&l->PQunescapeBytea, "PQunescapeBytea");
    return l;
  }();
  return lib;
}

const Libpq* pq = nullptr;  ///< set by open_postgres_store before any other use

const char* const kMigrations[] = {
    // 1: the seed's schema, verbatim
    R"SQL(
CREATE TABLE traces(
  trace_id UUID PRIMARY KEY,
  platform TEXT,
  captured_at TIMESTAMP,
  build_id TEXT,
  symbol_bundle_sha256 TEXT,
  dsse_ref TEXT);
CREATE TABLE frames(
  trace_id UUID REFERENCES traces,
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
  bundle_blob BYTEA,
  index_json JSONB,
  signer TEXT,
  rekor_tile_ref TEXT);
CREATE TABLE replays(
  replay_id UUID PRIMARY KEY,
  trace_id UUID REFERENCES traces,
  seed BIGINT,
  started_at TIMESTAMP,
  finished_at TIMESTAMP,
  replay_success_ratio FLOAT,
  verify_time_ms INT,
  verifier_version TEXT,
  notes JSONB);
)SQL",
    // 2: arch, captured data, threads, the full frame provenance, replay coverage
    R"SQL(
CREATE TABLE trace_data(
  sha256 TEXT PRIMARY KEY,
  raw_size BIGINT NOT NULL,
  gzip BYTEA NOT NULL);
ALTER TABLE traces ADD COLUMN arch TEXT;
ALTER TABLE traces ADD COLUMN data_sha256 TEXT REFERENCES trace_data(sha256);
CREATE TABLE threads(
  trace_id UUID NOT NULL REFERENCES traces,
  thread_index INT NOT NULL,
  tid BIGINT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY(trace_id, thread_index));
ALTER TABLE frames ADD COLUMN thread_index INT NOT NULL DEFAULT 0;
ALTER TABLE frames ADD COLUMN module_offset BIGINT;
ALTER TABLE frames ADD COLUMN file TEXT;
ALTER TABLE frames ADD COLUMN line BIGINT;
ALTER TABLE frames ADD COLUMN column_no BIGINT;
ALTER TABLE frames ADD COLUMN inline_chain JSONB;
ALTER TABLE frames ADD COLUMN source TEXT;
ALTER TABLE frames ADD COLUMN bundle_sha256 TEXT;
ALTER TABLE frames ADD COLUMN unwind_method TEXT;
ALTER TABLE replays ADD COLUMN symbol_coverage_pct FLOAT;
CREATE INDEX traces_by_time ON traces(captured_at, trace_id);
)SQL",
    // 3: a bundle's signature evidence (DSSE envelope, tlog proof, checkpoint); replays by trace
    R"SQL(
ALTER TABLE symbol_bundles ADD COLUMN dsse_envelope TEXT, ADD COLUMN tlog_proof TEXT, ADD COLUMN checkpoint TEXT;
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

constexpr const char* kTimeFmt = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'";
/// Frames per INSERT statement.
constexpr size_t kFrameBatch = 256;
static_assert(kFrameBatch * std::size(detail::kFrameColumns) <= 65535, "libpq takes at most 65535 parameters");

struct ResultDeleter {
  void operator()(PGresult* r) const { pq->PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

/// A statement's parameters in order (also the Sink of store_table.hpp's row functions): text,
/// except a blob in binary and a NULL.
struct Params {
  std::vector<std::string> values;
  std::vector<char> is_null, is_binary;
  void text(std::string v) {
    values.push_back(std::move(v));
    is_null.push_back(0);
    is_binary.push_back(0);
  }
  void i64(int64_t v) { text(std::to_string(v)); }
  /// %.17g: a double's text that reads back as the same double.
  void real(double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    text(buf);
  }
  /// Empty text as SQL NULL.
  void text_or_null(std::string v) {
    if (v.empty()) null(); else text(std::move(v));
  }
  void null() {
    values.emplace_back();
    is_null.push_back(1);
    is_binary.push_back(0);
  }
  void blob(const Bytes& b) {
    values.emplace_back(b.begin(), b.end());
    is_null.push_back(0);
    is_binary.push_back(1);
  }
};

/// PostgreSQL's dialect: "$n" parameters; UUID and JSONB columns read as text, TIMESTAMP columns
/// in the canonical RFC 3339 form the row structs hold (our session's time zone is UTC).
constexpr detail::Dialect kDialect{
    .param = [](size_t n) { return std::string("$").append(std::to_string(n)); },
    .read = [](detail::ColumnType type, const std::string& name) -> std::string {
      switch (type) {
        case detail::ColumnType::kUuid:
        case detail::ColumnType::kJson: return name + "::text";
        case detail::ColumnType::kTime: return "to_char(" + name + ", " + kTimeFmt + ")";
        default: return name;
      }
    },
    .insert_kept_prefix = "INSERT INTO ",
    .insert_kept_suffix = " ON CONFLICT DO NOTHING",
    .bytewise = " COLLATE \"C\"",
};

const detail::StoreSql& sql() {
  static const detail::StoreSql q = detail::store_sql(kDialect);
  return q;
}

std::string val(const PGresult* r, int row, int col) {
  if (pq->PQgetisnull(r, row, col)) return {};
  return std::string(pq->PQgetvalue(r, row, col), static_cast<size_t>(pq->PQgetlength(r, row, col)));
}
int64_t val_i64(const PGresult* r, int row, int col) {
  if (pq->PQgetisnull(r, row, col)) return 0;
  return strtoll(pq->PQgetvalue(r, row, col), nullptr, 10);
}
double val_dbl(const PGresult* r, int row, int col) {
  if (pq->PQgetisnull(r, row, col)) return 0;
  return strtod(pq->PQgetvalue(r, row, col), nullptr);
}
Bytes val_bytea(const PGresult* r, int row, int col) {
  if (pq->PQgetisnull(r, row, col)) return {};
  size_t n = 0;
  unsigned char* p = pq->PQunescapeBytea(reinterpret_cast<const unsigned char*>(pq->PQgetvalue(r, row, col)), &n);
  if (!p) return {};
  Bytes b(p, p + n);
  pq->PQfreemem(p);
  return b;
}

/// One result row's columns in order (the Row of store_table.hpp's row functions).
struct Columns {
  const PGresult* r;
  int row;
  int n = 0;
  std::string text() { return val(r, row, n++); }
  int64_t i64() { return val_i64(r, row, n++); }
  /// Whether the next column is SQL NULL (it is still read by the next call).
  bool next_is_null() { return pq->PQgetisnull(r, row, n) != 0; }
  double real() { return val_dbl(r, row, n++); }
  Bytes blob() { return val_bytea(r, row, n++); }
};

class PgStore final : public Store {
 public:
  PgStore(PGconn* c, std::string where) : c_(c), where_(std::move(where)) {}
  ~PgStore() override { pq->PQfinish(c_); }

  Error err(const char* what, const PGresult* r = nullptr) const {
    std::string m = r ? pq->PQresultErrorMessage(r) : pq->PQerrorMessage(c_);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return make_error(SPROV_ERR_IO, "postgresql store %s: %s: %s", where_.c_str(), what, m.c_str());
  }

  Result<PgResult> run(const char* sql, const Params& p, const char* what, bool expect_rows = false) {
    std::vector<const char*> vals;
    std::vector<int> lens, fmts;
    for (size_t i = 0; i < p.values.size(); ++i) {
      vals.push_back(p.is_null[i] ? nullptr : p.values[i].data());
      lens.push_back(static_cast<int>(p.values[i].size()));
      fmts.push_back(p.is_binary[i]);
    }
    PgResult r(pq->PQexecParams(c_, sql, static_cast<int>(vals.size()), nullptr, vals.data(), lens.data(), fmts.data(), 0));
    ExecStatusType want = expect_rows ? PGRES_TUPLES_OK : PGRES_COMMAND_OK;
    if (!r || pq->PQresultStatus(r.get()) != want) return err(what, r.get());
    return r;
  }
  Status exec(const char* sql, const char* what) {
    PgResult r(pq->PQexec(c_, sql));
    if (!r || pq->PQresultStatus(r.get()) != PGRES_COMMAND_OK) return err(what, r.get());
    return {};
  }
  void rollback() { PgResult r(pq->PQexec(c_, "ROLLBACK")); }

  Result<int> read_version() {
    auto r = run("SELECT to_regclass('schema_version') IS NOT NULL, to_regclass('traces') IS NOT NULL", {},
                 "reading the schema", true);
    if (!r) return r.error();
    bool have_version = val(r->get(), 0, 0) == "t", have_traces = val(r->get(), 0, 1) == "t";
    if (!have_version) return have_traces ? 1 : 0;
    auto v = run("SELECT COALESCE(MAX(version), 0) FROM schema_version", {}, "reading schema_version", true);
    if (!v) return v.error();
    // Hostile input: a negative version would index the migrations out of bounds (sqlite_store.cpp).
    const int64_t version = val_i64(v->get(), 0, 0);
    if (version < 0 || version > INT32_MAX)
      return make_error(SPROV_ERR_BAD_FORMAT, "postgresql store %s: schema_version %lld is not a schema version",
                        where_.c_str(), static_cast<long long>(version));
    return static_cast<int>(version);
  }

  Status migrate() {
    if (auto st = exec("BEGIN", "beginning migrations"); !st) return st;
    // One migrating session at a time per database: a transaction-scoped advisory lock.
    Status st;
    {
      PgResult r(pq->PQexec(c_, "SELECT pg_advisory_xact_lock(7310302560386151936)"));
      if (!r || pq->PQresultStatus(r.get()) != PGRES_TUPLES_OK) st = err("locking for migrations", r.get());
    }
    int version = 0;
    if (st) {
      auto v = read_version();
      if (!v) st = v.error();
      else version = *v;
    }
    if (st && version > kSchemaVersion) {
      rollback();
      return make_error(SPROV_ERR_UNSUPPORTED,
                        "postgresql store %s has schema version %d, newer than this build's %d: use a newer stackprov",
                        where_.c_str(), version, kSchemaVersion);
    }
    if (st)
      st = exec("CREATE TABLE IF NOT EXISTS schema_version(version INT PRIMARY KEY, applied_at TIMESTAMP NOT NULL)",
                "creating schema_version");
    for (int n = version + 1; st && n <= kSchemaVersion; ++n) {
      st = exec(kMigrations[n - 1], ("migration " + std::to_string(n)).c_str());
      if (!st) break;
      Params p;
      p.i64(n);
      auto r = run("INSERT INTO schema_version(version, applied_at) VALUES($1, now() AT TIME ZONE 'UTC')", p,
                   "recording the schema version");
      if (!r) st = r.error();
    }
    if (st && version == 1) {
      auto r = run("INSERT INTO schema_version(version, applied_at) VALUES(1, now() AT TIME ZONE 'UTC')"
                   " ON CONFLICT DO NOTHING", {}, "recording the schema version");
      if (!r) st = r.error();
    }
    if (st) st = exec("COMMIT", "committing migrations");
    if (!st) rollback();
    return st;
  }

  Status put_trace(const Trace& t) override {
    if (auto st = validate_trace(t); !st) return st;
    if (auto st = exec("BEGIN", "beginning a trace"); !st) return st;
    Status st = put_trace_rows(t);
    if (st) st = exec("COMMIT", "committing a trace");
    if (!st) rollback();
    return st;
  }

  Status put_trace_rows(const Trace& t) {
    {
      Params p;
      detail::trace_data_values(p, t);
      auto r = run(sql().insert_trace_data.c_str(), p, "inserting trace_data");
      if (!r) return r.error();
    }
    {
      Params p;
      detail::trace_values(p, t);
      auto r = run(sql().insert_trace.c_str(), p, ("inserting trace " + t.id).c_str());
      if (!r) return r.error();
    }
    return insert_threads(t.id, t.threads);
  }

  /// The threads and frames rows of a trace (put_trace, replace_frames).
  Status insert_threads(const std::string& trace_id, const std::vector<Thread>& threads) {
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      Params p;
      detail::thread_values(p, trace_id, ti, threads[ti]);
      auto r = run(sql().insert_thread.c_str(), p, "inserting a thread");
      if (!r) return r.error();
    }
    // Frames in batches of multi-row INSERTs.
    Params p;
    size_t rows = 0;
    auto flush = [&]() -> Status {
      if (!rows) return {};
      auto r = run(detail::insert_sql(kDialect, detail::kFrames, rows).c_str(), p, "inserting frames");
      p = Params();
      rows = 0;
      if (!r) return r.error();
      return {};
    };
    int64_t frame_index = 0;
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      for (const Frame& f : threads[ti].frames) {
        detail::frame_values(p, trace_id, frame_index++, ti, f);
        if (++rows == kFrameBatch)
          if (auto st = flush(); !st) return st;
      }
    }
    return flush();
  }

  Result<Trace> get_trace(std::string_view id) override {
    std::string sid(id.substr(0, 64));
    if (!is_uuid(id)) return make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a lower-case UUID", sid.c_str());
    // REPEATABLE READ: the trace and its frames from one snapshot.
    if (auto st = exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "beginning a read"); !st) return st.error();
    auto r = get_trace_rows(sid);
    rollback();
    return r;
  }

  Result<Trace> get_trace_rows(const std::string& id) {
    Trace t;
    Params key;
    key.text(id);
    {
      auto r = run(sql().select_trace.c_str(), key, "reading a trace", true);
      if (!r) return r.error();
      if (pq->PQntuples(r->get()) == 0)
        return make_error(SPROV_ERR_NOT_FOUND, "trace %s not in postgresql store %s", id.c_str(), where_.c_str());
      Columns c{r->get(), 0};
      t = detail::read_trace(c);
    }
    {
      auto r = run(sql().select_threads.c_str(), key, "reading threads", true);
      if (!r) return r.error();
      for (int i = 0; i < pq->PQntuples(r->get()); ++i) {
        Columns c{r->get(), i};
        if (auto st = detail::read_thread(c, t); !st) return st.error();
      }
    }
    auto r = run(sql().select_frames.c_str(), key, "reading frames", true);
    if (!r) return r.error();
    for (int i = 0; i < pq->PQntuples(r->get()); ++i) {
      Columns c{r->get(), i};
      if (auto st = detail::read_frame(c, t); !st) return st.error();
    }
    return t;
  }

  Result<std::vector<TraceSummary>> list_traces(size_t limit) override {
    Params p;
    p.i64(limit > INT64_MAX ? INT64_MAX : static_cast<int64_t>(limit));
    auto r = run(sql().list_traces.c_str(), p, "listing traces", true);
    if (!r) return r.error();
    std::vector<TraceSummary> out;
    for (int i = 0; i < pq->PQntuples(r->get()); ++i) {
      Columns c{r->get(), i};
      out.push_back(detail::read_trace_summary(c));
    }
    return out;
  }

  Status put_replay(const Replay& rp) override {
    if (auto st = validate_replay(rp); !st) return st;
    Params p;
    detail::replay_values(p, rp);
    auto r = run(sql().insert_replay.c_str(), p, ("inserting replay " + rp.replay_id).c_str());
    if (!r) return r.error();
    return {};
  }

  Status put_symbol_bundle(const SymbolBundleRow& b) override {
    std::string h = evidence::hex_encode(evidence::sha256(b.blob));
    if (h != b.sha256)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "symbol bundle %s: its bytes hash to %s",
                        b.sha256.substr(0, 80).c_str(), h.c_str());
    if (auto st = detail::validate_symbol_bundle(b); !st) return st;
    Params p;
    detail::symbol_bundle_values(p, b);
    auto r = run(sql().put_symbol_bundle.c_str(), p, ("storing symbol bundle " + b.sha256).c_str());
    if (!r) return r.error();
    return {};
  }

  Result<SymbolBundleRow> get_symbol_bundle(std::string_view sha256) override {
    std::string h(sha256.substr(0, 80));
    if (sha256.size() != 64 || !is_lower_hex(sha256, 64))
      return make_error(SPROV_ERR_INVALID_ARG, "symbol bundle '%s' is not 64 lower-case hex", h.c_str());
    Params p;
    p.text(h);
    auto r = run(sql().get_symbol_bundle.c_str(), p, "reading a symbol bundle", true);
    if (!r) return r.error();
    if (pq->PQntuples(r->get()) == 0)
      return make_error(SPROV_ERR_NOT_FOUND, "symbol bundle %s not in postgresql store %s", h.c_str(), where_.c_str());
    Columns c{r->get(), 0};
    SymbolBundleRow b = detail::read_symbol_bundle(c);
    if (evidence::hex_encode(evidence::sha256(b.blob)) != b.sha256)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "symbol bundle %s: stored bytes do not hash to their address", h.c_str());
    return b;
  }

  Result<std::vector<SymbolBundleRow>> list_symbol_bundles() override {
    auto r = run(sql().list_symbol_bundles.c_str(), {}, "listing symbol bundles", true);
    if (!r) return r.error();
    std::vector<SymbolBundleRow> out;
    for (int i = 0; i < pq->PQntuples(r->get()); ++i) {
      Columns c{r->get(), i};
      out.push_back(detail::read_symbol_bundle_index(c));
    }
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
    if (auto st = exec("BEGIN", "beginning a frame replacement"); !st) return st;
    Status st = replace_frames_rows(id, threads, bundle);
    if (st) st = exec("COMMIT", "committing a frame replacement");
    if (!st) rollback();
    return st;
  }

  Status replace_frames_rows(const std::string& id, const std::vector<Thread>& threads, const std::string& bundle) {
    Params key;
    key.text(id);
    {
      // Locks the trace's row: concurrent replacements of one trace run one after the other, and
      // each one's DELETEs (a new snapshot per statement) see the rows the previous one committed.
      Params p;
      p.text(bundle);
      p.text(id);
      auto r = run(sql().update_trace_bundle.c_str(), p, ("updating trace " + id).c_str());
      if (!r) return r.error();
      if (std::string(pq->PQcmdTuples(r->get())) == "0")
        return make_error(SPROV_ERR_NOT_FOUND, "trace %s not in postgresql store %s", id.c_str(), where_.c_str());
    }
    for (const std::string* del : {&sql().delete_frames, &sql().delete_threads}) {
      auto r = run(del->c_str(), key, ("deleting the frames of trace " + id).c_str());
      if (!r) return r.error();
    }
    return insert_threads(id, threads);
  }

  Result<std::vector<Replay>> list_replays(std::string_view trace_id) override {
    std::string id(trace_id.substr(0, 64));
    if (!is_uuid(trace_id)) return make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a lower-case UUID", id.c_str());
    Params p;
    p.text(id);
    auto r = run(sql().list_replays.c_str(), p, ("listing the replays of trace " + id).c_str(), true);
    if (!r) return r.error();
    std::vector<Replay> out;
    for (int i = 0; i < pq->PQntuples(r->get()); ++i) {
      Columns c{r->get(), i};
      out.push_back(detail::read_replay(c));
    }
    return out;
  }

  Result<int> schema_version() override { return read_version(); }
  StoreKind kind() const override { return StoreKind::kPostgres; }

 private:
  PGconn* c_;
  std::string where_;
};

void quiet_notices(void*, const char*) {}

/// The URL without its password, for messages.
std::string redact(const std::string& conninfo) {
  size_t scheme = conninfo.find("://");
  size_t at = conninfo.find('@');
  if (scheme == std::string::npos || at == std::string::npos) return conninfo;
  size_t colon = conninfo.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return conninfo;
  return conninfo.substr(0, colon) + ":***" + conninfo.substr(at);
}

}  // namespace

Result<std::unique_ptr<Store>> open_postgres_store(const std::string& conninfo) {
  std::string where = redact(conninfo);
  const Libpq* lib = load_libpq();
  if (!lib->error.empty())
    return make_error(SPROV_ERR_UNSUPPORTED, "postgresql store %s: %s", where.c_str(), lib->error.c_str());
  pq = lib;
  PGconn* c = pq->PQconnectdb(conninfo.c_str());
  if (!c) return make_error(SPROV_ERR_NOMEM, "postgresql store %s: cannot allocate a connection", where.c_str());
  if (pq->PQstatus(c) != CONNECTION_OK) {
    std::string m = pq->PQerrorMessage(c);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    pq->PQfinish(c);
    return make_error(SPROV_ERR_IO, "postgresql store %s: cannot connect: %s", where.c_str(), m.c_str());
  }
  pq->PQsetNoticeProcessor(c, quiet_notices, nullptr);
  auto store = std::make_unique<PgStore>(c, where);
  if (auto st = store->exec("SET TIME ZONE 'UTC'", "setting the time zone"); !st) return st.error();
  if (auto st = store->migrate(); !st) return st.error();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace stackprov::trace
