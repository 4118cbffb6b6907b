// SPDX-License-Identifier: Apache-2.0
// Linux signals of each architecture: names (SIGSEGV), gdb's descriptions, si_code names and which carry si_addr.
#include "core/signals.hpp"

#include <array>
#include <string_view>

namespace stackprov {

namespace {

struct SignalText {
  const char* name;
  const char* description;  // gdb's (gdb/signals.def)
};

/// x86_64 and arm64: include/uapi/asm-generic/signal.h, 1 to 31.
constexpr std::array<SignalText, 32> kGeneric = {{
    {"", ""},
    {"SIGHUP", "Hangup"},
    {"SIGINT", "Interrupt"},
    {"SIGQUIT", "Quit"},
    {"SIGILL", "Illegal instruction"},
    {"SIGTRAP", "Trace/breakpoint trap"},
    {"SIGABRT", "Aborted"},
    {"SIGBUS", "Bus error"},
    {"SIGFPE", "Arithmetic exception"},
    {"SIGKILL", "Killed"},
    {"SIGUSR1", "User defined signal 1"},
    {"SIGSEGV", "Segmentation fault"},
    {"SIGUSR2", "User defined signal 2"},
    {"SIGPIPE", "Broken pipe"},
    {"SIGALRM", "Alarm clock"},
    {"SIGTERM", "Terminated"},
    {"SIGSTKFLT", "Stack fault"},  // not in gdb's table; glibc's text
    {"SIGCHLD", "Child status changed"},
    {"SIGCONT", "Continued"},
    {"SIGSTOP", "Stopped (signal)"},
    {"SIGTSTP", "Stopped (user)"},
    {"SIGTTIN", "Stopped (tty input)"},
    {"SIGTTOU", "Stopped (tty output)"},
    {"SIGURG", "Urgent I/O condition"},
    {"SIGXCPU", "CPU time limit exceeded"},
    {"SIGXFSZ", "File size limit exceeded"},
    {"SIGVTALRM", "Virtual timer expired"},
    {"SIGPROF", "Profiling timer expired"},
    {"SIGWINCH", "Window size changed"},
    {"SIGIO", "I/O possible"},
    {"SIGPWR", "Power fail/restart"},
    {"SIGSYS", "Bad system call"},
}};

/// MIPS numbers (arch/mips/include/uapi/asm/signal.h, 1 to 31) as the generic number of the
/// same signal; SIGEMT (7) has none (-1).
constexpr std::array<int, 32> kMipsToGeneric = {0,  1,  2,  3,  4,  5,  6,  -1, 8,  9,  7,  11, 31, 13, 14, 15,
                                                10, 12, 17, 30, 28, 23, 29, 19, 20, 18, 21, 22, 26, 27, 24, 25};
constexpr SignalText kMipsEmt = {"SIGEMT", "Emulation trap"};

/// Real-time signals: 32 to _NSIG (64; MIPS 128).
int max_signal(Arch arch) { return arch == Arch::kMips32 ? 128 : 64; }

const SignalText* text(Arch arch, int signo) {
  if (signo <= 0 || signo >= 32) return nullptr;
  if (arch != Arch::kMips32) return &kGeneric[signo];
  const int g = kMipsToGeneric[signo];
  return g < 0 ? &kMipsEmt : &kGeneric[g];
}

/// The portable name of `signo` in `arch` ("SIGSEGV"), "" when none.
std::string_view portable(Arch arch, int signo) {
  const SignalText* t = text(arch, signo);
  return t ? t->name : "";
}

struct CodeName {
  int code;
  const char* name;
};

// include/uapi/asm-generic/siginfo.h, per signal (codes > 0).
constexpr CodeName kIll[] = {{1, "ILL_ILLOPC"}, {2, "ILL_ILLOPN"}, {3, "ILL_ILLADR"}, {4, "ILL_ILLTRP"},
                             {5, "ILL_PRVOPC"}, {6, "ILL_PRVREG"}, {7, "ILL_COPROC"}, {8, "ILL_BADSTK"},
                             {9, "ILL_BADIADDR"}};
constexpr CodeName kFpe[] = {{1, "FPE_INTDIV"}, {2, "FPE_INTOVF"}, {3, "FPE_FLTDIV"},   {4, "FPE_FLTOVF"},
                             {5, "FPE_FLTUND"}, {6, "FPE_FLTRES"}, {7, "FPE_FLTINV"},   {8, "FPE_FLTSUB"},
                             {14, "FPE_FLTUNK"}, {15, "FPE_CONDTRAP"}};
constexpr CodeName kSegv[] = {{1, "SEGV_MAPERR"}, {2, "SEGV_ACCERR"},  {3, "SEGV_BNDERR"},
                              {4, "SEGV_PKUERR"}, {5, "SEGV_ACCADI"},  {6, "SEGV_ADIDERR"},
                              {7, "SEGV_ADIPERR"}, {8, "SEGV_MTEAERR"}, {9, "SEGV_MTESERR"},
                              {10, "SEGV_CPERR"}};
constexpr CodeName kBus[] = {{1, "BUS_ADRALN"}, {2, "BUS_ADRERR"}, {3, "BUS_OBJERR"}, {4, "BUS_MCEERR_AR"},
                             {5, "BUS_MCEERR_AO"}};
constexpr CodeName kTrap[] = {{1, "TRAP_BRKPT"}, {2, "TRAP_TRACE"}, {3, "TRAP_BRANCH"},
                              {4, "TRAP_HWBKPT"}, {5, "TRAP_UNK"}, {6, "TRAP_PERF"}};
constexpr CodeName kSys[] = {{1, "SYS_SECCOMP"}, {2, "SYS_USER_DISPATCH"}};
// Codes <= 0 and SI_KERNEL, any signal; MIPS numbers SI_ASYNCIO, SI_TIMER, SI_MESGQ -2, -3, -4.
constexpr CodeName kAny[] = {{0, "SI_USER"},     {0x80, "SI_KERNEL"}, {-1, "SI_QUEUE"},  {-2, "SI_TIMER"},
                             {-3, "SI_MESGQ"},   {-4, "SI_ASYNCIO"}, {-5, "SI_SIGIO"},  {-6, "SI_TKILL"},
                             {-7, "SI_DETHREAD"}, {-60, "SI_ASYNCNL"}};
constexpr CodeName kAnyMips[] = {{-2, "SI_ASYNCIO"}, {-3, "SI_TIMER"}, {-4, "SI_MESGQ"}};

template <size_t N>
const char* find(const CodeName (&table)[N], int code) {
  for (const CodeName& c : table)
    if (c.code == code) return c.name;
  return nullptr;
}

}  // namespace

std::string signal_name(Arch arch, int signo) {
  if (signo <= 0 || signo > max_signal(arch)) return signo == 0 ? "" : "SIG" + std::to_string(signo);
  std::string_view n = portable(arch, signo);
  return n.empty() ? "SIG" + std::to_string(signo) : std::string(n);
}

std::string signal_description(Arch arch, int signo) {
  if (const SignalText* t = text(arch, signo)) return t->description;
  if (signo >= 32 && signo <= max_signal(arch)) return "Real-time event " + std::to_string(signo);
  return "Unknown signal";
}

std::string signal_code_name(Arch arch, int signo, int code) {
  if (code <= 0 || code == 0x80) {
    if (arch == Arch::kMips32)
      if (const char* n = find(kAnyMips, code)) return n;
    const char* n = find(kAny, code);
    return n ? n : "";
  }
  const std::string_view s = portable(arch, signo);
  const char* n = s == "SIGILL"    ? find(kIll, code)
                  : s == "SIGFPE"  ? find(kFpe, code)
                  : s == "SIGSEGV" ? find(kSegv, code)
                  : s == "SIGBUS"  ? find(kBus, code)
                  : s == "SIGTRAP" ? find(kTrap, code)
                  : s == "SIGSYS"  ? find(kSys, code)
                                   : nullptr;
  return n ? n : "";
}

bool signal_has_fault_address(Arch arch, int signo, int code) {
  if (code <= 0 || code == 0x80) return false;
  const std::string_view s = portable(arch, signo);
  return s == "SIGILL" || s == "SIGFPE" || s == "SIGSEGV" || s == "SIGBUS" || s == "SIGTRAP";
}

}  // namespace stackprov
