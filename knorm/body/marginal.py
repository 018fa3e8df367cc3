"""Marginal workloads as operators, recognised from F's entries.

A marginal workload over a product domain (attribute sizes ``shape``, cells in C order)
is described by its cliques (attribute tuples, in row order). :class:`MarginalStructure`
rebuilds the matrix; :func:`recognise` finds the structure of any F whose entries are
``{0, a}`` and whose rows are indicators of cylinder sets of a mixed-radix index of its
columns (rows in any order, duplicated, partial tables, a total row), verified entry by
entry; :func:`marginal_operator` lays out the kernel data with which the oracle computes
``Fᵀv`` in about ``d·r + n·(groups)`` operations instead of ``n·r`` (``knorm.body._marginal``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["MarginalStructure", "MarginalMatch", "marginal_operator", "recognise", "plan_ops",
           "match_arrays", "match_from_arrays"]


@dataclass(frozen=True)
class MarginalStructure:
    """Marginal queries over the product domain ``shape`` (C order): for each clique (an
    increasing tuple of attribute indices), in order, one row per value combination of its
    attributes (C order), the indicator of the matching cells."""

    shape: tuple[int, ...]
    cliques: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        # the tables' rows are in C order over the clique's attributes as listed, and every operator
        # (and canonical()) reads them in increasing attribute order: another order is refused
        for c in self.cliques:
            if any(b <= a for a, b in zip(c, c[1:])) or any(not 0 <= a < len(self.shape) for a in c):
                raise ValueError(f"MarginalStructure: clique {c} must list distinct attributes of the shape "
                                 f"(0 … {len(self.shape) - 1}) in increasing order")

    @property
    def rows(self) -> int:
        return sum(math.prod(self.shape[a] for a in c) for c in self.cliques)

    @property
    def cells(self) -> int:
        return math.prod(self.shape)

    def matrix(self) -> np.ndarray:
        """The ``(rows, cells)`` 0/1 matrix."""
        shape = self.shape
        cells = np.indices(shape).reshape(len(shape), -1).T
        out = np.zeros((self.rows, self.cells))
        i = 0
        for c in self.cliques:
            m = math.prod(shape[a] for a in c)
            idx = np.ravel_multi_index(cells[:, list(c)].T, [shape[a] for a in c]) if c else np.zeros(self.cells, int)
            out[i + idx, np.arange(self.cells)] = 1.0
            i += m
        return out

    def matches(self, F: np.ndarray) -> bool:
        """Whether F is exactly this workload's matrix."""
        return F.shape == (self.rows, self.cells) and bool(np.array_equal(F, self.matrix()))


