// SPDX-License-Identifier: Apache-2.0
// ELF core files: PT_LOAD memory, threads (NT_PRSTATUS, NT_SIGINFO), NT_PRPSINFO, NT_AUXV and NT_FILE, all bounds-checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "elf/elf_image.hpp"

namespace stackprov::elf {

/// One PT_LOAD segment of a core. `filesz` may be smaller than `memsz` (or 0)
/// for memory the dumper left out; `present` is how many of the `filesz` bytes
/// are really in the file (smaller than `filesz` only in a truncated core).
struct CoreSegment {
  uint64_t vaddr = 0;
  uint64_t memsz = 0;
  uint64_t offset = 0;
  uint64_t filesz = 0;
  uint64_t present = 0;
  uint32_t flags = 0;  ///< PF_R / PF_W / PF_X
};

/// An NT_SIGINFO note: the siginfo_t of the signal that stopped a thread, in the
/// core's layout (include/uapi/asm-generic/siginfo.h; MIPS swaps si_code and
/// si_errno). The kernel writes one, for the thread that dumped the core
/// (fs/binfmt_elf.c fill_note_info); gdb's gcore one per thread.
struct CoreSiginfo {
  int32_t signo = 0;  ///< si_signo
  int32_t code = 0;   ///< si_code (> 0: raised by the kernel for a fault or trap)
  int32_t err = 0;    ///< si_errno
  uint64_t addr = 0;  ///< the union's first word: si_addr for SIGILL, SIGFPE, SIGSEGV, SIGBUS, SIGTRAP
};

/// One NT_PRSTATUS note: a thread. `prstatus` points into the core's bytes
/// (valid as long as the CoreFile lives) and holds the whole descriptor.
struct CoreThread {
  int64_t tid = 0;      ///< pr_pid
  int32_t signal = 0;   ///< pr_cursig
  const uint8_t* prstatus = nullptr;
  size_t prstatus_size = 0;
  bool has_siginfo = false;  ///< an NT_SIGINFO followed this thread's NT_PRSTATUS
  CoreSiginfo siginfo;
};

/// One NT_FILE entry (kernel fs/binfmt_elf.c fill_files_note).
struct CoreMappedFile {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;  ///< bytes (the note stores pages; multiplied by its page size)
  std::string path;
};

/// Values of NT_AUXV that a capture needs; 0 when absent.
struct CoreAuxv {
  bool present = false;
  uint64_t sysinfo_ehdr = 0;  ///< AT_SYSINFO_EHDR: the vDSO's ELF header
  uint64_t entry = 0;         ///< AT_ENTRY: the main program's entry point
  uint64_t phdr = 0;          ///< AT_PHDR: the main program's program headers
  uint64_t execfn = 0;        ///< AT_EXECFN: address of the execve() path string
};

/// What the core's memory holds of an ELF image mapped at `start` (its first
/// page: ELF header, program headers and usually the build-id note).
struct CoreImage {
  uint16_t machine = 0;  ///< e_machine
  bool is64 = false;      ///< ELFCLASS64
  bool big = false;       ///< ELFDATA2MSB
  std::vector<ProgramHeader> phdrs;
  uint64_t load_bias = 0;  ///< runtime - link-time address
  ModuleId build_id;        ///< empty when the note was not dumped
};

/// The ELF image whose file offset 0 is mapped at `start` in some memory (a core's, a live
/// process's), read through `read(addr, buf, len)`: ELF header, program headers, NT_GNU_BUILD_ID
/// from its PT_NOTE. At most 64 KiB of program headers and of notes are read. nullopt when the
/// header is unreadable or malformed.
std::optional<CoreImage> image_in_memory(uint64_t start, const std::function<bool(uint64_t, void*, size_t)>& read);

/// The run-time ranges (address, length) of `img` that rebuild_image reads: the file bytes, as
/// mapped, of every PT_LOAD that is not writable (headers, code, read-only data, unwind tables,
/// dynamic symbols) and of PT_DYNAMIC. Empty when there is none or when the file they make up
/// would be over `limit` bytes.
std::vector<std::pair<uint64_t, uint64_t>> image_ranges(const CoreImage& img, uint64_t limit);

/// The ELF file whose offset 0 is mapped at `start`, rebuilt from memory read through `read`: the
/// ranges image_ranges names, each at its file offset (everything else zero), with no section
/// header table (those are not mapped; ElfImage then finds .eh_frame and .dynsym through the
/// program headers), and .dynamic's table addresses moved back to link-time ones where the dynamic
/// linker relocated them in place. The segment holding the ELF and program headers must be read;
/// any other segment not read (writable ones; code a snapshot does not hold) keeps its place but
/// no file bytes (p_filesz 0 in the rebuilt program headers). At most `limit` bytes are read and
/// held. Errors (SPROV_ERR_NOT_FOUND, SPROV_ERR_LIMIT, SPROV_ERR_IO) name the address that failed.
Result<std::vector<uint8_t>> rebuild_image(uint64_t start, const std::function<bool(uint64_t, void*, size_t)>& read,
                                           uint64_t limit);

/// A parsed ELF core. Immutable after open(); every accessor and read() is
/// safe to call from several threads at once. Parsing never trusts a length
/// or an offset: notes and segments that run past the end of the file are
/// clamped and reported in warnings() (a truncated core still opens).
class CoreFile {
 public:
  /// Maps `path` read-only and parses it. Errors: -errno (open/mmap, path
  /// named), SPROV_ERR_ELF ("PATH is not an ELF core file (e_type N)", not
  /// ELF at all, unknown class/byte order), SPROV_ERR_UNSUPPORTED (e_machine
  /// other than x86_64, aarch64, mips), SPROV_ERR_TRUNCATED (header or
  /// program header table cut off).
  static Result<std::unique_ptr<CoreFile>> open(const std::string& path);
  /// The same over bytes held in memory (taken over by the CoreFile); `name`
  /// is used in messages. For tests and the fuzz target.
  static Result<std::unique_ptr<CoreFile>> from_bytes(std::vector<uint8_t> bytes, std::string name);

