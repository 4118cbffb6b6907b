// SPDX-License-Identifier: Apache-2.0
// Go symbol tables: the runtime's pclntab (Go 1.18+ layout) read from a Go binary, stripped or not —
// function, file:line and inline chains (FUNCDATA_InlTree / PCDATA_InlTreeIndex), and pcsp SP deltas.
#include "symbolize/gopclntab.hpp"

#include <cstring>


namespace stackprov::symbolize {
namespace {

constexpr uint32_t kMagic118 = 0xfffffff0;  // Go 1.18, 1.19
constexpr uint32_t kMagic120 = 0xfffffff1;  // Go 1.20+
constexpr uint32_t kPcdataInlTreeIndex = 2;  // runtime/symtab.go _PCDATA_InlTreeIndex
constexpr uint32_t kFuncdataInlTree = 3;     // _FUNCDATA_InlTree
constexpr size_t kMaxInlineDepth = 64;

uint32_t rd32(const uint8_t* p, bool be) {
  return be ? (uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3])
            : (uint32_t(p[3]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | p[0]);
}

uint64_t rdptr(const uint8_t* p, bool be, uint8_t ptr_size) {
  if (ptr_size == 4) return rd32(p, be);
  uint64_t hi = rd32(p + (be ? 0 : 4), be), lo = rd32(p + (be ? 4 : 0), be);
  return hi << 32 | lo;
}

// Reads one uvarint from [*p, end); false at the end of the buffer.
bool uvarint(const uint8_t*& p, const uint8_t* end, uint32_t* out) {
  uint32_t v = 0;
  for (int shift = 0; p < end && shift < 35; shift += 7) {
    uint8_t b = *p++;
    v |= uint32_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// [off, off + n) lies in the image's file (hostile program headers may wrap).
bool in_file(std::span<const uint8_t> file, uint64_t off, uint64_t n) {
  return off <= file.size() && n <= file.size() - off;
}

}  // namespace

uint32_t GoPclntab::u32(const uint8_t* p) const { return rd32(p, big_endian_); }
uint64_t GoPclntab::uptr(const uint8_t* p) const { return rdptr(p, big_endian_, ptr_size_); }

std::unique_ptr<GoPclntab> GoPclntab::load(std::shared_ptr<const object::ObjectImage> image) {
  if (!image) return nullptr;
  auto t = std::unique_ptr<GoPclntab>(new GoPclntab());
  t->image_ = image;
  t->file_ = image->file_bytes();
  t->segs_ = image->loaded_segments();
  t->path_ = &image->path();
  t->id_ = &image->id();
  t->big_endian_ = image->big_endian();
  // A header is accepted when its magic, pads, pointer size and table offsets are consistent.
  auto accept = [&](const uint8_t* p, size_t avail, uint64_t vaddr) {
    if (avail < 8) return false;
    const uint32_t magic = rd32(p, t->big_endian_);
    if ((magic != kMagic118 && magic != kMagic120) || p[4] != 0 || p[5] != 0) return false;
    const uint8_t lc = p[6], ps = p[7];
    if ((lc != 1 && lc != 2 && lc != 4) || (ps != 4 && ps != 8) || avail < 8 + 8u * ps) return false;
    auto w = [&](int i) { return rdptr(p + 8 + size_t(i) * ps, t->big_endian_, ps); };
    const uint64_t nfunc = w(0), text = w(2), offs[5] = {w(3), w(4), w(5), w(6), w(7)};
    for (uint64_t o : offs)
      if (o < 8 + 8u * ps || o >= avail) return false;
    // functab: nfunc {entryoff, funcoff} pairs and the end of the text (u32).
    if (nfunc == 0 || avail - offs[4] < 4 || nfunc > (avail - offs[4] - 4) / 8) return false;
    t->go120_ = magic == kMagic120;
    t->min_lc_ = lc;
    t->ptr_size_ = ps;
    t->nfunc_ = nfunc;
    t->text_start_ = text;
    t->funcname_off_ = offs[0];
    t->cu_off_ = offs[1];
    t->filetab_off_ = offs[2];
    t->pctab_off_ = offs[3];
    t->pcln_off_ = offs[4];
    t->base_ = p;
    t->size_ = avail;
    t->vaddr_ = vaddr;
    return true;
  };
  bool found = false;
  for (const char* name : {".gopclntab", ".data.rel.ro.gopclntab"}) {
    auto s = image->section(name);
    if (s && s->data && accept(s->data, s->size, s->addr)) {
      t->found_by_ = std::string("section ") + name;
      found = true;
      break;
    }
  }
  // The magic searches below read megabytes: they run only for a Go binary (the Go linker's
  // build-info section or build-id note survives -s -w and renamed sections) or an image
  // without section headers, not for every C module a frame of which no other resolver named.
  const bool no_sections = !image->has_section_table();
  const bool go_binary = image->section(".go.buildinfo").has_value() || image->section(".note.go.buildid").has_value();
  if (!found && go_binary) {
    // Renamed or unnamed: the linker aligns the table; search the data sections for a valid header.
    for (const char* name : {".data.rel.ro", ".rodata", ".noptrdata", ".text"}) {
      auto s = image->section(name);
      if (!s || !s->data) continue;
      for (size_t off = 0; off + 64 <= s->size && !found; off += 8)
        if (accept(s->data + off, s->size - off, s->addr + off)) {
          t->found_by_ = std::string("magic in ") + name;
          found = true;
        }
      if (found) break;
    }
  }
  if (!found && (no_sections || go_binary)) {
    // No section headers at all (or none holds the table): the loadable segments.
    for (const object::Segment& ph : t->segs_) {
      if (!in_file(t->file_, ph.offset, ph.file_size)) continue;
      const uint8_t* d = t->file_.data() + ph.offset;
      for (size_t off = 0; off + 64 <= ph.file_size && !found; off += 8)
        if (accept(d + off, ph.file_size - off, ph.vaddr + off)) {
          t->found_by_ = "magic in a PT_LOAD segment";
          found = true;
        }
      if (found) break;
    }
  }
  if (!found) return nullptr;
  if (t->text_start_ == 0)  // a PIE whose header was left to a relocation
    if (auto s = image->section(".text")) t->text_start_ = s->addr;
  t->find_gofunc();
  return t;
}

const uint8_t* GoPclntab::vaddr_ptr(uint64_t addr, size_t n) const {
  for (const object::Segment& ph : segs_) {
    if (addr < ph.vaddr || n > ph.file_size || addr - ph.vaddr > ph.file_size - n) continue;
    if (!in_file(file_, ph.offset, ph.file_size)) return nullptr;
    return file_.data() + ph.offset + (addr - ph.vaddr);
  }
  return nullptr;
}

void GoPclntab::find_gofunc() {
  // runtime.moduledata starts with pcHeader *pcHeader, then funcnametab []byte: find the pair in
  // the data sections. gofunc is word 38 (Go 1.18/1.19) or 40 (Go 1.20+: covctrs, ecovctrs added).
  const size_t idx = go120_ ? 40 : 38, ps = ptr_size_;
  for (const char* name : {".noptrdata", ".data", ".data.rel.ro"}) {
    auto s = image_->section(name);
    if (!s || !s->data) continue;
    for (size_t off = 0; off + (idx + 1) * ps <= s->size; off += ps) {
      const uint8_t* p = s->data + off;
      if (uptr(p) != vaddr_ || uptr(p + ps) != vaddr_ + funcname_off_) continue;
      const uint64_t gofunc = uptr(p + idx * ps);
      if (vaddr_ptr(gofunc, 1)) gofunc_ = gofunc;
      return;
    }
  }
}

bool GoPclntab::find_func(uint64_t pc, FuncRef* f) const {
  if (pc < text_start_) return false;
  const uint64_t off = pc - text_start_;
  if (off > UINT32_MAX) return false;
  const uint8_t* ftab = base_ + pcln_off_;
  // functab: nfunc+1 {entryoff, funcoff} pairs; the last entry is the end of the text.
  size_t lo = 0, hi = nfunc_;
  if (off >= u32(ftab + nfunc_ * 8)) return false;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (u32(ftab + mid * 8) <= off) lo = mid;
    else hi = mid;
  }
  if (u32(ftab + lo * 8) > off) return false;
  const uint32_t funcoff = u32(ftab + lo * 8 + 4);
  const size_t hdr = go120_ ? 44 : 40;
  if (pcln_off_ + funcoff + hdr > size_) return false;
  f->func = base_ + pcln_off_ + funcoff;
  f->entry = text_start_ + u32(f->func);
  f->end = text_start_ + u32(ftab + (lo + 1) * 8);
  // The _func's own entry must be the functab's and the range must hold pc: a hostile table (unsorted,
  // entries disagreeing) names no function rather than one that does not cover pc.
  return f->entry == text_start_ + u32(ftab + lo * 8) && f->entry <= pc && pc < f->end;
}

bool GoPclntab::function_range(uint64_t pc, uint64_t* entry, uint64_t* end) const {
  FuncRef f;
  if (!find_func(pc, &f)) return false;
  *entry = f.entry;
  *end = f.end;
  return true;
}

std::optional<int32_t> GoPclntab::pcvalue(const FuncRef& f, uint32_t off, uint64_t pc) const {
  if (off == 0 || pctab_off_ + off >= size_) return std::nullopt;
  const uint8_t* p = base_ + pctab_off_ + off;
  const uint8_t* end = base_ + size_;
  int32_t val = -1;
  uint64_t cur = f.entry;
  for (bool first = true;; first = false) {
    uint32_t uvdelta, pcdelta;
    if (!uvarint(p, end, &uvdelta)) return std::nullopt;
    if (uvdelta == 0 && !first) return std::nullopt;
    // zig-zag delta, added with wrap-around as Go's int32 does (a hostile table may overflow)
    const uint32_t delta = (uvdelta & 1) ? ~(uvdelta >> 1) : (uvdelta >> 1);
    val = static_cast<int32_t>(static_cast<uint32_t>(val) + delta);
    if (!uvarint(p, end, &pcdelta)) return std::nullopt;
    cur += uint64_t(pcdelta) * min_lc_;
    if (pc < cur) return val;
  }
}

std::string_view GoPclntab::cstr(size_t table_off, size_t off) const {
  if (table_off + off >= size_) return {};
  const char* s = reinterpret_cast<const char*>(base_ + table_off + off);
  return std::string_view(s, strnlen(s, size_ - table_off - off));
}

std::string GoPclntab::file_name(const FuncRef& f, int32_t fileno) const {
  if (fileno < 0) return {};
  const uint32_t cu = u32(f.func + 32);
  const size_t at = cu_off_ + (size_t(cu) + uint32_t(fileno)) * 4;
  if (at + 4 > size_) return {};
  const uint32_t foff = u32(base_ + at);
  if (foff == UINT32_MAX) return {};
  return std::string(cstr(filetab_off_, foff));
}

std::optional<int64_t> GoPclntab::sp_delta(uint64_t pc) const {
  FuncRef f;
  if (!find_func(pc, &f)) return std::nullopt;
  auto v = pcvalue(f, u32(f.func + 16), pc);
  if (!v) return std::nullopt;
  return *v;
}

uint8_t GoPclntab::func_flags(uint64_t pc) const {
  FuncRef f;
  if (!find_func(pc, &f)) return 0;
  return f.func[(go120_ ? 44 : 40) - 3];  // funcID, flag, pad, nfuncdata end the header
}

bool GoPclntab::lookup(uint64_t pc, std::vector<GoFrame>* out) const {
  out->clear();
  FuncRef f;
  if (!find_func(pc, &f)) return false;
  const size_t hdr = go120_ ? 44 : 40;
  const uint32_t npcdata = u32(f.func + 28);
  const uint8_t nfuncdata = f.func[hdr - 1];
  const uint8_t* tables = f.func + hdr;
  // pcdata and funcdata offsets past the table: the function is still named (pcfile and pcln are
  // in the header), without an inline chain.
  const bool tables_ok = 4 * (uint64_t(npcdata) + nfuncdata) <= size_ - size_t(tables - base_);
  const uint32_t pcfile = u32(f.func + 20), pcln = u32(f.func + 24);
  // The inline tree (when the function has one and gofunc is known).
  uint64_t inltree = 0;  // link-time address of the function's inlinedCall array
  uint32_t inl_index_table = 0;
  if (tables_ok && gofunc_ && npcdata > kPcdataInlTreeIndex && nfuncdata > kFuncdataInlTree) {
    const uint32_t fd = u32(tables + 4 * (size_t(npcdata) + kFuncdataInlTree));
    if (fd != UINT32_MAX) {
      inltree = gofunc_ + fd;
      inl_index_table = u32(tables + 4 * kPcdataInlTreeIndex);
    }
  }
  const size_t inl_size = go120_ ? 16 : 20;
  const size_t inl_name_at = go120_ ? 4 : 12, inl_parent_pc_at = go120_ ? 8 : 16;
  uint64_t at = pc;
  for (size_t depth = 0; depth <= kMaxInlineDepth; ++depth) {
    GoFrame fr;
    fr.entry = f.entry;
    if (auto fileno = pcvalue(f, pcfile, at)) fr.file = file_name(f, *fileno);
    if (auto line = pcvalue(f, pcln, at); line && *line > 0) fr.line = uint32_t(*line);
    std::optional<int32_t> ix;
    if (inltree && inl_index_table) ix = pcvalue(f, inl_index_table, at);
    const uint8_t* call = (ix && *ix >= 0) ? vaddr_ptr(inltree + uint64_t(*ix) * inl_size, inl_size) : nullptr;
    if (!call) {
      fr.function = std::string(cstr(funcname_off_, uint32_t(u32(f.func + 4))));
      out->push_back(std::move(fr));
      return true;
    }
    fr.function = std::string(cstr(funcname_off_, u32(call + inl_name_at)));
    out->push_back(std::move(fr));
    at = f.entry + u32(call + inl_parent_pc_at);  // an instruction at the call site, in the caller's frame
  }
  return true;
}

const GoPclntab* GoResolver::table(const std::shared_ptr<const object::ObjectImage>& image) {
  if (!image) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(image.get());
  if (it == tables_.end()) it = tables_.emplace(image.get(), std::make_pair(image, GoPclntab::load(image))).first;
  return it->second.second.get();
}

bool GoResolver::resolve(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, Resolution* out) {
  const GoPclntab* t = table(image);
  std::vector<GoFrame> frames;
  if (!t || !t->lookup(addr, &frames) || frames.empty()) return false;
  *out = Resolution{};
  for (GoFrame& g : frames) {
    ResolvedFrame f;
    f.function = g.function;
    f.short_function = g.function;
    f.linkage_name = std::move(g.function);
    f.file = std::move(g.file);
    f.line = g.line;
    out->frames.push_back(std::move(f));
  }
  ResolvedFrame& outer = out->frames.back();
  outer.has_start_address = true;
  outer.start_address = frames.back().entry;
  out->resolver = ResolvedBy::kGopclntab;
  out->provenance = "gopclntab";
  out->source = t->path();
  out->source_build_id = t->id();
  return true;
}

}  // namespace stackprov::symbolize
