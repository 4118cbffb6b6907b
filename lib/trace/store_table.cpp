// SPDX-License-Identifier: Apache-2.0
// The stores' SQL, built from the one column table (store_table.hpp) for a dialect.
#include "trace/store_table.hpp"

namespace stackprov::trace::detail {

std::string select_list(const Dialect& d, std::span<const Column> columns, const std::string& alias) {
  std::string out;
  for (const Column& c : columns) {
    if (!out.empty()) out += ", ";
    out += d.read(c.type, alias + c.name);
  }
  return out;
}

static std::string column_names(std::span<const Column> columns) {
  std::string out;
  for (const Column& c : columns) {
    if (!out.empty()) out += ", ";
    out += c.name;
  }
  return out;
}

/// "table(c1, c2, ...) VALUES(p1,p2,...),(...)"
static std::string into_values(const Dialect& d, const Table& t, size_t rows) {
  std::string out = std::string(t.name) + "(" + column_names(t.columns) + ") VALUES";
  size_t n = 0;
  for (size_t row = 0; row < rows; ++row) {
    out += row ? ",(" : "(";
    for (size_t k = 0; k < t.columns.size(); ++k) {
      if (k) out += ',';
      out += d.param(++n);
    }
    out += ")";
  }
  return out;
}

std::string insert_sql(const Dialect& d, const Table& t, size_t rows) {
  return "INSERT INTO " + into_values(d, t, rows);
}

StoreSql store_sql(const Dialect& d) {
  const std::span<const Column> trace_cols(kTraceColumns), thread_cols(kThreadColumns), frame_cols(kFrameColumns),
      data_cols(kTraceDataColumns);
  StoreSql q;
  q.insert_trace_data = d.insert_kept_prefix + into_values(d, kTraceData, 1) + d.insert_kept_suffix;
  q.insert_trace = insert_sql(d, kTraces);
  q.insert_thread = insert_sql(d, kThreads);
  q.insert_frame = insert_sql(d, kFrames);
  q.insert_replay = insert_sql(d, kReplays);
  // Content-addressed: a second put keeps blob, os and index_json; signature columns that are
  // non-empty in the new row replace the stored ones (a bundle signed after it was stored).
  q.put_symbol_bundle = insert_sql(d, kSymbolBundles) +
                        " ON CONFLICT(sha256) DO UPDATE SET"
                        " signer = COALESCE(NULLIF(excluded.signer, ''), symbol_bundles.signer),"
                        " rekor_tile_ref = COALESCE(NULLIF(excluded.rekor_tile_ref, ''), symbol_bundles.rekor_tile_ref),"
                        " dsse_envelope = COALESCE(NULLIF(excluded.dsse_envelope, ''), symbol_bundles.dsse_envelope),"
                        " tlog_proof = COALESCE(NULLIF(excluded.tlog_proof, ''), symbol_bundles.tlog_proof),"
                        " checkpoint = COALESCE(NULLIF(excluded.checkpoint, ''), symbol_bundles.checkpoint)";

  // A trace's rows: the key is the trace id; the limits bound what a hostile store can make us read.
  q.select_trace = "SELECT " + select_list(d, trace_cols, "t.") + ", " + select_list(d, data_cols.subspan(1), "d.") +
                   " FROM traces t LEFT JOIN trace_data d ON d.sha256 = t.data_sha256 WHERE t.trace_id = " +
                   d.param(1);
  q.select_threads = "SELECT " + select_list(d, thread_cols.subspan(1)) + " FROM threads WHERE trace_id = " +
                     d.param(1) + " ORDER BY thread_index LIMIT " + std::to_string(kMaxThreads);
  q.select_frames = "SELECT " + select_list(d, frame_cols.subspan(2)) + " FROM frames WHERE trace_id = " +
                    d.param(1) + " ORDER BY frame_index LIMIT " + std::to_string(kMaxFramesPerTrace);
  q.list_traces = "SELECT " + select_list(d, trace_cols.first(kTraceSummaryColumns), "t.") +
                  ", (SELECT COUNT(*) FROM frames f WHERE f.trace_id = t.trace_id)"
                  " FROM traces t ORDER BY t.captured_at, t.trace_id LIMIT " + d.param(1);
  q.list_replays = "SELECT " + select_list(d, kReplayColumns) + " FROM replays WHERE trace_id = " + d.param(1) +
                   " ORDER BY started_at, replay_id";
  q.get_symbol_bundle = "SELECT " + select_list(d, kSymbolBundleColumns) + " FROM symbol_bundles WHERE sha256 = " +
                        d.param(1);
  q.list_symbol_bundles = "SELECT " + select_list(d, kSymbolBundleIndexColumns) +
                          " FROM symbol_bundles ORDER BY sha256" + d.bytewise;

  q.update_trace_bundle = "UPDATE traces SET symbol_bundle_sha256 = " + d.param(1) + " WHERE trace_id = " + d.param(2);
  q.delete_frames = "DELETE FROM frames WHERE trace_id = " + d.param(1);
  q.delete_threads = "DELETE FROM threads WHERE trace_id = " + d.param(1);
  return q;
}

}  // namespace stackprov::trace::detail
