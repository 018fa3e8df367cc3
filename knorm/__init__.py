"""knorm: K-norm and NIM mechanisms on a fast exact geometric sampling engine."""

from .body import OracleError, ReferenceOracle, SymmetricHull

__all__ = ["SymmetricHull", "ReferenceOracle", "OracleError"]
__version__ = "0.1.0"
