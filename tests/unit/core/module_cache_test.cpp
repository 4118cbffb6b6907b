// SPDX-License-Identifier: Apache-2.0
// ModuleCache tests: exact counters, LRU order, held values outliving eviction, concurrent acquire.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <latch>
#include <thread>
#include <vector>

#include "core/module_cache.hpp"

using namespace stackprov;

namespace {

struct Value {
  int id;
};

ModuleKey file_key(uint64_t inode) {
  ModuleKey k;
  k.dev = 0x803;
  k.inode = inode;
  k.mtime_ns = 1700000000123456789ull;
  return k;
}

ModuleKey id_key(const char* hex) {
  ModuleKey k;
  k.build_id = ModuleId::from_hex(hex);
  return k;
}

/// Acquires `key`; the loader makes Value{id} and counts its calls.
std::shared_ptr<Value> get(ModuleCache<Value>& c, const ModuleKey& key, int id, int* loads) {
  auto r = c.acquire(key, [&]() -> Result<std::shared_ptr<Value>> {
    ++*loads;
    return std::make_shared<Value>(Value{id});
  });
  REQUIRE(r.ok());
  return r.value();
}

}  // namespace

TEST_CASE("ModuleKey: the build-id and the file identity both count") {
  ModuleKeyHash h;
  ModuleKey a = id_key("0011223344"), b = id_key("0011223344");
  REQUIRE(a == b);
  REQUIRE(h(a) == h(b));
  REQUIRE_FALSE(a.has_file());
  REQUIRE(a != id_key("0011223345"));
  REQUIRE(a != id_key("00112233"));
  // Another file claiming the same build-id is another entry: a target's file forging a library's
  // build-id must not put its rules in the entry of the real library.
  b.inode = 99;
  REQUIRE(b.has_file());
  REQUIRE(a != b);
  ModuleKey f1 = file_key(1), f2 = file_key(2);
  f1.build_id = f2.build_id = ModuleId::from_hex("0011223344");
  REQUIRE(f1 != f2);
  REQUIRE(h(f1) != h(f2));
  REQUIRE(f1 != a);
  REQUIRE(file_key(1) == file_key(1));
  REQUIRE(h(file_key(1)) == h(file_key(1)));
  REQUIRE(file_key(1) != file_key(2));
  ModuleKey m = file_key(1);
  m.mtime_ns++;
  REQUIRE(m != file_key(1));
  m = file_key(1);
  m.dev++;
  REQUIRE(m != file_key(1));
  REQUIRE(file_key(1) != a);
  REQUIRE(file_key(1) != f1);  // the same file without and with a build-id
  REQUIRE(h(file_key(1)) != h(file_key(2)));
  REQUIRE(h(a) != h(id_key("0011223345")));
  // One build-id from a bundle, from memory (a vDSO copy the target can rewrite) and from a file:
  // three entries.
  ModuleKey bun = a, mem = a;
  bun.source = ModuleKey::kBundle;
  mem.source = ModuleKey::kMemory;
  REQUIRE(bun != a);
  REQUIRE(mem != bun);
  REQUIRE(h(bun) != h(mem));
}

TEST_CASE("module_key_for_file keys the build-id and the file identity") {
  struct stat st;
  REQUIRE(stat("/proc/self/exe", &st) == 0);
  for (const ModuleId& id : {ModuleId{}, ModuleId::from_hex("abcdef")}) {
    auto k = module_key_for_file("/proc/self/exe", id);
    REQUIRE(k.ok());
    REQUIRE(k->dev == st.st_dev);
    REQUIRE(k->inode == st.st_ino);
    REQUIRE(k->mtime_ns == uint64_t(st.st_mtim.tv_sec) * 1000000000ull + st.st_mtim.tv_nsec);
    REQUIRE(k->build_id == id);
  }
  // A missing file is an error naming it, with or without a build-id.
  for (const ModuleId& id : {ModuleId{}, ModuleId::from_hex("abcdef")}) {
    auto missing = module_key_for_file("/nonexistent/file", id);
    REQUIRE_FALSE(missing.ok());
    REQUIRE(missing.error().code == -ENOENT);
    REQUIRE(missing.error().message.find("/nonexistent/file") != std::string::npos);
  }
}

