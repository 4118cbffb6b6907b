/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the modules of the fast path's address space of a live process (sprov_address_space_new
   with its pid, from its /proc/PID/maps): "start end path build-id-hex" per line, then the
   address space's warnings on stderr.  Usage: as_modules PID */
#include <stdio.h>
#include <stdlib.h>

#include "stackprov/stackprov.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: as_modules PID\n");
    return 2;
  }
  sprov_context* ctx = NULL;
  sprov_address_space* as = NULL;
  SPROV_OPTS(sprov_address_space_opts, ao, .pid = atoll(argv[1]));
  if (sprov_context_new(NULL, &ctx) != 0 || sprov_address_space_new(ctx, &ao, &as) != 0) {
    fprintf(stderr, "as_modules: %s\n", sprov_last_error_message());
    return 1;
  }
  for (size_t i = 0; i < sprov_address_space_module_count(as); i++) {
    struct sprov_module_info m = {.sz = sizeof m};
    if (sprov_address_space_module(as, i, &m) != 0) return 1;
    printf("%llx %llx %s ", (unsigned long long)m.start, (unsigned long long)m.end, m.path);
    for (uint32_t b = 0; b < m.build_id_len; b++) printf("%02x", m.build_id[b]);
    printf("\n");
  }
  fputs(sprov_address_space_warnings(as), stderr);
  sprov_address_space_free(as);
  sprov_context_free(ctx);
  return 0;
}
