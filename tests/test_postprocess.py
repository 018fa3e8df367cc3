"""Free post-processing: projections that never move the answers away from Fx."""

import cvxpy as cp
import numpy as np
import pytest

from knorm import postprocess as P
from knorm import workloads as W

TOL = 1e-9  # slack for rounding in the per-draw inequalities


def low_rank(d, n, r, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(d, r)) @ rng.normal(size=(r, n))


def mean_and_se(v):
    return v.mean(), v.std(ddof=1) / np.sqrt(len(v))


# ---- least squares ----------------------------------------------------------------------------

@pytest.mark.parametrize("F,r", [(W.all_range(5), 5), (low_rank(9, 7, 4, 0), 4)])
def test_least_squares_is_the_orthogonal_projection_and_shrinks_laplace_noise(F, r):
    """a = Fx + e, e ~ Lap(b)^d iid (variance 2b²); P = FF⁺ is an orthogonal projection of rank r
    with Fx in its range, so P a − Fx = P e, ‖P e‖ <= ‖e‖ per draw and E‖Pe‖² = trace(P·2b²I) = 2b² r."""
    rng = np.random.default_rng(1)
    d, n = F.shape
    x, b, m = rng.integers(0, 20, n).astype(float), 3.0, 10000
    e = rng.laplace(0.0, b, size=(m, d))
    out, xh = P.least_squares(F, F @ x + e, return_x=True)
    assert np.allclose(out, xh @ F.T)
    assert np.allclose(P.least_squares(F, out), out)  # idempotent
    assert np.allclose((F @ x + e - out) @ F, 0.0, atol=1e-8)  # residual ⟂ columns of F
    raw, post = np.sum(e**2, axis=1), np.sum((out - F @ x) ** 2, axis=1)
    assert np.all(post <= raw * (1 + TOL))
    mean, se = mean_and_se(post)
    assert abs(mean - 2 * b**2 * r) < 5 * se
    gain, se = mean_and_se(raw - post)  # paired: E‖e‖² − E‖Pe‖² = 2b²(d − r)
    assert abs(gain - 2 * b**2 * (d - r)) < 5 * se


def test_least_squares_one_vector_and_batch_agree():
    F, rng = W.width_range(8, 3), np.random.default_rng(2)
    A = rng.normal(size=(5, 6))
    out, xh = P.least_squares(F, A, return_x=True)
    for i in range(5):
        o, x1 = P.least_squares(F, A[i], return_x=True)
        assert o.shape == (6,) and np.allclose(o, out[i]) and np.allclose(x1, xh[i])


def test_generalised_least_squares_is_gauss_markov():
    """Noise N(0, Σ), Σ diagonal and unequal; F full column rank. GLS: F x̂ − Fx has covariance
    F(FᵀΣ⁻¹F)⁻¹Fᵀ, so E‖·‖² = trace(F(FᵀΣ⁻¹F)⁻¹Fᵀ); OLS: P e, E‖·‖² = trace(PΣ). Gauss–Markov:
    GLS <= OLS <= trace Σ (the raw answers are a linear unbiased estimate too)."""
    rng = np.random.default_rng(3)
    F = rng.normal(size=(10, 3))
    var = rng.uniform(0.1, 25.0, 10)
    S = np.diag(var)
    x, m = rng.normal(size=3) * 10, 10000  # the gain (8.5) is then about 28 of its standard errors
    e = rng.normal(size=(m, 10)) * np.sqrt(var)
    a = F @ x + e
    gls = P.least_squares(F, a, covariance=var)
    assert np.allclose(gls, P.least_squares(F, a, covariance=S))  # vector of variances == diagonal matrix
    ols = P.least_squares(F, a)
    exact_gls = np.trace(F @ np.linalg.inv(F.T @ np.linalg.inv(S) @ F) @ F.T)
    exact_ols = np.trace(F @ np.linalg.pinv(F) @ S)
    assert exact_gls < exact_ols < np.trace(S)
    err_gls, err_ols = np.sum((gls - F @ x) ** 2, axis=1), np.sum((ols - F @ x) ** 2, axis=1)
    mean, se = mean_and_se(err_gls)
    assert abs(mean - exact_gls) < 5 * se
    gain, se = mean_and_se(err_ols - err_gls)  # paired comparison, same draws
    assert gain > 0 and abs(gain - (exact_ols - exact_gls)) < 5 * se


