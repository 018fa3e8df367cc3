"""Parallel back ends: any concurrent.futures.Executor runs the chains, with identical seeded results."""

import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from knorm import Sampler, sample_uniform
from knorm.walks.chains import Chain, run_chains

F = np.random.default_rng(0).choice([-1.0, 1.0], size=(5, 14))
SIZE = 300


class InlineExecutor(Executor):
    """The smallest Executor there is: runs each call at once, in this thread."""

    def submit(self, fn, /, *args, **kwargs):
        f = Future()
        f.set_result(fn(*args, **kwargs))
        return f


@pytest.fixture(scope="module")
def reference():
    return sample_uniform(F, SIZE, rng=21, workers=1)


def test_threads_and_processes_give_identical_draws(reference):
    with ThreadPoolExecutor(max_workers=2) as ex:
        threads = sample_uniform(F, SIZE, rng=21, workers=ex)
    with ProcessPoolExecutor(max_workers=2) as ex:
        processes = sample_uniform(F, SIZE, rng=21, workers=ex)
    np.testing.assert_array_equal(threads, reference)
    np.testing.assert_array_equal(processes, reference)
    np.testing.assert_array_equal(sample_uniform(F, SIZE, rng=21, workers=InlineExecutor()), reference)


def test_a_sampler_continues_identically_on_another_executor(reference):
    """Two runs of one sampler on a process pool equal two runs on threads (chain states come back exactly)."""
    a = Sampler(F, rng=5, workers=2)
    with ProcessPoolExecutor(max_workers=2) as ex:
        b = Sampler(F, rng=5, workers=ex)
        first, second = b.sample(100), b.sample(100)
    np.testing.assert_array_equal(first, a.sample(100))
    np.testing.assert_array_equal(second, a.sample(100))


def test_run_chains_moves_out_of_process_chains_to_the_same_states():
    from knorm.body import SymmetricHull
    from knorm.walks.sampler import rounding_of

    frame = rounding_of(SymmetricHull(F)).frame
    params = np.array([np.inf])

    def chains():
        return [Chain(frame, np.zeros(frame.r), np.random.default_rng(s)) for s in (1, 2, 3)]

    here, there = chains(), chains()
    want = run_chains(here, "hit_and_run", 40, 2, params, workers=1)
    with ProcessPoolExecutor(max_workers=2) as ex:
        got = run_chains(there, "hit_and_run", 40, 2, params, workers=ex)
    np.testing.assert_array_equal(got, want)
    for a, b in zip(here, there):
        np.testing.assert_array_equal(a.x, b.x)
        assert a.rng.bit_generator.state == b.rng.bit_generator.state and a.pivots == b.pivots


def test_dask_executors_give_identical_draws(reference):
    distributed = pytest.importorskip("dask.distributed")
    from knorm.distributed import DaskExecutor

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        via_client = sample_uniform(F, SIZE, rng=21, workers=client.get_executor())
        with DaskExecutor(client) as ex:  # an Executor: leaving the block leaves the caller's client open
            via_wrapper = sample_uniform(F, SIZE, rng=21, workers=ex)
        assert client.status == "running"
    np.testing.assert_array_equal(via_client, reference)
    np.testing.assert_array_equal(via_wrapper, reference)


def test_a_dask_executor_sends_a_frame_the_cluster_lost_again():
    """Scattered data has no lineage: a frame the cluster lost (its workers died, a restart; here
    cancelled) is scattered again at the next batch, not submitted as a key the scheduler forgot
    ("failed to acquire keys"), and the draws are the same."""
    distributed = pytest.importorskip("dask.distributed")
    from knorm.body import SymmetricHull
    from knorm.distributed import DaskExecutor
    from knorm.walks.sampler import rounding_of

    frame = rounding_of(SymmetricHull(F)).frame
    params = np.array([np.inf])

    def chains():
        return [Chain(frame, np.zeros(frame.r), np.random.default_rng(s)) for s in (1, 2, 3)]

    want = run_chains(chains(), "hit_and_run", 20, 2, params, workers=1)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client, \
            DaskExecutor(client) as ex:
        first = run_chains(chains(), "hit_and_run", 20, 2, params, workers=ex)
        lost = ex._frame_future(frame)
        client.cancel(lost)
        again = run_chains(chains(), "hit_and_run", 20, 2, params, workers=ex)
        assert ex._frame_future(frame) is not lost
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(again, want)


_GATE = threading.Event()  # module level: an in-process Dask worker calls it by reference


def _wait_at_gate(seconds):
    return _GATE.wait(seconds)


