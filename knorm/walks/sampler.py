"""``sample_uniform``: approximately uniform draws from K with self-chosen warm-up and thinning."""

import os
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._rng import as_generator
from .._validate import positive_int
from ..body.hull import SymmetricHull
from ..diagnostics import ess as _ess
from ..diagnostics import rhat as _rhat
from .chains import WALKS, Chain, default_params, run_chains
from .checkpoint import fingerprint
from .rounding import round_body


class ConvergenceWarning(UserWarning):
    """The sampler could not certify near-independent draws within its step budget."""


@dataclass
class SamplingInfo:
    """Diagnostics of one :func:`sample_uniform` run.

    ``rhat`` / ``ess``: split R-hat and bulk ESS per ambient coordinate, computed on
    the pool of ``draws`` thinned draws (``chains`` chains) from which the returned
    ``size`` samples were taken at random. ``steps``: walk steps over all chains
    (pilot and warm-up included); ``thin``, ``warmup`` (steps per chain discarded);
    ``seconds``: wall time; ``converged``: min ESS ≥ draws/2 and max R-hat < 1.01.
    """

    walk: str
    chains: int
    steps: int
    thin: int
    warmup: int
    draws: int
    rhat: np.ndarray
    ess: np.ndarray
    seconds: float
    converged: bool
    pivots: int
    rounding_iterations: int
    extra: dict = field(default_factory=dict)

    @property
    def min_ess(self):
        return float(np.min(self.ess))

    @property
    def max_rhat(self):
        return float(np.max(self.rhat))

    @property
    def samples_per_second(self):
        return self.draws / self.seconds if self.seconds > 0 else np.inf

    @property
    def ess_per_second(self):
        return self.min_ess / self.seconds if self.seconds > 0 else np.inf

    def summary(self):
        return (
            f"{self.walk}: {self.draws} draws from {self.chains} chains, thin {self.thin}, "
            f"{self.steps} steps in {self.seconds:.2f} s ({self.samples_per_second:.0f} samples/s); "
            f"max R-hat {self.max_rhat:.4f}, min bulk ESS {self.min_ess:.0f} "
            f"({self.ess_per_second:.0f} ESS/s)"
        )


MAX_DEFAULT_CHAINS = 16  # more chains of ~60 draws would make split R-hat and ESS unreliable


def default_chains():
    """max(4, min(cores, 16)): enough chains for R-hat, one per core up to 16; fixed per machine."""
    return max(4, min(os.cpu_count() or 1, MAX_DEFAULT_CHAINS))


def as_body(body_or_F):
    return body_or_F if isinstance(body_or_F, SymmetricHull) else SymmetricHull(body_or_F)


def rounding_of(body, workers=None):
    """The body's rounding (computed once, cached on the body; deterministic)."""
    if body._rounding is None:
        body._rounding = round_body(body.frame, chains=default_chains(), workers=workers)
    return body._rounding


TARGET_ESS_FRACTION = 0.6  # aimed-for ESS per pooled draw; 0.5 is certified, 0.1 absorbs error in τ


def thinning_for(tau, target=TARGET_ESS_FRACTION):
    """Smallest thinning k with ESS per kept draw >= ``target`` under an AR(1) model.

    An AR(1) chain with integrated autocorrelation time τ has lag-1 correlation
    ρ = (τ-1)/(τ+1); keeping every k-th step leaves ESS/draw = (1-ρ^k)/(1+ρ^k).
    """
    if not np.isfinite(tau) or tau <= 1.0:
        return 1
    rho = (tau - 1.0) / (tau + 1.0)
    return max(1, int(np.ceil(np.log((1.0 - target) / (1.0 + target)) / np.log(rho))))


def uniform_covariance(body):
    """Covariance of Uniform(K) in ambient coordinates (d × d, rank = dim).

    Exact for cross-polytope / box images; otherwise the rounding's estimate (billiard
    draws, at least 20 per dimension).
    """
    s = body.exact_structure
    C = s.covariance_frame() if s is not None else rounding_of(body).covariance
    Q = body.span_basis * body._scale
    return Q @ C @ Q.T


