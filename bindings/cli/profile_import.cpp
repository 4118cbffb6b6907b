// SPDX-License-Identifier: Apache-2.0
// perf-import's reading of a profile (profile_import.hpp): the handles, each sample's named frames, the summary's counts.
#include "profile_import.hpp"

#include <cstring>

namespace stackprov_cli {

namespace {
constexpr uint64_t kTruncationSlack = 4096;  // a walk that fails this close to the copy's end was cut short
}  // namespace

std::string error_text(int rc) {
  std::string m = sprov_last_error_message();
  const std::string category = std::string(sprov_strerror(rc)) + ": ";
  if (m.size() > category.size() && m.compare(0, category.size(), category) == 0) m.erase(0, category.size());
  return m;
}

const char* mode_name(int mode) {
  switch (mode) {
    case SPROV_PROFILE_MODE_DWARF: return "dwarf";
    case SPROV_PROFILE_MODE_CALLCHAIN: return "callchain";
    default: return "ip";
  }
}

ProfileImport::~ProfileImport() {
  delete names_;
  sprov_stack_free(stack_);
  sprov_symbolizer_free(sym_);
  sprov_unwinder_free(uw_);
  sprov_profile_free(prof_);
  sprov_context_free(ctx_);
}

int ProfileImport::open(const ImportOptions& o, std::string* err) {
  opts_ = o;
  SPROV_OPTS(sprov_context_opts, copts, .sysroot = o.sysroot);
  copts.bundle_store = o.store;
  if (o.log_fn != nullptr) {
    copts.log_fn = o.log_fn;
    copts.log_level = SPROV_LOG_WARN;
  }
  SPROV_OPTS(sprov_unwinder_opts, uopts, .max_frames = o.max_frames);
  int rc = sprov_context_new(&copts, &ctx_);
  SPROV_OPTS(sprov_profile_open_opts, popts, .flags = o.stream ? uint32_t{SPROV_PROFILE_OPEN_STREAM} : 0u);
  if (rc == 0) rc = sprov_profile_open(ctx_, o.path.c_str(), &popts, &prof_);
  if (rc == 0) rc = sprov_unwinder_new(ctx_, &uopts, &uw_);
  if (rc == 0) rc = sprov_symbolizer_new(ctx_, nullptr, &sym_);
  if (rc != 0) {
    *err = error_text(rc);
    return rc;
  }
  names_ = new NameTable(sym_, prof_, o.store != nullptr);
  info();
  return 0;
}

const struct sprov_profile_info& ProfileImport::info() {
  info_ = {};
  info_.sz = sizeof(info_);
  sprov_profile_info(prof_, &info_);
  return info_;
}

uint64_t ProfileImport::nominal_period() {
  return info_.clock && info_.frequency ? 1000000000ull / info_.frequency : info_.period;
}

std::string ProfileImport::kernel_build_id() {
  if (info_.kernel_build_id != nullptr && info_.kernel_build_id[0]) return info_.kernel_build_id;
  return info_.running_kernel_build_id != nullptr ? info_.running_kernel_build_id : "";
}

ProfileImport::Next ProfileImport::next(uint64_t* i, Sample* out) {
  sprov_stack_free(stack_);  // before the profile moves on
  stack_ = nullptr;
  size_t index = SIZE_MAX;
  struct sprov_profile_sample s = {};
  s.sz = sizeof(s);
  const int rc = sprov_profile_next(prof_, &index, &s);
  if (rc == SPROV_ERR_NOT_FOUND) return kEnd;
  if (rc != 0 && index == SIZE_MAX) {  // the stream itself, not this sample
    out->error = sprov_last_error_message();
    return kRestart;
  }
  *i = index;
  return read(index, rc, s, out) ? kSample : kFailed;
}

bool ProfileImport::sample(uint64_t i, Sample* out) {
  sprov_stack_free(stack_);
  stack_ = nullptr;
  struct sprov_profile_sample s = {};
  s.sz = sizeof(s);
  const int rc = sprov_profile_sample(prof_, i, &s);
  return read(i, rc, s, out);
}

bool ProfileImport::read(uint64_t i, int filled_rc, const struct sprov_profile_sample& filled, Sample* out) {
  out->frames.clear();
  out->error.clear();
  out->truncated = false;
  out->stop = SPROV_STOP_NONE;
  out->stack = nullptr;
  sprov_stack_free(stack_);
  stack_ = nullptr;
  out->s = filled;
  struct sprov_profile_sample& s = out->s;
  if (filled_rc != 0) {
    failed_++;
    out->error = sprov_last_error_message();
    return false;
  }
  by_mode_[s.mode >= 1 && s.mode <= 3 ? s.mode : 3]++;
  NameTable& names = *names_;
  // Kernel frames: the callchain's kernel part, or the sampled kernel ip alone.
  kips_.assign(s.kernel_ips, s.kernel_ips + s.kernel_ip_count);
  if (kips_.empty() && s.mode == SPROV_PROFILE_MODE_IP && (s.flags & SPROV_PROFILE_SAMPLE_KERNEL_MODE)) kips_.push_back(s.ip);
  for (size_t k = 0; k < kips_.size(); k++) {
    SampleFrame f;
    f.name = names.kernel(kips_[k], k == 0);
    f.pc = kips_[k];
    f.addr = k == 0 ? kips_[k] : kips_[k] - 1;  // the address looked up: pprof's Location.address
    f.module_offset = kips_[k];
    f.kernel = true;
    out->frames.push_back(f);
    kernel_frames_++;
    if (names[f.name].known) kernel_named_++;
  }
  // User frames: unwound from the copied stack, or the recorded callchain / ip as a stack.
  samples_read_++;
  const bool runtime = (s.flags & SPROV_PROFILE_SAMPLE_RUNTIME) != 0;
  if (opts_.no_stack && !runtime && s.mode == SPROV_PROFILE_MODE_DWARF && s.snapshot != nullptr && sample_fast(s, out)) {
    runtime_states_[SPROV_PROFILE_RUNTIME_NONE]++;
    frames_total_ += kips_.size();
    if (out->truncated) truncated_++;
    return true;
  }
  const int rc = s.mode == SPROV_PROFILE_MODE_DWARF ? sprov_unwinder_unwind(uw_, s.snapshot, &stack_)
                                                    : sprov_profile_sample_stack(prof_, i, opts_.max_frames, &stack_);
  if (rc != 0) {
    failed_++;
    out->error = sprov_last_error_message();
    stack_ = nullptr;
  } else {
    if (runtime) {
      // The CPython frames read with the sample, each before the activation that runs it.
      sprov_stack* merged = nullptr;
      int32_t state = SPROV_PROFILE_RUNTIME_NONE;
      if (sprov_profile_interleave(prof_, i, stack_, &merged, &state) == 0) {
        sprov_stack_free(stack_);
        stack_ = merged;
      }
      runtime_states_[state >= 0 && state < 6 ? state : 0]++;
    } else {
      runtime_states_[SPROV_PROFILE_RUNTIME_NONE]++;
    }
    out->stack = stack_;
    const size_t n = sprov_stack_frame_count(stack_);
    out->stop = sprov_stack_stop_reason(stack_);
    SPROV_OPTS(sprov_frame, fr);
    uint64_t last_sp = 0;  // of the last native frame
    size_t native = 0;
    for (size_t k = 0; k < n; k++) {
      if (sprov_stack_frame(stack_, k, &fr) != 0) break;
      if (fr.method == SPROV_METHOD_RUNTIME) {
        SPROV_OPTS(sprov_runtime_frame, rf);
        if (sprov_stack_runtime_frame(stack_, k, &rf) != 0) continue;
        SampleFrame f;
        f.name = names.runtime(rf);
        f.method = SPROV_METHOD_RUNTIME;
        f.stack_index = k;
        f.runtime = true;
        out->frames.push_back(f);
        continue;
      }
      last_sp = fr.sp;
      native++;
      const bool exact = k == 0 || fr.method == SPROV_METHOD_SIGNAL;
      SampleFrame f;
      f.name = names.user(stack_, k, fr, s.module_list, exact);
      f.pc = fr.pc;
      // Aggregated by the address looked up: a return address - 1 lies inside the call, which
      // profile.proto allows for a non-leaf Location.address, and keeps it apart from a leaf pc.
      f.addr = exact ? fr.pc : fr.pc - 1;
      f.module = fr.module_path;
      f.module_offset = fr.module_offset;
      f.method = fr.method;
      f.module_index = fr.module_index;
      f.stack_index = k;
      if (opts_.inlines && f.name != 0) {
        for (uint32_t iid : names.inlined(stack_, k)) {  // leaf first: the innermost inlined one first
          SampleFrame g = f;
          g.name = iid;
          g.inlined = true;
          out->frames.push_back(g);
        }
      }
      out->frames.push_back(f);
    }
    frames_total_ += n;
    if (s.mode == SPROV_PROFILE_MODE_DWARF &&
        (out->stop == SPROV_STOP_MEMORY_UNREADABLE || out->stop == SPROV_STOP_SP_NOT_ADVANCING) && native > 0) {
      const uint64_t stack_end = s.sp + s.stack_size;
      out->truncated = s.stack_size >= s.stack_requested || last_sp + kTruncationSlack >= stack_end;
    }
  }
  frames_total_ += kips_.size();
  if (out->truncated) truncated_++;
  return true;
}

bool ProfileImport::sample_fast(const struct sprov_profile_sample& s, Sample* out) {
  // The same walk as sprov_unwinder_unwind (one walker, the same options and JIT ranges), into a
  // buffer; its frames named from the name cache only. Anything the cache does not hold (a first
  // pc, an inline chain not asked for yet, JIT code) goes the full way, which fills the cache.
  const uint32_t cap = opts_.max_frames ? opts_.max_frames : 256;
  if (raw_.size() < cap) raw_.resize(cap);
  struct sprov_unwind_buf b = {};
  b.sz = sizeof(b);
  b.frames = raw_.data();
  b.frame_sz = sizeof(struct sprov_raw_frame);
  b.capacity = cap;
  if (sprov_unwinder_unwind_into(uw_, s.snapshot, &b) != 0) return false;
  NameTable& names = *names_;
  fast_frames_.clear();
  for (uint32_t k = 0; k < b.count; k++) {
    const struct sprov_raw_frame& fr = raw_[k];
    if (fr.module_index < 0 || fr.module_index >= 65536) return false;
    if (static_cast<size_t>(fr.module_index) >= mods_.size()) mods_.resize(fr.module_index + 1);
    ModRef& m = mods_[fr.module_index];
    if (m.stamp != samples_read_) {
      SPROV_OPTS(sprov_module_info, mi);
      if (sprov_snapshot_module(s.modules, static_cast<size_t>(fr.module_index), &mi) != 0) return false;
      m.stamp = samples_read_;
      m.path = mi.path;
      m.build_id = mi.build_id_len ? mi.build_id : nullptr;
      m.build_id_len = mi.build_id_len;
    }
    const bool exact = k == 0 || fr.method == SPROV_METHOD_SIGNAL;
    uint32_t id = 0;
    const std::vector<uint32_t>* inl = nullptr;
    if (!names.cached_user(s.module_list, fr.module_index, m.path, m.build_id, m.build_id_len, fr.module_offset, exact,
                           &id, opts_.inlines ? &inl : nullptr))
      return false;
    SampleFrame f;
    f.name = id;
    f.pc = fr.pc;
    f.addr = exact ? fr.pc : fr.pc - 1;
    f.module = m.path;
    f.module_offset = fr.module_offset;
    f.method = fr.method;
    f.module_index = fr.module_index;
    f.stack_index = k;
    if (inl != nullptr) {
      for (uint32_t iid : *inl) {
        SampleFrame g = f;
        g.name = iid;
        g.inlined = true;
        fast_frames_.push_back(g);
      }
    }
    fast_frames_.push_back(f);
  }
  out->frames.insert(out->frames.end(), fast_frames_.begin(), fast_frames_.end());
  out->stop = b.stop_reason;
  frames_total_ += b.count;
  if ((out->stop == SPROV_STOP_MEMORY_UNREADABLE || out->stop == SPROV_STOP_SP_NOT_ADVANCING) && b.count > 0) {
    const uint64_t stack_end = s.sp + s.stack_size;
    out->truncated = s.stack_size >= s.stack_requested || raw_[b.count - 1].sp + kTruncationSlack >= stack_end;
  }
  return true;
}

void StackFolder::add(const ProfileImport::Sample& smp, uint64_t nominal_period) {
  pcs_.clear();
  ids_.clear();
  for (const SampleFrame& f : smp.frames) {
    pcs_.push_back(f.addr);
    ids_.push_back(f.name);
  }
  const char* comm = smp.s.comm != nullptr ? smp.s.comm : "";
  auto [it, fresh] = comm_ids_.emplace(comm, static_cast<uint32_t>(comms_.size()));
  if (fresh) comms_.push_back(comm);
  agg_.add(it->second, pcs_, ids_, smp.s.period ? smp.s.period : nominal_period);
}

}  // namespace stackprov_cli
