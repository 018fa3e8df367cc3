"""Functional release: the Gaussian-process mechanism for a kernel density estimate.

For data ``x_1 … x_n ∈ R^m`` and bandwidth h, the Gaussian KDE
``f_d(t) = (1/n) Σ (2πh²)^{−m/2} exp(−‖t − x_i‖²/(2h²))`` lies in the RKHS of
``k(s, t) = exp(−‖s − t‖²/(2h²))``, and changing one record moves it by at most
``Δ = √2 / (n (2πh²)^{m/2})`` in that RKHS norm (docs/design.md §7). Releasing
``f_d + c·G`` with ``G ~ GP(0, k)`` and ``c = √(2 ln(2/δ))·Δ/ε`` is (ε, δ)-DP (ε <= 1).

A release is one GP draw: :class:`PrivateDensity` evaluates it at any points, jointly,
and stays consistent across calls (later points are drawn conditionally on the values
already revealed), so every grid sees the same function.
"""

import numpy as np
from scipy.spatial.distance import cdist

from ._rng import as_generator
from ._validate import as_real_array, check_memory, is_real, short_repr
from .mechanisms._base import Accounted, PrivacyClaim, check_delta, check_epsilon
from .mechanisms._grid import grid_exponent, snap_sum
from .privacy import _real

JITTER = 1e-10  # relative diagonal regularisation of kernel matrices


def _points(t, m, name="points"):
    a = as_real_array(name, t).astype(np.float64)
    if a.ndim == 1 and m == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[1] != m or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be a finite array of shape (k, {m})")
    return a


class GaussianKDEMechanism(Accounted):
    """(ε, δ)-DP Gaussian kernel density estimate (one GP draw per :meth:`release`).

    The normalisation ``(2πh²)^{−m/2}`` is computed in log space; a bandwidth for which
    it (or the noise scale c) leaves float64 is refused.
    """

    def __init__(self, data, *, bandwidth, epsilon, delta, rng=None, accountant=None):
        x = as_real_array("data", data).astype(np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[0] < 1 or not np.all(np.isfinite(x)):
            raise ValueError("data must be a finite array of shape (n,) or (n, m) with n >= 1")
        if not is_real(bandwidth) or not np.isfinite(_real("bandwidth", bandwidth)) or bandwidth <= 0:
            raise ValueError(f"bandwidth must be a positive finite number, got {short_repr(bandwidth)}")
        self.data = x
        self.n, self.m = x.shape
        self.h = float(bandwidth)
        self.epsilon = check_epsilon(epsilon)
        if self.epsilon > 1:
            raise ValueError(f"the Gaussian-process calibration needs epsilon <= 1, got {self.epsilon}")
        self.delta = check_delta(delta)
        log_norm = -self.m / 2 * np.log(2 * np.pi) - self.m * np.log(self.h)
        log_c = (0.5 * np.log(2 * np.log(2 / self.delta)) + 0.5 * np.log(2.0) + log_norm - np.log(self.n)
                 - np.log(self.epsilon))
        if not (-700.0 < log_norm < 700.0 and log_c < 700.0):
            raise ValueError(f"bandwidth = {self.h:g}, epsilon = {self.epsilon:g}, delta = {self.delta:g} are out of "
                             f"range for {self.m}-D data: the kernel normalisation (2πh²)^(−m/2) = e^{log_norm:.4g} "
                             f"or the noise scale c = e^{log_c:.4g} overflows float64")
        self.norm = float(np.exp(log_norm))
        self.sensitivity = np.sqrt(2.0) * self.norm / self.n
        self.c = np.sqrt(2 * np.log(2 / self.delta)) * self.sensitivity / self.epsilon
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)
        self._claim = PrivacyClaim("Gaussian-process KDE", self.epsilon, self.delta, "(ε, δ)-DP", "exact",
                                    neighbours="one record changes",
                                    details={"rkhs_sensitivity": self.sensitivity, "noise_scale": self.c})

    def kernel(self, s, t):
        """``exp(−‖s − t‖²/(2h²))``, the distance divided by h first (no overflow of h²)."""
        s, t = _points(s, self.m, "s"), _points(t, self.m, "t")
        with np.errstate(over="ignore"):  # (distance/h)² past float64: the kernel is exactly 0 there
            return np.exp(-0.5 * (cdist(s, t) / self.h) ** 2)

    def kde(self, t):
        """The non-private estimate f_d at points t."""
        t = _points(t, self.m)
        check_memory("points", None, 8 * 2 * len(t) * self.n)  # (k, n) distances and kernel values
        return self.norm * self.kernel(t, self.data).mean(axis=1)

    def _grid_k_of(self):
        return grid_exponent(self.c, self.epsilon)  # the values of a released density lie on 2^k <= c·2^-10 (design §10.1)

    def release(self):
        """A :class:`PrivateDensity`: the private function f_d + c·G (one GP draw; one answer)."""
        self._check_budget(1)
        out = PrivateDensity(self, np.random.default_rng(self._rng.integers(2**63)))
        self._spend(1)
        return out


class PrivateDensity:
    """A released private density: call it on points (k, m) to evaluate it there."""

    def __init__(self, mech, rng):
        self.mech = mech
        self._rng = rng
        self._pts = np.empty((0, mech.m))
        self._g = np.empty(0)  # the GP values revealed so far (unit scale)

    def __call__(self, t):
        t = _points(t, self.mech.m)
        k, p = len(t), len(self._pts)
        # the joint kernel matrices (new × new, new × old, old × old), their temporaries and the
        # eigendecomposition's copies (a peak of ≈ 7 k² floats measured for k new points) and the KDE's (k, n)
        check_memory("points", None, 8 * (8 * k * k + 3 * k * p + 3 * p * p + 2 * k * self.mech.n))
        g = self._gp(t)
        # on the public grid 2^k <= c·2^-10 (docs/design.md §10.1: no floating-point side channel)
        return snap_sum(self.mech.kde(t), self.mech.c * g, self.mech.grid_exponent)

    def _gp(self, t):
        """Values of the one GP draw at t, consistent with those revealed before."""
        # reuse values at points already evaluated; draw the new ones jointly, conditionally
        known = {tuple(p): v for p, v in zip(self._pts, self._g)}
        new_idx = [i for i, p in enumerate(t) if tuple(p) not in known]
        uniq_new = np.unique(t[new_idx], axis=0) if new_idx else np.empty((0, t.shape[1]))
        if len(uniq_new):
            k = self.mech.kernel
            Knn = k(uniq_new, uniq_new) + JITTER * np.eye(len(uniq_new))
            if len(self._pts):
                Koo = k(self._pts, self._pts) + JITTER * np.eye(len(self._pts))
                Kno = k(uniq_new, self._pts)
                Lo = np.linalg.cholesky(Koo)
                A = np.linalg.solve(Lo, Kno.T)          # Lo⁻¹ K_on
                mean = A.T @ np.linalg.solve(Lo, self._g)
                cov = Knn - A.T @ A
            else:
                mean, cov = np.zeros(len(uniq_new)), Knn
            w, V = np.linalg.eigh((cov + cov.T) / 2)
            draw = mean + V @ (np.sqrt(np.maximum(w, 0.0)) * self._rng.standard_normal(len(w)))
            self._pts = np.vstack([self._pts, uniq_new])
            self._g = np.concatenate([self._g, draw])
            known.update({tuple(p): v for p, v in zip(uniq_new, draw)})
        return np.array([known[tuple(p)] for p in t])
