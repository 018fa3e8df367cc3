"""The simplex's B⁻¹ eta update (``knorm.body._simplex._eta_update``, rows two at a time) against
the one-row-at-a-time kernel it replaced, bit for bit, for every pivot row p."""

import numpy as np
import pytest
from numba import njit

from knorm._jit import kernel
from knorm.body._columns import _dot
from knorm.body._simplex import _FM, _eta_update


@kernel(fastmath=_FM)
def _eta_one_row(Binv, col, u, p, up, rowp, nrm):
    """The update before 2026-12-02 (the same flags): each row k ≠ p alone; a row with u_k = 0 untouched."""
    r = Binv.shape[0]
    inv_up = 1.0 / up
    for i in range(r):
        Binv[p, i] *= inv_up
        rowp[i] = Binv[p, i]
    u[p] = up
    for k in range(r):
        if k != p:
            row = Binv[k]
            f = _dot(row, col)
            u[k] = f
            if f != 0.0:
                s = 0.0
                for i in range(r):
                    x = row[i] - f * rowp[i]
                    row[i] = x
                    s += x * x
                if nrm.shape[0] > 0:
                    nrm[k] = s
    if nrm.shape[0] > 0:
        nrm[p] = _dot(rowp, rowp)


@njit
def _new(B, col, u, p, up, rowp, nrm):
    _eta_update(B, col, u, p, up, rowp, nrm)


@njit
def _old(B, col, u, p, up, rowp, nrm):
    _eta_one_row(B, col, u, p, up, rowp, nrm)


def _run(fn, B0, col, p, norms):
    B, u, rowp = B0.copy(), np.zeros(len(B0)), np.empty(len(B0))
    nrm = np.full(len(B0), -7.0) if norms else np.empty(0)
    fn(B, col, u, p, float(B0[p] @ col), rowp, nrm)
    return B, u, nrm


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint64)


@pytest.mark.parametrize("r", [1, 2, 3, 4, 5, 16, 17, 33])
@pytest.mark.parametrize("norms", [False, True])
def test_rows_in_pairs_are_the_one_row_update_bit_for_bit(r, norms):
    """Every p (first, last, next to last: the pairs skip it), odd and even r; rows with u_k = 0
    (orthogonal to a_q) and −0.0 entries are left exactly as they were (a pair may not turn −0.0
    into +0.0, nor a row into NaN when row p is huge)."""
    rng = np.random.default_rng(r)
    for trial in range(3):
        B0 = rng.standard_normal((r, r))
        col = rng.standard_normal(r)
        if trial >= 1 and r > 1:  # rows orthogonal to a_q, with signed zeros
            col[:] = 0.0
            col[0] = 1.0
            B0[1:, 0] = np.where(rng.random(r - 1) < 0.5, 0.0, B0[1:, 0])
            B0[1:, 1:] = np.where(rng.random((r - 1, r - 1)) < 0.3, -0.0, B0[1:, 1:])
        if trial == 2:
            B0[:, 0] = np.where(B0[:, 0] != 0.0, 1e-300, 0.0)  # a tiny u_p: row p scaled past 1e300
        for p in range(r):
            if B0[p] @ col == 0.0:
                continue
            got, want = _run(_new, B0, col, p, norms), _run(_old, B0, col, p, norms)
            for g, w in zip(got, want):
                assert np.array_equal(_bits(g), _bits(w)), (r, trial, p)
