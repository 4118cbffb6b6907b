# SPDX-License-Identifier: Apache-2.0
# Error mapping: the C codes (include/stackprov/errors.h, negative errno) as stackprov.Error
# subclasses, and the Python built-in exceptions users expect.
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


@pytest.mark.parametrize("call, name", [
    (lambda: stackprov.stack(pid="12"), "stack"),
    (lambda: stackprov.stack_with_info(core=5), "stack_with_info"),
    (lambda: stackprov.symbolize(123, [0x1000]), "symbolize"),
    (lambda: stackprov.symbolize("/bin/true", ["x"]), "symbolize"),
])
def test_wrong_type_names_the_public_function(call, name):
    """A wrong argument type is reported with the public function's signature, never the extension's
    internal one (stackprov._stackprov.Context._stack(self, ...))."""
    with pytest.raises(TypeError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith(name + "(): an argument has the wrong type")
    assert "expected " + name + "(" in msg and "_stackprov" not in msg and "self:" not in msg


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
