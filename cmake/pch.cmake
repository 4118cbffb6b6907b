# SPDX-License-Identifier: Apache-2.0
# A precompiled header for the library, in every build (doc/ci-plan.md C14, C25): the C++ standard headers
# that most of lib/ includes, parsed once per build instead of once per translation unit. Front ends
# are ~60 % of a library file's compile at -O3. Measured with ninja -j2 on the 2-core machine: one
# object per file 495 -> 443 CPU-s; with the unity groups of cmake/unity.cmake 360 -> 341.
# nlohmann/json.hpp is left out on purpose: in the header it made the .gch 105 MB and every file
# slower to start than it saved (530.7 -> 538.6 CPU-s, one object per file). A precompiled header
# changes no meaning: every file still includes what it uses (STACKPROV_PCH=OFF builds without it).
# At -O0 the front end is half of a unity TU's compile: the TSan build's library 151 -> 109 CPU-s,
# arm64's 129 -> 90 (C25, the same -j2 rebuild each way).
# lib/symbolize/demangle.cpp is compiled without it: libiberty.h declares basename() unlike glibc's
# <string.h> (which <cstring> brings in first).
function(stackprov_pch target)
  target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${CMAKE_SOURCE_DIR}/cmake/pch.hpp>")
  set_source_files_properties(${CMAKE_SOURCE_DIR}/lib/symbolize/demangle.cpp PROPERTIES
    SKIP_PRECOMPILE_HEADERS ON)
endfunction()
