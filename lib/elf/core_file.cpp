// SPDX-License-Identifier: Apache-2.0
// ELF core files: PT_LOAD memory, threads (NT_PRSTATUS, NT_SIGINFO), NT_PRPSINFO, NT_AUXV and NT_FILE, all bounds-checked.
#include "elf/core_file.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/mapped_file.hpp"
#include "elf/elf_bytes.hpp"

namespace stackprov::elf {

namespace {

using detail::ByteView;

// Note types written into Linux cores with owner "CORE" (include/uapi/linux/elf.h).
constexpr uint32_t kNtPrstatus = 1;
constexpr uint32_t kNtPrpsinfo = 3;
constexpr uint32_t kNtAuxv = 6;
constexpr uint32_t kNtSiginfo = 0x53494749;  // "SIGI"
constexpr uint32_t kNtFile = 0x46494c45;  // "FILE"

// auxv keys (include/uapi/linux/auxvec.h).
constexpr uint64_t kAtNull = 0;
constexpr uint64_t kAtPhdr = 3;
constexpr uint64_t kAtEntry = 9;
constexpr uint64_t kAtExecfn = 31;
constexpr uint64_t kAtSysinfoEhdr = 33;

// struct elf_prstatus (include/uapi/linux/elfcore.h): pr_info (3 ints), short
// pr_cursig (+2 padding), pr_sigpend and pr_sighold (unsigned long each), then
// pr_pid. 64-bit: pid at 32; 32-bit (mips o32, i386): pid at 24.
constexpr size_t kPrCursigOffset = 12;
constexpr size_t kPrPidOffset64 = 32;
constexpr size_t kPrPidOffset32 = 24;
// struct elf_prpsinfo: 4 chars, unsigned long pr_flag, uid/gid (unsigned int on
// x86_64, arm64 and mips), pid, ppid, pgrp, sid, char pr_fname[16].
constexpr size_t kPsPidOffset64 = 24;
constexpr size_t kPsFnameOffset64 = 40;
constexpr size_t kPsPidOffset32 = 16;
constexpr size_t kPsFnameOffset32 = 32;
constexpr size_t kPsFnameSize = 16;
constexpr size_t kPsPsargsSize = 80;  // char pr_psargs[ELF_PRARGSZ] right after pr_fname
// siginfo_t (include/uapi/asm-generic/siginfo.h): int si_signo, si_errno, si_code
// (MIPS: si_signo, si_code, si_errno), then the union aligned to the pointer size,
// whose first member is si_addr for faults.
constexpr size_t kSiUnionOffset64 = 16;
constexpr size_t kSiUnionOffset32 = 12;

// Bounds that keep hostile input from asking for huge allocations.
constexpr size_t kMaxThreads = 1u << 20;
constexpr size_t kMaxFiles = 1u << 20;
constexpr size_t kMaxPathLen = 4096;
constexpr uint64_t kMaxModuleHeader = 64 * 1024;  // phdr table / note bytes read by build_id_at

Arch arch_for_machine(uint16_t m) {
  switch (m) {
    case EM_X86_64: return Arch::kX86_64;
    case EM_AARCH64: return Arch::kArm64;
    case EM_MIPS: return Arch::kMips32;
    default: return Arch::kUnknown;
  }
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

CoreFile::~CoreFile() {
  if (map_ != nullptr) unmap_file(map_, size_);
}

Result<std::unique_ptr<CoreFile>> CoreFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int e = errno;
    return make_error(-e, "core file %s: %s", path.c_str(), std::strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(-e, "core file %s: %s", path.c_str(), std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(SPROV_ERR_ELF, "core file %s is not a regular file", path.c_str());
  }
  if (st.st_size == 0) {
    ::close(fd);
    return make_error(SPROV_ERR_TRUNCATED, "core file %s is empty", path.c_str());
  }
  const size_t size = static_cast<size_t>(st.st_size);
  auto mapped = map_file(fd, size, false, "core file " + path);  // guarded: a truncation is no SIGBUS
  ::close(fd);
  if (!mapped) return std::move(mapped).error();
  void* m = mapped.value();
  std::unique_ptr<CoreFile> core(new CoreFile());
  core->path_ = path;
  core->map_ = m;
  core->data_ = static_cast<const uint8_t*>(m);
  core->size_ = size;
  return parse(std::move(core));
}

Result<std::unique_ptr<CoreFile>> CoreFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::unique_ptr<CoreFile> core(new CoreFile());
  core->path_ = std::move(name);
  core->owned_ = std::move(bytes);
  core->data_ = core->owned_.data();
  core->size_ = core->owned_.size();
  return parse(std::move(core));
}

Result<std::unique_ptr<CoreFile>> CoreFile::parse(std::unique_ptr<CoreFile> core) {
  if (Status st = core->parse_header(); !st.ok()) return st.error();
  return core;
}

Status CoreFile::parse_header() {
  const char* p = path_.c_str();
  if (size_ < EI_NIDENT || std::memcmp(data_, ELFMAG, SELFMAG) != 0)
    return make_error(SPROV_ERR_ELF, "%s is not an ELF file (no \\177ELF magic)", p);
  const uint8_t cls = data_[EI_CLASS];
  const uint8_t enc = data_[EI_DATA];
  if (cls != ELFCLASS32 && cls != ELFCLASS64)
    return make_error(SPROV_ERR_ELF, "%s: unknown ELF class %u", p, cls);
  if (enc != ELFDATA2LSB && enc != ELFDATA2MSB)
    return make_error(SPROV_ERR_ELF, "%s: unknown ELF data encoding %u", p, enc);
  is64_ = cls == ELFCLASS64;
  big_ = enc == ELFDATA2MSB;
  const ByteView v(data_, size_, big_);
  const size_t ehsize = is64_ ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (size_ < ehsize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: %zu bytes, shorter than the ELF header (%zu)", p, size_,
                      ehsize);
  const uint16_t type = *v.u16(16);
  machine_ = *v.u16(18);
  if (type != ET_CORE) {
    const char* what = type == ET_EXEC  ? ": an executable, not a core"
                       : type == ET_DYN ? ": a shared library or PIE executable, not a core"
                       : type == ET_REL ? ": an object file, not a core"
                                        : "";
    return make_error(SPROV_ERR_ELF, "%s is not an ELF core file (e_type %u%s)", p, type, what);
  }
  arch_ = arch_for_machine(machine_);
  if (arch_ == Arch::kUnknown)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: core of an unsupported architecture (e_machine %u)", p,
                      machine_);
  if ((arch_ == Arch::kMips32) == is64_)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s: %s core with ELF class %u is not supported", p,
                      arch_name(arch_), cls);
  const uint64_t phoff = *v.word(is64_ ? 32 : 28, is64_);
  const uint64_t shoff = *v.word(is64_ ? 40 : 32, is64_);
  const uint16_t phentsize = *v.u16(is64_ ? 54 : 42);
  uint64_t phnum = *v.u16(is64_ ? 56 : 44);
  const size_t want_phent = is64_ ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (phnum == PN_XNUM) {
    // More than 65534 segments: the real count is section header 0's sh_info
    // (gABI "Extended Program Header Numbering"; fs/binfmt_elf.c fill_extnum_info).
    const uint64_t info_off = shoff + (is64_ ? 44 : 28);
    auto n = v.u32(info_off);
    if (shoff == 0 || !n)
      return make_error(SPROV_ERR_TRUNCATED, "%s: e_phnum is PN_XNUM but section header 0 at offset %s is "
                        "missing", p, hex(shoff).c_str());
    phnum = *n;
  }
  if (phnum == 0) return make_error(SPROV_ERR_ELF, "%s: core has no program headers", p);
  if (phentsize != want_phent)
    return make_error(SPROV_ERR_ELF, "%s: e_phentsize %u, expected %zu", p, phentsize, want_phent);
  if (!v.in_range(phoff, phnum * want_phent))
    return make_error(SPROV_ERR_TRUNCATED,
                      "%s: program header table (offset %s, %llu entries) runs past the end of the file "
                      "(%zu bytes); the core is truncated",
                      p, hex(phoff).c_str(), static_cast<unsigned long long>(phnum), size_);

