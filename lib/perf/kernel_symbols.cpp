// SPDX-License-Identifier: Apache-2.0
// Kernel frame names: /proc/kallsyms read as perf reads it, the running kernel's build-id, the check against a recording's.
#include "perf/kernel_symbols.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "elf/elf_bytes.hpp"

namespace stackprov::perf {

namespace {

// Symbol bindings as perf derives them from the kallsyms type letter
// (tools/lib/symbol/kallsyms.h kallsyms2elf_binding): 'W' weak, other upper case global.
enum class Binding : uint8_t { kLocal, kGlobal, kWeak };

struct Entry {
  uint64_t start = 0, end = 0;
  Binding binding = Binding::kLocal;
  bool is_module = false;
  std::string_view name, module;
};

size_t leading_underscores(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && s[n] == '_') n++;
  return n;
}

/// perf 6.1 tools/perf/util/symbol.c choose_best_symbol (+ the default arch__choose_best_symbol):
/// true when `a` is kept over `b`.
bool keep_first(const Entry& a, const Entry& b) {
  const bool a_len = a.end > a.start, b_len = b.end > b.start;
  if (a_len != b_len) return a_len;
  const bool a_weak = a.binding == Binding::kWeak, b_weak = b.binding == Binding::kWeak;
  if (a_weak != b_weak) return !a_weak;
  const bool a_glob = a.binding == Binding::kGlobal, b_glob = b.binding == Binding::kGlobal;
  if (a_glob != b_glob) return a_glob;
  const size_t ua = leading_underscores(a.name), ub = leading_underscores(b.name);
  if (ua != ub) return ua < ub;
  if (a.name.size() != b.name.size()) return a.name.size() > b.name.size();
  if (a.name.rfind("SyS", 0) == 0 || a.name.rfind("compat_SyS", 0) == 0) return false;
  return true;
}

std::string read_text(const std::string& path, int* err) {
  // procfs files (kallsyms: ~5-10 MB) report no size: read in chunks and appended to a string
  // whose capacity doubles, so no byte is zero-filled and nothing but the chunks is copied (a
  // string resized before each read zero-filled ~3x the listing: 3% of a perf-import run).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno ? errno : ENOENT;
    return {};
  }
  constexpr size_t kChunk = size_t{1} << 18;
  std::unique_ptr<char[]> chunk(new char[kChunk]);
  std::string out;
  out.reserve(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, chunk.get(), kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = errno;
      ::close(fd);
      return {};
    }
    if (n == 0) break;
    // A listing is ~5-10 MB; a copy in ~/.debug that grows past 256 MiB is not one (bounded input).
    if (out.size() + static_cast<size_t>(n) > (size_t{256} << 20)) {
      *err = EFBIG;
      ::close(fd);
      return {};
    }
    if (out.capacity() - out.size() < static_cast<size_t>(n)) out.reserve(out.capacity() * 2);
    out.append(chunk.get(), static_cast<size_t>(n));
  }
  ::close(fd);
  *err = 0;
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char l = static_cast<char>(c | 0x20);
  return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

constexpr uint64_t kPage = 4096;
uint64_t roundup_page(uint64_t v) { return (v + kPage - 1) / kPage * kPage; }

}  // namespace

