// SPDX-License-Identifier: Apache-2.0
// Private header of the extension: errors, string helpers, the handles several areas bind, the init_* functions.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "stackprov/stackprov.h"
#include "stackprov/symbol_bundle.h"

namespace py = pybind11;

namespace stackprov_py {

/// A failed C call: its code and this thread's last-error message (read before the GIL is retaken).
struct CallError {
  int code;
  std::string message;
};

/// Throws the C code with this thread's last-error message (the library's text for the code when none).
[[noreturn]] void fail(int rc);

inline void check(int rc) {
  if (rc != 0) fail(rc);
}

[[noreturn]] void fail_arg(const std::string& message);

/// Lowercase hex of raw bytes (bytes.hex(); needs the GIL).
std::string hex(const std::string& raw);

/// A C string from the library as Python gets it: names and paths are bytes (a symbol, a thread
/// name set with prctl, a path), and pybind11 decodes std::string as strict UTF-8, so a byte that
/// is not part of a well-formed UTF-8 sequence becomes U+FFFD here (as in the CLI's JSON), not a
/// UnicodeDecodeError when the attribute is read.
std::string str(const char* s);

/// An optional argument as the C ABI takes it (NULL: not given).
inline const char* cstr(const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; }

/// A string the library allocated (sprov_free).
std::string take(char* p, size_t n);

/// The string a library call returns through (char** out, size_t* out_len), e.g.
/// lib_str([&](char** out, size_t* len) { return sprov_...(..., out, len); }).
template <class F>
std::string lib_str(F&& call) {
  char* out = nullptr;
  size_t n = 0;
  check(call(&out, &n));
  return take(out, n);
}

/// A whole file's bytes; FileMissingError etc. naming it (errno as the C ABI reports it).
std::string read_file(const std::string& path);

/// close(), and the context-manager protocol that calls it on exit.
template <class T>
void closable(py::class_<T>& cls, const char* doc) {
  cls.def("close", [](T& t) {
       py::gil_scoped_release nogil;
       t.close();
     }, doc)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](T& t, py::args) {
        py::gil_scoped_release nogil;
        t.close();
      });
}

// ------------------------------------------------------------------ handles

using CtxPtr = std::shared_ptr<sprov_context>;

struct Context {
  CtxPtr ctx;
  void close() { ctx.reset(); }
  CtxPtr get() const {
    if (!ctx) fail_arg("the Context is closed");
    return ctx;
  }
};

struct InlineFrame {
  std::string function, linkage_name, file, start_file;
  uint32_t line = 0, column = 0, discriminator = 0, start_line = 0;
  std::optional<uint64_t> start_address;
  std::string resolver, source;
};

struct ProcessInfo {
  int64_t pid = 0;
  bool core = false;
  std::string source;  // "live", "core", "minidump", "raw"
  std::string program, command_line, warnings;
  std::string runtime;  // the interpreter that was read ("" when none)
  int32_t signal = 0, signal_code = 0;
  int64_t signal_tid = 0;
  std::string signal_name, signal_description, signal_code_name;
  std::optional<uint64_t> fault_address;
  bool core_truncated = false, build_id_mismatch = false, has_siginfo = false;
  // A minidump's exception (code, address, thread and name; none without an exception stream)
  // and its notes (where each module's identity and file came from).
  std::optional<uint32_t> exception_code;
  std::optional<uint64_t> exception_address;
  int64_t exception_tid = 0;
  std::string exception_name, notes;
};

/// A live capture or a core: the threads (snapshots borrowed from it), names and findings.
struct Process {
  CtxPtr ctx;
  std::shared_ptr<sprov_process> proc;
  ProcessInfo info;
  void close() {
    proc.reset();
    ctx.reset();
  }
};

/// An open symbol bundle (immutable, thread-safe in the C ABI) and where its bytes are.
struct Bundle {
  std::shared_ptr<sprov_bundle> b;
  std::string digest;
  std::shared_ptr<const std::string> data;  // the bytes, when built or opened from bytes
  std::string path;                         // else the file they were mapped from
};

/// A Bundle of an open C bundle: its digest read, `data` kept alive while the bundle lives (init_bundle.cpp).
Bundle wrap_bundle(sprov_bundle* raw, std::shared_ptr<const std::string> data, std::string path);

// ------------------------------------------------------------------ the areas, in registration order

/// C errors -> stackprov.Error subclasses; strerror, error_codes (common.cpp).
void init_errors(py::module_& m);
/// InlineFrame, Frame, Stack, Thread, ProcessInfo, Snapshot, Unwinder, Symbolizer, Process, Context (init_stack.cpp).
void init_stack(py::module_& m);
/// TraceStore (init_store.cpp).
void init_trace_store(py::module_& m);
/// _default_context, _trace_context: the contexts the package uses when given none (init_stack.cpp).
void init_default_contexts(py::module_& m);
/// digest_file, keys, log_init, Log, the log proofs, DSSE, trace_verify, sigstore_verify (init_evidence.cpp).
void init_evidence(py::module_& m);
/// ReplayReport (init_store.cpp).
void init_replay_report(py::module_& m);
/// BundleModule, Bundle (init_bundle.cpp).
void init_bundle(py::module_& m);
/// Store: the bundle store (init_store.cpp).
void init_bundle_store(py::module_& m);
/// RecordResult, ProfileFrame, ProfileSample, Profile, _record, _perf_import (init_perf.cpp).
void init_perf(py::module_& m);

}  // namespace stackprov_py
