"""The public sampling API: reproducibility, shapes, diagnostics, warnings, bad input."""

import numpy as np
import pytest

from knorm import ConvergenceWarning, SamplingInfo, SymmetricHull, sample_uniform
from knorm.walks import Chain, run_chains

NO_CLIP = np.array([np.inf])


@pytest.fixture(scope="module")
def F():
    return np.random.default_rng(0).choice([-1.0, 1.0], size=(6, 20))


def test_same_seed_same_draws_bit_for_bit(F):
    a = sample_uniform(F, 300, rng=42)
    b = sample_uniform(SymmetricHull(F), 300, rng=42)  # fresh body: rounding recomputed
    c = sample_uniform(F, 300, rng=np.random.default_rng(42))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, sample_uniform(F, 300, rng=43))


def test_cached_rounding_does_not_change_seeded_results(F):
    K = SymmetricHull(F)
    a = sample_uniform(K, 200, rng=1)
    b = sample_uniform(K, 200, rng=1)  # rounding now cached on K
    np.testing.assert_array_equal(a, b)


def test_threads_do_not_change_seeded_results(F):
    a = sample_uniform(F, 200, rng=3, chains=4, workers=1)
    b = sample_uniform(F, 200, rng=3, chains=4, workers=4)
    np.testing.assert_array_equal(a, b)


def test_none_seed_uses_fresh_entropy(F):
    assert not np.array_equal(sample_uniform(F, 50), sample_uniform(F, 50))


def test_shapes_and_info(F):
    x, info = sample_uniform(F, 123, chains=3, rng=5, return_info=True)
    assert x.shape == (123, 6)
    assert isinstance(info, SamplingInfo)
    assert info.chains == 3
    assert info.rhat.shape == (6,) and info.ess.shape == (6,)
    assert info.steps > 0 and info.seconds > 0 and info.pivots > 0
    assert info.draws >= 123
    assert info.converged and info.max_rhat < 1.01 and info.min_ess >= info.draws / 2
    assert "R-hat" in info.summary()
    assert np.all(SymmetricHull(F).gauge(x) <= 1 + 1e-9)


def test_single_chain_works(F):
    x, info = sample_uniform(F, 100, chains=1, rng=6, return_info=True)
    assert x.shape == (100, 6) and info.chains == 1


def test_budget_exhaustion_warns(F):
    # a ball walk, a 50-draw pool (too few for R-hat < 1.01) and no budget to extend it
    with pytest.warns(ConvergenceWarning, match="max_steps"):
        x, info = sample_uniform(F, 40, walk="ball", rng=7, max_steps=1, min_draws=50, return_info=True)
    assert not info.converged
    assert x.shape == (40, 6)


def test_chain_records_every_thin_steps(F):
    K = SymmetricHull(F)
    gen = np.random.default_rng(0)
    c = Chain(K.frame, np.zeros(6), gen)
    out = run_chains([c], "hit_and_run", 30, 10, NO_CLIP)
    assert out.shape == (1, 3, 6)
    assert int(c.stats[2]) == 30


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"size": 0}, "size"),
        ({"size": -3}, "size"),
        ({"size": 2.5}, "size"),
        ({"size": True}, "size"),
        ({"size": 10, "walk": "gibbs"}, "walk"),
        ({"size": 10, "chains": 0}, "chains"),
        ({"size": 10, "rng": "seed"}, "rng"),
        ({"size": 10, "rng": -1}, "rng"),
    ],
)
def test_bad_arguments_raise(F, kwargs, match):
    size = kwargs.pop("size")
    with pytest.raises(ValueError, match=match):
        sample_uniform(F, size, **kwargs)


def test_bad_matrix_raises():
    with pytest.raises(ValueError, match="NaN"):
        sample_uniform(np.array([[1.0, np.nan]]), 10)


