// SPDX-License-Identifier: Apache-2.0
// bench/unwind: the three unwinders behind one interface (stackprov, nongnu libunwind, elfutils libdwfl).
#ifndef STACKPROV_BENCH_UNWIND_PEERS_HPP
#define STACKPROV_BENCH_UNWIND_PEERS_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snapshot_set.hpp"

namespace bench_unwind {

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

}  // namespace bench_unwind

#endif  // STACKPROV_BENCH_UNWIND_PEERS_HPP
