#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# The trace pipeline end to end on the command line, on SQLite and on a PostgreSQL started here, against independent oracles.
"""Usage: pipeline_test.py --stackprov PATH --work DIR [--only sqlite|postgresql]

For each store (sqlite:FILE, then a PostgreSQL this script starts on loopback: tests/lib/pgserver.py):

 1. capture: `stackprov trace-capture --store URL --bundle --bundle-store DIR --sign KEY --log LOG
    -- FIXTURE MS TIDFILE` on a private copy of fixture_pipeline.c built here (gcc -g -O2): four
    threads parked in named call chains, one through an always_inline function. The printed id
    is a UUID version 4 (RFC 4122 bits). Oracles: the fixture's own tid list, /proc/PID/task
    (and each task's comm) read while it is parked, readelf -n (build-id),
    llvm-symbolizer-14 --inlining on the fixture at every frame's module_offset (minus 1 for
    caller frames: their ip is a return address) for the function, file:line:column and the
    inline chain, the call chains the fixture's source defines, and the store's rows as
    sqlite3 / psql read them (every frame column, threads, the trace row).
 2. a replay right after the capture (no trace-resolve) passes with 100% success: the replay
    names frames from the bundle alone and must find what the capture recorded.
 3. the fixture binary is deleted; `trace-resolve --trace ID --offline`: the same names, lines
    and inline chains as llvm-symbolizer-14 gave before the deletion, resolver "bundle" for
    every frame of the fixture, no other frame's file:line:column or inline chain changed; the
    report's counts equal the frames'; the rows again equal trace-show's JSON.
 4. `trace-replay --seeds 5 --junit J.xml --key PUB --trusted-root LOG/trusted_root.json`: exit 0,
    xmllint --schema tests/data/junit/JUnit.xsd accepts J.xml, one testcase per check (coverage,
    success, dsse, inclusion, platform-id) and per seed, none failed; the summary line's
    "% coverage" and "% success" equal the replays rows (sqlite3/psql: 5 new rows), the JSON
    report of a second run (--json, same seeds) and the coverage computed here from the frames
    (a frame counts when it has a function, and a file:line wherever llvm-symbolizer-14 gives one).
 5. the gate: the main trace without --key and with another key fails dsse (exit 5), with another
    log's trusted root or none inclusion (exit 6); a stripped fixture (-O2 -s) captured without
    --bundle fails coverage (exit 3), and with --min-coverage 0 (its binary deleted) success
    (exit 4: no bundle can reproduce its frames); a stripped fixture captured with a signed bundle
    fails coverage only; the fixture with one more thread parked in a library without a build-id
    (fixture_nobid.c) fails platform-id only (exit 7, --min-coverage 0). Every JUnit file
    validates and marks the deciding check's testcase failed (and only it where the other checks
    hold); exit status and the "gate FAILED: <check>" line on stderr name the check.
 6. `trace-verify --bundle sha256:HEX --dsse --rekor --store URL` with the key and trusted root:
    exit 0; on a copy of the store whose envelope signature (or one bundle byte) was altered: exit 1.
 7. /usr/bin/python3.11 sleeping in nested Python functions (two threads), captured with --pid and a
    bundle, resolved offline, replayed 5 seeds (--min-coverage 0 --min-success 0); prints
    "FIGURE python3.11 STORE coverage=... success=..."; success must be 1.0 and the reported
    coverage must equal the one computed here from trace-show's frames and llvm-symbolizer-14.
Once (SQLite): `trace-capture --bundle -- python3.11` whose program exits on its own during the
capture's resolve and bundle build must still store the trace. At the end nothing may be left in
$TMPDIR (staged bundles, exported stores).
A missing tool fails the test naming it. Exit 0 on success, 1 on any failure.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
XSD = os.path.join(SOURCE_DIR, "tests", "data", "junit", "JUnit.xsd")
FIXTURE_SRC = os.path.join(HERE, "fixture_pipeline.c")
NOBID_SRC = os.path.join(HERE, "fixture_nobid.c")
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "lib"))
from pgserver import PG_TOOLS, PSQL, PgServer  # noqa: E402
from peers import llvm_symbolizer_chains  # noqa: E402
from sqlsession import PsqlSession, SqliteSession, close_all  # noqa: E402  (one CLI process per database)
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

PY311 = "/usr/bin/python3.11"
TOOLS = ["gcc", "readelf", "nm", "sqlite3", "llvm-symbolizer-14", "xmllint", PY311] + PG_TOOLS
CHECKS = ["coverage", "success", "dsse", "inclusion", "platform-id"]
GATE_EXIT = {"coverage": 3, "success": 4, "dsse": 5, "inclusion": 6, "platform-id": 7}
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
# The fixture's call chains (fixture_pipeline.c), innermost first, as frames of the fixture module
# (beta_inline is inlined into beta_outer: one frame).
FIXTURE_CHAINS = {
    "main": ["park", "main_wait", "main", "_start"],
    "alpha": ["park", "arrive", "alpha_three", "alpha_two", "alpha_one", "alpha_entry"],
    "beta": ["park", "arrive", "beta_outer", "beta_entry"],
    "gamma": ["park", "arrive"] + ["gamma_recurse"] * 6 + ["gamma_entry"],
}
FIXTURE_MS = 6000   # how long the fixture stays parked under `trace-capture -- CMD`
CAPTURE_DELAY = 300  # --delay MS before the capture

failures = []
STACKPROV = None
ENV = None


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(cmd, timeout=180, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=kw.pop("env", ENV), **kw)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError("%s timed out after %d s: %s" % (" ".join(cmd), timeout, e.stderr))


def must(cmd, **kw):
    p = run(cmd, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def sp(*args, **kw):
    return run([STACKPROV] + [str(a) for a in args], **kw)


def signed(u):
    u = int(u)
    return u - (1 << 64) if u >= (1 << 63) else u


def hexint(s):
    return int(s, 16) if isinstance(s, str) else int(s)


# ------------------------------------------------------------------ the stores as their CLIs see them

class SqliteDb:
    name = "sqlite"

    def __init__(self, path):
        self.path = path
        self.url = "sqlite:" + path
        self.cli = SqliteSession(path, env=ENV)

    def query(self, sql):
        return self.cli.rows(sql)

    def script(self, sql):
        p = subprocess.run(["sqlite3", self.path], input=sql, text=True, capture_output=True)
        if p.returncode != 0:
            raise RuntimeError("sqlite3 %s: %s" % (self.path, p.stderr))

    def copy(self, name):
        dst = os.path.join(os.path.dirname(self.path), name + ".db")
        must(["sqlite3", self.path, "VACUUM INTO '%s'" % dst])
        return SqliteDb(dst)


class PgDb:
    name = "postgresql"

    def __init__(self, server, dbname, template=None):
        self.server = server
        self.dbname = dbname
        self.url = server.create_database(dbname, template)
        self.cli = PsqlSession(self.url, env=ENV)

    def query(self, sql):
        return self.cli.rows(sql)

    def script(self, sql):
        p = subprocess.run([PSQL, self.url, "-v", "ON_ERROR_STOP=1", "-Xq"], input=sql, text=True,
                           capture_output=True, env=ENV)
        if p.returncode != 0:
            raise RuntimeError("psql %s: %s" % (self.url, p.stderr))

    def copy(self, name):
        self.cli.close()  # CREATE DATABASE ... TEMPLATE refuses a template anyone is connected to
        return PgDb(self.server, name, template=self.dbname)


def db_frames(db, trace_id):
    return db.query(
        "SELECT frame_index, thread_index, ip, module_path, module_build_id, module_offset, resolved_symbol,"
        " symbol_offset, file, line, column_no, CAST(inline_chain AS TEXT) AS inline_chain, resolver, source,"
        " bundle_sha256, unwind_method FROM frames WHERE CAST(trace_id AS TEXT) = '%s' ORDER BY frame_index"
        % trace_id)


def db_replays(db, trace_id):
    return db.query(
        "SELECT CAST(replay_id AS TEXT) AS replay_id, seed, replay_success_ratio, symbol_coverage_pct"
        " FROM replays WHERE CAST(trace_id AS TEXT) = '%s' ORDER BY started_at, seed" % trace_id)


def check_rows(db, ev, what):
    """The trace's rows as sqlite3/psql read them == trace-show's trace.capture line."""
    tid = ev["trace_id"]
    rows = db_frames(db, tid)
    frames = ev["frames"]
    check(len(rows) == len(frames), "%s: %s: %d frame rows (%s CLI), %d frames in trace-show --json"
          % (db.name, what, len(rows), db.name, len(frames)))
    bad = 0
    for i, (g, f) in enumerate(zip(rows, frames)):
        ref = f.get("bundle_ref")
        want = {"frame_index": i, "thread_index": f["thread"], "ip": signed(hexint(f["ip"])),
                "module_path": f.get("module", ""), "module_build_id": f.get("module_build_id", ""),
                "module_offset": signed(hexint(f.get("module_offset", "0x0"))),
                "resolved_symbol": f.get("symbol", ""), "symbol_offset": None if f.get("symbol_offset") is None  # unknown: SQL NULL
                else signed(hexint(f["symbol_offset"])),
                "file": f.get("file", ""), "line": f.get("line", 0), "column_no": f.get("column", 0),
                "resolver": f.get("resolver", ""), "source": f.get("source", ""),
                "bundle_sha256": ref[len("sha256:"):] if ref else "", "unwind_method": f.get("unwind", "")}
        for k, v in want.items():
            if g[k] != v and bad < 10:
                bad += 1
                check(False, "%s: %s: frame %d column %s: row %r, trace-show %r" % (db.name, what, i, k, g[k], v))
        chain = json.loads(g["inline_chain"]) if g["inline_chain"] else []
        if chain != f.get("inline", []) and bad < 10:
            bad += 1
            check(False, "%s: %s: frame %d inline_chain: row %r, trace-show %r" % (db.name, what, i, chain,
                                                                               f.get("inline")))
    check(bad == 0, "%s: %s: every frame row (all columns) equals trace-show --json" % (db.name, what))
    th = db.query("SELECT thread_index, tid, name FROM threads WHERE CAST(trace_id AS TEXT) = '%s'"
                  " ORDER BY thread_index" % tid)
    check([(r["thread_index"], r["tid"], r["name"]) for r in th] ==
          [(i, signed(t["tid"]), t["name"]) for i, t in enumerate(ev["threads"])],
          "%s: %s: threads rows equal trace-show --json" % (db.name, what))
    tr = db.query("SELECT build_id, symbol_bundle_sha256, dsse_ref, platform, arch FROM traces"
                  " WHERE CAST(trace_id AS TEXT) = '%s'" % tid)
    ref = ev.get("symbol_bundle_ref")
    check(len(tr) == 1 and tr[0]["build_id"] == ev["build_id"] and tr[0]["platform"] == ev["platform"]
          and tr[0]["arch"] == ev["arch"] and (tr[0]["symbol_bundle_sha256"] or "") == (ref[7:] if ref else "")
          and (tr[0]["dsse_ref"] or None) == ev.get("dsse_ref"),
          "%s: %s: the traces row equals trace-show --json (%s)" % (db.name, what, tr))


# ------------------------------------------------------------------ oracles

def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", must(["readelf", "-n", path]))
    if not m:
        raise RuntimeError("readelf -n %s: no build-id" % path)
    return m.group(1)


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# The peers below read a module's bytes only (and, for llvm-symbolizer-14, the debug file its build-id
# names): a copy of the same bytes under another path (each store's run of the fixture) gets the same
# answer, so each is asked once per content.
_nm_answers = {}  # sha256 of the file -> function_starts
_llvm_answers = {}  # (sha256 of the module, address) -> chain


def function_starts(path):
    """nm: {function name: start address} of the fixture's .symtab."""
    key = file_digest(path)
    if key not in _nm_answers:
        out = {}
        for line in must(nm_command() + ["--defined-only", path]).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tT":
                out[parts[2]] = int(parts[0], 16)
        _nm_answers[key] = out
    return dict(_nm_answers[key])


