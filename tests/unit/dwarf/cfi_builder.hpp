// SPDX-License-Identifier: Apache-2.0
// Label-based byte builder for hand-made CFI/expression bytes (after breakpad's test_assembler).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stackprov::test {

/// A value that may be defined later (by Section::Mark or Label::set). Copies share the value.
class Label {
 public:
  Label() : v_(std::make_shared<std::optional<uint64_t>>()) {}
  explicit Label(uint64_t value) : Label() { *v_ = value; }
  void set(uint64_t value) { *v_ = value; }
  bool defined() const { return v_->has_value(); }
  uint64_t value() const {
    if (!defined()) throw std::logic_error("undefined label");
    return **v_;
  }

 private:
  std::shared_ptr<std::optional<uint64_t>> v_;
};

/// sum(sign * label) + addend, resolved when the section's contents are taken.
struct LabelExpr {
  std::vector<std::pair<Label, int>> terms;
  int64_t addend = 0;
  LabelExpr() = default;
  LabelExpr(const Label& l) : terms{{l, 1}} {}  // NOLINT(google-explicit-constructor)
  LabelExpr(int64_t v) : addend(v) {}           // NOLINT(google-explicit-constructor)
  uint64_t eval() const {
    uint64_t v = static_cast<uint64_t>(addend);
    for (const auto& [l, sign] : terms) v += sign > 0 ? l.value() : 0 - l.value();
    return v;
  }
};

inline LabelExpr operator-(const Label& a, const Label& b) {
  LabelExpr e(a);
  e.terms.push_back({b, -1});
  return e;
}
inline LabelExpr operator+(LabelExpr e, int64_t k) {
  e.addend += k;
  return e;
}
inline LabelExpr operator-(LabelExpr e, int64_t k) {
  e.addend -= k;
  return e;
}
inline LabelExpr operator+(const Label& l, int64_t k) { return LabelExpr(l) + k; }
inline LabelExpr operator-(const Label& l, int64_t k) { return LabelExpr(l) - k; }

/// A growing byte buffer with a fixed byte order. Mark() binds a label to the
/// current offset (plus `base`); D16/D32/D64 write label expressions patched in Contents().
class Section {
 public:
  explicit Section(bool big_endian = false, uint64_t base = 0)
      : big_endian_(big_endian), base_(base) {}

  bool big_endian() const { return big_endian_; }
  size_t Size() const { return bytes_.size(); }

  Section& U8(uint64_t v) { return UN(1, v); }
  Section& U16(uint64_t v) { return UN(2, v); }
  Section& U32(uint64_t v) { return UN(4, v); }
  Section& U64(uint64_t v) { return UN(8, v); }
  Section& UN(unsigned n, uint64_t v) {
    put(bytes_.size(), n, v, /*append=*/true);
    return *this;
  }
  Section& D16(const LabelExpr& e) { return DN(2, e); }
  Section& D32(const LabelExpr& e) { return DN(4, e); }
  Section& D64(const LabelExpr& e) { return DN(8, e); }
  Section& DN(unsigned n, const LabelExpr& e) {
    fixups_.push_back({bytes_.size(), n, e});
    bytes_.resize(bytes_.size() + n);
    return *this;
  }
  Section& ULEB(uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      if (v) b |= 0x80;
      bytes_.push_back(b);
    } while (v);
    return *this;
  }
  Section& SLEB(int64_t v) {
    bool more = true;
    while (more) {
      uint8_t b = v & 0x7f;
      v >>= 7;  // arithmetic shift
      if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
        more = false;
      } else {
        b |= 0x80;
      }
      bytes_.push_back(b);
    }
    return *this;
  }
  Section& Append(std::initializer_list<uint8_t> bs) {
    bytes_.insert(bytes_.end(), bs.begin(), bs.end());
    return *this;
  }
  Section& Append(const std::vector<uint8_t>& bs) {
    bytes_.insert(bytes_.end(), bs.begin(), bs.end());
    return *this;
  }
  /// Appends another section (its labels must already be resolvable).
  Section& Append(const Section& s) { return Append(s.Contents()); }
  Section& Append(size_t n, uint8_t fill) {
    bytes_.insert(bytes_.end(), n, fill);
    return *this;
  }
  /// NUL-terminated string.
  Section& String(const std::string& s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    bytes_.push_back(0);
    return *this;
  }
  Section& Mark(Label* l) {
    l->set(base_ + bytes_.size());
    return *this;
  }
  Label Here() const { return Label(base_ + bytes_.size()); }

  std::vector<uint8_t> Contents() const {
    Section copy = *this;
    for (const auto& f : fixups_) copy.put(f.offset, f.size, f.expr.eval(), /*append=*/false);
    return copy.bytes_;
  }

 private:
  struct Fixup {
    size_t offset;
    unsigned size;
    LabelExpr expr;
  };
  void put(size_t at, unsigned n, uint64_t v, bool append) {
    if (append) bytes_.resize(bytes_.size() + n);
    for (unsigned i = 0; i < n; ++i) {
      const unsigned shift = big_endian_ ? (n - 1 - i) * 8 : i * 8;
      bytes_[at + i] = static_cast<uint8_t>(v >> shift);
    }
  }

  bool big_endian_;
  uint64_t base_;
  std::vector<uint8_t> bytes_;
  std::vector<Fixup> fixups_;
};

}  // namespace stackprov::test