def test_thinning_rule_matches_ar1_theory():
    from knorm.walks.sampler import thinning_for

    assert thinning_for(1.0) == 1 and thinning_for(0.5) == 1
    for tau in [2.2, 10.0, 168.0]:
        k = thinning_for(tau)
        rho = (tau - 1) / (tau + 1)
        frac = lambda j: (1 - rho**j) / (1 + rho**j)  # noqa: E731
        assert frac(k) >= 0.6 > frac(k - 1) if k > 1 else frac(k) >= 0.6


def test_ball_clipped_hit_and_run_stays_in_the_intersection():
    """Uniform on B₁³ ∩ ρB₂: inside both; ‖z‖_K ~ law of the clipped body (checked via inclusion)."""
    K = SymmetricHull(np.eye(3))
    gen = np.random.default_rng(1)
    c = Chain(K.frame, np.zeros(3), gen)
    rho = 0.4 / K._scale  # frame units
    out = run_chains([c], "hit_and_run", 4000, 2, np.array([rho]))[0]
    assert np.all(np.linalg.norm(out, axis=1) <= rho * (1 + 1e-12))
    assert np.all(K.frame.gauges(out)[0] <= 1 + 1e-12)
    # a ball of radius 0.4 < 1/√3 lies inside B₁³: the clipped body is the ball, E‖z‖² = 3ρ²/5
    z2 = np.sum(out**2, axis=1) * K._scale**2
    from knorm.diagnostics import ess

    se = z2.std(ddof=1) / np.sqrt(ess(z2[None, :, None])[0])
    assert abs(z2.mean() - 3 * 0.4**2 / 5) < 4.5 * se


@pytest.mark.parametrize("walk", ["billiard", "hit_and_run", "coordinate", "ball"])
def test_trajectory_does_not_depend_on_how_steps_are_split(F, walk):
    from knorm.walks.chains import default_params

    K = SymmetricHull(F)
    p = default_params(walk, K.frame)
    one = Chain(K.frame, np.zeros(6), np.random.default_rng(3))
    a = one.run(walk, 1200, 3, p)
    two = Chain(K.frame, np.zeros(6), np.random.default_rng(3))
    b = np.vstack([two.run(walk, 300, 3, p), two.run(walk, 600, 3, p), two.run(walk, 300, 3, p)])
    np.testing.assert_array_equal(a, b)


def test_chain_state_dict_round_trip_continues_bit_for_bit(F):
    from knorm.walks.chains import default_params

    K = SymmetricHull(F)
    p = default_params("billiard", K.frame)
    c = Chain(K.frame, np.zeros(6), np.random.default_rng(4))
    c.run("billiard", 700, 1, p)
    saved = c.state_dict()
    want = c.run("billiard", 900, 1, p)
    d = Chain(K.frame, np.zeros(6), np.random.default_rng(999))
    d.load_state_dict(saved)
    np.testing.assert_array_equal(d.run("billiard", 900, 1, p), want)


def test_interrupted_run_resumes_to_the_uninterrupted_result(F, tmp_path):
    from knorm.walks.checkpoint import Checkpoint

    want, info = sample_uniform(F, 3000, rng=21, return_info=True)

    class Stop(Exception):
        pass

    calls = []

    def stop_after_two(done, target):
        calls.append(done)
        if len(calls) == 2:
            raise Stop

    with pytest.raises(Stop):
        sample_uniform(F, 3000, rng=21, progress=stop_after_two, checkpoint=Checkpoint(tmp_path, every=0))
    ck = Checkpoint(tmp_path, every=0, resume=True)
    got, info2 = sample_uniform(F, 3000, rng=21, checkpoint=ck, return_info=True)
    assert ck.loaded == 1
    np.testing.assert_array_equal(got, want)
    assert info2.steps == info.steps
    # the finished run's snapshot was deleted: it is never loaded again
    assert not list(tmp_path.glob("sample-*.npz"))
    with pytest.raises(ValueError, match="no unfinished run"):
        Checkpoint(tmp_path, resume=True)


