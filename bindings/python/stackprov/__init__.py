# SPDX-License-Identifier: Apache-2.0
"""stackprov: capture, unwind and symbolize native call stacks (Python binding of the C ABI).

    import stackprov
    for t in stackprov.stack(pid=1234):        # or stack(core="core.1", exe="./app")
        for f in t.frames:
            print(hex(f.pc), f.function, f.file, f.line, f.method, f.inlined)
    stackprov.stack(minidump="app.dmp", symbol_path=["C:/symbols"])  # Windows x64 minidumps
    stackprov.stack(raw="state.json")          # raw machine state (doc/raw-state.md), e.g. Mach-O
    ctx = stackprov.Context(debug_dirs=["/usr/lib/debug"])
    snap = ctx.capture_self()                  # Snapshot; to_bytes() / Snapshot.from_bytes()
    st = ctx.unwinder().unwind(snap)
    stackprov.symbolize("/usr/bin/python3.11", [0x1234])   # one inline chain per address
    stackprov.symbolize_id("pdb-guid-age", "43E4EBB6038D8C074C4C44205044422E1", [0x140001000],
                           store="/var/lib/bundles")             # no module file: its bundle answers
    stackprov.record(command=["./app"], duration=2, output="app.cap")   # RecordResult: samples, lost, ...
    prof = stackprov.perf_import("app.cap")     # or a perf.data: .samples (frames), .folded, .svg()
    tid = stackprov.trace_capture(pid=1234, store="sqlite:t.db", bundle=True)
    stackprov.trace_resolve(tid, store="sqlite:t.db", offline=True)    # dict: frames, named, ...
    rep = stackprov.trace_replay(tid, store="sqlite:t.db", seeds=5)    # .exit_code, .json(), .junit()
    b = stackprov.Bundle.build(["/usr/bin/app"])                        # .digest, .modules, .to_bytes()
    with stackprov.Store("/var/lib/bundles", create=True) as st:
        st.put(b); st.get(build_id=b.modules[0].id)

Calls into the library release the GIL. Errors are stackprov.Error subclasses with .code (the C
error code) and .message; a pid that does not exist raises ProcessLookupError and a target one may
not ptrace PermissionError (both also stackprov.Error).
"""
import contextlib as _contextlib
import json as _json
import os as _os
import re as _re
import threading as _threading
import warnings as _warnings

from . import _arguments, _stackprov
from ._errors import (AccessDeniedError, BuildIdMismatchError, CaptureError, Error, FileMissingError,
                      FormatError, InvalidArgumentError, NotFoundError, ProcessNotFoundError,
                      SnapshotError, SystemCallError, UnsupportedError, VerificationError)
from ._stackprov import (Argument, Bundle, BundleModule, Context, Frame, InlineFrame, KernelStack, Process, ProcessInfo,
                         Profile,
                         ProfileFrame, ProfileSample, RecordResult, ReplayReport,
                         Snapshot, Stack, Store, Symbolizer, Thread, TraceStore, Unwinder, digest_file,
                         dsse_sign_file, dsse_verify, key_generate, key_id, Log, log_init, log_verify_consistency,
                         log_verify_proof, sigstore_verify, trace_verify)

__version__ = _stackprov.__version__

__all__ = [
    "__version__", "stack", "stack_with_info", "symbolize", "symbolize_id", "Context", "Snapshot", "Unwinder",
    "Symbolizer", "Process", "ProcessInfo", "Stack", "Thread", "KernelStack", "Frame", "InlineFrame", "Argument", "Error",
    "InvalidArgumentError", "NotFoundError", "UnsupportedError", "FormatError", "SnapshotError",
    "BuildIdMismatchError", "CaptureError", "VerificationError", "ProcessNotFoundError",
    "AccessDeniedError", "FileMissingError", "SystemCallError", "TraceStore", "trace_capture",
    "trace_get", "trace_list", "trace_resolve", "trace_replay", "trace_replays", "ReplayReport", "Bundle",
    "BundleModule", "Store", "digest_file", "key_generate", "key_id", "Log", "log_init", "log_verify_proof",
    "log_verify_consistency", "dsse_sign_file", "dsse_verify",
    "trace_verify", "sigstore_verify", "record", "RecordResult", "perf_import", "Profile", "ProfileSample",
    "ProfileFrame",
]


