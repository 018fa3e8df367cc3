"""MCMC draws behind K-norm / NIM releases: continuing chains, no repeats, no chain
neighbours, round-robin, certification (ConvergenceError), core-count independence, bad input."""

import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knorm
from knorm import ConvergenceError, KNormMechanism, NIMechanism
from knorm import workloads as W
from knorm.walks.chains import default_params
from knorm.walks.sampler import rounding_of


@pytest.fixture(scope="module")
def F():
    return W.random_pm1(6, 20, rng=14)


def served_sources(m, sizes):
    """Release ``sizes`` batches (x = 0); return the answers and the (chain, record) of every z used."""
    x = np.zeros(m.n)
    answers, sources, used = [], [], 0
    infos = []
    for k in sizes:
        before = m.last_info
        answers.append(m.release(x, size=k))
        if m.last_info is not before:
            infos.append(m.last_info)
    for info in infos:
        sources.append(info.extra["sources"][: info.extra["banked"]])  # the bank keeps the first draws it asked for
    src = np.vstack(sources)
    used = sum(sizes)
    return np.vstack(answers), src[:used], infos


def test_release_chains_start_once_and_refills_continue_them(F):
    """From a certified body: the first refill starts 8 chains (W steps each from public
    stationary states) and banks just the 150 draws asked for; later refills (as many as
    were banked, up to bank_size, rounded up to a draw per chain) continue the same chains, no new start, no second warm-up."""
    m = KNormMechanism(F, epsilon=1.0, rng=15, bank_size=200)
    _, src, infos = served_sources(m, [150, 150, 150, 150])
    chains = list(m._stationary.chains)
    assert len(infos) == 4 and [i.extra["banked"] for i in infos] == [150, 152, 200, 200]  # 152: a draw per chain
    assert infos[0].extra["chains_started"] == 8 and infos[0].warmup == infos[0].extra["certificate"]["warmup"]
    assert all(i.extra["chains_started"] == 0 and i.warmup == 0 for i in infos[1:])
    assert m._stationary.chains == chains
    for a, b in zip(infos, infos[1:]):
        assert b.extra["sources"][:, 1].min() > a.extra["sources"][:, 1].max()


def test_one_sampler_for_the_lifetime_and_refills_continue_its_chains(F):
    """The per-run path (asked for by a per-run option: min_draws) keeps one Sampler."""
    m = KNormMechanism(F, epsilon=1.0, rng=15, bank_size=200, sampler_options={"min_draws": 1000})
    sampler = m._sampler
    _, src, infos = served_sources(m, [150, 150, 150, 150])
    assert m._sampler is sampler and len(infos) == 3
    assert infos[0].warmup >= 20 * infos[0].extra["tau"]
    assert all(i.warmup == 0 for i in infos[1:])  # refills continue: no restart, no second warm-up
    # record indices keep growing across refills: never back at the start points
    for a, b in zip(infos, infos[1:]):
        assert b.extra["sources"][:, 1].min() > a.extra["sources"][:, 1].max()


def test_draws_used_in_release_order_no_neighbours_round_robin(F):
    m = KNormMechanism(F, epsilon=1.0, rng=16, bank_size=300)
    _, src, _ = served_sources(m, [1] * 40 + [100, 250, 7, 300])
    for c in np.unique(src[:, 0]):
        idx = src[src[:, 0] == c, 1]
        assert np.all(np.diff(idx) >= 2)  # never two neighbours of a chain; never the same record twice
    assert np.all(src[1:, 0] != src[:-1, 0])  # consecutive releases come from different chains


def test_no_two_releases_share_z_with_the_ball_walk_near_vertices():
    """A 3-d body with sharp vertices and a ball walk of 3× the default radius: the
    sampler's pool holds exact repeats (what the old selection released), the releases
    never do: no two answers a = r·z (x = 0) are parallel. Mechanisms take no walk
    params, so the test gives the mechanism an engine Sampler with that (valid, Uniform(K)
    invariant) radius; at the default radius the pool holds too few repeats to test."""
    F = np.random.default_rng(3).standard_normal((3, 4))
    K = knorm.SymmetricHull(F)
    p = 3 * default_params("ball", rounding_of(K).frame)
    m = KNormMechanism(F, epsilon=1.0, rng=17, walk="ball", body=K)
    m._sampler = knorm.Sampler(K, walk="ball", rng=m._rng, params=p)
    m._per_run = True  # the per-run path, whose Sampler this is
    a, _, infos = served_sources(m, [500] * 6)
    assert sum(i.extra["pool_repeats"] for i in infos) > 20
    u = a / np.linalg.norm(a, axis=1, keepdims=True)
    cos = u @ u.T
    np.fill_diagonal(cos, 0.0)
    assert cos.max() < 1 - 1e-9


# ---- certification ---------------------------------------------------------------------------

