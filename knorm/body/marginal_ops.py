"""A marginal workload used as an operator, never materialised (issue 49): ``F = scale·M[rows]``
(:class:`~knorm.body.marginal.MarginalMatch`) answers, fingerprints and sizes itself from its
structure alone.

* :func:`canonical`: the match in the form :func:`~knorm.body.marginal.recognise` finds from F's
  entries (adjacent attributes in the same cliques merged, cliques in order of their first row,
  repeated cliques one), so a workload known by its structure and the same matrix recognised from
  its entries build the same body, bit for bit.
* :func:`complete`: whether every column of F is non-zero and distinct (every attribute lies in a
  clique all of whose rows are queries): then the body needs nothing of F but the structure.
* :func:`answers`: ``F x`` for rows of x by marginal sums (``n`` additions per clique, no d × n
  product): exact on counts below 2⁵³, the correctly rounded ``scale·(integer sum)``.
* :func:`column_counts`: how many queries contain each cell (``‖f_j‖₁ = |scale|·count_j``,
  ``‖f_j‖₂ = |scale|·√count_j``).
* :func:`fingerprint_of`: the SHA-256 of F's float64 bytes exactly as
  :func:`knorm._fingerprint.fingerprint` of the dense matrix, from rows made a piece at a time.
* :func:`project_rows`: ``UᵀF`` (k × n) summed over F's rows a piece at a time, the same bits for
  the structure and for the dense matrix (NIM's levels, the SVD Gaussian's ``WᵀF``).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validate import check_memory
from .marginal import MarginalMatch, MarginalStructure, spectrum_size

__all__ = ["canonical", "complete", "answers", "column_counts", "dense_marginal", "fingerprint_of",
           "as_marginal", "rank_bound", "check_body_memory", "project_rows", "ROW_CHUNK"]

ROW_CHUNK = 64  # rows of F made at a time (_row_chunks) (64 × 65,536 cells: 32 MB)
FINGERPRINTS = 8  # structures whose fingerprints are kept (fingerprint_of)
_FINGERPRINTS: OrderedDict[tuple[Any, ...], str] = OrderedDict()


def _offsets(structure: MarginalStructure) -> NDArray[np.int64]:
    """The first row of each clique's table in M, and M's row count last."""
    sizes = [math.prod(structure.shape[a] for a in c) for c in structure.cliques]
    return np.cumsum([0] + sizes).astype(np.int64)


def _clique_of_rows(structure: MarginalStructure, rows: NDArray[np.int64]) -> NDArray[np.int64]:
    """The clique index of each row of M named in ``rows`` (−1 for a zero row)."""
    offs = _offsets(structure)
    q = np.searchsorted(offs, rows, side="right") - 1
    return np.where(rows >= 0, q, -1)


def canonical(match: MarginalMatch) -> MarginalMatch:
    """``match`` in :func:`~knorm.body.marginal.recognise`'s form: attributes of size 1 dropped,
    adjacent attributes that lie in the same live cliques merged (C order is kept, so each
    table's rows keep their order), cliques in order of their first query, a clique named twice
    one clique. The same F, described canonically."""
    st = match.structure
    rows = np.asarray(match.rows, np.int64)
    q_of = _clique_of_rows(st, rows)
    live = [st.cliques[int(q)] for q in np.unique(q_of[q_of >= 0])]
    keep = [a for a, s in enumerate(st.shape) if s > 1]
    member = {a: tuple(a in c for c in live) for a in keep}
    groups: list[list[int]] = []
    for a in keep:
        if groups and member[groups[-1][0]] == member[a]:
            groups[-1].append(a)
        else:
            groups.append([a])
    shape = tuple(math.prod(st.shape[a] for a in g) for g in groups) or (1,)
    new_of = {a: i for i, g in enumerate(groups) for a in g}
    cliques: list[tuple[int, ...]] = []  # in order of their first query, each once
    index: dict[tuple[int, ...], int] = {}
    target = np.full(len(rows), -1, np.int64)
    for i, q in enumerate(q_of):
        if q >= 0:
            c = tuple(sorted({new_of[a] for a in st.cliques[int(q)] if a in new_of}))
            target[i] = index.setdefault(c, len(cliques))
            if target[i] == len(cliques):
                cliques.append(c)
    new = MarginalStructure(shape, tuple(cliques))
    old_offs, new_offs = _offsets(st), _offsets(new)
    out = np.full(len(rows), -1, np.int64)
    alive = rows >= 0
    out[alive] = new_offs[target[alive]] + (rows[alive] - old_offs[q_of[alive]])
    return MarginalMatch(new, float(match.scale), out)


def complete(match: MarginalMatch) -> bool:
    """Whether every attribute of size > 1 lies in a clique all of whose table rows are queries:
    then F's columns are non-zero and pairwise distinct (two cells differ in some attribute, and
    a complete table holding it tells them apart)."""
    st = match.structure
    offs = _offsets(st)
    present = np.zeros(st.rows, bool)
    present[match.rows[match.rows >= 0]] = True
    whole = [c for q, c in enumerate(st.cliques) if present[offs[q]:offs[q + 1]].all()]
    if not whole:
        return False
    covered = set(a for c in whole for a in c)
    return all(a in covered for a, s in enumerate(st.shape) if s > 1)


def _tables(structure: MarginalStructure, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Every clique's table of each row of X (m, n): (m, M rows), by sums over the other axes."""
    m = X.shape[0]
    Y = X.reshape((m,) + structure.shape)
    out = []
    k = len(structure.shape)
    for c in structure.cliques:
        axes = tuple(1 + a for a in range(k) if a not in c)
        out.append(Y.sum(axis=axes).reshape(m, -1) if axes else Y.reshape(m, -1))
    return np.concatenate(out, axis=1)


