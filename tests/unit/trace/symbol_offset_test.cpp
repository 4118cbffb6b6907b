// SPDX-License-Identifier: Apache-2.0
// A trace tells "offset unknown" (a bundle names a function without its start) from "at the
// function's start" (offset 0), issue 36: JSON null / SQL NULL for unknown. A store written before
// (schema version 4: a bundle frame's unknown offset stored as 0) is migrated so that it still
// reads as unknown, and renders as before: the name alone; a known 0 renders "+0x0", as `stack`.
#include <catch2/catch.hpp>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <variant>

#include "pipeline/frame_render.hpp"
#include "trace/events.hpp"
#include "trace/store.hpp"
#include "trace/trace.hpp"

using namespace stackprov;
using namespace stackprov::trace;

namespace {

Frame bundle_frame(uint64_t ip, const std::string& sym, bool known) {
  Frame f;
  f.ip = ip;
  f.module_path = "/bin/app";
  f.module_offset = ip - 0x1000;
  f.symbol = sym;
  f.symbol_offset = 0;
  f.symbol_offset_known = known;
  f.resolver = "bundle";
  f.unwind_method = "cfi_bundle";
  return f;
}

Trace sample() {
  Trace t;
  t.id = new_uuid().value();
  t.platform = "linux";
  t.arch = "x86_64";
  t.captured_at = now_rfc3339();
  REQUIRE(set_trace_data(t, reinterpret_cast<const uint8_t*>("x"), 1).ok());
  Frame sym0 = bundle_frame(0x1030, "main", true);
  sym0.resolver = "symtab";
  t.threads = {{7, "main", {bundle_frame(0x1010, "at_start", true), bundle_frame(0x1020, "unknown", false), sym0}}};
  return t;
}

std::string text(const Trace& t) {
  std::string out;
  for (const auto& rt : pipeline::trace_render_threads(t)) pipeline::render_thread(rt, 0, &out);
  return out;
}

const char* const kRendered =
    "TID 7 \"main\":\n"
    "#0  0x0000000000001010 at_start+0x0 - /bin/app [cfi_bundle]\n"
    "#1  0x0000000000001020 unknown - /bin/app [cfi_bundle]\n"
    "#2  0x0000000000001030 main+0x0 - /bin/app [cfi_bundle]\n";

void sql(const std::string& db, const char* statement) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, statement, nullptr, nullptr, &err);
  INFO(statement << ": " << (err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(h);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("symbol offsets: unknown and 0 apart in the event, the store and the rendering", "[trace][offset]") {
  const Trace t = sample();
  CHECK(text(t) == kRendered);
  const std::string line = trace_capture_event(t);
  CHECK(line.find("\"symbol_offset\":null") != std::string::npos);
  CHECK(line.find("\"symbol_offset\":\"0x0\"") != std::string::npos);
  auto ev = parse_event(line);
  REQUIRE(ev.ok());
  const Trace& back = std::get<CaptureEvent>(ev.value()).trace;
  REQUIRE(back.threads.size() == 1);
  CHECK(back.threads[0].frames == t.threads[0].frames);

  char tmpl[] = "/tmp/unit_trace_offset_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string db = std::string(tmpl) + "/t.db";
  {
    auto s = open_sqlite_store(db);
    REQUIRE(s.ok());
    REQUIRE(s.value()->put_trace(t).ok());
    auto got = s.value()->get_trace(t.id);
    REQUIRE(got.ok());
    CHECK(got->threads[0].frames == t.threads[0].frames);
    CHECK(text(got.value()) == kRendered);
  }
  // The same rows as a version-4 store wrote them: the unknown offset as 0.
  sql(db, "UPDATE frames SET symbol_offset = 0; DELETE FROM schema_version WHERE version = 5;");
  {
    auto s = open_sqlite_store(db);  // migration 5
    REQUIRE(s.ok());
    CHECK(s.value()->schema_version().value() == kSchemaVersion);
    auto got = s.value()->get_trace(t.id);
    REQUIRE(got.ok());
    const auto& f = got->threads[0].frames;
    // A bundle frame's 0 was "unknown" then (the only way it was written): it still is; a symbol
    // table's 0 is a known offset.
    CHECK_FALSE(f[0].symbol_offset_known);
    CHECK_FALSE(f[1].symbol_offset_known);
    CHECK(f[2].symbol_offset_known);
    CHECK(text(got.value()) ==
          "TID 7 \"main\":\n"
          "#0  0x0000000000001010 at_start - /bin/app [cfi_bundle]\n"
          "#1  0x0000000000001020 unknown - /bin/app [cfi_bundle]\n"
          "#2  0x0000000000001030 main+0x0 - /bin/app [cfi_bundle]\n");
  }
  std::filesystem::remove_all(tmpl);
}
