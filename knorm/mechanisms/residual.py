"""Optimal Gaussian strategies under (ε, δ): marginals by residuals, any F by the SVD bound
(issue 29, docs/design.md §4.5).

Both answer a strategy with Gaussian noise and return ``F x̂`` (the least-squares estimate);
the noise never depends on x and the claim is a Gaussian mechanism's, exact: the released
answers are post-processing of strategy answers whose Mahalanobis sensitivity is ``μ``
(μ-GDP), and μ is the largest with ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) <= δ`` (the
analytic calibration of :func:`knorm.mechanisms.analytic_gaussian_sigma`, μ = 1/σ₁); the same
strategy is ``ρ = μ²/2`` zCDP.

* :class:`ResidualGaussianMechanism` (ResidualPlanner, Xiao, He, Zhang & Kifer, NeurIPS 2023;
  implemented from the paper's mathematics): for a marginal workload over attribute sizes
  ``n_i`` (recognised from F's entries, rows in any order, :func:`marginal_plan`), measure for
  every attribute set S below a workload clique the residual ``R_S x`` (the S-table with its
  means along every attribute of S removed) with noise ``σ_S·⊗_{i∈S} P_i g``,
  ``P_i = I − 11ᵀ/n_i``. Per unit of 1/σ_S² it costs ``p_S = Π_{i∈S}(n_i − 1)/n_i`` of μ²
  and the marginal A (weight ``w_A``: how many times F holds its table) is rebuilt with
  variance ``Σ_{S⊆A} σ_S² Π_{i∈S}(n_i − 1) Π_{j∈A∖S} 1/n_j``, so the workload's total is
  ``Σ_S v_S σ_S²`` with ``v_S = Σ_{A⊇S} w_A Π_{i∈S}(n_i − 1) Π_{j∈A∖S} 1/n_j``. Minimising it
  under ``Σ_S p_S/σ_S² = μ²`` (Cauchy–Schwarz) gives, in closed form,

      σ_S² = (Σ_T √(v_T p_T)) · √(p_S/v_S) / μ²,     E‖noise‖₂² = scale² (Σ_S √(v_S p_S))² / μ²,

  the least total squared error of any Gaussian mechanism on the workload (it attains the
  SVD bound, as :class:`SVDGaussianMechanism` does there).
* :class:`SVDGaussianMechanism`, any F: the strategy ``A = (FᵀF)^¼`` (so ``AᵀA = G^½``,
  ``G = FᵀF``), ``Δ₂(A)² = max diag G^½``,

      E‖noise‖₂² = σ₁² · max diag(G^½) · tr(G^½)   >=   σ₁² (tr G^½)²/n  (the SVD bound),

  with equality iff the diagonal of ``G^½`` is constant (marginals, ranges on a cycle, any
  workload whose Gram matrix is invariant under a transitive group of cell permutations):
  then it is the optimal Gaussian strategy; elsewhere ``bound_ratio`` says how far above.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..privacy import BudgetAccountant
from .._validate import check_flag, check_memory, is_int, short_repr
from ..body.marginal import MarginalMatch, MarginalStructure, recognise
from ..body.marginal_ops import ROW_CHUNK, as_marginal, project_rows, rank_bound
from ..body.spectral import span_of
from ._base import (CHUNK_BYTES, ErrorEstimate, Mechanism, PrivacyClaim, check_delta, check_epsilon,
                    check_finite_output, check_noise_scale, check_size, in_float_range, mc_expected_norm, scaled,
                    unit_exponent)
from .additive import _unit_gaussian_log_sigma
from .uncertainty import SIM_DRAWS, DrawsLaw, NoiseLaw

__all__ = ["MarginalPlan", "marginal_plan", "ResidualGaussianMechanism", "SVDGaussianMechanism", "gaussian_mu"]

MC_DRAWS = 20_000  # expected_error's default Monte Carlo draws (E‖noise‖₂ has no closed form here)


def gaussian_mu(epsilon: float, delta: float) -> tuple[float, str]:
    """``(μ, calibration)``: the largest μ with μ-GDP ⇒ (ε, δ)-DP, ``μ = 1/σ₁`` for the
    unit-sensitivity σ₁ of the analytic calibration (Balle & Wang 2018; "classic" where float64
    cannot evaluate the exact profile, a smaller, still valid μ)."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    log_unit, used = _unit_gaussian_log_sigma(epsilon, delta)
    return float(np.exp(-log_unit)), used


