// SPDX-License-Identifier: Apache-2.0
// PDB resolver: a PE image's PDB found and checked once, then llvm-symbolizer-14's answer per address.
#include "symbolize/pdb_resolver.hpp"

#include "pdb/pdb_find.hpp"
#include "pe/pe_object.hpp"

namespace stackprov::symbolize {

namespace {

AttemptOutcome outcome_of(object::DebugFileCandidate::Outcome o) {
  using O = object::DebugFileCandidate::Outcome;
  switch (o) {
    case O::kUsed: return AttemptOutcome::kFound;
    case O::kMissing: return AttemptOutcome::kMissing;
    case O::kIdentityMismatch: return AttemptOutcome::kIdentityMismatch;
    case O::kCrcMismatch: return AttemptOutcome::kCrcMismatch;
    case O::kUnreadable:
    case O::kSelf: return AttemptOutcome::kUnreadable;
  }
  return AttemptOutcome::kMissing;
}

}  // namespace

bool PdbResolver::applies(const object::ObjectImage& image) {
  const auto* pe = dynamic_cast<const pe::PeObject*>(&image);
  // A CodeView record that names no PDB (mingw's --build-id) leaves the image to the DWARF step.
  return pe != nullptr && pe->codeview().has_value() && !pe->codeview()->pdb_path.empty() &&
         image.id().kind == IdKind::kPdbGuidAge;
}

std::shared_ptr<PdbResolver::Module> PdbResolver::module(const std::shared_ptr<const object::ObjectImage>& image) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = modules_.find(image.get());
  if (it != modules_.end() && it->second->image == image) return it->second;
  auto m = std::make_shared<Module>();
  m->image = image;
  const auto* pe = dynamic_cast<const pe::PeObject*>(image.get());
  m->image_base = pe->image_base();
  pdb::PdbWanted want;
  want.image_path = image->path();
  want.target_root = image->target_root();
  want.rsds_path = pe->codeview()->pdb_path;
  want.id = image->id();
  std::vector<object::DebugFileCandidate> looked_at;
  auto f = pdb::find_pdb(want, opts_, &looked_at);
  for (const object::DebugFileCandidate& c : looked_at)
    m->attempts.push_back({"pdb", c.path, outcome_of(c.outcome), c.rule + ": " + (c.reason.empty() ? "used" : c.reason)});
  if (f) m->pdb = f.value();
  else m->error = f.error().message;
  modules_[image.get()] = m;
  return m;
}

bool PdbResolver::resolve(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, Resolution* out) {
  if (!image || !applies(*image)) return false;
  std::shared_ptr<Module> m = module(image);
  if (!m->pdb) return false;
  auto a = m->pdb->lookup(addr, m->image_base);
  if (!a) return false;
  const pdb::Answer& ans = a.value();
  const pdb::Frame& phys = ans.frames.back();
  if (phys.function.empty() && !phys.has_file && ans.frames.size() == 1) return false;
  out->frames.resize(ans.frames.size());
  for (size_t i = 0; i < ans.frames.size(); i++) {
    const pdb::Frame& f = ans.frames[i];
    ResolvedFrame& r = out->frames[i];
    r = ResolvedFrame{};
    r.function = f.function;
    r.linkage_name = f.function;
    // llvm --functions=short: the procedure's own name for the physical frame (not the public's).
    r.short_function = i + 1 == ans.frames.size() ? ans.short_name : f.function;
    r.file = f.file;
    r.line = f.line;
    r.column = f.column;
  }
  out->resolver = ResolvedBy::kPdb;
  out->provenance = "pdb";
  out->source = m->pdb->path();
  out->source_build_id = m->pdb->id();
  out->bundle_digest.clear();
  out->symbol_named = false;
  out->before_symbol = Resolution::BeforeSymbol{};
  return true;
}

std::vector<ResolveAttempt> PdbResolver::attempts(const std::shared_ptr<const object::ObjectImage>& image) {
  if (!image || !applies(*image)) return {};
  std::shared_ptr<Module> m = module(image);
  std::vector<ResolveAttempt> out = m->attempts;
  if (!m->pdb && out.empty()) out.push_back({"pdb", "", AttemptOutcome::kMissing, m->error});
  return out;
}

std::string PdbResolver::error(const std::shared_ptr<const object::ObjectImage>& image) {
  if (!image || !applies(*image)) return {};
  return module(image)->error;
}

}  // namespace stackprov::symbolize
