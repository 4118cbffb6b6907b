// SPDX-License-Identifier: Apache-2.0
// ElfImage: maps an ELF file, parses its headers with libelf once, serves sections (decompressed lazily).
#include "elf/elf_image.hpp"

#include "core/module_cache.hpp"
#include "core/once.hpp"
#include "core/open_file.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "elf/decompress.hpp"
#include "elf/elf_bytes.hpp"

namespace stackprov::elf {

namespace {

/// PT_GNU_EH_FRAME from elf.h (GNU extension, "LSB Core" 2.2.1).
constexpr uint32_t kPtGnuEhFrame = 0x6474e550;
/// Upper bound on section headers we accept (e_shnum is 16 bits unless
/// extended through section 0; real files stay far below this).
constexpr size_t kMaxSections = 1u << 20;

enum class Compression : uint8_t { kNone, kShf, kZdebug };

struct SectionRecord {
  std::string name;       ///< name in the file
  std::string canonical;  ///< lookup name (".zdebug_x" -> ".debug_x")
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint32_t info = 0;
  uint64_t entsize = 0;
  uint64_t addralign = 0;
  Compression compression = Compression::kNone;
};

/// Lazily decompressed bytes of one section, computed at most once.
struct LazyBytes {
  stackprov::OnceFlag once;
  detail::SectionBuffer bytes;
  std::optional<Error> error;
};

void init_libelf() {
  // Function-local static: initialised once, thread-safe (C++11 [stmt.dcl]/4).
  static const unsigned version = elf_version(EV_CURRENT);
  (void)version;
}

Arch arch_from(uint16_t machine, bool is64) {
  switch (machine) {
    case EM_X86_64:
      return Arch::kX86_64;
    case EM_AARCH64:
      return Arch::kArm64;
    case EM_MIPS:
      return is64 ? Arch::kUnknown : Arch::kMips32;
    default:
      return Arch::kUnknown;
  }
}

}  // namespace

struct ElfImage::Impl {
  std::string path;
  std::optional<FileIdentity> identity;  ///< open(): the file mapped
  void* map = nullptr;
  size_t map_len = 0;
  std::vector<uint8_t> owned;
  const uint8_t* bytes = nullptr;
  size_t size = 0;

  Arch arch = Arch::kUnknown;
  uint16_t machine = 0;
  bool is64 = false;
  bool big = false;
  uint16_t type = 0;
  BuildId build_id;
  std::vector<ProgramHeader> phdrs;
  std::vector<SectionRecord> sections;
  std::vector<std::unique_ptr<LazyBytes>> lazy;  // parallel to sections
  std::optional<Debuglink> debuglink;
  /// Bytes of decompressed sections held, against the file's budget (many section headers may
  /// name one small compressed blob: each is within its own ratio cap, their sum is not).
  mutable std::atomic<uint64_t> inflated{0};

  ~Impl() {
    if (map != nullptr) munmap(map, map_len);
  }

  detail::ByteView file() const { return detail::ByteView(bytes, size, big); }

  Error elf_error(const char* what) const {
    return make_error(SPROV_ERR_ELF, "%s: %s: %s", path.c_str(), what, elf_errmsg(-1));
  }

