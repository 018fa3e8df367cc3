"""The shipped NLTCS table (knorm.datasets): its shape and values, its checksum, its domain."""

import itertools

import numpy as np
import pytest

import knorm.datasets as ds
from knorm.body.marginal import MarginalStructure
from knorm.body.spectral import spectrum
from knorm.data import histogram


def test_nltcs_is_the_source_table():
    X = ds.nltcs()
    assert X.shape == (21574, 16) and X.dtype == np.int64
    assert set(np.unique(X)) == {0, 1}
    dom = ds.nltcs_domain()
    assert dom.shape == (2,) * 16 and dom.names == tuple(str(i) for i in range(16))
    assert histogram(X, dom).sum() == 21574


def test_nltcs_workload_ranks():
    """All 2-way marginals: 1 + 16 + 120 = 137 spectral vectors; all 3-way (which hold the ≤3-way
    ones): 137 + 560 = 697."""
    for k, rank in ((2, 137), (3, 697)):
        st = MarginalStructure((2,) * 16, tuple(itertools.combinations(range(16), k)))
        assert len(spectrum(st)) == rank


def test_a_damaged_copy_is_refused(monkeypatch):
    real = ds.gzip.decompress
    monkeypatch.setattr(ds.gzip, "decompress", lambda b: real(b).replace(b"1", b"0", 1))
    with pytest.raises(ValueError, match="damaged"):
        ds.nltcs()
