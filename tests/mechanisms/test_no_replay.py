"""No noise replayed by a copy, a pickle or a thread (issue 51 items 3, 4): a mechanism whose noise
comes from OS entropy (or a caller's Generator) refuses copy.copy, copy.deepcopy and pickle; a
seeded one copies deterministically and its claim says so; two mechanisms loaded from one prepared
file draw different noise; eight threads on one mechanism all succeed with distinct draws."""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest

import knorm
import knorm.privacy
from knorm import workloads as W
from knorm.discrete import FiniteDomainMechanism, RandomizedResponse
from knorm.functional import GaussianKDEMechanism
from knorm.mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism

P3 = W.prefix(3)
MARG = W.marginals((2, 3), 1)
PM = W.random_pm1(6, 12, rng=0)

MAKERS = {
    "laplace": lambda rng: knorm.LaplaceMechanism(P3, epsilon=1.0, rng=rng),
    "gaussian": lambda rng: knorm.GaussianMechanism(P3, epsilon=1.0, delta=1e-6, rng=rng),
    "knorm-exact": lambda rng: knorm.KNormMechanism(np.eye(3), epsilon=1.0, rng=rng),
    "knorm-mcmc": lambda rng: knorm.KNormMechanism(PM, epsilon=1.0, rng=rng),
    "nim": lambda rng: knorm.NIMechanism(P3, epsilon=1.0, rng=rng),
    "identity": lambda rng: knorm.IdentityMechanism(P3, epsilon=1.0, rng=rng),
    "hierarchical": lambda rng: knorm.HierarchicalMechanism(P3, epsilon=1.0, rng=rng),
    "p-identity": lambda rng: knorm.PIdentityMechanism(P3, epsilon=1.0, p=2, maxiter=20, rng=rng),
    "kronecker": lambda rng: knorm.KroneckerStrategyMechanism(P3, epsilon=1.0, strategies=[np.eye(3)], rng=rng),
    "kronecker-p-identity": lambda rng: knorm.KroneckerPIdentityMechanism(P3, epsilon=1.0, maxiter=20, rng=rng),
    "kronecker-hierarchical": lambda rng: knorm.KroneckerHierarchicalMechanism(P3, epsilon=1.0, rng=rng),
    "residual": lambda rng: knorm.ResidualGaussianMechanism(MARG, epsilon=1.0, delta=1e-6, rng=rng),
    "svd": lambda rng: knorm.SVDGaussianMechanism(P3, epsilon=1.0, delta=1e-6, rng=rng),
    "bounded-laplace": lambda rng: BoundedLaplaceMechanism(0.0, 1.0, epsilon=1.0, delta=1e-6, rng=rng),
    "covariance-gaussian": lambda rng: CovarianceGaussianMechanism(np.eye(3), 1.0, epsilon=1.0, delta=1e-6, rng=rng),
    "randomized-response": lambda rng: RandomizedResponse(k=3, epsilon=1.0, rng=rng),
    "finite-domain": lambda rng: FiniteDomainMechanism(3, epsilon=1.0, rng=rng),
    "kde": lambda rng: GaussianKDEMechanism(np.zeros(4), bandwidth=1.0, epsilon=1.0, delta=1e-6, rng=rng),
}


def _release(m):
    """One release of ``m`` on fixed zero data, as an array (what a copy would replay)."""
    if isinstance(m, BoundedLaplaceMechanism):
        return np.atleast_1d(m.release(0.5, size=4))
    if isinstance(m, CovarianceGaussianMechanism):
        return m.release(np.zeros(3))
    if isinstance(m, (RandomizedResponse, FiniteDomainMechanism)):
        return m.release(np.zeros(64, dtype=int))
    if isinstance(m, GaussianKDEMechanism):
        return m.release()(np.linspace(-1, 1, 5)[:, None])
    return m.release_each(np.zeros((3, m.n)), disjoint=True)


