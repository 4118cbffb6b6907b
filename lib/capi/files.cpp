// SPDX-License-Identifier: Apache-2.0
// C ABI: output files (sprov_file_write, sprov_output_file_*) over core/atomic_file; the bounds and the
// guard of the files the library maps (core/mapped_file).
#include "capi/internal.hpp"
#include "core/atomic_file.hpp"
#include "core/mapped_file.hpp"

using namespace stackprov;
using namespace stackprov::capi;

struct sprov_output_file {
  AtomicFile file;
};

namespace {
Error null_arg(const char* name) { return make_error(SPROV_ERR_INVALID_ARG, "%s is NULL", name); }
}  // namespace

extern "C" {

SPROV_API int sprov_file_write(const char* path, const void* data, size_t len, unsigned mode) {
  return guard([&] {
    if (!path) return fail(null_arg("path"));
    if (!data && len) return fail(null_arg("data"));
    auto st = write_file_atomic(path, std::string_view(static_cast<const char*>(data), len), mode ? mode : 0644);
    return st ? 0 : fail(st.error());
  });
}

SPROV_API int sprov_output_file_create(const char* path, unsigned mode, sprov_output_file** out) {
  return guard([&] {
    if (!path) return fail(null_arg("path"));
    if (!out) return fail(null_arg("out"));
    *out = nullptr;
    auto f = AtomicFile::create(path, mode ? mode : 0644);
    if (!f) return fail(f.error());
    *out = new sprov_output_file{std::move(f.value())};
    return 0;
  });
}

SPROV_API int sprov_output_file_fd(const sprov_output_file* f) {
  return guard_value(-1, [&] { return f ? f->file.fd() : -1; });
}

SPROV_API int sprov_output_file_commit(sprov_output_file* f) {
  return guard([&] {
    if (!f) return fail(null_arg("f"));
    auto st = f->file.commit();
    delete f;
    return st ? 0 : fail(st.error());
  });
}

SPROV_API void sprov_output_file_free(sprov_output_file* f) {
  guard([&] {
    delete f;
    return 0;
  });
}

SPROV_API void sprov_set_max_file_size(uint64_t bytes) {
  guard([&] {
    set_max_file_bytes(bytes);
    return 0;
  });
}
SPROV_API uint64_t sprov_max_file_size(void) { return guard_value<uint64_t>(0, [] { return max_file_bytes(); }); }

SPROV_API int sprov_set_file_guard(int g) {
  return guard([&] {
    if (g != SPROV_FILE_GUARD_SIGBUS && g != SPROV_FILE_GUARD_COPY)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "file guard %d: expected SPROV_FILE_GUARD_SIGBUS (0) or "
                                                    "SPROV_FILE_GUARD_COPY (1)", g));
    set_file_guard(g == SPROV_FILE_GUARD_COPY ? FileGuard::kCopy : FileGuard::kSigbus);
    return 0;
  });
}

}  // extern "C"
