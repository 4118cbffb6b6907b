# SPDX-License-Identifier: Apache-2.0
# Cross build for 64-bit Windows with Debian's mingw-w64 (make cross ARCH=win64; cmake/win64.cmake
# says what the build holds). The -posix compilers: their libstdc++ has std::thread and std::mutex
# (winpthreads); the -win32 ones (Debian's default alternative) have neither. Programs are linked
# statically (libstdc++, libgcc, winpthreads): wine runs them without the mingw DLLs.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(STACKPROV_CROSS_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