def _check_shape(shape: Any) -> tuple[int, ...]:
    try:
        out = tuple(shape)
    except TypeError:
        out = ()
    if not out or not all(is_int(s) and s >= 1 for s in out):
        raise ValueError(f"shape must be a non-empty sequence of positive integers, got {short_repr(shape)}")
    return tuple(int(s) for s in out)


def _check_cliques(cliques: Any, k: int) -> tuple[tuple[int, ...], ...]:
    what = f"a non-empty sequence of distinct increasing tuples of attribute indices in 0..{k - 1}"
    try:
        out = tuple(tuple(c) for c in cliques)
    except TypeError:
        raise ValueError(f"cliques must be {what}, got {short_repr(cliques)}") from None
    ok = bool(out) and len(set(out)) == len(out) and all(
        all(is_int(a) and 0 <= a < k for a in c) and list(c) == sorted(set(c)) for c in out)
    if not ok:
        raise ValueError(f"cliques must be {what}, got {short_repr(cliques)}")
    return tuple(tuple(int(a) for a in c) for c in out)


@dataclass(frozen=True)
class MarginalPlan:
    """ResidualPlanner's optimal Gaussian plan for weighted marginals (module docstring).

    ``shape``: attribute sizes; ``cliques``: the workload's marginals; ``weights``: how many
    times each table counts (F's multiplicity); ``subsets``: the residual attribute sets S
    (every subset of a clique, less those holding an attribute of size 1, which have no
    residual); ``v``, ``p``: their variance and privacy coefficients.
    """

    shape: tuple[int, ...]
    cliques: tuple[tuple[int, ...], ...]
    weights: tuple[float, ...]
    subsets: tuple[tuple[int, ...], ...]
    v: NDArray[np.float64]
    p: NDArray[np.float64]

    @classmethod
    def build(cls, shape: Sequence[int], cliques: Sequence[Sequence[int]],
              weights: Sequence[float] | None = None) -> MarginalPlan:
        """The plan of the marginals ``cliques`` over ``shape`` (``weights`` default 1 each)."""
        shape_t = _check_shape(shape)
        cl = _check_cliques(cliques, len(shape_t))
        if weights is None:
            w = (1.0,) * len(cl)
        else:
            w = tuple(weights)
            if len(w) != len(cl) or not all(isinstance(x, (int, float, np.integer, np.floating))
                                            and not isinstance(x, bool) and 0 < x < np.inf for x in w):
                raise ValueError(f"weights must be {len(cl)} positive finite numbers (one per clique), got "
                                 f"{short_repr(weights)}")
            w = tuple(float(x) for x in w)
        n = shape_t
        subsets = sorted({s for c in cl for k in range(len(c) + 1) for s in itertools.combinations(c, k)
                          if all(n[a] > 1 for a in s)}, key=lambda s: (len(s), s))
        v, p = np.zeros(len(subsets)), np.zeros(len(subsets))
        for j, s in enumerate(subsets):
            p[j] = math.prod((n[a] - 1) / n[a] for a in s)
            for c, wc in zip(cl, w):
                if set(s) <= set(c):
                    v[j] += wc * math.prod(n[a] - 1 for a in s) / math.prod(n[a] for a in c if a not in s)
        return cls(shape_t, cl, w, tuple(subsets), v, p)

    @property
    def queries(self) -> int:
        """Rows of the weighted workload (each table's cells times its weight)."""
        return int(round(sum(w * math.prod(self.shape[a] for a in c) for c, w in zip(self.cliques, self.weights))))

    @property
    def root_sum(self) -> float:
        """``Σ_S √(v_S p_S)``: the total squared error at μ = 1 is its square."""
        return float(np.sum(np.sqrt(self.v * self.p)))

    def variances(self, mu: float) -> NDArray[np.float64]:
        """``σ_S² = (Σ_T √(v_T p_T))·√(p_S/v_S)/μ²`` (so that ``Σ_S p_S/σ_S² = μ²``)."""
        return self.root_sum * np.sqrt(self.p / self.v) / (mu * mu)

    def total_squared_error(self, mu: float) -> float:
        """``Σ_A w_A E‖noise_A‖² = (Σ_S √(v_S p_S))²/μ²`` (μ-GDP; ρ-zCDP is μ² = 2ρ)."""
        return self.root_sum ** 2 / (mu * mu)

    def per_query_rmse(self, *, rho: float | None = None, mu: float | None = None) -> float:
        """``√(total/queries)`` at ρ-zCDP or μ-GDP (give one)."""
        if (rho is None) == (mu is None):
            raise ValueError("per_query_rmse: give exactly one of rho and mu")
        m = float(np.sqrt(2.0 * rho)) if rho is not None else float(mu)  # type: ignore[arg-type]
        if not (np.isfinite(m) and m > 0):
            raise ValueError(f"rho and mu must be positive finite numbers, got rho={short_repr(rho)}, "
                             f"mu={short_repr(mu)}")
        return float(np.sqrt(self.total_squared_error(m) / self.queries))


