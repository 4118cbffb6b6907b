# SPDX-License-Identifier: Apache-2.0
# record --python's fixture (runtime_check.py record): two threads that never leave known Python
# chains and keep the CPU busy, each innermost frame looping on one line (its line never changes).
import threading


def leaf(n):
    while True: sum(range(n))  # noqa: E701 (one line: the leaf's line is this one at every sample)


def middle(n):
    leaf(n)


def outer(n):
    middle(n)


def key_leaf(x):
    while True: sorted(range(x))  # noqa: E701


def sort_main():
    # C (sorted) calls Python (the key): a second _PyEval_EvalFrameDefault activation.
    return sorted([40, 30], key=lambda x: key_leaf(x))


t = threading.Thread(target=sort_main, name="sorter", daemon=True)
t.start()
print("ready", flush=True)
outer(200)
