// SPDX-License-Identifier: Apache-2.0
// Bundle builder: walks a module's executable bytes through DwarfResolver, coalesces equal inline chains into range records and finds return pads (the arch's call decoders).
#include "symbolize/bundle_builder.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <vector>

#include "arch/arch_ops.hpp"
#include "object/object_image.hpp"
#include "evidence/encoding.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "symbolize/symbolizer.hpp"

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

std::vector<CallSite> decode_calls(Arch arch, bool big_endian, const uint8_t* code, size_t n, uint64_t addr,
                                   size_t* undecoded) {
  std::vector<CallSite> out;
  // The decoders are the arch's (arch/<isa>/return_address.hpp); no calls for an arch without traits.
  arch::with_arch_traits(arch, big_endian ? Endian::kBig : Endian::kLittle, [&](auto traits) {
    using Ops = arch::Ops<typename decltype(traits)::type>;
    Ops::for_each_call(code, n, addr, big_endian, undecoded, [&](const CallSite& c) { out.push_back(c); });
  });
  return out;
}

namespace {

/// What gdb's tail-call search (dwarf/tail_calls.hpp) can use of the module's DWARF call sites
/// (doc/bundles.md "Call sites"): the functions with a tail-call list (T), every site of those
/// lists, the functions those sites call (the search asks their entries and lists), every call site
/// whose target is in T (the only first sites the search gets anywhere from) or is a declaration
/// the module does not define (another module's function, found by name when the search runs),
/// and the names other modules' sites can find the kept functions by.
void add_call_sites(DwarfResolver& resolver, const std::shared_ptr<const object::ObjectImage>& image,
                    bundle::ModuleContents* m) {
  dwarf::DwarfIndex::CallSiteExport ex;
  if (!resolver.export_call_sites(image, &ex)) return;
  std::map<uint64_t, size_t> by_entry;  // the first function of an entry (units never share one)
  for (size_t i = 0; i < ex.functions.size(); ++i) by_entry.emplace(ex.functions[i].entry, i);
  auto in_t = [&](uint64_t a) {
    auto it = by_entry.find(a);
    return it != by_entry.end() && !ex.functions[it->second].tails.empty();
  };
  // A site's record: a definition's entry; a declaration the module's tables define, its address;
  // one they do not, its name (resolved across the stack's modules when the search runs).
  auto record = [&](const dwarf::CallSiteInfo& s) {
    bundle::CallSiteRecord r;
    r.return_pc = s.return_pc;
    r.tail_call = s.tail_call;
    if (s.target == dwarf::CallSiteInfo::Target::kAddress) {
      r.has_target = true;
      r.target = s.target_addr;
    } else if (s.target == dwarf::CallSiteInfo::Target::kName) {
      bool global = false;
      r.has_target = resolver.symbol_address(image, s.target_name, &r.target, &global);
      if (!r.has_target) r.target_name = std::string(s.target_name);
    }
    return r;
  };
  std::set<uint64_t> funcs;
  std::map<uint64_t, bundle::CallSiteRecord> sites;  // by return pc, the first DIE's
  for (const auto& f : ex.functions) {
    if (f.tails.empty()) continue;
    funcs.insert(f.entry);
    for (const dwarf::CallSiteInfo& t : f.tails) {
      const bundle::CallSiteRecord& r = sites.emplace(t.return_pc, record(t)).first->second;
      if (r.has_target && by_entry.count(r.target)) funcs.insert(r.target);
    }
  }
  for (const dwarf::CallSiteInfo& s : ex.sites) {
    if (sites.count(s.return_pc)) continue;
    bundle::CallSiteRecord r = record(s);
    if ((r.has_target && in_t(r.target)) || (!r.has_target && !r.target_name.empty())) sites.emplace(s.return_pc, r);
  }
  // Ranges of functions kept from different units never overlap in a sane file; where they do,
  // the later entry's function is left out (the writer refuses overlaps).
  std::map<uint64_t, uint64_t> taken;  // low -> high
  auto free_range = [&](uint64_t lo, uint64_t hi) {
    auto it = taken.upper_bound(lo);
    if (it != taken.end() && it->first < hi) return false;
    return it == taken.begin() || std::prev(it)->second <= lo;
  };
  std::set<std::string_view> names;
  std::vector<std::string_view> at;
  for (uint64_t e : funcs) {
    const auto& f = ex.functions[by_entry.at(e)];
    if (!std::all_of(f.ranges.begin(), f.ranges.end(), [&](const auto& r) { return free_range(r.first, r.second); }))
      continue;
    bundle::CallFunctionRecord rec;
    rec.entry = e;
    rec.ranges = f.ranges;
    for (const auto& r : f.ranges) taken[r.first] = r.second;
    for (const dwarf::CallSiteInfo& t : f.tails)
      if (sites.at(t.return_pc).tail_call) rec.tails.push_back(t.return_pc);
    m->call_functions.push_back(std::move(rec));
    at.clear();
    resolver.symbol_names_at(image, e, &at);
    names.insert(at.begin(), at.end());
  }
  // Each name as the live lookup answers it in this module (it may pick another symbol of the name).
  for (std::string_view n : names) {
    bundle::CallSymbolRecord y;
    if (n.empty() || !resolver.symbol_address(image, n, &y.addr, &y.global)) continue;
    y.name = std::string(n);
    m->call_symbols.push_back(std::move(y));
  }
  for (auto& [pc, r] : sites) m->call_sites.push_back(r);
}

}  // namespace

