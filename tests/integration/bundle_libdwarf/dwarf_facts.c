// SPDX-License-Identifier: Apache-2.0
// Dumps, with libdwarf (not stackprov's DWARF reader), a binary's function DIEs (ranges, names, call sites, inline depth) and line rows.
//
// Output, one fact a line, tab-separated:
//   D <depth> <subprogram|inlined> <name> <call_file> <call_line> <call_column> <lo>-<hi>[,<lo>-<hi>...]
//   C <lo>-<hi>[,<lo>-<hi>...]     (a compile unit's address ranges)
//   L <addr> <file> <line> <column> <end_sequence 0|1> <alt: file 1 when a DWARF 5 row says file 0>
// Addresses in hex. <name>: DW_AT_linkage_name (or DW_AT_MIPS_linkage_name), else DW_AT_name,
// found on the DIE or through DW_AT_abstract_origin / DW_AT_specification. <depth>: 0 for a
// DW_TAG_subprogram, parent's + 1 for a DW_TAG_inlined_subroutine (lexical blocks do not count).
// Only DIEs with address ranges are printed. Exit 1 with a message on any libdwarf error.
#include <libdwarf/dwarf.h>
#include <libdwarf/libdwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxDieDepth = 512, kMaxRefHops = 16 };

static Dwarf_Debug dbg;

static void die_fail(const char* what, Dwarf_Error err) {
  fprintf(stderr, "dwarf_facts: %s: %s\n", what, err ? dwarf_errmsg(err) : "(no error detail)");
  exit(1);
}

/// A string attribute of `die` (NULL when absent).
static const char* str_attr(Dwarf_Die die, Dwarf_Half at) {
  Dwarf_Attribute attr;
  Dwarf_Error err = NULL;
  int res = dwarf_attr(die, at, &attr, &err);
  if (res == DW_DLV_ERROR) die_fail("dwarf_attr", err);
  if (res != DW_DLV_OK) return NULL;
  char* s = NULL;
  res = dwarf_formstring(attr, &s, &err);
  dwarf_dealloc_attribute(attr);
  if (res == DW_DLV_ERROR) die_fail("dwarf_formstring", err);
  return res == DW_DLV_OK ? s : NULL;
}

static int udata_attr(Dwarf_Die die, Dwarf_Half at, Dwarf_Unsigned* out) {
  Dwarf_Attribute attr;
  Dwarf_Error err = NULL;
  int res = dwarf_attr(die, at, &attr, &err);
  if (res == DW_DLV_ERROR) die_fail("dwarf_attr", err);
  if (res != DW_DLV_OK) return 0;
  Dwarf_Half form = 0;
  if (dwarf_whatform(attr, &form, &err) != DW_DLV_OK) die_fail("dwarf_whatform", err);
  if (form == DW_FORM_implicit_const) {  // this libdwarf's formudata rejects it; formsdata reads it
    Dwarf_Signed v = 0;
    res = dwarf_formsdata(attr, &v, &err);
    *out = (Dwarf_Unsigned)v;
  } else {
    res = dwarf_formudata(attr, out, &err);
  }
  dwarf_dealloc_attribute(attr);
  if (res == DW_DLV_ERROR) die_fail("dwarf_formudata", err);
  return res == DW_DLV_OK;
}

/// The DIE a reference attribute points to (caller deallocates), or NULL.
static Dwarf_Die ref_attr(Dwarf_Die die, Dwarf_Half at) {
  Dwarf_Attribute attr;
  Dwarf_Error err = NULL;
  int res = dwarf_attr(die, at, &attr, &err);
  if (res == DW_DLV_ERROR) die_fail("dwarf_attr", err);
  if (res != DW_DLV_OK) return NULL;
  Dwarf_Off off = 0;
  res = dwarf_global_formref(attr, &off, &err);
  dwarf_dealloc_attribute(attr);
  if (res != DW_DLV_OK) die_fail("dwarf_global_formref", err);
  Dwarf_Die target = NULL;
  if (dwarf_offdie_b(dbg, off, 1, &target, &err) != DW_DLV_OK) die_fail("dwarf_offdie_b", err);
  return target;
}

