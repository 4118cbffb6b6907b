// SPDX-License-Identifier: Apache-2.0
// MachoObject: a checked 64-bit Mach-O and fat-file reader as an object::ObjectImage, and Mach-O's registry entry.
#include "macho/macho_object.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/leb128.hpp"
#include "core/mapped_file.hpp"
#include "core/module_cache.hpp"
#include "core/open_file.hpp"
#include "macho/macho_bytes.hpp"

namespace stackprov::macho {

namespace {

constexpr size_t kHeaderSize = 32;          // mach_header_64
constexpr size_t kSegmentCmdSize = 72;      // segment_command_64
constexpr size_t kSectionSize = 80;         // section_64
constexpr size_t kNlistSize = 16;           // nlist_64
constexpr size_t kFatArchSize = 20;         // fat_arch
constexpr size_t kFatArch64Size = 32;       // fat_arch_64
constexpr uint64_t kExportKindMask = 0x3;   // EXPORT_SYMBOL_FLAGS_KIND_MASK
constexpr uint64_t kExportKindRegular = 0;  // EXPORT_SYMBOL_FLAGS_KIND_REGULAR
constexpr uint64_t kExportReexport = 0x08;  // EXPORT_SYMBOL_FLAGS_REEXPORT
constexpr uint64_t kExportStubAndResolver = 0x10;  // EXPORT_SYMBOL_FLAGS_STUB_AND_RESOLVER

Arch arch_of_cputype(uint32_t cputype) {
  switch (cputype) {
    case kCpuTypeX86_64: return Arch::kX86_64;
    case kCpuTypeArm64: return Arch::kArm64;
    default: return Arch::kUnknown;
  }
}

Arch host_arch() {
#if defined(__aarch64__)
  return Arch::kArm64;
#else
  return Arch::kX86_64;
#endif
}

std::string name16(const uint8_t* p) {
  return std::string(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), 16));
}

bool sniff_macho(std::span<const uint8_t> head) {
  if (head.size() < 8) return false;
  const uint32_t le = le32(head.data()), be = be32(head.data());
  // 32-bit and byte-swapped Mach-O are claimed too, so that their error says what they are.
  if (le == kMhMagic64 || le == kMhMagic32 || be == kMhMagic64 || be == kMhMagic32) return true;
  const uint32_t n = be32(head.data() + 4);
  return (be == kFatMagic || be == kFatMagic64) && n >= 1 && n <= kMaxFatArchs;
}

Result<std::shared_ptr<object::ObjectImage>> open_macho(const std::string& path) {
  auto o = MachoObject::open(path);
  if (!o.ok()) return std::move(o).error();
  return std::shared_ptr<object::ObjectImage>(o.value());
}

Result<std::shared_ptr<object::ObjectImage>> macho_from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto o = MachoObject::from_bytes(std::move(bytes), std::move(name));
  if (!o.ok()) return std::move(o).error();
  return std::shared_ptr<object::ObjectImage>(o.value());
}

const char* arch_label(Arch a) {
  switch (a) {
    case Arch::kX86_64: return "x86_64";
    case Arch::kArm64: return "arm64";
    default: return "unknown";
  }
}

/// The file at `path`, mapped read-only and guarded, with its identity (core/mapped_file.hpp).
using Mapped = MappedRegularFile;

Result<Mapped> map_path(const std::string& path) {
  auto m = map_regular_file(path);
  if (!m) return std::move(m).error();
  if (m.value().size < kHeaderSize) {
    if (m.value().base != nullptr) unmap_file(m.value().base, m.value().size);
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: %lld bytes are too few for a Mach-O file", path.c_str(),
                      static_cast<long long>(m.value().size));
  }
  return m;
}


}  // namespace

namespace {

/// A fat file's slice by UUID (when given) or architecture; a file without a slice of that
/// architecture is opened as open() opens it, so that the caller's architecture check names both.
Result<std::shared_ptr<object::ObjectImage>> open_macho_matching(const std::string& path, Arch arch, const ModuleId& id) {
  SliceChoice choice;
  choice.arch = arch;
  if (id.kind == IdKind::kMachoUuid) choice.uuid = id;
  auto o = MachoObject::open(path, choice);
  if (!o.ok() && o.error().code == SPROV_ERR_NOT_FOUND) return open_macho(path);
  if (!o.ok()) return std::move(o).error();
  return std::shared_ptr<object::ObjectImage>(o.value());
}

}  // namespace

const object::Format kMachoFormat{"macho", sniff_macho, open_macho, macho_from_bytes, open_macho_matching};

ModuleId uuid_of_header(std::span<const uint8_t> b) {
  if (b.size() < kHeaderSize || le32(b.data()) != kMhMagic64) return {};
  const uint32_t ncmds = le32(b.data() + 16), sizeofcmds = le32(b.data() + 20);
  if (ncmds > kMaxLoadCommands || sizeofcmds > b.size() - kHeaderSize) return {};
  const uint64_t end = kHeaderSize + uint64_t{sizeofcmds};
  uint64_t off = kHeaderSize;
  for (uint32_t i = 0; i < ncmds && off + 8 <= end; i++) {
    const uint32_t cmd = le32(b.data() + off), size = le32(b.data() + off + 4);
    if (size < 8 || size > end - off) return {};
    if (cmd == kLcUuid && size >= 24) return ModuleId::from_bytes(b.data() + off + 8, 16, IdKind::kMachoUuid);
    off += size;
  }
  return {};
}

std::string uuid_string(const ModuleId& id) {
  if (id.kind != IdKind::kMachoUuid || id.len != 16) return {};
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[id.bytes[i] >> 4];
    out += kHex[id.bytes[i] & 15];
  }
  return out;
}

