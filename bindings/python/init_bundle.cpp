// SPDX-License-Identifier: Apache-2.0
// Symbol bundles (include/stackprov/symbol_bundle.h): BundleModule and Bundle.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace stackprov_py {

Bundle wrap_bundle(sprov_bundle* raw, std::shared_ptr<const std::string> data, std::string path) {
  Bundle out{std::shared_ptr<sprov_bundle>(raw, sprov_bundle_free), "", std::move(data), std::move(path)};
  char digest[SPROV_DIGEST_STRLEN] = {};
  check(sprov_bundle_digest(raw, digest, sizeof(digest)));
  out.digest = digest;
  return out;
}

namespace {

/// A module of a bundle (sprov_bundle_module), copied out.
struct BundleModule {
  size_t index = 0;
  std::string id_kind, id, name, sha256_file, sha256_debug;
  uint64_t ranges = 0, return_pads = 0, unwind_rows = 0, debug_blob = 0;
};

std::vector<BundleModule> bundle_modules(const Bundle& b) {
  std::vector<BundleModule> out;
  const size_t n = sprov_bundle_module_count(b.b.get());
  for (size_t i = 0; i < n; i++) {
    sprov_bundle_module m{};
    m.sz = sizeof(m);
    check(sprov_bundle_module_info(b.b.get(), i, &m));
    BundleModule o;
    o.index = i;
    o.id_kind = str(sprov_bundle_id_kind_name(static_cast<int>(m.id_kind)));
    o.id = str(m.id_hex);
    o.name = str(m.name);
    o.sha256_file = str(m.sha256_file);
    o.sha256_debug = str(m.sha256_debug);
    o.ranges = m.range_count;
    o.return_pads = m.pad_count;
    o.unwind_rows = m.unwind_row_count;
    o.debug_blob = m.debug_blob_size;
    out.push_back(std::move(o));
  }
  return out;
}

/// The module a lookup is about: build_id= (ELF), module= (index), or the only one.
size_t pick_module(const Bundle& b, std::optional<size_t> module, const std::optional<std::string>& build_id) {
  const size_t n = sprov_bundle_module_count(b.b.get());
  if (module && build_id) fail_arg("give module= or build_id=, not both (build_id '" + *build_id + "')");
  if (build_id) {
    size_t idx = 0;
    check(sprov_bundle_find_module(b.b.get(), SPROV_BUNDLE_ID_ELF_BUILD_ID, build_id->c_str(), &idx));
    return idx;
  }
  if (module) {
    if (*module >= n)
      fail_arg("invalid module " + std::to_string(*module) + " (the bundle " + b.digest + " holds " + std::to_string(n) +
               " module(s))");
    return *module;
  }
  if (n != 1)
    fail_arg("the bundle " + b.digest + " holds " + std::to_string(n) + " modules: give module= or build_id=");
  return 0;
}

/// Progress of Bundle.build, forwarded to a Python callable (the GIL is taken for the call); an
/// exception it raises is kept and re-raised when the build returns.
struct BuildProgress {
  py::object fn;
  std::unique_ptr<py::error_already_set> err;
  static void report(void* p, size_t done, size_t count, uint64_t bytes_done, uint64_t bytes_total) {
    auto* self = static_cast<BuildProgress*>(p);
    py::gil_scoped_acquire gil;
    if (self->err) return;
    try {
      self->fn(done, count, bytes_done, bytes_total);
    } catch (py::error_already_set& e) {
      self->err = std::make_unique<py::error_already_set>(std::move(e));
    }
  }
};

Bundle build_bundle(const std::vector<std::string>& paths, const std::optional<std::vector<std::optional<std::string>>>& names,
                    const std::optional<std::vector<std::string>>& debug_dirs, bool include_debug, py::object progress) {
  if (paths.empty()) fail_arg("Bundle.build needs at least one module file (paths is empty)");
  if (names && names->size() != paths.size())
    fail_arg("names has " + std::to_string(names->size()) + " entries for " + std::to_string(paths.size()) +
             " path(s): give one name (or None) per path");
  std::vector<const char*> pp, np, dp;
  for (const auto& p : paths) pp.push_back(p.c_str());
  if (names)
    for (const auto& n : *names) np.push_back(cstr(n));
  if (debug_dirs)
    for (const auto& d : *debug_dirs) dp.push_back(d.c_str());
  BuildProgress prog{progress, nullptr};
  sprov_bundle_build_opts o{};
  o.sz = sizeof(o);
  o.names = names ? np.data() : nullptr;
  o.debug_dirs = debug_dirs ? dp.data() : nullptr;
  o.debug_dir_count = dp.size();
  o.flags = include_debug ? SPROV_BUNDLE_INCLUDE_DEBUG : 0;
  o.progress = progress.is_none() ? nullptr : &BuildProgress::report;
  o.progress_ctx = &prog;
  void* out = nullptr;
  size_t len = 0;
  int rc = 0;
  std::string msg;
  {
    py::gil_scoped_release nogil;
    rc = sprov_bundle_build(pp.data(), pp.size(), &o, &out, &len, nullptr, 0);
    if (rc != 0) msg = sprov_last_error_message() ? sprov_last_error_message() : "";
  }
  if (prog.err) {
    sprov_free(out);
    throw *prog.err;
  }
  if (rc != 0) throw CallError{rc, msg.empty() ? sprov_strerror(rc) : msg};
  auto data = std::make_shared<const std::string>(static_cast<const char*>(out), len);
  sprov_free(out);
  py::gil_scoped_release nogil;
  sprov_bundle* b = nullptr;
  check(sprov_bundle_open_buf(data->data(), data->size(), &b));
  return wrap_bundle(b, data, "");
}

}  // namespace

