/* SPDX-License-Identifier: Apache-2.0 */
/* The C side of the snapshot round trip (test_snapshot.py), through the public C ABI only:
 *   snapshot_peer dump FILE    parse a serialized snapshot, print its fields and its unwound pcs
 *   snapshot_peer capture FILE capture this thread, write the serialized snapshot to FILE and
 *                              print the same dump of it
 * Dump lines: "pid N", "tid N", "arch NAME", "reg R 0xV" (DWARF 0..16 that are set),
 * "module PATH 0xSTART 0xEND 0xLOAD_BIAS BUILDID", "pc 0xV" per frame, "stop REASON". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stackprov/stackprov.h"

static int die(const char* what, int rc) {
  fprintf(stderr, "snapshot_peer: %s: %s\n", what, sprov_last_error_message());
  return rc ? 1 : 1;
}

static int dump(const sprov_snapshot* snap) {
  printf("pid %lld\ntid %lld\narch %s\n", (long long)sprov_snapshot_pid(snap), (long long)sprov_snapshot_tid(snap),
         sprov_arch_name(sprov_snapshot_arch(snap)));
  for (unsigned r = 0; r <= 16; r++) {
    uint64_t v = 0;
    if (sprov_snapshot_reg(snap, r, &v) == 0) printf("reg %u 0x%llx\n", r, (unsigned long long)v);
  }
  for (size_t i = 0; i < sprov_snapshot_module_count(snap); i++) {
    SPROV_OPTS(sprov_module_info, m);
    if (sprov_snapshot_module(snap, i, &m) != 0) return die("module", 1);
    printf("module %s 0x%llx 0x%llx 0x%llx ", m.path, (unsigned long long)m.start, (unsigned long long)m.end,
           (unsigned long long)m.load_bias);
    for (uint32_t k = 0; k < m.build_id_len; k++) printf("%02x", m.build_id[k]);
    printf("\n");
  }
  sprov_context* ctx = NULL;
  sprov_unwinder* uw = NULL;
  sprov_stack* st = NULL;
  int rc;
  if ((rc = sprov_context_new(NULL, &ctx)) != 0) return die("context", rc);
  if ((rc = sprov_unwinder_new(ctx, NULL, &uw)) != 0) return die("unwinder", rc);
  if ((rc = sprov_unwinder_unwind(uw, snap, &st)) != 0) return die("unwind", rc);
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    SPROV_OPTS(sprov_frame, f);
    if (sprov_stack_frame(st, i, &f) != 0) return die("frame", 1);
    printf("pc 0x%llx\n", (unsigned long long)f.pc);
  }
  printf("stop %s\n", sprov_stop_reason_name(sprov_stack_stop_reason(st)));
  sprov_stack_free(st);
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "dump") != 0 && strcmp(argv[1], "capture") != 0)) {
    fprintf(stderr, "usage: snapshot_peer dump|capture FILE\n");
    return 2;
  }
  sprov_snapshot* snap = NULL;
  int rc;
  if (strcmp(argv[1], "dump") == 0) {
    FILE* f = fopen(argv[2], "rb");
    if (!f) return perror(argv[2]), 1;
    static char buf[64 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    if ((rc = sprov_snapshot_deserialize(buf, n, &snap)) != 0) return die(argv[2], rc);
  } else {
    sprov_context* ctx = NULL;
    if ((rc = sprov_context_new(NULL, &ctx)) != 0) return die("context", rc);
    if ((rc = sprov_snapshot_capture_self(ctx, NULL, &snap)) != 0) return die("capture", rc);
    sprov_context_free(ctx);
    void* out = NULL;
    size_t len = 0;
    if ((rc = sprov_snapshot_serialize(snap, &out, &len)) != 0) return die("serialize", rc);
    FILE* f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, len, f) != len || fclose(f) != 0) return perror(argv[2]), 1;
    sprov_free(out);
  }
  rc = dump(snap);
  sprov_snapshot_free(snap);
  return rc;
}
