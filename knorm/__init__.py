"""knorm: K-norm and NIM mechanisms on a fast exact geometric sampling engine."""

from ._jit import invalidate_stale_caches

invalidate_stale_caches()

# isort: split

from . import bounds, diagnostics, workloads
from .body import OracleError, ReferenceOracle, SymmetricHull
from .diagnostics import ess, rhat
from .mechanisms import (ErrorEstimate, GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism,
                         PrivacyClaim)
from .walks import WALKS, ConvergenceWarning, SamplingInfo, sample_uniform

__all__ = ["SymmetricHull", "ReferenceOracle", "OracleError", "sample_uniform", "SamplingInfo",
           "ConvergenceWarning", "WALKS", "ess", "rhat", "diagnostics", "workloads", "bounds", "LaplaceMechanism",
           "GaussianMechanism", "KNormMechanism", "NIMechanism", "PrivacyClaim", "ErrorEstimate"]
__version__ = "0.1.0"
