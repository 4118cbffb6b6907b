// SPDX-License-Identifier: Apache-2.0
// C ABI, fast path (stackprov/fast.h): unwinding into caller buffers, sprov_address_space, raw and signal-handler walks.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "arch/host.hpp"
#include "capi/internal.hpp"
#include "core/module_map.hpp"
#include "perf/kernel_symbols.hpp"
#include "perf/perf_data.hpp"
#include "stackprov/kernel.h"
#include "unwind/address_space.hpp"
#include "unwind/arch_dispatch.hpp"
#include "unwind/raw_unwind.hpp"

using namespace stackprov;
using namespace stackprov::capi;

struct sprov_address_space {
  sprov_context* ctx = nullptr;
  Arch arch = Arch::kUnknown;
  Endian endian = Endian::kLittle;
  int64_t pid = 0;  ///< the real pid (the caller's for opts.pid 0)
  bool self = false;
  bool debug_frames_loaded = false;
  std::unique_ptr<unwind::AddressSpace> as;
  perf::RecordDecoder decoder;  ///< records without a sample_id trailer (sprov_address_space_perf_record)
};

namespace {

constexpr size_t kMinFrameSize = offsetof(struct sprov_raw_frame, flags);  // pc .. method
static_assert(sizeof(struct sprov_raw_frame) == 48, "sprov_raw_frame is a fixed layout");
static_assert(offsetof(struct sprov_raw_frame, flags) == 40, "sprov_raw_frame.flags");
static_assert(sizeof(unwind::ShadowRecord) == sizeof(struct sprov_shadow_entry) &&
                  offsetof(struct sprov_shadow_entry, slot) == offsetof(unwind::ShadowRecord, slot),
              "shadow records are passed through");

/// The reason a buffer is unusable, or nullptr. No allocation (signal handlers).
const char* bad_buf(const struct sprov_unwind_buf* buf) {
  if (buf == nullptr) return "buf is NULL";
  if (buf->sz < SPROV_OFFSETOFEND(struct sprov_unwind_buf, stop_reason)) return "buf->sz is too small";
  if (buf->capacity == 0) return "buf->capacity is 0";
  if (buf->frames == nullptr && buf->pcs == nullptr) return "buf has neither frames nor pcs";
  if (buf->frames != nullptr && buf->frame_sz < kMinFrameSize) return "buf->frame_sz is below 40";
  return nullptr;
}

/// Walk options for `buf`: the unwinder's, at most buf->capacity frames (the
/// scratch vector was reserved to the unwinder's max_frames: no allocation).
unwind::WalkOptions buf_opts(const sprov_unwinder* uw, const struct sprov_unwind_buf* buf) {
  unwind::WalkOptions o = uw->opts;
  o.max_frames = std::min<uint32_t>(o.max_frames, buf->capacity);
  return o;
}

/// The walk's count, stop reason and generation into the caller's buffer (its frames or pcs are
/// written), counted in the unwinder's statistics.
void fill_buf_pcs(sprov_unwinder* uw, uint32_t n, unwind::StopReason stop, uint64_t generation, uint32_t repaired,
                  struct sprov_unwind_buf* buf) {
  buf->count = n;
  buf->stop_reason = static_cast<int32_t>(stop);
  if (buf->sz >= SPROV_OFFSETOFEND(struct sprov_unwind_buf, generation)) buf->generation = generation;
  if (buf->sz >= SPROV_OFFSETOFEND(struct sprov_unwind_buf, repaired)) buf->repaired = repaired;
  uw->frames += n;
  uw->walks++;
}

/// Copies the walk into the caller's buffer. `modules`: what module_index refers to.
void fill_buf(sprov_unwinder* uw, const unwind::WalkResult& r, const std::vector<memory::SnapshotModule>& modules,
              uint64_t generation, uint32_t repaired, struct sprov_unwind_buf* buf) {
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(r.frames.size(), buf->capacity));
  if (buf->frames == nullptr) {  // a profiler's pcs alone: one store a frame
    uint64_t* pcs = buf->pcs;
    for (uint32_t i = 0; i < n; i++) pcs[i] = r.frames[i].pc;
  }
  for (uint32_t i = 0; i < n && buf->frames != nullptr; i++) {
    const unwind::Frame& f = r.frames[i];
    if (buf->pcs != nullptr) buf->pcs[i] = f.pc;
    struct sprov_raw_frame fr = {};
    fr.pc = f.pc;
    fr.sp = f.sp;
    fr.cfa = f.cfa;
    fr.module_index = f.module_index;
    fr.method = static_cast<int32_t>(f.method);
    fr.flags = f.flags | (f.lookup_prev ? static_cast<uint32_t>(SPROV_FRAME_RETURN_ADDRESS) : 0u);
    if (f.module_index >= 0 && static_cast<size_t>(f.module_index) < modules.size())
      fr.module_offset = f.pc - modules[f.module_index].load_bias;
    char* dst = reinterpret_cast<char*>(buf->frames) + static_cast<size_t>(i) * buf->frame_sz;
    if (buf->frame_sz == sizeof(fr)) {  // the caller's struct is ours: one fixed-size copy
      std::memcpy(dst, &fr, sizeof(fr));
      continue;
    }
    std::memcpy(dst, &fr, std::min<size_t>(buf->frame_sz, sizeof(fr)));
    if (buf->frame_sz > sizeof(fr)) std::memset(dst + sizeof(fr), 0, buf->frame_sz - sizeof(fr));
  }
  fill_buf_pcs(uw, n, r.stop, generation, repaired, buf);
}

