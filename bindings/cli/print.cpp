// SPDX-License-Identifier: Apache-2.0
// CLI output helpers: a thread's frames through the library's renderer (sprov_stack_render), process headers, JSON.
#include "print.hpp"
#include "utf8.hpp"

#include <cinttypes>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include <cstring>

namespace stackprov_cli {

void append_json_escaped(std::string* out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // The run of characters that need no escape, appended at once.
    size_t j = i;
    while (j < s.size()) {
      const unsigned char c = static_cast<unsigned char>(s[j]);
      if (c < 0x20 || c == '"' || c == '\\') break;
      if (c < 0x80) {
        j++;
        continue;
      }
      const size_t n = utf8_sequence(s, j);
      if (n == 0) break;
      j += n;
    }
    out->append(s.data() + i, j - i);
    if (j == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[j]);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      case '\r': *out += "\\r"; break;
      default: {
        if (c >= 0x80) {
          // JSON text is UTF-8 (RFC 8259 section 8.1): a byte that is not part of a
          // well-formed sequence (a thread named with prctl, a symbol's raw bytes) is U+FFFD.
          *out += "\\ufffd";
          break;
        }
        char b[8];
        snprintf(b, sizeof(b), "\\u%04x", c);
        *out += b;
      }
    }
    i = j + 1;
  }
}

std::string json_escape(const char* s) {
  std::string out;
  if (s != nullptr) append_json_escaped(&out, s);
  return out;
}

