// SPDX-License-Identifier: Apache-2.0
// ABI lock: sizes and offsets of every public struct (LP64). Changing one of these breaks callers.
#include <cstddef>

#include "stackprov/kernel.h"
#include "stackprov/stackprov.h"

#define CHECK_SIZE(T, N) static_assert(sizeof(struct T) == (N), #T " size changed")
#define CHECK_OFF(T, F, N) static_assert(offsetof(struct T, F) == (N), #T "." #F " moved")

#if defined(__LP64__)
CHECK_SIZE(sprov_context_opts, 72);
CHECK_OFF(sprov_context_opts, bundle_store, 48);
CHECK_OFF(sprov_context_opts, resolvers, 56);
CHECK_OFF(sprov_context_opts, flags, 64);
CHECK_OFF(sprov_context_opts, sz, 0);
CHECK_OFF(sprov_context_opts, log_fn, 8);
CHECK_OFF(sprov_context_opts, log_user, 16);
CHECK_OFF(sprov_context_opts, log_level, 24);
CHECK_OFF(sprov_context_opts, module_cache_capacity, 28);
CHECK_OFF(sprov_context_opts, debug_dirs, 32);
CHECK_OFF(sprov_context_opts, sysroot, 40);

CHECK_SIZE(sprov_context_stats, 40);
CHECK_OFF(sprov_context_stats, module_cache_hits, 8);
CHECK_OFF(sprov_context_stats, modules_loaded, 32);

CHECK_SIZE(sprov_capture_opts, 16);
CHECK_OFF(sprov_capture_opts, max_stack_bytes, 8);
CHECK_OFF(sprov_capture_opts, skip_frames, 12);

CHECK_SIZE(sprov_module_info, 80);  // 64 before the identity fields (issue 32): older callers' sz
CHECK_OFF(sprov_module_info, start, 8);
CHECK_OFF(sprov_module_info, end, 16);
CHECK_OFF(sprov_module_info, file_offset, 24);
CHECK_OFF(sprov_module_info, load_bias, 32);
CHECK_OFF(sprov_module_info, path, 40);
CHECK_OFF(sprov_module_info, build_id, 48);
CHECK_OFF(sprov_module_info, build_id_len, 56);
CHECK_OFF(sprov_module_info, flags, 60);
CHECK_OFF(sprov_module_info, id_kind, 64);
CHECK_OFF(sprov_module_info, id_len, 68);
CHECK_OFF(sprov_module_info, id, 72);

CHECK_SIZE(sprov_unwinder_opts, 24);
CHECK_OFF(sprov_unwinder_opts, max_frames, 8);
CHECK_OFF(sprov_unwinder_opts, flags, 12);
CHECK_OFF(sprov_unwinder_opts, scan_words, 16);
CHECK_OFF(sprov_unwinder_opts, reserved, 20);

CHECK_SIZE(sprov_unwinder_stats, 40);
CHECK_OFF(sprov_unwinder_stats, rule_cache_hits, 8);
CHECK_OFF(sprov_unwinder_stats, walks, 32);

