// SPDX-License-Identifier: Apache-2.0
// sprov_process_interleave: Python frames attached to their _PyEval_EvalFrameDefault activations by entry frames.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "capi/internal.hpp"

using namespace stackprov;

namespace {

constexpr uint64_t kEvalStart = 0x5000, kEvalEnd = 0x6000, kColdStart = 0x9000, kColdEnd = 0x9100;

runtime::PythonFrame py(const std::string& name, bool entry) {
  runtime::PythonFrame f;
  f.function = name;
  f.qualname = "Q." + name;
  f.file = "/srv/app.py";
  f.line = 7;
  f.is_entry = entry;
  return f;
}

unwind::Frame native(uint64_t pc, bool caller = true) {
  unwind::Frame f;
  f.pc = pc;
  f.sp = pc * 16;
  f.module_index = 0;
  f.method = caller ? unwind::Method::kCfiEhFrame : unwind::Method::kContext;
  f.lookup_prev = caller;
  return f;
}

struct Fixture {
  sprov_process proc;
  sprov_stack stack;
  Fixture(std::vector<runtime::PythonFrame> frames, std::vector<unwind::Frame> natives) {
    auto snap = std::make_unique<sprov_snapshot>();
    snap->snap.tid = 5;
    proc.threads.push_back(std::move(snap));
    proc.runtime.eval = {{kEvalStart, kEvalEnd}, {kColdStart, kColdEnd}};
    runtime::PythonThread t;
    t.tid = 5;
    t.frames = std::move(frames);
    proc.runtime.python.push_back(std::move(t));
    stack.frames = std::move(natives);
    stack.stop = unwind::StopReason::kEndOfStack;
    stack.modules = std::make_shared<std::vector<memory::SnapshotModule>>(1);
  }
  /// "name@native_index" for runtime frames, "pc" (hex) for native ones.
  std::vector<std::string> merged(int mode) {
    sprov_stack* out = nullptr;
    REQUIRE(sprov_process_interleave(&proc, 0, &stack, mode, &out) == 0);
    std::vector<std::string> names;
    for (size_t i = 0; i < sprov_stack_frame_count(out); i++) {
      sprov_frame fr = {};
      fr.sz = sizeof(fr);
      REQUIRE(sprov_stack_frame(out, i, &fr) == 0);
      sprov_runtime_frame rf = {};
      rf.sz = sizeof(rf);
      const int rc = sprov_stack_runtime_frame(out, i, &rf);
      if (fr.method == SPROV_METHOD_RUNTIME) {
        REQUIRE(rc == 0);
        CHECK(std::string(rf.runtime) == "python");
        CHECK(std::string(rf.qualname) == "Q." + std::string(rf.function));
        names.push_back(std::string(rf.function) + "@" + std::to_string(rf.native_index));
      } else {
        CHECK(rc == SPROV_ERR_NOT_FOUND);
        char b[32];
        snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(fr.pc));
        names.push_back(b);
      }
    }
    CHECK(sprov_stack_stop_reason(out) == SPROV_STOP_END_OF_STACK);
    // An interleaved stack is not interleaved again.
    sprov_stack* twice = nullptr;
    if (mode == SPROV_RUNTIME_INTERLEAVE && names.size() != stack.frames.size())
      CHECK(sprov_process_interleave(&proc, 0, out, mode, &twice) == SPROV_ERR_INVALID_ARG);
    sprov_stack_free(out);
    return names;
  }
};

}  // namespace

TEST_CASE("interleave: each activation runs the frames up to its entry frame", "[interleave]") {
  // 3.11: b's activation inlined a's call; c and d each were entered from C.
  Fixture fx({py("a", false), py("b", true), py("c", true), py("d", false)},
             {native(0x100, false), native(0x5100), native(0x200), native(kColdStart + 0x10), native(0x5200)});
  using V = std::vector<std::string>;
  CHECK(fx.merged(SPROV_RUNTIME_INTERLEAVE) == V{"100", "a@3", "b@3", "5100", "200", "c@6", "9010", "d@8", "5200"});
  CHECK(fx.merged(SPROV_RUNTIME_ONLY) == V{"a@-1", "b@-1", "c@-1", "d@-1"});
}

TEST_CASE("interleave: frames no activation took follow the native frames", "[interleave]") {
  Fixture fx({py("a", true), py("b", true), py("c", true)}, {native(0x100, false), native(0x5100)});
  CHECK(fx.merged(SPROV_RUNTIME_INTERLEAVE) == std::vector<std::string>{"100", "a@2", "5100", "b@-1", "c@-1"});
}

TEST_CASE("interleave: a return address is looked up at pc - 1", "[interleave]") {
  // pc == end with pc-1 inside: an activation; pc == start of a caller frame: the call was before it.
  Fixture fx({py("a", true), py("b", true)}, {native(kEvalStart), native(kEvalEnd)});
  CHECK(fx.merged(SPROV_RUNTIME_INTERLEAVE) == std::vector<std::string>{"5000", "a@2", "6000", "b@-1"});
  // Frame 0 (the interrupted pc) is looked up at pc itself.
  Fixture fx0({py("a", true)}, {native(kEvalStart, false)});
  CHECK(fx0.merged(SPROV_RUNTIME_INTERLEAVE) == std::vector<std::string>{"a@1", "5000"});
}

TEST_CASE("interleave: bad arguments and threads without Python", "[interleave]") {
  Fixture fx({}, {native(0x5100)});
  CHECK(fx.merged(SPROV_RUNTIME_INTERLEAVE) == std::vector<std::string>{"5100"});
  sprov_stack* out = nullptr;
  CHECK(sprov_process_interleave(&fx.proc, 1, &fx.stack, SPROV_RUNTIME_INTERLEAVE, &out) == SPROV_ERR_INVALID_ARG);
  CHECK(sprov_process_interleave(&fx.proc, 0, &fx.stack, 7, &out) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("mode 7") != std::string::npos);
  CHECK(out == nullptr);
  CHECK(sprov_process_runtime_frame_count(&fx.proc, 0) == 0);
  sprov_runtime_frame rf = {};
  rf.sz = sizeof(rf);
  CHECK(sprov_process_runtime_frame(&fx.proc, 0, 0, &rf) == SPROV_ERR_INVALID_ARG);
}
