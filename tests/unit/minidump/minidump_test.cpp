// SPDX-License-Identifier: Apache-2.0
// The minidump reader and the minidump snapshots against obj2yaml-14, llvm-readobj-14 and the dumped
// program's own printout (tests/unit/minidump/fixtures.cmake: dumps written by MiniDumpWriteDump under wine).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>

#include "arch/x86_64/registers.hpp"
#include "lib/obj2yaml_minidump.hpp"
#include "memory/minidump_capture.hpp"
#include "minidump/minidump.hpp"
#include "pe/loaded_image.hpp"
#include "pe/pe_object.hpp"
#include "stackprov/stackprov.h"

using namespace stackprov;
using namespace stackprov::minidump;
using stackprov::testlib::read_obj2yaml_minidump;

namespace {

const std::string kFix = STACKPROV_MINIDUMP_FIXTURES;

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = read_text(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::unique_ptr<Minidump> open_dump(const std::string& name) {
  auto d = Minidump::open(kFix + "/" + name);
  INFO(name << ": " << (d.ok() ? "" : d.error().message));
  REQUIRE(d.ok());
  return std::move(d).value();
}

/// The program's own printout (fixtures/mdprog.c): tid, its RtlVirtualUnwind frames, the worker's
/// context from GetThreadContext, the exception.
struct Printout {
  uint64_t tid = 0;
  std::vector<std::pair<uint64_t, uint64_t>> self;  // rip, rsp
  uint64_t ctx_rip = 0, ctx_rsp = 0, ctx_rbp = 0;
  bool has_ctx = false, has_exc = false;
  uint64_t exc_code = 0, exc_addr = 0;
};

Printout printout(const std::string& mode) {
  Printout p;
  std::istringstream in(read_text(kFix + "/" + mode + ".out"));
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, std::regex("tid ([0-9a-f]+)"))) p.tid = std::stoull(m[1], nullptr, 16);
    if (std::regex_match(line, m, std::regex("self (\\d+) rip ([0-9a-f]+) rsp ([0-9a-f]+)")))
      p.self.emplace_back(std::stoull(m[2], nullptr, 16), std::stoull(m[3], nullptr, 16));
    if (std::regex_match(line, m, std::regex("ctx rip ([0-9a-f]+) rsp ([0-9a-f]+) rbp ([0-9a-f]+)"))) {
      p.has_ctx = true;
      p.ctx_rip = std::stoull(m[1], nullptr, 16);
      p.ctx_rsp = std::stoull(m[2], nullptr, 16);
      p.ctx_rbp = std::stoull(m[3], nullptr, 16);
    }
    if (std::regex_match(line, m, std::regex("exc code ([0-9a-f]+) addr ([0-9a-f]+)"))) {
      p.has_exc = true;
      p.exc_code = std::stoull(m[1], nullptr, 16);
      p.exc_addr = std::stoull(m[2], nullptr, 16);
    }
  }
  REQUIRE(p.tid != 0);
  REQUIRE(p.self.size() >= 4);
  return p;
}

/// GUID bytes and age of mdprog.exe from llvm-readobj-14 --coff-debug-directory.
ModuleId readobj_identity() {
  const std::string t = read_text(kFix + "/mdprog.readobj.txt");
  std::smatch m;
  REQUIRE(std::regex_search(t, m, std::regex("PDBGUID: \\(([0-9A-F ]+)\\)")));
  std::istringstream hex(m[1].str());
  pe::CodeView cv;
  for (int i = 0; i < 16; i++) {
    std::string b;
    hex >> b;
    cv.guid[i] = static_cast<uint8_t>(std::stoul(b, nullptr, 16));
  }
  REQUIRE(std::regex_search(t, m, std::regex("PDBAge: (\\d+)")));
  cv.age = static_cast<uint32_t>(std::stoul(m[1]));
  return pe::pdb_id(cv);
}

