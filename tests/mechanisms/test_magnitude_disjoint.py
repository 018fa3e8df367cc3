"""No answer without noise at huge counts, and parallel composition only where disjointness is known
(issue 51 items 5, 6)."""

from __future__ import annotations

import numpy as np
import pytest

import knorm
import knorm.privacy
from knorm import workloads as W
from knorm.data import Attribute, Domain, histograms
from knorm.mechanisms._base import magnitude_limit
from knorm.mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism

M2 = W.marginals((2, 3, 4), 2)  # 2-way marginals: 26 answers over 24 cells
MAKERS = {
    "laplace": lambda acc: knorm.LaplaceMechanism(M2, epsilon=1.0, accountant=acc),
    "gaussian": lambda acc: knorm.GaussianMechanism(M2, epsilon=1.0, delta=1e-6, accountant=acc),
    "knorm": lambda acc: knorm.KNormMechanism(np.eye(24), epsilon=1.0, accountant=acc),
    "nim": lambda acc: knorm.NIMechanism(W.prefix(24), epsilon=1.0, accountant=acc),
    "hierarchical": lambda acc: knorm.HierarchicalMechanism(M2, epsilon=1.0, accountant=acc),
    "identity": lambda acc: knorm.IdentityMechanism(M2, epsilon=1.0, accountant=acc),
    "residual": lambda acc: knorm.ResidualGaussianMechanism(M2, epsilon=1.0, delta=1e-6, accountant=acc),
}


@pytest.mark.parametrize("size", [2.0**53, 2.0**60, 1e300])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_huge_counts_are_refused_before_anything_is_drawn_or_counted(name, size):
    """A cell of 2^53, 2^60 or 1e300 (+128: a neighbour's answers would round apart): release,
    release(size=…) and release_each refused with one line naming the size's power of two (never
    the value), nothing counted, the generator untouched."""
    acc = knorm.privacy.BudgetAccountant()
    m = MAKERS[name](acc)
    x = np.zeros(m.n)
    x[3] = size + 128
    state = m._rng.bit_generator.state
    for call in (lambda: m.release(x), lambda: m.release(x, size=3),
                 lambda: m.release_each(np.vstack([x, x]), disjoint=True)):
        with pytest.raises(ValueError, match=r"^(x|X): the answers' magnitude .* reaches 2\^-?\d+, where float64's "
                                             r"spacing exceeds 1/2048 of the noise scale") as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and f"{size + 128:g}" not in msg and str(int(min(size, 2**62))) not in msg
    assert m.answers == 0 and acc.spends == [] and m._rng.bit_generator.state == state


def test_the_limit_keeps_the_spacing_below_the_noise_and_ordinary_counts_pass():
    """Laplace at ε = 1 on 2-way marginals (scale 3, grid 2^-9): the limit is 2^43; an answer just
    below it is released on the grid with noise of the right size; 2^43 itself is refused."""
    m = knorm.LaplaceMechanism(M2, epsilon=1.0, rng=0)
    k = m.grid_exponent
    assert k == -9 and magnitude_limit(k) == 2.0**43
    assert np.spacing(magnitude_limit(k) / 2) <= m.scale / 2048  # spacing there at most s·2^-11
    x = np.zeros(m.n)
    x[0] = 2.0**42  # Fx = 2^42 on three answers (its marginals)
    a = m.release(x, size=400)
    noise = a - M2 @ x
    assert abs(np.mean(np.abs(noise)) - m.scale) < 4 * m.scale / np.sqrt(noise.size)  # E|Lap(b)| = b
    x[0] = 2.0**43
    with pytest.raises(ValueError, match=r"reaches 2\^43"):
        m.release(x)


def test_the_cli_refuses_huge_counts(tmp_path, capsys):
    """knorm sample --data with a count of 2^60: exit 1 with the one-line refusal, no output file."""
    from knorm.cli import main

    x = np.zeros(24)
    x[5] = 2.0**60
    np.save(tmp_path / "x.npy", x)
    rc = main(["sample", "--workload", "marginals", "--shape", "2", "3", "4", "--k", "2", "--mechanism", "laplace",
               "--data", str(tmp_path / "x.npy"), "--count", "1", "--out", str(tmp_path / "a.npy"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1 and "the answers' magnitude" in err and "2^43" in err and not (tmp_path / "a.npy").exists()


def test_bounded_and_covariance_mechanisms_check_their_public_bound_or_answer():
    """Bounded Laplace: refused by its public domain bound (not the value); covariance Gaussian: by
    the given answer's size."""
    b = BoundedLaplaceMechanism(2.0**60, 2.0**60 + 4096, epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match=r"^value: the answers' magnitude \(max\(\|lower\|, \|upper\|\)\)"):
        b.release(2.0**60)
    c = CovarianceGaussianMechanism(np.eye(3), 1.0, epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match=r"^answer: the answers' magnitude"):
        c.release(np.array([0.0, 1e300, 0.0]))
    assert b.answers == 0 and c.answers == 0


F = W.marginals((2, 3), 1)


def _regions():
    dom = Domain([Attribute("a", categories=[0, 1]), Attribute("b", categories=[0, 1, 2])])
    rng = np.random.default_rng(0)
    table = {"a": rng.integers(0, 2, 300), "b": rng.integers(0, 3, 300), "r": rng.integers(0, 4, 300)}
    return histograms(table, dom, by=Attribute("r", categories=[0, 1, 2, 3]))[0]


def test_plain_rows_compose_as_answers_on_the_same_data():
    """np.tile(x, (10000, 1)) or [x, x//2, x − x//2]: not known to be disjoint, so R answers: R·ε,
    checked before anything is drawn."""
    x = np.arange(6)
    m = knorm.LaplaceMechanism(F, epsilon=1.0, rng=0)
    m.release_each(np.vstack([x, x // 2, x - x // 2]))
    assert m.privacy.epsilon == 3.0 and m.privacy.datasets == 1
    acc = knorm.privacy.BudgetAccountant(epsilon=5.0)
    m2 = knorm.LaplaceMechanism(F, epsilon=1.0, rng=0, accountant=acc)
    with pytest.raises(knorm.privacy.BudgetExceededError):
        m2.release_each(np.tile(x, (10000, 1)))
    assert m2.answers == 0 and acc.spends == []


def test_histograms_by_a_region_carry_disjointness_and_slices_keep_it():
    """Rows of histograms(by=…), and their row slices: one answer's ε, the claim says why; fancy
    indexing (which may repeat a row), arithmetic and np.asarray lose it."""
    X = _regions()
    assert X.disjoint and X[1:3].disjoint and X[::2].disjoint
    assert not X[[0, 0]].disjoint and not (X + 0).disjoint and not hasattr(np.asarray(X), "disjoint")
    m = knorm.LaplaceMechanism(F, epsilon=1.0, rng=0)
    m.release_each(X)
    p = m.privacy
    assert p.epsilon == 1.0 and p.datasets == 4 and "knorm.data.histograms" in p.composition
    m.reset()
    m.release_each(X[[0, 0, 1]])
    assert m.privacy.epsilon == 3.0
    m.reset()
    m.release_each(np.asarray(X), disjoint=True)
    assert m.privacy.epsilon == 1.0 and "disjoint by the caller's declaration" in str(m.privacy)
    m.reset()
    m.release_each(X, disjoint=False)
    assert m.privacy.epsilon == 4.0
    with pytest.raises(ValueError, match="^disjoint must be None, True or False, got 'yes'$"):
        m.release_each(X, disjoint="yes")
