"""knorm's own linear algebra runs on one BLAS thread (docs/design.md §3.6).

Its products are many and small (r × r frames, p × n strategy steps, a chain's batch of draws):
OpenBLAS wakes its threads for each, and they wait on each other whenever another process
holds a core — on 2 shared cores building the body of 2-way marginals over (2,3,3,4,4,4) took
4.9 s on two threads and 0.12 s on one, a p-Identity search 58 s and 2 s. knorm's parallelism is
its chains (numba threads, processes, a cluster), never BLAS's. One thread also makes a seeded
result independent of how many cores BLAS would have used.

:func:`one_blas_thread` limits BLAS (threadpoolctl) while a knorm call runs in the main
thread and restores the caller's setting when the outermost such call returns. OpenBLAS ignores a
thread count set from another thread once the main thread has set one (OpenBLAS 0.3.30 here), so
a call from another thread changes nothing: it can neither limit nor, restoring, lose the main
thread's setting (a thread of the caller's running BLAS while a knorm call is inside runs on one
thread too: the count is the process's).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_depth = 0
_limiter: Any = None
_controller: Any = None

F = TypeVar("F", bound=Callable[..., Any])


def _blas_controller() -> Any:
    """One ThreadpoolController (13 µs per limit, against 4 ms for threadpool_limits, which looks
    up the loaded libraries each time), made at first use: numpy's and scipy's BLAS are loaded."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController
        _controller = ThreadpoolController()
    return _controller


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block, in the main thread (nested blocks share the limit)."""
    global _depth, _limiter
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:
        _limiter = _blas_controller().limit(limits=1, user_api="blas")
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _limiter.restore_original_limits()
            _limiter = None


def on_one_blas_thread(fn: F) -> F:
    """Decorator: ``fn`` runs inside :func:`one_blas_thread`."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def thin_svd(a: Any, compute_uv: bool = True, scipy_first: bool = False) -> Any:
    """The thin SVD ``a = U·diag(s)·Vᵀ`` (``(U, s, Vt)``, or ``s`` alone): LAPACK's divide and
    conquer (gesdd; numpy's, or scipy's where ``scipy_first``), and where it fails to converge
    scipy's QR-iteration driver (gesvd).
    OpenBLAS 0.3.31's AVX-512 kernels (SkylakeX, chosen on AVX-512 AMD EPYC) turn gesdd's work
    into NaN on one thread for some exactly degenerate matrices — the spectral weights of 3-way
    marginals of 13 binary attributes (2,288 × 378) — where gesvd, and gesdd with the AVX2 kernels,
    converge."""
    import numpy as np
    from scipy import linalg

    try:
        if scipy_first:
            return linalg.svd(a, full_matrices=False, compute_uv=compute_uv, lapack_driver="gesdd")
        return np.linalg.svd(a, full_matrices=False, compute_uv=compute_uv)
    except np.linalg.LinAlgError:
        return linalg.svd(a, full_matrices=False, compute_uv=compute_uv, lapack_driver="gesvd")
