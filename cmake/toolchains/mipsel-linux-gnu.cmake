# SPDX-License-Identifier: Apache-2.0
# Cross build for mipsel-linux-gnu with the Debian cross GCC (make cross ARCH=...); see cross-common.cmake.
set(CMAKE_SYSTEM_PROCESSOR mipsel)
set(STACKPROV_CROSS_TRIPLE mipsel-linux-gnu)
set(STACKPROV_CROSS_QEMU qemu-mipsel)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
