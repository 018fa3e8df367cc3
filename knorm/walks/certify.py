"""A body's walk certified once, and releases that cost a warm-up (docs/design.md §3.5, §3.7).

What a certified run shows — that this walk, on this rounded body, has Uniform(K) as a
reachable stationary law and mixes in about τ steps — is a property of F, the rounding
and the walk: all public. :func:`certify` establishes it once, with a public seed, on a
pool of ``2·CERTIFY_DRAWS`` records split across its chains (the checks of a sampler's
run, §3.5, with an R-hat bound that holds for many short chains, §3.5.1, plus the exact law of the gauge: ``‖z‖_K^r ~ U(0, 1)`` for z uniform
in the r-dimensional K), measures τ on those chains and keeps ``N_STATES`` of their
stationary states. :class:`StationarySampler` then releases draws from chains that start
at one of those public states (chosen with the caller's rng) and run ``W = ⌈20τ⌉`` steps
with fresh randomness before their first candidate: no pool, no per-run R-hat.
"""

from __future__ import annotations

import datetime
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._blas import on_one_blas_thread
from .._rng import as_generator
from .._validate import check_memory, is_int, positive_int, short_repr
from ..body.hull import Frame, OracleState, SymmetricHull
from ..diagnostics import ess as _ess
from ..diagnostics import rhat_nested, stationary_tau
from ..errors import ConvergenceError
from .chains import WALKS, Chain, grouped_gauges, local_map, run_chains
from .ledger import mark
from .checkpoint import PublicSnapshot
from .rounding import Rounding, per_step_tau
from .sampler import (CHUNK_DRAWS, DEFAULT_CHAINS, MAX_REPEAT_FRACTION, WARMUP_TAUS, Sampler, SamplingInfo, advance,
                      record_gauges, select_candidates, thinning_for)

CERTIFY_SEED = 31415  # public: a certification is a deterministic function of F (and the walk)
CERTIFY_DRAWS = 1000  # draws of the certified run: a pool of 2000 records, as a mechanism's first run
MIN_POOL = 2 * CERTIFY_DRAWS  # a certificate judged on fewer records is refused, whatever its chain count:
# the records are split across the chains (docs/design.md §3.5.1), at least 4 per chain (two per half)
MIN_CHAIN_RECORDS = 4
N_STATES = 64  # public stationary states kept: 8 per chain (of 8), evenly spaced in its pool
# the pool's R-hat: nested R-hat (Margossian et al. 2024) of the chains' halves, each chain its own superchain
# (each starts at its own end point of the rounding); its bound comes from the χ² law of the 2·chains group
# means under stationarity at the ESS the certificate guarantees (pool/2), at this level per coordinate
DIAGNOSTIC = "nested R-hat of split chains, bound from the chi-square law of their means"
RHAT_ALPHA = 1e-6
# the pool's candidates' ‖z‖_K^r against U(0, 1): a smaller KS p fails. 10⁻³, not 10⁻²: the public
# seed makes a workload's certification deterministic, so a chance failure would bar that workload
# for good; at 1000 candidates it still fails a law whose CDF is 6% off (a 2% shrink at r = 6: tested)
GAUGE_KS_MIN_P = 0.001
WARMUP_FLOOR = WARMUP_TAUS  # W ≥ ⌈20τ⌉ ≥ 20 steps (τ ≥ 1): no file can lower it
# verify: a re-measured τ up to 1.5× the file's is estimation noise (τ comes from the min of several bulk
# ESS estimates of 2000 records, each with a few % of noise, and files made before the gauges of every
# record were measured took the candidates' gauge τ through an AR(1) conversion that amplified it)
VERIFY_TAU_SLACK = 1.5
PUBLIC_NOTE = ("public: functions of F, the walk and the public seed CERTIFY_SEED; no data, and no state of a "
               "chain whose draws became noise")


