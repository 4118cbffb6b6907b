// SPDX-License-Identifier: Apache-2.0
// open_regular_file on Windows (the win64 build only; open_file.cpp is the POSIX one): CreateFileW
// of the UTF-8 path, disk files only; no process roots.
#include "core/open_file.hpp"

#include <fcntl.h>
#include <io.h>
#include <windows.h>

#include <cctype>
#include <cerrno>
#include <string>

namespace stackprov {

namespace {

/// The UTF-16 form of UTF-8 `s`; false when `s` is not valid UTF-8 or holds a NUL.
bool widen(const std::string& s, std::wstring* out) {
  if (s.empty() || s.find('\0') != std::string::npos || s.size() > 32767) return false;
  const int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s.data(), static_cast<int>(s.size()), nullptr, 0);
  if (n <= 0) return false;
  out->assign(static_cast<size_t>(n), L'\0');
  return MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s.data(), static_cast<int>(s.size()), out->data(), n) == n;
}

int errno_of(DWORD e) {
  switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME: return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION: return EACCES;
    case ERROR_TOO_MANY_OPEN_FILES: return EMFILE;
    default: return EIO;
  }
}

/// Whether `path` names a file through the network or a device: \\server\share\... (opening it sends
/// this user's credentials to the server), \\.\pipe\... (opening it connects to the pipe), \\.\COM1.
/// Of the names that start with two separators only \\?\X:\... (a long local path) is allowed.
bool remote_or_device(const std::string& p) {
  auto sep = [](char c) { return c == '\\' || c == '/'; };
  if (p.size() < 2 || !sep(p[0]) || !sep(p[1])) return false;
  const bool long_local = p.size() >= 7 && p[2] == '?' && sep(p[3]) && std::isalpha(static_cast<unsigned char>(p[4])) &&
                          p[5] == ':' && sep(p[6]);
  return !long_local;
}

}  // namespace

int open_regular_file(const std::string& path, int* err) {
  std::wstring w;
  if (remote_or_device(path)) {  // no network access, no pipe or device opened for a target's name
    *err = EINVAL;
    return -1;
  }
  if (!widen(path, &w)) {
    *err = ENOENT;
    return -1;
  }
  // FILE_FLAG_BACKUP_SEMANTICS opens a directory too, so that it is refused below as one (EINVAL)
  // rather than as an access error; a device or pipe is refused by its file type.
  const HANDLE h = CreateFileW(w.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                               nullptr, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_BACKUP_SEMANTICS, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    *err = errno_of(GetLastError());
    return -1;
  }
  BY_HANDLE_FILE_INFORMATION info;
  if (GetFileType(h) != FILE_TYPE_DISK || !GetFileInformationByHandle(h, &info) ||
      (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
    CloseHandle(h);
    *err = EINVAL;
    return -1;
  }
  const int fd = _open_osfhandle(reinterpret_cast<intptr_t>(h), _O_RDONLY | _O_BINARY);
  if (fd < 0) {
    *err = EMFILE;
    CloseHandle(h);
    return -1;
  }
  return fd;
}

int stat_path(const std::string& path, struct stat* st) {
  int err = 0;
  const int fd = open_regular_file(path, &err);
  if (fd < 0 && err == EINVAL && !remote_or_device(path)) return ::stat(path.c_str(), st);  // a directory: its mode
  if (fd < 0) {
    errno = err;
    return -1;
  }
  const int rc = fstat(fd, st);
  const int e = errno;
  _close(fd);
  errno = e;
  return rc;
}

std::string target_root_of(const std::string&) { return ""; }

bool relative_names_stay_in_root(const std::string&) { return true; }

std::string under_root_of(const std::string&, const std::string& p) { return p; }

std::shared_ptr<HeldRoot> HeldRoot::hold(int64_t) { return nullptr; }

HeldRoot::~HeldRoot() = default;

}  // namespace stackprov
