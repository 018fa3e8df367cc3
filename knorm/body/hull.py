"""The body ``K = F·B₁ⁿ`` and its exact oracle (docs/design.md §2)."""

from __future__ import annotations

import contextlib
import math
import os
import threading

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._blas import on_one_blas_thread, thin_svd
from .._fingerprint import fingerprint
from .._validate import as_real_array, check_str, is_real, short_repr
from ..errors import OracleError
from . import _simplex as sx
from .characters import character_coordinates, column_norm_max
from .marginal import MarginalMatch, marginal_operator, plan_ops, recognise
from .marginal_ops import as_marginal, check_body_memory, complete, dense_marginal, fingerprint_of
from .spectral import span_of, span_rows, spectral_cost, spectral_operator
from .symmetry import ValueSymmetry, row_tables, value_symmetry

if TYPE_CHECKING:
    from .structure import ExactStructure

_STATUS = {
    sx.PIVOT_LIMIT: "exceeded its pivot limit",
    sx.NO_ENTERING: "found no entering column (numerical breakdown)",
    sx.SINGULAR: "met a singular basis it could not repair",
}


# Smallest ratio σ_min/σ_max of F (on its numerical span) accepted: thinner directions
# are within a few hundred ulps of the rank tolerance (max(d, n)·eps), where the span
# itself is uncertain. Down to it the oracle works in whitened coordinates (WHITEN).
THIN = 1e-13
# Columns shorter than SHORT times the longest are dropped; one pointing off the span of the
# others (relative distance above OFF_SPAN) is refused instead (F's entries' range is too wide).
SHORT = 1e-14
OFF_SPAN = 1e-6


def validate_matrix(F: ArrayLike, name: str = "F") -> NDArray[np.float64]:
    """Return ``F`` as a finite float64 2-D array or raise ``ValueError`` saying why."""
    check_str("name", name)
    if isinstance(F, (str, bytes, os.PathLike)):
        raise ValueError(f"{name} must be a numeric array (d queries × n cells), not a file name "
                         f"{short_repr(F)}: load it first, e.g. {name} = np.load(path)")
    arr = as_real_array(name, F)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (d queries x n cells), got {arr.ndim}-D shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    arr = arr.astype(np.float64)  # a copy of its own
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    np.add(arr, 0.0, out=arr)  # −0.0 → +0.0: F equal as numbers is one workload (its fingerprint, its plans)
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


def _check_short_columns(F, norms, U):
    """A ValueError naming F if a non-zero column dropped as short (below ``SHORT`` times the
    longest) has a direction off the span ``U`` of the kept ones: K would lose that direction
    (gauges there infinite, noise never covering it). Its entries' dynamic range is past what
    the body represents; a short column inside the span is harmless and stays dropped."""
    # ``norms``: relative column norms; a non-zero column's may underflow to 0 (1e-300 beside 1)
    short = np.flatnonzero(norms <= SHORT)
    short = short[np.any(F[:, short] != 0.0, axis=0)]
    if not short.size:
        return
    D = F[:, short]
    D = np.ldexp(D, -_row_exponents(D.T)[None, :])  # each column to max |entry| in [0.5, 1), exactly
    D /= np.linalg.norm(D, axis=0)
    off = np.linalg.norm(D - U @ (U.T @ D), axis=0)
    bad = off > OFF_SPAN
    if bad.any():
        j = int(short[np.argmax(bad)])
        raise ValueError(f"F: column {j} is shorter than {SHORT:g} times the longest (the entries' range is too wide "
                         "for the body) and points off the span of the others: K would lose that direction; "
                         "rescale F's rows or columns to comparable sizes")


def _check_tol(name, value):
    if not is_real(value):
        raise ValueError(f"{name} must be a finite number >= 0, got {short_repr(value)}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {short_repr(value)}")
    return float(value)


DISTINCT_CHUNK = 4096  # columns compared per piece in _first_distinct (its copies stay this small)


def _column_norms(F, e):
    """Euclidean norms of ``F·2^-e``'s columns, by pieces of ``DISTINCT_CHUNK`` columns (no scaled
    copy of F; each column's sum runs over its rows in order, as on the whole matrix)."""
    out = np.empty(F.shape[1])
    for start in range(0, F.shape[1], DISTINCT_CHUNK):
        out[start:start + DISTINCT_CHUNK] = np.linalg.norm(np.ldexp(F[:, start:start + DISTINCT_CHUNK], -e), axis=0)
    return out


