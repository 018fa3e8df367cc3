"""The body ``K = F·B₁ⁿ`` and its exact oracle (docs/design.md §2)."""

import contextlib
import math
import threading

import numpy as np

from .._validate import as_real_array, is_real
from . import _simplex as sx

_STATUS = {
    sx.PIVOT_LIMIT: "exceeded its pivot limit",
    sx.NO_ENTERING: "found no entering column (numerical breakdown)",
    sx.SINGULAR: "met a singular basis it could not repair",
}


# Smallest ratio σ_min/σ_max of F (on its numerical span) the facet walk resolves: its
# pivot tolerance is relative (1e-9), and thinner bodies break down or lose the gauge.
THIN = 1e-8


class OracleError(RuntimeError):
    """The facet-walk oracle could not finish (pivot limit or numerical breakdown)."""


def validate_matrix(F, name="F"):
    """Return ``F`` as a finite float64 2-D array or raise ``ValueError`` saying why."""
    arr = as_real_array(name, F)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (d queries x n cells), got {arr.ndim}-D shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    if not np.any(arr):
        raise ValueError(f"{name} has no non-zero column: K = F·B₁ⁿ would be the single point 0")
    return arr


def _exponent(y):
    """The ``k`` with ``max|y|·2^-k`` in ``[0.5, 1)`` (0 for y = 0): scaling by 2^-k is exact."""
    m = float(np.abs(y).max()) if np.size(y) else 0.0
    return math.frexp(m)[1] if m > 0.0 else 0


def _ldexp(v, k):
    """``v·2^k`` for a float (exact unless it over/underflows); ``±inf`` on overflow."""
    try:
        return math.ldexp(v, k)
    except OverflowError:
        return math.copysign(math.inf, v)


def _row_exponents(Y):
    """Per-row :func:`_exponent` of a 2-D array."""
    m = np.max(np.abs(Y), axis=1) if Y.shape[1] else np.zeros(Y.shape[0])
    return np.where(m > 0.0, np.frexp(m)[1], 0).astype(np.int64)


def _check_tol(name, value):
    if not is_real(value):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


class OracleState:
    """One warm-start state of the dual simplex: basis, B⁻¹, λ, Fᵀλ and counters."""

    __slots__ = ("basis", "Binv", "lam", "g", "ctr")

    def __init__(self, basis, Binv, lam, g, ctr):
        self.basis, self.Binv, self.lam, self.g, self.ctr = basis, Binv, lam, g, ctr

    def copy(self):
        return OracleState(self.basis.copy(), self.Binv.copy(), self.lam.copy(), self.g.copy(), self.ctr.copy())

    def args(self):
        return self.basis, self.Binv, self.lam, self.g, self.ctr


