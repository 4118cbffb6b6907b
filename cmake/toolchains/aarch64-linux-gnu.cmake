# SPDX-License-Identifier: Apache-2.0
# Cross build for aarch64-linux-gnu with the Debian cross GCC (make cross ARCH=...); see cross-common.cmake.
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(STACKPROV_CROSS_TRIPLE aarch64-linux-gnu)
set(STACKPROV_CROSS_QEMU qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
