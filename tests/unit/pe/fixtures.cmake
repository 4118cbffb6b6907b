# SPDX-License-Identifier: Apache-2.0
# unit_pe's PE32+ fixtures, built with the tests (doc/windows.md): clang-14 for x86_64-pc-windows-msvc
# and lld-link-14 without a CRT (the recipe of the Windows notes), and the oracle, llvm-readobj-14's
# --unwind listing of unwind.exe. unwind_v2.exe stands apart: llvm-readobj-14 aborts on its
# version-2 info. Both are linked with /debug: a CodeView record gives them a pdb-guid-age identity, so
# that integration_pdata_wine can bundle them (their epilog rows). A missing tool fails the build of unit_pe, naming it (stackprov_require_program).
stackprov_require_program(PE_CLANG clang-14)
stackprov_require_program(PE_LLD_LINK lld-link-14)
stackprov_require_program(PE_READOBJ llvm-readobj-14)
set(PE_FIX_SRC ${CMAKE_CURRENT_SOURCE_DIR}/unit/pe/fixtures)
set(PE_FIX ${CMAKE_CURRENT_BINARY_DIR}/pe-fixtures)
file(MAKE_DIRECTORY ${PE_FIX})
set(PE_LINK_FLAGS /entry:mainCRTStartup /subsystem:console /nodefaultlib)

add_custom_command(OUTPUT ${PE_FIX}/unwind_c.obj
  COMMAND ${PE_CLANG} --target=x86_64-pc-windows-msvc -O2 -c ${PE_FIX_SRC}/unwind_c.c -o ${PE_FIX}/unwind_c.obj
  DEPENDS ${PE_FIX_SRC}/unwind_c.c VERBATIM)
foreach(s unwind_asm unwind_v2)
  add_custom_command(OUTPUT ${PE_FIX}/${s}.obj
    COMMAND ${PE_CLANG} --target=x86_64-pc-windows-msvc -c ${PE_FIX_SRC}/${s}.s -o ${PE_FIX}/${s}.obj
    DEPENDS ${PE_FIX_SRC}/${s}.s VERBATIM)
endforeach()
add_custom_command(OUTPUT ${PE_FIX}/unwind.exe
  COMMAND ${PE_LLD_LINK} ${PE_LINK_FLAGS} /debug /pdb:${PE_FIX}/unwind.pdb /out:${PE_FIX}/unwind.exe ${PE_FIX}/unwind_c.obj ${PE_FIX}/unwind_asm.obj
  DEPENDS ${PE_FIX}/unwind_c.obj ${PE_FIX}/unwind_asm.obj VERBATIM)
add_custom_command(OUTPUT ${PE_FIX}/unwind_v2.exe
  COMMAND ${PE_LLD_LINK} ${PE_LINK_FLAGS} /debug /pdb:${PE_FIX}/unwind_v2.pdb /out:${PE_FIX}/unwind_v2.exe ${PE_FIX}/unwind_v2.obj
  DEPENDS ${PE_FIX}/unwind_v2.obj VERBATIM)
add_custom_command(OUTPUT ${PE_FIX}/unwind.readobj.txt
  COMMAND ${PE_READOBJ} --unwind ${PE_FIX}/unwind.exe > ${PE_FIX}/unwind.readobj.txt
  DEPENDS ${PE_FIX}/unwind.exe VERBATIM)
add_custom_target(unit_pe_fixtures DEPENDS ${PE_FIX}/unwind.exe ${PE_FIX}/unwind_v2.exe ${PE_FIX}/unwind.readobj.txt)
add_dependencies(unit_pe unit_pe_fixtures)
target_compile_definitions(unit_pe PRIVATE STACKPROV_PE_FIXTURES="${PE_FIX}")
