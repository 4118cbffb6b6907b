// SPDX-License-Identifier: Apache-2.0
// Compact unwind rules translated from CFI rows, and the fixed-size two-way set-associative rule cache.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "arch/regs.hpp"
#include "dwarf/cfi.hpp"

namespace stackprov::unwind {

/// A CFI row reduced to what the common case needs. Variants:
///  - kCfaReg:   cfa = reg[cfa_reg] + cfa_off;
///               reg[saved_reg[i]] = *(cfa + saved_off[i] * addr_size)  (i < nsaved);
///               ra = *(cfa + ra_off * addr_size)    when ra_kind == kRaAtCfa,
///               ra = reg[ra_reg]                   when ra_kind == kRaSameValue or
///                                                  kRaUnspecified (arm64/mips lr, ra);
///               where the return-address column is the pc itself (x86_64 rip) there is
///               no caller: same value ends the stack, unspecified is bad CFI,
///               sp' = cfa.
///  - kEndOfStack: the return-address column is undefined (e.g. _start).
///  - kFull:     the row needs the interpreter (expressions, val_offset,
///               register rules, offsets beyond int8 words); re-run find_row.
///  - kNoInfo:   no FDE covers the address (negative cache entry).
struct UnwindRule {
  enum Kind : uint8_t { kInvalid = 0, kCfaReg, kEndOfStack, kFull, kNoInfo };
  enum RaKind : uint8_t { kRaAtCfa = 0, kRaSameValue = 1, kRaUnspecified = 2 };
  static constexpr int kMaxSaved = 12;

  uint8_t kind = kInvalid;
  uint8_t cfa_reg = 0;
  uint8_t nsaved = 0;
  uint8_t ra_kind = kRaAtCfa;
  int32_t cfa_off = 0;
  uint8_t saved_reg[kMaxSaved] = {};
  int8_t saved_off[kMaxSaved] = {};
  uint8_t ra_reg = 0;
  int8_t ra_off = 0;
  uint8_t signal_frame = 0;   ///< CIE 'S': the caller is looked up at pc, not pc - 1
  uint8_t from_debug_frame = 0;
};
static_assert(sizeof(UnwindRule) == 36, "UnwindRule must stay compact");

/// Translates a CFI row into a compact rule; kFull when it does not fit.
/// `addr_size` is 4 or 8; `num_regs` bounds the register numbers used.
/// `keep_saved` (bit n: DWARF register n) selects the saved registers the rule
/// restores: the callee-saved ones (Traits::kCalleeSaved), the only registers a
/// caller's CFA or saved-register rule reads; saves of other registers are not
/// carried (their values are dead in the caller).
UnwindRule translate_row(const dwarf::CfiRow& row, int addr_size, int num_regs,
                         uint64_t keep_saved = ~uint64_t{0});

/// Two-way set-associative cache of rules keyed by (module identity, module-relative pc):
/// the module's generation (unique per loaded module, which is shared by
/// build-id across snapshots and processes) and the link-time address. Never an
/// absolute pc alone: that is other code in another address space, so a cache keyed
/// by it would make a walk depend on what was unwound before (the quick table below
/// keys by absolute pc *and* the module table's stamp). Owned by one
/// unwinder (one thread): no locks, no allocation after construction.
class RuleCache {
 public:
  static constexpr uint32_t kEntries = 4096;  // 4096 * 64 B = 256 KiB
  /// Two-way sets (2048 of them): with a hundred or so hot pcs, two of them
  /// sharing a slot of a direct-mapped table is likely, and they would evict
  /// each other on every walk.
  static constexpr uint32_t kWays = 2;

