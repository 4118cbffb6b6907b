// SPDX-License-Identifier: Apache-2.0
// C ABI: language runtime frames (CPython 3.11) read at capture, and their interleaving with native stacks.
#include <string>

#include "capi/internal.hpp"
#include "elf/debug_file.hpp"
#include "elf/elf_object.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace stackprov::capi {

namespace {

/// Target memory, else the module file's bytes for addresses in the module's PT_LOAD contents:
/// a core holds no read-only file-backed pages (type names in .rodata) nor .data pages the
/// process never wrote, which equal the file's.
class ModuleFileFallback final : public memory::MemoryReader {
 public:
  ModuleFileFallback(memory::MemoryReader& mem, const unwind::LoadedModule& lm, uint64_t bias)
      : mem_(mem), lm_(lm), bias_(bias) {}
  bool read(uint64_t addr, void* buf, size_t len) override {
    return mem_.read(addr, buf, len) || (addr >= bias_ && lm_.read_code(addr - bias_, buf, len));
  }
  const char* name() const override { return "memory+module_file"; }

 private:
  memory::MemoryReader& mem_;
  const unwind::LoadedModule& lm_;
  uint64_t bias_;
};

}  // namespace

int prepare_runtime_capture(const struct sprov_process_opts* opts, RuntimeCapture* out) {
  const uint32_t flags = SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u);
  constexpr uint32_t kKnown = SPROV_PROCESS_RUNTIME_FRAMES | SPROV_PROCESS_KERNEL_STACKS | SPROV_PROCESS_KERNEL_BTF;
  if ((flags & ~kKnown) != 0)
    return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_opts.flags 0x%x: unknown bits 0x%x", flags,
                           flags & ~kKnown));
  out->attempted = (flags & SPROV_PROCESS_RUNTIME_FRAMES) == 0;  // nothing to read
  return 0;
}

void capture_runtime(sprov_context* ctx, const memory::Snapshot& snap, memory::MemoryReader& mem,
                     RuntimeCapture* out) {
  std::string* warnings = &out->warnings;
  if (out->attempted) return;
  out->attempted = true;
  for (const memory::SnapshotModule& m : snap.modules) {
    if (!runtime::may_hold_python(m.path)) continue;
    auto mod = acquire_module(ctx, &snap, m, snap.module_root);
    if (!mod.ok() || !mod.value()->has_elf()) {
      *warnings += "module " + m.path + ": its file is not available: its Python frames are not read\n";
      continue;
    }
    const unwind::LoadedModule& lm = *mod.value();
    // CPython's layout is read from libpython's ELF symbols and DWARF (an ELF-only feature).
    const elf::ElfImage& image = **elf::ElfObject::image_of(*lm.object());
    elf::DebugFileOptions dopts;
    dopts.debug_dirs = ctx->ctx.config().debug_dirs;
    dopts.sysroot = ctx->ctx.config().sysroot;
    // The DWARF of the layout: the separate debug file, else the module's own .debug_info.
    auto debug = elf::find_debug_file(image, dopts);
    const elf::ElfImage* dwarf_image = debug.ok()                                  ? debug.value().get()
                                       : image.section_or_error(".debug_info").ok() ? &image
                                                                                    : nullptr;
    auto found = runtime::find_python(
        image, m.load_bias, m.build_id.hex(),
        [&lm](uint64_t vaddr, void* buf, size_t len) { return lm.read_code(vaddr, buf, len); }, dwarf_image);
    if (!found.ok()) {
      *warnings += found.error().message + ": its Python frames are not read\n";
      continue;
    }
    if (!found.value()) continue;
    const runtime::PythonTarget& target = *found.value();
    ModuleFileFallback reader(mem, lm, m.load_bias);
    auto threads = runtime::read_python_threads(reader, target);
    if (!threads.ok()) {
      *warnings += m.path + ": " + threads.error().message + ": its Python frames are not read\n";
      continue;
    }
    out->description = target.description;
    out->eval = target.eval;
    out->python = std::move(threads.value());
    for (const runtime::PythonThread& t : out->python)
      if (!t.problem.empty()) *warnings += "python thread " + std::to_string(t.tid) + ": " + t.problem + "\n";
    return;
  }
}

void attach_runtime(const RuntimeCapture& rt, memory::Snapshot& snap) {
  if (rt.description.empty()) return;  // no interpreter was read
  memory::SnapshotRuntime& out = snap.runtime;
  out = {};
  out.kind = memory::SnapshotRuntime::kCPython;
  out.description = rt.description;
  for (const runtime::PythonTarget::Range& r : rt.eval) out.eval.push_back({r.start, r.end});
  const runtime::PythonThread* t = rt.thread(snap.tid);
  if (t == nullptr) return;
  out.has_thread = true;
  out.ident = t->ident;
  out.tstate = t->tstate;
  out.name = t->name;
  out.problem = t->problem;
  out.frames.reserve(t->frames.size());
  for (const runtime::PythonFrame& f : t->frames)
    out.frames.push_back({f.function, f.qualname, f.file, f.line, f.is_entry, f.owner, f.frame_addr, f.code_addr});
}

