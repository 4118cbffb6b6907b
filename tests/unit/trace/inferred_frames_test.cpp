// SPDX-License-Identifier: Apache-2.0
// Tail-call frames in traces (issue 36): a frame whose unwind_method ends in "+inferred" is not on
// the stack. A trace written before them (no suffix anywhere) renders as before; --no-tail-calls
// leaves the inferred frames out and numbers the others as `stack --no-tail-calls`; an offline
// resolve that infers none keeps the recorded ones between the same two unwound frames.
// (The frames against gdb: tests/integration/tailcall --trace.)
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "pipeline/frame_render.hpp"
#include "pipeline/trace.hpp"
#include "trace/trace.hpp"

using namespace stackprov;

namespace {

trace::Frame frame(uint64_t ip, const std::string& sym, const std::string& method) {
  trace::Frame f;
  f.ip = ip;
  f.module_path = "/bin/app";
  f.module_offset = ip - 0x1000;
  f.symbol = sym;
  f.symbol_offset = 4;
  f.resolver = "symtab";
  f.unwind_method = method;
  return f;
}

std::string text(const trace::Trace& t, bool inferred) {
  std::string out;
  for (const auto& rt : pipeline::trace_render_threads(t, inferred)) pipeline::render_thread(rt, 0, &out);
  return out;
}

}  // namespace

TEST_CASE("frame_inferred: the +inferred suffix only", "[trace][tailcall]") {
  CHECK(trace::frame_inferred(frame(1, "f", "tail_call+inferred")));
  CHECK_FALSE(trace::frame_inferred(frame(1, "f", "tail_call")));
  CHECK_FALSE(trace::frame_inferred(frame(1, "f", "frame_pointer+jit")));
  CHECK_FALSE(trace::frame_inferred(frame(1, "f", "+inferred")));  // no method before it
  CHECK_FALSE(trace::frame_inferred(frame(1, "f", "")));
}

TEST_CASE("trace_render_threads: inferred frames tagged as stack's, hidden with --no-tail-calls", "[trace][tailcall]") {
  trace::Trace t;
  trace::Thread th;
  th.tid = 7;
  th.frames = {frame(0x1010, "leaf", "context"), frame(0x1020, "hot_b", "tail_call+inferred"),
               frame(0x1030, "caller", "cfi_eh_frame")};
  t.threads = {th};
  const std::string all = text(t, true), hidden = text(t, false);
  CHECK(all ==
        "TID 7:\n"
        "#0  0x0000000000001010 leaf+0x4 - /bin/app [context]\n"
        "#1  0x0000000000001020 hot_b+0x4 - /bin/app [tail_call, inferred]\n"
        "#2  0x0000000000001030 caller+0x4 - /bin/app [cfi_eh_frame]\n");
  CHECK(hidden ==
        "TID 7:\n"
        "#0  0x0000000000001010 leaf+0x4 - /bin/app [context]\n"
        "#1  0x0000000000001030 caller+0x4 - /bin/app [cfi_eh_frame]\n");
  // A trace without inferred frames (every trace before them) renders the same either way.
  t.threads[0].frames.erase(t.threads[0].frames.begin() + 1);
  CHECK(text(t, true) == hidden);
  CHECK(text(t, false) == hidden);
}

TEST_CASE("carry_inferred_frames: kept between the same two unwound frames, only when none was inferred",
          "[trace][tailcall]") {
  trace::Thread rec;
  rec.tid = 9;
  rec.frames = {frame(0x1010, "leaf", "context"), frame(0x1020, "hot_b", "tail_call+inferred"),
                frame(0x1030, "caller", "cfi_eh_frame"), frame(0x1040, "main", "cfi_eh_frame")};
  trace::Thread again;  // an offline resolve: the unwound frames, named from a bundle
  again.tid = 9;
  again.frames = {frame(0x1010, "leaf", "cfi_bundle"), frame(0x1030, "caller", "cfi_bundle"),
                  frame(0x1040, "main", "cfi_bundle")};
  std::vector<trace::Thread> after = {again};
  pipeline::carry_inferred_frames({rec}, after);
  REQUIRE(after[0].frames.size() == 4);
  CHECK(after[0].frames[1].unwind_method == "tail_call+inferred");
  CHECK(after[0].frames[1].ip == 0x1020);
  CHECK(after[0].frames[2].symbol == "caller");

  // Another caller pc after the leaf: the recorded inferred frame does not belong there.
  again.frames[1].ip = 0x1038;
  after = {again};
  pipeline::carry_inferred_frames({rec}, after);
  CHECK(after[0].frames.size() == 3);

  // A resolve that inferred frames itself keeps its own.
  again.frames[1].ip = 0x1030;
  again.frames.insert(again.frames.begin() + 1, frame(0x1024, "other", "tail_call+inferred"));
  after = {again};
  pipeline::carry_inferred_frames({rec}, after);
  REQUIRE(after[0].frames.size() == 4);
  CHECK(after[0].frames[1].ip == 0x1024);
}

TEST_CASE("carry_symbol_offsets pairs the unwound frames by rank, past inferred ones", "[trace][tailcall]") {
  trace::Thread rec;
  rec.tid = 3;
  rec.frames = {frame(0x1010, "leaf", "context"), frame(0x1020, "hot_b", "tail_call+inferred"),
                frame(0x1030, "caller", "cfi_eh_frame")};
  trace::Thread again;
  again.tid = 3;
  again.frames = {frame(0x1010, "leaf", "cfi_bundle"), frame(0x1030, "caller", "cfi_bundle")};
  for (auto& f : again.frames) {  // a bundle: no function starts
    f.symbol_offset = 0;
    f.symbol_offset_known = false;
  }
  std::vector<trace::Thread> after = {again};
  pipeline::carry_symbol_offsets({rec}, after);
  CHECK(after[0].frames[0].symbol_offset == 4);
  CHECK(after[0].frames[1].symbol_offset == 4);  // index 1 here, 2 in the recording
  CHECK(after[0].frames[1].symbol_offset_known);
}
