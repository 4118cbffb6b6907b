// SPDX-License-Identifier: Apache-2.0
// PdbFile: a checked reader of PDB files (MSF 7.0, PDB info, DBI, module streams, C13, IPI/TPI, /names,
// publics) and llvm-symbolizer-14's answer for an address (llvm/lib/DebugInfo/PDB/Native, LLVM 14).
#include "pdb/pdb_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "core/mapped_file.hpp"
#include "core/open_file.hpp"

namespace stackprov::pdb {

namespace {

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// MSF 7.0 superblock (llvm/DebugInfo/MSF/MSFCommon.h): 32 magic bytes, then six u32.
constexpr char kMsfMagic[] = "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS\0\0";
constexpr size_t kMagicSize = 32;
constexpr size_t kSuperBlockSize = 56;
// Fixed streams (PDB/Native/RawConstants.h).
constexpr uint32_t kStreamPdb = 1, kStreamTpi = 2, kStreamDbi = 3, kStreamIpi = 4;
constexpr uint32_t kPdbImplVC70 = 20000404;
constexpr uint32_t kDbiHeaderSize = 64;
constexpr uint32_t kModInfoHeaderSize = 64;
constexpr uint32_t kSecContribVer60 = 0xeffe0000u + 19970605u, kSecContribV2 = 0xeffe0000u + 20140516u;
constexpr uint32_t kDbgHeaderSectionHdr = 5;  // DbgHeaderType::SectionHdr
constexpr uint32_t kCoffSectionHeader = 40;
constexpr uint32_t kStringTableSignature = 0xeffeeffe;
// Symbol kinds (CodeView CodeViewSymbols.def; S_END 0x0006 is found through the records' end offsets).
constexpr uint16_t kS_PUB32 = 0x110e, kS_LPROC32 = 0x110f, kS_GPROC32 = 0x1110,
                   kS_LPROC32_ID = 0x1146, kS_GPROC32_ID = 0x1147, kS_INLINESITE = 0x114d;
// C13 subsection kinds (DebugSubsectionKind).
constexpr uint32_t kSubLines = 0xf2, kSubFileChecksums = 0xf4, kSubInlineeLines = 0xf6;
// Leaf kinds (CodeViewTypes.def).
constexpr uint16_t kLF_CLASS = 0x1504, kLF_STRUCTURE = 0x1505, kLF_UNION = 0x1506, kLF_ENUM = 0x1507,
                   kLF_INTERFACE = 0x1519, kLF_FUNC_ID = 0x1601, kLF_MFUNC_ID = 0x1602, kLF_STRING_ID = 0x1605;
constexpr uint32_t kTpiHeaderSize = 56;
constexpr uint32_t kMaxTypeRecords = 1u << 24;

bool is_proc(uint16_t k) { return k == kS_GPROC32 || k == kS_LPROC32 || k == kS_GPROC32_ID || k == kS_LPROC32_ID; }

/// A NUL-terminated string at `off` of [b, b + end): up to the NUL or the end.
std::string cstr(const uint8_t* b, size_t off, size_t end) {
  if (off >= end) return {};
  const char* s = reinterpret_cast<const char*>(b + off);
  return std::string(s, strnlen(s, end - off));
}

/// A CodeView symbol or type record at `off` of `bytes` below `limit`: its kind and whole length
/// (the u16 length field counts what follows it). False when it does not fit.
bool record_at(const std::vector<uint8_t>& bytes, uint64_t off, uint64_t limit, uint16_t* kind, uint32_t* total) {
  if (limit > bytes.size()) limit = bytes.size();
  if (off + 4 > limit) return false;
  const uint32_t len = le16(bytes.data() + off);
  if (len < 2 || off + 2 + len > limit) return false;
  *kind = le16(bytes.data() + off + 2);
  *total = len + 2;
  return true;
}

/// One binary annotation of an S_INLINESITE (CodeView BinaryAnnotationsOpCode), decoded as LLVM's
/// BinaryAnnotationIterator does.
struct Annotation {
  uint32_t op = 0;
  uint32_t u1 = 0, u2 = 0;
  int32_t s1 = 0;
};
enum : uint32_t {
  kAnnInvalid = 0, kAnnCodeOffset = 1, kAnnChangeCodeOffsetBase = 2, kAnnChangeCodeOffset = 3,
  kAnnChangeCodeLength = 4, kAnnChangeFile = 5, kAnnChangeLineOffset = 6, kAnnChangeLineEndDelta = 7,
  kAnnChangeRangeKind = 8, kAnnChangeColumnStart = 9, kAnnChangeColumnEndDelta = 10,
  kAnnChangeCodeOffsetAndLineOffset = 11, kAnnChangeCodeLengthAndCodeOffset = 12, kAnnChangeColumnEnd = 13,
};

/// CodeView's compressed unsigned integer (CVUncompressData); false when malformed or cut short.
bool compressed(std::span<const uint8_t>* d, uint32_t* out) {
  if (d->empty()) return false;
  const uint8_t b0 = (*d)[0];
  if ((b0 & 0x80) == 0) {
    *out = b0;
    *d = d->subspan(1);
    return true;
  }
  if ((b0 & 0xc0) == 0x80) {
    if (d->size() < 2) return false;
    *out = (static_cast<uint32_t>(b0 & 0x3f) << 8) | (*d)[1];
    *d = d->subspan(2);
    return true;
  }
  if ((b0 & 0xe0) == 0xc0) {
    if (d->size() < 4) return false;
    *out = (static_cast<uint32_t>(b0 & 0x1f) << 24) | (static_cast<uint32_t>((*d)[1]) << 16) |
           (static_cast<uint32_t>((*d)[2]) << 8) | (*d)[3];
    *d = d->subspan(4);
    return true;
  }
  return false;
}

int32_t signed_operand(uint32_t v) { return (v & 1) ? -static_cast<int32_t>(v >> 1) : static_cast<int32_t>(v >> 1); }

/// The annotations up to the first Invalid opcode or malformed byte (at most one per byte).
std::vector<Annotation> decode_annotations(std::span<const uint8_t> d) {
  std::vector<Annotation> out;
  while (!d.empty()) {
    Annotation a;
    if (!compressed(&d, &a.op) || a.op == kAnnInvalid) break;
    bool ok = true;
    switch (a.op) {
      case kAnnChangeLineOffset:
      case kAnnChangeColumnEndDelta: {
        uint32_t v = 0;
        ok = compressed(&d, &v);
        a.s1 = signed_operand(v);
        break;
      }
      case kAnnChangeCodeOffsetAndLineOffset: {
        uint32_t v = 0;
        ok = compressed(&d, &v);
        a.s1 = signed_operand(v >> 4);
        a.u1 = v & 0xf;
        break;
      }
      case kAnnChangeCodeLengthAndCodeOffset:
        ok = compressed(&d, &a.u1) && compressed(&d, &a.u2);
        break;
      case kAnnCodeOffset: case kAnnChangeCodeOffsetBase: case kAnnChangeCodeOffset: case kAnnChangeCodeLength:
      case kAnnChangeFile: case kAnnChangeLineEndDelta: case kAnnChangeRangeKind: case kAnnChangeColumnStart:
      case kAnnChangeColumnEnd:
        ok = compressed(&d, &a.u1);
        break;
      default:
        ok = false;  // an opcode CodeView does not define: the rest cannot be read
        break;
    }
    if (!ok) break;
    out.push_back(a);
  }
  return out;
}

/// Whether the inline site's code ranges contain `off` (llvm NativeFunctionSymbol.cpp,
/// inlineSiteContainsAddress: a ChangeCodeLength also advances the code offset).
bool site_contains(const std::vector<Annotation>& anns, uint32_t off) {
  bool found = false;
  uint32_t code = 0;
  for (const Annotation& a : anns) {
    switch (a.op) {
      case kAnnCodeOffset:
      case kAnnChangeCodeOffset:
      case kAnnChangeCodeOffsetAndLineOffset:
        code += a.u1;
        if (off >= code) found = true;
        break;
      case kAnnChangeCodeLength:
        code += a.u1;
        if (found && off < code) return true;
        found = false;
        break;
      case kAnnChangeCodeLengthAndCodeOffset:
        code += a.u2;
        if (off >= code && off < code + a.u1) return true;
        found = false;
        break;
      default:
        break;
    }
  }
  return false;
}

/// The line and file offsets of the inline site at `off` as LLVM 14's
/// NativeInlineSiteSymbol::getLineOffset computes them: the offsets accumulate annotation by
/// annotation (a ChangeCodeLength also advances the code offset, a ChangeCodeOffsetBase does not)
/// and the walk stops after the first annotation that brings the code offset to `off` or past it —
/// so a line change that comes before the code offset that ends a range counts for that range.
/// That is not the range-exact answer (a later LLVM rewrote this function range by range; our reader
/// followed that rewrite before and answered e.g. mdprog.c:29 where llvm-symbolizer-14 answers :32);
/// the oracle is llvm-symbolizer-14.
struct LineOffset {
  uint32_t line = 0, file = 0;
};
LineOffset site_line_offset(const std::vector<Annotation>& anns, uint32_t off) {
  LineOffset r;
  uint32_t code = 0;
  for (const Annotation& a : anns) {
    switch (a.op) {
      case kAnnCodeOffset:
      case kAnnChangeCodeOffset:
      case kAnnChangeCodeLength:
        code += a.u1;
        break;
      case kAnnChangeCodeLengthAndCodeOffset:
        code += a.u2;
        break;
      case kAnnChangeLineOffset:  // u1 is 0 for it (llvm's DecodedAnnotation)
      case kAnnChangeCodeOffsetAndLineOffset:
        code += a.u1;
        r.line += static_cast<uint32_t>(a.s1);  // llvm's uint32_t LineOffset: wraps as there
        break;
      case kAnnChangeFile:
        r.file = a.u1;
        break;
      default:
        break;
    }
    if (code >= off) return r;
  }
  return r;
}

/// A numeric leaf (CodeView "LF_NUMERIC") at `off`: its size in bytes, 0 when malformed.
uint32_t numeric_leaf_size(const uint8_t* b, size_t off, size_t end) {
  if (off + 2 > end) return 0;
  const uint16_t v = le16(b + off);
  if (v < 0x8000) return 2;
  uint32_t n = 0;
  switch (v) {
    case 0x8000: n = 1; break;                              // LF_CHAR
    case 0x8001: case 0x8002: n = 2; break;                 // LF_SHORT, LF_USHORT
    case 0x8003: case 0x8004: case 0x8005: n = 4; break;    // LF_LONG, LF_ULONG, LF_REAL32
    case 0x8006: case 0x8009: case 0x800a: n = 8; break;    // LF_REAL64, LF_QUADWORD, LF_UQUADWORD
    default: return 0;
  }
  return off + 2 + n <= end ? 2 + n : 0;
}

}  // namespace

ModuleId guid_age_id(const uint8_t guid[16], uint32_t age) {
  uint8_t b[20];
  std::memcpy(b, guid, 16);
  for (int i = 0; i < 4; i++) b[16 + i] = static_cast<uint8_t>(age >> (8 * i));
  return ModuleId::from_bytes(b, sizeof b, IdKind::kPdbGuidAge);
}

std::string guid_age_key(const ModuleId& id) {
  if (id.kind != IdKind::kPdbGuidAge || id.len != 20) return {};
  const uint8_t* g = id.bytes;
  char buf[80];
  std::snprintf(buf, sizeof buf, "%08X%04X%04X%02X%02X%02X%02X%02X%02X%02X%02X%X", le32(g), le16(g + 4), le16(g + 6),
                g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15], le32(g + 16));
  return buf;
}

