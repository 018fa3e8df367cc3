"""Bad and extreme inputs to the mechanisms: a finite, correct answer or a one-line
ValueError/TypeError naming the argument; never another exception, NaN/inf, a hang, or a charge.

Scale checks use exact identities rather than numbers the code produced: every error of a
mechanism is homogeneous, ``rms(c·F, ε) = c·rms(F, ε)`` and ``rms(F, ε/c) = c·rms(F, ε)`` for
the pure-DP mechanisms (the noise is F-linear and proportional to 1/ε), and for the Gaussian
``σ(c·Δ) = c·σ(Δ)`` (its privacy profile depends on Δ/σ alone). With c a power of two both
sides are the same float operations up to an exact exponent shift.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knorm import workloads as W
from knorm.mechanisms import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism,
                              LaplaceMechanism, NIMechanism, PIdentityMechanism, PrivacyClaim, analytic_gaussian_sigma)
from knorm.mechanisms._base import MAX_N_SAMPLES, mean_stderr, row_norms
from knorm.mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism
from knorm.mechanisms.nim import split_epsilon
from knorm.mechanisms.strategy import Hierarchy
from knorm.privacy import BudgetAccountant

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F3 = np.array([[1.0, -1.0, 1.0, 1.0], [1.0, 1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]])  # rank 3, ±1
EXACT = {"laplace": LaplaceMechanism, "identity": IdentityMechanism, "hierarchical": HierarchicalMechanism,
         "p-identity": PIdentityMechanism}


def raises_named(name, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` raises a one-line ValueError/TypeError whose message names ``name``."""
    with pytest.raises((ValueError, TypeError)) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert re.search(rf"(^|\W){re.escape(name)}(\W|$)", msg), f"{name!r} not named in: {msg}"
    return msg


# ---- the reported cases ---------------------------------------------------------------------

def test_nim_at_huge_epsilon_builds_and_predicts_a_scaled_error():
    """ε = 1e300 (an OverflowError before): NIM's prediction is homogeneous of degree −1 in ε."""
    one = NIMechanism(F3, epsilon=1.0)
    big = NIMechanism(F3, epsilon=1e300)
    assert big.predicted_error == pytest.approx(one.predicted_error / 1e300, rel=1e-12)
    assert np.all(np.isfinite(big.sample_noise(3)))


@pytest.mark.parametrize("name", ["hierarchical", "p-identity", "identity", "laplace"])
def test_strategies_at_tiny_epsilon_scale_exactly(name):
    """ε = 2^-990 (≈ 1e-298; an OverflowError before for hierarchical and p-identity): every error
    is 2^990 times the one at ε = 1, to the last bit (a power-of-two shift)."""
    cls = EXACT[name]
    one, tiny = cls(W.prefix(6), epsilon=1.0), cls(W.prefix(6), epsilon=2.0**-990)
    assert tiny.rms_error() == np.ldexp(one.rms_error(), 990)
    assert np.all(np.isfinite(tiny.sample_noise(4)))
    with pytest.raises(ValueError, match="epsilon"):  # the squared error itself leaves float64
        tiny.expected_squared_error()


@pytest.mark.parametrize("name", ["hierarchical", "p-identity"])
def test_epsilon_whose_noise_overflows_is_refused_naming_it(name):
    raises_named("epsilon", EXACT[name], W.prefix(6), epsilon=1e-310)


def test_gaussian_sigma_at_any_scale_of_f():
    """σ(c·Δ) = c·σ(Δ): F·2^±990 gives σ·2^±990 exactly (scipy's 'function value at x=inf is NaN' before)."""
    g = GaussianMechanism(F3, epsilon=1.0, delta=1e-6)
    for k in (-990, 990):
        gk = GaussianMechanism(np.ldexp(F3, k), epsilon=1.0, delta=1e-6)
        assert gk.sigma == np.ldexp(g.sigma, k)
        assert gk.rms_error() == np.ldexp(g.rms_error(), k)
    assert analytic_gaussian_sigma(2.0**-1000, 1.0, 1e-6) == np.ldexp(analytic_gaussian_sigma(1.0, 1.0, 1e-6), -1000)
    raises_named("sensitivity", analytic_gaussian_sigma, "1", 1.0, 1e-6)


