# SPDX-License-Identifier: Apache-2.0
# The win64 build (make cross ARCH=win64: mingw-w64, cmake/toolchains/x86_64-w64-mingw32.cmake; issue 33,
# doc/windows.md "The win64 build"). Debian 12 has almost no mingw libraries (no libelf, libdw, zstd,
# lzma, libsodium, mbedTLS, libiberty), so this build holds the part of the library that needs none
# of them: core, the object-format registry with PE (no ELF, no Mach-O), PDB, minidumps, the unwinder
# with its .pdata source and its DWARF CFI machinery, the x86_64/arm64/mips32 arch code, snapshots,
# minidump and live Windows captures (ReadProcessMemory), the bundle reader. Dependencies: the mingw-w64
# CRT and Win32 import libraries (psapi), libstdc++ and winpthreads of g++-mingw-w64-x86-64 (the
# -posix variant), xxhash.h (header-only, from the host's libxxhash-dev, through a private include
# folder). Tests run under wine (tests/lib/wine.py: a prefix under the build directory).
set(STACKPROV_WIN64 ON)
add_compile_options(-Wall -Wextra -Wno-unused-parameter)
# -Werror in CI as in the Linux builds (.ci/run sets STACKPROV_WERROR=1; CMakeLists.txt).
if("$ENV{STACKPROV_WERROR}")
  add_compile_options(-Werror)
endif()
# Windows 8 APIs (GetCurrentThreadStackLimits in the fixture); 64-bit off_t for files over 2 GiB.
# mingw's C99 printf family (%zu, %lld; core/error.hpp STACKPROV_PRINTF).
add_compile_definitions(_WIN32_WINNT=0x0602 _FILE_OFFSET_BITS=64 WIN32_LEAN_AND_MEAN NOMINMAX __USE_MINGW_ANSI_STDIO=1)

# xxhash.h without the host's /usr/include on the cross compiler's path (its libc headers would
# shadow mingw's): a private folder holding only a link to it.
find_file(STACKPROV_XXHASH_H xxhash.h PATHS /usr/include NO_CMAKE_FIND_ROOT_PATH NO_DEFAULT_PATH REQUIRED)
set(STACKPROV_WIN64_INC ${CMAKE_BINARY_DIR}/host-include)
file(MAKE_DIRECTORY ${STACKPROV_WIN64_INC})
file(CREATE_LINK ${STACKPROV_XXHASH_H} ${STACKPROV_WIN64_INC}/xxhash.h SYMBOLIC)

set(_lib ${CMAKE_SOURCE_DIR}/lib)
file(GLOB STACKPROV_SOURCES CONFIGURE_DEPENDS
  ${_lib}/core/*.cpp ${_lib}/object/*.cpp ${_lib}/pe/*.cpp ${_lib}/pdb/*.cpp ${_lib}/minidump/*.cpp
  ${_lib}/macho/*.cpp ${_lib}/unwind/*.cpp ${_lib}/dwarf/*.cpp ${CMAKE_SOURCE_DIR}/arch/*/*.cpp)
list(APPEND STACKPROV_SOURCES
  ${_lib}/memory/snapshot.cpp ${_lib}/memory/minidump_capture.cpp ${_lib}/memory/windows_capture_win.cpp
  ${_lib}/bundle/reader.cpp ${_lib}/bundle/writer.cpp ${_lib}/bundle/entropy.cpp ${_lib}/bundle/rangecoder.cpp
  ${_lib}/symbolize/gopclntab.cpp)
# Linux-only files: /proc and openat2 (open_file.cpp: open_file_win.cpp instead), /proc/self/maps
# (module_map.cpp), temporary files and flock (atomic_file.cpp), the perf module tracker's address
# spaces (address_space.cpp, raw_unwind.cpp), the SysV
# assembly that captures the calling thread (arch/x86_64/capture.cpp: sprov_snapshot_capture_self).
list(FILTER STACKPROV_SOURCES EXCLUDE REGEX
  "/arch/x86_64/capture\\.cpp$|/lib/core/(open_file|module_map|atomic_file)\\.cpp$|/lib/unwind/(address_space|raw_unwind)\\.cpp$")

add_library(stackprov STATIC ${STACKPROV_SOURCES})
option(STACKPROV_UNITY "compile the library as one unity translation unit per lib/ folder" OFF)
if(STACKPROV_UNITY)  # make cross turns it on (cmake/unity.cmake)
  include(${CMAKE_SOURCE_DIR}/cmake/unity.cmake)
  stackprov_unity(stackprov ${STACKPROV_SOURCES})
endif()
target_include_directories(stackprov
  PUBLIC ${CMAKE_SOURCE_DIR}/include
  PRIVATE ${CMAKE_SOURCE_DIR} ${_lib} ${STACKPROV_WIN64_INC})
target_compile_definitions(stackprov PRIVATE XXH_INLINE_ALL STACKPROV_BUILDING=1)
target_link_libraries(stackprov PUBLIC psapi)

add_library(stackprov_internal INTERFACE)
target_include_directories(stackprov_internal INTERFACE
  ${CMAKE_SOURCE_DIR} ${_lib} ${CMAKE_SOURCE_DIR}/include ${STACKPROV_WIN64_INC})
target_compile_definitions(stackprov_internal INTERFACE XXH_INLINE_ALL)
target_link_libraries(stackprov_internal INTERFACE stackprov)

if(STACKPROV_BUILD_TESTS)
  enable_testing()
  add_subdirectory(tests)  # tests/CMakeLists.txt hands over to tests/win64/tests.cmake
endif()