def test_checkpoint_needs_a_seed(F, tmp_path):
    from knorm.walks.checkpoint import Checkpoint

    with pytest.raises(ValueError, match="seeded"):
        sample_uniform(F, 10, checkpoint=Checkpoint(tmp_path))


def test_progress_reports_up_to_the_pool(F):
    seen = []
    sample_uniform(F, 2000, rng=1, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1][0] == seen[-1][1] == 4000  # records: two per returned draw
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_per_step_tau_inverts_ar1_thinning():
    from knorm.walks.rounding import per_step_tau

    for rho in [0.3, 0.5, 0.9]:
        tau_step = (1 + rho) / (1 - rho)
        tau_thin2 = (1 + rho**2) / (1 - rho**2)
        assert per_step_tau(tau_thin2, 2) == pytest.approx(tau_step)
    assert per_step_tau(0.8, 2) == 1.0


def test_facet_walk_and_highs_hit_and_run_trace_the_same_chain():
    """The oracle comparison is only fair if both oracles drive the identical chain."""
    from knorm.experiments import compare_oracles

    res = compare_oracles(6, 20, seed=1, highs_steps=25, ess_steps=200, out=lambda *a: None)
    assert res["trajectory_deviation"] < 1e-9
    assert res["ratio"] > 1


def test_ball_clipped_billiard_stays_in_the_intersection_and_is_uniform_there():
    K = SymmetricHull(np.eye(3))
    from knorm.walks.chains import default_params

    rho = 0.4 / K._scale
    p = default_params("billiard", K.frame)
    p[0], p[2] = 2 * rho, rho
    c = Chain(K.frame, np.zeros(3), np.random.default_rng(5))
    out = run_chains([c], "billiard", 6000, 2, p)[0]
    assert np.all(np.linalg.norm(out, axis=1) <= rho * (1 + 1e-12))
    z2 = np.sum(out**2, axis=1) * K._scale**2
    from knorm.diagnostics import ess

    se = z2.std(ddof=1) / np.sqrt(ess(z2[None, :, None])[0])
    assert abs(z2.mean() - 3 * 0.4**2 / 5) < 4.5 * se  # uniform in the ball of radius 0.4 ⊂ B₁³
    # a ball that cuts the body: points must lie in both
    rho2 = 0.8 / K._scale
    p[0], p[2] = 2 * rho2, rho2
    out2 = run_chains([c], "billiard", 3000, 1, p)[0]
    assert np.all(np.linalg.norm(out2, axis=1) <= rho2 * (1 + 1e-12))
    assert np.all(K.frame.gauges(out2)[0] <= 1 + 1e-12)
    assert np.max(K.frame.gauges(out2)[0]) > 0.95  # it does reach K's facets


# ---- Sampler: continuing chains, warm-up, draws fit for release -----------------------------

def vertex_ball_sampler(rng, **kw):
    """Ball walk with 3× the default radius on a 3-d body with sharp vertices (4 Gaussian
    columns): about 94% of proposals are rejected and records often repeat exactly."""
    from knorm import Sampler
    from knorm.walks.chains import default_params
    from knorm.walks.sampler import rounding_of

    K = SymmetricHull(np.random.default_rng(3).standard_normal((3, 4)))
    p = 3 * default_params("ball", rounding_of(K).frame)
    return Sampler(K, walk="ball", rng=rng, params=p, **kw)


