// SPDX-License-Identifier: Apache-2.0
// Symbolization fixture: templates, lambdas, STL algorithms and containers inlined at -O2.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace fixture {

template <class T>
struct Accumulator {
  T total{};
  inline void add(T v) { total += v * 3 + (v >> 1); }
  T get() const { return total; }
};

static inline int square(int x) { return x * x; }

static int mix(int a, int b) {
  if (a > b) return square(a - b) + 7;
  return square(b - a) - 3;
}

__attribute__((noinline)) std::vector<int> make(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; i++) v.push_back(mix(i * 7919 % 101, i));
  std::sort(v.begin(), v.end(), [](int a, int b) { return a % 13 < b % 13 || (a % 13 == b % 13 && a < b); });
  return v;
}

__attribute__((noinline)) long count_words(const std::vector<std::string>& words) {
  std::map<std::string, int> m;
  for (const auto& w : words) m[w]++;
  long s = 0;
  for (const auto& [k, c] : m) s += static_cast<long>(k.size()) * c;
  return s;
}

int recurse(int n) { return n <= 1 ? 1 : n * recurse(n - 1) % 1000003; }

}  // namespace fixture

int main(int argc, char** argv) {
  fixture::Accumulator<long> acc;
  for (int x : fixture::make(argc * 50)) acc.add(x);
  std::vector<std::string> words;
  for (int i = 0; i < argc; i++) words.emplace_back(argv[i]);
  std::printf("%ld %ld %d\n", acc.get(), fixture::count_words(words), fixture::recurse(argc + 10));
  return 0;
}
