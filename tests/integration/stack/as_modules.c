/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the modules of the fast path's address space of a live process (sprov_address_space_new
   with its pid, from its /proc/PID/maps): "start end path build-id-hex" per line, then the
   address space's warnings on stderr.  Usage: as_modules PID [--refresh]
   With --refresh: after the listing, a line "--"; then, for each line read on stdin,
   sprov_address_space_refresh and the listing again, followed by "--". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stackprov/stackprov.h"

int main(int argc, char** argv) {
  const int refresh = argc == 3 && strcmp(argv[2], "--refresh") == 0;
  if (argc != 2 && !refresh) {
    fprintf(stderr, "usage: as_modules PID [--refresh]\n");
    return 2;
  }
  sprov_context* ctx = NULL;
  sprov_address_space* as = NULL;
  SPROV_OPTS(sprov_address_space_opts, ao, .pid = atoll(argv[1]));
  if (sprov_context_new(NULL, &ctx) != 0 || sprov_address_space_new(ctx, &ao, &as) != 0) {
    fprintf(stderr, "as_modules: %s\n", sprov_last_error_message());
    return 1;
  }
  char line[256];
  do {
    for (size_t i = 0; i < sprov_address_space_module_count(as); i++) {
      struct sprov_module_info m = {.sz = sizeof m};
      if (sprov_address_space_module(as, i, &m) != 0) return 1;
      printf("%llx %llx %s ", (unsigned long long)m.start, (unsigned long long)m.end, m.path);
      for (uint32_t b = 0; b < m.build_id_len; b++) printf("%02x", m.build_id[b]);
      printf("\n");
    }
    if (!refresh) break;
    printf("--\n");
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL) break;
    if (sprov_address_space_refresh(as) != 0) {
      fprintf(stderr, "as_modules: refresh: %s\n", sprov_last_error_message());
      return 1;
    }
  } while (1);
  fputs(sprov_address_space_warnings(as), stderr);
  sprov_address_space_free(as);
  sprov_context_free(ctx);
  return 0;
}
