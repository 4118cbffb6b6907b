// SPDX-License-Identifier: Apache-2.0
// Replay of a stored trace under seeded perturbations (relocated modules, module insert order,
// thread order, cache size, workers), offline from its bundles, and the gate's checks.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <type_traits>

#include "arch/arch_ops.hpp"
#include "evidence/json.hpp"
#include "pipeline/trace.hpp"

#include "stackprov/stackprov.h"

namespace stackprov::pipeline {

namespace {

using Clock = std::chrono::steady_clock;
using evidence::Json;

constexpr uint64_t kPage = 4096;
constexpr size_t kMaxMismatchesKept = 20;

// ------------------------------------------------------------ perturbation

/// A module mapping group (every mapping of one file: same path and build-id) moves as one.
struct Group {
  std::string key;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  ///< original [start, end)
  int64_t delta = 0;
};

std::string group_key(const memory::SnapshotModule& m) { return m.path + "\n" + m.build_id.hex(); }

/// What a relocation of a snapshot's modules may use, from its arch's traits
/// (arch/<isa>/registers.hpp): where user space ends, the largest shift drawn, the word size of
/// the pointers it rewrites.
struct AddressSpace {
  uint64_t user_end = 0;
  uint64_t max_shift_pages = 0;
  size_t word = 0;
};

AddressSpace address_space(const memory::Snapshot& s) {
  AddressSpace a;
  auto from = [&](auto traits) {
    using Traits = typename decltype(traits)::type;
    a = {Traits::kUserAddrEnd, Traits::kMaxReplayShift / kPage, static_cast<size_t>(Traits::kAddrSize)};
  };
  // A snapshot of an arch without traits (Arch::kUnknown): relocated as an x86-64 space, as
  // replays always have, so that its perturbation reads the same; its walk stops at once anyway.
  if (!arch::with_arch_traits(s.arch, s.endian, from)) from(std::type_identity<arch::x86_64::Traits>{});
  return a;
}

/// Draws one page-aligned delta per group such that no moved module overlaps another or any
/// memory region that stays, and every address stays in user space. Tries per-group deltas,
/// then one delta for all. `stay`: more ranges that do not move (the trace's JIT code).
Status draw_deltas(const memory::Snapshot& s, std::vector<Group>& groups, std::mt19937_64& rng,
                   const std::vector<std::pair<uint64_t, uint64_t>>& stay) {
  const AddressSpace space = address_space(s);
  const uint64_t limit = space.user_end;
  // Memory regions that do not move: those not inside any module range (the module ranges, sorted:
  // a binary search per region, not a scan of every module).
  std::vector<std::pair<uint64_t, uint64_t>> mod_ranges;
  for (const auto& g : groups) mod_ranges.insert(mod_ranges.end(), g.ranges.begin(), g.ranges.end());
  std::sort(mod_ranges.begin(), mod_ranges.end());
  auto inside_module = [&](const memory::MemoryRegion& r) {
    // Ranges do not overlap (a snapshot's modules do not): only the last one starting at or
    // before the region can hold it.
    auto it = std::upper_bound(mod_ranges.begin(), mod_ranges.end(), r.addr,
                               [](uint64_t v, const std::pair<uint64_t, uint64_t>& x) { return v < x.first; });
    return it != mod_ranges.begin() && r.addr + r.size() <= std::prev(it)->second;
  };
  std::vector<std::pair<uint64_t, uint64_t>> fixed = stay;
  for (const auto& r : s.memory)
    if (!inside_module(r)) fixed.emplace_back(r.addr, r.addr + r.size());
  // Ranges that stay may overlap one another (JIT code the walk read): merged, only moved ones must not overlap.
  std::sort(fixed.begin(), fixed.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : fixed) {
    if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  fixed = std::move(merged);
  auto valid = [&]() {
    std::vector<std::pair<uint64_t, uint64_t>> moved;
    for (const auto& g : groups)
      for (auto [a, b] : g.ranges) {
        // Unsigned, wrapping: a stored module near 2^63 must not overflow a signed sum (UB); a
        // wrapped range lands above the limit or below its start and is refused.
        const uint64_t na = a + static_cast<uint64_t>(g.delta), nb = b + static_cast<uint64_t>(g.delta);
        if (na < 0x10000 || nb > limit || nb < na) return false;
        moved.emplace_back(na, nb);
      }
    std::vector<std::pair<uint64_t, uint64_t>> all = moved;
    all.insert(all.end(), fixed.begin(), fixed.end());
    std::sort(all.begin(), all.end());
    for (size_t i = 1; i < all.size(); ++i)
      if (all[i].first < all[i - 1].second) return false;
    return true;
  };
  const uint64_t max_pages = space.max_shift_pages;
  auto draw = [&]() {
    const int64_t pages = static_cast<int64_t>(1 + rng() % max_pages);
    return (rng() & 1 ? pages : -pages) * static_cast<int64_t>(kPage);
  };
  for (int attempt = 0; attempt < 256; ++attempt) {
    for (auto& g : groups) g.delta = draw();
    if (valid()) return {};
  }
  for (int attempt = 0; attempt < 256; ++attempt) {
    const int64_t d = draw();
    for (auto& g : groups) g.delta = d;
    if (valid()) return {};
  }
  return make_error(SPROV_ERR_LIMIT, "no page-aligned relocation of the %zu modules fits the address space", groups.size());
}

/// Moves every module of `s` by its group's delta, with the memory regions inside it, and
/// every register and stack word that points into a module.
void relocate(memory::Snapshot& s, const std::vector<Group>& groups) {
  std::map<std::string, int64_t> delta;
  for (const auto& g : groups) delta[g.key] = g.delta;
  struct R {
    uint64_t a, b;
    int64_t d;
  };
  std::vector<R> ranges;
  for (const auto& g : groups)
    for (auto [a, b] : g.ranges) ranges.push_back({a, b, g.delta});
  std::sort(ranges.begin(), ranges.end(), [](const R& x, const R& y) { return x.a < y.a; });
  auto find = [&](uint64_t v) -> const R* {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), v, [](uint64_t x, const R& r) { return x < r.a; });
    if (it == ranges.begin()) return nullptr;
    --it;
    return v < it->b ? &*it : nullptr;
  };
  const size_t w = address_space(s).word;
  const bool be = s.endian == Endian::kBig;
  for (auto& r : s.memory) {
    r.own();  // its words are rewritten below
    if (const R* m = find(r.addr); m && r.addr + r.bytes.size() <= m->b) {
      r.addr += static_cast<uint64_t>(m->d);  // a copy of module bytes
      continue;
    }
    for (size_t off = (w - r.addr % w) % w; off + w <= r.bytes.size(); off += w) {
      uint64_t v = 0;
      for (size_t k = 0; k < w; ++k) v |= static_cast<uint64_t>(r.bytes[off + (be ? w - 1 - k : k)]) << (8 * k);
      const R* m = find(v);
      if (!m) continue;
      v += static_cast<uint64_t>(m->d);
      for (size_t k = 0; k < w; ++k) r.bytes[off + (be ? w - 1 - k : k)] = static_cast<uint8_t>(v >> (8 * k));
    }
  }
  std::sort(s.memory.begin(), s.memory.end(), [](const auto& x, const auto& y) { return x.addr < y.addr; });
  for (int i = 0; i < memory::kSnapshotMaxRegs; ++i)
    if (s.has_reg(i))
      if (const R* m = find(s.regs[i])) s.regs[i] += static_cast<uint64_t>(m->d);
  // The interpreter's evaluation-loop ranges (runtime section) move with their module.
  for (auto& r : s.runtime.eval)
    if (const R* m = find(r.start)) {
      r.start += static_cast<uint64_t>(m->d);
      r.end += static_cast<uint64_t>(m->d);
    }
  for (auto& m : s.modules) {
    const uint64_t d = static_cast<uint64_t>(delta[group_key(m)]);  // wrapping, as the addresses do
    m.start += d;
    m.end += d;
    m.load_bias += d;
  }
}

/// Rebuilds the module list by inserting the modules in `order` (the list stays sorted by
/// address: the order modules are learned in must not matter).
Status reinsert_modules(memory::Snapshot& s, const std::vector<size_t>& order) {
  // `order` is drawn from the first thread's list; stored threads may hold other lists (a hostile
  // store): indices past this one's are skipped and its extra modules follow in their order.
  std::vector<memory::SnapshotModule> mods = std::move(s.modules);
  s.modules.clear();
  std::vector<memory::SnapshotModule> in;
  in.reserve(mods.size());
  std::vector<bool> taken(mods.size(), false);
  for (size_t i : order)
    if (i < mods.size() && !taken[i]) {
      taken[i] = true;
      in.push_back(mods[i]);
    }
  for (size_t i = order.size(); i < mods.size(); ++i) in.push_back(mods[i]);
  return s.set_modules(std::move(in));
}

// ---------------------------------------------------------------- compare

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

std::string describe(const trace::Frame& f) {
  std::string s = (f.module_path.empty() ? std::string("??") : f.module_path) + "+" + hex(f.module_offset) + " " +
                  (f.symbol.empty() ? "??" : f.symbol);
  if (!f.file.empty()) s += " " + f.file + ":" + std::to_string(f.line);
  if (!f.inline_chain.empty()) s += " (" + std::to_string(f.inline_chain.size()) + " inlined)";
  if (f.unwind_method == "runtime") s += " [runtime]";  // a CPython frame (it has no module)
  return s;
}

/// Module (path and build-id), module offset, function, file:line and the inline chain. The
/// build-id matters to the gate: platform-id checks the stored frames' build-ids against the signed
/// bundles, so a replayed frame of another module (resolved from an unsigned bundle of the store)
/// must not count as the same frame.
bool same_frame(const trace::Frame& a, const trace::Frame& b) {
  return a.module_path == b.module_path && a.module_build_id == b.module_build_id && a.module_id_kind == b.module_id_kind &&
         a.module_offset == b.module_offset && a.symbol == b.symbol && a.file == b.file && a.line == b.line &&
         a.inline_chain == b.inline_chain;
}

/// A thread's unwound frames: inferred ones (tail-call frames from DWARF call sites) are not
/// replayed — a replay unwinds offline, from bundles, which carry no call sites — and not compared,
/// as the comparisons with eu-stack and perf leave them out.
std::vector<const trace::Frame*> unwound_frames(const trace::Thread* t) {
  std::vector<const trace::Frame*> out;
  if (t)
    for (const trace::Frame& f : t->frames)
      if (!trace::frame_inferred(f)) out.push_back(&f);
  return out;
}

/// A CPython frame of a trace (doc/runtime-frames.md "Traces": method runtime, resolver python).
bool python_frame(const trace::Frame& f) { return f.unwind_method == "runtime" && f.resolver == "python"; }

void compare(const std::vector<trace::Thread>& recorded, const std::vector<trace::Thread>& replayed, ReplaySeed& r) {
  std::map<uint64_t, const trace::Thread*> by_tid;
  for (const auto& t : replayed) by_tid[t.tid] = &t;
  // The Python segment's own count: each recorded Python frame against the replay's at its place
  // (a replay that loses one, or puts a native frame there, counts it as differing).
  size_t py_threads = 0, py_frames = 0, py_identical = 0;
  for (const auto& rt : recorded) {
    const trace::Thread* pt = by_tid.count(rt.tid) ? by_tid[rt.tid] : nullptr;
    const std::vector<const trace::Frame*> rec = unwound_frames(&rt), rep = unwound_frames(pt);
    const size_t n = std::max(rec.size(), rep.size());
    bool py_thread = false;
    for (size_t i = 0; i < n; ++i) {
      ++r.frames;
      const trace::Frame* a = i < rec.size() ? rec[i] : nullptr;
      const trace::Frame* b = i < rep.size() ? rep[i] : nullptr;
      if (b && frame_covered(*b)) ++r.covered;
      const bool py = a != nullptr && python_frame(*a);
      if (py) {
        ++py_frames;
        py_thread = true;
      }
      if (a && b && same_frame(*a, *b) && python_frame(*a) == python_frame(*b)) {
        ++r.identical;
        if (py) ++py_identical;
        continue;
      }
      if (r.mismatches.size() < kMaxMismatchesKept)
        r.mismatches.push_back("thread " + std::to_string(rt.tid) + " frame #" + std::to_string(i) + ": recorded " +
                               (a ? describe(*a) : "(none)") + ", replayed " + (b ? describe(*b) : "(none)"));
    }
    if (py_thread) ++py_threads;
  }
  if (py_frames != 0)
    r.python = {{"mode", "recorded"},
                {"reason",
                 "no interpreter is read offline: the frames are derived again from the interpreter data the "
                 "capture kept (snapshot section 5), placed by the relocated evaluation-loop ranges, and compared "
                 "as recorded (symbol, file, line)"},
                {"threads", py_threads},
                {"frames", py_frames},
                {"identical", py_identical}};
}

std::string utc_timestamp() {
  const std::string t = trace::now_rfc3339();  // YYYY-MM-DDTHH:MM:SS.ffffffZ
  return t.substr(0, 19);
}

std::string hostname() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0 || !*h) return "localhost";
  return h;
}

