// SPDX-License-Identifier: Apache-2.0
// CLI: `stackprov symbolize` — llvm-symbolizer-compatible addresses → functions, lines and inline chains (LLVM/GNU/JSON).
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "command.hpp"
#include "stackprov/stackprov.h"

namespace {

enum class Style { kLlvm, kGnu, kJson };
enum class Names { kLinkage, kShort, kNone };

struct Options {
  std::string obj;
  std::string build_id;   // --build-id: no module file, the bundle step answers
  std::string resolvers;  // --resolvers LIST ("" = the library default)
  bool has_store = false;
  std::string store;      // --store DIR
  std::string bundle;     // --bundle sha256:HEX|FILE
  bool inlines = true;
  Names names = Names::kLinkage;
  bool demangle = true;
  bool pretty = false;
  bool basenames = false;
  Style style = Style::kLlvm;
  bool provenance = false;
  bool debug_symtab = false;  // llvm-symbolizer-14 never names from the debug file's .symtab
  std::vector<std::string> debug_dirs;
  std::vector<std::string> addrs;
};

struct Frame {
  std::string name, file, start_file;
  uint32_t line = 0, column = 0, discriminator = 0, start_line = 0;
  bool has_start = false;
  uint64_t start = 0;
};

const char* kUsage =
    "usage: stackprov symbolize --obj PATH [options] [ADDRESS...]\n"
    "       stackprov symbolize --build-id HEX [--store DIR] [--bundle sha256:HEX|FILE] [options] [ADDRESS...]\n\n"
    "Symbolizes link-time addresses of PATH like llvm-symbolizer: addresses come from the\n"
    "arguments or, when there are none, from stdin (one per line; 0x hex, 0 octal or decimal).\n"
    "Resolvers, tried in the order of --resolvers (default\n"
    "debuginfod,bundle,dwarf,symtab,dynsym,demangle; doc/bundles.md \"Resolver policy\"):\n"
    "bundle (the symbol bundle of the module's build-id in the store), DWARF of PATH or of its\n"
    "debug file (build-id under the debug directories, .gnu_debuglink with CRC; identity\n"
    "checked), then PATH's .symtab, else its .dynsym. Without a store the bundle step is\n"
    "skipped.\n\n"
    "  --obj, --exe, -e PATH        the module\n"
    "  --build-id HEX               the module by its ELF build-id, no file: only its bundle\n"
    "                               answers (error: no bundle for build-id HEX in store DIR)\n"
    "  --store DIR                  bundle store (default with --build-id: $STACKPROV_STORE,\n"
    "                               else $XDG_DATA_HOME/stackprov/store, else\n"
    "                               ~/.local/share/stackprov/store; with --obj: none unless\n"
    "                               --store or $STACKPROV_STORE is given)\n"
    "  --bundle sha256:HEX|FILE     answer from this bundle (in the store, or a file) instead\n"
    "                               of the store's id map; a bundle that does not hold the\n"
    "                               module is refused, naming both ids\n"
    "  --resolvers LIST             comma-separated policy from debuginfod, bundle, dwarf,\n"
    "                               symtab, dynsym, demangle (without demangle: raw names)\n"
    "  --inlines, -i | --no-inlines  print the inline chain (default) or one frame\n"
    "  --functions[=linkage|short|none], -f   function names (default linkage)\n"
    "  --demangle, -C | --no-demangle\n"
    "  --output-style=LLVM|GNU|JSON  (default LLVM)\n"
    "  --pretty-print, -p           'function at file:line:column' lines\n"
    "  --basenames, -s              strip directories from file names\n"
    "  --debug-file-directory DIR   where .build-id/xx/yyyy.debug is searched (repeatable)\n"
    "  --debug-symtab, --symbols=stackprov\n"
    "                               name functions by stackprov's own rules (doc/symbols.md:\n"
    "                               its alias rule, st_size bounds, PLT stubs as sym@plt, the\n"
    "                               debug file's .symtab), as `stackprov stack` does; default\n"
    "                               --symbols=llvm: exactly llvm-symbolizer-14's choice\n"
    "  --provenance                 JSON: add Resolver (bundle, bundle+symtab, dwarf,\n"
    "                               debuginfod+dwarf, symtab, minidebuginfo+symtab, dynsym,\n"
    "                               none), Source (file,\n"
    "                               debuginfod URL or the bundle's sha256:HEX), SourceBuildId\n"
    "                               and Bundle (sha256:HEX or \"\"); other styles: to stderr\n"
    "A bundle carries linkage names, file, line, column and inline chains; no start\n"
    "address/line (StartAddress \"\", StartLine 0) and --functions=short prints linkage names.\n"
    "Split DWARF (.dwo by DW_AT_dwo_name + comp_dir, <obj>.dwp), dwz (.gnu_debugaltlink),\n"
    "MiniDebugInfo (.gnu_debugdata) and debuginfod (DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH,\n"
    "DEBUGINFOD_TIMEOUT; only when no local debug file is found) are followed.\n"
    "  --relative-address           accepted for compatibility (no-op for ELF)\n"
    "With --build-id, JSON ModuleName is \"BUILDID:HEX\". Exit status: 0, or 1 when a module\n"
    "named by --build-id, a --bundle or a --store could not be read (the error once on\n"
    "stderr, \"??\" answers); 2 for bad options. With --obj alone, as llvm-symbolizer: 0.\n";

bool parse_number(const std::string& tok, uint64_t* out) {
  // llvm StringRef::getAsInteger with radix 0.
  std::string s = tok;
  unsigned radix = 10;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    radix = 16;
    s = s.substr(2);
  } else if (s.size() > 1 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    radix = 2;
    s = s.substr(2);
  } else if (s.size() > 1 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    radix = 8;
    s = s.substr(2);
  } else if (s.size() > 1 && s[0] == '0') {
    radix = 8;
    s = s.substr(1);
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char ch : s) {
    unsigned d;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (ch >= 'a' && ch <= 'z') d = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'Z') d = ch - 'A' + 10;
    else return false;
    if (d >= radix) return false;
    if (v > (UINT64_MAX - d) / radix) return false;
    v = v * radix + d;
  }
  *out = v;
  return true;
}

