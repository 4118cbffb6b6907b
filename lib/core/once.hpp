// SPDX-License-Identifier: Apache-2.0
// One-time initialisation that may throw (std::bad_alloc under RLIMIT_AS) without unwinding
// through C code.
#pragma once

#include <atomic>
#include <mutex>

namespace stackprov {

/// Use instead of std::once_flag / std::call_once. libstdc++'s call_once runs the callable
/// inside glibc's pthread_once: an exception thrown there unwinds through a C frame, whose
/// personality routine glibc loads from libgcc_s.so.1 with dlopen — which fails when memory is
/// short (the very case that threw), and glibc then aborts the process ("libgcc_s.so.1 must
/// be installed for unwinding to work"). Here the callable runs under a mutex in our own frame:
/// if it throws, the flag stays unset (the next caller tries again) and the exception
/// propagates to the caller's guard.
class OnceFlag {
 public:
  OnceFlag() = default;
  OnceFlag(const OnceFlag&) = delete;
  OnceFlag& operator=(const OnceFlag&) = delete;

  template <class F>
  friend void call_once(OnceFlag& flag, F&& f);

 private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
};

template <class F>
void call_once(OnceFlag& flag, F&& f) {
  if (flag.done_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(flag.mu_);
  if (flag.done_.load(std::memory_order_relaxed)) return;
  f();
  flag.done_.store(true, std::memory_order_release);
}

}  // namespace stackprov
