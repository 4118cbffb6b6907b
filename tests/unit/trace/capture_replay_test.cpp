// SPDX-License-Identifier: Apache-2.0
// The trace C ABI in-process: the SPROVTRD container (round trip, every truncation and byte flip of real snapshots),
// capture of this process into an SQLite store with a bundle, offline resolve, replay under perturbations, the gate.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "capi/internal.hpp"
#include "evidence/json.hpp"
#include "stackprov/trace.h"
#include "trace/capture_data.hpp"

using namespace stackprov;

namespace {

/// A temporary directory removed at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/unit_trace_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

__attribute__((noinline)) sprov_snapshot* capture_here(sprov_context* ctx) {
  sprov_snapshot* s = nullptr;
  REQUIRE(sprov_snapshot_capture_self(ctx, nullptr, &s) == 0);
  asm volatile("" ::: "memory");
  return s;
}

/// Counts rows with sqlite3 directly (not through our store).
long long count_rows(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const long long n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

/// The little-endian u32 at `at` of a serialized capture.
uint32_t capture_u32_at(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 | uint32_t(b[at + 3]) << 24;
}

}  // namespace

TEST_CASE("SPROVTRD: real snapshots round trip; truncations, trailing bytes and flips are refused or parsed safely",
          "[trace]") {
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_snapshot* a = capture_here(ctx);
  std::vector<trace::CapturedThread> in(2);
  in[0].tid = 7;
  in[0].name = "main";
  in[0].snapshot = a->snap;
  in[1].tid = 8;
  in[1].snapshot = a->snap;
  in[1].snapshot.tid = 8;
  const std::vector<uint8_t> bytes = trace::serialize_capture(in);
  auto back = trace::deserialize_capture(bytes.data(), bytes.size());
  REQUIRE(back.ok());
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].name == "main");
  CHECK((*back)[1].tid == 8);
  CHECK(memory::serialize((*back)[0].snapshot) == memory::serialize(a->snap));
  // Every proper prefix is refused with an error naming an offset.
  for (size_t n = 0; n < bytes.size(); n += (n < 256 ? 1 : 97)) {
    auto r = trace::deserialize_capture(bytes.data(), n);
    INFO("prefix " << n);
    REQUIRE_FALSE(r.ok());
  }
  std::vector<uint8_t> trailing = bytes;
  trailing.push_back(0);
  auto t = trace::deserialize_capture(trailing.data(), trailing.size());
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find("trailing") != std::string::npos);
  // Flips in the container header and the first snapshot header: refused or parsed, never a crash.
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 600); ++i) {
    std::vector<uint8_t> b = bytes;
    b[i] ^= 0xa5;
    (void)trace::deserialize_capture(b.data(), b.size());
  }
  sprov_snapshot_free(a);
  sprov_context_free(ctx);
}

