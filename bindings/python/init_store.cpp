// SPDX-License-Identifier: Apache-2.0
// The stores: TraceStore and its ReplayReport (include/stackprov/trace.h), and Store, the bundle store.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common.hpp"
#include "stackprov/trace.h"

// Outside stackprov_py, as when the module was one file: TraceStore's private _replay names ReplayReport
// before it is registered, so pybind11 spells it "(anonymous namespace)::ReplayReport" in that docstring.
namespace {

/// A content-addressed bundle store directory (doc/bundles.md "Store").
struct BundleStore {
  std::shared_ptr<sprov_bundle_store> s;
  void close() { s.reset(); }
  sprov_bundle_store* get() const {
    if (!s) stackprov_py::fail_arg("the Store is closed");
    return s.get();
  }
};

/// The outcome of a trace replay (sprov_replay_report).
struct ReplayReport {
  std::shared_ptr<sprov_replay_report> r;
  std::string format(int fmt) const {
    return stackprov_py::lib_str(
        [&](char** out, size_t* len) { return sprov_replay_report_format(r.get(), fmt, out, len); });
  }
};

}  // namespace

namespace stackprov_py {
namespace {

/// A trace store (include/stackprov/trace.h): SQLite or PostgreSQL, by URL.
struct TraceStore {
  std::shared_ptr<sprov_trace_store> store;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  void close() {
    std::lock_guard<std::mutex> lock(*mu);
    store.reset();
  }
  sprov_trace_store* get() const {
    if (!store) fail_arg("the TraceStore is closed");
    return store.get();
  }
};

/// A JSON document of the trace store (sprov_trace_*_json), read without the GIL under the store's lock.
template <class F>
std::string store_json(TraceStore& t, F&& call) {
  char* out = nullptr;
  size_t n = 0;
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(*t.mu);
  check(call(t.get(), &out, &n));
  return take(out, n);
}

/// The id kind's number for its name ("elf-build-id", ...).
int id_kind_of(const std::string& name) {
  for (int k = SPROV_BUNDLE_ID_ELF_BUILD_ID; k <= SPROV_BUNDLE_ID_PE_CODE_ID; k++)
    if (name == sprov_bundle_id_kind_name(k)) return k;
  fail_arg("invalid id kind '" + name + "' (expected elf-build-id, pdb-guid-age, macho-uuid or pe-code-id)");
}

std::string store_blob_path(const BundleStore& st, const std::string& digest) {
  char* out = nullptr;
  size_t n = 0;
  check(sprov_bundle_store_blob_path(st.get(), digest.c_str(), &out, &n));
  std::string s(out, n);
  sprov_free(out);
  return s;
}

std::string store_find(const BundleStore& st, const std::string& id_hex, const std::string& kind) {
  const int k = id_kind_of(kind);
  char digest[SPROV_DIGEST_STRLEN] = {};
  check(sprov_bundle_store_find(st.get(), k, id_hex.c_str(), digest, sizeof(digest)));
  return digest;
}

/// The digest given, or the one the store's id map names for build_id (exactly one of them).
std::string digest_or_find(const BundleStore& s, const std::optional<std::string>& digest,
                           const std::optional<std::string>& build_id, const std::string& kind) {
  if (digest && build_id) fail_arg("give digest or build_id=, not both (build_id '" + *build_id + "')");
  if (!digest && !build_id) fail_arg("give a digest or build_id=");
  return digest ? *digest : store_find(s, *build_id, kind);
}

}  // namespace

void init_trace_store(py::module_& m) {
  py::class_<TraceStore> trace_store_cls(m, "TraceStore",
      "A trace store (sqlite:PATH or postgresql://...; None: the default store, doc/traces.md).");
  trace_store_cls
      .def(py::init([](std::optional<std::string> url) {
             sprov_trace_store* t = nullptr;
             {
               py::gil_scoped_release nogil;
               check(sprov_trace_store_open(cstr(url), &t));
             }
             return TraceStore{std::shared_ptr<sprov_trace_store>(t, sprov_trace_store_free)};
           }),
           py::arg("url") = py::none())
      .def_property_readonly("url", [](const TraceStore& t) { return std::string(sprov_trace_store_url(t.get())); },
                             "The store's URL, any password replaced by ***.")
      .def("_capture", [](TraceStore& t, const Context& c, const Process& p, bool bundle, uint32_t max_frames,
                          std::optional<std::string> sign_key, std::optional<std::string> log_dir,
                          std::optional<std::string> log_key) {
        CtxPtr ctx = c.get();
        if (!p.proc) fail_arg("the Process is closed");
        char id[SPROV_TRACE_ID_STRLEN] = {};
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        sprov_trace_capture_opts o{};
        o.sz = sizeof(o);
        o.flags = bundle ? SPROV_TRACE_BUNDLE : 0;
        o.max_frames = max_frames;
        o.sign_key = cstr(sign_key);
        o.log_dir = cstr(log_dir);
        o.log_key = cstr(log_key);
        check(sprov_trace_capture(ctx.get(), p.proc.get(), t.get(), &o, id, sizeof(id)));
        return std::string(id);
      }, py::arg("context"), py::arg("process"), py::arg("bundle"), py::arg("max_frames"),
         py::arg("sign_key") = py::none(), py::arg("log_dir") = py::none(), py::arg("log_key") = py::none())
      .def("_resolve", [](TraceStore& t, const Context& c, const std::string& id, bool offline,
                          const std::vector<std::string>& bundles) {
        CtxPtr ctx = c.get();
        std::vector<const char*> bp;
        for (const auto& b : bundles) bp.push_back(b.c_str());
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        sprov_trace_resolve_opts o{};
        o.sz = sizeof(o);
        o.flags = offline ? SPROV_TRACE_OFFLINE : 0;
        o.bundles = bp.empty() ? nullptr : bp.data();
        o.bundle_count = bp.size();
        check(sprov_trace_resolve(ctx.get(), t.get(), id.c_str(), &o, &out, &n));
        return take(out, n);
      }, py::arg("context"), py::arg("trace_id"), py::arg("offline"), py::arg("bundles"))
      .def("_replay", [](TraceStore& t, const Context& c, const std::string& id, uint32_t seeds, uint64_t first_seed,
                         double min_coverage, double min_success, const std::vector<std::string>& keys,
                         std::optional<std::string> trusted_root) {
        CtxPtr ctx = c.get();
        std::vector<const char*> kp;
        for (const auto& k : keys) kp.push_back(k.c_str());
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        sprov_trace_replay_opts o{};
        o.sz = sizeof(o);
        o.seeds = seeds;
        o.first_seed = first_seed;
        o.min_coverage_pct = min_coverage;
        o.min_success_ratio = min_success;
        o.key_paths = kp.empty() ? nullptr : kp.data();
        o.key_count = kp.size();
        o.trusted_root_path = cstr(trusted_root);
        sprov_replay_report* r = nullptr;
        check(sprov_trace_replay(ctx.get(), t.get(), id.c_str(), &o, &r));
        return ReplayReport{std::shared_ptr<sprov_replay_report>(r, sprov_replay_report_free)};
      }, py::arg("context"), py::arg("trace_id"), py::arg("seeds"), py::arg("first_seed"), py::arg("min_coverage"),
         py::arg("min_success"), py::arg("keys"), py::arg("trusted_root"))
      .def("replays_json", [](TraceStore& t, const std::string& id) {
        return store_json(t, [&](sprov_trace_store* s, char** o, size_t* n) { return sprov_trace_replays_json(s, id.c_str(), o, n); });
      }, py::arg("trace_id"), "The replays of a trace as replay.result event lines (JSON), oldest first.")
      .def("get_json", [](TraceStore& t, const std::string& id) {
        return store_json(t, [&](sprov_trace_store* s, char** o, size_t* n) { return sprov_trace_get_json(s, id.c_str(), o, n); });
      }, py::arg("trace_id"), "The stored trace as one trace.capture event line (JSON).")
      .def("list_json", [](TraceStore& t, size_t limit) {
        return store_json(t, [&](sprov_trace_store* s, char** o, size_t* n) { return sprov_trace_list_json(s, limit, o, n); });
      }, py::arg("limit") = 0, "Every trace as a JSON array, oldest first (at most `limit`; 0: all).");
  closable(trace_store_cls, "Closes the store now (also done by the GC).");
  m.def("_render_trace", [](const std::string& event, bool lines, bool tail_calls) {
        char* out = nullptr;
        size_t n = 0;
        check(sprov_trace_render(event.data(), event.size(),
                                 (lines ? uint32_t{SPROV_RENDER_LINES} : 0u) |
                                     (tail_calls ? 0u : uint32_t{SPROV_RENDER_NO_INFERRED}),
                                 &out, &n));
        return take(out, n);
      }, py::arg("event"), py::arg("lines") = true, py::arg("tail_calls") = true,
      "The threads of a trace.capture event line as `stackprov trace-show` prints them (sprov_trace_render: the "
      "library's one renderer, as `stackprov stack` prints a thread).");
}

void init_replay_report(py::module_& m) {
  py::class_<ReplayReport>(m, "ReplayReport",
      "The outcome of trace_replay: figures, the gate's checks and per-seed results (doc/traces.md \"Replay\").")
      .def_property_readonly("exit_code", [](const ReplayReport& r) { return sprov_replay_report_exit_code(r.r.get()); },
                             "the gate: 0 passed; 3 coverage, 4 success, 5 dsse, 6 inclusion, 7 platform-id "
                             "(the first failed check, as `stackprov trace-replay` exits)")
      .def_property_readonly("passed", [](const ReplayReport& r) { return sprov_replay_report_exit_code(r.r.get()) == 0; })
      .def_property_readonly("coverage_pct", [](const ReplayReport& r) { return sprov_replay_report_coverage_pct(r.r.get()); },
                             "symbol coverage of the trace, percent")
      .def_property_readonly("success_ratio", [](const ReplayReport& r) { return sprov_replay_report_success_ratio(r.r.get()); },
                             "replayed frames identical to the stored resolution, 0 to 1")
      .def("json", [](const ReplayReport& r) { return r.format(SPROV_REPORT_JSON); },
           "The JSON report (what `stackprov trace-replay --json` prints): figures, checks, seeds.")
      .def("junit", [](const ReplayReport& r) { return r.format(SPROV_REPORT_JUNIT); },
           "The JUnit XML report: one testcase per check and per seed (`trace-replay --junit FILE`).")
      .def("summary", [](const ReplayReport& r) { return r.format(SPROV_REPORT_SUMMARY); },
           "One line: '... % coverage, ... % success ...: PASS|FAIL <checks>'.")
      .def("to_dict", [](const ReplayReport& r) { return py::module_::import("json").attr("loads")(r.format(SPROV_REPORT_JSON)); },
           "json() parsed.")
      .def("__repr__", [](const ReplayReport& r) {
        // Python's float repr (100.0, 98.7), not printf's fixed six decimals (100.000000).
        auto num = [](double v) { return py::repr(py::float_(v)).cast<std::string>(); };
        return "ReplayReport(exit_code=" + std::to_string(sprov_replay_report_exit_code(r.r.get())) + ", coverage_pct=" +
               num(sprov_replay_report_coverage_pct(r.r.get())) + ", success_ratio=" +
               num(sprov_replay_report_success_ratio(r.r.get())) + ")";
      });
}

void init_bundle_store(py::module_& m) {
  py::class_<BundleStore> store_cls(m, "Store",
      "A content-addressed bundle store directory (doc/bundles.md \"Store\"): blobs named by their\n"
      "sha256, an id map from module identities (build-ids) to bundles, signature sidecars.");
  store_cls
      .def(py::init([](std::optional<std::string> dir, bool create) {
             py::gil_scoped_release nogil;
             sprov_bundle_store* s = nullptr;
             check(sprov_bundle_store_open(cstr(dir), create ? SPROV_BUNDLE_STORE_CREATE : 0, &s));
             return BundleStore{std::shared_ptr<sprov_bundle_store>(s, sprov_bundle_store_free)};
           }),
           py::arg("dir") = py::none(), py::kw_only(), py::arg("create") = false,
           "Opens the store at `dir` (None: $STACKPROV_STORE, else $XDG_DATA_HOME/stackprov/store, else\n"
           "~/.local/share/stackprov/store); create=True makes it when missing.")
      .def_static("default_dir", []() {
        char* out = nullptr;
        size_t n = 0;
        check(sprov_bundle_store_default_dir(&out, &n));
        return take(out, n);
      }, "The default store directory.")
      .def_property_readonly("dir", [](const BundleStore& s) { return std::string(sprov_bundle_store_dir(s.get())); })
      .def("put", [](BundleStore& s, const Bundle& b, bool index) {
        std::string d = b.data ? *b.data : std::string();
        char digest[SPROV_DIGEST_STRLEN] = {};
        py::gil_scoped_release nogil;
        if (!b.data) d = read_file(b.path);
        check(index ? sprov_bundle_store_put(s.get(), d.data(), d.size(), digest, sizeof(digest))
                    : sprov_bundle_store_put_blob(s.get(), d.data(), d.size(), digest, sizeof(digest)));
        return std::string(digest);
      }, py::arg("bundle"), py::kw_only(), py::arg("index") = true,
         "Stores a Bundle; returns its digest. index=True (an explicit act of the store's user) makes the\n"
         "store serve its modules' identities from it; index=False stores it by content only (a bundle\n"
         "built from files you do not trust: found by digest, never by identity).")
      .def("put", [](BundleStore& s, py::bytes data, bool index) {
        std::string d = data;
        char digest[SPROV_DIGEST_STRLEN] = {};
        py::gil_scoped_release nogil;
        check(index ? sprov_bundle_store_put(s.get(), d.data(), d.size(), digest, sizeof(digest))
                    : sprov_bundle_store_put_blob(s.get(), d.data(), d.size(), digest, sizeof(digest)));
        return std::string(digest);
      }, py::arg("data"), py::kw_only(), py::arg("index") = true,
         "Validates and stores a bundle's bytes (index as for put(Bundle)); returns its digest.")
      .def("put_file", [](BundleStore& s, const std::string& path) {
        char digest[SPROV_DIGEST_STRLEN] = {};
        py::gil_scoped_release nogil;
        check(sprov_bundle_store_put_file(s.get(), path.c_str(), digest, sizeof(digest)));
        return std::string(digest);
      }, py::arg("path"), "As put(), for a bundle file (indexed).")
      .def("promote", [](BundleStore& s, const std::string& digest) {
        py::gil_scoped_release nogil;
        check(sprov_bundle_store_promote(s.get(), digest.c_str()));
      }, py::arg("digest"), "Indexes the modules of a bundle stored by content (an explicit act).")
      .def("find", [](const BundleStore& s, const std::string& id, const std::string& kind) {
        py::gil_scoped_release nogil;
        return store_find(s, id, kind);
      }, py::arg("build_id"), py::kw_only(), py::arg("kind") = "elf-build-id",
         "The digest of the bundle the id map names for a module identity (hex); NotFoundError when none.")
      .def("blob_path", [](const BundleStore& s, const std::string& digest) { return store_blob_path(s, digest); },
           py::arg("digest"), "The path of a stored bundle's blob; NotFoundError when absent.")
      .def("get", [](const BundleStore& s, std::optional<std::string> digest, std::optional<std::string> build_id,
                     const std::string& kind) {
        std::string data;
        {
          py::gil_scoped_release nogil;
          data = read_file(store_blob_path(s, digest_or_find(s, digest, build_id, kind)));
        }
        return py::bytes(data);
      }, py::arg("digest") = py::none(), py::kw_only(), py::arg("build_id") = py::none(), py::arg("kind") = "elf-build-id",
         "A stored bundle's bytes, by digest ('sha256:<hex>' or 64 hex) or by a module's build_id=.")
      .def("open", [](const BundleStore& s, std::optional<std::string> digest, std::optional<std::string> build_id,
                      const std::string& kind) {
        py::gil_scoped_release nogil;
        const std::string d = digest_or_find(s, digest, build_id, kind);
        sprov_bundle* b = nullptr;
        check(sprov_bundle_open_digest(s.get(), d.c_str(), &b));
        return wrap_bundle(b, nullptr, store_blob_path(s, d));
      }, py::arg("digest") = py::none(), py::kw_only(), py::arg("build_id") = py::none(), py::arg("kind") = "elf-build-id",
         "Opens a stored bundle (by digest or a module's build_id=) as a Bundle.")
      .def("list", [](const BundleStore& s) {
        // The C ABI has no listing: the blobs are the files blobs/sha256/<hh>/<64 hex> (doc/bundles.md "Store").
        namespace fs = std::filesystem;
        std::vector<std::string> out;
        const fs::path root = fs::path(sprov_bundle_store_dir(s.get())) / "blobs" / "sha256";
        std::error_code ec;
        for (fs::directory_iterator d(root, ec), end; !ec && d != end; d.increment(ec)) {
          const std::string hh = d->path().filename().string();
          if (hh.size() != 2 || !d->is_directory()) continue;
          std::error_code ec2;
          for (fs::directory_iterator f(d->path(), ec2), e2; !ec2 && f != e2; f.increment(ec2)) {
            const std::string n = f->path().filename().string();
            if (n.size() == 64 && n.compare(0, 2, hh) == 0 && n.find_first_not_of("0123456789abcdef") == std::string::npos)
              out.push_back("sha256:" + n);
          }
        }
        std::sort(out.begin(), out.end());
        return out;
      }, "The digests of every stored bundle, sorted.")
      .def("__contains__", [](const BundleStore& s, const std::string& digest) {
        char* out = nullptr;
        size_t n = 0;
        const int rc = sprov_bundle_store_blob_path(s.get(), digest.c_str(), &out, &n);
        sprov_free(out);
        if (rc == SPROV_ERR_NOT_FOUND) return false;
        check(rc);
        return true;
      }, py::arg("digest"), "Whether the store holds the bundle `digest` (\"sha256:<hex>\"): `digest in store`.")
      .def("put_sidecar", [](BundleStore& s, const std::string& digest, const std::string& name, py::bytes data) {
        std::string d = data;
        py::gil_scoped_release nogil;
        check(sprov_bundle_store_put_sidecar(s.get(), digest.c_str(), name.c_str(), d.data(), d.size()));
      }, py::arg("digest"), py::arg("name"), py::arg("data"),
         "Stores a sidecar of a bundle (dsse.json, tlog-proof, checkpoint, or a name [a-z0-9.-]{1,32}).")
      .def("sidecar_path", [](const BundleStore& s, const std::string& digest, const std::string& name) {
        return lib_str([&](char** out, size_t* len) { return sprov_bundle_store_sidecar_path(s.get(), digest.c_str(), name.c_str(), out, len); });
      }, py::arg("digest"), py::arg("name"), "The path of a sidecar; NotFoundError when absent.")
      .def("sign", [](BundleStore& s, const std::string& digest, const std::string& key, const std::string& log_dir,
                      std::optional<std::string> log_key) {
        sprov_bundle_sign_opts o{};
        o.sz = sizeof(o);
        o.key_path = key.c_str();
        o.log_dir = log_dir.c_str();
        o.log_key = cstr(log_key);
        uint64_t index = 0;
        py::gil_scoped_release nogil;
        check(sprov_bundle_sign_check(&o));
        check(sprov_bundle_store_sign(s.get(), digest.c_str(), &o, &index));
        return index;
      }, py::arg("digest"), py::kw_only(), py::arg("key"), py::arg("log_dir"), py::arg("log_key") = py::none(),
         "Signs the stored bundle (DSSE envelope, appended to the transparency log `log_dir`, whose\n"
         "checkpoint log_key (default key) signs) and stores the sidecars; returns the log index.\n"
         "Keys that cannot sign raise before the store or the log changes.")
      .def("fsck", [](const BundleStore& s) {
        char* out = nullptr;
        size_t n = 0, errors = 0;
        {
          py::gil_scoped_release nogil;
          check(sprov_bundle_store_fsck(s.get(), &out, &n, &errors));
        }
        return std::make_pair(take(out, n), errors);
      }, "Checks the whole store: (report, number of errors); report lines as `stackprov bundle fsck`.");
  closable(store_cls, "Closes the store now (also done by the GC).");
  // Bound once Store is registered, so that its signature names stackprov.Store, not the C++ type.
  py::reinterpret_borrow<py::class_<TraceStore>>(m.attr("TraceStore"))
      .def("export_bundle", [](TraceStore& t, const std::string& digest, const BundleStore& bs) {
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        check(sprov_trace_store_export_bundle(t.get(), digest.c_str(), bs.get()));
      }, py::arg("digest"), py::arg("bundle_store"),
         "Copies the trace store's bundle `digest` (and its signature sidecars) into a bundle Store.");
}

}  // namespace stackprov_py