const char* yaml_stream_name(uint32_t type) {
  switch (type) {
    case kThreadListStream: return "ThreadList";
    case kModuleListStream: return "ModuleList";
    case kMemoryListStream: return "MemoryList";
    case kExceptionStream: return "Exception";
    case kSystemInfoStream: return "SystemInfo";
    case kMiscInfoStream: return "MiscInfo";
    default: return nullptr;
  }
}

const Thread* thread_by_id(const Minidump& d, uint64_t id) {
  for (const Thread& t : d.threads())
    if (t.id == id) return &t;
  return nullptr;
}

void compare_with_obj2yaml(const std::string& mode) {
  INFO("dump " << mode);
  auto d = open_dump(mode + ".dmp");
  const auto y = read_obj2yaml_minidump(kFix + "/" + mode + ".yaml");
  // The stream directory, in order.
  REQUIRE(d->streams().size() == y.stream_types.size());
  for (size_t i = 0; i < y.stream_types.size(); i++) {
    const char* name = yaml_stream_name(d->streams()[i].type);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%X", d->streams()[i].type);
    CHECK(y.stream_types[i] == (name ? name : hex));
  }
  REQUIRE(y.arch == "AMD64");
  REQUIRE(d->system_info());
  CHECK(d->system_info()->arch == kArchAmd64);
  // Threads: ids, suspend counts, TEBs, stacks and their bytes, context bytes.
  REQUIRE(d->threads().size() == y.threads.size());
  for (size_t i = 0; i < y.threads.size(); i++) {
    const Thread& t = d->threads()[i];
    const auto& yt = y.threads[i];
    INFO("thread " << i);
    CHECK(t.id == yt.id);
    CHECK(t.suspend_count == yt.suspend_count);
    CHECK(t.teb == yt.teb);
    CHECK(t.stack.start == yt.stack_start);
    const auto sb = d->bytes(t.stack);
    CHECK(std::vector<uint8_t>(sb.begin(), sb.end()) == yt.stack);
    const auto cb = d->bytes(t.context);
    CHECK(std::vector<uint8_t>(cb.begin(), cb.end()) == yt.context);
  }
  // Modules: base, size, checksum, timestamp, the UTF-16 name, the CodeView record (wine: empty).
  REQUIRE(d->modules().size() == y.modules.size());
  for (size_t i = 0; i < y.modules.size(); i++) {
    const Module& m = d->modules()[i];
    const auto& ym = y.modules[i];
    INFO("module " << ym.name);
    CHECK(m.base == ym.base);
    CHECK(m.size == ym.size);
    CHECK(m.checksum == ym.checksum);
    CHECK(m.timestamp == ym.timestamp);
    CHECK(m.name == ym.name);
    CHECK(m.cv_record.size == ym.codeview.size());
    CHECK(m.codeview.has_value() == !ym.codeview.empty());
  }
  // MemoryList: every range of obj2yaml's (ranges of size 0 are left out by the reader), by start.
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> want, got;
  for (const auto& r : y.memory)
    if (!r.content.empty()) want.emplace_back(r.start, r.content);
  std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const MemoryRange& r : d->memory()) {
    const auto b = d->bytes(r);
    got.emplace_back(r.start, std::vector<uint8_t>(b.begin(), b.end()));
  }
  CHECK_FALSE(d->has_memory64());
  REQUIRE(got.size() == want.size());
  CHECK(got == want);
  // Every byte of every range reads back through read() (overlapping ranges hold the same bytes).
  for (const auto& [start, bytes] : want) {
    std::vector<uint8_t> buf(bytes.size());
    REQUIRE(d->read(start, buf.data(), buf.size()));
    CHECK(buf == bytes);
  }
  // The exception.
  CHECK(d->exception().has_value() == y.exception.present);
  if (y.exception.present) {
    const Exception& e = *d->exception();
    CHECK(e.thread_id == y.exception.thread_id);
    CHECK(e.code == y.exception.code);
    CHECK(e.address == y.exception.address);
    CHECK(e.num_params == y.exception.num_params);
    for (uint32_t k = 0; k < e.num_params; k++) {
      auto it = y.exception.params.find(static_cast<int>(k));
      CHECK(e.params[k] == (it == y.exception.params.end() ? 0 : it->second));
    }
    const auto cb = d->bytes(e.context);
    CHECK(std::vector<uint8_t>(cb.begin(), cb.end()) == y.exception.context);
  }
}

}  // namespace

