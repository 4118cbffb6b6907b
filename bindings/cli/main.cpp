// SPDX-License-Identifier: Apache-2.0
// stackprov command line: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <cstring>

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
          "       stackprov --version | --help\n\n"
          "commands:\n");
  for (const auto& c : cmds) fprintf(f, "  %-18s %s\n", c.name, c.summary);
  fprintf(f, "\nRun 'stackprov <command> --help' for a command's options.\n");
}

int main(int argc, char** argv) {
  // Multi-call: invoked through a link named after a command (e.g. `trace-verify`),
  // run that command with the remaining arguments.
  if (argc >= 1 && argv[0] != nullptr) {
    const char* base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strcmp(base, "stackprov") != 0) {
      for (const auto& c : stackprov_cli::command_registry())
        if (!strcmp(c.name, base)) return c.fn(argc, argv);
    }
  }
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char* name = argv[1];
  if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(name, "--version") || !strcmp(name, "version")) {
    printf("stackprov %s\n", sprov_version());
    return 0;
  }
  for (const auto& c : stackprov_cli::command_registry()) {
    if (!strcmp(c.name, name)) return c.fn(argc - 1, argv + 1);
  }
  fprintf(stderr, "stackprov: unknown command '%s'\n\n", name);
  usage(stderr);
  return 2;
}
