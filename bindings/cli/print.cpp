// SPDX-License-Identifier: Apache-2.0
// CLI output helpers: eu-stack-style text and JSON for unwound, symbolized stacks.
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

namespace {

/// Source location of a frame and its inline chain (innermost first), from
/// sprov_symbolizer_frame_ex: the physical function's own location is the
/// last element of the chain, the inlined callees come before it.
struct SourceInfo {
  bool answered = false;  // the resolver chain named the frame
  int32_t resolver = SPROV_RESOLVER_NONE;
  std::string source, bundle, name;  // name: the physical function's (bundle answers: no symbol offset)
  bool has_start = false;            // the physical function's start (gopclntab, perfmap answers)
  uint64_t start = 0;
  bool have = false;
  std::string file;
  uint32_t line = 0, column = 0;
  struct Inlined {
    std::string function, linkage_name, file;
    uint32_t line = 0, column = 0;
  };
  std::vector<Inlined> inlined;
};

SourceInfo source_info(sprov_symbolizer* sym, const sprov_stack* stack, size_t i) {
  SourceInfo out;
  struct sprov_symbol_info info = {};
  info.sz = sizeof(info);
  if (sym == nullptr || sprov_symbolizer_frame_ex(sym, stack, i, 0, &info) != 0 || info.frame_count == 0)
    return out;
  out.answered = true;
  out.resolver = info.resolver;
  out.source = info.source_path ? info.source_path : "";
  out.bundle = info.bundle_digest ? info.bundle_digest : "";
  std::vector<struct sprov_symbol_frame> chain(info.frame_count);
  for (uint32_t k = 0; k < info.frame_count; k++) {
    chain[k] = {};
    chain[k].sz = sizeof(chain[k]);
    if (sprov_symbolizer_inline_frame(sym, k, &chain[k]) != 0) return out;
  }
  const struct sprov_symbol_frame& phys = chain.back();
  out.name = phys.name ? phys.name : "";
  out.has_start = phys.has_start_address != 0;
  out.start = phys.start_address;
  // Source lines and inline chains: the library's one rule (sprov_resolver_gives_lines).
  if (!sprov_resolver_gives_lines(info.resolver)) return out;
  out.have = phys.file != nullptr && *phys.file;
  out.file = phys.file ? phys.file : "";
  out.line = phys.line;
  out.column = phys.column;
  for (uint32_t k = 0; k + 1 < info.frame_count; k++) {
    SourceInfo::Inlined in;
    in.function = chain[k].name ? chain[k].name : "";
    in.linkage_name = chain[k].linkage_name ? chain[k].linkage_name : "";
    in.file = chain[k].file ? chain[k].file : "";
    in.line = chain[k].line;
    in.column = chain[k].column;
    out.inlined.push_back(std::move(in));
  }
  return out;
}

/// A runtime frame (SPROV_METHOD_RUNTIME) of an interleaved stack, else false.
bool runtime_frame(const sprov_stack* stack, size_t i, const struct sprov_frame& fr, struct sprov_runtime_frame* rf) {
  *rf = {};
  rf->sz = sizeof(*rf);
  return fr.method == SPROV_METHOD_RUNTIME && sprov_stack_runtime_frame(stack, i, rf) == 0;
}

/// The uc_link annotation of frame `i` (a coroutine's entry), with its saved pc named.
struct LinkNote {
  struct sprov_coroutine_link link = {};
  std::string function;  ///< "" when unnamed or no registers
  uint64_t function_offset = 0;
};

bool coroutine_link_of(sprov_symbolizer* sym, const sprov_stack* stack, size_t i, LinkNote* out) {
  const size_t n = sprov_stack_coroutine_link_count(stack);
  for (size_t k = 0; k < n; k++) {
    struct sprov_coroutine_link l = {};
    l.sz = sizeof(l);
    if (sprov_stack_coroutine_link(stack, k, &l) != 0 || l.frame != i) continue;
    out->link = l;
    if (sym && l.has_regs && l.module_path && l.module_offset > 0) {
      struct sprov_symbol s = {};
      s.sz = sizeof(s);
      // The saved pc is swapcontext's return address: named at pc - 1, offset from the pc.
      if (sprov_symbolizer_addr(sym, l.module_path, l.module_offset - 1, &s) == 0 && s.resolver != SPROV_RESOLVER_NONE &&
          s.name) {
        out->function = s.name;
        out->function_offset = s.offset + 1;
      }
    }
    return true;
  }
  return false;
}

/// "async_boundary(awaiter)" for an awaiter frame, else the method's name.
std::string method_label(const struct sprov_frame& fr) {
  std::string m = sprov_method_name(fr.method);
  if (fr.flags & SPROV_FRAME_ASYNC_AWAITER) m += "(awaiter)";
  return m;
}

}  // namespace