def test_every_mechanism_class_is_covered():
    """Every Accounted subclass the package defines has a maker here (a new one must be added)."""
    from knorm.mechanisms._base import Accounted

    def leaves(c):
        for s in c.__subclasses__():
            yield s
            yield from leaves(s)
    made = {type(make(0)) for make in MAKERS.values()}
    public = {c for c in leaves(Accounted) if not c.__name__.startswith("_") and c.__module__.startswith("knorm")
              and not getattr(c, "__abstractmethods__", None)}
    assert public <= made, sorted(c.__name__ for c in public - made)


@pytest.mark.parametrize("how", ["deepcopy", "copy", "pickle"])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_mechanism_drawing_os_entropy_refuses_to_be_copied(name, how):
    """OS entropy and a caller's Generator: a one-line TypeError naming the class, nothing copied."""
    for rng in (None, np.random.default_rng()):
        m = MAKERS[name](rng)
        _release(m)  # after a release too (the bank, the chains' states)
        do = {"deepcopy": copy.deepcopy, "copy": copy.copy, "pickle": lambda o: pickle.loads(pickle.dumps(o))}[how]
        with pytest.raises(TypeError, match=f"a {type(m).__name__} whose noise comes from .* cannot be copied") as e:
            do(m)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_seeded_mechanism_copies_deterministically_and_says_seed(name):
    """A seeded mechanism may be copied (its noise was never private): the copy continues exactly as
    the original does, and both claims say the noise is from a seed, not private."""
    m = MAKERS[name](7)
    _release(m)
    d = copy.deepcopy(m)
    # p-Identity keeps its solver as a closure: deep-copied, never pickled (whatever its noise source)
    c = copy.deepcopy(m) if name == "p-identity" else pickle.loads(pickle.dumps(m))
    a, b, e = _release(m), _release(c), _release(d)
    assert np.array_equal(a, b) and np.array_equal(a, e)
    for mech in (m, c, d):
        claim = mech.privacy_per_answer
        assert claim.noise_source == "seed" and not claim.private
        assert "NOT PRIVATE" in str(claim)
    assert c._lock is not m._lock  # each copy has its own lock (a lock is never pickled)


def test_two_loads_of_a_prepared_file_draw_different_noise(tmp_path):
    """A prepared file holds public states only: two mechanisms made from it (rng=None) start their
    chains at states and with generators drawn from their own OS entropy: no release repeats."""
    path = tmp_path / "pm.knorm"
    knorm.prepare(PM, path=path)
    a = knorm.KNormMechanism(PM, epsilon=1.0, prepared=knorm.load_prepared(path)).release_each(
        np.zeros((20, 12)), disjoint=True)
    b = knorm.KNormMechanism(PM, epsilon=1.0, prepared=knorm.load_prepared(path)).release_each(
        np.zeros((20, 12)), disjoint=True)
    assert not np.any(np.all(a[:, None, :] == b[None, :, :], axis=2))  # no row of one equals a row of the other


@pytest.mark.parametrize("name", ["knorm-mcmc", "nim", "laplace"])
def test_eight_threads_on_one_mechanism_all_succeed_with_distinct_draws(name):
    """Eight threads releasing at once on one mechanism (release and release_each, a shared
    accountant): every call succeeds, every answer's noise is distinct, every answer is counted."""
    acc = knorm.privacy.BudgetAccountant()
    m = MAKERS[name](None)
    m.accountant = acc
    x = np.zeros(m.n)
    out: list = []
    errors: list = []
    start = threading.Barrier(8)

    def work(i):
        try:
            start.wait()
            for _ in range(3):
                out.append(m.release(x, size=2) if i % 2 else m.release_each(np.zeros((2, m.n)), disjoint=True))
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    rows = np.vstack(out)
    assert len(rows) == 48 and len({r.tobytes() for r in rows}) == 48
    assert m.answers == 4 * 3 * 2 + 4 * 3 and len(acc.spends) == 24
