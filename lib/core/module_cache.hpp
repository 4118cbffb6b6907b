// SPDX-License-Identifier: Apache-2.0
// ModuleCache<V>: a bounded, thread-safe LRU cache of per-module values keyed by build-id or file identity.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "core/types.hpp"

struct stat;

namespace stackprov {

/// Identity of a module's contents: the build-id and the file identity (dev, inode, mtime in ns)
/// of the file it is read from, each part that is known. A module from a file has both (no
/// build-id: the file identity alone); a module with no file (a bundle, the vDSO's bytes) has the
/// build-id alone. The file identity is part of the key because a build-id is only a claim the
/// file makes: a target's file claiming another library's build-id must not put its unwind rules
/// in the entry that every process mapping the real library then uses. Processes mapping one
/// file share its entry. Never a path or a version string.
struct ModuleKey {
  /// Where the module's bytes come from: entries from different sources never share (a target's
  /// vDSO copy, which it can rewrite, must not stand for a bundle of the same build-id).
  /// kMemoryImage: a module file's image rebuilt from a process's memory (no file that is the one
  /// mapped); `inode` holds the XXH3 of the rebuilt bytes, so one target's image stands only for
  /// an image with the same bytes.
  enum Source : uint8_t { kFile = 0, kBundle = 1, kMemory = 2, kMemoryImage = 3 };
  Source source = kFile;
  ModuleId build_id;
  uint64_t dev = 0;
  uint64_t inode = 0;
  uint64_t mtime_ns = 0;

  bool has_file() const { return dev != 0 || inode != 0 || mtime_ns != 0; }
  bool operator==(const ModuleKey& o) const {
    return source == o.source && build_id == o.build_id && dev == o.dev && inode == o.inode &&
           mtime_ns == o.mtime_ns;
  }
  bool operator!=(const ModuleKey& o) const { return !(*this == o); }
};

/// XXH3 over the key bytes: the build-id bytes, then dev/inode/mtime (little-endian).
struct ModuleKeyHash {
  size_t operator()(const ModuleKey& k) const noexcept;
};

/// The identity stat(2)/fstat(2) gave for a file.
FileIdentity file_identity_of(const struct ::stat& st);

/// Key for the file at `path`: `id` (may be empty) and the file's identity from stat(2). Errors:
/// negative errno naming the path. Whoever then opens `path` checks that the file opened is the
/// one keyed (object::ObjectImage::file_identity): the path may name another file by then.
Result<ModuleKey> module_key_for_file(const std::string& path, const ModuleId& id);

/// A bounded LRU cache of shared values (parsed module files, CFI indexes...).
///
/// Thread-safety: every member may be called concurrently. The loader runs
/// outside the lock, so concurrent misses on one key may each run it; the
/// first value inserted wins and the later loaders' values are discarded
/// (every caller then gets the cached value, so all holders share one object).
///
/// Ownership: acquire() hands out a shared_ptr; "release" is dropping it.
/// Eviction only drops the cache's own reference, so a value stays alive while
/// any caller holds it.
template <class V>
class ModuleCache {
 public:
  using Loader = std::function<Result<std::shared_ptr<V>>()>;

  /// `capacity` is the number of entries kept (at least 1).
  explicit ModuleCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  /// Returns the cached value for `key` (a hit bumps it to most recently
  /// used), or runs `loader` (a miss), caches its value and evicts the least
  /// recently used entries beyond capacity. A loader error is returned and
  /// nothing is cached; a loader returning null is SPROV_ERR_INTERNAL.
  Result<std::shared_ptr<V>> acquire(const ModuleKey& key, const Loader& loader) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        hits_.fetch_add(1, std::memory_order_relaxed);
        return it->second.value;
      }
    }
    misses_.fetch_add(1, std::memory_order_relaxed);
    Result<std::shared_ptr<V>> loaded = loader();
    if (!loaded) return loaded;
    if (!loaded.value())
      return make_error(SPROV_ERR_INTERNAL, "module cache loader returned no value");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {  // another thread loaded it meanwhile: first one wins
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.value;
    }
    lru_.push_front(key);
    map_.emplace(key, Entry{loaded.value(), lru_.begin()});
    while (map_.size() > capacity_) {
      map_.erase(lru_.back());
      lru_.pop_back();
      evictions_.fetch_add(1, std::memory_order_relaxed);
    }
    return loaded;
  }

  /// Drops the cache's reference for `key` now (not counted as an eviction).
  /// Returns whether an entry was present.
  bool release(const ModuleKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    lru_.erase(it->second.lru);
    map_.erase(it);
    return true;
  }

  /// Whether `key` is cached; does not touch the LRU order or the counters.
  bool contains(const ModuleKey& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.find(key) != map_.end();
  }

  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  /// Entries dropped because the cache was over capacity.
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    std::shared_ptr<V> value;
    typename std::list<ModuleKey>::iterator lru;
  };

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<ModuleKey> lru_;  // front: most recently used
  std::unordered_map<ModuleKey, Entry, ModuleKeyHash> map_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace stackprov
