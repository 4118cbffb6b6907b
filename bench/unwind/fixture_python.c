/* SPDX-License-Identifier: Apache-2.0 */
/* bench/unwind fixture: embedded CPython 3.11 captures itself from inside nested Python calls. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

#include "snapshot_file.h"
#include "stackprov/stackprov.h"

/* Usage: bench_unwind_fixture_python COUNT OUT_FILE
 * Runs Python code whose call chains go through libpython's C paths (sorted's
 * key function, map, functools.reduce, type calls, dunder methods, exec,
 * generators) and, at the leaves, calls spcap.capture(category), a builtin
 * module of this program, which captures the thread with stackprov. */

static sprov_context* g_ctx;
static FILE* g_out;
static long g_written;

static PyObject* spcap_capture(PyObject* self, PyObject* args) {
  const char* category = NULL;
  if (!PyArg_ParseTuple(args, "s", &category)) return NULL;
  sprov_snapshot* snap = NULL;
  if (sprov_snapshot_capture_self(g_ctx, NULL, &snap) != 0) {
    PyErr_Format(PyExc_RuntimeError, "capture: %s", sprov_last_error_message());
    return NULL;
  }
  int err = spb_snap_write(g_out, kSnapSourcePython, category, snap);
  sprov_snapshot_free(snap);
  if (err != 0) {
    PyErr_SetString(PyExc_OSError, "snapshot write failed");
    return NULL;
  }
  g_written++;
  return PyLong_FromLong(g_written);
}

static PyMethodDef kSpcapMethods[] = {
    {"capture", spcap_capture, METH_VARARGS, "capture(category) -> snapshots written so far"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kSpcapModule = {
    PyModuleDef_HEAD_INIT, "spcap", "stackprov capture hook for bench/unwind", -1, kSpcapMethods,
    NULL, NULL, NULL, NULL,
};

static PyObject* PyInit_spcap(void) { return PyModule_Create(&kSpcapModule); }

/* Every shape reaches spcap.capture through a different libpython C path. */
static const char kProgram[] =
    "import functools, operator, spcap\n"
    "cap = spcap.capture\n"
    "def plain(n):\n"
    "    if n <= 0: return cap('python/plain')\n"
    "    return plain(n - 1) + 1\n"
    "def via_map(n):\n"
    "    if n <= 0: return cap('python/map')\n"
    "    return sum(map(via_map, [n - 1]))\n"
    "def via_sorted(n):\n"
    "    if n <= 0:\n"
    "        cap('python/sorted'); return 0\n"
    "    return sorted([n, n - 1], key=lambda k: via_sorted(k - 1) if k == n else 0)[0]\n"
    "def via_reduce(n):\n"
    "    if n <= 0: return cap('python/reduce')\n"
    "    return functools.reduce(lambda a, b: a + via_reduce(b), [n - 1], 0)\n"
    "class Node:\n"
    "    def __init__(self, n):\n"
    "        self.child = Node(n - 1) if n > 0 else cap('python/init')\n"
    "class Bag:\n"
    "    def __init__(self, n): self.n = n\n"
    "    def __getitem__(self, i):\n"
    "        if self.n <= 0: return cap('python/getitem')\n"
    "        return Bag(self.n - 1)[i]\n"
    "    def __len__(self):\n"
    "        if self.n <= 0: return cap('python/len')\n"
    "        return len(Bag(self.n - 1))\n"
    "    @property\n"
    "    def prop(self):\n"
    "        if self.n <= 0: return cap('python/property')\n"
    "        return Bag(self.n - 1).prop\n"
    "def via_gen(n):\n"
    "    if n <= 0:\n"
    "        yield cap('python/generator'); return\n"
    "    yield from (x for x in via_gen(n - 1))\n"
    "def via_exec(n):\n"
    "    if n <= 0: return cap('python/exec')\n"
    "    env = {'f': via_exec, 'n': n}\n"
    "    exec('r = f(n - 1)', env)\n"
    "    return env['r']\n"
    "def mixed(n):\n"
    "    if n <= 0: return cap('python/mixed')\n"
    "    k = n % 4\n"
    "    if k == 0: return sum(map(mixed, [n - 1]))\n"
    "    if k == 1: return operator.methodcaller('__call__', n - 1)(mixed)\n"
    "    if k == 2: return functools.partial(mixed, n - 1)()\n"
    "    return mixed(n - 1)\n"
    "shapes = [plain, via_map, via_sorted, via_reduce, Node, lambda n: Bag(n)[0],\n"
    "          lambda n: len(Bag(n)), lambda n: Bag(n).prop, lambda n: list(via_gen(n)),\n"
    "          via_exec, mixed]\n"
    "def run(count):\n"
    "    for i in range(count):\n"
    "        shapes[i % len(shapes)](1 + (i * 7) % 23)\n";

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s COUNT OUT_FILE\n", argv[0]);
    return 2;
  }
  long count = strtol(argv[1], NULL, 10);
  g_out = spb_snap_open(argv[2]);
  if (g_out == NULL) {
    perror(argv[2]);
    return 1;
  }
  if (sprov_context_new(NULL, &g_ctx) != 0) {
    fprintf(stderr, "sprov_context_new: %s\n", sprov_last_error_message());
    return 1;
  }
  PyImport_AppendInittab("spcap", PyInit_spcap);
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
  PyStatus st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) {
    fprintf(stderr, "Py_InitializeFromConfig failed\n");
    return 1;
  }
  int rc = 0;
  PyObject* main_mod = PyImport_AddModule("__main__");
  PyObject* globals = PyModule_GetDict(main_mod);
  PyObject* r = PyRun_String(kProgram, Py_file_input, globals, globals);
  if (r == NULL) {
    PyErr_Print();
    rc = 1;
  }
  Py_XDECREF(r);
  if (rc == 0) {
    /* Each shape call captures once; run until COUNT snapshots exist. */
    PyObject* run = PyDict_GetItemString(globals, "run");
    PyObject* res = PyObject_CallFunction(run, "l", count);
    if (res == NULL) {
      PyErr_Print();
      rc = 1;
    }
    Py_XDECREF(res);
  }
  if (Py_FinalizeEx() < 0) rc = 1;
  fclose(g_out);
  sprov_context_free(g_ctx);
  fprintf(stderr, "fixture_python: wrote %ld snapshots to %s\n", g_written, argv[2]);
  return rc;
}
