# SPDX-License-Identifier: Apache-2.0
# stackprov_require_program(VAR name [preferred paths...]): find a program a test needs, never skip.
# When it is missing, VAR becomes a command that fails naming it (tests/cmake/missing_tool.cmake),
# so the tests that use it are still registered and fail in ctest instead of silently vanishing.
function(stackprov_require_program var name)
  if(ARGN)
    foreach(p ${ARGN})
      if(EXISTS ${p})
        set(${var} ${p} PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endif()
  find_program(_stackprov_found_${var} NAMES ${name})
  if(_stackprov_found_${var})
    set(${var} ${_stackprov_found_${var}} PARENT_SCOPE)
  else()
    message(WARNING "${name} not found: the tests that need it will fail (make deps installs it)")
    set(${var} ${CMAKE_COMMAND} -P ${CMAKE_SOURCE_DIR}/tests/cmake/missing_tool.cmake ${name} PARENT_SCOPE)
  endif()
endfunction()
