// SPDX-License-Identifier: Apache-2.0
// stackprov command line: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
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

int main(int argc, char** argv) {
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
