"""Certify once, release after a warm-up (knorm/walks/certify.py; docs/design.md §3.5, §3.7).

The audits of a release from a certified body, each with a control that fails:

(a) start dependence. 1000 draws released from one fixed public start, for two starts (the
    centre of K and a point just inside a vertex), on 2-way marginals over (2,3,4) (r = 18).
    Exact values: K is symmetric, so E z = 0 for z ~ Uniform(K), and the projection of z on
    any fixed direction has mean 0. The statistics: the largest |z-score| of the draws' mean
    over the 18 frame coordinates, the z-score of their projection on the vertex direction
    (their correlation with the start), and the cross-validated accuracy of a classifier
    (logistic regression on z, z² and ‖z‖_K) that tries to tell the two starts' draws apart
    (0.5 ± 0.011 for 2000 draws with no signal). At the certificate's W all three show
    nothing (|z| < 4.5, Bonferroni over 20 tests at ≈ 10⁻⁴; accuracy < 0.56, > 5 standard
    errors); with W = 0 (the first candidate two steps from the start: the control) each
    shows the start.
(b) the gauge law of released draws: ‖z‖_K^r ~ U(0, 1) (P(‖z‖_K ≤ t) = t^r), KS p > 10⁻³ for
    2000 draws from 2000 fresh mechanisms; the control (the same draws shrunk by 2%, whose
    gauge law is (t/0.98)^r) fails it.
(c) successive releases: lag-1 and lag-2 correlations of released gauges and coordinates
    within 4/√N of 0.
"""

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats

import knorm
from knorm import ConvergenceError, KNormMechanism
from knorm import workloads as W
from knorm.walks.certify import (MIN_POOL, N_STATES, WARMUP_FLOOR, Certified, StationarySampler,
                                 certify, implied_tau, uniform_gauge_ks, verify, warmup_steps)
from knorm.walks.sampler import rounding_of


@pytest.fixture(scope="module")
def small():
    F = W.random_pm1(6, 20, rng=14)
    K = knorm.SymmetricHull(F)
    return F, K, certify(K)


@pytest.fixture(scope="module")
def marg():
    F = W.marginals((2, 3, 4), 2)
    K = knorm.SymmetricHull(F)
    return F, K, certify(K)


def test_certificate_passes_and_is_consistent(small):
    F, K, c = small
    cert = c.certificate
    assert cert.passed and cert.failures() == []
    assert cert.pool >= MIN_POOL and cert.max_rhat < cert.rhat_limit < 1.04 and cert.min_ess >= cert.pool / 2
    assert cert.tau_bound >= cert.tau >= 1.0
    assert cert.warmup == warmup_steps(cert.tau_bound) >= WARMUP_FLOOR
    assert c.states.shape == (N_STATES, K.dim)
    assert np.all(rounding_of(K).frame.gauges(c.states)[0] <= 1.0)  # the states lie in K
    # public and deterministic: the same seed, the same certificate and states
    again = certify(knorm.SymmetricHull(F))
    assert again.certificate == cert and np.array_equal(again.states, c.states)


def test_tampered_certificates_fail_their_own_checks(small):
    cert = small[2].certificate
    for change in ({"warmup": 0}, {"warmup": cert.warmup - 1}, {"max_rhat": cert.rhat_limit}, {"min_ess": cert.pool / 3},
                   {"gauge_ks_p": 0.0005}, {"pool": 500}, {"thin": 0}, {"pool_thin": 0}, {"chains": 1},
                   {"walk": "teleport"}, {"tau": 1.0, "warmup": WARMUP_FLOOR}
                   if cert.tau > 1.05 else {"repeat_fraction": 0.02}):
        assert dataclasses.replace(cert, **change).failures(), change


def test_uniform_gauge_ks_has_power():
    """Exact draws from the cross-polytope B₁^r (Laplace/exponential construction, design §3.1): their
    ℓ₁ norms follow t^r; shrunk by 1% they do not."""
    rng = np.random.default_rng(0)
    r = 10
    g = rng.laplace(size=(4000, r))
    z = g / (np.abs(g).sum(axis=1, keepdims=True) + rng.exponential(size=(4000, 1)))
    norms = np.abs(z).sum(axis=1)
    assert uniform_gauge_ks(norms, r) > 1e-3
    assert uniform_gauge_ks(0.97 * norms, r) < 1e-3


