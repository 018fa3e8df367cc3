"""knorm.prepare on more chains, on threads and on a Dask cluster (a killed worker loses nothing), and
resumed from its public snapshot (issue 28)."""

import dataclasses
import os

import numpy as np
import pytest

from knorm import prepare, workloads
from knorm.walks.certify import MIN_CHAIN_RECORDS, MIN_POOL, certify_pool
from knorm.walks.prepared import snapshot_path

F = workloads.marginals((2, 3, 4), 2)  # rank 18, no exact structure: rounding and certification by MCMC
CHAINS = 12


def arrays(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def assert_same_file(a, b):
    x, y = arrays(a), arrays(b)
    assert set(x) == set(y)
    differ = [k for k in x if not np.array_equal(x[k], y[k])]
    assert not differ, differ


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The seeded prepare of F on CHAINS chains in the calling thread."""
    path = tmp_path_factory.mktemp("scale") / "threads1.knorm"
    return prepare(F, path, chains=CHAINS, workers=1), path


def test_chains_is_validated():
    for bad in (0, -3, 2.5, "8", True):
        with pytest.raises(ValueError, match="chains must be a positive integer") as e:
            prepare(F, chains=bad)
        assert "\n" not in str(e.value)
    for name, bad in (("resume", 1), ("snapshot_every", -1.0), ("snapshot_every", float("nan"))):
        with pytest.raises(ValueError, match=f"^{name} must be"):
            prepare(F, **{name: bad})


def test_more_chains_are_recorded_and_the_file_is_the_same_on_any_number_of_threads(reference, tmp_path):
    w, path = reference
    cert = w.certificate
    assert cert.chains == CHAINS and cert.pool >= MIN_POOL and len(w.rounding.points) == CHAINS
    assert len(w.certified.states) == 64 and cert.passed
    prepare(F, tmp_path / "threads2.knorm", chains=CHAINS, workers=2)
    assert_same_file(path, tmp_path / "threads2.knorm")
    eight = prepare(F, chains=8, workers=2).certificate  # another chain count: another (seeded) run
    assert eight.chains == 8 and (eight.min_ess, eight.max_rhat) != (cert.min_ess, cert.max_rhat)


def test_a_pool_too_short_for_its_chains_is_refused(reference):
    """The records are split across the chains (2000 in all), at least MIN_CHAIN_RECORDS each."""
    cert = reference[0].certificate
    assert certify_pool(8) == certify_pool(64) == certify_pool(500) == MIN_POOL
    assert certify_pool(1000) == 1000 * MIN_CHAIN_RECORDS > MIN_POOL
    short = dataclasses.replace(cert, chains=1000, pool=MIN_POOL, min_ess=MIN_POOL)
    assert any(f"{MIN_CHAIN_RECORDS} per chain of 1000" in f for f in short.failures())
    assert not dataclasses.replace(cert, chains=64, pool=2048, min_ess=2048 * cert.min_ess / cert.pool).failures()


def test_an_interrupted_prepare_resumes_to_the_same_file(reference, tmp_path):
    """Interrupted after the rounding (in the certified run's warm-up), after its warm-up and pilot
    (at the pool's first report), and after two chunks of the pool: each resumed run ends with the
    file of an uninterrupted prepare, and its snapshot is gone."""

    class Stop(Exception):
        pass

    class Interrupt:
        def __init__(self, after):
            self.after, self.calls = after, 0

        def __call__(self, done, total):
            pass

        def rounding(self, it, total):
            pass

        def warmup(self, done, total):
            if self.after == 0:
                raise Stop

        def certify(self, done, total):
            self.calls += 1
            if self.calls == self.after:
                raise Stop

    out = tmp_path / "w.knorm"
    for after, held in ((0, {"prepare.json", "rounding.knorm"}),
                        (1, {"prepare.json", "rounding.knorm", "certify.npz"}),
                        (3, {"prepare.json", "rounding.knorm", "certify.npz"})):
        with pytest.raises(Stop):
            prepare(F, out, chains=CHAINS, workers=1, progress=Interrupt(after), snapshot_every=0)
        assert not out.exists() and set(os.listdir(snapshot_path(out))) == held
        w = prepare(F, out, chains=CHAINS, workers=2, snapshot_every=0)  # resumed
        assert_same_file(reference[1], out)
        # its stages: a run resumed past its warm-up counts the rest of its pool as the pool's steps
        steps = {s["stage"]: s["steps_per_chain"] for s in w.stages["stages"]}
        assert steps["certification: set-up"] == 0 and steps["certification: pool"] > 0
        assert not snapshot_path(out).exists()
        out.unlink()


def test_a_snapshot_of_another_prepare_is_refused(tmp_path):
    out = tmp_path / "w.knorm"
    snapshot_path(out).mkdir()
    with pytest.raises(ValueError, match="not the snapshot of a prepare"):  # not ours: never deleted
        prepare(F, out, chains=CHAINS, resume=False)
    (snapshot_path(out) / "prepare.json").write_text("{}")
    with pytest.raises(ValueError, match=r"another prepare.*resume=False.*--restart"):
        prepare(F, out, chains=CHAINS)
    prepare(F, out, chains=CHAINS, resume=False)  # discards it
    assert out.exists() and not snapshot_path(out).exists()


def _killing_plugin(marker, after):
    """A Dask worker plugin that ends its worker's process (``os._exit``) as its ``after``-th task
    starts executing, on the first worker to get there only (``marker`` records it)."""
    from distributed import WorkerPlugin

    class KillOnce(WorkerPlugin):
        name = "knorm-kill-once"

        def setup(self, worker):
            self.started = 0

        def transition(self, key, start, finish, **kwargs):
            if finish != "executing":
                return
            self.started += 1
            if self.started == after:
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return
                os.close(fd)
                os._exit(1)

    return KillOnce()


def test_a_dask_cluster_gives_the_same_file_and_a_killed_worker_loses_nothing(reference, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    from knorm.distributed import DaskExecutor

    marker = tmp_path / "killed"
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        prepare(F, tmp_path / "dask.knorm", chains=CHAINS, workers=DaskExecutor(client))
        assert_same_file(reference[1], tmp_path / "dask.knorm")
        client.register_plugin(_killing_plugin(str(marker), after=5))
        prepare(F, tmp_path / "killed.knorm", chains=CHAINS, workers=DaskExecutor(client))
    assert marker.exists()  # a worker did die mid-prepare, as its 5th task started
    assert_same_file(reference[1], tmp_path / "killed.knorm")
