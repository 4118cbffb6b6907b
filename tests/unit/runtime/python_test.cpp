// SPDX-License-Identifier: Apache-2.0
// CPython 3.11 frame reader: layouts against gdb, location tables against CPython, hostile memory.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "elf/debug_file.hpp"
#include "elf/elf_image.hpp"
#include "memory/memory_reader.hpp"
#include "runtime/python.hpp"
#include "stackprov/errors.h"

using namespace stackprov;
using namespace stackprov::runtime;

namespace {

/// "f<i>", built by appending ("f" + std::to_string(i) trips GCC 12's -Wrestrict false positive, PR 105329).
std::string fname(int i) {
  std::string s = "f";
  s += std::to_string(i);
  return s;
}

constexpr const char* kPython = "/usr/bin/python3.11";
constexpr const char* kDebianBuildId = "c561f3aa7232f2bd6ac6d56bd475f1c154a00486";

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

/// The build-id of Debian's python3.11 as installed (a later Debian update has another one).
std::string python_build_id() {
  auto img = elf::ElfImage::open(kPython);
  if (!img.ok()) FAIL(kPython << " is not installed (make deps installs python3.11): " << img.error().message);
  return img.value()->build_id().hex();
}

std::string debian_debug_file() {
  const std::string id = python_build_id();
  return "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
}

void require_debian_python() {
  FILE* f = fopen(debian_debug_file().c_str(), "rb");
  if (f == nullptr)
    FAIL("python3.11-dbg's debug file " << debian_debug_file() << " for " << kPython << " is missing (make deps)");
  fclose(f);
}

// ----------------------------------------------------------- hostile memory

/// Target memory: one heap region at kBase with a bump allocator, plus nothing else.
class FakeMemory final : public memory::MemoryReader {
 public:
  static constexpr uint64_t kBase = 0x100000;
  bool read(uint64_t addr, void* buf, size_t len) override {
    if (addr < kBase || addr - kBase > bytes.size() || len > bytes.size() - (addr - kBase)) return false;
    std::memcpy(buf, bytes.data() + (addr - kBase), len);
    return true;
  }
  const char* name() const override { return "fake"; }

  uint64_t alloc(size_t n) {
    const uint64_t at = kBase + bytes.size();
    bytes.resize(bytes.size() + ((n + 15) & ~size_t{15}));
    return at;
  }
  void put(uint64_t addr, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) bytes.at(addr - kBase + i) = static_cast<uint8_t>(v >> (8 * i));
  }
  void put64(uint64_t addr, uint64_t v) { put(addr, v, 8); }
  uint64_t cstr(const std::string& s) {
    const uint64_t a = alloc(s.size() + 1);
    for (size_t i = 0; i < s.size(); i++) put(a + i, static_cast<uint8_t>(s[i]), 1);
    return a;
  }
  std::vector<uint8_t> bytes;
};

/// CPython 3.11 objects laid out as python311_layout() says, in a FakeMemory.
struct FakePython {
  FakeMemory mem;
  const PythonLayout& l = python311_layout();
  uint64_t str_type, bytes_type, code_type, int_type;
  uint64_t runtime;

