"""Reference oracles: one cold LP (HiGHS) or QP (OSQP via cvxpy) per query.

They are slow and exist to cross-check the facet walk (tests, benchmarks) and for users
who want an independent answer. MATH.md §2:

* LP   ``‖y‖_K = min{1ᵀw : [F, -F] w = y, w >= 0}`` (HiGHS through scipy.optimize.linprog);
* QP   ``min ‖Fw - y‖² s.t. ‖w‖₁ <= 1``; ``y ∈ K`` iff the optimum is ~0 (OSQP through cvxpy).
"""

import numpy as np
from scipy.optimize import linprog

from .hull import validate_matrix

METHODS = ("highs", "osqp")


class ReferenceOracle:
    """Cold-start LP / QP oracle for ``K = F·B₁ⁿ``.

    ``method="highs"`` answers :meth:`gauge`, :meth:`facet_normal`, :meth:`chord` and
    :meth:`contains` exactly (to HiGHS tolerances). ``method="osqp"`` answers
    :meth:`distance` and :meth:`contains` through the projection QP (first-order
    solver: accurate to its tolerances, about 1e-6 here).
    """

    def __init__(self, F, method="highs"):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self.F = validate_matrix(F)
        self.method = method
        self.d, self.n = self.F.shape
        self._A = np.hstack([self.F, -self.F])
        self._qp = None

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
        """``‖y‖_K`` by one HiGHS LP per point; ``inf`` where ``y`` is not in the span."""
        self._need("highs", "gauge")
        Y = np.atleast_2d(np.asarray(y, float))
        out = np.empty(len(Y))
        for i, yi in enumerate(Y):
            res = self._lp(yi)
            if res.status == 2:
                out[i] = np.inf
            elif res.status != 0:
                raise RuntimeError(f"HiGHS failed on the gauge LP: {res.message}")
            else:
                out[i] = res.fun
        return out if np.ndim(y) == 2 else float(out[0])

    def facet_normal(self, y):
        """Dual solution λ of the gauge LP (``λ·y = ‖y‖_K``), from HiGHS's marginals."""
        self._need("highs", "facet_normal")
        res = self._lp(y)
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed on the gauge LP: {res.message}")
        return np.asarray(res.eqlin.marginals, float)

    def chord(self, x, u):
        """``(t_minus, t_plus)``: two LPs ``max/min t s.t. F w = x + t u, ‖w‖₁ <= 1``."""
        self._need("highs", "chord")
        x = np.asarray(x, float)
        u = np.asarray(u, float)
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
        return ends[1], ends[0]

    def distance(self, y):
        """Euclidean distance from ``y`` to K by the projection QP (OSQP)."""
        self._need("osqp", "distance")
        import cvxpy as cp

        if self._qp is None:
            w = cp.Variable(self.n)
            yp = cp.Parameter(self.d)
            prob = cp.Problem(cp.Minimize(cp.sum_squares(self.F @ w - yp)), [cp.norm1(w) <= 1])
            self._qp = (prob, yp)
        prob, yp = self._qp
        yp.value = np.asarray(y, float)
        prob.solve(solver="OSQP", eps_abs=1e-9, eps_rel=1e-9, max_iter=200000, warm_starting=True)
        if prob.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"OSQP failed on the projection QP: {prob.status}")
        return float(np.sqrt(max(prob.value, 0.0)))

    def contains(self, y, tol=1e-6):
        """``y ∈ K`` (gauge <= 1 + tol for HiGHS; distance <= tol·(1+‖y‖) for OSQP)."""
        if self.method == "highs":
            return self.gauge(y) <= 1.0 + tol
        return self.distance(y) <= tol * (1.0 + np.linalg.norm(y))