def _release_from(K, c, start, warmup, n, seed):
    """n draws (frame coordinates), each the first candidate of a fresh chain started at ``start``."""
    cert = dataclasses.replace(c.certificate, warmup=warmup)
    X = np.tile(start, (N_STATES, 1))
    fixed = Certified(cert, X, rounding_of(K).frame.optimal_bases(X))
    s = StationarySampler(K, rounding_of(K), fixed, rng=seed, chains=n)
    s._start(n)  # n chains, each W steps from the start (a release starts as many as chains_for says)
    s.run(n)
    return np.array([ch.x for ch in s.chains])


def _start_dependence(K, c, warmup):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    frame = rounding_of(K).frame
    vertex = 0.999 * frame.Ft[0]
    n = 1000
    A = _release_from(K, c, np.zeros(K.dim), warmup, n, 1)
    B = _release_from(K, c, vertex, warmup, n, 2)
    u = vertex / np.linalg.norm(vertex)
    mean_z = max(float(np.max(np.abs(X.mean(axis=0) / (X.std(axis=0) / np.sqrt(n))))) for X in (A, B))
    p = B @ u
    proj_z = abs(p.mean() / (p.std() / np.sqrt(n)))
    X = np.vstack([A, B])
    feats = np.column_stack([X, X**2, frame.gauges(X)[0]])
    y = np.repeat([0, 1], n)
    acc = cross_val_score(LogisticRegression(max_iter=2000), feats, y, cv=5).mean()
    return mean_z, proj_z, acc


@pytest.mark.slow
def test_audit_a_no_start_dependence_at_W_and_the_control_shows_it(marg):
    F, K, c = marg
    assert c.certificate.warmup >= 20
    mean_z, proj_z, acc = _start_dependence(K, c, c.certificate.warmup)
    assert mean_z < 4.5 and proj_z < 4.5 and acc < 0.56, (mean_z, proj_z, acc)
    mean_z, proj_z, acc = _start_dependence(K, c, 0)  # the control: no warm-up
    assert mean_z > 4.5 and proj_z > 4.5 and acc > 0.6, (mean_z, proj_z, acc)


@pytest.mark.slow
def test_audit_b_gauge_law_of_draws_from_fresh_mechanisms(small):
    F, K, c = small
    rng = np.random.default_rng(3)
    z = np.vstack([KNormMechanism(F, epsilon=1.0, rng=rng, body=K).sample_uniform(1) for _ in range(2000)])
    g = K.gauge(z)
    assert uniform_gauge_ks(g, K.dim) > 1e-3
    assert uniform_gauge_ks(0.98 * g, K.dim) < 1e-3  # the control: a law 2% too small


def test_audit_c_successive_releases_are_uncorrelated(small):
    F, K, c = small
    m = KNormMechanism(F, epsilon=1.0, rng=4, body=K, bank_size=500)
    z = np.vstack([m.sample_uniform(1) for _ in range(2000)])
    n = len(z)
    series = [K.gauge(z)] + [z[:, i] for i in range(z.shape[1])]
    for x in series:
        x = (x - x.mean()) / x.std()
        for lag in (1, 2):
            assert abs(np.mean(x[lag:] * x[:-lag])) < 4 / np.sqrt(n)


