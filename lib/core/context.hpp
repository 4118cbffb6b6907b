// SPDX-License-Identifier: Apache-2.0
// The library context: configuration (debug dirs, sysroot) and the log callback.
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"
#include "stackprov/stackprov.h"

namespace stackprov {

struct ContextConfig {
  sprov_log_fn log_fn = nullptr;
  void* log_user = nullptr;
  int log_level = SPROV_LOG_WARN;
  uint32_t module_cache_capacity = 256;
  std::vector<std::string> debug_dirs{"/usr/lib/debug"};
  std::string sysroot;
  /// Bundle store directory; empty with has_bundle_store: the default directory.
  bool has_bundle_store = false;
  std::string bundle_store;
  /// Resolver policy in order (names as in sprov_context_opts.resolvers).
  std::vector<std::string> resolvers{"debuginfod", "bundle", "dwarf", "gopclntab", "symtab", "dynsym", "demangle"};
  bool offline = false;  ///< SPROV_CTX_OFFLINE
};

/// Thread-safe: the configuration is immutable after construction and the
/// log callback is called without locks (the callback must be thread-safe).
class Context {
 public:
  explicit Context(ContextConfig cfg) : cfg_(std::move(cfg)) {}
  const ContextConfig& config() const { return cfg_; }
  void log(int level, const char* fmt, ...) const STACKPROV_PRINTF(3, 4);
  /// `path` under the sysroot (unchanged when there is none or for "[vdso]"-like names).
  std::string host_path(const std::string& path) const;

 private:
  ContextConfig cfg_;
};

/// Splits a ':'-separated list, dropping empty items.
std::vector<std::string> split_path_list(const char* list);

/// A guest path (from a core, a perf record, a snapshot: hostile input) under `root` as a chroot
/// sees it: "." and empty components dropped, ".." at the top stays at the top, so
/// "/lib/../../../etc/x" is root + "/etc/x", never a file outside root. Unchanged when `root` is
/// empty or the path is not absolute ("[vdso]").
std::string join_root(const std::string& root, const std::string& path);

}  // namespace stackprov
