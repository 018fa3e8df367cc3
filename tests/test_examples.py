"""The worked example's own checks. Its `--small` run and the output it prints are checked by
tests/test_docs.py against docs/worked-example.md, which shows them."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_marginals_diabetes_every_record_is_in_the_declared_domain():
    """Every record of the data set falls inside the declared domain (no clipping needed)."""
    pytest.importorskip("sklearn")
    pytest.importorskip("pandas")
    from sklearn.datasets import load_diabetes

    from knorm.data import Domain, histogram

    example = load("marginals_diabetes")
    table = load_diabetes(scaled=False, as_frame=True).frame
    x = histogram(table, Domain([example.ATTRIBUTES[a] for a in example.FULL]))
    assert x.sum() == len(table) == 442


def test_marginals_diabetes_is_private_by_default():
    """Without --seed every mechanism gets rng=None (OS entropy); --seed is the only way to a seeded run."""
    example = load("marginals_diabetes")
    assert example.parse_args([]).seed is None
    assert example.parse_args(["--seed", "3"]).seed == 3


def test_fair_synthetic_every_record_is_in_the_declared_domain():
    """The fair data's 6,366 records all fall inside the domain declared from its documentation."""
    sm = pytest.importorskip("statsmodels.api")
    from knorm.data import Domain, histogram

    example = load("fair_synthetic")
    table = sm.datasets.fair.load_pandas().data
    x = histogram(table, Domain([example.ATTRIBUTES[a] for a in example.FULL]))
    assert x.sum() == len(table) == 6366


def test_fair_synthetic_is_private_by_default():
    example = load("fair_synthetic")
    assert example.parse_args([]).seed is None
    assert example.parse_args(["--seed", "3"]).seed == 3
