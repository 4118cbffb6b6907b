// SPDX-License-Identifier: Apache-2.0
// PDB resolver (issue 33): function, file:line:column and the inline chain of a PE image's address from
// its PDB (lib/pdb), found by pdb::find_pdb and checked by GUID+age, as llvm-symbolizer-14 answers.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "object/object_image.hpp"
#include "pdb/pdb_file.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "symbolize/resolve_attempt.hpp"

namespace stackprov::symbolize {

/// Resolves link-time addresses (image base + RVA) of PE images with a `pdb-guid-age` identity.
/// The PDB is looked for once per image (pdb::find_pdb with the DWARF step's debug directories)
/// and kept while the resolver lives. Thread-safe.
class PdbResolver {
 public:
  explicit PdbResolver(object::DebugFileOptions opts) : opts_(std::move(opts)) {}

  /// Whether `image` is a PE image with a PDB identity whose CodeView record names a PDB (the step
  /// then applies to it).
  static bool applies(const object::ObjectImage& image);
  /// Fills `out` (resolver kPdb, provenance "pdb", source the PDB's path, source_build_id its
  /// GUID+age) and returns true when the PDB names a function or a line at `addr`; false, leaving
  /// `out` alone, when the image is not a PE with a PDB, no PDB is found, or it knows nothing of
  /// the address.
  bool resolve(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, Resolution* out);
  /// What was looked at for the image's PDB (each candidate path and why it did not serve).
  std::vector<ResolveAttempt> attempts(const std::shared_ptr<const object::ObjectImage>& image);
  /// Why the image has no PDB ("" when it has one or the step does not apply).
  std::string error(const std::shared_ptr<const object::ObjectImage>& image);

 private:
  struct Module {
    std::shared_ptr<const object::ObjectImage> image;
    std::shared_ptr<pdb::PdbFile> pdb;
    uint64_t image_base = 0;
    std::string error;
    std::vector<ResolveAttempt> attempts;
  };
  std::shared_ptr<Module> module(const std::shared_ptr<const object::ObjectImage>& image);

  object::DebugFileOptions opts_;
  std::mutex mu_;
  std::unordered_map<const object::ObjectImage*, std::shared_ptr<Module>> modules_;
};

}  // namespace stackprov::symbolize