  Status parse();
  Status parse_sections(Elf* elf);
  void find_build_id();
  void find_debuglink();
  Result<Section> materialise(size_t index) const;
};

Status ElfImage::Impl::parse() {
  init_libelf();
  if (size < EI_NIDENT || std::memcmp(bytes, ELFMAG, SELFMAG) != 0) {
    return make_error(SPROV_ERR_ELF, "%s: not an ELF file (bad magic)", path.c_str());
  }
  // libelf reads only; the const_cast is for its pre-const C API (elf_memory
  // uses ELF_C_READ and converts foreign byte order into its own buffers).
  Elf* elf = elf_memory(const_cast<char*>(reinterpret_cast<const char*>(bytes)), size);
  if (elf == nullptr) return elf_error("elf_memory");
  struct Closer {
    Elf* e;
    ~Closer() { elf_end(e); }
  } closer{elf};
  if (elf_kind(elf) != ELF_K_ELF) {
    return make_error(SPROV_ERR_ELF, "%s: not an ELF object", path.c_str());
  }
  const int cls = gelf_getclass(elf);
  if (cls != ELFCLASS32 && cls != ELFCLASS64) {
    return make_error(SPROV_ERR_ELF, "%s: unknown ELF class %d", path.c_str(), cls);
  }
  is64 = cls == ELFCLASS64;
  const uint8_t data_enc = bytes[EI_DATA];
  if (data_enc != ELFDATA2LSB && data_enc != ELFDATA2MSB) {
    return make_error(SPROV_ERR_ELF, "%s: unknown ELF data encoding %u", path.c_str(), data_enc);
  }
  big = data_enc == ELFDATA2MSB;
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf, &ehdr) == nullptr) return elf_error("bad ELF header");
  type = ehdr.e_type;
  machine = ehdr.e_machine;
  arch = arch_from(machine, is64);

  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return elf_error("bad program header count");
  const uint64_t phentsize = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (phnum > 0 && (ehdr.e_phoff > size || phnum > (size - ehdr.e_phoff) / phentsize)) {
    return make_error(SPROV_ERR_ELF, "%s: program header table (%zu entries at 0x%llx) "
                      "extends past end of file", path.c_str(), phnum,
                      static_cast<unsigned long long>(ehdr.e_phoff));
  }
  phdrs.reserve(phnum);
  for (size_t i = 0; i < phnum; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr) return elf_error("bad program header");
    phdrs.push_back(ProgramHeader{ph.p_type, ph.p_flags, ph.p_offset, ph.p_vaddr,
                                  ph.p_filesz, ph.p_memsz, ph.p_align});
  }
  if (ehdr.e_shoff != 0 || ehdr.e_shnum != 0) {
    // libelf quietly drops a section header table that lies outside the
    // image; a truncated file must be an error instead.
    const uint64_t shentsize = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
    size_t shnum = ehdr.e_shnum;
    if (shnum == 0 && ehdr.e_shoff != 0 && ehdr.e_shoff <= size - shentsize && ehdr.e_shoff + shentsize <= size) {
      shnum = 1;  // extended numbering: the count lives in section 0 (gABI "Sections")
    }
    if (ehdr.e_shoff > size || shnum > (size - ehdr.e_shoff) / shentsize) {
      return make_error(SPROV_ERR_ELF, "%s: section header table (%zu entries at 0x%llx) "
                        "extends past end of file (0x%zx bytes)", path.c_str(), shnum,
                        static_cast<unsigned long long>(ehdr.e_shoff), size);
    }
  }
  if (Status st = parse_sections(elf); !st) return st;
  find_build_id();
  find_debuglink();
  return {};
}

Status ElfImage::Impl::parse_sections(Elf* elf) {
  size_t shnum = 0;
  if (elf_getshdrnum(elf, &shnum) != 0) return elf_error("bad section header count");
  if (shnum == 0) return {};
  if (shnum > kMaxSections) {
    return make_error(SPROV_ERR_ELF, "%s: %zu section headers exceed the limit", path.c_str(), shnum);
  }
  size_t shstrndx = 0;
  const bool have_names = elf_getshdrstrndx(elf, &shstrndx) == 0 && shstrndx < shnum;
  sections.resize(shnum);
  lazy.resize(shnum);
  for (size_t i = 0; i < shnum; i++) {
    Elf_Scn* scn = elf_getscn(elf, i);
    GElf_Shdr sh;
    if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr) {
      return make_error(SPROV_ERR_ELF, "%s: bad section header %zu: %s", path.c_str(), i,
                        elf_errmsg(-1));
    }
    SectionRecord& r = sections[i];
    if (have_names && i != 0) {
      const char* n = elf_strptr(elf, shstrndx, sh.sh_name);
      if (n != nullptr) r.name = n;
    }
    r.type = sh.sh_type;
    r.flags = sh.sh_flags;
    r.addr = sh.sh_addr;
    r.offset = sh.sh_offset;
    r.size = sh.sh_size;
    r.link = sh.sh_link;
    r.info = sh.sh_info;
    r.entsize = sh.sh_entsize;
    r.addralign = sh.sh_addralign;
    r.canonical = r.name;
    if (r.type != SHT_NOBITS && (r.flags & SHF_COMPRESSED) != 0) {
      r.compression = Compression::kShf;
    } else if (r.type != SHT_NOBITS && r.name.rfind(".zdebug", 0) == 0) {
      r.compression = Compression::kZdebug;
      r.canonical = ".debug" + r.name.substr(7);
    }
    lazy[i] = std::make_unique<LazyBytes>();
  }
  return {};
}

