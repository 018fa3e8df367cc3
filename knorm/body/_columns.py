"""Numba kernels: the simplex's constraint matrix, the n columns ``f_j`` of F (docs/design.md §2.4).

``A = (ptr, idx, val, dense, rptr, ridx, rval, op, spec)``: the n columns f_j of F (in the
oracle's coordinates), either dense (``dense`` is (n, r), the rows are the f_j) or, when
``dense`` is (0, 0), compressed twice: by columns (f_j has the entries
``val[ptr[j]:ptr[j+1]]`` at rows ``idx[ptr[j]:ptr[j+1]]``) for single columns, and by rows
(row i of F has ``rval[rptr[i]:rptr[i+1]]`` at columns ``ridx[...]``) for Fᵀv, computed as a
scatter of the rows: independent adds, no short dependent dot products.
``op`` (``knorm.body._marginal``) or ``spec`` (``knorm.body._spectral``): for a marginal
workload, the data with which Fᵀv is computed from the workload's structure, by its tables
or by a product transform (dense F then serves single columns only); the empty tuple ``()``
when not used.

The product Fᵀv is chosen by the *type* of A, when a kernel is compiled, not by a test at
run time: an unstructured body's A (``op = spec = ()``) compiles neither the tables nor the
transform into the simplex's kernels, a transform body's compiles the transform only (numba
compiles one specialisation of each kernel per layout, and the body's layout, made in Python,
picks it). Every kernel reads F only through the functions below, so a pivot costs O(nnz)
for sparse F (0/1 workloads) and streams contiguous rows for dense F.
"""

from numba.extending import overload

from .._jit import kernel
from ._marginal import marginal_dots
from ._spectral import spectral_dots

_FM = {"reassoc", "contract"}


@kernel()
def _ncols(A):
    return A[0].shape[0] - 1


@kernel(fastmath=_FM)
def _dot(a, b):
    """``aᵀb`` of two vectors."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@kernel(fastmath=_FM)
def _col_dot(A, j, v):
    """``f_jᵀv``."""
    D = A[3]
    s = 0.0
    if D.shape[0] > 0:
        for i in range(D.shape[1]):
            s += D[j, i] * v[i]
    else:
        ptr, idx, val = A[0], A[1], A[2]
        for k in range(ptr[j], ptr[j + 1]):
            s += val[k] * v[idx[k]]
    return s


@kernel(fastmath=_FM)
def _matrix_dots(A, v, out):
    """``out_j = f_jᵀv`` for every column from F's entries (dense rows, or the row scatter)."""
    D = A[3]
    if D.shape[0] > 0:
        n, r = D.shape
        for j in range(n):
            s = 0.0
            for i in range(r):
                s += D[j, i] * v[i]
            out[j] = s
    else:
        rptr, ridx, rval = A[4], A[5], A[6]
        out[:] = 0.0
        for i in range(rptr.shape[0] - 1):
            vi = v[i]
            if vi != 0.0:
                for k in range(rptr[i], rptr[i + 1]):
                    out[ridx[k]] += vi * rval[k]


def _all_dots(A, v, out):
    """``out_j = f_jᵀv`` for every column (the pivot's pass): by the transform, the tables or
    F's entries, as A's layout says (a numba overload: the choice is made at compile time)."""
    raise TypeError("knorm.body._columns._all_dots is called from numba kernels only")


@overload(_all_dots, jit_options={"nogil": True})
def _all_dots_for(A, v, out):
    """The implementation for A's type: ``spec`` or ``op`` a non-empty tuple, else F's entries."""
    if len(A.types[8]) > 0:
        return lambda A, v, out: spectral_dots(A[8], v, out)
    if len(A.types[7]) > 0:
        return lambda A, v, out: marginal_dots(A[7], v, out)
    return lambda A, v, out: _matrix_dots(A, v, out)


def structured(A):
    """True if A's product ``Fᵀv`` comes from a marginal workload's structure (tables or
    transform: a whole pass far cheaper than n single columns), False if from F's entries."""
    raise TypeError("knorm.body._columns.structured is called from numba kernels only")


@overload(structured, jit_options={"nogil": True})
def _structured_for(A):
    """A constant of A's type (see :func:`_all_dots_for`)."""
    if len(A.types[8]) > 0 or len(A.types[7]) > 0:
        return lambda A: True
    return lambda A: False


@kernel(fastmath=_FM)
def _col_norm2(A, j):
    """``‖f_j‖²``."""
    D = A[3]
    s = 0.0
    if D.shape[0] > 0:
        for i in range(D.shape[1]):
            s += D[j, i] * D[j, i]
    else:
        for k in range(A[0][j], A[0][j + 1]):
            s += A[2][k] * A[2][k]
    return s


@kernel()
def _column(A, j, sign, out):
    """``out ← sign·f_j`` (dense r-vector)."""
    D = A[3]
    if D.shape[0] > 0:
        for i in range(D.shape[1]):
            out[i] = sign * D[j, i]
    else:
        out[:] = 0.0
        ptr, idx, val = A[0], A[1], A[2]
        for k in range(ptr[j], ptr[j + 1]):
            out[idx[k]] = sign * val[k]
