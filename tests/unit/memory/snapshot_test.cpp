// SPDX-License-Identifier: Apache-2.0
// Snapshot tests: sorted inserts, the binary format (round trip, truncation, mutation), hashing, reads.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "memory/snapshot.hpp"

using stackprov::Arch;
using stackprov::ModuleId;
using stackprov::Endian;
using namespace stackprov::memory;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

SnapshotModule module(uint64_t start, uint64_t end, std::string path, std::string id_hex) {
  SnapshotModule m;
  m.start = start;
  m.end = end;
  m.file_offset = 0x1000;
  m.load_bias = start - 0x1000;
  m.path = std::move(path);
  m.build_id = ModuleId::from_hex(id_hex);
  return m;
}

Snapshot sample() {
  Snapshot s;
  s.arch = Arch::kX86_64;
  s.endian = Endian::kLittle;
  s.pid = 4242;
  s.tid = -17;
  s.flags = Snapshot::kFlagPcIsReturnAddress;
  s.set_reg(7, 0x7ffd0000fff0);
  s.set_reg(16, 0x55550000abcd);
  s.set_reg(39, ~uint64_t{0});
  s.regs[3] = 0xdeadbeef;  // stored but not marked valid: must survive the round trip too
  const auto a = pattern(64, 1), b = pattern(32, 2), c = pattern(5, 3);
  // Inserted out of order: add_memory keeps them sorted. a and b are adjacent.
  REQUIRE(s.add_memory(0x7ffd00010000, c.data(), c.size()).ok());
  REQUIRE(s.add_memory(0x7ffd0000ffc0, a.data(), a.size()).ok());
  REQUIRE(s.add_memory(0x7ffd00010000 - 0x40 - 0x20, b.data(), b.size()).ok());
  REQUIRE(s.add_module(module(0x7f0000000000, 0x7f0000010000, "/usr/lib/lib c.so (deleted)",
                              "00112233445566778899aabbccddeeff00112233"))
              .ok());
  REQUIRE(s.add_module(module(0x555500000000, 0x555500004000, "/bin/app", "")).ok());
  REQUIRE(s.add_module(module(0x7fff00000000, 0x7fff00002000, "[vdso]", "abcd")).ok());
  return s;
}

void require_equal(const Snapshot& a, const Snapshot& b) {
  REQUIRE(a.arch == b.arch);
  REQUIRE(a.endian == b.endian);
  REQUIRE(a.pid == b.pid);
  REQUIRE(a.tid == b.tid);
  REQUIRE(a.flags == b.flags);
  REQUIRE(a.regs_valid == b.regs_valid);
  for (int i = 0; i < kSnapshotMaxRegs; i++) REQUIRE(a.regs[i] == b.regs[i]);
  REQUIRE(a.memory.size() == b.memory.size());
  for (size_t i = 0; i < a.memory.size(); i++) {
    REQUIRE(a.memory[i].addr == b.memory[i].addr);
    REQUIRE(a.memory[i].bytes == b.memory[i].bytes);
  }
  REQUIRE(a.modules.size() == b.modules.size());
  for (size_t i = 0; i < a.modules.size(); i++) {
    const SnapshotModule &x = a.modules[i], &y = b.modules[i];
    REQUIRE(x.start == y.start);
    REQUIRE(x.end == y.end);
    REQUIRE(x.file_offset == y.file_offset);
    REQUIRE(x.load_bias == y.load_bias);
    REQUIRE(x.path == y.path);
    REQUIRE(x.build_id == y.build_id);
  }
}

/// Offset of the n_regions field: magic, version, arch, endian, reserved, pid,
/// tid, flags, regs_valid, regs.
constexpr size_t kHeaderSize = 8 + 4 + 1 + 1 + 2 + 8 + 8 + 4 + 8 + 8 * kSnapshotMaxRegs;

void put_le(std::vector<uint8_t>& v, size_t at, uint64_t x, int n) {
  for (int i = 0; i < n; i++) v[at + i] = static_cast<uint8_t>(x >> (8 * i));
}

}  // namespace

TEST_CASE("add_memory keeps regions sorted and rejects overlaps naming both ranges") {
  Snapshot s = sample();
  REQUIRE(s.memory.size() == 3);
  for (size_t i = 1; i < s.memory.size(); i++) REQUIRE(s.memory[i - 1].addr < s.memory[i].addr);
  const uint8_t byte = 1;
  auto st = s.add_memory(0x7ffd00010004, &byte, 1);  // inside region c
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.error().code == SPROV_ERR_INVALID_ARG);
  REQUIRE(st.error().message.find("0x7ffd00010004") != std::string::npos);
  REQUIRE(st.error().message.find("0x7ffd00010000") != std::string::npos);
  const auto big = pattern(0x100, 0);
  st = s.add_memory(0x7ffd0000ff00, big.data(), big.size());  // straddles two regions
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.error().message.find("0x7ffd0000ff00") != std::string::npos);
  REQUIRE_FALSE(s.add_memory(0x1000, &byte, 0).ok());
  REQUIRE_FALSE(s.add_memory(~uint64_t{0}, big.data(), 2).ok());  // wraps
  REQUIRE(s.add_memory(0x7ffd00010005, &byte, 1).ok());           // adjacent is fine
  REQUIRE(s.memory.size() == 4);
}