@dataclass(frozen=True)
class Certificate:
    """What :func:`certify` checked on a pool of a body's walk, and what releases need.

    ``pool``: records (``chains`` chains, thinning ``pool_thin``); ``max_rhat``: max over the
    ambient coordinates of the ``diagnostic`` (:func:`split_nested_rhat`, below
    :func:`rhat_limit` of ``2·chains`` groups); ``min_ess``: min bulk ESS over the ambient
    coordinates, ``|z|²`` and ``‖z‖_K``; ``repeat_fraction``: candidates dropped as
    repeats; ``gauge_ks_p``: KS p-value of the candidates' ``‖z‖_K^r`` against U(0, 1);
    ``tau``: per-step integrated autocorrelation time, the max over the same functionals of
    :func:`~knorm.diagnostics.stationary_tau` (about the pooled mean: no bias that grows with
    the chain count; per step by AR(1), :func:`~knorm.walks.rounding.per_step_tau`, at least 1),
    ``tau_bound`` its upper bound (one-sided 95%); ``warmup``: ``W = ⌈20·tau_bound⌉`` steps
    before a release chain's first candidate and between a chain's candidates (issue 51);
    ``thin``: the pool's record spacing for τ (:func:`~knorm.walks.sampler.thinning_for`),
    which spaces the public states; ``version`` and ``date`` of the run.
    """

    walk: str
    chains: int
    pool: int
    pool_thin: int
    max_rhat: float
    min_ess: float
    repeat_fraction: float
    gauge_ks_p: float
    tau: float
    tau_bound: float
    warmup: int
    thin: int
    version: str
    date: str
    seed: int = CERTIFY_SEED
    diagnostic: str = DIAGNOSTIC

    @property
    def rhat_limit(self) -> float:
        """The bound ``max_rhat`` must stay below: :func:`rhat_limit` of the ``2·chains`` half-chains."""
        return rhat_limit(2 * self.chains, self.pool)

    def failures(self) -> list[str]:
        """The thresholds this certificate does not meet (empty: it passes). Besides the
        run's own checks, W and the spacing must follow from the certificate's own ESS,
        so that no edit of W, τ or thin alone can shorten a release's warm-up."""
        out = []
        if self.walk not in WALKS or self.chains < 4 or self.pool_thin < 1 or self.seed < -1 \
                or self.diagnostic != DIAGNOSTIC:
            return [f"not a certificate of a knorm walk (walk {self.walk!r}, {self.chains} chains, pool thinning "
                    f"{self.pool_thin}, diagnostic {self.diagnostic!r})"]
        if self.pool < certify_pool(self.chains):
            out.append(f"pool {self.pool} < {certify_pool(self.chains)} records (at least {MIN_POOL}, and "
                       f"{MIN_CHAIN_RECORDS} per chain of {self.chains})")
        out += pool_failures(self.max_rhat, self.min_ess, self.pool, self.gauge_ks_p, 2 * self.chains)
        if not self.repeat_fraction <= MAX_REPEAT_FRACTION:
            out.append(f"repeats {self.repeat_fraction:.2%} > {MAX_REPEAT_FRACTION:.0%}")
        if not (self.tau >= 1.0 and self.tau_bound >= self.tau):
            out.append(f"τ {self.tau:.3g} below 1 or above its bound {self.tau_bound:.3g}")
        bound = max(self.tau, self.tau_bound) if np.isfinite(self.tau_bound) else np.inf
        if not self.warmup >= warmup_steps(bound):
            out.append(f"warm-up {self.warmup} < ⌈{WARMUP_TAUS}τ⌉ = {warmup_steps(bound)} steps at τ's bound")
        if not self.thin >= thinning_for(max(self.tau, 1.0)):
            out.append(f"thinning {self.thin} < {thinning_for(max(self.tau, 1.0))} (0.6 ESS per record at τ)")
        return out

    @property
    def passed(self) -> bool:
        return not self.failures()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return (f"certified {self.date} by knorm {self.version} ({self.walk}, seed {self.seed}): max R-hat "
                f"{self.max_rhat:.4f} (nested, of split chains; bound {self.rhat_limit:.4f}), min bulk ESS {self.min_ess:.0f} of {self.pool} records ({self.chains} chains, "
                f"thin {self.pool_thin}), gauge KS p {self.gauge_ks_p:.3f}, repeats {self.repeat_fraction:.2%}; "
                f"τ {self.tau:.2f} per step (bound {self.tau_bound:.2f}), W = {self.warmup} steps before and "
                f"between a release chain's draws")


def certify_pool(chains: int) -> int:
    """Records of a certifying pool of ``chains`` chains: ``max(MIN_POOL, MIN_CHAIN_RECORDS·chains)``:
    2000 records split across the chains (at least 4 each), whatever their count; :func:`rhat_limit`
    makes the R-hat bound mean the same for few long chains and many short ones."""
    return max(MIN_POOL, MIN_CHAIN_RECORDS * int(chains))


def rhat_limit(groups: int, pool: int) -> float:
    """The bound of :func:`split_nested_rhat` over ``groups`` half-chain groups of a pool of ``pool``
    records: ``√(1 + δ)``, ``δ = x·q/(1 − x)``, ``x = 2·groups/pool``, q the ``1 − RHAT_ALPHA``
    quantile of ``χ²_{G−1}/(G−1)``.

    Why: stationary, independent chains give each group mean the variance ``σ²·G/ESS``, at most
    ``σ²·x`` where the certificate's ESS ≥ pool/2; the sample variance B̂ of the G means is then at
    most ``σ²·x·χ²_{G−1}/(G−1)``, and Ŵ (within-group variance) is at least ``σ²(1 − x)`` (a
    half-chain's variance about its own mean). So ``nR̂² − 1 = B̂/Ŵ`` exceeds δ with probability at
    most ``RHAT_ALPHA`` per coordinate. 1.030 at 8 chains of 250 records, 1.067 at 32 of 64, 1.116 at
    64 of 32: short chains resolve less between them, and the ESS ≥ pool/2 check (which sees
    disagreeing chains as long-range correlation) carries the rest (docs/design.md §3.5.1).
    1 (nothing passes) when ``x ≥ 1``."""
    from scipy.special import chdtri  # χ²'s inverse survival function (scipy.stats: ≈ 1 s more to import)

    g, x = int(groups), 2.0 * int(groups) / float(pool)
    if g < 2 or x >= 1.0:
        return 1.0
    q = float(chdtri(g - 1, RHAT_ALPHA)) / (g - 1)
    return float(np.sqrt(1.0 + x * q / (1.0 - x)))


