// SPDX-License-Identifier: Apache-2.0
// The one renderer of a thread's frames (text and JSON), and a stored trace's threads described for it.
#include "pipeline/frame_render.hpp"

#include <cinttypes>
#include <cstdio>
#include <string_view>

namespace stackprov::pipeline {

namespace {

/// Length of the well-formed UTF-8 sequence at s[i] (Unicode table 3-7), or 0.
size_t utf8_at(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) n = 2;
  else if (b0 >= 0xe0 && b0 <= 0xef) n = 3, lo = b0 == 0xe0 ? 0xa0 : 0x80, hi = b0 == 0xed ? 0x9f : 0xbf;
  else if (b0 >= 0xf0 && b0 <= 0xf4) n = 4, lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf;
  if (n == 0 || s.size() - i < n) return 0;
  for (size_t k = 1; k < n; k++) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return 0;
  }
  return n;
}

/// `s` as the body of a JSON string (RFC 8259; \n \t \r short, other controls \u00XX, a byte
/// outside a well-formed UTF-8 sequence U+FFFD): a name is the target's data.
void esc(std::string* o, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_at(s, i);
    if (n == 0) {
      *o += "\\ufffd";
      i++;
      continue;
    }
    if (c == '"' || c == '\\') {
      *o += '\\';
      *o += static_cast<char>(c);
    } else if (c == '\n') {
      *o += "\\n";
    } else if (c == '\t') {
      *o += "\\t";
    } else if (c == '\r') {
      *o += "\\r";
    } else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      *o += b;
    } else {
      o->append(s.substr(i, n));
    }
    i += n;
  }
}

