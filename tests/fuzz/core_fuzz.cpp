// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: CoreFile::from_bytes (headers, notes, NT_FILE, auxv), memory reads and capture_core.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "elf/core_file.hpp"
#include "memory/core_capture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stackprov;
  auto core = elf::CoreFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
  if (!core.ok()) return 0;
  const elf::CoreFile& c = *core.value();
  unsigned sum = 0;
  uint8_t buf[64];
  for (const elf::CoreSegment& s : c.segments()) {
    if (c.read(s.vaddr, buf, sizeof buf)) sum += buf[0];
    if (c.read(s.vaddr + s.memsz - 1, buf, 2)) sum += buf[1];  // spans into the next segment
    sum += static_cast<unsigned>(c.readable_from(s.vaddr + s.memsz / 2));
  }
  for (const elf::CoreMappedFile& f : c.files()) {
    if (auto img = c.image_at(f.start)) sum += static_cast<unsigned>(img->phdrs.size() + img->build_id.len);
    sum += static_cast<unsigned>(f.path.size());
  }
  if (auto s = c.read_string(c.auxv().execfn, 256)) sum += static_cast<unsigned>(s->size());
  for (const elf::CoreThread& t : c.threads()) sum += static_cast<unsigned>(t.prstatus_size);
  // A sysroot that does not exist: the capture logic runs without opening host files.
  memory::CoreCaptureOptions o;
  o.sysroot = "/nonexistent-stackprov-fuzz-root";
  o.max_stack_bytes = 4096;
  auto cap = memory::capture_core(c, o, [&](memory::Snapshot& s, memory::MemoryReader& rd) {
    if (rd.read(s.regs[7], buf, 8)) sum += buf[0];
  });
  if (cap.ok()) sum += static_cast<unsigned>(cap.value().threads.size() + cap.value().warnings.size());
  volatile unsigned sink = sum;
  (void)sink;
  return 0;
}