RuntimeCapture runtime_from_snapshots(const std::vector<std::unique_ptr<sprov_snapshot>>& threads) {
  RuntimeCapture out;
  out.attempted = true;
  for (const auto& h : threads) {
    const memory::SnapshotRuntime& rt = h->snap.runtime;
    if (rt.empty()) continue;
    if (out.description.empty()) {
      out.description = rt.description;
      for (const memory::SnapshotRuntime::Range& r : rt.eval) out.eval.push_back({r.start, r.end});
    } else if (rt.description != out.description) {
      // Snapshots of different captures: each thread's frames are still its own, the ranges the first's.
      out.warnings += "thread " + std::to_string(h->snap.tid) + ": runtime '" + rt.description +
                      "' differs from the first snapshot's '" + out.description + "'\n";
    }
    if (!rt.has_thread) continue;
    runtime::PythonThread t;
    t.tid = h->snap.tid;
    t.ident = rt.ident;
    t.name = rt.name;
    t.tstate = rt.tstate;
    t.problem = rt.problem;
    t.frames.reserve(rt.frames.size());
    for (const memory::SnapshotRuntime::Frame& f : rt.frames)
      t.frames.push_back({f.function, f.qualname, f.file, f.line, f.is_entry, f.owner, f.frame_addr, f.code_addr});
    if (!t.problem.empty()) out.warnings += "python thread " + std::to_string(t.tid) + ": " + t.problem + "\n";
    out.python.push_back(std::move(t));
  }
  return out;
}

}  // namespace stackprov::capi

namespace {

struct sprov_runtime_frame runtime_frame_out(const runtime::PythonFrame& f, int64_t native_index) {
  struct sprov_runtime_frame r = {};
  r.sz = sizeof(r);
  r.runtime = "python";
  r.function = f.function.c_str();
  r.qualname = f.qualname.c_str();
  r.file = f.file.c_str();
  r.line = f.line;
  r.flags = (f.is_entry ? uint32_t{SPROV_RUNTIME_FRAME_ENTRY} : 0u) |
            (f.owner == 1 ? uint32_t{SPROV_RUNTIME_FRAME_GENERATOR} : 0u);
  r.frame_address = f.frame_addr;
  r.code_address = f.code_addr;
  r.native_index = native_index;
  return r;
}

const runtime::PythonThread* thread_of(const sprov_process* proc, size_t index) {
  if (proc == nullptr || index >= proc->threads.size()) return nullptr;
  return proc->runtime.thread(proc->threads[index]->snap.tid);
}

bool runs_eval(const std::vector<runtime::PythonTarget::Range>& eval, const unwind::Frame& f) {
  // An inferred tail-call frame is no activation on the stack: it runs no interpreter frames.
  if (f.module_index < 0 || f.method == unwind::Method::kRuntime || (f.flags & unwind::Frame::kFlagInferred))
    return false;
  const uint64_t at = f.lookup_prev ? f.pc - 1 : f.pc;
  for (const auto& r : eval)
    if (at >= r.start && at < r.end) return true;
  return false;
}

}  // namespace