  /// One cache line per entry (the table is line-aligned): a probe and the
  /// rule it finds cost one line, never two.
  struct alignas(64) Entry {
    uint64_t rel_pc;      // module-relative (link-time) lookup address
    uint32_t generation;  // LoadedModule::generation(); 0: empty
    UnwindRule rule;
    /// Set by insert() (in the line's padding): the rule is in the walk's common form — kCfaReg,
    /// no signal frame, the return address in a CFA slot, every saved register one the
    /// architecture's register file holds — and its slots, return address and saved registers,
    /// lie in `span_words` words from cfa + span_lo words, so that one bounds check covers them.
    uint8_t common;
    int8_t span_lo;
    uint8_t span_words;
    /// Set by insert() with `common` when the architecture's sp and fp were given, for the
    /// unwinder's pcs-only walk (Unwinder::pcs_run): in bits 0-1 kPcsCfaSp or kPcsCfaFp when the
    /// CFA is on sp or fp and at most kPcsOther saved registers are not fp, else 0 (the whole
    /// byte); in bits 2-7 the number of those other registers. The return address at word ra_rel
    /// of the span, fp's slot at word fp_rel (kPcsNone: not saved), the other saved registers
    /// other_reg[i] at word other_rel[i], in the rule's order.
    uint8_t pcs;
    uint8_t ra_rel;
    uint8_t fp_rel;
    uint8_t other_reg[5];
    uint8_t other_rel[5];
  };
  static constexpr uint8_t kPcsCfaSp = 1, kPcsCfaFp = 2, kPcsNone = 0xff;
  static constexpr int kPcsOther = 5;
  static_assert(sizeof(Entry) == 64, "cache entry must stay one 64-byte line");

  /// The quick table: what the unwinder's pcs-only walk (Unwinder::pcs_run) takes of an entry's pcs
  /// form, keyed by the frame's absolute pc (a return address) under one module table, so that a
  /// step needs neither the frame's module nor the two-way probe. Direct-mapped; an entry is valid
  /// for the stamp quick_begin() gave that table (the table's own stamp, ModuleTable::stamp(), is
  /// 64-bit and unique; entries hold a 32-bit stamp of this cache). Everything in it is a function
  /// of (table, pc): the module's bias, generation and methods are the table's, a rule-cache
  /// entry's content is a function of (generation, module-relative pc), the coroutine-entry answer
  /// of the module's code. An entry copies what it needs, so evicting the rule-cache entry it came
  /// from does not change it.
  struct QuickEntry {
    uint64_t pc;          ///< the return address (the rule is the one for pc - the call's minimum length)
    uint32_t stamp;       ///< quick_begin()'s stamp; 0: empty
    int32_t cfa_off;      ///< cfa = (kQuickFp ? fp : sp) + cfa_off
    uint32_t other_mask;  ///< the other saved registers (bit r: register r, all below 32)
    uint8_t flags;        ///< kQuick* bits
    int8_t span_lo;       ///< the slots: span_words words from cfa + span_lo words (Entry's)
    uint8_t span_words;
    int8_t ra_word;  ///< the return address at cfa + ra_word words
    int8_t fp_word;  ///< fp's slot at cfa + fp_word words (with kQuickFpSaved; else ra_word)
    uint8_t nother;  ///< other saved registers: the i-th lowest of other_mask at word other_rel[i] of the span
    uint8_t other_rel[kPcsOther];
  };
  static_assert(sizeof(QuickEntry) == 32, "two quick entries a line");
  /// QuickEntry::flags: the CFA is on fp; fp is saved (at fp_rel); other registers are saved; the
  /// frame is the end of the stack (the cached rule is kEndOfStack and the pc no coroutine entry:
  /// nothing else in the entry is set).
  static constexpr uint8_t kQuickFp = 1, kQuickFpSaved = 2, kQuickOther = 4, kQuickEnd = 8;
  static constexpr uint32_t kQuickBits = 12;  // 4096 * 32 B = 128 KiB
  static uint32_t quick_slot(uint64_t pc) {
    return static_cast<uint32_t>((pc * 0x9E3779B97F4A7C15ull) >> (64 - kQuickBits));
  }
  /// The quick table for the module table stamped `table_stamp` (nullptr when it could not be
  /// allocated): a table other than the last one's gets a new stamp, so the entries of another
  /// table never answer. Allocation-free (the table is calloc'd with the cache).
  QuickEntry* quick_begin(uint64_t table_stamp) {
    if (table_stamp != quick_table_) {
      quick_table_ = table_stamp;
      if (++quick_stamp_ == 0) {  // 2^32 tables: the oldest entries could answer again
        if (quick_ != nullptr) std::memset(static_cast<void*>(quick_), 0, sizeof(QuickEntry) << kQuickBits);
        quick_stamp_ = 1;
      }
    }
    return quick_;
  }
  uint32_t quick_stamp() const { return quick_stamp_; }
  /// `q` (a slot of the quick table) from the pcs form of `e` (e->pcs != 0), for `pc`; false (q
  /// unchanged) when a saved register is not below 32.
  static bool quick_fill(QuickEntry* q, uint64_t pc, uint32_t stamp, const Entry& e) {
    const int nother = e.pcs >> 2;
    uint32_t mask = 0;
    for (int i = 0; i < nother; i++) {
      if (e.other_reg[i] >= 32) return false;
      mask |= uint32_t{1} << e.other_reg[i];
    }
    q->pc = pc;
    q->stamp = stamp;
    q->cfa_off = e.rule.cfa_off;
    q->flags = static_cast<uint8_t>(((e.pcs & 3) == kPcsCfaFp ? kQuickFp : 0) |
                                    (e.fp_rel != kPcsNone ? kQuickFpSaved : 0) | (nother != 0 ? kQuickOther : 0));
    q->span_lo = e.span_lo;
    q->span_words = e.span_words;
    q->ra_word = static_cast<int8_t>(e.span_lo + e.ra_rel);  // the rule's ra_off
    q->fp_word = static_cast<int8_t>(e.span_lo + (e.fp_rel != kPcsNone ? e.fp_rel : e.ra_rel));
    q->nother = static_cast<uint8_t>(nother);
    q->other_mask = mask;
    std::memset(q->other_rel, 0, sizeof(q->other_rel));
    int k = 0;  // the slots in register order
    for (uint32_t m = mask; m != 0; m &= m - 1)
      for (int i = 0; i < nother; i++)
        if (e.other_reg[i] == __builtin_ctz(m)) q->other_rel[k++] = e.other_rel[i];
    return true;
  }
  /// `q` for `pc` as the end of the stack.
  static void quick_fill_end(QuickEntry* q, uint64_t pc, uint32_t stamp) {
    std::memset(static_cast<void*>(q), 0, sizeof(*q));
    q->pc = pc;
    q->stamp = stamp;
    q->flags = kQuickEnd;
  }

