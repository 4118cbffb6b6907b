// SPDX-License-Identifier: Apache-2.0
// Module lists of sampled processes over time, from MMAP/MMAP2/COMM/FORK/EXIT records.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/types.hpp"
#include "memory/snapshot.hpp"
#include "perf/perf_data.hpp"

namespace stackprov::elf {
class ElfImage;
}
namespace stackprov::memory {
class MappedFiles;
}

namespace stackprov::perf {

/// One process's module list at some time; shared by every sample taken while it held.
struct ModuleList {
  std::vector<memory::SnapshotModule> modules;  ///< sorted by start, non-overlapping
  uint64_t vdso_start = 0;                       ///< where the vDSO is mapped; 0 when it is not
  uint64_t hash = 0;                             ///< Snapshot::module_list_hash() of `modules`
  /// Index in `modules` of the process's program, the file it exec'd (pprof's first mapping,
  /// "File:" in `go tool pprof`); -1 when not known. See ModuleTracker::list_for.
  int32_t main = -1;
  /// While recording: the file read for each module (null: none, the vDSO), as checked against
  /// the process's listing; empty in a list read from a file.
  std::vector<std::shared_ptr<elf::ElfImage>> images;
};

/// Tracks the executable mappings of every process seen in the records and
/// turns them into module lists (identity and load bias from the module files,
/// opened once per path as `root + path`). Identical lists share one id.
/// Bounded: at most 65536 mappings per process, 2^20 in all, 2^20 lists of 2^22 modules in
/// all, 8192 module files opened — one per file: spellings of one file ("//lib/x.so",
/// "/./lib/x.so") share it, found by (dev, inode, mtime) — and 65536 spellings (each limit
/// warned about once).
class ModuleTracker {
 public:
  /// `recorded_ids`: build-ids the recording holds per path (perf.data HEADER_BUILD_ID),
  /// compared with the files' and preferred over them. `vdso`: bytes of this host's vDSO
  /// image, used for "[vdso]" mappings when its build-id matches the recorded one (or none
  /// was recorded); may be empty.
  /// `open_files` false: module files are never opened (fuzzing, tests); modules get no bias or build-id.
  ModuleTracker(std::string root, std::map<std::string, ModuleId> recorded_ids, std::vector<uint8_t> vdso,
                bool open_files = true);
  ~ModuleTracker();

  void on_mmap(const RawMmap& m);
  void on_comm(const RawComm& c);
  void on_fork(const RawTask& t);
  /// A task exited. The main thread's EXIT (pid = tid) marks the process exited; its mappings are
  /// kept for records that still come (the last ones of a drain, the main thread's exit before the
  /// others') and freed once 4,096 processes have exited since, or sooner, oldest exit first,
  /// when the bound on all mappings would refuse a running process's (a long recording of a
  /// server forking per request). A process shown running after its main thread's EXIT (a MMAP,
  /// an exec, a FORK from it, a sample of another thread: a main thread that ended with
  /// pthread_exit, an exec from another thread) is running again; another thread's EXIT then
  /// marks it exited anew, so its last thread's exit is what counts.
  void on_exit(const RawTask& t);
  /// A sample of thread `tid` of process `pid`: another thread than the main one shows the
  /// process running (see on_exit).
  void on_sample(uint32_t pid, uint32_t tid);
  /// Seeds a process from a /proc/PID/maps listing (recording an existing process).
  void seed_maps(uint32_t pid, const std::string& maps_text);
  /// `pid`'s mappings are those of live process `live_pid` (its own listing, files opened under
  /// its root): each module file opened is checked to be the file mapped, by the device and inode
  /// of the listing (memory::MappedFiles); a path that names another file is read through
  /// /proc/PID/map_files, or the module is left out with a warning. Mappings without a device and
  /// inode (MMAP2 records that carry a build-id instead) are taken as they are. Children forked
  /// from then on (on_fork) are checked too, through the parent's MappedFiles (shared).
  void set_live(uint32_t pid, int64_t live_pid);

