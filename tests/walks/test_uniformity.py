"""Every walk against the exact moments of docs/design.md §6 and the exact law of the gauge.

Tolerances are Monte-Carlo standard errors: the sampler certifies min bulk ESS ≥ N/2, and
each check uses SE = sd/√ESS with the smallest ESS it reports (checked to be at least N/2).
"""

import itertools

import numpy as np
import pytest
from scipy import stats

from knorm import SymmetricHull, sample_uniform

WALKS = ["billiard", "hit_and_run", "coordinate", "ball"]
N = 3000
Z = 4.5  # standard errors allowed per check


def cube_F(d):
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=d - 1)))
    return np.column_stack([np.ones(len(signs)), signs]).T


def draw(F, walk, seed):
    x, info = sample_uniform(F, N, walk=walk, rng=seed, return_info=True)
    assert info.converged, info.summary()
    assert info.min_ess >= info.draws / 2
    return x, info


def assert_mean(values, exact, ess, label):
    se = values.std(ddof=1) / np.sqrt(ess)
    assert abs(values.mean() - exact) < Z * se, f"{label}: {values.mean():.5f} vs exact {exact:.5f} (SE {se:.2g})"


def assert_gauge_law(K, x, ess, label):
    """‖z‖_K^r ~ U(0,1) for z uniform in r-dim K; KS with the effective sample size."""
    u = K.gauge(x) ** K.dim
    D = stats.kstest(u, "uniform").statistic
    # P(√n·D > 1.95) ≈ 0.001 for n independent draws; use n = ESS.
    assert np.sqrt(ess) * D < 1.95, f"{label}: KS D = {D:.4f} with ESS {ess:.0f}"


@pytest.mark.parametrize("walk", WALKS)
def test_cross_polytope(walk):
    d = 5
    x, info = draw(np.eye(d), walk, 100)
    ess = info.min_ess * N / info.draws
    for i in range(d):
        assert_mean(x[:, i] ** 2, 2 / ((d + 1) * (d + 2)), ess, f"{walk} E z_{i}^2")
    assert_mean(np.abs(x).sum(1), d / (d + 1), ess, f"{walk} E|z|_1")
    assert_gauge_law(SymmetricHull(np.eye(d)), x, ess, walk)


@pytest.mark.parametrize("walk", WALKS)
def test_scaled_cross_polytope(walk):
    s = np.array([0.25, 1.0, 3.0, 10.0])
    d = len(s)
    x, info = draw(np.diag(s), walk, 200)
    ess = info.min_ess * N / info.draws
    for i in range(d):
        assert_mean(x[:, i] ** 2, 2 * s[i] ** 2 / ((d + 1) * (d + 2)), ess, f"{walk} E z_{i}^2")


@pytest.mark.parametrize("walk", WALKS)
def test_cube(walk):
    d = 4
    F = cube_F(d)
    x, info = draw(F, walk, 300)
    ess = info.min_ess * N / info.draws
    for i in range(d):
        assert_mean(x[:, i] ** 2, 1 / 3, ess, f"{walk} E z_{i}^2")
    assert np.all(np.abs(x) <= 1 + 1e-9)
    assert_gauge_law(SymmetricHull(F), x, ess, walk)


@pytest.mark.parametrize("walk", ["billiard", "hit_and_run"])
def test_gauge_law_on_a_random_body(walk):
    rng = np.random.default_rng(9)
    F = rng.choice([-1.0, 1.0], size=(8, 30))
    x, info = draw(F, walk, 400)
    assert_gauge_law(SymmetricHull(F), x, info.min_ess * N / info.draws, walk)


def test_rank_deficient_draws_stay_in_the_span_and_are_uniform_there():
    rng = np.random.default_rng(10)
    A = rng.standard_normal((6, 3))
    F = A @ np.eye(3)  # a linear image of the 3-d cross-polytope inside R^6
    K = SymmetricHull(F)
    x, info = draw(F, "billiard", 500)
    Q = K.span_basis
    np.testing.assert_allclose(x - (x @ Q) @ Q.T, 0, atol=1e-10)
    ess = info.min_ess * N / info.draws
    # coordinates of z = A c with c uniform in B_1^3: E c_i^2 = 2/20
    c = np.linalg.lstsq(A, x.T, rcond=None)[0].T
    for i in range(3):
        assert_mean(c[:, i] ** 2, 2 / 20, ess, f"c_{i}^2")
    assert_gauge_law(K, x, ess, "rank-deficient")


@pytest.mark.parametrize("radius", [np.inf, 0.3])
def test_radial_refresh_alone_draws_the_exact_radius(radius):
    """Billiard steps of length 0 leave only the radial refresh: every step redraws
    x ← c·x with c uniform in law ∝ c^{r−1} on (0, c_max], so along a fixed direction the
    states' |x|/|x|_max, raised to the power r, are iid U(0, 1) (the polar law of the
    uniform distribution). K = conv(±e_i) in R³ (gauge ‖·‖₁), direction (1, 1, 1)/√3:
    the boundary is at |x| = 1/√3 ≈ 0.577; a ball clip of radius 0.3 cuts it first."""
    from knorm.walks.chains import Chain, default_params, run_chains

    K = SymmetricHull(np.eye(3))
    frame = K.frame
    p = default_params("billiard", frame)
    p[0], p[2], p[3] = 0.0, radius, 0.0
    x0 = np.full(3, 0.1)
    c = Chain(frame, x0, np.random.default_rng(5))
    rec = run_chains([c], "billiard", 4000, 1, p)[0]
    direction = rec / np.linalg.norm(rec, axis=1, keepdims=True)
    assert np.allclose(direction, x0 / np.linalg.norm(x0), atol=1e-12)  # only the radius moves
    cmax = min(1 / frame.gauges(x0[None] / np.linalg.norm(x0))[0][0], radius)
    u = (np.linalg.norm(rec, axis=1) / cmax) ** 3
    assert u.max() <= 1 + 1e-12
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # independent steps: lag-1 correlation within 4.5 standard errors (1/√N) of 0
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < Z / np.sqrt(len(u))