Result<ModuleId> uuid_from_string(std::string_view text) {
  std::string digits;
  bool ok = text.size() == 32 || text.size() == 36;
  for (size_t i = 0; ok && i < text.size(); i++) {
    if (text.size() == 36 && (i == 8 || i == 13 || i == 18 || i == 23)) ok = text[i] == '-';
    else if (std::isxdigit(static_cast<unsigned char>(text[i]))) digits += text[i];
    else ok = false;
  }
  const ModuleId id = ok ? ModuleId::from_hex(digits, IdKind::kMachoUuid) : ModuleId{};
  if (id.len != 16)
    return make_error(SPROV_ERR_INVALID_ARG, "invalid macho-uuid '%.*s' (expected a UUID: 32 hex digits, optionally "
                      "8-4-4-4-12 with dashes)", static_cast<int>(std::min<size_t>(text.size(), 140)), text.data());
  return id;
}

Result<std::vector<Slice>> read_slices(std::span<const uint8_t> bytes, const std::string& name) {
  const char* p = name.c_str();
  if (bytes.size() < 8)
    return make_error(SPROV_ERR_TRUNCATED, "%s: %zu bytes are too few for a Mach-O file", p, bytes.size());
  const uint32_t magic = be32(bytes.data());
  if (magic != kFatMagic && magic != kFatMagic64) {
    // A thin file: its header is checked when the slice is parsed.
    Slice s;
    s.size = bytes.size();
    if (bytes.size() >= 8) {
      s.cputype = le32(bytes.data() + 4);
      s.cpusubtype = bytes.size() >= 12 ? le32(bytes.data() + 8) : 0;
      s.arch = arch_of_cputype(s.cputype);
    }
    return std::vector<Slice>{s};
  }
  const bool wide = magic == kFatMagic64;
  const uint32_t n = be32(bytes.data() + 4);
  if (n == 0 || n > kMaxFatArchs)
    return make_error(SPROV_ERR_LIMIT, "%s: fat header declares %u architectures (1 to %u are accepted)", p, n,
                      kMaxFatArchs);
  const size_t entry = wide ? kFatArch64Size : kFatArchSize;
  const uint64_t header_end = 8 + uint64_t{n} * entry;
  if (header_end > bytes.size())
    return make_error(SPROV_ERR_TRUNCATED, "%s: fat header of %u architectures (%" PRIu64 " bytes) is beyond the file (%zu bytes)",
                      p, n, header_end, bytes.size());
  std::vector<Slice> out;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* a = bytes.data() + 8 + uint64_t{i} * entry;
    Slice s;
    s.cputype = be32(a);
    s.cpusubtype = be32(a + 4);
    s.offset = wide ? be64(a + 8) : be32(a + 8);
    s.size = wide ? be64(a + 16) : be32(a + 12);
    s.align = wide ? be32(a + 24) : be32(a + 16);
    s.arch = arch_of_cputype(s.cputype);
    if (s.offset < header_end || s.offset > bytes.size() || s.size > bytes.size() - s.offset)
      return make_error(SPROV_ERR_TRUNCATED, "%s: fat architecture %u's slice 0x%" PRIx64 "+0x%" PRIx64
                        " is outside the file (0x%zx bytes) or overlaps the fat header", p, i, s.offset, s.size, bytes.size());
    if (s.size < kHeaderSize)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: fat architecture %u's slice has %" PRIu64 " bytes, too few for a Mach-O header",
                        p, i, s.size);
    for (size_t k = 0; k < out.size(); k++)
      if (s.offset < out[k].offset + out[k].size && out[k].offset < s.offset + s.size)
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: fat architectures %zu and %u overlap (0x%" PRIx64 " and 0x%" PRIx64 ")", p, k,
                          i, out[k].offset, s.offset);
    out.push_back(s);
  }
  return out;
}

Result<std::vector<Slice>> list_slices(const std::string& path) {
  auto m = map_path(path);
  if (!m.ok()) return std::move(m).error();
  auto r = read_slices({static_cast<const uint8_t*>(m->base), m->size}, path);
  unmap_file(m->base, m->size);
  return r;
}

MachoObject::~MachoObject() {
  if (map_ != nullptr) unmap_file(map_, file_size_);
}

Result<std::shared_ptr<MachoObject>> MachoObject::open(const std::string& path, const SliceChoice& choice) {
  std::shared_ptr<MachoObject> o(new MachoObject());
  o->path_ = path;
  auto m = map_path(path);
  if (!m.ok()) return std::move(m).error();
  o->map_ = m->base;
  o->file_ = static_cast<const uint8_t*>(m->base);
  o->file_size_ = m->size;
  o->identity_ = m->identity;
  o->target_root_ = target_root_of(path);
  if (Status s = o->select_slice(choice); !s) return s.error();
  if (Status s = o->parse(); !s) return s.error();
  return o;
}

Result<std::shared_ptr<MachoObject>> MachoObject::from_bytes(std::vector<uint8_t> bytes, std::string name,
                                                             const SliceChoice& choice) {
  std::shared_ptr<MachoObject> o(new MachoObject());
  o->path_ = std::move(name);
  o->owned_ = std::move(bytes);
  o->file_ = o->owned_.data();
  o->file_size_ = o->owned_.size();
  if (Status s = o->select_slice(choice); !s) return s.error();
  if (Status s = o->parse(); !s) return s.error();
  return o;
}

bool MachoObject::file_changed() const { return map_ != nullptr && file_map_faulted(map_); }

