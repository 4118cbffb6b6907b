// SPDX-License-Identifier: Apache-2.0
// Our side of the oracle's register check (macho_unicorn_test.py): for each raw state document named on
// the command line (or each *.json of a directory), steps our unwinder out of every frame
// (Unwinder::step_registers, the table rung first) and prints one line per frame,
//   "frame FILE K PC SP R=V ..."
// with every callee-saved register it knows (x86_64 rbx rbp r12-r15, arm64 x19-x29 by DWARF number),
// and "end FILE STOP" when the walk ends. The CLI's stack output has no registers; this does.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "arch/arm64/registers.hpp"
#include "arch/x86_64/registers.hpp"
#include "core/mapped_file.hpp"
#include "memory/raw_state.hpp"
#include "object/object_image.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwinder.hpp"

using namespace stackprov;
using namespace stackprov::unwind;

namespace {

std::map<std::string, std::shared_ptr<LoadedModule>> g_loaded;

/// The snapshot's modules, each file loaded once for the whole run; false (a line printed) on an error.
bool fill_table(const memory::Snapshot& snap, ModuleTable* table) {
  for (size_t i = 0; i < snap.modules.size(); i++) {
    const memory::SnapshotModule& m = snap.modules[i];
    std::shared_ptr<LoadedModule>& lm = g_loaded[m.path];
    if (!lm) {
      auto img = object::open(m.path);
      if (!img.ok()) {
        std::printf("error %s: %s\n", m.path.c_str(), img.error().message.c_str());
        return false;
      }
      std::shared_ptr<const object::ObjectImage> image = img.value();
      auto l = LoadedModule::load(image, object::DebugFileOptions{});
      if (!l.ok()) {
        std::printf("error %s: %s\n", m.path.c_str(), l.error().message.c_str());
        return false;
      }
      lm = l.value();
    }
    ModuleSlot slot;
    slot.start = m.start;
    slot.end = m.end;
    slot.bias = m.load_bias;
    slot.module = lm.get();
    slot.snapshot_index = static_cast<int32_t>(i);
    table->add(slot, lm);
  }
  table->finish();
  return true;
}

template <class Traits>
int walk(const std::string& name, const memory::Snapshot& snap, uint64_t callee_saved) {
  ModuleTable table;
  if (!fill_table(snap, &table)) return 1;
  static RuleCache cache;
  WalkOptions opts;
  opts.use_frame_pointer = false;  // the table's answers alone
  memory::SnapshotReader mem(snap);
  Unwinder<Traits, memory::SnapshotReader> uw(table, cache, opts, mem);
  typename Unwinder<Traits, memory::SnapshotReader>::Regs regs{};
  for (int r = 0; r < Traits::kNumRegs; r++)
    if (snap.has_reg(r)) regs.set(r, snap.regs[r]);
  bool exact = (snap.flags & memory::Snapshot::kFlagPcIsReturnAddress) == 0;
  for (int k = 0; k < 256; k++) {
    std::printf("frame %s %d %" PRIx64 " %" PRIx64, name.c_str(), k, regs.get(Traits::kPcReg), regs.get(Traits::kSpReg));
    for (int r = 0; r < 64 && r < Traits::kNumRegs; r++)
      if (((callee_saved >> r) & 1) != 0 && regs.has(r)) std::printf(" %d=%" PRIx64, r, regs.get(r));
    std::printf("\n");
    typename Unwinder<Traits, memory::SnapshotReader>::Regs next{};
    Method method = Method::kNone;
    const StopReason st = uw.step_registers(regs, exact, &next, &method);
    if (st != StopReason::kNone || next.get(Traits::kPcReg) == 0) {
      std::printf("end %s %d\n", name.c_str(), st != StopReason::kNone ? static_cast<int>(st) : 0);
      return 0;
    }
    regs = next;
    exact = false;
  }
  std::printf("end %s max\n", name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; i++) {
    auto f = memory::raw_state_files(argv[i]);
    if (!f.ok()) {
      std::fprintf(stderr, "macho_regs: %s\n", f.error().message.c_str());
      return 2;
    }
    files.insert(files.end(), f.value().begin(), f.value().end());
  }
  for (const std::string& f : files) {
    auto mapped = map_regular_file(f);
    if (!mapped.ok()) {
      std::fprintf(stderr, "macho_regs: %s\n", mapped.error().message.c_str());
      return 2;
    }
    const size_t slash = f.rfind('/');
    auto snap = memory::snapshot_from_raw_state({static_cast<const char*>(mapped.value().base), mapped.value().size},
                                                slash == std::string::npos ? "" : f.substr(0, slash));
    unmap_file(mapped.value().base, mapped.value().size);
    if (!snap.ok()) {
      std::fprintf(stderr, "macho_regs: %s: %s\n", f.c_str(), snap.error().message.c_str());
      return 2;
    }
    const std::string name = slash == std::string::npos ? f : f.substr(slash + 1);
    const int rc = snap.value().arch == Arch::kX86_64
                       ? walk<arch::x86_64::Traits>(name, snap.value(), arch::x86_64::Traits::kCalleeSaved)
                       : walk<arch::arm64::Traits>(name, snap.value(), 0x3ff80000ull);  // x19-x29
    if (rc != 0) return rc;
  }
  return 0;
}
