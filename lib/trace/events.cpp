// SPDX-License-Identifier: Apache-2.0
// JSON Lines events: the seed's trace.capture and replay.result, written in the seed's field order and parsed strictly.
#include "trace/events.hpp"

#include <nlohmann/json.hpp>

#include "evidence/encoding.hpp"
#include "evidence/json.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <set>

namespace stackprov::trace {

using OJson = nlohmann::ordered_json;
using Json = nlohmann::json;

static std::string hex_addr(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string trace_capture_event(const Trace& t, const CapturedKernel& kernel) {
  OJson j;
  j["event"] = "trace.capture";
  j["trace_id"] = t.id;
  j["platform"] = t.platform;
  j["build_id"] = t.build_id;
  OJson frames = OJson::array();
  for (size_t ti = 0; ti < t.threads.size(); ++ti) {
    const Thread& th = t.threads[ti];
    for (const Frame& f : th.frames) {
      OJson fj;
      fj["ip"] = hex_addr(f.ip);
      fj["module"] = f.module_path;
      fj["module_build_id"] = f.module_build_id;
      fj["thread"] = ti;
      fj["tid"] = th.tid;
      fj["module_offset"] = hex_addr(f.module_offset);
      fj["symbol"] = f.symbol;
      fj["symbol_offset"] = f.symbol_offset_known ? OJson(hex_addr(f.symbol_offset)) : OJson(nullptr);
      fj["file"] = f.file;
      fj["line"] = f.line;
      fj["column"] = f.column;
      OJson inl = OJson::array();
      for (const InlineFrame& in : f.inline_chain)
        inl.push_back(OJson{{"function", in.function}, {"file", in.file}, {"line", in.line}, {"column", in.column}});
      fj["inline"] = std::move(inl);
      fj["resolver"] = f.resolver;
      fj["source"] = f.source;
      fj["bundle_ref"] = f.bundle_sha256.empty() ? OJson(nullptr) : OJson("sha256:" + f.bundle_sha256);
      fj["unwind"] = f.unwind_method;
      if (!f.module_id_kind.empty()) fj["module_id_kind"] = f.module_id_kind;  // absent: an ELF build-id
      frames.push_back(std::move(fj));
    }
  }
  j["frames"] = std::move(frames);
  j["symbol_bundle_ref"] =
      t.symbol_bundle_sha256.empty() ? OJson(nullptr) : OJson("sha256:" + t.symbol_bundle_sha256);
  j["dsse_ref"] = t.dsse_ref.empty() ? OJson(nullptr) : OJson(t.dsse_ref);
  j["arch"] = t.arch;
  j["captured_at"] = t.captured_at;
  j["data_ref"] = "sha256:" + t.data_sha256;
  j["data_size"] = t.data_size;
  OJson threads = OJson::array();
  for (const Thread& th : t.threads) threads.push_back(OJson{{"tid", th.tid}, {"name", th.name}});
  j["threads"] = std::move(threads);
  if (!kernel.empty()) {
    OJson segs = OJson::array();
    for (const CapturedKernelSegment& seg : kernel.segments) {
      OJson fr = OJson::array();
      for (const CapturedKernelFrame& f : seg.frames)
        fr.push_back(OJson{{"symbol", f.symbol},           {"offset", hex_addr(f.offset)},
                           {"size", hex_addr(f.size)},     {"module", f.module},
                           {"btf_func_id", f.btf_func_id}, {"approximate", f.approximate},
                           {"prototype", f.prototype}});
      segs.push_back(OJson{{"tid", seg.tid},
                           {"syscall", seg.syscall},
                           {"user_sp", hex_addr(seg.user_sp)},
                           {"user_pc", hex_addr(seg.user_pc)},
                           {"frames", std::move(fr)}});
    }
    j["kernel"] = OJson{{"build_id", evidence::hex_encode(kernel.build_id.data(), kernel.build_id.size())},
                        {"btf_sha256", evidence::hex_encode(kernel.btf_sha256.data(), kernel.btf_sha256.size())},
                        {"segments", std::move(segs)}};
  }
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);  // names are bytes: invalid UTF-8 -> U+FFFD
}

std::string replay_result_event(const Replay& r) {
  OJson j;
  j["event"] = "replay.result";
  j["replay_id"] = r.replay_id;
  j["trace_id"] = r.trace_id;
  j["seed"] = r.seed;
  j["replay_success_ratio"] = r.replay_success_ratio;
  j["symbol_coverage_pct"] = r.symbol_coverage_pct;
  j["verify_time_ms"] = r.verify_time_ms;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);  // names are bytes: invalid UTF-8 -> U+FFFD
}

