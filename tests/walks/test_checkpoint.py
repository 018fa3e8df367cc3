"""knorm.walks.checkpoint.Checkpoint in Python: continuation, never replay; private files."""

import os
import stat

import numpy as np
import pytest

from knorm import KNormMechanism, Sampler, sample_uniform
from knorm.privacy import BudgetAccountant
from knorm.walks.checkpoint import ENTROPY_FILE, Checkpoint, CheckpointConflict, fingerprint


@pytest.fixture(scope="module")
def F():
    return np.random.default_rng(0).choice([-1.0, 1.0], size=(6, 20))


class Stop(Exception):
    pass


def stop_at(k):
    """A progress callback that raises at its k-th call after the one that opens the pool (after
    k − 1 chunks were saved)."""
    calls = []

    def progress(done, target):
        calls.append(done)
        if len(calls) == k + 1:
            raise Stop

    return progress


def interrupt(F, folder, **kw):
    with pytest.raises(Stop):
        sample_uniform(F, 3000, rng=21, progress=stop_at(2), checkpoint=Checkpoint(folder, every=0, **kw))
    assert len(list(folder.glob("sample-*.npz"))) == 1


def test_a_new_checkpoint_refuses_a_folder_holding_one(F, tmp_path):
    interrupt(F, tmp_path)
    with pytest.raises(CheckpointConflict, match="holds the checkpoint of another run"):
        Checkpoint(tmp_path)
    (tmp_path / "other").mkdir(mode=0o700)
    (tmp_path / "other" / ENTROPY_FILE).write_text("{}")  # an entropy file alone is a checkpoint too
    with pytest.raises(CheckpointConflict, match="noise-entropy.json"):
        Checkpoint(tmp_path / "other")


def test_resume_needs_an_unfinished_run_of_the_same_context(F, tmp_path):
    with pytest.raises(CheckpointConflict, match="does not exist"):
        Checkpoint(tmp_path / "missing", resume=True)
    with pytest.raises(CheckpointConflict, match="no unfinished run"):
        Checkpoint(tmp_path, resume=True)
    interrupt(F, tmp_path, context={"data": np.arange(3.0)})
    with pytest.raises(CheckpointConflict, match="other inputs"):
        Checkpoint(tmp_path, resume=True, context={"data": np.arange(3.0) + 1})
    with pytest.raises(CheckpointConflict, match="other inputs"):
        Checkpoint(tmp_path, resume=True)
    # another seed or walk: refused when the run starts, before any draw is returned
    for kw in ({"rng": 22}, {"rng": 21, "walk": "ball"}):
        with pytest.raises(CheckpointConflict, match="other settings"):
            sample_uniform(F, 3000, checkpoint=Checkpoint(tmp_path, resume=True, context={"data": np.arange(3.0)}),
                           **kw)
    # another size (the same settings): the saved run does not match this one
    with pytest.raises(CheckpointConflict, match="does not match"):
        sample_uniform(F, 2999, rng=21, checkpoint=Checkpoint(tmp_path, resume=True, context={"data": np.arange(3.0)}))
    ck = Checkpoint(tmp_path, resume=True, context={"data": np.arange(3.0)})
    got = sample_uniform(F, 3000, rng=21, checkpoint=ck)
    np.testing.assert_array_equal(got, sample_uniform(F, 3000, rng=21))  # the identical result
    assert ck.loaded == 1 and list(tmp_path.iterdir()) == []  # the finished run's snapshot is gone


