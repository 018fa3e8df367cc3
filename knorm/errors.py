"""The exceptions and warnings knorm raises, in one module that imports nothing from knorm.

Each is also importable where it is raised (``knorm.OracleError``, ``knorm.body.OracleError``,
``knorm.ConvergenceError``, ``knorm.walks.checkpoint.CheckpointConflict``,
``knorm.privacy.BudgetExceededError``, …), so every module can catch them without importing
the module that raises them.
"""

__all__ = ["OracleError", "ConvergenceWarning", "ConvergenceError", "CheckpointConflict", "BudgetExceededError",
           "LargeEpsilonWarning"]


class OracleError(RuntimeError):
    """The facet-walk oracle could not finish (pivot limit or numerical breakdown)."""


class ConvergenceWarning(UserWarning):
    """The sampler could not certify near-independent draws within its step budget."""


class ConvergenceError(RuntimeError):
    """A sampler run behind a release was not certified (see :class:`~knorm.walks.sampler.Sampler`).

    Raised by :class:`~knorm.KNormMechanism` and :class:`~knorm.NIMechanism` unless they
    were built with ``accept_uncertified=True``; the engine-only :func:`~knorm.sample_uniform`
    warns (:class:`ConvergenceWarning`) instead.
    """


class CheckpointConflict(ValueError):
    """A resume with no matching unfinished run to continue, or a new run into a folder
    that holds a checkpoint."""


class BudgetExceededError(ValueError):
    """A release would take a :class:`~knorm.privacy.BudgetAccountant` past its (ε, δ) budget."""


class LargeEpsilonWarning(UserWarning):
    """A mechanism built with ε > 20 (``knorm.privacy.LARGE_EPSILON``): its noise is so small next to
    the answers that they are essentially exact, and the claim, though true, promises no meaningful
    privacy (an adversary's odds move by up to e^20 ≈ 5·10^8). Its claims say so."""