UNCERTIFIABLE = {"max_steps": 1, "min_draws": 50}  # a ball walk with a 64-record pool and no budget


def test_uncertified_run_raises_unless_accepted(F):
    x = np.ones(20)
    m = KNormMechanism(F, epsilon=1.0, rng=7, walk="ball", bank_size=20, sampler_options=UNCERTIFIABLE)
    with pytest.raises(ConvergenceError, match="accept_uncertified"):
        m.release(x)
    assert isinstance(ConvergenceError("x"), RuntimeError)
    assert m.answers == 0 and len(m._bank) == 0  # nothing released, nothing banked
    ok = KNormMechanism(F, epsilon=1.0, rng=7, walk="ball", bank_size=20, sampler_options=UNCERTIFIABLE,
                        accept_uncertified=True)
    assert ok.privacy_per_answer.certified
    a = ok.release(x, size=3)
    assert a.shape == (3, 6) and not ok.last_info.converged
    assert not ok._certified and not ok.privacy.certified and "UNCERTIFIED" in str(ok.privacy)


def test_certified_runs_keep_the_claim_certified(F):
    m = KNormMechanism(F, epsilon=1.0, rng=8, bank_size=300)
    m.release(np.ones(20), size=5)
    assert m.last_info.converged and m._certified


def test_nim_passes_the_certification_choice_to_its_levels(F):
    x = np.ones(20)
    m = NIMechanism(F, epsilon=1.0, rng=9, walk="ball", bank_size=20, sampler_options=UNCERTIFIABLE)
    with pytest.raises(ConvergenceError):
        m.release(x)
    ok = NIMechanism(F, epsilon=1.0, rng=9, walk="ball", bank_size=20, sampler_options=UNCERTIFIABLE,
                     accept_uncertified=True)
    assert all(lv.mechanism.accept_uncertified for lv in ok.levels)
    assert ok.release(x).shape == (6,)
    assert not ok.levels[0].mechanism._certified


# ---- core-count independence -----------------------------------------------------------------

def test_seeded_releases_do_not_depend_on_the_core_count(F, monkeypatch):
    x = np.ones(20)
    out = []
    for cores, opts in [(1, None), (4, None), (64, {"workers": 3})]:
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        m = KNormMechanism(np.array(F), epsilon=1.0, rng=11, bank_size=200, sampler_options=opts)
        out.append(m.release(x, size=300))
        assert m.last_info.chains == 8
    for o in out[1:]:
        np.testing.assert_array_equal(o, out[0])


# ---- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [KNormMechanism, NIMechanism])
@pytest.mark.parametrize("G", [np.eye(3), W.random_pm1(4, 10, rng=1)])  # exact structure or MCMC
def test_bad_walk_raises_even_for_exact_bodies(cls, G):
    with pytest.raises(ValueError, match="walk"):
        cls(G, epsilon=1.0, walk="foo")


@settings(max_examples=25, deadline=None)
@given(bank_size=st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.none(),
                           st.text(max_size=2)))
def test_bad_bank_size(bank_size):
    for cls in (KNormMechanism, NIMechanism):
        with pytest.raises(ValueError, match="bank_size"):
            cls(np.eye(2), epsilon=1.0, bank_size=bank_size)


@pytest.mark.parametrize("opts,match", [
    ({"max_steps": 0}, "max_steps"), ({"max_steps": -5}, "max_steps"), ({"workers": 0}, "workers"),
    ({"workers": -1}, "workers"), ({"workers": 1.5}, "workers"), ({"min_draws": 0}, "min_draws"),
    ({"chains": 10**9}, "chains"), ({"chains": 0}, "chains"), ({"thin": 3}, "sampler_options"),
])
@pytest.mark.parametrize("cls", [KNormMechanism, NIMechanism])
def test_bad_sampler_options(F, cls, opts, match):
    with pytest.raises(ValueError, match=match):
        cls(F, epsilon=1.0, sampler_options=opts)


@pytest.mark.parametrize("cls", [KNormMechanism, NIMechanism])
@pytest.mark.parametrize("G", [np.eye(3), W.random_pm1(4, 10, rng=1)])
def test_sizes_that_cannot_fit_fail_fast_and_spend_nothing(cls, G):
    m = cls(G, epsilon=1.0)
    tracemalloc.start()  # before allocating: at most a few MB traced, whatever the machine's load
    try:
        with pytest.raises(ValueError, match="size"):
            m.release(np.zeros(G.shape[1]), size=10**12)
        with pytest.raises(ValueError, match="size"):
            m.sample_noise(10**12)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20 and m.answers == 0
    with pytest.raises(ValueError, match="bank_size"):
        cls(G, epsilon=1.0, bank_size=10**12)


def test_bad_accept_uncertified():
    with pytest.raises(ValueError, match="accept_uncertified"):
        KNormMechanism(np.eye(2), epsilon=1.0, accept_uncertified="yes")
