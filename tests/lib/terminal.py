# SPDX-License-Identifier: Apache-2.0
# A command run with its stderr on a terminal (a pty), for outputs that differ on a terminal
# (progress lines, live counts): every test that checks one reads it this way.
import os
import subprocess


def stderr_on_pty(cmd, **popen_kw):
    """Runs `cmd` with stderr on a new pty and reads it to the end (EIO when the child closes it).
    Returns (Popen after wait, stderr text, stdout bytes or None). `popen_kw` go to Popen
    (stdout=subprocess.PIPE to capture stdout as well)."""
    master, slave = os.openpty()
    popen_kw.setdefault("stdin", subprocess.DEVNULL)
    popen_kw.setdefault("stdout", subprocess.DEVNULL)
    p = subprocess.Popen(cmd, stderr=slave, **popen_kw)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        out += chunk
    stdout = p.stdout.read() if p.stdout is not None else None
    p.wait()
    os.close(master)
    return p, out.decode(errors="replace"), stdout
