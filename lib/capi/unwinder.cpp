// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_unwinder (rule cache, module table) and sprov_stack (the unwound frames).
#include <algorithm>

#include "capi/internal.hpp"
#include "memory/recording_reader.hpp"
#include "unwind/arch_dispatch.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

/// Resolves the snapshot's modules through the context cache; reused while
/// consecutive snapshots have the same module list, and swapped back in from
/// the unwinder's recent tables (an LRU of sprov_unwinder::recent_tables) when
/// an earlier list comes back.
void build_table(sprov_unwinder* uw, const memory::Snapshot& s, uint64_t key) {
  auto same = [&](const unwind::ModuleTable& t, const auto& mods) {
    return t.key == key && t.size() == s.modules.size() && key != 0 && mods != nullptr;
  };
  if (same(uw->table, uw->table_modules)) return;
  // Rotate: the current table becomes the most recent; the one found (or the
  // least recent, to be rebuilt) becomes current.
  auto& recent = uw->recent_tables;
  size_t hit = recent.size() - 1;
  for (size_t i = 0; i < recent.size(); i++) {
    if (same(recent[i].table, recent[i].modules)) {
      hit = i;
      break;
    }
  }
  std::swap(uw->table, recent[hit].table);
  std::swap(uw->table_modules, recent[hit].modules);
  std::swap(uw->table_loaded, recent[hit].loaded);
  std::rotate(recent.begin(), recent.begin() + static_cast<long>(hit), recent.begin() + static_cast<long>(hit) + 1);
  if (same(uw->table, uw->table_modules)) return;
  uw->table.clear();
  uw->table_modules = std::make_shared<const std::vector<memory::SnapshotModule>>(s.modules);
  auto loaded = std::make_shared<std::vector<std::shared_ptr<unwind::LoadedModule>>>();
  pipeline::load_module_table(*uw->ctx, s, uw->table, *loaded);
  uw->table.key = key;
  uw->table_loaded = std::move(loaded);
}

}  // namespace

namespace stackprov::capi {

const std::shared_ptr<const symbolize::PerfMap>& jit_map(sprov_unwinder* uw, int64_t pid) {
  static const std::shared_ptr<const symbolize::PerfMap> kNone;
  if (uw->captured_jit) return uw->captured_jit;
  if (pid <= 0 || uw->ctx->ctx.config().offline) return kNone;
  if (pid != uw->jit_pid) {
    uw->jit_map = uw->perf_maps.get(pid);
    uw->jit_pid = pid;
  }
  return uw->jit_map;
}

const std::vector<std::pair<uint64_t, uint64_t>>* jit_ranges(sprov_unwinder* uw, int64_t pid) {
  const std::shared_ptr<const symbolize::PerfMap>& m = jit_map(uw, pid);
  return m ? &m->ranges() : nullptr;
}

int prepare_snapshot_walk(sprov_unwinder* uw, const sprov_snapshot* snap) {
  const memory::Snapshot& s = snap->snap;
  if (Status st = pipeline::check_unwindable(s); !st) return fail(st.error());
  build_table(uw, s, snap->modules_key());
  return 0;
}

}  // namespace stackprov::capi

