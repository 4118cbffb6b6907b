// SPDX-License-Identifier: Apache-2.0
// The win64 capture test's walker (capture_test.py): captures live process PID with
// capture_windows_process (ReadProcessMemory, every thread suspended) and walks each thread's
// snapshot with our unwinder over the modules' own files (.pdata only: no frame-pointer or scan
// rung, as RtlVirtualUnwind). Prints "module BASE PATH ID-SOURCE FILE" per module, then per thread
// "thread TID", "frame PC SP" per frame and "end STOP"; the capture's warnings go to stderr.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "memory/windows_capture.hpp"
#include "object/object_image.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/walk.hpp"

using namespace stackprov;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: capture_walk PID\n");
    return 2;
  }
  const uint32_t pid = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  memory::WindowsCaptureOptions opts;
  auto cap = memory::capture_windows_process(pid, opts, nullptr);
  if (!cap.ok()) {
    std::printf("error %d %s\n", cap.error().code, cap.error().message.c_str());
    return 1;
  }
  std::fputs(cap.value().warnings.c_str(), stderr);
  if (cap.value().threads.empty()) return 1;
  const memory::Snapshot& first = cap.value().threads.front();
  // The module table once: every thread's snapshot has the same module list.
  unwind::ModuleTable table;
  for (size_t i = 0; i < first.modules.size(); i++) {
    const memory::SnapshotModule& m = first.modules[i];
    unwind::ModuleSlot slot = unwind::snapshot_slot(first, i);
    std::shared_ptr<unwind::LoadedModule> mod;
    const char* why = "no file";
    if (!m.open_path.empty()) {
      auto img = object::open(m.open_path);
      if (img.ok()) {
        auto lm = unwind::LoadedModule::load(img.value(), object::DebugFileOptions{});
        if (lm.ok()) {
          mod = lm.value();
          slot.module = mod.get();
          why = "loaded";
        } else {
          std::fprintf(stderr, "%s: %s\n", m.open_path.c_str(), lm.error().message.c_str());
          why = "unloadable";
        }
      } else {
        std::fprintf(stderr, "%s: %s\n", m.open_path.c_str(), img.error().message.c_str());
        why = "unreadable";
      }
    }
    std::printf("module %" PRIx64 " %s %s %s\n", m.start, m.path.c_str(), m.build_id.empty() ? "no-id" : "id", why);
    table.add(slot, std::move(mod));
  }
  table.finish();
  unwind::RuleCache cache;
  unwind::WalkOptions wo;
  wo.use_frame_pointer = false;  // the tables' answer alone, as RtlVirtualUnwind gives it
  for (const memory::Snapshot& s : cap.value().threads) {
    unwind::WalkResult w;
    unwind::walk_snapshot(s, table, cache, wo, &w);
    std::printf("thread %" PRId64 "\n", s.tid);
    for (const unwind::Frame& f : w.frames) std::printf("frame %" PRIx64 " %" PRIx64 "\n", f.pc, f.sp);
    std::printf("end %d\n", static_cast<int>(w.stop));
  }
  return 0;
}
