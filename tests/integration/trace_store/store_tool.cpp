// SPDX-License-Identifier: Apache-2.0
// Drives lib/trace stores for store_test.py: round trips, writers for the nothing-lost test, checks, event parsing, schema 3 operations.
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "evidence/json.hpp"
#include "trace/events.hpp"
#include "trace/store.hpp"

using namespace stackprov;
using namespace stackprov::trace;
using evidence::Json;

namespace {

int fail(const std::string& msg) {
  fprintf(stderr, "store_tool: %s\n", msg.c_str());
  return 1;
}

std::unique_ptr<Store> open_or_die(const std::string& url_arg) {
  std::string url = url_arg;
  if (url == "-") {
    auto d = default_store_url();
    if (!d) {
      fprintf(stderr, "store_tool: %s\n", d.error().message.c_str());
      exit(1);
    }
    url = *d;
  }
  auto s = open_store(url);
  if (!s) {
    fprintf(stderr, "store_tool: %s\n", s.error().message.c_str());
    exit(1);
  }
  return std::move(s.value());
}

std::string rand_hex(std::mt19937_64& rng, size_t bytes) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < bytes * 2; ++i) s += d[rng() & 15];
  return s;
}

/// Strings that exercise quoting and encodings in both databases and in JSON.
std::string rand_text(std::mt19937_64& rng, const char* prefix) {
  static const char* odd[] = {"", "it's", "a\"b", "back\\slash", "tab\there", "ünïcødé_∂", "ns::f<int>(char const*)",
                              "line\nbreak", "%s %d", "' OR 1=1 --"};
  std::string s = prefix;
  s += odd[rng() % (sizeof odd / sizeof odd[0])];
  s += std::to_string(rng() % 100000);
  return s;
}

Trace make_trace(std::mt19937_64& rng, size_t frames, size_t threads, size_t data_len, const std::string& dsse) {
  Trace t;
  t.id = new_uuid().value();
  t.platform = (rng() & 1) ? "linux" : "macos";
  t.arch = (rng() & 1) ? "x86_64" : "arm64";
  t.captured_at = now_rfc3339();
  t.build_id = rand_hex(rng, 20);
  Bytes data(data_len);
  for (size_t i = 0; i < data_len; ++i) data[i] = static_cast<uint8_t>((rng() % 7 == 0) ? rng() : i / 64);
  if (!set_trace_data(t, data.data(), data.size())) abort();
  if (rng() & 1) t.symbol_bundle_sha256 = rand_hex(rng, 32);
  t.dsse_ref = dsse;
  t.threads.resize(threads);
  for (size_t i = 0; i < threads; ++i) {
    t.threads[i].tid = (i == 0) ? UINT64_MAX : 1000 + rng() % 100000;
    t.threads[i].name = rand_text(rng, "thr-");
  }
  for (size_t i = 0; i < frames; ++i) {
    Frame f;
    f.ip = (i % 17 == 3) ? UINT64_MAX - i : rng();
    f.module_path = (i % 11 == 5) ? "" : "/usr/lib/" + rand_text(rng, "mod") + ".so";
    f.module_build_id = (i % 11 == 5) ? "" : rand_hex(rng, 20);
    // Identities of other kinds than ELF (16 or 20 bytes): the kind is stored, "" is an ELF build-id.
    if (i % 13 == 7 && !f.module_build_id.empty()) f.module_id_kind = "macho-uuid";
    if (i % 13 == 8 && !f.module_build_id.empty()) f.module_id_kind = "pdb-guid-age";
    f.module_offset = rng() >> (rng() % 64);
    f.symbol = (i % 5 == 4) ? "" : rand_text(rng, "fn_");
    f.symbol_offset = rng() % 4096;
    f.file = rand_text(rng, "/src/");
    f.line = static_cast<uint32_t>(rng());
    f.column = static_cast<uint32_t>(rng() % 200);
    size_t depth = rng() % 4;
    for (size_t k = 0; k < depth; ++k)
      f.inline_chain.push_back({rand_text(rng, "inl_"), rand_text(rng, "/inc/"), static_cast<uint32_t>(rng() % 100000),
                                static_cast<uint32_t>(rng() % 80)});
    static const char* resolvers[] = {"bundle", "dwarf", "symtab", "debuginfod", ""};
    static const char* methods[] = {"cfi", "fp", "scan", "signal", "cfi_bundle"};
    f.resolver = resolvers[rng() % 5];
    f.source = rand_text(rng, "src:");
    if (rng() & 1) f.bundle_sha256 = rand_hex(rng, 32);
    f.unwind_method = methods[rng() % 5];
    t.threads[rng() % threads].frames.push_back(std::move(f));
  }
  return t;
}

