"""``Sampler`` and ``sample_uniform``: approximately uniform draws from K, fit for release."""

from __future__ import annotations

import os
import time
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._blas import on_one_blas_thread
from .._rng import as_generator
from .._validate import check_flag, check_memory, is_int, positive_int, short_repr
from ..body.hull import SymmetricHull
from ..diagnostics import ess as _ess
from ..diagnostics import rhat as _rhat
from ..errors import ConvergenceError, ConvergenceWarning
from .chains import (BLOCK, Chain, check_params, check_workers, default_params, run_chains, start_states,
                     walk_id)
from .checkpoint import CHAIN_KEYS, Checkpoint, PublicSnapshot, fingerprint
from .ledger import mark
from .rounding import Rounding, round_body


class ChainDiagnostics(NamedTuple):
    """Per-coordinate diagnostics of a sampler's chains (:meth:`Sampler.chain_diagnostics`)."""

    ess: NDArray[np.float64]
    rhat: NDArray[np.float64]


@dataclass
class SamplingInfo:
    """Diagnostics of one sampler run (:meth:`Sampler.run`, :func:`sample_uniform`).

    ``rhat`` / ``ess``: split R-hat and bulk ESS per ambient coordinate, computed on
    the pool of ``draws`` thinned records (``chains`` chains) from which the released
    draws were selected (``extra["released"]``, see :class:`Sampler`). ``steps``: walk
    steps over all chains in this run (pilot and warm-up included); ``thin``,
    ``warmup`` (steps per chain before the first record: the first run only);
    ``seconds``: wall time; ``converged``: min ESS ≥ draws/2, max R-hat < 1.01 and at
    most 1% of the candidates dropped as repeats.
    """

    walk: str
    chains: int
    steps: int
    thin: int
    warmup: int
    draws: int
    rhat: NDArray[np.float64]
    ess: NDArray[np.float64]
    seconds: float
    converged: bool
    pivots: int
    rounding_iterations: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def min_ess(self) -> float:
        return float(np.min(self.ess))

    @property
    def max_rhat(self) -> float:
        return float(np.max(self.rhat))

    @property
    def samples_per_second(self) -> float:
        """Draws fit for release per second (``extra["released"]``; all records if unknown)."""
        n = self.extra.get("released", self.draws)
        return n / self.seconds if self.seconds > 0 else np.inf

    @property
    def ess_per_second(self) -> float:
        return self.min_ess / self.seconds if self.seconds > 0 else np.inf

    def summary(self) -> str:
        resumed = (f" (resumed from a checkpoint after {self.extra['seconds_before_resume']:.2f} s; times are the "
                   "whole run's)") if self.extra.get("resumed") else ""
        return (
            f"{self.walk}: {self.extra.get('released', self.draws)} draws fit for release from {self.draws} records "
            f"of {self.chains} chains, thin {self.thin}, "
            f"{self.steps} steps in {self.seconds:.2f} s ({self.samples_per_second:.0f} samples/s); "
            f"max R-hat {self.max_rhat:.4f}, min bulk ESS {self.min_ess:.0f} "
            f"({self.ess_per_second:.0f} ESS/s){resumed}"
        )


DEFAULT_CHAINS = 8  # fixed (never the core count): seeded draws are identical on every machine
ROUNDING_CHAINS = 8


def default_chains() -> int:
    """The default chain count, ``DEFAULT_CHAINS`` = 8 on every machine (enough for R-hat;
    threads run them in parallel, and ``workers`` never changes seeded results)."""
    return DEFAULT_CHAINS


def as_body(body_or_F: SymmetricHull | ArrayLike) -> SymmetricHull:
    return body_or_F if isinstance(body_or_F, SymmetricHull) else SymmetricHull(body_or_F)


# body -> its Rounding: the sampling layer's cache (weak: it goes with the body), not
# state written on the body object
_ROUNDINGS: weakref.WeakKeyDictionary[SymmetricHull, Rounding] = weakref.WeakKeyDictionary()


@on_one_blas_thread
def rounding_of(body: SymmetricHull, workers: int | Executor | None = None,
                progress: Callable[[int, int], object] | None = None, chains: int = ROUNDING_CHAINS) -> Rounding:
    """The body's rounding (computed once per body and cached; deterministic, ``chains`` chains,
    default ``ROUNDING_CHAINS``; its estimates averaged over the body's symmetries,
    :attr:`~knorm.body.hull.SymmetricHull.symmetry`).

    ``progress``: None, or ``progress(iteration, max_iter)`` (see :func:`round_body`),
    called only when the rounding is computed; so is ``chains`` used only then (a body's cached
    rounding, e.g. a prepared workload's, is returned whatever its chain count).
    """
    if body not in _ROUNDINGS:
        _ROUNDINGS[body] = round_body(body.frame, chains=positive_int("chains", chains), workers=workers,
                                      progress=progress, symmetry=body.symmetry)
    return _ROUNDINGS[body]


def cache_rounding(body: SymmetricHull, rounding: Rounding) -> None:
    """Make ``rounding`` the body's (:func:`rounding_of`): a prepared workload's, restored
    from its file (:mod:`knorm.walks.prepared`) instead of computed."""
    _ROUNDINGS[body] = rounding