Result<std::vector<uint8_t>> read_file(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(-errno, "%s: %s", path, strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return make_error(-e, "%s: read: %s", path, strerror(e));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  close(fd);
  return bytes;
}

/// Applies one MMAP/MMAP2/COMM record of the address space's pid.
Status apply_record(sprov_address_space* as, const perf::RecordDecoder& dec, const uint8_t* rec, size_t len,
                    unwind::AddressSpace::Batch& b) {
  if (len < 8) return make_error(SPROV_ERR_TRUNCATED, "perf record of %zu bytes (header needs 8)", len);
  const uint32_t type = static_cast<uint32_t>(rec[0]) | static_cast<uint32_t>(rec[1]) << 8 |
                        static_cast<uint32_t>(rec[2]) << 16 | static_cast<uint32_t>(rec[3]) << 24;
  if (type == perf::kRecordMmap || type == perf::kRecordMmap2) {
    perf::RawMmap m;
    if (Status st = dec.decode_mmap(rec, len, &m); !st.ok()) return st;
    if (static_cast<int64_t>(m.pid) != as->pid) return {};
    return b.mmap(m);
  }
  if (type == perf::kRecordComm) {
    perf::RawComm c;
    if (Status st = dec.decode_comm(rec, len, &c); !st.ok()) return st;
    if (c.exec && c.pid == c.tid && static_cast<int64_t>(c.pid) == as->pid) b.exec();
  }
  return {};
}

int update(sprov_address_space* as, const char* what, const std::function<Status(unwind::AddressSpace::Batch&)>& fn) {
  return guard([&] {
    if (as == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "%s: address space is NULL", what));
    Status st = as->as->update(fn);
    return st.ok() ? 0 : fail(st.error());
  });
}

}  // namespace

namespace {
/// A raw walk into `buf` (arguments checked by the callers).
int walk_raw_into(sprov_unwinder* uw, const sprov_address_space* as, const unwind::RawWalkInput& w,
                  struct sprov_unwind_buf* buf) {
  unwind::WalkOptions o = buf_opts(uw, buf);
  o.jit_ranges = jit_ranges(uw, as->pid);  // the address space's process's perf map
  unwind::PinnedVersion v(*as->as);
  uint32_t repaired = 0;
  Status st = unwind::walk_raw(as->arch, as->endian, w, *v, uw->cache, o, &uw->scratch, &repaired);
  if (!st.ok()) return fail(st.error());
  fill_buf(uw, uw->scratch, v->modules, v->generation, repaired, buf);
  return 0;
}
}  // namespace

