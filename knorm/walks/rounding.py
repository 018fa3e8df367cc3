"""Rounding: iterative covariance estimation of Uniform(K) (docs/design.md §3.3).

The walks run in the isotropic image ``T⁻¹K`` of the body, where ``T Tᵀ ≈ Σ`` is the
covariance of Uniform(K) in span coordinates. Uniformity is preserved by linear maps,
and ``T⁻¹K = (T⁻¹F)·B₁ⁿ`` is again a symmetric hull, so the same exact oracle serves.
"""

from dataclasses import dataclass

import numpy as np

from ..body.hull import Frame
from ..diagnostics import ess as _ess
from .chains import Chain, default_params, run_chains

ROUNDING_SEED = 20191  # rounding is a deterministic function of the body (see Rounding)


@dataclass
class Rounding:
    """Result of :func:`round_body`.

    ``T`` (r×r, lower triangular): frame coordinates ``z = T⁻¹ y`` (y in span units);
    ``frame``: the rounded body; ``covariance``: the estimate ``T Tᵀ`` of Cov(Uniform K)
    in span units; ``iterations``; ``eigen_spread``: max/min eigenvalue of the last
    in-frame covariance estimate (≈ 1 when isotropic, up to sampling noise);
    ``points``: the final states of the rounding's chains (new frame), stationary
    starting points for later runs; ``tau``: integrated autocorrelation time (per
    step) of the billiard walk measured on the last iteration (:func:`chain_tau`);
    ``records``: the steps each chain recorded in each iteration, after the first iteration's
    ``WARMUP_TAUS·TAU_GUESS`` warm-up steps (deterministic counts of the rounding's work; empty
    for a rounding restored from a file).
    """

    T: np.ndarray
    frame: Frame
    covariance: np.ndarray
    iterations: int
    eigen_spread: float
    points: np.ndarray
    tau: float
    records: tuple[int, ...] = ()

    def to_span(self, Z):
        return np.asarray(Z) @ self.T.T


def _frame_for(base, T):
    return base.mapped(T)


def per_step_tau(tau_thinned, thin):
    """Per-step τ from τ measured on draws thinned by ``thin``, under an AR(1) model.

    AR(1): τ = (1+ρ)/(1−ρ); thinning by k turns ρ into ρ^k. So
    ``ρ_k = (τ_k − 1)/(τ_k + 1)``, ``ρ = ρ_k^{1/k}`` (``k·τ_k`` would overestimate τ).
    """
    if tau_thinned <= 1.0:
        return 1.0
    rho = ((tau_thinned - 1.0) / (tau_thinned + 1.0)) ** (1.0 / thin)
    return (1.0 + rho) / (1.0 - rho)


def noise_spread(r, n_points):
    """Eigenvalue spread max/min of the sample covariance of ``n_points`` iid isotropic
    points in dimension r (Marchenko–Pastur edges): ((1+√(r/N)) / (1−√(r/N)))²; inf if N <= r."""
    q = np.sqrt(r / n_points)
    if q >= 1.0:
        return np.inf
    return ((1 + q) / (1 - q)) ** 2


# Steps before the first record used: at least 10·τ. The start's influence on a record is
# then at most ρ^(10τ) ≤ e^(−20τ/(τ+1)) ≤ e^(−10) ≈ 5·10⁻⁵ (AR(1), ρ = (τ−1)/(τ+1), τ ≥ 1),
# far below the estimate's own noise (≈ √(r/N) ≈ 0.3 at 10 records per dimension). The
# Sampler's 20·τ (sampler.WARMUP_TAUS) is a privacy margin -- its chains must forget a
# public start -- which a covariance estimate does not need.
WARMUP_TAUS = 10
MIN_EFFECTIVE = 4  # the spread is judged on at least 4·r effective points (noise spread ≤ 9)
SAMPLES_PER_DIM = 10  # records per dimension and iteration
SYMMETRIC_SAMPLES_PER_DIM = 2  # the same with a symmetry group (its average has far fewer free parameters)
PROGRESS_PIECES = 4  # progress reports per rounding iteration
WARMUP_CHAINS = 8  # chains of the rounding that each take the whole first warm-up (more share it)
TAU_GUESS = 2.0  # τ per step of the billiard walk in a roughly round body (1.2–3 measured at r = 40–80)


def chain_tau(rec):
    """Per-step integrated autocorrelation time of records ``(chains, k, r)`` taken at every step:
    the largest over the coordinates and the squared radius ``|z|²`` (a slow radial
    functional the coordinates miss when the walk is antithetic), at least 1."""
    total = rec.shape[0] * rec.shape[1]
    e = min(float(np.min(_ess(rec))), float(np.min(_ess(np.sum(rec**2, axis=2)[..., None]))))
    return max(1.0, total / e)


