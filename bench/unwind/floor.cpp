// SPDX-License-Identifier: Apache-2.0
// bench/unwind: the floor of the in-cache method — a minimal walker in framehop's shape over rules
// learned from stackprov's own walks, timed exactly as the unwinders are.
#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>

#include "peers.hpp"

namespace bench_unwind {

namespace {

// x86_64 DWARF register numbers (the bench's snapshots are the host's).
constexpr int kRbp = 6, kRsp = 7, kRip = 16;
// Frame 0 at an exact pc (not a return address) is looked up under its own key.
constexpr uint64_t kExactBit = uint64_t{1} << 63;

/// What the floor walker knows of one lookup pc: cfa = (fp or sp) + off; ra = *(cfa - 8); the caller's
/// fp = *(cfa - 8 * fp_slot), or unchanged when fp_slot is 0. 16 bytes, as framehop's rules.
struct Entry {
  uint64_t key = 0;  // 0: empty
  int32_t off = 0;
  uint8_t base_fp = 0;
  uint8_t fp_slot = 0;
  uint16_t pad = 0;
};
static_assert(sizeof(Entry) == 16, "a floor rule is 16 bytes");

/// What the occurrences of one lookup pc in stackprov's walks allow.
struct Learned {
  int64_t sp_off = 0, fp_off = 0;
  bool sp_ok = true, fp_ok = true, seen = false;
  uint32_t fp_candidates = ~0u;  // bit 0: unchanged; bit k (1..17): the caller's fp at cfa - 8k
};

/// The minimal walker: the stack region found once per walk, a pc-keyed open-addressed table of
/// 16-byte rules, a register file of pc, sp and fp, pcs written straight into the caller's array.
/// It is not an unwinder (no modules, no other registers, no signal frames, rules only for pcs
/// stackprov's walks met): it measures what the bench's method costs a walker that does nothing else.
class FloorWalker final : public Peer {
 public:
  explicit FloorWalker(const SnapshotSet& set) : set_(set) {}

  /// Learns a rule for every lookup pc of the walks of `indices` (stackprov with its registers kept).
  bool learn(const std::vector<size_t>& indices, std::string* why) {
    sprov_context* ctx = nullptr;
    sprov_unwinder* uw = nullptr;
    if (sprov_context_new(nullptr, &ctx) != 0) return fail(why, "sprov_context_new");
    sprov_unwinder_opts o;
    memset(&o, 0, sizeof o);
    o.sz = sizeof o;
    o.max_frames = 4096;
    o.flags = SPROV_UNWIND_NO_DEBUG_FRAME | SPROV_UNWIND_KEEP_REGISTERS;
    if (sprov_unwinder_new(ctx, &o, &uw) != 0) {
      sprov_context_free(ctx);
      return fail(why, "sprov_unwinder_new");
    }
    std::unordered_map<uint64_t, Learned> learned;
    std::vector<sprov_frame> frames;
    std::vector<std::array<uint64_t, 17>> regs;
    std::vector<uint64_t> known;
    bool ok = true;
    for (size_t index : indices) {
      const Snapshot& s = set_.snapshots()[index];
      sprov_stack* st = nullptr;
      if (sprov_unwinder_unwind(uw, s.snap, &st) != 0) {
        ok = fail(why, sprov_last_error_message());
        break;
      }
      const size_t n = sprov_stack_frame_count(st);
      frames.assign(n, sprov_frame{});
      regs.assign(n, {});
      known.assign(n, 0);
      for (size_t i = 0; i < n; i++) {
        frames[i].sz = sizeof(sprov_frame);
        sprov_stack_frame(st, i, &frames[i]);
        sprov_stack_frame_registers(st, i, regs[i].data(), regs[i].size(), &known[i]);
      }
      sprov_stack_free(st);
      stackprov::memory::SnapshotReader rd(*s.mem);
      for (size_t i = 0; i + 1 < n; i++) {
        const sprov_frame& f = frames[i];
        const uint64_t key = f.pc | ((f.flags & SPROV_FRAME_RETURN_ADDRESS) ? 0 : kExactBit);
        Learned& l = learned[key];
        const uint64_t cfa = f.cfa;
        const bool has_fp = (known[i] >> kRbp) & 1;
        const int64_t sp_off = static_cast<int64_t>(cfa - f.sp);
        const int64_t fp_off = static_cast<int64_t>(cfa - regs[i][kRbp]);
        if (!l.seen) {
          l.sp_off = sp_off;
          l.fp_off = fp_off;
          l.fp_ok = has_fp;
          l.seen = true;
        } else {
          l.sp_ok = l.sp_ok && l.sp_off == sp_off;
          l.fp_ok = l.fp_ok && has_fp && l.fp_off == fp_off;
        }
        if (cfa == 0) l.sp_ok = l.fp_ok = false;
        // The caller's fp: unchanged, or one of the slots below the cfa holds it.
        if ((known[i + 1] >> kRbp) & 1) {
          const uint64_t next_fp = regs[i + 1][kRbp];
          uint32_t c = (has_fp && regs[i][kRbp] == next_fp) ? 1u : 0u;
          for (uint32_t k = 2; k <= 17; k++) {
            uint64_t v = 0;
            if (rd.read(cfa - 8 * k, &v, 8) && v == next_fp) c |= 1u << k;
          }
          l.fp_candidates &= c;
        }
      }
    }
    sprov_unwinder_free(uw);
    sprov_context_free(ctx);
    if (!ok) return false;
    size_t cap = 64;
    while (cap < learned.size() * 4) cap <<= 1;
    table_.assign(cap, Entry{});
    mask_ = cap - 1;
    for (const auto& [key, l] : learned) {
      if (!l.sp_ok && !l.fp_ok) continue;  // no rule: the walk stops there
      Entry e;
      e.key = key;
      e.base_fp = l.sp_ok ? 0 : 1;
      e.off = static_cast<int32_t>(l.sp_ok ? l.sp_off : l.fp_off);
      e.fp_slot = 0;
      if (!(l.fp_candidates & 1u))
        for (uint8_t k = 2; k <= 17; k++)
          if (l.fp_candidates & (1u << k)) {
            e.fp_slot = k;
            break;
          }
      size_t h = slot(key);
      while (table_[h].key != 0) h = (h + 1) & mask_;
      table_[h] = e;
      rules_++;
    }
    return true;
  }

