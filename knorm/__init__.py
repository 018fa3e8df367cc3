"""knorm: K-norm and NIM mechanisms on a fast exact geometric sampling engine."""

from ._jit import invalidate_stale_caches

invalidate_stale_caches()

# isort: split
# (the imports below load the numba kernels, so they come after the cache check)

from . import (bounds, data, diagnostics, discrete, functional, implicit, integer, budget_ledger, postprocess, privacy,
               workloads)
from .budget_ledger import FileAccountant
from .body import OracleError, ReferenceOracle, SymmetricHull
from .diagnostics import ess, rhat
from .mechanisms import (ErrorEstimate, GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism,
                         KroneckerHierarchicalMechanism, KroneckerPIdentityMechanism, KroneckerStrategyMechanism,
                         LaplaceMechanism, NIMechanism, PIdentityMechanism, PrivacyClaim, ResidualGaussianMechanism,
                         SVDGaussianMechanism)
from .mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism
from .recommend import Recommendation, recommend
from .walks import WALKS, ConvergenceError, ConvergenceWarning, Sampler, SamplingInfo, sample_uniform
from .walks.prepared import PreparedWorkload, load_prepared, prepare

__all__ = [
    # the body and its oracles
    "SymmetricHull", "ReferenceOracle", "OracleError",
    # sampling and diagnostics
    "sample_uniform", "Sampler", "SamplingInfo", "ConvergenceWarning", "ConvergenceError", "WALKS", "ess", "rhat",
    # work that depends on F only, done once
    "prepare", "load_prepared", "PreparedWorkload",
    # mechanisms
    "LaplaceMechanism", "GaussianMechanism", "KNormMechanism", "NIMechanism", "BoundedLaplaceMechanism",
    "CovarianceGaussianMechanism", "IdentityMechanism", "HierarchicalMechanism", "PIdentityMechanism",
    "KroneckerStrategyMechanism", "KroneckerPIdentityMechanism", "KroneckerHierarchicalMechanism", "PrivacyClaim",
    "ErrorEstimate", "recommend", "Recommendation", "ResidualGaussianMechanism", "SVDGaussianMechanism",
    # modules
    "diagnostics", "workloads", "implicit", "bounds", "discrete", "functional", "privacy", "audit", "postprocess",
    "integer", "budget_ledger", "data",
    # a budget that persists
    "FileAccountant",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``knorm.audit`` is imported on first use: it needs scipy.stats (≈ 1 s to import), which a
    release never does."""
    if name == "audit":
        import importlib

        return importlib.import_module(".audit", __name__)
    raise AttributeError(f"module 'knorm' has no attribute {name!r}")