  struct NoteSeg {
    uint64_t offset, size, align;
  };
  std::vector<NoteSeg> notes;
  bool truncated_load = false;
  for (uint64_t i = 0; i < phnum; i++) {
    const uint64_t o = phoff + i * want_phent;
    const uint32_t ptype = *v.u32(o);
    CoreSegment s;
    uint64_t align = 0;
    if (is64_) {
      s.flags = *v.u32(o + 4);
      s.offset = *v.u64(o + 8);
      s.vaddr = *v.u64(o + 16);
      s.filesz = *v.u64(o + 32);
      s.memsz = *v.u64(o + 40);
      align = *v.u64(o + 48);
    } else {
      s.offset = *v.u32(o + 4);
      s.vaddr = *v.u32(o + 8);
      s.filesz = *v.u32(o + 16);
      s.memsz = *v.u32(o + 20);
      s.flags = *v.u32(o + 24);
      align = *v.u32(o + 28);
    }
    if (ptype == PT_NOTE) {
      uint64_t n = s.filesz;
      if (!v.in_range(s.offset, n)) {
        n = s.offset < size_ ? size_ - s.offset : 0;
        truncated_ = true;
        warn("PT_NOTE at offset " + hex(s.offset) + " (" + std::to_string(s.filesz) +
             " bytes) runs past the end of the file (" + std::to_string(size_) +
             " bytes); the core is truncated, notes read: the first " + std::to_string(n) + " bytes");
      }
      notes.push_back({s.offset, n, align});
      continue;
    }
    if (ptype != PT_LOAD) continue;
    if (s.memsz == 0) continue;
    if (s.vaddr + s.memsz < s.vaddr) {
      warn("PT_LOAD " + std::to_string(i) + " at " + hex(s.vaddr) + ": memsz " + hex(s.memsz) +
           " wraps the address space; ignored");
      continue;
    }
    if (s.filesz > s.memsz) s.filesz = s.memsz;
    s.present = s.filesz;
    if (s.filesz > 0 && !v.in_range(s.offset, s.filesz)) {
      s.present = s.offset < size_ ? size_ - s.offset : 0;
      truncated_load = true;
    }
    segments_.push_back(s);
  }
  std::sort(segments_.begin(), segments_.end(),
            [](const CoreSegment& a, const CoreSegment& b) { return a.vaddr < b.vaddr; });
  for (size_t i = 1; i < segments_.size(); i++) {
    CoreSegment& prev = segments_[i - 1];
    if (prev.vaddr + prev.memsz > segments_[i].vaddr) {
      warn("PT_LOAD at " + hex(prev.vaddr) + " overlaps the one at " + hex(segments_[i].vaddr) +
           "; clipped");
      prev.memsz = segments_[i].vaddr - prev.vaddr;
      prev.filesz = std::min(prev.filesz, prev.memsz);
      prev.present = std::min(prev.present, prev.filesz);
    }
  }
  if (truncated_load) {
    truncated_ = true;
    uint64_t missing = 0, need = 0;
    for (const CoreSegment& s : segments_) {
      missing += s.filesz - s.present;
      need = std::max(need, s.offset + s.filesz);
    }
    warn("core is truncated: " + std::to_string(size_) + " bytes, PT_LOAD segments need " +
         std::to_string(need) + "; " + std::to_string(missing) + " bytes of memory are missing");
  }
  for (const NoteSeg& n : notes)
    if (n.size > 0) parse_notes(n.offset, n.size, n.align);
  return {};
}

