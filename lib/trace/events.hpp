// SPDX-License-Identifier: Apache-2.0
// JSON Lines events in the seed's wire format: trace.capture and replay.result, a writer and a strict parser.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "trace/capture_data.hpp"
#include "trace/trace.hpp"

namespace stackprov::trace {

/// Longest accepted event line.
inline constexpr size_t kMaxEventLine = evidence::kMaxDocumentBytes;

/// {"event":"trace.capture","trace_id","platform","build_id","frames":[{"ip":"0x..","module",
/// "module_build_id", extensions...}],"symbol_bundle_ref":"sha256:..."|null,"dsse_ref":"dsse:..."|null,
/// extensions: "arch","captured_at","data_ref":"sha256:...","data_size","threads":[{"tid","name"}]}.
/// One line, no newline.
/// Frame extensions: thread, tid, module_offset, symbol, symbol_offset, file, line, column,
/// inline, resolver, source, bundle_ref, unwind. The captured data itself is not in the event.
/// `kernel` (trace-capture --with-btf, from the captured data): an extension "kernel", present only
/// when there are segments: {"build_id":hex,"btf_sha256":hex,"segments":[{"tid","syscall" (-1:
/// none),"user_sp":"0x..","user_pc":"0x..","frames":[{"symbol","offset":"0x..","size":"0x..",
/// "module" ("" the kernel image),"btf_func_id","approximate","prototype"}]}]}.
std::string trace_capture_event(const Trace& t, const CapturedKernel& kernel = {});
/// {"event":"replay.result","replay_id","trace_id","seed","replay_success_ratio",
///  "symbol_coverage_pct","verify_time_ms"}.
std::string replay_result_event(const Replay& r);

/// What a trace.capture line carries: the trace without its data bytes (data_gzip empty).
struct CaptureEvent {
  Trace trace;
  CapturedKernel kernel;  ///< the "kernel" extension; empty when absent
};
struct ReplayEvent {
  Replay replay;  ///< started_at, finished_at, verifier_version, notes are not in the event
};
using Event = std::variant<CaptureEvent, ReplayEvent>;

/// Strict: one JSON object, a known "event", every required field present with its type,
/// unknown fields refused by name, ids and hex checked. Errors name the field.
Result<Event> parse_event(std::string_view line);

}  // namespace stackprov::trace