std::string u64s(uint64_t v) { return std::to_string(v); }

Json trace_json(const Trace& t) {
  Json j{{"id", t.id}, {"platform", t.platform}, {"arch", t.arch}, {"captured_at", t.captured_at},
         {"build_id", t.build_id}, {"data_sha256", t.data_sha256}, {"data_size", t.data_size},
         {"symbol_bundle_sha256", t.symbol_bundle_sha256}, {"dsse_ref", t.dsse_ref}};
  Json threads = Json::array(), frames = Json::array();
  for (size_t ti = 0; ti < t.threads.size(); ++ti) {
    threads.push_back({{"tid", u64s(t.threads[ti].tid)}, {"name", t.threads[ti].name}});
    for (const Frame& f : t.threads[ti].frames) {
      Json inl = Json::array();
      for (const auto& in : f.inline_chain)
        inl.push_back({{"function", in.function}, {"file", in.file}, {"line", in.line}, {"column", in.column}});
      frames.push_back({{"thread_index", ti}, {"ip", u64s(f.ip)}, {"module_path", f.module_path},
                        {"module_build_id", f.module_build_id}, {"module_offset", u64s(f.module_offset)},
                        {"symbol", f.symbol}, {"symbol_offset", u64s(f.symbol_offset)}, {"file", f.file},
                        {"line", f.line}, {"column", f.column}, {"inline_chain", inl}, {"resolver", f.resolver},
                        {"source", f.source}, {"bundle_sha256", f.bundle_sha256}, {"unwind_method", f.unwind_method},
                        {"module_id_kind", f.module_id_kind}});
    }
  }
  j["threads"] = threads;
  j["frames"] = frames;
  return j;
}

/// Field-by-field comparison; returns the first difference by name.
std::string diff_trace(const Trace& a, const Trace& b) {
#define CMP(field) \
  if (!(a.field == b.field)) return #field;
  CMP(id) CMP(platform) CMP(arch) CMP(captured_at) CMP(build_id) CMP(data_gzip) CMP(data_sha256) CMP(data_size)
  CMP(symbol_bundle_sha256) CMP(dsse_ref)
  if (a.threads.size() != b.threads.size()) return "threads.size";
  for (size_t i = 0; i < a.threads.size(); ++i) {
    const Thread &x = a.threads[i], &y = b.threads[i];
    std::string at = "threads[" + std::to_string(i) + "].";
    if (x.tid != y.tid) return at + "tid";
    if (x.name != y.name) return at + "name";
    if (x.frames.size() != y.frames.size()) return at + "frames.size";
    for (size_t k = 0; k < x.frames.size(); ++k) {
      const Frame &f = x.frames[k], &g = y.frames[k];
      std::string af = at + "frames[" + std::to_string(k) + "].";
#define CMPF(field) \
  if (!(f.field == g.field)) return af + #field;
      CMPF(ip) CMPF(module_path) CMPF(module_build_id) CMPF(module_offset) CMPF(symbol) CMPF(symbol_offset) CMPF(file)
      CMPF(line) CMPF(column) CMPF(inline_chain) CMPF(resolver) CMPF(source) CMPF(bundle_sha256) CMPF(unwind_method) CMPF(module_id_kind)
    }
  }
  if (!(a == b)) return "operator== (a field not listed)";
  return "";
}

