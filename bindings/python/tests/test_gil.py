# SPDX-License-Identifier: Apache-2.0
# The GIL is released during capture, unwind and symbolize: a Python thread keeps counting while
# the main thread is inside a long library call (with the GIL held it could not run at all).
import os
import subprocess
import threading
import time

import stackprov


class Counter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.n = 0
        self.stop = False

    def run(self):
        while not self.stop:
            self.n += 1


def progress_during(call):
    c = Counter()
    c.start()
    time.sleep(0.05)
    before = c.n
    t0 = time.monotonic()
    result = call()
    elapsed = time.monotonic() - t0
    during = c.n - before
    c.stop = True
    c.join()
    return result, elapsed, during


def many_addresses():
    exe = os.path.realpath("/usr/bin/python3.11")
    out = subprocess.run(["readelf", "-sW", exe], capture_output=True, text=True, check=True).stdout
    addrs = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[3] == "FUNC" and int(f[2], 0) > 0:
            addrs.append(int(f[1], 16))
    return exe, addrs


def test_symbolize_releases_the_gil():
    exe, addrs = many_addresses()
    # one call that lasts: every function of python3.11, several times, with inline chains
    chains, elapsed, during = progress_during(lambda: stackprov.symbolize(exe, addrs * 4))
    assert len(chains) == 4 * len(addrs) and elapsed > 0.1
    # a Python loop counts millions per second when it may run; with the GIL held, zero
    assert during > 10000, "counter advanced %d in %.2fs" % (during, elapsed)


def test_stack_releases_the_gil(fixture_all):
    def call():
        for _ in range(5):
            stackprov.stack(pid=fixture_all.pid, context=stackprov.Context())
    _, elapsed, during = progress_during(call)
    assert during > 10000, "counter advanced %d in %.2fs" % (during, elapsed)


def test_threads_share_a_context(fixture_bench):
    """A Context is thread-safe; each thread captures, unwinds and symbolizes concurrently and gets
    the stacks a single thread gets."""
    ctx = stackprov.Context()
    want = [[f.pc for f in t.frames] for t in stackprov.stack(pid=fixture_bench.pid, context=ctx)]
    exe, addrs = many_addresses()
    sym_want = [c[-1].function for c in stackprov.symbolize(exe, addrs[:300], context=ctx)]
    errors, results = [], []
    sym = ctx.symbolizer()  # one symbolizer used from several threads: calls are serialized

    def work():
        try:
            for _ in range(3):
                snap = ctx.capture_self()
                ctx.unwinder().unwind(snap)
                results.append([[f.pc for f in t.frames] for t in stackprov.stack(pid=fixture_bench.pid, context=ctx)])
                assert [c[-1].function for c in sym.symbolize(exe, addrs[:300])] == sym_want
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [want] * 12


def test_bundle_build_releases_the_gil_and_reports_progress():
    exe = os.path.realpath("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")  # about 0.5 s of work
    libgcc = "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"
    calls = []
    b, elapsed, during = progress_during(
        lambda: stackprov.Bundle.build([exe, libgcc], progress=lambda *a: calls.append(a)))
    assert during > 1000, "the counter thread ran %d times during %.2f s" % (during, elapsed)
    # progress: before the first module, then after each; byte counts are the files' sizes
    total = os.path.getsize(exe) + os.path.getsize(libgcc)
    assert calls[0] == (0, 2, 0, total) and calls[-1] == (2, 2, total, total) and len(calls) == 3
    assert len(b.modules) == 2


def test_bundle_build_progress_exception_propagates():
    def boom(*a):
        raise KeyError("stop here")
    try:
        stackprov.Bundle.build(["/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"], progress=boom)
    except KeyError as e:
        assert "stop here" in str(e)
    else:
        raise AssertionError("the progress callback's exception was lost")
