# SPDX-License-Identifier: Apache-2.0
# Cross build for mips-linux-gnu with the Debian cross GCC (make cross ARCH=...); see cross-common.cmake.
set(CMAKE_SYSTEM_PROCESSOR mips)
set(STACKPROV_CROSS_TRIPLE mips-linux-gnu)
set(STACKPROV_CROSS_QEMU qemu-mips)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