def test_string_sensitivity_is_refused_naming_it():
    for bad in ("1", None, 1j, True, float("nan"), -1.0, 0.0, 10**400):
        raises_named("sensitivity", CovarianceGaussianMechanism, np.eye(2), bad, epsilon=0.5, delta=1e-6)


def test_identity_expected_error_refuses_huge_n_samples_at_once():
    m = IdentityMechanism(F3, epsilon=1.0)
    raises_named("n_samples", m.expected_error, n_samples=10**12)
    raises_named("n_samples", m.expected_error, n_samples=MAX_N_SAMPLES + 1)
    wide = IdentityMechanism(np.ones((2, 2000)), epsilon=1.0)  # 1e6 draws × 2000 values: over the work cap
    raises_named("n_samples", wide.expected_error, n_samples=10**6)


@pytest.mark.parametrize("make", [lambda: LaplaceMechanism(F3, epsilon=1.0),
                                  lambda: IdentityMechanism(F3, epsilon=1.0),
                                  lambda: HierarchicalMechanism(F3, epsilon=1.0),
                                  lambda: PIdentityMechanism(F3, epsilon=1.0),
                                  lambda: KNormMechanism(F3, epsilon=1.0),
                                  lambda: NIMechanism(F3, epsilon=1.0)])
def test_every_expected_error_refuses_bad_n_samples(make):
    m = make()
    pooled = isinstance(m, (KNormMechanism, NIMechanism))  # None: their default (the certified pool, else draws)
    for bad in (10**12, 0, 1, -5, 2.5, True, "100") + (() if pooled else (None,)):
        raises_named("n_samples", m.expected_error, n_samples=bad)


def test_p_identity_refuses_a_huge_p_before_allocating():
    raises_named("p", PIdentityMechanism, F3, epsilon=1.0, p=10**6)
    raises_named("p", PIdentityMechanism, F3, epsilon=1.0, p=5)  # p <= n = 4


def test_composed_refuses_non_integers_and_bools():
    c = PrivacyClaim("x", 1.0, 0.0, "pure ε-DP", "exact")
    for bad in (2.5, True, False, -1, "2", None, 2**53 + 1, np.float64(2.0)):
        raises_named("k", c.composed, bad)
    assert c.composed(np.int64(3)).epsilon == 3.0 and c.composed(0).answers == 0


def test_hierarchy_takes_any_branching_and_refuses_an_n_it_cannot_hold():
    """b >= n is the two-level tree whatever b is (a Python int beyond C long included)."""
    assert Hierarchy(9, 10**400).levels == Hierarchy(9, 9).levels == 2
    raises_named("n", Hierarchy, 10**15, 2)


def test_release_overflow_names_x_and_charges_nothing():
    acc = BudgetAccountant(epsilon=10.0)
    m = LaplaceMechanism(F3, epsilon=1.0, accountant=acc)
    raises_named("x", m.release, np.full(4, 1e308))
    assert m.answers == 0 and acc.total == (0.0, 0.0)


def test_row_norms_and_mean_stderr_are_scale_free():
    X = np.array([[3.0, 4.0], [6.0, 8.0]])
    for k in (-1000, 0, 1000):
        Xk = np.ldexp(X, k)
        assert np.array_equal(row_norms(Xk), np.ldexp([5.0, 10.0], k))
        mean, se = mean_stderr(row_norms(Xk))
        assert mean == np.ldexp(7.5, k) and se == pytest.approx(np.ldexp(2.5, k), rel=1e-15)


# ---- properties: any numeric argument ---------------------------------------------------------

