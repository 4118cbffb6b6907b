# SPDX-License-Identifier: Apache-2.0
# `python3 -m stackprov trace-capture|trace-list|trace-show|trace-resolve|trace-replay|bundle ...|
# trace-verify|verify-sigstore` against `stackprov <cmd>` (the C CLI) on the same real inputs: a gcore
# core of the parked fixture, traces of it and of the live fixture in SQLite stores made here,
# bundles, a key and a transparency log made by the CLI, and the Sigstore vectors of tests/data.
# Same stdout (normalised only where noted) and the same exit status; bad input exits as the CLI
# does, one line naming the value.
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import need_env, need_tool

SIGSTORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "data", "sigstore")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def cli(args, env):
    return subprocess.run([need_env("STACKPROV_CLI")] + args, capture_output=True, text=True, timeout=300, env=env)


def py(args, env):
    return subprocess.run([sys.executable, "-m", "stackprov"] + args, capture_output=True, text=True, timeout=300,
                          env=env)


def both(args, env):
    """(CLI result, python3 -m stackprov result) of one command line."""
    return cli(args, env), py(args, env)


def assert_same(args, env, status=0):
    want, got = both(args, env)
    assert want.returncode == status, (args, want.stderr)
    assert (got.stdout, got.returncode) == (want.stdout, want.returncode), (args, got.stderr)
    return got.stdout


def assert_same_error(args, env, status, shown):
    """Both exit `status` with one line on stderr that names `shown`, and print nothing."""
    want, got = both(args, env)
    assert (want.returncode, got.returncode) == (status, status), (args, want.stderr, got.stderr)
    assert shown in want.stderr and shown in got.stderr, (args, got.stderr)
    assert len(got.stderr.splitlines()) == 1, got.stderr
    assert got.stdout == want.stdout == ""


@pytest.fixture(scope="module")
def world(fixture_bench, tmp_path_factory):
    """A core of the parked fixture; a trace store holding a trace of it (captured by the CLI); a
    second store with a signed, bundled trace of the live fixture; key, log, bundle store. Every
    command runs with a private XDG_DATA_HOME (so no default store outside tmp is read)."""
    tmp = tmp_path_factory.mktemp("cmds")
    env = dict(os.environ, XDG_DATA_HOME=str(tmp / "xdg"))
    env.pop("STACKPROV_STORE", None)
    r = subprocess.run([need_tool("gcore"), "-o", str(tmp / "core"), str(fixture_bench.pid)], capture_output=True,
                       text=True, timeout=120)
    core = "%s.%d" % (tmp / "core", fixture_bench.pid)
    if not os.path.exists(core):
        pytest.fail("gcore failed: %s" % r.stderr)
    key, log = str(tmp / "k.pem"), str(tmp / "log")
    for args in (["keygen", "-o", key], ["log", "init", log, "--key", key], ["keygen", "-o", str(tmp / "other.pem")]):
        r = cli(args, env)
        assert r.returncode == 0, r.stderr
    w = {"env": env, "tmp": tmp, "core": core, "pid": fixture_bench.pid, "key": key, "pub": key + ".pub", "log": log,
         "root": os.path.join(log, "trusted_root.json"), "other_pub": str(tmp / "other.pem.pub"),
         "url": "sqlite:%s" % (tmp / "core.db"), "signed_url": "sqlite:%s" % (tmp / "signed.db"),
         "bundles": str(tmp / "bundles")}
    r = cli(["trace-capture", "--core", core, "--store", w["url"]], env)
    assert r.returncode == 0, r.stderr
    w["core_id"] = r.stdout.strip()
    r = cli(["trace-capture", "-p", str(fixture_bench.pid), "--store", w["signed_url"], "--bundle", "--bundle-store",
             w["bundles"], "--sign", key, "--log", log], env)
    assert r.returncode == 0, r.stderr
    w["signed_id"] = r.stdout.strip()
    show = cli(["trace-show", w["signed_id"], "--store", w["signed_url"], "--json"], env)
    w["digest"] = json.loads(show.stdout.splitlines()[0])["symbol_bundle_ref"]
    assert w["digest"].startswith("sha256:")
    return w


def show_body(trace_id, url, env):
    """`stackprov trace-show ID` without its first line: that header names the trace id and its
    capture time, the two things two captures of the same target legitimately differ in."""
    r = cli(["trace-show", trace_id, "--store", url], env)
    assert r.returncode == 0, r.stderr
    head, _, body = r.stdout.partition("\n")
    assert head.startswith("trace %s: " % trace_id)
    return body