/// First `at1`/`at2` string found on `die` or along abstract_origin/specification (bounded).
static const char* chained_str(Dwarf_Die die, Dwarf_Half at1, Dwarf_Half at2) {
  Dwarf_Die cur = die;
  const char* found = NULL;
  for (int hop = 0; hop < kMaxRefHops && cur && !found; hop++) {
    found = str_attr(cur, at1);
    if (!found && at2) found = str_attr(cur, at2);
    Dwarf_Die next = NULL;
    if (!found) {
      next = ref_attr(cur, DW_AT_abstract_origin);
      if (!next) next = ref_attr(cur, DW_AT_specification);
    }
    if (cur != die) dwarf_dealloc_die(cur);
    cur = next;
  }
  if (cur && cur != die) dwarf_dealloc_die(cur);
  return found;
}

/// Appends the DIE's address ranges to `buf` ("lo-hi,..."); returns how many.
static int die_ranges(Dwarf_Die die, int version, Dwarf_Addr cu_base, char* buf, size_t cap) {
  Dwarf_Error err = NULL;
  size_t used = 0;
  int n = 0;
  buf[0] = 0;
#define ADD_RANGE(lo, hi)                                                                                 \
  do {                                                                                                   \
    if ((hi) > (lo) && used + 48 < cap) {                                                                \
      used += (size_t)snprintf(buf + used, cap - used, "%s%llx-%llx", n ? "," : "", (unsigned long long)(lo), \
                               (unsigned long long)(hi));                                                \
      n++;                                                                                               \
    }                                                                                                    \
  } while (0)
  Dwarf_Addr lo = 0, hi = 0;
  Dwarf_Half form = 0;
  enum Dwarf_Form_Class cls;
  // low_pc + high_pc; a CU may have low_pc (the base, often 0) with DW_AT_ranges instead.
  if (dwarf_lowpc(die, &lo, &err) == DW_DLV_OK && dwarf_highpc_b(die, &hi, &form, &cls, &err) == DW_DLV_OK) {
    if (cls == DW_FORM_CLASS_CONSTANT) hi += lo;
    ADD_RANGE(lo, hi);
    return n;
  }
  Dwarf_Attribute attr;
  if (dwarf_attr(die, DW_AT_ranges, &attr, &err) != DW_DLV_OK) return 0;
  if (dwarf_whatform(attr, &form, &err) != DW_DLV_OK) die_fail("dwarf_whatform", err);
  Dwarf_Unsigned val = 0;
  int res = form == DW_FORM_rnglistx ? dwarf_formudata(attr, &val, &err)
                                     : dwarf_global_formref(attr, (Dwarf_Off*)&val, &err);
  if (res != DW_DLV_OK) die_fail("DW_AT_ranges value", err);
  if (version >= 5) {
    Dwarf_Rnglists_Head head = 0;
    Dwarf_Unsigned count = 0, global_off = 0;
    if (dwarf_rnglists_get_rle_head(attr, form, val, &head, &count, &global_off, &err) != DW_DLV_OK)
      die_fail("dwarf_rnglists_get_rle_head", err);
    for (Dwarf_Unsigned i = 0; i < count; i++) {
      unsigned len = 0, code = 0;
      Dwarf_Unsigned raw1, raw2, c1, c2;
      Dwarf_Bool unavailable = 0;
      if (dwarf_get_rnglists_entry_fields_a(head, i, &len, &code, &raw1, &raw2, &unavailable, &c1, &c2, &err) !=
          DW_DLV_OK)
        die_fail("dwarf_get_rnglists_entry_fields_a", err);
      if (code == DW_RLE_end_of_list || code == DW_RLE_base_address || code == DW_RLE_base_addressx) continue;
      if (unavailable) die_fail("rnglist entry needs .debug_addr", NULL);
      ADD_RANGE(c1, c2);
    }
    dwarf_dealloc_rnglists_head(head);
  } else {
    Dwarf_Ranges* rs = NULL;
    Dwarf_Signed cnt = 0;
    Dwarf_Unsigned bytes = 0;
    Dwarf_Off real = 0;
    if (dwarf_get_ranges_b(dbg, (Dwarf_Off)val, die, &real, &rs, &cnt, &bytes, &err) != DW_DLV_OK)
      die_fail("dwarf_get_ranges_b", err);
    Dwarf_Addr base = cu_base;
    for (Dwarf_Signed i = 0; i < cnt; i++) {
      if (rs[i].dwr_type == DW_RANGES_END) break;
      if (rs[i].dwr_type == DW_RANGES_ADDRESS_SELECTION) {
        base = rs[i].dwr_addr2;
        continue;
      }
      ADD_RANGE(base + rs[i].dwr_addr1, base + rs[i].dwr_addr2);
    }
    dwarf_ranges_dealloc(dbg, rs, cnt);
  }
  dwarf_dealloc_attribute(attr);
#undef ADD_RANGE
  return n;
}

