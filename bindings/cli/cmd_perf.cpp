// SPDX-License-Identifier: Apache-2.0
// `stackprov record` and `stackprov perf-import`: sample with perf_event, unwind and symbolize samples offline.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "print.hpp"
#include "profile_import.hpp"
#include "stackprov/kernel.h"
#include "profile_output.hpp"
#include "stackprov/stackprov.h"
#ifdef STACKPROV_HAVE_PPROF
#include "pprof_writer.hpp"
#endif

namespace {

using stackprov_cli::Args;
using stackprov_cli::json_escape;
using stackprov_cli::error_text;
using stackprov_cli::NameInfo;
using stackprov_cli::usage_error;

// ------------------------------------------------------------------ options

struct OptSpec {
  char short_name;  ///< 0: long form only
  const char* long_name;
  bool value;
};

/// Rewrites argv into the long forms Args reads: "-X VALUE", "-XVALUE" and "-X" become
/// "--long VALUE" / "--long"; "--long=VALUE" and "--long VALUE" pass through. With `command`,
/// the first argument that is not an option starts a command whose arguments are not parsed
/// (as perf record's "[<options>] [<command>]"). An unknown short option is an error.
bool gnu_argv(int argc, char** argv, const std::vector<OptSpec>& spec, bool command, std::vector<std::string>* out,
              std::string* err) {
  out->assign(1, argv[0]);
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--") {
      for (; i < argc; i++) out->push_back(argv[i]);
      break;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      out->push_back(a);
      const std::string name = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
      for (const OptSpec& o : spec)
        if (o.value && name == o.long_name && a.find('=') == std::string::npos && i + 1 < argc) out->push_back(argv[++i]);
      continue;
    }
    if (a.size() >= 2 && a[0] == '-') {
      if (a == "-h") {
        out->push_back(a);
        continue;
      }
      const OptSpec* o = nullptr;
      for (const OptSpec& s : spec)
        if (s.short_name != 0 && s.short_name == a[1]) o = &s;
      if (o == nullptr) {
        *err = "unknown option '" + a + "'";
        return false;
      }
      out->push_back(std::string("--") + o->long_name);
      if (o->value) {
        if (a.size() > 2) out->push_back(a.substr(2));
        else if (i + 1 < argc) out->push_back(argv[++i]);
      } else if (a.size() > 2) {
        *err = "option '-" + std::string(1, a[1]) + "' takes no value (in '" + a + "')";
        return false;
      }
      continue;
    }
    if (command) {
      out->push_back("--");
      for (; i < argc; i++) out->push_back(argv[i]);
      break;
    }
    out->push_back(a);
  }
  return true;
}

/// Parses the rewritten argv with Args; the long names of `spec` are its options.
Args parse_args(const std::vector<std::string>& args, const std::vector<OptSpec>& spec) {
  std::vector<std::string> values, flags;
  for (const OptSpec& o : spec) (o.value ? values : flags).push_back(o.long_name);
  std::vector<char*> av;
  for (const std::string& s : args) av.push_back(const_cast<char*>(s.c_str()));
  return Args(static_cast<int>(av.size()), av.data(), values, flags);
}

/// "-F/--frequency" or "--stack-size": how an option is named in messages.
std::string shown(const std::vector<OptSpec>& spec, const char* long_name) {
  for (const OptSpec& o : spec)
    if (!strcmp(o.long_name, long_name))
      return o.short_name ? std::string("-") + o.short_name + "/--" + long_name : std::string("--") + long_name;
  return std::string("--") + long_name;
}

/// An integer option in [lo, hi]; the error names the option and the value as it was typed.
bool uint_option(const Args& a, const std::vector<OptSpec>& spec, const char* name, uint64_t lo, uint64_t hi,
                 uint64_t* out, std::string* err) {
  const char* v = a.get(name);
  if (v == nullptr) return true;
  uint64_t x = 0;
  if (!stackprov_cli::parse_uint(v, &x) || x < lo || x > hi) {
    *err = "invalid value '" + std::string(v) + "' for " + shown(spec, name) + ": expected an integer from " +
           std::to_string(lo) + " to " + std::to_string(hi);
    return false;
  }
  *out = x;
  return true;
}

/// The first option of `spec` given twice, as an error; "" when none.
std::string repeated_option(const Args& a, const std::vector<OptSpec>& spec) {
  for (const OptSpec& o : spec)
    if (a.count(o.long_name) > 1) return "option " + shown(spec, o.long_name) + " given more than once";
  return "";
}

/// Parses a command's arguments (see gnu_argv). Returns -1 to go on with `*a`, else the exit
/// status: 0 after --help, 2 after a usage error (printed).
int parse_command(const char* cmd, int argc, char** argv, const std::vector<OptSpec>& spec, bool command,
                  void (*usage)(FILE*), Args* a) {
  std::vector<std::string> av;
  std::string err;
  if (!gnu_argv(argc, argv, spec, command, &av, &err)) return usage_error(cmd, err);
  *a = parse_args(av, spec);
  if (a->help) {
    usage(stdout);
    return 0;
  }
  if (!a->error.empty()) return usage_error(cmd, a->error);
  if (std::string r = repeated_option(*a, spec); !r.empty()) return usage_error(cmd, r);
  return -1;
}

