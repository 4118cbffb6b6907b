// SPDX-License-Identifier: Apache-2.0
// SymbolTable: reads .symtab/.dynsym by hand, keeps code symbols, collapses aliases, looks up by address.
#include "elf/symtab.hpp"

#include <elf.h>

#include <string.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "elf/elf_bytes.hpp"

namespace stackprov::elf {

namespace {

/// How far lookup() walks back over symbols that start below the address
/// (nested or overlapping symbols); keeps hostile tables from costing O(n).
constexpr size_t kMaxBackscan = 64;

/// Distinct addresses answered by scanning before the sorted table is built:
/// a scan costs ~2 passes over the kept symbols, the build ~log2(n) of them
/// (about 13 for the 10k-symbol tables of libc debug files).
constexpr size_t kLinearLookups = 8;

/// A kept (code, named, defined) symbol, decoded from the ELF table; the
/// name's length is computed only for symbols that win their address.
struct RawSym {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t name = 0;   // offset in the string table (validated, non-empty, terminated)
  uint32_t index = 0;  // position in the ELF table, the final tie-break
  uint8_t type = 0;
  uint8_t bind = 0;
  uint64_t section_end = UINT64_MAX;
};

int bind_rank(uint8_t bind) {
  switch (bind) {
    case STB_GLOBAL:
    case STB_GNU_UNIQUE:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;
  }
}

/// The alias rule of doc/symbols.md: true when `a` is the better name for an
/// address than `b`. Sized beats zero-sized; then GLOBAL/UNIQUE > WEAK >
/// LOCAL; then larger st_size; then the lower symbol-table index.
bool better_alias(const RawSym& a, const RawSym& b) {
  const bool a_sized = a.size != 0, b_sized = b.size != 0;
  if (a_sized != b_sized) return a_sized;
  const int ra = bind_rank(a.bind), rb = bind_rank(b.bind);
  if (ra != rb) return ra < rb;
  if (a.size != b.size) return a.size > b.size;
  return a.index < b.index;
}

/// A sized symbol covering `a` (zero-sized ones are labels: see lookup()).
bool covers(uint64_t addr, uint64_t size, uint64_t a) {
  return addr <= a && a - addr < size;
}

/// A zero-sized symbol names `a` when it is the closest symbol at or below it
/// and `a` is still inside its section.
bool label_reaches(const RawSym& s, uint64_t a) { return s.size == 0 && s.addr <= a && a < s.section_end; }

}  // namespace

struct SymbolTable::Lazy {
  // Kept symbols as their ELF-table positions (4 bytes each, in table order);
  // fields are decoded from the table on demand.
  std::vector<uint32_t> kept;
  // st_value and st_size of each kept symbol (same order as `kept`), decoded
  // once by load(): scan() reads these contiguously instead of the ELF table.
  struct Span {
    uint64_t addr;
    uint64_t size;
  };
  std::vector<Span> spans;
  const uint8_t* tab = nullptr;
  size_t tab_size = 0;
  bool is64 = true;
  bool big_endian = false;
  const char* strtab = nullptr;
  size_t strtab_size = 0;
  std::vector<uint64_t> section_ends;  // sh_addr + sh_size by section index

  std::mutex mu;
  std::atomic<bool> built{false};
  std::vector<Symbol> syms;  // the sorted table, valid once `built`
  uint64_t max_size = 0;     // largest st_size, bounds the backward search
  size_t linear_done = 0;    // distinct addresses answered by scanning
  std::unordered_map<uint64_t, const Symbol*> memo;  // scanned answers
  std::deque<Symbol> made;   // storage of scanned answers (stable addresses)

  // By-name and by-address answers (find_by_name, names_at), built once after kScanCalls calls
  // answered by scanning: a bundle build asks one per DWARF call site and kept function, and a scan
  // each made that quadratic in the module's size (libc: half of its build time).
  static constexpr uint32_t kScanCalls = 8;
  struct NameHit {
    uint64_t addr = 0;
    bool global = false;
    bool found = false;
  };
  std::atomic<uint32_t> scans{0};
  std::once_flag names_once;
  bool names_built = false;  // false after names_once: the names exceeded the budget, calls scan
  std::unordered_map<std::string_view, NameHit> by_name;  // every name a symbol answers to
  std::vector<std::pair<uint64_t, uint32_t>> by_addr;     // (st_value, position in kept), sorted

