// SPDX-License-Identifier: Apache-2.0
// The trace model: a captured incident (ids, platform, captured data gzip'd and content-addressed, per-thread frames with provenance).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "evidence/encoding.hpp"

namespace stackprov::trace {

using evidence::Bytes;

/// The captured data (snapshot bytes) is refused above this size, raw or compressed.
inline constexpr size_t kMaxDataBytes = 256u << 20;
/// Bounds for hostile inputs (events, store rows).
inline constexpr size_t kMaxThreads = 1u << 16;
inline constexpr size_t kMaxFramesPerTrace = 1u << 20;
inline constexpr size_t kMaxInlineDepth = 256;

/// One inlined call in a frame's inline chain, outermost first.
struct InlineFrame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  bool operator==(const InlineFrame&) const = default;
};

/// One frame of one thread, with how it was found and how it was resolved.
struct Frame {
  uint64_t ip = 0;                 ///< absolute instruction pointer (or return address) at capture
  std::string module_path;         ///< empty when the address is in no module
  std::string module_build_id;     ///< lower-case hex (ELF build-id, PDB GUID+Age, Mach-O UUID)
  /// The kind of module_build_id (id_kind_name: "pdb-guid-age", "macho-uuid", "pe-code-id"); empty for an ELF
  /// build-id, as in every trace written before the kind was stored.
  std::string module_id_kind;
  uint64_t module_offset = 0;      ///< ip relative to the module's load base
  std::string symbol;              ///< resolved function name; empty when unresolved
  uint64_t symbol_offset = 0;      ///< ip - function start (0 when not symbol_offset_known)
  /// False when the resolver knew no function start (a bundle's answer that no resolution from
  /// the files completed): "unknown", not "at the function's start". Stored as SQL NULL and JSON
  /// null; traces stored before the distinction (a bundle frame with offset 0) are migrated to it.
  bool symbol_offset_known = true;
  std::string file;                ///< source file; empty when unknown
  uint32_t line = 0;
  uint32_t column = 0;
  std::vector<InlineFrame> inline_chain;
  std::string resolver;            ///< which resolver answered: bundle, dwarf, symtab, debuginfod...
  std::string source;              ///< where its data came from (path or sha256:HEX of a bundle)
  std::string bundle_sha256;       ///< 64 lower-case hex of the symbol bundle used, or empty
  std::string unwind_method;       ///< how the frame was found: cfi, fp, scan, signal...; then "+jit"
                                   ///< (JIT code) or "+inferred" (not on the stack: "tail_call+inferred")
  bool operator==(const Frame&) const = default;
};

struct Thread {
  uint64_t tid = 0;
  std::string name;
  std::vector<Frame> frames;
  bool operator==(const Thread&) const = default;
};

/// A trace. `data_gzip` is the gzip (zlib, deterministic header: mtime 0) of the snapshot
/// bytes; its address is `data_sha256` = sha256 of those gzip bytes (64 lower-case hex).
struct Trace {
  std::string id;                  ///< UUID v4, lower-case, 8-4-4-4-12
  std::string platform;            ///< linux, windows, macos
  std::string arch;                ///< x86_64, arm64, mips32...
  std::string captured_at;         ///< RFC 3339 UTC, canonical "YYYY-MM-DDTHH:MM:SS.ffffffZ"
  std::string build_id;            ///< the main executable's build-id (lower-case hex)
  Bytes data_gzip;
  std::string data_sha256;
  uint64_t data_size = 0;          ///< length of the uncompressed snapshot bytes
  std::vector<Thread> threads;
  std::string symbol_bundle_sha256;  ///< 64 lower-case hex, or empty
  std::string dsse_ref;            ///< "dsse:..." or empty
  bool operator==(const Trace&) const = default;

  size_t frame_count() const;
};

/// A summary row of list_traces().
struct TraceSummary {
  std::string id, platform, arch, captured_at, build_id;
  uint64_t frame_count = 0;
  bool operator==(const TraceSummary&) const = default;
};

/// One replay of a trace (the replays table and the replay.result event).
struct Replay {
  std::string replay_id;           ///< UUID v4
  std::string trace_id;
  int64_t seed = 0;
  std::string started_at, finished_at;  ///< canonical RFC 3339 UTC, like captured_at
  double replay_success_ratio = 0;
  double symbol_coverage_pct = 0;
  int64_t verify_time_ms = 0;
  std::string verifier_version;
  std::string notes_json;          ///< a JSON document, or empty
  bool operator==(const Replay&) const = default;
};

/// A stored symbol bundle: content-addressed by sha256 (64 lower-case hex) of `blob`.
struct SymbolBundleRow {
  std::string sha256;
  std::string os;
  Bytes blob;
  std::string index_json;          ///< symbol_index.json, or empty
  std::string signer;
  std::string rekor_tile_ref;
  // Migration 3: the bundle's signature evidence, as the bundle store's sidecars hold it
  // (text formats; empty when unsigned): the DSSE envelope (JSON), the tlog-proof@v1 and
  // the signed checkpoint note.
  std::string dsse_envelope;
  std::string tlog_proof;
  std::string checkpoint;
  bool operator==(const SymbolBundleRow&) const = default;
};

/// A new random UUID v4 (getrandom(2)).
/// A frame's module identity: module_build_id's bytes of kind module_id_kind (empty: an ELF
/// build-id); an empty id when the hex or the kind name does not parse.
ModuleId frame_module_id(const Frame& f);

/// The frame is inferred, not unwound (a tail-call frame from DWARF call sites, doc/unwinding.md):
/// its unwind_method ends in "+inferred". Traces before issue 36's round 2 hold none.
// Inline: the renderer (lib/pipeline/frame_render.cpp) uses it in builds without lib/trace (cross).
inline bool frame_inferred(const Frame& f) {
  constexpr std::string_view kSuffix = "+inferred";
  const std::string& m = f.unwind_method;
  return m.size() > kSuffix.size() && m.compare(m.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

Result<std::string> new_uuid();
/// True for a lower-case 8-4-4-4-12 hex UUID.
bool is_uuid(std::string_view s);
/// True for a non-empty, even-length, lower-case hex string of at most `max_len` chars.
bool is_lower_hex(std::string_view s, size_t max_len = 128);
/// The current time as canonical RFC 3339 UTC with microseconds.
std::string now_rfc3339();
/// True for the canonical form "YYYY-MM-DDTHH:MM:SS.ffffffZ" with fields in range.
bool is_canonical_time(std::string_view s);

/// gzip (deflate level 6, mtime 0, no name): the same bytes for the same input and zlib.
Result<Bytes> gzip_compress(const uint8_t* data, size_t len);
/// Decompresses a single gzip member, refusing output above `limit` and trailing bytes.
Result<Bytes> gzip_decompress(const Bytes& gz, size_t limit = kMaxDataBytes);

/// Sets data_gzip, data_sha256 and data_size from raw snapshot bytes.
Status set_trace_data(Trace& t, const uint8_t* data, size_t len);
/// The raw snapshot bytes, checked against data_sha256 and data_size.
Result<Bytes> trace_data(const Trace& t);

/// Checks every field of a trace (ids, times, hex, bounds); errors name the field and value.
Status validate_trace(const Trace& t);
Status validate_replay(const Replay& r);

}  // namespace stackprov::trace
