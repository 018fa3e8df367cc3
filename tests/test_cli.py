"""The knorm command line: outputs, summaries, errors, atomicity, resume, Dask."""

import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from knorm import cli


from cli_helpers import interrupt_progress, run  # noqa: E402


SMALL = ["--d", "6", "--n", "20"]


def test_sample_writes_npy_and_prints_summary(tmp_path, capsys):
    out = tmp_path / "noise.npy"
    rc, stdout, _ = run(["sample", *SMALL, "--count", "300", "--out", str(out)], capsys)
    assert rc == 0
    arr = np.load(out)
    assert arr.shape == (300, 6)
    assert "R-hat" in stdout and "samples/s" in stdout and "approximate (MCMC sampling)" in stdout
    assert "no data touched" in stdout and "NOT PRIVATE" not in stdout


def test_sample_npz_carries_the_privacy_claim(tmp_path, capsys):
    out = tmp_path / "r.npz"
    np.save(tmp_path / "x.npy", np.arange(20.0))
    rc, _, _ = run(["sample", *SMALL, "--mechanism", "laplace", "--epsilon", "0.5", "--count", "5",
                    "--data", str(tmp_path / "x.npy"), "--out", str(out)], capsys)
    assert rc == 0
    with np.load(out) as z:
        assert z["samples"].shape == (5, 6)
        claim = json.loads(str(z["privacy"]))
        summary = json.loads(str(z["summary"]))
        per_answer = json.loads(str(z["privacy_per_answer"]))
    # the total claim of 5 answers on the same x: basic composition, 5 × 0.5
    assert claim["mechanism"] == "Laplace" and claim["epsilon"] == pytest.approx(2.5) and claim["answers"] == 5
    assert per_answer["epsilon"] == 0.5 and per_answer["answers"] == 1
    assert claim["sampling"] == "exact" and not claim["approximate"] and claim["private"]
    assert claim["noise_source"] == "os-entropy"
    assert summary["output"] == "answers Fx + noise" and summary["data_touched"] and summary["private"]


@pytest.mark.parametrize("mech,extra", [("knorm", []), ("nim", []), ("gaussian", ["--delta", "1e-6"]),
                                        ("laplace", [])])
def test_json_summary_for_every_mechanism(mech, extra, capsys):
    rc, stdout, _ = run(["sample", *SMALL, "--mechanism", mech, *extra, "--count", "50", "--json"], capsys)
    assert rc == 0
    s = json.loads(stdout)
    assert s["count"] == 50 and s["privacy_per_answer"]["epsilon"] == 1.0
    # noise alone touches no data: nothing is spent
    assert s["privacy"]["answers"] == 0 and s["privacy"]["epsilon"] == 0.0 and not s["data_touched"]
    assert s["privacy_per_answer"]["approximate"] == (mech in ("knorm", "nim"))
    assert s["samples_per_second"] > 0
    ee = s["expected_error"]
    assert ee["value"] > 0 and ee["exact"] == (mech == "gaussian")
    if mech in ("knorm", "nim"):
        assert s["diagnostics"]["converged"] and s["diagnostics"]["max_rhat"] < 1.01


def _sample_noise(tmp_path, name, extra, capsys, mech="laplace"):
    out = tmp_path / name
    rc, stdout, err = run(["sample", *SMALL, "--mechanism", mech, "--count", "20", "--out", str(out), *extra],
                          capsys)
    assert rc == 0
    return np.load(out), stdout, err


def test_noise_is_fresh_by_default_and_reproducible_only_when_not_private(tmp_path, capsys):
    a, out_a, err_a = _sample_noise(tmp_path, "a.npy", [], capsys)
    b, _, _ = _sample_noise(tmp_path, "b.npy", [], capsys)
    assert not np.any(a == b)  # two identical commands: independent noise (OS entropy)
    assert "NOT PRIVATE" not in out_a + err_a
    c, out_c, err_c = _sample_noise(tmp_path, "c.npy", ["--nonprivate-seed", "5"], capsys)
    e, _, _ = _sample_noise(tmp_path, "e.npy", ["--nonprivate-seed", "5"], capsys)
    np.testing.assert_array_equal(c, e)
    assert err_c.count("\n") == 1 and "warning" in err_c and "NOT PRIVATE" in err_c
    assert "NOT PRIVATE" in out_c
    # the workload seed changes F, never the noise's privacy
    f, _, _ = _sample_noise(tmp_path, "f.npy", ["--nonprivate-seed", "5", "--workload-seed", "3"], capsys)
    assert f.shape == c.shape


def test_nonprivate_seed_is_recorded_in_json_and_npz(tmp_path, capsys):
    out = tmp_path / "s.npz"
    rc, stdout, _ = run(["sample", *SMALL, "--mechanism", "laplace", "--count", "3", "--nonprivate-seed", "1",
                         "--json", "--out", str(out)], capsys)
    assert rc == 0
    s = json.loads(stdout)
    assert s["noise_source"] == "seed" and s["private"] is False
    assert s["privacy"]["noise_source"] == "seed" and s["privacy"]["private"] is False
    with np.load(out) as z:
        assert json.loads(str(z["summary"]))["private"] is False
        assert json.loads(str(z["privacy"]))["noise_source"] == "seed"


