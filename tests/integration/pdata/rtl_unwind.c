/* SPDX-License-Identifier: Apache-2.0 */
/* The oracle of the pdata differential test (doc/windows.md): RtlVirtualUnwind, run under wine on
 * fabricated states. stdin: "module NAME" lines ("self", or a DLL/EXE name or path to load without
 * running it), then "state M RVA R0..R15" lines (hex; registers in CONTEXT order rax, rcx, rdx,
 * rbx, rsp, rbp, rsi, rdi, r8..r15). The stack memory is kMemSize bytes at kMemBase, filled from
 * the seed in argv[1] with splitmix64 (the test's own walk makes the same bytes). stdout: "module
 * I BASE", then per state "result STATUS RIP R0..R15" (STATUS: leaf or unwind). */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define kMemBase 0x200000000ull
#define kMemSize (4u << 20)
#define kMaxModules 16

static uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: rtl_unwind SEED < commands\n");
    return 2;
  }
  uint64_t seed = strtoull(argv[1], NULL, 16);
  uint8_t* mem = VirtualAlloc((void*)kMemBase, kMemSize, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (mem != (uint8_t*)kMemBase) {
    printf("error VirtualAlloc at 0x%llx: %lu\n", kMemBase, GetLastError());
    return 1;
  }
  for (uint32_t i = 0; i < kMemSize / 8; i++) {
    uint64_t w = splitmix64(&seed);
    memcpy(mem + 8 * (size_t)i, &w, 8);
  }
  uint64_t bases[kMaxModules];
  int nmod = 0;
  char line[1024];
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "module ", 7) == 0) {
      char* name = line + 7;
      name[strcspn(name, "\r\n")] = 0;
      HMODULE h = strcmp(name, "self") == 0 ? GetModuleHandleA(NULL) : GetModuleHandleA(name);
      if (h == NULL) h = LoadLibraryExA(name, NULL, DONT_RESOLVE_DLL_REFERENCES);
      if (h == NULL || nmod == kMaxModules) {
        printf("error module %s: %lu\n", name, GetLastError());
        return 1;
      }
      bases[nmod] = (uint64_t)(uintptr_t)h;
      printf("module %d 0x%llx\n", nmod, (unsigned long long)bases[nmod]);
      nmod++;
      continue;
    }
    int m;
    unsigned long long rva, r[16];
    if (sscanf(line,
               "state %d %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx",
               &m, &rva, &r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &r[8], &r[9], &r[10], &r[11],
               &r[12], &r[13], &r[14], &r[15]) != 18 ||
        m < 0 || m >= nmod) {
      printf("error bad line: %s", line);
      return 1;
    }
    CONTEXT ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ContextFlags = CONTEXT_FULL;
    for (int i = 0; i < 16; i++) (&ctx.Rax)[i] = r[i];
    ctx.Rip = bases[m] + rva;
    ULONG64 image_base = 0, frame = 0;
    PRUNTIME_FUNCTION f = RtlLookupFunctionEntry(ctx.Rip, &image_base, NULL);
    void* handler_data = NULL;
    if (f != NULL) {
      RtlVirtualUnwind(UNW_FLAG_NHANDLER, image_base, ctx.Rip, f, &ctx, &handler_data, &frame, NULL);
    } else {
      /* A leaf (no entry): the documented rule, as Windows' callers apply it themselves (wine 8.0's
       * RtlVirtualUnwind reads through a NULL entry). */
      ctx.Rip = *(ULONG64*)(uintptr_t)ctx.Rsp;
      ctx.Rsp += 8;
    }
    printf("result %s 0x%llx", f ? "unwind" : "leaf", (unsigned long long)ctx.Rip);
    for (int i = 0; i < 16; i++) printf(" 0x%llx", (unsigned long long)(&ctx.Rax)[i]);
    printf("\n");
  }
  fflush(stdout);
  return 0;
}