def test_the_mechanism_binds_epsilon(F, tmp_path):
    """An interrupted private K-norm release (its entropy kept in the checkpoint) resumes only
    at the same ε: at another it is refused when the run starts, nothing released and nothing
    spent (the noise would have been the first run's × ε₁/ε₂). The identical resume continues,
    and leaving ``with`` deletes the finished session's entropy."""
    x = np.arange(20.0)

    def mech(eps, ck, **opts):
        return KNormMechanism(F, epsilon=eps, rng=np.random.default_rng(np.random.SeedSequence(ck.entropy())),
                              bank_size=3000, sampler_options={"checkpoint": ck, **opts},
                              accountant=BudgetAccountant(epsilon=10.0))

    with pytest.raises(Stop):
        mech(1.0, Checkpoint(tmp_path, every=0), progress=stop_at(2)).release(x, size=3)
    assert (tmp_path / ENTROPY_FILE).exists() and len(list(tmp_path.glob("sample-*.npz"))) == 1
    m2 = mech(2.0, Checkpoint(tmp_path, resume=True))
    with pytest.raises(CheckpointConflict, match="other settings"):
        m2.release(x, size=3)
    assert m2.accountant.total == (0.0, 0.0) and m2.privacy.answers == 0
    with Checkpoint(tmp_path, resume=True) as ck:
        got = mech(1.0, ck).release(x, size=3)
    assert ck.loaded == 1 and got.shape == (3, 6) and list(tmp_path.iterdir()) == []


def test_a_seeded_mechanism_resume_equals_the_uninterrupted_release(F, tmp_path):
    x = np.arange(20.0)
    # a checkpoint selects the per-run path (a resumable run): the reference has one too, uninterrupted
    want = KNormMechanism(F, epsilon=1.0, rng=5, bank_size=3000,
                          sampler_options={"checkpoint": Checkpoint(tmp_path.parent / f"{tmp_path.name}-ref", every=0)}
                          ).release(x, size=3)
    with pytest.raises(Stop):
        KNormMechanism(F, epsilon=1.0, rng=5, bank_size=3000,
                       sampler_options={"checkpoint": Checkpoint(tmp_path, every=0), "progress": stop_at(2)}
                       ).release(x, size=3)
    ck = Checkpoint(tmp_path, resume=True)
    got = KNormMechanism(F, epsilon=1.0, rng=5, bank_size=3000, sampler_options={"checkpoint": ck}).release(x, size=3)
    assert ck.loaded == 1
    np.testing.assert_array_equal(got, want)
    ck.retire()
    assert list(tmp_path.iterdir()) == []


def test_files_are_private_whatever_the_umask(F, tmp_path):
    old = os.umask(0)
    try:
        folder = tmp_path / "a" / "ck"
        ck = Checkpoint(folder, every=0)
        ck.entropy()
        with pytest.raises(Stop):
            sample_uniform(F, 3000, rng=21, progress=stop_at(2), checkpoint=ck)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert ENTROPY_FILE in modes and len(modes) == 2 and set(modes.values()) == {0o600}, modes


def test_a_folder_open_to_others_is_refused(tmp_path):
    folder = tmp_path / "ck"
    folder.mkdir()
    for mode in (0o755, 0o770, 0o701):
        os.chmod(folder, mode)
        for resume in (False, True):
            with pytest.raises(ValueError, match=f"{mode:04o}"):
                Checkpoint(folder, resume=resume)
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        Checkpoint(tmp_path / "f")


def test_bad_arguments(F, tmp_path):
    for kw, err in [({"every": -1.0}, ValueError), ({"every": float("nan")}, ValueError), ({"every": "1"}, ValueError),
                    ({"resume": "yes"}, TypeError)]:
        with pytest.raises(err, match=next(iter(kw))):
            Checkpoint(tmp_path, **kw)
    with pytest.raises(TypeError, match="directory"):
        Checkpoint(None)
    with pytest.raises(TypeError, match="checkpoint"):
        Sampler(F, rng=1, checkpoint=str(tmp_path))
    ck = Checkpoint(tmp_path / "b", every=0)
    s = Sampler(F, rng=1, checkpoint=ck)
    s.run(10)
    with pytest.raises(ValueError, match="has started"):
        Sampler(F, rng=2, checkpoint=ck)