def check_symbol_offsets(ev, exe, starts, what):
    """symbol_offset = module_offset - the function's start address (nm) for every fixture frame."""
    bad = [(f.get("symbol"), f.get("module_offset"), f.get("symbol_offset"),
            hex(hexint(f["module_offset"]) - starts[f["symbol"]]) if f.get("symbol") in starts else None)
           for f in ev["frames"] if f.get("module") == exe and
           (f.get("symbol") not in starts or f.get("symbol_offset") is None or
            hexint(f["symbol_offset"]) != hexint(f["module_offset"]) - starts[f["symbol"]])]
    check(not bad, "%s: every fixture frame's symbol_offset is its module_offset minus the function's address "
          "(nm) (wrong: (symbol, module_offset, symbol_offset, want) %s)" % (what, bad[:4]))


def lookup_address(frame, index_in_thread):
    """Where llvm-symbolizer looks: the module offset, minus 1 for a return address (caller frames)."""
    off = hexint(frame["module_offset"])
    return off - 1 if index_in_thread > 0 and frame.get("unwind") != "signal" else off


def llvm_chains(queries):
    """llvm-symbolizer-14 --inlining, one process for every (module, address) of `queries` not asked
    before (its input lines name the module: "PATH" 0xADDR): per query the chain innermost first
    [(function, file, line, column)]."""
    digests = {m: file_digest(m) for m in {m for m, _ in queries}}
    todo = {}  # (digest, address) not answered yet -> one (module, address) to ask
    for m, a in queries:
        if (digests[m], a) not in _llvm_answers:
            todo.setdefault((digests[m], a), (m, a))
    todo = list(todo.values())
    if todo:
        bad = [m for m, _ in todo if '"' in m]
        if bad:
            raise RuntimeError("llvm-symbolizer-14 input cannot quote the path %r" % bad[0])
        out = must(["llvm-symbolizer-14", "--inlining", "--output-style=LLVM"],
                   input="".join('"%s" 0x%x\n' % (m, a) for m, a in todo))
        chains = llvm_symbolizer_chains(out)
        if len(chains) != len(todo):
            raise RuntimeError("llvm-symbolizer-14 on %s: %d answers for %d addresses"
                               % (sorted({m for m, _ in todo}), len(chains), len(todo)))
        for (m, a), chain in zip(todo, chains):
            _llvm_answers[(digests[m], a)] = [("" if fn == "??" else fn, "" if file == "??" else file, line, col)
                                              for fn, file, line, col in chain]
    return [list(_llvm_answers[(digests[m], a)]) for m, a in queries]