def _first_distinct(F, cols):
    """The columns ``cols`` of F that are the first of their kind up to sign, in order: K is
    symmetric, so f and −f are one generator (each column signed to make its first non-zero
    entry positive; exact: the columns' bytes, with −0.0 read as 0.0; a dict of n keys instead
    of ``np.unique``'s lexicographic sort of n rows of length d, 8.5 s at 521×57,600). In pieces
    of ``DISTINCT_CHUNK`` columns: whole-matrix copies took 15.5 GiB for a 2.2 GiB F at rank 697."""
    seen: dict[bytes, int] = {}
    for start in range(0, len(cols), DISTINCT_CHUNK):
        part = cols[start:start + DISTINCT_CHUNK]
        Fk = F[:, part]
        lead = np.argmax(Fk != 0, axis=0)
        signs = np.sign(Fk[lead, np.arange(Fk.shape[1])])
        for j, col in zip(part, np.ascontiguousarray((Fk * signs).T) + 0.0):
            seen.setdefault(col.tobytes(), int(j))
    return np.fromiter(seen.values(), dtype=np.int64, count=len(seen))


def _left_singular(Fs):
    """``(U, S)`` of the thin SVD ``Fs = U·diag(S)·Vᵀ``. For a wide Fs (n > 2d) from the
    triangular factor of ``Fsᵀ = Q·R`` (``Fs = Rᵀ·Qᵀ``, so Fs and Rᵀ have the same U and S;
    Householder QR is backward stable): LAPACK's SVD of the wide matrix also forms the
    d×n Vᵀ, which took 10 CPU s (and 30–130 s wall under load, in threads) at 521×57,600
    against 2 s this way."""
    d, n = Fs.shape
    if n > 2 * d:
        Fs = np.linalg.qr(Fs.T, mode="r").T
    U, S, _ = thin_svd(Fs)
    return U, S


class OracleState:
    """One warm-start state of the dual simplex: basis, B⁻¹, λ, Fᵀλ and counters."""

    __slots__ = ("basis", "Binv", "lam", "g", "ctr")

    def __init__(self, basis, Binv, lam, g, ctr):
        self.basis, self.Binv, self.lam, self.g, self.ctr = basis, Binv, lam, g, ctr

    def copy(self):
        return OracleState(self.basis.copy(), self.Binv.copy(), self.lam.copy(), self.g.copy(), self.ctr.copy())

    def args(self):
        return self.basis, self.Binv, self.lam, self.g, self.ctr


# Below this ratio σ_min/σ_max of F the oracle works in whitened coordinates
# (see _oracle_coordinates); above it in the span's orthonormal coordinates.
WHITEN = 1e-7

# Store F compressed when at most this fraction of its entries (in the oracle's
# coordinates) is non-zero: a pivot then costs O(nnz) instead of O(n·r).
DENSE_ABOVE = 0.1


# Use a marginal workload's operator when it predicts at least this many times fewer
# operations than the dense product (its fixed costs make small bodies faster dense).
STRUCTURED_ABOVE = 2.0


def _oracle_coordinates(Fc, U, S, unit, structure=None, e=0):
    """The oracle's coordinates ``z = s ∘ Uᵀy`` (y in the span of the scaled F ``Fs = U·diag(S)·Vᵀ``;
    ``Fc = UᵀFs``, F's columns in the span's coordinates).

    Well-conditioned F (``S_min/S_max >= WHITEN``): the orthonormal span coordinates
    ``z = Uᵀy``. (r rows of y would keep F's own entries and sparsity, but on 0/1
    workloads their exact ties make the parametric ray walk cycle — marginals of 3×2×4×3×3
    and of 4⁴ tables; the rotation's rounding breaks those ties.) Thinner F: the whitened
    coordinates ``z = diag(S)⁻¹Uᵀy``, in which F's columns are ``Vᵀ`` (orthonormal rows):
    the LP stays well conditioned at any cond(F), and z carries the relative error
    ``≈ 1e-16·cond(F)`` of mapping y into the span. Either is scaled per coordinate by a
    power of two (max |F entry| in [0.5, 1)). F is stored compressed where these
    coordinates are sparse (block-structured F, e.g. independent groups of queries).
    ``structure``: the :class:`~knorm.body.marginal.MarginalMatch` of ``F = Fs·2^e`` if it is a marginal
    workload; its operator computes ``Fzᵀv = Fᵀ(2^-e·U·diag(s)·v)``: by the tables
    (:mod:`knorm.body.marginal`) or by the product transform (:mod:`knorm.body.spectral`),
    whichever its cost model predicts cheaper, when that is ``STRUCTURED_ABOVE`` times
    cheaper than the dense product.
    (A marginal workload of full rank whose structured product is chosen takes the characters'
    coordinates instead: :func:`_character_columns`.)
    Returns ``(Columns, T, s)``: ``z = T·c`` for span coordinates ``c = Uᵀy/unit``, with
    ``T = diag(s·unit)`` (the map is diagonal in the span's basis).
    """
    r = U.shape[1]
    s = np.ones(r) if S[r - 1] >= WHITEN * S[0] else 1.0 / S[:r]
    s = np.ldexp(s, -_row_exponents(Fc * s[:, None]))
    Fz = Fc * s[:, None]
    op = spec = None
    if structure is not None:
        tables, spectral = plan_ops(structure.structure, r), spectral_cost(structure.structure, r)
        if Fz.size >= STRUCTURED_ABOVE * min(tables, spectral):
            weights = structure.weights(np.ldexp(U * s[None, :], -e))
            if spectral < tables:
                spec = spectral_operator(structure.structure, weights)
            else:
                op = marginal_operator(structure.structure, weights)
    return Columns(Fz, op, spec), np.diag(s * unit), s


