// SPDX-License-Identifier: Apache-2.0
// Shared by the trace C ABI shims: the store handle and string results (the pipeline is lib/pipeline/trace.hpp).
#pragma once

#include <memory>
#include <string>

#include "capi/internal.hpp"
#include "pipeline/trace.hpp"
#include "trace/store.hpp"

#include "stackprov/symbol_bundle.h"
#include "stackprov/trace.h"

struct sprov_trace_store {
  std::unique_ptr<stackprov::trace::Store> store;
  std::string url;  ///< password masked
};

namespace stackprov::capi {

/// A malloc'd copy of `s` for an out parameter (released with sprov_free); 0 or SPROV_ERR_NOMEM.
int give_string(const std::string& s, char** out, size_t* out_len);

}  // namespace stackprov::capi