bool write_file(const std::string& path, const void* data, size_t n) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

// roundtrip URL OUTDIR N SEED
int cmd_roundtrip(const std::string& url, const std::string& out, int n, uint64_t seed) {
  auto store = open_or_die(url);
  std::mt19937_64 rng(seed);
  std::vector<Trace> traces;
  Json expected = Json::array(), replays = Json::array();
  std::string events;
  for (int i = 0; i < n; ++i) {
    size_t frames = (i == 0) ? 1 : (i == 1 ? 2000 : 1 + rng() % 400);
    Trace t = make_trace(rng, frames, 1 + rng() % 8, (i == 2) ? 0 : 1 + rng() % 50000, (i & 1) ? "dsse:" + rand_hex(rng, 8) : "");
    if (i == n - 1 && n > 4) {  // the same captured data as the trace before: stored once
      auto prev = trace_data(traces.back());
      if (!prev || !set_trace_data(t, prev->data(), prev->size())) return fail("set_trace_data");
    }
    if (auto st = store->put_trace(t); !st) return fail("put_trace: " + st.error().message);
    auto raw = trace_data(t);
    if (!raw) return fail("trace_data: " + raw.error().message);
    if (!write_file(out + "/" + t.id + ".raw", raw->data(), raw->size())) return fail("write raw");
    expected.push_back(trace_json(t));
    events += trace_capture_event(t) + "\n";
    traces.push_back(std::move(t));
  }
  // get_trace compared field by field with what was put
  for (const Trace& t : traces) {
    auto g = store->get_trace(t.id);
    if (!g) return fail("get_trace " + t.id + ": " + g.error().message);
    std::string d = diff_trace(t, *g);
    if (!d.empty()) return fail("trace " + t.id + " differs after the round trip in " + d);
  }
  // list_traces: every id once, ordered by captured_at then id, frame counts
  auto l = store->list_traces();
  if (!l) return fail("list_traces: " + l.error().message);
  std::vector<TraceSummary> want;
  for (const Trace& t : traces) want.push_back({t.id, t.platform, t.arch, t.captured_at, t.build_id, t.frame_count()});
  std::sort(want.begin(), want.end(), [](auto& a, auto& b) {
    return std::tie(a.captured_at, a.id) < std::tie(b.captured_at, b.id);
  });
  if (*l != want) return fail("list_traces differs from the traces put (" + std::to_string(l->size()) + " rows)");
  // absent ids: not found, named
  {
    std::string absent = new_uuid().value();
    auto g = store->get_trace(absent);
    if (g || g.error().code != SPROV_ERR_NOT_FOUND || g.error().message.find(absent) == std::string::npos)
      return fail("get_trace of an absent id is not a named NOT_FOUND");
    auto bad_id = store->get_trace("x'; DROP TABLE traces; --");
    if (bad_id || bad_id.error().code != SPROV_ERR_INVALID_ARG) return fail("get_trace of a non-UUID is not INVALID_ARG");
    auto gb = store->get_symbol_bundle(std::string(64, 'a'));
    if (gb || gb.error().code != SPROV_ERR_NOT_FOUND) return fail("get_symbol_bundle of an absent hash is not NOT_FOUND");
    auto rf = store->replace_frames(absent, traces[0].threads, "");
    if (rf || rf.error().code != SPROV_ERR_NOT_FOUND || rf.error().message.find(absent) == std::string::npos)
      return fail("replace_frames of an absent id is not a named NOT_FOUND: " + (rf ? std::string("ok") : rf.error().message));
    rf = store->replace_frames("x'; DROP TABLE frames; --", traces[0].threads, "");
    if (rf || rf.error().code != SPROV_ERR_INVALID_ARG) return fail("replace_frames of a non-UUID is not INVALID_ARG");
    auto lr = store->list_replays(absent);
    if (!lr || !lr->empty()) return fail("list_replays of an absent trace is not empty");
    lr = store->list_replays("x'; DROP TABLE replays; --");
    if (lr || lr.error().code != SPROV_ERR_INVALID_ARG) return fail("list_replays of a non-UUID is not INVALID_ARG");
  }
  // a second put of the same id is refused and changes nothing
  if (store->put_trace(traces[0])) return fail("put_trace of an existing id succeeded");
  // an invalid trace is refused naming the field
  {
    Trace bad = traces[0];
    bad.id = new_uuid().value();
    bad.captured_at = "yesterday";
    auto st = store->put_trace(bad);
    if (st || st.error().message.find("captured_at") == std::string::npos) return fail("invalid captured_at accepted or unnamed");
    if (store->get_trace(bad.id)) return fail("a refused trace is readable");
  }
  // replays
  for (size_t i = 0; i < 5; ++i) {
    Replay r;
    r.replay_id = new_uuid().value();
    r.trace_id = traces[i % traces.size()].id;
    r.seed = (i == 0) ? INT64_MIN : static_cast<int64_t>(rng() % 1000);
    r.started_at = now_rfc3339();
    r.finished_at = now_rfc3339();
    r.replay_success_ratio = (i == 1) ? 1.0 : static_cast<double>(rng() % 1000) / 1000.0;
    r.symbol_coverage_pct = (i == 2) ? 93.0 : static_cast<double>(rng() % 10000) / 100.0;
    r.verify_time_ms = static_cast<int64_t>(rng() % 100000);
    r.verifier_version = "stackprov 0.1.0";
    r.notes_json = (i & 1) ? "{\"k\":[1,2]}" : "";
    if (auto st = store->put_replay(r); !st) return fail("put_replay: " + st.error().message);
    events += replay_result_event(r) + "\n";
    replays.push_back({{"replay_id", r.replay_id}, {"trace_id", r.trace_id}, {"seed", r.seed},
                       {"replay_success_ratio", r.replay_success_ratio}, {"symbol_coverage_pct", r.symbol_coverage_pct},
                       {"verify_time_ms", r.verify_time_ms}, {"started_at", r.started_at},
                       {"finished_at", r.finished_at}, {"verifier_version", r.verifier_version}});
  }
  {
    Replay orphan;
    orphan.replay_id = new_uuid().value();
    orphan.trace_id = new_uuid().value();
    orphan.started_at = orphan.finished_at = now_rfc3339();
    if (store->put_replay(orphan)) return fail("a replay of a trace that does not exist was stored");
  }
  // symbol bundles
  SymbolBundleRow b;
  b.blob.resize(100000);
  for (auto& c : b.blob) c = static_cast<uint8_t>(rng());
  b.sha256 = evidence::hex_encode(evidence::sha256(b.blob));
  b.os = "linux";
  b.index_json = "{\"ranges\":[]}";
  b.signer = "test-key";
  b.rekor_tile_ref = "tile:0/1";
  if (auto st = store->put_symbol_bundle(b); !st) return fail("put_symbol_bundle: " + st.error().message);
  if (auto st = store->put_symbol_bundle(b); !st) return fail("second put_symbol_bundle: " + st.error().message);
  auto gb = store->get_symbol_bundle(b.sha256);
  if (!gb) return fail("get_symbol_bundle: " + gb.error().message);
  if (gb->blob != b.blob || gb->os != b.os || gb->signer != b.signer || gb->rekor_tile_ref != b.rekor_tile_ref)
    return fail("symbol bundle differs after the round trip");
  if (evidence::parse_json(gb->index_json, "index").value() != evidence::parse_json(b.index_json, "index").value())
    return fail("symbol bundle index_json differs after the round trip");
  SymbolBundleRow wrong = b;
  wrong.blob[0] ^= 1;
  auto ws = store->put_symbol_bundle(wrong);
  if (ws || ws.error().code != SPROV_ERR_DIGEST_MISMATCH) return fail("a bundle whose bytes do not hash to its name was stored");
  // events: parse back what we wrote
  size_t pos = 0, lines = 0;
  while (pos < events.size()) {
    size_t nl = events.find('\n', pos);
    std::string line = events.substr(pos, nl - pos);
    pos = nl + 1;
    auto ev = parse_event(line);
    if (!ev) return fail("parse_event of our own line: " + ev.error().message);
    if (auto* c = std::get_if<CaptureEvent>(&*ev)) {
      Trace want_t = traces[lines];
      want_t.data_gzip.clear();  // the event carries the data's address, not its bytes
      std::string d = diff_trace(want_t, c->trace);
      if (!d.empty()) return fail("trace.capture line " + std::to_string(lines) + " parses to a different trace in " + d);
    }
    ++lines;
  }
  std::ofstream(out + "/expected.json") << Json{{"traces", expected}, {"replays", replays},
                                                {"bundle_sha256", b.sha256}}.dump(1);
  std::ofstream(out + "/events.jsonl") << events;
  printf("roundtrip ok: %d traces, %zu event lines\n", n, lines);
  return 0;
}

