// SPDX-License-Identifier: Apache-2.0
// Errors and string helpers (common.hpp), and init_errors: the exception translator, strerror, error_codes.
#include "common.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "../cli/utf8.hpp"  // header-only: the CLI's UTF-8 check

namespace stackprov_py {

[[noreturn]] void fail(int rc) {
  const char* msg = sprov_last_error_message();
  if (msg == nullptr || *msg == '\0') msg = sprov_strerror(rc);
  throw CallError{rc, msg};
}

[[noreturn]] void fail_arg(const std::string& message) {
  throw CallError{SPROV_ERR_INVALID_ARG, message};
}

std::string hex(const std::string& raw) { return py::bytes(raw).attr("hex")().cast<std::string>(); }

std::string str(const char* s) {
  if (s == nullptr) return "";
  const std::string_view v(s);
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size();) {
    if (const size_t n = stackprov_cli::utf8_sequence(v, i); n != 0) {
      out.append(v.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      i++;
    }
  }
  return out;
}

std::string take(char* p, size_t n) {
  std::string s(p ? p : "", p ? n : 0);
  sprov_free(p);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CallError{-(errno ? errno : EIO), "cannot read '" + path + "': " + std::strerror(errno ? errno : EIO)};
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

void init_errors(py::module_& m) {
  // C errors -> stackprov._errors.from_code(code, message): the Error subclass instance.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CallError& e) {
      py::object exc = py::module_::import("stackprov._errors").attr("from_code")(e.code, e.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  m.def("_file_write", [](const std::string& path, py::bytes data, unsigned mode) {
    const std::string b = data;
    check(sprov_file_write(path.c_str(), b.data(), b.size(), mode));
  }, py::arg("path"), py::arg("data"), py::arg("mode") = 0644,
        "Writes FILE whole or not at all through the library (sprov_file_write: an unpredictable "
        "temporary in its directory, then rename); for the python -m commands' output files.");
  m.def("strerror", [](int code) { return std::string(sprov_strerror(code)); },
        "The library's message for an error code.");
  m.def("error_codes", []() {
    std::vector<std::pair<std::string, int>> v;
#define SPROV_X_PAIR(name, value, msg) v.emplace_back(#name, value);
    SPROV_ERRORS(SPROV_X_PAIR)
#undef SPROV_X_PAIR
    return v;
  }, "[(name, code)] of the library's own error codes (errors.h).");
}

}  // namespace stackprov_py
