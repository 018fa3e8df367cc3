"""Strategy (matrix-mechanism) baselines, pure ε-DP (issue 10, docs/design.md §4).

A strategy ``A`` (s × n) is answered with Laplace noise, ``y = Ax + Lap(Δ₁(A)/ε)^s``, and the
workload answers are ``F x̂`` with the least-squares estimate ``x̂ = A⁺ y``. For a full
column rank A that is ``Fx + F A⁺ z``: the noise ``F A⁺ z`` never depends on x, and

    E‖F A⁺ z‖₂² = 2 (Δ₁/ε)² ‖F A⁺‖_F²  (exact).

* :class:`IdentityMechanism`: ``A = I`` (Δ₁ = 1), noise ``F·Lap(1/ε)ⁿ``.
* :class:`HierarchicalMechanism`: a b-ary tree of contiguous blocks (Hay et al. 2010),
  Δ₁ = number of levels, with the exact O(n) two-pass least squares over the tree.
* :class:`PIdentityMechanism`: HDMM's p-Identity strategy ``A = [I; Θ] D`` (McKenna et al.
  2018) with Δ₁ = 1, Θ >= 0 optimised for the workload by L-BFGS-B.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg, optimize, sparse

from ..privacy import BudgetAccountant

from .._validate import as_real_array, check_memory, positive_int
from ..body.hull import validate_matrix
from ._base import (CHUNK_BYTES, ErrorEstimate, Mechanism, PrivacyClaim, check_epsilon, check_finite_output,
                    check_noise_scale, check_size, in_float_range, mc_expected_norm, scaled, unit_exponent)

__all__ = ["IdentityMechanism", "HierarchicalMechanism", "PIdentityMechanism", "Hierarchy", "BRANCHINGS",
           "p_identity_objective"]

BRANCHINGS = tuple(range(2, 17))  # branching factors tried when ``branching=None``


def _vectors(name: str, value: ArrayLike, width: int) -> NDArray[np.float64]:
    """``value`` as finite float64 of shape (width,) or (m, width), else a ValueError naming ``name``."""
    arr = as_real_array(name, value)
    if arr.ndim not in (1, 2) or arr.shape[-1] != width:
        raise ValueError(f"{name} must have shape ({width},) or (m, {width}), got {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _finite(name: str, out: NDArray[np.float64]) -> NDArray[np.float64]:
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} is too large: the result overflows float64")
    return out


def _rows_or_gram(F: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
    """``(F, False)``, or ``(FᵀF, True)`` when F has more rows than columns (for :meth:`Hierarchy.error_factor`)."""
    return (F.T @ F, True) if F.shape[0] > F.shape[1] else (F, False)


class _Strategy(Mechanism):
    """What the strategies share: noise ``F A⁺ z``, ``z ~ Lap(Δ₁/ε)`` on every row of A, and its
    errors from the exact factor ``‖F A⁺‖_F²`` computed on ``F·2^-e`` (unit scale: no square of F's
    scale or of 1/ε is ever formed, so any scale and any ε whose noise fits float64 work)."""

    epsilon: float
    sensitivity: float
    scale: float
    _exp: int           # F = 2^e·(F at unit scale)
    _error_unit: float  # ‖F·2^-e A⁺‖_F²
    _width: int         # floats held per noise draw
    _what: str          # the noise, for the Monte-Carlo method string

    def _unit_F(self) -> NDArray[np.float64]:
        return np.ldexp(self.F, -self._exp)

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
    def _unit_noise(self, rng: np.random.Generator, m: int) -> NDArray[np.float64]:
        """m draws of ``F·2^-e A⁺ z₁``, ``z₁ ~ Lap(1)`` on every row of A."""

    def expected_error(self, n_samples: int = 20_000) -> ErrorEstimate:
        """``E‖F A⁺ z‖₂``: no closed form; Monte Carlo over exact Laplace draws (unit scale, then scaled)."""
        rng = np.random.default_rng(self._rng.integers(2**63))
        factor = scaled(self.sensitivity, self._exp, self.epsilon)
        return mc_expected_norm(lambda m: self._unit_noise(rng, m), n_samples, self._width, factor,
                                f"Monte Carlo, {n_samples} exact draws of {self._what}")


class IdentityMechanism(_Strategy):
    """The identity strategy: ``x̂ = x + Lap(1/ε)ⁿ``, answers ``F x̂`` (pure ε-DP, Δ₁(I) = 1).

    Noise ``F w``, ``w ~ Lap(1/ε)ⁿ``; ``E‖F w‖₂² = 2/ε² · ‖F‖_F²`` exactly. For an injective
    F this is also the K-norm mechanism of F (``‖Fw‖_K = ‖w‖₁``).
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, rng: np.random.Generator | int | None = None,
                 accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self._exp, self._width, self._what = unit_exponent(self.F), max(self.n, self.d), "F·Lap(1/ε)ⁿ"
        self._set_noise(1.0, float(np.sum(self._unit_F() ** 2)))
        self._claim = PrivacyClaim("identity strategy", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"strategy": "identity", "l1_sensitivity": 1.0, "scale": self.scale})

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, max(self.d, self.n))
        w = self._rng.laplace(0.0, self.scale, size=(m or 1, self.n))
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow raises in check_finite_output
            noise = w @ self.F.T
        return self._one_or_many(check_finite_output(noise, "the noise"), m)

    def _unit_noise(self, rng: np.random.Generator, m: int) -> NDArray[np.float64]:
        return rng.laplace(0.0, 1.0, size=(m, self.n)) @ self._unit_F().T


