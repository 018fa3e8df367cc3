"""NIM: the ε split, the plan (never worse than K-norm), the Hardt–Talwar halving rule, bad input."""

import numpy as np
import pytest
from scipy import optimize

from knorm import KNormMechanism, NIMechanism
from knorm import workloads as W
from knorm.mechanisms.nim import SPLIT_MARGIN, split_epsilon


def box_F():
    """``diag(100, 1)·G`` for a ±1 G (2 × 20) holding both sign patterns (1, 1) and (1, −1) up to sign:
    ``K_G = conv(±(1,1), ±(1,−1)) = [−1, 1]²``, so ``K = [−100, 100] × [−1, 1]``."""
    G = W.random_pm1(2, 20, rng=3)
    assert len({tuple(c * c[0]) for c in G.T}) == 2
    return np.diag([100.0, 1.0]) @ G


# ---- the ε split -------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
def test_split_epsilon_solves_the_constrained_minimisation(m):
    rng = np.random.default_rng(m)
    c = rng.lognormal(0.0, 2.0, size=m)
    eps = 1.7
    e, value = split_epsilon(c, eps)
    assert e.sum() == pytest.approx(eps, rel=1e-12) and np.all(e > 0)
    assert value == pytest.approx(np.sum(c / e**2), rel=1e-12)
    # an independent solver on the same problem: min Σ c_i/ε_i² s.t. Σ ε_i = ε, ε_i > 0
    res = optimize.minimize(lambda x: np.sum(c / x**2), np.full(m, eps / m), method="SLSQP",
                            jac=lambda x: -2 * c / x**3, bounds=[(1e-6, eps)] * m,
                            constraints=[{"type": "eq", "fun": lambda x: x.sum() - eps}],
                            options={"ftol": 1e-14, "maxiter": 1000})
    assert res.success
    assert value <= res.fun * (1 + 1e-9)
    np.testing.assert_allclose(e, res.x, rtol=2e-3)


@pytest.mark.parametrize("c", [[], [1.0, 0.0], [1.0, -2.0], [np.nan], [np.inf]])
def test_split_epsilon_refuses_bad_costs(c):
    with pytest.raises(ValueError, match="costs"):
        split_epsilon(c, 1.0)


# ---- one level is K-norm -------------------------------------------------------------------------

@pytest.mark.parametrize("F,kw", [(W.random_pm1(6, 20, rng=14), {}), (W.prefix(8), {}),
                                  (box_F(), {"max_levels": 1})])
def test_a_one_level_plan_is_the_knorm_mechanism(F, kw):
    m = NIMechanism(F, epsilon=0.7, rng=5, **kw)
    assert [lv.dim for lv in m.levels] == [np.linalg.matrix_rank(F)] and m.levels[0].epsilon == 0.7
    x = np.arange(F.shape[1], dtype=float)
    k = KNormMechanism(F, epsilon=0.7, rng=5)
    np.testing.assert_array_equal(m.release(x, size=40), k.release(x, size=40))
    assert m.privacy_per_answer.sampling == k.privacy_per_answer.sampling


def test_diagonal_workloads_are_not_split():
    """F = diag(s): K is the cross-polytope image, K-norm noise is s·Lap(1/ε), E‖noise‖² = 2Σs²/ε².
    A split into coordinate blocks costs c_B = 2Σ_{i∈B}s_i² per block (the block's projection is its
    own cross-polytope image), and (Σ_B c_B^{1/3})³ > Σ_B c_B: one level is optimal."""
    s = np.array([10.0, 5.0, 1.0, 0.5, 0.1])
    m = NIMechanism(np.diag(s), epsilon=2.0, rng=1)
    assert len(m.levels) == 1 and m.plan[0]["covariance"] == "exact"
    assert m.predicted_error == pytest.approx(np.sqrt(2 * np.sum(s**2)) / 2.0, rel=1e-9)


# ---- never worse than K-norm ---------------------------------------------------------------------