// write URL SIDEFILE SEED COUNT(0 = forever)
int cmd_write(const std::string& url, const std::string& side, uint64_t seed, long count) {
  auto store = open_or_die(url);
  int fd = open(side.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return fail("open " + side + ": " + strerror(errno));
  std::mt19937_64 rng(seed);
  for (long i = 0; count == 0 || i < count; ++i) {
    size_t frames = 1 + rng() % 600;
    Trace t = make_trace(rng, frames, 1 + rng() % 4, 1 + rng() % 20000, "dsse:frames-" + std::to_string(frames));
    if (auto st = store->put_trace(t); !st) return fail("put_trace: " + st.error().message);
    // recorded only after put returned: one write(2) of the whole line
    std::string line = t.id + " " + std::to_string(frames) + " " + t.data_sha256 + "\n";
    if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return fail("side file write");
  }
  close(fd);
  return 0;
}

// check URL SIDEFILE...: every recorded trace is complete and its data intact
int cmd_check(const std::string& url, int argc, char** argv) {
  auto store = open_or_die(url);
  size_t checked = 0;
  for (int i = 0; i < argc; ++i) {
    std::ifstream in(argv[i]);
    std::string id, sha;
    size_t frames;
    while (in >> id >> frames >> sha) {
      auto t = store->get_trace(id);
      if (!t) return fail("recorded trace " + id + " unreadable: " + t.error().message);
      if (t->frame_count() != frames)
        return fail("trace " + id + " has " + std::to_string(t->frame_count()) + " frames, writer put " + std::to_string(frames));
      if (t->data_sha256 != sha) return fail("trace " + id + " data address differs");
      auto raw = trace_data(*t);
      if (!raw) return fail("trace " + id + " data: " + raw.error().message);
      ++checked;
    }
  }
  printf("checked %zu\n", checked);
  return 0;
}

int cmd_parse(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    auto ev = parse_event(line);
    if (!ev) return fail("line " + std::to_string(n + 1) + ": " + ev.error().message);
    ++n;
  }
  printf("parsed %zu\n", n);
  return 0;
}


