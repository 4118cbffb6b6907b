// SPDX-License-Identifier: Apache-2.0
// The stores' column table: each row function writes and reads exactly its table's columns, in one order, and the SQLite migrations make those columns.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "trace/store.hpp"
#include "trace/store_table.hpp"

using namespace stackprov;
using namespace stackprov::trace;

namespace {

using Value = std::variant<std::string, int64_t, double, Bytes, std::monostate>;  // monostate: SQL NULL

/// A Sink that keeps the values (text_or_null keeps the text: NULL is the stores' business).
struct Recorder {
  std::vector<Value> values;
  void text(const std::string& v) { values.emplace_back(v); }
  void text_or_null(const std::string& v) { values.emplace_back(v); }
  void i64(int64_t v) { values.emplace_back(v); }
  void null() { values.emplace_back(std::monostate{}); }
  void real(double v) { values.emplace_back(v); }
  void blob(const Bytes& v) { values.emplace_back(v); }
};

/// A Row that gives recorded values back from `next` on; a value of another kind than the reader
/// asks for throws (std::bad_variant_access), as a read past the end does.
struct Playback {
  const std::vector<Value>& values;
  size_t next = 0;
  const Value& take() {
    if (next >= values.size()) throw std::out_of_range("read past the row's columns");
    return values[next++];
  }
  std::string text() { return std::get<std::string>(take()); }
  int64_t i64() {
    const Value& v = take();
    return std::holds_alternative<std::monostate>(v) ? 0 : std::get<int64_t>(v);  // NULL reads as 0, as the stores'
  }
  bool next_is_null() const { return next < values.size() && std::holds_alternative<std::monostate>(values[next]); }
  double real() { return std::get<double>(take()); }
  Bytes blob() { return std::get<Bytes>(take()); }
};

Frame sample_frame(int k) {
  Frame f;
  f.ip = 0xffffffff00000000ull + k;  // above INT64_MAX: stored bit for bit
  f.module_path = "/lib/m" + std::to_string(k);
  f.module_build_id = "ab" + std::to_string(k);
  f.module_offset = 0x1000 + k;
  f.symbol = "fn" + std::to_string(k);
  f.symbol_offset = 0x10 + k;
  f.file = "f" + std::to_string(k) + ".c";
  f.line = 100 + k;
  f.column = 7 + k;
  f.inline_chain = {{"inl", "i.h", 3, 4}};
  f.resolver = "dwarf";
  f.source = "/src/" + std::to_string(k);
  f.bundle_sha256 = std::string(64, 'c');
  f.unwind_method = "cfi";
  return f;
}

/// The declared types of a table's columns in an SQLite store, read with sqlite3 directly.
std::map<std::string, std::string> sqlite_columns(sqlite3* h, const char* table) {
  std::map<std::string, std::string> out;
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(h, (std::string("PRAGMA table_info(") + table + ")").c_str(), -1, &st, nullptr) ==
          SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW)
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 1))] = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
  sqlite3_finalize(st);
  return out;
}

}  // namespace

