# SPDX-License-Identifier: Apache-2.0
# Sourced by gdb after CPython's python3.11-gdb.py: for every thread, the Python frames of each
# _PyEval_EvalFrameDefault activation, with the extension's own Frame/PyFramePtr classes.
import gdb


def _dump_eval_groups():
    for th in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
        th.switch()
        print("GROUPS-THREAD %d" % th.ptid[1])
        frame = Frame.get_selected_frame()  # noqa: F821 (defined by python3.11-gdb.py)
        ordinal = 0
        while frame:
            if frame.is_evalframe():
                print("GROUPS-EVAL %d" % ordinal)
                ordinal += 1
                py = frame.get_pyop()
                while py:
                    if py.is_optimized_out():
                        break
                    line = py.current_line_num()
                    print("GROUPS-PY\t%s\t%s\t%s" % (py.filename(), line if line is not None else "?",
                                                    py.co_name.proxyval(set())))
                    if py.is_entry():
                        break
                    py = py.previous()
            frame = frame.older()


_dump_eval_groups()
