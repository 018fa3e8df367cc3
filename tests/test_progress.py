"""knorm._progress: a release's stages (rounding, warm-up, draws) as bars with their counts, a rough
time for a slow stage, and ``progress=True`` in a mechanism's sampler_options."""

import io

import numpy as np
import pytest

import knorm
from knorm import workloads as W
from knorm._progress import StageProgress, as_progress, rough_time
from knorm.mechanisms import KNormMechanism, NIMechanism
from knorm.mechanisms.knorm_mechanism import check_sampler_options


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_each_stage_is_a_bar_with_its_count_and_a_slow_one_says_how_long():
    out, clock = io.StringIO(), Clock()
    p = StageProgress(True, "knorm ε=1", file=out, clock=clock)
    p.rounding(0, 40)
    clock.t = 2.0
    p.rounding(0.5, 40)  # 4 s an iteration: 6 s for the usual 1.5, 2 + 39.5·4 s at most, said once
    p.rounding(6, 40)
    p.warmup(100, 400)  # a new stage: a new bar, and a new clock
    clock.t = 2.5
    p.warmup(400, 400)
    p(256, 2048)
    clock.t = 3.0
    p(2048, 2048)
    p(2048, 2048)  # a pool extended past its target: nothing new
    p.close()
    text = out.getvalue()
    for shown in ("knorm ε=1: rounding K", "/40", "iteration", "knorm ε=1: warm-up", "/400", "step",
                  "knorm ε=1: draws (run 1)", "/2048", "draw"):
        assert shown in text, shown
    # one estimate per bar, the postfix's (never tqdm's own remaining time: for a rounding it would count
    # all 40 allowed iterations, 2 + 39.5·4 s), and a rounding's count in whole iterations (issue 44)
    assert "iteration 1 of at most 40, about 4 s left if it stops after 1-2 iterations as most do" in text
    assert "iteration 7 of at most 40" in text and "0.5/40" not in text and "<" not in text
    assert not [line for line in text.replace("\r", "\n").splitlines() if line.startswith("knorm: ")]
    assert "run 2" not in text and p.runs == 1


def test_a_stage_that_opens_with_records_it_holds_rates_only_its_own():
    """A certification pool may open with a kept pilot's 500 records, which took no time in this
    stage: 300 more in 2 s make 1,200 left 8 s, 10 s in all (not 2000·2/800 = 5 s)."""
    out, clock = io.StringIO(), Clock()
    p = StageProgress(True, "release", file=out, clock=clock)
    p.certify(500, 2000)
    clock.t = 2.0
    p.certify(800, 2000)
    p.close()
    assert "800/2000 records, about 8 s left" in out.getvalue()


def test_a_new_run_of_the_sampler_is_a_new_pool_bar():
    out = io.StringIO()
    p = StageProgress(True, "nim", file=out)
    p(1000, 2000)
    p(2000, 2000)
    p(500, 2000)  # fewer than before: the next run
    p.close()
    assert "nim: draws (run 2)" in out.getvalue() and p.runs == 2


def test_disabled_shows_nothing():
    out = io.StringIO()
    p = StageProgress(False, file=out)
    p.rounding(1, 10)
    p.warmup(1, 10)
    p(1, 10)
    p.close()
    assert out.getvalue() == "" and p.bar is None


def test_rough_times():
    assert [rough_time(s) for s in (0.2, 40, 200, 7200)] == ["about 1 s", "about 40 s", "about 3 min", "about 2.0 h"]


def test_progress_true_in_sampler_options_is_a_stage_reporter():
    assert isinstance(check_sampler_options({"progress": True})["progress"], StageProgress)
    assert "progress" not in check_sampler_options({"progress": False})
    f = print
    assert as_progress(f) is f and as_progress(None) is None
    with pytest.raises(ValueError, match=r"sampler_options\['progress'\]: progress must be True, False, None or "
                                         "callable"):
        KNormMechanism(np.eye(2), epsilon=1.0, sampler_options={"progress": "yes"})


def test_a_python_release_with_progress_true_shows_its_stages(capsys):
    F = W.random_pm1(4, 10, rng=0)
    m = KNormMechanism(F, epsilon=1.0, rng=3, body=knorm.SymmetricHull(F), sampler_options={"progress": True})
    m.release(np.arange(10), size=3)  # a fresh body: it is rounded and certified here
    err = capsys.readouterr().err
    assert "knorm: rounding K" in err and "knorm: certifying the walk" in err
    assert "knorm: draws (run 1, each W = " in err
    seeded = KNormMechanism(F, epsilon=1.0, rng=3).release(np.arange(10), size=3)  # the bars change no draw
    again = KNormMechanism(F, epsilon=1.0, rng=3, sampler_options={"progress": True}).release(np.arange(10), size=3)
    assert np.array_equal(seeded, again)
    NIMechanism(F, epsilon=1.0, rng=3, sampler_options={"progress": True}).release(np.arange(10))
    assert "draws (run 1" in capsys.readouterr().err