  FakePython() {
    str_type = type("str");
    bytes_type = type("bytes");
    code_type = type("code");
    int_type = type("int");
    runtime = mem.alloc(0x100);
  }
  uint64_t type(const std::string& name) {
    const uint64_t t = mem.alloc(0x100);
    mem.put64(t + l.type_name, mem.cstr(name));
    return t;
  }
  uint64_t str(const std::string& s) {
    const uint64_t o = mem.alloc(l.unicode_ascii_data + s.size() + 1);
    mem.put64(o + l.object_type, str_type);
    mem.put64(o + l.unicode_length, s.size());
    mem.put(o + l.unicode_state, (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7), 4);  // kind 1, compact, ascii, ready
    for (size_t i = 0; i < s.size(); i++) mem.put(o + l.unicode_ascii_data + i, static_cast<uint8_t>(s[i]), 1);
    return o;
  }
  uint64_t bytes(const std::vector<uint8_t>& b) {
    const uint64_t o = mem.alloc(l.bytes_data + b.size() + 1);
    mem.put64(o + l.object_type, bytes_type);
    mem.put64(o + l.bytes_size, b.size());
    for (size_t i = 0; i < b.size(); i++) mem.put(o + l.bytes_data + i, b[i], 1);
    return o;
  }
  /// A code object whose location table gives line first+1 to units 0..3 and first+3 to 4..7.
  uint64_t code(const std::string& name, const std::string& qualname, int first) {
    const uint64_t c = mem.alloc(l.code_adaptive + 16);
    mem.put64(c + l.object_type, code_type);
    mem.put64(c + l.code_name, str(name));
    mem.put64(c + l.code_qualname, str(qualname));
    mem.put64(c + l.code_filename, str("/srv/app.py"));
    mem.put(c + l.code_firstlineno, static_cast<uint32_t>(first), 4);
    // 0x80 | code 13 (no column) << 3 | length-1; signed varint line delta (2 * delta).
    mem.put64(c + l.code_linetable, bytes({0x80 | (13 << 3) | 3, 2, 0x80 | (13 << 3) | 3, 4}));
    return c;
  }
  uint64_t frame(uint64_t code, int unit, uint64_t previous, bool entry) {
    const uint64_t f = mem.alloc(80);
    mem.put64(f + l.frame_code, code);
    mem.put64(f + l.frame_prev_instr, code + l.code_adaptive + 2 * static_cast<int64_t>(unit));
    mem.put64(f + l.frame_previous, previous);
    mem.put(f + l.frame_is_entry, entry ? 1 : 0, 1);
    return f;
  }
  /// One interpreter whose threads are `tids`, each with current frame `frames[i]`.
  void threads(const std::vector<std::pair<int64_t, uint64_t>>& tids) {
    interp = mem.alloc(0x400);
    mem.put64(runtime + l.runtime_interpreters_head, interp);
    uint64_t prev = 0;
    for (const auto& [tid, frame] : tids) {
      const uint64_t ts = mem.alloc(0x200), cf = mem.alloc(0x20);
      mem.put64(ts + l.tstate_native_thread_id, static_cast<uint64_t>(tid));
      mem.put64(ts + l.tstate_thread_id, ident(tid));
      mem.put64(ts + l.tstate_cframe, cf);
      mem.put64(cf + l.cframe_current_frame, frame);
      if (prev) mem.put64(prev + l.tstate_next, ts);
      else mem.put64(interp + l.interp_threads_head, ts);
      prev = ts;
    }
  }
  /// threading.get_ident() of thread `tid` (a pthread_t).
  static uint64_t ident(int64_t tid) { return 0x7f0000000000ull + static_cast<uint64_t>(tid) * 0x1000; }
  /// A keys object of `kind` (0 general, 1 unicode, 2 split: values elsewhere) with 8 one-byte indices.
  uint64_t keys(const std::vector<std::pair<uint64_t, uint64_t>>& kv, int kind) {
    const uint64_t esize = kind == 0 ? 24 : 16;
    const uint64_t k = mem.alloc(l.keys_indices + 8 + kv.size() * esize);
    mem.put(k + l.keys_log2_size, 3, 1);
    mem.put(k + l.keys_log2_index_bytes, 3, 1);
    mem.put(k + l.keys_kind, static_cast<uint64_t>(kind), 1);
    mem.put64(k + l.keys_nentries, kv.size());
    const uint64_t e = k + l.keys_indices + 8;
    for (size_t i = 0; i < kv.size(); i++) {
      const uint64_t at = e + i * esize + (kind == 0 ? 8 : 0);
      mem.put64(at, kv[i].first);
      if (kind != 2) mem.put64(at + 8, kv[i].second);
    }
    return k;
  }
  uint64_t dict(const std::vector<std::pair<uint64_t, uint64_t>>& kv, int kind) {
    const uint64_t d = mem.alloc(48);
    mem.put64(d + l.object_type, dict_type);
    mem.put64(d + l.dict_keys, keys(kv, kind));
    return d;
  }
  uint64_t integer(uint64_t v) {
    const uint64_t o = mem.alloc(40);
    mem.put64(o + l.object_type, int_type);
    uint64_t n = 0;
    for (uint64_t x = v; x != 0; x >>= 30) mem.put(o + l.long_digits + 4 * n++, x & 0x3fffffff, 4);
    mem.put64(o + l.bytes_size, n);
    return o;
  }
  /// A threading.Thread-like object of a heap type with a managed dict: its attributes in values
  /// after the type's cached keys (_target, _name, _daemonic), or, materialised, in a dict.
  uint64_t thread_object(const std::string& name, bool materialised) {
    if (thread_type == 0) {
      thread_type = mem.alloc(0x400);
      mem.put64(thread_type + l.type_name, mem.cstr("Thread"));
      mem.put64(thread_type + l.type_flags, 1u << 4);  // Py_TPFLAGS_MANAGED_DICT
      mem.put64(thread_type + l.heaptype_cached_keys,
                keys({{str("_target"), 0}, {str("_name"), 0}, {str("_daemonic"), 0}}, 2));
    }
    const uint64_t obj = mem.alloc(64) + 32;
    mem.put64(obj + l.object_type, thread_type);
    if (materialised) {
      mem.put64(obj - 24, dict({{str("_target"), str("t")}, {str("_name"), str(name)}}, 1));
    } else {
      const uint64_t values = mem.alloc(24);
      mem.put64(values, str("target"));
      mem.put64(values + 8, str(name));
      mem.put64(values + 16, str("daemonic"));
      mem.put64(obj - 32, values);
    }
    return obj;
  }
  /// sys.modules of the interpreter threads() made: {"sys": ..., "threading": module with _active}.
  void threading(const std::vector<std::pair<uint64_t, uint64_t>>& active) {
    const uint64_t mod = mem.alloc(64);
    mem.put64(mod + l.object_type, type("module"));
    mem.put64(mod + l.module_dict, dict({{str("__name__"), str("threading")}, {str("_active"), dict(active, 0)}}, 1));
    mem.put64(interp + l.interp_modules, dict({{str("sys"), str("x")}, {str("threading"), mod}}, 1));
  }
  uint64_t interp = 0, thread_type = 0, dict_type = type("dict");

