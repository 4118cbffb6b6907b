// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the symbol-bundle file reader on raw bytes, and writer -> reader round trips built from the bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <vector>

#include "bundle/format.hpp"

using namespace stackprov::bundle;

namespace {

void query_all(const BundleReader& rd, const uint64_t* addrs, size_t n) {
  for (const ModuleView& v : rd.modules()) {
    (void)rd.find_module(v.id_kind, v.id);
    (void)rd.ranges(v.index);
    (void)rd.return_pads(v.index);
    (void)rd.symbols(v.index);
    (void)rd.call_sites(v.index);
    for (size_t i = 0; i < n; i++) {
      (void)rd.lookup(v.index, addrs[i]);
      (void)rd.return_pad(v.index, addrs[i]);
      (void)rd.unwind_row(v.index, addrs[i]);
      (void)rd.from_symtab(v.index, addrs[i]);
      (void)rd.symbol(v.index, addrs[i]);
    }
  }
}

uint64_t word(const uint8_t* data, size_t size, size_t i) {
  uint64_t v = 0;
  for (size_t k = 0; k < 8 && i + k < size; k++) v |= static_cast<uint64_t>(data[i + k]) << (8 * k);
  return v;
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

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bundle_file_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1. The bytes as a bundle (hostile input): errors are fine, crashes are not.
  uint64_t addrs[16];
  for (size_t i = 0; i < 16; i++) addrs[i] = word(data, size, (i * 37) % (size + 1));
  if (auto rd = BundleReader::open(data, size)) query_all(rd.value(), addrs, 16);

  // 2. The bytes as records: what the writer accepts, the reader must open and find again.
  BundleContents c;
  ModuleContents m;
  m.id = {IdKind::kElfBuildId, {1, 2, 3, 4}};
  m.name = "fuzz";
  uint64_t pos = 0x1000;
  for (size_t i = 0; i + 8 <= size && i < 8 * 64; i += 8) {
    const uint64_t w = word(data, size, i);
    RangeRecord r;
    r.start = pos + ((w >> 8) & 0xf);
    r.length = static_cast<uint32_t>(1 + (w & 0xff));
    r.function = std::string(1, static_cast<char>('a' + (w >> 16) % 26));
    r.file = std::string(static_cast<size_t>((w >> 21) & 3), 'f');
    r.line = static_cast<uint32_t>(w >> 32);
    if (((w >> 47) & 1) != 0) {  // format 8's match model: a short run of shapes that repeats
      r.start = pos;
      r.length = static_cast<uint32_t>(4 + (i / 8) % 3);
      r.line = static_cast<uint32_t>(100 + (i / 8) % 5);
      r.column = static_cast<uint32_t>((i / 8) % 2);
    }
    m.ranges.push_back(r);
    if (((w >> 24) & 1) != 0 && r.length > 2) {
      RangeRecord in = r;
      in.start = r.start + 1;
      in.length = r.length - 2;
      in.depth = 1;
      in.function = "inl" + r.function;
      in.call_line = static_cast<uint32_t>(w >> 40);
      if (((w >> 46) & 1) != 0) {  // format 8's usual call site: the position of the range it lies in
        in.call_file = r.file;
        in.call_line = r.line;
        in.call_column = r.column;
      }
      m.ranges.push_back(in);
    }
    UnwindRowRecord u;
    u.pc = r.start;
    u.kind = static_cast<uint8_t>(1 + (w >> 60) % 4);
    u.cfa_off = static_cast<int32_t>(w >> 28);
    if (((w >> 33) & 1) != 0) {  // format 7's row table: few distinct rows, repeated in a pattern
      u.cfa_off = static_cast<int32_t>(8 * (1 + ((w >> 34) & 3)));
      u.cfa_reg = static_cast<uint8_t>(6 + ((w >> 36) & 1));
      u.nsaved = static_cast<uint8_t>((w >> 37) & 3);
      for (uint8_t k = 0; k < u.nsaved; k++) {
        u.saved_reg[k] = static_cast<uint8_t>(3 + k);
        u.saved_off[k] = static_cast<int8_t>(-2 - k);
      }
    }
    m.unwind_rows.push_back(u);
    m.return_pads.push_back({r.start + r.length - 1, {{r.function, r.file, r.line, 0}}});
    // Symbol names: the range's bytes, named by an alias whose symbol may start earlier, or (format 6's
    // first kind) by the range's own function.
    if (((w >> 25) & 1) != 0)
      m.symbols.push_back({r.start, r.length, r.start - ((w >> 26) & 3), ((w >> 45) & 1) != 0 ? r.function : "sym" + r.function});
    // Call sites (optional section 0x80000003): a site returning into each range, every second one a
    // tail call to the previous range's function, each range a function with its tail-call sites.
    const bool tail = ((w >> 27) & 1) != 0 && !m.call_functions.empty();
    m.call_sites.push_back({r.start + r.length, tail, ((w >> 28) & 1) != 0 || tail,
                            tail ? m.call_functions.back().entry : r.start + (w >> 44), ""});
    if (((w >> 29) & 1) != 0 && !tail) {  // a declaration of another module instead, and this function's name
      m.call_sites.back().has_target = false;
      m.call_sites.back().target_name = "ext" + r.function;
    }
    if (((w >> 30) & 1) != 0 && m.call_symbols.size() < 26 &&
        std::none_of(m.call_symbols.begin(), m.call_symbols.end(),
                     [&](const CallSymbolRecord& y) { return y.name == "fn" + r.function; }))
      m.call_symbols.push_back({"fn" + r.function, r.start, ((w >> 31) & 1) != 0});
    m.call_functions.push_back({r.start, {{r.start, r.start + r.length}}, {}});
    if (tail) m.call_functions.back().tails.push_back(r.start + r.length);
    pos = r.start + r.length;
  }
  c.modules.push_back(m);
  auto bytes = write_bundle(c);
  if (!bytes) die(bytes.error().message.c_str());  // the records are valid by construction
  auto rd = BundleReader::open(bytes->data(), bytes->size());
  if (!rd) die(rd.error().message.c_str());
  // 3. Format 5 (still read): the same symbol names and call sites as the coded sections of formats 6 to 8.
  {
    auto bytes5 = write_bundle(c, 5);
    if (!bytes5) die(bytes5.error().message.c_str());
    auto rd5 = BundleReader::open(bytes5->data(), bytes5->size());
    if (!rd5) die(rd5.error().message.c_str());
    auto s6 = rd->symbols(0), s5 = rd5->symbols(0);
    if (!s6 || !s5 || s6->size() != s5->size()) die("format 5 gives other symbol names");
    for (size_t i = 0; i < s6->size(); i++)
      if (s6.value()[i].addr != s5.value()[i].addr || s6.value()[i].length != s5.value()[i].length ||
          s6.value()[i].sym_start != s5.value()[i].sym_start || s6.value()[i].name != s5.value()[i].name)
        die("format 5 gives another symbol name");
    auto t6 = rd->call_sites(0), t5 = rd5->call_sites(0);
    if (!t6 || !t5 || t6->sites.size() != t5->sites.size() || t6->functions.size() != t5->functions.size() ||
        t6->symbols.size() != t5->symbols.size())
      die("format 5 gives other call sites");
    for (size_t i = 0; i < t6->sites.size(); i++)
      if (t6->sites[i].return_pc != t5->sites[i].return_pc || t6->sites[i].has_target != t5->sites[i].has_target ||
          (t5->sites[i].has_target && t6->sites[i].target != t5->sites[i].target))
        die("format 5 gives another call site");
    for (size_t i = 0; i < t6->symbols.size(); i++)
      if (t6->symbols[i].addr != t5->symbols[i].addr || t6->symbols[i].name != t5->symbols[i].name)
        die("format 5 gives another call-site name");
  }
  // 4. The same records in formats 2 to 4 (still read, without symbol names), 6 (format 7's rows as
  // format 4's blocks) and 7 (format 8's ranges as groups): every range and unwind-row answer equal to
  // format 8's.
  for (uint32_t old_version : {2u, 3u, 4u, 6u, 7u}) {
    auto bytes2 = write_bundle(c, old_version);
    if (!bytes2) die(bytes2.error().message.c_str());
    auto rd2 = BundleReader::open(bytes2->data(), bytes2->size());
    if (!rd2) die(rd2.error().message.c_str());
    {
      auto r3 = rd->ranges(0), r2 = rd2->ranges(0);
      if (!r3 || !r2 || r3->size() != r2->size()) die("an older format gives different ranges");
      for (size_t i = 0; i < r3->size(); i++) {
        const RangeRecord &a = r3.value()[i], &b = r2.value()[i];
        if (a.start != b.start || a.length != b.length || a.depth != b.depth || a.function != b.function ||
            a.file != b.file || a.line != b.line || a.column != b.column || a.call_file != b.call_file ||
            a.call_line != b.call_line || a.call_column != b.call_column)
          die("an older format gives a different range record");
      }
      auto u3 = rd->unwind_rows(0), u2 = rd2->unwind_rows(0);
      if (!u3 || !u2 || u3->size() != u2->size()) die("an older format gives different unwind rows");
      for (size_t i = 0; i < u3->size(); i++)
        if (!same_row(u3.value()[i], u2.value()[i])) die("an older format gives a different unwind row");
      std::vector<uint64_t> at(addrs, addrs + 16);
      for (const UnwindRowRecord& u : m.unwind_rows)
        for (uint64_t a : {u.pc - 1, u.pc, u.pc + 1}) at.push_back(a);
      for (uint64_t a : at) {
        auto x = rd->unwind_row(0, a), y = rd2->unwind_row(0, a);
        if (!x || !y || x->found != y->found || (x->found && !same_row(x->row, y->row)))
          die("an older format gives another unwind row at an address");
      }
      for (const RangeRecord& r : m.ranges) {
        auto a = rd->lookup(0, r.start), b = rd2->lookup(0, r.start);
        if (!a || !b || a->size() != b->size()) die("an older format gives another chain");
        for (size_t i = 0; i < a->size(); i++)
          if (a.value()[i].function != b.value()[i].function || a.value()[i].file != b.value()[i].file ||
              a.value()[i].line != b.value()[i].line || a.value()[i].column != b.value()[i].column)
            die("an older format gives another frame");
      }
    }
  }
  {
    auto t = rd->call_sites(0);
    if (!t || t->sites.size() != m.call_sites.size() || t->functions.size() != m.call_functions.size())
      die("the written call sites do not read back");
    for (size_t i = 0; i < m.call_sites.size(); i++) {
      const CallSiteRecord &a = t->sites[i], &b = m.call_sites[i];
      if (a.return_pc != b.return_pc || a.tail_call != b.tail_call || a.has_target != b.has_target ||
          (a.has_target && a.target != b.target))
        die("a written call site reads back different");
    }
    std::vector<CallSymbolRecord> ys = m.call_symbols;
    std::sort(ys.begin(), ys.end(), [](const CallSymbolRecord& a, const CallSymbolRecord& b) { return a.name < b.name; });
    if (t->symbols.size() != ys.size()) die("the written call-site names do not read back");
    for (size_t i = 0; i < ys.size(); i++)
      if (t->symbols[i].name != ys[i].name || t->symbols[i].addr != ys[i].addr || t->symbols[i].global != ys[i].global)
        die("a written call-site name reads back different");
    for (size_t i = 0; i < m.call_sites.size(); i++)
      if (t->sites[i].target_name != m.call_sites[i].target_name) die("a written call site's name reads back different");
    for (size_t i = 0; i < m.call_functions.size(); i++)
      if (t->functions[i].entry != m.call_functions[i].entry || t->functions[i].ranges != m.call_functions[i].ranges ||
          t->functions[i].tails != m.call_functions[i].tails)
        die("a written call-site function reads back different");
  }
  for (const SymbolRecord& y : m.symbols) {
    auto a = rd->symbol(0, y.addr + y.length - 1);
    if (!a || !a->found || a->name != y.name || a->sym_start != y.sym_start) die("a written symbol name is not found");
  }
  for (const RangeRecord& r : m.ranges) {
    auto chain = rd->lookup(0, r.start);
    if (!chain || chain->size() <= r.depth) die("a written range is not found at its start");
    if (chain.value()[r.depth].function != r.function) die("a written range has another function");
    if (r.depth == 0) {
      auto row = rd->unwind_row(0, r.start);
      if (!row || !row->found || row->row.pc != r.start) die("a written unwind row is not found at its pc");
      auto pad = rd->return_pad(0, r.start + r.length - 1);
      if (!pad || pad->size() != 1 || pad.value()[0].line != r.line) die("a written return pad is not found");
    }
  }
  return 0;
}