def test_python_m_trace_capture_equals_cli(world):
    env, url = world["env"], "sqlite:%s" % (world["tmp"] / "capture.db")
    # The same core captured by each: stdout is one new trace id each (ids differ by design), and
    # the stored traces read back by the CLI are the same apart from the header (id, time).
    for extra in ([], ["--max-frames", "3"], ["--exe", need_env("STACKPROV_FIXTURE")]):
        want, got = both(["trace-capture", "--core", world["core"], "--store", url] + extra, env)
        assert (want.returncode, got.returncode) == (0, 0), (extra, want.stderr, got.stderr)
        ids = [want.stdout.strip(), got.stdout.strip()]
        assert all(UUID.match(i) for i in ids) and want.stdout.count("\n") == got.stdout.count("\n") == 1
        assert show_body(ids[0], url, env) == show_body(ids[1], url, env), extra
        # the summary line on stderr: the same counts
        assert want.stderr.split(": ", 2)[2] == got.stderr.split(": ", 2)[2], (want.stderr, got.stderr)
    # The live fixture with a signed bundle into a fresh bundle store each: same frames, same
    # bundle digest (its bytes are deterministic), both stores' bundles verify.
    ids = []
    for run, store in ((cli, "bs-cli"), (py, "bs-py")):
        r = run(["trace-capture", "-p", str(world["pid"]), "--store", url, "--bundle", "--bundle-store",
                 str(world["tmp"] / store), "--sign", world["key"], "--log", world["log"]], env)
        assert r.returncode == 0, r.stderr
        assert "(signed, log entry " in r.stderr
        ids.append(r.stdout.strip())
    assert show_body(ids[0], url, env) == show_body(ids[1], url, env)
    assert "symbol bundle sha256:" in show_body(ids[1], url, env)
    # bad input: a core that does not exist (2), a pid that does not exist (1), --sign without --bundle (2)
    assert_same_error(["trace-capture", "--core", "/nonexistent/core.1", "--store", url], env, 2, "/nonexistent/core.1")
    assert_same_error(["trace-capture", "-p", "2147483647", "--store", url], env, 1, "2147483647")
    assert_same_error(["trace-capture", "-p", "1", "--sign", world["key"], "--store", url], env, 2, world["key"])
    assert_same_error(["trace-capture", "--store", url, "--", "/nonexistent/cmd"], env, 1, "/nonexistent/cmd")


def test_python_m_trace_capture_command(world):
    """-- CMD: both run the command, capture it after --delay, wait for it and report its status."""
    env, url = world["env"], "sqlite:%s" % (world["tmp"] / "cmd.db")
    ids = []
    for run in (cli, py):
        r = run(["trace-capture", "--store", url, "--delay", "200", "--", "sh", "-c", "sleep 1; exit 3"], env)
        assert r.returncode == 0, r.stderr
        assert "'sh' exited (exit status 3)" in r.stderr
        ids.append(r.stdout.strip())
    assert all(UUID.match(i) for i in ids)
    # a shell asleep in sleep(1)'s wait: one thread each, named sh (`TID n "sh":`, as `stack` prints it)
    assert show_body(ids[0], url, env).startswith("TID ") and '"sh"' in show_body(ids[1], url, env)
    assert_same_error(["trace-capture", "--store", url, "--delay", "200", "--", "sh", "-c", "exit 3"], env, 1,
                      "'sh' exited before the capture (exit status 3)")


def test_python_m_trace_list_equals_cli(world):
    env = world["env"]
    for extra in ([], ["--json"], ["--limit", "1"], ["--limit", "0", "--json"]):
        out = assert_same(["trace-list", "--store", world["url"]] + extra, env)
        assert world["core_id"] in out
    assert_same_error(["trace-list", "--limit", "-3", "--store", world["url"]], env, 2, "'-3'")
    missing = "sqlite:%s" % (world["tmp"] / "none.db")
    assert_same_error(["trace-list", "--store", missing], env, 2, missing)
    assert_same_error(["trace-list", "--store", "mysql://x"], env, 2, "mysql://x")


def test_python_m_trace_show_equals_cli(world):
    env = world["env"]
    for tid, url in ((world["core_id"], world["url"]), (world["signed_id"], world["signed_url"])):
        for extra in ([], ["--json"]):
            out = assert_same(["trace-show", tid, "--store", url] + extra, env)
            assert tid in out
    # upper-case ids are read as lower-case by both
    assert_same(["trace-show", world["core_id"].upper(), "--store", world["url"]], env)
    unknown = "00000000-0000-0000-0000-00000000abcd"
    assert_same_error(["trace-show", unknown, "--store", world["url"]], env, 1, unknown)
    assert_same_error(["trace-show", "not-an-id", "--store", world["url"]], env, 2, "'not-an-id'")