  /// gdb's choice among the minimal symbols of one name, met in table order: the global or weak one
  /// at the highest address, else the first local one (SymbolTable::find_by_name).
  static void choose(NameHit* h, uint64_t addr, bool global) {
    if (!h->found || (global && (!h->global || addr > h->addr))) {
      h->addr = addr;
      h->global = global;
      h->found = true;
    }
  }

  /// Builds both indexes, or none when the kept symbols' names together are longer than 8 times the
  /// string table and 1 MiB: names overlap only by tail merging in a real file, while a hostile one
  /// can point a million symbols into one long string (each name measured and hashed: terabytes).
  void build_names() {
    size_t budget = 8 * strtab_size + (size_t{1} << 20);
    for (uint32_t pos : kept) {
      const size_t len = strnlen(strtab + decode(pos).name, budget + 1);  // terminated by load()
      if (len > budget) return;
      budget -= len;
    }
    by_name.reserve(kept.size());
    auto add = [&](std::string_view key, uint64_t addr, bool global) {
      if (!key.empty()) choose(&by_name[key], addr, global);
    };
    by_addr.reserve(kept.size());
    for (size_t k = 0; k < kept.size(); k++) {
      const RawSym r = decode(kept[k]);
      const std::string_view s(strtab + r.name);  // validated and terminated by load()
      const bool g = r.bind != STB_LOCAL;
      // A name answers to itself and, as `name@@VERSION` (a default version, which gdb also
      // installs under the plain name), to the part before its "@@". (And to the part before any
      // later "@@": find_by_name scans for a name holding "@@" itself, so that a hostile name of
      // many "@@"s costs its length here, not its length squared.)
      add(s, r.addr, g);
      if (const size_t at = s.find("@@"); at != std::string_view::npos) add(s.substr(0, at), r.addr, g);
      by_addr.emplace_back(spans[k].addr, static_cast<uint32_t>(k));
    }
    std::sort(by_addr.begin(), by_addr.end());
    names_built = true;
  }

  /// True (the indexes built) once more than kScanCalls by-name or by-address calls were made,
  /// unless the names were over build_names' budget.
  bool indexed() {
    if (scans.load(std::memory_order_relaxed) < kScanCalls) {
      scans.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    std::call_once(names_once, [this] { build_names(); });
    return names_built;
  }

  RawSym decode(uint32_t i) const {
    const detail::ByteView v(tab, tab_size, big_endian);
    const uint64_t b = uint64_t{i} * (is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym));
    const uint8_t st_info = tab[b + (is64 ? 4 : 12)];
    RawSym r;
    r.addr = *v.word(b + (is64 ? 8 : 4), is64);
    r.size = *v.word(b + (is64 ? 16 : 8), is64);
    r.name = *v.u32(b);
    r.index = i;
    r.type = ELF64_ST_TYPE(st_info);
    r.bind = ELF64_ST_BIND(st_info);
    const uint16_t shndx = *v.u16(b + (is64 ? 6 : 14));
    if (shndx < section_ends.size()) r.section_end = section_ends[shndx];
    return r;
  }

  Symbol to_symbol(const RawSym& r) const {
    const char* s = strtab + r.name;
    return Symbol{r.addr, r.size, std::string_view(s, std::strlen(s)), r.type, r.bind, r.section_end};
  }

