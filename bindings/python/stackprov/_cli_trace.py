# SPDX-License-Identifier: Apache-2.0
"""`python3 -m stackprov trace-capture|trace-list|trace-show|trace-resolve|trace-replay`: what
`stackprov <cmd>` prints (bindings/cli/cmd_trace.cpp), through the binding."""
import os
import re
import signal
import subprocess
import sys
import time

import stackprov
from . import _stackprov
from ._cli import (EXIT_FAIL, EXIT_OK, Obj, Parser, UsageError, fail, is_sha256_digest, is_store_url, jarr, jnum, jstr,
                   lib_fail, not_a_directory, parse_json, run, uint_in, unreadable_file, warn_lines, write_text)

_STORE_HELP = ("the trace store (sqlite:PATH of an existing file, postgresql://..., postgres://...); default "
               "$STACKPROV_STORE when it is such a URL, else sqlite:$XDG_DATA_HOME/stackprov/traces.db")
_ID_HELP = "the trace (its UUID, as trace-capture printed it)"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _default_store_url():
    """The store the library opens for None (doc/traces.md), to name it in a message."""
    env = os.environ.get("STACKPROV_STORE", "")
    if is_store_url(env):
        return env
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return "sqlite:" + os.path.join(data, "stackprov", "traces.db")


def open_store(cmd, url, existing):
    """--store URL as a TraceStore (None: the default store), as the CLI's open_store: a value that is
    not a store URL, a malformed one or -- with `existing` -- an sqlite:PATH whose file does not exist
    is a UsageError; a store that cannot be opened, stackprov.Error (after its line on stderr)."""
    if url is not None and not is_store_url(url):
        raise UsageError("--store '%s' is not a trace store URL (sqlite:PATH, postgresql://... or postgres://...)"
                         % url)
    if url is not None and existing and url.startswith("sqlite:") and len(url) > 7 and not url.startswith("sqlite://"):
        try:
            os.stat(url[7:])
        except OSError as e:
            raise UsageError("--store '%s': %s: %s" % (url, url[7:], os.strerror(e.errno)))
    try:
        return stackprov.TraceStore(url)
    except stackprov.Error as e:
        if url is not None and isinstance(e, stackprov.InvalidArgumentError):
            raise UsageError(e.message.splitlines()[0])
        lib_fail(cmd, "trace store '%s'" % (url if url is not None else _default_store_url()), e)
        raise


def in_store(cmd, url, what, call):
    """call(store, trace context) in the existing trace store at `url`, as the CLI's trace-resolve and
    trace-replay do: (result, None), or (None, exit status) after the CLI's line on stderr."""
    try:
        ts = open_store(cmd, url, True)
    except stackprov.Error:
        return None, EXIT_FAIL
    with ts:
        try:
            ctx = _stackprov._trace_context()
        except stackprov.Error as e:
            return None, lib_fail(cmd, "context", e)
        try:
            return call(ts, ctx), None
        except stackprov.Error as e:
            return None, lib_fail(cmd, what, e)


def trace_id(text, what):
    """A trace id (upper-case hex taken as lower-case), else a UsageError naming the value."""
    if not _UUID.match(text):
        raise UsageError("invalid %s '%s' (expected a %s)" % (what, text, "UUID, 8-4-4-4-12 hex digits"
                                                             if what == "trace id" else
                                                             "trace id: UUID, 8-4-4-4-12 hex digits"))
    return text.lower()


# ---------------------------------------------------------------- trace-list

def list_parser():
    p = Parser("trace-list", description="Lists the traces of a trace store, oldest capture first, one line each:\n"
               "  ID  CAPTURED_AT  PLATFORM/ARCH  FRAMES frames  build-id HEX\n"
               "(CAPTURED_AT in RFC 3339 UTC; HEX the main executable's build-id), as `stackprov trace-list`.",
               epilog="Exit status: 0 listed (also when the store has no trace); 1 the store could not be read;\n"
               "2 bad options or values.")
    p.once("--store", metavar="URL", help=_STORE_HELP)
    p.once("--limit", metavar="N", help="at most N traces, the oldest N; 0 to 1000000000 (default 0: all)")
    p.flag("--json", help='one JSON array instead: [{"trace_id","platform","arch","captured_at","build_id","frames"}]')
    return p