TEST_CASE("minidump streams equal obj2yaml-14's", "[minidump]") {
  compare_with_obj2yaml("normal");
  compare_with_obj2yaml("exception");
}

TEST_CASE("minidump thread contexts equal the program's GetThreadContext and exception", "[minidump]") {
  for (const char* mode : {"normal", "full"}) {
    INFO(mode);
    const Printout p = printout(mode);
    REQUIRE(p.has_ctx);
    auto d = open_dump(std::string(mode) + ".dmp");
    const Thread* t = thread_by_id(*d, p.tid);
    REQUIRE(t != nullptr);
    auto c = d->x64_context(t->context);
    REQUIRE(c.ok());
    CHECK(c.value().has_control());
    CHECK(c.value().rip == p.ctx_rip);
    CHECK(c.value().gpr[4] == p.ctx_rsp);
    CHECK(c.value().gpr[5] == p.ctx_rbp);
    // The worker's stack is in the dump from rsp on, up to the frames it printed.
    CHECK(d->readable_from(p.ctx_rsp) > p.self.back().second - p.ctx_rsp);
  }
  const Printout p = printout("exception");
  REQUIRE(p.has_exc);
  auto d = open_dump("exception.dmp");
  REQUIRE(d->exception());
  CHECK(d->exception()->thread_id == p.tid);
  CHECK(d->exception()->code == p.exc_code);
  CHECK(d->exception()->address == p.exc_addr);
  CHECK(std::string(exception_name(d->exception()->code)) == "EXCEPTION_ACCESS_VIOLATION");
  auto c = d->x64_context(d->exception()->context);
  REQUIRE(c.ok());
  CHECK(c.value().rip == p.exc_addr);
  // The fault is in chain_c, whose frame the program printed as its frame 0.
  CHECK(c.value().gpr[4] == p.self[0].second);
}

TEST_CASE("a full-memory dump: Memory64List and the image headers in memory", "[minidump]") {
  auto d = open_dump("full.dmp");
  CHECK(d->has_memory64());
  const std::vector<uint8_t> exe = read_bytes(kFix + "/mdprog.exe");
  const Module* m = nullptr;
  for (const Module& mod : d->modules())
    if (mod.name.size() >= 10 && mod.name.substr(mod.name.size() - 10) == "mdprog.exe") m = &mod;
  REQUIRE(m != nullptr);
  // The loaded headers are the file's first bytes (the loader maps SizeOfHeaders as they are).
  std::vector<uint8_t> head(0x200);
  REQUIRE(d->read(m->base, head.data(), head.size()));
  CHECK(std::equal(head.begin(), head.end(), exe.begin()));
  auto h = pe::read_loaded_headers(
      [&](uint64_t rva, void* buf, size_t len) { return d->read(m->base + rva, buf, len); }, "mdprog.exe in memory");
  REQUIRE(h.ok());
  CHECK(h.value().timestamp == m->timestamp);
  CHECK(h.value().size_of_image == m->size);
  CHECK(h.value().id == readobj_identity());
}