class Hierarchy:
    """A b-ary hierarchy of nested partitions of the cells ``0..n-1`` into contiguous blocks.

    Level 0 is one block ``[0, n)``; each block of level ℓ of size s > 1 splits into
    min(b, s) near-equal contiguous blocks (sizes ⌈s/k⌉ first, then ⌊s/k⌋) at level ℓ+1; a
    single cell is carried down unchanged, so every level is a partition and the last is
    all singletons. Every cell lies in exactly one block per level: the strategy ``A`` (one
    row per block, levels stacked) has ℓ₁ sensitivity ``levels = ⌈log_b n⌉ + 1``. For
    ``n = b^k`` this is the classic tree; otherwise the carried singletons are extra
    measurements at no cost in sensitivity.
    """

    def __init__(self, n: int, branching: int) -> None:
        self.n = positive_int("n", n)
        self.branching = positive_int("branching", branching)
        if self.branching < 2:
            raise ValueError(f"branching must be an integer >= 2, got {branching!r}")
        check_memory("n", self.n, 8 * 16 * self.n)  # the levels' arrays: about 2n entries each
        b = min(self.branching, max(2, self.n))  # b >= n: the same 2-level tree
        parents: list[Any]
        firsts: list[Any]
        sizes, starts, parents, firsts, nkids = [np.array([self.n])], [np.array([0])], [None], [None], []
        while sizes[-1].max() > 1:
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
        self.counts = [len(s) for s in sizes]
        self.rows = int(sum(self.counts))
        # variances (in units of one measurement's) of the bottom-up estimates of each block's
        # total from the measurements inside the block: leaves 1, then V = S/(S+1), S = Σ_children V
        V: list[Any] = [None] * self.levels
        S: list[Any] = [None] * self.levels
        V[-1] = np.ones(self.n)
        for lev in range(self.levels - 2, -1, -1):
            S[lev] = np.add.reduceat(V[lev + 1], self.firsts[lev + 1])
            V[lev] = S[lev] / (S[lev] + 1.0)
        self._V, self._S = V, S
        # top-down share of a block's correction that goes to each child: V_c / S_parent
        self._share = [None] + [V[lev + 1] / S[lev][parents[lev + 1]] for lev in range(self.levels - 1)]

    def matrix(self) -> sparse.csr_matrix:
        """The strategy A as a sparse ``(rows, n)`` 0/1 matrix (levels stacked, root first)."""
        rows, offset = [], 0
        for lev in range(self.levels):
            rows.append(offset + np.repeat(np.arange(self.counts[lev]), self.sizes[lev]))
            offset += self.counts[lev]
        cols = np.tile(np.arange(self.n), self.levels)
        return sparse.csr_matrix((np.ones(len(cols)), (np.concatenate(rows), cols)), shape=(self.rows, self.n))

    def measure(self, x: ArrayLike) -> NDArray[np.float64]:
        """``A x`` for x of shape (n,) or (m, n): the block sums, levels stacked."""
        x = _vectors("x", x, self.n)
        with np.errstate(over="ignore", invalid="ignore"):
            return _finite("x", np.concatenate([np.add.reduceat(x, st, axis=-1) for st in self.starts], axis=-1))

    def solve(self, y: ArrayLike) -> NDArray[np.float64]:
        """``x̂ = A⁺ y`` for y of shape (rows,) or (m, rows): exact least squares in O(rows) per vector.

        Two passes (Hay et al. 2010, for any tree): bottom-up, each block's total is estimated
        from the measurements inside it, ``z_u = (S_u y_u + Σ_c z_c)/(S_u + 1)``; top-down, the
        final total ``v_u`` is split among the children, ``v_c = z_c + V_c/S_u · (v_u − Σ z_c)``.
        This is the posterior mean of a linear Gaussian model on a tree, i.e. the
        least-squares solution (A has full column rank: the last level is the identity).
        """
        y = _vectors("y", y, self.rows)  # one entry per block
        bounds = np.cumsum([0] + self.counts)
        with np.errstate(over="ignore", invalid="ignore"):
            return _finite("y", self._solve([y[..., bounds[lev]:bounds[lev + 1]] for lev in range(self.levels)]))

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
            own = 0.0 if ys[lev] is None else ys[lev] * self._S[lev]
            z[lev] = (own + sums[lev]) / (self._S[lev] + 1.0)
        v = z[0]
        for lev in range(L - 1):  # children of a block are contiguous: np.repeat broadcasts to them
            v = z[lev + 1] + self._share[lev + 1] * np.repeat(v - sums[lev], self._nkids[lev], axis=-1)
        return v

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


