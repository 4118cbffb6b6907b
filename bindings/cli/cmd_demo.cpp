// SPDX-License-Identifier: Apache-2.0
// `stackprov demo`: capture this process's own demo workload in-process, unwind, symbolize, print.
#include <cstdio>
#include <cstring>

#include "command.hpp"
#include "print.hpp"
#include "stackprov/stackprov.h"

namespace {

struct DemoResult {
  sprov_snapshot* snap = nullptr;
  int err = 0;
};

// The demo workload: a short call chain that captures itself at the leaf.
__attribute__((noinline)) void demo_leaf(sprov_context* ctx, DemoResult* r) {
  r->err = sprov_snapshot_capture_self(ctx, nullptr, &r->snap);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void demo_middle(sprov_context* ctx, DemoResult* r, int depth) {
  if (depth > 0) demo_middle(ctx, r, depth - 1);
  else demo_leaf(ctx, r);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void demo_outer(sprov_context* ctx, DemoResult* r) {
  demo_middle(ctx, r, 2);
  asm volatile("" ::: "memory");
}

int cmd_demo(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf(
          "usage: stackprov demo [--json]\n\n"
          "Captures this process's own demo workload (demo_outer -> demo_middle x3 -> demo_leaf)\n"
          "in-process, unwinds the snapshot, symbolizes every frame and prints it with the method\n"
          "that found each frame and the reason the walk stopped.\n");
      return 0;
    }
    if (!strcmp(argv[i], "--json")) json = true;
    else {
      fprintf(stderr, "stackprov demo: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  sprov_context* ctx = nullptr;
  if (sprov_context_new(nullptr, &ctx) != 0) {
    fprintf(stderr, "stackprov demo: %s\n", sprov_last_error_message());
    return 1;
  }
  DemoResult r;
  demo_outer(ctx, &r);
  if (r.err != 0) {
    fprintf(stderr, "stackprov demo: capture failed: %s\n", sprov_last_error_message());
    sprov_context_free(ctx);
    return 1;
  }
  sprov_unwinder* uw = nullptr;
  sprov_symbolizer* sym = nullptr;
  sprov_stack* stack = nullptr;
  int rc = 0;
  if (sprov_unwinder_new(ctx, nullptr, &uw) != 0 || sprov_symbolizer_new(ctx, nullptr, &sym) != 0 ||
      sprov_unwinder_unwind(uw, r.snap, &stack) != 0) {
    fprintf(stderr, "stackprov demo: %s\n", sprov_last_error_message());
    rc = 1;
  } else if (json) {
    printf("{\"pid\":%lld,\"threads\":[", static_cast<long long>(sprov_snapshot_pid(r.snap)));
    stackprov_cli::print_stack_json(stdout, sym, stack, sprov_snapshot_tid(r.snap));
    printf("]}\n");
  } else {
    printf("stackprov %s demo: in-process capture of pid %lld (%zu modules)\n", sprov_version(),
           static_cast<long long>(sprov_snapshot_pid(r.snap)), sprov_snapshot_module_count(r.snap));
    stackprov_cli::print_stack_text(stdout, sym, stack, sprov_snapshot_tid(r.snap));
  }
  sprov_stack_free(stack);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(r.snap);
  sprov_context_free(ctx);
  return rc;
}

}  // namespace

STACKPROV_COMMAND("demo", "capture, unwind and symbolize this process's own demo workload", cmd_demo);
