// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_snapshot — in-process capture, hand-built snapshots, accessors, (de)serialization.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "capi/internal.hpp"
#include "core/module_map.hpp"
#include "elf/elf_image.hpp"
#include "memory/live_readers.hpp"
#include "memory/module_list.hpp"

// The host's traits for in-process capture: arch/host.hpp (the only place that selects them).
#include "arch/host.hpp"
using HostCaptureTraits = stackprov::arch::HostTraits;

using namespace stackprov;
using namespace stackprov::capi;

namespace {


/// Adds the module list, reporting unreadable modules through the context log. `live_pid`: see
/// add_modules_from_maps (this process's own listing, or 0 for a listing the caller gives).
Status add_modules(sprov_context* ctx, memory::Snapshot& s, const std::vector<MapsEntry>& maps, int64_t live_pid) {
  std::string warnings;
  Status st = memory::add_modules_from_maps(s, maps, s.module_root, &warnings, live_pid);
  if (!warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "%s", warnings.c_str());
  return st;
}

/// Copies the calling process's own memory (a mapped range: the caller checked it against
/// /proc/self/maps) without sanitizer instrumentation. A stack copy spans other frames' ASan
/// redzones and variables other threads may write; neither is an error here (the unwinder
/// reads only saved registers and return addresses from the copy). Word-sized volatile reads
/// keep the compiler from turning the loop into an (intercepted) memcpy.
__attribute__((noinline, no_sanitize("address", "hwaddress", "thread"))) std::vector<uint8_t> copy_own_memory(uint64_t addr,
                                                                                      size_t len) {
  std::vector<uint8_t> out(len);
  uint8_t* dst = out.data();
  size_t i = 0;
  if ((addr & (sizeof(uintptr_t) - 1)) == 0) {
    const volatile uintptr_t* words = reinterpret_cast<const volatile uintptr_t*>(static_cast<uintptr_t>(addr));
    for (; i + sizeof(uintptr_t) <= len; i += sizeof(uintptr_t)) {
      const uintptr_t w = words[i / sizeof(uintptr_t)];
      std::memcpy(dst + i, &w, sizeof(w));
    }
  }
  const volatile uint8_t* bytes = reinterpret_cast<const volatile uint8_t*>(static_cast<uintptr_t>(addr));
  for (; i < len; i++) dst[i] = bytes[i];
  return out;
}

/// `shared_mapping`: a mapping another thread may unmap meanwhile (the vDSO is safe, but small
/// anonymous code pages such as a JIT's are not), read without faulting (process_vm_readv on
/// ourselves, else a pipe); the thread's own stack cannot vanish under its own capture.
Status add_own_memory(memory::Snapshot& s, uint64_t addr, uint64_t len, bool shared_mapping = false) {
  if (len == 0 || len > (uint64_t{1} << 30))
    return make_error(SPROV_ERR_INVALID_ARG, "own memory region 0x%llx+0x%llx is empty or too large",
                      static_cast<unsigned long long>(addr), static_cast<unsigned long long>(len));
  if (shared_mapping) {
    std::vector<uint8_t> bytes(static_cast<size_t>(len));
    memory::LocalReader reader;
    if (!reader.read(addr, bytes.data(), bytes.size()))
      return make_error(SPROV_ERR_MEMORY_UNREADABLE, "region [0x%llx, 0x%llx) is no longer readable",
                        static_cast<unsigned long long>(addr), static_cast<unsigned long long>(addr + len));
    return s.add_memory(addr, bytes.data(), bytes.size());
  }
  const std::vector<uint8_t> bytes = copy_own_memory(addr, static_cast<size_t>(len));
  return s.add_memory(addr, bytes.data(), bytes.size());
}

}  // namespace