def split_nested_rhat(amb: NDArray[np.float64]) -> NDArray[np.float64]:
    """The certificate's R-hat of records ``(chains, k, d)``, one per coordinate: nested R-hat
    (:func:`knorm.diagnostics.rhat_nested`) of the 2·chains half-chains, grouped by chain and half
    (each chain is its own superchain: it starts at its own end point of the rounding; with one
    chain per superchain nested R-hat is the unranked R-hat of the halves). The halves see a trend
    within the chains, the chains a disagreement between them."""
    nch, k, d = amb.shape
    h = k // 2
    halves = amb[:, : 2 * h].reshape(2 * nch, h, d)  # row 2c + j: chain c's half j, a group of its own
    return np.atleast_1d(rhat_nested(halves, np.arange(2 * nch)))


def pool_failures(max_rhat: float, min_ess: float, pool: int, gauge_ks_p: float, groups: int) -> list[str]:
    """The thresholds a certifying pool of ``pool`` records in ``groups`` half-chains misses: max R-hat
    below :func:`rhat_limit`, min ESS ≥ pool/2, gauge KS p ≥ ``GAUGE_KS_MIN_P`` (empty: it meets them)."""
    out = []
    limit = rhat_limit(groups, pool)
    if not max_rhat < limit:
        out.append(f"max R-hat {max_rhat:.4f} ≥ {limit:.4f} (nested, of {groups} half-chains)")
    if not min_ess >= pool / 2:
        out.append(f"min ESS {min_ess:.0f} < pool/2 = {pool / 2:.0f}")
    if not gauge_ks_p >= GAUGE_KS_MIN_P:
        out.append(f"gauge KS p {gauge_ks_p:.2g} < {GAUGE_KS_MIN_P}")
    return out


def step_tau(tau_records: float, thin: int) -> float:
    """Per-step τ of records ``thin`` steps apart with τ ``tau_records`` (AR(1), at least 1)."""
    return max(1.0, per_step_tau(tau_records, thin))


def implied_tau(pool: int, min_ess: float, pool_thin: int) -> float:
    """Per-step τ implied by ``min_ess`` of ``pool`` records thinned by ``pool_thin`` (at least 1)."""
    return max(1.0, per_step_tau(pool / min_ess, pool_thin))


def warmup_steps(tau: float) -> int:
    """``W = ⌈20τ⌉`` steps, at least ``WARMUP_FLOOR``."""
    if not np.isfinite(tau):
        raise ValueError(f"τ must be finite, got {tau}")
    return max(WARMUP_FLOOR, int(np.ceil(WARMUP_TAUS * tau)))


def uniform_gauge_ks(gauges: NDArray[np.float64], r: int) -> float:
    """KS p-value of ``gauges`` against the law of ‖z‖_K for z ~ Uniform(K), K r-dimensional:
    ``P(‖z‖_K ≤ t) = vol(tK)/vol(K) = t^r``, so ``‖z‖_K^r ~ U(0, 1)``."""
    from scipy import stats  # here, not at import: scipy.stats takes ≈ 1 s to import, and a release needs none

    u = np.clip(np.asarray(gauges, dtype=np.float64), 0.0, 1.0) ** r
    return float(stats.kstest(u, "uniform").pvalue)


@dataclass(frozen=True)
class PoolMoments:
    """Moments of Uniform(K) from the certified pool (docs/design.md §3.7): public, functions of F
    and the public seeds, so every question about the workload's error is answered from them
    with no new draws. Span coordinates ``Z`` in frame units (``body.to_ambient``: ambient
    ``z = 2^e·unit·U Z``, U orthonormal, so ``‖z‖ = 2^e·unit·|Z|``):

    ``sq``: (E|Z|², its standard error ``sd/√ESS``, that ESS of |Z|² over the pool's chains);
    ``norm``: (E|Z|, its standard error, ESS) likewise; ``second``: E[Z Zᵀ] (r×r; the mean is 0 by
    the symmetry of K), the covariance NIM plans from and whose ambient diagonal gives each
    query's (each table's) noise variance; ``records``: the pool's size.
    """

    sq: tuple[float, float, float]
    norm: tuple[float, float, float]
    second: NDArray[np.float64]
    records: int

    def as_dict(self) -> dict[str, Any]:
        return {"sq": list(self.sq), "norm": list(self.norm), "records": self.records}


def pool_moments(rounding: Rounding, records: NDArray[np.float64]) -> PoolMoments:
    """:class:`PoolMoments` of a certified pool ``(chains, k, r)`` of rounded-frame records."""
    Z = rounding.to_span(records)  # (chains, k, r), span coordinates
    sq = np.sum(Z**2, axis=2)
    nrm = np.sqrt(sq)

    def mean_se(v: NDArray[np.float64]) -> tuple[float, float, float]:
        ess = max(2.0, min(float(np.min(_ess(v[..., None]))), float(v.size)))
        return float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(ess)), ess

    flat = Z.reshape(-1, Z.shape[2])
    second = flat.T @ flat / len(flat)
    return PoolMoments(sq=mean_se(sq), norm=mean_se(nrm), second=(second + second.T) / 2, records=len(flat))