  ~CoreFile();
  CoreFile(const CoreFile&) = delete;
  CoreFile& operator=(const CoreFile&) = delete;

  const std::string& path() const { return path_; }
  Arch arch() const { return arch_; }
  uint16_t machine() const { return machine_; }  ///< e_machine
  bool is_64bit() const { return is64_; }
  bool big_endian() const { return big_; }
  size_t file_size() const { return size_; }

  /// PT_LOAD segments sorted by vaddr.
  const std::vector<CoreSegment>& segments() const { return segments_; }
  /// Threads in NT_PRSTATUS order (the kernel writes the signalled thread first).
  const std::vector<CoreThread>& threads() const { return threads_; }
  /// NT_PRPSINFO pr_pid, else the first thread's id, else 0.
  int64_t pid() const;
  /// NT_PRPSINFO pr_fname (at most 16 bytes): the comm of the thread group
  /// leader (fs/binfmt_elf.c fill_psinfo); "" when absent.
  const std::string& program_name() const { return fname_; }
  /// NT_PRPSINFO pr_psargs (at most 80 bytes, arguments joined by spaces), one
  /// trailing space removed as bfd does (gdb's "Core was generated by `...'");
  /// "" when absent.
  const std::string& program_args() const { return psargs_; }
  /// Whether the file is shorter than its headers say (a PT_NOTE or PT_LOAD runs
  /// past its end, or a note is cut off): memory or notes are missing.
  bool truncated() const { return truncated_; }
  const CoreAuxv& auxv() const { return auxv_; }
  /// NT_FILE entries in note order; empty when the core has no NT_FILE.
  const std::vector<CoreMappedFile>& files() const { return files_; }
  /// NT_FILE page size (0 without NT_FILE).
  uint64_t file_page_size() const { return file_page_size_; }
  /// Findings while parsing (truncation, malformed notes), one per entry.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Copies target memory [addr, addr+len) from the core's PT_LOAD bytes; the
  /// read may span adjacent segments. False when any byte is outside every
  /// segment, was not dumped (past filesz) or is past the end of a truncated
  /// file. Zero-length reads succeed. Never faults.
  bool read(uint64_t addr, void* buf, size_t len) const;
  /// The PT_LOAD segment containing addr (by memsz), or nullptr.
  const CoreSegment* segment_at(uint64_t addr) const;
  /// Bytes of the segment holding addr that can be read from addr on (0 when
  /// not dumped).
  uint64_t readable_from(uint64_t addr) const;
  /// A NUL-terminated string in target memory, at most `max` bytes.
  std::optional<std::string> read_string(uint64_t addr, size_t max) const;
  /// The ELF image whose file offset 0 is mapped at `start`, read from the
  /// core's memory (ELF header, program headers, NT_GNU_BUILD_ID from its
  /// PT_NOTE); nullopt when the header was not dumped or is malformed.
  std::optional<CoreImage> image_at(uint64_t start) const;
  /// image_at(start)->build_id when it is there.
  std::optional<ModuleId> build_id_at(uint64_t start) const;

 private:
  CoreFile() = default;
  static Result<std::unique_ptr<CoreFile>> parse(std::unique_ptr<CoreFile> core);
  Status parse_header();
  void parse_notes(uint64_t offset, uint64_t size, uint64_t align);
  void parse_prstatus(const uint8_t* desc, size_t size);
  void parse_prpsinfo(const uint8_t* desc, size_t size);
  void parse_auxv(const uint8_t* desc, size_t size);
  void parse_file_note(const uint8_t* desc, size_t size);
  void parse_siginfo(const uint8_t* desc, size_t size);
  void warn(std::string w) { warnings_.push_back(std::move(w)); }

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;            // mmap'ed file (open) or nullptr
  std::vector<uint8_t> owned_;     // bytes (from_bytes)
  Arch arch_ = Arch::kUnknown;
  uint16_t machine_ = 0;
  bool is64_ = true;
  bool big_ = false;
  std::vector<CoreSegment> segments_;
  std::vector<CoreThread> threads_;
  int64_t psinfo_pid_ = 0;
  std::string fname_;
  std::string psargs_;
  bool truncated_ = false;
  bool siginfo_owner_ = false;  // the last NT_PRSTATUS made a thread that has no NT_SIGINFO yet
  CoreAuxv auxv_;
  std::vector<CoreMappedFile> files_;
  uint64_t file_page_size_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace stackprov::elf