// ---- schema 3 operations, driven value by value from store_test.py (JSON files in, JSON lines out)

/// Errors of these commands carry the code, so that the test can check it (include/stackprov/errors.h).
int fail_code(const std::string& what, const Error& e) {
  return fail(what + ": " + e.message + " (code " + std::to_string(e.code) + ")");
}

Json read_json_file(const std::string& path) {
  auto b = evidence::read_file(path);
  if (!b) throw std::runtime_error(path + ": " + b.error().message);
  auto j = evidence::parse_json(std::string_view(reinterpret_cast<const char*>(b->data()), b->size()), path.c_str());
  if (!j) throw std::runtime_error(j.error().message);
  return std::move(j.value());
}

std::string opt_str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? std::string() : it->get<std::string>();
}

/// The frame form of trace_json (u64 values as decimal strings).
Frame frame_from_json(const Json& j) {
  Frame f;
  f.ip = std::stoull(j.at("ip").get<std::string>());
  f.module_path = j.at("module_path").get<std::string>();
  f.module_build_id = j.at("module_build_id").get<std::string>();
  f.module_offset = std::stoull(j.at("module_offset").get<std::string>());
  f.symbol = j.at("symbol").get<std::string>();
  f.symbol_offset = std::stoull(j.at("symbol_offset").get<std::string>());
  f.file = j.at("file").get<std::string>();
  f.line = j.at("line").get<uint32_t>();
  f.column = j.at("column").get<uint32_t>();
  for (const Json& in : j.at("inline_chain"))
    f.inline_chain.push_back({in.at("function").get<std::string>(), in.at("file").get<std::string>(),
                              in.at("line").get<uint32_t>(), in.at("column").get<uint32_t>()});
  f.resolver = j.at("resolver").get<std::string>();
  f.source = j.at("source").get<std::string>();
  f.bundle_sha256 = j.at("bundle_sha256").get<std::string>();
  f.unwind_method = j.at("unwind_method").get<std::string>();
  f.module_id_kind = j.value("module_id_kind", std::string());
  return f;
}

