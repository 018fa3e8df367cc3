"""NIM, the non-isotropic recursive K-norm mechanism (docs/design.md §4), with a planned recursion.

A plan is a chain of nested subspaces ``span F = U_0 ⊃ U_1 ⊃ … ⊃ U_{L-1}`` and budgets
``ε_0 … ε_{L-1}``. Level i draws ``a_i`` from the K-norm mechanism of ``K_i = P_{U_i} F·B₁ⁿ``
at ``ε_i`` (dimension ``k_i``) and releases its component in ``V_i = U_i ⊖ U_{i+1}`` (the
last level releases all of ``U_{L-1}``). The levels are independent and mean zero, so

    E‖noise‖₂² = Σ_i c_i/ε_i²,   c_i = (k_i+1)(k_i+2)·tr(P_{V_i} Cov(Uniform K_i) P_{V_i})

(``E R² = (k+1)(k+2)/ε²`` for ``R ~ Gamma(k+1, 1/ε)``, docs/design.md §4). Under basic composition
(``Σ ε_i = ε``) the minimum over the ε_i is ``(Σ c_i^{1/3})³/ε²`` at ``ε_i ∝ c_i^{1/3}``
(:func:`split_epsilon`). One level is the K-norm mechanism itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._blas import on_one_blas_thread
from ..privacy import BudgetAccountant

from .._validate import as_real_array, check_flag, is_int, positive_int, short_repr
from ..body.hull import SymmetricHull
from ..body.marginal_ops import project_rows
from ..errors import ConvergenceError
from ..walks.certify import certified_of, known_moments
from ..walks.chains import check_workers, walk_id
from ..walks.prepared import PreparedWorkload, body_of, check_prepared
from ..walks.sampler import Sampler, rounding_of
from ._base import (ErrorEstimate, Mechanism, PrivacyClaim, check_epsilon, check_n_samples, check_size,
                    in_float_range, mc_norm_estimate, rms_from_draws, scaled)
from .knorm_mechanism import KNormMechanism, check_sampler_options
from .uncertainty import DrawsLaw, NoiseLaw

SPLITS = ("auto", "halves")
# a split is taken only if it predicts at least this much less squared error than releasing
# the level whole (absorbs the few-percent error of MCMC covariance estimates)
SPLIT_MARGIN = 0.05
DEFAULT_MAX_ESTIMATES = 8
# uniform draws (one sampler run with a fixed seed: the plan is a function of F) behind
# the covariance of each MCMC level of the plan; the rounding's own estimate, from ~10 points
# per dimension, only screens candidates (it can be 20% off on small bodies)
PLAN_DRAWS = 1000
PRECISE_CHECKS = 3  # at most this many screened splits re-scored with PLAN_DRAWS draws, per level
# a screening estimate of a candidate's covariance trace may be this much too large: a screened
# split is re-scored only while its score with c_U' so lowered could beat the best re-scored one
SCREEN_ERROR = 0.1
# screened split points t are at least this far apart (relative): the score is flat near its
# optimum, so neighbouring t (the proxy ranks them together) would buy roundings and no gain
T_SPACING = 0.25
# a further screened split is re-scored only if it could beat the best re-scored score by this
# much (relative, in the cube-root score; ≈ 3% in squared error): smaller gains are not worth a run
RESCORE_GAIN = 0.01
PLAN_SEED = 20251122


def split_epsilon(costs: ArrayLike, epsilon: float) -> tuple[NDArray[np.float64], float]:
    """The budgets minimising ``Σ c_i/ε_i²`` subject to ``Σ ε_i = ε`` (all ``c_i > 0``).

    Lagrange: ``−2c_i/ε_i³ + μ = 0`` gives ``ε_i = ε·c_i^{1/3}/Σ_j c_j^{1/3}``; the minimum is
    ``(Σ_i c_i^{1/3})³/ε²``. Returns ``(ε_i array, minimum)``; a ValueError naming epsilon where
    the minimum leaves float64.
    """
    eps = check_epsilon(epsilon)
    w, unit = _split_unit(costs)
    minimum = in_float_range(scaled(unit, 0, eps, 2), "the minimum (Σ costs^(1/3))³/epsilon²", eps)
    return eps * w, minimum  # one level: exactly ε


def _split_unit(costs: ArrayLike) -> tuple[NDArray[np.float64], float]:
    """``(ε_i/ε, (Σ_i c_i^{1/3})³)``: :func:`split_epsilon` at ε = 1 (scale-free in ε)."""
    c = as_real_array("costs", costs).astype(np.float64).ravel()
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise ValueError(f"costs must be positive finite numbers, got {short_repr(costs)}")
    w = np.cbrt(c)
    with np.errstate(over="ignore"):
        unit = float(w.sum() ** 3)
    if not np.isfinite(unit):
        raise ValueError("costs: (Σ c_i^(1/3))³ overflows float64")
    return w / w.sum(), unit


@dataclass
class NIMLevel:
    """One level of the recursion.

    ``dim``: dimension k of the level's subspace U; ``basis`` (d, k): orthonormal basis of U
    in answer space; ``eigenvalues``: of the covariance of Uniform(K_level) (answer-space
    units), descending; ``kept`` (d, kept_dim): the answer-space basis of V, the span of the
    bottom eigenvectors whose noise this level releases (at the last level, all of U);
    ``epsilon``; ``mechanism``: the level's K-norm mechanism (on F itself at the first level,
    on ``basisᵀF`` below); ``cost``: ``c = (k+1)(k+2)·tr(P_V Cov P_V)`` in units of the
    first level's body scale² (``predicted_sq_error = c/ε²`` in answer units);
    ``exact_covariance``: whether Cov(Uniform K_level) is exact (else an MCMC estimate).
    """

    dim: int
    basis: np.ndarray
    eigenvalues: np.ndarray
    kept: np.ndarray
    epsilon: float
    mechanism: KNormMechanism
    cost: float = np.nan
    predicted_sq_error: float = np.nan
    exact_covariance: bool = True

    @property
    def kept_dim(self) -> int:
        return self.kept.shape[1]


def _span_covariance(body: SymmetricHull, workers: Any = None) -> NDArray[np.float64]:
    """Cov(Uniform K) in the body's span coordinates (r × r, body scale² units): what
    :func:`~knorm.walks.sampler.uniform_covariance` maps to the d answer coordinates, kept
    r × r so that workloads with many queries (all ranges: d = n(n+1)/2) never form d × d."""
    s = body.exact_structure
    return s.covariance_frame() if s is not None else rounding_of(body, workers).covariance


@dataclass
class _Stage:
    """A level of a plan under construction: its body, subspace basis and eigenpairs."""

    body: SymmetricHull
    basis: np.ndarray  # (d, ·): the first level's span basis, else U with the body on UᵀF
    span: np.ndarray   # (d, k): the body's span coordinates -> answer space
    rel: float         # body frame units² -> first level's frame units²
    exact: bool        # exact covariance (exact structure)
    precise: bool      # exact, or estimated from PLAN_DRAWS draws (else: the rounding's estimate)
    split: int = 0     # 0: released whole (last level); else dim of the next subspace
    rows: np.ndarray | None = None  # (k, n) UᵀF, the matrix of a later level's body (None at the first)

    def set_covariance(self, C: NDArray[np.float64]) -> _Stage:
        """Cov(Uniform K) in span coordinates, body frame units²: sets ``lam`` (descending, first
        level's frame units²) and ``vec`` (d, k), the answer-space eigenvectors."""
        lam, w = np.linalg.eigh(C)
        order = np.argsort(lam)[::-1]
        self.lam = np.maximum(lam[order], 0.0) * self.rel
        self.vec = self.span @ w[:, order]
        return self

    @property
    def dim(self) -> int:
        return self.vec.shape[1]

    def cost(self, t: int | None = None) -> float:
        """``(k+1)(k+2)·Σ_{j>=t} λ_j`` (t = None: the whole level)."""
        k = self.dim
        return (k + 1) * (k + 2) * float(np.sum(self.lam[(t or 0):]))


def _check_max_estimates(value: int) -> int:
    if not is_int(value) or value < 0:
        raise ValueError(f"max_estimates must be an integer >= 0, got {short_repr(value)}")
    return int(value)


class NIMechanism(Mechanism):
    """NIM with a plan chosen from F alone: levels, split points and per-level ε.

    ``split="auto"`` (default) searches for the plan of least predicted ``E‖noise‖₂²``
    (module docstring), greedily, level by level. At a level with eigenvalues
    ``λ_1 ≥ … ≥ λ_k`` of Cov(Uniform K) it scores each split ``U' = span(top t
    eigenvectors)`` by ``c_V^{1/3} + c_{U'}^{1/3}`` (the next level released whole). The
    next level's cost needs Cov(Uniform P_{U'}K): one rounding, unless P_{U'}K has exact
    structure (t = 1 always has). So candidates are ranked by a proxy that puts the
    marginal of Uniform(K) in place of Uniform(P_{U'}K), ``c_{U'} ≈ (t+1)(t+2)·Σ_{j≤t}λ_j``
    (smallest at large eigenvalue gaps; exact for boxes, optimistic otherwise), and
    estimated in that order while the proxy can still beat the best score (its c_{U'} times
    (1 − SCREEN_ERROR)·(the least ratio estimated/proxy c_{U'} of the candidates estimated
    so far) where that exceeds 1: a cheap bound on the gain), passing over a
    t within ``T_SPACING`` = 25% of one already estimated (the score is flat near its
    optimum), with at most ``max_estimates`` MCMC covariance estimates of candidate
    subspaces in the whole search (``covariance_estimates`` counts them; the first
    level's, which K-norm needs anyway, is not counted). These rounding estimates only
    screen: every MCMC level of the plan, and of a level's best screened candidates (at
    most ``PRECISE_CHECKS`` = 3) the first and each later one that could still beat the best
    re-scored one by ``RESCORE_GAIN`` = 1% if its screening estimate were ``SCREEN_ERROR`` =
    10% too large, gets its covariance from ``PLAN_DRAWS`` = 1000
    uniform draws of a sampler run with a fixed seed (``precise_estimates`` counts them).
    A split is taken only if it then predicts at least ``SPLIT_MARGIN`` = 5% less squared
    error than releasing the level whole. With one level NIM is the K-norm mechanism (the
    same draws for the same ``rng``).

    ``split="halves"``: Hardt & Talwar's rule, the top ⌊k/2⌋ eigenvectors down to
    dimension 1. ``max_levels`` caps the number of levels (1 = K-norm). In every plan the
    ε_i are :func:`split_epsilon`'s (basic composition, stated in ``privacy``).

    ``plan``: one dict per level (dim, kept_dim, epsilon, predicted_rms_error, covariance);
    ``predicted_error``: ``√(Σ c_i/ε_i²) = √E‖noise‖₂²`` (≥ E‖noise‖₂ by Jensen), exact
    when every covariance is (``prediction_basis`` says). The plan depends on F only,
    never on x or ``rng`` (roundings and plan draws are seeded with constants). ``walk``, ``bank_size``,
    ``sampler_options`` and ``accept_uncertified`` go to every level's K-norm mechanism
    (an uncertified MCMC run raises :class:`~knorm.ConvergenceError` unless
    ``accept_uncertified=True``). ``prepared``: a :class:`~knorm.walks.prepared.PreparedWorkload`
    of this F: the first level's body and rounding are taken from it (the plan and the noise
    law are the same); or ``body``: K = F·B₁ⁿ of this F (as :class:`KNormMechanism`'s, whose
    rounding is then reused). ``plan_of``: an NIMechanism of the same F, split, max_levels and
    max_estimates whose plan is taken as it is (the plan is a function of F: no search; the two
    F are compared by their fingerprints).

    ``F``: a matrix, or a marginal workload known by its structure (:func:`knorm.implicit.marginals`,
    :func:`knorm.data.marginal_workload` with ``dense=False``, a
    :class:`~knorm.body.marginal.MarginalMatch`; docs/design.md §2.2): then F is never made dense
    (the first level's body and K-norm mechanism take the structure, each later level's ``UᵀF`` is
    summed over F's rows made a piece at a time, memory checked), and plans and seeded releases are
    those of the dense F, bit for bit.
    """

    @on_one_blas_thread
    def __init__(self, F: ArrayLike, *, epsilon: float, walk: str = "billiard",
                 rng: np.random.Generator | int | None = None, bank_size: int = 1000,
                 sampler_options: dict[str, Any] | None = None, accept_uncertified: bool = False,
                 accountant: BudgetAccountant | None = None, split: str = "auto", max_levels: int | None = None,
                 max_estimates: int = DEFAULT_MAX_ESTIMATES, prepared: PreparedWorkload | None = None,
                 body: SymmetricHull | None = None, plan_of: NIMechanism | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        walk_id(walk)
        positive_int("bank_size", bank_size)
        opts = check_sampler_options(sampler_options)
        self._workers = check_workers(opts.get("workers"))  # the plan's too
        self._checkpoint = opts.get("checkpoint")
        if not isinstance(split, str) or split not in SPLITS:
            raise ValueError(f"split must be one of {list(SPLITS)}, got {short_repr(split)}")
        self.split = split
        self.max_levels = positive_int("max_levels", max_levels, allow_none=True)
        self.max_estimates = _check_max_estimates(max_estimates)
        self.covariance_estimates = 0  # MCMC covariance estimates (roundings) of candidate subspaces
        self.precise_estimates = 0     # PLAN_DRAWS-draw covariance estimates (levels of the plan, checks)
        self._walk = walk

        if plan_of is not None:
            stages, root = self._plan_of(plan_of, prepared, body)
        else:
            if prepared is not None and body is not None:
                raise ValueError("prepared: give a prepared workload or a body, not both")
            root = (check_prepared(prepared, self.workload_source, fingerprint=self.workload_fingerprint())
                    if prepared is not None else self._check_body(body))
            self._root_log_scale = root._log_scale
            stages = self._search(root)
        self._stages = stages
        costs = [st.cost(st.split) for st in stages]
        shares, total = _split_unit(costs)  # ε_i = ε·share_i; Σ c_i/ε_i² = total/ε² (in frame units²)
        eps = self.epsilon * shares
        self._scale = scale = np.float64(root._scale)
        self._root_unit, self._root_exp = root._unit, root._exp  # root._scale = _root_unit·2^_root_exp

        self.levels: list[NIMLevel] = []
        for i, (st, c, e) in enumerate(zip(stages, costs, eps)):
            Fl: Any = self.workload_source if i == 0 else st.rows  # the structure itself where F is known by one
            mech = KNormMechanism(Fl, epsilon=float(e), walk=walk, rng=self._rng, body=st.body,
                                  bank_size=bank_size, sampler_options=sampler_options,
                                  accept_uncertified=accept_uncertified)
            mech.noise_source = self.noise_source  # its generator is this mechanism's: copied (seeded) or refused alike
            kept = st.vec[:, st.split:] if st.split else st.vec
            with np.errstate(over="ignore", under="ignore", divide="ignore"):  # only the report may leave float64
                ev = st.lam * np.square(scale)
                pred = np.square(scaled(np.sqrt(c) * root._unit, root._exp, e))  # no 0·inf
            self.levels.append(NIMLevel(st.dim, st.basis, ev, kept, float(e), mech, c, float(pred), st.exact))
        self.predicted_error = in_float_range(scaled(np.sqrt(total) * root._unit, root._exp, self.epsilon),
                                              "the predicted rms error", self.epsilon)
        exact_cov = all(lv.exact_covariance for lv in self.levels)
        pool = known_moments(root)  # certified before planning (_search): its covariance came from the pool
        pooled_root = root.exact_structure is None and pool is not None and pool.records >= PLAN_DRAWS
        self.prediction_basis = (
            "√(Σ_i (k_i+1)(k_i+2)/ε_i² · tr(P_Vi Cov(Uniform K_i) P_Vi)) = √E‖noise‖₂² "
            "(≥ E‖noise‖₂ by Jensen); "
            + ("exact covariances" if exact_cov else
               ("the first level's covariance from its certified pool, the other MCMC levels' "
                if pooled_root else "the MCMC levels' covariances ")
               + f"estimated from {PLAN_DRAWS} uniform draws each (seeded: a function of F), a few percent of error"))

        sampling = "exact" if all(lv.mechanism.privacy_per_answer.exact for lv in self.levels) else "mcmc-approximate"
        eps_list = [lv.epsilon for lv in self.levels]
        if len(self.levels) == 1:
            how = f"one K-norm level at ε = {eps_list[0]:g} (plan '{split}' chosen from F alone)"
        else:
            how = (f"basic composition of {len(self.levels)} K-norm levels at ε_i = "
                   f"{', '.join(f'{e:.4g}' for e in eps_list)} (Σ ε_i = ε; plan '{split}' chosen from F alone)")
        self._claim = PrivacyClaim(
            "NIM", self.epsilon, 0.0, "pure ε-DP", sampling, composition=how,
            details={"levels": [lv.dim for lv in self.levels], "kept": [lv.kept_dim for lv in self.levels],
                     "epsilon_per_level": eps_list, "split": split},
        )

    # -- the plan ---------------------------------------------------------------------
    def _check_body(self, body: SymmetricHull | None) -> SymmetricHull:
        """``body``: K = F·B₁ⁿ of this F (as :class:`KNormMechanism`'s ``body``, the caller's to match;
        its rounding is reused), or None: this process's body of F (:func:`~knorm.walks.prepared.body_of`)."""
        if body is None:
            return body_of(self.workload_source, self.workload_fingerprint())
        if not isinstance(body, SymmetricHull) or body.ambient_dim != self.d:
            raise ValueError(f"body must be None or the SymmetricHull of this F (K = F·B₁ⁿ in R^{self.d})")
        return body

    def _plan_of(self, other: NIMechanism, prepared: Any, body: Any) -> tuple[list[_Stage], SymmetricHull]:
        """The stages of ``other``'s plan (the same F and plan options): the plan is a function of F."""
        if not isinstance(other, NIMechanism):
            raise ValueError(f"plan_of must be an NIMechanism, got {type(other).__name__}")
        if prepared is not None or body is not None:
            raise ValueError("plan_of: give a plan to reuse, or a prepared workload or body, not both")
        same = ((other.d, other.n) == (self.d, self.n) and other.workload_fingerprint() == self.workload_fingerprint()
                and other.split == self.split
                and other.max_levels == self.max_levels and other.max_estimates == self.max_estimates)
        if not same:
            raise ValueError("plan_of must be an NIMechanism of this F with the same split, max_levels and "
                             "max_estimates")
        self._root_log_scale = other._root_log_scale
        self.covariance_estimates, self.precise_estimates = other.covariance_estimates, other.precise_estimates
        return other._stages, other._stages[0].body

    def _stage(self, body: SymmetricHull, U: NDArray[np.float64] | None = None,
               rows: NDArray[np.float64] | None = None) -> _Stage:
        """A level's stage: body on F itself (the first level, ``U`` None) or on ``rows = UᵀF``
        (U: the level's subspace in answer space, orthonormal); the rounding's covariance
        unless the body has exact structure."""
        exact = body.exact_structure is not None
        st = _Stage(body, body.span_basis if U is None else U,
                    body.span_basis if U is None else U @ body.span_basis,
                    float(np.exp(2.0 * (body._log_scale - self._root_log_scale))), exact, exact, rows=rows)
        return st.set_covariance(_span_covariance(body, self._workers))

    def _refine(self, st: _Stage) -> _Stage:
        """Replace a rounding's covariance by the second moments of ``PLAN_DRAWS`` uniform draws
        (K is symmetric: mean 0), from a sampler run with the fixed seed ``PLAN_SEED``."""
        if st.precise:
            return st
        mom = known_moments(st.body)  # the certified pool's E[ZZᵀ], where this body has one: no draws
        if mom is not None and mom.records >= PLAN_DRAWS:
            st.precise = True
            return st.set_covariance(mom.second)
        draws, _ = Sampler(st.body, rng=PLAN_SEED, workers=self._workers).run(PLAN_DRAWS)
        Z = (draws @ st.body.span_basis) / st.body._scale  # span coordinates, frame units
        st.precise = True
        self.precise_estimates += 1
        return st.set_covariance(Z.T @ Z / len(Z))

    def _sub_stage(self, st: _Stage, t: int) -> _Stage:
        """The stage of ``U' = span(top t eigenvectors)``: its body on ``U'ᵀF`` (t × n), summed over F's
        rows a piece at a time (:func:`~knorm.body.marginal_ops.project_rows`: F by its structure is
        never made dense, and the dense F gives the same bits)."""
        U = st.vec[:, :t]
        rows = project_rows(U, self.workload_source)
        return self._stage(SymmetricHull(rows), U, rows)

    def _search(self, root: SymmetricHull) -> list[_Stage]:
        if root.exact_structure is None:
            # the root is certified before planning (its level's K-norm needs it anyway), so its
            # covariance always comes from the certified pool: the plan never depends on whether
            # this process (or the cache) certified F before
            try:
                certified_of(root, self._walk, self._workers)
            except ConvergenceError:
                pass  # PLAN_DRAWS seeded draws, as for the other levels
        st = self._stage(root)
        stages: list[_Stage] = []
        while True:
            self._refine(st)
            k = st.dim
            if k == 1 or (self.max_levels is not None and len(stages) + 1 >= self.max_levels):
                break
            if self.split == "halves":
                nxt, st.split = self._sub_stage(st, k // 2), k // 2
            else:
                # the best screened candidates, re-scored with precise estimates while a screened
                # score, its c_U' lowered by SCREEN_ERROR, could still beat the best re-scored one
                best, best_score = None, np.cbrt(st.cost()) * np.cbrt(1.0 - SPLIT_MARGIN)
                for low, t, cand in self._screen(st)[:PRECISE_CHECKS]:
                    if best is not None and low >= best_score * (1.0 - RESCORE_GAIN):
                        continue
                    score = np.cbrt(st.cost(t)) + np.cbrt(self._refine(cand).cost())
                    if score < best_score:
                        best, best_score = (t, cand), score
                if best is None:
                    break
                st.split, nxt = best
            stages.append(st)
            st = nxt
        stages.append(st)
        return stages

    def _screen(self, st: _Stage) -> list[tuple[float, int, _Stage]]:
        """Splits of ``st`` that beat releasing it whole by ``SPLIT_MARGIN`` on screening
        estimates, best first: ``(optimistic score, t, next stage)``.

        Scores are ``c_V^{1/3} + c_U^{1/3}`` (the cube root of the optimal two-level error
        times ε², additive over levels), with the next level released whole; the optimistic
        score lowers the screened ``c_U`` by ``SCREEN_ERROR``. Candidates go in proxy order, and
        one within ``T_SPACING`` (relative) of a t already screened is passed over.
        """
        k = st.dim
        lam = st.lam
        t = np.arange(1, k)
        head = np.cumsum(lam)[:-1]
        tail = np.cbrt((k + 1) * (k + 2) * (lam.sum() - head))
        guess = (t + 1) * (t + 2) * head  # the proxy's c_U
        proxy = tail + np.cbrt(guess)
        bar = np.cbrt(st.cost()) * np.cbrt(1.0 - SPLIT_MARGIN)
        found: list[tuple[float, float, int, _Stage]] = []
        tried: list[int] = []
        # the proxy's c_U is optimistic: once MCMC candidates are estimated, a candidate whose c_U is
        # (1 − SCREEN_ERROR)·(their least c_U / proxy c_U) times its proxy's (if larger) cannot win
        ratio = 0.0
        for j in np.argsort(proxy, kind="stable"):
            if self.covariance_estimates >= self.max_estimates:
                break
            hope = tail[j] + np.cbrt(guess[j] * max(1.0, ratio * (1.0 - SCREEN_ERROR)))
            if hope >= min([bar] + [sc for sc, _, _, _ in found]):
                continue
            tj = int(t[j])
            if any(abs(tj - u) <= T_SPACING * u for u in tried):
                continue
            tried.append(tj)
            nxt = self._sub_stage(st, tj)
            self.covariance_estimates += int(not nxt.exact)
            c = nxt.cost()
            if not nxt.exact and guess[j] > 0:
                ratio = c / guess[j] if ratio == 0.0 else min(ratio, c / guess[j])
            score = tail[j] + np.cbrt(c)
            if score < bar:
                low = score if nxt.exact else tail[j] + np.cbrt(c * (1.0 - SCREEN_ERROR))
                found.append((score, low, tj, nxt))
        return [(low, tj, nxt) for _, low, tj, nxt in sorted(found, key=lambda f: f[0])]

    @property
    def plan(self) -> list[dict[str, Any]]:
        """One dict per level: ``dim``, ``kept_dim``, ``epsilon``, ``predicted_rms_error``
        (``√(c_i/ε_i²)``, answer units) and ``covariance`` ("exact" or "mcmc estimate")."""
        rms = [scaled(np.sqrt(lv.cost) * self._root_unit, self._root_exp, lv.epsilon) for lv in self.levels]
        return [{"dim": lv.dim, "kept_dim": lv.kept_dim, "epsilon": lv.epsilon, "predicted_rms_error": r,
                 "covariance": "exact" if lv.exact_covariance else "mcmc estimate"} for lv, r in zip(self.levels, rms)]

    def _noise_law(self) -> NoiseLaw:
        """The sum of the levels' independent ``r_i·P_{V_i} z_i``: Monte Carlo over the mechanism's own noise
        draws (MCMC where a level's body needs it; the SE assumes independent draws)."""
        return DrawsLaw(lambda m: np.atleast_2d(self.sample_noise(m)), False,
                        "NIM noise draws" + ("" if self.privacy_per_answer.exact else " (MCMC; SE assumes independence)"))

    # -- noise ------------------------------------------------------------------------
    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)  # refuses what cannot fit, before allocating anything
        total = np.zeros((m or 1, self.d))
        for i, lv in enumerate(self.levels):
            a = lv.mechanism.sample_noise(m or 1)  # answer space at the first level, else level coordinates
            if i > 0:
                a = a @ lv.basis.T
            if lv.kept_dim < lv.dim:               # a level released whole needs no projection
                a = (a @ lv.kept) @ lv.kept.T
            total += a
            self._certified = self._certified and lv.mechanism._certified
        return self._one_or_many(total, m)

    def expected_error(self, n_samples: int | None = None, *, rms: bool = False) -> ErrorEstimate:
        """``E‖noise‖₂``: a plan of one level is the K-norm mechanism (``n_samples`` None: its
        :meth:`~KNormMechanism.expected_error`, from the certified pool where there is one);
        otherwise Monte Carlo over ``n_samples`` (default 2000) of the mechanism's own noise draws.
        ``rms=True``: ``√E‖noise‖₂²`` likewise, exact where every level's covariance is
        (``predicted_error``)."""
        one = self.levels[0]
        single = len(self.levels) == 1 and one.kept_dim == one.dim and one.epsilon == self.epsilon
        if check_flag("rms", rms) and all(lv.exact_covariance for lv in self.levels):
            return ErrorEstimate(self.predicted_error, 0.0, True,
                                 f"exact: √Σ c_i/ε_i², {len(self.levels)} level(s) {[lv.dim for lv in self.levels]}")
        if n_samples is None and single:
            e = one.mechanism.expected_error(rms=rms)
            return replace(e, method=f"its plan has one level, the K-norm mechanism: {e.method}")
        n_samples = 2000 if n_samples is None else n_samples
        draws = self.sample_noise(check_n_samples(n_samples))
        if rms:
            s = float(np.max(np.abs(draws))) or 1.0  # ‖v‖ = s·‖v/s‖: no square over- or underflows
            ess = float(n_samples)  # as the ℓ₂ estimate below: the SE assumes independent draws
            value, stderr = rms_from_draws(np.linalg.norm(draws / s, axis=1), s, ess)
            return ErrorEstimate(value, stderr, False, f"Monte Carlo over {n_samples} noise draws"
                                 + ("" if self.privacy_per_answer.exact else " (MCMC-based; SE assumes independent draws)"))
        exact = self.privacy_per_answer.exact
        return mc_norm_estimate(draws, method=f"Monte Carlo over {n_samples} noise draws"
                                + ("" if exact else " (MCMC-based; SE assumes independent draws)"))
