// SPDX-License-Identifier: Apache-2.0
// Seed corpora for the fuzz targets, cut from real files (scripts/fuzz.sh runs it over binaries it compiles).
//
// usage: fuzz_make_seeds OUTDIR [--self] [--dwo F] [--alt F] [--dwp F] [--go F] ELF...
//   each ELF gives seeds for elf, cfi, eh_frame_hdr, dwarf_expr, dwarf_info, line_table; --dwo/--alt
//   attach a split unit's .dwo / a dwz supplementary file to the next ELF's dwarf_info seed; --dwp adds
//   a dwp_index seed; --go a gopclntab seed of a Go binary; --self adds a snapshot of this process
//   and its SPROVTRD container.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "elf/elf_image.hpp"
#include "memory/snapshot.hpp"
#include "stackprov/stackprov.h"
#include "trace/capture_data.hpp"

namespace {

using stackprov::elf::ElfImage;
namespace fs = std::filesystem;
std::string g_out;

bool write(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(g_out + "/" + target);
  const std::string path = g_out + "/" + target + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

void put_u32(std::vector<uint8_t>* v, uint32_t x) {
  for (int i = 0; i < 4; i++) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
}
void put_u64(std::vector<uint8_t>* v, uint64_t x) {
  for (int i = 0; i < 8; i++) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
}
/// One section of the tests/fuzz/fuzz_sections.hpp layout.
void put_section(std::vector<uint8_t>* v, const uint8_t* data, size_t size) {
  put_u32(v, static_cast<uint32_t>(size));
  v->insert(v->end(), data, data + size);
}
void put_section(std::vector<uint8_t>* v, const std::vector<uint8_t>& b) { put_section(v, b.data(), b.size()); }
void put_section(std::vector<uint8_t>* v, const ElfImage* img, const char* name) {
  auto s = img ? img->section(name) : std::nullopt;
  if (s && s->data) put_section(v, s->data, s->size);
  else put_u32(v, 0);
}

/// DW_CFA_def_cfa_expression / expression / val_expression blocks of a CFI section whose first op
/// is a DW_OP_breg*: the expressions compilers and linkers emit (e.g. every PLT's CFA).
void expr_seeds(const std::string& base, const stackprov::elf::Section& s) {
  int n = 0;
  for (size_t i = 0; i + 3 < s.size && n < 8; i++) {
    const uint8_t op = s.data[i];
    size_t at = i + 1;
    if (op == 0x10 || op == 0x16) at++;  // the register operand (one ULEB byte)
    if ((op != 0x0f && op != 0x10 && op != 0x16) || at + 1 >= s.size) continue;
    const size_t len = s.data[at];
    if (len == 0 || len > 32 || at + 1 + len > s.size || s.data[at + 1] < 0x70 || s.data[at + 1] > 0x8f) continue;
    std::vector<uint8_t> v;
    put_section(&v, std::vector<uint8_t>{static_cast<uint8_t>(op == 0x0f ? 0 : 4)});
    put_section(&v, s.data + at + 1, len);
    std::vector<uint8_t> regs;
    for (uint64_t r = 0; r < 16; r++) put_u64(&regs, (r * 8) << 2 | 1);  // registers point into the stack
    put_section(&v, regs);
    std::vector<uint8_t> stack(256);
    for (size_t k = 0; k < stack.size(); k++) stack[k] = static_cast<uint8_t>(k * 7);
    put_section(&v, stack);
    write("dwarf_expr", base + "-" + std::to_string(n++), v);
  }
}

void elf_seeds(const std::string& path, const ElfImage* dwo, const ElfImage* alt) {
  auto img = ElfImage::open(path);
  if (!img.ok()) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", img.error().message.c_str());
    return;
  }
  const ElfImage& e = **img;
  const std::string base = fs::path(path).filename().string();
  if (e.file_size() <= (size_t{512} << 10)) write("elf", base, {e.file_data(), e.file_data() + e.file_size()});
  for (const char* name : {".eh_frame", ".debug_frame"}) {
    auto s = e.section(name);
    if (!s || !s->data) continue;
    std::vector<uint8_t> v{static_cast<uint8_t>(name[1] == 'e' ? 0 : 1)};
    v.insert(v.end(), s->data, s->data + s->size);
    write("cfi", base + name, v);
    expr_seeds(base + name, *s);
  }
  auto hdr = e.eh_frame_hdr();
  auto eh = e.section(".eh_frame");
  if (hdr && hdr->data && eh && eh->data) {
    std::vector<uint8_t> v, meta;
    put_u64(&meta, hdr->addr);
    put_u64(&meta, eh->addr);
    put_u64(&meta, e.section(".text") ? e.section(".text")->addr : 0);
    put_section(&v, meta);
    put_section(&v, hdr->data, hdr->size);
    put_section(&v, eh->data, eh->size);
    write("eh_frame_hdr", base, v);
  }
  if (e.section(".debug_info")) {
    std::vector<uint8_t> v;
    for (const char* n : {".debug_info", ".debug_abbrev", ".debug_line", ".debug_line_str", ".debug_str",
                          ".debug_str_offsets", ".debug_addr", ".debug_ranges", ".debug_rnglists"})
      put_section(&v, &e, n);
    for (const char* n : {".debug_info", ".debug_abbrev", ".debug_str"}) put_section(&v, alt, n);
    for (const char* n : {".debug_info.dwo", ".debug_abbrev.dwo", ".debug_str.dwo", ".debug_str_offsets.dwo",
                          ".debug_rnglists.dwo", ".debug_line.dwo"})
      put_section(&v, dwo, n);
    // Probe addresses: 32 points spread over the executable range.
    std::vector<uint8_t> probes;
    const auto [lo, hi] = e.exec_range();
    for (uint64_t k = 0; k < 32 && hi > lo; k++) put_u64(&probes, lo + (hi - lo) * k / 32);
    put_section(&v, probes);
    write("dwarf_info", base, v);
    std::vector<uint8_t> l;
    for (const char* n : {".debug_line", ".debug_line_str", ".debug_str"}) put_section(&l, &e, n);
    write("line_table", base, l);
  }
}

void dwp_seed(const std::string& path) {
  auto img = ElfImage::open(path);
  if (!img.ok()) return;
  std::vector<uint8_t> v;
  put_section(&v, img->get(), ".debug_cu_index");
  put_section(&v, img->get(), ".debug_info.dwo");
  write("dwp_index", fs::path(path).filename().string(), v);
}

/// tests/fuzz/gopclntab_fuzz.cpp's input from a Go binary: its pclntab (.gopclntab, or
/// .data.rel.ro.gopclntab in a PIE: then the "renamed" flag, found by magic), .noptrdata, .rodata,
/// and probe pcs spread over .text.
void go_seed(const std::string& path) {
  auto img = ElfImage::open(path);
  if (!img.ok()) return;
  const ElfImage& e = **img;
  auto pcln = e.section(".gopclntab");
  const uint8_t flags = pcln ? 0 : 1;
  if (!pcln) pcln = e.section(".data.rel.ro.gopclntab");
  auto noptr = e.section(".noptrdata"), ro = e.section(".rodata"), text = e.section(".text");
  if (!pcln || !pcln->data || !noptr || !ro || !text) {
    std::fprintf(stderr, "fuzz_make_seeds: %s: no Go pclntab, .noptrdata, .rodata or .text\n", path.c_str());
    return;
  }
  std::vector<uint8_t> meta(8, 0);
  meta[0] = flags;
  put_u64(&meta, pcln->addr);
  put_u64(&meta, noptr->addr);
  put_u64(&meta, ro->addr);
  for (uint64_t i = 1; i <= 64; i++) put_u64(&meta, text->addr + text->size * i / 65);
  std::vector<uint8_t> v;
  put_section(&v, meta);
  put_section(&v, pcln->data, pcln->size);
  put_section(&v, noptr->data, noptr->size);
  put_section(&v, ro->data, ro->size);
  write("gopclntab", fs::path(path).filename().string(), v);
}

int self_seeds() {
  sprov_context* ctx = nullptr;
  sprov_snapshot* snap = nullptr;
  if (sprov_context_new(nullptr, &ctx) != 0 || sprov_snapshot_capture_self(ctx, nullptr, &snap) != 0) {
    std::fprintf(stderr, "fuzz_make_seeds: capture_self: %s\n", sprov_last_error_message());
    return 1;
  }
  void* bytes = nullptr;
  size_t len = 0;
  if (sprov_snapshot_serialize(snap, &bytes, &len) != 0) return 1;
  const std::vector<uint8_t> s(static_cast<uint8_t*>(bytes), static_cast<uint8_t*>(bytes) + len);
  sprov_free(bytes);
  write("snapshot", "self", s);
  auto parsed = stackprov::memory::deserialize(s.data(), s.size());
  if (!parsed.ok()) return 1;
  std::vector<stackprov::trace::CapturedThread> threads(2);
  threads[0] = {1234, "main", parsed.value()};
  threads[1] = {1235, "", parsed.value()};
  write("trace_capture", "self", stackprov::trace::serialize_capture(threads));
  stackprov::trace::CapturedJit jit;  // version 2: the perf-map entries of JIT frames
  jit.path = "/tmp/perf-1234.map";
  jit.entries = {{0x7f0000001100, 0x13, "LazyCompile:*jitInner /srv/app.js:7"}, {0x7f0000001400, 0x13, "jitOuter"}};
  write("trace_capture", "self_jit", stackprov::trace::serialize_capture(threads, jit));
  // Version 3: a kernel segment (trace-capture --with-btf), as /proc and BTF gave it for a thread
  // in nanosleep on this machine's kernel; with and without the JIT section before it.
  stackprov::trace::CapturedKernel kernel;
  kernel.build_id = {0x5a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71, 0x82, 0x93,
                     0xa4, 0xb5, 0xc6, 0xd7, 0xe8, 0xf9, 0x0a, 0x1b, 0x2c, 0x3d};
  kernel.btf_sha256.fill(0x42);
  stackprov::trace::CapturedKernelSegment seg;
  seg.tid = 1234;
  seg.syscall = 230;
  seg.user_sp = 0x7ffd2db6ee70;
  seg.user_pc = 0x7fde2dc42545;
  seg.frames = {{"hrtimer_nanosleep", 0x74, 0x110, "", 71234, false,
                 "long int hrtimer_nanosleep(ktime_t rqtp, const enum hrtimer_mode mode, const clockid_t clockid)"},
                {"common_nsleep.isra.0", 0x30, 0x50, "", 71300, true, "int common_nsleep(const clockid_t which_clock)"},
                {"entry_SYSCALL_64_after_hwframe", 0x76, 0x7e, "", 0, false, ""},
                {"nfs_wait_bit_killable", 0x1a, 0x60, "nfs", 0, false, ""}};
  kernel.segments = {seg};
  write("trace_capture", "self_kernel", stackprov::trace::serialize_capture(threads, {}, kernel));
  write("trace_capture", "self_jit_kernel", stackprov::trace::serialize_capture(threads, jit, kernel));
  sprov_snapshot_free(snap);
  sprov_context_free(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUTDIR [--self] [--dwo F] [--alt F] [--dwp F] [--go F] ELF...\n");
    return 2;
  }
  g_out = argv[1];
  std::shared_ptr<ElfImage> dwo, alt;
  for (int i = 2; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--self") {
      if (self_seeds() != 0) return 1;
    } else if (a == "--go" && i + 1 < argc) {
      go_seed(argv[++i]);
    } else if ((a == "--dwo" || a == "--alt" || a == "--dwp") && i + 1 < argc) {
      if (a == "--dwp") {
        dwp_seed(argv[++i]);
        continue;
      }
      auto img = ElfImage::open(argv[++i]);
      if (!img.ok()) {
        std::fprintf(stderr, "fuzz_make_seeds: %s\n", img.error().message.c_str());
        return 1;
      }
      (a == "--dwo" ? dwo : alt) = std::move(img).value();
    } else {
      elf_seeds(a, dwo.get(), alt.get());
      dwo.reset();
      alt.reset();
    }
  }
  return 0;
}