TEST_CASE("ModuleCache counts hits, misses and evictions exactly and evicts in LRU order") {
  ModuleCache<Value> c(2);
  int loads = 0;
  const ModuleKey a = file_key(1), b = id_key("bb"), d = file_key(3);
  REQUIRE(get(c, a, 1, &loads)->id == 1);  // miss
  REQUIRE(get(c, a, 9, &loads)->id == 1);  // hit: the loader is not called
  REQUIRE(get(c, b, 2, &loads)->id == 2);  // miss
  REQUIRE(c.hits() == 1);
  REQUIRE(c.misses() == 2);
  REQUIRE(c.evictions() == 0);
  REQUIRE(c.size() == 2);
  REQUIRE(get(c, a, 9, &loads)->id == 1);  // hit: a is now most recent, b least
  REQUIRE(get(c, d, 3, &loads)->id == 3);  // miss: evicts b
  REQUIRE(c.evictions() == 1);
  REQUIRE(c.contains(a));
  REQUIRE_FALSE(c.contains(b));
  REQUIRE(c.contains(d));
  REQUIRE(get(c, b, 4, &loads)->id == 4);  // miss: reloaded, evicts a (LRU)
  REQUIRE_FALSE(c.contains(a));
  REQUIRE(c.size() == 2);
  REQUIRE(c.hits() == 2);
  REQUIRE(c.misses() == 4);
  REQUIRE(c.evictions() == 2);
  REQUIRE(loads == 4);
  REQUIRE(c.release(d));
  REQUIRE_FALSE(c.release(d));
  REQUIRE(c.size() == 1);
  REQUIRE(c.evictions() == 2);  // explicit release is not an eviction
}

TEST_CASE("ModuleCache: evicted values stay alive while held") {
  ModuleCache<Value> c(1);
  int loads = 0;
  std::shared_ptr<Value> held = get(c, file_key(1), 1, &loads);
  std::weak_ptr<Value> weak = held;
  get(c, file_key(2), 2, &loads);  // evicts key 1
  REQUIRE(c.evictions() == 1);
  REQUIRE_FALSE(c.contains(file_key(1)));
  REQUIRE_FALSE(weak.expired());
  REQUIRE(held->id == 1);
  held.reset();
  REQUIRE(weak.expired());
  // The cached value dies when released and no longer held.
  std::weak_ptr<Value> weak2 = get(c, file_key(2), 0, &loads);
  REQUIRE_FALSE(weak2.expired());
  REQUIRE(c.release(file_key(2)));
  REQUIRE(weak2.expired());
}

TEST_CASE("ModuleCache: loader errors are returned and not cached") {
  ModuleCache<Value> c(4);
  int calls = 0;
  auto fail = [&]() -> Result<std::shared_ptr<Value>> {
    ++calls;
    return make_error(SPROV_ERR_ELF, "bad file");
  };
  auto r = c.acquire(file_key(1), fail);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().code == SPROV_ERR_ELF);
  REQUIRE_FALSE(c.acquire(file_key(1), fail).ok());
  REQUIRE(calls == 2);
  REQUIRE(c.size() == 0);
  auto null = c.acquire(file_key(2), []() -> Result<std::shared_ptr<Value>> {
    return std::shared_ptr<Value>();
  });
  REQUIRE_FALSE(null.ok());
  REQUIRE(null.error().code == SPROV_ERR_INTERNAL);
  REQUIRE(c.size() == 0);
}

TEST_CASE("ModuleCache: concurrent misses on one key share the first inserted value") {
  ModuleCache<Value> c(4);
  std::latch both_loading(2);
  std::atomic<int> next_id{1};
  auto loader = [&]() -> Result<std::shared_ptr<Value>> {
    both_loading.arrive_and_wait();  // both threads are inside the loader at once
    return std::make_shared<Value>(Value{next_id++});
  };
  std::shared_ptr<Value> r1, r2;
  std::thread t1([&] { r1 = c.acquire(file_key(7), loader).value(); });
  std::thread t2([&] { r2 = c.acquire(file_key(7), loader).value(); });
  t1.join();
  t2.join();
  REQUIRE(c.misses() == 2);
  REQUIRE(r1 == r2);
  REQUIRE(c.size() == 1);
  int loads = 0;
  REQUIRE(get(c, file_key(7), 0, &loads) == r1);
  REQUIRE(loads == 0);
}

TEST_CASE("ModuleCache: 8 threads acquiring concurrently keep the counters consistent") {
  constexpr int kThreads = 8, kIters = 4000, kKeys = 16;
  ModuleCache<Value> c(8);
  std::atomic<uint64_t> loads{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      uint32_t x = 2463534242u + t;
      for (int i = 0; i < kIters; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        const int k = static_cast<int>(x % kKeys);
        auto r = c.acquire(file_key(k), [&]() -> Result<std::shared_ptr<Value>> {
          loads++;
          return std::make_shared<Value>(Value{k});
        });
        if (!r.ok() || r.value()->id != k) wrong++;
        if (i % 97 == 0) c.release(file_key((k + 1) % kKeys));
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(wrong == 0);
  REQUIRE(c.hits() + c.misses() == uint64_t{kThreads} * kIters);
  REQUIRE(c.misses() == loads);
  REQUIRE(c.size() <= 8);
  REQUIRE(c.evictions() > 0);
}