TEST_CASE("add_memory with a buffer to reuse copies into its storage and checks the same") {
  Snapshot s = sample();
  const auto bytes = pattern(0x80, 7);
  std::vector<uint8_t> spare(0x2000, 0xee);
  const uint8_t* storage = spare.data();
  REQUIRE(s.add_memory(0x7ffd00020000, bytes.data(), bytes.size(), &spare).ok());
  REQUIRE(spare.empty());
  const MemoryRegion& r = s.memory.back();
  REQUIRE(r.addr == 0x7ffd00020000);
  REQUIRE(r.bytes == bytes);             // the bytes given, not the spare's old ones
  REQUIRE(r.bytes.data() == storage);    // in the spare's storage
  std::vector<uint8_t> other(0x100);
  auto st = s.add_memory(0x7ffd00020010, bytes.data(), 1, &other);  // overlaps: refused as without it
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.error().code == SPROV_ERR_INVALID_ARG);
  REQUIRE(other.size() == 0x100);        // left as it was
  REQUIRE(s.memory.size() == 4);
}

TEST_CASE("add_memory_view borrows the bytes: read, serialized and checked as a copy, dropped alone") {
  Snapshot owned = sample();
  Snapshot viewed = sample();
  const auto bytes = pattern(0x300, 11);
  REQUIRE(owned.add_memory(0x7ffd00020000, bytes.data(), bytes.size()).ok());
  REQUIRE(viewed.add_memory_view(0x7ffd00020000, bytes.data(), bytes.size()).ok());
  const MemoryRegion& r = viewed.memory.back();
  REQUIRE(r.addr == 0x7ffd00020000);
  REQUIRE(r.bytes.empty());                   // nothing copied
  REQUIRE(r.data() == bytes.data());          // the bytes given
  REQUIRE(r.size() == bytes.size());
  // Read through the snapshot reader (the unwinder's), across the region's end and a gap as a copy is.
  SnapshotReader ro(owned), rv(viewed);
  for (uint64_t addr : {uint64_t{0x7ffd00020000}, uint64_t{0x7ffd000202f8}, uint64_t{0x7ffd000202fc},
                        uint64_t{0x7ffd00010000}, uint64_t{0x7ffd0000ff00}}) {
    uint8_t a[8] = {}, b[8] = {};
    INFO("addr 0x" << std::hex << addr);
    REQUIRE(ro.read(addr, a, 8) == rv.read(addr, b, 8));
    REQUIRE(std::memcmp(a, b, 8) == 0);
  }
  REQUIRE(serialize(viewed) == serialize(owned));  // the bytes are the region's, wherever they are
  // The same checks as add_memory: overlaps, empty, wrapping.
  uint8_t byte = 1;
  auto st = viewed.add_memory_view(0x7ffd00020010, &byte, 1);
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.error().code == SPROV_ERR_INVALID_ARG);
  REQUIRE(st.error().message.find("overlaps region [0x7ffd00020000, 0x7ffd00020300)") != std::string::npos);
  REQUIRE_FALSE(viewed.add_memory(0x7ffd000202ff, &byte, 1).ok());  // a copy overlapping a view too
  REQUIRE_FALSE(viewed.add_memory_view(0x1000, &byte, 0).ok());
  REQUIRE_FALSE(viewed.add_memory_view(~uint64_t{0}, bytes.data(), 2).ok());
  REQUIRE(viewed.memory.size() == owned.memory.size());
  // own() copies the bytes; drop_views removes the borrowed regions only.
  Snapshot copy = viewed;
  copy.memory.back().own();
  REQUIRE(copy.memory.back().view == nullptr);
  REQUIRE(copy.memory.back().bytes == bytes);
  const size_t before = viewed.memory.size();
  viewed.drop_views();
  REQUIRE(viewed.memory.size() == before - 1);
  for (const MemoryRegion& m : viewed.memory) REQUIRE(m.view == nullptr);
  copy.drop_views();
  REQUIRE(copy.memory.size() == before);  // owned now: kept
}

TEST_CASE("add_module keeps modules sorted and rejects overlaps and bad ranges") {
  Snapshot s = sample();
  REQUIRE(s.modules[0].path == "/bin/app");
  REQUIRE(s.modules[2].path == "[vdso]");
  auto st = s.add_module(module(0x555500003000, 0x555500005000, "/x", ""));
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.error().message.find("0x555500003000") != std::string::npos);
  REQUIRE(st.error().message.find("0x555500000000") != std::string::npos);
  REQUIRE_FALSE(s.add_module(module(0x7effffff0000, 0x7f0000000001, "/y", "")).ok());
  REQUIRE_FALSE(s.add_module(module(0x9000, 0x9000, "/empty", "")).ok());
  REQUIRE_FALSE(s.add_module(module(0x9000, 0xa000, std::string(4097, 'p'), "")).ok());
  REQUIRE(s.add_module(module(0x555500004000, 0x555500005000, "/adjacent", "")).ok());
  REQUIRE(s.modules.size() == 4);
}

TEST_CASE("serialize/deserialize round trip preserves every field") {
  const Snapshot s = sample();
  const auto blob = serialize(s);
  auto back = deserialize(blob.data(), blob.size());
  REQUIRE(back.ok());
  require_equal(s, back.value());
  REQUIRE(serialize(back.value()) == blob);
  REQUIRE(back->module_list_hash() == s.module_list_hash());

  Snapshot empty;
  const auto eblob = serialize(empty);
  REQUIRE(eblob.size() == kHeaderSize + 4 + 4);
  auto eback = deserialize(eblob.data(), eblob.size());
  REQUIRE(eback.ok());
  require_equal(empty, eback.value());
}

