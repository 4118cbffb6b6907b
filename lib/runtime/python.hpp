// SPDX-License-Identifier: Apache-2.0
// CPython 3.11 frames read from a target's memory: the interpreter state, each thread's _PyInterpreterFrame chain.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "elf/elf_image.hpp"
#include "memory/memory_reader.hpp"

namespace stackprov::runtime {

/// Byte offsets into the CPython structures the reader follows (64-bit, release build).
/// Sources: Include/internal/pycore_runtime.h (_PyRuntimeState), pycore_interp.h (struct _is),
/// Include/cpython/pystate.h (struct _ts, _PyCFrame), pycore_frame.h (_PyInterpreterFrame),
/// Include/cpython/code.h (PyCodeObject), Include/cpython/unicodeobject.h (PyASCIIObject,
/// PyCompactUnicodeObject), Include/cpython/bytesobject.h, Include/cpython/object.h
/// (PyTypeObject.tp_name); the values are what `ptype /o` prints for Debian's python3.11.
struct PythonLayout {
  uint32_t runtime_interpreters_head = 0;  ///< _PyRuntimeState.interpreters.head
  uint32_t interp_next = 0;                ///< PyInterpreterState.next
  uint32_t interp_threads_head = 0;        ///< PyInterpreterState.threads.head
  uint32_t tstate_next = 0;                ///< PyThreadState.next
  uint32_t tstate_native_thread_id = 0;    ///< PyThreadState.native_thread_id (the OS tid)
  uint32_t tstate_cframe = 0;              ///< PyThreadState.cframe
  uint32_t cframe_current_frame = 0;       ///< _PyCFrame.current_frame
  uint32_t frame_code = 0;                 ///< _PyInterpreterFrame.f_code
  uint32_t frame_previous = 0;             ///< _PyInterpreterFrame.previous
  uint32_t frame_prev_instr = 0;           ///< _PyInterpreterFrame.prev_instr
  uint32_t frame_is_entry = 0;             ///< _PyInterpreterFrame.is_entry (bool)
  uint32_t frame_owner = 0;                ///< _PyInterpreterFrame.owner (char)
  uint32_t object_type = 0;                ///< PyObject.ob_type
  uint32_t type_name = 0;                  ///< PyTypeObject.tp_name
  uint32_t code_firstlineno = 0;           ///< PyCodeObject.co_firstlineno (int)
  uint32_t code_filename = 0;              ///< PyCodeObject.co_filename
  uint32_t code_name = 0;                  ///< PyCodeObject.co_name
  uint32_t code_qualname = 0;              ///< PyCodeObject.co_qualname
  uint32_t code_linetable = 0;             ///< PyCodeObject.co_linetable (bytes)
  uint32_t code_adaptive = 0;              ///< PyCodeObject.co_code_adaptive (the first code unit)
  uint32_t unicode_length = 0;             ///< PyASCIIObject.length (code points)
  uint32_t unicode_state = 0;              ///< PyASCIIObject.state (bit fields: kind 2..4, compact 5, ascii 6)
  uint32_t unicode_ascii_data = 0;         ///< sizeof(PyASCIIObject): data of a compact ASCII string
  uint32_t unicode_compact_data = 0;       ///< sizeof(PyCompactUnicodeObject): data of other compact strings
  uint32_t bytes_size = 0;                 ///< PyVarObject.ob_size of a bytes object
  uint32_t bytes_data = 0;                 ///< PyBytesObject.ob_sval
  // Thread names (threading._active: ident -> Thread, Thread._name), Include/cpython/dictobject.h,
  // Include/internal/pycore_dict.h (struct _dictkeysobject), Include/cpython/object.h
  // (PyHeapTypeObject), Include/cpython/longintrepr.h, Include/moduleobject.c (PyModuleObject).
  uint32_t tstate_thread_id = 0;           ///< PyThreadState.thread_id (threading.get_ident())
  uint32_t interp_modules = 0;             ///< PyInterpreterState.modules (sys.modules, a dict)
  uint32_t module_dict = 0;                ///< PyModuleObject.md_dict
  uint32_t dict_keys = 0;                  ///< PyDictObject.ma_keys
  uint32_t dict_values = 0;                ///< PyDictObject.ma_values (split tables)
  uint32_t keys_log2_size = 0;             ///< PyDictKeysObject.dk_log2_size (uint8)
  uint32_t keys_log2_index_bytes = 0;      ///< PyDictKeysObject.dk_log2_index_bytes (uint8)
  uint32_t keys_kind = 0;                  ///< PyDictKeysObject.dk_kind (uint8: 0 general, 1 unicode, 2 split)
  uint32_t keys_nentries = 0;              ///< PyDictKeysObject.dk_nentries
  uint32_t keys_indices = 0;               ///< PyDictKeysObject.dk_indices (the entries follow the indices)
  uint32_t type_flags = 0;                 ///< PyTypeObject.tp_flags (Py_TPFLAGS_MANAGED_DICT 1 << 4)
  uint32_t type_dictoffset = 0;            ///< PyTypeObject.tp_dictoffset
  uint32_t heaptype_cached_keys = 0;       ///< PyHeapTypeObject.ht_cached_keys (the keys of managed dicts)
  uint32_t long_digits = 0;                ///< PyLongObject.ob_digit (30-bit digits; ob_size at bytes_size)
  bool operator==(const PythonLayout&) const = default;
};

/// The CPython 3.11 layout of 64-bit release builds (x86_64 LP64), as Debian 12's python3.11.
const PythonLayout& python311_layout();

/// The same offsets read from the DWARF of a CPython 3.11 interpreter (its separate debug file,
/// e.g. python3.11-dbg's /usr/lib/debug/.build-id/xx/yyyy.debug), through libdw: structure
/// members by name (nested: interpreters.head, threads.head) and sizeof of the string structs.
/// Errors name the file and the types or members that are missing.
Result<PythonLayout> python311_layout_from_dwarf(const std::string& debug_path);

/// A build whose layout is known by its GNU build-id (hex): its description, else nullptr.
const char* known_python_build(std::string_view build_id_hex);

/// Where a module holds an interpreter: found from its symbols and its file.
struct PythonTarget {
  uint64_t runtime_addr = 0;  ///< runtime address of _PyRuntime
  /// Runtime address ranges of _PyEval_EvalFrameDefault and its cold part
  /// (_PyEval_EvalFrameDefault.cold, from .symtab: the debug file's when the module has none).
  struct Range {
    uint64_t start = 0, end = 0;
  };
  std::vector<Range> eval;
  uint32_t version_hex = 0;   ///< Py_Version (PY_VERSION_HEX), 0 when the module has none
  PythonLayout layout;
  std::string description;    ///< "CPython 3.11.2 (layout: ...)"
};

/// Interpreters are looked for in modules named like CPython's executable or library
/// ("python...", "libpython...": the file name's start).
bool may_hold_python(std::string_view path);

/// A ReadFileFn over `image`'s PT_LOAD file contents (link-time addresses); `image` must outlive it.
using ReadFileFn = std::function<bool(uint64_t vaddr, void* buf, size_t len)>;
ReadFileFn read_image_file(const elf::ElfImage& image);

/// An ELF symbol's link-time value and size by exact name, from .dynsym then .symtab of
/// `image` (any symbol type). nullopt when absent or the tables are malformed.
struct NamedSymbol {
  uint64_t addr = 0;
  uint64_t size = 0;
};
std::optional<NamedSymbol> find_symbol(const elf::ElfImage& image, std::string_view name);

/// Recognises a CPython interpreter in `image` (an executable or libpython mapped with
/// `load_bias`): _PyRuntime and _PyEval_EvalFrameDefault in its symbols, Py_Version read from
/// the file (`read_file` reads link-time addresses of the file's PT_LOAD contents). Only 3.11
/// on x86_64 is supported; the layout comes from the build-id table, else from the DWARF of
/// `debug_image`, else the 3.11 release layout is assumed (`description` says which). nullopt when the module is no
/// interpreter; an error naming the module and its version when it is one we cannot read.
/// `debug_image` (may be null) is the module's separate debug file, for the cold part's symbol.
Result<std::optional<PythonTarget>> find_python(const elf::ElfImage& image, uint64_t load_bias,
                                                std::string_view build_id_hex, const ReadFileFn& read_file,
                                                const elf::ElfImage* debug_image);

/// One Python frame, as py-bt prints it ("File FILE, line LINE, in FUNCTION").
struct PythonFrame {
  std::string function;  ///< co_name
  std::string qualname;  ///< co_qualname
  std::string file;      ///< co_filename
  uint32_t line = 0;     ///< from co_linetable at prev_instr; 0 when unknown
  bool is_entry = false; ///< the first frame its _PyEval_EvalFrameDefault activation ran
  uint8_t owner = 0;     ///< 0 thread, 1 generator, 2 frame object
  uint64_t frame_addr = 0;
  uint64_t code_addr = 0;
};

struct PythonThread {
  int64_t tid = 0;        ///< PyThreadState.native_thread_id
  uint64_t ident = 0;     ///< PyThreadState.thread_id: threading.get_ident() of the thread
  std::string name;       ///< the threading.Thread's name (threading._active[ident]._name); "" when none
  uint64_t tstate = 0;
  std::vector<PythonFrame> frames;  ///< innermost first
  std::string problem;    ///< why the chain was cut short ("" when whole)
};

/// Bounds against hostile or torn memory: every loop stops at these counts and a repeated
/// address (cycle) ends the chain with a problem.
struct PythonLimits {
  uint32_t max_interpreters = 64;
  uint32_t max_threads = 4096;
  uint32_t max_frames = 65536;
  uint32_t max_total_frames = 1u << 18;  ///< over all threads (thread states may share a chain)
  uint32_t max_string_bytes = 4096;
  uint32_t max_linetable_bytes = 1u << 20;
  uint32_t max_dict_entries = 1u << 16;  ///< dict entries visited in all (sys.modules, threading._active, ...)
};

/// Reads every interpreter's threads and their frame chains through `mem`, and each thread's
/// threading name (sys.modules["threading"]._active[ident]._name: CPython 3.11 keeps names in
/// Python objects and does not name the OS thread; a name that cannot be read stays ""). Fails
/// (naming the address) only when _PyRuntime itself is unreadable; a damaged thread or frame ends
/// that chain with PythonThread::problem.
Result<std::vector<PythonThread>> read_python_threads(memory::MemoryReader& mem, const PythonTarget& target,
                                                      const PythonLimits& limits = {});

/// One thread's frame chain read while the target runs (a sampler: `record --python`), as py-spy's
/// non-blocking mode reads it: the interpreter may change the chain during the read.
struct PythonStackRead {
  enum State : uint8_t {
    kNoThread = 0,  ///< no thread state of the interpreter has this native thread id
    kRead = 1,      ///< the chain, whole and unchanged during the read
    kTorn = 2,      ///< the chain changed while it was read: no frames
    kDamaged = 3,   ///< unchanged during the read but cut short (`problem`): the frames read so far
  };
  State state = kNoThread;
  std::vector<PythonFrame> frames;  ///< innermost first
  std::string problem;              ///< kDamaged, kTorn: what was wrong or changed
};

/// Reads one thread's frames at a time from a running interpreter, keeping what stays valid
/// between reads: each thread's PyThreadState by native thread id (checked on every use: its
/// native_thread_id must still be the tid, else the interpreters' thread lists are walked
/// again) and each code object's names and line table by address (checked on every use: its
/// type and its name, qualname, file and line-table pointers are read again and must be the
/// cached ones, since a running interpreter frees code objects and reuses their memory).
/// A read is torn when a second pass, right after the first, finds the thread's _PyCFrame or
/// current frame, any frame's code object or caller, or any frame's instruction but the
/// innermost one's changed (the innermost frame runs on: its line is the first pass's). Bounded
/// by `limits` per read. Not thread-safe.
class PythonSampler {
 public:
  PythonSampler(memory::MemoryReader& mem, const PythonTarget& target, const PythonLimits& limits = {});
  ~PythonSampler();
  PythonSampler(const PythonSampler&) = delete;
  PythonSampler& operator=(const PythonSampler&) = delete;
  PythonStackRead read(int64_t tid);
  /// Code objects read anew (a cache miss or a changed object) and thread-list walks so far.
  uint64_t code_reads() const;
  uint64_t thread_scans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// How a thread's Python frames attach to its native frames (doc/runtime-frames.md "Attaching
/// frames to native frames"): counting outward from the innermost native frame, each activation of
/// the evaluation loop (`runs_eval[i]`) takes the Python frames (innermost first, `is_entry` each)
/// from the innermost untaken one up to and including the next entry frame. Returns how many
/// Python frames each native frame takes; the frames no activation took follow the native frames.
std::vector<size_t> python_frames_per_native(const std::vector<bool>& runs_eval, const std::vector<bool>& is_entry);

/// The line of code unit `addrq` in a 3.11 location table (Objects/locations.md;
/// PyCode_Addr2Line): `firstlineno` for a negative addrq, 0 when no entry covers it or the
/// entry has no line.
uint32_t python311_addr2line(const uint8_t* table, size_t len, int firstlineno, int64_t addrq);

}  // namespace stackprov::runtime
