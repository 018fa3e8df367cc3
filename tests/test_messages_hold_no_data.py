"""No message raised while data is in hand carries a value, a count or a statistic of the records
(issue 26, item 2): histogram, release, the CLI with --data.

Planted data: records whose values, counts and lengths are numbers and strings that appear nowhere
in the declared domain or the workload (PLANTED below). Every error on the way from records to
answers is collected and scanned for them; each must still name the argument at fault.
"""

import numpy as np
import pytest

from knorm import workloads as W
from knorm.data import Attribute, Domain, histogram
from knorm.discrete import RandomizedResponse
from knorm.mechanisms import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism,
                              LaplaceMechanism, NIMechanism, PIdentityMechanism)
from knorm.mechanisms.bounded import BoundedLaplaceMechanism

from cli_helpers import run

N, BAD, OTHER = 4817, 583, 4234  # records, out-of-domain records, a second length: none is declared anywhere
SECRET_VALUE, SECRET_LABEL = 7919.5, "PLANTED-south"
PLANTED = ("4817", "583", "4234", "7919", "PLANTED", "south")


def domain():
    return Domain([Attribute("region", categories=["north", "east", "west"]),
                   Attribute("age", edges=[0, 40, 60, 120]), Attribute("sex", categories=[1, 2])])


def records():
    rng = np.random.default_rng(0)
    return {"region": rng.choice(["north", "east", "west"], N).astype(object), "age": rng.uniform(0, 120, N),
            "sex": rng.integers(1, 3, N)}


def planted(column, value, count=BAD):
    t = records()
    t[column] = t[column].astype(float if isinstance(value, float) else object)
    t[column][:count] = value
    return t


def message(call):
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def assert_clean(text, names):
    leaked = [p for p in PLANTED if p in text]
    assert not leaked, f"the message shows {leaked} from the records: {text}"
    assert "\n" not in text and names in text, text


def test_histogram_messages_hold_nothing_from_the_records():
    dom = domain()
    t = records()
    cases = [
        (lambda: histogram(planted("region", SECRET_LABEL), dom), "attribute 'region'"),
        (lambda: histogram(planted("region", None), dom), "attribute 'region'"),
        (lambda: histogram(planted("sex", SECRET_VALUE), dom), "attribute 'sex'"),
        (lambda: histogram(planted("age", SECRET_VALUE), dom), "attribute 'age'"),
        (lambda: histogram(planted("age", -SECRET_VALUE), dom), "attribute 'age'"),
        (lambda: histogram(planted("age", np.nan), dom), "attribute 'age'"),
        (lambda: histogram({**t, "age": t["age"][:OTHER]}, dom), "table"),
        (lambda: histogram({**t, "age": np.stack([t["age"], t["age"]], 1)}, dom), "attribute 'age'"),
        (lambda: histogram(np.zeros((N, 3, 1)), dom), "table"),
        (lambda: histogram(np.zeros((N, 1, 1)).view([("region", "f8")]), dom), "table"),
    ]
    for call, names in cases:
        assert_clean(message(call), names)


def test_histogram_refuses_a_file_name_and_says_how_to_read_it():
    text = message(lambda: histogram("people.csv", domain()))
    assert "read the file first" in text and "pandas.read_csv" in text and "shape" not in text


F = W.prefix(6)


@pytest.mark.parametrize("make", [
    lambda: LaplaceMechanism(F, epsilon=1.0), lambda: GaussianMechanism(F, epsilon=1.0, delta=1e-6),
    lambda: KNormMechanism(F, epsilon=1.0), lambda: NIMechanism(F, epsilon=1.0),
    lambda: IdentityMechanism(F, epsilon=1.0), lambda: HierarchicalMechanism(F, epsilon=1.0),
    lambda: PIdentityMechanism(F, epsilon=1.0)])
def test_release_messages_hold_nothing_from_x(make):
    m = make()
    x = np.zeros(6)
    cases = [np.arange(N, dtype=float), np.zeros((N, 6)), np.full(OTHER, 1.0),
             np.where(np.arange(6) == 2, -SECRET_VALUE, x), np.where(np.arange(6) == 2, SECRET_VALUE, x),
             np.array([BAD, N, OTHER, 1.5, 0, 0]), np.array(["PLANTED-south"] * 6, dtype=object)]
    for bad in cases:
        assert_clean(message(lambda: m.release(bad)), "x ")
    assert m.answers == 0  # nothing released, nothing spent
    out = m.release(np.array([BAD, N, OTHER, 1.5, 0, -1.0]), allow_noncounts=True)  # said explicitly: accepted
    assert out.shape == (6,) and m.answers == 1


