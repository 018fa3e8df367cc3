"""Empirical privacy audit: correct mechanisms are not refuted, broken ones are caught."""

import math

import numpy as np
import pytest
from scipy import stats

import knorm
from knorm.audit import audit, audit_event, clopper_pearson, fx_on_line, repeated_answer
from knorm.discrete import RandomizedResponse


def cp_bound(k_p, k_q, n, alpha=0.05):
    """ε bound ln(P_low/Q_high) for hit counts fixed in advance (derived expectations)."""
    return math.log(clopper_pearson(k_p, n, alpha)[0] / clopper_pearson(k_q, n, alpha)[1])


def test_clopper_pearson_coverage_edges():
    lo, hi = clopper_pearson(0, 100, 0.05)
    assert lo == 0 and hi == pytest.approx(1 - 0.025 ** (1 / 100))
    lo, hi = clopper_pearson(100, 100, 0.05)
    assert hi == 1 and lo == pytest.approx(0.025 ** (1 / 100))
    # interior: the beta-quantile form of the exact interval, one-sided at 1 − α/2 each
    lo, hi = clopper_pearson(15, 200, 0.05)
    assert lo == pytest.approx(stats.beta.ppf(0.025, 15, 186), rel=1e-9)
    assert hi == pytest.approx(stats.beta.ppf(0.975, 16, 185), rel=1e-9)


def test_laplace_is_not_refuted():
    m = knorm.LaplaceMechanism(np.array([[1.0, -1.0]]), epsilon=1.0, rng=0)
    x, x2 = np.array([3.0, 1.0]), np.array([3.0, 2.0])  # neighbours: ‖x − x'‖₁ = 1
    r = audit(lambda k: m.release(x, size=k)[:, 0], lambda k: m.release(x2, size=k)[:, 0], n=40000, rng=1)
    assert 0 < r.epsilon_lower_bound <= 1.0


def test_broken_laplace_with_half_the_scale_is_caught():
    rng = np.random.default_rng(2)
    b = 0.5  # a "Laplace, ε = 1" that uses half the required scale (true ε = 2)
    r = audit(lambda k: 0.0 + rng.laplace(0, b, k), lambda k: 1.0 + rng.laplace(0, b, k), n=40000, rng=3)
    assert r.refutes(1.0), r


def test_randomized_response_is_not_refuted_and_a_lying_one_is():
    rr = RandomizedResponse.two_coin(rng=4)
    r = audit(lambda k: rr.release(np.zeros(k, int)), lambda k: rr.release(np.ones(k, int)), n=60000, rng=5)
    assert r.epsilon_lower_bound <= np.log(3)
    liar = RandomizedResponse(k=2, epsilon=3.0, rng=6)  # claims ln 3 but is truthful w.p. e³/(e³+1)
    r = audit(lambda k: liar.release(np.zeros(k, int)), lambda k: liar.release(np.ones(k, int)), n=60000, rng=7)
    assert r.refutes(np.log(3))


def test_knorm_noise_is_not_refuted_in_1d_and_low_d_projections():
    for F in [np.array([[1.0, 2.0, -1.0]]), knorm.workloads.random_pm1(3, 8, rng=8)]:
        m = knorm.KNormMechanism(F, epsilon=1.0, rng=9)
        x = np.zeros(F.shape[1])
        x2 = x.copy()
        x2[int(np.argmax(np.abs(F).sum(0)))] = 1.0  # the most sensitive cell
        r = audit(lambda k: m.release(x, size=k), lambda k: m.release(x2, size=k), n=20000, rng=10)
        assert r.epsilon_lower_bound <= 1.0, r


