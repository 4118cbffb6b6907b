// SPDX-License-Identifier: Apache-2.0
// The trace pipeline (doc/traces.md): capture of a process's threads into a trace with its bundle,
// offline resolve, the bundles a resolve or replay stages, and the threads' frames as a trace
// records them. The C ABI (lib/capi/trace*.cpp) checks and converts arguments and calls these.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "evidence/json.hpp"
#include "memory/snapshot.hpp"
#include "pipeline/snapshot_walk.hpp"
#include "symbolize/bundle_store.hpp"
#include "symbolize/perf_map.hpp"
#include "trace/capture_data.hpp"
#include "trace/store.hpp"
#include "trace/trace.hpp"

namespace stackprov::pipeline {

class BundleStaging;
struct CapturedProcess;

// ------------------------------------------------------------ resolve (trace_resolve.cpp)

/// Unwinds and resolves each snapshot (one per thread) with `session`'s policy into trace
/// frames (tid from the snapshot, name left to the caller), on `workers` threads (each with
/// its own module tables, rule cache and resolver chain; results in input order). A thread whose
/// walk fails is an error naming its tid. `jit` (optional): the perf map of the process's JIT
/// code, used by every walk and name lookup instead of /tmp/perf-PID.map, also offline (a trace's
/// captured entries, or the map a capture read once). `tail_calls`: gdb's tail-call frames from
/// the modules' DWARF call sites are added (pipeline/tail_call_frames.hpp: a module's file online,
/// else its bundle's call-site section), each with unwind_method "tail_call+inferred".
Result<std::vector<trace::Thread>> resolve_threads(Session& session, const std::vector<const memory::Snapshot*>& snaps,
                                                   uint32_t max_frames, uint32_t workers,
                                                   std::shared_ptr<const symbolize::PerfMap> jit = nullptr,
                                                   bool tail_calls = false);

/// The perf map of a trace's captured JIT entries (null when it has none).
std::shared_ptr<const symbolize::PerfMap> captured_perf_map(const trace::CapturedJit& jit);

/// The captured threads of a stored trace (checked against its data_sha256); `jit` and `kernel`
/// (optional) receive its JIT entries and kernel segments.
Result<std::vector<trace::CapturedThread>> captured_threads(const trace::Trace& t, trace::CapturedJit* jit = nullptr,
                                                            trace::CapturedKernel* kernel = nullptr);

/// The coverage rule (doc/traces.md "Replay"): a function name, and a file:line when the
/// answer came from DWARF-derived data (bundle, dwarf, debuginfod+dwarf).
bool frame_covered(const trace::Frame& f);

/// Bundles carry no function starts: where a frame of `after` with an unknown symbol_offset names
/// the same function at the same place as the frame of `before` (same tid and rank) whose offset
/// is known, it takes that offset (0 included: at the function's start).
/// Inferred frames (trace::frame_inferred) are left out of the pairing: the unwound frames are
/// paired by their order among the unwound frames.
void carry_symbol_offsets(const std::vector<trace::Thread>& before, std::vector<trace::Thread>& after);

/// A resolve that inferred no frame for a thread (offline with bundles built before their call-site
/// section, doc/bundles.md "Call sites") keeps
/// the inferred frames of `before` (same tid) that sit between two unwound frames found again at
/// the same pcs in `after`, as they were recorded.
void carry_inferred_frames(const std::vector<trace::Thread>& before, std::vector<trace::Thread>& after);

/// Resolves stored trace `trace_id` again: with the bundles `bundles` names ("sha256:<hex>" of
/// the trace store or, failing that, of the session's bundle store; else a bundle file, kept in
/// the trace store), the trace's own and the store's bundles of its modules, offline (bundles
/// only) or not; replaces its frames. Returns the report JSON (trace_id, frames, named, with_lines,
/// offline, covered, symbol_coverage_pct, resolvers, bundles).
Result<std::string> resolve_trace(Session& session, trace::Store& store, const std::string& trace_id,
                                  const std::vector<std::string>& bundles, bool offline);

// ------------------------------------------------------------ replay (trace_replay.cpp, trace_verify.cpp)

/// One check of the gate (coverage, success, dsse, inclusion, platform-id).
struct ReplayCheck {
  std::string name;
  bool passed = false;
  std::string detail;
  double seconds = 0;
};

/// One seed's replay.
struct ReplaySeed {
  uint64_t seed = 0;
  std::string replay_id;
  size_t frames = 0, identical = 0, covered = 0;
  double seconds = 0;
  evidence::Json perturbation;
  std::vector<std::string> mismatches;  ///< the first 20
  evidence::Json kernel;                ///< how its kernel segments were compared (null: none)
  /// Its CPython segment (runtime frames, doc/runtime-frames.md "Traces"): {"mode": "recorded",
  /// "reason", "threads", "frames", "identical"}, counted over the recorded Python frames, each
  /// compared with the replay's frame at its place; null when the trace has none.
  evidence::Json python;
  std::string error;                    ///< the replay itself failed
  double success() const { return frames ? static_cast<double>(identical) / static_cast<double>(frames) : 0; }
  double coverage() const { return frames ? 100.0 * static_cast<double>(covered) / static_cast<double>(frames) : 0; }
};

/// A trace's replay: each seed's, the checks of the gate in order (coverage, success, dsse,
/// inclusion, platform-id), the totals.
struct ReplayReport {
  std::string trace_id;
  std::string timestamp, host;
  double min_coverage = 90, min_success = 0.95;
  std::vector<ReplaySeed> seeds;
  std::vector<ReplayCheck> checks;
  double coverage = 0, success = 0;
  size_t frames = 0;
  double seconds = 0;
};

/// How a trace is replayed: seeds first_seed.., the gate's thresholds, the public keys its
/// bundles' envelopes are verified with and the trusted root of their inclusion proofs.
struct ReplayOptions {
  uint32_t seeds = 5;
  uint64_t first_seed = 1;
  double min_coverage = 90, min_success = 0.95;
  std::vector<std::string> keys;
  std::string trusted_root;
};

/// Replays stored trace `trace_id` once per seed (perturbed copies of its captured threads
/// resolved offline from its staged bundles, compared with its recorded frames; each replay stored
/// as a row), then evaluates the gate. A seed that fails is data in its ReplaySeed (error).
Result<std::unique_ptr<ReplayReport>> replay_trace(Session& session, trace::Store& store, const std::string& trace_id,
                                                   const ReplayOptions& opts);

/// The DSSE and inclusion checks of every bundle `bundles` (64 hex) of `t` staged in `stg`, with
/// `keys` and `trusted_root`, and the platform-id check of every module its frames touch and of
/// the kernel build-id of its kernel segments (`kernel`, may be empty): appended to `rep.checks`.
void verify_trace_bundles(const trace::Trace& t, const BundleStaging& stg, const std::vector<std::string>& bundles,
                          const std::vector<std::string>& keys, const std::string& trusted_root, ReplayReport& rep,
                          const trace::CapturedKernel& kernel = {});

// ------------------------------------------------------------ kernel segments (trace_kernel.cpp)

/// The kernel section a capture stores (doc/traces.md "Kernel segments"): `proc`'s segments with
/// frames, the running kernel's build-id (/sys/kernel/notes) and the sha256 of
/// /sys/kernel/btf/vmlinux. Empty when none is stored (not asked for, no BTF, no thread's stack
/// read, the build-id or the BTF unreadable): each reason is a warning of `session`'s log, as is
/// each thread's note.
trace::CapturedKernel kernel_section(Session& session, const CapturedProcess& proc);

/// How a replay treats a trace's kernel segments (the same for every seed: the perturbations move
/// user modules only). `mode`: "re-derived" where the running kernel is the trace's (same build-id;
/// kallsyms readable): each frame's name must be a symbol of its module whose size is the recorded
/// one and the offset inside it, and its prototype, when the BTF file has the capture's sha256, the
/// one BTF gives now; "recorded" otherwise, each frame equal to itself, `reason` saying why;
/// "" when the trace has none.
struct KernelReplay {
  std::string mode, reason;
  bool prototypes_rederived = false;
  size_t segments = 0, frames = 0, identical = 0;
  std::vector<std::string> mismatches;  ///< the first 20
};
KernelReplay replay_kernel(const trace::CapturedKernel& k);

/// The platform-id check of a trace's kernel build-id: "" when it has no kernel segment or its
/// kernel build-id is the running kernel's, else the failure naming both ids.
std::string kernel_platform_mismatch(const trace::CapturedKernel& k);

/// `v` with one decimal ("90.0"), as the gate's details and reports print percentages.
std::string format_pct(double v);

// ------------------------------------------------------------ capture (trace_capture.cpp)

/// The threads of a captured process: its pid, whether it is a core (no live /proc/PID), each
/// thread's snapshot and its name read while stopped ("" unknown; parallel, may be shorter).
/// `kernel`: the kernel stacks were read (SPROV_PROCESS_KERNEL_STACKS), `kernel_btf` with the
/// kernel's BTF (SPROV_PROCESS_KERNEL_BTF); `kernel_segments` the threads' whose stack was read
/// (names, offsets, prototypes), `kernel_notes` one line per thread without one, saying why.
struct CapturedProcess {
  int64_t pid = 0;
  bool from_core = false;
  std::vector<const memory::Snapshot*> threads;
  std::vector<std::string> thread_names;
  bool kernel = false, kernel_btf = false;
  std::vector<trace::CapturedKernelSegment> kernel_segments;
  std::vector<std::string> kernel_notes;
};

/// How a trace is captured: frames per thread, a bundle of the modules the frames touch, signed
/// with `sign_key` into the log `log_dir` (checkpoints signed with `log_key`, empty: sign_key).
struct CaptureOptions {
  uint32_t max_frames = 256;
  bool bundle = false;
  std::string sign_key, log_dir, log_key;
};

/// Fails (prefixed "signing: ") when `opts.sign_key` cannot sign into its log: checked before
/// anything is stored.
Status check_capture_signing(const CaptureOptions& opts);

/// Unwinds and names `proc`'s threads into a new trace (captured data, perf-map entries of JIT
/// frames, main build-id), with its bundle when asked (built in a private staging store, copied by
/// content into the session's bundle store), and stores it. Returns the trace id.
Result<std::string> capture_trace(Session& session, trace::Store& store, const CapturedProcess& proc,
                                  const CaptureOptions& opts);

// ------------------------------------------------------------ bundles (trace_bundle.cpp)

/// "abc..." from "sha256:abc..." (or as given when bare).
std::string bare_sha256(const std::string& digest);

/// The bytes of file `path`; SPROV_ERR_IO when it cannot be opened, SPROV_ERR_LIMIT above `limit` bytes.
Result<std::string> read_text_file(const std::string& path, size_t limit);

/// Removes a directory tree (best effort, no symlinks followed).
void remove_tree(const std::string& dir);

/// A temporary bundle store directory (under $TMPDIR) that holds the bundles a resolve or a
/// replay may use: copied from the trace store (with their sidecars), from another bundle
/// store, or from files. Removed with everything in it by the destructor.
class BundleStaging {
 public:
  static Result<std::unique_ptr<BundleStaging>> create();
  BundleStaging(const BundleStaging&) = delete;
  BundleStaging& operator=(const BundleStaging&) = delete;
  ~BundleStaging();
  const std::string& dir() const { return dir_; }
  symbolize::BundleStore& store() { return *store_; }
  /// The trace store's bundle (64 hex or sha256:hex) with its sidecars; SPROV_ERR_NOT_FOUND naming it.
  Status add_from_trace_store(trace::Store& s, const std::string& sha256);
  /// A bundle file (validated by the store); returns its 64-hex sha256.
  Result<std::string> add_file(const std::string& path);
  /// A bundle of another bundle store directory, with its sidecars when present.
  Status add_from_bundle_store(const symbolize::BundleStore& other, const std::string& sha256);
  /// Copies a staged bundle with its sidecars into `other` by content only (no id entry).
  Status copy_to(symbolize::BundleStore& other, const std::string& sha256) const;
  /// Bundles added so far (64 hex, in order of addition, unique).
  const std::vector<std::string>& bundles() const { return added_; }
  /// The blob's and a sidecar's path in the staging store ("" when absent).
  std::string blob_path(const std::string& sha256) const;
  std::string sidecar_path(const std::string& sha256, const char* name) const;

