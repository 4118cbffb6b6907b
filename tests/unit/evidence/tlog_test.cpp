// SPDX-License-Identifier: Apache-2.0
// Local log tests: tlog-tiles paths, append -> prove -> verify, consistency N -> N+k, fsck, interrupted appends.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "evidence/merkle.hpp"
#include "evidence/tlog.hpp"
#include "evidence/trace_verify.hpp"
#include "test_support.hpp"

using namespace stackprov::evidence;
namespace fs = std::filesystem;

namespace {

struct TlogTempDir {
  std::string path;
  TlogTempDir() {
    char tmpl[] = "/tmp/sprov-tlog-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TlogTempDir() { fs::remove_all(path); }
};

std::string entry_text(uint64_t i) { return "entry number " + std::to_string(i) + std::string(i % 7, '*'); }

}  // namespace

TEST_CASE("tile paths follow C2SP tlog-tiles", "[tlog]") {
  CHECK(tile_index_path(1234067) == "x001/x234/067");  // the spec's example
  CHECK(tile_index_path(0) == "000");
  CHECK(tile_index_path(999) == "999");
  CHECK(tile_index_path(1000) == "x001/000");
  CHECK(tile_path(0, 1234067, 256) == "tile/0/x001/x234/067");
  CHECK(tile_path(2, 5, 17) == "tile/2/005.p/17");
  CHECK(tile_path(-1, 3, 256) == "tile/entries/003");
}

TEST_CASE("append -> checkpoint -> prove -> verify, across tile levels", "[tlog]") {
  TlogTempDir d;
  auto key = SigningKey::generate().value();
  auto log = Tlog::init(d.path + "/log", "example.org/test-log", key);
  REQUIRE(log.ok());
  Tlog& t = log.value();
  CHECK(t.size() == 0);
  CHECK(t.root() == empty_root());
  MemoryTree ref;
  std::vector<std::string> notes;
  std::vector<uint64_t> sizes;
  uint64_t n = 0;
  // Batches of awkward sizes: cross 256 (level 1) and 65536 (level 2) boundaries.
  for (uint64_t batch : {1, 2, 253, 1, 300, 4096, 61000, 256, 3000, 7}) {
    std::vector<std::string> es;
    for (uint64_t i = 0; i < batch; ++i) es.push_back(entry_text(n + i));
    std::vector<std::string_view> views(es.begin(), es.end());
    auto first = t.append(views);
    REQUIRE(first.ok());
    CHECK(first.value() == n);
    for (const auto& e : es) ref.append(leaf_hash(e));
    n += batch;
    CHECK(t.size() == n);
    CHECK(t.root() == ref.root());
    auto note = t.sign_checkpoint(key);
    REQUIRE(note.ok());
    notes.push_back(note.value());
    sizes.push_back(n);
  }
  REQUIRE(n > 65536);
  CHECK(fs::exists(d.path + "/log/tile/2/000.p/1"));
  CHECK(fs::exists(d.path + "/log/tile/1/000"));
  CHECK(n == 68916);
  CHECK(fs::exists(d.path + "/log/tile/0/268"));
  CHECK(fs::exists(d.path + "/log/tile/0/269.p/52"));  // 68916 = 269 * 256 + 52
  CHECK(fs::exists(d.path + "/log/tile/entries/269.p/52"));
  CHECK(fs::exists(d.path + "/log/tile/1/001.p/13"));  // 68916 >> 8 = 269 = 256 + 13
  CHECK(t.fsck().ok());

  auto reopened = Tlog::open(d.path + "/log");
  REQUIRE(reopened.ok());
  CHECK(reopened.value().root() == ref.root());

  for (uint64_t idx : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256}, uint64_t{65535}, uint64_t{65536}, n - 1}) {
    auto p = t.prove(idx);
    REQUIRE(p.ok());
    std::string text = format_tlog_proof(p.value());
    CHECK(verify_tlog_proof_with_key(text, entry_text(idx), key.public_key(), "example.org/test-log").ok());
    CHECK(verify_tlog_proof_with_key(text, entry_text(idx + 1), key.public_key(), "example.org/test-log").error().code ==
          SPROV_ERR_PROOF);
    CHECK(verify_tlog_proof_with_key(text, entry_text(idx), key.public_key(), "example.org/other").error().code ==
          SPROV_ERR_CHECKPOINT);
    auto parsed = parse_tlog_proof(text);
    REQUIRE(parsed.ok());
    CHECK(parsed.value().index == idx);
  }
  auto found = t.find(entry_text(4242));
  REQUIRE(found.ok());
  CHECK(found.value().value() == 4242);
  CHECK(std::string(as_sv(t.entry(4242).value())) == entry_text(4242));

  // Consistency between every pair of signed checkpoints.
  auto v = t.verifier();
  for (size_t i = 0; i < sizes.size(); ++i)
    for (size_t j = i; j < sizes.size(); ++j) {
      auto c = t.consistency(sizes[i], sizes[j]);
      REQUIRE(c.ok());
      std::string proof = format_consistency_proof(sizes[i], sizes[j], c.value());
      INFO(sizes[i] << " -> " << sizes[j]);
      CHECK(verify_consistency_notes(notes[i], notes[j], proof, v).ok());
      if (j > i + 1) CHECK_FALSE(verify_consistency_notes(notes[i], notes[j - 1], proof, v).ok());
    }
}