void CoreFile::parse_notes(uint64_t offset, uint64_t size, uint64_t align) {
  // gABI "Note Section": namesz, descsz, type, then name and desc each padded
  // to the note alignment. Linux writes core notes 4-byte aligned also in
  // ELF64 (fs/binfmt_elf.c writenote); 8 only when the segment says so.
  if (align != 8) align = 4;
  auto pad = [align](uint64_t x) { return (x + align - 1) & ~(align - 1); };
  const ByteView v(data_ + offset, size, big_);
  uint64_t off = 0;
  while (off < size) {
    if (!v.in_range(off, 12)) {
      if (offset + size >= size_) truncated_ = true;
      warn("note at core offset " + hex(offset + off) + ": header cut off (" + std::to_string(size - off) +
           " bytes left in the PT_NOTE)");
      return;
    }
    const uint32_t namesz = *v.u32(off);
    const uint32_t descsz = *v.u32(off + 4);
    const uint32_t type = *v.u32(off + 8);
    const uint64_t name_off = off + 12;
    const uint64_t desc_off = name_off + pad(namesz);
    if (!v.in_range(name_off, pad(namesz)) || !v.in_range(desc_off, descsz)) {
      if (offset + size >= size_) truncated_ = true;
      warn("note type " + hex(type) + " at core offset " + hex(offset + off) + ": name (" +
           std::to_string(namesz) + " bytes) or descriptor (" + std::to_string(descsz) +
           " bytes) runs past the end of the PT_NOTE");
      return;
    }
    const char* name = reinterpret_cast<const char*>(v.data() + name_off);
    const bool core_owner = namesz == 5 && std::memcmp(name, "CORE", 5) == 0;
    const uint8_t* desc = v.data() + desc_off;
    if (core_owner) {
      switch (type) {
        case kNtPrstatus: parse_prstatus(desc, descsz); break;
        case kNtPrpsinfo: parse_prpsinfo(desc, descsz); break;
        case kNtAuxv: parse_auxv(desc, descsz); break;
        case kNtFile: parse_file_note(desc, descsz); break;
        case kNtSiginfo: parse_siginfo(desc, descsz); break;
        default: break;
      }
    }
    off = desc_off + pad(descsz);
  }
}