void ElfImage::Impl::find_build_id() {
  const detail::ByteView f = file();
  for (const ProgramHeader& ph : phdrs) {
    if (ph.type != PT_NOTE || !f.in_range(ph.offset, ph.filesz)) continue;
    const detail::ByteView notes(bytes + ph.offset, ph.filesz, big);
    if (auto id = detail::find_gnu_build_id(notes, ph.align)) {
      build_id = *id;
      return;
    }
  }
  for (const SectionRecord& r : sections) {
    if (r.type != SHT_NOTE || r.compression != Compression::kNone || !f.in_range(r.offset, r.size)) {
      continue;
    }
    const detail::ByteView notes(bytes + r.offset, r.size, big);
    if (auto id = detail::find_gnu_build_id(notes, r.addralign)) {
      build_id = *id;
      return;
    }
  }
}

void ElfImage::Impl::find_debuglink() {
  // .gnu_debuglink: NUL-terminated file name, zero padding to a 4-byte
  // boundary, then the CRC32 in the file's byte order (gdb manual,
  // "Debugging Information in Separate Files").
  for (size_t i = 0; i < sections.size(); i++) {
    if (sections[i].name != ".gnu_debuglink") continue;
    auto sec = materialise(i);
    if (!sec.ok() || sec->data == nullptr) return;
    const auto* nul = static_cast<const uint8_t*>(std::memchr(sec->data, 0, sec->size));
    if (nul == nullptr || nul == sec->data) return;
    const size_t name_len = static_cast<size_t>(nul - sec->data);
    const uint64_t crc_off = (name_len + 1 + 3) & ~uint64_t{3};
    auto crc = detail::ByteView(sec->data, sec->size, big).u32(crc_off);
    if (!crc) return;
    debuglink = Debuglink{std::string(reinterpret_cast<const char*>(sec->data), name_len), *crc};
    return;
  }
}

