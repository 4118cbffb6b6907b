# SPDX-License-Identifier: Apache-2.0
# cmake -DBPFTOOL=... -DOUT=.../vmlinux.h -P gen_vmlinux.cmake: the kernel's types for CO-RE.
set(BTF /sys/kernel/btf/vmlinux)
if(NOT EXISTS ${BTF})
  message(FATAL_ERROR "${BTF} not found: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y), which "
                      "examples/memleak needs; configure with -DSTACKPROV_MEMLEAK=OFF to build without it")
endif()
execute_process(COMMAND ${BPFTOOL} btf dump file ${BTF} format c
  OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "bpftool btf dump file ${BTF} failed (${rc}): ${err}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