void CoreFile::parse_prstatus(const uint8_t* desc, size_t size) {
  const size_t pid_off = is64_ ? kPrPidOffset64 : kPrPidOffset32;
  const ByteView v(desc, size, big_);
  if (!v.in_range(pid_off, 4)) {
    warn("NT_PRSTATUS of " + std::to_string(size) + " bytes is too short for pr_pid (offset " +
         std::to_string(pid_off) + "); thread ignored");
    siginfo_owner_ = false;
    return;
  }
  if (threads_.size() >= kMaxThreads) {
    if (threads_.size() == kMaxThreads) warn("more than " + std::to_string(kMaxThreads) + " threads; rest ignored");
    siginfo_owner_ = false;
    return;
  }
  siginfo_owner_ = true;
  CoreThread t;
  t.tid = static_cast<int32_t>(*v.u32(pid_off));
  t.signal = static_cast<int16_t>(*v.u16(kPrCursigOffset));
  t.prstatus = desc;
  t.prstatus_size = size;
  threads_.push_back(t);
}

void CoreFile::parse_prpsinfo(const uint8_t* desc, size_t size) {
  const size_t pid_off = is64_ ? kPsPidOffset64 : kPsPidOffset32;
  const size_t fname_off = is64_ ? kPsFnameOffset64 : kPsFnameOffset32;
  const ByteView v(desc, size, big_);
  if (!v.in_range(fname_off, kPsFnameSize)) {
    warn("NT_PRPSINFO of " + std::to_string(size) + " bytes is too short; ignored");
    return;
  }
  psinfo_pid_ = static_cast<int32_t>(*v.u32(pid_off));
  const char* f = reinterpret_cast<const char*>(desc + fname_off);
  fname_.assign(f, strnlen(f, kPsFnameSize));
  if (v.in_range(fname_off + kPsFnameSize, kPsPsargsSize)) {
    const char* a = f + kPsFnameSize;
    psargs_.assign(a, strnlen(a, kPsPsargsSize));
    // bfd (elfcore_grok_psinfo) drops the space some kernels append.
    if (!psargs_.empty() && psargs_.back() == ' ') psargs_.pop_back();
  }
}