def _character_columns(match, U, e):
    """``(Columns, Mc)`` in the characters' coordinates ``z = Mc·Uᵀy·2^-e``
    (:func:`knorm.body.characters.character_coordinates`: a rotation of the spectrum, in which the
    pivots' product needs no dense map) where the marginal workload of ``match`` has full rank and
    its structured product is chosen (as :func:`_oracle_coordinates` chooses it), else None."""
    r, n = U.shape[1], match.structure.cells
    tables, spectral = plan_ops(match.structure, r), spectral_cost(match.structure, r)
    if not r * n >= STRUCTURED_ABOVE * min(tables, spectral):  # as _oracle_coordinates (NaN: never)
        return None
    chars = character_coordinates(match, e, U, tables=not spectral < tables)
    if chars is None:
        return None
    Mc, Fz, lift, into = chars
    if spectral < tables:
        return Columns(Fz, None, spectral_operator(match.structure, None, lift=lift)), Mc
    return Columns(Fz, marginal_operator(match.structure, None, into=into), None), Mc


def _zmap(C, s, dual=False):
    """Span coordinates (rows of C) -> the oracle's, ``s ∘ c`` or ``Mc·c`` (:func:`_oracle_coordinates`'
    s, a vector or the matrix Mc); ``dual``: oracle normals λ_z -> the span's, ``s ∘ λ`` or ``Mcᵀλ``."""
    if s.ndim == 1:
        return C * s
    return C @ s if dual else C @ s.T


class Columns:
    """The columns of a full-row-rank ``(r, n)`` matrix in the oracle's coordinates, laid
    out for the kernels: ``A = (ptr, idx, val, dense, rptr, ridx, rval, operator, spectral)``
    (see ``knorm.body._columns``), compressed when at most ``DENSE_ABOVE`` of the entries are
    non-zero, else dense. ``operator`` or ``spectral``: for a marginal workload, the kernel
    data with which the pivots' product ``Fᵀv`` is computed from the workload's structure, by
    its tables (:func:`knorm.body.marginal.marginal_operator`) or by a product transform
    (:func:`knorm.body.spectral.spectral_operator`); the dense copy then serves single
    columns; the slot not used is ``()``. ``structured`` says which (``"tables"``, ``"transform"`` or None).
    Shared by every frame of a body (rounding only changes the frame's map T)."""

    def __init__(self, Fz, operator=None, spectral=None):
        Fz = np.asarray(Fz, dtype=np.float64)
        self.r, self.n = Fz.shape
        nz = Fz != 0.0
        self.nnz = int(np.count_nonzero(nz))
        none_i, none_f = np.empty(0, np.int64), np.empty(0)
        # an unused slot is the empty tuple: the kernels' product is chosen by A's type (knorm.body._columns)
        op = () if operator is None else operator
        spec = () if spectral is None else spectral
        self.structured = "tables" if operator is not None else "transform" if spectral is not None else None
        if self.structured or self.nnz > DENSE_ABOVE * Fz.size:
            self.A = (np.zeros(self.n + 1, np.int64), none_i, none_f, np.ascontiguousarray(Fz.T),
                      np.zeros(self.r + 1, np.int64), none_i, none_f, op, spec)
        else:
            cols, rows = np.nonzero(nz.T)  # column-major order: f_j's entries are contiguous
            ptr = np.zeros(self.n + 1, np.int64)
            np.cumsum(np.bincount(cols, minlength=self.n), out=ptr[1:])
            rrows, rcols = np.nonzero(nz)  # row-major order: row i's entries are contiguous
            rptr = np.zeros(self.r + 1, np.int64)
            np.cumsum(np.bincount(rrows, minlength=self.r), out=rptr[1:])
            self.A = (ptr, rows.astype(np.int64), np.ascontiguousarray(Fz[rows, cols]), np.empty((0, 0)),
                      rptr, rcols.astype(np.int64), np.ascontiguousarray(Fz[rrows, rcols]), op, spec)
        self.dense = self.A[3].shape[0] > 0
        self.fmax = float(np.sqrt(np.max(np.einsum("ij,ij->j", Fz, Fz))))
        self._Fz = None if self.dense else Fz  # dense: the kernels' copy is the matrix (transposed)
        # the crash basis along the oracle's (1, …, 1): the same for every frame of the body (kept
        # once made, handed out as copies; 7 s at census size)
        self.centre_crash: OracleState | None = None

    def matrix(self):
        """The ``(r, n)`` matrix itself."""
        return self.A[3].T if self.dense else self._Fz


