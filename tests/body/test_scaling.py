"""Extreme scales of F and of the query points: the oracle is exact at any scale.

‖y‖_K is positively homogeneous and ``K(F·s) = s·K(F)``, so
``gauge_{F·s}(y·s·t) = t·gauge_F(y)`` exactly; the truth is the unscaled value, itself
checked against HiGHS (docs/design.md §2).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knorm import ReferenceOracle, SymmetricHull
from knorm.workloads import random_pm1

SCALES = [1e-300, 1e-200, 2.0**-1000, 1e-150, 1.0, 1e150, 1e200, 1e300]


def _body(seed, d=5, n=12):
    rng = np.random.default_rng(seed)
    F = rng.choice([-1.0, 1.0], size=(d, n))
    return F, SymmetricHull(F), rng


@pytest.mark.parametrize("s", SCALES)
def test_extreme_scale_of_F_gives_the_same_body(s):
    F, K, rng = _body(0)
    Ks = SymmetricHull(F * s)
    assert (Ks.dim, Ks.n_columns) == (K.dim, K.n_columns)
    Y = rng.standard_normal((20, 5))
    np.testing.assert_allclose(Ks.gauge(Y * s), K.gauge(Y), rtol=1e-12)
    assert Ks.gauge(Y[0] * s) == pytest.approx(K.gauge(Y[0]), rel=1e-12)
    # facet normals scale by 1/s, chords are scale-free, to_ambient scales by s
    lam = K.facet_normal(Y)
    np.testing.assert_allclose(Ks.facet_normal(Y * s) * s, lam, rtol=1e-9, atol=1e-12 * np.abs(lam).max())
    x = 0.5 * Y[0] / K.gauge(Y[0])
    np.testing.assert_allclose(Ks.chord(x * s, Y[1] * s), K.chord(x, Y[1]), rtol=1e-12)
    z = np.random.default_rng(1).standard_normal((3, K.dim))
    np.testing.assert_allclose(Ks.to_ambient(z) / s, K.to_ambient(z), rtol=1e-12, atol=1e-15)
    assert np.all(Ks.contains(0.99 * Y * s / K.gauge(Y)[:, None]))
    assert not np.any(Ks.contains(1.01 * Y * s / K.gauge(Y)[:, None]))


@pytest.mark.parametrize("s", [1e-300, 1e300])
def test_extreme_scale_of_a_random_pm1_workload(s):
    """The issue's case: 1e±300 · random ±1 used to drop every column (IndexError)."""
    F = random_pm1(8, 30, rng=3)
    K, Ks = SymmetricHull(F), SymmetricHull(F * s)
    Y = np.random.default_rng(4).standard_normal((10, 8))
    np.testing.assert_allclose(Ks.gauge(Y * s), K.gauge(Y), rtol=1e-12)
    np.testing.assert_allclose(Ks.gauge(Y * s), ReferenceOracle(F).gauge(Y), rtol=1e-9)


def test_column_dropping_is_relative_to_the_largest_column():
    # tiny but non-negligible columns (relative 1e-3) are kept at any scale; relative 1e-20 dropped
    F = np.array([[1.0, 0.0, 1e-3, 1e-20], [0.0, 1.0, 1e-3, 1e-20]])
    for s in (1e-300, 1.0, 1e300):
        Ks = SymmetricHull(F * s)
        assert Ks.n_columns == 3
        np.testing.assert_array_equal(Ks.F, F[:, :3] * s)
        # duplicate and opposite columns are dropped at any scale
        assert SymmetricHull(np.column_stack([F, F[:, :1], -F[:, 1:2]]) * s).n_columns == 3


def test_one_huge_entry_is_refused_where_it_would_lose_a_direction():
    """Issue 34: one entry of 1e300 beside ones dropped the other columns as short, leaving K a
    segment (gauge inf off it, noise never covering those cells): now a one-line error naming F.
    Short columns inside the kept span (the test above) are still dropped silently."""
    from knorm import KNormMechanism

    F = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    for big in (1e300, 1e20, 1e15):
        G = F.copy()
        G[0, 0] = big
        for make in (SymmetricHull, lambda M: KNormMechanism(M, epsilon=1.0)):
            with pytest.raises(ValueError, match=r"^F: column 1 .*off the span") as info:
                make(G)
            assert "\n" not in str(info.value)
    G = F.copy()
    G[0, 0] = 1e13  # within the 1e14 the body resolves: kept, the gauge finite
    assert SymmetricHull(G).dim == 2 and np.isfinite(SymmetricHull(G).gauge(np.ones(2)))


def test_column_norms_beyond_float64_are_a_clear_error():
    with pytest.raises(ValueError, match="^F .*float64"):
        SymmetricHull(np.full((4, 3), 1.7e308))