Status MachoObject::select_slice(const SliceChoice& choice) {
  auto sl = read_slices({file_, file_size_}, path_);
  if (!sl.ok()) return sl.error();
  slices_ = std::move(sl).value();
  const Slice* pick = nullptr;
  if (!choice.uuid.empty()) {
    // By UUID: each slice's LC_UUID (a slice whose load commands are malformed has none).
    std::string seen;
    for (const Slice& s : slices_) {
      const ModuleId u = uuid_of_header({file_ + s.offset, static_cast<size_t>(s.size)});
      if (u == choice.uuid) {
        pick = &s;
        break;
      }
      seen += (seen.empty() ? "" : ", ") + std::string(arch_label(s.arch)) + " " +
              (u.empty() ? std::string("no UUID") : uuid_string(u));
    }
    if (pick == nullptr)
      return Error{SPROV_ERR_BUILD_ID_MISMATCH, path_ + ": no slice has UUID " + uuid_string(choice.uuid) + " (it has " +
                                                   (seen.empty() ? std::string("none") : seen) + ")"};
  } else {
    const Arch want = choice.arch.value_or(host_arch());
    for (const Slice& s : slices_)
      if (s.arch == want) {
        pick = &s;
        break;
      }
    if (pick == nullptr && choice.arch)
      return make_error(SPROV_ERR_NOT_FOUND, "%s: no %s slice among its %zu", path_.c_str(), arch_label(want), slices_.size());
    if (pick == nullptr) pick = &slices_.front();
  }
  slice_ = *pick;
  data_ = file_ + slice_.offset;
  size_ = static_cast<size_t>(slice_.size);
  return {};
}

Status MachoObject::parse() {
  const char* p = path_.c_str();
  if (size_ < kHeaderSize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: %zu bytes are too few for a Mach-O header", p, size_);
  const uint32_t magic = le32(data_);
  if (magic == kMhMagic32 || be32(data_) == kMhMagic32)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: 32-bit Mach-O (magic 0x%x) is not supported", p, magic);
  if (be32(data_) == kMhMagic64)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: big-endian Mach-O is not supported", p);
  if (magic != kMhMagic64)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: not a Mach-O file: magic 0x%x at slice offset 0x%" PRIx64, p, magic,
                      slice_.offset);
  const uint32_t cputype = le32(data_ + 4);
  slice_.cputype = cputype;
  slice_.cpusubtype = le32(data_ + 8);
  slice_.arch = arch_of_cputype(cputype);
  if (slice_.arch == Arch::kUnknown)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: CPU type 0x%x not supported (x86_64 0x%x and arm64 0x%x are)", p, cputype,
                      kCpuTypeX86_64, kCpuTypeArm64);
  filetype_ = le32(data_ + 12);
  const uint32_t ncmds = le32(data_ + 16), sizeofcmds = le32(data_ + 20);
  flags_ = le32(data_ + 24);
  if (ncmds > kMaxLoadCommands)
    return make_error(SPROV_ERR_LIMIT, "%s: %u load commands (at most %u are accepted)", p, ncmds, kMaxLoadCommands);
  if (sizeofcmds > size_ - kHeaderSize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: load commands' size 0x%x is beyond the file (0x%zx bytes)", p, sizeofcmds,
                      size_);
  const uint64_t end = kHeaderSize + uint64_t{sizeofcmds};
  uint64_t off = kHeaderSize;
  bool have_uuid = false;
  struct Linkedit {
    uint64_t off = 0, size = 0;
    uint32_t index = 0;
    bool set = false;
  } exports, starts;
  for (uint32_t i = 0; i < ncmds; i++) {
    if (off + 8 > end)
      return make_error(SPROV_ERR_TRUNCATED, "%s: load command %u at 0x%" PRIx64 " is beyond sizeofcmds (0x%x)", p, i, off,
                        sizeofcmds);
    LoadCommand lc{le32(data_ + off), le32(data_ + off + 4), off};
    if (lc.size < 8 || lc.size % 8 != 0 || lc.size > end - off)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: load command %u (cmd 0x%x) has size 0x%x: not a multiple of 8 in [8, 0x%" PRIx64
                        "]", p, i, lc.cmd, lc.size, end - off);
    commands_.push_back(lc);
    const uint8_t* c = data_ + off;
    auto need = [&](uint32_t min) -> Status {
      if (lc.size < min)
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: load command %u (cmd 0x%x) has size 0x%x, less than its 0x%x bytes", p, i,
                          lc.cmd, lc.size, min);
      return {};
    };
    auto linkedit = [&](uint64_t o, uint64_t n, const char* what) -> Status {
      if (o > size_ || n > size_ - o)
        return make_error(SPROV_ERR_TRUNCATED, "%s: load command %u's %s 0x%" PRIx64 "+0x%" PRIx64 " is beyond the file (0x%zx bytes)",
                          p, i, what, o, n, size_);
      return {};
    };
    switch (lc.cmd) {
      case kLcSegment:
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: load command %u is a 32-bit LC_SEGMENT in a 64-bit file", p, i);
      case kLcSegment64:
        if (Status s = need(kSegmentCmdSize); !s) return s;
        if (Status s = parse_segment(lc, i); !s) return s;
        break;
      case kLcUuid:
        if (Status s = need(24); !s) return s;
        if (have_uuid) return make_error(SPROV_ERR_BAD_FORMAT, "%s: load command %u is a second LC_UUID", p, i);
        have_uuid = true;
        id_ = ModuleId::from_bytes(c + 8, 16, IdKind::kMachoUuid);
        break;
      case kLcSymtab:
        if (Status s = need(24); !s) return s;
        if (Status s = parse_symtab(c, i); !s) return s;
        break;
      case kLcDyldInfo:
      case kLcDyldInfoOnly:
        if (Status s = need(48); !s) return s;
        if (le32(c + 44) != 0) {
          exports = {le32(c + 40), le32(c + 44), i, true};
          if (Status s = linkedit(exports.off, exports.size, "export trie"); !s) return s;
        }
        break;
      case kLcDyldExportsTrie:
        if (Status s = need(16); !s) return s;
        exports = {le32(c + 8), le32(c + 12), i, true};
        if (Status s = linkedit(exports.off, exports.size, "export trie"); !s) return s;
        break;
      case kLcFunctionStarts:
        if (Status s = need(16); !s) return s;
        starts = {le32(c + 8), le32(c + 12), i, true};
        if (Status s = linkedit(starts.off, starts.size, "function starts"); !s) return s;
        break;
      default: break;
    }
    off += lc.size;
  }
  // The image's base: __TEXT, else the segment that maps the header.
  for (const Segment& s : segments_)
    if (s.name == "__TEXT") {
      text_vmaddr_ = s.vmaddr;
      text_end_ = s.vmaddr + s.vmsize;
      break;
    }
  if (text_end_ == 0)
    for (const Segment& s : segments_)
      if (s.fileoff == 0 && s.filesize != 0) {
        text_vmaddr_ = s.vmaddr;
        text_end_ = s.vmaddr + s.vmsize;
        break;
      }
  if (exports.set && exports.size != 0)
    if (Status s = parse_exports(exports.off, exports.size, exports.index); !s) return s;
  if (starts.set && starts.size != 0)
    if (Status s = parse_function_starts(starts.off, starts.size, starts.index); !s) return s;
  build_functions();
  return {};
}