def list_main(a):
    cmd = "trace-list"
    limit = 0
    if a.limit is not None:
        limit = uint_in(a.limit, 0, 1000000000)
        if limit is None:
            raise UsageError("invalid --limit value '%s' (expected an integer from 0 to 1000000000)" % a.limit)
    try:
        ts = open_store(cmd, a.store, True)
    except stackprov.Error:
        return EXIT_FAIL
    with ts:
        try:
            text = ts.list_json(limit)
        except stackprov.Error as e:
            return lib_fail(cmd, "trace store '%s'" % ts.url, e)
    if a.json:
        write_text(text)
        return EXIT_OK
    for t in parse_json(text):
        sys.stdout.write("%s  %s  %s/%s  %s frames  build-id %s\n" % (
            jstr(t, "trace_id"), jstr(t, "captured_at"), jstr(t, "platform"), jstr(t, "arch"), jstr(t, "frames"),
            jstr(t, "build_id") or "-"))
    return EXIT_OK


# ---------------------------------------------------------------- trace-show

def show_parser():
    p = Parser("trace-show", description="Prints a stored trace as `stackprov trace-show` does: a header line, then "
               "per thread, as `stackprov stack` prints a thread\n  TID n \"name\":\n  #k  0xIP symbol+0xOFF - module [unwind]\n"
               "      inlined F at file:line:column\n      file:line:column\nthen the trace's replays, oldest first. See `stackprov trace-show "
               "--help` for the fields.",
               epilog="Exit status: 0 shown; 1 no such trace, or the store could not be read; 2 bad options or\n"
               "values (one line names the value).")
    p.add_argument("id", metavar="ID", help=_ID_HELP)
    p.once("--store", metavar="URL", help=_STORE_HELP)
    p.flag("--json", help='the trace as one trace.capture event line (doc/traces.md "Events"), then its replays as '
           'replay.result lines (every stored frame; an inferred one has "unwind":"tail_call+inferred")')
    p.flag("--no-tail-calls", help="without the inferred tail-call frames (text), as `stack --no-tail-calls`")
    return p


def print_trace_text(out, t, event, tail_calls=True):
    """The text form of a trace.capture event, byte for byte as the CLI's print_trace_text: a header,
    then the threads through the library's one renderer (sprov_trace_render)."""
    out.write("trace %s: %s/%s, captured %s, build-id %s\n" % (jstr(t, "trace_id"), jstr(t, "platform"),
                                                             jstr(t, "arch"), jstr(t, "captured_at"),
                                                             jstr(t, "build_id") or "-"))
    bundle, dsse = jstr(t, "symbol_bundle_ref"), jstr(t, "dsse_ref")
    if bundle:
        out.write("symbol bundle %s%s%s\n" % (bundle, ", signed: " if dsse else "", dsse))
    out.write(_stackprov._render_trace(event, True, tail_calls))


def show_main(a):
    cmd = "trace-show"
    tid = trace_id(a.id, "trace id")
    try:
        ts = open_store(cmd, a.store, True)
    except stackprov.Error:
        return EXIT_FAIL
    with ts:
        try:
            ev = ts.get_json(tid)
        except stackprov.Error as e:
            return lib_fail(cmd, "trace " + tid, e)
        try:
            replays = ts.replays_json(tid)
        except stackprov.Error as e:
            return lib_fail(cmd, "replays of trace " + tid, e)
    out = sys.stdout
    if a.json:
        write_text(ev)
        out.write(replays)
        if replays and not replays.endswith("\n"):
            out.write("\n")
        return EXIT_OK
    try:
        print_trace_text(out, parse_json(ev), ev, not a.no_tail_calls)
    except stackprov.Error as e:
        return lib_fail(cmd, "trace " + tid, e)
    for line in replays.split("\n"):
        if not line:
            continue
        try:
            r = parse_json(line)
        except ValueError:
            continue
        out.write("replay %s seed %s: success %s, coverage %s%%, verify %s ms\n" % (
            jstr(r, "replay_id"), jstr(r, "seed"), jstr(r, "replay_success_ratio"), jstr(r, "symbol_coverage_pct"),
            jstr(r, "verify_time_ms")))
    return EXIT_OK


# ------------------------------------------------------------- trace-resolve