struct Cu {
  int version;
  Dwarf_Addr base;
  char** files;
  Dwarf_Signed nfiles;
};

static const char* file_name(const struct Cu* cu, Dwarf_Unsigned idx) {
  // DWARF 5 file indexes start at 0, earlier versions at 1 (0 = none).
  Dwarf_Signed i = cu->version >= 5 ? (Dwarf_Signed)idx : (Dwarf_Signed)idx - 1;
  return i >= 0 && i < cu->nfiles ? cu->files[i] : "";
}

static void walk(Dwarf_Die die, const struct Cu* cu, int fdepth, int level) {
  if (level > kMaxDieDepth) die_fail("DIE tree deeper than the limit", NULL);
  Dwarf_Error err = NULL;
  Dwarf_Half tag = 0;
  if (dwarf_tag(die, &tag, &err) != DW_DLV_OK) die_fail("dwarf_tag", err);
  int child_fdepth = fdepth;
  if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
    const int depth = tag == DW_TAG_subprogram ? 0 : fdepth + 1;
    child_fdepth = depth;
    char ranges[16384];
    if (die_ranges(die, cu->version, cu->base, ranges, sizeof ranges) > 0) {
      const char* name = chained_str(die, DW_AT_linkage_name, DW_AT_MIPS_linkage_name);
      if (!name) name = chained_str(die, DW_AT_name, 0);
      Dwarf_Unsigned cf = 0, cl = 0, cc = 0;
      const int has_cf = udata_attr(die, DW_AT_call_file, &cf);
      udata_attr(die, DW_AT_call_line, &cl);
      udata_attr(die, DW_AT_call_column, &cc);
      printf("D\t%d\t%s\t%s\t%s\t%llu\t%llu\t%s\n", depth, tag == DW_TAG_subprogram ? "subprogram" : "inlined",
             name ? name : "", has_cf ? file_name(cu, cf) : "", (unsigned long long)cl, (unsigned long long)cc,
             ranges);
    }
  }
  Dwarf_Die child = NULL;
  int res = dwarf_child(die, &child, &err);
  if (res == DW_DLV_ERROR) die_fail("dwarf_child", err);
  while (res == DW_DLV_OK) {
    walk(child, cu, child_fdepth, level + 1);
    Dwarf_Die sib = NULL;
    res = dwarf_siblingof_b(dbg, child, 1, &sib, &err);
    if (res == DW_DLV_ERROR) die_fail("dwarf_siblingof_b", err);
    dwarf_dealloc_die(child);
    child = sib;
  }
}