TEST_CASE("SPROVTRD version 2: JIT entries round trip; version 1 without them; hostile JIT lengths refused",
          "[trace]") {
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_snapshot* a = capture_here(ctx);
  std::vector<trace::CapturedThread> in(1);
  in[0].tid = 7;
  in[0].snapshot = a->snap;
  // No JIT entries: the version-1 bytes older readers read (doc/traces.md "Capture").
  const std::vector<uint8_t> v1 = trace::serialize_capture(in);
  CHECK(capture_u32_at(v1, 8) == 1);
  trace::CapturedJit none;
  none.path = "/tmp/perf-1.map";
  CHECK(trace::serialize_capture(in, none) == v1);
  trace::CapturedJit jit;
  jit.path = "/tmp/perf-42.map";
  jit.entries = {{0x7f0000001100, 0x13, "LazyCompile:*jitInner /srv/app.js:7"}, {0x7f0000001400, 0x13, "jitOuter"}};
  const std::vector<uint8_t> v2 = trace::serialize_capture(in, jit);
  CHECK(capture_u32_at(v2, 8) == 2);
  REQUIRE(v2.size() > v1.size());
  CHECK(std::equal(v1.begin() + 12, v1.end(), v2.begin() + 12));  // the threads as in version 1, the JIT section after
  trace::CapturedJit back;
  auto r = trace::deserialize_capture(v2.data(), v2.size(), &back);
  REQUIRE(r.ok());
  CHECK(r->size() == 1);
  CHECK(back.path == jit.path);
  REQUIRE(back.entries.size() == 2);
  CHECK(back.entries[0].start == 0x7f0000001100);
  CHECK(back.entries[0].size == 0x13);
  CHECK(back.entries[0].name == jit.entries[0].name);
  CHECK(back.entries[1].name == "jitOuter");
  trace::CapturedJit from_v1;
  from_v1.path = "x";
  REQUIRE(trace::deserialize_capture(v1.data(), v1.size(), &from_v1).ok());
  CHECK(from_v1.entries.empty());
  CHECK(from_v1.path.empty());
  // The map these entries make names the JIT frames as a perf map file would.
  auto map = symbolize::PerfMap::from_entries(back.path, back.entries);
  REQUIRE(map);
  REQUIRE(map->find(0x7f0000001110));
  CHECK(map->find(0x7f0000001110)->name == jit.entries[0].name);
  CHECK(map->find(0x7f0000001113) == nullptr);
  // Every proper prefix of the JIT section is refused, naming the JIT field.
  for (size_t n = v1.size(); n < v2.size(); ++n) {
    auto p = trace::deserialize_capture(v2.data(), n);
    INFO("prefix " << n);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().message.find("JIT entry") != std::string::npos);
  }
  const size_t sec = v1.size();  // u32 path_len, path, u32 n_jit, entries
  const size_t n_at = sec + 4 + jit.path.size();
  auto refused = [&](std::vector<uint8_t> b, const char* field) {
    auto p = trace::deserialize_capture(b.data(), b.size());
    INFO(field);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == SPROV_ERR_SNAPSHOT);
    CHECK(p.error().message.find(field) != std::string::npos);
  };
  std::vector<uint8_t> b = v2;
  b[sec + 3] = 0x7f;  // path_len 2^30+
  refused(b, "jit_path_len");
  b = v2;
  b[n_at] = 0; b[n_at + 1] = 0; b[n_at + 2] = 0; b[n_at + 3] = 0;  // version 2 with no entry
  refused(b, "n_jit");
  b = v2;
  b[n_at + 3] = 0xff;  // more entries than the limit
  refused(b, "n_jit");
  b = v2;
  for (int k = 0; k < 8; ++k) b[n_at + 4 + 8 + k] = 0;  // size 0
  refused(b, "jit_size");
  b = v2;
  for (int k = 0; k < 8; ++k) b[n_at + 4 + k] = 0xff;  // start + size wraps
  refused(b, "jit_size");
  b = v2;
  b[n_at + 4 + 16 + 3] = 0x40;  // name_len 1 GiB
  refused(b, "jit_name_len");
  b = v2;
  b.push_back(0);
  refused(b, "trailing");
  sprov_snapshot_free(a);
  sprov_context_free(ctx);
}