def test_generalised_least_squares_with_a_full_covariance():
    """x̂ = (FᵀΣ⁻¹F)⁻¹FᵀΣ⁻¹a (normal equations) for a non-diagonal Σ; Σ = cI gives plain least squares."""
    rng = np.random.default_rng(4)
    F, B = rng.normal(size=(7, 4)), rng.normal(size=(7, 7))
    S = B @ B.T + 0.5 * np.eye(7)
    a = rng.normal(size=(3, 7))
    Si = np.linalg.inv(S)
    want = (np.linalg.solve(F.T @ Si @ F, F.T @ Si @ a.T)).T
    out, xh = P.least_squares(F, a, covariance=S, return_x=True)
    assert np.allclose(xh, want) and np.allclose(out, want @ F.T)
    assert np.allclose(P.least_squares(F, a, covariance=4.0 * np.eye(7)), P.least_squares(F, a))


# ---- non-negativity -----------------------------------------------------------------------------

def test_nonnegative_projects_onto_the_cone_and_never_moves_away():
    """{Fx : x >= 0} is a closed convex cone holding the true answers of a histogram, and a
    Euclidean projection onto a convex set containing Fx is non-expansive toward it."""
    rng = np.random.default_rng(5)
    F = W.width_range(8, 2)
    x = np.array([0, 0, 3, 0, 1, 0, 0, 2.0])
    e = rng.laplace(0.0, 2.0, size=(300, F.shape[0]))
    out, xh = P.nonnegative(F, F @ x + e, return_x=True)
    assert np.all(xh >= 0) and np.allclose(out, xh @ F.T)
    raw, post = np.sum(e**2, axis=1), np.sum((out - F @ x) ** 2, axis=1)
    assert np.all(post <= raw * (1 + TOL))
    gain, se = mean_and_se(raw - post)
    assert gain > 5 * se
    assert np.allclose(P.nonnegative(F, F @ x), F @ x)  # already consistent: unchanged


def test_nonnegative_matches_cvxpy():
    rng = np.random.default_rng(6)
    F, a = rng.normal(size=(6, 9)), rng.normal(size=6) * 4
    w = cp.Variable(9)
    cp.Problem(cp.Minimize(cp.sum_squares(F @ w - a)), [w >= 0]).solve(solver="CLARABEL")
    assert np.allclose(P.nonnegative(F, a), F @ w.value, atol=1e-6)


# ---- projection onto N·K ----------------------------------------------------------------------------

def cvxpy_projection(F, a, N, nonnegative):
    w = cp.Variable(F.shape[1])
    cons = [w >= 0, cp.sum(w) == N] if nonnegative else [cp.norm1(w) <= N]
    cp.Problem(cp.Minimize(cp.sum_squares(F @ w - a)), cons).solve(solver="CLARABEL")
    return F @ w.value