def resolve_parser():
    p = Parser("trace-resolve", description="Resolves a stored trace again from its captured data (every thread "
               "unwound and every frame named anew,\nwith the trace's own symbol bundle, the --bundle bundles and "
               "every bundle of the trace store that\nholds one of its modules) and replaces its frames, as "
               "`stackprov trace-resolve`. Prints one line:\n"
               "  trace ID: F frames, N named, L with file:line, C% coverage (resolvers: bundle=.., dwarf=..)",
               epilog="Exit status: 0 resolved and stored; 1 the trace, a bundle or the store could not be read or\n"
               "written; 2 bad options or values (one line names the value).")
    p.once("--trace", metavar="ID", help=_ID_HELP)
    p.add_argument("--bundle", metavar="B", action="append", default=[],
                   help="also use bundle B (repeatable): sha256:HEX, a bundle of the trace store or, failing that, of "
                   "the default bundle store; or a bundle FILE, which is also added to the trace store")
    p.flag("--offline", help="use bundles only: no module file, debug file or network")
    p.once("--store", metavar="URL", help=_STORE_HELP)
    p.flag("--json", help="print the library's JSON report instead")
    return p


def resolve_main(a):
    cmd = "trace-resolve"
    if a.trace is None:
        raise UsageError("--trace ID is required")
    tid = trace_id(a.trace, "--trace value")
    for b in a.bundle:
        if b.startswith("sha256:"):
            if not is_sha256_digest(b):
                raise UsageError("invalid --bundle value '%s' (expected sha256:<64 lower-case hex> or a file)" % b)
        else:
            why = unreadable_file(b)
            if why:
                raise UsageError("--bundle '%s': %s (expected sha256:<64 lower-case hex> or a file)" % (b, why))
    report, status = in_store(cmd, a.store, "trace " + tid,
                              lambda ts, ctx: ts._resolve(ctx, tid, a.offline, list(a.bundle)))
    if status is not None:
        return status
    if a.json:
        write_text(report)
        return EXIT_OK
    j = parse_json(report)
    res = j.get("resolvers")
    counts = ", ".join("%s=%s" % (k, v if isinstance(v, str) else "") for k, v in res) if isinstance(res, Obj) else ""
    sys.stdout.write("trace %s: %s frames, %s named, %s with file:line, %.1f%% coverage (resolvers: %s)\n" % (
        tid, jstr(j, "frames"), jstr(j, "named"), jstr(j, "with_lines"), jnum(j, "symbol_coverage_pct"),
        counts or "none"))
    return EXIT_OK


# -------------------------------------------------------------- trace-replay

_REPLAY_EPILOG = """Exit status (the gate: the first failed check in this order decides):
  0 passed; 3 symbol coverage below --min-coverage; 4 replay success below --min-success;
  5 a bundle's DSSE envelope missing or not verified; 6 a bundle's inclusion proof missing
  or not verified; 7 a module's identity differs from its bundle's, or no bundle holds it;
  1 error (the trace, the store or FILE could not be read or written); 2 bad options or
  values (one line names the value). On a failed gate one line goes to stderr:
  'python3 -m stackprov trace-replay: gate FAILED: <check>: <why>'."""


def replay_parser():
    p = Parser("trace-replay", description="Replays a stored trace N times under perturbations, records each replay, "
               "verifies the trace's\nbundles offline and evaluates the gate, as `stackprov trace-replay`. Prints "
               "the one-line summary\n  ... % coverage, ... % success ...: PASS|FAIL <checks>\non stdout (or the "
               "JSON report with --json).", epilog=_REPLAY_EPILOG)
    p.once("--trace", metavar="ID", help="the trace (its UUID)")
    p.once("--seeds", metavar="N", help="replays, 1 to 1000 (default 5)")
    p.once("--first-seed", metavar="S", help="seeds S .. S+N-1, S from 1 to 9223372036854775807 (default 1)")
    p.once("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE (one testcase per check and "
           "per seed); FILE's directory must exist")
    p.flag("--json", help="print the JSON report (figures, checks, seeds with their mismatches) instead of the summary")
    p.once("--store", metavar="URL", help=_STORE_HELP)
    p.add_argument("--key", metavar="PUB", action="append", default=[],
                   help="a public key trusted for the bundles' DSSE envelopes (repeatable); without one the dsse "
                   "check fails")
    p.once("--trusted-root", metavar="FILE", help="the transparency log's pinned trusted_root.json, for the inclusion "
           "proofs; without it the inclusion check fails")
    p.once("--min-coverage", metavar="PCT", help="gate: symbol coverage at least PCT percent, 0 to 100 (default 90)")
    p.once("--min-success", metavar="RATIO", help="gate: replay success ratio at least RATIO, 0 to 1 (default 0.95)")
    return p