TEST_CASE("SPROVTRD version 3: kernel segments round trip; older versions unchanged; hostile kernel fields refused",
          "[trace][kernel]") {
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_snapshot* a = capture_here(ctx);
  std::vector<trace::CapturedThread> in(1);
  in[0].tid = 7;
  in[0].snapshot = a->snap;
  trace::CapturedJit jit;
  jit.path = "/tmp/perf-42.map";
  jit.entries = {{0x7f0000001100, 0x13, "jitInner"}};
  trace::CapturedKernel kernel;
  kernel.build_id = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  for (size_t i = 0; i < 32; ++i) kernel.btf_sha256[i] = static_cast<uint8_t>(i);
  trace::CapturedKernelSegment seg;
  seg.tid = 7;
  seg.syscall = 230;
  seg.user_sp = 0x7ffd00001000;
  seg.user_pc = 0x7f0000002545;
  seg.frames = {{"hrtimer_nanosleep", 0x74, 0x110, "", 1234, false, "long int hrtimer_nanosleep(ktime_t rqtp)"},
                {"common_nsleep.isra.0", 0x30, 0x50, "", 99, true, "int common_nsleep(const clockid_t which_clock)"},
                {"entry_SYSCALL_64_after_hwframe", 0x76, 0x7e, "", 0, false, ""},
                {"nfs_wait_bit_killable", 0x1a, 0x60, "nfs", 0, false, ""}};
  trace::CapturedKernelSegment empty;  // a thread without a kernel stack: not written
  empty.tid = 8;
  kernel.segments = {seg, empty};
  // Without kernel segments: the version-1 and version-2 bytes as before.
  const std::vector<uint8_t> v1 = trace::serialize_capture(in);
  const std::vector<uint8_t> v2 = trace::serialize_capture(in, jit);
  CHECK(trace::serialize_capture(in, {}, trace::CapturedKernel{}) == v1);
  trace::CapturedKernel no_id = kernel;  // a kernel segment needs the kernel's identity
  no_id.build_id.clear();
  CHECK(trace::serialize_capture(in, jit, no_id) == v2);
  trace::CapturedKernel from_old;
  from_old.build_id = {1};
  REQUIRE(trace::deserialize_capture(v2.data(), v2.size(), nullptr, &from_old).ok());
  CHECK(from_old.build_id.empty());
  CHECK(from_old.empty());

  auto check_kernel = [&](const trace::CapturedKernel& k) {
    CHECK(k.build_id == kernel.build_id);
    CHECK(k.btf_sha256 == kernel.btf_sha256);
    REQUIRE(k.segments.size() == 1);
    const auto& s = k.segments[0];
    CHECK(s.tid == 7);
    CHECK(s.syscall == 230);
    CHECK(s.user_sp == seg.user_sp);
    CHECK(s.user_pc == seg.user_pc);
    REQUIRE(s.frames.size() == seg.frames.size());
    for (size_t i = 0; i < s.frames.size(); ++i) {
      INFO("frame " << i);
      CHECK(s.frames[i].symbol == seg.frames[i].symbol);
      CHECK(s.frames[i].offset == seg.frames[i].offset);
      CHECK(s.frames[i].size == seg.frames[i].size);
      CHECK(s.frames[i].module == seg.frames[i].module);
      CHECK(s.frames[i].btf_func_id == seg.frames[i].btf_func_id);
      CHECK(s.frames[i].approximate == seg.frames[i].approximate);
      CHECK(s.frames[i].prototype == seg.frames[i].prototype);
    }
  };
  const std::vector<uint8_t> v3 = trace::serialize_capture(in, {}, kernel);
  CHECK(capture_u32_at(v3, 8) == 3);
  CHECK(std::equal(v1.begin() + 12, v1.end(), v3.begin() + 12));  // the threads as in version 1
  CHECK(capture_u32_at(v3, v1.size()) == 2);                               // sections: kernel only
  trace::CapturedKernel back;
  trace::CapturedJit no_jit;
  auto r = trace::deserialize_capture(v3.data(), v3.size(), &no_jit, &back);
  REQUIRE(r.ok());
  CHECK(r->size() == 1);
  CHECK(no_jit.entries.empty());
  check_kernel(back);
  // With JIT entries too: the JIT section as in version 2, then the kernel section.
  const std::vector<uint8_t> v3j = trace::serialize_capture(in, jit, kernel);
  CHECK(capture_u32_at(v3j, 8) == 3);
  CHECK(capture_u32_at(v3j, v1.size()) == 3);
  CHECK(std::equal(v2.begin() + v1.size(), v2.end(), v3j.begin() + v1.size() + 4));
  trace::CapturedJit back_jit;
  REQUIRE(trace::deserialize_capture(v3j.data(), v3j.size(), &back_jit, &back).ok());
  REQUIRE(back_jit.entries.size() == 1);
  CHECK(back_jit.entries[0].name == "jitInner");
  check_kernel(back);
  CHECK(trace::serialize_capture(*r, {}, back) == v3);  // one encoding per value

  // Every proper prefix of the sections is refused, naming the field of the kernel segment.
  for (size_t n = v1.size(); n < v3.size(); ++n) {
    auto p = trace::deserialize_capture(v3.data(), n);
    INFO("prefix " << n);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == SPROV_ERR_SNAPSHOT);
    if (n >= v1.size() + 4) CHECK(p.error().message.find("kernel segment") != std::string::npos);
  }
  // Hostile counts and lengths: refused naming the field and the value.
  const size_t sec = v1.size();          // u32 sections
  const size_t id_at = sec + 4;          // u8 id_len, id[20], sha256[32], u32 n_segments
  const size_t nseg_at = id_at + 1 + 20 + 32;
  const size_t seg_at = nseg_at + 4;     // u64 tid, i64 syscall, u64 sp, u64 pc, u32 n_frames
  const size_t nf_at = seg_at + 32;
  const size_t f0 = nf_at + 4;           // u32 name_len, name, u64 offset, u64 size, u32 module_len, ...
  const size_t f0_mod = f0 + 4 + seg.frames[0].symbol.size() + 16;
  const size_t f0_id = f0_mod + 4;       // u32 btf_func_id, u8 approximate, u32 proto_len, proto
  auto refused = [&](std::vector<uint8_t> b, const char* field, const char* value) {
    auto p = trace::deserialize_capture(b.data(), b.size());
    INFO(field << " " << value);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == SPROV_ERR_SNAPSHOT);
    CHECK(p.error().message.find(field) != std::string::npos);
    CHECK(p.error().message.find(value) != std::string::npos);
  };
  std::vector<uint8_t> b = v3;
  b[sec] = 0;  // version 3 without the kernel section
  refused(b, "sections", "0x0");
  b = v3;
  b[sec] = 0x6;  // an unknown section
  refused(b, "sections", "0x6");
  b = v3;
  b[id_at] = 0;
  refused(b, "kernel_id_len", ": 0 ");
  b = v3;
  b[id_at] = 65;
  refused(b, "kernel_id_len", ": 65 ");
  b = v3;
  b[nseg_at] = 0;
  refused(b, "n_segments", ": 0 ");
  b = v3;
  b[nseg_at + 2] = 0x10;  // 1 + 2^20 segments
  refused(b, "n_segments", ": 1048577 ");
  b = v3;
  b[nf_at] = 0;
  refused(b, "n_frames", ": 0 ");
  b = v3;
  b[nf_at] = 1;
  b[nf_at + 1] = 1;  // 257 frames
  refused(b, "n_frames", ": 257 ");
  b = v3;
  b[f0] = 0;
  refused(b, "name_len", ": 0 ");
  b = v3;
  b[f0 + 3] = 0x40;  // 1 GiB name
  refused(b, "name_len", ": 1073741841 ");
  b = v3;
  b[f0_mod + 2] = 1;  // module_len 65536
  refused(b, "module_len", ": 65536 ");
  b = v3;
  b[f0_id + 4] = 2;
  refused(b, "approximate", ": 2 ");
  b = v3;
  for (int k = 0; k < 4; ++k) b[f0_id + k] = 0;  // a prototype with no BTF function
  refused(b, "proto_len", ": 40 ");
  b = v3;
  b.push_back(0);
  refused(b, "trailing", "1 trailing");
  // Flips anywhere in the sections: refused or parsed, never a crash.
  for (size_t i = sec; i < v3j.size(); ++i) {
    std::vector<uint8_t> c = v3j;
    c[i] ^= 0xa5;
    (void)trace::deserialize_capture(c.data(), c.size(), nullptr, &back);
  }
  sprov_snapshot_free(a);
  sprov_context_free(ctx);
}

