// SPDX-License-Identifier: Apache-2.0
// The .pdata/.xdata decoder against llvm-readobj-14 --unwind on PE32+ images built by the tests, field by field.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "lib/readobj_unwind.hpp"
#include "pe/unwind_info.hpp"
#include "unit/pe/pe_test_image.hpp"

using namespace stackprov;
using namespace stackprov::pe;
using namespace stackprov::test;

namespace {

const std::string kFixtures = STACKPROV_PE_FIXTURES;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Register numbers of the UNWIND_CODE OpInfo field (exception-handling-x64, "Operation info").
unsigned reg_number(const std::string& name) {
  static const char* const kGpr[] = {"RAX", "RCX", "RDX", "RBX", "RSP", "RBP", "RSI", "RDI",
                                     "R8",  "R9",  "R10", "R11", "R12", "R13", "R14", "R15"};
  for (unsigned i = 0; i < 16; i++) {
    if (name == kGpr[i]) return i;
  }
  if (name.rfind("XMM", 0) == 0) return static_cast<unsigned>(std::stoul(name.substr(3)));
  FAIL("unknown register name '" << name << "' in llvm-readobj's output");
  return 99;
}

/// llvm-readobj-14's name of each operation (Win64EHDumper.cpp).
const char* readobj_op_name(UnwindOp op) {
  switch (op) {
    case UnwindOp::kPushNonvol: return "PUSH_NONVOL";
    case UnwindOp::kAllocLarge: return "ALLOC_LARGE";
    case UnwindOp::kAllocSmall: return "ALLOC_SMALL";
    case UnwindOp::kSetFpreg: return "SET_FPREG";
    case UnwindOp::kSaveNonvol: return "SAVE_NONVOL";
    case UnwindOp::kSaveNonvolFar: return "SAVE_NONVOL_FAR";
    case UnwindOp::kSaveXmm128: return "SAVE_XMM128";
    case UnwindOp::kSaveXmm128Far: return "SAVE_XMM128_FAR";
    case UnwindOp::kPushMachframe: return "PUSH_MACHFRAME";
    default: return "?";
  }
}

/// Compares one decoded info with readobj's record of the function it describes.
void check_info(const UnwindInfo& u, const ReadobjRuntimeFunction& r, uint64_t base,
                std::set<std::pair<int, int>>* seen_ops) {
  CHECK(u.rva == r.unwind_info - base);
  CHECK(u.version == r.version);
  CHECK(u.flags == r.flags);
  CHECK(u.prolog_size == r.prolog_size);
  CHECK(u.code_count == r.code_count);
  if (r.frame_register) {
    CHECK(u.frame_register == *r.frame_register);
    REQUIRE(r.frame_offset);
    CHECK(u.frame_offset == *r.frame_offset * 16);  // readobj prints the stored (unscaled) value
  } else {
    CHECK(u.frame_register == 0);
  }
  CHECK(u.handler_rva == (r.handler ? *r.handler - base : 0));
  REQUIRE(u.chained.has_value() == r.chained.has_value());
  if (u.chained) {
    CHECK(u.chained->begin == r.chained->start - base);
    CHECK(u.chained->end == r.chained->end - base);
    CHECK(u.chained->unwind_rva == r.chained->unwind_info - base);
  }
  REQUIRE(u.codes.size() == r.codes.size());
  unsigned slots = 0;
  for (size_t k = 0; k < u.codes.size(); k++) {
    const UnwindCode& c = u.codes[k];
    const ReadobjUnwindCode& rc = r.codes[k];
    INFO("code " << k << ": readobj '" << rc.op << "' at 0x" << std::hex << rc.prolog_offset);
    slots += c.slots;
    CHECK(c.prolog_offset == rc.prolog_offset);
    CHECK(std::string(readobj_op_name(c.op)) == rc.op);
    seen_ops->insert({static_cast<int>(c.op), c.op == UnwindOp::kAllocLarge || c.op == UnwindOp::kPushMachframe
                                                  ? c.info : 0});
    switch (c.op) {
      case UnwindOp::kPushNonvol:
        CHECK(c.info == reg_number(rc.operands.at("reg")));
        break;
      case UnwindOp::kAllocLarge:
      case UnwindOp::kAllocSmall:
        CHECK(c.value == rc.number("size"));
        break;
      case UnwindOp::kSetFpreg:
        CHECK(u.frame_register == reg_number(rc.operands.at("reg")));
        CHECK(c.value == rc.number("offset"));
        break;
      case UnwindOp::kSaveNonvol:
      case UnwindOp::kSaveNonvolFar:
      case UnwindOp::kSaveXmm128:
      case UnwindOp::kSaveXmm128Far:
        CHECK(c.info == reg_number(rc.operands.at("reg")));
        CHECK(c.value == rc.number("offset"));
        break;
      case UnwindOp::kPushMachframe:
        CHECK(c.info == (rc.operands.at("errcode") == "yes" ? 1 : 0));
        break;
      default:
        FAIL("unexpected op in a version-1 info");
    }
  }
  CHECK(slots == u.code_count);  // version 1: the operations and their operands fill CountOfCodes
}

}  // namespace