@pytest.mark.parametrize("nonnegative", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_projection_lands_in_NK_and_is_the_closest_point(nonnegative, seed):
    rng = np.random.default_rng(seed)
    F, a, N = rng.normal(size=(5, 8)), rng.normal(size=5) * 6, 3.0
    y, xh = P.project_to_total(F, a, N, nonnegative=nonnegative, return_x=True)
    assert np.allclose(y, F @ xh)
    if nonnegative:
        assert np.all(xh >= 0) and xh.sum() == pytest.approx(N)
    else:
        assert np.abs(xh).sum() <= N * (1 + 1e-12)
    want = cvxpy_projection(F, a, N, nonnegative)
    assert np.allclose(y, want, atol=1e-6)
    assert np.linalg.norm(y - a) <= np.linalg.norm(want - a) + 1e-9  # no feasible point is closer


def test_projection_keeps_points_of_NK_and_handles_zero_total():
    F = W.prefix(5)
    x = np.array([1.0, 0, 2, 0, 1])
    assert np.allclose(P.project_to_total(F, F @ x, 4), F @ x)  # F x is in 4·conv(f_i)
    assert np.allclose(P.project_to_total(F, 0.5 * F @ x, 4, nonnegative=False), 0.5 * F @ x)  # interior of 4·K
    assert np.array_equal(P.project_to_total(F, np.ones((2, 5)), 0), np.zeros((2, 5)))


def test_projection_never_moves_away_from_the_truth():
    """N·conv(f_i) holds Fx for every histogram x >= 0 with Σx = N, and N·K ⊇ N·conv(f_i); the
    projections onto these convex sets are non-expansive toward Fx for every draw, and strictly
    better on average here (noise of scale 5 per answer dwarfs a total of N = 6)."""
    rng = np.random.default_rng(7)
    F = W.all_range(4)
    x = np.array([2.0, 0, 3, 1])
    e = rng.laplace(0.0, 5.0, size=(200, F.shape[0]))
    raw = np.sum(e**2, axis=1)
    for nonneg in (True, False):
        y = P.project_to_total(F, F @ x + e, 6, nonnegative=nonneg)
        post = np.sum((y - F @ x) ** 2, axis=1)
        assert np.all(post <= raw * (1 + TOL))
        gain, se = mean_and_se(raw - post)
        assert gain > 5 * se
        assert np.allclose(y[3], P.project_to_total(F, F @ x + e[3], 6, nonnegative=nonneg))  # batch == rows


# ---- validation ----------------------------------------------------------------------------------------

def test_validation():
    F = W.prefix(3)
    for fn in (P.least_squares, P.nonnegative, lambda F, a: P.project_to_total(F, a, 1)):
        with pytest.raises(ValueError, match="answers must have shape"):
            fn(F, np.ones(4))
        with pytest.raises(ValueError, match="answers must have shape"):
            fn(F, np.ones((2, 2, 3)))
        with pytest.raises(ValueError, match="answers contains NaN"):
            fn(F, np.array([1.0, np.nan, 0]))
        with pytest.raises(ValueError, match="answers must be real"):
            fn(F, ["a", "b", "c"])
        with pytest.raises(ValueError, match="F "):
            fn(np.zeros((3, 3)), np.ones(3))
    for total in (-1, np.inf, np.nan, "3", True, None):
        with pytest.raises(ValueError, match="total"):
            P.project_to_total(F, np.ones(3), total)
    for cov, msg in [(np.ones((2, 2)), "covariance must have shape"), (-np.ones(3), "positive"),
                     (np.triu(np.ones((3, 3))), "symmetric"), (-np.eye(3), "positive definite"),
                     (np.full(3, np.inf), "NaN or infinite")]:
        with pytest.raises(ValueError, match=msg):
            P.least_squares(F, np.ones(3), covariance=cov)
    for kw in ({"return_x": 1}, {"nonnegative": "yes"}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            P.project_to_total(F, np.ones(3), 1, **kw)
    with pytest.raises(ValueError, match="return_x"):
        P.least_squares(F, np.ones(3), return_x=None)


def test_least_squares_is_the_orthogonal_projection_on_rank_deficient_workloads():
    """2-way marginals of a 3×2×4×3×2 table (rank 41 < d = 77): the projection is F·F⁺a,
    the same for a batch and row by row (scipy's default rank cut-off kept two spurious
    directions here)."""
    from knorm import workloads

    F = workloads.marginals((3, 2, 4, 3, 2), 2)
    a = np.random.default_rng(0).laplace(scale=10.0, size=(50, F.shape[0]))
    want = a @ (F @ np.linalg.pinv(F)).T
    got = P.least_squares(F, a)
    np.testing.assert_allclose(got, want, atol=1e-8 * np.abs(want).max())
    np.testing.assert_allclose(np.array([P.least_squares(F, row) for row in a]), got, atol=1e-8 * np.abs(want).max())


# ---- issue 17: extreme scales ----------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e300])
def test_projections_are_scale_free(scale):
    """Scaling the answers by s scales every projection onto a cone by s (and N·K by s when N
    scales too): answers near 1e308 used to come back inf, and a tiny total overflowed a/N."""
    F = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    a = np.array([1.5, -0.25])
    np.testing.assert_allclose(P.least_squares(F, a * scale), P.least_squares(F, a) * scale, rtol=1e-12)
    np.testing.assert_allclose(P.nonnegative(F, a * scale), P.nonnegative(F, a) * scale, rtol=1e-12)
    for nonneg in (True, False):
        np.testing.assert_allclose(P.project_to_total(F, a * scale, 2.0 * scale, nonnegative=nonneg),
                                   P.project_to_total(F, a, 2.0, nonnegative=nonneg) * scale, rtol=1e-9)
    big = np.array([1.5e308, -1e308])
    assert np.all(np.isfinite(P.nonnegative(F, big)))  # was [inf, inf]
    np.testing.assert_allclose(P.least_squares(F, big), big, rtol=1e-15)  # F spans R², a is its own projection


def test_a_tiny_total_with_large_answers_lands_in_NK():
    """N = 1e-300 and a = (1e300, 1): a/N overflowed (scipy's "array must not contain infs or
    NaNs"). Every point of N·K is then within 1e-300 of the optimum, far below float64's
    resolution of ‖a − y‖ ≈ 1e300, so the check is membership: x >= 0, Σx = N, y = Fx."""
    F = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    y, x = P.project_to_total(F, [1e300, 1.0], 1e-300, return_x=True)
    assert np.all(x >= 0) and x.sum() == pytest.approx(1e-300, rel=1e-12)
    np.testing.assert_allclose(y, F @ x, rtol=1e-12)
    with pytest.raises(ValueError, match=r"^total = 1e\+300: the projected answers"):
        P.project_to_total(F * 1e10, [1.0, 2.0], 1e300)
    with pytest.raises(ValueError, match=r"^total must be"):
        P.project_to_total(F, [1.0, 2.0], 10**400)


def test_covariances_spanning_float64_are_refused_by_name():
    F = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = P.least_squares(F, [1.0, 2.0], covariance=[1e300, 3e300])  # scaled first: fine
    np.testing.assert_allclose(out, [1.0, 2.0], rtol=1e-14)
    with pytest.raises(ValueError, match=r"^covariance"):
        P.least_squares(F, [1.0, 2.0], covariance=[1e-300, 1e300])


# ---- exactly consistent tables (issue 42) ------------------------------------------------------

def _exactly(F, xh, out):
    """Every answer is exactly (in rationals) the product of its row of F with x̂."""
    from fractions import Fraction
    return all(sum(Fraction(f) * Fraction(v) for f, v in zip(row, xh)) == Fraction(o) for row, o in zip(F, out))


@pytest.mark.parametrize("fn", [P.least_squares, P.nonnegative])
def test_projected_marginal_tables_are_exactly_consistent(fn):
    """Released answers lie on the grid, a hair off F's range; the projections give tables that
    agree exactly: answers = F x̂ in rationals, every table has the same total and the shared
    one-way margins are equal, not only within float rounding (before: 39 of 40 such checks failed
    on 10 Laplace releases over the 2-way marginals of (2, 3, 4)). Rows shuffled: the same."""
    from fractions import Fraction
    from knorm import LaplaceMechanism
    F0 = W.marginals([2, 3, 4], 2)  # tables (0,1) 2×3, (0,2) 2×4, (1,2) 3×4
    x = np.random.default_rng(0).integers(0, 50, F0.shape[1]).astype(float)
    perm = np.random.default_rng(1).permutation(F0.shape[0])
    for seed in range(10):
        a0 = LaplaceMechanism(F0, epsilon=1.0, rng=seed).release(x)
        for F, a, back in ((F0, a0, np.arange(len(a0))), (F0[perm], a0[perm], np.argsort(perm))):
            y, xh = fn(F, a, return_x=True)
            assert _exactly(F, xh, y)
            y = y[back]
            t01, t02, t12 = y[:6].reshape(2, 3), y[6:14].reshape(2, 4), y[14:].reshape(3, 4)
            total = {sum(map(Fraction, t.ravel())) for t in (t01, t02, t12)}
            assert len(total) == 1
            assert [sum(map(Fraction, r)) for r in t01] == [sum(map(Fraction, r)) for r in t02]
            assert [sum(map(Fraction, c)) for c in t02.T] == [sum(map(Fraction, c)) for c in t12.T]


def test_exact_grid_only_for_integer_like_workloads():
    """0/1, ±1, small integers and halves get the exact grid; 0.1 (53 significant bits) does not,
    and its projection is then the plain float one (close, not exact)."""
    from knorm.postprocess import exact_grid
    x = np.array([[1.5, -2.25, 3.0]])
    for F in (np.eye(3), np.array([[1.0, -1.0, 7.0]]), np.array([[0.5, 1.5, 2.0]])):
        assert exact_grid(F, x) is not None
    assert exact_grid(np.array([[0.1, 1.0, 1.0]]), x) is None
    assert exact_grid(np.array([[2.0**21, 1.0, 1.0]]), x) is None  # |m| >= 2^20: products could be inexact
    F = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.5]])
    y = P.least_squares(F, [1.0, 2.0, 3.0])
    assert np.allclose(y, F @ np.linalg.lstsq(F, [1.0, 2.0, 3.0], rcond=None)[0], rtol=1e-12)