namespace stackprov::capi {

const char* register_name(int arch, int reg) {
  const char* name = nullptr;
  unwind::with_arch_traits(static_cast<Arch>(arch), Endian::kLittle, [&](auto traits) {
    using T = typename decltype(traits)::type;
    if (reg >= 0 && reg < T::kNumRegs) name = arch::Ops<T>::reg_name(reg);
  });
  return name;
}

struct sprov_coroutine_link coroutine_link_out(const sprov_stack* stack, const unwind::CoroutineLink& l) {
  struct sprov_coroutine_link o = {};
  o.sz = sizeof(o);
  o.frame = l.frame;
  o.slot = l.slot;
  o.context = l.context;
  o.pc = l.pc;
  o.sp = l.sp;
  o.has_regs = l.has_regs ? 1 : 0;
  o.module_index = -1;
  if (l.has_regs && l.pc != 0 && stack->modules) {
    // The module holding the return address's call (pc - 1), as for a caller frame.
    const auto& mods = *stack->modules;
    for (size_t m = 0; m < mods.size(); m++) {
      if (l.pc - 1 >= mods[m].start && l.pc - 1 < mods[m].end) {
        o.module_index = static_cast<int32_t>(m);
        o.module_offset = l.pc - mods[m].load_bias;
        o.module_path = mods[m].path.c_str();
        break;
      }
    }
  }
  return o;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_unwinder_new(sprov_context* ctx, const struct sprov_unwinder_opts* opts,
                                 sprov_unwinder** out) {
  return guard([&] {
    if (ctx == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_new: NULL %s", ctx ? "out" : "ctx"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_unwinder_opts), "sprov_unwinder_opts")) return e;
    uint32_t max_frames = SPROV_OPTS_GET(opts, sprov_unwinder_opts, max_frames, 0u);
    uint32_t flags = SPROV_OPTS_GET(opts, sprov_unwinder_opts, flags, 0u);
    uint32_t scan_words = SPROV_OPTS_GET(opts, sprov_unwinder_opts, scan_words, 0u);
    if (max_frames > 65536)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "max_frames %u exceeds 65536", max_frames));
    constexpr uint32_t kKnownFlags =
        SPROV_UNWIND_NO_FRAME_POINTER | SPROV_UNWIND_ALLOW_SCAN | SPROV_UNWIND_NO_DEBUG_FRAME |
        SPROV_UNWIND_KEEP_REGISTERS;
    if (flags & ~kKnownFlags)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown unwinder flags 0x%x", flags & ~kKnownFlags));
    if (scan_words > 4096)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "scan_words %u exceeds 4096", scan_words));
    if (SPROV_OPTS_GET(opts, sprov_unwinder_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_opts.reserved must be 0"));
    auto* uw = new sprov_unwinder();
    uw->ctx = ctx;
    uw->opts.max_frames = max_frames ? max_frames : 256;
    uw->opts.use_frame_pointer = !(flags & SPROV_UNWIND_NO_FRAME_POINTER);
    uw->opts.use_debug_frame = !(flags & SPROV_UNWIND_NO_DEBUG_FRAME);
    uw->opts.allow_scan = (flags & SPROV_UNWIND_ALLOW_SCAN) != 0;
    uw->opts.keep_registers = (flags & SPROV_UNWIND_KEEP_REGISTERS) != 0;
    uw->opts.scan_words = scan_words ? scan_words : 64;
    uw->scratch.frames.reserve(uw->opts.max_frames);  // walks never allocate (stackprov/fast.h)
    uw->scratch.links.reserve(unwind::kMaxAsyncHops);
    *out = uw;
    return 0;
  });
}

SPROV_API void sprov_unwinder_free(sprov_unwinder* uw) { delete uw; }

SPROV_API int sprov_unwinder_unwind(sprov_unwinder* uw, const sprov_snapshot* snap, sprov_stack** out) {
  return guard([&] {
    if (uw == nullptr || snap == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_unwind: NULL argument"));
    *out = nullptr;
    if (int e = prepare_snapshot_walk(uw, snap)) return e;
    const memory::Snapshot& s = snap->snap;
    // JIT code of a live process or its core: the ranges of its perf map (doc/runtime-frames.md).
    // A trace's captured entries stand for the map (and are read offline too).
    const std::shared_ptr<const symbolize::PerfMap>& jit = jit_map(uw, s.pid);
    unwind::WalkOptions o = uw->opts;
    o.jit_ranges = jit ? &jit->ranges() : nullptr;
    unwind::walk_snapshot(s, uw->table, uw->cache, o, &uw->scratch);
    auto* st = new sprov_stack();
    st->frames = uw->scratch.frames;
    st->regs = uw->scratch.regs;
    st->arch = s.arch;
    st->stop = uw->scratch.stop;
    st->links = uw->scratch.links;
    st->modules = uw->table_modules;
    st->loaded = uw->table_loaded;
    st->module_root = s.module_root;
    st->pid = s.pid;
    st->jit = jit;
    uw->frames += st->frames.size();
    uw->walks++;
    *out = st;
    return 0;
  });
}

SPROV_API int sprov_stack_frame_registers(const sprov_stack* stack, size_t index, uint64_t* values, size_t count,
                                          uint64_t* known) {
  return guard([&] {
    if (stack == nullptr || known == nullptr || (values == nullptr && count != 0))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_frame_registers: NULL %s",
                             stack == nullptr ? "stack" : known == nullptr ? "known" : "values"));
    if (index >= stack->frames.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                             stack->frames.size()));
    if (stack->regs.size() != stack->frames.size())
      return fail(make_error(SPROV_ERR_NOT_FOUND,
                             "the stack kept no registers (unwinder without SPROV_UNWIND_KEEP_REGISTERS)"));
    const unwind::FrameRegs& r = stack->regs[index];
    const size_t n = std::min<size_t>(count, unwind::FrameRegs::kMax);
    *known = n >= 64 ? r.known : r.known & ((uint64_t{1} << n) - 1);
    for (size_t i = 0; i < n; i++) values[i] = ((*known >> i) & 1) ? r.v[i] : 0;
    return 0;
  });
}

SPROV_API const char* sprov_register_name(int arch, int reg) {
  return guard_value<const char*>(nullptr, [&]() -> const char* { return register_name(arch, reg); });
}