def rounding_progress(progress: Any) -> Callable[[int, int], None] | None:
    """The rounding's progress report for a sampler's ``progress`` option.

    None when ``progress`` is None; its ``rounding`` method if it has one (the command
    line's bar); otherwise a tqdm bar on stderr (shown only on a terminal) counting the
    rounding's iterations.
    """
    if progress is None:
        return None
    if callable(getattr(progress, "rounding", None)):
        return progress.rounding
    bar: Any = None

    def report(it: int, total: int) -> None:
        nonlocal bar
        from tqdm.auto import tqdm

        if bar is None:
            bar = tqdm(total=total, desc="rounding K", unit="iteration", leave=False, disable=None)
        bar.update(it - bar.n)
        if it >= total:
            bar.close()

    return report


TARGET_ESS_FRACTION = 0.6  # aimed-for ESS per pooled draw; 0.5 is certified, 0.1 absorbs error in τ


def thinning_for(tau: float, target: float = TARGET_ESS_FRACTION) -> int:
    """Smallest thinning k with ESS per kept draw >= ``target`` under an AR(1) model.

    An AR(1) chain with integrated autocorrelation time τ has lag-1 correlation
    ρ = (τ-1)/(τ+1); keeping every k-th step leaves ESS/draw = (1-ρ^k)/(1+ρ^k).
    """
    if not np.isfinite(tau) or tau <= 1.0:
        return 1
    rho = (tau - 1.0) / (tau + 1.0)
    return max(1, int(np.ceil(np.log((1.0 - target) / (1.0 + target)) / np.log(rho))))


def uniform_covariance(body: SymmetricHull, *, scaled: bool = True) -> NDArray[np.float64]:
    """Covariance of Uniform(K) in ambient coordinates (d × d, rank = dim).

    Exact for cross-polytope / box images; otherwise the rounding's estimate (billiard
    draws, at least 20 per dimension). ``scaled=False``: in units of the body's internal
    scale² (the same eigenvectors; representable for any scale of F).
    """
    s = body.exact_structure
    C = s.covariance_frame() if s is not None else rounding_of(body).covariance
    Q = body.span_basis * body._scale if scaled else body.span_basis
    return Q @ C @ Q.T


