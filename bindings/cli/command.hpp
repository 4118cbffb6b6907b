// SPDX-License-Identifier: Apache-2.0
// CLI subcommand registry: each command file registers itself with STACKPROV_COMMAND.
#pragma once

#include <string>
#include <vector>

namespace stackprov_cli {

using CommandFn = int (*)(int argc, char** argv);  // argv[0] is the subcommand name

struct Command {
  const char* name;
  const char* summary;
  CommandFn fn;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn fn) {
    command_registry().push_back(Command{name, summary, fn});
  }
};

#define STACKPROV_COMMAND(NAME, SUMMARY, FN) \
  static ::stackprov_cli::CommandRegistrar stackprov_cmd_##FN(NAME, SUMMARY, FN)

}  // namespace stackprov_cli
