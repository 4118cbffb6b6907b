# SPDX-License-Identifier: Apache-2.0
# `cmake --install BUILD --prefix P` (what `make install PREFIX=P` runs; here its component
# "python", the rest of the tree need not be built) puts the package where
# that prefix's python3 looks: one of Debian's site.getsitepackages([P]) (for /usr/local,
# /usr/local/lib/python3.11/dist-packages, on python3's default sys.path).
import os
import shutil
import subprocess
import sys

import pytest
from conftest import need_env


def test_install_then_import(tmp_path):
    build = os.environ.get("STACKPROV_BUILD_DIR")
    if not build or not os.path.isdir(build):
        pytest.fail("STACKPROV_BUILD_DIR is not set to the build directory: run the suite through ctest")
    cmake = shutil.which("cmake") or pytest.fail("cmake not found in PATH")
    prefix = tmp_path / "prefix"
    r = subprocess.run([cmake, "--install", build, "--component", "python", "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    code = ("import site, sys\n"
            "for d in site.getsitepackages([sys.argv[1]]): site.addsitedir(d)\n"
            "import stackprov\n"
            "print(stackprov.__file__)\n"
            "print(stackprov.__version__)\n"
            "print(stackprov.symbolize(sys.argv[2], [int(sys.argv[3], 16)], llvm_compat=True)[0][-1].function)\n")
    demo = need_env("STACKPROV_DEMO")
    sym = subprocess.run(["readelf", "-sW", demo], capture_output=True, text=True).stdout
    main = [l.split()[1] for l in sym.splitlines() if l.split()[-1:] == ["main"] and "FUNC" in l][0]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code, str(prefix), demo, main], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    file, version, name = r.stdout.split("\n")[:3]
    assert file == str(prefix / ("lib/python3.%d/dist-packages/stackprov/__init__.py" % sys.version_info[1]))
    for extra in ("py.typed", "__init__.pyi", "__main__.py"):
        assert (prefix / os.path.dirname(os.path.relpath(file, str(prefix))) / extra).exists(), extra
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        assert "CMAKE_PROJECT_VERSION:STATIC=%s\n" % version in f.read()
    assert name == "main"  # the installed module works: readelf's main is named main