TEST_CASE("every truncation of a valid blob fails cleanly") {
  const auto blob = serialize(sample());
  for (size_t n = 0; n < blob.size(); n++) {
    auto r = deserialize(blob.data(), n);
    INFO("length " << n);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
    REQUIRE(r.error().message.find("offset") != std::string::npos);
  }
  REQUIRE_FALSE(deserialize(nullptr, 0).ok());
}

TEST_CASE("mutated blobs either fail with SPROV_ERR_SNAPSHOT or re-serialize identically") {
  const auto blob = serialize(sample());
  size_t failed = 0, parsed = 0;
  for (size_t i = 0; i < blob.size(); i++) {
    for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x01}, uint8_t{0x80}}) {
      auto m = blob;
      m[i] ^= mask;
      auto r = deserialize(m.data(), m.size());
      INFO("byte " << i << " mask " << int{mask});
      if (r.ok()) {
        REQUIRE(serialize(r.value()) == m);
        parsed++;
      } else {
        REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
        failed++;
      }
    }
  }
  // Both outcomes occur: magic/version flips fail, register and byte flips parse.
  REQUIRE(failed > 0);
  REQUIRE(parsed > 0);
}

TEST_CASE("deserialize rejects hostile fields with the field named") {
  const auto blob = serialize(sample());
  auto expect_fail = [](const std::vector<uint8_t>& b, const char* field) {
    auto r = deserialize(b.data(), b.size());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
    INFO(r.error().message);
    REQUIRE(r.error().message.find(field) != std::string::npos);
  };
  SECTION("unknown arch and endianness") {
    auto b = blob;
    b[12] = 4;
    expect_fail(b, "arch");
    b = blob;
    b[13] = 2;
    expect_fail(b, "endian");
  }
  SECTION("version, reserved, flags, regs_valid") {
    auto b = blob;
    b[8] = 2;
    expect_fail(b, "version");
    b = blob;
    b[14] = 1;
    expect_fail(b, "reserved");
    b = blob;
    b[32] |= 0x80;
    expect_fail(b, "flags");
    b = blob;
    b[36 + 5] = 1;  // bit 40 of regs_valid
    expect_fail(b, "regs_valid");
  }
  SECTION("trailing bytes") {
    auto b = blob;
    b.push_back(0);
    expect_fail(b, "trailing");
  }
  SECTION("region counts and lengths beyond limits or input") {
    auto b = blob;
    put_le(b, kHeaderSize, 65537, 4);
    expect_fail(b, "n_regions");
    b = blob;
    put_le(b, kHeaderSize, 1000, 4);
    expect_fail(b, "n_regions");
    b = blob;
    put_le(b, kHeaderSize + 4 + 8, (uint64_t{1} << 30) + 1, 8);
    expect_fail(b, "region.len");
    b = blob;
    put_le(b, kHeaderSize + 4 + 8, ~uint64_t{0}, 8);
    expect_fail(b, "region.len");
    b = blob;
    put_le(b, kHeaderSize + 4 + 8, 0, 8);
    expect_fail(b, "region.len");
  }
  SECTION("unsorted or overlapping regions") {
    Snapshot s;
    const auto x = pattern(16, 9);
    REQUIRE(s.add_memory(0x1000, x.data(), x.size()).ok());
    REQUIRE(s.add_memory(0x2000, x.data(), x.size()).ok());
    auto b = serialize(s);
    put_le(b, kHeaderSize + 4 + 16 + 16, 0x1008, 8);  // second region now overlaps the first
    expect_fail(b, "region.addr");
    put_le(b, kHeaderSize + 4 + 16 + 16, 0x800, 8);  // unsorted
    expect_fail(b, "region.addr");
    put_le(b, kHeaderSize + 4 + 16 + 16, 0x1010, 8);  // adjacent: fine
    REQUIRE(deserialize(b.data(), b.size()).ok());
  }
  SECTION("modules: overlap, inverted range, oversized path and build-id") {
    Snapshot s;
    REQUIRE(s.add_module(module(0x1000, 0x2000, "/a", "")).ok());
    REQUIRE(s.add_module(module(0x3000, 0x4000, "/b", "")).ok());
    const auto b0 = serialize(s);
    const size_t m0 = kHeaderSize + 4 + 4;
    const size_t m1 = m0 + 32 + 4 + 2 + 1;
    auto b = b0;
    put_le(b, m1, 0x1800, 8);
    expect_fail(b, "module.start");
    b = b0;
    put_le(b, m0 + 8, 0x800, 8);
    expect_fail(b, "module.end");
    b = b0;
    put_le(b, m0 + 32, 4097, 4);
    expect_fail(b, "module.path_len");
    b = b0;
    b[m0 + 32 + 4 + 2] = 65;
    expect_fail(b, "module.id_len");
    b = b0;
    b[m0 + 32 + 4] = 0;
    expect_fail(b, "module.path");
  }
}

