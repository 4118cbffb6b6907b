// SPDX-License-Identifier: Apache-2.0
// Canonical Huffman codes for the bundle's format 3: length-limited construction, table I/O, slow decode.

#include "bundle/entropy.hpp"

#include <algorithm>

namespace stackprov::bundle::entropy {

namespace {

/// Huffman code lengths by the two-queue method over leaves sorted by (count, symbol): merges take
/// the lighter front, a leaf on a tie, so the result depends on the counts only.
Lengths huffman_lengths(const Counts& counts) {
  struct Node {
    uint64_t w;
    int left, right;  // children (node indexes), -1 for a leaf
    int sym;
  };
  std::vector<Node> nodes;
  for (unsigned s = 0; s < kAlphabet; s++)
    if (counts[s] != 0) nodes.push_back({counts[s], -1, -1, static_cast<int>(s)});
  Lengths out{};
  if (nodes.empty()) return out;
  if (nodes.size() == 1) {
    out[static_cast<size_t>(nodes[0].sym)] = 1;
    return out;
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) { return a.w != b.w ? a.w < b.w : a.sym < b.sym; });
  const size_t nleaves = nodes.size();
  size_t li = 0, qi = nleaves;  // next leaf, next internal node (internal nodes are appended in weight order)
  auto take = [&]() {
    const bool leaf = li < nleaves && (qi >= nodes.size() || nodes[li].w <= nodes[qi].w);
    return leaf ? static_cast<int>(li++) : static_cast<int>(qi++);
  };
  while ((nleaves - li) + (nodes.size() - qi) > 1) {
    const int a = take();
    const int b = take();
    nodes.push_back({nodes[static_cast<size_t>(a)].w + nodes[static_cast<size_t>(b)].w, a, b, -1});
  }
  // Depths from the root (the last node) down; children always precede their parent.
  std::vector<uint8_t> depth(nodes.size(), 0);
  for (size_t i = nodes.size(); i-- > nleaves;) {
    const Node& n = nodes[i];
    const uint8_t d = static_cast<uint8_t>(std::min<unsigned>(depth[i] + 1u, 255u));
    depth[static_cast<size_t>(n.left)] = d;
    depth[static_cast<size_t>(n.right)] = d;
  }
  for (size_t i = 0; i < nleaves; i++) out[static_cast<size_t>(nodes[i].sym)] = depth[i];
  return out;
}

}  // namespace

Lengths build_lengths(const Counts& counts) {
  Counts c = counts;
  for (;;) {
    Lengths l = huffman_lengths(c);
    if (*std::max_element(l.begin(), l.end()) <= kMaxCodeLen) return l;
    // Too deep: flatten the distribution (used symbols stay used) and build again. Each round
    // halves the weights, so after at most 64 rounds all are 1 and the depth is 8 (256 symbols).
    for (uint64_t& v : c)
      if (v != 0) v = (v + 1) / 2;
  }
}

bool Code::assign(const Lengths& lengths) {
  len_ = lengths;
  count_.fill(0);
  code_.fill(0);
  fast_.fill(0);
  used_ = 0;
  for (unsigned s = 0; s < kAlphabet; s++) {
    if (len_[s] > kMaxCodeLen) return false;
    if (len_[s] != 0) {
      count_[len_[s]]++;
      used_++;
    }
  }
  if (used_ == 0) return true;
  if (used_ == 1) {
    if (count_[1] != 1) return false;
  } else {
    uint64_t kraft = 0;  // in units of 2^-15
    for (unsigned l = 1; l <= kMaxCodeLen; l++) kraft += uint64_t{count_[l]} << (kMaxCodeLen - l);
    if (kraft != uint64_t{1} << kMaxCodeLen) return false;
  }
  // Canonical codes in (length, symbol) order.
  std::array<uint16_t, kMaxCodeLen + 2> next{};
  uint16_t c = 0;
  for (unsigned l = 1; l <= kMaxCodeLen; l++) {
    c = static_cast<uint16_t>((c + count_[l - 1]) << 1);
    next[l] = c;
  }
  std::array<uint16_t, kMaxCodeLen + 1> offs{};
  for (unsigned l = 1, o = 0; l <= kMaxCodeLen; l++) {
    offs[l] = static_cast<uint16_t>(o);
    o += count_[l];
  }
  for (unsigned s = 0; s < kAlphabet; s++) {
    const unsigned l = len_[s];
    if (l == 0) continue;
    sorted_[offs[l]++] = static_cast<uint8_t>(s);
    const uint16_t code = next[l]++;
    uint16_t rev = 0;  // first bit on the wire = the code's top bit
    for (unsigned i = 0; i < l; i++) rev = static_cast<uint16_t>(rev | (((code >> i) & 1u) << (l - 1 - i)));
    code_[s] = rev;
    if (l <= kFastBits)
      for (unsigned j = rev; j < (1u << kFastBits); j += 1u << l) fast_[j] = static_cast<uint16_t>(s | (l << 8));
  }
  return true;
}

unsigned Code::get_slow(BitReader& r) const {
  // Canonical decode one bit at a time (puff's method): at most kMaxCodeLen steps.
  int code = 0, first = 0, index = 0;
  for (unsigned l = 1; l <= kMaxCodeLen; l++) {
    code |= static_cast<int>(r.get(1));
    const int n = count_[l];
    if (code - first < n) {
      if (r.bad()) return 0;
      return sorted_[static_cast<size_t>(index + code - first)];
    }
    index += n;
    first = (first + n) << 1;
    code <<= 1;
  }
  r.set_bad();
  return 0;
}

void Code::write(BitWriter& w) const {
  unsigned n = kAlphabet;
  while (n > 0 && len_[n - 1] == 0) n--;
  w.put(n, 9);
  for (unsigned s = 0; s < n;) {
    w.put(len_[s], 4);
    if (len_[s] != 0) {
      s++;
      continue;
    }
    unsigned run = 0;  // zeros after this one
    while (run < 31 && s + 1 + run < n && len_[s + 1 + run] == 0) run++;
    w.put(run, 5);
    s += 1 + run;
  }
}

bool Code::read(BitReader& r) {
  Lengths l{};
  const unsigned n = static_cast<unsigned>(r.get(9));
  if (n > kAlphabet) return false;
  for (unsigned s = 0; s < n && !r.bad();) {
    l[s] = static_cast<uint8_t>(r.get(4));
    if (l[s] != 0) {
      s++;
      continue;
    }
    const unsigned run = static_cast<unsigned>(r.get(5));
    if (s + 1 + run > n) return false;
    s += 1 + run;
  }
  if (r.bad() || (n > 0 && l[n - 1] == 0)) return false;  // canonical: n is the highest used symbol + 1
  return assign(l);
}

}  // namespace stackprov::bundle::entropy