void init_bundle(py::module_& m) {
  py::class_<BundleModule>(m, "BundleModule", "One module of a symbol bundle (sprov_bundle_module).")
      .def_readonly("index", &BundleModule::index)
      .def_readonly("id_kind", &BundleModule::id_kind, "elf-build-id, pdb-guid-age, macho-uuid or pe-code-id")
      .def_readonly("id", &BundleModule::id, "the identity, lower-case hex (ELF: the GNU build-id)")
      .def_readonly("name", &BundleModule::name)
      .def_readonly("sha256_file", &BundleModule::sha256_file, "64 hex digits (zeros: unknown)")
      .def_readonly("sha256_debug", &BundleModule::sha256_debug)
      .def_readonly("ranges", &BundleModule::ranges)
      .def_readonly("return_pads", &BundleModule::return_pads)
      .def_readonly("unwind_rows", &BundleModule::unwind_rows)
      .def_readonly("debug_blob", &BundleModule::debug_blob, "bytes of the embedded debug file (0: none)")
      .def("__repr__", [](const BundleModule& b) { return "BundleModule(" + b.id_kind + " " + b.id + ", name='" + b.name + "')"; });

  py::class_<Bundle>(m, "Bundle",
      "A symbol bundle (doc/bundles.md): one file per set of modules, named by the sha256 of its bytes.")
      .def_static("build", &build_bundle, py::arg("paths"), py::kw_only(), py::arg("names") = py::none(),
                  py::arg("debug_dirs") = py::none(), py::arg("include_debug") = false, py::arg("progress") = py::none(),
                  "Builds one bundle with a module for each ELF file of `paths` (each needs a GNU build-id;\n"
                  "deterministic: equal inputs give equal bytes, as `stackprov bundle build`). names: one module\n"
                  "name (or None: the basename) per path; debug_dirs: where separate debug files are searched\n"
                  "(None: /usr/lib/debug); include_debug: embed each module's debug file; progress: a callable\n"
                  "(modules_done, module_count, bytes_done, bytes_total). Runs without the GIL.")
      .def_static("open", [](const std::string& path) {
        py::gil_scoped_release nogil;
        sprov_bundle* b = nullptr;
        check(sprov_bundle_open_file(path.c_str(), &b));
        return wrap_bundle(b, nullptr, path);
      }, py::arg("path"), "Maps the bundle file at `path` (validated).")
      .def_static("from_bytes", [](py::bytes data) {
        auto d = std::make_shared<const std::string>(data);
        py::gil_scoped_release nogil;
        sprov_bundle* b = nullptr;
        check(sprov_bundle_open_buf(d->data(), d->size(), &b));
        return wrap_bundle(b, d, "");
      }, py::arg("data"), "Opens a bundle from its bytes (validated).")
      .def_readonly("digest", &Bundle::digest, "'sha256:<hex>' of the bundle's bytes")
      .def_property_readonly("size", [](const Bundle& b) { return sprov_bundle_size(b.b.get()); })
      .def_property_readonly("modules", &bundle_modules, "the modules, in the bundle's order")
      .def("to_bytes", [](const Bundle& b) {
        if (b.data) return py::bytes(*b.data);
        std::string s;
        {
          py::gil_scoped_release nogil;
          s = read_file(b.path);
        }
        return py::bytes(s);
      }, "The bundle's bytes (their sha256 is `digest`).")
      .def("save", [](const Bundle& b, const std::string& path) {
        std::string s = b.data ? *b.data : std::string();
        py::gil_scoped_release nogil;
        if (!b.data) s = read_file(b.path);
        // temp (O_EXCL) + fsync + rename, as every stackprov writer: readers never see a partial
        // file and a name planted beside `path` is never opened.
        check(sprov_file_write(path.c_str(), s.data(), s.size(), 0644));
      }, py::arg("path"), "Writes the bundle's bytes to `path` (temp file + fsync + rename; mode 0644).")
      .def("lookup", [](const Bundle& b, uint64_t address, std::optional<size_t> module, std::optional<std::string> build_id) {
        const size_t idx = pick_module(b, module, build_id);
        sprov_bundle_chain* chain = nullptr;
        check(sprov_bundle_lookup(b.b.get(), idx, address, &chain));
        std::vector<InlineFrame> out;
        for (size_t i = 0; i < chain->count; i++) {
          InlineFrame f;
          f.function = f.linkage_name = str(chain->frames[i].function);
          f.file = str(chain->frames[i].file);
          f.line = chain->frames[i].line;
          f.column = chain->frames[i].column;
          f.resolver = "bundle";
          f.source = b.digest;
          out.push_back(std::move(f));
        }
        sprov_free(chain);
        return out;
      }, py::arg("address"), py::kw_only(), py::arg("module") = py::none(), py::arg("build_id") = py::none(),
         "The inline chain at a module-relative (link-time) address, innermost first (function: the\n"
         "linkage name); [] when no range covers it. module=/build_id= pick the module (needed when\n"
         "the bundle holds several), as `stackprov bundle lookup`.")
      .def("unwind_row", [](const Bundle& b, uint64_t address, std::optional<size_t> module, std::optional<std::string> build_id) {
        const size_t idx = pick_module(b, module, build_id);
        return lib_str([&](char** out, size_t* len) { return sprov_bundle_unwind_row_text(b.b.get(), idx, address, out, len); });
      }, py::arg("address"), py::kw_only(), py::arg("module") = py::none(), py::arg("build_id") = py::none(),
         "The unwind row covering `address` as text (llvm-dwarfdump notation), or end-of-stack, full, none.")
      .def("export", [](const Bundle& b, const std::string& format, std::optional<size_t> module,
                        std::optional<std::string> build_id) {
        int fmt = 0;
        if (format == "symbol-index-json") fmt = SPROV_BUNDLE_EXPORT_SYMBOL_INDEX_JSON;
        else if (format == "symbfile") fmt = SPROV_BUNDLE_EXPORT_SYMBFILE;
        else fail_arg("invalid format '" + format + "' (expected symbol-index-json or symbfile)");
        std::optional<size_t> idx;
        if (module || build_id) idx = pick_module(b, module, build_id);
        void* out = nullptr;
        size_t n = 0;
        {
          py::gil_scoped_release nogil;
          check(sprov_bundle_export(b.b.get(), fmt, idx ? &*idx : nullptr, &out, &n));
        }
        py::bytes r(static_cast<const char*>(out), n);
        sprov_free(out);
        return r;
      }, py::arg("format"), py::kw_only(), py::arg("module") = py::none(), py::arg("build_id") = py::none(),
         "The bundle's records as symbol-index-json (every module, or one) or symbfile (one module).")
      .def("__repr__", [](const Bundle& b) {
        return "Bundle(" + b.digest + ", " + std::to_string(sprov_bundle_module_count(b.b.get())) + " module(s))";
      });
}

}  // namespace stackprov_py
