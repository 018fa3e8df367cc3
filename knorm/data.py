"""From a table of records to the histogram ``x`` the mechanisms take, over a DECLARED domain.

A :class:`Domain` is a product of attributes, each either a list of categories or numeric
bin edges; its cells are the points of ``∏ range(size_a)`` in C order (the order of
:func:`knorm.workloads.marginals`), so ``x`` has ``domain.size`` entries. :func:`histogram`
counts the records of a table (numpy 2-D or structured array, a mapping of columns, or a
pandas DataFrame; pandas is optional) in those cells; :func:`marginal_workload` and
:func:`split_marginals` give the k-way marginal queries over the domain and map released
answers back to one named table per set of attributes.

Privacy. The domain must be declared independently of the data: categories and bin edges
from documentation, physical or conventional ranges, never from the records (quantile bins,
the observed minimum and maximum, the categories that happen to occur): a data-dependent
domain is itself a release that no mechanism accounts for. Each record adds 1 to exactly
one cell, so adding or removing one record changes ``x`` by 1 in ℓ₁: the neighbours
``‖x − x'‖₁ <= 1`` of every mechanism's claim. ``x`` is the private data: pass it to a
mechanism's ``release()``, never print or save it.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validate import as_real_array, check_flag, check_memory, is_int, is_real, positive_int, records_array, short_repr
from . import workloads

__all__ = ["Attribute", "Domain", "histogram", "histograms", "marginal_workload", "marginal_keys", "split_marginals"]


def _edges(name: str, edges: ArrayLike) -> tuple[float, ...]:
    e = as_real_array(f"attribute {name!r}: edges", edges).astype(np.float64)
    if e.ndim != 1 or e.size < 2:
        raise ValueError(f"attribute {name!r}: edges must be a 1-D sequence of at least 2 numbers, got shape {e.shape}")
    if np.isnan(e).any() or not np.all(np.isfinite(e[1:-1])) or e[0] == np.inf or e[-1] == -np.inf:
        raise ValueError(f"attribute {name!r}: edges must be numbers, finite but for an open end (-inf first, "
                         "inf last)")
    if not np.all(np.diff(e) > 0):
        raise ValueError(f"attribute {name!r}: edges must be strictly increasing")
    return tuple(float(v) for v in e)


def _categories(name: str, categories: Any) -> tuple[Any, ...]:
    if isinstance(categories, (str, bytes)) or not isinstance(categories, (Sequence, np.ndarray)):
        raise ValueError(f"attribute {name!r}: categories must be a list of values, got {short_repr(categories)}")
    cats = tuple(c.item() if isinstance(c, np.generic) else c for c in categories)
    if not cats:
        raise ValueError(f"attribute {name!r}: categories must not be empty")
    for c in cats:
        if not (isinstance(c, str) or is_real(c) or isinstance(c, bool)):
            raise ValueError(f"attribute {name!r}: a category must be a string, a number or a bool, "
                             f"got {short_repr(c)}")
        if is_real(c) and not is_int(c) and not np.isfinite(c):
            raise ValueError(f"attribute {name!r}: categories must be finite, got {short_repr(c)}")
    if len(set(cats)) != len(cats):  # 1 == 1.0 == True: one category, not three
        raise ValueError(f"attribute {name!r}: categories must be unique, got {list(cats)}")
    return cats


def _label(category: Any) -> str:
    """A category's label as declared: a whole float (a code read from a float column, 7.0) is
    labelled as its integer ("7"), the other values as ``str`` gives them."""
    if isinstance(category, float) and category.is_integer():
        return str(int(category))
    return str(category)


@dataclass(frozen=True, init=False)
class Attribute:
    """One attribute of a :class:`Domain`: ``categories`` (a list of values) OR ``edges``.

    Bins of ``edges = (e_0, …, e_m)`` are ``[e_0, e_1), …, [e_{m−2}, e_{m−1}), [e_{m−1}, e_m]``
    (left-closed, the last also right-closed: numpy's histogram convention), ``m`` bins; with
    ``right=True`` (pandas.cut's default) ``[e_0, e_1], (e_1, e_2], …, (e_{m−1}, e_m]``
    (right-closed, the first also left-closed). ``e_0 = -inf`` and ``e_m = inf`` make the end
    bins open-ended (every other edge finite). ``labels`` name the values for display
    (default: the categories, a whole float as its integer: 7.0 from a float column is "7"; or
    the intervals).
    """

    name: str
    categories: tuple[Any, ...] | None = None
    edges: tuple[float, ...] | None = None
    labels: tuple[str, ...] | None = None
    right: bool = False

    def __init__(self, name: str, *, categories: Sequence[Any] | None = None, edges: ArrayLike | None = None,
                 labels: Sequence[str] | None = None, right: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {short_repr(name)}")
        if (categories is None) == (edges is None):
            raise ValueError(f"attribute {name!r}: give exactly one of categories and edges")
        check_flag("right", right)
        if right and edges is None:
            raise ValueError(f"attribute {name!r}: right applies to edges (bins), not to categories")
        e: Any  # edges, or None when cats is given (exactly one of the two is)
        cats = _categories(name, categories) if categories is not None else None
        e = _edges(name, edges) if edges is not None else None
        size = len(cats) if cats is not None else len(e) - 1
        if labels is None:
            if cats is not None:
                labels = tuple(_label(c) for c in cats)
            else:
                opens = ["["] + ["(" if right else "["] * (size - 1)
                ends = [("]" if right else ")")] * (size - 1) + ["]"]
                labels = tuple(f"{'(' if a == -np.inf else o}{a:g}, {b:g}{')' if b == np.inf else c}"
                               for a, b, o, c in zip(e, e[1:], opens, ends))
        else:
            if isinstance(labels, str) or not isinstance(labels, (Sequence, np.ndarray)) or len(labels) != size:
                raise ValueError(f"attribute {name!r}: labels must be a list of {size} strings, got {short_repr(labels)}")
            labels = tuple(str(v) for v in labels)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "edges", e)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "right", bool(right))

    @property
    def size(self) -> int:
        """Number of values: categories, or bins (``len(edges) − 1``)."""
        return len(self.categories) if self.categories is not None else len(self.edges) - 1  # type: ignore[arg-type]

    def discretise(self, values: ArrayLike, *, clip: bool = False) -> NDArray[np.int64]:
        """Codes ``0 … size−1`` (int64) of ``values``, a 1-D array-like.

        A value outside the domain raises a ValueError naming the attribute: an unknown
        category, a missing value (NaN, None), or a number outside ``[e_0, e_m]``. With
        ``clip=True`` numbers below ``e_0`` go to the first bin and above ``e_m`` to the last
        (so every record is still counted once); unknown categories and missing values raise
        whatever ``clip`` says.
        """
        check_flag("clip", clip)
        v = records_array(f"attribute {self.name!r}: values", values)
        if v.ndim != 1:  # the shape would count the records: only its number of dimensions is named
            raise ValueError(f"attribute {self.name!r}: values must be 1-D (one per record), got a {v.ndim}-D array")
        if np.iscomplexobj(v) or (v.dtype == object and any(isinstance(u, complex) for u in v.tolist())):
            raise ValueError(f"attribute {self.name!r}: values must be real, got complex numbers "
                             "(an imaginary part is never dropped)")
        if self.categories is not None:
            return self._category_codes(v)
        try:
            num = v.astype(np.float64)
        except (ValueError, TypeError, OverflowError):
            raise ValueError(f"attribute {self.name!r}: binned values must be numbers within float64's range, "
                             f"got dtype {v.dtype}") from None
        if np.isnan(num).any():
            raise ValueError(f"attribute {self.name!r}: some values are missing (NaN) and no declared bin holds them; "
                             "recode them to a value of the declared domain before histogram() (how many, and "
                             "which records, is not shown: it comes from the private records)")
        lo, hi = self.edges[0], self.edges[-1]  # type: ignore[index]  # binned: edges is set
        outside = (num < lo) | (num > hi)
        if outside.any():
            if not clip:
                raise ValueError(f"attribute {self.name!r}: some values lie outside the declared range "
                                 f"[{lo:g}, {hi:g}] (pass clip=True to count them in the end bins; how many, and "
                                 "which, is not shown: it comes from the private records)")
            num = np.clip(num, lo, hi)
        if self.right:  # (e_{i}, e_{i+1}]; e_0 itself: the first bin
            codes = np.searchsorted(np.asarray(self.edges), num, side="left") - 1
            return np.maximum(codes, 0).astype(np.int64)
        codes = np.searchsorted(np.asarray(self.edges), num, side="right") - 1
        return np.minimum(codes, self.size - 1).astype(np.int64)  # e_m itself: the last bin

    def _category_codes(self, v: NDArray[Any]) -> NDArray[np.int64]:
        if v.dtype.kind in "biuf":  # numbers: compare by value with each numeric category
            codes = np.full(v.shape[0], -1, dtype=np.int64)
            for i, c in enumerate(self.categories):  # type: ignore[arg-type]  # categorical: set
                if not isinstance(c, str):
                    try:
                        codes[(v == c) & (codes < 0)] = i
                    except OverflowError:  # an int category past float64 equals no float value
                        continue
        else:  # strings, objects (pandas columns): one hash lookup per value; 1 == 1.0, never "1"
            lookup = {c: i for i, c in enumerate(self.categories)}  # type: ignore[arg-type]
            codes = np.fromiter((_lookup(lookup, u) for u in v.tolist()), np.int64, v.shape[0])
        if (codes < 0).any():  # neither the values nor their count: both come from the private records
            declared = short_repr(list(self.categories or ()))
            raise ValueError(f"attribute {self.name!r}: some values are not among the declared categories "
                             f"{declared} (missing values included); declare every "
                             "possible value, or recode the records to declared ones (the values and how many are "
                             "not shown: they come from the private records); clip does not apply to categories")
        return codes


def _lookup(lookup: dict[Any, int], u: Any) -> int:
    """The code of value u, or −1 (unknown, unhashable, or a missing value such as None, NaN, pandas.NA)."""
    try:
        return lookup.get(u, -1)
    except (TypeError, ValueError):
        return -1


class Domain:
    """A declared product domain: ``Domain([Attribute("age", edges=[0, 40, 60, 120]), …])``.

    ``attributes`` (a tuple of :class:`Attribute`, public), ``names``, ``shape`` (values per
    attribute), ``size = ∏ shape`` (cells, the length of x, C order). Declare it from
    documentation or physical ranges, never from the data (see the module docstring).
    """

    def __init__(self, attributes: Sequence[Attribute]) -> None:
        if isinstance(attributes, (str, bytes, Attribute)) or not isinstance(attributes, (Sequence, np.ndarray)):
            raise ValueError(f"attributes must be a list of knorm.data.Attribute, got {type(attributes).__name__}")
        attrs = tuple(attributes)
        if not attrs:
            raise ValueError("attributes must not be empty")
        for a in attrs:
            if not isinstance(a, Attribute):
                raise ValueError(f"attributes must be knorm.data.Attribute objects, got {type(a).__name__}")
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"attributes: names must be unique, repeated: {dup}")
        self.attributes = attrs

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return len(self.attributes)

    def __getitem__(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(name)

    def __repr__(self) -> str:
        parts = ", ".join(f"{a.name}: {a.size}" for a in self.attributes)
        return f"Domain({parts}; {self.size} cells)"

    def discretise(self, table: Any, *, columns: Sequence[Any] | Mapping[str, Any] | None = None,
                   clip: bool = False) -> NDArray[np.int64]:
        """Codes (N, k) int64 of the table's records, one column per attribute (see :func:`histogram`)."""
        cols = _columns(table, self, columns)
        for a, c in zip(self.attributes, cols):  # a scalar has no length: refused by name, not len()'s TypeError
            if c.ndim != 1:
                raise ValueError(f"table: the column of attribute {a.name!r} must be 1-D (one value per record), "
                                 f"got a {c.ndim}-D array")
        if len({len(c) for c in cols}) != 1:  # their lengths count records: not shown
            raise ValueError("table: the attributes' columns have different lengths (one value per record each)")
        codes = [a.discretise(c, clip=clip) for a, c in zip(self.attributes, cols)]
        return np.stack(codes, axis=1)


def _is_dataframe(table: Any) -> bool:
    mod = type(table).__module__ or ""
    return mod.startswith("pandas") and type(table).__name__ == "DataFrame"


def _frame_column(col: Any) -> NDArray[Any]:
    """A pandas column as numpy: numeric columns as float64 with missing values (pandas.NA) as NaN."""
    from pandas.api import types  # pandas is loaded already: the table is a DataFrame

    if types.is_numeric_dtype(col.dtype) and not types.is_bool_dtype(col.dtype):
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    return col.to_numpy()


def _columns(table: Any, domain: Domain, columns: Sequence[Any] | Mapping[str, Any] | None) -> list[NDArray[Any]]:
    """One 1-D column per attribute of ``domain``, in domain order."""
    k = len(domain)
    if columns is None:
        keys = None
    elif isinstance(columns, Mapping):
        missing = [n for n in domain.names if n not in columns]
        extra = sorted(set(columns) - set(domain.names), key=str)
        if missing or extra:
            raise ValueError(f"columns: a mapping needs exactly the attribute names {list(domain.names)}; "
                             f"missing {missing}, unknown {extra}")
        keys = [columns[n] for n in domain.names]
    elif isinstance(columns, (Sequence, np.ndarray)) and not isinstance(columns, (str, bytes)):
        keys = list(columns)
        if len(keys) != k:
            raise ValueError(f"columns must name one column per attribute ({k}), got {len(keys)}")
    else:
        raise ValueError(f"columns must be None, a list (one per attribute) or a mapping, got {short_repr(columns)}")

    if _is_dataframe(table):
        keys = list(domain.names) if keys is None else keys
        for key in keys:
            if key not in table.columns:
                raise ValueError(f"columns: {short_repr(key)} is not a column of the DataFrame")
        return [_frame_column(table[key]) for key in keys]
    if isinstance(table, Mapping):
        keys = list(domain.names) if keys is None else keys
        for key in keys:
            if key not in table:
                raise ValueError(f"columns: {short_repr(key)} is not a key of the table")
        return [records_array(f"columns: {short_repr(key)}", table[key]) for key in keys]
    if isinstance(table, (str, bytes, os.PathLike)):
        raise ValueError(f"table must be the records, not a file name ({short_repr(table)}): read the file first, "
                         "e.g. pandas.read_csv(path) or numpy.loadtxt(path, delimiter=',')")
    arr = records_array("table", table)
    if arr.dtype.names is not None:  # structured array
        keys = list(domain.names) if keys is None else keys
        if arr.ndim != 1:
            raise ValueError(f"table: a structured array must be 1-D (one entry per record), got {arr.ndim}-D")
        for key in keys:
            if key not in arr.dtype.names:
                raise ValueError(f"columns: {short_repr(key)} is not a field of the structured array")
        return [arr[key] for key in keys]
    if arr.ndim != 2:
        raise ValueError(f"table must be a 2-D array (records × columns), a structured array, a mapping of "
                         f"columns or a pandas DataFrame; got a {arr.ndim}-D array")
    if keys is None:
        if arr.shape[1] != k:
            raise ValueError(f"table has {arr.shape[1]} columns but the domain has {k} attributes; "
                             "pass columns= (one column index per attribute)")
        keys = list(range(k))
    for key in keys:
        if not is_int(key) or not -arr.shape[1] <= key < arr.shape[1]:
            raise ValueError(f"columns: {short_repr(key)} is not a column index of a table with {arr.shape[1]} columns")
    return [arr[:, key] for key in keys]


def histogram(table: Any, domain: Domain, *, columns: Sequence[Any] | Mapping[str, Any] | None = None,
              clip: bool = False) -> NDArray[np.int64]:
    """The count vector x (int64, length ``domain.size``, C order over ``domain.shape``).

    ``x[ravel_multi_index(codes, shape)]`` counts the records whose values have those codes.
    ``table``: a 2-D array (records × columns; by default one column per attribute, in order),
    a structured array, a mapping of column name → values, or a pandas DataFrame (by default
    the columns named like the attributes). ``columns``: a list (one column name or index per
    attribute, in domain order) or a mapping attribute name → column.

    Out-of-domain values raise a ValueError naming the attribute and what was declared, never a
    value or a count of the records (the message may end up in logs); ``clip=True`` counts numbers
    outside the edges in the end bins (see :meth:`Attribute.discretise`). No record is ever
    dropped: ``x.sum()`` is the number of records.

    The domain must be declared without looking at the data, and x is private: only a
    mechanism's ``release()`` may let anything computed from it out (module docstring).
    """
    if not isinstance(domain, Domain):
        raise ValueError(f"domain must be a knorm.data.Domain, got {type(domain).__name__}")
    check_memory("domain", None, 8 * domain.size)
    codes = domain.discretise(table, columns=columns, clip=clip)
    if codes.shape[0] == 0:
        return np.zeros(domain.size, dtype=np.int64)
    cells = np.ravel_multi_index(codes.T, domain.shape)
    return np.bincount(cells, minlength=domain.size).astype(np.int64)


class RegionHistograms(np.ndarray):
    """The histograms :func:`histograms` makes: an int64 ndarray (regions, cells) that carries the
    fact that its rows are disjoint data sets (every record counted in one row), so
    :meth:`~knorm.mechanisms.Mechanism.release_each` may use parallel composition.

    ``disjoint`` is True on the array :func:`histograms` returns and on its row slices ``X[a:b]``,
    ``X[a:b:s]`` (s > 0: a subset of the regions, each once); anything else made from it (fancy
    indexing, which may repeat a row, arithmetic, ``np.asarray``, a copy) is a plain array or has
    ``disjoint`` False: then the rows count as answers on the same data.
    """

    disjoint: bool = False

    def __array_finalize__(self, obj: Any) -> None:
        self.disjoint = False  # views, ufunc results, copies: not known to be disjoint

    def __getitem__(self, key: Any) -> Any:
        out = super().__getitem__(key)
        rows = key[0] if isinstance(key, tuple) and len(key) == 2 and key[1] == slice(None) else key
        if (self.disjoint and isinstance(out, RegionHistograms) and out.ndim == 2 and isinstance(rows, slice)
                and (rows.step is None or rows.step > 0) and out.shape[1] == self.shape[1]):
            out.disjoint = True
        return out

    def __reduce__(self) -> Any:  # a pickle is a plain array: nothing vouches for it once it left this process
        return np.asarray(self).__reduce__()


def histograms(table: Any, domain: Domain, *, by: Attribute, columns: Mapping[str, Any] | None = None,
               clip: bool = False) -> tuple[RegionHistograms, tuple[str, ...]]:
    """One histogram per region: ``(X, labels)``, X (regions, ``domain.size``) int64, row r counting
    the records whose ``by`` value is its r-th declared value, in declared order; ``labels`` =
    ``by.labels``. For :meth:`~knorm.mechanisms.Mechanism.release_each` (one answer per region,
    parallel composition).

    ``by``: an :class:`Attribute` that declares every region (``categories``, or ``edges`` for a
    numeric region code), from documentation, never from the data: the rows are every declared
    region, those without records included (all zeros), so neither the rows nor their order
    tells which regions occur. A record of an undeclared region raises a ValueError (the value
    is not shown). ``columns``: a mapping attribute name → column (``by``'s name included, else
    the column named like it), as :func:`histogram`'s; ``clip`` as there (for binned regions too).
    """
    if not isinstance(domain, Domain):
        raise ValueError(f"domain must be a knorm.data.Domain, got {type(domain).__name__}")
    if not isinstance(by, Attribute):
        raise ValueError(f"by must be a knorm.data.Attribute declaring every region (categories=[...]), got "
                         f"{short_repr(by)}; the regions must be declared, not read from the records")
    if by.name in domain.names:
        raise ValueError(f"by: {by.name!r} is an attribute of the domain; the regions must be another attribute")
    if columns is not None and not isinstance(columns, Mapping):
        raise ValueError(f"columns must be None or a mapping attribute name → column, got {short_repr(columns)}")
    check_memory("by", None, 8 * 2 * by.size * domain.size)
    both = Domain([*domain.attributes, by])
    cols = None
    if columns is not None:
        cols = {n: columns.get(n, n) for n in both.names}
    codes = both.discretise(table, columns=cols, clip=clip)
    counts = np.zeros(by.size * domain.size, dtype=np.int64)
    if codes.shape[0]:
        cells = np.ravel_multi_index(codes[:, :-1].T, domain.shape) if len(domain) else np.zeros(len(codes), int)
        counts = np.bincount(codes[:, -1] * domain.size + cells, minlength=by.size * domain.size).astype(np.int64)
    X = counts.reshape(by.size, domain.size).view(RegionHistograms)
    X.disjoint = True  # every record has one value of by: counted in one row
    return X, tuple(by.labels or ())


def _k(domain: Domain, k: int) -> int:
    if not isinstance(domain, Domain):
        raise ValueError(f"domain must be a knorm.data.Domain, got {type(domain).__name__}")
    k = positive_int("k", k)
    if k > len(domain):
        raise ValueError(f"k={k} exceeds the number of attributes {len(domain)}")
    return k


def marginal_keys(domain: Domain, k: int) -> list[tuple[str, ...]]:
    """The attribute-name tuples of the k-way marginals, in the row order of :func:`marginal_workload`."""
    k = _k(domain, k)
    return [tuple(domain.names[a] for a in attrs) for attrs in itertools.combinations(range(len(domain)), k)]


def marginal_workload(domain: Domain, k: int, *, dense: bool = True) -> Any:
    """All k-way marginal queries over the domain: :func:`knorm.workloads.marginals` of ``domain.shape``
    (a d × n matrix), or with ``dense=False`` the same workload by its structure
    (:func:`knorm.implicit.marginals`: nothing of size d·n is made; K-norm, Laplace, Gaussian,
    ``prepare`` and ``recommend`` take it, with the matrix's answers and noise law)."""
    k = _k(domain, k)
    if not check_flag("dense", dense):
        from .implicit import marginals

        return marginals(domain.shape, list(itertools.combinations(range(len(domain)), k)))
    return workloads.marginals(domain.shape, k)


def split_marginals(domain: Domain, k: int, answers: ArrayLike) -> dict[tuple[str, ...], NDArray[np.float64]]:
    """Answers of :func:`marginal_workload` (d,) or a batch (m, d) → ``{(names…): table}``.

    Each table has shape ``(size_a, size_b, …)`` (``(m, size_a, …)`` for a batch), indexed by
    the codes of the attributes named in the key, in domain order: the inverse of stacking the
    k-way marginal tables of x in :func:`marginal_keys` order.
    """
    k = _k(domain, k)
    a = as_real_array("answers", answers)
    combos = list(itertools.combinations(range(len(domain)), k))
    sizes = [tuple(domain.shape[i] for i in attrs) for attrs in combos]
    d = sum(math.prod(s) for s in sizes)
    if a.ndim not in (1, 2) or a.shape[-1] != d:
        raise ValueError(f"answers must have shape ({d},) or (m, {d}) for the {k}-way marginals of {domain!r}; "
                         f"got {a.shape}")
    if a.dtype.kind == "b":
        raise ValueError("answers must be real numbers (released answers), got bools")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"answers contains {int(np.count_nonzero(~np.isfinite(a)))} NaN or infinite entries")
    out, i = {}, 0
    for attrs, s in zip(combos, sizes):
        m = math.prod(s)
        out[tuple(domain.names[j] for j in attrs)] = a[..., i : i + m].reshape(a.shape[:-1] + s)
        i += m
    return out
