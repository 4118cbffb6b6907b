/* SPDX-License-Identifier: Apache-2.0 */
/* ABI test compiled as C11: older/smaller and newer/larger option structs, errors, names. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stackprov/stackprov.h"
#include "stackprov/bundle.h"
#include "stackprov/fast.h"
#include "stackprov/kernel.h"
#include "stackprov/perf.h"
#include "stackprov/symbol_bundle.h"
#include "stackprov/trace.h"

static int failures = 0;
#define EXPECT(cond)                                              \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                 \
    }                                                             \
  } while (0)

/* What sprov_unwinder_opts looked like in an imagined older release: max_frames and flags.
 * An older struct has no tail padding either (the rule checked below): with only max_frames,
 * sz would be 16 and bytes 12..15, uninitialised padding, would be read as `flags` (CI saw
 * "unknown unwinder flags" from stack garbage when this test declared such a struct). */
struct sprov_unwinder_opts_v0 {
  size_t sz;
  uint32_t max_frames;
  uint32_t flags;
};

/* Every options struct ends at its last field: no tail padding, so every byte a caller's sz
 * covers is a field the caller initialised (SPROV_OPTS in C need not zero padding). */
#define SPROV_NO_TAIL_PADDING(T)                                                        \
  _Static_assert(sizeof(struct T) == offsetof(struct T, T##__last_field) +              \
                                         sizeof(((struct T*)0)->T##__last_field),       \
                 #T " has tail padding: add an explicit reserved field")
SPROV_NO_TAIL_PADDING(sprov_profile_open_opts);
SPROV_NO_TAIL_PADDING(sprov_record_opts);
SPROV_NO_TAIL_PADDING(sprov_context_opts);
SPROV_NO_TAIL_PADDING(sprov_capture_opts);
SPROV_NO_TAIL_PADDING(sprov_process_opts);
SPROV_NO_TAIL_PADDING(sprov_unwinder_opts);
SPROV_NO_TAIL_PADDING(sprov_symbolizer_opts);
SPROV_NO_TAIL_PADDING(sprov_sign_opts);
SPROV_NO_TAIL_PADDING(sprov_dsse_verify_opts);
SPROV_NO_TAIL_PADDING(sprov_sigstore_opts);
SPROV_NO_TAIL_PADDING(sprov_trace_verify_opts);
SPROV_NO_TAIL_PADDING(sprov_bundle_build_opts);
SPROV_NO_TAIL_PADDING(sprov_bundle_module);
SPROV_NO_TAIL_PADDING(sprov_bundle_sign_opts);
SPROV_NO_TAIL_PADDING(sprov_address_space_opts);
SPROV_NO_TAIL_PADDING(sprov_mapping);
SPROV_NO_TAIL_PADDING(sprov_raw_input);
SPROV_NO_TAIL_PADDING(sprov_trace_capture_opts);
SPROV_NO_TAIL_PADDING(sprov_trace_resolve_opts);
SPROV_NO_TAIL_PADDING(sprov_trace_replay_opts);


/* A caller built against an imagined newer release with one more field. */
struct sprov_unwinder_opts_next {
  struct sprov_unwinder_opts cur;
  uint64_t future_field;
};

static __attribute__((noinline)) int capture_and_count(sprov_context* ctx, sprov_unwinder* uw, size_t* frames) {
  sprov_snapshot* snap = NULL;
  int err = sprov_snapshot_capture_self(ctx, NULL, &snap);
  if (err) return err;
  sprov_stack* st = NULL;
  err = sprov_unwinder_unwind(uw, snap, &st);
  if (!err) {
    *frames = sprov_stack_frame_count(st);
    sprov_stack_free(st);
  }
  sprov_snapshot_free(snap);
  return err;
}

/* sprov_bundle_build_opts as an older release might have had it: names only. */
struct sprov_bundle_build_opts_v0 {
  size_t sz;
  const char* const* names;
};

/* The bundle ABI: an older (smaller) and a newer (larger, non-zero tail) options struct;
 * the digest agrees with the bytes the bundle reports; lookups and modules by index. */
static void bundle_abi(void) {
  const char* self = "/proc/self/exe";
  const char* names[1] = {"abi-self"};
  struct sprov_bundle_build_opts_v0 old = {sizeof old, names};
  void* bytes = NULL;
  size_t len = 0;
  char digest[SPROV_DIGEST_STRLEN];
  int rc = sprov_bundle_build(&self, 1, (const struct sprov_bundle_build_opts*)&old, &bytes, &len, digest, sizeof digest);
  EXPECT(rc == 0);
  if (rc != 0) {
    fprintf(stderr, "sprov_bundle_build: %s\n", sprov_last_error_message());
    return;
  }
  EXPECT(strncmp(digest, "sha256:", 7) == 0 && strlen(digest) == 71);
  sprov_bundle* b = NULL;
  EXPECT(sprov_bundle_open_buf(bytes, len, &b) == 0);
  if (b) {
    char d2[SPROV_DIGEST_STRLEN];
    EXPECT(sprov_bundle_digest(b, d2, sizeof d2) == 0 && strcmp(d2, digest) == 0);
    EXPECT(sprov_bundle_size(b) == len);
    EXPECT(sprov_bundle_module_count(b) == 1);
    SPROV_OPTS(sprov_bundle_module, m);
    EXPECT(sprov_bundle_module_info(b, 0, &m) == 0 && strcmp(m.name, "abi-self") == 0);
    EXPECT(m.id_kind == SPROV_BUNDLE_ID_ELF_BUILD_ID && strlen(m.id_hex) == 2 * m.id_len);
    size_t idx = 99;
    EXPECT(sprov_bundle_find_module(b, SPROV_BUNDLE_ID_ELF_BUILD_ID, m.id_hex, &idx) == 0 && idx == 0);
    EXPECT(sprov_bundle_module_info(b, 1, &m) == SPROV_ERR_INVALID_ARG);
    sprov_bundle_free(b);
  }
  /* The same build into a file: the same digest, and the file opens to the same bundle. */
  char d3[SPROV_DIGEST_STRLEN];
  const char* out_path = "abi_c11_self.sbundle";
  EXPECT(sprov_bundle_build_file(&self, 1, (const struct sprov_bundle_build_opts*)&old, out_path, d3, sizeof d3) == 0);
  EXPECT(strcmp(d3, digest) == 0);
  b = NULL;
  EXPECT(sprov_bundle_open_file(out_path, &b) == 0);
  if (b) {
    char d4[SPROV_DIGEST_STRLEN];
    EXPECT(sprov_bundle_digest(b, d4, sizeof d4) == 0 && strcmp(d4, digest) == 0);
    sprov_bundle_free(b);
  }
  remove(out_path);
  sprov_free(bytes);
  struct {
    struct sprov_bundle_build_opts cur;
    uint64_t future_field;
  } next;
  memset(&next, 0, sizeof next);
  next.cur.sz = sizeof next;
  next.future_field = 1;
  EXPECT(sprov_bundle_build(&self, 1, &next.cur, &bytes, &len, NULL, 0) == SPROV_ERR_OPTS_TAIL);
  EXPECT(strcmp(sprov_bundle_id_kind_name(SPROV_BUNDLE_ID_MACHO_UUID), "macho-uuid") == 0);
  EXPECT(strcmp(sprov_bundle_id_kind_name(SPROV_BUNDLE_ID_PE_CODE_ID), "pe-code-id") == 0);
  EXPECT(SPROV_ID_PE_CODE_ID == 4 && SPROV_BUNDLE_ID_PE_CODE_ID == 4);
  EXPECT(strcmp(sprov_bundle_id_kind_name(5), "unknown") == 0);
}

/* Identity keys (issues 33, 34): kind names, the PDB symbol-server key and the Mach-O UUID text to
 * and from the bytes. The PDB values: llvm-readobj-14 prints PDBGUID (1E 10 45 FF 5C BA 07 4A 4C 4C
 * 44 20 50 44 42 2E), PDBAge 1 for a fixture; its key is Data1 FF45101E, Data2 BA5C, Data3 4A07, Data4
 * 4C4C44205044422E, age 1 (the layout of a symbol store's NAME.pdb/KEY/NAME.pdb). */
static void id_key_abi(void) {
  int kind = 0;
  char* out = NULL;
  size_t len = 0;
  EXPECT(sprov_bundle_id_kind_parse("pdb-guid-age", &kind) == 0 && kind == SPROV_BUNDLE_ID_PDB_GUID_AGE);
  EXPECT(sprov_bundle_id_kind_parse("pdb", &kind) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "'pdb'") != NULL);
  EXPECT(sprov_id_key(SPROV_BUNDLE_ID_PDB_GUID_AGE, "1e1045ff5cba074a4c4c44205044422e01000000", &out, &len) == 0);
  EXPECT(out && strcmp(out, "FF45101EBA5C4A074C4C44205044422E1") == 0 && len == 33);
  sprov_free(out);
  EXPECT(sprov_id_from_key(SPROV_BUNDLE_ID_PDB_GUID_AGE, "ff45101eba5c4a074c4c44205044422e1", &out, &len) == 0);
  EXPECT(out && strcmp(out, "1e1045ff5cba074a4c4c44205044422e01000000") == 0 && len == 40);
  sprov_free(out);
  EXPECT(sprov_id_from_key(SPROV_BUNDLE_ID_PDB_GUID_AGE, "FF45101E", &out, &len) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "'FF45101E'") != NULL);
  EXPECT(sprov_id_key(SPROV_BUNDLE_ID_MACHO_UUID, "4c4c44ea55553144a129f8c17d330f3b", &out, &len) == 0);
  EXPECT(out && strcmp(out, "4C4C44EA-5555-3144-A129-F8C17D330F3B") == 0);
  sprov_free(out);
  EXPECT(sprov_id_from_key(SPROV_BUNDLE_ID_MACHO_UUID, "4C4C44EA-5555-3144-A129-F8C17D330F3B", &out, &len) == 0);
  EXPECT(out && strcmp(out, "4c4c44ea55553144a129f8c17d330f3b") == 0);
  sprov_free(out);
  EXPECT(sprov_id_from_key(SPROV_BUNDLE_ID_MACHO_UUID, "4C4C44EA+5555-3144-A129-F8C17D330F3B", &out, &len) ==
         SPROV_ERR_INVALID_ARG);
  EXPECT(sprov_id_key(SPROV_BUNDLE_ID_MACHO_UUID, "deadbeef", &out, &len) == SPROV_ERR_INVALID_ARG);
  EXPECT(sprov_id_from_key(SPROV_BUNDLE_ID_ELF_BUILD_ID, "DEADBEEF", &out, &len) == 0 && strcmp(out, "deadbeef") == 0);
  sprov_free(out);
  EXPECT(sprov_id_from_key(7, "00", &out, &len) == SPROV_ERR_INVALID_ARG);
}

/* Module identities of every kind (issue 32): sprov_module_info.id_kind/id/id_len in and out,
 * build_id only for an ELF build-id, the kind kept through serialization and on frames. */
static void identity_abi(void) {
  static const uint8_t guid_age[20] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
                                       0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x02, 0x00, 0x00, 0x00};
  static const uint8_t elf_id[4] = {0xde, 0xad, 0xbe, 0xef};
  _Static_assert((int)SPROV_ID_PDB_GUID_AGE == (int)SPROV_BUNDLE_ID_PDB_GUID_AGE, "id kinds are the bundle's");
  sprov_snapshot* snap = NULL;
  EXPECT(sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &snap) == 0);
  struct sprov_module_info pe = {.sz = sizeof pe, .start = 0x140000000, .end = 0x140010000, .path = "app.exe",
                                 .id_kind = SPROV_ID_PDB_GUID_AGE, .id_len = 20, .id = guid_age};
  EXPECT(sprov_snapshot_add_module(snap, &pe) == 0);
  /* A caller built before the identity fields (sz ends at flags) adds an ELF build-id. */
  struct sprov_module_info elf = {.sz = offsetof(struct sprov_module_info, id_kind), .start = 0x1000,
                                  .end = 0x2000, .path = "/nonexistent/lib.so", .build_id = elf_id,
                                  .build_id_len = 4, .id_kind = 99};
  EXPECT(sprov_snapshot_add_module(snap, &elf) == 0);
  /* Bad identities are refused, naming the value. */
  struct sprov_module_info bad = pe;
  bad.start = 0x50000;
  bad.end = 0x60000;
  bad.id_kind = 7;
  EXPECT(sprov_snapshot_add_module(snap, &bad) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "id_kind 7") != NULL);
  bad.id_kind = SPROV_ID_MACHO_UUID;
  bad.id_len = 65;
  EXPECT(sprov_snapshot_add_module(snap, &bad) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "65 bytes") != NULL);
  bad.id_len = 16;
  bad.build_id = elf_id;
  bad.build_id_len = 4;
  EXPECT(sprov_snapshot_add_module(snap, &bad) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "deadbeef") != NULL);
  bad.build_id = NULL;
  bad.build_id_len = 0;
  bad.id_kind = SPROV_ID_NONE;
  EXPECT(sprov_snapshot_add_module(snap, &bad) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "SPROV_ID_NONE") != NULL);
  EXPECT(sprov_snapshot_module_count(snap) == 2);

  /* Out, also after a serialization round trip (version 2: a PDB identity is not an ELF one). */
  void* buf = NULL;
  size_t len = 0;
  EXPECT(sprov_snapshot_serialize(snap, &buf, &len) == 0);
  EXPECT(len > 12 && ((const uint8_t*)buf)[8] == 2);
  sprov_snapshot* back = NULL;
  EXPECT(sprov_snapshot_deserialize(buf, len, &back) == 0);
  sprov_free(buf);
  for (int round = 0; round < 2; round++) {
    const sprov_snapshot* s = round ? back : snap;
    struct sprov_module_info m = {.sz = sizeof m};
    EXPECT(sprov_snapshot_module(s, 1, &m) == 0); /* sorted by start: the PE module second */
    EXPECT(m.id_kind == SPROV_ID_PDB_GUID_AGE && m.id_len == 20 && memcmp(m.id, guid_age, 20) == 0);
    EXPECT(m.build_id == NULL && m.build_id_len == 0);
    EXPECT(sprov_snapshot_module(s, 0, &m) == 0);
    EXPECT(m.id_kind == SPROV_ID_ELF_BUILD_ID && m.id_len == 4 && memcmp(m.id, elf_id, 4) == 0);
    EXPECT(m.build_id_len == 4 && memcmp(m.build_id, elf_id, 4) == 0);
  }
  /* A frame in the PE module carries its identity. */
  EXPECT(sprov_snapshot_set_reg(back, 16, 0x140000100) == 0);
  EXPECT(sprov_snapshot_set_reg(back, 7, 0x7000) == 0);
  sprov_context* ctx = NULL;
  EXPECT(sprov_context_new(NULL, &ctx) == 0);
  sprov_unwinder* uw = NULL;
  EXPECT(sprov_unwinder_new(ctx, NULL, &uw) == 0);
  sprov_stack* st = NULL;
  EXPECT(sprov_unwinder_unwind(uw, back, &st) == 0);
  struct sprov_frame fr = {.sz = sizeof fr};
  EXPECT(sprov_stack_frame(st, 0, &fr) == 0);
  EXPECT(fr.module_index == 1 && fr.id_kind == SPROV_ID_PDB_GUID_AGE && fr.module_id_len == 20);
  EXPECT(fr.module_id != NULL && memcmp(fr.module_id, guid_age, 20) == 0);
  EXPECT(fr.build_id == NULL && fr.build_id_len == 0);
  sprov_stack_free(st);
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
  sprov_snapshot_free(back);
  sprov_snapshot_free(snap);
}