# ---- rows independent, never farther than raw (issue 50) ---------------------------------------------

F_MARG = W.marginals((2, 3, 4), 2)  # 26 answers of 24 cells, rank 18
F_ANES = W.marginals((2, 4, 4, 7, 7), 2)  # the shape: d 221, n 1,568, rank 155


def _releases(F, X, eps, seed, on_grid):
    """One answer row per count row: Laplace releases (on the public grid) or Fx plus raw float noise."""
    from knorm import LaplaceMechanism
    if on_grid:
        rows = []
        for i, x in enumerate(X):
            m = LaplaceMechanism(F, epsilon=eps, rng=seed + i)
            try:
                rows.append(m.release(x))
            except ValueError:  # refused: counts where float64's spacing is not far below the noise
                # (issue 51); what such a release would have been, Fx + noise put on its public
                # grid, stands in: post-processing must not be wrong on any answers it is handed
                k = m.grid_exponent
                rows.append(np.ldexp(np.rint(np.ldexp(F @ x + m.sample_noise(), -k)), k))
        return np.array(rows)
    rng = np.random.default_rng(seed)
    return X @ F.T + rng.laplace(scale=F.shape[0] / eps, size=(len(X), F.shape[0]))


def _distance(v, fx, w):
    """‖(v − Fx)/w‖ with each difference computed exactly (Fx as integers), then rounded."""
    from fractions import Fraction
    return float(np.linalg.norm([float(Fraction(a) - t) / s for a, t, s in zip(v, fx, w)]))


