// SPDX-License-Identifier: Apache-2.0
// Loading per-module CFI indexes and resolving pcs to modules.
#include "unwind/module_unwind.hpp"

#include "symbolize/gopclntab.hpp"
#include "unwind/table_sources.hpp"

#include <algorithm>
#include <cstring>

#include "arch/arm64/registers.hpp"
#include "arch/mips32/registers.hpp"
#include "arch/x86_64/registers.hpp"

namespace stackprov::unwind {

uint32_t next_module_generation() {
  static std::atomic<uint32_t> gen{0};
  uint32_t g = gen.fetch_add(1, std::memory_order_relaxed) + 1;
  if (g == 0) g = gen.fetch_add(1, std::memory_order_relaxed) + 1;
  return g;
}

namespace {

/// The CFI traits of a module's architecture (arch/<isa>/registers.hpp); zero for an unknown one.
ArchCfi arch_cfi_for(Arch arch) {
  switch (arch) {
    case Arch::kX86_64: return arch_cfi_of<arch::x86_64::Traits>();
    case Arch::kArm64: return arch_cfi_of<arch::arm64::Traits>();
    case Arch::kMips32: return arch_cfi_of<arch::mips32::TraitsLE>();  // the same in both byte orders
    default: return ArchCfi{};
  }
}

/// A DWARF CFI section of `img` (`t` one of its unwind tables of kind eh_frame or debug_frame).
dwarf::CfiSection make_section(const object::ObjectImage& img, const object::SectionRef& s, bool is_eh,
                               const object::SectionRef* hdr) {
  dwarf::CfiSection c;
  c.data = s.data;
  c.size = s.size;
  c.vaddr = s.addr;
  c.is_eh_frame = is_eh;
  c.big_endian = img.big_endian();
  c.addr_size = img.addr_size();
  c.vendor_ops = arch_cfi_for(img.arch()).vendor_ops;
  if (hdr != nullptr && hdr->data != nullptr) c.data_vaddr = hdr->addr;
  if (auto text = img.section(".text")) c.text_vaddr = text->addr;
  return c;
}

/// `img`'s unwind table of `kind` with bytes, or nullptr.
const object::UnwindTable* table_of(const std::vector<object::UnwindTable>& tables, std::string_view kind) {
  for (const object::UnwindTable& t : tables)
    if (t.kind == kind && t.data.data != nullptr && t.data.size > 0) return &t;
  return nullptr;
}

}  // namespace

Result<std::shared_ptr<LoadedModule>> LoadedModule::load(std::shared_ptr<const object::ObjectImage> image,
                                                         object::DebugFileOptions debug_opts) {
  if (image == nullptr) return make_error(SPROV_ERR_INVALID_ARG, "LoadedModule::load: no image");
  const std::vector<object::UnwindTable> tables = image->unwind_tables();  // listed once
  auto src = make_source(*image, tables);
  if (!src.ok()) return make_error(src.error().code, "%s: %s", image->path().c_str(), src.error().message.c_str());
  std::shared_ptr<LoadedModule> m(new LoadedModule());
  m->object_ = std::move(image);
  m->debug_opts_ = std::move(debug_opts);
  m->generation_ = next_module_generation();
  const object::ObjectImage& img = *m->object_;
  m->arch_ = img.arch();
  m->big_endian_ = img.big_endian();
  m->row_params_ = arch_cfi_for(m->arch_).rows;
  if (src.value() != nullptr) {
    m->table_ = std::move(src).value();
    m->registered_table_ = true;
    return m;
  }
  if (const object::UnwindTable* eh = table_of(tables, "eh_frame")) {
    m->eh_ = make_section(img, eh->data, true, &eh->aux);
    bool indexed = false;
    if (eh->aux.data != nullptr) {
      indexed = dwarf::FdeIndex::from_eh_frame_hdr(eh->aux.data, eh->aux.size, eh->aux.addr, m->eh_, &m->eh_index_) ==
                dwarf::CfiStatus::kOk;
    }
    if (!indexed) indexed = dwarf::FdeIndex::build(m->eh_, &m->eh_index_) == dwarf::CfiStatus::kOk;
    m->has_eh_ = indexed && !m->eh_index_.empty();
  }
  if (m->has_eh_) m->eh_compiled_ = std::make_unique<CompiledCfi>(m->eh_, m->eh_index_, m->row_params_);
  m->table_ = std::make_unique<DwarfCfiSource>(*m);
  return m;
}

Result<std::shared_ptr<LoadedModule>> LoadedModule::load_bundle(BundleSource src, Arch arch, bool big_endian) {
  if (src.reader == nullptr || src.index >= src.reader->modules().size())
    return make_error(SPROV_ERR_INVALID_ARG, "bundle %s: no module %zu", src.digest.c_str(), src.index);
  std::shared_ptr<LoadedModule> m(new LoadedModule());
  m->generation_ = next_module_generation();
  m->arch_ = arch;
  m->big_endian_ = big_endian;
  m->bundle_ = std::make_unique<BundleSource>(std::move(src));
  m->table_ = std::make_unique<BundleRowsSource>(*m);
  return m;
}

UnwindRule LoadedModule::bundle_rule(uint64_t rel, int num_regs) const {
  UnwindRule rule;  // kInvalid
  if (!bundle_) return rule;
  auto row = bundle_->reader->unwind_row(bundle_->index, rel);
  if (!row.ok()) return rule;
  if (!row.value().found) {
    rule.kind = UnwindRule::kNoInfo;
    return rule;
  }
  const bundle::UnwindRowRecord& r = row.value().row;
  rule.signal_frame = r.signal_frame ? 1 : 0;
  rule.from_debug_frame = r.from_debug_frame ? 1 : 0;
  switch (r.kind) {
    case bundle::UnwindRowRecord::kEndOfStack: rule.kind = UnwindRule::kEndOfStack; return rule;
    case bundle::UnwindRowRecord::kFull: rule.kind = UnwindRule::kFull; return rule;
    case bundle::UnwindRowRecord::kNoInfo: rule.kind = UnwindRule::kNoInfo; return rule;
    case bundle::UnwindRowRecord::kCfaReg: break;
    default: return rule;
  }
  // The unwinder indexes its register state with these numbers: check them all.
  static_assert(UnwindRule::kMaxSaved == bundle::kMaxSavedRegs);
  if (r.cfa_reg >= num_regs || r.ra_reg >= num_regs || r.nsaved > UnwindRule::kMaxSaved ||
      r.ra_kind > bundle::UnwindRowRecord::kRaUnspecified)
    return rule;
  for (int i = 0; i < r.nsaved; i++) {
    if (r.saved_reg[i] >= num_regs) return rule;
    rule.saved_reg[i] = r.saved_reg[i];
    rule.saved_off[i] = r.saved_off[i];
  }
  rule.kind = UnwindRule::kCfaReg;
  rule.cfa_reg = r.cfa_reg;
  rule.cfa_off = r.cfa_off;
  rule.nsaved = r.nsaved;
  rule.ra_kind = r.ra_kind;
  rule.ra_reg = r.ra_reg;
  rule.ra_off = r.ra_off;
  return rule;
}

const LoadedModule::DebugFrame* LoadedModule::debug_frame() const {
  if (!object_) return nullptr;
  stackprov::call_once(debug_once_, [this] {
    auto try_image = [this](const object::ObjectImage& img) -> bool {
      const std::vector<object::UnwindTable> tables = img.unwind_tables();
      const object::UnwindTable* t = table_of(tables, "debug_frame");
      if (t == nullptr) return false;
      auto df = std::make_unique<DebugFrame>();
      df->section = make_section(img, t->data, false, nullptr);
      if (dwarf::FdeIndex::build(df->section, &df->index) != dwarf::CfiStatus::kOk || df->index.empty()) return false;
      df->compiled = std::make_unique<CompiledCfi>(df->section, df->index, row_params_);
      debug_frame_ = std::move(df);
      return true;
    };
    if (try_image(*object_)) return;
    auto dbg = object_->find_debug_file(debug_opts_);
    if (dbg.ok()) {
      debug_image_ = dbg.value();
      try_image(*debug_image_);
    }
  });
  return debug_frame_.get();
}

dwarf::CfiStatus LoadedModule::find_fde(uint64_t rel, bool use_debug_frame, dwarf::FdeInfo* fde,
                                        const dwarf::CfiSection** sec, bool* from_debug) const {
  dwarf::CfiStatus st = dwarf::CfiStatus::kNotFound;
  if (has_eh_frame()) {
    st = eh_index().lookup(eh_frame(), rel, fde);
    if (st == dwarf::CfiStatus::kOk) {
      *sec = &eh_frame();
      *from_debug = false;
    }
  }
  if (st == dwarf::CfiStatus::kNotFound && use_debug_frame) {
    if (const LoadedModule::DebugFrame* df = debug_frame()) {
      st = df->index.lookup(df->section, rel, fde);
      if (st == dwarf::CfiStatus::kOk) {
        *sec = &df->section;
        *from_debug = true;
      }
    }
  }
  return st;
}

dwarf::CfiStatus LoadedModule::compiled_rule(uint64_t rel, bool use_debug_frame, const RowParams& p,
                                             UnwindRule* rule) const {
  dwarf::CfiStatus st = dwarf::CfiStatus::kNotFound;
  if (eh_compiled_) st = eh_compiled_->lookup(rel, p, rule);
  if (st == dwarf::CfiStatus::kNotFound && use_debug_frame) {
    if (const DebugFrame* df = debug_frame(); df != nullptr && df->compiled) st = df->compiled->lookup(rel, p, rule);
  }
  return st;
}

const symbolize::GoPclntab* LoadedModule::go_pclntab() const {
  if (!has_elf()) return nullptr;  // Go's pclntab is read from ELF files (gopclntab.hpp)
  stackprov::call_once(go_once_, [this] { go_ = symbolize::GoPclntab::load(object_); });
  return go_.get();
}

bool LoadedModule::read_code(uint64_t vaddr, void* buf, size_t len) const {
  return object_ && object_->read_code(vaddr, buf, len);
}

uint64_t ModuleTable::next_table_stamp() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void ModuleTable::add(const ModuleSlot& s, std::shared_ptr<LoadedModule> hold) {
  stamp_ = next_table_stamp();
  slots_.push_back(s);
  ModuleSlot& slot = slots_.back();
  const UnwindSource* table = s.module != nullptr ? s.module->table() : nullptr;
  slot.table_generation = table != nullptr ? s.module->generation() : 0;
  if (table != nullptr) slot.table_method[0] = table->method(false), slot.table_method[1] = table->method(true);
  slot.plain_methods = 0;
  for (int i = 0; i < 2; i++) {
    const Method m = slot.table_method[i];
    if (m != Method::kSignal && m != Method::kFramePointer && m != Method::kScan && m != Method::kPrologue)
      slot.plain_methods |= static_cast<uint8_t>(1u << i);
  }
  if (hold) hold_.push_back(std::move(hold));
}

void ModuleTable::finish() {
  stamp_ = next_table_stamp();
  std::sort(slots_.begin(), slots_.end(),
            [](const ModuleSlot& a, const ModuleSlot& b) { return a.start < b.start; });
  disjoint_ = true;
  uint64_t max_end = 0;
  for (size_t i = 0; i < slots_.size(); i++) {
    // Equal starts (an empty slot beside another) also make find() pick by sort order.
    if (i > 0 && (slots_[i].start < max_end || slots_[i].start == slots_[i - 1].start)) disjoint_ = false;
    max_end = std::max(max_end, slots_[i].end);
  }
}

const ModuleSlot* ModuleTable::find(uint64_t pc) const {
  auto it = std::upper_bound(slots_.begin(), slots_.end(), pc,
                             [](uint64_t v, const ModuleSlot& s) { return v < s.start; });
  if (it == slots_.begin()) return nullptr;
  --it;
  return pc < it->end ? &*it : nullptr;
}

}  // namespace stackprov::unwind
