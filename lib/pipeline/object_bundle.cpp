// SPDX-License-Identifier: Apache-2.0
// Bundle modules of object files of other formats: identity, symbol ranges, unwind source rows.
#include "pipeline/object_bundle.hpp"

#include <algorithm>

#include "evidence/encoding.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/module_unwind.hpp"

namespace stackprov::pipeline {

Result<bundle::ModuleContents> object_module_contents(std::shared_ptr<const object::ObjectImage> image_ptr,
                                                     const std::string& name) {
  if (image_ptr == nullptr) return make_error(SPROV_ERR_INVALID_ARG, "object_module_contents: no image");
  const object::ObjectImage& image = *image_ptr;
  const ModuleId& id = image.id();
  if (id.empty())
    return make_error(SPROV_ERR_INVALID_ARG, "%s: a %.*s file without an identity: a bundle is found by it",
                      image.path().c_str(), static_cast<int>(image.format_name().size()), image.format_name().data());
  bundle::ModuleContents m;
  m.id.kind = id.kind;
  m.id.bytes.assign(id.bytes, id.bytes + id.len);
  m.name = name;
  const auto bytes = image.file_bytes();
  m.sha256_file = evidence::sha256(bytes.data(), bytes.size());
  std::vector<object::Symbol> syms = image.symbols();
  std::stable_sort(syms.begin(), syms.end(), [](const object::Symbol& a, const object::Symbol& b) { return a.addr < b.addr; });
  uint64_t end = 0;
  for (const object::Symbol& s : syms) {
    if (s.size == 0 || s.size > UINT32_MAX || s.addr < end) continue;  // unsized, too long, or overlapping
    bundle::RangeRecord r;
    r.start = s.addr;
    r.length = static_cast<uint32_t>(s.size);
    r.function = std::string(s.name);
    r.from_symtab = true;
    m.ranges.push_back(std::move(r));
    end = s.addr + s.size;
  }
  // The unwind rows: the module as the unwinder loads it (its source and its arch's row parameters).
  auto lm = unwind::LoadedModule::load(std::move(image_ptr), object::DebugFileOptions{});
  if (!lm.ok()) return std::move(lm).error();
  if (const unwind::UnwindSource* src = lm.value()->source()) {
    auto rows = unwind::bundle_source_rows(*src, lm.value()->row_params());
    if (!rows.ok()) return std::move(rows).error();
    m.unwind_rows = std::move(rows).value();
  }
  return m;
}

}  // namespace stackprov::pipeline
