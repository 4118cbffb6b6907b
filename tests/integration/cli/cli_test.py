#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The command line's one convention, tested on the real binary: --help and exit codes, GNU options,
# messages, failed commands that change nothing.
"""Usage: cli_test.py {help|options|messages|atomic} PATH/TO/stackprov WORKDIR

help      every command `stackprov --help` lists: `CMD --help` and `stackprov help CMD` print the
          same text, exit 0, and the text ends with an "Exit status" section naming 0, 1 and 2;
          it starts with the usage, then the option list, then the prose (tests/lib/help_layout.py),
          as does each subcommand's (`bundle build --help`); an unknown command or option exits 2
          with one line naming it.
options   `--opt=value`, `--opt value`, and the short aliases (-o/--output, -p/--pid) give the same
          result: byte-identical files (deterministic bundles, RFC 6979 envelopes, proofs), the same
          output, the same exit code and message for a bad value.
messages  bad invocations exit 1 or 2 with one line that names the offending value in the user's
          terms: a public key where a private key is needed and vice versa, a directory where a file
          is expected; no C API name (sprov_*, *_opts) in any of them; the ptrace hint names Yama
          only when /proc/sys/kernel/yama exists (the independent answer: that directory).
atomic    a failed `log append` (wrong key, public key, unreadable entry) and a failed
          `bundle build --store --sign` (wrong log key, public key, not a log) leave every file of the
          log and of the store byte-identical, and create no output file; a failed
          `trace-capture --sign` creates no trace store.
"""
import errno
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import help_layout  # noqa: E402  (tests/lib: the --help layout rule, shared with bindings/python/tests)

failures = []
CLI = WORK = None


def check(cond, what):
    if cond:
        print("ok:", what)
    else:
        failures.append(what)
        print("FAIL:", what)


def run(*args, **kw):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, **kw)
    return p.returncode, p.stdout, p.stderr


def must(*args):
    rc, out, err = run(*args)
    if rc != 0:
        raise SystemExit("setup step failed: stackprov %s: exit %d\n%s" % (" ".join(args), rc, err))
    return out


def path(*parts):
    return os.path.join(WORK, *parts)


def tree(root):
    """Every file under root (relative path -> bytes), directories too (-> None)."""
    out = {}
    if not os.path.exists(root):
        return out
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), root) + "/"] = None
        for n in files:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), root)] = f.read()
    return out


def elf(name, body="int main(void) { return 0; }\n"):
    """A small ELF with DWARF, compiled here (gcc is the peer that makes the input)."""
    src, exe = path(name + ".c"), path(name)
    with open(src, "w") as f:
        f.write(body)
    subprocess.run(["cc", "-g", "-O1", "-o", exe, src], check=True)
    return exe


def keys(*names):
    for n in names:
        if not os.path.exists(path(n)):
            must("keygen", "-o", path(n))


def commands():
    rc, out, _ = run("--help")
    assert rc == 0, "stackprov --help exited %d" % rc
    block = out.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def last_paragraph(text):
    paras = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return paras[-1] if paras else ""


# ---------------------------------------------------------------------- help