/// Called by the arch's sprov_snapshot_capture_self trampoline (arch/<isa>/capture.cpp)
/// with the caller's registers in DWARF numbering: HostCaptureTraits::kNumRegs slots of
/// kAddrSize bytes each (u64 on x86_64/arm64, u32 on mips32), pc = the return address.
extern "C" __attribute__((visibility("hidden"))) int stackprov_capture_self_impl(
    sprov_context* ctx, const struct sprov_capture_opts* opts, sprov_snapshot** out,
    const void* regs) {
  using T = HostCaptureTraits;
  auto reg = [regs](int r) -> uint64_t {
    if constexpr (T::kAddrSize == 4) return static_cast<const uint32_t*>(regs)[r];
    else return static_cast<const uint64_t*>(regs)[r];
  };
  return guard([&] {
    if (ctx == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_capture_self: NULL %s",
                             ctx == nullptr ? "ctx" : "out"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_capture_opts), "sprov_capture_opts")) return e;
    uint32_t max_bytes = SPROV_OPTS_GET(opts, sprov_capture_opts, max_stack_bytes, 0u);
    if (max_bytes == 0) max_bytes = kSelfDefaultStackBytes;
    if (max_bytes > kMaxStackBytes)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "max_stack_bytes %u exceeds %u", max_bytes,
                             kMaxStackBytes));
    if (SPROV_OPTS_GET(opts, sprov_capture_opts, skip_frames, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "skip_frames must be 0 (reserved)"));

    auto snap = std::make_unique<sprov_snapshot>();
    memory::Snapshot& s = snap->snap;
    s.arch = T::kArch;
    s.endian = T::kBigEndian ? Endian::kBig : Endian::kLittle;
    s.pid = getpid();
    s.tid = static_cast<int64_t>(syscall(SYS_gettid));
    for (int r = 0; r < T::kNumRegs; r++) {
      // mips32: 32..36 are $f0..$f4 (not captured); only $0..$31 and the pc (37).
      if constexpr (T::kArch == Arch::kMips32)
        if (r >= 32 && r < T::kPcReg) continue;
      s.set_reg(r, reg(r));
    }
    s.flags |= memory::Snapshot::kFlagPcIsReturnAddress;
    const uint64_t sp = reg(T::kSpReg);

    auto text = read_maps_text(0);
    if (!text.ok()) return fail(text.error());
    auto maps = parse_maps(text.value());
    if (!maps.ok()) return fail(maps.error());

    // The stack region holding sp (the thread stack or an alternate signal stack).
    const MapsEntry* sp_map = nullptr;
    for (const MapsEntry& e : maps.value())
      if (sp >= e.start && sp < e.end) sp_map = &e;
    if (sp_map == nullptr)
      return fail(make_error(SPROV_ERR_CAPTURE, "sp 0x%llx is not in any mapping",
                             static_cast<unsigned long long>(sp)));
    uint64_t end = std::min<uint64_t>(sp_map->end, sp + max_bytes);
    if (Status st = add_own_memory(s, sp, end - sp); !st.ok())
      return fail(st.error());
    // On an alternate signal stack, also copy the top of the thread's own stack,
    // where the interrupted frames are.
    bool off_thread_stack = false;  // a sigaltstack or a coroutine's stack
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* lo = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&attr, &lo, &size);
      pthread_attr_destroy(&attr);
      const uint64_t top = reinterpret_cast<uint64_t>(lo) + size;
      if (lo != nullptr && !(sp >= reinterpret_cast<uint64_t>(lo) && sp < top)) {
        off_thread_stack = true;
        uint64_t from = std::max<uint64_t>(reinterpret_cast<uint64_t>(lo), top - std::min<uint64_t>(size, max_bytes));
        for (const MapsEntry& e : maps.value())  // only the mapped part
          if (top > e.start && top <= e.end) from = std::max(from, e.start);
        if (Status st = add_own_memory(s, from, top - from); !st.ok())
          ctx->ctx.log(SPROV_LOG_WARN, "thread stack copy skipped: %s", st.error().message.c_str());
      }
    }
    // The vDSO's bytes, so that it can be parsed offline.
    for (const MapsEntry& e : maps.value()) {
      // Also small anonymous executable pages: qemu-user puts the signal trampoline
      // (mov x8,#139; svc #0 / li v0,4119; syscall) on one instead of in a vDSO.
      const bool anon_code = e.path.empty() && e.readable && e.executable && e.end - e.start <= (64u << 10);
      if ((e.path == kVdsoName || anon_code) && e.end - e.start <= (1u << 20)) {
        if (Status st = add_own_memory(s, e.start, e.end - e.start, /*shared_mapping=*/true); !st.ok())
          ctx->ctx.log(SPROV_LOG_WARN, "vdso copy skipped: %s", st.error().message.c_str());
      }
    }
    if (Status st = add_modules(ctx, s, maps.value(), static_cast<int64_t>(getpid())); !st.ok()) return fail(st.error());
    // Async boundaries the program registered (doc/async-stacks.md). Off the thread's own stack (a
    // coroutine's, where uc_link's context lies elsewhere) or with registrations, one walk over
    // live memory copies what the walk reads besides the stack (the resumer's context and stack,
    // uc_link's context, the async frame records) so that the snapshot unwinds the same later.
    capture_async_registrations(s);
    if (off_thread_stack || !s.async.empty()) {
      memory::LocalReader live;
      prewalk_record(ctx, s, live);
    }
    *out = snap.release();
    return 0;
  });
}

