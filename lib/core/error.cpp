// SPDX-License-Identifier: Apache-2.0
// Error messages from the X-macro, printf-style error construction, the thread-local last error.
#include "core/error.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace stackprov {

Error make_error(int code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return Error{code, std::string(buf)};
}

const char* error_message(int code) {
  switch (code) {
    case 0:
      return "success";
#define SPROV_X_CASE(name, value, msg) \
  case value:                          \
    return msg;
      SPROV_ERRORS(SPROV_X_CASE)
#undef SPROV_X_CASE
    default:
      break;
  }
  if (code < 0 && code > -4000) return strerror(-code);
  return "unknown error";
}

namespace {
thread_local int tl_code = 0;
thread_local std::string tl_message;
}  // namespace

void set_last_error(const Error& err) {
  tl_code = err.code;
  tl_message = err.message.empty() ? std::string(error_message(err.code))
                                   : std::string(error_message(err.code)) + ": " + err.message;
}

int last_error_code() { return tl_code; }
const char* last_error_message() { return tl_message.c_str(); }

}  // namespace stackprov