def _tolerance(a, fx, w):
    """What 'never farther' allows, in ‖·/w‖: per answer, the exactness grid's rounding (at most
    2^-GRID_BITS of the row's grain, the largest power of two dividing all its answers) plus 256 float
    spacings of the largest magnitude involved (max |a|, max |Fx|); times √d, over min w."""
    from knorm.postprocess import GRID_BITS, _lowest_bit
    g = _lowest_bit(a)
    grid = 0.0 if g is None else np.ldexp(1.0, g - GRID_BITS)
    top = max(float(np.abs(a).max()), float(max(abs(t) for t in fx)))
    return np.sqrt(len(a)) * (grid + 256 * float(np.spacing(top))) / float(np.min(w))


def _counts(rng, n, exponents):
    """One row of n counts per exponent k, each count below 10^k (up to 10^15): huge and small rows mixed."""
    return np.array([np.floor(rng.random(n) * 10.0**k) for k in exponents])


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROWS = dict(exponents=st.lists(st.integers(0, 15), min_size=1, max_size=4), log_eps=st.floats(-3, 12),
            seed=st.integers(0, 2**20), on_grid=st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weighted=st.booleans(), **ROWS)
def test_least_squares_is_never_farther_from_Fx_than_the_raw_answers(exponents, log_eps, seed, on_grid, weighted):
    """Counts up to 1e15, ε from 1e-3 to 1e12, rows of very different sizes in one batch: for each
    row ‖ŷ − Fx‖ <= ‖a − Fx‖ + _tolerance (in Σ's metric with a covariance), where ŷ is the
    batch's row, and the batch gives each row's own result to the bit."""
    rng = np.random.default_rng(seed)
    X = _counts(rng, F_MARG.shape[1], exponents)
    A = _releases(F_MARG, X, 10.0**log_eps, seed, on_grid)
    var = rng.uniform(0.25, 4.0, F_MARG.shape[0]) if weighted else None
    w = np.sqrt(var) if weighted else np.ones(F_MARG.shape[0])
    Y = P.least_squares(F_MARG, A, covariance=var)
    assert np.array_equal(Y, np.array([P.least_squares(F_MARG, a, covariance=var) for a in A]))
    for x, a, y in zip(X, A, Y):
        fx = [int(v) for v in F_MARG.astype(np.int64) @ x.astype(np.int64)]
        assert _distance(y, fx, w) <= _distance(a, fx, w) + _tolerance(a, fx, w)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**ROWS)
