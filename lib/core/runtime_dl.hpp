// SPDX-License-Identifier: Apache-2.0
// dlopen looked up at run time (dlsym): optional shared libraries load in dynamic programs, a static link warns of nothing.
#pragma once

#include <dlfcn.h>

namespace stackprov {

/// dlopen(name, flags) for the optional libraries opened on first use: libdebuginfod
/// (symbolize/debuginfod_client.cpp) and libpq (trace/pg_store.cpp). dlopen itself is found at run
/// time, not named at link time: any reference to `dlopen` in a fully static link of libstackprov.a
/// (the in-process test fixtures, users' static programs) makes ld warn "Using 'dlopen' in
/// statically linked applications requires at runtime the shared libraries from the glibc version
/// used for linking" (glibc's static dlopen.o is always linked, by libio, and carries the warning
/// for every reference, weak ones too), and such a program would load a second libc. In a dynamic
/// program this is libc's dlopen (glibc >= 2.34; older: libdl's, when the program links it); in a
/// static one there is none, null is returned and `*why` says so: the library is then not available,
/// as when it is not installed.
inline void* runtime_dlopen(const char* name, int flags, const char** why) {
  using Open = void* (*)(const char*, int);
  static const Open open = reinterpret_cast<Open>(dlsym(RTLD_DEFAULT, "dlopen"));
  if (open == nullptr) {
    if (why != nullptr) *why = "no dlopen in this program (linked statically): shared libraries cannot be loaded";
    return nullptr;
  }
  void* h = open(name, flags);
  if (h == nullptr && why != nullptr) {
    const char* e = dlerror();
    *why = e != nullptr ? e : "dlopen failed";
  }
  return h;
}

}  // namespace stackprov
