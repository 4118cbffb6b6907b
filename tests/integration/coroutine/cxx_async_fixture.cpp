// SPDX-License-Identifier: Apache-2.0
// C++20 coroutines with folly's async stack convention (issue 35; doc/async-stacks.md): an event loop
// resumes leaf coroutines after real suspensions; each coroutine's promise keeps a folly-shaped
// AsyncStackFrame, the loop installs an AsyncStackRoot. At each capture the fixture prints, as one
// JSON line, what stackprov's walk gives (every frame: pc, method, flags, domain, module offset, and
// our symbolizer's name and line) and the truth the program knows: the return addresses its records
// hold, innermost first, and the names of the coroutines awaiting, in order. check_cxx_async.py
// compares them and asks llvm-symbolizer-14 for the names and lines.
//
// The record layouts are pinned from folly's public header (folly/tracing/AsyncStack.h: AsyncStackFrame
// { parentFrame, instructionPointer, stackRoot }, AsyncStackRoot { topFrame, nextRoot, stackFramePtr,
// returnAddress }) and folly/tracing/AsyncStack.cpp (the pthread key `folly_async_stack_root_tls_key`,
// whose value points at an AsyncStackRootHolder { std::atomic<AsyncStackRoot*> value }). Debian has no
// folly: this is the shape, not folly itself.
//
// argv[1]: "folly" (stackprov finds the root through the exported pthread key) or "slot" (no key; the
// thread hands its root pointer's address to sprov_async_set_thread_root_slot).
#include <pthread.h>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include "stackprov/stackprov.h"

#define NOINLINE __attribute__((noinline))

struct AsyncStackRoot;
struct AsyncStackFrame {
  AsyncStackFrame* parentFrame = nullptr;
  void* instructionPointer = nullptr;
  AsyncStackRoot* stackRoot = nullptr;
};
struct AsyncStackRoot {
  std::atomic<AsyncStackFrame*> topFrame{nullptr};
  AsyncStackRoot* nextRoot = nullptr;
  void* stackFramePtr = nullptr;
  void* returnAddress = nullptr;
};
struct AsyncStackRootHolder {
  std::atomic<AsyncStackRoot*> value{nullptr};
};
static_assert(offsetof(AsyncStackFrame, parentFrame) == 0 && offsetof(AsyncStackFrame, instructionPointer) == 8 &&
              offsetof(AsyncStackFrame, stackRoot) == 16);
static_assert(offsetof(AsyncStackRoot, nextRoot) == 8 && offsetof(AsyncStackRoot, stackFramePtr) == 16 &&
              offsetof(AsyncStackRoot, returnAddress) == 24 && sizeof(AsyncStackRoot) == 32);
static_assert(sizeof(AsyncStackRootHolder) == sizeof(void*));

extern "C" {
// folly's initial value: no key yet (folly/tracing/AsyncStack.cpp).
__attribute__((visibility("default"), used)) pthread_key_t folly_async_stack_root_tls_key = 0xFFFFFFFFu;
}
static thread_local AsyncStackRootHolder t_holder;

// ---------------------------------------------------------------- a task type keeping the records

