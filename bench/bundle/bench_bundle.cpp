// SPDX-License-Identifier: Apache-2.0
// bench/bundle driver: open time, first and warm lookups (inline chain), symbol names and unwind rows through a symbol bundle; answers for comparison.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bundle/format.hpp"

using namespace stackprov::bundle;
using Clock = std::chrono::steady_clock;

namespace {

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// 15 timed passes of f over all addresses: ns per address of each.
template <class F>
std::vector<double> timed_passes(const std::vector<uint64_t>& addrs, F f) {
  std::vector<double> passes;
  for (int p = 0; p < 15; p++) {
    const auto t0 = Clock::now();
    for (uint64_t a : addrs) f(a);
    passes.push_back(ns_since(t0) / static_cast<double>(addrs.size()));
  }
  return passes;
}

/// Symbol-name costs of a bundle (doc/bundles.md "Symbol names"): the first symbol() after a lookup
/// (its records decoded), warm symbol() per address (median of 15 passes), symbols() (a copy of all).
struct SymbolCosts {
  double first_ns = 0, warm_ns = 0, all_ns = 0;
  std::vector<SymbolRecord> answers;  // per address: name and sym_start (addr 1: found), copied out of the reader
  std::vector<SymbolRecord> all;
};

bool symbol_costs(const uint8_t* data, size_t len, const std::vector<uint64_t>& addrs, SymbolCosts* out) {
  auto rd = BundleReader::open(data, len);
  if (!rd || !rd->lookup(0, addrs[0])) return false;
  auto t0 = Clock::now();
  if (!rd->symbol(0, addrs[0])) return false;
  out->first_ns = ns_since(t0);
  for (uint64_t a : addrs) {
    auto s = rd->symbol(0, a);
    if (!s) return false;
    out->answers.push_back({s->found ? 1u : 0u, 0, s->sym_start, std::string(s->name)});
  }
  size_t sink = 0;
  out->warm_ns = median(timed_passes(addrs, [&](uint64_t a) {
    auto s = rd->symbol(0, a);
    sink += s && s->found ? s->name.size() : 0;
  }));
  if (sink == SIZE_MAX) std::fputc(0, stderr);  // keeps the loop
  t0 = Clock::now();
  auto all = rd->symbols(0);
  out->all_ns = ns_since(t0);
  if (!all) return false;
  out->all = std::move(all.value());
  return true;
}

/// The bundle's module rewritten in format `version` (its records read back; the writer is deterministic).
std::vector<uint8_t> as_format(const BundleReader& rd, uint32_t version) {
  const ModuleView& v = rd.modules()[0];
  ModuleContents m;
  m.id = {v.id_kind, std::vector<uint8_t>(v.id.begin(), v.id.end())};
  m.name = std::string(v.name);
  m.sha256_file = v.sha256_file;
  m.sha256_debug = v.sha256_debug;
  m.pdb_lines = v.pdb_lines;
  m.debug_blob.assign(v.debug_blob.begin(), v.debug_blob.end());
  auto ranges = rd.ranges(0);
  auto pads = rd.return_pads(0);
  auto rows = rd.unwind_rows(0);
  auto syms = rd.symbols(0);
  auto calls = rd.call_sites(0);
  if (!ranges || !pads || !rows || !syms || !calls) return {};
  m.ranges = std::move(ranges.value());
  m.return_pads = std::move(pads.value());
  m.unwind_rows = std::move(rows.value());
  m.symbols = std::move(syms.value());
  m.call_sites = std::move(calls->sites);
  m.call_functions = std::move(calls->functions);
  m.call_symbols = std::move(calls->symbols);
  BundleContents c;
  c.modules.push_back(std::move(m));
  auto w = write_bundle(std::move(c), version);
  return w ? std::move(w.value()) : std::vector<uint8_t>{};
}

/// The length of section `type` of a bundle (0 when absent).
uint64_t section_len(const std::vector<uint8_t>& b, uint32_t type) {
  auto ld = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= static_cast<uint64_t>(b[at + static_cast<size_t>(i)]) << (8 * i);
    return v;
  };
  const uint64_t nsec = ld(12, 4);
  for (uint64_t i = 0; i < nsec; i++)
    if (ld(32 + 24 * i, 4) == type) return ld(32 + 24 * i + 16, 8);
  return 0;
}

bool same_row(const UnwindRowRecord& a, const UnwindRowRecord& b) {
  if (a.pc != b.pc || a.kind != b.kind || a.cfa_reg != b.cfa_reg || a.ra_kind != b.ra_kind || a.ra_reg != b.ra_reg ||
      a.cfa_off != b.cfa_off || a.ra_off != b.ra_off || a.nsaved != b.nsaved || a.signal_frame != b.signal_frame ||
      a.from_debug_frame != b.from_debug_frame)
    return false;
  for (size_t i = 0; i < a.nsaved; i++)
    if (a.saved_reg[i] != b.saved_reg[i] || a.saved_off[i] != b.saved_off[i]) return false;
  return true;
}