/// llvm-symbolizer's parseCommand with --obj given: the first token is the address.
bool parse_input(const std::string& line, uint64_t* addr) {
  std::string s = line;
  if (s.rfind("CODE ", 0) == 0) s = s.substr(5);
  size_t b = s.find_first_not_of(" \n\r");
  if (b == std::string::npos) return false;
  size_t e = s.find_first_of(" \n\r", b);
  return parse_number(s.substr(b, e == std::string::npos ? std::string::npos : e - b), addr);
}

std::string json_quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == 0x7f) {
      o += "\\u007f";
    } else if (c >= 0x20 && c != '"' && c != '\\') {
      o += static_cast<char>(c);
    } else if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c == '\t') {
      o += "\\t";
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\r') {
      o += "\\r";
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      o += buf;
    }
  }
  return o + "\"";
}

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

std::string base_name(const std::string& p) {
  size_t k = p.rfind('/');
  return k == std::string::npos ? p : p.substr(k + 1);
}

class Runner {
 public:
  Runner(const Options& o, sprov_symbolizer* sym) : o_(o), sym_(sym) {}

  /// Resolves `addr`; false with `err` set when the module cannot be read.
  bool resolve(uint64_t addr, std::vector<Frame>* frames, std::string* err) {
    frames->clear();
    uint32_t flags = 0;
    if (o_.names == Names::kShort) flags |= SPROV_SYMBOLIZE_SHORT_NAMES;
    if (!o_.demangle) flags |= SPROV_SYMBOLIZE_NO_DEMANGLE;
    if (!o_.debug_symtab) flags |= SPROV_SYMBOLIZE_LLVM_COMPAT;
    struct sprov_symbol_info info;
    memset(&info, 0, sizeof(info));
    info.sz = sizeof(info);
    const int rc = o_.build_id.empty() ? sprov_symbolizer_addr_ex(sym_, o_.obj.c_str(), addr, flags, &info)
                                       : sprov_symbolizer_addr_build_id(sym_, o_.build_id.c_str(), addr, flags, &info);
    if (rc != 0) {
      *err = sprov_last_error_message();
      return false;
    }
    resolver_ = info.resolver_name ? info.resolver_name : "";
    source_ = info.source_path ? info.source_path : "";
    source_id_ = info.source_build_id ? info.source_build_id : "";
    bundle_ = info.bundle_digest ? info.bundle_digest : "";
    for (uint32_t i = 0; i < info.frame_count; i++) {
      struct sprov_symbol_frame f;
      memset(&f, 0, sizeof(f));
      f.sz = sizeof(f);
      if (sprov_symbolizer_inline_frame(sym_, i, &f) != 0) break;
      Frame fr;
      fr.name = f.name;
      fr.file = f.file;
      fr.start_file = f.start_file;
      fr.line = f.line;
      fr.column = f.column;
      fr.discriminator = f.discriminator;
      fr.start_line = f.start_line;
      fr.has_start = f.has_start_address != 0;
      fr.start = f.start_address;
      if (o_.basenames) {
        fr.file = base_name(fr.file);
        fr.start_file = base_name(fr.start_file);
      }
      frames->push_back(std::move(fr));
    }
    if (frames->empty()) frames->emplace_back();
    if (!o_.inlines && frames->size() > 1) {
      // llvm symbolizeCode: the innermost location and declaration, the
      // physical function's name and start from the symbol table.
      // (GNU style names the innermost function, as llvm-symbolizer-14 does.)
      Frame one = frames->front();
      if (o_.style != Style::kGnu) one.name = frames->back().name;
      one.has_start = frames->back().has_start;
      one.start = frames->back().start;
      frames->assign(1, one);
    }
    if (o_.names == Names::kNone)
      for (auto& f : *frames) f.name.clear();
    return true;
  }

