// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the PE/COFF image reader (lib/pe/pe_object.*) on raw bytes: headers, sections with long
// names, directories, the debug directory; then every query an upper layer makes of the image (the
// COFF symbol table, the exports and the symbol views built from them too).
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
  for (const pe::CoffSymbol& c : o.coff_symbols()) (void)c.name.size();
  for (const pe::Export& e : o.exports()) (void)e.name.size();
  for (const object::Symbol& s : o.symbols()) {
    (void)o.symbol_at(s.addr);
    (void)o.symbol_at(s.addr + s.size - 1);
  }
  for (const object::Symbol& s : o.symbolizer_symbols()) (void)s.name.size();
  return 0;
}
