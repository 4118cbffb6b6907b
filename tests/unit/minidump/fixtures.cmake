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
foreach(mode normal exception)
  add_custom_command(OUTPUT ${MD_FIX}/${mode}.yaml
    COMMAND ${MD_OBJ2YAML} ${MD_FIX}/${mode}.dmp > ${MD_FIX}/${mode}.yaml
    DEPENDS ${MD_FIX}/${mode}.dmp VERBATIM)
  list(APPEND MD_OUTPUTS ${MD_FIX}/${mode}.yaml)
endforeach()
add_custom_target(minidump_fixtures DEPENDS ${MD_OUTPUTS})
add_dependencies(unit_minidump minidump_fixtures)
target_compile_definitions(unit_minidump PRIVATE STACKPROV_MINIDUMP_FIXTURES="${MD_FIX}")
