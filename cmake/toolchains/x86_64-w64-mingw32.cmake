# SPDX-License-Identifier: Apache-2.0
# Cross build for 64-bit Windows with Debian's mingw-w64 (make cross ARCH=win64; cmake/win64.cmake
# says what the build holds). The -posix compilers: their libstdc++ has std::thread and std::mutex
# (winpthreads); the -win32 ones (Debian's default alternative) have neither. Programs are linked
# statically (libstdc++, libgcc, winpthreads): wine runs them without the mingw DLLs.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(STACKPROV_CROSS_TRIPLE x86_64-w64-mingw32)
# C (the fixtures: parked_threads.c, whose code and unwind info the capture test walks) with the mingw
# GCC. C++ (the library, the unit tests, capture_walk) with clang-14 for the same target against the
# mingw GCC's posix libstdc++, as the Linux cross builds do (cross-common.cmake, doc/ci-plan.md C21):
# STACKPROV_CROSS_CXX=gcc keeps the mingw g++.
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
if(NOT STACKPROV_CROSS_CXX)
  set(STACKPROV_CROSS_CXX "$ENV{STACKPROV_CROSS_CXX}")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES STACKPROV_CROSS_CXX)
if(STACKPROV_CROSS_CXX STREQUAL "gcc")
  set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
else()
  set(CMAKE_CXX_COMPILER clang++-14)
  set(CMAKE_CXX_COMPILER_TARGET x86_64-w64-mingw32)
  # Programs are linked by the mingw g++ (mingw-gxx-link.cmake says why).
  set(CMAKE_USER_MAKE_RULES_OVERRIDE_CXX ${CMAKE_CURRENT_LIST_DIR}/mingw-gxx-link.cmake)
  # Archives with LLVM's ar: GNU ar and ranlib take ~10 CPU-s each over a clang object of 23,000
  # COMDAT sections (catch_main.cpp), llvm-ar-14 0.1 (doc/ci-plan.md C21).
  set(CMAKE_AR llvm-ar-14)
  set(CMAKE_RANLIB llvm-ranlib-14)
endif()
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
