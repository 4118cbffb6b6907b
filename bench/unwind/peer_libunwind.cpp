// SPDX-License-Identifier: Apache-2.0
// bench/unwind: nongnu libunwind in remote mode, with accessors over the snapshot and the module files.
#include <libunwind.h>

#include <cstdio>
#include <cstring>

#include "peers.hpp"

// Exported by libunwind-x86_64 (src/dwarf/Gfind_proc_info-lsb.c) but not declared in its headers;
// _UPT_find_proc_info uses it the same way.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace bench_unwind {

namespace {

struct CursorArg {
  const SnapshotSet* set;
  const Snapshot* snap;
  PeerMemory* mem;  // this walk's reader: the same reader as stackprov's (see PeerMemory)
};

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info,
                   void* arg) {
  auto* a = static_cast<CursorArg*>(arg);
  const Group& g = a->set->groups()[a->snap->group];
  const Segment* seg = g.find(ip);
  if (seg == nullptr) return -UNW_ENOINFO;
  const PlacedModule& m = g.modules[static_cast<size_t>(seg->module)];
  const ModuleFile::EhFrameHdr& h = m.file->eh_frame_hdr();
  if (!h.present) return -UNW_ENOINFO;
  // As _UPT_find_proc_info / dwarf_find_proc_info build it: the text segment's
  // range, the table in remote memory, data-relative to .eh_frame_hdr.
  unw_dyn_info_t di;
  memset(&di, 0, sizeof di);
  di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di.start_ip = seg->lo;
  di.end_ip = seg->hi;
  di.gp = 0;
  di.u.rti.name_ptr = 0;
  di.u.rti.segbase = m.load_bias + h.vaddr;
  di.u.rti.table_data = m.load_bias + h.table_vaddr;
  di.u.rti.table_len = h.fde_count * 8 / sizeof(unw_word_t);  // struct table_entry is 2 x int32
  return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

void put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {}

int get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  auto* a = static_cast<CursorArg*>(arg);
  return a->mem->read(addr, val, sizeof *val) ? 0 : -UNW_EINVAL;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  // UNW_X86_64_RAX..UNW_X86_64_RIP are numbered as DWARF registers 0..16.
  static_assert(UNW_X86_64_RDX == 1 && UNW_X86_64_RBX == 3 && UNW_X86_64_RSP == 7 &&
                UNW_X86_64_R8 == 8 && UNW_X86_64_RIP == 16);
  auto* a = static_cast<CursorArg*>(arg);
  if (reg < 0 || reg >= kNumRegs) return -UNW_EBADREG;
  *val = (a->snap->reg_mask >> reg) & 1u ? a->snap->regs[reg] : 0;
  return 0;
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EBADREG; }
int resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
int get_proc_name(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) {
  return -UNW_ENOINFO;
}

class LibunwindPeer final : public Peer {
 public:
  explicit LibunwindPeer(const SnapshotSet& set) : set_(set), spaces_(set.groups().size(), nullptr) {}
  ~LibunwindPeer() override {
    for (unw_addr_space_t as : spaces_)
      if (as != nullptr) unw_destroy_addr_space(as);
  }

  bool init() {
    memset(&acc_, 0, sizeof acc_);
    acc_.find_proc_info = find_proc_info;
    acc_.put_unwind_info = put_unwind_info;
    acc_.get_dyn_info_list_addr = get_dyn_info_list_addr;
    acc_.access_mem = access_mem;
    acc_.access_reg = access_reg;
    acc_.access_fpreg = access_fpreg;
    acc_.resume = resume;
    acc_.get_proc_name = get_proc_name;
    return true;
  }

  size_t unwind(size_t index, uint64_t* pcs, size_t max) override {
    const Snapshot& s = set_.snapshots()[index];
    unw_addr_space_t& as = spaces_[s.group];
    if (as == nullptr) {
      // One address space per process (group): its caches are keyed by ip.
      as = unw_create_addr_space(&acc_, 0);
      if (as == nullptr) return 0;
      unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    }
    PeerMemory mem(set_.groups()[s.group], s);  // one reader per walk, as stackprov's
    CursorArg arg{&set_, &s, &mem};
    unw_cursor_t c;
    if (unw_init_remote(&c, as, &arg) != 0) return 0;
    size_t n = 0;
    int ret = 0;
    while (n < max) {
      unw_word_t ip = 0;
      if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0) break;
      pcs[n++] = ip;
      ret = unw_step(&c);
      if (ret <= 0) break;
    }
    last_ret_ = ret;
    return n;
  }

  std::string last_note() const override {
    return last_ret_ == 0 ? "end" : std::string("unw_step: ") + unw_strerror(last_ret_);
  }

 private:
  const SnapshotSet& set_;
  unw_accessors_t acc_;
  std::vector<unw_addr_space_t> spaces_;
  int last_ret_ = 0;
};

}  // namespace

std::unique_ptr<Peer> make_libunwind(const SnapshotSet& set) {
  auto p = std::make_unique<LibunwindPeer>(set);
  if (!p->init()) return nullptr;
  return p;
}

}  // namespace bench_unwind