  void print_plain(const std::vector<Frame>& frames) {
    for (size_t i = 0; i < frames.size(); i++) {
      const Frame& f = frames[i];
      if (o_.names != Names::kNone) {
        if (o_.pretty) printf("%s%s at ", i > 0 ? " (inlined by) " : "", f.name.empty() ? "??" : f.name.c_str());
        else printf("%s\n", f.name.empty() ? "??" : f.name.c_str());
      } else if (o_.pretty && i > 0) {
        printf(" (inlined by) ");
      }
      const char* file = f.file.empty() ? "??" : f.file.c_str();
      if (o_.style == Style::kGnu) {
        printf("%s:%u", file, f.line);
        if (f.discriminator) printf(" (discriminator %u)", f.discriminator);
        printf("\n");
      } else {
        printf("%s:%u:%u\n", file, f.line, f.column);
      }
    }
    if (o_.style == Style::kLlvm) printf("\n");
  }

  std::string json_result(uint64_t addr, const std::vector<Frame>& frames) {
    std::string o = "{\"Address\":" + json_quote(hex(addr)) + ",\"ModuleName\":" + json_quote(module_name());
    if (o_.provenance)
      o += ",\"Resolver\":" + json_quote(resolver_) + ",\"Source\":" + json_quote(source_) +
           ",\"SourceBuildId\":" + json_quote(source_id_) + ",\"Bundle\":" + json_quote(bundle_);
    o += ",\"Symbol\":[";
    for (size_t i = 0; i < frames.size(); i++) {
      const Frame& f = frames[i];
      if (i) o += ",";
      o += "{\"Column\":" + std::to_string(f.column) + ",\"Discriminator\":" + std::to_string(f.discriminator) +
           ",\"FileName\":" + json_quote(f.file) + ",\"FunctionName\":" + json_quote(f.name) +
           ",\"Line\":" + std::to_string(f.line) + ",\"StartAddress\":" + json_quote(f.has_start ? hex(f.start) : "") +
           ",\"StartFileName\":" + json_quote(f.start_file) + ",\"StartLine\":" + std::to_string(f.start_line) + "}";
    }
    return o + "]}";
  }

  std::string module_name() const { return o_.build_id.empty() ? o_.obj : "BUILDID:" + o_.build_id; }