/// A module stream, read and indexed on the first lookup that needs it.
struct PdbFile::ModuleData {
  bool loaded = false;
  std::optional<Error> error;
  std::vector<uint8_t> bytes;
  uint32_t sym_end = 0;
  /// The S_GPROC32/S_LPROC32 records in the order llvm's findFunctionSymbolBySectOffset visits
  /// them (from each procedure's record to the one after its S_END).
  std::vector<Proc> scan;
  /// `scan` sorted by (segment, start) when no two procedures' ranges overlap or wrap (every real
  /// PDB): then the first that holds an address is the one found by binary search; else empty and
  /// the lookup walks `scan` in order, as llvm does.
  std::vector<const Proc*> sorted;
  bool has_checksums = false;
  uint32_t checksums_at = 0, checksums_len = 0;
  std::vector<std::pair<uint32_t, uint32_t>> lines, inlinee_lines;  // (offset, length) of subsections
  struct LineEntry {
    uint64_t rva;
    uint32_t line, column, file;
    bool terminal;
  };
  bool table_built = false;
  std::vector<LineEntry> table;
};

/// /names, the IPI and TPI records and the publics, each read on first use.
struct PdbFile::Names {
  bool names_loaded = false, types_loaded = false, publics_loaded = false;
  std::optional<Error> names_error, types_error, publics_error;
  std::vector<uint8_t> names;  // the string buffer of /names
  struct Types {
    std::vector<uint8_t> bytes;
    uint32_t begin = 0x1000;
    std::vector<uint32_t> offsets;
  } ipi, tpi;
  std::vector<Public> publics;
};