def test_prepare_with_progress_true_shows_its_stages_as_documented(tmp_path, capsys):
    """Issue 34: ``knorm.prepare(F, path, progress=True)`` (its docstring, getting-started) crashed after
    the rounding with "'bool' object is not callable"; it shows the rounding's and the certification's
    stages, and writes the same file as without bars."""
    F = W.random_pm1(4, 10, rng=0)
    w = knorm.prepare(F, tmp_path / "w.knorm", progress=True, chains=4)
    err = capsys.readouterr().err
    assert "knorm: rounding K" in err and "knorm: certifying the walk" in err, err
    plain = knorm.prepare(F, tmp_path / "v.knorm", chains=4)
    assert w.certified.certificate == plain.certified.certificate
    assert (tmp_path / "w.knorm").read_bytes() == (tmp_path / "v.knorm").read_bytes()


def test_an_open_bar_is_redrawn_between_reports(monkeypatch):
    """The elapsed time of a stage moves while the sampler works between two reports."""
    import time

    from knorm import _progress

    monkeypatch.setattr(_progress, "TICK", 0.05)
    out = io.StringIO()
    p = StageProgress(True, "knorm", file=out)
    p(0, 100)
    before = out.getvalue().count("\r")

    def soon(cond, limit=60.0):  # polls: a loaded machine only makes it slower, never wrong (issue 34)
        end = time.monotonic() + limit
        while not cond() and time.monotonic() < end:
            time.sleep(0.01)
        return cond()

    assert soon(lambda: out.getvalue().count("\r") > before + 2)  # redrawn with no report
    p.close()
    assert soon(lambda: p._ticker is None)  # no bar open: the ticker ended


def test_plain_lines_say_a_long_stage_s_count_at_most_every_minute():
    out, clock = io.StringIO(), Clock()
    p = StageProgress(True, "prepare", file=out, clock=clock, plain=True)
    p.rounding(0, 8)  # the stage opens: one line
    for t, it in ((30.0, 1), (61.0, 2), (62.0, 3), (130.0, 4), (200.0, 4.194175)):  # the last: a share, said whole
        clock.t = t
        p.rounding(it, 8)
    clock.t = 210.0
    p.rounding(8, 8)
    lines = out.getvalue().splitlines()
    assert lines == ["prepare: rounding K: at most 8 iterations",
                     "prepare: rounding K: 2 of at most 8 iterations done in 61 s",
                     "prepare: rounding K: 4 of at most 8 iterations done in 130 s",
                     "prepare: rounding K: 4 of at most 8 iterations done in 200 s",
                     "prepare: rounding K: done, 8 iterations in 210.0 s"]


def test_a_public_pool_extended_past_its_target_says_so():
    """A certification's pool that R-hat extends (its sampler reports the new target first) goes on
    as the same stage: a line with the new total in plain mode, a bar that starts at the count so far."""
    out, clock = io.StringIO(), Clock()
    p = StageProgress(True, "prepare", file=out, clock=clock, plain=True)
    p.certify(0, 2000)
    clock.t = 100.0
    p.certify(2000, 2000)
    p.certify(2000, 2496)
    clock.t = 130.0
    p.certify(2496, 2496)
    assert out.getvalue().splitlines() == [
        "prepare: certifying the walk (once per workload): 2000 records",
        "prepare: certifying the walk (once per workload): done, 2000 of 2000 records in 100.0 s",
        "prepare: certifying the walk (once per workload): more records, 2496 in all (2000 so far)",
        "prepare: certifying the walk (once per workload): done, 2496 of 2496 records in 30.0 s"]
    bars = io.StringIO()
    p = StageProgress(True, "prepare", file=bars)
    p(2000, 2000)
    p(2000, 2496)
    assert p.bar.n == 2000 and p.bar.total == 2496 and p.runs == 1
    p.close()


def test_a_prepare_says_up_front_roughly_how_long_it_takes():
    """Issue 44: one line before the rounding, from the rank and the cells (a fit to the measured
    prepares: census rank 332 over 57,600 cells took 5,422 s on 2 cores; rank 95 over 1,152 cells 28 s),
    sharing the chain work over min(chains, threads) cores; none for an exact body (nothing to round)."""
    from knorm.walks.prepared import prepare_estimate

    census = prepare_estimate(332, 57_600, 2)
    assert census.startswith("rank 332, 57600 cells: the rounding and the certification roughly 1.6 h on 2 cores")
    assert "roughly 25 min on 8 cores" in prepare_estimate(332, 57_600, 8)
    assert "on 8 cores" in prepare_estimate(332, 57_600, 64)  # 8 chains keep 8 cores busy
    assert "roughly 29 s" in prepare_estimate(95, 1152, 2)
    out = io.StringIO()
    p = StageProgress(True, "prepare", file=out, plain=True)
    knorm.prepare(W.marginals([2, 3, 4], 2), progress=p, workers=1)
    p.close()
    lines = out.getvalue().splitlines()
    assert "prepare: recommend's ε-free rows: every mechanism's expected error" in "\n".join(lines)
    done = [i for i, line in enumerate(lines) if line.startswith("prepare: recommend's rows: done in ")]
    # then where the time went (knorm.walks.ledger): a line per stage, the totals, the projection
    assert len(done) == 1 and lines[done[0] + 1].startswith("prepare: stage body: ")
    assert lines[-2].startswith("prepare: serial ") and "the longest chain ran" in lines[-2]
    assert lines[-1].startswith("prepare: projected (chain CPU over the cores, plus the serial seconds; not a "
                                "measurement): ")
    assert lines[-1].endswith(" on 8 or more cores (8 chains: more cores do not help; --chains N)")
    first = out.getvalue().splitlines()[0]
    assert first.startswith("prepare: rank 18, 24 cells: the rounding and the certification roughly")
    assert "on 1 core (a fit" in first
    out = io.StringIO()
    knorm.prepare(np.eye(3), progress=StageProgress(True, "prepare", file=out, plain=True), recommend=False)
    assert "roughly" not in out.getvalue()