/// [{"tid": "decimal", "name", "frames": [frame...]}, ...]
std::vector<Thread> threads_from_json(const Json& j) {
  std::vector<Thread> out;
  for (const Json& t : j) {
    Thread th;
    th.tid = std::stoull(t.at("tid").get<std::string>());
    th.name = t.at("name").get<std::string>();
    for (const Json& f : t.at("frames")) th.frames.push_back(frame_from_json(f));
    out.push_back(std::move(th));
  }
  return out;
}

Json bundle_json(const SymbolBundleRow& b) {
  return {{"sha256", b.sha256}, {"os", b.os}, {"blob_hex", evidence::hex_encode(b.blob)},
          {"index_json", b.index_json}, {"signer", b.signer}, {"rekor_tile_ref", b.rekor_tile_ref},
          {"dsse_envelope", b.dsse_envelope}, {"tlog_proof", b.tlog_proof}, {"checkpoint", b.checkpoint}};
}

Json replay_json(const Replay& r) {
  return {{"replay_id", r.replay_id}, {"trace_id", r.trace_id}, {"seed", r.seed}, {"started_at", r.started_at},
          {"finished_at", r.finished_at}, {"replay_success_ratio", r.replay_success_ratio},
          {"symbol_coverage_pct", r.symbol_coverage_pct}, {"verify_time_ms", r.verify_time_ms},
          {"verifier_version", r.verifier_version}, {"notes_json", r.notes_json}};
}

// put-bundle URL FILE: {"sha256","os","blob_hex","index_json", signature texts...}; absent keys are empty
int cmd_put_bundle(const std::string& url, const std::string& file) {
  Json j = read_json_file(file);
  SymbolBundleRow b;
  b.sha256 = opt_str(j, "sha256");
  b.os = opt_str(j, "os");
  auto blob = evidence::hex_decode(opt_str(j, "blob_hex"), "blob_hex");
  if (!blob) return fail(blob.error().message);
  b.blob = std::move(blob.value());
  b.index_json = opt_str(j, "index_json");
  b.signer = opt_str(j, "signer");
  b.rekor_tile_ref = opt_str(j, "rekor_tile_ref");
  b.dsse_envelope = opt_str(j, "dsse_envelope");
  b.tlog_proof = opt_str(j, "tlog_proof");
  b.checkpoint = opt_str(j, "checkpoint");
  auto store = open_or_die(url);
  if (auto st = store->put_symbol_bundle(b); !st) return fail_code("put_symbol_bundle", st.error());
  return 0;
}

// get-bundle URL SHA256: the row as one JSON line
int cmd_get_bundle(const std::string& url, const std::string& sha) {
  auto store = open_or_die(url);
  auto b = store->get_symbol_bundle(sha);
  if (!b) return fail_code("get_symbol_bundle", b.error());
  printf("%s\n", bundle_json(*b).dump().c_str());
  return 0;
}

