"""Which mechanism for a workload? ``recommend`` compares them all from F alone (issue 10).

Every row of the table is the same measure of the noise on the released answers
``a ∈ R^d``: the total root-mean-squared error

    rms = √E‖a − Fx‖₂²     (and per query: rms/√d, HDMM's "per-query RMSE")

which never depends on x. Exact where a formula exists:

* Laplace: ``E‖·‖₂² = 2d(Δ₁/ε)²``; Gaussian: ``dσ²``;
* strategies (identity, hierarchical, p-identity): ``2(Δ₁(A)/ε)²‖F A⁺‖_F²``;
* K-norm: ``(k+1)(k+2)/ε² · E‖z‖₂²``, z ~ Uniform(K), exact when K has exact structure
  (``tr Cov(Uniform K)``), else Monte Carlo over uniform draws with its standard error;
* NIM: ``Σ_i c_i/ε_i²`` (its plan's prediction) when every level's covariance is exact,
  else Monte Carlo over its noise with its standard error.

The Monte Carlo of the table uses the fixed seed ``mc_seed`` (reproducible; it depends on
F only and releases nothing, so it costs no privacy). The chosen mechanism
(``Recommendation.mechanism``) is built with the caller's ``rng`` (None is OS entropy,
private; an int a reproducible run that is NOT private): the exact rows' mechanisms draw
nothing to fill the table and are kept as built; K-norm and NIM are built afresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._rng import as_generator
from ._validate import check_options, is_int, positive_int, short_repr
from .body import SymmetricHull
from .body.hull import validate_matrix
from .mechanisms import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism,
                         LaplaceMechanism, NIMechanism, PIdentityMechanism)
from .mechanisms._base import (CHUNK_BYTES, check_accountant, check_delta, check_epsilon, check_n_samples,
                               in_float_range, scaled)
from .mechanisms.knorm_mechanism import check_sampler_options
from .walks.chains import check_workers, walk_id
from .walks.prepared import PreparedWorkload, check_prepared

__all__ = ["recommend", "Recommendation", "ErrorRow", "CANDIDATES", "P_IDENTITY_MAX_N"]

# the order also breaks ties (within TIE of each other): the simpler, exact mechanism first
CANDIDATES = ("laplace", "gaussian", "identity", "hierarchical", "p-identity", "knorm", "nim")
P_IDENTITY_MAX_N = 512  # p-Identity's search is O(n²p) per step: seconds at n = 256, ~20 s at 1024
TIE = 1e-6  # relative: rows this close are equal (K-norm of an injective F *is* the identity strategy)
MECHANISM_OPTIONS = ("walk", "bank_size", "sampler_options", "accept_uncertified")


@dataclass(frozen=True)
class ErrorRow:
    """One mechanism's ``rms = √E‖noise‖₂²`` on the answers (``None`` when it was not computed:
    ``skipped`` says why); ``stderr`` 0 for an exact value; ``notion`` "pure ε-DP" or "(ε, δ)-DP"."""

    mechanism: str
    rms: float | None
    stderr: float | None
    exact: bool
    method: str
    notion: str
    d: int
    skipped: str | None = None

    @property
    def per_query_rmse(self) -> float | None:
        """``√(E‖noise‖₂²/d)``."""
        return None if self.rms is None else self.rms / np.sqrt(self.d)

    @property
    def per_query_stderr(self) -> float | None:
        return None if self.stderr is None else self.stderr / np.sqrt(self.d)

    def as_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "rms": self.rms, "stderr": self.stderr,
                "per_query_rmse": self.per_query_rmse, "exact": self.exact, "method": self.method,
                "notion": self.notion, "skipped": self.skipped}

    def __str__(self) -> str:
        if self.rms is None:
            return f"{self.mechanism}: skipped ({self.skipped})"
        se = "" if self.exact else f" ± {self.stderr:.2g}"
        return f"{self.mechanism}: {self.rms:.6g}{se} ({self.method})"


@dataclass
class Recommendation:
    """``recommend``'s answer: ``table`` (name → :class:`ErrorRow`), ``best`` (the name of the
    least-error row), ``mechanism`` (a ready mechanism for it, built with the caller's rng)."""

    table: dict[str, ErrorRow]
    best: str
    mechanism: Any
    epsilon: float
    delta: float | None
    d: int
    n: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"best": self.best, "reason": self.reason, "epsilon": self.epsilon, "delta": self.delta,
                "measure": "rms = √E‖noise‖₂² on the d answers (per query: rms/√d)",
                "table": {k: r.as_dict() for k, r in self.table.items()}}

    def __str__(self) -> str:
        head = f"expected error at ε = {self.epsilon:g}" + (f", δ = {self.delta:g}" if self.delta else "")
        lines = [f"{head} ({self.d} queries, {self.n} cells); rms = √E‖noise‖₂² on the answers, "
                 "per query = rms/√d:",
                 f"  {'mechanism':13s} {'rms':>12s} {'± SE':>9s} {'per query':>11s}  notion       how"]
        for name, r in self.table.items():
            mark = "*" if name == self.best else " "
            if r.rms is None:
                lines.append(f"{mark} {name:13s} {'—':>12s} {'':>9s} {'—':>11s}  {r.notion:12s} "
                             f"skipped: {r.skipped}")
                continue
            se = "exact" if r.exact else f"{r.stderr:.2g}"
            lines.append(f"{mark} {name:13s} {r.rms:12.5g} {se:>9s} {r.per_query_rmse:11.5g}  {r.notion:12s} "
                         f"{r.method}")
        lines.append(f"recommended: {self.best} ({self.reason})")
        return "\n".join(lines)