KernelSymbols KernelSymbols::parse(std::string listing) {
  static constexpr std::string_view kKernelDso = "[kernel.kallsyms]";
  KernelSymbols out;
  auto buf = std::make_shared<std::string>(std::move(listing));
  std::string& text = *buf;
  std::vector<Entry> all;
  all.reserve(text.size() / 40);  // ~44 bytes per kallsyms line
  size_t at = 0;
  while (at < text.size()) {
    const char* nlp = static_cast<const char*>(std::memchr(text.data() + at, '\n', text.size() - at));
    const size_t nl = nlp ? static_cast<size_t>(nlp - text.data()) : text.size();
    char* p = text.data() + at;
    char* end = text.data() + nl;
    at = nl + 1;
    *end = '\0';  // names and modules end here (text.size() is NUL already)
    // "ADDR TYPE NAME[\t[MODULE]]" (kernel/kallsyms.c s_show)
    uint64_t addr = 0;
    char* q = p;
    for (int d; q < end && (d = hex_digit(*q)) >= 0; q++) addr = addr * 16 + static_cast<uint64_t>(d);
    if (q == p || q + 3 > end || *q != ' ' || q[2] != ' ') continue;
    const char type = q[1];
    char* name_begin = q + 3;
    char* tab = static_cast<char*>(std::memchr(name_begin, '\t', static_cast<size_t>(end - name_begin)));
    std::string_view name(name_begin, static_cast<size_t>((tab ? tab : end) - name_begin));
    std::string_view module;
    if (tab != nullptr) {
      char* mend = end;
      while (mend > tab + 1 && (mend[-1] == ' ' || mend[-1] == '\r')) mend--;
      *tab = '\0';
      *mend = '\0';
      module = std::string_view(tab + 1, static_cast<size_t>(mend - (tab + 1)));
    }
    if (addr != 0) out.nonzero_++;
    if (module.empty() && name == "_text") out.text_ = addr;
    if (module.empty() && name == "_etext") out.etext_ = addr;
    const char up = static_cast<char>(std::toupper(static_cast<unsigned char>(type)));
    if (up != 'T' && up != 'W' && up != 'D' && up != 'B') continue;  // symbol_type__filter
    if (name.empty() || name[0] == '$') continue;
    // maps__split_kallsyms drops x86_64's entry trampoline symbols.
    if (name == "__entry_SYSCALL_64_trampoline") continue;
    Entry e;
    e.start = addr;
    e.binding = type == 'W' ? Binding::kWeak : std::isupper(static_cast<unsigned char>(type)) ? Binding::kGlobal
                                                                                             : Binding::kLocal;
    e.name = name;
    e.is_module = !module.empty();
    e.module = module.empty() ? kKernelDso : module;
    all.push_back(e);
  }
  if (out.nonzero_ == 0) return out;  // kptr_restrict: every address reads as 0
  // kallsyms lists the kernel in address order: sort only when it is not.
  auto by_start = [](const Entry& a, const Entry& b) { return a.start < b.start; };
  if (!std::is_sorted(all.begin(), all.end(), by_start)) std::stable_sort(all.begin(), all.end(), by_start);
  // symbols__fixup_end(.., is_kallsyms = true): a symbol ends where the next begins; the last
  // kernel (or module) symbol before a module (or kernel) one at the next page + 4096.
  for (size_t i = 0; i < all.size(); i++) all[i].end = all[i].start;
  for (size_t i = 0; i + 1 < all.size(); i++) {
    if (all[i].is_module != all[i + 1].is_module) all[i].end = roundup_page(all[i].start + kPage);
    else all[i].end = all[i + 1].start;
  }
  if (!all.empty() && all.back().end == all.back().start) all.back().end = roundup_page(all.back().start) + kPage;
  // symbols__fixup_duplicate: of the symbols at one address, the one choose_best_symbol keeps.
  out.syms_.reserve(all.size());
  for (size_t i = 0; i < all.size();) {
    size_t best = i, j = i + 1;
    for (; j < all.size() && all[j].start == all[i].start; j++)
      if (!keep_first(all[best], all[j])) best = j;
    out.syms_.push_back(Symbol{all[best].start, all[best].end, all[best].name, all[best].module});
    i = j;
  }
  out.text_buf_ = std::move(buf);
  return out;
}

const KernelSymbols::Symbol* KernelSymbols::find(uint64_t addr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr, [](uint64_t a, const Symbol& s) { return a < s.start; });
  if (it == syms_.begin()) return nullptr;
  --it;
  // symbols__find: start <= addr < end (addr == end only for an empty symbol).
  if (addr < it->end || (addr == it->start && it->end == it->start)) return &*it;
  return nullptr;
}

