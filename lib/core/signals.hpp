// SPDX-License-Identifier: Apache-2.0
// Linux signals of each architecture: names (SIGSEGV), gdb's descriptions, si_code names and which carry si_addr.
#pragma once

#include <cstdint>
#include <string>

#include "core/types.hpp"

namespace stackprov {

/// "SIGSEGV" for signal `signo` of a Linux process of architecture `arch` (x86_64
/// and arm64 use include/uapi/asm-generic/signal.h, MIPS its own numbers:
/// arch/mips/include/uapi/asm/signal.h); real-time signals "SIG34", as gdb names
/// them; "" for 0, "SIG<n>" for a number the architecture does not define.
std::string signal_name(Arch arch, int signo);

/// gdb's text for the signal (gdb/signals.def, `info signals`): "Segmentation
/// fault", "Aborted", "Real-time event 34"; "Unknown signal" when not defined.
std::string signal_description(Arch arch, int signo);

/// The si_code's name: "SEGV_MAPERR", "BUS_ADRALN", "SI_TKILL", "SI_USER" ...
/// (include/uapi/asm-generic/siginfo.h; MIPS numbers SI_TIMER/SI_MESGQ/SI_ASYNCIO
/// differently); "" when unknown.
std::string signal_code_name(Arch arch, int signo, int code);

/// Whether si_addr of this signal is the faulting address: SIGILL, SIGFPE,
/// SIGSEGV, SIGBUS or SIGTRAP raised by the kernel for an instruction
/// (si_code > 0 and not SI_KERNEL, whose si_addr is 0).
bool signal_has_fault_address(Arch arch, int signo, int code);

}  // namespace stackprov
