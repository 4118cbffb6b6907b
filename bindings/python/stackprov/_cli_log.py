# SPDX-License-Identifier: Apache-2.0
"""python3 -m stackprov log <action>: `stackprov log` through stackprov.log_init, stackprov.Log,
log_verify_proof and log_verify_consistency (the C functions the CLI calls), with the CLI's
options, output and exit status. fragment and verify-fragment are not served (the binding has no
tile-fragment call): use `stackprov log`."""
import argparse
import os
import sys

import stackprov
from ._cli import EXIT_FAIL, EXIT_OK, EXIT_USAGE, PROG, Parser, UsageError, uint_in, usage

LOG_HELP = """usage: python3 -m stackprov log init DIR --key KEY [--origin ORIGIN]
       python3 -m stackprov log append DIR [--key KEY] FILE...
       python3 -m stackprov log checkpoint DIR --key KEY
       python3 -m stackprov log prove DIR (--index N | --entry FILE) [-o PROOF]
       python3 -m stackprov log consistency DIR --old N [--new M] [-o PROOF]
       python3 -m stackprov log verify DIR
       python3 -m stackprov log verify-proof --proof PROOF --entry FILE --log-key PUB --origin ORIGIN
       python3 -m stackprov log verify-consistency --old-checkpoint A --new-checkpoint B --proof PROOF
                                                   --log-key PUB --origin ORIGIN

options (which action takes which: the usage above, the actions below):
  --key KEY          the log's private key, which signs its checkpoints
  --origin ORIGIN    the log's origin (init: default 'stackprov.local/<base name of DIR>';
                     verify-*: the origin the checkpoint must name)
  --index N          the entry at index N
  --entry FILE       the entry whose bytes are FILE's
  --old N, --new M   sizes of the log
  -o, --output FILE  writes the proof to FILE (default: standard output; --out: the same)
  --proof PROOF      a proof file (C2SP tlog-proof@v1, or a consistency proof)
  --log-key PUB      the log's public key
  --old-checkpoint A, --new-checkpoint B
                     the checkpoints of verify-consistency
  -h, --help         this text

actions:
  init DIR --key KEY [--origin ORIGIN]
        create an empty log whose checkpoints KEY (P-256) signs; ORIGIN defaults to
        'stackprov.local/<base name of DIR>'
  append DIR [--key KEY] FILE...
        append each FILE ('-': standard input) as one entry, all in one crash-safe step; with
        --key also sign a new checkpoint. Prints '<index> <FILE>' for each entry
  checkpoint DIR --key KEY
        sign a checkpoint of everything appended so far; prints it
  prove DIR (--index N | --entry FILE) [-o PROOF]
        inclusion proof against the stored checkpoint, as C2SP tlog-proof@v1
  consistency DIR --old N [--new M] [-o PROOF]
        consistency proof from size N to M (default: the stored checkpoint's size)
  verify DIR
        recompute every tile from the entries, the root, and check the checkpoint
  verify-proof --proof PROOF --entry FILE --log-key PUB --origin ORIGIN
        offline check of a tlog-proof@v1 for the entry
  verify-consistency --old-checkpoint A --new-checkpoint B --proof PROOF --log-key PUB --origin ORIGIN
        offline check that checkpoint B extends checkpoint A
(fragment and verify-fragment are not served here: use `stackprov log`.)

A local append-only transparency log (RFC 9162 Merkle tree, C2SP tlog-tiles layout), as
`stackprov log` keeps it (see `stackprov log --help` for the layout).

Exit status: 0 done (verify*: verified); 1 the action failed; 2 usage error.
"""


def default_origin(d):
    """The CLI's default origin (bindings/cli/cmd_provenance.cpp default_origin)."""
    while len(d) > 1 and d.endswith("/"):
        d = d[:-1]
    base = "".join("_" if c in " +\n" else c for c in d.rsplit("/", 1)[-1])
    return "stackprov.local/" + (base or "log")


def _read(path):
    if path != "-" and os.path.isdir(path):
        raise UsageError("'%s' is a directory, not a file" % path)
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError("cannot read '%s': %s" % (path, e.strerror))


def _lib_fail(action, e):
    sys.stderr.write("%s log %s: %s\n" % (PROG, action, e.message))
    return EXIT_FAIL


def _write(out, text):
    if out is None or out == "-":
        sys.stdout.write(text)
    else:
        stackprov._stackprov._file_write(out, text.encode("utf-8", "surrogateescape"), 0o644)


