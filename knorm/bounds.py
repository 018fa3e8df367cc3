"""Volumes of K and the volume lower bounds of docs/design.md §5.

* :func:`volume` -- ``Vol_r(K)`` in the r-dimensional span of F (never in the ambient d
  dimensions when rank F < d). Exact for linear images of the cross-polytope and the
  cube; otherwise a randomized multiphase Monte Carlo estimate with a relative-error
  target and the relative standard error it achieved.
* :func:`vol_lower_bound` -- ``VolLB(F, ε) = ε⁻¹ r √r Vol_r(K)^{1/r}`` **without** the
  unknown constant of the theorem: every ε-DP mechanism has error Ω(VolLB), i.e. at least
  c·VolLB for an absolute constant c that the theory does not give. It is a yardstick
  for how close a mechanism is to optimal up to that constant, not a certified bound.
* :func:`gvol_lower_bound` -- ``GVolLB = sup_{k,P} ε⁻¹ k √k Vol_k(PK)^{1/k}``, estimated as
  the max over the candidate projections NIM finds (same caveat on the constant).

Multiphase Monte Carlo (sequence of balls): in the rounded (isotropic) frame K' of K,
take radii ``ρ_0 = R_out > ρ_1 > … > ρ_m = ρ_in`` with ``K' ⊆ B(R_out)`` and
``B(ρ_in) ⊆ K'``. Then ``Vol(K') = Vol(B(ρ_in)) / ∏ p_i`` with
``p_i = P(‖z‖ <= ρ_{i+1})`` for ``z ~ Uniform(K' ∩ B(ρ_i))``, each estimated by
billiard walks on the ball-clipped body (reflecting off K's facets and the sphere).
Radii are chosen as quantiles of pilot draws so that each ``p_i ≈ q``; the p_i are
then estimated on fresh draws, with standard errors from the ESS of the indicator,
until ``Σ var(p̂_i)/p_i² <= rel_error²``.
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy.linalg import qr

from ._blas import thin_svd
from ._rng import as_generator
from ._validate import positive_int, short_repr
from .diagnostics import ess as _ess
from .mechanisms._base import check_positive, finite_real
from .walks.chains import BILLIARD_LENGTH, Chain, body_radius, check_workers, run_chains
from .body.hull import SymmetricHull
from .walks.sampler import as_body, rounding_of


@dataclass
class VolumeEstimate:
    """``Vol_dim(K)`` in the span of F.

    ``rel_stderr``: achieved relative standard error (0 when exact); ``phases``,
    ``samples`` (thinned draws used), ``seconds``, ``method``; ``radii`` of the phases.
    """

    log_volume: float
    rel_stderr: float
    dim: int
    exact: bool
    method: str
    phases: int = 0
    samples: int = 0
    seconds: float = 0.0
    radii: list[float] = field(default_factory=list)

    @property
    def volume(self) -> float:
        """``exp(log_volume)``; a ValueError where that leaves the float64 range (use log_volume)."""
        with np.errstate(over="ignore", under="ignore"):
            v = float(np.exp(self.log_volume))
        if not np.isfinite(v) or v == 0.0:
            raise ValueError(f"volume = exp({self.log_volume:.6g}) is outside the float64 range: use log_volume")
        return v

    def root(self) -> tuple[float, float]:
        """``Vol^{1/dim}`` and its relative standard error (rel_stderr / dim)."""
        return float(np.exp(self.log_volume / self.dim)), self.rel_stderr / self.dim


def log_ball_volume(r: int, radius: float = 1.0) -> float:
    """log Vol(radius·B₂^r) = log(π^{r/2} radius^r / Γ(r/2 + 1))."""
    r, radius = positive_int("r", r), check_positive("radius", radius)
    if r > 2**53:
        raise ValueError(f"r must be a dimension of at most 2^53, got {r}")
    return 0.5 * r * np.log(np.pi) + r * np.log(radius) - special.gammaln(r / 2 + 1)


def inner_radius(frame: Any) -> float:
    """A radius ρ with ``B(ρ) ⊆ K`` (valid lower bound on the inradius).

    For λ in the polar ``{|Fᵀλ| <= 1}``: ``‖Bᵀλ‖₂ <= √r`` for any r columns B, so
    ``‖λ‖₂ <= √r / σ_min(B)``; likewise ``‖λ‖₂ <= √n / σ_min(F)``. The inradius is
    ``1 / max‖λ‖₂`` over the polar, hence at least the larger of the two ratios.
    """
    if not hasattr(frame, "Ft"):
        raise TypeError(f"frame must be a knorm.body.hull.Frame (SymmetricHull(F).frame), got {type(frame).__name__}")
    Fm = frame.Ft.T
    r, n = Fm.shape
    _, _, piv = qr(Fm, pivoting=True, mode="economic")
    B = Fm[:, piv[:r]]
    s_b = thin_svd(B, compute_uv=False)[-1]
    s_f = thin_svd(Fm, compute_uv=False)[-1]
    return float(max(s_b / np.sqrt(r), s_f / np.sqrt(n)))


def _exact_log_volume(body: SymmetricHull) -> float:
    s: Any = body.exact_structure  # not None: the caller checked
    r = body.dim
    base = r * np.log(2.0) - special.gammaln(r + 1) if s.kind == "cross-polytope" else r * np.log(2.0)
    return base + np.linalg.slogdet(s.G)[1] + r * body._log_scale


MAX_PHASE_DRAWS = 10**7  # thinned draws per phase: 80 MB of indicators (and their FFT), hours of walking
CHUNK_VALUES = 2**22     # draws·r held at once while sampling a phase (32 MB)
MAX_CHAINS = 1024
METHODS = ("auto", "exact", "mc")


def _real(name: str, value: Any, lo: float, hi: float) -> float:
    """``value`` as a float in the open interval (lo, hi), or a one-line ValueError."""
    v = finite_real(name, value, f"a number in ({lo:g}, {hi:g})")
    if not lo < v < hi:
        raise ValueError(f"{name} must be a number in ({lo:g}, {hi:g}), got {short_repr(value)}")
    return v


def _check_volume_args(rel_error: float, quantile: float, method: str, chains: int, max_samples: int | None,
                       workers: int | Executor | None) -> tuple[float, float, int, int | None]:
    """Validate :func:`volume`'s arguments; fail fast when the target cannot fit the caps.

    A phase estimates ``p ≈ quantile`` to relative variance ``rel_error²/phases``, which
    takes at least ``4(1-q)/(q·rel_error²)`` independent draws; more than
    ``MAX_PHASE_DRAWS`` is refused (at q = 0.3 that is rel_error < ≈ 1e-3).
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be 'auto', 'exact' or 'mc', got {short_repr(method)}")
    rel_error = _real("rel_error", rel_error, 0.0, 1.0)
    quantile = _real("quantile", quantile, 0.0, 1.0)
    chains = positive_int("chains", chains)
    if chains > MAX_CHAINS:
        raise ValueError(f"chains must be at most {MAX_CHAINS}, got {chains}")
    max_samples = positive_int("max_samples", max_samples, allow_none=True)
    if max_samples is not None and max_samples > MAX_PHASE_DRAWS:
        raise ValueError(f"max_samples must be at most {MAX_PHASE_DRAWS:.0e} draws per phase, got {max_samples}")
    check_workers(workers)
    log_need = np.log(4.0 * (1.0 - quantile) / quantile) - 2.0 * np.log(rel_error)  # rel_error² may underflow
    need = float(np.exp(min(log_need, 700.0)))
    if max_samples is None and log_need > np.log(MAX_PHASE_DRAWS):
        raise ValueError(f"rel_error={rel_error:g} with quantile={quantile:g} needs >= {need:.2g} draws per phase, "
                         f"over the cap of {MAX_PHASE_DRAWS:.0e}: ask for a larger rel_error or pass max_samples")
    return rel_error, quantile, chains, max_samples