def _check_candidates(candidates, delta):
    if candidates is None:
        return [c for c in CANDIDATES if c != "gaussian" or delta is not None]
    names = [candidates] if isinstance(candidates, str) else list(candidates)
    bad = [c for c in names if not isinstance(c, str) or c not in CANDIDATES]
    if bad or not names:
        raise ValueError(f"candidates must be a non-empty list from {list(CANDIDATES)}, got {candidates!r}")
    if "gaussian" in names and delta is None:
        raise ValueError("candidates: 'gaussian' needs delta (it is (ε, δ)-DP)")
    return [c for c in CANDIDATES if c in names]


def _check_options(options):
    opts = check_options("mechanism_options", options, MECHANISM_OPTIONS)
    if "sampler_options" in opts:  # refused at the call (walk params, unknown keys), not as a skipped row
        check_sampler_options(opts["sampler_options"], "mechanism_options['sampler_options']")
    return opts


def _merge_workers(options, workers):
    """``workers`` into ``options['sampler_options']`` (the chosen K-norm or NIM mechanism's);
    returns the workers the table's Monte Carlo runs use (None: the default)."""
    given = (options.get("sampler_options") or {}).get("workers")
    try:  # refused at the call, not as a skipped row
        check_workers(given)
    except ValueError as exc:
        raise ValueError(f"mechanism_options['sampler_options']: {exc}") from None
    if workers is None:
        return given
    if given is not None and given is not workers and given != workers:
        raise ValueError(f"workers={short_repr(workers)} and mechanism_options['sampler_options']['workers']="
                         f"{short_repr(given)} disagree: give it once")
    options["sampler_options"] = {**(options.get("sampler_options") or {}), "workers": workers}
    return workers


def _rms_from_draws(norms, factor, ess):
    """``factor·√mean(‖v‖²)`` and its delta-method SE, ``factor·SE(mean)/(2√mean)``, from the
    draws' norms (in units where they are O(1)) with ``ess`` effective draws."""
    sq = np.asarray(norms, float) ** 2
    m = float(sq.mean())
    se_m = float(sq.std(ddof=1) / np.sqrt(ess))
    return factor * np.sqrt(m), (factor * se_m / (2.0 * np.sqrt(m)) if m > 0 else 0.0)


