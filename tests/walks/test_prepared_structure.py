"""A marginal workload's prepared file holds its structure, not its entries (issue 49): a few
kilobytes, F rebuilt from it and checked against the fingerprint, every field checked by name
before anything of F's size is made."""

from __future__ import annotations

import json

import numpy as np
import pytest

import knorm
from knorm import workloads as W
from knorm.walks import prepared as P

from test_prepared_sizes import _write  # tests/walks is on the path (pytest prepend)

# rows shuffled, scaled by 2.5, one row dropped: recognised from the entries all the same
F0 = W.marginals((2, 3, 2, 2), 2)
F = 2.5 * F0[np.random.default_rng(0).permutation(F0.shape[0])][1:]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("structure") / "m.knorm"
    knorm.prepare(F, path, recommend=False)
    with np.load(path, allow_pickle=False) as z:
        return path, {k: z[k] for k in z.files}


def test_the_file_holds_the_structure_and_f_comes_back_exactly(saved):
    path, arrays = saved
    assert not any(k.startswith("matrix_") for k in arrays)
    assert tuple(arrays["marginal_sizes"]) == (2, 3, 2, 2) and float(arrays["marginal_scale"]) == 2.5
    assert sorted(map(tuple, json.loads(str(arrays["marginal_cliques"])))) == sorted(
        ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)))
    assert sum(a.nbytes for k, a in arrays.items() if k.startswith("marginal_")) < 1000  # d ints and a few more
    assert np.array_equal(P.prepared_matrix(path), F)
    w = knorm.load_prepared(path)
    assert np.array_equal(w.F, F) and w.fingerprint == P.workload_fingerprint(F)


@pytest.mark.parametrize("field,value,match", [
    ("marginal_sizes", np.array([2, 3, 2, 3]), "its marginal_sizes does not multiply to F's number of cells"),
    ("marginal_sizes", np.array([0, 24]), "its marginal_sizes is not a list of positive whole numbers"),
    ("marginal_cliques", np.array("[[0, 1], [2, 9]]"), "its marginal_cliques is not a list of increasing"),
    ("marginal_cliques", np.array("[[1, 0]]"), "its marginal_cliques is not a list of increasing"),
    ("marginal_cliques", np.array("not json"), "its marginal_cliques is not a JSON list"),
    ("marginal_scale", np.array(0.0), "its marginal_scale is not a finite non-zero number"),
    ("marginal_rows", np.arange(5), "its marginal_rows is not one row index"),
    ("marginal_rows", np.full(F.shape[0], 10**6), "its marginal_rows is not one row index"),
])
def test_a_damaged_structure_is_refused_by_name(saved, tmp_path, field, value, match):
    _, arrays = saved
    with pytest.raises(ValueError, match=match) as e:
        knorm.load_prepared(_write(tmp_path, {**arrays, field: value}))
    assert "\n" not in str(e.value)


def test_a_valid_but_other_structure_is_another_matrix(saved, tmp_path):
    """Rows swapped: a consistent structure of another F, refused by the fingerprint."""
    _, arrays = saved
    rows = arrays["marginal_rows"].copy()
    rows[[0, 1]] = rows[[1, 0]]
    with pytest.raises(ValueError, match="was prepared for another matrix"):
        knorm.load_prepared(_write(tmp_path, {**arrays, "marginal_rows": rows}))