  void build() {
    // Sort small integer keys instead of the symbols: (address, position),
    // with aliases at one address then ordered by better_alias in a short pass.
    struct Key {
      uint64_t addr;
      uint32_t pos;
    };
    std::vector<Key> keys(kept.size());
    for (size_t i = 0; i < kept.size(); i++) keys[i] = Key{spans[i].addr, kept[i]};
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return a.addr != b.addr ? a.addr < b.addr : a.pos < b.pos;
    });
    syms.reserve(kept.size());
    for (size_t i = 0; i < keys.size();) {
      RawSym best = decode(keys[i].pos);
      size_t j = i + 1;
      for (; j < keys.size() && keys[j].addr == keys[i].addr; j++) {
        const RawSym c = decode(keys[j].pos);
        if (better_alias(c, best)) best = c;
      }
      syms.push_back(to_symbol(best));
      max_size = std::max(max_size, best.size);
      i = j;
    }
  }

  /// The sorted lookup's answer without the sorted table: the symbols that
  /// could win are those starting in [lowest start of a sized symbol covering
  /// `a`, a] plus the closest one at or below `a`; collapse their aliases and
  /// walk back from `a` as lookup does.
  const RawSym* scan(uint64_t a, std::vector<RawSym>* window) const {
    uint64_t lo = UINT64_MAX, pred = 0;
    bool have_pred = false;
    for (const Span& sp : spans) {
      if (covers(sp.addr, sp.size, a) && sp.addr < lo) lo = sp.addr;
      if (sp.addr <= a && (!have_pred || sp.addr > pred)) {
        pred = sp.addr;
        have_pred = true;
      }
    }
    if (!have_pred) return nullptr;
    lo = std::min(lo, pred);
    window->clear();
    for (size_t k = 0; k < spans.size(); k++) {
      if (spans[k].addr >= lo && spans[k].addr <= a) window->push_back(decode(kept[k]));
    }
    // ELF-table order within an address (stable) does not matter: better_alias is a total order.
    std::sort(window->begin(), window->end(),
              [](const RawSym& x, const RawSym& y) { return x.addr > y.addr; });
    size_t steps = 0;
    const RawSym* closest = nullptr;
    for (size_t i = 0; i < window->size() && steps < kMaxBackscan; steps++) {
      size_t best = i;
      size_t j = i + 1;
      for (; j < window->size() && (*window)[j].addr == (*window)[i].addr; j++)
        if (better_alias((*window)[j], (*window)[best])) best = j;
      if (closest == nullptr) closest = &(*window)[best];
      if (covers((*window)[best].addr, (*window)[best].size, a)) return &(*window)[best];
      i = j;
    }
    return closest != nullptr && label_reaches(*closest, a) ? closest : nullptr;
  }
};

SymbolTable::SymbolTable() = default;
SymbolTable::SymbolTable(SymbolTable&&) noexcept = default;
SymbolTable& SymbolTable::operator=(SymbolTable&&) noexcept = default;
SymbolTable::~SymbolTable() = default;

