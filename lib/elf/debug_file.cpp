// SPDX-License-Identifier: Apache-2.0
// Separate debug file discovery: build-id paths, then .gnu_debuglink with CRC and build-id checks.
#include "elf/debug_file.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/stat.h>

#include <optional>

#include "core/open_file.hpp"

namespace stackprov::elf {

namespace {

/// Whether `p` is a regular file; else `*why` says what is there instead.
bool is_regular_file(const std::string& p, struct stat* out, std::string* why) {
  if (stat_path(p, out) != 0) {  // inside a target's root for its paths
    *why = strerror(errno);
    return false;
  }
  if (!S_ISREG(out->st_mode)) {
    *why = "not a regular file";
    return false;
  }
  return true;
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  const bool a_slash = a.back() == '/', b_slash = b.front() == '/';
  if (a_slash && b_slash) return a + b.substr(1);
  if (a_slash || b_slash) return a + b;
  return a + "/" + b;
}

/// Directory of a file path; a relative path's directory is made absolute
/// (the current directory for a bare name), as debuglink lookups need it.
std::string dirname_of(const std::string& p) {
  const size_t slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : p.substr(0, slash);
  if (dir[0] != '/') {
    char buf[PATH_MAX];
    if (realpath(dir.c_str(), buf) != nullptr) dir = buf;
  }
  return dir;
}

std::string id_text(const ModuleId& id) { return id.empty() ? std::string("(none)") : id.hex(); }

using Outcome = object::DebugFileCandidate::Outcome;

/// The search state: what was tried and the first rejection of each kind.
struct Search {
  const ElfImage& image;
  std::vector<object::DebugFileCandidate>* looked_at;  ///< null: the caller does not ask
  std::string tried;
  std::optional<Error> mismatch;
  std::optional<Error> crc_error;
  struct stat self_st {};
  bool have_self = false;

  void note(const std::string& p) {
    if (!tried.empty()) tried += ", ";
    tried += p;
  }

  /// What was found at the last path noted (only when the caller asked).
  void outcome(const char* rule, const std::string& p, Outcome o, std::string reason) {
    if (looked_at) looked_at->push_back({rule, p, o, std::move(reason)});
  }

  /// Opens `p` and checks its build-id against the image's. `require_id`:
  /// a candidate without a build-id is rejected (build-id paths), otherwise
  /// accepted on the CRC alone (debuglink).
  std::shared_ptr<ElfImage> accept(const char* rule, const std::string& p, bool require_id) {
    auto img = ElfImage::open(p);
    if (!img.ok()) {
      outcome(rule, p, Outcome::kUnreadable, img.error().message);
      return nullptr;
    }
    const ModuleId& want = image.build_id();
    const ModuleId& got = (*img)->build_id();
    const bool comparable = !want.empty() && (require_id || !got.empty());
    if (comparable && want != got) {
      if (!mismatch) {
        mismatch = make_error(SPROV_ERR_BUILD_ID_MISMATCH,
                              "%s: debug file %s has build-id %s, binary has build-id %s",
                              image.path().c_str(), p.c_str(), id_text(got).c_str(),
                              id_text(want).c_str());
      }
      outcome(rule, p, Outcome::kIdentityMismatch,
              "has build-id " + id_text(got) + ", the module has build-id " + id_text(want));
      return nullptr;
    }
    outcome(rule, p, Outcome::kUsed, "");
    return img.value();
  }

  bool is_self(const struct stat& st) const {
    return have_self && st.st_dev == self_st.st_dev && st.st_ino == self_st.st_ino;
  }
};

}  // namespace

Result<std::shared_ptr<ElfImage>> find_debug_file(const ElfImage& image,
                                                  const DebugFileOptions& opts,
                                                  std::vector<object::DebugFileCandidate>* looked_at) {
  Search search{image, looked_at, {}, {}, {}, {}, false};
  search.have_self = stat_path(image.path(), &search.self_st) == 0;
  // A target's module (read through /proc/PID/root or map_files) has its debug files in the
  // target's root: the debug directories, like the binary's own directory, are looked up there,
  // never on the host (a forged build-id would name the host's debug file: doc/hardening.md).
  const std::string& target_root = image.target_root();
  std::vector<std::string> dirs;
  for (const std::string& d : opts.debug_dirs) {
    if (!target_root.empty()) dirs.push_back(join(target_root, d));
    else dirs.push_back(opts.sysroot.empty() ? d : join(opts.sysroot, d));
  }

  // 1. <debug_dir>/.build-id/xx/rest.debug (gdb manual, "Separate Debug Files").
  const ModuleId& id = image.build_id();
  if (id.len >= 2) {
    const std::string hex = id.hex();
    const std::string rel = ".build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
    for (const std::string& d : dirs) {
      const std::string p = join(d, rel);
      search.note(p);
      struct stat st;
      std::string why;
      if (!is_regular_file(p, &st, &why)) {
        search.outcome("build-id", p, Outcome::kMissing, why);
        continue;
      }
      if (auto img = search.accept("build-id", p, true)) return img;
    }
  }

  // 2. .gnu_debuglink next to the binary, in its .debug/, then under each debug dir.
  if (auto link = image.debuglink(); link && !link->file.empty() &&
                                     link->file.find('/') == std::string::npos) {
    std::string bin_dir = dirname_of(image.path());
    std::string local = opts.sysroot.empty() || !target_root.empty() ? bin_dir : join(opts.sysroot, bin_dir);
    // Under the debug directories, the binary's directory as the target names it.
    if (!target_root.empty() && bin_dir.compare(0, target_root.size(), target_root) == 0)
      bin_dir = bin_dir.size() == target_root.size() ? std::string("/") : bin_dir.substr(target_root.size());
    std::vector<std::string> cands;
    if (!bin_dir.empty()) {
      cands.push_back(join(local, link->file));
      cands.push_back(join(join(local, ".debug"), link->file));
      for (const std::string& d : dirs) cands.push_back(join(join(d, bin_dir), link->file));
    } else {
      for (const std::string& d : dirs) cands.push_back(join(d, link->file));
    }
    for (const std::string& p : cands) {
      search.note(p);
      struct stat st;
      std::string why;
      if (!is_regular_file(p, &st, &why)) {
        search.outcome("debuglink", p, Outcome::kMissing, why);
        continue;
      }
      if (search.is_self(st)) {
        search.outcome("debuglink", p, Outcome::kSelf, "the module itself");
        continue;
      }
      auto crc = file_crc32(p);
      if (!crc.ok()) {
        search.outcome("debuglink", p, Outcome::kUnreadable, crc.error().message);
        continue;
      }
      if (*crc != link->crc) {
        if (!search.crc_error) {
          search.crc_error = make_error(SPROV_ERR_DEBUGLINK_CRC,
                                        "%s: debug file %s has CRC32 %08x, .gnu_debuglink wants %08x",
                                        image.path().c_str(), p.c_str(), *crc, link->crc);
        }
        char buf[80];
        snprintf(buf, sizeof buf, "has CRC32 %08x, .gnu_debuglink wants %08x", *crc, link->crc);
        search.outcome("debuglink", p, Outcome::kCrcMismatch, buf);
        continue;
      }
      if (auto img = search.accept("debuglink", p, false)) return img;
    }
  }

  if (search.mismatch) return *search.mismatch;
  if (search.crc_error) return *search.crc_error;
  return make_error(SPROV_ERR_NOT_FOUND, "%s: no separate debug file (searched: %s)",
                    image.path().c_str(), search.tried.empty() ? "nothing to search" : search.tried.c_str());
}

}  // namespace stackprov::elf
