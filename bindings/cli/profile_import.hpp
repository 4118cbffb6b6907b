// SPDX-License-Identifier: Apache-2.0
// perf-import's reading of a profile, shared by the CLI and the Python binding: each sample's frames (kernel, unwound or recorded user frames, inlined functions) named once per address.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "print.hpp"
#include "profile_output.hpp"
#include "stackprov/fast.h"
#include "stackprov/perf.h"
#include "stackprov/stackprov.h"

namespace stackprov_cli {

/// One name of the profile's name table.
struct NameInfo {
  std::string name;     ///< "[unknown]" when unresolved
  std::string linkage;  ///< raw symbol name ("" when unknown)
  std::string module;   ///< kernel frames: "[kernel.kallsyms]" or "[MODULE]"
  uint64_t start = 0;   ///< symbol start: link-time (user) or the recording's kernel address
  bool kernel = false;
  bool known = false;
  bool inlined = false;  ///< a function inlined into the physical one (folded: "_[i]")
  std::string file = "";  ///< runtime (CPython) frames: co_filename
  uint32_t line = 0;     ///< runtime frames: the line (0 unknown)
  bool runtime = false;  ///< a CPython frame recorded with the sample (name: co_qualname, linkage: co_name)
};

/// Frame names: user frames cached per (module, link-time address, exact-pc-or-return-address),
/// kernel frames per looked-up address. Id 0 is an unresolved user frame, id 1 an unresolved
/// kernel frame.
class NameTable {
 public:
  /// `bundles`: a frame the symbol tables do not name (a module whose file is missing or another
  /// build) is asked of the store's bundle for the module's build-id, and of nothing else (no
  /// DWARF, no debuginfod).
  NameTable(sprov_symbolizer* sym, sprov_profile* prof, bool bundles) : sym_(sym), prof_(prof), bundles_(bundles) {
    names_.push_back(NameInfo{"[unknown]", "", "", 0, false, false});
    names_.push_back(NameInfo{"[unknown]", "", "[kernel.kallsyms]", 0, true, false});
  }

  /// Name id of user frame `i` of `stack` (module list `list`).
  uint32_t user(const sprov_stack* stack, size_t i, const sprov_frame& fr, uint32_t list, bool exact) {
    last_cacheable_ = false;
    auto jit = [&]() -> uint32_t {
      // JIT code outside every module: named by the process's perf map (resolver perfmap), uncached.
      SPROV_OPTS(sprov_symbol, j);
      if (sprov_symbolizer_frame(sym_, stack, i, &j) != 0 || j.resolver != SPROV_RESOLVER_PERFMAP || !j.name) return 0;
      return intern(NameInfo{j.name, j.name, "", j.sym_addr, false, true}, std::string("jit:") + std::to_string(j.sym_addr));
    };
    if (fr.module_index < 0 || fr.module_path == nullptr) return jit();
    if (list >= list_mods_.size()) list_mods_.resize(list + 1);
    auto& mods = list_mods_[list];
    if (static_cast<size_t>(fr.module_index) >= mods.size()) mods.resize(fr.module_index + 1, -1);
    int32_t& mid = mods[fr.module_index];
    if (mid == kAnon) return jit();  // the list's "//anon" mapping: compared once, not per frame
    if (mid < 0 && strcmp(fr.module_path, "//anon") == 0) {
      mid = kAnon;
      return jit();
    }
    if (mid < 0) mid = module_id(fr.module_path, fr.build_id, fr.build_id_len);
    const uint64_t key = (static_cast<uint64_t>(mid) << 41) | (exact ? 1ull << 40 : 0) | (fr.module_offset & ((1ull << 40) - 1));
    const bool cacheable = fr.module_offset < (1ull << 40) && mid < (1 << 22);
    last_key_ = key;
    last_cacheable_ = cacheable;
    if (cacheable) {
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        hits_++;
        return it->second;
      }
    }
    misses_++;
    SPROV_OPTS(sprov_symbol, s);
    uint32_t id = 0;
    if (sprov_symbolizer_frame(sym_, stack, i, &s) == 0 && s.resolver != SPROV_RESOLVER_NONE && s.name) {
      NameInfo n{s.name, s.linkage_name ? s.linkage_name : "", "", s.sym_addr, false, true};
      id = intern(std::move(n), std::to_string(mid) + ':' + std::to_string(s.sym_addr));
    } else if (SPROV_OPTS(sprov_symbol_info, si);
               bundles_ && fr.build_id_len > 0 && (exact || fr.module_offset > 0) &&
               sprov_symbolizer_addr_build_id(sym_, stackprov_cli::hex_bytes(fr.build_id, fr.build_id_len).c_str(),
                                              exact ? fr.module_offset : fr.module_offset - 1, 0, &si) == 0 &&
               si.resolver != SPROV_RESOLVER_NONE && si.frame_count > 0) {
      // The physical function (the inline chain's last frame), as the symbol tables would name it.
      SPROV_OPTS(sprov_symbol_frame, f);
      if (sprov_symbolizer_inline_frame(sym_, si.frame_count - 1, &f) == 0 && *f.name) {
        NameInfo n{f.name, f.linkage_name, "", f.start_address, false, true};
        id = intern(std::move(n), std::to_string(mid) + ":c:" + f.name);
      }
    }
    if (cacheable) cache_.emplace(key, id);
    return id;
  }

