"""Reference oracles: one cold LP (HiGHS) or QP (OSQP via cvxpy) per query.

They are slow and exist to cross-check the facet walk (tests, benchmarks) and for users
who want an independent answer. docs/design.md §2.7:

* LP   ``‖y‖_K = min{1ᵀw : [F, -F] w = y, w >= 0}`` (HiGHS through scipy.optimize.linprog);
* QP   ``min ‖Fw - y‖² s.t. ‖w‖₁ <= 1``; ``y ∈ K`` iff the optimum is ~0 (OSQP through cvxpy).

Both solvers have absolute tolerances, so F (and, for the homogeneous gauge, each point)
is scaled by a power of two to unit size first (exact) and the answers scaled back.
"""

import numpy as np
from scipy.optimize import linprog

from .._validate import as_real_array, short_repr
from .hull import _check_tol, _exponent, _row_exponents, validate_matrix

METHODS = ("highs", "osqp")


class ReferenceOracle:
    """Cold-start LP / QP oracle for ``K = F·B₁ⁿ``.

    ``method="highs"`` answers :meth:`gauge`, :meth:`facet_normal`, :meth:`chord` and
    :meth:`contains` exactly (to HiGHS tolerances). ``method="osqp"`` answers
    :meth:`distance` and :meth:`contains` through the projection QP (first-order
    solver: accurate to its tolerances, about 1e-6 here).
    """

    def __init__(self, F, method="highs"):
        if not isinstance(method, str) or method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {short_repr(method)}")
        self.F = validate_matrix(F)
        self.method = method
        self.d, self.n = self.F.shape
        # HiGHS's tolerances are absolute: solve with F·2^-e (largest |entry| in [0.5, 1), exact)
        self._e = _exponent(self.F)
        self._Fs = np.ldexp(self.F, -self._e)
        self._A = np.hstack([self._Fs, -self._Fs])
        self._qp = None

    def _points(self, y, name, single=False):
        arr = as_real_array(name, y)
        if arr.ndim not in ((1,) if single else (1, 2)) or arr.shape[-1] != self.d:
            want = f"({self.d},)" + ("" if single else f" or (m, {self.d})")
            raise ValueError(f"{name} must have shape {want}; got {arr.shape}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite entries")
        return arr

    def _need(self, method, what):
        if self.method != method:
            raise ValueError(f"{what} needs method={method!r}; this oracle uses {self.method!r}")

    def _lp(self, y):
        res = linprog(
            np.ones(2 * self.n), A_eq=self._A, b_eq=np.asarray(y, float), bounds=(0, None), method="highs",
            options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
        )
        return res

    def gauge(self, y):
        """``‖y‖_K`` by one HiGHS LP per point; ``inf`` where ``y`` is not in the span.

        Each point is scaled by a power of two (exact; the gauge is homogeneous)."""
        self._need("highs", "gauge")
        Y = self._points(y, "y")
        Y2 = np.atleast_2d(Y)
        k = _row_exponents(Y2)
        out = np.empty(len(Y2))
        for i, yi in enumerate(np.ldexp(Y2, -k[:, None])):
            res = self._lp(yi)
            if res.status == 2:
                out[i] = np.inf
            elif res.status != 0:
                raise RuntimeError(f"HiGHS failed on the gauge LP: {res.message}")
            else:
                out[i] = np.ldexp(res.fun, int(k[i]) - self._e)
        return out if Y.ndim == 2 else float(out[0])

    def facet_normal(self, y):
        """Dual solution λ of the gauge LP (``λ·y = ‖y‖_K``), from HiGHS's marginals."""
        self._need("highs", "facet_normal")
        y = self._points(y, "y", single=True)
        res = self._lp(np.ldexp(y, -_exponent(y)))
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed on the gauge LP: {res.message}")
        return np.ldexp(np.asarray(res.eqlin.marginals, float), -self._e)

    def chord(self, x, u):
        """``(t_minus, t_plus)``: two LPs ``max/min t s.t. F w = x + t u, ‖w‖₁ <= 1``."""
        self._need("highs", "chord")
        # x + t·u ∈ K  ⟺  x·2^-e + t·u·2^-e ∈ K·2^-e
        x = np.ldexp(self._points(x, "x", single=True), -self._e)
        u = self._points(u, "u", single=True)
        ku = _exponent(u)
        u = np.ldexp(u, -ku)  # t for this u is t·2^(ku-e) for the caller's
        # variables [w+, w-, t]
        A_eq = np.hstack([self._A, -u[:, None]])
        A_ub = np.hstack([np.ones((1, 2 * self.n)), np.zeros((1, 1))])
        bounds = [(0, None)] * (2 * self.n) + [(None, None)]
        ends = []
        for sign in (1.0, -1.0):
            c = np.zeros(2 * self.n + 1)
            c[-1] = -sign
            res = linprog(c, A_ub=A_ub, b_ub=[1.0], A_eq=A_eq, b_eq=x, bounds=bounds, method="highs")
            if res.status == 3:
                ends.append(sign * np.inf)
            elif res.status != 0:
                raise RuntimeError(f"HiGHS failed on the chord LP: {res.message}")
            else:
                ends.append(res.x[-1])
        return tuple(float(np.ldexp(t, self._e - ku)) for t in (ends[1], ends[0]))

    def distance(self, y):
        """Euclidean distance from ``y`` to K by the projection QP (OSQP)."""
        self._need("osqp", "distance")
        y = self._points(y, "y", single=True)
        import cvxpy as cp

        if self._qp is None:
            w = cp.Variable(self.n)
            yp = cp.Parameter(self.d)
            prob = cp.Problem(cp.Minimize(cp.sum_squares(self._Fs @ w - yp)), [cp.norm1(w) <= 1])
            self._qp = (prob, yp)
        prob, yp = self._qp
        yp.value = np.ldexp(y, -self._e)  # dist(y, K) = 2^e·dist(y·2^-e, K·2^-e)
        prob.solve(solver="OSQP", eps_abs=1e-9, eps_rel=1e-9, max_iter=200000, warm_starting=True)
        if prob.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"OSQP failed on the projection QP: {prob.status}")
        return float(np.ldexp(np.sqrt(max(prob.value, 0.0)), self._e))

    def contains(self, y, tol=1e-6):
        """``y ∈ K`` (gauge <= 1 + tol for HiGHS; distance <= tol·(1+‖y‖) for OSQP)."""
        tol = _check_tol("tol", tol)
        if self.method == "highs":
            return self.gauge(y) <= 1.0 + tol
        y = self._points(y, "y", single=True)
        # compared at the scale of F·2^-e, where OSQP's tolerances were met
        return np.ldexp(self.distance(y), -self._e) <= tol * (1.0 + np.linalg.norm(np.ldexp(y, -self._e)))