@pytest.mark.parametrize("mech", ["laplace", "knorm", "nim"])
def test_summary_with_data_depends_on_the_seed_not_on_the_data(mech, tmp_path, capsys):
    """With a fixed (non-private) seed, everything but the answers is the same for two data
    sets: the summary holds no statistic of Fx or of the answers."""
    summaries = []
    for i, x in enumerate([np.zeros(20), np.arange(20.0) * 7]):
        np.save(tmp_path / f"x{i}.npy", x)
        rc, stdout, _ = run(["sample", *SMALL, "--mechanism", mech, "--count", "4", "--nonprivate-seed", "2",
                             "--data", str(tmp_path / f"x{i}.npy"), "--json", "--error-estimate"], capsys)
        assert rc == 0
        summaries.append(json.loads(stdout))
    a, b = summaries
    assert not np.allclose(a.pop("answers"), b.pop("answers"))
    assert "mean_l2_noise" not in a and a["expected_error"]["value"] > 0
    for s in (a, b):
        for key in ("seconds", "samples_per_second", "compile_seconds"):
            s.pop(key)
        if s["diagnostics"]:
            s["diagnostics"].pop("sampler_seconds")
    assert a == b


def test_answers_are_never_lost(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones(20))
    base = ["sample", *SMALL, "--mechanism", "laplace", "--count", "3", "--data", str(tmp_path / "x.npy")]
    rc, _, err = run(base, capsys)
    assert rc == 2 and err.count("\n") == 1 and "--data" in err and "--out" in err
    rc, stdout, _ = run([*base, "--json"], capsys)
    s = json.loads(stdout)
    assert rc == 0 and np.asarray(s["answers"]).shape == (3, 6)
    rc, stdout, _ = run([*base, "--json", "--out", str(tmp_path / "a.npy")], capsys)
    assert rc == 0 and "answers" not in json.loads(stdout) and np.load(tmp_path / "a.npy").shape == (3, 6)


def test_total_claim_is_printed(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones(20))
    rc, stdout, _ = run(["sample", *SMALL, "--count", "4", "--epsilon", "0.25", "--data", str(tmp_path / "x.npy"),
                         "--out", str(tmp_path / "a.npy")], capsys)
    assert rc == 0
    total = next(line for line in stdout.splitlines() if line.startswith("privacy (total"))
    assert "4 answers on the same data" in total and "ε = 1;" in total and "approximate (MCMC sampling)" in total
    assert "privacy per answer: ε = 0.25" in stdout
    assert "mean ℓ₂" not in stdout and "nothing computed from the data" in stdout


def test_uncertified_and_not_private_claims_say_so():
    claim = {"mechanism": "K-norm", "epsilon": 2.0, "delta": 0.0, "notion": "pure ε-DP", "approximate": True,
             "certified": False, "answers": 2, "composition": ""}
    lines = cli.sample._privacy_lines({"privacy": claim,
                                       "privacy_per_answer": {**claim, "epsilon": 1.0, "answers": 1},
                                       "private": False, "data_touched": True})
    assert lines[0].startswith("NOT PRIVATE") and "UNCERTIFIED" in lines[1] and "approximate" in lines[1]


def test_accept_uncertified_is_passed_only_when_given(monkeypatch):
    import knorm.mechanisms as M

    seen = []

    class Fake:
        def __init__(self, F, **kw):
            seen.append(kw)

    monkeypatch.setattr(M, "KNormMechanism", Fake)
    parser = cli.build_parser()
    F = np.eye(3)
    cli.sample.build_mechanism("knorm", F, parser.parse_args(["sample"]), None, {})
    cli.sample.build_mechanism("knorm", F, parser.parse_args(["sample", "--accept-uncertified"]), None, {})
    assert "accept_uncertified" not in seen[0] and seen[1]["accept_uncertified"] is True


def test_existing_output_is_kept_without_force(tmp_path, capsys):
    out = tmp_path / "o.npy"
    np.save(out, np.zeros(3))
    rc, _, err = run(["sample", *SMALL, "--count", "10", "--out", str(out)], capsys)
    assert rc == 1 and "--force" in err and err.count("\n") == 1
    np.testing.assert_array_equal(np.load(out), np.zeros(3))
    assert run(["sample", *SMALL, "--count", "10", "--out", str(out), "--force", "--quiet"], capsys)[0] == 0
    assert np.load(out).shape == (10, 6)


def test_interrupted_run_leaves_no_output_and_resumes_identically(tmp_path, capsys, monkeypatch):
    base = ["sample", *SMALL, "--count", "3000", "--nonprivate-seed", "9", "--quiet"]
    want = tmp_path / "want.npy"  # --checkpoint selects the per-run path: the reference has one, uninterrupted
    assert run([*base, "--out", str(want), "--checkpoint", str(tmp_path / "ref")], capsys)[0] == 0

    real = interrupt_progress(monkeypatch, after=2)
    out = tmp_path / "got.npy"
    ck = tmp_path / "ck"
    rc, _, err = run([*base, "--out", str(out), "--checkpoint", str(ck), "--checkpoint-every", "1e-9"], capsys)
    assert rc == 130 and "--resume" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    monkeypatch.setattr(cli._common.Progress, "__call__", real)
    rc, stdout, _ = run([*base, "--out", str(out), "--checkpoint", str(ck), "--resume", "--json"], capsys)
    assert rc == 0 and json.loads(stdout)["resumed_from_checkpoint"]
    np.testing.assert_array_equal(np.load(out), np.load(want))


