// SPDX-License-Identifier: Apache-2.0
// Shared by the store backends: inline chains as JSON columns, signed/unsigned 64-bit columns, row checks.
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

/// Each text column of a symbol bundle's signature (signer, rekor_tile_ref, dsse_envelope,
/// tlog_proof, checkpoint) is refused above this size.
inline constexpr size_t kMaxBundleTextBytes = 1u << 20;

/// The threads and frames checks of validate_trace (counts, hex, inline depth), for put_trace
/// and replace_frames; errors name the field and value.
Status validate_threads(const std::vector<Thread>& threads);
/// A symbol bundle row before it is stored: sha256 64 lower-case hex, os at most 64 bytes, the
/// signature texts at most kMaxBundleTextBytes each and without NUL; errors name the field.
/// (That sha256 is the hash of blob is the store's check.)
Status validate_symbol_bundle(const SymbolBundleRow& b);

/// Builds a trace's threads from frame rows: (thread_index, frame) in frame_index order; threads
/// that have no row of their own (a migrated version-1 trace) are created empty.
Status place_frame(Trace& t, uint64_t thread_index, Frame f);

}  // namespace stackprov::trace::detail