namespace {

Error field_error(const std::string& path, const char* what) {
  return make_error(SPROV_ERR_JSON, "event field %s: %s", path.c_str(), what);
}

/// Checks that `obj` has exactly the keys of `required` plus any of `optional`.
Status check_keys(const Json& obj, const std::string& path, std::initializer_list<const char*> required,
                  std::initializer_list<const char*> optional) {
  std::set<std::string_view> known;
  for (const char* k : required) {
    known.insert(k);
    if (!obj.contains(k)) return field_error(path + "." + k, "missing");
  }
  for (const char* k : optional) known.insert(k);
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.count(it.key())) return field_error(path + "." + it.key(), "unknown field");
  return {};
}

Result<std::string> str(const Json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return field_error(path + "." + key, "missing");
  if (!it->is_string()) return field_error(path + "." + key, "not a string");
  return it->get<std::string>();
}

Result<uint64_t> u64(const Json& obj, const char* key, const std::string& path, uint64_t max) {
  auto it = obj.find(key);
  if (it == obj.end()) return field_error(path + "." + key, "missing");
  if (!it->is_number_unsigned()) return field_error(path + "." + key, "not an unsigned integer");
  uint64_t v = it->get<uint64_t>();
  if (v > max) return field_error(path + "." + key, "out of range");
  return v;
}

Result<uint64_t> hex_u64(const Json& obj, const char* key, const std::string& path) {
  auto s = str(obj, key, path);
  if (!s) return s.error();
  const std::string& v = *s;
  if (v.size() < 3 || v.size() > 18 || v[0] != '0' || v[1] != 'x')
    return field_error(path + "." + key, "not a 0x hex address");
  uint64_t r = 0;
  for (size_t i = 2; i < v.size(); ++i) {
    char c = v[i];
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return field_error(path + "." + key, "not lower-case hex");
    r = (r << 4) | static_cast<uint64_t>(d);
  }
  if (v.size() > 3 && v[2] == '0') return field_error(path + "." + key, "leading zero");
  return r;
}

/// "sha256:<64 hex>" or null -> hex or "".
Result<std::string> sha_ref(const Json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return field_error(path + "." + key, "missing");
  if (it->is_null()) return std::string();
  if (!it->is_string()) return field_error(path + "." + key, "not a string or null");
  std::string v = it->get<std::string>();
  if (v.rfind("sha256:", 0) != 0 || v.size() != 71 || !is_lower_hex(std::string_view(v).substr(7), 64))
    return field_error(path + "." + key, "not sha256:<64 lower-case hex>");
  return v.substr(7);
}

#define TRY_ASSIGN(dst, expr)          \
  do {                                 \
    auto r_ = (expr);                  \
    if (!r_) return std::move(r_).error(); \
    dst = std::move(r_.value());       \
  } while (0)

/// A string of at most `max` bytes.
Result<std::string> bounded_str(const Json& obj, const char* key, const std::string& path, size_t max) {
  auto s = str(obj, key, path);
  if (s && s->size() > max) return field_error(path + "." + key, "too long");
  return s;
}

/// Lower-case hex of 1..`max_bytes` bytes (`exact`: exactly that many) -> the bytes.
Result<std::vector<uint8_t>> hex_bytes_field(const Json& obj, const char* key, const std::string& path,
                                             size_t max_bytes, bool exact) {
  auto s = str(obj, key, path);
  if (!s) return s.error();
  const std::string& v = *s;
  if (v.empty() || v.size() % 2 || v.size() > 2 * max_bytes || (exact && v.size() != 2 * max_bytes) ||
      !is_lower_hex(v))
    return field_error(path + "." + key, exact ? "not lower-case hex of the expected length" : "not lower-case hex bytes");
  std::vector<uint8_t> out(v.size() / 2);
  auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(nib(v[2 * i]) << 4 | nib(v[2 * i + 1]));
  return out;
}

