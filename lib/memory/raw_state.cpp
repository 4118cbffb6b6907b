// SPDX-License-Identifier: Apache-2.0
#include "memory/raw_state.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "arch/arm64/registers.hpp"
#include "arch/x86_64/registers.hpp"
#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "object/object_image.hpp"

namespace stackprov::memory {
namespace {

using evidence::Json;

Error bad(const std::string& path, const char* what) {
  return make_error(SPROV_ERR_JSON, "raw state: %s %s", path.c_str(), what);
}

/// An address or register value: a "0x..." hex string, a decimal string or a non-negative number.
Result<uint64_t> get_u64(const Json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (!v.is_string()) return bad(path, "is not an address (a \"0x...\" string or a non-negative integer)");
  const std::string& s = v.get_ref<const std::string&>();
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const size_t from = hex ? 2 : 0;
  if (s.size() == from || s.size() - from > (hex ? 16u : 20u)) return bad(path, ("'" + s + "' is not a 64-bit value").c_str());
  uint64_t out = 0;
  for (size_t i = from; i < s.size(); i++) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return bad(path, ("'" + s + "' is not a 64-bit value").c_str());
    const uint64_t base = hex ? 16 : 10;
    if (out > (UINT64_MAX - static_cast<uint64_t>(d)) / base) return bad(path, ("'" + s + "' is not a 64-bit value").c_str());
    out = out * base + static_cast<uint64_t>(d);
  }
  return out;
}

/// The DWARF number of register `name` of `arch` (the names arch/<isa>/dwarf_regs.cpp gives, and
/// arm64's fp and lr for x29 and x30); -1 when it has none.
int reg_number(Arch arch, const std::string& name) {
  if (arch == Arch::kX86_64) {
    for (int r = 0; r < arch::x86_64::Traits::kNumRegs; r++)
      if (name == arch::x86_64::dwarf_reg_name(r)) return r;
  } else if (arch == Arch::kArm64) {
    if (name == "fp") return 29;
    if (name == "lr") return 30;
    for (int r = 0; r < arch::arm64::Traits::kNumRegs; r++)
      if (name == arch::arm64::dwarf_reg_name(r)) return r;
  }
  return -1;
}

/// A module placed by the document alone (its file gone, or offline): identity, link_address, size.
Status add_module_without_file(Snapshot& s, const Json& m, const std::string& path, const std::string& file,
                               uint64_t load_address, const ModuleId& id, const char* why) {
  if (id.empty())
    return make_error(SPROV_ERR_NOT_FOUND, "raw state: %s: %s, and the state gives no identity to find its bundle by",
                      path.c_str(), why);
  if (!m.contains("link_address") || !m.contains("size"))
    return make_error(SPROV_ERR_NOT_FOUND, "raw state: %s: %s, and the state gives no %s to place it without the file",
                      path.c_str(), why, m.contains("link_address") ? "size" : "link_address");
  auto link = get_u64(m["link_address"], path + ".link_address");
  if (!link.ok()) return link.error();
  auto size = get_u64(m["size"], path + ".size");
  if (!size.ok()) return size.error();
  if (size.value() == 0 || size.value() > UINT64_MAX - load_address)
    return bad(path + ".size", "is 0 or wraps the address space");
  SnapshotModule sm;
  sm.start = load_address;
  sm.end = load_address + size.value();
  sm.file_offset = 0;
  sm.load_bias = load_address - link.value();  // modular: a module loaded below its link address
  sm.path = file;
  sm.build_id = id;
  if (Status st = s.add_module(std::move(sm)); !st) return make_error(st.error().code, "raw state: %s: %s", path.c_str(),
                                                                      st.error().message.c_str());
  return {};
}

Status add_module(Snapshot& s, const Json& m, const std::string& path, const std::string& base_dir, bool offline) {
  if (!m.is_object()) return bad(path, "is not an object");
  auto p = evidence::get_string(m, "path", path.c_str());
  if (!p.ok()) return p.error();
  if (p.value().empty() || p.value().find('\0') != std::string::npos) return bad(path + ".path", "is empty");
  const std::string file = p.value()[0] == '/' || base_dir.empty() ? p.value() : base_dir + "/" + p.value();
  if (!m.contains("load_address")) return bad(path, "has no load_address");
  auto la = get_u64(m["load_address"], path + ".load_address");
  if (!la.ok()) return la.error();
  ModuleId want;
  if (m.contains("identity")) {
    const Json& id = m["identity"];
    auto kind = evidence::get_string(id, "kind", (path + ".identity").c_str());
    if (!kind.ok()) return kind.error();
    auto hex = evidence::get_string(id, "hex", (path + ".identity").c_str());
    if (!hex.ok()) return hex.error();
    const auto k = id_kind_from_name(kind.value());
    if (!k || *k == IdKind::kNone) return bad(path + ".identity.kind", ("'" + kind.value() + "' is not an identity kind").c_str());
    want = ModuleId::from_hex(hex.value(), *k);
    if (want.empty()) return bad(path + ".identity.hex", ("'" + hex.value() + "' is not hex").c_str());
  }
  if (offline) return add_module_without_file(s, m, path, file, la.value(), want, "offline, no module file is opened");
  auto img = object::open_matching(file, s.arch, want);  // a fat Mach-O file: the state's slice
  if (!img.ok() && (img.error().code == -ENOENT || img.error().code == -ENOTDIR) && !want.empty())
    return add_module_without_file(s, m, path, file, la.value(), want, ("no file " + file).c_str());
  if (!img.ok()) return make_error(img.error().code, "raw state: %s: %s", path.c_str(), img.error().message.c_str());
  const object::ObjectImage& im = *img.value();
  if (im.arch() != s.arch)
    return make_error(SPROV_ERR_INVALID_ARG, "raw state: %s: %s is %s, the state is %s", path.c_str(), file.c_str(),
                      arch_name(im.arch()), arch_name(s.arch));
  if (!want.empty() && want != im.id())
    return make_error(SPROV_ERR_BUILD_ID_MISMATCH, "raw state: %s: the state names %s %s, the file %s has %s %s", path.c_str(),
                      id_kind_name(want.kind), want.hex().c_str(), file.c_str(), id_kind_name(im.id().kind),
                      im.id().hex().c_str());
  const uint64_t bias = im.load_bias(la.value(), 0);
  if (m.contains("link_address")) {  // given with the file there: it must place the file as the file does
    auto link = get_u64(m["link_address"], path + ".link_address");
    if (!link.ok()) return link.error();
    if (la.value() - link.value() != bias)
      return make_error(SPROV_ERR_INVALID_ARG, "raw state: %s: link_address 0x%llx, but %s's byte at load_address is at "
                        "link-time address 0x%llx", path.c_str(), static_cast<unsigned long long>(link.value()), file.c_str(),
                        static_cast<unsigned long long>(la.value() - bias));
  }
  auto sm = module_of_image(im, bias, file);
  if (!sm.ok()) return make_error(sm.error().code, "raw state: %s: %s", path.c_str(), sm.error().message.c_str());
  if (Status st = s.add_module(std::move(sm.value())); !st)
    return make_error(st.error().code, "raw state: %s: %s", path.c_str(), st.error().message.c_str());
  return {};
}

}  // namespace

