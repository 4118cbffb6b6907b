/* SPDX-License-Identifier: Apache-2.0 */
/* stackprov's own error codes, generated with their messages from one X-macro. */
#ifndef STACKPROV_ERRORS_H
#define STACKPROV_ERRORS_H

/*
 * SPROV_ERRORS(X): X(NAME, value, "message"). Values start at -4000 and go down.
 * Values are never reused or renumbered; retired codes keep their slot.
 * Blocks: -4000..-4099 general, -4100..-4199 object files and debug info,
 * -4200..-4299 unwinding and capture, -4300..-4399 evidence (bundles, DSSE, logs),
 * -4400..-4499 traces.
 */
#define SPROV_ERRORS(X)                                                              \
  X(SPROV_ERR_INVALID_ARG, -4000, "invalid argument")                               \
  X(SPROV_ERR_OPTS_TAIL, -4001, "options struct has unknown non-zero tail bytes")   \
  X(SPROV_ERR_NOMEM, -4002, "out of memory")                                        \
  X(SPROV_ERR_INTERNAL, -4003, "internal error")                                    \
  X(SPROV_ERR_UNSUPPORTED, -4004, "not supported on this build or platform")        \
  X(SPROV_ERR_NOT_FOUND, -4005, "not found")                                        \
  X(SPROV_ERR_BUFFER_TOO_SMALL, -4006, "buffer too small")                          \
  X(SPROV_ERR_IO, -4007, "input/output error")                                      \
  X(SPROV_ERR_BAD_FORMAT, -4008, "malformed input")                                 \
  X(SPROV_ERR_TRUNCATED, -4009, "input truncated")                                  \
  X(SPROV_ERR_LIMIT, -4010, "input exceeds a configured limit")                     \
  X(SPROV_ERR_ELF, -4100, "malformed or unsupported ELF file")                      \
  X(SPROV_ERR_NO_SECTION, -4101, "section not present")                             \
  X(SPROV_ERR_DECOMPRESS, -4102, "section decompression failed")                    \
  X(SPROV_ERR_BUILD_ID_MISMATCH, -4103, "build-id mismatch")                        \
  X(SPROV_ERR_DWARF, -4104, "malformed DWARF")                                      \
  X(SPROV_ERR_CFI, -4105, "malformed call frame information")                       \
  X(SPROV_ERR_DWARF_EXPR, -4106, "DWARF expression could not be evaluated")         \
  X(SPROV_ERR_DEBUGLINK_CRC, -4107, "debuglink CRC mismatch")                       \
  X(SPROV_ERR_NO_SYMBOL, -4108, "no symbol covers the address")                     \
  X(SPROV_ERR_ARCH_MISMATCH, -4200, "architecture mismatch")                        \
  X(SPROV_ERR_MEMORY_UNREADABLE, -4201, "target memory unreadable")                 \
  X(SPROV_ERR_SNAPSHOT, -4202, "malformed snapshot")                                \
  X(SPROV_ERR_NO_MODULE, -4203, "address not inside any known module")              \
  X(SPROV_ERR_CAPTURE, -4204, "capture failed")                                     \
  X(SPROV_ERR_BUNDLE, -4300, "malformed bundle")                                    \
  X(SPROV_ERR_SIGNATURE, -4301, "signature verification failed")                    \
  X(SPROV_ERR_DIGEST_MISMATCH, -4302, "digest mismatch")                            \
  X(SPROV_ERR_KEY, -4303, "bad or unsupported key")                                 \
  X(SPROV_ERR_PROOF, -4304, "proof verification failed")                            \
  X(SPROV_ERR_CHECKPOINT, -4305, "checkpoint verification failed")                  \
  X(SPROV_ERR_LOG, -4306, "transparency log error")                                 \
  X(SPROV_ERR_BASE64, -4307, "invalid base64")                                      \
  X(SPROV_ERR_JSON, -4308, "invalid JSON")                                          \
  X(SPROV_ERR_POLICY, -4309, "verification policy not satisfied")

enum sprov_error {
#define SPROV_X_ENUM(name, value, msg) name = (value),
  SPROV_ERRORS(SPROV_X_ENUM)
#undef SPROV_X_ENUM
};

#endif /* STACKPROV_ERRORS_H */
