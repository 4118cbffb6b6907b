// SPDX-License-Identifier: Apache-2.0
// Error values inside the library: Error (code + message naming the offending value) and Result<T>.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "stackprov/errors.h"

// printf-style checking of the library's format strings: C99 formats (%zu, %lld) everywhere. mingw-w64's
// GCC takes "printf" as Microsoft's older format; the win64 build formats with mingw's C99 printf
// (__USE_MINGW_ANSI_STDIO, cmake/win64.cmake), which gnu_printf describes. clang (the win64 build's
// C++ compiler, doc/ci-plan.md C21) has no gnu_printf, and its "printf" for a MinGW target takes the
// C99 formats.
#if defined(__MINGW32__) && !defined(__clang__)
#define STACKPROV_PRINTF(fmt, first) __attribute__((format(gnu_printf, fmt, first)))
#else
#define STACKPROV_PRINTF(fmt, first) __attribute__((format(printf, fmt, first)))
#endif

namespace stackprov {

/// An error: a code (negative errno or SPROV_ERR_*) and a message that names
/// the offending value. Cheap to move; allocation only on the error path.
struct Error {
  int code = SPROV_ERR_INTERNAL;
  std::string message;
};

/// Builds an Error; the message is formatted like printf, whole (a message naming a long path keeps
/// its reason), up to kMaxMessage bytes.
Error make_error(int code, const char* fmt, ...) STACKPROV_PRINTF(2, 3);

/// Messages are cut at this many bytes (a value taken from hostile input may be that long), ending
/// in " [cut]".
inline constexpr size_t kMaxMessage = 64 * 1024;

/// printf into a std::string, whole up to kMaxMessage bytes (no fixed buffer cuts a long path).
std::string format_message(const char* fmt, ...) STACKPROV_PRINTF(1, 2);
std::string format_message_v(const char* fmt, va_list ap) STACKPROV_PRINTF(1, 0);

/// Result<T>: a value or an Error. No exceptions cross layer boundaries.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error err) : v_(std::move(err)) {}          // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

/// Result<void> equivalent.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error err) : err_(std::move(err)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status ok_status() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_{0, {}};
  bool ok_ = true;
};

/// Message for a code: own codes from the X-macro, negative errno via strerror.
const char* error_message(int code);

/// Thread-local last error (persists until the next failure on this thread).
void set_last_error(const Error& err);
int last_error_code();
const char* last_error_message();

}  // namespace stackprov
