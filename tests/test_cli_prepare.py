"""``knorm prepare`` and ``knorm sample --prepared``."""

import json

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
    assert "certified" in stdout and "max R-hat" in stdout and "gauge KS p" in stdout and "warm-up W = " in stdout
    rc, stdout, err = run(["info", *WORKLOAD, "--prepared", str(prepared), "--json"], capsys)
    assert rc == 0, err
    f = json.loads(stdout)
    assert f["certificate"]["warmup"] >= 20 and f["states"] == 64 and f["certificate"]["max_rhat"] < 1.01
    rc, stdout, err = run(["info", *WORKLOAD, "--prepared", str(prepared)], capsys)
    assert rc == 0 and "64 public stationary states" in stdout and "approximate (MCMC)" in stdout, err


def test_sample_from_a_prepared_file_reports_its_certificate(prepared, capsys):
    rc, stdout, err = run(["sample", *WORKLOAD, "--nonprivate-seed", "2", "--count", "5", "--prepared",
                           str(prepared)], capsys)
    assert rc == 0, err
    assert "certified once for this body" in stdout and "from a public stationary state" in stdout
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