def test_runs_continue_the_chains_exactly(F):
    """Two runs of a sampler = one run twice as long: the chains carry over (no restart, no second warm-up)."""
    from knorm import Sampler

    s = Sampler(F, rng=8, min_draws=400)
    a, ia = s.run(200)
    states = [c.state_dict() for c in s.chains]
    b, ib = s.run(200)
    assert ia.warmup >= 20 * ia.extra["tau"] and ib.warmup == 0 and ia.thin == ib.thin
    long = Sampler(F, rng=8, min_draws=800)
    c, ic = long.run(400)
    assert ic.thin == ia.thin
    # same (chain, record index) -> same draw, over the whole span of both runs
    got = dict(zip(map(tuple, np.vstack([ia.extra["sources"], ib.extra["sources"]])), np.vstack([a, b])))
    want = dict(zip(map(tuple, ic.extra["sources"]), c))
    common = set(got) & set(want)
    assert len(common) >= 350 and max(k[1] for k in common) > ia.extra["sources"][:, 1].max()
    for k in common:
        np.testing.assert_array_equal(got[k], want[k])
    # the second run's first records come from the first run's final states, not the start points
    fresh = Sampler(F, rng=8, min_draws=400)
    fresh.run(200)
    np.testing.assert_array_equal(fresh.chains[0].state_dict()["x"], states[0]["x"])
    assert not np.allclose(states[0]["x"], s.rounding.points[0])


