// SPDX-License-Identifier: Apache-2.0
// ElfImage: maps an ELF file, parses its headers with libelf once, serves sections (decompressed lazily).
#include "elf/elf_image.hpp"

#include "core/mapped_file.hpp"
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
  std::string target_root;               ///< open(): target_root_of(path) at the time
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
  ModuleId build_id;
  std::vector<ProgramHeader> phdrs;
  std::vector<SectionRecord> sections;
  std::vector<std::unique_ptr<LazyBytes>> lazy;  // parallel to sections
  std::optional<Debuglink> debuglink;
  /// Bytes of decompressed sections held, against the file's budget (many section headers may
  /// name one small compressed blob: each is within its own ratio cap, their sum is not).
  mutable std::atomic<uint64_t> inflated{0};

  ~Impl() {
    if (map != nullptr) unmap_file(map, map_len);
  }

  detail::ByteView file() const { return detail::ByteView(bytes, size, big); }

  Error elf_error(const char* what) const {
    return make_error(SPROV_ERR_ELF, "%s: %s: %s", path.c_str(), what, elf_errmsg(-1));
  }

  Status parse();
  Status parse_sections(Elf* elf);
  void synthesise_sections();
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
  if (sections.empty()) synthesise_sections();
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

// No section header table (an image rebuilt from a process's memory, whose section headers are
// not mapped; a file stripped of them): the sections the program headers locate, as a dynamic
// linker and an unwinder find them. `.eh_frame` from PT_GNU_EH_FRAME's eh_frame_ptr, up to its
// zero terminator or the end of its segment; `.dynsym` and `.dynstr` from PT_DYNAMIC (DT_SYMTAB,
// DT_STRTAB, DT_STRSZ; the symbol count from DT_HASH's nchain or DT_GNU_HASH's last chain, else
// the distance from DT_SYMTAB to DT_STRTAB); `.dynamic` itself. Every address is link-time and is
// placed through the PT_LOAD that holds it; whatever does not lie inside the image is left out.
// Each loop is bounded by the image's size.
void ElfImage::Impl::synthesise_sections() {
  const detail::ByteView f = file();
  // File offset of link-time `vaddr` and the file bytes of its segment from there on.
  auto offset_of = [&](uint64_t vaddr, uint64_t* room) -> std::optional<uint64_t> {
    for (const ProgramHeader& p : phdrs)
      if (p.type == PT_LOAD && vaddr >= p.vaddr && vaddr - p.vaddr < p.filesz && f.in_range(p.offset, p.filesz)) {
        *room = p.filesz - (vaddr - p.vaddr);
        return p.offset + (vaddr - p.vaddr);
      }
    return std::nullopt;
  };
  std::vector<SectionRecord> out(1);  // [0]: SHT_NULL, as in a file
  auto add = [&](const char* name, uint32_t stype, uint64_t flags, uint64_t addr, uint64_t off, uint64_t len) {
    SectionRecord r;
    r.name = r.canonical = name;
    r.type = stype;
    r.flags = flags;
    r.addr = addr;
    r.offset = off;
    r.size = len;
    r.addralign = is64 ? 8 : 4;
    out.push_back(std::move(r));
    return static_cast<uint32_t>(out.size() - 1);
  };
  const uint64_t word_mask = is64 ? UINT64_MAX : UINT32_MAX;
  for (const ProgramHeader& ph : phdrs) {
    if (ph.type != kPtGnuEhFrame || ph.filesz < 8 || !f.in_range(ph.offset, ph.filesz)) continue;
    // version 1, eh_frame_ptr_enc, fde_count_enc, table_enc, then eh_frame_ptr (LSB 5.0 "eh_frame_hdr").
    const uint8_t enc = bytes[ph.offset + 1];
    if (bytes[ph.offset] != 1) break;
    std::optional<uint64_t> v;
    switch (enc & 0x0f) {
      case 0x00: v = f.word(ph.offset + 4, is64); break;  // DW_EH_PE_absptr
      case 0x03: v = f.u32(ph.offset + 4); break;         // udata4
      case 0x0b:                                          // sdata4
        if (auto u = f.u32(ph.offset + 4)) v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(*u)));
        break;
      case 0x04: case 0x0c: v = f.u64(ph.offset + 4); break;  // udata8, sdata8
      default: break;
    }
    if (!v || enc == 0xff || (enc & 0x80) != 0) break;  // omitted, or indirect (not in an .eh_frame_hdr)
    if ((enc & 0x70) == 0x10) *v += ph.vaddr + 4;  // pcrel: from the field
    else if ((enc & 0x70) == 0x30) *v += ph.vaddr;  // datarel: from .eh_frame_hdr
    else if ((enc & 0x70) != 0) break;
    *v &= word_mask;
    uint64_t room = 0;
    auto off = offset_of(*v, &room);
    if (!off) break;
    uint64_t pos = 0;  // CIEs and FDEs up to the zero terminator; an entry running past the segment ends it
    while (pos + 4 <= room) {
      const uint32_t len = *f.u32(*off + pos);
      if (len == 0) {
        pos += 4;
        break;
      }
      uint64_t total = 4 + static_cast<uint64_t>(len);
      if (len == 0xffffffffu) {
        auto len64 = f.u64(*off + pos + 4);
        if (!len64 || *len64 > room) break;
        total = 12 + *len64;
      }
      if (total > room - pos) break;
      pos += total;
    }
    if (pos > 0) add(".eh_frame", SHT_PROGBITS, SHF_ALLOC, *v, *off, pos);
    break;
  }
  for (const ProgramHeader& ph : phdrs) {
    if (ph.type != PT_DYNAMIC || ph.filesz == 0 || !f.in_range(ph.offset, ph.filesz)) continue;
    const uint64_t dent = is64 ? 16 : 8, sent = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
    std::optional<uint64_t> symtab, strtab, strsz, hash, gnu_hash;
    const uint64_t end = ph.offset + std::min<uint64_t>(ph.filesz, dent * 4096);  // real tables: < 100 entries
    for (uint64_t o = ph.offset; o + dent <= end; o += dent) {
      const uint64_t tag = *f.word(o, is64), val = *f.word(o + dent / 2, is64);
      if (tag == DT_NULL) break;
      if (tag == DT_SYMTAB) symtab = val;
      else if (tag == DT_STRTAB) strtab = val;
      else if (tag == DT_STRSZ) strsz = val;
      else if (tag == DT_HASH) hash = val;
      else if (tag == DT_GNU_HASH) gnu_hash = val;
    }
    uint64_t str_room = 0, sym_room = 0;
    const auto str_off = strtab ? offset_of(*strtab, &str_room) : std::nullopt;
    const auto sym_off = symtab ? offset_of(*symtab, &sym_room) : std::nullopt;
    if (str_off && sym_off && strsz && *strsz > 0 && *strsz <= str_room) {
      uint64_t count = 0;
      uint64_t room = 0;
      if (auto h = hash ? offset_of(*hash, &room) : std::nullopt; h && room >= 8) {
        count = *f.u32(*h + 4);  // nbucket, nchain: one chain entry per symbol
      } else if (auto g = gnu_hash ? offset_of(*gnu_hash, &room) : std::nullopt; g && room >= 16) {
        // nbuckets, symoffset, bloom_size, bloom_shift, bloom[bloom_size] (words), buckets, chains:
        // the highest bucket's chain runs to the entry with bit 0 set (the last symbol).
        const uint64_t nb = *f.u32(*g), symoff = *f.u32(*g + 4), bloom = *f.u32(*g + 8);
        const uint64_t buckets = 16 + bloom * (is64 ? 8 : 4);
        if (bloom <= room / 8 && nb <= (room - std::min(room, buckets)) / 4) {
          uint64_t top = 0;
          for (uint64_t i = 0; i < nb; i++) top = std::max<uint64_t>(top, *f.u32(*g + buckets + 4 * i));
          if (top < symoff) {
            count = symoff;
          } else {
            const uint64_t chains = buckets + 4 * nb;
            for (uint64_t i = top; chains + 4 * (i - symoff) + 4 <= room; i++)
              if (*f.u32(*g + chains + 4 * (i - symoff)) & 1) {
                count = i + 1;
                break;
              }
          }
        }
      } else if (*strtab > *symtab) {
        count = (*strtab - *symtab) / sent;
      }
      count = std::min(count, sym_room / sent);
      if (count > 0) {
        const uint32_t str_index = add(".dynstr", SHT_STRTAB, SHF_ALLOC, *strtab, *str_off, *strsz);
        const uint32_t sym_index = add(".dynsym", SHT_DYNSYM, SHF_ALLOC, *symtab, *sym_off, count * sent);
        out[sym_index].link = str_index;
        out[sym_index].info = 1;
        out[sym_index].entsize = sent;
      }
    }
    add(".dynamic", SHT_DYNAMIC, SHF_ALLOC | SHF_WRITE, ph.vaddr, ph.offset, ph.filesz);
    out.back().entsize = dent;
    break;
  }
  if (out.size() == 1) return;
  sections = std::move(out);
  lazy.clear();
  for (size_t i = 0; i < sections.size(); i++) lazy.push_back(std::make_unique<LazyBytes>());
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
    if (stat_path(path, &known) == 0) {
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
  // A file the target controls may be any size (a sparse 4 TiB library keeps its inode): bounded.
  if (Status lim = check_file_size(path, static_cast<uint64_t>(st.st_size)); !lim) {
    close(fd);
    return lim.error();
  }
  impl->map_len = static_cast<size_t>(st.st_size);
  impl->identity = file_identity_of(st);
  impl->target_root = target_root_of(path);  // decided now, while the process is there to ask
  // Read-only shared pages. A foreign-byte-order file gets a private
  // writable (copy-on-write) mapping instead, so that no libelf conversion can
  // fault; the file itself is never written either way.
  uint8_t ident[EI_NIDENT] = {};
  const bool ident_ok = pread(fd, ident, sizeof ident, 0) == static_cast<ssize_t>(sizeof ident);
  const uint8_t native = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? ELFDATA2MSB : ELFDATA2LSB;
  // Guarded (core/mapped_file.hpp): a file another user truncates while it is mapped reads as
  // zeros past its new end and file_changed() says so, instead of a SIGBUS killing the process.
  auto mapped = map_file(fd, impl->map_len, !(ident_ok && ident[EI_DATA] == native), path);
  close(fd);
  if (!mapped) return std::move(mapped).error();
  void* m = mapped.value();
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
const std::string& ElfImage::target_root() const { return impl_->target_root; }
bool ElfImage::file_changed() const { return impl_->map != nullptr && file_map_faulted(impl_->map); }
const FileIdentity* ElfImage::file_identity() const { return impl_->identity ? &*impl_->identity : nullptr; }
Arch ElfImage::arch() const { return impl_->arch; }
bool ElfImage::is_64bit() const { return impl_->is64; }
bool ElfImage::big_endian() const { return impl_->big; }
uint16_t ElfImage::elf_type() const { return impl_->type; }
uint16_t ElfImage::machine() const { return impl_->machine; }
const ModuleId& ElfImage::build_id() const { return impl_->build_id; }
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

bool ElfImage::is_program() const {
  const Impl& m = *impl_;
  if (m.type == ET_EXEC) return true;
  if (m.type != ET_DYN) return false;
  bool interp = false, soname = false;
  const detail::ByteView f = m.file();
  for (const ProgramHeader& ph : m.phdrs) {
    if (ph.type == PT_INTERP) interp = true;
    if (ph.type != PT_DYNAMIC || !f.in_range(ph.offset, ph.filesz)) continue;
    const uint64_t dent = m.is64 ? 16 : 8;
    const uint64_t end = ph.offset + std::min<uint64_t>(ph.filesz, dent * 4096);  // real tables: < 100 entries
    for (uint64_t o = ph.offset; o + dent <= end; o += dent) {
      const uint64_t tag = *f.word(o, m.is64), val = *f.word(o + dent / 2, m.is64);
      if (tag == DT_NULL) break;
      if (tag == DT_FLAGS_1 && (val & DF_1_PIE) != 0) return true;
      if (tag == DT_SONAME) soname = true;
    }
  }
  return interp && !soname;
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
