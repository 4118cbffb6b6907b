// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a JSON Lines event (trace.capture with its "kernel" extension, replay.result): parse_event,
// then the text renderer (sprov_trace_render's path) and the writer's round trip.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "pipeline/frame_render.hpp"
#include "trace/events.hpp"

using namespace stackprov;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto ev = trace::parse_event(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!ev) return 0;
  const auto* cap = std::get_if<trace::CaptureEvent>(&ev.value());
  if (cap == nullptr) return 0;
  std::string text;
  for (bool inferred : {true, false})
    for (const pipeline::RenderThread& t : pipeline::trace_render_threads(cap->trace, inferred, &cap->kernel))
      pipeline::render_thread(t, pipeline::kRenderLines, &text);
  // Invariant: the writer's line is a fixed point: parsed again, it is written to the same bytes. (A
  // line without the optional fields the writer always writes, captured_at or data_ref, gives a line
  // with them empty, which the parser refuses: no invariant then. The kernel extension's own
  // fields are never the reason: it is parsed back whole.)
  const std::string line = trace::trace_capture_event(cap->trace, cap->kernel);
  auto again = trace::parse_event(line);
  if (!again) {
    if (again.error().message.find(".kernel") != std::string::npos) __builtin_trap();
    return 0;
  }
  const auto* cap2 = std::get_if<trace::CaptureEvent>(&again.value());
  if (cap2 == nullptr || trace::trace_capture_event(cap2->trace, cap2->kernel) != line) __builtin_trap();
  return 0;
}