  PythonTarget target() const {
    PythonTarget t;
    t.runtime_addr = runtime;
    t.layout = l;
    return t;
  }
};

}  // namespace

TEST_CASE("python: a thread's frame chain, names, entry frames and lines", "[python]") {
  FakePython py;
  const uint64_t outer = py.code("<module>", "<module>", 1);
  const uint64_t mid = py.code("run", "Worker.run", 10);
  const uint64_t leaf = py.code("<lambda>", "Worker.run.<locals>.<lambda>", 20);
  const uint64_t f3 = py.frame(outer, -1, 0, true);  // before its first instruction: co_firstlineno
  const uint64_t f2 = py.frame(mid, 5, f3, false);
  const uint64_t f1 = py.frame(leaf, 2, f2, true);
  py.threads({{4242, f1}, {4243, 0}});
  auto r = read_python_threads(py.mem, py.target());
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 2);
  const PythonThread& t = r.value()[0];
  CHECK(t.tid == 4242);
  CHECK(t.problem.empty());
  REQUIRE(t.frames.size() == 3);
  CHECK(t.frames[0].function == "<lambda>");
  CHECK(t.frames[0].qualname == "Worker.run.<locals>.<lambda>");
  CHECK(t.frames[0].file == "/srv/app.py");
  CHECK(t.frames[0].line == 21);
  CHECK(t.frames[0].is_entry);
  CHECK(t.frames[1].line == 13);
  CHECK_FALSE(t.frames[1].is_entry);
  CHECK(t.frames[2].line == 1);
  CHECK(t.frames[2].frame_addr == f3);
  CHECK(t.frames[2].code_addr == outer);
  CHECK(r.value()[1].tid == 4243);
  CHECK(r.value()[1].frames.empty());
}