Status MachoObject::parse_segment(const LoadCommand& lc, uint32_t index) {
  const char* p = path_.c_str();
  const uint8_t* c = data_ + lc.offset;
  Segment seg;
  seg.name = name16(c + 8);
  seg.vmaddr = le64(c + 24);
  seg.vmsize = le64(c + 32);
  seg.fileoff = le64(c + 40);
  seg.filesize = le64(c + 48);
  seg.maxprot = le32(c + 56);
  seg.initprot = le32(c + 60);
  seg.nsects = le32(c + 64);
  seg.flags = le32(c + 68);
  if (seg.vmaddr + seg.vmsize < seg.vmaddr)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: segment %s (load command %u) at 0x%" PRIx64 "+0x%" PRIx64 " wraps", p,
                      seg.name.c_str(), index, seg.vmaddr, seg.vmsize);
  if (seg.filesize != 0 && (seg.fileoff > size_ || seg.filesize > size_ - seg.fileoff))
    return make_error(SPROV_ERR_TRUNCATED, "%s: segment %s's file range 0x%" PRIx64 "+0x%" PRIx64 " is beyond the file (0x%zx bytes)",
                      p, seg.name.c_str(), seg.fileoff, seg.filesize, size_);
  if (seg.nsects > (lc.size - kSegmentCmdSize) / kSectionSize)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: segment %s declares %u sections, its load command (0x%x bytes) holds %zu", p,
                      seg.name.c_str(), seg.nsects, lc.size, (lc.size - kSegmentCmdSize) / kSectionSize);
  if (sections_.size() + seg.nsects > kMaxSections)
    return make_error(SPROV_ERR_LIMIT, "%s: more than %u sections", p, kMaxSections);
  for (uint32_t k = 0; k < seg.nsects; k++) {
    const uint8_t* h = c + kSegmentCmdSize + uint64_t{k} * kSectionSize;
    Section s;
    s.sectname = name16(h);
    s.segname = name16(h + 16);
    s.addr = le64(h + 32);
    s.size = le64(h + 40);
    s.offset = le32(h + 48);
    s.align = le32(h + 52);
    s.reloff = le32(h + 56);
    s.nreloc = le32(h + 60);
    s.flags = le32(h + 64);
    if (s.addr + s.size < s.addr)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: section %s,%s at 0x%" PRIx64 "+0x%" PRIx64 " wraps", p, s.segname.c_str(),
                        s.sectname.c_str(), s.addr, s.size);
    const uint32_t type = s.flags & kSectionTypeMask;
    const bool zerofill = type == kSZerofill || type == kSGbZerofill || type == kSThreadLocalZerofill;
    s.has_bytes = !zerofill && s.size != 0 && s.offset != 0 && seg.filesize != 0;
    if (s.has_bytes && (s.offset > size_ || s.size > size_ - s.offset))
      return make_error(SPROV_ERR_TRUNCATED, "%s: section %s,%s's bytes 0x%x+0x%" PRIx64 " are beyond the file (0x%zx bytes)", p,
                        s.segname.c_str(), s.sectname.c_str(), s.offset, s.size, size_);
    sections_.push_back(std::move(s));
  }
  segments_.push_back(std::move(seg));
  return {};
}