static void lines(Dwarf_Die cu_die, const struct Cu* cu) {
  Dwarf_Error err = NULL;
  Dwarf_Unsigned version = 0;
  Dwarf_Small count = 0;
  Dwarf_Line_Context ctx = 0;
  int res = dwarf_srclines_b(cu_die, &version, &count, &ctx, &err);
  if (res == DW_DLV_NO_ENTRY) return;
  if (res != DW_DLV_OK) die_fail("dwarf_srclines_b", err);
  Dwarf_Line* ls = NULL;
  Dwarf_Signed n = 0;
  if (dwarf_srclines_from_linecontext(ctx, &ls, &n, &err) != DW_DLV_OK) die_fail("dwarf_srclines_from_linecontext", err);
  for (Dwarf_Signed i = 0; i < n; i++) {
    Dwarf_Addr addr = 0;
    Dwarf_Unsigned line = 0, col = 0;
    Dwarf_Bool end = 0;
    if (dwarf_lineaddr(ls[i], &addr, &err) != DW_DLV_OK || dwarf_lineno(ls[i], &line, &err) != DW_DLV_OK ||
        dwarf_lineoff_b(ls[i], &col, &err) != DW_DLV_OK || dwarf_lineendsequence(ls[i], &end, &err) != DW_DLV_OK)
      die_fail("line row", err);
    // The file through the row's file index and dwarf_srcfiles, as for DW_AT_call_file. This
    // libdwarf (20210528) starts a DWARF 5 line program's file register at 0, not 1 (DWARF 5
    // 6.2.2): rows before the first DW_LNS_set_file report file 0. Such rows carry <alt>, the
    // name of file 1, for the test to tell that case (exceptions.txt).
    Dwarf_Unsigned fileno = 0;
    if (dwarf_line_srcfileno(ls[i], &fileno, &err) != DW_DLV_OK) die_fail("dwarf_line_srcfileno", err);
    const char* alt = cu->version >= 5 && fileno == 0 ? file_name(cu, 1) : "";
    printf("L\t%llx\t%s\t%llu\t%llu\t%d\t%s\n", (unsigned long long)addr, file_name(cu, fileno),
           (unsigned long long)line, (unsigned long long)col, end ? 1 : 0, alt);
  }
  dwarf_srclines_dealloc_b(ctx);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dwarf_facts ELF\n");
    return 2;
  }
  Dwarf_Error err = NULL;
  if (dwarf_init_path(argv[1], NULL, 0, DW_DLC_READ, DW_GROUPNUMBER_ANY, NULL, NULL, &dbg, NULL, 0, NULL, &err) !=
      DW_DLV_OK)
    die_fail(argv[1], err);
  for (;;) {
    Dwarf_Unsigned hlen = 0, typeoff = 0, next = 0;
    Dwarf_Half version = 0, asize = 0, lsize = 0, esize = 0, cutype = 0;
    Dwarf_Off abbrev = 0;
    Dwarf_Sig8 sig;
    int res = dwarf_next_cu_header_d(dbg, 1, &hlen, &version, &abbrev, &asize, &lsize, &esize, &sig, &typeoff, &next,
                                     &cutype, &err);
    if (res == DW_DLV_NO_ENTRY) break;
    if (res != DW_DLV_OK) die_fail("dwarf_next_cu_header_d", err);
    Dwarf_Die cu_die = NULL;
    if (dwarf_siblingof_b(dbg, NULL, 1, &cu_die, &err) != DW_DLV_OK) die_fail("CU DIE", err);
    struct Cu cu = {version, 0, NULL, 0};
    Dwarf_Addr lo = 0;
    if (dwarf_lowpc(cu_die, &lo, &err) == DW_DLV_OK) cu.base = lo;
    res = dwarf_srcfiles(cu_die, &cu.files, &cu.nfiles, &err);
    if (res == DW_DLV_ERROR) die_fail("dwarf_srcfiles", err);
    char ranges[65536];
    if (die_ranges(cu_die, cu.version, 0, ranges, sizeof ranges) > 0) printf("C\t%s\n", ranges);
    walk(cu_die, &cu, 0, 0);
    lines(cu_die, &cu);
    for (Dwarf_Signed i = 0; i < cu.nfiles; i++) dwarf_dealloc(dbg, cu.files[i], DW_DLA_STRING);
    if (cu.files) dwarf_dealloc(dbg, cu.files, DW_DLA_LIST);
    dwarf_dealloc_die(cu_die);
  }
  dwarf_finish(dbg, &err);
  return 0;
}