  std::string json_error(const std::string& msg, const uint64_t* addr) {
    std::string o = "{";
    if (addr) o += "\"Address\":" + json_quote(hex(*addr)) + ",";
    return o + "\"Error\":{\"Message\":" + json_quote(msg) + "},\"ModuleName\":" + json_quote(module_name()) + "}";
  }

  /// One input; JSON text is returned (the caller frames it), plain text is printed.
  std::string handle(const std::string& input) {
    uint64_t addr = 0;
    if (!parse_input(input, &addr)) {
      if (o_.style == Style::kJson) return json_error("unable to parse arguments: " + input, nullptr);
      printf("%s\n", input.c_str());
      return {};
    }
    std::vector<Frame> frames;
    std::string err;
    if (!resolve(addr, &frames, &err)) {
      if (!reported_) fprintf(stderr, "stackprov symbolize: %s\n", err.c_str());
      reported_ = true;
      failed_ = true;
      if (o_.style == Style::kJson) return json_error(err, &addr);
      print_plain(std::vector<Frame>(1));
      return {};
    }
    if (o_.style == Style::kJson) return json_result(addr, frames);
    if (o_.provenance)
      fprintf(stderr, "%s: resolver %s, source %s, build-id %s, bundle %s\n", hex(addr).c_str(), resolver_.c_str(),
              source_.c_str(), source_id_.c_str(), bundle_.empty() ? "-" : bundle_.c_str());
    print_plain(frames);
    return {};
  }

 public:
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
  const Options& o_;
  sprov_symbolizer* sym_;
  bool reported_ = false;
  std::string resolver_, source_, source_id_, bundle_;
};

int usage(const std::string& msg) {
  fprintf(stderr, "stackprov symbolize: %s (see 'stackprov symbolize --help')\n", msg.c_str());
  return 2;
}