Status MachoObject::parse_symtab(const uint8_t* c, uint32_t index) {
  const char* p = path_.c_str();
  const uint64_t symoff = le32(c + 8), nsyms = le32(c + 12), stroff = le32(c + 16), strsize = le32(c + 20);
  if (symoff > size_ || nsyms > (size_ - symoff) / kNlistSize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: LC_SYMTAB (load command %u): %" PRIu64 " symbols at 0x%" PRIx64
                      " are beyond the file (0x%zx bytes)", p, index, nsyms, symoff, size_);
  if (stroff > size_ || strsize > size_ - stroff)
    return make_error(SPROV_ERR_TRUNCATED, "%s: LC_SYMTAB (load command %u): string table 0x%" PRIx64 "+0x%" PRIx64
                      " is beyond the file (0x%zx bytes)", p, index, stroff, strsize, size_);
  const char* strtab = reinterpret_cast<const char*>(data_ + stroff);
  // Where each name ends: the first NUL at or after its offset, from one pass over the table (a
  // strnlen per symbol would be quadratic for many symbols naming one long string).
  std::vector<uint32_t> nuls;
  for (const char* z = strtab; (z = static_cast<const char*>(memchr(z, 0, static_cast<size_t>(strtab + strsize - z)))) != nullptr; z++)
    nuls.push_back(static_cast<uint32_t>(z - strtab));
  // A name: "" with why in *err when its offset is outside the table or it has no NUL before the end.
  auto name_at = [&](uint64_t i, uint32_t strx, std::string* err) -> std::string_view {
    if (strx >= strsize) {
      *err = make_error(SPROV_ERR_BAD_FORMAT, "%s: symbol %" PRIu64 "'s name offset 0x%x is outside the string table (0x%" PRIx64
                        " bytes)", p, i, strx, strsize).message;
      return {};
    }
    auto nul = std::lower_bound(nuls.begin(), nuls.end(), strx);
    if (nul == nuls.end()) {
      *err = make_error(SPROV_ERR_BAD_FORMAT, "%s: symbol %" PRIu64 "'s name at 0x%x runs past the string table's end", p, i,
                        strx).message;
      return {};
    }
    return std::string_view(strtab + strx, *nul - strx);
  };
  DebugMapObject* unit = nullptr;        // the N_OSO object whose entries follow, if any
  std::optional<DebugMapSymbol> pending;  // an N_FUN start waiting for its size
  auto flush = [&] {
    if (pending && unit != nullptr) unit->symbols.push_back(*pending);
    pending.reset();
  };
  for (uint64_t i = 0; i < nsyms; i++) {
    const uint8_t* e = data_ + symoff + i * kNlistSize;
    NlistSymbol s;
    const uint32_t strx = le32(e);
    s.type = e[4];
    s.sect = e[5];
    s.desc = le16(e + 6);
    s.value = le64(e + 8);
    std::string err;
    if ((s.type & kNStab) != 0) {  // STABS: the debug map, not symbols
      if (!debug_map_error_.empty()) continue;
      const std::string_view name = name_at(i, strx, &err);
      if (!err.empty()) {
        debug_map_error_ = "debug map: " + err;
        debug_map_.clear();
        unit = nullptr;
        pending.reset();
        continue;
      }
      switch (s.type) {
        case kNOso:
          flush();
          debug_map_.push_back({name, s.value, {}});
          unit = &debug_map_.back();
          break;
        case kNSo:
          if (name.empty()) {  // the unit's end
            flush();
            unit = nullptr;
          }
          break;
        case kNFun:
          if (!name.empty()) {
            flush();
            pending = DebugMapSymbol{name, s.value, 0, true};
          } else if (pending) {
            pending->size = s.value;
            flush();
          }
          break;
        case kNStsym:  // a pending N_FUN keeps waiting for its size (dsymutil's reading)
          if (unit != nullptr) unit->symbols.push_back({name, s.value, 0, false});
          break;
        default:
          break;
      }
      continue;
    }
    s.name = name_at(i, strx, &err);
    if (!err.empty()) return make_error(SPROV_ERR_BAD_FORMAT, "%s", err.c_str());
    nlist_.push_back(s);
  }
  flush();
  return {};
}

Status MachoObject::parse_exports(uint64_t off, uint64_t size, uint32_t index) {
  // Each node: ULEB terminal size; when non-zero the terminal (ULEB flags, then ULEB ordinal and a
  // name for a re-export, else ULEB address and, for a stub with resolver, a ULEB resolver); then
  // a child count byte and, per child, a NUL-terminated edge label and a ULEB node offset.
  const char* p = path_.c_str();
  const uint8_t* base = data_ + off;
  const uint8_t* end = base + size;
  struct Pending {
    uint64_t node;
    std::string prefix;
    uint32_t depth;
  };
  std::vector<Pending> todo{{0, std::string(), 0}};
  std::unordered_set<uint64_t> seen;
  // Names share their prefixes in the trie but not in memory: a small hostile trie can spell many
  // long names (255 children under a 4 KiB edge, at each level), so their total is bounded.
  uint64_t name_bytes = 0;
  auto bad = [&](const char* what, uint64_t node) {
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: export trie (load command %u): %s at node 0x%" PRIx64, p, index, what, node);
  };
  while (!todo.empty()) {
    Pending cur = std::move(todo.back());
    todo.pop_back();
    if (cur.node >= size) return bad("node offset beyond the trie", cur.node);
    if (!seen.insert(cur.node).second) return bad("node reached twice (a loop)", cur.node);
    const uint8_t* q = base + cur.node;
    uint64_t term = 0;
    q = read_uleb128(q, end, &term);
    if (q == nullptr) return bad("truncated terminal size", cur.node);
    if (term > static_cast<uint64_t>(end - q)) return bad("terminal beyond the trie", cur.node);
    const uint8_t* children = q + term;
    if (term != 0) {
      ExportSymbol e;
      q = read_uleb128(q, children, &e.flags);
      if (q == nullptr) return bad("truncated flags", cur.node);
      if ((e.flags & kExportReexport) != 0) {
        uint64_t ordinal = 0;
        q = read_uleb128(q, children, &ordinal);
        if (q == nullptr || memchr(q, 0, static_cast<size_t>(children - q)) == nullptr)
          return bad("truncated re-export", cur.node);
        e.reexport = true;
      } else {
        uint64_t a = 0;
        q = read_uleb128(q, children, &a);
        if (q == nullptr) return bad("truncated address", cur.node);
        if ((e.flags & kExportStubAndResolver) != 0) {
          uint64_t resolver = 0;
          if (read_uleb128(q, children, &resolver) == nullptr) return bad("truncated resolver", cur.node);
        }
        // Absolute symbols hold a value, the others an offset from the image's base.
        e.addr = (e.flags & kExportKindMask) == 2 ? a : text_vmaddr_ + a;
      }
      export_names_.push_back(cur.prefix);
      e.name = export_names_.back();
      exports_.push_back(e);
    }
    if (children >= end) return bad("child count beyond the trie", cur.node);
    const uint8_t* k = children;
    const unsigned nchild = *k++;
    if (nchild != 0 && cur.depth + 1 > kMaxExportDepth) return bad("deeper than 128 nodes", cur.node);
    for (unsigned i = 0; i < nchild; i++) {
      // Searched no further than the longest name allowed: the scans stay within the names' budget.
      const size_t left = static_cast<size_t>(end - k), room = kMaxExportName - cur.prefix.size() + 1;
      const void* nul = memchr(k, 0, std::min(left, room));
      if (nul == nullptr)
        return bad(room < left ? "exported name longer than 4096 bytes" : "edge label runs past the trie", cur.node);
      const size_t len = static_cast<size_t>(static_cast<const uint8_t*>(nul) - k);
      std::string name = cur.prefix;
      name.append(reinterpret_cast<const char*>(k), len);
      name_bytes += name.size();
      if (name_bytes > kMaxExportNameBytes) return bad("names longer than 64 MiB in all", cur.node);
      k += len + 1;
      uint64_t child = 0;
      k = read_uleb128(k, end, &child);
      if (k == nullptr) return bad("truncated child offset", cur.node);
      todo.push_back({child, std::move(name), cur.depth + 1});
    }
  }
  std::sort(exports_.begin(), exports_.end(), [](const ExportSymbol& a, const ExportSymbol& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.name < b.name;
  });
  return {};
}

