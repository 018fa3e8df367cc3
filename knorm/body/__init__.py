"""The body K = F·B₁ⁿ, its exact facet-walk oracle and the reference LP/QP oracles."""

from .hull import OracleError, SymmetricHull, validate_matrix
from .reference import ReferenceOracle

__all__ = ["SymmetricHull", "OracleError", "ReferenceOracle", "validate_matrix"]