TEST_CASE("python: hostile memory ends chains with a named problem", "[python]") {
  SECTION("a frame cycle") {
    FakePython py;
    const uint64_t c = py.code("f", "f", 1);
    const uint64_t a = py.frame(c, 0, 0, false);
    const uint64_t b = py.frame(c, 0, a, false);
    py.mem.put64(a + py.l.frame_previous, b);
    py.threads({{1, b}});
    auto r = read_python_threads(py.mem, py.target());
    REQUIRE(r.ok());
    CHECK(r.value()[0].frames.size() == 2);
    CHECK_THAT(r.value()[0].problem, Catch::Contains("cycle"));
  }
  SECTION("a thread-state cycle and an interpreter cycle are each walked once") {
    FakePython py;
    py.threads({{7, 0}});
    const uint64_t interp = [&] {
      uint64_t v = 0;
      REQUIRE(py.mem.read(py.runtime + py.l.runtime_interpreters_head, &v, 8));
      return v;
    }();
    uint64_t ts = 0;
    REQUIRE(py.mem.read(interp + py.l.interp_threads_head, &ts, 8));
    py.mem.put64(ts + py.l.tstate_next, ts);
    py.mem.put64(interp + py.l.interp_next, interp);
    auto r = read_python_threads(py.mem, py.target());
    REQUIRE(r.ok());
    CHECK(r.value().size() == 1);
  }
  SECTION("a pointer to something that is not a code object") {
    FakePython py;
    const uint64_t bogus = py.mem.alloc(0x100);
    py.mem.put64(bogus + py.l.object_type, py.int_type);
    const uint64_t outer = py.frame(bogus, 0, 0, true);
    const uint64_t inner = py.frame(py.code("g", "g", 5), 0, outer, false);
    py.threads({{1, inner}});
    auto r = read_python_threads(py.mem, py.target());
    REQUIRE(r.ok());
    REQUIRE(r.value()[0].frames.size() == 1);
    CHECK(r.value()[0].frames[0].function == "g");
    CHECK_THAT(r.value()[0].problem, Catch::Contains("is not a code object"));
  }
  SECTION("unreadable and unaligned frames") {
    FakePython py;
    const uint64_t inner = py.frame(py.code("g", "g", 5), 0, 0xdead0000, false);
    py.threads({{1, inner}, {2, inner + 1}});
    auto r = read_python_threads(py.mem, py.target());
    REQUIRE(r.ok());
    CHECK(r.value()[0].frames.size() == 1);
    CHECK_THAT(r.value()[0].problem, Catch::Contains("0xdead0000 unreadable"));
    CHECK(r.value()[1].frames.empty());
    CHECK_THAT(r.value()[1].problem, Catch::Contains("not aligned"));
  }
  SECTION("a string longer than the limit is cut, a line table larger than the limit refused") {
    FakePython py;
    const uint64_t c = py.code(std::string(100, 'x'), "q", 1);
    const uint64_t c2 = py.code("h", "h", 1);
    uint64_t table = 0;
    REQUIRE(py.mem.read(c2 + py.l.code_linetable, &table, 8));
    py.mem.put64(table + py.l.bytes_size, uint64_t{1} << 40);
    const uint64_t outer = py.frame(c2, 0, 0, true);
    py.threads({{1, py.frame(c, 0, outer, false)}});
    PythonLimits lim;
    lim.max_string_bytes = 8;
    auto r = read_python_threads(py.mem, py.target(), lim);
    REQUIRE(r.ok());
    REQUIRE(r.value()[0].frames.size() == 1);
    CHECK(r.value()[0].frames[0].function == "xxxxxxxx...");
    CHECK_THAT(r.value()[0].problem, Catch::Contains("is not a readable bytes object"));
  }
  SECTION("the frame limit") {
    FakePython py;
    const uint64_t c = py.code("r", "r", 1);
    uint64_t f = 0;
    for (int i = 0; i < 100; i++) f = py.frame(c, 0, f, false);
    py.threads({{1, f}});
    PythonLimits lim;
    lim.max_frames = 10;
    auto r = read_python_threads(py.mem, py.target(), lim);
    REQUIRE(r.ok());
    CHECK(r.value()[0].frames.size() == 10);
    CHECK_THAT(r.value()[0].problem, Catch::Contains("more than 10 Python frames"));
  }
  SECTION("the frame budget over all threads (thread states sharing one chain)") {
    FakePython py;
    const uint64_t c = py.code("r", "r", 1);
    uint64_t f = 0;
    for (int i = 0; i < 100; i++) f = py.frame(c, 0, f, false);
    py.threads({{1, f}, {2, f}, {3, f}});
    PythonLimits lim;
    lim.max_total_frames = 150;
    auto r = read_python_threads(py.mem, py.target(), lim);
    REQUIRE(r.ok());
    REQUIRE(r.value().size() == 3);
    CHECK(r.value()[0].frames.size() == 100);
    CHECK(r.value()[0].problem.empty());
    CHECK(r.value()[1].frames.size() == 50);
    CHECK_THAT(r.value()[1].problem, Catch::Contains("budget of 150 Python frames"));
    CHECK(r.value()[2].frames.empty());
  }
  SECTION("a layout with a member offset near UINT32_MAX (hostile DWARF) is not read past its block") {
    // review of python.cpp: the frame and code spans were computed in 32 bits, so offset 0xfffffff8 + 8
    // wrapped to 0, the read of a 0-byte block succeeded and f64(0xfffffff8) read 4 GiB past it.
    for (uint32_t PythonLayout::*m : {&PythonLayout::frame_previous, &PythonLayout::code_name}) {
      FakePython py;
      const uint64_t c = py.code("f", "f", 1);
      py.threads({{1, py.frame(c, 0, 0, false)}});
      PythonTarget t = py.target();
      t.layout.*m = 0xfffffff8;
      auto r = read_python_threads(py.mem, t);
      REQUIRE(r.ok());
      REQUIRE(r.value().size() == 1);
      CHECK(r.value()[0].frames.size() <= 1);
      CHECK_THAT(r.value()[0].problem, Catch::Contains("unreadable"));
    }
  }
  SECTION("an unreadable _PyRuntime is an error naming its address") {
    FakePython py;
    PythonTarget t = py.target();
    t.runtime_addr = 0x40;
    auto r = read_python_threads(py.mem, t);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == SPROV_ERR_MEMORY_UNREADABLE);
    CHECK_THAT(r.error().message, Catch::Contains("0x40"));
  }
}

