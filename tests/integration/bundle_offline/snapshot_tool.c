// SPDX-License-Identifier: Apache-2.0
// Test helper: capture a live process into serialized snapshot files, and unwind such files offline from a bundle store.
//
//   snapshot_tool save PID DIR            one file DIR/<tid>.snap per thread (module files are read)
//   snapshot_tool unwind STORE FILE...    SPROV_CTX_OFFLINE + STORE: one JSON line per file:
//                                         {"tid":n,"pcs":["0x..."],"methods":["..."],"stop":"..."}
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stackprov/stackprov.h"

static int die(const char* what) {
  fprintf(stderr, "snapshot_tool: %s: %s\n", what, sprov_last_error_message());
  return 1;
}

static int save(int64_t pid, const char* dir) {
  sprov_context* ctx = NULL;
  if (sprov_context_new(NULL, &ctx) != 0) return die("context");
  sprov_process* proc = NULL;
  if (sprov_process_capture(ctx, pid, NULL, &proc) != 0) return die("capture");
  for (size_t i = 0; i < sprov_process_thread_count(proc); i++) {
    const sprov_snapshot* s = sprov_process_thread(proc, i);
    void* bytes = NULL;
    size_t len = 0;
    if (sprov_snapshot_serialize(s, &bytes, &len) != 0) return die("serialize");
    char path[4096];
    snprintf(path, sizeof path, "%s/%lld.snap", dir, (long long)sprov_snapshot_tid(s));
    FILE* f = fopen(path, "wb");
    if (f == NULL || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
      fprintf(stderr, "snapshot_tool: cannot write %s\n", path);
      return 1;
    }
    sprov_free(bytes);
  }
  sprov_process_free(proc);
  sprov_context_free(ctx);
  return 0;
}

static int unwind(const char* store, int n, char** files) {
  struct sprov_context_opts copts;
  memset(&copts, 0, sizeof copts);
  copts.sz = sizeof copts;
  copts.bundle_store = store;
  copts.flags = SPROV_CTX_OFFLINE;
  sprov_context* ctx = NULL;
  if (sprov_context_new(&copts, &ctx) != 0) return die("context");
  sprov_unwinder* uw = NULL;
  if (sprov_unwinder_new(ctx, NULL, &uw) != 0) return die("unwinder");
  for (int k = 0; k < n; k++) {
    FILE* f = fopen(files[k], "rb");
    if (f == NULL) {
      fprintf(stderr, "snapshot_tool: cannot open %s\n", files[k]);
      return 1;
    }
    static unsigned char buf[64u << 20];
    const size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    sprov_snapshot* snap = NULL;
    if (sprov_snapshot_deserialize(buf, len, &snap) != 0) return die(files[k]);
    sprov_stack* st = NULL;
    if (sprov_unwinder_unwind(uw, snap, &st) != 0) return die("unwind");
    printf("{\"tid\":%lld,\"pcs\":[", (long long)sprov_snapshot_tid(snap));
    const size_t nf = sprov_stack_frame_count(st);
    for (size_t i = 0; i < nf; i++) {
      struct sprov_frame fr;
      memset(&fr, 0, sizeof fr);
      fr.sz = sizeof fr;
      if (sprov_stack_frame(st, i, &fr) != 0) return die("frame");
      printf("%s\"0x%llx\"", i ? "," : "", (unsigned long long)fr.pc);
    }
    printf("],\"methods\":[");
    for (size_t i = 0; i < nf; i++) {
      struct sprov_frame fr;
      memset(&fr, 0, sizeof fr);
      fr.sz = sizeof fr;
      sprov_stack_frame(st, i, &fr);
      printf("%s\"%s\"", i ? "," : "", sprov_method_name(fr.method));
    }
    printf("],\"stop\":\"%s\"}\n", sprov_stop_reason_name(sprov_stack_stop_reason(st)));
    sprov_stack_free(st);
    sprov_snapshot_free(snap);
  }
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "save") == 0) return save(strtoll(argv[2], NULL, 10), argv[3]);
  if (argc >= 4 && strcmp(argv[1], "unwind") == 0) return unwind(argv[2], argc - 3, argv + 3);
  fprintf(stderr, "usage: snapshot_tool save PID DIR | unwind STORE FILE...\n");
  return 2;
}
