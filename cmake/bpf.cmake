# SPDX-License-Identifier: Apache-2.0
# eBPF programs built at build time (examples/memleak, the library's kernel sampler lib/perf/):
# vmlinux.h dumped once from the running kernel's BTF (bpftool), each program compiled with
# clang-14 -target bpf (CO-RE) and embedded as a libbpf skeleton (bpftool gen skeleton).
#
# stackprov_bpf_tools(<missing_var>): finds libbpf (pkg-config), bpftool and clang; sets LIBBPF_*,
#   BPFTOOL, BPF_CLANG and <missing_var> to what is missing ("" when everything is there).
# stackprov_bpf_skeleton(<src.bpf.c> <name> <gen_dir> <skel_var> DEPENDS ... INCLUDES ...):
#   the rules for <gen_dir>/<name>.skel.h (struct <name>); <skel_var> is set to its path. Targets
#   that compile it list the header as a source (or depend on <name>_skel).
include_guard(GLOBAL)

function(stackprov_bpf_tools missing_var)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(LIBBPF libbpf)
  find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin)
  find_program(BPF_CLANG NAMES clang-14 clang)
  set(_missing "")
  if(NOT LIBBPF_FOUND)
    list(APPEND _missing "libbpf (Debian libbpf-dev)")
  endif()
  if(NOT BPFTOOL)
    list(APPEND _missing "bpftool (Debian bpftool)")
  endif()
  if(NOT BPF_CLANG)
    list(APPEND _missing "clang-14 (Debian clang-14)")
  endif()
  string(JOIN ", " _missing ${_missing})
  set(${missing_var} "${_missing}" PARENT_SCOPE)
  foreach(v LIBBPF_FOUND LIBBPF_INCLUDE_DIRS LIBBPF_LINK_LIBRARIES LIBBPF_LIBRARIES)
    set(${v} "${${v}}" PARENT_SCOPE)
  endforeach()
endfunction()

function(stackprov_bpf_skeleton src name gen skel_var)
  cmake_parse_arguments(B "" "" "DEPENDS;INCLUDES" ${ARGN})
  set(vmlinux ${CMAKE_BINARY_DIR}/bpf_gen/vmlinux.h)
  if(NOT TARGET stackprov_vmlinux_h)
    file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/bpf_gen)
    # A kernel without BTF fails here with the reason.
    add_custom_command(OUTPUT ${vmlinux}
      COMMAND ${CMAKE_COMMAND} -DBPFTOOL=${BPFTOOL} -DOUT=${vmlinux} -P ${CMAKE_SOURCE_DIR}/cmake/bpf_vmlinux.cmake
      DEPENDS ${CMAKE_SOURCE_DIR}/cmake/bpf_vmlinux.cmake
      COMMENT "eBPF: vmlinux.h from /sys/kernel/btf/vmlinux")
    add_custom_target(stackprov_vmlinux_h DEPENDS ${vmlinux})
  endif()
  file(MAKE_DIRECTORY ${gen})
  set(incs "")
  foreach(d ${B_INCLUDES})
    list(APPEND incs -I${d})
  endforeach()
  add_custom_command(OUTPUT ${gen}/${name}.bpf.o
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_x86 -I${CMAKE_BINARY_DIR}/bpf_gen ${incs}
            -c ${src} -o ${gen}/${name}.bpf.o
    DEPENDS ${src} ${B_DEPENDS} ${vmlinux} stackprov_vmlinux_h
    COMMENT "eBPF: clang -target bpf ${src}")
  add_custom_command(OUTPUT ${gen}/${name}.skel.h
    COMMAND ${BPFTOOL} gen skeleton ${gen}/${name}.bpf.o name ${name} > ${gen}/${name}.skel.h
    DEPENDS ${gen}/${name}.bpf.o
    COMMENT "eBPF: bpftool gen skeleton ${name}")
  add_custom_target(${name}_skel DEPENDS ${gen}/${name}.skel.h)
  set(${skel_var} ${gen}/${name}.skel.h PARENT_SCOPE)
endfunction()