def test_a_rare_tail_event_beyond_the_old_quantile_grid_is_found():
    # P: N(0, 1) but with probability 0.002 the output is 10, an atom Q = N(0, 1) never produces
    rng = np.random.default_rng(11)
    n, mass = 100000, 0.002
    half = n // 2
    P = np.where(rng.random(n) < mass, 10.0, rng.standard_normal(n))
    Q = rng.standard_normal(n)
    r = audit(lambda k: P, lambda k: Q, n=n, rng=12)
    assert r.event["side"] == "greater" and r.event["direction"] == "P vs Q"
    # the event lies beyond the old grid (99.5% quantile of the pooled training halves)
    assert r.event["threshold"] > np.quantile(np.concatenate([P[:half], Q[:half]]), 0.995)
    # held-out atom hits ~ Binomial(half, mass): mean 100, sd 10; the cut sits above Q's
    # training maximum, so Q's held-out hits are ~ Poisson(<= 1): at most 3 (P ≈ 0.98)
    k_low = int(half * mass - 4 * math.sqrt(half * mass * (1 - mass)))
    assert r.p_hat * half >= k_low and r.q_hat * half <= 3
    assert r.epsilon_lower_bound >= cp_bound(k_low, 3, half) > 1.0 and r.refutes(1.0)


class ReusedDirection:
    """Fx + r·z with z uniform on the sphere, r ~ Gamma(d+1, 1/ε); with probability ``p_reuse``
    z is the previous release's z (the old ball walk's defect), r is always fresh."""

    def __init__(self, fx, epsilon, p_reuse, rng):
        self.fx, self.eps, self.p, self.rng, self.z = np.asarray(fx, float), epsilon, p_reuse, rng, None

    def release(self, shift, size):
        out = []
        for _ in range(size):
            if self.z is None or self.rng.random() >= self.p:
                g = self.rng.standard_normal(len(self.fx))
                self.z = g / np.linalg.norm(g)
            out.append(self.fx + shift + self.rng.gamma(len(self.fx) + 1, 1 / self.eps) * self.z)
        return np.array(out)


def test_fx_on_line_catches_reused_draws_against_the_composed_claim():
    fx, eps, m, N, p_reuse = np.array([3.0, -1.0, 2.0, 5.0]), 0.1, 20, 200, 0.1
    mech = ReusedDirection(fx, eps, p_reuse, np.random.default_rng(13))
    shift = np.array([1.0, 1.0, -1.0, 1.0])  # Fx' − Fx for one changed cell of a ±1 workload
    r = audit_event(fx_on_line(fx), lambda k: mech.release(0.0, k), lambda k: mech.release(shift, k),
                    windows=N, window=m)
    # a window hits iff one of its releases 2..m reuses z: P = 1 − 0.9^19; under x' never
    p = 1 - (1 - p_reuse) ** (m - 1)
    sd = math.sqrt(N * p * (1 - p))
    assert abs(r.event["hits_p"] - N * p) <= 4 * sd and r.event["hits_q"] == 0
    bound = cp_bound(int(N * p - 4 * sd), 0, N)  # ≈ 3.6 at the 4σ-low hit count
    assert r.epsilon_lower_bound >= bound > m * eps and r.refutes(m * eps)
    assert r.delta_lower_bound(m * eps) > 0


def test_repeated_answer_counts_repeats_but_symmetric_repeats_are_not_evidence():
    rng = np.random.default_rng(14)

    def sticky(shift, k):  # Laplace noise, each vector reused from the previous answer w.p. 0.1
        noise = rng.laplace(0, 10.0, (k, 3))
        for i in range(1, k):
            if rng.random() < 0.1:
                noise[i] = noise[i - 1]
        return shift + noise

    m, N = 20, 200
    r = audit_event(repeated_answer(), lambda k: sticky(0.0, k), lambda k: sticky(1.0, k), windows=N, window=m)
    p = 1 - 0.9 ** (m - 1)
    sd = math.sqrt(N * p * (1 - p))
    assert abs(r.event["hits_p"] - N * p) <= 4 * sd and abs(r.event["hits_q"] - N * p) <= 4 * sd
    assert not r.refutes(m * 0.1)  # equally frequent under x and x': no privacy loss shown
    assert repeated_answer(atol=0.5)(np.array([[0.0, 0.0], [0.4, -0.4], [3.0, 3.0]]))
    assert not repeated_answer()(np.array([[0.0, 0.0], [0.0, 1e-12]]))


