// SPDX-License-Identifier: Apache-2.0
// The unwinding ladder, templated over the memory reader and the architecture traits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "arch/arch_ops.hpp"
#include "dwarf/cfi.hpp"
#include "dwarf/expression.hpp"
#include "memory/snapshot.hpp"
#include "symbolize/gopclntab.hpp"
#include "unwind/frame.hpp"
#include "unwind/ladder.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"

namespace stackprov::unwind {

struct WalkOptions {
  uint32_t max_frames = 256;
  bool use_frame_pointer = true;
  bool use_debug_frame = true;
  bool allow_scan = false;
  uint32_t scan_words = 64;
  /// This walk may allocate (heap, locks taken by malloc or std::call_once
  /// initialisers): a rule-cache miss compiles the FDE's rows into the module's
  /// table (once per FDE), and the Go rung loads a module's pclntab. False in
  /// signal handlers (sprov_unwinder_unwind_signal): a miss there runs the CFI
  /// interpreter, which allocates nothing, and caches the row's compact rule in
  /// the rule cache (a fixed array), so later walks through the pc hit; Go
  /// functions without CFI are left to the frame pointer.
  bool may_allocate = true;
  /// JIT code outside every module (a perf map's sorted, disjoint [start, end)
  /// ranges; doc/runtime-frames.md "JIT code"): a pc there is not a bad pc,
  /// frame pointers may lead into and out of it, its frames are flagged kFlagJit.
  const std::vector<std::pair<uint64_t, uint64_t>>* jit_ranges = nullptr;
  /// Keep each frame's registers in WalkResult::regs (`stack --regs`; reserved up front).
  bool keep_registers = false;
  /// What the program registered about its async stacks (the snapshot's; doc/async-stacks.md):
  /// a coroutine entry inside a registered stack goes on at its resumer's saved context, and the
  /// async stack root's awaiter frames are spliced in after the walk. nullptr: none.
  const memory::SnapshotAsync* async = nullptr;
};

/// Walks one thread's stack. Per step: CFI (.eh_frame, then .debug_frame),
/// then the sigreturn trampoline, then the frame pointer, then (opt-in) a
/// stack scan; every frame records the rung that found it. No allocation
/// (the frame vector's capacity is reserved up front) and no locks per step;
/// the only lazily-initialised state (a module's separate debug file) is
/// guarded by call_once (core/once.hpp), which after the first use is one atomic load.
///
/// Mem: `bool read(uint64_t addr, void* buf, size_t len)`.
template <class Traits, class Mem>
class Unwinder {
 public:
  using Regs = arch::RegState<Traits::kNumRegs>;
  using Ops = arch::Ops<Traits>;
  static constexpr RowParams kRowParams = row_params_of<Traits>();

  Unwinder(const ModuleTable& modules, RuleCache& cache, const WalkOptions& opts, Mem& mem)
      : modules_(modules), cache_(cache), opts_(opts), mem_(mem) {}

  /// `pc_is_return_address`: frame 0's pc is a return address (a capture at a
  /// call site), so its lookups use pc - 1 like a caller's.
  void walk(const Regs& initial, bool pc_is_return_address, WalkResult* out) {
    out->links.clear();
    // Links are kept within the reserved capacity: a walk that may not allocate (a signal
    // handler's) records those its owner reserved (sprov_unwinder_new reserves kMaxAsyncHops).
    if (opts_.may_allocate && out->links.capacity() < kMaxAsyncHops) out->links.reserve(kMaxAsyncHops);
    hops_ = 0;
    domain_ = Domain::kUser;
    walk_physical(initial, pc_is_return_address, out);
    if (opts_.async != nullptr && opts_.async->root != 0) splice_awaiters(out);
  }

  /// The walk of the stack's physical frames (and, across a registered coroutine entry, of its
  /// resumer's), without the awaiter frames of async stack roots.
  void walk_physical(const Regs& initial, bool pc_is_return_address, WalkResult* out) {
    out->frames.clear();
    out->regs.clear();
    out->stop = StopReason::kNone;
    lost_ = 0;
    if (out->frames.capacity() < opts_.max_frames) out->frames.reserve(opts_.max_frames);
    if (opts_.keep_registers && out->regs.capacity() < opts_.max_frames) out->regs.reserve(opts_.max_frames);
    Regs regs = initial;
    if (!regs.has(Traits::kPcReg) || !regs.has(Traits::kSpReg)) {
      out->stop = StopReason::kInvalidPc;
      return;
    }
    Frame f;
    f.pc = regs.get(Traits::kPcReg);
    f.sp = regs.get(Traits::kSpReg);
    f.method = Method::kContext;
    f.lookup_prev = pc_is_return_address;
    const ModuleSlot* slot = slot_of(f);
    f.module_index = slot ? slot->snapshot_index : -1;
    if ((!slot || !slot->module) && in_jit(f.pc)) f.flags |= Frame::kFlagJit;
    out->frames.push_back(f);
    keep_registers(regs, ~uint64_t{0}, out);
    frame_base_ = 0;
    run_loop(regs, slot, out);
  }

  /// walk() for a caller that wants the pcs alone (a sampling profiler's): the pcs of walk()'s
  /// frames into pcs[0, opts.max_frames), their count returned, out->stop walk()'s stop reason.
  /// The run of frames fast_run would take goes through fast_run<true> (no Frame and no module
  /// index per frame); the first frame it cannot take continues in walk_physical's loop as a
  /// Frame (out->frames then holds that frame and those after it). Walks that record what pcs
  /// cannot carry (registers, JIT flags, awaiter frames) are walk()'s, copied.
  size_t walk_pcs(const Regs& initial, bool pc_is_return_address, uint64_t* pcs, WalkResult* out) {
    const bool plain = !opts_.keep_registers && (opts_.jit_ranges == nullptr || opts_.jit_ranges->empty()) &&
                       (opts_.async == nullptr || opts_.async->root == 0);
    if (!plain) {
      walk(initial, pc_is_return_address, out);
      const size_t n = std::min<size_t>(out->frames.size(), opts_.max_frames);
      for (size_t i = 0; i < n; i++) pcs[i] = out->frames[i].pc;
      return n;
    }
    if constexpr (kPcsRun) {
      size_t n = 0;
      if (pc_is_return_address && quick_walk(initial, pcs, out, &n)) return n;
    }
    out->links.clear();
    if (opts_.may_allocate && out->links.capacity() < kMaxAsyncHops) out->links.reserve(kMaxAsyncHops);
    hops_ = 0;
    domain_ = Domain::kUser;
    out->frames.clear();
    out->regs.clear();
    out->stop = StopReason::kNone;
    lost_ = 0;
    if (out->frames.capacity() < opts_.max_frames) out->frames.reserve(opts_.max_frames);
    Regs regs = initial;
    if (!regs.has(Traits::kPcReg) || !regs.has(Traits::kSpReg)) {
      out->stop = StopReason::kInvalidPc;
      return 0;
    }
    PcsRun r;
    r.pcs = pcs;
    r.pc = regs.get(Traits::kPcReg);
    r.sp = regs.get(Traits::kSpReg);
    r.lookup_prev = pc_is_return_address;
    r.method = Method::kContext;
    // The first frame's module: pcs_run looks a return address's up only if it cannot take the frame.
    const ModuleSlot* slot =
        kPcsRun && r.lookup_prev ? nullptr : modules_.find(r.lookup_prev ? r.pc - Traits::kCallInsnMin : r.pc);
    pcs[0] = r.pc;
    r.n = 1;
    for (;;) {
      // pcs_run's frames; a frame it cannot take, fast_run<true>'s single step; then pcs_run again.
      if constexpr (!kPcsRun) {
        if (fast_run<true>(out, &r, slot, regs)) return r.n;
      } else {
        for (;;) {
          if (pcs_run(out, &r, slot, regs)) return r.n;
          const size_t before = r.n;
          if (fast_run<true>(out, &r, slot, regs, before + 1)) return r.n;
          if (r.n == before) break;
        }
      }
      // The frame fast_run<true> could not take, as walk_physical's loop would hold it.
      Frame cur;
      cur.pc = r.pc;
      cur.sp = r.sp;
      cur.method = r.method;
      cur.lookup_prev = r.lookup_prev;
      cur.module_index = slot ? slot->snapshot_index : -1;
      cur.domain = domain_;
      out->frames.push_back(cur);
      frame_base_ = r.n - 1;
      // The loop hands the walk back after a signal frame (pcs_run's walks only): the interrupted
      // code's frames are common ones again.
      resume_after_signal_ = kPcsRun;
      run_loop(regs, slot, out);
      resume_after_signal_ = false;
      const size_t n = std::min<size_t>(out->frames.size(), opts_.max_frames - frame_base_);
      for (size_t i = 0; i < n; i++) pcs[frame_base_ + i] = out->frames[i].pc;
      if (!kPcsRun || out->stop != StopReason::kNone || n != out->frames.size()) return frame_base_ + n;
      // Back from the loop at the frame a signal frame restored (an exact pc): the current frame.
      const Frame& b = out->frames.back();
      r.n = frame_base_ + n;
      r.pc = b.pc;
      r.sp = b.sp;
      r.lookup_prev = b.lookup_prev;
      r.method = b.method;
      slot = resume_slot_;
      out->frames.clear();
    }
  }

 private:
  /// Where fast_run<true> writes: the pcs found so far and the state of the last one's frame.
  struct PcsRun {
    uint64_t* pcs = nullptr;
    size_t n = 0;  ///< pcs written; the last is the current frame's
    uint64_t pc = 0, sp = 0;
    bool lookup_prev = false;
    Method method = Method::kNone;
  };