SPROV_API int sprov_unwinder_stats(const sprov_unwinder* uw, struct sprov_unwinder_stats* out) {
  return guard([&] {
    if (uw == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_unwinder_stats: uw is NULL"));
    struct sprov_unwinder_stats s = {};
    s.sz = sizeof(s);
    s.rule_cache_hits = uw->cache.hits();
    s.rule_cache_misses = uw->cache.misses();
    s.frames = uw->frames;
    s.walks = uw->walks;
    return fill_out(out, s, "sprov_unwinder_stats");
  });
}

SPROV_API size_t sprov_stack_frame_count(const sprov_stack* stack) { return stack ? stack->frames.size() : 0; }

SPROV_API int sprov_stack_frame(const sprov_stack* stack, size_t index, struct sprov_frame* out) {
  return guard([&] {
    if (stack == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_frame: stack is NULL"));
    if (index >= stack->frames.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                             stack->frames.size()));
    const unwind::Frame& f = stack->frames[index];
    struct sprov_frame fr = {};
    fr.sz = sizeof(fr);
    fr.pc = f.pc;
    fr.sp = f.sp;
    fr.cfa = f.cfa;
    fr.method = static_cast<int32_t>(f.method);
    fr.module_index = f.module_index;
    fr.domain = static_cast<int32_t>(f.domain);
    fr.flags = f.flags | (f.lookup_prev ? static_cast<uint32_t>(SPROV_FRAME_RETURN_ADDRESS) : 0u);
    // The first frame below a kernel segment (sprov_process_kernel_stack): the segment changes there.
    if (!stack->kernel.frames.empty() && index == stack->kernel.frames.size())
      fr.flags |= SPROV_FRAME_KERNEL_USER_BOUNDARY;
    if (f.module_index >= 0 && static_cast<size_t>(f.module_index) < stack->modules->size()) {
      const memory::SnapshotModule& m = (*stack->modules)[f.module_index];
      fr.module_offset = f.pc - m.load_bias;
      fr.module_path = m.path.c_str();
      const bool elf = m.build_id.len && m.build_id.kind == IdKind::kElfBuildId;
      fr.build_id = elf ? m.build_id.bytes : nullptr;
      fr.build_id_len = elf ? m.build_id.len : 0;
      fr.id_kind = m.build_id.len ? static_cast<int32_t>(m.build_id.kind) : SPROV_ID_NONE;
      fr.module_id_len = m.build_id.len;
      fr.module_id = m.build_id.len ? m.build_id.bytes : nullptr;
    }
    return fill_out(out, fr, "sprov_frame");
  });
}

SPROV_API int sprov_stack_stop_reason(const sprov_stack* stack) {
  return stack ? static_cast<int>(stack->stop) : SPROV_STOP_NONE;
}

SPROV_API void sprov_stack_free(sprov_stack* stack) { delete stack; }

SPROV_API size_t sprov_stack_coroutine_link_count(const sprov_stack* stack) {
  return stack ? stack->links.size() : 0;
}

SPROV_API int sprov_stack_coroutine_link(const sprov_stack* stack, size_t index, struct sprov_coroutine_link* out) {
  return guard([&] {
    if (stack == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_coroutine_link: stack is NULL"));
    if (index >= stack->links.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "coroutine link index %zu out of range (%zu links)", index,
                             stack->links.size()));
    const struct sprov_coroutine_link o = coroutine_link_out(stack, stack->links[index]);
    return fill_out(out, o, "sprov_coroutine_link");
  });
}

}  // extern "C"

namespace stackprov::capi {

namespace {

/// One walk over the live reader that records every byte it reads into `snap`.
template <class Traits>
void prewalk_arch(sprov_unwinder& uw, memory::Snapshot& snap, memory::MemoryReader& live) {
  using Rec = memory::RecordingReader<memory::MemoryReader>;
  Rec rec(snap, live);
  typename unwind::Unwinder<Traits, Rec>::Regs regs{};
  for (int r = 0; r < Traits::kNumRegs; r++)
    if (snap.has_reg(r)) regs.set(r, snap.regs[r]);
  unwind::WalkOptions o = uw.opts;
  if (!snap.async.empty()) o.async = &snap.async;  // the walk past async boundaries records its reads too
  unwind::Unwinder<Traits, Rec> walker(uw.table, uw.cache, o, rec);
  walker.walk(regs, (snap.flags & memory::Snapshot::kFlagPcIsReturnAddress) != 0, &uw.scratch);
}

}  // namespace

void prewalk_record(sprov_context* ctx, memory::Snapshot& snap, memory::MemoryReader& live) {
  sprov_unwinder uw;
  uw.ctx = ctx;
  uw.opts.max_frames = 1024;
  unwind::with_arch_traits(snap.arch, snap.endian, [&](auto traits) {
    build_table(&uw, snap, snap.module_list_hash());
    prewalk_arch<typename decltype(traits)::type>(uw, snap, live);
  });
}

}  // namespace stackprov::capi
