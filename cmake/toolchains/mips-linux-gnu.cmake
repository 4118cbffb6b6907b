# SPDX-License-Identifier: Apache-2.0
# Cross build for mips-linux-gnu with the Debian cross GCC (make cross ARCH=...). The library's
# dependencies come from a private sysroot (STACKPROV_CROSS_SYSROOT, filled by
# fetch-sysroot.sh); tests run under qemu-mips through CMAKE_CROSSCOMPILING_EMULATOR
# (binfmt_misc is not assumed).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR mips)
set(STACKPROV_CROSS_TRIPLE mips-linux-gnu)
set(CMAKE_C_COMPILER mips-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER mips-linux-gnu-g++)
if(NOT STACKPROV_CROSS_SYSROOT)
  set(STACKPROV_CROSS_SYSROOT "$ENV{STACKPROV_CROSS_SYSROOT}")
endif()
set(STACKPROV_CROSS_SYSROOT "${STACKPROV_CROSS_SYSROOT}" CACHE PATH "unpacked target -dev packages")
# try_compile re-reads this file in the same process: pass the sysroot on, so that the
# pkg-config environment below is not reset to an empty sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES STACKPROV_CROSS_SYSROOT)
set(_libdirs "${STACKPROV_CROSS_SYSROOT}/usr/lib/mips-linux-gnu;${STACKPROV_CROSS_SYSROOT}/lib/mips-linux-gnu")
set(CMAKE_FIND_ROOT_PATH /usr/mips-linux-gnu "${STACKPROV_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
# Headers: the target's first; Catch2 (header-only) and other arch-independent headers may
# come from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE mips-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "${STACKPROV_CROSS_SYSROOT}/usr/lib/mips-linux-gnu/pkgconfig:${STACKPROV_CROSS_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${STACKPROV_CROSS_SYSROOT}")
set(ENV{PKG_CONFIG_PATH} "")
set(_rpl "")
foreach(d ${_libdirs})
  string(APPEND _rpl " -Wl,-rpath-link,${d}")
endforeach()
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_rpl}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_rpl}")
string(REPLACE ";" ":" _ldpath "${_libdirs}")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-mips;-L;/usr/mips-linux-gnu;-E;LD_LIBRARY_PATH=${_ldpath})
