// SPDX-License-Identifier: Apache-2.0
// Snapshots from an ELF core file: one per thread, modules from NT_FILE (checked against the core's build-ids).
#include "memory/core_capture.hpp"

#include <elf.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "arch/arm64/registers.hpp"
#include "arch/mips32/registers.hpp"
#include "arch/x86_64/registers.hpp"
#include "core/context.hpp"
#include "core/module_map.hpp"
#include "elf/core_link_map.hpp"
#include "elf/elf_image.hpp"
#include "memory/module_list.hpp"

namespace stackprov::memory {

namespace {

/// Snapshot::module_root used when module paths are host paths already (a
/// sysroot plus an `exe` outside it): "/." + "/abs/path" opens "/abs/path",
/// and a non-empty root keeps the context's sysroot from being applied twice.
const char* const kHostPathRoot = "/.";
/// The largest vDSO copied (it is one or two pages on every Linux).
constexpr uint64_t kMaxVdsoBytes = 1u << 20;
/// The smallest page size of the supported arches (mapping offsets are multiples of it).
constexpr uint64_t kMinPage = 4096;
/// Longest AT_EXECFN string read.
constexpr size_t kMaxExecfn = 4096;

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

template <class Regs>
void copy_regs(const Regs& r, int n, Snapshot& s) {
  for (int i = 0; i < n && i < kSnapshotMaxRegs; i++)
    if (r.has(i)) s.set_reg(i, r.get(i));
}

/// Registers of one NT_PRSTATUS into `s`; returns the DWARF number of sp.
Result<int> regs_from_thread(const elf::CoreFile& core, const elf::CoreThread& t, Snapshot& s) {
  switch (core.arch()) {
    case Arch::kX86_64: {
      namespace a = arch::x86_64;
      a::Regs r{};
      if (Status st = a::regs_from_prstatus(t.prstatus, t.prstatus_size, &r); !st.ok()) return st.error();
      copy_regs(r, a::Traits::kNumRegs, s);
      return static_cast<int>(a::Traits::kSpReg);
    }
    case Arch::kArm64: {
      namespace a = arch::arm64;
      a::Regs r{};
      if (Status st = a::regs_from_prstatus(t.prstatus, t.prstatus_size, &r); !st.ok()) return st.error();
      copy_regs(r, a::Traits::kNumRegs, s);
      return static_cast<int>(a::Traits::kSpReg);
    }
    case Arch::kMips32: {
      namespace a = arch::mips32;
      a::Regs r{};
      if (Status st = a::regs_from_prstatus(t.prstatus, t.prstatus_size, core.big_endian(), &r); !st.ok())
        return st.error();
      copy_regs(r, a::TraitsLE::kNumRegs, s);
      return static_cast<int>(a::TraitsLE::kSpReg);
    }
    default:
      return make_error(SPROV_ERR_UNSUPPORTED, "core of architecture %s", arch_name(core.arch()));
  }
}

std::string machine_desc(Arch a, uint16_t machine) {
  return std::string(arch_name(a)) + " (e_machine " + std::to_string(machine) + ")";
}

/// Where module files are opened and under which path each module is listed.
struct PathPlan {
  std::string module_root;      ///< Snapshot::module_root
  std::string prefix;           ///< prepended to NT_FILE paths for the module path
  std::string main_path;        ///< NT_FILE path of the main program ("" = unknown)
  std::string exe_module_path;  ///< module path of the main program when `exe` is given