/// Unwind-row costs of a bundle: the first unwind_row() of a fresh reader (the module's index: string
/// table, and format 7's row table), warm unwind_row() per address (median of 15 passes); the answers.
struct RowCosts {
  double first_ns = 0, warm_ns = 0;
  std::vector<UnwindRowRecord> answers;  // per address (pc 1 << 63: none)
  std::vector<UnwindRowRecord> all;
};

bool row_costs(const uint8_t* data, size_t len, const std::vector<uint64_t>& addrs, RowCosts* out) {
  auto rd = BundleReader::open(data, len);
  if (!rd) return false;
  auto t0 = Clock::now();
  if (!rd->unwind_row(0, addrs[0])) return false;
  out->first_ns = ns_since(t0);
  for (uint64_t a : addrs) {
    auto r = rd->unwind_row(0, a);
    if (!r) return false;
    UnwindRowRecord none;
    none.pc = uint64_t{1} << 63;
    out->answers.push_back(r->found ? r->row : none);
  }
  size_t sink = 0;
  out->warm_ns = median(timed_passes(addrs, [&](uint64_t a) {
    auto r = rd->unwind_row(0, a);
    sink += r && r->found ? static_cast<size_t>(r->row.cfa_off) : 0;
  }));
  if (sink == SIZE_MAX) std::fputc(0, stderr);  // keeps the loop
  auto all = rd->unwind_rows(0);
  if (!all) return false;
  out->all = std::move(all.value());
  return true;
}

}  // namespace

