// SPDX-License-Identifier: Apache-2.0
// Built without -g into the `--verbose` fixture: an address its DWARF does not cover (symbol table only).
__attribute__((noinline)) int why_nodebug(int x) { return x * 7 - 1; }