def test_first_release_is_one_warm_up_and_the_bank_refills_with_chains(small):
    F, K, c = small
    m = KNormMechanism(F, epsilon=1.0, rng=5, body=K, bank_size=100)
    m.release(np.ones(20))
    info = m.last_info
    W_ = c.certificate.warmup
    assert info.chains == 1 and info.extra["chains_started"] == 1 and info.extra["released"] == 1
    assert info.steps == 2 * -(-W_ // 2) >= W_  # W steps (rounded up to even) to the first draw
    assert info.extra["sources"][0, 1] == info.steps  # its (chain, step): W after the public start
    assert "W = %d steps after its chain's public stationary start or its previous released draw" % W_ in str(m.privacy)
    assert "approximate" in str(m.privacy)
    m.release(np.ones(20))  # the bank doubles what was drawn (1), a draw per chain: 8, on all 8 (round-robin)
    assert m.last_info.chains == 8 and m.last_info.extra["chains_started"] == 7
    assert m.last_info.extra["banked"] == 8 and len(m._bank) == 7
    for banked in (16, 32, 64, 104):  # 9 banked so far, then 25, 57, 121: up to bank_size (100), a draw per chain
        for _ in range(len(m._bank) + 1):
            m.release(np.ones(20))
        assert m.last_info.extra["banked"] == banked and m.last_info.extra["chains_started"] == 0


def test_seeded_stationary_releases_do_not_depend_on_workers(small):
    F, K, c = small
    a = KNormMechanism(F, epsilon=1.0, rng=6, body=K, sampler_options={"workers": 1}).release(np.ones(20), size=30)
    b = KNormMechanism(F, epsilon=1.0, rng=6, body=K, sampler_options={"workers": 2}).release(np.ones(20), size=30)
    assert np.array_equal(a, b)


def test_verify_passes_a_good_certificate_and_fails_a_short_warm_up(small):
    F, K, c = small
    ok, m = verify(K, rounding_of(K), c, rng=0)
    assert ok, m["failures"]
    # a file whose τ (and W with it) was edited down to half: the walk's own τ is not covered
    cert = c.certificate
    short = Certified(dataclasses.replace(cert, tau=cert.tau / 2, warmup=1), c.states, c.bases)
    ok, m = verify(K, rounding_of(K), short, rng=0)
    assert not ok and any("too short" in f for f in m["failures"]), m["failures"]


# ---- prepared files: the certificate is saved, checked on load, and a tampered file is refused -----

def _rewrite(path, **changes):
    z = dict(np.load(path, allow_pickle=False))
    for k, v in changes.items():
        z[k] = v
    with open(path, "wb") as f:  # np.savez(path) would add ".npz" to the name
        np.savez(f, **z)


def test_prepared_file_carries_the_certificate(tmp_path, small):
    F = small[0]
    p = tmp_path / "w.knorm"
    w = knorm.prepare(F, p)
    z = np.load(p, allow_pickle=False)
    assert "public" in str(z["public"])
    back = knorm.load_prepared(p, F)
    assert back.certificate == w.certificate and np.array_equal(back.certified.states, w.certified.states)
    m = KNormMechanism(F, epsilon=1.0, prepared=back)
    m.release(np.ones(20))
    assert m.last_info.extra["stationary_start"] and m.last_info.steps == 2 * -(-back.certificate.warmup // 2)


@pytest.mark.parametrize("change", ["warmup0", "rhat", "version", "outside", "few_states", "json", "tau_only",
                                    "bad_basis"])
def test_tampered_prepared_files_are_refused(tmp_path, small, change):
    F = small[0]
    p = tmp_path / "w.knorm"
    w = knorm.prepare(F, p)
    d = w.certificate.as_dict()
    states = w.certified.states
    if change == "warmup0":
        d["warmup"] = 0
    elif change == "rhat":
        d["max_rhat"] = 1.05
    elif change == "version":
        d["version"] = "0.0.1"
    elif change == "tau_only":
        d["tau"], d["warmup"] = 1.0, WARMUP_FLOOR
        d["min_ess"] = float(d["pool"]) / 2  # ESS/record 0.5 implies τ 2: W 20 too short
    if change == "outside":
        _rewrite(p, states=states * 1.5)
    elif change == "bad_basis":
        _rewrite(p, state_bases=np.full_like(w.certified.bases, 10**9))
    elif change == "few_states":
        _rewrite(p, states=states[:10])
    elif change == "json":
        _rewrite(p, certificate=np.array("{not json"))
    else:
        _rewrite(p, certificate=np.array(json.dumps(d)))
    with pytest.raises(ValueError, match="prepared: .*(refused|damaged)"):
        knorm.load_prepared(p, F)


def test_an_uncertifiable_walk_raises_and_accept_uncertified_falls_back(small):
    F, K, c = small
    body = knorm.SymmetricHull(F)
    import knorm.walks.certify as cm

    def fail(*a, **k):
        raise ConvergenceError("not certified")

    orig = cm.certify
    cm.certify = fail
    try:
        with pytest.raises(ConvergenceError):
            KNormMechanism(F, epsilon=1.0, rng=1, body=body).release(np.ones(20))
        m = KNormMechanism(F, epsilon=1.0, rng=1, body=body, accept_uncertified=True)
        m.release(np.ones(20))
        assert "stationary_start" not in m.last_info.extra  # the per-run path's certified run
    finally:
        cm.certify = orig


def test_saved_radius_bases_are_only_warm_starts(tmp_path, small):
    """The walk's length scale (body_radius) is exact from any saved bases: the same value from
    other valid bases; bases that are not bases make the file damaged."""
    from knorm.walks import chains

    F = small[0]
    p = tmp_path / "w.knorm"
    w = knorm.prepare(F, p)
    want = chains.body_radius(w.rounding.frame)
    z = dict(np.load(p, allow_pickle=False))
    _rewrite(p, radius_bases=np.roll(z["radius_bases"], 1, axis=0))  # each direction warm-started elsewhere
    got = chains.body_radius(knorm.load_prepared(p, F).rounding.frame)
    assert got == pytest.approx(want, rel=1e-12)
    _rewrite(p, radius_bases=np.full_like(z["radius_bases"], -1))
    with pytest.raises(ValueError, match="damaged"):
        knorm.load_prepared(p, F)


def test_a_runs_pivots_count_its_warm_up(small):
    """info.pivots counts every pivot of the run: the new chains' warm-up included."""
    F, K, c = small
    s = StationarySampler(K, rounding_of(K), c, rng=1)
    _, info = s.run(1)
    assert info.pivots == sum(ch.pivots for ch in s.chains) - sum(s._pivots_new) > 0
    before = sum(ch.pivots for ch in s.chains)
    _, info = s.run(3)
    assert info.pivots == sum(ch.pivots for ch in s.chains) - before


def test_the_radius_is_the_same_on_any_number_of_threads(monkeypatch):
    """body_radius solves its 64 directions in fixed groups from one crash basis, in threads: the
    same bases and the same bits on 1 and on 8 of them (2-way marginals: degenerate facets, where
    another warm start could end on another optimal basis)."""
    from knorm.walks import chains

    F = knorm.workloads.marginals((2, 3, 4), 2)
    got = []
    for threads in (1, 8):
        monkeypatch.setattr(chains, "default_workers", lambda threads=threads: threads)
        frame = knorm.SymmetricHull(F).frame
        got.append((chains.body_radius(frame), chains.radius_bases(frame)))
    assert got[0][0] == got[1][0]
    np.testing.assert_array_equal(got[0][1], got[1][1])


def test_the_radius_is_the_median_of_exact_inverse_gauges():
    """body_radius = median over the fixed directions v of 1/‖v‖_K, against the gauges solved
    plainly (one warm-started chain of solves, HiGHS-checked elsewhere), on a rounded frame."""
    from knorm.walks import chains
    from knorm.walks.rounding import _frame_for

    base = knorm.SymmetricHull(knorm.workloads.marginals((2, 3, 4), 2)).frame
    frame = _frame_for(base, np.linalg.cholesky(base.Ft.T @ base.Ft / base.n))
    g, _ = frame.gauges(chains.radius_directions(frame.r), state=frame.crash_basis())
    assert chains.body_radius(frame) == pytest.approx(float(np.median(1.0 / g)), rel=1e-12)


def _rhat_failing_once(monkeypatch, module):
    """The R-hat of ``module`` (knorm.walks.sampler's for a plain run, knorm.walks.certify's for a
    certification), made to fail its first check (so the pool is extended once)."""
    name = "_rhat" if module.__name__.endswith("sampler") else "split_nested_rhat"
    real, calls = getattr(module, name), []

    def rhat(x):
        calls.append(1)
        out = np.atleast_1d(real(x))
        return out + 1.0 if len(calls) == 1 else out

    monkeypatch.setattr(module, name, rhat)
    return calls


def test_a_certification_pool_extended_past_its_target_shows_the_new_target(monkeypatch):
    """A certification's records are public: when R-hat extends its pool, the progress gets the
    new target before the extension runs (at census size minutes that were silent); a pool of
    noise (a plain sampler run) never shows one past its target."""
    K = knorm.SymmetricHull(W.random_pm1(6, 20, rng=14))
    from knorm.walks import certify as C
    from knorm.walks import sampler as S

    calls = _rhat_failing_once(monkeypatch, C)
    seen = []
    certify(K, progress=lambda done, total: seen.append((done, total)))
    assert len(calls) >= 2
    totals = [t for _, t in seen]
    assert totals[0] == MIN_POOL and max(totals) > MIN_POOL
    first = totals.index(max(totals))
    assert seen[first][0] == MIN_POOL  # said when the pool stood at its target, before any more records
    assert seen[-1][0] == seen[-1][1] == max(totals)  # and counted up to it

    calls = _rhat_failing_once(monkeypatch, S)
    seen.clear()
    knorm.Sampler(K, rng=3, min_draws=MIN_POOL, progress=lambda done, total: seen.append((done, total))).run(1000)
    assert len(calls) >= 2 and {t for _, t in seen} == {MIN_POOL}