def test_a_rounding_that_stops_early_closes_at_the_iterations_it_ran():
    """Issue 50: the bar said "iteration 3 of at most 8" and closed at "8 iterations" while the summary
    said 2. A rounding that stops reports ``(k, k)``: the bar and the plain lines end at k."""
    for plain in (False, True):
        out, clock = io.StringIO(), Clock()
        p = StageProgress(True, "prepare", file=out, clock=clock, plain=plain)
        p.rounding(0, 8)
        p.rounding(1.5, 8)
        clock.t = 3.0
        p.rounding(2, 8)
        p.rounding(2, 2)  # stopped after 2
        p.close()
        text = out.getvalue()
        assert "8 iterations" not in text.replace("at most 8 iterations", "")
        assert ("prepare: rounding K: done, 2 iterations in 3.0 s" in text) if plain else ("| 2 iterations" in text)
        assert "iteration 2 of at most 8" in text or plain
    out = io.StringIO()
    p = StageProgress(True, "prepare", file=out, plain=True)
    p.rounding(0, 8)
    p.rounding(8, 8)  # ran them all
    assert out.getvalue().splitlines()[-1].startswith("prepare: rounding K: done, 8 iterations in ")


def test_a_real_rounding_reports_the_iterations_it_ran_last():
    from knorm.walks.rounding import round_body

    F = W.random_pm1(4, 10, rng=0)
    calls = []
    rnd = round_body(knorm.SymmetricHull(F).frame, chains=8, progress=lambda done, total: calls.append((done, total)))
    assert rnd.iterations < 8 and calls[0] == (0, 8) and calls[-1] == (rnd.iterations, rnd.iterations)
    assert all(t == 8 for _, t in calls[:-1])


def test_a_release_s_bars_say_the_w_its_claim_states():
    """Issue 50: the warm-up bar showed 27/27 where the claim said W = 29: that warm-up was the
    certification's (20τ at the rounding's τ), W the certificate's (20τ at the pool's bound). Each is
    labelled as what it is, and the release's draws say the claim's W (there is no other warm-up)."""
    F = W.marginals([2, 3, 4], 2)
    out = io.StringIO()
    p = StageProgress(True, "knorm", file=out, plain=True)
    m = KNormMechanism(F, epsilon=1.0, rng=3, body=knorm.SymmetricHull(F), sampler_options={"progress": p})
    m.release(np.arange(F.shape[1]), size=3)
    m.release(np.arange(F.shape[1]), size=5)
    p.close()
    w = m.privacy.details["certificate"]["warmup"]
    text = out.getvalue()
    assert f"knorm: draws (run 1, each W = {w} steps after its chain's last): done, 3 of 3 draws" in text, text
    assert f"knorm: draws (run 2, each W = {w} steps after its chain's last): done, " in text, text  # the bank's
    assert "knorm: certification's warm-up (20τ, the rounding's τ): " in text and "knorm: warm-up" not in text


@pytest.mark.parametrize("columns", [80, 120])
def test_a_bar_survives_a_narrow_terminal(columns):
    """Issue 50: at 120 columns the rounding's description and text squeezed its bar to one column
    (and tqdm cut the line's end). The text's tail, then the description, give way: every line fits
    and the bar keeps MIN_BAR columns; at 200 nothing is cut."""
    from knorm._progress import MIN_BAR

    for stage in ("rounding", "release"):
        out, clock = io.StringIO(), Clock()
        p = StageProgress(True, "knorm ε=1", file=out, clock=clock, width=columns)  # a terminal's width
        if stage == "rounding":
            p.rounding(0, 8)
            clock.t = 2.0
            p.rounding(0.5, 8)
        else:
            p.release(3, 10, 29)
        lines = [line for line in out.getvalue().split("\r") if line.strip()]
        p.close()
        last = lines[-1]
        assert len(last) <= columns, last
        bar = last.split("|")[1]
        assert len(bar) >= MIN_BAR, last
        assert last.startswith("knorm ε=1: "), last
        if stage == "rounding":
            assert "| iteration 1 of at most 8, about" in last, last
        else:
            assert "| 3/10 draws [" in last, last
    out = io.StringIO()
    p = StageProgress(True, "knorm ε=1", file=out, clock=Clock(), width=200)
    p.release(3, 10, 29)
    assert "knorm ε=1: draws (run 1, each W = 29 steps after its chain's last):" in out.getvalue()
    p.close()