class Frame:
    """A full-row-rank symmetric hull in its own r-dim coordinates (what the walks see).

    The oracle's LP runs in coordinates ``z = T·x`` of the frame coordinates ``x``, on the
    shared :class:`Columns` of F (sparse where F is); the walks' geometry (directions,
    lengths, reflections) is in x. ``Ft`` (n, r), the columns of F in frame coordinates,
    is formed only on request (structure detection, bounds, starting points). Built by
    :class:`SymmetricHull` (span coordinates) and :meth:`mapped` for each rounded
    (isotropic) frame.
    """

    def __init__(self, cols, T=None):
        if not isinstance(cols, Columns):
            cols = Columns(np.asarray(cols, dtype=np.float64).T)  # given as Ft (n, r), T = I
        self.cols = cols
        self.A = cols.A
        self.n, self.r = cols.n, cols.r
        self.T = np.eye(self.r) if T is None else np.ascontiguousarray(T, dtype=np.float64)
        self.fmax = cols.fmax
        self.max_pivots = 50 * (self.n + self.r) + 1000
        self._state = None
        self._Ft = None
        # the shared warm-start state is mutated by every query: one thread at a time
        self._lock = threading.Lock()

    def __getstate__(self):  # picklable (process pools, Dask): no lock, no cached state
        return {"cols": self.cols, "T": self.T}

    def __setstate__(self, d):
        self.__init__(d["cols"], d["T"])

    def mapped(self, T):
        """The frame of coordinates ``x'`` with ``x = T·x'`` (same body, same oracle data:
        oracle states carry over unchanged)."""
        return Frame(self.cols, self.T @ T)

    @property
    def Ft(self):
        """The columns of F in frame coordinates as rows, ``(T⁻¹F)ᵀ`` (n, r), dense."""
        if self._Ft is None:
            self._Ft = np.ascontiguousarray(np.linalg.solve(self.T, self.cols.matrix()).T)
        return self._Ft

    def to_oracle(self, X):
        """Frame coordinates -> the oracle's (``z = T·x``, row-wise)."""
        return np.asarray(X, dtype=np.float64) @ self.T.T

    def check(self, status, what):
        if status != sx.OK:
            raise OracleError(
                f"facet-walk oracle {_STATUS.get(status, f'failed (status {status})')} while computing {what} "
                f"(r={self.r}, n={self.n}, limit {self.max_pivots} pivots)"
            )

    def crash_basis(self, direction=None, oracle=False):
        """A dual feasible basis: walk inside the polar ``{λ : |Fᵀλ| <= 1}`` to a vertex.

        Starting at λ = 0, move along ``direction`` (frame coordinates; its oracle image,
        projected off the active normals) until a new constraint ``|f_iᵀλ| = 1`` becomes
        tight; r steps give a vertex whose tight columns (with their signs) form the basis
        (the ``crash`` kernel; deterministic). Without a direction (the oracle's (1, …, 1), the same
        for every frame of the body) it is made once per body and handed out as copies. ``oracle``:
        the direction is in the oracle's coordinates already (no BLAS product: threads may call it).
        """
        r = self.r
        if direction is None and self.cols.centre_crash is not None:
            return self.cols.centre_crash.copy()
        d = np.ones(r) if direction is None else (np.asarray(direction, np.float64) if oracle else
                                                   self.to_oracle(direction))
        state = OracleState(np.empty(r, np.int64), np.empty((r, r)), np.empty(r), np.empty(self.n),
                            np.zeros(4, np.int64))
        unit = np.empty(0)
        if not sx.crash(self.A, np.ascontiguousarray(d), state.basis, 0, unit, unit):
            raise OracleError(f"facet-walk oracle found no starting basis (r={self.r}, n={self.n})")
        status = sx.refactor(self.A, *state.args())
        # REPAIRED: the crash basis was numerically singular and a fresh one from another
        # direction replaced it; it is just as good a (dual feasible) start
        self.check(sx.OK if status == sx.REPAIRED else status, "a starting basis")
        state.ctr[2] = 0
        if direction is None:
            self.cols.centre_crash = state.copy()
        return state

    def basis_state(self, basis):
        """An oracle state for saved basis codes (``int64[r]``, each in ``[0, 2n)``, distinct
        columns; else a ValueError), refactored. A singular one is replaced by a fresh crash
        basis (as in :meth:`crash_basis`): a saved basis is only a warm start, never trusted
        for a result, which :meth:`solve` makes optimal at its point."""
        b = np.asarray(basis)
        if not (b.shape == (self.r,) and b.dtype.kind in "iu" and np.all(b >= 0) and np.all(b < 2 * self.n)
                and len(np.unique(b % self.n)) == self.r):
            raise ValueError(f"a saved oracle basis must be {self.r} distinct column codes in [0, {2 * self.n})")
        r = self.r
        state = OracleState(b.astype(np.int64), np.empty((r, r)), np.empty(r), np.empty(self.n),
                            np.zeros(4, np.int64))
        status = sx.refactor(self.A, *state.args())
        self.check(sx.OK if status == sx.REPAIRED else status, "a saved basis")
        state.ctr[2] = 0
        return state

    def optimal_bases(self, X, start=None, oracle=False):
        """An optimal basis at each row of X (frame coordinates, or the oracle's if ``oracle``),
        ``(k, r)`` codes: exact solves from a fresh crash basis (or a copy of the state ``start``),
        each warm-started from the previous one."""
        st = self.crash_basis() if start is None else start.copy()
        out = np.empty((len(X), self.r), np.int64)
        for i, x in enumerate(X):
            self.solve(x, st, oracle)
            out[i] = st.basis
        return out

    def gauges_from_bases(self, X, bases, oracle=False):
        """Gauges of the rows of X (frame coordinates), each solved from its own basis
        (:meth:`basis_state`, refactored; no pivot where it is optimal there, as a basis saved
        by :meth:`optimal_bases` is), and the optimal states: ``(gauges, states)``. The result
        is exact whatever the bases (they are warm starts) and, from the same bases, the same
        to the last bit (one refactorisation, not a history of updates). ``oracle``: X is in the
        oracle's coordinates already (no BLAS product here: threads that call this make none)."""
        Z = np.asarray(X, dtype=np.float64) if oracle else self.to_oracle(X)
        g = np.empty(len(X))
        states = []
        for i, b in enumerate(bases):
            st = self.basis_state(b)
            self.solve(Z[i], st, True)
            g[i] = float(st.lam @ Z[i])
            states.append(st)
        return g, states

    @property
    def state(self):
        """The shared warm-start state used by the Python-level oracle methods."""
        if self._state is None:
            self._state = self.crash_basis()
        return self._state

    def solve(self, y, state, oracle=False):
        """Make ``state`` optimal at ``y`` (frame coordinates, or the oracle's if ``oracle``;
        dual simplex); returns it.

        Optimality does not depend on ``‖y‖``: y is solved scaled by a power of two into
        ``[0.5, 1)`` (exact), so tiny and huge ``y`` pivot like ordinary ones.
        """
        z = np.ascontiguousarray(y if oracle else self.to_oracle(y), dtype=np.float64).reshape(1, -1)
        # gauge_many of one row is exactly this solve (the same scaling); numba compiles no
        # entry of its own for solve (docs/design.md, the cold start)
        status = sx.gauge_many(self.A, self.fmax, *state.args(), z, self.max_pivots, np.empty(1), np.empty_like(z))
        self.check(status, "a gauge")
        return state

    def solve_copy(self, y, oracle=False):
        """A copy of the shared state made optimal at ``y`` (thread-safe)."""
        with self._lock:
            return self.solve(y, self.state, oracle).copy()

    def gauges(self, Y, state=None, oracle=False):
        """Gauges and facet normals (``λ·y = ‖y‖_K``) of the rows of Y, in frame coordinates
        (in the oracle's if ``oracle``).

        Warm-started from the shared state, or from ``state`` if given (e.g. a fresh
        :meth:`crash_basis`, when the last bits must not depend on earlier queries).
        """
        Z = np.ascontiguousarray(Y if oracle else self.to_oracle(Y), dtype=np.float64)
        out = np.empty(Z.shape[0])
        normals = np.empty_like(Z)
        with self._lock if state is None else contextlib.nullcontext():
            st = self.state if state is None else state
            status = sx.gauge_many(self.A, self.fmax, *st.args(), Z, self.max_pivots, out, normals)
        self.check(status, "gauges")
        return out, (normals if oracle else normals @ self.T)

    def move(self, x, u, s_max, state, oracle=False):
        """Parametric walk from x (state optimal at x) along u; returns (s, hit_boundary)."""
        out = np.zeros(2)
        z = np.ascontiguousarray(x if oracle else self.to_oracle(x), dtype=np.float64)
        uz = np.asarray(u, dtype=np.float64) if oracle else self.to_oracle(u)
        k = _exponent(uz)  # x + s·u = x + (s·2^k)·(u·2^-k): walk along the scaled u, exactly
        status = sx.move(self.A, self.fmax, *state.args(), z, np.ldexp(uz, -k), _ldexp(float(s_max), k),
                         self.max_pivots, out)
        self.check(status, "a chord end")
        return _ldexp(float(out[0]), -k), bool(out[1])