Result<bundle::ModuleContents> build_module_contents(const std::string& path, const BundleBuildOptions& opts,
                                                     BundleBuildReport* report) {
  auto img = object::open(path);
  if (!img) return std::move(img).error();
  std::shared_ptr<const object::ObjectImage> image = img.value();
  const ModuleId& id = image->id();
  if (id.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no GNU build-id note (a bundle module needs one)", path.c_str());

  bundle::ModuleContents m;
  m.id.kind = id.kind;  // the module's own kind (an ELF build-id; a PE's PDB GUID+age)
  m.id.bytes.assign(id.bytes, id.bytes + id.len);
  m.name = opts.name.empty() ? basename_of(path) : opts.name;
  m.sha256_file = evidence::sha256(image->file_bytes().data(), image->file_bytes().size());

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
    auto dbg = object::open(mr.dwarf_file);  // mapped read-only, as the resolver does
    if (!dbg) return std::move(dbg).error();
    m.sha256_debug = evidence::sha256(dbg.value()->file_bytes().data(), dbg.value()->file_bytes().size());
  }

  BundleBuildReport rep;
  rep.debug_file = mr.dwarf_file;
  // Executable sections, in address order.
  const std::vector<object::CodeSection> code = image->code_sections();
  std::vector<std::pair<uint64_t, uint64_t>> text;
  for (const object::CodeSection& c : code)
    if (c.end > c.addr) text.emplace_back(c.addr, c.end);
  std::sort(text.begin(), text.end());
  uint64_t text_total = 0;
  for (const auto& [lo, hi] : text) text_total += hi - lo;
  RangeCoalescer co(&m.ranges);
  // Symbol names (format 5): the naming rule's answer for every byte (symbolize::Symbolizer, what
  // `stack` names a frame by: PLT stubs, .symtab of the module or its debug file, .dynsym), one
  // record per run of bytes with the same name and symbol start.
  Symbolizer tables(false, opts.debug);
  SymbolInfo si;
  auto name_byte = [&](uint64_t a) {
    if (!tables.lookup(image, a, &si)) return;
    if (!m.symbols.empty()) {
      bundle::SymbolRecord& b = m.symbols.back();
      if (b.addr + b.length == a && b.sym_start == si.addr && b.name == si.linkage) {
        ++b.length;
        return;
      }
    }
    m.symbols.push_back({a, 1, si.addr, std::string(si.linkage)});
  };
  Resolution res;
  bool last_symtab = false;
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // DWARF-described byte runs, per section
  for (const auto& [lo, hi] : text) {
    if (hi - lo > opts.max_text_bytes - std::min(rep.text_bytes, opts.max_text_bytes))
      return make_error(SPROV_ERR_INVALID_ARG, "%s: executable sections exceed the %zu-byte limit", path.c_str(),
                        opts.max_text_bytes);
    rep.text_bytes += hi - lo;
    for (uint64_t a = lo; a < hi; ++a) {
      if (opts.progress && ((a - lo) & 0xfffff) == 0xfffff)  // every MiB of this section
        opts.progress(static_cast<double>(rep.text_bytes - (hi - lo) + (a - lo)) / static_cast<double>(text_total));
      name_byte(a);
      res = Resolution{};
      const bool ok = resolver.resolve(image, a, &res, SymtabPolicy::kModuleThenDebugFile) && !res.frames.empty();
      const bool from_dwarf = ok && res.resolver == ResolvedBy::kDwarf;
      // Symbol-table answers (llvm-symbolizer-14 names the address from .symtab/.dynsym alone:
      // `_start`, .init, assembly or CUs without DWARF; where the module's tables name nothing,
      // llvm-symbolizer-14 on the separate debug file, whose .symtab keeps the local symbols a
      // stripped module lost, e.g. libc's `__restore_rt`): one depth-0 frame, the linkage name
      // and what llvm prints as file:line:column there ("??:0:0" = "", 0, 0, or the STT_FILE name).
      const bool from_symtab = ok && (res.resolver == ResolvedBy::kSymtab || res.resolver == ResolvedBy::kDynsym) &&
                               res.frames.size() == 1 && !res.frames[0].function.empty();
      if (!from_dwarf && !from_symtab) {
        co.gap();
        continue;
      }
      if (from_symtab) {
        ++rep.symtab_bytes;
        if (res.source != image->path()) ++rep.debug_symtab_bytes;  // named by the debug file
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
    const object::SectionRef* sec = nullptr;
    for (const object::CodeSection& c : code)  // the first readable one that starts there
      if (c.addr == lo && c.bytes) {
        sec = &*c.bytes;
        break;
      }
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
  add_call_sites(resolver, image, &m);
  rep.call_sites = m.call_sites.size();
  rep.call_functions = m.call_functions.size();
  if (report) *report = rep;
  return m;
}

}  // namespace stackprov::symbolize