@dataclass
class Certified:
    """A body's certification: the :class:`Certificate` and the public stationary ``states``
    (``(N_STATES, r)``, coordinates of the rounding's frame) with an oracle basis of each
    (``bases``, ``(N_STATES, r)`` column codes: a warm start, never trusted for a result), and
    the pool's :class:`PoolMoments` (None in a file written before they were kept)."""

    certificate: Certificate
    states: NDArray[np.float64]
    bases: NDArray[np.int64]
    moments: PoolMoments | None = None
    _oracle: list[OracleState] | None = field(default=None, repr=False, compare=False)

    def gauges(self, frame: Frame, workers: int | Executor | None = None) -> NDArray[np.float64]:
        """``‖z‖_K`` of each state by the exact oracle, from its saved basis
        (:meth:`~knorm.body.hull.Frame.gauges_from_bases`, in groups on threads:
        :func:`~knorm.walks.chains.grouped_gauges`); keeps the optimal states."""
        g, self._oracle = grouped_gauges(frame, frame.to_oracle(self.states), self.bases, workers)
        return g

    def oracle_states(self, frame: Frame, workers: int | Executor | None = None) -> list[OracleState]:
        """Each state's oracle state, optimal at it (built once, by :meth:`gauges`)."""
        if self._oracle is None:
            self.gauges(frame, workers)
        assert self._oracle is not None
        return self._oracle


