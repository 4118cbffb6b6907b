// SPDX-License-Identifier: Apache-2.0
// The profiler path (include/stackprov/perf.h): record (sprov_record) and perf-import's reading of a profile (bindings/cli/profile_import.*, shared with the CLI).
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../cli/profile_import.hpp"
#include "../cli/profile_output.hpp"
#include "common.hpp"
#include "stackprov/perf.h"

namespace stackprov_py {

namespace {

struct RecordResult {
  uint64_t samples = 0, lost = 0, threads = 0;
  uint64_t python_read = 0, python_torn = 0, python_damaged = 0, python_no_thread = 0, python_processes = 0;
  std::optional<int> exit_status;  ///< the started command's wait status; None with pid=
  std::string output;
};

/// One frame of a profile's sample, leaf first (as perf-import's JSON and folded output list them).
struct ProfileFrame {
  uint64_t pc = 0, address = 0, module_offset = 0;
  std::optional<std::string> function, linkage_name, module;
  std::optional<uint64_t> symbol_start;
  std::string method;
  bool kernel = false, inlined = false;
  std::optional<std::string> file, qualname;  ///< a CPython frame (method "runtime"): co_filename, co_qualname
  std::optional<uint32_t> line;
};

struct ProfileSample {
  uint64_t index = 0, time = 0, period = 0;
  int64_t pid = 0, tid = 0;
  std::string comm, mode, stop_reason, error;
  bool truncated = false;
  std::vector<ProfileFrame> frames;
};

/// A profile read whole: its samples, perf-import's folded stacks and SVG, and its summary counts.
struct Profile {
  std::string path, event, cmdline, warnings, truncation, kernel_note, kernel_naming, kernel_build_id, format;
  uint64_t sample_count = 0, lost = 0, frequency = 0, period = 0, truncated = 0, failed = 0, frames = 0, kernel_frames = 0,
           kernel_named = 0;
  uint64_t dwarf = 0, callchain = 0, ip = 0;
  bool inlines = true;
  std::vector<ProfileSample> samples;
  std::map<std::string, uint64_t> folded;  ///< "comm;root;...;leaf" -> samples, as perf-import -f folded
};

std::string opt_text(const char* s) { return s != nullptr ? str(s) : std::string(); }

/// The bytes a CLI writer puts into a FILE*, through a memory stream.
template <class F>
std::string written(F&& write) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) fail(-ENOMEM);
  write(f);
  fclose(f);
  std::string s(buf != nullptr ? buf : "", len);
  free(buf);
  return s;
}