def trace_chain(f):
    """A trace frame's names and positions as llvm-symbolizer's chain, innermost first: the inline chain
    (outermost first: each inlined function with its position) reversed, then the physical function
    (symbol) with the frame's file:line:column."""
    inner = [(x.get("function", ""), x.get("file", ""), x.get("line", 0), x.get("column", 0))
             for x in reversed(f.get("inline", []))]
    return inner + [(f.get("symbol", ""), f.get("file", ""), f.get("line", 0), f.get("column", 0))]


def thread_frames(ev):
    """{thread index: [(index in thread, frame)]}"""
    out = {}
    for f in ev["frames"]:
        lst = out.setdefault(f["thread"], [])
        lst.append((len(lst), f))
    return out


def expected_names(ev, modules):
    """llvm-symbolizer-14's chain for every frame of `modules` (files that exist): {(thread, k): chain}."""
    items = []
    for th, frames in thread_frames(ev).items():
        for k, f in frames:
            if f.get("module") in modules:
                items.append(((th, k), (f["module"], lookup_address(f, k))))
    return {key: chain for (key, _), chain in zip(items, llvm_chains([q for _, q in items]))}


def compare_names(ev, want, what, resolver=None):
    """Every frame in `want`: function, file:line:column and inline chain equal llvm-symbolizer-14's."""
    bad = 0
    frames = thread_frames(ev)
    for (th, k), chain in sorted(want.items()):
        f = frames[th][k][1]
        got = trace_chain(f)
        if got != chain:
            bad += 1
            if bad <= 8:
                check(False, "%s: thread %d frame %d (%s+0x%x): %r, llvm-symbolizer-14 %r"
                      % (what, th, k, f.get("module"), hexint(f["module_offset"]), got, chain))
        if resolver and (f.get("resolver") or "").split("+")[0] != resolver:
            bad += 1
            if bad <= 8:
                check(False, "%s: thread %d frame %d: resolver %r, want %r" % (what, th, k, f.get("resolver"),
                                                                             resolver))
    check(bad == 0 and want, "%s: %d frames: function, file:line:column and inline chain equal "
          "llvm-symbolizer-14's%s" % (what, len(want), " (resolver %s)" % resolver if resolver else ""))
    return bad == 0


def show(db, tid):
    """trace-show ID --json: (the trace.capture event, [replay.result events])."""
    p = sp("trace-show", tid, "--store", db.url, "--json")
    if not check(p.returncode == 0, "%s: trace-show %s --json: exit 0 (%s)" % (db.name, tid, p.stderr.strip())):
        raise RuntimeError("trace-show failed")
    evs = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    check(evs and evs[0].get("event") == "trace.capture" and evs[0].get("trace_id") == tid
          and all(e.get("event") == "replay.result" for e in evs[1:]),
          "%s: trace-show --json: a trace.capture line, then replay.result lines" % db.name)
    return evs[0], evs[1:]


# ------------------------------------------------------------------ JUnit

_junit_reports = []  # (path, what): validated together by validate_junit_reports


def validate_junit_reports():
    """xmllint --schema JUnit.xsd once for every JUnit report junit_cases read (none is written twice):
    it prints "PATH validates" for each file it accepts, and its errors name the file."""
    paths = sorted({path for path, _ in _junit_reports})
    if not paths:
        return
    p = run(["xmllint", "--noout", "--schema", XSD] + paths)
    lines = p.stderr.splitlines()
    for path, what in _junit_reports:
        ok = (path + " validates") in lines
        errors = [ln for ln in lines if path in ln and ln != path + " validates"]
        check(ok, "%s: xmllint --schema JUnit.xsd accepts the JUnit report %s (%s)"
              % (what, os.path.basename(path), "validates" if ok else ("\n".join(errors) or p.stderr.strip())[-600:]))
    del _junit_reports[:]


def junit_cases(path, what):
    """{check or 'seed N': failed?}; the report is validated against JUnit.xsd at the end (validate_junit_reports)."""
    _junit_reports.append((path, what))
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        check(False, "%s: JUnit report unreadable: %s" % (what, e))
        return {}
    cases = {}
    for tc in root.iter("testcase"):
        label = (tc.get("name", "") + " " + tc.get("classname", "")).lower()
        failed = tc.find("failure") is not None or tc.find("error") is not None
        m = re.search(r"seed\D{0,3}(\d+)", tc.get("name", "").lower())
        if m:
            key = "seed %d" % int(m.group(1))
        else:
            keys = [c for c in CHECKS if re.search(r"(^|[^a-z-])%s([^a-z-]|$)" % re.escape(c), label)]
            key = keys[0] if len(keys) == 1 else "?" + tc.get("name", "")
        if key in cases:
            check(False, "%s: two JUnit testcases for %s" % (what, key))
        cases[key] = failed
    for s in root.iter("testsuite"):
        n = len(list(s.iter("testcase")))
        nf = sum(1 for tc in s.iter("testcase") if tc.find("failure") is not None)
        check(s.get("tests") == str(n) and s.get("failures") == str(nf),
              "%s: testsuite tests=%s failures=%s match its %d testcases, %d failed"
              % (what, s.get("tests"), s.get("failures"), n, nf))
    return cases


def expect_cases(cases, seeds, failed, what, others_may_fail=()):
    """One testcase per check and per seed; exactly `failed` failed (plus possibly `others_may_fail`)."""
    want_keys = set(CHECKS) | {"seed %d" % s for s in seeds}
    check(set(cases) == want_keys, "%s: JUnit testcases are one per check and per seed: %s"
          % (what, sorted(cases)))
    got_failed = {k for k, v in cases.items() if v}
    check(set(failed) <= got_failed and got_failed - set(failed) <= set(others_may_fail),
          "%s: failed testcases %s (want %s%s)" % (what, sorted(got_failed), sorted(failed),
                                                 " and possibly %s" % sorted(others_may_fail) if others_may_fail else ""))


# ------------------------------------------------------------------ figures

def summary_figures(line):
    cov = re.search(r"([0-9]+(?:\.[0-9]+)?)\s*% coverage", line)
    suc = re.search(r"([0-9]+(?:\.[0-9]+)?)\s*% success", line)
    return (float(cov.group(1)) if cov else None, float(suc.group(1)) if suc else None)


def decimals(s):
    return len(s.split(".")[1]) if "." in s else 0


def close(a, b, printed):
    """a printed with `printed` decimals equals b."""
    return a is not None and b is not None and abs(a - b) <= 0.5 * 10 ** -printed + 1e-9


def report_figures(rep):
    """(coverage %, success ratio) of trace-replay --json."""
    cov = rep.get("symbol_coverage_pct", rep.get("coverage_pct"))
    suc = rep.get("replay_success_ratio", rep.get("success_ratio"))
    return cov, suc