TEST_CASE("module_list_hash is deterministic and sensitive to every module field") {
  const Snapshot a = sample();
  const Snapshot b = sample();
  REQUIRE(a.module_list_hash() == b.module_list_hash());
  // Memory and registers are not part of the module list.
  Snapshot c = sample();
  c.set_reg(0, 1);
  const uint8_t byte = 0;
  REQUIRE(c.add_memory(0x10, &byte, 1).ok());
  REQUIRE(c.module_list_hash() == a.module_list_hash());
  const uint64_t h = a.module_list_hash();
  auto changed = [&](auto mutate) {
    Snapshot d = sample();
    mutate(d.modules[1]);
    return d.module_list_hash() != h;
  };
  REQUIRE(changed([](SnapshotModule& m) { m.start--; }));
  REQUIRE(changed([](SnapshotModule& m) { m.end++; }));
  REQUIRE(changed([](SnapshotModule& m) { m.file_offset++; }));
  REQUIRE(changed([](SnapshotModule& m) { m.load_bias ^= 1; }));
  REQUIRE(changed([](SnapshotModule& m) { m.path += "x"; }));
  REQUIRE(changed([](SnapshotModule& m) { m.build_id.bytes[19] ^= 1; }));
  REQUIRE(changed([](SnapshotModule& m) { m.build_id.len = 19; }));
  // Moving the byte 'b' (0x62) from the path to the build-id changes the hash:
  // fields are length-prefixed, not concatenated.
  Snapshot e, f;
  REQUIRE(e.add_module(module(0x1000, 0x2000, "/ab", "")).ok());
  REQUIRE(f.add_module(module(0x1000, 0x2000, "/a", "62")).ok());
  REQUIRE(e.module_list_hash() != f.module_list_hash());
  Snapshot empty;
  REQUIRE(empty.module_list_hash() != a.module_list_hash());
  REQUIRE(empty.module_list_hash() == Snapshot{}.module_list_hash());
}

TEST_CASE("SnapshotReader reads inside, across adjacent regions, and fails elsewhere") {
  const Snapshot s = sample();
  SnapshotReader r(s);
  const MemoryRegion& b = s.memory[0];  // 32 bytes, adjacent to a
  const MemoryRegion& a = s.memory[1];  // 64 bytes
  const MemoryRegion& c = s.memory[2];  // 5 bytes at a's end: adjacent too
  REQUIRE(b.addr + b.bytes.size() == a.addr);
  REQUIRE(a.addr + a.bytes.size() == c.addr);
  uint64_t v = 0;
  REQUIRE(r.read(a.addr + 8, &v, 8));
  uint64_t want;
  std::memcpy(&want, a.bytes.data() + 8, 8);
  REQUIRE(v == want);
  // Alternate between regions so that the hint misses and hits.
  for (int i = 0; i < 3; i++) {
    uint8_t x = 0;
    REQUIRE(r.read(c.addr + 4, &x, 1));
    REQUIRE(x == c.bytes[4]);
    REQUIRE(r.read(b.addr, &x, 1));
    REQUIRE(x == b.bytes[0]);
  }
  // Spanning all three regions.
  std::vector<uint8_t> all(b.bytes.size() + a.bytes.size() + c.bytes.size());
  REQUIRE(r.read(b.addr, all.data(), all.size()));
  std::vector<uint8_t> expect = b.bytes;
  expect.insert(expect.end(), a.bytes.begin(), a.bytes.end());
  expect.insert(expect.end(), c.bytes.begin(), c.bytes.end());
  REQUIRE(all == expect);
  // One byte too many, before the first byte, in a gap, at the top of the address space.
  std::vector<uint8_t> over(all.size() + 1);
  REQUIRE_FALSE(r.read(b.addr, over.data(), over.size()));
  REQUIRE_FALSE(r.read(b.addr - 1, &v, 2));
  REQUIRE_FALSE(r.read(c.addr + 5, &v, 1));
  REQUIRE_FALSE(r.read(~uint64_t{0} - 3, &v, 8));
  REQUIRE_FALSE(r.read(0, &v, 8));
  // Zero-length reads succeed anywhere.
  REQUIRE(r.read(0, &v, 0));
  REQUIRE(r.read(c.addr + 100, nullptr, 0));
  Snapshot none;
  SnapshotReader rn(none);
  REQUIRE_FALSE(rn.read(0x1000, &v, 1));
  REQUIRE(rn.read(0x1000, &v, 0));
}

TEST_CASE("SnapshotReader handles regions at the top of the address space") {
  Snapshot s;
  const auto x = pattern(16, 5);
  REQUIRE(s.add_memory(~uint64_t{0} - 16, x.data(), x.size()).ok());
  SnapshotReader r(s);
  uint8_t out[16];
  REQUIRE(r.read(~uint64_t{0} - 16, out, 16));
  REQUIRE(std::memcmp(out, x.data(), 16) == 0);
  REQUIRE_FALSE(r.read(~uint64_t{0} - 8, out, 16));
}

