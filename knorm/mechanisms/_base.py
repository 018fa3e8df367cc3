"""Shared pieces of the mechanisms: validation, the privacy claim, error estimates."""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from .._rng import as_generator
from .._validate import positive_int
from ..body.hull import validate_matrix

NEIGHBOURS = "‖x − x'‖₁ ≤ 1"


def check_epsilon(epsilon):
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not np.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    return float(epsilon)


def check_delta(delta):
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def check_size(size):
    return positive_int("size", size, allow_none=True)


@dataclass(frozen=True)
class PrivacyClaim:
    """What a mechanism promises, as data.

    ``notion``: "pure ε-DP" or "(ε, δ)-DP"; ``neighbours``: the adjacency;
    ``sampling``: "exact" or "mcmc-approximate" (MCMC draws are only approximately
    from the target law, so the guarantee is approximate too); ``composition``: how
    a total budget was split, if it was.
    """

    mechanism: str
    epsilon: float
    delta: float
    notion: str
    sampling: str
    neighbours: str = NEIGHBOURS
    composition: str = ""
    details: dict = field(default_factory=dict)

    @property
    def exact(self):
        return self.sampling == "exact"

    def __str__(self):
        s = f"{self.mechanism}: {self.notion} with ε = {self.epsilon:g}"
        if self.delta:
            s += f", δ = {self.delta:g}"
        s += f" ({self.sampling} sampling; neighbours {self.neighbours})"
        if self.composition:
            s += f"; {self.composition}"
        return s


@dataclass(frozen=True)
class ErrorEstimate:
    """Expected ℓ₂ error ``E‖M(x) − Fx‖₂``: exact (``stderr == 0``) or Monte Carlo."""

    value: float
    stderr: float
    exact: bool
    method: str

    def __float__(self):
        return float(self.value)

    def __str__(self):
        return f"{self.value:.6g}" + ("" if self.exact else f" ± {self.stderr:.2g}") + f" ({self.method})"


def mc_norm_estimate(draws, factor=1.0, ess=None, method=""):
    """Mean ℓ₂ norm of draws × factor, with its standard error (``ess`` effective draws)."""
    norms = np.linalg.norm(draws, axis=1) * factor
    m = len(norms) if ess is None else ess
    return ErrorEstimate(float(norms.mean()), float(norms.std(ddof=1) / np.sqrt(m)), False, method)


class Mechanism(ABC):
    """Base: holds F, validates x, and turns noise into releases ``Fx + noise``."""

    def __init__(self, F, rng):
        self.F = validate_matrix(F)
        self.d, self.n = self.F.shape
        self._rng = as_generator(rng)

    def check_x(self, x):
        arr = np.asarray(x)
        if arr.dtype == object or np.iscomplexobj(arr) or arr.dtype.kind not in "biuf":
            raise ValueError("x must be a real numeric vector")
        if arr.ndim != 1 or arr.shape[0] != self.n:
            raise ValueError(f"x must have shape ({self.n},) to match F with {self.n} columns; got {arr.shape}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("x contains NaN or infinite entries")
        return arr

    @abstractmethod
    def sample_noise(self, size=None):
        """Noise vector(s) of the mechanism: (d,) or (size, d)."""

    def release(self, x, size=None):
        """``Fx + noise``: one answer (d,) or ``size`` independent answers (size, d)."""
        x = self.check_x(x)
        return self.F @ x + self.sample_noise(size)

    def _one_or_many(self, draws, size):
        return draws[0] if size is None else draws