_REAL = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _real(text, lo, hi):
    """A finite decimal number in [lo, hi] (the CLI's parse_real, decimal notation), else None."""
    if not _REAL.match(text):
        return None
    v = float(text)
    return v if lo <= v <= hi else None


def _gate_failure(report_json, summary):
    """The first failed check and why (bindings/cli/cmd_trace.cpp gate_failure)."""
    try:
        j = parse_json(report_json)
        for c in jarr(j, "checks"):
            if c.get("passed") is False and jstr(c, "name"):
                why = jstr(c, "detail")
                return jstr(c, "name") + (": " + why if why else "")
    except ValueError:
        pass
    f = summary.find("FAIL")
    s = summary if f < 0 else summary[f + 4:]
    return s.lstrip(" :").rstrip("\n ")


def replay_main(a):
    cmd = "trace-replay"
    if a.trace is None:
        raise UsageError("--trace ID is required")
    tid = trace_id(a.trace, "--trace value")
    last = (1 << 63) - 1
    seeds, first = 5, 1
    if a.seeds is not None:
        seeds = uint_in(a.seeds, 1, 1000)
        if seeds is None:
            raise UsageError("invalid --seeds value '%s' (expected an integer from 1 to 1000)" % a.seeds)
    if a.first_seed is not None:
        first = uint_in(a.first_seed, 1, last)
        if first is None:
            raise UsageError("invalid --first-seed value '%s' (expected an integer from 1 to %d)"
                             % (a.first_seed, last))
    if first > last - (seeds - 1):
        raise UsageError("--first-seed '%s' with --seeds %d goes past the last seed %d" % (a.first_seed, seeds, last))
    min_cov = min_succ = -1.0
    if a.min_coverage is not None:
        min_cov = _real(a.min_coverage, 0, 100)
        if min_cov is None:
            raise UsageError("invalid --min-coverage value '%s' (expected a percentage from 0 to 100)" % a.min_coverage)
    if a.min_success is not None:
        min_succ = _real(a.min_success, 0, 1)
        if min_succ is None:
            raise UsageError("invalid --min-success value '%s' (expected a ratio from 0 to 1)" % a.min_success)
    for k in a.key:
        why = unreadable_file(k)
        if why:
            raise UsageError("--key '%s': %s" % (k, why))
    if a.trusted_root is not None:
        why = unreadable_file(a.trusted_root)
        if why:
            raise UsageError("--trusted-root '%s': %s" % (a.trusted_root, why))
    junit = a.junit
    if junit is not None:
        if not junit:
            raise UsageError("--junit needs a file name")
        slash = junit.rfind("/")
        d = "." if slash < 0 else "/" if slash == 0 else junit[:slash]
        why = not_a_directory(d)
        if why:
            raise UsageError("--junit '%s': directory '%s': %s" % (junit, d, why))
        if os.path.isdir(junit):
            raise UsageError("--junit '%s' is a directory" % junit)
    rep, status = in_store(cmd, a.store, "trace " + tid, lambda ts, ctx: ts._replay(
        ctx, tid, seeds, first, min_cov, min_succ, list(a.key), a.trusted_root))
    if status is not None:
        return status
    try:
        summary, js = rep.summary(), rep.json()
    except stackprov.Error as e:
        return lib_fail(cmd, "report", e)
    if junit:
        try:
            xml = rep.junit()
        except stackprov.Error as e:
            return lib_fail(cmd, "JUnit report", e)
        try:
            _write_file(junit, xml)
        except stackprov.Error as e:  # the library's message names the file, as the CLI prints it
            return fail(cmd, e.message.partition("\n")[0])
    write_text(js if a.json else summary)
    sys.stdout.flush()
    if rep.exit_code != 0:
        sys.stderr.write("python3 -m stackprov %s: gate FAILED: %s\n" % (cmd, _gate_failure(js, summary)))
    return rep.exit_code


