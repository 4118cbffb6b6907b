// SPDX-License-Identifier: Apache-2.0
// C ABI: replay of a stored trace and the gate (lib/pipeline/trace_replay.cpp), the report's exit code and its JSON/JUnit/summary forms.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "capi/trace_internal.hpp"
#include "evidence/json.hpp"

using namespace stackprov;
using namespace stackprov::capi;
using evidence::Json;
using pipeline::format_pct;

struct sprov_replay_report : stackprov::pipeline::ReplayReport {
  int exit_code = SPROV_GATE_OK;
};

namespace {

int gate_code(const std::string& check) {
  if (check == "coverage") return SPROV_GATE_COVERAGE;
  if (check == "success") return SPROV_GATE_SUCCESS;
  if (check == "dsse") return SPROV_GATE_DSSE;
  if (check == "inclusion") return SPROV_GATE_INCLUSION;
  return SPROV_GATE_PLATFORM_ID;
}


std::string xml_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t') o += ' ';  // not allowed in XML 1.0
        else o.push_back(static_cast<char>(c));
    }
  }
  return o;
}

std::string summary_line(const sprov_replay_report& r) {
  std::string s = "trace " + r.trace_id + ": " + format_pct(r.coverage) + "% coverage, " + format_pct(100 * r.success) +
                  "% success (" + std::to_string(r.seeds.size()) + " seeds, " + std::to_string(r.frames) + " frames";
  // A trace with kernel segments says how they were compared (the same in every seed).
  for (const auto& sd : r.seeds)
    if (!sd.kernel.is_null()) {
      s += ", " + std::to_string(sd.kernel.value("frames", size_t{0})) + " kernel frames " +
           sd.kernel.value("mode", std::string());
      break;
    }
  // And of its Python segment (the first seed's count; each seed's is in the JSON report).
  for (const auto& sd : r.seeds)
    if (!sd.python.is_null()) {
      s += ", " + std::to_string(sd.python.value("frames", size_t{0})) + " python frames " +
           sd.python.value("mode", std::string());
      break;
    }
  s += "): ";
  std::string failed;
  for (const auto& c : r.checks)
    if (!c.passed) failed += (failed.empty() ? "" : ", ") + c.name;
  return s + (failed.empty() ? "PASS" : "FAIL " + failed);
}

std::string report_json(const sprov_replay_report& r) {
  Json j;
  j["trace_id"] = r.trace_id;
  j["symbol_coverage_pct"] = r.coverage;
  j["replay_success_ratio"] = r.success;
  j["frames"] = r.frames;
  j["thresholds"] = {{"min_coverage_pct", r.min_coverage}, {"min_success_ratio", r.min_success}};
  j["exit_code"] = r.exit_code;
  j["passed"] = r.exit_code == 0;
  j["checks"] = Json::array();
  for (const auto& c : r.checks) j["checks"].push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
  j["seeds"] = Json::array();
  for (const auto& s : r.seeds) {
    Json o = {{"seed", s.seed},
              {"replay_id", s.replay_id},
              {"frames", s.frames},
              {"identical", s.identical},
              {"covered", s.covered},
              {"replay_success_ratio", s.success()},
              {"symbol_coverage_pct", s.coverage()},
              {"verify_time_ms", static_cast<int64_t>(std::llround(s.seconds * 1000))},
              {"perturbation", s.perturbation},
              {"mismatches", s.mismatches}};
    if (!s.error.empty()) o["error"] = s.error;
    if (!s.kernel.is_null()) o["kernel"] = s.kernel;  // re-derived or compared as recorded, and why
    if (!s.python.is_null()) o["python"] = s.python;  // the CPython segment, compared as recorded
    j["seeds"].push_back(o);
  }
  j["summary"] = summary_line(r);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);  // invalid UTF-8 in a name -> U+FFFD
}

