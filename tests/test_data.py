"""knorm.data: declared domains, histograms of tables, marginal workloads and named tables."""

import itertools

import numpy as np
import pytest

import knorm
from knorm import workloads as W
from knorm.data import Attribute, Domain, histogram, marginal_keys, marginal_workload, split_marginals


def binned_domain():
    return Domain([Attribute("a", edges=[0.0, 1.0, 2.5, 4.0]), Attribute("b", edges=[-1.0, 0.0, 1.0])])


def random_table(seed, N=500):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(0.0, 4.0, N), rng.uniform(-1.0, 1.0, N)])


# ---- Domain and Attribute validation ----------------------------------------------------------

def test_domain_shape_size_names_and_labels():
    dom = Domain([Attribute("x", edges=[0, 1, 2]), Attribute("c", categories=["u", "v", "w"])])
    assert dom.shape == (2, 3) and dom.size == 6 and dom.names == ("x", "c") and len(dom) == 2
    assert dom["x"].labels == ("[0, 1)", "[1, 2]") and dom["c"].labels == ("u", "v", "w")
    assert knorm.data.Domain is Domain
    with pytest.raises(KeyError):
        dom["nope"]


@pytest.mark.parametrize("kwargs,match", [
    (dict(edges=[0.0]), "at least 2"),
    (dict(edges=[0, 1, 1]), "strictly increasing"),
    (dict(edges=[0, 2, 1]), "strictly increasing"),
    (dict(edges=[np.inf, 0]), "finite"),
    (dict(edges=[0, np.nan]), "finite"),
    (dict(edges=["a", "b"]), "real numbers"),
    (dict(categories=[]), "not be empty"),
    (dict(categories=[1, 1.0]), "unique"),
    (dict(categories=["a", "a"]), "unique"),
    (dict(categories=[1.0, np.nan]), "finite"),
    (dict(categories="abc"), "list of values"),
    (dict(categories=[[1, 2]]), "string, a number"),
    (dict(), "exactly one"),
    (dict(categories=[1], edges=[0, 1]), "exactly one"),
    (dict(edges=[0, 1, 2], labels=["one"]), "labels"),
])
def test_attribute_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Attribute("col", **kwargs)


def test_domain_validation():
    a = Attribute("a", edges=[0, 1])
    with pytest.raises(ValueError, match="not be empty"):
        Domain([])
    with pytest.raises(ValueError, match="unique.*'a'"):
        Domain([a, Attribute("a", categories=[1])])
    with pytest.raises(ValueError, match="Attribute"):
        Domain([a, "b"])
    with pytest.raises(ValueError, match="list"):
        Domain(a)
    with pytest.raises(ValueError, match="name"):
        Attribute("", edges=[0, 1])


# ---- histogram: counts against numpy ----------------------------------------------------------

def test_histogram_of_binned_columns_matches_histogramdd():
    """Same bins, same convention (left-closed, last bin closed): np.histogramdd's counts, C order."""
    dom, T = binned_domain(), random_table(0)
    T[:3] = [[0.0, -1.0], [4.0, 1.0], [2.5, 0.0]]  # the edges themselves, including both outer ones
    x = histogram(T, dom)
    ref, _ = np.histogramdd(T, bins=[dom["a"].edges, dom["b"].edges])
    assert x.dtype == np.int64 and x.shape == (6,)
    assert np.array_equal(x, ref.ravel().astype(np.int64)) and x.sum() == len(T)


def test_histogram_of_categories_matches_bincount():
    """Two categorical columns: cell = i·|b| + j (C order), so x = bincount of that index."""
    rng = np.random.default_rng(1)
    i, j = rng.integers(0, 3, 400), rng.integers(0, 2, 400)
    letters = np.array(["lo", "mid", "hi"])
    dom = Domain([Attribute("s", categories=["lo", "mid", "hi"]), Attribute("k", categories=[10, 20])])
    table = {"s": letters[i], "k": np.array([10, 20])[j]}
    x = histogram(table, dom)
    assert np.array_equal(x, np.bincount(i * 2 + j, minlength=6))


