"""The worked examples run (at their small size) and print what they promise."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_marginals_diabetes_small(capsys):
    pytest.importorskip("sklearn")
    pytest.importorskip("pandas")
    example = load("marginals_diabetes")
    assert example.main(["--small", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "Domain(sex: 2, bmi: 4, s6: 3; 24 cells)" in out and "F is 26 x 24" in out
    for name in ("K-norm", "Laplace", "Gaussian"):
        assert f"  {name} " in out
    assert out.count("NOT PRIVATE") == 3  # a seeded run says so for every mechanism
    assert "bmi × s6" in out


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