def test_nonnegative_is_never_farther_from_Fx_than_the_raw_answers(exponents, log_eps, seed, on_grid):
    """The documented bound ‖F x̂ − Fx‖ <= ‖a − Fx‖ for every histogram x >= 0 (projection onto a
    convex cone holding Fx), up to _tolerance, on the same inputs; batch == rows to the bit."""
    rng = np.random.default_rng(seed)
    X = _counts(rng, F_MARG.shape[1], exponents)
    A = _releases(F_MARG, X, 10.0**log_eps, seed, on_grid)
    Y, XH = P.nonnegative(F_MARG, A, return_x=True)
    rows = [P.nonnegative(F_MARG, a, return_x=True) for a in A]
    assert np.array_equal(Y, np.array([r[0] for r in rows])) and np.array_equal(XH, np.array([r[1] for r in rows]))
    assert np.all(XH >= 0)
    w = np.ones(F_MARG.shape[0])
    for x, a, y in zip(X, A, Y):
        fx = [int(v) for v in F_MARG.astype(np.int64) @ x.astype(np.int64)]
        assert _distance(y, fx, w) <= _distance(a, fx, w) + _tolerance(a, fx, w)


@pytest.mark.parametrize("eps", [1.0, 1e4])
def test_one_huge_region_moves_no_other_region(eps):
    """The issue's case: 7 regions, one with a cell of 1e13. The batch used one exactness grid, chosen
    by the largest count: at ε = 1e4 least squares moved every region by up to 2.8 counts (raw error
    0.02) and at ε = 1 left 3 regions farther from Fx than raw. Now each row is its own: the batch
    equals the rows to the bit, and no region ends farther from Fx than raw."""
    rng = np.random.default_rng(0)
    X = np.floor(rng.random((7, F_ANES.shape[1])) * 3)
    X[3, 5] = 1e13
    A = _releases(F_ANES, X, eps, 10, True)
    w = np.ones(F_ANES.shape[0])
    for fn in (P.least_squares, P.nonnegative):
        Y = fn(F_ANES, A)
        assert np.array_equal(Y, np.array([fn(F_ANES, a) for a in A]))
        for x, a, y in zip(X, A, Y):
            fx = [int(v) for v in F_ANES.astype(np.int64) @ x.astype(np.int64)]
            assert _distance(y, fx, w) <= _distance(a, fx, w) + _tolerance(a, fx, w)
            assert _distance(y, fx, w) <= _distance(a, fx, w) * (1 + 1e-6)  # and in fact strictly, here


@pytest.mark.parametrize("fn", [P.least_squares, P.nonnegative])
def test_the_exactness_grid_moves_no_answer_by_more_than_its_stated_share(fn, monkeypatch):
    """Where x̂ is put on the exactness grid, every answer moves by at most 2^-GRID_BITS of the row's
    grain from the plain float result (_on_grid bypassed); a row whose grain is too fine for that (a
    1e13 count at ε = 1e4) keeps the plain float result, consistent to float rounding only."""
    from knorm import postprocess
    from knorm.postprocess import GRID_BITS, _lowest_bit
    X = np.floor(np.random.default_rng(1).random((2, F_MARG.shape[1])) * 40)
    X[1, 3] = 1e13
    A = np.vstack([_releases(F_MARG, X[:1], 1.0, 3, True), _releases(F_MARG, X[1:], 1e4, 4, True)])
    Y, XH = fn(F_MARG, A, return_x=True)
    monkeypatch.setattr(postprocess, "_on_grid", lambda xs, *args: xs)
    Yf, XHf = fn(F_MARG, A, return_x=True)
    assert _exactly(F_MARG, XH[0], Y[0]) and not np.array_equal(XH[0], XHf[0])  # the small row: exact, and moved
    assert np.abs(Y[0] - Yf[0]).max() <= np.ldexp(1.0, _lowest_bit(A[0]) - GRID_BITS)
    assert np.array_equal(Y[1], Yf[1]) and np.array_equal(XH[1], XHf[1])  # the huge row: the float result


def test_a_least_squares_residual_off_orthogonal_is_refused_by_name(monkeypatch):
    """The orthogonality check is live: with no float spacing allowed (RANGE_ULPS = 0) a row whose
    computed residual has any component along F's range is refused, naming F and covariance."""
    from knorm import postprocess
    a = _releases(F_MARG, np.ones((1, F_MARG.shape[1])), 1.0, 0, False)
    monkeypatch.setattr(postprocess, "RANGE_ULPS", 0)
    with pytest.raises(ValueError, match=r"^F and covariance: the least-squares residual is not orthogonal"):
        P.least_squares(F_MARG, a)