std::shared_ptr<CoreListing> CoreListing::open(std::string text) {
  if (text.size() >= UINT32_MAX) return nullptr;
  auto c = std::make_shared<CoreListing>();
  c->text_buf_ = std::move(text);
  const std::string& t = c->text_buf_;
  for (size_t at = 0; at < t.size();) {
    c->starts_.push_back(static_cast<uint32_t>(at));
    const void* nl = std::memchr(t.data() + at, '\n', t.size() - at);
    at = nl ? static_cast<size_t>(static_cast<const char*>(nl) - t.data()) + 1 : t.size();
  }
  // The first "_text" line, then the first "_etext" line after it (kernel lines: no module). A
  // line named `want` ends with it (at a newline or the end of the text): only the lines where
  // the text holds it so are parsed, in order (parsing each of the ~50k lines up to _etext was 5%
  // of a perf-import run).
  auto find_name = [&](std::string_view want, size_t from, size_t* out, uint64_t* addr) {
    if (from >= c->starts_.size()) return false;
    for (size_t at = c->starts_[from]; at < t.size();) {
      const void* found = memmem(t.data() + at, t.size() - at, want.data(), want.size());
      if (found == nullptr) return false;
      const size_t hit = static_cast<size_t>(static_cast<const char*>(found) - t.data());
      at = hit + 1;
      const size_t after = hit + want.size();
      if (after < t.size() && t[after] != '\n') continue;
      // The line holding the hit: the last one starting at or before it.
      const size_t i = static_cast<size_t>(std::upper_bound(c->starts_.begin(), c->starts_.end(),
                                                            static_cast<uint32_t>(hit)) - c->starts_.begin()) - 1;
      uint64_t a;
      char type;
      std::string_view name;
      bool tab;
      if (c->line(i, &a, &type, &name, &tab) && !tab && name == want) {
        *out = i;
        *addr = a;
        return true;
      }
    }
    return false;
  };
  if (!find_name("_text", 0, &c->lo_, &c->text_)) return nullptr;
  if (!find_name("_etext", c->lo_ + 1, &c->hi_, &c->etext_) || c->etext_ <= c->text_) return nullptr;
  return c;
}

bool CoreListing::line(size_t i, uint64_t* addr, char* type, std::string_view* name, bool* tab) const {
  const char* p = text_buf_.data() + starts_[i];
  const char* end = i + 1 < starts_.size() ? text_buf_.data() + starts_[i + 1] : text_buf_.data() + text_buf_.size();
  if (end > p && end[-1] == '\n') end--;
  uint64_t a = 0;
  const char* q = p;
  for (int d; q < end && q - p < 16 && (d = hex_digit(*q)) >= 0; q++) a = a * 16 + static_cast<uint64_t>(d);
  if (q == p || q + 3 > end || *q != ' ' || q[2] != ' ') return false;
  *addr = a;
  *type = q[1];
  const char* nb = q + 3;
  const char* tb = static_cast<const char*>(std::memchr(nb, '\t', static_cast<size_t>(end - nb)));
  *tab = tb != nullptr;
  *name = std::string_view(nb, static_cast<size_t>((tb ? tb : end) - nb));
  return true;
}

/// Line i is one KernelSymbols::parse keeps (types T/W/D/B, not '$', not the entry trampoline).
bool CoreListing::accepted(size_t i, uint64_t* addr, bool* ok) const {
  char type;
  std::string_view name;
  bool tab;
  *ok = line(i, addr, &type, &name, &tab) && !tab;
  if (!*ok) return false;
  const char up = static_cast<char>(std::toupper(static_cast<unsigned char>(type)));
  if (up != 'T' && up != 'W' && up != 'D' && up != 'B') return false;
  return !name.empty() && name[0] != '$' && name != "__entry_SYSCALL_64_trampoline";
}

const KernelSymbols::Symbol* CoreListing::find(uint64_t addr) {
  if (addr < text_ || addr >= etext_ || windows_.size() >= 65536) return nullptr;
  // The last line at or below addr: line lo_ (_text) is, line hi_ (_etext) is above.
  size_t a = lo_, b = hi_;
  while (b - a > 1) {
    const size_t m = a + (b - a) / 2;
    uint64_t v;
    char type;
    std::string_view name;
    bool tab;
    if (!line(m, &v, &type, &name, &tab)) return nullptr;
    (v <= addr ? a : b) = m;
  }
  // The last kept line at or before it, with every line at its address; the first kept line
  // above that address ends the symbol.
  bool ok = true;
  uint64_t start = 0, v = 0;
  size_t j = a;
  while (!accepted(j, &start, &ok)) {
    if (!ok || j == lo_) return nullptr;
    j--;
  }
  if (start > addr) return nullptr;  // out of order
  size_t first = j;
  while (first > 0) {  // the group may begin before _text (_stext, srso_alias_untrain_ret)
    char type;
    std::string_view name;
    bool tab;
    if (!line(first - 1, &v, &type, &name, &tab)) return nullptr;
    if (v > start) return nullptr;  // out of order
    if (v != start) break;
    first--;
  }
  size_t k = a + 1;
  for (;; k++) {
    if (k > hi_) return nullptr;
    if (accepted(k, &v, &ok) && v > start) break;
    if (!ok) return nullptr;
  }
  if (v <= addr) return nullptr;  // out of order
  // Every line of the window readable, without a module and in address order.
  uint64_t prev = 0;
  for (size_t i = first; i <= k; i++) {
    char type;
    std::string_view name;
    bool tab;
    if (!line(i, &v, &type, &name, &tab) || tab || v < prev) return nullptr;
    prev = v;
  }
  const size_t from = starts_[first];
  const size_t to = k + 1 < starts_.size() ? starts_[k + 1] : text_buf_.size();
  windows_.push_back(std::make_unique<KernelSymbols>(KernelSymbols::parse(text_buf_.substr(from, to - from))));
  return windows_.back()->find(addr);
}

