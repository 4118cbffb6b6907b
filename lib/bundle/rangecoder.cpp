// SPDX-License-Identifier: Apache-2.0
// Format 8's range records (doc/bundles.md "Format 8"): the range coder and one model that both encodes and decodes.
#include "bundle/rangecoder.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cinttypes>
#include <cstdarg>
#include <memory>
#include <string>
#include <type_traits>

#include "core/leb128.hpp"

namespace stackprov::bundle {

namespace rc {

unsigned Encoder::bit(Prob& pr, unsigned bit) {
  const uint32_t bound = (range_ >> 16) * pr.p;
  if (bit == 0) {
    range_ = bound;
  } else {
    low_ += bound;
    range_ -= bound;
  }
  update(pr, bit);
  while (range_ < (1u << 24)) {
    range_ <<= 8;
    shift_low();
  }
  return bit;
}

uint64_t Encoder::direct(uint64_t v, unsigned n) {
  for (unsigned i = n; i-- > 0;) {
    range_ >>= 1;
    if (((v >> i) & 1) != 0) low_ += range_;
    while (range_ < (1u << 24)) {
      range_ <<= 8;
      shift_low();
    }
  }
  return v & (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
}

// LZMA SDK's RangeEnc_ShiftLow: a byte below 0xff (or a carry) settles the cached byte and the 0xff
// bytes after it.
void Encoder::shift_low() {
  if (static_cast<uint32_t>(low_) < 0xff000000u || (low_ >> 32) != 0) {
    const uint8_t carry = static_cast<uint8_t>(low_ >> 32);
    uint8_t temp = cache_;
    do {
      out_.push_back(static_cast<uint8_t>(temp + carry));
      temp = 0xff;
    } while (--cache_size_ != 0);
    cache_ = static_cast<uint8_t>(low_ >> 24);
  }
  cache_size_++;
  low_ = (low_ & 0x00ffffffu) << 8;
}

std::vector<uint8_t> Encoder::finish() {
  for (int i = 0; i < 5; i++) shift_low();
  return std::move(out_);
}

Decoder::Decoder(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {
  if (next() != 0) bad_ = true;  // the encoder's first byte
  for (int i = 0; i < 4; i++) code_ = (code_ << 8) | next();
}

unsigned Decoder::bit(Prob& pr, unsigned) {
  const uint32_t bound = (range_ >> 16) * pr.p;
  unsigned bit;
  if (code_ < bound) {
    range_ = bound;
    bit = 0;
  } else {
    code_ -= bound;
    range_ -= bound;
    bit = 1;
  }
  update(pr, bit);
  while (range_ < (1u << 24)) {
    range_ <<= 8;
    code_ = (code_ << 8) | next();
  }
  return bit;
}

uint64_t Decoder::direct(uint64_t, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) {
    range_ >>= 1;
    unsigned bit = 0;
    if (code_ >= range_) {
      code_ -= range_;
      bit = 1;
    }
    v = (v << 1) | bit;
    while (range_ < (1u << 24)) {
      range_ <<= 8;
      code_ = (code_ << 8) | next();
    }
  }
  return v;
}

}  // namespace rc

namespace {

using rc::Prob;

Error bad8(const char* fmt, ...) STACKPROV_PRINTF(1, 2);
Error bad8(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string what = format_message_v(fmt, ap);
  va_end(ap);
  return make_error(SPROV_ERR_BUNDLE, "bundle: %s", what.c_str());
}

/// `nbits` bits of `v`, most significant first, as a binary tree of probabilities t[1 .. 2^nbits).
template <class C>
unsigned tree(C& c, Prob* t, unsigned nbits, unsigned v) {
  unsigned m = 1;
  for (unsigned i = nbits; i-- > 0;) m = 2 * m + c.bit(t[m], (v >> i) & 1);
  return m - (1u << nbits);
}

/// An unsigned integer: its bit width (0..kMaxWidth) as a 6-bit tree, the 3 bits below its top bit as a
/// tree per width, the next 2 bits adaptive per width, the rest with probability 1/2.
inline constexpr unsigned kMaxWidth = 40;
struct UIntM {
  Prob width[64];
  Prob top[kMaxWidth + 1][8];
  Prob low[kMaxWidth + 1][2];
};
/// A value that the decoder read past kMaxWidth bits (only a hostile stream has one): callers see it
/// as out of range.
inline constexpr uint64_t kBadValue = UINT64_MAX;

template <class C>
uint64_t code_uint(C& c, UIntM& m, uint64_t v) {
  const unsigned nb = tree(c, m.width, 6, static_cast<unsigned>(std::bit_width(v)));
  if (nb > kMaxWidth) return kBadValue;
  if (nb <= 1) return nb;
  const unsigned extra = nb - 1, top = std::min(extra, 3u), rest = extra - top;
  uint64_t x = (uint64_t{1} << top) | tree(c, m.top[nb], top, static_cast<unsigned>((v >> rest) & ((1u << top) - 1)));
  for (unsigned i = rest; i-- > 0;) {
    const unsigned b = static_cast<unsigned>((v >> i) & 1);
    x = 2 * x + (rest - i <= 2 ? c.bit(m.low[nb][rest - i - 1], b) : static_cast<unsigned>(c.direct(b, 1)));
  }
  return x;
}

/// A signed integer: zero?, sign, then |v| - 1 per sign.
struct SIntM {
  Prob zero, sign;
  UIntM mag[2];
};
template <class C>
int64_t code_sint(C& c, SIntM& m, int64_t v, bool* ok) {
  if (c.bit(m.zero, v != 0) == 0) return 0;
  const unsigned neg = c.bit(m.sign, v < 0);
  const uint64_t a = code_uint(c, m.mag[neg], v < 0 ? static_cast<uint64_t>(-(v + 1)) : static_cast<uint64_t>(v - 1));
  if (a >= (uint64_t{1} << 33)) {
    *ok = false;
    return 0;
  }
  return neg != 0 ? -static_cast<int64_t>(a) - 1 : static_cast<int64_t>(a) + 1;
}

/// A string index: new (not among the last kMtf8 named in this role), then the index itself, or its rank
/// among those (most recent first).
inline constexpr size_t kMtf8 = 1024;
struct StrM {
  Prob fresh;
  UIntM rank, index;
};

inline constexpr unsigned kDc = 4;     // depth classes: 0, 1, 2, 3 and deeper
inline constexpr unsigned kRecent = 16;  // positions remembered per function
inline constexpr unsigned kMatchOrder = 3;

/// Every adaptive context of a module's ranges (one instance per module, shared by its depths).
struct Model8 {
  Prob match[kDc][16];
  Prob has_gap[kDc][2];
  UIntM gap[kDc], gap_parents[kDc], gap_off[kDc][2];
  Prob fn_change[kDc][2];
  StrM fn[kDc], file[kDc], call_file[kDc];
  Prob pos_class[kDc][2][4][16];
  Prob file_change[kDc][2];
  SIntM line[kDc][2][2];
  UIntM col[kDc][64];
  UIntM len[kDc][3][32];
  Prob call_same[kDc][2][2], call_file_change[kDc], call_col_change[kDc], call_depth0;
  SIntM call_line[kDc][2];
  UIntM call_col[kDc];
};

/// What the match model compares: a record as it is coded relative to the one before.
struct Shape {
  uint64_t gap = 0;
  uint32_t change = 0;  // fn changed << 1 | file changed
  uint32_t cls = 0;     // 0: a new position, k: the k-th most recent one
  int64_t dline = 0;    // new positions only
  uint32_t col = 0;     // new positions only
  uint32_t len = 0;
  bool operator==(const Shape&) const = default;
};

uint64_t hash_shapes(const Shape* s) {  // FNV-1a over kMatchOrder shapes' fields
  uint64_t h = 1469598103934665603ull;
  for (unsigned o = 0; o < kMatchOrder; o++)
    for (uint64_t v : {s[o].gap, uint64_t{s[o].change}, uint64_t{s[o].cls}, static_cast<uint64_t>(s[o].dline),
                       uint64_t{s[o].col}, uint64_t{s[o].len}})
      h = (h ^ v) * 1099511628211ull;
  return h;
}

struct Pos {
  uint32_t file, line, col;
  bool operator==(const Pos&) const = default;
};

/// The string coder: `id` is the encoder's value; returns the index (kNone8 when the decoder read one
/// out of range).
template <class C>
uint32_t code_str(C& c, StrM& m, std::vector<uint32_t>& mtf, uint32_t id, uint32_t nstr) {
  constexpr bool kEnc = std::is_same_v<C, rc::Encoder>;
  size_t r = 0;
  if constexpr (kEnc) r = static_cast<size_t>(std::find(mtf.begin(), mtf.end(), id) - mtf.begin());
  if (c.bit(m.fresh, r == mtf.size()) == 0) {
    const uint64_t k = code_uint(c, m.rank, r);
    if (k >= mtf.size()) return kNone8;
    id = mtf[static_cast<size_t>(k)];
    // The list is shared with depth 0's call files, whose "none" is the index nstr (coded with a
    // bound of nstr + 1): remembered, it is still no string of a context bounded by nstr.
    if (id >= nstr) return kNone8;
    mtf.erase(mtf.begin() + static_cast<std::ptrdiff_t>(k));
  } else {
    const uint64_t v = code_uint(c, m.index, id);
    if (v >= nstr) return kNone8;
    id = static_cast<uint32_t>(v);
    if constexpr (!kEnc) {  // a hostile stream may name a remembered one as new: keep the list unique
      auto it = std::find(mtf.begin(), mtf.end(), id);
      if (it != mtf.end()) mtf.erase(it);
    }
  }
  mtf.insert(mtf.begin(), id);
  if (mtf.size() > kMtf8) mtf.pop_back();
  return id;
}

/// Codes the `count` records of depth `d` (`list`: the encoder's input; the decoder appends to it),
/// `parent` the depth above (null at depth 0). Decoding checks each record as it is made.
template <class C>
Status code_depth(C& c, Model8& m, size_t mi, uint32_t d, const std::vector<Range8>* parent, uint64_t count,
                  uint32_t nstr, std::vector<Range8>& list, std::vector<uint32_t>& fn_mtf,
                  std::vector<uint32_t>& file_mtf) {
  constexpr bool kEnc = std::is_same_v<C, rc::Encoder>;
  const unsigned dc = std::min(d, kDc - 1);
  std::vector<Shape> hist;
  hist.reserve(static_cast<size_t>(count));
  const unsigned tbits = std::clamp(static_cast<unsigned>(std::bit_width(2 * count)), 8u, 20u);
  std::vector<uint32_t> table(size_t{1} << tbits, 0);  // hash of the last kMatchOrder shapes -> 1 + history index
  std::array<Pos, kRecent> recent{};
  unsigned nrecent = 0, prev_gap = 0, prev_cls = 0, prev_lenb = 0, mrun = 0;
  uint64_t prev_end = 0;
  size_t pi = 0;  // the parent record holding the current start
  for (uint64_t i = 0; i < count; i++) {
    Range8 r;
    if constexpr (kEnc) r = list[static_cast<size_t>(i)];
    const Range8* prev = i > 0 ? &list[static_cast<size_t>(i - 1)] : nullptr;
    const uint32_t prev_line = prev != nullptr ? prev->line : 0, prev_col = prev != nullptr ? prev->col : 0;
    // The parent is found from the start; the encoder knows it now, the decoder once the start is read.
    auto find_parent = [&](uint64_t start) -> const Range8* {
      if (parent == nullptr) return nullptr;
      while (pi < parent->size() && uint64_t{(*parent)[pi].start} + (*parent)[pi].len <= start) pi++;
      if (pi == parent->size() || (*parent)[pi].start > start) return nullptr;
      return &(*parent)[pi];
    };
    Shape sh;
    const Range8* par = nullptr;
    if constexpr (kEnc) {
      par = find_parent(r.start);
      sh.gap = r.start - prev_end;
      const bool fc = prev == nullptr || r.fn != prev->fn;
      int k = -1;
      for (unsigned j = 0; !fc && j < nrecent && j + 1 < kRecent; j++)
        if (recent[j] == Pos{r.file, r.line, r.col}) {
          k = static_cast<int>(j);
          break;
        }
      const uint32_t pf = prev != nullptr && !fc ? prev->file : par != nullptr ? par->file : kNone8;
      sh.change = (fc ? 2u : 0u) | (r.file != pf ? 1u : 0u);
      sh.cls = static_cast<uint32_t>(k + 1);
      if (k < 0) {
        sh.dline = int64_t{r.line} - prev_line;
        sh.col = r.col;
      }
      sh.len = r.len;
    }
    bool hit = false;
    const size_t n = hist.size();
    if (n >= kMatchOrder) {
      const uint64_t h = hash_shapes(&hist[n - kMatchOrder]);
      uint32_t& slot = table[static_cast<size_t>(h >> (64 - tbits))];
      if (slot != 0) {
        const Shape& pred = hist[slot - 1];
        hit = c.bit(m.match[dc][std::min(mrun, 15u)], kEnc && pred == sh && sh.change == 0) != 0;
        mrun = hit ? mrun + 1 : 0;
        if (hit) {
          if (!kEnc && (pred.change != 0 || pred.cls > nrecent || pred.cls >= kRecent))
            return bad8("module %zu: range %" PRIu64 " of depth %u repeats a record it cannot (change %u, class %u)", mi, i,
                        d, pred.change, pred.cls);
          sh = pred;
        }
      }
      slot = static_cast<uint32_t>(n + 1);
    }
    bool ok = true;
    unsigned hg = 0, fc = 0;
    if (hit) {
      hg = sh.gap != 0;
      r.start = static_cast<uint32_t>(prev_end + sh.gap);  // checked below
      if (!kEnc && prev_end + sh.gap > UINT32_MAX) ok = false;
    } else {
      hg = c.bit(m.has_gap[dc][prev_gap], sh.gap != 0);
      if (hg != 0) {
        if (d == 0 || prev == nullptr) {
          sh.gap = code_uint(c, m.gap[dc], sh.gap);
        } else {
          // Depth d > 0: how many parent records start in (prev_end, start], then the offset from the
          // last of them (from prev_end + 1 when none).
          std::vector<Range8>::const_iterator lo = std::upper_bound(
              parent->begin(), parent->end(), prev_end, [](uint64_t a, const Range8& x) { return a < x.start; });
          uint64_t k = 0;
          if constexpr (kEnc)
            k = static_cast<uint64_t>(std::upper_bound(lo, parent->end(), uint64_t{r.start},
                                                       [](uint64_t a, const Range8& x) { return a < x.start; }) - lo);
          k = code_uint(c, m.gap_parents[dc], k);
          if (k > static_cast<uint64_t>(parent->end() - lo)) {
            ok = false;
          } else {
            const uint64_t from = k > 0 ? uint64_t{(lo + static_cast<std::ptrdiff_t>(k - 1))->start} : prev_end + 1;
            const uint64_t off = code_uint(c, m.gap_off[dc][k > 0], kEnc ? r.start - from : 0);
            if (off > UINT32_MAX) ok = false;
            sh.gap = from + off - prev_end;
          }
        }
        if (sh.gap == 0 || sh.gap > UINT32_MAX) ok = false;
      } else {
        sh.gap = 0;
      }
      if (!ok || prev_end + sh.gap > UINT32_MAX)
        return bad8("module %zu: range %" PRIu64 " of depth %u starts more than 4 GiB above the base, or cut short", mi, i, d);
      r.start = static_cast<uint32_t>(prev_end + sh.gap);
      fc = c.bit(m.fn_change[dc][hg], (sh.change & 2) != 0);
    }
    if (!ok) return bad8("module %zu: range %" PRIu64 " of depth %u starts more than 4 GiB above the base", mi, i, d);
    if (!kEnc) par = find_parent(r.start);
    if (parent != nullptr && par == nullptr)
      return bad8("module %zu: range 0x%x of depth %u is not inside a range of depth %u", mi, r.start, d, d - 1);
    if (fc != 0) {
      r.fn = code_str(c, m.fn[dc], fn_mtf, r.fn, nstr);
      if (r.fn == kNone8) return bad8("module %zu: range 0x%x of depth %u names a function past the %u strings", mi, r.start, d, nstr);
      nrecent = 0;
    } else if (prev == nullptr) {
      return bad8("module %zu: the first range of depth %u has no function", mi, d);
    } else {
      r.fn = prev->fn;
    }
    const uint32_t pf = prev != nullptr && fc == 0 ? prev->file : par != nullptr ? par->file : kNone8;
    if (!hit) sh.cls = tree(c, m.pos_class[dc][fc][prev_cls], 4, sh.cls);
    if (sh.cls > nrecent) return bad8("module %zu: range 0x%x of depth %u names position %u of %u remembered", mi, r.start, d, sh.cls, nrecent);
    if (sh.cls > 0) {
      const Pos p = recent[sh.cls - 1];
      std::copy_backward(recent.begin(), recent.begin() + (sh.cls - 1), recent.begin() + sh.cls);
      recent[0] = p;
      r.file = p.file;
      r.line = p.line;
      r.col = p.col;
    } else {
      unsigned filc = (sh.change & 1) != 0;
      if (!hit) filc = c.bit(m.file_change[dc][fc], filc);
      if (filc != 0) {
        r.file = code_str(c, m.file[dc], file_mtf, r.file, nstr);
        if (r.file == kNone8) return bad8("module %zu: range 0x%x of depth %u names a file past the %u strings", mi, r.start, d, nstr);
      } else if (pf == kNone8) {
        return bad8("module %zu: range 0x%x of depth %u keeps a file it does not have", mi, r.start, d);
      } else {
        r.file = pf;
      }
      if (!hit) {
        sh.dline = code_sint(c, m.line[dc][fc][filc], sh.dline, &ok);
        const uint64_t col = code_uint(c, m.col[dc][std::min(prev_col, 63u)], sh.col);
        if (col > UINT32_MAX) return bad8("module %zu: range 0x%x of depth %u has a column past 2^32", mi, r.start, d);
        sh.col = static_cast<uint32_t>(col);
      }
      const int64_t line = int64_t{prev_line} + sh.dline;
      if (!ok || line < 0 || line > UINT32_MAX)
        return bad8("module %zu: range 0x%x of depth %u has line %" PRId64 " (0..2^32 - 1)", mi, r.start, d, line);
      r.line = static_cast<uint32_t>(line);
      r.col = sh.col;
      std::copy_backward(recent.begin(), recent.begin() + std::min(nrecent, kRecent - 1), recent.begin() + std::min(nrecent + 1, kRecent));
      recent[0] = Pos{r.file, r.line, r.col};
      nrecent = std::min(nrecent + 1, kRecent);
    }
    sh.change = (fc != 0 ? 2u : 0u) | (r.file != pf ? 1u : 0u);
    if (!hit) {
      const uint64_t len = code_uint(c, m.len[dc][std::min(sh.cls, 2u)][prev_lenb], sh.len);
      sh.len = static_cast<uint32_t>(std::min<uint64_t>(len, UINT32_MAX));
      if (len > UINT32_MAX) sh.len = 0;
    }
    r.len = sh.len;
    if (r.len == 0 || uint64_t{r.start} + r.len > (uint64_t{1} << 32))
      return bad8("module %zu: range 0x%x of depth %u has length %u (1..4 GiB above the base)", mi, r.start, d, r.len);
    if (par != nullptr) {  // inside the records of the depth above, which are contiguous to its end
      const uint64_t end = uint64_t{r.start} + r.len;
      size_t j = pi;
      uint64_t cover = uint64_t{(*parent)[j].start} + (*parent)[j].len;
      while (cover < end && j + 1 < parent->size() && (*parent)[j + 1].start == cover) {
        j++;
        cover = uint64_t{(*parent)[j].start} + (*parent)[j].len;
      }
      if (cover < end)
        return bad8("module %zu: range 0x%x..0x%" PRIx64 " of depth %u is not inside ranges of depth %u", mi, r.start,
                    end, d, d - 1);
      // Call site: the previous record's, else given the parent's position.
      const bool same_in = prev != nullptr && fc == 0 && hg == 0 && r.call_file == prev->call_file &&
                           r.call_line == prev->call_line && r.call_col == prev->call_col;
      if (c.bit(m.call_same[dc][fc][hg], same_in) != 0) {
        if (prev == nullptr) return bad8("module %zu: the first range of depth %u repeats a call site", mi, d);
        r.call_file = prev->call_file;
        r.call_line = prev->call_line;
        r.call_col = prev->call_col;
      } else {
        const unsigned cf = c.bit(m.call_file_change[dc], r.call_file != par->file);
        if (cf != 0) {
          r.call_file = code_str(c, m.call_file[dc], file_mtf, r.call_file, nstr);
          if (r.call_file == kNone8) return bad8("module %zu: range 0x%x of depth %u names a call file past the %u strings", mi, r.start, d, nstr);
        } else {
          r.call_file = par->file;
        }
        const int64_t cl = int64_t{par->line} + code_sint(c, m.call_line[dc][cf], int64_t{r.call_line} - par->line, &ok);
        if (!ok || cl < 0 || cl > UINT32_MAX)
          return bad8("module %zu: range 0x%x of depth %u has call line %" PRId64 " (0..2^32 - 1)", mi, r.start, d, cl);
        r.call_line = static_cast<uint32_t>(cl);
        if (c.bit(m.call_col_change[dc], r.call_col != par->col || cf != 0) != 0) {
          const uint64_t cc = code_uint(c, m.call_col[dc], r.call_col);
          if (cc > UINT32_MAX) return bad8("module %zu: range 0x%x of depth %u has a call column past 2^32", mi, r.start, d);
          r.call_col = static_cast<uint32_t>(cc);
        } else {
          r.call_col = par->col;
        }
      }
    } else if (c.bit(m.call_depth0, r.call_file != kNone8 || r.call_line != 0 || r.call_col != 0) != 0) {
      // Depth 0 has no call site; one given to the writer anyway is kept (rare: not modelled).
      r.call_file = code_str(c, m.call_file[0], file_mtf, r.call_file == kNone8 ? nstr : r.call_file, nstr + 1);
      if (r.call_file == kNone8) return bad8("module %zu: range 0x%x names a call file past the %u strings", mi, r.start, nstr);
      if (r.call_file == nstr) r.call_file = kNone8;
      const uint64_t cl = code_uint(c, m.call_col[0], r.call_line), cc = code_uint(c, m.call_col[0], r.call_col);
      if (cl > UINT32_MAX || cc > UINT32_MAX)
        return bad8("module %zu: range 0x%x has a call line or column past 2^32", mi, r.start);
      r.call_line = static_cast<uint32_t>(cl);
      r.call_col = static_cast<uint32_t>(cc);
    } else {
      r.call_file = kNone8;
      r.call_line = 0;
      r.call_col = 0;
    }
    if constexpr (!kEnc)
      if (c.bad()) return bad8("module %zu: the ranges end after %" PRIu64 " of %" PRIu64 " records of depth %u", mi, i, count, d);
    prev_gap = hg;
    prev_cls = std::min(sh.cls, 3u);
    prev_lenb = std::min(static_cast<unsigned>(std::bit_width(r.len)), 31u);
    prev_end = uint64_t{r.start} + r.len;
    hist.push_back(sh);
    if constexpr (!kEnc) list.push_back(r);
  }
  return {};
}

bool get_uleb(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  const uint8_t* const next = read_uleb128(p, end, v);
  if (next == nullptr) return false;
  p = next;
  return true;
}

}  // namespace

std::vector<uint8_t> encode_ranges8(const std::vector<std::vector<Range8>>& depths, uint32_t nstr) {
  std::vector<uint8_t> out;
  if (depths.empty()) return out;
  append_uleb128(out, depths.size());
  uint64_t total = 0;
  for (const auto& v : depths) {
    append_uleb128(out, v.size());
    total += v.size();
  }
  auto m = std::make_unique<Model8>();
  rc::Encoder enc;
  std::vector<uint32_t> fn_mtf, file_mtf;
  for (uint32_t d = 0; d < depths.size(); d++) {
    std::vector<Range8> list = depths[d];  // the encoder reads it (the decoder appends)
    (void)code_depth(enc, *m, 0, d, d > 0 ? &depths[d - 1] : nullptr, list.size(), nstr, list, fn_mtf, file_mtf);
  }
  const std::vector<uint8_t> body = enc.finish();
  // Padding: the fewest zero bytes that keep the records within kMaxRanges8PerByte of the bytes.
  const uint64_t need = (total + kMaxRanges8PerByte - 1) / kMaxRanges8PerByte;
  uint64_t pad = 0;
  for (;;) {
    std::vector<uint8_t> u;
    append_uleb128(u, pad);
    const uint64_t have = out.size() + u.size() + pad + body.size();
    if (have >= need) break;
    pad += need - have;
  }
  append_uleb128(out, pad);
  out.insert(out.end(), static_cast<size_t>(pad), uint8_t{0});
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Status decode_ranges8(const uint8_t* p, size_t n, size_t mi, uint64_t nranges, uint32_t nstr,
                      std::vector<std::vector<Range8>>* out) {
  const uint8_t* end = p + n;
  out->clear();
  if (n == 0 && nranges == 0) return {};  // a module without ranges writes no bytes
  if (n == 0) return bad8("module %zu: no range bytes for %" PRIu64 " records", mi, nranges);
  uint64_t nd = 0;
  if (!get_uleb(p, end, &nd) || nd == 0 || nd > kMaxDepths8)
    return bad8("module %zu: %" PRIu64 " depths of ranges for %" PRIu64 " records (1..%" PRIu64 ")", mi, nd,
                nranges, kMaxDepths8);
  if (nranges > kMaxRanges8PerByte * n)
    return bad8("module %zu: %" PRIu64 " range records in %zu bytes (at most %" PRIu64 " a byte)", mi, nranges, n,
                kMaxRanges8PerByte);
  std::vector<uint64_t> counts(static_cast<size_t>(nd));
  uint64_t total = 0;
  for (uint64_t& k : counts) {
    if (!get_uleb(p, end, &k) || k == 0 || k > nranges - total)
      return bad8("module %zu: a depth of %" PRIu64 " ranges, %" PRIu64 " of the module's %" PRIu64 " left", mi, k,
                  nranges - total, nranges);
    total += k;
  }
  if (total != nranges)
    return bad8("module %zu: %" PRIu64 " range records in its depths, the module table says %" PRIu64, mi, total, nranges);
  uint64_t pad = 0;
  if (!get_uleb(p, end, &pad) || pad > static_cast<uint64_t>(end - p))
    return bad8("module %zu: %" PRIu64 " bytes of range padding, %td left", mi, pad, end - p);
  for (uint64_t i = 0; i < pad; i++)
    if (*p++ != 0) return bad8("module %zu: range padding byte %" PRIu64 " is not zero", mi, i);
  auto m = std::make_unique<Model8>();
  rc::Decoder dec(p, end);
  std::vector<uint32_t> fn_mtf, file_mtf;
  out->resize(static_cast<size_t>(nd));
  for (uint32_t d = 0; d < nd; d++) {
    (*out)[d].reserve(static_cast<size_t>(counts[d]));
    if (Status s = code_depth(dec, *m, mi, d, d > 0 ? &(*out)[d - 1] : nullptr, counts[d], nstr, (*out)[d], fn_mtf,
                              file_mtf);
        !s) {
      // Past the last byte the decoder reads zeros: what looks wrong then is the stream's end (or
      // its first byte, which must be 0).
      if (dec.bad())
        return bad8("module %zu: the %td bytes of coded ranges are cut short at range %zu of depth %u (or do not "
                    "start with 0)", mi, end - p, (*out)[d].size(), d);
      return s;
    }
  }
  if (!dec.finished())
    return bad8("module %zu: the coded ranges do not end at their last byte (cut short, or bytes left over)", mi);
  return {};
}

}  // namespace stackprov::bundle
