"""The K-norm mechanism (docs/design.md §4.3): density ∝ exp(−ε‖a − Fx‖_K)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..privacy import BudgetAccountant
from .._progress import as_progress
from .._validate import check_flag, check_options, positive_int, short_repr
from ..body.hull import SymmetricHull
from ..walks.chains import walk_id
from ..walks.certify import PoolMoments, StationarySampler, certificate_claim, certified_of, known_moments
from ..walks.prepared import PreparedWorkload, body_of, check_prepared
from ..walks.sampler import ConvergenceError, Sampler, SamplingInfo, check_memory, rounding_of
from .uncertainty import UNCERTAINTY_SEED, NoiseLaw, RadialLaw
from ._base import (ErrorEstimate, Mechanism, PrivacyClaim, check_epsilon, check_finite_output, check_n_samples,
                    rms_from_draws, rms_from_mean_square,
                    check_noise_scale, check_size, in_float_range, mc_norm_estimate, scaled)


SAMPLER_OPTIONS = ("chains", "min_draws", "max_steps", "workers", "progress", "checkpoint")
PER_RUN_OPTIONS = ("min_draws", "max_steps", "checkpoint")  # options of a per-run certification (Sampler.run)
# what an answer from the per-run path rests on: its pool's draws are 2·thin steps apart along a chain, so only
# each chain's first draw is W from anything public (docs/design.md §3.5.1, "What the W argument covers")
PER_RUN_SPACING = ("per-run pool: W before each chain's first draw only, later draws 2·thin steps after the previous "
                   "one of their chain (not covered by the W argument)")


def check_sampler_options(sampler_options: dict[str, Any] | None, name: str = "sampler_options") -> dict[str, Any]:
    """``sampler_options`` as a dict of :class:`~knorm.walks.sampler.Sampler` keywords.

    Walk ``params`` are refused: they only trade speed for mixing, and a wrong one (a
    ball clip) moves the target away from Uniform(K) while the claim still says ε-DP, so
    released noise always uses the tuned defaults (docs/design.md §4.3). The remaining
    keywords never change the law the chains target. ``progress``: True shows the run's
    stages on stderr (the rounding, the warm-up, the draws, each with its count, and roughly
    how long a slow one takes: :class:`knorm._progress.StageProgress`); a callable is called as
    the sampler's ``progress``.
    """
    if isinstance(sampler_options, Mapping) and "params" in sampler_options:
        raise ValueError(f"{name}: 'params' is not accepted by mechanisms (walk parameters could move the "
                         "noise away from Uniform(K)); released noise uses the walk's default parameters")
    opts = check_options(name, sampler_options, SAMPLER_OPTIONS)
    if "progress" in opts:  # True: the stage bars of knorm._progress (rounding, warm-up, draws) on stderr
        try:
            opts["progress"] = as_progress(opts["progress"])
        except ValueError as exc:
            raise ValueError(f"{name}['progress']: {exc}") from None
        if opts["progress"] is None:
            del opts["progress"]
    return opts


class KNormMechanism(Mechanism):
    """``Fx + r·z`` with ``r ~ Gamma(dim+1, 1/ε)`` and ``z ~ Uniform(K)``, ``K = F·B₁ⁿ``.

    Pure ε-DP when z is exactly uniform: ``‖·‖_K`` is a norm and ``‖F(x−x')‖_K <= 1``.
    ``dim`` is the rank of F; for rank-deficient F the noise lives in the span of F.

    When K is a linear image of the cross-polytope or the cube (identity, prefix,
    diagonal, any invertible F, boxes) z is drawn exactly and ``privacy.sampling`` is
    "exact"; otherwise z comes from the MCMC engine (``walk``) and the claim is
    "mcmc-approximate". MCMC draws come from a body whose walk is certified once
    (docs/design.md §3.5): by the prepared workload's file, or in memory on the first draw
    (:func:`~knorm.walks.certify.certified_of`: the rounding and one certified run with a
    public seed, once per body and process). Each draw then comes from a
    :class:`~knorm.walks.certify.StationarySampler`: chains that start at the certificate's
    public stationary states (picked with ``rng``) and run its warm-up W before their first
    record; they continue from release to release. The first refill of the bank draws just
    what the release needs; later ones double what was banked, up to ``bank_size``. ``sampler_options``:
    ``chains`` (at most that many release chains), ``workers``, ``progress``; the options
    of a per-run certification, ``min_draws``, ``max_steps`` and ``checkpoint`` (a
    resumable long run), select the per-run path instead: one
    :class:`~knorm.walks.sampler.Sampler` for the mechanism's lifetime, each refill one
    certified run of at least ``bank_size`` draws that continues its chains. Walk
    ``params`` are refused (:func:`check_sampler_options`). Either way releases use the
    draws in release order (round-robin over chains, never two neighbours of a chain, never
    a repeat) and every draw once. A certification or run that fails raises
    :class:`~knorm.ConvergenceError` and nothing is released, unless
    ``accept_uncertified=True``: then the per-run path's draws are used and the claim says
    UNCERTIFIED.

    ``prepared``: a :class:`~knorm.walks.prepared.PreparedWorkload` of this F
    (:func:`knorm.prepare`, :func:`knorm.load_prepared`): its body and rounding are used
    instead of being computed (the same noise law; seeded runs identical); a ValueError if
    it was prepared for another matrix.
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, walk: str = "billiard",
                 rng: np.random.Generator | int | None = None, body: SymmetricHull | None = None, bank_size: int = 1000,
                 sampler_options: dict[str, Any] | None = None, accept_uncertified: bool = False,
                 accountant: BudgetAccountant | None = None, prepared: PreparedWorkload | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        walk_id(walk)
        self.walk = walk
        if body is not None and not (isinstance(body, SymmetricHull) and body.ambient_dim == self.d):
            raise TypeError(f"body must be None or the knorm.SymmetricHull of F ({self.d} rows), got "
                            f"{type(body).__name__}")
        if body is not None and body._source != self.workload_fingerprint():
            # another F's body would give noise of another K: not this F's K-norm mechanism
            raise ValueError("body: the SymmetricHull of another matrix; give the body of this F (or none)")
        if prepared is not None:
            if body is not None:
                raise ValueError("prepared: give a prepared workload or a body, not both")
            body = check_prepared(prepared, self.workload_source, fingerprint=self.workload_fingerprint())
        self.bank_size = positive_int("bank_size", bank_size)
        self.accept_uncertified = check_flag("accept_uncertified", accept_uncertified)
        self.sampler_options = check_sampler_options(sampler_options)
        self._checkpoint = self.sampler_options.get("checkpoint")
        self.body = body if body is not None else body_of(self.workload_source, self.workload_fingerprint())
        self.dim = self.body.dim
        self.structure = self.body.exact_structure
        # r·z has scale (dim+1)/ε·(K's scale): refused here, before anything is drawn, if it leaves float64
        check_noise_scale(scaled((self.dim + 1) * self.body._unit, self.body._exp, self.epsilon), self.epsilon,
                          "the K-norm noise scale (dim+1)/ε·(K's scale)")
        sampling = "exact" if self.structure is not None else "mcmc-approximate"
        details = {"dim": self.dim, "walk": None if self.structure is not None else walk}
        if self.structure is not None:
            details["exact_structure"] = self.structure.kind
        self._claim = PrivacyClaim("K-norm", self.epsilon, 0.0, "pure ε-DP", sampling, details=details)
        self.last_info: SamplingInfo | None = None
        # built (cheaply: set-up waits for the first run) even for exact bodies, to check the options
        self._sampler = Sampler(self.body, walk=walk, rng=self._rng, **self.sampler_options)
        if self.sampler_options.get("checkpoint") is not None:  # a resume must be this mechanism's (ε, walk, …)
            self.sampler_options["checkpoint"].bind("K-norm", self.epsilon, walk, self.bank_size,
                                                    self.accept_uncertified)
        check_memory("bank_size", bank_size, self._sampler._pool_bytes(2 * self.bank_size))
        # the release path: per-run certification when asked for by its options, else a certified body
        self._per_run = any(k in self.sampler_options for k in PER_RUN_OPTIONS)
        self._stationary: StationarySampler | None = None
        self._bank = np.empty((0, self.d))
        self._banked = 0  # draws banked so far (a function of the releases asked for: public)
        self._bank_certified = np.empty(0, dtype=bool)  # per banked draw: from a certified run?
        # per banked draw: (chain, step from its chain's public start) on the stationary path, (chain, −1) on
        # the per-run path; ``last_sources``: those of the draws the last sample_uniform used (issue 51)
        self._bank_sources = np.empty((0, 2), np.int64)
        self.last_sources: NDArray[np.int64] | None = None

    def sample_uniform(self, size: int) -> NDArray[np.float64]:
        """``size`` draws of z ~ Uniform(K) (exact or MCMC), ambient coordinates.

        MCMC draws come from the bank, refilled when it runs short by one run of the
        release sampler (:meth:`_refill`); ``last_info`` holds the diagnostics of that
        run. Raises :class:`~knorm.ConvergenceError` if the body's walk (or, on the
        per-run path, the run) is not certified (unless ``accept_uncertified``).
        """
        size = positive_int("size", size)
        check_memory("size", size, 8 * size * (self.d + self.dim) * 4)
        if self.structure is not None:
            self.last_info = None
            return self.body.to_ambient(self.structure.sample_frame(size, self._rng))
        if len(self._bank) < size:
            self._refill(size - len(self._bank))
        z, self._bank = self._bank[:size], self._bank[size:]
        self.last_sources, self._bank_sources = self._bank_sources[:size], self._bank_sources[size:]
        if not np.all(self._bank_certified[:size]):
            self._certified = False  # the claim says UNCERTIFIED (until reset(); banked draws keep their flag)
        self._bank_certified = self._bank_certified[size:]
        return z

    def _release_sampler(self) -> StationarySampler | None:
        """The stationary sampler of the certified body (certified in memory on first use),
        or None on the per-run path (asked for, or an uncertifiable body with ``accept_uncertified``)."""
        if self._per_run or self._stationary is not None:
            return self._stationary
        opts = self.sampler_options
        try:  # the file's certification, or this process's for the body, or one made now
            certified = certified_of(self.body, self.walk, opts.get("workers"), opts.get("progress"))
        except ConvergenceError:
            if not self.accept_uncertified:
                raise
            self._per_run = True  # the per-run path's runs say whether they passed
            return None
        self._stationary = StationarySampler(self.body, rounding_of(self.body), certified, rng=self._rng,
                                             chains=opts.get("chains"), workers=opts.get("workers"),
                                             progress=opts.get("progress"))
        self._claim = replace(self._claim, details={**self._claim.details,
                                                    "stationary_start": certificate_claim(certified.certificate),
                                                    "certificate": certified.certificate.as_dict()})
        return self._stationary

    def _refill(self, short: int) -> None:
        """Bank at least ``short`` more draws: from the stationary sampler (the first refill
        exactly ``short``: a first release costs one warm-up; later ones as many as were banked
        so far, at most ``bank_size``, rounded up to a draw per chain: 1, 8, 16, 32, …: 100
        releases draw 121, not 1001, and 1000 draw 1017), or from one per-run certified run of
        at least ``bank_size``."""
        stationary = self._release_sampler()
        if stationary is not None:  # the bank doubles what was drawn so far, up to bank_size
            c = stationary.max_chains
            # a whole record on each chain (a refill of k draws runs ⌈k/c⌉ candidates per chain anyway)
            want = short if not stationary.chains else -(-max(short, min(self.bank_size, self._banked)) // c) * c
            # after the first release every refill runs all the chains: consecutive releases come
            # from different chains (round-robin), as a refill of bank_size would
            fresh, info = stationary.run(want, min_chains=c if stationary.chains else 0)
        else:
            want = max(short, self.bank_size)
            fresh, info = self._sampler.run(want)
            self._claim = replace(self._claim, details={**self._claim.details, "spacing": PER_RUN_SPACING})
        self.last_info = info
        info.extra["banked"] = want
        if not info.converged and not self.accept_uncertified:
            raise ConvergenceError(
                f"K-norm sampler run ({self.walk}) not certified: min bulk ESS {info.min_ess:.0f} of "
                f"{info.draws} draws, max R-hat {info.max_rhat:.4f}, {info.extra['repeats_dropped']} repeats "
                "dropped; raise sampler_options['max_steps'], use another walk, or pass "
                "accept_uncertified=True (the claim then says UNCERTIFIED)")
        self._banked += want
        self._bank = np.vstack([self._bank, fresh[:want]])  # the few extra draws are never used
        self._bank_certified = np.concatenate([self._bank_certified, np.full(want, info.converged)])
        src = info.extra["sources"][:want].astype(np.int64)
        if stationary is None:  # per-run path: (chain, record), draws 2·thin steps apart, not W (design §3.5.1)
            src = np.column_stack([src[:, 0], np.full(len(src), -1)])
        self._bank_sources = np.vstack([self._bank_sources, src])

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size)
        if self._checkpoint is not None:
            self._checkpoint.note("noise", m)
        z = self.sample_uniform(m or 1)
        r = self._rng.gamma(self.dim + 1, 1.0 / self.epsilon, size=len(z))
        with np.errstate(over="ignore"):  # an overflow raises in check_finite_output
            noise = r[:, None] * z
        return self._one_or_many(check_finite_output(noise, "K-norm noise"), m)

    def pool_moments(self) -> PoolMoments | None:
        """The certified pool's moments of Uniform(K) (:class:`~knorm.walks.certify.PoolMoments`:
        public, from the prepared file or this process's certification, made now if neither
        exists), or None where there is none (exact structure, the per-run path, a file
        written before they were kept)."""
        if self.structure is not None or self._release_sampler() is None:
            return None
        return known_moments(self.body, self.walk)

    def noise_variances(self) -> NDArray[np.float64] | None:
        """Each answer's noise variance ``Var(r·z_i) = (k+1)(k+2)/ε² · E z_i²`` (r ~ Gamma(k+1, 1/ε)
        independent of z, E z = 0), with E[zzᵀ] exact (exact structure) or the certified pool's
        (:meth:`pool_moments`); None where neither exists."""
        if self.structure is not None:
            C = self.structure.covariance_frame()
        else:
            mom = self.pool_moments()
            if mom is None:
                return None
            C = mom.second
        U = self.body.span_basis
        diag = np.einsum("ij,jk,ik->i", U, C, U)  # diag(U C Uᵀ) without the d × d matrix
        k = self.dim
        unit = (k + 1) * (k + 2) * self.body._unit**2 * np.maximum(diag, 0.0) / self.epsilon**2
        with np.errstate(over="ignore"):
            out = np.ldexp(unit, 2 * self.body._exp)
        return check_finite_output(out, "the noise variances")

    def _noise_law(self) -> NoiseLaw:
        """``r·z`` (:class:`~knorm.mechanisms.uncertainty.RadialLaw`): E[zzᵀ] exact (exact structure) or
        the certified pool's (no new draws); uniform draws exact (public seed) or from the bank (MCMC)."""
        body, s = self.body, self.structure
        U = body.span_basis
        factor = scaled(body._unit, body._exp, self.epsilon)  # span coordinates at ε = 1 -> answer units
        if s is not None:
            def exact(m: int) -> tuple[NDArray[np.float64], float, bool]:
                return s.sample_frame(m, np.random.default_rng(UNCERTAINTY_SEED)), float(m), True
            return RadialLaw(self.dim, factor, U, s.covariance_frame(), None, exact, f"Uniform(K), K a {s.kind}")

        def mcmc(m: int) -> tuple[NDArray[np.float64], float, bool]:
            z = self.sample_uniform(m)  # from the bank: never released after this
            info = self.last_info
            ess = max(2.0, min(m, info.min_ess * m / info.draws)) if info is not None else float(m)
            return (np.ldexp(z, -body._exp) / body._unit) @ U, ess, False
        mom = self.pool_moments()
        if mom is None:
            return RadialLaw(self.dim, factor, U, None, None, mcmc, f"Uniform(K) (MCMC, {self.walk})")
        return RadialLaw(self.dim, factor, U, mom.second, mom.sq[2], mcmc,
                         f"the certified pool of Uniform(K) (MCMC, {self.walk}, {mom.records} records)")

    def expected_error(self, n_samples: int | None = None, *, rms: bool = False, pool: bool = False) -> ErrorEstimate:
        """``E‖noise‖₂ = (dim+1)/ε · E‖z‖₂``; with ``rms=True`` the root mean square
        ``√E‖noise‖₂² = √((dim+1)(dim+2))/ε · √E‖z‖₂²`` (exact where K has exact structure: the trace
        of its covariance), comparable with per-query RMSEs (``/√d``).

        ``n_samples`` None: E‖z‖₂ (E‖z‖₂²) from the certified pool (:meth:`pool_moments`; no new
        draws) where there is one, else from 4000 uniform draws; an int: from that many new draws
        (``pool=True``: from the pool where it has at least that many records). The standard error
        uses the pool's (or the sampler's min bulk) ESS for MCMC draws.
        """
        check_flag("rms", rms)
        check_flag("pool", pool)
        if rms:
            return self._rms_estimate(n_samples, pool)
        mom = self._pool_for(n_samples, pool)
        if mom is not None:
            mean, se, pool_ess = mom.norm
            f = (self.dim + 1) * self.body._unit  # ‖z‖ = 2^e·unit·|Z|
            value, stderr = (scaled(f * v, self.body._exp, self.epsilon) for v in (mean, se))
            check_finite_output([value, stderr], "the expected error")
            return ErrorEstimate(value, stderr, False, f"(dim+1)/ε · E‖z‖₂, E‖z‖₂ from the certified pool "
                                                      f"(MCMC, {self.walk}): ESS {pool_ess:.0f} of {mom.records} records")
        draws: int = 4000 if n_samples is None else n_samples
        z = self.sample_uniform(check_n_samples(draws))
        ess = None
        if self.last_info is not None:
            ess = min(draws, self.last_info.min_ess * draws / self.last_info.draws)
        how = "exact" if self.structure is not None else f"MCMC ({self.walk})"
        return mc_norm_estimate(z, (self.dim + 1) / self.epsilon, ess,
                                f"(dim+1)/ε · E‖z‖₂, E‖z‖₂ from {draws} {how} uniform draws")

    def _pool_for(self, n_samples: int | None, pool: bool) -> PoolMoments | None:
        """The certified pool's moments where an estimate may use them: ``n_samples`` None, or ``pool``
        and at least ``n_samples`` records in it (else None: new draws)."""
        mom = self.pool_moments() if n_samples is None or pool else None
        return None if mom is None or (n_samples is not None and n_samples > mom.records) else mom

    def _rms_estimate(self, n_samples: int | None = None, pool: bool = False) -> ErrorEstimate:
        """``√E‖noise‖₂² = √((k+1)(k+2))/ε · √E‖z‖₂²`` (k = dim): exact for an exact structure, else from
        the certified pool (as :meth:`expected_error`) or ``n_samples`` (default 4000) uniform draws."""
        body, k = self.body, self.dim
        factor = scaled(np.sqrt((k + 1) * (k + 2)) * body._unit, body._exp, self.epsilon)  # no 1/ε or scale² formed
        s = self.structure
        if s is not None:
            value = factor * np.sqrt(np.trace(s.covariance_frame()))
            check_finite_output([value], "the rms error")
            return ErrorEstimate(value, 0.0, True, f"exact: √((k+1)(k+2)·tr Cov(Uniform K))/ε, K a {s.kind}")
        mom = self._pool_for(n_samples, pool)
        if mom is not None:  # no new draws
            mean, se_m, ess = mom.sq
            value, stderr = rms_from_mean_square(mean, se_m, factor)
            check_finite_output([value, stderr], "the rms error")
            return ErrorEstimate(value, stderr, False, f"Monte Carlo: E‖z‖₂² from the certified pool (MCMC, "
                                                       f"{self.walk}): ESS {ess:.0f} of {mom.records} records")
        draws: int = check_n_samples(4000 if n_samples is None else n_samples)
        z = self.sample_uniform(draws)
        info = self.last_info
        ess = max(2.0, min(draws, info.min_ess * draws / info.draws)) if info is not None else float(draws)
        value, stderr = rms_from_draws(np.linalg.norm(np.ldexp(z, -body._exp), axis=1) / body._unit, factor, ess)
        check_finite_output([value, stderr], "the rms error")
        how = (f"Monte Carlo: E‖z‖₂² from {draws} MCMC ({self.walk}) uniform draws, ESS {ess:.0f}"
               + ("" if info is None or info.converged else ", run NOT certified"))
        return ErrorEstimate(value, stderr, False, how)

    def expected_squared_error(self, n_samples: int | None = None) -> float:
        """``(dim+1)(dim+2)/ε² · E‖z‖₂²``: E‖z‖₂² from the certified pool (``n_samples`` None, where
        there is one: :meth:`pool_moments`), else Monte Carlo over ``n_samples`` (default 4000) draws."""
        mom = self.pool_moments() if n_samples is None else None
        if mom is not None:
            value = scaled((self.dim + 1) * (self.dim + 2) * self.body._unit**2 * mom.sq[0], self.body._exp,
                           self.epsilon, 2)
            return in_float_range(value, "the expected squared error", self.epsilon)
        z = self.sample_uniform(check_n_samples(4000 if n_samples is None else n_samples))
        unit = np.ldexp(z, -self.body._exp)  # K at unit scale: no square over- or underflows
        value = scaled((self.dim + 1) * (self.dim + 2) * float(np.mean(np.sum(unit**2, axis=1))), self.body._exp,
                       self.epsilon, 2)
        return in_float_range(value, "the expected squared error", self.epsilon)
