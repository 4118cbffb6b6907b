# SPDX-License-Identifier: Apache-2.0
# Run inside gdb (gdb -batch -nx -x gdb_state.py --args FIXTURE): stops at leaf_fn and writes the
# thread's raw state (doc/raw-state.md) and gdb's own unwind (each frame's pc and rsp) as JSON to
# $RAW_STATE_OUT.
import json
import os

import gdb

gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set backtrace past-main on")
gdb.execute("set backtrace past-entry on")
# RAW_STATE_STOP=ret:FN stops at FN's first `ret` instead of its entry.
stop = os.environ.get("RAW_STATE_STOP", "leaf_fn")
if stop.startswith("ret:"):
    gdb.execute("break " + stop[4:])
    gdb.execute("run")
    fr = gdb.selected_frame()
    block = fr.block()
    while block.function is None:
        block = block.superblock
    ret = [i["addr"] for i in fr.architecture().disassemble(block.start, block.end - 1)
           if i["asm"].split()[0] in ("ret", "retq")]
    gdb.execute("delete")
    gdb.execute("break *0x%x" % ret[0])
    gdb.execute("continue")
else:
    gdb.execute("break " + stop)
    gdb.execute("run")
mask = (1 << 64) - 1
inf = gdb.selected_inferior()
names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
         "r15", "rip"]
regs = {n: "0x%x" % (int(gdb.parse_and_eval("$" + n)) & mask) for n in names}
sp = int(regs["rsp"], 16)
top, modules, seen = None, [], set()
with open("/proc/%d/maps" % inf.pid) as f:
    for line in f:
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        path = parts[5] if len(parts) > 5 else ""
        if lo <= sp < hi:
            top = hi
        if path.startswith("/") and int(parts[2], 16) == 0 and path not in seen:
            seen.add(path)
            modules.append({"path": path, "load_address": "0x%x" % lo})
stack = bytes(inf.read_memory(sp, top - sp))
frames = []
fr = gdb.newest_frame()
while fr is not None and len(frames) < 64:
    frames.append({"pc": fr.pc() & mask, "sp": int(fr.read_register("rsp")) & mask, "function": fr.name() or ""})
    fr = fr.older()
state = {"version": 1, "arch": "x86_64", "pid": inf.pid, "tid": inf.pid, "registers": regs,
         "memory": [{"address": "0x%x" % sp, "hex": stack.hex()}], "modules": modules}
with open(os.environ["RAW_STATE_OUT"], "w") as f:
    json.dump({"state": state, "gdb_frames": frames}, f)
gdb.execute("kill")
