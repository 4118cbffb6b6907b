// SPDX-License-Identifier: Apache-2.0
// bench/unwind: elfutils libdwfl, modules reported from their files, thread state from the snapshot.
#include <elfutils/libdwfl.h>

#include <cstdio>
#include <cstring>

#include "peers.hpp"

namespace bench_unwind {

namespace {

constexpr pid_t kTid = 1;

// No separate debug files: unwinding uses each module's .eh_frame (and the
// module's own .debug_frame if it has one), as the other two do.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word,
                 char**) {
  return -1;
}

const Dwfl_Callbacks kCallbacks = {
    nullptr,       // find_elf: modules are reported with their path
    no_debuginfo,  // find_debuginfo
    nullptr,       // section_address
    nullptr,       // debuginfo_path
};

/// One Dwfl per process (group); `current` is the snapshot being unwound and
/// `mem` its reader for this walk (PeerMemory: the same reader as stackprov's).
struct DwflGroup {
  Dwfl* dwfl = nullptr;
  const SnapshotSet* set = nullptr;
  const Snapshot* current = nullptr;
  PeerMemory* mem = nullptr;
};

pid_t next_thread(Dwfl*, void* dwfl_arg, void** thread_argp) {
  if (*thread_argp != nullptr) return 0;
  *thread_argp = dwfl_arg;
  return kTid;
}

bool get_thread(Dwfl*, pid_t tid, void* dwfl_arg, void** thread_argp) {
  *thread_argp = dwfl_arg;
  return tid == kTid;
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* dwfl_arg) {
  auto* g = static_cast<DwflGroup*>(dwfl_arg);
  return g->mem->read(addr, result, sizeof *result);
}

bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
  auto* g = static_cast<DwflGroup*>(thread_arg);
  const Snapshot& s = *g->current;
  for (int r = 0; r < kNumRegs; r++) {
    if (!((s.reg_mask >> r) & 1u)) continue;
    Dwarf_Word v = s.regs[r];
    if (!dwfl_thread_state_registers(thread, r, 1, &v)) return false;
  }
  dwfl_thread_state_register_pc(thread, s.regs[kRegIp]);
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    next_thread, get_thread, memory_read, set_initial_registers, nullptr, nullptr,
};

struct FrameSink {
  uint64_t* pcs;
  size_t max;
  size_t n;
};

int on_frame(Dwfl_Frame* state, void* arg) {
  auto* sink = static_cast<FrameSink*>(arg);
  Dwarf_Addr pc;
  bool isactivation;
  if (!dwfl_frame_pc(state, &pc, &isactivation)) return DWARF_CB_ABORT;
  sink->pcs[sink->n++] = pc;
  return sink->n < sink->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

class LibdwflPeer final : public Peer {
 public:
  explicit LibdwflPeer(const SnapshotSet& set) : set_(set), groups_(set.groups().size()) {}
  ~LibdwflPeer() override {
    for (DwflGroup& g : groups_)
      if (g.dwfl != nullptr) dwfl_end(g.dwfl);
  }

  size_t unwind(size_t index, uint64_t* pcs, size_t max) override {
    const Snapshot& s = set_.snapshots()[index];
    DwflGroup& g = groups_[s.group];
    if (g.dwfl == nullptr && !attach(g, set_.groups()[s.group])) return 0;
    g.current = &s;
    PeerMemory mem(set_.groups()[s.group], s);  // one reader per walk, as stackprov's
    g.mem = &mem;
    FrameSink sink{pcs, max, 0};
    int rc = dwfl_getthread_frames(g.dwfl, kTid, on_frame, &sink);
    g.mem = nullptr;
    last_err_ = rc == 0 ? "end" : dwfl_errmsg(-1);
    return sink.n;
  }

  std::string last_note() const override { return last_err_ != nullptr ? last_err_ : ""; }

 private:
  bool attach(DwflGroup& g, const Group& group) {
    g.set = &set_;
    g.dwfl = dwfl_begin(&kCallbacks);
    if (g.dwfl == nullptr) return false;
    dwfl_report_begin(g.dwfl);
    for (const PlacedModule& m : group.modules) {
      if (m.file == nullptr) continue;
      if (dwfl_report_elf(g.dwfl, m.path.c_str(), m.path.c_str(), -1, m.load_bias, false) == nullptr) {
        fprintf(stderr, "libdwfl: %s: %s\n", m.path.c_str(), dwfl_errmsg(-1));
        return false;
      }
    }
    dwfl_report_end(g.dwfl, nullptr, nullptr);
    if (!dwfl_attach_state(g.dwfl, nullptr, kTid, &kThreadCallbacks, &g)) {
      fprintf(stderr, "libdwfl: dwfl_attach_state: %s\n", dwfl_errmsg(-1));
      return false;
    }
    return true;
  }

  const SnapshotSet& set_;
  std::vector<DwflGroup> groups_;
  const char* last_err_ = nullptr;
};

}  // namespace

std::unique_ptr<Peer> make_libdwfl(const SnapshotSet& set) { return std::make_unique<LibdwflPeer>(set); }

}  // namespace bench_unwind