TEST_CASE("Snapshot::set_modules agrees with add_module of each, in any order", "[snapshot]") {
  // set_modules (trace replay's reinsert, O(n log n)) against n add_module calls (the oracle):
  // the same sorted list, or an error exactly when one of the inserts fails.
  std::mt19937_64 rng(20261126);
  for (int round = 0; round < 500; ++round) {
    std::vector<SnapshotModule> mods;
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      SnapshotModule m;
      m.start = (rng() % 200) * 0x1000;
      m.end = m.start + (1 + rng() % (round % 3 == 0 ? 4 : 1)) * 0x1000 - (rng() % 50 == 0 ? 0x1000 : 0);
      m.path = "/m" + std::to_string(i);
      mods.push_back(m);
    }
    Snapshot a, b;
    bool ok = true;
    for (const auto& m : mods) ok = ok && a.add_module(m).ok();
    stackprov::Status st = b.set_modules(mods);
    REQUIRE(st.ok() == ok);
    if (ok) {
      REQUIRE(a.modules.size() == b.modules.size());
      for (size_t i = 0; i < a.modules.size(); ++i) {
        CHECK(a.modules[i].start == b.modules[i].start);
        CHECK(a.modules[i].path == b.modules[i].path);
      }
    } else {
      CHECK(b.modules.empty());
    }
  }
}

// ---- version 2 (issue 32): tagged sections, written when a module's identity is not an ELF
// build-id; version 1 stays what serialize() writes for ELF-only snapshots (older readers).

namespace {

Snapshot sample_v2() {
  Snapshot s = sample();
  SnapshotModule pe = module(0x10000000, 0x10010000, "C:\\Windows\\app.exe", "");
  const uint8_t guid_age[20] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
                                0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x02, 0x00, 0x00, 0x00};
  pe.build_id = ModuleId::from_bytes(guid_age, sizeof guid_age, stackprov::IdKind::kPdbGuidAge);
  REQUIRE(s.add_module(pe).ok());
  SnapshotModule macho = module(0x20000000, 0x20010000, "/usr/lib/dyld", "");
  macho.build_id = ModuleId::from_bytes(guid_age, 16, stackprov::IdKind::kMachoUuid);
  REQUIRE(s.add_module(macho).ok());
  return s;
}

/// Offset of the v2 section at index `n` (0 header, 1 memory, 2 modules) in `b`.
size_t section_at(const std::vector<uint8_t>& b, int n) {
  size_t at = 12;
  for (int i = 0; i < n; i++) {
    uint64_t len = 0;
    for (int k = 0; k < 8; k++) len |= uint64_t{b[at + 8 + k]} << (8 * k);
    at += 16 + len;
  }
  return at;
}

}  // namespace

TEST_CASE("serialize writes v1 for ELF ids and v2 when an id is of another kind; both round trip", "[snapshot]") {
  const Snapshot v1 = sample();
  REQUIRE(serialized_version(v1) == 1);
  REQUIRE(serialize(v1)[8] == 1);

  const Snapshot s = sample_v2();
  REQUIRE(serialized_version(s) == 2);
  const auto blob = serialize(s);
  REQUIRE(blob[8] == 2);
  auto back = deserialize(blob.data(), blob.size());
  REQUIRE(back.ok());
  require_equal(s, back.value());
  REQUIRE(serialize(back.value()) == blob);
  REQUIRE(back->module_list_hash() == s.module_list_hash());
  // The kinds survive: the same 16 bytes as a Mach-O UUID and as the PDB id's prefix differ.
  bool pdb = false, macho = false;
  for (const SnapshotModule& m : back->modules) {
    pdb |= m.build_id.kind == stackprov::IdKind::kPdbGuidAge && m.build_id.len == 20;
    macho |= m.build_id.kind == stackprov::IdKind::kMachoUuid && m.build_id.len == 16;
  }
  REQUIRE((pdb && macho));
  // A kind is part of the identity: the module-list hash sees it.
  Snapshot other = s;
  for (SnapshotModule& m : other.modules)
    if (m.build_id.kind == stackprov::IdKind::kMachoUuid) m.build_id.kind = stackprov::IdKind::kElfBuildId;
  REQUIRE(other.module_list_hash() != s.module_list_hash());
}

TEST_CASE("v2: every truncation fails, mutations fail or re-serialize identically", "[snapshot]") {
  const auto blob = serialize(sample_v2());
  for (size_t n = 0; n < blob.size(); n++) {
    auto r = deserialize(blob.data(), n);
    INFO("length " << n);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
  }
  size_t failed = 0, parsed = 0;
  for (size_t i = 0; i < blob.size(); i++) {
    for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x01}, uint8_t{0x80}}) {
      auto m = blob;
      m[i] ^= mask;
      auto r = deserialize(m.data(), m.size());
      INFO("byte " << i << " mask " << int{mask});
      if (r.ok()) {
        // The bytes re-serialize as they were, except a section's "required" flag cleared: the
        // writer sets it again.
        if (serialize(r.value()) != m) {
          const bool required_flag = (i == section_at(blob, 0) + 4 || i == section_at(blob, 1) + 4 ||
                                      i == section_at(blob, 2) + 4 || i == section_at(blob, 3) + 4) &&
                                     (mask & 1);
          REQUIRE(required_flag);
          REQUIRE(serialize(r.value()) == blob);
        }
        parsed++;
      } else {
        REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
        failed++;
      }
    }
  }
  REQUIRE(failed > 0);
  REQUIRE(parsed > 0);
}