// list-bundles URL: [{"sha256","index_json"}, ...] in the store's order
int cmd_list_bundles(const std::string& url) {
  auto store = open_or_die(url);
  auto l = store->list_symbol_bundles();
  if (!l) return fail_code("list_symbol_bundles", l.error());
  Json a = Json::array();
  for (const SymbolBundleRow& b : *l) {
    if (!b.blob.empty()) return fail("list_symbol_bundles returned the blob of " + b.sha256);
    a.push_back({{"sha256", b.sha256}, {"index_json", b.index_json}});
  }
  printf("%s\n", a.dump().c_str());
  return 0;
}

// replace URL ID FILE: {"symbol_bundle_sha256", "threads": [...]}
int cmd_replace(const std::string& url, const std::string& id, const std::string& file) {
  Json j = read_json_file(file);
  std::vector<Thread> threads = threads_from_json(j.at("threads"));
  auto store = open_or_die(url);
  if (auto st = store->replace_frames(id, threads, opt_str(j, "symbol_bundle_sha256")); !st)
    return fail_code("replace_frames", st.error());
  return 0;
}

// dump URL ID: get_trace as trace_json, one line
int cmd_dump(const std::string& url, const std::string& id) {
  auto store = open_or_die(url);
  auto t = store->get_trace(id);
  if (!t) return fail_code("get_trace", t.error());
  printf("%s\n", trace_json(*t).dump().c_str());
  return 0;
}

// put-replays URL FILE: [replay_json...], put in the file's order
int cmd_put_replays(const std::string& url, const std::string& file) {
  Json j = read_json_file(file);
  auto store = open_or_die(url);
  for (const Json& e : j) {
    Replay r;
    r.replay_id = e.at("replay_id").get<std::string>();
    r.trace_id = e.at("trace_id").get<std::string>();
    r.seed = e.at("seed").get<int64_t>();
    r.started_at = e.at("started_at").get<std::string>();
    r.finished_at = e.at("finished_at").get<std::string>();
    r.replay_success_ratio = e.at("replay_success_ratio").get<double>();
    r.symbol_coverage_pct = e.at("symbol_coverage_pct").get<double>();
    r.verify_time_ms = e.at("verify_time_ms").get<int64_t>();
    r.verifier_version = e.at("verifier_version").get<std::string>();
    r.notes_json = opt_str(e, "notes_json");
    if (auto st = store->put_replay(r); !st) return fail_code("put_replay " + r.replay_id, st.error());
  }
  return 0;
}

// list-replays URL ID: [replay_json...] in the store's order
int cmd_list_replays(const std::string& url, const std::string& id) {
  auto store = open_or_die(url);
  auto l = store->list_replays(id);
  if (!l) return fail_code("list_replays", l.error());
  Json a = Json::array();
  for (const Replay& r : *l) a.push_back(replay_json(r));
  printf("%s\n", a.dump().c_str());
  return 0;
}

/// Two resolutions of one trace for flip/watch, the same for the same seed: 3 threads with
/// 3..1202 frames in all, or 2 threads with 2..81; each with its own bundle address.
struct Resolutions {
  std::vector<Thread> a, b;
  std::string bundle_a, bundle_b;
};
Resolutions make_resolutions(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Resolutions r;
  Trace ta = make_trace(rng, 3 + rng() % 1200, 3, 1, "");
  Trace tb = make_trace(rng, 2 + rng() % 80, 2, 1, "");
  r.a = std::move(ta.threads);
  r.b = std::move(tb.threads);
  r.bundle_a = rand_hex(rng, 32);
  r.bundle_b = rand_hex(rng, 32);
  return r;
}

