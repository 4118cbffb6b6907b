// SPDX-License-Identifier: Apache-2.0
// arm64: in-process register capture (sprov_snapshot_capture_self) — planned with the arm64 issue.
#include "arch/arm64/registers.hpp"