/// Runs one seed: perturbs copies of the captured threads, resolves them offline from the
/// staged bundles and compares with the recorded frames.
ReplaySeed replay_seed(const Session& base, const BundleStaging& stg,
                       const std::vector<trace::CapturedThread>& cap,
                       const std::shared_ptr<const symbolize::PerfMap>& jit, const std::vector<trace::Thread>& recorded,
                       uint64_t seed) {
  ReplaySeed r;
  r.seed = seed;
  const auto t0 = Clock::now();
  std::mt19937_64 rng(seed);
  // Groups from the first thread's module list (every thread of a process has the same list).
  std::vector<Group> groups;
  if (!cap.empty()) {
    std::map<std::string, size_t> at;
    for (const auto& m : cap.front().snapshot.modules) {
      const std::string k = group_key(m);
      if (!at.count(k)) {
        at[k] = groups.size();
        groups.push_back({k, {}, 0});
      }
      groups[at[k]].ranges.emplace_back(m.start, m.end);
    }
  }
  std::vector<memory::Snapshot> snaps;
  for (const auto& c : cap) snaps.push_back(c.snapshot);
  if (!snaps.empty()) {
    // JIT code is outside every module: it stays, named by the captured perf-map entries.
    static const std::vector<std::pair<uint64_t, uint64_t>> kNone;
    if (Status st = draw_deltas(snaps.front(), groups, rng, jit ? jit->ranges() : kNone); !st) {
      r.error = st.error().message;
      return r;
    }
  }
  std::vector<size_t> module_order(snaps.empty() ? 0 : snaps.front().modules.size());
  for (size_t i = 0; i < module_order.size(); ++i) module_order[i] = i;
  std::shuffle(module_order.begin(), module_order.end(), rng);
  const uint32_t cache = 1 + static_cast<uint32_t>(rng() % 3);
  const uint32_t workers = 1 + static_cast<uint32_t>(rng() % 4);
  std::vector<size_t> thread_order(snaps.size());
  for (size_t i = 0; i < thread_order.size(); ++i) thread_order[i] = i;
  std::shuffle(thread_order.begin(), thread_order.end(), rng);

  Json deltas = Json::object();
  for (const auto& g : groups) {
    const std::string path = g.key.substr(0, g.key.find('\n'));
    std::string d(1, g.delta < 0 ? '-' : '+');  // appended, not "-" + string&& (GCC 12 -Wrestrict, PR 105329)
    d += hex(static_cast<uint64_t>(g.delta < 0 ? -g.delta : g.delta));
    deltas[path] = std::move(d);
  }
  r.perturbation = {{"relocation", deltas},
                    {"module_insert_order", module_order},
                    {"thread_order", thread_order},
                    {"module_cache_capacity", cache},
                    {"workers", workers},
                    {"bundles_only", true}};
  std::vector<memory::Snapshot> owned;
  owned.reserve(thread_order.size());
  for (size_t i : thread_order) {
    memory::Snapshot s = snaps[i];
    relocate(s, groups);
    if (Status st = reinsert_modules(s, module_order); !st) {
      r.error = "thread " + std::to_string(s.tid) + ": " + st.error().message;
      return r;
    }
    owned.push_back(std::move(s));
  }
  std::vector<const memory::Snapshot*> ordered;
  for (const auto& s : owned) ordered.push_back(&s);
  // Bundles only: an offline context over the staged bundles, with a shrunk module cache.
  std::unique_ptr<Session> ctx = derived_session(base, stg.dir(), true, cache);
  auto threads = resolve_threads(*ctx, ordered, 256, workers, jit);
  if (!threads) {
    r.error = threads.error().message;
  } else {
    compare(recorded, threads.value(), r);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace

std::string format_pct(double v) {
  char b[32];
  snprintf(b, sizeof b, "%.1f", v);
  return b;
}

Result<std::unique_ptr<ReplayReport>> replay_trace(Session& session, trace::Store& store, const std::string& trace_id,
                                                   const ReplayOptions& opts) {
  const auto t0 = Clock::now();
  auto t = store.get_trace(trace_id);
  if (!t) return t.error();
  trace::CapturedJit cjit;
  trace::CapturedKernel ckernel;
  auto cap = pipeline::captured_threads(t.value(), &cjit, &ckernel);
  if (!cap) return cap.error();
  // Kernel segments: no perturbation moves them (they hold no address), so they are compared once
  // and the result is every seed's.
  const KernelReplay kr = replay_kernel(ckernel);
  Json kernel_json;
  if (!kr.mode.empty())
    kernel_json = {{"mode", kr.mode},       {"reason", kr.reason},       {"segments", kr.segments},
                   {"frames", kr.frames},   {"identical", kr.identical}, {"prototypes_rederived", kr.prototypes_rederived},
                   {"mismatches", kr.mismatches}};
  const std::shared_ptr<const symbolize::PerfMap> jit = pipeline::captured_perf_map(cjit);
  auto staging = BundleStaging::create();
  if (!staging) return staging.error();
  BundleStaging& stg = *staging.value();
  const std::vector<std::string> named = pipeline::trace_bundles(t.value());
  for (const auto& b : named)
    if (Status st = stg.add_from_trace_store(store, b); !st) return st.error();
  // Bundles of the store for the captured modules, for unwinding through modules no frame names.
  std::vector<std::string> ids;
  for (const auto& c : cap.value())
    for (const auto& m : c.snapshot.modules)
      if (!m.build_id.empty()) ids.push_back(m.build_id.hex());
  auto more = pipeline::store_bundles_for(store, ids);
  if (!more) return more.error();
  for (const auto& b : more.value())
    if (Status st = stg.add_from_trace_store(store, b); !st) return st.error();

  auto rep = std::make_unique<ReplayReport>();
  rep->trace_id = trace_id;
  rep->timestamp = utc_timestamp();
  rep->host = hostname();
  rep->min_coverage = opts.min_coverage;
  rep->min_success = opts.min_success;
  size_t frames = 0, identical = 0, cov = 0;
  for (uint32_t i = 0; i < opts.seeds; ++i) {
    const std::string started = trace::now_rfc3339();
    ReplaySeed r = replay_seed(session, stg, cap.value(), jit, t->threads, opts.first_seed + i);
    // The kernel frames are frames of the trace's stacks: counted, named (covered) and compared.
    if (!kr.mode.empty() && r.error.empty()) {
      r.frames += kr.frames;
      r.identical += kr.identical;
      r.covered += kr.frames;
      for (const auto& m : kr.mismatches)
        if (r.mismatches.size() < kMaxMismatchesKept) r.mismatches.push_back(m);
      r.kernel = kernel_json;
    }
    auto id = trace::new_uuid();
    if (!id) return id.error();
    r.replay_id = id.value();
    frames += r.frames;
    identical += r.identical;
    cov += r.covered;
    trace::Replay row;
    row.replay_id = r.replay_id;
    row.trace_id = trace_id;
    row.seed = static_cast<int64_t>(r.seed);
    row.started_at = started;
    row.finished_at = trace::now_rfc3339();
    row.replay_success_ratio = r.success();
    row.symbol_coverage_pct = r.coverage();
    row.verify_time_ms = std::llround(r.seconds * 1000);
    row.verifier_version = std::string("stackprov ") + SPROV_VERSION_STRING;
    Json notes = {{"perturbation", r.perturbation},
                  {"frames", r.frames},
                  {"identical", r.identical},
                  {"covered", r.covered},
                  {"mismatches", r.mismatches}};
    if (!r.error.empty()) notes["error"] = r.error;
    if (!r.kernel.is_null()) notes["kernel"] = r.kernel;
    if (!r.python.is_null()) notes["python"] = r.python;
    row.notes_json = evidence::canonical_json(notes);
    if (Status st = store.put_replay(row); !st) return st.error();
    rep->seeds.push_back(std::move(r));
  }
  rep->frames = opts.seeds ? frames / opts.seeds : 0;
  rep->coverage = frames ? 100.0 * static_cast<double>(cov) / static_cast<double>(frames) : 0;
  rep->success = frames ? static_cast<double>(identical) / static_cast<double>(frames) : 0;
  ReplayCheck c{"coverage", rep->coverage >= opts.min_coverage,
          format_pct(rep->coverage) + "% of frames named (with file:line where DWARF), threshold " + format_pct(opts.min_coverage) + "%"};
  ReplayCheck s{"success", rep->success >= opts.min_success,
          std::to_string(identical) + " of " + std::to_string(frames) + " replayed frames identical (" +
              format_pct(100 * rep->success) + "%), threshold " + format_pct(100 * opts.min_success) + "%"};
  for (const auto& sr : rep->seeds) c.seconds += sr.seconds / 2, s.seconds += sr.seconds / 2;
  rep->checks.push_back(c);
  rep->checks.push_back(s);
  verify_trace_bundles(t.value(), stg, named, opts.keys, opts.trusted_root, *rep, ckernel);
  rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

}  // namespace stackprov::pipeline