Result<SymbolTable> SymbolTable::load(const ElfImage& image, Kind kind) {
  SymbolTable table;
  table.kind_ = kind;
  const uint32_t want = kind == Kind::kSymtab ? SHT_SYMTAB : SHT_DYNSYM;
  const char* want_name = kind == Kind::kSymtab ? ".symtab" : ".dynsym";
  size_t tab_index = 0;
  for (size_t i = 1; i < image.section_count() && tab_index == 0; i++) {
    if (image.section_type(i) == want) tab_index = i;
  }
  if (tab_index == 0) return table;
  auto tab_or = image.section_at_or_error(tab_index);
  if (!tab_or.ok()) return std::move(tab_or).error();
  const Section tab = tab_or.value();
  const char* path = image.path().c_str();

  const bool is64 = image.is_64bit();
  const size_t ent = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  if (tab.entsize != 0 && tab.entsize != ent) {
    return make_error(SPROV_ERR_ELF, "%s: %s (section %u): sh_entsize %llu, expected %zu", path,
                      want_name, tab.index, static_cast<unsigned long long>(tab.entsize), ent);
  }
  if (tab.link == 0 || tab.link >= image.section_count()) {
    return make_error(SPROV_ERR_ELF, "%s: %s (section %u): bad sh_link %u to its string table",
                      path, want_name, tab.index, tab.link);
  }
  auto str_or = image.section_at_or_error(tab.link);
  if (!str_or.ok()) return std::move(str_or).error();
  const Section str = str_or.value();
  if (str.type != SHT_STRTAB) {
    return make_error(SPROV_ERR_ELF, "%s: %s (section %u): sh_link %u is not SHT_STRTAB", path,
                      want_name, tab.index, tab.link);
  }
  const auto* strtab = reinterpret_cast<const char*>(str.data);
  // A name at offset o is terminated iff a NUL lies in [o, size): iff o <= the last NUL.
  const void* last_nul_p = str.size != 0 ? memrchr(strtab, 0, str.size) : nullptr;
  const size_t end_of_names =
      last_nul_p == nullptr ? 0 : static_cast<size_t>(static_cast<const char*>(last_nul_p) - strtab) + 1;

  const detail::ByteView v(tab.data, tab.size, image.big_endian());
  const size_t count = tab.size / ent;
  auto lazy = std::make_unique<Lazy>();
  lazy->strtab = strtab;
  lazy->strtab_size = str.size;
  lazy->tab = tab.data;
  lazy->tab_size = tab.size;
  lazy->is64 = is64;
  lazy->big_endian = image.big_endian();
  lazy->section_ends.assign(std::min<size_t>(image.section_count(), SHN_LORESERVE), UINT64_MAX);
  for (size_t i = 1; i < lazy->section_ends.size(); i++)
    lazy->section_ends[i] = image.section_range(i).second;
  // SHF_EXECINSTR by section index, looked up once per section rather than per symbol.
  std::vector<uint8_t> exec_section(image.section_count(), 0);
  for (size_t i = 1; i < exec_section.size(); i++)
    exec_section[i] = (image.section_flags(i) & SHF_EXECINSTR) != 0;
  lazy->kept.reserve(count / 2);
  lazy->spans.reserve(count / 2);
  for (size_t i = 1; i < count; i++) {
    const uint64_t b = i * ent;
    // Elf64_Sym: st_name@0 st_info@4 st_other@5 st_shndx@6 st_value@8 st_size@16;
    // Elf32_Sym: st_name@0 st_value@4 st_size@8 st_info@12 st_other@13 st_shndx@14 (gABI).
    const uint8_t st_info = tab.data[b + (is64 ? 4 : 12)];
    const uint8_t type = ELF64_ST_TYPE(st_info);
    const uint16_t shndx = *v.u16(b + (is64 ? 6 : 14));
    if (shndx == SHN_UNDEF) continue;
    bool keep = type == STT_FUNC || type == STT_GNU_IFUNC;
    const bool exec = shndx < exec_section.size() && exec_section[shndx] != 0;
    if (type == STT_NOTYPE && exec) {
      keep = true;  // assembly functions with .size but no .type, and code labels (_start)
    }
    if (!keep) continue;
    const uint32_t st_name = *v.u32(b);
    if (st_name >= str.size) {
      return make_error(SPROV_ERR_ELF, "%s: %s (section %u) symbol %zu: name offset %u outside "
                        "string table (%zu bytes)", path, want_name, tab.index, i, st_name,
                        str.size);
    }
    if (st_name >= end_of_names) {
      return make_error(SPROV_ERR_ELF, "%s: %s (section %u) symbol %zu: unterminated name", path,
                        want_name, tab.index, i);
    }
    if (strtab[st_name] == 0) continue;
    // ARM/AArch64/RISC-V mapping symbols ($x, $d, $a, $t) are not code labels.
    if (type == STT_NOTYPE && strtab[st_name] == '$') continue;
    lazy->kept.push_back(static_cast<uint32_t>(i));
    lazy->spans.push_back(Lazy::Span{*v.word(b + (is64 ? 8 : 4), is64), *v.word(b + (is64 ? 16 : 8), is64)});
  }
  if (!lazy->kept.empty()) table.lazy_ = std::move(lazy);
  return table;
}