@pytest.mark.parametrize("d,n", [(24, 120), (40, 200)])
def test_nim_predicted_error_is_not_worse_than_knorm_on_pm1(d, n):
    F = W.random_pm1(d, n, rng=1)
    m = NIMechanism(F, epsilon=1.0, rng=21)
    # K-norm's √E‖noise‖₂² = √((k+1)(k+2))/ε·√E‖z‖₂² (docs/design.md §4), E‖z‖₂² from its certified pool
    # (2000 records; standard error by the pool's ESS and the delta method)
    kn = KNormMechanism(F, epsilon=1.0, rng=22).expected_error(rms=True)
    # the prediction is itself an estimate: tr Cov(Uniform K) from the rounding's records, a few
    # percent (the prefix test below allows 5% on the second moment, i.e. 2.5% on its root)
    assert m.predicted_error <= kn.value + 3 * kn.stderr + 0.025 * kn.value


def test_nim_error_is_not_worse_than_knorm_on_pm1_24x120():
    F = W.random_pm1(24, 120, rng=1)
    nim = NIMechanism(F, epsilon=1.0, rng=21).expected_error(1000)
    kn = KNormMechanism(F, epsilon=1.0, rng=22).expected_error()  # from the certified pool
    assert nim.value <= kn.value + 3 * np.hypot(nim.stderr, kn.stderr)


def test_predictions_match_monte_carlo_on_prefix_32():
    """Prefix (n = 32): K-norm noise is T·Lap(1/ε)ⁿ (K = T·B₁ⁿ), so E‖noise‖² = 2‖T‖_F²/ε² = n(n+1)
    at ε = 1. NIM splits off the top principal directions (MCMC levels) and must predict its own
    second moment within Monte-Carlo error plus the few percent of its covariance estimates, and
    beat K-norm."""
    n = 32
    m = NIMechanism(W.prefix(n), epsilon=1.0, rng=3)
    assert len(m.levels) > 1 and not m.levels[1].exact_covariance
    sq = np.sum(m.sample_noise(4000) ** 2, axis=1)
    mean, se = sq.mean(), sq.std(ddof=1) / np.sqrt(len(sq))
    assert m.predicted_error**2 == pytest.approx(mean, abs=3 * se + 0.05 * mean)
    assert mean + 3 * se < 0.8 * n * (n + 1)


def test_nim_splits_a_strongly_non_isotropic_box_and_beats_knorm():
    """K = [−100, 100] × [−1, 1] (box_F), uniform law = independent uniform coordinates.
    K-norm (k = 2): E‖noise‖² = 3·4·(100² + 1)/3 = 40004.
    NIM: level 1 (k = 2) releases e₂: c₁ = 3·4·(1/3) = 4; level 2 is P_{e₁}K = [−100, 100] (k = 1):
    c₂ = 2·3·100²/3 = 20000; at ε = 1 the optimum is (4^{1/3} + 20000^{1/3})³ ≈ 23715 at
    ε_i ∝ c_i^{1/3}, which beats 40004 by more than SPLIT_MARGIN."""
    F = box_F()
    c = np.array([4.0, 20000.0])
    total = np.cbrt(c).sum() ** 3
    assert total < (1 - SPLIT_MARGIN) * 40004
    m = NIMechanism(F, epsilon=1.0, rng=7)
    assert [(p["dim"], p["kept_dim"], p["covariance"]) for p in m.plan] == [(2, 1, "exact"), (1, 1, "exact")]
    np.testing.assert_allclose([lv.epsilon for lv in m.levels], np.cbrt(c) / np.cbrt(c).sum(), rtol=1e-9)
    np.testing.assert_allclose([p["predicted_rms_error"] ** 2 for p in m.plan], c / np.array(
        [lv.epsilon for lv in m.levels]) ** 2, rtol=1e-9)
    assert m.predicted_error == pytest.approx(np.sqrt(total), rel=1e-9)
    assert np.abs(m.levels[0].kept[:, 0]) == pytest.approx([0.0, 1.0], abs=1e-9)
    noise = m.sample_noise(4000)
    sq = np.sum(noise**2, axis=1)
    assert sq.mean() == pytest.approx(total, abs=4 * sq.std(ddof=1) / np.sqrt(len(sq)))
    nim = m.expected_error(4000)
    kn = KNormMechanism(F, epsilon=1.0, rng=8).expected_error(4000)
    assert nim.value < 0.9 * kn.value - 3 * np.hypot(nim.stderr, kn.stderr)


