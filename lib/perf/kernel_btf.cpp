// SPDX-License-Identifier: Apache-2.0
// Kernel function prototypes from the kernel's BTF (/sys/kernel/btf/vmlinux, libbpf): `--with-btf`.
#include "perf/kernel_btf.hpp"

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "stackprov/errors.h"

#ifdef STACKPROV_HAVE_KERNEL_SAMPLER
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#endif

namespace stackprov::perf {

std::string_view KernelBtf::base_name(std::string_view name, bool* clone) {
  // GCC's clones: foo.isra.0, foo.constprop.0, foo.part.0, foo.cold, foo.lto_priv.0, ...; BTF names
  // the source function only.
  const size_t dot = name.find('.');
  *clone = dot != std::string_view::npos && dot > 0;
  return *clone ? name.substr(0, dot) : name;
}

#ifdef STACKPROV_HAVE_KERNEL_SAMPLER

struct KernelBtf::Impl {
  struct btf* btf = nullptr;
  std::unordered_map<std::string_view, uint32_t> funcs;  ///< name (in btf's strings) -> FUNC id
  ~Impl() { btf__free(btf); }

  /// A type as C writes it before a declarator: "struct x *", "const char *", "int". Bounded depth:
  /// BTF from the kernel, but a chain of 32 modifiers is not a kernel type.
  std::string type_name(uint32_t id, int depth = 0) const {
    if (id == 0) return "void";
    if (depth > 32) return "?";
    const struct btf_type* t = btf__type_by_id(btf, id);
    if (t == nullptr) return "?";
    const char* n = btf__name_by_offset(btf, t->name_off);
    const std::string name = n ? n : "";
    switch (btf_kind(t)) {
      case BTF_KIND_INT:
      case BTF_KIND_FLOAT:
      case BTF_KIND_TYPEDEF: return name;
      case BTF_KIND_STRUCT: return "struct " + name;
      case BTF_KIND_UNION: return "union " + name;
      case BTF_KIND_ENUM:
      case BTF_KIND_ENUM64: return "enum " + name;
      case BTF_KIND_FWD: return (btf_kflag(t) ? "union " : "struct ") + name;
      case BTF_KIND_PTR: {
        const struct btf_type* to = btf__type_by_id(btf, t->type);
        if (to != nullptr && btf_kind(to) == BTF_KIND_FUNC_PROTO) return "void (*)(...)";  // a function pointer: its prototype not spelled out
        std::string s = type_name(t->type, depth + 1);
        return s.back() == '*' ? s + "*" : s + " *";
      }
      case BTF_KIND_CONST: return "const " + type_name(t->type, depth + 1);
      case BTF_KIND_VOLATILE: return "volatile " + type_name(t->type, depth + 1);
      case BTF_KIND_RESTRICT: return type_name(t->type, depth + 1);
      case BTF_KIND_TYPE_TAG: return type_name(t->type, depth + 1);
      case BTF_KIND_ARRAY: return type_name(btf_array(t)->type, depth + 1) + " *";
      default: return "?";
    }
  }
};

Result<std::unique_ptr<KernelBtf>> KernelBtf::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->btf = btf__parse(path.c_str(), nullptr);
  if (impl->btf == nullptr) {
    const int e = errno;
    return make_error(-e, "kernel BTF %s: %s", path.c_str(), strerror(e));
  }
  const uint32_t n = btf__type_cnt(impl->btf);
  for (uint32_t id = 1; id < n; id++) {
    const struct btf_type* t = btf__type_by_id(impl->btf, id);
    if (t == nullptr || !btf_is_func(t)) continue;
    const char* name = btf__name_by_offset(impl->btf, t->name_off);
    if (name != nullptr && *name) impl->funcs.emplace(name, id);  // the first of duplicate names
  }
  return std::unique_ptr<KernelBtf>(new KernelBtf(std::move(impl)));
}

bool KernelBtf::lookup(std::string_view name, BtfPrototype* out) const {
  bool clone = false;
  auto it = impl_->funcs.find(name);
  if (it == impl_->funcs.end()) {
    it = impl_->funcs.find(base_name(name, &clone));
    if (!clone || it == impl_->funcs.end()) return false;
  }
  const struct btf* btf = impl_->btf;
  const struct btf_type* f = btf__type_by_id(btf, it->second);
  const struct btf_type* p = f ? btf__type_by_id(btf, f->type) : nullptr;
  if (p == nullptr || !btf_is_func_proto(p)) return false;
  BtfPrototype r;
  r.btf_name = std::string(it->first);
  r.approximate = clone;
  r.func_id = it->second;
  r.proto_id = f->type;
  r.ret_type_id = p->type;
  const struct btf_param* ps = btf_params(p);
  std::string args;
  for (uint16_t i = 0; i < btf_vlen(p); i++) {
    const char* pn = btf__name_by_offset(btf, ps[i].name_off);
    const std::string pname = pn ? pn : "";
    r.params.emplace_back(pname, ps[i].type);
    if (i) args += ", ";
    if (ps[i].type == 0 && pname.empty()) {
      args += "...";
      continue;
    }
    const std::string ty = impl_->type_name(ps[i].type);
    args += ty;
    if (!pname.empty()) args += (ty.back() == '*' ? "" : " ") + pname;
  }
  const std::string ret = impl_->type_name(p->type);
  r.text = ret + (ret.back() == '*' ? "" : " ") + r.btf_name + "(" + (args.empty() ? "void" : args) + ")";
  *out = std::move(r);
  return true;
}

size_t KernelBtf::function_count() const { return impl_->funcs.size(); }

#else

struct KernelBtf::Impl {};

Result<std::unique_ptr<KernelBtf>> KernelBtf::open(const std::string&) {
  return make_error(SPROV_ERR_UNSUPPORTED,
                    "kernel BTF: this stackprov is built without libbpf (the eBPF kernel sampler is off; "
                    "the configure line says why)");
}

bool KernelBtf::lookup(std::string_view, BtfPrototype*) const { return false; }

size_t KernelBtf::function_count() const { return 0; }

#endif

KernelBtf::KernelBtf(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelBtf::~KernelBtf() = default;

}  // namespace stackprov::perf