/// The "kernel" extension, with the captured data's own limits (capture_data.hpp).
Result<CapturedKernel> parse_kernel(const Json& kj) {
  const std::string p = ".kernel";
  if (!kj.is_object()) return field_error(p, "not an object");
  auto st = check_keys(kj, p, {"build_id", "btf_sha256", "segments"}, {});
  if (!st) return st.error();
  CapturedKernel k;
  TRY_ASSIGN(k.build_id, hex_bytes_field(kj, "build_id", p, kMaxKernelBuildId, false));
  std::vector<uint8_t> sha;
  TRY_ASSIGN(sha, hex_bytes_field(kj, "btf_sha256", p, 32, true));
  std::copy(sha.begin(), sha.end(), k.btf_sha256.begin());
  const Json& segs = kj["segments"];
  if (!segs.is_array()) return field_error(p + ".segments", "not an array");
  if (segs.empty()) return field_error(p + ".segments", "empty (the extension is absent without segments)");
  if (segs.size() > kMaxThreads) return field_error(p + ".segments", "too many segments");
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string sp = p + ".segments[" + std::to_string(i) + "]";
    const Json& sj = segs[i];
    if (!sj.is_object()) return field_error(sp, "not an object");
    st = check_keys(sj, sp, {"tid", "syscall", "user_sp", "user_pc", "frames"}, {});
    if (!st) return st.error();
    CapturedKernelSegment seg;
    TRY_ASSIGN(seg.tid, u64(sj, "tid", sp, UINT64_MAX));
    const Json& sc = sj["syscall"];
    // An unsigned JSON number is read as such (a huge one must not wrap to -1).
    const bool in_range = sc.is_number_unsigned() ? sc.get<uint64_t>() <= INT32_MAX
                                                  : sc.is_number_integer() && sc.get<int64_t>() == -1;
    if (!in_range) return field_error(sp + ".syscall", "not an integer from -1 to 2^31-1");
    seg.syscall = sc.get<int64_t>();
    TRY_ASSIGN(seg.user_sp, hex_u64(sj, "user_sp", sp));
    TRY_ASSIGN(seg.user_pc, hex_u64(sj, "user_pc", sp));
    const Json& fr = sj["frames"];
    if (!fr.is_array()) return field_error(sp + ".frames", "not an array");
    if (fr.size() > kMaxKernelSegmentFrames) return field_error(sp + ".frames", "too many frames");
    for (size_t n = 0; n < fr.size(); ++n) {
      const std::string fp = sp + ".frames[" + std::to_string(n) + "]";
      if (!fr[n].is_object()) return field_error(fp, "not an object");
      st = check_keys(fr[n], fp, {"symbol", "offset", "size", "module", "btf_func_id", "approximate", "prototype"}, {});
      if (!st) return st.error();
      CapturedKernelFrame f;
      TRY_ASSIGN(f.symbol, bounded_str(fr[n], "symbol", fp, kMaxKernelName));
      TRY_ASSIGN(f.offset, hex_u64(fr[n], "offset", fp));
      TRY_ASSIGN(f.size, hex_u64(fr[n], "size", fp));
      TRY_ASSIGN(f.module, bounded_str(fr[n], "module", fp, kMaxKernelName));
      uint64_t id = 0;
      TRY_ASSIGN(id, u64(fr[n], "btf_func_id", fp, UINT32_MAX));
      f.btf_func_id = static_cast<uint32_t>(id);
      if (!fr[n]["approximate"].is_boolean()) return field_error(fp + ".approximate", "not a boolean");
      f.approximate = fr[n]["approximate"].get<bool>();
      TRY_ASSIGN(f.prototype, bounded_str(fr[n], "prototype", fp, kMaxKernelPrototype));
      seg.frames.push_back(std::move(f));
    }
    k.segments.push_back(std::move(seg));
  }
  return k;
}