def _start_points(frame: Any, k: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Dispersed starting points inside the frame's body: F·w with random ‖w‖₁ ≤ 1."""
    W = rng.standard_exponential((k, frame.n)) * rng.choice([-1.0, 1.0], size=(k, frame.n))
    W /= np.abs(W).sum(axis=1, keepdims=True)
    W *= rng.random((k, 1)) ** (1.0 / frame.r)
    return W @ frame.Ft


CHUNK_DRAWS = 64  # records per chain between progress reports / checkpoint opportunities (even), at most
POOL_PIECES = 10  # and at least this many reports of a pool
REPORT_EVERY = 30.0  # seconds: a pool chunk that took longer makes the next ones shorter (a census tenth: 3.5 min)
WARMUP_PIECES = 10  # progress reports of a warm-up
WARMUP_TAUS = 20  # warm-up before the first record: at least 20·τ steps per chain (see Sampler)
MAX_REPEAT_FRACTION = 0.01  # a certified run drops at most 1% of its release candidates as repeats
MAX_RHAT = 1.01  # a run's split R-hat bound (a certification's is its own: knorm.walks.certify.rhat_limit)


def _even(k: int) -> int:
    return int(k) + (int(k) & 1)


def record_gauges(chains: list[Chain], k: int) -> NDArray[np.float64] | None:
    """The gauges of the ``k`` records each chain's last run kept (:attr:`Chain.record_gauges`:
    exact, from the walk's own oracle state), ``(chains, k)``; None if a chain has none."""
    g = [c.record_gauges for c in chains]
    if any(x is None or x.shape[0] != k for x in g):
        return None
    return np.array(g, dtype=np.float64).reshape(len(chains), k)


def pool_chunk(per_chain: int) -> int:
    """Records per chain between a pool's progress reports and snapshots: ``per_chain/POOL_PIECES``
    rounded up to an even number, between 2 and ``CHUNK_DRAWS``. Chains draw their randomness in
    fixed blocks, so the chunks never change a bit of the result."""
    return max(2, min(CHUNK_DRAWS, _even(-(-int(per_chain) // POOL_PIECES))))


def shorter_chunk(chunk: int, done: int, seconds: float) -> int:
    """The next chunk of a pool after one of ``done`` records per chain took ``seconds``: shorter
    (even, at least 2) where that took more than ``REPORT_EVERY`` s, so a long pool's progress and
    snapshots come about that often (at census size a tenth of the pool took 3.5 min); else the same.
    The chains draw their randomness in fixed blocks: no chunk size changes a bit of the result."""
    if seconds <= REPORT_EVERY or done <= 2:
        return chunk
    return max(2, min(chunk, _even(int(done * REPORT_EVERY / seconds))))


def advance(chains: list[Chain], walk: str, steps: int, params: Any, workers: Any, progress: Any = None) -> None:
    """Run every chain ``steps`` steps keeping nothing (a warm-up), in ``WARMUP_PIECES`` pieces
    reported to ``progress.warmup(done, steps)`` when it has that method. Chains draw their
    randomness in fixed blocks, so the pieces never change a bit of the result."""
    report = getattr(progress, "warmup", None)
    piece = max(1, -(-steps // WARMUP_PIECES))
    done = 0
    while done < steps:
        k = min(piece, steps - done)
        run_chains(chains, walk, k, k, params, workers)
        done += k
        if callable(report):
            report(done, steps)


def select_candidates(draws: NDArray[np.float64], last: NDArray[np.float64]
                      ) -> tuple[NDArray[np.int64], int, NDArray[np.float64]]:
    """Release candidates of records ``(chains, k, r)`` (k even, each chain's records counted
    from an even index): the odd records, less those equal to their chain's previous
    candidate (``last``: each chain's last candidate before these records, NaN if none).
    Returns the ``(chain, position)`` pairs ordered round-robin (by position, then chain), the
    number dropped as repeats, and each chain's last candidate now."""
    cand = draws[:, 1::2]
    prev = np.concatenate([last[:, None], cand[:, :-1]], axis=1)
    repeat = np.all(cand == prev, axis=2)
    c, j = np.nonzero(~repeat)
    order = np.lexsort((c, j))
    now = cand[:, -1].copy() if cand.shape[1] else last
    return np.column_stack([c[order], 2 * j[order] + 1]), int(repeat.sum()), now


class Sampler:
    """Rounded random-walk chains over ``K = F·B₁ⁿ`` that continue from call to call.

    ``Sampler(body_or_F, *, walk="billiard", chains=None, rng=None, min_draws=1000,
    max_steps=None, workers=None, progress=None, checkpoint=None, params=None)``; the
    arguments are those of :func:`sample_uniform` (``params``: walk parameters in frame
    units, default :func:`~knorm.walks.chains.default_params`; only values that keep
    Uniform(K) invariant, no ball clip: :func:`~knorm.walks.chains.check_params`;
    mechanisms take none). :meth:`sample` returns
    ``size`` draws, :meth:`run` all the draws of one run; every call continues the
    chains from their last states.

    **Start and warm-up.** ``chains`` (default ``DEFAULT_CHAINS`` = 8 on every machine)
    chains start from the rounding's final states (a deterministic, public function of
    F) or, if there are fewer of those than chains, from dispersed random points. Before
    its first record each chain runs ``max(pilot, ⌈20τ⌉)`` steps, τ the integrated
    autocorrelation time per step (the rounding's for the billiard walk, else measured by
    a pilot run). Under an AR(1) model with that τ, ``corr(X_t, X_0) = ρ^t`` with
    ``ρ = (τ−1)/(τ+1) ≤ e^{−2/(τ+1)}``, so after ``t = 20τ`` steps it is at most
    ``e^{−40τ/(τ+1)} ≤ e^{−20} ≈ 2·10⁻⁹`` (τ ≥ 1): the start is forgotten. Later runs
    continue the chains where they stopped: no restart, no second warm-up.

    **Records.** A run keeps every ``thin``-th state (:func:`thinning_for`, 0.6 ESS per
    record under AR(1)), ``max(2·size, min_draws)`` records in all (an even number per
    chain). Where the rounding's τ plans ``thin > 1`` the first run first tries thinning 1 on
    a quarter of its pool and keeps it if that reaches 0.6 ESS per record on the ambient
    coordinates (:meth:`_pilot`: the rounding's τ is an overestimate). Steps are counted,
    never accepted moves: the ball walk's jump chain (accepted moves only) has stationary
    density ∝ the acceptance probability, not uniform.

    **Certification.** Min bulk ESS ≥ records/2 and max split R-hat < 1.01 over the
    ambient coordinates of the pool, and at most 1% of the candidates dropped as repeats
    (below); ``thin`` doubles (and the pool restarts) while ESS or repeats fail, the pool
    grows while R-hat fails, within ``max_steps`` steps per chain (default
    ``max(10⁵, 200·r·records/chains)``) beyond the first pass. ``info.converged`` says
    whether the run passed.

    **Draws fit for release.** Only records with an odd index in their chain's record
    sequence (counted across runs) are candidates, so no two released draws are
    neighbours in a chain (AR(1) correlation ≤ ρ^{2·thin} ≤ 1/16). A candidate equal to
    the chain's previous candidate is dropped (the ball walk, and a billiard trajectory
    with too many reflections, stay put on rejection; a continuous move never returns
    exactly), so no draw repeats. The rest come round-robin: by record position, then
    chain, so consecutive draws come from different chains. Dropping is a selection:
    a candidate is dropped iff its chain stood still for all ``2·thin`` steps, with
    probability s(x); the kept law has density ∝ 1 − s(x), within total variation
    ``q/(1−q)`` of the chain's law, q = E s estimated by the dropped fraction
    (``info.extra["repeats_dropped"]``), and certification bounds it by 1%.

    Memory is estimated before anything is allocated: a request that would need more
    than half the physical memory (``size``, ``min_draws``, ``chains``) is refused with
    a ValueError.

    **Chains.** The pool of the last run stays (until the next run starts):
    :meth:`get_chain`, :meth:`get_record_index`, :meth:`chain_diagnostics`,
    :meth:`to_inference_data`.
    """

    STAGE = ""  # prefix of the stages this sampler marks in an active ledger (knorm.walks.ledger)

    @on_one_blas_thread
    def __init__(self, body_or_F: SymmetricHull | ArrayLike, *, walk: str = "billiard", chains: int | None = None,
                 rng: np.random.Generator | int | None = None, min_draws: int = 1000, max_steps: int | None = None,
                 workers: int | Executor | None = None, progress: Callable[[int, int], object] | None = None,
                 checkpoint: Checkpoint | PublicSnapshot | None = None, params: ArrayLike | None = None) -> None:
        walk_id(walk)
        self.walk = walk
        self.nchains = DEFAULT_CHAINS if chains is None else positive_int("chains", chains)
        self.min_draws = positive_int("min_draws", min_draws)
        self.max_steps = positive_int("max_steps", max_steps, allow_none=True)
        self.workers = check_workers(workers)
        if progress is not None and not callable(progress):
            raise ValueError(f"progress must be None or callable, got {short_repr(progress)}")
        if checkpoint is not None and not isinstance(checkpoint, (Checkpoint, PublicSnapshot)):
            raise TypeError(f"checkpoint must be None, a knorm.walks.checkpoint.Checkpoint or PublicSnapshot, got "
                            f"{type(checkpoint).__name__}")
        if checkpoint is not None and rng is None:
            raise ValueError("checkpoints need a seeded rng (an int or a Generator): fresh entropy cannot be resumed")
        self._gen = as_generator(rng)
        self.progress, self.checkpoint = progress, checkpoint
        self.body = as_body(body_or_F)
        self._params = None if params is None else check_params(walk, params, self.body.dim)
        check_memory("chains", chains, self._chain_bytes())
        check_memory("min_draws", min_draws, self._pool_bytes(self.min_draws))
        self.chains: Any = None  # set up on the first run (a list of Chain)
        self.tau: Any = None  # float and int from the first run's warm-up on
        self.thin: Any = None
        self.warm = False
        self._tau_from_rounding = False  # τ (and the thinning plan) from the rounding: see _pilot
        self._records = 0  # records per chain made so far (all runs, discarded pools included)
        self.last_info: SamplingInfo | None = None
        self._kept: Any = None  # (records, index of the first) of the last run's pool: get_chain
        self._kept_gauges: NDArray[np.float64] | None = None  # their gauges, from the walk (billiard), else None
        if checkpoint is not None:  # a resumed run must be this sampler's: matrix, walk, sizes, params, seed
            checkpoint.bind("Sampler", self.body._source, walk, self.nchains, self.min_draws, self.max_steps, self._params,
                            self._gen.bit_generator.state)

    # -- memory estimates (bytes) ---------------------------------------------------
    def _chain_bytes(self) -> int:
        r, n = self.body.dim, self.body.frame.n
        return 8 * self.nchains * (4 * BLOCK * (r + 2) + 3 * r * r + 4 * n)

    def _pool_bytes(self, records: int) -> int:
        """Frame, span and ambient copies of the pool plus the diagnostics' work space."""
        records = max(int(records), 4 * self.nchains)
        return 8 * records * (2 * self.body.dim + 6 * self.body.ambient_dim)

    # -- set-up ---------------------------------------------------------------------
    def _setup(self) -> None:
        if self.chains is not None:
            return
        self.rounding = rnd = rounding_of(self.body, self.workers, rounding_progress(self.progress))
        self.frame = rnd.frame
        self.params = (default_params(self.walk, self.frame, self.workers) if self._params is None
                       else check_params(self.walk, self._params, self.frame.r, self.frame))
        child = self._gen.spawn(self.nchains)
        self._warm_start = len(rnd.points) >= self.nchains
        starts = rnd.points[: self.nchains] if self._warm_start else _start_points(self.frame, self.nchains,
                                                                                   self._gen)
        states = start_states(self.frame, starts, self.workers)  # each chain's crash and solve, in threads
        self.chains = [Chain(self.frame, x0, g, st) for x0, g, st in zip(starts, child, states)]
        self._last = np.full((self.nchains, self.frame.r), np.nan)  # each chain's last candidate

    def _warm_up(self, budget: int) -> int:
        """Measure τ (unless the rounding did) and run ⌈20τ⌉ steps in all; returns steps per chain."""
        cs, walk, r = self.chains, self.walk, self.frame.r
        used = 0
        self._tau_from_rounding = self._warm_start and walk == "billiard"
        if self._tau_from_rounding:
            tau = self.rounding.tau  # chains start from the rounding's states, whose τ was measured there
        else:
            # pilot: the first half is discarded (unless warm-started), the rest estimates τ
            pilot = max(200, 20 * r) if walk != "billiard" else max(100, 4 * r)
            while True:
                rec = run_chains(cs, walk, pilot, 1, self.params, self.workers)
                used += pilot
                half = rec if self._warm_start else rec[:, pilot // 2 :]
                tau = half.shape[0] * half.shape[1] / float(np.min(_ess(half)))
                if tau * 20 <= half.shape[1] or used * 3 > budget:
                    break
                pilot *= 2
        rest = int(np.ceil(WARMUP_TAUS * tau)) - used
        if rest > 0:
            advance(cs, walk, rest, self.params, self.workers, self.progress)
            used += rest
        self.tau, self.thin, self.warm = float(tau), thinning_for(tau), True
        return used

    def _pool_rhat(self, amb: NDArray[np.float64], total: int) -> tuple[NDArray[np.float64], float]:
        """The pool's R-hat per ambient coordinate and the bound it must stay below: split R-hat
        (:func:`knorm.diagnostics.rhat`) and ``MAX_RHAT`` (a certification's sampler measures
        its own: :mod:`knorm.walks.certify`)."""
        return np.atleast_1d(_rhat(amb)), MAX_RHAT

    def _pilot(self, per_chain: int, offset: int
               ) -> tuple[NDArray[np.float64], int, int, int, NDArray[np.float64] | None]:
        """Thinning 1 tried on a quarter of the first pool: kept if its ESS per record on the
        ambient coordinates (the certificate's functionals) reaches TARGET_ESS_FRACTION. Only
        where τ is the rounding's (the warm-started billiard walk; other walks measure τ on
        their own chains in the warm-up's pilot).

        The plan ``thinning_for(τ)`` uses the rounding's τ, the largest over every coordinate and
        the squared radius estimated from few records: an overestimate, and a coin flip at the
        cliff τ = 5/3 between thinning 1 and 2 (at 2-way marginals (2,3,4,5,6), 3 row orders of 6
        planned 2 while the walk's τ on the ambient coordinates is 1.2). The pilot's records are
        post-warm-up states at thinning 1: kept, they start the pool (the certificate is still
        judged on the whole pool); dropped, they count as warm-up (``offset`` moves past them,
        so record parity and the candidates' spacing are unchanged). Returns ``(draws, need,
        offset, steps per chain, the kept records' gauges or None)``. Reported to
        ``progress.pilot(steps, k)`` when it has that method (at census size the pilot is minutes).
        """
        k = _even(max(4, per_chain // 4))
        report = getattr(self.progress, "pilot", None)  # in WARMUP_PIECES pieces: the same bits
        piece = max(1, -(-k // WARMUP_PIECES))
        parts: list[NDArray[np.float64]] = []
        gauges: list[NDArray[np.float64] | None] = []
        while (done := sum(x.shape[1] for x in parts)) < k:
            parts.append(run_chains(self.chains, self.walk, min(piece, k - done), 1, self.params, self.workers))
            gauges.append(record_gauges(self.chains, parts[-1].shape[1]))
            if callable(report):
                report(min(done + piece, k), k)
        rec = np.concatenate(parts, axis=1)
        known = [g for g in gauges if g is not None]
        g = np.concatenate(known, axis=1) if len(known) == len(gauges) else None
        amb = self.body.to_ambient(self.rounding.to_span(rec))
        if float(np.min(np.atleast_1d(_ess(amb)))) >= TARGET_ESS_FRACTION * rec.shape[0] * k:
            self.thin = 1
            return rec, per_chain - k, offset, k, g
        return np.empty((self.nchains, 0, rec.shape[2])), per_chain, offset + k, k, np.empty((self.nchains, 0))

    def _fingerprint(self, size: int, pool: int, budget: int) -> str:
        parts = [self.frame.Ft, self.walk, size, pool, self.nchains, budget, self.warm, self.thin, self.tau,
                 self.params, self._records, self._last]
        for c in self.chains:
            st = c.state_dict()
            parts += [st[k] for k in CHAIN_KEYS] + [st["rng"]]
        return fingerprint(*parts)

    # -- selection ------------------------------------------------------------------
    def _select(self, draws: NDArray[np.float64], commit: bool = False) -> tuple[NDArray[np.int64], int]:
        """Release candidates of a pool (:func:`select_candidates`); ``commit``: remember each
        chain's last candidate for the next run."""
        keep, dropped, last = select_candidates(draws, self._last)
        if commit:
            self._last = last
        return keep, dropped

    # -- runs -----------------------------------------------------------------------
    @on_one_blas_thread
    def run(self, size: int) -> tuple[NDArray[np.float64], SamplingInfo]:
        """One run of at least ``size`` draws fit for release, continuing the chains.

        Returns ``(draws, info)``: ``draws`` (m ≥ size, d), ambient coordinates, in release
        order; ``info`` a :class:`SamplingInfo` (``converged``: certified or not; never
        warns). ``info.extra``: ``sources`` (m, 2) chain and record index of each draw,
        ``released`` m, ``repeats_dropped``, ``pool_repeats`` (records equal to the one
        before, which a selection from the whole pool could release twice), ``tau``,
        ``pilot`` (steps per chain of a first run's thinning-1 pilot, 0 if none: :meth:`_pilot`) and
        ``pilot_kept`` (its records started the pool), ``resumed`` (continued from a checkpoint
        snapshot) and ``seconds_before_resume``
        (the snapshot's time, included in ``info.seconds``: the whole run's time).
        """
        t0 = time.perf_counter()
        size = positive_int("size", size)
        pool = max(2 * size, self.min_draws)
        check_memory("size", size, self._pool_bytes(pool))
        self._kept = None  # the previous run's records go before this run allocates its pool
        self._kept_gauges = None
        self._setup()
        cs, nchains, r, walk = self.chains, self.nchains, self.frame.r, self.walk
        per_chain = max(4, _even(-(-pool // nchains)))  # the diagnostics need 4 records per chain
        budget = self.max_steps if self.max_steps is not None else max(100_000, 200 * r * per_chain)
        stats0 = sum(c.stats for c in cs)
        pivots0 = sum(c.pivots for c in cs)
        fp, snap = "", None
        pilot, pilot_kept = 0, False  # steps per chain of a thinning-1 pilot (_pilot), and whether it was kept
        before = 0.0  # seconds this run spent before its snapshot (a resumed run)
        if self.checkpoint is not None:
            fp = self._fingerprint(size, pool, budget)
            snap = self.checkpoint.load(fp)
        if snap is not None:
            for c, st in zip(cs, snap["chains"]):
                c.load_state_dict(st)
            used, warmup, need, offset = (int(snap[k]) for k in ("used", "warmup", "need", "offset"))
            pilot, pilot_kept = int(snap.get("pilot", 0)), bool(snap.get("pilot_kept", 0))
            self.tau, self.thin, self.warm = float(snap["tau"]), int(snap["thin"]), True
            draws = np.array(snap["draws"])
            gauges = np.array(snap["gauges"]) if "gauges" in snap else None  # None: solved if needed
            before = float(snap["seconds"])
            mark(self.STAGE + "pool")  # resumed past its warm-up
        else:
            first = not self.warm
            if first:
                mark(self.STAGE + "warm-up")
            used = warmup = self._warm_up(budget) if first else 0
            mark(self.STAGE + "pool")  # its thinning-1 pilot included
            draws, need, offset = np.empty((nchains, 0, r)), per_chain, self._records
            gauges = np.empty((nchains, 0))
            if first and self.thin > 1 and self._tau_from_rounding:
                draws, need, offset, pilot, gauges = self._pilot(per_chain, offset)
                used += pilot
                pilot_kept = draws.shape[1] > 0

        def save() -> None:
            if self.checkpoint is not None:
                self.checkpoint.save(fp, cs, {"used": used, "warmup": warmup, "tau": self.tau, "thin": self.thin,
                                              "need": need, "offset": offset, "pilot": pilot,
                                              "pilot_kept": int(pilot_kept),
                                              "seconds": before + time.perf_counter() - t0,
                                              **({} if gauges is None else {"gauges": gauges})}, draws)

        if snap is None and used > 0:
            save()  # after the warm-up (and pilot): at census size minutes that a resume need not redo
        short_runs = 0
        chunk = pool_chunk(per_chain)
        # the records the progress counts to: the pool, or (a public pool only: a certification's,
        # whose records are never noise) as far as an extension past it goes
        target, shows = pool, bool(getattr(self.progress, "public_records", False))
        if self.progress is not None and need > 0:  # the stage opens now, not after its first chunk (minutes
            self.progress(min(nchains * draws.shape[1], target), target)  # at census size)
        while True:
            while need > 0:
                k = min(need, chunk)
                t_chunk = time.perf_counter()
                rec = run_chains(cs, walk, k * self.thin, self.thin, self.params, self.workers)
                chunk = shorter_chunk(chunk, k, time.perf_counter() - t_chunk)
                used += k * self.thin
                need -= k
                draws = np.concatenate([draws, rec], axis=1)
                gk = record_gauges(cs, rec.shape[1])
                gauges = None if gauges is None or gk is None else np.concatenate([gauges, gk], axis=1)
                if self.progress is not None:
                    self.progress(min(nchains * draws.shape[1], target), target)
                save()
            amb = self.body.to_ambient(self.rounding.to_span(draws))
            e = np.atleast_1d(_ess(amb))
            total = nchains * draws.shape[1]
            rh, rhat_limit = self._pool_rhat(amb, total)
            keep, dropped = self._select(draws)
            mixed = float(np.min(e)) >= total / 2 and dropped <= MAX_REPEAT_FRACTION * total / 2
            ok = mixed and float(np.max(rh)) < rhat_limit and total >= pool
            if (ok or used + per_chain * self.thin > budget) and len(keep) >= size:
                break
            if ok or used + per_chain * self.thin > budget:
                # repeats left fewer than size draws: a few more records (first pass rule)
                short_runs += 1
                if short_runs > 20:
                    raise ConvergenceError(f"the {walk} chains keep repeating their states: only {len(keep)} of "
                                           f"{size} draws are fit for release; use another walk")
                need = _even(2 * -(-(size - len(keep)) // nchains) + 2)
            elif not mixed:
                self.thin *= 2
                offset += draws.shape[1]
                draws = draws[:, :0]  # restart the pool at the coarser thinning
                gauges = None if gauges is None else gauges[:, :0]
                need = per_chain
            else:
                # R-hat only: extend in quarter steps (R-hat is re-checked after each one,
                # a mild form of optional stopping; poorly mixed chains keep failing it)
                need = _even(max(2, per_chain // 4))
            target = pool
            if shows and self.progress is not None and need and nchains * draws.shape[1] >= pool:
                target = nchains * (draws.shape[1] + need)  # an extension: shown before it runs
                self.progress(nchains * draws.shape[1], target)
        if self.checkpoint is not None:  # finished: its snapshot is deleted, never loaded again
            self.checkpoint.finish(fp)
        keep, dropped = self._select(draws, commit=True)
        self._records = offset + draws.shape[1]
        self._kept = (draws, offset)
        self._kept_gauges = gauges
        out = amb[keep[:, 0], keep[:, 1]]
        sources = keep + np.array([0, offset])
        stats = sum(c.stats for c in cs) - stats0
        pool_repeats = int(np.all(draws[:, 1:] == draws[:, :-1], axis=2).sum())
        self.last_info = SamplingInfo(
            walk=walk, chains=nchains, steps=used * nchains, thin=self.thin, warmup=warmup, draws=total, rhat=rh,
            ess=e, seconds=before + time.perf_counter() - t0, converged=ok,
            pivots=sum(c.pivots for c in cs) - pivots0,
            rounding_iterations=self.rounding.iterations,
            extra={"rejected": int(stats[0]), "reflections": int(stats[1]), "tau": self.tau, "released": len(out),
                   "repeats_dropped": dropped, "pool_repeats": pool_repeats, "sources": sources,
                   "resumed": snap is not None, "seconds_before_resume": before,
                   "pilot": pilot, "pilot_kept": pilot_kept, "rhat_limit": rhat_limit},
        )
        return out, self.last_info

    @overload
    def sample(self, size: int, return_info: Literal[False] = ...) -> NDArray[np.float64]: ...

    @overload
    def sample(self, size: int, return_info: Literal[True]) -> tuple[NDArray[np.float64], SamplingInfo]: ...

    def sample(self, size: int, return_info: bool = False
               ) -> NDArray[np.float64] | tuple[NDArray[np.float64], SamplingInfo]:
        """The next ``size`` draws fit for release (continuing the chains); warns
        (:class:`ConvergenceWarning`) if the run was not certified."""
        return self._sample(size, return_info, stacklevel=3)

    def _sample(self, size: int, return_info: bool, stacklevel: int
                ) -> NDArray[np.float64] | tuple[NDArray[np.float64], SamplingInfo]:
        return_info = check_flag("return_info", return_info)
        draws, info = self.run(size)
        if not info.converged:
            warnings.warn(
                f"sampling ({self.walk}) did not certify near-independent draws within {info.steps // info.chains} "
                f"steps per chain (max_steps): min bulk ESS {info.min_ess:.0f} of {info.draws} draws, max R-hat "
                f"{info.max_rhat:.4f}, {info.extra['repeats_dropped']} repeats dropped. Raise max_steps or use "
                "another walk.",
                ConvergenceWarning,
                stacklevel=stacklevel,
            )
        return (draws[:size], info) if return_info else draws[:size]

    # -- the chains of the last run (emcee's get_chain) --------------------------------
    def _kept_records(self, discard: int, thin: int) -> NDArray[np.float64]:
        """The last run's pool (chains, k, r) in frame units, ``discard`` / ``thin`` applied (a view)."""
        if self._kept is None:
            raise RuntimeError("the sampler has no finished run to show: call run() or sample() first")
        if not is_int(discard) or discard < 0:
            raise ValueError(f"discard must be a non-negative integer, got {short_repr(discard)}")
        thin = positive_int("thin", thin)
        records, _ = self._kept
        if discard >= records.shape[1]:
            raise ValueError(f"discard must be less than the {records.shape[1]} records per chain, got {discard}")
        return records[:, discard::thin]

    def get_chain(self, *, flat: bool = False, discard: int = 0, thin: int = 1) -> NDArray[np.float64]:
        """The records of the last run, ``(chains, draws, dim)`` in span coordinates.

        The pool of the last :meth:`run` (or :meth:`sample`) from which its draws were
        selected: every ``thin``-th walk state after warm-up (the run's ``info.thin``),
        ``chains × draws`` records, here without the first ``discard`` records of each
        chain and then every ``thin``-th of the rest. Span coordinates in the body's frame
        units (``rounding.to_span`` of the walk states); ``body.to_ambient`` maps them to
        answer space, where ``draws[i] == body.to_ambient(get_chain()[c, j − s])`` for
        ``(c, j) = info.extra["sources"][i]`` and ``s = get_record_index()[0]``.
        ``flat=True``: ``(chains·draws, dim)``, chain by chain. Only the last run is kept
        (a sampler that runs often holds one pool, never a growing history).

        The records are states of random walks on K = F·B₁ⁿ: uniform draws from K, a
        function of F and the sampler's randomness, never of data, so an engine-only
        sampler may show them freely. A mechanism's sampler is another matter: its
        released draws became noise, so its records are as secret as that noise.
        """
        flat = check_flag("flat", flat)
        records = self._kept_records(discard, thin)
        span = self.rounding.to_span(records)
        return span.reshape(-1, span.shape[-1]) if flat else span

    def get_record_index(self, *, discard: int = 0, thin: int = 1) -> NDArray[np.int64]:
        """Index of each :meth:`get_chain` draw in its chain's record sequence, counted
        across runs (the numbering of ``info.extra["sources"][:, 1]``)."""
        k = self._kept_records(discard, thin).shape[1]
        start = self._kept[1] + discard
        return np.arange(start, start + k * thin, thin)

    def chain_diagnostics(self, *, per_chain: bool = False, discard: int = 0, thin: int = 1) -> ChainDiagnostics:
        """Bulk ESS and split R-hat of :meth:`get_chain`, one value per span coordinate.

        Pooled over the chains (``(dim,)`` each, :func:`knorm.diagnostics.ess` /
        :func:`~knorm.diagnostics.rhat`), or with ``per_chain=True`` each chain alone
        (``(chains, dim)``: a single chain's split R-hat compares its two halves). The
        run's ``info.ess`` / ``info.rhat`` are the same diagnostics per ambient coordinate.
        Returns ``ChainDiagnostics(ess, rhat)``.
        """
        per_chain = check_flag("per_chain", per_chain)
        z = self.get_chain(discard=discard, thin=thin)
        if z.shape[1] < 4:  # the diagnostics' own minimum, said in terms of these arguments
            raise ValueError(f"discard={short_repr(discard)} and thin={short_repr(thin)} leave {z.shape[1]} records "
                             "per chain; the diagnostics need at least 4")
        if per_chain:
            return ChainDiagnostics(np.array([_ess(c[None]) for c in z]).reshape(len(z), -1),
                                    np.array([_rhat(c[None]) for c in z]).reshape(len(z), -1))
        return ChainDiagnostics(np.atleast_1d(_ess(z)), np.atleast_1d(_rhat(z)))

    def to_inference_data(self, *, discard: int = 0, thin: int = 1) -> Any:
        """:meth:`get_chain` as ArviZ data (optional extra ``pip install 'knorm[arviz]'``).

        One posterior variable ``z`` with dims ``(chain, draw, coordinate)``; the ``draw``
        coordinate holds :meth:`get_record_index`. ArviZ 0.x returns an ``InferenceData``
        (the walk, thinning and τ as attributes of the posterior), ArviZ ≥ 1 an ``xarray.DataTree``.
        """
        try:
            import arviz as az
        except ImportError:
            raise ImportError("to_inference_data needs ArviZ, which is not installed: "
                              "pip install 'knorm[arviz]'") from None
        z = self.get_chain(discard=discard, thin=thin)
        coords = {"chain": np.arange(z.shape[0]), "draw": self.get_record_index(discard=discard, thin=thin),
                  "coordinate": np.arange(z.shape[2])}
        dims = {"z": ["coordinate"]}
        if int(az.__version__.split(".")[0]) >= 1:
            return az.from_dict({"posterior": {"z": z}}, coords=coords, dims=dims)
        attrs = {"walk": self.walk, "thin_steps": int(self.thin) * int(thin), "tau": float(self.tau),
                 "coordinates": "span (body frame units)", "inference_library": "knorm"}
        return az.from_dict(posterior={"z": z}, coords=coords, dims=dims, posterior_attrs=attrs)


@overload
def sample_uniform(body_or_F: SymmetricHull | ArrayLike, size: int, *, walk: str = ..., chains: int | None = ...,
                   rng: np.random.Generator | int | None = ..., return_info: Literal[False] = ..., min_draws: int = ...,
                   max_steps: int | None = ..., workers: int | Executor | None = ...,
                   progress: Callable[[int, int], object] | None = ..., checkpoint: Checkpoint | None = ...
                   ) -> NDArray[np.float64]: ...


@overload
def sample_uniform(body_or_F: SymmetricHull | ArrayLike, size: int, *, walk: str = ..., chains: int | None = ...,
                   rng: np.random.Generator | int | None = ..., return_info: Literal[True], min_draws: int = ...,
                   max_steps: int | None = ..., workers: int | Executor | None = ...,
                   progress: Callable[[int, int], object] | None = ..., checkpoint: Checkpoint | None = ...
                   ) -> tuple[NDArray[np.float64], SamplingInfo]: ...


def sample_uniform(body_or_F: SymmetricHull | ArrayLike, size: int, *, walk: str = "billiard",
                   chains: int | None = None, rng: np.random.Generator | int | None = None, return_info: bool = False,
                   min_draws: int = 1000, max_steps: int | None = None, workers: int | Executor | None = None,
                   progress: Callable[[int, int], object] | None = None, checkpoint: Checkpoint | None = None
                   ) -> NDArray[np.float64] | tuple[NDArray[np.float64], SamplingInfo]:
    """Approximately uniform draws from ``K = F·B₁ⁿ``: one call of a fresh :class:`Sampler`.

    Parameters
    ----------
    body_or_F : SymmetricHull or array (d, n)
    size : int -- number of returned draws.
    walk : "billiard" (default), "hit_and_run", "coordinate" or "ball".
    chains : int -- independent chains (default ``DEFAULT_CHAINS`` = 8 on every machine), run
        in parallel threads (at most ``workers`` threads; default one per CPU the process may
        use, :func:`~knorm.walks.chains.default_workers`; 1 runs them in the calling thread; or
        an executor; never changes seeded results).
    rng : Generator, int seed or None (fresh OS entropy). Same seed, same draws.
    return_info : also return a :class:`SamplingInfo`.
    min_draws : the pool holds ``max(2·size, min_draws)`` thinned records, half of which are
        release candidates. Even iid draws pass max R-hat < 1.01 (over 10 coordinates) only
        36% of the time at 400 draws and 97% at 1000, hence 1000.
    max_steps : step budget per chain for the pilot and for extending the pool beyond
        its first pass, which always runs (default ``max(10⁵, 200·r·pool/chains)``).
    progress : callable ``progress(done, target)`` called with pooled records so far.
    checkpoint : a :class:`knorm.walks.checkpoint.Checkpoint`: save snapshots and, with
        ``resume=True``, continue an interrupted run to the identical result (needs a
        seeded ``rng``; the run's snapshot is deleted when it finishes).

    Returns an array (size, d) in ambient coordinates (in the span of F), in release
    order (round-robin over chains; see :class:`Sampler` for warm-up, thinning, which
    records are returned and certification). Draws of one chain are ``2·thin`` steps apart
    (``info.extra["sources"]``), W only before each chain's first: noise for answers made from
    more than one of them rests on that spacing, not on the W argument of a mechanism's
    release (docs/design.md §3.5.1; mechanisms space every released draw W apart). Warns (:class:`ConvergenceWarning`) if the
    run was not certified. MCMC draws are approximately, not exactly, uniform.
    """
    size = positive_int("size", size)
    s = Sampler(body_or_F, walk=walk, chains=chains, rng=rng, min_draws=min_draws, max_steps=max_steps,
                workers=workers, progress=progress, checkpoint=checkpoint)
    return s._sample(size, return_info, stacklevel=3)