void CoreFile::parse_siginfo(const uint8_t* desc, size_t size) {
  const ByteView v(desc, size, big_);
  const size_t union_off = is64_ ? kSiUnionOffset64 : kSiUnionOffset32;
  if (!v.in_range(0, union_off + (is64_ ? 8 : 4))) {
    warn("NT_SIGINFO of " + std::to_string(size) + " bytes is too short; ignored");
    return;
  }
  if (threads_.empty() || !siginfo_owner_) {
    warn("NT_SIGINFO does not follow a thread's NT_PRSTATUS; ignored");
    return;
  }
  const bool swapped = arch_ == Arch::kMips32;  // arch/mips/include/uapi/asm/siginfo.h
  CoreThread& t = threads_.back();
  t.has_siginfo = true;
  t.siginfo.signo = static_cast<int32_t>(*v.u32(0));
  t.siginfo.code = static_cast<int32_t>(*v.u32(swapped ? 4 : 8));
  t.siginfo.err = static_cast<int32_t>(*v.u32(swapped ? 8 : 4));
  t.siginfo.addr = *v.word(union_off, is64_);
  siginfo_owner_ = false;  // one per thread
}

void CoreFile::parse_auxv(const uint8_t* desc, size_t size) {
  const ByteView v(desc, size, big_);
  const uint64_t w = is64_ ? 8 : 4;
  auxv_.present = true;
  for (uint64_t off = 0; v.in_range(off, 2 * w); off += 2 * w) {
    const uint64_t key = *v.word(off, is64_);
    const uint64_t val = *v.word(off + w, is64_);
    if (key == kAtNull) break;
    switch (key) {
      case kAtSysinfoEhdr: auxv_.sysinfo_ehdr = val; break;
      case kAtEntry: auxv_.entry = val; break;
      case kAtPhdr: auxv_.phdr = val; break;
      case kAtExecfn: auxv_.execfn = val; break;
      default: break;
    }
  }
}

void CoreFile::parse_file_note(const uint8_t* desc, size_t size) {
  // fs/binfmt_elf.c fill_files_note: long count, long page_size, then count x
  // {long start, long end, long file_ofs (in pages)}, then count NUL-terminated paths.
  const ByteView v(desc, size, big_);
  const uint64_t w = is64_ ? 8 : 4;
  if (!v.in_range(0, 2 * w)) {
    warn("NT_FILE of " + std::to_string(size) + " bytes has no count/page size; ignored");
    return;
  }
  const uint64_t count = *v.word(0, is64_);
  const uint64_t page = *v.word(w, is64_);
  if (count > kMaxFiles || count > (size - 2 * w) / (3 * w)) {
    warn("NT_FILE: count " + std::to_string(count) + " does not fit its " + std::to_string(size) +
         " bytes; ignored");
    return;
  }
  if (page == 0 || (page & (page - 1)) != 0 || page > (1ull << 30)) {
    warn("NT_FILE: page size " + std::to_string(page) + " is not a power of two; ignored");
    return;
  }
  files_.clear();
  file_page_size_ = page;
  uint64_t str = 2 * w + count * 3 * w;
  for (uint64_t i = 0; i < count; i++) {
    const uint64_t e = 2 * w + i * 3 * w;
    CoreMappedFile f;
    f.start = *v.word(e, is64_);
    f.end = *v.word(e + w, is64_);
    const uint64_t pgoff = *v.word(e + 2 * w, is64_);
    if (str >= size) {
      warn("NT_FILE: path " + std::to_string(i) + " of " + std::to_string(count) +
           " is missing (note cut off)");
      break;
    }
    const char* s = reinterpret_cast<const char*>(desc + str);
    const size_t n = strnlen(s, size - str);
    if (str + n >= size) {
      warn("NT_FILE: path " + std::to_string(i) + " is not NUL-terminated (note cut off)");
      break;
    }
    str += n + 1;
    if (f.end <= f.start || n == 0 || n > kMaxPathLen || pgoff > UINT64_MAX / page) {
      warn("NT_FILE: entry " + std::to_string(i) + " (" + hex(f.start) + "-" + hex(f.end) + ") is malformed; "
           "ignored");
      continue;
    }
    f.file_offset = pgoff * page;
    f.path.assign(s, n);
    files_.push_back(std::move(f));
  }
}