TEST_CASE("v2 sections: unknown optional ones skipped, unknown required ones and bad structure refused", "[snapshot]") {
  const auto blob = serialize(sample_v2());
  auto expect_fail = [](const std::vector<uint8_t>& b, const char* what) {
    auto r = deserialize(b.data(), b.size());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
    INFO(r.error().message);
    REQUIRE(r.error().message.find(what) != std::string::npos);
  };
  auto section = [](uint32_t tag, uint32_t flags, std::vector<uint8_t> payload) {
    std::vector<uint8_t> s(16);
    put_le(s, 0, tag, 4);
    put_le(s, 4, flags, 4);
    put_le(s, 8, payload.size(), 8);
    s.insert(s.end(), payload.begin(), payload.end());
    return s;
  };
  const size_t end_at = blob.size() - 16;  // the end section
  SECTION("an unknown optional section (a newer writer's) is skipped") {
    auto b = blob;
    const auto extra = section(77, 0, {1, 2, 3, 4, 5});
    b.insert(b.begin() + end_at, extra.begin(), extra.end());
    auto r = deserialize(b.data(), b.size());
    REQUIRE(r.ok());
    require_equal(sample_v2(), r.value());
  }
  SECTION("an unknown required section is refused, naming it") {
    auto b = blob;
    const auto extra = section(77, 1, {1, 2, 3});
    b.insert(b.begin() + end_at, extra.begin(), extra.end());
    expect_fail(b, "unknown section 77 is marked required");
  }
  SECTION("unknown section flags") {
    auto b = blob;
    b[section_at(b, 1) + 4] |= 2;
    expect_fail(b, "section.flags");
  }
  SECTION("a section twice") {
    auto b = blob;
    const size_t mem = section_at(b, 1), mods = section_at(b, 2);
    b.insert(b.begin() + end_at, blob.begin() + mem, blob.begin() + mods);
    expect_fail(b, "section 2 twice");
    b = blob;
    b.erase(b.begin() + mem, b.begin() + mods);
    expect_fail(b, "no section 2 (memory)");
    b = blob;
    b.push_back(0);
    expect_fail(b, "trailing bytes after the end section");
  }
  SECTION("the header not first") {
    auto b = blob;
    put_le(b, 12, 2, 4);
    expect_fail(b, "not the header");
  }
  SECTION("a length past the input, and a payload not read to its end") {
    auto b = blob;
    put_le(b, section_at(b, 2) + 8, b.size(), 8);
    expect_fail(b, "section.length");
    b = blob;
    const size_t mods = section_at(b, 2);
    uint64_t len = 0;
    for (int k = 0; k < 8; k++) len |= uint64_t{b[mods + 8 + k]} << (8 * k);
    put_le(b, mods + 8, len + 1, 8);
    b.insert(b.begin() + end_at, 0);
    expect_fail(b, "left unread");
  }
  SECTION("module identity: unknown kind, bytes without a kind") {
    Snapshot s;
    SnapshotModule m = module(0x1000, 0x2000, "/a", "");
    m.build_id = ModuleId::from_bytes("0123456789abcdef", 16, stackprov::IdKind::kMachoUuid);
    REQUIRE(s.add_module(m).ok());
    auto b = serialize(s);
    const size_t kind_at = section_at(b, 2) + 16 + 4 + 32 + 4 + 2;  // after "/a"
    REQUIRE(b[kind_at] == 3);
    b[kind_at] = 5;  // 4 is pe-code-id (doc/windows.md "Code identity"): the first unknown kind
    expect_fail(b, "module.id_kind");
    b[kind_at] = 0;
    expect_fail(b, "module.id_len");
  }
  SECTION("v1 blobs still read, and versions other than 1 and 2 are refused") {
    const auto v1 = serialize(sample());
    REQUIRE(deserialize(v1.data(), v1.size()).ok());
    auto b = blob;
    b[8] = 3;
    expect_fail(b, "unsupported version 3");
  }
}

TEST_CASE("v2 async section (4): written only when there is one, round trips, hostile fields refused", "[snapshot]") {
  Snapshot s = sample();
  REQUIRE(serialized_version(s) == 1);
  s.async.root = 0x7ffd00001000;
  s.async.root_source = SnapshotAsync::kRootFolly;
  s.async.stacks.push_back({0x10000, 0x20000, 0x30000});
  s.async.stacks.push_back({0x20000, 0x28000, 0x31000});
  REQUIRE(serialized_version(s) == 2);
  const auto blob = serialize(s);
  auto back = deserialize(blob.data(), blob.size());
  REQUIRE(back.ok());
  require_equal(s, back.value());
  REQUIRE(back->async.root == s.async.root);
  REQUIRE(back->async.root_source == SnapshotAsync::kRootFolly);
  REQUIRE(back->async.stacks.size() == 2);
  REQUIRE(back->async.stacks[1].lo == 0x20000);
  REQUIRE(back->async.stacks[1].hi == 0x28000);
  REQUIRE(back->async.stacks[1].resumer == 0x31000);
  REQUIRE(serialize(back.value()) == blob);
  REQUIRE(back->async.stack_of(0x27fff) == &back->async.stacks[1]);
  REQUIRE(back->async.stack_of(0x28000) == nullptr);

  // The async section is the one before the end section: root at +16, root_source at +24,
  // n_stacks at +28, the stacks from +32.
  const size_t at = blob.size() - 16 - (16 + 8 + 4 + 4 + 2 * 24);
  REQUIRE(blob[at] == 4);
  auto expect_fail = [](std::vector<uint8_t> b, const char* what) {
    auto r = deserialize(b.data(), b.size());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
    INFO(r.error().message);
    REQUIRE(r.error().message.find(what) != std::string::npos);
  };
  auto b = blob;
  put_le(b, at + 24, 3, 4);
  expect_fail(b, "async.root_source");
  b = blob;
  put_le(b, at + 16, 0, 8);  // a source without a root
  expect_fail(b, "async.root_source");
  b = blob;
  put_le(b, at + 28, 257, 4);
  expect_fail(b, "async.n_stacks");
  b = blob;
  put_le(b, at + 28, 3, 4);  // more stacks than bytes
  expect_fail(b, "async.n_stacks");
  b = blob;
  put_le(b, at + 32 + 24, 0x18000, 8);  // the second stack overlaps the first
  expect_fail(b, "async.stack.lo");
  b = blob;
  put_le(b, at + 32 + 8, 0x10000, 8);  // an empty stack
  expect_fail(b, "async.stack.lo");
  // Every truncation fails; an older reader skips the section (it is not marked required).
  for (size_t n = at; n < blob.size(); n++) REQUIRE_FALSE(deserialize(blob.data(), n).ok());
  REQUIRE(blob[at + 4] == 0);
}

