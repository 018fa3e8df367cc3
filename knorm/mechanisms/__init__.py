"""Differentially private mechanisms for linear queries (docs/design.md §4).

Each takes ``F`` and keyword-only, validated parameters, ``rng=``, and offers
``release(x, size=None)``, ``sample_noise(size=None)``, ``expected_error()`` and a
``privacy`` attribute (:class:`PrivacyClaim`).
"""

from ..privacy import PrivacyClaim
from ._base import ErrorEstimate, Mechanism
from .additive import GaussianMechanism, LaplaceMechanism, analytic_gaussian_sigma, l1_sensitivity, l2_sensitivity
from .knorm_mechanism import KNormMechanism
from .nim import NIMechanism, NIMLevel
from .residual import ResidualGaussianMechanism, SVDGaussianMechanism
from .strategy import (HierarchicalMechanism, IdentityMechanism, KroneckerHierarchicalMechanism,
                       KroneckerPIdentityMechanism, KroneckerStrategyMechanism, PIdentityMechanism)

__all__ = ["Mechanism", "PrivacyClaim", "ErrorEstimate", "LaplaceMechanism", "GaussianMechanism",
           "KNormMechanism", "NIMechanism", "NIMLevel", "analytic_gaussian_sigma", "l1_sensitivity",
           "l2_sensitivity", "IdentityMechanism", "HierarchicalMechanism",
           "PIdentityMechanism", "KroneckerStrategyMechanism", "KroneckerPIdentityMechanism",
           "KroneckerHierarchicalMechanism", "ResidualGaussianMechanism", "SVDGaussianMechanism"]