  RuleCache();
  RuleCache(const RuleCache&) = delete;
  RuleCache& operator=(const RuleCache&) = delete;

  const UnwindRule* find(uint64_t rel_pc, uint32_t generation) {
    if (const UnwindRule* r = probe(rel_pc, generation)) {
      hits_++;
      return r;
    }
    misses_++;
    return nullptr;
  }
  /// find() without counting: the caller counts the lookup with count_hit()
  /// when it uses the entry, or looks it up again with find().
  const UnwindRule* probe(uint64_t rel_pc, uint32_t generation) const {
    const Entry* set = &entries_[set_of(rel_pc, generation) * kWays];
    for (uint32_t w = 0; w < kWays; w++)
      if (set[w].generation == generation && set[w].rel_pc == rel_pc) return &set[w].rule;
    return nullptr;
  }
  void count_hit() { hits_++; }
  void count_hits(uint64_t n) { hits_ += n; }
  /// The entry of (rel_pc, generation), or nullptr; not counted (as probe()).
  const Entry* probe_entry(uint64_t rel_pc, uint32_t generation) const {
    const Entry* set = &entries_[set_of(rel_pc, generation) * kWays];
    for (uint32_t w = 0; w < kWays; w++)
      if (set[w].generation == generation && set[w].rel_pc == rel_pc) return &set[w];
    return nullptr;
  }
  /// Starts loading the set of (rel_pc, generation) into the CPU cache.
  void prefetch(uint64_t rel_pc, uint32_t generation) const {
    __builtin_prefetch(&entries_[set_of(rel_pc, generation) * kWays]);
  }
  /// Puts the rule in way 0 of its set; the entry there moves to way 1 (the
  /// older way-1 entry is dropped), so two hot pcs of one set both stay.
  /// `num_regs`: the register file of the architecture whose unwinder inserts (Entry::common
  /// holds only for rules whose saved registers are all below it; 0: never).
  /// `sp_reg`, `fp_reg`: that architecture's stack and frame pointers (Entry::pcs; -1: none).
  void insert(uint64_t rel_pc, uint32_t generation, const UnwindRule& rule, int num_regs, int sp_reg = -1,
              int fp_reg = -1) {
    Entry* set = &entries_[set_of(rel_pc, generation) * kWays];
    if (!(set[0].generation == generation && set[0].rel_pc == rel_pc)) set[1] = set[0];
    set[0].rel_pc = rel_pc;
    set[0].generation = generation;
    set[0].rule = rule;
    set_common(set[0], num_regs);
    set_pcs(set[0], sp_reg, fp_reg);
  }
  void clear();

