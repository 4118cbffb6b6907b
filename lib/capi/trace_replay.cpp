// SPDX-License-Identifier: Apache-2.0
// C ABI: replay of a stored trace under seeded perturbations, the gate (coverage, success, DSSE, inclusion, platform ids), reports.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <type_traits>

#include "arch/arch_ops.hpp"
#include "capi/trace_internal.hpp"
#include "evidence/json.hpp"
#include "stackprov/bundle.h"
#include "trace/events.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

using Clock = std::chrono::steady_clock;
using evidence::Json;

constexpr uint64_t kPage = 4096;
constexpr size_t kMaxMismatchesKept = 20;

/// One check of the gate (coverage, success, dsse, inclusion, platform-id).
struct Check {
  std::string name;
  bool passed = false;
  std::string detail;
  double seconds = 0;
};

/// One seed's replay.
struct SeedResult {
  uint64_t seed = 0;
  std::string replay_id;
  size_t frames = 0, identical = 0, covered = 0;
  double seconds = 0;
  Json perturbation;
  std::vector<std::string> mismatches;  ///< the first kMaxMismatchesKept
  std::string error;                    ///< the replay itself failed
  double success() const { return frames ? static_cast<double>(identical) / static_cast<double>(frames) : 0; }
  double coverage() const { return frames ? 100.0 * static_cast<double>(covered) / static_cast<double>(frames) : 0; }
};

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
    return it != mod_ranges.begin() && r.addr + r.bytes.size() <= std::prev(it)->second;
  };
  std::vector<std::pair<uint64_t, uint64_t>> fixed = stay;
  for (const auto& r : s.memory)
    if (!inside_module(r)) fixed.emplace_back(r.addr, r.addr + r.bytes.size());
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

void compare(const std::vector<trace::Thread>& recorded, const std::vector<trace::Thread>& replayed, SeedResult& r) {
  std::map<uint64_t, const trace::Thread*> by_tid;
  for (const auto& t : replayed) by_tid[t.tid] = &t;
  for (const auto& rt : recorded) {
    const trace::Thread* pt = by_tid.count(rt.tid) ? by_tid[rt.tid] : nullptr;
    const size_t n = std::max(rt.frames.size(), pt ? pt->frames.size() : 0);
    for (size_t i = 0; i < n; ++i) {
      ++r.frames;
      const trace::Frame* a = i < rt.frames.size() ? &rt.frames[i] : nullptr;
      const trace::Frame* b = pt && i < pt->frames.size() ? &pt->frames[i] : nullptr;
      if (b && frame_covered(*b)) ++r.covered;
      if (a && b && same_frame(*a, *b)) {
        ++r.identical;
        continue;
      }
      if (r.mismatches.size() < kMaxMismatchesKept)
        r.mismatches.push_back("thread " + std::to_string(rt.tid) + " frame #" + std::to_string(i) + ": recorded " +
                               (a ? describe(*a) : "(none)") + ", replayed " + (b ? describe(*b) : "(none)"));
    }
  }
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

std::string xml_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t') o += ' ';  // not allowed in XML 1.0
        else o.push_back(static_cast<char>(c));
    }
  }
  return o;
}

std::string pct(double v) {
  char b[32];
  snprintf(b, sizeof b, "%.1f", v);
  return b;
}

}  // namespace

struct sprov_replay_report {
  std::string trace_id;
  std::string timestamp, host;
  double min_coverage = 90, min_success = 0.95;
  std::vector<SeedResult> seeds;
  std::vector<Check> checks;  // coverage, success, dsse, inclusion, platform-id
  double coverage = 0, success = 0;
  size_t frames = 0;
  double seconds = 0;
  int exit_code = SPROV_GATE_OK;
};

