# SPDX-License-Identifier: Apache-2.0
# Running the tests' tools for less CPU: megabytes through files rather than pipes, nm without bfd's LLVM plugins.
"""run_files: tests/integration/symbolize compare_llvm.py and pdb_llvm.py. nm_command: every Python
test that runs binutils nm (or x86_64-w64-mingw32-nm).

    sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
    from toolrun import nm_command, run_files  # noqa: E402

run_files(cmd, input, ...) returns what subprocess.run(cmd, input=input, stdout=PIPE, stderr=PIPE,
text=True, check=check) returns (the same text: locale decoding, universal newlines; the same
CalledProcessError), but the child reads its input from, and writes its output to, anonymous
temporary files. Through pipes, Python's communicate() polls and copies in 32 KiB steps: for the
megabytes of a symbolizer's JSON answers to every byte of a .text, that costs the test more CPU
(~0.03 s per 2.6 MB answer, 0.3 s per 6.7 MB) than the reading of one file.

nm_command(tool) is binutils nm (or another binutils nm, such as x86_64-w64-mingw32-nm) given gcc's
LTO plugin explicitly: without --plugin, nm loads every plugin of bfd-plugins, LLVMgold-14 and -16
among them, which pull in libLLVM (0.25 CPU-s per run, against 0.02-0.06 with --plugin). The plugin
only reads LTO objects: what nm lists for a linked ELF or PE file is the same (checked byte for byte
for the 78 nm runs of the 12 tests using it, against plain nm and --target=elf64-x86-64 / pei-x86-64).
bfd still recognises the format by itself, so one command serves every file type."""
import functools
import locale
import os
import subprocess
import sys
import tempfile


def _encoding():
    # text=True's encoding (subprocess._text_encoding, Python 3.11).
    return "utf-8" if sys.flags.utf8_mode else locale.getencoding()


def _text(data):
    # What text=True makes of a pipe's bytes (subprocess.Popen._translate_newlines).
    return data.decode(_encoding()).replace("\r\n", "\n").replace("\r", "\n")


def run_files(cmd, input="", check=True, stderr=True):
    """Run cmd with `input` (str or bytes) as its stdin; stdout (and stderr unless stderr=False, then
    inherited) as text. Raises subprocess.CalledProcessError on a non-zero exit when check."""
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        fin.write(input.encode(_encoding()) if isinstance(input, str) else input)
        fin.seek(0)
        r = subprocess.run(cmd, stdin=fin, stdout=fout, stderr=ferr if stderr else None)
        fout.seek(0)
        out = _text(fout.read())
        ferr.seek(0)
        err = _text(ferr.read()) if stderr else None
    if check and r.returncode:
        raise subprocess.CalledProcessError(r.returncode, cmd, out, err)
    return subprocess.CompletedProcess(cmd, r.returncode, out, err)


@functools.lru_cache(maxsize=None)
def _lto_plugin():
    # gcc answers the bare name when it has no such file.
    plugin = subprocess.run(["gcc", "-print-file-name=liblto_plugin.so"], check=True, stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    return plugin if os.path.isabs(plugin) and os.path.exists(plugin) else None


def nm_command(tool="nm"):
    """[tool, "--plugin", gcc's liblto_plugin.so], or [tool] when gcc names no such file (gcc is asked
    once per process). A new list each call: callers may append to it."""
    plugin = _lto_plugin()
    return [tool, "--plugin", plugin] if plugin else [tool]