def _dir_list(what, dirs):
    """`dirs` (one path, a ':'-separated string or a list of paths) as a list of existing
    directories; FileMissingError / InvalidArgumentError naming the one that is not."""
    if dirs is None:
        return None
    if isinstance(dirs, (str, bytes, _os.PathLike)):
        dirs = [d for d in _os.fsdecode(dirs).split(":") if d]
    elif not all(isinstance(d, (str, bytes, _os.PathLike)) for d in dirs):
        raise InvalidArgumentError("invalid %s %r (expected a directory, a ':'-separated list or a list of directories)"
                                   % (what, dirs), _INVALID_ARG)
    out = []
    for d in dirs:
        d = _os.fsdecode(d)
        if not d or ":" in d:
            raise InvalidArgumentError("invalid %s directory %r (empty, or a ':' inside one directory)" % (what, d),
                                       _INVALID_ARG)
        if not _os.path.exists(d):
            raise FileMissingError("%s directory '%s' does not exist" % (what, d), -2)
        if not _os.path.isdir(d):
            raise InvalidArgumentError("%s '%s' is not a directory" % (what, d), _INVALID_ARG)
        out.append(d)
    return out


def _flag(fn, name, value):
    """`value` if it is a bool, else a TypeError naming the function and the argument."""
    if not isinstance(value, bool):
        raise TypeError("%s(): %s must be True or False, not %s %r" % (fn, name, type(value).__name__, value))
    return value


def stack_with_info(pid=None, core=None, exe=None, *, minidump=None, raw=None, symbol_path=None, tid=0, max_frames=0,
                    lines=True, context=None, python="auto", tail_calls=True, render="", args=False, snapshot=None,
                    kernel=False, with_btf=False):
    """(ProcessInfo, [Thread]) of a live process (pid=), an ELF core file (core=, exe=), a Windows
    minidump (minidump=, symbol_path=), raw machine state (raw=) or saved snapshots (snapshot=).
    ProcessInfo.source says which;
    a minidump's exception is in .exception_code/.exception_address/.exception_tid/.exception_name
    and where each module's identity and file came from in .notes.
    render="text" or "json": each Thread's .rendered is the thread as `stackprov stack` prints it
    (text, or its --json thread object), by the library's one renderer; with args=True as
    `stackprov stack --args` prints it (with kernel=True as `stack --kernel`). args, kernel, with_btf:
    as stack()."""
    _flag("stack_with_info", "args", args)
    _flag("stack_with_info", "kernel", kernel)
    _flag("stack_with_info", "with_btf", with_btf)
    for what, v in (("minidump", minidump), ("raw", raw), ("snapshot", snapshot)):
        if v is not None and not isinstance(v, (str, bytes, _os.PathLike)):
            raise InvalidArgumentError("invalid %s %r (expected a path)" % (what, v), _INVALID_ARG)
    minidump = _os.fsdecode(minidump) if minidump is not None else None
    raw = _os.fsdecode(raw) if raw is not None else None
    snapshot = _os.fsdecode(snapshot) if snapshot is not None else None
    for what, v in (("minidump", minidump), ("raw state", raw), ("snapshot", snapshot)):
        if v and not _os.path.exists(v):
            raise FileMissingError("%s '%s': no such file or directory" % (what, v), -2)
    sp = _dir_list("symbol_path", symbol_path)
    if context is not None:
        ctx = context
    elif sp:
        # The PDBs of the minidump's modules are looked up there too (NAME.pdb, NAME.pdb/KEY/NAME.pdb),
        # after the default debug directory, as `stackprov stack --symbol-path` does.
        ctx = Context(debug_dirs=["/usr/lib/debug"] + sp)
    else:
        ctx = _stackprov._default_context()
    return ctx._stack(pid, core, exe, tid, max_frames, lines, python, tail_calls, minidump, raw,
                      ":".join(sp) if sp is not None else None, render, args, snapshot, kernel, with_btf)


