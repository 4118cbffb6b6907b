/* SPDX-License-Identifier: Apache-2.0 */
/* The thin C layer over the Mach calls the live macOS capture uses (doc/macos.md "The live Mach
 * reader"). mach_task_darwin.c implements it with the Mach API (macOS only; syntax-checked here by
 * the test mach_api_syntax for arm64 and x86_64 targets, against mach_decls.h when there is no SDK);
 * mach_task_none.cpp elsewhere, where every call returns SPROV_MACH_UNSUPPORTED. Plain C, no
 * allocation: the C++ side (mach_capture.cpp) owns every buffer. Returns 0 or a kern_return_t
 * (positive), or SPROV_MACH_UNSUPPORTED. */
#ifndef STACKPROV_MACH_API_H
#define STACKPROV_MACH_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPROV_MACH_UNSUPPORTED (-1)
#define SPROV_MACH_ARCH_X86_64 1
#define SPROV_MACH_ARCH_ARM64 2
/* Registers in sprov_mach_thread_state's out array. x86_64: rax rbx rcx rdx rdi rsi rbp rsp r8..r15
 * rip rflags (x86_thread_state64_t's order, 18 words). arm64: x0..x28, fp, lr, sp, pc (33 words; on
 * arm64e pc, lr, sp and fp as stored: signed, the C++ side strips them). */
#define SPROV_MACH_MAX_REGS 34

/* Byte offsets in a 64-bit process's struct dyld_all_image_infos and struct dyld_image_info
 * (<mach-o/dyld_images.h>), which dyld_images.cpp parses from bytes read out of the target;
 * mach_task_darwin.c asserts them against the structures' layout for both architectures. */
#define SPROV_DYLD_INFOS_VERSION 0          /* uint32_t version */
#define SPROV_DYLD_INFOS_COUNT 4            /* uint32_t infoArrayCount */
#define SPROV_DYLD_INFOS_ARRAY 8            /* const struct dyld_image_info* infoArray */
#define SPROV_DYLD_INFOS_DYLD_LOAD 32       /* dyldImageLoadAddress (version >= 2) */
#define SPROV_DYLD_INFOS_DYLD_PATH 192      /* const char* dyldPath (version >= 15) */
#define SPROV_DYLD_INFOS_MIN_SIZE 40        /* through dyldImageLoadAddress */
#define SPROV_DYLD_IMAGE_INFO_SIZE 24       /* sizeof(struct dyld_image_info) */
#define SPROV_DYLD_IMAGE_LOAD 0             /* imageLoadAddress */
#define SPROV_DYLD_IMAGE_PATH 8             /* imageFilePath */

/* task_for_pid(mach_task_self(), pid, task) */
int sprov_mach_task_for_pid(int pid, uint32_t* task);
/* The task's threads (task_threads), at most `max` copied to `threads`; *count is how many the task
 * has (more than max: the caller retries with more room). The kernel's array is deallocated. */
int sprov_mach_task_threads(uint32_t task, uint32_t* threads, uint32_t max, uint32_t* count);
int sprov_mach_thread_suspend(uint32_t thread);
int sprov_mach_thread_resume(uint32_t thread);
/* thread_info(THREAD_IDENTIFIER_INFO).thread_id: the system-wide thread id. */
int sprov_mach_thread_id(uint32_t thread, uint64_t* tid);
/* thread_get_state with x86_THREAD_STATE64 or ARM_THREAD_STATE64 (`arch`); *nregs words written. */
int sprov_mach_thread_state(uint32_t thread, int arch, uint64_t regs[SPROV_MACH_MAX_REGS], uint32_t* nregs);
/* mach_vm_read_overwrite of all `len` bytes into buf (a partial read is a failure). */
int sprov_mach_read(uint32_t task, uint64_t addr, void* buf, uint64_t len);
/* task_info(TASK_DYLD_INFO): the address, size and format (TASK_DYLD_ALL_IMAGE_INFO_64 = 1) of the
 * task's dyld_all_image_infos. */
int sprov_mach_dyld_info(uint32_t task, uint64_t* addr, uint64_t* size, int32_t* format);
/* mach_port_deallocate of a port this process holds a right to (a thread or the task). */
void sprov_mach_port_release(uint32_t port);

#ifdef __cplusplus
}
#endif

#endif