bool SymbolTable::find_by_name(std::string_view name, uint64_t* addr, bool* global) const {
  if (lazy_ == nullptr || name.empty()) return false;
  Lazy& z = *lazy_;
  if (name.find("@@") == std::string_view::npos && z.indexed()) {
    auto it = z.by_name.find(name);
    if (it == z.by_name.end()) return false;
    *addr = it->second.addr;
    *global = it->second.global;
    return true;
  }
  // gdb's minimal symbols of one name: its hash chain holds them last address first, and the
  // first global one answers; a local one only when there is no global one (Lazy::choose).
  Lazy::NameHit hit;
  for (uint32_t pos : z.kept) {
    const RawSym r = z.decode(pos);
    const char* s = z.strtab + r.name;  // validated and terminated by load()
    if (std::strncmp(s, name.data(), name.size()) != 0) continue;
    const char* rest = s + name.size();
    if (*rest != '\0' && !(rest[0] == '@' && rest[1] == '@')) continue;
    Lazy::choose(&hit, r.addr, r.bind != STB_LOCAL);
  }
  if (hit.found) {
    *addr = hit.addr;
    *global = hit.global;
  }
  return hit.found;
}

void SymbolTable::names_at(uint64_t addr, std::vector<std::string_view>* out) const {
  if (lazy_ == nullptr) return;
  Lazy& z = *lazy_;
  if (z.indexed()) {
    auto it = std::lower_bound(z.by_addr.begin(), z.by_addr.end(), std::make_pair(addr, uint32_t{0}));
    for (; it != z.by_addr.end() && it->first == addr; ++it)
      out->push_back(z.strtab + z.decode(z.kept[it->second]).name);  // validated by load()
    return;
  }
  for (size_t k = 0; k < z.kept.size(); k++)
    if (z.spans[k].addr == addr) out->push_back(z.strtab + z.decode(z.kept[k]).name);  // validated by load()
}

bool SymbolTable::empty() const { return lazy_ == nullptr || lazy_->kept.empty(); }

const std::vector<Symbol>& SymbolTable::sorted() const {
  static const std::vector<Symbol> kNone;
  if (lazy_ == nullptr) return kNone;
  if (!lazy_->built.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(lazy_->mu);
    if (!lazy_->built.load(std::memory_order_relaxed)) {
      lazy_->build();
      lazy_->built.store(true, std::memory_order_release);
    }
  }
  return lazy_->syms;
}

const Symbol* SymbolTable::lookup_linear(uint64_t a) const {
  if (lazy_ == nullptr) return nullptr;
  std::vector<RawSym> window;
  const RawSym* r = lazy_->scan(a, &window);
  if (r == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(lazy_->mu);
  return &lazy_->made.emplace_back(lazy_->to_symbol(*r));
}

const Symbol* SymbolTable::lookup(uint64_t a) const {
  if (lazy_ == nullptr) return nullptr;
  Lazy& z = *lazy_;
  if (!z.built.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(z.mu);
    if (!z.built.load(std::memory_order_relaxed)) {
      if (auto it = z.memo.find(a); it != z.memo.end()) return it->second;
      if (z.linear_done < kLinearLookups) {
        z.linear_done++;
        std::vector<RawSym> window;
        const RawSym* r = z.scan(a, &window);
        const Symbol* s = r == nullptr ? nullptr : &z.made.emplace_back(z.to_symbol(*r));
        z.memo.emplace(a, s);
        return s;
      }
      z.build();
      z.built.store(true, std::memory_order_release);
    }
  }
  return lookup_sorted(a);
}

const Symbol* SymbolTable::lookup_sorted(uint64_t a) const {
  const std::vector<Symbol>& syms = lazy_->syms;
  const auto first = std::upper_bound(syms.begin(), syms.end(), a,
                                     [](uint64_t x, const Symbol& s) { return x < s.addr; });
  // Walk back over symbols starting at or below `a`: the nearest one may be a
  // small function nested in a larger one, so continue while a symbol could
  // still reach `a` (max_size) — bounded by kMaxBackscan.
  auto it = first;
  for (size_t steps = 0; it != syms.begin() && steps < kMaxBackscan; steps++) {
    --it;
    const uint64_t off = a - it->addr;
    if (off < it->size) return &*it;
    if (off >= lazy_->max_size) break;
  }
  // No sized symbol covers `a`: a label (zero-sized) right below it names it.
  if (first == syms.begin()) return nullptr;
  const Symbol& closest = *std::prev(first);
  return closest.size == 0 && a < closest.section_end ? &closest : nullptr;
}

}  // namespace stackprov::elf