static_assert(SPROV_ID_NONE == static_cast<int>(stackprov::IdKind::kNone) &&
              SPROV_ID_ELF_BUILD_ID == static_cast<int>(stackprov::IdKind::kElfBuildId) &&
              SPROV_ID_PDB_GUID_AGE == static_cast<int>(stackprov::IdKind::kPdbGuidAge) &&
              SPROV_ID_MACHO_UUID == static_cast<int>(stackprov::IdKind::kMachoUuid) &&
              SPROV_ID_PE_CODE_ID == static_cast<int>(stackprov::IdKind::kPeCodeId));

namespace stackprov::capi {

struct sprov_module_info module_info(const memory::SnapshotModule& m) {
  struct sprov_module_info info = {};
  info.sz = sizeof(info);
  info.start = m.start;
  info.end = m.end;
  info.file_offset = m.file_offset;
  info.load_bias = m.load_bias;
  info.path = m.path.c_str();
  const bool elf = m.build_id.len && m.build_id.kind == IdKind::kElfBuildId;
  info.build_id = elf ? m.build_id.bytes : nullptr;
  info.build_id_len = elf ? m.build_id.len : 0;
  info.id_kind = m.build_id.len ? static_cast<int32_t>(m.build_id.kind) : SPROV_ID_NONE;
  info.id_len = m.build_id.len;
  info.id = m.build_id.len ? m.build_id.bytes : nullptr;
  return info;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_snapshot_new(int arch, int endian, sprov_snapshot** out) {
  return guard([&] {
    if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_new: out is NULL"));
    *out = nullptr;
    if (arch < SPROV_ARCH_X86_64 || arch > SPROV_ARCH_MIPS32)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown arch %d", arch));
    if (endian != SPROV_ENDIAN_LITTLE && endian != SPROV_ENDIAN_BIG)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown endian %d", endian));
    if (arch != SPROV_ARCH_MIPS32 && endian != SPROV_ENDIAN_LITTLE)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "%s is little-endian only", arch_name(static_cast<Arch>(arch))));
    auto* s = new sprov_snapshot();
    s->snap.arch = static_cast<Arch>(arch);
    s->snap.endian = static_cast<Endian>(endian);
    *out = s;
    return 0;
  });
}