int64_t CoreFile::pid() const {
  if (psinfo_pid_ != 0) return psinfo_pid_;
  return threads_.empty() ? 0 : threads_.front().tid;
}

const CoreSegment* CoreFile::segment_at(uint64_t addr) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), addr,
                             [](uint64_t a, const CoreSegment& s) { return a < s.vaddr; });
  if (it == segments_.begin()) return nullptr;
  --it;
  return addr - it->vaddr < it->memsz ? &*it : nullptr;
}

uint64_t CoreFile::readable_from(uint64_t addr) const {
  const CoreSegment* s = segment_at(addr);
  if (s == nullptr) return 0;
  const uint64_t off = addr - s->vaddr;
  return off < s->present ? s->present - off : 0;
}

bool CoreFile::read(uint64_t addr, void* buf, size_t len) const {
  auto* out = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const CoreSegment* s = segment_at(addr);
    if (s == nullptr) return false;
    const uint64_t off = addr - s->vaddr;
    if (off >= s->present) return false;
    const uint64_t n = std::min<uint64_t>(len, s->present - off);
    std::memcpy(out, data_ + s->offset + off, n);
    out += n;
    len -= n;
    if (len > 0 && addr + n < addr) return false;
    addr += n;
  }
  return true;
}

std::optional<std::string> CoreFile::read_string(uint64_t addr, size_t max) const {
  std::string s;
  while (s.size() < max) {
    char c;
    if (!read(addr + s.size(), &c, 1)) return std::nullopt;
    if (c == '\0') return s;
    s.push_back(c);
  }
  return std::nullopt;
}

std::optional<CoreImage> CoreFile::image_at(uint64_t start) const {
  return image_in_memory(start, [this](uint64_t addr, void* buf, size_t len) { return read(addr, buf, len); });
}

std::optional<CoreImage> image_in_memory(uint64_t start, const std::function<bool(uint64_t, void*, size_t)>& read) {
  uint8_t eh[sizeof(Elf64_Ehdr)];
  if (!read(start, eh, EI_NIDENT) || std::memcmp(eh, ELFMAG, SELFMAG) != 0) return std::nullopt;
  const bool is64 = eh[EI_CLASS] == ELFCLASS64;
  if (!is64 && eh[EI_CLASS] != ELFCLASS32) return std::nullopt;
  const bool big = eh[EI_DATA] == ELFDATA2MSB;
  const size_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (!read(start, eh, ehsize)) return std::nullopt;
  const ByteView h(eh, ehsize, big);
  CoreImage img;
  img.machine = *h.u16(18);
  img.is64 = is64;
  img.big = big;
  const uint64_t phoff = *h.word(is64 ? 32 : 28, is64);
  const uint16_t phentsize = *h.u16(is64 ? 54 : 42);
  const uint16_t phnum = *h.u16(is64 ? 56 : 44);
  const size_t want = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (phentsize != want || phnum == 0 || phnum == PN_XNUM || phoff > kMaxModuleHeader ||
      phnum * want > kMaxModuleHeader)
    return std::nullopt;
  std::vector<uint8_t> ph(phnum * want);
  if (!read(start + phoff, ph.data(), ph.size())) return std::nullopt;
  const ByteView t(ph.data(), ph.size(), big);
  for (size_t i = 0; i < phnum; i++) {
    const uint64_t o = i * want;
    ProgramHeader p;
    p.type = *t.u32(o);
    p.flags = *t.u32(is64 ? o + 4 : o + 24);
    p.offset = *t.word(is64 ? o + 8 : o + 4, is64);
    p.vaddr = *t.word(is64 ? o + 16 : o + 8, is64);
    p.filesz = *t.word(is64 ? o + 32 : o + 16, is64);
    p.memsz = *t.word(is64 ? o + 40 : o + 20, is64);
    p.align = *t.word(is64 ? o + 48 : o + 28, is64);
    img.phdrs.push_back(p);
  }
  // The mapping at `start` has file offset 0; its link-time address is that of
  // the PT_LOAD with the lowest offset, moved back to offset 0.
  const ProgramHeader* first = nullptr;
  for (const ProgramHeader& p : img.phdrs)
    if (p.type == PT_LOAD && (first == nullptr || p.offset < first->offset)) first = &p;
  if (first == nullptr || first->vaddr < first->offset) return std::nullopt;
  img.load_bias = start - (first->vaddr - first->offset);
  for (const ProgramHeader& p : img.phdrs) {
    if (p.type != PT_NOTE || p.filesz == 0 || p.filesz > kMaxModuleHeader) continue;
    std::vector<uint8_t> notes(p.filesz);
    if (!read(p.vaddr + img.load_bias, notes.data(), notes.size())) continue;
    if (auto id = detail::find_gnu_build_id(ByteView(notes.data(), notes.size(), big), p.align)) {
      img.build_id = *id;
      break;
    }
  }
  return img;
}