def _start_points(frame, k, rng):
    """Dispersed starting points inside the frame's body: F·w with random ‖w‖₁ ≤ 1."""
    W = rng.standard_exponential((k, frame.n)) * rng.choice([-1.0, 1.0], size=(k, frame.n))
    W /= np.abs(W).sum(axis=1, keepdims=True)
    W *= rng.random((k, 1)) ** (1.0 / frame.r)
    return W @ frame.Ft


CHUNK_DRAWS = 256  # draws per chain between progress reports / checkpoint opportunities


def sample_uniform(body_or_F, size, *, walk="billiard", chains=None, rng=None, return_info=False,
                   min_draws=1000, max_steps=None, workers=None, progress=None, checkpoint=None):
    """Approximately uniform draws from ``K = F·B₁ⁿ`` by a rounded random walk.

    Parameters
    ----------
    body_or_F : SymmetricHull or array (d, n)
    size : int -- number of returned draws.
    walk : "billiard" (default), "hit_and_run", "coordinate" or "ball".
    chains : int -- independent chains (default: max(4, min(cores, 16))), run in parallel threads
        (``workers`` threads, default one per core; never changes seeded results).
    rng : Generator, int seed or None (fresh OS entropy). Same seed, same draws.
    return_info : also return a :class:`SamplingInfo`.
    min_draws : pool size: the sampler draws ``max(size, min_draws)`` thinned points and
        returns a random ``size`` of them. Even iid draws pass max R-hat < 1.01 (over
        10 coordinates) only 36% of the time at 400 draws and 97% at 1000, hence 1000.
    max_steps : step budget per chain for the pilot and for extending the pool beyond
        its first pass, which always runs (default ``max(10⁵, 200·r·pool/chains)``).
    progress : callable ``progress(done, target)`` called with pooled draws so far.
    checkpoint : a :class:`knorm.walks.checkpoint.Checkpoint`: save snapshots and, with
        ``resume=True``, continue an interrupted run to the identical result (needs a
        seeded ``rng``).

    Returns an array (size, d) in ambient coordinates (in the span of F).

    The sampler rounds the body (cached), starts its chains from the rounding's final
    (stationary) states when there are enough of them, else from dispersed points,
    estimates the integrated autocorrelation time τ (measured during rounding for the
    billiard walk, else by a pilot run), thins so that an AR(1) chain with that τ would keep
    0.6 ESS per draw (:func:`thinning_for`), and extends the run until min bulk ESS ≥
    pool/2 and max R-hat < 1.01; it warns (:class:`ConvergenceWarning`) if the budget
    runs out. MCMC draws are approximately, not exactly, uniform.
    """
    t0 = time.perf_counter()
    size = positive_int("size", size)
    if walk not in WALKS:
        raise ValueError(f"walk must be one of {sorted(WALKS)}, got {walk!r}")
    nchains = default_chains() if chains is None else positive_int("chains", chains)
    gen = as_generator(rng)
    gen_start = gen.bit_generator.state
    body = as_body(body_or_F)
    rnd = rounding_of(body, workers)
    frame = rnd.frame
    r = frame.r
    params = default_params(walk, frame)
    pool = max(size, int(min_draws))
    per_chain = -(-pool // nchains)
    if max_steps is None:
        max_steps = max(100_000, 200 * r * per_chain)
    child = gen.spawn(nchains)
    warm = len(rnd.points) >= nchains
    starts = rnd.points[:nchains] if warm else _start_points(frame, nchains, gen)
    cs = [Chain(frame, x0, g) for x0, g in zip(starts, child)]
    fp = None
    snap = None
    if checkpoint is not None:
        if rng is None:
            raise ValueError("checkpoints need a seeded rng (an int or a Generator): fresh entropy cannot be resumed")
        fp = fingerprint(frame.Ft, walk, size, pool, nchains, int(max_steps), gen_start)
        snap = checkpoint.load(fp)
    if snap is not None:
        for c, st in zip(cs, snap["chains"]):
            c.load_state_dict(st)
        used, warmup, tau, thin, need = (int(snap["used"]), int(snap["warmup"]), float(snap["tau"]),
                                         int(snap["thin"]), int(snap["need"]))
        draws, done = np.array(snap["draws"]), bool(snap["done"])
    else:
        used, done = 0, False
        if warm and walk == "billiard":
            # chains start from the rounding's stationary states, whose τ was measured there
            tau = rnd.tau
        else:
            # Pilot: the first half is warm-up (unless warm-started), the rest estimates τ.
            pilot = max(200, 20 * r) if walk != "billiard" else max(100, 4 * r)
            while True:
                rec = run_chains(cs, walk, pilot, 1, params, workers)
                used += pilot
                half = rec if warm else rec[:, pilot // 2 :]
                tau = half.shape[0] * half.shape[1] / float(np.min(_ess(half)))
                if tau * 20 <= half.shape[1] or used * 3 > max_steps:
                    break
                pilot *= 2
        warmup = used
        thin = thinning_for(tau)
        draws = np.empty((nchains, 0, r))
        need = per_chain

    def save(force=False):
        if checkpoint is not None:
            checkpoint.save(fp, cs, {"used": used, "warmup": warmup, "tau": tau, "thin": thin, "need": need,
                                     "done": done}, draws, force=force)

    while True:
        while need > 0 and not done:
            k = min(need, CHUNK_DRAWS)
            rec = run_chains(cs, walk, k * thin, thin, params, workers)
            used += k * thin
            need -= k
            draws = np.concatenate([draws, rec], axis=1)
            if progress is not None:
                progress(min(draws.shape[0] * draws.shape[1], pool), pool)
            save()
        amb = body.to_ambient(rnd.to_span(draws))
        e = np.atleast_1d(_ess(amb))
        rh = np.atleast_1d(_rhat(amb))
        total = draws.shape[0] * draws.shape[1]
        ok = float(np.min(e)) >= total / 2 and float(np.max(rh)) < 1.01 and total >= pool
        if done or ok or used + per_chain * thin > max_steps:
            break
        if float(np.min(e)) < total / 2:
            thin *= 2
            draws = draws[:, :0]  # restart the pool at the coarser thinning
            need = per_chain
        else:
            # R-hat only: extend in quarter steps (R-hat is re-checked after each one,
            # a mild form of optional stopping; poorly mixed chains keep failing it)
            need = max(1, per_chain // 4)
    if not done:  # a finished run loaded from its snapshot is already saved
        done = True
        save(force=True)
    flat = amb.transpose(1, 0, 2).reshape(-1, amb.shape[-1])
    idx = gen.permutation(flat.shape[0])[:size]
    out = flat[idx]
    if not ok:
        warnings.warn(
            f"sample_uniform({walk}) did not certify near-independent draws within {max_steps} steps per chain: "
            f"min bulk ESS {np.min(e):.0f} of {total} draws, max R-hat {np.max(rh):.4f}. "
            "Raise max_steps or use another walk.",
            ConvergenceWarning,
            stacklevel=2,
        )
    if not return_info:
        return out
    info = SamplingInfo(
        walk=walk, chains=nchains, steps=used * nchains, thin=thin, warmup=warmup, draws=total, rhat=rh, ess=e,
        seconds=time.perf_counter() - t0, converged=ok, pivots=sum(c.pivots for c in cs),
        rounding_iterations=rnd.iterations,
        extra={"rejected": int(sum(c.stats[0] for c in cs)), "reflections": int(sum(c.stats[1] for c in cs)),
               "tau": tau},
    )
    return out, info