def answers(match: MarginalMatch, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """``F x`` for x (n,) or each row of X (m, n): (d,) or (m, d), by marginal sums."""
    X = np.asarray(X, dtype=np.float64)
    T = _tables(match.structure, np.atleast_2d(X))
    live = match.rows >= 0
    out = np.zeros((T.shape[0], len(match.rows)))
    out[:, live] = T[:, match.rows[live]] * match.scale
    return out[0] if X.ndim == 1 else out


def column_counts(match: MarginalMatch) -> NDArray[np.int64]:
    """Per cell, how many rows of F contain it (F's column ℓ₁ norm over ``|scale|``). Memory checked
    first (three arrays over the cells): a one-line ValueError naming F."""
    st = match.structure
    check_memory("F", None, 8.0 * 3 * st.cells)
    per = np.bincount(match.rows[match.rows >= 0], minlength=st.rows).astype(np.float64)
    n = st.cells
    out = np.zeros(n)
    offs = _offsets(st)
    shape = st.shape
    k = len(shape)
    for q, c in enumerate(st.cliques):
        t = per[offs[q]:offs[q + 1]].reshape(tuple(shape[a] for a in c))
        view = t.reshape(tuple(shape[a] if a in c else 1 for a in range(k)))
        out += np.broadcast_to(view, shape).reshape(n)
    return out.astype(np.int64)


def _row_chunks(match: MarginalMatch) -> Iterator[NDArray[np.float64]]:
    """F's rows as dense ``(ROW_CHUNK, n)`` arrays (the last one shorter), in order. The cells'
    index of each table is made once per pass and kept while consecutive chunks use it. Memory
    checked before anything is made (the cells' digits, a chunk and its tables' indices): a
    one-line ValueError naming F."""
    st = match.structure
    d, n = match.shape
    check_memory("F", None, 8.0 * n * (len(st.shape) + 3 * ROW_CHUNK))
    offs = _offsets(st)
    q_all = _clique_of_rows(st, match.rows)
    cells = np.indices(st.shape).reshape(len(st.shape), -1)
    codes: dict[int, NDArray[np.int64]] = {}
    for start in range(0, d, ROW_CHUNK):
        rows, q_of = match.rows[start:start + ROW_CHUNK], q_all[start:start + ROW_CHUNK]
        out = np.zeros((len(rows), n))
        here = [int(q) for q in np.unique(q_of[q_of >= 0])]
        codes = {q: codes[q] if q in codes else _cell_codes(st, q, cells) for q in here}
        for q in here:
            mine = np.flatnonzero(q_of == q)
            out[mine] = np.where(codes[q][None, :] == (rows[mine] - offs[q])[:, None], match.scale, 0.0)
        yield out


def _cell_codes(st: MarginalStructure, q: int, cells: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each cell's row in table ``q`` (C order over its attributes); ``cells``: the cells' digits."""
    c = st.cliques[q]
    if not c:
        return np.zeros(st.cells, np.int64)
    return np.ravel_multi_index(tuple(cells[a] for a in c), [st.shape[a] for a in c])


def fingerprint_of(match: MarginalMatch) -> str:
    """``knorm._fingerprint.fingerprint(F)`` of the dense float64 F, its rows made ``ROW_CHUNK`` at
    a time (the same bytes in the same order: dtype, shape, then F in C order). The digests of the
    last ``FINGERPRINTS`` structures are kept (by their shape, cliques, scale and rows: all F is made
    of), so a mechanism and the K-norm mechanism of its first level (NIM) stream F once."""
    st = match.structure
    key = (tuple(int(s) for s in st.shape), tuple(tuple(int(a) for a in c) for c in st.cliques),
           np.float64(match.scale).tobytes(), np.asarray(match.rows, np.int64).tobytes())
    found = _FINGERPRINTS.pop(key, None)
    if found is None:
        h = hashlib.sha256()
        h.update(b"l1:")
        h.update(f"a{np.dtype(np.float64).str}{match.shape}:".encode())
        for chunk in _row_chunks(match):
            h.update(chunk.tobytes())
        found = h.hexdigest()
    _FINGERPRINTS[key] = found
    while len(_FINGERPRINTS) > FINGERPRINTS:
        _FINGERPRINTS.popitem(last=False)
    return found


def project_rows(U: NDArray[np.float64], F: NDArray[np.float64] | MarginalMatch,
                 name: str = "F") -> NDArray[np.float64]:
    """``UᵀF`` (k × n) for U (d × k) and F a dense (d, n) array or a marginal workload by its structure,
    summed over F's rows ``ROW_CHUNK`` at a time (``Σ U[chunk]ᵀ·F[chunk]``, in order): the same
    products in the same order either way, so the structure and its dense matrix give the same bits,
    and F by its structure is never made whole. Memory checked first (the result, one product and,
    for a structure, a piece of F's rows): a one-line ValueError naming ``name``."""
    U = np.asarray(U, dtype=np.float64)
    d, n = F.shape
    if U.ndim != 2 or U.shape[0] != d:
        raise ValueError(f"U must have shape ({d}, k) (one row per row of F), got {U.shape}")
    k = U.shape[1]
    making = isinstance(F, MarginalMatch)
    rows = 2 * ROW_CHUNK + len(F.structure.shape) + 2 if making else 0  # the chunk, its codes, the cells' digits
    check_memory(name, None, 8.0 * n * (2 * k + rows))
    chunks = _row_chunks(F) if making else (F[s:s + ROW_CHUNK] for s in range(0, d, ROW_CHUNK))
    out, part = np.zeros((k, n)), np.empty((k, n))
    for start, chunk in zip(range(0, d, ROW_CHUNK), chunks):
        np.matmul(U[start:start + len(chunk)].T, chunk, out=part)
        out += part
    return out


def rank_bound(match: MarginalMatch) -> int:
    """F's rank at most: ``Σ_S Π_{a∈S} (n_a − 1)`` over the attribute sets S inside a table (the
    product characters its tables span; exactly the rank when every table is whole)."""
    st = match.structure
    live = {st.cliques[int(q)] for q in np.unique(_clique_of_rows(st, match.rows[match.rows >= 0]))}
    return min(len(match.rows), st.cells, spectrum_size(MarginalStructure(st.shape, tuple(sorted(live)))))


def check_body_memory(match: MarginalMatch, name: str = "F") -> None:
    """A one-line ValueError naming ``name`` if the body of F by its structure does not fit: the
    oracle's r × n columns in three working copies and a piece of F's rows, before anything is made."""
    n = match.structure.cells
    check_memory(name, None, 8 * n * (3 * rank_bound(match) + ROW_CHUNK))


def dense_marginal(match: MarginalMatch, name: str = "F") -> NDArray[np.float64]:
    """F as a dense float64 (d, n) array (+0.0 where it is zero), memory checked before allocating:
    a one-line ValueError naming ``name`` if it does not fit."""
    d, n = match.shape
    check_memory(name, None, 8 * d * n + 8 * ROW_CHUNK * n)
    out = np.empty((d, n))
    for start, chunk in zip(range(0, d, ROW_CHUNK), _row_chunks(match)):
        out[start:start + len(chunk)] = chunk
    return out


def as_marginal(F: object) -> MarginalMatch | None:
    """The canonical match of a workload known by its marginal structure: a
    :class:`~knorm.body.marginal.MarginalMatch`, or an object with a ``marginal_match()`` method (a
    :class:`knorm.implicit.ImplicitWorkload`, which finds it from its factors' entries; None where
    it is not a marginal workload). None for anything else (a matrix: recognised from its entries
    where it is needed)."""
    if isinstance(F, MarginalMatch):
        return canonical(_checked(F))
    find = getattr(F, "marginal_match", None)
    if callable(find):
        found = find()
        return canonical(_checked(found)) if isinstance(found, MarginalMatch) else None
    return None


def _checked(match: MarginalMatch) -> MarginalMatch:
    """``match`` if F has finite entries and a non-zero one, else the one-line ValueError naming F
    that a dense F gets (:func:`~knorm.body.hull.validate_matrix`)."""
    if not math.isfinite(float(match.scale)):
        raise ValueError("F contains NaN or infinite entries")
    if match.scale == 0.0 or not np.any(np.asarray(match.rows) >= 0):
        raise ValueError("F has no non-zero column: K = F·B₁ⁿ would be the single point 0")
    return match