/// One reading of the profile into `p`: false when, read once (`stream`), the samples' order could
/// not be kept after samples were handed out (read it again without `stream`: p is left partial).
bool import_into(Profile& p, const std::string& path, const std::optional<std::string>& sysroot,
                 const std::optional<std::string>& store, uint32_t max_frames, bool inlines, bool log_stderr,
                 bool stream) {
  stackprov_cli::ImportOptions o;
  o.path = path;
  o.sysroot = cstr(sysroot);
  o.store = cstr(store);
  o.max_frames = max_frames;
  o.inlines = inlines;
  if (log_stderr) o.log_fn = stackprov_cli::log_once_to_stderr;  // python -m stackprov perf-import, as the CLI
  // A perf.data file read once (sprov_profile_next), as perf-import reads it: the samples handed
  // out while the file is read, in the index's order.
  o.stream = stream;
  stackprov_cli::ProfileImport imp;
  std::string err;
  if (int rc = imp.open(o, &err); rc != 0) throw CallError{rc, err};
  p = Profile();
  p.path = path;
  p.inlines = inlines;
  const uint64_t nominal = imp.nominal_period();
  stackprov_cli::NameTable& names = imp.names();
  stackprov_cli::StackFolder stacks;
  stackprov_cli::ProfileImport::Sample smp;
  p.samples.reserve(imp.info().samples);  // 0 when read once (none known at open)
  for (;;) {
    uint64_t i = 0;
    const auto got = imp.next(&i, &smp);
    if (got == stackprov_cli::ProfileImport::kEnd) break;
    if (got == stackprov_cli::ProfileImport::kRestart) return false;
    if (got == stackprov_cli::ProfileImport::kFailed) continue;  // counted failed (Profile.failed), as perf-import
    const struct sprov_profile_sample& s = smp.s;
    ProfileSample ps;
    ps.index = i;
    ps.time = s.time;
    ps.period = s.period;
    ps.pid = s.pid;
    ps.tid = s.tid;
    ps.comm = str(s.comm);
    ps.mode = stackprov_cli::mode_name(s.mode);
    ps.stop_reason = sprov_stop_reason_name(smp.stop);
    ps.error = str(smp.error.c_str());
    ps.truncated = smp.truncated;
    for (const stackprov_cli::SampleFrame& f : smp.frames) {
      const stackprov_cli::NameInfo& ni = names[f.name];
      ProfileFrame pf;
      pf.pc = f.pc;
      pf.address = f.addr;
      pf.module_offset = f.module_offset;
      if (f.runtime) {  // a CPython frame of record(python=True): function = co_name
        pf.function = str(ni.linkage.c_str());
        pf.qualname = str(ni.name.c_str());
        pf.file = str(ni.file.c_str());
        pf.line = ni.line;
      } else if (ni.known) {
        pf.function = str(ni.name.c_str());
        if (!ni.linkage.empty()) pf.linkage_name = str(ni.linkage.c_str());
        pf.symbol_start = ni.start;
      }
      if (f.kernel) pf.module = str(ni.module.c_str());
      else if (f.module != nullptr) pf.module = str(f.module);
      pf.method = f.kernel ? "kernel" : sprov_method_name(f.method);
      pf.kernel = f.kernel;
      pf.inlined = f.inlined;
      ps.frames.push_back(std::move(pf));
    }
    stacks.add(smp, nominal);
    p.samples.push_back(std::move(ps));
  }
  p.folded = stacks.folded(names);
  // As of the end: read once, the counts, warnings and truncation are known only now; the kernel
  // note as of now (kallsyms read on first use).
  const struct sprov_profile_info& after = imp.info();
  p.format = after.format == SPROV_PROFILE_CAPTURE ? "capture" : "perf.data";
  p.event = opt_text(after.event);
  p.cmdline = opt_text(after.cmdline);
  p.warnings = opt_text(after.warnings);
  p.truncation = opt_text(after.truncation);
  p.sample_count = after.samples;
  p.lost = after.lost;
  p.frequency = after.frequency;
  p.period = after.period;
  p.kernel_note = opt_text(after.kernel_note);
  switch (after.kernel_naming) {
    case SPROV_KERNEL_NAMED: p.kernel_naming = "named"; break;
    case SPROV_KERNEL_UNCHECKED: p.kernel_naming = "unchecked"; break;
    case SPROV_KERNEL_MISMATCH: p.kernel_naming = "mismatch"; break;
    case SPROV_KERNEL_CACHED: p.kernel_naming = "cached"; break;
    default: p.kernel_naming = "unavailable"; break;
  }
  p.kernel_build_id = imp.kernel_build_id();
  p.truncated = imp.truncated();
  p.failed = imp.failed();
  p.frames = imp.frames();
  p.kernel_frames = imp.kernel_frames();
  p.kernel_named = imp.kernel_named();
  p.dwarf = imp.by_mode(SPROV_PROFILE_MODE_DWARF);
  p.callchain = imp.by_mode(SPROV_PROFILE_MODE_CALLCHAIN);
  p.ip = imp.by_mode(SPROV_PROFILE_MODE_IP);
  return true;
}

Profile import_profile(const std::string& path, const std::optional<std::string>& sysroot,
                       const std::optional<std::string>& store, uint32_t max_frames, bool inlines,
                       bool log_stderr) {
  Profile p;
  if (!import_into(p, path, sysroot, store, max_frames, inlines, log_stderr, true))  // read once, else
    import_into(p, path, sysroot, store, max_frames, inlines, log_stderr, false);    // with the index
  return p;
}

std::string hex_or_none(const std::optional<uint64_t>& v) {
  if (!v) return "None";
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(*v));
  return b;
}

}  // namespace

