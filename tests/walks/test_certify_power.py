"""The certificate's verdict (knorm.walks.certify.judge_pool) has power at 8 long chains and at 64
short ones, and passes what it should (docs/design.md §3.5.1).

The body is the cross-polytope K = B₁^r, r = 10, in its own frame: exact values are known. Its
gauge is the ℓ₁ norm, ‖z‖₁^r ~ U(0, 1) for z ~ Uniform(K) (P(‖z‖₁ ≤ t) = t^r), and exact
uniform draws come from z = g/(‖g‖₁ + E), g Laplace, E Exp(1) (design §3.1). The walks are
written here in numpy, each chain a fixed seed:

- the billiard walk (trajectories of random length reflected about the facet's normal: Uniform(K)
  is its stationary law, design §3.2), started from exact uniform draws: the pool must pass;
- a slow billiard walk (short trajectories) started at two opposite vertices, the pool recorded
  from its first step: the starts are not forgotten, it must fail;
- the billiard walk whose reflection uses a wrong normal (the coordinate axis of the largest
  |x_i| instead of the facet's sign(x)/√r): not Uniform(K)-invariant, it must fail;
- the billiard walk judged in a frame off by a factor (the records scaled by 0.98, as if K
  were 2% larger than the walk's body): its gauge law is (t/0.98)^r, it must fail.

Each pool has 2000 records: 8 chains of 250 or 64 of 32 (rounded up to 2048 as certify does),
thinning 1; the functionals are the coordinates, |z|² and the gauge, as in certify.
"""

import numpy as np
import pytest

from knorm.walks.certify import certify_pool, judge_pool, rhat_limit

R = 10


def uniform_draws(rng, size):
    g = rng.laplace(size=(size, R))
    return g / (np.abs(g).sum(axis=1, keepdims=True) + rng.exponential(size=(size, 1)))