namespace {

int gate_code(const std::string& check) {
  if (check == "coverage") return SPROV_GATE_COVERAGE;
  if (check == "success") return SPROV_GATE_SUCCESS;
  if (check == "dsse") return SPROV_GATE_DSSE;
  if (check == "inclusion") return SPROV_GATE_INCLUSION;
  return SPROV_GATE_PLATFORM_ID;
}

/// Runs one seed: perturbs copies of the captured threads, resolves them offline from the
/// staged bundles and compares with the recorded frames.
SeedResult replay_seed(const sprov_context* base, const BundleStaging& stg, const std::vector<trace::CapturedThread>& cap,
                       const std::shared_ptr<const symbolize::PerfMap>& jit, const std::vector<trace::Thread>& recorded,
                       uint64_t seed) {
  SeedResult r;
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
    deltas[path] = (g.delta < 0 ? "-" : "+") + hex(static_cast<uint64_t>(g.delta < 0 ? -g.delta : g.delta));
  }
  r.perturbation = {{"relocation", deltas},
                    {"module_insert_order", module_order},
                    {"thread_order", thread_order},
                    {"module_cache_capacity", cache},
                    {"workers", workers},
                    {"bundles_only", true}};
  std::vector<std::unique_ptr<sprov_snapshot>> owned;
  std::vector<const sprov_snapshot*> ordered;
  for (size_t i : thread_order) {
    memory::Snapshot s = snaps[i];
    relocate(s, groups);
    if (Status st = reinsert_modules(s, module_order); !st) {
      r.error = "thread " + std::to_string(s.tid) + ": " + st.error().message;
      return r;
    }
    auto h = std::make_unique<sprov_snapshot>();
    h->snap = std::move(s);
    ordered.push_back(h.get());
    owned.push_back(std::move(h));
  }
  // Bundles only: an offline context over the staged bundles, with a shrunk module cache.
  std::unique_ptr<sprov_context> ctx = derived_context(base, stg.dir(), true, cache);
  auto threads = resolve_threads(ctx.get(), ordered, 256, workers, jit);
  if (!threads) {
    r.error = threads.error().message;
  } else {
    compare(recorded, threads.value(), r);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

/// DSSE and inclusion of every bundle the trace names, platform ids of every module its frames touch.
void verify_bundles(const trace::Trace& t, const BundleStaging& stg, const std::vector<std::string>& bundles,
                    const std::vector<const char*>& keys, const char* trusted_root, sprov_replay_report& rep) {
  Check dsse, incl, pid;
  dsse.name = "dsse";
  incl.name = "inclusion";
  pid.name = "platform-id";
  auto t0 = Clock::now();
  std::vector<std::string> dsse_fail, incl_fail;
  if (bundles.empty()) {
    dsse_fail.push_back("the trace names no symbol bundle (capture with --bundle --sign KEY --log DIR)");
    incl_fail.push_back("the trace names no symbol bundle");
  }
  for (const auto& b : bundles) {
    const std::string dig = "sha256:" + b;
    const std::string blob = stg.blob_path(b), env = stg.sidecar_path(b, "dsse.json"),
                      proof = stg.sidecar_path(b, "tlog-proof");
    if (env.empty()) {
      dsse_fail.push_back(dig + " has no DSSE envelope (not signed)");
      incl_fail.push_back(dig + " has no DSSE envelope, so no log entry");
      continue;
    }
    // One offline verification of the blob (re-hashed) and its envelope: DSSE, or the log proof.
    auto verify = [&](bool log, std::vector<std::string>& fails) {
      sprov_trace_verify_opts o{};
      o.sz = sizeof o;
      o.digest = dig.c_str();
      o.artifact_path = blob.c_str();
      o.envelope_path = env.c_str();
      o.check_dsse = log ? 0 : 1;
      o.check_log = log ? 1 : 0;
      o.key_paths = log ? nullptr : keys.data();
      o.key_count = log ? 0 : keys.size();
      o.trusted_root_path = log ? trusted_root : nullptr;
      o.proof_path = log ? proof.c_str() : nullptr;
      if (sprov_trace_verify(&o, nullptr, nullptr) != 0) fails.push_back(dig + ": " + sprov_last_error_message());
    };
    if (keys.empty())
      dsse_fail.push_back(dig + ": no public key given to verify its envelope (--key PUB)");
    else
      verify(false, dsse_fail);
    if (proof.empty())
      incl_fail.push_back(dig + " has no inclusion proof (tlog-proof)");
    else if (!trusted_root || !*trusted_root)
      incl_fail.push_back(dig + ": no trusted root given to verify its inclusion proof (--trusted-root FILE)");
    else
      verify(true, incl_fail);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  dsse.passed = dsse_fail.empty();
  dsse.detail = dsse.passed ? std::to_string(bundles.size()) + " bundle envelope(s) verified" : join(dsse_fail);
  incl.passed = incl_fail.empty();
  incl.detail = incl.passed ? std::to_string(bundles.size()) + " inclusion proof(s) verified" : join(incl_fail);
  dsse.seconds = incl.seconds = std::chrono::duration<double>(Clock::now() - t0).count() / 2;

  // Platform ids: every module the frames touch must be held by a bundle with its build-id.
  t0 = Clock::now();
  std::map<std::string, std::string> modules;  // build-id -> path
  std::vector<std::string> pid_fail;
  for (const auto& th : t.threads)
    for (const auto& f : th.frames) {
      if (f.module_path.empty() || f.module_path == kVdsoName) continue;
      if (f.module_build_id.empty()) {
        pid_fail.push_back("module " + f.module_path + " has no build-id: its bundle cannot be identified");
        continue;
      }
      modules.emplace(f.module_build_id, f.module_path);
    }
  std::vector<sprov_bundle*> open;
  for (const auto& b : bundles) {
    sprov_bundle* h = nullptr;
    if (sprov_bundle_open_file(stg.blob_path(b).c_str(), &h) == 0) open.push_back(h);
  }
  for (const auto& [id, path] : modules) {
    bool found = false;
    for (sprov_bundle* h : open) {
      size_t idx = 0;
      if (sprov_bundle_find_module(h, SPROV_BUNDLE_ID_ELF_BUILD_ID, id.c_str(), &idx) == 0) found = true;
    }
    if (!found) pid_fail.push_back("module " + path + " build-id " + id + ": no bundle of the trace holds it");
  }
  for (sprov_bundle* h : open) sprov_bundle_free(h);
  std::sort(pid_fail.begin(), pid_fail.end());
  pid_fail.erase(std::unique(pid_fail.begin(), pid_fail.end()), pid_fail.end());
  pid.passed = pid_fail.empty();
  pid.detail = pid.passed ? std::to_string(modules.size()) + " module build-id(s) equal their bundle's" : join(pid_fail);
  pid.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  rep.checks.push_back(dsse);
  rep.checks.push_back(incl);
  rep.checks.push_back(pid);
}

std::string summary_line(const sprov_replay_report& r) {
  std::string s = "trace " + r.trace_id + ": " + pct(r.coverage) + "% coverage, " + pct(100 * r.success) + "% success (" +
                  std::to_string(r.seeds.size()) + " seeds, " + std::to_string(r.frames) + " frames): ";
  std::string failed;
  for (const auto& c : r.checks)
    if (!c.passed) failed += (failed.empty() ? "" : ", ") + c.name;
  return s + (failed.empty() ? "PASS" : "FAIL " + failed);
}

std::string report_json(const sprov_replay_report& r) {
  Json j;
  j["trace_id"] = r.trace_id;
  j["symbol_coverage_pct"] = r.coverage;
  j["replay_success_ratio"] = r.success;
  j["frames"] = r.frames;
  j["thresholds"] = {{"min_coverage_pct", r.min_coverage}, {"min_success_ratio", r.min_success}};
  j["exit_code"] = r.exit_code;
  j["passed"] = r.exit_code == 0;
  j["checks"] = Json::array();
  for (const auto& c : r.checks) j["checks"].push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
  j["seeds"] = Json::array();
  for (const auto& s : r.seeds) {
    Json o = {{"seed", s.seed},
              {"replay_id", s.replay_id},
              {"frames", s.frames},
              {"identical", s.identical},
              {"covered", s.covered},
              {"replay_success_ratio", s.success()},
              {"symbol_coverage_pct", s.coverage()},
              {"verify_time_ms", static_cast<int64_t>(std::llround(s.seconds * 1000))},
              {"perturbation", s.perturbation},
              {"mismatches", s.mismatches}};
    if (!s.error.empty()) o["error"] = s.error;
    j["seeds"].push_back(o);
  }
  j["summary"] = summary_line(r);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);  // invalid UTF-8 in a name -> U+FFFD
}

std::string report_junit(const sprov_replay_report& r) {
  size_t failures = 0, tests = r.checks.size() + r.seeds.size();
  std::string cases;
  auto secs = [](double s) {
    char b[32];
    snprintf(b, sizeof b, "%.3f", s);
    return std::string(b);
  };
  for (const auto& c : r.checks) {
    cases += "    <testcase name=\"" + xml_escape(c.name) + "\" classname=\"stackprov.gate\" time=\"" + secs(c.seconds) + "\"";
    if (c.passed) {
      cases += "/>\n";
    } else {
      ++failures;
      cases += ">\n      <failure message=\"" + xml_escape(c.name + ": " + c.detail) + "\" type=\"gate\">" +
               xml_escape(c.detail) + "</failure>\n    </testcase>\n";
    }
  }
  for (const auto& s : r.seeds) {
    cases += "    <testcase name=\"seed-" + std::to_string(s.seed) + "\" classname=\"stackprov.replay\" time=\"" +
             secs(s.seconds) + "\"";
    const bool ok = s.error.empty() && s.success() >= r.min_success;
    if (ok) {
      cases += "/>\n";
      continue;
    }
    ++failures;
    std::string msg = s.error.empty() ? std::to_string(s.identical) + " of " + std::to_string(s.frames) +
                                            " frames identical (" + pct(100 * s.success()) + "%)"
                                      : "replay failed: " + s.error;
    std::string body = msg;
    for (const auto& m : s.mismatches) body += "\n" + m;
    cases += ">\n      <failure message=\"" + xml_escape(msg) + "\" type=\"replay\">" + xml_escape(body) +
             "</failure>\n    </testcase>\n";
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  x += "  <testsuite name=\"stackprov.trace-replay\" package=\"stackprov\" id=\"0\" timestamp=\"" + r.timestamp +
       "\" hostname=\"" + xml_escape(r.host) + "\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
       std::to_string(failures) + "\" errors=\"0\" time=\"" + secs(r.seconds) + "\">\n";
  x += "    <properties>\n";
  auto prop = [&](const std::string& k, const std::string& v) {
    x += "      <property name=\"" + xml_escape(k) + "\" value=\"" + xml_escape(v) + "\"/>\n";
  };
  prop("trace_id", r.trace_id);
  prop("symbol_coverage_pct", pct(r.coverage));
  prop("replay_success_ratio", std::to_string(r.success));
  prop("min_coverage_pct", pct(r.min_coverage));
  prop("min_success_ratio", std::to_string(r.min_success));
  prop("exit_code", std::to_string(r.exit_code));
  x += "    </properties>\n" + cases;
  x += "    <system-out>" + xml_escape(summary_line(r)) + "</system-out>\n    <system-err></system-err>\n";
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

}  // namespace

extern "C" {

SPROV_API int sprov_trace_replay(sprov_context* ctx, sprov_trace_store* store, const char* trace_id,
                                 const struct sprov_trace_replay_opts* opts, sprov_replay_report** out) {
  return guard([&] {
    if (!ctx || !store || !trace_id || !out)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replay: NULL %s",
                             !ctx ? "ctx" : !store ? "store" : !trace_id ? "trace_id" : "out"));
    *out = nullptr;
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_replay_opts), "sprov_trace_replay_opts")) return rc;
    uint32_t seeds = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, seeds, 0u);
    if (seeds == 0) seeds = 5;
    if (seeds > 1000) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replay_opts.seeds %u exceeds 1000", seeds));
    if (uint32_t f = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, flags, 0u); f != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replay_opts.flags 0x%x: must be 0 (reserved)", f));
    uint64_t first = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, first_seed, uint64_t{0});
    if (first == 0) first = 1;
    double min_cov = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, min_coverage_pct, -1.0);
    double min_succ = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, min_success_ratio, -1.0);
    if (!opts || !SPROV_OPTS_HAS(opts, sprov_trace_replay_opts, min_coverage_pct) || min_cov < 0) min_cov = 90;
    if (!opts || !SPROV_OPTS_HAS(opts, sprov_trace_replay_opts, min_success_ratio) || min_succ < 0) min_succ = 0.95;
    if (!(min_cov <= 100)) return fail(make_error(SPROV_ERR_INVALID_ARG, "min_coverage_pct %g is above 100", min_cov));
    if (!(min_succ <= 1)) return fail(make_error(SPROV_ERR_INVALID_ARG, "min_success_ratio %g is above 1", min_succ));
    const char* const* kp = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, key_paths, nullptr);
    const size_t kn = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, key_count, size_t{0});
    if (kn && !kp) return fail(make_error(SPROV_ERR_INVALID_ARG, "key_count %zu with NULL key_paths", kn));
    std::vector<const char*> keys;
    for (size_t i = 0; i < kn; ++i) {
      if (!kp[i]) return fail(make_error(SPROV_ERR_INVALID_ARG, "key_paths[%zu] is NULL", i));
      keys.push_back(kp[i]);
    }
    const char* trusted_root = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, trusted_root_path, nullptr);
    if (!trace::is_uuid(trace_id)) return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));

    const auto t0 = Clock::now();
    auto t = store->store->get_trace(trace_id);
    if (!t) return fail(t.error());
    trace::CapturedJit cjit;
    auto cap = captured_threads(t.value(), &cjit);
    if (!cap) return fail(cap.error());
    const std::shared_ptr<const symbolize::PerfMap> jit = captured_perf_map(cjit);
    auto staging = BundleStaging::create();
    if (!staging) return fail(staging.error());
    BundleStaging& stg = *staging.value();
    const std::vector<std::string> named = trace_bundles(t.value());
    for (const auto& b : named)
      if (Status st = stg.add_from_trace_store(*store->store, b); !st) return fail(st.error());
    // Bundles of the store for the captured modules, for unwinding through modules no frame names.
    std::vector<std::string> ids;
    for (const auto& c : cap.value())
      for (const auto& m : c.snapshot.modules)
        if (!m.build_id.empty()) ids.push_back(m.build_id.hex());
    auto more = store_bundles_for(*store->store, ids);
    if (!more) return fail(more.error());
    for (const auto& b : more.value())
      if (Status st = stg.add_from_trace_store(*store->store, b); !st) return fail(st.error());

    auto rep = std::make_unique<sprov_replay_report>();
    rep->trace_id = trace_id;
    rep->timestamp = utc_timestamp();
    rep->host = hostname();
    rep->min_coverage = min_cov;
    rep->min_success = min_succ;
    size_t frames = 0, identical = 0, cov = 0;
    for (uint32_t i = 0; i < seeds; ++i) {
      const std::string started = trace::now_rfc3339();
      SeedResult r = replay_seed(ctx, stg, cap.value(), jit, t->threads, first + i);
      auto id = trace::new_uuid();
      if (!id) return fail(id.error());
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
      row.verifier_version = std::string("stackprov ") + sprov_version();
      Json notes = {{"perturbation", r.perturbation},
                    {"frames", r.frames},
                    {"identical", r.identical},
                    {"covered", r.covered},
                    {"mismatches", r.mismatches}};
      if (!r.error.empty()) notes["error"] = r.error;
      row.notes_json = evidence::canonical_json(notes);
      if (Status st = store->store->put_replay(row); !st) return fail(st.error());
      rep->seeds.push_back(std::move(r));
    }
    rep->frames = seeds ? frames / seeds : 0;
    rep->coverage = frames ? 100.0 * static_cast<double>(cov) / static_cast<double>(frames) : 0;
    rep->success = frames ? static_cast<double>(identical) / static_cast<double>(frames) : 0;
    Check c{"coverage", rep->coverage >= min_cov,
            pct(rep->coverage) + "% of frames named (with file:line where DWARF), threshold " + pct(min_cov) + "%"};
    Check s{"success", rep->success >= min_succ,
            std::to_string(identical) + " of " + std::to_string(frames) + " replayed frames identical (" +
                pct(100 * rep->success) + "%), threshold " + pct(100 * min_succ) + "%"};
    for (const auto& sr : rep->seeds) c.seconds += sr.seconds / 2, s.seconds += sr.seconds / 2;
    rep->checks.push_back(c);
    rep->checks.push_back(s);
    verify_bundles(t.value(), stg, named, keys, trusted_root, *rep);
    for (const auto& ch : rep->checks)
      if (!ch.passed) {
        rep->exit_code = gate_code(ch.name);
        break;
      }
    rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    *out = rep.release();
    return 0;
  });
}

SPROV_API void sprov_replay_report_free(sprov_replay_report* r) { delete r; }

SPROV_API int sprov_replay_report_exit_code(const sprov_replay_report* r) { return r ? r->exit_code : SPROV_ERR_INVALID_ARG; }

SPROV_API double sprov_replay_report_coverage_pct(const sprov_replay_report* r) { return r ? r->coverage : 0; }

SPROV_API double sprov_replay_report_success_ratio(const sprov_replay_report* r) { return r ? r->success : 0; }

SPROV_API int sprov_replay_report_format(const sprov_replay_report* r, int format, char** out, size_t* out_len) {
  return guard([&] {
    if (!r || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_replay_report_format: NULL argument"));
    std::string s;
    switch (format) {
      case SPROV_REPORT_JSON: s = report_json(*r); break;
      case SPROV_REPORT_JUNIT: s = report_junit(*r); break;
      case SPROV_REPORT_SUMMARY: s = summary_line(*r); break;
      default: return fail(make_error(SPROV_ERR_INVALID_ARG, "report format %d: expected 1 (JSON), 2 (JUnit) or 3 (summary)", format));
    }
    return give_string(s, out, out_len);
  });
}

}  // extern "C"
