/* SPDX-License-Identifier: Apache-2.0 */
/* A Windows program that walks its own threads' stacks with RtlCaptureContext +
 * RtlLookupFunctionEntry + RtlVirtualUnwind (pdata_walk_test.py): three threads and the main
 * thread each descend a chain of functions of several frame kinds (a frame register from alloca,
 * a large allocation, xmm registers saved across calls, plain pushes), capture their context at
 * the bottom and print it, their stack bytes from rsp to the stack's base, and every frame's rip
 * and rsp as RtlVirtualUnwind finds them. Then the module list (base, size, timestamp, path). */
#include <windows.h>
#include <psapi.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>

#define CHAIN_BOTTOM dump
#include "../../lib/win_chains.h"

static CRITICAL_SECTION out_lock;

static void dump(int id) {
  CONTEXT ctx;
  RtlCaptureContext(&ctx);
  EnterCriticalSection(&out_lock);
  printf("thread %d\n", id);
  printf("context");
  for (int i = 0; i < 16; i++) printf(" %llx", (unsigned long long)(&ctx.Rax)[i]);
  printf(" %llx\n", (unsigned long long)ctx.Rip);
  ULONG_PTR stack_lo = 0, stack_hi = 0;
  GetCurrentThreadStackLimits(&stack_lo, &stack_hi);
  uint64_t lo = ctx.Rsp & ~(uint64_t)63, hi = stack_hi;
  for (uint64_t a = lo; a < hi; a += 64) {
    printf("memory %llx ", (unsigned long long)a);
    const unsigned char* p = (const unsigned char*)(uintptr_t)a;
    for (int i = 0; i < 64; i++) printf("%02x", p[i]);
    printf("\n");
  }
  print_rtl_walk(ctx);
  fflush(stdout);
  LeaveCriticalSection(&out_lock);
}

static DWORD WINAPI worker(void* arg) {
  int id = (int)(intptr_t)arg;
  return (DWORD)chain(2 + id, id);
}

int main(void) {
  InitializeCriticalSection(&out_lock);
  setvbuf(stdout, NULL, _IOFBF, 1 << 20);
  HANDLE t[3];
  for (int i = 0; i < 3; i++) t[i] = CreateThread(NULL, 0, worker, (void*)(intptr_t)(i + 1), 0, NULL);
  WaitForMultipleObjects(3, t, TRUE, INFINITE);
  chain(4, 0);
  HMODULE mods[256];
  DWORD need = 0;
  if (!EnumProcessModules(GetCurrentProcess(), mods, sizeof mods, &need)) {
    printf("error EnumProcessModules %lu\n", GetLastError());
    return 1;
  }
  for (DWORD i = 0; i < need / sizeof(HMODULE) && i < 256; i++) {
    char path[MAX_PATH];
    MODULEINFO mi;
    if (!GetModuleFileNameA(mods[i], path, sizeof path) || !GetModuleInformation(GetCurrentProcess(), mods[i], &mi, sizeof mi))
      continue;
    const unsigned char* b = (const unsigned char*)mods[i];
    const IMAGE_NT_HEADERS64* nt = (const IMAGE_NT_HEADERS64*)(b + ((const IMAGE_DOS_HEADER*)b)->e_lfanew);
    printf("module %llx %lx %lx %s\n", (unsigned long long)(uintptr_t)mods[i], (unsigned long)mi.SizeOfImage,
           (unsigned long)nt->FileHeader.TimeDateStamp, path);
  }
  fflush(stdout);
  return 0;
}