  /// Prologue analyses (mips32) by (module generation, module-relative pc,
  /// exact pc): the analysis reads up to ~1,000 instructions, so each pc is
  /// analysed once per unwinder. A 256-entry direct-mapped table allocated on
  /// the first insert.
  const arch::PrologueInfo* find_prologue(uint64_t rel_pc, bool exact_pc, uint32_t generation) const {
    if (!prologues_) return nullptr;
    const uint64_t key = rel_pc << 1 | (exact_pc ? 1 : 0);
    const PrologueEntry& e = prologues_[prologue_slot(key, generation)];
    return e.generation == generation && e.key == key ? &e.info : nullptr;
  }
  void insert_prologue(uint64_t rel_pc, bool exact_pc, uint32_t generation, const arch::PrologueInfo& info);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  static void set_common(Entry& e, int num_regs) {
    const UnwindRule& r = e.rule;
    e.common = 0;
    e.span_lo = 0;
    e.span_words = 0;
    if (r.kind != UnwindRule::kCfaReg || r.signal_frame != 0 || r.ra_kind != UnwindRule::kRaAtCfa ||
        r.nsaved > UnwindRule::kMaxSaved)
      return;
    int lo = r.ra_off, hi = r.ra_off;
    for (int i = 0; i < r.nsaved; i++) {
      if (r.saved_reg[i] >= num_regs) return;
      lo = std::min<int>(lo, r.saved_off[i]);
      hi = std::max<int>(hi, r.saved_off[i]);
    }
    e.common = 1;
    e.span_lo = static_cast<int8_t>(lo);
    e.span_words = static_cast<uint8_t>(hi - lo + 1);  // int8 offsets: at most 256 words
  }
  static void set_pcs(Entry& e, int sp_reg, int fp_reg) {
    const UnwindRule& r = e.rule;
    e.pcs = 0;
    e.ra_rel = 0;
    e.fp_rel = kPcsNone;
    if (!e.common || sp_reg < 0 || fp_reg < 0 || (r.cfa_reg != sp_reg && r.cfa_reg != fp_reg)) return;
    int nother = 0;
    for (int i = 0; i < r.nsaved; i++) {
      const auto rel = static_cast<uint8_t>(r.saved_off[i] - e.span_lo);
      if (r.saved_reg[i] == fp_reg) {
        e.fp_rel = rel;
      } else {
        if (nother == kPcsOther) return;
        e.other_reg[nother] = r.saved_reg[i];
        e.other_rel[nother++] = rel;
      }
    }
    e.ra_rel = static_cast<uint8_t>(r.ra_off - e.span_lo);
    e.pcs = static_cast<uint8_t>((r.cfa_reg == sp_reg ? kPcsCfaSp : kPcsCfaFp) | nother << 2);
  }
  static uint32_t set_of(uint64_t rel_pc, uint32_t generation) {
    static_assert(kWays == 2, "insert() moves way 0 to way 1");
    uint64_t h = (rel_pc ^ (static_cast<uint64_t>(generation) << 40)) * 0x9E3779B97F4A7C15ull;
    return static_cast<uint32_t>(h >> 53) & (kEntries / kWays - 1);
  }
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  /// calloc'd: large zeroed blocks come straight from fresh pages, so an
  /// unwinder that touches few slots (one short walk) pays for few pages.
  /// An all-zero Entry is empty (generation 0). `entries_` is the first
  /// set-size (128-byte) boundary in `block_` (one set more is allocated for it).
  std::unique_ptr<void, FreeDeleter> block_;
  Entry* entries_ = nullptr;
  struct PrologueEntry {
    uint64_t key = 0;         // rel_pc << 1 | exact_pc
    uint32_t generation = 0;  // 0: empty
    arch::PrologueInfo info;
  };
  static constexpr uint32_t kPrologueEntries = 256;
  static uint32_t prologue_slot(uint64_t key, uint32_t generation) {
    return static_cast<uint32_t>(((key ^ (static_cast<uint64_t>(generation) << 40)) * 0x9E3779B97F4A7C15ull) >> 56);
  }
  std::unique_ptr<PrologueEntry[]> prologues_;
  std::unique_ptr<void, FreeDeleter> quick_block_;  ///< calloc'd as block_
  QuickEntry* quick_ = nullptr;
  uint64_t quick_table_ = 0;  ///< the ModuleTable stamp quick_stamp_ is for (0: none)
  uint32_t quick_stamp_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace stackprov::unwind
