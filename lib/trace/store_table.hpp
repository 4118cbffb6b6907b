// SPDX-License-Identifier: Apache-2.0
// The stores' one column table: each table's columns, a row struct's values in that order and back, and the SQL built from them for a dialect.
#pragma once

#include <span>
#include <string>

#include "trace/store_rows.hpp"

namespace stackprov::trace::detail {

/// What a column holds, as far as a dialect needs to know: SQLite keeps UUIDs, times and JSON as
/// TEXT, PostgreSQL as UUID, TIMESTAMP and JSONB, which a SELECT must turn back into our text.
/// (The type names themselves are in each store's migrations: SQL that ran on users' databases.)
enum class ColumnType { kText, kInt, kReal, kBlob, kUuid, kTime, kJson };

struct Column {
  const char* name;
  ColumnType type;
};

struct Table {
  const char* name;
  std::span<const Column> columns;
};

// The columns of each table in the order the row functions below write and read them. A table's
// key columns come first, so that a SELECT of one trace's rows is its columns after the key.
inline constexpr Column kTraceDataColumns[] = {
    {"sha256", ColumnType::kText}, {"raw_size", ColumnType::kInt}, {"gzip", ColumnType::kBlob}};
inline constexpr Table kTraceData{"trace_data", kTraceDataColumns};

inline constexpr Column kTraceColumns[] = {
    {"trace_id", ColumnType::kUuid},  {"platform", ColumnType::kText}, {"arch", ColumnType::kText},
    {"captured_at", ColumnType::kTime}, {"build_id", ColumnType::kText}, {"symbol_bundle_sha256", ColumnType::kText},
    {"dsse_ref", ColumnType::kText},  {"data_sha256", ColumnType::kText}};
inline constexpr Table kTraces{"traces", kTraceColumns};
/// list_traces' columns (a TraceSummary's texts): the first five.
inline constexpr size_t kTraceSummaryColumns = 5;

inline constexpr Column kThreadColumns[] = {
    {"trace_id", ColumnType::kUuid}, {"thread_index", ColumnType::kInt}, {"tid", ColumnType::kInt},
    {"name", ColumnType::kText}};
inline constexpr Table kThreads{"threads", kThreadColumns};

inline constexpr Column kFrameColumns[] = {
    {"trace_id", ColumnType::kUuid},      {"frame_index", ColumnType::kInt},      {"thread_index", ColumnType::kInt},
    {"ip", ColumnType::kInt},             {"module_path", ColumnType::kText},     {"module_build_id", ColumnType::kText},
    {"module_offset", ColumnType::kInt},  {"resolved_symbol", ColumnType::kText}, {"symbol_offset", ColumnType::kInt},
    {"file", ColumnType::kText},          {"line", ColumnType::kInt},             {"column_no", ColumnType::kInt},
    {"inline_chain", ColumnType::kJson},  {"resolver", ColumnType::kText},        {"source", ColumnType::kText},
    {"bundle_sha256", ColumnType::kText}, {"unwind_method", ColumnType::kText}, {"module_id_kind", ColumnType::kText}};
inline constexpr Table kFrames{"frames", kFrameColumns};

inline constexpr Column kReplayColumns[] = {
    {"replay_id", ColumnType::kUuid},       {"trace_id", ColumnType::kUuid},
    {"seed", ColumnType::kInt},             {"started_at", ColumnType::kTime},
    {"finished_at", ColumnType::kTime},     {"replay_success_ratio", ColumnType::kReal},
    {"symbol_coverage_pct", ColumnType::kReal}, {"verify_time_ms", ColumnType::kInt},
    {"verifier_version", ColumnType::kText}, {"notes", ColumnType::kJson}};
inline constexpr Table kReplays{"replays", kReplayColumns};

inline constexpr Column kSymbolBundleColumns[] = {
    {"sha256", ColumnType::kText},        {"os", ColumnType::kText},         {"bundle_blob", ColumnType::kBlob},
    {"index_json", ColumnType::kJson},    {"signer", ColumnType::kText},     {"rekor_tile_ref", ColumnType::kText},
    {"dsse_envelope", ColumnType::kText}, {"tlog_proof", ColumnType::kText}, {"checkpoint", ColumnType::kText}};
inline constexpr Table kSymbolBundles{"symbol_bundles", kSymbolBundleColumns};
/// list_symbol_bundles' columns: no blobs.
inline constexpr Column kSymbolBundleIndexColumns[] = {kSymbolBundleColumns[0], kSymbolBundleColumns[3]};

/// What differs in the SQL of the two stores (the values' binding and reading is each store's
/// Sink and Row, below).
struct Dialect {
  /// The n-th parameter of a statement, from 1: SQLite "?", PostgreSQL "$n".
  std::string (*param)(size_t n);
  /// The expression a SELECT reads a column by (`name` with its table alias, if any), so that
  /// a text column comes back as the row structs hold it.
  std::string (*read)(ColumnType type, const std::string& name);
  /// Around "table(columns) VALUES(...)": an INSERT of a content-addressed row that keeps the row
  /// already stored under its key.
  const char* insert_kept_prefix;
  const char* insert_kept_suffix;
  /// After a text column in ORDER BY: the order of its bytes (SQLite's default collation;
  /// PostgreSQL's default follows the database's locale).
  const char* bytewise;
};

/// "c1, c2, ..." as a SELECT of `d` reads them, each name prefixed with `alias` ("t." or "").
std::string select_list(const Dialect& d, std::span<const Column> columns, const std::string& alias = "");
/// "INSERT INTO table(c1, c2, ...) VALUES(p1,p2,...)", with `rows` rows of parameters numbered on
/// (PostgreSQL's multi-row frame batches).
std::string insert_sql(const Dialect& d, const Table& t, size_t rows = 1);

/// Every statement of the stores but the migrations, the schema checks and the transaction
/// control, for one dialect; made once per store kind.
struct StoreSql {
  std::string insert_trace_data, insert_trace, insert_thread, insert_frame, insert_replay, put_symbol_bundle;
  std::string select_trace, select_threads, select_frames, list_traces, list_replays, get_symbol_bundle,
      list_symbol_bundles;
  std::string update_trace_bundle, delete_frames, delete_threads;
};
StoreSql store_sql(const Dialect& d);

// ---- row values. A Sink takes a row's values in column order: text(s), text_or_null(s) (empty
// text as SQL NULL), i64(v), real(v), blob(b). A Row gives a result row's columns in the order
// selected: text(), i64(), real(), blob(), a NULL reading as "", 0 or no bytes. Each function
// writes or reads exactly its table's columns (kTraceColumns...); store_table_test.cpp reads
// each row back through them and checks the SQLite schema against the table.

template <class Sink>
void trace_data_values(Sink& s, const Trace& t) {
  s.text(t.data_sha256);
  s.i64(static_cast<int64_t>(t.data_size));
  s.blob(t.data_gzip);
}

template <class Sink>
void trace_values(Sink& s, const Trace& t) {
  for (const std::string* v : {&t.id, &t.platform, &t.arch, &t.captured_at, &t.build_id, &t.symbol_bundle_sha256,
                               &t.dsse_ref, &t.data_sha256})
    s.text(*v);
}

/// A trace's row joined with its data (select_trace): kTraceColumns, then kTraceDataColumns
/// after sha256. Its threads are read by read_thread and read_frame.
template <class Row>
Trace read_trace(Row& r) {
  Trace t;
  for (std::string* v : {&t.id, &t.platform, &t.arch, &t.captured_at, &t.build_id, &t.symbol_bundle_sha256,
                         &t.dsse_ref, &t.data_sha256})
    *v = r.text();
  t.data_size = static_cast<uint64_t>(r.i64());
  t.data_gzip = r.blob();
  return t;
}

/// list_traces: the first kTraceSummaryColumns of kTraceColumns, then the frame count.
template <class Row>
TraceSummary read_trace_summary(Row& r) {
  TraceSummary s;
  for (std::string* v : {&s.id, &s.platform, &s.arch, &s.captured_at, &s.build_id}) *v = r.text();
  s.frame_count = static_cast<uint64_t>(r.i64());
  return s;
}

/// A thread's row: thread_index is its position in the trace.
template <class Sink>
void thread_values(Sink& s, const std::string& trace_id, size_t thread_index, const Thread& th) {
  s.text(trace_id);
  s.i64(static_cast<int64_t>(thread_index));
  s.i64(to_db(th.tid));
  s.text(th.name);
}

/// The columns after trace_id, in thread_index order: appends the thread to `t`.
template <class Row>
Status read_thread(Row& r, Trace& t) {
  if (r.i64() != static_cast<int64_t>(t.threads.size()))
    return make_error(SPROV_ERR_BAD_FORMAT, "trace %s: thread indexes not contiguous", t.id.c_str());
  Thread th;
  th.tid = from_db(r.i64());
  th.name = r.text();
  t.threads.push_back(std::move(th));
  return {};
}

/// A frame's row: frame_index counts across the trace's threads in order.
template <class Sink>
void frame_values(Sink& s, const std::string& trace_id, int64_t frame_index, size_t thread_index, const Frame& f) {
  s.text(trace_id);
  s.i64(frame_index);
  s.i64(static_cast<int64_t>(thread_index));
  s.i64(to_db(f.ip));
  s.text(f.module_path);
  s.text(f.module_build_id);
  s.i64(to_db(f.module_offset));
  s.text(f.symbol);
  if (f.symbol_offset_known) s.i64(to_db(f.symbol_offset));
  else s.null();  // unknown: no function start was known
  s.text(f.file);
  s.i64(f.line);
  s.i64(f.column);
  s.text(inline_chain_json(f.inline_chain));
  s.text(f.resolver);
  s.text(f.source);
  s.text(f.bundle_sha256);
  s.text(f.unwind_method);
  s.text_or_null(f.module_id_kind);
}

/// The columns after frame_index, in frame_index order: places the frame in its thread of `t`.
template <class Row>
Status read_frame(Row& r, Trace& t) {
  const auto thread_index = static_cast<uint64_t>(r.i64());
  Frame f;
  f.ip = from_db(r.i64());
  f.module_path = r.text();
  f.module_build_id = r.text();
  f.module_offset = from_db(r.i64());
  f.symbol = r.text();
  f.symbol_offset_known = !r.next_is_null();  // NULL: unknown (also a version-1 row's)
  f.symbol_offset = from_db(r.i64());
  f.file = r.text();
  f.line = static_cast<uint32_t>(r.i64());
  f.column = static_cast<uint32_t>(r.i64());
  auto chain = parse_inline_chain(r.text());
  if (!chain) return chain.error();
  f.inline_chain = std::move(chain.value());
  f.resolver = r.text();
  f.source = r.text();
  f.bundle_sha256 = r.text();
  f.unwind_method = r.text();
  f.module_id_kind = r.text();
  return place_frame(t, thread_index, std::move(f));
}

template <class Sink>
void replay_values(Sink& s, const Replay& r) {
  s.text(r.replay_id);
  s.text(r.trace_id);
  s.i64(r.seed);
  s.text(r.started_at);
  s.text(r.finished_at);
  s.real(r.replay_success_ratio);
  s.real(r.symbol_coverage_pct);
  s.i64(r.verify_time_ms);
  s.text(r.verifier_version);
  s.text_or_null(r.notes_json);
}

template <class Row>
Replay read_replay(Row& row) {
  Replay r;
  r.replay_id = row.text();
  r.trace_id = row.text();
  r.seed = row.i64();
  r.started_at = row.text();
  r.finished_at = row.text();
  r.replay_success_ratio = row.real();
  r.symbol_coverage_pct = row.real();
  r.verify_time_ms = row.i64();
  r.verifier_version = row.text();
  r.notes_json = row.text();
  return r;
}

/// index_json and the signature texts but signer and rekor_tile_ref (the seed's columns) are
/// NULL when empty.
template <class Sink>
void symbol_bundle_values(Sink& s, const SymbolBundleRow& b) {
  s.text(b.sha256);
  s.text(b.os);
  s.blob(b.blob);
  s.text_or_null(b.index_json);
  s.text(b.signer);
  s.text(b.rekor_tile_ref);
  s.text_or_null(b.dsse_envelope);
  s.text_or_null(b.tlog_proof);
  s.text_or_null(b.checkpoint);
}

template <class Row>
SymbolBundleRow read_symbol_bundle(Row& r) {
  SymbolBundleRow b;
  b.sha256 = r.text();
  b.os = r.text();
  b.blob = r.blob();
  b.index_json = r.text();
  for (std::string* v : {&b.signer, &b.rekor_tile_ref, &b.dsse_envelope, &b.tlog_proof, &b.checkpoint}) *v = r.text();
  return b;
}

/// kSymbolBundleIndexColumns: sha256 and index_json.
template <class Row>
SymbolBundleRow read_symbol_bundle_index(Row& r) {
  SymbolBundleRow b;
  b.sha256 = r.text();
  b.index_json = r.text();
  return b;
}

}  // namespace stackprov::trace::detail