/// An output file written under a temp name beside it and renamed over it by commit()
/// (sprov_output_file): a command that fails leaves no file (and an existing one untouched).
/// "-" or none: stdout. Written through a 1 MiB stdio buffer unless to a terminal: the default
/// (st_blksize, 4 KiB) cost one write(2) per 4 KiB, 25,800 of them and 15-20% of the CPU time for
/// the 105 MB of JSON of the benchmark's native recording (doc/benchmarks.md "Issue 37, stop 62").
class Output {
 public:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  ~Output() {
    if (f_ != nullptr && f_ != stdout) fclose(f_);
    if (spool_ >= 0) close(spool_);
    sprov_output_file_free(out_);  // removes the temp file unless committed
  }
  /// With `spool` fd (stdout only): written into that file (spool_file's memfd, owned from here
  /// on) and copied to stdout by commit(), not written to stdout as produced.
  bool open(const char* path, std::string* err, int spool = -1) {
    if (spool >= 0) {
      spool_ = spool;
      const int fd = dup(spool);
      if (fd < 0 || (f_ = fdopen(fd, "w+b")) == nullptr) {
        *err = std::string("cannot open the json spool: ") + strerror(errno);
        if (fd >= 0) close(fd);
        return false;
      }
      buffer_.reset(new char[kBufferBytes]);
      setvbuf(f_, buffer_.get(), _IOFBF, kBufferBytes);
      return true;
    }
    if (path == nullptr || !strcmp(path, "-")) {
      f_ = stdout;
      // glibc ignores the size without a buffer. Static: stdout is flushed again at exit.
      static char stdout_buffer[kBufferBytes];
      static bool buffered = false;  // once: perf-import started over writes after its first output
      if (!buffered && !isatty(STDOUT_FILENO)) setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);  // before any output
      buffered = true;
      return true;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      *err = std::string("output '") + path + "' is a directory";
      return false;
    }
    if (sprov_output_file_create(path, 0644, &out_) != 0) {
      *err = sprov_last_error_message();
      return false;
    }
    const int fd = dup(sprov_output_file_fd(out_));
    if (fd < 0 || (f_ = fdopen(fd, "wb")) == nullptr) {
      *err = std::string("cannot write beside '") + path + "': " + strerror(errno);
      if (fd >= 0) close(fd);
      return false;
    }
    buffer_.reset(new char[kBufferBytes]);  // freed after f_ is closed (commit, the destructor)
    setvbuf(f_, buffer_.get(), _IOFBF, kBufferBytes);
    return true;
  }
  FILE* file() const { return f_; }
  /// The spool written out to its file (open(..., spool)); false, with why, when it could not be
  /// (a full disk): nothing has reached stdout then.
  bool spool_flushed(std::string* err) {
    if (spool_ < 0) return true;
    if (fflush(f_) == 0 && !ferror(f_)) return true;
    *err = std::string("cannot hold the json for the pipe (spool): ") + strerror(errno);
    return false;
  }
  bool commit(std::string* err) {
    if (spool_ >= 0) {
      FILE* f = f_;
      f_ = nullptr;
      const bool ok = fflush(f) == 0;
      const int e = errno;
      if (fclose(f) != 0 || !ok) {
        *err = std::string("write to the json spool failed: ") + strerror(ok ? errno : e);
        return false;
      }
      if (fflush(stdout) != 0 || !copy_to_stdout(spool_)) {
        *err = std::string("write to stdout failed: ") + strerror(errno);
        return false;
      }
      return true;
    }
    if (f_ == stdout) {
      if (fflush(stdout) != 0) {
        *err = std::string("write to stdout failed: ") + strerror(errno);
        return false;
      }
      return true;
    }
    FILE* f = f_;
    f_ = nullptr;
    const bool ok = fflush(f) == 0;
    const int e = errno;
    if (fclose(f) != 0 || !ok) {
      *err = std::string("write failed: ") + strerror(ok ? errno : e);
      return false;
    }
    sprov_output_file* out = out_;
    out_ = nullptr;
    if (sprov_output_file_commit(out) != 0) {
      *err = sprov_last_error_message();
      return false;
    }
    return true;
  }

 private:
  /// The spool's bytes from its start to stdout: sendfile(2), or read and write where the kernel
  /// refuses it; a non-blocking stdout is waited for.
  static bool copy_to_stdout(int fd) {
    off_t at = 0;
    bool by_sendfile = true;
    char buf[1 << 16];
    for (;;) {
      ssize_t n;
      if (by_sendfile) {
        n = sendfile(STDOUT_FILENO, fd, &at, size_t{1} << 30);
        if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
          by_sendfile = false;
          continue;
        }
      } else {
        n = pread(fd, buf, sizeof buf, at);
        if (n > 0) {
          for (ssize_t done = 0; done < n;) {
            const ssize_t w = write(STDOUT_FILENO, buf + done, static_cast<size_t>(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EAGAIN) {
              struct pollfd p = {STDOUT_FILENO, POLLOUT, 0};
              poll(&p, 1, -1);
              continue;
            }
            if (w <= 0) return false;
            done += w;
          }
          at += n;
        }
      }
      if (n == 0) return true;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        struct pollfd p = {STDOUT_FILENO, POLLOUT, 0};
        poll(&p, 1, -1);
        continue;
      }
      if (n < 0) return false;
    }
  }
  FILE* f_ = nullptr;
  int spool_ = -1;  ///< the spool's fd (open(..., spool)), -1: none
  sprov_output_file* out_ = nullptr;
  std::unique_ptr<char[]> buffer_;  // f_'s buffer: the destructor's body closes f_ before it is freed
};