Result<SnapshotModule> module_of_image(const object::ObjectImage& im, uint64_t bias, const std::string& path) {
  uint64_t lo = UINT64_MAX, hi = 0, lo_off = 0;
  for (const object::Segment& seg : im.loaded_segments()) {
    if (seg.file_size == 0) continue;
    if (seg.vaddr < lo) lo = seg.vaddr, lo_off = seg.offset;
    hi = std::max(hi, seg.vaddr + seg.file_size);
  }
  if (lo >= hi) return make_error(SPROV_ERR_INVALID_ARG, "%s has no loaded segment", path.c_str());
  SnapshotModule sm;
  sm.start = lo + bias;
  sm.end = hi + bias;
  sm.file_offset = lo_off;
  sm.load_bias = bias;
  sm.path = path;
  sm.build_id = im.id();
  return sm;
}

Result<Snapshot> snapshot_from_raw_state(std::string_view text, const std::string& base_dir, bool offline) {
  auto doc = evidence::parse_json(text, "raw state");
  if (!doc.ok()) return doc.error();
  const Json& j = doc.value();
  if (!j.is_object()) return bad("$", "is not an object");
  Snapshot s;
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1)
    return bad("$.version", "must be 1");
  auto arch = evidence::get_string(j, "arch", "$");
  if (!arch.ok()) return arch.error();
  if (arch.value() == "x86_64") s.arch = Arch::kX86_64;
  else if (arch.value() == "arm64" || arch.value() == "aarch64") s.arch = Arch::kArm64;
  else return make_error(SPROV_ERR_INVALID_ARG, "raw state: $.arch '%s' (x86_64 or arm64)", arch.value().c_str());
  s.endian = Endian::kLittle;
  for (const char* k : {"pid", "tid"})
    if (j.contains(k)) {
      auto v = get_u64(j[k], std::string("$.") + k);
      if (!v.ok()) return v.error();
      if (v.value() > INT64_MAX) return bad(std::string("$.") + k, "is too large");
      (k[0] == 'p' ? s.pid : s.tid) = static_cast<int64_t>(v.value());
    }
  if (j.contains("pc_is_return_address")) {
    if (!j["pc_is_return_address"].is_boolean()) return bad("$.pc_is_return_address", "is not a boolean");
    if (j["pc_is_return_address"].get<bool>()) s.flags |= Snapshot::kFlagPcIsReturnAddress;
  }
  auto regs = evidence::get_field(j, "registers", "$", Json::value_t::object);
  if (!regs.ok()) return regs.error();
  for (auto it = regs.value()->begin(); it != regs.value()->end(); ++it) {
    const int r = reg_number(s.arch, it.key());
    if (r < 0)
      return make_error(SPROV_ERR_INVALID_ARG, "raw state: $.registers.%s: no %s register of that name", it.key().c_str(),
                        arch_name(s.arch));
    auto v = get_u64(it.value(), "$.registers." + it.key());
    if (!v.ok()) return v.error();
    s.set_reg(r, v.value());
  }
  if (j.contains("memory")) {
    const Json& mem = j["memory"];
    if (!mem.is_array()) return bad("$.memory", "is not an array");
    for (size_t i = 0; i < mem.size(); i++) {
      const std::string path = "$.memory[" + std::to_string(i) + "]";
      const Json& b = mem[i];
      if (!b.is_object() || !b.contains("address")) return bad(path, "is not an object with an address");
      auto addr = get_u64(b["address"], path + ".address");
      if (!addr.ok()) return addr.error();
      Result<evidence::Bytes> bytes = bad(path, "has neither hex nor base64");
      if (b.contains("hex") == b.contains("base64")) return bad(path, "needs exactly one of hex and base64");
      if (b.contains("hex")) {
        auto h = evidence::get_string(b, "hex", path.c_str());
        if (!h.ok()) return h.error();
        bytes = evidence::hex_decode(h.value(), "raw state memory hex");
      } else {
        auto h = evidence::get_string(b, "base64", path.c_str());
        if (!h.ok()) return h.error();
        bytes = evidence::base64_decode(h.value(), evidence::B64Alphabet::kEither, "raw state memory base64");
      }
      if (!bytes.ok()) return make_error(bytes.error().code, "raw state: %s: %s", path.c_str(), bytes.error().message.c_str());
      if (bytes.value().empty()) continue;
      if (Status st = s.add_memory(addr.value(), bytes.value().data(), bytes.value().size()); !st)
        return make_error(st.error().code, "raw state: %s: %s", path.c_str(), st.error().message.c_str());
    }
  }
  if (j.contains("modules")) {
    const Json& mods = j["modules"];
    if (!mods.is_array()) return bad("$.modules", "is not an array");
    for (size_t i = 0; i < mods.size(); i++)
      if (Status st = add_module(s, mods[i], "$.modules[" + std::to_string(i) + "]", base_dir, offline); !st) return st.error();
  }
  return s;
}

Result<std::vector<std::string>> raw_state_files(const std::string& path) { return state_files(path, ".json", "raw state"); }

Result<std::vector<std::string>> state_files(const std::string& path, const std::string& suffix, const char* what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return make_error(SPROV_ERR_NOT_FOUND, "%s %s: %s", what, path.c_str(), strerror(errno));
  if (!S_ISDIR(st.st_mode)) return std::vector<std::string>{path};
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir);
  if (!d) return make_error(SPROV_ERR_NOT_FOUND, "%s directory %s: %s", what, path.c_str(), strerror(errno));
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string full = path + "/" + name;
    struct stat fs;
    if (::stat(full.c_str(), &fs) != 0 || !S_ISREG(fs.st_mode)) continue;
    if (out.size() == 65536) return make_error(SPROV_ERR_LIMIT, "%s directory %s: more than 65536 files", what, path.c_str());
    out.push_back(full);
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) return make_error(SPROV_ERR_NOT_FOUND, "%s directory %s: no *%s file", what, path.c_str(), suffix.c_str());
  return out;
}

}  // namespace stackprov::memory