Status MachoObject::parse_function_starts(uint64_t off, uint64_t size, uint32_t index) {
  // ULEB deltas, the first from the image's base; a 0 delta (the padding) ends the list.
  const uint8_t* q = data_ + off;
  const uint8_t* end = q + size;
  uint64_t addr = text_vmaddr_;
  while (q < end) {
    uint64_t d = 0;
    q = read_uleb128(q, end, &d);
    if (q == nullptr)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: LC_FUNCTION_STARTS (load command %u): truncated ULEB after 0x%" PRIx64,
                        path_.c_str(), index, addr);
    if (d == 0) break;
    if (addr + d < addr)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: LC_FUNCTION_STARTS (load command %u): delta 0x%" PRIx64 " after 0x%" PRIx64 " wraps",
                        path_.c_str(), index, d, addr);
    addr += d;
    if (addr >= text_end_)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: LC_FUNCTION_STARTS (load command %u): entry %zu at 0x%" PRIx64
                        " is past __TEXT's end 0x%" PRIx64, path_.c_str(), index, function_starts_.size(), addr, text_end_);
    function_starts_.push_back(addr);
  }
  return {};
}

void MachoObject::build_functions() {
  struct Cand {
    uint64_t addr;
    uint64_t sect_end;
    bool external;
    size_t order;
    const char* name;
  };
  std::vector<Cand> c;
  // The code sections by address (binary search: a hostile file may have many sections and exports).
  std::vector<const Section*> code;
  for (const Section& s : sections_)
    if (s.is_code() && s.size != 0) code.push_back(&s);
  std::sort(code.begin(), code.end(), [](const Section* a, const Section* b) { return a->addr < b->addr; });
  auto code_section_of = [&](uint64_t a) -> const Section* {
    auto it = std::upper_bound(code.begin(), code.end(), a, [](uint64_t v, const Section* x) { return v < x->addr; });
    // Sections may overlap in a hostile file: the nearest below that holds it, else none.
    if (it == code.begin()) return nullptr;
    const Section* x = *(it - 1);
    return a < x->addr + x->size ? x : nullptr;
  };
  for (size_t i = 0; i < nlist_.size(); i++) {
    const NlistSymbol& s = nlist_[i];
    if ((s.type & kNType) != kNSect || s.name.empty() || s.sect == 0 || s.sect > sections_.size()) continue;
    const Section& sec = sections_[s.sect - 1];
    if (!sec.is_code() || s.value < sec.addr || s.value >= sec.addr + sec.size) continue;
    c.push_back({s.value, sec.addr + sec.size, (s.type & kNExt) != 0, i, s.name.data()});
  }
  {
    // A stripped image keeps the nlist symbols something refers to (a personality routine) and
    // its exports in the trie: both name functions, nlist first at an address.
    for (size_t i = 0; i < exports_.size(); i++) {
      const ExportSymbol& e = exports_[i];
      if (e.reexport || (e.flags & kExportKindMask) != kExportKindRegular || e.name.empty()) continue;
      const Section* sec = code_section_of(e.addr);
      if (sec == nullptr) continue;
      c.push_back({e.addr, sec->addr + sec->size, false, nlist_.size() + i, e.name.data()});
    }
  }
  std::sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    if (a.external != b.external) return a.external;
    return a.order < b.order;
  });
  for (size_t i = 0; i < c.size(); i++) {
    if (i > 0 && c[i].addr == c[i - 1].addr) continue;
    uint64_t end = c[i].sect_end;
    for (size_t k = i + 1; k < c.size(); k++)
      if (c[k].addr > c[i].addr) {
        end = std::min(end, c[k].addr);
        break;
      }
    auto fs = std::upper_bound(function_starts_.begin(), function_starts_.end(), c[i].addr);
    if (fs != function_starts_.end()) end = std::min(end, *fs);
    const char* n = c[i].name[0] == '_' ? c[i].name + 1 : c[i].name;
    functions_.push_back({c[i].addr, end - c[i].addr, n});
  }
}

const Section* MachoObject::find_section(std::string_view segname, std::string_view sectname) const {
  for (const Section& s : sections_)
    if (s.segname == segname && s.sectname == sectname) return &s;
  return nullptr;
}

std::optional<object::SectionRef> MachoObject::section(std::string_view name) const {
  const Section* s = nullptr;
  if (name.size() > 7 && name.substr(0, 7) == ".debug_") {
    std::string mach = "__" + std::string(name.substr(1));
    if (mach.size() > 16) mach.resize(16);
    s = find_section("__DWARF", mach);
  } else if (const size_t comma = name.find(','); comma != std::string_view::npos) {
    s = find_section(name.substr(0, comma), name.substr(comma + 1));
  }
  if (s == nullptr || !s->has_bytes) return std::nullopt;
  return object::SectionRef{name, data_ + s->offset, static_cast<size_t>(s->size), s->addr};
}