TEST_CASE("store rows: each row function writes its table's columns and reads them back in the same order", "[trace]") {
  Trace t;
  t.id = "6f1c1f4e-8d7b-4c1e-9a51-0123456789ab";
  t.platform = "linux";
  t.arch = "x86_64";
  t.captured_at = "2024-05-06T07:08:09.123456Z";
  t.build_id = "beef";
  t.symbol_bundle_sha256 = std::string(64, 'a');
  t.dsse_ref = "dsse:x";
  t.data_gzip = {1, 2, 3};
  t.data_sha256 = std::string(64, 'b');
  t.data_size = 42;

  SECTION("a trace joined with its data; its summary") {
    Recorder r;
    detail::trace_values(r, t);
    CHECK(r.values.size() == std::size(detail::kTraceColumns));
    Recorder data;
    detail::trace_data_values(data, t);
    CHECK(data.values.size() == std::size(detail::kTraceDataColumns));
    r.values.insert(r.values.end(), data.values.begin() + 1, data.values.end());  // select_trace: d.* after sha256
    Playback p{r.values};
    CHECK(detail::read_trace(p) == t);
    CHECK(p.next == r.values.size());

    Recorder s;
    detail::trace_values(s, t);
    s.values.resize(detail::kTraceSummaryColumns);
    s.values.emplace_back(int64_t{9});  // the frame count
    Playback ps{s.values};
    CHECK(detail::read_trace_summary(ps) == TraceSummary{t.id, t.platform, t.arch, t.captured_at, t.build_id, 9});
    CHECK(ps.next == s.values.size());
  }

  SECTION("threads and frames, after their key columns") {
    std::vector<Thread> threads{{0xfffffffffffffff0ull, "main", {sample_frame(1), sample_frame(2)}},
                                {7, "worker", {sample_frame(3)}}};
    Trace back;
    back.id = t.id;
    int64_t frame_index = 0;
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      Recorder r;
      detail::thread_values(r, t.id, ti, threads[ti]);
      REQUIRE(r.values.size() == std::size(detail::kThreadColumns));
      CHECK(std::get<std::string>(r.values[0]) == t.id);
      Playback p{r.values, 1};  // select_threads: the columns after trace_id
      REQUIRE(detail::read_thread(p, back).ok());
      CHECK(p.next == r.values.size());
    }
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      for (const Frame& f : threads[ti].frames) {
        Recorder r;
        detail::frame_values(r, t.id, frame_index, ti, f);
        REQUIRE(r.values.size() == std::size(detail::kFrameColumns));
        CHECK(std::get<std::string>(r.values[0]) == t.id);
        CHECK(std::get<int64_t>(r.values[1]) == frame_index++);
        Playback p{r.values, 2};  // select_frames: the columns after frame_index
        REQUIRE(detail::read_frame(p, back).ok());
        CHECK(p.next == r.values.size());
      }
    }
    CHECK(back.threads == threads);
  }

  SECTION("replays, symbol bundles and their index") {
    Replay rp{"0f1c1f4e-8d7b-4c1e-9a51-0123456789ab", t.id, -5, "2024-05-06T07:08:10.000000Z",
              "2024-05-06T07:08:11.000000Z", 0.25, 87.5, 1234, "v1", "{\"k\":1}"};
    Recorder r;
    detail::replay_values(r, rp);
    REQUIRE(r.values.size() == std::size(detail::kReplayColumns));
    Playback p{r.values};
    CHECK(detail::read_replay(p) == rp);
    CHECK(p.next == r.values.size());

    SymbolBundleRow b{std::string(64, 'd'), "linux", {9, 8, 7}, "{\"i\":2}", "signer", "tile", "dsse", "proof",
                      "checkpoint"};
    Recorder rb;
    detail::symbol_bundle_values(rb, b);
    REQUIRE(rb.values.size() == std::size(detail::kSymbolBundleColumns));
    Playback pb{rb.values};
    CHECK(detail::read_symbol_bundle(pb) == b);
    CHECK(pb.next == rb.values.size());

    // list_symbol_bundles: the values of kSymbolBundleIndexColumns, found by name.
    std::vector<Value> index;
    for (const detail::Column& c : detail::kSymbolBundleIndexColumns)
      for (size_t k = 0; k < std::size(detail::kSymbolBundleColumns); ++k)
        if (std::string(detail::kSymbolBundleColumns[k].name) == c.name) index.push_back(rb.values[k]);
    REQUIRE(index.size() == std::size(detail::kSymbolBundleIndexColumns));
    Playback pi{index};
    SymbolBundleRow want;
    want.sha256 = b.sha256;
    want.index_json = b.index_json;
    CHECK(detail::read_symbol_bundle_index(pi) == want);
    CHECK(pi.next == index.size());
  }
}

TEST_CASE("store rows: the SQLite migrations make exactly the column table's columns", "[trace]") {
  char tmpl[] = "/tmp/unit_trace_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string db = std::string(tmpl) + "/t.db";
  REQUIRE(open_sqlite_store(db).ok());
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  // The migrations' SQLite types for each column type (doc/traces.md: UUID, TIMESTAMP, JSONB as
  // TEXT; the seed's INT and BIGINT both integers).
  auto declared = [](detail::ColumnType type) -> std::vector<std::string> {
    switch (type) {
      case detail::ColumnType::kInt: return {"INT", "BIGINT"};
      case detail::ColumnType::kReal: return {"REAL"};
      case detail::ColumnType::kBlob: return {"BLOB"};
      default: return {"TEXT"};
    }
  };
  for (const detail::Table* t : {&detail::kTraceData, &detail::kTraces, &detail::kThreads, &detail::kFrames,
                                 &detail::kReplays, &detail::kSymbolBundles}) {
    INFO(t->name);
    const auto have = sqlite_columns(h, t->name);
    CHECK(have.size() == t->columns.size());
    for (const detail::Column& c : t->columns) {
      INFO(c.name);
      REQUIRE(have.count(c.name) == 1);
      const auto types = declared(c.type);
      CHECK(std::find(types.begin(), types.end(), have.at(c.name)) != types.end());
    }
  }
  sqlite3_close(h);
  std::filesystem::remove_all(tmpl);
}