TEST_CASE("minidump snapshots: the faulting thread first, identities and where they came from", "[minidump]") {
  const ModuleId exe_id = readobj_identity();
  auto exe_plan = [&](const memory::MinidumpCapture& c) -> const memory::MinidumpModuleInfo& {
    for (const auto& m : c.modules)
      if (m.name.find("mdprog.exe") != std::string::npos) return m;
    FAIL("no mdprog.exe module");
    return c.modules.front();
  };
  auto snap_module = [&](const memory::Snapshot& s) -> const memory::SnapshotModule& {
    for (const auto& m : s.modules)
      if (m.path.find("mdprog.exe") != std::string::npos) return m;
    FAIL("no mdprog.exe module in the snapshot");
    return s.modules.front();
  };
  {
    const Printout p = printout("exception");
    auto d = open_dump("exception.dmp");
    memory::MinidumpCaptureOptions o;
    auto c = memory::capture_minidump(*d, o, nullptr);
    REQUIRE(c.ok());
    REQUIRE(c.value().has_exception);
    const memory::Snapshot& s = c.value().threads.front();
    CHECK(s.tid == static_cast<int64_t>(p.tid));
    CHECK(s.regs[arch::x86_64::kRip] == p.exc_addr);
    CHECK(s.regs[arch::x86_64::kRsp] == p.self[0].second);
    // The CodeView record is empty (wine), the normal dump holds no headers: from the file, found
    // at its Z: path.
    CHECK(exe_plan(c.value()).id_source == memory::IdSource::kFile);
    CHECK(snap_module(s).build_id == exe_id);
    CHECK(snap_module(s).open_path == kFix + "/mdprog.exe");
    // The return addresses the thread printed lie in the snapshot's stack copy.
    memory::SnapshotReader rd(s);
    uint64_t word = 0;
    CHECK(rd.read(p.self[1].second - 8, &word, 8));
    CHECK(word == p.self[1].first);
  }
  {
    auto d = open_dump("full.dmp");
    memory::MinidumpCaptureOptions o;
    auto c = memory::capture_minidump(*d, o, nullptr);
    REQUIRE(c.ok());
    CHECK(exe_plan(c.value()).id_source == memory::IdSource::kMemory);
    CHECK(snap_module(c.value().threads.front()).build_id == exe_id);
    // The dumping thread has no context (wine): left out, with a warning naming it.
    CHECK(c.value().warnings.find("has no context") != std::string::npos);
  }
  {
    auto d = open_dump("normal.dmp");
    memory::MinidumpCaptureOptions o;
    o.offline = true;  // no file, no CodeView record, no headers: the code id of the module list
    auto c = memory::capture_minidump(*d, o, nullptr);
    REQUIRE(c.ok());
    CHECK(exe_plan(c.value()).id_source == memory::IdSource::kModuleList);
    // Every module's identity is the code id of obj2yaml-14's TimeDateStamp and SizeOfImage.
    const auto y = read_obj2yaml_minidump(kFix + "/normal.yaml");
    const memory::Snapshot& s = c.value().threads.front();
    REQUIRE(y.modules.size() == s.modules.size());
    for (const auto& ym : y.modules) {
      const memory::SnapshotModule* sm = nullptr;
      for (const auto& m : s.modules)
        if (m.start == ym.base) sm = &m;
      REQUIRE(sm != nullptr);
      CHECK(sm->build_id.kind == IdKind::kPeCodeId);
      char key[32];
      std::snprintf(key, sizeof key, "%08X%llx", static_cast<unsigned>(ym.timestamp),
                    static_cast<unsigned long long>(ym.size));
      CHECK(pe::code_id_key(sm->build_id) == key);
    }
  }
}

