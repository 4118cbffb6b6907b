// SPDX-License-Identifier: Apache-2.0
// mips32: in-process register capture (sprov_snapshot_capture_self) — planned with the mips32 issue.
#include "arch/mips32/registers.hpp"
