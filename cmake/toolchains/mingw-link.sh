#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs a win64 link command (the mingw g++, mingw-gxx-link.cmake) and passes on its output but for
# one ld warning, "<libstdc++.a member>: duplicate section `.rdata$<symbol>[<symbol>]' has different
# size". clang emits read-only data of libstdc++'s headers in each object that needs it, as COMDATs,
# as the mingw GCC does: the typeinfo of library classes (std::exception, std::bad_alloc, ...),
# static constexpr members (std::string::npos). GCC marks those COMDATs "same size" and GNU as pads
# each section to 16 bytes, clang's assembler does not ("St9exception": 13 bytes against 16, npos 8
# against 16). ld keeps the first copy, clang's, and warns about each GCC copy in libstdc++.a after
# it: the same bytes but the padding. Any other message, and the exit status, pass unchanged.
err=$(mktemp) || exit 1
"$@" 2>"$err"
rc=$?
grep -v -E "^/usr/lib/gcc/x86_64-w64-mingw32/[^/]+/libstdc\+\+\.a\([^)]+\): duplicate section \`\.rdata\\\$([A-Za-z0-9_]+)\[\1\]' has different size$" "$err" >&2
rm -f "$err"
exit $rc