void append_hex(std::string* out, uint64_t v) {
  static const char* kDigits = "0123456789abcdef";
  char b[16];
  int n = 0;
  do {
    b[15 - n++] = kDigits[v & 15];
    v >>= 4;
  } while (v != 0);
  out->append("0x", 2);
  out->append(b + 16 - n, static_cast<size_t>(n));
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

bool is_signal_trampoline(const sprov_stack* stack, size_t index) {
  struct sprov_frame next = {};
  next.sz = sizeof(next);
  return index + 1 < sprov_stack_frame_count(stack) && sprov_stack_frame(stack, index + 1, &next) == 0 &&
         next.method == SPROV_METHOD_SIGNAL;
}

namespace {

/// The library's one renderer (sprov_stack_render) of one thread, written to `f`.
int render(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid, const std::string& name,
            uint32_t flags, const std::string& runtime_name, const sprov_snapshot* snap = nullptr) {
  struct sprov_render_opts o = {};
  o.sz = sizeof(o);
  o.flags = flags;
  o.tid = tid;
  o.name = name.c_str();
  o.runtime_name = runtime_name.c_str();
  o.snapshot = snap;
  char* text = nullptr;
  size_t len = 0;
  if (int rc = sprov_stack_render(sym, stack, &o, &text, &len); rc != 0) return rc;
  fwrite(text, 1, len, f);
  sprov_free(text);
  return 0;
}

}  // namespace

int print_stack_text(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                      const std::string& name, bool lines, int regs_arch,
                      const std::string& runtime_name, bool args, const sprov_snapshot* snap) {
  return render(f, sym, stack, tid, name,
         (lines ? uint32_t{SPROV_RENDER_LINES} : 0u) | (regs_arch ? uint32_t{SPROV_RENDER_REGS} : 0u) |
             (args ? uint32_t{SPROV_RENDER_ARGS} : 0u),
         runtime_name, snap);
}

void print_attempts(FILE* f, const char* cmd, sprov_symbolizer* sym, const std::string& module,
                    const std::string& where, bool with_module, bool answered) {
  const size_t n = sprov_symbolizer_attempt_count(sym);
  if (with_module && n > 0)
    fprintf(f, "%s: why '%s': what each step of the resolver policy looked at, in order:\n", cmd, module.c_str());
  for (size_t k = 0; k < n; k++) {
    struct sprov_resolve_attempt a = {};
    a.sz = sizeof(a);
    if (sprov_symbolizer_attempt(sym, k, &a) != 0) continue;
    if (!a.per_address && !with_module) continue;
    if (a.per_address && a.outcome == SPROV_ATTEMPT_ANSWERED && !answered) continue;
    std::string line = a.per_address ? std::string(cmd) + ": " + where + ": " : std::string("  ");
    line += a.resolver;
    line += ' ';
    line += *a.looked_at ? a.looked_at : "-";
    line += ": ";
    line += a.outcome_name;
    if (*a.reason) line += std::string(" (") + a.reason + ")";
    fprintf(f, "%s\n", line.c_str());
  }
}

void print_stack_attempts(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                          std::set<std::string>* explained) {
  const size_t n = sprov_stack_frame_count(stack);
  for (size_t i = 0; i < n; i++) {
    struct sprov_frame fr = {};
    fr.sz = sizeof(fr);
    if (sprov_stack_frame(stack, i, &fr) != 0 || fr.module_path == nullptr || *fr.module_path == '\0') continue;
    if (fr.method == SPROV_METHOD_RUNTIME) continue;
    struct sprov_symbol_info info = {};
    info.sz = sizeof(info);
    if (sprov_symbolizer_frame_ex(sym, stack, i, 0, &info) != 0) continue;
    const bool first = explained->insert(fr.module_path).second;
    char where[96];
    snprintf(where, sizeof where, "TID %" PRId64 " #%zu 0x%" PRIx64, tid, i, fr.pc);
    print_attempts(f, "stackprov stack", sym, fr.module_path, where, first, false);
  }
}

int print_stack_json(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                      const std::string& name, bool lines, int regs_arch,
                      const std::string& runtime_name, bool args, const sprov_snapshot* snap) {
  return render(f, sym, stack, tid, name,
         SPROV_RENDER_JSON | (lines ? uint32_t{SPROV_RENDER_LINES} : 0u) | (regs_arch ? uint32_t{SPROV_RENDER_REGS} : 0u) |
             (args ? uint32_t{SPROV_RENDER_ARGS} : 0u),
         runtime_name, snap);
}

void print_process_header_text(FILE* f, int64_t pid, bool core, const sprov_process_info& info) {
  fprintf(f, "PID %" PRId64 " - %s\n", pid, core ? "core" : "process");
  if (*info.command_line) fprintf(f, "Core was generated by `%s'.\n", info.command_line);
  if (info.signal == 0) return;
  fprintf(f, "Program terminated with signal %s, %s.\n", info.signal_name, info.signal_description);
  fprintf(f, "signal: %d %s", info.signal, info.signal_name);
  if (info.has_siginfo) fprintf(f, ", code %d%s%s", info.signal_code, *info.signal_code_name ? " " : "",
                                info.signal_code_name);
  if (info.has_fault_address) fprintf(f, ", fault address 0x%" PRIx64, info.fault_address);
  fprintf(f, ", thread %" PRId64 "\n", info.signal_tid);
}

void print_minidump_header_text(FILE* f, int64_t pid, const sprov_process_info& info, const char* notes) {
  fprintf(f, "PID %" PRId64 " - minidump\n", pid);
  if (info.has_exception)
    fprintf(f, "exception: 0x%08" PRIX32 "%s%s at 0x%" PRIx64 ", thread %" PRId64 "\n", info.exception_code,
            *info.exception_name ? " " : "", info.exception_name, info.exception_address, info.exception_tid);
  for (const char* p = notes; p != nullptr && *p;) {
    const char* nl = strchr(p, '\n');
    const int n = nl ? static_cast<int>(nl - p) : static_cast<int>(strlen(p));
    if (n > 0) fprintf(f, "note: %.*s\n", n, p);
    p = nl ? nl + 1 : nullptr;
  }
}

void print_minidump_json(FILE* f, const sprov_process_info& info, const char* notes) {
  if (info.has_exception)
    fprintf(f, ",\"exception\":{\"code\":\"0x%08" PRIX32 "\",\"name\":\"%s\",\"address\":\"0x%" PRIx64
            "\",\"tid\":%" PRId64 "}", info.exception_code, json_escape(info.exception_name).c_str(),
            info.exception_address, info.exception_tid);
  else
    fprintf(f, ",\"exception\":null");
  fprintf(f, ",\"notes\":[");
  bool first = true;
  for (const char* p = notes; p != nullptr && *p;) {
    const char* nl = strchr(p, '\n');
    const std::string line(p, nl ? static_cast<size_t>(nl - p) : strlen(p));
    if (!line.empty()) {
      fprintf(f, "%s\"%s\"", first ? "" : ",", json_escape(line.c_str()).c_str());
      first = false;
    }
    p = nl ? nl + 1 : nullptr;
  }
  fprintf(f, "]");
}

void print_process_json(FILE* f, const sprov_process_info& info) {
  fprintf(f, ",\"program\":\"%s\",\"command_line\":\"%s\",\"signal\":", json_escape(info.program).c_str(),
          json_escape(info.command_line).c_str());
  if (info.signal == 0) {
    fprintf(f, "null");
    return;
  }
  fprintf(f, "{\"number\":%d,\"name\":\"%s\",\"description\":\"%s\",\"tid\":%" PRId64, info.signal,
          json_escape(info.signal_name).c_str(), json_escape(info.signal_description).c_str(), info.signal_tid);
  if (info.has_siginfo)
    fprintf(f, ",\"code\":%d,\"code_name\":\"%s\"", info.signal_code, json_escape(info.signal_code_name).c_str());
  if (info.has_fault_address) fprintf(f, ",\"fault_address\":\"0x%" PRIx64 "\"", info.fault_address);
  fprintf(f, "}");
}

namespace {
/// Calls f(line) for each non-empty line of `text` (NULL: none).
template <class F>
void for_each_line(const char* text, F f) {
  for (const char* p = text; p != nullptr && *p;) {
    const char* nl = strchr(p, '\n');
    const std::string_view line(p, nl ? static_cast<size_t>(nl - p) : strlen(p));
    if (!line.empty()) f(line);
    p = nl ? nl + 1 : nullptr;
  }
}
}  // namespace

void log_once_to_stderr(void*, int, const char* message) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> seen;
  std::lock_guard<std::mutex> lock(mu);
  for_each_line(message, [](std::string_view line) {
    if (seen.size() >= 4096 || seen.emplace(line).second)
      fprintf(stderr, "stackprov: warning: %.*s\n", static_cast<int>(line.size()), line.data());
  });
}

void print_warnings(FILE* f, const char* text) {
  for_each_line(text, [f](std::string_view line) {
    fprintf(f, "stackprov: warning: %.*s\n", static_cast<int>(line.size()), line.data());
  });
}

}  // namespace stackprov_cli