@on_one_blas_thread
def certify(body: SymmetricHull, *, walk: str = "billiard", rng: np.random.Generator | int | None = CERTIFY_SEED,
            workers: int | Executor | None = None, progress: Callable[[int, int], object] | None = None,
            chains: int = DEFAULT_CHAINS, checkpoint: PublicSnapshot | None = None) -> Certified:
    """Certify the body's walk once: a :class:`~knorm.walks.sampler.Sampler` run of
    ``CERTIFY_DRAWS`` draws (a pool of :func:`certify_pool` records: 2000 split across the
    chains; ``chains`` chains, default ``DEFAULT_CHAINS``, from the rounding's end points, warm-up
    ⌈20τ⌉ with the rounding's τ; R-hat
    :func:`split_nested_rhat` below :func:`rhat_limit`) seeded by the public ``CERTIFY_SEED``, then its measures
    (:func:`pool_measures`: the gauge's law on the release candidates, τ on the chains' own
    records) and ``N_STATES`` stationary states. The result depends on ``chains``, never on
    ``workers``. ``checkpoint``: a :class:`~knorm.walks.checkpoint.PublicSnapshot` of the run
    (:func:`~knorm.walks.prepared.prepare`'s resume). Nothing drawn here is ever released.
    Raises :class:`~knorm.ConvergenceError` (one line, with the failed checks) if the run
    does not pass.
    """
    chains = positive_int("chains", chains)
    s = _CertifyingSampler(body, walk=walk, rng=rng, workers=workers, chains=chains, min_draws=certify_pool(chains),
                           progress=None if progress is None else _Certifying(progress), checkpoint=checkpoint)
    _, info = s.run(CERTIFY_DRAWS)
    mark("certification: states and measures")
    assert s._kept is not None
    records = s._kept[0]  # (chains, k, r): the pool, in the rounding's frame
    m = pool_measures(body, s.rounding, records, info.thin, [c.state for c in s.chains], workers,
                      (info.ess, info.rhat), s._kept_gauges)
    from .. import __version__

    cert = Certificate(
        walk=walk, chains=records.shape[0], pool=m["pool"], pool_thin=int(info.thin), max_rhat=m["max_rhat"],
        min_ess=m["min_ess"], repeat_fraction=info.extra["repeats_dropped"] / max(1, m["pool"] // 2),
        gauge_ks_p=m["gauge_ks_p"], tau=m["tau"], tau_bound=m["tau_bound"], warmup=warmup_steps(m["tau_bound"]),
        thin=thinning_for(m["tau"]),
        version=__version__, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        seed=int(rng) if isinstance(rng, (int, np.integer)) else -1)
    bad = cert.failures()
    if bad or not info.converged:
        raise ConvergenceError(f"the {walk} walk on this body was not certified ({'; '.join(bad) or 'the run'} "
                               "failed its checks): prepare with another walk")
    # the public states: the certified chains' states (with their oracle bases) every 2·thin steps after the pool
    xs, bs = [], []
    for _ in range(-(-N_STATES // len(s.chains))):
        run_chains(s.chains, walk, 2 * info.thin, 2 * info.thin, s.params, workers)
        xs += [c.x.copy() for c in s.chains]
        bs += [c.state.basis.copy() for c in s.chains]
    return Certified(cert, np.array(xs[:N_STATES]), np.array(bs[:N_STATES], dtype=np.int64),
                     pool_moments(s.rounding, records))


class _CertifyingSampler(Sampler):
    """A certification's run (:func:`certify`): the Sampler's start and warm-up, its R-hat
    :func:`split_nested_rhat` below :func:`rhat_limit`. (Continuing the rounding's chains with no
    warm-up failed the gauge's law on one workload in another floating-point environment: the
    warm-up stays.)"""

    STAGE = "certification: "

    def _pool_rhat(self, amb: NDArray[np.float64], total: int) -> tuple[NDArray[np.float64], float]:
        return split_nested_rhat(amb), rhat_limit(2 * self.nchains, total)


class _Certifying:
    """A sampler's ``progress`` whose pool reports go to ``progress.certify`` (a stage of its own,
    where the progress has one: the certification's records are never draws of a release). Its
    records are public, so the sampler shows the pool growing past its target when R-hat or
    repeats extend it (``public_records``): minutes at census size that a pool of noise keeps silent."""

    public_records = True

    def __init__(self, progress: Any) -> None:
        self._progress = progress

    def __call__(self, done: int, total: int) -> None:
        report = getattr(self._progress, "certify", None)
        (report if callable(report) else self._progress)(done, total)

    def __getattr__(self, name: str) -> Any:
        if name == "warmup":  # the certification's warm-up (20τ at the rounding's τ), never a release's W
            report = getattr(self._progress, "certify_warmup", None)
            if callable(report):
                return report
        return getattr(self._progress, name)


def block_energies(amb: NDArray[np.float64], tables: NDArray[np.int64]) -> NDArray[np.float64]:
    """Each table's block energy ``Σ_{i ∈ C} z_i²`` of ambient records ``(…, d)`` (``tables``: each
    row's table, :attr:`~knorm.body.hull.SymmetricHull.tables`), ``(…, tables)``."""
    return np.stack([np.sum(amb[..., tables == c] ** 2, axis=-1) for c in np.unique(tables[tables >= 0])], axis=-1)


def pool_measures(body: SymmetricHull, rounding: Rounding, records: NDArray[np.float64], thin: int,
                  states: list[OracleState], workers: int | Executor | None = None,
                  ambient: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
                  gauges: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """The certificate's measures of a pool ``(chains, k, r)`` (rounded-frame records thinned by
    ``thin``; ``states``: each chain's oracle state now, optimal at its last record):

    - ``max_rhat`` over the ambient coordinates (:func:`split_nested_rhat`; ``ambient``: their
      ESS and R-hat, when the sampler run measured them already);
    - ``min_ess`` over the ambient coordinates, ``|z|²``, ``‖z‖_K`` and, for a marginal workload
      (``body.tables``, found from F's entries), each table's block energy ``Σ_{i ∈ C} z_i²``
      (invariant under the value permutations; at rank 197 the slowest functional measured,
      τ ≈ 1.5 per step against ≈ 1.2 for the coordinates and ``|z|²``). The gauges are the
      exact oracle's, of every record: ``gauges`` ``(chains, k)`` where the walk recorded them
      (the billiard's state is optimal at each record: ``‖x‖_K = λ·(T x)``, no pivot), else
      each chain's solved in turn from its own state (in threads; the same bits on any number
      of them; at census size ≈ 1.5 CPU s per record), so their ESS is a pool ESS like the
      others'. (From the candidates' gauges alone, two records apart, a per-step τ needs AR(1)'s
      ``ρ₁ = ρ₂^½``, which turns the ESS estimate's noise near τ = 1 into τ up to 2 for
      independent draws: W up to 2× too long.)
    - ``gauge_ks_p`` of the release candidates' (odd records') ``‖z‖_K^r``
      (:func:`uniform_gauge_ks`); ``tau`` (per step, :func:`implied_tau`); ``pool``.
    """
    nch, k, r = records.shape
    frame = rounding.frame
    pool = nch * k
    tables = body.tables
    amb = body.to_ambient(rounding.to_span(records)) if ambient is None or tables is not None else None

    def chain_gauges(i: int) -> NDArray[np.float64]:  # in a thread: the oracle's kernels only (design §3.6)
        return frame.gauges(Z[i], states[i].copy(), oracle=True)[0]

    if gauges is not None and np.shape(gauges) == (nch, k):
        g = np.asarray(gauges, dtype=np.float64)
    else:
        Z = [frame.to_oracle(np.ascontiguousarray(records[i])) for i in range(nch)]  # mapped here, not in the threads
        g = np.array(local_map(chain_gauges, range(nch), workers))
    extra = [np.sum(records**2, axis=2)[..., None]]
    if tables is not None:
        assert amb is not None
        extra.append(block_energies(amb, tables))
    source = amb if ambient is None else ambient
    assert source is not None
    # τ over the ambient coordinates where they were mapped here, else over the walk's own (rounded frame)
    return judge_pool(source, g, r, thin, extra, coords=records if amb is None else amb)


def judge_pool(ambient: NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]],
               gauges: NDArray[np.float64], r: int, thin: int,
               functionals: Sequence[NDArray[np.float64]] = (), *,
               coords: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """The certificate's measures and verdict of a pool: ``ambient`` records ``(chains, k, d)`` (or
    their ESS and :func:`split_nested_rhat`, measured already), the records' exact gauges
    ``(chains, k)`` in an r-dimensional K, the thinning, and further ``(chains, k, m)`` functionals
    whose ESS counts (``|z|²``, block energies). Returns ``pool``, ``max_rhat``, ``min_ess`` (over
    coordinates, gauges and functionals), ``gauge_ks_p`` (odd records), ``tau`` and ``tau_bound``
    (per step: the max over the ambient records, or ``coords`` ``(chains, k, m)`` where only their
    ESS was given, the gauges and the functionals of :func:`~knorm.diagnostics.stationary_tau`) and
    ``failures`` (:func:`pool_failures`: empty when the pool passes)."""
    if isinstance(ambient, tuple):
        e_amb, rh = ambient
        nch, k = np.shape(gauges)
    else:
        nch, k = ambient.shape[:2]
        e_amb, rh = np.atleast_1d(_ess(ambient)), split_nested_rhat(ambient)
    g = np.asarray(gauges, dtype=np.float64)
    pool = nch * k
    min_ess = min(float(np.min(e_amb)), float(np.min(_ess(g[..., None]))),
                  *(float(np.min(_ess(f))) for f in functionals))
    taus = [stationary_tau(x) for x in (ambient if coords is None else coords, g, *functionals)
            if not isinstance(x, tuple)]
    tau = max(float(np.max(t)) for t, _ in taus)
    bound = max(float(np.max(b)) for _, b in taus)
    m = {"pool": pool, "max_rhat": float(np.max(rh)), "min_ess": min_ess,
         "gauge_ks_p": uniform_gauge_ks(g[:, 1::2].ravel(), r), "tau": step_tau(tau, thin),
         "tau_bound": max(step_tau(tau, thin), step_tau(bound, thin))}
    m["failures"] = pool_failures(m["max_rhat"], m["min_ess"], pool, m["gauge_ks_p"], 2 * nch)
    return m


def verify(body: SymmetricHull, rounding: Rounding, certified: Certified, *,
           rng: np.random.Generator | int | None = None, workers: int | Executor | None = None
           ) -> tuple[bool, dict[str, Any]]:
    """Re-certify a prepared file's walk (``knorm prepare --verify``): ``DEFAULT_CHAINS`` chains
    start at its public states (picked with ``rng``), run its warm-up W and a pool of
    ``MIN_POOL`` records at its thinning, measured as :func:`certify` measures
    (:func:`pool_measures`). Passes if the pool meets the certificate's thresholds and the
    τ it measures is at most ``VERIFY_TAU_SLACK`` times the file's (τ from 2000 records is
    itself an estimate). Returns ``(passed, measures)``."""
    cert = certified.certificate
    gen = as_generator(rng)
    idx = gen.integers(len(certified.states), size=DEFAULT_CHAINS)
    starts = certified.oracle_states(rounding.frame, workers)
    cs = [Chain(rounding.frame, certified.states[i], g, state=starts[i].copy())
          for i, g in zip(idx, gen.spawn(DEFAULT_CHAINS))]
    from .chains import default_params

    params = default_params(cert.walk, rounding.frame, workers)
    advance(cs, cert.walk, cert.warmup, params, workers)
    per = MIN_POOL // DEFAULT_CHAINS
    records = run_chains(cs, cert.walk, per * cert.thin, cert.thin, params, workers)
    m = pool_measures(body, rounding, records, cert.thin, [c.state for c in cs], workers,
                      gauges=record_gauges(cs, records.shape[1]))
    fails = m["failures"]
    if not m["tau"] <= VERIFY_TAU_SLACK * cert.tau:
        fails.append(f"τ {m['tau']:.2f} > {VERIFY_TAU_SLACK}× the file's {cert.tau:.2f}: its W = {cert.warmup} is too "
                     "short")
    m["failures"] = fails
    return not fails, m


def check_states(certified: Certified, rounding: Rounding) -> bool:
    """The states are ``(≥ N_STATES, r)`` finite points with valid bases, inside K by the
    exact oracle (gauge ≤ 1 + 1e-9)."""
    frame = rounding.frame
    x, b = certified.states, certified.bases
    if not (x.ndim == 2 and x.shape[0] >= N_STATES and x.shape[1] == frame.r and x.dtype.kind == "f"
            and np.all(np.isfinite(x)) and b.shape == x.shape and b.dtype.kind in "iu"):
        return False
    try:
        return bool(np.all(certified.gauges(frame) <= 1.0 + 1e-9))
    except ValueError:  # a basis that is not one (Frame.basis_state)
        return False


class StationarySampler:
    """Draws fit for release from a certified body: a warm-up, not a pool (docs/design.md §3.5).

    ``StationarySampler(body, rounding, certified, *, rng=None, chains=None, workers=None)``.
    A run of ``size`` draws uses :meth:`chains_for` chains (at most ``chains``, default
    ``DEFAULT_CHAINS``; the count depends on ``size`` and the certificate only, never on
    ``workers``, so seeded draws are the same on any number of cores) and those already started. A chain that does not exist yet starts at
    one of the certificate's public stationary states, picked with ``rng``, with its own
    generator spawned from ``rng``. **Every candidate is at least W steps after anything
    public or released from its chain** (issue 51): records every :attr:`spacing` =
    ``⌈W/2⌉`` steps, and only odd records are candidates, so a chain's first candidate is
    ``2·⌈W/2⌉ ≥ W`` steps after its public start and each later one as far after the
    previous candidate (a release's noise forgets an earlier released draw of its chain, as
    it forgets the public start: the Markov property, design §3.5.1); chains continue from
    run to run, never restarted. A candidate equal to its chain's previous one is dropped,
    and draws come round-robin over the chains. Every state is checked inside K by the
    exact oracle as the walk moves. ``run`` returns ``(draws, info)`` like
    :meth:`Sampler.run`; ``info.converged`` is the certificate's; ``info.extra["sources"]``
    holds each draw's chain and step (steps from its chain's public start).
    """

    def __init__(self, body: SymmetricHull, rounding: Rounding, certified: Certified, *,
                 rng: np.random.Generator | int | None = None, chains: int | None = None,
                 workers: int | Executor | None = None, progress: Any = None) -> None:
        self.body, self.rounding, self.certified = body, rounding, certified
        self.cert = certified.certificate
        self.walk = self.cert.walk
        self.frame = rounding.frame
        self.max_chains = DEFAULT_CHAINS if chains is None else positive_int("chains", chains)
        self.workers = workers
        self.progress = progress
        self._gen = as_generator(rng)
        from .chains import default_params

        self.params = default_params(self.walk, self.frame, self.workers)
        self.chains: list[Chain] = []
        self.records = np.zeros(0, np.int64)  # records per chain so far (always even: odd ones are candidates)
        # steps between records: odd records (the candidates) are 2·⌈W/2⌉ ≥ W steps apart (issue 51)
        self.spacing = max(1, -(-self.cert.warmup // 2))
        self._last = np.empty((0, self.frame.r))
        self._next = 0  # the chain whose candidate comes first in the next run (round-robin across runs)
        self._pivots_new: list[int] = []
        self.last_info: SamplingInfo | None = None

    def chains_for(self, size: int) -> int:
        """Chains for ``size`` draws: ``min(chains, size)``. Every draw costs W steps of its chain
        (a new chain's first from its public start, a continuing chain's from its previous
        candidate), so more chains cost no more steps and run in parallel. A function of
        ``size`` and the maximum only, never of ``workers``."""
        return max(1, min(self.max_chains, size))

    def _start(self, c: int) -> int:
        """Start chains until there are ``c``, each at a public state picked with the rng, and
        run ``W − 2·spacing`` steps (none: W ≤ 2·⌈W/2⌉) on each new one. Returns how many were started."""
        new = []
        for _ in range(c - len(self.chains)):
            i = int(self._gen.integers(len(self.certified.states)))
            start = self.certified.oracle_states(self.frame, self.workers)[i].copy()
            new.append(Chain(self.frame, self.certified.states[i], self._gen.spawn(1)[0], state=start))
        self._pivots_new = [ch.pivots for ch in new]  # their counters before the warm-up
        if new:
            # at least W steps from the start to the first candidate (record 1, 2·spacing steps after this)
            advance(new, self.walk, self._lead(), self.params, self.workers, self.progress)
            self.chains += new
            self.records = np.concatenate([self.records, np.zeros(len(new), np.int64)])
            self._last = np.vstack([self._last, np.full((len(new), self.frame.r), np.nan)])
        return len(new)

    def _lead(self) -> int:
        """Steps a new chain runs before its first record: ``max(0, W − 2·spacing)``."""
        return max(0, self.cert.warmup - 2 * self.spacing)

    @on_one_blas_thread
    def run(self, size: int, min_chains: int = 0) -> tuple[NDArray[np.float64], SamplingInfo]:
        """At least ``size`` draws fit for release, ambient coordinates, in release order; and
        a :class:`~knorm.walks.sampler.SamplingInfo` (``extra["sources"]``: chain and step of
        each draw, steps counted from its chain's public start, consecutive ones of a chain at
        least W apart and the first at least W; ``rhat``/``ess``: the certificate's, ESS
        scaled to these records).
        ``min_chains``: run at least that many chains (at most ``chains``), even for few draws
        (a mechanism's bank after its first release: consecutive releases from different chains)."""
        t0 = time.perf_counter()
        size = positive_int("size", size)
        if not is_int(min_chains) or min_chains < 0:
            raise ValueError(f"min_chains must be a non-negative integer, got {short_repr(min_chains)}")
        # records (frame and ambient copies) of 2·size candidates' worth, before anything is allocated
        check_memory("size", size, 8 * 2 * size * (2 * self.frame.r + 2 * self.body.ambient_dim))
        # counters before this run: the chains that exist, and (at 0) those it starts, warm-up included
        stats0 = sum((ch.stats for ch in self.chains), np.zeros(3, np.int64))
        pivots0 = sum(ch.pivots for ch in self.chains)
        started = self._start(max(len(self.chains), self.chains_for(size), min(int(min_chains), self.max_chains)))
        cs, thin, c = self.chains, self.spacing, len(self.chains)
        pivots0 += sum(self._pivots_new)
        need = 2 * -(-size // c)  # an even number of records per chain: odd records stay the candidates
        draws = np.empty((c, 0, self.frame.r))
        # ``progress.release(done, size, W)`` where it has one: its bar says each draw's W, the claim's
        release = getattr(self.progress, "release", None)
        report = (lambda d, t: release(d, t, self.cert.warmup)) if callable(release) else \
            self.progress if callable(self.progress) else None
        for _ in range(21):
            while need > 0:  # in chunks: progress moves, and the record count stays even
                k = min(need, CHUNK_DRAWS)
                rec = run_chains(cs, self.walk, k * thin, thin, self.params, self.workers)
                draws = np.concatenate([draws, rec], axis=1)
                need -= k
                if report is not None:
                    report(min(size, c * draws.shape[1] // 2), size)
            keep, dropped, last = select_candidates(draws, self._last)
            if len(keep) >= size:
                break
            need = 2 * -(-(size - len(keep)) // c)
        else:
            raise ConvergenceError(f"the {self.walk} chains keep repeating their states: only {len(keep)} of {size} "
                                   "draws are fit for release; use another walk")
        self._last = last
        # round-robin from the chain after the one that gave the last draw used (the first ``size``)
        keep = keep[np.lexsort(((keep[:, 0] - self._next) % c, keep[:, 1]))]
        self._next = int(keep[size - 1, 0]) + 1
        # (chain, step): record j of a chain is (j + 1)·spacing steps after its lead-in from its public start
        sources = np.column_stack([keep[:, 0], self._lead() + (keep[:, 1] + self.records[keep[:, 0]] + 1) * thin])
        self.records = self.records + draws.shape[1]
        amb = self.body.to_ambient(self.rounding.to_span(draws[keep[:, 0], keep[:, 1]]))
        st = sum(ch.stats for ch in cs) - stats0
        cert, total = self.cert, c * draws.shape[1]
        self.last_info = SamplingInfo(
            walk=self.walk, chains=c, steps=total * thin + started * self._lead(), thin=thin,
            warmup=cert.warmup if started else 0, draws=total, rhat=np.array([cert.max_rhat]),
            ess=np.array([cert.min_ess / cert.pool * total]), seconds=time.perf_counter() - t0,
            converged=cert.passed, pivots=sum(ch.pivots for ch in cs) - pivots0,
            rounding_iterations=self.rounding.iterations,
            extra={"rejected": int(st[0]), "reflections": int(st[1]), "tau": cert.tau, "released": len(amb),
                   "repeats_dropped": dropped, "sources": sources, "chains_started": started,
                   "stationary_start": True, "spacing": 2 * thin, "certificate": cert.as_dict()})
        return amb, self.last_info


def certificate_claim(cert: Certificate) -> str:
    """What a release from a certified body rests on, in one phrase (the privacy claim's; the
    certificate itself, with its date, is the claim's ``details["certificate"]``)."""
    return (f"each draw W = {cert.warmup} steps after its chain's public stationary start or its previous "
            f"released draw, chains certified once for this workload "
            f"(max R-hat {cert.max_rhat:.4f}, min ESS {cert.min_ess:.0f}/{cert.pool}, gauge KS p "
            f"{cert.gauge_ks_p:.3f}; knorm {cert.version})")


# body -> {walk: Certified}: weak, it goes with the body (as its rounding, sampler._ROUNDINGS)
_CERTIFIED: weakref.WeakKeyDictionary[SymmetricHull, dict[str, Certified]] = weakref.WeakKeyDictionary()


def certified_of(body: SymmetricHull, walk: str = "billiard", workers: int | Executor | None = None,
                 progress: Any = None) -> Certified:
    """The body's certification for ``walk``, computed once per body and process (:func:`certify`)."""
    per = _CERTIFIED.setdefault(body, {})
    if walk not in per:
        per[walk] = certify(body, walk=walk, workers=workers, progress=progress)
        for hook in ON_CERTIFIED:  # the cache of prepared workloads (knorm.walks.prepared registers it)
            hook(body, per[walk])
    return per[walk]


# called as hook(body, certified) after certified_of certifies a body (not for a file's certification)
ON_CERTIFIED: list[Callable[[SymmetricHull, Certified], None]] = []


def known_moments(body: SymmetricHull, walk: str | None = None) -> PoolMoments | None:
    """The pool moments of the body's certification (for ``walk``; None: any walk's — they are
    moments of Uniform(K)) if this process has one (a prepared file's, or one made here), else
    None: never certifies."""
    per = _CERTIFIED.get(body, {})
    found = [c.moments for w, c in per.items() if c.moments is not None and walk in (None, w)]
    return found[0] if found else None


def cache_certified(body: SymmetricHull, certified: Certified) -> None:
    """Make ``certified`` the body's (:func:`certified_of`): a prepared workload's, restored from its file."""
    _CERTIFIED.setdefault(body, {})[certified.certificate.walk] = certified
