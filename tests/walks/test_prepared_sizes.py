"""A prepared file's sizes are checked before anything is allocated (issue 51 item 7): every stored
shape against the header and the machine's memory, one-line errors naming the field."""

from __future__ import annotations

import io
import time
import tracemalloc
import zipfile

import numpy as np
import pytest

import knorm
from knorm import workloads as W

F = W.random_pm1(6, 12, rng=0)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    path = tmp_path_factory.mktemp("sizes") / "pm.knorm"
    knorm.prepare(F, path=path)
    with np.load(path, allow_pickle=False) as z:
        return path, {k: z[k] for k in z.files}


def _write(tmp_path, arrays, name="bad.knorm"):
    p = tmp_path / name
    with open(p, "wb") as f:
        np.savez(f, **arrays)
    return p


@pytest.mark.parametrize("field,value,match", [
    ("matrix_shape", np.array([6, 2 * 10**7]), "its matrix_shape is not its shape"),
    ("matrix_shape", np.array([6.5, 12.0]), "its matrix_shape has shape .* and dtype float64"),
    ("shape", np.array([99, 99]), "its matrix_shape is not its shape"),
    ("shape", np.array([6.5, 12.0]), "its shape has shape .* and dtype float64"),
    ("matrix_indptr", np.arange(3), "its matrix_indptr, matrix_indices or matrix_data do not have the sizes"),
])
def test_a_tampered_size_is_refused_by_name_before_the_matrix_is_made(prepared, tmp_path, field, value, match):
    """matrix_shape (6, 2·10⁷) allocated ≈ 1 GB and ran 6.9 s before the fingerprint refused it; now
    refused in well under a second with under 10 MB allocated; shape (99, 99) and 6.5 refused."""
    path, arrays = prepared
    p = _write(tmp_path, {**arrays, field: value})
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=match) as e:
        knorm.load_prepared(p)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "\n" not in str(e.value) and seconds < 5 and peak < 10 * 2**20, (seconds, peak)


def test_a_shape_other_than_the_given_f_is_refused_by_name(prepared, tmp_path):
    path, arrays = prepared
    p = _write(tmp_path, {**arrays, "shape": np.array([99, 99])})
    with pytest.raises(ValueError, match=r"was prepared for another matrix \(its shape \(99, 99\)\)"):
        knorm.load_prepared(p, F)


def test_a_matrix_beyond_memory_is_refused_before_it_is_made(prepared, tmp_path, monkeypatch):
    """shape and matrix_shape agreeing on (6, 2·10⁷): the dense F (2.9 GB with its copies) is refused by
    the machine's memory (here a 100 MB limit) before it is made."""
    import knorm._validate

    monkeypatch.setattr(knorm._validate, "memory_limit", lambda: 100 * 2**20)
    path, arrays = prepared
    big = np.array([6, 2 * 10**7])
    p = _write(tmp_path, {**arrays, "shape": big, "matrix_shape": big})
    with pytest.raises(ValueError, match=r"its matrix_shape needs about .* GiB, more than the"):
        knorm.load_prepared(p)


def test_an_array_whose_header_declares_more_than_memory_is_refused_unread(prepared, tmp_path):
    """A member whose .npy header declares 10⁶ × 10⁶ floats (8 TB; the file holds 16 bytes of it):
    refused from its header, nothing read."""
    path, arrays = prepared
    p = _write(tmp_path, arrays)
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
    with zipfile.ZipFile(p, "a") as zf:
        zf.writestr("huge.npy", head.getvalue() + bytes(16))
    with pytest.raises(ValueError, match=r"its arrays needs about .* GiB, more than the"):
        knorm.load_prepared(p)