// Async boundaries (issue 35; doc/async-stacks.md).
CHECK_SIZE(sprov_coroutine_link, 72);
CHECK_SIZE(sprov_kernel_sampler_opts, 48);  // 32 before event_fds (issue 35): older callers' sz
CHECK_OFF(sprov_kernel_sampler_opts, reserved, 28);
CHECK_OFF(sprov_kernel_sampler_opts, event_fds, 32);
CHECK_OFF(sprov_kernel_sampler_opts, event_fd_count, 40);
CHECK_SIZE(sprov_kernel_stack_info, 48);  // stack --kernel (stackprov/kernel.h)
CHECK_OFF(sprov_kernel_stack_info, state, 8);
CHECK_OFF(sprov_kernel_stack_info, frame_count, 12);
CHECK_OFF(sprov_kernel_stack_info, syscall, 16);
CHECK_OFF(sprov_kernel_stack_info, user_sp, 24);
CHECK_OFF(sprov_kernel_stack_info, user_pc, 32);
CHECK_OFF(sprov_kernel_stack_info, reason, 40);
CHECK_SIZE(sprov_kernel_prototype, 24);
CHECK_OFF(sprov_kernel_prototype, prototype, 8);
CHECK_OFF(sprov_kernel_prototype, func_id, 16);
CHECK_OFF(sprov_kernel_prototype, flags, 20);
CHECK_SIZE(sprov_kernel_frame, 56);
CHECK_OFF(sprov_kernel_frame, prototype, 40);
CHECK_OFF(sprov_kernel_frame, btf_func_id, 48);
CHECK_OFF(sprov_kernel_frame, flags, 52);
CHECK_OFF(sprov_kernel_frame, symbol, 8);
CHECK_OFF(sprov_kernel_frame, symbol_offset, 16);
CHECK_OFF(sprov_kernel_frame, symbol_size, 24);
CHECK_OFF(sprov_kernel_frame, module, 32);
CHECK_OFF(sprov_coroutine_link, frame, 8);
CHECK_OFF(sprov_coroutine_link, slot, 16);
CHECK_OFF(sprov_coroutine_link, context, 24);
CHECK_OFF(sprov_coroutine_link, pc, 32);
CHECK_OFF(sprov_coroutine_link, sp, 40);
CHECK_OFF(sprov_coroutine_link, has_regs, 48);
CHECK_OFF(sprov_coroutine_link, module_index, 52);
CHECK_OFF(sprov_coroutine_link, module_offset, 56);
CHECK_OFF(sprov_coroutine_link, module_path, 64);
// folly's AsyncStackFrame / AsyncStackRoot (folly/tracing/AsyncStack.h), field for field.
CHECK_SIZE(sprov_async_frame, 24);
CHECK_OFF(sprov_async_frame, parent, 0);
CHECK_OFF(sprov_async_frame, return_address, 8);
CHECK_OFF(sprov_async_frame, root, 16);
CHECK_SIZE(sprov_async_root, 32);
CHECK_OFF(sprov_async_root, top_frame, 0);
CHECK_OFF(sprov_async_root, next_root, 8);
CHECK_OFF(sprov_async_root, stack_frame_ptr, 16);
CHECK_OFF(sprov_async_root, return_address, 24);
CHECK_SIZE(sprov_frame, 96);  // 72 before the identity and domain fields (issue 32)
CHECK_OFF(sprov_frame, pc, 8);
CHECK_OFF(sprov_frame, sp, 16);
CHECK_OFF(sprov_frame, cfa, 24);
CHECK_OFF(sprov_frame, module_offset, 32);
CHECK_OFF(sprov_frame, method, 40);
CHECK_OFF(sprov_frame, module_index, 44);
CHECK_OFF(sprov_frame, module_path, 48);
CHECK_OFF(sprov_frame, build_id, 56);
CHECK_OFF(sprov_frame, build_id_len, 64);
CHECK_OFF(sprov_frame, flags, 68);
CHECK_OFF(sprov_frame, id_kind, 72);
CHECK_OFF(sprov_frame, module_id_len, 76);
CHECK_OFF(sprov_frame, module_id, 80);
CHECK_OFF(sprov_frame, domain, 88);
CHECK_OFF(sprov_frame, reserved, 92);

CHECK_SIZE(sprov_symbolizer_opts, 16);
CHECK_OFF(sprov_symbolizer_opts, flags, 8);
CHECK_SIZE(sprov_render_opts, 48);
CHECK_OFF(sprov_render_opts, flags, 8);
CHECK_OFF(sprov_render_opts, reserved, 12);
CHECK_OFF(sprov_render_opts, tid, 16);
CHECK_OFF(sprov_render_opts, name, 24);
CHECK_OFF(sprov_render_opts, runtime_name, 32);
CHECK_OFF(sprov_render_opts, snapshot, 40);

CHECK_SIZE(sprov_process_opts, 40);
CHECK_OFF(sprov_process_opts, tid, 8);
CHECK_OFF(sprov_process_opts, max_stack_bytes, 16);
CHECK_OFF(sprov_process_opts, flags, 20);
CHECK_OFF(sprov_process_opts, exe, 24);
CHECK_OFF(sprov_process_opts, symbol_path, 32);