def _write_file(path, text):
    """FILE written whole or not at all by the library (sprov_file_write: an unpredictable temporary in
    its directory, then rename; mode 0644), as the CLI writes it; stackprov.Error on failure."""
    _stackprov._file_write(path, text.encode(), 0o644)


# ------------------------------------------------------------- trace-capture

_CAPTURE_EPILOG = """Prints the new trace's id (one line) on stdout, and a summary on stderr:
  python3 -m stackprov trace-capture: trace ID: T threads, F frames, bundle sha256:HEX (signed, log entry N)

Exit status: 0 the trace was stored (with -- CMD too: CMD's own status is reported on stderr);
1 the capture, the store or the bundle failed, CMD could not be run or exited before the
capture; 2 bad options or values (one line names the value)."""


def capture_parser():
    p = Parser("trace-capture", usage="python3 -m stackprov trace-capture -p PID [options]\n"
               "       python3 -m stackprov trace-capture --core FILE [--exe PATH] [options]\n"
               "       python3 -m stackprov trace-capture [--delay MS] [options] -- CMD [ARGS...]",
               description="Captures every thread of a process, core or command, unwinds and resolves each thread "
               "and\nstores the result as one trace in a trace store, as `stackprov trace-capture` (see its --help "
               "for\nwhat is stored).", epilog=_CAPTURE_EPILOG)
    p.once("-p", "--pid", metavar="PID", help="the live process PID (ptrace; needs the right to ptrace it)")
    p.once("--core", metavar="FILE", help="the ELF core file FILE")
    p.once("--exe", metavar="PATH", help="with --core: the main program's file (default: its path in the core)")
    p.once("--delay", metavar="MS", help="with -- CMD: milliseconds between starting CMD and the capture, 0 to "
           "600000 (default 500)")
    p.once("--store", metavar="URL", help="the trace store: sqlite:PATH (created if missing) or postgresql://... "
           "(postgres://... too). Default: $STACKPROV_STORE when it is such a URL, else "
           "sqlite:$XDG_DATA_HOME/stackprov/traces.db")
    p.flag("--bundle", help="also build one symbol bundle of every module the trace's frames touch, store it in the "
           "trace store and in the bundle store, and record it as the trace's symbol bundle")
    p.once("--bundle-store", metavar="DIR", help="the bundle store: with --bundle the bundle is also written there "
           "(created if missing); the bundle resolver reads it. Without --bundle, DIR must exist. Default: "
           "$STACKPROV_STORE when it is a directory, else $XDG_DATA_HOME/stackprov/store; without --bundle a "
           "default store that does not exist is not used")
    p.once("--sign", metavar="KEY", help="with --bundle: sign the bundle with the P-256 private key KEY (DSSE), "
           "append the envelope to the transparency log --log DIR and store envelope, proof and checkpoint with "
           "the bundle. Requires --bundle and --log")
    p.once("--log", metavar="DIR", help="with --sign: the transparency log directory")
    p.once("--log-key", metavar="KEY", help="with --sign: the key that signs the log's new checkpoint (default: the "
           "--sign key)")
    p.once("--max-frames", metavar="N", help="at most N frames per thread, 1 to 65536 (default 256)")
    p.once("--python", metavar="auto|off", help="read CPython 3.11's frames too (default auto): stored as trace "
           "frames of unwind method 'runtime', as `stackprov trace-capture --python`")
    p.flag("--with-btf", help="with -p PID or -- CMD: also store each thread's kernel stack as its own segment "
           "(read from /proc/PID/task/TID/stack before the capture attaches; root only), each frame with its C "
           "prototype from /sys/kernel/btf/vmlinux, as `stackprov trace-capture --with-btf`. Without BTF a "
           "warning says why and no kernel segment is stored")
    return p


def _describe_status(rc):
    if rc >= 0:
        return "exit status %d" % rc
    name = signal.strsignal(-rc)
    return "killed by signal %d%s" % (-rc, " (%s)" % name if name else "")


