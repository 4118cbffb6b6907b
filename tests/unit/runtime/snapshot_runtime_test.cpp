// SPDX-License-Identifier: Apache-2.0
// Runtime frames through serialized snapshots: attach_runtime at capture, section 5 on disk,
// sprov_process_open_snapshot giving them back to the process's runtime calls and interleaving.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "capi/internal.hpp"

using namespace stackprov;

namespace {

constexpr uint64_t kSnapEval = 0x5000, kSnapEvalEnd = 0x6000;

std::string snap_temp_dir() {
  char tmpl[] = "/tmp/sprov-snaprt-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  FILE* f = fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(fwrite(b.data(), 1, b.size(), f) == b.size());
  REQUIRE(fclose(f) == 0);
}

runtime::PythonFrame snap_py(const std::string& name, bool entry, uint32_t line) {
  runtime::PythonFrame f;
  f.function = name;
  f.qualname = "Q." + name;
  f.file = "/srv/app.py";
  f.line = line;
  f.is_entry = entry;
  f.owner = name == "gen" ? 1 : 0;
  f.frame_addr = 0x7f0000001000 + line;
  f.code_addr = 0x7f0000002000 + line;
  return f;
}

/// A capture's runtime: the interpreter, one Python thread (tid 5) and a native-only thread (tid 6),
/// attached to their snapshots and written as DIR/5.snap and DIR/6.snap.
std::string write_captured(const RuntimeCapture& rt) {
  const std::string dir = snap_temp_dir();
  for (int64_t tid : {6, 5}) {
    memory::Snapshot s;
    s.arch = Arch::kX86_64;
    s.pid = 5;
    s.tid = tid;
    capi::attach_runtime(rt, s);
    write_bytes(dir + "/" + std::to_string(tid) + ".snap", memory::serialize(s));
  }
  return dir;
}

RuntimeCapture captured_runtime() {
  RuntimeCapture rt;
  rt.attempted = true;
  rt.description = "CPython 3.11.2 (layout table)";
  rt.eval = {{kSnapEval, kSnapEvalEnd}};
  runtime::PythonThread t;
  t.tid = 5;
  t.ident = 0x7f00aa;
  t.name = "worker-1";
  t.tstate = 0xa000;
  t.frames = {snap_py("gen", false, 13), snap_py("outer", true, 20), snap_py("main", true, 30)};
  rt.python.push_back(std::move(t));
  return rt;
}

sprov_process* open_snap(sprov_context* ctx, const std::string& path, uint32_t flags, int64_t tid = 0, int want = 0) {
  sprov_process_opts o = {};
  o.sz = sizeof(o);
  o.flags = flags;
  o.tid = tid;
  sprov_process* p = nullptr;
  REQUIRE(sprov_process_open_snapshot(ctx, path.c_str(), &o, &p) == want);
  return p;
}

unwind::Frame snap_native(uint64_t pc) {
  unwind::Frame f;
  f.pc = pc;
  f.sp = pc * 16;
  f.module_index = 0;
  f.method = unwind::Method::kCfiEhFrame;
  f.lookup_prev = true;
  return f;
}

}  // namespace

