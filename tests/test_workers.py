"""``workers=`` bounds the threads knorm starts; the default is the CPUs the process may use
(its affinity), at most NUMBA_NUM_THREADS, never os.cpu_count() when those say less."""

import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from cli_helpers import run

from knorm import KNormMechanism, NIMechanism, Sampler, recommend
from knorm.walks import chains as chains_module
from knorm.walks.chains import Chain, default_workers

F = np.random.default_rng(3).choice([-1.0, 1.0], size=(5, 14))  # a general polytope: MCMC, no exact structure


def cpus(monkeypatch, k, numba=None):
    """Pretend this process may run on ``k`` CPUs (of 64), with NUMBA_NUM_THREADS ``numba``."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(k)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    if numba is None:
        monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("NUMBA_NUM_THREADS", str(numba))


@pytest.fixture
def threads(monkeypatch):
    """Record every thread a chain step runs on, the most chains running at once, and every
    thread pool the chain runner makes (its max_workers)."""
    seen = {"threads": set(), "pools": [], "running": 0, "most": 0}
    lock = threading.Lock()
    real_run = Chain.run

    def recording_run(self, *args, **kwargs):
        with lock:
            seen["threads"].add(threading.get_ident())
            seen["running"] += 1
            seen["most"] = max(seen["most"], seen["running"])
        try:
            return real_run(self, *args, **kwargs)
        finally:
            with lock:
                seen["running"] -= 1

    class RecordingPool(ThreadPoolExecutor):
        def __init__(self, max_workers=None, *args, **kwargs):
            seen["pools"].append(max_workers)
            super().__init__(max_workers, *args, **kwargs)

    monkeypatch.setattr(Chain, "run", recording_run)
    monkeypatch.setattr(chains_module, "ThreadPoolExecutor", RecordingPool)
    return seen


def only_this_thread(seen):
    return seen["threads"] == {threading.get_ident()} and seen["pools"] == []


def test_the_default_is_the_affinity_capped_by_numba_num_threads(monkeypatch):
    cpus(monkeypatch, 1)
    assert default_workers() == 1  # one core allowed of 64: 1, not os.cpu_count()
    cpus(monkeypatch, 6)
    assert default_workers() == 6
    cpus(monkeypatch, 6, numba=1)
    assert default_workers() == 1
    cpus(monkeypatch, 6, numba=4)
    assert default_workers() == 4
    cpus(monkeypatch, 2, numba=16)  # NUMBA_NUM_THREADS never raises it past the CPUs allowed
    assert default_workers() == 2


def test_without_an_affinity_call_the_default_is_the_cpu_count(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS, Windows
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    assert default_workers() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown
    assert default_workers() == 1


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_numba_num_threads_is_one_line_naming_it(monkeypatch, value):
    cpus(monkeypatch, 4, numba=value)
    with pytest.raises(ValueError, match="NUMBA_NUM_THREADS") as e:
        default_workers()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("k, numba", [(1, None), (8, 1)])
def test_the_default_on_one_cpu_runs_every_chain_in_the_calling_thread(monkeypatch, threads, k, numba):
    cpus(monkeypatch, k, numba)
    x = Sampler(F, rng=1).sample(200)  # rounding, warm-up and the run: every chain step
    assert x.shape == (200, 5) and only_this_thread(threads)


def test_the_default_starts_at_most_one_thread_per_allowed_cpu(monkeypatch, threads):
    cpus(monkeypatch, 3)
    Sampler(F, chains=8, rng=1).sample(200)
    assert threads["pools"] and set(threads["pools"]) == {3} and threads["most"] <= 3


def test_workers_bounds_the_threads_whatever_the_cpus(monkeypatch, threads):
    cpus(monkeypatch, 16)
    Sampler(F, chains=8, rng=1, workers=2).sample(200)
    assert set(threads["pools"]) == {2} and threads["most"] <= 2


def test_workers_1_runs_in_the_calling_thread_everywhere(monkeypatch, threads):
    """Sampler, the mechanisms (NIM's plan included) and recommend's Monte Carlo: no pool,
    no other thread, on a machine that would otherwise get 16."""
    cpus(monkeypatch, 16)
    Sampler(F, rng=1, workers=1).sample(100)
    KNormMechanism(F, epsilon=1.0, rng=2, sampler_options={"workers": 1}).sample_noise(50)
    NIMechanism(F, epsilon=1.0, rng=3, sampler_options={"workers": 1}).sample_noise(50)
    rec = recommend(F, epsilon=1.0, rng=4, n_samples=200, workers=1)
    rec.mechanism.sample_noise(10)  # the chosen mechanism (K-norm or NIM, built afresh) keeps the bound
    assert rec.best in ("knorm", "nim") and only_this_thread(threads)


def test_recommend_takes_workers_once(monkeypatch):
    opts = {"sampler_options": {"workers": 2}}
    with pytest.raises(ValueError, match="workers") as e:
        recommend(F, epsilon=1.0, workers=1, mechanism_options=opts)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"mechanism_options\['sampler_options'\]: workers"):
        recommend(F, epsilon=1.0, mechanism_options={"sampler_options": {"workers": 0}})


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", [2]])
def test_bad_workers_are_one_line_naming_workers(bad):
    calls = [lambda: Sampler(F, workers=bad),
             lambda: KNormMechanism(F, epsilon=1.0, sampler_options={"workers": bad}),
             lambda: NIMechanism(F, epsilon=1.0, sampler_options={"workers": bad}),
             lambda: recommend(F, epsilon=1.0, workers=bad)]
    for call in calls:
        with pytest.raises(ValueError, match="workers must be") as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("command", [["sample"], ["uniform"], ["info"], ["plot", "chains", "--out", "f.png"],
                                     ["bench", "oracles"]])
def test_every_sampling_subcommand_takes_workers_and_refuses_a_bad_one(command, capsys):
    rc, out, err = run([*command, "--workers", "0"], capsys)
    assert rc == 2 and not out and err.count("\n") == 1 and "--workers" in err and "positive integer" in err


def test_knorm_info_with_workers_1_samples_in_the_calling_thread(monkeypatch, threads, capsys):
    cpus(monkeypatch, 16)
    rc, out, _ = run(["info", "--d", "5", "--n", "14", "--workers", "1", "--vollb-max-dim", "5"], capsys)
    assert rc == 0 and "VolLB" in out and threads["threads"] and only_this_thread(threads)


def test_knorm_sample_with_workers_1_samples_in_the_calling_thread(monkeypatch, threads, capsys):
    cpus(monkeypatch, 16)
    for mechanism in ("knorm", "nim", "auto"):
        rc, _, _ = run(["sample", "--d", "5", "--n", "14", "--count", "50", "--mechanism", mechanism,
                        "--workers", "1", "--quiet"], capsys)
        assert rc == 0
    assert threads["threads"] and only_this_thread(threads)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or shutil.which("taskset") is None,
                    reason="needs Linux's taskset")
def test_under_taskset_one_cpu_the_default_is_one():
    code = "from knorm.walks.chains import default_workers; print(default_workers())"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, timeout=600)
    assert out.stdout.strip() == "1"


def test_a_run_chains_object_of_knorm_0x_runs_every_step_in_the_calling_thread(threads):
    """The 0.x protocol (an object with ``run_chains``) gets the chains' runs; what knorm does in
    threads of its own beside them (the walk's length scale: body_radius's grouped solves) runs in
    the calling thread, as for any executor (it used to take the object for a thread count)."""
    calls = []

    class Legacy:
        def run_chains(self, cs, walk, steps, thin, params):
            calls.append(len(cs))
            return np.stack([c.run(walk, steps, thin, params) for c in cs])

    z = Sampler(F, rng=1, workers=Legacy()).sample(100)
    assert z.shape == (100, F.shape[0]) and calls
    assert threads["threads"] <= {threading.get_ident()} and threads["pools"] == []
