// SPDX-License-Identifier: Apache-2.0
// Random walks (issue 18): unwinds over random stack bytes and registers against real modules, through the C ABI.
//
// usage: random_walks WALKS SEED MODULE...
// The modules (libc.so.6, python3.11, node) are mapped as a process would map them: each PT_LOAD
// at a page-aligned address of its own base. Each walk gets a fresh snapshot: 2-16 KiB of stack
// whose words are pointers into the modules' code (half of them: plausible return addresses),
// pointers into the stack itself (plausible frame pointers), small integers or random bytes; pc, sp, fp and the
// other registers are drawn the same way (pc sometimes outside every module, sp sometimes outside
// the stack). Every 4th walk allows stack scanning, every 8th forbids the frame-pointer fallback.
// Expected: every unwind returns 0 with a stop reason among SPROV_STOP_END_OF_STACK..ARCH_MISMATCH
// (never SPROV_STOP_NONE), frame count <= max_frames, frames' sp never decreasing except into a
// frame restored from a signal frame (SPROV_METHOD_SIGNAL: sigaltstack); no crash; no
// walk takes more than 5 s (a watchdog aborts naming the walk). Prints the stop-reason histogram.
// RANDOM_WALKS_FIRST=W starts at walk W (every walk is seeded from SEED and its number, so a
// failing walk replays alone). Exit status: 0 all walks as expected, 1 otherwise, 2 usage.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "elf/elf_image.hpp"
#include "stackprov/stackprov.h"