// usage: bench_bundle BUNDLE ADDRESSES ANSWERS_OUT
//   ADDRESSES: one hex address per line (link-time). Prints one JSON object on stdout and
//   writes the answers, llvm-symbolizer --inlining --output-style=LLVM style, to ANSWERS_OUT.
int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bench_bundle BUNDLE ADDRESSES ANSWERS_OUT\n");
    return 2;
  }
  const std::string path = argv[1];
  std::vector<uint64_t> addrs;
  if (FILE* f = std::fopen(argv[2], "r")) {
    char line[64];
    while (std::fgets(line, sizeof line, f)) addrs.push_back(std::strtoull(line, nullptr, 16));
    std::fclose(f);
  }
  if (addrs.empty()) {
    std::fprintf(stderr, "bench_bundle: no addresses in %s\n", argv[2]);
    return 1;
  }
  // Open: mmap + header/section/module validation, 51 times.
  std::vector<double> opens;
  for (int i = 0; i < 51; i++) {
    const auto t0 = Clock::now();
    auto rd = BundleReader::open_file(path);
    opens.push_back(ns_since(t0));
    if (!rd) {
      std::fprintf(stderr, "bench_bundle: %s\n", rd.error().message.c_str());
      return 1;
    }
  }
  auto rd = BundleReader::open_file(path);
  if (!rd || rd->modules().size() != 1) {
    std::fprintf(stderr, "bench_bundle: %s: expected one module\n", path.c_str());
    return 1;
  }
  // First lookup: builds the module's lazily validated index (string table decompression).
  auto t0 = Clock::now();
  auto first = rd->lookup(0, addrs[0]);
  const double first_ns = ns_since(t0);
  if (!first) {
    std::fprintf(stderr, "bench_bundle: %s\n", first.error().message.c_str());
    return 1;
  }
  // Answers (also the warm-up pass).
  FILE* out = std::fopen(argv[3], "w");
  if (out == nullptr) return 1;
  size_t frames = 0;
  for (uint64_t a : addrs) {
    auto ch = rd->lookup(0, a);
    if (!ch) {
      std::fprintf(stderr, "bench_bundle: 0x%" PRIx64 ": %s\n", a, ch.error().message.c_str());
      return 1;
    }
    if (ch->empty()) std::fprintf(out, "??\n??:0:0\n");
    for (size_t i = ch->size(); i-- > 0;) {
      const FrameView& f = ch.value()[i];
      std::fprintf(out, "%s\n%s:%u:%u\n", f.function.empty() ? "??" : std::string(f.function).c_str(),
                   f.file.empty() ? "??" : std::string(f.file).c_str(), f.line, f.column);
    }
    std::fprintf(out, "\n");
    frames += ch->size();
  }
  std::fclose(out);
  // Warm lookups: 15 timed passes over all addresses, ns per address.
  size_t sink = 0;
  const std::vector<double> passes = timed_passes(addrs, [&](uint64_t a) {
    auto ch = rd->lookup(0, a);
    sink += ch ? ch->size() : 0;
  });
  // Symbol names in the bundle's format and in format 5 (the same records rewritten): equal answers,
  // and what each costs.
  const std::vector<uint8_t> v5 = as_format(rd.value(), 5);
  SymbolCosts sc, sc5;
  if (v5.empty() || !symbol_costs(rd->data(), rd->size(), addrs, &sc) || !symbol_costs(v5.data(), v5.size(), addrs, &sc5)) {
    std::fprintf(stderr, "bench_bundle: %s: symbol names could not be read or rewritten in format 5\n", path.c_str());
    return 1;
  }
  for (size_t i = 0; i < addrs.size(); i++)
    if (sc.answers[i].addr != sc5.answers[i].addr || sc.answers[i].name != sc5.answers[i].name ||
        sc.answers[i].sym_start != sc5.answers[i].sym_start) {
      std::fprintf(stderr, "bench_bundle: 0x%" PRIx64 ": format %u names '%s', format 5 '%s'\n", addrs[i],
                   unsigned{rd->data()[8]}, sc.answers[i].name.c_str(), sc5.answers[i].name.c_str());
      return 1;
    }
  if (sc.all.size() != sc5.all.size()) return 1;
  for (size_t i = 0; i < sc.all.size(); i++)
    if (sc.all[i].addr != sc5.all[i].addr || sc.all[i].length != sc5.all[i].length ||
        sc.all[i].sym_start != sc5.all[i].sym_start || sc.all[i].name != sc5.all[i].name) {
      std::fprintf(stderr, "bench_bundle: symbol record %zu differs from format 5's\n", i);
      return 1;
    }
  // Unwind rows in the bundle's format and in format 6 (the same records rewritten): every row of the
  // module and every address's row equal, and what each costs (format 7: doc/bundles.md "Format 7").
  const std::vector<uint8_t> v6 = as_format(rd.value(), 6);
  RowCosts rc, rc6;
  if (v6.empty() || !row_costs(rd->data(), rd->size(), addrs, &rc) || !row_costs(v6.data(), v6.size(), addrs, &rc6)) {
    std::fprintf(stderr, "bench_bundle: %s: unwind rows could not be read or rewritten in format 6\n", path.c_str());
    return 1;
  }
  if (rc.all.size() != rc6.all.size()) {
    std::fprintf(stderr, "bench_bundle: %zu unwind rows, format 6 %zu\n", rc.all.size(), rc6.all.size());
    return 1;
  }
  for (size_t i = 0; i < rc.all.size(); i++)
    if (!same_row(rc.all[i], rc6.all[i])) {
      std::fprintf(stderr, "bench_bundle: unwind row %zu (0x%" PRIx64 ") differs from format 6's\n", i, rc.all[i].pc);
      return 1;
    }
  for (size_t i = 0; i < addrs.size(); i++)
    if (!same_row(rc.answers[i], rc6.answers[i])) {
      std::fprintf(stderr, "bench_bundle: 0x%" PRIx64 ": the unwind row differs from format 6's\n", addrs[i]);
      return 1;
    }
  const std::vector<uint8_t> self(rd->data(), rd->data() + rd->size());
  // The machine is shared: the median pass is reported, and the best pass (least disturbed).
  std::printf("{\"addresses\": %zu, \"frames\": %zu, \"open_ns_median\": %.0f, \"open_ns_min\": %.0f, "
              "\"first_lookup_ns\": %.0f, \"warm_lookup_ns_per_address\": %.1f, "
              "\"warm_lookup_ns_per_address_best\": %.1f, \"sink\": %zu, \"format\": %u, \"symbol_records\": %zu, "
              "\"symbols_first_ns\": %.0f, \"symbol_warm_ns_per_address\": %.1f, \"symbols_all_ns\": %.0f, "
              "\"format5_bytes\": %zu, \"format5_symbols_first_ns\": %.0f, "
              "\"format5_symbol_warm_ns_per_address\": %.1f, \"format5_symbols_all_ns\": %.0f, "
              "\"unwind_rows\": %zu, \"rows_first_ns\": %.0f, \"rows_warm_ns_per_address\": %.1f, "
              "\"rows_bytes\": %" PRIu64 ", \"format6_bytes\": %zu, \"format6_rows_bytes\": %" PRIu64 ", "
              "\"format6_rows_first_ns\": %.0f, \"format6_rows_warm_ns_per_address\": %.1f}\n",
              addrs.size(), frames, median(opens), *std::min_element(opens.begin(), opens.end()), first_ns,
              median(passes), *std::min_element(passes.begin(), passes.end()), sink, unsigned{rd->data()[8]},
              sc.all.size(), sc.first_ns, sc.warm_ns, sc.all_ns, v5.size(), sc5.first_ns, sc5.warm_ns, sc5.all_ns,
              rc.all.size(), rc.first_ns, rc.warm_ns, section_len(self, 8) + section_len(self, 9), v6.size(),
              section_len(v6, 8) + section_len(v6, 9), rc6.first_ns, rc6.warm_ns);
  return 0;
}
