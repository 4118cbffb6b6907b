// SPDX-License-Identifier: Apache-2.0
// The headers of a PE image as the loader laid it out in memory (a minidump's or a process's copy):
// machine, timestamp, image base and size, and the CodeView RSDS identity, read by RVA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/types.hpp"
#include "pe/pe_object.hpp"

namespace stackprov::pe {

struct LoadedHeaders {
  uint16_t machine = 0;
  uint32_t timestamp = 0;
  uint64_t image_base = 0;  ///< the optional header's ImageBase (the link-time base)
  uint32_t size_of_image = 0;
  std::optional<CodeView> codeview;  ///< the first CodeView RSDS debug entry, read at its RVA
  ModuleId id;                       ///< pdb_id(*codeview), empty without one
};

/// Reads `len` bytes at `rva` of the loaded image into `buf`; false when they are not all there.
using LoadedReader = std::function<bool(uint64_t rva, void* buf, size_t len)>;

/// Reads the headers of the image whose RVA 0 `read` serves. Every offset and count is checked;
/// `name` names the image in errors: SPROV_ERR_MEMORY_UNREADABLE for bytes not there (with the
/// RVA), SPROV_ERR_BAD_FORMAT for bad magics and sizes. A CodeView entry whose record is not
/// readable or not RSDS is skipped (the image then has no identity).
Result<LoadedHeaders> read_loaded_headers(const LoadedReader& read, const std::string& name);

}  // namespace stackprov::pe