TEST_CASE("python: thread names from threading._active (managed and materialised dicts)", "[python]") {
  FakePython py;
  const uint64_t f = py.frame(py.code("run", "run", 1), 0, 0, true);
  py.threads({{100, f}, {101, f}, {102, f}, {103, f}});
  py.threading({{py.integer(FakePython::ident(100)), py.thread_object("MainThread", false)},
                {py.integer(FakePython::ident(101)), py.thread_object("worker-1", false)},
                {py.integer(FakePython::ident(102)), py.thread_object("renamed", true)}});
  auto r = read_python_threads(py.mem, py.target());
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 4);
  CHECK(r.value()[0].name == "MainThread");
  CHECK(r.value()[1].name == "worker-1");
  CHECK(r.value()[2].name == "renamed");
  CHECK(r.value()[3].name.empty());  // a thread threading does not know (_thread.start_new_thread)
  for (const PythonThread& t : r.value()) {
    CHECK(t.problem.empty());
    CHECK(t.frames.size() == 1);
  }

  SECTION("hostile dicts leave names empty, frames whole") {
    // threading._active replaced by a dict whose keys object claims 2^40 slots (variant 0), whose
    // entries start 2^60 bytes on (1); variant 2: a str where the Thread object is.
    for (int variant = 0; variant < 3; variant++) {
      FakePython v;
      v.threads({{100, v.frame(v.code("run", "run", 1), 0, 0, true)}});
      const uint64_t d = v.dict({{v.integer(FakePython::ident(100)), v.thread_object("x", false)}}, 0);
      uint64_t k = 0;
      v.mem.read(d + v.l.dict_keys, &k, 8);
      if (variant == 0) v.mem.put(k + v.l.keys_log2_size, 40, 1);
      if (variant == 1) v.mem.put64(k + v.l.keys_nentries, 8), v.mem.put(k + v.l.keys_log2_index_bytes, 60, 1);
      v.threading({{v.integer(FakePython::ident(100)), variant == 2 ? v.str("not a thread") : v.thread_object("x", false)}});
      if (variant < 2) {
        uint64_t mods = 0, mkeys = 0, mod = 0, md = 0, mk = 0;
        v.mem.read(v.interp + v.l.interp_modules, &mods, 8);
        v.mem.read(mods + v.l.dict_keys, &mkeys, 8);
        v.mem.read(mkeys + v.l.keys_indices + 8 + 16 + 8, &mod, 8);  // entry 1's value: the module
        v.mem.read(mod + v.l.module_dict, &md, 8);
        v.mem.read(md + v.l.dict_keys, &mk, 8);
        v.mem.put64(mk + v.l.keys_indices + 8 + 16 + 8, d);  // entry 1 ("_active")
      }
      INFO("variant " << variant);
      auto rv = read_python_threads(v.mem, v.target());
      REQUIRE(rv.ok());
      REQUIRE(rv.value().size() == 1);
      CHECK(rv.value()[0].name.empty());
      CHECK(rv.value()[0].problem.empty());
      CHECK(rv.value()[0].frames.size() == 1);
    }
  }

  SECTION("the dict budget bounds every lookup") {
    PythonLimits lim;
    lim.max_dict_entries = 3;  // sys.modules (2 entries) and part of the module's dict
    auto b = read_python_threads(py.mem, py.target(), lim);
    REQUIRE(b.ok());
    for (const PythonThread& t : b.value()) CHECK(t.name.empty());
  }
}

TEST_CASE("python: 3.11 location tables give CPython's own lines (co_positions)", "[python]") {
  require_debian_python();
  // Every code object of a source with long jumps backwards and forwards, no-location entries
  // (the implicit return of a generator), long lines and big line deltas.
  const char* script = R"PY(
import types
src = '''
def f(a):
    x = [i * 2 for i in range(a)
         if i % 3]
    try:
        y = {k: v for k, v in zip(x, x)}
    except Exception:
        pass
    finally:
        z = 1
''' + "\n" * 300 + '''
    return (a +
            1)
class C:
    def g(self):
        yield from (lambda: (yield 1))()
async def h():
    async with x as y:
        await y
'''
def walk(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from walk(c)
for co in walk(compile(src, "t.py", "exec")):
    lines = [p[0] if p[0] is not None else 0 for p in co.co_positions()]
    assert len(lines) == len(co.co_code) // 2
    print(co.co_firstlineno, co.co_linetable.hex(), " ".join(map(str, lines)))
)PY";
  char path[] = "/tmp/sprov-linetable-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, script, strlen(script)) == static_cast<ssize_t>(strlen(script)));
  close(fd);
  const std::string out = run(std::string(kPython) + " " + path);
  unlink(path);
  std::istringstream in(out);
  std::string line;
  int codes = 0, units = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int first = 0;
    std::string hex;
    ls >> first >> hex;
    std::vector<uint8_t> table;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) table.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    uint32_t want;
    for (int64_t unit = 0; ls >> want; unit++) {
      INFO("code object with co_firstlineno " << first << ", unit " << unit);
      CHECK(python311_addr2line(table.data(), table.size(), first, unit) == want);
      units++;
    }
    CHECK(python311_addr2line(table.data(), table.size(), first, -1) == static_cast<uint32_t>(first));
    codes++;
  }
  CHECK(codes >= 6);
  CHECK(units > 100);
  // Truncated tables stop cleanly.
  const uint8_t cut[] = {0x80 | (14 << 3), 0x80};
  CHECK(python311_addr2line(cut, sizeof(cut), 5, 0) == 0);
}

