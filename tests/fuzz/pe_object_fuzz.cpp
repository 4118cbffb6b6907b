// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the PE/COFF image reader (lib/pe/pe_object.*) on raw bytes: headers, sections with long
// names, directories, the debug directory; then every query an upper layer makes of the image.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pe/pe_object.hpp"

using namespace stackprov;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = pe::PeObject::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.exe");
  if (!r.ok()) return 0;
  const pe::PeObject& o = *r.value();
  (void)pe::symbol_server_key(o.id());
  for (const char* name : {".text", ".pdata", ".debug_info", ".debug_line", ".rdata"}) (void)o.section(name);
  for (const auto& t : o.unwind_tables()) (void)t.data.size;
  for (const auto& s : o.loaded_segments()) (void)s.file_size;
  uint8_t buf[16];
  for (const auto& c : o.code_sections()) {
    (void)o.read_code(c.addr, buf, sizeof buf);
    (void)o.read_code(c.end - 1, buf, 1);
  }
  for (const pe::Section& s : o.sections()) (void)o.at_rva(s.rva, s.raw_size);
  return 0;
}