@pytest.mark.parametrize("walk", ["billiard", "hit_and_run", "coordinate", "ball"])
def test_warm_up_of_at_least_20_tau_before_the_first_record(F, walk):
    x, info = sample_uniform(F, 100, walk=walk, rng=2, return_info=True)
    assert info.warmup >= 20 * info.extra["tau"]
    dropped = 0 if info.extra["pilot_kept"] else info.extra["pilot"]  # a dropped pilot adds steps, no records
    assert info.steps == info.chains * (info.warmup + dropped + info.thin * info.draws // info.chains)


def test_a_pessimistic_tau_plan_is_corrected_by_the_thinning_1_pilot(F, monkeypatch):
    """The rounding's τ sets the planned thinning; made pessimistic (τ = 3: thinning 2, while the
    billiard walk's τ here is ≈ 1), the first run's pilot at thinning 1 must reach 0.6 ESS per
    record, be kept as the start of the pool and certify at thinning 1; with a too optimistic
    τ nothing is piloted. Billiard trajectories of a tenth of the default length mix slowly
    at thinning 1 (τ ≫ 2): that pilot must be dropped (its steps count, its records never enter
    the pool). Walks that measure τ on their own chains (the ball walk) are never piloted."""
    from knorm import Sampler
    from knorm.walks import sampler as S
    from knorm.walks.chains import default_params
    from knorm.walks.sampler import rounding_of

    K = SymmetricHull(F)
    rnd = rounding_of(K)
    monkeypatch.setattr(rnd, "tau", 3.0)
    assert S.thinning_for(3.0) == 2
    x, info = Sampler(K, rng=5, min_draws=800).run(400)
    assert info.extra["pilot"] == 26 and info.extra["pilot_kept"]  # 100 records per chain: a quarter, made even
    assert info.thin == 1 and info.converged and info.steps == info.chains * (info.warmup + info.draws // 8)
    monkeypatch.setattr(rnd, "tau", 1.0)
    _, info = Sampler(K, rng=5, min_draws=800).run(400)
    assert info.extra["pilot"] == 0 and info.thin == 1
    monkeypatch.setattr(rnd, "tau", 3.0)
    short = default_params("billiard", rnd.frame)
    short[0] /= 10.0
    _, info = Sampler(K, rng=5, min_draws=800, params=short).run(400)
    assert info.extra["pilot"] == 26 and not info.extra["pilot_kept"] and info.thin >= 2
    _, info = Sampler(K, walk="ball", rng=5, min_draws=800).run(400)
    assert info.extra["pilot"] == 0 and info.thin > 1


def test_a_run_with_a_kept_pilot_resumes_bit_for_bit(F, tmp_path, monkeypatch):
    """Interrupted after its pilot was kept, a checkpointed run resumes to the draws, steps and
    pilot report of the uninterrupted run (the snapshot holds the pilot's records and flags)."""
    from knorm import Sampler
    from knorm.walks.checkpoint import Checkpoint
    from knorm.walks.sampler import rounding_of

    K = SymmetricHull(F)
    monkeypatch.setattr(rounding_of(K), "tau", 3.0)
    ref, rinfo = Sampler(K, rng=5, min_draws=4800).run(2400)
    assert rinfo.extra["pilot_kept"]
    calls = [0]

    def stop(done, total):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Sampler(K, rng=5, min_draws=4800, checkpoint=Checkpoint(tmp_path / "ck", every=0.0), progress=stop).run(2400)
    out, info = Sampler(K, rng=5, min_draws=4800, checkpoint=Checkpoint(tmp_path / "ck", every=0.0, resume=True)
                        ).run(2400)
    assert info.extra["resumed"] and np.array_equal(out, ref) and info.steps == rinfo.steps
    assert (info.extra["pilot"], info.extra["pilot_kept"], info.thin) == (rinfo.extra["pilot"], True, 1)


def test_released_draws_never_repeat_though_the_pool_does():
    """Near sharp vertices the ball walk stands still for more than its thinning: the pool
    (everything the old selection drew from) holds exact repeats; released draws never do."""
    s = vertex_ball_sampler(4)
    out, pool_repeats = [], 0
    for _ in range(3):
        x, info = s.run(1000)
        assert info.converged
        out.append(x)
        pool_repeats += info.extra["pool_repeats"]
    out = np.vstack(out)
    assert pool_repeats > 20
    assert len(np.unique(out, axis=0)) == len(out)


def test_no_chain_neighbours_and_round_robin_order():
    s = vertex_ball_sampler(5, chains=5)
    srcs = [s.run(300)[1].extra["sources"] for _ in range(3)]
    allsrc = np.vstack(srcs)
    for c in range(5):
        idx = allsrc[allsrc[:, 0] == c, 1]
        assert np.all(idx % 2 == 1) and np.all(np.diff(idx) >= 2)  # odd records only, never adjacent
    for src in srcs:
        # by record position, then chain: consecutive draws come from different chains
        np.testing.assert_array_equal(np.lexsort((src[:, 0], src[:, 1])), np.arange(len(src)))
        assert np.mean(src[1:, 0] != src[:-1, 0]) > 0.99


def test_uncertified_run_returns_converged_false_without_warning(F):
    import warnings

    from knorm import Sampler

    s = Sampler(F, walk="ball", rng=7, max_steps=1, min_draws=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, info = s.run(20)
    assert not info.converged and len(x) >= 20
    with pytest.warns(ConvergenceWarning):
        s.sample(20)


def test_checkpoint_resumes_a_continued_run(F, tmp_path):
    from knorm import Sampler
    from knorm.walks.checkpoint import Checkpoint

    s = Sampler(F, rng=12)
    s.run(600)
    want = s.run(2000)[0]  # 4000 records: two chunks of 256 records per chain

    class Stop(Exception):
        pass

    calls = []

    def stop(done, target):
        if target == 4000:
            calls.append(done)
            if len(calls) == 3:  # the second run (opened, then its first chunk saved), at its second chunk
                raise Stop

    s1 = Sampler(F, rng=12, checkpoint=Checkpoint(tmp_path, every=0), progress=stop)
    s1.run(600)
    with pytest.raises(Stop):
        s1.run(2000)
    ck = Checkpoint(tmp_path, every=0, resume=True)
    s2 = Sampler(F, rng=12, checkpoint=ck)
    s2.run(600)  # finished before the interrupt (its snapshot deleted): run again, identically
    assert ck.loaded == 0
    np.testing.assert_array_equal(s2.run(2000)[0], want)  # resumed after its first chunk
    assert ck.loaded == 1 and not list(tmp_path.glob("sample-*.npz"))


def test_seeded_draws_do_not_depend_on_the_core_count(F, monkeypatch):
    import os

    runs = []
    for cores, workers in [(1, None), (2, None), (64, None), (64, 3)]:
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        runs.append(sample_uniform(np.array(F), 300, rng=13, workers=workers))  # fresh body: fresh rounding
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
    from knorm.walks.sampler import DEFAULT_CHAINS

    assert sample_uniform(F, 10, rng=1, return_info=True)[1].chains == DEFAULT_CHAINS == 8


# ---- bad input: refused before anything is allocated ---------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    ({"size": 10**12}, "size"),
    ({"size": 10, "chains": 10**9}, "chains"),
    ({"size": 10, "min_draws": 10**13}, "min_draws"),
])
def test_requests_that_cannot_fit_in_memory_fail_fast(F, kwargs, match):
    import tracemalloc

    size = kwargs.pop("size")
    tracemalloc.start()  # fails before allocating: a few MB traced at most, however loaded the machine
    try:
        with pytest.raises(ValueError, match=match):
            sample_uniform(F, size, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NOT_POSITIVE_INT = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3),
                             st.booleans())


