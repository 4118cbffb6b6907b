// SPDX-License-Identifier: Apache-2.0
// Shared by the store backends: inline chains as JSON columns, signed/unsigned 64-bit columns.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "trace/trace.hpp"

namespace stackprov::trace::detail {

/// [{"function","file","line","column"},...] in canonical JSON (sorted keys, no spaces).
std::string inline_chain_json(const std::vector<InlineFrame>& chain);
/// The reverse; bounded by kMaxInlineDepth. An empty string or SQL NULL is an empty chain.
Result<std::vector<InlineFrame>> parse_inline_chain(std::string_view json);

/// 64-bit unsigned values (ip, offsets, tid) live in BIGINT columns bit for bit.
inline int64_t to_db(uint64_t v) {
  int64_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}
inline uint64_t from_db(int64_t v) {
  uint64_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}

/// Builds a trace's threads from frame rows: (thread_index, frame) in frame_index order; threads
/// that have no row of their own (a migrated version-1 trace) are created empty.
Status place_frame(Trace& t, uint64_t thread_index, Frame f);

}  // namespace stackprov::trace::detail