TEST_CASE("trace C ABI: capture this process with a bundle, resolve offline, replay 3 seeds, gate without keys",
          "[trace][bundle-build]") {
  TempDir dir;
  const std::string db = dir.path + "/traces.db";
  const std::string url = "sqlite:" + db;
  const std::string bstore = dir.path + "/bundles";
  // No debug files (an empty debug directory): libc is bundled from its symbol tables, which
  // keeps this test quick under ASan (libc's DWARF takes minutes there).
  const std::string nodebug = dir.path + "/no-debug";
  std::filesystem::create_directory(nodebug);
  sprov_context_opts co{};
  co.sz = sizeof co;
  co.bundle_store = bstore.c_str();
  co.debug_dirs = nodebug.c_str();
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(&co, &ctx) == 0);
  sprov_trace_store* store = nullptr;
  REQUIRE(sprov_trace_store_open(url.c_str(), &store) == 0);

  auto proc = std::make_unique<sprov_process>();
  proc->pid = getpid();
  proc->threads.emplace_back(capture_here(ctx));
  sprov_trace_capture_opts o{};
  o.sz = sizeof o;
  o.flags = SPROV_TRACE_BUNDLE;
  char id[SPROV_TRACE_ID_STRLEN];
  const int rc = sprov_trace_capture(ctx, proc.get(), store, &o, id, sizeof id);
  INFO(sprov_last_error_message());
  REQUIRE(rc == 0);
  CHECK(count_rows(db, "SELECT count(*) FROM traces WHERE trace_id = '" + std::string(id) + "'") == 1);
  const long long frames = count_rows(db, "SELECT count(*) FROM frames WHERE trace_id = '" + std::string(id) + "'");
  CHECK(frames >= 3);
  CHECK(count_rows(db, "SELECT count(*) FROM symbol_bundles") == 1);

  sprov_trace_resolve_opts ro{};
  ro.sz = sizeof ro;
  ro.flags = SPROV_TRACE_OFFLINE;
  char* report = nullptr;
  REQUIRE(sprov_trace_resolve(ctx, store, id, &ro, &report, nullptr) == 0);
  CHECK(std::string(report).find("\"offline\":true") != std::string::npos);
  sprov_free(report);
  CHECK(count_rows(db, "SELECT count(*) FROM frames WHERE trace_id = '" + std::string(id) + "'") == frames);

  sprov_trace_replay_opts rp{};
  rp.sz = sizeof rp;
  rp.seeds = 3;
  rp.min_coverage_pct = 0;
  rp.min_success_ratio = 0;
  sprov_replay_report* rep = nullptr;
  REQUIRE(sprov_trace_replay(ctx, store, id, &rp, &rep) == 0);
  // The offline, relocated, shuffled replay reproduces the stored resolution exactly.
  CHECK(sprov_replay_report_success_ratio(rep) == 1.0);
  // No key was given: the bundle is unsigned and nothing vouches for it.
  CHECK(sprov_replay_report_exit_code(rep) == SPROV_GATE_DSSE);
  char* line = nullptr;
  REQUIRE(sprov_replay_report_format(rep, SPROV_REPORT_SUMMARY, &line, nullptr) == 0);
  CHECK(std::string(line).find("FAIL dsse, inclusion") != std::string::npos);
  sprov_free(line);
  CHECK(sprov_replay_report_format(rep, 99, &line, nullptr) == SPROV_ERR_INVALID_ARG);
  sprov_replay_report_free(rep);
  CHECK(count_rows(db, "SELECT count(*) FROM replays WHERE trace_id = '" + std::string(id) + "'") == 3);

  // Bad input names the value.
  CHECK(sprov_trace_replay(ctx, store, "not-a-uuid", &rp, &rep) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("not-a-uuid") != std::string::npos);
  CHECK(sprov_trace_replay(ctx, store, "00000000-0000-4000-8000-000000000000", &rp, &rep) == SPROV_ERR_NOT_FOUND);
  sprov_trace_store_free(store);
  sprov_context_free(ctx);
}

