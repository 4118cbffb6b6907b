/* SPDX-License-Identifier: Apache-2.0 */
/* Our own declarations of the few Mach calls, constants and structures mach_task_darwin.c uses, as
 * Apple documents them (<mach/mach.h>, <mach/mach_vm.h>, <mach/thread_status.h>, <mach-o/dyld_images.h>),
 * for a build with no SDK: the test mach_api_syntax compiles mach_task_darwin.c against them with
 * clang-16 --target={arm64,x86_64}-apple-macos11 -ffreestanding -fsyntax-only. On a Mac the SDK's
 * headers are used instead. The dyld structures here are checked against the byte offsets
 * dyld_images.hpp parses (static asserts in mach_task_darwin.c). */
#ifndef STACKPROV_MACH_DECLS_H
#define STACKPROV_MACH_DECLS_H

#include <stdbool.h>
#include <stdint.h>

typedef int kern_return_t;
typedef unsigned int natural_t;
typedef int integer_t;
typedef natural_t mach_port_t;
typedef mach_port_t task_t;
typedef mach_port_t thread_act_t;
typedef mach_port_t ipc_space_t;
typedef mach_port_t vm_map_t;
typedef mach_port_t mach_port_name_t;
typedef thread_act_t* thread_act_array_t;
typedef natural_t mach_msg_type_number_t;
typedef uint64_t mach_vm_address_t;
typedef uint64_t mach_vm_size_t;
typedef uintptr_t vm_address_t;
typedef uintptr_t vm_size_t;
typedef int thread_state_flavor_t;
typedef natural_t* thread_state_t;
typedef natural_t task_flavor_t;
typedef integer_t* task_info_t;
typedef natural_t thread_flavor_t;
typedef integer_t* thread_info_t;

#define KERN_SUCCESS 0
#define TASK_DYLD_INFO 17
#define THREAD_IDENTIFIER_INFO 4
#define x86_THREAD_STATE64 4
#define ARM_THREAD_STATE64 6

extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_

typedef struct {
  uint64_t rax, rbx, rcx, rdx, rdi, rsi, rbp, rsp, r8, r9, r10, r11, r12, r13, r14, r15, rip, rflags, cs, fs, gs;
} x86_thread_state64_t;
#define x86_THREAD_STATE64_COUNT ((mach_msg_type_number_t)(sizeof(x86_thread_state64_t) / sizeof(int)))

typedef struct {
  uint64_t x[29];
  uint64_t fp, lr, sp, pc;
  uint32_t cpsr;
  uint32_t flags; /* __pad, or __opaque_flags on arm64e */
} arm_thread_state64_t;
#define ARM_THREAD_STATE64_COUNT ((mach_msg_type_number_t)(sizeof(arm_thread_state64_t) / sizeof(uint32_t)))

#pragma pack(push, 4)
struct task_dyld_info {
  mach_vm_address_t all_image_info_addr;
  mach_vm_size_t all_image_info_size;
  integer_t all_image_info_format;
};
#pragma pack(pop)
typedef struct task_dyld_info task_dyld_info_data_t;
#define TASK_DYLD_INFO_COUNT ((mach_msg_type_number_t)(sizeof(task_dyld_info_data_t) / sizeof(natural_t)))

struct thread_identifier_info {
  uint64_t thread_id;
  uint64_t thread_handle;
  uint64_t dispatch_qaddr;
};
typedef struct thread_identifier_info thread_identifier_info_data_t;
#define THREAD_IDENTIFIER_INFO_COUNT \
  ((mach_msg_type_number_t)(sizeof(thread_identifier_info_data_t) / sizeof(natural_t)))

struct mach_header;
struct dyld_image_info {
  const struct mach_header* imageLoadAddress;
  const char* imageFilePath;
  uintptr_t imageFileModDate;
};
struct dyld_all_image_infos {
  uint32_t version;
  uint32_t infoArrayCount;
  const struct dyld_image_info* infoArray;
  void* notification;
  bool processDetachedFromSharedRegion;
  bool libSystemInitialized;
  const struct mach_header* dyldImageLoadAddress;
  void* jitInfo;
  const char* dyldVersion;
  const char* errorMessage;
  uintptr_t terminationFlags;
  void* coreSymbolicationShmPage;
  uintptr_t systemOrderFlag;
  uintptr_t uuidArrayCount;
  const void* uuidArray;
  struct dyld_all_image_infos* dyldAllImageInfosAddress;
  uintptr_t initialImageCount;
  uintptr_t errorKind;
  const char* errorClientOfDylibPath;
  const char* errorTargetDylibPath;
  const char* errorSymbol;
  uintptr_t sharedCacheSlide;
  uint8_t sharedCacheUUID[16];
  uintptr_t sharedCacheBaseAddress;
  uint64_t infoArrayChangeTimestamp;
  const char* dyldPath;
};

kern_return_t task_for_pid(mach_port_t target_tport, int pid, mach_port_t* t);
kern_return_t task_threads(task_t target_task, thread_act_array_t* act_list, mach_msg_type_number_t* act_listCnt);
kern_return_t thread_suspend(thread_act_t target_act);
kern_return_t thread_resume(thread_act_t target_act);
kern_return_t thread_get_state(thread_act_t target_act, thread_state_flavor_t flavor, thread_state_t old_state,
                               mach_msg_type_number_t* old_stateCnt);
kern_return_t thread_info(thread_act_t target_act, thread_flavor_t flavor, thread_info_t thread_info_out,
                          mach_msg_type_number_t* thread_info_outCnt);
kern_return_t task_info(task_t target_task, task_flavor_t flavor, task_info_t task_info_out,
                        mach_msg_type_number_t* task_info_outCnt);
kern_return_t mach_vm_read_overwrite(vm_map_t target_task, mach_vm_address_t address, mach_vm_size_t size,
                                     mach_vm_address_t data, mach_vm_size_t* outsize);
kern_return_t vm_deallocate(vm_map_t target_task, vm_address_t address, vm_size_t size);
kern_return_t mach_port_deallocate(ipc_space_t task, mach_port_name_t name);

#endif