PdbFile::PdbFile() = default;

PdbFile::~PdbFile() {
  if (map_ != nullptr) unmap_file(map_, size_);
}

bool PdbFile::file_changed() const { return map_ != nullptr && file_map_faulted(map_); }

Result<std::shared_ptr<PdbFile>> PdbFile::open(const std::string& path) {
  std::shared_ptr<PdbFile> f(new PdbFile());
  f->path_ = path;
  auto mapped = map_regular_file(path, SPROV_ERR_TRUNCATED);  // regular, bounded, guarded (core/mapped_file.hpp)
  if (!mapped) return std::move(mapped).error();
  f->map_ = mapped.value().base;
  f->data_ = static_cast<const uint8_t*>(f->map_);
  f->size_ = mapped.value().size;
  if (f->size_ < kSuperBlockSize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: %lld bytes are too few for a PDB (MSF superblock: %zu)", path.c_str(),
                      static_cast<long long>(f->size_), kSuperBlockSize);
  if (Status s = f->parse(); !s) return s.error();
  return f;
}

Result<std::shared_ptr<PdbFile>> PdbFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<PdbFile> f(new PdbFile());
  f->path_ = std::move(name);
  f->owned_ = std::move(bytes);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  if (Status s = f->parse(); !s) return s.error();
  return f;
}

Result<std::vector<uint8_t>> PdbFile::read_stream(uint32_t index, const char* what) const {
  if (index >= stream_sizes_.size())
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: PDB %s stream %u does not exist (%zu streams)", path_.c_str(), what,
                      index, stream_sizes_.size());
  const uint32_t size = stream_sizes_[index];
  std::vector<uint8_t> out(size);
  uint32_t done = 0;
  for (uint32_t b : stream_blocks_[index]) {
    const uint32_t n = std::min(block_size_, size - done);
    std::memcpy(out.data() + done, data_ + uint64_t{b} * block_size_, n);  // b < num_blocks_ (parse)
    done += n;
  }
  return out;
}

