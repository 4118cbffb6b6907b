// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_symbolizer_frame_args — a frame's formal parameters and their values (`stack --args`).
#include <optional>

#include "capi/internal.hpp"
#include "dwarf/frame_args.hpp"
#include "memory/snapshot.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace stackprov::capi {

int frame_args(sprov_symbolizer* sym, const sprov_snapshot* snap, const sprov_stack* stack, size_t index, size_t* count) {
  if (sym == nullptr || stack == nullptr || count == nullptr)
    return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_frame_args: NULL %s",
                           sym == nullptr ? "sym" : stack == nullptr ? "stack" : "count"));
  *count = 0;
  sym->args.clear();
  if (index >= stack->frames.size())
    return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                           stack->frames.size()));
  const unwind::Frame& f = stack->frames[index];
  // An inferred frame (a tail call) has no registers of its own; runtime, JIT and kernel frames no DWARF here.
  if ((f.flags & unwind::Frame::kFlagInferred) || f.domain != unwind::Domain::kUser || f.module_index < 0 ||
      !stack->modules || static_cast<size_t>(f.module_index) >= stack->modules->size() || outside_modules(stack, f) ||
      sym->ctx->ctx.config().offline)
    return 0;
  if (!stack->runtime_of.empty() && index < stack->runtime_of.size() && stack->runtime_of[index] >= 0) return 0;
  if (!sym->chain) sym->chain = pipeline::resolver_chain(sym->ctx->ctx.config(), sym->explain);
  symbolize::DwarfResolver* dwarf = sym->chain->dwarf();
  if (dwarf == nullptr) return 0;
  auto lm = stack_module(sym->ctx, stack, f.module_index);
  if (!lm.ok() || !lm.value()->object()) return 0;
  const memory::SnapshotModule& sm = (*stack->modules)[static_cast<size_t>(f.module_index)];
  // gdb's get_frame_address_in_block: a caller frame's pc is a return address, looked up at pc - 1.
  const uint64_t pc = f.pc - (f.lookup_prev ? 1 : 0) - sm.load_bias;
  dwarf::FrameParams fp;
  if (!dwarf->parameters(lm.value()->object(), pc, &fp)) return 0;
  const bool have_regs = stack->regs.size() == stack->frames.size();
  std::optional<memory::SnapshotReader> reader;
  if (snap != nullptr) reader.emplace(snap->snap);
  dwarf::ArgFrame af;
  af.reg = [&](uint16_t reg, uint64_t* v) {
    if (!have_regs || reg >= unwind::FrameRegs::kMax) return false;
    const unwind::FrameRegs& r = stack->regs[index];
    if (!((r.known >> reg) & 1)) return false;
    *v = r.v[reg];
    return true;
  };
  af.read = [&](uint64_t addr, void* buf, size_t len) { return reader && reader->read(addr, buf, len); };
  af.has_cfa = f.cfa != 0;
  af.cfa = f.cfa;
  for (const dwarf::ParamInfo& p : fp.params) {
    const dwarf::ArgValue v = dwarf::param_value(fp, p, af);
    sprov_symbolizer::Arg a;
    a.name = std::string(p.name);
    a.type = p.type.name;
    a.status = v.status == dwarf::ArgValue::Status::kValue          ? SPROV_ARG_VALUE
               : v.status == dwarf::ArgValue::Status::kOptimizedOut ? SPROV_ARG_OPTIMIZED_OUT
                                                                    : SPROV_ARG_UNKNOWN;
    if (a.status == SPROV_ARG_VALUE) a.value = v.text;
    if (a.status == SPROV_ARG_UNKNOWN) a.reason = v.why;
    sym->args.push_back(std::move(a));
  }
  *count = sym->args.size();
  return 0;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_symbolizer_frame_args(sprov_symbolizer* sym, const sprov_snapshot* snap, const sprov_stack* stack,
                                          size_t index, size_t* count) {
  return guard([&] { return frame_args(sym, snap, stack, index, count); });
}

SPROV_API int sprov_symbolizer_frame_arg(const sprov_symbolizer* sym, size_t index, struct sprov_frame_arg* out) {
  return guard([&] {
    if (sym == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_frame_arg: NULL symbolizer"));
    if (index >= sym->args.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "argument index %zu out of range (%zu arguments)", index,
                             sym->args.size()));
    const sprov_symbolizer::Arg& a = sym->args[index];
    struct sprov_frame_arg s = {};
    s.sz = sizeof(s);
    s.name = a.name.c_str();
    s.type = a.type.c_str();
    s.value = a.value.c_str();
    s.reason = a.reason.c_str();
    s.status = a.status;
    return fill_out(out, s, "sprov_frame_arg");
  });
}

}  // extern "C"
