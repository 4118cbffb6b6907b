# SPDX-License-Identifier: Apache-2.0
# unit_minidump's fixtures, made once per build (doc/windows.md "Minidumps"): mdprog.exe from
# fixtures/mdprog.c (mingw-w64 -O1 -g, --build-id for an RSDS identity, dbghelp), run under wine
# (run_mdprog.py over tests/lib/wine.py: the prefix under the build directory) three times -- a normal dump and a
# full-memory dump of its blocked worker thread, and a dump written by the worker's exception
# handler -- with each run's own printout (the worker's RtlVirtualUnwind chain, its context seen by
# GetThreadContext, the exception), and the oracles: obj2yaml-14 of the two normal dumps and
# llvm-readobj-14 --coff-debug-directory of the program. The full dump (~100 MB, ~3 s) is not given
# to obj2yaml (its Memory64List would be ~200 MB of hex). A missing tool fails the build of
# unit_minidump, naming it.
stackprov_require_program(MD_MINGW_CC x86_64-w64-mingw32-gcc)
stackprov_require_program(MD_OBJ2YAML obj2yaml-14)
stackprov_require_program(MD_READOBJ llvm-readobj-14)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(MD_FIX ${CMAKE_BINARY_DIR}/tests/minidump-fixtures)
set(MD_SRC ${CMAKE_CURRENT_SOURCE_DIR}/unit/minidump/fixtures)
set(MD_RUN ${CMAKE_CURRENT_SOURCE_DIR}/unit/minidump/run_mdprog.py)
file(MAKE_DIRECTORY ${MD_FIX})

add_custom_command(OUTPUT ${MD_FIX}/mdprog.exe
  COMMAND ${MD_MINGW_CC} -O1 -g -Wl,--build-id ${MD_SRC}/mdprog.c -o ${MD_FIX}/mdprog.exe -ldbghelp
  DEPENDS ${MD_SRC}/mdprog.c VERBATIM)
add_custom_command(OUTPUT ${MD_FIX}/mdprog.readobj.txt
  COMMAND ${MD_READOBJ} --coff-debug-directory ${MD_FIX}/mdprog.exe > ${MD_FIX}/mdprog.readobj.txt
  DEPENDS ${MD_FIX}/mdprog.exe VERBATIM)
set(MD_OUTPUTS ${MD_FIX}/mdprog.exe ${MD_FIX}/mdprog.readobj.txt)
# One wine run at a time (each depends on the one before): two dumps written at once in one prefix
# made a run fail on a loaded machine.
set(MD_PREV "")
foreach(mode normal full exception)
  add_custom_command(OUTPUT ${MD_FIX}/${mode}.dmp ${MD_FIX}/${mode}.out
    COMMAND ${Python3_EXECUTABLE} ${MD_RUN} ${CMAKE_BINARY_DIR} ${MD_FIX}/mdprog.exe ${mode} ${MD_FIX}/${mode}.dmp
            ${MD_FIX}/${mode}.out
    DEPENDS ${MD_FIX}/mdprog.exe ${MD_RUN} ${CMAKE_CURRENT_SOURCE_DIR}/lib/wine.py ${MD_PREV} VERBATIM)
  list(APPEND MD_OUTPUTS ${MD_FIX}/${mode}.dmp ${MD_FIX}/${mode}.out)
  set(MD_PREV ${MD_FIX}/${mode}.out)
endforeach()
# A PDB program (doc/windows.md "Minidumps"): fixtures/mdpdb.c built for the MSVC target by clang-14
# -gcodeview (mingw-w64's headers for windows.h and dbghelp.h) and linked by lld-link-14 /debug
# without a C runtime against mingw-w64's import libraries. The PDB is written to mdpdb-pdb/ and the
# CodeView record names it "mdpdb.pdb" alone (/pdbaltpath, as release builds do), so that beside the
# image and at the RSDS path there is none: minidump_pdb finds it in a symbol-store layout only. Two
# wine runs (a normal dump of the blocked worker, the worker's own dump of its fault), after the
# mdprog runs; llvm-readobj-14 --coff-debug-directory and llvm-pdbutil-14 dump --summary of it.
stackprov_require_program(MD_CLANG clang-14)
stackprov_require_program(MD_LLD_LINK lld-link-14)
stackprov_require_program(MD_PDBUTIL llvm-pdbutil-14)
set(MD_MINGW_ROOT /usr/x86_64-w64-mingw32)
set(MD_PDB_LINK ${MD_LLD_LINK})
foreach(f include/windows.h include/dbghelp.h lib/libkernel32.a lib/libdbghelp.a lib/libntdll.a)
  if(NOT EXISTS ${MD_MINGW_ROOT}/${f})
    message(WARNING "${MD_MINGW_ROOT}/${f} not found: mdpdb.exe cannot be built (make deps installs g++-mingw-w64-x86-64)")
    set(MD_PDB_LINK ${CMAKE_COMMAND} -P ${CMAKE_SOURCE_DIR}/tests/cmake/missing_tool.cmake ${MD_MINGW_ROOT}/${f})
  endif()