def _bundle_context(cmd, a):
    """The context of the capture and its bundle store directory ("" for none), as the CLI's
    make_context: --bundle-store DIR or the default directory; with --bundle created if missing,
    without it a default that cannot be opened is left out."""
    use = a.bundle_store
    if use is None:
        try:
            d = stackprov.Store.default_dir()
            use = "" if is_store_url(d) else d
        except stackprov.Error:
            use = ""
    if use:
        try:
            stackprov.Store(use, create=a.bundle).close()
        except stackprov.Error as e:
            if a.bundle or a.bundle_store is not None:
                lib_fail(cmd, "bundle store '%s'" % use, e)
                return None, None
            use = ""
    try:
        return stackprov.Context(bundle_store=use or None), use
    except stackprov.Error as e:
        lib_fail(cmd, "context", e)
        return None, None


def _log_entry_of(bundle_store, digest, log_dir):
    """The index of a signed bundle's envelope in the transparency log; -1 when it cannot be told."""
    try:
        with stackprov.Store(bundle_store) as st:
            with open(st.sidecar_path(digest, "dsse.json"), "rb") as f:
                env = f.read()
        with stackprov.Log(log_dir) as log:
            i = log.find(env)
        return -1 if i is None else i
    except (stackprov.Error, OSError):
        return -1


def capture_main(a, command):
    cmd = "trace-capture"
    if command is not None:
        if not command:
            raise UsageError("'--' must be followed by a command to run")
        if not command[0]:
            raise UsageError("the command after '--' is an empty string")
    modes = (a.pid is not None) + (a.core is not None) + bool(command)
    if modes == 0:
        raise UsageError("give -p PID, --core FILE or -- CMD [ARGS...]")
    if modes > 1:
        raise UsageError("give only one of -p PID, --core FILE and -- CMD")
    pid, max_frames, delay_ms = 0, 0, 500
    python = a.python if a.python is not None else "auto"
    if python not in ("auto", "off"):
        raise UsageError("invalid --python value '%s' (expected auto or off)" % python)
    if a.pid is not None:
        pid = uint_in(a.pid, 1, 2147483647)
        if pid is None:
            raise UsageError("invalid --pid value '%s' (expected a process id, 1 to 2147483647)" % a.pid)
    if a.max_frames is not None:
        max_frames = uint_in(a.max_frames, 1, 65536)
        if max_frames is None:
            raise UsageError("invalid --max-frames value '%s' (expected an integer from 1 to 65536)" % a.max_frames)
    if a.delay is not None and not command:
        raise UsageError("--delay '%s' is only valid with -- CMD" % a.delay)
    if a.delay is not None:
        delay_ms = uint_in(a.delay, 0, 600000)
        if delay_ms is None:
            raise UsageError("invalid --delay value '%s' (expected milliseconds, 0 to 600000)" % a.delay)
    if a.exe is not None and a.core is None:
        raise UsageError("--exe '%s' is only valid with --core" % a.exe)
    if a.with_btf and a.core is not None:
        raise UsageError("--with-btf is only valid with -p PID or -- CMD (a live process's kernel stacks)")
    for opt, v in (("core", a.core), ("exe", a.exe)):
        if v is not None and unreadable_file(v):
            raise UsageError("--%s '%s': %s" % (opt, v, unreadable_file(v)))
    if a.sign is not None and not a.bundle:
        raise UsageError("--sign '%s' needs --bundle (only bundles are signed)" % a.sign)
    if a.sign is not None and a.log is None:
        raise UsageError("--sign '%s' needs --log DIR (the transparency log)" % a.sign)
    if a.sign is None and a.log is not None:
        raise UsageError("--log '%s' is only valid with --sign" % a.log)
    if a.sign is None and a.log_key is not None:
        raise UsageError("--log-key '%s' is only valid with --sign" % a.log_key)
    for opt, v in (("sign", a.sign), ("log-key", a.log_key)):
        if v is not None and unreadable_file(v):
            raise UsageError("--%s '%s': %s" % (opt, v, unreadable_file(v)))
    if a.log is not None and not_a_directory(a.log):
        raise UsageError("--log '%s': %s" % (a.log, not_a_directory(a.log)))
    if a.bundle_store is not None and not a.bundle_store:
        raise UsageError("--bundle-store needs a directory")
    if a.bundle_store is not None and not a.bundle and not_a_directory(a.bundle_store):
        raise UsageError("--bundle-store '%s': %s" % (a.bundle_store, not_a_directory(a.bundle_store)))
    try:
        ts = open_store(cmd, a.store, False)
    except stackprov.Error:
        return EXIT_FAIL
    with ts:
        ctx, bundle_store = _bundle_context(cmd, a)
        if ctx is None:
            return EXIT_FAIL
        with ctx:
            return _capture(cmd, a, command, ts, ctx, bundle_store, pid, max_frames, delay_ms)