namespace stackprov::capi {

size_t eval_activations(const std::vector<runtime::PythonTarget::Range>& eval, const sprov_stack* native) {
  size_t n = 0;
  for (const unwind::Frame& f : native->frames) n += runs_eval(eval, f) ? 1 : 0;
  return n;
}

std::unique_ptr<sprov_stack> interleave_runtime(const std::vector<runtime::PythonTarget::Range>& eval,
                                                const std::vector<runtime::PythonFrame>& py, const sprov_stack* native,
                                                int mode) {
  auto st = std::make_unique<sprov_stack>();
  st->stop = native->stop;
  st->modules = native->modules;
  st->loaded = native->loaded;
  st->module_root = native->module_root;
  st->pid = native->pid;  // the perf map of its process names JIT frames
  st->jit = native->jit;
  st->arch = native->arch;
  const bool regs = native->regs.size() == native->frames.size() && !native->frames.empty();
  auto push_native = [&](const unwind::Frame& f) {
    if (regs) st->regs.push_back(native->regs[static_cast<size_t>(&f - native->frames.data())]);
    st->frames.push_back(f);
    st->runtime_of.push_back(-1);
  };
  auto push_runtime = [&](size_t k, int64_t native_index, uint64_t sp) {
    unwind::Frame f;
    f.sp = sp;
    f.method = unwind::Method::kRuntime;
    f.domain = unwind::Domain::kRuntime;  // the interpreter's frame, not a native one
    st->runtime_of.push_back(static_cast<int32_t>(st->runtime.size()));
    st->frames.push_back(f);
    if (regs) st->regs.emplace_back();  // a runtime frame: no native registers
    st->runtime.push_back(py[k]);
    st->runtime_native.push_back(native_index);
  };
  size_t next = 0;  // the innermost Python frame no activation has taken yet
  std::vector<bool> evals;
  for (const unwind::Frame& f : native->frames) evals.push_back(runs_eval(eval, f));
  if (mode == SPROV_RUNTIME_INTERLEAVE) {
    std::vector<bool> entries;
    for (const runtime::PythonFrame& p : py) entries.push_back(p.is_entry);
    const std::vector<size_t> taken = runtime::python_frames_per_native(evals, entries);
    uint32_t walked = 0;  // f's index in the native stack
    for (const unwind::Frame& f : native->frames) {
      if (const size_t n = taken[walked]; n != 0) {
        // This activation runs the frames from `next` outward up to its entry frame.
        const int64_t native_index = static_cast<int64_t>(st->frames.size() + n);
        for (const size_t end = next + n; next < end; next++) push_runtime(next, native_index, f.sp);
      }
      // A coroutine link annotates its native frame, at that frame's index here.
      for (const unwind::CoroutineLink& l : native->links)
        if (l.frame == walked) {
          st->links.push_back(l);
          st->links.back().frame = static_cast<uint32_t>(st->frames.size());
        }
      walked++;
      push_native(f);
    }
  }
  for (; next < py.size(); next++) push_runtime(next, -1, 0);
  if (st->runtime.empty()) st->runtime_of.clear();
  return st;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API size_t sprov_process_runtime_frame_count(const sprov_process* proc, size_t index) {
  return guard_value<size_t>(0, [&]() -> size_t {
    const runtime::PythonThread* t = thread_of(proc, index);
    return t ? t->frames.size() : 0;
  });
}

SPROV_API int sprov_process_runtime_frame(const sprov_process* proc, size_t index, size_t frame,
                                          struct sprov_runtime_frame* out) {
  return guard([&] {
    if (proc == nullptr || index >= proc->threads.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_runtime_frame: %s",
                             proc ? "thread index out of range" : "proc is NULL"));
    const runtime::PythonThread* t = thread_of(proc, index);
    const size_t n = t ? t->frames.size() : 0;
    if (frame >= n)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "runtime frame %zu out of range (%zu frames)", frame, n));
    return fill_out(out, runtime_frame_out(t->frames[frame], -1), "sprov_runtime_frame");
  });
}

SPROV_API const char* sprov_process_runtime(const sprov_process* proc) {
  return proc ? proc->runtime.description.c_str() : "";
}

SPROV_API const char* sprov_process_runtime_thread_name(const sprov_process* proc, size_t index) {
  return guard_value<const char*>("", [&]() -> const char* {
    const runtime::PythonThread* t = thread_of(proc, index);
    return t ? t->name.c_str() : "";
  });
}

SPROV_API int sprov_process_interleave(const sprov_process* proc, size_t index, const sprov_stack* native, int mode,
                                       sprov_stack** out) {
  return guard([&] {
    if (proc == nullptr || native == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_interleave: NULL %s",
                             proc == nullptr ? "proc" : native == nullptr ? "native" : "out"));
    *out = nullptr;
    if (index >= proc->threads.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "thread index %zu out of range (%zu threads)", index,
                             proc->threads.size()));
    if (mode != SPROV_RUNTIME_INTERLEAVE && mode != SPROV_RUNTIME_ONLY)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_interleave: unknown mode %d", mode));
    if (native->kernel.state != SPROV_KSTACK_NONE)
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_process_interleave: the stack has its kernel segment (interleave first)"));
    if (!native->runtime.empty())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_interleave: the stack is interleaved already"));
    const runtime::PythonThread* t = thread_of(proc, index);
    const std::vector<runtime::PythonFrame> none;
    *out = interleave_runtime(proc->runtime.eval, t ? t->frames : none, native, mode).release();
    return 0;
  });
}

SPROV_API int sprov_stack_runtime_frame(const sprov_stack* stack, size_t index, struct sprov_runtime_frame* out) {
  return guard([&] {
    if (stack == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_runtime_frame: stack is NULL"));
    if (index >= stack->frames.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                             stack->frames.size()));
    if (index >= stack->runtime_of.size() || stack->runtime_of[index] < 0)
      return fail(make_error(SPROV_ERR_NOT_FOUND, "frame %zu is not a runtime frame", index));
    const size_t k = static_cast<size_t>(stack->runtime_of[index]);
    return fill_out(out, runtime_frame_out(stack->runtime[k], stack->runtime_native[k]), "sprov_runtime_frame");
  });
}

}  // extern "C"