def stack(pid=None, core=None, exe=None, *, minidump=None, raw=None, symbol_path=None, tid=0, max_frames=0, lines=True,
          context=None, python="auto", tail_calls=True, args=False, snapshot=None, kernel=False, with_btf=False):
    """Stacks of every thread (or only `tid`) of a live process (pid=), a core file (core=,
    exe= the main program), a Windows x64 minidump (minidump=: the exception's thread first;
    symbol_path: directories -- a list or a ':'-separated string -- of module files, DIR/NAME or
    DIR/NAME/<TIMESTAMP><SIZEOFIMAGE>/NAME, and of their PDBs, DIR/NAME.pdb or
    DIR/NAME.pdb/<KEY>/NAME.pdb -- the PDBs only without context=: a context's own debug_dirs are
    where it looks for them) or raw machine state (raw=: a JSON document of one thread or a
    directory of them, doc/raw-state.md; modules of any format -- Mach-O, ELF, PE -- opened from
    their paths) or saved snapshots (snapshot=: a .snap file or a directory of them, from
    `stackprov stack --save-snapshots DIR`, with the CPython frames the capture read; the process
    may be gone), as `stackprov stack` prints them: a list of Thread, each with
    .tid, .name, .frames (Frame: pc, sp, cfa, module, build_id, id_kind, module_id, module_key,
    module_offset, function, file, line, column, method, resolver, inlined, ...) and .stop_reason.
    A module whose file is missing is answered from its bundle when the context has a bundle store
    (context=Context(bundle_store=DIR), offline=True for bundles only). max_frames: 1..65536 (0: 256).
    lines=False: no DWARF lines or inline chains (faster). python: "auto" (CPython 3.11 frames,
    method "runtime", interleaved before the _PyEval_EvalFrameDefault activation that runs them, as
    `stackprov stack --python=auto`), "off" (native frames only) or "only" (the Python frames alone).
    tail_calls (with lines): frames of functions that tail-called the next one, inferred from DWARF
    call sites as gdb shows them (method "tail_call", flags ["inferred"]; not on the stack), as
    `stackprov stack` shows them by default; False: only the frames on the stack.
    args=True: each Frame's .args is the list of its function's arguments (Argument: name, type,
    value, status, reason), as `stackprov stack --args` and gdb's `info args` give them: the DWARF
    formal parameters, each value read where its location can be evaluated from the frame's
    registers, its CFA and the captured memory; status "value", "optimized_out" (value None, gdb's
    <optimized out>) or "unknown" (value None, reason says why); type None when not known. [] for
    a frame without DWARF (or inferred, or a runtime frame, or offline); .args is None without args=True.
    kernel=True (pid= only, root; doc/kernel-stacks.md "stack --kernel"): each thread's kernel stack,
    read from /proc/PID/task/TID/{stack,syscall} before the capture, above its user frames, as
    `stackprov stack --kernel` shows it: kernel frames (domain "kernel", method "kernel_stack", pc 0,
    function and function_offset as the kernel names them, module "[kernel.kallsyms]") first, the first
    user frame flagged "kernel_user_boundary", and Thread.kernel (KernelStack: state "read",
    "unreadable", "running" or "stale", syscall, user_sp, user_pc, reason). with_btf=True (with
    kernel=True, a build with libbpf): each kernel frame's .prototype, .btf_func_id and
    .btf_approximate from the kernel's BTF (/sys/kernel/btf/vmlinux), as `stack --kernel --with-btf`."""
    _flag("stack", "args", args)
    return stack_with_info(pid, core, exe, minidump=minidump, raw=raw, symbol_path=symbol_path, tid=tid,
                           max_frames=max_frames, lines=lines, context=context, python=python,
                           tail_calls=tail_calls, args=args, snapshot=snapshot, kernel=kernel, with_btf=with_btf)[1]