def test_numpy_structured_mapping_and_pandas_inputs_agree():
    pd = pytest.importorskip("pandas")
    dom, T = binned_domain(), random_table(2)
    ref = histogram(T, dom)
    rec = np.zeros(len(T), dtype=[("b", float), ("z", int), ("a", float)])
    rec["a"], rec["b"] = T[:, 0], T[:, 1]
    frame = pd.DataFrame({"other": 1.0, "b": T[:, 1], "a": T[:, 0]})
    assert np.array_equal(histogram(rec, dom), ref)  # fields by attribute name
    assert np.array_equal(histogram(frame, dom), ref)  # columns by attribute name
    assert np.array_equal(histogram({"a": T[:, 0], "b": T[:, 1]}, dom), ref)
    assert np.array_equal(histogram(T[:, ::-1], dom, columns=[1, 0]), ref)  # positions
    assert np.array_equal(histogram(frame.rename(columns={"a": "A"}), dom, columns={"a": "A", "b": "b"}), ref)


def test_pandas_categorical_and_nullable_columns():
    pd = pytest.importorskip("pandas")
    dom = Domain([Attribute("c", categories=["x", "y"]), Attribute("v", edges=[0, 5, 10])])
    frame = pd.DataFrame({"c": pd.Categorical(["x", "y", "y", "x"]), "v": pd.array([1, 7, 10, 5], dtype="Int64")})
    assert np.array_equal(histogram(frame, dom), [1, 1, 0, 2])  # cells (x,[0,5)) (x,[5,10]) (y,…) (y,…)
    frame.loc[2, "v"] = pd.NA
    with pytest.raises(ValueError, match="'v'.*missing"):
        histogram(frame, dom)


def test_numeric_categories_match_by_value():
    dom = Domain([Attribute("sex", categories=[1, 2])])
    assert np.array_equal(histogram(np.array([[1.0], [2.0], [2.0]]), dom), [1, 2])
    with pytest.raises(ValueError, match="'sex'.*not among the declared categories"):
        histogram(np.array([[1.0], [3.0]]), dom)
    with pytest.raises(ValueError, match="'sex'.*not among"):  # the string "1" is not the number 1
        histogram({"sex": np.array(["1", "2"], dtype=object)}, dom)


def test_empty_table_gives_zeros():
    assert np.array_equal(histogram(np.empty((0, 2)), binned_domain()), np.zeros(6, dtype=np.int64))


# ---- out-of-domain values: an error naming the column, or clipped; never dropped -------------

def test_out_of_domain_raises_naming_the_column():
    dom = binned_domain()
    with pytest.raises(ValueError, match="attribute 'b': some values lie outside the declared range"):
        histogram(np.array([[1.0, 0.5], [1.0, 1.5]]), dom)
    with pytest.raises(ValueError, match="attribute 'a': some values are missing"):
        histogram(np.array([[np.nan, 0.5]]), dom)
    with pytest.raises(ValueError, match="'a'.*must be numbers"):
        histogram({"a": np.array(["x"]), "b": np.array([0.0])}, dom)


def test_clip_counts_outside_values_in_the_end_bins():
    """clip=True: -3 → first bin of a, 9 → last bin of a, 5 → last bin of b; every record counted once."""
    dom = binned_domain()
    T = np.array([[-3.0, 0.5], [9.0, -0.5], [1.0, 5.0]])
    x = histogram(T, dom, clip=True)
    expect = np.zeros((3, 2), dtype=np.int64)
    expect[0, 1] += 1
    expect[2, 0] += 1
    expect[1, 1] += 1
    assert np.array_equal(x, expect.ravel()) and x.sum() == 3
    cat = Domain([Attribute("c", categories=["x"])])
    with pytest.raises(ValueError, match="clip does not apply"):
        histogram({"c": np.array(["y"])}, cat, clip=True)
    with pytest.raises(ValueError, match="clip must be"):
        histogram(T, dom, clip=1)


