// SPDX-License-Identifier: Apache-2.0
// Shared by the trace C ABI shims: store handle, resolving captured threads into trace frames, bundle staging.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "capi/internal.hpp"
#include "trace/capture_data.hpp"
#include "trace/store.hpp"
#include "trace/trace.hpp"

#include "stackprov/symbol_bundle.h"
#include "stackprov/trace.h"

struct sprov_trace_store {
  std::unique_ptr<stackprov::trace::Store> store;
  std::string url;  ///< password masked
};

namespace stackprov::capi {

/// Unwinds and resolves each snapshot (one per thread) with `ctx`'s policy into trace
/// frames (tid from the snapshot, name left to the caller), on `workers` threads (each with
/// its own unwinder and symbolizer; results in input order). A thread whose walk fails is an
/// error naming its tid. `jit` (optional): the perf map of the process's JIT code, used by
/// every walk and name lookup instead of /tmp/perf-PID.map, also offline (a trace's captured
/// entries, or the map a capture read once).
Result<std::vector<trace::Thread>> resolve_threads(sprov_context* ctx, const std::vector<const sprov_snapshot*>& snaps,
                                                   uint32_t max_frames, uint32_t workers,
                                                   std::shared_ptr<const symbolize::PerfMap> jit = nullptr);

/// The perf map of a trace's captured JIT entries (null when it has none).
std::shared_ptr<const symbolize::PerfMap> captured_perf_map(const trace::CapturedJit& jit);

/// The coverage rule (doc/traces.md "Replay"): a function name, and a file:line when the
/// answer came from DWARF-derived data (bundle, dwarf, debuginfod+dwarf).
bool frame_covered(const trace::Frame& f);

/// Bundles carry no function starts: where a frame of `after` names the same function at the
/// same place as the frame of `before` (same tid and index), it keeps that frame's symbol_offset.
void carry_symbol_offsets(const std::vector<trace::Thread>& before, std::vector<trace::Thread>& after);

/// A context like `base` whose bundle store is `bundle_store` (empty: none), offline or not,
/// with its own module cache of `module_cache_capacity` entries (0: base's).
std::unique_ptr<sprov_context> derived_context(const sprov_context* base, const std::string& bundle_store, bool offline,
                                               uint32_t module_cache_capacity);

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
  sprov_bundle_store* store() const { return store_; }
  /// The trace store's bundle (64 hex or sha256:hex) with its sidecars; SPROV_ERR_NOT_FOUND naming it.
  Status add_from_trace_store(trace::Store& s, const std::string& sha256);
  /// A bundle file (validated by the store); returns its 64-hex sha256.
  Result<std::string> add_file(const std::string& path);
  /// A bundle of another bundle store directory, with its sidecars when present.
  Status add_from_bundle_store(sprov_bundle_store* other, const std::string& sha256);
  /// Copies a staged bundle with its sidecars into `other` by content only (no id entry).
  Status copy_to(sprov_bundle_store* other, const std::string& sha256) const;
  /// Bundles added so far (64 hex, in order of addition, unique).
  const std::vector<std::string>& bundles() const { return added_; }
  /// The blob's and a sidecar's path in the staging store ("" when absent).
  std::string blob_path(const std::string& sha256) const;
  std::string sidecar_path(const std::string& sha256, const char* name) const;

 private:
  BundleStaging() = default;
  void note(const std::string& sha256);
  std::string dir_;
  sprov_bundle_store* store_ = nullptr;
  std::vector<std::string> added_;
};

/// A malloc'd copy of `s` for an out parameter (released with sprov_free); 0 or SPROV_ERR_NOMEM.
int give_string(const std::string& s, char** out, size_t* out_len);

/// "abc..." from "sha256:abc..." (or as given when bare).
std::string bare_sha256(const std::string& digest);

/// The captured threads of a stored trace (checked against its data_sha256).
Result<std::vector<trace::CapturedThread>> captured_threads(const trace::Trace& t, trace::CapturedJit* jit = nullptr);

/// Every bundle a trace names: its symbol_bundle_sha256 and each frame's bundle (64 hex, sorted, unique).
std::vector<std::string> trace_bundles(const trace::Trace& t);

/// The bundles of the trace store whose index_json lists one of `build_ids` (64 hex, sorted).
Result<std::vector<std::string>> store_bundles_for(trace::Store& s, const std::vector<std::string>& build_ids);

/// The index_json a trace store keeps for a bundle: {"modules":[{"id_kind","id","name"}]}.
Result<std::string> bundle_index_json(const uint8_t* data, size_t len);

/// Removes a directory tree (best effort, no symlinks followed).
void remove_tree(const std::string& dir);

}  // namespace stackprov::capi