def test_the_fingerprint_hashes_whole_arrays_inside_containers():
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0  # str() of both prints the same summary with "..."
    assert fingerprint({"x": a}) != fingerprint({"x": b})
    assert fingerprint([a, 1]) != fingerprint([b, 1])
    assert fingerprint({"x": a}) == fingerprint({"x": a.copy()})
    assert fingerprint(np.zeros(2)) != fingerprint(np.zeros(2, dtype=np.float32))


def test_a_resume_interrupted_again_before_the_saved_run_stays_resumable(F, tmp_path):
    """A session's first run finished (snapshot deleted), its second was interrupted. The
    resume runs the first again without saving it (the saved run stays the one to continue),
    so a second interrupt there leaves the folder as it was, and a later resume continues."""
    s = Sampler(F, rng=12)  # run(1500): two chunks of records (a snapshot after the first)
    s.run(1500)
    want = s.run(2000)[0]

    s1 = Sampler(F, rng=12, checkpoint=Checkpoint(tmp_path, every=0))
    s1.run(1500)
    s1.progress = stop_at(2)
    with pytest.raises(Stop):
        s1.run(2000)
    saved = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(saved) == 1

    s2 = Sampler(F, rng=12, checkpoint=Checkpoint(tmp_path, every=0, resume=True), progress=stop_at(2))
    with pytest.raises(Stop):
        s2.run(1500)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == saved

    ck = Checkpoint(tmp_path, every=0, resume=True)
    s3 = Sampler(F, rng=12, checkpoint=ck)
    s3.run(1500)
    np.testing.assert_array_equal(s3.run(2000)[0], want)
    assert ck.loaded == 1 and list(tmp_path.iterdir()) == []


def test_a_resumed_mechanism_never_gives_released_noise_to_other_data(F, tmp_path):
    """The audit's replay: release a1 on x1 (run 0, finished), interrupt a second release
    (run 1), resume and release on x2. Run 0 is re-run on resume with the same draws, so
    answering x2 from it would give b − a1 = F(x2 − x1) exactly (the noise cancels). The
    resumed session must repeat the interrupted one's releases on the same data: x2 is
    refused, nothing spent; repeating x1 gives a1 again (nothing new) and then continues."""
    x1, x2 = np.arange(20.0), np.arange(20.0) + np.eye(20)[3]
    armed = []

    def progress(done, target):  # armed: stop at the second chunk (after the pool opens and one chunk is saved)
        if armed:
            armed.append(done)
            if len(armed) == 4:
                raise Stop

    def mech(ck):
        return KNormMechanism(F, epsilon=1.0, rng=np.random.default_rng(np.random.SeedSequence(ck.entropy())),
                              bank_size=3000, sampler_options={"checkpoint": ck, "progress": progress},
                              accountant=BudgetAccountant(epsilon=1e5))

    m = mech(Checkpoint(tmp_path, every=0))
    a1 = m.release(x1, size=3)
    armed.append(None)
    with pytest.raises(Stop):
        m.release(x1, size=4000)
    armed.clear()
    assert len(list(tmp_path.glob("sample-*.npz"))) == 1
    m2 = mech(Checkpoint(tmp_path, resume=True))
    with pytest.raises(CheckpointConflict, match="other releases"):
        m2.release(x2, size=3)
    assert m2.accountant.total == (0.0, 0.0) and m2.privacy.answers == 0
    m2b = mech(Checkpoint(tmp_path, resume=True))
    with pytest.raises(CheckpointConflict, match="other releases"):
        m2b.sample_noise(3)  # noise alone is a different call too
    with Checkpoint(tmp_path, resume=True) as ck:
        m3 = mech(ck)
        np.testing.assert_array_equal(m3.release(x1, size=3), a1)
        assert m3.release(x1, size=4000).shape == (4000, 6)
    assert ck.loaded == 1 and list(tmp_path.iterdir()) == []
