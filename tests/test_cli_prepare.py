"""``knorm prepare`` and ``knorm sample --prepared``."""

import json

from knorm.walks.certify import rhat_limit

import numpy as np
import pytest
from cli_helpers import run

from knorm import workloads

WORKLOAD = ["--workload", "marginals", "--shape", "2", "2", "2", "2", "2", "--k", "2"]  # rank 16, MCMC


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    from knorm import cli

    path = tmp_path_factory.mktemp("cli") / "w.knorm"
    assert cli.main(["prepare", *WORKLOAD, "--out", str(path), "--quiet"]) == 0
    return path


def test_prepare_writes_a_public_file_and_reports_it(tmp_path, capsys):
    out = tmp_path / "w.knorm"
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(out), "--json"], capsys)
    assert rc == 0 and out.exists(), err
    s = json.loads(stdout)
    assert s["dim"] == 16 and s["rounding"] is True and s["out"] == str(out) and len(s["fingerprint"]) == 64


def test_sample_with_prepared_equals_sample_without(prepared, tmp_path, capsys):
    seeded = ["--nonprivate-seed", "4", "--count", "30", "--quiet"]
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    assert run(["sample", *WORKLOAD, *seeded, "--out", str(a)], capsys)[0] == 0
    assert run(["sample", *WORKLOAD, *seeded, "--out", str(b), "--prepared", str(prepared)], capsys)[0] == 0
    assert np.array_equal(np.load(a), np.load(b))
    for mechanism in ("nim", "auto"):
        rc, _, err = run(["sample", *WORKLOAD, "--nonprivate-seed", "1", "--count", "3", "--quiet",
                          "--mechanism", mechanism, "--prepared", str(prepared)], capsys)
        assert rc == 0, err


def test_bad_prepared_use_is_one_line(prepared, tmp_path, capsys):
    np.save(tmp_path / "F.npy", workloads.marginals((2, 2, 2, 2, 2, 2), 2))
    np.save(tmp_path / "x.npy", np.zeros(3))
    cases = [
        (["sample", "--matrix", str(tmp_path / "F.npy"), "--prepared", str(prepared)], 1, "another matrix"),
        (["sample", *WORKLOAD, "--prepared", str(tmp_path / "x.npy")], 1, "not a prepared-workload file"),
        (["sample", *WORKLOAD, "--prepared", str(tmp_path / "missing.knorm")], 1, "does not exist; make it with knorm prepare"),
        (["sample", *WORKLOAD, "--mechanism", "laplace", "--prepared", str(prepared)], 2, "--prepared applies only"),
        (["prepare", *WORKLOAD], 2, "--out"),
        (["prepare", *WORKLOAD, "--out", str(prepared)], 1, "exists; use --force"),
        (["prepare", *WORKLOAD, "--out", str(tmp_path / "w.npy")], 1, "must end in .knorm or .npz"),
    ]
    for argv, status, text in cases:
        rc, stdout, err = run([*argv, "--count", "3"] if argv[0] == "sample" else argv, capsys)
        assert rc == status and err.count("\n") == 1 and text in err and "Traceback" not in err, (argv, rc, err)


def test_prepare_with_recommend_keeps_the_table_for_mechanism_auto(tmp_path, capsys, monkeypatch):
    """``--recommend`` keeps recommend's ε-free rows in the file; ``sample --mechanism auto
    --prepared`` then chooses from them (the K-norm and NIM rows are made to fail: they must not be
    computed) and releases what a run without the file releases (the same seeded mechanism)."""
    import importlib

    R = importlib.import_module("knorm.recommend")  # the module (knorm.recommend is also the function)

    out = tmp_path / "w.knorm"
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(out), "--json", "--recommend"], capsys)
    assert rc == 0, err
    assert {"knorm", "nim", "identity", "laplace"} <= set(json.loads(stdout)["recommend_rows"])
    seeded = ["--nonprivate-seed", "5", "--count", "4", "--quiet", "--mechanism", "auto"]
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    assert run(["sample", *WORKLOAD, *seeded, "--out", str(a)], capsys)[0] == 0
    for row in ("knorm", "nim", "p_identity", "hierarchical"):
        monkeypatch.setattr(R._Builder, row, lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    rc, _, err = run(["sample", *WORKLOAD, *seeded, "--out", str(b), "--prepared", str(out)], capsys)
    assert rc == 0, err
    assert np.array_equal(np.load(a), np.load(b))


def test_prepare_prints_the_certificate_and_info_shows_it(prepared, tmp_path, capsys):
    out = tmp_path / "w.knorm"
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(out)], capsys)
    assert rc == 0, err
    assert "certified" in stdout and "max R-hat" in stdout and "gauge KS p" in stdout and "W = " in stdout and "before and between a release chain" in stdout
    rc, stdout, err = run(["info", *WORKLOAD, "--prepared", str(prepared), "--json"], capsys)
    assert rc == 0, err
    f = json.loads(stdout)
    p = f["prepared"]
    assert p["certificate"]["warmup"] >= 20 and p["states"] == 64
    c = p["certificate"]
    assert c["max_rhat"] < rhat_limit(2 * c["chains"], c["pool"]) and "nested R-hat" in c["diagnostic"]
    assert p["pool_moments"] and "certified pool (MCMC, billiard): ESS" in f["expected_l2_error"]["knorm"]["method"]
    assert "certified pool (MCMC, billiard): ESS" in f["recommend"]["table"]["knorm"]["method"]
    rc, stdout, err = run(["info", *WORKLOAD, "--prepared", str(prepared)], capsys)
    assert rc == 0 and "64 public stationary states" in stdout and "approximate (MCMC)" in stdout, err
    assert "no new draws" in stdout