def test_the_plan_depends_on_F_only():
    F = W.random_pm1(6, 20, rng=14)
    a, b = NIMechanism(F, epsilon=1.0, rng=1), NIMechanism(F, epsilon=1.0, rng=2)
    assert a.plan == b.plan and a.predicted_error == b.predicted_error


def test_the_claim_states_the_composition_and_the_budgets():
    m = NIMechanism(box_F(), epsilon=2.0)
    claim = m.privacy_per_answer
    assert claim.epsilon == 2.0 and "basic composition of 2 K-norm levels" in claim.composition
    assert sum(claim.details["epsilon_per_level"]) == pytest.approx(2.0)
    assert claim.details["levels"] == [2, 1] and claim.details["kept"] == [1, 1]
    assert "Jensen" in m.prediction_basis and "exact" in m.prediction_basis


def test_max_levels_and_max_estimates_bound_the_plan():
    F = W.prefix(32)
    assert len(NIMechanism(F, epsilon=1.0, max_levels=1).levels) == 1
    assert NIMechanism(F, epsilon=1.0).precise_estimates >= 1  # the MCMC level of its plan
    m = NIMechanism(F, epsilon=1.0, max_estimates=2)
    assert m.covariance_estimates <= 2
    assert NIMechanism(F, epsilon=1.0, max_estimates=0).covariance_estimates == 0


# ---- the halving rule (Hardt & Talwar) ---------------------------------------------------------

def test_halves_levels_privacy_and_span():
    F = np.diag([10.0, 5.0, 1.0, 0.5, 0.1])
    m = NIMechanism(F, epsilon=2.0, rng=10, split="halves")
    assert [lv.dim for lv in m.levels] == [5, 2, 1]
    assert sum(lv.epsilon for lv in m.levels) == pytest.approx(2.0)
    w = np.cbrt([lv.cost for lv in m.levels])
    np.testing.assert_allclose([lv.epsilon for lv in m.levels], 2.0 * w / w.sum(), rtol=1e-12)
    assert m.privacy_per_answer.epsilon == 2.0 and "basic composition" in m.privacy_per_answer.composition
    assert m.privacy_per_answer.exact  # every level is an image of a cross-polytope
    # the kept subspaces are orthogonal and together span the answer space
    kept = np.hstack([lv.kept for lv in m.levels])
    np.testing.assert_allclose(kept.T @ kept, np.eye(5), atol=1e-9)
    # first level keeps the low-variance directions (the three smallest scales)
    np.testing.assert_allclose(np.abs(m.levels[0].kept.T @ np.eye(5)[:, 2:]) @ np.ones(3), np.ones(3), atol=1e-9)
    assert m.sample_noise(100).shape == (100, 5)
    assert NIMechanism(F, epsilon=2.0, split="halves", max_levels=2).plan[-1]["dim"] == 2


@pytest.mark.parametrize("split", ["auto", "halves"])
def test_nim_on_a_rank_deficient_workload(split):
    rng = np.random.default_rng(11)
    F = rng.standard_normal((6, 2)) @ W.random_pm1(2, 10, rng=12)
    m = NIMechanism(F, epsilon=1.0, rng=13, split=split)
    if split == "halves":
        assert [lv.dim for lv in m.levels] == [2, 1]
    noise = m.sample_noise(200)
    Q = np.linalg.svd(F)[0][:, :2]
    np.testing.assert_allclose(noise - (noise @ Q) @ Q.T, 0, atol=1e-8)


