"""NIM, the non-isotropic recursive K-norm mechanism (docs/design.md §4.4)."""

from dataclasses import dataclass

import numpy as np

from .._validate import positive_int
from ..body.hull import SymmetricHull
from ..walks.chains import walk_id
from ..walks.sampler import uniform_covariance
from ._base import Mechanism, PrivacyClaim, check_epsilon, check_n_samples, check_size, mc_norm_estimate
from .knorm_mechanism import KNormMechanism, check_sampler_options


@dataclass
class NIMLevel:
    """One level of the recursion.

    ``dim``: dimension k of the current subspace; ``basis`` (d, k): orthonormal basis
    of it in answer space; ``eigenvalues``: of the covariance of Uniform(K_level),
    descending; ``kept`` (d, k - ⌊k/2⌋): the answer-space basis of V, the span of the
    bottom eigenvectors whose noise this level releases (at the last level, all of
    it); ``epsilon``; ``mechanism``: the level's K-norm mechanism on ``basisᵀF``.
    """

    dim: int
    basis: np.ndarray
    eigenvalues: np.ndarray
    kept: np.ndarray
    epsilon: float
    mechanism: KNormMechanism


class NIMechanism(Mechanism):
    """Recursive eigen-split K-norm (Hardt & Talwar's NIM).

    At each level with current subspace of dimension k: estimate the covariance M_K of
    Uniform(K) for ``K = P F``, keep the top ⌊k/2⌋ eigenvectors as U and the rest as V,
    draw ``a`` from the K-norm mechanism of the level, release ``P_V a`` and recurse on
    U; at k = 1 release ``a``. The total ε is split equally over the levels (basic
    composition; ``privacy.composition`` says so). The number of levels is
    ``⌊log₂ r⌋ + 1`` for r = rank F (Hardt & Talwar's ⌈log₂ d⌉ + 1, docs/design.md §4.4, is an upper bound).
    The covariances depend on F only, never on x. ``walk``, ``bank_size``,
    ``sampler_options`` and ``accept_uncertified`` go to every level's K-norm mechanism
    (an uncertified MCMC run raises :class:`~knorm.ConvergenceError` unless
    ``accept_uncertified=True``).
    """

    def __init__(self, F, *, epsilon, walk="billiard", rng=None, bank_size=1000, sampler_options=None,
                 accept_uncertified=False, accountant=None):
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        walk_id(walk)
        positive_int("bank_size", bank_size)
        check_sampler_options(sampler_options)
        body = SymmetricHull(self.F)
        dims = []
        k = body.dim
        while True:
            dims.append(k)
            if k == 1:
                break
            k //= 2
        eps_level = self.epsilon / len(dims)
        self.levels = []
        basis = body.span_basis
        for k in dims:
            Fl = basis.T @ self.F
            mech = KNormMechanism(Fl, epsilon=eps_level, walk=walk, rng=self._rng, bank_size=bank_size,
                                  sampler_options=sampler_options, accept_uncertified=accept_uncertified)
            if k == 1:
                self.levels.append(NIMLevel(1, basis, np.array([np.nan]), basis, eps_level, mech))
                break
            cov = uniform_covariance(mech.body, scaled=False)  # eigenvectors need no scale (F may be 1e±300)
            ev, vec = np.linalg.eigh(cov)
            order = np.argsort(ev)[::-1]
            ev, vec = ev[order], vec[:, order]
            with np.errstate(over="ignore", under="ignore"):  # only the report may leave float64
                ev = ev * np.square(np.float64(mech.body._scale))
            top = k // 2
            self.levels.append(NIMLevel(k, basis, ev, basis @ vec[:, top:], eps_level, mech))
            basis = basis @ vec[:, :top]
        sampling = "exact" if all(lv.mechanism.privacy_per_answer.exact for lv in self.levels) else "mcmc-approximate"
        self._claim = PrivacyClaim(
            "NIM", self.epsilon, 0.0, "pure ε-DP", sampling,
            composition=f"basic composition of {len(self.levels)} K-norm levels at ε/{len(self.levels)} "
                        f"= {eps_level:g} each",
            details={"levels": [lv.dim for lv in self.levels], "epsilon_per_level": eps_level},
        )

    def sample_noise(self, size=None):
        m = check_size(size, self.d)  # refuses what cannot fit, before allocating anything
        total = np.zeros((m or 1, self.d))
        for lv in self.levels:
            a = lv.mechanism.sample_noise(m or 1)  # level coordinates (k)
            a_answer = a @ lv.basis.T              # answer space
            total += (a_answer @ lv.kept) @ lv.kept.T
            self._certified = self._certified and lv.mechanism._certified
        return self._one_or_many(total, m)

    def expected_error(self, n_samples=2000):
        """``E‖noise‖₂`` by Monte Carlo over the mechanism's own noise (with SE)."""
        draws = self.sample_noise(check_n_samples(n_samples))
        exact = self.privacy_per_answer.exact
        return mc_norm_estimate(draws, method=f"Monte Carlo over {n_samples} noise draws"
                                + ("" if exact else " (MCMC-based; SE assumes independent draws)"))