/// Frame `index`'s known registers as "name value" pairs in DWARF order (`stack --regs`); all of the
/// architecture's registers with `with_unknown` (value "" when unknown).
static std::vector<std::pair<std::string, std::string>> frame_registers(const sprov_stack* stack, size_t index,
                                                                         int arch, bool with_unknown) {
  std::vector<std::pair<std::string, std::string>> out;
  uint64_t v[64] = {};
  uint64_t known = 0;
  if (sprov_stack_frame_registers(stack, index, v, 64, &known) != 0) known = 0;
  for (int r = 0; r < 64; r++) {
    const char* name = sprov_register_name(arch, r);
    if (name == nullptr) break;
    if (!((known >> r) & 1) && !with_unknown) continue;
    char buf[24] = "";
    if ((known >> r) & 1) snprintf(buf, sizeof buf, "0x%" PRIx64, v[r]);
    out.emplace_back(name, buf);
  }
  return out;
}

bool is_signal_trampoline(const sprov_stack* stack, size_t index) {
  struct sprov_frame next = {};
  next.sz = sizeof(next);
  return index + 1 < sprov_stack_frame_count(stack) && sprov_stack_frame(stack, index + 1, &next) == 0 &&
         next.method == SPROV_METHOD_SIGNAL;
}

void print_stack_text(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                      const std::string& name, bool lines, int regs_arch,
                      const std::string& runtime_name) {
  const std::string rt =
      runtime_name.empty() ? "" : " (python thread \"" + json_escape(runtime_name.c_str()) + "\")";
  if (name.empty()) fprintf(f, "TID %" PRId64 "%s:\n", tid, rt.c_str());
  else fprintf(f, "TID %" PRId64 " \"%s\"%s:\n", tid, name.c_str(), rt.c_str());
  const size_t n = sprov_stack_frame_count(stack);
  for (size_t i = 0; i < n; i++) {
    struct sprov_frame fr = {};
    fr.sz = sizeof(fr);
    if (sprov_stack_frame(stack, i, &fr) != 0) continue;
    struct sprov_runtime_frame rf;
    if (runtime_frame(stack, i, fr, &rf)) {
      // "#3  python             Outer.method - /srv/app.py:42 [runtime]" (py-bt: File, line, in)
      fprintf(f, "#%-2zu %-18s %s - %s:%u [%s]\n", i, rf.runtime, rf.qualname, rf.file, rf.line,
              sprov_method_name(fr.method));
      continue;
    }
    struct sprov_symbol s = {};
    s.sz = sizeof(s);
    if (sym) sprov_symbolizer_frame(sym, stack, i, &s);
    fprintf(f, "#%-2zu 0x%016" PRIx64, i, fr.pc);
    SourceInfo src;
    if (lines) src = source_info(sym, stack, i);
    if (is_signal_trampoline(stack, i)) {
      fprintf(f, " <signal handler called>");  // gdb's name for the sigreturn trampoline
    } else if (s.resolver != SPROV_RESOLVER_NONE && s.name && *s.name) {
      fprintf(f, " %s+0x%" PRIx64, s.name, s.offset);
    } else if (src.resolver == SPROV_RESOLVER_BUNDLE && !src.name.empty()) {
      fprintf(f, " %s", src.name.c_str());  // offline: named by its bundle (no symbol start)
    } else if (src.resolver != SPROV_RESOLVER_NONE && !src.name.empty() && src.has_start &&
               fr.module_offset >= src.start) {
      fprintf(f, " %s+0x%" PRIx64, src.name.c_str(), fr.module_offset - src.start);  // stripped Go binary
    } else {
      fprintf(f, " ??");
    }
    fprintf(f, " - %s [%s%s%s%s]\n", fr.module_path ? fr.module_path : "??", method_label(fr).c_str(),
            (fr.flags & SPROV_FRAME_CFI_NOT_IN_BUNDLE) ? ", cfi_not_in_bundle" : "",
            (fr.flags & SPROV_FRAME_JIT) ? ", jit" : "", (fr.flags & SPROV_FRAME_INFERRED) ? ", inferred" : "");
    if (lines) {
      for (const auto& in : src.inlined)
        fprintf(f, "    inlined %s at %s:%u:%u\n", in.function.c_str(), in.file.c_str(), in.line, in.column);
      if (src.have) fprintf(f, "    %s:%u:%u\n", src.file.c_str(), src.line, src.column);
    }
    if (regs_arch != 0) {
      std::string line;
      for (const auto& [reg, value] : frame_registers(stack, i, regs_arch, false)) line += " " + reg + " " + value;
      fprintf(f, "    registers:%s\n", line.empty() ? " (none known)" : line.c_str());
    }
    LinkNote note;
    if (coroutine_link_of(sym, stack, i, &note)) {
      // doc/async-stacks.md: uc_link, an annotation of the coroutine's entry, not a frame.
      const struct sprov_coroutine_link& l = note.link;
      if (l.context == 0) {
        fprintf(f, "    continues on return: nowhere (uc_link is NULL: the thread exits)\n");
      } else if (!l.has_regs) {
        fprintf(f, "    continues on return at the context 0x%" PRIx64 " (its saved registers were not captured)\n",
                l.context);
      } else {
        fprintf(f, "    continues on return at the context 0x%" PRIx64 ": pc 0x%016" PRIx64 " %s", l.context, l.pc,
                note.function.empty() ? "??" : note.function.c_str());
        if (!note.function.empty()) fprintf(f, "+0x%" PRIx64, note.function_offset);
        fprintf(f, " - %s\n", l.module_path ? l.module_path : "??");
      }
    }
  }
  fprintf(f, "stop: %s\n", sprov_stop_reason_name(sprov_stack_stop_reason(stack)));
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
    struct sprov_runtime_frame rf;
    if (runtime_frame(stack, i, fr, &rf)) continue;
    struct sprov_symbol_info info = {};
    info.sz = sizeof(info);
    if (sprov_symbolizer_frame_ex(sym, stack, i, 0, &info) != 0) continue;
    const bool first = explained->insert(fr.module_path).second;
    char where[96];
    snprintf(where, sizeof where, "TID %" PRId64 " #%zu 0x%" PRIx64, tid, i, fr.pc);
    print_attempts(f, "stackprov stack", sym, fr.module_path, where, first, false);
  }
}