# ---- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,match", [
    ({"split": "thirds"}, "split"), ({"split": None}, "split"), ({"max_levels": 0}, "max_levels"),
    ({"max_levels": 1.5}, "max_levels"), ({"max_levels": True}, "max_levels"),
    ({"max_estimates": -1}, "max_estimates"), ({"max_estimates": 2.0}, "max_estimates"),
    ({"max_estimates": None}, "max_estimates"),
])
def test_bad_plan_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        NIMechanism(np.eye(2), epsilon=1.0, **kw)


@pytest.mark.parametrize("scale", [1e-300, 1e300])
def test_the_plan_at_extreme_scales_of_F(scale):
    """The plan scales with F: the same levels and ε_i, predicted errors × scale (box_F's values)."""
    ref = NIMechanism(box_F(), epsilon=1.0)
    m = NIMechanism(box_F() * scale, epsilon=1.0)
    assert [lv.epsilon for lv in m.levels] == pytest.approx([lv.epsilon for lv in ref.levels], rel=1e-12)
    assert m.predicted_error / scale == pytest.approx(ref.predicted_error, rel=1e-9)
    for p, q in zip(m.plan, ref.plan):
        assert p["predicted_rms_error"] / scale == pytest.approx(q["predicted_rms_error"], rel=1e-9)


# ---- reuse: a plan, a body -----------------------------------------------------------------------

def test_plan_of_reuses_the_plan_and_releases_like_a_fresh_search():
    """The plan is a function of F: a mechanism built with ``plan_of`` (no search) has the plan of
    one that searches, and with the same rng releases the same answers."""
    F = W.prefix(32)
    x = np.arange(32, dtype=float)
    table = NIMechanism(F, epsilon=1.0, rng=1)
    fresh = NIMechanism(F, epsilon=1.0, rng=5)
    reused = NIMechanism(F, epsilon=1.0, rng=5, plan_of=table)
    assert len(fresh.levels) > 1 and reused.plan == fresh.plan and reused.predicted_error == fresh.predicted_error
    np.testing.assert_array_equal(reused.release(x, size=30), fresh.release(x, size=30))
    with pytest.raises(ValueError, match="plan_of"):
        NIMechanism(W.prefix(31), epsilon=1.0, plan_of=table)
    with pytest.raises(ValueError, match="plan_of"):
        NIMechanism(F, epsilon=1.0, max_levels=1, plan_of=table)
    with pytest.raises(ValueError, match="plan_of"):
        NIMechanism(F, epsilon=1.0, plan_of=KNormMechanism(F, epsilon=1.0))


def test_a_given_body_gives_the_same_plan():
    F = W.random_pm1(6, 20, rng=14)
    body = KNormMechanism(F, epsilon=1.0).body
    assert NIMechanism(F, epsilon=1.0, body=body).plan == NIMechanism(F, epsilon=1.0).plan
    with pytest.raises(ValueError, match="body"):
        NIMechanism(F, epsilon=1.0, body=KNormMechanism(np.eye(3), epsilon=1.0).body)


def test_the_plan_does_not_depend_on_what_was_certified_before():
    """NIM certifies its root before planning, so the root level's covariance always comes from the
    certified pool: a fresh body and one certified (and asked for its error) beforehand give the
    same plan, and the prediction says where the covariance came from (issue 35's audit: before,
    the plan used PLAN_DRAWS draws cold and the pool otherwise: 8.0190 against 8.0289 here)."""
    from knorm import SymmetricHull

    F = W.marginals((2, 2, 3), 2)
    cold = NIMechanism(F, epsilon=1.0, body=SymmetricHull(F), rng=1)
    warm_body = SymmetricHull(F)
    KNormMechanism(F, epsilon=1.0, body=warm_body).expected_error()  # certifies warm_body first
    warm = NIMechanism(F, epsilon=1.0, body=warm_body, rng=1)
    assert cold.predicted_error == warm.predicted_error
    assert [lv.dim for lv in cold.levels] == [lv.dim for lv in warm.levels]
    assert "first level's covariance from its certified pool" in cold.prediction_basis
