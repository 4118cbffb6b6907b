// SPDX-License-Identifier: Apache-2.0
// The x64 .pdata/.xdata decoder: RUNTIME_FUNCTION tables, UNWIND_INFO records and their chains.
#include "pe/unwind_info.hpp"

#include <algorithm>

#include "pe/pe_bytes.hpp"

namespace stackprov::pe {

namespace {


/// `len` bytes at `rva` from the reader, or an empty span when they are not all there (or rva + len
/// wraps past 4 GiB).
std::span<const uint8_t> read_exact(const ImageReader& img, uint32_t rva, uint32_t len) {
  if (static_cast<uint64_t>(rva) + len > UINT32_MAX + uint64_t{1}) return {};
  auto s = img(rva, len);
  if (s.size() < len) return {};
  return s.first(len);
}

const char* op_name(uint8_t op) {
  static const char* const kNames[] = {"PUSH_NONVOL", "ALLOC_LARGE",     "ALLOC_SMALL", "SET_FPREG",
                                       "SAVE_NONVOL", "SAVE_NONVOL_FAR", "EPILOG",      "SPARE_CODE",
                                       "SAVE_XMM128", "SAVE_XMM128_FAR", "PUSH_MACHFRAME"};
  return op < sizeof kNames / sizeof kNames[0] ? kNames[op] : "unknown";
}

/// Slots an operation takes (itself included); 0 for an operation this version does not define.
uint8_t slots_of(uint8_t version, uint8_t op, uint8_t info) {
  switch (static_cast<UnwindOp>(op)) {
    case UnwindOp::kPushNonvol:
    case UnwindOp::kAllocSmall:
    case UnwindOp::kSetFpreg:
    case UnwindOp::kPushMachframe:
      return 1;
    case UnwindOp::kAllocLarge:
      return info == 0 ? 2 : 3;
    case UnwindOp::kSaveNonvol:
    case UnwindOp::kSaveXmm128:
      return 2;
    case UnwindOp::kSaveNonvolFar:
    case UnwindOp::kSaveXmm128Far:
      return 3;
    case UnwindOp::kEpilog:
      return version == 2 ? 1 : 0;
    default:
      return 0;
  }
}

}  // namespace

ImageReader flat_image_reader(std::span<const uint8_t> image, uint32_t base_rva) {
  return [image, base_rva](uint32_t rva, uint32_t len) -> std::span<const uint8_t> {
    if (rva < base_rva) return {};
    const uint64_t off = uint64_t{rva} - base_rva;
    if (off > image.size() || len > image.size() - off) return {};
    return image.subspan(static_cast<size_t>(off), len);
  };
}

Result<std::vector<RuntimeFunction>> read_pdata(std::span<const uint8_t> pdata) {
  if (pdata.size() % kRuntimeFunctionSize != 0) {
    return make_error(SPROV_ERR_CFI, ".pdata: %zu bytes, not a whole number of %u-byte entries", pdata.size(),
                      kRuntimeFunctionSize);
  }
  const size_t n = pdata.size() / kRuntimeFunctionSize;
  std::vector<RuntimeFunction> out;
  out.reserve(n);
  for (size_t i = 0; i < n; i++) {
    const uint8_t* p = pdata.data() + i * kRuntimeFunctionSize;
    RuntimeFunction f{le32(p), le32(p + 4), le32(p + 8)};
    if (f.begin >= f.end) {
      return make_error(SPROV_ERR_CFI, ".pdata entry %zu: begin 0x%x is not below end 0x%x", i, f.begin, f.end);
    }
    if (!out.empty()) {
      const RuntimeFunction& prev = out.back();
      if (f.begin < prev.begin) {
        return make_error(SPROV_ERR_CFI, ".pdata entry %zu: begin 0x%x is below entry %zu's begin 0x%x (not sorted)", i,
                          f.begin, i - 1, prev.begin);
      }
      if (f.begin < prev.end) {
        return make_error(SPROV_ERR_CFI, ".pdata entry %zu: [0x%x, 0x%x) overlaps entry %zu [0x%x, 0x%x)", i, f.begin,
                          f.end, i - 1, prev.begin, prev.end);
      }
    }
    out.push_back(f);
  }
  return out;
}

const RuntimeFunction* find_function(std::span<const RuntimeFunction> table, uint32_t rva) {
  // The first entry beginning after rva; the one before it is the only candidate.
  auto it = std::upper_bound(table.begin(), table.end(), rva,
                             [](uint32_t r, const RuntimeFunction& f) { return r < f.begin; });
  if (it == table.begin()) return nullptr;
  --it;
  return rva < it->end ? &*it : nullptr;
}

Result<UnwindInfo> decode_unwind_info(const ImageReader& img, uint32_t rva) {
  // UNWIND_INFO must be DWORD aligned (exception-handling-x64, "struct UNWIND_INFO").
  if (rva % 4 != 0) return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: not 4-byte aligned", rva);
  auto head = read_exact(img, rva, 4);
  if (head.empty()) return make_error(SPROV_ERR_TRUNCATED, "unwind info at rva 0x%x: header outside the image", rva);

  UnwindInfo u;
  u.rva = rva;
  u.version = head[0] & 7;
  u.flags = head[0] >> 3;
  u.prolog_size = head[1];
  u.code_count = head[2];
  u.frame_register = head[3] & 15;
  u.frame_offset = static_cast<uint8_t>((head[3] >> 4) * 16);
  if (u.version != 1 && u.version != 2) {
    return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: version %u (only 1 and 2 exist)", rva, u.version);
  }
  if (u.flags & ~(kFlagEHandler | kFlagUHandler | kFlagChainInfo)) {
    return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: undefined flags 0x%x", rva, u.flags);
  }
  const bool chained = u.flags & kFlagChainInfo;
  const bool handler = u.flags & (kFlagEHandler | kFlagUHandler);
  if (chained && handler) {
    return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: flags 0x%x: chained info with a handler", rva, u.flags);
  }

  // The code array is padded to an even count; the handler RVA or the chained entry follows it.
  const uint32_t array_bytes = ((u.code_count + 1u) & ~1u) * 2;
  const uint32_t tail_bytes = chained ? kRuntimeFunctionSize : handler ? 4 : 0;
  if (rva > UINT32_MAX - 4) {  // the header ends at 4 GiB: nothing can follow it
    return make_error(SPROV_ERR_TRUNCATED, "unwind info at rva 0x%x: codes outside the image", rva);
  }
  auto body = read_exact(img, rva + 4, array_bytes + tail_bytes);
  if (body.empty() && array_bytes + tail_bytes != 0) {
    return make_error(SPROV_ERR_TRUNCATED,
                      "unwind info at rva 0x%x: %u unwind codes%s need %u bytes after the header, outside the image",
                      rva, u.code_count, chained ? " and a chained entry" : handler ? " and a handler" : "",
                      array_bytes + tail_bytes);
  }
  const uint8_t* codes = body.data();

  uint32_t i = 0;
  bool first_epilog = true;
  while (i < u.code_count) {
    const uint8_t offset = codes[2 * i];
    const uint8_t op = codes[2 * i + 1] & 15;
    const uint8_t info = codes[2 * i + 1] >> 4;
    const uint8_t n = slots_of(u.version, op, info);
    if (n == 0) {
      return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: op %u (%s) is not defined in version %u", rva,
                        i, op, op_name(op), u.version);
    }
    if (i + n > u.code_count) {
      return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: %s needs %u slots, only %u of %u codes left",
                        rva, i, op_name(op), n, u.code_count - i, u.code_count);
    }
    const uint8_t* next = codes + 2 * (i + 1);
    UnwindCode c;
    c.prolog_offset = offset;
    c.op = static_cast<UnwindOp>(op);
    c.info = info;
    c.slots = n;
    switch (c.op) {
      case UnwindOp::kPushNonvol:
        break;
      case UnwindOp::kAllocLarge:
        if (info > 1) {
          return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: ALLOC_LARGE with op info %u (0 or 1)",
                            rva, i, info);
        }
        c.value = info == 0 ? le16(next) * 8u : le32(next);
        break;
      case UnwindOp::kAllocSmall:
        c.value = info * 8u + 8;
        break;
      case UnwindOp::kSetFpreg:
        if (u.frame_register == 0) {
          return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: SET_FPREG without a frame register", rva,
                            i);
        }
        c.value = u.frame_offset;
        break;
      case UnwindOp::kSaveNonvol:
        c.value = le16(next) * 8u;
        break;
      case UnwindOp::kSaveXmm128:
        c.value = le16(next) * 16u;
        break;
      case UnwindOp::kSaveNonvolFar:
      case UnwindOp::kSaveXmm128Far:
        c.value = le32(next);
        break;
      case UnwindOp::kPushMachframe:
        if (info > 1) {
          return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: PUSH_MACHFRAME with op info %u (0 or 1)",
                            rva, i, info);
        }
        break;
      case UnwindOp::kEpilog: {
        // Version 2 (slots_of admits op 6 nowhere else): the descriptors come before the prolog codes.
        if (!u.codes.empty()) {
          return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: EPILOG after the prolog codes", rva, i);
        }
        if (first_epilog) {
          // CodeOffset: the epilogs' size; OpInfo bit 0: one of them ends the function.
          first_epilog = false;
          if (offset == 0 || info > 1) {
            return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: code %u: first EPILOG with size %u, flags 0x%x",
                              rva, i, offset, info);
          }
          u.epilog_size = offset;
          if (info & 1) u.epilogs.push_back(Epilog{offset, offset});
        } else {
          const uint16_t from_end = static_cast<uint16_t>(offset | (info << 8));
          const uint8_t size = u.epilog_size;
          if (from_end != 0) {
            if (from_end < size) {
              return make_error(SPROV_ERR_CFI,
                                "unwind info at rva 0x%x: code %u: epilog at end - 0x%x is shorter than its size %u",
                                rva, i, from_end, size);
            }
            u.epilogs.push_back(Epilog{from_end, size});
          }
        }
        i += n;
        continue;
      }
      case UnwindOp::kSpareCode:
        break;  // unreachable: slots_of rejects it
    }
    u.codes.push_back(c);
    i += n;
  }

  const uint8_t* tail = codes + array_bytes;
  if (chained) {
    RuntimeFunction f{le32(tail), le32(tail + 4), le32(tail + 8)};
    u.chained = f;
  } else if (handler) {
    u.handler_rva = le32(tail);
    u.handler_data_rva = rva + 4 + array_bytes + 4;  // 0 only if the handler RVA ends the 4 GiB space
  }
  return u;
}