Result<Event> parse_capture(const Json& j) {
  auto st = check_keys(j, "", {"event", "trace_id", "platform", "build_id", "frames", "symbol_bundle_ref", "dsse_ref"},
                       {"arch", "captured_at", "data_ref", "data_size", "threads", "kernel"});
  if (!st) return st.error();
  Trace t;
  TRY_ASSIGN(t.id, str(j, "trace_id", ""));
  TRY_ASSIGN(t.platform, str(j, "platform", ""));
  TRY_ASSIGN(t.build_id, str(j, "build_id", ""));
  TRY_ASSIGN(t.symbol_bundle_sha256, sha_ref(j, "symbol_bundle_ref", ""));
  const Json& dsse = j["dsse_ref"];
  if (dsse.is_string()) {
    t.dsse_ref = dsse.get<std::string>();
    if (t.dsse_ref.rfind("dsse:", 0) != 0) return field_error(".dsse_ref", "not dsse:...");
  } else if (!dsse.is_null()) {
    return field_error(".dsse_ref", "not a string or null");
  }
  if (!is_uuid(t.id)) return field_error(".trace_id", "not a lower-case UUID");
  if (!t.build_id.empty() && !is_lower_hex(t.build_id)) return field_error(".build_id", "not lower-case hex");
  if (j.contains("arch")) TRY_ASSIGN(t.arch, str(j, "arch", ""));
  if (j.contains("captured_at")) {
    TRY_ASSIGN(t.captured_at, str(j, "captured_at", ""));
    if (!is_canonical_time(t.captured_at)) return field_error(".captured_at", "not RFC 3339 UTC");
  }
  if (j.contains("data_ref")) TRY_ASSIGN(t.data_sha256, sha_ref(j, "data_ref", ""));
  if (j.contains("data_size")) TRY_ASSIGN(t.data_size, u64(j, "data_size", "", kMaxDataBytes));
  bool listed_threads = j.contains("threads");
  if (listed_threads) {
    const Json& ths = j["threads"];
    if (!ths.is_array()) return field_error(".threads", "not an array");
    if (ths.size() > kMaxThreads) return field_error(".threads", "too many threads");
    for (size_t i = 0; i < ths.size(); ++i) {
      std::string p = ".threads[" + std::to_string(i) + "]";
      if (!ths[i].is_object()) return field_error(p, "not an object");
      st = check_keys(ths[i], p, {"tid", "name"}, {});
      if (!st) return st.error();
      Thread th;
      TRY_ASSIGN(th.tid, u64(ths[i], "tid", p, UINT64_MAX));
      TRY_ASSIGN(th.name, str(ths[i], "name", p));
      t.threads.push_back(std::move(th));
    }
  }
  size_t current = 0;
  const Json& frames = j["frames"];
  if (!frames.is_array()) return field_error(".frames", "not an array");
  if (frames.size() > kMaxFramesPerTrace) return field_error(".frames", "too many frames");
  for (size_t i = 0; i < frames.size(); ++i) {
    const Json& fj = frames[i];
    std::string p = ".frames[" + std::to_string(i) + "]";
    if (!fj.is_object()) return field_error(p, "not an object");
    st = check_keys(fj, p, {"ip", "module", "module_build_id"},
                    {"thread", "tid", "module_offset", "symbol", "symbol_offset", "file", "line", "column",
                     "inline", "resolver", "source", "bundle_ref", "unwind", "module_id_kind"});
    if (!st) return st.error();
    Frame f;
    TRY_ASSIGN(f.ip, hex_u64(fj, "ip", p));
    TRY_ASSIGN(f.module_path, str(fj, "module", p));
    TRY_ASSIGN(f.module_build_id, str(fj, "module_build_id", p));
    if (!f.module_build_id.empty() && !is_lower_hex(f.module_build_id))
      return field_error(p + ".module_build_id", "not lower-case hex");
    uint64_t thread = 0, tid = 0;
    if (fj.contains("thread")) TRY_ASSIGN(thread, u64(fj, "thread", p, kMaxThreads - 1));
    if (fj.contains("tid")) TRY_ASSIGN(tid, u64(fj, "tid", p, UINT64_MAX));
    if (fj.contains("module_offset")) TRY_ASSIGN(f.module_offset, hex_u64(fj, "module_offset", p));
    if (fj.contains("symbol")) TRY_ASSIGN(f.symbol, str(fj, "symbol", p));
    // null (or absent): no function start was known.
    f.symbol_offset_known = fj.contains("symbol_offset") && !fj["symbol_offset"].is_null();
    if (f.symbol_offset_known) TRY_ASSIGN(f.symbol_offset, hex_u64(fj, "symbol_offset", p));
    if (fj.contains("file")) TRY_ASSIGN(f.file, str(fj, "file", p));
    uint64_t num = 0;
    if (fj.contains("line")) {
      TRY_ASSIGN(num, u64(fj, "line", p, UINT32_MAX));
      f.line = static_cast<uint32_t>(num);
    }
    if (fj.contains("column")) {
      TRY_ASSIGN(num, u64(fj, "column", p, UINT32_MAX));
      f.column = static_cast<uint32_t>(num);
    }
    if (fj.contains("inline")) {
      const Json& inl = fj["inline"];
      if (!inl.is_array()) return field_error(p + ".inline", "not an array");
      if (inl.size() > kMaxInlineDepth) return field_error(p + ".inline", "too deep");
      for (size_t k = 0; k < inl.size(); ++k) {
        std::string ip = p + ".inline[" + std::to_string(k) + "]";
        if (!inl[k].is_object()) return field_error(ip, "not an object");
        st = check_keys(inl[k], ip, {"function", "file", "line", "column"}, {});
        if (!st) return st.error();
        InlineFrame in;
        TRY_ASSIGN(in.function, str(inl[k], "function", ip));
        TRY_ASSIGN(in.file, str(inl[k], "file", ip));
        TRY_ASSIGN(num, u64(inl[k], "line", ip, UINT32_MAX));
        in.line = static_cast<uint32_t>(num);
        TRY_ASSIGN(num, u64(inl[k], "column", ip, UINT32_MAX));
        in.column = static_cast<uint32_t>(num);
        f.inline_chain.push_back(std::move(in));
      }
    }
    if (fj.contains("resolver")) TRY_ASSIGN(f.resolver, str(fj, "resolver", p));
    if (fj.contains("source")) TRY_ASSIGN(f.source, str(fj, "source", p));
    if (fj.contains("unwind")) TRY_ASSIGN(f.unwind_method, str(fj, "unwind", p));
    if (fj.contains("module_id_kind")) TRY_ASSIGN(f.module_id_kind, str(fj, "module_id_kind", p));
    if (fj.contains("bundle_ref")) TRY_ASSIGN(f.bundle_sha256, sha_ref(fj, "bundle_ref", p));
    // frames come thread by thread, in thread order
    if (thread < current) return field_error(p + ".thread", "frames not in thread order");
    current = thread;
    if (listed_threads) {
      if (thread >= t.threads.size()) return field_error(p + ".thread", "not an index into threads");
    } else {
      while (t.threads.size() <= thread) t.threads.emplace_back();
      if (t.threads[thread].frames.empty()) t.threads[thread].tid = tid;
    }
    if (fj.contains("tid") && t.threads[thread].tid != tid)
      return field_error(p + ".tid", "differs from its thread's tid");
    t.threads[thread].frames.push_back(std::move(f));
  }
  CapturedKernel kernel;
  if (j.contains("kernel")) {
    auto k = parse_kernel(j["kernel"]);
    if (!k) return k.error();
    kernel = std::move(k.value());
  }
  return Event(CaptureEvent{std::move(t), std::move(kernel)});
}

}  // namespace