  /// The id user() would return for a frame of module `module_index` of list `list` (path
  /// `path`, build-id `build_id`) at `module_offset`, when it is cached (true); false when
  /// user() has to look it up (a miss, an "//anon" or module-less frame: JIT names are not
  /// cached). With `inl` (inlined frames asked for), also the cached inline chain user() /
  /// inlined() would give, false when that is not cached. Counts a hit as user() does.
  bool cached_user(uint32_t list, int32_t module_index, const char* path, const uint8_t* build_id, uint32_t build_id_len,
                   uint64_t module_offset, bool exact, uint32_t* id, const std::vector<uint32_t>** inl) {
    if (module_index < 0 || path == nullptr || module_offset >= (1ull << 40)) return false;
    if (list >= list_mods_.size()) list_mods_.resize(list + 1);
    auto& mods = list_mods_[list];
    if (static_cast<size_t>(module_index) >= mods.size()) mods.resize(module_index + 1, -1);
    int32_t& mid = mods[module_index];
    if (mid == kAnon) return false;
    if (mid < 0) {
      if (strcmp(path, "//anon") == 0) {
        mid = kAnon;
        return false;
      }
      mid = module_id(path, build_id, build_id_len);
    }
    if (mid >= (1 << 22)) return false;
    const uint64_t key = (static_cast<uint64_t>(mid) << 41) | (exact ? 1ull << 40 : 0) | module_offset;
    auto it = cache_.find(key);
    if (it == cache_.end()) return false;
    if (inl != nullptr) {
      *inl = nullptr;
      if (it->second != 0) {
        auto ii = icache_.find(key);
        if (ii == icache_.end()) return false;
        *inl = &ii->second;
      }
    }
    hits_++;
    *id = it->second;
    return true;
  }

  /// Ids of the functions inlined at user frame `i` of `stack`, the frame user() was last asked
  /// about: innermost first, the physical function (user()'s id) not included; empty where no
  /// DWARF (or bundle) gives an inline chain. Cached as user()'s names are.
  const std::vector<uint32_t>& inlined(const sprov_stack* stack, size_t i) {
    if (last_cacheable_) {
      auto it = icache_.find(last_key_);
      if (it != icache_.end()) return it->second;
    }
    scratch_.clear();
    SPROV_OPTS(sprov_symbol_info, si);
    if (sprov_symbolizer_frame_ex(sym_, stack, i, 0, &si) == 0 && si.resolver != SPROV_RESOLVER_NONE) {
      for (uint32_t f = 0; f + 1 < si.frame_count; f++) {
        SPROV_OPTS(sprov_symbol_frame, sf);
        if (sprov_symbolizer_inline_frame(sym_, f, &sf) != 0 || sf.name == nullptr || !*sf.name) break;
        NameInfo n{sf.name, sf.linkage_name ? sf.linkage_name : "", "", sf.start_address, false, true, true};
        scratch_.push_back(intern(std::move(n), std::string("inl:") + sf.name));
      }
    }
    if (last_cacheable_) return icache_.emplace(last_key_, scratch_).first->second;
    return scratch_;
  }

