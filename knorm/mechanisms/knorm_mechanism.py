"""The K-norm mechanism (MATH.md §4): density ∝ exp(−ε‖a − Fx‖_K)."""

import numpy as np

from ..body.hull import SymmetricHull
from ..walks.sampler import sample_uniform
from ._base import (Mechanism, PrivacyClaim, check_epsilon, check_finite_output, check_n_samples, check_size,
                    mc_norm_estimate)


class KNormMechanism(Mechanism):
    """``Fx + r·z`` with ``r ~ Gamma(dim+1, 1/ε)`` and ``z ~ Uniform(K)``, ``K = F·B₁ⁿ``.

    Pure ε-DP when z is exactly uniform: ``‖·‖_K`` is a norm and ``‖F(x−x')‖_K <= 1``.
    ``dim`` is the rank of F; for rank-deficient F the noise lives in the span of F.

    When K is a linear image of the cross-polytope or the cube (identity, prefix,
    diagonal, any invertible F, boxes) z is drawn exactly and ``privacy.sampling`` is
    "exact"; otherwise z comes from the MCMC engine (``walk``) and the claim is
    "mcmc-approximate". Many releases pool their uniform draws in one sampler run:
    each MCMC run is certified (R-hat < 1.01, bulk ESS ≥ half the draws) over at least
    ``bank_size`` draws, and the draws a release does not use are banked for the next
    ones; every draw is used exactly once. ``sampler_options`` are passed on to
    :func:`knorm.sample_uniform` (e.g. ``workers``, ``progress``, ``checkpoint``).
    """

    def __init__(self, F, *, epsilon, walk="billiard", rng=None, body=None, bank_size=1000, sampler_options=None,
                 accountant=None):
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.body = body if body is not None else SymmetricHull(self.F)
        self.walk = walk
        self.dim = self.body.dim
        self.structure = self.body.exact_structure
        sampling = "exact" if self.structure is not None else "mcmc-approximate"
        details = {"dim": self.dim, "walk": None if self.structure is not None else walk}
        if self.structure is not None:
            details["exact_structure"] = self.structure.kind
        self._claim = PrivacyClaim("K-norm", self.epsilon, 0.0, "pure ε-DP", sampling, details=details)
        self.last_info = None
        self.bank_size = int(bank_size)
        self.sampler_options = dict(sampler_options or {})
        self._bank = np.empty((0, self.d))

    def sample_uniform(self, size):
        """``size`` draws of z ~ Uniform(K) (exact or MCMC), ambient coordinates.

        MCMC draws come from the bank of certified draws, refilled by one sampler run
        of ``max(size, bank_size)`` draws when it runs short; ``last_info`` holds the
        diagnostics of the run that produced them.
        """
        if self.structure is not None:
            self.last_info = None
            return self.body.to_ambient(self.structure.sample_frame(size, self._rng))
        if len(self._bank) < size:
            fresh, self.last_info = sample_uniform(self.body, max(size - len(self._bank), self.bank_size),
                                                   walk=self.walk, rng=self._rng, return_info=True,
                                                   **self.sampler_options)
            self._bank = np.vstack([self._bank, fresh])
        z, self._bank = self._bank[:size], self._bank[size:]
        return z

    def sample_noise(self, size=None):
        m = check_size(size)
        z = self.sample_uniform(m or 1)
        r = self._rng.gamma(self.dim + 1, 1.0 / self.epsilon, size=len(z))
        with np.errstate(over="ignore"):  # an overflow raises in check_finite_output
            noise = r[:, None] * z
        return self._one_or_many(check_finite_output(noise, "K-norm noise"), m)

    def expected_error(self, n_samples=4000):
        """``E‖noise‖₂ = (dim+1)/ε · E‖z‖₂``, with E‖z‖₂ estimated from uniform draws.

        The standard error uses the sampler's min bulk ESS for MCMC draws.
        """
        z = self.sample_uniform(check_n_samples(n_samples))
        ess = None
        if self.last_info is not None:
            ess = min(n_samples, self.last_info.min_ess * n_samples / self.last_info.draws)
        how = "exact" if self.structure is not None else f"MCMC ({self.walk})"
        return mc_norm_estimate(z, (self.dim + 1) / self.epsilon, ess,
                                f"(dim+1)/ε · E‖z‖₂, E‖z‖₂ from {n_samples} {how} uniform draws")

    def expected_squared_error(self, n_samples=4000):
        """``(dim+1)(dim+2)/ε² · E‖z‖₂²`` (Monte Carlo over uniform draws)."""
        z = self.sample_uniform(check_n_samples(n_samples))
        return float((self.dim + 1) * (self.dim + 2) / self.epsilon**2 * np.mean(np.sum(z**2, axis=1)))
