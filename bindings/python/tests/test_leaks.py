# SPDX-License-Identifier: Apache-2.0
# Resources are freed deterministically (with) and by the GC: RSS stays flat over 3,000 create/use/free
# cycles of every object (10,000 took 134 s of the CI machine's test stage; a leak of one object per cycle
# still grows RSS by >= 3000 x its size, far over the bounds below).
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


def test_rss_flat_over_3000_cycles():
    demo = stackprov.Context().capture_self(max_stack_bytes=16384).to_bytes()
    for i in range(500):  # warm-up: allocator pools, caches
        cycle(i, demo)
    gc.collect()
    before = rss_kib()
    for i in range(3000):
        cycle(i, demo)
    gc.collect()
    grown = rss_kib() - before
    # a leak of one snapshot or context per cycle would be >= 3000 * 16 KiB
    assert grown < 4096, "RSS grew by %d KiB over 3,000 cycles" % grown


def bundle_cycle(i, data, store_dir, build_id):
    if i % 2:
        b = stackprov.Bundle.from_bytes(data)
        b.lookup(0x1000, module=0)
        b.modules
        with stackprov.Store(store_dir) as st:
            st.get(build_id=build_id)
            st.open(b.digest).unwind_row(0x1000)
    else:
        st = stackprov.Store(store_dir)  # freed by refcount/GC only
        st.find(build_id)
        try:
            stackprov.Bundle.from_bytes(data[:100])
        except stackprov.VerificationError:
            pass


def test_rss_flat_over_bundle_cycles(tmp_path):
    b = stackprov.Bundle.build(["/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"])
    data = b.to_bytes()
    with stackprov.Store(str(tmp_path / "st"), create=True) as st:
        st.put(b)
    args = (data, str(tmp_path / "st"), b.modules[0].id)
    for i in range(200):
        bundle_cycle(i, *args)
    gc.collect()
    before = rss_kib()
    for i in range(1500):
        bundle_cycle(i, *args)
    gc.collect()
    grown = rss_kib() - before
    # a leaked bundle copy per cycle would be >= 1500 * len(data) > 6000 KiB
    assert len(data) > 4096 and grown < 4096, "RSS grew by %d KiB over 1,500 cycles" % grown