def test_python_m_trace_resolve_equals_cli(world):
    env, url, tid = world["env"], world["signed_url"], world["signed_id"]
    bundle_file = str(world["tmp"] / "b.sbundle")
    with open(os.path.join(world["bundles"], "blobs", "sha256", world["digest"][7:9], world["digest"][7:]), "rb") as f:
        data = f.read()
    with open(bundle_file, "wb") as f:
        f.write(data)
    # Each pair runs on the same store state: resolving replaces the frames with what the
    # captured data gives again, so a second resolve with the same options reports the same.
    for extra in ([], ["--json"], ["--offline"], ["--offline", "--json"], ["--bundle", world["digest"], "--offline"],
                  ["--bundle", bundle_file, "--json"]):
        out = assert_same(["trace-resolve", "--trace", tid, "--store", url] + extra, env)
        if "--json" not in extra:
            assert out.startswith("trace %s: " % tid) and "coverage (resolvers: " in out
    unknown = "00000000-0000-0000-0000-00000000abcd"
    assert_same_error(["trace-resolve", "--trace", unknown, "--store", url], env, 1, unknown)
    assert_same_error(["trace-resolve", "--trace", tid, "--store", url, "--bundle", "sha256:xyz"], env, 2, "sha256:xyz")
    assert_same_error(["trace-resolve", "--trace", tid, "--store", url, "--bundle", "/nonexistent.sbundle"], env, 2,
                      "/nonexistent.sbundle")


def stable_report(text):
    """A replay report without what differs between two replays of one trace: the new replay
    rows' ids and the verification timings (wall-clock)."""
    j = json.loads(text)
    for s in j["seeds"]:
        s.pop("replay_id", None)
        s.pop("verify_time_ms", None)
    return j


def test_python_m_trace_replay_equals_cli(world, tmp_path):
    env, url, tid = world["env"], world["signed_url"], world["signed_id"]
    trust = ["--key", world["pub"], "--trusted-root", world["root"]]
    # the summary line and the gate's exit status: no keys (5: dsse), keys and root (0), coverage 100
    for extra, status in (([], 5), (trust, 0), (trust + ["--min-coverage", "100"], None)):
        want, got = both(["trace-replay", "--trace", tid, "--store", url, "--seeds", "2"] + extra, env)
        assert status is None or want.returncode == status, (extra, want.stderr)
        assert (got.stdout, got.returncode) == (want.stdout, want.returncode), (extra, got.stderr)
        if want.returncode:
            assert want.stderr.split(": ", 1)[1] == got.stderr.split(": ", 1)[1]  # "gate FAILED: <check>: <why>"
    # --json and --junit: the same report apart from replay ids and timings
    want = cli(["trace-replay", "--trace", tid, "--store", url, "--seeds", "3", "--first-seed", "7", "--json",
                "--junit", str(tmp_path / "cli.xml")] + trust, env)
    got = py(["trace-replay", "--trace", tid, "--store", url, "--seeds", "3", "--first-seed", "7", "--json",
              "--junit", str(tmp_path / "py.xml")] + trust, env)
    assert (want.returncode, got.returncode) == (0, 0), got.stderr
    assert stable_report(got.stdout) == stable_report(want.stdout)
    assert [s["seed"] for s in stable_report(got.stdout)["seeds"]] == [7, 8, 9]
    import xml.etree.ElementTree as ET
    names = [[c.get("name") for c in ET.parse(str(tmp_path / n)).iter("testcase")] for n in ("cli.xml", "py.xml")]
    assert names[0] == names[1] and len(names[0]) >= 3
    unknown = "00000000-0000-0000-0000-00000000abcd"
    assert_same_error(["trace-replay", "--trace", unknown, "--store", url], env, 1, unknown)
    assert_same_error(["trace-replay", "--trace", tid, "--store", url, "--seeds", "0"], env, 2, "'0'")
    assert_same_error(["trace-replay", "--trace", tid, "--store", url, "--min-success", "1.5"], env, 2, "'1.5'")
    assert_same_error(["trace-replay", "--trace", tid, "--store", url, "--key", "/nonexistent.pub"], env, 2,
                      "/nonexistent.pub")