ModuleId kernel_build_id_from_notes(const std::string& notes) {
  elf::detail::ByteView v(reinterpret_cast<const uint8_t*>(notes.data()), notes.size(), false);
  auto id = elf::detail::find_gnu_build_id(v, 4);
  return id ? *id : ModuleId{};
}

Result<ModuleId> running_kernel_build_id(const std::string& notes_path) {
  int err = 0;
  const std::string notes = read_text(notes_path, &err);
  if (err != 0) return make_error(-err, "%s: %s", notes_path.c_str(), strerror(err));
  ModuleId id = kernel_build_id_from_notes(notes);
  if (id.empty()) return make_error(SPROV_ERR_NOT_FOUND, "%s holds no GNU build-id note", notes_path.c_str());
  return id;
}

uint64_t running_kernel_text(const std::string& kallsyms_path) {
  std::ifstream f(kallsyms_path);
  std::string line;
  while (std::getline(f, line)) {
    // "ffffffff81000000 T _text"
    if (line.size() > 19 && line.compare(line.size() - 6, 6, " _text") == 0 && line[line.size() - 8] == ' ')
      return std::strtoull(line.c_str(), nullptr, 16);
  }
  return 0;
}

std::string perf_buildid_dir() {
  if (const char* d = getenv("PERF_BUILDID_DIR"); d != nullptr && *d) return d;
  if (const char* h = getenv("HOME"); h != nullptr && *h) return std::string(h) + "/.debug";
  return {};
}

