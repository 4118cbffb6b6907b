// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the minidump reader (lib/minidump/minidump.*) on raw bytes -- header, stream directory,
// threads, modules, memory lists, exception, system info -- then every query the snapshot builder
// makes, and the snapshot builder itself (offline: no file is opened).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/minidump_capture.hpp"
#include "minidump/minidump.hpp"

using namespace stackprov;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = minidump::Minidump::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.dmp");
  if (!r.ok()) return 0;
  const minidump::Minidump& d = *r.value();
  uint8_t buf[64];
  for (const minidump::Thread& t : d.threads()) {
    (void)d.x64_context(t.context);
    (void)d.bytes(t.stack);
    (void)d.read(t.stack.start, buf, sizeof buf);
    (void)d.readable_from(t.stack.start);
  }
  for (const minidump::Module& m : d.modules()) {
    (void)d.bytes(m.cv_record);
    (void)d.read(m.base, buf, sizeof buf);
  }
  for (const minidump::MemoryRange& m : d.memory()) {
    (void)d.bytes(m);
    (void)d.read(m.start + m.size - 1, buf, 2);
  }
  if (d.exception()) (void)d.x64_context(d.exception()->context);
  memory::MinidumpCaptureOptions o;
  o.offline = true;
  o.max_stack_bytes = 4096;
  (void)memory::capture_minidump(d, o, nullptr);
  return 0;
}