  /// walk_physical's loop from out->frames.back() (registers `regs`, module `slot`); frame_base_
  /// frames came before out->frames (walk_pcs's, written as pcs).
  void run_loop(Regs& regs, const ModuleSlot* slot, WalkResult* out) {
    // The run of frames whose rules are cached in the common form goes through fast_run (sp, fp
    // and pc in registers, no Step); anything else, and whatever stops the walk, below.
    const bool fast = !opts_.keep_registers && (opts_.jit_ranges == nullptr || opts_.jit_ranges->empty());
    for (;;) {
      if (fast && fast_run<false>(out, nullptr, slot, regs)) return;
      Frame& cur = out->frames.back();
      if (frame_base_ + out->frames.size() >= opts_.max_frames) {
        out->stop = StopReason::kMaxFrames;
        return;
      }
      if (cur.pc == 0 && cur.lookup_prev) {
        out->frames.pop_back();  // a zero return address marks the outermost frame
        if (!out->regs.empty()) out->regs.pop_back();
        out->stop = StopReason::kEndOfStack;
        return;
      }
      uint64_t cfa = 0;
      Frame nf;
      // The common step first: a cached compact rule applied to `regs` in place
      // (no copy of the register set); anything else takes the whole ladder.
      if (!step_by_cached_rule(cur, slot, regs, &cfa, &nf)) {
        Regs next;
        Step st{cur, slot, cur.lookup_prev ? cur.pc - Traits::kCallInsnMin : cur.pc, regs, next, &cfa};
        const StopReason stop = step(st);
        if (st.row_not_in_table) cur.flags |= Frame::kFlagCfiNotInBundle;
        if (stop != StopReason::kNone) {
          // The entry trampoline's frame is named at its own pc: the return address is its first
          // instruction, not the byte after a call.
          if (stop == StopReason::kCoroutineEntry) {
            cur.lookup_prev = false;
            if (cross_coroutine_entry(out, regs, slot)) continue;  // at the registered resumer
          }
          out->stop = stop;
          return;
        }
        nf.method = st.method;  // nf stays the walk's own (in registers on the common step)
        nf.lookup_prev = st.lookup_prev;
        regs = next;  // every check below either stops the walk or keeps `next`
      }
      nf.pc = regs.get(Traits::kPcReg);
      nf.sp = regs.get(Traits::kSpReg);
      // Most callers lie in the module of their callee: its slot is tried first.
      const ModuleSlot* nslot = modules_.find_near(nf.lookup_prev ? nf.pc - Traits::kCallInsnMin : nf.pc, slot);
      nf.module_index = nslot ? nslot->snapshot_index : -1;
      // Frames found by heuristics must land in a known module.
      // (or on a sigreturn trampoline outside modules, e.g. qemu-user's sigtramp page).
      if ((nf.method == Method::kFramePointer || nf.method == Method::kScan ||
           nf.method == Method::kPrologue) &&
          nf.pc != 0 && nslot == nullptr && !in_jit(nf.pc - (nf.lookup_prev ? 1 : 0)) &&
          !sigreturn_in_memory(nf.pc)) {
        out->stop = StopReason::kInvalidPc;
        return;
      }
      // The stack pointer must advance, except across a signal frame (the
      // interrupted code may run on another stack). Out of a frame at an exact
      // pc (frame 0, a signal-interrupted frame) it may stay: a leaf without a
      // frame on arm64/mips has cfa = sp.
      if (nf.method != Method::kSignal && nf.pc != 0 &&
          (nf.sp < cur.sp || (nf.sp == cur.sp && cur.lookup_prev))) {
        out->stop = StopReason::kSpNotAdvancing;
        return;
      }
      cur.cfa = cfa;
      // A zero return address ends the stack; a zero pc restored from a signal
      // frame is where a call through a NULL pointer faulted: keep it.
      if (nf.pc == 0 && nf.lookup_prev) {
        out->stop = StopReason::kEndOfStack;
        return;
      }
      slot = nslot;
      if ((!nslot || !nslot->module) && in_jit(nf.lookup_prev ? nf.pc - 1 : nf.pc)) nf.flags |= Frame::kFlagJit;
      nf.domain = domain_;
      out->frames.push_back(nf);
      // A caller's other registers keep the callee's values in `regs` (what the next step reads),
      // but the ABI does not preserve them across a call: unknown.
      keep_registers(regs,
                     nf.method == Method::kSignal
                         ? ~uint64_t{0}
                         : Traits::kCalleeSaved | (uint64_t{1} << Traits::kPcReg) | (uint64_t{1} << Traits::kSpReg),
                     out);
      if (resume_after_signal_ && nf.method == Method::kSignal) {  // walk_pcs goes on from nf
        resume_slot_ = slot;
        return;
      }
    }
  }

 public:
  /// One step out of a frame with registers `regs`, with the caller's registers in *out (every
  /// register the step does not restore keeps its value): what walk() does for one frame, for
  /// tests that compare whole register sets with another unwinder (RtlVirtualUnwind) and for
  /// tools. `exact`: the pc is where the frame executes (frame 0), not a return address.
  StopReason step_registers(const Regs& regs, bool exact, Regs* out, Method* method) {
    if (!regs.has(Traits::kPcReg) || !regs.has(Traits::kSpReg)) return StopReason::kInvalidPc;
    Frame f;
    f.pc = regs.get(Traits::kPcReg);
    f.sp = regs.get(Traits::kSpReg);
    f.lookup_prev = !exact;
    uint64_t cfa = 0;
    Step st{f, slot_of(f), exact ? f.pc : f.pc - Traits::kCallInsnMin, regs, *out, &cfa};
    const StopReason r = step(st);
    if (method != nullptr) *method = st.method;
    return r;
  }

 private:
  /// The common step, what step() does for a frame whose rule is in the rule
  /// cache as kCfaReg (an image module's .eh_frame/.debug_frame row), applied
  /// to `regs` in place (apply_rule). Everything that can fail is checked before
  /// `regs` is written: false (`regs` unchanged, nothing counted) hands the frame
  /// to step(), which then gives the same answer it always gave.
  bool step_by_cached_rule(const Frame& cur, const ModuleSlot* slot, Regs& regs, uint64_t* cfa_out, Frame* nf) {
    if constexpr (Ops::kSigreturnBeforeCfi) return false;  // step() tries the trampoline first
    if (slot == nullptr || slot->table_generation == 0 || cur.pc == 0) return false;  // no module or no table
    const uint32_t gen = slot->table_generation;
    const uint64_t rel = (cur.lookup_prev ? cur.pc - Traits::kCallInsnMin : cur.pc) - slot->bias;
    const UnwindRule* rp = cache_.probe(rel, gen);
    if (rp == nullptr || rp->kind != UnwindRule::kCfaReg) return false;
    const UnwindRule& rule = *rp;
    if (apply_rule(rule, regs, cfa_out) != StopReason::kNone) return false;
    // The caller's entry, assuming it is in this module (most are), loads while the walk goes on.
    cache_.prefetch(regs.get(Traits::kPcReg) - Traits::kCallInsnMin - slot->bias, gen);
    const bool signal = rule.signal_frame != 0;
    nf->method = signal ? Method::kSignal : slot->table_method[rule.from_debug_frame];
    nf->lookup_prev = !signal;
    cache_.count_hit();
    return true;
  }

