// SPDX-License-Identifier: Apache-2.0
// Bundle builder: walks a module's executable bytes through DwarfResolver and coalesces equal inline chains into range records.
#include "symbolize/bundle_builder.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <memory>
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

  void add(uint64_t addr, const std::vector<ResolvedFrame>& frames) {
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

Result<bundle::ModuleContents> build_module_contents(const std::string& path, const BundleBuildOptions& opts,
                                                     BundleBuildReport* report) {
  auto img = elf::ElfImage::open(path);
  if (!img) return std::move(img).error();
  std::shared_ptr<elf::ElfImage> image = img.value();
  const BuildId& id = image->build_id();
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
  if (mr.dwarf_file.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no DWARF found (%s)", path.c_str(),
                      mr.error.empty() ? "no .debug_info and no separate debug file" : mr.error.c_str());
  if (mr.dwarf_file == image->path()) {
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
  for (const auto& [lo, hi] : text) {
    if (hi - lo > opts.max_text_bytes - std::min(rep.text_bytes, opts.max_text_bytes))
      return make_error(SPROV_ERR_INVALID_ARG, "%s: executable sections exceed the %zu-byte limit", path.c_str(),
                        opts.max_text_bytes);
    rep.text_bytes += hi - lo;
    for (uint64_t a = lo; a < hi; ++a) {
      res = Resolution{};
      if (!resolver.resolve(image, a, &res, SymtabPolicy::kModuleOnly) || res.resolver != ResolvedBy::kDwarf ||
          res.frames.empty()) {
        co.gap();
        continue;
      }
      ++rep.dwarf_bytes;
      co.add(a, res.frames);
    }
    co.gap();
  }
  if (report) *report = rep;
  return m;
}

}  // namespace stackprov::symbolize
