# SPDX-License-Identifier: Apache-2.0
"""The running kernel's identity, read the way a test's independent answer needs it."""
import struct


def notes_build_id(path="/sys/kernel/notes"):
    """The GNU build-id (NT_GNU_BUILD_ID, 3) of the kernel's ELF notes, as hex (None without one)."""
    data = open(path, "rb").read()
    at = 0
    while at + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, at)
        name = data[at + 12:at + 12 + namesz]
        desc_at = at + 12 + ((namesz + 3) & ~3)
        if ntype == 3 and name.rstrip(b"\0") == b"GNU":
            return data[desc_at:desc_at + descsz].hex()
        at = desc_at + ((descsz + 3) & ~3)
    return None