class _Builder:
    """The rows, from F alone; keeps what the chosen mechanism can reuse (the body)."""

    def __init__(self, F, epsilon, delta, n_samples, walk, mc_seed, p_identity_max_n, options, rng, accountant,
                 workers=None, prepared=None):
        self.F, self.epsilon, self.delta = F, epsilon, delta
        self.prepared = prepared  # a PreparedWorkload of F (checked): its body and rounding are reused
        self.sampler_options = {} if workers is None else {"workers": workers}  # the table's MCMC runs
        # the rows of these are exact formulas (no draws): built once, with the caller's rng, and kept
        self.common = {"epsilon": epsilon, "rng": rng, "accountant": accountant}
        self.built = {}
        self.d, self.n = F.shape
        self.n_samples, self.walk, self.mc_seed = n_samples, walk, mc_seed
        self.p_identity_max_n, self.options = p_identity_max_n, options
        self.body = None if prepared is None else prepared.body
        self.nim_levels = None

    def row(self, name, rms, stderr, exact, method, notion="pure ε-DP"):
        """A ranked row; a ValueError (the row is skipped with it) where rms leaves float64."""
        rms = in_float_range(float(rms), "the rms error", self.epsilon)
        return ErrorRow(name, rms, float(stderr), bool(exact), method, notion, self.d)

    def skipped(self, name, why):
        notion = "(ε, δ)-DP" if name == "gaussian" else "pure ε-DP"
        return ErrorRow(name, None, None, False, "", notion, self.d, skipped=why)

    def laplace(self):
        m = self.built["laplace"] = LaplaceMechanism(self.F, **self.common)
        return self.row("laplace", m.rms_error(), 0.0, True, "exact: √(2d)·Δ₁/ε")

    def gaussian(self):
        m = self.built["gaussian"] = GaussianMechanism(self.F, delta=self.delta, **self.common)
        return self.row("gaussian", m.rms_error(), 0.0, True,
                        "exact: √d·σ (analytic calibration)", notion="(ε, δ)-DP")

    def _strategy(self, name, m, how):
        self.built[name] = m
        return self.row(name, m.rms_error(), 0.0, True, f"exact: {how}")

    def identity(self):
        m = IdentityMechanism(self.F, **self.common)
        return self._strategy("identity", m, "√2/ε·‖F‖_F")

    def hierarchical(self):
        m = HierarchicalMechanism(self.F, **self.common)
        how = f"√2·levels/ε·‖F A⁺‖_F, b = {m.branching}, {m.levels} levels"
        return self._strategy("hierarchical", m, how)

    def p_identity(self):
        if self.n > self.p_identity_max_n:
            return self.skipped("p-identity", f"n = {self.n} > p_identity_max_n = {self.p_identity_max_n} "
                                              "(the search costs O(n²p) per step)")
        m = PIdentityMechanism(self.F, **self.common)
        return self._strategy("p-identity", m, f"√2/ε·‖F A⁺‖_F, p = {m.p}")

    def _body(self):
        if self.body is None:
            self.body = SymmetricHull(self.F)
        return self.body

    def knorm(self):
        body = self._body()
        k, eps = body.dim, self.epsilon
        factor = scaled(np.sqrt((k + 1) * (k + 2)) * body._unit, body._exp, eps)  # no 1/ε or scale² formed
        s = body.exact_structure
        if s is not None:
            rms = factor * np.sqrt(np.trace(s.covariance_frame()))
            return self.row("knorm", rms, 0.0, True, f"exact: √((k+1)(k+2)·tr Cov(Uniform K))/ε, K a {s.kind}")
        m = KNormMechanism(self.F, epsilon=eps, walk=self.walk, rng=self.mc_seed, body=body,
                           sampler_options=self.sampler_options, accept_uncertified=True)
        z = m.sample_uniform(self.n_samples)
        info = m.last_info
        ess = max(2.0, min(self.n_samples, info.min_ess * self.n_samples / info.draws))
        rms, se = _rms_from_draws(np.linalg.norm(np.ldexp(z, -body._exp), axis=1) / body._unit, factor, ess)
        how = (f"Monte Carlo: E‖z‖₂² from {self.n_samples} MCMC ({self.walk}) uniform draws, ESS {ess:.0f}"
               + ("" if info.converged else ", run NOT certified"))
        return self.row("knorm", rms, se, False, how)

    def nim(self, knorm_row):
        m = NIMechanism(self.F, epsilon=self.epsilon, rng=self.mc_seed, walk=self.walk,
                        sampler_options=self.sampler_options, accept_uncertified=True, prepared=self.prepared)
        self.nim_levels = len(m.levels)
        if len(m.levels) == 1:
            if knorm_row is not None and knorm_row.rms is not None:
                return ErrorRow("nim", knorm_row.rms, knorm_row.stderr, knorm_row.exact,
                                "its plan has one level: the K-norm mechanism (K-norm's row)", "pure ε-DP", self.d)
        if all(lv.exact_covariance for lv in m.levels):
            return self.row("nim", m.predicted_error, 0.0, True,
                            f"exact: √Σ c_i/ε_i², {len(m.levels)} level(s) {[lv.dim for lv in m.levels]}")
        body = self._body()
        step = max(1, CHUNK_BYTES // (8 * self.d))  # answers of all ranges: d = n(n+1)/2 per draw
        norms, fracs = [], [1.0]
        for i in range(0, self.n_samples, step):
            noise = np.ldexp(m.sample_noise(min(step, self.n_samples - i)), -body._exp)  # unit scale
            norms.append(np.linalg.norm(noise, axis=1) / body._unit)
            fracs += [lv.mechanism.last_info.min_ess / lv.mechanism.last_info.draws for lv in m.levels
                      if lv.mechanism.last_info is not None]
        ess = max(2.0, self.n_samples * min(fracs))
        rms, se = _rms_from_draws(np.concatenate(norms), body._scale, ess)
        return self.row("nim", rms, se, False, f"Monte Carlo over {self.n_samples} noise draws (ESS {ess:.0f}), "
                                                f"{len(m.levels)} level(s) {[lv.dim for lv in m.levels]}")


def _one_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: " + (text.splitlines()[0] if text else "no message")


def recommend(F: ArrayLike, *, epsilon: float, delta: float | None = None,
              rng: np.random.Generator | int | None = None, candidates: Sequence[str] | None = None,
              n_samples: int = 2000, walk: str = "billiard", mc_seed: int = 0,
              p_identity_max_n: int = P_IDENTITY_MAX_N, mechanism_options: Mapping[str, Any] | None = None,
              accountant: Any = None, workers: int | Executor | None = None,
              prepared: PreparedWorkload | None = None) -> Recommendation:
    """The expected error of every applicable mechanism on ``F`` and the least-error one.

    From F alone (never data). ``table``: name → :class:`ErrorRow` with ``rms = √E‖noise‖₂²``
    on the d answers (module docstring: exact formulas, or Monte Carlo with its SE from
    ``n_samples`` draws seeded by ``mc_seed``). ``candidates`` (default: all of
    :data:`CANDIDATES`; ``"gaussian"`` only with ``delta``, then marked (ε, δ)-DP and
    competing: giving δ says (ε, δ)-DP is acceptable); ``"p-identity"`` is skipped when
    ``n > p_identity_max_n``. A row that cannot be built (too large, an oracle error) says
    why (``skipped``) instead of failing the call.

    ``best``: the least ``rms`` (ties within 1e-6 relative go to the earlier name of
    :data:`CANDIDATES`, so a one-level NIM never beats K-norm); ``mechanism``: that mechanism,
    built with ``rng`` (None: OS entropy; an int: reproducible and NOT private) and
    ``accountant``; ``mechanism_options`` (``walk``, ``bank_size``, ``sampler_options``,
    ``accept_uncertified``) go to a chosen K-norm or NIM mechanism. ``workers`` bounds the
    threads of every sampler run, the table's and the chosen mechanism's (None: one per CPU
    the process may use, :func:`~knorm.walks.chains.default_workers`; an int; or an
    executor); it may also be given as ``mechanism_options['sampler_options']['workers']``.
    ``prepared``: a :class:`~knorm.walks.prepared.PreparedWorkload` of this F (its body and
    rounding are reused by the K-norm and NIM rows and the chosen mechanism).
    """
    F = validate_matrix(F)
    epsilon = check_epsilon(epsilon)
    delta = None if delta is None else check_delta(delta)
    names = _check_candidates(candidates, delta)
    n_samples = check_n_samples(n_samples)
    walk_id(walk)
    if not is_int(mc_seed) or mc_seed < 0:
        raise ValueError(f"mc_seed must be a non-negative integer, got {mc_seed!r}")
    p_identity_max_n = positive_int("p_identity_max_n", p_identity_max_n)
    options = _check_options(mechanism_options)
    workers = _merge_workers(options, check_workers(workers))
    if rng is not None:
        as_generator(rng)  # refuses a bad rng here, not as a failure of every row
    check_accountant(accountant)
    if prepared is not None:
        check_prepared(prepared, F)
    options.setdefault("walk", walk)

    b = _Builder(F, epsilon, delta, n_samples, walk, int(mc_seed), p_identity_max_n, options, rng, accountant,
                 workers, prepared)
    table: dict[str, ErrorRow] = {}
    for name in names:
        try:
            if name == "nim":
                table[name] = b.nim(table.get("knorm"))
            else:
                table[name] = getattr(b, name.replace("-", "_"))()
        except Exception as exc:  # one mechanism failing must not lose the others' rows
            table[name] = b.skipped(name, _one_line(exc))
    rms = {r.mechanism: float(r.rms) for r in table.values() if r.rms is not None}  # in CANDIDATES order
    if not rms:
        raise ValueError("F: no candidate mechanism could be built: "
                         + "; ".join(f"{r.mechanism}: {r.skipped}" for r in table.values()))
    low = min(rms.values())
    best = next(k for k, v in rms.items() if v <= low * (1.0 + TIE))
    tied = [k for k, v in rms.items() if k != best and v <= low * (1.0 + TIE)]
    others = {k: v for k, v in rms.items() if v > low * (1.0 + TIE)}
    reason = f"least rms √E‖noise‖₂² = {rms[best]:.4g} at ε = {epsilon:g}"
    if tied:
        reason += f"; tied with {', '.join(tied)} (the first of the list wins)"
    if others:
        runner = min(others, key=lambda k: others[k])
        with np.errstate(over="ignore"):  # rows are normal floats (in_float_range): low > 0
            ratio = np.float64(others[runner]) / low
        reason += f"; next {runner} {others[runner]:.4g} ({ratio:.3g}×)"
    if table[best].notion != "pure ε-DP":
        reason += f"; (ε, δ)-DP with δ = {delta:g}"
    if best in b.built:  # built with the caller's rng, nothing drawn yet
        mech = b.built[best]
    elif best == "knorm":  # the table's K-norm drew seeded uniform draws: a fresh one (same body)
        mech = KNormMechanism(F, body=b._body(), **options, **b.common)
    else:  # NIM: planned again (the plan is a function of F: the same plan)
        mech = NIMechanism(F, **options, **b.common, prepared=prepared)
    return Recommendation(table, best, mech, epsilon, delta, b.d, b.n, reason)
