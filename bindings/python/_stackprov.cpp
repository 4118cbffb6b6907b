// SPDX-License-Identifier: Apache-2.0
// Python extension `stackprov._stackprov`: pybind11 over the public C ABI only (include/stackprov/).
// Every call into the library runs with the GIL released; C handles are owned by shared_ptrs that
// free them when the last Python object (or a dependent handle) lets go. Errors become
// stackprov.Error subclasses (stackprov/_errors.py) carrying the C code and the library's message.
// The areas are bound in one file each (common.hpp lists them); this file only calls them.
#include "common.hpp"

PYBIND11_MODULE(_stackprov, m) {
  m.doc() = "stackprov C ABI binding (use the `stackprov` package)";
  m.attr("__version__") = std::string(sprov_version());
  m.attr("ABI_VERSION_NUMBER") = SPROV_VERSION_NUMBER;

  // The order the module has always been registered in: a signature that names a class not yet
  // registered shows its C++ name, so the order is part of the docstrings (TraceStore._replay).
  stackprov_py::init_errors(m);
  stackprov_py::init_stack(m);
  stackprov_py::init_trace_store(m);
  stackprov_py::init_default_contexts(m);
  stackprov_py::init_evidence(m);
  stackprov_py::init_replay_report(m);
  stackprov_py::init_bundle(m);
  stackprov_py::init_bundle_store(m);
  stackprov_py::init_perf(m);
}