def symbolize(path, addresses, *, inlines=True, llvm_compat=False, short_names=False, demangle=True,
              debug_dirs=None, symbol_path=None, context=None):
    """One inline chain per link-time address of the module file `path`: a list of InlineFrame,
    innermost inlined function first, the physical function last (one element with
    inlines=False, as llvm-symbolizer --no-inlines). An address nothing covers gives
    [InlineFrame(function='', resolver='none')]. llvm_compat=True names functions exactly as
    llvm-symbolizer-14 does; short_names: DW_AT_name (llvm --functions=short); demangle=False:
    linkage names. debug_dirs: where separate debug files are looked up (ELF: .build-id/xx/yyyy.debug;
    a PE's PDB: DIR/NAME.pdb, DIR/NAME.pdb/KEY/NAME.pdb; a Mach-O image's dSYM:
    DIR/NAME.dSYM/Contents/Resources/DWARF/NAME), as `stackprov symbolize --debug-file-directory`;
    symbol_path: local symbol stores searched for PDBs after them (`--symbol-path`; /usr/lib/debug
    first when debug_dirs is not given). Both take a list or a ':'-separated string, and are
    the context's: not with context= (give them to Context(debug_dirs=...))."""
    dd, sp = _dir_list("debug_dirs", debug_dirs), _dir_list("symbol_path", symbol_path)
    if dd is None and sp is None:
        sym = _thread_symbolizer() if context is None else context.symbolizer()
        # For repeated calls keep one: context.symbolizer().symbolize()
    elif context is not None:
        raise InvalidArgumentError("debug_dirs and symbol_path are the context's: give them to Context(debug_dirs=...), "
                                   "not with context=", _INVALID_ARG)
    else:
        sym = Context(debug_dirs=(dd if dd is not None else ["/usr/lib/debug"]) + (sp or [])).symbolizer()
    if isinstance(path, (bytes, _os.PathLike)):
        path = _os.fsdecode(path)  # a str as given; another type is the extension's TypeError
    addresses = _arguments.convert("addresses", addresses, list, "List[int]")
    return sym.symbolize(path, addresses, inlines=inlines, llvm_compat=llvm_compat,
                         short_names=short_names, demangle=demangle)


def symbolize_id(kind, key, addresses, *, store=None, bundle=None, inlines=True, llvm_compat=False, short_names=False,
                 demangle=True, context=None):
    """symbolize() for the module of identity `kind` -- "elf-build-id", "pdb-guid-age",
    "macho-uuid" or "pe-code-id" -- and `key` (Frame.module_key's form: the build-id in hex, the
    PDB's symbol-server key (GUID + age in hex, as in NAME.pdb/KEY/NAME.pdb), the Mach-O UUID with
    or without dashes, a PE code id (TimeDateStamp + SizeOfImage in hex)), with no module file: only its bundle answers, as `stackprov symbolize
    --build-id/--pdb-key`. store: the bundle store directory holding it (None: the context's, else
    the default store, as the CLI); bundle: answer from this bundle (a Bundle, "sha256:<hex>" in the
    store, or a bundle file) -- one that does not hold the module is an error naming both
    identities. A wrong kind name or a malformed key raises InvalidArgumentError naming it; no
    bundle for the identity NotFoundError naming the identity and the store."""
    if not isinstance(kind, str):
        raise InvalidArgumentError("invalid id kind %r (expected elf-build-id, pdb-guid-age or macho-uuid)" % (kind,),
                                   _INVALID_ARG)
    if not isinstance(key, str):
        raise InvalidArgumentError("invalid %s key %r (expected a string)" % (kind, key), _INVALID_ARG)
    refs = _bundle_refs([bundle], "bundle") if bundle is not None else []
    if store is not None:
        if context is not None:
            raise InvalidArgumentError("store '%s' is the context's: give it to Context(bundle_store=...), not with "
                                       "context=" % (store,), _INVALID_ARG)
        store = _arguments.convert("store", store, _os.fspath, _arguments.PATH)
        if not _os.path.isdir(store):
            raise FileMissingError("bundle store '%s' does not exist" % store, -2)
        context = Context(bundle_store=store)
    elif context is None:
        context = _stackprov._trace_context() if not refs else Context()
    sym = context.symbolizer(demangle=demangle)
    if refs:
        sym.use_bundle(refs[0])
    addresses = _arguments.convert("addresses", addresses, list, "List[int]")
    return sym.symbolize_id(kind, key, addresses, inlines=inlines, llvm_compat=llvm_compat,
                            short_names=short_names, demangle=demangle)


_local = _threading.local()