def test_info_reports_and_recommends(capsys):
    rc, stdout, _ = run(["info", *SMALL, "--delta", "1e-6", "--json"], capsys)
    assert rc == 0
    f = json.loads(stdout)
    assert f["rank"] == 6 and f["l1_sensitivity"] == 6 and f["l2_sensitivity"] == pytest.approx(np.sqrt(6))
    assert f["recommendation"]["mechanism"] == "knorm"
    assert f["vol_lower_bound"]["value"] > 0
    assert set(f["expected_l2_error"]) == {"laplace", "knorm", "gaussian", "nim"}
    table = f["recommend"]["table"]  # recommend's table: every candidate, gaussian because --delta was given
    assert set(table) == {"laplace", "gaussian", "gaussian-svd", "identity", "hierarchical", "p-identity", "knorm",
                          "nim"}
    assert f["recommend"]["best"] == "knorm" == min(table, key=lambda k: table[k]["rms"])
    assert table["gaussian"]["notion"] == "(ε, δ)-DP"


def test_info_prints_the_recommend_table(capsys):
    rc, stdout, _ = run(["info", "--workload", "prefix", "--n", "8", "--no-nim"], capsys)
    assert rc == 0
    assert "per query" in stdout and "p-identity" in stdout and "recommended: " in stdout
    assert "gaussian" not in stdout.split("per query")[1]  # no --delta: no (ε, δ) row


def test_sample_auto_uses_recommends_choice(tmp_path, capsys):
    """prefix over 8 cells: every row is exact, so the choice is deterministic (the argmin of
    recommend's table) and the mechanism built is that row's."""
    from knorm import workloads
    from knorm.recommend import recommend

    want = recommend(workloads.prefix(8), epsilon=1.0)
    args = ["sample", "--workload", "prefix", "--n", "8", "--mechanism", "auto", "--count", "30"]
    rc, stdout, _ = run([*args, "--nonprivate-seed", "3", "--json"], capsys)
    assert rc == 0
    s = json.loads(stdout)
    assert s["mechanism_choice"]["mechanism"] == want.best
    assert s["privacy"]["mechanism"] == want.mechanism.privacy.mechanism and s["noise_source"] == "seed"
    np.save(tmp_path / "x.npy", np.ones(8))
    rc, stdout, _ = run([*args, "--data", str(tmp_path / "x.npy"), "--out", str(tmp_path / "a.npy")], capsys)
    assert rc == 0 and f"--mechanism auto chose {want.best}: least rms" in stdout
    assert np.load(tmp_path / "a.npy").shape == (30, 8) and "NOT PRIVATE" not in stdout
    rc, stdout, _ = run([*args, "--delta", "1e-6", "--json"], capsys)  # δ lets the Gaussian mechanism compete
    assert rc == 0 and "gaussian" in json.loads(stdout)["mechanism_choice"]["table"]
    # random ±1 6×20: K-norm (MCMC) is far ahead of every other row; the sampler options reach it
    rc, stdout, _ = run(["sample", *SMALL, "--mechanism", "auto", "--count", "50", "--workers", "1", "--json"], capsys)
    s = json.loads(stdout)
    assert rc == 0 and s["mechanism_choice"]["mechanism"] == "knorm" and s["privacy"]["mechanism"] == "K-norm"
    assert s["diagnostics"]["converged"] and s["noise_source"] == "os-entropy"


def test_info_on_an_exact_workload(capsys):
    rc, stdout, _ = run(["info", "--workload", "prefix", "--n", "8", "--no-nim", "--json"], capsys)
    assert rc == 0
    assert json.loads(stdout)["exact_structure"] == "cross-polytope"


def test_bench_runs_at_a_small_size(tmp_path, capsys):
    rc, stdout, _ = run(["bench", "--d", "4", "--n", "10", "--eps", "1", "--releases", "10", "--highs-steps", "5",
                         "--out-dir", str(tmp_path), "--no-plot"], capsys)
    assert rc == 0 and "ratio facet walk / HiGHS" in stdout and (tmp_path / "table3.csv").exists()


