/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the modules of an address space built from a perf.data file's MMAP/MMAP2/COMM records:
   "start end file_offset path" per line.  Usage: fast_as_dump PERF_DATA PID */
#include <stdio.h>
#include <stdlib.h>

#include "stackprov/stackprov.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: fast_as_dump PERF_DATA PID\n");
    return 2;
  }
  sprov_context* ctx = NULL;
  sprov_address_space* as = NULL;
  SPROV_OPTS(sprov_address_space_opts, ao, .pid = atoll(argv[2]), .flags = SPROV_AS_EMPTY);
  if (sprov_context_new(NULL, &ctx) != 0 || sprov_address_space_new(ctx, &ao, &as) != 0 ||
      sprov_address_space_load_perf_data(as, argv[1]) != 0) {
    fprintf(stderr, "fast_as_dump: %s\n", sprov_last_error_message());
    return 1;
  }
  printf("generation %llu\n", (unsigned long long)sprov_address_space_generation(as));
  for (size_t i = 0; i < sprov_address_space_module_count(as); i++) {
    struct sprov_module_info m = {.sz = sizeof m};
    if (sprov_address_space_module(as, i, &m) != 0) return 1;
    printf("%llx %llx %llx %s %u\n", (unsigned long long)m.start, (unsigned long long)m.end,
           (unsigned long long)m.file_offset, m.path, m.build_id_len);
  }
  fputs(sprov_address_space_warnings(as), stderr);
  sprov_address_space_free(as);
  sprov_context_free(ctx);
  return 0;
}