KernelNamer::KernelNamer(ModuleId recorded, uint64_t recorded_text, std::string notes_path, std::string kallsyms_path,
                         std::string buildid_dir)
    : recorded_(recorded), recorded_text_(recorded_text), kallsyms_path_(std::move(kallsyms_path)),
      buildid_dir_(std::move(buildid_dir)) {
  auto running = running_kernel_build_id(notes_path);
  if (!running.ok()) {
    naming_ = KernelNaming::kUnavailable;
    note_ = "kernel frames left unnamed: the running kernel's build-id cannot be read (" + running.error().message + ")";
    return;
  }
  running_ = running.value();
  if (recorded_.empty()) {
    naming_ = KernelNaming::kUnchecked;
    note_ = "kernel frames named from " + kallsyms_path_ + " of the running kernel (build-id " + running_.hex() +
            "), unchecked: the recording holds no kernel build-id";
  } else if (recorded_ != running_) {
    const std::string mismatch = "kernel frames left unnamed: recorded on kernel build-id " + recorded_.hex() +
                                 ", the running kernel's is " + running_.hex() + " (" + notes_path + ")";
    const std::string copy =
        buildid_dir_.empty() ? std::string() : buildid_dir_ + "/[kernel.kallsyms]/" + recorded_.hex() + "/kallsyms";
    struct stat st {};
    if (!copy.empty() && stat(copy.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      // Read on the first lookup (load()): a copy that is unreadable, empty or of another layout turns
      // this back into kMismatch there, saying why.
      naming_ = KernelNaming::kCached;
      mismatch_note_ = mismatch + ", and perf's copy " + copy + " ";
      kallsyms_path_ = copy;
      note_ = "kernel frames named from perf's build-id cache copy " + copy + " (the recording's kernel build-id " +
              recorded_.hex() + "; the running kernel's is " + running_.hex() + ")";
    } else {
      naming_ = KernelNaming::kMismatch;
      note_ = mismatch;
    }
  } else {
    naming_ = KernelNaming::kNamed;
    note_ = "kernel frames named from " + kallsyms_path_ + " (kernel build-id " + running_.hex() +
            ", the recording's)";
  }
}

Result<KernelSymbols> KernelSymbols::load(const std::string& path) {
  int err = 0;
  std::string text = read_text(path, &err);
  if (err != 0) return make_error(-err, "%s: %s", path.c_str(), strerror(err));
  KernelSymbols syms = parse(std::move(text));
  if (syms.size() == 0)
    return make_error(SPROV_ERR_NOT_FOUND, "%s: %s", path.c_str(),
                      syms.nonzero_lines() == 0 ? "every address is 0 (kernel.kptr_restrict; run as root or lower it)"
                                                : "no function symbols");
  return syms;
}

void KernelNamer::load() {
  loaded_ = true;
  if (!names()) return;
  int err = 0;
  std::string text = read_text(kallsyms_path_, &err);
  if (naming_ == KernelNaming::kCached) {
    // Another build's listing: no relocation is known, so it names only a recording made at its `_text`.
    KernelSymbols copy = err == 0 ? KernelSymbols::parse(std::move(text)) : KernelSymbols();
    char why[160];
    if (err != 0)
      snprintf(why, sizeof(why), "cannot be read (%s)", strerror(err));
    else if (copy.size() == 0)
      snprintf(why, sizeof(why), "holds no function symbols");
    else if (recorded_text_ != 0 && copy.text_address() != recorded_text_)
      snprintf(why, sizeof(why), "has _text at 0x%llx, the recording's is 0x%llx",
               static_cast<unsigned long long>(copy.text_address()), static_cast<unsigned long long>(recorded_text_));
    else
      why[0] = 0;
    if (why[0] != 0) {
      naming_ = KernelNaming::kMismatch;
      note_ = mismatch_note_ + why;
      return;
    }
    syms_ = std::move(copy);
    return;
  }
  if (err != 0) {
    naming_ = KernelNaming::kUnavailable;
    note_ = "kernel frames left unnamed: " + kallsyms_path_ + ": " + strerror(err);
    return;
  }
  syms_ = KernelSymbols::parse(std::move(text));
  if (syms_.size() == 0) {
    naming_ = KernelNaming::kUnavailable;
    note_ = "kernel frames left unnamed: " + kallsyms_path_ +
            (syms_.nonzero_lines() == 0 ? " shows every address as 0 (kernel.kptr_restrict; run as root or lower it)"
                                        : " holds no function symbols");
    return;
  }
  if (recorded_text_ != 0 && syms_.text_address() != 0 && recorded_text_ != syms_.text_address()) {
    delta_ = static_cast<int64_t>(syms_.text_address() - recorded_text_);
    char b[160];
    snprintf(b, sizeof(b), " (relocated: _text was 0x%llx when recorded, 0x%llx now)",
             static_cast<unsigned long long>(recorded_text_), static_cast<unsigned long long>(syms_.text_address()));
    note_ += b;
  }
}

void KernelNamer::load_cached_core() {
  core_tried_ = true;
  if (naming_ != KernelNaming::kNamed || recorded_text_ == 0 || buildid_dir_.empty()) return;
  const std::string path = buildid_dir_ + "/[kernel.kallsyms]/" + recorded_.hex() + "/kallsyms";
  int err = 0;
  std::string text = read_text(path, &err);
  if (err != 0 || text.empty()) return;
  std::shared_ptr<CoreListing> k = CoreListing::open(std::move(text));
  // The copy must be of the recording's layout and say where the core text ends.
  if (k == nullptr || k->text_address() != recorded_text_) return;
  core_ = std::move(k);
  core_path_ = path;
  note_ += "; the core kernel's text from perf's build-id cache copy " + path;
}

const KernelSymbols::Symbol* KernelNamer::find(uint64_t addr, uint64_t* start_out) {
  if (!core_tried_) load_cached_core();
  if (core_ != nullptr && addr >= core_->text_address() && addr < core_->etext_address()) {
    // Recorded addresses, the copy's layout: no relocation.
    const KernelSymbols::Symbol* s = core_->find(addr);
    if (s != nullptr && s->module.data()[0] == '[' && s->module == "[kernel.kallsyms]") {
      if (start_out != nullptr) *start_out = s->start;
      return s;
    }
  }
  if (!loaded_) load();
  if (!names()) return nullptr;
  const KernelSymbols::Symbol* s = syms_.find(addr + static_cast<uint64_t>(delta_));
  if (s != nullptr && start_out != nullptr) *start_out = s->start - static_cast<uint64_t>(delta_);
  return s;
}

}  // namespace stackprov::perf