def test_release_refuses_negative_and_fractional_counts_with_the_reason():
    m = LaplaceMechanism(F, epsilon=1.0)
    x = np.array([3, 0, 5, 2, 7, 1], dtype=float)
    for bad in (-x, x + 0.5):
        text = message(lambda: m.release(bad))
        assert "negative or non-integer" in text and "counts" in text and "allow_noncounts=True" in text
    assert m.release(x).shape == (6,) and m.release(x.astype(int)).shape == (6,)
    with pytest.raises(ValueError, match="allow_noncounts must be True or False"):
        m.release(x, allow_noncounts="yes")


def test_other_releases_hold_nothing_from_the_value():
    b = BoundedLaplaceMechanism(0.0, 1.0, epsilon=1.0, delta=1e-6)
    assert_clean(message(lambda: b.release(SECRET_VALUE)), "value")
    assert_clean(message(lambda: b.release(10**400)), "value")
    rr = RandomizedResponse(k=3, epsilon=1.0)
    assert_clean(message(lambda: rr.release(np.array([0, 1, 7919]))), "values")
    assert_clean(message(lambda: rr.estimate_frequencies([0.0, 7919.0])), "reports")


def test_cli_data_messages_hold_nothing_from_x(tmp_path, capsys):
    np.save(tmp_path / "F.npy", F)
    cases = {"long": np.arange(N, dtype=float), "table": np.zeros((N, 6)), "short": np.full(OTHER, 1.0),
             "negative": np.array([0, 0, -SECRET_VALUE, 0, 0, 0]), "fraction": np.array([BAD, N, OTHER, 1.5, 0, 0]),
             "nan": np.array([BAD, N, OTHER, np.nan, 0, 0])}
    for name, x in cases.items():
        np.save(tmp_path / f"{name}.npy", x)
        rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / f"{name}.npy"),
                            "--count", "1", "--out", str(tmp_path / "a.npz")], capsys)
        assert rc == 1 and out == "" and not (tmp_path / "a.npz").exists(), (name, err)
        assert_clean(err.strip().replace(str(tmp_path), "<tmp>"), "--data")


def test_ragged_inputs_hold_nothing_from_the_records():
    """numpy's own message for ragged input states the outer length: here the number of records."""
    ragged = [[1.0, 2.0, 3.0]] * (BAD - 1) + [[1.0]]  # BAD rows, one short
    for call, names in [(lambda: histogram({"region": ragged, "age": ragged, "sex": ragged}, domain()), "columns"),
                        (lambda: histogram(ragged, domain()), "table"),
                        (lambda: LaplaceMechanism(F, epsilon=1.0).release(ragged), "x ")]:
        assert_clean(message(call), names)


@pytest.mark.parametrize("make", [
    lambda: LaplaceMechanism(F, epsilon=1.0), lambda: KNormMechanism(F, epsilon=1.0),
    lambda: NIMechanism(F, epsilon=1.0), lambda: HierarchicalMechanism(F, epsilon=1.0)])
def test_release_each_messages_hold_nothing_from_the_regions(make):
    """A batch of regions (issue 44): neither a value, a row nor a count of regions in any message."""
    m = make()
    X = np.zeros((BAD, 6))
    cases = [np.arange(N, dtype=float), np.zeros((N, 5)), np.zeros((OTHER, 6, 1)),
             np.where(np.arange(6) == 2, -SECRET_VALUE, X), np.where(np.arange(6) == 2, SECRET_VALUE, X),
             np.full((OTHER, 6), np.nan), np.array([["PLANTED-south"] * 6] * 3, dtype=object), [[1.0] * 6, [1.0]] * BAD]
    for bad in cases:
        assert_clean(message(lambda: m.release_each(bad)), "X ")
    assert m.answers == 0


def test_histograms_by_region_messages_hold_nothing_from_the_records():
    by = Attribute("state", categories=["a", "b"])
    t = {**records(), "state": np.array(["a"] * (N - BAD) + [SECRET_LABEL] * BAD, dtype=object)}
    from knorm.data import histograms
    assert_clean(message(lambda: histograms(t, domain(), by=by)), "attribute 'state'")
    assert_clean(message(lambda: histograms({**t, "state": t["state"][:OTHER]}, domain(), by=by)), "table")
