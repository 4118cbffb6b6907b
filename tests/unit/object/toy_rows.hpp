// SPDX-License-Identifier: Apache-2.0
// The toy format's unwind table kind, "toy_rows" (issue 32: "add a table kind" is a source class
// and one registration): rows {u32 start, u32 cfa_offset} sorted by start, each covering up to the
// next; cfa = rsp + cfa_offset with the return address at cfa - 8; cfa_offset 0 ends the stack.
// x86_64 only (rsp is DWARF register 7).
#pragma once

#include "unwind/unwind_source.hpp"

namespace toy {

class RowsSource final : public stackprov::unwind::UnwindSource {
 public:
  RowsSource(const uint8_t* rows, size_t n, uint64_t code_end) : rows_(rows), n_(n), code_end_(code_end) {}
  stackprov::unwind::Method method(bool) const override { return stackprov::unwind::Method::kUnwindTable; }
  std::vector<uint64_t> row_starts() const override {
    std::vector<uint64_t> out;
    for (size_t i = 0; i < n_; i++) out.push_back(le32(rows_ + 8 * i));
    out.push_back(code_end_);
    return out;
  }
  stackprov::dwarf::CfiStatus rule(uint64_t rel, const stackprov::unwind::RowParams& p,
                                   stackprov::unwind::UnwindRule* out) const override {
    using stackprov::unwind::UnwindRule;
    *out = UnwindRule{};
    out->kind = UnwindRule::kNoInfo;
    if (p.addr_size != 8 || rel >= code_end_) return stackprov::dwarf::CfiStatus::kOk;
    const uint8_t* hit = nullptr;
    for (size_t i = 0; i < n_ && le32(rows_ + 8 * i) <= rel; i++) hit = rows_ + 8 * i;
    if (hit == nullptr) return stackprov::dwarf::CfiStatus::kOk;
    const uint32_t off = le32(hit + 4);
    if (off == 0) {
      out->kind = UnwindRule::kEndOfStack;
    } else if (off % 8 != 0 || off > 1024) {
      return stackprov::dwarf::CfiStatus::kBadCfi;
    } else {
      out->kind = UnwindRule::kCfaReg;
      out->cfa_reg = 7;  // rsp
      out->cfa_off = static_cast<int32_t>(off);
      out->ra_kind = UnwindRule::kRaAtCfa;
      out->ra_off = -1;  // words below the cfa
    }
    return stackprov::dwarf::CfiStatus::kOk;
  }

 private:
  static uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
  const uint8_t* rows_;
  size_t n_;
  uint64_t code_end_;
};

inline stackprov::Result<std::unique_ptr<stackprov::unwind::UnwindSource>> make_rows(
    const stackprov::object::UnwindTable& t, const stackprov::object::ObjectImage& image) {
  auto code = image.section("code");
  if (!code) return stackprov::make_error(SPROV_ERR_CFI, "%s: toy_rows without code", image.path().c_str());
  return std::unique_ptr<stackprov::unwind::UnwindSource>(
      std::make_unique<RowsSource>(t.data.data, t.data.size / 8, code->addr + code->size));
}
inline const stackprov::unwind::TableKind kRowsKind{"toy_rows", make_rows};

}  // namespace toy