def _averaged_cov(symmetry, T, Ti, Z):
    """The group average of the sample covariance of frame points Z (rows), in the frame:
    ``T⁻¹ R(T S Tᵀ) T⁻ᵀ`` (T: frame → span coordinates, ``Ti = T⁻¹``)."""
    S = np.atleast_2d(np.cov(Z, rowvar=False))
    out = Ti @ symmetry.average_span(T @ S @ T.T) @ Ti.T
    return (out + out.T) / 2.0


def _relative_spread(A, B):
    """max/min eigenvalue of ``A^{-1/2} B A^{-1/2}`` (inf if either is not positive definite)."""
    try:
        La = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return np.inf
    ev = np.linalg.eigvalsh(np.linalg.solve(La, np.linalg.solve(La, B).T))
    return float(ev[-1] / ev[0]) if ev[0] > 0 else np.inf


def round_body(base, *, chains=8, samples_per_dim=None, max_iter=8, spread_factor=1.5, workers=None, progress=None,
               symmetry=None):
    """Estimate Cov(Uniform K) by billiard walks in successively rounded frames.

    Starts from ``Σ₀ = F Fᵀ / n`` and ``chains`` billiard chains at the centre, which run
    ``WARMUP_TAUS·TAU_GUESS`` = 20 steps of warm-up (up to ``WARMUP_CHAINS`` = 8 chains; more
    chains share 160 steps: ``⌈160/chains⌉`` each). Each iteration then records every
    step of the chains, ``samples_per_dim·r`` points in all, estimates the in-frame
    covariance ``S`` and updates ``T ← T·chol(S)``. The chains go on from where they
    stopped in the next frame: uniformity is invariant under linear maps, so their
    states stay stationary and need no new warm-up.

    Stops when (1) the records used came after at least ``WARMUP_TAUS``·τ steps per
    chain, τ measured on those records (:func:`chain_tau`): the start is forgotten;
    and (2) the eigenvalue spread of S is below ``spread_factor`` times the spread that
    sampling noise alone gives for isotropic points (:func:`noise_spread` of the
    effective sample, records/τ: ≈ 4.5 at 10 records per dimension and τ = 1.3), judged
    on at least ``MIN_EFFECTIVE``·r effective points (else the next iteration records
    twice as many steps, up to 8×); or after ``max_iter`` iterations. Seeded with a fixed seed
    and a fixed chain count: the rounding of a body is deterministic (whatever
    ``workers``), so caching it never changes seeded results.

    **With symmetry** (``symmetry``: a :class:`~knorm.body.symmetry.ValueSymmetry` of the
    body, whose frame ``base`` is in span coordinates): each estimate is averaged over the
    group, ``S ← T⁻¹R(T S Tᵀ)T⁻ᵀ``, which keeps its expectation (Cov(Uniform K) commutes
    with the group) and leaves far fewer free parameters than r(r+1)/2, so
    ``samples_per_dim`` defaults to ``SYMMETRIC_SAMPLES_PER_DIM`` (2) instead of 10, and
    the noise is measured rather than taken from Marchenko–Pastur: the averaged estimates
    of the two halves of the chains differ by a spread s₂ (max/min eigenvalue of one
    whitened by the other), and the whole estimate's noise spread is taken as √s₂ (two
    independent halves differ by √2 times the noise of each, which is √2 times that of
    the whole: in log-spread, twice the whole's). Stop rule (2) becomes: the spread of
    the averaged S is below ``spread_factor·√s₂``, judged once √s₂ ≤ ``spread_factor``
    (else the next iteration records twice as many steps, up to 8×; one chain has no
    halves and runs ``max_iter`` iterations).

    ``progress``: None, or a callable ``progress(done, max_iter)``: ``done`` is 0 as the
    rounding starts, counts iterations in shares of their steps (``PROGRESS_PIECES`` reports
    per iteration's records, and as many for the first one's warm-up: the steps run in as many
    pieces, which never changes the result); a rounding that stops early reports ``progress(it, it)``,
    the ``it`` iterations it ran (its total is what ran, not the bound), one that runs them all ends at
    ``progress(max_iter, max_iter)``.
    """
    r = base.r
    if samples_per_dim is None:
        samples_per_dim = SAMPLES_PER_DIM if symmetry is None else SYMMETRIC_SAMPLES_PER_DIM
    rng = np.random.default_rng(ROUNDING_SEED)
    Fr = base.Ft.T
    T = np.linalg.cholesky(Fr @ Fr.T / base.n + 1e-12 * np.eye(r))
    n_points = max(int(np.ceil(samples_per_dim * r)), 100)
    per_chain = max(8, -(-n_points // chains))
    # the first iteration's warm-up from the centre: WARMUP_TAUS·TAU_GUESS = 20 steps per chain up to
    # WARMUP_CHAINS chains, 160 steps shared beyond (its estimate is a start only; stop rule (1) counts
    # every chain's steps from the centre, so more chains may take an iteration more, not a worse rounding)
    warmup = int(np.ceil(WARMUP_TAUS * TAU_GUESS * min(1.0, WARMUP_CHAINS / chains)))
    before = warmup  # steps per chain before the current iteration's first record
    steps = per_chain  # records per chain in this iteration
    pts = None
    recorded: list[int] = []
    spread = tau = np.inf
    it = 0
    if progress is not None:  # the stage opens now: its first iteration's warm-up takes minutes at census size
        progress(0, max_iter)
    for it in range(1, max_iter + 1):
        frame = _frame_for(base, T)
        gens = rng.spawn(chains)
        starts = [np.zeros(r)] * chains if pts is None else list(pts)
        # the frames share the oracle's data and coordinates: each chain's oracle state
        # (optimal at its point) carries over to the next frame unchanged
        # at the centre each chain takes a copy of the body's one crash basis (Frame.crash_basis)
        states = [None] * chains if pts is None else [c.state for c in cs]
        cs = [Chain(frame, x0, g, st) for x0, g, st in zip(starts, gens, states)]
        params = default_params("billiard", frame, workers)
        warm = warmup if pts is None else 0
        if warm and progress is None:
            run_chains(cs, "billiard", warmup, warmup, params, workers)
        if progress is None:
            rec = run_chains(cs, "billiard", steps, 1, params, workers)
        else:  # in pieces, to report within the iteration (records never depend on how steps are split),
            # as the share of the iteration's steps done, its warm-up included (what its time is; at
            # census size the warm-up alone is minutes, reported in pieces too)
            w_cuts = np.linspace(0, warm, PROGRESS_PIECES + 1).astype(int) if warm else np.zeros(1, int)
            for i, k in enumerate(np.diff(w_cuts)):
                if k:
                    run_chains(cs, "billiard", int(k), int(k), params, workers)
                    progress(it - 1 + w_cuts[i + 1] / (warm + steps), max_iter)
            cuts = np.linspace(0, steps, PROGRESS_PIECES + 1).astype(int)
            parts = []
            for i, k in enumerate(np.diff(cuts)):
                if k:
                    parts.append(run_chains(cs, "billiard", int(k), 1, params, workers))
                progress(it - 1 + (warm + cuts[i + 1]) / (warm + steps), max_iter)
            rec = np.concatenate(parts, axis=1)
        Z = rec.reshape(-1, r)
        if symmetry is None:
            S = np.cov(Z, rowvar=False).reshape(r, r)
        else:  # and the two halves' disagreement, the estimate's noise (see above)
            Ti = np.linalg.inv(T)
            S = _averaged_cov(symmetry, T, Ti, Z)
            half = chains // 2
            sym_noise = np.inf if half == 0 else np.sqrt(_relative_spread(
                _averaged_cov(symmetry, T, Ti, rec[:half].reshape(-1, r)),
                _averaged_cov(symmetry, T, Ti, rec[half:].reshape(-1, r))))
        ev = np.linalg.eigvalsh(S)
        spread = float(ev[-1] / ev[0])
        L = np.linalg.cholesky(S)
        T = T @ L
        pts = np.linalg.solve(L, np.array([c.x for c in cs]).T).T  # chain states, new frame
        tau = chain_tau(np.linalg.solve(L, Z.T).T.reshape(rec.shape))
        # τ from chains of few records each (8 at 64 chains) cannot see past a few lags and comes out
        # near 1: the start counts as forgotten only after WARMUP_TAUS·max(τ, TAU_GUESS) steps (up to 8
        # chains the first warm-up is that long already: the same bits)
        forgotten = before >= WARMUP_TAUS * max(tau, TAU_GUESS)
        before += steps
        recorded.append(steps)
        n_eff = len(Z) / tau
        if symmetry is None:
            judged = n_eff >= MIN_EFFECTIVE * r
            noise = noise_spread(r, n_eff)
        else:
            noise = sym_noise
            judged = noise <= spread_factor
        done = forgotten and judged and spread < spread_factor * noise
        if progress is not None and done:  # stopped after ``it`` iterations: the stage's total is what ran
            progress(it, it)
        if done:
            break
        if not judged:  # too few effective points to judge the spread: more records
            steps = min(2 * steps, 8 * per_chain)
    return Rounding(T=T, frame=_frame_for(base, T), covariance=T @ T.T, iterations=it,
                    eigen_spread=spread, points=pts, tau=tau, records=tuple(recorded))