class Frame:
    """A full-row-rank symmetric hull in its own r-dim coordinates (what kernels see).

    ``Ft`` is ``(n, r)``: the columns of F as rows. Built by :class:`SymmetricHull`
    for the span coordinates and for each rounded (isotropic) frame.
    """

    def __init__(self, Ft):
        self.Ft = np.ascontiguousarray(Ft, dtype=np.float64)
        self.n, self.r = self.Ft.shape
        self.fmax = float(np.max(np.linalg.norm(self.Ft, axis=1)))
        self.max_pivots = 50 * (self.n + self.r) + 1000
        self._state = None
        self.radius = None  # cached by knorm.walks.chains.body_radius
        # the shared warm-start state is mutated by every query: one thread at a time
        self._lock = threading.Lock()

    def check(self, status, what):
        if status != sx.OK:
            raise OracleError(
                f"facet-walk oracle {_STATUS.get(status, f'failed (status {status})')} while computing {what} "
                f"(r={self.r}, n={self.n}, limit {self.max_pivots} pivots)"
            )

    def crash_basis(self, direction=None, rng=None):
        """A dual feasible basis: walk inside the polar ``{λ : |Fᵀλ| <= 1}`` to a vertex.

        Starting at λ = 0, move along ``direction`` (projected off the active normals)
        until a new constraint ``|f_iᵀλ| = 1`` becomes tight; r steps give a vertex
        whose tight columns (with their signs) form the basis.
        """
        Ft, n, r = self.Ft, self.n, self.r
        gen = np.random.default_rng(0) if rng is None else rng
        v0 = np.ones(r) if direction is None else np.asarray(direction, float).copy()
        lam = np.zeros(r)
        Q = np.zeros((r, 0))
        basis = []
        fn = np.linalg.norm(Ft, axis=1)
        for _ in range(r):
            v = v0 - Q @ (Q.T @ v0)
            if np.linalg.norm(v) < 1e-8 * (np.linalg.norm(v0) + 1e-300):
                v0 = gen.standard_normal(r)
                v = v0 - Q @ (Q.T @ v0)
                v -= Q @ (Q.T @ v)
            v /= np.linalg.norm(v)
            fv = Ft @ v
            fl = Ft @ lam
            ok = np.abs(fv) > 1e-7 * fn
            with np.errstate(divide="ignore", invalid="ignore"):
                steps = np.where(fv > 0, (1.0 - fl) / fv, (1.0 + fl) / -fv)
            steps = np.where(ok, np.maximum(steps, 0.0), np.inf)
            # among near-ties prefer the largest |f_iᵀv| (better conditioned basis)
            smin = steps.min()
            cand = np.flatnonzero(steps <= smin + 1e-12 * (1 + smin))
            i = int(cand[np.argmax(np.abs(fv[cand]))])
            lam = lam + steps[i] * v
            basis.append(i if fv[i] > 0 else i + n)
            q = Ft[i] - Q @ (Q.T @ Ft[i])
            q -= Q @ (Q.T @ q)
            Q = np.column_stack([Q, q / np.linalg.norm(q)])
            v0 = v0 - Q @ (Q.T @ v0) if direction is not None else gen.standard_normal(r)
        state = OracleState(
            np.array(basis, dtype=np.int64), np.empty((r, r)), np.empty(r), np.empty(n), np.zeros(4, np.int64)
        )
        self.check(sx.refactor(self.Ft, *state.args()), "a starting basis")
        state.ctr[2] = 0
        return state

    @property
    def state(self):
        """The shared warm-start state used by the Python-level oracle methods."""
        if self._state is None:
            self._state = self.crash_basis()
        return self._state

    def solve(self, y, state):
        """Make ``state`` optimal at ``y`` (dual simplex); returns it.

        Optimality does not depend on ``‖y‖``: y is solved scaled by a power of two into
        ``[0.5, 1)`` (exact), so tiny and huge ``y`` pivot like ordinary ones.
        """
        y = np.asarray(y, dtype=np.float64)
        status = sx.solve(self.Ft, self.fmax, *state.args(), np.ldexp(y, -_exponent(y)), self.max_pivots)
        self.check(status, "a gauge")
        return state

    def solve_copy(self, y):
        """A copy of the shared state made optimal at ``y`` (thread-safe)."""
        with self._lock:
            return self.solve(y, self.state).copy()

    def gauges(self, Y, state=None):
        """Gauges and facet normals of the rows of Y.

        Warm-started from the shared state, or from ``state`` if given (e.g. a fresh
        :meth:`crash_basis`, when the last bits must not depend on earlier queries).
        """
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        out = np.empty(Y.shape[0])
        normals = np.empty_like(Y)
        with self._lock if state is None else contextlib.nullcontext():
            st = self.state if state is None else state
            status = sx.gauge_many(self.Ft, self.fmax, *st.args(), Y, self.max_pivots, out, normals)
        self.check(status, "gauges")
        return out, normals

    def move(self, x, u, s_max, state):
        """Parametric walk from x (state optimal at x) along u; returns (s, hit_boundary)."""
        out = np.zeros(2)
        u = np.asarray(u, dtype=np.float64)
        k = _exponent(u)  # x + s·u = x + (s·2^k)·(u·2^-k): walk along the scaled u, exactly
        status = sx.move(
            self.Ft, self.fmax, *state.args(), np.ascontiguousarray(x, float), np.ldexp(u, -k),
            _ldexp(float(s_max), k), self.max_pivots, out,
        )
        self.check(status, "a chord end")
        return _ldexp(float(out[0]), -k), bool(out[1])