TEST_CASE("every RUNTIME_FUNCTION of unwind.exe decodes as llvm-readobj-14 --unwind lists it", "[pe][readobj]") {
  const PeTestImage img = PeTestImage::load(kFixtures + "/unwind.exe");
  const auto oracle = parse_readobj_unwind(read_text(kFixtures + "/unwind.readobj.txt"));
  const ImageReader reader = [&img](uint32_t rva, uint32_t len) { return img.at(rva, len); };
  const uint64_t base = img.image_base;
  REQUIRE(img.pdata_size > 0);

  auto table = read_pdata(img.pdata());
  REQUIRE(table.ok());
  // 5 C functions + 6 with SEH directives + the hand-written chained pair.
  REQUIRE(oracle.size() == 12);
  REQUIRE(table->size() == oracle.size());

  std::set<std::pair<int, int>> seen_ops;  // (op, form): ALLOC_LARGE and PUSH_MACHFRAME by OpInfo
  bool saw_handler = false, saw_chain = false;
  for (size_t i = 0; i < oracle.size(); i++) {
    const RuntimeFunction& f = (*table)[i];
    const ReadobjRuntimeFunction& r = oracle[i];
    INFO("RUNTIME_FUNCTION " << i << " [0x" << std::hex << f.begin << ", 0x" << f.end << ")");
    CHECK(f.begin == r.start - base);
    CHECK(f.end == r.end - base);
    CHECK(f.unwind_rva == r.unwind_info - base);

    auto info = decode_unwind_info(reader, f.unwind_rva);
    REQUIRE(info.ok());
    check_info(*info, r, base, &seen_ops);
    saw_handler |= info->handler_rva != 0;

    auto chain = decode_chain(reader, f);
    REQUIRE(chain.ok());
    REQUIRE(chain->size() == (r.chained ? 2u : 1u));
    CHECK((*chain)[0].rva == info->rva);
    if (r.chained) {
      saw_chain = true;
      // The chained info is the one readobj lists for the entry the chain names.
      const ReadobjRuntimeFunction* parent = nullptr;
      for (const auto& o : oracle) {
        if (o.start == r.chained->start && o.unwind_info == r.chained->unwind_info) parent = &o;
      }
      REQUIRE(parent != nullptr);
      check_info((*chain)[1], *parent, base, &seen_ops);
    }
  }
  CHECK(saw_handler);
  CHECK(saw_chain);
  // The fixture covers every version-1 operation and both forms of ALLOC_LARGE and PUSH_MACHFRAME.
  const std::set<std::pair<int, int>> all = {{0, 0}, {1, 0}, {1, 1}, {2, 0}, {3, 0}, {4, 0},
                                             {5, 0}, {8, 0}, {9, 0}, {10, 0}, {10, 1}};
  CHECK(seen_ops == all);
}

