#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Per-call overhead of the Python binding over the C ABI: the same calls timed from C
(bench_python_c) and from Python, on one address of a module (default: Py_BytesMain of /usr/bin/python3.11; any ELF with a
build-id and a symbol nm shows).

usage: PYTHONPATH=BUILD/python python3 bench/python/bench_overhead.py --c-bench BUILD/bin/bench_python_c
                                                                    [--module ELF] [--symbol S] [-n N] [--out F]
(or BUILD/bench/python/run.sh). Prints one JSON line (also written to --out): ns per call from C
and from Python, and the difference, for Symbolizer.symbolize of one address (vs
sprov_symbolizer_addr_ex + the inline frames) and Bundle.lookup (vs sprov_bundle_lookup).
"""
import argparse
import json
import subprocess
import tempfile
import time

import stackprov


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--c-bench", required=True)
    p.add_argument("--module", default="/usr/bin/python3.11")
    p.add_argument("--symbol", default="Py_BytesMain", help="the function whose address is looked up (nm)")
    p.add_argument("-n", type=int, default=100000)
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args()
    nm = subprocess.run(["nm", "-D", "--defined-only", a.module], capture_output=True, text=True).stdout
    nm += subprocess.run(["nm", "--defined-only", a.module], capture_output=True, text=True).stdout
    addr = next(int(ln.split()[0], 16) for ln in nm.splitlines() if ln.split()[-1:] == [a.symbol])
    b = stackprov.Bundle.build([a.module])
    with tempfile.NamedTemporaryFile(suffix=".sbundle") as f:
        b.save(f.name)
        c = json.loads(subprocess.run([a.c_bench, a.module, hex(addr), f.name, "0", str(a.n)], capture_output=True,
                                      text=True, check=True).stdout)
    sym = stackprov.Context().symbolizer()
    py = {}
    for _ in range(2):  # the first round warms the caches
        t0 = time.perf_counter_ns()
        for _ in range(a.n):
            sym.symbolize(a.module, [addr])
        py["symbolize_ns"] = (time.perf_counter_ns() - t0) / a.n
        t0 = time.perf_counter_ns()
        for _ in range(a.n):
            b.lookup(addr, module=0)
        py["bundle_lookup_ns"] = (time.perf_counter_ns() - t0) / a.n
    out = {"module": a.module, "address": hex(addr), "calls": a.n}
    for k in ("symbolize_ns", "bundle_lookup_ns"):
        out[k] = {"c": round(c[k], 1), "python": round(py[k], 1), "overhead": round(py[k] - c[k], 1)}
    print(json.dumps(out))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f)
            f.write("\n")


if __name__ == "__main__":
    main()