  std::string module_path(const std::string& nt_path) const {
    if (!exe_module_path.empty() && nt_path == main_path) return exe_module_path;
    return prefix + nt_path;
  }
  std::string host_path(const std::string& module_path) const { return join_root(module_root, module_path); }
};

std::string real_path(const std::string& p) {
  char* rp = realpath(p.c_str(), nullptr);
  if (rp == nullptr) return p;
  std::string out(rp);
  free(rp);
  return out;
}

PathPlan plan_paths(const elf::CoreFile& core, const std::vector<elf::CoreMappedFile>& files,
                    const CoreCaptureOptions& opts, std::string* warnings) {
  PathPlan plan;
  std::string root = opts.sysroot;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root == "/") root.clear();
  plan.module_root = root;
  // The main program: the NT_FILE mapping that holds the entry point.
  const elf::CoreAuxv& aux = core.auxv();
  if (aux.entry != 0)
    for (const elf::CoreMappedFile& f : files)
      if (aux.entry >= f.start && aux.entry < f.end) plan.main_path = f.path;
  if (plan.main_path.empty() && aux.execfn != 0)
    if (auto s = core.read_string(aux.execfn, kMaxExecfn)) plan.main_path = *s;
  if (opts.exe.empty()) return plan;
  if (plan.main_path.empty()) {
    *warnings += "core " + core.path() + ": the main program is not in NT_FILE (no mapping holds AT_ENTRY " +
                 hex(aux.entry) + "); exe " + opts.exe + " is not used\n";
    return plan;
  }
  const std::string exe = real_path(opts.exe);
  if (root.empty()) {
    plan.exe_module_path = exe;
    return plan;
  }
  for (const std::string& r : {root, real_path(root)}) {
    if (exe.size() > r.size() && exe.compare(0, r.size(), r) == 0 && exe[r.size()] == '/') {
      plan.exe_module_path = exe.substr(r.size());
      plan.module_root = r;
      return plan;
    }
  }
  // exe lies outside the sysroot: list every module under its host path.
  plan.module_root = kHostPathRoot;
  plan.prefix = root;
  plan.exe_module_path = exe;
  return plan;
}

/// NT_FILE, or for cores without it (qemu-user) the program and the dynamic
/// linker's link_map list, with program headers from the files (exe, sysroot).
std::vector<elf::CoreMappedFile> mapped_files(const elf::CoreFile& core, const CoreCaptureOptions& opts,
                                              std::string* warnings) {
  if (!core.files().empty()) return core.files();
  if (opts.offline) {
    *warnings += "core " + core.path() + " has no NT_FILE note: offline, the module list (taken from the dynamic "
                 "linker's link_map with the files' program headers) cannot be built\n";
    return {};
  }
  std::string exe_guest;
  if (core.auxv().execfn != 0)
    if (auto s = core.read_string(core.auxv().execfn, kMaxExecfn)) exe_guest = *s;
  if (exe_guest.empty()) exe_guest = opts.exe;
  if (exe_guest.empty()) return {};
  std::string root = opts.sysroot;
  while (!root.empty() && root.back() == '/') root.pop_back();
  auto open_file = [&](const std::string& path) -> std::optional<elf::LinkMapFile> {
    std::string host = path;
    if (path == exe_guest && !opts.exe.empty()) host = opts.exe;
    else if (!path.empty() && path[0] == '/') host = join_root(root, path);
    auto img = elf::ElfImage::open(host);
    if (!img.ok() || img.value()->machine() != core.machine()) return std::nullopt;
    const elf::ElfImage& im = *img.value();
    elf::LinkMapFile f;
    f.phdrs = im.program_headers();
    for (const elf::ProgramHeader& p : f.phdrs)
      if (p.type == PT_DYNAMIC && p.offset <= im.file_size() && p.filesz <= im.file_size() - p.offset)
        f.dynamic.assign(im.file_data() + p.offset, im.file_data() + p.offset + p.filesz);
    return f;
  };
  auto files = elf::mapped_files_from_link_map(core, exe_guest, open_file);
  if (!files.empty())
    *warnings += "core " + core.path() + " has no NT_FILE note: modules are taken from the dynamic linker's "
                 "link_map\n";
  return files;
}

/// What the checks of one module file found.
struct FileCheck {
  std::string module_path;
  std::optional<elf::CoreImage> core_image;  ///< from the core's copy of the first page
  bool file_missing = false;
  bool override_id = false;  ///< list the module with the core's build-id (mismatch or file missing)
};

/// Whether a mapping of `phdrs`' file at `file_offset` is code: the PT_LOAD
/// whose file range holds the offset has PF_X.
std::optional<bool> exec_by_phdrs(const std::vector<elf::ProgramHeader>& phdrs, uint64_t file_offset,
                                  uint64_t page) {
  for (const elf::ProgramHeader& p : phdrs) {
    if (p.type != PT_LOAD) continue;
    const uint64_t lo = p.offset & ~(page - 1);
    if (file_offset >= lo && file_offset < p.offset + std::max(p.filesz, uint64_t{1})) return (p.flags & PF_X) != 0;
  }
  return std::nullopt;
}

/// Whether an NT_FILE mapping is code. The kernel writes a PT_LOAD (maybe with
/// filesz 0) for every mapping, with its permissions; gdb's gcore leaves out
/// the segments it does not dump, and then the program headers of the module
/// (the file's, else the core's copy of them) decide.
bool is_executable_mapping(const elf::CoreFile& core, const elf::CoreMappedFile& f, const elf::ElfImage* file,
                           const std::optional<elf::CoreImage>& core_image) {
  const elf::CoreSegment* seg = core.segment_at(f.start);
  if (seg != nullptr && seg->vaddr == f.start) return (seg->flags & PF_X) != 0;
  // gcore writes an NT_FILE page size of 1 (offsets in bytes); segments start on real pages.
  const uint64_t page = std::max<uint64_t>(core.file_page_size(), kMinPage);
  if (file != nullptr)
    if (auto x = exec_by_phdrs(file->program_headers(), f.file_offset, page)) return *x;
  if (core_image)
    if (auto x = exec_by_phdrs(core_image->phdrs, f.file_offset, page)) return *x;
  return false;
}

}  // namespace