TEST_CASE("fsck catches altered tiles and entries", "[tlog]") {
  TlogTempDir d;
  auto key = SigningKey::generate().value();
  auto t = Tlog::init(d.path, "example.org/fsck", key).value();
  std::vector<std::string> es;
  for (int i = 0; i < 600; ++i) es.push_back(entry_text(i));
  REQUIRE(t.append(std::vector<std::string_view>(es.begin(), es.end())).ok());
  REQUIRE(t.sign_checkpoint(key).ok());
  REQUIRE(t.fsck().ok());
  auto flip = [](const std::string& p, size_t off) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(off));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(off));
    f.put(static_cast<char>(c ^ 1));
  };
  SECTION("level-0 tile") {
    flip(d.path + "/tile/0/001", 40);
    CHECK(Tlog::open(d.path).value().fsck().error().code == SPROV_ERR_LOG);
  }
  SECTION("entry bundle") {
    flip(d.path + "/tile/entries/002.p/88", 10);
    CHECK(Tlog::open(d.path).value().fsck().error().code == SPROV_ERR_LOG);
  }
  SECTION("level-1 tile") {
    flip(d.path + "/tile/1/000.p/2", 3);
    CHECK_FALSE(Tlog::open(d.path).value().fsck().ok());
  }
  SECTION("checkpoint") {
    flip(d.path + "/checkpoint", 5);
    CHECK_FALSE(Tlog::open(d.path).value().fsck().ok());
  }
}

TEST_CASE("bad appends and bad keys are refused", "[tlog]") {
  TlogTempDir d;
  auto key = SigningKey::generate().value();
  auto t = Tlog::init(d.path, "example.org/x", key).value();
  CHECK(t.append({std::string_view()}).error().code == SPROV_ERR_LIMIT);
  std::string big(65536, 'a');
  CHECK(t.append({big}).error().code == SPROV_ERR_LIMIT);
  CHECK(t.size() == 0);
  auto other = SigningKey::generate().value();
  CHECK(t.sign_checkpoint(other).error().code == SPROV_ERR_KEY);
  CHECK(Tlog::init(d.path, "example.org/x", key).error().code == SPROV_ERR_LOG);  // already a log
  CHECK(Tlog::init(d.path + "/y", "has space", key).error().code == SPROV_ERR_INVALID_ARG);
  CHECK(t.prove(0).error().code == SPROV_ERR_LOG);
  CHECK(Tlog::open(d.path + "/missing").error().code == SPROV_ERR_LOG);
}

/// Every file of a directory tree and its bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    out[e.path().string()] = std::string(std::istreambuf_iterator<char>(f), {});
  }
  return out;
}

TEST_CASE("append with a checkpoint key: a wrong key changes nothing, the right one commits both", "[tlog]") {
  TlogTempDir d;
  auto key = SigningKey::generate().value();
  auto t = Tlog::init(d.path, "example.org/atomic", key).value();
  REQUIRE(t.append({"first"}, &key).ok());
  const auto before = files_of(d.path);
  auto other = SigningKey::generate().value();
  auto r = t.append({"second", "third"}, &other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == SPROV_ERR_KEY);
  CHECK(t.check_key(other, "other.key").error().message.find("'other.key'") != std::string::npos);
  CHECK(t.check_key(key).ok());
  CHECK(files_of(d.path) == before);  // no tile, entry bundle, state or checkpoint written
  CHECK(Tlog::open(d.path).value().size() == 1);
  // The right key: entries and a checkpoint of the new size, in one call.
  std::string note;
  auto first = t.append({"second", "third"}, &key, &note);
  REQUIRE(first.ok());
  CHECK(first.value() == 1);
  auto cp = t.checkpoint();
  REQUIRE(cp.ok());
  CHECK(cp.value().checkpoint.size == 3);
  CHECK(cp.value().note == note);
  CHECK(t.fsck().ok());
}