Status PdbFile::parse() {
  const char* p = path_.c_str();
  // ---- MSF superblock, block map, stream directory (llvm msf::validateSuperBlock and more).
  if (size_ < kSuperBlockSize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: %zu bytes are too few for a PDB (MSF superblock: %zu)", p, size_,
                      kSuperBlockSize);
  if (std::memcmp(data_, kMsfMagic, kMagicSize) != 0)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: not a PDB file (no MSF 7.00 magic)", p);
  block_size_ = le32(data_ + 32);
  const uint32_t fpm_block = le32(data_ + 36);
  num_blocks_ = le32(data_ + 40);
  const uint32_t dir_bytes = le32(data_ + 44);
  const uint32_t block_map_addr = le32(data_ + 52);
  if (block_size_ != 512 && block_size_ != 1024 && block_size_ != 2048 && block_size_ != 4096)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF block size %u is not 512, 1024, 2048 or 4096", p, block_size_);
  if (fpm_block != 1 && fpm_block != 2)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF free block map block %u is not 1 or 2", p, fpm_block);
  if (uint64_t{num_blocks_} * block_size_ > size_)
    return make_error(SPROV_ERR_TRUNCATED, "%s: MSF declares %u blocks of %u bytes, the file has %zu bytes", p,
                      num_blocks_, block_size_, size_);
  if (block_map_addr >= num_blocks_ || block_map_addr == 0)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF block map address %u is outside the %u blocks", p,
                      block_map_addr, num_blocks_);
  const uint64_t dir_blocks = (uint64_t{dir_bytes} + block_size_ - 1) / block_size_;
  if (dir_bytes == 0 || dir_blocks > block_size_ / 4)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF stream directory of %u bytes does not fit one block map", p,
                      dir_bytes);
  std::vector<uint8_t> dir(dir_bytes);
  const uint8_t* map = data_ + uint64_t{block_map_addr} * block_size_;
  for (uint64_t i = 0; i < dir_blocks; i++) {
    const uint32_t b = le32(map + 4 * i);
    if (b >= num_blocks_)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF directory block %u is outside the %u blocks", p, b, num_blocks_);
    const uint64_t n = std::min<uint64_t>(block_size_, dir_bytes - i * block_size_);
    std::memcpy(dir.data() + i * block_size_, data_ + uint64_t{b} * block_size_, n);
  }
  if (dir.size() < 4) return make_error(SPROV_ERR_TRUNCATED, "%s: MSF stream directory is empty", p);
  const uint32_t nstreams = le32(dir.data());
  if (nstreams > kMaxStreams || 4 + uint64_t{nstreams} * 4 > dir.size())
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF stream count %u does not fit the %zu-byte directory", p, nstreams,
                      dir.size());
  stream_sizes_.resize(nstreams);
  stream_blocks_.resize(nstreams);
  uint64_t at = 4 + uint64_t{nstreams} * 4;
  for (uint32_t i = 0; i < nstreams; i++) {
    uint32_t s = le32(dir.data() + 4 + 4 * i);
    if (s == 0xffffffff) s = 0;  // a nil stream
    const uint64_t nb = (uint64_t{s} + block_size_ - 1) / block_size_;
    if (nb > num_blocks_ || at + nb * 4 > dir.size())
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF stream %u of %u bytes has more blocks than the directory lists",
                        p, i, s);
    stream_sizes_[i] = s;
    stream_blocks_[i].reserve(nb);
    for (uint64_t k = 0; k < nb; k++, at += 4) {
      const uint32_t b = le32(dir.data() + at);
      if (b >= num_blocks_)
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: MSF stream %u's block %u is outside the %u blocks", p, i, b,
                          num_blocks_);
      stream_blocks_[i].push_back(b);
    }
  }

  // ---- PDB info stream: version, signature, age, GUID, named streams ("/names").
  auto info = read_stream(kStreamPdb, "info");
  if (!info) return info.error();
  const std::vector<uint8_t>& in = info.value();
  if (in.size() < 28) return make_error(SPROV_ERR_TRUNCATED, "%s: PDB info stream has %zu bytes (28 needed)", p, in.size());
  if (le32(in.data()) < kPdbImplVC70)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: PDB info stream version %u is older than VC70 (20000404)", p,
                      le32(in.data()));
  age_ = le32(in.data() + 8);
  std::memcpy(guid_, in.data() + 12, 16);
  {
    size_t o = 28;
    auto need = [&](uint64_t n) { return o + n <= in.size(); };
    if (!need(4)) return make_error(SPROV_ERR_TRUNCATED, "%s: PDB info stream ends before its named stream map", p);
    const uint32_t strbuf = le32(in.data() + o);
    o += 4;
    if (!need(strbuf)) return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map strings (%u bytes) pass the stream's end", p, strbuf);
    const size_t str_at = o;
    o += strbuf;
    if (!need(8)) return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map hash table header is cut short", p);
    const uint32_t capacity = le32(in.data() + o + 4);
    o += 8;
    if (!need(4)) return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map has no present-bit vector", p);
    const uint32_t present_words = le32(in.data() + o);
    o += 4;
    if (!need(uint64_t{present_words} * 4))
      return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map present-bit vector of %u words passes the end", p,
                        present_words);
    const size_t present_at = o;
    o += size_t{present_words} * 4;
    if (!need(4)) return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map has no deleted-bit vector", p);
    const uint32_t deleted_words = le32(in.data() + o);
    o += 4;
    if (!need(uint64_t{deleted_words} * 4))
      return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map deleted-bit vector of %u words passes the end", p,
                        deleted_words);
    o += size_t{deleted_words} * 4;
    if (uint64_t{capacity} > uint64_t{present_words} * 32 + 32 * 1024)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: named stream map capacity %u exceeds its bit vector", p, capacity);
    for (uint32_t i = 0; i < capacity && i / 32 < present_words; i++) {
      if (!(le32(in.data() + present_at + 4 * (i / 32)) & (1u << (i % 32)))) continue;
      if (!need(8)) return make_error(SPROV_ERR_TRUNCATED, "%s: named stream map entry %u passes the end", p, i);
      const uint32_t key = le32(in.data() + o), value = le32(in.data() + o + 4);
      o += 8;
      if (key < strbuf && cstr(in.data() + str_at, key, strbuf) == "/names") names_stream_ = value;
    }
  }

  // ---- DBI: header, module infos, section contributions, the section-header stream.
  auto dbi_r = read_stream(kStreamDbi, "DBI");
  if (!dbi_r) return dbi_r.error();
  const std::vector<uint8_t>& dbi = dbi_r.value();
  if (dbi.size() < kDbiHeaderSize)
    return make_error(SPROV_ERR_TRUNCATED, "%s: DBI stream has %zu bytes, its header %u", p, dbi.size(), kDbiHeaderSize);
  if (le32(dbi.data()) != 0xffffffff)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: DBI version signature 0x%x is not -1", p, le32(dbi.data()));
  publics_stream_ = le16(dbi.data() + 16);
  symrec_stream_ = le16(dbi.data() + 20);
  const int32_t sizes[7] = {
      static_cast<int32_t>(le32(dbi.data() + 24)), static_cast<int32_t>(le32(dbi.data() + 28)),
      static_cast<int32_t>(le32(dbi.data() + 32)), static_cast<int32_t>(le32(dbi.data() + 36)),
      static_cast<int32_t>(le32(dbi.data() + 40)), static_cast<int32_t>(le32(dbi.data() + 52)),
      static_cast<int32_t>(le32(dbi.data() + 48))};  // modi, seccontr, secmap, fileinfo, typeserver, ec, dbghdr
  uint64_t total = kDbiHeaderSize;
  for (int32_t s : sizes) {
    if (s < 0) return make_error(SPROV_ERR_BAD_FORMAT, "%s: DBI substream size %d is negative", p, s);
    total += static_cast<uint32_t>(s);
  }
  if (total > dbi.size())
    return make_error(SPROV_ERR_TRUNCATED, "%s: DBI substreams (%" PRIu64 " bytes) pass the stream's %zu bytes", p,
                      total, dbi.size());
  const uint64_t modi_at = kDbiHeaderSize, modi_end = modi_at + static_cast<uint32_t>(sizes[0]);
  for (uint64_t o = modi_at; o < modi_end;) {
    if (modules_.size() >= kMaxModules)
      return make_error(SPROV_ERR_LIMIT, "%s: DBI lists more than %u modules", p, kMaxModules);
    if (o + kModInfoHeaderSize > modi_end)
      return make_error(SPROV_ERR_TRUNCATED, "%s: DBI module %zu's header passes the module substream", p,
                        modules_.size());
    const uint8_t* h = dbi.data() + o;
    ModuleInfo m;
    m.stream = le16(h + 34);
    m.sym_bytes = le32(h + 36);
    m.c11_bytes = le32(h + 40);
    m.c13_bytes = le32(h + 44);
    uint64_t q = o + kModInfoHeaderSize;
    m.name = cstr(dbi.data(), q, modi_end);
    q += m.name.size() + 1;
    m.obj_name = cstr(dbi.data(), q, modi_end);
    q += m.obj_name.size() + 1;
    if (q > modi_end)
      return make_error(SPROV_ERR_TRUNCATED, "%s: DBI module %zu's names pass the module substream", p, modules_.size());
    o = (q + 3) & ~uint64_t{3};
    modules_.push_back(std::move(m));
  }
  const uint64_t sc_at = modi_end, sc_end = sc_at + static_cast<uint32_t>(sizes[1]);
  if (sc_end > sc_at) {
    if (sc_at + 4 > sc_end) return make_error(SPROV_ERR_TRUNCATED, "%s: DBI section contributions have no version", p);
    const uint32_t ver = le32(dbi.data() + sc_at);
    const uint32_t entry = ver == kSecContribVer60 ? 28 : ver == kSecContribV2 ? 32 : 0;
    if (entry == 0)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: DBI section contribution version 0x%x is unknown", p, ver);
    if ((sc_end - sc_at - 4) % entry != 0)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: DBI section contributions (%" PRIu64 " bytes) are not %u-byte entries",
                        p, sc_end - sc_at - 4, entry);
    for (uint64_t o = sc_at + 4; o < sc_end; o += entry) {
      const uint8_t* e = dbi.data() + o;
      contribs_.push_back({le16(e), static_cast<int32_t>(le32(e + 4)), static_cast<int32_t>(le32(e + 8)), le16(e + 16)});
    }
  }
  const uint64_t dbg_at = total - static_cast<uint32_t>(sizes[6]);
  const uint64_t dbg_count = static_cast<uint32_t>(sizes[6]) / 2;
  if (dbg_count > kDbgHeaderSectionHdr) {
    const uint16_t sh = le16(dbi.data() + dbg_at + 2 * kDbgHeaderSectionHdr);
    if (sh != 0xffff) {
      auto secs = read_stream(sh, "section header");
      if (!secs) return secs.error();
      if (secs->size() % kCoffSectionHeader != 0)
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: PDB section header stream %u has %zu bytes, not 40-byte headers", p,
                          sh, secs->size());
      for (size_t o = 0; o < secs->size(); o += kCoffSectionHeader) section_rvas_.push_back(le32(secs->data() + o + 12));
    }
  }

  // llvm's AddrToModuleIndex (NativeSession::parseSectionContribs): an IntervalMap of half-open
  // intervals [rva, rva + size) (IntervalMapHalfOpenInfo in LLVM 14's NativeSession.h); a
  // contribution that overlaps one already there is left out, one that only touches it is kept
  // (lld's MinGW PDBs lay contributions end to end). Section 0 and sections past the table (LLVM
  // reads past its table there) are left out.
  std::map<uint64_t, ModuleRange> ranges;
  for (const SectionContrib& c : contribs_) {
    if (c.size <= 0 || c.section == 0 || c.section > section_rvas_.size()) continue;
    const uint64_t b = rva_of(c.section, static_cast<uint32_t>(c.offset));
    const uint64_t e = b + static_cast<uint32_t>(c.size);
    auto it = ranges.lower_bound(e);  // the first range starting at e or after: no overlap
    if (it != ranges.begin() && std::prev(it)->second.end > b) continue;
    ranges[b] = {b, e, c.module};
  }
  for (auto& [b, r] : ranges) module_ranges_.push_back(r);
  module_data_.resize(modules_.size());
  names_ = std::make_unique<Names>();
  return {};
}

