// SPDX-License-Identifier: Apache-2.0
// The gate's evidence checks of a replay: DSSE envelopes and log inclusion of a trace's bundles,
// and the platform ids of the modules its frames touch.
#include <algorithm>
#include <chrono>
#include <map>

#include "bundle/format.hpp"
#include "evidence/encoding.hpp"
#include "evidence/keys.hpp"
#include "evidence/trace_verify.hpp"
#include "pipeline/trace.hpp"

namespace stackprov::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

/// One offline verification of a staged bundle's blob (re-hashed) and its envelope: its DSSE
/// signatures by `keys`, or (`log`) its log entry by the inclusion proof under `trusted_root`.
Status verify_bundle(const std::string& dig, const std::string& blob, const std::string& env, bool log,
                     const std::vector<std::string>& keys, const std::string& trusted_root, const std::string& proof) {
  evidence::TraceVerifyInput in;
  auto d = evidence::parse_digest(dig);
  if (!d) return d.error();
  in.digest = d.value();
  in.artifact_path = blob;
  in.envelope_path = env;
  in.check_dsse = !log;
  in.check_log = log;
  std::vector<const char*> paths;
  for (const auto& k : keys) paths.push_back(k.c_str());
  auto k = evidence::load_public_keys(paths.data(), paths.size());
  if (!k) return k.error();
  in.keys = std::move(k.value());
  in.threshold = 1;
  in.trusted_root_path = trusted_root;
  in.proof_path = proof;
  auto r = evidence::trace_verify(in);
  if (!r) return r.error();
  return {};
}

}  // namespace

void verify_trace_bundles(const trace::Trace& t, const BundleStaging& stg, const std::vector<std::string>& bundles,
                    const std::vector<std::string>& keys, const std::string& trusted_root, ReplayReport& rep,
                    const trace::CapturedKernel& kernel) {
  ReplayCheck dsse, incl, pid;
  dsse.name = "dsse";
  incl.name = "inclusion";
  pid.name = "platform-id";
  auto t0 = Clock::now();
  std::vector<std::string> dsse_fail, incl_fail;
  if (bundles.empty()) {
    dsse_fail.push_back("the trace names no symbol bundle (capture with --bundle --sign KEY --log DIR)");
    incl_fail.push_back("the trace names no symbol bundle");
  }
  for (const auto& b : bundles) {
    const std::string dig = "sha256:" + b;
    const std::string blob = stg.blob_path(b), env = stg.sidecar_path(b, "dsse.json"),
                      proof = stg.sidecar_path(b, "tlog-proof");
    if (env.empty()) {
      dsse_fail.push_back(dig + " has no DSSE envelope (not signed)");
      incl_fail.push_back(dig + " has no DSSE envelope, so no log entry");
      continue;
    }
    // One offline verification of the blob (re-hashed) and its envelope: DSSE, or the log proof.
    auto verify = [&](bool log, std::vector<std::string>& fails) {
      Status st = verify_bundle(dig, blob, env, log, log ? std::vector<std::string>{} : keys, log ? trusted_root : "",
                                log ? proof : "");
      if (!st) fails.push_back(dig + ": " + st.error().message);
    };
    if (keys.empty())
      dsse_fail.push_back(dig + ": no public key given to verify its envelope (--key PUB)");
    else
      verify(false, dsse_fail);
    if (proof.empty())
      incl_fail.push_back(dig + " has no inclusion proof (tlog-proof)");
    else if (trusted_root.empty())
      incl_fail.push_back(dig + ": no trusted root given to verify its inclusion proof (--trusted-root FILE)");
    else
      verify(true, incl_fail);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  dsse.passed = dsse_fail.empty();
  dsse.detail = dsse.passed ? std::to_string(bundles.size()) + " bundle envelope(s) verified" : join(dsse_fail);
  incl.passed = incl_fail.empty();
  incl.detail = incl.passed ? std::to_string(bundles.size()) + " inclusion proof(s) verified" : join(incl_fail);
  dsse.seconds = incl.seconds = std::chrono::duration<double>(Clock::now() - t0).count() / 2;

  // Platform ids: every module the frames touch must be held by a bundle with its build-id.
  t0 = Clock::now();
  std::map<std::pair<IdKind, std::string>, std::pair<ModuleId, std::string>> modules;  // (kind, hex) -> id, path
  std::vector<std::string> pid_fail;
  for (const auto& th : t.threads)
    for (const auto& f : th.frames) {
      if (f.module_path.empty() || f.module_path == kVdsoName) continue;
      if (f.module_build_id.empty()) {
        pid_fail.push_back("module " + f.module_path + " has no build-id: its bundle cannot be identified");
        continue;
      }
      modules.emplace(std::pair{trace::frame_module_id(f).kind, f.module_build_id},
                      std::pair{trace::frame_module_id(f), f.module_path});
    }
  std::vector<std::pair<std::string, bundle::BundleReader>> open;  // digest, reader
  for (const auto& b : bundles) {
    auto r = bundle::BundleReader::open_file(stg.blob_path(b));
    if (r) open.emplace_back(b, std::move(r).value());
  }
  for (const auto& [key, entry] : modules) {
    const auto& [id, path] = entry;
    bool found = false;
    for (const auto& [dig, r] : open)
      if (!id.empty() && r.find_module(id.kind, std::span<const uint8_t>(id.bytes, id.len)) != nullptr) found = true;
    // An ELF build-id is named as it always was; another kind by its name.
    const std::string what = key.first == IdKind::kElfBuildId ? "build-id" : id_kind_name(key.first);
    if (found) continue;
    std::string msg = "module " + path + " " + what + " " + key.second + ": no bundle of the trace holds it";
    // A module of the same name in a bundle of the trace is another build of it (a rebuilt binary, a
    // UUID or GUID that differs): both identities are named.
    const size_t slash = path.find_last_of("/\\");
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    for (const auto& [dig, r] : open)
      for (const bundle::ModuleView& m : r.modules())
        if (m.name == base)
          msg += "; bundle sha256:" + dig + " holds " + base + " as " + id_kind_name(m.id_kind) + " " +
                 evidence::hex_encode(m.id.data(), m.id.size()) + " (another build)";
    pid_fail.push_back(msg);
  }
  std::sort(pid_fail.begin(), pid_fail.end());
  pid_fail.erase(std::unique(pid_fail.begin(), pid_fail.end()), pid_fail.end());
  // Kernel segments were read from one kernel build: their names, offsets and prototypes are that
  // build's, so the kernel must be the running one (the bundles hold no kernel).
  if (std::string k = kernel_platform_mismatch(kernel); !k.empty()) pid_fail.push_back(k);
  pid.passed = pid_fail.empty();
  pid.detail = pid.passed ? std::to_string(modules.size()) + " module build-id(s) equal their bundle's" : join(pid_fail);
  if (pid.passed && !kernel.empty())
    pid.detail += "; kernel build-id " + evidence::hex_encode(kernel.build_id.data(), kernel.build_id.size()) +
                  " is the running kernel's";
  pid.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  rep.checks.push_back(dsse);
  rep.checks.push_back(incl);
  rep.checks.push_back(pid);
}

}  // namespace stackprov::pipeline