  /// The walk loop's common case in a tighter loop: frames whose rule is in the rule cache as
  /// kCfaReg with the CFA on sp or fp, the return address in a readable CFA slot, no signal
  /// frame, under a CFI method. Exactly what walk_physical's loop does for such a frame (same
  /// frames, stop reasons, lookups, lost registers and hit count), but with sp, fp and pc in
  /// locals (the register file is written back when the run ends); nothing is written before the
  /// return-address slot is read, the one read whose failure ends apply_rule's step. The first
  /// frame it cannot take is left, with `regs` and `slot` as the loop would have them, to the
  /// loop (false); true when the walk stopped (out->stop set). Only without keep_registers and JIT
  /// ranges (the frame flags and registers it does not produce).
  // Out of line with everything it calls inlined (the loop's calls are what it saves).
  // kPcs (walk_pcs): the frames are pcs in *ps, the current frame's state in *ps too, no Frame.
  template <bool kPcs>
  // `limit`: at most that many frames (counted as max_frames is) in this run.
  [[gnu::noinline, gnu::flatten]] bool fast_run(WalkResult* out, PcsRun* ps, const ModuleSlot*& slot, Regs& regs,
                                                size_t limit = SIZE_MAX) {
    if constexpr (Ops::kSigreturnBeforeCfi) {
      return false;  // step() tries the trampoline first
    } else {
      constexpr int kW = Traits::kAddrSize;
      constexpr int kSp = Traits::kSpReg, kFp = Traits::kFpReg;
      if (!regs.has(kSp) || !regs.has(Traits::kPcReg)) return false;
      std::vector<Frame>& frames = out->frames;
      // Frames so far and the limit, both counted from frame_base_ (walk_pcs's pcs before frames).
      const size_t max_frames = std::min<size_t>(opts_.max_frames - (kPcs ? 0 : frame_base_), limit);
      size_t count;
      uint64_t cur_pc, cur_sp;
      bool cur_prev;
      if constexpr (kPcs) {
        count = ps->n;
        cur_pc = ps->pc;
        cur_sp = ps->sp;
        cur_prev = ps->lookup_prev;
      } else {
        const Frame& cur = frames.back();
        count = frames.size();
        cur_pc = cur.pc;
        cur_sp = cur.sp;
        cur_prev = cur.lookup_prev;
      }
      uint64_t sp = regs.get(kSp), fp = regs.v[kFp], pc = regs.get(Traits::kPcReg);
      bool fp_valid = regs.has(kFp);
      uint64_t steps = 0;
      bool stopped = false;
      for (;;) {
        if (count >= max_frames || slot == nullptr || slot->table_generation == 0 || cur_pc == 0) break;
        const uint32_t gen = slot->table_generation;
        // The entry's `common` says the rule is kCfaReg, no signal frame, the return address in a
        // CFA slot, every saved register in the file (checked once, when it was inserted).
        const RuleCache::Entry* ep =
            cache_.probe_entry((cur_prev ? cur_pc - Traits::kCallInsnMin : cur_pc) - slot->bias, gen);
        if (ep == nullptr || ep->common == 0) break;
        const UnwindRule& rule = ep->rule;
        const Method method = slot->table_method[rule.from_debug_frame];
        if (method == Method::kSignal || method == Method::kFramePointer || method == Method::kScan ||
            method == Method::kPrologue)
          break;  // the loop's checks of heuristic frames
        uint64_t base;
        if (rule.cfa_reg == kSp) {
          base = sp;
        } else if (rule.cfa_reg == kFp && fp_valid) {
          base = fp;
        } else {
          break;
        }
        const uint64_t cfa = mask(base + static_cast<int64_t>(rule.cfa_off));
        if constexpr (requires { mem_.cached_host(uint64_t{}); }) {
          // The callers' slots lie above the CFA: their lines start loading now (a stack that
          // comes from memory waits on one per frame otherwise).
          if (const void* h = mem_.cached_host(cfa + 128)) __builtin_prefetch(h);
          if (const void* h = mem_.cached_host(cfa + 384)) __builtin_prefetch(h);
        }
        uint64_t ra;
        const int nsaved = rule.nsaved;
        bool slots_read = false;
        if constexpr (requires { mem_.span(uint64_t{}, size_t{}); }) {
          // Every slot the rule reads lies in span_words words from cfa + span_lo words: one bounds
          // check in the reader's current region (primed by one read when it holds another), then
          // plain loads, none of which can fail — apply_rule's answer with every slot readable.
          const uint64_t lo = cfa + static_cast<int64_t>(ep->span_lo) * kW;
          const size_t len = static_cast<size_t>(ep->span_words) * kW;
          const uint8_t* w = mask(lo) == lo ? mem_.span(lo, len) : nullptr;
          if (w == nullptr && mask(lo) == lo && arch::read_word(mem_, lo, kW, Traits::kBigEndian, &ra))
            w = mem_.span(lo, len);
          if (w != nullptr) {
            ra = slot_word(w + (rule.ra_off - ep->span_lo) * kW);
            for (int i = 0; i < nsaved; i++) {
              const uint64_t v = slot_word(w + (rule.saved_off[i] - ep->span_lo) * kW);
              if (rule.saved_reg[i] == kFp) {
                fp = v;
                fp_valid = true;
              } else {
                regs.set(rule.saved_reg[i], v);
              }
            }
            slots_read = true;
          }
        }
        if (!slots_read) {
          if (!arch::read_word(mem_, mask(cfa + static_cast<int64_t>(rule.ra_off) * kW), kW, Traits::kBigEndian, &ra))
            break;
        }
        // The ra slot was readable: from here on the step is apply_rule's (saved registers in
        // order, an unreadable slot loses its register, then ra, pc and sp), nothing falls back.
        for (int i = 0; i < nsaved && !slots_read; i++) {
          const int reg = rule.saved_reg[i];
          uint64_t v;
          const uint64_t at = mask(cfa + static_cast<int64_t>(rule.saved_off[i]) * kW);
          const bool ok = arch::read_word(mem_, at, kW, Traits::kBigEndian, &v);
          if (reg == kFp) {
            if (ok) {
              fp = v;
              fp_valid = true;
            } else if (!(fp_valid && at < sp)) {  // unreadable_slot's rule: a released slot keeps fp
              fp_valid = false;
              lost_ |= 1ull << kFp;
            }
          } else if (ok) {
            regs.set(reg, v);
          } else {
            unreadable_slot(regs, regs, true, sp, at, reg);
          }
        }
        ra = Traits::strip_return_address(ra);
        sp = cfa;
        pc = ra;
        steps++;
        const ModuleSlot* nslot = modules_.find_near(ra - Traits::kCallInsnMin, slot);
        if (ra != 0 && (cfa < cur_sp || (cfa == cur_sp && cur_prev))) {
          out->stop = StopReason::kSpNotAdvancing;
          stopped = true;
          break;
        }
        if constexpr (!kPcs) frames.back().cfa = cfa;
        if (ra == 0) {
          out->stop = StopReason::kEndOfStack;
          stopped = true;
          break;
        }
        slot = nslot;
        if constexpr (kPcs) {
          ps->pcs[count] = ra;
          ps->method = method;
        } else {
          Frame nf;
          nf.method = method;
          nf.lookup_prev = true;
          nf.pc = ra;
          nf.sp = cfa;
          nf.module_index = nslot ? nslot->snapshot_index : -1;
          nf.domain = domain_;
          frames.push_back(nf);
        }
        count++;
        cur_pc = ra;
        cur_sp = cfa;
        cur_prev = true;
      }
      if constexpr (kPcs) {
        ps->n = count;
        ps->pc = cur_pc;
        ps->sp = cur_sp;
        ps->lookup_prev = cur_prev;
      }
      if (steps != 0) write_back(regs, pc, sp, fp, fp_valid, steps);
      return stopped;
    }
  }

  /// walk_pcs's common frames in the fewest instructions: fast_run<true>'s steps for the rules whose
  /// cache entry has a pcs form (RuleCache::Entry::pcs: the CFA on sp or fp, at most kPcsOther other
  /// saved registers) under a method fast_run takes (ModuleSlot::plain_methods), every slot in the
  /// reader's current window; and the end of the stack where the cached rule says so (what the
  /// ladder's table rung answers for that frame, after the coroutine-entry rung). Caller frames
  /// only (the current frame's pc a return address), disjoint module tables only. A step looks
  /// its rule up by the absolute pc in the cache's quick table (RuleCache::QuickEntry, filled by
  /// quick_entry from the frame's module and the rule cache): no module, no generation, no method
  /// per frame. Registers in locals, no Frame. The first frame it cannot take is left to
  /// fast_run<true> (false) with `regs`, `slot` and *ps as fast_run<true> would have them; true
  /// when the walk stopped. Little-endian 64-bit targets read through a window (a snapshot) only.
  /// The other saved registers are needed only by a frame after the run: a run that stops never
  /// reads them, one that does not replays its steps for them (apply_saves).
  static constexpr bool kPcsRun = !Ops::kSigreturnBeforeCfi && Traits::kAddrSize == 8 && !Traits::kBigEndian &&
                                   requires(Mem& m) {
                                     m.window();
                                     m.seek(uint64_t{0});
                                   };
  [[gnu::noinline]] bool pcs_run(WalkResult* out, PcsRun* ps, const ModuleSlot*& slot_io, Regs& regs) {
    if constexpr (!kPcsRun) {
      return false;
    } else {
      constexpr int kSp = Traits::kSpReg, kFp = Traits::kFpReg;
      QuickRun r;
      r.quick = ps->lookup_prev && modules_.disjoint() ? cache_.quick_begin(modules_.stamp()) : nullptr;
      if (!regs.has(kSp) || !regs.has(Traits::kPcReg) || r.quick == nullptr) {
        // walk_pcs left a return address's module to this run.
        if (slot_io == nullptr && ps->lookup_prev) slot_io = modules_.find(ps->pc - Traits::kCallInsnMin);
        return false;
      }
      r.stamp = cache_.quick_stamp();
      uint64_t* const first = ps->pcs + ps->n;
      r.p = first;
      r.end = ps->pcs + opts_.max_frames;
      r.pc = ps->pc;  // the current frame's
      r.sp = ps->sp;
      r.fp = regs.v[kFp];
      r.fp_bad = regs.has(kFp) ? 0 : RuleCache::kQuickFp;  // a CFA on fp cannot be taken
      mem_.seek(r.sp);  // the stack's region, so that the first step finds its slots in the window
      r.set_window(mem_.window());
      QuickRun seg = r;  // where the steps whose saves are not applied yet start
      const ModuleSlot* hint = slot_io;  // the module of the last quick_entry
      uint64_t restored = 0;  // valid bits of the other saved registers written into regs
      bool stopped = false, stepped = false;  // stepped: the walk stopped after a step (counted)
      for (bool more = true; more;) {
        switch (quick_steps(r)) {
          case QuickExit::kLimit:
            more = false;
            break;
          case QuickExit::kMiss: {
            // The steps are replayed from the quick table: their saves are applied before an entry
            // of it is replaced.
            apply_saves(seg, r.p, regs, restored);
            seg = r;
            more = quick_entry(&r.quick[RuleCache::quick_slot(r.pc)], r.pc, r.stamp, hint) != nullptr;
            break;
          }
          case QuickExit::kFlags:
            if (r.q->flags & RuleCache::kQuickEnd) {
              cache_.count_hit();  // the table rung's lookup
              out->stop = StopReason::kEndOfStack;
              stopped = true;
            }
            more = false;
            break;
          case QuickExit::kWindow: {
            // Another region: the reader's window moves there (the steps before read this one's).
            apply_saves(seg, r.p, regs, restored);
            more = mem_.seek(r.lo);
            if (more) {
              r.set_window(mem_.window());
              more = r.lo - r.win_addr < r.win_size && r.len <= r.win_size - (r.lo - r.win_addr);
            }
            seg = r;
            break;
          }
          case QuickExit::kRaZero:
            out->stop = StopReason::kEndOfStack;
            stopped = stepped = true;
            more = false;
            break;
          case QuickExit::kSpNotAdvancing:
            out->stop = StopReason::kSpNotAdvancing;
            stopped = stepped = true;
            more = false;
            break;
        }
      }
      const uint64_t steps = static_cast<uint64_t>(r.p - first) + (stepped ? 1 : 0);
      if (!stopped) apply_saves(seg, r.p, regs, restored);
      regs.valid |= restored;
      if (steps != 0) write_back(regs, r.pc, r.sp, r.fp, r.fp_bad == 0, steps);
      // The module of the frame handed on (walk_pcs leaves the first frame's to this run).
      if (!stopped && (steps != 0 || slot_io == nullptr)) slot_io = modules_.find_near(r.pc - Traits::kCallInsnMin, hint);
      ps->n = static_cast<size_t>(r.p - ps->pcs);
      ps->pc = r.pc;
      ps->sp = r.sp;
      return stopped;
    }
  }

