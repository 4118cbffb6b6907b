// SPDX-License-Identifier: Apache-2.0
// find_pdb: a PE image's PDB beside it, at its RSDS path, in debug directories and symbol stores.
#include "pdb/pdb_find.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "core/open_file.hpp"

namespace stackprov::pdb {

namespace {

using Outcome = object::DebugFileCandidate::Outcome;

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  const bool a_slash = a.back() == '/', b_slash = b.front() == '/';
  if (a_slash && b_slash) return a + b.substr(1);
  if (a_slash || b_slash) return a + b;
  return a + "/" + b;
}

/// The base name of a path written on Windows or POSIX ("C:\b\x.pdb" and "/b/x.pdb" give "x.pdb").
std::string base_name(const std::string& p) {
  const size_t cut = p.find_last_of("/\\");
  return cut == std::string::npos ? p : p.substr(cut + 1);
}

std::string dir_of(const std::string& p) {
#ifdef _WIN32
  // Windows paths: either separator; "C:\dir" and "\\server\share" are absolute as they are.
  const size_t slash = p.find_last_of("/\\");
  std::string dir = slash == std::string::npos ? std::string(".") : slash == 0 ? p.substr(0, 1) : p.substr(0, slash);
  char buf[PATH_MAX];
  if (_fullpath(buf, dir.c_str(), sizeof buf) != nullptr) dir = buf;
#else
  const size_t slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : p.substr(0, slash);
  if (dir[0] != '/') {
    char buf[PATH_MAX];
    if (realpath(dir.c_str(), buf) != nullptr) dir = buf;
  }
#endif
  return dir;
}

std::string key_text(const ModuleId& id) {
  const std::string k = guid_age_key(id);
  return k.empty() ? std::string("(none)") : k;
}

}  // namespace

Result<std::shared_ptr<PdbFile>> find_pdb(const PdbWanted& want, const object::DebugFileOptions& opts,
                                          std::vector<object::DebugFileCandidate>* looked_at) {
  const std::string name = base_name(want.rsds_path);
  if (name.empty() || name == "." || name == "..")
    return make_error(SPROV_ERR_NOT_FOUND, "%s: the CodeView record names no PDB file", want.image_path.c_str());
  const std::string want_key = key_text(want.id);
  std::string tried;
  std::optional<Error> mismatch;
  auto note = [&](const char* rule, const std::string& p, Outcome o, std::string why) {
    if (looked_at) looked_at->push_back({rule, p, o, std::move(why)});
  };
  std::set<std::string> seen;  // the RSDS path is often the file beside the image: looked at once
  auto attempt = [&](const char* rule, const std::string& p) -> std::shared_ptr<PdbFile> {
    if (!seen.insert(p).second) return nullptr;
    tried += (tried.empty() ? "" : ", ") + p;
    struct stat st;
    if (stat_path(p, &st) != 0) {  // inside a target's root for its paths (core/open_file.hpp)
      note(rule, p, Outcome::kMissing, strerror(errno));
      return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
      note(rule, p, Outcome::kMissing, "not a regular file");
      return nullptr;
    }
    auto f = PdbFile::open(p);
    if (!f) {
      note(rule, p, Outcome::kUnreadable, f.error().message);
      return nullptr;
    }
    if (!(f.value()->id() == want.id)) {
      const std::string got = key_text(f.value()->id());
      if (!mismatch)
        mismatch = make_error(SPROV_ERR_BUILD_ID_MISMATCH, "%s: PDB %s has GUID+age %s, the image wants %s",
                              want.image_path.c_str(), p.c_str(), got.c_str(), want_key.c_str());
      note(rule, p, Outcome::kIdentityMismatch, "has GUID+age " + got + ", the module wants " + want_key);
      return nullptr;
    }
    note(rule, p, Outcome::kUsed, "");
    return f.value();
  };

  // 1. Beside the image (in the target's root when the image is a target's: its directory is).
  if (relative_names_stay_in_root(dir_of(want.image_path)))
    if (auto f = attempt("beside-image", join(dir_of(want.image_path), name))) return f;
  // 2. The RSDS path itself, when it is a POSIX absolute path.
  if (!want.rsds_path.empty() && want.rsds_path[0] == '/' && want.rsds_path.find('\\') == std::string::npos) {
    std::string p = !want.target_root.empty() ? join(want.target_root, want.rsds_path)
                    : opts.sysroot.empty()    ? want.rsds_path
                                              : join(opts.sysroot, want.rsds_path);
    if (auto f = attempt("rsds-path", p)) return f;
  }
  // 3. Debug directories: DIR/NAME.pdb, then the symbol-store layout DIR/NAME.pdb/KEY/NAME.pdb.
  const std::string key = guid_age_key(want.id);
  for (const std::string& d : opts.debug_dirs) {
    const std::string dir = !want.target_root.empty() ? join(want.target_root, d)
                            : opts.sysroot.empty()    ? d
                                                      : join(opts.sysroot, d);
    if (auto f = attempt("debug-dir", join(dir, name))) return f;
    if (!key.empty())
      if (auto f = attempt("symbol-store", join(join(join(dir, name), key), name))) return f;
  }
  if (mismatch) return *mismatch;
  return make_error(SPROV_ERR_NOT_FOUND, "%s: no PDB with GUID+age %s (searched: %s)", want.image_path.c_str(),
                    want_key.c_str(), tried.empty() ? "nothing to search" : tried.c_str());
}

}  // namespace stackprov::pdb