std::optional<object::Symbol> MachoObject::symbol_at(uint64_t addr) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), addr,
                             [](uint64_t a, const object::Symbol& s) { return a < s.addr; });
  if (it == functions_.begin()) return std::nullopt;
  --it;
  if (addr - it->addr >= it->size) return std::nullopt;
  return *it;
}

bool MachoObject::read_code(uint64_t vaddr, void* buf, size_t len) const {
  for (const Segment& s : segments_) {
    if (s.filesize == 0 || vaddr < s.vmaddr || vaddr - s.vmaddr >= s.filesize || len > s.filesize - (vaddr - s.vmaddr)) continue;
    std::memcpy(buf, data_ + s.fileoff + (vaddr - s.vmaddr), len);
    return true;
  }
  return false;
}

uint64_t MachoObject::load_bias(uint64_t map_start, uint64_t map_offset) const {
  const uint64_t off = map_offset >= slice_.offset ? map_offset - slice_.offset : 0;
  for (const Segment& s : segments_)
    if (s.filesize != 0 && off >= s.fileoff && off - s.fileoff < s.filesize)
      return map_start - (s.vmaddr + (off - s.fileoff));
  return map_start - text_vmaddr_;
}

std::vector<object::UnwindTable> MachoObject::unwind_tables() const {
  std::vector<object::UnwindTable> out;
  auto ui = section("__TEXT,__unwind_info");
  auto eh = section("__TEXT,__eh_frame");
  if (ui) out.push_back({"compact_unwind", *ui, eh.value_or(object::SectionRef{})});
  if (eh) out.push_back({"eh_frame", *eh, {}});
  return out;
}

std::vector<object::Segment> MachoObject::loaded_segments() const {
  std::vector<object::Segment> out;
  for (const Segment& s : segments_)
    if (s.filesize != 0) out.push_back({s.vmaddr, s.fileoff, s.filesize});
  return out;
}

std::vector<object::CodeSection> MachoObject::code_sections() const {
  std::vector<object::CodeSection> out;
  for (const Section& s : sections_) {
    if (!s.is_code()) continue;
    object::CodeSection c;
    c.addr = s.addr;
    c.end = s.addr + s.size;
    if (s.has_bytes) c.bytes = object::SectionRef{s.sectname, data_ + s.offset, static_cast<size_t>(s.size), s.addr};
    out.push_back(c);
  }
  return out;
}

Result<std::shared_ptr<const object::ObjectImage>> MachoObject::find_debug_file(
    const object::DebugFileOptions& opts, std::vector<object::DebugFileCandidate>* looked_at) const {
  using Outcome = object::DebugFileCandidate::Outcome;
  if (id_.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no LC_UUID: a dSYM cannot be matched to it", path_.c_str());
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  const std::string inside = "/" + base + ".dSYM/Contents/Resources/DWARF/" + base;
  // The candidates in order: beside the image (in the target's root when the image is a target's),
  // then in each debug directory (under the target's root, else the sysroot), as PDBs are found.
  std::vector<std::pair<const char*, std::string>> candidates;
  if (relative_names_stay_in_root(dir)) candidates.emplace_back("dsym", dir + inside);
  for (const std::string& d : opts.debug_dirs) {
    if (d.empty()) continue;
    const std::string root = !target_root_.empty() ? target_root_ : opts.sysroot;
    candidates.emplace_back("dsym-dir", (root.empty() || d[0] != '/' ? d : root + d) + inside);
  }
  if (candidates.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: a dSYM beside it would be looked up outside its root", path_.c_str());
  std::optional<Error> first_error;  // a dSYM of another build, or unreadable; else "no dSYM"
  std::string tried;
  for (const auto& [rule, dsym] : candidates) {
    auto note = [&, rule = rule, &dsym = dsym](Outcome o, std::string reason) {
      if (looked_at != nullptr) looked_at->push_back({rule, dsym, o, std::move(reason)});
    };
    tried += (tried.empty() ? "" : ", ") + dsym;
    struct stat st;
    if (stat_path(dsym, &st) != 0) {
      note(Outcome::kMissing, strerror(errno));
      continue;
    }
    SliceChoice by_uuid;
    by_uuid.uuid = id_;
    auto d = MachoObject::open(dsym, by_uuid);
    if (!d.ok()) {
      const bool mismatch = d.error().code == SPROV_ERR_BUILD_ID_MISMATCH;
      note(mismatch ? Outcome::kIdentityMismatch : Outcome::kUnreadable, d.error().message);
      if (!first_error)
        first_error = mismatch ? Error{SPROV_ERR_BUILD_ID_MISMATCH, path_ + ": its UUID " + uuid_string(id_) +
                                                                        " is not its dSYM's: " + d.error().message}
                               : std::move(d).error();
      continue;
    }
    note(Outcome::kUsed, "");
    return std::shared_ptr<const object::ObjectImage>(d.value());
  }
  if (first_error) return *std::move(first_error);
  if (candidates.size() == 1)
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no dSYM at %s", path_.c_str(), tried.c_str());
  return make_error(SPROV_ERR_NOT_FOUND, "%s: no dSYM (searched: %s)", path_.c_str(), tried.c_str());
}

std::vector<object::DebugMapRange> MachoObject::debug_map_ranges() const {
  // Each function entry inside a code section. ld64.lld-16 writes size 0 for the first function of
  // each arm64 object; dsymutil takes a function's extent from the object's DWARF, not from the map
  // (the map relocates): such an entry reaches to the next entry or its section's end, and the
  // resolver answers only inside the object's subprogram of that function.
  struct Entry {
    object::DebugMapRange r;
    uint64_t section_end;
  };
  std::vector<Entry> all;
  // The code sections by address (binary search, as build_functions: a hostile file may have many
  // sections and millions of entries); overlapping sections: the nearest below that holds it.
  std::vector<const Section*> code;
  for (const Section& c : sections_)
    if (c.is_code() && c.size != 0) code.push_back(&c);
  std::sort(code.begin(), code.end(), [](const Section* a, const Section* b) { return a->addr < b->addr; });
  for (size_t o = 0; o < debug_map_.size(); o++)
    for (size_t i = 0; i < debug_map_[o].symbols.size(); i++) {
      const DebugMapSymbol& y = debug_map_[o].symbols[i];
      if (!y.function) continue;
      auto it = std::upper_bound(code.begin(), code.end(), y.addr,
                                 [](uint64_t v, const Section* x) { return v < x->addr; });
      if (it == code.begin()) continue;
      const Section& c = **(it - 1);
      if (y.addr - c.addr >= c.size) continue;
      const uint64_t room = c.size - (y.addr - c.addr);
      all.push_back({{y.addr, std::min(y.size, room), static_cast<uint32_t>(o), static_cast<uint32_t>(i)},
                     c.addr + c.size});
    }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.r.addr < b.r.addr; });
  // From the last entry back, the next greater address seen (one pass: many entries at one address
  // in a hostile map cost no more than distinct ones).
  uint64_t next = UINT64_MAX;
  for (size_t k = all.size(); k-- > 0;) {
    if (all[k].r.size == 0) all[k].r.size = std::min(all[k].section_end, next) - all[k].r.addr;
    if (k == 0 || all[k - 1].r.addr != all[k].r.addr) next = all[k].r.addr;
  }
  std::vector<object::DebugMapRange> out;
  for (const Entry& e : all)
    if (e.r.size != 0 && (out.empty() || out.back().addr + out.back().size <= e.r.addr)) out.push_back(e.r);
  return out;
}

