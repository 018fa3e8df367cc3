"""Strategy (matrix-mechanism) baselines, pure ε-DP (issue 10, docs/design.md §4).

A strategy ``A`` (s × n, full column rank) is answered with Laplace noise, ``y = Ax + Lap(Δ₁(A)/ε)^s``,
and the workload answers are ``F x̂`` with the least-squares estimate ``x̂ = A⁺ y = x + A⁺z``: the
noise ``F A⁺ z`` never depends on x, and

    E‖F A⁺ z‖₂² = 2 (Δ₁/ε)² ‖F A⁺‖_F² = 2 (Δ₁/ε)² tr(FᵀF (AᵀA)⁻¹)  (exact).

* :class:`IdentityMechanism`: ``A = I`` (Δ₁ = 1), noise ``F·Lap(1/ε)ⁿ``.
* :class:`HierarchicalMechanism`: a b-ary tree of contiguous blocks (Hay et al. 2010; by default
  without the root, as Qardaji et al.'s HB), Δ₁ = measured levels, exact O(n) least squares.
* :class:`PIdentityMechanism`: HDMM's p-Identity strategy ``A = [I; Θ] D`` (McKenna et al.
  2018) with Δ₁ = 1, Θ >= 0 optimised for the workload by L-BFGS-B.
* :class:`KroneckerStrategyMechanism`: ``A = ⊗_i A_i`` on a product domain (Δ₁ = Π Δ₁(A_i),
  ``A⁺ = ⊗ A_i⁺``); :class:`KroneckerPIdentityMechanism` optimises one p-Identity per attribute
  (HDMM's Kronecker p-Identity).

``F`` is an explicit (d, n) matrix or a :class:`knorm.implicit.ImplicitWorkload` (Gram matrix or
Kronecker terms only; see that module for what ``release`` and ``release_estimate`` return then).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from .._blas import on_one_blas_thread
from ..privacy import BudgetAccountant

from .._rng import as_generator
from .._validate import as_real_array, check_flag, check_memory, positive_int, short_repr
from ..body.hull import validate_matrix
from ..implicit import ImplicitWorkload, _kron_all, _matmul_along
from ._base import (CHUNK_BYTES, ErrorEstimate, Mechanism, PrivacyClaim, _finite, _vectors, check_epsilon,
                    check_finite_output, check_magnitude, check_noise_scale, check_size, in_float_range, mc_expected_norm, scaled,
                    unit_exponent)
from ._grid import grid_exponent_of, snap, snap_sum
from .uncertainty import SIM_DRAWS, DrawsLaw, LaplaceLaw, NoiseLaw
from ._p_identity import (_check_starts, _check_theta, _p_identity_solver, _search_p_identity, p_identity_inverse,
                          p_identity_objective)

__all__ = ["IdentityMechanism", "HierarchicalMechanism", "PIdentityMechanism", "KroneckerStrategyMechanism",
           "KroneckerPIdentityMechanism", "KroneckerHierarchicalMechanism", "Hierarchy", "BRANCHINGS",
           "p_identity_objective", "p_identity_inverse", "hierarchy_errors", "MAX_BRANCHING"]

BRANCHINGS = tuple(range(2, 17))  # branching factors tried with the root (``root=True, branching=None``)
STRATEGY_MATRIX_VALUES = 2**24  # the per-answer uncertainty forms the noise map F A⁺ up to this many entries
MAX_BRANCHING = 8192  # without the root, b in 2..min(n, MAX_BRANCHING) and b = n (the identity) are tried


def _branchings(n: int) -> list[int]:
    """The b tried without the root: every b in 2..min(n, MAX_BRANCHING), and n (the identity)."""
    return list(range(2, min(max(2, n), MAX_BRANCHING) + 1)) + ([n] if n > MAX_BRANCHING else [])


def _rows_or_gram(F: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
    """``(F, False)``, or ``(FᵀF, True)`` when F has more rows than columns (for :meth:`Hierarchy.error_factor`)."""
    return (F.T @ F, True) if F.shape[0] > F.shape[1] else (F, False)


class _Strategy(Mechanism):
    """What the strategies share: noise ``F A⁺ z``, ``z ~ Lap(Δ₁/ε)`` on every row of A, and its
    errors from the exact factor ``‖F A⁺‖_F²`` computed on ``F·2^-e`` (unit scale: no square of F's
    scale or of 1/ε is ever formed, so any scale and any ε whose noise fits float64 work).

    ``workload``: the :class:`~knorm.implicit.ImplicitWorkload` when F is given as one (then ``F``
    itself is not held), else None. A subclass sets ``_rows`` (rows of A) and ``_solve`` (``A⁺z``)."""

    epsilon: float
    sensitivity: float
    scale: float
    workload: ImplicitWorkload | None
    _exp: int           # F = 2^e·(F at unit scale)
    _error_unit: float  # ‖F·2^-e A⁺‖_F²
    _rows: int          # rows of the strategy A
    _what: str          # the noise, for the Monte-Carlo method string

    def _init_workload(self, F: ArrayLike | ImplicitWorkload, rng: np.random.Generator | int | None,
                       accountant: BudgetAccountant | None) -> None:
        if isinstance(F, ImplicitWorkload):
            self.workload = F
            self.d, self.n = F.d, F.n
            self._rng = as_generator(rng)
            self._init_accounting(rng, accountant)
            self._exp = F.exponent
        else:
            Mechanism.__init__(self, F, rng, accountant)
            self.workload = None
            self._exp = unit_exponent(self.F)

    @property
    def shape(self) -> tuple[int, ...]:
        """The domain's attribute sizes (an explicit F: one attribute, ``(n,)``)."""
        return (self.n,) if self.workload is None else self.workload.shape

    def _unit_F(self) -> NDArray[np.float64]:
        return np.ldexp(self.F, -self._exp)

    def _unit_gram(self) -> NDArray[np.float64]:
        """``(F·2^-e)ᵀ(F·2^-e)`` (n × n, memory checked)."""
        if self.workload is not None:
            return self.workload.gram(unit=True)
        check_memory("F", None, 8 * 3 * self.n * self.n)
        Fu = self._unit_F()
        return Fu.T @ Fu

    def _unit_terms(self) -> list[tuple[float, list[NDArray[np.float64]]]]:
        """The unit-scale Gram as ``Σ_j w_j ⊗_i G_ji`` (an explicit F: one term, one attribute)."""
        return self.workload.unit_terms() if self.workload is not None else [(1.0, [self._unit_gram()])]

    def _identity_unit(self) -> float:
        """The identity strategy's error factor ``‖F‖_F²`` at unit scale (Δ₁ = 1), as :class:`IdentityMechanism`'s."""
        return self.workload.frobenius_squared(unit=True) if self.workload is not None else \
            float(np.sum(self._unit_F() ** 2))

    def _worse_than_identity(self) -> bool:
        """Whether this strategy's exact error ``Δ₁²·‖F A⁺‖_F²`` is not strictly below the identity's: a
        search's result is kept only when it is (compared exactly, not by the search's own objective)."""
        return not self.sensitivity**2 * self._error_unit < self._identity_unit()

    def _set_noise(self, sensitivity: float, error_unit: float) -> None:
        """Sets Δ₁, the Laplace scale Δ₁/ε and the error factor; a ValueError naming epsilon if the
        noise or its rms cannot be represented in float64."""
        self.sensitivity = sensitivity
        with np.errstate(over="ignore", under="ignore"):
            scale = sensitivity / self.epsilon
        self.scale = check_noise_scale(scale, self.epsilon, "the Laplace scale Δ₁/ε")
        self._error_unit = error_unit
        self.rms_error()

    def rms_error(self) -> float:
        """``√E‖F A⁺ z‖₂² = √2·Δ₁/ε·‖F A⁺‖_F`` (exact; no square is formed)."""
        return in_float_range(scaled(self.sensitivity * np.sqrt(2.0 * self._error_unit), self._exp, self.epsilon),
                              "the rms error", self.epsilon)

    def expected_squared_error(self) -> float:
        """``E‖F A⁺ z‖₂² = 2 (Δ₁/ε)² ‖F A⁺‖_F²`` (exact)."""
        return in_float_range(scaled(2.0 * self.sensitivity**2 * self._error_unit, self._exp, self.epsilon, 2),
                              "the expected squared error", self.epsilon)

    @abstractmethod
    def _solve(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """``A⁺ z`` for z of shape (m, rows): (m, n)."""

    def _answers(self, U: NDArray[np.float64]) -> NDArray[np.float64]:
        """``F u`` for every row u of U (F's own scale)."""
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow raises in check_finite_output
            return U @ self.F.T if self.workload is None else self.workload.apply(U)

    def _check_answers(self, m: int | None) -> None:
        """Refuse (before drawing) answers of an implicit F that has no operator or whose m answers
        (d floats each, with working copies) do not fit in memory."""
        if self.workload is None:
            return
        if not self.workload.can_apply:
            raise ValueError("F is known by its Gram matrix only: its answers cannot be computed; "
                             "release_estimate(x) returns x̂ (every answer is w·x̂)")
        check_memory("F", None, 8 * 3 * (m or 1) * (self.d + self.n + self._rows))

    def _noise_law(self) -> NoiseLaw:
        """``W z`` with ``W = F A⁺`` (formed from ``A⁺`` of the identity where ``d·rows <= 2^24``) and z
        i.i.d. ``Lap(Δ₁/ε)``: SE exact; else (or for an implicit F) Monte Carlo over the noise draws."""
        if self.workload is None and self.d * self._rows <= STRATEGY_MATRIX_VALUES:
            W = check_finite_output(self._answers(self._solve(np.eye(self._rows))).T, "the noise map F A⁺")
            return LaplaceLaw(self.scale, self.d, W)
        return DrawsLaw(lambda m: np.atleast_2d(self.sample_noise(m)), False, f"exact draws of {self._what}",
                        default=SIM_DRAWS)

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        """``F A⁺ z`` with ``z ~ Lap(Δ₁/ε)`` on every row of A: (d,) or (size, d)."""
        m = check_size(size, max(self.d, 2 * self._rows))
        self._check_answers(m)
        z = self._rng.laplace(0.0, self.scale, size=(m or 1, self._rows))
        return self._one_or_many(check_finite_output(self._answers(self._solve(z)), "the noise"), m)

    def _grid_k_of(self) -> int | None:
        """An explicit F: ``min_i max_j |F_ij| / ε`` (:meth:`Mechanism._grid_k_of`); an implicit one:
        ``2^(e−1)/ε`` from its power-of-two scale ``2^e``."""
        if self.workload is None:
            return super()._grid_k_of()
        return grid_exponent_of(float(np.ldexp(1.0, self._exp - 1)), self.epsilon, self.epsilon)

    @property
    def privacy_per_answer(self) -> PrivacyClaim:
        """The claim of one answer; its details also name the grid of ``release_estimate`` (``estimate_grid``)."""
        claim = super().privacy_per_answer
        try:
            grid = float(np.ldexp(1.0, self._estimate_grid_k()))
        except ValueError:  # no release may use this noise scale (_check_grid refuses it)
            return claim
        return replace(claim, details={**claim.details, "estimate_grid": grid})

    def _check_grid(self) -> None:
        """The answers' grid and the estimate's (``release_estimate``), refused alike."""
        super()._check_grid()
        self._estimate_grid_k()

    def _estimate_grid_k(self) -> int:
        """The grid of ``x̂``: from ``Δ₁/ε/√rows`` (a lower bound on the noise of a coordinate of
        ``A⁺z`` for a strategy of entries at most 1 in size)."""
        return grid_exponent_of(self.scale, float(np.sqrt(self._rows)), self.epsilon)

    def release_estimate(self, x: ArrayLike, size: int | None = None, *,
                         allow_noncounts: bool = False) -> NDArray[np.float64]:
        """The consistent estimate ``x̂ = A⁺(Ax + z) = x + A⁺z``, (n,) or (size, n): every answer is
        ``f·x̂`` (``release`` returns ``F x̂``). Counted and charged exactly as ``release``."""
        x = self.check_x(x, allow_noncounts)
        m = check_size(size, max(self.n, 2 * self._rows))
        self._check_grid()
        check_magnitude(float(np.sum(np.abs(x))), self._estimate_grid_k(), "x", "‖x‖₁")  # x̂ = x + A⁺z
        self._check_budget(m or 1)
        z = self._rng.laplace(0.0, self.scale, size=(m or 1, self._rows))
        with np.errstate(over="ignore", invalid="ignore"):  # on the estimate's own public grid (design §10.1)
            est = check_finite_output(snap_sum(x, self._solve(z), self._estimate_grid_k()), "the estimate")
        self._spend(m or 1)
        return self._one_or_many(est, m)

    def release(self, x: ArrayLike, size: int | None = None, *,
                allow_noncounts: bool = False) -> NDArray[np.float64]:
        """``F x̂ = Fx + F A⁺ z``: (d,) or (size, d) answers (an implicit F: computed by its operator,
        refused before anything is drawn when it has none or the answers do not fit in memory)."""
        if self.workload is None:
            return super().release(x, size, allow_noncounts=allow_noncounts)
        x = self.check_x(x, allow_noncounts)
        m = check_size(size, self.d + self.n + 2 * self._rows)
        self._check_answers(m)
        self.workload.apply(x)  # a ValueError if Fx overflows: nothing drawn
        self._check_grid()
        self._check_magnitude(x, "x")
        self._check_budget(m or 1)
        z = self._rng.laplace(0.0, self.scale, size=(m or 1, self._rows))
        with np.errstate(over="ignore", invalid="ignore"):  # F x̂ rounded to the public grid (design §10.1)
            out = check_finite_output(snap(self._answers(x + self._solve(z)), self._release_grid()), "the answer")
        self._spend(m or 1)
        return self._one_or_many(out, m)

    def _answers_of(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``F x_i`` per row (an implicit F: by its operator, refused before anything is drawn when it
        has none or the batch's answers do not fit in memory)."""
        if self.workload is None:
            return super()._answers_of(X)
        self._check_answers(len(X))
        return self._answers(X)

    def _noisy_rows(self, fx: NDArray[np.float64], X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Explicit F: ``F x_i + F A⁺ z_i`` on the grid (as :meth:`release`); implicit F: the float
        answers ``F (x_i + A⁺ z_i)`` rounded to the grid, one z_i per row."""
        if self.workload is None:
            return super()._noisy_rows(fx, X)
        z = self._rng.laplace(0.0, self.scale, size=(len(X), self._rows))
        with np.errstate(over="ignore", invalid="ignore"):
            return snap(self._answers(X + self._solve(z)), self._release_grid())

    @on_one_blas_thread  # chunks of products, as _search_p_identity's
    def expected_error(self, n_samples: int = 20_000, *, rms: bool = False) -> ErrorEstimate:
        """``E‖F A⁺ z‖₂``: no closed form; Monte Carlo over exact Laplace draws (unit scale, then scaled;
        an implicit F: ``‖F u‖₂ = ‖R u‖₂`` with ``RᵀR = FᵀF``, R from the Gram's eigendecomposition).
        ``rms=True``: ``√E‖F A⁺ z‖₂²``, exact (:meth:`rms_error`)."""
        if check_flag("rms", rms):
            return self._rms_estimate()
        rng = np.random.default_rng(self._rng.integers(2**63))
        factor = scaled(self.sensitivity, self._exp, self.epsilon)
        if self.workload is None:
            Fu, width = self._unit_F(), max(self.d, 2 * self._rows)
        else:
            check_memory("F", None, 8 * 6 * self.n * self.n)
            lam, Q = np.linalg.eigh(self._unit_gram())
            Fu, width = (Q * np.sqrt(np.maximum(lam, 0.0))).T, max(self.n, 2 * self._rows)

        def draw(m: int) -> NDArray[np.float64]:
            return self._solve(rng.laplace(0.0, 1.0, size=(m, self._rows))) @ Fu.T
        return mc_expected_norm(draw, n_samples, width, factor, f"Monte Carlo, {n_samples} exact draws of {self._what}")


class IdentityMechanism(_Strategy):
    """The identity strategy: ``x̂ = x + Lap(1/ε)ⁿ``, answers ``F x̂`` (pure ε-DP, Δ₁(I) = 1).

    Noise ``F w``, ``w ~ Lap(1/ε)ⁿ``; ``E‖F w‖₂² = 2/ε² · ‖F‖_F²`` exactly (an implicit F:
    ``‖F‖_F² = Σ_j Π_i tr(G_ji)``). For an injective F this is also the K-norm mechanism of F
    (``‖Fw‖_K = ‖w‖₁``).
    """

    def __init__(self, F: ArrayLike | ImplicitWorkload, *, epsilon: float,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        self._init_workload(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self._rows, self._what = self.n, "F·Lap(1/ε)ⁿ"
        self._set_noise(1.0, self._identity_unit())
        self._claim = PrivacyClaim("identity strategy", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"strategy": "identity", "l1_sensitivity": 1.0, "scale": self.scale})

    def _solve(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        return z


class Hierarchy:
    """A b-ary hierarchy of nested partitions of the cells ``0..n-1`` into contiguous blocks.

    Level 0 is one block ``[0, n)``; each block of level ℓ of size s > 1 splits into
    min(b, s) near-equal contiguous blocks (sizes ⌈s/k⌉ first, then ⌊s/k⌋) at level ℓ+1; a
    single cell is carried down unchanged, so every level is a partition and the last is
    all singletons (``depth``: at least that many levels, single cells carried down). Every
    cell lies in exactly one block per level: the strategy ``A`` (one row per measured block,
    levels stacked) has ℓ₁ sensitivity ``measured`` = ``levels = ⌈log_b n⌉ + 1`` with the root,
    ``levels − 1`` without it (``root=False``, Qardaji et al.'s HB: the root's total is the sum
    of its children's). For ``n = b^k`` this is the classic tree; otherwise the carried
    singletons are extra measurements at no cost in sensitivity. For n = 1 the root is the
    cell and is always measured.
    """

    def __init__(self, n: int, branching: int, *, root: bool = True, depth: int | None = None) -> None:
        self.n = positive_int("n", n)
        self.branching = positive_int("branching", branching)
        if self.branching < 2:
            raise ValueError(f"branching must be an integer >= 2, got {short_repr(branching)}")
        check_flag("root", root)
        depth = 1 if depth is None else positive_int("depth", depth)
        check_memory("n", self.n, 8 * 16 * self.n * max(2, depth))  # the levels' arrays
        b = min(self.branching, max(2, self.n))  # b >= n: the same 2-level tree
        parents: list[Any]
        firsts: list[Any]
        sizes, starts, parents, firsts, nkids = [np.array([self.n])], [np.array([0])], [None], [None], []
        while sizes[-1].max() > 1 or len(sizes) < depth:
            s = sizes[-1]
            k = np.minimum(b, s)  # children per block
            first = np.cumsum(k) - k  # index of each block's first child
            parent = np.repeat(np.arange(len(s)), k)
            j = np.arange(len(parent)) - first[parent]  # rank among its siblings
            q, r = s // k, s % k
            child = q[parent] + (j < r[parent])
            sizes.append(child)
            starts.append(np.concatenate([[0], np.cumsum(child)[:-1]]))
            parents.append(parent)
            firsts.append(first)
            nkids.append(k)
        self.sizes, self.starts, self.parents, self.firsts, self._nkids = sizes, starts, parents, firsts, nkids
        self.levels = len(sizes)
        self.root = bool(root) or self.levels == 1
        self._top = 0 if self.root else 1  # the first measured level
        self.measured = self.levels - self._top  # Δ₁(A)
        self.counts = [len(s) for s in sizes]
        self.rows = int(sum(self.counts[self._top:]))
        # variances (in units of one measurement's) of the bottom-up estimates of each block's
        # total from the measurements inside the block: leaves 1, then V = S/(S+1), S = Σ_children V
        V: list[Any] = [None] * self.levels
        S: list[Any] = [None] * self.levels
        V[-1] = np.ones(len(sizes[-1]))
        for lev in range(self.levels - 2, -1, -1):
            S[lev] = np.add.reduceat(V[lev + 1], self.firsts[lev + 1])
            V[lev] = S[lev] / (S[lev] + 1.0)
        self._V, self._S = V, S
        # top-down share of a block's correction that goes to each child: V_c / S_parent
        self._share = [None] + [V[lev + 1] / S[lev][parents[lev + 1]] for lev in range(self.levels - 1)]

    def matrix(self) -> sparse.csr_matrix:
        """The strategy A as a sparse ``(rows, n)`` 0/1 matrix (measured levels stacked, top first)."""
        rows, offset = [], 0
        for lev in range(self._top, self.levels):
            rows.append(offset + np.repeat(np.arange(self.counts[lev]), self.sizes[lev]))
            offset += self.counts[lev]
        cols = np.tile(np.arange(self.n), self.measured)
        return sparse.csr_matrix((np.ones(len(cols)), (np.concatenate(rows), cols)), shape=(self.rows, self.n))

    def measure(self, x: ArrayLike) -> NDArray[np.float64]:
        """``A x`` for x of shape (n,) or (m, n): the measured block sums, levels stacked."""
        x = _vectors("x", x, self.n)
        with np.errstate(over="ignore", invalid="ignore"):
            return _finite("x", np.concatenate([np.add.reduceat(x, st, axis=-1) for st in self.starts[self._top:]],
                                               axis=-1))

    def solve(self, y: ArrayLike) -> NDArray[np.float64]:
        """``x̂ = A⁺ y`` for y of shape (rows,) or (m, rows): exact least squares in O(rows) per vector.

        Two passes (Hay et al. 2010, for any tree): bottom-up, each block's total is estimated
        from the measurements inside it, ``z_u = (S_u y_u + Σ_c z_c)/(S_u + 1)`` (an unmeasured
        root: ``z = Σ_c z_c``); top-down, the final total ``v_u`` is split among the children,
        ``v_c = z_c + V_c/S_u · (v_u − Σ z_c)``. This is the posterior mean of a linear Gaussian
        model on a tree, i.e. the least-squares solution (A has full column rank: the last level
        is the identity).
        """
        y = _vectors("y", y, self.rows)  # one entry per measured block
        bounds = np.cumsum([0] + self.counts[self._top:])
        ys: list[Any] = [None] * self._top + [y[..., bounds[i]:bounds[i + 1]] for i in range(self.measured)]
        with np.errstate(over="ignore", invalid="ignore"):
            return _finite("y", self._solve(ys))

    def solve_leaves(self, f: ArrayLike) -> NDArray[np.float64]:
        """``(AᵀA)⁻¹ f`` for f of shape (n,) or (m, n): ``A⁺ y`` with f on the leaves, 0 elsewhere."""
        f = _vectors("f", f, self.n)
        with np.errstate(over="ignore", invalid="ignore"):
            return _finite("f", self._solve([None] * (self.levels - 1) + [f]))

    def _solve(self, ys: list[Any]) -> NDArray[np.float64]:
        L = self.levels
        z: list[Any]
        sums: list[Any]
        z, sums = [None] * L, [None] * L
        z[-1] = ys[-1]
        for lev in range(L - 2, -1, -1):
            sums[lev] = np.add.reduceat(z[lev + 1], self.firsts[lev + 1], axis=-1)
            if lev < self._top:  # the unmeasured root: its total is its children's
                z[lev] = sums[lev]
                continue
            own = 0.0 if ys[lev] is None else ys[lev] * self._S[lev]
            z[lev] = (own + sums[lev]) / (self._S[lev] + 1.0)
        v = z[0]
        for lev in range(L - 1):  # children of a block are contiguous: np.repeat broadcasts to them
            v = z[lev + 1] + self._share[lev + 1] * np.repeat(v - sums[lev], self._nkids[lev], axis=-1)
        return v

    def inverse_gram(self) -> NDArray[np.float64]:
        """``(AᵀA)⁻¹`` (n × n, dense; memory checked)."""
        check_memory("n", self.n, 8 * 3 * self.n * max(self.n, self.rows))
        return self.solve_leaves(np.eye(self.n))

    def error_factor(self, F: ArrayLike) -> float:
        """``‖F A⁺‖_F² = trace(F (AᵀA)⁻¹ Fᵀ)`` without forming A⁺: batched tree solves of F's
        rows, ``Σ_k f_k·(AᵀA)⁻¹f_k``; with more rows than columns, ``trace((AᵀA)⁻¹ FᵀF)`` from
        the n columns of the Gram matrix instead."""
        F = validate_matrix(F)
        if F.shape[1] != self.n:
            raise ValueError(f"F must have n = {self.n} columns, got shape {F.shape}")
        Fu = np.ldexp(F, -unit_exponent(F))  # ‖F A⁺‖_F² = 4^e·‖F·2^-e A⁺‖_F²: no square overflows inside
        value = scaled(self._trace(*_rows_or_gram(Fu)), unit_exponent(F), power=2)
        if not np.isfinite(value):
            raise ValueError("F is too large: ‖F A⁺‖_F² overflows float64")
        return value

    def _trace(self, R: NDArray[np.float64], tall: bool) -> float:
        step = max(1, CHUNK_BYTES // (8 * 2 * self.rows))
        total = 0.0
        for i in range(0, len(R), step):
            sol = self.solve_leaves(R[i:i + step])
            if tall:  # the diagonal entries (AᵀA)⁻¹G at (k, k), k = i..i+step-1
                total += float(np.sum(sol[np.arange(len(sol)), np.arange(i, i + len(sol))]))
            else:
                total += float(np.sum(R[i:i + step] * sol))
        return total


def _tree_levels(n: int, b: int) -> int:
    """Levels of ``Hierarchy(n, b)`` (with the root): the largest block shrinks to ⌈s/min(b, s)⌉ per level."""
    s, levels = n, 1
    while s > 1:
        s, levels = -(-s // min(b, s)), levels + 1
    return levels


def hierarchy_errors(gram: ArrayLike, branchings: Sequence[int] | None = None, *,
                     rows: bool = False) -> dict[int, tuple[int, float]]:
    """``{b: (Δ₁, tr(G (AᵀA)⁻¹))}`` for the trees ``Hierarchy(n, b, root=False)`` (default: every b in
    2..min(n, :data:`MAX_BRANCHING`) and n; b >= n is the identity strategy), exact, from the Gram matrix ``G = FᵀF`` alone, or from
    F itself (``rows=True``: ``gram`` is then F, d × n, and FᵀF is never formed: for d < n).

    Without the root, AᵀA is block diagonal over the top-level blocks B_k, each carrying the subtree
    ``Hierarchy(|B_k|, b, depth=levels − 1)`` (its own root measured), so ``tr(G (AᵀA)⁻¹) =
    Σ_k ⟨G[B_k, B_k], M_|B_k|⟩`` with at most two distinct sizes: M_s from one tree solve of s
    vectors, the sum over equal-size blocks in O(n·s) (``rows``: O(d·n·s)). When the top blocks
    split straight into cells (⌈n/b⌉ <= b: two measured levels), ``M_s = I − 11ᵀ/(s + 1)`` and the
    trace is ``tr G − Σ_k 1ᵀG[B_k, B_k]1/(|B_k| + 1)``, from a 2-D cumulative sum of G (``rows``: of
    F along its rows, ``1ᵀG[B, B]1 = ‖F[:, B]1‖²``) in O(b) (O(d·b)). All b up to n cost O(n² log n).
    """
    name = "F" if rows else "gram"
    G = as_real_array(name, gram).astype(np.float64)
    if G.ndim != 2 or (not rows and G.shape[0] != G.shape[1]) or G.size == 0 or not np.all(np.isfinite(G)):
        raise ValueError(f"{name} must be a finite non-empty {'matrix' if rows else 'square matrix FᵀF'}, "
                         f"got shape {G.shape}")
    n = G.shape[1]
    if branchings is None:
        branchings = _branchings(n)
    bs = [positive_int("branchings", b) for b in branchings]
    if any(b < 2 for b in bs):
        raise ValueError(f"branchings must hold integers >= 2, got {short_repr(list(branchings))}")
    trace = float(np.sum(G * G)) if rows else float(np.trace(G))
    out: dict[int, tuple[int, float]] = {}
    C: NDArray[np.float64] | None = None  # cumulative sums: of G in 2-D, or of F along its rows
    for b in bs:
        if n == 1:
            out[b] = (1, trace)
            continue
        k = min(b, n)
        q, r = divmod(n, k)  # r top blocks of q + 1 cells, then k − r of q
        levels = _tree_levels(n, b)
        if k == n:  # every top block a cell: the identity
            out[b] = (1, trace)
        elif q + (r > 0) <= b:
            if C is None:
                check_memory(name, None, 8 * 3 * (n + 1) * (G.shape[0] + 1))
                C = np.zeros((G.shape[0] + (not rows), n + 1))
                if rows:
                    np.cumsum(G, axis=1, out=C[:, 1:])
                else:
                    np.cumsum(np.cumsum(G, axis=0), axis=1, out=C[1:, 1:])
            sizes = q + (np.arange(k) < r)
            st = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            en = st + sizes
            S = np.sum((C[:, en] - C[:, st]) ** 2, axis=0) if rows else C[en, en] - C[st, en] - C[en, st] + C[st, st]
            out[b] = (2, trace - float(np.sum(S / (sizes + 1.0))))
        else:
            total, offset = 0.0, 0
            for s, count in ((q + 1, r), (q, k - r)):
                if count == 0:
                    continue
                tree = Hierarchy(s, b, depth=levels - 1)
                if rows:  # Σ_blocks tr(F_B M F_Bᵀ) by tree solves of F_B's rows: no s × s matrix
                    R = G[:, offset:offset + count * s].reshape(-1, s)
                    total += tree._trace(R, False)
                else:
                    block = G[offset:offset + count * s, offset:offset + count * s].reshape(count, s, count, s)
                    total += float(np.einsum("iaib,ab->", block, tree.inverse_gram()))
                offset += count * s
            out[b] = (levels - 1, total)
    return out


class HierarchicalMechanism(_Strategy):
    """The b-ary hierarchical strategy with least-squares inference (pure ε-DP).

    Every measured block sum of a :class:`Hierarchy` gets ``Lap(levels/ε)`` (Δ₁(A) = ``levels``,
    the measured levels), then ``x̂ = A⁺ y`` by the tree's two-pass least squares and the answers
    are ``F x̂``: the noise is ``F A⁺ z``, ``E‖F A⁺ z‖₂² = 2 (levels/ε)² ‖F A⁺‖_F²`` exactly.

    ``root=False`` (default): Qardaji et al.'s HB (ektelo's hierarchical), the tree without its
    root (whose total is the sum of its children's), one level less of sensitivity;
    ``branching=None`` then chooses b in 2..min(n, 8192) and n minimising the exact error
    (:func:`hierarchy_errors`, from FᵀF alone, or from F's rows when d < n: O(n² log n) for all b;
    b >= n is the identity). ``root=True``: the tree with
    its root (Hay et al.), b chosen in :data:`BRANCHINGS`. ``branching_errors`` holds every
    candidate's squared error (inf where it overflows float64; ties go to the smaller b).
    """

    def __init__(self, F: ArrayLike | ImplicitWorkload, *, epsilon: float, branching: int | None = None,
                 root: bool = False, rng: np.random.Generator | int | None = None,
                 accountant: BudgetAccountant | None = None) -> None:
        self._init_workload(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        check_flag("root", root)
        if branching is None:
            candidates = _branchings(self.n) if not root else \
                [b for b in BRANCHINGS if b <= max(2, self.n)]  # b >= n: the same 2-level tree
        else:
            candidates = [positive_int("branching", branching)]
            if candidates[0] < 2:
                raise ValueError(f"branching must be None or an integer >= 2, got {short_repr(branching)}")
        if root:
            rows = _rows_or_gram(self._unit_F()) if self.workload is None else (self._unit_gram(), True)
            found = {}
            for b in candidates:
                tree = Hierarchy(self.n, b)
                found[b] = (tree.levels, tree._trace(*rows))
        elif self.workload is None and self.d < self.n:  # a wide F: FᵀF (n × n) is never formed
            found = hierarchy_errors(self._unit_F(), candidates, rows=True)
        else:
            found = hierarchy_errors(self._unit_gram(), candidates)
        unit = {b: 2.0 * lv**2 * tr for b, (lv, tr) in found.items()}  # the squared error at unit scale, ε = 1
        self.branching_errors = {b: scaled(u, self._exp, self.epsilon, 2) for b, u in unit.items()}
        self.branching = min(candidates, key=lambda b: (unit[b], b))
        self.root = bool(root)
        self.tree = Hierarchy(self.n, self.branching, root=self.root)
        self.levels = self.tree.measured
        self._rows, self._what = self.tree.rows, "F A⁺ Lap(levels/ε)"
        self._set_noise(float(self.levels), found[self.branching][1])
        self._claim = PrivacyClaim("hierarchical strategy", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"strategy": "hierarchical", "branching": self.branching,
                                             "root": self.root, "levels": self.levels,
                                             "strategy_rows": self.tree.rows,
                                             "l1_sensitivity": self.sensitivity, "scale": self.scale})

    def strategy_matrix(self) -> sparse.csr_matrix:
        """The strategy A (sparse, one row per measured block); ``A⁺`` is :meth:`Hierarchy.solve`."""
        return self.tree.matrix()

    def _solve(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.tree.solve(z)


class PIdentityMechanism(_Strategy):
    """HDMM's p-Identity strategy for pure ε-DP: ``A = [I; Θ] D`` (n + p rows), Θ >= 0 (p × n),
    ``D`` scaling every column to ℓ₁ norm 1, so Δ₁(A) = 1 and ``y = Ax + Lap(1/ε)^{n+p}``.

    Θ minimises the exact error factor ``‖F A⁺‖_F² = tr(FᵀF (AᵀA)⁻¹)`` (:func:`p_identity_objective`),
    from FᵀF alone (at unit scale: F and 2^k·F give the same Θ), by L-BFGS-B with bounds Θ >= 0 from
    ``starts`` fixed starts (uniform [0, 1) entries as HDMM, each seed searched at two scales of the
    Gram matrix; None: 8 for n <= 256, 4 for n <= 512, else 1), the best kept: the same F gives the
    same strategy. Never worse than the identity strategy: Θ = 0 is kept unless the found Θ's exact error
    (``Δ₁²‖F A⁺‖_F²``, from A's QR) is strictly below the identity's ``‖F‖_F²``. Answers ``F x̂``, ``x̂ = A⁺y`` (from A's QR
    decomposition); noise ``F A⁺ z`` with ``E‖F A⁺ z‖₂² = 2/ε² ‖F A⁺‖_F²`` exactly. ``p=None``:
    max(1, n // 16) (HDMM's choice); at most n.

    ``theta``: a Θ found before (``m.theta`` of an earlier search on this F, as a prepared workload
    keeps it for :func:`knorm.recommend`): used as it is, no search (``starts`` 0; ``maxiter`` and
    ``starts`` are then not used).

    Cost: O(n²p) per L-BFGS-B step, at most ``maxiter`` steps per start, and about 8n² floats of
    memory (the Gram matrix and its working copies): with p = n/16 and one BLAS thread, one start
    took 0.7 s at n = 256, 2.9 s at 512, 13 s at 1024 and 74 s at 2048 (prefix, 500 steps;
    ``scripts/strategy_cost.py --cost``).
    """

    def __init__(self, F: ArrayLike | ImplicitWorkload, *, epsilon: float, p: int | None = None, maxiter: int = 500,
                 starts: int | None = None, rng: np.random.Generator | int | None = None,
                 accountant: BudgetAccountant | None = None, theta: ArrayLike | None = None) -> None:
        self._init_workload(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        if theta is not None:
            theta = _check_theta(theta, self.n, p)
            p = theta.shape[0]
        self.p = max(1, self.n // 16) if p is None else positive_int("p", p)
        if self.p > self.n:
            raise ValueError(f"p must be an integer in [1, n = {self.n}] (extra strategy rows; the search costs "
                             f"O(p³ + n²p) per step), got {short_repr(p)}")
        self.maxiter = positive_int("maxiter", maxiter)
        self.starts = _check_starts(starts, self.n)
        n, p = self.n, self.p
        check_memory("p", self.p, 8 * (8 * n * n + 4 * p * n + 3 * p * p))
        gram = self._unit_gram()
        if theta is None:
            theta, _, info = _search_p_identity(gram, p, self.maxiter, self.starts)
        else:  # given (an earlier search's, e.g. a prepared workload's): no search
            self.starts = 0
            info = {"iterations": 0, "converged": True, "message": "given theta", "start_objectives": []}
        self.theta = theta
        value, self._solver = _p_identity_solver(theta, gram)
        # ‖F A⁺‖_F² at unit scale (times 4^scale_exponent in F's units)
        self.optimization = {"objective": value, "scale_exponent": self._exp, **info}
        self._rows, self._what = self.n + self.p, "F A⁺ Lap(1/ε)"
        self._set_noise(float(np.max(np.abs(self.strategy_matrix()).sum(axis=0))), value)  # Δ₁: 1 up to rounding
        if self.starts and self._worse_than_identity():  # a search ending above the identity: Θ = 0
            self.theta, self._solver = np.zeros((p, n)), lambda z: z[:, :n]
            self.optimization.update(objective=self._identity_unit(), message="identity")
            self._set_noise(1.0, self._identity_unit())
        self._claim = PrivacyClaim("p-Identity strategy", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"strategy": "p-identity", "p": p, "l1_sensitivity": self.sensitivity,
                                             "scale": self.scale, "iterations": info["iterations"],
                                             "starts": self.starts})

    def strategy_matrix(self) -> NDArray[np.float64]:
        """The strategy ``A = [I; Θ] / c`` (dense, (n + p) × n), ``c = 1 + 1ᵀΘ``."""
        return np.vstack([np.eye(self.n), self.theta]) / (1.0 + self.theta.sum(axis=0))

    def _solve(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._solver(z)


def _kron_apply(mats: Sequence[NDArray[np.float64]], z: NDArray[np.float64],
                shape: Sequence[int]) -> NDArray[np.float64]:
    """``(⊗_i M_i) z`` for every row of z (of length Π shape): M_i along axis i of the C-order array."""
    Z = z.reshape((len(z),) + tuple(shape))
    for i, M in enumerate(mats):
        Z = _matmul_along(M, Z, i + 1)
    return Z.reshape(len(z), -1)


class KroneckerStrategyMechanism(_Strategy):
    """Laplace noise on a Kronecker-product strategy ``A = A_1 ⊗ … ⊗ A_m`` over the product domain of
    F (``F.shape`` of an implicit workload; an explicit F is one attribute), pure ε-DP.

    ``y = Ax + Lap(Δ₁/ε)^s`` with ``Δ₁(A) = Π_i Δ₁(A_i)`` (column ℓ₁ norms multiply), ``x̂ = A⁺y`` with
    ``A⁺ = ⊗_i A_i⁺`` applied attribute by attribute (no n × n matrix). Exact error from the
    per-attribute Gram matrices: for ``F = ∪_j ⊗_i W_ji``, ``E‖F A⁺z‖₂² = 2(Δ₁/ε)² Σ_j Π_i
    tr(W_jiᵀW_ji (A_iᵀA_i)⁻¹)``. ``strategies``: one full-column-rank matrix per attribute (dense
    or scipy sparse, n_i columns). With one attribute (an explicit F) this is the matrix mechanism
    on any strategy ``A``: ``KroneckerStrategyMechanism(F, epsilon=ε, strategies=[A])``.
    """

    def __init__(self, F: ArrayLike | ImplicitWorkload, *, epsilon: float, strategies: Sequence[ArrayLike],
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        self._init_workload(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        if isinstance(strategies, (str, bytes)) or not isinstance(strategies, Sequence) or \
                len(strategies) != len(self.shape):
            raise ValueError(f"strategies must be a sequence of {len(self.shape)} matrices (one per attribute of the "
                             f"domain {self.shape}), got {short_repr(strategies)}")
        mats = []
        for i, S in enumerate(strategies):
            dense = S.toarray() if sparse.issparse(S) else S  # type: ignore[union-attr]
            A = validate_matrix(dense, f"strategies[{i}]")
            if A.shape[1] != self.shape[i]:
                raise ValueError(f"strategies[{i}] must have {self.shape[i]} columns, got shape {A.shape}")
            mats.append(A)
        self._set_strategies(mats, "Kronecker strategy", {"strategy": "kronecker"})

    def _set_strategies(self, mats: list[NDArray[np.float64]], label: str, details: dict[str, Any]) -> None:
        pinvs: list[NDArray[np.float64]] = []
        inverses: list[NDArray[np.float64]] = []
        for i, A in enumerate(mats):
            check_memory(f"strategies[{i}]", None, 8 * 4 * A.shape[0] * A.shape[1])
            P = np.asarray(np.linalg.pinv(A), dtype=np.float64)
            if np.linalg.matrix_rank(A) < A.shape[1]:
                raise ValueError(f"strategies[{i}] must have full column rank {A.shape[1]} (every cell estimable)")
            pinvs.append(P)
            inverses.append(P @ P.T)  # (AᵀA)⁻¹ = A⁺A⁺ᵀ
        self.strategies, self._pinvs = mats, pinvs
        self._rows = math.prod(A.shape[0] for A in mats)
        self._what = "F A⁺ Lap(Δ₁/ε)"
        with np.errstate(over="ignore"):
            sens = float(np.prod([np.max(np.abs(A).sum(axis=0)) for A in mats]))
        self._set_noise(sens, self._kron_trace(inverses))
        self._claim = PrivacyClaim(label, self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={**details, "strategy_rows": self._rows,
                                             "l1_sensitivity": self.sensitivity, "scale": self.scale})

    def _identity_unless_better(self, label: str, details: dict[str, Any]) -> bool:
        """The identity strategy ``⊗ I`` (its error exactly :class:`IdentityMechanism`'s) in place of a
        searched one whose exact error is not strictly below it; whether it fell back."""
        if not self._worse_than_identity():
            return False
        self._set_strategies([np.eye(s) for s in self.shape], label, details)
        self._set_noise(1.0, self._identity_unit())
        return True

    def _kron_trace(self, inverses: Sequence[NDArray[np.float64]]) -> float:
        """``Σ_j w_j Π_i ⟨G_ji, X_i⟩`` (unit scale): ``‖F A⁺‖_F²·4^-e`` for ``X_i = (A_iᵀA_i)⁻¹``."""
        if self.workload is not None:
            return self.workload.kron_trace(inverses)
        return float(np.vdot(self._unit_gram(), inverses[0]))

    def strategy_matrix(self) -> NDArray[np.float64]:
        """The strategy ``⊗_i A_i`` (dense; memory checked)."""
        check_memory("strategies", None, 8 * 2 * self._rows * self.n)
        return _kron_all(self.strategies)

    def _solve(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        return _kron_apply(self._pinvs, z, [A.shape[0] for A in self.strategies])


def _kron_descent(terms: list[tuple[float, list[NDArray[np.float64]]]], rounds: int,
                  choose: Callable[[int, NDArray[np.float64]], tuple[Any, NDArray[np.float64], float]]
                  ) -> tuple[list[Any], float, int]:
    """Block coordinate descent (as HDMM's Kronecker templates) of ``Π_i s_i² · Σ_j w_j Π_i ⟨G_ji, X_i⟩``
    over per-attribute strategies, from the identity (X_i = I, s_i = 1): for attribute i with the
    others fixed the objective is ``s_i²⟨Ĝ_i, X_i⟩``, ``Ĝ_i = Σ_j w_j Π_{l≠i} ⟨G_jl, X_l⟩ G_ji`` (one
    product: G_i itself; a union: scaled to mean entry 1), and ``choose(i, Ĝ_i)`` returns a strategy
    ``(payload, X_i = (A_iᵀA_i)⁻¹, s_i = Δ₁(A_i))``, kept when it lowers the total. One round for one
    product, up to ``rounds`` for a union (stopping when a round gains under 10⁻⁶). Returns
    ``(payloads (None: identity), objective, rounds done)``."""
    m = len(terms[0][1])
    w = np.array([t[0] for t in terms])
    C = np.array([[float(np.trace(Gs[i])) for _, Gs in terms] for i in range(m)])  # ⟨G_ji, X_i⟩
    sens = np.ones(m)
    total = float(np.sum(w * C.prod(axis=0)))
    payloads: list[Any] = [None] * m
    done = 0
    for _ in range(rounds if len(terms) > 1 else 1):
        before = total
        for i in range(m):
            rest = w * np.prod(np.delete(C, i, axis=0), axis=0)
            if len(terms) == 1:
                Gh = terms[0][1][i]
            else:
                Gh = sum(c * Gs[i] for c, (_, Gs) in zip(rest, terms))
                Gh = Gh / np.abs(Gh).mean()
            payload, X, s = choose(i, Gh)
            Ci = np.array([float(np.vdot(Gs[i], X)) for _, Gs in terms])
            new = float(s**2 * np.prod(np.delete(sens, i)) ** 2 * np.sum(rest * Ci))
            if new < total:
                payloads[i], C[i], sens[i], total = payload, Ci, s, new
        done += 1
        if not total < before * (1 - 1e-6):
            break
    return payloads, total, done


class KroneckerPIdentityMechanism(KroneckerStrategyMechanism):
    """HDMM's Kronecker p-Identity: ``A = ⊗_i A_i`` with one p-Identity strategy ``A_i = [I; Θ_i]/c_i``
    per attribute (Δ₁ = 1), pure ε-DP; release and errors as :class:`KroneckerStrategyMechanism`.

    The error factor ``Σ_j w_j Π_i ⟨G_ji, (A_iᵀA_i)⁻¹⟩`` is minimised by block coordinate descent
    over the attributes (as HDMM): with the others fixed it is ``⟨Ĝ_i, (A_iᵀA_i)⁻¹⟩``, ``Ĝ_i = Σ_j
    w_j (Π_{l≠i} ⟨G_jl, (A_lᵀA_l)⁻¹⟩) G_ji``, a p-Identity search on Ĝ_i (:class:`PIdentityMechanism`'s,
    ``starts`` and ``maxiter`` likewise), kept when it lowers the total; one round for a single
    Kronecker product, up to ``rounds`` for a union (stopping when a round gains under 10⁻⁶).
    Never worse than the identity: the result's exact error (from the pseudo-inverses) is compared
    with :class:`IdentityMechanism`'s, and ``⊗ I`` (Θ_i = 0) kept unless it is strictly below.
    ``p``: None (max(1, n_i // 16) per attribute), one int for all, or one per attribute.
    """

    def __init__(self, F: ArrayLike | ImplicitWorkload, *, epsilon: float, p: int | Sequence[int] | None = None,
                 maxiter: int = 500, starts: int | None = None, rounds: int = 10,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        self._init_workload(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        shape = self.shape
        if p is None:
            ps = [max(1, s // 16) for s in shape]
        elif isinstance(p, Sequence) and not isinstance(p, (str, bytes)):
            if len(p) != len(shape):
                raise ValueError(f"p must be None, an integer or {len(shape)} integers (one per attribute), got "
                                 f"{short_repr(p)}")
            ps = [positive_int(f"p[{i}]", v) for i, v in enumerate(p)]
        else:
            ps = [positive_int("p", p)] * len(shape)
        if any(q > s for q, s in zip(ps, shape)):
            raise ValueError(f"p must be at most each attribute's size {shape}, got {short_repr(p)}")
        self.p = ps
        self.maxiter = positive_int("maxiter", maxiter)
        self.rounds = positive_int("rounds", rounds)
        self.starts = [_check_starts(starts, s) for s in shape]
        check_memory("p", ps, 8 * sum(8 * s * s + 4 * q * s + 3 * q * q for q, s in zip(ps, shape)))
        cache: list[tuple[int, NDArray[np.float64], NDArray[np.float64]]] = []
        iterations = 0

        def choose(i: int, Gh: NDArray[np.float64]) -> tuple[Any, NDArray[np.float64], float]:
            nonlocal iterations
            hit = [t for q, G, t in cache if q == ps[i] and G.shape == Gh.shape and np.array_equal(G, Gh)]
            if hit:
                theta = hit[0]
            else:
                theta, _, info = _search_p_identity(Gh, ps[i], self.maxiter, self.starts[i])
                iterations += info["iterations"]
                cache.append((ps[i], Gh, theta))
            return theta, p_identity_inverse(theta), 1.0
        terms = self._unit_terms()
        found, total, done = _kron_descent(terms, self.rounds, choose)
        self.thetas = [np.zeros((q, s)) if t is None else t for q, s, t in zip(ps, shape, found)]
        self.optimization = {"objective": total, "scale_exponent": self._exp, "rounds": done,
                             "iterations": iterations}
        mats = [np.vstack([np.eye(s), t]) / (1.0 + t.sum(axis=0)) for s, t in zip(shape, self.thetas)]
        details = {"strategy": "kronecker p-identity", "p": list(ps), "rounds": done}
        self._set_strategies(mats, "Kronecker p-Identity strategy", details)
        if self._identity_unless_better("Kronecker p-Identity strategy", details):
            self.thetas = [np.zeros((q, s)) for q, s in zip(ps, shape)]
            self.optimization["objective"] = self._identity_unit()


class KroneckerHierarchicalMechanism(KroneckerStrategyMechanism):
    """One hierarchical tree per attribute (:class:`Hierarchy` without its root, HB), combined by
    Kronecker product: ``A = ⊗_i A_i``, Δ₁ = Π_i levels_i, pure ε-DP; release and errors as
    :class:`KroneckerStrategyMechanism` (the tree over flattened cells ignores a product domain).

    The branchings minimise the exact error ``Π_i levels_i² · Σ_j w_j Π_i tr(G_ji (A_iᵀA_i)⁻¹)`` by
    block coordinate descent over the attributes (as :class:`KroneckerPIdentityMechanism`), each
    step exact over every b in 2..n_i (:func:`hierarchy_errors`; b >= n_i: that attribute's identity);
    the identity ``⊗ I`` is kept unless the result's exact error is strictly below the identity's.
    ``branchings``: the per-attribute b found.
    """

    def __init__(self, F: ArrayLike | ImplicitWorkload, *, epsilon: float, rounds: int = 10,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        self._init_workload(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.rounds = positive_int("rounds", rounds)
        shape = self.shape
        check_memory("F", None, 8 * sum(12 * s * s for s in shape))

        def choose(i: int, Gh: NDArray[np.float64]) -> tuple[Any, NDArray[np.float64], float]:
            errs = hierarchy_errors(Gh)
            b = min(errs, key=lambda c: (errs[c][0] ** 2 * errs[c][1], c))
            tree = Hierarchy(shape[i], b, root=False)
            return tree, tree.inverse_gram(), float(tree.measured)
        found, total, done = _kron_descent(self._unit_terms(), self.rounds, choose)
        trees = [Hierarchy(s, max(2, s), root=False) if t is None else t  # b >= n: the identity
                 for s, t in zip(shape, found)]
        self.branchings = [t.branching for t in trees]
        self.optimization = {"objective": total, "scale_exponent": self._exp, "rounds": done}
        details = {"strategy": "kronecker hierarchical", "branchings": self.branchings,
                   "levels": [t.measured for t in trees], "rounds": done}
        self._set_strategies([t.matrix().toarray() for t in trees], "Kronecker hierarchical strategy", details)
        ident = [max(2, s) for s in shape]  # b >= n: the identity
        if self._identity_unless_better("Kronecker hierarchical strategy", {**details, "branchings": ident,
                                                                            "levels": [1] * len(shape)}):
            self.branchings = ident
            self.optimization["objective"] = self._identity_unit()
