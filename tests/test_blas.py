"""knorm's calls run BLAS on one thread and give the caller's setting back (knorm/_blas.py).

Each test runs in a fresh interpreter: OpenBLAS's thread count is process state that other
tests (threads, Dask workers, libraries setting it from worker threads) leave behind."""

import subprocess
import sys
import textwrap


def run_fresh(body):
    code = textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("OK"), out.stdout


PRELUDE = """
import threading
import numpy as np
from threadpoolctl import ThreadpoolController
import knorm
from knorm._blas import on_one_blas_thread, one_blas_thread


def blas_threads():
    return sorted({lib["num_threads"] for lib in ThreadpoolController().info() if lib["user_api"] == "blas"})
"""


def test_inside_one_thread_and_the_callers_setting_back_nested_and_from_other_threads():
    run_fresh(PRELUDE + """
controller = ThreadpoolController()
with controller.limit(limits=2, user_api="blas"):  # the caller's own setting
    assert blas_threads() == [2]
    seen = []

    @on_one_blas_thread
    def inner():
        seen.append(blas_threads())

    with one_blas_thread():
        seen.append(blas_threads())
        inner()  # nested
    assert blas_threads() == [2]
    # a call from another thread changes nothing (OpenBLAS ignores a count set there once the
    # main thread has set one): it must not lose the main thread's setting either
    t = threading.Thread(target=inner)
    t.start()
    t.join(30)
    assert blas_threads() == [2]
    with one_blas_thread():  # the main thread inside, another thread's call meanwhile
        t = threading.Thread(target=inner)
        t.start()
        t.join(30)
        assert blas_threads() == [1]
    assert blas_threads() == [2]
    assert seen == [[1], [1], [2], [1]]
print("OK")
""")


def test_a_body_is_built_on_one_thread_and_an_exception_restores():
    run_fresh(PRELUDE + """
F = knorm.workloads.marginals((2, 3, 3), 2)
seen = []
orig = np.linalg.svd

def spy(*a, **k):
    seen.append(blas_threads())
    return orig(*a, **k)
controller = ThreadpoolController()
with controller.limit(limits=2, user_api="blas"):
    np.linalg.svd = spy
    try:
        knorm.SymmetricHull(F)
    finally:
        np.linalg.svd = orig
    assert blas_threads() == [2]
    try:
        with one_blas_thread():
            raise KeyError("x")
    except KeyError:
        pass
    assert blas_threads() == [2]
assert seen and all(s == [1] for s in seen)
print("OK")
""")
