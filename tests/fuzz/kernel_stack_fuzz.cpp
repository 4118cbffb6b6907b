// SPDX-License-Identifier: Apache-2.0
// Fuzz target: /proc/PID/task/TID/stack and .../syscall text (stack --kernel): parse_kernel_stack and
// parse_syscall. The input's first byte picks the parser; the rest is the file's text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memory/kernel_stack.hpp"

using namespace stackprov::memory;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto s = parse_syscall(text);
    // Invariants: a system call number with its kind; "running" has no registers.
    if (s.ok() && (s->kind == SyscallState::Kind::kInSyscall) != (s->nr >= 0)) __builtin_trap();
    if (s.ok() && s->kind == SyscallState::Kind::kRunning && (s->sp != 0 || s->pc != 0)) __builtin_trap();
    return 0;
  }
  auto frames = parse_kernel_stack(text);
  if (!frames.ok()) return 0;
  // Invariants: bounded, one frame per line, every name non-empty and without spaces.
  if (frames->size() > kMaxKernelFrames) __builtin_trap();
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (frames->size() != lines) __builtin_trap();
  for (const KernelFrame& f : *frames)
    if (f.symbol.empty() || f.symbol.find(' ') != std::string::npos || f.module.find(' ') != std::string::npos)
      __builtin_trap();
  return 0;
}