def test_help():
    cmds = commands()
    check(len(cmds) >= 16, "stackprov --help lists the commands (%d: %s)" % (len(cmds), " ".join(cmds)))
    rc, top, _ = run("--help")
    check(last_paragraph(top).startswith("Exit status"), "stackprov --help ends with its Exit status section")
    for c in cmds:
        rc, out, err = run(c, "--help")
        rc2, out2, _ = run("help", c)
        check(rc == 0 and out.strip() != "", "%s --help exits 0 and prints its help (exit %d)" % (c, rc))
        check(rc2 == rc and out2 == out, "stackprov help %s = stackprov %s --help" % (c, c))
        last = last_paragraph(out)
        codes = set(re.findall(r"(?<![\w.-])([0-9])(?![\w.%-])", last))
        check(last.startswith("Exit status") and {"0", "1", "2"} <= codes,
              "%s --help ends with an Exit status section naming 0, 1 and 2 (last paragraph: %r)" % (c, last[:120]))
        # An unknown option is a usage error: 2, one line naming it.
        rc, out, err = run(c, "--no-such-option")
        lines = err.strip().splitlines()
        check(rc == 2 and len(lines) == 1 and "--no-such-option" in lines[0],
              "%s --no-such-option exits 2 with one line naming it (exit %d, %r)" % (c, rc, err.strip()[:160]))
    # Issue 36: the usage and the option list first, the prose after (stack and trace-capture
    # printed pages of prose before their options); the terms are defined in tests/lib/help_layout.py.
    # Every command, and every subcommand its usage lines name ("stackprov bundle build ...").
    n_subs = 0
    for c in cmds:
        out = run(c, "--help")[1]
        bad = help_layout.problems(out)
        check(not bad, "%s --help: usage, then the options, then the prose%s" % (c, "".join(" -- " + b for b in bad)))
        usage, _ = help_layout.usage_block(out.split("\n"))
        subs = []
        for line in usage:
            m = re.match(r"^(?:usage:)?\s*stackprov %s ([a-z][a-z0-9-]*)(?:\s|$)" % re.escape(c), line)
            if m and m.group(1) not in subs:
                subs.append(m.group(1))
        n_subs += len(subs)
        for sub in subs:
            rc, sout, _ = run(c, sub, "--help")
            bad = help_layout.problems(sout)
            check(rc == 0 and not bad, "%s %s --help: exit 0 (%d); usage, then the options, then the prose%s"
                  % (c, sub, rc, "".join(" -- " + b for b in bad)))
    check(n_subs > 0, "the usage lines name subcommands whose --help is checked too (%d)" % n_subs)
    for args, what in ((["help", "no-such-command"], "help no-such-command"), (["no-such-command"], "no-such-command")):
        rc, out, err = run(*args)
        lines = err.strip().splitlines()
        check(rc == 2 and len(lines) == 1 and "'no-such-command'" in lines[0] and out == "",
              "stackprov %s: exit 2, one line naming it (exit %d, %r)" % (what, rc, err.strip()))
    rc, out, err = run()
    check(rc == 2 and out == "", "stackprov without a command: usage on stderr, exit 2 (exit %d)" % rc)


# ------------------------------------------------------------------- options

def same(variants, what, files=None):
    """Runs each argument list; all must agree on exit code, stdout, stderr (and on `files`' bytes)."""
    results = []
    for i, args in enumerate(variants):
        rc, out, err = run(*[a.replace("{i}", str(i)) for a in args])
        data = None
        if files:  # the file names differ by {i}: compare what is said about them with the template
            p = files.replace("{i}", str(i))
            data = open(p, "rb").read() if os.path.exists(p) else None
            out, err = out.replace(p, files), err.replace(p, files)
        results.append((rc, out, err, data))
    first = results[0]
    agree = all(r == first for r in results)
    check(agree and (not files or first[3] is not None),
          "%s: %s agree (exit %d)%s" % (what, " | ".join(" ".join(v) for v in variants), first[0],
                                        "" if agree else " -- differ: %r" % ([r[:3] for r in results],)))
    return first