int cmd_symbolize(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    std::string name = a, val;
    bool has_val = false;
    if (a.rfind("--", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        val = a.substr(eq + 1);
        has_val = true;
      }
    }
    auto need = [&](std::string* out) {
      if (has_val) {
        *out = val;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (name == "--help" || name == "-h") {
      fputs(kUsage, stdout);
      return 0;
    } else if (name == "--obj" || name == "--exe" || name == "-e") {
      if (!need(&o.obj)) return usage("option '" + name + "' needs a value");
    } else if (name == "--build-id") {
      if (!need(&o.build_id)) return usage("--build-id needs a value");
      bool ok = !o.build_id.empty() && o.build_id.size() % 2 == 0 && o.build_id.size() <= 128;
      for (char ch : o.build_id) ok = ok && isxdigit(static_cast<unsigned char>(ch));
      if (!ok) return usage("--build-id '" + o.build_id + "' is not an even number (2 to 128) of hex digits");
    } else if (name == "--store") {
      if (!need(&o.store)) return usage("--store needs a value");
      if (o.store.empty()) return usage("--store needs a directory");
      o.has_store = true;
    } else if (name == "--bundle") {
      if (!need(&o.bundle)) return usage("--bundle needs a value");
    } else if (name == "--resolvers") {
      if (!need(&o.resolvers)) return usage("--resolvers needs a value");
    } else if (name == "--inlines" || name == "-i") {
      o.inlines = true;
    } else if (name == "--no-inlines") {
      o.inlines = false;
    } else if (name == "--functions" || name == "-f") {
      if (!has_val || val == "linkage") o.names = Names::kLinkage;
      else if (val == "short") o.names = Names::kShort;
      else if (val == "none") o.names = Names::kNone;
      else return usage("--functions must be linkage, short or none");
    } else if (name == "--demangle" || name == "-C") {
      o.demangle = true;
    } else if (name == "--no-demangle") {
      o.demangle = false;
    } else if (name == "--pretty-print" || name == "-p") {
      o.pretty = true;
    } else if (name == "--basenames" || name == "-s") {
      o.basenames = true;
    } else if (name == "--provenance") {
      o.provenance = true;
    } else if (name == "--debug-symtab") {
      o.debug_symtab = true;
    } else if (name == "--symbols") {
      std::string v;
      if (!need(&v)) return usage("--symbols needs a value");
      if (v == "llvm") o.debug_symtab = false;
      else if (v == "stackprov") o.debug_symtab = true;
      else return usage("--symbols must be llvm or stackprov");
    } else if (name == "--relative-address") {
    } else if (name == "--output-style") {
      std::string v;
      if (!need(&v)) return usage("--output-style needs a value");
      if (v == "LLVM") o.style = Style::kLlvm;
      else if (v == "GNU") o.style = Style::kGnu;
      else if (v == "JSON") o.style = Style::kJson;
      else return usage("--output-style must be LLVM, GNU or JSON");
    } else if (name == "--debug-file-directory") {
      std::string v;
      if (!need(&v)) return usage("--debug-file-directory needs a value");
      o.debug_dirs.push_back(v);
    } else if (a.size() > 1 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
      return usage("unknown option '" + a + "'");
    } else {
      o.addrs.push_back(a);
    }
  }
  if (o.obj.empty() && o.build_id.empty()) return usage("--obj PATH or --build-id HEX is required");
  if (!o.obj.empty() && !o.build_id.empty())
    return usage("give either --obj '" + o.obj + "' or --build-id '" + o.build_id + "', not both");
  if (!o.has_store) {
    if (const char* env = getenv("STACKPROV_STORE"); env != nullptr && *env) {
      o.store = env;
      o.has_store = true;
    } else if (!o.build_id.empty()) {
      o.has_store = true;  // "" = the default store directory
    }
  }

  std::string dirs;
  for (const auto& d : o.debug_dirs) dirs += (dirs.empty() ? "" : ":") + d;
  struct sprov_context_opts copts;
  memset(&copts, 0, sizeof(copts));
  copts.sz = sizeof(copts);
  copts.debug_dirs = o.debug_dirs.empty() ? nullptr : dirs.c_str();
  copts.bundle_store = o.has_store ? o.store.c_str() : nullptr;
  copts.resolvers = o.resolvers.empty() ? nullptr : o.resolvers.c_str();
  sprov_context* ctx = nullptr;
  if (sprov_context_new(&copts, &ctx) != 0) {
    fprintf(stderr, "stackprov symbolize: %s\n", sprov_last_error_message());
    return 1;
  }
  sprov_symbolizer* sym = nullptr;
  if (sprov_symbolizer_new(ctx, nullptr, &sym) != 0) {
    fprintf(stderr, "stackprov symbolize: %s\n", sprov_last_error_message());
    sprov_context_free(ctx);
    return 1;
  }
  if (!o.bundle.empty() && sprov_symbolizer_use_bundle(sym, o.bundle.c_str()) != 0) {
    fprintf(stderr, "stackprov symbolize: --bundle '%s': %s\n", o.bundle.c_str(), sprov_last_error_message());
    sprov_symbolizer_free(sym);
    sprov_context_free(ctx);
    return 1;
  }
  Runner r(o, sym);
  if (!o.addrs.empty()) {
    std::string json;
    for (const auto& a : o.addrs) {
      std::string one = r.handle(a);
      if (o.style == Style::kJson) json += (json.empty() ? "" : ",") + one;
    }
    if (o.style == Style::kJson) printf("[%s]\n", json.c_str());
  } else {
    std::string line;
    char buf[4096];
    while (fgets(buf, sizeof(buf), stdin)) {
      line += buf;
      if (line.empty() || line.back() != '\n') {
        if (!feof(stdin)) continue;
      }
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      std::string one = r.handle(line);
      if (o.style == Style::kJson) printf("%s\n", one.c_str());
      fflush(stdout);
      line.clear();
    }
  }
  sprov_symbolizer_free(sym);
  sprov_context_free(ctx);
  // llvm-symbolizer exits 0 when a module cannot be read; a module named by
  // --build-id, a --bundle or a store that cannot answer is an error (printed once).
  return r.failed() && (!o.build_id.empty() || !o.bundle.empty() || o.has_store) ? 1 : 0;
}

}  // namespace

STACKPROV_COMMAND("symbolize", "addresses -> functions, file:line:column, inline chains (llvm-symbolizer compatible)",
                  cmd_symbolize);