def volume(body_or_F: SymmetricHull | ArrayLike, *, rel_error: float = 0.1, quantile: float = 0.3, method: str = "auto",
           rng: np.random.Generator | int | None = None, chains: int = 4, max_samples: int | None = None,
           workers: int | Executor | None = None) -> VolumeEstimate:
    """``Vol_r(K)`` for ``K = F·B₁ⁿ`` (r = rank F), exact or by multiphase Monte Carlo.

    ``method``: "auto" (exact when K is an image of the cross-polytope or cube, else
    Monte Carlo), "exact", or "mc" (always Monte Carlo). ``rel_error`` in (0, 1): target
    relative standard error; ``quantile`` in (0, 1): targeted ratio per phase;
    ``chains``: 1..MAX_CHAINS; ``max_samples``: budget of thinned draws per phase
    (default ``min(200·r/rel_error², MAX_PHASE_DRAWS)``; the estimate then reports the
    error it reached). A target that needs more than ``MAX_PHASE_DRAWS`` draws per phase
    is refused up front unless ``max_samples`` caps it.
    """
    t0 = time.perf_counter()
    rel_error, quantile, chains, max_samples = _check_volume_args(rel_error, quantile, method, chains, max_samples,
                                                                  workers)
    gen = as_generator(rng)
    body = as_body(body_or_F)
    r = body.dim
    if method != "mc" and body.exact_structure is not None:
        return VolumeEstimate(_exact_log_volume(body), 0.0, r, True, f"exact ({body.exact_structure.kind})",
                              seconds=time.perf_counter() - t0)
    if method == "exact":
        raise ValueError("no exact volume formula: K is not a linear image of the cross-polytope or the cube")
    rnd = rounding_of(body, workers)
    frame = rnd.frame
    log_jac = np.linalg.slogdet(rnd.T)[1] + r * body._log_scale
    if r == 1:  # K' is a segment [-a, a]
        a = float(np.max(np.abs(frame.Ft)))
        return VolumeEstimate(np.log(2 * a) + log_jac, 0.0, 1, True, "exact (segment)",
                              seconds=time.perf_counter() - t0)
    r_out = float(np.max(np.linalg.norm(frame.Ft, axis=1)))
    r_in = inner_radius(frame)
    max_phases = 50 * r + 10
    # the volume ratio per phase is ≈ q, i.e. a radius ratio ≈ q^(1/r)
    if r * np.log(r_out / r_in) / -np.log(quantile) > max_phases:
        raise ValueError(f"quantile={quantile:g} is too close to 1: the radius schedule could need more than "
                         f"{max_phases} phases for this body (0.3 is the default; keep it <= 0.5)")
    thin = 3  # billiard walks mix in a few steps (τ ≈ 2–3 at d <= 80); the SE uses the measured ESS
    warm = max(10, r)
    length = BILLIARD_LENGTH * body_radius(frame, workers=workers)
    starts = rnd.points[:chains] if len(rnd.points) >= chains else np.zeros((chains, r))
    cs = [Chain(frame, x0, g) for x0, g in zip(starts, gen.spawn(chains))]
    if max_samples is None:
        max_samples = int(min(200 * r / rel_error**2, MAX_PHASE_DRAWS))

    def sample(radius: float, per_chain: int) -> NDArray[np.float64]:
        for c in cs:  # pull the chains into the current ball (K' is star-shaped about 0)
            nrm = np.linalg.norm(c.x)
            if nrm > radius:
                c.x *= 0.9 * radius / nrm
                frame.solve(c.x, c.state)
        params = np.array([min(length, BILLIARD_LENGTH * radius), 10.0 * r, radius])
        run_chains(cs, "billiard", warm, warm, params, workers)
        return run_chains(cs, "billiard", per_chain * thin, thin, params, workers)

    # 1. schedule of radii, inward, from pilot draws
    radii = [r_out]
    pilot = max(50, 10 * r) // chains + 1
    while radii[-1] > r_in:
        rec = sample(radii[-1], pilot)
        nxt = float(np.quantile(np.linalg.norm(rec.reshape(-1, r), axis=1), quantile))
        radii.append(max(nxt, r_in))
        if len(radii) > max_phases:
            raise RuntimeError("volume: the radius schedule does not shrink (is the body rounded?)")
    phases = len(radii) - 1
    # 2. ratios on fresh draws until the relative variance target is met
    budget_var = rel_error**2 / phases
    log_p, rel_var, used = 0.0, 0.0, 0
    cap = -(-max_samples // chains)  # draws per chain per phase
    chunk = max(25, CHUNK_VALUES // (r * chains))  # draws per chain held in memory at once

    def indicators(outer: float, inner: float, per_chain: int) -> NDArray[np.float64]:
        parts = []
        while per_chain > 0:
            k = min(per_chain, chunk)
            parts.append(np.linalg.norm(sample(outer, k), axis=2) <= inner)
            per_chain -= k
        return np.concatenate(parts, axis=1).astype(float)

    for outer, inner in zip(radii[:-1], radii[1:]):
        per_chain = min(cap, max(25, int(np.ceil(4 * (1 - quantile) / (quantile * budget_var) / chains))))
        ind = np.empty((chains, 0))
        while True:
            ind = np.concatenate([ind, indicators(outer, inner, per_chain)], axis=1)
            p = float(ind.mean())
            n_eff = float(_ess(ind, method="mean")) if 0 < p < 1 else float(ind.size)
            var = p * (1 - p) / n_eff
            if (p > 0 and var / p**2 <= budget_var) or ind.shape[1] >= cap:
                break
            per_chain = min(ind.shape[1], cap - ind.shape[1])  # double, up to the cap
        if p == 0:
            raise RuntimeError(f"volume: no draw fell inside radius {inner:.3g} (phase ratio too small)")
        used += ind.size
        log_p += np.log(p)
        rel_var += var / p**2
    log_vol = log_ball_volume(r, r_in) - log_p + log_jac
    if not np.isfinite(log_vol):
        raise RuntimeError(f"volume: the estimate is not finite (log volume {log_vol})")
    return VolumeEstimate(float(log_vol), float(np.sqrt(rel_var)), r, False, "multiphase Monte Carlo (balls)",
                          phases=phases, samples=used, seconds=time.perf_counter() - t0, radii=radii)


@dataclass
class BoundEstimate:
    """A lower-bound yardstick without its unknown constant: ``value ± stderr``."""

    value: float
    stderr: float
    dim: int
    epsilon: float
    note: str
    candidates: list[tuple[int, float, float]] = field(default_factory=list)


_CONSTANT_NOTE = ("without the unknown absolute constant of the theorem (error >= c·value for some c > 0): "
                  "a yardstick, not a certified bound")


def vol_lower_bound(F: SymmetricHull | ArrayLike, epsilon: float, *, rel_error: float = 0.5,
                    rng: np.random.Generator | int | None = None, volume_estimate: VolumeEstimate | None = None
                    ) -> BoundEstimate:
    """``VolLB(F, ε) = ε⁻¹ r √r Vol_r(K)^{1/r}`` (r = rank F), constant omitted.

    The volume's relative error enters divided by r, so a loose ``rel_error`` suffices.
    """
    eps = check_positive("epsilon", epsilon)  # a bound, not a release: no LargeEpsilonWarning
    _real("rel_error", rel_error, 0.0, 1.0)
    if volume_estimate is None:
        est = volume(F, rel_error=rel_error, rng=rng)
    elif isinstance(volume_estimate, VolumeEstimate):
        est = volume_estimate
    else:
        raise ValueError(f"volume_estimate must be a VolumeEstimate or None, got {type(volume_estimate).__name__}")
    r = est.dim
    log_value = np.log(r * np.sqrt(r)) + est.log_volume / r - np.log(eps)
    with np.errstate(over="ignore", under="ignore"):
        value = float(np.exp(log_value))
    if not np.isfinite(value) or value == 0.0:
        raise ValueError(f"epsilon={eps:g}: VolLB = exp({log_value:.6g}) is outside the float64 range")
    return BoundEstimate(value, value * est.rel_stderr / r, r, eps, "VolLB " + _CONSTANT_NOTE)


def gvol_lower_bound(F: ArrayLike, epsilon: float, *, rel_error: float = 0.5,
                     rng: np.random.Generator | int | None = None) -> BoundEstimate:
    """GVolLB estimate: max of ``ε⁻¹ k √k Vol_k(PK)^{1/k}`` over NIM's subspaces.

    Candidates: the whole span and, for each level of NIM's halving rule (``split="halves"``),
    the subspace it recurses on (top eigenvectors) and the one it releases (bottom
    eigenvectors). ``candidates`` lists (k, value, stderr) for each.
    """
    from .mechanisms.nim import NIMechanism

    eps = check_positive("epsilon", epsilon)  # a bound, not a release: no LargeEpsilonWarning
    _real("rel_error", rel_error, 0.0, 1.0)
    gen = as_generator(rng)
    nim = NIMechanism(F, epsilon=eps, rng=gen, split="halves")
    Fm = np.asarray(F, float)
    cands = []
    seen: list[NDArray[np.float64]] = []
    for lv in nim.levels:
        for U in (lv.basis, lv.kept):
            if U.shape[1] == 0 or any(U.shape == S.shape and np.allclose(np.abs(U.T @ S), np.eye(U.shape[1]))
                                      for S in seen):
                continue
            seen.append(U)
            b = vol_lower_bound(U.T @ Fm, eps, rel_error=rel_error, rng=gen)
            cands.append((U.shape[1], b.value, b.stderr))
    best = max(cands, key=lambda c: c[1])
    return BoundEstimate(best[1], best[2], best[0], eps, "GVolLB over NIM's subspaces " + _CONSTANT_NOTE,
                         candidates=cands)