class SymmetricHull:
    """``K = F·B₁ⁿ``: the symmetric convex hull of the columns ``±f_1 … ±f_n`` of F.

    Parameters
    ----------
    F : array_like, shape (d, n)
        Real, finite workload matrix with at least one non-zero column. Columns shorter
        than ``SHORT`` (1e-14) times the longest are dropped (a relative, scale-free test)
        if they lie in the span of the others, else refused with a ValueError naming F (one
        entry of 1e300 beside ones: K would lose the short columns' direction); exact
        duplicates and opposites are dropped; interior columns are harmless. The rank r counts
        singular values above ``max(d, n)·eps`` times the largest; a body whose smallest
        remaining singular value is below ``THIN`` (1e-13) times the largest (e.g. columns
        parallel to 1e-14) is refused with a ValueError: its span is numerically uncertain.
        Bodies thinner than ``WHITEN`` (1e-7) are solved in whitened coordinates: the LP
        stays well conditioned, and gauges of ambient points carry the relative error
        ≈ 1e-16·cond(F) of mapping them into the span (the problem's own conditioning).

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

    # (fingerprint, shape) of F when this body is a process's body of F (knorm.walks.prepared.body_of):
    # its certification is then written to the cache of prepared workloads (knorm.walks.cache)
    _cache_key: tuple[str, tuple[int, int]] | None = None

    @staticmethod
    def _source_hash(F: NDArray[np.float64]) -> str:
        """SHA-256 of a validated F (dtype, shape and bytes): which matrix a body was built from (the
        prepared workloads' fingerprint of F, :func:`knorm.walks.prepared.workload_fingerprint`)."""
        return fingerprint(np.ascontiguousarray(F))

    @classmethod
    def _of(cls, F: Any, fingerprint: str) -> SymmetricHull:
        """The body of a validated F whose :meth:`_source_hash` the caller has just computed
        (hashing a census-size F takes about 0.4 s: once is enough)."""
        body = cls.__new__(cls)
        body._build(F, fingerprint)
        return body

    def __init__(self, F: ArrayLike) -> None:
        self._build(F, None)

    @on_one_blas_thread
    def _build(self, F: Any, fingerprint: str | None) -> None:
        # a marginal workload known by its structure (knorm.implicit.marginals, a prepared file) is never
        # made dense when its columns are non-zero and distinct (marginal_ops.complete): the body needs
        # only the structure, and it is the same body, bit for bit, as that of the matrix recognised
        match = as_marginal(F)
        if match is not None and not complete(match):
            F, match = dense_marginal(match), None
        if match is None:
            self._build_dense(F, fingerprint)
            return
        check_body_memory(match)
        self._source = fingerprint_of(match) if fingerprint is None else fingerprint
        self._F: NDArray[np.float64] | None = None
        self.ambient_dim, self._n_columns = match.shape
        e = _exponent(np.array([match.scale]))
        self._finish(match, e, span_of(match, e), max(self.ambient_dim, self._n_columns), None)

    def _build_dense(self, F: Any, fingerprint: str | None) -> None:
        F = validate_matrix(F)
        # a mechanism given this body checks it is of its own F
        self._source = self._source_hash(F) if fingerprint is None else fingerprint
        self.ambient_dim = F.shape[0]
        e = _exponent(F)
        # F·2^-e (largest |entry| in [0.5, 1)): norms neither overflow nor underflow; by pieces
        norms = _column_norms(F, e)
        norms /= norms.max()
        # K is symmetric: f and -f are the same generator; drop exact duplicates (and short columns)
        cols = _first_distinct(F, np.flatnonzero(norms > SHORT))
        Fk = F[:, cols] if len(cols) < F.shape[1] else np.ascontiguousarray(F)  # all kept: no copy
        self._F = Fk
        self._n_columns = Fk.shape[1]
        # a marginal workload (recognised from F's entries) keeps its structure: its span from the
        # structure's product basis (an SVD of d × rank, no QR of F, no scaled copy of F), and the
        # pivots' product Fᵀv a sum of broadcast tables or a product transform, not a dense n·r product
        structure = recognise(Fk)
        Fs = np.ldexp(Fk, -e) if structure is None else None
        US = _left_singular(Fs) if structure is None else span_of(structure, e)
        self._finish(structure, e, US, max(Fk.shape), (F, norms, Fs))

    def _finish(self, structure, e, US, size, dense):
        """The span, frame and oracle from ``(U, S)``; ``dense``: ``(F, norms, Fs)`` of a dense build
        (its short columns checked, its span rows ``UᵀFs``), None where the structure gives them."""
        U, S = US
        tol = S[0] * size * np.finfo(float).eps
        r = int(np.sum(S > tol))
        if S[r - 1] < THIN * S[0]:
            raise ValueError(f"F spans a direction {S[r - 1] / S[0]:.1e} times thinner than its widest (singular "
                             f"values), below the {THIN:g} where its span is numerically certain: merge near-parallel columns "
                             "or drop nearly dependent rows")
        self.dim = r
        # SVD's singular vectors are defined up to sign, and LAPACK's choice can differ between F and
        # F·c: each column's largest entry is made positive, so the frame is the same at every scale
        U = U[:, :r] * np.where(U[np.argmax(np.abs(U[:, :r]), axis=0), np.arange(r)] < 0, -1.0, 1.0)
        if dense is not None:
            _check_short_columns(dense[0], dense[1], U)
        self.span_basis = U.copy()
        chars = None if structure is None else _character_columns(structure, self.span_basis, e)
        if chars is None:
            Fr = self.span_basis.T @ dense[2] if structure is None else span_rows(structure, self.span_basis, e)
            unit = float(np.max(np.linalg.norm(Fr, axis=0)))
        else:  # the longest column from the structure (F's columns lie in the span): no UᵀF
            unit = column_norm_max(structure, e)
        if not np.isfinite(unit):  # a marginal workload's weights past float64 at a subnormal scale
            raise ValueError(f"F's entries (about 2^{e}) are too close to float64's limits for its body to be "
                             "computed: rescale F by a power of two (its answers scale with it)")
        self._exp = e
        self._unit = unit
        with np.errstate(over="ignore"):
            self._scale = float(np.ldexp(unit, e))  # frame units -> ambient units
        if not np.isfinite(self._scale):
            raise ValueError(f"F has a column of Euclidean norm ≈ 2^{e + np.log2(unit):.1f}, beyond the float64 "
                             "range (points of K could not be represented): rescale F")
        self._log_scale = float(np.log(unit) + e * np.log(2.0))
        if chars is None:
            cols, T, self._zscale = _oracle_coordinates(Fr, self.span_basis, S, unit, structure, e)
        else:
            cols, self._zscale = chars
            T = self._zscale * unit
        self.frame = Frame(cols, T)
        self._structure: Any = False  # not yet detected (else an ExactStructure or None)
        self._match = structure
        self._symmetry: Any = False  # not yet built (else a ValueSymmetry or None)

    @property
    def symmetry(self) -> ValueSymmetry | None:
        """The value-permutation symmetries of a marginal workload, found from F's entries
        (:func:`knorm.body.symmetry.value_symmetry`), else None. The rounding averages its
        covariance estimates over them."""
        if self._symmetry is False:
            self._symmetry = value_symmetry(self._match, self.span_basis)
        return self._symmetry

    @property
    def tables(self) -> NDArray[np.int64] | None:
        """Per row of F its table's index (−1: a zero row) if F is a marginal workload, found from
        F's entries (:func:`knorm.body.symmetry.row_tables`), else None: the certificate measures
        each table's block energy."""
        return row_tables(self._match)

    @property
    def exact_structure(self) -> ExactStructure | None:
        """``ExactStructure`` if K is a linear image of the cross-polytope or cube, else None.

        Then uniform draws are exact (no MCMC); see :mod:`knorm.body.structure`.
        """
        if self._structure is False:
            from .structure import detect

            self._structure = detect(self.frame)
        return self._structure

    # -- coordinates -------------------------------------------------------------
    @property
    def n_columns(self) -> int:
        return self._n_columns

    @property
    def F(self) -> NDArray[np.float64]:
        """The validated matrix (zero and duplicate columns removed); a workload known by its structure
        is made dense on the first request, memory checked (the body itself never needs it)."""
        if self._F is None:
            self._F = dense_marginal(self._match)
        return self._F

    def _to_frame(self, Y):
        """Rows of Y -> ``(Z, k, off)``: the oracle's coordinates of ``y·2^-k`` (max|y·2^-k|
        in [0.5, 1); exact: rows of y scaled by powers of two), the row exponents k, and the
        relative distance off the span.

        The oracle's coordinates of y itself are ``Z·2^(k-e)``; nothing here can overflow.
        """
        k = _row_exponents(Y)
        Ys = np.ldexp(Y, -k[:, None])
        C = Ys @ self.span_basis
        resid = Ys - C @ self.span_basis.T
        yn = np.linalg.norm(Ys, axis=1)
        off = np.linalg.norm(resid, axis=1) / np.where(yn > 0, yn, 1.0)
        return _zmap(C, self._zscale), k, off

    def to_ambient(self, Z: ArrayLike) -> NDArray[np.float64]:
        """Span coordinates (frame units, as used by the kernels) -> ambient points."""
        z: NDArray[np.float64] = as_real_array("Z", Z).astype(np.float64, copy=False)
        if z.ndim < 1 or z.shape[-1] != self.dim:
            raise ValueError(f"Z must have shape (..., {self.dim}); got {z.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.ldexp((z * self._unit) @ self.span_basis.T, self._exp)
        if not np.all(np.isfinite(out)):
            raise ValueError("Z: ambient coordinates are NaN or overflow float64")
        return out

    def _to_frame1(self, y):
        """:meth:`_to_frame` for one point (d,): ``(z, k, off)`` with scalars k and off."""
        k = _exponent(y)
        ys = np.ldexp(y, -k)
        c = ys @ self.span_basis
        resid = ys - self.span_basis @ c
        yy = float(ys @ ys)
        off = math.sqrt(float(resid @ resid) / yy) if yy > 0.0 else 0.0
        return _zmap(c, self._zscale), k, off

    def _check_points(self, y: ArrayLike, name: str) -> NDArray[np.float64]:
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
        """Gauges (exact, any scale), facet normals (oracle coordinates), off-span distances."""
        Z, k, off = self._to_frame(Y)
        vals, normals = self.frame.gauges(Z, oracle=True)
        with np.errstate(over="ignore"):
            vals = np.ldexp(vals, k - self._exp)
        return vals, normals, off

    # -- oracle --------------------------------------------------------------------
    def gauge(self, y: ArrayLike, *, span_tol: float = 1e-9) -> float | NDArray[np.float64]:
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

    def contains(self, y: ArrayLike, *, tol: float = 1e-9) -> bool | NDArray[np.bool_]:
        """True where ``‖y‖_K <= 1 + tol``."""
        tol = _check_tol("tol", tol)
        Y = self._check_points(y, "y")
        vals, _, off = self._solve_rows(np.atleast_2d(Y))
        inside = (off <= 1e-9) & (vals <= 1.0 + tol)  # an overflowing gauge is outside
        return inside if Y.ndim == 2 else bool(inside[0])

    def _normal_to_ambient(self, normals):
        """Oracle-coordinate normals λ_z (``λ_z·z = ‖y‖`` for ``z = s ∘ Uᵀy``, or ``z = Mc·Uᵀy``) ->
        ambient λ in the span: ``U·(s ∘ λ_z)`` (``U·Mcᵀλ_z``)."""
        with np.errstate(over="ignore", invalid="ignore"):
            lam = np.ldexp(_zmap(normals, self._zscale, dual=True) @ self.span_basis.T, -self._exp)
        if not np.all(np.isfinite(lam)):
            raise ValueError("F: facet normals of K overflow float64 (K is too thin at this scale)")
        return lam

    def facet_normal(self, y: ArrayLike) -> NDArray[np.float64]:
        """Dual vector λ (ambient, in the span) with ``λ·y = ‖y‖_K`` and ``|Fᵀλ| <= 1``.

        On the boundary this is the outward normal of a facet of K through y.
        """
        Y = self._check_points(y, "y")
        _, normals, off = self._solve_rows(np.atleast_2d(Y))
        if np.any(off > 1e-9):
            raise ValueError("y is off the span of F: the gauge is infinite and no facet normal exists")
        lam = self._normal_to_ambient(normals)
        return lam if Y.ndim == 2 else lam[0]

    def chord(self, x: ArrayLike, u: ArrayLike) -> tuple[float, float]:
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
        base = self.frame.solve_copy(zx, oracle=True)
        gx = _ldexp(float(base.lam @ zx), kx - self._exp)
        if not gx <= 1 + 1e-9:
            raise ValueError(f"chord needs a point x inside K; ‖x‖_K = {gx:.6g} > 1")
        zx = np.ldexp(zx, kx - self._exp)  # x in K: its oracle coordinates are O(1) (or underflow to 0)
        zu, ku, offu = self._to_frame1(u)
        if offu > 1e-9:
            return (0.0, 0.0)
        # u's oracle coordinates are zu·2^(ku-e): walk along zu, then t = t_zu·2^(e-ku)
        ends = []
        for sign in (1.0, -1.0):
            st = base.copy()
            t, _ = self.frame.move(zx, sign * zu, np.inf, st, oracle=True)
            ends.append(sign * _ldexp(t, self._exp - ku))
        if not (math.isfinite(ends[0]) and math.isfinite(ends[1])):
            raise ValueError("u: a chord end overflows float64 (u is too short for this body)")
        return (ends[1], ends[0])

    def __repr__(self) -> str:
        return f"SymmetricHull(ambient_dim={self.ambient_dim}, dim={self.dim}, n_columns={self.n_columns})"
