// SPDX-License-Identifier: Apache-2.0
// Live-process capture on macOS through mach_api.h (doc/macos.md "The live Mach reader").
#include "memory/mach_capture.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "arch/arm64/registers.hpp"
#include "arch/x86_64/registers.hpp"
#include "macho/macho_object.hpp"
#include "memory/mach_api.h"
#include "memory/minidump_capture.hpp"
#include "memory/raw_state.hpp"
#include "object/object_image.hpp"

namespace stackprov::memory {

namespace {

constexpr uint64_t kMachPage = 4096;
constexpr uint32_t kMaxLoadCommandBytes = 1u << 16;  ///< sizeofcmds read from a mapped header
constexpr uint32_t kMaxThreads = 1u << 16;
/// User addresses on macOS fit in 47 bits: what lies above in a pointer from an arm64e thread state
/// is its pointer-authentication code.
constexpr uint64_t kUserAddressMask = (uint64_t{1} << 47) - 1;

uint64_t dyld_word(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

/// A NUL-terminated string at `addr`, at most kMaxDyldPath bytes, read up to each page end so that a
/// string near the end of a mapping is read; false when no NUL comes within the limit or a read fails.
bool read_c_string(MemoryReader& mem, uint64_t addr, std::string* out) {
  out->clear();
  while (out->size() < kMaxDyldPath) {
    const uint64_t chunk = std::min<uint64_t>(kMachPage - (addr & (kMachPage - 1)), kMaxDyldPath - out->size());
    char buf[kMachPage];
    if (addr + chunk < addr || !mem.read(addr, buf, chunk)) return false;
    if (const void* nul = std::memchr(buf, 0, chunk)) {
      out->append(buf, static_cast<const char*>(nul) - buf);
      return true;
    }
    out->append(buf, chunk);
    addr += chunk;
  }
  return false;
}

std::string addr_text(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

/// Ports this capture holds: every thread resumed that was suspended, every right released, on
/// every path out of capture_mach_task.
struct HeldTask {
  uint32_t task = 0;
  std::vector<uint32_t> threads;
  std::vector<bool> suspended;
  ~HeldTask() {
    for (size_t i = 0; i < threads.size(); i++) {
      if (suspended[i]) sprov_mach_thread_resume(threads[i]);
      sprov_mach_port_release(threads[i]);
    }
    if (task != 0) sprov_mach_port_release(task);
  }
};

/// The snapshot module of one dyld image: the file at its path, checked against the LC_UUID of the
/// header mapped in the target; nothing (a warning) when it cannot be placed.
void add_dyld_image(Snapshot& base, MemoryReader& mem, const DyldImage& img, std::string* warnings) {
  uint8_t hdr[32];
  if (!mem.read(img.header, hdr, sizeof hdr)) {
    *warnings += img.path + ": its mach header at " + addr_text(img.header) + " is unreadable: left out\n";
    return;
  }
  uint32_t sizeofcmds;
  std::memcpy(&sizeofcmds, hdr + 20, 4);
  std::vector<uint8_t> cmds(sizeof hdr + std::min(sizeofcmds, kMaxLoadCommandBytes));
  ModuleId mapped;
  if (mem.read(img.header, cmds.data(), cmds.size())) mapped = macho::uuid_of_header(cmds);
  auto file = object::open_matching(img.path, base.arch, mapped);  // a universal file: the task's slice
  if (!file.ok()) {
    *warnings += img.path + ": " + file.error().message + ": left out\n";
    return;
  }
  const object::ObjectImage& im = *file.value();
  if (im.arch() != base.arch) {
    *warnings += img.path + ": the file is " + arch_name(im.arch()) + ", the task " + arch_name(base.arch) + ": left out\n";
    return;
  }
  if (mapped.empty() || mapped != im.id()) {
    *warnings += img.path + ": the file's UUID " + macho::uuid_string(im.id()) + " is not the mapped image's " +
                 (mapped.empty() ? std::string("(none read)") : macho::uuid_string(mapped)) + ": left out\n";
    return;
  }
  auto sm = module_of_image(im, im.load_bias(img.header, 0), img.path);
  if (!sm.ok()) {
    *warnings += sm.error().message + ": left out\n";
    return;
  }
  if (Status st = base.add_module(std::move(sm.value())); !st.ok())
    *warnings += img.path + ": " + st.error().message + ": left out\n";
}

/// The stack from sp up, page by page until a page is unreadable or `limit` bytes are copied.
std::vector<uint8_t> copy_mach_stack(MemoryReader& mem, uint64_t sp, uint64_t limit) {
  std::vector<uint8_t> out;
  uint64_t at = sp;
  while (out.size() < limit) {
    const uint64_t n = std::min<uint64_t>(kMachPage - (at & (kMachPage - 1)), limit - out.size());
    const size_t old = out.size();
    out.resize(old + n);
    if (at + n < at || !mem.read(at, out.data() + old, n)) {
      out.resize(old);
      break;
    }
    at += n;
  }
  return out;
}

int mach_error_code(int kr) {
  switch (kr) {
    case SPROV_MACH_UNSUPPORTED: return SPROV_ERR_UNSUPPORTED;
    case 5: return -EPERM;   // KERN_FAILURE: task_for_pid refused
    case 4: return -ESRCH;   // KERN_INVALID_ARGUMENT: no such process
    default: return SPROV_ERR_CAPTURE;
  }
}

}  // namespace

bool MachVmReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  if (addr + len < addr) return false;
  return sprov_mach_read(task_, addr, buf, len) == 0;
}

Result<std::vector<DyldImage>> read_dyld_images(MemoryReader& mem, uint64_t infos, uint64_t infos_size,
                                                std::string* warnings) {
  if (infos_size < SPROV_DYLD_INFOS_MIN_SIZE)
    return make_error(SPROV_ERR_BAD_FORMAT, "dyld_all_image_infos at %s: %llu bytes, fewer than the %d of version 2",
                      addr_text(infos).c_str(), static_cast<unsigned long long>(infos_size), SPROV_DYLD_INFOS_MIN_SIZE);
  uint8_t head[SPROV_DYLD_INFOS_DYLD_PATH + 8] = {};
  const size_t head_len = static_cast<size_t>(std::min<uint64_t>(infos_size, sizeof head));
  if (!mem.read(infos, head, head_len))
    return make_error(SPROV_ERR_CAPTURE, "dyld_all_image_infos at %s is unreadable", addr_text(infos).c_str());
  uint32_t version, count;
  std::memcpy(&version, head + SPROV_DYLD_INFOS_VERSION, 4);
  std::memcpy(&count, head + SPROV_DYLD_INFOS_COUNT, 4);
  const uint64_t array = dyld_word(head + SPROV_DYLD_INFOS_ARRAY);
  if (array == 0)
    return make_error(SPROV_ERR_BAD_FORMAT, "dyld_all_image_infos at %s: infoArray is NULL (dyld is changing the list)",
                      addr_text(infos).c_str());
  if (count > kMaxDyldImages)
    return make_error(SPROV_ERR_BAD_FORMAT, "dyld_all_image_infos at %s: infoArrayCount %u exceeds %u", addr_text(infos).c_str(),
                      count, kMaxDyldImages);
  std::vector<uint8_t> entries(size_t{count} * SPROV_DYLD_IMAGE_INFO_SIZE);
  if (!entries.empty() && (array + entries.size() < array || !mem.read(array, entries.data(), entries.size())))
    return make_error(SPROV_ERR_CAPTURE, "dyld's infoArray at %s (%u entries) is unreadable", addr_text(array).c_str(), count);
  std::vector<DyldImage> out;
  out.reserve(count + 1);
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t* e = entries.data() + size_t{i} * SPROV_DYLD_IMAGE_INFO_SIZE;
    DyldImage img;
    img.header = dyld_word(e + SPROV_DYLD_IMAGE_LOAD);
    const uint64_t path = dyld_word(e + SPROV_DYLD_IMAGE_PATH);
    if (img.header == 0 || path == 0 || !read_c_string(mem, path, &img.path)) {
      *warnings += "dyld image " + std::to_string(i) + " at " + addr_text(img.header) + ": its path at " + addr_text(path) +
                   " is unreadable or longer than " + std::to_string(kMaxDyldPath) + " bytes: left out\n";
      continue;
    }
    out.push_back(std::move(img));
  }
  const uint64_t dyld = dyld_word(head + SPROV_DYLD_INFOS_DYLD_LOAD);
  if (version >= 2 && dyld != 0) {
    DyldImage d;
    d.header = dyld;
    d.is_dyld = true;
    const uint64_t dpath = head_len >= SPROV_DYLD_INFOS_DYLD_PATH + 8 && version >= 15 ? dyld_word(head + SPROV_DYLD_INFOS_DYLD_PATH) : 0;
    if (dpath == 0 || !read_c_string(mem, dpath, &d.path)) d.path = "/usr/lib/dyld";
    out.push_back(std::move(d));
  }
  return out;
}

Result<ProcessCapture> capture_mach_task(int pid, const MachCaptureOptions& opts, const WhileStopped& while_stopped) {
#if defined(__aarch64__)
  const int arch = SPROV_MACH_ARCH_ARM64;
  const Arch snap_arch = Arch::kArm64;
#else
  const int arch = SPROV_MACH_ARCH_X86_64;
  const Arch snap_arch = Arch::kX86_64;
#endif
  HeldTask held;
  if (int kr = sprov_mach_task_for_pid(pid, &held.task); kr != 0) {
    held.task = 0;
    if (kr == SPROV_MACH_UNSUPPORTED)
      return make_error(SPROV_ERR_UNSUPPORTED, "process %d: no Mach API on this platform (the Mach capture is macOS's)", pid);
    return make_error(mach_error_code(kr), "task_for_pid of process %d failed (kern_return_t %d: it needs root, and a target "
                      "that System Integrity Protection does not protect)", pid, kr);
  }
  std::vector<uint32_t> threads(256);
  uint32_t count = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    if (int kr = sprov_mach_task_threads(held.task, threads.data(), static_cast<uint32_t>(threads.size()), &count); kr != 0)
      return make_error(mach_error_code(kr), "task_threads of process %d failed (kern_return_t %d)", pid, kr);
    if (count <= threads.size()) break;
    for (uint32_t t : threads) sprov_mach_port_release(t);  // a thread list that grew: ask again with room
    if (count > kMaxThreads)
      return make_error(SPROV_ERR_LIMIT, "process %d has %u threads, more than %u", pid, count, kMaxThreads);
    threads.assign(count + 64, 0);
    count = 0;
  }
  threads.resize(std::min<size_t>(count, threads.size()));
  held.threads = threads;
  held.suspended.assign(threads.size(), false);
  ProcessCapture out;
  out.pid = pid;
  for (size_t i = 0; i < held.threads.size(); i++) {
    if (int kr = sprov_mach_thread_suspend(held.threads[i]); kr != 0)
      out.warnings += "thread port " + std::to_string(held.threads[i]) + ": thread_suspend failed (kern_return_t " +
                      std::to_string(kr) + "; it may have exited)\n";
    else
      held.suspended[i] = true;
  }
  MachVmReader reader(held.task);
  Snapshot base;
  base.arch = snap_arch;
  base.endian = Endian::kLittle;
  base.pid = pid;
  uint64_t infos = 0, infos_size = 0;
  int32_t format = 0;
  if (int kr = sprov_mach_dyld_info(held.task, &infos, &infos_size, &format); kr != 0) {
    out.warnings += "task_info(TASK_DYLD_INFO) failed (kern_return_t " + std::to_string(kr) + "): no module list\n";
  } else if (format != 1) {
    out.warnings += "dyld_all_image_infos format " + std::to_string(format) + " is not the 64-bit one: no module list\n";
  } else if (auto images = read_dyld_images(reader, infos, infos_size, &out.warnings); !images.ok()) {
    out.warnings += images.error().message + ": no module list\n";
  } else {
    for (const DyldImage& img : images.value()) {
      if (out.program_name.empty() && !img.is_dyld) {  // the main executable comes first in infoArray
        const size_t k = img.path.find_last_of('/');
        out.program_name = k == std::string::npos ? img.path : img.path.substr(k + 1);
      }
      add_dyld_image(base, reader, img, &out.warnings);
    }
  }
  uint64_t stack_budget = kMaxTotalStackBytes;
  for (size_t i = 0; i < held.threads.size(); i++) {
    if (!held.suspended[i]) continue;
    const uint32_t th = held.threads[i];
    uint64_t tid = 0;
    if (int kr = sprov_mach_thread_id(th, &tid); kr != 0) {
      out.warnings += "thread port " + std::to_string(th) + ": no thread id (kern_return_t " + std::to_string(kr) + ")\n";
      continue;
    }
    if (opts.only_tid != 0 && tid != opts.only_tid) continue;
    uint64_t regs[SPROV_MACH_MAX_REGS] = {};
    uint32_t n = 0;
    if (int kr = sprov_mach_thread_state(th, arch, regs, &n); kr != 0) {
      out.warnings += "thread " + std::to_string(tid) + ": thread_get_state failed (kern_return_t " + std::to_string(kr) +
                      "): skipped\n";
      continue;
    }
    Snapshot s = base;
    s.tid = static_cast<int64_t>(tid);
    uint64_t sp;
    if (arch == SPROV_MACH_ARCH_ARM64) {
      for (int r = 0; r < 29; r++) s.set_reg(r, regs[r]);
      s.set_reg(arch::arm64::kFp, regs[29] & kUserAddressMask);
      s.set_reg(arch::arm64::kLr, regs[30] & kUserAddressMask);
      sp = regs[31] & kUserAddressMask;
      s.set_reg(arch::arm64::kSp, sp);
      s.set_reg(arch::arm64::kPc, regs[32] & kUserAddressMask);
    } else {
      // rax rbx rcx rdx rdi rsi rbp rsp r8..r15 rip -> the DWARF numbers
      static constexpr int kDwarf[17] = {0, 3, 2, 1, 5, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
      for (int r = 0; r < 17; r++) s.set_reg(kDwarf[r], regs[r]);
      sp = regs[7];
    }
    const std::vector<uint8_t> stack = copy_mach_stack(reader, sp, std::min<uint64_t>(opts.max_stack_bytes, stack_budget));
    stack_budget -= stack.size();
    if (stack.empty())
      out.warnings += "thread " + std::to_string(tid) + ": sp " + addr_text(sp) + " is unreadable: no stack copied\n";
    else if (Status st = s.add_memory(sp, stack.data(), stack.size()); !st.ok())
      out.warnings += "thread " + std::to_string(tid) + ": stack copy skipped: " + st.error().message + "\n";
    if (while_stopped) while_stopped(s, reader);
    out.threads.push_back(std::move(s));
  }
  if (out.threads.empty())
    return make_error(opts.only_tid != 0 ? -ESRCH : SPROV_ERR_CAPTURE, "process %d: no thread captured%s: %s", pid,
                      opts.only_tid != 0 ? (" (thread " + std::to_string(opts.only_tid) + ")").c_str() : "",
                      out.warnings.c_str());
  return out;
}

}  // namespace stackprov::memory
