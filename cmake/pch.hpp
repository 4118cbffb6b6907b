// SPDX-License-Identifier: Apache-2.0
// The library's precompiled header (cmake/pch.cmake): standard headers only, the ones most lib/ files
// include. Nothing of the project goes here: files keep including what they use.
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