Result<Section> ElfImage::Impl::materialise(size_t index) const {
  if (index >= sections.size()) {
    return make_error(SPROV_ERR_NO_SECTION, "%s: section index %zu out of range (%zu sections)",
                      path.c_str(), index, sections.size());
  }
  const SectionRecord& r = sections[index];
  Section s;
  s.name = r.canonical;
  s.addr = r.addr;
  s.offset = r.offset;
  s.type = r.type;
  s.flags = r.flags;
  s.link = r.link;
  s.info = r.info;
  s.entsize = r.entsize;
  s.addralign = r.addralign;
  s.index = static_cast<uint32_t>(index);
  if (r.type == SHT_NOBITS || r.type == SHT_NULL) return s;
  if (!file().in_range(r.offset, r.size)) {
    return make_error(SPROV_ERR_ELF,
                      "%s: section %s (index %zu) at offset 0x%llx size 0x%llx extends past end "
                      "of file (0x%zx bytes)",
                      path.c_str(), r.name.c_str(), index,
                      static_cast<unsigned long long>(r.offset),
                      static_cast<unsigned long long>(r.size), size);
  }
  s.file_size = r.size;
  if (r.compression == Compression::kNone) {
    s.data = bytes + r.offset;
    s.size = r.size;
    return s;
  }
  LazyBytes& lz = *lazy[index];
  stackprov::call_once(lz.once, [&] {
    auto out = detail::decompress_section(
        bytes + r.offset, r.size,
        r.compression == Compression::kZdebug ? detail::CompressionFormat::kZdebug
                                              : detail::CompressionFormat::kShfCompressed,
        is64, big, path, r.name);
    if (!out.ok()) {
      lz.error = std::move(out).error();
      return;
    }
    // 1 GiB + 64 x the file: compressed debug info inflates ~3-10x, never so much in sum.
    const uint64_t budget = (uint64_t{1} << 30) + 64 * uint64_t{size};
    const uint64_t n = out.value().size();
    if (inflated.fetch_add(n) + n > budget) {
      inflated.fetch_sub(n);
      lz.error = make_error(SPROV_ERR_LIMIT,
                            "%s: section %s (index %zu): the file's decompressed sections would exceed %llu "
                            "bytes (1 GiB + 64 x its %zu bytes)",
                            path.c_str(), r.name.c_str(), index, static_cast<unsigned long long>(budget), size);
      return;
    }
    lz.bytes = std::move(out).value();
  });
  if (lz.error) return *lz.error;
  s.data = lz.bytes.data();
  s.size = lz.bytes.size();
  s.flags &= ~static_cast<uint64_t>(SHF_COMPRESSED);
  return s;
}

ElfImage::ElfImage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ElfImage::~ElfImage() = default;

struct ImageReuseScope::Entry {
  std::string path;
  struct stat st;
  std::shared_ptr<ElfImage> image;

  bool same_file(const std::string& p, const struct stat& o) const {
    return st.st_dev == o.st_dev && st.st_ino == o.st_ino && st.st_size == o.st_size &&
           st.st_mtim.tv_sec == o.st_mtim.tv_sec && st.st_mtim.tv_nsec == o.st_mtim.tv_nsec && path == p;
  }
};

namespace {
thread_local ImageReuseScope* t_reuse_scope = nullptr;
}  // namespace

ImageReuseScope::ImageReuseScope() : outer_(t_reuse_scope) { t_reuse_scope = this; }
ImageReuseScope::~ImageReuseScope() { t_reuse_scope = outer_; }

