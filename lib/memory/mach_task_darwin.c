/* SPDX-License-Identifier: Apache-2.0 */
/* mach_api.h on macOS: the Mach calls of the live capture (doc/macos.md "The live Mach reader").
 * Built on Apple platforms only; here it is syntax-checked (test mach_api_syntax) against
 * mach_decls.h for arm64 and x86_64. It has NOT run: there is no macOS here. */
#include "memory/mach_api.h"

#include <stddef.h>

#if __has_include(<mach/mach.h>)
#include <mach-o/dyld_images.h>
#include <mach/mach.h>
#include <mach/mach_vm.h>
#else
#include "memory/mach_decls.h"
#endif

/* The byte offsets dyld_images.cpp parses are the 64-bit structures' (both architectures are LP64). */
_Static_assert(sizeof(void*) == 8, "a 64-bit target");
_Static_assert(offsetof(struct dyld_all_image_infos, version) == SPROV_DYLD_INFOS_VERSION, "version");
_Static_assert(offsetof(struct dyld_all_image_infos, infoArrayCount) == SPROV_DYLD_INFOS_COUNT, "infoArrayCount");
_Static_assert(offsetof(struct dyld_all_image_infos, infoArray) == SPROV_DYLD_INFOS_ARRAY, "infoArray");
_Static_assert(offsetof(struct dyld_all_image_infos, dyldImageLoadAddress) == SPROV_DYLD_INFOS_DYLD_LOAD,
               "dyldImageLoadAddress");
_Static_assert(offsetof(struct dyld_all_image_infos, dyldPath) == SPROV_DYLD_INFOS_DYLD_PATH, "dyldPath");
_Static_assert(sizeof(struct dyld_image_info) == SPROV_DYLD_IMAGE_INFO_SIZE, "dyld_image_info");
_Static_assert(offsetof(struct dyld_image_info, imageLoadAddress) == SPROV_DYLD_IMAGE_LOAD, "imageLoadAddress");
_Static_assert(offsetof(struct dyld_image_info, imageFilePath) == SPROV_DYLD_IMAGE_PATH, "imageFilePath");
_Static_assert(sizeof(x86_thread_state64_t) == 21 * 8, "x86_thread_state64_t");
_Static_assert(sizeof(arm_thread_state64_t) == 34 * 8, "arm_thread_state64_t");

int sprov_mach_task_for_pid(int pid, uint32_t* task) {
  mach_port_t t = 0;
  const kern_return_t kr = task_for_pid(mach_task_self(), pid, &t);
  if (kr != KERN_SUCCESS) return kr;
  *task = t;
  return 0;
}

int sprov_mach_task_threads(uint32_t task, uint32_t* threads, uint32_t max, uint32_t* count) {
  thread_act_array_t list = NULL;
  mach_msg_type_number_t n = 0;
  const kern_return_t kr = task_threads(task, &list, &n);
  if (kr != KERN_SUCCESS) return kr;
  for (mach_msg_type_number_t i = 0; i < n; i++) {
    if (i < max) {
      threads[i] = list[i];
    } else {
      mach_port_deallocate(mach_task_self(), list[i]);  /* not handed out: its right is released */
    }
  }
  *count = n;
  vm_deallocate(mach_task_self(), (vm_address_t)list, (vm_size_t)n * sizeof(list[0]));
  return 0;
}

int sprov_mach_thread_suspend(uint32_t thread) { return thread_suspend(thread); }
int sprov_mach_thread_resume(uint32_t thread) { return thread_resume(thread); }

int sprov_mach_thread_id(uint32_t thread, uint64_t* tid) {
  thread_identifier_info_data_t info;
  mach_msg_type_number_t n = THREAD_IDENTIFIER_INFO_COUNT;
  const kern_return_t kr = thread_info(thread, THREAD_IDENTIFIER_INFO, (thread_info_t)&info, &n);
  if (kr != KERN_SUCCESS) return kr;
  *tid = info.thread_id;
  return 0;
}

int sprov_mach_thread_state(uint32_t thread, int arch, uint64_t regs[SPROV_MACH_MAX_REGS], uint32_t* nregs) {
  if (arch == SPROV_MACH_ARCH_X86_64) {
    x86_thread_state64_t st;
    mach_msg_type_number_t n = x86_THREAD_STATE64_COUNT;
    const kern_return_t kr = thread_get_state(thread, x86_THREAD_STATE64, (thread_state_t)&st, &n);
    if (kr != KERN_SUCCESS) return kr;
    const uint64_t v[18] = {st.rax, st.rbx, st.rcx, st.rdx, st.rdi, st.rsi, st.rbp, st.rsp, st.r8,
                            st.r9,  st.r10, st.r11, st.r12, st.r13, st.r14, st.r15, st.rip, st.rflags};
    for (int i = 0; i < 18; i++) regs[i] = v[i];
    *nregs = 18;
    return 0;
  }
  if (arch == SPROV_MACH_ARCH_ARM64) {
    arm_thread_state64_t st;
    mach_msg_type_number_t n = ARM_THREAD_STATE64_COUNT;
    const kern_return_t kr = thread_get_state(thread, ARM_THREAD_STATE64, (thread_state_t)&st, &n);
    if (kr != KERN_SUCCESS) return kr;
    const uint64_t* words = (const uint64_t*)&st; /* x0..x28, fp, lr, sp, pc as stored (signed on arm64e) */
    for (int i = 0; i < 33; i++) regs[i] = words[i];
    *nregs = 33;
    return 0;
  }
  return SPROV_MACH_UNSUPPORTED;
}

int sprov_mach_read(uint32_t task, uint64_t addr, void* buf, uint64_t len) {
  mach_vm_size_t got = 0;
  const kern_return_t kr = mach_vm_read_overwrite(task, addr, len, (mach_vm_address_t)(uintptr_t)buf, &got);
  if (kr != KERN_SUCCESS) return kr;
  return got == len ? 0 : SPROV_MACH_UNSUPPORTED;
}

int sprov_mach_dyld_info(uint32_t task, uint64_t* addr, uint64_t* size, int32_t* format) {
  task_dyld_info_data_t info;
  mach_msg_type_number_t n = TASK_DYLD_INFO_COUNT;
  const kern_return_t kr = task_info(task, TASK_DYLD_INFO, (task_info_t)&info, &n);
  if (kr != KERN_SUCCESS) return kr;
  *addr = info.all_image_info_addr;
  *size = info.all_image_info_size;
  *format = info.all_image_info_format;
  return 0;
}

void sprov_mach_port_release(uint32_t port) { mach_port_deallocate(mach_task_self(), port); }