void print_stack_json(FILE* f, sprov_symbolizer* sym, const sprov_stack* stack, int64_t tid,
                      const std::string& name, bool lines, int regs_arch,
                      const std::string& runtime_name) {
  fprintf(f, "{\"tid\":%" PRId64 ",\"name\":\"%s\",", tid, json_escape(name.c_str()).c_str());
  if (!runtime_name.empty()) fprintf(f, "\"runtime_name\":\"%s\",", json_escape(runtime_name.c_str()).c_str());
  fprintf(f, "\"frames\":[");
  const size_t n = sprov_stack_frame_count(stack);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    struct sprov_frame fr = {};
    fr.sz = sizeof(fr);
    if (sprov_stack_frame(stack, i, &fr) != 0) continue;
    struct sprov_runtime_frame rf;
    if (runtime_frame(stack, i, fr, &rf)) {
      fprintf(f,
              "%s{\"index\":%zu,\"pc\":\"0x%" PRIx64 "\",\"sp\":\"0x%" PRIx64
              "\",\"method\":\"%s\",\"runtime\":\"%s\",\"function\":\"%s\",\"qualname\":\"%s\",\"file\":\"%s\","
              "\"line\":%u,\"entry\":%s,\"native_index\":%" PRId64 ",\"frame_address\":\"0x%" PRIx64
              "\",\"code_address\":\"0x%" PRIx64 "\"}",
              first ? "" : ",", i, fr.pc, fr.sp, sprov_method_name(fr.method), rf.runtime,
              json_escape(rf.function).c_str(), json_escape(rf.qualname).c_str(), json_escape(rf.file).c_str(), rf.line,
              (rf.flags & SPROV_RUNTIME_FRAME_ENTRY) ? "true" : "false", rf.native_index, rf.frame_address,
              rf.code_address);
      first = false;
      continue;
    }
    struct sprov_symbol s = {};
    s.sz = sizeof(s);
    if (sym) sprov_symbolizer_frame(sym, stack, i, &s);
    SourceInfo src;
    if (lines) src = source_info(sym, stack, i);
    // The resolver chain's answer when lines are asked for, else the symbol tables'.
    const int32_t resolver = src.answered ? src.resolver : s.resolver;
    const std::string source = src.answered ? src.source : (s.source_path ? s.source_path : "");
    fprintf(f,
            "%s{\"index\":%zu,\"pc\":\"0x%" PRIx64 "\",\"sp\":\"0x%" PRIx64
            "\",\"cfa\":\"0x%" PRIx64
            "\",\"module\":\"%s\",\"build_id\":\"%s\",\"module_offset\":\"0x%" PRIx64
            "\",\"function\":\"%s\",\"linkage_name\":\"%s\",\"function_offset\":\"0x%" PRIx64
            "\",\"resolver\":\"%s\",\"source\":\"%s\",\"bundle\":\"%s\",\"method\":\"%s\"",
            first ? "" : ",", i, fr.pc, fr.sp, fr.cfa, json_escape(fr.module_path).c_str(),
            hex_bytes(fr.build_id, fr.build_id_len).c_str(), fr.module_offset,
            json_escape(s.name).c_str(), json_escape(s.linkage_name).c_str(), s.offset, sprov_resolver_name(resolver),
            json_escape(source.c_str()).c_str(), json_escape(src.bundle.c_str()).c_str(),
            sprov_method_name(fr.method));
    if (fr.flags & (SPROV_FRAME_CFI_NOT_IN_BUNDLE | SPROV_FRAME_JIT | SPROV_FRAME_INFERRED | SPROV_FRAME_ASYNC_AWAITER)) {
      std::string flags;
      if (fr.flags & SPROV_FRAME_CFI_NOT_IN_BUNDLE) flags += ",\"cfi_not_in_bundle\"";
      if (fr.flags & SPROV_FRAME_JIT) flags += ",\"jit\"";
      if (fr.flags & SPROV_FRAME_INFERRED) flags += ",\"inferred\"";
      if (fr.flags & SPROV_FRAME_ASYNC_AWAITER) flags += ",\"async_awaiter\"";
      fprintf(f, ",\"flags\":[%s]", flags.c_str() + 1);
    }
    if (regs_arch != 0) {
      std::string regs;
      for (const auto& [reg, value] : frame_registers(stack, i, regs_arch, true))
        regs += ",\"" + reg + "\":" + (value.empty() ? std::string("null") : "\"" + value + "\"");
      fprintf(f, ",\"registers\":{%s}", regs.empty() ? "" : regs.c_str() + 1);
    }
    if (fr.domain == SPROV_DOMAIN_ASYNC) fprintf(f, ",\"domain\":\"async\"");
    LinkNote note;
    if (coroutine_link_of(sym, stack, i, &note)) {
      const struct sprov_coroutine_link& l = note.link;
      fprintf(f, ",\"continues_on_return\":{\"context\":\"0x%" PRIx64 "\"", l.context);
      if (l.has_regs)
        fprintf(f, ",\"pc\":\"0x%" PRIx64 "\",\"sp\":\"0x%" PRIx64 "\",\"module\":\"%s\",\"module_offset\":\"0x%" PRIx64
                   "\",\"function\":\"%s\",\"function_offset\":\"0x%" PRIx64 "\"",
                l.pc, l.sp, json_escape(l.module_path).c_str(), l.module_offset, json_escape(note.function.c_str()).c_str(),
                note.function_offset);
      fprintf(f, "}");
    }
    if (is_signal_trampoline(stack, i)) fprintf(f, ",\"signal_handler_called\":true");
    if (lines) {
      // The physical function as the resolver chain names it (offline: the bundle's name,
      // while "function" is the symbol tables' and stays "").
      fprintf(f, ",\"resolved_function\":\"%s\"", json_escape(src.name.c_str()).c_str());
      if (src.have)
        fprintf(f, ",\"file\":\"%s\",\"line\":%u,\"column\":%u", json_escape(src.file.c_str()).c_str(),
                src.line, src.column);
      fprintf(f, ",\"inlined\":[");
      for (size_t k = 0; k < src.inlined.size(); k++) {
        const auto& in = src.inlined[k];
        fprintf(f, "%s{\"function\":\"%s\",\"linkage_name\":\"%s\",\"file\":\"%s\",\"line\":%u,\"column\":%u}",
                k ? "," : "", json_escape(in.function.c_str()).c_str(),
                json_escape(in.linkage_name.c_str()).c_str(), json_escape(in.file.c_str()).c_str(), in.line,
                in.column);
      }
      fprintf(f, "]");
    }
    fprintf(f, "}");
    first = false;
  }
  fprintf(f, "],\"stop_reason\":\"%s\"}", sprov_stop_reason_name(sprov_stack_stop_reason(stack)));
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