struct Task {
  struct promise_type {
    AsyncStackFrame frame;
    std::coroutine_handle<> continuation;
    const char* name = "";
    Task get_return_object() { return Task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      // folly's popAsyncStackFrameCallee: the parent becomes the root's top frame again.
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        promise_type& p = h.promise();
        AsyncStackRoot* root = p.frame.stackRoot;
        if (p.frame.parentFrame != nullptr) {
          p.frame.parentFrame->stackRoot = root;
          if (root != nullptr) root->topFrame.store(p.frame.parentFrame);
        } else if (root != nullptr) {
          root->topFrame.store(nullptr);
        }
        if (p.continuation) return p.continuation;
        return std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  std::coroutine_handle<promise_type> h;

  bool await_ready() { return false; }
  // folly's pushAsyncStackFrameCallerCallee: the callee's parent is the caller's frame, its return
  // address the caller's resume point (this function's return address, in the caller's actor).
  NOINLINE std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> caller) {
    promise_type& callee = h.promise();
    promise_type& cp = caller.promise();
    callee.continuation = caller;
    callee.frame.parentFrame = &cp.frame;
    callee.frame.instructionPointer = __builtin_return_address(0);
    callee.frame.stackRoot = cp.frame.stackRoot;
    if (cp.frame.stackRoot != nullptr) cp.frame.stackRoot->topFrame.store(&callee.frame);
    __asm__ volatile("" ::: "memory");
    return h;
  }
  void await_resume() {}
};

// ---------------------------------------------------------------- the event loop

struct Ready {
  std::coroutine_handle<> h;
  AsyncStackFrame* frame;
};
static std::deque<Ready> g_queue;

// Suspends the running coroutine until the loop takes it from the queue again (folly deactivates the
// frame on suspension: the root has no top frame while the loop runs).
struct Yield {
  AsyncStackFrame* frame;
  bool await_ready() { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    if (frame->stackRoot != nullptr) frame->stackRoot->topFrame.store(nullptr);
    g_queue.push_back({h, frame});
  }
  void await_resume() {}
};

// The loop installs a root (folly's ScopedAsyncStackRoot) whose stackFramePtr is its own frame.
NOINLINE static void run_loop() {
  AsyncStackRoot root;
  root.stackFramePtr = __builtin_frame_address(0);
  root.returnAddress = __builtin_return_address(0);
  root.nextRoot = t_holder.value.load();
  t_holder.value.store(&root);
  while (!g_queue.empty()) {
    Ready r = g_queue.front();
    g_queue.pop_front();
    r.frame->stackRoot = &root;  // folly's activateAsyncStackFrame
    root.topFrame.store(r.frame);
    r.h.resume();
    root.topFrame.store(nullptr);
  }
  t_holder.value.store(root.nextRoot);
}

// ---------------------------------------------------------------- captures

static sprov_context* g_ctx;
static sprov_unwinder* g_uw;
static sprov_symbolizer* g_sym;

static std::string json_str(const char* s) {
  std::string out = "\"";
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') out += '\\';
    out += *s;
  }
  return out + "\"";
}

// Captures and unwinds here; prints the walk and the truth: the records' return addresses from the
// running leaf's frame outward, and the awaiting coroutines' names.
NOINLINE static void capture_here(const char* tag, AsyncStackFrame* leaf) {
  sprov_snapshot* snap = nullptr;
  sprov_stack* st = nullptr;
  if (sprov_snapshot_capture_self(g_ctx, nullptr, &snap) != 0 || sprov_unwinder_unwind(g_uw, snap, &st) != 0) {
    std::printf("FAIL: %s: capture/unwind: %s\n", tag, sprov_last_error_message());
    std::exit(1);
  }
  std::string line = "{\"tag\":" + json_str(tag) + ",\"records\":[";
  int k = 0;
  for (AsyncStackFrame* f = leaf; f != nullptr && k < 64; f = f->parentFrame, k++)
    line += (k ? "," : "") + std::to_string(reinterpret_cast<uintptr_t>(f->instructionPointer));
  line += "],\"awaiting\":[";
  k = 0;
  for (AsyncStackFrame* f = leaf ? leaf->parentFrame : nullptr; f != nullptr && k < 64; f = f->parentFrame, k++) {
    auto* p = reinterpret_cast<Task::promise_type*>(reinterpret_cast<char*>(f) - offsetof(Task::promise_type, frame));
    line += (k ? "," : "") + json_str(p->name);
  }
  line += "],\"frames\":[";
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    sprov_frame fr = {};
    fr.sz = sizeof fr;
    sprov_stack_frame(st, i, &fr);
    sprov_symbol_info info = {};
    info.sz = sizeof info;
    const bool named = sprov_symbolizer_frame_ex(g_sym, st, i, SPROV_SYMBOLIZE_LLVM_COMPAT | SPROV_SYMBOLIZE_NO_INLINES,
                                                 &info) == 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s{\"pc\":%llu,\"module_offset\":%llu,\"method\":", i ? "," : "",
                  static_cast<unsigned long long>(fr.pc), static_cast<unsigned long long>(fr.module_offset));
    line += buf;
    line += json_str(sprov_method_name(fr.method));
    std::snprintf(buf, sizeof buf, ",\"flags\":%u,\"domain\":%d,\"return_address\":%s,\"module\":", fr.flags, fr.domain,
                  (fr.flags & SPROV_FRAME_RETURN_ADDRESS) ? "true" : "false");
    line += buf;
    line += json_str(fr.module_path ? fr.module_path : "");
    line += ",\"function\":" + json_str(named && info.name ? info.name : "");
    line += ",\"file\":" + json_str(named && info.file ? info.file : "");
    line += ",\"line\":" + std::to_string(named ? info.line : 0) + "}";
  }
  line += "],\"stop\":" + json_str(sprov_stop_reason_name(sprov_stack_stop_reason(st))) + "}";
  std::printf("%s\n", line.c_str());
  sprov_stack_free(st);
  sprov_snapshot_free(snap);
  __asm__ volatile("" ::: "memory");
}

