// SPDX-License-Identifier: Apache-2.0
// A trace's kernel segments (trace-capture --with-btf): what a capture stores, how a replay re-derives
// them from the running kernel's kallsyms and BTF, and the platform-id check of the kernel's build-id.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "core/context.hpp"
#include "evidence/encoding.hpp"
#include "perf/kernel_btf.hpp"
#include "perf/kernel_symbols.hpp"
#include "pipeline/trace.hpp"

namespace stackprov::pipeline {

namespace {

/// The BTF file the prototypes come from: perf::KernelBtf::open's default, the running kernel's.
constexpr const char* kKernelBtfPath = "/sys/kernel/btf/vmlinux";
constexpr const char* kKallsymsPath = "/proc/kallsyms";

std::string hex_of(const std::vector<uint8_t>& b) { return evidence::hex_encode(b.data(), b.size()); }

std::string describe(const trace::CapturedKernelFrame& f) {
  char b[64];
  snprintf(b, sizeof b, "+0x%" PRIx64 "/0x%" PRIx64, f.offset, f.size);
  return f.symbol + b + (f.module.empty() ? "" : " [" + f.module + "]");
}

/// The symbols of the running kernel that a replay needs: for each name of the segments, every
/// address it has in kallsyms with its module ("" the kernel image) and the size the kernel prints
/// for it (/proc's "+off/size": up to the next higher address of the same table, core or module).
struct KallsymsNames {
  struct Candidate {
    uint64_t addr = 0, size = 0;  ///< size 0: no higher address in its table (unknown)
    std::string module;
  };
  std::map<std::string, std::vector<Candidate>> by_name;
  bool hidden = false;  ///< every address 0 (kernel.kptr_restrict, not root)
};

Result<KallsymsNames> load_kallsyms_names(const std::set<std::string>& names) {
  std::ifstream in(kKallsymsPath);
  if (!in) return make_error(SPROV_ERR_IO, "%s cannot be opened", kKallsymsPath);
  KallsymsNames out;
  std::map<std::string, std::vector<uint64_t>> table;  // module -> every address of its symbols
  std::vector<std::pair<std::string, KallsymsNames::Candidate>> wanted;
  std::string line;
  bool any_address = false;
  while (std::getline(in, line)) {
    // "ffffffff81421c60 T hrtimer_nanosleep" or "ffffffffc0a01000 t nfs_foo\t[nfs]"
    const size_t sp1 = line.find(' ');
    if (sp1 == std::string::npos || sp1 + 3 > line.size() || line[sp1 + 2] != ' ') continue;
    const uint64_t addr = std::strtoull(line.substr(0, sp1).c_str(), nullptr, 16);
    any_address |= addr != 0;
    std::string name = line.substr(sp1 + 3);
    std::string module;
    if (const size_t tab = name.find('\t'); tab != std::string::npos) {
      module = name.substr(tab + 1);
      name.resize(tab);
      if (module.size() >= 2 && module.front() == '[' && module.back() == ']') module = module.substr(1, module.size() - 2);
    }
    table[module].push_back(addr);
    if (names.count(name)) wanted.push_back({name, {addr, 0, module}});
  }
  out.hidden = !any_address;
  for (auto& [m, addrs] : table) std::sort(addrs.begin(), addrs.end());
  for (auto& [name, c] : wanted) {
    const auto& addrs = table[c.module];
    auto next = std::upper_bound(addrs.begin(), addrs.end(), c.addr);
    c.size = next == addrs.end() ? 0 : *next - c.addr;
    out.by_name[name].push_back(std::move(c));
  }
  return out;
}

/// The frame as the running kernel gives it again: the name's address in kallsyms (of the frame's
/// module) plus the recorded offset lies in that symbol, whose size is the recorded one. "" when it
/// is re-derived, else what differs.
std::string rederive_frame(const KallsymsNames& ks, const trace::CapturedKernelFrame& f) {
  auto it = ks.by_name.find(f.symbol);
  if (it == ks.by_name.end()) return "no symbol " + f.symbol + " in " + kKallsymsPath;
  std::string sizes;
  for (const auto& c : it->second) {
    if (c.module != f.module) continue;
    // Two static functions of one name: the one whose size is the recorded one is the frame's. The
    // last symbol of a table has no next address here (size 0): its name and offset are what is checked.
    if ((c.size == f.size || c.size == 0) && f.offset < f.size) return "";
    char b[32];
    snprintf(b, sizeof b, "%s0x%" PRIx64, sizes.empty() ? "" : ", ", c.size);
    sizes += b;
  }
  if (sizes.empty()) return f.symbol + " is not in module " + (f.module.empty() ? "[kernel.kallsyms]" : f.module);
  return f.symbol + " has size " + sizes + " in " + kKallsymsPath;
}

}  // namespace

trace::CapturedKernel kernel_section(Session& session, const CapturedProcess& proc) {
  trace::CapturedKernel k;
  if (!proc.kernel) return k;
  auto none = [&](const std::string& why) {
    session.ctx.log(SPROV_LOG_WARN, "no kernel segment stored: %s", why.c_str());
    return trace::CapturedKernel{};
  };
  if (!proc.kernel_btf) return none("the process was captured without the kernel's BTF (SPROV_PROCESS_KERNEL_BTF)");
  for (const std::string& note : proc.kernel_notes) session.ctx.log(SPROV_LOG_WARN, "%s", note.c_str());
  for (const auto& seg : proc.kernel_segments)
    if (!seg.frames.empty()) k.segments.push_back(seg);
  if (k.segments.empty()) return none("no thread's kernel stack was read");
  auto id = perf::running_kernel_build_id();
  if (!id) return none("the running kernel's build-id: " + id.error().message);
  k.build_id.assign(id->bytes, id->bytes + id->len);
  auto h = evidence::sha256_file(kKernelBtfPath);
  if (!h) {
    std::string why = "the sha256 of ";  // appended, not a chain of operator+: GCC 12 at -O2 warns
    why.append(kKernelBtfPath).append(": ").append(h.error().message);  // (-Warray-bounds) on that
    return none(why);
  }
  k.btf_sha256 = h.value();
  return k;
}

KernelReplay replay_kernel(const trace::CapturedKernel& k) {
  KernelReplay r;
  if (k.empty()) return r;
  r.segments = k.segments.size();
  for (const auto& seg : k.segments) r.frames += seg.frames.size();
  auto as_recorded = [&](const std::string& why) {
    r.mode = "recorded";
    r.reason = why;
    r.identical = r.frames;
    return r;
  };
  auto running = perf::running_kernel_build_id();
  if (!running) return as_recorded("the running kernel's build-id cannot be read: " + running.error().message);
  if (std::vector<uint8_t>(running->bytes, running->bytes + running->len) != k.build_id)
    return as_recorded("the trace's kernel build-id " + hex_of(k.build_id) + " is not the running kernel's " +
                       running->hex());
  std::set<std::string> names;
  for (const auto& seg : k.segments)
    for (const auto& f : seg.frames) names.insert(f.symbol);
  auto ks = load_kallsyms_names(names);
  if (!ks) return as_recorded(ks.error().message);
  if (ks->hidden)
    return as_recorded(std::string(kKallsymsPath) + " shows every address as 0 (kernel.kptr_restrict: not root)");
  r.mode = "re-derived";
  r.reason = "the running kernel is the trace's (build-id " + hex_of(k.build_id) + "): names and offsets checked in " +
             kKallsymsPath;
  // Prototypes: re-derived from the running kernel's BTF when it is the file the capture hashed.
  std::unique_ptr<perf::KernelBtf> btf;
  auto h = evidence::sha256_file(kKernelBtfPath);
  if (!h) {
    r.reason += std::string("; prototypes compared as recorded: ") + h.error().message;
  } else if (h.value() != k.btf_sha256) {
    r.reason += std::string("; prototypes compared as recorded: ") + kKernelBtfPath + " has sha256 " +
                evidence::hex_encode(h.value()) + ", the capture's had " + evidence::hex_encode(k.btf_sha256);
  } else if (auto b = perf::KernelBtf::open(kKernelBtfPath); !b) {
    r.reason += "; prototypes compared as recorded: " + b.error().message;
  } else {
    btf = std::move(b).value();
    r.prototypes_rederived = true;
    r.reason += std::string(", prototypes in ") + kKernelBtfPath + " (the capture's, by sha256)";
  }
  for (const auto& seg : k.segments)
    for (size_t i = 0; i < seg.frames.size(); ++i) {
      const trace::CapturedKernelFrame& f = seg.frames[i];
      std::string diff = rederive_frame(*ks, f);
      if (diff.empty() && btf) {
        perf::BtfPrototype p;
        trace::CapturedKernelFrame again = f;
        again.btf_func_id = btf->lookup(f.symbol, &p) ? p.func_id : 0;
        again.approximate = again.btf_func_id ? p.approximate : false;
        again.prototype = again.btf_func_id ? p.text.substr(0, trace::kMaxKernelPrototype) : "";
        if (again.btf_func_id != f.btf_func_id || again.approximate != f.approximate || again.prototype != f.prototype)
          diff = "BTF gives func " + std::to_string(again.btf_func_id) + " '" + again.prototype + "'" +
                 (again.approximate ? " (approximate)" : "") + ", recorded func " + std::to_string(f.btf_func_id) +
                 " '" + f.prototype + "'" + (f.approximate ? " (approximate)" : "");
      }
      if (diff.empty()) {
        ++r.identical;
      } else if (r.mismatches.size() < 20) {
        r.mismatches.push_back("thread " + std::to_string(seg.tid) + " kernel frame #" + std::to_string(i) + ": recorded " +
                               describe(f) + ", re-derived: " + diff);
      }
    }
  return r;
}

std::string kernel_platform_mismatch(const trace::CapturedKernel& k) {
  if (k.empty()) return "";
  auto running = perf::running_kernel_build_id();
  if (!running)
    return "kernel build-id " + hex_of(k.build_id) + " (recorded in the trace): the running kernel's cannot be read: " +
           running.error().message;
  if (std::vector<uint8_t>(running->bytes, running->bytes + running->len) == k.build_id) return "";
  return "kernel build-id " + hex_of(k.build_id) + " recorded in the trace is not the running kernel's build-id " +
         running->hex() + " (another kernel build: its kernel segments are compared as recorded)";
}

}  // namespace stackprov::pipeline