TEST_CASE("hostile minidumps give named errors", "[minidump]") {
  const std::vector<uint8_t> good = read_bytes(kFix + "/exception.dmp");
  auto parse = [](std::vector<uint8_t> b) { return Minidump::from_bytes(std::move(b), "hostile.dmp"); };
  REQUIRE(parse(good).ok());
  auto with = [&](size_t off, uint32_t v) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + off, &v, 4);
    return b;
  };
  {
    auto r = parse(with(0, 0x12345678));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == SPROV_ERR_BAD_FORMAT);
    CHECK(r.error().message.find("MDMP") != std::string::npos);
  }
  {
    auto r = parse(with(8, 0xffffffff));  // NumberOfStreams
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == SPROV_ERR_LIMIT);
  }
  {
    auto r = parse(with(12, 0xfffffff0));  // StreamDirectoryRva
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == SPROV_ERR_TRUNCATED);
    CHECK(r.error().message.find("stream directory") != std::string::npos);
  }
  {
    // Each stream's location pointed past the end: the error names the stream.
    auto d = parse(good);
    const uint32_t dir = good[12] | good[13] << 8 | good[14] << 16 | static_cast<uint32_t>(good[15]) << 24;
    for (size_t i = 0; i < d.value()->streams().size(); i++) {
      const char* name = yaml_stream_name(d.value()->streams()[i].type);
      if (name == nullptr || std::string(name) == "MiscInfo") continue;
      auto r = parse(with(dir + 12 * i + 8, static_cast<uint32_t>(good.size())));
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == SPROV_ERR_TRUNCATED);
      CHECK(r.error().message.find(name) != std::string::npos);
    }
  }
  // Every truncation: an error (never a crash) until the streams are whole.
  size_t errors = 0;
  for (size_t len = 0; len < good.size(); len += (len < 8192 ? 1 : 4099)) {
    auto r = parse(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(len)));
    if (!r.ok()) {
      errors++;
      CHECK((r.error().code == SPROV_ERR_TRUNCATED || r.error().code == SPROV_ERR_BAD_FORMAT));
    }
  }
  CHECK(errors > 0);
  // Every single-byte corruption of the first 4 KiB (header, directory, stream heads): an error
  // or a dump whose every query stays inside the file.
  for (size_t off = 0; off < std::min<size_t>(good.size(), 4096); off++) {
    std::vector<uint8_t> b = good;
    b[off] ^= 0xa5;
    auto r = parse(std::move(b));
    if (!r.ok()) continue;
    const Minidump& d = *r.value();
    for (const Thread& t : d.threads()) {
      (void)d.x64_context(t.context);
      uint8_t w[8];
      (void)d.read(t.stack.start, w, sizeof w);
    }
    memory::MinidumpCaptureOptions o;
    o.offline = true;
    (void)memory::capture_minidump(d, o, nullptr);
  }
}

TEST_CASE("a thread listed twice is taken once", "[minidump]") {
  // A hostile ThreadList repeating one thread id (65,536 times would multiply stack copies): the
  // capture keeps the first and says so. The ThreadList is found here from the MINIDUMP_DIRECTORY
  // bytes (stream type 3: a u32 count, then 48-byte MINIDUMP_THREADs, ThreadId first).
  std::vector<uint8_t> b = read_bytes(kFix + "/normal.dmp");
  auto u32 = [&](size_t o) { return b[o] | b[o + 1] << 8 | b[o + 2] << 16 | static_cast<uint32_t>(b[o + 3]) << 24; };
  const uint32_t nstreams = u32(8), dir = u32(12);
  uint32_t list = 0;
  for (uint32_t i = 0; i < nstreams; i++)
    if (u32(dir + 12 * i) == 3) list = u32(dir + 12 * i + 8);
  REQUIRE(list != 0);
  const uint32_t nthreads = u32(list);
  REQUIRE(nthreads >= 2);
  std::memcpy(b.data() + list + 4 + 48, b.data() + list + 4, 4);  // thread 1 gets thread 0's id
  const uint32_t id0 = u32(list + 4);
  auto d = Minidump::from_bytes(std::move(b), "twice.dmp");
  REQUIRE(d.ok());
  memory::MinidumpCaptureOptions o;
  o.offline = true;
  auto c = memory::capture_minidump(*d.value(), o, nullptr);
  std::string want = "thread ";  // appended: "literal" + string&& trips GCC 12's -Wrestrict
  want += std::to_string(id0);
  want += " is listed more than once";
  // The copy dropped may be the one thread with a context (wine gives the dumping thread none):
  // then the capture fails, its message carrying the warnings.
  const std::string& said = c.ok() ? c.value().warnings : c.error().message;
  CHECK(said.find(want) != std::string::npos);
  if (c.ok()) {
    size_t with_id0 = 0;
    for (const memory::Snapshot& t : c.value().threads) with_id0 += t.tid == id0 ? 1 : 0;
    CHECK(with_id0 <= 1);
  }
}

