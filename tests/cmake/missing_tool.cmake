# SPDX-License-Identifier: Apache-2.0
# Stand-in command of a test whose required program was not found at configure time: fails naming it.
# Run as: cmake -P missing_tool.cmake <program> [the test's own arguments...]
message(FATAL_ERROR "required program '${CMAKE_ARGV3}' was not found when the build was configured; "
  "install it (make deps / scripts/install-deps.sh) and re-run cmake. A missing tool fails the test.")