def test_console_script_entry_point():
    r = subprocess.run([sys.executable, "-m", "knorm", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("knorm ")


def test_dask_local_cluster_gives_identical_draws(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    from knorm import sample_uniform
    from knorm.distributed import DaskExecutor

    F = np.random.default_rng(0).choice([-1.0, 1.0], size=(6, 20))
    want = sample_uniform(F, 1500, rng=11)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        got, info = sample_uniform(F, 1500, rng=11, workers=DaskExecutor(client), return_info=True)
        assert info.converged
        addr = cluster.scheduler_address
        out = tmp_path / "d.npy"
        rc = cli.main(["sample", "--d", "6", "--n", "20", "--count", "200", "--scheduler", addr, "--quiet",
                       "--out", str(out)])
        assert rc == 0 and np.load(out).shape == (200, 6)
    np.testing.assert_array_equal(got, want)


def test_output_has_ordinary_permissions(tmp_path, capsys):
    import os

    out = tmp_path / "p.npy"
    assert run(["sample", *SMALL, "--count", "5", "--quiet", "--out", str(out)], capsys)[0] == 0
    mask = os.umask(0)
    os.umask(mask)
    assert (out.stat().st_mode & 0o777) == (0o666 & ~mask)


def _bad_cases(tmp_path):
    """(argv, exit status, the option the one-line error must name)."""
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan], [0.0, 1.0]]))
    np.save(tmp_path / "vec.npy", np.ones(4))
    np.save(tmp_path / "str.npy", np.array([["a", "b"], ["c", "d"]]))
    (tmp_path / "text.npy").write_text("not an array")
    (tmp_path / "zero.npy").write_bytes(b"")
    np.save(tmp_path / "empty.npy", np.array([]))
    np.save(tmp_path / "obj.npy", np.array([[1, None]], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "arch.npz", F=np.eye(3))
    np.save(tmp_path / "x_short.npy", np.ones(3))
    np.save(tmp_path / "x_nan.npy", np.full(20, np.nan))
    np.save(tmp_path / "x_2d.npy", np.ones((20, 1)))
    np.save(tmp_path / "x.npy", np.ones(20))
    np.save(tmp_path / "exists.npy", np.zeros(2))
    (tmp_path / "dir.npy").mkdir()
    (tmp_path / "afile").write_text("")
    (tmp_path / "table3.csv").write_text("keep me")
    t, x = str(tmp_path), ["--json", "--data", str(tmp_path / "x.npy")]
    S = ["sample", "--count", "5"]
    cases = [
        # usage errors (argparse and argument combinations): exit 2
        ([*S, "--epsilon", "0"], 2, "--epsilon"),
        ([*S, "--epsilon", "nan"], 2, "--epsilon"),
        (["sample", "--count", "-5"], 2, "--count"),
        ([*S, "--mechanism", "exp"], 2, "--mechanism"),
        ([*S, "--d", "x"], 2, "--d"),
        ([*S, "--seed", "5"], 2, "--seed"),
        ([*S, "--nonprivate", "5"], 2, "--nonprivate"),  # no abbreviation of --nonprivate-seed
        ([*S, "--nonprivate-seed", "-1"], 2, "--nonprivate-seed"),
        ([*S, "--workload-seed", "x"], 2, "--workload-seed"),
        ([*S, "--mechanism", "gaussian", "--delta", "0"], 2, "--delta"),
        ([*S, "--mechanism", "gaussian", "--delta", "1"], 2, "--delta"),
        ([*S, "--mechanism", "gaussian", "--delta", "-1e-6"], 2, "--delta"),
        ([*S, "--mechanism", "gaussian"], 2, "--delta"),
        ([*S, "--delta", "1e-6"], 2, "--delta"),  # a pure mechanism: δ would be ignored
        ([*S, "--mechanism", "laplace", "--delta", "1e-6"], 2, "--delta"),
        ([*S, "--workers", "0"], 2, "--workers"),
        ([*S, "--workers", "-2"], 2, "--workers"),
        ([*S, "--checkpoint", f"{t}/ck", "--checkpoint-every", "0"], 2, "--checkpoint-every"),
        ([*S, "--checkpoint", f"{t}/ck", "--checkpoint-every", "-1"], 2, "--checkpoint-every"),
        ([*S, "--resume"], 2, "--resume"),
        ([*S, "--data", f"{t}/x.npy"], 2, "--data"),  # the answers would be lost
        ([*S, "--matrix", f"{t}/nan.npy", "--d", "5"], 2, "--matrix"),
        ([*S, "--mechanism", "laplace", "--checkpoint", f"{t}/ck"], 2, "--checkpoint"),
        ([*S, "--workers", "2", "--scheduler", "tcp://localhost:1"], 2, "--scheduler"),
        (["info", "--delta", "2"], 2, "--delta"),
        (["info", "--vollb-max-dim", "-1"], 2, "--vollb-max-dim"),
        ([*S, "--workload", "pm1", "--k", "3"], 2, "--k"),
        ([*S, "--workload", "all_range", "--d", "3"], 2, "--d"),
        ([*S, "--workload", "identity", "--d", "3", "--n", "4"], 2, "--workload identity"),
        ([*S, "--workload", "marginals"], 2, "--shape"),
        ([*S, "--workload", "width_range", "--n", "10"], 2, "--k"),
        ([*S, "--workload", "width_range", "--n", "5", "--k", "9"], 1, "--workload"),
        ([*S, "--workload", "all_range", "--n", str(10**6)], 1, "--workload all_range"),
        (["info", "--workload", "marginals", "--shape", *["10"] * 10, "--k", "3"], 1, "--workload marginals"),
        (["bench", "oracles", "--seed", "1"], 2, "--seed"),
        (["uniform", "--count", "0"], 2, "--count"),
        # bad files, outputs and sizes: exit 1, before any sampling
        ([*S, "--matrix", f"{t}/nan.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/vec.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/str.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/text.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/zero.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/empty.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/obj.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/arch.npz"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/missing.npy"], 1, "--matrix"),
        ([*S, "--matrix", f"{t}/dir.npy"], 1, "--matrix"),
        ([*S, *SMALL, "--json", "--data", f"{t}/x_short.npy"], 1, "--data"),
        ([*S, *SMALL, "--json", "--data", f"{t}/x_nan.npy"], 1, "--data"),
        ([*S, *SMALL, "--json", "--data", f"{t}/x_2d.npy"], 1, "--data"),
        ([*S, *SMALL, "--json", "--data", f"{t}/zero.npy"], 1, "--data"),
        ([*S, *SMALL, "--json", "--data", f"{t}/empty.npy"], 1, "--data"),
        ([*S, *SMALL, "--json", "--data", f"{t}/str.npy"], 1, "--data"),
        ([*S, *SMALL, "--out", f"{t}/o.txt"], 1, "--out"),
        ([*S, *SMALL, "--out", f"{t}/nofolder/o.npy"], 1, "--out"),
        ([*S, *SMALL, "--out", f"{t}/afile/o.npy"], 1, "--out"),
        ([*S, *SMALL, "--out", f"{t}/dir.npy", "--force"], 1, "--out"),
        ([*S, *SMALL, "--out", f"{t}/exists.npy"], 1, "--out"),
        ([*S, *SMALL, *x, "--out", f"{t}/x.npy", "--force"], 1, "--out"),  # would overwrite the data
        ([*S, *SMALL, "--checkpoint", f"{t}/afile"], 1, "--checkpoint"),
        (["sample", *SMALL, "--count", str(10**12)], 1, "--count"),
        (["sample", *SMALL, "--mechanism", "laplace", "--count", str(10**11)], 1, "--count"),
        (["uniform", *SMALL, "--count", str(10**12)], 1, "--count"),
        (["uniform", *SMALL, "--chains", str(10**9)], 1, "--chains"),
        (["uniform", *SMALL, "--out", f"{t}/dir.npy", "--force"], 1, "--out"),
        (["bench", "table3", "--out-dir", t], 2, f"{t}/table3.csv"),  # exists: no overwrite without --force
        (["bench", "table3", "--out-dir", f"{t}/afile"], 1, "--out-dir"),
    ]
    if not os.access("/sys", os.W_OK) or os.geteuid() == 0:  # /sys refuses new files, even to root
        cases.append(([*S, *SMALL, "--out", "/sys/knorm-test.npy"], 1, "--out"))
    return cases


def _no_sampling(*args, **kwargs):
    raise AssertionError("sampling started before the error was found")


def test_bad_inputs_give_one_line_naming_the_option_before_any_sampling(tmp_path, capsys, monkeypatch):
    import knorm
    import knorm.experiments

    for name in ("table3", "compare_oracles"):
        monkeypatch.setattr(knorm.experiments, name, _no_sampling)
    monkeypatch.setattr(knorm, "sample_uniform", _no_sampling)
    monkeypatch.setattr(cli.sample, "build_mechanism", _no_sampling)
    failures = []
    for argv, status, option in _bad_cases(tmp_path):
        rc, stdout, err = run(argv, capsys)
        if not (rc == status and err.count("\n") == 1 and option in err and "error" in err
                and "Traceback" not in err and not stdout):
            failures.append((argv, rc, err))
    assert not failures, failures
    assert (tmp_path / "table3.csv").read_text() == "keep me" and np.load(tmp_path / "exists.npy").shape == (2,)


def test_unknown_command_exits_2(capsys):
    rc, _, err = run(["frobnicate"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "frobnicate" in err


def test_scheduler_without_dask_fails_before_sampling(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # `import dask.distributed` now fails
    monkeypatch.setattr(cli.sample, "build_mechanism", _no_sampling)
    rc, _, err = run(["sample", *SMALL, "--count", "5", "--scheduler", "tcp://localhost:1"], capsys)
    assert rc == 1 and err.count("\n") == 1 and "--scheduler" in err and "pip install" in err


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise IndexError("index 0 is out of bounds")

    monkeypatch.setattr(cli.sample, "build_mechanism", broken)
    argv = ["sample", *SMALL, "--count", "5"]
    rc, _, err = run(argv, capsys)
    assert rc == 1 and err == "knorm: error: IndexError: index 0 is out of bounds\n"
    for debug in (["--debug", *argv], [*argv, "--debug"]):
        rc, _, err = run(debug, capsys)
        assert rc == 1 and "Traceback" in err and "IndexError" in err


def test_private_run_resumes_from_its_checkpoint(tmp_path, capsys, monkeypatch):
    """Without a seed, the OS entropy behind an interrupted checkpointed run is kept (secret,
    0600) beside its snapshots, so --resume continues the same run; the finished run's
    checkpoint is deleted, and a new run draws new noise."""
    from knorm.walks.checkpoint import ENTROPY_FILE

    ck = tmp_path / "ck"
    base = ["sample", *SMALL, "--count", "3000", "--quiet", "--checkpoint", str(ck), "--checkpoint-every", "1e-9"]
    real = interrupt_progress(monkeypatch, after=2)
    assert run([*base, "--out", str(tmp_path / "a.npy")], capsys)[0] == 130
    entropy = ck / ENTROPY_FILE
    assert entropy.exists() and (entropy.stat().st_mode & 0o777) == 0o600
    monkeypatch.setattr(cli._common.Progress, "__call__", real)
    rc, stdout, _ = run([*base, "--resume", "--json", "--out", str(tmp_path / "b.npy")], capsys)
    s = json.loads(stdout)
    assert rc == 0 and s["resumed_from_checkpoint"] and s["private"] and s["noise_source"] == "os-entropy"
    assert s["checkpoint_deleted"] and list(ck.iterdir()) == []
    assert run([*base, "--out", str(tmp_path / "c.npy")], capsys)[0] == 0
    assert not np.any(np.load(tmp_path / "b.npy") == np.load(tmp_path / "c.npy"))


def test_bench_overwrites_only_with_force(tmp_path, capsys):
    (tmp_path / "table3.md").write_text("old")
    argv = ["bench", "table3", "--d", "3", "--n", "6", "--eps", "1", "--releases", "5", "--out-dir", str(tmp_path),
            "--no-plot"]
    rc, _, err = run(argv, capsys)
    assert rc == 2 and str(tmp_path / "table3.md") in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / "table3.md").read_text() == "old" and not (tmp_path / "table3.csv").exists()
    assert run([*argv, "--force"], capsys)[0] == 0 and (tmp_path / "table3.md").read_text() != "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table3.csv", "table3.md"]  # no temporary left


def test_bench_writes_nothing_when_interrupted(tmp_path, monkeypatch, capsys):
    """Outputs go to a temporary folder and are renamed into --out-dir only when complete."""
    from knorm import experiments

    def interrupted(*args, out_dir, **kwargs):
        (out_dir / "table3.csv").write_text("half a table")
        raise KeyboardInterrupt

    monkeypatch.setattr(experiments, "table3", interrupted)
    rc, _, _ = run(["bench", "table3", "--out-dir", str(tmp_path / "out"), "--no-plot"], capsys)
    assert rc == 130 and list((tmp_path / "out").iterdir()) == []


def test_bench_table3_uses_the_script_seed(tmp_path, capsys):
    """`knorm bench table3` = scripts/reproduce_table3.py: experiments.table3 with seed 2019."""
    from knorm.experiments import table3

    small = ["--d", "3", "--n", "6", "--eps", "1", "--releases", "5", "--no-plot"]
    rc, stdout, _ = run(["bench", "table3", *small, "--out-dir", str(tmp_path / "cli")], capsys)
    assert rc == 0 and "seed 2019" in stdout and f"wrote {tmp_path / 'cli' / 'table3.csv'}" in stdout
    want = table3((3,), 6, (1.0,), releases=5, seed=2019, out_dir=tmp_path / "script", plot_path=False,
                  out=lambda s: None)
    with open(tmp_path / "cli" / "table3.csv") as f:
        got = list(csv.DictReader(f))
    assert [float(r["mean_l2_error"]) for r in got] == [r["mean_l2_error"] for r in want]


def test_bench_scaling_at_a_small_size(tmp_path, capsys):
    argv = ["bench", "scaling", "--d", "3", "--factors", "1", "--walks", "billiard", "--seconds", "0.05",
            "--no-plot", "--out-dir", str(tmp_path)]
    rc, stdout, _ = run(argv, capsys)
    assert rc == 0 and "seed 0" in stdout and (tmp_path / "scaling.csv").read_text().startswith("d,n,walk")
    rc, _, err = run(argv, capsys)
    assert rc == 2 and str(tmp_path / "scaling.csv") in err


def test_uniform_draws_are_fresh_unless_seeded(tmp_path, capsys):
    argv = ["uniform", "--workload", "identity", "--n", "4", "--count", "50"]
    draws = []
    for name, extra in (("a", []), ("b", []), ("c", ["--nonprivate-seed", "1"]), ("e", ["--nonprivate-seed", "1"])):
        assert run([*argv, *extra, "--out", str(tmp_path / f"{name}.npy")], capsys)[0] == 0
        draws.append(np.load(tmp_path / f"{name}.npy"))
    assert not np.any(draws[0] == draws[1])
    np.testing.assert_array_equal(draws[2], draws[3])


def test_an_uncertified_sampler_run_is_one_line_with_the_way_out(monkeypatch, capsys):
    from knorm.errors import ConvergenceError

    def uncertified(*args, **kwargs):
        raise ConvergenceError("the sampler run was not certified")

    monkeypatch.setattr(cli.sample, "build_mechanism", uncertified)
    rc, _, err = run(["sample", *SMALL, "--count", "5"], capsys)
    assert rc == 1 and err.count("\n") == 1 and "not certified" in err and "--accept-uncertified" in err


def test_square_workloads_take_d_or_n(capsys):
    for size in (["--d", "5"], ["--n", "5"]):
        rc, stdout, _ = run(["sample", "--workload", "identity", *size, "--mechanism", "laplace", "--count", "3",
                             "--json"], capsys)
        assert rc == 0 and json.loads(stdout)["d"] == 5 and json.loads(stdout)["n"] == 5


def test_a_resumed_run_says_so(tmp_path, capsys, monkeypatch):
    base = ["sample", *SMALL, "--count", "3000", "--nonprivate-seed", "9", "--checkpoint", str(tmp_path / "ck"),
            "--checkpoint-every", "1e-9"]
    real = interrupt_progress(monkeypatch, after=2)
    assert run([*base, "--quiet"], capsys)[0] == 130
    monkeypatch.setattr(cli._common.Progress, "__call__", real)
    rc, stdout, _ = run([*base, "--resume"], capsys)
    assert rc == 0 and "resumed from a checkpoint" in stdout


# ---- issue 26: a release on data says how many answers, and what they cost, before releasing ---------

def test_data_needs_an_explicit_count(tmp_path, capsys):
    """``--data`` without ``--count`` used to release 1000 answers at 1000·ε: now a usage error naming
    --count, before anything is read or written."""
    np.save(tmp_path / "F.npy", np.eye(4))
    np.save(tmp_path / "x.npy", np.array([3.0, 0, 5, 2]))
    rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "x.npy"),
                        "--out", str(tmp_path / "a.npz")], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--data needs --count" in err, err
    assert not (tmp_path / "a.npz").exists()


def test_a_count_above_one_on_data_states_the_total_before_releasing(tmp_path, capsys, monkeypatch):
    from knorm.mechanisms import _base

    np.save(tmp_path / "F.npy", np.eye(4))
    np.save(tmp_path / "x.npy", np.array([3.0, 0, 5, 2]))
    seen = []
    real = _base.Mechanism.release

    def release(self, *args, **kwargs):  # what stderr held when the release began
        seen.append(capsys.readouterr().err)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_base.Mechanism, "release", release)
    rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "x.npy"),
                        "--mechanism", "laplace", "--epsilon", "0.5", "--count", "3", "--quiet",
                        "--out", str(tmp_path / "a.npz")], capsys)
    assert rc == 0 and len(seen) == 1
    assert "releasing 3 answers on the same data: total ε = 1.5 (3 × ε = 0.5, basic composition)" in seen[0]
    rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "x.npy"),
                        "--mechanism", "laplace", "--epsilon", "0.5", "--count", "1",
                        "--out", str(tmp_path / "b.npz")], capsys)
    assert rc == 0 and "releasing" not in seen[1] + err  # one answer: nothing to add up
    assert out.splitlines()[0].endswith("1 × answers Fx + noise at total ε = 0.5")


