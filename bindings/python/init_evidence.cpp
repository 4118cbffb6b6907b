// SPDX-License-Identifier: Apache-2.0
// Evidence (include/stackprov/bundle.h): digests, keys, DSSE, the local log, offline verification.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "stackprov/bundle.h"

namespace stackprov_py {
namespace {

/// A transparency log directory (sprov_tlog: one handle per thread, so calls are serialized).
struct Log {
  std::shared_ptr<sprov_tlog> l;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  void close() {
    std::lock_guard<std::mutex> lock(*mu);
    l.reset();
  }
  sprov_tlog* get() const {
    if (!l) fail_arg("the Log is closed");
    return l.get();
  }
};

}  // namespace

void init_evidence(py::module_& m) {
  m.def("digest_file", [](const std::string& path) {
    char out[SPROV_DIGEST_STRLEN] = {};
    py::gil_scoped_release nogil;
    check(sprov_digest_file(path.c_str(), out, sizeof(out)));
    return std::string(out);
  }, py::arg("path"), "'sha256:<hex>' of a file.");
  m.def("key_generate", [](const std::string& private_path, std::optional<std::string> public_path) {
    const std::string pub = public_path ? *public_path : private_path + ".pub";
    char id[SPROV_KEY_ID_STRLEN] = {};
    py::gil_scoped_release nogil;
    check(sprov_key_generate(private_path.c_str(), pub.c_str(), id, sizeof(id)));
    return std::string(id);
  }, py::arg("private_path"), py::arg("public_path") = py::none(),
     "Generates an ECDSA P-256 key: the private key (SEC1 PEM, mode 0600; must not exist) and the public\n"
     "key (SPKI PEM; default private_path + '.pub'), as `stackprov keygen`. Returns the key id.");
  m.def("key_id", [](const std::string& path) {
    char id[SPROV_KEY_ID_STRLEN] = {};
    check(sprov_key_id(path.c_str(), id, sizeof(id)));
    return std::string(id);
  }, py::arg("path"), "The key id (hex sha256 of the DER SubjectPublicKeyInfo) of a key or certificate file.");
  m.def("log_init", [](const std::string& dir, const std::string& key, std::optional<std::string> origin) {
    std::filesystem::path base(dir);
    if (base.filename().empty()) base = base.parent_path();  // "log/" as "log"
    std::string o = origin ? *origin : "stackprov.local/" + base.filename().string();
    py::gil_scoped_release nogil;
    sprov_tlog* log = nullptr;
    check(sprov_tlog_init(dir.c_str(), o.c_str(), key.c_str(), &log));
    sprov_tlog_free(log);
  }, py::arg("dir"), py::kw_only(), py::arg("key"), py::arg("origin") = py::none(),
     "Creates an empty transparency log in `dir` whose checkpoints `key` signs (also writes\n"
     "dir/log.pub and dir/trusted_root.json), as `stackprov log init`.");
  py::class_<Log> log_cls(m, "Log",
      "A transparency log in the C2SP tlog-tiles layout (doc/provenance.md), as `stackprov log`:\n"
      "append entries, sign checkpoints, prove inclusion and consistency. Calls are serialized.");
  log_cls
      .def(py::init([](const std::string& dir) {
             py::gil_scoped_release nogil;
             sprov_tlog* l = nullptr;
             check(sprov_tlog_open(dir.c_str(), &l));
             return Log{std::shared_ptr<sprov_tlog>(l, sprov_tlog_free)};
           }),
           py::arg("dir"), "Opens the log in `dir` (made by log_init or `stackprov log init`).")
      .def_property_readonly("size", [](const Log& g) {
        std::lock_guard<std::mutex> lock(*g.mu);
        return sprov_tlog_size(g.get());
      }, "Committed number of entries (may be ahead of the signed checkpoint).")
      .def("append", [](Log& g, const std::vector<py::bytes>& entries, std::optional<std::string> key) {
        std::vector<std::string> e(entries.begin(), entries.end());
        std::vector<const void*> ptrs;
        std::vector<size_t> lens;
        for (const auto& x : e) ptrs.push_back(x.data()), lens.push_back(x.size());
        uint64_t first = 0;
        char* note = nullptr;
        size_t n = 0;
        {
          py::gil_scoped_release nogil;
          std::lock_guard<std::mutex> lock(*g.mu);
          check(sprov_tlog_append_checkpoint(g.get(), ptrs.data(), lens.data(), ptrs.size(), cstr(key), &first,
                                             key ? &note : nullptr, key ? &n : nullptr));
        }
        py::object signed_note = py::none();
        if (note) signed_note = py::str(take(note, n));
        return py::make_tuple(first, signed_note);
      }, py::arg("entries"), py::kw_only(), py::arg("key") = py::none(),
         "Appends entries (bytes, each 1..65535 bytes) in one crash-safe step; returns (index of the\n"
         "first, the signed checkpoint of the new size when `key` (the log's private key) is given,\n"
         "else None). With a key that is not the log's, nothing is written.")
      .def("checkpoint", [](Log& g, const std::string& key) {
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_checkpoint(g.get(), key.c_str(), &out, &n));
        return take(out, n);
      }, py::kw_only(), py::arg("key"), "Signs a checkpoint of the committed size; returns the signed note.")
      .def("find", [](Log& g, py::bytes entry) -> std::optional<uint64_t> {
        std::string e = entry;
        uint64_t index = 0;
        int rc;
        {
          py::gil_scoped_release nogil;
          std::lock_guard<std::mutex> lock(*g.mu);
          rc = sprov_tlog_find(g.get(), e.data(), e.size(), &index);
        }
        if (rc == SPROV_ERR_NOT_FOUND) return std::nullopt;
        check(rc);
        return index;
      }, py::arg("entry"), "Index of the first entry equal to the bytes, or None.")
      .def("prove", [](Log& g, uint64_t index) {
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_prove(g.get(), index, &out, &n));
        return take(out, n);
      }, py::arg("index"), "Inclusion proof of entry `index` against the stored checkpoint (tlog-proof@v1 text).")
      .def("consistency", [](Log& g, uint64_t old_size, uint64_t new_size) {
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_consistency(g.get(), old_size, new_size, &out, &n));
        return take(out, n);
      }, py::arg("old_size"), py::arg("new_size") = 0,
         "Consistency proof from old_size to new_size (0: the stored checkpoint's size), as text.")
      .def("fsck", [](Log& g) {
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_fsck(g.get()));
      }, "Re-derives every tile hash and the root from the entries and checks the checkpoint.");
  closable(log_cls, "Releases the log (also at the end of a `with` block).");
  m.def("log_verify_proof", [](const std::string& proof, py::bytes entry, const std::string& log_key,
                               const std::string& origin) {
    std::string e = entry;
    py::gil_scoped_release nogil;
    check(sprov_tlog_verify_proof(proof.data(), proof.size(), e.data(), e.size(), log_key.c_str(), origin.c_str()));
  }, py::arg("proof"), py::arg("entry"), py::kw_only(), py::arg("log_key"), py::arg("origin"),
     "Offline: verifies a tlog-proof@v1 for `entry` (bytes): the checkpoint signed by `log_key` (a\n"
     "public key file) under `origin`, the entry included; VerificationError when not.");
  m.def("log_verify_consistency", [](const std::string& old_note, const std::string& new_note, const std::string& proof,
                                     const std::string& log_key, const std::string& origin) {
    py::gil_scoped_release nogil;
    check(sprov_tlog_verify_consistency(old_note.c_str(), new_note.c_str(), proof.c_str(), log_key.c_str(),
                                        origin.c_str()));
  }, py::arg("old_note"), py::arg("new_note"), py::arg("proof"), py::kw_only(), py::arg("log_key"), py::arg("origin"),
     "Offline: verifies that the signed checkpoint new_note extends old_note with a proof from\n"
     "Log.consistency; VerificationError when not.");
  m.def("dsse_sign_file", [](const std::string& key, const std::string& artifact, std::optional<std::string> subject_name,
                             std::optional<std::string> predicate_type, std::optional<std::string> predicate_json) {
    sprov_sign_opts o{};
    o.sz = sizeof(o);
    o.subject_name = cstr(subject_name);
    o.predicate_type = cstr(predicate_type);
    o.predicate_json = cstr(predicate_json);
    py::gil_scoped_release nogil;
    return lib_str([&](char** out, size_t* len) { return sprov_dsse_sign_file(key.c_str(), artifact.c_str(), &o, out, len); });
  }, py::arg("key"), py::arg("artifact"), py::kw_only(), py::arg("subject_name") = py::none(),
     py::arg("predicate_type") = py::none(), py::arg("predicate_json") = py::none(),
     "A DSSE envelope (JSON) over an in-toto statement whose subject is the file's sha256, signed with `key`.");
  m.def("dsse_verify", [](py::bytes envelope, const std::vector<std::string>& keys, uint32_t threshold,
                          std::optional<std::string> payload_type, std::optional<std::string> subject_digest) {
    std::string env = envelope;
    std::vector<const char*> kp;
    for (const auto& k : keys) kp.push_back(k.c_str());
    sprov_dsse_verify_opts o{};
    o.sz = sizeof(o);
    o.key_paths = kp.empty() ? nullptr : kp.data();
    o.key_count = kp.size();
    o.threshold = threshold;
    o.payload_type = cstr(payload_type);
    o.subject_digest = cstr(subject_digest);
    py::gil_scoped_release nogil;
    check(sprov_dsse_verify(env.data(), env.size(), &o));
  }, py::arg("envelope"), py::kw_only(), py::arg("keys"), py::arg("threshold") = 0, py::arg("payload_type") = py::none(),
     py::arg("subject_digest") = py::none(),
     "Verifies a DSSE envelope (bytes) with trusted public key files; VerificationError when it does not verify.");
  m.def("trace_verify", [](const std::string& digest, std::optional<std::string> envelope, std::optional<std::string> artifact,
                           const std::vector<std::string>& keys, uint32_t threshold, bool dsse, bool log,
                           std::optional<std::string> trusted_root, std::optional<std::string> log_dir,
                           std::optional<std::string> proof) {
    std::vector<const char*> kp;
    for (const auto& k : keys) kp.push_back(k.c_str());
    sprov_trace_verify_opts o{};
    o.sz = sizeof(o);
    o.digest = digest.c_str();
    o.artifact_path = cstr(artifact);
    o.envelope_path = cstr(envelope);
    o.check_dsse = dsse;
    o.check_log = log;
    o.key_paths = kp.empty() ? nullptr : kp.data();
    o.key_count = kp.size();
    o.threshold = threshold;
    o.trusted_root_path = cstr(trusted_root);
    o.log_dir = cstr(log_dir);
    o.proof_path = cstr(proof);
    py::gil_scoped_release nogil;
    return lib_str([&](char** out, size_t* len) { return sprov_trace_verify(&o, out, len); });
  }, py::arg("digest"), py::kw_only(), py::arg("envelope") = py::none(), py::arg("artifact") = py::none(),
     py::arg("keys") = std::vector<std::string>{}, py::arg("threshold") = 0, py::arg("dsse") = true, py::arg("log") = false,
     py::arg("trusted_root") = py::none(), py::arg("log_dir") = py::none(), py::arg("proof") = py::none(),
     "Verifies offline an artifact's DSSE envelope (dsse=True, with `keys`) and/or its inclusion in a\n"
     "transparency log (log=True: log_dir= or proof=, trusted_root=); returns the report ('ok <check>' lines).");
  m.def("sigstore_verify", [](const std::string& bundle, const std::string& trusted_root, std::optional<std::string> artifact,
                              std::optional<std::string> artifact_digest) {
    sprov_sigstore_opts o{};
    o.sz = sizeof(o);
    o.artifact_path = cstr(artifact);
    o.artifact_digest = cstr(artifact_digest);
    py::gil_scoped_release nogil;
    return lib_str([&](char** out, size_t* len) { return sprov_sigstore_verify(bundle.c_str(), trusted_root.c_str(), &o, out, len); });
  }, py::arg("bundle"), py::arg("trusted_root"), py::kw_only(), py::arg("artifact") = py::none(),
     py::arg("artifact_digest") = py::none(),
     "Offline verification of a Sigstore bundle file against a trusted root JSON file; returns the report.");
}

}  // namespace stackprov_py