int main(void) {
  identity_abi();
  id_key_abi();
  bundle_abi();
  EXPECT(strcmp(sprov_version(), SPROV_VERSION_STRING) == 0);
  EXPECT(sprov_version_number() == SPROV_VERSION_NUMBER);
  EXPECT(strcmp(sprov_strerror(SPROV_ERR_OPTS_TAIL), "options struct has unknown non-zero tail bytes") == 0);
  EXPECT(strcmp(sprov_strerror(-2), "No such file or directory") == 0);
  EXPECT(strcmp(sprov_method_name(SPROV_METHOD_CFI_EH_FRAME), "cfi_eh_frame") == 0);
  EXPECT(strcmp(sprov_stop_reason_name(SPROV_STOP_SP_NOT_ADVANCING), "sp_not_advancing") == 0);
  EXPECT(strcmp(sprov_method_name(SPROV_METHOD_RUNTIME), "runtime") == 0);
  /* Tail-call frames and per-frame registers (issue 36). */
  EXPECT(SPROV_METHOD_TAIL_CALL == 16 && SPROV_RUNG_INFERRED == 8 && SPROV_FRAME_INFERRED == 8u);
  EXPECT(strcmp(sprov_method_name(SPROV_METHOD_TAIL_CALL), "tail_call") == 0);
  EXPECT(sprov_method_rung(SPROV_METHOD_TAIL_CALL) == SPROV_RUNG_INFERRED);
  EXPECT(strcmp(sprov_rung_name(SPROV_RUNG_INFERRED), "inferred") == 0);
  EXPECT(strcmp(sprov_register_name(SPROV_ARCH_X86_64, 16), "rip") == 0);
  EXPECT(sprov_register_name(SPROV_ARCH_X86_64, 17) == NULL && sprov_register_name(SPROV_ARCH_UNKNOWN, 0) == NULL);
  {
    sprov_stack* with = NULL;
    uint64_t v[4], known = 0;
    EXPECT(sprov_symbolizer_tail_calls(NULL, NULL, &with) == SPROV_ERR_INVALID_ARG && with == NULL);
    EXPECT(sprov_stack_frame_registers(NULL, 0, v, 4, &known) == SPROV_ERR_INVALID_ARG);
    char* text = (char*)1;
    EXPECT(sprov_stack_render(NULL, NULL, NULL, &text, NULL) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_trace_render(NULL, 0, 0, &text, NULL) == SPROV_ERR_INVALID_ARG);
    size_t nargs = 7;
    struct sprov_frame_arg arg = {0};
    arg.sz = sizeof(arg);
    EXPECT(sprov_symbolizer_frame_args(NULL, NULL, NULL, 0, &nargs) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_symbolizer_frame_arg(NULL, 0, &arg) == SPROV_ERR_INVALID_ARG);
    EXPECT(SPROV_ARG_VALUE == 0 && SPROV_ARG_OPTIMIZED_OUT == 1 && SPROV_ARG_UNKNOWN == 2);
  }
  EXPECT(SPROV_METHOD_ASYNC_BOUNDARY == 17 && SPROV_FRAME_ASYNC_AWAITER == 16u);
  EXPECT(strcmp(sprov_method_name(SPROV_METHOD_ASYNC_BOUNDARY), "async_boundary") == 0);
  EXPECT(sprov_method_rung(SPROV_METHOD_ASYNC_BOUNDARY) == SPROV_RUNG_EXTERNAL);
  EXPECT(SPROV_METHOD_KERNEL_STACK == 18 && SPROV_PROCESS_KERNEL_STACKS == 2u && SPROV_KSTACK_STALE == 4);
  EXPECT(strcmp(sprov_method_name(SPROV_METHOD_KERNEL_STACK), "kernel_stack") == 0);
  EXPECT(sprov_method_rung(SPROV_METHOD_KERNEL_STACK) == SPROV_RUNG_EXTERNAL);
  {
    /* stack --kernel: NULL handles are errors, not crashes; an unknown opts tail is refused. */
    sprov_stack* merged = (sprov_stack*)1;
    struct sprov_kernel_stack_info ki;
    struct sprov_kernel_frame kf;
    memset(&ki, 0, sizeof ki);
    memset(&kf, 0, sizeof kf);
    ki.sz = sizeof ki;
    kf.sz = sizeof kf;
    EXPECT(sprov_process_kernel_stack(NULL, 0, NULL, &merged) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_stack_kernel_info(NULL, &ki) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_stack_kernel_frame(NULL, 0, &kf) == SPROV_ERR_INVALID_ARG);
    struct sprov_kernel_prototype kp;
    memset(&kp, 0, sizeof kp);
    kp.sz = sizeof kp;
    sprov_kernel_btf* btf = (sprov_kernel_btf*)1;
    EXPECT(sprov_kernel_btf_open(NULL, NULL) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_kernel_btf_lookup(NULL, "do_nanosleep", &kp) == SPROV_ERR_INVALID_ARG);
    /* A file that is not BTF: an error (or UNSUPPORTED without libbpf), never a handle. */
    EXPECT(sprov_kernel_btf_open("/dev/null", &btf) != 0 && btf == NULL);
    sprov_kernel_btf_free(NULL);
  }
  EXPECT(strcmp(sprov_stop_reason_name(SPROV_STOP_COROUTINE_ENTRY), "coroutine_entry") == 0);
  {
    /* Async boundaries: NULL handles and arguments are errors, not crashes. */
    struct sprov_coroutine_link l;
    memset(&l, 0, sizeof l);
    l.sz = sizeof l;
    EXPECT(sprov_stack_coroutine_link_count(NULL) == 0);
    EXPECT(sprov_stack_coroutine_link(NULL, 0, &l) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_async_register_stack(NULL, 4096, &l) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_async_register_stack(&l, 0, &l) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_async_register_stack(&l, sizeof l, NULL) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_async_unregister_stack(&l) == SPROV_ERR_NOT_FOUND);
    EXPECT(sprov_async_set_thread_root_slot(NULL) == 0);
  }
  {
    /* Runtime frames: NULL handles are errors, not crashes. */
    struct sprov_runtime_frame rf;
    sprov_stack* merged = NULL;
    memset(&rf, 0, sizeof rf);
    rf.sz = sizeof rf;
    EXPECT(sprov_process_interleave(NULL, 0, NULL, SPROV_RUNTIME_INTERLEAVE, &merged) == SPROV_ERR_INVALID_ARG);
    EXPECT(merged == NULL);
    EXPECT(sprov_stack_runtime_frame(NULL, 0, &rf) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_process_runtime_frame(NULL, 0, 0, &rf) == SPROV_ERR_INVALID_ARG);
    EXPECT(sprov_process_runtime_frame_count(NULL, 0) == 0);
    EXPECT(strcmp(sprov_process_runtime(NULL), "") == 0);
    EXPECT(strcmp(sprov_process_runtime_thread_name(NULL, 0), "") == 0);
  }

  /* SPROV_OPTS is plain C11 (this file builds with -std=c11 -pedantic -Werror): sz is set, the
   * named fields hold their values and every other byte is zero, with or without named fields. */
  {
    SPROV_OPTS(sprov_unwinder_opts, none);
    SPROV_OPTS(sprov_context_opts, some, .log_level = SPROV_LOG_DEBUG, .sysroot = "/x");
    struct sprov_unwinder_opts zu;
    struct sprov_context_opts zc;
    memset(&zu, 0, sizeof zu);
    zu.sz = sizeof zu;
    memset(&zc, 0, sizeof zc);
    zc.sz = sizeof zc;
    zc.log_level = SPROV_LOG_DEBUG;
    zc.sysroot = some.sysroot;
    EXPECT(memcmp(&none, &zu, sizeof zu) == 0);
    EXPECT(memcmp(&some, &zc, sizeof zc) == 0);
  }

  sprov_context* ctx = NULL;
  SPROV_OPTS(sprov_context_opts, copts, .log_level = SPROV_LOG_ERROR);
  EXPECT(copts.sz == sizeof(struct sprov_context_opts));
  EXPECT(sprov_context_new(&copts, &ctx) == 0);
  if (!ctx) return 1;

  /* Older, smaller struct: accepted, missing fields take defaults. */
  struct sprov_unwinder_opts_v0 old = {sizeof(old), 3, 0};
  sprov_unwinder* uw = NULL;
  EXPECT(sprov_unwinder_new(ctx, (const struct sprov_unwinder_opts*)&old, &uw) == 0);
  size_t frames = 0;
  EXPECT(capture_and_count(ctx, uw, &frames) == 0);
  EXPECT(frames == 3); /* max_frames from the old struct is honoured */
  sprov_unwinder_free(uw);
  uw = NULL;

  /* Newer, larger struct with a zero tail: accepted. */
  struct sprov_unwinder_opts_next next;
  memset(&next, 0, sizeof(next));
  next.cur.sz = sizeof(next);
  EXPECT(sprov_unwinder_new(ctx, &next.cur, &uw) == 0);
  sprov_unwinder_free(uw);
  uw = NULL;

  /* Newer struct with a non-zero unknown field: rejected, last error names the byte. */
  next.future_field = 1;
  EXPECT(sprov_unwinder_new(ctx, &next.cur, &uw) == SPROV_ERR_OPTS_TAIL);
  EXPECT(uw == NULL);
  EXPECT(sprov_last_error() == SPROV_ERR_OPTS_TAIL);
  EXPECT(strstr(sprov_last_error_message(), "sprov_unwinder_opts") != NULL);
  /* The last error persists across successful calls. */
  EXPECT(sprov_version() != NULL);
  EXPECT(sprov_last_error() == SPROV_ERR_OPTS_TAIL);

  /* sz too small is rejected. */
  struct sprov_unwinder_opts tiny;
  memset(&tiny, 0, sizeof(tiny));
  tiny.sz = 2;
  EXPECT(sprov_unwinder_new(ctx, &tiny, &uw) == SPROV_ERR_INVALID_ARG);

  /* Bad values name the offending value. */
  SPROV_OPTS(sprov_unwinder_opts, big, .max_frames = 100000);
  EXPECT(sprov_unwinder_new(ctx, &big, &uw) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "100000") != NULL);

  SPROV_OPTS(sprov_context_opts, bad_root, .sysroot = "/nonexistent-sysroot-xyz");
  sprov_context* ctx2 = NULL;
  EXPECT(sprov_context_new(&bad_root, &ctx2) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "/nonexistent-sysroot-xyz") != NULL);

  SPROV_OPTS(sprov_context_opts, bad_res, .resolvers = "bundle,dwarfy");
  EXPECT(sprov_context_new(&bad_res, &ctx2) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "'dwarfy'") != NULL);
  SPROV_OPTS(sprov_context_opts, bad_flags, .flags = 0x80);
  EXPECT(sprov_context_new(&bad_flags, &ctx2) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "0x80") != NULL);

  /* Output structs: a caller with an older, smaller sprov_frame gets only its bytes. */
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = 16);
  EXPECT(sprov_unwinder_new(ctx, &uo, &uw) == 0);
  sprov_snapshot* snap = NULL;
  EXPECT(sprov_snapshot_capture_self(ctx, NULL, &snap) == 0);
  sprov_stack* st = NULL;
  EXPECT(sprov_unwinder_unwind(uw, snap, &st) == 0);
  struct {
    size_t sz;
    uint64_t pc;
    uint64_t canary;
  } small_frame;
  small_frame.sz = sizeof(size_t) + sizeof(uint64_t);
  small_frame.canary = 0xdeadbeefcafef00dull;
  EXPECT(sprov_stack_frame(st, 0, (struct sprov_frame*)&small_frame) == 0);
  EXPECT(small_frame.canary == 0xdeadbeefcafef00dull);
  uint64_t pc0 = 0;
  EXPECT(sprov_snapshot_reg(snap, 16, &pc0) == 0);
  EXPECT(small_frame.pc == pc0);
  EXPECT(sprov_stack_frame(st, 9999, (struct sprov_frame*)&small_frame) == SPROV_ERR_INVALID_ARG);
  EXPECT(strstr(sprov_last_error_message(), "9999") != NULL);

  /* Serialization round trip keeps registers and modules. */
  void* buf = NULL;
  size_t len = 0;
  EXPECT(sprov_snapshot_serialize(snap, &buf, &len) == 0);
  sprov_snapshot* snap2 = NULL;
  EXPECT(sprov_snapshot_deserialize(buf, len, &snap2) == 0);
  EXPECT(sprov_snapshot_module_count(snap2) == sprov_snapshot_module_count(snap));
  uint64_t pc1 = 0;
  EXPECT(sprov_snapshot_reg(snap2, 16, &pc1) == 0 && pc1 == pc0);
  /* Truncated input is rejected cleanly. */
  sprov_snapshot* snap3 = NULL;
  EXPECT(sprov_snapshot_deserialize(buf, len / 2, &snap3) == SPROV_ERR_SNAPSHOT);
  EXPECT(snap3 == NULL);
  sprov_free(buf);

  sprov_snapshot_free(snap2);
  sprov_stack_free(st);
  sprov_snapshot_free(snap);
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
  sprov_context_free(NULL);
  sprov_snapshot_free(NULL);

  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("abi_c11: all checks passed\n");
  return 0;
}