TEST_CASE("a dump with CodeView records filled in gives the same identities", "[minidump]") {
  // wine writes every CodeView record empty; Windows fills them in. Here the program's record, as
  // llvm-readobj-14 reads it from the file, is appended to the normal dump and its module's
  // CvRecord pointed at it.
  const ModuleId exe_id = readobj_identity();
  const std::vector<uint8_t> good = read_bytes(kFix + "/normal.dmp");
  auto d = Minidump::from_bytes(good, "normal.dmp");
  REQUIRE(d.ok());
  uint32_t list_rva = 0;
  for (const StreamEntry& s : d.value()->streams())
    if (s.type == kModuleListStream) list_rva = s.loc.rva;
  size_t index = d.value()->modules().size();
  for (size_t i = 0; i < d.value()->modules().size(); i++)
    if (d.value()->modules()[i].name.find("mdprog.exe") != std::string::npos) index = i;
  REQUIRE(index < d.value()->modules().size());
  auto with_record = [&](const ModuleId& id) {
    std::vector<uint8_t> b = good;
    const uint32_t rva = static_cast<uint32_t>(b.size());
    const char* path = "mdprog.pdb";
    b.insert(b.end(), {'R', 'S', 'D', 'S'});
    b.insert(b.end(), id.bytes, id.bytes + 20);  // GUID then the age (u32 LE), as pdb_id lays them out
    b.insert(b.end(), path, path + std::strlen(path) + 1);
    const uint32_t loc[2] = {static_cast<uint32_t>(b.size() - rva), rva};
    std::memcpy(b.data() + list_rva + 4 + 108 * index + 76, loc, sizeof loc);
    return b;
  };
  auto capture = [&](std::vector<uint8_t> bytes) {
    auto dump = Minidump::from_bytes(std::move(bytes), "filled.dmp");
    REQUIRE(dump.ok());
    REQUIRE(dump.value()->modules()[index].codeview);
    CHECK(dump.value()->modules()[index].codeview->pdb_path == "mdprog.pdb");
    memory::MinidumpCaptureOptions o;
    auto c = memory::capture_minidump(*dump.value(), o, nullptr);
    REQUIRE(c.ok());
    return std::move(c).value();
  };
  {
    const memory::MinidumpCapture c = capture(with_record(exe_id));
    CHECK(c.modules[index].id_source == memory::IdSource::kCodeView);
    CHECK(c.modules[index].file == kFix + "/mdprog.exe");  // the file agrees, so it is used
    for (const auto& m : c.threads.front().modules)
      if (m.path == c.modules[index].name) CHECK(m.build_id == exe_id);
  }
  {
    // A record of another build: the file is not used, and the warning names both identities.
    ModuleId other = exe_id;
    other.bytes[0] ^= 1;
    const memory::MinidumpCapture c = capture(with_record(other));
    CHECK(c.modules[index].id_source == memory::IdSource::kCodeView);
    CHECK(c.modules[index].file.empty());
    CHECK(c.warnings.find(pe::symbol_server_key(exe_id)) != std::string::npos);
    CHECK(c.warnings.find(pe::symbol_server_key(other)) != std::string::npos);
  }
}

