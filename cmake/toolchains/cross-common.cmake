# SPDX-License-Identifier: Apache-2.0
# Shared body of the cross toolchain files: the caller sets CMAKE_SYSTEM_PROCESSOR,
# STACKPROV_CROSS_TRIPLE (Debian triple) and STACKPROV_CROSS_QEMU (qemu-user binary). The
# library's dependencies come from a private sysroot (STACKPROV_CROSS_SYSROOT, filled by
# fetch-sysroot.sh); tests run under qemu through CMAKE_CROSSCOMPILING_EMULATOR (binfmt_misc
# is not assumed).
set(CMAKE_SYSTEM_NAME Linux)
# C (the fixtures: what the target's own compiler emits, its CFI included) with the Debian cross GCC.
# C++ (the library and the unit tests) with clang-14 for the same target, linking the cross GCC's
# libstdc++: at -O0 its front end costs 55 % of the cross g++'s CPU (an arm64 library unity TU: 4.96 against
# 9.05 CPU-s), and CI builds two of these (doc/ci-plan.md C18). STACKPROV_CROSS_CXX=gcc keeps g++.
set(CMAKE_C_COMPILER ${STACKPROV_CROSS_TRIPLE}-gcc)
if(NOT STACKPROV_CROSS_CXX)
  set(STACKPROV_CROSS_CXX "$ENV{STACKPROV_CROSS_CXX}")
endif()
if(STACKPROV_CROSS_CXX STREQUAL "gcc")
  set(CMAKE_CXX_COMPILER ${STACKPROV_CROSS_TRIPLE}-g++)
else()
  set(CMAKE_CXX_COMPILER clang++-14)
  set(CMAKE_CXX_COMPILER_TARGET ${STACKPROV_CROSS_TRIPLE})
  # mips32 has no 8-byte lock-free atomics: clang warns where g++ silently calls libatomic (-latomic,
  # the targets' CMake files), as for the perf ring's 64-bit data_head (lib/perf/recorder.cpp).
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^mips")
    set(CMAKE_CXX_FLAGS_INIT "-Wno-atomic-alignment")
  endif()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES STACKPROV_CROSS_CXX)
if(NOT STACKPROV_CROSS_SYSROOT)
  set(STACKPROV_CROSS_SYSROOT "$ENV{STACKPROV_CROSS_SYSROOT}")
endif()
set(STACKPROV_CROSS_SYSROOT "${STACKPROV_CROSS_SYSROOT}" CACHE PATH "unpacked target -dev packages")
# try_compile re-reads this file in the same process: pass the sysroot on, so that the
# pkg-config environment below is not reset to an empty sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES STACKPROV_CROSS_SYSROOT)
set(_libdirs "${STACKPROV_CROSS_SYSROOT}/usr/lib/${STACKPROV_CROSS_TRIPLE};${STACKPROV_CROSS_SYSROOT}/lib/${STACKPROV_CROSS_TRIPLE}")
set(CMAKE_FIND_ROOT_PATH /usr/${STACKPROV_CROSS_TRIPLE} "${STACKPROV_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
# Headers: the target's first; Catch2 (header-only) and other arch-independent headers may
# come from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE ${STACKPROV_CROSS_TRIPLE})
set(ENV{PKG_CONFIG_LIBDIR} "${STACKPROV_CROSS_SYSROOT}/usr/lib/${STACKPROV_CROSS_TRIPLE}/pkgconfig:${STACKPROV_CROSS_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${STACKPROV_CROSS_SYSROOT}")
set(ENV{PKG_CONFIG_PATH} "")
set(_rpl "")
foreach(d ${_libdirs})
  string(APPEND _rpl " -Wl,-rpath-link,${d}")
endforeach()
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_rpl}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_rpl}")
string(REPLACE ";" ":" _ldpath "${_libdirs}")
set(CMAKE_CROSSCOMPILING_EMULATOR ${STACKPROV_CROSS_QEMU};-L;/usr/${STACKPROV_CROSS_TRIPLE};-E;LD_LIBRARY_PATH=${_ldpath})