endforeach()
file(MAKE_DIRECTORY ${MD_FIX}/mdpdb-pdb)
add_custom_command(OUTPUT ${MD_FIX}/mdpdb.obj
  COMMAND ${MD_CLANG} --target=x86_64-pc-windows-msvc -fno-ms-compatibility -O1 -g -gcodeview
          -idirafter ${MD_MINGW_ROOT}/include -c ${MD_SRC}/mdpdb.c -o ${MD_FIX}/mdpdb.obj
  DEPENDS ${MD_SRC}/mdpdb.c VERBATIM)
add_custom_command(OUTPUT ${MD_FIX}/mdpdb.exe ${MD_FIX}/mdpdb-pdb/mdpdb.pdb
  COMMAND ${MD_PDB_LINK} /entry:mainCRTStartup /subsystem:console /nodefaultlib /debug
          /pdb:${MD_FIX}/mdpdb-pdb/mdpdb.pdb /pdbaltpath:mdpdb.pdb ${MD_FIX}/mdpdb.obj
          ${MD_MINGW_ROOT}/lib/libkernel32.a ${MD_MINGW_ROOT}/lib/libdbghelp.a ${MD_MINGW_ROOT}/lib/libntdll.a
          /out:${MD_FIX}/mdpdb.exe
  DEPENDS ${MD_FIX}/mdpdb.obj VERBATIM)
add_custom_command(OUTPUT ${MD_FIX}/mdpdb.readobj.txt ${MD_FIX}/mdpdb.pdbutil.txt
  COMMAND ${MD_READOBJ} --coff-debug-directory ${MD_FIX}/mdpdb.exe > ${MD_FIX}/mdpdb.readobj.txt
  COMMAND ${MD_PDBUTIL} dump --summary ${MD_FIX}/mdpdb-pdb/mdpdb.pdb > ${MD_FIX}/mdpdb.pdbutil.txt
  DEPENDS ${MD_FIX}/mdpdb.exe VERBATIM)
list(APPEND MD_OUTPUTS ${MD_FIX}/mdpdb.exe ${MD_FIX}/mdpdb.readobj.txt ${MD_FIX}/mdpdb.pdbutil.txt)
foreach(mode normal exception)
  add_custom_command(OUTPUT ${MD_FIX}/pdb-${mode}.dmp ${MD_FIX}/pdb-${mode}.out
    COMMAND ${Python3_EXECUTABLE} ${MD_RUN} ${CMAKE_BINARY_DIR} ${MD_FIX}/mdpdb.exe ${mode} ${MD_FIX}/pdb-${mode}.dmp
            ${MD_FIX}/pdb-${mode}.out
    DEPENDS ${MD_FIX}/mdpdb.exe ${MD_RUN} ${CMAKE_CURRENT_SOURCE_DIR}/lib/wine.py ${MD_PREV} VERBATIM)
  list(APPEND MD_OUTPUTS ${MD_FIX}/pdb-${mode}.dmp ${MD_FIX}/pdb-${mode}.out)
  set(MD_PREV ${MD_FIX}/pdb-${mode}.out)
endforeach()
foreach(mode normal exception)
  add_custom_command(OUTPUT ${MD_FIX}/${mode}.yaml
    COMMAND ${MD_OBJ2YAML} ${MD_FIX}/${mode}.dmp > ${MD_FIX}/${mode}.yaml
    DEPENDS ${MD_FIX}/${mode}.dmp VERBATIM)
  list(APPEND MD_OUTPUTS ${MD_FIX}/${mode}.yaml)
endforeach()
add_custom_target(minidump_fixtures DEPENDS ${MD_OUTPUTS})
add_dependencies(unit_minidump minidump_fixtures)
target_compile_definitions(unit_minidump PRIVATE STACKPROV_MINIDUMP_FIXTURES="${MD_FIX}")
