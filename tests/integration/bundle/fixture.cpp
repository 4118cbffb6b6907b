// SPDX-License-Identifier: Apache-2.0
// Bundle fixture (C++): templates, lambdas, std::vector and std::sort inlined at -O2 -g.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace fx {

template <class T>
struct Acc {
  T total{};
  void add(const T& v) { total += v * v; }
};

template <class T>
T fold(const std::vector<T>& v) {
  Acc<T> a;
  for (const T& x : v) a.add(x);
  return a.total;
}

__attribute__((noinline)) long work(int n) {
  std::vector<long> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 7919) % 101);
  std::sort(v.begin(), v.end(), [](long x, long y) { return x > y; });
  return fold(v);
}

}  // namespace fx

int main(int argc, char** argv) {
  std::string s(argv[0]);
  std::printf("%ld %zu\n", fx::work(argc * 50), s.size());
  return 0;
}