TEST_CASE("snapshot runtime: frames captured, serialized and opened again", "[snapshot-runtime]") {
  const RuntimeCapture rt = captured_runtime();
  const std::string dir = write_captured(rt);
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);

  sprov_process* p = open_snap(ctx, dir, SPROV_PROCESS_RUNTIME_FRAMES);
  REQUIRE(sprov_process_thread_count(p) == 2);
  // In tid order, named by their files.
  CHECK(sprov_snapshot_tid(sprov_process_thread(p, 0)) == 5);
  CHECK(std::string(sprov_process_thread_name(p, 0)) == "5.snap");
  CHECK(std::string(sprov_process_thread_name(p, 1)) == "6.snap");
  CHECK(std::string(sprov_process_runtime(p)) == rt.description);
  CHECK(std::string(sprov_process_runtime_thread_name(p, 0)) == "worker-1");
  CHECK(std::string(sprov_process_runtime_thread_name(p, 1)).empty());
  REQUIRE(sprov_process_runtime_frame_count(p, 0) == 3);
  CHECK(sprov_process_runtime_frame_count(p, 1) == 0);
  for (size_t i = 0; i < 3; i++) {
    sprov_runtime_frame f = {};
    f.sz = sizeof(f);
    REQUIRE(sprov_process_runtime_frame(p, 0, i, &f) == 0);
    const runtime::PythonFrame& w = rt.python[0].frames[i];
    CHECK(std::string(f.function) == w.function);
    CHECK(std::string(f.qualname) == w.qualname);
    CHECK(std::string(f.file) == w.file);
    CHECK(f.line == w.line);
    CHECK(((f.flags & SPROV_RUNTIME_FRAME_ENTRY) != 0) == w.is_entry);
    CHECK(((f.flags & SPROV_RUNTIME_FRAME_GENERATOR) != 0) == (w.owner == 1));
    CHECK(f.frame_address == w.frame_addr);
    CHECK(f.code_address == w.code_addr);
  }
  // Interleaving uses the stored evaluation-loop range: gen and outer run in the first activation
  // (up to its entry frame outer), main in the second, each right before its activation.
  sprov_stack native;
  native.frames = {snap_native(0x100), snap_native(kSnapEval + 0x10), snap_native(kSnapEval + 0x20)};
  native.stop = unwind::StopReason::kEndOfStack;
  native.modules = std::make_shared<std::vector<memory::SnapshotModule>>(1);
  sprov_stack* merged = nullptr;
  REQUIRE(sprov_process_interleave(p, 0, &native, SPROV_RUNTIME_INTERLEAVE, &merged) == 0);
  std::vector<std::string> got;
  for (size_t i = 0; i < sprov_stack_frame_count(merged); i++) {
    sprov_runtime_frame f = {};
    f.sz = sizeof(f);
    got.push_back(sprov_stack_runtime_frame(merged, i, &f) == 0 ? std::string(f.function) + "@" + std::to_string(f.native_index)
                                                                : std::string("native"));
  }
  CHECK(got == std::vector<std::string>{"native", "gen@3", "outer@3", "native", "main@5", "native"});
  sprov_stack_free(merged);
  sprov_process_free(p);

  // Without the flag: no runtime, as a capture without it.
  p = open_snap(ctx, dir, 0);
  CHECK(std::string(sprov_process_runtime(p)).empty());
  CHECK(sprov_process_runtime_frame_count(p, 0) == 0);
  sprov_process_free(p);

  // One file, and one thread by tid.
  p = open_snap(ctx, dir + "/5.snap", SPROV_PROCESS_RUNTIME_FRAMES);
  CHECK(sprov_process_thread_count(p) == 1);
  CHECK(sprov_process_runtime_frame_count(p, 0) == 3);
  sprov_process_free(p);
  p = open_snap(ctx, dir, SPROV_PROCESS_RUNTIME_FRAMES, 6);
  REQUIRE(sprov_process_thread_count(p) == 1);
  CHECK(sprov_snapshot_tid(sprov_process_thread(p, 0)) == 6);
  CHECK(std::string(sprov_process_runtime(p)) == rt.description);  // the interpreter, without a thread state
  sprov_process_free(p);
  open_snap(ctx, dir, SPROV_PROCESS_RUNTIME_FRAMES, 7, SPROV_ERR_NOT_FOUND);
  CHECK(std::string(sprov_last_error_message()).find("no thread 7") != std::string::npos);

  // Refused: kernel stacks, an exe, a damaged file (named), a directory without snapshots.
  open_snap(ctx, dir, SPROV_PROCESS_KERNEL_STACKS, 0, SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("0x2") != std::string::npos);
  sprov_process_opts o = {};
  o.sz = sizeof(o);
  o.exe = "/bin/true";
  sprov_process* q = nullptr;
  CHECK(sprov_process_open_snapshot(ctx, dir.c_str(), &o, &q) == SPROV_ERR_INVALID_ARG);
  CHECK(sprov_process_open_snapshot(ctx, nullptr, nullptr, &q) == SPROV_ERR_INVALID_ARG);
  write_bytes(dir + "/7.snap", {'S', 'P', 'R', 'O', 'V', 'S', 'N', 'P', 2, 0});
  open_snap(ctx, dir, SPROV_PROCESS_RUNTIME_FRAMES, 0, SPROV_ERR_SNAPSHOT);
  CHECK(std::string(sprov_last_error_message()).find(dir + "/7.snap") != std::string::npos);
  const std::string empty = snap_temp_dir();
  open_snap(ctx, empty, SPROV_PROCESS_RUNTIME_FRAMES, 0, SPROV_ERR_NOT_FOUND);
  CHECK(std::string(sprov_last_error_message()).find("no *.snap file") != std::string::npos);
  for (const char* f : {"5.snap", "6.snap", "7.snap"}) unlink((dir + "/" + f).c_str());
  rmdir(dir.c_str());
  rmdir(empty.c_str());
  sprov_context_free(ctx);
}