def test_a_batch_the_cluster_cancelled_runs_again_with_the_same_bits():
    """Under load a cluster may drop an accepted task ("cancelled for reason: already forgotten",
    issue 34): the batch is a pure function of its inputs, so it is submitted again; a cancel asked
    for by the caller stays final."""
    distributed = pytest.importorskip("dask.distributed")
    from concurrent.futures import CancelledError

    from knorm.body import SymmetricHull
    from knorm.distributed import DaskExecutor
    from knorm.walks.chains import advance_chain
    from knorm.walks.sampler import rounding_of

    frame = rounding_of(SymmetricHull(F)).frame
    params = np.array([np.inf])
    chain = Chain(frame, np.zeros(frame.r), np.random.default_rng(1))
    want, _ = advance_chain(frame, chain.compact_state(), "hit_and_run", 20, 2, params)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client, \
            DaskExecutor(client) as ex:
        fut = ex.submit(advance_chain, frame, chain.compact_state(), "hit_and_run", 20, 2, params)
        dropped = fut._future
        client.cancel(dropped)  # what the scheduler does to a forgotten task
        got, _ = fut.result()
        assert fut._future is not dropped
        _GATE.clear()
        blocker = ex.submit(_wait_at_gate, 60)  # holds the one thread: the next call waits behind it
        mine = ex.submit(advance_chain, frame, chain.compact_state(), "hit_and_run", 20, 2, params)
        assert mine.cancel() is True and mine.cancelled() and mine.done()
        _GATE.set()
        assert blocker.result() is True and blocker.exception() is None and blocker.cancel() is False
        with pytest.raises(CancelledError):
            mine.result()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", ["all", 0, -1, 1.5, True, object()])
def test_bad_workers_raise_naming_the_argument(bad):
    with pytest.raises(ValueError, match="^workers must"):
        Sampler(F, workers=bad)


# ---- progress during rounding, resumed runs ---------------------------------------------------

def test_rounding_reports_its_iterations_and_is_unchanged_by_reporting():
    from knorm.body import SymmetricHull
    from knorm.walks.rounding import PROGRESS_PIECES, TAU_GUESS, WARMUP_TAUS, round_body

    seen = []
    rnd = round_body(SymmetricHull(F).frame, progress=lambda done, total: seen.append((done, total)))
    quiet = round_body(SymmetricHull(F).frame)
    np.testing.assert_array_equal(rnd.T, quiet.T)  # the steps ran in pieces: same records, same rounding
    warm = int(np.ceil(WARMUP_TAUS * TAU_GUESS))  # the first iteration's warm-up steps
    want = []
    for it, steps in enumerate(rnd.records):
        w = warm if it == 0 else 0
        w_cuts = np.linspace(0, w, PROGRESS_PIECES + 1).astype(int)[1:] if w else []
        cuts = np.linspace(0, steps, PROGRESS_PIECES + 1).astype(int)
        want += [(it + c / (w + steps), 8) for c in w_cuts] + [(it + (w + c) / (w + steps), 8) for c in cuts[1:]]
    # the stage opens as the rounding starts (a census-size first warm-up takes minutes), then the
    # share of each iteration's steps done (quarters of the first's warm-up, then quarters of its
    # records), then done: closed at the iterations it ran when it stopped before max_iter = 8
    k = rnd.iterations
    assert seen[0] == (0, 8) and seen[1:-1] == want and seen[-1] == ((k, k) if k < 8 else (8, 8))


def test_a_sampler_passes_rounding_progress_to_a_progress_object():
    class Bar:
        def __init__(self):
            self.rounds, self.draws = [], []

        def __call__(self, done, target):
            self.draws.append(done)

        def rounding(self, it, total):
            self.rounds.append((it, total))

    bar = Bar()
    sample_uniform(F, 100, rng=2, progress=bar)
    k = bar.rounds[-1][0]  # closed at the iterations the rounding ran (at most 8)
    assert bar.rounds and 1 <= k <= 8 and bar.rounds[-1] == (k, k) and bar.draws


def test_a_pilot_reports_its_pieces_and_they_change_no_bit(monkeypatch):
    """A planned thinning of 2 on a warm-started billiard run makes the sampler try thinning 1 on a
    pilot first (Sampler._pilot): its steps go to ``progress.pilot`` piece by piece (at census size
    it ran 21 silent minutes), and the draws are those of the same run without a progress object."""
    from knorm.walks import sampler as sm

    monkeypatch.setattr(sm, "thinning_for", lambda tau, target=sm.TARGET_ESS_FRACTION: 2)
    calls = []

    class Bar:
        def __call__(self, done, target):
            pass

        def pilot(self, done, total):
            calls.append((done, total))

    want = sample_uniform(F, 300, rng=4)
    got = sample_uniform(F, 300, rng=4, progress=Bar())
    np.testing.assert_array_equal(got, want)
    assert len(calls) >= 2 and calls[-1][0] == calls[-1][1] and [d for d, _ in calls] == sorted({d for d, _ in calls})