void init_perf(py::module_& m) {
  py::class_<RecordResult>(m, "RecordResult", "What stackprov.record() recorded.")
      .def_readonly("samples", &RecordResult::samples)
      .def_readonly("lost", &RecordResult::lost, "samples the kernel dropped (ring buffer full)")
      .def_readonly("threads", &RecordResult::threads, "threads seen")
      .def_readonly("exit_status", &RecordResult::exit_status,
                    "the started command's wait status (os.waitstatus_to_exitcode), None with pid=")
      .def_readonly("output", &RecordResult::output, "the capture file written")
      .def_readonly("python_read", &RecordResult::python_read,
                    "python=True: samples whose CPython frames were read whole")
      .def_readonly("python_torn", &RecordResult::python_torn,
                    "python=True: samples whose frame chain changed while it was read (no frames kept)")
      .def_readonly("python_damaged", &RecordResult::python_damaged, "python=True: chains cut short by bad memory")
      .def_readonly("python_no_thread", &RecordResult::python_no_thread,
                    "python=True: samples of threads the interpreter has no thread state for")
      .def_readonly("python_processes", &RecordResult::python_processes,
                    "python=True: processes found running a CPython 3.11 interpreter")
      .def("__repr__", [](const RecordResult& r) {
        return "RecordResult(samples=" + std::to_string(r.samples) + ", lost=" + std::to_string(r.lost) +
               ", threads=" + std::to_string(r.threads) + ", output='" + r.output + "')";
      });

  m.def("_record", [](Context& c, int64_t pid, std::vector<std::string> argv, const std::string& output,
                      uint32_t frequency, uint32_t stack_size, uint32_t duration_ms, uint32_t flags,
                      py::object progress) {
    CtxPtr ctx = c.get();
    std::vector<const char*> av;
    for (const std::string& a : argv) av.push_back(a.c_str());
    av.push_back(nullptr);
    SPROV_OPTS(sprov_record_opts, o);
    o.pid = pid;
    o.argv = argv.empty() ? nullptr : av.data();
    o.output = output.c_str();
    o.frequency = frequency;
    o.stack_size = stack_size;
    o.duration_ms = duration_ms;
    o.flags = flags;  // SPROV_RECORD_KERNEL, SPROV_RECORD_OFF_CPU, SPROV_RECORD_PYTHON (with_kernel=, off_cpu=, python=)
    if (!progress.is_none()) {
      // progress(samples, lost): once when sampling has started (0, 0), then about every 250 ms.
      // Called with the GIL taken; an exception in it is reported as unraisable, the recording goes on.
      o.progress = [](uint64_t samples, uint64_t lost, void* arg) {
        py::gil_scoped_acquire gil;
        try {
          (*static_cast<py::object*>(arg))(samples, lost);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("stackprov.record progress");
        }
      };
      o.progress_arg = &progress;
    }
    SPROV_OPTS(sprov_record_result, r);
    int rc = 0;
    {
      // Blocks until the duration, the target's exit or SIGINT/SIGTERM/SIGHUP (sprov_record
      // handles them while it runs: the file is finished).
      py::gil_scoped_release nogil;
      rc = sprov_record(ctx.get(), &o, &r);
      if (rc != 0) throw CallError{rc, stackprov_cli::error_text(rc)};
    }
    RecordResult out;
    out.samples = r.samples;
    out.lost = r.lost;
    out.threads = r.threads;
    out.python_read = r.python_read;
    out.python_torn = r.python_torn;
    out.python_damaged = r.python_damaged;
    out.python_no_thread = r.python_no_thread;
    out.python_processes = r.python_processes;
    if (r.exit_status >= 0) out.exit_status = r.exit_status;
    out.output = output;
    return out;
  });

  py::class_<ProfileFrame>(m, "ProfileFrame", "One frame of a profile's sample (leaf first).")
      .def_readonly("pc", &ProfileFrame::pc, "kernel: the callchain's address; user: the frame's pc")
      .def_readonly("address", &ProfileFrame::address,
                    "the address looked up: pc for the leaf and signal frames, else pc - 1")
      .def_readonly("function", &ProfileFrame::function, "None when unnamed (perf's [unknown])")
      .def_readonly("linkage_name", &ProfileFrame::linkage_name)
      .def_readonly("symbol_start", &ProfileFrame::symbol_start)
      .def_readonly("module", &ProfileFrame::module, "a module path, [kernel.kallsyms] / [MODULE], or None")
      .def_readonly("module_offset", &ProfileFrame::module_offset)
      .def_readonly("method", &ProfileFrame::method, "kernel, callchain, context, cfi_eh_frame, ...")
      .def_readonly("kernel", &ProfileFrame::kernel)
      .def_readonly("inlined", &ProfileFrame::inlined,
                    "a function inlined into the next (physical) frame, at its address")
      .def_readonly("file", &ProfileFrame::file, "a CPython frame (method \"runtime\"): co_filename; else None")
      .def_readonly("line", &ProfileFrame::line, "a CPython frame: its line (0 unknown); else None")
      .def_readonly("qualname", &ProfileFrame::qualname, "a CPython frame: co_qualname (function is co_name); else None")
      .def("__repr__", [](const ProfileFrame& f) {
        return "ProfileFrame(pc=" + hex_or_none(f.pc) + ", function=" + (f.function ? *f.function : "None") +
               ", module=" + (f.module ? *f.module : "None") + ", method=" + f.method +
               (f.inlined ? ", inlined" : "") + ")";
      });

  py::class_<ProfileSample>(m, "ProfileSample", "One sample of a profile and its frames.")
      .def_readonly("index", &ProfileSample::index)
      .def_readonly("time", &ProfileSample::time, "perf clock, ns")
      .def_readonly("pid", &ProfileSample::pid)
      .def_readonly("tid", &ProfileSample::tid)
      .def_readonly("comm", &ProfileSample::comm)
      .def_readonly("period", &ProfileSample::period, "0 when not recorded")
      .def_readonly("mode", &ProfileSample::mode, "dwarf, callchain or ip: where the user frames come from")
      .def_readonly("frames", &ProfileSample::frames, "kernel frames, then user frames, leaf first")
      .def_readonly("truncated", &ProfileSample::truncated, "the walk stopped near the end of the copied stack")
      .def_readonly("stop_reason", &ProfileSample::stop_reason)
      .def_readonly("error", &ProfileSample::error, "why the user frames could not be unwound ('' when they were)")
      .def("__repr__", [](const ProfileSample& s) {
        return "ProfileSample(tid=" + std::to_string(s.tid) + ", time=" + std::to_string(s.time) + ", comm='" + s.comm +
               "', mode=" + s.mode + ", " + std::to_string(s.frames.size()) + " frames)";
      });

  py::class_<Profile>(m, "Profile", "A perf.data or capture file read by stackprov.perf_import().")
      .def_readonly("path", &Profile::path)
      .def_readonly("format", &Profile::format, "perf.data or capture")
      .def_readonly("samples", &Profile::samples)
      .def_readonly("folded", &Profile::folded,
                    "{'comm;root;...;leaf': samples}: perf-import -f folded's lines (inlined functions end in _[i], "
                    "kernel frames in _[k])")
      .def_readonly("event", &Profile::event)
      .def_readonly("frequency", &Profile::frequency)
      .def_readonly("period", &Profile::period)
      .def_readonly("cmdline", &Profile::cmdline)
      .def_readonly("warnings", &Profile::warnings)
      .def_readonly("truncation", &Profile::truncation, "what a file cut short lacks ('' when whole)")
      .def_readonly("kernel_note", &Profile::kernel_note)
      .def_readonly("kernel_naming", &Profile::kernel_naming,
                    "named (the recording's kernel is the running one), unchecked (no build-id recorded), "
                    "cached (another build, named from perf's build-id cache copy of its kallsyms), "
                    "mismatch or unavailable (kernel frames left unnamed)")
      .def_readonly("kernel_build_id", &Profile::kernel_build_id)
      .def_readonly("sample_count", &Profile::sample_count, "samples in the file (also those that could not be read)")
      .def_readonly("lost", &Profile::lost)
      .def_readonly("truncated", &Profile::truncated)
      .def_readonly("failed", &Profile::failed)
      .def_readonly("frames", &Profile::frames, "kernel and physical user frames (perf-import's summary)")
      .def_readonly("kernel_frames", &Profile::kernel_frames)
      .def_readonly("kernel_named", &Profile::kernel_named)
      .def_property_readonly("modes", [](const Profile& p) {
        return std::map<std::string, uint64_t>{{"dwarf", p.dwarf}, {"callchain", p.callchain}, {"ip", p.ip}};
      }, "samples per mode")
      .def("folded_text", [](const Profile& p) {
        return written([&](FILE* f) { stackprov_cli::write_folded(f, p.folded); });
      }, "perf-import -f folded's output, byte for byte")
      .def("svg", [](const Profile& p, const std::string& title) {
        return written([&](FILE* f) { stackprov_cli::write_flamegraph_svg(f, p.folded, title); });
      }, py::arg("title") = "Flame Graph", "perf-import -f svg's flame graph, byte for byte")
      .def("__len__", [](const Profile& p) { return p.samples.size(); })
      .def("__repr__", [](const Profile& p) {
        return "Profile('" + p.path + "', " + std::to_string(p.samples.size()) + " samples, " +
               std::to_string(p.folded.size()) + " stacks, " + std::to_string(p.failed) + " failed)";
      });

  m.def("_perf_import", [](const std::string& path, std::optional<std::string> sysroot,
                           std::optional<std::string> store, uint32_t max_frames, bool inlines, bool log_stderr) {
    py::gil_scoped_release nogil;
    return import_profile(path, sysroot, store, max_frames, inlines, log_stderr);
  });
}

}  // namespace stackprov_py