Result<CoreCapture> capture_core(const elf::CoreFile& core, const CoreCaptureOptions& opts,
                                 const CoreWalkFn& while_open) {
  CoreCapture out;
  out.pid = core.pid();
  out.program_name = core.program_name();
  out.program_args = core.program_args();
  out.truncated = core.truncated();
  for (const std::string& w : core.warnings()) out.warnings += "core " + core.path() + ": " + w + "\n";

  if (core.threads().empty())
    return make_error(core.warnings().empty() ? SPROV_ERR_ELF : SPROV_ERR_TRUNCATED,
                      "core %s has no thread (no NT_PRSTATUS note)%s%s", core.path().c_str(),
                      core.warnings().empty() ? "" : ": ", core.warnings().empty() ? "" : core.warnings()[0].c_str());
  if (opts.tid != 0) {
    bool found = false;
    std::string tids;
    for (const elf::CoreThread& t : core.threads()) {
      found |= t.tid == opts.tid;
      if (tids.size() < 200) tids += (tids.empty() ? "" : ", ") + std::to_string(t.tid);
    }
    if (!found)
      return make_error(SPROV_ERR_NOT_FOUND, "thread %lld is not in core %s (threads: %s)",
                        static_cast<long long>(opts.tid), core.path().c_str(), tids.c_str());
  }
  if (opts.offline && !opts.exe.empty())
    return make_error(SPROV_ERR_INVALID_ARG, "exe %s: offline, no module file is opened", opts.exe.c_str());
  if (!opts.exe.empty()) {
    auto img = elf::ElfImage::open(opts.exe);
    if (!img.ok()) return make_error(img.error().code, "exe: %s", img.error().message.c_str());
    if (img.value()->machine() != core.machine())
      return make_error(SPROV_ERR_ARCH_MISMATCH, "exe %s is %s but core %s is %s", opts.exe.c_str(),
                        machine_desc(img.value()->arch(), img.value()->machine()).c_str(), core.path().c_str(),
                        machine_desc(core.arch(), core.machine()).c_str());
  }

  const std::vector<elf::CoreMappedFile> files = mapped_files(core, opts, &out.warnings);
  const PathPlan plan = plan_paths(core, files, opts, &out.warnings);

  // The base snapshot every thread starts from: the vDSO's bytes and the modules.
  Snapshot base;
  base.arch = core.arch();
  base.endian = core.big_endian() ? Endian::kBig : Endian::kLittle;
  base.pid = out.pid;
  base.module_root = plan.module_root;

  std::vector<MapsEntry> maps;
  if (const uint64_t vdso = core.auxv().sysinfo_ehdr; vdso != 0) {
    const elf::CoreSegment* seg = core.segment_at(vdso);
    if (seg == nullptr || seg->vaddr != vdso || seg->memsz > kMaxVdsoBytes || seg->present < seg->memsz) {
      out.warnings += "vdso at " + hex(vdso) + " is not dumped in core " + core.path() + "\n";
    } else {
      std::vector<uint8_t> bytes(seg->memsz);
      if (core.read(vdso, bytes.data(), bytes.size()) && base.add_memory(vdso, bytes.data(), bytes.size()).ok()) {
        MapsEntry e;
        e.start = vdso;
        e.end = vdso + seg->memsz;
        e.executable = e.readable = true;
        e.path = kVdsoName;
        maps.push_back(e);
      }
    }
  }

  // One check per distinct file; its code mappings go into the module list.
  std::map<std::string, FileCheck> checks;  // by NT_FILE path
  for (const elf::CoreMappedFile& f : files) {
    if (checks.count(f.path)) continue;
    FileCheck& c = checks[f.path];
    for (const elf::CoreMappedFile& g : files)
      if (g.path == f.path && g.file_offset == 0 && (c.core_image = core.image_at(g.start))) break;
    c.module_path = plan.module_path(f.path);
    const std::string host = plan.host_path(c.module_path);
    Result<std::shared_ptr<elf::ElfImage>> img =
        opts.offline ? Result<std::shared_ptr<elf::ElfImage>>(make_error(SPROV_ERR_NOT_FOUND, "offline"))
                     : elf::ElfImage::open(host);
    const elf::ElfImage* file = img.ok() ? img.value().get() : nullptr;
    bool code = false;
    for (const elf::CoreMappedFile& g : files) {
      if (g.path != f.path || !is_executable_mapping(core, g, file, c.core_image)) continue;
      code = true;
      MapsEntry e;
      e.start = g.start;
      e.end = g.end;
      e.offset = g.file_offset;
      e.readable = e.executable = true;
      e.path = c.module_path;
      maps.push_back(std::move(e));
    }
    if (!code) continue;
    const ModuleId core_id = c.core_image ? c.core_image->build_id : ModuleId{};
    if (opts.offline) {
      if (core_id.empty())
        out.warnings += "module " + c.module_path + ": build-id not in the core (" +
                        (c.core_image ? "no build-id note in its first page" : "its first page is not dumped") +
                        "): offline, no bundle can be found for it\n";
      continue;
    }
    if (file == nullptr) {
      if (img.error().code == -ENOENT || img.error().code == -ENOTDIR)
        out.warnings += "module " + c.module_path + " not found (looked at " + host + ")\n";
      else
        out.warnings += "module " + c.module_path + ": " + img.error().message + "\n";
      c.file_missing = true;
      c.override_id = !core_id.empty();
      continue;
    }
    if (file->machine() != core.machine()) {
      out.warnings += "module " + c.module_path + " (" + host + ") is " +
                      machine_desc(file->arch(), file->machine()) + ", the core is " +
                      machine_desc(core.arch(), core.machine()) + ": not used\n";
      c.override_id = !core_id.empty();
      continue;
    }
    if (!core_id.empty() && file->build_id() != core_id) {
      out.warnings += "module " + c.module_path + ": build-id mismatch: core has " + core_id.hex() +
                      ", file has " + (file->build_id().empty() ? std::string("none") : file->build_id().hex()) +
                      "\n";
      c.override_id = true;
      out.build_id_mismatch = true;
    }
  }
  if (opts.offline) {
    // Offline: only the vDSO goes through add_modules_from_maps (it reads the
    // snapshot's bytes); file modules are listed from the core alone below.
    std::vector<MapsEntry> vdso;
    for (const MapsEntry& e : maps)
      if (e.path == kVdsoName) vdso.push_back(e);
    std::string ignored;
    if (Status st = add_modules_from_maps(base, vdso, plan.module_root, &ignored); !st.ok()) return st.error();
    std::map<std::string, const FileCheck*> by_path;
    for (const auto& [nt_path, c] : checks) by_path[c.module_path] = &c;
    for (const MapsEntry& e : maps) {
      if (e.path == kVdsoName) continue;
      SnapshotModule m;
      m.start = e.start;
      m.end = e.end;
      m.file_offset = e.offset;
      m.path = e.path;
      auto it = by_path.find(e.path);
      if (it != by_path.end() && it->second->core_image) {
        m.build_id = it->second->core_image->build_id;
        m.load_bias = it->second->core_image->load_bias;
      }
      if (Status st = base.add_module(std::move(m)); !st.ok()) return st.error();
    }
  }
  // add_modules_from_maps reports unreadable files as well; those were named above already.
  std::string dup_warnings;
  if (!opts.offline)
    if (Status st = add_modules_from_maps(base, maps, plan.module_root, &dup_warnings); !st.ok()) return st.error();
  std::map<std::string, const FileCheck*> by_module;
  for (const auto& [nt_path, c] : checks) by_module[c.module_path] = &c;
  for (SnapshotModule& m : base.modules) {
    auto it = by_module.find(m.path);
    if (it == by_module.end() || !it->second->core_image) continue;
    const FileCheck& c = *it->second;
    if (c.override_id) m.build_id = c.core_image->build_id;
    if (c.file_missing) m.load_bias = c.core_image->load_bias;
  }

  // The signalled thread first (gdb's current thread), then NT_PRSTATUS order.
  std::vector<const elf::CoreThread*> order;
  for (const elf::CoreThread& t : core.threads()) {
    if (t.signal != 0 && out.signal.signal == 0) {
      out.signal.signal = t.signal;
      out.signal.tid = t.tid;
      out.signal.has_siginfo = t.has_siginfo;
      out.signal.siginfo = t.siginfo;
      order.insert(order.begin(), &t);
    } else {
      order.push_back(&t);
    }
  }
  for (const elf::CoreThread* tp : order) {
    const elf::CoreThread& t = *tp;
    if (opts.tid != 0 && t.tid != opts.tid) continue;
    Snapshot s = base;
    s.tid = t.tid;
    auto sp_reg = regs_from_thread(core, t, s);
    if (!sp_reg.ok()) {
      out.warnings += "thread " + std::to_string(t.tid) + ": registers: " + sp_reg.error().message + "; skipped\n";
      continue;
    }
    const uint64_t sp = s.regs[sp_reg.value()];
    const uint64_t avail = std::min<uint64_t>(core.readable_from(sp), opts.max_stack_bytes);
    if (avail == 0) {
      out.warnings += "thread " + std::to_string(t.tid) + ": stack at sp " + hex(sp) + " is not in core " +
                      core.path() + "\n";
    } else {
      std::vector<uint8_t> stack(avail);
      if (core.read(sp, stack.data(), stack.size())) {
        if (Status st = s.add_memory(sp, stack.data(), stack.size()); !st.ok())
          out.warnings += "thread " + std::to_string(t.tid) + ": stack copy skipped: " + st.error().message + "\n";
      }
    }
    if (while_open) {
      CoreReader reader(core);
      while_open(s, reader);
    }
    out.threads.push_back(std::move(s));
  }
  if (out.threads.empty())
    return make_error(SPROV_ERR_UNSUPPORTED, "core %s: no thread could be read: %s", core.path().c_str(),
                      out.warnings.c_str());
  return out;
}

}  // namespace stackprov::memory