namespace {

struct Segment {
  uint64_t start, end, file_offset, bias;
  const char* path;
  std::vector<uint8_t> build_id;
  bool exec;
};

std::atomic<uint64_t> g_walk{0};
std::atomic<bool> g_done{false};

constexpr uint64_t kStackTop = 0x7ffff0000000ull;
constexpr int kRip = 16, kRsp = 7, kRbp = 6;  // x86_64 DWARF register numbers

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: random_walks WALKS SEED MODULE...\n");
    return 2;
  }
  const uint64_t walks = std::strtoull(argv[1], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  std::vector<Segment> segs;
  std::vector<std::shared_ptr<stackprov::elf::ElfImage>> images;
  uint64_t base = 0x7f0000000000ull;
  for (int i = 3; i < argc; i++) {
    auto img = stackprov::elf::ElfImage::open(argv[i]);
    if (!img.ok()) {
      std::fprintf(stderr, "random_walks: module %s: %s\n", argv[i], img.error().message.c_str());
      return 1;
    }
    const auto& e = **img;
    uint64_t lo = UINT64_MAX;
    for (const auto& ph : e.program_headers())
      if (ph.type == 1 /* PT_LOAD */) lo = std::min<uint64_t>(lo, ph.vaddr & ~uint64_t{0xfff});
    // Each module at its own base (python3.11 and node are both ET_EXEC at 0x400000; the unwinder
    // reads through the bias, whatever the ELF type).
    const uint64_t bias = base - lo;
    uint64_t hi = 0;
    for (const auto& ph : e.program_headers()) {
      if (ph.type != 1) continue;
      Segment s;
      s.start = (ph.vaddr & ~0xfffull) + bias;
      s.end = ((ph.vaddr + ph.memsz + 0xfff) & ~0xfffull) + bias;
      s.file_offset = ph.offset & ~0xfffull;
      s.bias = bias;
      s.path = argv[i];
      s.build_id.assign(e.build_id().bytes, e.build_id().bytes + e.build_id().len);
      s.exec = (ph.flags & 1) != 0;
      hi = std::max<uint64_t>(hi, s.end);
      segs.push_back(s);
    }
    base = std::max<uint64_t>(base, hi) + (uint64_t{1} << 32);
    images.push_back(std::move(img).value());
  }
  std::vector<const Segment*> code;
  for (const Segment& s : segs)
    if (s.exec) code.push_back(&s);

  sprov_context* ctx = nullptr;
  if (sprov_context_new(nullptr, &ctx) != 0) {
    std::fprintf(stderr, "random_walks: sprov_context_new: %s\n", sprov_last_error_message());
    return 1;
  }
  sprov_unwinder* uw[3] = {};
  const uint32_t flags[3] = {0, SPROV_UNWIND_ALLOW_SCAN, SPROV_UNWIND_NO_FRAME_POINTER};
  for (int k = 0; k < 3; k++) {
    struct sprov_unwinder_opts o = {};
    o.sz = sizeof(o);
    o.flags = flags[k];
    if (sprov_unwinder_new(ctx, &o, &uw[k]) != 0) {
      std::fprintf(stderr, "random_walks: sprov_unwinder_new: %s\n", sprov_last_error_message());
      return 1;
    }
  }

  std::thread watchdog([] {
    uint64_t last = UINT64_MAX;
    int same = 0;
    while (!g_done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      const uint64_t w = g_walk.load();
      same = (w == last) ? same + 1 : 0;
      last = w;
      if (same >= 20) {
        std::fprintf(stderr, "FAIL walk %" PRIu64 " has run for more than 5 s (hang)\n", w);
        std::abort();
      }
    }
  });

  std::mt19937_64 rng;
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  auto code_ptr = [&] {
    const Segment* s = code[pick(code.size())];
    return s->start + pick(s->end - s->start);
  };
  uint64_t hist[16] = {}, frames_total = 0, failures = 0;
  std::vector<uint8_t> stack;
  // RANDOM_WALKS_FIRST=W: start at walk W (each walk has its own seed: a failure replays alone).
  const char* first_env = std::getenv("RANDOM_WALKS_FIRST");
  const uint64_t first = first_env ? std::strtoull(first_env, nullptr, 10) : 0;
  for (uint64_t w = first; w < first + walks; w++) {
    g_walk.store(w);
    std::seed_seq walk_seed{seed, w};
    rng.seed(walk_seed);
    const size_t len = 2048 + pick(14336) / 8 * 8;
    const uint64_t lo = kStackTop - len;
    stack.resize(len);
    for (size_t off = 0; off < len; off += 8) {
      uint64_t v;
      switch (pick(8)) {
        case 0: case 1: case 2: case 3: v = code_ptr(); break;
        case 4: v = lo + pick(len + 256) / 8 * 8; break;
        case 5: v = pick(256); break;
        default: v = rng(); break;
      }
      std::memcpy(stack.data() + off, &v, 8);
    }
    sprov_snapshot* snap = nullptr;
    if (sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &snap) != 0) std::exit(1);
    for (const Segment& s : segs) {
      struct sprov_module_info m = {};
      m.sz = sizeof(m);
      m.start = s.start;
      m.end = s.end;
      m.file_offset = s.file_offset;
      m.load_bias = s.bias;
      m.path = s.path;
      m.build_id = s.build_id.data();
      m.build_id_len = static_cast<uint32_t>(s.build_id.size());
      if (sprov_snapshot_add_module(snap, &m) != 0) {
        std::fprintf(stderr, "random_walks: add_module %s: %s\n", s.path, sprov_last_error_message());
        std::exit(1);
      }
    }
    if (sprov_snapshot_add_memory(snap, lo, stack.data(), len) != 0) std::exit(1);
    for (uint32_t r = 0; r < 17; r++) sprov_snapshot_set_reg(snap, r, pick(4) == 0 ? lo + pick(len) : rng());
    sprov_snapshot_set_reg(snap, kRip, pick(16) == 0 ? rng() : code_ptr());
    sprov_snapshot_set_reg(snap, kRsp, pick(32) == 0 ? rng() : lo + pick(len) / 8 * 8);
    sprov_snapshot_set_reg(snap, kRbp, pick(4) == 0 ? rng() : lo + pick(len) / 8 * 8);
    sprov_unwinder* u = uw[w % 8 == 7 ? 2 : w % 4 == 3 ? 1 : 0];
    sprov_stack* st = nullptr;
    const int rc = sprov_unwinder_unwind(u, snap, &st);
    if (rc != 0) {
      if (failures++ < 10)
        std::fprintf(stderr, "FAIL walk %" PRIu64 ": sprov_unwinder_unwind returned %d: %s\n", w, rc,
                     sprov_last_error_message());
      sprov_snapshot_free(snap);
      continue;
    }
    const int reason = sprov_stack_stop_reason(st);
    const size_t n = sprov_stack_frame_count(st);
    hist[reason >= 0 && reason < 16 ? reason : 15]++;
    frames_total += n;
    bool bad = reason < SPROV_STOP_END_OF_STACK || reason > SPROV_STOP_ARCH_MISMATCH || n == 0 || n > 256;
    uint64_t prev_sp = 0;
    for (size_t i = 0; i < n && !bad; i++) {
      struct sprov_frame f = {};
      f.sz = sizeof(f);
      // Across a signal frame the interrupted code may run on another stack (sigaltstack).
      bad = sprov_stack_frame(st, i, &f) != 0 || (i > 0 && f.sp < prev_sp && f.method != SPROV_METHOD_SIGNAL);
      prev_sp = f.sp;
    }
    if (bad && failures++ < 10) {
      std::fprintf(stderr, "FAIL walk %" PRIu64 ": stop reason %d (%s), %zu frames, or a frame's sp went down:\n",
                   w, reason, sprov_stop_reason_name(reason), n);
      for (size_t i = 0; i < n; i++) {
        struct sprov_frame f = {};
        f.sz = sizeof(f);
        sprov_stack_frame(st, i, &f);
        std::fprintf(stderr, "  #%zu pc 0x%" PRIx64 " sp 0x%" PRIx64 " cfa 0x%" PRIx64 " method %d flags 0x%x %s+0x%" PRIx64 "\n",
                     i, f.pc, f.sp, f.cfa, f.method, f.flags, f.module_path ? f.module_path : "?", f.module_offset);
      }
    }
    sprov_stack_free(st);
    sprov_snapshot_free(snap);
  }
  g_done.store(true);
  watchdog.join();
  std::printf("%" PRIu64 " walks over %zu modules (%zu code segments), seed %" PRIu64 ", %.2f frames/walk\n", walks,
              images.size(), code.size(), seed, walks ? double(frames_total) / double(walks) : 0.0);
  for (int r = 0; r < 16; r++)
    if (hist[r]) std::printf("  %-18s %10" PRIu64 "\n", sprov_stop_reason_name(r), hist[r]);
  std::printf("%" PRIu64 " walk(s) not as expected\n", failures);
  for (auto* u : uw) sprov_unwinder_free(u);
  sprov_context_free(ctx);
  return failures ? 1 : 0;
}
