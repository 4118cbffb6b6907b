// SPDX-License-Identifier: Apache-2.0
// Fuzz target: signed notes, checkpoints, tlog-proof@v1 and consistency-proof texts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "evidence/note.hpp"
#include "evidence/trace_verify.hpp"

using namespace stackprov::evidence;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto note = parse_note(in);
  if (note) (void)parse_checkpoint_text(note.value().text);
  (void)parse_tlog_proof(in);
  (void)parse_consistency_proof(in);
  return 0;
}