extern "C" {

SPROV_API int sprov_unwinder_unwind_into(sprov_unwinder* uw, const sprov_snapshot* snap, struct sprov_unwind_buf* buf) {
  return guard([&] {
    if (uw == nullptr || snap == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_unwind_into: %s is NULL", uw ? "snap" : "uw"));
    if (const char* why = bad_buf(buf)) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_unwind_into: %s", why));
    if (int e = prepare_snapshot_walk(uw, snap)) return e;
    unwind::WalkOptions o = buf_opts(uw, buf);
    o.jit_ranges = jit_ranges(uw, snap->snap.pid);  // as sprov_unwinder_unwind
    if (buf->frames == nullptr) {  // a profiler's pcs alone: no frame records (Unwinder::walk_pcs)
      const size_t n = unwind::walk_snapshot_pcs(snap->snap, uw->table, uw->cache, o, buf->pcs, &uw->scratch);
      fill_buf_pcs(uw, static_cast<uint32_t>(n), uw->scratch.stop, 0, 0, buf);
      return 0;
    }
    unwind::walk_snapshot(snap->snap, uw->table, uw->cache, o, &uw->scratch);
    fill_buf(uw, uw->scratch, *uw->table_modules, 0, 0, buf);
    return 0;
  });
}

SPROV_API int sprov_address_space_new(sprov_context* ctx, const struct sprov_address_space_opts* opts,
                                      sprov_address_space** out) {
  return guard([&] {
    if (ctx == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_new: NULL %s", ctx ? "out" : "ctx"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_address_space_opts), "sprov_address_space_opts")) return e;
    const int64_t pid = SPROV_OPTS_GET(opts, sprov_address_space_opts, pid, int64_t{0});
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_address_space_opts, flags, 0u);
    const int32_t arch = SPROV_OPTS_GET(opts, sprov_address_space_opts, arch, 0);
    const int32_t endian = SPROV_OPTS_GET(opts, sprov_address_space_opts, endian, 0);
    const char* root = SPROV_OPTS_GET(opts, sprov_address_space_opts, root, static_cast<const char*>(nullptr));
    constexpr uint32_t kKnown = SPROV_AS_EMPTY | SPROV_AS_LOAD_DEBUG_FRAME;
    if (flags & ~kKnown)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown address space flags 0x%x", flags & ~kKnown));
    if (SPROV_OPTS_GET(opts, sprov_address_space_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_opts.reserved must be 0"));
    if (pid < 0 || pid > 0x3fffffff) return fail(make_error(SPROV_ERR_INVALID_ARG, "pid %lld is not a process id",
                                                            static_cast<long long>(pid)));
    if (endian != SPROV_ENDIAN_LITTLE && endian != SPROV_ENDIAN_BIG)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown endian %d", endian));
    auto as = std::make_unique<sprov_address_space>();
    as->ctx = ctx;
    if (arch == 0) {
      as->arch = arch::HostTraits::kArch;
      as->endian = arch::HostTraits::kBigEndian ? Endian::kBig : Endian::kLittle;
    } else {
      as->arch = static_cast<Arch>(arch);
      as->endian = static_cast<Endian>(endian);
      if (!unwind::unwinds_arch(as->arch))
        return fail(make_error(SPROV_ERR_UNSUPPORTED, "arch %d is not unwound by this build", arch));
      if (as->arch != Arch::kMips32 && as->endian != Endian::kLittle)
        return fail(make_error(SPROV_ERR_INVALID_ARG, "%s is little-endian only", arch_name(as->arch)));
    }
    as->self = pid == 0 || pid == getpid();
    as->pid = pid == 0 ? getpid() : pid;
    std::string module_root;
    if (root != nullptr) module_root = root;
    else if (!as->self && !(flags & SPROV_AS_EMPTY)) module_root = "/proc/" + std::to_string(as->pid) + "/root";
    const std::string tracker_root = root != nullptr || !module_root.empty() ? module_root : ctx->ctx.config().sysroot;
    as->debug_frames_loaded = (flags & SPROV_AS_LOAD_DEBUG_FRAME) != 0;
    sprov_address_space* raw = as.get();
    auto loader = [raw, module_root](const memory::SnapshotModule& m, const memory::Snapshot& vdso) {
      return acquire_unwind_module(raw->ctx, &vdso, m, module_root, raw->arch, raw->endian);
    };
    as->as = std::make_unique<unwind::AddressSpace>(static_cast<uint32_t>(as->pid), tracker_root, loader,
                                                    as->debug_frames_loaded);
    if (Status st = as->decoder.init({perf::EventAttr{}}); !st.ok()) return fail(st.error());
    // A live process's files, opened where it sees them (its /proc/PID/root, or this process's own
    // files): each is checked to be the file its maps line names. A caller's root holds copies.
    if (root == nullptr && !(flags & SPROV_AS_EMPTY) && (!as->self || ctx->ctx.config().sysroot.empty()))
      as->as->set_live(as->pid);
    if (!(flags & SPROV_AS_EMPTY)) {
      auto text = read_maps_text(as->self ? 0 : static_cast<int>(as->pid));
      if (!text.ok()) return fail(text.error());
      Status st = as->as->update([&](unwind::AddressSpace::Batch& b) { return b.maps(text.value()); });
      if (!st.ok()) return fail(st.error());
    }
    *out = as.release();
    return 0;
  });
}

SPROV_API void sprov_address_space_free(sprov_address_space* as) { delete as; }

SPROV_API int sprov_address_space_refresh(sprov_address_space* as) {
  if (as == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_refresh: address space is NULL"));
  return guard([&] {
    auto text = read_maps_text(as->self ? 0 : static_cast<int>(as->pid));
    if (!text.ok()) return fail(text.error());
    return update(as, "sprov_address_space_refresh",
                  [&](unwind::AddressSpace::Batch& b) { return b.maps(text.value()); });
  });
}

SPROV_API int sprov_address_space_load_maps(sprov_address_space* as, const char* maps_text) {
  return guard([&] {
    if (maps_text == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_load_maps: maps_text is NULL"));
    return update(as, "sprov_address_space_load_maps", [&](unwind::AddressSpace::Batch& b) { return b.maps(maps_text); });
  });
}

SPROV_API int sprov_address_space_add_mapping(sprov_address_space* as, const struct sprov_mapping* m) {
  if (m == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_add_mapping: mapping is NULL"));
  if (int e = check_opts(m, SPROV_OPTS_KNOWN(sprov_mapping), "sprov_mapping")) return e;
  if (m->end < m->start)
    return fail(make_error(SPROV_ERR_INVALID_ARG, "mapping 0x%llx-0x%llx ends before it starts",
                           static_cast<unsigned long long>(m->start), static_cast<unsigned long long>(m->end)));
  const uint32_t id_len = SPROV_OPTS_GET(m, sprov_mapping, build_id_len, 0u);
  const uint8_t* id = SPROV_OPTS_GET(m, sprov_mapping, build_id, static_cast<const uint8_t*>(nullptr));
  if (id_len > ModuleId::kMax || (id_len != 0 && id == nullptr))
    return fail(make_error(SPROV_ERR_INVALID_ARG, "build_id_len %u with build_id %p", id_len, static_cast<const void*>(id)));
  return guard([&] {
    perf::RawMmap r;
    r.start = m->start;
    r.len = m->end - m->start;
    r.pgoff = m->file_offset;
    r.path = m->path != nullptr ? m->path : "";
    r.prot = SPROV_OPTS_GET(m, sprov_mapping, prot, 0u);
    if (id_len != 0) r.build_id = ModuleId::from_bytes(id, id_len);
    return update(as, "sprov_address_space_add_mapping", [&](unwind::AddressSpace::Batch& b) { return b.mmap(r); });
  });
}

SPROV_API int sprov_address_space_remove_range(sprov_address_space* as, uint64_t start, uint64_t end) {
  return guard([&] {
    return update(as, "sprov_address_space_remove_range",
                  [&](unwind::AddressSpace::Batch& b) { return b.unmap(start, end); });
  });
}

SPROV_API int sprov_address_space_exec(sprov_address_space* as) {
  return guard([&] {
    return update(as, "sprov_address_space_exec", [&](unwind::AddressSpace::Batch& b) {
      b.exec();
      return Status();
    });
  });
}

SPROV_API int sprov_address_space_perf_record(sprov_address_space* as, const void* rec, size_t len) {
  return guard([&] {
    if (rec == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_perf_record: rec is NULL"));
    if (as == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_perf_record: address space is NULL"));
    return update(as, "sprov_address_space_perf_record", [&](unwind::AddressSpace::Batch& b) {
      return apply_record(as, as->decoder, static_cast<const uint8_t*>(rec), len, b);
    });
  });
}

SPROV_API int sprov_address_space_load_perf_data(sprov_address_space* as, const char* path) {
  if (as == nullptr || path == nullptr)
    return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_load_perf_data: NULL %s", as ? "path" : "as"));
  return guard([&] {
    auto bytes = read_file(path);
    if (!bytes.ok()) return fail(bytes.error());
    auto pd = perf::PerfData::parse(bytes.value().data(), bytes.value().size());
    if (!pd.ok()) return fail(make_error(pd.error().code, "%s: %s", path, pd.error().message.c_str()));
    const perf::PerfData& p = pd.value();
    return update(as, "sprov_address_space_load_perf_data", [&](unwind::AddressSpace::Batch& b) {
      for (const perf::RecordRef& r : p.records()) {
        if (r.type != perf::kRecordMmap && r.type != perf::kRecordMmap2 && r.type != perf::kRecordComm) continue;
        Status st = apply_record(as, p.decoder(), p.bytes() + r.offset, r.size, b);
        if (!st.ok())
          return Status(make_error(st.error().code, "%s: record at offset %llu: %s", path,
                                   static_cast<unsigned long long>(r.offset), st.error().message.c_str()));
      }
      return Status();
    });
  });
}

SPROV_API uint64_t sprov_address_space_generation(const sprov_address_space* as) {
  return as ? as->as->generation() : 0;
}

SPROV_API size_t sprov_address_space_module_count(const sprov_address_space* as) {
  return guard_value<size_t>(0, [&]() -> size_t {
    return as ? as->as->current().modules.size() : 0;
  });
}

SPROV_API int sprov_address_space_module(const sprov_address_space* as, size_t index, struct sprov_module_info* out) {
  return guard([&] {
    if (as == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_address_space_module: address space is NULL"));
    const auto& mods = as->as->current().modules;
    if (index >= mods.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "module index %zu out of range (%zu modules)", index, mods.size()));
    return fill_out(out, module_info(mods[index]), "sprov_module_info");
  });
}

SPROV_API const char* sprov_address_space_warnings(const sprov_address_space* as) {
  return guard_value<const char*>("", [&]() -> const char* {
    return as ? as->as->current().warnings.c_str() : "";
  });
}

SPROV_API int sprov_unwinder_unwind_raw(sprov_unwinder* uw, const sprov_address_space* as,
                                        const struct sprov_raw_input* in, struct sprov_unwind_buf* buf) {
  return guard([&] {
    if (uw == nullptr || as == nullptr || in == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_unwind_raw: %s is NULL",
                             uw == nullptr ? "uw" : as == nullptr ? "as" : "in"));
    if (int e = check_opts(in, SPROV_OPTS_KNOWN(sprov_raw_input), "sprov_raw_input")) return e;
    if (const char* why = bad_buf(buf)) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_unwind_raw: %s", why));
    unwind::RawWalkInput w;
    w.format = static_cast<unwind::RegsFormat>(SPROV_OPTS_GET(in, sprov_raw_input, regs_format, 0));
    const uint32_t flags = SPROV_OPTS_GET(in, sprov_raw_input, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_RAW_PC_IS_RETURN_ADDRESS))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown raw input flags 0x%x", flags));
    w.pc_is_return_address = (flags & SPROV_RAW_PC_IS_RETURN_ADDRESS) != 0;
    w.regs = SPROV_OPTS_GET(in, sprov_raw_input, regs, static_cast<const void*>(nullptr));
    w.regs_len = SPROV_OPTS_GET(in, sprov_raw_input, regs_len, size_t{0});
    w.regs_mask = SPROV_OPTS_GET(in, sprov_raw_input, regs_mask, uint64_t{0});
    w.stack_addr = SPROV_OPTS_GET(in, sprov_raw_input, stack_addr, uint64_t{0});
    w.stack = static_cast<const uint8_t*>(SPROV_OPTS_GET(in, sprov_raw_input, stack, static_cast<const void*>(nullptr)));
    w.stack_len = SPROV_OPTS_GET(in, sprov_raw_input, stack_len, size_t{0});
    if (w.stack == nullptr && w.stack_len != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "stack is NULL with stack_len %zu", w.stack_len));
    if (w.stack_addr + w.stack_len < w.stack_addr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "stack 0x%llx+%zu wraps",
                             static_cast<unsigned long long>(w.stack_addr), w.stack_len));
    const auto* shadow = SPROV_OPTS_GET(in, sprov_raw_input, shadow, static_cast<const struct sprov_shadow_entry*>(nullptr));
    w.shadow_count = SPROV_OPTS_GET(in, sprov_raw_input, shadow_count, size_t{0});
    if (shadow == nullptr && w.shadow_count != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "shadow is NULL with shadow_count %zu", w.shadow_count));
    w.shadow = reinterpret_cast<const unwind::ShadowRecord*>(shadow);
    return walk_raw_into(uw, as, w, buf);
  });
}

// ------------------------------------------------------------- kernel events (stackprov/kernel.h)

struct sprov_kernel_symbols {
  perf::KernelSymbols syms;
};

SPROV_API int sprov_kernel_symbols_open(const char* kallsyms_path, sprov_kernel_symbols** out) {
  return guard([&] {
    if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_symbols_open: out is NULL"));
    *out = nullptr;
    auto syms = perf::KernelSymbols::load(kallsyms_path ? kallsyms_path : "/proc/kallsyms");
    if (!syms) return fail(std::move(syms).error());
    *out = new sprov_kernel_symbols{std::move(syms).value()};
    return 0;
  });
}

SPROV_API void sprov_kernel_symbols_free(sprov_kernel_symbols* ks) { delete ks; }

static_assert(offsetof(struct sprov_kernel_event, user_regs) == 72 &&
                  offsetof(struct sprov_kernel_event, kernel_ips) == 72 + 8 * SPROV_KERNEL_PT_REGS_WORDS &&
                  SPROV_KERNEL_EVENT_FIXED == 72 + 8 * (SPROV_KERNEL_PT_REGS_WORDS + SPROV_KERNEL_MAX_FRAMES),
              "struct sprov_kernel_event is the BPF program's layout");

SPROV_API int sprov_kernel_event_stitch(sprov_unwinder* uw, const sprov_address_space* as, const sprov_kernel_symbols* ks,
                                        const void* event, size_t len, struct sprov_stitched_frame* frames,
                                        size_t capacity, struct sprov_stitch_result* out) {
  return guard([&] {
    if (uw == nullptr || as == nullptr || event == nullptr || frames == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_event_stitch: %s is NULL",
                             uw == nullptr ? "uw" : as == nullptr ? "as" : event == nullptr ? "event"
                                                 : frames == nullptr ? "frames" : "out"));
    if (capacity == 0) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_event_stitch: capacity 0"));
    if (int e = check_opts(out, SPROV_OPTS_KNOWN(sprov_stitch_result), "sprov_stitch_result")) return e;
    if (len < SPROV_KERNEL_EVENT_FIXED)
      return fail(make_error(SPROV_ERR_TRUNCATED, "kernel event: %zu bytes, the fixed part is %zu", len,
                             static_cast<size_t>(SPROV_KERNEL_EVENT_FIXED)));
    // The fixed part, copied (the event may be unaligned, e.g. in a ring buffer).
    auto h = std::make_unique<sprov_kernel_event>();
    std::memcpy(h.get(), event, SPROV_KERNEL_EVENT_FIXED);
    if (h->magic != SPROV_KERNEL_EVENT_MAGIC)
      return fail(make_error(SPROV_ERR_BAD_FORMAT, "kernel event: magic 0x%08x, expected 0x%08x", h->magic,
                             SPROV_KERNEL_EVENT_MAGIC));
    if (h->version != SPROV_KERNEL_EVENT_VERSION)
      return fail(make_error(SPROV_ERR_BAD_FORMAT, "kernel event: version %u, this library reads %u", h->version,
                             SPROV_KERNEL_EVENT_VERSION));
    if (h->kernel_count > SPROV_KERNEL_MAX_FRAMES)
      return fail(make_error(SPROV_ERR_BAD_FORMAT, "kernel event: kernel_count %u, at most %d", h->kernel_count,
                             SPROV_KERNEL_MAX_FRAMES));
    if (h->stack_len > SPROV_KERNEL_MAX_STACK)
      return fail(make_error(SPROV_ERR_BAD_FORMAT, "kernel event: stack_len %u, at most %d", h->stack_len,
                             SPROV_KERNEL_MAX_STACK));
    if (len - SPROV_KERNEL_EVENT_FIXED < h->stack_len)
      return fail(make_error(SPROV_ERR_TRUNCATED, "kernel event: stack_len %u, %zu bytes after the fixed part",
                             h->stack_len, len - SPROV_KERNEL_EVENT_FIXED));
    if (h->stack_addr + h->stack_len < h->stack_addr)
      return fail(make_error(SPROV_ERR_BAD_FORMAT, "kernel event: stack 0x%llx+%u wraps",
                             static_cast<unsigned long long>(h->stack_addr), h->stack_len));
    size_t n = 0;
    for (uint32_t i = 0; i < h->kernel_count && n < capacity; i++) {
      if (h->kernel_ips[i] >= static_cast<uint64_t>(-4095)) continue;  // perf's context markers are not frames
      sprov_stitched_frame& f = frames[n++];
      f = {};
      f.pc = h->kernel_ips[i];
      f.domain = SPROV_DOMAIN_KERNEL;
      f.method = SPROV_METHOD_CALLCHAIN;
      f.module_index = -1;
      if (const perf::KernelSymbols::Symbol* s = ks ? ks->syms.find(f.pc) : nullptr) {
        f.symbol = s->name.data();
        f.module = s->module.data();
        f.symbol_offset = f.pc - s->start;
      }
    }
    const uint32_t kernel_n = static_cast<uint32_t>(n);
    int32_t stop = SPROV_STOP_NONE;
    uint64_t generation = 0;
    if ((h->flags & SPROV_KEV_USER_REGS) && n < capacity) {
      unwind::RawWalkInput w;
      w.format = static_cast<unwind::RegsFormat>(SPROV_REGS_PT_REGS);
      w.regs = h->user_regs;
      w.regs_len = sizeof(h->user_regs);
      w.stack_addr = h->stack_addr;
      w.stack = static_cast<const uint8_t*>(event) + SPROV_KERNEL_EVENT_FIXED;
      w.stack_len = h->stack_len;
      std::vector<sprov_raw_frame> raw(std::min<size_t>(capacity - n, UINT32_MAX));
      SPROV_OPTS(sprov_unwind_buf, buf, .frames = raw.data(), .capacity = static_cast<uint32_t>(raw.size()),
                 .frame_sz = sizeof(sprov_raw_frame));
      if (int e = walk_raw_into(uw, as, w, &buf)) return e;
      for (uint32_t i = 0; i < buf.count && n < capacity; i++, n++) {
        sprov_stitched_frame& f = frames[n];
        f = {};
        f.pc = raw[i].pc;
        f.sp = raw[i].sp;
        f.symbol_offset = raw[i].module_offset;
        f.domain = SPROV_DOMAIN_USER;
        f.method = raw[i].method;
        f.module_index = raw[i].module_index;
        f.flags = raw[i].flags | (i == 0 && kernel_n > 0 ? SPROV_FRAME_KERNEL_USER_BOUNDARY : 0u);
      }
      stop = buf.stop_reason;
      generation = buf.generation;
    }
    out->count = static_cast<uint32_t>(n);
    out->kernel_count = kernel_n;
    out->user_stop_reason = stop;
    out->generation = generation;
    return 0;
  });
}

SPROV_API int sprov_unwinder_set_stack(sprov_unwinder* uw, uint64_t lo, uint64_t hi) {
  return guard([&] {
    if (uw == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_set_stack: uw is NULL"));
    if (lo == 0 && hi == 0) {
      pthread_attr_t attr;
      if (int e = pthread_getattr_np(pthread_self(), &attr); e != 0)
        return fail(make_error(-e, "pthread_getattr_np: %s", strerror(e)));
      void* base = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&attr, &base, &size);
      pthread_attr_destroy(&attr);
      lo = reinterpret_cast<uint64_t>(base);
      hi = lo + size;
    }
    if (hi <= lo)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "stack 0x%llx-0x%llx is empty", static_cast<unsigned long long>(lo),
                             static_cast<unsigned long long>(hi)));
    uw->stack_lo = lo;
    uw->stack_hi = hi;
    // The JIT ranges of this process's perf map, read here and not in the signal handler; a later
    // call takes up the entries the JIT has written since.
    uw->signal_jit =
        uw->ctx->ctx.config().offline ? nullptr : symbolize::PerfMap::load_pid(static_cast<int64_t>(getpid()));
    return 0;
  });
}

SPROV_API int sprov_unwinder_unwind_signal(sprov_unwinder* uw, const sprov_address_space* as, const void* ucontext,
                                           struct sprov_unwind_buf* buf) {
  return guard([&]() -> int {
    // Async-signal-safe: no allocation, no lock, no last error (fail() allocates).
    if (uw == nullptr || as == nullptr || ucontext == nullptr || bad_buf(buf) != nullptr || uw->stack_hi == 0)
      return SPROV_ERR_INVALID_ARG;
    if (as->arch != arch::HostTraits::kArch || !as->self) return SPROV_ERR_UNSUPPORTED;
    unwind::RawWalkInput w;
    w.format = unwind::RegsFormat::kUcontext;
    w.regs = ucontext;
    w.regs_len = sizeof(ucontext_t);
    w.self_stack_lo = uw->stack_lo;
    w.self_stack_hi = uw->stack_hi;
    unwind::WalkOptions o = buf_opts(uw, buf);
    o.use_debug_frame = o.use_debug_frame && as->debug_frames_loaded;  // never load a debug file here
    o.may_allocate = false;  // compiling an FDE's rows allocates: misses run the interpreter
    o.jit_ranges = uw->signal_jit ? &uw->signal_jit->ranges() : nullptr;  // read by set_stack
    unwind::PinnedVersion v(*as->as);
    uint32_t repaired = 0;
    Status st = unwind::walk_raw(as->arch, as->endian, w, *v, uw->cache, o, &uw->scratch, &repaired);
    if (!st.ok()) return st.error().code;
    fill_buf(uw, uw->scratch, v->modules, v->generation, repaired, buf);
    return 0;
  });
}

}  // extern "C"