def coverage_oracle(ev, want):
    """Symbol coverage computed here: the percentage of frames that have a function and, wherever
    llvm-symbolizer-14 gives a file:line for the frame's address, a file:line too.
    Returns (pct, covered, frames, [frames lacking a file:line llvm gives])."""
    covered, missing = 0, []
    for th, fl in thread_frames(ev).items():
        for k, f in fl:
            chain = want.get((th, k))
            llvm_line = bool(chain and chain[-1][1] and chain[-1][2])
            has_line = bool(f.get("file") and f.get("line"))
            if f.get("symbol") and (has_line or not llvm_line):
                covered += 1
            if llvm_line and not has_line:
                missing.append("thread %d #%d %s (llvm: %s:%d)" % (th, k, f.get("symbol") or "??", chain[-1][1],
                                                                  chain[-1][2]))
    n = len(ev["frames"])
    return (100.0 * covered / n if n else 0.0), covered, n, missing


def note_differences(ev, want, skip_module, what):
    """Frames of other modules (libc...) whose names differ from llvm-symbolizer-14's: printed, not failed
    (the physical function's name may come from a debug file's .symtab where llvm reads .dynsym)."""
    frames = thread_frames(ev)
    n = 0
    for (th, k), chain in sorted(want.items()):
        f = frames[th][k][1]
        if f.get("module") != skip_module and trace_chain(f) != chain:
            n += 1
            if n <= 6:
                print("NOTE: %s: thread %d #%d %s+%s: %r, llvm-symbolizer-14 %r"
                      % (what, th, k, f.get("module"), f.get("module_offset"), trace_chain(f), chain))
    return n


# ------------------------------------------------------------------ steps

def wait_file(path, proc, timeout=10):
    t = time.monotonic()
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() - t > timeout:
            return False
        time.sleep(0.01)
    return True


def read_tidfile(path):
    pid, tids = None, {}
    for line in open(path):
        parts = line.split()
        if parts[0] == "pid":
            pid = int(parts[1])
        elif parts[0] == "tid":
            tids[int(parts[1])] = parts[2]
    return pid, tids


def proc_tasks(pid):
    """/proc/PID/task: {tid: comm}"""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            out[int(t)] = open("/proc/%d/task/%s/comm" % (pid, t)).read().rstrip("\n")
        except OSError:
            pass
    return out