  /// Name id of a runtime (CPython) frame: one per (qualname, name, file, line).
  uint32_t runtime(const struct sprov_runtime_frame& rf) {
    std::string where = "py:";
    where += rf.file;
    where.push_back('\0');
    where += std::to_string(rf.line);
    return intern(NameInfo{rf.qualname, rf.function, "", 0, false, true, false, rf.file, rf.line, true}, where);
  }

  /// Name id of a kernel frame: the exact pc (frame 0) or a return address (looked up at pc - 1).
  uint32_t kernel(uint64_t pc, bool exact) {
    const uint64_t addr = exact ? pc : pc - 1;
    auto it = kcache_.find(addr);
    if (it != kcache_.end()) {
      hits_++;
      return it->second;
    }
    misses_++;
    SPROV_OPTS(sprov_kernel_symbol, k);
    uint32_t id = 1;
    if (sprov_profile_kernel_symbol(prof_, addr, &k) == 0 && k.name != nullptr) {
      NameInfo n{k.name, k.name, k.module, k.start, true, true};
      id = intern(std::move(n), std::string("k:") + k.module + ':' + std::to_string(k.start));
      kernel_named_++;
    }
    kcache_.emplace(addr, id);
    return id;
  }

  const NameInfo& operator[](uint32_t id) const { return names_[id]; }
  /// Display names (JSON, pprof) and linkage names, by id.
  std::vector<std::string> display() const { return collect([](const NameInfo& n) { return n.name; }); }
  std::vector<std::string> linkage() const { return collect([](const NameInfo& n) { return n.linkage; }); }
  /// Folded-stack names: kernel frames end in "_[k]" (stackcollapse-perf.pl --kernel, inferno),
  /// inlined functions in "_[i]" (stackcollapse-perf.pl --inline's mark, flamegraph.pl's aqua),
  /// CPython frames are "qualname (file:line)" (py-spy's folded form).
  std::vector<std::string> folded() const {
    return collect([](const NameInfo& n) {
      std::string s = n.name;
      if (n.runtime) s += " (" + n.file + ':' + std::to_string(n.line) + ')';
      for (char& c : s)
        if (c == ';' || c == '\n') c = ':';
      return n.kernel ? s + "_[k]" : n.inlined ? s + "_[i]" : s;
    });
  }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  /// A module's identity: by path and build-id: one path may name two builds in one recording (a
  /// library replaced and loaded again while the old one stays mapped), whose names at one offset
  /// differ.
  int32_t module_id(const char* path, const uint8_t* build_id, uint32_t build_id_len) {
    std::string key = path;
    key.push_back('\0');
    if (build_id != nullptr) key.append(reinterpret_cast<const char*>(build_id), build_id_len);
    auto [it, fresh] = module_ids_.emplace(std::move(key), static_cast<int32_t>(module_ids_.size()));
    return it->second;
  }
  uint32_t intern(NameInfo n, const std::string& where) {
    auto [it, fresh] = ids_.emplace(n.name + '\0' + n.linkage + '\0' + where, static_cast<uint32_t>(names_.size()));
    if (fresh) names_.push_back(std::move(n));
    return it->second;
  }
  template <class F>
  std::vector<std::string> collect(F f) const {
    std::vector<std::string> v;
    v.reserve(names_.size());
    for (const NameInfo& n : names_) v.push_back(f(n));
    return v;
  }