CHECK_SIZE(sprov_runtime_frame, 72);
CHECK_OFF(sprov_runtime_frame, runtime, 8);
CHECK_OFF(sprov_runtime_frame, function, 16);
CHECK_OFF(sprov_runtime_frame, qualname, 24);
CHECK_OFF(sprov_runtime_frame, file, 32);
CHECK_OFF(sprov_runtime_frame, line, 40);
CHECK_OFF(sprov_runtime_frame, flags, 44);
CHECK_OFF(sprov_runtime_frame, frame_address, 48);
CHECK_OFF(sprov_runtime_frame, code_address, 56);
CHECK_OFF(sprov_runtime_frame, native_index, 64);

CHECK_SIZE(sprov_process_info, 120);
CHECK_OFF(sprov_process_info, program, 8);
CHECK_OFF(sprov_process_info, command_line, 16);
CHECK_OFF(sprov_process_info, signal_tid, 24);
CHECK_OFF(sprov_process_info, signal, 32);
CHECK_OFF(sprov_process_info, signal_code, 36);
CHECK_OFF(sprov_process_info, fault_address, 40);
CHECK_OFF(sprov_process_info, has_siginfo, 48);
CHECK_OFF(sprov_process_info, has_fault_address, 52);
CHECK_OFF(sprov_process_info, signal_name, 56);
CHECK_OFF(sprov_process_info, signal_description, 64);
CHECK_OFF(sprov_process_info, signal_code_name, 72);
CHECK_OFF(sprov_process_info, flags, 80);
CHECK_OFF(sprov_process_info, reserved, 84);
CHECK_OFF(sprov_process_info, exception_code, 88);
CHECK_OFF(sprov_process_info, has_exception, 92);
CHECK_OFF(sprov_process_info, exception_address, 96);
CHECK_OFF(sprov_process_info, exception_tid, 104);
CHECK_OFF(sprov_process_info, exception_name, 112);

CHECK_SIZE(sprov_profile_info, 152);  // 128 before the truncation fields (issue 36): older callers' sz
CHECK_OFF(sprov_profile_info, kernel_note, 120);
CHECK_OFF(sprov_profile_info, missing_bytes, 128);
CHECK_OFF(sprov_profile_info, partial_bytes, 136);
CHECK_OFF(sprov_profile_info, truncation, 144);

CHECK_SIZE(sprov_profile_sample, 152);  // 136 before main_module (issue 36), 144 before runtime_state (issue 35)
CHECK_OFF(sprov_profile_sample, module_list, 96);
CHECK_OFF(sprov_profile_sample, modules, 128);
CHECK_OFF(sprov_profile_sample, main_module, 136);
CHECK_OFF(sprov_profile_sample, reserved2, 140);
CHECK_OFF(sprov_profile_sample, runtime_state, 144);
CHECK_OFF(sprov_profile_sample, runtime_frame_count, 148);
CHECK_SIZE(sprov_record_result, 80);  // 40 before the Python counts (issue 35): older callers' sz
CHECK_OFF(sprov_record_result, exit_status, 32);
CHECK_OFF(sprov_record_result, python_read, 40);
CHECK_OFF(sprov_record_result, python_processes, 72);

CHECK_SIZE(sprov_symbol, 64);
CHECK_OFF(sprov_symbol, name, 8);
CHECK_OFF(sprov_symbol, linkage_name, 16);
CHECK_OFF(sprov_symbol, sym_addr, 24);
CHECK_OFF(sprov_symbol, sym_size, 32);
CHECK_OFF(sprov_symbol, offset, 40);
CHECK_OFF(sprov_symbol, resolver, 48);
CHECK_OFF(sprov_symbol, source_path, 56);