def _action(action, a):
    if a.help:
        sys.stdout.write(LOG_HELP)
        return EXIT_OK
    offline = action in ("verify-proof", "verify-consistency")
    if not offline and not a.args:
        raise UsageError("'log %s' needs a log directory" % action)
    if a.output is not None and os.path.isdir(a.output):
        raise UsageError("'%s' is a directory, not a file" % a.output)
    d = a.args[0] if not offline else ""
    try:
        if action == "init":
            if a.key is None:
                raise UsageError("'log init' needs --key KEY")
            if len(a.args) != 1:
                raise UsageError("unexpected argument '%s'" % a.args[1])
            origin = a.origin if a.origin is not None else default_origin(d)
            stackprov.log_init(d, key=a.key, origin=origin)
            sys.stdout.write("log %s initialised, origin '%s'\n" % (d, origin))
            return EXIT_OK
        if action == "verify-proof":
            if a.proof is None or a.entry is None:
                raise UsageError("'log verify-proof' needs --proof PROOF and --entry FILE")
            proof, entry = _read(a.proof), _read(a.entry)
            if a.log_key is None or a.origin is None:
                raise UsageError("'log verify-proof' needs --log-key PUB and --origin ORIGIN")
            stackprov.log_verify_proof(proof.decode("utf-8", "surrogateescape"), entry, log_key=a.log_key,
                                       origin=a.origin)
            sys.stdout.write("OK: %s is included in log '%s'\n" % (a.entry, a.origin))
            return EXIT_OK
        if action == "verify-consistency":
            if None in (a.old_checkpoint, a.new_checkpoint, a.proof, a.log_key, a.origin):
                raise UsageError("'log verify-consistency' needs --old-checkpoint, --new-checkpoint, --proof, "
                                 "--log-key and --origin")
            o, n, p = (_read(x).decode("utf-8", "surrogateescape") for x in (a.old_checkpoint, a.new_checkpoint,
                                                                              a.proof))
            stackprov.log_verify_consistency(o, n, p, log_key=a.log_key, origin=a.origin)
            sys.stdout.write("OK: checkpoint %s extends %s\n" % (a.new_checkpoint, a.old_checkpoint))
            return EXIT_OK
        if action == "append":
            if len(a.args) < 2:
                raise UsageError("'log append' needs at least one FILE")
            data = [_read(f) for f in a.args[1:]]
            with stackprov.Log(d) as log:
                first, _ = log.append(data, key=a.key)
            for i, f in enumerate(a.args[1:]):
                sys.stdout.write("%d %s\n" % (first + i, f))
            return EXIT_OK
        if action == "checkpoint":
            if a.key is None:
                raise UsageError("'log checkpoint' needs --key KEY")
            with stackprov.Log(d) as log:
                sys.stdout.write(log.checkpoint(key=a.key))
            return EXIT_OK
        if action == "prove":
            if (a.index is None) == (a.entry is None):
                raise UsageError("'log prove' needs exactly one of --index N and --entry FILE")
            if a.index is not None and uint_in(a.index, 0, (1 << 64) - 1) is None:
                raise UsageError("--index '%s' is not a non-negative integer" % a.index)
            with stackprov.Log(d) as log:
                if a.index is not None:
                    index = int(a.index)
                else:
                    index = log.find(_read(a.entry))
                    if index is None:
                        sys.stderr.write("%s log prove: the entry %s is not in the log\n" % (PROG, a.entry))
                        return EXIT_FAIL
                _write(a.output, log.prove(index))
            return EXIT_OK
        if action == "consistency":
            old = uint_in(a.old or "", 0, (1 << 64) - 1)
            if old is None:
                raise UsageError("'log consistency' needs --old N (a non-negative integer)")
            new = 0
            if a.new is not None and (new := uint_in(a.new, 0, (1 << 64) - 1)) is None:
                raise UsageError("--new '%s' is not a non-negative integer" % a.new)
            with stackprov.Log(d) as log:
                _write(a.output, log.consistency(old, new))
            return EXIT_OK
        if action == "verify":
            with stackprov.Log(d) as log:
                log.fsck()
                n = log.size
            sys.stdout.write("log %s: OK, %d entries, tiles, root and checkpoint verified\n" % (d, n))
            return EXIT_OK
    except stackprov.Error as e:
        if action.startswith("verify-"):
            sys.stderr.write("%s log %s: FAIL %s\n" % (PROG, action, e.message))
            return EXIT_FAIL
        return _lib_fail(action, e)
    raise UsageError("unknown action '%s'" % action)


def main(cmd, argv):
    if not argv or argv[0] in ("--help", "-h"):
        (sys.stdout if argv else sys.stderr).write(LOG_HELP)
        return EXIT_OK if argv else EXIT_USAGE
    action = argv[0]
    if action in ("fragment", "verify-fragment"):
        return usage("log", "'log %s' is not served by python3 -m stackprov: use `stackprov log %s`" % (action, action))
    p = Parser("log", usage=argparse.SUPPRESS, add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    for name in ("--key", "--origin", "--index", "--entry", "--old", "--new", "--proof", "--log-key",
                 "--old-checkpoint", "--new-checkpoint"):
        p.once(name)
    p.once("-o", "--output", "--out")
    p.add_argument("args", nargs="*")
    try:
        return _action(action, p.parse_intermixed_args(argv[1:]))
    except UsageError as e:
        return usage("log", str(e))