TEST_CASE("an append killed mid-write leaves a log that verifies and keeps working", "[tlog]") {
  TlogTempDir d;
  auto key = SigningKey::generate().value();
  {
    auto t = Tlog::init(d.path, "example.org/crash", key).value();
    std::vector<std::string> es;
    for (int i = 0; i < 300; ++i) es.push_back(entry_text(i));
    REQUIRE(t.append(std::vector<std::string_view>(es.begin(), es.end())).ok());
    REQUIRE(t.sign_checkpoint(key).ok());
  }
  for (int round = 0; round < 6; ++round) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto t = Tlog::open(d.path).value();
      for (int b = 0; b < 1000; ++b) {
        std::vector<std::string> es;
        for (int i = 0; i < 700; ++i) es.push_back("crash " + std::to_string(b) + "/" + std::to_string(i));
        (void)t.append(std::vector<std::string_view>(es.begin(), es.end()));
      }
      _exit(0);
    }
    usleep(static_cast<useconds_t>(20000 + 37000 * round));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    auto t = Tlog::open(d.path);
    REQUIRE(t.ok());
    INFO("round " << round << ", size " << t.value().size());
    CHECK(t.value().fsck().ok());
    REQUIRE(t.value().append({"after crash " + std::to_string(round)}).ok());
    REQUIRE(t.value().sign_checkpoint(key).ok());
    CHECK(t.value().fsck().ok());
    auto p = t.value().prove(t.value().size() - 1);
    REQUIRE(p.ok());
    CHECK(verify_tlog_proof_with_key(format_tlog_proof(p.value()), "after crash " + std::to_string(round),
                                     key.public_key(), "example.org/crash")
              .ok());
  }
}

TEST_CASE("tile fragments: at most two tiles per level rebuild the inclusion proof", "[tlog]") {
  TlogTempDir d;
  auto key = SigningKey::generate().value();
  auto t = Tlog::init(d.path + "/log", "example.org/frag", key).value();
  uint64_t n = 0;
  for (uint64_t target : {1u, 2u, 255u, 256u, 257u, 511u, 66000u}) {
    std::vector<std::string> es;
    for (; n < target; ++n) es.push_back(entry_text(n));
    REQUIRE(t.append(std::vector<std::string_view>(es.begin(), es.end())).ok());
    REQUIRE(t.sign_checkpoint(key).ok());
    for (uint64_t idx : {uint64_t{0}, n / 3, n / 2, n - 1}) {
      std::string frag = d.path + "/frag-" + std::to_string(n) + "-" + std::to_string(idx);
      REQUIRE(t.export_fragment(idx, frag).ok());
      INFO("size " << n << " index " << idx);
      CHECK(verify_tile_fragment(frag, entry_text(idx), key.public_key(), "example.org/frag").ok());
      if (n > 1) CHECK_FALSE(verify_tile_fragment(frag, entry_text((idx + 1) % n), key.public_key(), "example.org/frag").ok());
      size_t tiles = 0;
      for (const auto& e : fs::recursive_directory_iterator(frag + "/tile"))
        if (e.is_regular_file()) ++tiles;
      unsigned levels = 0;
      for (uint64_t c = n; c > 0; c >>= 8) ++levels;
      CHECK(tiles <= 2 * levels);
    }
  }
  // A missing or altered tile is a clean failure.
  std::string frag = d.path + "/frag-66000-33000";
  fs::remove(frag + "/tile/0/128");
  auto r = verify_tile_fragment(frag, entry_text(33000), key.public_key(), "example.org/frag");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("missing") != std::string::npos);
  std::string frag2 = d.path + "/frag-66000-65999";
  {
    std::fstream f(frag2 + "/tile/0/257.p/208", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('X');
  }
  CHECK(verify_tile_fragment(frag2, entry_text(65999), key.public_key(), "example.org/frag").error().code ==
        SPROV_ERR_PROOF);
}
