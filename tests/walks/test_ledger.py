"""A prepare's account of its stages (knorm.walks.ledger): chain steps per stage from the algorithm's
own schedule, serial seconds, and the projection's arithmetic (issue 43)."""

import math

import numpy as np
import pytest

from knorm import prepare, workloads
from knorm.walks import ledger
from knorm.walks.certify import N_STATES, certify_pool
from knorm.walks.rounding import TAU_GUESS, WARMUP_CHAINS, WARMUP_TAUS
from knorm.walks.sampler import WARMUP_TAUS as SAMPLER_WARMUP_TAUS

F = workloads.marginals((2, 3, 4), 2)  # rank 18: rounded and certified by MCMC


@pytest.fixture(scope="module", params=[8, 24])
def prepared(request):
    return request.param, prepare(F, chains=request.param, workers=2, recommend=False)


def test_each_stage_counts_the_steps_its_schedule_runs(prepared):
    chains, w = prepared
    st = {s["stage"]: s for s in w.stages["stages"]}
    assert list(st) == ["body", "rounding", "end-point bases", "certification: set-up", "certification: warm-up",
                        "certification: pool", "certification: states and measures", "file"]
    rnd, cert = w.rounding, w.certificate
    # the rounding: its first warm-up (20 steps per chain up to 8 chains, 160 shared beyond), then every
    # iteration's records, one per step (rounding.round_body)
    first = math.ceil(WARMUP_TAUS * TAU_GUESS * min(1.0, WARMUP_CHAINS / chains))
    assert st["rounding"]["steps_per_chain"] == first + sum(rnd.records)
    # the certification: ⌈20τ⌉ steps with the rounding's τ (Sampler._warm_up), at least the pool's records
    # per chain at its thinning, then 2·thin steps per round of states until N_STATES are taken
    assert st["certification: warm-up"]["steps_per_chain"] == math.ceil(SAMPLER_WARMUP_TAUS * rnd.tau)
    per_chain = cert.pool // chains
    assert st["certification: pool"]["steps_per_chain"] >= -(-certify_pool(chains) // chains) * cert.pool_thin
    assert st["certification: pool"]["steps_per_chain"] >= per_chain * cert.pool_thin
    assert st["certification: states and measures"]["steps_per_chain"] == \
        -(-N_STATES // chains) * 2 * cert.pool_thin
    for s in st.values():  # every chain of every batch runs the batch's steps
        assert s["chain_steps"] == chains * s["steps_per_chain"]
        assert 0 <= s["serial_s"] <= s["wall_s"] + 1e-9
    assert w.stages["longest_chain_steps"] == sum(s["steps_per_chain"] for s in st.values())
    assert w.stages["serial_s"] == pytest.approx(sum(s["serial_s"] for s in st.values()), abs=0.01)


def test_the_projection_is_the_batches_cpu_over_the_cores_plus_the_serial_seconds():
    t = iter(np.arange(100.0))  # a clock: each reading one second later
    led = ledger.Ledger(clock=lambda: next(t), cpu_clock=lambda: 0.0)
    with led:
        ledger.mark("a")  # opened at 0
        led.batch(64, 10, wall=0.5, cpu=64.0, local=True)
        led.batch(8, 3, wall=0.25, cpu=8.0, local=True)
        ledger.mark("b")  # a closed at 1: wall 1, serial 1 − 0.75
        led.batch(64, 5, wall=0.5, cpu=32.0, local=True)
    # b closed at 3 (the mark read 2): wall 1, serial 0.5
    sm = led.summary()
    assert [s["stage"] for s in sm["stages"]] == ["a", "b"]
    assert sm["stages"][0]["serial_s"] == 0.25 and sm["stages"][1]["serial_s"] == 0.5
    assert sm["longest_chain_steps"] == 18
    for p in (8, 16, 64):
        expect = 64 * math.ceil(64 / p) / 64 + 8 * math.ceil(8 / p) / 8 + 32 * math.ceil(64 / p) / 64 + 0.75
        assert led.projection(p) == pytest.approx(expect)
    assert sm["projected_s"]["64"] == pytest.approx(1 + 1 + 0.5 + 0.75, abs=0.05)


def test_a_remote_batch_leaves_no_projection_and_marks_do_nothing_without_a_ledger():
    ledger.mark("nowhere")  # no active ledger: nothing happens
    assert ledger.active() is None
    with ledger.Ledger() as led:
        led.batch(4, 2, wall=0.1, cpu=0.0, local=False)
    assert led.projection(8) is None and led.summary()["projected_s"] == {"8": None, "16": None, "64": None}
    assert led.stages[0].name == "other"
    assert ledger.active() is None


def test_the_projection_line_says_why_more_cores_do_not_help():
    """Issue 50: 8 chains keep at most 8 cores busy, so the projection to 8, 16 and 64 cores is one number:
    said once, with the reason and the way out, not "46.4 s on 8 cores, 46.4 s on 16 cores, 46.4 s on 64 cores"."""
    t = iter(np.arange(100.0))
    led = ledger.Ledger(clock=lambda: next(t), cpu_clock=lambda: 0.0)
    with led:
        ledger.mark("a")
        led.batch(8, 10, wall=0.5, cpu=400.0, local=True)
    sm = led.summary()
    assert sm["chains"] == 8 and len(set(sm["projected_s"].values())) == 1
    line = ledger.summary_lines(sm)[-1]
    assert line.endswith(f": {sm['projected_s']['8']:.3g} s on 8 or more cores (8 chains: more cores do not help; "
                         "--chains N)"), line
    assert "16 cores" not in line and "64 cores" not in line
    led = ledger.Ledger(clock=lambda: next(t), cpu_clock=lambda: 0.0)
    with led:
        ledger.mark("a")
        led.batch(16, 10, wall=0.5, cpu=160.0, local=True)
    sm = led.summary()
    line = ledger.summary_lines(sm)[-1]  # 16 chains: 8 cores take twice as long, 16 and 64 the same
    p8, p16 = sm["projected_s"]["8"], sm["projected_s"]["16"]
    assert f"{p8:.3g} s on 8 cores, {p16:.3g} s on 16 or more cores (16 chains" in line and "64 cores" not in line
    assert ledger.projection_text({"8": 5.0, "16": 3.0, "64": 1.0}, 64) == \
        "5 s on 8 cores, 3 s on 16 cores, 1 s on 64 cores"
