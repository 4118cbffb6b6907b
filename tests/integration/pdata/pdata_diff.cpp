// SPDX-License-Identifier: Apache-2.0
// Our side of the pdata tests. pdata_test.py: the same commands as rtl_unwind.c, with "module I
// PATH BASE" lines (the bases rtl_unwind printed) instead of names, answered by one step of our
// unwinder (Unwinder::step_registers) over the same memory bytes; prints "result METHOD RIP
// R0..R15" in RtlVirtualUnwind's CONTEXT order, "?" for a register we lost, or "stop REASON" when
// our step finds no caller. pdata_walk_test.py: "memory ADDR HEX" lines (a thread's stack bytes)
// replace the seeded buffer, and "walk R0..R15 RIP" walks from those registers (an exact pc),
// printing "frame PC SP METHOD" per frame and "end STOP".
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "arch/x86_64/registers.hpp"
#include "object/object_image.hpp"
#include "pe/pe_object.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwinder.hpp"

using namespace stackprov;
using namespace stackprov::unwind;
namespace x64 = stackprov::arch::x86_64;

namespace {

constexpr uint64_t kMemBase = 0x200000000ull;
constexpr size_t kMemSize = 4u << 20;
/// x64 CONTEXT order -> DWARF register numbers.
constexpr int kDwarfOf[16] = {0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};

uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The seeded buffer at kMemBase, or (walks) the memory lines given.
struct BufferMem {
  std::vector<uint8_t> bytes;
  std::map<uint64_t, std::vector<uint8_t>> regions;  // start -> bytes, disjoint
  bool read(uint64_t addr, void* buf, size_t len) const {
    if (!regions.empty()) {
      auto it = regions.upper_bound(addr);
      if (it == regions.begin()) return false;
      --it;
      const uint64_t off = addr - it->first;
      if (off > it->second.size() || len > it->second.size() - off) return false;
      std::memcpy(buf, it->second.data() + off, len);
      return true;
    }
    if (addr < kMemBase || addr - kMemBase > bytes.size() || len > bytes.size() - (addr - kMemBase)) return false;
    std::memcpy(buf, bytes.data() + (addr - kMemBase), len);
    return true;
  }
  void add(uint64_t addr, const std::vector<uint8_t>& b) {
    auto it = regions.upper_bound(addr);
    if (it != regions.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.size() == addr) {  // contiguous: extend
        prev->second.insert(prev->second.end(), b.begin(), b.end());
        return;
      }
    }
    regions[addr] = b;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pdata_diff SEED < commands\n");
    return 2;
  }
  uint64_t seed = std::strtoull(argv[1], nullptr, 16);
  BufferMem mem;
  mem.bytes.resize(kMemSize);
  for (size_t i = 0; i < kMemSize / 8; i++) {
    const uint64_t w = splitmix64(&seed);
    std::memcpy(mem.bytes.data() + 8 * i, &w, 8);
  }
  ModuleTable table;
  std::vector<uint64_t> bases;
  std::vector<std::shared_ptr<LoadedModule>> mods;
  std::string line;
  bool finished = false;
  RuleCache cache;
  WalkOptions opts;
  opts.use_frame_pointer = false;  // the table's answer alone, as RtlVirtualUnwind gives it
  std::unique_ptr<Unwinder<x64::Traits, BufferMem>> uw;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "module") {
      int index;
      std::string path, base_hex;
      in >> index >> path >> base_hex;
      const uint64_t base = std::stoull(base_hex, nullptr, 16);
      auto img = object::open(path);
      if (!img.ok()) {
        std::printf("error %s: %s\n", path.c_str(), img.error().message.c_str());
        return 1;
      }
      const auto* pe_img = dynamic_cast<const pe::PeObject*>(img.value().get());
      if (pe_img == nullptr) {
        std::printf("error %s: not a PE image\n", path.c_str());
        return 1;
      }
      const uint64_t image_base = pe_img->image_base(), size = pe_img->size_of_image();
      auto m = LoadedModule::load(img.value(), object::DebugFileOptions{});
      if (!m.ok()) {
        std::printf("error %s: %s\n", path.c_str(), m.error().message.c_str());
        return 1;
      }
      ModuleSlot slot;
      slot.start = base;
      slot.end = base + size;
      slot.bias = base - image_base;
      slot.module = m.value().get();
      slot.snapshot_index = index;
      table.add(slot, m.value());
      mods.push_back(m.value());
      bases.push_back(base);
      continue;
    }
    if (kind == "memory") {
      std::string addr_hex, hex;
      in >> addr_hex >> hex;
      std::vector<uint8_t> b;
      for (size_t i = 0; i + 1 < hex.size(); i += 2) b.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
      mem.add(std::stoull(addr_hex, nullptr, 16), b);
      continue;
    }
    if (kind != "state" && kind != "walk") continue;
    if (!finished) {
      table.finish();
      uw = std::make_unique<Unwinder<x64::Traits, BufferMem>>(table, cache, opts, mem);
      finished = true;
    }
    if (kind == "walk") {
      Unwinder<x64::Traits, BufferMem>::Regs regs{};
      for (int i = 0; i < 17; i++) {
        std::string h;
        in >> h;
        regs.set(i < 16 ? kDwarfOf[i] : x64::kRip, std::stoull(h, nullptr, 16));
      }
      WalkResult w;
      uw->walk(regs, false, &w);
      for (const Frame& f : w.frames)
        std::printf("frame %" PRIx64 " %" PRIx64 " %d\n", f.pc, f.sp, static_cast<int>(f.method));
      std::printf("end %d\n", static_cast<int>(w.stop));
      continue;
    }
    size_t m;
    std::string rva_hex;
    in >> m >> rva_hex;
    if (m >= bases.size()) {
      std::printf("error bad module %zu\n", m);
      return 1;
    }
    Unwinder<x64::Traits, BufferMem>::Regs regs{};
    for (int i = 0; i < 16; i++) {
      std::string h;
      in >> h;
      regs.set(kDwarfOf[i], std::stoull(h, nullptr, 16));
    }
    regs.set(x64::kRip, bases[m] + std::stoull(rva_hex, nullptr, 16));
    Unwinder<x64::Traits, BufferMem>::Regs out{};
    Method method = Method::kNone;
    const StopReason r = uw->step_registers(regs, true, &out, &method);
    if (r != StopReason::kNone) {
      std::printf("stop %d\n", static_cast<int>(r));
      continue;
    }
    std::printf("result %d 0x%" PRIx64, static_cast<int>(method), out.get(x64::kRip));
    for (int i = 0; i < 16; i++) {
      if (out.has(kDwarfOf[i]))
        std::printf(" 0x%" PRIx64, out.get(kDwarfOf[i]));
      else
        std::printf(" ?");
    }
    std::printf("\n");
  }
  return 0;
}