TEST_CASE("python: the 3.11 layout table and the DWARF reader agree with gdb", "[python]") {
  require_debian_python();
  struct Field {
    const char* expr;
    uint32_t PythonLayout::*member;
  };
  const Field fields[] = {
      {"&((struct pyruntimestate*)0)->interpreters.head", &PythonLayout::runtime_interpreters_head},
      {"&((struct _is*)0)->next", &PythonLayout::interp_next},
      {"&((struct _is*)0)->threads.head", &PythonLayout::interp_threads_head},
      {"&((struct _ts*)0)->next", &PythonLayout::tstate_next},
      {"&((struct _ts*)0)->native_thread_id", &PythonLayout::tstate_native_thread_id},
      {"&((struct _ts*)0)->cframe", &PythonLayout::tstate_cframe},
      {"&((struct _PyCFrame*)0)->current_frame", &PythonLayout::cframe_current_frame},
      {"&((struct _PyInterpreterFrame*)0)->f_code", &PythonLayout::frame_code},
      {"&((struct _PyInterpreterFrame*)0)->previous", &PythonLayout::frame_previous},
      {"&((struct _PyInterpreterFrame*)0)->prev_instr", &PythonLayout::frame_prev_instr},
      {"&((struct _PyInterpreterFrame*)0)->is_entry", &PythonLayout::frame_is_entry},
      {"&((struct _PyInterpreterFrame*)0)->owner", &PythonLayout::frame_owner},
      {"&((PyObject*)0)->ob_type", &PythonLayout::object_type},
      {"&((PyTypeObject*)0)->tp_name", &PythonLayout::type_name},
      {"&((PyCodeObject*)0)->co_firstlineno", &PythonLayout::code_firstlineno},
      {"&((PyCodeObject*)0)->co_filename", &PythonLayout::code_filename},
      {"&((PyCodeObject*)0)->co_name", &PythonLayout::code_name},
      {"&((PyCodeObject*)0)->co_qualname", &PythonLayout::code_qualname},
      {"&((PyCodeObject*)0)->co_linetable", &PythonLayout::code_linetable},
      {"&((PyCodeObject*)0)->co_code_adaptive", &PythonLayout::code_adaptive},
      {"&((PyASCIIObject*)0)->length", &PythonLayout::unicode_length},
      {"&((PyASCIIObject*)0)->state", &PythonLayout::unicode_state},
      {"sizeof(PyASCIIObject)", &PythonLayout::unicode_ascii_data},
      {"sizeof(PyCompactUnicodeObject)", &PythonLayout::unicode_compact_data},
      {"&((PyVarObject*)0)->ob_size", &PythonLayout::bytes_size},
      {"&((PyBytesObject*)0)->ob_sval", &PythonLayout::bytes_data},
      {"&((struct _ts*)0)->thread_id", &PythonLayout::tstate_thread_id},
      {"&((struct _is*)0)->modules", &PythonLayout::interp_modules},
      {"&((PyModuleObject*)0)->md_dict", &PythonLayout::module_dict},
      {"&((PyDictObject*)0)->ma_keys", &PythonLayout::dict_keys},
      {"&((PyDictObject*)0)->ma_values", &PythonLayout::dict_values},
      {"&((struct _dictkeysobject*)0)->dk_log2_size", &PythonLayout::keys_log2_size},
      {"&((struct _dictkeysobject*)0)->dk_log2_index_bytes", &PythonLayout::keys_log2_index_bytes},
      {"&((struct _dictkeysobject*)0)->dk_kind", &PythonLayout::keys_kind},
      {"&((struct _dictkeysobject*)0)->dk_nentries", &PythonLayout::keys_nentries},
      {"&((struct _dictkeysobject*)0)->dk_indices", &PythonLayout::keys_indices},
      {"&((PyTypeObject*)0)->tp_flags", &PythonLayout::type_flags},
      {"&((PyTypeObject*)0)->tp_dictoffset", &PythonLayout::type_dictoffset},
      {"&((PyHeapTypeObject*)0)->ht_cached_keys", &PythonLayout::heaptype_cached_keys},
      {"&((struct _longobject*)0)->ob_digit", &PythonLayout::long_digits},
  };
  std::string cmd = "gdb -batch -nx";
  for (const Field& f : fields) cmd += std::string(" -ex 'print/d (long)") + f.expr + "'";
  cmd += std::string(" ") + kPython + " 2>&1";
  const std::string out = run(cmd);
  std::vector<uint32_t> gdb;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    unsigned n;
    unsigned long v;
    if (std::sscanf(line.c_str(), "$%u = %lu", &n, &v) == 2) gdb.push_back(static_cast<uint32_t>(v));
  }
  INFO("gdb printed:\n" << out);
  REQUIRE(gdb.size() == std::size(fields));
  auto dwarf = python311_layout_from_dwarf(debian_debug_file());
  REQUIRE(dwarf.ok());
  for (size_t i = 0; i < std::size(fields); i++) {
    INFO(fields[i].expr);
    CHECK(python311_layout().*fields[i].member == gdb[i]);
    CHECK(dwarf.value().*fields[i].member == gdb[i]);
  }
  CHECK(dwarf.value() == python311_layout());
  CHECK(known_python_build(kDebianBuildId) != nullptr);
}

