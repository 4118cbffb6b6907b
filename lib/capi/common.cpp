// SPDX-License-Identifier: Apache-2.0
// C ABI: version, error strings, last error, enum names, sprov_free.
#include <cstdlib>

#include <cstring>

#include "capi/internal.hpp"

using namespace stackprov;

namespace stackprov::capi {

const char* stop_reason_name(int reason) noexcept {
  switch (reason) {
    case SPROV_STOP_END_OF_STACK: return "end_of_stack";
    case SPROV_STOP_NO_UNWIND_INFO: return "no_unwind_info";
    case SPROV_STOP_MEMORY_UNREADABLE: return "memory_unreadable";
    case SPROV_STOP_SP_NOT_ADVANCING: return "sp_not_advancing";
    case SPROV_STOP_MAX_FRAMES: return "max_frames";
    case SPROV_STOP_BAD_CFI: return "bad_cfi";
    case SPROV_STOP_INVALID_PC: return "invalid_pc";
    case SPROV_STOP_ARCH_MISMATCH: return "arch_mismatch";
    case SPROV_STOP_COROUTINE_ENTRY: return "coroutine_entry";
    default: return "none";
  }
}

int give_string(const std::string& s, char** out, size_t* out_len) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return fail(Error{SPROV_ERR_NOMEM, "allocation failed"});
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  *out = p;
  if (out_len) *out_len = s.size();
  return 0;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API const char* sprov_version(void) { return SPROV_VERSION_STRING; }
SPROV_API uint32_t sprov_version_number(void) { return SPROV_VERSION_NUMBER; }
SPROV_API const char* sprov_strerror(int err) { return error_message(err); }
SPROV_API int sprov_last_error(void) { return last_error_code(); }
SPROV_API const char* sprov_last_error_message(void) { return last_error_message(); }
SPROV_API void sprov_free(void* p) { std::free(p); }
SPROV_API int sprov_resolver_gives_lines(int resolver) { return capi::resolver_gives_lines(resolver) ? 1 : 0; }

SPROV_API const char* sprov_method_name(int method) { return pipeline::method_name(method); }

SPROV_API int sprov_method_rung(int method) {
  switch (method) {
    case SPROV_METHOD_CONTEXT: return SPROV_RUNG_CONTEXT;
    case SPROV_METHOD_CFI_EH_FRAME:
    case SPROV_METHOD_CFI_DEBUG_FRAME:
    case SPROV_METHOD_CFI_BUNDLE:
    case SPROV_METHOD_CFI_PDATA:
    case SPROV_METHOD_COMPACT_UNWIND:
    case SPROV_METHOD_UNWIND_TABLE: return SPROV_RUNG_TABLE;
    case SPROV_METHOD_SIGNAL: return SPROV_RUNG_SIGNAL;
    case SPROV_METHOD_RUNTIME: return SPROV_RUNG_RUNTIME;
    case SPROV_METHOD_FRAME_POINTER: return SPROV_RUNG_FRAME_POINTER;
    case SPROV_METHOD_PROLOGUE:
    case SPROV_METHOD_BAD_PC_RETURN:
    case SPROV_METHOD_SCAN: return SPROV_RUNG_HEURISTIC;
    case SPROV_METHOD_CALLCHAIN:
    case SPROV_METHOD_TRAMPOLINE: return SPROV_RUNG_EXTERNAL;
    case SPROV_METHOD_TAIL_CALL: return SPROV_RUNG_INFERRED;
    case SPROV_METHOD_ASYNC_BOUNDARY: return SPROV_RUNG_EXTERNAL;
    case SPROV_METHOD_KERNEL_STACK: return SPROV_RUNG_EXTERNAL;
    default: return SPROV_RUNG_NONE;
  }
}

SPROV_API const char* sprov_rung_name(int rung) {
  switch (rung) {
    case SPROV_RUNG_CONTEXT: return "context";
    case SPROV_RUNG_TABLE: return "table";
    case SPROV_RUNG_SIGNAL: return "signal";
    case SPROV_RUNG_RUNTIME: return "runtime";
    case SPROV_RUNG_FRAME_POINTER: return "frame_pointer";
    case SPROV_RUNG_HEURISTIC: return "heuristic";
    case SPROV_RUNG_EXTERNAL: return "external";
    case SPROV_RUNG_INFERRED: return "inferred";
    default: return "none";
  }
}

SPROV_API const char* sprov_stop_reason_name(int reason) { return stackprov::capi::stop_reason_name(reason); }

SPROV_API const char* sprov_arch_name(int arch) {
  return stackprov::capi::guard_value<const char*>("unknown", [&] { return stackprov::arch_name(static_cast<Arch>(arch)); });
}

SPROV_API const char* sprov_resolver_name(int resolver) { return pipeline::resolver_name(resolver); }

}  // extern "C"
