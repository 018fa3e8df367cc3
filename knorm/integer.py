"""Integer, non-negative, consistent tables from released answers (post-processing, no privacy cost).

:func:`integer_tables` returns non-negative integer counts ``x̃`` (one per cell) whose tables
``F·x̃`` are as close as it can find to the released answers ``a`` in ℓ₁,

    minimise ``‖F x̃ − a‖₁`` over ``x̃ ∈ ℤⁿ, x̃ >= 0``,

written as a mixed-integer linear programme with the residual split ``F x̃ − a = u − v``,
``u, v >= 0`` (minimise ``Σu + Σv``) and solved with HiGHS (``scipy.optimize.milp``). Every
published table is computed from the one ``x̃``, so all margins agree: consistency is exact by
construction, as are integrality and non-negativity, on every path and at every size.

Two paths (``method``):

* ``"exact"``: the whole MILP, stopped when HiGHS's relative gap reaches ``mip_gap`` (default 1%)
  or at ``time_limit``: the best integer solution found, with HiGHS's dual bound and the gap.
  With ``mip_gap=0`` and time enough it is the proven optimum (``optimal`` True).
* ``"two-stage"`` (the US Census Bureau TopDown's approach, for large n): (1) the LP relaxation
  (x̃ real, ``>= 0``) gives a fractional optimum ``x*`` and a lower bound ``L`` on every integer
  solution's distance; (2) a small MILP chooses, for the cells where ``x*`` is fractional (at most
  about 2d of them at the simplex's vertex), floor or ceiling. Its result is optimal among
  the roundings of ``x*``, not necessarily among all integer tables; the reported ``bound`` is
  ``L`` and ``gap`` the relative distance to it. Should the second MILP find nothing within the
  time left, a controlled rounding replaces it: the cells' floors plus one unit on the largest
  fractional parts, as many units as keep the total ``Σx̃ = round(Σx*)``.

``"auto"`` (the default) runs the exact MILP for ``n <= EXACT_MAX_CELLS`` cells and two-stage
beyond. ``time_limit`` (seconds) bounds each optimiser call of each row (HiGHS stops and
returns its best). A batch of answers (rows = regions) is processed row by row: each row's
result is the one it gets alone.

ℓ₂ is not offered: the ℓ₂ problem is a mixed-integer quadratic programme, which scipy's HiGHS
interface does not solve; ℓ₁ is also the norm in which Laplace-like noise is measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from ._validate import as_real_array, check_str, is_real, short_repr

__all__ = ["integer_tables", "IntegerTables", "EXACT_MAX_CELLS", "MAX_ANSWER"]

EXACT_MAX_CELLS = 2000  # "auto": the whole MILP up to this many cells, two-stage beyond
MAX_ANSWER = 2.0**50  # answers past this magnitude: integer counts would not be exact in float64
METHODS = ("auto", "exact", "two-stage")
_FRACTIONAL = 1e-7  # an LP value this close to an integer is that integer (HiGHS's feasibility tolerance)


@dataclass(frozen=True)
class IntegerTables:
    """The result of :func:`integer_tables` (per-row entries are arrays for a batch, scalars for one row).

    ``counts``: non-negative integer counts x̃, int64, shape (n,) or (R, n); ``tables``: ``F·x̃``,
    float64, shape (d,) or (R, d) (every margin computed from the same x̃: consistent);
    ``distance``: ``‖F x̃ − a‖₁``; ``bound``: a lower bound on the distance of every non-negative
    integer x (the MILP's dual bound, or the LP relaxation's value); ``gap``:
    ``(distance − bound)/distance`` (0 when the distance is 0); ``optimal``: the distance proved
    the least over all non-negative integer x (up to HiGHS's tolerances); ``method``: the path
    taken ("exact", "two-stage" or "two-stage, controlled rounding"); ``seconds``: the whole call.
    """

    counts: NDArray[np.int64]
    tables: NDArray[np.float64]
    distance: Any
    bound: Any
    gap: Any
    optimal: Any
    method: Any
    seconds: float


def _time_limit(value: Any) -> float:
    v = float(value) if is_real(value) else float("nan")
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"time_limit must be a positive finite number of seconds, got {short_repr(value)}")
    return v


def _mip_gap(value: Any) -> float:
    v = float(value) if is_real(value) else float("nan")
    if not 0.0 <= v < 1.0:
        raise ValueError(f"mip_gap must be a number in [0, 1), got {short_repr(value)}")
    return v


def _matrix(F: Any) -> sparse.csr_array:
    """F as a finite float64 CSR array (dense or scipy sparse in), else a ValueError naming F."""
    if isinstance(F, (str, bytes)):
        raise ValueError(f"F must be a numeric matrix (d queries × n cells), got {short_repr(F)}")
    if sparse.issparse(F):
        M = sparse.csr_array(F, dtype=np.float64) if F.dtype.kind in "biuf" else None
        if M is None:
            raise ValueError("F must hold real numbers")
        if M.ndim != 2:
            raise ValueError(f"F must be 2-D (d queries × n cells), got shape {M.shape}")
        if not np.all(np.isfinite(M.data)):
            raise ValueError("F contains NaN or infinite entries")
    else:
        arr = as_real_array("F", F)
        if arr.ndim != 2:
            raise ValueError(f"F must be 2-D (d queries × n cells), got shape {arr.shape}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("F contains NaN or infinite entries")
        M = sparse.csr_array(arr)
    if M.shape[0] == 0 or M.shape[1] == 0:
        raise ValueError(f"F is empty (shape {M.shape})")
    return M


def _answers(answers: ArrayLike, d: int) -> NDArray[np.float64]:
    a = as_real_array("answers", answers)
    if a.ndim not in (1, 2) or a.shape[-1] != d or a.size == 0:
        raise ValueError(f"answers must have shape ({d},) or (R, {d}) (one row per region), got {a.shape}")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError("answers contains NaN or infinite entries")
    if np.any(np.abs(a) > MAX_ANSWER):
        raise ValueError("answers has entries beyond 2^50 in magnitude: integer counts would not be exact in float64")
    return a


def integer_tables(F: Any, answers: ArrayLike, *, method: str = "auto", time_limit: float = 60.0,
                   mip_gap: float = 0.01) -> IntegerTables:
    """Non-negative integer counts x̃ whose tables ``F·x̃`` are closest to ``answers`` in ℓ₁ (see the module).

    ``F``: the public workload, (d, n), dense or scipy sparse; ``answers``: released answers, (d,) or
    (R, d) for R regions (each row solved on its own). ``method``: "auto", "exact" or "two-stage";
    ``time_limit``: seconds for each optimiser call of each row; ``mip_gap``: the relative gap in [0, 1)
    at which HiGHS stops a MILP (0: prove the optimum, however long ``time_limit`` allows). Bad inputs raise a one-line
    ValueError naming the argument (no answer's value in it). Integrality, non-negativity and
    consistency always hold; optimality only where ``optimal`` says so.
    """
    t0 = time.perf_counter()
    check_str("method", method)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {short_repr(method)}")
    limit = _time_limit(time_limit)
    gap_stop = _mip_gap(mip_gap)
    M = _matrix(F)
    a = _answers(answers, M.shape[0])
    rows = np.atleast_2d(a)
    exact = method == "exact" or (method == "auto" and M.shape[1] <= EXACT_MAX_CELLS)
    results = [(_exact if exact else _two_stage)(M, row, limit, gap_stop) for row in rows]
    counts = np.array([r[0] for r in results], dtype=np.int64)
    tables = (M @ counts.T.astype(np.float64)).T
    distance = np.abs(tables - rows).sum(axis=1)
    bound = np.minimum(np.array([r[1] for r in results]), distance)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(distance > 0, (distance - bound) / distance, 0.0)
    optimal = distance - bound <= 1e-6 * np.maximum(1.0, distance)  # proved (HiGHS's tolerances): none closer
    how = np.array([r[2] for r in results], dtype=object)
    if a.ndim == 1:
        return IntegerTables(counts[0], tables[0], float(distance[0]), float(bound[0]), float(gap[0]),
                             bool(optimal[0]), str(how[0]), time.perf_counter() - t0)
    return IntegerTables(counts, tables, distance, bound, gap, optimal, how, time.perf_counter() - t0)


def _l1_problem(M: sparse.csr_array, target: NDArray[np.float64]) -> tuple[NDArray[np.float64], Any]:
    """Cost and equality constraint of ``min ‖M y − target‖₁`` as ``M y − u + v = target`` over (y, u, v)."""
    from scipy.optimize import LinearConstraint

    d, m = M.shape
    eye = sparse.identity(d, format="csr", dtype=np.float64)
    A = sparse.hstack([M, -eye, eye], format="csr")
    c = np.concatenate([np.zeros(m), np.ones(2 * d)])
    return c, LinearConstraint(A, target, target)


def _exact(M: sparse.csr_array, a: NDArray[np.float64], limit: float,
           gap: float) -> tuple[NDArray[np.int64], float, str]:
    """The whole MILP; on a time limit without any integer solution, the two-stage result."""
    from scipy.optimize import Bounds, milp

    d, n = M.shape
    c, cons = _l1_problem(M, a)
    integrality = np.concatenate([np.ones(n), np.zeros(2 * d)])
    res = milp(c, constraints=cons, integrality=integrality, bounds=Bounds(0, np.inf),
               options={"time_limit": limit, "mip_rel_gap": gap})
    if res.x is None:  # no integer solution within the time: round the relaxation instead
        counts, bound, how = _two_stage(M, a, limit, gap)
        return counts, bound, f"{how} (the exact MILP found none within time_limit)"
    counts = np.maximum(np.rint(res.x[:n]), 0).astype(np.int64)
    bound = float(getattr(res, "mip_dual_bound", np.nan))
    return counts, bound if np.isfinite(bound) else 0.0, "exact"


def _relaxation(M: sparse.csr_array, a: NDArray[np.float64], limit: float) -> tuple[NDArray[np.float64], float]:
    """Stage 1: the LP relaxation's vertex optimum x* >= 0 and its value (a lower bound); on a time
    limit, a clipped least-squares solution and the bound 0."""
    from scipy.optimize import linprog

    d, n = M.shape
    c, cons = _l1_problem(M, a)
    res = linprog(c, A_eq=cons.A, b_eq=a, bounds=(0, None), method="highs",
                  options={"time_limit": limit, "presolve": True})
    if res.status == 0 and res.x is not None:
        return np.maximum(res.x[:n], 0.0), float(res.fun)
    from scipy.sparse.linalg import lsqr

    return np.maximum(lsqr(M, a, atol=1e-10, btol=1e-10)[0], 0.0), 0.0


def _two_stage(M: sparse.csr_array, a: NDArray[np.float64], limit: float,
               gap: float) -> tuple[NDArray[np.int64], float, str]:
    """Stage 1 (:func:`_relaxation`), then stage 2: floor or ceiling of each fractional cell by a small
    MILP (controlled rounding if that finds nothing in time)."""
    from scipy.optimize import milp

    x, lower = _relaxation(M, a, limit)
    near = np.rint(x)
    snapped = np.abs(x - near) <= _FRACTIONAL
    base = np.where(snapped, near, np.floor(x))
    frac = np.flatnonzero(~snapped)
    if frac.size == 0:
        return base.astype(np.int64), lower, "two-stage"
    sub = M[:, frac]
    c, cons = _l1_problem(sub, a - M @ base)
    d = M.shape[0]
    from scipy.optimize import Bounds

    upper = np.concatenate([np.ones(frac.size), np.full(2 * d, np.inf)])
    res = milp(c, constraints=cons, integrality=np.concatenate([np.ones(frac.size), np.zeros(2 * d)]),
               bounds=Bounds(0, upper), options={"time_limit": limit, "mip_rel_gap": gap})
    if res.x is not None:
        base[frac] += np.rint(res.x[:frac.size])
        return base.astype(np.int64), lower, "two-stage"
    return _controlled_rounding(x, base, frac), lower, "two-stage, controlled rounding"


def _controlled_rounding(x: NDArray[np.float64], base: NDArray[np.float64],
                         frac: NDArray[np.intp]) -> NDArray[np.int64]:
    """Floors, plus one unit on the ``round(Σ(x − base))`` cells of largest fractional part (ties by
    index): the total ``Σx̃ = round(Σx)`` kept, every cell within 1 of x."""
    parts = x[frac] - base[frac]
    units = int(np.rint(parts.sum()))
    order = np.argsort(-parts, kind="stable")[:units]
    out = base.copy()
    out[frac[order]] += 1
    return out.astype(np.int64)