def _thread_symbolizer():
    """The default context's symbolizer of this thread (a symbolizer keeps per-module caches;
    one per thread, as the C ABI wants)."""
    sym = getattr(_local, "symbolizer", None)
    if sym is None:
        sym = _local.symbolizer = _stackprov._default_context().symbolizer()
    return sym


@_contextlib.contextmanager
def _trace_store(store, existing=False):
    """`store` as a TraceStore: the object itself, or one opened from a URL (None: the default
    store) and closed on exit. existing=True: an sqlite:PATH whose file does not exist is refused
    (opening would create an empty store), as the CLI's trace-resolve and trace-replay refuse it."""
    if isinstance(store, TraceStore):
        yield store
        return
    if store is not None and not isinstance(store, str):
        raise InvalidArgumentError("invalid store %r (expected a TraceStore or a URL: sqlite:PATH, "
                                   "postgresql://...)" % (store,), _INVALID_ARG)
    if existing and store and store.startswith("sqlite:") and not store.startswith("sqlite://") \
            and not _os.path.exists(store[7:]):
        raise FileMissingError("trace store '%s': %s does not exist" % (store, store[7:]), -2)
    ts = TraceStore(store)
    try:
        yield ts
    finally:
        ts.close()


_INVALID_ARG = -4000
_UUID = _re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _trace_id(trace_id):
    if not isinstance(trace_id, str) or not _UUID.match(trace_id):
        raise InvalidArgumentError("invalid trace id %r (expected a UUID, 8-4-4-4-12 hex digits)" % (trace_id,),
                                   _INVALID_ARG)
    return trace_id.lower()


def trace_capture(pid=None, core=None, exe=None, *, store=None, bundle=False, max_frames=0, tid=0,
                  sign_key=None, log_dir=None, log_key=None, python="auto", context=None, with_btf=False):
    """Captures every thread of a live process (pid=) or a core file (core=, exe=), unwinds and
    resolves them and stores the result as one trace in `store` (a TraceStore or a URL,
    sqlite:PATH / postgresql://...; None: the default store). Returns the trace id.
    bundle=True also builds and stores the symbol bundle of the modules touched (in the trace
    store and the context's bundle store); with sign_key= (a P-256 private key, PEM) it is signed
    and its envelope appended to the transparency log log_dir= (checkpoint signed by log_key=,
    default sign_key), as `stackprov trace-capture --bundle --sign KEY --log DIR`.
    python: "auto" (the default, as `trace-capture --python auto`): CPython 3.11's frames are read
    too and stored as trace frames of unwind method "runtime" (doc/runtime-frames.md "Traces");
    "off": native frames only.
    with_btf=True (pid= only; root): each thread's kernel stack is stored too, as its own segment with
    each frame's BTF prototype (doc/kernel-stacks.md), as `trace-capture --with-btf`; when the kernel's
    BTF cannot be read (no /sys/kernel/btf/vmlinux, a build without libbpf) the trace is captured
    without it and a RuntimeWarning says why, as the CLI does."""
    _flag("trace_capture", "with_btf", with_btf)
    if with_btf and pid is None:
        raise InvalidArgumentError("with_btf=True is only valid with pid= (a live process's kernel stacks)",
                                   _INVALID_ARG)
    if python not in ("auto", "off"):
        raise InvalidArgumentError("invalid python value %r (expected 'auto' or 'off')" % (python,), _INVALID_ARG)
    if sign_key is not None and not bundle:
        raise InvalidArgumentError("sign_key '%s' signs the bundle: give bundle=True" % sign_key, _INVALID_ARG)
    if sign_key is not None and log_dir is None:
        raise InvalidArgumentError("sign_key '%s' needs log_dir= (the transparency log)" % sign_key, _INVALID_ARG)
    ctx = context if context is not None else _stackprov._default_context()
    kernel = False
    if with_btf and core is None:
        why = _stackprov._kernel_btf_error()
        if why is None:
            kernel = True
        else:
            _warnings.warn("trace_capture(with_btf=True): no kernel segment stored: the kernel's BTF: %s" % why,
                           RuntimeWarning, stacklevel=2)
    if pid is not None and core is None:
        proc = ctx.capture(pid, tid=tid, python=python == "auto", kernel=kernel, with_btf=kernel)
    elif core is not None and pid is None:
        proc = ctx.open_core(core, exe=exe, tid=tid, python=python == "auto")
    else:
        raise InvalidArgumentError("give either pid= or core= (pid %r, core %r)" % (pid, core), _INVALID_ARG)
    with proc, _trace_store(store) as ts:
        return ts._capture(ctx, proc, bundle, max_frames, sign_key, log_dir, log_key)