// ---------------------------------------------------------------- the coroutines

// Learns the running coroutine's promise without suspending.
struct LeafAwait {
  Task::promise_type* p = nullptr;
  bool await_ready() { return false; }
  bool await_suspend(std::coroutine_handle<Task::promise_type> h) {
    p = &h.promise();
    return false;
  }
  Task::promise_type* await_resume() { return p; }
};

// A leaf that suspends twice on the loop, then captures.
NOINLINE static Task sleeper(const char* tag) {
  Task::promise_type* self = co_await LeafAwait{};
  self->name = "sleeper";
  co_await Yield{&self->frame};
  co_await Yield{&self->frame};
  capture_here(tag, &self->frame);
}

NOINLINE static Task middle(const char* tag) {
  Task::promise_type* self = co_await LeafAwait{};
  self->name = "middle";
  co_await sleeper(tag);
}

NOINLINE static Task top_a() {
  Task::promise_type* self = co_await LeafAwait{};
  self->name = "top_a";
  co_await middle("chain_a");
}

NOINLINE static Task top_b() {
  Task::promise_type* self = co_await LeafAwait{};
  self->name = "top_b";
  co_await sleeper("chain_b");
}

// Queues a top-level task; its frame's return address is this call's site (folly: the code that
// launched the operation), its parent none.
NOINLINE static void spawn(Task t) {
  t.h.promise().frame.instructionPointer = __builtin_return_address(0);
  g_queue.push_back({t.h, &t.h.promise().frame});
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  const bool slot = argc > 1 && std::strcmp(argv[1], "slot") == 0;
  if (!slot) {
    if (pthread_key_create(&folly_async_stack_root_tls_key, nullptr) != 0 ||
        pthread_setspecific(folly_async_stack_root_tls_key, &t_holder) != 0) {
      std::printf("FAIL: pthread key\n");
      return 1;
    }
  } else {
    static_assert(sizeof(std::atomic<AsyncStackRoot*>) == sizeof(sprov_async_root*));
    sprov_async_set_thread_root_slot(reinterpret_cast<sprov_async_root* const*>(&t_holder.value));
  }
  if (sprov_context_new(nullptr, &g_ctx) != 0 || sprov_unwinder_new(g_ctx, nullptr, &g_uw) != 0 ||
      sprov_symbolizer_new(g_ctx, nullptr, &g_sym) != 0) {
    std::printf("FAIL: %s\n", sprov_last_error_message());
    return 1;
  }
  spawn(top_a());
  spawn(top_b());
  run_loop();
  // Outside the loop there is no root: a capture here has no awaiter frames.
  capture_here("no_root", nullptr);
  sprov_symbolizer_free(g_sym);
  sprov_unwinder_free(g_uw);
  sprov_context_free(g_ctx);
  return 0;
}
