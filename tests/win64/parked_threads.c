/* SPDX-License-Identifier: Apache-2.0 */
/* The second process of the win64 capture test (capture_test.py): three worker threads and the main
 * thread each descend tests/lib/win_chains.h's chain of functions of several frame kinds to park(),
 * which walks the thread's own stack with RtlCaptureContext + RtlLookupFunctionEntry + RtlVirtualUnwind, prints every
 * frame's rip and rsp, and then waits in WaitForSingleObject for an event nobody sets. park()'s own
 * .pdata range is printed too: a capture of the parked thread finds park at another rip (after the
 * wait's call) but at the same rsp, and every caller frame the same. The main thread parks last and
 * prints "ready" first, so that the test captures only once every thread waits. */
#include <windows.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>

#define CHAIN_BOTTOM park
#include "../lib/win_chains.h"

static CRITICAL_SECTION out_lock;
static HANDLE never;   /* set by nobody: the threads park on it */
static HANDLE walked;  /* a semaphore released by each worker after it printed its walk */

__attribute__((noinline)) static void park(int id) {
  CONTEXT c;
  RtlCaptureContext(&c);
  EnterCriticalSection(&out_lock);
  printf("thread %d %lu\n", id, (unsigned long)GetCurrentThreadId());
  print_rtl_walk(c);
  if (id == 0) printf("ready\n");
  fflush(stdout);
  LeaveCriticalSection(&out_lock);
  if (id != 0) ReleaseSemaphore(walked, 1, NULL);
  WaitForSingleObject(never, INFINITE);
  sink++;
}

static DWORD WINAPI worker(void* arg) {
  int id = (int)(intptr_t)arg;
  return (DWORD)chain(2 + 3 * id, id);
}

int main(void) {
  InitializeCriticalSection(&out_lock);
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  never = CreateEventA(NULL, TRUE, FALSE, NULL);
  walked = CreateSemaphoreA(NULL, 0, 3, NULL);
  ULONG64 base = 0;
  PRUNTIME_FUNCTION pf = RtlLookupFunctionEntry((ULONG64)(uintptr_t)park, &base, NULL);
  if (pf == NULL) {
    printf("error no RUNTIME_FUNCTION for park\n");
    return 1;
  }
  printf("pid %lu\n", (unsigned long)GetCurrentProcessId());
  printf("park %llx %llx\n", (unsigned long long)(base + pf->BeginAddress), (unsigned long long)(base + pf->EndAddress));
  for (int i = 1; i <= 3; i++) CloseHandle(CreateThread(NULL, 0, worker, (void*)(intptr_t)i, 0, NULL));
  for (int i = 1; i <= 3; i++) WaitForSingleObject(walked, INFINITE);
  return chain(4, 0);
}