def trace_get(trace_id, *, store=None):
    """The stored trace as a dict (the trace.capture event of doc/traces.md "Events")."""
    with _trace_store(store) as ts:
        return _json.loads(ts.get_json(trace_id))


def trace_list(*, store=None, limit=0):
    """[{"trace_id", "platform", "arch", "captured_at", "build_id", "frames"}], oldest first."""
    with _trace_store(store) as ts:
        return _json.loads(ts.list_json(limit))


def trace_replays(trace_id, *, store=None):
    """The replays of a stored trace (replay.result events of doc/traces.md), oldest first."""
    with _trace_store(store, existing=True) as ts:
        return [_json.loads(line) for line in ts.replays_json(_trace_id(trace_id)).splitlines() if line.strip()]


def _bundle_refs(bundles, name):
    out = []
    for b in _arguments.convert(name, bundles, list, "a list of bundles"):
        if isinstance(b, Bundle):
            b = b.digest
        b = _arguments.convert(name, b, _os.fspath, "a Bundle, a digest or a file (%s)" % _arguments.PATH)
        if b.startswith("sha256:"):
            if not _re.match(r"^sha256:[0-9a-f]{64}$", b):
                raise InvalidArgumentError("invalid bundle '%s' (expected sha256:<64 lower-case hex> or a file)" % b,
                                           _INVALID_ARG)
        elif not _os.path.isfile(b):
            raise FileMissingError("bundle '%s': no such file (expected sha256:<64 lower-case hex> or a file)" % b, -2)
        out.append(b)
    return out


def trace_resolve(trace_id, *, store=None, offline=False, bundles=(), context=None):
    """Resolves a stored trace again from its captured data (every thread unwound and named anew)
    with the trace's own bundle, `bundles` (Bundle objects, "sha256:<hex>" digests of the trace
    store or the bundle store, or bundle files) and every bundle of the trace store that holds one
    of its modules, and replaces its frames (`stackprov trace-resolve`). offline=True: bundles
    only, no module file, debug file or network. Returns the report as a dict: trace_id, frames,
    named, covered, with_lines, offline, symbol_coverage_pct, resolvers {name: count}, bundles.
    context: None uses the default bundle store directory when it exists, as the CLI does."""
    tid = _trace_id(trace_id)
    refs = _bundle_refs(bundles, "bundles")
    ctx = context if context is not None else _stackprov._trace_context()
    with _trace_store(store, existing=True) as ts:
        return _json.loads(ts._resolve(ctx, tid, bool(offline), refs))


def _file_arg(what, path, name):
    path = _arguments.convert(name, path, _os.fspath, _arguments.PATH)
    if not _os.path.isfile(path) or not _os.access(path, _os.R_OK):
        raise FileMissingError("%s '%s': %s" % (what, path, "no such file" if not _os.path.exists(path)
                                                else "not a readable file"), -2)
    return path


