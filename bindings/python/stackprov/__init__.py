# SPDX-License-Identifier: Apache-2.0
"""stackprov: capture, unwind and symbolize native call stacks (Python binding of the C ABI).

    import stackprov
    for t in stackprov.stack(pid=1234):        # or stack(core="core.1", exe="./app")
        for f in t.frames:
            print(hex(f.pc), f.function, f.file, f.line, f.method, f.inlined)
    ctx = stackprov.Context(debug_dirs=["/usr/lib/debug"])
    snap = ctx.capture_self()                  # Snapshot; to_bytes() / Snapshot.from_bytes()
    st = ctx.unwinder().unwind(snap)
    stackprov.symbolize("/usr/bin/python3.11", [0x1234])   # one inline chain per address

Calls into the library release the GIL. Errors are stackprov.Error subclasses with .code (the C
error code) and .message; a pid that does not exist raises ProcessLookupError and a target one may
not ptrace PermissionError (both also stackprov.Error).
"""
import json
import threading

from . import _stackprov
from ._errors import (AccessDeniedError, BuildIdMismatchError, CaptureError, Error, FileMissingError,
                      FormatError, InvalidArgumentError, NotFoundError, ProcessNotFoundError,
                      SnapshotError, SystemCallError, UnsupportedError, VerificationError)
from ._stackprov import (Context, Frame, InlineFrame, Process, ProcessInfo, Snapshot, Stack, Symbolizer,
                         Thread, TraceStore, Unwinder)

__version__ = _stackprov.__version__

__all__ = [
    "__version__", "stack", "stack_with_info", "symbolize", "Context", "Snapshot", "Unwinder",
    "Symbolizer", "Process", "ProcessInfo", "Stack", "Thread", "Frame", "InlineFrame", "Error",
    "InvalidArgumentError", "NotFoundError", "UnsupportedError", "FormatError", "SnapshotError",
    "BuildIdMismatchError", "CaptureError", "VerificationError", "ProcessNotFoundError",
    "AccessDeniedError", "FileMissingError", "SystemCallError", "TraceStore", "trace_capture",
    "trace_get", "trace_list",
]


def stack_with_info(pid=None, core=None, exe=None, *, tid=0, max_frames=0, lines=True, context=None):
    """(ProcessInfo, [Thread]) of a live process (pid=) or an ELF core file (core=, exe=)."""
    ctx = context if context is not None else _stackprov._default_context()
    return ctx._stack(pid, core, exe, tid, max_frames, lines)


def stack(pid=None, core=None, exe=None, *, tid=0, max_frames=0, lines=True, context=None):
    """Stacks of every thread (or only `tid`) of a live process (pid=) or a core file (core=,
    exe= the main program), as `stackprov stack` prints them: a list of Thread, each with
    .tid, .name, .frames (Frame: pc, sp, cfa, module, build_id, module_offset, function, file,
    line, column, method, resolver, inlined, ...) and .stop_reason. max_frames: 1..65536 (0: 256).
    lines=False: no DWARF lines or inline chains (faster)."""
    return stack_with_info(pid, core, exe, tid=tid, max_frames=max_frames, lines=lines, context=context)[1]


def symbolize(path, addresses, *, inlines=True, llvm_compat=False, short_names=False, demangle=True,
              context=None):
    """One inline chain per link-time address of the module file `path`: a list of InlineFrame,
    innermost inlined function first, the physical function last (one element with
    inlines=False, as llvm-symbolizer --no-inlines). An address nothing covers gives
    [InlineFrame(function='', resolver='none')]. llvm_compat=True names functions exactly as
    llvm-symbolizer-14 does; short_names: DW_AT_name (llvm --functions=short); demangle=False:
    linkage names."""
    if context is None:
        sym = _thread_symbolizer()
    else:
        sym = context.symbolizer()  # for repeated calls keep one: context.symbolizer().symbolize()
    return sym.symbolize(path, list(addresses), inlines=inlines, llvm_compat=llvm_compat,
                         short_names=short_names, demangle=demangle)


_local = threading.local()


def _thread_symbolizer():
    """The default context's symbolizer of this thread (a symbolizer keeps per-module caches;
    one per thread, as the C ABI wants)."""
    sym = getattr(_local, "symbolizer", None)
    if sym is None:
        sym = _local.symbolizer = _stackprov._default_context().symbolizer()
    return sym


def trace_capture(pid=None, core=None, exe=None, *, store=None, bundle=False, max_frames=0, tid=0,
                  context=None):
    """Captures every thread of a live process (pid=) or a core file (core=, exe=), unwinds and
    resolves them and stores the result as one trace in `store` (a TraceStore or a URL,
    sqlite:PATH / postgresql://...; None: the default store). Returns the trace id.
    bundle=True also builds and stores the symbol bundle of the modules touched."""
    ctx = context if context is not None else _stackprov._default_context()
    ts = store if isinstance(store, TraceStore) else TraceStore(store)
    if pid is not None and core is None:
        proc = ctx.capture(pid, tid=tid)
    elif core is not None and pid is None:
        proc = ctx.open_core(core, exe=exe, tid=tid)
    else:
        raise InvalidArgumentError("give either pid= or core= (pid %r, core %r)" % (pid, core), -4000)
    with proc:
        return ts._capture(ctx, proc, bundle, max_frames)


def trace_get(trace_id, *, store=None):
    """The stored trace as a dict (the trace.capture event of doc/traces.md "Events")."""
    ts = store if isinstance(store, TraceStore) else TraceStore(store)
    return json.loads(ts.get_json(trace_id))


def trace_list(*, store=None, limit=0):
    """[{"trace_id", "platform", "arch", "captured_at", "build_id", "frames"}], oldest first."""
    ts = store if isinstance(store, TraceStore) else TraceStore(store)
    return json.loads(ts.list_json(limit))