def test_sample_from_a_prepared_file_reports_its_certificate(prepared, capsys):
    rc, stdout, err = run(["sample", *WORKLOAD, "--nonprivate-seed", "2", "--count", "5", "--prepared",
                           str(prepared)], capsys)
    assert rc == 0, err
    assert "certified once for this body" in stdout and "public stationary start" in stdout
    assert "W = " in stdout and "approximate" in stdout


def test_verify_passes_a_good_file_and_a_tampered_one_is_refused(prepared, tmp_path, capsys):
    rc, stdout, err = run(["prepare", *WORKLOAD, "--verify", str(prepared)], capsys)
    assert rc == 0 and "passed" in stdout, (stdout, err)
    z = dict(np.load(prepared, allow_pickle=False))
    cert = json.loads(str(z["certificate"]))
    cert["warmup"] = 0
    z["certificate"] = np.array(json.dumps(cert))
    bad = tmp_path / "bad.knorm"
    with open(bad, "wb") as f:
        np.savez(f, **z)
    for argv in (["prepare", *WORKLOAD, "--verify", str(bad)], ["sample", *WORKLOAD, "--count", "1", "--prepared",
                                                                   str(bad)]):
        rc, _, err = run(argv, capsys)
        assert rc == 1 and err.count("\n") == 1 and "refused" in err and "warm-up 0" in err, (argv, err)


def test_prepare_chains_progress_lines_and_restart(prepared, tmp_path, capsys):
    """``--chains N`` goes into the certificate; a non-terminal stderr gets a line as each stage starts
    and ends (counts and times only); ``--workers N`` beyond 8 raises the default chain count; a
    snapshot of another prepare is refused until ``--restart``; an interrupted prepare names its
    snapshot and the same command finishes it with the file of an uninterrupted one."""
    from knorm import cli
    from knorm.walks.prepared import snapshot_path

    out = tmp_path / "w.knorm"
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(out), "--chains", "10", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(stdout)["chains"] == 10 and json.loads(stdout)["certificate"]["chains"] == 10
    lines = err.splitlines()
    assert lines[0].startswith("prepare: rank 16, 32 cells: the rounding and the certification roughly ") and lines[0].endswith("(a fit to measured prepares, "
                                                                                         "within about 2×)")
    assert lines[1] == "prepare: rounding K: at most 8 iterations"
    # the stage closes at the iterations run, as the summary says (issue 50), not at its bound of 8
    its = json.loads(stdout)["rounding_iterations"]
    assert lines[2].startswith(f"prepare: rounding K: done, {its} iteration{'s' * (its != 1)} in ")
    assert any(line.startswith("prepare: certifying the walk (once per workload): done, ") for line in lines)
    assert all(line.startswith("prepare: ") for line in lines) and "\r" not in err
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(tmp_path / "w9.knorm"), "--workers", "9", "--json",
                           "--quiet"], capsys)
    assert rc == 0 and json.loads(stdout)["chains"] == 9 and err == "", err

    again = tmp_path / "again.knorm"
    snapshot_path(again).mkdir()
    (snapshot_path(again) / "prepare.json").write_text("{}")
    rc, _, err = run(["prepare", *WORKLOAD, "--out", str(again), "--chains", "10", "--quiet"], capsys)
    assert rc == 1 and err.count("\n") == 1 and "another prepare" in err and "--restart" in err, err
    real = cli._common.Progress.certify

    def interrupting(self, done, total):
        raise KeyboardInterrupt

    cli._common.Progress.certify = interrupting
    try:
        rc, _, err = run(["prepare", *WORKLOAD, "--out", str(again), "--chains", "10", "--quiet", "--restart"], capsys)
    finally:
        cli._common.Progress.certify = real
    assert rc == 130 and str(snapshot_path(again)) in err and "--restart discards it" in err, err
    assert (snapshot_path(again) / "rounding.knorm").exists() and not again.exists()
    rc, _, err = run(["prepare", *WORKLOAD, "--out", str(again), "--chains", "10", "--quiet"], capsys)
    assert rc == 0 and not snapshot_path(again).exists(), err
    assert again.read_bytes() == out.read_bytes()


def test_prepare_scheduler_usage(capsys, tmp_path):
    rc, _, err = run(["prepare", *WORKLOAD, "--out", str(tmp_path / "w.knorm"), "--workers", "2", "--scheduler",
                      "tcp://localhost:1"], capsys)
    assert rc == 2 and "--scheduler" in err and err.count("\n") <= 2


def test_info_from_a_prepared_file_alone(tmp_path, capsys):
    """Issue 44: `knorm info --prepared FILE` needs no --matrix: F is in the file (checked), and the
    file's recommend rows (kept by default) answer at once; before, it fell back to the default
    pm1 20×100 workload and failed ("prepared for another matrix")."""
    out = tmp_path / "w.knorm"
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(out), "--quiet"], capsys)
    assert rc == 0, err
    rc, stdout, err = run(["info", "--prepared", str(out), "--epsilon", "1", "--json"], capsys)
    assert rc == 0, err
    facts = json.loads(stdout)
    assert facts["workload"] == f"F of {out} {facts['d']}×{facts['n']}"
    assert facts["recommend"]["table"] and all("(prepared)" in r["method"] for r in facts["recommend"]["table"].values())
    rc, stdout, err = run(["prepare", *WORKLOAD, "--out", str(tmp_path / "plain.knorm"), "--no-recommend", "--json"],
                          capsys)
    assert rc == 0 and json.loads(stdout)["recommend_rows"] == []
