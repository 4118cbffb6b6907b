# SPDX-License-Identifier: Apache-2.0
# Rules for clang-14 --target=x86_64-w64-mingw32 as the C++ compiler of the win64 build
# (x86_64-w64-mingw32.cmake), read by CMake after its platform files.
# The mingw g++'s own directory (Debian 12: /usr/lib/gcc/x86_64-w64-mingw32/12-posix).
execute_process(COMMAND x86_64-w64-mingw32-g++-posix -print-libgcc-file-name
  OUTPUT_VARIABLE _libgcc OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
get_filename_component(_gcc_lib "${_libgcc}" DIRECTORY)
if(NOT EXISTS "${_gcc_lib}/include/c++/x86_64-w64-mingw32/bits/c++config.h")
  message(FATAL_ERROR "no libstdc++ headers under ${_gcc_lib}/include/c++ (x86_64-w64-mingw32-g++-posix -print-libgcc-file-name: ${_libgcc})")
endif()
# Compiling: clang's MinGW driver does not take Debian's "12-posix" for a GCC version, so it finds
# neither the posix libstdc++'s headers nor, without --sysroot, keeps the host's /usr/include off the
# path. The rest is what the mingw g++ predefines and its libstdc++ was built for: type_info's
# operator== out of line (libstdc++'s tinfo.o defines it; clang's inline copy collides with it),
# emulated TLS (libstdc++'s thread_locals, e.g. std::call_once's, are __emutls_v.* objects), _REENTRANT.
set(CMAKE_CXX_COMPILE_OBJECT
  "<CMAKE_CXX_COMPILER> --sysroot=/usr/x86_64-w64-mingw32 -nostdinc++ -isystem ${_gcc_lib}/include/c++ -isystem ${_gcc_lib}/include/c++/x86_64-w64-mingw32 -isystem ${_gcc_lib}/include/c++/backward -femulated-tls -D__GXX_TYPEINFO_EQUALITY_INLINE=0 -D_REENTRANT=1 <DEFINES> <INCLUDES> <FLAGS> -o <OBJECT> -c <SOURCE>")
# Linking: the mingw g++ knows its libraries, start files and libstdc++'s dependencies (winpthreads);
# clang's driver finds none of them there. mingw-link.sh takes that g++'s linker command (-###) and
# runs it with ld.lld-14 instead of GNU ld (~50x less CPU a test executable; it says why).
set(CMAKE_CXX_LINK_EXECUTABLE
  "/bin/sh ${CMAKE_CURRENT_LIST_DIR}/mingw-link.sh x86_64-w64-mingw32-g++-posix <FLAGS> <CMAKE_CXX_LINK_FLAGS> <LINK_FLAGS> <OBJECTS> -o <TARGET> -Wl,--out-implib,<TARGET_IMPLIB> ${CMAKE_GNULD_IMAGE_VERSION} <LINK_LIBRARIES>")
unset(_gcc_lib)
unset(_libgcc)
