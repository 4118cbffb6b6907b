# SPDX-License-Identifier: Apache-2.0
# Error mapping: the C codes (include/stackprov/errors.h, negative errno) as stackprov.Error
# subclasses, and the Python built-in exceptions users expect.
import inspect
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import stackprov


def dead_pid():
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    return p.pid


def test_no_such_process_is_process_lookup_error():
    pid = dead_pid()
    with pytest.raises(ProcessLookupError) as e:
        stackprov.stack(pid=pid)
    assert isinstance(e.value, stackprov.Error)
    assert e.value.code == -3 and e.value.errno == 3  # -ESRCH, as the C ABI documents
    assert str(pid) in e.value.message


def test_permission_denied_is_permission_error(fixture_bench):
    """As user nobody against a root-owned fixture, ptrace is refused (EPERM)."""
    if os.getuid() != 0:
        pytest.fail("needs root to run python3 as user nobody (tests run as root)")
    tmp = tempfile.mkdtemp(prefix="stackprov-py-eperm-")
    try:
        os.chmod(tmp, 0o755)
        shutil.copytree(os.path.dirname(stackprov.__file__), os.path.join(tmp, "stackprov"))
        code = ("import stackprov\n"
                "try:\n"
                "    stackprov.stack(pid=%d)\n"
                "except PermissionError as e:\n"
                "    assert isinstance(e, stackprov.Error)\n"
                "    print('EPERM', e.code, e.message)\n" % fixture_bench.pid)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                            "-c", code], capture_output=True, text=True, env={"PYTHONPATH": tmp}, cwd=tmp,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("EPERM -1 "), r.stdout
        assert str(fixture_bench.pid) in r.stdout and "ptrace" in r.stdout.lower()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_missing_core_is_file_not_found():
    with pytest.raises(FileNotFoundError) as e:
        stackprov.stack(core="/nonexistent/core.1")
    assert isinstance(e.value, stackprov.Error) and e.value.code == -2
    assert "/nonexistent/core.1" in e.value.message


def test_not_a_core_is_format_error(tmp_path):
    p = tmp_path / "notacore"
    p.write_bytes(b"hello, not ELF\n" * 10)
    with pytest.raises(stackprov.FormatError) as e:
        stackprov.stack(core=str(p))
    assert e.value.code == -4100  # SPROV_ERR_ELF (errors.h)
    assert str(p) in e.value.message


def test_bad_snapshot_bytes_name_the_field():
    good = stackprov.Context().capture_self().to_bytes()
    with pytest.raises(stackprov.SnapshotError) as e:
        stackprov.Snapshot.from_bytes(good[:7])
    assert e.value.code == -4202 and "magic" in e.value.message
    with pytest.raises(stackprov.SnapshotError):
        stackprov.Snapshot.from_bytes(b"X" + good[1:])


def test_argument_errors():
    with pytest.raises(ValueError) as e:
        stackprov.stack()
    assert isinstance(e.value, stackprov.InvalidArgumentError) and e.value.code == -4000
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.stack(pid=1, core="x")
    assert "pid 1" in e.value.message and "'x'" in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.stack(pid=0)
    assert "invalid pid 0" in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.Context(resolvers=["dwarf", "nosuchresolver"])
    assert "nosuchresolver" in e.value.message
    with pytest.raises(TypeError):
        stackprov.stack(pid="12")


