"""Volumes against bodies with known volume (MATH.md §6) and the lower-bound yardsticks."""

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


def test_exact_method_refuses_general_bodies():
    with pytest.raises(ValueError, match="no exact volume"):
        bounds.volume(W.random_pm1(4, 9, rng=0), method="exact")