  static constexpr int32_t kAnon = -2;  ///< list_mods_ entry of an "//anon" mapping (-1: not seen yet)
  sprov_symbolizer* sym_;
  sprov_profile* prof_;
  bool bundles_ = false;
  std::vector<std::vector<int32_t>> list_mods_;
  std::unordered_map<std::string, int32_t> module_ids_;
  std::unordered_map<uint64_t, uint32_t> cache_, kcache_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> icache_;  ///< inlined(), by user()'s key
  std::vector<uint32_t> scratch_;
  uint64_t last_key_ = 0;
  bool last_cacheable_ = false;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<NameInfo> names_;
  uint64_t hits_ = 0, misses_ = 0, kernel_named_ = 0;
};

/// The last error's message without the generic category the C ABI puts first
/// ("No such file or directory: cannot run 'x': ..." -> "cannot run 'x': ...").
std::string error_text(int rc);

/// "dwarf", "callchain" or "ip": a sample's mode (enum sprov_profile_mode) as perf-import names it.
const char* mode_name(int mode);

/// One frame of a sample as perf-import lists it, leaf first: the kernel's frames, then the user
/// frames, each preceded by the functions inlined into it (innermost first) when asked for.
struct SampleFrame {
  uint64_t pc = 0;             ///< kernel: the callchain's address; user: the frame's pc
  uint64_t addr = 0;           ///< the address looked up: pc for frame 0 and signal frames, else pc - 1
  uint32_t name = 0;           ///< id in the NameTable
  const char* module = nullptr;  ///< user: the module's path (NULL outside modules), owned by Sample::stack;
                                 ///< kernel: NULL (the name's module: NameTable[name].module)
  uint64_t module_offset = 0;  ///< user: module-relative pc; kernel: pc
  int32_t method = -1;         ///< user: enum sprov_method; kernel: -1
  int32_t module_index = -1;   ///< user: the module's index in the sample's module list
  size_t stack_index = 0;      ///< user: the frame's index in Sample::stack
  bool kernel = false;
  bool inlined = false;
  bool runtime = false;  ///< a CPython frame (pc, addr, module_offset 0; method SPROV_METHOD_RUNTIME)
};

/// What to read and how (perf-import's options).
struct ImportOptions {
  std::string path;
  const char* sysroot = nullptr;  ///< module files under this directory (NULL: /)
  const char* store = nullptr;    ///< a bundle store: modules without their file named from it
  uint32_t max_frames = 256;      ///< user frames per sample
  bool inlines = false;           ///< list inlined functions as frames of their own
  /// Sample::stack not needed (no pprof source lines): a copied stack whose frames are all named
  /// from the name cache is unwound into a buffer (sprov_unwinder_unwind_into) without building a
  /// sprov_stack; Sample::stack is then NULL. Frames and names are the same either way.
  bool no_stack = false;
  /// A perf.data file read once (SPROV_PROFILE_OPEN_STREAM): samples only through next(), and the
  /// profile's warnings, truncation and counts complete once next() returned kEnd.
  bool stream = false;
  /// The context's log (warnings about module files), NULL: none.
  void (*log_fn)(void* user, int level, const char* message) = nullptr;
};

/// A profile (perf.data or capture file) read sample by sample: the handles it needs, the name
/// table and the counts of the summary perf-import prints. Not thread-safe (one profile).
class ProfileImport {
 public:
  /// One sample and its frames; `stack` (the user frames, may be NULL) lives until the next
  /// sample() call.
  struct Sample {
    struct sprov_profile_sample s{};
    std::vector<SampleFrame> frames;
    const sprov_stack* stack = nullptr;
    bool truncated = false;  ///< the walk stopped close to the end of the copied stack
    int stop = 0;            ///< enum sprov_stop_reason of the user frames
    std::string error;       ///< why the sample (or its user frames) could not be read; "" when read
  };

  ProfileImport() = default;
  ProfileImport(const ProfileImport&) = delete;
  ProfileImport& operator=(const ProfileImport&) = delete;
  ~ProfileImport();

  /// Opens the profile and the handles. Returns 0, else the C error code (message in `*err`,
  /// without the error category).
  int open(const ImportOptions& o, std::string* err);

