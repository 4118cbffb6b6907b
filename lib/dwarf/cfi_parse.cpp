// SPDX-License-Identifier: Apache-2.0
// CIE/FDE decoding for .eh_frame and .debug_frame, and DW_EH_PE pointer reading.
#include <cstring>

#include "dwarf/cfi.hpp"
#include "dwarf/cfi_reader.hpp"

namespace stackprov::dwarf {
namespace detail {

namespace {

// DWARF 5 section 7.2.2: 0xffffffff escapes to a 64-bit length; 0xfffffff0..0xfffffffe are reserved.
constexpr uint64_t kDwarf64Escape = 0xffffffffu;
constexpr uint64_t kReservedLengthMin = 0xfffffff0u;
// DWARF 5 section 7.24 (and DWARF 2-4 7.23): CIE id in .debug_frame.
constexpr uint64_t kDebugFrameCieId32 = 0xffffffffu;
constexpr uint64_t kDebugFrameCieId64 = 0xffffffffffffffffu;
// LSB 10.6.1.1: CIE id in .eh_frame.
constexpr uint64_t kEhFrameCieId = 0;

}  // namespace

int encoded_size(uint8_t encoding, uint8_t addr_size) {
  switch (encoding & kPeFormatMask) {
    case kPeAbsptr:
    case 0x08:  // DW_EH_PE_signed: an address-sized signed value
      return addr_size;
    case kPeUleb128:
    case kPeSleb128:
      return 0;
    case kPeUdata2:
    case kPeSdata2:
      return 2;
    case kPeUdata4:
    case kPeSdata4:
      return 4;
    case kPeUdata8:
    case kPeSdata8:
      return 8;
    default:
      return -1;
  }
}

bool read_encoded(ByteReader& r, uint8_t encoding, uint64_t base_vaddr, const CfiSection& sec,
                  uint8_t addr_size, bool allow_indirect, uint64_t* out) {
  if (encoding == kPeOmit) return false;
  if ((encoding & kPeIndirect) && !allow_indirect) return false;
  uint64_t base = 0;
  switch (encoding & kPeApplMask) {
    case 0:
      break;
    case kPePcrel:
      base = base_vaddr + r.pos;
      break;
    case kPeTextrel:
      base = sec.text_vaddr;
      break;
    case kPeDatarel:
      base = sec.data_vaddr;
      break;
    default:  // funcrel and aligned have no meaning for the pointers we read
      return false;
  }
  uint64_t v = 0;
  switch (encoding & kPeFormatMask) {
    case kPeAbsptr:
      if (!r.uN(addr_size, &v)) return false;
      break;
    case 0x08:  // DW_EH_PE_signed
      if (!r.uN(addr_size, &v)) return false;
      if (addr_size == 4) v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v)));
      break;
    case kPeUleb128:
      if (!r.uleb(&v)) return false;
      break;
    case kPeUdata2:
      if (!r.u16(&v)) return false;
      break;
    case kPeUdata4:
      if (!r.u32(&v)) return false;
      break;
    case kPeUdata8:
      if (!r.u64(&v)) return false;
      break;
    case kPeSleb128: {
      int64_t s = 0;
      if (!r.sleb(&s)) return false;
      v = static_cast<uint64_t>(s);
      break;
    }
    case kPeSdata2:
      if (!r.u16(&v)) return false;
      v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(v)));
      break;
    case kPeSdata4:
      if (!r.u32(&v)) return false;
      v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v)));
      break;
    case kPeSdata8:
      if (!r.u64(&v)) return false;
      break;
    default:
      return false;
  }
  *out = (base + v) & addr_mask(addr_size);
  return true;
}

CfiStatus read_entry_header(const CfiSection& sec, uint64_t offset, EntryHeader* out) {
  if (sec.data == nullptr || offset >= sec.size) return CfiStatus::kBadCfi;
  ByteReader r{sec.data, sec.size, static_cast<size_t>(offset), sec.big_endian};
  uint64_t length = 0;
  if (!r.u32(&length)) return CfiStatus::kBadCfi;
  EntryHeader h;
  h.offset = offset;
  if (length == 0) {
    h.terminator = true;
    h.end = r.pos;
    *out = h;
    return CfiStatus::kOk;
  }
  if (length == kDwarf64Escape) {
    if (!r.u64(&length)) return CfiStatus::kBadCfi;
    h.dwarf64 = true;
  } else if (length >= kReservedLengthMin) {
    return CfiStatus::kBadCfi;
  }
  if (length > r.remaining()) return CfiStatus::kBadCfi;
  h.end = r.pos + length;
  r.end = static_cast<size_t>(h.end);
  h.id_pos = r.pos;
  // The id field is offset-sized in both sections (as readelf and LLVM read
  // 64-bit .eh_frame; LSB only describes the 32-bit format).
  uint64_t id = 0;
  if (!r.uN(h.dwarf64 ? 8 : 4, &id)) return CfiStatus::kBadCfi;
  h.body_pos = r.pos;
  if (sec.is_eh_frame) {
    if (id == kEhFrameCieId) {
      h.is_cie = true;
    } else {
      // LSB 10.6.1.2: relative to the CIE pointer field. A pointer before the
      // section start keeps the entry walkable; decode_fde rejects it.
      h.cie_offset = id > h.id_pos ? ~uint64_t{0} : h.id_pos - id;
    }
  } else {
    if (id == (h.dwarf64 ? kDebugFrameCieId64 : kDebugFrameCieId32)) {
      h.is_cie = true;
    } else {
      h.cie_offset = id;  // DWARF 5 section 6.4.1: offset into .debug_frame
    }
  }
  *out = h;
  return CfiStatus::kOk;
}