def chord_end(x, u):
    """t ≥ 0 with ‖x + t·u‖₁ = 1 for each row (x inside K), exact up to rounding: f(t) = ‖x + t·u‖₁
    is convex and piecewise linear with breakpoints ``−x_i/u_i``; find the first breakpoint where
    f ≥ 1 and solve on the linear piece before it (past the last one, f's slope is ‖u‖₁)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = -x / u
    T = np.sort(np.where(bp > 0, bp, np.inf), axis=1)
    Tf = np.where(np.isfinite(T), T, 0.0)
    f = np.abs(x[:, None, :] + Tf[:, :, None] * u[:, None, :]).sum(axis=2)  # f at each breakpoint
    f = np.where(np.isfinite(T), f, np.inf)
    k = np.argmax(f >= 1.0, axis=1)  # the first at or past the boundary (f(∞) = ∞ pads the rest)
    rows = np.arange(len(x))
    t0 = np.where(k > 0, Tf[rows, np.maximum(k - 1, 0)], 0.0)
    f0 = np.where(k > 0, f[rows, np.maximum(k - 1, 0)], np.abs(x).sum(axis=1))
    t1, f1 = T[rows, k], f[rows, k]
    with np.errstate(invalid="ignore"):
        slope = np.where(np.isfinite(t1), (f1 - f0) / (t1 - t0), np.abs(u).sum(axis=1))
    return np.maximum(t0 + (1.0 - f0) / slope, 0.0)


def directions(rng, n):
    u = rng.standard_normal((n, R))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def billiard_step(x, rng, length=1.0, wrong=False):
    """One step of each chain: a trajectory of length ``length``·U(0.5, 1.5) (K's diameter is 2)
    from x in a uniform direction, reflected at the boundary about the facet's normal sign(x)/√r,
    or (``wrong``) about the coordinate axis of the largest |x_i|."""
    v = directions(rng, len(x))
    left = length * (0.5 + rng.random(len(x)))
    for _ in range(200):
        t = chord_end(x, v)
        go = np.minimum(t, left)
        x = x + go[:, None] * v
        left = left - go
        hit = left > 0
        if not hit.any():
            break
        if wrong:
            n = np.zeros_like(x)
            n[np.arange(len(x)), np.argmax(np.abs(x), axis=1)] = 1.0
        else:
            n = np.sign(x) / np.sqrt(R)
        v = np.where(hit[:, None], v - 2 * np.sum(v * n, axis=1, keepdims=True) * n, v)
        x = x * np.where(hit, 1 - 1e-12, 1.0)[:, None]  # back inside by a hair
    return x


def billiard(x, k, rng, wrong=False, length=1.0, thin=1):
    """``k`` records of each chain from ``x``, every ``thin`` steps."""
    out = np.empty((len(x), k, R))
    for j in range(k):
        for _ in range(thin):
            x = billiard_step(x, rng, length, wrong)
        out[:, j] = x
    return out


def judge(records):
    sq = np.sum(records**2, axis=2)[..., None]
    return judge_pool(records, np.abs(records).sum(axis=2), R, 1, [sq])


def shape(chains):
    per = certify_pool(chains) // chains
    return chains, per + (per & 1)


@pytest.mark.parametrize("chains", [8, 64])
def test_a_stationary_billiard_walk_passes(chains):
    rng = np.random.default_rng(chains)
    c, k = shape(chains)
    m = judge(billiard(uniform_draws(rng, c), k, rng))
    assert m["failures"] == [], m
    exact = judge(uniform_draws(rng, c * k).reshape(c, k, R))  # iid exact draws: the same verdict
    assert exact["failures"] == [], exact


@pytest.mark.parametrize("chains", [8, 64])
def test_a_start_not_forgotten_fails(chains):
    """Half the chains at 0.999·e₁, half at −0.999·e₁, a slow walk (trajectories 20 times shorter, a
    record every 20 steps: τ ≈ 20 records) recorded from its first step. (A walk that mixes forgets a
    vertex in a record or two, and its pool rightly passes: the first test's walk does.)"""
    rng = np.random.default_rng(100 + chains)
    c, k = shape(chains)
    start = np.zeros((c, R))
    start[:, 0] = np.where(np.arange(c) % 2, 0.999, -0.999)
    m = judge(billiard(start, k, rng, length=0.05, thin=20))
    assert m["failures"], m


@pytest.mark.parametrize("chains", [8, 64])
def test_a_wrong_reflection_fails(chains):
    rng = np.random.default_rng(200 + chains)
    c, k = shape(chains)
    m = judge(billiard(uniform_draws(rng, c), k, rng, wrong=True))
    assert m["failures"], m


@pytest.mark.parametrize("chains", [8, 64])
def test_a_frame_off_by_a_factor_fails(chains):
    rng = np.random.default_rng(300 + chains)
    c, k = shape(chains)
    m = judge(0.98 * billiard(uniform_draws(rng, c), k, rng))
    assert any("gauge KS" in f for f in m["failures"]), m


def test_chains_that_disagree_fail_by_r_hat_or_ess():
    """Half the chains shifted by 0.3 standard deviations of a coordinate (iid draws otherwise): at 8
    chains of 250 and at 64 of 32 the verdict sees it."""
    for chains in (8, 64):
        rng = np.random.default_rng(400 + chains)
        c, k = shape(chains)
        x = uniform_draws(rng, c * k).reshape(c, k, R)
        x[: c // 2, :, 0] += 0.3 * x[..., 0].std()
        assert judge(x)["failures"], chains


def test_the_r_hat_bound_follows_its_chi_square_law():
    """Under stationarity nR̂² − 1 = B̂/Ŵ, B̂ the variance of G group means each of variance σ²·G/pool
    (iid draws: ESS = pool); so pool·B̂/(G·σ²) ~ χ²_{G−1}/(G−1), mean 1. Simulated over 400 pools
    of iid normal draws for G = 16 and 128 its mean is within 4 standard errors of 1, and the bound
    (at ESS = pool/2 and α = 10⁻⁶) is never reached."""
    from knorm.walks.certify import split_nested_rhat

    rng = np.random.default_rng(5)
    for chains, per in ((8, 250), (64, 32)):
        pool, groups = chains * per, 2 * chains
        x = rng.standard_normal((400, chains, per))
        stat = np.array([split_nested_rhat(a[..., None])[0] ** 2 - 1 for a in x])
        scaled = stat * pool / groups
        se = np.sqrt(2 / (groups - 1) / 400)
        assert abs(scaled.mean() - 1) < 4 * se + 2 * groups / pool, (chains, scaled.mean())
        assert np.max(np.sqrt(1 + stat)) < rhat_limit(groups, pool)
