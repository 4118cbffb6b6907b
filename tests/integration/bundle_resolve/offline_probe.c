/* SPDX-License-Identifier: Apache-2.0 */
/* Offline C ABI probe: sprov_symbolizer_addr_build_id and sprov_symbolizer_frame_ex on a hand-built snapshot, llvm-style output. */
/* usage: offline_probe STORE BUILD_ID_HEX MODULE_PATH < addresses (0x hex, one per line)
 * Context: SPROV_CTX_OFFLINE, bundle_store STORE, default policy. Prints, for every
 * address, the llvm-symbolizer --no-demangle style answer of sprov_symbolizer_addr_build_id,
 * then a line "--", then the answers of sprov_symbolizer_frame_ex for frame 0 of a
 * snapshot whose pc is the address (module MODULE_PATH with that build-id, load bias 0;
 * unwound first, between two access() marks, as unwinding is not symbolization),
 * then "==" and each distinct "resolver=R source=S bundle=B build_id=I" of those answers. The refusal
 * of sprov_symbolizer_addr_ex(MODULE_PATH) goes to stderr as "addr_ex: <message>".
 * Exit 1 on any unexpected failure (message on stderr). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stackprov/stackprov.h"

#define MAX_ADDRS 100000

static void print_answer(sprov_symbolizer* sym, const struct sprov_symbol_info* info) {
  for (uint32_t k = 0; k < info->frame_count; k++) {
    struct sprov_symbol_frame f;
    memset(&f, 0, sizeof(f));
    f.sz = sizeof(f);
    if (sprov_symbolizer_inline_frame(sym, k, &f) != 0) {
      fprintf(stderr, "inline_frame %u: %s\n", k, sprov_last_error_message());
      exit(1);
    }
    printf("%s\n%s:%u:%u\n", *f.name ? f.name : "??", *f.file ? f.file : "??", f.line, f.column);
  }
  printf("\n");
}

static int parse_hex_id(const char* hex, uint8_t* out, size_t cap, uint32_t* len) {
  size_t n = strlen(hex);
  if (n == 0 || n % 2 || n / 2 > cap) return -1;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
    out[i] = (uint8_t)v;
  }
  *len = (uint32_t)(n / 2);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: offline_probe STORE BUILD_ID_HEX MODULE_PATH < addresses\n");
    return 2;
  }
  static uint64_t addrs[MAX_ADDRS];
  size_t n = 0;
  char line[128];
  while (n < MAX_ADDRS && fgets(line, sizeof(line), stdin)) addrs[n++] = strtoull(line, NULL, 16);

  struct sprov_context_opts copts;
  memset(&copts, 0, sizeof(copts));
  copts.sz = sizeof(copts);
  copts.bundle_store = argv[1];
  copts.flags = SPROV_CTX_OFFLINE;
  sprov_context* ctx = NULL;
  sprov_symbolizer* sym = NULL;
  if (sprov_context_new(&copts, &ctx) != 0 || sprov_symbolizer_new(ctx, NULL, &sym) != 0) {
    fprintf(stderr, "context: %s\n", sprov_last_error_message());
    return 1;
  }
  const uint32_t flags = SPROV_SYMBOLIZE_NO_DEMANGLE | SPROV_SYMBOLIZE_LLVM_COMPAT;
  struct sprov_symbol_info info;
  memset(&info, 0, sizeof(info));
  info.sz = sizeof(info);
  if (sprov_symbolizer_addr_ex(sym, argv[3], addrs[0], flags, &info) == 0) {
    fprintf(stderr, "addr_ex opened module %s in an offline context\n", argv[3]);
    return 1;
  }
  fprintf(stderr, "addr_ex: %s\n", sprov_last_error_message());

  for (size_t i = 0; i < n; i++) {
    memset(&info, 0, sizeof(info));
    info.sz = sizeof(info);
    if (sprov_symbolizer_addr_build_id(sym, argv[2], addrs[i], flags, &info) != 0) {
      fprintf(stderr, "addr_build_id 0x%llx: %s\n", (unsigned long long)addrs[i], sprov_last_error_message());
      return 1;
    }
    print_answer(sym, &info);
  }
  printf("--\n");

  uint8_t id[64];
  uint32_t id_len = 0;
  if (parse_hex_id(argv[2], id, sizeof(id), &id_len) != 0) {
    fprintf(stderr, "bad build-id %s\n", argv[2]);
    return 1;
  }
  struct sprov_unwinder_opts uopts;
  memset(&uopts, 0, sizeof(uopts));
  uopts.sz = sizeof(uopts);
  uopts.max_frames = 1;
  sprov_unwinder* uw = NULL;
  if (sprov_unwinder_new(ctx, &uopts, &uw) != 0) {
    fprintf(stderr, "unwinder: %s\n", sprov_last_error_message());
    return 1;
  }
  static char provs[8][512];
  int nprov = 0;
  static sprov_stack* stacks[MAX_ADDRS];
  /* Unwinding is not symbolization: its file accesses lie between two marks a tracer sees. */
  (void)access("/nonexistent/offline-probe-unwind-begin", F_OK);
  for (size_t i = 0; i < n; i++) {
    sprov_snapshot* snap = NULL;
    struct sprov_module_info m;
    memset(&m, 0, sizeof(m));
    m.sz = sizeof(m);
    m.start = 0;
    m.end = 1ull << 40;
    m.path = argv[3];
    m.build_id = id;
    m.build_id_len = id_len;
    sprov_stack* stack = NULL;
    if (sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &snap) != 0 ||
        sprov_snapshot_set_reg(snap, 16, addrs[i]) != 0 || /* rip */
        sprov_snapshot_set_reg(snap, 7, 1ull << 44) != 0 ||  /* rsp */
        sprov_snapshot_add_module(snap, &m) != 0 || sprov_unwinder_unwind(uw, snap, &stack) != 0) {
      fprintf(stderr, "snapshot 0x%llx: %s\n", (unsigned long long)addrs[i], sprov_last_error_message());
      return 1;
    }
    sprov_snapshot_free(snap);
    stacks[i] = stack;
  }
  (void)access("/nonexistent/offline-probe-unwind-end", F_OK);
  for (size_t i = 0; i < n; i++) {
    sprov_stack* stack = stacks[i];
    memset(&info, 0, sizeof(info));
    info.sz = sizeof(info);
    if (sprov_stack_frame_count(stack) < 1 || sprov_symbolizer_frame_ex(sym, stack, 0, flags, &info) != 0) {
      fprintf(stderr, "frame_ex 0x%llx: %s\n", (unsigned long long)addrs[i], sprov_last_error_message());
      return 1;
    }
    print_answer(sym, &info);
    char prov[512];
    snprintf(prov, sizeof(prov), "resolver=%s source=%s bundle=%s build_id=%s", info.resolver_name,
             info.source_path, info.bundle_digest, info.source_build_id);
    int seen = 0;
    for (int k = 0; k < nprov; k++) seen |= strcmp(provs[k], prov) == 0;
    if (!seen && nprov < 8) memcpy(provs[nprov++], prov, sizeof(prov));
    sprov_stack_free(stack);
  }
  printf("==\n");
  for (int k = 0; k < nprov; k++) printf("%s\n", provs[k]);
  sprov_unwinder_free(uw);
  sprov_symbolizer_free(sym);
  sprov_context_free(ctx);
  return 0;
}
