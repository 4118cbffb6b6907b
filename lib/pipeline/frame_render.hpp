// SPDX-License-Identifier: Apache-2.0
// The one renderer of a thread's frames: `stack` (text and JSON), `trace-show`, `demo` and the
// Python CLI print what it writes, from a neutral description of the frames (RenderThread) that
// the C ABI fills from an unwound stack (capi/render.cpp) or from a stored trace (trace_rendered).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trace/capture_data.hpp"
#include "trace/trace.hpp"

namespace stackprov::pipeline {

/// One function inlined into a frame, innermost first (as the resolver chain lists them).
struct RenderInline {
  std::string function, linkage_name, file;
  uint32_t line = 0, column = 0;
};

/// A Python (runtime) frame of an interleaved stack.
struct RenderRuntime {
  std::string runtime, function, qualname, file;
  uint32_t line = 0;
  bool entry = false;
  int64_t native_index = -1;
  uint64_t frame_address = 0, code_address = 0;
};

/// The uc_link annotation of a coroutine's entry frame (doc/async-stacks.md).
struct RenderLink {
  uint64_t context = 0;
  bool has_regs = false;
  uint64_t pc = 0, sp = 0, module_offset = 0;
  std::string module;
  std::string function;  ///< "" when unnamed
  uint64_t function_offset = 0;
};

/// What one frame shows, whatever produced it.
/// One argument of a frame (`stack --args`; status as enum sprov_arg_status: 0 value,
/// 1 optimized out, 2 unknown with `reason`).
struct RenderArg {
  std::string name, type, value, reason;
  int32_t status = 2;
};

struct RenderFrame {
  size_t index = 0;  ///< the frame's number in its thread (0: innermost)
  uint64_t pc = 0, sp = 0, cfa = 0;
  bool is_runtime = false;
  RenderRuntime runtime;  ///< is_runtime only
  std::string module;     ///< "" when the pc is in no module
  std::string build_id;   ///< lower-case hex ("" unknown)
  std::string id_kind;    ///< the module identity's kind (elf-build-id, pdb-guid-age, macho-uuid, pe-code-id; "" none)
  std::string module_key; ///< that identity in its key form (pipeline::module_key; "" none)
  uint64_t module_offset = 0;
  /// The naming rule outside llvm mode (symbol tables, gdb's and perf's choice among aliases):
  /// the function and the offset from its start.
  std::string function, linkage_name;
  uint64_t function_offset = 0;
  /// The resolver chain's name of the physical function, when the symbol tables gave none (a
  /// bundle's answer offline, a stripped Go binary's gopclntab): shown without an offset unless
  /// `chain_has_offset`.
  std::string chain_function;
  bool chain_has_offset = false;
  uint64_t chain_offset = 0;
  std::string resolved_function;  ///< the chain's name of the physical function (JSON, with lines)
  std::string resolver;  ///< resolver name (JSON)
  std::string source, bundle;
  std::string method;    ///< sprov_method name ("cfi_eh_frame", "tail_call", ...)
  bool awaiter = false, cfi_not_in_bundle = false, jit = false, inferred = false, async_domain = false;
  bool signal_handler_called = false;  ///< a sigreturn trampoline: gdb's "<signal handler called>"
  bool have_location = false;
  std::string file;
  uint32_t line = 0, column = 0;
  std::vector<RenderInline> inlined;  ///< innermost first
  bool has_regs = false;              ///< registers asked for (`stack --regs`)
  std::vector<std::pair<std::string, std::string>> registers;  ///< every register, value "" unknown
  bool has_args = false;              ///< arguments asked for (`stack --args`)
  std::vector<RenderArg> args;        ///< in DWARF order
  bool has_link = false;
  RenderLink link;
  /// A kernel frame (`stack --kernel`): `function`+`function_offset`, `function_size`, `module`
  /// "[kernel.kallsyms]" or "[MODULE]"; pc 0 (/proc prints no addresses).
  bool is_kernel = false;
  uint64_t function_size = 0;
  bool kernel_user_boundary = false;  ///< the first user frame below a kernel segment
  /// `--with-btf`: 0 not asked, 1 the prototype below, 2 BTF has no such function.
  int btf = 0;
  std::string btf_text;
  bool btf_approximate = false;
  uint32_t btf_func_id = 0, btf_ret_type_id = 0;
  std::vector<std::pair<std::string, uint32_t>> btf_params;
};

/// A thread's kernel segment state (`stack --kernel`): "read", "unreadable", "running", "stale".
struct RenderKernel {
  std::string state;
  int64_t syscall = -1;
  uint64_t user_sp = 0, user_pc = 0;
  std::string reason;
};

struct RenderThread {
  int64_t tid = 0;
  std::string name, runtime_name;
  std::vector<RenderFrame> frames;
  std::string stop_reason;  ///< "" when unknown (a stored trace): no "stop:" line
  bool has_kernel = false;  ///< the kernel segment was asked for: a "kernel:" line / "kernel" object
  RenderKernel kernel;
};

/// Render flags (the values of SPROV_RENDER_*).
inline constexpr uint32_t kRenderJson = 1u << 0;
inline constexpr uint32_t kRenderLines = 1u << 1;

/// Appends `t` as `stackprov stack` prints a thread (eu-stack's layout, bindings/cli's help):
///   TID n "name"[ (python thread "x")]:
///   kernel: system call N, user sp 0xSP pc 0xPC | kernel: unreadable|running|stale: why  (has_kernel)
///   #k  0x0000000000000000 symbol+0xOFF - [kernel.kallsyms] [kernel_stack]       (kernel frames)
///   #k  0xPC function+0xOFF - module [method[, flags]]
///       inlined F at file:line:column        (innermost first, with kRenderLines)
///       file:line:column                     (the physical function's position)
///   stop: reason
/// With kRenderJson, one JSON object instead (`stack --json`'s thread object).
void render_thread(const RenderThread& t, uint32_t flags, std::string* out);

/// The threads of a stored trace as RenderThreads: the trace's inline chains (outermost first)
/// turned innermost first, "<method>+jit" split, signal trampolines found by the next frame's
/// "signal" method, offsets shown where the resolver knows function starts. `inferred` false:
/// without the inferred (tail-call) frames, the others numbered from 0 as `stack --no-tail-calls`.
/// `kernel` (optional): a thread with a kernel segment shows it first, as `stack --kernel --with-btf`.
std::vector<RenderThread> trace_render_threads(const trace::Trace& t, bool inferred = true,
                                               const trace::CapturedKernel* kernel = nullptr);

}  // namespace stackprov::pipeline
