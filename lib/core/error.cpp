// SPDX-License-Identifier: Apache-2.0
// Error messages from the X-macro, printf-style error construction, the thread-local last error.
#include "core/error.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace stackprov {

std::string format_message_v(const char* fmt, va_list ap) {
  char small[512];
  va_list again;
  va_copy(again, ap);
  const int n = vsnprintf(small, sizeof small, fmt, ap);
  std::string out;
  if (n < 0) {
    out = fmt;  // an encoding error: the format itself still says what went wrong
  } else if (static_cast<size_t>(n) < sizeof small) {
    out.assign(small, static_cast<size_t>(n));
  } else {
    static constexpr char kCut[] = " [cut]";
    const size_t want = std::min(static_cast<size_t>(n), kMaxMessage);
    out.resize(want);
    vsnprintf(out.data(), want + 1, fmt, again);  // writes want bytes and the terminator std::string keeps
    if (static_cast<size_t>(n) > kMaxMessage) out.replace(want - (sizeof kCut - 1), sizeof kCut - 1, kCut);
  }
  va_end(again);
  return out;
}

std::string format_message(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = format_message_v(fmt, ap);
  va_end(ap);
  return s;
}

Error make_error(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Error e{code, format_message_v(fmt, ap)};
  va_end(ap);
  return e;
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
/// The code's own message when the full one could not be stored (allocation failed); else null.
thread_local const char* tl_fallback = nullptr;
}  // namespace

/// Declared in lib/capi/internal.hpp (the C ABI's guard() uses it): never throws; when the message
/// cannot be stored (allocation failure), the code's own message is kept.
void set_last_error(int code, const char* detail) noexcept;

void set_last_error(int code, const char* detail) noexcept {
  tl_code = code;
  try {
    tl_message.assign(error_message(code));
    if (detail != nullptr && *detail != '\0') tl_message.append(": ").append(detail);
    tl_fallback = nullptr;
  } catch (...) {
    tl_fallback = error_message(code);
  }
}

void set_last_error(const Error& err) { set_last_error(err.code, err.message.c_str()); }  // never throws

int last_error_code() { return tl_code; }
const char* last_error_message() { return tl_fallback != nullptr ? tl_fallback : tl_message.c_str(); }

}  // namespace stackprov