/// printf into `o`.
template <class... A>
void put(std::string* o, const char* fmt, A... a) {
  char b[256];
  const int n = snprintf(b, sizeof b, fmt, a...);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof b) {
    o->append(b, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  snprintf(big.data(), big.size(), fmt, a...);
  o->append(big.data(), static_cast<size_t>(n));
}

/// "0x…" of `v` (lower-case hex, no leading zeros).
std::string addr_hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

/// "name":"escaped" with a leading comma unless `first`.
void jstr(std::string* o, const char* name, std::string_view v, bool first = false) {
  if (!first) *o += ',';
  *o += '"';
  *o += name;
  *o += "\":\"";
  esc(o, v);
  *o += '"';
}

std::string method_label(const RenderFrame& f) { return f.awaiter ? f.method + "(awaiter)" : f.method; }

void text_frame(const RenderFrame& f, uint32_t flags, std::string* o) {
  if (f.is_runtime) {
    // "#3  python             Outer.method - /srv/app.py:42 [runtime]" (py-bt: File, line, in)
    put(o, "#%-2zu %-18s %s - %s:%u [%s]\n", f.index, f.runtime.runtime.c_str(), f.runtime.qualname.c_str(),
        f.runtime.file.c_str(), f.runtime.line, f.method.c_str());
    return;
  }
  put(o, "#%-2zu 0x%016" PRIx64, f.index, f.pc);
  if (f.is_kernel) {
    *o += ' ' + f.function + '+' + addr_hex(f.function_offset) + " - " + f.module + " [" + f.method + "]\n";
    if (f.btf == 1)
      *o += "    btf: " + f.btf_text + (f.btf_approximate ? " (approximate: a compiler clone)" : "") + '\n';
    else if (f.btf == 2)
      *o += "    btf: none (no such function in the kernel's BTF)\n";
    return;
  }
  if (f.signal_handler_called) {
    *o += " <signal handler called>";  // gdb's name for the sigreturn trampoline
  } else if (!f.function.empty()) {
    *o += ' ' + f.function + '+' + addr_hex(f.function_offset);
  } else if (!f.chain_function.empty()) {
    *o += ' ' + f.chain_function;
    if (f.chain_has_offset) *o += '+' + addr_hex(f.chain_offset);
  } else {
    *o += " ??";
  }
  *o += " - " + (f.module.empty() ? std::string("??") : f.module) + " [" + method_label(f);
  if (f.cfi_not_in_bundle) *o += ", cfi_not_in_bundle";
  if (f.jit) *o += ", jit";
  if (f.inferred) *o += ", inferred";
  if (f.kernel_user_boundary) *o += ", kernel_user_boundary";
  *o += "]\n";
  if (flags & kRenderLines) {
    for (const RenderInline& in : f.inlined)
      put(o, "    inlined %s at %s:%u:%u\n", in.function.c_str(), in.file.c_str(), in.line, in.column);
    if (f.have_location) put(o, "    %s:%u:%u\n", f.file.c_str(), f.line, f.column);
  }
  if (f.has_regs) {
    std::string line;
    for (const auto& [reg, value] : f.registers)
      if (!value.empty()) line += ' ' + reg + ' ' + value;
    *o += "    registers:" + (line.empty() ? std::string(" (none known)") : line) + '\n';
  }
  for (const RenderArg& a : f.args) {
    const std::string v = a.status == 0 ? a.value : a.status == 1 ? std::string("<optimized out>")
                                                                   : "<unknown: " + a.reason + ">";
    put(o, "    arg %s: %s = %s\n", a.name.empty() ? "?" : a.name.c_str(), a.type.empty() ? "?" : a.type.c_str(),
        v.c_str());
  }
  if (f.has_link) {
    const RenderLink& l = f.link;
    if (l.context == 0) {
      *o += "    continues on return: nowhere (uc_link is NULL: the thread exits)\n";
    } else if (!l.has_regs) {
      put(o, "    continues on return at the context 0x%" PRIx64 " (its saved registers were not captured)\n", l.context);
    } else {
      put(o, "    continues on return at the context 0x%" PRIx64 ": pc 0x%016" PRIx64 " %s", l.context, l.pc,
          l.function.empty() ? "??" : l.function.c_str());
      if (!l.function.empty()) *o += '+' + addr_hex(l.function_offset);
      *o += " - " + (l.module.empty() ? std::string("??") : l.module) + '\n';
    }
  }
}

void json_frame(const RenderFrame& f, uint32_t flags, std::string* o) {
  put(o, "{\"index\":%zu,\"pc\":\"0x%" PRIx64 "\",\"sp\":\"0x%" PRIx64 "\"", f.index, f.pc, f.sp);
  if (f.is_runtime) {
    const RenderRuntime& r = f.runtime;
    jstr(o, "method", f.method);
    jstr(o, "runtime", r.runtime);
    jstr(o, "function", r.function);
    jstr(o, "qualname", r.qualname);
    jstr(o, "file", r.file);
    put(o, ",\"line\":%u,\"entry\":%s,\"native_index\":%" PRId64 ",\"frame_address\":\"0x%" PRIx64
        "\",\"code_address\":\"0x%" PRIx64 "\"}",
        r.line, r.entry ? "true" : "false", r.native_index, r.frame_address, r.code_address);
    return;
  }
  if (f.is_kernel) {
    *o += ",\"domain\":\"kernel\"";
    jstr(o, "method", f.method);
    jstr(o, "module", f.module);
    jstr(o, "function", f.function);
    jstr(o, "function_offset", addr_hex(f.function_offset));
    jstr(o, "function_size", addr_hex(f.function_size));
    if (f.btf == 1) {
      put(o, ",\"btf\":{\"func_id\":%u,\"ret_type_id\":%u,\"approximate\":%s", f.btf_func_id, f.btf_ret_type_id,
          f.btf_approximate ? "true" : "false");
      jstr(o, "prototype", f.btf_text);
      *o += ",\"params\":[";
      for (size_t k = 0; k < f.btf_params.size(); k++) {
        *o += k ? ",{" : "{";
        jstr(o, "name", f.btf_params[k].first, true);
        put(o, ",\"type_id\":%u}", f.btf_params[k].second);
      }
      *o += "]}";
    } else if (f.btf == 2) {
      *o += ",\"btf\":null";
    }
    *o += '}';
    return;
  }
  put(o, ",\"cfa\":\"0x%" PRIx64 "\"", f.cfa);
  jstr(o, "module", f.module);
  jstr(o, "build_id", f.build_id);
  if (!f.module_key.empty()) {  // any format's identity (build_id stays an ELF build-id)
    jstr(o, "id_kind", f.id_kind);
    jstr(o, "module_key", f.module_key);
  }
  jstr(o, "module_offset", addr_hex(f.module_offset));
  jstr(o, "function", f.function);
  jstr(o, "linkage_name", f.linkage_name);
  jstr(o, "function_offset", addr_hex(f.function_offset));
  jstr(o, "resolver", f.resolver);
  jstr(o, "source", f.source);
  jstr(o, "bundle", f.bundle);
  jstr(o, "method", f.method);
  std::string fl;
  if (f.cfi_not_in_bundle) fl += ",\"cfi_not_in_bundle\"";
  if (f.jit) fl += ",\"jit\"";
  if (f.inferred) fl += ",\"inferred\"";
  if (f.awaiter) fl += ",\"async_awaiter\"";
  if (f.kernel_user_boundary) fl += ",\"kernel_user_boundary\"";
  if (!fl.empty()) *o += ",\"flags\":[" + fl.substr(1) + ']';
  if (f.has_regs) {
    std::string regs;
    for (const auto& [reg, value] : f.registers)
      regs += ",\"" + reg + "\":" + (value.empty() ? std::string("null") : '"' + value + '"');
    *o += ",\"registers\":{" + (regs.empty() ? regs : regs.substr(1)) + '}';
  }
  if (f.has_args) {
    static const char* const kStatus[] = {"value", "optimized_out", "unknown"};
    *o += ",\"args\":[";
    for (size_t k = 0; k < f.args.size(); k++) {
      const RenderArg& a = f.args[k];
      *o += k ? ",{" : "{";
      jstr(o, "name", a.name, true);
      if (a.type.empty()) *o += ",\"type\":null";
      else jstr(o, "type", a.type);
      if (a.status == 0) jstr(o, "value", a.value);
      else *o += ",\"value\":null";
      jstr(o, "status", kStatus[a.status >= 0 && a.status <= 2 ? a.status : 2]);
      if (a.status == 2) jstr(o, "reason", a.reason);
      *o += '}';
    }
    *o += ']';
  }
  if (f.async_domain) *o += ",\"domain\":\"async\"";
  if (f.has_link) {
    const RenderLink& l = f.link;
    put(o, ",\"continues_on_return\":{\"context\":\"0x%" PRIx64 "\"", l.context);
    if (l.has_regs) {
      put(o, ",\"pc\":\"0x%" PRIx64 "\",\"sp\":\"0x%" PRIx64 "\"", l.pc, l.sp);
      jstr(o, "module", l.module);
      jstr(o, "module_offset", addr_hex(l.module_offset));
      jstr(o, "function", l.function);
      jstr(o, "function_offset", addr_hex(l.function_offset));
    }
    *o += '}';
  }
  if (f.signal_handler_called) *o += ",\"signal_handler_called\":true";
  if (flags & kRenderLines) {
    // The physical function as the resolver chain names it (offline: the bundle's name, while
    // "function" is the symbol tables' and stays "").
    jstr(o, "resolved_function", f.resolved_function);
    // Its offset where the chain's answer carries the function's start (a bundle's symbol names).
    if (f.chain_has_offset) jstr(o, "resolved_function_offset", addr_hex(f.chain_offset));
    if (f.have_location) {
      jstr(o, "file", f.file);
      put(o, ",\"line\":%u,\"column\":%u", f.line, f.column);
    }
    *o += ",\"inlined\":[";
    for (size_t k = 0; k < f.inlined.size(); k++) {
      const RenderInline& in = f.inlined[k];
      *o += k ? ",{" : "{";
      jstr(o, "function", in.function, true);
      jstr(o, "linkage_name", in.linkage_name);
      jstr(o, "file", in.file);
      put(o, ",\"line\":%u,\"column\":%u}", in.line, in.column);
    }
    *o += ']';
  }
  *o += '}';
}

}  // namespace

