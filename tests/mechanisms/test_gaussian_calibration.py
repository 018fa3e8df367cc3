"""The Gaussian mechanism's σ keeps its (ε, δ) claim at every ε and δ.

The exact privacy profile of N(0, σ²) noise with sensitivity Δ is (Balle & Wang 2018)
``δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ)``; it is evaluated here in 200-digit
arithmetic (mpmath), where the two terms' cancellation at tiny ε costs nothing. At
ε = 1e-12, δ = 1e-40 a float64 root-finder once chose a σ whose true δ was 2.7e-37.
"""

import numpy as np
import pytest

from knorm import GaussianMechanism

mp = pytest.importorskip("mpmath")
mp.mp.dps = 200

F = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # Δ₂ = √2


def true_delta(epsilon, sigma, sensitivity):
    e, s = mp.mpf(epsilon), mp.mpf(sigma) / mp.mpf(sensitivity)
    return mp.ncdf(1 / (2 * s) - e * s) - mp.e ** e * mp.ncdf(-1 / (2 * s) - e * s)


@pytest.mark.parametrize("epsilon,delta", [(1e-12, 1e-40), (1e-10, 1e-300), (1e-300, 1e-300), (1e-13, 1e-20),
                                           (1e-6, 1e-10), (0.5, 1e-300), (1.0, 1e-5), (10.0, 1e-300),
                                           (3.0, 0.3)])
def test_the_claimed_delta_holds_exactly(epsilon, delta):
    m = GaussianMechanism(F, epsilon=epsilon, delta=delta)
    got = true_delta(epsilon, m.sigma, m.sensitivity)
    assert got <= delta
    if m.privacy.details["calibration"] == "analytic":  # the smallest σ: the profile is tight there
        assert got >= delta * (1 - 1e-5)
    else:  # the classic σ, used only where float64 cannot locate the analytic one
        assert epsilon < 1e-6