  /// walk_pcs's whole walk from `initial` (its pc a return address) when every frame's rule is in
  /// the quick table or can be put there, and the walk stops in its steps (the end of the stack, a
  /// return address 0, the stack pointer not advancing): true with the pcs' count in *n, the stop
  /// reason and the hits as walk_pcs would give them. False when it does not (a frame pcs_run
  /// cannot take, the frame limit): walk_pcs then walks from the start, and nothing of this try
  /// is kept but the quick table's entries, which its own run would fill the same. No registers
  /// but pc, sp and fp, no module per frame, no saved registers (a walk that stops never reads them).
  bool quick_walk(const Regs& initial, uint64_t* pcs, WalkResult* out, size_t* n) {
    constexpr int kSp = Traits::kSpReg, kFp = Traits::kFpReg, kPc = Traits::kPcReg;
    if (!initial.has(kSp) || !initial.has(kPc) || opts_.max_frames == 0 || !modules_.disjoint()) return false;
    QuickRun r;
    r.quick = cache_.quick_begin(modules_.stamp());
    if (r.quick == nullptr) return false;
    r.stamp = cache_.quick_stamp();
    r.pc = initial.v[kPc];
    r.sp = initial.v[kSp];
    r.fp = initial.v[kFp];
    r.fp_bad = initial.has(kFp) ? 0 : RuleCache::kQuickFp;
    r.p = pcs + 1;
    r.end = pcs + opts_.max_frames;
    mem_.seek(r.sp);
    r.set_window(mem_.window());
    pcs[0] = r.pc;
    const ModuleSlot* hint = nullptr;
    StopReason stop = StopReason::kNone;
    uint64_t hits = 0;
    while (stop == StopReason::kNone) {
      switch (quick_steps(r)) {
        case QuickExit::kMiss:
          if (quick_entry(&r.quick[RuleCache::quick_slot(r.pc)], r.pc, r.stamp, hint) == nullptr) return false;
          break;
        case QuickExit::kWindow:
          if (!mem_.seek(r.lo)) return false;
          r.set_window(mem_.window());
          if (!(r.lo - r.win_addr < r.win_size && r.len <= r.win_size - (r.lo - r.win_addr))) return false;
          break;
        case QuickExit::kFlags:
          if (!(r.q->flags & RuleCache::kQuickEnd)) return false;
          stop = StopReason::kEndOfStack;
          hits = 1;  // the table rung's lookup
          break;
        case QuickExit::kRaZero:
          stop = StopReason::kEndOfStack;
          hits = 1;  // the step that read it
          break;
        case QuickExit::kSpNotAdvancing:
          stop = StopReason::kSpNotAdvancing;
          hits = 1;
          break;
        case QuickExit::kLimit:
          return false;
      }
    }
    *n = static_cast<size_t>(r.p - pcs);
    cache_.count_hits(hits + (*n - 1));
    out->links.clear();
    out->frames.clear();
    out->regs.clear();
    out->stop = stop;
    return true;
  }

  /// Why quick_steps returned: the frame limit; the current pc not in the quick table; its entry
  /// the end of the stack or its CFA on fp without fp (QuickRun::q); its slots outside the window
  /// (QuickRun::lo, len); a step stopped the walk (return address 0, the stack pointer not
  /// advancing: pc and sp are the caller's, the pc not written).
  enum class QuickExit : uint8_t { kLimit, kMiss, kFlags, kWindow, kRaZero, kSpNotAdvancing };
  /// The largest span of slots a quick entry has (QuickEntry::span_words is 8 bits), in bytes.
  static constexpr uint64_t kQuickMaxSpan = 255 * 8;
  /// pcs_run's state between quick_steps calls.
  struct QuickRun {
    RuleCache::QuickEntry* quick;
    uint32_t stamp;
    uint8_t fp_bad;  ///< kQuickFp while fp is unknown
    uint64_t pc, sp, fp;
    uint64_t* p;  ///< where the next caller's pc goes
    uint64_t* end;
    /// The reader's window; delta: host address - target address; safe: a span starting less
    /// than `safe` bytes into the window lies in it, whatever its length (0: check each exactly).
    uint64_t win_addr, win_size, safe, delta;
    const RuleCache::QuickEntry* q;  ///< kFlags, kWindow: the current frame's entry
    uint64_t lo, len;                ///< kWindow: the slots' span
    template <typename W>
    void set_window(const W& win) {
      win_addr = win.addr;
      win_size = win.size;
      safe = win.size > kQuickMaxSpan ? win.size - kQuickMaxSpan : 0;
      delta = reinterpret_cast<uintptr_t>(win.data) - win.addr;
    }
  };
  /// pcs_run's steps while every frame's rule is in the quick table and its slots in the window:
  /// no call, so that the walk's state stays in registers. Writes the pcs at r.p.
  [[gnu::noinline]] static QuickExit quick_steps(QuickRun& r) {
    const RuleCache::QuickEntry* const quick = r.quick;
    const uint32_t stamp = r.stamp;
    uint8_t leave = RuleCache::kQuickEnd | r.fp_bad;  // the flags that end the run
    uint64_t pc = r.pc, sp = r.sp, fp = r.fp;
    uint64_t* p = r.p;
    uint64_t* const end = r.end;
    const uint64_t win_addr = r.win_addr, safe = r.safe, delta = r.delta;
    QuickExit why;
    for (;;) {
      if (p >= end) {
        why = QuickExit::kLimit;
        break;
      }
      const RuleCache::QuickEntry* const q = &quick[RuleCache::quick_slot(pc)];
      if (q->pc != pc || q->stamp != stamp) {
        why = QuickExit::kMiss;
        break;
      }
      const uint8_t flags = q->flags;
      if (flags & leave) {
        why = QuickExit::kFlags;
        r.q = q;
        break;
      }
      const uint64_t cfa = ((flags & RuleCache::kQuickFp) ? fp : sp) + static_cast<int64_t>(q->cfa_off);
      // The slots' span inside the window: one compare away from the window's end, else exactly
      // (off the return address's dependency chain: the return address is read at its host
      // address, cfa + delta, where the check passed).
      const uint64_t lo = cfa + static_cast<int64_t>(q->span_lo) * 8;
      if (lo - win_addr >= safe) [[unlikely]] {
        const uint64_t win_size = r.win_size;
        const size_t len = static_cast<size_t>(q->span_words) * 8;
        if (!(lo - win_addr < win_size && len <= win_size - (lo - win_addr))) {
          why = QuickExit::kWindow;
          r.q = q;
          r.lo = lo;
          r.len = len;
          break;
        }
      }
      const uint8_t* const c = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(cfa + delta));
      const uint64_t ra = Traits::strip_return_address(slot_word(c + static_cast<int64_t>(q->ra_word) * 8));
      const uint64_t saved_fp = slot_word(c + static_cast<int64_t>(q->fp_word) * 8);  // in the span either way
      if (flags & RuleCache::kQuickFpSaved) {
        fp = saved_fp;
        leave = RuleCache::kQuickEnd;
      }
      // fast_run's checks with the current frame's pc a return address.
      const uint64_t old_sp = sp;
      pc = ra;
      sp = cfa;
      if (ra == 0) {
        why = QuickExit::kRaZero;
        break;
      }
      if (cfa <= old_sp) {
        why = QuickExit::kSpNotAdvancing;
        break;
      }
      *p++ = ra;
    }
    r.fp_bad = leave & RuleCache::kQuickFp;
    r.pc = pc;
    r.sp = sp;
    r.fp = fp;
    r.p = p;
    return why;
  }

