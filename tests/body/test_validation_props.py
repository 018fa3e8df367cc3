"""Odd inputs for SymmetricHull and its oracle: a correct finite answer or a one-line
ValueError naming the argument, never a traceback from deep inside or a wrong number.

Correctness without trusting the oracle: for ``y = F w``, ``‖y‖_K <= ‖w‖₁`` (primal),
and the returned facet normal λ is dual feasible (``|Fᵀλ| <= 1``) with ``λ·y = ‖y‖_K``
(weak duality makes that the optimum); on well-conditioned bodies also HiGHS.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from knorm import ReferenceOracle, SymmetricHull

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def raises_named(name, fn, *args, **kwargs):
    """``fn(*args)`` raises a one-line ValueError whose message names ``name``."""
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert re.search(rf"(^|\W){re.escape(name)}(\W|$)", msg), f"{name!r} not named in: {msg}"


# ---- well-formed bodies at any scale, with duplicated / opposite / zero / near-parallel columns

@st.composite
def bodies(draw):
    d = draw(st.integers(1, 5))
    n = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["gauss", "pm1", "int"]))
    F = {"gauss": lambda: rng.standard_normal((d, n)), "pm1": lambda: rng.choice([-1.0, 1.0], size=(d, n)),
         "int": lambda: rng.integers(-3, 4, size=(d, n)).astype(float)}[kind]()
    if not np.any(F):
        F[0, 0] = 1.0
    if draw(st.booleans()) and d > 1:  # rank deficient
        F[-1] = F[0] * draw(st.sampled_from([1.0, -2.0, 0.5]))
    extras = draw(st.lists(st.sampled_from(["dup", "opp", "zero", "near", "nearer", "half"]), max_size=3))
    cols = [F]
    for e in extras:
        j = int(rng.integers(F.shape[1]))
        f = F[:, j:j + 1]
        cols.append({"dup": f, "opp": -f, "zero": 0 * f, "half": 0.5 * f,
                     "near": f + 1e-6 * np.abs(f).max() * rng.standard_normal(f.shape),
                     "nearer": f + 1e-12 * np.abs(f).max() * rng.standard_normal(f.shape)}[e])
    F = np.hstack(cols)
    if not np.any(F):
        F[0, 0] = 1.0
    scale = 10.0 ** draw(st.sampled_from([-300, -200, -100, -20, 0, 20, 100, 200, 300]))
    return F * scale, scale, rng


@SETTINGS
@given(bodies())
def test_well_formed_bodies_at_any_scale_give_certified_answers(body):
    F, scale, rng = body
    S = np.linalg.svd(F / scale, compute_uv=False)
    S = S[S > S[0] * max(F.shape) * np.finfo(float).eps]
    kappa = S[0] / S[-1]  # the tolerances below follow the condition number
    try:
        K = SymmetricHull(F)
    except ValueError as exc:  # refused only when K is too thin for the oracle
        assert re.match(r"F spans a direction .* thinner", str(exc)) and kappa > 1e12, (str(exc), kappa)
        return
    tol = 1e-9 + 1e-11 * kappa  # measured: Harris-tolerance errors grow like 1e-12·κ (near-parallel columns)
    d = F.shape[0]
    W = rng.standard_normal((4, F.shape[1]))
    Y = W @ F.T  # in the span by construction
    g = K.gauge(Y)
    assert np.all(np.isfinite(g)) and np.all(g >= 0)
    assert np.all(g <= np.abs(W).sum(1) * (1 + tol) + 1e-300)
    try:
        lam = K.facet_normal(Y)
    except ValueError as exc:  # ‖λ‖ >= 1/σ_min(F) = κ/(S₀·scale): beyond float64 for thin, tiny F
        assert "overflow" in str(exc) and kappa / (S[0] * scale) > 1e290, (str(exc), kappa, scale)
        return
    assert np.all(np.isfinite(lam))
    # dual feasibility on the original columns (compared at unit scale: Fᵀλ is scale-free)
    assert np.max(np.abs((F / scale).T @ (lam * scale).T)) <= 1 + tol
    np.testing.assert_allclose(np.einsum("ij,ij->i", lam, Y), g, rtol=tol, atol=1e-12 * g.max())
    # membership and chords agree with the gauge
    B = Y[g > 0] / g[g > 0, None]
    if len(B):
        assert np.all(K.contains(0.999 * B)) and not np.any(K.contains(1.001 * B))
        x = 0.5 * B[0]
        tm, tp = K.chord(x, Y[-1])
        if np.isfinite(tp) and tp > 0:
            # through ambient coordinates: the map into the span costs ≈ 1e-16·κ (relative)
            assert K.gauge(x + tp * Y[-1]) == pytest.approx(1.0, abs=1e-7 + 1e-14 * kappa)
    assert K.gauge(np.zeros(d)) == 0.0
    # well-conditioned bodies: HiGHS on the same body at unit scale (exactly F·2^-e)
    Fu = np.ldexp(F, -int(np.frexp(np.abs(F).max())[1]))
    s = np.linalg.svd(Fu, compute_uv=False)
    if s[-1] > 1e-4 * s[0] and F.shape[0] <= F.shape[1]:
        Yu = np.ldexp(Y, -int(np.frexp(np.abs(F).max())[1]))
        np.testing.assert_allclose(SymmetricHull(Fu).gauge(Yu), g, rtol=1e-12)
        np.testing.assert_allclose(g, ReferenceOracle(Fu).gauge(Yu), rtol=1e-7, atol=1e-9)


# ---- malformed matrices -----------------------------------------------------------------

odd_dtypes = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.uint8, np.bool_, np.complex128])


@st.composite
def odd_matrices(draw):
    dtype = draw(odd_dtypes)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    if np.dtype(dtype).kind == "f":
        elements = st.floats(allow_nan=True, allow_infinity=True, width=np.dtype(dtype).itemsize * 8)
    else:
        elements = None
    return draw(hnp.arrays(dtype, shape, elements=elements))


@SETTINGS
@given(odd_matrices())
def test_odd_matrices_give_a_body_or_a_named_error(F):
    try:
        K = SymmetricHull(F)
    except ValueError as exc:
        msg = str(exc)
        assert "\n" not in msg and re.match(r"F\b", msg), msg
        return
    # accepted: real, 2-D, finite, non-zero -- then every answer is finite and certified
    A = np.asarray(F, dtype=np.float64)
    assert A.ndim == 2 and np.all(np.isfinite(A)) and np.any(A)
    w = np.ones(A.shape[1])
    y = A @ w if np.all(np.isfinite(A @ w)) else A[:, 0]
    g = K.gauge(y)
    assert np.isfinite(g) and 0 <= g


@pytest.mark.parametrize("F", [
    [[1.0, 2.0], [3.0]], "abc", None, [[1, "a"]], np.array([[1.0, None]], dtype=object), [[1e400, 1.0]],
    np.zeros((3, 0)), np.zeros((0, 3)), np.float64(2.0), [[np.nan]], [[0.0, -0.0]], np.full((2, 2), 1.7e308),
    np.array([[np.datetime64("2020-01-01")]]), np.array([[1.0]], dtype=np.longdouble) * np.longdouble(1e400),
])
def test_malformed_matrices(F):
    raises_named("F", SymmetricHull, F)


# ---- malformed points and options --------------------------------------------------------

K3 = SymmetricHull(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]))


@SETTINGS
@given(hnp.arrays(st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128]),
                  hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                  elements=None))
def test_odd_points_give_an_answer_or_a_named_error(y):
    for method in (K3.gauge, K3.contains, K3.facet_normal):
        try:
            out = method(y)
        except ValueError as exc:
            msg = str(exc)
            assert "\n" not in msg and re.match(r"y\b", msg), msg
            continue
        assert y.ndim in (1, 2) and y.shape[-1] == 3 and not np.iscomplexobj(y)
        assert np.all(np.isfinite(np.asarray(out, dtype=float)) | (method == K3.gauge))


@SETTINGS
@given(st.floats(-1e308, 1e308).filter(lambda v: v == 0 or abs(v) > 1e-300).map(lambda v: np.array([v, -v / 3, 0.0])),
       st.floats(allow_nan=True, allow_infinity=True))
def test_finite_points_of_any_size_and_odd_entries(y, bad):
    g = K3.gauge(y)  # finite at any size (y / 3 keeps it in the normal range), and homogeneous
    assert np.isfinite(g) and g == pytest.approx(K3.gauge(y / 2) * 2, rel=1e-12, abs=0)
    if not np.isfinite(bad):
        raises_named("y", K3.gauge, np.array([1.0, bad, 0.0]))
        raises_named("x", K3.chord, np.array([0.1, bad, 0.0]), np.ones(3))
        raises_named("u", K3.chord, np.zeros(3), np.array([1.0, bad, 0.0]))


@pytest.mark.parametrize("y", [[1.0, 2.0], [[1.0, 2.0, 3.0], [1.0]], "abc", None, np.ones((2, 2, 3)),
                               np.float64(1.0), np.array([1, "a", 2], dtype=object), [1j, 0, 0],
                               [np.nan, 0, 0], [np.inf, 0, 0], [1e400, 0, 0]])
def test_malformed_points(y):
    raises_named("y", K3.gauge, y)
    raises_named("y", K3.contains, y)
    raises_named("y", K3.facet_normal, y)
    raises_named("x", K3.chord, y, np.ones(3))
    raises_named("u", K3.chord, np.zeros(3), y)


@pytest.mark.parametrize("value", [np.nan, -1.0, np.inf, "0.1", None, True])
def test_malformed_tolerances(value):
    raises_named("span_tol", K3.gauge, np.ones(3), span_tol=value)
    raises_named("tol", K3.contains, np.ones(3), tol=value)


def test_chord_argument_errors_name_the_argument():
    raises_named("x", K3.chord, np.ones((2, 3)), np.ones(3))
    raises_named("u", K3.chord, np.zeros(3), np.ones((2, 3)))
    raises_named("x", K3.chord, np.array([5.0, 0.0, 0.0]), np.ones(3))  # outside K
    K2 = SymmetricHull(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))  # flat in R^3
    raises_named("x", K2.chord, np.array([0.1, 0.0, 0.5]), np.ones(3))  # off the span
    raises_named("y", K2.facet_normal, np.array([0.1, 0.0, 0.5]))
    assert K2.chord(np.zeros(3), np.array([0.0, 0.0, 1.0])) == (0.0, 0.0)


def test_empty_batches_give_empty_answers():
    Y = np.zeros((0, 3))
    assert K3.gauge(Y).shape == (0,)
    assert K3.contains(Y).shape == (0,)
    assert K3.facet_normal(Y).shape == (0, 3)


@pytest.mark.parametrize("F", [np.diag([1.0, 3e-14, 1.0]), np.array([[1.0, 1.0], [1.0, 1.0 + 3e-14]])])
def test_bodies_too_thin_for_the_oracle_are_refused(F):
    """Used to build, then fail on queries (OracleError) or return gauges off by 1e-3."""
    raises_named("F", SymmetricHull, F)


@pytest.mark.parametrize("t", [1e-7, 1e-10, 1e-12 * 1.01])
def test_thin_but_resolvable_bodies_stay_exact(t):
    """K = diag(1, t, 1)·B₁³: ‖y‖_K = |y₁| + |y₂|/t + |y₃| (whitened coordinates below 1e-7)."""
    K = SymmetricHull(np.diag([1.0, t, 1.0]))
    Y = np.random.default_rng(0).standard_normal((20, 3)) * [1.0, t, 1.0]
    np.testing.assert_allclose(K.gauge(Y), np.abs(Y[:, 0]) + np.abs(Y[:, 1]) / t + np.abs(Y[:, 2]), rtol=1e-12)