@dataclass(frozen=True)
class _FMarginals:
    """F as ``scale·M[rows]`` for a marginal matrix M whose every table F holds the same
    number of times (the plan's weights)."""

    structure: MarginalStructure
    scale: float
    rows: NDArray[np.int64]
    plan: MarginalPlan


def marginal_plan(F: ArrayLike) -> MarginalPlan | None:
    """F's :class:`MarginalPlan` when F is, in any row order, ``a·`` complete marginal tables
    (each table's rows the same number of times; zero rows allowed), found from F's entries
    (:func:`knorm.body.marginal.recognise`); None otherwise (e.g. a partial table)."""
    m = _f_marginals(F)
    return None if m is None else m.plan


def _f_marginals(F: Any) -> _FMarginals | None:
    """F's marginal tables: from its structure where it is known by one, else from its entries."""
    match = as_marginal(F)
    match = recognise(np.asarray(F)) if match is None else match
    if match is None or not (match.scale > 0 or match.scale < 0):
        return None
    s = match.structure
    counts = np.bincount(match.rows[match.rows >= 0], minlength=s.rows)
    offs = np.cumsum([0] + [math.prod(s.shape[a] for a in c) for c in s.cliques])
    cliques, weights = [], []
    for q, c in enumerate(s.cliques):
        block = counts[offs[q]:offs[q + 1]]
        if block[0] == 0 and not block.any():
            continue
        if not np.all(block == block[0]):
            return None  # a partial table: not a marginal workload (the plan would not be optimal)
        cliques.append(c)
        weights.append(float(block[0]))
    if not cliques:
        return None
    plan = MarginalPlan.build(s.shape, cliques, weights)
    return _FMarginals(s, abs(match.scale), match.rows, plan)


