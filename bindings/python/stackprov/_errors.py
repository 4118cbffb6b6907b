# SPDX-License-Identifier: Apache-2.0
"""stackprov.Error and its subclasses: one per family of C error codes (include/stackprov/errors.h)."""
import errno as _errno


class Error(Exception):
    """A failed library call: .code is the C error code (negative), .message the library's
    message, which names the offending value (path, pid, address, field)."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.message = message
        self.code = code


class InvalidArgumentError(Error, ValueError):
    """SPROV_ERR_INVALID_ARG, SPROV_ERR_OPTS_TAIL: a bad argument (also a ValueError)."""


class NotFoundError(Error, LookupError):
    """SPROV_ERR_NOT_FOUND, SPROV_ERR_NO_SECTION, SPROV_ERR_NO_SYMBOL, SPROV_ERR_NO_MODULE."""


class UnsupportedError(Error, NotImplementedError):
    """SPROV_ERR_UNSUPPORTED: not supported on this build or platform."""


class FormatError(Error):
    """Malformed or truncated input: BAD_FORMAT, TRUNCATED, LIMIT, ELF, DECOMPRESS, DWARF, CFI,
    DWARF_EXPR, BASE64, JSON."""


class SnapshotError(FormatError):
    """SPROV_ERR_SNAPSHOT: bytes that are not a snapshot (the message names the bad field)."""


class BuildIdMismatchError(Error):
    """SPROV_ERR_BUILD_ID_MISMATCH, SPROV_ERR_DEBUGLINK_CRC."""


class CaptureError(Error):
    """SPROV_ERR_CAPTURE, SPROV_ERR_MEMORY_UNREADABLE, SPROV_ERR_ARCH_MISMATCH."""


class VerificationError(Error):
    """Bundles and evidence: BUNDLE, SIGNATURE, DIGEST_MISMATCH, KEY, PROOF, CHECKPOINT, LOG, POLICY."""


class ProcessNotFoundError(Error, ProcessLookupError):
    """-ESRCH: no such process (also a ProcessLookupError)."""


class AccessDeniedError(Error, PermissionError):
    """-EPERM, -EACCES: e.g. no right to ptrace the target (also a PermissionError)."""


class FileMissingError(Error, FileNotFoundError):
    """-ENOENT: a file (core, module) does not exist (also a FileNotFoundError)."""


class SystemCallError(Error, OSError):
    """Another negative errno (also an OSError with .errno set)."""


for _c in (Error, InvalidArgumentError, NotFoundError, UnsupportedError, FormatError, SnapshotError,
           BuildIdMismatchError, CaptureError, VerificationError, ProcessNotFoundError, AccessDeniedError,
           FileMissingError, SystemCallError):
    _c.__module__ = "stackprov"  # shown as stackprov.ProcessNotFoundError in tracebacks

_BY_NAME = {
    "INVALID_ARG": InvalidArgumentError, "OPTS_TAIL": InvalidArgumentError,
    "NOMEM": Error, "INTERNAL": Error, "UNSUPPORTED": UnsupportedError,
    "NOT_FOUND": NotFoundError, "NO_SECTION": NotFoundError, "NO_SYMBOL": NotFoundError,
    "NO_MODULE": NotFoundError, "BUFFER_TOO_SMALL": Error, "IO": Error,
    "BAD_FORMAT": FormatError, "TRUNCATED": FormatError, "LIMIT": FormatError, "ELF": FormatError,
    "DECOMPRESS": FormatError, "DWARF": FormatError, "CFI": FormatError, "DWARF_EXPR": FormatError,
    "BASE64": FormatError, "JSON": FormatError, "SNAPSHOT": SnapshotError,
    "BUILD_ID_MISMATCH": BuildIdMismatchError, "DEBUGLINK_CRC": BuildIdMismatchError,
    "ARCH_MISMATCH": CaptureError, "MEMORY_UNREADABLE": CaptureError, "CAPTURE": CaptureError,
    "BUNDLE": VerificationError, "SIGNATURE": VerificationError, "DIGEST_MISMATCH": VerificationError,
    "KEY": VerificationError, "PROOF": VerificationError, "CHECKPOINT": VerificationError,
    "LOG": VerificationError, "POLICY": VerificationError,
}
_BY_ERRNO = {
    _errno.ESRCH: ProcessNotFoundError, _errno.EPERM: AccessDeniedError,
    _errno.EACCES: AccessDeniedError, _errno.ENOENT: FileMissingError,
}
_BY_CODE = {}


def _classes():
    if not _BY_CODE:
        from . import _stackprov
        for name, code in _stackprov.error_codes():
            _BY_CODE[code] = _BY_NAME.get(name[len("SPROV_ERR_"):], Error)
    return _BY_CODE


def from_code(code, message):
    """The exception for a C error code and its message (used by the extension)."""
    if -4000 >= code > -5000:
        cls = _classes().get(code, Error)
        return cls(message, code)
    if code < 0:
        cls = _BY_ERRNO.get(-code, SystemCallError)
        e = cls(message, code)
        # OSError's errno/strerror, as Python's own ProcessLookupError etc. carry them.
        e.errno = -code
        e.strerror = message
        return e
    return Error(message, code)