def test_options():
    prog = elf("prog")
    keys("signer", "logkey")
    # keygen: -o, --output=, --output, --out
    for i, form in enumerate((["-o", path("k0")], ["--output=" + path("k1")], ["--output", path("k2")],
                              ["--out", path("k3")], ["-o" + path("k4")])):
        rc, out, err = run("keygen", *form)
        st = os.stat(path("k%d" % i)) if os.path.exists(path("k%d" % i)) else None
        check(rc == 0 and st and stat.S_IMODE(st.st_mode) == 0o600 and os.path.exists(path("k%d.pub" % i)),
              "keygen %s writes the key (mode 0600) and its .pub" % " ".join(form))
    # sign: deterministic envelopes (RFC 6979), so every spelling gives the same bytes.
    env = lambda i: path("env%s.json" % i)
    same([["sign", "--key", path("signer"), "-o", env("{i}"), prog],
          ["sign", "--key=" + path("signer"), "--output=" + env("{i}"), prog],
          ["sign", "--key", path("signer"), "--output", env("{i}"), prog],
          ["sign", "--key", path("signer"), "--out", env("{i}"), prog],
          ["sign", "--key", path("signer"), "-o" + env("{i}"), prog]], "sign", files=env("{i}"))
    rc, out, _ = run("sign", "--key", path("signer"), prog)
    check(rc == 0 and out.encode() == open(env(0), "rb").read(), "sign to stdout = sign -o FILE")
    # log: init, append, prove with either spelling.
    for i, (init, key) in enumerate(((["--key", path("logkey"), "--origin", "example.org/x"], ["--key", path("logkey")]),
                                     (["--key=" + path("logkey"), "--origin=example.org/x"], ["--key=" + path("logkey")]))):
        must("log", "init", path("log%d" % i), *init)
        must("log", "append", path("log%d" % i), *key, env(0))
    check(tree(path("log0")) == tree(path("log1")), "log init/append: --key=K --origin=O and --key K --origin O "
                                                    "give byte-identical logs")
    same([["log", "prove", path("log0"), "--index", "0", "-o", path("proof{i}")],
          ["log", "prove", path("log0"), "--index=0", "--output=" + path("proof{i}")],
          ["log", "prove", path("log0"), "--index=0", "--out", path("proof{i}")]], "log prove", files=path("proof{i}"))
    same([["log", "prove", path("log0"), "--index=x"], ["log", "prove", path("log0"), "--index", "x"]],
         "log prove with a bad --index")
    # bundle: build, export, lookup.
    same([["bundle", "build", prog, "-o", path("b{i}.sbundle"), "--name", "prog"],
          ["bundle", "build", prog, "--output=" + path("b{i}.sbundle"), "--name=prog"],
          ["bundle", "build", "--output", path("b{i}.sbundle"), "--name", "prog", prog],
          ["bundle", "build", prog, "--out", path("b{i}.sbundle"), "--name", "prog"],
          ["bundle", "build", prog, "-o" + path("b{i}.sbundle"), "--name=prog"]],
         "bundle build", files=path("b{i}.sbundle"))
    b = path("b0.sbundle")
    same([["bundle", "export", b, "--format=symbol-index-json"],
          ["bundle", "export", b, "--format", "symbol-index-json"]], "bundle export to stdout")
    same([["bundle", "export", b, "--format=symbfile", "-o", path("x{i}.symbfile")],
          ["bundle", "export", b, "--format", "symbfile", "--output=" + path("x{i}.symbfile")]],
         "bundle export -o", files=path("x{i}.symbfile"))
    same([["bundle", "lookup", b, "--build-id=zz", "0x10"], ["bundle", "lookup", b, "--build-id", "zz", "0x10"]],
         "bundle lookup with a bad --build-id")
    same([["bundle", "inspect", b, "--store=" + path("nostore")], ["bundle", "inspect", b, "--store", path("nostore")]],
         "bundle inspect --store")
    # provenance verifiers: the same usage error either way.
    same([["trace-verify", "--bundle=sha256:" + "0" * 64, "--dsse", "--key", path("signer.pub"), "--threshold=0"],
          ["trace-verify", "--bundle", "sha256:" + "0" * 64, "--dsse", "--key", path("signer.pub"), "--threshold", "0"]],
         "trace-verify --threshold 0")
    same([["verify-sigstore", env(0), "--trusted-root=" + path("none.json")],
          ["verify-sigstore", env(0), "--trusted-root", path("none.json")]], "verify-sigstore --trusted-root")
    # trace-*: -p/--pid, --store=.
    same([["trace-capture", "-p", "12x"], ["trace-capture", "--pid=12x"], ["trace-capture", "--pid", "12x"],
          ["trace-capture", "-p12x"]], "trace-capture with a bad pid")
    target = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        db = "sqlite:" + path("traces.db")
        ids = []
        for form in (["-p", str(target.pid), "--store", db], ["--pid=%d" % target.pid, "--store=" + db],
                     ["--pid", str(target.pid), "--store", db], ["-p%d" % target.pid, "--max-frames=8", "--store=" + db]):
            rc, out, err = run("trace-capture", *form)
            check(rc == 0 and re.fullmatch(r"[0-9a-f-]{36}\n", out), "trace-capture %s stores a trace (exit %d %s)"
                  % (" ".join(form), rc, err.strip()[-200:]))
            ids.append(out.strip())
    finally:
        target.kill()
        target.wait()
    same([["trace-list", "--store=" + db, "--limit=2"], ["trace-list", "--store", db, "--limit", "2"]], "trace-list")
    rc, out, _ = run("trace-list", "--store", db)
    check(rc == 0 and len(out.splitlines()) == 4, "the 4 captures are 4 traces")
    same([["trace-show", ids[0], "--store=" + db], ["trace-show", ids[0], "--store", db]], "trace-show")
    same([["trace-resolve", "--trace=" + ids[1], "--store=" + db], ["trace-resolve", "--trace", ids[1], "--store", db]],
         "trace-resolve")
    same([["trace-replay", "--trace=" + ids[0], "--seeds=0", "--store=" + db],
          ["trace-replay", "--trace", ids[0], "--seeds", "0", "--store", db]], "trace-replay --seeds 0")
    same([["demo", "--dir="], ["demo", "--dir", ""]], "demo with an empty --dir")
    # Flags take no value; unknown short options are usage errors naming them.
    for args, typed in ((["trace-list", "--json=yes"], "--json"), (["trace-list", "-x"], "-x"),
                        (["bundle", "inspect", b, "--json=1"], "--json"), (["sign", "-q", prog], "-q"),
                        (["keygen", "-o"], "-o")):
        rc, _, err = run(*args)
        check(rc == 2 and typed in err and len(err.strip().splitlines()) == 1,
              "%s: exit 2, one line naming %s (%r)" % (" ".join(args), typed, err.strip()))


