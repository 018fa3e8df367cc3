"""knorm.budget_ledger.FileAccountant: a budget that persists in a file, shared safely by processes."""

import json
import multiprocessing as mp
import os
import signal
import stat
import time
import warnings

import numpy as np
import pytest

import knorm
from knorm.errors import LargeEpsilonWarning
from knorm.budget_ledger import FileAccountant
from knorm.privacy import BudgetAccountant, BudgetExceededError, PrivacyClaim

STEP = 2.0**-7  # sums of these are exact in float64: totals compared with ==


def _lines(path):
    return path.read_text().splitlines()


def test_created_private_with_its_budget_and_reopened(tmp_path):
    path = tmp_path / "new" / "deeper" / "survey.ledger"
    acc = FileAccountant(path, epsilon=1.0, delta=1e-6)
    assert isinstance(acc, BudgetAccountant)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (tmp_path / "new", tmp_path / "new" / "deeper"):  # the folders it created: 0700
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    header = json.loads(_lines(path)[0])
    assert header["knorm_budget_ledger"] == 1 and header["epsilon"] == 1.0 and header["delta"] == 1e-6
    again = FileAccountant(path)  # the budget comes from the file
    assert (again.epsilon, again.delta) == (1.0, 1e-6)
    assert FileAccountant(path, epsilon=1.0).epsilon == 1.0  # the same budget restated: fine
    with pytest.raises(ValueError, match="epsilon = 2 differs"):
        FileAccountant(path, epsilon=2.0)
    with pytest.raises(ValueError, match="give epsilon"):
        FileAccountant(tmp_path / "none.ledger")
    with pytest.raises(ValueError, match="folder"):
        FileAccountant(tmp_path, epsilon=1.0)
    with pytest.raises(ValueError, match="finite"):
        FileAccountant(tmp_path / "inf.ledger", epsilon=float("inf"))
    with pytest.raises(ValueError, match="epsilon"):
        FileAccountant(tmp_path / "neg.ledger", epsilon=-1.0)
    with pytest.raises(TypeError, match="path"):
        FileAccountant(3.0, epsilon=1.0)
    with pytest.raises(ValueError, match="never reset"):
        again.reset()


def test_releases_recorded_with_claims_and_refused_before_drawing(tmp_path):
    path = tmp_path / "x.ledger"
    F = knorm.workloads.marginals((2, 3), 1)
    x = np.array([3, 1, 4, 1, 5, 9.0])
    mech = knorm.LaplaceMechanism(F, epsilon=0.25, rng=1, accountant=FileAccountant(path, epsilon=1.0))
    for _ in range(4):
        mech.release(x)
    other = knorm.GaussianMechanism(F, epsilon=0.5, delta=1e-9, rng=2, accountant=FileAccountant(path))
    state = other.rng.bit_generator.state if hasattr(other, "rng") else None
    with pytest.raises(BudgetExceededError):
        other.release(x)
    assert other.answers == 0  # refused before anything was drawn or counted
    if state is not None:
        assert other.rng.bit_generator.state == state
    fresh = FileAccountant(path)  # a new process would see the same
    assert fresh.total == (1.0, 0.0)
    assert len(fresh.spends) == 4
    claim = fresh.spends[0].claim
    assert isinstance(claim, PrivacyClaim) and claim.mechanism == "Laplace" and claim.epsilon == 0.25
    assert all(json.loads(line)["label"] == "Laplace" for line in _lines(path)[1:])
    assert "3, 1, 4" not in path.read_text()  # claims only: no data, no answers


def _spender(path, k, result):
    acc = FileAccountant(path)
    done = 0
    for _ in range(k):
        try:
            acc.spend(STEP, label=f"pid {os.getpid()}")
            done += 1
        except BudgetExceededError:
            pass
    result.put(done)


@pytest.mark.parametrize("budget_steps, want", [(100, 100), (50, 50)])
def test_concurrent_writers_lose_nothing_and_never_pass_the_budget(tmp_path, budget_steps, want):
    """4 processes × 25 spends at once: every one recorded (budget 100 steps), or exactly the budget's
    50 (budget 50 steps); the totals exact."""
    path = tmp_path / "shared.ledger"
    FileAccountant(path, epsilon=budget_steps * STEP)
    ctx = mp.get_context("fork")
    result = ctx.Queue()
    procs = [ctx.Process(target=_spender, args=(path, 25, result)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert sum(result.get(timeout=10) for _ in procs) == want
    acc = FileAccountant(path)
    assert len(acc.spends) == want and len(_lines(path)) == want + 1
    assert acc.total == (want * STEP, 0.0)
    assert len({s.label for s in acc.spends}) == 4 if want == 100 else True
    with pytest.raises(BudgetExceededError):
        acc.spend(STEP)


def _spend_forever(path):
    acc = FileAccountant(path)
    while True:
        acc.spend(STEP)


def test_a_killed_writer_leaves_a_ledger_that_loads_with_every_completed_entry(tmp_path):
    path = tmp_path / "killed.ledger"
    FileAccountant(path, epsilon=1e6)
    proc = mp.get_context("fork").Process(target=_spend_forever, args=(path,))
    proc.start()
    deadline = time.time() + 60
    while len(_lines(path)) < 30 and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    text = path.read_text()
    complete = text.count("\n") - 1  # entries ending in a newline: each spend that returned
    acc = FileAccountant(path)
    assert complete >= 29 and len(acc.spends) == complete
    assert acc.total[0] == complete * STEP


def test_a_torn_last_line_is_ignored_then_cut_and_a_damaged_one_refused(tmp_path):
    path = tmp_path / "torn.ledger"
    acc = FileAccountant(path, epsilon=1.0)
    acc.spend(STEP)
    with open(path, "a") as f:
        f.write('{"epsilon": 0.5, "del')  # a writer killed mid-line
    assert FileAccountant(path).total == (STEP, 0.0)
    acc.spend(STEP)
    assert [json.loads(line)["epsilon"] for line in _lines(path)[1:]] == [STEP, STEP]
    with open(path, "a") as f:
        f.write("not json\n")
    with pytest.raises(ValueError, match="line 4 is not a ledger entry"):
        FileAccountant(path)
    path.write_text("hello\n")
    with pytest.raises(ValueError, match="line 1 is not a knorm budget ledger"):
        FileAccountant(path)


def test_large_epsilon_warns_and_the_claim_says_so():
    with pytest.warns(LargeEpsilonWarning, match="essentially exact"):
        mech = knorm.LaplaceMechanism(np.eye(2), epsilon=1e12)
    assert "essentially exact" in str(mech.privacy_per_answer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = knorm.LaplaceMechanism(np.eye(2), epsilon=20.0)  # the threshold itself: no warning
    assert "essentially exact" not in str(small.privacy_per_answer.composed(30))  # 30 answers at ε = 20 each
    assert "essentially exact" not in str(small.privacy_per_answer)