CHECK_SIZE(sprov_frame_arg, 48);
CHECK_OFF(sprov_frame_arg, name, 8);
CHECK_OFF(sprov_frame_arg, type, 16);
CHECK_OFF(sprov_frame_arg, value, 24);
CHECK_OFF(sprov_frame_arg, reason, 32);
CHECK_OFF(sprov_frame_arg, status, 40);
CHECK_SIZE(sprov_symbol_frame, 72);
CHECK_OFF(sprov_symbol_frame, name, 8);
CHECK_OFF(sprov_symbol_frame, linkage_name, 16);
CHECK_OFF(sprov_symbol_frame, file, 24);
CHECK_OFF(sprov_symbol_frame, line, 32);
CHECK_OFF(sprov_symbol_frame, column, 36);
CHECK_OFF(sprov_symbol_frame, discriminator, 40);
CHECK_OFF(sprov_symbol_frame, start_line, 44);
CHECK_OFF(sprov_symbol_frame, start_file, 48);
CHECK_OFF(sprov_symbol_frame, start_address, 56);
CHECK_OFF(sprov_symbol_frame, has_start_address, 64);

CHECK_SIZE(sprov_resolve_attempt, 48);
CHECK_OFF(sprov_resolve_attempt, resolver, 8);
CHECK_OFF(sprov_resolve_attempt, looked_at, 16);
CHECK_OFF(sprov_resolve_attempt, outcome, 24);
CHECK_OFF(sprov_resolve_attempt, per_address, 28);
CHECK_OFF(sprov_resolve_attempt, outcome_name, 32);
CHECK_OFF(sprov_resolve_attempt, reason, 40);

CHECK_SIZE(sprov_symbol_info, 112);
CHECK_OFF(sprov_symbol_info, bundle_digest, 104);
CHECK_OFF(sprov_symbol_info, file, 24);
CHECK_OFF(sprov_symbol_info, line, 32);
CHECK_OFF(sprov_symbol_info, start_file, 48);
CHECK_OFF(sprov_symbol_info, start_address, 56);
CHECK_OFF(sprov_symbol_info, has_start_address, 64);
CHECK_OFF(sprov_symbol_info, frame_count, 68);
CHECK_OFF(sprov_symbol_info, resolver, 72);
CHECK_OFF(sprov_symbol_info, resolver_name, 80);
CHECK_OFF(sprov_symbol_info, source_path, 88);
CHECK_OFF(sprov_symbol_info, source_build_id, 96);
CHECK_SIZE(sprov_bundle_build_opts, 56);
CHECK_OFF(sprov_bundle_build_opts, names, 8);
CHECK_OFF(sprov_bundle_build_opts, debug_dirs, 16);
CHECK_OFF(sprov_bundle_build_opts, debug_dir_count, 24);
CHECK_OFF(sprov_bundle_build_opts, flags, 32);
CHECK_OFF(sprov_bundle_build_opts, reserved, 36);
CHECK_OFF(sprov_bundle_build_opts, progress, 40);
CHECK_OFF(sprov_bundle_build_opts, progress_ctx, 48);
CHECK_SIZE(sprov_bundle_module, 80);
CHECK_OFF(sprov_bundle_module, id_kind, 8);
CHECK_OFF(sprov_bundle_module, id_len, 12);
CHECK_OFF(sprov_bundle_module, id_hex, 16);
CHECK_OFF(sprov_bundle_module, name, 24);
CHECK_OFF(sprov_bundle_module, sha256_file, 32);
CHECK_OFF(sprov_bundle_module, sha256_debug, 40);
CHECK_OFF(sprov_bundle_module, range_count, 48);
CHECK_OFF(sprov_bundle_module, pad_count, 56);
CHECK_OFF(sprov_bundle_module, unwind_row_count, 64);
CHECK_OFF(sprov_bundle_module, debug_blob_size, 72);
CHECK_SIZE(sprov_bundle_frame, 24);
CHECK_OFF(sprov_bundle_frame, line, 16);
CHECK_OFF(sprov_bundle_frame, column, 20);
CHECK_SIZE(sprov_bundle_chain, 16);
CHECK_OFF(sprov_bundle_chain, frames, 8);
// The fast path (stackprov/fast.h). sprov_raw_frame is an array element with a fixed layout.
CHECK_SIZE(sprov_raw_frame, 48);
CHECK_OFF(sprov_raw_frame, sp, 8);
CHECK_OFF(sprov_raw_frame, cfa, 16);
CHECK_OFF(sprov_raw_frame, module_offset, 24);
CHECK_OFF(sprov_raw_frame, module_index, 32);
CHECK_OFF(sprov_raw_frame, method, 36);
CHECK_OFF(sprov_raw_frame, flags, 40);
CHECK_SIZE(sprov_unwind_buf, 56);
CHECK_OFF(sprov_unwind_buf, frames, 8);
CHECK_OFF(sprov_unwind_buf, pcs, 16);
CHECK_OFF(sprov_unwind_buf, capacity, 24);
CHECK_OFF(sprov_unwind_buf, frame_sz, 28);
CHECK_OFF(sprov_unwind_buf, count, 32);
CHECK_OFF(sprov_unwind_buf, stop_reason, 36);
CHECK_OFF(sprov_unwind_buf, generation, 40);
CHECK_OFF(sprov_unwind_buf, repaired, 48);
CHECK_SIZE(sprov_address_space_opts, 40);
CHECK_OFF(sprov_address_space_opts, pid, 8);
CHECK_OFF(sprov_address_space_opts, flags, 16);
CHECK_OFF(sprov_address_space_opts, arch, 20);
CHECK_OFF(sprov_address_space_opts, endian, 24);
CHECK_OFF(sprov_address_space_opts, root, 32);
CHECK_SIZE(sprov_mapping, 56);
CHECK_OFF(sprov_mapping, path, 32);
CHECK_OFF(sprov_mapping, build_id, 40);
CHECK_OFF(sprov_mapping, build_id_len, 48);
CHECK_OFF(sprov_mapping, prot, 52);
CHECK_SIZE(sprov_shadow_entry, 16);
CHECK_OFF(sprov_shadow_entry, slot, 8);
CHECK_SIZE(sprov_raw_input, 80);
CHECK_OFF(sprov_raw_input, regs_format, 8);
CHECK_OFF(sprov_raw_input, flags, 12);
CHECK_OFF(sprov_raw_input, regs, 16);
CHECK_OFF(sprov_raw_input, regs_len, 24);
CHECK_OFF(sprov_raw_input, regs_mask, 32);
CHECK_OFF(sprov_raw_input, stack_addr, 40);
CHECK_OFF(sprov_raw_input, stack, 48);
CHECK_OFF(sprov_raw_input, stack_len, 56);
CHECK_OFF(sprov_raw_input, shadow, 64);
CHECK_OFF(sprov_raw_input, shadow_count, 72);
#endif

