# SPDX-License-Identifier: Apache-2.0
# unit_macho's Mach-O fixtures, built with the tests (doc/macos.md "Fixtures"): clang-16 for
# x86_64-apple-macos11 and arm64-apple-macos11 without an SDK, linked by ld64.lld-16 (never lld-14:
# its __eh_frame and DWARF-mode entries are wrong), a fat file by llvm-lipo-16, its dSYM by
# dsymutil-16 (per slice, joined by llvm-lipo-16), stripped dylibs by llvm-strip-16. A missing tool fails the build of unit_macho,
# naming it (stackprov_require_program).
stackprov_require_program(MACHO_CLANG clang-16)
stackprov_require_program(MACHO_LD ld64.lld-16)
stackprov_require_program(MACHO_LIPO llvm-lipo-16)
stackprov_require_program(MACHO_DSYMUTIL dsymutil-16)
stackprov_require_program(MACHO_STRIP llvm-strip-16)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(MACHO_SRC ${CMAKE_CURRENT_SOURCE_DIR}/unit/macho/fixtures)
set(MACHO_FIX ${CMAKE_CURRENT_BINARY_DIR}/macho-fixtures)
file(MAKE_DIRECTORY ${MACHO_FIX})
set(MACHO_CFLAGS -O2 -g -ffreestanding -funwind-tables -fno-stack-protector -fno-builtin -nostdlib)

foreach(n 400 1200)
  add_custom_command(OUTPUT ${MACHO_FIX}/many${n}.c
    COMMAND ${Python3_EXECUTABLE} ${MACHO_SRC}/gen_many.py ${n} ${MACHO_FIX}/many${n}.c
    DEPENDS ${MACHO_SRC}/gen_many.py VERBATIM)
endforeach()

set(MACHO_OUTPUTS)
foreach(a x86_64 arm64)
  set(t --target=${a}-apple-macos11)
  set(objs)
  foreach(src modes:-fomit-frame-pointer fp:-fno-omit-frame-pointer eh:-fexceptions)
    string(REPLACE ":" ";" parts ${src})
    list(GET parts 0 s)
    list(GET parts 1 flag)
    add_custom_command(OUTPUT ${MACHO_FIX}/${s}_${a}.o
      COMMAND ${MACHO_CLANG} ${t} ${MACHO_CFLAGS} ${flag} -c ${MACHO_SRC}/${s}.c -o ${MACHO_FIX}/${s}_${a}.o
      DEPENDS ${MACHO_SRC}/${s}.c VERBATIM)
    list(APPEND objs ${MACHO_FIX}/${s}_${a}.o)
  endforeach()
  add_custom_command(OUTPUT ${MACHO_FIX}/dwarf_${a}.o
    COMMAND ${MACHO_CLANG} ${t} -c ${MACHO_SRC}/dwarf_${a}.s -o ${MACHO_FIX}/dwarf_${a}.o
    DEPENDS ${MACHO_SRC}/dwarf_${a}.s VERBATIM)
  list(APPEND objs ${MACHO_FIX}/dwarf_${a}.o)
  set(sizes 400)
  if(a STREQUAL "arm64")
    list(APPEND sizes 1200)
  endif()
  foreach(n ${sizes})
    add_custom_command(OUTPUT ${MACHO_FIX}/many${n}_${a}.o
      COMMAND ${MACHO_CLANG} ${t} ${MACHO_CFLAGS} -fomit-frame-pointer -mno-red-zone -c ${MACHO_FIX}/many${n}.c
              -o ${MACHO_FIX}/many${n}_${a}.o
      DEPENDS ${MACHO_FIX}/many${n}.c VERBATIM)
  endforeach()
  set(ld ${MACHO_LD} -arch ${a} -platform_version macos 11.0 11.0)
  # modes_A: every mode, personality + LSDA, and (arm64) page-local encodings.
  add_custom_command(OUTPUT ${MACHO_FIX}/modes_${a}
    COMMAND ${ld} -e _start -o ${MACHO_FIX}/modes_${a} ${objs} ${MACHO_FIX}/many400_${a}.o
    DEPENDS ${objs} ${MACHO_FIX}/many400_${a}.o VERBATIM)
  # libmodes_A.dylib, stripped: its names only in the export trie (x86_64: LC_DYLD_INFO_ONLY;
  # arm64 with chained fixups: LC_DYLD_EXPORTS_TRIE).
  set(chain "")
  if(a STREQUAL "arm64")
    set(chain -fixup_chains)
  endif()
  add_custom_command(OUTPUT ${MACHO_FIX}/libmodes_${a}.dylib
    COMMAND ${ld} -dylib ${chain} -install_name @rpath/libmodes.dylib -o ${MACHO_FIX}/libmodes_${a}.dylib ${objs}
    COMMAND ${MACHO_STRIP} ${MACHO_FIX}/libmodes_${a}.dylib
    DEPENDS ${objs} VERBATIM)
  list(APPEND MACHO_OUTPUTS ${MACHO_FIX}/modes_${a} ${MACHO_FIX}/libmodes_${a}.dylib)
  set(MACHO_OBJS_${a} ${objs})
