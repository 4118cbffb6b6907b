// SPDX-License-Identifier: Apache-2.0
// bench/unwind: stackprov through its public C ABI (a context and an unwinder per cold instance;
// walks through sprov_unwinder_unwind_into, the allocation-free entry point).
#include <cstdio>
#include <cstring>

#include "peers.hpp"

namespace bench_unwind {

namespace {

class StackprovPeer final : public Peer {
 public:
  explicit StackprovPeer(const SnapshotSet& set) : set_(set) {}
  ~StackprovPeer() override {
    sprov_unwinder_free(uw_);
    sprov_context_free(ctx_);
  }

  bool init() {
    if (sprov_context_new(nullptr, &ctx_) != 0) return false;
    // Same information as the peers get: .eh_frame (plus each tool's own
    // frame-pointer fallback), no .debug_frame from separate debug files.
    sprov_unwinder_opts o;
    memset(&o, 0, sizeof o);
    o.sz = sizeof o;
    o.max_frames = 4096;
    o.flags = SPROV_UNWIND_NO_DEBUG_FRAME;
    return sprov_unwinder_new(ctx_, &o, &uw_) == 0;
  }

  // The profiler's entry point: pcs into the caller's buffer, no sprov_stack
  // (include/stackprov/fast.h), as a sampling profiler embeds it.
  size_t unwind(size_t index, uint64_t* pcs, size_t max) override {
    sprov_unwind_buf buf;
    memset(&buf, 0, sizeof buf);
    buf.sz = sizeof buf;
    buf.pcs = pcs;
    buf.capacity = static_cast<uint32_t>(max);
    if (sprov_unwinder_unwind_into(uw_, set_.snapshots()[index].snap, &buf) != 0) return 0;
    last_stop_ = buf.stop_reason;
    return buf.count;
  }

  std::string last_note() const override { return sprov_stop_reason_name(last_stop_); }

  std::string stats() const override {
    struct sprov_unwinder_stats s;
    memset(&s, 0, sizeof s);
    s.sz = sizeof s;
    sprov_unwinder_stats(uw_, &s);
    char buf[160];
    snprintf(buf, sizeof buf, "rule cache hits %llu misses %llu, %llu walks, %llu frames",
             static_cast<unsigned long long>(s.rule_cache_hits),
             static_cast<unsigned long long>(s.rule_cache_misses),
             static_cast<unsigned long long>(s.walks), static_cast<unsigned long long>(s.frames));
    return buf;
  }

 private:
  const SnapshotSet& set_;
  sprov_context* ctx_ = nullptr;
  sprov_unwinder* uw_ = nullptr;
  int last_stop_ = 0;
};

}  // namespace

std::unique_ptr<Peer> make_stackprov(const SnapshotSet& set) {
  auto p = std::make_unique<StackprovPeer>(set);
  if (!p->init()) {
    fprintf(stderr, "stackprov: %s\n", sprov_last_error_message());
    return nullptr;
  }
  return p;
}

const char* peer_name(PeerKind k) {
  switch (k) {
    case PeerKind::kStackprov:
      return "stackprov";
    case PeerKind::kLibunwind:
      return "libunwind";
    case PeerKind::kLibdwfl:
      return "libdwfl";
  }
  return "?";
}

std::unique_ptr<Peer> make_peer(PeerKind k, const SnapshotSet& set) {
  switch (k) {
    case PeerKind::kStackprov:
      return make_stackprov(set);
    case PeerKind::kLibunwind:
      return make_libunwind(set);
    case PeerKind::kLibdwfl:
      return make_libdwfl(set);
  }
  return nullptr;
}

}  // namespace bench_unwind