void render_thread(const RenderThread& t, uint32_t flags, std::string* out) {
  if (flags & kRenderJson) {
    put(out, "{\"tid\":%" PRId64, t.tid);
    jstr(out, "name", t.name);
    if (!t.runtime_name.empty()) jstr(out, "runtime_name", t.runtime_name);
    if (t.has_kernel) {
      *out += ",\"kernel\":{";
      jstr(out, "state", t.kernel.state, true);
      put(out, ",\"syscall\":%" PRId64 ",\"user_sp\":\"0x%" PRIx64 "\",\"user_pc\":\"0x%" PRIx64 "\"",
          t.kernel.syscall, t.kernel.user_sp, t.kernel.user_pc);
      jstr(out, "reason", t.kernel.reason);
      *out += '}';
    }
    *out += ",\"frames\":[";
    for (size_t i = 0; i < t.frames.size(); i++) {
      if (i) *out += ',';
      json_frame(t.frames[i], flags, out);
    }
    *out += ']';
    jstr(out, "stop_reason", t.stop_reason);
    *out += '}';
    return;
  }
  put(out, "TID %" PRId64, t.tid);
  if (!t.name.empty()) *out += " \"" + t.name + '"';
  if (!t.runtime_name.empty()) {
    *out += " (python thread \"";
    esc(out, t.runtime_name);  // the target's data: one line whatever it holds
    *out += "\")";
  }
  *out += ":\n";
  if (t.has_kernel) {
    const RenderKernel& k = t.kernel;
    if (k.state == "read" && k.syscall >= 0)
      put(out, "kernel: system call %" PRId64 ", user sp 0x%" PRIx64 " pc 0x%" PRIx64 "\n", k.syscall, k.user_sp,
          k.user_pc);
    else if (k.state == "read")
      put(out, "kernel: blocked outside a system call, user sp 0x%" PRIx64 " pc 0x%" PRIx64 "\n", k.user_sp, k.user_pc);
    else
      *out += "kernel: " + k.state + ": " + k.reason + '\n';
  }
  for (const RenderFrame& f : t.frames) text_frame(f, flags, out);
  if (!t.stop_reason.empty()) *out += "stop: " + t.stop_reason + '\n';
}

