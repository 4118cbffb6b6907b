// SPDX-License-Identifier: Apache-2.0
// Snapshots from a Windows minidump: threads with contexts, modules with identities and files.
#include "memory/minidump_capture.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <unordered_set>

#include "arch/x86_64/registers.hpp"
#include "pe/loaded_image.hpp"
#include "pe/pe_object.hpp"

namespace stackprov::memory {

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// DWARF numbers of the CONTEXT's integer registers in their CONTEXT order
/// (rax rcx rdx rbx rsp rbp rsi rdi r8 .. r15).
constexpr uint16_t kCtxToDwarf[16] = {
    arch::x86_64::kRax, arch::x86_64::kRcx, arch::x86_64::kRdx, arch::x86_64::kRbx,
    arch::x86_64::kRsp, arch::x86_64::kRbp, arch::x86_64::kRsi, arch::x86_64::kRdi,
    arch::x86_64::kR8,  arch::x86_64::kR9,  arch::x86_64::kR10, arch::x86_64::kR11,
    arch::x86_64::kR12, arch::x86_64::kR13, arch::x86_64::kR14, arch::x86_64::kR15};
constexpr int kCtxRspIndex = 4;

/// The last component of a Windows or POSIX path.
std::string base_name(const std::string& name) {
  const size_t k = name.find_last_of("\\/");
  return k == std::string::npos ? name : name.substr(k + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The files tried for a module, in order: on the symbol path DIR/NAME and the symbol-store layout
/// DIR/NAME/<TIMESTAMP><SIZEOFIMAGE>/NAME (each as named and lower-cased: Windows names ignore
/// case), then for wine's drive Z: (the host's root) the same host path. With `own_path` (a live
/// capture on the machine that loaded the module) the module's name itself comes first.
std::vector<std::string> candidate_files(const minidump::Module& m, const std::vector<std::string>& dirs,
                                         bool own_path) {
  std::vector<std::string> out;
  const std::string base = base_name(m.name);
  if (base.empty() || base == "." || base == "..") return out;
  // The target's own name (hostile: a loader list a process can rewrite): a local absolute path
  // "X:\\..." without "." or ".." components only; open_regular_file refuses network and device names.
  if (own_path && m.name.size() > 3 && std::isalpha(static_cast<unsigned char>(m.name[0])) && m.name[1] == ':' &&
      (m.name[2] == '\\' || m.name[2] == '/')) {
    std::string framed = m.name.substr(2);
    std::replace(framed.begin(), framed.end(), '/', '\\');
    framed += '\\';
    if (framed.find("\\..\\") == std::string::npos && framed.find("\\.\\") == std::string::npos) out.push_back(m.name);
  }
  char key[32];
  std::snprintf(key, sizeof key, "%08X%x", m.timestamp, m.size);
  for (const std::string& d : dirs) {
    if (d.empty()) continue;
    for (const std::string& n : {base, lower(base)}) {
      out.push_back(d + "/" + n);
      out.push_back(d + "/" + n + "/" + key + "/" + n);
    }
  }
  if (m.name.size() > 3 && (m.name[0] == 'Z' || m.name[0] == 'z') && m.name[1] == ':' && m.name[2] == '\\') {
    // wine's Z: drive is the host's root. The name is the dump's (hostile): a path with a ".."
    // component, or "." ones, is not followed; what is opened must still be a regular PE file
    // whose timestamp, size and identity are the dump's (doc/windows.md "Minidumps").
    std::string host = m.name.substr(2);
    std::replace(host.begin(), host.end(), '\\', '/');
    std::string framed(1, '/');  // appended: "/" + string&& trips GCC 12's -Wrestrict (PR 105329)
    framed += host;
    framed += '/';
    const bool dotted = framed.find("/../") != std::string::npos || framed.find("/./") != std::string::npos;
    if (!dotted) out.push_back(host);
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

PlannedModule plan_pe_module(const minidump::Module& m, const TargetRead& read, const char* source,
                             const MinidumpCaptureOptions& opts, std::string* warnings) {
  const std::string src(source);
  PlannedModule p;
  p.info.name = m.name;
  p.snap.start = m.base;
  p.snap.end = m.base + m.size;
  p.snap.path = m.name;
  const std::string what = "module " + m.name;
  // 1. The dump's CodeView record.
  ModuleId cv_id;
  if (m.codeview && m.codeview->kind == minidump::CodeView::Kind::kRsds) {
    pe::CodeView cv;
    std::copy(m.codeview->guid.begin(), m.codeview->guid.end(), cv.guid);
    cv.age = m.codeview->age;
    cv.pdb_path = m.codeview->pdb_path;
    cv_id = pe::pdb_id(cv);
  } else if (m.codeview) {
    char sig[16];
    std::snprintf(sig, sizeof sig, "0x%08x", m.codeview->signature);
    *warnings += what + ": CodeView record of signature " + sig + " (not RSDS) gives no identity\n";
  }
  // 2. The image headers in the dump's memory (a full dump holds them; a normal one rarely).
  auto headers = pe::read_loaded_headers(
      [&](uint64_t rva, void* buf, size_t len) {
        return rva < m.size && len <= m.size - rva && read(m.base + rva, buf, len);
      },
      what + " (the " + src + "'s memory)");
  if (headers.ok() && (headers.value().timestamp != m.timestamp || headers.value().size_of_image != m.size)) {
    *warnings += what + ": the image headers in the " + src + "'s memory (TimeDateStamp " +
                 hex(headers.value().timestamp) + ", SizeOfImage " + hex(headers.value().size_of_image) + ") are not the module list's (" +
                 hex(m.timestamp) + ", " + hex(m.size) + "): not used\n";
    headers = make_error(SPROV_ERR_BAD_FORMAT, "headers differ");
  }
  p.info.headers_in_memory = headers.ok();
  const ModuleId mem_id = headers.ok() ? headers.value().id : ModuleId{};
  if (!cv_id.empty() && !mem_id.empty() && cv_id != mem_id)
    *warnings += what + ": the CodeView record says " + pe::symbol_server_key(cv_id) +
                 ", the image headers in the " + src + "'s memory say " + pe::symbol_server_key(mem_id) +
                 ": the record is used\n";
  ModuleId id = !cv_id.empty() ? cv_id : mem_id;
  p.info.id_source = !cv_id.empty() ? IdSource::kCodeView : !mem_id.empty() ? IdSource::kMemory : IdSource::kNone;
  if (headers.ok()) p.snap.load_bias = m.base - headers.value().image_base;
  // 3. The module file: TimeDateStamp and SizeOfImage must be the dump's or process's (the key Windows
  // symbol stores file images under), and the identity, when the target gives one, the same.
  if (!opts.offline) {
    for (const std::string& path : candidate_files(m, opts.symbol_path, opts.own_module_paths)) {
      struct stat st;
      if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      auto img = pe::PeObject::open(path);
      if (!img.ok()) {
        *warnings += what + ": " + img.error().message + "\n";
        continue;
      }
      const pe::PeObject& f = *img.value();
      if (f.machine() != pe::kMachineAmd64 || f.timestamp() != m.timestamp || f.size_of_image() != m.size) {
        *warnings += what + ": file " + path + " is another image (TimeDateStamp " + hex(f.timestamp()) +
                     ", SizeOfImage " + hex(f.size_of_image()) + ", machine " + hex(f.machine()) +
                     "; the " + src + " has " + hex(m.timestamp) + ", " + hex(m.size) + "): not used\n";
        continue;
      }
      if (!id.empty() && f.id() != id) {
        *warnings += what + ": file " + path + " has identity " +
                     (f.id().empty() ? std::string("none") : pe::identity_key(f.id())) + ", the " + src + "'s " +
                     (p.info.id_source == IdSource::kCodeView ? "CodeView record" : "image headers") + " say " +
                     pe::symbol_server_key(id) + ": not used\n";
        continue;
      }
      if (id.empty() && f.id().kind == IdKind::kPdbGuidAge) {
        id = f.id();
        p.info.id_source = IdSource::kFile;
      }
      p.snap.load_bias = m.base - f.image_base();
      p.snap.open_path = path;
      if (const FileIdentity* fid = f.file_identity()) p.snap.file = *fid;
      p.info.file = path;
      break;
    }
  }
  // 4. No CodeView record anywhere: the code id of the module list's TimeDateStamp and SizeOfImage
  // (a file used above has the same two values), the key symbol stores file such images under.
  if (id.empty()) {
    id = pe::code_id(m.timestamp, m.size);
    p.info.id_source = IdSource::kModuleList;
  }
  p.snap.build_id = id;
  return p;
}

void set_x64_context(Snapshot& s, uint64_t rip, const uint64_t gpr[16], bool integer) {
  s.set_reg(arch::x86_64::kRip, rip);
  s.set_reg(arch::x86_64::kRsp, gpr[kCtxRspIndex]);
  if (integer)
    for (int i = 0; i < 16; i++)
      if (i != kCtxRspIndex) s.set_reg(kCtxToDwarf[i], gpr[i]);
}

const char* id_source_name(IdSource s) {
  switch (s) {
    case IdSource::kNone: return "none";
    case IdSource::kCodeView: return "codeview";
    case IdSource::kMemory: return "memory";
    case IdSource::kFile: return "file";
    case IdSource::kModuleList: return "module-list";
  }
  return "unknown";
}

Result<MinidumpCapture> capture_minidump(const minidump::Minidump& dump, const MinidumpCaptureOptions& opts,
                                         const MinidumpWalkFn& while_open) {
  const char* p = dump.path().c_str();
  if (!dump.system_info())
    return make_error(SPROV_ERR_UNSUPPORTED, "minidump %s has no SystemInfo stream: its architecture is unknown", p);
  if (dump.system_info()->arch != minidump::kArchAmd64)
    return make_error(SPROV_ERR_UNSUPPORTED, "minidump %s is of processor architecture %u (only AMD64, 9, is read)", p,
                      dump.system_info()->arch);
  if (dump.threads().empty()) return make_error(SPROV_ERR_NOT_FOUND, "minidump %s has no thread (no ThreadList stream)", p);
  if (opts.tid != 0) {
    bool found = false;
    for (const minidump::Thread& t : dump.threads()) found |= t.id == opts.tid;
    if (!found)
      return make_error(SPROV_ERR_NOT_FOUND, "thread %lld is not in minidump %s", static_cast<long long>(opts.tid), p);
  }
  MinidumpCapture out;
  out.pid = dump.process_id().value_or(0);
  Snapshot base;
  base.arch = Arch::kX86_64;
  base.endian = Endian::kLittle;
  base.pid = out.pid;
  std::vector<SnapshotModule> mods;
  for (const minidump::Module& m : dump.modules()) {
    PlannedModule plan = plan_pe_module(
        m, [&](uint64_t addr, void* buf, size_t len) { return dump.read(addr, buf, len); }, "dump", opts, &out.warnings);
    out.modules.push_back(plan.info);
    if (plan.snap.end > plan.snap.start) mods.push_back(std::move(plan.snap));
  }
  if (Status s = base.set_modules(std::move(mods)); !s.ok())
    return make_error(s.error().code, "minidump %s: module list: %s", p, s.error().message.c_str());

  if (dump.exception()) {
    out.has_exception = true;
    out.exception = *dump.exception();
  }
  // The exception's thread first, with the exception's context (the context the thread list
  // gives it is that of the handler that wrote or waited for the dump).
  std::vector<const minidump::Thread*> order;
  std::unordered_set<uint32_t> seen;
  const minidump::Thread* faulting_thread = nullptr;
  for (const minidump::Thread& t : dump.threads()) {
    // A thread id listed twice is hostile (dbghelp writes each once): the first is taken.
    if (!seen.insert(t.id).second) {
      out.warnings += "thread " + std::to_string(t.id) + " is listed more than once in minidump " + dump.path() +
                      ": the first is used\n";
      continue;
    }
    if (out.has_exception && t.id == out.exception.thread_id) faulting_thread = &t;
    else order.push_back(&t);
  }
  if (faulting_thread != nullptr) order.insert(order.begin(), faulting_thread);
  // Every thread's stack copy together stays within kMaxTotalStackBytes (as a live capture's):
  // 65,536 threads x 512 KiB of one shared range would otherwise be 32 GiB from a 4 MB dump.
  uint64_t stack_budget = kMaxTotalStackBytes;
  // The module list is copied into each thread's snapshot: threads x modules stays bounded too.
  const uint64_t per_thread_modules = std::max<uint64_t>(1, base.modules.size());
  uint64_t copies_left = kMaxThreadModuleCopies / per_thread_modules;
  for (const minidump::Thread* tp : order) {
    const minidump::Thread& t = *tp;
    if (opts.tid != 0 && t.id != opts.tid) continue;
    const std::string tname = "thread " + std::to_string(t.id);
    const bool faulting = out.has_exception && t.id == out.exception.thread_id && out.exception.context.size != 0;
    const minidump::Location ctx_loc = faulting ? out.exception.context : t.context;
    if (ctx_loc.size == 0) {
      out.warnings += tname + " has no context in minidump " + dump.path() +
                      " (wine's dbghelp writes none for the thread that writes the dump): skipped\n";
      continue;
    }
    auto ctx = dump.x64_context(ctx_loc);
    if (!ctx.ok()) {
      out.warnings += tname + ": " + ctx.error().message + ": skipped\n";
      continue;
    }
    const minidump::X64Context& c = ctx.value();
    if (!c.has_control()) {
      out.warnings += tname + ": its context has no CONTEXT_CONTROL registers (ContextFlags " + hex(c.flags) +
                      "): skipped\n";
      continue;
    }
    if (copies_left == 0) {
      out.warnings += "minidump " + dump.path() + ": more threads than the limit for " +
                      std::to_string(base.modules.size()) + " modules; thread " + std::to_string(t.id) +
                      " and later ones skipped\n";
      break;
    }
    copies_left--;
    Snapshot s = base;
    s.tid = t.id;
    set_x64_context(s, c.rip, c.gpr.data(), c.has_integer());
    const uint64_t sp = c.gpr[kCtxRspIndex];
    const uint64_t avail = dump.readable_from(sp, std::min<uint64_t>(opts.max_stack_bytes, stack_budget));
    if (avail == 0 && stack_budget == 0) {
      out.warnings += tname + ": no stack copied: all threads' stacks together reached " +
                      std::to_string(kMaxTotalStackBytes >> 20) + " MiB\n";
    } else if (avail == 0) {
      out.warnings += tname + ": stack at rsp " + hex(sp) + " is not in minidump " + dump.path() + "\n";
    } else {
      stack_budget -= avail;
      std::vector<uint8_t> stack(avail);
      if (dump.read(sp, stack.data(), stack.size()))
        if (Status st = s.add_memory(sp, stack.data(), stack.size()); !st.ok())
          out.warnings += tname + ": stack copy skipped: " + st.error().message + "\n";
    }
    if (while_open) {
      MinidumpReader reader(dump);
      while_open(s, reader);
    }
    out.threads.push_back(std::move(s));
  }
  if (out.threads.empty())
    return make_error(SPROV_ERR_UNSUPPORTED, "minidump %s: no thread has a usable context: %s", p, out.warnings.c_str());
  return out;
}

}  // namespace stackprov::memory