Result<PdbFile::ModuleData*> PdbFile::module_data(size_t m) {
  if (m >= modules_.size())
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: module %zu does not exist (%zu modules)", path_.c_str(), m,
                      modules_.size());
  if (!module_data_[m]) module_data_[m] = std::make_unique<ModuleData>();
  ModuleData* md = module_data_[m].get();
  if (md->loaded) {
    if (md->error) return *md->error;
    return md;
  }
  md->loaded = true;
  const ModuleInfo& mi = modules_[m];
  const char* p = path_.c_str();
  if (mi.stream == 0xffff) return md;  // a module without symbols or lines
  auto bytes = read_stream(mi.stream, "module");
  if (!bytes) {
    md->error = bytes.error();
    return *md->error;
  }
  md->bytes = std::move(bytes).value();
  const uint64_t c13_at = uint64_t{mi.sym_bytes} + mi.c11_bytes, c13_end = c13_at + mi.c13_bytes;
  if (c13_end > md->bytes.size() || (mi.sym_bytes != 0 && mi.sym_bytes < 4)) {
    md->error = make_error(SPROV_ERR_TRUNCATED, "%s: module %zu (%s): symbols, C11 and C13 lines (%u+%u+%u bytes) pass its "
                           "stream %u's %zu bytes", p, m, mi.name.c_str(), mi.sym_bytes, mi.c11_bytes, mi.c13_bytes,
                           mi.stream, md->bytes.size());
    return *md->error;
  }
  md->sym_end = mi.sym_bytes;
  // llvm's scan order: each S_*PROC32 (not the _ID forms), then the record after its S_END.
  for (uint64_t o = 4; o < md->sym_end;) {
    uint16_t kind;
    uint32_t len;
    if (!record_at(md->bytes, o, md->sym_end, &kind, &len)) break;
    if (kind == kS_GPROC32 || kind == kS_LPROC32) {
      if (len < 39) break;
      const uint8_t* r = md->bytes.data() + o;
      Proc pr;
      pr.kind = kind;
      pr.record = static_cast<uint32_t>(o);
      pr.end = le32(r + 8);
      pr.code_size = le32(r + 16);
      pr.code_offset = le32(r + 32);
      pr.segment = le16(r + 36);
      pr.name = cstr(md->bytes.data(), o + 39, o + len);
      md->scan.push_back(pr);
      if (pr.end <= o) break;  // a backward S_END: llvm would loop; the scan stops
      o = pr.end;
      if (!record_at(md->bytes, o, md->sym_end, &kind, &len)) break;
    }
    o += len;
  }
  // The index of `scan`, when its ranges are disjoint and none wraps (else the lookup scans).
  for (const Proc& pr : md->scan)
    if (pr.code_size != 0) md->sorted.push_back(&pr);  // holds no address
  std::sort(md->sorted.begin(), md->sorted.end(), [](const Proc* a, const Proc* b) {
    return std::tie(a->segment, a->code_offset) < std::tie(b->segment, b->code_offset);
  });
  for (size_t i = 0; i < md->sorted.size(); i++) {
    const Proc& a = *md->sorted[i];
    const bool wraps = uint64_t{a.code_offset} + a.code_size > 0xffffffffu;
    const bool overlaps = i + 1 < md->sorted.size() && md->sorted[i + 1]->segment == a.segment &&
                          uint64_t{a.code_offset} + a.code_size > md->sorted[i + 1]->code_offset;
    if (wraps || overlaps) {
      md->sorted.clear();
      break;
    }
  }
  // C13 subsections: 4-byte kind, 4-byte length, data padded to 4 bytes.
  for (uint64_t o = c13_at; o + 8 <= c13_end;) {
    const uint32_t kind = le32(md->bytes.data() + o), len = le32(md->bytes.data() + o + 4);
    if (o + 8 + len > c13_end) break;
    const uint32_t at = static_cast<uint32_t>(o + 8);
    if (kind == kSubFileChecksums && !md->has_checksums) {
      md->has_checksums = true;
      md->checksums_at = at;
      md->checksums_len = len;
    } else if (kind == kSubLines) {
      md->lines.emplace_back(at, len);
    } else if (kind == kSubInlineeLines) {
      md->inlinee_lines.emplace_back(at, len);
    }
    o = (o + 8 + len + 3) & ~uint64_t{3};
  }
  return md;
}

Result<std::vector<Proc>> PdbFile::procs(size_t m) {
  std::lock_guard<std::mutex> lock(mu_);
  auto md = module_data(m);
  if (!md) return md.error();
  std::vector<Proc> out;
  const ModuleData& d = *md.value();
  for (uint64_t o = 4; o < d.sym_end;) {
    uint16_t kind;
    uint32_t len;
    if (!record_at(d.bytes, o, d.sym_end, &kind, &len))
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: module %zu: symbol record at 0x%" PRIx64 " does not fit", path_.c_str(),
                        m, o);
    if (is_proc(kind)) {
      if (len < 39)
        return make_error(SPROV_ERR_TRUNCATED, "%s: module %zu: procedure record at 0x%" PRIx64 " has %u bytes",
                          path_.c_str(), m, o, len);
      const uint8_t* r = d.bytes.data() + o;
      Proc pr;
      pr.kind = kind;
      pr.record = static_cast<uint32_t>(o);
      pr.end = le32(r + 8);
      pr.code_size = le32(r + 16);
      pr.code_offset = le32(r + 32);
      pr.segment = le16(r + 36);
      pr.name = cstr(d.bytes.data(), o + 39, o + len);
      out.push_back(std::move(pr));
    }
    o += len;
  }
  return out;
}

