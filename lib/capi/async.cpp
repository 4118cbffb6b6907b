// SPDX-License-Identifier: Apache-2.0
// C ABI: async boundaries a program registers in process (doc/async-stacks.md) — coroutine stacks with their resumer's ucontext, the thread's async stack root.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <mutex>

#include "capi/internal.hpp"

using namespace stackprov;
using namespace stackprov::capi;

// The public structs are folly's AsyncStackRoot / AsyncStackFrame (folly/tracing/AsyncStack.h):
// on 64-bit targets the walk reads them at these offsets (unwind/unwinder.hpp splice_awaiters);
// 32-bit targets (mips32) do not read awaiter records.
#if UINTPTR_MAX == UINT64_MAX
static_assert(offsetof(struct sprov_async_frame, parent) == 0 && offsetof(struct sprov_async_frame, return_address) == 8 &&
              offsetof(struct sprov_async_frame, root) == 16 && sizeof(struct sprov_async_frame) == 24);
static_assert(offsetof(struct sprov_async_root, top_frame) == 0 && offsetof(struct sprov_async_root, next_root) == 8 &&
              offsetof(struct sprov_async_root, stack_frame_ptr) == 16 &&
              offsetof(struct sprov_async_root, return_address) == 24 && sizeof(struct sprov_async_root) == 32);
#endif
static_assert(memory::SnapshotAsync::kMaxStacks == SPROV_ASYNC_MAX_STACKS);

namespace {

/// The registered coroutine stacks: sorted by lo, disjoint, at most SPROV_ASYNC_MAX_STACKS.
struct Registry {
  std::mutex mu;
  std::vector<memory::SnapshotAsync::Stack> stacks;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: captures may run during exit
  return *r;
}

/// The calling thread's root slot (sprov_async_set_thread_root_slot).
thread_local struct sprov_async_root* const* t_root_slot = nullptr;

/// folly's current root for the calling thread: the value of the pthread key in
/// `folly_async_stack_root_tls_key` points at folly's AsyncStackRootHolder, whose first member is
/// std::atomic<AsyncStackRoot*> (folly/tracing/AsyncStack.cpp). 0 when folly is not loaded or the
/// thread has no holder. The key's global starts as 0xFFFFFFFF (no key yet).
uint64_t folly_root() {
  static void* const key_sym = dlsym(RTLD_DEFAULT, "folly_async_stack_root_tls_key");
  if (key_sym == nullptr) return 0;
  const pthread_key_t key = *static_cast<const volatile pthread_key_t*>(key_sym);
  if (key == static_cast<pthread_key_t>(0xFFFFFFFFu)) return 0;
  const void* holder = pthread_getspecific(key);
  if (holder == nullptr) return 0;
  return reinterpret_cast<uint64_t>(*static_cast<void* const volatile*>(holder));
}

}  // namespace

namespace stackprov::capi {

void capture_async_registrations(memory::Snapshot& snap) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    snap.async.stacks = r.stacks;
  }
  snap.async.root = 0;
  snap.async.root_source = 0;
  if (t_root_slot != nullptr) {
    snap.async.root = reinterpret_cast<uint64_t>(*static_cast<struct sprov_async_root* const volatile*>(t_root_slot));
    if (snap.async.root != 0) snap.async.root_source = memory::SnapshotAsync::kRootSlot;
  } else if (uint64_t root = folly_root(); root != 0) {
    snap.async.root = root;
    snap.async.root_source = memory::SnapshotAsync::kRootFolly;
  }
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_async_register_stack(const void* lo, size_t size, const void* resumer_ucontext) {
  return guard([&] {
    if (lo == nullptr || resumer_ucontext == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_async_register_stack: NULL %s",
                             lo == nullptr ? "lo" : "resumer_ucontext"));
    const uint64_t a = reinterpret_cast<uint64_t>(lo);
    if (size == 0 || a + size < a)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_async_register_stack: stack 0x%llx of %zu bytes is empty or wraps",
                             static_cast<unsigned long long>(a), size));
    const memory::SnapshotAsync::Stack entry{a, a + size, reinterpret_cast<uint64_t>(resumer_ucontext)};
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = std::lower_bound(r.stacks.begin(), r.stacks.end(), a,
                               [](const memory::SnapshotAsync::Stack& s, uint64_t v) { return s.lo < v; });
    const bool replace = it != r.stacks.end() && it->lo == a;
    const auto overlaps = [&](const memory::SnapshotAsync::Stack& s) { return s.lo < entry.hi && entry.lo < s.hi; };
    if ((it != r.stacks.begin() && overlaps(*std::prev(it))) ||
        (it != r.stacks.end() && (replace ? std::next(it) != r.stacks.end() && overlaps(*std::next(it)) : overlaps(*it))))
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_async_register_stack: [0x%llx, 0x%llx) overlaps a registered stack",
                             static_cast<unsigned long long>(entry.lo), static_cast<unsigned long long>(entry.hi)));
    if (replace) {
      *it = entry;
      return 0;
    }
    if (r.stacks.size() >= SPROV_ASYNC_MAX_STACKS)
      return fail(make_error(SPROV_ERR_LIMIT, "sprov_async_register_stack: %d stacks are registered already",
                             SPROV_ASYNC_MAX_STACKS));
    r.stacks.insert(it, entry);
    return 0;
  });
}

SPROV_API int sprov_async_unregister_stack(const void* lo) {
  return guard([&] {
    const uint64_t a = reinterpret_cast<uint64_t>(lo);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = std::find_if(r.stacks.begin(), r.stacks.end(), [&](const memory::SnapshotAsync::Stack& s) { return s.lo == a; });
    if (it == r.stacks.end())
      return fail(make_error(SPROV_ERR_NOT_FOUND, "sprov_async_unregister_stack: no stack registered at 0x%llx",
                             static_cast<unsigned long long>(a)));
    r.stacks.erase(it);
    return 0;
  });
}

SPROV_API int sprov_async_set_thread_root_slot(struct sprov_async_root* const* slot) {
  t_root_slot = slot;
  return 0;
}

}  // extern "C"