@dataclass(frozen=True, eq=False)
class MarginalMatch:
    """``F = scale · M[rows]`` for ``M = structure.matrix()``: row i of F is row ``rows[i]``
    of M (``-1``: a zero row). Found by :func:`recognise`."""

    structure: MarginalStructure
    scale: float
    rows: NDArray[np.int64]

    @property
    def shape(self) -> tuple[int, int]:
        """F's ``(d, n)``: its queries and cells."""
        return len(self.rows), self.structure.cells

    def matrix(self) -> np.ndarray:
        """F rebuilt."""
        M = self.structure.matrix() * self.scale + 0.0  # +0.0: no −0.0 where the scale is negative
        return np.where((self.rows >= 0)[:, None], M[np.maximum(self.rows, 0)], 0.0)

    def weights(self, W: np.ndarray) -> np.ndarray:
        """``scale·PᵀW`` (P: F's rows as rows of M), so that ``Fᵀ(W v) = Mᵀ(scale·PᵀW v)``."""
        W = np.asarray(W, dtype=np.float64)
        out = np.zeros((self.structure.rows,) + W.shape[1:])
        live = self.rows >= 0
        np.add.at(out, self.rows[live], W[live])
        return out * self.scale


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def _rectangles(B: np.ndarray, counts: np.ndarray, t: int) -> bool:
    """Whether every row of B, as an ``(n/t, t)`` table, is a rectangle (a product set);
    by blocks of rows, stopping at the first block that is not."""
    d, n = B.shape
    step = max(1, (1 << 20) // n)
    for i in range(0, d, step):
        R = B[i:i + step].reshape(-1, n // t, t)
        if t <= 8:  # numpy's short inner reductions are slow: or the t slices
            hi = R[:, :, 0].copy()
            for k in range(1, t):
                hi |= R[:, :, k]
        else:
            hi = R.any(axis=2)
        if not np.array_equal(hi.sum(axis=1) * R.any(axis=1).sum(axis=1), counts[i:i + step]):
            return False
    return True


def _cliques_at(B: np.ndarray, first: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's clique (bool, rows × attributes) and digits of its first cell, if the row
    is a cylinder set over ``sizes`` (C order): an attribute is free iff the first cell
    (all free digits 0) plus its stride is in the row."""
    strides = [math.prod(sizes[a + 1:]) for a in range(len(sizes))]
    dig = np.stack([(first // st) % s for st, s in zip(strides, sizes)], axis=1)
    rows = np.arange(B.shape[0])
    inc = np.ones(dig.shape, bool)
    for a, st in enumerate(strides):
        zero = dig[:, a] == 0
        nxt = np.minimum(first + st, B.shape[1] - 1)
        inc[:, a] = ~(zero & B[rows, nxt])
    return inc, dig


def recognise(F: np.ndarray) -> MarginalMatch | None:
    """F's marginal structure found from its entries, else None.

    F must be ``a·{0,1}`` (one non-zero value) with every non-zero row the indicator of a
    cylinder set ``{x : x_C = c}`` of a C-order product domain over its columns (attribute
    sizes and cliques unknown, rows in any order). The attributes are the finest chain of
    column strides at which every row is a rectangle, adjacent attributes that appear in
    the same cliques merged; each row's clique and values are read off its first cell.
    The result is verified entry by entry (``F == match.matrix()``), so a wrong guess
    only returns None. Cost about ``O(d·n)`` per stride tried.
    """
    F = np.asarray(F)
    if F.ndim != 2 or F.size == 0 or F.dtype.kind not in "fiu":
        return None
    d, n = F.shape
    B = F != 0
    vals = F[B]
    if vals.size == 0 or not np.all(vals == vals[0]) or not np.isfinite(vals[0]):
        return None
    counts = B.sum(axis=1)
    live = np.flatnonzero(counts)
    B, counts = B[live], counts[live]
    if np.any(n % counts):  # a cylinder set holds n / (its table's size) cells
        return None
    chain = [1]
    for t in _divisors(n)[1:-1]:
        if t % chain[-1] == 0 and _rectangles(B, counts, t):
            chain.append(t)
    chain.append(n)
    sizes = [chain[i + 1] // chain[i] for i in range(len(chain) - 1)][::-1]  # outermost first
    first = np.argmax(B, axis=1)
    inc, _ = _cliques_at(B, first, sizes)
    # merge adjacent attributes that are in the same cliques (one attribute, C order)
    groups = [[0]]
    for a in range(1, len(sizes)):
        (groups[-1].append(a) if np.array_equal(inc[:, a], inc[:, groups[-1][0]]) else groups.append([a]))
    shape = [math.prod(sizes[a] for a in g) for g in groups]
    inc, dig = _cliques_at(B, first, shape)
    keys, first_row, which = np.unique(inc, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first_row)  # cliques in order of their first row
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    which = rank[which.reshape(-1)]
    cliques = tuple(tuple(int(a) for a in np.flatnonzero(keys[q])) for q in order)
    structure = MarginalStructure(tuple(shape), cliques)
    strides = [math.prod(shape[a + 1:]) for a in range(len(shape))]
    offs = np.cumsum([0] + [math.prod(shape[a] for a in c) for c in cliques])
    local = np.zeros(len(live), np.int64)
    cells = np.arange(n)
    for q, c in enumerate(cliques):  # verify: each row is exactly its cylinder set
        mine = np.flatnonzero(which == q)
        code = np.zeros(n, np.int64)
        for a in c:
            local[mine] = local[mine] * shape[a] + dig[mine, a]
            code = code * shape[a] + (cells // strides[a]) % shape[a]
        if not np.array_equal(B[mine], code[None, :] == local[mine, None]):
            return None
    rows = np.full(d, -1, np.int64)
    rows[live] = offs[which] + local
    return MarginalMatch(structure, float(vals[0]), rows)


def _digits(index: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """C-order digits of ``index`` (array) over ``sizes``: list of arrays."""
    out = []
    stride = math.prod(sizes)
    for s in sizes:
        stride //= s
        out.append((index // stride) % s)
    return out


def _plan_cost(shape: tuple[int, ...], cliques: tuple[tuple[int, ...], ...], L: int) -> int:
    """Operations of one product when the first L attributes are outer (see the kernel)."""
    B = math.prod(shape[L:])
    nblocks = math.prod(shape[:L])
    groups = set()
    gather = 0
    outer_only = 0
    for c in cliques:
        O = tuple(a for a in c if a < L)
        if len(O) == len(c):
            outer_only += 1
        else:
            groups.add(O)
            gather += math.prod(shape[a] for a in O) * B
    # gathers cost about twice a contiguous add; a block's loop overheads ~8 adds per group
    return 2 * gather + nblocks * (len(groups) * (B + 8) + outer_only + 8)


def supports(structure: MarginalStructure) -> set[tuple[int, ...]]:
    """The attribute sets S inside some clique: the supports of the spectrum's characters
    (``Π_{a∈S}(m_a − 1)`` of them for each S)."""
    return {S for c in structure.cliques for j in range(len(c) + 1) for S in itertools.combinations(c, j)}


def spectrum_size(structure: MarginalStructure) -> int:
    """``r_Φ``, the rank of the full marginal workload: ``Σ_S Π_{a∈S}(m_a − 1)`` over :func:`supports`
    (:func:`knorm.body.spectral.spectrum` lists the characters)."""
    return sum(math.prod(structure.shape[a] - 1 for a in S) for S in supports(structure))


def owner_of(structure: MarginalStructure, support: set[int]) -> int:
    """The clique whose table a character with this support is spread over (characters' coordinates):
    the smallest table holding the support, the first of equal ones."""
    sizes = [math.prod(structure.shape[a] for a in c) for c in structure.cliques]
    return min((i for i, c in enumerate(structure.cliques) if support <= set(c)), key=lambda i: (sizes[i], i))


def spread_ops(structure: MarginalStructure) -> int:
    """``Σ_k |owner(k)'s table|`` over the spectrum's characters (their count per support S is
    ``Π_{a∈S}(m_a − 1)``): what spreading ŝ over the tables costs."""
    out = 0
    for S in supports(structure):
        c = structure.cliques[owner_of(structure, set(S))]
        out += math.prod(structure.shape[a] - 1 for a in S) * math.prod(structure.shape[a] for a in c)
    return out


def lift_ops(structure: MarginalStructure, r: int, tables: bool) -> float:
    """Operations of a product's first step, the oracle's dual vector taken to the spectrum (``tables``:
    and into the tables): in the characters' coordinates (rank ``r = r_Φ``) a butterfly rotation,
    plus each character spread over its table for the tables; else a dense map
    (``rows·r`` into the tables, ``r_Φ·r`` into the spectrum)."""
    if r != spectrum_size(structure):
        return float((structure.rows if tables else r) * r)
    # measured against the dense map's contiguous products (r = 95, 2-way over 2×3×3×4×4×4): the two
    # levels of plane rotations (knorm.body.characters.ROTATION_LEVELS) about 18 of its operations per
    # coordinate, a character spread over its table (short runs) about 3 per cell (:func:`spread_ops`)
    out = 18.0 * r
    if tables:
        out += 3.0 * spread_ops(structure)
    return out


def plan_ops(structure: MarginalStructure, r: int) -> float:
    """Predicted operations of the operator's product (``t`` from v, :func:`lift_ops`; then the cheapest split)."""
    shape, cliques = structure.shape, structure.cliques
    return lift_ops(structure, r, True) + min(_plan_cost(shape, cliques, L) for L in range(len(shape) + 1))


def dense_into(W: np.ndarray) -> tuple:
    """``M[0]`` of the layout for ``t = W v`` by a dense map (W: rows × r)."""
    W = np.ascontiguousarray(W, dtype=np.float64)
    f0 = np.zeros((0, W.shape[1]))
    return ((W, (f0, f0), np.zeros(0)), np.zeros(0, np.int64), np.zeros((0, 5), np.int64), np.zeros(0),
            np.array([W.shape[0], W.shape[1]], np.int64))


def marginal_operator(structure: MarginalStructure, W: np.ndarray | None, outer: int | None = None,
                      into: tuple | None = None) -> tuple:
    """The kernel layout ``M`` of ``knorm.body._marginal`` for ``Fᵀ(W v)`` (W: rows × r), or, W None,
    for t made from v by ``into`` (the characters' coordinates,
    :func:`knorm.body.characters.character_coordinates`).

    ``outer``: how many leading attributes index the blocks (default: the cheapest split
    by :func:`_plan_cost`); blocks hold the cells of the remaining attributes.
    """
    if (W is None) == (into is None):
        raise ValueError("marginal_operator: give W or into, not both")
    shape, cliques = structure.shape, structure.cliques
    k = len(shape)
    L = min(range(k + 1), key=lambda L: _plan_cost(shape, cliques, L)) if outer is None else outer
    B = math.prod(shape[L:])
    nblocks = math.prod(shape[:L])
    odig = _digits(np.arange(nblocks), shape[:L])
    idig = _digits(np.arange(B), shape[L:])
    offs = np.cumsum([0] + [math.prod(shape[a] for a in c) for c in cliques])
    group_of: dict[tuple[int, ...], int] = {}
    mem_off: list[int] = []
    mem_group: list[int] = []
    mem_outptr: list[int] = [0]
    mem_outoff: list[np.ndarray] = []
    mem_inmap: list[np.ndarray] = []
    oo: list[np.ndarray] = []
    for ci, c in enumerate(cliques):
        cstride = {a: math.prod(shape[b] for b in c if b > a) for a in c}
        O = tuple(a for a in c if a < L)
        I = tuple(a for a in c if a >= L)
        if not I:  # outer attributes only: one table entry per block
            idx = np.full(nblocks, offs[ci], np.int64)
            for a in O:
                idx += odig[a] * cstride[a]
            oo.append(idx)
            continue
        g = group_of.setdefault(O, len(group_of))
        mem_off.append(int(offs[ci]))
        mem_group.append(g)
        combos = _digits(np.arange(math.prod(shape[a] for a in O)), [shape[a] for a in O])
        outoff = np.zeros(len(combos[0]) if O else 1, np.int64)  # table offset of each outer value
        for j, a in enumerate(O):
            outoff += combos[j] * cstride[a]
        mem_outoff.append(outoff)
        mem_outptr.append(mem_outptr[-1] + len(outoff))
        inmap = np.zeros(B, np.int64)  # table offset of each cell of a block
        for a in I:
            inmap += idig[a - L] * cstride[a]
        mem_inmap.append(inmap)
    G = len(group_of)
    g_nout = np.zeros(G, np.int64)
    codes = np.zeros((G, nblocks), np.int64)
    for O, g in group_of.items():
        sizes = [shape[a] for a in O]
        g_nout[g] = math.prod(sizes)
        code = np.zeros(nblocks, np.int64)
        for a in O:
            code = code * shape[a] + odig[a]
        codes[g] = code
    g_vptr = np.zeros(G + 1, np.int64)
    np.cumsum(g_nout * B, out=g_vptr[1:])
    i64 = np.int64
    if into is None:
        assert W is not None
        into = dense_into(W)
    return (into, np.array(mem_off, i64), np.array(mem_group, i64),
            np.array(mem_outptr, i64),
            np.concatenate(mem_outoff).astype(i64) if mem_outoff else np.zeros(0, i64),
            np.array(mem_inmap, i64).reshape(len(mem_inmap), B), g_vptr, g_nout, codes,
            np.array(oo, i64).reshape(len(oo), nblocks), int(B))


def match_arrays(match: MarginalMatch) -> dict[str, np.ndarray]:
    """A match as a file's arrays (``marginal_sizes``, ``marginal_cliques`` as JSON,
    ``marginal_scale``, ``marginal_rows``): a few kilobytes where F's non-zero entries take
    ``d·n/(table size)`` (110 MB for the 3-way marginals of 16 binary attributes)."""
    import json

    return {"marginal_sizes": np.array(match.structure.shape, dtype=np.int64),
            "marginal_cliques": np.array(json.dumps([list(c) for c in match.structure.cliques])),
            "marginal_scale": np.array(match.scale, dtype=np.float64), "marginal_rows": np.asarray(match.rows, np.int64)}


def match_from_arrays(z: dict[str, np.ndarray], d: int, n: int, where: str) -> MarginalMatch:
    """The match of :func:`match_arrays`, checked against F's declared ``(d, n)`` before anything of
    F's size is made: ``ValueError(f"{where} (its marginal_… …)")`` naming the field. The caller
    builds F (:meth:`MarginalMatch.matrix`) and checks its fingerprint."""
    import json

    def bad(field: str, why: str) -> ValueError:
        return ValueError(f"{where} (its {field} {why})")

    shape = z["marginal_sizes"]
    if shape.ndim != 1 or shape.dtype.kind not in "iu" or not len(shape) or np.any(shape < 1):
        raise bad("marginal_sizes", "is not a list of positive whole numbers")
    sizes = tuple(int(s) for s in shape)
    if math.prod(sizes) != n:
        raise bad("marginal_sizes", "does not multiply to F's number of cells")
    try:
        cl = json.loads(str(z["marginal_cliques"]))
        cliques = tuple(tuple(int(a) for a in c) for c in cl)
        ok = all(all(isinstance(a, int) for a in c) for c in cl)
    except (ValueError, TypeError):
        raise bad("marginal_cliques", "is not a JSON list of attribute lists") from None
    if not ok or not cliques or len(cliques) > d or any(
            list(c) != sorted(set(c)) or any(not 0 <= a < len(sizes) for a in c) for c in cliques):
        raise bad("marginal_cliques", "is not a list of increasing attribute indices of marginal_sizes")
    scale = float(z["marginal_scale"])
    if not np.isfinite(scale) or scale == 0.0:
        raise bad("marginal_scale", "is not a finite non-zero number")
    structure = MarginalStructure(sizes, cliques)
    rows = z["marginal_rows"]
    if rows.shape != (d,) or rows.dtype.kind not in "iu" or np.any(rows < -1) or np.any(rows >= structure.rows):
        raise bad("marginal_rows", "is not one row index of the marginal tables (or −1) per row of F")
    return MarginalMatch(structure, scale, rows.astype(np.int64))