Status PdbFile::load_names() {
  Names& n = *names_;
  if (n.names_loaded) {
    if (n.names_error) return *n.names_error;
    return {};
  }
  n.names_loaded = true;
  if (names_stream_ == 0xffffffff) return {};  // no /names: file names are ""
  auto s = read_stream(names_stream_, "/names");
  if (!s) {
    n.names_error = s.error();
    return *n.names_error;
  }
  const std::vector<uint8_t>& b = s.value();
  if (b.size() < 12 || le32(b.data()) != kStringTableSignature || uint64_t{le32(b.data() + 8)} + 12 > b.size()) {
    n.names_error = make_error(SPROV_ERR_BAD_FORMAT, "%s: /names stream %u has no valid string table header", path_.c_str(),
                               names_stream_);
    return *n.names_error;
  }
  n.names.assign(b.begin() + 12, b.begin() + 12 + le32(b.data() + 8));
  return {};
}

Status PdbFile::load_types() {
  Names& n = *names_;
  if (n.types_loaded) {
    if (n.types_error) return *n.types_error;
    return {};
  }
  n.types_loaded = true;
  auto load = [&](uint32_t stream, const char* what, Names::Types* t) -> Status {
    if (stream >= stream_sizes_.size() || stream_sizes_[stream] == 0) return {};  // no IPI: names are ""
    auto s = read_stream(stream, what);
    if (!s) return s.error();
    t->bytes = std::move(s).value();
    if (t->bytes.size() < kTpiHeaderSize)
      return make_error(SPROV_ERR_TRUNCATED, "%s: %s stream has %zu bytes, its header %u", path_.c_str(), what,
                        t->bytes.size(), kTpiHeaderSize);
    const uint32_t header = le32(t->bytes.data() + 4), rec_bytes = le32(t->bytes.data() + 16);
    t->begin = le32(t->bytes.data() + 8);
    if (header < kTpiHeaderSize || uint64_t{header} + rec_bytes > t->bytes.size())
      return make_error(SPROV_ERR_TRUNCATED, "%s: %s records (header %u + %u bytes) pass the stream's %zu bytes",
                        path_.c_str(), what, header, rec_bytes, t->bytes.size());
    for (uint64_t o = header; o < uint64_t{header} + rec_bytes;) {
      uint16_t kind;
      uint32_t len;
      if (!record_at(t->bytes, o, uint64_t{header} + rec_bytes, &kind, &len) || t->offsets.size() >= kMaxTypeRecords)
        return make_error(SPROV_ERR_BAD_FORMAT, "%s: %s record %zu at 0x%" PRIx64 " does not fit", path_.c_str(), what,
                          t->offsets.size(), o);
      t->offsets.push_back(static_cast<uint32_t>(o));
      o += len;
    }
    return {};
  };
  if (Status s = load(kStreamIpi, "IPI", &n.ipi); !s) {
    n.types_error = s.error();
    return s;
  }
  if (Status s = load(kStreamTpi, "TPI", &n.tpi); !s) {
    n.types_error = s.error();
    return s;
  }
  return {};
}

Status PdbFile::load_publics() {
  Names& n = *names_;
  if (n.publics_loaded) {
    if (n.publics_error) return *n.publics_error;
    return {};
  }
  n.publics_loaded = true;
  if (publics_stream_ == 0xffff || symrec_stream_ == 0xffff) return {};
  auto fail = [&](Error e) {
    n.publics_error = std::move(e);
    return Status(*n.publics_error);
  };
  auto pub = read_stream(publics_stream_, "publics");
  if (!pub) return fail(pub.error());
  auto sym = read_stream(symrec_stream_, "symbol record");
  if (!sym) return fail(sym.error());
  const std::vector<uint8_t>& pb = pub.value();
  if (pb.size() < 28)
    return fail(make_error(SPROV_ERR_TRUNCATED, "%s: publics stream has %zu bytes, its header 28", path_.c_str(), pb.size()));
  const uint32_t hash_bytes = le32(pb.data()), addr_bytes = le32(pb.data() + 4);
  if (28 + uint64_t{hash_bytes} + addr_bytes > pb.size() || addr_bytes % 4 != 0)
    return fail(make_error(SPROV_ERR_TRUNCATED, "%s: publics hash (%u bytes) and address map (%u bytes) pass the "
                           "stream's %zu bytes", path_.c_str(), hash_bytes, addr_bytes, pb.size()));
  const uint8_t* am = pb.data() + 28 + hash_bytes;
  for (uint32_t i = 0; i < addr_bytes / 4; i++) {
    const uint32_t off = le32(am + 4 * i);
    uint16_t kind;
    uint32_t len;
    if (!record_at(sym.value(), off, sym->size(), &kind, &len) || kind != kS_PUB32 || len < 14)
      return fail(make_error(SPROV_ERR_BAD_FORMAT, "%s: public %u at symbol record offset 0x%x is no S_PUB32 record",
                             path_.c_str(), i, off));
    const uint8_t* r = sym->data() + off;
    n.publics.push_back({le32(r + 4), le32(r + 8), le16(r + 12), cstr(sym->data(), uint64_t{off} + 14, uint64_t{off} + len)});
  }
  return {};
}

Result<std::vector<Public>> PdbFile::publics() {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = load_publics(); !s) return s.error();
  return names_->publics;
}