  /// The profile's description (kernel naming as of the last kernel frame named).
  const struct sprov_profile_info& info();
  /// Sample `i` (0 .. info().samples - 1). False when the sample itself could not be read (counted
  /// failed, `out->error` says why); a sample whose user frames could not be unwound is read, with
  /// its kernel frames only, counted failed and `out->error` set.
  bool sample(uint64_t i, Sample* out);
  /// The next sample in time order (sprov_profile_next), `*i` its index: kSample, kFailed (as
  /// sample() returning false), kEnd, or kRestart when a profile read once cannot keep the order
  /// (`out->error` says why): open it again without `stream` and start over.
  enum Next { kSample, kFailed, kEnd, kRestart };
  Next next(uint64_t* i, Sample* out);

  NameTable& names() { return *names_; }
  sprov_symbolizer* symbolizer() const { return sym_; }
  /// The nominal period of a sample without one (capture files of version 1).
  uint64_t nominal_period();
  /// The kernel build-id (hex) of the recording, else of the running kernel.
  std::string kernel_build_id();

  uint64_t by_mode(int mode) const { return by_mode_[mode >= 1 && mode <= 3 ? mode : 3]; }
  uint64_t truncated() const { return truncated_; }
  uint64_t failed() const { return failed_; }
  uint64_t frames() const { return frames_total_; }
  uint64_t kernel_frames() const { return kernel_frames_; }
  uint64_t kernel_named() const { return kernel_named_; }
  /// Samples by how their recorded CPython frames were read and merged (enum
  /// sprov_profile_runtime_state; NONE: samples without any).
  uint64_t runtime_state(int state) const { return state >= 0 && state < 6 ? runtime_states_[state] : 0; }

 private:
  ImportOptions opts_;
  sprov_context* ctx_ = nullptr;
  sprov_profile* prof_ = nullptr;
  sprov_unwinder* uw_ = nullptr;
  sprov_symbolizer* sym_ = nullptr;
  sprov_stack* stack_ = nullptr;
  struct sprov_profile_info info_{};
  NameTable* names_ = nullptr;
  bool sample_fast(const struct sprov_profile_sample& s, Sample* out);
  /// sample()'s work once sprov_profile_sample or sprov_profile_next filled `filled` (`filled_rc` its result).
  bool read(uint64_t i, int filled_rc, const struct sprov_profile_sample& filled, Sample* out);
  std::vector<uint64_t> kips_;
  std::vector<struct sprov_raw_frame> raw_;
  struct ModRef {
    uint64_t stamp = 0;
    const char* path = nullptr;
    const uint8_t* build_id = nullptr;
    uint32_t build_id_len = 0;
  };
  std::vector<ModRef> mods_;  ///< this sample's module infos by index (stamp == samples_read_)
  uint64_t samples_read_ = 0;
  std::vector<SampleFrame> fast_frames_;
  uint64_t by_mode_[4] = {0, 0, 0, 0};
  uint64_t truncated_ = 0, failed_ = 0, frames_total_ = 0, kernel_frames_ = 0, kernel_named_ = 0;
  uint64_t runtime_states_[6] = {0, 0, 0, 0, 0, 0};
};

/// Samples' stacks counted as perf-import's folded, SVG and pprof outputs count them: per (comm,
/// addresses looked up), weighted by the sample's period (or the nominal one).
class StackFolder {
 public:
  void add(const ProfileImport::Sample& smp, uint64_t nominal_period);
  /// Folded lines "comm;root;...;leaf" -> samples (names from `names`).
  std::map<std::string, uint64_t> folded(const NameTable& names) const { return fold(agg_, comms_, names.folded()); }
  const StackAggregator& aggregator() const { return agg_; }
  const std::vector<std::string>& comms() const { return comms_; }

 private:
  StackAggregator agg_;
  std::vector<std::string> comms_;
  std::unordered_map<std::string, uint32_t> comm_ids_;
  std::vector<uint64_t> pcs_;
  std::vector<uint32_t> ids_;
};

}  // namespace stackprov_cli