def trace_replay(trace_id, *, store=None, seeds=5, first_seed=1, min_coverage=None, min_success=None, keys=(),
                 trusted_root=None, context=None):
    """Replays a stored trace `seeds` times (1 to 1000) from seed `first_seed` under perturbations,
    records each replay, verifies its bundles' DSSE envelopes with `keys` (public key files) and
    their inclusion proofs against `trusted_root` (the log's trusted_root.json), checks the
    modules' identities and evaluates the gate (`stackprov trace-replay`). min_coverage: percent
    (None: 90); min_success: ratio (None: 0.95). Returns a ReplayReport (.exit_code, .passed,
    .coverage_pct, .success_ratio, .json(), .junit(), .summary(), .to_dict()); a failed gate is
    not an exception."""
    tid = _trace_id(trace_id)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 1000:
        raise InvalidArgumentError("invalid seeds %r (expected an integer from 1 to 1000)" % (seeds,), _INVALID_ARG)
    last = (1 << 63) - 1
    if isinstance(first_seed, bool) or not isinstance(first_seed, int) or not 1 <= first_seed <= last:
        raise InvalidArgumentError("invalid first_seed %r (expected an integer from 1 to %d)" % (first_seed, last),
                                   _INVALID_ARG)
    if first_seed > last - (seeds - 1):
        raise InvalidArgumentError("first_seed %d with seeds %d goes past the last seed %d" % (first_seed, seeds, last),
                                   _INVALID_ARG)
    if min_coverage is not None and not (isinstance(min_coverage, (int, float)) and 0 <= min_coverage <= 100):
        raise InvalidArgumentError("invalid min_coverage %r (expected a percentage from 0 to 100)" % (min_coverage,),
                                   _INVALID_ARG)
    if min_success is not None and not (isinstance(min_success, (int, float)) and 0 <= min_success <= 1):
        raise InvalidArgumentError("invalid min_success %r (expected a ratio from 0 to 1)" % (min_success,),
                                   _INVALID_ARG)
    keys = [keys] if isinstance(keys, (str, _os.PathLike)) else _arguments.convert("keys", keys, list, "a list of files")
    kp = [_file_arg("key", k, "keys") for k in keys]
    root = _file_arg("trusted_root", trusted_root, "trusted_root") if trusted_root is not None else None
    ctx = context if context is not None else _stackprov._trace_context()
    with _trace_store(store, existing=True) as ts:
        return ts._replay(ctx, tid, seeds, first_seed, -1.0 if min_coverage is None else float(min_coverage),
                          -1.0 if min_success is None else float(min_success), kp, root)