class HierarchicalMechanism(_Strategy):
    """The b-ary hierarchical strategy with least-squares inference (pure ε-DP).

    Every block sum of a :class:`Hierarchy` gets ``Lap(levels/ε)`` (Δ₁(A) = levels), then
    ``x̂ = A⁺ y`` by the tree's two-pass least squares and the answers are ``F x̂``: the noise
    is ``F A⁺ z``, ``E‖F A⁺ z‖₂² = 2 (levels/ε)² ‖F A⁺‖_F²`` exactly. ``branching=None``
    chooses b in :data:`BRANCHINGS` minimising that exact error, a function of F alone
    (``branching_errors`` holds every candidate's, inf where it overflows float64; ties go to
    the smaller b).
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, branching: int | None = None,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        if branching is None:
            candidates = [b for b in BRANCHINGS if b <= max(2, self.n)]  # b >= n: the same 2-level tree
        else:
            candidates = [positive_int("branching", branching)]
            if candidates[0] < 2:
                raise ValueError(f"branching must be None or an integer >= 2, got {branching!r}")
        self._exp = unit_exponent(self.F)
        rows = _rows_or_gram(self._unit_F())
        traces, unit, trees = {}, {}, {}
        for b in candidates:
            tree = trees[b] = Hierarchy(self.n, b)
            traces[b] = tree._trace(*rows)
            unit[b] = 2.0 * tree.levels**2 * traces[b]  # the squared error at unit scale and ε = 1
        self.branching_errors = {b: scaled(u, self._exp, self.epsilon, 2) for b, u in unit.items()}
        self.branching = min(candidates, key=lambda b: (unit[b], b))
        self.tree = trees[self.branching]
        self.levels = self.tree.levels
        self._width, self._what = max(self.d, 2 * self.tree.rows), "F A⁺ Lap(levels/ε)"
        self._set_noise(float(self.levels), traces[self.branching])
        self._claim = PrivacyClaim("hierarchical strategy", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"strategy": "hierarchical", "branching": self.branching,
                                             "levels": self.levels, "strategy_rows": self.tree.rows,
                                             "l1_sensitivity": self.sensitivity, "scale": self.scale})

    def strategy_matrix(self) -> sparse.csr_matrix:
        """The strategy A (sparse, one row per block); ``A⁺`` is :meth:`Hierarchy.solve`."""
        return self.tree.matrix()

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        """``F A⁺ z`` with ``z ~ Lap(levels/ε)`` on every block: (d,) or (size, d)."""
        m = check_size(size, max(self.d, 2 * self.tree.rows))
        z = self._rng.laplace(0.0, self.scale, size=(m or 1, self.tree.rows))
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow raises in check_finite_output
            noise = self.tree.solve(z) @ self.F.T
        return self._one_or_many(check_finite_output(noise, "the noise"), m)

    def _unit_noise(self, rng: np.random.Generator, m: int) -> NDArray[np.float64]:
        return self.tree.solve(rng.laplace(0.0, 1.0, size=(m, self.tree.rows))) @ self._unit_F().T


def p_identity_objective(theta: NDArray[np.float64],
                         gram: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """``f(Θ) = ‖F A⁺‖_F² = trace(FᵀF (AᵀA)⁻¹)`` for ``A = [I; Θ] D``, ``D = diag(1/c)``,
    ``c = 1 + 1ᵀΘ`` (every column of A has ℓ₁ norm 1), and its gradient in Θ.

    With ``Ĝ = diag(c) FᵀF diag(c)`` and ``X = I + ΘᵀΘ``: ``f = trace(X⁻¹Ĝ)``, ``X⁻¹ = I − Θᵀ(I +
    ΘΘᵀ)⁻¹Θ`` (Woodbury: O(n²p), not O(n³)); ``∇f = 2·1 qᵀ − 2 Θ X⁻¹ Ĝ X⁻¹`` with
    ``q_j = (X⁻¹Ĝ)_jj / c_j``. Returns ``(f, ∇f)``.
    """
    theta, gram = as_real_array("theta", theta).astype(np.float64), as_real_array("gram", gram).astype(np.float64)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or not np.all(np.isfinite(gram)):
        raise ValueError(f"gram must be a finite square matrix FᵀF, got shape {gram.shape}")
    if theta.ndim != 2 or theta.shape[1] != gram.shape[0] or not np.all(np.isfinite(theta)) or np.any(theta < 0):
        raise ValueError(f"theta must be a finite (p, {gram.shape[0]}) matrix with entries >= 0, got shape "
                         f"{theta.shape}")
    c = 1.0 + theta.sum(axis=0)
    Gh = gram * np.outer(c, c)
    chol = linalg.cho_factor(np.eye(len(theta)) + theta @ theta.T)
    W = Gh - theta.T @ linalg.cho_solve(chol, theta @ Gh)  # X⁻¹ Ĝ
    TW = theta @ W
    TM = TW - (TW @ theta.T) @ linalg.cho_solve(chol, theta)  # Θ X⁻¹ Ĝ X⁻¹
    grad = 2.0 * (np.diag(W) / c)[None, :] - 2.0 * TM
    return float(np.trace(W)), grad


class PIdentityMechanism(_Strategy):
    """HDMM's p-Identity strategy for pure ε-DP: ``A = [I; Θ] D`` (n + p rows), Θ >= 0 (p × n),
    ``D`` scaling every column to ℓ₁ norm 1, so Δ₁(A) = 1 and ``y = Ax + Lap(1/ε)^{n+p}``.

    Θ minimises the exact error factor ``‖F A⁺‖_F²`` (:func:`p_identity_objective`), from F
    alone (at unit scale: Θ does not depend on F's scale), by L-BFGS-B with bounds Θ >= 0 from
    a fixed start (uniform [0, 1) entries, seed 0, as HDMM): the same F gives the same strategy.
    Θ = 0 (the identity strategy) is kept if the search ends worse. Answers ``F x̂``, ``x̂ = A⁺y``;
    noise ``F A⁺ z`` with ``E‖F A⁺ z‖₂² = 2/ε² ‖F A⁺‖_F²`` exactly. ``p=None``: max(1, n // 16)
    (HDMM's choice); at most n. The search costs O(n²p) per step: seconds at n = 256, about 20 s
    at n = 1024 with one BLAS thread (``maxiter`` bounds it).
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, p: int | None = None, maxiter: int = 500,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.p = max(1, self.n // 16) if p is None else positive_int("p", p)
        if self.p > self.n:
            raise ValueError(f"p must be an integer in [1, n = {self.n}] (extra strategy rows; the search costs "
                             f"O(p³ + n²p) per step), got {p!r}")
        self.maxiter = positive_int("maxiter", maxiter)
        n, p = self.n, self.p
        check_memory("p", self.p, 8 * (6 * n * n + 4 * p * n + 2 * n * (n + p) + 3 * p * p))
        self._exp = unit_exponent(self.F)
        Fu = self._unit_F()
        gram = Fu.T @ Fu
        start = np.random.default_rng(0).random(p * n)
        def fun(t: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            f, g = p_identity_objective(t.reshape(p, n), gram)
            return f, g.ravel()
        res = optimize.minimize(fun, start, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * (p * n),
                                options={"maxiter": self.maxiter})
        theta = np.maximum(res.x.reshape(p, n), 0.0)
        value = p_identity_objective(theta, gram)[0]
        identity = float(np.trace(gram))  # Θ = 0: ‖F‖_F²
        if not value < identity:
            theta, value = np.zeros((p, n)), identity
        self.theta = theta
        # ‖F A⁺‖_F² of the search at unit scale (times 4^scale_exponent in F's units)
        self.optimization = {"objective": value, "identity_objective": identity, "scale_exponent": self._exp,
                             "iterations": int(res.nit), "converged": bool(res.success), "message": str(res.message)}
        A = self.strategy_matrix()
        self._pinv = np.linalg.pinv(A)  # A⁺, n × (n + p); A has full column rank (its top block is D)
        self._width, self._what = max(self.d, self.n + self.p), "F A⁺ Lap(1/ε)"
        self._set_noise(float(np.max(np.abs(A).sum(axis=0))),  # 1 up to rounding
                        float(np.sum((Fu @ self._pinv) ** 2)))
        self._claim = PrivacyClaim("p-Identity strategy", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"strategy": "p-identity", "p": p, "l1_sensitivity": self.sensitivity,
                                             "scale": self.scale, "iterations": int(res.nit)})

    def strategy_matrix(self) -> NDArray[np.float64]:
        """The strategy ``A = [I; Θ] / c`` (dense, (n + p) × n), ``c = 1 + 1ᵀΘ``."""
        return np.vstack([np.eye(self.n), self.theta]) / (1.0 + self.theta.sum(axis=0))

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        """``F A⁺ z`` with ``z ~ Lap(Δ₁/ε)^{n+p}``: (d,) or (size, d)."""
        m = check_size(size, max(self.d, self.n + self.p))
        z = self._rng.laplace(0.0, self.scale, size=(m or 1, self.n + self.p))
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow raises in check_finite_output
            noise = (z @ self._pinv.T) @ self.F.T
        return self._one_or_many(check_finite_output(noise, "the noise"), m)

    def _unit_noise(self, rng: np.random.Generator, m: int) -> NDArray[np.float64]:
        return (rng.laplace(0.0, 1.0, size=(m, self.n + self.p)) @ self._pinv.T) @ self._unit_F().T