 private:
  BundleStaging() = default;
  void note(const std::string& sha256);
  std::string dir_;
  std::optional<symbolize::BundleStore> store_;
  std::vector<std::string> added_;
};

/// The digest of the bundle `store` indexes for module identity `id`, if any (errors: none).
std::optional<std::string> find_bundle(const symbolize::BundleStore& store, const ModuleId& id);

/// Every bundle a trace names: its symbol_bundle_sha256 and each frame's bundle (64 hex, sorted, unique).
std::vector<std::string> trace_bundles(const trace::Trace& t);

/// The bundles of the trace store whose index_json lists one of `build_ids` (64 hex, sorted).
Result<std::vector<std::string>> store_bundles_for(trace::Store& s, const std::vector<std::string>& build_ids);

/// The index_json a trace store keeps for a bundle: {"modules":[{"id_kind","id","name"}]}.
Result<std::string> bundle_index_json(const uint8_t* data, size_t len);

/// The trace store's bundle `hex` (64 hex) with its sidecars into bundle store `to` (indexed by its modules).
Status export_bundle(trace::Store& store, const std::string& hex, symbolize::BundleStore& to);

/// Builds one bundle of every module (with a build-id and a file) the frames touch, stores it in
/// the trace store and in `bstore`, signs it when asked (`opts.sign_key`). Problems with single
/// modules are lines in `warnings`. Returns its 64-hex sha256.
Result<std::string> build_trace_bundle(Session& session, trace::Store& ts, symbolize::BundleStore& bstore,
                                       const std::vector<trace::Thread>& threads, const memory::Snapshot& s0,
                                       const CaptureOptions& opts, std::string* warnings);

/// The platform of a capture (trace "platform", bundle "os"): that of its first module's identity
/// kind (platform_of), the vDSO aside; "linux" when no module has an identity.
const char* platform_of_snapshot(const memory::Snapshot& s);

}  // namespace stackprov::pipeline