std::string MachoObject::debug_map_object_path(uint32_t object) const {
  return object < debug_map_.size() ? std::string(debug_map_[object].path) : std::string();
}

Result<object::DebugMapObjectFile> MachoObject::open_debug_map_object(uint32_t object) const {
  if (object >= debug_map_.size())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no debug map object %u (its map names %zu)", path_.c_str(), object,
                      debug_map_.size());
  const DebugMapObject& mo = debug_map_[object];
  const std::string name(mo.path);
  if (name.empty()) return make_error(SPROV_ERR_BAD_FORMAT, "%s: debug map object %u has no path", path_.c_str(), object);
  if (name.back() == ')' && name.find(".a(") != std::string::npos)
    return make_error(SPROV_ERR_NOT_FOUND, "%s: debug map object %s is an archive member (not read; a dSYM has its DWARF)",
                      path_.c_str(), name.c_str());
  std::string full;
  if (name.front() == '/') {
    full = under_root_of(path_, name);
  } else {
    const size_t slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
    if (!relative_names_stay_in_root(dir))
      return make_error(SPROV_ERR_NOT_FOUND, "%s: debug map object %s is relative and would be looked up outside the root",
                        path_.c_str(), name.c_str());
    full = dir + "/" + name;
  }
  SliceChoice by_arch;
  by_arch.arch = slice_.arch;
  auto o = MachoObject::open(full, by_arch);
  if (!o.ok() && o.error().code == SPROV_ERR_NOT_FOUND) {
    // No slice of the image's architecture (open's only NOT_FOUND; a missing file is -ENOENT):
    // another build's object, named with the architectures it has.
    auto sl = list_slices(full);
    if (!sl.ok()) return std::move(sl).error();
    std::string archs;
    for (const Slice& x : sl.value()) archs += (archs.empty() ? "" : ", ") + std::string(arch_label(x.arch));
    return make_error(SPROV_ERR_BUILD_ID_MISMATCH, "%s: debug map object %s is for %s, not the image's %s", path_.c_str(),
                      full.c_str(), archs.c_str(), arch_label(slice_.arch));
  }
  if (!o.ok()) return std::move(o).error();
  const MachoObject& obj = *o.value();
  if (obj.filetype() != kMhObject)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: debug map object %s has Mach-O file type %u, not MH_OBJECT (1)",
                      path_.c_str(), full.c_str(), obj.filetype());
  if (mo.mtime != 0) {
    const uint64_t seen = obj.identity_.mtime_ns / 1000000000u;
    if (seen != mo.mtime)
      return make_error(SPROV_ERR_BUILD_ID_MISMATCH,
                        "%s: debug map object %s was modified at %" PRIu64 ", the debug map says %" PRIu64
                        " (rebuilt after the link)",
                        path_.c_str(), full.c_str(), seen, mo.mtime);
  }
  object::DebugMapObjectFile out;
  out.symbol_addrs.assign(mo.symbols.size(), object::DebugMapObjectFile::kNoAddress);
  // name -> (address, external, ambiguous): an external definition wins; two local ones of one name
  // and no external one (an `ld -r` output) say nothing about which one the map means: no address.
  struct Def {
    uint64_t addr;
    bool external, ambiguous;
  };
  std::unordered_map<std::string_view, Def> defined;
  for (const NlistSymbol& y : obj.nlist_symbols()) {
    if ((y.type & kNType) != kNSect || y.name.empty()) continue;
    const bool ext = (y.type & kNExt) != 0;
    auto [it, fresh] = defined.try_emplace(y.name, Def{y.value, ext, false});
    if (fresh || it->second.external) continue;
    if (ext) it->second = {y.value, true, false};
    else if (it->second.addr != y.value) it->second.ambiguous = true;
  }
  for (size_t i = 0; i < mo.symbols.size(); i++)
    if (auto it = defined.find(mo.symbols[i].name); it != defined.end() && !it->second.ambiguous)
      out.symbol_addrs[i] = it->second.addr;
  out.image = o.value();
  return out;
}

}  // namespace stackprov::macho