namespace {

struct CieInfo {
  uint64_t instr_offset = 0;
  uint64_t instr_len = 0;
  uint64_t code_align = 1;
  int64_t data_align = 1;
  uint16_t ra_reg = 0;
  uint8_t fde_encoding = kPeAbsptr;
  uint8_t lsda_encoding = kPeOmit;
  uint8_t version = 1;
  uint8_t addr_size = 8;
  bool has_z = false;
  bool signal_frame = false;
};

bool valid_encoding(uint8_t enc) {
  if (enc == kPeOmit) return true;
  return encoded_size(enc, 8) >= 0 && (enc & kPeApplMask) <= kPeFuncrel;
}

// DWARF 5 section 6.4.1 (CIE layout) and LSB 10.6.1.1 (augmentation data).
CfiStatus parse_cie(const CfiSection& sec, uint64_t cie_offset, CieInfo* out) {
  EntryHeader h;
  CfiStatus st = read_entry_header(sec, cie_offset, &h);
  if (st != CfiStatus::kOk) return st;
  if (h.terminator || !h.is_cie) return CfiStatus::kBadCfi;
  ByteReader r{sec.data, static_cast<size_t>(h.end), static_cast<size_t>(h.body_pos),
               sec.big_endian};
  CieInfo c;
  c.addr_size = sec.addr_size;
  if (!r.u8(&c.version)) return CfiStatus::kBadCfi;
  if (sec.is_eh_frame) {
    if (c.version != 1 && c.version != 3) return CfiStatus::kUnsupported;
  } else if (c.version != 1 && c.version != 3 && c.version != 4) {
    return CfiStatus::kUnsupported;
  }
  const char* aug = reinterpret_cast<const char*>(sec.data + r.pos);
  const void* nul = std::memchr(sec.data + r.pos, 0, r.remaining());
  if (nul == nullptr) return CfiStatus::kBadCfi;
  size_t aug_len = static_cast<const uint8_t*>(nul) - (sec.data + r.pos);
  r.pos += aug_len + 1;
  // GCC's pre-'z' "eh" augmentation carries an EH data pointer; long obsolete.
  if (aug_len >= 2 && aug[0] == 'e' && aug[1] == 'h') return CfiStatus::kUnsupported;
  if (aug_len > 0 && aug[0] != 'z') return CfiStatus::kUnsupported;
  if (c.version == 4) {
    uint8_t asz = 0, seg = 0;
    if (!r.u8(&asz) || !r.u8(&seg)) return CfiStatus::kBadCfi;
    if (asz != 4 && asz != 8) return CfiStatus::kUnsupported;
    if (seg != 0) return CfiStatus::kUnsupported;
    c.addr_size = asz;
  }
  int64_t data_align = 0;
  if (!r.uleb(&c.code_align) || !r.sleb(&data_align)) return CfiStatus::kBadCfi;
  c.data_align = data_align;
  uint64_t ra = 0;
  if (c.version == 1) {
    uint8_t ra8 = 0;
    if (!r.u8(&ra8)) return CfiStatus::kBadCfi;
    ra = ra8;
  } else if (!r.uleb(&ra)) {
    return CfiStatus::kBadCfi;
  }
  if (ra >= static_cast<uint64_t>(kMaxCfiRegs)) return CfiStatus::kBadCfi;
  c.ra_reg = static_cast<uint16_t>(ra);
  if (aug_len > 0) {
    c.has_z = true;
    uint64_t zlen = 0;
    if (!r.uleb(&zlen) || zlen > r.remaining()) return CfiStatus::kBadCfi;
    const size_t aug_end = r.pos + static_cast<size_t>(zlen);
    ByteReader a{sec.data, aug_end, r.pos, sec.big_endian};
    for (size_t i = 1; i < aug_len; ++i) {
      const char ch = aug[i];
      if (ch == 'R') {
        if (!a.u8(&c.fde_encoding) || !valid_encoding(c.fde_encoding)) return CfiStatus::kBadCfi;
        if (c.fde_encoding == kPeOmit) return CfiStatus::kBadCfi;
      } else if (ch == 'L') {
        if (!a.u8(&c.lsda_encoding) || !valid_encoding(c.lsda_encoding)) return CfiStatus::kBadCfi;
      } else if (ch == 'P') {
        // Skip the personality pointer by its value format (it is usually indirect|pcrel|sdata4).
        uint8_t penc = 0;
        if (!a.u8(&penc) || penc == kPeOmit || !valid_encoding(penc)) return CfiStatus::kBadCfi;
        uint64_t ignored = 0;
        if (!read_encoded(a, penc & (kPeFormatMask), 0, sec, c.addr_size, false, &ignored)) {
          return CfiStatus::kBadCfi;
        }
      } else if (ch == 'S') {
        c.signal_frame = true;
      } else if (ch == 'B' || ch == 'G') {
        // arm64 B-key PAC and MTE-tagged frames: no augmentation data.
      } else {
        break;  // unknown: the 'z' length still tells where the data ends
      }
    }
    r.pos = aug_end;
  }
  c.instr_offset = r.pos;
  c.instr_len = h.end - r.pos;
  *out = c;
  return CfiStatus::kOk;
}

}  // namespace
}  // namespace detail

