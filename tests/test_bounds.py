"""Volumes against bodies with known volume (docs/design.md §6) and the lower-bound yardsticks."""

import itertools
import math

import numpy as np
import pytest

from knorm import SymmetricHull
from knorm import bounds
from knorm import workloads as W


def cube_F(d):
    s = np.array(list(itertools.product([-1.0, 1.0], repeat=d - 1)))
    return np.column_stack([np.ones(len(s)), s]).T


KNOWN = [
    ("cross-polytope d=5", np.eye(5), 2**5 / math.factorial(5)),
    ("cross-polytope d=8", np.eye(8), 2**8 / math.factorial(8)),
    ("scaled cross-polytope", np.diag([0.5, 1.0, 3.0, 2.0]), 2**4 / 24 * 3.0),
    ("cube d=4", cube_F(4), 2.0**4),
    ("cube d=6", cube_F(6), 2.0**6),
]


@pytest.mark.parametrize("name,F,true", KNOWN)
def test_exact_volumes(name, F, true):
    est = bounds.volume(F)
    assert est.exact and est.rel_stderr == 0
    assert est.volume == pytest.approx(true, rel=1e-10)


@pytest.mark.parametrize("name,F,true", KNOWN)
def test_monte_carlo_volume_within_its_standard_error(name, F, true):
    est = bounds.volume(F, method="mc", rel_error=0.1, rng=3)
    assert not est.exact and est.phases >= 1
    assert 0 < est.rel_stderr <= 0.1 * 1.05
    # log V̂ is approximately normal with sd = rel_stderr
    assert abs(np.log(est.volume / true)) < 4.5 * est.rel_stderr, (est.volume, true, est.rel_stderr)


def test_volume_of_a_rank_deficient_body_is_taken_in_its_span():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((6, 3))
    F = A @ np.eye(3)  # K = A·B₁³ inside R^6
    K = SymmetricHull(F)
    true = abs(np.linalg.det(K.span_basis.T @ A)) * 8 / 6
    assert bounds.volume(F).volume == pytest.approx(true, rel=1e-10)
    est = bounds.volume(F, method="mc", rel_error=0.1, rng=5)
    assert est.dim == 3
    assert abs(np.log(est.volume / true)) < 4.5 * est.rel_stderr


def test_random_body_volume_is_bracketed():
    """conv(±columns) ⊇ any cross-polytope on r independent columns; ⊆ the bounding box of F."""
    F = W.random_pm1(6, 14, rng=6)
    est = bounds.volume(F, rel_error=0.1, rng=7)
    inner = max(abs(np.linalg.det(F[:, list(c)])) for c in itertools.combinations(range(14), 6)) * 2**6 / 720
    assert inner * np.exp(-4.5 * est.rel_stderr) < est.volume < 2.0**6


def test_inner_radius_is_inside():
    F = W.random_pm1(8, 30, rng=8)
    K = SymmetricHull(F)
    rho = bounds.inner_radius(K.frame)
    V = np.random.default_rng(0).standard_normal((500, 8))
    V *= rho / np.linalg.norm(V, axis=1, keepdims=True)
    assert np.all(K.frame.gauges(V)[0] <= 1 + 1e-9)


def test_vol_lower_bound_formula():
    d, eps = 5, 0.5
    b = bounds.vol_lower_bound(np.eye(d), eps)
    assert b.value == pytest.approx(d * np.sqrt(d) * (2**d / math.factorial(d)) ** (1 / d) / eps, rel=1e-10)
    assert b.stderr == 0 and "constant" in b.note


def test_gvol_lower_bound_dominates_vol_lower_bound_candidates():
    F = np.diag([10.0, 5.0, 1.0, 0.5])
    g = bounds.gvol_lower_bound(F, 1.0)
    v = bounds.vol_lower_bound(F, 1.0)
    assert g.value >= v.value * (1 - 1e-9)
    assert any(k == 4 for k, _, _ in g.candidates)
    # the top-eigenvector subspace of this diagonal body is spanned by e1, e2
    k2 = [val for k, val, _ in g.candidates if k == 2]
    assert max(k2) == pytest.approx(2 * np.sqrt(2) * (2**2 / 2 * 50) ** 0.5, rel=1e-9)


