// SPDX-License-Identifier: Apache-2.0
// Kernel function prototypes from the kernel's BTF (/sys/kernel/btf/vmlinux, libbpf): `--with-btf`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace stackprov::perf {

/// A kernel function's prototype as BTF describes it: the FUNC type, its FUNC_PROTO, the return
/// type and each parameter (name, type id), and the C declaration made of them.
struct BtfPrototype {
  std::string btf_name;      ///< the BTF function's name (the frame's name less a clone suffix)
  bool approximate = false;  ///< the frame is a compiler clone (.isra, .constprop, .cold, .part, ...):
                             ///< its real arguments may differ from the source function's prototype
  uint32_t func_id = 0, proto_id = 0, ret_type_id = 0;
  std::vector<std::pair<std::string, uint32_t>> params;  ///< in order; "" name for `...`
  std::string text;          ///< "int do_nanosleep(struct hrtimer_sleeper *t, enum hrtimer_mode mode)"
};

/// The kernel's BTF, its FUNC names indexed once (libbpf 1.1's btf__find_by_name_kind scans every
/// type, ~1 ms a lookup). Immutable after open: lookups from any thread.
class KernelBtf {
 public:
  /// Parses `path` (default /sys/kernel/btf/vmlinux) with libbpf. SPROV_ERR_UNSUPPORTED where the
  /// library is built without libbpf (the eBPF sampler off), naming why.
  static Result<std::unique_ptr<KernelBtf>> open(const std::string& path = "/sys/kernel/btf/vmlinux");
  ~KernelBtf();
  KernelBtf(const KernelBtf&) = delete;
  KernelBtf& operator=(const KernelBtf&) = delete;

  /// The prototype of kernel function `name` as /proc or kallsyms print it; a clone's
  /// ("do_x.isra.0", "do_x.cold") is its source function's, marked approximate. False when BTF
  /// has no such function.
  bool lookup(std::string_view name, BtfPrototype* out) const;

  /// The number of FUNC names indexed.
  size_t function_count() const;

  /// `name` without a compiler clone suffix (from the first '.'), and whether it had one.
  static std::string_view base_name(std::string_view name, bool* clone);

  struct Impl;

 private:
  explicit KernelBtf(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stackprov::perf