// flip URL ID SEED COUNT: replace_frames COUNT times, alternating the resolutions a, b (a first)
int cmd_flip(const std::string& url, const std::string& id, uint64_t seed, long count) {
  auto store = open_or_die(url);
  Resolutions r = make_resolutions(seed);
  for (long i = 0; i < count; ++i) {
    bool a = i % 2 == 0;
    if (auto st = store->replace_frames(id, a ? r.a : r.b, a ? r.bundle_a : r.bundle_b); !st)
      return fail_code("replace_frames #" + std::to_string(i), st.error());
  }
  return 0;
}

// watch URL ID SEED COUNT: every get_trace sees resolution a or resolution b whole, never a mix
int cmd_watch(const std::string& url, const std::string& id, uint64_t seed, long count) {
  auto store = open_or_die(url);
  Resolutions r = make_resolutions(seed);
  long saw_a = 0, saw_b = 0;
  for (long i = 0; i < count; ++i) {
    auto t = store->get_trace(id);
    if (!t) return fail_code("get_trace #" + std::to_string(i), t.error());
    if (t->threads == r.a && t->symbol_bundle_sha256 == r.bundle_a) {
      ++saw_a;
    } else if (t->threads == r.b && t->symbol_bundle_sha256 == r.bundle_b) {
      ++saw_b;
    } else {
      return fail("read #" + std::to_string(i) + " of trace " + id + " is neither resolution: " +
                  std::to_string(t->threads.size()) + " threads, " + std::to_string(t->frame_count()) +
                  " frames, bundle '" + t->symbol_bundle_sha256 + "'");
    }
  }
  printf("watch ok: %ld reads, %ld of a, %ld of b\n", count, saw_a, saw_b);
  return 0;
}

int dispatch(int argc, char** argv) {
  std::string cmd = argv[1];
  if (cmd == "put-bundle" && argc == 4) return cmd_put_bundle(argv[2], argv[3]);
  if (cmd == "get-bundle" && argc == 4) return cmd_get_bundle(argv[2], argv[3]);
  if (cmd == "list-bundles" && argc == 3) return cmd_list_bundles(argv[2]);
  if (cmd == "replace" && argc == 5) return cmd_replace(argv[2], argv[3], argv[4]);
  if (cmd == "dump" && argc == 4) return cmd_dump(argv[2], argv[3]);
  if (cmd == "put-replays" && argc == 4) return cmd_put_replays(argv[2], argv[3]);
  if (cmd == "list-replays" && argc == 4) return cmd_list_replays(argv[2], argv[3]);
  if (cmd == "flip" && argc == 6) return cmd_flip(argv[2], argv[3], strtoull(argv[4], nullptr, 10), atol(argv[5]));
  if (cmd == "watch" && argc == 6) return cmd_watch(argv[2], argv[3], strtoull(argv[4], nullptr, 10), atol(argv[5]));
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: store_tool roundtrip|write|check|open|get|parse|put-bundle|get-bundle|list-bundles|"
                            "replace|dump|put-replays|list-replays|flip|watch ...");
  try {
    if (int rc = dispatch(argc, argv); rc >= 0) return rc;
  } catch (const std::exception& e) {  // malformed input files from the test
    return fail(std::string(argv[1]) + ": bad input: " + e.what());
  }
  std::string cmd = argv[1];
  if (cmd == "roundtrip" && argc == 6) return cmd_roundtrip(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], nullptr, 10));
  if (cmd == "write" && argc == 6) return cmd_write(argv[2], argv[3], strtoull(argv[4], nullptr, 10), atol(argv[5]));
  if (cmd == "check") return cmd_check(argv[2], argc - 3, argv + 3);
  if (cmd == "parse") return cmd_parse(argv[2]);
  if (cmd == "open") {
    auto store = open_or_die(argv[2]);
    auto v = store->schema_version();
    if (!v) return fail(v.error().message);
    printf("%d\n", *v);
    return 0;
  }
  if (cmd == "get" && argc == 4) {
    auto store = open_or_die(argv[2]);
    auto t = store->get_trace(argv[3]);
    if (!t) return fail(t.error().message);
    printf("%s\n", trace_capture_event(*t).c_str());
    return 0;
  }
  return fail("unknown command or arguments: " + cmd);
}
