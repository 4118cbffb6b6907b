# SPDX-License-Identifier: Apache-2.0
# unit_pdb's fixtures, built with the tests (doc/windows.md "PDB symbols"): the C (two modules) and C++
# sources of tests/unit/pdb/fixtures compiled by clang-14 -gcodeview at -O2 and linked by lld-link-14 /debug
# without a CRT, and the oracle, llvm-pdbutil-14's dump (--summary --modules --symbols --publics) of each
# PDB. A missing tool fails the build of unit_pdb, naming it (stackprov_require_program).
stackprov_require_program(PDB_CLANG clang-14)
stackprov_require_program(PDB_LLD_LINK lld-link-14)
stackprov_require_program(PDB_PDBUTIL llvm-pdbutil-14)
set(PDB_FIX_SRC ${CMAKE_CURRENT_SOURCE_DIR}/unit/pdb/fixtures)
set(PDB_FIX ${CMAKE_CURRENT_BINARY_DIR}/pdb-fixtures)
file(MAKE_DIRECTORY ${PDB_FIX})
set(PDB_CFLAGS --target=x86_64-pc-windows-msvc -O2 -g -gcodeview)
set(PDB_LINK_FLAGS /entry:mainCRTStartup /subsystem:console /nodefaultlib /debug)
set(PDB_FIX_OUTPUTS "")
foreach(fx pdb_c pdb_cpp)
  if(fx STREQUAL "pdb_c")
    set(srcs pdb_c.c pdb_lib.c)
  else()
    set(srcs pdb_cpp.cpp)
  endif()
  set(objs "")
  foreach(s ${srcs})
    get_filename_component(base ${s} NAME_WE)
    add_custom_command(OUTPUT ${PDB_FIX}/${fx}_${base}.obj
      COMMAND ${PDB_CLANG} ${PDB_CFLAGS} -c ${PDB_FIX_SRC}/${s} -o ${PDB_FIX}/${fx}_${base}.obj
      DEPENDS ${PDB_FIX_SRC}/${s} ${PDB_FIX_SRC}/pdb_inline.h VERBATIM)
    list(APPEND objs ${PDB_FIX}/${fx}_${base}.obj)
  endforeach()
  add_custom_command(OUTPUT ${PDB_FIX}/${fx}.exe ${PDB_FIX}/${fx}.pdb
    COMMAND ${PDB_LLD_LINK} ${PDB_LINK_FLAGS} /pdb:${PDB_FIX}/${fx}.pdb ${objs} /out:${PDB_FIX}/${fx}.exe
    DEPENDS ${objs} VERBATIM)
  add_custom_command(OUTPUT ${PDB_FIX}/${fx}.pdbutil.txt
    COMMAND ${PDB_PDBUTIL} dump --summary --modules --symbols --publics ${PDB_FIX}/${fx}.pdb > ${PDB_FIX}/${fx}.pdbutil.txt
    DEPENDS ${PDB_FIX}/${fx}.pdb VERBATIM)
  list(APPEND PDB_FIX_OUTPUTS ${PDB_FIX}/${fx}.exe ${PDB_FIX}/${fx}.pdbutil.txt)
endforeach()
add_custom_target(unit_pdb_fixtures DEPENDS ${PDB_FIX_OUTPUTS})
add_dependencies(unit_pdb unit_pdb_fixtures)
target_compile_definitions(unit_pdb PRIVATE STACKPROV_PDB_FIXTURES="${PDB_FIX}")