namespace {

/// A thread of a CPython process as a capture reads it: two frames run by one activation, a name
/// with non-ASCII bytes, and a second evaluation-loop range (the .cold part).
SnapshotRuntime sample_runtime() {
  SnapshotRuntime rt;
  rt.kind = SnapshotRuntime::kCPython;
  rt.description = "CPython 3.11.2 (layout table)";
  rt.eval = {{0x500000, 0x503000}, {0x420000, 0x420400}};
  rt.has_thread = true;
  rt.ident = 0x7f0012345640;
  rt.tstate = 0xa3b2c8;
  rt.name = "worker-\xc3\xa9";
  rt.frames.push_back({"gen", "gen", "/srv/app.py", 13, false, 1, 0x7f0000001000, 0x7f0000002000});
  rt.frames.push_back({"<lambda>", "Outer.method.<locals>.<lambda>", "/srv/app.py", 0, true, 0, 0x7f0000001100, 0x7f0000003000});
  return rt;
}

void put_rt_str(std::vector<uint8_t>& v, const std::string& s) {
  for (int i = 0; i < 4; i++) v.push_back(static_cast<uint8_t>(s.size() >> (8 * i)));
  v.insert(v.end(), s.begin(), s.end());
}

void put_rt_u(std::vector<uint8_t>& v, uint64_t x, int n) {
  for (int i = 0; i < n; i++) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

}  // namespace

TEST_CASE("v2 runtime section (5): the documented layout, round trip, older readers, hostile fields", "[snapshot]") {
  Snapshot s = sample();
  s.runtime = sample_runtime();
  REQUIRE(serialized_version(s) == 2);
  const auto blob = serialize(s);
  // The section before the end section, optional (flags 0), its payload byte for byte as
  // snapshot.hpp describes it, written here from that description.
  std::vector<uint8_t> want;
  put_rt_u(want, 1, 1);
  put_rt_str(want, "CPython 3.11.2 (layout table)");
  put_rt_u(want, 2, 4);
  for (uint64_t x : {0x500000, 0x503000, 0x420000, 0x420400}) put_rt_u(want, x, 8);
  put_rt_u(want, 1, 1);
  put_rt_u(want, 0x7f0012345640, 8);
  put_rt_u(want, 0xa3b2c8, 8);
  put_rt_str(want, "worker-\xc3\xa9");
  put_rt_str(want, "");
  put_rt_u(want, 2, 4);
  put_rt_str(want, "gen");
  put_rt_str(want, "gen");
  put_rt_str(want, "/srv/app.py");
  put_rt_u(want, 13, 4);
  put_rt_u(want, 0, 1);
  put_rt_u(want, 1, 1);
  put_rt_u(want, 0x7f0000001000, 8);
  put_rt_u(want, 0x7f0000002000, 8);
  put_rt_str(want, "<lambda>");
  put_rt_str(want, "Outer.method.<locals>.<lambda>");
  put_rt_str(want, "/srv/app.py");
  put_rt_u(want, 0, 4);
  put_rt_u(want, 1, 1);
  put_rt_u(want, 0, 1);
  put_rt_u(want, 0x7f0000001100, 8);
  put_rt_u(want, 0x7f0000003000, 8);
  const size_t at = section_at(blob, 3);
  REQUIRE(at + 16 + want.size() + 16 == blob.size());
  std::vector<uint8_t> head;
  put_rt_u(head, 5, 4);
  put_rt_u(head, 0, 4);
  put_rt_u(head, want.size(), 8);
  REQUIRE(std::vector<uint8_t>(blob.begin() + at, blob.begin() + at + 16) == head);
  REQUIRE(std::vector<uint8_t>(blob.begin() + at + 16, blob.end() - 16) == want);

  auto back = deserialize(blob.data(), blob.size());
  REQUIRE(back.ok());
  require_equal(s, back.value());
  const SnapshotRuntime& rt = back->runtime;
  REQUIRE(rt.kind == SnapshotRuntime::kCPython);
  REQUIRE(rt.description == s.runtime.description);
  REQUIRE(rt.eval.size() == 2);
  REQUIRE(rt.eval[1].start == 0x420000);
  REQUIRE(rt.eval[1].end == 0x420400);
  REQUIRE(rt.has_thread);
  REQUIRE(rt.ident == 0x7f0012345640);
  REQUIRE(rt.tstate == 0xa3b2c8);
  REQUIRE(rt.name == "worker-\xc3\xa9");
  REQUIRE(rt.frames.size() == 2);
  for (size_t i = 0; i < 2; i++) {
    const SnapshotRuntime::Frame &x = rt.frames[i], &y = s.runtime.frames[i];
    REQUIRE(x.function == y.function);
    REQUIRE(x.qualname == y.qualname);
    REQUIRE(x.file == y.file);
    REQUIRE(x.line == y.line);
    REQUIRE(x.is_entry == y.is_entry);
    REQUIRE(x.owner == y.owner);
    REQUIRE(x.frame_addr == y.frame_addr);
    REQUIRE(x.code_addr == y.code_addr);
  }
  REQUIRE(serialize(back.value()) == blob);

  SECTION("a process's thread without a thread state: the interpreter only") {
    Snapshot t = sample();
    t.runtime.kind = SnapshotRuntime::kCPython;
    t.runtime.description = "CPython 3.11.2";
    t.runtime.eval = {{0x500000, 0x503000}};
    const auto b = serialize(t);
    auto r = deserialize(b.data(), b.size());
    REQUIRE(r.ok());
    REQUIRE(r->runtime.kind == SnapshotRuntime::kCPython);
    REQUIRE_FALSE(r->runtime.has_thread);
    REQUIRE(r->runtime.frames.empty());
    REQUIRE(serialize(r.value()) == b);
  }
  SECTION("without a runtime: no section, version 1 as before") {
    REQUIRE(serialized_version(sample()) == 1);
  }
  SECTION("an older reader (one that does not know tag 5) skips it: renumbered to an unknown tag") {
    auto b = blob;
    put_le(b, at, 77, 4);
    auto r = deserialize(b.data(), b.size());
    REQUIRE(r.ok());
    REQUIRE(r->runtime.empty());
    require_equal(s, r.value());
  }
  SECTION("every truncation fails naming a field") {
    for (size_t n = 0; n < blob.size(); n++) {
      auto r = deserialize(blob.data(), n);
      INFO("length " << n);
      REQUIRE_FALSE(r.ok());
      REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
    }
    // Inside the section (its length cut to match): the field that ran out is named.
    for (size_t n = 0; n < want.size(); n++) {
      auto b = std::vector<uint8_t>(blob.begin(), blob.begin() + at + 16 + n);
      put_le(b, at + 8, n, 8);
      b.insert(b.end(), blob.end() - 16, blob.end());
      auto r = deserialize(b.data(), b.size());
      INFO("payload cut at " << n);
      REQUIRE_FALSE(r.ok());
      REQUIRE(r.error().message.find("runtime.") != std::string::npos);
    }
  }
  auto expect_fail = [](const std::vector<uint8_t>& b, const char* what) {
    auto r = deserialize(b.data(), b.size());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == SPROV_ERR_SNAPSHOT);
    INFO(r.error().message);
    REQUIRE(r.error().message.find(what) != std::string::npos);
  };
  const size_t p = at + 16;                       // the payload
  const size_t desc_len = 4 + 29;                 // the description
  const size_t n_eval_at = p + 1 + desc_len;
  const size_t has_thread_at = n_eval_at + 4 + 32;
  const size_t name_at = has_thread_at + 1 + 16;
  const size_t n_frames_at = name_at + 4 + 9 + 4;  // "worker-\xc3\xa9", then the empty problem
  const size_t frame0 = n_frames_at + 4;
  SECTION("hostile fields are refused, naming the field and the value") {
    auto b = blob;
    b[p] = 2;
    expect_fail(b, "field 'runtime.kind' at offset");
    b = blob;
    put_le(b, p + 1, 16385, 4);
    expect_fail(b, "runtime.description");
    expect_fail(b, "16385 bytes");
    b = blob;
    put_le(b, n_eval_at, 17, 4);
    expect_fail(b, "runtime.n_eval");
    expect_fail(b, "17 ranges");
    b = blob;
    put_le(b, n_eval_at, 0xffffffff, 4);
    expect_fail(b, "4294967295 ranges");
    b = blob;
    put_le(b, n_eval_at + 4 + 8, 0x500000, 8);  // end == start
    expect_fail(b, "runtime.eval.start");
    b = blob;
    b[has_thread_at] = 2;
    expect_fail(b, "runtime.has_thread");
    b = blob;
    put_le(b, n_frames_at, 65537, 4);
    expect_fail(b, "65537 frames");
    b = blob;
    put_le(b, n_frames_at, 5, 4);  // more frames than the 134 bytes left can hold (34 bytes at least each)
    expect_fail(b, "runtime.n_frames");
    b = blob;
    put_le(b, n_frames_at, 3, 4);  // room for three small frames, but the third is not there
    expect_fail(b, "truncated: field 'runtime.frame.function'");
    b = blob;
    put_le(b, n_frames_at, 0xffffffff, 4);
    expect_fail(b, "4294967295 frames");
    b = blob;
    put_le(b, frame0, 0xfffffff0, 4);
    expect_fail(b, "runtime.frame.function");
    b = blob;
    b[frame0 + 4 + 3 + 4 + 3 + 4 + 11 + 4] = 2;  // the first frame's flags
    expect_fail(b, "runtime.frame.flags");
    b = blob;
    b[has_thread_at] = 0;  // a thread's fields without a thread
    expect_fail(b, "without has_thread");
  }
}