SPROV_API int sprov_snapshot_set_reg(sprov_snapshot* snap, uint32_t dwarf_reg, uint64_t value) {
  return guard([&] {
    if (snap == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_set_reg: snap is NULL"));
    if (dwarf_reg >= static_cast<uint32_t>(memory::kSnapshotMaxRegs))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "DWARF register %u out of range (max %d)", dwarf_reg,
                             memory::kSnapshotMaxRegs - 1));
    snap->snap.set_reg(static_cast<int>(dwarf_reg), value);
    return 0;
  });
}

SPROV_API int sprov_snapshot_add_memory(sprov_snapshot* snap, uint64_t addr, const void* bytes, size_t len) {
  return guard([&] {
    if (snap == nullptr || (bytes == nullptr && len != 0))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_add_memory: NULL argument"));
    if (Status st = snap->snap.add_memory(addr, bytes, len); !st.ok()) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_snapshot_add_module(sprov_snapshot* snap, const struct sprov_module_info* mod) {
  return guard([&] {
    if (snap == nullptr || mod == nullptr || mod->path == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_add_module: NULL argument"));
    if (mod->sz < SPROV_OFFSETOFEND(struct sprov_module_info, build_id_len))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_module_info.sz = %zu is too small", mod->sz));
    if (mod->end <= mod->start)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "module %s: empty range 0x%llx-0x%llx", mod->path,
                             static_cast<unsigned long long>(mod->start),
                             static_cast<unsigned long long>(mod->end)));
    memory::SnapshotModule m;
    m.start = mod->start;
    m.end = mod->end;
    m.file_offset = mod->file_offset;
    m.load_bias = mod->load_bias;
    m.path = mod->path;
    if (mod->build_id != nullptr && mod->build_id_len > 0) {
      if (mod->build_id_len > ModuleId::kMax)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "build-id of %u bytes (max %zu)", mod->build_id_len,
                               ModuleId::kMax));
      m.build_id = ModuleId::from_bytes(mod->build_id, mod->build_id_len);
    }
    const bool has_id_fields = mod->sz >= SPROV_OFFSETOFEND(struct sprov_module_info, id);
    if (has_id_fields && mod->id_kind != SPROV_ID_NONE) {
      if (mod->id_kind < SPROV_ID_ELF_BUILD_ID || mod->id_kind > SPROV_ID_PE_CODE_ID)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "module %s: unknown id_kind %d", mod->path, mod->id_kind));
      if (mod->id == nullptr || mod->id_len == 0 || mod->id_len > ModuleId::kMax)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "module %s: %s id of %u bytes%s (1 to %zu)", mod->path,
                               id_kind_name(static_cast<IdKind>(mod->id_kind)), mod->id_len,
                               mod->id == nullptr ? " at NULL" : "", ModuleId::kMax));
      const ModuleId id = ModuleId::from_bytes(mod->id, mod->id_len, static_cast<IdKind>(mod->id_kind));
      if (!m.build_id.empty() && m.build_id != id)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "module %s: build_id %s and %s id %s disagree", mod->path,
                               m.build_id.hex().c_str(), id_kind_name(id.kind), id.hex().c_str()));
      m.build_id = id;
    } else if (has_id_fields && mod->id != nullptr && mod->id_len != 0) {
      return fail(make_error(SPROV_ERR_INVALID_ARG, "module %s: id of %u bytes with id_kind SPROV_ID_NONE", mod->path,
                             mod->id_len));
    }
    if (m.build_id.empty()) {  // none given: the file's, if it has one
      if (auto id = elf::read_build_id(m.path); id.ok()) m.build_id = id.value();
    }
    snap->invalidate_modules_key();
    if (Status st = snap->snap.add_module(std::move(m)); !st.ok()) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_snapshot_add_maps(sprov_context* ctx, sprov_snapshot* snap, const char* maps_text) {
  return guard([&] {
    if (ctx == nullptr || snap == nullptr || maps_text == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_add_maps: NULL argument"));
    auto maps = parse_maps(maps_text);
    if (!maps.ok()) return fail(maps.error());
    snap->snap.module_root = ctx->ctx.config().sysroot;
    snap->invalidate_modules_key();
    if (Status st = add_modules(ctx, snap->snap, maps.value(), 0); !st.ok()) return fail(st.error());
    return 0;
  });
}

SPROV_API void sprov_snapshot_set_ids(sprov_snapshot* snap, int64_t pid, int64_t tid) {
  if (snap == nullptr) return;
  snap->snap.pid = pid;
  snap->snap.tid = tid;
}

SPROV_API void sprov_snapshot_free(sprov_snapshot* snap) { delete snap; }

SPROV_API int sprov_snapshot_arch(const sprov_snapshot* snap) {
  return snap ? static_cast<int>(snap->snap.arch) : SPROV_ARCH_UNKNOWN;
}
SPROV_API int64_t sprov_snapshot_pid(const sprov_snapshot* snap) { return snap ? snap->snap.pid : 0; }
SPROV_API int64_t sprov_snapshot_tid(const sprov_snapshot* snap) { return snap ? snap->snap.tid : 0; }

SPROV_API int sprov_snapshot_reg(const sprov_snapshot* snap, uint32_t dwarf_reg, uint64_t* value) {
  return guard([&] {
    if (snap == nullptr || value == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_reg: NULL argument"));
    if (!snap->snap.has_reg(static_cast<int>(dwarf_reg)))
      return fail(make_error(SPROV_ERR_NOT_FOUND, "DWARF register %u was not captured", dwarf_reg));
    *value = snap->snap.regs[dwarf_reg];
    return 0;
  });
}

SPROV_API int sprov_snapshot_read_memory(const sprov_snapshot* snap, uint64_t addr, void* buf, size_t len) {
  return guard([&] {
    if (snap == nullptr || (buf == nullptr && len != 0))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_read_memory: NULL argument"));
    memory::SnapshotReader rd(snap->snap);
    if (!rd.read(addr, buf, len))
      return fail(make_error(SPROV_ERR_MEMORY_UNREADABLE, "0x%llx+%zu is not in the snapshot",
                             static_cast<unsigned long long>(addr), len));
    return 0;
  });
}

SPROV_API size_t sprov_snapshot_module_count(const sprov_snapshot* snap) {
  return snap ? snap->snap.modules.size() : 0;
}

SPROV_API int sprov_snapshot_module(const sprov_snapshot* snap, size_t index, struct sprov_module_info* out) {
  return guard([&] {
    if (snap == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_module: snap is NULL"));
    if (index >= snap->snap.modules.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "module index %zu out of range (%zu modules)", index,
                             snap->snap.modules.size()));
    return fill_out(out, module_info(snap->snap.modules[index]), "sprov_module_info");
  });
}

SPROV_API int sprov_snapshot_serialize(const sprov_snapshot* snap, void** out, size_t* out_len) {
  return guard([&] {
    if (snap == nullptr || out == nullptr || out_len == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_serialize: NULL argument"));
    std::vector<uint8_t> bytes = memory::serialize(snap->snap);
    void* p = std::malloc(bytes.size() ? bytes.size() : 1);
    if (p == nullptr) return fail(Error{SPROV_ERR_NOMEM, "serialized snapshot buffer"});
    std::memcpy(p, bytes.data(), bytes.size());
    *out = p;
    *out_len = bytes.size();
    return 0;
  });
}

SPROV_API int sprov_snapshot_deserialize(const void* bytes, size_t len, sprov_snapshot** out) {
  return guard([&] {
    if (bytes == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_snapshot_deserialize: NULL argument"));
    *out = nullptr;
    auto s = memory::deserialize(static_cast<const uint8_t*>(bytes), len);
    if (!s.ok()) return fail(s.error());
    auto* h = new sprov_snapshot();
    h->snap = std::move(s).value();
    *out = h;
    return 0;
  });
}

}  // extern "C"
