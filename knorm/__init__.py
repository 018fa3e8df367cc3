"""knorm: K-norm and NIM mechanisms on a fast exact geometric sampling engine."""

from ._jit import invalidate_stale_caches

invalidate_stale_caches()

# isort: split

from . import audit, bounds, diagnostics, discrete, functional, privacy, workloads
from .body import OracleError, ReferenceOracle, SymmetricHull
from .diagnostics import ess, rhat
from .mechanisms import (ErrorEstimate, GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism,
                         PrivacyClaim)
from .mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism
from .walks import WALKS, ConvergenceWarning, SamplingInfo, sample_uniform

__all__ = ["SymmetricHull", "ReferenceOracle", "OracleError", "sample_uniform", "SamplingInfo",
           "ConvergenceWarning", "WALKS", "ess", "rhat", "diagnostics", "workloads", "bounds", "discrete", "functional", "privacy", "audit", "LaplaceMechanism",
           "GaussianMechanism", "KNormMechanism", "NIMechanism", "PrivacyClaim", "ErrorEstimate", "BoundedLaplaceMechanism", "CovarianceGaussianMechanism"]
__version__ = "0.1.0"
