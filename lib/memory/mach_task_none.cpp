// SPDX-License-Identifier: Apache-2.0
// mach_api.h where there is no Mach API (every platform but Apple's): each call says so.
#include "memory/mach_api.h"

extern "C" {
int sprov_mach_task_for_pid(int, uint32_t*) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_task_threads(uint32_t, uint32_t*, uint32_t, uint32_t*) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_thread_suspend(uint32_t) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_thread_resume(uint32_t) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_thread_id(uint32_t, uint64_t*) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_thread_state(uint32_t, int, uint64_t*, uint32_t*) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_read(uint32_t, uint64_t, void*, uint64_t) { return SPROV_MACH_UNSUPPORTED; }
int sprov_mach_dyld_info(uint32_t, uint64_t*, uint64_t*, int32_t*) { return SPROV_MACH_UNSUPPORTED; }
void sprov_mach_port_release(uint32_t) {}
}
