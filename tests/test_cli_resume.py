"""`knorm sample --checkpoint/--resume`: a resume continues an interrupted run, never replays a
finished one's noise, and the checkpoint's secrets are private (0700 folder, 0600 files) and
deleted when the run finishes (before the answers are written)."""

import json
import os
import shutil
import stat

import numpy as np
import pytest

from knorm import cli

from cli_helpers import interrupt_progress, run  # noqa: E402


@pytest.fixture
def files(tmp_path):
    """F a ±1 6×12 matrix, x1 and x2 = x1 plus one record (neighbouring data sets)."""
    rng = np.random.default_rng(5)
    np.save(tmp_path / "F.npy", rng.choice([-1.0, 1.0], size=(6, 12)))
    x1 = rng.integers(0, 5, size=12).astype(float)
    x2 = x1.copy()
    x2[3] += 1
    np.save(tmp_path / "x1.npy", x1)
    np.save(tmp_path / "x2.npy", x2)
    return tmp_path


def sample(t, data, *extra):
    return ["sample", "--matrix", str(t / "F.npy"), "--data", str(t / data), "--quiet", *extra]


def held(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def interrupted(t, capsys, monkeypatch, data="x1.npy", *extra):
    """A run of 3000 answers with snapshots at every chunk, interrupted at its second chunk."""
    real = interrupt_progress(monkeypatch, after=2)
    argv = sample(t, data, "--count", "3000", "--checkpoint", str(t / "ck"), "--checkpoint-every", "1e-9",
                  "--out", str(t / "a1.npy"), *extra)
    assert run(argv, capsys)[0] == 130
    monkeypatch.setattr(cli._common.Progress, "__call__", real)
    assert any(n.startswith("sample-") for n in held(t / "ck")) and "noise-entropy.json" in held(t / "ck")
    assert not (t / "a1.npy").exists()


@pytest.mark.parametrize("mechanism,data,extra", [("knorm", "x2.npy", []), ("auto", "x2.npy", []),
                                                  ("knorm", "x1.npy", ["--epsilon", "2"])])
def test_resume_after_a_finished_run_is_refused(files, capsys, mechanism, data, extra):
    """The issue's attacks: a second command on x2 with --resume reused the first run's noise,
    so a2 − a1 = F(x2 − x1) exactly; at ε = 2 on x1 the noise was the first's × 1/2, so
    2·a2 − a1 = Fx. Now the finished run left nothing to resume: exit 2, one line, no output."""
    t = files
    ck = t / "ck"
    common = ["--count", "3", "--mechanism", mechanism, "--checkpoint", str(ck)]
    assert run(sample(t, "x1.npy", *common, "--out", str(t / "a1.npz")), capsys)[0] == 0
    assert held(ck) == []
    rc, _, err = run(sample(t, data, *common, *extra, "--resume", "--out", str(t / "a2.npz")), capsys)
    assert rc == 2 and err.count("\n") == 1 and "--resume" in err and "no unfinished run" in err
    assert not (t / "a2.npz").exists() and held(ck) == []


def test_resume_with_other_inputs_or_settings_is_refused(files, capsys, monkeypatch):
    """An interrupted run resumes only as the identical command: another ε (the noise would be
    the first run's × ε₁/ε₂), other data, count or mechanism are refused (exit 2, nothing
    written, the checkpoint kept), and the identical command then continues."""
    t = files
    interrupted(t, capsys, monkeypatch)
    before = {n: (t / "ck" / n).read_bytes() for n in held(t / "ck")}
    base = ["--checkpoint", str(t / "ck"), "--resume", "--out", str(t / "a2.npy")]
    for data, extra in [("x1.npy", ["--count", "3000", "--epsilon", "2"]), ("x2.npy", ["--count", "3000"]),
                        ("x1.npy", ["--count", "2999"]), ("x1.npy", ["--count", "3000", "--mechanism", "nim"]),
                        ("x1.npy", ["--count", "3000", "--walk", "ball"])]:
        rc, _, err = run(sample(t, data, *extra, *base), capsys)
        assert rc == 2 and err.count("\n") == 1 and "--resume" in err and "identical" in err, (extra, err)
        assert not (t / "a2.npy").exists()
        assert {n: (t / "ck" / n).read_bytes() for n in held(t / "ck")} == before
    rc, stdout, _ = run(sample(t, "x1.npy", "--count", "3000", *base, "--json"), capsys)
    assert rc == 0 and json.loads(stdout)["resumed_from_checkpoint"] and held(t / "ck") == []


def test_a_new_run_into_a_folder_holding_a_checkpoint_is_refused(files, capsys, monkeypatch):
    t = files
    interrupted(t, capsys, monkeypatch)
    before = {n: (t / "ck" / n).read_bytes() for n in held(t / "ck")}
    rc, _, err = run(sample(t, "x1.npy", "--count", "3000", "--checkpoint", str(t / "ck"), "--out",
                            str(t / "b.npy")), capsys)
    assert rc == 2 and err.count("\n") == 1 and "--checkpoint" in err and "holds the checkpoint" in err
    assert not (t / "b.npy").exists()
    assert {n: (t / "ck" / n).read_bytes() for n in held(t / "ck")} == before


def test_a_private_resume_continues_the_interrupted_run_bit_for_bit(files, capsys, monkeypatch):
    """Two resumes of the same interrupted private run (the folder copied first) give the same
    answers bit for bit: both continue the saved state and its saved entropy. (The seeded
    run's resume equals the uninterrupted run: test_cli.py.)"""
    t = files
    interrupted(t, capsys, monkeypatch)
    shutil.copytree(t / "ck", t / "ck2")
    os.chmod(t / "ck2", 0o700)
    for ck, out in (("ck", "r1.npy"), ("ck2", "r2.npy")):
        rc, stdout, _ = run(sample(t, "x1.npy", "--count", "3000", "--checkpoint", str(t / ck), "--resume", "--json",
                                   "--out", str(t / out)), capsys)
        assert rc == 0 and json.loads(stdout)["resumed_from_checkpoint"] and json.loads(stdout)["private"]
        assert held(t / ck) == []
    a, b = np.load(t / "r1.npy"), np.load(t / "r2.npy")
    assert a.shape == (3000, 6)
    np.testing.assert_array_equal(a, b)


def test_checkpoint_files_are_private_even_under_an_open_umask(files, capsys, monkeypatch):
    """Folder 0700 and every file 0600 as created, whatever the umask (0 here: any file made
    with the usual 0666 less the umask would show as 0666)."""
    old = os.umask(0)
    try:
        interrupted(files, capsys, monkeypatch)
    finally:
        os.umask(old)
    ck = files / "ck"
    assert stat.S_IMODE(ck.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in ck.iterdir()}
    assert modes and set(modes.values()) == {0o600}, modes


def test_a_checkpoint_folder_open_to_others_is_refused(files, capsys):
    ck = files / "ck"
    ck.mkdir()
    os.chmod(ck, 0o755)
    rc, _, err = run(sample(files, "x1.npy", "--count", "3", "--checkpoint", str(ck), "--out",
                            str(files / "a.npy")), capsys)
    assert rc == 1 and err.count("\n") == 1 and "--checkpoint" in err and "0755" in err
    assert held(ck) == [] and not (files / "a.npy").exists()


def test_the_checkpoint_is_deleted_before_the_answers_are_written(files, capsys, monkeypatch):
    """Crash ordering: when the answers file is written, the run's entropy and snapshots are
    already gone, so no crash after the release leaves their noise to replay."""
    t = files
    seen = []
    real = cli.sample.write_samples

    def spy(path, array, meta=None):
        seen.append(held(t / "ck"))
        return real(path, array, meta)

    monkeypatch.setattr(cli.sample, "write_samples", spy)
    argv = sample(t, "x1.npy", "--count", "3000", "--checkpoint", str(t / "ck"), "--checkpoint-every", "1e-9",
                  "--out", str(t / "a.npy"))
    assert run(argv, capsys)[0] == 0
    assert seen == [[]] and (t / "a.npy").exists()


def test_an_interrupt_with_no_snapshot_to_continue_leaves_no_secret(files, capsys, monkeypatch):
    """Interrupted just after a sampler run finished (its snapshot deleted; the entropy saved
    with it still there): nothing can be resumed, so the entropy is deleted too, and a new run
    into the folder works."""
    from knorm.walks.checkpoint import Checkpoint

    t, ck = files, files / "ck"
    real = Checkpoint.finish

    def finish_then_interrupt(self, fp):
        assert (ck / "noise-entropy.json").exists()
        real(self, fp)
        raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoint, "finish", finish_then_interrupt)
    argv = sample(t, "x1.npy", "--count", "3000", "--checkpoint", str(ck), "--checkpoint-every", "1e-9", "--out",
                  str(t / "a.npy"))
    rc, _, err = run(argv, capsys)
    assert rc == 130 and "--resume" not in err and held(ck) == [] and not (t / "a.npy").exists()
    monkeypatch.setattr(Checkpoint, "finish", real)
    assert run(argv, capsys)[0] == 0 and held(ck) == []
