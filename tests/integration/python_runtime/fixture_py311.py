# SPDX-License-Identifier: Apache-2.0
# Python 3.11 fixture for the runtime-frame tests: every thread parks in time.sleep at a known depth.
"""Threads, each ending in time.sleep(1000):
  main       nested method calls -> sorted(key=lambda) (C calling Python) -> a generator
  reduce     functools.reduce(lambda) -> raise/except: sleeps inside the except block
  finalizer  a finally block drops an object whose __del__ sleeps (C tp_finalize -> Python)
  ctypes     libc qsort with a ctypes callback (foreign C code calling Python)
  coroutine  an async def driven by coro.send(None), through map(lambda)
Prints "ready" once every other thread is about to sleep; the harness then waits until every
task is in clock_nanosleep (/proc/PID/task/TID/syscall).
"""
import ctypes
import ctypes.util
import functools
import sys
import threading
import time

PARKED = threading.Semaphore(0)


def park():
    PARKED.release()
    time.sleep(1000)


class Outer:
    def method(self, n):
        if n == 0:
            return sorted([3, 1, 2], key=lambda x: leaf(x))
        return self.method(n - 1)


def leaf(x):
    if x == 2:
        gen_user()
    return x


def gen():
    yield 1
    time.sleep(1000)
    yield 2


def gen_user():
    for _ in gen():
        pass


def deep(a, b):
    try:
        raise ValueError("mid-exception")
    except ValueError:
        park()
    return a + b


def reduce_main():
    functools.reduce(lambda a, b: deep(a, b), [1, 2])


class Finalized:
    def __del__(self):
        park()


def finalizer_main():
    try:
        o = Finalized()
    finally:
        del o


def ctypes_main():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    cmp_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))

    def compare(a, b):
        park()
        return a[0] - b[0]

    arr = (ctypes.c_int * 2)(2, 1)
    libc.qsort(arr, 2, ctypes.sizeof(ctypes.c_int), cmp_t(compare))


async def coro_leaf():
    park()


async def coro_mid():
    await coro_leaf()


def coroutine_main():
    list(map(lambda c: c.send(None), [coro_mid()]))


def main():
    threads = [threading.Thread(target=f, name=n, daemon=True)
               for n, f in (("reduce", reduce_main), ("finalizer", finalizer_main),
                            ("ctypes", ctypes_main), ("coroutine", coroutine_main))]
    for t in threads:
        t.start()
    for _ in threads:
        PARKED.acquire()
    print("ready", flush=True)
    Outer().method(3)


if __name__ == "__main__":
    main()
