// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: snapshot deserialization, re-serialization and SnapshotReader reads of hostile blobs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "memory/snapshot.hpp"

using namespace stackprov::memory;

namespace {

[[noreturn]] void fail() { abort(); }

/// Reads every region's first and last bytes, one byte past each end, and
/// 8-byte loads at a few addresses derived from the registers.
void exercise_reader(const Snapshot& s) {
  SnapshotReader r(s);
  uint8_t buf[64];
  for (const MemoryRegion& m : s.memory) {
    const size_t n = m.bytes.size();
    const size_t k = n < sizeof(buf) ? n : sizeof(buf);
    if (!r.read(m.addr, buf, k) || std::memcmp(buf, m.bytes.data(), k) != 0) fail();
    if (!r.read(m.addr + n - k, buf, k) || std::memcmp(buf, m.bytes.data() + n - k, k) != 0)
      fail();
    r.read(m.addr + n - 1, buf, 2);  // succeeds only when the next region is adjacent
    r.read(m.addr - 1, buf, 1);
  }
  for (int i = 0; i < kSnapshotMaxRegs; i++) {
    if (!s.has_reg(i)) continue;
    r.read(s.regs[i], buf, 8);
    r.read(s.regs[i] - 8, buf, 16);
  }
  if (!r.read(0, buf, 0)) fail();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = deserialize(data, size);
  if (!r.ok()) {
    if (r.error().code != SPROV_ERR_SNAPSHOT) fail();
    return 0;
  }
  // Whatever parses keeps the invariants and re-serializes: a version 1 blob to exactly the input;
  // a version 2 one (optional sections skipped, flags normalised, and v1 written when every
  // identity is an ELF build-id) to bytes that parse to the same snapshot and serialize to
  // themselves.
  const Snapshot& s = r.value();
  const std::vector<uint8_t> again = serialize(s);
  if (size >= 12 && data[8] == 1) {
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) fail();
  } else {
    auto back = deserialize(again.data(), again.size());
    if (!back.ok() || serialize(back.value()) != again) fail();
    if (back.value().module_list_hash() != s.module_list_hash() || back.value().memory.size() != s.memory.size())
      fail();
    for (size_t i = 0; i < s.memory.size(); i++)
      if (back.value().memory[i].addr != s.memory[i].addr || back.value().memory[i].bytes != s.memory[i].bytes) fail();
    if (back.value().regs_valid != s.regs_valid || std::memcmp(back.value().regs, s.regs, sizeof s.regs) != 0) fail();
    // The runtime section (5): the same interpreter, ranges and frames.
    const SnapshotRuntime &x = back.value().runtime, &y = s.runtime;
    if (x.kind != y.kind || x.description != y.description || x.eval.size() != y.eval.size() ||
        x.has_thread != y.has_thread || x.name != y.name || x.problem != y.problem || x.frames.size() != y.frames.size())
      fail();
    for (size_t i = 0; i < x.frames.size(); i++)
      if (x.frames[i].qualname != y.frames[i].qualname || x.frames[i].file != y.frames[i].file ||
          x.frames[i].line != y.frames[i].line || x.frames[i].is_entry != y.frames[i].is_entry)
        fail();
  }
  for (size_t i = 1; i < s.memory.size(); i++)
    if (s.memory[i].addr < s.memory[i - 1].addr + s.memory[i - 1].bytes.size()) fail();
  for (size_t i = 1; i < s.modules.size(); i++)
    if (s.modules[i].start < s.modules[i - 1].end) fail();
  exercise_reader(s);
  (void)s.module_list_hash();
  return 0;
}