namespace {

bool kept_in_rebuild(const ProgramHeader& p) {
  return p.filesz > 0 && ((p.type == PT_LOAD && (p.flags & PF_W) == 0) || p.type == PT_DYNAMIC);
}

/// Entries of .dynamic looked at: real tables have fewer than 100.
constexpr uint64_t kMaxDynamicEntries = 4096;

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> image_ranges(const CoreImage& img, uint64_t limit) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t total = 0;  // bytes read, bounded too: segments may overlap
  for (const ProgramHeader& p : img.phdrs) {
    if (!kept_in_rebuild(p)) continue;
    if (p.offset > limit || p.filesz > limit - p.offset || p.filesz > limit - total) return {};
    total += p.filesz;
    out.emplace_back(img.load_bias + p.vaddr, p.filesz);
  }
  return out;
}

Result<std::vector<uint8_t>> rebuild_image(uint64_t start, const std::function<bool(uint64_t, void*, size_t)>& read,
                                           uint64_t limit) {
  auto img = image_in_memory(start, read);
  if (!img) return make_error(SPROV_ERR_NOT_FOUND, "no ELF header and program headers readable at 0x%llx",
                              static_cast<unsigned long long>(start));
  if (image_ranges(*img, limit).empty())
    return make_error(SPROV_ERR_LIMIT, "the ELF image at 0x%llx has no read-only segment or is over %llu bytes",
                      static_cast<unsigned long long>(start), static_cast<unsigned long long>(limit));
  const bool is64 = img->is64;
  const uint64_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  const uint64_t phentsize = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  // The segment holding the ELF header and the program header table (file offset 0) must be
  // read; one that cannot be (the code a snapshot leaves out) keeps no file bytes (p_filesz 0).
  uint8_t eh[sizeof(Elf64_Ehdr)];
  if (!read(start, eh, ehsize)) return make_error(SPROV_ERR_IO, "no ELF header at 0x%llx", static_cast<unsigned long long>(start));
  const uint64_t phoff = *ByteView(eh, ehsize, img->big).word(is64 ? 32 : 28, is64);
  const uint64_t phend = phoff + img->phdrs.size() * phentsize;  // image_in_memory bounded both
  const ProgramHeader* head = nullptr;
  for (const ProgramHeader& p : img->phdrs)
    if (p.type == PT_LOAD && kept_in_rebuild(p) && p.offset == 0 && p.filesz >= std::max(ehsize, phend)) head = &p;
  if (head == nullptr)
    return make_error(SPROV_ERR_NOT_FOUND, "the ELF image at 0x%llx maps its headers in no read-only segment",
                      static_cast<unsigned long long>(start));
  uint64_t size = 0;
  for (const ProgramHeader& p : img->phdrs)
    if (kept_in_rebuild(p)) size = std::max(size, p.offset + p.filesz);
  std::vector<uint8_t> bytes(size);
  std::vector<bool> have(img->phdrs.size(), false);
  uint64_t end = 0;  // of the bytes read
  for (size_t i = 0; i < img->phdrs.size(); i++) {
    const ProgramHeader& p = img->phdrs[i];
    if (!kept_in_rebuild(p) || &p == head) continue;
    have[i] = read(img->load_bias + p.vaddr, bytes.data() + p.offset, p.filesz);
    if (have[i]) end = std::max(end, p.offset + p.filesz);
  }
  // The header segment last: a segment overlapping it cannot change the headers parsed above.
  const uint64_t at = img->load_bias + head->vaddr;
  if (!read(at, bytes.data(), head->filesz))
    return make_error(SPROV_ERR_IO, "the ELF image at 0x%llx: its headers' segment (0x%llx bytes at 0x%llx) is unreadable",
                      static_cast<unsigned long long>(start), static_cast<unsigned long long>(head->filesz),
                      static_cast<unsigned long long>(at));
  have[static_cast<size_t>(head - img->phdrs.data())] = true;
  end = std::max(end, head->filesz);
  bytes.resize(end);
  // No section header table: e_shoff, e_shnum, e_shstrndx zero (zero in either byte order). A
  // segment not read (a writable one, code the snapshot lacks) keeps its place and memory size
  // but no file bytes.
  std::memset(bytes.data() + (is64 ? 40 : 32), 0, is64 ? 8 : 4);
  std::memset(bytes.data() + (is64 ? 60 : 48), 0, 4);
  for (size_t i = 0; i < img->phdrs.size(); i++)
    if ((img->phdrs[i].type == PT_LOAD || img->phdrs[i].type == PT_DYNAMIC) && !have[i])
      std::memset(bytes.data() + phoff + i * phentsize + (is64 ? 32 : 16), 0, is64 ? 8 : 4);
  // The dynamic linker adds the load bias to .dynamic's table addresses in place (glibc's
  // elf_get_dynamic_info, on every architecture but MIPS and RISC-V): move them back (modulo the
  // word size: a bias may be negative). Only the first PT_DYNAMIC, as a dynamic linker reads.
  std::vector<std::pair<uint64_t, uint64_t>> loads;  // link-time [vaddr, vaddr + memsz)
  for (const ProgramHeader& p : img->phdrs)
    if (p.type == PT_LOAD) loads.emplace_back(p.vaddr, p.memsz);
  auto in_image = [&](uint64_t vaddr) {
    for (const auto& [v, n] : loads)
      if (vaddr >= v && vaddr - v < n) return true;
    return false;
  };
  const uint64_t mask = is64 ? UINT64_MAX : UINT32_MAX;
  for (size_t i = 0; i < img->phdrs.size(); i++) {
    const ProgramHeader& p = img->phdrs[i];
    if (p.type != PT_DYNAMIC) continue;
    if (!have[i] || img->load_bias == 0) break;
    const uint64_t dent = is64 ? 16 : 8, half = dent / 2;
    const uint64_t stop = p.offset + std::min<uint64_t>(p.filesz, dent * kMaxDynamicEntries);
    const ByteView v(bytes.data(), bytes.size(), img->big);
    for (uint64_t o = p.offset; o + dent <= stop; o += dent) {
      const uint64_t tag = *v.word(o, is64), val = *v.word(o + half, is64);
      if (tag == DT_NULL) break;
      if (tag != DT_HASH && tag != DT_GNU_HASH && tag != DT_SYMTAB && tag != DT_STRTAB) continue;
      const uint64_t link = (val - img->load_bias) & mask;
      if (in_image(val) || !in_image(link)) continue;
      for (uint64_t k = 0; k < half; k++)  // store `link` in the image's byte order and word size
        bytes[o + half + k] = static_cast<uint8_t>(link >> (8 * (img->big ? half - 1 - k : k)));
    }
    break;
  }
  return bytes;
}

std::optional<ModuleId> CoreFile::build_id_at(uint64_t start) const {
  auto img = image_at(start);
  if (!img || img->build_id.empty()) return std::nullopt;
  return img->build_id;
}

}  // namespace stackprov::elf
