// SPDX-License-Identifier: Apache-2.0
// CLI: `stackprov symbolize` — llvm-symbolizer-compatible addresses → functions, lines and inline chains (LLVM/GNU/JSON).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "print.hpp"
#include "stackprov/stackprov.h"

namespace {

enum class Style { kLlvm, kGnu, kJson };
enum class Names { kLinkage, kShort, kNone };

struct Options {
  std::string obj;        // --obj: every input is an address of this module
  std::string build_id;   // --build-id (or --pdb-key's identity bytes): no module file, the bundle step answers
  int id_kind = SPROV_BUNDLE_ID_ELF_BUILD_ID;  // SPROV_BUNDLE_ID_PDB_GUID_AGE with --pdb-key
  std::string pdb_key;    // --pdb-key KEY as given
  std::string uuid;       // --uuid UUID as given (SPROV_BUNDLE_ID_MACHO_UUID)
  std::string id_option;  // the option that gave the identity: "--build-id", "--pdb-key" or "--uuid"
  std::string code_key;   // --code-id KEY as given (SPROV_BUNDLE_ID_PE_CODE_ID)
  std::string resolvers;  // --resolvers LIST ("" = the library default)
  bool has_store = false;
  std::string store;      // --store DIR
  std::string bundle;     // --bundle sha256:HEX|FILE
  bool inlines = true;
  Names names = Names::kLinkage;
  bool demangle = true;
  bool pretty = false;
  bool basenames = false;
  bool print_address = false;  // -a: the address before its answer
  uint64_t adjust_vma = 0;     // --adjust-vma: looked-up address = input - this
  int64_t context_lines = 0;   // --print-source-context-lines
  Style style = Style::kLlvm;
  bool provenance = false;
  bool verbose = false;       // --verbose, --why: what each resolver tried, on stderr
  bool debug_symtab = false;  // llvm-symbolizer-14 never names from the debug file's .symtab
  std::vector<std::string> debug_dirs;
  std::vector<std::string> symbol_paths;  // --symbol-path: PDB symbol stores
  std::vector<std::string> dsym_dirs;     // --dsym-dir: where NAME.dSYM bundles are looked for
  std::vector<std::string> inputs;  // command-line inputs (addresses, or "FILE ADDR" without --obj)
};

struct Frame {
  std::string name, file, start_file;
  uint32_t line = 0, column = 0, discriminator = 0, start_line = 0;
  bool has_start = false;
  uint64_t start = 0;
};

const char* kUsage =
    "usage: stackprov symbolize --obj PATH [options] [ADDRESS...]\n"
    "       stackprov symbolize [options] ['FILE ADDRESS'...]   (module named on each input)\n"
    "       stackprov symbolize --build-id HEX [--store DIR] [--bundle sha256:HEX|FILE] [options] [ADDRESS...]\n"
    "       stackprov symbolize --pdb-key KEY [--store DIR] [--bundle sha256:HEX|FILE] [options] [ADDRESS...]\n"
    "       stackprov symbolize --uuid UUID [--store DIR] [--bundle sha256:HEX|FILE] [options] [ADDRESS...]\n"
    "       stackprov symbolize --code-id KEY [--store DIR] [--bundle sha256:HEX|FILE] [options] [ADDRESS...]\n\n"
    "options:\n"
    "  --obj, --exe, -e PATH        the module of every input\n"
    "  --build-id HEX               the module by its ELF build-id, no file: only its bundle\n"
    "                               answers (error: no bundle for build-id HEX in store DIR)\n"
    "  --pdb-key KEY                the same for a PE module by its PDB's symbol-server key\n"
    "                               (GUID hex + age hex, as in NAME.pdb/KEY/NAME.pdb)\n"
    "  --uuid UUID                  the same for a Mach-O module by its LC_UUID (with or without\n"
    "                               dashes, as llvm-dwarfdump --uuid prints it)\n"
    "  --code-id KEY                the same for a PE module without a CodeView record by its\n"
    "                               code id (TimeDateStamp 8 hex digits + SizeOfImage hex)\n"
    "  --store DIR                  bundle store (default with --build-id: $STACKPROV_STORE,\n"
    "                               else $XDG_DATA_HOME/stackprov/store, else\n"
    "                               ~/.local/share/stackprov/store; otherwise none unless\n"
    "                               --store or $STACKPROV_STORE is given)\n"
    "  --bundle sha256:HEX|FILE     answer from this bundle (in the store, or a file) instead\n"
    "                               of the store's id map; a bundle that does not hold the\n"
    "                               module is refused, naming both ids\n"
    "  --resolvers LIST             comma-separated policy from debuginfod, bundle, dwarf,\n"
    "                               gopclntab, symtab, dynsym, demangle (without demangle:\n"
    "                               raw names)\n"
    "  --inlines, -i, --inlining[=true]   print the inline chain (default)\n"
    "  --no-inlines, --inlining=false     one frame, as llvm's symbolizeCode: the innermost\n"
    "                               location, named by the symbol covering the address, else\n"
    "                               by the innermost function (GNU style: the innermost)\n"
    "  --functions[=linkage|short|none], -f[=...]   function names (default linkage)\n"
    "  --demangle, -C, -demangle=true | --no-demangle, -demangle=false\n"
    "  --output-style=LLVM|GNU|JSON  (default LLVM)\n"
    "  --pretty-print, -p           'function at file:line:column' lines (JSON: indented)\n"
    "  --addresses, --print-address, -a\n"
    "                               print the input address before its answer (\"0x...\" line,\n"
    "                               or \"0x...: \" with -p; JSON always has \"Address\")\n"
    "  --adjust-vma OFFSET          look up ADDRESS - OFFSET (printed addresses stay as given)\n"
    "  --print-source-context-lines N\n"
    "                               after each location, N lines of its source file around the\n"
    "                               line ('158 >: ' marks it; JSON: \"Source\"), when the file\n"
    "                               named there can be read\n"
    "  --basenames, -s              strip directories from file names\n"
    "  --debug-file-directory DIR   where .build-id/xx/yyyy.debug is searched (repeatable);\n"
    "                               a PE's PDB as DIR/NAME.pdb and DIR/NAME.pdb/KEY/NAME.pdb\n"
    "  --dsym-dir DIR               where a Mach-O image's dSYM is looked for after the one beside\n"
    "                               it: DIR/NAME.dSYM/Contents/Resources/DWARF/NAME, its UUID\n"
    "                               checked (repeatable)\n"
    "  --symbol-path DIR            a local symbol store: a PE's PDB as DIR/NAME.pdb/KEY/NAME.pdb\n"
    "                               (KEY: GUID and age in hex) or DIR/NAME.pdb (repeatable)\n"
    "  --debug-symtab, --symbols=stackprov\n"
    "                               name functions by stackprov's own rules (doc/symbols.md:\n"
    "                               its alias rule, st_size bounds, PLT stubs as sym@plt, the\n"
    "                               debug file's .symtab), as `stackprov stack` does; default\n"
    "                               --symbols=llvm: exactly llvm-symbolizer-14's choice\n"
    "  --provenance                 JSON: add Resolver (bundle, bundle+symtab, dwarf,\n"
    "                               debuginfod+dwarf, gopclntab, symtab, minidebuginfo+symtab,\n"
    "                               dynsym, none), Source (file,\n"
    "                               debuginfod URL or the bundle's sha256:HEX), SourceBuildId\n"
    "                               and Bundle (sha256:HEX or \"\"); other styles: to stderr\n"
    "  --verbose, --why             on stderr, once per module: each step of the resolver policy\n"
    "                               in order, each path and URL it looked at (the module, the\n"
    "                               build-id path under each debug directory, each\n"
    "                               .gnu_debuglink place, each DEBUGINFOD_URLS server's\n"
    "                               SERVER/buildid/HEX/debuginfo) and why it did not serve:\n"
    "                               missing, identity mismatch (both build-ids), crc mismatch,\n"
    "                               fetch failed (libdebuginfod's error, e.g. Connection\n"
    "                               refused), no DWARF; then per address the step that\n"
    "                               answered, and \"no DWARF covering the address\" when the\n"
    "                               module's DWARF does not describe it. stdout is unchanged\n"
    "                               (unlike llvm-symbolizer's --verbose, which prints line\n"
    "                               details on stdout)\n"
    "  --relative-address           accepted for compatibility (no-op for ELF)\n"
    "  --                           every later argument is an input\n"
    "Options take their value as --opt=VALUE or --opt VALUE; single-letter flags group (-aCp).\n\n"
    "Symbolizes link-time addresses like llvm-symbolizer-14, with its output byte for byte:\n"
    "inputs come from the arguments or, when there are none, from stdin, one per line. With\n"
    "--obj an input is an address (0x hex, 0 octal, 0b binary or decimal); without it an\n"
    "input names its module first, as pprof drives llvm-symbolizer: 'FILE ADDRESS',\n"
    "'\"FILE WITH SPACES\" ADDRESS', optionally after 'CODE ' (DATA and FRAME requests are not\n"
    "supported: an error answer). A line that cannot be parsed is echoed (JSON: an \"Error\").\n"
    "Resolvers, tried in the order of --resolvers (default\n"
    "debuginfod,bundle,dwarf,gopclntab,symtab,dynsym,demangle; doc/bundles.md \"Resolver\n"
    "policy\"): bundle (the symbol bundle of the module's build-id in the store), DWARF of\n"
    "the module or of its debug file (build-id under the debug directories, .gnu_debuglink\n"
    "with CRC; identity checked), a Go binary's pclntab (also stripped), then its .symtab,\n"
    "else its .dynsym. Without a store the bundle step is skipped. A PE image with a CodeView\n"
    "record is answered from its PDB at the DWARF step (beside the image, at the record's path,\n"
    "under the debug directories and symbol paths; GUID+age checked): function, file:line:column,\n"
    "inline chain, as llvm-symbolizer-14 reads the PDB. A Mach-O image's DWARF is its dSYM's\n"
    "(beside it, then --dsym-dir; UUID checked), else that of the object files its debug map\n"
    "(N_OSO) names, as dsymutil reads them: each of the image's architecture and, where the\n"
    "map records one, its mtime (--verbose names a refused object and both values).\n"
    "A bundle carries linkage names, file, line, column and inline chains; no start\n"
    "address/line (StartAddress \"\", StartLine 0) and --functions=short prints linkage names;\n"
    "with --debug-symtab a format-5 bundle names the function as the symbol tables do, with\n"
    "its StartAddress.\n"
    "Split DWARF (.dwo by DW_AT_dwo_name + comp_dir, <obj>.dwp), dwz (.gnu_debugaltlink),\n"
    "MiniDebugInfo (.gnu_debugdata) and debuginfod (DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH,\n"
    "DEBUGINFOD_TIMEOUT; only when no local debug file is found) are followed.\n"
    "With --build-id, JSON ModuleName is \"BUILDID:HEX\".\n\n"
    "Exit status:\n"
    "  0  every input was answered; as llvm-symbolizer, also when a module file named by\n"
    "     --obj or an input cannot be read (\"??\" answers, JSON \"Error\", the reason once on\n"
    "     stderr)\n"
    "  1  a module named by --build-id, a --bundle or a --store could not be read, or a DATA or\n"
    "     FRAME request was given\n"
    "  2  bad options (one line naming the offending value)\n";

bool parse_number(std::string_view s, uint64_t* out) {
  // llvm StringRef::getAsInteger with radix 0.
  unsigned radix = 10;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    radix = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    radix = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    radix = 8;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    radix = 8;
    s.remove_prefix(1);
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

/// One input, as llvm-symbolizer's parseCommand reads it.
struct Request {
  enum class Kind { kCode, kData, kFrame } kind = Kind::kCode;
  std::string module;  // as far as it was parsed (JSON ModuleName of an unparsable input)
  uint64_t addr = 0;
};

/// llvm parseCommand: optional "CODE "/"DATA "/"FRAME ", then (without --obj or
/// --build-id) the module, bare or in "double"/'single' quotes, then the address.
bool parse_request(const std::string& input, const std::string& fixed_module, bool module_fixed, Request* r) {
  std::string_view s = input;
  s = s.substr(0, s.find('\0'));
  if (s.rfind("CODE ", 0) == 0) {
    s.remove_prefix(5);
  } else if (s.rfind("DATA ", 0) == 0) {
    r->kind = Request::Kind::kData;
    s.remove_prefix(5);
  } else if (s.rfind("FRAME ", 0) == 0) {
    r->kind = Request::Kind::kFrame;
    s.remove_prefix(6);
  }
  constexpr std::string_view kDelims = " \n\r";
  auto skip = [&] {
    const size_t b = s.find_first_not_of(kDelims);
    s.remove_prefix(b == std::string_view::npos ? s.size() : b);
  };
  auto token = [&] {
    const size_t e = std::min(s.find_first_of(kDelims), s.size());
    std::string_view t = s.substr(0, e);
    s.remove_prefix(e);
    return t;
  };
  if (module_fixed) {
    r->module = fixed_module;
  } else {
    skip();
    if (!s.empty() && (s[0] == '"' || s[0] == '\'')) {
      const char quote = s[0];
      s.remove_prefix(1);
      const size_t end = s.find(quote);
      if (end == std::string_view::npos) return false;
      r->module = std::string(s.substr(0, end));
      s.remove_prefix(end + 1);
    } else {
      r->module = std::string(token());
    }
  }
  skip();
  return parse_number(token(), &r->addr);
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

/// llvm's SourceCode::format (DIPrinter.cpp): `lines` lines of `file` centred on
/// `line` (first = max(1, line - lines/2)), each "N  : text" or "N >: text" for
/// `line`, N right-aligned to ceil(log10(last)) digits; "" when the file cannot
/// be read, lines <= 0, or the file ends before the first line.
std::string source_context(const std::string& file, uint32_t line, int64_t lines) {
  if (lines <= 0 || file.empty()) return {};
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string src = ss.str();
  const int64_t first = std::max<int64_t>(1, static_cast<int64_t>(line) - lines / 2);
  const int64_t last = first + lines - 1;
  size_t pos = 0;
  for (int64_t l = 1; l < first; l++) {
    pos = src.find('\n', pos);
    if (pos == std::string::npos) return {};
    pos++;
  }
  const int width = static_cast<int>(std::ceil(std::log10(static_cast<double>(last))));
  std::string out;
  for (int64_t l = first; l <= last && pos < src.size(); l++) {
    size_t eol = src.find('\n', pos);
    if (eol == std::string::npos) eol = src.size();
    std::string_view text(src.data() + pos, eol - pos);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);  // llvm line_iterator: "\r\n" ends a line
    char num[32];
    snprintf(num, sizeof num, "%*" PRId64, width, l);
    out += num;
    out += l == line ? " >: " : "  : ";
    out += text;
    out += '\n';
    pos = eol + 1;
  }
  return out;
}

/// llvm::json's formatv("{0:2}") layout of compact JSON text (llvm-symbolizer
/// --output-style=JSON --pretty-print): two-space indents, "key": value, empty
/// arrays and objects as [] and {}.
std::string pretty_json(const std::string& compact) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  auto newline = [&] {
    out += '\n';
    out.append(static_cast<size_t>(depth) * 2, ' ');
  };
  for (size_t i = 0; i < compact.size(); i++) {
    const char c = compact[i];
    if (in_string) {
      out += c;
      if (c == '\\') out += compact[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; out += c; break;
      case '{':
      case '[':
        out += c;
        if (i + 1 < compact.size() && (compact[i + 1] == '}' || compact[i + 1] == ']')) {
          out += compact[++i];
        } else {
          depth++;
          newline();
        }
        break;
      case '}':
      case ']': depth--; newline(); out += c; break;
      case ',': out += c; newline(); break;
      case ':': out += ": "; break;
      default: out += c;
    }
  }
  return out;
}

/// llvm's messages for the module errors callers match on (JSON "Error"."Message").
std::string llvm_error_message(int code, const std::string& ours) {
  if (code < 0 && code > -4000) return strerror(-code);  // a std::error_code from the OS
  if (code == SPROV_ERR_ELF) return "The file was not recognized as a valid object file";
  return ours;
}

class Runner {
 public:
  Runner(const Options& o, sprov_symbolizer* sym) : o_(o), sym_(sym) {}

  bool failed() const { return failed_; }
  bool unsupported() const { return unsupported_; }

  /// One input; JSON text is returned (the caller frames it), plain text is printed.
  std::string handle(const std::string& input) {
    Request rq;
    const bool fixed = !o_.obj.empty() || !o_.build_id.empty();
    if (!parse_request(input, o_.obj, fixed, &rq)) {
      if (o_.style == Style::kJson) return json_error("unable to parse arguments: " + input, nullptr, module_name(rq));
      printf("%s\n", input.c_str());
      return {};
    }
    if (rq.kind != Request::Kind::kCode) {
      const std::string what = rq.kind == Request::Kind::kData ? "DATA" : "FRAME";
      fflush(stdout);  // stderr and stdout in request order
      if (!unsupported_) fprintf(stderr, "stackprov symbolize: %s requests are not supported\n", what.c_str());
      unsupported_ = true;
      if (o_.style == Style::kJson) return json_error(what + " requests are not supported", &rq.addr, module_name(rq));
      print_plain(rq, std::vector<Frame>(1));
      return {};
    }
    std::vector<Frame>& frames = frames_;  // reused: its strings keep their buffers
    int code = 0;
    std::string err;
    if (!resolve(rq, &frames, &code, &err)) {
      fflush(stdout);  // stderr and stdout in request order
      if (reported_.insert(rq.module).second) fprintf(stderr, "stackprov symbolize: %s\n", err.c_str());
      failed_ = true;
      if (o_.style == Style::kJson) return json_error(llvm_error_message(code, err), &rq.addr, module_name(rq));
      print_plain(rq, std::vector<Frame>(1));
      return {};
    }
    if (o_.verbose) {
      fflush(stdout);  // stderr and stdout in request order
      const std::string module = module_name(rq);
      stackprov_cli::print_attempts(stderr, "stackprov symbolize", sym_, module, hex(rq.addr) + " in '" + module + "'",
                                    explained_.insert(module).second, true);
    }
    if (o_.style == Style::kJson) return json_result(rq, frames);
    if (o_.provenance) fflush(stdout);  // stderr and stdout in request order
    if (o_.provenance)
      fprintf(stderr, "%s: resolver %s, source %s, build-id %s, bundle %s\n", hex(rq.addr).c_str(), resolver_.c_str(),
              source_.c_str(), source_id_.c_str(), bundle_.empty() ? "-" : bundle_.c_str());
    print_plain(rq, frames);
    return {};
  }

 private:
  /// Resolves `rq`; false with the error when the module cannot be read.
  bool resolve(const Request& rq, std::vector<Frame>* frames, int* code, std::string* err) {
    uint32_t flags = 0;
    // llvm reads the symbol table for linkage names only: none and short are DWARF's alone.
    if (o_.names != Names::kLinkage) flags |= SPROV_SYMBOLIZE_SHORT_NAMES;
    if (!o_.demangle) flags |= SPROV_SYMBOLIZE_NO_DEMANGLE;
    if (!o_.debug_symtab) flags |= SPROV_SYMBOLIZE_LLVM_COMPAT;
    // llvm-symbolizer --no-inlines: symbolizeCode, except GNU style, which takes
    // frame 0 of the inline chain (symbolizeInlinedCode).
    if (!o_.inlines && o_.style != Style::kGnu) flags |= SPROV_SYMBOLIZE_NO_INLINES;
    const uint64_t addr = rq.addr - o_.adjust_vma;
    struct sprov_symbol_info info;
    memset(&info, 0, sizeof(info));
    info.sz = sizeof(info);
    const int rc = o_.build_id.empty() ? sprov_symbolizer_addr_ex(sym_, rq.module.c_str(), addr, flags, &info)
                                       : sprov_symbolizer_addr_id(sym_, o_.id_kind, o_.build_id.c_str(), addr, flags,
                                                                  &info);
    if (rc != 0) {
      *code = rc;
      *err = sprov_last_error_message();
      return false;
    }
    resolver_ = info.resolver_name ? info.resolver_name : "";
    source_ = info.source_path ? info.source_path : "";
    source_id_ = info.source_build_id ? info.source_build_id : "";
    bundle_ = info.bundle_digest ? info.bundle_digest : "";
    size_t n = 0;
    for (uint32_t i = 0; i < info.frame_count; i++) {
      struct sprov_symbol_frame f;
      memset(&f, 0, sizeof(f));
      f.sz = sizeof(f);
      if (sprov_symbolizer_inline_frame(sym_, i, &f) != 0) break;
      if (frames->size() <= n) frames->emplace_back();
      Frame& fr = (*frames)[n++];
      fr.name.assign(f.name);
      fr.file.assign(f.file);
      fr.start_file.assign(f.start_file);
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
    }
    frames->resize(n);
    if (frames->empty()) frames->emplace_back();
    if (!o_.inlines) frames->resize(1);
    if (o_.names == Names::kNone)
      for (auto& f : *frames) f.name.clear();
    return true;
  }

  /// llvm's PlainPrinterBase (LLVM and GNU styles).
  void print_plain(const Request& rq, const std::vector<Frame>& frames) {
    if (o_.print_address) printf("0x%" PRIx64 "%s", rq.addr, o_.pretty ? ": " : "\n");
    for (size_t i = 0; i < frames.size(); i++) {
      const Frame& f = frames[i];
      if (o_.names != Names::kNone)
        printf("%s%s%s", o_.pretty && i > 0 ? " (inlined by) " : "", f.name.empty() ? "??" : f.name.c_str(),
               o_.pretty ? " at " : "\n");
      const char* file = f.file.empty() ? "??" : f.file.c_str();
      if (o_.style == Style::kGnu) {
        printf("%s:%u", file, f.line);
        if (f.discriminator) printf(" (discriminator %u)", f.discriminator);
        printf("\n");
      } else {
        printf("%s:%u:%u\n", file, f.line, f.column);
      }
      if (o_.context_lines > 0) fputs(source_context(file, f.line, o_.context_lines).c_str(), stdout);
    }
    if (o_.style == Style::kLlvm) printf("\n");
  }

  std::string json_result(const Request& rq, const std::vector<Frame>& frames) {
    std::string o = "{\"Address\":" + json_quote(hex(rq.addr)) + ",\"ModuleName\":" + json_quote(module_name(rq));
    if (o_.provenance)
      o += ",\"Resolver\":" + json_quote(resolver_) + ",\"Source\":" + json_quote(source_) +
           ",\"SourceBuildId\":" + json_quote(source_id_) + ",\"Bundle\":" + json_quote(bundle_);
    o += ",\"Symbol\":[";
    for (size_t i = 0; i < frames.size(); i++) {
      const Frame& f = frames[i];
      if (i) o += ",";
      o += "{\"Column\":" + std::to_string(f.column) + ",\"Discriminator\":" + std::to_string(f.discriminator) +
           ",\"FileName\":" + json_quote(f.file) + ",\"FunctionName\":" + json_quote(f.name) +
           ",\"Line\":" + std::to_string(f.line);
      if (const std::string src = source_context(f.file, f.line, o_.context_lines); !src.empty())
        o += ",\"Source\":" + json_quote(src);
      o += ",\"StartAddress\":" + json_quote(f.has_start ? hex(f.start) : "") +
           ",\"StartFileName\":" + json_quote(f.start_file) + ",\"StartLine\":" + std::to_string(f.start_line) + "}";
    }
    return o + "]}";
  }

  std::string module_name(const Request& rq) const {
    if (!o_.pdb_key.empty()) return "PDBKEY:" + o_.pdb_key;
    if (!o_.uuid.empty()) return "UUID:" + o_.uuid;
    if (!o_.code_key.empty()) return "CODEID:" + o_.code_key;
    return o_.build_id.empty() ? rq.module : "BUILDID:" + o_.build_id;
  }

  static std::string json_error(const std::string& msg, const uint64_t* addr, const std::string& module) {
    std::string o = "{";
    if (addr) o += "\"Address\":" + json_quote(hex(*addr)) + ",";
    return o + "\"Error\":{\"Message\":" + json_quote(msg) + "},\"ModuleName\":" + json_quote(module) + "}";
  }

  const Options& o_;
  sprov_symbolizer* sym_;
  bool failed_ = false;
  bool unsupported_ = false;
  std::set<std::string> reported_;  // modules whose error was printed
  std::set<std::string> explained_;  // --verbose: modules whose attempts were printed
  std::vector<Frame> frames_;       // the current answer
  std::string resolver_, source_, source_id_, bundle_;
};

int usage(const std::string& msg) {
  fprintf(stderr, "stackprov symbolize: %s (see 'stackprov symbolize --help')\n", msg.c_str());
  return 2;
}

/// Single-letter flags that may be grouped (-aCp), as llvm-symbolizer's option table allows.
bool short_flag(char c, Options* o) {
  switch (c) {
    case 'a': o->print_address = true; return true;
    case 'C': o->demangle = true; return true;
    case 'i': o->inlines = true; return true;
    case 'p': o->pretty = true; return true;
    case 's': o->basenames = true; return true;
    case 'f': o->names = Names::kLinkage; return true;
    default: return false;
  }
}

bool parse_functions(const std::string& v, Names* out) {
  if (v == "linkage") *out = Names::kLinkage;
  else if (v == "short") *out = Names::kShort;
  else if (v == "none") *out = Names::kNone;
  else return false;
  return true;
}

/// Parses the command line into `o`; returns -1 to go on, else the exit status.
int parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; i++) o->inputs.emplace_back(argv[i]);
      break;
    }
    std::string name = a, val;
    bool has_val = false;
    if (a.rfind("--", 0) == 0 || a.rfind("-e=", 0) == 0 || a.rfind("-f=", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        val = a.substr(eq + 1);
        has_val = true;
      }
    }
    // GNU style: "--opt=VALUE" or "--opt VALUE".
    auto need = [&](std::string* out) {
      if (has_val) {
        *out = val;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto no_value = [&] { return has_val ? usage("option '" + name + "' takes no value ('" + a + "')") : -1; };
    if (name == "--help" || name == "-h") {
      fputs(kUsage, stdout);
      return 0;
    } else if (name == "--obj" || name == "--exe" || name == "-e") {
      if (!need(&o->obj)) return usage("option '" + name + "' needs a value");
      if (o->obj.empty()) return usage("option '" + name + "' needs a file name");
    } else if (a.size() > 2 && a.rfind("-e", 0) == 0 && a[2] != '=') {
      o->obj = a.substr(2);  // -ePATH
    } else if (name == "--code-id") {
      if (!need(&o->code_key)) return usage("--code-id needs a value");
      if (!o->id_option.empty() && o->id_option != name)
        return usage("give one of --build-id, --pdb-key, --uuid and --code-id (" + o->id_option + " and --code-id '" +
                     o->code_key + "')");
      o->id_option = name;
      o->build_id = stackprov_cli::code_id_key_id_hex(o->code_key);
      o->id_kind = SPROV_BUNDLE_ID_PE_CODE_ID;
      if (o->build_id.empty())
        return usage("--code-id '" + o->code_key +
                     "' is not a PE code id (TimeDateStamp as 8 hex digits, then SizeOfImage in hex)");
    } else if (name == "--pdb-key") {
      if (!need(&o->pdb_key)) return usage("--pdb-key needs a value");
      if (!o->id_option.empty() && o->id_option != name)
        return usage("give one of --build-id, --pdb-key, --uuid and --code-id (" + o->id_option + " and --pdb-key '" + o->pdb_key +
                     "')");
      o->id_option = name;
      o->build_id = stackprov_cli::pdb_key_id_hex(o->pdb_key);
      o->id_kind = SPROV_BUNDLE_ID_PDB_GUID_AGE;
      if (o->build_id.empty())
        return usage("--pdb-key '" + o->pdb_key +
                     "' is not a PDB symbol-server key (32 hex digits of the GUID, then the age in hex)");
    } else if (name == "--uuid") {
      if (!need(&o->uuid)) return usage("--uuid needs a value");
      if (!o->id_option.empty() && o->id_option != name)
        return usage("give one of --build-id, --pdb-key, --uuid and --code-id (" + o->id_option + " and --uuid '" + o->uuid + "')");
      o->id_option = name;
      o->build_id = stackprov_cli::uuid_id_hex(o->uuid);
      o->id_kind = SPROV_BUNDLE_ID_MACHO_UUID;
      if (o->build_id.empty())
        return usage("--uuid '" + o->uuid + "' is not a Mach-O UUID (32 hex digits, optionally 8-4-4-4-12 with dashes)");
    } else if (name == "--build-id") {
      if (!o->id_option.empty() && o->id_option != name)
        return usage("give one of --build-id, --pdb-key, --uuid and --code-id (" + o->id_option + " and --build-id)");
      o->id_option = name;
      if (!need(&o->build_id)) return usage("--build-id needs a value");
      bool ok = !o->build_id.empty() && o->build_id.size() % 2 == 0 && o->build_id.size() <= 128;
      for (char ch : o->build_id) ok = ok && isxdigit(static_cast<unsigned char>(ch));
      if (!ok) return usage("--build-id '" + o->build_id + "' is not an even number (2 to 128) of hex digits");
    } else if (name == "--store") {
      if (!need(&o->store)) return usage("--store needs a value");
      if (o->store.empty()) return usage("--store needs a directory");
      o->has_store = true;
    } else if (name == "--bundle") {
      if (!need(&o->bundle)) return usage("--bundle needs a value");
    } else if (name == "--resolvers") {
      if (!need(&o->resolvers)) return usage("--resolvers needs a value");
    } else if (name == "--inlines") {
      if (int r = no_value(); r >= 0) return r;
      o->inlines = true;
    } else if (name == "--no-inlines") {
      if (int r = no_value(); r >= 0) return r;
      o->inlines = false;
    } else if (name == "--inlining") {
      if (!has_val || val == "true") o->inlines = true;
      else if (val == "false") o->inlines = false;
      else return usage("--inlining must be true or false, not '" + val + "'");
    } else if (name == "--functions" || name == "-f") {
      if (has_val) {
        if (!parse_functions(val, &o->names))
          return usage("--functions must be linkage, short or none, not '" + val + "'");
      } else if (name == "--functions" && i + 1 < argc && parse_functions(argv[i + 1], &o->names)) {
        i++;  // "--functions short"
      } else {
        o->names = Names::kLinkage;
      }
    } else if (name == "--demangle" || name == "-demangle=true") {
      if (int r = no_value(); r >= 0) return r;
      o->demangle = true;
    } else if (name == "--no-demangle" || name == "-demangle=false") {
      if (int r = no_value(); r >= 0) return r;
      o->demangle = false;
    } else if (name == "--pretty-print") {
      o->pretty = true;
    } else if (name == "--basenames") {
      o->basenames = true;
    } else if (name == "--addresses" || name == "--print-address") {
      if (int r = no_value(); r >= 0) return r;
      o->print_address = true;
    } else if (name == "--adjust-vma") {
      std::string v;
      if (!need(&v)) return usage("--adjust-vma needs a value");
      if (!parse_number(v, &o->adjust_vma))
        return usage("--adjust-vma '" + v + "' is not a non-negative integer (0x hex, 0 octal, decimal)");
    } else if (name == "--print-source-context-lines") {
      std::string v;
      if (!need(&v)) return usage("--print-source-context-lines needs a value");
      uint64_t n = 0;
      const bool neg = !v.empty() && v[0] == '-';
      if (!parse_number(std::string_view(v).substr(neg ? 1 : 0), &n) || n > INT_MAX)
        return usage("--print-source-context-lines '" + v + "' is not an integer");
      o->context_lines = neg ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);  // <= 0: none, as llvm
    } else if (name == "--provenance") {
      o->provenance = true;
    } else if (name == "--verbose" || name == "--why") {
      if (int r = no_value(); r >= 0) return r;
      o->verbose = true;
    } else if (name == "--debug-symtab") {
      o->debug_symtab = true;
    } else if (name == "--symbols") {
      std::string v;
      if (!need(&v)) return usage("--symbols needs a value");
      if (v == "llvm") o->debug_symtab = false;
      else if (v == "stackprov") o->debug_symtab = true;
      else return usage("--symbols must be llvm or stackprov, not '" + v + "'");
    } else if (name == "--relative-address") {
    } else if (name == "--output-style") {
      std::string v;
      if (!need(&v)) return usage("--output-style needs a value");
      if (v == "LLVM") o->style = Style::kLlvm;
      else if (v == "GNU") o->style = Style::kGnu;
      else if (v == "JSON") o->style = Style::kJson;
      else return usage("--output-style must be LLVM, GNU or JSON, not '" + v + "'");
    } else if (name == "--debug-file-directory") {
      std::string v;
      if (!need(&v)) return usage("--debug-file-directory needs a value");
      o->debug_dirs.push_back(v);
    } else if (name == "--symbol-path") {
      std::string v;
      if (!need(&v)) return usage("--symbol-path needs a value");
      o->symbol_paths.push_back(v);
    } else if (name == "--dsym-dir") {
      std::string v;
      if (!need(&v)) return usage("--dsym-dir needs a value");
      if (v.empty()) return usage("--dsym-dir needs a directory");
      o->dsym_dirs.push_back(v);
    } else if (a.size() > 1 && a[0] == '-' && a[1] != '-' && !(a[1] >= '0' && a[1] <= '9')) {
      // Grouped single-letter flags, the last one possibly "f=VALUE" (-if=short).
      for (size_t k = 1; k < a.size(); k++) {
        if (a[k] == 'f' && k + 1 < a.size() && a[k + 1] == '=') {
          if (!parse_functions(a.substr(k + 2), &o->names))
            return usage("--functions must be linkage, short or none, not '" + a.substr(k + 2) + "'");
          break;
        }
        if (!short_flag(a[k], o)) return usage("unknown option '" + a + "'");
      }
    } else if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      return usage("unknown option '" + a + "'");
    } else {
      o->inputs.push_back(a);
    }
  }
  return -1;
}