def capture_cmd(db, cmd, tidfile, extra, what):
    """trace-capture ... -- CMD: (id, stderr, fixture tids, /proc tasks) while CMD is parked."""
    p = subprocess.Popen([STACKPROV, "trace-capture", "--store", db.url, "--delay", str(CAPTURE_DELAY)] + extra
                         + ["--"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    tasks = {}
    if wait_file(tidfile, p):
        pid, tids = read_tidfile(tidfile)
        try:
            tasks = proc_tasks(pid)
        except OSError as e:
            check(False, "%s: /proc/%d/task while parked: %s" % (what, pid, e))
    else:
        pid, tids = None, {}
    try:
        out, err = p.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(p.returncode == 0, "%s: trace-capture -- %s: exit 0 (exit %d: %s)"
          % (what, os.path.basename(cmd[0]), p.returncode, err.strip()[-1500:]))
    check(pid is not None, "%s: the captured program wrote its tids (%s)" % (what, tidfile))
    tid = out.strip()
    check(UUID4.match(tid) is not None, "%s: trace-capture prints one UUID v4 (RFC 4122 version and variant "
          "bits): %r" % (what, out))
    if p.returncode != 0 or not UUID4.match(tid):
        raise RuntimeError("%s: no trace captured" % what)
    return tid, err, tids, tasks


def capture_pid(db, cmd, tidfile, extra, what):
    """CMD (parked long) started here, trace-capture --pid once it wrote TIDFILE, then killed:
    (id, stderr, the program's tids, /proc tasks)."""
    proc = subprocess.Popen(cmd, env=ENV)
    try:
        if not wait_file(tidfile, proc):
            raise RuntimeError("%s: %s did not get ready" % (what, cmd[0]))
        pid, tids = read_tidfile(tidfile)
        check(pid == proc.pid, "%s: the program's pid %s is the one started (%d)" % (what, pid, proc.pid))
        time.sleep(0.1)  # the threads were about to block when the file was written
        tasks = proc_tasks(proc.pid)
        p = sp("trace-capture", "--pid", proc.pid, "--store", db.url, *extra)
    finally:
        proc.kill()
        proc.wait()
    check(p.returncode == 0 and UUID4.match(p.stdout.strip()) is not None,
          "%s: trace-capture --pid: exit 0 and a UUID v4 (exit %d: %s %s)"
          % (what, p.returncode, p.stdout.strip(), p.stderr.strip()[-1500:]))
    if p.returncode != 0:
        raise RuntimeError("%s: no trace captured" % what)
    return p.stdout.strip(), p.stderr, tids, tasks


def check_threads(ev, tids, tasks, what):
    got = {t["tid"]: t["name"] for t in ev["threads"]}
    check(len(ev["threads"]) == len(tids) == len(tasks) and set(got) == set(tids) == set(tasks),
          "%s: %d threads, tids %s; the program reported %s, /proc/PID/task had %s"
          % (what, len(ev["threads"]), sorted(got), sorted(tids), sorted(tasks)))
    check(all(got.get(t) == tasks[t] for t in tasks), "%s: thread names equal /proc/PID/task/TID/comm: %s vs %s"
          % (what, got, tasks))
    in_frames = sorted({f["tid"] for f in ev["frames"]})
    check(in_frames == sorted(got), "%s: every thread has frames (frame tids %s)" % (what, in_frames))


def check_fixture_chains(ev, exe, tids, what):
    """The fixture module's frames of each thread are the call chain the fixture's source defines."""
    by_tid = {}
    for f in ev["frames"]:
        if f.get("module") == exe:
            by_tid.setdefault(f["tid"], []).append(f.get("symbol", ""))
    for t, name in tids.items():
        check(by_tid.get(t) == FIXTURE_CHAINS[name], "%s: thread %s (%d): fixture frames %s, the source's chain %s"
              % (what, name, t, by_tid.get(t), FIXTURE_CHAINS[name]))
    beta = [f for f in ev["frames"] if f.get("module") == exe and f.get("symbol") == "beta_outer"]
    check(len(beta) == 1 and [x.get("function") for x in beta[0].get("inline", [])] == ["beta_inline"],
          "%s: the beta_outer frame carries the inlined beta_inline: %s" % (what, beta[:1]))


def replay(db, tid, junit, args, what):
    cmd = ["trace-replay", "--trace", tid, "--store", db.url, "--seeds", "5"] + (["--junit", junit] if junit else []) + args
    t = time.monotonic()
    p = sp(*cmd)
    print("%s: %s: exit %d in %.1f s; stdout %s; stderr %s" % (db.name, what, p.returncode, time.monotonic() - t,
                                                              p.stdout.strip()[:400], p.stderr.strip()[:400]), flush=True)
    return p


def gate_case(db, tid, args, check_name, junit, what, others_may_fail=()):
    before = len(db_replays(db, tid))
    p = replay(db, tid, junit, args, what)
    code = GATE_EXIT[check_name]
    gate_line = [ln for ln in p.stderr.splitlines() if "gate FAILED" in ln]
    check(p.returncode == code and len(gate_line) == 1 and check_name in gate_line[0],
          "%s: %s: exit %d (want %d) and one stderr line 'gate FAILED: %s: ...' (%s)"
          % (db.name, what, p.returncode, code, check_name, p.stderr.strip()[-600:]))
    check(check_name in p.stdout and "FAIL" in p.stdout, "%s: %s: the summary names %s and FAIL: %s"
          % (db.name, what, check_name, p.stdout.strip()))
    cases = junit_cases(junit, "%s: %s" % (db.name, what))
    expect_cases(cases, range(1, 6), [check_name], "%s: %s" % (db.name, what), others_may_fail)
    check(len(db_replays(db, tid)) == before + 5, "%s: %s: 5 replays rows added" % (db.name, what))
    return p


# ------------------------------------------------------------------ one store

def pipeline(db, w, keys, log, otherlog, fixture, stripped, nobid, figures):
    name = db.name
    d = os.path.join(w, name)
    os.makedirs(d)
    bstore = os.path.join(d, "bundles")
    sign = ["--sign", keys["signer"], "--log", log, "--log-key", keys["logkey"]]
    pub = keys["signer"] + ".pub"
    root = os.path.join(log, "trusted_root.json")
    verify_keys = ["--key", pub, "--trusted-root", root]

    # ---- 1. capture the fixture (a private copy, deleted below)
    run_dir = os.path.join(d, "run")
    os.makedirs(run_dir)
    exe = os.path.join(run_dir, "fixture_pipeline")
    shutil.copy2(fixture, exe)
    fx_id = build_id(exe)
    tidfile = os.path.join(d, "tids.txt")
    t0 = time.monotonic()
    tid, err, tids, tasks = capture_cmd(db, [exe, str(FIXTURE_MS), tidfile],
                                        tidfile, ["--bundle", "--bundle-store", bstore] + sign, name + ": capture")
    print("%s: captured %s in %.1f s: %s" % (name, tid, time.monotonic() - t0, err.strip()), flush=True)
    check(re.search(r"exit(ed)?\D*0|status 0", err) is not None,
          "%s: trace-capture reports the program's exit status 0 on stderr" % name)
    ev, reps = show(db, tid)
    check(ev["build_id"] == fx_id and ev["platform"] == "linux" and ev["arch"] == "x86_64",
          "%s: trace build_id is readelf's %s (got %s), platform linux/x86_64" % (name, fx_id, ev.get("build_id")))
    check(not reps, "%s: a new trace has no replays" % name)
    check_threads(ev, tids, tasks, name + ": capture")
    check(set(tids.values()) == set(FIXTURE_CHAINS), "%s: the fixture's threads are %s" % (name, sorted(tids.values())))
    check_fixture_chains(ev, exe, tids, name + ": capture")
    fx_frames = [f for f in ev["frames"] if f.get("module") == exe]
    check(fx_frames and all(f.get("module_build_id") == fx_id for f in fx_frames),
          "%s: every fixture frame's module_build_id is readelf's" % name)
    bundle_ref = ev.get("symbol_bundle_ref") or ""
    check(re.fullmatch(r"sha256:[0-9a-f]{64}", bundle_ref) is not None and (ev.get("dsse_ref") or "").startswith("dsse:"),
          "%s: the trace names its bundle and DSSE envelope: %s %s" % (name, bundle_ref, ev.get("dsse_ref")))
    mods = {f["module"] for f in ev["frames"] if f.get("module", "").startswith("/") and os.path.exists(f["module"])}
    want_all = expected_names(ev, mods)
    frames_by_thread = thread_frames(ev)
    want = {key: c for key, c in want_all.items() if frames_by_thread[key[0]][key[1]][1].get("module") == exe}
    compare_names(ev, want, name + ": capture vs llvm-symbolizer-14 on the fixture")
    starts = function_starts(exe)
    check_symbol_offsets(ev, exe, starts, name + ": capture")
    note_differences(ev, want_all, exe, name + ": capture")
    check_rows(db, ev, "capture")
    # A trace replayed as captured (no trace-resolve first): the replays name frames from the bundle
    # alone, and must find what the capture recorded.
    p = replay(db, tid, None, verify_keys, "replay right after the capture")
    check(p.returncode == 0 and "100.0% success" in p.stdout,
          "%s: trace-replay right after trace-capture --bundle (no trace-resolve): exit 0, 100%% success "
          "(exit %d: %s %s)" % (name, p.returncode, p.stdout.strip(), p.stderr.strip()[-600:]))
    lst = sp("trace-list", "--store", db.url, "--json")
    ls = json.loads(lst.stdout) if lst.returncode == 0 else []
    check(any(x.get("trace_id") == tid and x.get("frames") == len(ev["frames"]) for x in ls),
          "%s: trace-list --json lists the trace with its %d frames" % (name, len(ev["frames"])))

    # ---- 2. the binary deleted; resolve offline from the bundle
    shutil.rmtree(run_dir)
    p = sp("trace-resolve", "--trace", tid, "--store", db.url, "--offline", "--json")
    check(p.returncode == 0, "%s: trace-resolve --offline --json: exit 0 (%s)" % (name, p.stderr.strip()[-800:]))
    rr = json.loads(p.stdout) if p.returncode == 0 else {}
    ev2, _ = show(db, tid)
    check(len(ev2["frames"]) == len(ev["frames"]) and
          [(f["thread"], f["ip"], f.get("module")) for f in ev2["frames"]] ==
          [(f["thread"], f["ip"], f.get("module")) for f in ev["frames"]],
          "%s: offline resolve: the same frames (threads, ips, modules)" % name)
    compare_names(ev2, want, name + ": offline resolve (binary deleted) vs llvm-symbolizer-14 before", resolver="bundle")
    pos = lambda f: [(x[1], x[2], x[3]) for x in trace_chain(f)]  # noqa: E731  file:line:column, inline chain
    changed = [i for i, (a, b) in enumerate(zip(ev["frames"], ev2["frames"]))
               if (a.get("module") == exe and trace_chain(a) != trace_chain(b)) or pos(a) != pos(b)]
    check(not changed, "%s: offline resolve: every fixture frame unchanged (function, file:line:column, inline "
          "chain) and every other frame's file:line:column and inline chain unchanged (changed: %s)"
          % (name, [(ev["frames"][i], ev2["frames"][i]) for i in changed[:2]]))
    check_symbol_offsets(ev2, exe, starts, name + ": offline resolve")
    n = len(ev2["frames"])
    named = sum(1 for f in ev2["frames"] if f.get("symbol"))
    lines = sum(1 for f in ev2["frames"] if f.get("file") and f.get("line"))
    resolvers = {}
    for f in ev2["frames"]:
        resolvers[f.get("resolver", "")] = resolvers.get(f.get("resolver", ""), 0) + 1
    check(rr.get("trace_id") == tid and rr.get("frames") == n and rr.get("named") == named
          and rr.get("with_lines") == lines and close(rr.get("symbol_coverage_pct"), 100.0 * named / n, 6)
          and rr.get("resolvers") == resolvers,
          "%s: the resolve report's figures equal the frames' (%d frames, %d named, %d with lines, resolvers %s): %s"
          % (name, n, named, lines, resolvers, json.dumps(rr)[:600]))
    check_rows(db, ev2, "after offline resolve")
    note_differences(ev2, want_all, exe, name + ": offline resolve")
    cov_frames, covered, nframes, missing = coverage_oracle(ev2, want_all)
    check(not missing, "%s: offline resolve: every frame has a file:line where llvm-symbolizer-14 gives one "
          "(missing: %s)" % (name, missing[:6]))
    print("%s: coverage computed from the frames: %d of %d = %.4f%%" % (name, covered, nframes, cov_frames))

    # ---- 3. replay, the gate passing
    junit = os.path.join(d, "replay.xml")
    before = len(db_replays(db, tid))
    p = replay(db, tid, junit, verify_keys, "replay 5 seeds")
    check(p.returncode == 0, "%s: trace-replay --seeds 5 with the key and trusted root: exit 0 (exit %d: %s %s)"
          % (name, p.returncode, p.stdout.strip(), p.stderr.strip()[-800:]))
    summary = p.stdout.strip()
    check(len(summary.splitlines()) == 1 and "PASS" in summary, "%s: one summary line with PASS: %r" % (name, summary))
    s_cov, s_suc = summary_figures(summary)
    cases = junit_cases(junit, name + ": replay")
    expect_cases(cases, range(1, 6), [], name + ": replay")
    rows = db_replays(db, tid)
    new = rows[before:]
    check(len(rows) == before + 5 and sorted(r["seed"] for r in new) == [1, 2, 3, 4, 5],
          "%s: 5 new replays rows, seeds 1..5 (%s CLI): %s" % (name, db.name, [r["seed"] for r in new]))
    row_suc = sum(r["replay_success_ratio"] for r in new) / max(len(new), 1)
    row_cov = [r["symbol_coverage_pct"] for r in new]
    cov_dec = decimals(re.search(r"([0-9.]+)\s*% coverage", summary).group(1)) if s_cov is not None else 0
    suc_dec = decimals(re.search(r"([0-9.]+)\s*% success", summary).group(1)) if s_suc is not None else 0
    check(s_cov is not None and s_suc is not None, "%s: the summary has '%% coverage' and '%% success': %r"
          % (name, summary))
    check(all(close(s_cov, c, cov_dec) for c in row_cov) and close(s_cov, cov_frames, cov_dec),
          "%s: summary coverage %s%% = each replays row's %s = computed from trace-show's frames %.4f%%"
          % (name, s_cov, row_cov, cov_frames))
    check(close(s_suc, 100 * row_suc, suc_dec) and all(r["replay_success_ratio"] == 1.0 for r in new),
          "%s: summary success %s%% = the rows' ratios %s (all 1.0)" % (name, s_suc,
                                                                        [r["replay_success_ratio"] for r in new]))
    _, reps = show(db, tid)
    check(sorted((r["replay_id"], r["seed"], r["replay_success_ratio"]) for r in reps) ==
          sorted((r["replay_id"], r["seed"], r["replay_success_ratio"]) for r in rows),
          "%s: trace-show's replay.result lines equal the replays rows" % name)
    p = sp("trace-replay", "--trace", tid, "--store", db.url, "--seeds", "5", "--json", *verify_keys)
    check(p.returncode == 0, "%s: trace-replay --json: exit 0 (%s)" % (name, p.stderr.strip()[-600:]))
    rep = json.loads(p.stdout) if p.returncode == 0 else {}
    j_cov, j_suc = report_figures(rep)
    rows2 = db_replays(db, tid)[len(rows):]
    check(len(rows2) == 5, "%s: the --json run added 5 rows" % name)
    check(close(j_cov, cov_frames, 6) and close(s_cov, j_cov, cov_dec) and
          all(close(j_cov, r["symbol_coverage_pct"], 6) for r in rows2),
          "%s: JSON report coverage %s = summary %s = rows %s" % (name, j_cov, s_cov,
                                                                  [r["symbol_coverage_pct"] for r in rows2]))
    check(j_suc is not None and close(j_suc, sum(r["replay_success_ratio"] for r in rows2) / 5, 9)
          and close(s_suc, 100 * j_suc, suc_dec),
          "%s: JSON report success ratio %s = mean of its rows %s = summary %s%%"
          % (name, j_suc, [r["replay_success_ratio"] for r in rows2], s_suc))
    figures[name + " fixture"] = (j_cov, j_suc)

    # ---- 4. the gate
    # (b) dsse: no key, another key
    gate_case(db, tid, ["--trusted-root", root], "dsse", os.path.join(d, "nokey.xml"), "replay without --key")
    gate_case(db, tid, ["--key", keys["other"] + ".pub", "--trusted-root", root], "dsse",
              os.path.join(d, "otherkey.xml"), "replay with another key")
    # (c) inclusion: another log's trusted root
    gate_case(db, tid, ["--key", pub, "--trusted-root", os.path.join(otherlog, "trusted_root.json")], "inclusion",
              os.path.join(d, "otherroot.xml"), "replay with another log's trusted root")
    gate_case(db, tid, ["--key", pub], "inclusion", os.path.join(d, "noroot.xml"), "replay without --trusted-root")
    # (a) coverage: stripped, no DWARF, no symbols, no bundle
    srun = os.path.join(d, "srun")
    os.makedirs(srun)
    sexe = os.path.join(srun, "fixture_stripped")
    shutil.copy2(stripped, sexe)
    sid = capture_pid(db, [sexe, "60000", os.path.join(d, "stids.txt")], os.path.join(d, "stids.txt"), [],
                      name + ": stripped capture")[0]
    sev, _ = show(db, sid)
    s_fx = [f for f in sev["frames"] if f.get("module") == sexe]
    check(len(s_fx) >= 20 and not any(f.get("symbol") for f in s_fx),
          "%s: stripped fixture: %d frames in it, none named" % (name, len(s_fx)))
    seeds = ["seed %d" % i for i in range(1, 6)]
    # Replays read bundles only: without one for the fixture its frames cannot be unwound again
    # (success and the seeds fail too), and there is nothing to verify (dsse, inclusion, platform-id).
    gate_case(db, sid, verify_keys, "coverage", os.path.join(d, "stripped.xml"), "stripped fixture, no bundle",
              others_may_fail=["success", "dsse", "inclusion", "platform-id"] + seeds)
    # (d) success: nothing can reproduce it once its binary is gone (no bundle holds it)
    shutil.rmtree(srun)
    gate_case(db, sid, verify_keys + ["--min-coverage", "0"], "success", os.path.join(d, "stripped-gone.xml"),
              "stripped fixture deleted, --min-coverage 0",
              others_may_fail=["dsse", "inclusion", "platform-id"] + seeds)
    cases = junit_cases(os.path.join(d, "stripped-gone.xml"), "%s: stripped fixture deleted" % name)
    check(any(cases.get(k) for k in seeds), "%s: stripped fixture deleted: the seeds' testcases show the "
          "mismatches (%s)" % (name, {k: cases.get(k) for k in seeds}))
    rows = db_replays(db, sid)[-5:]
    check(any(r["replay_success_ratio"] < 1.0 for r in rows),
          "%s: the deleted stripped fixture's replays rows show mismatches: %s"
          % (name, [r["replay_success_ratio"] for r in rows]))
    # (a') coverage alone: a stripped fixture with a signed bundle (CFI, no names) passes every other check
    srun = os.path.join(d, "srun2")
    os.makedirs(srun)
    sexe = os.path.join(srun, "fixture_stripped")
    shutil.copy2(stripped, sexe)
    sid2 = capture_pid(db, [sexe, "60000", os.path.join(d, "stids2.txt")], os.path.join(d, "stids2.txt"),
                       ["--bundle", "--bundle-store", bstore] + sign, name + ": stripped capture with a bundle")[0]
    p = gate_case(db, sid2, verify_keys, "coverage", os.path.join(d, "stripped-bundle.xml"),
                  "stripped fixture with a signed bundle")
    sev2, _ = show(db, sid2)
    smods = {f["module"] for f in sev2["frames"] if f.get("module", "").startswith("/") and os.path.exists(f["module"])}
    s_cov = coverage_oracle(sev2, expected_names(sev2, smods))[0]
    got = summary_figures(p.stdout)[0]
    check(close(got, s_cov, 1) and s_cov < 90, "%s: stripped fixture with a bundle: summary coverage %s%% = computed "
          "from its frames and llvm-symbolizer-14 %.4f%%" % (name, got, s_cov))
    shutil.rmtree(srun)
    # (e) platform-id: one more thread parked in a library without a build-id (fixture_nobid.c), which no
    # bundle can hold; frame pointers let the replay step through it, so only platform-id fails
    srun = os.path.join(d, "nrun")
    os.makedirs(srun)
    nexe = os.path.join(srun, "fixture_pipeline")
    shutil.copy2(fixture, nexe)
    nlib = os.path.join(srun, "libnobid.so")
    shutil.copy2(nobid, nlib)
    ntids = os.path.join(d, "ntids.txt")
    nid, _, tids, tasks = capture_pid(db, [nexe, "60000", ntids, nlib], ntids,
                                      ["--bundle", "--bundle-store", bstore] + sign, name + ": fixture with libnobid.so")
    nev, _ = show(db, nid)
    check_threads(nev, {t: tasks[t] for t in tasks}, tasks, name + ": fixture with libnobid.so")
    check(any(f.get("module") == nlib for f in nev["frames"]),
          "%s: a frame of libnobid.so (no build-id) is in the trace" % name)
    p = sp("trace-resolve", "--trace", nid, "--store", db.url, "--offline")
    check(p.returncode == 0, "%s: fixture with libnobid.so: trace-resolve --offline (%s)" % (name, p.stderr.strip()))
    gate_case(db, nid, verify_keys + ["--min-coverage", "0"], "platform-id", os.path.join(d, "nobid.xml"),
              "fixture with a library without build-id, --min-coverage 0")
    shutil.rmtree(srun)

    # ---- 5. trace-verify from the trace store, then a tampered copy
    vargs = ["trace-verify", "--bundle", bundle_ref, "--dsse", "--rekor", "--key", pub, "--trusted-root", root]
    p = sp(*vargs, "--store", db.url)
    check(p.returncode == 0 and "OK" in p.stdout, "%s: trace-verify --store %s: exit 0 (exit %d: %s)"
          % (name, db.url, p.returncode, (p.stdout + p.stderr).strip()[-600:]))
    bare = bundle_ref[len("sha256:"):]
    env_row = db.query("SELECT dsse_envelope FROM symbol_bundles WHERE sha256 = '%s'" % bare)
    if check(len(env_row) == 1 and env_row[0]["dsse_envelope"], "%s: the bundle's envelope is in symbol_bundles" % name):
        envl = json.loads(env_row[0]["dsse_envelope"])
        sig = bytearray(base64.b64decode(envl["signatures"][0]["sig"]))
        sig[-1] ^= 1
        envl["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
        bad = db.copy("tampered_sig")
        bad.script("UPDATE symbol_bundles SET dsse_envelope = '%s' WHERE sha256 = '%s';"
                   % (json.dumps(envl).replace("'", "''"), bare))
        p = sp(*vargs, "--store", bad.url)
        check(p.returncode == 1 and "dsse" in (p.stdout + p.stderr).lower(),
              "%s: trace-verify on a copy with the envelope's signature altered: exit 1 naming dsse (exit %d: %s)"
              % (name, p.returncode, (p.stdout + p.stderr).strip()[-600:]))
        bad2 = db.copy("tampered_blob")
        # one byte of the blob altered (the 100th), its key kept
        if name == "sqlite":
            blob = os.path.join(d, "blob.bin")
            bad2.query("SELECT writefile('%s', bundle_blob) AS n FROM symbol_bundles WHERE sha256 = '%s'" % (blob, bare))
            with open(blob, "r+b") as f:
                f.seek(99)
                b = f.read(1)
                f.seek(99)
                f.write(bytes([b[0] ^ 1]))
            bad2.script("UPDATE symbol_bundles SET bundle_blob = readfile('%s') WHERE sha256 = '%s';" % (blob, bare))
        else:
            bad2.script("UPDATE symbol_bundles SET bundle_blob = set_byte(bundle_blob, 99, get_byte(bundle_blob, 99) # 1)"
                        " WHERE sha256 = '%s';" % bare)
        p = sp(*vargs, "--store", bad2.url)
        check(p.returncode == 1, "%s: trace-verify on a copy with one bundle byte altered: exit 1 (exit %d: %s)"
              % (name, p.returncode, (p.stdout + p.stderr).strip()[-600:]))

    # ---- 6. python3.11 sleeping in nested Python functions
    python_case(db, d, bstore, sign, verify_keys, figures)


PY_SCRIPT = r"""
import os, sys, threading, time

def leaf(s):
    time.sleep(s)

def middle(s):
    leaf(s)

def outer(s):
    middle(s)

def worker(s):
    outer(s)

secs, tidfile = float(sys.argv[1]), sys.argv[2]
t = threading.Thread(target=worker, args=(secs,), name="pyworker")
t.start()
time.sleep(0.05)
with open(tidfile + ".tmp", "w") as f:
    f.write("pid %d\n" % os.getpid())
    f.write("tid %d main\n" % threading.get_native_id())
    f.write("tid %d pyworker\n" % t.native_id)
os.rename(tidfile + ".tmp", tidfile)
outer(secs - 0.05)
t.join()
"""


def python_case(db, d, bstore, sign, verify_keys, figures):
    name = db.name + ": python3.11"
    script = os.path.join(d, "nested_sleep.py")
    with open(script, "w") as f:
        f.write(PY_SCRIPT)
    tidfile = os.path.join(d, "pytids.txt")
    tid, err, tids, tasks = capture_pid(db, [PY311, script, "600", tidfile], tidfile,
                                        ["--bundle", "--bundle-store", bstore] + sign, name)
    ev, _ = show(db, tid)
    check_threads(ev, tids, tasks, name)
    # llvm-symbolizer-14 on the modules (python3.11 finds its DWARF in python3.11-dbg by build-id)
    mods = {f["module"] for f in ev["frames"] if f.get("module", "").startswith("/") and os.path.exists(f["module"])}
    want = expected_names(ev, mods)
    p = sp("trace-resolve", "--trace", tid, "--store", db.url, "--offline", "--json")
    check(p.returncode == 0, "%s: trace-resolve --offline: exit 0 (%s)" % (name, p.stderr.strip()[-600:]))
    ev2, _ = show(db, tid)
    check([(f["thread"], f["ip"]) for f in ev2["frames"]] == [(f["thread"], f["ip"]) for f in ev["frames"]],
          "%s: offline resolve keeps the frames" % name)
    computed, covered, n, missing_lines = coverage_oracle(ev2, want)
    differ = note_differences(ev2, want, None, name)
    check(not missing_lines, "%s: every frame has a file:line where llvm-symbolizer-14 gives one (missing: %s)"
          % (name, missing_lines[:8]))
    p = sp("trace-replay", "--trace", tid, "--store", db.url, "--seeds", "5", "--min-coverage", "0",
           "--min-success", "0", "--json", "--junit", os.path.join(d, "python.xml"), *verify_keys)
    check(p.returncode == 0, "%s: trace-replay --min-coverage 0 --min-success 0: exit 0 (exit %d: %s)"
          % (name, p.returncode, p.stderr.strip()[-600:]))
    rep = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}
    cov, suc = report_figures(rep)
    print("FIGURE python3.11 %s coverage=%s success=%s (frames %d, covered here %d = %.4f%%, %d named; "
          "names differing from llvm-symbolizer-14: %d)" % (db.name, cov, suc, n, covered, computed,
                                                            sum(1 for f in ev2["frames"] if f.get("symbol")),
                                                            differ), flush=True)
    figures[db.name + " python3.11"] = (cov, suc)
    check(suc == 1.0, "%s: replay success ratio 1.0 (got %s)" % (name, suc))
    check(close(cov, computed, 6), "%s: reported coverage %s%% = computed from trace-show's frames %.6f%%"
          % (name, cov, computed))
    cases = junit_cases(os.path.join(d, "python.xml"), name)
    expect_cases(cases, range(1, 6), [], name)


def cmd_exits_early(db, w):
    """trace-capture --bundle -- CMD where CMD exits on its own while the trace is resolved and its
    bundle built (python3.11 living 1 s; naming its frames and building the bundle of python3.11 with
    its DWARF takes longer): the capture is complete, so the trace must be stored."""
    p = sp("trace-capture", "--store", db.url, "--bundle", "--bundle-store", os.path.join(w, "early-bundles"),
           "--delay", "300", "--", PY311, "-c", "import time; time.sleep(1)", timeout=300)
    check(p.returncode == 0 and UUID4.match(p.stdout.strip()) is not None,
          "trace-capture --bundle -- python3.11 (exits 1 s after its start, during the capture's resolve and "
          "bundle build): exit 0 and a trace id (exit %d: %s %s)" % (p.returncode, p.stdout.strip(),
                                                                    p.stderr.strip()[-800:]))


# ------------------------------------------------------------------ main

def main():
    global STACKPROV, ENV
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", choices=["sqlite", "postgresql"])
    a = ap.parse_args()
    STACKPROV = os.path.abspath(a.stackprov)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not os.access(STACKPROV, os.X_OK):
        missing.append(STACKPROV)
    if not os.path.exists(XSD):
        missing.append(XSD)
    if missing:
        print("FAIL: missing tools: %s (make deps installs them)" % ", ".join(missing))
        return 1
    p = run([STACKPROV, "trace-capture", "--help"], env=None)
    if p.returncode != 0:
        print("FAIL: %s trace-capture --help exited %d: %s" % (STACKPROV, p.returncode, p.stderr.strip()))
        return 1
    w = os.path.abspath(a.work)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    # A private environment: no user store, bundle store or debuginfod.
    ENV = {k: v for k, v in os.environ.items() if not k.startswith(("STACKPROV_", "DEBUGINFOD_", "XDG_"))}
    ENV.update(HOME=os.path.join(w, "home"), XDG_DATA_HOME=os.path.join(w, "home", "data"),
               XDG_CACHE_HOME=os.path.join(w, "home", "cache"), TMPDIR=os.path.join(w, "tmp"))
    for k in ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "TMPDIR"):
        os.makedirs(ENV[k], exist_ok=True)
    t0 = time.monotonic()

    fixture = os.path.join(w, "fixture_pipeline")
    stripped = os.path.join(w, "fixture_stripped")
    must(["gcc", "-g", "-O2", "-pthread", "-o", fixture, FIXTURE_SRC])
    must(["gcc", "-O2", "-s", "-pthread", "-o", stripped, FIXTURE_SRC])
    nobid = os.path.join(w, "libnobid.so")
    must(["gcc", "-shared", "-fPIC", "-O2", "-fno-omit-frame-pointer", "-fvisibility=hidden", "-s",
          "-Wl,--build-id=none", "-pthread", "-o", nobid, NOBID_SRC])
    check("Build ID" not in must(["readelf", "-n", nobid]), "libnobid.so has no build-id (readelf -n)")
    check(".symtab" not in must(["readelf", "-S", stripped]) and ".debug_info" not in must(["readelf", "-S", stripped]),
          "the stripped fixture has neither .symtab nor DWARF (readelf -S)")

    keys = {k: os.path.join(w, "keys", k) for k in ("signer", "other", "logkey", "otherlogkey")}
    os.makedirs(os.path.join(w, "keys"))
    for k in keys.values():
        must([STACKPROV, "keygen", "--out", k])
    log = os.path.join(w, "log")
    otherlog = os.path.join(w, "elsewhere", "log")
    os.makedirs(os.path.dirname(otherlog))
    must([STACKPROV, "log", "init", log, "--key", keys["logkey"]])
    must([STACKPROV, "log", "init", otherlog, "--key", keys["otherlogkey"]])

    figures = {}
    server = None
    try:
        if a.only in (None, "sqlite"):
            pipeline(SqliteDb(os.path.join(w, "traces.db")), w, keys, log, otherlog, fixture, stripped, nobid, figures)
            cmd_exits_early(SqliteDb(os.path.join(w, "early.db")), w)
            print("sqlite done at %.1f s" % (time.monotonic() - t0), flush=True)
        if a.only in (None, "postgresql"):
            server = PgServer(w)
            print("postgresql started on 127.0.0.1:%d" % server.port, flush=True)
            pipeline(PgDb(server, "traces"), w, keys, log, otherlog, fixture, stripped, nobid, figures)
            print("postgresql done at %.1f s" % (time.monotonic() - t0), flush=True)
    except Exception as e:  # a crashed step is a failed test, with its reason
        check(False, "pipeline aborted: %r" % e)
        import traceback
        traceback.print_exc()
    finally:
        close_all()
        if server:
            server.stop()
    validate_junit_reports()
    left = os.listdir(ENV["TMPDIR"])
    check(not left, "no temporary directory left in $TMPDIR by the commands (staged bundles, exported stores): %s"
          % left[:5])
    for k, (c, s) in sorted(figures.items()):
        print("figures %s: coverage %s%%, success %s" % (k, c, s))
    print("total %.1f s" % (time.monotonic() - t0))
    if failures:
        print("%d FAILURES:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