std::string report_junit(const sprov_replay_report& r) {
  size_t failures = 0, tests = r.checks.size() + r.seeds.size();
  std::string cases;
  auto secs = [](double s) {
    char b[32];
    snprintf(b, sizeof b, "%.3f", s);
    return std::string(b);
  };
  for (const auto& c : r.checks) {
    cases += "    <testcase name=\"" + xml_escape(c.name) + "\" classname=\"stackprov.gate\" time=\"" + secs(c.seconds) + "\"";
    if (c.passed) {
      cases += "/>\n";
    } else {
      ++failures;
      cases += ">\n      <failure message=\"" + xml_escape(c.name + ": " + c.detail) + "\" type=\"gate\">" +
               xml_escape(c.detail) + "</failure>\n    </testcase>\n";
    }
  }
  for (const auto& s : r.seeds) {
    cases += "    <testcase name=\"seed-" + std::to_string(s.seed) + "\" classname=\"stackprov.replay\" time=\"" +
             secs(s.seconds) + "\"";
    const bool ok = s.error.empty() && s.success() >= r.min_success;
    if (ok) {
      cases += "/>\n";
      continue;
    }
    ++failures;
    std::string msg = s.error.empty() ? std::to_string(s.identical) + " of " + std::to_string(s.frames) +
                                            " frames identical (" + format_pct(100 * s.success()) + "%)"
                                      : "replay failed: " + s.error;
    std::string body = msg;
    for (const auto& m : s.mismatches) body += "\n" + m;
    cases += ">\n      <failure message=\"" + xml_escape(msg) + "\" type=\"replay\">" + xml_escape(body) +
             "</failure>\n    </testcase>\n";
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  x += "  <testsuite name=\"stackprov.trace-replay\" package=\"stackprov\" id=\"0\" timestamp=\"" + r.timestamp +
       "\" hostname=\"" + xml_escape(r.host) + "\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
       std::to_string(failures) + "\" errors=\"0\" time=\"" + secs(r.seconds) + "\">\n";
  x += "    <properties>\n";
  auto prop = [&](const std::string& k, const std::string& v) {
    x += "      <property name=\"" + xml_escape(k) + "\" value=\"" + xml_escape(v) + "\"/>\n";
  };
  prop("trace_id", r.trace_id);
  prop("symbol_coverage_pct", format_pct(r.coverage));
  prop("replay_success_ratio", std::to_string(r.success));
  prop("min_coverage_pct", format_pct(r.min_coverage));
  prop("min_success_ratio", std::to_string(r.min_success));
  prop("exit_code", std::to_string(r.exit_code));
  x += "    </properties>\n" + cases;
  x += "    <system-out>" + xml_escape(summary_line(r)) + "</system-out>\n    <system-err></system-err>\n";
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

}  // namespace

extern "C" {

SPROV_API int sprov_trace_replay(sprov_context* ctx, sprov_trace_store* store, const char* trace_id,
                                 const struct sprov_trace_replay_opts* opts, sprov_replay_report** out) {
  return guard([&] {
    if (!ctx || !store || !trace_id || !out)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replay: NULL %s",
                             !ctx ? "ctx" : !store ? "store" : !trace_id ? "trace_id" : "out"));
    *out = nullptr;
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_replay_opts), "sprov_trace_replay_opts")) return rc;
    uint32_t seeds = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, seeds, 0u);
    if (seeds == 0) seeds = 5;
    if (seeds > 1000) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replay_opts.seeds %u exceeds 1000", seeds));
    if (uint32_t f = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, flags, 0u); f != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replay_opts.flags 0x%x: must be 0 (reserved)", f));
    uint64_t first = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, first_seed, uint64_t{0});
    if (first == 0) first = 1;
    double min_cov = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, min_coverage_pct, -1.0);
    double min_succ = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, min_success_ratio, -1.0);
    if (!opts || !SPROV_OPTS_HAS(opts, sprov_trace_replay_opts, min_coverage_pct) || min_cov < 0) min_cov = 90;
    if (!opts || !SPROV_OPTS_HAS(opts, sprov_trace_replay_opts, min_success_ratio) || min_succ < 0) min_succ = 0.95;
    if (!(min_cov <= 100)) return fail(make_error(SPROV_ERR_INVALID_ARG, "min_coverage_pct %g is above 100", min_cov));
    if (!(min_succ <= 1)) return fail(make_error(SPROV_ERR_INVALID_ARG, "min_success_ratio %g is above 1", min_succ));
    const char* const* kp = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, key_paths, nullptr);
    const size_t kn = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, key_count, size_t{0});
    if (kn && !kp) return fail(make_error(SPROV_ERR_INVALID_ARG, "key_count %zu with NULL key_paths", kn));
    std::vector<const char*> keys;
    for (size_t i = 0; i < kn; ++i) {
      if (!kp[i]) return fail(make_error(SPROV_ERR_INVALID_ARG, "key_paths[%zu] is NULL", i));
      keys.push_back(kp[i]);
    }
    const char* trusted_root = SPROV_OPTS_GET(opts, sprov_trace_replay_opts, trusted_root_path, nullptr);
    if (!trace::is_uuid(trace_id)) return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));

    pipeline::ReplayOptions ro;
    ro.seeds = seeds;
    ro.first_seed = first;
    ro.min_coverage = min_cov;
    ro.min_success = min_succ;
    ro.keys.assign(keys.begin(), keys.end());
    ro.trusted_root = trusted_root ? trusted_root : "";
    auto r = pipeline::replay_trace(*ctx, *store->store, trace_id, ro);
    if (!r) return fail(r.error());
    auto rep = std::make_unique<sprov_replay_report>();
    static_cast<pipeline::ReplayReport&>(*rep) = std::move(*r.value());
    for (const auto& ch : rep->checks)
      if (!ch.passed) {
        rep->exit_code = gate_code(ch.name);
        break;
      }
    *out = rep.release();
    return 0;
  });
}

SPROV_API void sprov_replay_report_free(sprov_replay_report* r) { delete r; }

SPROV_API int sprov_replay_report_exit_code(const sprov_replay_report* r) { return r ? r->exit_code : SPROV_ERR_INVALID_ARG; }

SPROV_API double sprov_replay_report_coverage_pct(const sprov_replay_report* r) { return r ? r->coverage : 0; }

SPROV_API double sprov_replay_report_success_ratio(const sprov_replay_report* r) { return r ? r->success : 0; }

SPROV_API int sprov_replay_report_format(const sprov_replay_report* r, int format, char** out, size_t* out_len) {
  return guard([&] {
    if (!r || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_replay_report_format: NULL argument"));
    std::string s;
    switch (format) {
      case SPROV_REPORT_JSON: s = report_json(*r); break;
      case SPROV_REPORT_JUNIT: s = report_junit(*r); break;
      case SPROV_REPORT_SUMMARY: s = summary_line(*r); break;
      default: return fail(make_error(SPROV_ERR_INVALID_ARG, "report format %d: expected 1 (JSON), 2 (JUnit) or 3 (summary)", format));
    }
    return give_string(s, out, out_len);
  });
}

}  // extern "C"