def test_python_m_bundle_equals_cli(world):
    env, d, st = world["env"], world["digest"], world["bundles"]
    assert_same(["bundle", "inspect", d, "--store", st], env)
    out = assert_same(["bundle", "inspect", d, "--store", st, "--json"], env)
    mods = json.loads(out)["modules"]
    assert json.loads(out)["bundle"] == d and len(mods) >= 1
    blob = os.path.join(st, "blobs", "sha256", d[7:9], d[7:])
    assert_same(["bundle", "inspect", blob], env)
    fx = need_env("STACKPROV_FIXTURE")
    bid = [m["id"] for m in mods if m["name"] == os.path.basename(fx)][0]
    # lookup / unwind at main (nm's address: the fixture is PIE, so link-time = module offset),
    # inside it, and at addresses no range covers
    nm = subprocess.run([need_tool("nm"), fx], capture_output=True, text=True, check=True).stdout
    main = [int(ln.split()[0], 16) for ln in nm.splitlines() if ln.split()[-1:] == ["main"]][0]
    addrs = ["0x%x" % main, str(main + 4), "0x0", "0xffffffff"]
    out = assert_same(["bundle", "lookup", d, "--store", st, "--build-id", bid] + addrs, env)
    assert out.startswith("main\n") and out.endswith("??\n??:0:0\n\n")
    out = assert_same(["bundle", "unwind", d, "--store", st, "--build-id", bid] + addrs, env)
    assert out.splitlines()[0].startswith("CFA=")
    assert_same(["bundle", "fsck", "--store", st], env)
    # put into a new store, then fsck it: same digest printed, store clean
    new = str(world["tmp"] / "put-store")
    want, got = cli(["bundle", "put", "--store", new + "-cli", blob], env), py(["bundle", "put", "--store", new + "-py",
                                                                                 blob], env)
    assert (want.stdout, want.returncode) == (got.stdout, got.returncode) == (d + "\n", 0), got.stderr
    assert_same(["bundle", "promote", "--store", new + "-py", d], env)
    # bad input
    assert_same_error(["bundle", "inspect", "/nonexistent.sbundle"], env, 1, "/nonexistent.sbundle")
    zero = "sha256:" + "0" * 64
    assert_same_error(["bundle", "inspect", zero, "--store", st], env, 1, zero)
    assert_same_error(["bundle", "lookup", d, "--store", st, "--build-id", bid, "0xzz"], env, 2, "'0xzz'")
    assert_same_error(["bundle", "frobnicate"], env, 2, "'frobnicate'")
    assert_same_error(["bundle", "build", "/"], env, 2, "'/'")  # served now: test_cli_keys.py


def test_python_m_trace_verify_equals_cli(world):
    env, d = world["env"], world["digest"]
    trust = ["--dsse", "--key", world["pub"], "--rekor", "--trusted-root", world["root"]]
    for store in (world["bundles"], world["signed_url"]):
        out = assert_same(["trace-verify", "--bundle", d, "--store", store] + trust, env)
        assert out.endswith("trace-verify: OK %s\n" % d)
    env2 = dict(env, STACKPROV_STORE=world["signed_url"])  # a trace store URL from the environment
    assert_same(["trace-verify", "--bundle", d, "--dsse", "--key", world["pub"]], env2)
    import stackprov
    with stackprov.Store(world["bundles"]) as st:
        env_file = st.sidecar_path(d, "dsse.json")
    assert_same(["trace-verify", "--bundle", d, "--envelope", env_file, "--dsse", "--key", world["pub"], "--rekor",
                 "--trusted-root", world["root"], "--log", world["log"]], env)
    # bad input: another key (1, the failed check), a bad digest (2)
    want, got = both(["trace-verify", "--bundle", d, "--store", world["bundles"], "--dsse", "--key",
                      world["other_pub"]], env)
    assert (want.returncode, got.returncode) == (1, 1) and want.stderr == got.stderr and got.stdout == ""
    assert_same_error(["trace-verify", "--bundle", "sha256:12", "--dsse"], env, 2, "'sha256:12'")


def test_python_m_verify_sigstore_equals_cli(world):
    env = world["env"]
    with open(os.path.join(SIGSTORE, "expectations.json")) as f:
        cases = json.load(f)["cases"]
    assert cases
    for case in cases:
        args = ["verify-sigstore", os.path.join(SIGSTORE, case["bundle"]), "--trusted-root",
                os.path.join(SIGSTORE, case["trusted_root"])]
        want, got = both(args, env)
        assert want.returncode == (0 if case["expect"].startswith("accept") else 1), case
        assert (got.stdout, got.stderr, got.returncode) == (want.stdout, want.stderr, want.returncode), case
        q = both(args + ["--quiet"], env)
        assert (q[1].stdout, q[1].returncode) == (q[0].stdout, q[0].returncode)
    assert_same_error(["verify-sigstore", "/nonexistent.json", "--trusted-root",
                       os.path.join(SIGSTORE, "trusted_root.public-good.json")], env, 1, "/nonexistent.json")
    assert_same_error(["verify-sigstore", os.path.join(SIGSTORE, cases[0]["bundle"])], env, 2, "--trusted-root")
