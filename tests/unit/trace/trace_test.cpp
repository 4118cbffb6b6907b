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
