// SPDX-License-Identifier: Apache-2.0
// C ABI: kernel function prototypes from the kernel's BTF (sprov_kernel_btf_*, perf-import --with-btf).
#include "capi/internal.hpp"
#include "perf/kernel_btf.hpp"
#include "stackprov/kernel.h"

using namespace stackprov;
using namespace stackprov::capi;

struct sprov_kernel_btf {
  std::unique_ptr<perf::KernelBtf> btf;
};

namespace {
thread_local std::string t_prototype;  // the text of the last lookup of this thread
}  // namespace

extern "C" {

SPROV_API int sprov_kernel_btf_open(const char* path, sprov_kernel_btf** out) {
  return guard([&] {
    if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_btf_open: out is NULL"));
    *out = nullptr;
    auto b = perf::KernelBtf::open(path ? path : "/sys/kernel/btf/vmlinux");
    if (!b.ok()) return fail(b.error());
    *out = new sprov_kernel_btf{std::move(b).value()};
    return 0;
  });
}

SPROV_API void sprov_kernel_btf_free(sprov_kernel_btf* btf) { delete btf; }

SPROV_API int sprov_kernel_btf_lookup(const sprov_kernel_btf* btf, const char* name,
                                      struct sprov_kernel_prototype* out) {
  return guard([&] {
    if (btf == nullptr || name == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_kernel_btf_lookup: NULL %s", btf ? "name" : "btf"));
    perf::BtfPrototype p;
    if (!btf->btf->lookup(name, &p))
      return fail(make_error(SPROV_ERR_NOT_FOUND, "no function '%.200s' in the kernel's BTF", name));
    t_prototype = std::move(p.text);
    struct sprov_kernel_prototype o = {};
    o.sz = sizeof(o);
    o.prototype = t_prototype.c_str();
    o.func_id = p.func_id;
    o.flags = p.approximate ? static_cast<uint32_t>(SPROV_KERNEL_FRAME_BTF_APPROXIMATE) : 0u;
    return fill_out(out, o, "sprov_kernel_prototype");
  });
}

}  // extern "C"
