"""The cache of prepared workloads (knorm.walks.cache): certified once per F on a machine."""

import numpy as np
import pytest

import knorm
from knorm import KNormMechanism, workloads
from knorm.walks import cache, certify, prepared

F = workloads.marginals((2, 2, 3), 2)  # rank 8 with no exact structure: rounded and certified


def _forget():
    """What a new process starts with: no body of F in memory."""
    prepared._BODIES.clear()


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KNORM_CACHE", str(tmp_path))
    _forget()
    yield tmp_path / "prepared"
    _forget()


def test_a_later_process_loads_the_certification_and_draws_the_same_bits(folder, monkeypatch):
    first = KNormMechanism(F, epsilon=1.0, rng=5).sample_noise(20)  # certifies, writes the cache
    fp = prepared.workload_fingerprint(F)
    path = folder / f"{fp}.knorm"
    assert path.is_file()
    # the cached file is what prepare(F) writes
    w = knorm.prepare(F)
    v = knorm.load_prepared(path, F)
    assert v.certificate == w.certificate and np.array_equal(v.certified.states, w.certified.states)
    _forget()

    def no_certify(*args, **kwargs):
        raise AssertionError("certified again")

    monkeypatch.setattr(certify, "certify", no_certify)
    again = KNormMechanism(F, epsilon=1.0, rng=5).sample_noise(20)
    assert np.array_equal(again, first)  # seeded: the same bits from the file as from memory
    assert "certified pool" in KNormMechanism(F, epsilon=1.0).expected_error().method


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "foreign"])
def test_a_corrupt_or_foreign_file_is_refused_and_rebuilt(folder, damage):
    KNormMechanism(F, epsilon=1.0, rng=1).sample_noise(2)
    path = folder / f"{prepared.workload_fingerprint(F)}.knorm"
    if damage == "corrupt":
        path.write_bytes(b"not a prepared workload")
    elif damage == "truncated":  # a zip cut short (zipfile.BadZipFile, not a ValueError)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # another matrix's file under F's name
        G = workloads.marginals((2, 3, 3), 2)
        knorm.prepare(G, folder / "g.knorm")
        (folder / "g.knorm").replace(path)
    _forget()
    KNormMechanism(F, epsilon=1.0, rng=1).sample_noise(2)
    assert knorm.load_prepared(path, F).certificate is not None  # rebuilt for F


def test_off_writes_nothing_and_the_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("KNORM_CACHE", "off")
    _forget()
    assert cache.cache_folder() is None
    KNormMechanism(F, epsilon=1.0, rng=1).sample_noise(2)
    assert not any(tmp_path.rglob("*.knorm"))
    monkeypatch.setenv("KNORM_CACHE", str(tmp_path))
    monkeypatch.setenv("KNORM_CACHE_MAX_MB", "0")  # every file over the bound: deleted once written
    _forget()
    KNormMechanism(F, epsilon=1.0, rng=1).sample_noise(2)
    assert not any(tmp_path.rglob("*.knorm"))
    monkeypatch.setenv("KNORM_CACHE_MAX_MB", "lots")  # refused before any work, naming it
    with pytest.raises(ValueError, match="KNORM_CACHE_MAX_MB"):
        KNormMechanism(workloads.marginals((2, 3, 3), 2), epsilon=1.0, rng=1).sample_noise(2)
    _forget()


def test_a_folder_others_may_write_to_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / "prepared").mkdir(parents=True)
    (shared / "prepared").chmod(0o777)  # anyone could plant a file here
    monkeypatch.setenv("KNORM_CACHE", str(shared))
    _forget()
    KNormMechanism(F, epsilon=1.0, rng=1).sample_noise(2)
    assert not any(shared.rglob("*.knorm"))
    _forget()