@pytest.mark.parametrize("t", [1e-320, 1e-300, 1e-200, 1e-159, 1e-100, 1e100, 1e200, 1e300, 1e307])
def test_gauge_of_tiny_and_huge_points(t):
    """Used to come out negative below ‖y‖ ≈ 1e-158 (the leaving-row score underflowed)."""
    F, K, rng = _body(5)
    Y = rng.standard_normal((30, 5))
    Y /= np.abs(Y).max(axis=1, keepdims=True)  # max |y| = 1: y·t and ‖y·t‖_K stay finite
    g = K.gauge(Y)
    got = K.gauge(Y * t)
    rtol = 1e-12 if t > 1e-300 else 1e-3  # y·1e-320 is subnormal: only ~3 significant digits
    np.testing.assert_allclose(got, g * t, rtol=rtol)
    assert np.all(got > 0)


def test_frame_gauges_are_exact_at_any_scale():
    _, K, rng = _body(6)
    Z = rng.standard_normal((10, K.dim))
    g, lam = K.frame.gauges(Z)
    for t in (2.0**-1040, 1e-300, 1e300):  # y·2^-1040 is subnormal (~34 bits left)
        gt, lt = K.frame.gauges(Z * t)
        np.testing.assert_allclose(gt, g * t, rtol=1e-12 if t > 1e-310 else 1e-8)
        np.testing.assert_allclose(lt, lam, rtol=1e-12 if t > 1e-310 else 1e-8, atol=1e-12)


def test_overflowing_results_raise_instead_of_inf():
    F, _, _ = _body(7)
    Ks = SymmetricHull(F * 1e-300)
    y = np.ones(5) * 1e300  # ‖y‖_K ≈ 1e600
    with pytest.raises(ValueError, match="^y: .*overflows"):
        Ks.gauge(y)
    assert not Ks.contains(y)
    Kb = SymmetricHull(F * 1e300)
    with pytest.raises(ValueError, match="^u: .*overflows"):
        Kb.chord(np.zeros(5), np.ones(5) * 1e-300)  # chord ends at ±1e600
    Kt = SymmetricHull(F * 2.0**-1070)  # subnormal F: facet normals ≈ 2^1070
    with pytest.raises(ValueError, match="^F: .*overflow"):
        Kt.facet_normal(np.ones(5) * 1e-320)


small_bodies = st.tuples(st.integers(2, 4), st.integers(0, 10**6))


@settings(max_examples=40, deadline=None)
@given(body=small_bodies, log_s=st.floats(-300, 300), log_t=st.floats(-300, 300))
def test_gauge_scaling_property(body, log_s, log_t):
    """gauge_{F·s}(y·s·t) = t·gauge_F(y) (1e-12) and gauge_F(y) = HiGHS (1e-9)."""
    d, seed = body
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((d, d + 3))
    y = rng.standard_normal(d)
    s, t = 10.0**log_s, 10.0**log_t
    g = SymmetricHull(F).gauge(y)
    assert g == pytest.approx(ReferenceOracle(F).gauge(y), rel=1e-9)
    with np.errstate(over="ignore"):
        ys = y * s * t
    if not np.all(np.isfinite(ys)) or np.abs(ys).max() < 1e-290:
        return  # y·s·t itself is not representable (or has lost digits)
    want = g * t
    Ks = SymmetricHull(F * s)
    if want > 1e307:
        with pytest.raises(ValueError, match="overflows"):
            Ks.gauge(ys)
    elif want > 1e-290:
        assert Ks.gauge(ys) == pytest.approx(want, rel=1e-12)
        assert ReferenceOracle(F * s).gauge(ys) == pytest.approx(want, rel=1e-9)  # HiGHS on the scaled body


@pytest.mark.parametrize("s", [1e-300, 1e300])
def test_reference_oracle_at_extreme_scales(s):
    """HiGHS's tolerances are absolute: the reference rescales too (it returned 0 or failed)."""
    F, K, rng = _body(9)
    ref, refs = ReferenceOracle(F), ReferenceOracle(F * s)
    Y = rng.standard_normal((4, 5))
    np.testing.assert_allclose(refs.gauge(Y * s), ref.gauge(Y), rtol=1e-9)
    np.testing.assert_allclose(refs.gauge(Y * s), K.gauge(Y), rtol=1e-9)
    assert refs.facet_normal(Y[0] * s) @ (Y[0] * s) == pytest.approx(K.gauge(Y[0]), rel=1e-8)
    x = 0.5 * Y[1] / K.gauge(Y[1])
    np.testing.assert_allclose(refs.chord(x * s, Y[2] * s), K.chord(x, Y[2]), rtol=1e-8)
    np.testing.assert_allclose(ref.gauge(Y * 1e-200), K.gauge(Y) * 1e-200, rtol=1e-9)


def test_reference_oracle_bad_points_are_named():
    ref = ReferenceOracle(np.eye(3))
    for name, call in [("y", lambda v: ref.gauge(v)), ("y", lambda v: ref.facet_normal(v)),
                       ("x", lambda v: ref.chord(v, np.ones(3))), ("u", lambda v: ref.chord(np.zeros(3), v))]:
        for bad in ([1.0, 2.0], [np.nan, 0, 0], "abc", [1j, 0, 0]):
            with pytest.raises(ValueError, match=f"^{name} "):
                call(bad)
    with pytest.raises(ValueError, match="^tol "):
        ref.contains(np.ones(3), tol=np.nan)
    with pytest.raises(ValueError, match="^method "):
        ReferenceOracle(np.eye(3), method=["highs"])