def test_table_and_columns_validation():
    dom = binned_domain()
    with pytest.raises(ValueError, match="3 columns but the domain has 2"):
        histogram(np.zeros((4, 3)), dom)
    with pytest.raises(ValueError, match="2-D"):
        histogram(np.zeros(4), dom)
    with pytest.raises(ValueError, match="one column per attribute"):
        histogram(np.zeros((4, 3)), dom, columns=[0])
    with pytest.raises(ValueError, match="not a column index"):
        histogram(np.zeros((4, 3)), dom, columns=[0, 3])
    with pytest.raises(ValueError, match="'b' is not a key"):
        histogram({"a": np.zeros(2)}, dom)
    with pytest.raises(ValueError, match="missing \\['b'\\]"):
        histogram({"a": np.zeros(2)}, dom, columns={"a": "a"})
    with pytest.raises(ValueError, match="different lengths"):
        histogram({"a": np.zeros(2), "b": np.zeros(3)}, dom)
    with pytest.raises(ValueError, match="domain must be"):
        histogram(np.zeros((1, 2)), [(0, 1)])


# ---- marginals: the workload, the keys and the named tables ------------------------------------

def small_domain():
    return Domain([Attribute("p", categories=["a", "b"]), Attribute("q", edges=[0, 1, 2, 3]),
                   Attribute("r", categories=[0, 1]), Attribute("s", edges=[0, 10, 20])])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_split_marginals_round_trip(k):
    """F x for the k-way marginal workload, split by attribute set, equals x summed over the other
    axes (numpy's sum over the C-order cube): the inverse of stacking those tables."""
    dom = small_domain()
    x = np.random.default_rng(3).integers(0, 9, dom.size)
    F = marginal_workload(dom, k)
    assert np.array_equal(F, W.marginals(dom.shape, k))
    tables = split_marginals(dom, k, F @ x)
    assert list(tables) == marginal_keys(dom, k)
    cube = x.reshape(dom.shape)
    for attrs in itertools.combinations(range(4), k):
        key = tuple(dom.names[a] for a in attrs)
        other = tuple(a for a in range(4) if a not in attrs)
        assert np.array_equal(tables[key], cube.sum(axis=other))
    stacked = np.concatenate([t.ravel() for t in tables.values()])
    assert np.array_equal(stacked, F @ x)


def test_split_marginals_batch_and_validation():
    dom = small_domain()
    F = marginal_workload(dom, 2)
    A = np.random.default_rng(4).normal(size=(5, F.shape[0]))
    batch = split_marginals(dom, 2, A)
    one = split_marginals(dom, 2, A[3])
    assert batch[("p", "q")].shape == (5, 2, 3)
    assert all(np.array_equal(batch[key][3], one[key]) for key in one)
    with pytest.raises(ValueError, match="answers must have shape"):
        split_marginals(dom, 2, A[:, :-1])
    with pytest.raises(ValueError, match="k=5 exceeds"):
        marginal_keys(dom, 5)
    with pytest.raises(ValueError, match="k must be"):
        marginal_workload(dom, 0)


# ---- issue 17: complex values and non-finite answers --------------------------------------------

@pytest.mark.parametrize("values", [np.array([0.5 + 1j, 1.5]), np.array([0.5 + 0j, 1.5]),
                                    np.array([0.5 + 1j, 1.5], dtype=object)])
def test_complex_values_are_refused_not_truncated(values):
    """histogram used to drop the imaginary part (0.5+1j counted as 0.5)."""
    dom = Domain([Attribute("a", edges=[0, 1, 2])])
    with pytest.raises(ValueError, match=r"^attribute 'a': values must be real, got complex"):
        histogram(values[:, None], dom)
    cats = Domain([Attribute("c", categories=[0.5, 1.5])])  # 0.5+0j == 0.5: matched by value before
    with pytest.raises(ValueError, match=r"^attribute 'c': values must be real"):
        cats.attributes[0].discretise(values)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_split_marginals_refuses_non_finite_answers(bad):
    dom = Domain([Attribute("a", categories=[0, 1]), Attribute("b", categories=[0, 1, 2])])
    answers = np.arange(5.0)
    answers[2] = bad
    with pytest.raises(ValueError, match=r"^answers contains 1 NaN or infinite entries"):
        split_marginals(dom, 1, answers)
    with pytest.raises(ValueError, match=r"^answers must be real"):
        split_marginals(dom, 1, np.ones(5, dtype=bool))