std::string PdbFile::inlinee_name(uint32_t id) {
  if (!load_types()) return {};
  const Names& n = *names_;
  auto rec = [](const Names::Types& t, uint32_t idx, uint16_t* kind, uint32_t* at, uint32_t* end) {
    if (idx < t.begin || idx - t.begin >= t.offsets.size()) return false;
    *at = t.offsets[idx - t.begin];
    *kind = le16(t.bytes.data() + *at + 2);
    *end = *at + 2 + le16(t.bytes.data() + *at);
    return true;
  };
  // An IPI name (llvm TypeNameComputer: LF_FUNC_ID and LF_MFUNC_ID by their name, LF_STRING_ID by its string).
  auto id_name = [&](uint32_t idx) -> std::string {
    uint16_t kind;
    uint32_t at, end;
    if (!rec(n.ipi, idx, &kind, &at, &end)) return {};
    if (kind == kLF_FUNC_ID || kind == kLF_MFUNC_ID) return cstr(n.ipi.bytes.data(), at + 12, end);
    if (kind == kLF_STRING_ID) return cstr(n.ipi.bytes.data(), at + 8, end);
    return {};
  };
  // A class, structure, union, interface or enum's name in the TPI.
  auto class_name = [&](uint32_t idx) -> std::string {
    uint16_t kind;
    uint32_t at, end;
    if (!rec(n.tpi, idx, &kind, &at, &end)) return {};
    const uint8_t* b = n.tpi.bytes.data();
    uint32_t name_at = 0;
    if (kind == kLF_CLASS || kind == kLF_STRUCTURE || kind == kLF_INTERFACE) {
      const uint32_t k = numeric_leaf_size(b, at + 20, end);
      if (k == 0) return {};
      name_at = at + 20 + k;
    } else if (kind == kLF_UNION) {
      const uint32_t k = numeric_leaf_size(b, at + 12, end);
      if (k == 0) return {};
      name_at = at + 12 + k;
    } else if (kind == kLF_ENUM) {
      name_at = at + 16;
    } else {
      return {};
    }
    return cstr(b, name_at, end);
  };
  uint16_t kind;
  uint32_t at, end;
  if (!rec(n.ipi, id, &kind, &at, &end) || end < at + 12) return {};
  std::string q;
  // llvm NativeInlineSiteSymbol::getName: a member function by its class, a function by its scope.
  const uint32_t scope = le32(n.ipi.bytes.data() + at + 4);
  if (kind == kLF_MFUNC_ID) {
    q = class_name(scope) + "::";
  } else if (kind == kLF_FUNC_ID && scope != 0) {
    q = id_name(scope) + "::";
  }
  return q + id_name(id);
}

std::string PdbFile::file_name(const ModuleData& md, uint32_t checksum_offset, bool* ok) {
  *ok = false;
  if (!md.has_checksums || uint64_t{checksum_offset} + 6 > md.checksums_len) return {};
  const uint32_t name_off = le32(md.bytes.data() + md.checksums_at + checksum_offset);
  *ok = true;
  if (!load_names()) return {};
  const Names& n = *names_;
  return name_off < n.names.size() ? cstr(n.names.data(), name_off, n.names.size()) : std::string();
}

uint32_t PdbFile::rva_of(uint32_t sect, uint32_t off) const {
  // NativeSession::getRVAFromSectOffset; section 0 and sections past the table give RVA 0 (LLVM
  // reads past its table there).
  if (sect == 0 || sect > section_rvas_.size()) return 0;
  return section_rvas_[sect - 1] + off;
}

bool PdbFile::module_of(uint64_t rva, uint16_t* m) const {
  auto it = std::upper_bound(module_ranges_.begin(), module_ranges_.end(), rva,
                             [](uint64_t v, const ModuleRange& r) { return v < r.begin; });
  if (it == module_ranges_.begin()) return false;
  --it;
  if (rva >= it->end) return false;
  *m = it->module;
  return true;
}

void PdbFile::build_line_table(ModuleData* md) const {
  // SymbolCache::findLineTable: each line block is a sequence from its subsection's start (with the
  // block's first line) to start + code size (a terminal entry); sequences sorted by first address.
  md->table_built = true;
  std::vector<std::vector<ModuleData::LineEntry>> groups;
  const std::vector<uint8_t>& b = md->bytes;
  for (auto [at, len] : md->lines) {
    if (len < 12) continue;
    const uint32_t reloc_off = le32(b.data() + at);
    const uint16_t reloc_seg = le16(b.data() + at + 4);
    const bool cols = le16(b.data() + at + 6) & 1;  // LF_HaveColumns
    const uint32_t code_size = le32(b.data() + at + 8);
    const uint64_t start = rva_of(reloc_seg, reloc_off);
    for (uint64_t o = uint64_t{at} + 12; o + 12 <= uint64_t{at} + len;) {
      const uint32_t file = le32(b.data() + o), nlines = le32(b.data() + o + 4), block = le32(b.data() + o + 8);
      const uint64_t info = uint64_t{nlines} * (8 + (cols ? 4 : 0));
      if (block < 12 || info > block - 12 || o + block > uint64_t{at} + len) break;  // llvm stops there too
      const uint8_t* ln = b.data() + o + 12;
      const uint8_t* cl = ln + uint64_t{nlines} * 8;
      if (nlines > 0) {
        std::vector<ModuleData::LineEntry> g;
        g.reserve(nlines + 2);
        g.push_back({start, le32(ln + 4) & 0xffffff, cols ? le16(cl) : 0u, file, false});
        for (uint32_t i = 0; i < nlines; i++)
          g.push_back({rva_of(reloc_seg, reloc_off + le32(ln + 8 * i)), le32(ln + 8 * i + 4) & 0xffffff,
                       cols ? le16(cl + 4 * i) : 0u, file, false});
        g.push_back({start + code_size, le32(ln + 8 * (nlines - 1) + 4) & 0xffffff,
                     cols ? le16(cl + 4 * (nlines - 1)) : 0u, file, true});
        groups.push_back(std::move(g));
      }
      o += block;
    }
  }
  std::sort(groups.begin(), groups.end(), [](const auto& l, const auto& r) { return l[0].rva < r[0].rva; });
  for (auto& g : groups) md->table.insert(md->table.end(), g.begin(), g.end());
}

bool PdbFile::line_at(ModuleData* md, uint64_t rva, Frame* out) {
  // SymbolCache::findLineNumbersByVA: the last entry at or before the address, not past a
  // sequence's end; only the first of the lines llvm gathers is used.
  if (!md->table_built) build_line_table(md);
  if (md->table.empty() || !md->has_checksums) return false;
  const auto& t = md->table;
  auto it = std::partition_point(t.begin(), t.end(), [&](const ModuleData::LineEntry& e) {
    return e.rva < rva || (e.rva == rva && e.terminal);
  });
  if (it == t.end() || it->rva > rva) {
    if (it == t.begin() || std::prev(it)->terminal) return false;
    --it;
  }
  bool ok = false;
  std::string f = file_name(*md, it->file, &ok);
  if (!ok) return false;
  out->file = std::move(f);
  out->has_file = true;
  out->line = it->line;
  out->column = it->column;
  return true;
}