int cmd_symbolize(int argc, char** argv) {
  Options o;
  if (int r = parse_args(argc, argv, &o); r >= 0) return r;
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

  // A symbol path is one more debug directory (a PE's PDB is looked for as DIR/NAME.pdb and in the
  // symbol-store layout DIR/NAME.pdb/KEY/NAME.pdb), after the default one when none is given.
  // A dSYM directory too (a Mach-O image's DIR/NAME.dSYM/..., after the one beside the image).
  std::vector<std::string> all_dirs = o.debug_dirs;
  if (all_dirs.empty() && (!o.symbol_paths.empty() || !o.dsym_dirs.empty())) all_dirs.push_back("/usr/lib/debug");
  all_dirs.insert(all_dirs.end(), o.symbol_paths.begin(), o.symbol_paths.end());
  all_dirs.insert(all_dirs.end(), o.dsym_dirs.begin(), o.dsym_dirs.end());
  std::string dirs;
  for (const auto& d : all_dirs) dirs += (dirs.empty() ? "" : ":") + d;
  struct sprov_context_opts copts;
  memset(&copts, 0, sizeof(copts));
  copts.sz = sizeof(copts);
  copts.debug_dirs = all_dirs.empty() ? nullptr : dirs.c_str();
  copts.bundle_store = o.has_store ? o.store.c_str() : nullptr;
  copts.resolvers = o.resolvers.empty() ? nullptr : o.resolvers.c_str();
  sprov_context* ctx = nullptr;
  if (sprov_context_new(&copts, &ctx) != 0) {
    fprintf(stderr, "stackprov symbolize: %s\n", sprov_last_error_message());
    return 1;
  }
  sprov_symbolizer* sym = nullptr;
  struct sprov_symbolizer_opts sopts;
  memset(&sopts, 0, sizeof(sopts));
  sopts.sz = sizeof(sopts);
  sopts.flags = o.verbose ? SPROV_SYM_EXPLAIN : 0;  // without it the resolvers gather nothing for --verbose
  if (sprov_symbolizer_new(ctx, &sopts, &sym) != 0) {
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
  auto json_out = [&](const std::string& compact) {
    printf("%s\n", (o.pretty ? pretty_json(compact) : compact).c_str());
  };
  if (!o.inputs.empty()) {
    std::string json;
    for (const auto& a : o.inputs) {
      std::string one = r.handle(a);
      if (o.style == Style::kJson) json += (json.empty() ? "" : ",") + one;
    }
    if (o.style == Style::kJson) json_out("[" + json + "]");
  } else {
    // One answer per request, and every answer written before we wait for more input
    // (callers such as pprof write a request and wait for its answer): input is read in
    // blocks, and stdout is flushed whenever the requests read so far are answered.
    static char out_buf[1 << 16];
    setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
    std::string pending;
    std::vector<char> buf(1 << 16);
    auto answer = [&](std::string line) {
      std::erase_if(line, [](char c) { return c == '\n' || c == '\r'; });  // as llvm-symbolizer
      std::string one = r.handle(line);
      if (o.style == Style::kJson) json_out(one);
    };
    for (;;) {
      const ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buf.data(), static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
        answer(pending.substr(start, nl + 1 - start));
      pending.erase(0, start);
      fflush(stdout);
    }
    if (!pending.empty()) answer(std::move(pending));  // a last line without its newline
    fflush(stdout);
  }
  sprov_symbolizer_free(sym);
  sprov_context_free(ctx);
  // llvm-symbolizer exits 0 when a module cannot be read; a module named by
  // --build-id, a --bundle or a store that cannot answer is an error (printed once).
  const bool failed = r.failed() && (!o.build_id.empty() || !o.bundle.empty() || o.has_store);
  return failed || r.unsupported() ? 1 : 0;
}

}  // namespace

STACKPROV_COMMAND("symbolize", "addresses -> functions, file:line:column, inline chains (llvm-symbolizer compatible)",
                  cmd_symbolize);
