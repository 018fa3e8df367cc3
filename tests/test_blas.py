"""knorm's calls run BLAS on one thread and give the caller's setting back (knorm/_blas.py).

Each test runs in a fresh interpreter: OpenBLAS's thread count is process state that other
tests (threads, Dask workers, libraries setting it from worker threads) leave behind."""

import subprocess
import sys
import textwrap

import pytest


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


@pytest.mark.parametrize("scipy_first", [False, True])
@pytest.mark.parametrize("compute_uv", [True, False])
def test_thin_svd_falls_back_to_gesvd_where_gesdd_does_not_converge(monkeypatch, scipy_first, compute_uv):
    """OpenBLAS 0.3.31's AVX-512 kernels made gesdd fail on one thread for the spectral weights of 3-way
    marginals of 13 binary attributes (tests/body/test_symmetry.py meets it on such a machine); here
    gesdd is made to fail everywhere, and the result must still be the matrix's SVD: U and V
    orthonormal, ``U·diag(s)·Vᵀ = a`` to rounding, s the square roots of ``aᵀa``'s eigenvalues."""
    import numpy as np
    from scipy import linalg

    from knorm._blas import thin_svd

    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    real = linalg.svd

    def scipy_svd(*args, **kwargs):
        if kwargs.get("lapack_driver", "gesdd") == "gesdd":
            fail()
        return real(*args, **kwargs)

    monkeypatch.setattr(np.linalg, "svd", fail)
    monkeypatch.setattr(linalg, "svd", scipy_svd)
    a = np.random.default_rng(3).standard_normal((40, 7)) @ np.diag([1, 1, 1, 2, 2, 3, 0.0])  # repeated, zero
    out = thin_svd(a, compute_uv=compute_uv, scipy_first=scipy_first)
    s_exact = np.sqrt(np.clip(np.sort(np.linalg.eigvalsh(a.T @ a))[::-1], 0, None))
    s = out[1] if compute_uv else out
    assert np.allclose(s, s_exact, atol=1e-12 * s_exact[0])
    if compute_uv:
        U, s, Vt = out
        assert U.shape == (40, 7) and Vt.shape == (7, 7)
        assert np.allclose(U.T @ U, np.eye(7), atol=1e-12) and np.allclose(Vt @ Vt.T, np.eye(7), atol=1e-12)
        assert np.allclose((U * s) @ Vt, a, atol=1e-12 * s[0])