@pytest.mark.parametrize("kwargs,match", [({"method": "guess"}, "method"), ({"rel_error": 0}, "rel_error"),
                                          ({"quantile": 1.5}, "quantile")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bounds.volume(np.eye(3), **kwargs)
    with pytest.raises(ValueError, match="epsilon"):
        bounds.vol_lower_bound(np.eye(3), 0)


BAD_VOLUME_ARGS = [
    ({"rel_error": 1e-300}, "^rel_error=1e-300 .* draws per phase"),  # used to OverflowError
    ({"rel_error": 1e-4}, "^rel_error=0.0001 .* draws per phase"),
    ({"rel_error": -0.1}, "^rel_error must"), ({"rel_error": np.nan}, "^rel_error must"),
    ({"rel_error": np.inf}, "^rel_error must"), ({"rel_error": 1.0}, "^rel_error must"),
    ({"rel_error": "0.1"}, "^rel_error must"), ({"rel_error": True}, "^rel_error must"),
    ({"chains": 0}, "^chains must"), ({"chains": -3}, "^chains must"),  # 0 used to ZeroDivisionError
    ({"chains": 2.5}, "^chains must"), ({"chains": 10**9}, "^chains must be at most"),
    ({"quantile": 0}, "^quantile must"), ({"quantile": 1}, "^quantile must"),
    ({"quantile": np.nan}, "^quantile must"), ({"quantile": None}, "^quantile must"),
    ({"method": ["mc"]}, "^method must"), ({"method": None}, "^method must"),
    ({"max_samples": 0}, "^max_samples must"), ({"max_samples": 2.0}, "^max_samples must"),
    ({"max_samples": 10**12}, "^max_samples must be at most"),
    ({"workers": 0}, "^workers must"), ({"workers": "all"}, "^workers must"),
    ({"rng": "seed"}, "^rng must"), ({"rng": -1}, "^rng seed"),
]


@pytest.mark.parametrize("kwargs,match", BAD_VOLUME_ARGS)
def test_bad_volume_arguments_fail_fast(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bounds.volume(W.random_pm1(4, 9, rng=0), **{"method": "mc", **kwargs})


def test_a_capped_budget_allows_a_tiny_rel_error_and_reports_what_it_reached():
    est = bounds.volume(np.eye(2) @ np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), method="mc", rel_error=1e-4,
                        max_samples=2000, rng=1)
    assert est.rel_stderr > 1e-4  # the cap was hit: the achieved error is reported, not the target
    assert est.samples <= est.phases * 2000 + 4


def test_quantile_too_close_to_one_fails_fast():
    with pytest.raises(ValueError, match="^quantile=0.9999 is too close to 1"):
        bounds.volume(W.random_pm1(4, 9, rng=0), method="mc", quantile=0.9999, rng=0)


@pytest.mark.parametrize("eps", [0, -1.0, np.nan, np.inf, "1", True, None])
def test_bad_epsilon_of_the_lower_bounds(eps):
    with pytest.raises(ValueError, match="^epsilon"):
        bounds.vol_lower_bound(np.eye(3), eps)
    with pytest.raises(ValueError, match="^epsilon"):
        bounds.gvol_lower_bound(np.eye(3), eps)


def test_lower_bounds_never_return_non_finite_values():
    with pytest.raises(ValueError, match="^epsilon=4.94066e-324: VolLB"):
        bounds.vol_lower_bound(np.eye(3), 5e-324)  # ε⁻¹·3√3·Vol^(1/3) ≈ 1e324 overflows
    b = bounds.vol_lower_bound(np.eye(3), 1e-300)
    assert b.value == pytest.approx(3 * np.sqrt(3) * (8 / 6) ** (1 / 3) * 1e300, rel=1e-12)
    with pytest.raises(ValueError, match="^rel_error"):
        bounds.vol_lower_bound(np.eye(3), 1.0, rel_error=0)
    with pytest.raises(ValueError, match="^rel_error"):
        bounds.gvol_lower_bound(np.eye(3), 1.0, rel_error=2)
    with pytest.raises(ValueError, match="^volume_estimate"):
        bounds.vol_lower_bound(np.eye(3), 1.0, volume_estimate=2.0)


def test_exact_method_refuses_general_bodies():
    with pytest.raises(ValueError, match="no exact volume"):
        bounds.volume(W.random_pm1(4, 9, rng=0), method="exact")


@pytest.mark.parametrize("s", [1e-300, 1e300])
def test_volumes_of_bodies_at_extreme_scales(s):
    """F·s scales Vol_r by s^r: kept in log space; .volume refuses to return 0 or inf."""
    est = bounds.volume(np.eye(3) * s)
    assert est.log_volume == pytest.approx(np.log(8 / 6) + 3 * np.log(s), rel=1e-12)
    with pytest.raises(ValueError, match="^volume = exp"):
        est.volume
    b = bounds.vol_lower_bound(np.eye(3) * s, 1.0)
    assert b.value == pytest.approx(3 * np.sqrt(3) * (8 / 6) ** (1 / 3) * s, rel=1e-12)
    # Monte Carlo: the same frame up to rounding, so the estimates agree within their errors;
    # for a power-of-two factor the frame, hence the seeded run, is identical
    F = W.random_pm1(4, 9, rng=0)
    mc, mcs = bounds.volume(F, method="mc", rng=2), bounds.volume(F * s, method="mc", rng=2)
    assert abs(mcs.log_volume - 4 * np.log(s) - mc.log_volume) < 4.5 * np.hypot(mc.rel_stderr, mcs.rel_stderr)
    p2 = 2.0 ** np.round(np.log2(s))
    mc2 = bounds.volume(F * p2, method="mc", rng=2)
    assert mc2.log_volume - 4 * np.log(p2) == pytest.approx(mc.log_volume, rel=1e-12)
