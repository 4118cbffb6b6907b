// SPDX-License-Identifier: Apache-2.0
// Raw unwinding: registers in ptrace/perf/pt_regs/ucontext layouts + stack bytes + a module table -> frames.
#include "unwind/raw_unwind.hpp"

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <type_traits>

#include "unwind/arch_dispatch.hpp"

namespace stackprov::unwind {

namespace {

/// Registers of `format` in the DWARF numbering of Traits' architecture.
template <class Traits>
Status convert_regs(const RawWalkInput& in, arch::RegState<Traits::kNumRegs>* out) {
  using Regs = arch::RegState<Traits::kNumRegs>;
  if (in.regs == nullptr) return make_error(SPROV_ERR_INVALID_ARG, "raw unwind: regs is NULL");
  if (in.format == RegsFormat::kDwarf) {
    const size_t n = in.regs_len / 8;
    Regs r{};
    for (size_t i = 0; i < n && i < static_cast<size_t>(Traits::kNumRegs); i++) {
      if (in.regs_mask != 0 && !((in.regs_mask >> i) & 1)) continue;
      uint64_t v;
      std::memcpy(&v, static_cast<const uint8_t*>(in.regs) + i * 8, 8);
      r.set(static_cast<int>(i), v);
    }
    *out = r;
    return {};
  }
  if (in.format == RegsFormat::kPerf) {
    const size_t count = in.regs_len / 8;
    uint64_t values[64];
    if (count > 64) return make_error(SPROV_ERR_INVALID_ARG, "perf regs: %zu values, at most 64", count);
    std::memcpy(values, in.regs, count * 8);
    return arch::Ops<Traits>::regs_from_perf(in.regs_mask, values, count, out);
  }
  // The arch layer's conversion for each layout (arch/<isa>/conversions.cpp cites the layouts).
  using Ops = arch::Ops<Traits>;
  switch (in.format) {
    case RegsFormat::kPtrace: return Ops::regs_from_user_regs(in.regs, in.regs_len, out);
    case RegsFormat::kPtRegs: return Ops::regs_from_pt_regs(in.regs, in.regs_len, out);
    case RegsFormat::kUcontext: return Ops::regs_from_ucontext(in.regs, in.regs_len, out);
    default:
      return make_error(SPROV_ERR_INVALID_ARG, "raw unwind: unknown register format %d", static_cast<int>(in.format));
  }
}

/// The memory of a raw walk: the given stack bytes (and, for the own process,
/// process_vm_readv). A word read from the stack that lies in a trampoline range
/// is replaced by a shadow record's real return address (issue 16, "Trampolines").
template <class Traits>
class RawReader {
 public:
  RawReader(const RawWalkInput& in, const AddressSpaceVersion& v) : in_(in), v_(v) {
    nshadow_ = in.shadow_count < kMaxShadowRecords ? in.shadow_count : kMaxShadowRecords;
  }

  bool read(uint64_t addr, void* buf, size_t len) {
    const uint64_t off = addr - in_.stack_addr;
    if (addr >= in_.stack_addr && off <= in_.stack_len && len <= in_.stack_len - off) {
      std::memcpy(buf, in_.stack + off, len);
      if (len == static_cast<size_t>(Traits::kAddrSize) && !v_.trampolines.empty()) repair_slot(addr, buf);
      return true;
    }
    return in_.self_stack_hi != 0 && read_self(addr, buf, len);
  }

  /// A return address held in a register at frame 0 (arm64 lr, mips ra) that is
  /// a trampoline: the record with the smallest entry sp >= the current sp.
  template <class Regs>
  void repair_register(Regs& regs) {
    if constexpr (Traits::kRaReg != Traits::kPcReg) {
      if (!regs.has(Traits::kRaReg) || !regs.has(Traits::kSpReg)) return;
      const uint64_t ra = regs.get(Traits::kRaReg);
      if (!in_trampoline(ra)) return;
      uint64_t real;
      if (take_record(regs.get(Traits::kSpReg), kRegisterSlot, &real)) regs.set(Traits::kRaReg, real);
    } else {
      (void)regs;
    }
  }

  /// Tags the frames whose return address came from a record (in walk order).
  uint32_t tag(WalkResult* out) const {
    size_t next = 1;
    uint32_t tagged = 0;
    for (uint32_t i = 0; i < nlog_; i++) {
      const uint64_t pc = Traits::strip_return_address(log_[i]);
      for (size_t j = next; j < out->frames.size(); j++) {
        if (out->frames[j].pc == pc && out->frames[j].lookup_prev) {
          out->frames[j].method = Method::kTrampoline;
          next = j + 1;
          tagged++;
          break;
        }
      }
    }
    return tagged;
  }