TEST_CASE("replay: the perturbations drawn are what doc/traces.md says, and a seed always draws the same", "[trace]") {
  TempDir dir;
  const std::string db = dir.path + "/traces.db";
  const std::string url = "sqlite:" + db;
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_trace_store* store = nullptr;
  REQUIRE(sprov_trace_store_open(url.c_str(), &store) == 0);
  auto proc = std::make_unique<sprov_process>();
  proc->pid = getpid();
  proc->threads.emplace_back(capture_here(ctx));
  const size_t n_modules = proc->threads[0]->snap.modules.size();
  REQUIRE(n_modules >= 2);
  char id[SPROV_TRACE_ID_STRLEN];
  REQUIRE(sprov_trace_capture(ctx, proc.get(), store, nullptr, id, sizeof id) == 0);

  auto replay = [&](uint64_t first, uint32_t seeds) {
    sprov_trace_replay_opts rp{};
    rp.sz = sizeof rp;
    rp.seeds = seeds;
    rp.first_seed = first;
    rp.min_coverage_pct = 0;
    rp.min_success_ratio = 0;
    sprov_replay_report* rep = nullptr;
    REQUIRE(sprov_trace_replay(ctx, store, id, &rp, &rep) == 0);
    char* json = nullptr;
    REQUIRE(sprov_replay_report_format(rep, SPROV_REPORT_JSON, &json, nullptr) == 0);
    auto j = evidence::Json::parse(json);
    sprov_free(json);
    // No bundle: the bundles-only replay cannot name the frames, and nothing vouches for them.
    CHECK(sprov_replay_report_exit_code(rep) == SPROV_GATE_DSSE);
    sprov_replay_report_free(rep);
    return j;
  };
  const evidence::Json a = replay(1, 4);
  REQUIRE(a["seeds"].size() == 4);
  std::set<std::string> distinct;
  for (const auto& s : a["seeds"]) {
    const auto& p = s["perturbation"];
    CHECK(p["bundles_only"] == true);
    CHECK(p["module_cache_capacity"].get<int>() >= 1);
    CHECK(p["module_cache_capacity"].get<int>() <= 3);
    CHECK(p["workers"].get<int>() >= 1);
    CHECK(p["workers"].get<int>() <= 4);
    std::vector<size_t> order = p["module_insert_order"].get<std::vector<size_t>>();
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == i);  // a permutation of the modules
    CHECK(order.size() == n_modules);
    for (const auto& [path, delta] : p["relocation"].items()) {
      const std::string d = delta.get<std::string>();
      INFO(path << " " << d);
      REQUIRE((d[0] == '+' || d[0] == '-'));
      const uint64_t v = std::stoull(d.substr(1), nullptr, 16);
      CHECK(v != 0);
      CHECK(v % 4096 == 0);  // page-aligned
      distinct.insert(d);
    }
  }
  CHECK(distinct.size() > 1);  // modules move by different deltas
  // Seed 2 again, alone: the same perturbation as in the first run.
  const evidence::Json b = replay(2, 1);
  CHECK(b["seeds"][0]["perturbation"] == a["seeds"][1]["perturbation"]);
  CHECK(count_rows(db, "SELECT count(*) FROM replays WHERE trace_id = '" + std::string(id) + "'") == 5);
  sprov_trace_store_free(store);
  sprov_context_free(ctx);
}