# ------------------------------------------------------------------ messages

C_API = re.compile(r"\bsprov_\w+|\w+_opts\b")


def bad(args, code, must_say, what):
    rc, out, err = run(*args)
    lines = err.strip().splitlines()
    said = all(s in err for s in must_say)
    check(rc == code and len(lines) == 1 and said and not C_API.search(err),
          "%s: exit %d, one line saying %s, no C API name (exit %d: %r)" % (what, code, must_say, rc, err.strip()))
    return err


def traced_process():
    """A `sleep` under strace: already traced, so attaching to it is refused (EPERM) even for root."""
    tracer = subprocess.Popen(["strace", "-o", "/dev/null", "sleep", "60"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            kids = open("/proc/%d/task/%d/children" % (tracer.pid, tracer.pid)).read().split()
        except OSError:
            kids = []
        if kids:
            # The child shows up before strace has attached to it: wait for the kernel to say so.
            try:
                status = open("/proc/%s/status" % kids[0]).read()
            except OSError:
                status = ""
            if "\nTracerPid:\t%d\n" % tracer.pid in status and status.startswith("Name:\tsleep\n"):
                return tracer, int(kids[0])
        time.sleep(0.05)
    tracer.kill()
    raise SystemExit("strace did not start its child")


def test_messages():
    if shutil.which("strace") is None:
        raise SystemExit("strace not found (make deps installs it)")
    prog = elf("prog")
    keys("signer", "logkey")
    must("log", "init", path("log"), "--key", path("logkey"))
    entry = path("entry")
    open(entry, "w").write("an entry\n")
    must("log", "append", path("log"), "--key", path("logkey"), entry)
    env = path("env.json")
    must("sign", "--key", path("signer"), "-o", env, prog)
    must("log", "prove", path("log"), "--index", "0", "-o", path("proof"))
    bundle = path("prog.sbundle")
    must("bundle", "build", prog, "-o", bundle)
    pub, priv, dirp = path("signer.pub"), path("signer"), path("adir")
    os.makedirs(dirp, exist_ok=True)
    d64 = "sha256:" + "0" * 64
    # A public key where a private key is needed.
    for args in (["sign", "--key", pub, prog], ["log", "init", path("log2"), "--key", pub],
                 ["log", "append", path("log"), "--key", path("logkey.pub"), entry],
                 ["log", "checkpoint", path("log"), "--key", path("logkey.pub")],
                 ["bundle", "build", prog, "--store", path("store"), "--sign", pub, "--log", path("log")],
                 ["bundle", "build", prog, "--store", path("store"), "--sign", priv, "--log", path("log"),
                  "--log-key", path("logkey.pub")]):
        who = args[args.index("--log-key") + 1] if "--log-key" in args else pub if pub in args else path("logkey.pub")
        bad(args, 1, ["'%s' is a public key" % who, "private key"], " ".join(a.replace(WORK, "W") for a in args[:2]) +
            " with a public key for a private one")
    # A private key where a public key is needed.
    for args in (["trace-verify", "--bundle", d64, "--envelope", env, "--artifact", prog, "--dsse", "--key", priv],
                 ["log", "verify-proof", "--proof", path("proof"), "--entry", entry, "--log-key", path("logkey"),
                  "--origin", "stackprov.local/log"]):
        key = priv if priv in args else path("logkey")
        bad(args, 1, ["'%s' is a private key" % key, "public key"], args[0] + " with a private key for a public one")
    # The wrong private key for the log.
    keys("other")
    bad(["log", "append", path("log"), "--key", path("other"), entry], 1, ["'%s'" % path("other"), "not the key of log"],
        "log append with another key")
    # A directory where a file is expected.
    for args, code in ((["sign", "--key", dirp, prog], 2), (["sign", "--key", priv, dirp], 2),
                       (["sign", "--key", priv, "-o", dirp, prog], 2), (["keygen", "-o", dirp], 2),
                       (["log", "append", path("log"), dirp], 2),
                       (["log", "prove", path("log"), "--index", "0", "-o", dirp], 2),
                       (["log", "init", path("log3"), "--key", dirp], 1),
                       (["bundle", "build", dirp], 2), (["bundle", "build", prog, "-o", dirp], 2),
                       (["bundle", "inspect", dirp], 2),
                       (["bundle", "export", bundle, "--format", "symbfile", "-o", dirp], 2),
                       (["trace-verify", "--bundle", d64, "--envelope", dirp, "--dsse", "--key", pub], 1),
                       (["verify-sigstore", dirp, "--trusted-root", env], 2),
                       (["trace-capture", "--core", dirp], 2),
                       (["trace-capture", "--pid", "1", "--bundle", "--sign", dirp, "--log", path("log")], 2)):
        err = bad(args, code, ["'%s'" % dirp, "is a directory"], " ".join(a.replace(WORK, "W") for a in args[:3]) +
                  " with a directory for a file")
    # More bad invocations: their messages must not name the C API either.
    for args in (["bundle", "lookup", path("nope"), "0x1"], ["bundle", "build", path("nope")],
                 ["trace-show", "00000000-0000-0000-0000-000000000000", "--store", "sqlite:" + path("none.db")],
                 ["trace-replay", "--trace", "x"], ["trace-resolve", "--trace", "00000000-0000-0000-0000-000000000000",
                                                    "--store", "sqlite:" + path("nostore.db"), "--bundle", "sha256:zz"],
                 ["trace-capture", "--pid", "2147483647", "--store", "sqlite:" + path("t.db")],
                 ["sign", "--key", priv, path("nope")], ["log", "verify", path("nope")],
                 ["trace-verify", "--bundle", d64, "--store", path("nostore"), "--dsse", "--key", pub],
                 ["verify-sigstore", path("nope"), "--trusted-root", env]):
        rc, _, err = run(*args)
        check(rc in (1, 2) and err.strip() and not C_API.search(err),
              "%s: exit 1 or 2 without a C API name (exit %d: %r)" % (" ".join(args[:2]), rc, err.strip()))
    # Issue 36: the reason once, the path named (it said "No such file or directory" twice) ...
    rc, out, err = run("symbolize", "--obj", path("nonexist"), "0x10")
    check(rc == 0 and out == "??\n??:0:0\n\n" and err.count("No such file or directory") == 1 and
          "'%s'" % path("nonexist") in err, "symbolize --obj of a missing file: ?? and the reason once (%r)" % err.strip())
    # ... and an executable given as a core says what it is, not only its e_type number.
    bad(["stack", "--core", prog], 1, ["is not an ELF core file", "a shared library or PIE executable, not a core"],
        "stack --core of an executable")
    # The same at paths of ~1,000 bytes (messages were formatted into 512-byte buffers: the reason was
    # cut off): the whole path, then the reason (the test's own path; strerror(ENOENT) from Python).
    deep = WORK
    while len(deep) < 1000:
        deep = os.path.join(deep, "a-deliberately-long-directory-name-to-catch-fixed-buffers")
    os.makedirs(deep, exist_ok=True)
    far = os.path.join(deep, "prog")
    shutil.copy(prog, far)
    bad(["stack", "--core", far], 1, [far + " is not an ELF core file (e_type 3: a shared library or PIE "
                                            "executable, not a core)"], "stack --core of an executable at a long path")
    gone = os.path.join(deep, "nonexist")
    rc, out, err = run("symbolize", "--obj", gone, "0x10")
    check(rc == 0 and out == "??\n??:0:0\n\n" and "'%s'" % gone in err and os.strerror(errno.ENOENT) in err,
          "symbolize --obj of a missing file at a long path: the path whole and the reason (%r)" % err.strip())
    # The ptrace hint: Yama only where the kernel has it.
    tracer, pid = traced_process()
    try:
        rc, _, err = run("trace-capture", "-p", str(pid), "--store", "sqlite:" + path("t2.db"))
    finally:
        tracer.kill()
        tracer.wait()
        os.kill(pid, signal.SIGKILL)  # the traced sleep outlives its tracer
    yama = os.path.isdir("/proc/sys/kernel/yama")
    check(rc == 1 and "already traced by pid %d" % tracer.pid in err and "CAP_SYS_PTRACE" in err,
          "trace-capture of a traced process: exit 1, names its tracer (%r)" % err.strip())
    check(("yama" in err.lower()) == yama and ("ptrace_scope" in err) == yama,
          "the ptrace hint names Yama only when /proc/sys/kernel/yama exists (it %s here)"
          % ("does" if yama else "does not"))


# -------------------------------------------------------------------- atomic

def unchanged(before_dirs, args, code, what, absent=()):
    before = {d: tree(d) for d in before_dirs}
    rc, _, err = run(*args)
    after = {d: tree(d) for d in before_dirs}
    diff = [d for d in before_dirs if before[d] != after[d]]
    created = [p for p in absent if os.path.exists(p)]
    check(rc == code and not diff and not created,
          "%s: exit %d and %s byte-identical%s (exit %d, changed: %s, created: %s; %s)"
          % (what, code, " and ".join(os.path.basename(d) for d in before_dirs), ", nothing created" if absent else "",
             rc, diff, created, err.strip()[:200]))


def test_atomic():
    prog, prog2 = elf("prog"), elf("prog2", "int f(int x) { return x * 3; }\nint main(void) { return f(1) - 3; }\n")
    keys("signer", "logkey", "other")
    log, store = path("log"), path("store")
    must("log", "init", log, "--key", path("logkey"))
    e1, e2 = path("e1"), path("e2")
    open(e1, "w").write("first\n")
    open(e2, "w").write("second\n")
    must("log", "append", log, "--key", path("logkey"), e1)
    unchanged([log], ["log", "append", log, "--key", path("other"), e2], 1, "log append with another key")
    unchanged([log], ["log", "append", log, "--key", path("logkey.pub"), e2], 1, "log append with the log's public key")
    unchanged([log], ["log", "append", log, "--key", path("logkey"), e2, path("missing")], 2,
              "log append with an unreadable entry")
    unchanged([log], ["log", "checkpoint", log, "--key", path("other")], 1, "log checkpoint with another key")
    # The log still has 1 entry under a checkpoint of size 1 (the C2SP checkpoint's second line).
    rc, out, _ = run("log", "verify", log)
    size = open(os.path.join(log, "checkpoint")).read().splitlines()[1]
    check(rc == 0 and "1 entries" in out and size == "1", "after the failures: 1 entry, checkpoint size %s (%s)"
          % (size, out.strip()))
    # The bundle store: a signed build whose keys cannot sign leaves no blob, sidecar or id entry.
    must("bundle", "build", prog, "--store", store, "--sign", path("signer"), "--log", log, "--log-key", path("logkey"))
    notalog = path("notalog")
    os.makedirs(notalog, exist_ok=True)
    out_file = path("out.sbundle")
    for args, what in ((["--sign", path("signer"), "--log", log, "--log-key", path("other")], "another log key"),
                       (["--sign", path("signer.pub"), "--log", log, "--log-key", path("logkey")],
                        "a public signing key"),
                       (["--sign", path("signer"), "--log", log], "the signing key as log key (not the log's)"),
                       (["--sign", path("signer"), "--log", notalog, "--log-key", path("logkey")],
                        "a directory that is no log")):
        unchanged([store, log], ["bundle", "build", prog2, "--store", store, "-o", out_file] + args, 1,
                  "bundle build --store --sign with " + what, absent=[out_file])
    rc, out, _ = run("bundle", "fsck", "--store", store)
    check(rc == 0 and "clean" in out, "the store is clean after the failures")
    # trace-capture --bundle --sign with a bad key: no trace store, no bundle store is created.
    target = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        db, bstore = path("traces.db"), path("tbundles")
        rc, _, err = run("trace-capture", "-p", str(target.pid), "--store", "sqlite:" + db, "--bundle", "--bundle-store",
                         bstore, "--sign", path("signer"), "--log", log, "--log-key", path("other"))
        check(rc == 1 and not os.path.exists(db) and not os.path.exists(bstore) and path("other") in err,
              "trace-capture --sign with another log key: exit 1, no trace store, no bundle store (%r)" % err.strip())
    finally:
        target.kill()
        target.wait()
    unchanged([log], ["trace-capture", "-p", "1", "--bundle", "--sign", path("signer.pub"), "--log", log,
                      "--store", "sqlite:" + path("t2.db")], 1, "trace-capture --sign with a public key",
              absent=[path("t2.db")])


def main():
    global CLI, WORK
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    mode, CLI, WORK = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    WORK = os.path.join(WORK, mode)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    env_store = os.environ.pop("STACKPROV_STORE", None)  # the tests name their stores
    del env_store
    os.environ["XDG_DATA_HOME"] = os.path.join(WORK, "xdg")
    {"help": test_help, "options": test_options, "messages": test_messages, "atomic": test_atomic}[mode]()
    if failures:
        print("%d FAILED:" % len(failures))
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