TEST_CASE("python: the interpreter in Debian's python3.11 and what is not one", "[python]") {
  require_debian_python();
  auto img = elf::ElfImage::open(kPython);
  REQUIRE(img.ok());
  auto debug = elf::ElfImage::open(debian_debug_file());
  REQUIRE(debug.ok());
  const elf::ElfImage& image = *img.value();
  auto read_file = [&](uint64_t vaddr, void* buf, size_t len) {
    for (const auto& ph : image.program_headers())
      if (ph.type == 1 /* PT_LOAD */ && vaddr >= ph.vaddr && vaddr + len <= ph.vaddr + ph.filesz) {
        std::memcpy(buf, image.file_data() + ph.offset + (vaddr - ph.vaddr), len);
        return true;
      }
    return false;
  };
  const std::string id = python_build_id();
  auto t = find_python(image, 0x1000, id, read_file, debug.value().get());
  REQUIRE(t.ok());
  REQUIRE(t.value().has_value());
  // readelf is the peer for the symbol values.
  auto value_of = [](const std::string& file, const std::string& sym) {
    const std::string out = run("readelf -sW " + file + " 2>/dev/null | awk '$8 == \"" + sym + "\" {print $2, $3; exit}' 2>/dev/null");
    unsigned long long v = 0, size = 0;
    std::sscanf(out.c_str(), "%llx %llu", &v, &size);
    return std::make_pair(v, size);
  };
  const auto runtime = value_of(std::string("--dyn-syms ") + kPython, "_PyRuntime");
  const auto eval = value_of(std::string("--dyn-syms ") + kPython, "_PyEval_EvalFrameDefault");
  const auto cold = value_of(debian_debug_file(), "_PyEval_EvalFrameDefault.cold");
  CHECK(t.value()->runtime_addr == runtime.first + 0x1000);
  REQUIRE(t.value()->eval.size() == 2);
  CHECK(t.value()->eval[0].start == eval.first + 0x1000);
  CHECK(t.value()->eval[0].end == eval.first + eval.second + 0x1000);
  CHECK(t.value()->eval[1].start == cold.first + 0x1000);
  CHECK(t.value()->eval[1].end == cold.first + cold.second + 0x1000);
  CHECK(t.value()->version_hex >> 16 == 0x030b);
  // Debian 12's build is in the table; another build's layout comes from its debug file.
  CHECK_THAT(t.value()->description,
             Catch::Contains(known_python_build(id) != nullptr ? "layout table" : "layout from DWARF"));
  CHECK(t.value()->layout == python311_layout());
  // Not an interpreter: no _PyRuntime.
  auto ls = elf::ElfImage::open("/bin/ls");
  REQUIRE(ls.ok());
  auto none = find_python(*ls.value(), 0, "", read_file, nullptr);
  REQUIRE(none.ok());
  CHECK_FALSE(none.value().has_value());
}

TEST_CASE("python: line tables read from the target stay within a budget", "[python][hostile]") {
  // review of python.cpp: 300 code objects sharing one 1 MiB co_linetable would each have it copied
  // (2^18 frames: 256 GiB). Past 256 MiB of tables in one read, frames keep names, lose lines.
  FakePython py;
  std::vector<uint8_t> table(1u << 20, 0);
  const uint8_t head[] = {0x80 | (13 << 3) | 3, 2, 0x80 | (13 << 3) | 3, 4};  // as FakePython::code's
  std::copy(std::begin(head), std::end(head), table.begin());
  const uint64_t big = py.bytes(table);
  uint64_t prev = 0;
  constexpr int kFrames = 300;
  for (int i = kFrames - 1; i >= 0; i--) {
    const uint64_t c = py.code(fname(i), fname(i), 100);
    py.mem.put64(c + py.l.code_linetable, big);
    prev = py.frame(c, 0, prev, false);
  }
  py.threads({{9, prev}});
  auto r = read_python_threads(py.mem, py.target());
  REQUIRE(r.ok());
  const PythonThread& t = r.value()[0];
  REQUIRE(t.frames.size() == kFrames);
  const size_t with_lines = (size_t{256} << 20) / table.size();
  for (size_t i = 0; i < t.frames.size(); i++) {
    INFO("frame " << i);
    CHECK(t.frames[i].function == fname(static_cast<int>(i)));
    CHECK(t.frames[i].line == (i < with_lines ? 101u : 0u));
  }
}

namespace {

/// Reads through a FakeMemory and runs `change` once, right before its `at`-th read (1-based):
/// the interpreter moving on while a sampler reads it.
class ChangingMemory final : public memory::MemoryReader {
 public:
  ChangingMemory(FakeMemory& mem, size_t at, std::function<void()> change) : mem_(mem), at_(at), change_(std::move(change)) {}
  bool read(uint64_t addr, void* buf, size_t len) override {
    if (++reads == at_) change_();
    return mem_.read(addr, buf, len);
  }
  const char* name() const override { return "changing"; }
  size_t reads = 0;

 private:
  FakeMemory& mem_;
  size_t at_;
  std::function<void()> change_;
};

/// (function, line) of each frame, innermost first.
std::vector<std::pair<std::string, uint32_t>> chain(const std::vector<PythonFrame>& frames) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (const PythonFrame& f : frames) out.emplace_back(f.function, f.line);
  return out;
}

}  // namespace