  size_t unwind(size_t index, uint64_t* pcs, size_t max) override {
    const Snapshot& s = set_.snapshots()[index];
    uint64_t pc = s.regs[kRip], sp = s.regs[kRsp], fp = s.regs[kRbp];
    const bool ra = (s.mem->flags & stackprov::memory::Snapshot::kFlagPcIsReturnAddress) != 0;
    uint64_t lo = 0, size = 0;
    const uint8_t* host = nullptr;
    for (const stackprov::memory::MemoryRegion& r : s.mem->memory)
      if (sp - r.addr < r.bytes.size()) {
        lo = r.addr;
        host = r.bytes.data();
        size = r.bytes.size();
        break;
      }
    if (host == nullptr || size < 8 || max == 0) return 0;
    uint64_t key = ra ? pc : pc | kExactBit;
    size_t n = 0;
    for (;;) {
      pcs[n++] = pc;
      if (n >= max) break;
      size_t h = slot(key);
      while (table_[h].key != key && table_[h].key != 0) h = (h + 1) & mask_;
      const Entry& e = table_[h];
      if (e.key == 0) break;
      const uint64_t cfa = (e.base_fp ? fp : sp) + static_cast<int64_t>(e.off);
      const uint64_t at = cfa - 8 - lo;
      if (at > size - 8) break;
      uint64_t next;
      memcpy(&next, host + at, 8);
      if (e.fp_slot != 0) {
        const uint64_t fat = cfa - 8 * uint64_t{e.fp_slot} - lo;
        if (fat > size - 8) break;
        memcpy(&fp, host + fat, 8);
      }
      if (next == 0 || cfa <= sp) break;
      sp = cfa;
      pc = next;
      key = pc;
    }
    return n;
  }

  size_t rules() const { return rules_; }

 private:
  static bool fail(std::string* why, const char* what) {
    *why = what;
    return false;
  }
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & mask_; }

  const SnapshotSet& set_;
  std::vector<Entry> table_;
  size_t mask_ = 0;
  size_t rules_ = 0;
};

}  // namespace

std::unique_ptr<Peer> make_floor(const SnapshotSet& set, const std::vector<size_t>& indices, size_t* rules,
                                 std::string* why) {
  auto p = std::make_unique<FloorWalker>(set);
  if (!p->learn(indices, why)) return nullptr;
  *rules = p->rules();
  return p;
}

}  // namespace bench_unwind