ODD = st.one_of(st.sampled_from([0, 0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, 5e-324, 1.7e308, float("nan"),
                                 float("inf"), float("-inf"), "1", 1j, True, False, None, 10**400, 10**12,
                                 -1, 2, np.float32(0.5), np.int64(3)]),
                st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6))


def _check(fn, *names):
    """fn()'s result, or None after a one-line ValueError/TypeError naming one of ``names``."""
    try:
        out = fn()
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert "\n" not in msg, msg
        assert any(re.search(rf"(^|\W){re.escape(n)}(\W|$)", msg) for n in names), f"{names} not named in: {msg}"
        return None
    return out


CTORS = {
    "laplace": (lambda **k: LaplaceMechanism(F3, **{"epsilon": 1.0, **k}), ["epsilon"]),
    "gaussian": (lambda **k: GaussianMechanism(F3, **{"epsilon": 1.0, "delta": 1e-6, **k}), ["epsilon", "delta"]),
    "identity": (lambda **k: IdentityMechanism(F3, **{"epsilon": 1.0, **k}), ["epsilon"]),
    "hierarchical": (lambda **k: HierarchicalMechanism(F3, **{"epsilon": 1.0, **k}), ["epsilon", "branching"]),
    "p-identity": (lambda **k: PIdentityMechanism(F3, **{"epsilon": 1.0, "maxiter": 20, **k}),
                   ["epsilon", "p", "maxiter"]),
    "knorm": (lambda **k: KNormMechanism(F3, **{"epsilon": 1.0, **k}), ["epsilon"]),
    "nim": (lambda **k: NIMechanism(F3, **{"epsilon": 1.0, **k}), ["epsilon", "max_levels", "max_estimates"]),
    "bounded-laplace": (lambda **k: BoundedLaplaceMechanism(**{"lower": 0.0, "upper": 1.0, "epsilon": 1.0,
                                                              "delta": 1e-6, **k}),
                        ["lower", "upper", "epsilon", "delta", "clip"]),
    "covariance-gaussian": (lambda **k: CovarianceGaussianMechanism(**{"M": np.eye(3), "sensitivity": 1.0,
                                                                       "epsilon": 0.5, "delta": 1e-6, **k}),
                            ["sensitivity", "epsilon", "delta"]),
}
CASES = [(m, a) for m, (_, args) in CTORS.items() for a in args]


@SETTINGS
@given(case=st.sampled_from(CASES), value=ODD)
def test_constructor_arguments_build_a_finite_mechanism_or_are_named(case, value):
    """Every constructor argument: a mechanism whose noise and errors are finite (released with an
    accountant that is charged exactly once), or a one-line error naming the argument."""
    mech, arg = case
    make = CTORS[mech][0]
    m = _check(lambda: make(**{arg: value}), arg)
    if m is None:
        return
    acc = m.accountant = BudgetAccountant(delta=1.0)  # no ε limit
    x = {"bounded-laplace": (getattr(m, "lower", 0) + getattr(m, "upper", 0)) / 2,
         "covariance-gaussian": np.ones(3)}.get(mech, np.ones(4))
    out = _check(lambda: m.release(x), "epsilon")  # noise near the float64 limit may overflow: refused
    if out is None:
        assert m.answers == 0 and acc.total == (0.0, 0.0)
        return
    assert np.all(np.isfinite(out)) and m.answers == 1 and len(acc.spends) == 1
    if hasattr(m, "rms_error"):
        assert np.isfinite(m.rms_error()) and m.rms_error() > 0
    if hasattr(m, "expected_error") and mech not in ("knorm", "nim"):
        e = m.expected_error()
        assert np.isfinite(e.value) and e.value > 0 and np.isfinite(e.stderr)


METHODS = {
    "expected_error": (lambda m, v: m.expected_error(n_samples=v), "n_samples"),
    "sample_noise": (lambda m, v: m.sample_noise(size=v), "size"),
    "release": (lambda m, v: m.release(np.ones(4), size=v), "size"),
}
SIZES = st.one_of(ODD, st.integers(-3, 50), st.sampled_from([10**7 + 1, 10**9, 2**62]))