def _capture(cmd, a, command, ts, ctx, bundle_store, pid, max_frames, delay_ms):
    child, shown = None, ""
    if command:
        shown = command[0]
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            child = subprocess.Popen(command)
        except OSError as e:
            return fail(cmd, "cannot run '%s': %s" % (shown, os.strerror(e.errno) if e.errno else e))
        deadline = time.monotonic() + delay_ms / 1000.0
        while True:
            if child.poll() is not None:
                return fail(cmd, "'%s' exited before the capture (%s)" % (shown, _describe_status(child.returncode)))
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(0.02, left))
        pid = child.pid

    def finish(code):
        # After -- CMD, CMD is waited for and its status reported, also after a failure.
        if child is not None:
            child.wait()
            sys.stderr.write("python3 -m stackprov %s: '%s' exited (%s)\n" % (cmd, shown,
                                                                              _describe_status(child.returncode)))
        return code

    kernel = False
    if a.with_btf:
        # Kernel segments need the kernel's BTF: without it the trace is captured as without
        # --with-btf, saying why (as `stackprov trace-capture`).
        why = stackprov._stackprov._kernel_btf_error()
        if why is None:
            kernel = True
        else:
            sys.stderr.write("python3 -m stackprov %s: --with-btf: no kernel segment stored: the kernel's BTF: %s\n"
                             % (cmd, why))
    try:
        runtime = a.python in (None, "auto")  # checked by capture_main
        proc = (ctx.open_core(a.core, exe=a.exe, python=runtime) if a.core is not None
                else ctx.capture(pid, python=runtime, kernel=kernel, with_btf=kernel))
    except stackprov.Error as e:
        if a.core is not None:
            return lib_fail(cmd, "cannot read core '%s'" % a.core, e)
        if child is not None and child.poll() is not None:
            return fail(cmd, "'%s' exited before the capture (%s)" % (shown, _describe_status(child.returncode)))
        what = "cannot capture '%s' (pid %d)" % (shown, pid) if child is not None else "cannot capture pid %d" % pid
        return finish(lib_fail(cmd, what, e))
    with proc:
        warn_lines(proc.info.warnings)
        try:
            tid = ts._capture(ctx, proc, a.bundle, max_frames, a.sign, a.log, a.log_key)
        except stackprov.Error as e:
            what = "trace of core '%s'" % a.core if a.core is not None else "trace of pid %d" % pid
            return finish(lib_fail(cmd, "%s into '%s'" % (what, ts.url), e))
    sys.stdout.write(tid + "\n")
    sys.stdout.flush()
    summary = "trace " + tid
    try:
        j = parse_json(ts.get_json(tid))
        summary += ": %d threads, %d frames" % (len(jarr(j, "threads")), len(jarr(j, "frames")))
        b = jstr(j, "symbol_bundle_ref")
        if b:
            summary += ", bundle " + b
            if a.sign is not None:
                idx = _log_entry_of(bundle_store, b, a.log) if bundle_store else -1
                summary += " (signed, log entry %d)" % idx if idx >= 0 else " (signed)"
    except (stackprov.Error, ValueError):
        pass
    sys.stderr.write("python3 -m stackprov %s: %s\n" % (cmd, summary))
    return finish(EXIT_OK)


def main(cmd, argv):
    if cmd == "trace-capture":
        command = None
        if "--" in argv:
            i = argv.index("--")
            argv, command = argv[:i], argv[i + 1:]
        return run(capture_parser(), argv, lambda a: capture_main(a, command))
    parser, body = {"trace-list": (list_parser, list_main), "trace-show": (show_parser, show_main),
                    "trace-resolve": (resolve_parser, resolve_main),
                    "trace-replay": (replay_parser, replay_main)}[cmd]
    return run(parser(), argv, body)