def test_answers_are_written_before_the_error_estimate(tmp_path, capsys, monkeypatch):
    """The expected error is opt-in with --data (--error-estimate) and computed only once the
    answers file exists."""
    from knorm.cli import sample

    np.save(tmp_path / "F.npy", np.eye(4))
    np.save(tmp_path / "x.npy", np.array([3.0, 0, 5, 2]))
    out_file = tmp_path / "a.npz"
    calls = []
    real = sample._expected_error

    def estimate(mech, norms):
        calls.append(out_file.exists())
        return real(mech, norms)

    monkeypatch.setattr(sample, "_expected_error", estimate)
    argv = ["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "x.npy"), "--count", "1",
            "--out", str(out_file)]
    rc, out, _ = run(argv, capsys)
    assert rc == 0 and calls == [] and "--error-estimate adds" in out
    out_file.unlink()
    rc, out, _ = run([*argv, "--error-estimate"], capsys)
    assert rc == 0 and calls == [True] and "expected error E‖noise‖₂:" in out.splitlines()[-1]
    rc, _, err = run(["sample", *SMALL, "--error-estimate"], capsys)
    assert rc == 2 and "--error-estimate applies only with --data" in err


def test_first_hour_errors_name_the_option_and_the_fix(tmp_path, capsys):
    """Issue 26's errors, each one line naming the option and how to fix it."""
    (tmp_path / "x.csv").write_text("3,0,5,2\n")
    np.save(tmp_path / "F.npy", np.eye(4))
    F, x = str(tmp_path / "F.npy"), str(tmp_path / "x.csv")
    cases = [
        (["sample", "--matrix", F, "--data", x, "--count", "1", "--json"], 1,
         "--data file", "is not a .npy array; --data takes the histogram x"),
        (["sample", "--matrix", str(tmp_path / "x.csv"), "--count", "3"], 1, "--matrix file", "np.loadtxt("),
        (["sample", "--workload", "marginals", "--shape", "2", "3"], 2, "--workload marginals needs --k", "--k 2"),
        (["sample", "--matrix", F, "--prepared", str(tmp_path / "nope.knorm")], 1, "--prepared file",
         "does not exist; make it with knorm prepare"),
    ]
    for argv, status, names, fix in cases:
        rc, out, err = run(argv, capsys)
        assert rc == status and err.count("\n") == 1 and names in err and fix in err and "pickle" not in err, \
            (argv, err)