TEST_CASE("sprov_process_open_minidump: threads, the exception, notes and refused options", "[minidump][capi]") {
  const Printout p = printout("exception");
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  const std::string path = kFix + "/exception.dmp";
  sprov_process* proc = nullptr;
  REQUIRE(sprov_process_open_minidump(ctx, path.c_str(), nullptr, &proc) == 0);
  REQUIRE(sprov_process_thread_count(proc) >= 1);
  const sprov_snapshot* s0 = sprov_process_thread(proc, 0);
  CHECK(sprov_snapshot_tid(s0) == static_cast<int64_t>(p.tid));
  uint64_t rip = 0;
  REQUIRE(sprov_snapshot_reg(s0, arch::x86_64::kRip, &rip) == 0);
  CHECK(rip == p.exc_addr);
  sprov_process_info info{};
  info.sz = sizeof(info);
  REQUIRE(sprov_process_get_info(proc, &info) == 0);
  CHECK(info.has_exception == 1);
  CHECK(info.exception_code == p.exc_code);
  CHECK(info.exception_address == p.exc_addr);
  CHECK(info.exception_tid == static_cast<int64_t>(p.tid));
  CHECK(std::string(info.exception_name) == "EXCEPTION_ACCESS_VIOLATION");
  CHECK(std::string(sprov_process_notes(proc)).find(pe::symbol_server_key(readobj_identity()) +
                                                    " from the module file") != std::string::npos);
  // The module of frame 0 carries the program's identity through the C ABI.
  sprov_module_info mi{};
  mi.sz = sizeof(mi);
  bool found = false;
  for (size_t i = 0; i < sprov_snapshot_module_count(s0); i++) {
    REQUIRE(sprov_snapshot_module(s0, i, &mi) == 0);
    if (rip >= mi.start && rip < mi.end) {
      found = true;
      CHECK(mi.id_kind == SPROV_ID_PDB_GUID_AGE);
      CHECK(ModuleId::from_bytes(mi.id, mi.id_len, IdKind::kPdbGuidAge) == readobj_identity());
    }
  }
  CHECK(found);
  sprov_process_free(proc);

  sprov_process_opts o{};
  o.sz = sizeof(o);
  o.exe = "/bin/true";
  CHECK(sprov_process_open_minidump(ctx, path.c_str(), &o, &proc) == SPROV_ERR_INVALID_ARG);
  o.exe = nullptr;
  o.tid = 1;  // no such thread
  CHECK(sprov_process_open_minidump(ctx, path.c_str(), &o, &proc) == SPROV_ERR_NOT_FOUND);
  o.tid = 0;
  o.symbol_path = "/nonexistent";
  CHECK(sprov_process_open_core(ctx, path.c_str(), &o, &proc) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("only read for minidumps") != std::string::npos);
  sprov_context_free(ctx);
}

TEST_CASE("module names: UTF-16 to UTF-8, surrogate pairs, unpaired surrogates", "[minidump]") {
  // A dump of one ModuleList stream with one module whose name is "C:\é😀" + an unpaired high
  // surrogate + "x"; the UTF-8 expected is what Python's str.encode("utf-8", "replace") gives for it
  // with U+FFFD for the unpaired unit.
  const std::vector<uint16_t> units = {'C', ':', '\\', 0x00e9, 0xd83d, 0xde00, 0xd800, 'x'};
  std::vector<uint8_t> b(32 + 12);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); };
  put32(0, kSignature);
  put32(8, 1);   // one stream
  put32(12, 32); // directory right after the header
  const uint32_t list = static_cast<uint32_t>(b.size());
  b.resize(list + 4 + 108);
  put32(list, 1);
  const uint64_t base = 0x10000;
  std::memcpy(b.data() + list + 4, &base, 8);
  put32(list + 4 + 8, 0x1000);
  const uint32_t name = static_cast<uint32_t>(b.size());
  put32(list + 4 + 20, name);
  b.resize(name + 4 + 2 * units.size() + 2);
  put32(name, static_cast<uint32_t>(2 * units.size()));
  std::memcpy(b.data() + name + 4, units.data(), 2 * units.size());
  put32(32, kModuleListStream);
  put32(36, 4 + 108);
  put32(40, list);
  auto d = Minidump::from_bytes(b, "names.dmp");
  REQUIRE(d.ok());
  REQUIRE(d.value()->modules().size() == 1);
  CHECK(d.value()->modules()[0].name == "C:\\\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx");
  CHECK(d.value()->modules()[0].base == base);
  // An odd name length is a named error.
  put32(name, 3);
  auto odd = Minidump::from_bytes(b, "names.dmp");
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == SPROV_ERR_BAD_FORMAT);
  CHECK(odd.error().message.find("module 0's name") != std::string::npos);
}
