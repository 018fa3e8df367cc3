"""Marginal workloads as operators: the structure behind :func:`knorm.workloads.marginals`.

A marginal workload over a product domain (attribute sizes ``shape``, cells in C order)
is described by its cliques (attribute tuples, in row order). :class:`MarginalStructure`
rebuilds the matrix and recognises it; :func:`marginal_operator` lays out the kernel data
with which the oracle computes ``Fᵀv`` in about ``d·r + n·(groups)`` operations instead of
``n·r`` (``knorm.body._marginal``).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MarginalStructure", "marginal_operator", "register", "recognise", "empty_operator"]

# Matrices known to be marginal workloads, by content (shape, dtype and bytes): the last
# REGISTRY_SIZE built by knorm.workloads.marginals (or registered). Content keys make a
# copy, or the same matrix rebuilt, recognised too; anything else is simply not.
REGISTRY_SIZE = 32
_REGISTRY: OrderedDict[bytes, MarginalStructure] = OrderedDict()
_LOCK = threading.Lock()


@dataclass(frozen=True)
class MarginalStructure:
    """Marginal queries over the product domain ``shape`` (C order): for each clique (an
    increasing tuple of attribute indices), in order, one row per value combination of its
    attributes (C order), the indicator of the matching cells."""

    shape: tuple[int, ...]
    cliques: tuple[tuple[int, ...], ...]

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


def _key(F: np.ndarray) -> bytes:
    F = np.ascontiguousarray(F, dtype=np.float64)
    return hashlib.blake2b(repr(F.shape).encode() + F.tobytes(), digest_size=20).digest()


def register(F: np.ndarray, structure: MarginalStructure) -> np.ndarray:
    """Remember that F (exactly this content) is ``structure``'s matrix; returns F."""
    key = _key(F)
    with _LOCK:
        _REGISTRY[key] = structure
        _REGISTRY.move_to_end(key)
        while len(_REGISTRY) > REGISTRY_SIZE:
            _REGISTRY.popitem(last=False)
    return F


def recognise(F: np.ndarray) -> MarginalStructure | None:
    """The registered structure whose matrix F is (checked entry by entry), else None."""
    if not _REGISTRY:
        return None
    with _LOCK:
        st = _REGISTRY.get(_key(F))
    return st if st is not None and st.matches(F) else None


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


def plan_speedup(structure: MarginalStructure, r: int) -> float:
    """Predicted ratio of the dense product's operations (n·r) to the operator's."""
    shape, cliques = structure.shape, structure.cliques
    plan = min(_plan_cost(shape, cliques, L) for L in range(len(shape) + 1))
    return structure.cells * r / (structure.rows * r + plan)


def empty_operator() -> tuple:
    """The operator slot of an unstructured matrix (same types, no data)."""
    z1, z2 = np.zeros(0, np.int64), np.zeros((0, 0), np.int64)
    return (np.zeros((0, 0)), z1, z1, z1, z1, z2, np.zeros(1, np.int64), z1, z2, z2, 0)


def marginal_operator(structure: MarginalStructure, W: np.ndarray, outer: int | None = None) -> tuple:
    """The kernel layout ``M`` of ``knorm.body._marginal`` for ``Fᵀ(W v)`` (W: rows × r).

    ``outer``: how many leading attributes index the blocks (default: the cheapest split
    by :func:`_plan_cost`); blocks hold the cells of the remaining attributes.
    """
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
    return (np.ascontiguousarray(np.asarray(W, dtype=np.float64).T), np.array(mem_off, i64), np.array(mem_group, i64),
            np.array(mem_outptr, i64),
            np.concatenate(mem_outoff).astype(i64) if mem_outoff else np.zeros(0, i64),
            np.array(mem_inmap, i64).reshape(len(mem_inmap), B), g_vptr, g_nout, codes,
            np.array(oo, i64).reshape(len(oo), nblocks), int(B))
