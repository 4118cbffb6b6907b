// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the PDB reader (lib/pdb/pdb_file.*) on raw bytes: MSF container, info stream, DBI; then
// every module's procedures, the publics, and lookups (functions, lines, inline chains) across each
// section's first bytes and each procedure's range.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pdb/pdb_file.hpp"

using namespace stackprov;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = pdb::PdbFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.pdb");
  if (!r.ok()) return 0;
  pdb::PdbFile& f = *r.value();
  (void)pdb::guid_age_key(f.id());
  constexpr uint64_t kBase = 0x140000000;
  for (size_t m = 0; m < f.modules().size() && m < 64; m++) {
    auto procs = f.procs(m);
    if (!procs.ok()) continue;
    for (const pdb::Proc& p : procs.value()) {
      if (p.segment == 0 || p.segment > f.section_rvas().size()) continue;
      const uint64_t start = kBase + f.section_rvas()[p.segment - 1] + p.code_offset;
      for (uint64_t a = start; a < start + p.code_size && a < start + 256; a++) (void)f.lookup(a, kBase);
    }
  }
  (void)f.publics();
  for (uint32_t rva : f.section_rvas())
    for (uint64_t a = 0; a < 64; a++) (void)f.lookup(kBase + rva + a, kBase);
  return 0;
}
