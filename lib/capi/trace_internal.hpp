// SPDX-License-Identifier: Apache-2.0
// Shared by the trace C ABI shims: the store handle (string results: capi/internal.hpp give_string; the pipeline is lib/pipeline/trace.hpp).
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