@settings(max_examples=30, deadline=None)
@given(value=NOT_POSITIVE_INT, name=st.sampled_from(["max_steps", "workers", "min_draws", "chains"]))
def test_bad_counts_raise_naming_the_argument(F, value, name):
    from knorm import Sampler

    with pytest.raises(ValueError, match=name):
        Sampler(F, **{name: value})
    with pytest.raises(ValueError, match=name):
        sample_uniform(F, 10, **{name: value})


def test_walks_are_one_registry_and_caches_live_outside_the_body():
    """Every walk is one entry of knorm.WALKS (kernel branch, default parameters, summary);
    the CLI offers exactly those names; the rounding and the body radius are cached by the
    sampling layer, not written on the body or frame objects."""
    import knorm
    from knorm.cli import build_parser
    from knorm.walks.chains import body_radius, default_params, walk_id
    from knorm.walks.sampler import rounding_of

    assert list(knorm.WALKS)[0] == "billiard"
    assert len({w.kernel for w in knorm.WALKS.values()}) == len(knorm.WALKS)
    K = knorm.SymmetricHull(knorm.workloads.random_pm1(6, 12, rng=np.random.default_rng(0)))
    before = set(vars(K)) | set(vars(K.frame))
    for name, w in knorm.WALKS.items():
        assert walk_id(name) == w.kernel and w.summary
        np.testing.assert_array_equal(default_params(name, K.frame), w.params(K.frame))
    assert rounding_of(K) is rounding_of(K)
    assert body_radius(K.frame) == body_radius(K.frame)
    assert set(vars(K)) | set(vars(K.frame)) == before
    sub = build_parser()._subparsers._group_actions[0].choices["sample"]
    walk_action = next(a for a in sub._actions if a.dest == "walk")
    assert list(walk_action.choices) == list(knorm.WALKS)


def test_a_slow_pool_reports_in_shorter_chunks_with_the_same_bits(monkeypatch):
    """Issue 44: a pool chunk that took longer than REPORT_EVERY makes the next ones shorter (at
    census size a tenth of the pool took 3.5 min without a report); the chains draw in fixed
    blocks, so a run whose every chunk shrinks to 2 records gives the same draws to the bit."""
    from knorm import workloads
    from knorm.walks import sampler as S

    assert S.shorter_chunk(64, 64, 120.0) == 16 and S.shorter_chunk(64, 64, 10.0) == 64
    assert S.shorter_chunk(8, 2, 100.0) == 8 and S.shorter_chunk(10, 10, 1e9) == 2
    F = workloads.random_pm1(6, 14, rng=3)
    calls = []
    real = S.run_chains

    def counted(*a, **k):
        calls.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(S, "run_chains", counted)
    want, _ = S.Sampler(F, rng=4, min_draws=300).run(300)
    usual, calls[:] = len(calls), []
    monkeypatch.setattr(S, "REPORT_EVERY", 0.0)  # every chunk "too slow": the shortest chunks
    got, _ = S.Sampler(F, rng=4, min_draws=300).run(300)
    assert np.array_equal(got, want) and len(calls) > usual