class ResidualGaussianMechanism(Mechanism):
    """``Fx + noise``, the optimal Gaussian mechanism for a marginal workload F (ResidualPlanner;
    module docstring): (ε, δ)-DP, exact; ``E‖noise‖₂² = scale²(Σ_S √(v_S p_S))²/μ²``.

    ``F``: complete marginal tables (any row order, each table the same number of times),
    recognised from its entries; anything else is refused (:class:`SVDGaussianMechanism`
    takes any F). ``plan``: the :class:`MarginalPlan`; ``mu``: the GDP parameter (``rho`` =
    μ²/2 zCDP); ``sigmas``: σ_S per residual set.
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, delta: float,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        found = _f_marginals(self.workload_source)
        if found is None:
            raise ValueError("F: not a marginal workload (rows of complete marginal tables, each table as often as "
                             "the others of its clique, one non-zero value); use SVDGaussianMechanism")
        self._m = found
        self.plan = found.plan
        self.scale = found.scale
        self.mu, used = gaussian_mu(self.epsilon, self.delta)
        self.rho = self.mu ** 2 / 2
        self.sigmas = np.sqrt(self.plan.variances(self.mu))
        check_noise_scale(float(self.sigmas.max()) * self.scale, self.epsilon, "the residual noise scale")
        self.rms_error()  # refused here if ‖noise‖ itself leaves float64
        self._claim = PrivacyClaim("Gaussian (ResidualPlanner marginals)", self.epsilon, self.delta, "(ε, δ)-DP",
                                    "exact", details={"mu": self.mu, "rho": self.rho, "calibration": used,
                                                      "residuals": len(self.plan.subsets),
                                                      "strategy": "residual bases per attribute set"})

    def _tables(self, m: int) -> NDArray[np.float64]:
        """``(m, rows of M)``: the noise of M's tables (before F's scale and row order)."""
        s, plan = self._m.structure, self.plan
        shape = s.shape
        resid = {}
        for S, sig in zip(plan.subsets, self.sigmas):
            g = self._rng.standard_normal((m,) + tuple(shape[a] for a in S))
            for ax in range(1, g.ndim):  # ⊗ P_i: the mean along each attribute of S removed
                g -= g.mean(axis=ax, keepdims=True)
            resid[S] = g * sig
        out = np.zeros((m, s.rows))
        i = 0
        for c in s.cliques:
            size = math.prod(shape[a] for a in c)
            if c in plan.cliques:
                t = np.zeros((m,) + tuple(shape[a] for a in c))
                for S, g in resid.items():
                    if set(S) <= set(c):
                        view = g.reshape((m,) + tuple(shape[a] if a in S else 1 for a in c))
                        t += view / math.prod(shape[a] for a in c if a not in S)
                out[:, i:i + size] = t.reshape(m, size)
            i += size
        return out

    def _noise_law(self) -> NoiseLaw:
        """Gaussian noise: SEs by Monte Carlo over its exact draws, intervals from normal quantiles."""
        return DrawsLaw(lambda m: np.atleast_2d(self.sample_noise(m)), True, "exact Gaussian noise draws",
                        default=SIM_DRAWS)

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)
        k = m or 1
        width = self.d + self._m.structure.rows + sum(math.prod(self.plan.shape[a] for a in S)
                                                      for S in self.plan.subsets)
        check_memory("size", size, 8.0 * k * width)
        tables = self._tables(k)
        rows = self._m.rows
        noise = np.where((rows >= 0)[None, :], tables[:, np.maximum(rows, 0)], 0.0)
        with np.errstate(over="ignore", under="ignore"):
            return self._one_or_many(check_finite_output(noise * self.scale, "the noise"), m)

    def rms_error(self) -> float:
        """``√E‖noise‖₂² = scale·Σ_S √(v_S p_S)/μ`` (exact)."""
        with np.errstate(over="ignore"):
            return in_float_range(self.scale * self.plan.root_sum / self.mu, "the rms error", self.epsilon)

    def expected_squared_error(self) -> float:
        """``E‖noise‖₂² = scale²(Σ_S √(v_S p_S))²/μ²`` (exact)."""
        with np.errstate(over="ignore", under="ignore"):
            return in_float_range(float(np.float64(self.rms_error()) ** 2), "the expected squared error",
                                  self.epsilon)

    def table_variances(self) -> dict[tuple[int, ...], float]:
        """Each clique's per-cell noise variance ``scale²·Σ_{S⊆A} σ_S² Π_{i∈S}(n_i−1)/Π_{j∈A}n_j·Π_{j∈A∖S}1/n_j``
        (the table's total variance over its cells; the same in every cell by symmetry)."""
        n, out = self.plan.shape, {}
        var = self.plan.variances(self.mu)
        for c in self.plan.cliques:
            tot = sum(v * math.prod(n[a] - 1 for a in S) / math.prod(n[a] for a in c if a not in S)
                      for S, v in zip(self.plan.subsets, var) if set(S) <= set(c))
            out[c] = self.scale ** 2 * tot / math.prod(n[a] for a in c)
        return out

    def expected_error(self, n_samples: int = MC_DRAWS, *, rms: bool = False) -> ErrorEstimate:
        """``E‖noise‖₂``: no closed form; Monte Carlo over exact draws (≈ rms_error). ``rms=True``:
        ``√E‖noise‖₂²``, exact (:meth:`rms_error`)."""
        if check_flag("rms", rms):
            return self._rms_estimate()
        return mc_expected_norm(self._mc_draw, n_samples, self.d, 1.0, f"Monte Carlo, {n_samples} exact draws")

    def _mc_draw(self, m: int) -> NDArray[np.float64]:
        return np.atleast_2d(self.sample_noise(m))


GRAM_MARGIN = 2.0**20  # a tall F's span from FᵀF only if its least eigenvalue is above 2^20·n·eps·λ_max


def _span_rows(F: NDArray[np.float64] | MarginalMatch) -> tuple[NDArray[np.float64] | None, NDArray[np.float64], int]:
    """``(W, R, e)`` with ``F·2^-e = W·R`` (``max|F|·2^-e`` in [1, 2)): W (d × r) with orthonormal
    columns (None: the identity, r = d) and R (r × n). F: a validated matrix or a marginal workload
    by its structure. A marginal workload, by its structure or recognised from the dense entries,
    takes W from the structure (:func:`~knorm.body.spectral.span_of`, an SVD of d × r_Φ; the rank at
    ``max(d, n)·eps`` times the largest singular value) and ``R = WᵀF·2^-e`` is summed over F's rows a
    piece at a time (:func:`~knorm.body.marginal_ops.project_rows`), so F by its structure is never
    made dense and the dense F gives the same bits. Any other F: ``R = F·2^-e`` itself when it is
    wide or square; when tall (r = n), ``F = W·R`` from G = FᵀF = UΛUᵀ (``R = Λ^½Uᵀ``, ``W = F·UΛ^-½``)
    if G is far from singular (every ``λ > 2^20·n·eps·λ_max``: each to about 1e-6 of itself), else its
    reduced QR. Memory checked first: a one-line ValueError
    naming F."""
    d, n = F.shape
    match = F if isinstance(F, MarginalMatch) else recognise(F)
    if match is None:
        check_memory("F", None, 8.0 * (4.0 * d * n + 3.0 * min(d, n) * n))
        dense = cast(NDArray[np.float64], F)  # not a MarginalMatch: that one is taken above
        e = unit_exponent(dense)
        Fu = np.ldexp(dense, -e)
        if d <= n:
            return None, Fu, e
        # tall: from G = FᵀF (d·n² and n³) where its eigenvalues are all far above their rounding
        # (then W = F U Λ^-½ is orthonormal to the same accuracy), else the reduced QR (4.5× the
        # time at 32,896 × 256): never a direction of F dropped
        lam, U = np.linalg.eigh(Fu.T @ Fu)
        if lam[0] > lam[-1] * n * np.finfo(float).eps * GRAM_MARGIN:
            root = np.sqrt(lam)
            return Fu @ (U / root), root[:, None] * U.T, e
        Q, R = np.linalg.qr(Fu)
        return Q, R, e
    rb = rank_bound(match)
    check_memory("F", None, 8.0 * (3.0 * d * rb + 2.0 * match.structure.rows * rb
                                   + n * (5.0 * rb + 2 * ROW_CHUNK + len(match.structure.shape) + 2)))
    e = unit_exponent(np.array([match.scale]))
    U, S = span_of(match, e)
    r = int(np.sum(S > S[0] * max(d, n) * np.finfo(float).eps))
    W = np.ascontiguousarray(U[:, :r])
    return W, np.ldexp(project_rows(W, F), -e), e


class SVDGaussianMechanism(Mechanism):
    """``Fx + noise``, the Gaussian strategy ``A = (FᵀF)^¼`` for any F (module docstring):
    (ε, δ)-DP, exact; ``E‖noise‖₂² = σ₁²·max diag(G^½)·tr(G^½)``, the SVD bound
    ``σ₁²(tr G^½)²/n`` when G^½ has a constant diagonal (``attains_bound``; ``bound_ratio``
    = rms / the bound's root otherwise).

    ``F·2^-e = W·R`` with W (d × r) orthonormal columns (:func:`_span_rows`: the identity, a QR, or a
    marginal workload's span), so with the SVD ``R = P·Σ·Qᵀ`` (r × n: ``O(r²n)``, no n × n matrix)
    ``G^½ = QΣQᵀ`` and the noise ``F A⁺ z = W P Σ^½ Qᵀ z``: no division, every direction of F gets
    its noise. ``F``: a matrix or a marginal workload known by its structure
    (:func:`knorm.implicit.marginals`, :class:`~knorm.body.marginal.MarginalMatch`): then F is never
    made dense, and the mechanism is that of the dense F, bit for bit.
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, delta: float,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        n = self.n
        W, R, e = _span_rows(self.workload_source)
        P, root, Qt = np.linalg.svd(R, full_matrices=False)  # G = Q Σ² Qᵀ: root = √λ(G) (unit scale)
        diag = np.einsum("ji,j,ji->i", Qt, root, Qt)  # diag G^½ (unit scale)
        self.mu, used = gaussian_mu(self.epsilon, self.delta)
        self._sens_unit = float(np.sqrt(diag.max()))  # Δ₂(A), A = G^¼
        trace = float(root.sum())
        self.bound_ratio = float(np.sqrt(diag.max() * n / trace))  # rms / √(SVD bound)
        self.attains_bound = bool(self.bound_ratio <= 1.0 + 1e-9)
        self._Qt = Qt                               # F A⁺ = W P Σ^½ Qᵀ (unit scale): z ↦ (z Q)(W P Σ^½)ᵀ
        self._WP = (P if W is None else W @ P) * np.sqrt(root)[None, :]
        self._e = e
        self._unit_rms = float(np.sqrt(diag.max() * trace))
        # noise = (2^e·Δ₂(A_u)/μ)·B z with B = F_u A_u⁺ at unit scale (F = 2^e F_u)
        self.noise_scale = check_noise_scale(scaled(self._sens_unit, e) / self.mu, self.epsilon,
                                             "the strategy's Gaussian noise scale")
        self.rms_error()
        self._claim = PrivacyClaim("Gaussian (SVD-bound strategy)", self.epsilon, self.delta, "(ε, δ)-DP", "exact",
                                    details={"mu": self.mu, "rho": self.mu ** 2 / 2, "calibration": used,
                                             "strategy": "A = (FᵀF)^(1/4)", "attains_svd_bound": self.attains_bound,
                                             "bound_ratio": self.bound_ratio})

    def _noise_law(self) -> NoiseLaw:
        """Gaussian noise: SEs by Monte Carlo over its exact draws, intervals from normal quantiles."""
        return DrawsLaw(lambda m: np.atleast_2d(self.sample_noise(m)), True, "exact Gaussian noise draws",
                        default=SIM_DRAWS)

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)
        k = m or 1
        step = max(1, CHUNK_BYTES // (8 * (self.n + self.d)))
        out = np.empty((k, self.d))
        for i in range(0, k, step):
            z = self._rng.standard_normal((min(step, k - i), self.n))
            out[i:i + len(z)] = (z @ self._Qt.T) @ self._WP.T
        with np.errstate(over="ignore", under="ignore"):
            return self._one_or_many(check_finite_output(out * self.noise_scale, "the noise"), m)

    def rms_error(self) -> float:
        """``√E‖noise‖₂² = √(max diag G^½ · tr G^½)/μ`` (exact)."""
        with np.errstate(over="ignore"):
            return in_float_range(scaled(self._unit_rms, self._e) / self.mu, "the rms error", self.epsilon)

    def expected_squared_error(self) -> float:
        with np.errstate(over="ignore", under="ignore"):
            return in_float_range(float(np.float64(self.rms_error()) ** 2), "the expected squared error",
                                  self.epsilon)

    def expected_error(self, n_samples: int = MC_DRAWS, *, rms: bool = False) -> ErrorEstimate:
        """``E‖noise‖₂``: Monte Carlo over exact draws (≈ rms_error). ``rms=True``: ``√E‖noise‖₂²``,
        exact (:meth:`rms_error`)."""
        if check_flag("rms", rms):
            return self._rms_estimate()
        def draw(m: int) -> NDArray[np.float64]:
            return np.atleast_2d(self.sample_noise(m))
        return mc_expected_norm(draw, n_samples, self.d + self.n, 1.0, f"Monte Carlo, {n_samples} exact draws")
