# SPDX-License-Identifier: Apache-2.0
# Python 3.11 fixture for runtime frames in a crash core: os.abort() in a finally block inside an
# except block, in a generator run by a for loop under map(lambda).
import os


def gen():
    yield 1
    try:
        {}["missing"]
    except KeyError:
        try:
            raise ValueError("while handling the KeyError")
        finally:
            os.abort()


def inner():
    for _ in gen():
        pass


def outer():
    list(map(lambda _: inner(), [1]))


outer()
