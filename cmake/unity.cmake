# SPDX-License-Identifier: Apache-2.0
# STACKPROV_UNITY (doc/ci-plan.md C7): one translation unit per lib/<folder>. CI turns it on for
# the builds that only check (sanitizers, fuzzing, cross under qemu and wine): each folder's headers
# are parsed once instead of once per file. The shipped host build keeps one object per file. Names
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
  foreach(src ${ARGN})
    get_filename_component(src_dir ${src} DIRECTORY)
    get_filename_component(src_group ${src_dir} NAME)
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