def test_data_given_records_points_to_a_histogram_with_a_line_that_runs(tmp_path, capsys, monkeypatch):
    """Issue 34: records.csv (a header row, one record per line) given as --data: the advice is
    knorm.data.histogram, and its one-liner, run with the declared domain, writes x (it said
    np.loadtxt, which fails on the header and would give records, not counts)."""
    pd = pytest.importorskip("pandas")
    import knorm.data

    (tmp_path / "records.csv").write_text("age,sex\n30,1\n70,2\n45,2\n")
    domain = knorm.data.Domain([knorm.data.Attribute("age", edges=[0, 40, 60, 120]),
                                knorm.data.Attribute("sex", categories=[1, 2])])
    np.save(tmp_path / "F.npy", np.eye(domain.size))
    monkeypatch.chdir(tmp_path)
    argv = ["sample", "--matrix", "F.npy", "--data", "records.csv", "--count", "1", "--out", "a.npz"]
    rc, out, err = run(argv, capsys)
    assert rc == 1 and err.count("\n") == 1 and "loadtxt" not in err and "knorm.data.histogram" in err, err
    line = re.search(r"e\.g\. (np\.save\(.*\)\)) with", err).group(1)
    exec(line, {"np": np, "knorm": knorm, "pandas": pd, "domain": domain})
    assert np.load(tmp_path / "x.npy").tolist() == [1, 0, 0, 1, 0, 1]
    rc, out, err = run(["sample", "--matrix", "F.npy", "--data", "x.npy", "--count", "1", "--out", "a.npz"], capsys)
    assert rc == 0, err


