/* SPDX-License-Identifier: Apache-2.0 */
/* bench/unwind: the snapshot file the fixtures write and bench_unwind reads. */
#ifndef STACKPROV_BENCH_UNWIND_SNAPSHOT_FILE_H
#define STACKPROV_BENCH_UNWIND_SNAPSHOT_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stackprov/stackprov.h"

/* File layout (little endian, the host's):
 *   "SPBSNAP1"                                   8 bytes
 *   records until EOF:
 *     uint8_t  source   (kSnapSourceNative / kSnapSourcePython)
 *     uint8_t  category length n, then n bytes of category name
 *     uint64_t length m, then m bytes of sprov_snapshot_serialize output */
#define SPB_SNAP_MAGIC "SPBSNAP1"
enum { kSnapSourceNative = 0, kSnapSourcePython = 1 };

/* Opens `path` for writing and writes the magic; NULL on failure. */
static inline FILE* spb_snap_open(const char* path) {
  FILE* f = fopen(path, "wb");
  if (f != NULL && fwrite(SPB_SNAP_MAGIC, 1, 8, f) != 8) {
    fclose(f);
    return NULL;
  }
  return f;
}

/* Serializes `snap` and appends it as one record; 0 or a negative error. */
static inline int spb_snap_write(FILE* f, int source, const char* category,
                                 const sprov_snapshot* snap) {
  void* bytes = NULL;
  size_t len = 0;
  int err = sprov_snapshot_serialize(snap, &bytes, &len);
  if (err != 0) return err;
  uint8_t src = (uint8_t)source;
  size_t n = strlen(category);
  uint8_t n8 = (uint8_t)(n > 255 ? 255 : n);
  uint64_t len64 = len;
  int ok = fwrite(&src, 1, 1, f) == 1 && fwrite(&n8, 1, 1, f) == 1 &&
           fwrite(category, 1, n8, f) == n8 && fwrite(&len64, 8, 1, f) == 1 &&
           fwrite(bytes, 1, len, f) == len;
  sprov_free(bytes);
  return ok ? 0 : -5; /* -EIO */
}

#endif /* STACKPROV_BENCH_UNWIND_SNAPSHOT_FILE_H */