std::vector<RenderThread> trace_render_threads(const trace::Trace& t, bool inferred, const trace::CapturedKernel* kernel) {
  std::vector<RenderThread> out;
  out.reserve(t.threads.size());
  for (const trace::Thread& th : t.threads) {
    RenderThread rt;
    rt.tid = static_cast<int64_t>(th.tid);
    rt.name = th.name;
    // The thread's kernel segment (trace-capture --with-btf), as `stack --kernel --with-btf` shows
    // one: its frames first, named as /proc named them (no address), then the user frames.
    const trace::CapturedKernelSegment* seg = nullptr;
    if (kernel != nullptr)
      for (const trace::CapturedKernelSegment& s : kernel->segments)
        if (s.tid == th.tid) seg = &s;
    if (seg != nullptr) {
      rt.has_kernel = true;
      rt.kernel.state = "read";
      rt.kernel.syscall = seg->syscall;
      rt.kernel.user_sp = seg->user_sp;
      rt.kernel.user_pc = seg->user_pc;
      for (const trace::CapturedKernelFrame& k : seg->frames) {
        RenderFrame r;
        r.index = rt.frames.size();
        r.is_kernel = true;
        r.method = "kernel_stack";
        r.function = k.symbol;
        r.function_offset = k.offset;
        r.function_size = k.size;
        r.module = k.module.empty() ? std::string("[kernel.kallsyms]") : "[" + k.module + "]";
        r.btf = k.btf_func_id != 0 ? 1 : 2;
        r.btf_text = k.prototype;
        r.btf_approximate = k.approximate;
        r.btf_func_id = k.btf_func_id;
        rt.frames.push_back(std::move(r));
      }
    }
    const size_t user_first = rt.frames.size();
    for (size_t i = 0; i < th.frames.size(); i++) {
      const trace::Frame& f = th.frames[i];
      if (!inferred && trace::frame_inferred(f)) continue;
      RenderFrame r;
      r.index = rt.frames.size();  // numbered as `stack` numbers what it shows
      if (f.unwind_method == "runtime") {
        // A Python frame (doc/runtime-frames.md "Traces"): its qualified name, file and line; its
        // co_name is the qualified name's last part; its activation is the next native frame.
        r.is_runtime = true;
        r.method = "runtime";
        r.runtime.runtime = "python";
        r.runtime.qualname = f.symbol;
        const size_t dot = f.symbol.rfind('.');
        r.runtime.function = dot == std::string::npos ? f.symbol : f.symbol.substr(dot + 1);
        r.runtime.file = f.file;
        r.runtime.line = f.line;
        rt.frames.push_back(std::move(r));
        continue;
      }
      r.pc = f.ip;
      r.module = f.module_path;
      r.build_id = f.module_build_id;
      if (!r.build_id.empty()) {  // a trace's frames hold an ELF build-id (doc/architecture.md "Identities")
        r.id_kind = id_kind_name(IdKind::kElfBuildId);
        r.module_key = r.build_id;
      }
      r.module_offset = f.module_offset;
      r.method = f.unwind_method;
      if (const size_t plus = r.method.find('+'); plus != std::string::npos) {
        // "<method>+jit" (JIT code), "<method>+inferred" (a tail-call frame: not on the stack)
        const std::string_view flags = std::string_view(r.method).substr(plus);
        r.jit = flags == "+jit";
        r.inferred = flags == "+inferred";
        r.method.resize(plus);
      }
      r.resolver = f.resolver;
      r.source = f.source;
      if (!f.bundle_sha256.empty()) r.bundle = "sha256:" + f.bundle_sha256;
      // A bundle carries no function starts (an offset is one a capture recorded and a resolve
      // carried over): an unknown offset shows the name alone, as `stack` shows a bundle's name.
      if (!f.symbol.empty()) {
        if (!f.symbol_offset_known) {
          r.chain_function = f.symbol;
        } else {
          r.function = f.symbol;
          r.linkage_name = f.symbol;
          r.function_offset = f.symbol_offset;
        }
      }
      r.resolved_function = f.symbol;
      size_t next = i + 1;  // the next frame shown
      while (!inferred && next < th.frames.size() && trace::frame_inferred(th.frames[next])) ++next;
      r.signal_handler_called = next < th.frames.size() && th.frames[next].unwind_method == "signal";
      r.have_location = !f.file.empty();
      r.file = f.file;
      r.line = f.line;
      r.column = f.column;
      for (size_t k = f.inline_chain.size(); k-- > 0;) {
        const trace::InlineFrame& in = f.inline_chain[k];
        r.inlined.push_back({in.function, in.function, in.file, in.line, in.column});
      }
      r.kernel_user_boundary = seg != nullptr && !seg->frames.empty() && rt.frames.size() == user_first;
      rt.frames.push_back(std::move(r));
    }
    int64_t native = -1;  // the next native frame outward: the activation that runs a Python frame
    for (size_t k = rt.frames.size(); k-- > 0;) {
      if (!rt.frames[k].is_runtime)
        native = static_cast<int64_t>(k);
      else
        rt.frames[k].runtime.native_index = native;
    }
    out.push_back(std::move(rt));
  }
  return out;
}

}  // namespace stackprov::pipeline