@SETTINGS
@given(mech=st.sampled_from(["laplace", "identity", "hierarchical", "p-identity", "knorm"]),
       method=st.sampled_from(sorted(METHODS)), value=SIZES)
def test_size_arguments_are_checked_before_anything_is_drawn_or_charged(mech, method, value):
    m = CTORS[mech][0]()
    acc = m.accountant = BudgetAccountant()
    call, name = METHODS[method]
    out = _check(lambda: call(m, value), name)
    if out is None:
        assert m.answers == 0 and acc.total == (0.0, 0.0)
        return
    assert np.all(np.isfinite(out.value if hasattr(out, "value") else out))


@SETTINGS
@given(value=ODD, which=st.sampled_from(["sensitivity", "epsilon", "delta"]))
def test_analytic_gaussian_sigma(value, which):
    args = {"sensitivity": 1.0, "epsilon": 1.0, "delta": 1e-6, which: value}
    sigma = _check(lambda: analytic_gaussian_sigma(args["sensitivity"], args["epsilon"], args["delta"]), which)
    if sigma is not None:
        assert np.isfinite(sigma) and sigma > 0


@SETTINGS
@given(value=ODD, which=st.sampled_from(["epsilon", "costs"]))
def test_split_epsilon(value, which):
    costs, eps = ([1.0, value], 1.0) if which == "costs" else ([1.0, 8.0], value)
    out = _check(lambda: split_epsilon(costs, eps), which)
    if out is not None:
        shares, minimum = out
        assert np.all(np.isfinite(shares)) and np.all(shares > 0) and np.isfinite(minimum) and minimum > 0
        assert shares.sum() == pytest.approx(eps, rel=1e-12)


@SETTINGS
@given(value=ODD)
def test_privacy_profile_and_bounded_value(value):
    m = BoundedLaplaceMechanism(0.0, 1.0, epsilon=1.0, delta=1e-6)
    p = _check(lambda: m.privacy_profile(value), "epsilon")
    if p is not None:
        assert 0.0 <= p <= 1e-6 * (1 + 1e-9) or value < 1.0
    acc = m.accountant = BudgetAccountant(delta=1.0)
    out = _check(lambda: m.release(value), "value")
    if out is None:
        assert m.answers == 0 and acc.total == (0.0, 0.0)
    else:
        assert 0.0 <= out <= 1.0


@SETTINGS
@given(k=st.integers(-1074, 1023), eps_exp=st.integers(-1074, 1023), name=st.sampled_from(sorted(EXACT)))
def test_pure_mechanisms_are_homogeneous_in_the_scale_of_f_and_epsilon(k, eps_exp, name):
    """F·2^k at ε = 2^e: the rms error is 2^(k−e) times the one at unit scale and ε = 1 (an exact
    exponent shift). Refused (one line naming epsilon) only where the noise nears the float64 limits:
    the rms outside (1e-300, 1e300), or the Laplace scale Δ₁/ε itself near the limits (|e| >= 1000)."""
    F, make = W.prefix(5), EXACT[name]
    with np.errstate(over="ignore"):
        want = np.ldexp(make(F, epsilon=1.0).rms_error(), k - eps_exp)
    inside = 1e-300 < want < 1e300 and abs(eps_exp) < 1000 and k <= 1020  # k > 1020: F's column norms overflow
    m = _check(lambda: make(np.ldexp(F, k), epsilon=np.ldexp(1.0, eps_exp)), "epsilon", "F")
    if m is None:
        assert not inside, want
        return
    assert m.rms_error() == want
    noise = _check(lambda: m.sample_noise(2), "epsilon")  # a draw in the tail may pass float64 near its limit
    assert noise is not None or not inside
    assert noise is None or np.all(np.isfinite(noise))