endforeach()
# big_arm64: 1200 more functions: regular second-level pages, two of them.
add_custom_command(OUTPUT ${MACHO_FIX}/big_arm64
  COMMAND ${MACHO_LD} -arch arm64 -platform_version macos 11.0 11.0 -e _start -o ${MACHO_FIX}/big_arm64
          ${MACHO_OBJS_arm64} ${MACHO_FIX}/many1200_arm64.o
  DEPENDS ${MACHO_OBJS_arm64} ${MACHO_FIX}/many1200_arm64.o VERBATIM)
# fat: both slices, and its dSYM (one DWARF slice per architecture).
add_custom_command(OUTPUT ${MACHO_FIX}/fat ${MACHO_FIX}/fat.dSYM/Contents/Resources/DWARF/fat
  COMMAND ${MACHO_LIPO} -create ${MACHO_FIX}/modes_x86_64 ${MACHO_FIX}/modes_arm64 -output ${MACHO_FIX}/fat
  # dsymutil joins the slices' dSYMs with a "lipo" it looks up on PATH (none here): one per slice,
  # joined by llvm-lipo-16.
  COMMAND ${MACHO_DSYMUTIL} --arch x86_64 ${MACHO_FIX}/fat -o ${MACHO_FIX}/fat_x86_64.dSYM
  # dsymutil warns that the arm64 object's local label GCC_except_table2 (an exception table's, which
  # lld does not keep in the linked symbol table and no DWARF refers to) is not in the debug map:
  # that one line is dropped, every other line and the exit status pass through.
  COMMAND sh -c "\"$0\" --arch arm64 \"$1\" -o \"$2\" 2> \"$2.stderr\"; rc=$?; grep -v \"failed to insert symbol .GCC_except_table[0-9]*. in the debug map\" \"$2.stderr\" >&2; exit $rc"
          ${MACHO_DSYMUTIL} ${MACHO_FIX}/fat ${MACHO_FIX}/fat_arm64.dSYM
  COMMAND ${CMAKE_COMMAND} -E make_directory ${MACHO_FIX}/fat.dSYM/Contents/Resources/DWARF
  COMMAND ${MACHO_LIPO} -create ${MACHO_FIX}/fat_x86_64.dSYM/Contents/Resources/DWARF/fat
          ${MACHO_FIX}/fat_arm64.dSYM/Contents/Resources/DWARF/fat -output ${MACHO_FIX}/fat.dSYM/Contents/Resources/DWARF/fat
  DEPENDS ${MACHO_FIX}/modes_x86_64 ${MACHO_FIX}/modes_arm64 VERBATIM)
list(APPEND MACHO_OUTPUTS ${MACHO_FIX}/big_arm64 ${MACHO_FIX}/fat ${MACHO_FIX}/fat.dSYM/Contents/Resources/DWARF/fat)
add_custom_target(unit_macho_fixtures DEPENDS ${MACHO_OUTPUTS})
add_dependencies(unit_macho unit_macho_fixtures)
target_compile_definitions(unit_macho PRIVATE STACKPROV_MACHO_FIXTURES="${MACHO_FIX}")
