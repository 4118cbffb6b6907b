# SPDX-License-Identifier: Apache-2.0
# Tests of the win64 build (make test-cross ARCH=win64; included by tests/CMakeLists.txt, so that paths
# are those of tests/), each run under wine by tests/win64/run_wine.py (tests/lib/wine.py: a prefix
# under the build directory and a persistent wineserver). Only what the win64 library holds and what
# runs inside a Windows process: no test that runs host tools (cc, readelf, gdb) at run time (but
# win64_link_lld, last, which checks a script of the build itself).
include(${CMAKE_CURRENT_SOURCE_DIR}/cmake/require_program.cmake)
set(WIN64_RUN /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/win64/run_wine.py ${CMAKE_BINARY_DIR})

# Catch2 (header-only, the host's) through a private folder: never the host's /usr/include on the
# cross compiler's path.
find_path(CATCH2_INCLUDE_DIR catch2/catch.hpp PATHS /usr/include NO_CMAKE_FIND_ROOT_PATH NO_DEFAULT_PATH REQUIRED)
set(CATCH2_USE_INCLUDE_DIR ${CMAKE_BINARY_DIR}/catch2-include)
file(MAKE_DIRECTORY ${CATCH2_USE_INCLUDE_DIR})
file(CREATE_LINK ${CATCH2_INCLUDE_DIR}/catch2 ${CATCH2_USE_INCLUDE_DIR}/catch2 SYMBOLIC)
add_library(catch2_main STATIC catch_main.cpp)
target_compile_options(catch2_main PRIVATE -O0)
target_include_directories(catch2_main PUBLIC ${CATCH2_USE_INCLUDE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})

# unit_<layer> from the test files of the layer that build and run on Windows. Left out: tests of
# files outside the win64 library (address_space, raw_unwind, jit_into), ELF assembly (same_value_ra_test), tests that run host tools
# at run time (signals_test: cc -E; readelf_frames.hpp users), tests through the C ABI (determinism_test, table_lru_test: lib/capi is not in the win64 build) or need POSIX calls mingw lacks
# (mkdtemp, mmap, fork: atomic_file, mapped_file, open_file, module_map, module_cache).
set(WIN64_UNIT_core context_test leb128_test)
set(WIN64_UNIT_pe unwind_info_hostile_test unwind_info_readobj_test)
set(WIN64_UNIT_unwind bundle_module_test compiled_rows_bounds_test rule_test)
set(WIN64_UNIT_memory snapshot_test)
foreach(layer core pe unwind memory)
  set(srcs "")
  foreach(t ${WIN64_UNIT_${layer}})
    list(APPEND srcs ${CMAKE_CURRENT_SOURCE_DIR}/unit/${layer}/${t}.cpp)
  endforeach()
  if(layer STREQUAL "memory")  # Windows-only cases: not under tests/unit/, which the Linux build globs
    list(APPEND srcs ${CMAKE_CURRENT_SOURCE_DIR}/win64/windows_capture_test.cpp)
  endif()
  add_executable(unit_${layer} ${srcs})
  # One TU per layer, as tests/CMakeLists.txt builds them.
  set_target_properties(unit_${layer} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  target_link_libraries(unit_${layer} PRIVATE catch2_main stackprov_internal)
  target_compile_definitions(unit_${layer} PRIVATE STACKPROV_TEST_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME unit_${layer} COMMAND ${WIN64_RUN} $<TARGET_FILE:unit_${layer}>)
  set_tests_properties(unit_${layer} PROPERTIES TIMEOUT 300)
endforeach()
# unit_pe's fixtures: clang-14 and lld-link-14 on the host, read by the test under wine through
# wine's Z: drive (the host's root).
include(${CMAKE_CURRENT_SOURCE_DIR}/unit/pe/fixtures.cmake)

# The capture path: parked_threads.exe walks its own parked threads (RtlVirtualUnwind), capture_walk.exe
# captures it from another process (ReadProcessMemory) and walks the snapshots with our unwinder.
add_executable(parked_threads win64/parked_threads.c)
target_compile_options(parked_threads PRIVATE -O2)
add_executable(capture_walk win64/capture_walk.cpp)
target_link_libraries(capture_walk PRIVATE stackprov_internal)
add_test(NAME win64_capture
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/win64/capture_test.py --build-dir ${CMAKE_BINARY_DIR}
    --fixture $<TARGET_FILE:parked_threads> --walker $<TARGET_FILE:capture_walk>)
set_tests_properties(win64_capture PROPERTIES TIMEOUT 120)

# The link wrapper of this build when clang compiles its C++ (cmake/toolchains/mingw-link.sh,
# doc/ci-plan.md C21, C24): a host-side check of the build's own tooling, no wine.
add_test(NAME win64_link_lld
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/win64/link_lld_test.py
    ${CMAKE_SOURCE_DIR}/cmake/toolchains/mingw-link.sh)
set_tests_properties(win64_link_lld PROPERTIES TIMEOUT 30)