Result<std::vector<UnwindInfo>> decode_chain(const ImageReader& img, const RuntimeFunction& f) {
  std::vector<UnwindInfo> out;
  RuntimeFunction cur = f;
  for (;;) {
    for (const UnwindInfo& seen : out) {
      if (seen.rva == cur.unwind_rva) {
        return make_error(SPROV_ERR_CFI,
                          "function [0x%x, 0x%x): unwind info chain comes back to rva 0x%x after %zu infos (a cycle)",
                          f.begin, f.end, cur.unwind_rva, out.size());
      }
    }
    if (out.size() >= kMaxChainDepth) {
      return make_error(SPROV_ERR_LIMIT, "function [0x%x, 0x%x): unwind info chain longer than %u infos", f.begin,
                        f.end, kMaxChainDepth);
    }
    auto info = decode_unwind_info(img, cur.unwind_rva);
    if (!info.ok()) return std::move(info).error();
    if (out.empty()) {
      for (const Epilog& e : info->epilogs) {
        if (e.offset_from_end > f.end - f.begin) {
          return make_error(SPROV_ERR_CFI,
                            "unwind info at rva 0x%x: epilog at end - 0x%x starts before function [0x%x, 0x%x)",
                            info->rva, e.offset_from_end, f.begin, f.end);
        }
      }
    }
    out.push_back(std::move(info).value());
    const UnwindInfo& last = out.back();
    if (!last.chained) return out;
    cur = *last.chained;
    if (cur.begin >= cur.end) {
      return make_error(SPROV_ERR_CFI, "unwind info at rva 0x%x: chained entry begin 0x%x is not below end 0x%x",
                        last.rva, cur.begin, cur.end);
    }
  }
}

}  // namespace stackprov::pe