 private:
  static constexpr uint64_t kRegisterSlot = ~0ull;

  bool in_trampoline(uint64_t v) const {
    for (const AddrRange& r : v_.trampolines)
      if (v >= r.start && v < r.end) return true;
    return false;
  }

  void repair_slot(uint64_t addr, void* buf) {
    uint8_t* b = static_cast<uint8_t*>(buf);
    const uint64_t v = arch::load_word(b, Traits::kAddrSize, Traits::kBigEndian);
    if (!in_trampoline(v)) return;
    uint64_t real;
    if (!take_record(addr, addr, &real)) return;
    for (int i = 0; i < Traits::kAddrSize; i++) {
      const int shift = Traits::kBigEndian ? 8 * (Traits::kAddrSize - 1 - i) : 8 * i;
      b[i] = static_cast<uint8_t>(real >> shift);
    }
  }

  /// The record for a trampoline found at `at` (a slot address, or the sp for a
  /// register): the one already used for `key`, else the unused record with the
  /// smallest slot >= at.
  bool take_record(uint64_t at, uint64_t key, uint64_t* real) {
    for (uint32_t i = 0; i < nlog_; i++)
      if (used_key_[i] == key) {
        *real = log_[i];
        return true;
      }
    size_t best = nshadow_;
    for (size_t i = 0; i < nshadow_; i++) {
      if (used_[i] || in_.shadow[i].slot < at) continue;
      if (best == nshadow_ || in_.shadow[i].slot < in_.shadow[best].slot) best = i;
    }
    if (best == nshadow_ || nlog_ >= kMaxShadowRecords) return false;
    used_[best] = true;
    used_key_[nlog_] = key;
    log_[nlog_++] = in_.shadow[best].return_address;
    *real = in_.shadow[best].return_address;
    return true;
  }

  /// The own process's memory through process_vm_readv (async-signal-safe; an
  /// unmapped address fails with EFAULT instead of faulting).
  static bool read_self(uint64_t addr, void* buf, size_t len) {
    struct iovec local = {buf, len};
    struct iovec remote = {reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), len};
    const long n = syscall(SYS_process_vm_readv, static_cast<long>(getpid()), &local, 1L, &remote, 1L, 0L);
    return n == static_cast<long>(len);
  }

  const RawWalkInput& in_;
  const AddressSpaceVersion& v_;
  size_t nshadow_ = 0;
  bool used_[kMaxShadowRecords] = {};
  uint64_t used_key_[kMaxShadowRecords];
  uint64_t log_[kMaxShadowRecords];
  uint32_t nlog_ = 0;
};

template <class Traits>
Status walk_raw_arch(const RawWalkInput& in, const AddressSpaceVersion& version, RuleCache& cache,
                     const WalkOptions& opts, WalkResult* out, uint32_t* repaired) {
  using Walker = Unwinder<Traits, RawReader<Traits>>;
  typename Walker::Regs regs{};
  if (Status st = convert_regs<Traits>(in, &regs); !st.ok()) return st;
  RawWalkInput input = in;
  if (in.self_stack_hi != 0) {
    const uint64_t sp = regs.has(Traits::kSpReg) ? regs.get(Traits::kSpReg) : 0;
    if (sp < in.self_stack_lo || sp >= in.self_stack_hi)
      return Status(Error{SPROV_ERR_INVALID_ARG, {}});  // no message: signal handlers must not allocate
    input.stack_addr = sp;
    input.stack = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(sp));
    input.stack_len = in.self_stack_hi - sp;
  }
  RawReader<Traits> mem(input, version);
  mem.repair_register(regs);
  Walker walker(version.table, cache, opts, mem);
  walker.walk(regs, in.pc_is_return_address, out);
  *repaired = mem.tag(out);
  return {};
}

}  // namespace

Status walk_raw(Arch arch, Endian endian, const RawWalkInput& in, const AddressSpaceVersion& version,
                RuleCache& cache, const WalkOptions& opts, WalkResult* out, uint32_t* repaired) {
  *repaired = 0;
  Status st;
  const bool known = with_arch_traits(arch, endian, [&](auto traits) {
    st = walk_raw_arch<typename decltype(traits)::type>(in, version, cache, opts, out, repaired);
  });
  if (!known) return make_error(SPROV_ERR_UNSUPPORTED, "raw unwinding of %s is not implemented", arch_name(arch));
  return st;
}

}  // namespace stackprov::unwind