def test_exact_laplace_is_not_caught_by_pre_registered_events():
    F = knorm.workloads.random_pm1(4, 6, rng=15)
    eps, m, N = 0.1, 20, 200
    mech = knorm.LaplaceMechanism(F, epsilon=eps, rng=16)
    x = np.arange(6.0)
    x2 = x.copy()
    x2[0] += 1.0
    for event in (fx_on_line(F @ x), repeated_answer()):
        r = audit_event(event, lambda k: mech.release(x, size=k), lambda k: mech.release(x2, size=k),
                        windows=N, window=m)
        assert r.event["hits_p"] == r.event["hits_q"] == 0 and r.epsilon_lower_bound == 0.0
    # an event Laplace does distinguish: both answers of a pair above the midpoint (1-D, Δ = 1, b = 1)
    one = knorm.LaplaceMechanism(np.array([[1.0, -1.0]]), epsilon=1.0, rng=17)
    y, y2 = np.array([3.0, 1.0]), np.array([3.0, 2.0])  # answers 2 and 1, midpoint 1.5

    def both_above(W):
        return bool(np.all(W > 1.5))

    N = 3000
    r = audit_event(both_above, lambda k: one.release(y, size=k), lambda k: one.release(y2, size=k),
                    windows=N, window=2)
    # exact: P = (1 − e^{−1/2}/2)², Q = (e^{−1/2}/2)²; the event's ε = ln(P/Q) ≈ 1.66 <= claim 2ε = 2.
    # The bound stays below ln(P/Q) (probability >= 1 − α) and, at counts 4 sd from their means,
    # above cp_bound(...) ≈ 1.2: the audit sees most of the true ε without overshooting it.
    P, Q = (1 - math.exp(-0.5) / 2) ** 2, (math.exp(-0.5) / 2) ** 2
    k_p = int(N * P - 4 * math.sqrt(N * P * (1 - P)))
    k_q = int(N * Q + 4 * math.sqrt(N * Q * (1 - Q))) + 1
    assert cp_bound(k_p, k_q, N) <= r.epsilon_lower_bound <= math.log(P / Q) <= 2.0


def test_knorm_ball_walk_never_puts_fx_on_a_line():
    # 5 windows of 1000 consecutive releases (one bank each). The ball walk of 650b28f
    # released repeated draws (about 5 pairs per 1000 on this F: 3 of these 5 windows hit),
    # so Fx lay on the line through two answers; the release selection now drops repeats.
    F = knorm.workloads.random_pm1(4, 8, rng=0)
    mech = knorm.KNormMechanism(F, epsilon=0.1, walk="ball", rng=18, bank_size=1000)
    x = np.arange(8.0)
    event = fx_on_line(F @ x)
    hits = sum(event(mech.release(x, size=1000)) for _ in range(5))
    assert hits == 0


def test_non_finite_outputs_are_failures():
    rng = np.random.default_rng(19)

    def leaky(k):
        out = rng.standard_normal(k)
        out[rng.random(k) < 0.01] = np.nan
        return out

    r = audit(leaky, lambda k: rng.standard_normal(k), n=1000, rng=20)
    assert r.epsilon_lower_bound == math.inf and r.refutes(1e9) and "sample_p" in r.failure
    r = audit(lambda k: rng.standard_normal(k), lambda k: np.full(k, np.inf), n=1000, rng=21)
    assert r.epsilon_lower_bound == math.inf and "sample_q" in r.failure
    r = audit_event(repeated_answer(), lambda k: rng.standard_normal((k, 2)),
                    lambda k: np.where(rng.random((k, 2)) < 0.05, np.nan, 0.0), windows=50, window=10)
    assert r.epsilon_lower_bound == math.inf and "sample_q" in r.failure and r.delta_lower_bound(5.0) == 1.0


