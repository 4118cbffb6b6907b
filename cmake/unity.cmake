# SPDX-License-Identifier: Apache-2.0
# STACKPROV_UNITY (doc/ci-plan.md C7, C14): one translation unit per lib/<folder>, on in every build:
# each folder's headers are parsed once instead of once per file (the host library: 495 -> 360 CPU-s
# at -O3, measured with ninja -j2 on the 2-core CI-speed machine). Names
# at namespace scope (anonymous namespaces included) must be unique within a folder; sources with
# their own compile properties (lib/elf/decompress.cpp) stay apart, and lib/symbolize/demangle.cpp
# always: libiberty.h declares basename() unlike glibc's <string.h>.
# stackprov_unity(TARGET SOURCES...): the library target of the host build or of cmake/win64.cmake.
function(stackprov_unity target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  # GCC warns about a class whose field has a type from an anonymous namespace when the class is
  # defined in an included file, and a unity TU includes every .cpp file: the types are the same
  # file-local ones as in the one-file build, which does not warn.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  # The host build's library is what programs link statically (the in-process fixtures here, and
  # embedders): an archive member is linked whole, so there the folders' files that reach the trace
  # stores (sqlite3, libpq) and the eBPF sampler (libbpf) get objects of their own, and the C ABI's and
  # the pipeline's files stay one object each: a static program still takes only the entry points it
  # calls and what they reach, and needs no library it did not need with one object per file.
  set(host_archive OFF)
  if(NOT STACKPROV_SANITIZE AND NOT STACKPROV_FUZZ AND NOT CMAKE_CROSSCOMPILING)
    set(host_archive ON)
  endif()
  foreach(src ${ARGN})
    get_filename_component(src_dir ${src} DIRECTORY)
    get_filename_component(src_group ${src_dir} NAME)
    get_filename_component(src_name ${src} NAME)
    if(host_archive)
      if(src_group MATCHES "^(capi|pipeline)$")
        set_source_files_properties(${src} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      elseif(src_name MATCHES "^trace" AND NOT src_group STREQUAL "trace")
        string(APPEND src_group "_trace")
      elseif(src_name MATCHES "^(kernel_sampler|kernel_btf|recorder)\\.cpp$")
        string(APPEND src_group "_bpf")
      endif()
    endif()
    set_source_files_properties(${src} PROPERTIES UNITY_GROUP ${src_group})
  endforeach()
  # Files whose file-local names clash with a neighbour's in the same folder (the same constant,
  # helper or statement wrapper written twice): compiled on their own.
  set(apart macho/macho_object.cpp evidence/trace_verify.cpp elf/plt.cpp
    memory/minidump_capture.cpp memory/process_capture.cpp trace/sqlite_store.cpp
    symbolize/pdb_resolver.cpp symbolize/demangle.cpp pe/pe_object.cpp capi/files.cpp capi/symbol_bundle.cpp capi/evidence.cpp
    perf/module_tracker.cpp pipeline/trace_bundle.cpp unwind/first_frame.cpp)
  list(TRANSFORM apart PREPEND ${CMAKE_SOURCE_DIR}/lib/)
  set_source_files_properties(${apart} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
