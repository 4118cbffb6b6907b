// SPDX-License-Identifier: Apache-2.0
// stackprov command line: dispatches to the registered subcommands.
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "args.hpp"
#include "command.hpp"
#include "stackprov/stackprov.h"

namespace stackprov_cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace stackprov_cli

static void usage(FILE* f) {
  auto cmds = stackprov_cli::command_registry();
  std::sort(cmds.begin(), cmds.end(),
            [](const auto& a, const auto& b) { return strcmp(a.name, b.name) < 0; });
  fprintf(f,
          "usage: stackprov <command> [options]\n"
          "       stackprov help <command>    (the same as 'stackprov <command> --help')\n"
          "       stackprov --version | --help\n\n"
          "commands:\n");
  for (const auto& c : cmds) fprintf(f, "  %-18s %s\n", c.name, c.summary);
  fprintf(f,
          "\nOptions are GNU style: --name VALUE and --name=VALUE alike, short aliases such as\n"
          "-o FILE (--output) and -p PID (--pid) where a command has them, '--' ends the options.\n"
          "Run 'stackprov <command> --help' for a command's options.\n"
          "\n"
          "Exit status: 0 the work was done; 1 the work failed (one line on stderr says what and\n"
          "why); 2 usage error (an unknown command or option, a missing or bad value). Some\n"
          "commands add their own codes (trace-replay, demo: the gate's 3-7); each --help says.\n");
}

static const stackprov_cli::Command* find_command(const char* name) {
  for (const auto& c : stackprov_cli::command_registry())
    if (!strcmp(c.name, name)) return &c;
  return nullptr;
}

static int unknown_command(const char* name) {
  fprintf(stderr, "stackprov: unknown command '%s' (see 'stackprov --help' for the commands)\n", name);
  return stackprov_cli::kExitUsage;
}

/// Transparent huge pages for the heap (doc/benchmarks.md "Huge pages for the heap"): unwinding with
/// lines, symbolizing, importing a profile or building a bundle touches tens of MB of fresh heap
/// (line tables, unit indexes, frames), and a 4 KiB page fault costs 2-3 us on a paravirtualised VM.
/// For those commands, on a 64-bit glibc without an address-space or data limit, the main heap grows
/// once by a 256 MiB pad (address space), that window is advised MADV_HUGEPAGE (where THP is
/// "madvise" or "always", a fault per 2 MiB there) and blocks up to 32 MiB come from the heap; it is
/// not trimmed below 512 MiB, so resident memory stays at its peak until exit. Growth past the
/// window gets glibc's default pad and no advice. Not glibc.malloc.hugetlb=1 (that advises every
/// growth and mmap'd block), but without re-running the program to set a tunable. Off with
/// STACKPROV_MALLOC_HUGEPAGES=0. When the heap cannot grow by the pad (strict overcommit) the pad and
/// thresholds go back to glibc's default values (its dynamic mmap threshold stays off).
static void heap_huge_pages(const char* command) {
#if defined(__GLIBC__) && defined(M_TOP_PAD) && defined(MADV_HUGEPAGE)
  if constexpr (sizeof(void*) < 8) return;  // 32 MiB blocks are past a 32-bit heap's mmap threshold
  if (command == nullptr ||
      (strcmp(command, "symbolize") != 0 && strcmp(command, "perf-import") != 0 && strcmp(command, "bundle") != 0 &&
       strcmp(command, "stack") != 0))
    return;
  if (const char* off = getenv("STACKPROV_MALLOC_HUGEPAGES"); off != nullptr && strcmp(off, "0") == 0) return;
  constexpr size_t kPad = size_t{256} << 20, kHuge = size_t{2} << 20;
  // A limit would be spent on the pad (RLIMIT_AS, RLIMIT_DATA: also the stack tests' small limits).
  for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit rl{};
    if (getrlimit(res, &rl) != 0 || (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t{4} << 30))) return;
  }
  auto defaults = [] {
    mallopt(M_TOP_PAD, 128 << 10);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    mallopt(M_TRIM_THRESHOLD, 128 << 10);
  };
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0 || mallopt(M_TOP_PAD, static_cast<int>(kPad)) == 0 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * kPad)) == 0) {
    defaults();
    return;
  }
  // A block below the mmap threshold makes the heap grow by it and the pad now.
  void* before = sbrk(0);
  void* p = malloc(16u << 20);
  void* end = sbrk(0);
  const uintptr_t b = reinterpret_cast<uintptr_t>(before), e = reinterpret_cast<uintptr_t>(end);
  const bool grown = p != nullptr && before != reinterpret_cast<void*>(-1) && end != reinterpret_cast<void*>(-1) &&
                     e > b && e - b >= kPad / 2;  // else the block came from mmap: nothing advised
  if (grown) {
    const uintptr_t lo = (std::max(reinterpret_cast<uintptr_t>(p), b) + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
    const uintptr_t hi = e & ~(uintptr_t{kHuge} - 1);
    if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
  free(p);
  if (grown) mallopt(M_TOP_PAD, 128 << 10);  // later growth as usual
  else defaults();
#else
  (void)command;
#endif
}

int main(int argc, char** argv) {
  {
    const char* base = argc >= 1 && argv[0] != nullptr ? strrchr(argv[0], '/') : nullptr;
    base = base ? base + 1 : (argc >= 1 ? argv[0] : nullptr);
    // As dispatched below: a link named after a command runs it, any other name runs argv[1].
    heap_huge_pages(base != nullptr && find_command(base) != nullptr ? base : (argc >= 2 ? argv[1] : nullptr));
  }
  // Multi-call: invoked through a link named after a command (e.g. `trace-verify`),
  // run that command with the remaining arguments.
  if (argc >= 1 && argv[0] != nullptr) {
    const char* base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strcmp(base, "stackprov") != 0)
      if (const auto* c = find_command(base)) return c->fn(argc, argv);
  }
  if (argc < 2) {
    usage(stderr);
    return stackprov_cli::kExitUsage;
  }
  const char* name = argv[1];
  if (!strcmp(name, "--help") || !strcmp(name, "-h") || (!strcmp(name, "help") && argc == 2)) {
    usage(stdout);
    return stackprov_cli::kExitOk;
  }
  if (!strcmp(name, "help")) {  // help CMD = CMD --help
    if (argc > 3) {
      fprintf(stderr, "stackprov help: unexpected argument '%s' (usage: stackprov help <command>)\n", argv[3]);
      return stackprov_cli::kExitUsage;
    }
    const auto* c = find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    char help_opt[] = "--help";
    char* args[] = {const_cast<char*>(c->name), help_opt, nullptr};
    return c->fn(2, args);
  }
  if (!strcmp(name, "--version") || !strcmp(name, "version")) {
    printf("stackprov %s\n", sprov_version());
    return stackprov_cli::kExitOk;
  }
  if (const auto* c = find_command(name)) return c->fn(argc - 1, argv + 1);
  if (name[0] == '-') {
    fprintf(stderr, "stackprov: unknown option '%s' (see 'stackprov --help')\n", name);
    return stackprov_cli::kExitUsage;
  }
  return unknown_command(name);
}