void PdbFile::inline_frames(ModuleData* md, const Proc& func, uint32_t code_off, std::vector<Frame>* out) {
  const std::vector<uint8_t>& b = md->bytes;
  struct Site {
    uint32_t inlinee;
    std::vector<Annotation> anns;
  };
  // NativeFunctionSymbol::findInlineFramesByVA: within the procedure, the S_INLINESITE whose code
  // ranges hold the address, then within it the next one, each sibling skipped to its end.
  std::vector<Site> sites;  // outermost first
  uint64_t start = func.record, end = func.end;
  while (start < end && sites.size() < kMaxInlineDepth) {
    bool found = false;
    while (start < end) {
      uint16_t kind;
      uint32_t len;
      if (!record_at(b, start, md->sym_end, &kind, &len)) break;
      if (kind != kS_INLINESITE || len < 16) {
        start += len;
        continue;
      }
      const uint32_t site_end = le32(b.data() + start + 8);
      Site s{le32(b.data() + start + 12), decode_annotations({b.data() + start + 16, len - 16u})};
      if (site_contains(s.anns, code_off)) {
        sites.push_back(std::move(s));
        start += len;
        end = site_end;
        found = true;
        break;
      }
      if (site_end <= start) break;  // a backward S_INLINESITE_END: llvm would loop
      start = site_end;
      if (start >= end) break;
      if (!record_at(b, start, md->sym_end, &kind, &len)) break;
      start += len;  // past the S_INLINESITE_END
    }
    if (!found) break;
  }
  // NativeInlineSiteSymbol::findInlineeLinesByVA for each, innermost first; the first that has no
  // line ends the chain.
  for (auto s = sites.rbegin(); s != sites.rend() && md->has_checksums; ++s) {
    const LineOffset lo = site_line_offset(s->anns, code_off);
    uint32_t file_id = 0, source_line = 0;
    if (!inlinee_entry(*md, s->inlinee, &file_id, &source_line)) break;
    Frame f;
    bool ok = false;
    f.file = file_name(*md, lo.file == 0 ? file_id : lo.file, &ok);
    if (!ok) break;
    f.has_file = true;
    f.line = source_line + lo.line;
    f.column = 0;  // inline sites carry no columns (llvm answers 0)
    f.function = inlinee_name(s->inlinee);
    out->push_back(std::move(f));
  }
}

bool PdbFile::inlinee_entry(const ModuleData& md, uint32_t inlinee, uint32_t* file_id, uint32_t* line) const {
  // The first DEBUG_S_INLINEELINES entry of the inlinee (signature 1 adds extra files to skip).
  const std::vector<uint8_t>& b = md.bytes;
  for (auto [at, len] : md.inlinee_lines) {
    if (len < 4) continue;
    const bool extra = le32(b.data() + at) == 1;
    const uint64_t end = uint64_t{at} + len;
    for (uint64_t o = uint64_t{at} + 4; o + 12 <= end;) {
      uint64_t next = o + 12;
      if (extra) {
        if (next + 4 > end) break;
        next += 4 + uint64_t{le32(b.data() + o + 12)} * 4;
        if (next > end) break;
      }
      if (le32(b.data() + o) == inlinee) {
        *file_id = le32(b.data() + o + 4);
        *line = le32(b.data() + o + 8);
        return true;
      }
      o = next;
    }
  }
  return false;
}

Result<Answer> PdbFile::lookup(uint64_t va, uint64_t load) {
  std::lock_guard<std::mutex> lock(mu_);
  Answer ans;
  // NativeSession::addressForVA: the section holding the RVA and the offset in it.
  const uint64_t rva = va - load;
  const uint32_t rva32 = static_cast<uint32_t>(rva);
  uint32_t sect = 0, off = 0;
  if (static_cast<int32_t>(rva32) >= 0) {
    off = rva32;
    for (; sect < section_rvas_.size(); ++sect) {
      if (rva32 < section_rvas_[sect]) break;
      off = rva32 - section_rvas_[sect];
    }
  }

  // The procedure (SymbolCache::findFunctionSymbolBySectOffset): the first S_*PROC32 of the
  // section offset's module, in scan order, that holds it.
  const Proc* func = nullptr;
  uint16_t fmod = 0;
  if (module_of(rva_of(sect, off), &fmod)) {
    auto md = module_data(fmod);
    if (!md) return md.error();
    const ModuleData& d = *md.value();
    auto holds = [&](const Proc& pr) {
      return sect == pr.segment && off >= pr.code_offset && off < pr.code_offset + pr.code_size;
    };
    if (!d.sorted.empty()) {
      auto it = std::upper_bound(d.sorted.begin(), d.sorted.end(), std::pair<uint32_t, uint32_t>(sect, off),
                                 [](const std::pair<uint32_t, uint32_t>& a, const Proc* b) {
                                   return a.first < b->segment || (a.first == b->segment && a.second < b->code_offset);
                                 });
      if (it != d.sorted.begin() && holds(**std::prev(it))) func = *std::prev(it);
    } else {
      for (const Proc& pr : d.scan) {
        if (holds(pr)) {
          func = &pr;
          break;
        }
      }
    }
  }
  // The public symbol (findPublicSymbolBySectOffset): the last one at or before (sect, off).
  if (Status s = load_publics(); !s) return s.error();
  const std::vector<Public>& pubs = names_->publics;
  auto pit = std::upper_bound(pubs.begin(), pubs.end(), std::pair<uint32_t, uint32_t>(sect, off),
                              [](const std::pair<uint32_t, uint32_t>& a, const Public& b) {
                                return a.first < b.segment || (a.first == b.segment && a.second < b.offset);
                              });
  const Public* pub = pit == pubs.begin() ? nullptr : &*std::prev(pit);
  // PDBContext::getFunctionName: the public's (linkage) name when it starts where the procedure does.
  Frame physical;
  if (pub && (!func || rva_of(func->segment, func->code_offset) == rva_of(pub->segment, pub->offset)))
    physical.function = pub->name;
  else if (func)
    physical.function = func->name;
  if (func) {
    ans.has_proc = true;
    ans.short_name = func->name;
    ans.proc_start = load + rva_of(func->segment, func->code_offset);
  }

  // The line and the inline frames, from the module of the address itself.
  uint16_t lmod = 0;
  if (module_of(rva, &lmod)) {
    auto md = module_data(lmod);
    if (!md) return md.error();
    (void)line_at(md.value(), rva, &physical);
    if (func) inline_frames(md.value(), *func, static_cast<uint32_t>(va - ans.proc_start), &ans.frames);
  }
  ans.frames.push_back(std::move(physical));
  return ans;
}

}  // namespace stackprov::pdb
