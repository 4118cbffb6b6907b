// SPDX-License-Identifier: Apache-2.0
// Bundle builder: walks a module's executable bytes through DwarfResolver, coalesces equal inline chains into range records and finds return pads.
#include "symbolize/bundle_builder.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "elf/elf_image.hpp"
#include "evidence/encoding.hpp"
#include "symbolize/dwarf_resolver.hpp"

namespace stackprov::symbolize {

namespace {

std::string basename_of(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

/// The record of depth `d` for a chain `frames` (innermost first, as the resolver answers).
bundle::RangeRecord record_at(const std::vector<ResolvedFrame>& frames, size_t d) {
  const size_t n = frames.size();
  const ResolvedFrame& f = frames[n - 1 - d];
  bundle::RangeRecord r;
  r.depth = static_cast<uint16_t>(d);
  r.function = f.function;
  r.file = f.file;
  r.line = f.line;
  r.column = f.column;
  if (d > 0) {
    const ResolvedFrame& caller = frames[n - d];  // its position is this instance's call site
    r.call_file = caller.file;
    r.call_line = caller.line;
    r.call_column = caller.column;
  }
  return r;
}

bool same_key(const bundle::RangeRecord& a, const bundle::RangeRecord& b) {
  return a.function == b.function && a.file == b.file && a.line == b.line && a.column == b.column &&
         a.call_file == b.call_file && a.call_line == b.call_line && a.call_column == b.call_column;
}

/// Open ranges, one per depth; closing depth k closes every deeper one too, so an
/// inlined range never crosses a boundary of its caller's range.
class RangeCoalescer {
 public:
  explicit RangeCoalescer(std::vector<bundle::RangeRecord>* out) : out_(out) {}

  void add(uint64_t addr, const std::vector<ResolvedFrame>& frames, bool from_symtab = false) {
    const size_t n = std::min<size_t>(frames.size(), bundle::kMaxInlineDepth + 1);
    size_t keep = 0;
    if (addr == next_) {
      while (keep < open_.size() && keep < n) {
        const bundle::RangeRecord r = record_at(frames, keep);
        if (!same_key(open_[keep], r) || open_[keep].length == UINT32_MAX) break;
        ++keep;
      }
    }
    close_from(keep);
    for (size_t d = 0; d < keep; ++d) ++open_[d].length;
    for (size_t d = keep; d < n; ++d) {
      bundle::RangeRecord r = record_at(frames, d);
      r.start = addr;
      r.length = 1;
      r.from_symtab = from_symtab && d == 0;
      open_.push_back(std::move(r));
    }
    next_ = addr + 1;
  }
  void gap() { close_from(0); }

 private:
  void close_from(size_t k) {
    while (open_.size() > k) {
      out_->push_back(std::move(open_.back()));
      open_.pop_back();
    }
  }
  std::vector<bundle::RangeRecord>* out_;
  std::vector<bundle::RangeRecord> open_;
  uint64_t next_ = UINT64_MAX;
};

}  // namespace

// ---- call instructions -------------------------------------------------------------

namespace {

// One-byte opcode map, 64-bit mode. Bits: kM ModRM follows; kI8/kI16/kIz/kIv immediate
// (kIz: 2 with 0x66 else 4; kIv: kIz, or 8 with REX.W); kX invalid in 64-bit mode.
enum : uint8_t { kM = 1, kI8 = 2, kI16 = 4, kIz = 8, kIv = 16, kX = 32, kMoffs = 64 };

constexpr uint8_t one_byte(unsigned op) {
  if (op < 0x40) {
    const unsigned lo = op & 7;
    if (op == 0x06 || op == 0x07 || op == 0x0e || op == 0x16 || op == 0x17 || op == 0x1e || op == 0x1f ||
        op == 0x27 || op == 0x2f || op == 0x37 || op == 0x3f)
      return kX;
    if (lo <= 3) return kM;
    if (lo == 4) return kI8;
    if (lo == 5) return kIz;
    return 0;  // prefixes (26 2e 36 3e) and 0f are handled before
  }
  if (op < 0x60) return 0;  // REX (handled before), push/pop
  switch (op) {
    case 0x60: case 0x61: case 0x62: case 0x82: case 0x9a: case 0xce: case 0xd4: case 0xd5: case 0xd6: case 0xea:
      return kX;
    case 0x63: return kM;
    case 0x68: return kIz;
    case 0x69: return kM | kIz;
    case 0x6a: return kI8;
    case 0x6b: return kM | kI8;
    case 0x80: case 0x83: case 0xc0: case 0xc1: case 0xc6: return kM | kI8;
    case 0x81: case 0xc7: return kM | kIz;
    case 0xa0: case 0xa1: case 0xa2: case 0xa3: return kMoffs;
    case 0xa8: return kI8;
    case 0xa9: return kIz;
    case 0xc2: case 0xca: return kI16;
    case 0xc8: return kI16 | kI8;
    case 0xcd: return kI8;
    case 0xe8: case 0xe9: return kIz;
    case 0xe0: case 0xe1: case 0xe2: case 0xe3: case 0xe4: case 0xe5: case 0xe6: case 0xe7: case 0xeb: return kI8;
    case 0xf6: case 0xf7: return kM;  // immediate only for /0 and /1 (below)
    case 0xfe: case 0xff: return kM;
    default: break;
  }
  if (op >= 0x70 && op <= 0x7f) return kI8;
  if (op >= 0x84 && op <= 0x8f) return kM;
  if (op >= 0xb0 && op <= 0xb7) return kI8;
  if (op >= 0xb8 && op <= 0xbf) return kIv;
  if (op >= 0xd0 && op <= 0xd3) return kM;
  if (op >= 0xd8 && op <= 0xdf) return kM;
  return 0;
}

constexpr uint8_t two_byte(unsigned op) {
  switch (op) {
    case 0x04: case 0x0a: case 0x0c: case 0x24: case 0x25: case 0x26: case 0x27: case 0x36: case 0x39: case 0x3b:
    case 0x3c: case 0x3d: case 0x3e: case 0x3f: case 0x7a: case 0x7b: case 0xa6: case 0xa7:
      return kX;
    case 0x05: case 0x06: case 0x07: case 0x08: case 0x09: case 0x0b: case 0x0e: case 0x30: case 0x31: case 0x32:
    case 0x33: case 0x34: case 0x35: case 0x37: case 0x77: case 0xa0: case 0xa1: case 0xa2: case 0xa8: case 0xa9:
    case 0xaa:
      return 0;
    case 0x0f: return kM | kI8;  // 3DNow!
    case 0x70: case 0x71: case 0x72: case 0x73: case 0xa4: case 0xac: case 0xba: case 0xc2: case 0xc4: case 0xc5:
    case 0xc6:
      return kM | kI8;
    default: break;
  }
  if (op >= 0x80 && op <= 0x8f) return kIz;
  if (op >= 0xc8 && op <= 0xcf) return 0;
  return kM;
}

/// ModRM (+ SIB + displacement) length at p; 0 when truncated.
size_t modrm_length(const uint8_t* p, size_t n) {
  if (n < 1) return 0;
  const unsigned mod = p[0] >> 6, rm = p[0] & 7;
  size_t len = 1;
  if (mod == 3) return len;
  if (rm == 4) {
    if (n < 2) return 0;
    len++;
    if (mod == 0 && (p[1] & 7) == 5) len += 4;
  } else if (mod == 0 && rm == 5) {
    len += 4;  // RIP-relative
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len <= n ? len : 0;
}

}  // namespace

size_t x86_64_insn_length(const uint8_t* p, size_t n, bool* call) {
  *call = false;
  size_t i = 0;
  bool opsize = false, addrsize = false, rex_w = false;
  for (; i < n && i < 14; i++) {
    const uint8_t b = p[i];
    if (b == 0x66) opsize = true;
    else if (b == 0x67) addrsize = true;
    else if (b == 0xf0 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 ||
             b == 0x65)
      continue;
    else
      break;
  }
  if (i < n && (p[i] & 0xf0) == 0x40) {
    rex_w = (p[i] & 8) != 0;
    i++;
  }
  if (i >= n || i >= 15) return 0;
  const uint8_t op = p[i++];
  const size_t iz = opsize ? 2 : 4;
  auto finish = [&](size_t len) { return len <= 15 && len <= n ? len : 0; };
  if (op == 0xc4 || op == 0xc5 || op == 0x62) {  // VEX3, VEX2, EVEX: map, opcode, ModRM
    const size_t payload = op == 0xc5 ? 1 : op == 0xc4 ? 2 : 3;
    if (i + payload + 1 > n) return 0;
    const unsigned map = op == 0xc5 ? 1 : (p[i] & (op == 0x62 ? 7 : 0x1f));
    i += payload;
    const uint8_t vop = p[i++];
    if (map == 0 || map == 4 || map == 7 || (op == 0xc4 && map > 3)) return 0;
    const size_t m = modrm_length(p + i, n - i);
    if (m == 0) return 0;
    i += m;
    if (map == 3 || (map == 1 && ((vop >= 0x70 && vop <= 0x73) || vop == 0xc2 || vop == 0xc4 || vop == 0xc5 ||
                                  vop == 0xc6)))
      i += 1;
    return finish(i);
  }
  uint8_t f;
  if (op == 0x0f) {
    if (i >= n) return 0;
    const uint8_t op2 = p[i++];
    if (op2 == 0x38 || op2 == 0x3a) {
      if (i >= n) return 0;
      i++;  // third opcode byte
      const size_t m = modrm_length(p + i, n - i);
      if (m == 0) return 0;
      i += m + (op2 == 0x3a ? 1 : 0);
      return finish(i);
    }
    f = two_byte(op2);
  } else {
    f = one_byte(op);
  }
  if (f & kX) return 0;
  uint8_t reg = 0;
  if (f & kM) {
    if (i >= n) return 0;
    reg = (p[i] >> 3) & 7;
    const size_t m = modrm_length(p + i, n - i);
    if (m == 0) return 0;
    i += m;
  }
  if (f & kI8) i += 1;
  if (f & kI16) i += 2;
  if (f & kIz) i += iz;
  if (f & kIv) i += rex_w ? 8 : iz;
  if (f & kMoffs) i += addrsize ? 4 : 8;
  if ((op == 0xf6 || op == 0xf7) && reg <= 1) i += op == 0xf6 ? 1 : iz;
  if (op == 0xe8 || (op == 0xff && (reg == 2 || reg == 3))) *call = true;
  // Near call/jmp/jcc rel32 ignore 0x66 in 64-bit mode (Intel; what objdump decodes): keep rel32.
  if (opsize && (op == 0xe8 || op == 0xe9 || (op == 0x0f && (f & kIz) != 0))) i += 2;
  return finish(i);
}

std::vector<CallSite> decode_calls(Arch arch, bool big_endian, const uint8_t* code, size_t n, uint64_t addr,
                                   size_t* undecoded) {
  std::vector<CallSite> out;
  if (arch == Arch::kX86_64) {
    for (size_t i = 0; i < n;) {
      bool call = false;
      const size_t len = x86_64_insn_length(code + i, n - i, &call);
      if (len == 0) {
        if (undecoded) ++*undecoded;
        i++;
        continue;
      }
      if (call) out.push_back({addr + i, static_cast<uint32_t>(len), addr + i + len});
      i += len;
    }
    return out;
  }
  if (arch != Arch::kArm64 && arch != Arch::kMips32) return out;
  const size_t skew = (4 - addr % 4) % 4;  // instructions are 4-byte aligned
  for (size_t i = skew; i + 4 <= n; i += 4) {
    const uint8_t* b = code + i;
    const uint32_t w = big_endian ? (uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3])
                                  : (uint32_t{b[3]} << 24 | uint32_t{b[2]} << 16 | uint32_t{b[1]} << 8 | b[0]);
    if (arch == Arch::kArm64) {
      const bool bl = (w & 0xfc000000u) == 0x94000000u;
      const bool blr = (w & 0xfffffc1fu) == 0xd63f0000u;
      const bool blra = (w & 0xfefff800u) == 0xd63f0800u;  // BLRAA/BLRAB, BLRAAZ/BLRABZ
      if (bl || blr || blra) out.push_back({addr + i, 4, addr + i + 4});
    } else {
      const bool jal = (w >> 26) == 3;
      const bool jalr = (w & 0xfc00003fu) == 0x00000009u;
      const bool bxzal = (w & 0xfc1e0000u) == 0x04100000u;  // BLTZAL (rt 0x10), BGEZAL/BAL (rt 0x11)
      if (jal || jalr || bxzal) out.push_back({addr + i, 4, addr + i + 8});  // the delay slot executes first
    }
  }
  return out;
}

Result<bundle::ModuleContents> build_module_contents(const std::string& path, const BundleBuildOptions& opts,
                                                     BundleBuildReport* report) {
  auto img = elf::ElfImage::open(path);
  if (!img) return std::move(img).error();
  std::shared_ptr<elf::ElfImage> image = img.value();
  const ModuleId& id = image->build_id();
  if (id.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no GNU build-id note (a bundle module needs one)", path.c_str());

  bundle::ModuleContents m;
  m.id.kind = bundle::IdKind::kElfBuildId;
  m.id.bytes.assign(id.bytes, id.bytes + id.len);
  m.name = opts.name.empty() ? basename_of(path) : opts.name;
  m.sha256_file = evidence::sha256(image->file_data(), image->file_size());

  DwarfResolverOptions ro;
  ro.demangle = false;
  ro.debug = opts.debug;
  ro.debuginfod = false;
  DwarfResolver resolver(ro);
  const ModuleReport mr = resolver.report(image);
  // A module without DWARF (a stripped or release build) is described by its symbol tables
  // alone: symbol-table ranges, no lines, no return pads; sha256_debug stays zero (unknown).
  if (mr.dwarf_file.empty()) {
    // nothing to hash
  } else if (mr.dwarf_file == image->path()) {
    m.sha256_debug = m.sha256_file;
  } else {
    auto dbg = elf::ElfImage::open(mr.dwarf_file);  // mapped read-only, as the resolver does
    if (!dbg) return std::move(dbg).error();
    m.sha256_debug = evidence::sha256(dbg.value()->file_data(), dbg.value()->file_size());
  }

  BundleBuildReport rep;
  rep.debug_file = mr.dwarf_file;
  // Executable sections, in address order.
  std::vector<std::pair<uint64_t, uint64_t>> text;
  for (size_t i = 1; i < image->section_count(); ++i) {
    if (image->section_type(i) != SHT_PROGBITS || (image->section_flags(i) & SHF_EXECINSTR) == 0) continue;
    const auto [lo, hi] = image->section_range(i);
    if (hi > lo) text.emplace_back(lo, hi);
  }
  std::sort(text.begin(), text.end());
  RangeCoalescer co(&m.ranges);
  Resolution res;
  bool last_symtab = false;
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // DWARF-described byte runs, per section
  for (const auto& [lo, hi] : text) {
    if (hi - lo > opts.max_text_bytes - std::min(rep.text_bytes, opts.max_text_bytes))
      return make_error(SPROV_ERR_INVALID_ARG, "%s: executable sections exceed the %zu-byte limit", path.c_str(),
                        opts.max_text_bytes);
    rep.text_bytes += hi - lo;
    for (uint64_t a = lo; a < hi; ++a) {
      res = Resolution{};
      const bool ok = resolver.resolve(image, a, &res, SymtabPolicy::kModuleOnly) && !res.frames.empty();
      const bool from_dwarf = ok && res.resolver == ResolvedBy::kDwarf;
      // Symbol-table answers (llvm-symbolizer-14 names the address from .symtab/.dynsym alone:
      // `_start`, .init, assembly or CUs without DWARF): one depth-0 frame, the linkage name and
      // what llvm prints as file:line:column there ("??:0:0" = "", 0, 0, or the STT_FILE name).
      const bool from_symtab = ok && (res.resolver == ResolvedBy::kSymtab || res.resolver == ResolvedBy::kDynsym) &&
                               res.frames.size() == 1 && !res.frames[0].function.empty();
      if (!from_dwarf && !from_symtab) {
        co.gap();
        continue;
      }
      if (from_symtab) {
        ++rep.symtab_bytes;
        // Never merge a symbol-table range with a DWARF range (each keeps its own record).
        if (!last_symtab) co.gap();
        last_symtab = true;
        co.add(a, res.frames, true);
        continue;
      }
      if (last_symtab) co.gap();
      last_symtab = false;
      ++rep.dwarf_bytes;
      co.add(a, res.frames);
      if (!runs.empty() && runs.back().second == a)
        runs.back().second = a + 1;
      else
        runs.emplace_back(a, a + 1);
    }
    co.gap();
    // Return pads: the calls of each run, decoded from its first byte (a DWARF range
    // starts at an instruction boundary), each with the chain at its last byte.
    std::optional<elf::Section> sec;
    for (size_t i = 1; i < image->section_count() && !sec; ++i)
      if (image->section_range(i).first == lo && image->section_type(i) == SHT_PROGBITS &&
          (image->section_flags(i) & SHF_EXECINSTR) != 0)
        sec = image->section_at(i);
    for (const auto& [rlo, rhi] : runs) {
      if (!sec || sec->data == nullptr || rhi - lo > sec->size) continue;
      const auto calls = decode_calls(image->arch(), image->big_endian(), sec->data + (rlo - lo), rhi - rlo, rlo,
                                      &rep.undecoded);
      for (const CallSite& c : calls) {
        res = Resolution{};
        if (!resolver.resolve(image, c.addr + c.length - 1, &res, SymtabPolicy::kModuleOnly) ||
            res.resolver != ResolvedBy::kDwarf || res.frames.empty())
          continue;
        bundle::ReturnPadRecord pad;
        pad.addr = c.pad;
        const size_t nf = std::min<size_t>(res.frames.size(), bundle::kMaxInlineDepth + 1);
        for (size_t d = 0; d < nf; ++d) {
          const ResolvedFrame& f = res.frames[res.frames.size() - 1 - d];
          pad.frames.push_back({f.function, f.file, f.line, f.column});
        }
        m.return_pads.push_back(std::move(pad));
        ++rep.calls;
      }
    }
    runs.clear();
  }
  if (report) *report = rep;
  return m;
}

}  // namespace stackprov::symbolize
