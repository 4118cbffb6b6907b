// SPDX-License-Identifier: Apache-2.0
// The one memory-reader interface: reads of target memory that fail cleanly and never crash.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stackprov::memory {

/// Reads target memory. Implementations are `final` so that the unwinder,
/// templated over the concrete reader type, calls them without virtual
/// dispatch. A read either fills all `len` bytes and returns true, or returns
/// false (and may have written some bytes); it never faults, whatever `addr`.
class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  virtual bool read(uint64_t addr, void* buf, size_t len) = 0;
  /// Short stable name for logs and provenance ("process_vm_readv", "snapshot", ...).
  virtual const char* name() const = 0;
};

}  // namespace stackprov::memory