TEST_CASE("python sampler: a read is the chain before, the chain after, or torn (record --python)", "[python][sampler]") {
  // <module> -> run -> leaf; then leaf returns and run goes on at another line. Whenever that
  // happens during a read, the read must give one of the two chains whole, or be torn: never
  // the leaf with run's new line, or run's old line without the leaf.
  FakePython py;
  const uint64_t outer = py.code("<module>", "<module>", 1);
  const uint64_t mid = py.code("run", "Worker.run", 10);
  const uint64_t leaf = py.code("leaf", "leaf", 20);
  const uint64_t f3 = py.frame(outer, 1, 0, true);
  const uint64_t f2 = py.frame(mid, 1, f3, false);
  const uint64_t f1 = py.frame(leaf, 2, f2, false);
  py.threads({{4242, f1}});
  const PythonLayout& l = py.l;
  uint64_t ts = 0, cf = 0;
  py.mem.read(py.interp + l.interp_threads_head, &ts, 8);
  py.mem.read(ts + l.tstate_cframe, &cf, 8);
  auto leaf_returns = [&] {
    py.mem.put64(cf + l.cframe_current_frame, f2);
    py.mem.put64(f2 + l.frame_prev_instr, mid + l.code_adaptive + 2 * 5);  // line 13, as the reader computes
  };
  // The two chains, read whole by the one-shot reader (read_python_threads), before and after.
  auto before = read_python_threads(py.mem, py.target());
  REQUIRE(before.ok());
  const FakeMemory saved = py.mem;
  leaf_returns();
  auto after = read_python_threads(py.mem, py.target());
  REQUIRE(after.ok());
  const auto old_chain = chain(before.value()[0].frames), new_chain = chain(after.value()[0].frames);
  REQUIRE(old_chain.size() == 3);
  REQUIRE(new_chain.size() == 2);
  REQUIRE(new_chain[0] != old_chain[1]);  // run's line moved on
  py.mem = saved;

  // How many reads one sample takes when nothing changes (the sampler's caches cold).
  size_t total = 0;
  {
    ChangingMemory m(py.mem, 0, [] {});
    PythonSampler s(m, py.target());
    const PythonStackRead r = s.read(4242);
    REQUIRE(r.state == PythonStackRead::kRead);
    CHECK(chain(r.frames) == old_chain);
    total = m.reads;
  }
  REQUIRE(total > 6);
  size_t torn = 0, olds = 0, news = 0;
  for (size_t at = 1; at <= total + 1; at++) {
    INFO("the chain changes before read " << at << " of " << total);
    py.mem = saved;
    ChangingMemory m(py.mem, at, leaf_returns);
    PythonSampler s(m, py.target());
    const PythonStackRead r = s.read(4242);
    if (r.state == PythonStackRead::kTorn) {
      torn++;
      CHECK(r.frames.empty());
      CHECK_THAT(r.problem, Catch::Contains("changed during the read"));
      continue;
    }
    REQUIRE(r.state == PythonStackRead::kRead);
    const auto got = chain(r.frames);
    CHECK((got == old_chain || got == new_chain));
    olds += got == old_chain;
    news += got == new_chain;
  }
  CHECK(torn > 0);  // a change in the middle of a read is seen
  CHECK(olds > 0);  // after the second pass: the chain as it was
  CHECK(news > 0);  // before the first read of the thread: the chain as it is

  SECTION("a code object freed and its memory reused is read again") {
    py.mem = saved;
    PythonSampler s(py.mem, py.target());
    REQUIRE(chain(s.read(4242).frames) == old_chain);
    const uint64_t reads = s.code_reads();
    py.mem.put64(leaf + l.code_name, py.str("other"));  // another code object at the same address
    const PythonStackRead r = s.read(4242);
    REQUIRE(r.state == PythonStackRead::kRead);
    CHECK(r.frames[0].function == "other");
    CHECK(s.code_reads() == reads + 1);  // only the changed one
    s.read(4242);
    CHECK(s.code_reads() == reads + 1);  // cached again
  }
  SECTION("a thread state reused by another thread is found by its new tid only") {
    py.mem = saved;
    PythonSampler s(py.mem, py.target());
    REQUIRE(s.read(4242).state == PythonStackRead::kRead);
    py.mem.put64(ts + l.tstate_native_thread_id, 5151);
    CHECK(s.read(4242).state == PythonStackRead::kNoThread);
    const PythonStackRead r = s.read(5151);
    CHECK(r.state == PythonStackRead::kRead);
    CHECK(chain(r.frames) == old_chain);
    CHECK(s.thread_scans() == 2);  // the first read, then 4242 gone: that walk found 5151
  }
  SECTION("a damaged chain, unchanged while read, keeps the frames read") {
    py.mem = saved;
    py.mem.put64(f2 + l.frame_code, 0x12345);  // not aligned: no code object
    PythonSampler s(py.mem, py.target());
    const PythonStackRead r = s.read(4242);
    CHECK(r.state == PythonStackRead::kDamaged);
    CHECK(chain(r.frames) == std::vector<std::pair<std::string, uint32_t>>{old_chain[0]});
    CHECK_THAT(r.problem, Catch::Contains("0x12345 is not aligned"));
  }
}