def test_bad_arguments():
    z = lambda k: np.zeros(k)  # noqa: E731
    for kw, name in [({"n": 10}, "n"), ({"n": 200.0}, "n"), ({"alpha": 0.0}, "alpha"), ({"alpha": 1.0}, "alpha"),
                     ({"delta": -0.1}, "delta"), ({"delta": 1.0}, "delta"), ({"n_proj": -1}, "n_proj")]:
        with pytest.raises(ValueError, match=f"^{name} "):
            audit(z, z, **{"n": 200, **kw})
    with pytest.raises(ValueError, match="sample_p and sample_q"):
        audit(z, lambda k: np.zeros((k, 2)), n=200)
    with pytest.raises(ValueError, match="sample_p and sample_q"):
        audit(lambda k: np.zeros(k - 1), z, n=200)
    ev = repeated_answer()
    for kw, name in [({"window": 1}, "window"), ({"windows": 0}, "windows"), ({"alpha": 1.5}, "alpha"),
                     ({"delta": 1.0}, "delta")]:
        with pytest.raises(ValueError, match=f"^{name} "):
            audit_event(ev, z, z, **kw)
    with pytest.raises(ValueError, match="^sample_q must return windows of shape"):
        audit_event(ev, lambda k: np.zeros((k, 2)), lambda k: np.zeros((k, 3)), windows=3, window=4)
    with pytest.raises(ValueError, match="^sample_p must return windows of shape"):
        audit_event(ev, lambda k: np.zeros(k + 1), z, windows=3, window=4)
    with pytest.raises(ValueError, match="^event must return one bool"):
        audit_event(lambda W: W > 0, z, z, windows=3, window=4)
    with pytest.raises(ValueError, match="^fx has 3 entries"):
        audit_event(fx_on_line(np.zeros(3)), lambda k: np.ones((k, 2)), z, windows=3, window=4)
    for bad in [{"tol": 0.0}, {"tol": 2.0}]:
        with pytest.raises(ValueError, match="^tol "):
            fx_on_line(np.zeros(2), **bad)
    with pytest.raises(ValueError, match="^fx "):
        fx_on_line([np.nan, 1.0])
    with pytest.raises(ValueError, match="^atol "):
        repeated_answer(atol=-1.0)


# ---- issue 17: sizes checked before sampling, numbers validated --------------------------------

def test_huge_sample_counts_are_refused_before_sampling():
    calls = []

    def sampler(k):
        calls.append(k)
        return np.zeros(k)

    with pytest.raises(ValueError, match=r"^n=1000000000000 needs about"):  # was MemoryError
        audit(sampler, sampler, n=10**12)
    with pytest.raises(ValueError, match=r"^windows=1000000000000 needs about"):  # was 10^12 sampler calls
        audit_event(repeated_answer(), sampler, sampler, windows=10**12, window=3)
    assert calls == []


def test_number_arguments_of_the_helpers():
    from knorm.audit import clopper_pearson

    for call, name in [(lambda v: clopper_pearson(v, 10, 0.05), "k"), (lambda v: clopper_pearson(3, v, 0.05), "n"),
                       (lambda v: clopper_pearson(3, 10, v), "alpha"), (lambda v: repeated_answer(v), "atol"),
                       (lambda v: fx_on_line([1.0, v]), "fx")]:
        for value in (float("nan"), float("inf"), "1", None, 1j, 10**400):
            with pytest.raises(ValueError, match=rf"^{name}"):
                call(value)
    res = audit_event(repeated_answer(), lambda k: np.arange(k, dtype=float), lambda k: np.arange(k, dtype=float),
                      windows=3, window=3)
    for value in (float("nan"), -1.0, "1", None, 10**400):
        with pytest.raises(ValueError, match=r"^claimed_epsilon"):
            res.refutes(value)  # NaN used to give False silently
        with pytest.raises(ValueError, match=r"^epsilon"):
            res.delta_lower_bound(value)
    assert res.refutes(float("inf")) is False  # no claim at all: never refuted


def test_complex_outputs_are_refused_not_cast():
    with pytest.raises(ValueError, match=r"^sample_p's outputs must be real"):
        audit(lambda k: np.ones(k) + 1j, lambda k: np.ones(k), n=100)


def test_a_tiny_alpha_gives_a_finite_valid_bound():
    """α = 1e-300: the ranking score used ppf(1 − α/2) = inf (NaN scores); the held-out
    Clopper–Pearson bound at such α is 0 for these identical samplers."""
    res = audit(lambda k: np.random.default_rng(k).standard_normal(k), lambda k: np.random.default_rng(k).standard_normal(k),
                n=200, alpha=1e-300, rng=0)
    assert res.epsilon_lower_bound == 0.0 and res.failure is None