  /// The id of `pid`'s current module list (a new list is made when its mappings changed).
  /// Its `main` is the file the process's last recorded exec mapped first — the kernel maps the
  /// program before its interpreter (fs/binfmt_elf.c load_elf_binary), and a script's program is
  /// its interpreter — unless that file is no program (ElfImage::is_program: the dynamic loader
  /// run as `ld.so PROG`) and another module is. With no exec recorded (a process seeded from its
  /// maps, perf record -p), the first module whose file is a program.
  uint32_t list_for(uint32_t pid);
  const std::vector<std::shared_ptr<const ModuleList>>& lists() const { return lists_; }
  const std::vector<uint8_t>& vdso_bytes() const { return vdso_; }
  /// Findings (unopenable modules, build-id mismatches), one per line, each reported once.
  const std::string& warnings() const { return warnings_; }

 private:
  struct Mapping {
    uint64_t start = 0, end = 0, pgoff = 0;
    std::string path;
    ModuleId build_id;  ///< as recorded in the MMAP2 record; may be empty
    uint32_t dev_major = 0, dev_minor = 0;
    uint64_t inode = 0;  ///< 0: unknown
  };
  using MapTable = std::map<uint64_t, Mapping>;  ///< by start, non-overlapping
  struct Proc {
    /// Executable file mappings and [vdso], shared copy-on-write: a forked child shares its
    /// parent's table (and list) until either changes, so a fork costs no copy (a server forking
    /// per request with thousands of mappings). Null: none.
    std::shared_ptr<MapTable> table;
    const MapTable& maps() const;
    MapTable& edit_maps();  ///< the table, made this process's own first
    size_t map_count() const { return table ? table->size() : 0; }
    bool dirty = true;
    uint32_t list = 0;
    std::shared_ptr<memory::MappedFiles> mapped;  ///< set_live: the files checked against the listing
    uint64_t exit_seq = 0;      ///< 0 running; else its place in exited_ (a reused pid is a new Proc)
    bool main_exited = false;   ///< the main thread's EXIT was seen (and no exec since)
    std::string program;        ///< the first file mapped after its last exec ("" none recorded)
    bool exec_pending = false;  ///< an exec was seen and nothing mapped since
  };
  struct FileInfo {
    std::shared_ptr<elf::ElfImage> image;  ///< null when the file could not be opened (`error`)
    std::string error;
  };
  void insert(uint32_t pid, Mapping m);
  void remove_range(Proc& p, uint64_t start, uint64_t end);
  const FileInfo& file(const std::string& path);
  /// The file `path` names now, opened again (a live process re-mapped a file replaced at the
  /// path): replaces the spelling's entry; null when it cannot be opened.
  std::shared_ptr<elf::ElfImage> reopen(const std::string& path);
  void warn_once(const std::string& line);
  /// Frees exited processes, oldest first: while more than `keep` are held, then while `need` more
  /// mappings would pass the bound on all of them. A process being changed is running (revive).
  void reclaim(size_t keep, size_t need);
  /// `pid`'s record shows it running: not freed (its entry in exited_ is left stale).
  Proc& revive(uint32_t pid);
  void mark_exited(uint32_t pid, Proc& p);

  std::string root_;
  bool open_files_ = true;
  std::map<std::string, ModuleId> recorded_ids_;
  std::vector<uint8_t> vdso_;
  std::shared_ptr<elf::ElfImage> vdso_image_;
  std::map<uint32_t, Proc> procs_;
  std::deque<std::pair<uint32_t, uint64_t>> exited_;  ///< (pid, exit_seq), oldest first
  uint64_t exit_seq_ = 0;
  size_t total_maps_ = 0;    ///< mappings of all procs_
  size_t list_modules_ = 0;  ///< modules of all lists_
  std::map<std::string, FileInfo> files_;  ///< by spelling
  /// Opened files by identity (dev, inode, mtime in ns): one open per file, whatever its spellings.
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, std::shared_ptr<elf::ElfImage>> images_;
  std::vector<std::shared_ptr<const ModuleList>> lists_;
  std::map<uint64_t, std::vector<uint32_t>> lists_by_hash_;
  std::string warnings_;
  std::map<std::string, bool> warned_;
};

/// This process's vDSO image bytes (getauxval(AT_SYSINFO_EHDR) and its PT_LOAD extent); empty if none.
std::vector<uint8_t> read_own_vdso();

}  // namespace stackprov::perf