@pytest.mark.parametrize("call, name, value", [
    (lambda: stackprov.stack(pid="12"), "stack", "pid has the wrong type: '12' (str)"),
    (lambda: stackprov.stack_with_info(core=5), "stack_with_info", "core has the wrong type: 5 (int)"),
    (lambda: stackprov.symbolize(123, [0x1000]), "symbolize", "path has the wrong type: 123 (int)"),
    (lambda: stackprov.symbolize("/bin/true", ["x"]), "symbolize", "addresses has the wrong type: ['x'] (list)"),
])
def test_wrong_type_names_the_public_function(call, name, value):
    """A wrong argument type is reported with the public function's signature, never the extension's
    internal one (stackprov._stackprov.Context._stack(self, ...)), and names the argument and its value."""
    with pytest.raises(TypeError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith("stackprov." + name + "(): argument " + value), msg
    assert "; expected stackprov." + name + "(" in msg and "_stackprov" not in msg and "self:" not in msg


def public_classes():
    """The classes among the package's public names (dir(stackprov)), exceptions aside."""
    return [(n, getattr(stackprov, n)) for n in sorted(dir(stackprov)) if not n.startswith("_")
            and inspect.isclass(getattr(stackprov, n)) and not issubclass(getattr(stackprov, n), BaseException)]


def public_methods(cls):
    """(name, static) of a class's own public methods (and __contains__, which `x in obj` reaches)."""
    out = []
    for name in sorted(vars(cls)):
        raw = inspect.getattr_static(cls, name)
        if (name.startswith("_") and name != "__contains__") or isinstance(raw, property):
            continue
        if inspect.isroutine(getattr(cls, name)):
            out.append((name, isinstance(raw, staticmethod)))
    return out


def wrong_call(f):
    """f called with object() for each required positional parameter (at least one; for a function
    with none, as its first keyword argument)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except ValueError:  # an extension function: no Python signature
        return lambda: f(object())
    required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if required or params[0].kind != params[0].KEYWORD_ONLY:
        return lambda: f(*[object()] * max(1, len(required)))
    return lambda: f(**{params[0].name: object()})


def every_public_call():
    """Each constructor, method and function of the public package, called with object() where the
    first argument goes (as self for a method: the unbound method's first argument)."""
    calls = []
    for n, cls in public_classes():
        calls.append(("stackprov." + n, lambda cls=cls: cls(object())))
        for m, static in public_methods(cls):
            calls.append(("stackprov.%s.%s" % (n, m), lambda f=getattr(cls, m): f(object())))
    for n in sorted(dir(stackprov)):
        f = getattr(stackprov, n)
        if not n.startswith("_") and inspect.isroutine(f):
            calls.append(("stackprov." + n, wrong_call(f)))
    return calls


def assert_public_type_error(excinfo, qualname):
    msg = str(excinfo.value)
    assert "_stackprov" not in msg and "(anonymous namespace)" not in msg, msg
    if msg.startswith(qualname + " has no constructor"):
        return msg  # a class the package only returns (Frame, Thread, ...): no argument is at fault
    assert msg.startswith(qualname + "(): "), msg
    assert "<object object at 0x" in msg, msg  # the offending value
    assert "; expected " + qualname + "(" in msg, msg
    return msg


CALLS = every_public_call()


@pytest.mark.parametrize("qualname, call", CALLS, ids=[q for q, _ in CALLS])
def test_every_public_call_names_itself_for_a_wrong_type(qualname, call):
    """issue 36: e.g. ctx.symbolizer('/bin/true') printed pybind11's "incompatible function
    arguments" with `(self: stackprov._stackprov.Context, *, demangle: bool = True)`. A function
    that checks the value itself raises InvalidArgumentError (a ValueError) naming it instead."""
    with pytest.raises((TypeError, stackprov.InvalidArgumentError)) as e:
        call()
    if isinstance(e.value, stackprov.InvalidArgumentError):
        assert "<object object at 0x" in e.value.message and "_stackprov" not in e.value.message
    else:
        assert_public_type_error(e, qualname)


def test_every_class_and_method_is_enumerated():
    # The enumeration above is not empty by accident: the classes and methods the issue names.
    names = {n for n, _ in public_classes()}
    assert {"Context", "Symbolizer", "Unwinder", "Snapshot", "Store", "Bundle", "TraceStore", "Process",
            "ReplayReport", "Profile", "Log"} <= names
    assert ("symbolize", False) in public_methods(stackprov.Symbolizer)
    assert ("from_bytes", True) in public_methods(stackprov.Snapshot)


@pytest.fixture(scope="module")
def instances(tmp_path_factory):
    """One object of each public class that has public methods, made as a user makes them; a
    ReplayReport and a Profile need a replayed trace and a recording: their methods are covered
    unbound above."""
    tmp = tmp_path_factory.mktemp("instances")
    child = subprocess.Popen(["sleep", "60"])
    try:
        ctx = stackprov.Context()
        snap = ctx.capture_self()
        uw = ctx.unwinder()
        key = str(tmp / "key.pem")
        stackprov.key_generate(key)
        stackprov.log_init(str(tmp / "log"), key=key)
        objs = {"Context": ctx, "Symbolizer": ctx.symbolizer(), "Unwinder": uw, "Snapshot": snap,
                "Stack": uw.unwind(snap), "Process": ctx.capture(child.pid),
                "Bundle": stackprov.Bundle.build(["/bin/true"]),
                "Store": stackprov.Store(str(tmp / "store"), create=True),
                "TraceStore": stackprov.TraceStore("sqlite:" + str(tmp / "t.db")),
                "Log": stackprov.Log(str(tmp / "log"))}
        yield objs
    finally:
        child.kill()
        child.wait()


def test_wrong_type_on_an_object_names_the_method_and_the_value(instances):
    """Bound calls as users make them: the message names the argument at fault, not self."""
    for n, cls in public_classes():
        methods = public_methods(cls)
        if not methods or n in ("ReplayReport", "Profile"):
            continue
        assert n in instances, "no instance of stackprov.%s to call its methods on" % n
        for m, static in methods:
            qualname = "stackprov.%s.%s" % (n, m)
            with pytest.raises(TypeError) as e:
                getattr(instances[n], m)(object())
            msg = assert_public_type_error(e, qualname)
            assert "argument self" not in msg and "<stackprov.%s object" % n not in msg, msg


def test_wrong_type_messages_name_the_argument(tmp_path):
    ctx = stackprov.Context()
    with pytest.raises(TypeError) as e:
        ctx.symbolizer("/bin/true")
    assert str(e.value).startswith("stackprov.Context.symbolizer(): unexpected positional argument '/bin/true' (str); "
                                   "expected stackprov.Context.symbolizer(*, demangle: bool = True)")
    with pytest.raises(TypeError) as e:
        ctx.symbolizer().symbolize("abc")
    assert str(e.value).startswith("stackprov.Symbolizer.symbolize(): missing argument addresses; expected "
                                   "stackprov.Symbolizer.symbolize(path: str, addresses: List[int], *, ")
    with pytest.raises(TypeError) as e:
        stackprov.Context(debug_dirs=5)
    assert str(e.value).startswith("stackprov.Context(): argument debug_dirs has the wrong type: 5 (int), "
                                   "not Optional[List[str]]; expected stackprov.Context(*, debug_dirs: ")
    # pybind11 refuses an integer its C type cannot hold as it refuses a wrong type: a uint32_t here
    with pytest.raises(TypeError) as e:
        ctx.capture_self(max_stack_bytes=-1)
    assert str(e.value).startswith("stackprov.Context.capture_self(): argument max_stack_bytes is out of range: -1 "
                                   "(int); expected stackprov.Context.capture_self(*, max_stack_bytes: int = 0)")
    with pytest.raises(TypeError) as e:
        ctx.capture_self().read_memory(0x1000, -1)  # two integers: which one pybind11 refused is not known
    assert str(e.value).startswith("stackprov.Snapshot.read_memory(): an argument has the wrong type or an integer "
                                   "is out of range (given: address=4096 (int), length=-1 (int)); expected "
                                   "stackprov.Snapshot.read_memory(address: int, length: int)")
    store = stackprov.Store(str(tmp_path / "store"), create=True)
    with pytest.raises(TypeError) as e:
        5 in store
    assert str(e.value).startswith("stackprov.Store.__contains__(): argument digest has the wrong type: 5 (int), "
                                   "not str")
    with pytest.raises(TypeError) as e:
        store.put(5)
    # two overloads: both are named, each with what it would take
    assert "argument bundle has the wrong type: 5 (int), not stackprov.Bundle; argument data has the wrong type: " \
           "5 (int), not bytes; expected stackprov.Store.put(bundle: stackprov.Bundle, *, index: bool = True) or " \
           "stackprov.Store.put(data: bytes, *, index: bool = True)" in str(e.value)
    # the package's own conversions (list(), os.fspath) name the argument as well
    with pytest.raises(TypeError) as e:
        stackprov.symbolize("/bin/true", 5)
    assert str(e.value).startswith("stackprov.symbolize(): argument addresses has the wrong type: 5 (int), not "
                                   "List[int]; expected stackprov.symbolize(path, addresses, *, ")
    with pytest.raises(TypeError) as e:
        stackprov.trace_replay("00000000-0000-4000-8000-000000000000", keys=5)
    assert str(e.value).startswith("stackprov.trace_replay(): argument keys has the wrong type: 5 (int), not a list "
                                   "of files; expected stackprov.trace_replay(trace_id, *, ")


def test_closed_objects_raise():
    ctx = stackprov.Context()
    ctx.close()
    assert ctx.closed
    with pytest.raises(stackprov.InvalidArgumentError, match="closed"):
        ctx.capture_self()
    with stackprov.Context() as ctx2:
        sym = ctx2.symbolizer()
    sym.close()
    with pytest.raises(stackprov.InvalidArgumentError, match="Symbolizer is closed"):
        sym.symbolize("/bin/true", [0])


def test_dir_lists_only_the_api():
    # issue 36: dir(stackprov) listed the modules the package imports (contextlib, json, os, re,
    # threading); the public names are __all__ and nothing is a module
    import types
    public = [n for n in dir(stackprov) if not n.startswith("_")]
    assert not [n for n in public if isinstance(getattr(stackprov, n), types.ModuleType)]
    assert sorted(public) == sorted(n for n in stackprov.__all__ if not n.startswith("_"))