def test_integers_past_float64_are_refused_or_matched_exactly():
    binned = Attribute("a", edges=[0, 1, 2])
    with pytest.raises(ValueError, match=r"^attribute 'a': binned values must be numbers within float64"):
        binned.discretise(np.array([10**400, 1], dtype=object))  # was OverflowError
    cats = Attribute("c", categories=[0, 1, 10**400])
    assert cats.discretise([10**400, 0]).tolist() == [2, 0]  # an exact label
    with pytest.raises(ValueError, match=r"^attribute 'c': some values are not among"):
        cats.discretise(np.array([1e300]))  # compared with 10**400: no match (was OverflowError)


def test_open_ended_and_right_closed_bins_as_pandas_cut():
    """Issue 44: ±inf end edges (open-ended bins) and right-closed bins (pandas.cut's default), the
    same codes as pandas.cut; inf inside the edges and NaN are refused by name."""
    pd = pytest.importorskip("pandas")
    values = [-1e9, -0.5, 0.0, 0.1, 5.0, 6.0, 6.1, 12.0, 1e300]
    for edges, right in (([-np.inf, 0, 6, 12, np.inf], True), ([-np.inf, 0, 6, 12, np.inf], False),
                         ([0, 5, 10, 15, np.inf], False)):
        a = Attribute("v", edges=edges, right=right)
        want = pd.cut(values, edges, right=right, labels=False)
        ok = ~np.isnan(want)
        assert np.array_equal(a.discretise(np.array(values)[ok]), want[ok].astype(int)), (edges, right)
    assert Attribute("v", edges=[-np.inf, 0, 6], right=True).labels == ("(-inf, 0]", "(0, 6]")
    assert Attribute("v", edges=[0, 6, 12], right=True).labels == ("[0, 6]", "(6, 12]")
    assert Attribute("v", edges=[0, 6, np.inf]).labels == ("[0, 6)", "[6, inf)")
    assert Attribute("v", edges=[0, 6, 12], right=True).discretise([0.0, 6.0, 12.0]).tolist() == [0, 0, 1]
    for bad in ([0, np.inf, 5], [np.inf, 5], [0, 1, -np.inf], [0, np.nan]):
        with pytest.raises(ValueError, match="edges must be numbers, finite but for an open end"):
            Attribute("v", edges=bad)
    with pytest.raises(ValueError, match="right applies to edges"):
        Attribute("v", categories=["a"], right=True)


def test_region_labels_are_the_declared_categories_even_from_a_float_column():
    """Issue 50: region labels came out as '1.0' … '7.0' when the codes were declared from a pandas
    float column (its unique values are floats); a whole float is labelled as its integer, as declared."""
    from knorm.data import histograms

    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"edu": [1.0, 2.0, 7.0, 7.0], "a": [0, 1, 0, 1]})
    dom = Domain([Attribute("a", categories=[0, 1])])
    want = tuple(str(k) for k in range(1, 8))
    for cats in (list(range(1, 8)), [float(k) for k in range(1, 8)], list(np.arange(1.0, 8.0)),
                 sorted(pd.Series(np.arange(1.0, 8.0)).unique())):
        X, labels = histograms(df, dom, by=Attribute("edu", categories=cats))
        assert labels == want, labels
        assert X.sum() == 4 and X[6].sum() == 2
    assert Attribute("v", categories=[0.5, 2.0, True, "x"]).labels == ("0.5", "2", "True", "x")
    assert Attribute("v", categories=[1.0, 2.0], labels=["1.0", "two"]).labels == ("1.0", "two")  # given: kept
