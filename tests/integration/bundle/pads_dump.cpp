// SPDX-License-Identifier: Apache-2.0
// Test helper: prints every return pad of every module of a bundle (BundleReader::return_pads), innermost frame first.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "bundle/format.hpp"

using namespace stackprov::bundle;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bundle_pads_dump BUNDLE\n");
    return 2;
  }
  auto rd = BundleReader::open_file(argv[1]);
  if (!rd) {
    std::fprintf(stderr, "bundle_pads_dump: %s\n", rd.error().message.c_str());
    return 1;
  }
  for (const ModuleView& v : rd->modules()) {
    auto pads = rd->return_pads(v.index);
    if (!pads) {
      std::fprintf(stderr, "bundle_pads_dump: %s\n", pads.error().message.c_str());
      return 1;
    }
    // Output per pad: "PAD 0x<addr>", then function and file:line:column per frame,
    // innermost first (llvm-symbolizer --inlining order), then an empty line.
    for (const ReturnPadRecord& p : pads.value()) {
      std::printf("PAD 0x%" PRIx64 "\n", p.addr);
      for (size_t i = p.frames.size(); i-- > 0;) {
        const FrameRecord& f = p.frames[i];
        std::printf("%s\n%s:%u:%u\n", f.function.empty() ? "??" : f.function.c_str(),
                    f.file.empty() ? "??" : f.file.c_str(), f.line, f.column);
      }
      std::printf("\n");
    }
  }
  return 0;
}
