// SPDX-License-Identifier: Apache-2.0
// lib/trace unit tests: UUID v4 bits (RFC 4122), canonical RFC 3339 times, gzip against GNU gzip's bytes, hostile gzip and event input, store URLs, row bounds.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <set>

#include "trace/events.hpp"
#include "trace/store.hpp"
#include "trace/store_rows.hpp"
#include "trace/trace.hpp"

using namespace stackprov;
using namespace stackprov::trace;

TEST_CASE("new_uuid: RFC 4122 version 4, variant 10, unique", "[trace]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto u = new_uuid();
    REQUIRE(u.ok());
    REQUIRE(is_uuid(*u));
    CHECK((*u)[14] == '4');                          // version nibble
    CHECK(std::string("89ab").find((*u)[19]) != std::string::npos);  // variant 10xx
    seen.insert(*u);
  }
  CHECK(seen.size() == 1000);
  CHECK_FALSE(is_uuid("6F1C1F4E-8D7B-4C1E-9A51-0123456789AB"));  // upper case is not canonical here
  CHECK_FALSE(is_uuid("6f1c1f4e8d7b4c1e9a510123456789ab"));
}

TEST_CASE("canonical RFC 3339 UTC times", "[trace]") {
  CHECK(is_canonical_time(now_rfc3339()));
  CHECK(is_canonical_time("2024-02-29T23:59:59.999999Z"));  // leap year
  CHECK_FALSE(is_canonical_time("2023-02-29T00:00:00.000000Z"));
  CHECK_FALSE(is_canonical_time("1900-02-29T00:00:00.000000Z"));
  CHECK(is_canonical_time("2000-02-29T00:00:00.000000Z"));
  CHECK_FALSE(is_canonical_time("2024-01-01T24:00:00.000000Z"));
  CHECK_FALSE(is_canonical_time("2024-01-01T00:00:00Z"));        // no fraction: not canonical
  CHECK_FALSE(is_canonical_time("2024-01-01T00:00:00.000000+01:00"));
  CHECK_FALSE(is_canonical_time("2024-13-01T00:00:00.000000Z"));
}

// `printf 'hello\n' | gzip -n -6` (GNU gzip 1.12): an independent encoder's bytes.
static const Bytes kGnuGzipHello = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd,
                                    0xc9, 0xc9, 0xe7, 0x02, 0x00, 0x20, 0x30, 0x3a, 0x36, 0x06, 0x00, 0x00, 0x00};