def _int_in(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidArgumentError("invalid %s %r (expected an integer from %d to %d)" % (name, value, lo, hi),
                                   _INVALID_ARG)
    return value


def record(pid=None, command=None, *, output="stackprov.cap", duration=None, frequency=999, stack_size=8192,
           with_kernel=False, off_cpu=False, python=False, progress=None, context=None):
    """Samples a running process (pid=, all its threads, also those created later) or a command
    it starts (command=["prog", "arg", ...]) with perf_event_open, as `stackprov record`: cpu-clock
    at `frequency` Hz per thread (1 to 100000), `stack_size` bytes of user stack per sample (a
    multiple of 8 from 8 to 65528), the user registers and the kernel call chain; the module map
    and build-ids. Writes the capture file `output` (under a temp name, renamed when done: a failed
    recording leaves no file) that perf_import() and `stackprov perf-import` read. Blocks until
    `duration` seconds (0.001 or more; None: until the target exits) or SIGINT, SIGTERM or SIGHUP
    (the file is finished; a started command is sent SIGTERM, a pid= target keeps running).
    Returns a RecordResult (.samples, .lost, .threads, .exit_status of a started command, .output).
    progress: None, or a callable progress(samples, lost) called once when sampling has started
    (0, 0), then about every 250 ms. The GIL is released while recording.
    with_kernel=True: the samples are taken by the eBPF kernel sampler (`record --with-kernel`,
    doc/kernel-stacks.md: the kernel stack, the user registers and stack per sample; root, and a
    build that has the sampler); off_cpu=True with it: at each sched:sched_switch of the target's
    threads instead of cpu-clock.
    python=True (`record --python`, doc/runtime-frames.md "Recordings"): each sampled thread's
    CPython 3.11 frames are read from the running process right after its sample (a read during
    which the chain changed is kept as torn, without frames); perf_import() then gives them as
    frames of method "runtime" (.function co_name, .qualname, .file, .line). RecordResult counts
    them (.python_read, .python_torn, .python_damaged, .python_no_thread, .python_processes). Not
    with with_kernel=True."""
    if (pid is None) == (command is None):
        raise InvalidArgumentError("give either pid= or command= (pid %r, command %r)" % (pid, command), _INVALID_ARG)
    argv = []
    if pid is not None:
        _int_in("pid", pid, 1, 4194304)  # pid_t; the kernel's PID_MAX_LIMIT
    else:
        if isinstance(command, (str, bytes)) or not command or \
                not all(isinstance(a, (str, _os.PathLike)) for a in command):
            raise InvalidArgumentError("invalid command %r (expected a non-empty list of strings: the program and "
                                       "its arguments)" % (command,), _INVALID_ARG)
        argv = [_os.fspath(a) for a in command]
    _int_in("frequency", frequency, 1, 100000)
    _int_in("stack_size", stack_size, 8, 65528)
    if stack_size % 8:
        raise InvalidArgumentError("invalid stack_size %d (expected a multiple of 8 from 8 to 65528)" % stack_size,
                                   _INVALID_ARG)
    ms = 0
    if duration is not None:
        ok = isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration == duration
        ms = round(duration * 1000.0) if ok and abs(duration) < 1e10 else -1
        if not 1 <= ms <= 4294967295:
            raise InvalidArgumentError("invalid duration %r (expected seconds from 0.001 to 4294967)" % (duration,),
                                       _INVALID_ARG)
    output = _arguments.convert("output", output, _os.fspath, _arguments.PATH)
    if not output:
        raise InvalidArgumentError("output needs a file name", _INVALID_ARG)
    if _os.path.isdir(output):
        raise InvalidArgumentError("output '%s' is a directory" % output, _INVALID_ARG)
    ctx = context if context is not None else _stackprov._default_context()
    if progress is not None and not callable(progress):
        raise InvalidArgumentError("progress %r is not callable" % (progress,), _INVALID_ARG)
    if off_cpu and not with_kernel:
        raise InvalidArgumentError("off_cpu=True needs with_kernel=True", _INVALID_ARG)
    if python and with_kernel:
        raise InvalidArgumentError("python=True cannot be combined with with_kernel=True (not supported yet)",
                                   _INVALID_ARG)
    # SPROV_RECORD_KERNEL, SPROV_RECORD_OFF_CPU, SPROV_RECORD_PYTHON
    flags = (1 if with_kernel else 0) | (2 if off_cpu else 0) | (4 if python else 0)
    return _stackprov._record(ctx, pid or 0, argv, output, frequency, stack_size, ms, flags, progress)


def perf_import(path, *, sysroot=None, store=None, max_frames=256, inlines=True, _log_stderr=False):
    """Reads a perf.data file (perf record, with or without -g or --call-graph dwarf) or a capture
    file of record() and unwinds and names every sample as `stackprov perf-import` does (the same
    code). Returns a Profile: .samples (ProfileSample: time, pid, tid, comm, mode, period, frames
    leaf first -- the kernel's, then the user frames, each preceded by the functions inlined into
    it when inlines=True (ProfileFrame.inlined) --, truncated, stop_reason), .folded ({folded
    line: samples}, perf-import -f folded's lines), .folded_text() and .svg(title) (perf-import -f
    folded / -f svg's output, byte for byte), and the summary's counts (.failed, .truncated,
    .frames, .kernel_frames, .modes, .lost) and notes (.warnings, .truncation, .kernel_note).
    sysroot: open module files under it; store: a bundle store directory naming (and unwinding)
    modules whose file is missing or another build; max_frames: user frames per sample, 1 to
    65536. A file cut short is read up to its last complete record (.truncation says what is
    lost). The GIL is released while reading."""
    path = _arguments.convert("path", path, _os.fspath, _arguments.PATH)
    if not path:
        raise InvalidArgumentError("the input file name is empty", _INVALID_ARG)
    _int_in("max_frames", max_frames, 1, 65536)
    if store is not None:
        store = _arguments.convert("store", store, _os.fspath, _arguments.PATH)
        if not _os.path.exists(store):
            raise FileMissingError("bundle store '%s' does not exist" % store, -2)
        if not _os.path.isdir(store):
            raise InvalidArgumentError("bundle store '%s' is not a directory" % store, _INVALID_ARG)
    if sysroot is not None:
        sysroot = _arguments.convert("sysroot", sysroot, _os.fspath, _arguments.PATH)
    return _stackprov._perf_import(path, sysroot, store, max_frames, bool(inlines), bool(_log_stderr))


# A wrong argument type names the public call (stackprov.Symbolizer.symbolize(), stackprov.stack()),
# the argument and its value, never the extension's internal signature (stackprov._stackprov...).
_arguments.publish(globals(), __all__)