TEST_CASE("find_function agrees with llvm-readobj-14's ranges at every RVA of .text", "[pe][readobj]") {
  const PeTestImage img = PeTestImage::load(kFixtures + "/unwind.exe");
  const auto oracle = parse_readobj_unwind(read_text(kFixtures + "/unwind.readobj.txt"));
  REQUIRE(!oracle.empty());
  auto table = read_pdata(img.pdata());
  REQUIRE(table.ok());
  const uint64_t base = img.image_base;
  const uint32_t lo = static_cast<uint32_t>(oracle.front().start - base) - 16;
  const uint32_t hi = static_cast<uint32_t>(oracle.back().end - base) + 16;
  size_t leaf = 0;
  for (uint32_t rva = lo; rva < hi; rva++) {
    const ReadobjRuntimeFunction* want = nullptr;
    for (const auto& r : oracle) {
      if (rva >= r.start - base && rva < r.end - base) want = &r;
    }
    const RuntimeFunction* got = find_function(*table, rva);
    INFO("rva 0x" << std::hex << rva);
    if (!want) {
      CHECK(got == nullptr);
      leaf++;
    } else {
      REQUIRE(got != nullptr);
      CHECK(got->begin == want->start - base);
    }
  }
  CHECK(leaf > 0);  // the gaps between functions and both ends were looked up too
}

// llvm-readobj-14 aborts ("stack smashing detected") on version-2 infos with UWOP_EPILOG codes, so
// this one is compared with the bytes written in tests/unit/pe/fixtures/unwind_v2.s, and each
// epilog start with the instruction there (add $0x20, %rsp: 48 83 c4 20, Intel SDM vol. 2 "ADD").
TEST_CASE("the hand-written version-2 info of unwind_v2.exe decodes as its bytes say", "[pe][v2]") {
  const PeTestImage img = PeTestImage::load(kFixtures + "/unwind_v2.exe");
  const ImageReader reader = [&img](uint32_t rva, uint32_t len) { return img.at(rva, len); };
  auto table = read_pdata(img.pdata());
  REQUIRE(table.ok());
  REQUIRE(table->size() == 1);
  const RuntimeFunction f = table->front();
  CHECK(f.end - f.begin == 0x17);

  auto chain = decode_chain(reader, f);
  REQUIRE(chain.ok());
  REQUIRE(chain->size() == 1);
  const UnwindInfo& u = chain->front();
  CHECK(u.version == 2);
  CHECK(u.flags == 0);
  CHECK(u.prolog_size == 5);
  CHECK(u.code_count == 4);
  CHECK(u.frame_register == 0);
  CHECK(u.epilog_size == 6);
  REQUIRE(u.epilogs.size() == 2);
  CHECK(u.epilogs[0] == Epilog{6, 6});    // OpInfo bit 0: at the end
  CHECK(u.epilogs[1] == Epilog{14, 6});   // CodeOffset 14, OpInfo 0
  REQUIRE(u.codes.size() == 2);
  CHECK(u.codes[0].op == UnwindOp::kAllocSmall);
  CHECK(u.codes[0].prolog_offset == 5);
  CHECK(u.codes[0].value == 0x20);
  CHECK(u.codes[1].op == UnwindOp::kPushNonvol);
  CHECK(u.codes[1].prolog_offset == 1);
  CHECK(u.codes[1].info == 3);  // rbx
  for (const Epilog& e : u.epilogs) {
    auto insn = img.at(f.end - e.offset_from_end, 4);
    REQUIRE(insn.size() == 4);
    CHECK(std::vector<uint8_t>(insn.begin(), insn.end()) == std::vector<uint8_t>{0x48, 0x83, 0xc4, 0x20});
  }
}