TEST_CASE("gzip: reads GNU gzip's member, writes a deterministic one", "[trace]") {
  auto d = gzip_decompress(kGnuGzipHello);
  REQUIRE(d.ok());
  CHECK(std::string(d->begin(), d->end()) == "hello\n");
  std::string text(100000, 'x');
  for (size_t i = 0; i < text.size(); i += 7) text[i] = static_cast<char>('a' + i % 26);
  auto a = gzip_compress(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  auto b = gzip_compress(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
  // RFC 1952 header: magic, deflate, no flags, mtime 0
  CHECK(Bytes(a->begin(), a->begin() + 8) == Bytes{0x1f, 0x8b, 8, 0, 0, 0, 0, 0});
  auto back = gzip_decompress(*a);
  REQUIRE(back.ok());
  CHECK(std::string(back->begin(), back->end()) == text);
}

TEST_CASE("gzip: hostile members are refused", "[trace]") {
  Bytes truncated(kGnuGzipHello.begin(), kGnuGzipHello.end() - 4);
  CHECK_FALSE(gzip_decompress(truncated).ok());
  for (size_t n = 0; n < kGnuGzipHello.size(); ++n)
    CHECK_FALSE(gzip_decompress(Bytes(kGnuGzipHello.begin(), kGnuGzipHello.begin() + n)).ok());
  Bytes bad_crc = kGnuGzipHello;
  bad_crc[18] ^= 1;
  CHECK(gzip_decompress(bad_crc).error().code == SPROV_ERR_DECOMPRESS);
  Bytes trailing = kGnuGzipHello;
  trailing.push_back(0);
  CHECK(gzip_decompress(trailing).error().code == SPROV_ERR_BAD_FORMAT);
  Bytes zeros(1 << 20, 0);
  auto bomb = gzip_compress(zeros.data(), zeros.size());
  REQUIRE(bomb.ok());
  CHECK(gzip_decompress(*bomb, 1000).error().code == SPROV_ERR_LIMIT);
}

TEST_CASE("trace data: address is the sha256 of the gzip bytes, tampering is found", "[trace]") {
  Trace t;
  std::string raw = "snapshot bytes";
  REQUIRE(set_trace_data(t, reinterpret_cast<const uint8_t*>(raw.data()), raw.size()).ok());
  CHECK(t.data_sha256 == evidence::hex_encode(evidence::sha256(t.data_gzip)));
  CHECK(t.data_size == raw.size());
  auto back = trace_data(t);
  REQUIRE(back.ok());
  CHECK(std::string(back->begin(), back->end()) == raw);
  t.data_gzip[12] ^= 1;
  CHECK(trace_data(t).error().code == SPROV_ERR_DIGEST_MISMATCH);
}

TEST_CASE("events: every strict prefix of a valid line is refused", "[trace]") {
  Trace t;
  t.id = new_uuid().value();
  t.platform = "linux";
  t.arch = "x86_64";
  t.captured_at = now_rfc3339();
  t.build_id = "abcd";
  REQUIRE(set_trace_data(t, reinterpret_cast<const uint8_t*>("x"), 1).ok());
  Frame f;
  f.ip = 0x401000;
  f.module_path = "/bin/a";
  f.inline_chain = {{"inl", "a.h", 3, 4}};
  t.threads = {{7, "main", {f, f}}};
  std::string line = trace_capture_event(t);
  auto ok = parse_event(line);
  REQUIRE(ok.ok());
  Trace got = std::get<CaptureEvent>(*ok).trace;
  t.data_gzip.clear();
  CHECK(got == t);
  for (size_t n = 0; n < line.size(); ++n) CHECK_FALSE(parse_event(line.substr(0, n)).ok());
}

namespace {
Trace kernel_event_trace() {
  Trace t;
  t.id = "0b9f2c1e-8d7b-4c1e-9a51-0123456789ab";
  t.platform = "linux";
  t.arch = "x86_64";
  t.captured_at = "2026-11-30T12:00:00.000000Z";
  REQUIRE(set_trace_data(t, reinterpret_cast<const uint8_t*>("x"), 1).ok());
  Frame f;
  f.ip = 0x401000;
  f.module_path = "/bin/a";
  t.threads = {{7, "main", {f}}, {8, "worker", {f}}};
  return t;
}
CapturedKernel sample_kernel() {
  CapturedKernel k;
  k.build_id = {0x85, 0xc7, 0xe4, 0x00, 0xff};
  for (size_t i = 0; i < 32; i++) k.btf_sha256[i] = static_cast<uint8_t>(i * 7);
  CapturedKernelSegment s;
  s.tid = 8;
  s.syscall = 230;
  s.user_sp = 0x7ffe91c4de98;
  s.user_pc = 0x7f80c9df9503;
  s.frames = {{"hrtimer_nanosleep", 0xb5, 0x130, "", 84325, false, "long int hrtimer_nanosleep(ktime_t rqtp)"},
              {"ext4_read.cold", 0x0, 0x20, "ext4", 0, true, ""}};
  k.segments = {s};
  s.tid = 7;
  s.syscall = -1;
  s.frames.clear();
  k.segments.push_back(s);
  return k;
}
}  // namespace

TEST_CASE("events: the kernel extension round-trips, is absent without segments, and is parsed strictly",
          "[trace][kernel]") {
  Trace t = kernel_event_trace();
  const std::string plain = trace_capture_event(t);
  CHECK(plain == trace_capture_event(t, CapturedKernel{}));  // no segments: the line of before, byte for byte
  CHECK(plain.find("\"kernel\"") == std::string::npos);
  const CapturedKernel k = sample_kernel();
  const std::string line = trace_capture_event(t, k);
  CHECK(line.find(",\"kernel\":{\"build_id\":\"85c7e400ff\",\"btf_sha256\":\"00070e15") != std::string::npos);
  CHECK(line.find("{\"symbol\":\"hrtimer_nanosleep\",\"offset\":\"0xb5\",\"size\":\"0x130\",\"module\":\"\","
                  "\"btf_func_id\":84325,\"approximate\":false,") != std::string::npos);
  auto ev = parse_event(line);
  REQUIRE(ev.ok());
  const CaptureEvent& c = std::get<CaptureEvent>(*ev);
  CHECK(c.kernel.build_id == k.build_id);
  CHECK(c.kernel.btf_sha256 == k.btf_sha256);
  REQUIRE(c.kernel.segments.size() == 2);
  for (size_t i = 0; i < 2; i++) {
    const CapturedKernelSegment &a = c.kernel.segments[i], &b = k.segments[i];
    CHECK((a.tid == b.tid && a.syscall == b.syscall && a.user_sp == b.user_sp && a.user_pc == b.user_pc));
    REQUIRE(a.frames.size() == b.frames.size());
    for (size_t n = 0; n < a.frames.size(); n++) {
      const CapturedKernelFrame &x = a.frames[n], &y = b.frames[n];
      CHECK((x.symbol == y.symbol && x.offset == y.offset && x.size == y.size && x.module == y.module &&
             x.btf_func_id == y.btf_func_id && x.approximate == y.approximate && x.prototype == y.prototype));
    }
  }
  // Each hostile change is refused, naming the field.
  auto refused = [&](const std::string& from, const std::string& to, const char* field) {
    std::string bad = line;
    const size_t at = bad.find(from);
    REQUIRE(at != std::string::npos);
    bad.replace(at, from.size(), to);
    auto e = parse_event(bad);
    INFO(to);
    REQUIRE_FALSE(e.ok());
    CHECK_THAT(e.error().message, Catch::Contains(field));
  };
  refused("\"syscall\":230", "\"syscall\":-2", ".kernel.segments[0].syscall");
  refused("\"syscall\":230", "\"syscall\":\"230\"", ".kernel.segments[0].syscall");
  refused("\"syscall\":230", "\"syscall\":18446744073709551615", ".kernel.segments[0].syscall");  // not -1
  refused("\"syscall\":230", "\"syscall\":2147483648", ".kernel.segments[0].syscall");
  refused("\"build_id\":\"85c7e400ff\"", "\"build_id\":\"85C7\"", ".kernel.build_id");
  refused("\"build_id\":\"85c7e400ff\"", "\"build_id\":\"" + std::string(130, 'a') + "\"", ".kernel.build_id");
  refused("\"btf_sha256\":\"00070e15", "\"btf_sha256\":\"0e15", ".kernel.btf_sha256");
  refused("\"approximate\":false", "\"approximate\":0", ".kernel.segments[0].frames[0].approximate");
  refused("\"offset\":\"0xb5\"", "\"offset\":\"181\"", ".kernel.segments[0].frames[0].offset");
  refused("\"module\":\"ext4\"", "\"module\":\"ext4\",\"address\":\"0x1\"", ".kernel.segments[0].frames[1].address");
  refused("\"symbol\":\"hrtimer_nanosleep\"", "\"symbol\":\"" + std::string(kMaxKernelName + 1, 'x') + "\"",
          ".kernel.segments[0].frames[0].symbol");
  refused(",\"kernel\":{", ",\"kernel\":{\"extra\":1,", ".kernel.extra");
  {
    std::string bad = line.substr(0, line.find(",\"kernel\":")) + ",\"kernel\":{\"build_id\":\"aa\",\"btf_sha256\":\"" +
                      std::string(64, '0') + "\",\"segments\":[]}}";
    auto e = parse_event(bad);
    REQUIRE_FALSE(e.ok());
    CHECK_THAT(e.error().message, Catch::Contains(".kernel.segments"));
  }
  {  // more frames in a segment than the captured data holds
    CapturedKernel big = k;
    big.segments[0].frames.resize(kMaxKernelSegmentFrames + 1, big.segments[0].frames[0]);
    auto e = parse_event(trace_capture_event(t, big));
    REQUIRE_FALSE(e.ok());
    CHECK_THAT(e.error().message, Catch::Contains("too many frames"));
  }
}

TEST_CASE("store URLs: forms, errors naming the value, defaults", "[trace]") {
  auto s = parse_store_url("sqlite:/tmp/x.db");
  REQUIRE(s.ok());
  CHECK(s->kind == StoreKind::kSqlite);
  CHECK(s->path == "/tmp/x.db");
  auto p = parse_store_url("postgresql://u@h:5/db?sslmode=disable");
  REQUIRE(p.ok());
  CHECK(p->kind == StoreKind::kPostgres);
  CHECK(p->conninfo == "postgresql://u@h:5/db?sslmode=disable");
  CHECK(parse_store_url("postgres://h/db").ok());
  for (const char* bad : {"mysql://h/db", "sqlite:", "sqlite://x", "/tmp/x.db", "sqlite:/a\nb"}) {
    auto e = parse_store_url(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == SPROV_ERR_INVALID_ARG);
    std::string first_line(bad, strcspn(bad, "\n"));
    CHECK(e.error().message.find(first_line) != std::string::npos);
  }
  setenv("STACKPROV_STORE", "postgresql://h/db", 1);
  CHECK(default_store_url().value() == "postgresql://h/db");
  setenv("XDG_DATA_HOME", "/data", 1);
  setenv("STACKPROV_STORE", "sqlite:/x/t.db", 1);
  CHECK(default_store_url().value() == "sqlite:/x/t.db");
  // A directory in STACKPROV_STORE names the bundle store: the trace store takes its own default.
  setenv("STACKPROV_STORE", "/srv/bundles", 1);
  CHECK(default_store_url().value() == "sqlite:/data/stackprov/traces.db");
  unsetenv("STACKPROV_STORE");
  CHECK(default_store_url().value() == "sqlite:/data/stackprov/traces.db");
  unsetenv("XDG_DATA_HOME");
  setenv("HOME", "/home/u", 1);
  CHECK(default_store_url().value() == "sqlite:/home/u/.local/share/stackprov/traces.db");
}

TEST_CASE("symbol bundle rows: sizes and characters bounded, errors name the field", "[trace]") {
  SymbolBundleRow b;
  b.blob = {1, 2, 3};
  b.sha256 = evidence::hex_encode(evidence::sha256(b.blob));
  b.os = "linux";
  CHECK(detail::validate_symbol_bundle(b).ok());
  b.dsse_envelope = std::string(detail::kMaxBundleTextBytes, '{');
  b.tlog_proof = std::string(detail::kMaxBundleTextBytes, 'p');
  b.checkpoint = std::string(detail::kMaxBundleTextBytes, 'c');
  CHECK(detail::validate_symbol_bundle(b).ok());
  for (std::string SymbolBundleRow::*field : {&SymbolBundleRow::signer, &SymbolBundleRow::rekor_tile_ref,
                                              &SymbolBundleRow::dsse_envelope, &SymbolBundleRow::tlog_proof,
                                              &SymbolBundleRow::checkpoint}) {
    SymbolBundleRow big = b;
    big.*field = std::string(detail::kMaxBundleTextBytes + 1, 'x');
    auto st = detail::validate_symbol_bundle(big);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == SPROV_ERR_LIMIT);
    CHECK(st.error().message.find(std::to_string(detail::kMaxBundleTextBytes + 1)) != std::string::npos);
    SymbolBundleRow nul = b;
    nul.*field = std::string("a\0b", 3);
    CHECK(detail::validate_symbol_bundle(nul).error().code == SPROV_ERR_INVALID_ARG);
  }
  auto st = detail::validate_symbol_bundle([&] { SymbolBundleRow r = b; r.checkpoint += "x"; return r; }());
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("checkpoint") != std::string::npos);
  SymbolBundleRow upper = b;
  upper.sha256[0] = 'A';
  CHECK(detail::validate_symbol_bundle(upper).error().message.find(upper.sha256) != std::string::npos);
  SymbolBundleRow long_os = b;
  long_os.os = std::string(65, 'o');
  CHECK(detail::validate_symbol_bundle(long_os).error().code == SPROV_ERR_INVALID_ARG);
}

TEST_CASE("threads of a trace: put_trace's bounds, shared with replace_frames", "[trace]") {
  std::vector<Thread> threads(2);
  threads[0].frames.resize(3);
  CHECK(detail::validate_threads(threads).ok());
  threads[1].frames.resize(1);
  threads[1].frames[0].bundle_sha256 = "XYZ";
  auto st = detail::validate_threads(threads);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("frames.bundle_sha256") != std::string::npos);
  CHECK(st.error().message.find("XYZ") != std::string::npos);
  threads[1].frames[0].bundle_sha256.clear();
  threads[1].frames[0].inline_chain.resize(kMaxInlineDepth + 1);
  CHECK(detail::validate_threads(threads).error().message.find("frames.inline_chain") != std::string::npos);
  std::vector<Thread> many(kMaxThreads + 1);
  st = detail::validate_threads(many);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find(std::to_string(kMaxThreads + 1)) != std::string::npos);
}