def test_knorm_squared_error_is_scale_free():
    """prefix(4) is an image of the cross-polytope (exact draws): the same rng gives the same unit draws,
    so E‖noise‖² at F·2^600 and ε = 2^-300 is 2^1800 times... out of float64: refused naming epsilon;
    at F·2^-600, ε = 2^300 it is 2^-1800 times: refused too; at F·2^400, ε = 2^-100 it is 2^1000 times."""
    F = W.prefix(4)
    base = KNormMechanism(F, epsilon=1.0, rng=3).expected_squared_error(n_samples=100)
    for k, e in ((600, -300), (-600, 300)):
        raises_named("epsilon", KNormMechanism(np.ldexp(F, k), epsilon=2.0**e, rng=3).expected_squared_error,
                     n_samples=100)
    big = KNormMechanism(np.ldexp(F, 400), epsilon=2.0**-100, rng=3).expected_squared_error(n_samples=100)
    assert big == pytest.approx(np.ldexp(base, 1000), rel=1e-13)


def test_public_helpers_name_bad_arrays():
    """Hierarchy's solves, p_identity_objective and expected_norm_gaussian: NaN, strings, complex,
    wrong shapes and results past float64 are one-line errors naming the argument (they returned
    NaN, dropped imaginary parts, or raised IndexError/AttributeError)."""
    from knorm.mechanisms.additive import expected_norm_gaussian
    from knorm.mechanisms.strategy import p_identity_objective

    H = Hierarchy(8, 2)
    for name, call, width in (("x", H.measure, 8), ("y", H.solve, H.rows), ("f", H.solve_leaves, 8)):
        for bad in (np.full(width, np.nan), "abc", np.ones(width) * 1j, None, np.ones(3), np.full(width, 1e308)):
            raises_named(name, call, bad)
    raises_named("F", H.error_factor, np.ones((2, 3)))
    assert H.error_factor(np.ldexp(np.eye(8), 400)) == np.ldexp(H.error_factor(np.eye(8)), 800)
    raises_named("F", H.error_factor, np.ldexp(np.eye(8), 900))  # 2^1800: past float64
    gram = F3.T @ F3
    for bad in (np.full((1, 4), np.nan), "abc", None, -np.ones((1, 4)), np.ones((1, 5))):
        raises_named("theta", p_identity_objective, bad, gram)
    raises_named("gram", p_identity_objective, np.ones((1, 4)), np.ones((4, 3)))
    for bad in (0, -1, 2.5, "3", None, 10**400):
        raises_named("d", expected_norm_gaussian, bad, 1.0)
    for bad in (0, -1.0, np.nan, np.inf, "1", None, 1.5e308):  # 1.5e308·1.596 overflows
        raises_named("sigma", expected_norm_gaussian, 3, bad)
    assert expected_norm_gaussian(1, 1.0) == pytest.approx(np.sqrt(2 / np.pi), rel=1e-14)  # E|N(0,1)|


def test_covariance_gaussian_answer_is_checked_before_charging():
    m = CovarianceGaussianMechanism(np.eye(2), 1.0, epsilon=0.5, delta=1e-6)
    acc = m.accountant = BudgetAccountant(delta=1.0)
    for bad in ("ab", None, np.ones(2) * 1j, np.array([np.nan, 1.0]), np.ones(3)):
        raises_named("answer", m.release, bad)
    assert m.answers == 0 and acc.total == (0.0, 0.0)


def test_a_body_of_another_matrix_with_as_many_rows_is_refused():
    """The body fixes K, hence the noise law: another F's body (same row count) would release this
    F's answers with another K's noise, a wrong privacy claim; refused, naming body."""
    from knorm import SymmetricHull

    F1 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]])
    F2 = 2.0 * F1
    raises_named("body", KNormMechanism, F2, epsilon=1.0, body=SymmetricHull(F1))
    KNormMechanism(F1, epsilon=1.0, body=SymmetricHull(F1))  # its own body is taken
