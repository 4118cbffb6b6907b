// SPDX-License-Identifier: Apache-2.0
// debuginfod client: libdebuginfod queries by build-id, identity check of the fetched file, negative cache.
#include "symbolize/debuginfod_client.hpp"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/runtime_dl.hpp"

namespace stackprov::symbolize {

namespace {

/// libdebuginfod is loaded on first use with dlopen, as elfutils' libdwfl does:
/// programs that never query a server do not load it (nor libcurl and its TLS
/// stack), and static links of libstackprov need no libdebuginfod.a.
struct DebuginfodApi {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_end) end = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
  decltype(&debuginfod_get_url) get_url = nullptr;
  bool ok() const { return begin && end && find_debuginfo && get_url; }
};

const DebuginfodApi& debuginfod_api() {
  static const DebuginfodApi api = [] {
    DebuginfodApi a;
    void* h = runtime_dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL, nullptr);
    if (h == nullptr) return a;
    a.begin = reinterpret_cast<decltype(a.begin)>(dlsym(h, "debuginfod_begin"));
    a.end = reinterpret_cast<decltype(a.end)>(dlsym(h, "debuginfod_end"));
    a.find_debuginfo = reinterpret_cast<decltype(a.find_debuginfo)>(dlsym(h, "debuginfod_find_debuginfo"));
    a.get_url = reinterpret_cast<decltype(a.get_url)>(dlsym(h, "debuginfod_get_url"));
    return a;
  }();
  return api;
}

}  // namespace

DebuginfodClient::DebuginfodClient() {
  const char* u = std::getenv("DEBUGINFOD_URLS");
  if (u != nullptr && u[0] != '\0') {
    urls_ = u;
    // Whitespace-only is "no server" for libdebuginfod too.
    if (urls_.find_first_not_of(" \t\n") == std::string::npos) urls_.clear();
  }
}

DebuginfodClient::~DebuginfodClient() {
  if (client_ != nullptr) debuginfod_api().end(client_);
}

size_t DebuginfodClient::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}

std::vector<std::string> DebuginfodClient::query_urls(const ModuleId& id) const {
  // libdebuginfod: servers separated by whitespace, a trailing '/' dropped before "/buildid/".
  std::vector<std::string> out;
  const std::string hex = id.hex();
  size_t pos = 0;
  while ((pos = urls_.find_first_not_of(" \t\n", pos)) != std::string::npos) {
    const size_t end = std::min(urls_.find_first_of(" \t\n", pos), urls_.size());
    std::string server = urls_.substr(pos, end - pos);
    while (!server.empty() && server.back() == '/') server.pop_back();
    out.push_back(server + "/buildid/" + hex + "/debuginfo");
    pos = end;
  }
  return out;
}

Result<DebuginfodFile> DebuginfodClient::find_debuginfo(const ModuleId& id, int* query_errno) {
  if (query_errno) *query_errno = 0;
  if (id.empty()) return make_error(SPROV_ERR_NOT_FOUND, "debuginfod: the module has no build-id");
  if (!enabled()) return make_error(SPROV_ERR_NOT_FOUND, "debuginfod: DEBUGINFOD_URLS is not set");
  const std::string hex = id.hex();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = misses_.find(hex); it != misses_.end()) {
    if (query_errno) *query_errno = it->second.query_errno;
    return it->second.error;
  }
  if (auto it = hits_.find(hex); it != hits_.end()) return it->second;
  auto miss = [&](Error e, int err = 0) -> Result<DebuginfodFile> {
    misses_.emplace(hex, Miss{e, err});
    if (query_errno) *query_errno = err;
    return e;
  };
  const DebuginfodApi& api = debuginfod_api();
  if (!api.ok())
    return miss(make_error(SPROV_ERR_NOT_FOUND,
                           "debuginfod: libdebuginfod.so.1 could not be loaded (install libdebuginfod1)"));
  if (!begun_) {
    begun_ = true;
    client_ = api.begin();
  }
  if (client_ == nullptr) return miss(make_error(SPROV_ERR_NOT_FOUND, "debuginfod: debuginfod_begin failed"));
  queries_++;
  char* path = nullptr;
  const int fd = api.find_debuginfo(client_, id.bytes, static_cast<int>(id.len), &path);
  if (fd < 0) {
    free(path);
    return miss(make_error(SPROV_ERR_NOT_FOUND, "debuginfod: build-id %s not served by %s: %s", hex.c_str(),
                           urls_.c_str(), strerror(-fd)),
                fd);
  }
  close(fd);
  DebuginfodFile f;
  f.cache_path = path != nullptr ? path : "";
  free(path);
  if (const char* url = api.get_url(client_); url != nullptr) f.url = url;
  if (f.url.empty()) f.url = urls_ + " (from the cache " + f.cache_path + ")";
  auto img = object::open(f.cache_path);
  if (!img.ok())
    return miss(make_error(SPROV_ERR_NOT_FOUND, "debuginfod: %s (from %s): %s", f.cache_path.c_str(), f.url.c_str(),
                           img.error().message.c_str()));
  const ModuleId& got = (*img)->id();
  if (got != id)
    return miss(make_error(SPROV_ERR_BUILD_ID_MISMATCH,
                           "debuginfod: %s (from %s) has build-id %s, the module has %s", f.cache_path.c_str(),
                           f.url.c_str(), got.empty() ? "(none)" : got.hex().c_str(), hex.c_str()));
  f.image = std::move(img).value();
  hits_.emplace(hex, f);
  return f;
}

}  // namespace stackprov::symbolize