Result<std::shared_ptr<ElfImage>> ElfImage::open(const std::string& path) {
  ImageReuseScope* reuse = t_reuse_scope;
  if (reuse != nullptr && !reuse->entries_.empty()) {
    struct stat known;
    if (stat(path.c_str(), &known) == 0) {
      for (const ImageReuseScope::Entry& e : reuse->entries_)
        if (e.same_file(path, known)) return e.image;
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  // Regular files only, without running a device's open (a module path may be a target's
  // symlink to /dev/watchdog) or waiting on a FIFO.
  int open_err = 0;
  const int fd = open_regular_file(path, &open_err);
  if (fd < 0) {
    if (open_err == EINVAL) return make_error(SPROV_ERR_ELF, "%s: not a regular file", path.c_str());
    return make_error(-open_err, "%s: open: %s", path.c_str(), strerror(open_err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return make_error(-err, "%s: fstat: %s", path.c_str(), strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return make_error(SPROV_ERR_ELF, "%s: not a regular file", path.c_str());
  }
  if (st.st_size < EI_NIDENT) {
    close(fd);
    return make_error(SPROV_ERR_ELF, "%s: file too small for an ELF header (%lld bytes)",
                      path.c_str(), static_cast<long long>(st.st_size));
  }
  impl->map_len = static_cast<size_t>(st.st_size);
  impl->identity = file_identity_of(st);
  // Read-only shared pages. A foreign-byte-order file gets a private
  // writable (copy-on-write) mapping instead, so that no libelf conversion can
  // fault; the file itself is never written either way.
  uint8_t ident[EI_NIDENT] = {};
  const bool ident_ok = pread(fd, ident, sizeof ident, 0) == static_cast<ssize_t>(sizeof ident);
  const uint8_t native = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? ELFDATA2MSB : ELFDATA2LSB;
  const int prot = ident_ok && ident[EI_DATA] == native ? PROT_READ : PROT_READ | PROT_WRITE;
  void* m = mmap(nullptr, impl->map_len, prot, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (m == MAP_FAILED) {
    return make_error(-map_errno, "%s: mmap: %s", path.c_str(), strerror(map_errno));
  }
  impl->map = m;
  impl->bytes = static_cast<const uint8_t*>(m);
  impl->size = impl->map_len;
  if (Status s = impl->parse(); !s) return s.error();
  std::shared_ptr<ElfImage> image(new ElfImage(std::move(impl)));
  if (reuse != nullptr) reuse->entries_.push_back(ImageReuseScope::Entry{path, st, image});
  return image;
}

Result<std::shared_ptr<ElfImage>> ElfImage::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->path = std::move(name);
  impl->owned = std::move(bytes);
  impl->bytes = impl->owned.data();
  impl->size = impl->owned.size();
  if (impl->size < EI_NIDENT) {
    return make_error(SPROV_ERR_ELF, "%s: image too small for an ELF header (%zu bytes)",
                      impl->path.c_str(), impl->size);
  }
  if (Status s = impl->parse(); !s) return s.error();
  return std::shared_ptr<ElfImage>(new ElfImage(std::move(impl)));
}

const std::string& ElfImage::path() const { return impl_->path; }
const FileIdentity* ElfImage::file_identity() const { return impl_->identity ? &*impl_->identity : nullptr; }
Arch ElfImage::arch() const { return impl_->arch; }
bool ElfImage::is_64bit() const { return impl_->is64; }
bool ElfImage::big_endian() const { return impl_->big; }
uint16_t ElfImage::elf_type() const { return impl_->type; }
uint16_t ElfImage::machine() const { return impl_->machine; }
const BuildId& ElfImage::build_id() const { return impl_->build_id; }
const std::vector<ProgramHeader>& ElfImage::program_headers() const { return impl_->phdrs; }
const uint8_t* ElfImage::file_data() const { return impl_->bytes; }
size_t ElfImage::file_size() const { return impl_->size; }
size_t ElfImage::section_count() const { return impl_->sections.size(); }
uint32_t ElfImage::section_type(size_t index) const {
  return index < impl_->sections.size() ? impl_->sections[index].type : 0;
}
uint64_t ElfImage::section_flags(size_t index) const {
  return index < impl_->sections.size() ? impl_->sections[index].flags : 0;
}
std::pair<uint64_t, uint64_t> ElfImage::section_range(size_t index) const {
  if (index >= impl_->sections.size()) return {0, 0};
  const auto& r = impl_->sections[index];
  return {r.addr, r.addr + r.size};
}
std::string_view ElfImage::section_name(size_t index) const {
  return index < impl_->sections.size() ? std::string_view(impl_->sections[index].name)
                                        : std::string_view();
}

Result<Section> ElfImage::section_at_or_error(size_t index) const {
  return impl_->materialise(index);
}

std::optional<Section> ElfImage::section_at(size_t index) const {
  auto r = impl_->materialise(index);
  if (!r.ok()) {
    set_last_error(r.error());
    return std::nullopt;
  }
  return r.value();
}

Result<Section> ElfImage::section_or_error(std::string_view name) const {
  const auto& secs = impl_->sections;
  for (size_t i = 1; i < secs.size(); i++) {
    if (secs[i].name == name) return impl_->materialise(i);
  }
  // A legacy ".zdebug_x" answers a request for ".debug_x".
  for (size_t i = 1; i < secs.size(); i++) {
    if (secs[i].canonical == name) return impl_->materialise(i);
  }
  return make_error(SPROV_ERR_NO_SECTION, "%s: no section %.*s", impl_->path.c_str(),
                    static_cast<int>(name.size()), name.data());
}

std::optional<Section> ElfImage::section(std::string_view name) const {
  auto r = section_or_error(name);
  if (!r.ok()) {
    if (r.error().code != SPROV_ERR_NO_SECTION) set_last_error(r.error());
    return std::nullopt;
  }
  return r.value();
}

std::optional<Section> ElfImage::eh_frame_hdr() const {
  for (const ProgramHeader& ph : impl_->phdrs) {
    if (ph.type != kPtGnuEhFrame) continue;
    if (ph.filesz == 0 || !impl_->file().in_range(ph.offset, ph.filesz)) break;
    Section s;
    s.name = ".eh_frame_hdr";
    s.data = impl_->bytes + ph.offset;
    s.size = ph.filesz;
    s.file_size = ph.filesz;
    s.addr = ph.vaddr;
    s.offset = ph.offset;
    s.type = SHT_PROGBITS;
    s.flags = SHF_ALLOC;
    return s;
  }
  return section(".eh_frame_hdr");
}

std::optional<Debuglink> ElfImage::debuglink() const { return impl_->debuglink; }

uint64_t ElfImage::load_bias(uint64_t map_start, uint64_t map_offset, bool executable) const {
  if (impl_->type == ET_EXEC) return 0;
  // The mapping that starts at file offset `map_offset` belongs to the PT_LOAD
  // whose offset rounded down to the target's page size equals map_offset
  // (the kernel maps p_offset - ELF_PAGEOFFSET(p_vaddr), fs/binfmt_elf.c
  // elf_map). The page size is not known here (4 KiB..64 KiB), so try, in
  // order: (1) a 4 KiB round-down match; (2) the nearest segment above
  // map_offset by less than its p_align (larger pages); (3) the segment that
  // contains map_offset (a mapping split by mprotect, e.g. RELRO). For each,
  //   bias = map_start - (p_vaddr - (p_offset - map_offset)).
  constexpr uint64_t kSmallPage = 4096;
  constexpr uint64_t kMaxPage = 64 * 1024;
  const ProgramHeader* best = nullptr;
  for (const ProgramHeader& ph : impl_->phdrs) {
    if (ph.type == PT_LOAD && (ph.offset & ~(kSmallPage - 1)) == map_offset) {
      if (best == nullptr) best = &ph;
      if (!executable || (ph.flags & PF_X) != 0) {
        best = &ph;
        break;
      }
    }
  }
  if (best == nullptr) {
    for (const ProgramHeader& ph : impl_->phdrs) {
      if (ph.type != PT_LOAD || ph.offset < map_offset) continue;
      const uint64_t slack = std::min(std::max(ph.align, kSmallPage), kMaxPage);
      if (ph.offset - map_offset >= slack) continue;
      if (best == nullptr || ph.offset < best->offset) best = &ph;
    }
  }
  if (best == nullptr) {
    for (const ProgramHeader& ph : impl_->phdrs) {
      if (ph.type != PT_LOAD || map_offset < ph.offset || map_offset - ph.offset >= ph.filesz) continue;
      if (best == nullptr || ph.offset > best->offset) best = &ph;
    }
  }
  if (best == nullptr) {
    for (const ProgramHeader& ph : impl_->phdrs) {
      if (ph.type == PT_LOAD) {
        best = &ph;
        break;
      }
    }
  }
  if (best == nullptr) return map_start - map_offset;
  return map_start - (best->vaddr - (best->offset - map_offset));
}

std::pair<uint64_t, uint64_t> ElfImage::exec_range() const {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const ProgramHeader& ph : impl_->phdrs) {
    if (ph.type != PT_LOAD || (ph.flags & PF_X) == 0) continue;
    lo = std::min(lo, ph.vaddr);
    hi = std::max(hi, ph.vaddr + ph.memsz < ph.vaddr ? UINT64_MAX : ph.vaddr + ph.memsz);
  }
  if (lo > hi) return {0, 0};
  return {lo, hi};
}

}  // namespace stackprov::elf
