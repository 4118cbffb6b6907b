// SPDX-License-Identifier: Apache-2.0
// stackprov capture files ("SPROVCAP"): sampled stacks with their module lists, written by `record`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "perf/module_tracker.hpp"
#include "perf/profile.hpp"

namespace stackprov::perf {

/// Format, version 3 (all integers little-endian; every length checked on read; version 1
/// files, without the header's frequency, the samples' period and KERNEL, and version 2 files,
/// without the header's counts, are read too):
///   header: "SPROVCAP", u32 version, u32 flags (versions 1 and 2: reserved, 0), u64 sample_regs_user,
///           u32 sample_stack_user, u32 cmdline_len, cmdline bytes, u32 frequency (cpu-clock Hz),
///           u64 records, u64 samples, u64 bytes (version 3)
///   The counts say what the writer had written (complete records, SAMPLE records among them,
///   file bytes from "SPROVCAP" on) when it last flushed: it rewrites them in place (pwrite) at
///   every flush() and at finish(), whose counts include END and set flags bit 0 (kCountsFinal).
///   A file cut short says from them how much is lost: exactly with bit 0, at least that much
///   without it (the recording went on after the flush). All 0 (unknown) when the output cannot
///   be rewritten (a pipe).
///   then records { u8 kind, u8 reserved[3] (0), u32 body_len, body } until END:
///   1 MODULES  u32 id (= number of earlier MODULES records), u64 vdso_start, u32 n,
///              n × { u64 start, end, file_offset, load_bias, u32 path_len, path, u8 id_len, id },
///              i32 main (the index of the process's program, ModuleList::main; -1 unknown: written
///              since issue 36, within version 2 — readers skip what follows a MODULES body's
///              entries — and read as -1 when the body ends before it)
///   2 COMM     u32 id (= number of earlier COMM records), u32 len, bytes (≤ 64)
///   3 SAMPLE   u64 time, u32 pid, tid, list, comm, u64 ip, u64 regs[popcount(sample_regs_user)],
///              u8 user_regs, u8 reserved[7], u64 stack_requested, u32 stack_len, stack bytes,
///              u32 n_kernel, u64 kernel_ips[n_kernel], u64 period (ns)
///   4 LOST     u64 count
///   5 VDSO     the host's vDSO image bytes (≤ 1 MiB), at most once
///   6 END      u64 samples written
///   7 KERNEL   u8 id_len (<= 20), the running kernel's build-id (/sys/kernel/notes), u64 the
///              address of `_text` (/proc/kallsyms; 0 when hidden), at most once
/// Version 4 (written only by `record --python`: a capture without Python frames is a version 3
/// file, byte for byte as before) adds three records:
///   8 PYCODE   u32 id (= number of earlier PYCODE records), then co_name, co_qualname and
///              co_filename, each u32 len (<= 16384) + UTF-8 bytes
///   9 PYSTACK  the CPython frames of the SAMPLE record right before it (at most one per sample):
///              u8 state (runtime::PythonStackRead: 0 no thread, 1 read, 2 torn, 3 damaged), u8
///              reserved[3] (0), u32 n (<= 65536; 0 unless read or damaged), n × { u32 code (an
///              earlier PYCODE id), u32 line (0 unknown), u8 flags (bit 0 entry frame, bit 1 a
///              generator's), u8 reserved[3] (0) } innermost first, u32 problem_len (<= 1024), problem
///   10 PYEVAL  u32 pid, u32 n (1..16), n × { u64 start, u64 end } (start < end: the runtime
///              ranges of _PyEval_EvalFrameDefault and its cold part), u32 len (<= 1024), the
///              interpreter's description; it holds for that pid's samples after it (an exec
///              writes another)
/// A MODULES record precedes the first sample that names its id, a COMM record the first
/// sample naming it. Limits: 2^20 lists, 65536 modules per list, 2^26 samples, 64 KiB stacks,
/// 1024 kernel frames. Writing is deterministic: the same records give the same bytes (the
/// header's counts are rewritten at finish(), whatever flush() wrote before).
class CaptureWriter {
 public:
  /// Takes ownership of nothing; `f` must stay open until finish(). When `f` is a regular file
  /// (seekable, from its current offset on), flush() and finish() keep the header's counts.
  /// `python`: the file will hold PYCODE/PYSTACK/PYEVAL records (version 4; else version 3).
  CaptureWriter(FILE* f, uint64_t regs_mask, uint32_t stack_user, const std::string& cmdline,
                uint32_t frequency = 0, bool python = false);
  /// PYCODE `id` (ids in order from 0), PYSTACK of the sample written last, PYEVAL of `pid`.
  void write_py_code(uint32_t id, const PyCode& code);
  void write_py_stack(uint8_t state, const std::vector<PyFrameRef>& frames, const std::string& problem);
  void write_py_eval(const PyEval& eval);
  /// The recording kernel's build-id and `_text` address (KERNEL record).
  void write_kernel(const ModuleId& id, uint64_t text);
  void write_modules(uint32_t id, const ModuleList& list);
  void write_comm(uint32_t id, const std::string& comm);
  void write_vdso(const std::vector<uint8_t>& bytes);
  void write_sample(const SampleView& s, uint32_t list, uint32_t comm);
  void write_lost(uint64_t count);
  /// Flushes the records written so far to the file, then rewrites the header's counts to
  /// them (a reader of a copy cut short can say how much it lost at least). I/O errors are
  /// reported by finish().
  void flush();
  /// Writes END, flushes and writes the final counts; errors name the I/O failure.
  Status finish();

 private:
  void record(uint8_t kind, const std::vector<uint8_t>& body);
  void write_counts(uint32_t flags);
  FILE* f_;
  uint64_t regs_mask_;
  uint64_t samples_ = 0, records_ = 0, bytes_ = 0;
  int64_t start_ = -1;       ///< the file offset of "SPROVCAP"; -1: not rewritable (a pipe)
  uint64_t counts_at_ = 0;   ///< the counts' offset from start_
  bool io_error_ = false;
  std::vector<uint8_t> buf_;
};

constexpr char kCaptureMagic[8] = {'S', 'P', 'R', 'O', 'V', 'C', 'A', 'P'};
/// Header flags bit 0: the counts were written by finish() and include END.
constexpr uint32_t kCountsFinal = 1;

/// Decodes the body of a SAMPLE record of a file of `version`.
Status decode_capture_sample(const uint8_t* body, size_t len, uint64_t regs_mask, uint32_t version, SampleView* out);

}  // namespace stackprov::perf