// Enum values are part of the ABI too.
static_assert(SPROV_METHOD_CFI_EH_FRAME == 2 && SPROV_METHOD_SIGNAL == 6, "method values changed");
static_assert(SPROV_METHOD_RUNTIME == 14 && SPROV_PROCESS_RUNTIME_FRAMES == 1 && SPROV_RUNTIME_ONLY == 1,
              "runtime frame values changed");
static_assert(SPROV_STOP_END_OF_STACK == 1 && SPROV_STOP_ARCH_MISMATCH == 8, "stop values changed");
static_assert(SPROV_ERR_INVALID_ARG == -4000 && SPROV_ERR_OPTS_TAIL == -4001, "error codes changed");
static_assert(SPROV_BUNDLE_ID_ELF_BUILD_ID == 1 && SPROV_BUNDLE_ID_PDB_GUID_AGE == 2 && SPROV_BUNDLE_ID_MACHO_UUID == 3,
              "bundle id kinds changed");
static_assert(SPROV_SYMBOLIZE_LLVM_COMPAT == 4 && SPROV_SYMBOLIZE_NO_INLINES == 8, "symbolize flags changed");
static_assert(SPROV_PROCESS_CORE_TRUNCATED == 1 && SPROV_PROCESS_BUILD_ID_MISMATCH == 2, "process flags changed");
static_assert(SPROV_ARCH_X86_64 == 1 && SPROV_ARCH_ARM64 == 2 && SPROV_ARCH_MIPS32 == 3, "arch values changed");
static_assert(SPROV_METHOD_TRAMPOLINE == 9 && SPROV_FRAME_RETURN_ADDRESS == 2, "fast path values changed");
static_assert(SPROV_REGS_DWARF == 1 && SPROV_REGS_UCONTEXT == 5 && SPROV_AS_LOAD_DEBUG_FRAME == 2, "fast path enums changed");

int main() { return 0; }