Result<Event> parse_event(std::string_view line) {
  if (line.size() > kMaxEventLine) return make_error(SPROV_ERR_LIMIT, "event line of %zu bytes too long", line.size());
  auto parsed = evidence::parse_json(line, "event line");  // bounded size and nesting depth
  if (!parsed) return parsed.error();
  const Json& j = *parsed;
  if (!j.is_object()) return make_error(SPROV_ERR_JSON, "event line is not a JSON object");
  auto ev = str(j, "event", "");
  if (!ev) return ev.error();
  if (*ev == "trace.capture") return parse_capture(j);
  if (*ev != "replay.result") {
    std::string v = ev->substr(0, 80);
    return make_error(SPROV_ERR_JSON, "event field .event: unknown event '%s'", v.c_str());
  }
  auto st = check_keys(j, "", {"event", "replay_id", "trace_id", "seed", "replay_success_ratio", "symbol_coverage_pct", "verify_time_ms"}, {});
  if (!st) return st.error();
  Replay r;
  TRY_ASSIGN(r.replay_id, str(j, "replay_id", ""));
  TRY_ASSIGN(r.trace_id, str(j, "trace_id", ""));
  if (!is_uuid(r.replay_id)) return field_error(".replay_id", "not a lower-case UUID");
  if (!is_uuid(r.trace_id)) return field_error(".trace_id", "not a lower-case UUID");
  if (!j["seed"].is_number_integer()) return field_error(".seed", "not an integer");
  r.seed = j["seed"].get<int64_t>();
  if (!j["replay_success_ratio"].is_number()) return field_error(".replay_success_ratio", "not a number");
  r.replay_success_ratio = j["replay_success_ratio"].get<double>();
  if (!(r.replay_success_ratio >= 0 && r.replay_success_ratio <= 1))
    return field_error(".replay_success_ratio", "not in [0, 1]");
  if (!j["symbol_coverage_pct"].is_number()) return field_error(".symbol_coverage_pct", "not a number");
  r.symbol_coverage_pct = j["symbol_coverage_pct"].get<double>();
  if (!(r.symbol_coverage_pct >= 0 && r.symbol_coverage_pct <= 100))
    return field_error(".symbol_coverage_pct", "not in [0, 100]");
  uint64_t ms = 0;
  TRY_ASSIGN(ms, u64(j, "verify_time_ms", "", INT32_MAX));
  r.verify_time_ms = static_cast<int64_t>(ms);
  return Event(ReplayEvent{std::move(r)});
}

}  // namespace stackprov::trace