  /// The other saved registers of the steps from `seg` (pcs_run's state then) to the pcs ending at
  /// `p` into `regs` (their valid bits into `restored`): what fast_run's steps would have written,
  /// each register from the newest step that saved it. The steps are taken again from the same
  /// quick-table entries (unchanged since: pcs_run applies them before an entry is filled) over the
  /// same window (before it moves); their return addresses are the pcs written.
  static void apply_saves(const QuickRun& seg, const uint64_t* p, Regs& regs, uint64_t& restored) {
    uint64_t pc = seg.pc, sp = seg.sp, fp = seg.fp;
    for (const uint64_t* at = seg.p; at < p; at++) {
      const RuleCache::QuickEntry* const q = &seg.quick[RuleCache::quick_slot(pc)];
      const uint8_t flags = q->flags;
      const uint64_t cfa = ((flags & RuleCache::kQuickFp) ? fp : sp) + static_cast<int64_t>(q->cfa_off);
      const uint8_t* const c = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(cfa + seg.delta));
      if (flags & RuleCache::kQuickOther) {
        const uint8_t* const w = c + static_cast<int64_t>(q->span_lo) * 8;
        int i = 0;  // the slots are in register order
        for (uint32_t m = q->other_mask; m != 0; m &= m - 1) regs.v[__builtin_ctz(m)] = slot_word(w + q->other_rel[i++] * 8);
        restored |= q->other_mask;
      }
      if (flags & RuleCache::kQuickFpSaved) fp = slot_word(c + static_cast<int64_t>(q->fp_word) * 8);
      pc = *at;
      sp = cfa;
    }
  }

  /// pcs_run's rule for the return address `pc` into `q` (its slot of the quick table, stamp
  /// `stamp`) from the frame's module (found near `hint`, which becomes it) and the rule cache; or
  /// nullptr when pcs_run cannot take the frame (no module or unwind table, no cached rule, a rule
  /// without a pcs form, a method fast_run does not take).
  [[gnu::noinline]] const RuleCache::QuickEntry* quick_entry(RuleCache::QuickEntry* q, uint64_t pc, uint32_t stamp,
                                                            const ModuleSlot*& hint) {
    const ModuleSlot* slot = modules_.find_near(pc - Traits::kCallInsnMin, hint);
    if (slot == nullptr) return nullptr;
    hint = slot;
    const uint32_t gen = slot->table_generation;
    if (gen == 0) return nullptr;
    const RuleCache::Entry* e = cache_.probe_entry(pc - Traits::kCallInsnMin - slot->bias, gen);
    if (e == nullptr) return nullptr;
    if (e->pcs == 0) {
      if (e->rule.kind != UnwindRule::kEndOfStack || coroutine_entry_at(*slot, pc)) return nullptr;
      RuleCache::quick_fill_end(q, pc, stamp);
      return q;
    }
    if (!((slot->plain_methods >> e->rule.from_debug_frame) & 1)) return nullptr;
    return RuleCache::quick_fill(q, pc, stamp, *e) ? q : nullptr;
  }

  /// The coroutine-entry rung's question for a caller frame at `pc` in `slot` (at_coroutine_entry).
  bool coroutine_entry_at(const ModuleSlot& slot, uint64_t pc) {
    if constexpr (Ops::kCoroutineEntryLen == 0) {
      return false;
    } else {
      if (slot.module == nullptr) return false;
      uint8_t code[Ops::kCoroutineEntryLen];
      return module_code(slot, pc, code, sizeof(code)) && Ops::coroutine_entry(code);
    }
  }

  /// The end of a run of `steps` common steps (fast_run, pcs_run): the registers kept in locals
  /// back into the register file, the steps counted as rule-cache hits.
  void write_back(Regs& regs, uint64_t pc, uint64_t sp, uint64_t fp, bool fp_valid, uint64_t steps) {
    regs.set(Traits::kRaReg, pc);
    regs.set(Traits::kPcReg, pc);
    regs.set(Traits::kSpReg, sp);
    if (fp_valid) regs.set(Traits::kFpReg, fp);
    else regs.clear(Traits::kFpReg);
    cache_.count_hits(steps);
  }

  /// A target word at `p` in this process (a slot fast_run's span check covered).
  static uint64_t slot_word(const uint8_t* p) {
    if constexpr (Traits::kAddrSize == 8 && !Traits::kBigEndian) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    } else {
      return arch::load_word(p, Traits::kAddrSize, Traits::kBigEndian);
    }
  }

  void keep_registers(const Regs& regs, uint64_t mask, WalkResult* out) const {
    if (!opts_.keep_registers) return;
    FrameRegs fr;
    static_assert(Traits::kNumRegs <= FrameRegs::kMax, "FrameRegs holds every register");
    fr.known = regs.valid & mask;
    for (int r = 0; r < Traits::kNumRegs; r++)
      if ((fr.known >> r) & 1) fr.v[r] = regs.v[r];
    out->regs.push_back(fr);
  }

  /// `pc` lies in JIT code named by the walk's perf map.
  bool in_jit(uint64_t pc) const {
    const auto* r = opts_.jit_ranges;
    if (r == nullptr || r->empty()) return false;
    auto it = std::upper_bound(r->begin(), r->end(), pc,
                               [](uint64_t a, const std::pair<uint64_t, uint64_t>& e) { return a < e.first; });
    return it != r->begin() && pc < std::prev(it)->second;
  }

  /// The module holding the frame's lookup pc (pc - 1 for caller frames).
  const ModuleSlot* slot_of(const Frame& f) const {
    return modules_.find(f.lookup_prev ? f.pc - Traits::kCallInsnMin : f.pc);
  }

  /// One step's question and answer, passed down the ladder: the frame, its module slot and
  /// registers in; the caller's registers, cfa, method and lookup mode out on a find, and
  /// what the table rung learned for the rungs below it.
  struct Step {
    const Frame& cur;
    const ModuleSlot* slot;
    uint64_t lookup_pc;
    const Regs& regs;
    Regs& next;
    uint64_t* cfa;
    /// kFound: how the caller was found and whether its lookups use pc - 1.
    Method method = Method::kNone;
    bool lookup_prev = false;
    StopReason stop = StopReason::kNone;  ///< kStop: why
    /// Why the table rung found nothing (kNoUnwindInfo or kBadCfi): the step's answer when no
    /// later rung finds the caller.
    StopReason table_reason = StopReason::kNoUnwindInfo;
    /// The table's row needs an interpreter the source does not have (a bundle row the builder
    /// could not compile): the frame is flagged SPROV_FRAME_CFI_NOT_IN_BUNDLE ...
    bool row_not_in_table = false;
    /// ... and that row's CIE marks a signal frame (kSignalRow).
    bool row_not_in_table_signal = false;
  };
  enum class Verdict : uint8_t { kPass, kFound, kStop };

  static Verdict found(Step& s, Method m, bool lookup_prev) {
    s.method = m;
    s.lookup_prev = lookup_prev;
    return Verdict::kFound;
  }
  static Verdict stopped(Step& s, StopReason r) {
    s.stop = r;
    return Verdict::kStop;
  }

  /// The architecture's rungs in order (ladder.hpp).
  static constexpr Ladder kLadder = ladder_of<Ops>();

  /// One step out of `cur`: the ladder's rungs in the architecture's order, each tried until one
  /// finds the caller or stops the walk. Fills next regs, *cfa and the new frame's method and
  /// lookup mode; returns kNone to continue or the reason to stop.
  StopReason step(Step& s) {
    Verdict v = Verdict::kPass;
    // Unrolled at compile time: only the rungs on this architecture's ladder are instantiated.
    [&]<size_t... I>(std::index_sequence<I...>) {
      (void)(((v = climb<kLadder.rungs[I]>(s)) == Verdict::kPass) && ...);  // stops at the first rung that decides
    }(std::make_index_sequence<kLadder.size>{});
    if (v == Verdict::kFound) return StopReason::kNone;
    if (v == Verdict::kStop) return s.stop;
    return s.slot == nullptr ? StopReason::kInvalidPc : s.table_reason;
  }

  template <Rung R>
  Verdict climb(Step& s) {
    if constexpr (R == Rung::kCoroutineEntry) {
      if (at_coroutine_entry(s)) return stopped(s, StopReason::kCoroutineEntry);
    } else if constexpr (R == Rung::kBadPc) {
      return rung_bad_pc(s);
    } else if constexpr (R == Rung::kSigreturnFirst) {
      if (s.slot != nullptr && step_by_sigreturn(s.slot, s.cur.pc, s.regs, s.next, s.cfa))
        return found(s, Method::kSignal, false);
    } else if constexpr (R == Rung::kTable) {
      return rung_table(s);
    } else if constexpr (R == Rung::kSigreturn) {
      if (step_by_sigreturn(s.slot, s.cur.pc, s.regs, s.next, s.cfa)) return found(s, Method::kSignal, false);
    } else if constexpr (R == Rung::kSignalRow) {
      if (s.row_not_in_table_signal && step_by_bundle_signal_row(s.regs, s.next, s.cfa))
        return found(s, Method::kSignal, false);
    } else if constexpr (R == Rung::kGoPcsp) {
      const StopReason g = step_by_go_pcsp(s.slot, s.lookup_pc, s.regs, s.next, s.cfa);
      if (g == StopReason::kNone) return found(s, Method::kRuntime, true);
      if (g == StopReason::kEndOfStack) return stopped(s, g);
    } else if constexpr (R == Rung::kFramePointer) {
      if (opts_.use_frame_pointer && step_by_frame_pointer(s.regs, s.next, s.cfa))
        return found(s, Method::kFramePointer, true);
    } else if constexpr (R == Rung::kPrologue) {
      if (step_by_prologue(s.slot, !s.cur.lookup_prev, s.regs, s.next, s.cfa)) return found(s, Method::kPrologue, true);
    } else if constexpr (R == Rung::kScan) {
      if (opts_.allow_scan && step_by_scan(s.regs, s.next, s.cfa)) return found(s, Method::kScan, true);
    }
    return Verdict::kPass;
  }

  /// The walk reached a coroutine's entry (the last frame, registers `regs`). Records where
  /// makecontext's uc_link sends the coroutine when its function returns (an annotation, never a
  /// frame); then, when the entry's frame lies in a stack the program registered with a resumer,
  /// continues at the registers the resumer's swapcontext saved: `regs` and `slot` become the
  /// resumer's, its frame (method async_boundary, domain async) is pushed, and true is returned.
  /// Bounded by kMaxAsyncHops crossings per walk.
  bool cross_coroutine_entry(WalkResult* out, Regs& regs, const ModuleSlot*& slot) {
    if constexpr (!Ops::kUcontextResume) {
      return false;
    } else {
      const Frame entry = out->frames.back();
      CoroutineLink l;
      if (out->links.size() < out->links.capacity() && Ops::coroutine_uc_link(regs, entry.sp, mem_, &l.slot, &l.context)) {
        l.frame = static_cast<uint32_t>(frame_base_ + out->frames.size() - 1);
        l.has_regs = l.context != 0 && read_word(l.context + Ops::kUcontextPc, &l.pc) &&
                     read_word(l.context + Ops::kUcontextSp, &l.sp);
        if (!l.has_regs) l.pc = l.sp = 0;
        out->links.push_back(l);
      }
      const memory::SnapshotAsync* a = opts_.async;
      if (a == nullptr || hops_ >= kMaxAsyncHops) return false;
      const memory::SnapshotAsync::Stack* st = a->stack_of(entry.sp);
      if (st == nullptr || st->resumer == 0) return false;
      Regs next;
      if (!Ops::resume_regs(mem_, st->resumer, next)) return false;
      Frame nf;
      nf.pc = next.get(Traits::kPcReg);
      nf.sp = next.get(Traits::kSpReg);
      nf.method = Method::kAsyncBoundary;
      nf.lookup_prev = true;  // swapcontext's return address
      nf.domain = Domain::kAsync;
      const ModuleSlot* nslot = modules_.find(nf.pc - Traits::kCallInsnMin);
      if (nslot == nullptr) return false;  // a saved pc in no module is not followed
      nf.module_index = nslot->snapshot_index;
      hops_++;
      lost_ = 0;  // registers lost before the boundary say nothing about the resumer's
      domain_ = Domain::kAsync;
      out->frames.push_back(nf);
      regs = next;
      slot = nslot;
      return true;
    }
  }

  /// A word of the target: a little-endian u64 (x86_64, arm64), or a u32 in the target's byte
  /// order (mips32).
  bool read_word(uint64_t addr, uint64_t* v) {
    if constexpr (Traits::kAddrSize == 8) {
      return addr + 8 > addr && mem_.read(addr, v, 8);
    } else {
      uint8_t b[4];
      if (addr + 4 <= addr || !mem_.read(addr, b, 4)) return false;
      *v = arch::load_word(b, 4, Traits::kBigEndian);
      return true;
    }
  }

  /// Splices the awaiter frames of the thread's async stack roots (folly's AsyncStackRoot /
  /// AsyncStackFrame shape, struct sprov_async_root) into the physical walk: for each root, from
  /// the current one outward through next_root, the chain from top_frame (one frame per record's
  /// return address) goes right before the physical frame whose stack range [sp, cfa) holds the
  /// root's stack_frame_ptr (the frame that installed the root: an event loop), as folly's
  /// getAsyncStackTraceSafe interleaves them. A root whose frame the walk did not reach ends the
  /// splicing. Bounded by kMaxAsyncHops roots and max_frames frames; every record read is checked.
  void splice_awaiters(WalkResult* out) {
    if constexpr (Traits::kAddrSize != 8) return;  // the records of 64-bit targets only (x86_64, arm64)
    std::vector<Frame>& frames = out->frames;
    uint64_t root = opts_.async->root;
    size_t from = 0;
    for (size_t hop = 0; root != 0 && hop < kMaxAsyncHops; hop++) {
      uint64_t r[3];  // top_frame, next_root, stack_frame_ptr (offsets 0, 8, 16)
      if (!read_word(root, &r[0]) || !read_word(root + 8, &r[1]) || !read_word(root + 16, &r[2])) return;
      size_t at = frames.size();
      for (size_t k = from; k < frames.size(); k++) {
        const Frame& f = frames[k];
        if (f.flags & Frame::kFlagAsyncAwaiter) continue;
        const uint64_t hi = f.cfa != 0 ? f.cfa : k + 1 < frames.size() ? frames[k + 1].sp : 0;
        if (r[2] >= f.sp && r[2] < hi) {
          at = k;
          break;
        }
      }
      if (r[2] == 0 || at == frames.size()) return;
      uint64_t rec = r[0];
      for (size_t n = 0; rec != 0 && n < opts_.max_frames && frames.size() < opts_.max_frames; n++) {
        uint64_t parent = 0, ra = 0;  // parent (offset 0), return_address (offset 8)
        if (!read_word(rec, &parent) || !read_word(rec + 8, &ra)) break;
        if (ra != 0) {
          Frame af;
          af.pc = ra;
          af.method = Method::kAsyncBoundary;
          af.flags = Frame::kFlagAsyncAwaiter;
          af.lookup_prev = true;
          af.domain = Domain::kAsync;
          const ModuleSlot* s = modules_.find(ra - Traits::kCallInsnMin);
          af.module_index = s ? s->snapshot_index : -1;
          frames.insert(frames.begin() + static_cast<std::ptrdiff_t>(at), af);  // within the reserved capacity
          for (CoroutineLink& l : out->links)
            if (l.frame >= at) l.frame++;
          at++;
        }
        rec = parent;
      }
      from = at + 1;
      root = r[1];
    }
  }

  /// A caller frame whose return address is a coroutine's entry trampoline (glibc's
  /// __start_context, recognised by its code at the return address itself, not pc - 1): the
  /// coroutine's stack ends; what follows on the stack is makecontext's argument area, not a
  /// caller. glibc's FDE for it marks the return address undefined, so its rule never takes the
  /// cached common step and the ladder always reaches this rung.
  bool at_coroutine_entry(const Step& s) {
    return s.cur.lookup_prev && s.slot != nullptr && coroutine_entry_at(*s.slot, s.cur.pc);
  }

  /// An exact pc (frame 0, or where a signal hit) that is 0 or in no module: a call through a
  /// bad pointer. A sigreturn trampoline outside the modules (qemu-user's sigtramp page) comes
  /// first; then the return address the call left. Crash reporters must not lose the caller.
  Verdict rung_bad_pc(Step& s) {
    const Frame& cur = s.cur;
    if (cur.lookup_prev || !(cur.pc == 0 || s.slot == nullptr) || in_jit(cur.pc)) return Verdict::kPass;
    if (cur.pc != 0 && step_by_sigreturn(s.slot, cur.pc, s.regs, s.next, s.cfa)) return found(s, Method::kSignal, false);
    if (step_by_bad_pc(s.regs, s.next, s.cfa)) return found(s, Method::kBadPcReturn, true);
    return cur.pc == 0 ? stopped(s, StopReason::kInvalidPc) : Verdict::kPass;
  }

  /// The table rung: the module's unwind source (LoadedModule::table()) for the module-relative
  /// lookup pc, through the rule cache (a miss asks the source once and keeps its answer). A rule
  /// the compact form cannot hold goes to the source's interpreter rows (DWARF CFI); a source
  /// without them (bundle rows) leaves the frame to the next rungs, flagged.
  Verdict rung_table(Step& s) {
    if (s.slot == nullptr || s.slot->module == nullptr || s.slot->module->table() == nullptr) return Verdict::kPass;
    const LoadedModule& mod = *s.slot->module;
    const UnwindSource& src = *mod.table();
    const uint64_t rel = s.lookup_pc - s.slot->bias;
    const uint32_t gen = mod.generation();
    const RuleQuery q{kRowParams, opts_.use_debug_frame, opts_.may_allocate, !s.cur.lookup_prev};
    const UnwindRule* cached = cache_.find(rel, gen);
    UnwindRule rule;
    if (cached != nullptr) {
      rule = *cached;
    } else {
      const RuleLookup l = src.lookup(rel, q);
      rule = l.rule;
      if (l.cache) cache_.insert(rel, gen, rule, Traits::kNumRegs, Traits::kSpReg, Traits::kFpReg);
    }
    if (rule.kind == UnwindRule::kFull || rule.kind == UnwindRule::kInvalid) {
      if (!src.has_full_rows()) {
        if (rule.kind == UnwindRule::kInvalid) return table_verdict(s, StopReason::kBadCfi);
        s.row_not_in_table = true;
        s.row_not_in_table_signal = rule.signal_frame != 0;
        return table_verdict(s, StopReason::kNoUnwindInfo);
      }
      // The row needs the interpreter (kFull), or the interpreter says why it is rejected (kInvalid).
      const bool uncompiled_miss = cached == nullptr && !q.may_allocate;
      FullRow& full = full_row_scratch();
      const dwarf::CfiStatus st = src.full_row(rel, q, &full);
      if (st != dwarf::CfiStatus::kOk) {
        // "No entry" is cached only when .debug_frame was searched too: a later walk of this
        // unwinder that searches it must not find the gap cached.
        if (uncompiled_miss && q.use_debug_frame && st == dwarf::CfiStatus::kNotFound) {
          UnwindRule none;
          none.kind = UnwindRule::kNoInfo;
          cache_.insert(rel, gen, none, Traits::kNumRegs, Traits::kSpReg, Traits::kFpReg);
        }
        return table_verdict(s, st == dwarf::CfiStatus::kNotFound ? StopReason::kNoUnwindInfo : StopReason::kBadCfi);
      }
      if (uncompiled_miss) {
        // What the compiled row would hold (compile_fde_rows), for the next walk through this pc.
        UnwindRule r = translate_row(full.row, kRowParams.addr_size, kRowParams.num_regs, kRowParams.callee_saved);
        r.from_debug_frame = full.from_debug_frame ? 1 : 0;
        cache_.insert(rel, gen, r, Traits::kNumRegs, Traits::kSpReg, Traits::kFpReg);
      }
      s.next = s.regs;
      const StopReason r = apply_row(*full.section, s.regs, s.next, s.cfa);
      if (r != StopReason::kNone) return table_verdict(s, r);
      const bool signal = full.row.signal_frame;
      return found(s, signal ? Method::kSignal : s.slot->table_method[full.from_debug_frame ? 1 : 0], !signal);
    }
    if (const StopReason r = rule_stop(rule); r != StopReason::kNone) return table_verdict(s, r);
    s.next = s.regs;
    if (const StopReason r = apply_rule(rule, s.next, s.cfa); r != StopReason::kNone) return table_verdict(s, r);
    const bool signal = rule.signal_frame != 0;
    return found(s, signal ? Method::kSignal : s.slot->table_method[rule.from_debug_frame], !signal);
  }

  /// The table rung's answer when it found no caller: the end of the stack and unreadable memory
  /// stop the walk; no or bad unwind information passes to the next rungs.
  static Verdict table_verdict(Step& s, StopReason r) {
    if (r == StopReason::kEndOfStack || r == StopReason::kMemoryUnreadable) return stopped(s, r);
    s.table_reason = r;
    return Verdict::kPass;
  }

  /// What a looked-up compact rule means for the table rung: kNone to apply it (kCfaReg), else why
  /// the rung has no answer (kFull is the caller's to handle first).
  static StopReason rule_stop(const UnwindRule& rule) {
    switch (rule.kind) {
      case UnwindRule::kCfaReg:
        return StopReason::kNone;
      case UnwindRule::kNoInfo:
        return StopReason::kNoUnwindInfo;
      case UnwindRule::kEndOfStack:
        return StopReason::kEndOfStack;
      default:
        return StopReason::kBadCfi;
    }
  }

  /// A bundle row that needs the interpreter but whose CIE marks a signal frame
  /// ('S': the sigreturn trampoline, e.g. x86_64 __restore_rt) when the code
  /// bytes to recognise it are not at hand (a core without the module's text):
  /// the kernel's signal frame is restored directly. Only where the
  /// architecture has one trampoline layout (x86_64, arm64); mips32 has two.
  bool step_by_bundle_signal_row(const Regs& regs, Regs& next, uint64_t* cfa) {
    static_assert(Ops::kSignalRowWithoutCode, "on the ladder only where the architecture has one trampoline layout");
    next = regs;
    return Ops::signal_step(next, mem_, 1, cfa) == arch::StepOutcome::kOk;
  }

  /// Code bytes at absolute `pc` in `slot`'s module: from its file, or for a
  /// module without one (bundle-backed) from the target's memory, when dumped.
  bool module_code(const ModuleSlot& slot, uint64_t pc, void* buf, size_t len) {
    if (slot.module->has_code()) return slot.module->read_code(pc - slot.bias, buf, len);
    return mem_.read(pc, buf, len);
  }

  /// cfa = reg + off; saved registers and ra loaded from cfa-relative slots,
  /// applied to `regs` in place. Everything that can fail is checked before
  /// `regs` is written, so a failure leaves it as it was (the next rung reads it).
  StopReason apply_rule(const UnwindRule& rule, Regs& regs, uint64_t* cfa_out) {
    if (!regs.has(rule.cfa_reg)) return missing_reg(rule.cfa_reg);
    const uint64_t cfa = mask(regs.get(rule.cfa_reg) + static_cast<int64_t>(rule.cfa_off));
    constexpr int kW = Traits::kAddrSize;
    auto slot_addr = [&](int8_t words) { return mask(cfa + static_cast<int64_t>(words) * kW); };
    uint64_t ra;
    if (rule.ra_kind == UnwindRule::kRaAtCfa) {
      if (!arch::read_word(mem_, slot_addr(rule.ra_off), kW, Traits::kBigEndian, &ra))
        return StopReason::kMemoryUnreadable;
    } else if (rule.ra_reg == Traits::kPcReg || !regs.has(rule.ra_reg)) {
      // Saved registers whose slots are unreadable count as lost, as if restored
      // (missing_reg reads that; a later rung may too).
      for (int i = 0; i < rule.nsaved; i++) {
        uint64_t v;
        if (!arch::read_word(mem_, slot_addr(rule.saved_off[i]), kW, Traits::kBigEndian, &v) &&
            rule.saved_reg[i] < 64)
          lost_ |= 1ull << rule.saved_reg[i];
      }
      // x86_64's return-address column is the pc itself: "same value" would
      // make the caller this very pc. There is no caller; the walk ends. A CIE
      // that gives the column no rule at all is malformed.
      if (rule.ra_reg == Traits::kPcReg)
        return rule.ra_kind == UnwindRule::kRaSameValue ? StopReason::kEndOfStack : StopReason::kBadCfi;
      return missing_reg(rule.ra_reg);
    } else {
      ra = regs.get(rule.ra_reg);  // before the saved registers overwrite it
    }
    const bool sp_valid = regs.has(Traits::kSpReg);
    const uint64_t sp = sp_valid ? regs.get(Traits::kSpReg) : 0;
    for (int i = 0; i < rule.nsaved; i++) {
      uint64_t v;
      const uint64_t at = slot_addr(rule.saved_off[i]);
      if (arch::read_word(mem_, at, kW, Traits::kBigEndian, &v)) {
        regs.set(rule.saved_reg[i], v);
      } else {
        unreadable_slot(regs, regs, sp_valid, sp, at, rule.saved_reg[i]);  // else unknown, not fatal
      }
    }
    ra = Traits::strip_return_address(ra);
    regs.set(Traits::kRaReg, ra);
    regs.set(Traits::kPcReg, ra);
    regs.set(Traits::kSpReg, cfa);
    *cfa_out = cfa;
    return StopReason::kNone;
  }

  /// The general case: every rule kind, expressions through the bounded evaluator.
  StopReason apply_row(const dwarf::CfiSection& sec, const Regs& regs, Regs& next,
                       uint64_t* cfa_out) {
    constexpr int kW = Traits::kAddrSize;
    const FullRow& full = *full_opt_;  // filled by rung_table before the call
    uint64_t cfa;
    if (full.row.cfa.kind == dwarf::CfaRule::Kind::kRegOffset) {
      if (!regs.has(full.row.cfa.reg)) return missing_reg(full.row.cfa.reg);
      cfa = mask(regs.get(full.row.cfa.reg) + full.row.cfa.offset);
    } else {
      if (!eval(sec, full.row.cfa.expr_offset, full.row.cfa.expr_len, regs, nullptr, &cfa))
        return expr_reason_;
      cfa = mask(cfa);
    }
    const int ra_col = full.row.ra_reg;
    uint64_t ra = 0;
    bool have_ra = false;
    for (int reg = 0; reg < dwarf::kMaxCfiRegs; reg++) {
      const dwarf::RegRule& rr = full.row.regs[reg];
      const bool tracked = reg < Traits::kNumRegs;
      if (!tracked && reg != ra_col) continue;
      uint64_t v = 0;
      bool have = true;
      switch (rr.kind) {
        case dwarf::RegRuleKind::kUnspecified:
        case dwarf::RegRuleKind::kSameValue:
          if (reg == ra_col) {
            if (ra_col == Traits::kPcReg)  // as in apply_rule
              return rr.kind == dwarf::RegRuleKind::kSameValue ? StopReason::kEndOfStack : StopReason::kBadCfi;
            have = regs.has(reg);
            v = have ? regs.get(reg) : 0;
          } else {
            continue;
          }
          break;
        case dwarf::RegRuleKind::kUndefined:
          if (reg == ra_col) return StopReason::kEndOfStack;
          next.clear(reg);
          continue;
        case dwarf::RegRuleKind::kOffset:
          if (!arch::read_word(mem_, mask(cfa + rr.offset), kW, Traits::kBigEndian, &v)) {
            if (reg == ra_col) return StopReason::kMemoryUnreadable;
            unreadable_slot(next, regs, regs.has(Traits::kSpReg), regs.has(Traits::kSpReg) ? regs.get(Traits::kSpReg) : 0,
                            mask(cfa + rr.offset), reg);
            continue;
          }
          break;
        case dwarf::RegRuleKind::kValOffset:
          v = mask(cfa + rr.offset);
          break;
        case dwarf::RegRuleKind::kRegister:
          if (!regs.has(rr.reg)) return missing_reg(rr.reg);
          v = regs.get(rr.reg);
          break;
        case dwarf::RegRuleKind::kExpression: {
          uint64_t addr;
          if (!eval(sec, rr.expr_offset, rr.expr_len, regs, &cfa, &addr)) return expr_reason_;
          if (!arch::read_word(mem_, mask(addr), kW, Traits::kBigEndian, &v)) {
            if (reg == ra_col) return StopReason::kMemoryUnreadable;
            lose(next, reg);
            continue;
          }
          break;
        }
        case dwarf::RegRuleKind::kValExpression:
          if (!eval(sec, rr.expr_offset, rr.expr_len, regs, &cfa, &v)) return expr_reason_;
          break;
      }
      if (reg == ra_col) {
        ra = v;
        have_ra = have;
      }
      if (tracked && have) next.set(reg, v);
    }
    if (!have_ra) return StopReason::kBadCfi;
    ra = Traits::strip_return_address(ra);
    next.set(Traits::kPcReg, ra);
    if (Traits::kRaReg < Traits::kNumRegs) next.set(Traits::kRaReg, ra);
    next.set(Traits::kSpReg, cfa);
    *cfa_out = cfa;
    return StopReason::kNone;
  }

  bool eval(const dwarf::CfiSection& sec, uint32_t off, uint32_t len, const Regs& regs,
            const uint64_t* initial, uint64_t* out) {
    if (off > sec.size || len > sec.size - off) {
      expr_reason_ = StopReason::kBadCfi;
      return false;
    }
    dwarf::ExprStatus st = dwarf::eval_expression(sec.data + off, len, Traits::kAddrSize,
                                                  Traits::kBigEndian, mem_, regs, initial, out);
    if (st == dwarf::ExprStatus::kOk) return true;
    expr_reason_ = st == dwarf::ExprStatus::kMemory ? StopReason::kMemoryUnreadable : StopReason::kBadCfi;
    return false;
  }

  /// The sigreturn trampoline recognised by its code bytes: read from the
  /// module file (so this works offline too), or from the target's memory when
  /// no module maps the pc (qemu-user's sigtramp page, an on-stack trampoline).
  bool step_by_sigreturn(const ModuleSlot* slot, uint64_t pc, const Regs& regs, Regs& next,
                         uint64_t* cfa) {
    uint8_t code[Ops::kSigreturnLen];
    if (slot != nullptr && slot->module != nullptr) {
      if (!module_code(*slot, pc, code, sizeof(code))) return false;
    } else if (!mem_.read(pc, code, sizeof(code))) {
      return false;
    }
    const int kind = Ops::sigreturn_kind(code);
    if (kind == 0) return false;
    next = regs;
    return Ops::signal_step(next, mem_, kind, cfa) == arch::StepOutcome::kOk;
  }

  /// The code bytes at `pc`, read from the target's memory, are a sigreturn trampoline.
  bool sigreturn_in_memory(uint64_t pc) {
    uint8_t code[Ops::kSigreturnLen];
    return mem_.read(pc, code, sizeof(code)) && Ops::sigreturn_kind(code) != 0;
  }

  /// Instruction analysis of the function's prologue (mips32), reading code
  /// from the module file that holds the pc. `exact_pc`: not a return address.
  /// The analysis (code only) is cached per module-relative pc in the rule cache.
  bool step_by_prologue(const ModuleSlot* slot, bool exact_pc, const Regs& regs, Regs& next,
                        uint64_t* cfa) {
    if (slot == nullptr || slot->module == nullptr || !regs.has(Traits::kPcReg)) return false;
    const uint64_t pc = regs.get(Traits::kPcReg);
    const uint64_t rel = pc - slot->bias;
    const uint32_t gen = slot->module->generation();
    const arch::PrologueInfo* info = cache_.find_prologue(rel, exact_pc, gen);
    arch::PrologueInfo fresh;
    if (info == nullptr) {
      auto code = [slot](uint64_t addr, void* buf, size_t len) {
        return addr >= slot->start && addr + len <= slot->end &&
               slot->module->read_code(addr - slot->bias, buf, len);
      };
      fresh = Ops::analyze_prologue(pc, exact_pc, code);
      cache_.insert_prologue(rel, exact_pc, gen, fresh);
      info = &fresh;
    }
    next = regs;
    return Ops::apply_prologue(*info, next, mem_, cfa) == arch::StepOutcome::kOk;
  }

  /// The return address a call through a bad pointer left ([sp] on x86_64,
  /// lr/ra elsewhere), trusted only when it lands in a known module just after
  /// an indirect call (a direct call never targets a pc outside every module).
  /// Known gap: a snapshot records file-backed modules only, so an exact pc in
  /// JIT code also takes this rung first; the indirect-call check keeps a stray
  /// [sp] word from being taken for a caller in most such frames.
  bool step_by_bad_pc(const Regs& regs, Regs& next, uint64_t* cfa) {
    next = regs;
    if (Ops::bad_pc_step(next, mem_, cfa) != arch::StepOutcome::kOk) return false;
    const uint64_t ra = Traits::strip_return_address(next.get(Traits::kPcReg));
    const ModuleSlot* s = modules_.find(ra - Traits::kCallInsnMin);
    if (s == nullptr || s->module == nullptr || ra < Ops::kCallBytes) return false;
    uint8_t code[Ops::kCallBytes];
    if (!module_code(*s, ra - Ops::kCallBytes, code, sizeof(code))) return false;
    if (!Ops::preceded_by_indirect_call(code)) return false;
    next.set(Traits::kPcReg, ra);
    return true;
  }

  /// Go on x86_64 (doc/runtime-frames.md "Go"): the pclntab's SP delta at the pc
  /// (pcsp) puts the return address at sp + delta and the caller's sp above it.
  /// The caller's rbp is reloaded from the save slot only when this function has
  /// set its own (rbp == sp + delta - 8); a frameless leaf or a pc in the
  /// prologue leaves rbp to the caller already. A function marked TOPFRAME
  /// (runtime.goexit, mstart, rt0_go) ends the stack as the Go runtime's own
  /// traceback ends it; one that writes SP (mcall, systemstack, morestack) is
  /// left to the frame pointer. Returns kNoUnwindInfo when not a Go function.
  StopReason step_by_go_pcsp(const ModuleSlot* slot, uint64_t lookup_pc, const Regs& regs, Regs& next,
                             uint64_t* cfa) {
    if (slot == nullptr || slot->module == nullptr || !regs.has(Traits::kSpReg)) return StopReason::kNoUnwindInfo;
    if (!opts_.may_allocate) return StopReason::kNoUnwindInfo;  // loading the pclntab allocates
    const symbolize::GoPclntab* go = slot->module->go_pclntab();
    if (go == nullptr) return StopReason::kNoUnwindInfo;
    const uint64_t rel = lookup_pc - slot->bias;
    const uint8_t flags = go->func_flags(rel);
    if (flags & symbolize::GoPclntab::kTopFrame) return StopReason::kEndOfStack;
    if (flags & symbolize::GoPclntab::kSpWrite) return StopReason::kNoUnwindInfo;
    const auto delta = go->sp_delta(rel);
    if (!delta || *delta < 0 || *delta > (1 << 24) || (*delta & 7)) return StopReason::kNoUnwindInfo;
    const uint64_t sp = regs.get(Traits::kSpReg), d = static_cast<uint64_t>(*delta);
    uint64_t ra = 0;
    if (!arch::read_word(mem_, sp + d, 8, false, &ra)) return StopReason::kMemoryUnreadable;
    next = regs;
    if (d > 0 && regs.has(Traits::kFpReg) && regs.get(Traits::kFpReg) == sp + d - 8) {
      uint64_t saved = 0;
      if (!arch::read_word(mem_, sp + d - 8, 8, false, &saved)) return StopReason::kMemoryUnreadable;
      next.set(Traits::kFpReg, saved);
    }
    next.set(Traits::kPcReg, ra);
    next.set(Traits::kSpReg, sp + d + 8);
    *cfa = sp + d + 8;
    return StopReason::kNone;
  }

  bool step_by_frame_pointer(const Regs& regs, Regs& next, uint64_t* cfa) {
    next = regs;
    return Ops::fp_step(next, mem_, cfa) == arch::StepOutcome::kOk;
  }

  /// Looks for the first stack word above sp that points just after a call
  /// instruction in a known module. Least trusted; opt-in.
  bool step_by_scan(const Regs& regs, Regs& next, uint64_t* cfa) {
    constexpr int kW = Traits::kAddrSize;
    const uint64_t sp = regs.get(Traits::kSpReg);
    for (uint32_t i = 0; i < opts_.scan_words; i++) {
      const uint64_t at = sp + static_cast<uint64_t>(i) * kW;
      uint64_t cand;
      if (!arch::read_word(mem_, at, kW, Traits::kBigEndian, &cand)) return false;
      const ModuleSlot* s = modules_.find(cand - 1);
      if (s == nullptr || s->module == nullptr || cand < Ops::kCallBytes) continue;
      uint8_t code[Ops::kCallBytes];
      if (!module_code(*s, cand - Ops::kCallBytes, code, sizeof(code))) continue;
      if (!Ops::preceded_by_call(code)) continue;
      next = regs;
      next.set(Traits::kPcReg, cand);
      next.set(Traits::kSpReg, at + kW);
      *cfa = at + kW;
      return true;
    }
    return false;
  }

  /// A callee-saved register whose save slot lies outside the readable
  /// memory (e.g. past the end of a copied stack) becomes unknown; the walk
  /// goes on and stops only if a later rule needs it.
  void lose(Regs& next, int reg) {
    next.clear(reg);
    if (reg < 64) lost_ |= 1ull << reg;
  }
  /// A saved register whose slot cannot be read. A slot below the stack pointer `regs` had (the
  /// frame's own sp, `sp_valid`) was released by the epilogue, which restored the register first
  /// (`pop %rbp`, `ldp x29, x30, [sp], #16`; GCC's CFI keeps "saved at CFA-16" after the pop): its
  /// value now is the caller's, so it stays. A stack copied from the sp (perf's, the eBPF
  /// sampler's) holds nothing below it. Otherwise the register is lost.
  void unreadable_slot(Regs& next, const Regs& regs, bool sp_valid, uint64_t sp, uint64_t slot, int reg) {
    if (sp_valid && slot < sp && reg < Traits::kNumRegs && regs.has(reg)) {
      if (&next != &regs) next.set(reg, regs.get(reg));
      return;
    }
    lose(next, reg);
  }
  /// A rule needs a register we do not have: unreadable memory if it was lost
  /// that way, otherwise the CFI asks for something the capture never had.
  StopReason missing_reg(int reg) const {
    return (reg < 64 && ((lost_ >> reg) & 1)) ? StopReason::kMemoryUnreadable : StopReason::kBadCfi;
  }

  static uint64_t mask(uint64_t v) {
    if constexpr (Traits::kAddrSize == 4) return v & 0xffffffffull;
    return v;
  }

  const ModuleTable& modules_;
  RuleCache& cache_;
  const WalkOptions& opts_;
  Mem& mem_;
  size_t hops_ = 0;                ///< async boundaries crossed by this walk
  Domain domain_ = Domain::kUser;  ///< the domain of the frames the walk pushes (async past a boundary)
  /// The table rung's interpreter row scratch, made on first use: large (about 1 KiB), so neither
  /// on every step's stack nor zeroed by every walk (an unwinder is made per walk).
  FullRow& full_row_scratch() {
    if (!full_opt_) full_opt_.emplace();
    return *full_opt_;
  }
  std::optional<FullRow> full_opt_;
  StopReason expr_reason_ = StopReason::kBadCfi;
  uint64_t lost_ = 0;  // registers lost to unreadable save slots in this walk
  size_t frame_base_ = 0;  ///< frames walk_pcs wrote as pcs before out->frames[0]
  /// run_loop returns to walk_pcs after a step through a signal frame (out->stop still kNone), the
  /// new frame's module in resume_slot_.
  bool resume_after_signal_ = false;
  const ModuleSlot* resume_slot_ = nullptr;
};

}  // namespace stackprov::unwind
