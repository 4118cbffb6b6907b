// SPDX-License-Identifier: Apache-2.0
// debuginfod through libdebuginfod: debug files by build-id, with identity check and a per-symbolizer negative cache.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "object/object_image.hpp"

struct debuginfod_client;

namespace stackprov::symbolize {

/// A debug file fetched from (or found in the cache of) a debuginfod server.
struct DebuginfodFile {
  std::shared_ptr<const object::ObjectImage> image;
  std::string url;         ///< the URL it was fetched from (debuginfod_get_url)
  std::string cache_path;  ///< where libdebuginfod stored it
};

/// Thin wrapper over libdebuginfod. The environment is libdebuginfod's own:
/// DEBUGINFOD_URLS (servers; empty or unset disables the client),
/// DEBUGINFOD_CACHE_PATH (the cache), DEBUGINFOD_TIMEOUT (seconds per
/// connection, libdebuginfod's default is 90), DEBUGINFOD_MAXTIME/MAXSIZE.
/// On top of that, misses (not found, timeouts, refused connections, wrong
/// identity) are remembered per build-id for the life of the client, so a
/// dead server costs at most one attempt per build-id. Thread-safe: queries
/// are serialised (a libdebuginfod handle is not reentrant).
class DebuginfodClient {
 public:
  DebuginfodClient();
  ~DebuginfodClient();
  DebuginfodClient(const DebuginfodClient&) = delete;
  DebuginfodClient& operator=(const DebuginfodClient&) = delete;

  /// Whether DEBUGINFOD_URLS named at least one server when the client was made.
  bool enabled() const { return !urls_.empty(); }
  const std::string& urls() const { return urls_; }

  /// The debug file whose build-id is `id`. Errors: SPROV_ERR_NOT_FOUND
  /// (disabled, no server has it, or the server failed; the message carries
  /// libdebuginfod's reason), SPROV_ERR_BUILD_ID_MISMATCH naming both ids when
  /// the fetched file is not the one asked for. A remembered miss returns the
  /// same error again without a query. `query_errno`, when given, receives libdebuginfod's
  /// negative errno of a failed query (-ENOENT: no server has it; -ECONNREFUSED, ...), else 0.
  Result<DebuginfodFile> find_debuginfo(const ModuleId& id, int* query_errno = nullptr);

  /// The URLs a query for `id` asks, one per server of DEBUGINFOD_URLS, as libdebuginfod forms
  /// them (SERVER/buildid/HEX/debuginfo; it does not say which server failed how).
  std::vector<std::string> query_urls(const ModuleId& id) const;

  /// Number of queries sent to libdebuginfod (misses from the negative cache excluded).
  size_t queries() const;

 private:
  mutable std::mutex mu_;
  std::string urls_;
  debuginfod_client* client_ = nullptr;
  bool begun_ = false;
  size_t queries_ = 0;
  struct Miss {
    Error error;
    int query_errno = 0;
  };
  std::unordered_map<std::string, Miss> misses_;
  std::unordered_map<std::string, DebuginfodFile> hits_;
};

}  // namespace stackprov::symbolize
