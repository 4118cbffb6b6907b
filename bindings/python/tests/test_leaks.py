# SPDX-License-Identifier: Apache-2.0
# Resources are freed deterministically (with) and by the GC: RSS stays flat over 10,000
# create/use/free cycles of every object.
import gc
import os

import stackprov


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def cycle(i, demo_bytes):
    if i % 2:
        with stackprov.Context() as ctx, ctx.unwinder() as uw, ctx.symbolizer() as sym:
            snap = ctx.capture_self(max_stack_bytes=16384)
            stackprov.Snapshot.from_bytes(snap.to_bytes())
            uw.unwind(snap, symbolize=False)
            sym.symbolize("/bin/true", [0x1000])
    else:
        ctx = stackprov.Context()  # freed by refcount/GC only
        snap = stackprov.Snapshot.from_bytes(demo_bytes)
        ctx.unwinder().unwind(snap, symbolize=False)
        ctx.symbolizer().symbolize("/bin/true", [0x1000])
        try:
            stackprov.Snapshot.from_bytes(demo_bytes[:100])
        except stackprov.SnapshotError:
            pass


def test_rss_flat_over_10000_cycles():
    demo = stackprov.Context().capture_self(max_stack_bytes=16384).to_bytes()
    for i in range(1000):  # warm-up: allocator pools, caches
        cycle(i, demo)
    gc.collect()
    before = rss_kib()
    for i in range(10000):
        cycle(i, demo)
    gc.collect()
    grown = rss_kib() - before
    # a leak of one snapshot or context per cycle would be >= 10000 * 16 KiB
    assert grown < 4096, "RSS grew by %d KiB over 10,000 cycles" % grown