bool read_encoded_pointer(const uint8_t* data, size_t size, size_t* pos, uint8_t encoding,
                          uint64_t field_vaddr, const CfiSection& sec, uint64_t* out) {
  if (data == nullptr || pos == nullptr || out == nullptr || *pos > size) return false;
  if (sec.addr_size != 4 && sec.addr_size != 8) return false;
  detail::ByteReader r{data, size, *pos, sec.big_endian};
  uint64_t v = 0;
  if (!detail::read_encoded(r, encoding, field_vaddr, sec, sec.addr_size, false, &v)) return false;
  *pos = r.pos;
  *out = v;
  return true;
}

CfiStatus decode_fde(const CfiSection& sec, uint64_t fde_offset, FdeInfo* out) {
  using namespace detail;
  if (sec.data == nullptr || sec.size == 0) return CfiStatus::kBadCfi;
  if (sec.size > UINT32_MAX) return CfiStatus::kUnsupported;  // FdeInfo offsets are 32-bit
  if (sec.addr_size != 4 && sec.addr_size != 8) return CfiStatus::kBadCfi;
  EntryHeader h;
  CfiStatus st = read_entry_header(sec, fde_offset, &h);
  if (st != CfiStatus::kOk) return st;
  if (h.terminator || h.is_cie) return CfiStatus::kBadCfi;
  CieInfo c;
  st = parse_cie(sec, h.cie_offset, &c);
  if (st != CfiStatus::kOk) return st;

  ByteReader r{sec.data, static_cast<size_t>(h.end), static_cast<size_t>(h.body_pos),
               sec.big_endian};
  uint64_t pc_begin = 0, pc_range = 0;
  if (!read_encoded(r, c.fde_encoding, sec.vaddr, sec, c.addr_size, false, &pc_begin)) {
    return (c.fde_encoding & kPeIndirect) ? CfiStatus::kUnsupported : CfiStatus::kBadCfi;
  }
  // LSB 10.6.1.2: the range uses the value format only, no application.
  if (!read_encoded(r, c.fde_encoding & kPeFormatMask, 0, sec, c.addr_size, false, &pc_range)) {
    return CfiStatus::kBadCfi;
  }
  const uint64_t pc_end = pc_begin + pc_range;
  if (pc_end < pc_begin || pc_end > addr_mask(c.addr_size) + (c.addr_size < 8 ? 1 : 0)) {
    return CfiStatus::kBadCfi;
  }
  if (c.has_z) {
    uint64_t zlen = 0;
    if (!r.uleb(&zlen) || zlen > r.remaining()) return CfiStatus::kBadCfi;
    const size_t aug_end = r.pos + static_cast<size_t>(zlen);
    if (c.lsda_encoding != kPeOmit) {
      // The LSDA pointer only matters to an exception personality: checked, not kept.
      ByteReader a{sec.data, aug_end, r.pos, sec.big_endian};
      uint64_t lsda = 0;
      if (!read_encoded(a, c.lsda_encoding, sec.vaddr, sec, c.addr_size, true, &lsda)) {
        return CfiStatus::kBadCfi;
      }
    }
    r.pos = aug_end;
  }
  FdeInfo f;
  f.pc_begin = pc_begin;
  f.pc_end = pc_end;
  f.fde_offset = static_cast<uint32_t>(fde_offset);
  f.cie_offset = static_cast<uint32_t>(h.cie_offset);
  f.cie_instr_offset = static_cast<uint32_t>(c.instr_offset);
  f.cie_instr_len = static_cast<uint32_t>(c.instr_len);
  f.fde_instr_offset = static_cast<uint32_t>(r.pos);
  f.fde_instr_len = static_cast<uint32_t>(h.end - r.pos);
  f.code_align = c.code_align;
  f.data_align = c.data_align;
  f.ra_reg = c.ra_reg;
  f.fde_encoding = c.fde_encoding;
  f.signal_frame = c.signal_frame;
  f.cie_version = c.version;
  f.addr_size = c.addr_size;
  *out = f;
  return CfiStatus::kOk;
}

}  // namespace stackprov::dwarf