def test_a_resumed_run_says_so_and_times_the_whole_run(tmp_path):
    import time

    from knorm.walks.checkpoint import Checkpoint

    class Stop(Exception):
        pass

    calls = []

    def slow_then_stop(done, target):  # 0.3 s pass as the pool opens, before its first chunk's snapshot;
        calls.append(done)  # stop at the second chunk
        if len(calls) == 1:
            time.sleep(0.3)
        elif len(calls) > 2:
            raise Stop

    with pytest.raises(Stop):
        sample_uniform(F, 1500, rng=4, progress=slow_then_stop, checkpoint=Checkpoint(tmp_path, every=0))
    ck = Checkpoint(tmp_path, resume=True)
    _, info = sample_uniform(F, 1500, rng=4, checkpoint=ck, return_info=True)
    assert info.extra["resumed"] and ck.loaded == 1
    assert info.extra["seconds_before_resume"] == ck.resumed_seconds >= 0.3
    assert info.seconds > info.extra["seconds_before_resume"]
    assert "resumed from a checkpoint" in info.summary()
    _, fresh = sample_uniform(F, 1500, rng=4, return_info=True)
    assert not fresh.extra["resumed"] and "resumed" not in fresh.summary()


def test_a_compact_state_is_the_whole_state_less_the_block_it_draws_again():
    """What an out-of-process executor ships (Chain.compact_state) loads into the same state, buffered
    random inputs included, at a fraction of the size; a chain whose block's origin is unknown (loaded
    from a checkpoint's full state) ships its whole state until it draws its next block."""
    from knorm.body.hull import SymmetricHull
    from knorm.walks.chains import BLOCK, default_params

    frame = SymmetricHull(F).frame
    params = default_params("hit_and_run", frame)
    chain = Chain(frame, np.zeros(frame.r), np.random.default_rng(3))
    chain.run("hit_and_run", BLOCK + 7, 1, params)  # two blocks drawn, the second one 7 steps in
    full, compact = chain.state_dict(), chain.compact_state()
    assert "normals" not in compact and "block_rng" in compact
    for state in (compact, full):
        copy = Chain.from_state(frame, state)
        got = copy.state_dict()
        for k, v in full.items():
            assert np.array_equal(np.asarray(got[k]), np.asarray(v)) if k != "rng" else got[k] == v, k
        assert np.array_equal(copy.run("hit_and_run", 20, 1, params), Chain.from_state(frame, full).run(
            "hit_and_run", 20, 1, params))
    loaded = Chain.from_state(frame, full)  # a full state says nothing of where its block came from
    assert "normals" in loaded.compact_state()
    loaded.run("hit_and_run", BLOCK, 1, params)  # its next block is drawn here: known from now on
    assert "normals" not in loaded.compact_state()


def test_an_executor_with_fewer_slots_than_chains_gets_runs_of_chains(reference):
    """An executor with ``slots`` gets that many tasks per batch (runs of consecutive chains), with the
    draws of one task per chain."""

    class Slotted(InlineExecutor):
        slots = 3

        def __init__(self):
            self.tasks = []

        def submit(self, fn, /, *args, **kwargs):
            self.tasks.append((fn.__name__, len(args[1])))  # the function and how many chain states
            return super().submit(fn, *args, **kwargs)

    ex = Slotted()
    s = Sampler(F, rng=21, workers=ex)
    np.testing.assert_array_equal(s.sample(SIZE), reference)
    assert len(ex.tasks) > 3 and set(ex.tasks) == {("advance_chains", 3), ("advance_chains", 2)}  # 8 = 3 + 3 + 2


def test_the_billiard_records_the_exact_gauge_of_each_record():
    """The billiard's oracle state is optimal at every step's end point, so each record's gauge is
    ``λ·(T x)`` with no pivot (Chain.record_gauges): equal to the exact oracle's solve from a fresh
    crash basis to 1e-9, on threads and through a process pool alike; other walks record none."""
    from knorm.body import SymmetricHull
    from knorm.walks.chains import default_params
    from knorm.walks.sampler import rounding_of

    frame = rounding_of(SymmetricHull(F)).frame
    params = default_params("billiard", frame)

    def chains():
        return [Chain(frame, np.zeros(frame.r), np.random.default_rng(s)) for s in (1, 2, 3)]

    here = chains()
    rec = run_chains(here, "billiard", 60, 3, params, workers=2)
    with ProcessPoolExecutor(max_workers=2) as ex:
        there = chains()
        run_chains(there, "billiard", 60, 3, params, workers=ex)
    for c, d, x in zip(here, there, rec):
        want = frame.gauges(x, frame.crash_basis())[0]
        assert c.record_gauges.shape == (20,) and np.all(want > 0)
        np.testing.assert_allclose(c.record_gauges, want, rtol=1e-9, atol=0)
        np.testing.assert_array_equal(d.record_gauges, c.record_gauges)
    run_chains(here, "hit_and_run", 4, 1, np.array([np.inf]), workers=1)
    assert all(c.record_gauges is None for c in here)