class SymmetricHull:
    """``K = F·B₁ⁿ``: the symmetric convex hull of the columns ``±f_1 … ±f_n`` of F.

    Parameters
    ----------
    F : array_like, shape (d, n)
        Real, finite workload matrix with at least one non-zero column. Columns shorter
        than ``1e-14`` times the longest are dropped (a relative, scale-free test), as are
        exact duplicates and opposites; interior columns are harmless. The rank r counts
        singular values above ``max(d, n)·eps`` times the largest; a body whose smallest
        remaining singular value is below ``THIN`` (1e-8) times the largest (e.g. columns
        parallel to 1e-10) is refused with a ValueError: the oracle could not be exact.

    Attributes
    ----------
    ambient_dim : int   -- d, the number of queries.
    dim : int           -- r = rank F; K is r-dimensional and lives in the column span.
    span_basis : ndarray (d, r) -- orthonormal basis of the column span of F.
    F : ndarray (d, n')  -- the validated matrix (zero / duplicate columns removed).

    The oracle methods are exact: a warm-started dual simplex on the gauge LP
    ``‖y‖_K = min{‖w‖₁ : Fw = y}`` (docs/design.md §2). Any scale works: F is divided by the
    power of two ``2^e`` nearest above its largest entry (exact), the frame is
    ``span_basisᵀ F / _scale`` with ``_scale = 2^e·unit`` (unit = longest column of
    ``F·2^-e``), and every query point is itself scaled by a power of two before the
    solve (the gauge is positively homogeneous); results are scaled back exactly.
    """

    def __init__(self, F):
        F = validate_matrix(F)
        d = F.shape[0]
        e = _exponent(F)
        Fs = np.ldexp(F, -e)  # largest |entry| in [0.5, 1): norms neither overflow nor underflow
        norms = np.linalg.norm(Fs, axis=0)
        cols = np.flatnonzero(norms > 1e-14 * norms.max())
        # K is symmetric: f and -f are the same generator; drop exact duplicates.
        Fk = Fs[:, cols]
        lead = np.argmax(Fk != 0, axis=0)
        signs = np.sign(Fk[lead, np.arange(Fk.shape[1])])
        _, keep = np.unique((Fk * signs).T, axis=0, return_index=True)
        cols = cols[np.sort(keep)]
        Fs = Fs[:, cols]
        self.F = F[:, cols]
        self.ambient_dim = d
        U, S, _ = np.linalg.svd(Fs, full_matrices=False)
        tol = S[0] * max(Fs.shape) * np.finfo(float).eps
        r = int(np.sum(S > tol))
        if S[r - 1] < THIN * S[0]:
            raise ValueError(f"F spans a direction {S[r - 1] / S[0]:.1e} times thinner than its widest (singular "
                             f"values), below the {THIN:g} the exact oracle resolves: merge near-parallel columns "
                             "or drop nearly dependent rows")
        self.dim = r
        self.span_basis = U[:, :r].copy()
        Fr = self.span_basis.T @ Fs
        unit = float(np.max(np.linalg.norm(Fr, axis=0)))
        self._exp = e
        self._unit = unit
        with np.errstate(over="ignore"):
            self._scale = float(np.ldexp(unit, e))  # frame units -> ambient units
        if not np.isfinite(self._scale):
            raise ValueError(f"F has a column of Euclidean norm ≈ 2^{e + np.log2(unit):.1f}, beyond the float64 "
                             "range (points of K could not be represented): rescale F")
        self._log_scale = float(np.log(unit) + e * np.log(2.0))
        self.frame = Frame((Fr / unit).T)
        self._rounding = None
        self._structure = False  # not yet detected

    @property
    def exact_structure(self):
        """``ExactStructure`` if K is a linear image of the cross-polytope or cube, else None.

        Then uniform draws are exact (no MCMC); see :mod:`knorm.body.structure`.
        """
        if self._structure is False:
            from .structure import detect

            self._structure = detect(self.frame)
        return self._structure

    # -- coordinates -------------------------------------------------------------
    @property
    def n_columns(self):
        return self.F.shape[1]

    def _to_frame(self, Y):
        """Rows of Y -> ``(Z, k, off)``: frame coordinates of ``y·2^-k`` (max|y·2^-k| in
        [0.5, 1), exact), the row exponents k, and the relative distance off the span.

        The frame coordinates of y itself are ``Z·2^(k-e)``; nothing here can overflow.
        """
        k = _row_exponents(Y)
        Ys = np.ldexp(Y, -k[:, None])
        Z = Ys @ self.span_basis
        resid = Ys - Z @ self.span_basis.T
        yn = np.linalg.norm(Ys, axis=1)
        off = np.linalg.norm(resid, axis=1) / np.where(yn > 0, yn, 1.0)
        return Z / self._unit, k, off

    def to_ambient(self, Z):
        """Span coordinates (frame units, as used by the kernels) -> ambient points."""
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim < 1 or Z.shape[-1] != self.dim:
            raise ValueError(f"Z must have shape (..., {self.dim}); got {Z.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.ldexp((Z * self._unit) @ self.span_basis.T, self._exp)
        if not np.all(np.isfinite(out)):
            raise ValueError("Z: ambient coordinates are NaN or overflow float64")
        return out

    def _to_frame1(self, y):
        """:meth:`_to_frame` for one point (d,): ``(z, k, off)`` with scalars k and off."""
        k = _exponent(y)
        ys = np.ldexp(y, -k)
        z = ys @ self.span_basis
        resid = ys - self.span_basis @ z
        yy = float(ys @ ys)
        off = math.sqrt(float(resid @ resid) / yy) if yy > 0.0 else 0.0
        return z / self._unit, k, off

    def _check_points(self, y, name):
        arr = as_real_array(name, y)
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.ambient_dim:
            raise ValueError(
                f"{name} must have shape ({self.ambient_dim},) or (m, {self.ambient_dim}); got {arr.shape}"
            )
        if arr.dtype != np.float64:
            with np.errstate(over="ignore"):
                arr = arr.astype(np.float64)
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinite entries")
        return arr

    def _solve_rows(self, Y):
        """Gauges (exact, any scale), unit facet normals (frame) and off-span distances."""
        Z, k, off = self._to_frame(Y)
        vals, normals = self.frame.gauges(Z)
        with np.errstate(over="ignore"):
            vals = np.ldexp(vals, k - self._exp)
        return vals, normals, off

    # -- oracle --------------------------------------------------------------------
    def gauge(self, y, *, span_tol=1e-9):
        """Minkowski norm ``‖y‖_K = min{‖w‖₁ : Fw = y}``, exact; ``inf`` off the span.

        ``y`` is one point (d,) or a batch (m, d) of points (one result per row).
        Points whose distance to the span exceeds ``span_tol·‖y‖`` are off the span.
        Raises ``ValueError`` if a gauge overflows float64 (y far outside a tiny K).
        """
        Y = self._check_points(y, "y")
        span_tol = _check_tol("span_tol", span_tol)
        vals, _, off = self._solve_rows(np.atleast_2d(Y))
        if not np.all(np.isfinite(vals[off <= span_tol])):
            raise ValueError("y: ‖y‖_K overflows float64 (y is too long for this body)")
        vals = np.where(off > span_tol, np.inf, vals)
        return vals if Y.ndim == 2 else float(vals[0])

    def contains(self, y, *, tol=1e-9):
        """True where ``‖y‖_K <= 1 + tol``."""
        tol = _check_tol("tol", tol)
        Y = self._check_points(y, "y")
        vals, _, off = self._solve_rows(np.atleast_2d(Y))
        inside = (off <= 1e-9) & (vals <= 1.0 + tol)  # an overflowing gauge is outside
        return inside if Y.ndim == 2 else bool(inside[0])

    def _normal_to_ambient(self, normals):
        with np.errstate(over="ignore", invalid="ignore"):
            lam = np.ldexp(normals @ self.span_basis.T / self._unit, -self._exp)
        if not np.all(np.isfinite(lam)):
            raise ValueError("F: facet normals of K overflow float64 (K is too thin at this scale)")
        return lam

    def facet_normal(self, y):
        """Dual vector λ (ambient, in the span) with ``λ·y = ‖y‖_K`` and ``|Fᵀλ| <= 1``.

        On the boundary this is the outward normal of a facet of K through y.
        """
        Y = self._check_points(y, "y")
        _, normals, off = self._solve_rows(np.atleast_2d(Y))
        if np.any(off > 1e-9):
            raise ValueError("y is off the span of F: the gauge is infinite and no facet normal exists")
        lam = self._normal_to_ambient(normals)
        return lam if Y.ndim == 2 else lam[0]

    def chord(self, x, u):
        """``(t_minus, t_plus)`` with ``x + t·u ∈ K`` exactly for ``t`` in that interval.

        ``x`` must lie in K. Directions with a component off the span give (0, 0);
        ``u = 0`` gives (-inf, inf).
        """
        x = self._check_points(x, "x")
        u = self._check_points(u, "u")
        if x.ndim != 1 or u.ndim != 1:
            raise ValueError(f"chord takes one point x and one direction u, both of shape ({self.ambient_dim},); "
                             f"got x {x.shape} and u {u.shape}")
        if not np.any(u):
            return (-np.inf, np.inf)
        zx, kx, offx = self._to_frame1(x)
        if offx > 1e-9:
            raise ValueError("chord needs a point x inside K; x is off the span of F")
        base = self.frame.solve_copy(zx)
        gx = _ldexp(float(base.lam @ zx), kx - self._exp)
        if not gx <= 1 + 1e-9:
            raise ValueError(f"chord needs a point x inside K; ‖x‖_K = {gx:.6g} > 1")
        zx = np.ldexp(zx, kx - self._exp)  # x in K: its frame coordinates are O(1) (or underflow to 0)
        zu, ku, offu = self._to_frame1(u)
        if offu > 1e-9:
            return (0.0, 0.0)
        # u's frame coordinates are zu·2^(ku-e): walk along zu, then t = t_zu·2^(e-ku)
        ends = []
        for sign in (1.0, -1.0):
            st = base.copy()
            t, _ = self.frame.move(zx, sign * zu, np.inf, st)
            ends.append(sign * _ldexp(t, self._exp - ku))
        if not (math.isfinite(ends[0]) and math.isfinite(ends[1])):
            raise ValueError("u: a chord end overflows float64 (u is too short for this body)")
        return (ends[1], ends[0])

    def __repr__(self):
        return f"SymmetricHull(ambient_dim={self.ambient_dim}, dim={self.dim}, n_columns={self.n_columns})"
