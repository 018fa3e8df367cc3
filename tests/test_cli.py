"""The knorm command line: outputs, summaries, errors, atomicity, resume, Dask."""

import json
import subprocess
import sys

import numpy as np
import pytest

from knorm import cli


def run(argv, capsys):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


SMALL = ["--d", "6", "--n", "20"]


def test_sample_writes_npy_and_prints_summary(tmp_path, capsys):
    out = tmp_path / "noise.npy"
    rc, stdout, _ = run(["sample", *SMALL, "--count", "300", "--out", str(out)], capsys)
    assert rc == 0
    arr = np.load(out)
    assert arr.shape == (300, 6)
    assert "R-hat" in stdout and "samples/s" in stdout and "mcmc-approximate" in stdout


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
    assert claim["mechanism"] == "Laplace" and claim["epsilon"] == 0.5 and claim["sampling"] == "exact"
    assert summary["output"] == "answers Fx + noise"


@pytest.mark.parametrize("mech,extra", [("knorm", []), ("nim", []), ("gaussian", ["--delta", "1e-6"]),
                                        ("laplace", [])])
def test_json_summary_for_every_mechanism(mech, extra, capsys):
    rc, stdout, _ = run(["sample", *SMALL, "--mechanism", mech, *extra, "--count", "50", "--json"], capsys)
    assert rc == 0
    s = json.loads(stdout)
    assert s["count"] == 50 and s["privacy"]["epsilon"] == 1.0
    assert s["samples_per_second"] > 0
    ee = s["expected_error"]
    assert ee["value"] > 0 and ee["exact"] == (mech == "gaussian")
    if mech in ("knorm", "nim"):
        assert s["diagnostics"]["converged"] and s["diagnostics"]["max_rhat"] < 1.01


def test_same_seed_same_output(tmp_path, capsys):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    for p in (a, b):
        assert run(["sample", *SMALL, "--count", "100", "--seed", "5", "--out", str(p), "--quiet"], capsys)[0] == 0
    np.testing.assert_array_equal(np.load(a), np.load(b))


def test_existing_output_is_kept_without_force(tmp_path, capsys):
    out = tmp_path / "o.npy"
    np.save(out, np.zeros(3))
    rc, _, err = run(["sample", *SMALL, "--count", "10", "--out", str(out)], capsys)
    assert rc == 1 and "--force" in err and err.count("\n") == 1
    np.testing.assert_array_equal(np.load(out), np.zeros(3))
    assert run(["sample", *SMALL, "--count", "10", "--out", str(out), "--force", "--quiet"], capsys)[0] == 0
    assert np.load(out).shape == (10, 6)


def _bad_files(tmp_path):
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan], [0.0, 1.0]]))
    np.save(tmp_path / "vec.npy", np.ones(4))
    np.save(tmp_path / "str.npy", np.array([["a", "b"], ["c", "d"]]))
    (tmp_path / "text.npy").write_text("not an array")
    np.save(tmp_path / "obj.npy", np.array([[1, None]], dtype=object), allow_pickle=True)
    np.save(tmp_path / "x_short.npy", np.ones(3))
    np.save(tmp_path / "x_nan.npy", np.full(20, np.nan))
    return [
        ["--matrix", str(tmp_path / "nan.npy")],
        ["--matrix", str(tmp_path / "vec.npy")],
        ["--matrix", str(tmp_path / "str.npy")],
        ["--matrix", str(tmp_path / "text.npy")],
        ["--matrix", str(tmp_path / "obj.npy")],
        ["--matrix", str(tmp_path / "missing.npy")],
        [*SMALL, "--data", str(tmp_path / "x_short.npy")],
        [*SMALL, "--data", str(tmp_path / "x_nan.npy")],
        [*SMALL, "--mechanism", "gaussian"],
        [*SMALL, "--out", str(tmp_path / "o.txt")],
        [*SMALL, "--out", str(tmp_path / "nofolder" / "o.npy")],
        [*SMALL, "--resume"],
    ]


def test_bad_files_and_arguments_give_one_line_errors(tmp_path, capsys):
    for argv in _bad_files(tmp_path):
        rc, _, err = run(["sample", "--count", "5", *argv], capsys)
        assert rc == 1, argv
        assert err.startswith("knorm: error:") and err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["sample", "--epsilon", "0"], ["sample", "--count", "-5"],
                                  ["sample", "--mechanism", "exp"], ["frobnicate"], ["sample", "--d", "x"]])
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


def test_interrupted_run_leaves_no_output_and_resumes_identically(tmp_path, capsys, monkeypatch):
    base = ["sample", *SMALL, "--count", "3000", "--seed", "9", "--quiet"]
    want = tmp_path / "want.npy"
    assert run([*base, "--out", str(want)], capsys)[0] == 0

    calls = []
    real = cli.Progress.__call__

    def interrupting(self, done, target):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, done, target)

    monkeypatch.setattr(cli.Progress, "__call__", interrupting)
    out = tmp_path / "got.npy"
    ck = tmp_path / "ck"
    rc, _, err = run([*base, "--out", str(out), "--checkpoint", str(ck), "--checkpoint-every", "1e-9"], capsys)
    assert rc == 130 and "--resume" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    monkeypatch.setattr(cli.Progress, "__call__", real)
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