/// perf-import -f json's lines written with writev(2): a sample's frames array, cached per frame
/// sequence, is written from the cache instead of being copied into stdio's buffer first (the JSON
/// of the benchmark's native recording is 104 MB; fwrite's copy was 5-6% of a run). The other
/// pieces are copied into an arena. Gathered up to kBatchBytes or kMaxPieces, then written; the
/// FILE's own buffer is flushed before the first write. Nothing is written by the destructor (a run
/// that starts over drops what is gathered).
class JsonWriter {
 public:
  static constexpr size_t kBatchBytes = size_t{1} << 20;
  static constexpr size_t kMaxPieces = 1024;  // IOV_MAX on Linux
  explicit JsonWriter(FILE* f) : f_(f), fd_(fileno(f)) {}
  /// At most `bytes` in all (a spool's cap): a flush past it fails with EFBIG, writing nothing more.
  void set_limit(uint64_t bytes) { limit_ = bytes; }
  void copy(const std::string& s) {
    pieces_.push_back({nullptr, arena_.size(), s.size()});
    arena_ += s;
    added(s.size());
  }
  /// `s` must stay unchanged until the next flush().
  void ref(const std::string& s) {
    pieces_.push_back({s.data(), 0, s.size()});
    added(s.size());
  }
  /// Writes what is gathered; false once a write failed (error() says why).
  bool flush() {
    if (error_ != 0) return false;
    if (!flushed_file_) {
      if (fflush(f_) != 0) return fail(errno);
      flushed_file_ = true;
    }
    iov_.clear();
    for (const Piece& pc : pieces_)
      if (pc.len > 0) iov_.push_back({const_cast<char*>(pc.p != nullptr ? pc.p : arena_.data() + pc.off), pc.len});
    pieces_.clear();
    if (bytes_ > limit_ - written_) {
      capped_ = true;
      return fail(EFBIG);
    }
    written_ += bytes_;
    bytes_ = 0;
    size_t i = 0;
    while (i < iov_.size()) {
      const ssize_t n = writev(fd_, iov_.data() + i, static_cast<int>(std::min(iov_.size() - i, kMaxPieces)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        struct pollfd p = {fd_, POLLOUT, 0};
        poll(&p, 1, -1);
        continue;
      }
      if (n <= 0) return fail(n < 0 ? errno : EIO);
      for (size_t done = static_cast<size_t>(n); done > 0;) {  // past the pieces written whole, into a part
        if (done >= iov_[i].iov_len) {
          done -= iov_[i].iov_len;
          i++;
        } else {
          iov_[i].iov_base = static_cast<char*>(iov_[i].iov_base) + done;
          iov_[i].iov_len -= done;
          done = 0;
        }
      }
    }
    arena_.clear();
    return true;
  }
  int error() const { return error_; }
  bool capped() const { return capped_; }  ///< the error is set_limit's

 private:
  struct Piece {
    const char* p;  ///< nullptr: arena_ from `off`
    size_t off, len;
  };
  void added(size_t n) {
    if (error_ != 0) {  // nothing more is written: nothing kept
      pieces_.clear();
      arena_.clear();
      bytes_ = 0;
      return;
    }
    bytes_ += n;
    if (bytes_ >= kBatchBytes || pieces_.size() >= kMaxPieces) flush();
  }
  bool fail(int e) {
    error_ = e != 0 ? e : EIO;
    return false;
  }
  FILE* f_;
  int fd_;
  std::string arena_;
  std::vector<Piece> pieces_;
  std::vector<struct iovec> iov_;
  size_t bytes_ = 0;
  uint64_t written_ = 0;
  uint64_t limit_ = UINT64_MAX;
  bool capped_ = false;
  int error_ = 0;
  bool flushed_file_ = false;
};

// ------------------------------------------------------------------ perf-import

enum class Format { kFolded, kSvg, kJson, kPprof, kNone };

const std::vector<OptSpec> kImportOpts = {
    {'i', "input", true},       {'f', "format", true}, {'o', "output", true}, {0, "sysroot", true},
    {0, "max-frames", true},    {0, "title", true},    {'q', "quiet", false}, {0, "store", true},
    {0, "no-inline", false},    {0, "with-btf", false},
};

void import_usage(FILE* f) {
  fprintf(f,
          "usage: stackprov perf-import [OPTIONS] FILE\n\n"
          "Options (--opt VALUE or --opt=VALUE):\n"
          "  -i, --input FILE       the file to read (or give it as the argument)\n"
          "  -f, --format FORMAT    folded (default), svg, json, pprof or none\n"
          "  -o, --output FILE      write there instead of stdout (under a temp name, renamed when done)\n"
          "      --sysroot DIR      open module files under DIR\n"
          "      --store DIR        a bundle store (stackprov bundle build --store): a module whose file is\n"
          "                         missing, or has another build-id than the recording's, is unwound and\n"
          "                         named from the bundle of its build-id (default: no store; a DIR that does\n"
          "                         not exist is an error)\n"
          "      --max-frames N     user frames per sample, 1 to 65536 (default 256)\n"
          "      --title TEXT       the flame graph's title\n"
          "      --no-inline        folded and svg: only the physical functions, no inlined frames\n"
          "      --with-btf         json: each named kernel frame's C prototype from the running kernel's BTF\n"
          "                         (/sys/kernel/btf/vmlinux; only where the kernel frames are named, i.e. the\n"
          "                         recording's kernel is the running one): \"btf\":{\"func_id\",\"prototype\",\n"
          "                         \"approximate\"} (approximate: a compiler clone, f.isra.0 gets f's), null\n"
          "                         when BTF has no such function. Needs a build with libbpf\n"
          "  -q, --quiet            no summary or warnings on stderr (warnings include a module file that\n"
          "                         cannot be used: another build-id than the recording's, another\n"
          "                         architecture; each distinct warning is printed once), except the line\n"
          "                         saying what a truncated input lacks\n"
          "  -h, --help             this text\n\n"
          "Reads a perf.data file (perf record, with or without -g or --call-graph dwarf) or a capture file of\n"
          "`stackprov record` and writes its samples' stacks. Each sample's user frames come from one of three\n"
          "modes, counted in the summary on stderr and named per sample in JSON (\"mode\"):\n"
          "  dwarf      user registers and the copied user stack (perf record --call-graph dwarf, stackprov record):\n"
          "             unwound offline by stackprov's unwinder\n"
          "  callchain  the kernel's PERF_SAMPLE_CALLCHAIN (perf record -g: frame pointers), as perf script lists it\n"
          "             (frame method \"callchain\")\n"
          "  ip         only the sampled ip (plain perf record)\n"
          "Kernel frames (the callchain's kernel part, or a kernel ip) are named from /proc/kallsyms as perf script\n"
          "names them, and only when the recording's kernel build-id is the running kernel's (/sys/kernel/notes);\n"
          "a recording of another kernel build is named from perf's build-id cache copy of that build's listing\n"
          "($PERF_BUILDID_DIR or ~/.debug, [kernel.kallsyms]/BUILD-ID/kallsyms) when it is there, as perf script\n"
          "does; otherwise they stay [unknown] with a warning. Formats:\n"
          "  folded  one line per unique stack, `comm;root;...;leaf COUNT` (flamegraph.pl, inferno); kernel frames\n"
          "          end in _[k]; functions inlined into a frame follow it, each ending in _[i] (as perf script\n"
          "          --inline lists them; --no-inline leaves them out)\n"
          "  svg     a self-contained flame graph of the folded stacks (inlined functions in aqua): hover shows a\n"
          "          frame's details line, click zooms, Search (or Ctrl-F, or FILE.svg?s=REGEX) highlights\n"
          "          matching frames and shows the matched percentage\n"
          "  json    JSON Lines, one object per sample (\"mode\", frames leaf first with their method)\n"
          "  pprof   gzip-compressed pprof profile.proto: values samples/count and cpu/nanoseconds (the sample\n"
          "          periods; EVENT/count for other events), functions with source files, line numbers and inlined\n"
          "          frames; kernel frames in mapping [kernel.kallsyms] with the kernel's build-id\n"
          "  none    only the summary on stderr (benchmarks)\n"
          "Python frames: a capture file of `stackprov record --python` holds each sample's CPython frames, read\n"
          "from the process right after the sample; they are shown among the native frames, each before the\n"
          "_PyEval_EvalFrameDefault activation that runs it (folded: `qualname (file:line)`; JSON: {\"method\":\n"
          "\"runtime\",\"runtime\":\"python\",\"function\",\"qualname\",\"file\",\"line\"}; pprof: a function with its\n"
          "file and line). A sample whose frames were torn at recording, or read too late to fit its native stack,\n"
          "shows its native frames only (counted in the summary). A perf.data file holds no interpreter memory: its\n"
          "Python programs appear as CPython's C frames (_PyEval_EvalFrameDefault, ...).\n\n"
          "Environment:\n"
          "  STACKPROV_SPOOL_MAX  json to a pipe is held in memory (up to this many bytes, default 268435456)\n"
          "                       and written when the file has been read; past it, or with 0, the file is\n"
          "                       read with its index and written as it goes\n\n"
          "Exit status:\n"
          "  0  the output was written (samples that could not be unwound are counted as failed in the summary);\n"
          "     also for an input that ends early (cut inside its data or feature sections, a capture file\n"
          "     without its END record): every complete record is read, a partial last one is dropped, and one\n"
          "     line on stderr names the file and says how many bytes are missing\n"
          "  1  the input cannot be read (missing, malformed, unsupported or cut inside its header), the\n"
          "     --store directory does not exist, or the output cannot be written; no output file is left\n"
          "  2  usage: an unknown option, a missing or invalid value, no input or more than one\n");
}

/// perf_import's result when the profile read once cannot keep the samples' order: run it again
/// with the index (its output discarded: a temp file, or stdout, a regular file, cut back).
constexpr int kStartOver = -1;

/// Where stdout, a regular file, was when perf-import started (-1: not a regular file): a run
/// that starts over cuts it back there.
off_t stdout_start() {
  struct stat st;
  if (fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return lseek(STDOUT_FILENO, 0, SEEK_CUR);
}

/// The most perf-import holds of json to a pipe (spool_file, in memory): 256 MiB, 2.5x the JSON of the
/// benchmark's 59,000-sample native recording; $STACKPROV_SPOOL_MAX (bytes, a decimal number; 0: no
/// spool) instead when set.
uint64_t spool_max_bytes() {
  const char* env = getenv("STACKPROV_SPOOL_MAX");
  if (env != nullptr && *env != 0) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(env, &end, 10);
    if (errno == 0 && *end == 0 && env[0] != '-') return v;
    fprintf(stderr, "stackprov perf-import: STACKPROV_SPOOL_MAX '%s' is not a number of bytes; using %llu\n", env,
            static_cast<unsigned long long>(uint64_t{256} << 20));
  }
  return uint64_t{256} << 20;
}

/// perf-import's spool: an anonymous memory file (memfd: no name in any directory, nothing to plant
/// or leave behind), -1 when none can be made or `max_bytes` (spool_max_bytes()) is 0 (no spool).
int spool_file(uint64_t max_bytes) {
  if (max_bytes == 0) return -1;
  return memfd_create("stackprov-json", MFD_CLOEXEC);
}

int perf_import(int argc, char** argv, bool read_once) {
  const char* cmd = "perf-import";
  Args a(0, nullptr, {}, {});
  if (int rc = parse_command(cmd, argc, argv, kImportOpts, false, import_usage, &a); rc >= 0) return rc;
  std::string err;
  std::vector<std::string> inputs = a.pos;
  if (a.has("input")) inputs.insert(inputs.begin(), a.get("input"));
  if (inputs.empty()) return usage_error(cmd, "no input file (give FILE or -i FILE)");
  if (inputs.size() > 1) return usage_error(cmd, "more than one input ('" + inputs[0] + "', '" + inputs[1] + "')");
  const std::string in = inputs[0];
  if (in.empty()) return usage_error(cmd, "the input file name is empty");
  Format fmt = Format::kFolded;
  if (const char* v = a.get("format")) {
    if (!strcmp(v, "folded")) fmt = Format::kFolded;
    else if (!strcmp(v, "svg")) fmt = Format::kSvg;
    else if (!strcmp(v, "json")) fmt = Format::kJson;
    else if (!strcmp(v, "none")) fmt = Format::kNone;
    else if (!strcmp(v, "pprof")) {
#ifdef STACKPROV_HAVE_PPROF
      fmt = Format::kPprof;
#else
      return usage_error(cmd, "this build has no pprof output (Protobuf was not found at build time)");
#endif
    } else {
      return usage_error(cmd, "invalid value '" + std::string(v) + "' for -f/--format: expected folded, svg, json, pprof or none");
    }
  }
  uint64_t max_frames = 256;
  if (!uint_option(a, kImportOpts, "max-frames", 1, 65536, &max_frames, &err)) return usage_error(cmd, err);
  const char* sysroot = a.get("sysroot");
  if (sysroot != nullptr && !*sysroot) return usage_error(cmd, "--sysroot needs a directory");
  const char* store = a.get("store");
  if (store != nullptr && !*store) return usage_error(cmd, "--store needs a directory");
  if (std::string why = store ? stackprov_cli::store_not_found(store) : ""; !why.empty()) {
    fprintf(stderr, "stackprov perf-import: %s\n", why.c_str());
    return 1;
  }
  const std::string title = a.has("title") ? a.get("title") : "Flame Graph";
  const bool quiet = a.has("quiet");
  const bool show_inline = (fmt == Format::kFolded || fmt == Format::kSvg) && !a.has("no-inline");
  if (a.has("with-btf") && fmt != Format::kJson) return usage_error(cmd, "--with-btf is only valid with -f json");
  sprov_kernel_btf* btf = nullptr;  // freed at exit: one per run
  if (a.has("with-btf")) {
    if (int rc = sprov_kernel_btf_open(nullptr, &btf); rc != 0) {
      fprintf(stderr, "stackprov perf-import: --with-btf: %s\n", sprov_last_error_message());
      return 1;
    }
  }
  struct BtfFree {
    sprov_kernel_btf* b;
    ~BtfFree() { sprov_kernel_btf_free(b); }
  } btf_free{btf};

  const auto t0 = std::chrono::steady_clock::now();
  stackprov_cli::ImportOptions iopts;
  iopts.path = in;
  iopts.sysroot = sysroot;
  iopts.store = store;
  iopts.max_frames = static_cast<uint32_t>(max_frames);
  iopts.inlines = show_inline;
  iopts.no_stack = fmt != Format::kPprof;  // pprof's source lines need the sprov_stack
  // Read once (perf.data: the samples handed out while the file is read) where the output can be
  // discarded if that cannot keep the samples' order: everything but json is written at the end;
  // json goes to a temp file (-o), to stdout when a regular file (cut back), or to a spool (below);
  // to a terminal it is read with the index (lines shown as they come).
  const char* out_path = a.get("output");
  const bool to_stdout = out_path == nullptr || !strcmp(out_path, "-");
  const off_t stdout_at = to_stdout ? stdout_start() : -1;
  // json to a pipe is spooled into a memfd (none made: read with the index) and
  // copied to stdout at the end: nothing reaches the pipe before the order is known to hold.
  const bool to_pipe = read_once && fmt == Format::kJson && to_stdout && stdout_at < 0 && !isatty(STDOUT_FILENO);
  const uint64_t spool_max = to_pipe ? spool_max_bytes() : 0;  // read once: a bad value is reported once
  const int spool = to_pipe ? spool_file(spool_max) : -1;
  iopts.stream = read_once && (fmt != Format::kJson || !to_stdout || stdout_at >= 0 || spool >= 0);
  if (!quiet) iopts.log_fn = stackprov_cli::log_once_to_stderr;
  stackprov_cli::ProfileImport imp;
  if (imp.open(iopts, &err) != 0) {
    fprintf(stderr, "stackprov perf-import: %s\n", err.c_str());
    if (spool >= 0) close(spool);
    return 1;
  }
  sprov_symbolizer* sym = imp.symbolizer();
  struct sprov_profile_info info = imp.info();
  auto print_warnings = [&]() {
    if (info.warnings[0] && !quiet) stackprov_cli::print_warnings(stderr, info.warnings);
    // A file cut short is read up to its last complete record; what is lost is said even with --quiet.
    if (info.truncation[0]) fprintf(stderr, "stackprov perf-import: warning: %s\n", info.truncation);
  };
  if (!iopts.stream) print_warnings();  // read once: known at the end
  Output output;
  if (!output.open(a.get("output"), &err, spool)) {
    fprintf(stderr, "stackprov perf-import: %s\n", err.c_str());
    return 1;
  }
  FILE* out = output.file();
  JsonWriter json_out(out);  // -f json's lines
  // A spool holds the whole output until the end (in $TMPDIR, often memory): past kSpoolMaxBytes the
  // file is read again with its index, straight to stdout.
  if (spool >= 0) json_out.set_limit(spool_max);
  const uint64_t nominal = imp.nominal_period();
  const std::string kernel_id = imp.kernel_build_id();

  stackprov_cli::NameTable& names = imp.names();
  stackprov_cli::StackFolder stacks;
  std::string line;
  std::vector<std::string> name_json;  // JSON of names[id] from "\",\"function\"" to "\"module\":", by id
  std::vector<std::string> btf_json;   // --with-btf: ",\"btf\":..." of a kernel name id, by id
  // A user frame's module as JSON ("\"PATH\"" escaped, or null), by (module list, module index):
  // the profile's lists never change, so each path is escaped once instead of once per frame
  // (escaping was 8-10% of a run). Bounded by the profile's lists and their modules.
  std::vector<std::vector<std::string>> module_json;
  // The frames array of each distinct frame sequence (see the sample loop), at most 64 MiB of it:
  // past that, new sequences are formatted every time (same text, no cache).
  struct CachedFrames {
    std::vector<uint64_t> key;
    std::string json;
  };
  constexpr size_t kFramesJsonMaxBytes = size_t{64} << 20;
  std::unordered_multimap<uint64_t, CachedFrames> frames_json;
  size_t frames_json_bytes = 0;
  std::vector<uint64_t> stack_key;
#ifdef STACKPROV_HAVE_PPROF
  std::vector<stackprov_cli::PprofMapping> pp_mappings;
  std::map<std::pair<std::string, uint64_t>, uint32_t> pp_mapping_ids;  // (path, start) -> id
  stackprov_cli::PprofLocations pp_locations;
  // The main executable, for pprof's first mapping (pprof and `go tool pprof` take mapping 1 as
  // the program: "File: ..."): per sample, its process's program (main_module: the file the exec
  // mapped — not the comm, which differs from the file's name for /bin/sh -> dash, cc -> gcc-12 or
  // a thread renamed by prctl(PR_SET_NAME)). Where that is not known (a capture file written
  // before it was recorded, module files not found): the module of its list whose basename the
  // thread's comm begins (the kernel sets comm from the exec'd name, 15 bytes). Cached per
  // (module list, comm); the path with the most samples wins.
  std::map<std::pair<uint32_t, std::string>, std::string> pp_exe_of;
  std::map<std::string, uint64_t> pp_exe_samples;
  auto pp_count_exe = [&](const struct sprov_profile_sample& smp) {
    const bool known = smp.main_module >= 0;
    const std::string comm = known || !smp.comm ? std::string() : std::string(smp.comm);
    auto [it, fresh] = pp_exe_of.emplace(std::make_pair(smp.module_list, comm), std::string());
    if (fresh && known && smp.modules) {
      SPROV_OPTS(sprov_module_info, mi);
      if (sprov_snapshot_module(smp.modules, static_cast<size_t>(smp.main_module), &mi) == 0 && mi.path &&
          mi.path[0] == '/')
        it->second = mi.path;
    } else if (fresh && !comm.empty() && smp.modules) {
      const size_t n = sprov_snapshot_module_count(smp.modules);
      for (size_t k = 0; k < n; k++) {
        SPROV_OPTS(sprov_module_info, mi);
        if (sprov_snapshot_module(smp.modules, k, &mi) != 0 || !mi.path || mi.path[0] != '/') continue;
        const char* base = strrchr(mi.path, '/') + 1;
        if (strncmp(base, comm.c_str(), comm.size()) == 0) {
          it->second = mi.path;
          break;
        }
      }
    }
    if (!it->second.empty()) pp_exe_samples[it->second]++;
  };
  auto pp_kernel_location = [&](uint64_t pc, uint32_t id) {
    const std::string& mod = names[id].module.empty() ? std::string("[kernel.kallsyms]") : names[id].module;
    auto [mit, mfresh] = pp_mapping_ids.emplace(std::make_pair(mod, 0), static_cast<uint32_t>(pp_mappings.size() + 1));
    if (mfresh) {
      stackprov_cli::PprofMapping m;
      m.start = pc;
      m.limit = pc + 1;
      m.filename = mod;
      if (mod == "[kernel.kallsyms]") m.build_id = kernel_id;
      pp_mappings.push_back(std::move(m));
    }
    stackprov_cli::PprofMapping& m = pp_mappings[mit->second - 1];
    m.start = std::min(m.start, pc);
    m.limit = std::max(m.limit, pc + 1);
    pp_locations[{pc, id}].mapping = mit->second;
  };
#endif
  stackprov_cli::ProfileImport::Sample smp;
  for (;;) {
    uint64_t i = 0;
    const auto got = imp.next(&i, &smp);
    if (got == stackprov_cli::ProfileImport::kEnd) break;
    if (got == stackprov_cli::ProfileImport::kRestart) {
      if (!quiet) fprintf(stderr, "stackprov perf-import: %s; reading it again with its index\n", smp.error.c_str());
      if (to_stdout && fmt == Format::kJson && spool < 0) {  // a spool is dropped with `output`
        fflush(stdout);
        if (ftruncate(STDOUT_FILENO, stdout_at) != 0 || lseek(STDOUT_FILENO, stdout_at, SEEK_SET) != stdout_at) {
          fprintf(stderr, "stackprov perf-import: cannot cut stdout back to start over: %s\n", strerror(errno));
          return 1;
        }
      }
      return kStartOver;
    }
    if (got == stackprov_cli::ProfileImport::kFailed) {
      if (imp.failed() == 1) fprintf(stderr, "stackprov perf-import: sample %llu: %s\n", static_cast<unsigned long long>(i),
                                     smp.error.c_str());
      continue;
    }
    if (!smp.error.empty() && imp.failed() == 1)
      fprintf(stderr, "stackprov perf-import: sample %llu: %s\n", static_cast<unsigned long long>(i), smp.error.c_str());
    const struct sprov_profile_sample& s = smp.s;
    if (fmt == Format::kJson) {
      // The head as snprintf's %llu / %lld wrote it, without the format parsing (2-3% of a run).
      auto append_int = [&](auto v) {
        char b[24];
        line.append(b, static_cast<size_t>(std::to_chars(b, b + sizeof b, v).ptr - b));
      };
      line.assign("{\"time\":");
      append_int(static_cast<unsigned long long>(s.time));
      line += ",\"pid\":";
      append_int(static_cast<long long>(s.pid));
      line += ",\"tid\":";
      append_int(static_cast<long long>(s.tid));
      line += ",\"mode\":\"";
      line += stackprov_cli::mode_name(s.mode);
      line += "\",\"comm\":\"";
      stackprov_cli::append_json_escaped(&line, s.comm);
      line += "\",\"frames\":[";
    }
    bool first = true;
    auto json_frame = [&](uint64_t pc, uint32_t id, const char* module, uint64_t off, const char* method,
                          const std::string* escaped_module) {
      const NameInfo& n = names[id];
      line += first ? "{\"pc\":\"" : ",{\"pc\":\"";
      stackprov_cli::append_hex(&line, pc);
      // The name part of a frame is the same for every frame of the id: built once.
      if (id >= name_json.size()) name_json.resize(id + 1);
      std::string& nj = name_json[id];
      if (nj.empty()) {
        nj = "\",\"function\":";
        if (n.known) {
          nj += '"';
          stackprov_cli::append_json_escaped(&nj, n.name);
          nj += '"';
        } else {
          nj += "null";
        }
        nj += ",\"linkage_name\":";
        if (n.known && !n.linkage.empty()) {
          nj += '"';
          stackprov_cli::append_json_escaped(&nj, n.linkage);
          nj += '"';
        } else {
          nj += "null";
        }
        if (n.known) {
          nj += ",\"symbol_start\":\"";
          stackprov_cli::append_hex(&nj, n.start);
          nj += '"';
        }
        nj += ",\"module\":";
      }
      line += nj;
      if (escaped_module != nullptr) {
        line += *escaped_module;
      } else if (module) {
        line += '"';
        stackprov_cli::append_json_escaped(&line, module);
        line += '"';
      } else {
        line += "null";
      }
      line += ",\"module_offset\":\"";
      stackprov_cli::append_hex(&line, off);
      line += "\",\"method\":\"";
      line += method;
      line += '"';
      if (n.kernel && !kernel_id.empty()) {
        line += ",\"build_id\":\"";
        line += kernel_id;
        line += '"';
      }
      // The running kernel's BTF describes only a recording of the running kernel (not one named from
      // another build's cached listing).
      if (btf != nullptr && n.kernel && n.known && info.kernel_naming != SPROV_KERNEL_CACHED) {
        if (id >= btf_json.size()) btf_json.resize(id + 1);
        std::string& bj = btf_json[id];
        if (bj.empty()) {
          SPROV_OPTS(sprov_kernel_prototype, kp);
          if (sprov_kernel_btf_lookup(btf, n.name.c_str(), &kp) == 0) {
            bj = ",\"btf\":{\"func_id\":" + std::to_string(kp.func_id) + ",\"prototype\":\"";
            stackprov_cli::append_json_escaped(&bj, kp.prototype);
            bj += std::string("\",\"approximate\":") +
                  ((kp.flags & SPROV_KERNEL_FRAME_BTF_APPROXIMATE) ? "true" : "false") + '}';
          } else {
            bj = ",\"btf\":null";
          }
        }
        line += bj;
      }
      line += '}';
      first = false;
    };
    // --format json: a sample's frames array is a function of its frames (pcs, offsets, name ids,
    // methods, module indexes in its module list): cached per distinct frame sequence, compared
    // word for word (the hash only picks the bucket). A recording has few distinct stacks (255
    // and 778 in the benchmark's 25k-sample recordings), so most samples append a cached string.
    const size_t frames_at = line.size();
    uint64_t stack_hash = 0;
    const std::string* frames_cached = nullptr;
    if (fmt == Format::kJson) {
      stack_key.resize(1 + 4 * smp.frames.size());  // written in place (a push_back per word was 1.2%)
      uint64_t* k = stack_key.data();
      *k++ = s.module_list;
      for (const stackprov_cli::SampleFrame& f : smp.frames) {
        *k++ = f.pc;
        *k++ = f.module_offset;
        *k++ = (static_cast<uint64_t>(f.name) << 32) | static_cast<uint32_t>(f.method);
        *k++ = static_cast<uint32_t>(f.module_index) | (f.kernel ? 1ull << 32 : 0) | (f.inlined ? 1ull << 33 : 0);
      }
      stack_hash = 0x9e3779b97f4a7c15ull ^ stack_key.size();
      for (uint64_t w : stack_key) stack_hash = (stack_hash ^ w) * 0xff51afd7ed558ccdull, stack_hash ^= stack_hash >> 29;
      auto [lo, hi] = frames_json.equal_range(stack_hash);
      for (auto it = lo; it != hi; ++it)
        if (it->second.key == stack_key) {
          frames_cached = &it->second.json;  // written from the cache, not copied into the line
          break;
        }
    }
    for (const stackprov_cli::SampleFrame& f : smp.frames) {
      if (frames_cached) break;
      if (f.runtime) {  // a CPython frame recorded with the sample (record --python)
        const stackprov_cli::NameInfo& n = names[f.name];
#ifdef STACKPROV_HAVE_PPROF
        if (fmt == Format::kPprof && !pp_locations.count({f.addr, f.name})) {
          stackprov_cli::PprofLine pl;
          pl.function = n.name;
          pl.system_name = n.linkage;
          pl.filename = n.file;
          pl.line = n.line;
          pp_locations[{f.addr, f.name}].lines.push_back(std::move(pl));
        }
#endif
        if (fmt == Format::kJson) {
          line += first ? "{\"pc\":\"0x0\",\"method\":\"runtime\",\"runtime\":\"python\",\"function\":\""
                        : ",{\"pc\":\"0x0\",\"method\":\"runtime\",\"runtime\":\"python\",\"function\":\"";
          stackprov_cli::append_json_escaped(&line, n.linkage);
          line += "\",\"qualname\":\"";
          stackprov_cli::append_json_escaped(&line, n.name);
          line += "\",\"file\":\"";
          stackprov_cli::append_json_escaped(&line, n.file);
          line += "\",\"line\":" + std::to_string(n.line) + '}';
          first = false;
        }
        continue;
      }
      if (f.kernel) {
#ifdef STACKPROV_HAVE_PPROF
        if (fmt == Format::kPprof) pp_kernel_location(f.addr, f.name);
#endif
        if (fmt == Format::kJson) json_frame(f.pc, f.name, names[f.name].module.c_str(), f.pc, "kernel", nullptr);
        continue;
      }
#ifdef STACKPROV_HAVE_PPROF
      if (fmt == Format::kPprof && !f.inlined && f.module_index >= 0 && !pp_locations.count({f.addr, f.name})) {
        stackprov_cli::PprofLocation& loc = pp_locations[{f.addr, f.name}];
        SPROV_OPTS(sprov_module_info, mi);
        if (sprov_snapshot_module(s.modules, static_cast<size_t>(f.module_index), &mi) == 0 && mi.path) {
          auto [mit, mfresh] = pp_mapping_ids.emplace(std::make_pair(std::string(mi.path), mi.start),
                                                      static_cast<uint32_t>(pp_mappings.size() + 1));
          if (mfresh) {
            stackprov_cli::PprofMapping m;
            m.start = mi.start;
            m.limit = mi.end;
            m.file_offset = mi.file_offset;
            m.filename = mi.path;
            m.build_id = stackprov_cli::hex_bytes(mi.build_id, mi.build_id_len);
            pp_mappings.push_back(std::move(m));
          }
          loc.mapping = mit->second;
        }
        // Source lines: the inline chain at the frame, innermost first, the physical function last.
        SPROV_OPTS(sprov_symbol_info, si);
        if (f.name != 0 && sprov_symbolizer_frame_ex(sym, smp.stack, f.stack_index, 0, &si) == 0 && si.resolver != SPROV_RESOLVER_NONE) {
          for (uint32_t j = 0; j < si.frame_count; j++) {
            SPROV_OPTS(sprov_symbol_frame, sf);
            if (sprov_symbolizer_inline_frame(sym, j, &sf) != 0) break;
            stackprov_cli::PprofLine pl;
            pl.function = j + 1 == si.frame_count ? names[f.name].name : sf.name;
            pl.system_name = j + 1 == si.frame_count ? names[f.name].linkage : sf.linkage_name;
            pl.filename = sf.file;
            pl.line = sf.line;
            pl.start_line = sf.start_line;
            loc.lines.push_back(std::move(pl));
          }
          if (si.line != 0 && loc.mapping != 0) pp_mappings[loc.mapping - 1].lines = true;
        }
      }
#endif
      if (fmt == Format::kJson && !f.inlined) {
        const std::string* em = nullptr;
        if (f.module_index >= 0 && f.module_index < 65536) {
          if (s.module_list >= module_json.size()) module_json.resize(s.module_list + 1);
          std::vector<std::string>& mj = module_json[s.module_list];
          if (static_cast<size_t>(f.module_index) >= mj.size()) mj.resize(f.module_index + 1);
          std::string& e = mj[f.module_index];
          if (e.empty()) {
            if (f.module) {
              e = '"';
              stackprov_cli::append_json_escaped(&e, f.module);
              e += '"';
            } else {
              e = "null";
            }
          }
          em = &e;
        }
        json_frame(f.pc, f.name, f.module, f.module_offset, sprov_method_name(f.method), em);
      }
    }
    if (fmt == Format::kJson && frames_cached == nullptr && frames_json_bytes < kFramesJsonMaxBytes) {
      CachedFrames c;
      c.key = stack_key;
      c.json = line.substr(frames_at);
      frames_json_bytes += c.json.size() + 8 * c.key.size() + 64;
      frames_json.emplace(stack_hash, std::move(c));
    }
    const bool trunc = smp.truncated;
    const int stop = smp.stop;
#ifdef STACKPROV_HAVE_PPROF
    if (fmt == Format::kPprof) pp_count_exe(s);
#endif
    if (fmt == Format::kJson) {
      if (frames_cached != nullptr) {
        json_out.copy(line);
        json_out.ref(*frames_cached);  // the cache's nodes do not move: the string stays until written
        line.clear();
      }
      line += "],\"truncated\":";
      line += trunc ? "true" : "false";
      line += ",\"stop_reason\":\"";
      line += sprov_stop_reason_name(stop);
      line += "\"}\n";
      json_out.copy(line);
      if (json_out.error() != 0) break;  // a failed write (a full disk, the spool's cap): no more lines
    } else if (fmt != Format::kNone) {
      stacks.add(smp, nominal);
    }
  }
  if (fmt == Format::kFolded || fmt == Format::kSvg) {
    auto folded = stacks.folded(names);
    if (fmt == Format::kFolded) stackprov_cli::write_folded(out, folded);
    else stackprov_cli::write_flamegraph_svg(out, folded, title);
  }
  info = imp.info();  // the kernel note as of now (kallsyms was read on first use); the counts read once
  std::string spool_err;
  if (fmt == Format::kJson && !json_out.flush()) {
    if (spool < 0) {
      fprintf(stderr, "stackprov perf-import: write failed: %s\n", strerror(json_out.error()));
      return 1;
    }
    spool_err = json_out.capped()
                    ? "the json passed the " + std::to_string(spool_max) + " bytes held for a pipe"
                    : std::string("cannot hold the json for the pipe (spool): ") + strerror(json_out.error());
  }
  if (!spool_err.empty() || !output.spool_flushed(&spool_err)) {  // the spool's disk full: read with the index, to stdout
    if (!quiet) fprintf(stderr, "stackprov perf-import: %s; reading it again with its index\n", spool_err.c_str());
    return kStartOver;
  }
  if (iopts.stream) print_warnings();
  int rc = 0;
#ifdef STACKPROV_HAVE_PPROF
  if (fmt == Format::kPprof) {
    stackprov_cli::PprofMeta meta;
    if (!info.clock) meta.value_type = info.event, meta.value_unit = "count";
    meta.period = static_cast<int64_t>(nominal);
    meta.comments.push_back(std::string("stackprov perf-import ") + sprov_version() + " " + in);
    if (imp.kernel_frames()) meta.comments.push_back(info.kernel_note);
    // The main executable's (first) mapping becomes mapping 1; the others keep their order.
    std::string exe;
    uint64_t most = 0;
    for (const auto& [path, n] : pp_exe_samples)
      if (n > most) most = n, exe = path;
    size_t first = pp_mappings.size();
    for (size_t k = 0; k < pp_mappings.size() && !exe.empty(); k++)
      if (pp_mappings[k].filename == exe) {
        first = k;
        break;
      }
    if (first != 0 && first < pp_mappings.size()) {
      std::vector<uint32_t> new_id(pp_mappings.size() + 1);  // old id -> new id (ids start at 1)
      std::vector<stackprov_cli::PprofMapping> reordered;
      reordered.push_back(pp_mappings[first]);
      new_id[first + 1] = 1;
      for (size_t k = 0; k < pp_mappings.size(); k++)
        if (k != first) {
          reordered.push_back(pp_mappings[k]);
          new_id[k + 1] = static_cast<uint32_t>(reordered.size());
        }
      pp_mappings = std::move(reordered);
      for (auto& [key, loc] : pp_locations)
        if (loc.mapping != 0) loc.mapping = new_id[loc.mapping];
    }
    std::string perr;
    if (!stackprov_cli::write_pprof(out, stacks.aggregator(), stacks.comms(), names.display(), names.linkage(), pp_mappings, pp_locations, meta,
                                    &perr)) {
      fprintf(stderr, "stackprov perf-import: pprof: %s\n", perr.c_str());
      rc = 1;
    }
  }
#endif
  if (rc == 0 && !output.commit(&err)) {
    fprintf(stderr, "stackprov perf-import: %s\n", err.c_str());
    rc = 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (imp.kernel_frames() && !quiet)
    fprintf(stderr, "stackprov perf-import: %s%s\n",
            info.kernel_naming == SPROV_KERNEL_NAMED || info.kernel_naming == SPROV_KERNEL_CACHED ? "" : "warning: ",
            info.kernel_note);
  if (!quiet || fmt == Format::kNone)
    fprintf(stderr,
            "stackprov perf-import: %llu samples (%llu lost; user frames: %llu unwound from copied stacks (dwarf), "
            "%llu from call chains (callchain), %llu ip only; %llu truncated, %llu failed), %llu frames "
            "(%llu kernel, %llu of them named), %llu unique stacks, %llu hash collisions, symbol cache %llu hits / "
            "%llu misses, %.3f s, %.0f samples/s\n",
            static_cast<unsigned long long>(info.samples), static_cast<unsigned long long>(info.lost),
            static_cast<unsigned long long>(imp.by_mode(SPROV_PROFILE_MODE_DWARF)),
            static_cast<unsigned long long>(imp.by_mode(SPROV_PROFILE_MODE_CALLCHAIN)),
            static_cast<unsigned long long>(imp.by_mode(SPROV_PROFILE_MODE_IP)), static_cast<unsigned long long>(imp.truncated()),
            static_cast<unsigned long long>(imp.failed()), static_cast<unsigned long long>(imp.frames()),
            static_cast<unsigned long long>(imp.kernel_frames()), static_cast<unsigned long long>(imp.kernel_named()),
            static_cast<unsigned long long>(stacks.aggregator().entries().size()),
            static_cast<unsigned long long>(stacks.aggregator().collisions()),
            static_cast<unsigned long long>(names.hits()), static_cast<unsigned long long>(names.misses()), secs,
            secs > 0 ? static_cast<double>(info.samples) / secs : 0.0);
  const uint64_t py_samples = info.samples - imp.runtime_state(SPROV_PROFILE_RUNTIME_NONE) - imp.failed();
  if ((!quiet || fmt == Format::kNone) && py_samples > 0 && py_samples <= info.samples)
    fprintf(stderr,
            "stackprov perf-import: python: %llu samples with their Python frames, %llu torn at recording (none kept), "
            "%llu damaged, %llu of threads without a Python thread state, %llu read too late to fit the sample's native "
            "stack (not shown)\n",
            static_cast<unsigned long long>(imp.runtime_state(SPROV_PROFILE_RUNTIME_READ)),
            static_cast<unsigned long long>(imp.runtime_state(SPROV_PROFILE_RUNTIME_TORN)),
            static_cast<unsigned long long>(imp.runtime_state(SPROV_PROFILE_RUNTIME_DAMAGED)),
            static_cast<unsigned long long>(imp.runtime_state(SPROV_PROFILE_RUNTIME_NO_THREAD)),
            static_cast<unsigned long long>(imp.runtime_state(SPROV_PROFILE_RUNTIME_MISMATCH)));
  return rc;
}

// ------------------------------------------------------------------ record

const std::vector<OptSpec> kRecordOpts = {
    {'F', "frequency", true}, {0, "stack-size", true}, {0, "duration", true},
    {'o', "output", true},    {'p', "pid", true},     {0, "with-kernel", false},
    {0, "off-cpu", false},    {0, "python", false},
};

void record_usage(FILE* f) {
  fprintf(f,
          "usage: stackprov record [OPTIONS] -p PID\n"
          "       stackprov record [OPTIONS] [--] CMD [ARGS...]\n\n"
          "Options (--opt VALUE or --opt=VALUE; the short forms are perf record's):\n"
          "  -F, --frequency HZ     samples per second per thread, 1 to 100000 and at most\n"
          "                         kernel.perf_event_max_sample_rate (default 999)\n"
          "      --stack-size BYTES user stack bytes copied per sample, a multiple of 8 from 8 to 65528 (default 8192)\n"
          "      --duration SECONDS stop after this long (decimal, at least 0.001); default: when the target exits\n"
          "  -o, --output FILE      the capture file (default stackprov.cap), written under a temp name beside it\n"
          "                         and renamed when the recording succeeded: a failed record leaves no file\n"
          "  -p, --pid PID          record this running process instead of starting a command\n"
          "      --with-kernel      take the samples with the eBPF kernel sampler (doc/kernel-stacks.md): per sample\n"
          "                         the kernel stack (bpf_get_stack), the thread's user registers and BYTES of its\n"
          "                         user stack, on the same cpu-clock events; times are CLOCK_MONOTONIC (perf\n"
          "                         record -k CLOCK_MONOTONIC). Needs root (CAP_BPF + CAP_PERFMON) and a build with\n"
          "                         the sampler (not cross, sanitizer or win64 builds; a kernel with BTF)\n"
          "      --off-cpu          with --with-kernel: sample at the tracepoint sched:sched_switch instead, each time\n"
          "                         a thread of the target switches out (where it waits; -F is not used); a\n"
          "                         started command (-- CMD) is stopped at its exec (ptrace) and sampled from there,\n"
          "                         so none of its switches before the exec (still stackprov's image) are recorded\n"
          "      --python           also read each sampled thread's CPython 3.11 frames (x86_64 release builds) from\n"
          "                         the running process right after its sample, as py-spy does without stopping it:\n"
          "                         a read during which the thread's frame chain changed is detected (read twice)\n"
          "                         and kept as torn, without frames; perf-import then shows the Python frames\n"
          "                         among the native ones (doc/runtime-frames.md \"Recordings\"). A process\n"
          "                         without an interpreter is recorded as without it. Not with --with-kernel\n"
          "  -h, --help             this text\n\n"
          "Samples a running process (all its threads, including threads created later) or a command it starts,\n"
          "with perf_event_open: cpu-clock at HZ, the user registers, BYTES of user stack and the kernel call chain\n"
          "per sample, MMAP2/COMM/FORK/EXIT for the module map, build-ids of the mapped modules and of the running\n"
          "kernel. Writes a stackprov capture file that `stackprov perf-import` unwinds offline. Lost samples are\n"
          "reported. Stops after --duration, when the target exits, or on SIGINT (Ctrl-C), SIGTERM or SIGHUP (what\n"
          "timeout, systemd and CI runners send): the file is finished, a started command is sent SIGTERM, a -p\n"
          "target keeps running. A second such signal aborts: the started command is killed, no file is left.\n"
          "On stderr: once sampling has started, one line saying what is recorded, into which file and how to stop\n"
          "it; on a terminal, a live count of samples and lost samples (not in pipes or logs); at the end a summary\n"
          "(samples, lost, threads, the file).\n"
          "With -p, a library replaced or deleted since the process mapped it is described by the file mapped (read\n"
          "through /proc/PID/map_files, or without CAP_SYS_ADMIN by its build-id read from the process's memory,\n"
          "with a warning; that read needs ptrace permission over the process -- with Yama ptrace_scope 1 only over\n"
          "a descendant -- and without it a replaced module is left out, a deleted one listed without a build-id,\n"
          "with a warning): `perf-import --store DIR` then unwinds and names it from that build-id's bundle.\n\n"
          "Exit status:\n"
          "  0  the capture file was written (also when the started command exited non-zero: its status is\n"
          "     printed)\n"
          "  1  the recording failed: the command cannot be started, the process does not exist, perf_event_open\n"
          "     was refused, the file cannot be written; no file is left behind\n"
          "  2  usage: an unknown option, a missing or invalid value (as typed), neither or both of -p and a\n"
          "     command\n");
}

int cmd_record(int argc, char** argv) {
  const char* cmd = "record";
  Args a(0, nullptr, {}, {});
  if (int rc = parse_command(cmd, argc, argv, kRecordOpts, true, record_usage, &a); rc >= 0) return rc;
  std::string err;
  SPROV_OPTS(sprov_record_opts, o);
  uint64_t v = 999;
  if (!uint_option(a, kRecordOpts, "frequency", 1, 100000, &v, &err)) return usage_error(cmd, err);
  o.frequency = static_cast<uint32_t>(v);
  v = 8192;
  if (!uint_option(a, kRecordOpts, "stack-size", 8, 65528, &v, &err)) return usage_error(cmd, err);
  if (v % 8 != 0)
    return usage_error(cmd, "invalid value '" + std::string(a.get("stack-size")) +
                                "' for --stack-size: expected a multiple of 8 from 8 to 65528");
  o.stack_size = static_cast<uint32_t>(v);
  if (const char* d = a.get("duration")) {
    char* end = nullptr;
    errno = 0;
    const double secs = *d ? strtod(d, &end) : NAN;
    const double ms = std::round(secs * 1000.0);
    if (end == nullptr || *end != 0 || errno != 0 || !std::isfinite(secs) || ms < 1 || ms > 4294967295.0)
      return usage_error(cmd, "invalid value '" + std::string(d) +
                                  "' for --duration: expected seconds from 0.001 to 4294967 (e.g. 2.5)");
    o.duration_ms = static_cast<uint32_t>(ms);
  }
  v = 0;
  // pid_t is an int; the kernel's PID_MAX_LIMIT is 4194304.
  if (!uint_option(a, kRecordOpts, "pid", 1, 4194304, &v, &err)) return usage_error(cmd, err);
  o.pid = static_cast<int64_t>(v);
  const char* output = a.has("output") ? a.get("output") : "stackprov.cap";
  if (!*output) return usage_error(cmd, "-o/--output needs a file name");
  std::vector<const char*> command;
  for (const std::string& p : a.pos) command.push_back(p.c_str());
  if (o.pid != 0 && !command.empty())
    return usage_error(cmd, "give either -p PID or a command, not both ('" + a.pos[0] + "')");
  if (o.pid == 0 && command.empty()) return usage_error(cmd, "give -p PID or a command to start (after --)");
  command.push_back(nullptr);
  if (command.size() > 1) o.argv = command.data();
  o.output = output;
  if (a.has("off-cpu") && !a.has("with-kernel")) return usage_error(cmd, "--off-cpu needs --with-kernel");
  if (a.has("with-kernel")) o.flags = SPROV_RECORD_KERNEL | (a.has("off-cpu") ? uint32_t{SPROV_RECORD_OFF_CPU} : 0u);
  if (a.has("python") && a.has("with-kernel"))
    return usage_error(cmd, "--python cannot be combined with --with-kernel (not supported yet)");
  if (a.has("python")) o.flags |= SPROV_RECORD_PYTHON;
  sprov_context* ctx = nullptr;
  SPROV_OPTS(sprov_context_opts, copts, .log_fn = stackprov_cli::log_once_to_stderr, .log_level = SPROV_LOG_WARN);
  if (sprov_context_new(&copts, &ctx) != 0) {
    fprintf(stderr, "stackprov record: %s\n", sprov_last_error_message());
    return 1;
  }
  // Once sampling has started: what is recorded and how to stop it; then, on a terminal, a live
  // sample count (not in pipes or logs). A recording that cannot start says only why.
  struct Progress {
    std::string start_line;
    bool tty = false;
    bool started = false;
  } progress;
  progress.tty = isatty(STDERR_FILENO) == 1;
  {
    std::string what = o.pid != 0 ? "process " + std::to_string(o.pid) + " (all its threads)" : "'" + a.pos[0] + "'";
    std::string until = o.duration_ms ? "for " + std::string(a.get("duration")) + " s or until" : "until";
    const std::string how = !a.has("with-kernel") ? " at " + std::to_string(o.frequency) + " Hz, "
                            : a.has("off-cpu")     ? " at each sched:sched_switch (eBPF, off-CPU), "
                                                   : " at " + std::to_string(o.frequency) + " Hz (eBPF, kernel + user), ";
    progress.start_line = "stackprov record: recording " + what + how +
                          std::to_string(o.stack_size) + "-byte user stacks, into " + output + " " + until + " " +
                          (o.pid != 0 ? "the process exits" : "the command exits") +
                          "; Ctrl-C (SIGINT), SIGTERM or SIGHUP stops it and finishes the file\n";
  }
  o.progress = [](uint64_t samples, uint64_t lost, void* arg) {
    auto* p = static_cast<Progress*>(arg);
    if (!p->started) {
      p->started = true;
      fputs(p->start_line.c_str(), stderr);
    } else if (p->tty) {
      fprintf(stderr, "\r\033[K  %llu samples, %llu lost", static_cast<unsigned long long>(samples),
              static_cast<unsigned long long>(lost));
    }
    fflush(stderr);
  };
  o.progress_arg = &progress;
  const bool tty = progress.tty;
  SPROV_OPTS(sprov_record_result, r);
  const int rc = sprov_record(ctx, &o, &r);
  sprov_context_free(ctx);
  if (tty && progress.started) fprintf(stderr, "\r\033[K");  // the live count's line, cleared for the summary
  if (rc != 0) {
    fprintf(stderr, "stackprov record: %s\n", error_text(rc).c_str());
    return 1;
  }
  std::string status;
  if (r.exit_status >= 0 && WIFEXITED(r.exit_status) && WEXITSTATUS(r.exit_status) != 0)
    status = "; the command exited with status " + std::to_string(WEXITSTATUS(r.exit_status));
  else if (r.exit_status >= 0 && WIFSIGNALED(r.exit_status) && WTERMSIG(r.exit_status) != SIGTERM)
    status = std::string("; the command was killed by signal ") + strsignal(WTERMSIG(r.exit_status));
  fprintf(stderr, "stackprov record: %llu samples, %llu lost, %llu threads -> %s%s\n",
          static_cast<unsigned long long>(r.samples), static_cast<unsigned long long>(r.lost),
          static_cast<unsigned long long>(r.threads), output, status.c_str());
  if (a.has("python")) {
    if (r.python_processes == 0)
      fprintf(stderr, "stackprov record: python: no CPython 3.11 interpreter was found in the target: no Python frames\n");
    else
      fprintf(stderr,
              "stackprov record: python: %llu samples with their Python frames, %llu torn (the frames changed while "
              "read: none kept), %llu damaged, %llu of threads without a Python thread state\n",
              static_cast<unsigned long long>(r.python_read), static_cast<unsigned long long>(r.python_torn),
              static_cast<unsigned long long>(r.python_damaged), static_cast<unsigned long long>(r.python_no_thread));
  }
  return 0;
}

}  // namespace

int cmd_perf_import(int argc, char** argv) {
  const int rc = perf_import(argc, argv, true);
  if (rc != kStartOver) return rc;
  const int again = perf_import(argc, argv, false);  // with the index: nothing asks to start over
  if (again != kStartOver) return again;
  fprintf(stderr, "stackprov perf-import: reading the file with its index asked to start over again\n");
  return 1;
}

STACKPROV_COMMAND("perf-import", "unwind and symbolize perf.data / capture-file samples: folded, svg, json, pprof", cmd_perf_import);
STACKPROV_COMMAND("record", "sample a process or command with perf_event into a capture file", cmd_record);
