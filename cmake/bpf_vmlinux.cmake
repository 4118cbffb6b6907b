# SPDX-License-Identifier: Apache-2.0
# cmake -DBPFTOOL=... -DOUT=.../vmlinux.h -P bpf_vmlinux.cmake: the running kernel's types for CO-RE
# (cmake/bpf.cmake; examples/memleak and the library's eBPF sampler).
set(BTF /sys/kernel/btf/vmlinux)
if(NOT EXISTS ${BTF})
  message(FATAL_ERROR "${BTF} not found: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y), which the eBPF "
                      "programs need; configure with -DSTACKPROV_MEMLEAK=OFF -DSTACKPROV_KERNEL_SAMPLER=OFF")
endif()
execute_process(COMMAND ${BPFTOOL} btf dump file ${BTF} format c
  OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "bpftool btf dump file ${BTF} failed (${rc}): ${err}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
