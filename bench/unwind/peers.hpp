// SPDX-License-Identifier: Apache-2.0
// bench/unwind: the three unwinders behind one interface (stackprov, nongnu libunwind, elfutils libdwfl).
#ifndef STACKPROV_BENCH_UNWIND_PEERS_HPP
#define STACKPROV_BENCH_UNWIND_PEERS_HPP

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snapshot_set.hpp"

namespace bench_unwind {

inline double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

/// This thread's CPU time (robust on a busy machine).
inline double cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0);
}

/// One unwinder with its caches. A fresh instance is "cold" (no module loaded,
/// no rule cached); unwinding the same snapshots again with it is "warm".
class Peer {
 public:
  virtual ~Peer() = default;
  /// Unwinds snapshot `index`; writes at most `max` frame pcs (frame 0 first)
  /// into `pcs` and returns how many. Frame pcs are raw: the register value of
  /// frame 0, then return addresses (or the interrupted pc above a signal frame).
  virtual size_t unwind(size_t index, uint64_t* pcs, size_t max) = 0;
  /// Why the last walk stopped, in the peer's own words, or "".
  virtual std::string last_note() const { return {}; }
  /// A line of the peer's own cache counters, or "".
  virtual std::string stats() const { return {}; }
};

enum class PeerKind { kStackprov, kLibunwind, kLibdwfl };
constexpr int kNumPeers = 3;
const char* peer_name(PeerKind k);

/// Creates a cold instance over `set` (which must outlive it); nullptr and a
/// message on stderr on failure.
std::unique_ptr<Peer> make_stackprov(const SnapshotSet& set);
std::unique_ptr<Peer> make_libunwind(const SnapshotSet& set);
std::unique_ptr<Peer> make_libdwfl(const SnapshotSet& set);
std::unique_ptr<Peer> make_peer(PeerKind k, const SnapshotSet& set);

/// The floor of the in-cache method (floor.cpp): a minimal walker in framehop's shape (a pc-keyed
/// table of 16-byte rules, a register file of pc, sp and fp, pcs straight into the caller's array)
/// over rules learned from stackprov's own walks of `indices` (their cfas, sps and kept
/// registers). Not an unwinder: it only replays what those walks found. *rules: how many it learned.
std::unique_ptr<Peer> make_floor(const SnapshotSet& set, const std::vector<size_t>& indices, size_t* rules,
                                 std::string* why);

/// The cost of a rule-cache miss in stackprov (miss_stackprov.cpp).
struct MissFigures {
  double miss_ns = 0;     ///< a miss in a loaded module: rule cache probe, compiled-row lookup, insert
  double compile_ns = 0;  ///< the first miss in an FDE: the above plus compiling the FDE's rows
  double interp_ns = 0;   ///< the same miss through the CFA interpreter (no compiled rows)
  uint64_t pcs = 0;       ///< distinct pcs looked up per pass
  uint64_t modules = 0;
};
/// Looks up pcs sampled over every FDE of the modules of the set's first
/// process (4 per FDE, shuffled) through stackprov's rule cache and compiled
/// tables, as an unwinder's miss does: once in fresh modules (compile_ns), then
/// `runs` times with the rows compiled and the rule cache emptied (miss_ns, median).
MissFigures measure_stackprov_miss(const SnapshotSet& set, int runs);

}  // namespace bench_unwind

#endif  // STACKPROV_BENCH_UNWIND_PEERS_HPP