def test_every_option_has_help():
    """No option of any subcommand is listed without a help text."""
    import argparse

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bare = [f"{name} {'/'.join(a.option_strings)}" for name, p in sub.choices.items() for a in p._actions
            if a.option_strings and a.help in (None, "") and not isinstance(a, argparse._HelpAction)]
    assert not bare, bare


def test_speed_line_of_few_answers():
    from knorm.cli.sample import _speed

    assert _speed({"count": 1, "seconds": 31.5, "samples_per_second": 1 / 31.5}) == "speed: 1 sample in 31.50 s"
    assert _speed({"count": 1000, "seconds": 0.41, "samples_per_second": 2468.9}) == \
        "speed: 1000 samples in 0.41 s (2469 samples/s)"
    assert _speed({"count": 2, "seconds": 31.5, "samples_per_second": 2 / 31.5}) == \
        "speed: 2 samples in 31.50 s (0.0635 samples/s)"


def test_regions_release_one_answer_per_row_at_one_answers_epsilon(tmp_path, capsys):
    """Issue 44: --data with one histogram per row and --regions --disjoint: one answer per region, the
    claim of one answer (parallel composition, by the caller's declaration); --regions alone: the rows
    compose as answers on the same data (issue 51); a 2-D --data without --regions is refused."""
    from knorm import workloads as W
    F = W.marginals([2, 3, 4], 2)
    X = np.random.default_rng(0).integers(0, 30, (40, F.shape[1]))
    np.save(tmp_path / "F.npy", F)
    np.save(tmp_path / "X.npy", X)
    base = ["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "X.npy")]
    rc, out, err = run([*base, "--regions", "--disjoint", "--mechanism", "laplace", "--epsilon", "0.5", "--json"],
                       capsys)
    assert rc == 0, err
    s = json.loads(out)
    a = np.array(s["answers"])
    assert a.shape == (40, F.shape[0]) and s["regions"] == 40
    assert s["privacy"]["epsilon"] == 0.5 and s["privacy"]["datasets"] == 40
    assert "parallel composition over 40 disjoint data sets (disjoint by the caller's declaration)" \
        in s["privacy"]["composition"]
    assert np.abs(a - X @ F.T).max() < 40 * 3 / 0.5  # Laplace(Δ₁/ε), Δ₁ = 3 (a cell in 3 tables): 40 scales
    rc, out, err = run([*base, "--regions", "--disjoint", "--out", str(tmp_path / "a.npz")], capsys)
    assert rc == 0 and "one answer on each of 40 disjoint regions by your declaration" in out, err
    assert np.load(tmp_path / "a.npz")["samples"].shape == (40, F.shape[0])
    # issue 51: rows not declared disjoint count as 40 answers on the same data, said before the release
    rc, out, err = run([*base, "--regions", "--mechanism", "laplace", "--epsilon", "0.5", "--json"], capsys)
    s = json.loads(out)
    assert rc == 0 and s["privacy"]["epsilon"] == 20.0 and s["privacy"]["datasets"] == 1 and s["disjoint"] is False
    assert "releasing 40 answers on the same data (one per row of --data: not declared disjoint" in err
    rc, out, err = run([*base, "--disjoint", "--count", "1", "--json"], capsys)
    assert rc == 2 and "--disjoint applies only with --regions" in err
    rc, out, err = run([*base, "--count", "1", "--json"], capsys)
    assert rc == 1 and "pass --regions to release one answer per row" in err
    rc, out, err = run([*base, "--regions", "--count", "3", "--json"], capsys)
    assert rc == 2 and "--regions releases one answer per region" in err
    rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--regions"], capsys)
    assert rc == 2 and "--regions applies only with --data" in err


def test_the_bank_runs_as_many_chains_as_the_command_names_workers(monkeypatch, capsys):
    """knorm sample --workers M (M > 8) hands the mechanism M chains, as knorm prepare does; without it
    the default 8 (never the machine's CPU count: the same bits on any machine)."""
    seen = []
    real = cli.sample.build_mechanism

    def spy(name, F, args, rng, sampler_options, prepared=None, accountant=None):
        seen.append(dict(sampler_options))
        return real(name, F, args, rng, sampler_options, prepared, accountant)

    monkeypatch.setattr(cli.sample, "build_mechanism", spy)
    for extra in ([], ["--workers", "2"], ["--workers", "12"]):
        assert run(["sample", *SMALL, "--count", "2", "--quiet", "--mechanism", "knorm", *extra], capsys)[0] == 0
    assert "chains" not in seen[0] and "chains" not in seen[1] and seen[2]["chains"] == 12


def test_a_2d_data_file_without_regions_asks_for_regions_not_a_count(tmp_path, capsys):
    """Issue 50: a 2-D ``--data`` without ``--regions`` first said "--data needs --count K"; it says,
    in one line naming --data, that its rows are one histogram per region and --regions releases them."""
    np.save(tmp_path / "F.npy", np.eye(4))
    np.save(tmp_path / "X.npy", np.array([[3.0, 0, 5, 2], [1.0, 1, 0, 7]]))
    for extra in ([], ["--count", "1"]):
        rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "X.npy"),
                            *extra, "--out", str(tmp_path / "a.npz")], capsys)
        assert rc != 0 and out == "" and err.count("\n") == 1, err
        assert "--data" in err and "--regions" in err and "one histogram per" in err and "--count" not in err, err
        for value in ("3", "5", "7"):  # nothing from the data
            assert value not in err.replace(str(tmp_path), ""), err
        assert not (tmp_path / "a.npz").exists()
