"""stationary_tau: τ of chains from the stationary law, with a bias that does not grow with the chain
count, and an upper bound that W = ⌈20·bound⌉ rests on (issue 51).

Simulated AR(1) chains with stationary starts have the exact integrated autocorrelation time
τ = (1+ρ)/(1−ρ). At 8 chains × 250 records and at 64 × 32 (the certification's pool split either
way), over 200 pools per case: τ's median within 10% of the truth, and W from the bound below the
truth's ⌈20τ⌉ in at most 5% of pools. The ESS-based τ it replaces reads 19% low at τ = 2 with
64 × 32 (the control below), which is what made W shrink with the chain count.
"""

import numpy as np
import pytest

from knorm.diagnostics import ess, stationary_tau
from knorm.walks.certify import warmup_steps


def ar1(rng, chains, n, tau, k=1):
    rho = (tau - 1.0) / (tau + 1.0)
    e = rng.standard_normal((chains, n, k))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]  # a stationary start: N(0, 1)
    s = np.sqrt(1.0 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + s * e[:, t]
    return x


@pytest.mark.parametrize("tau", [1.0, 2.0, 5.0])
@pytest.mark.parametrize("shape", [(8, 250), (64, 32)])
def test_tau_median_within_10_percent_and_w_rarely_short(tau, shape):
    rng = np.random.default_rng(51 + int(tau) + shape[0])
    # 200 pools as 200 coordinates of one array: each coordinate is estimated on its own
    t, b = stationary_tau(ar1(rng, *shape, tau, k=200))
    assert t.shape == b.shape == (200,) and np.all(b >= t)
    assert abs(np.median(t) / tau - 1.0) < 0.10, np.median(t)
    W = np.array([warmup_steps(max(1.0, x)) for x in b])
    assert np.mean(W < warmup_steps(tau)) <= 0.05, np.mean(W < warmup_steps(tau))


def test_the_ess_tau_reads_low_with_many_short_chains():
    """Control: pool/ESS (the certificate's τ before issue 51) at 64 × 32, τ = 2: median ≥ 10% low,
    and its W below the truth's in most pools; at 8 × 250 it is close."""
    rng = np.random.default_rng(3)
    x = ar1(rng, 64, 32, 2.0, k=200)
    old = x.shape[0] * x.shape[1] / np.asarray(ess(x))
    assert np.median(old) < 1.8
    assert np.mean([warmup_steps(v) < 40 for v in old]) > 0.5


def test_chains_that_disagree_read_as_long_correlation_and_constant_draws_as_one():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 250))
    t0, _ = stationary_tau(x)
    x[:4] += 1.0  # half the chains shifted by one σ: not one stationary law
    t1, _ = stationary_tau(x)
    assert t0[0] < 1.3 and t1[0] > 5 * t0[0]
    t, b = stationary_tau(np.ones((4, 10)))
    assert t[0] == b[0] == 1.0
    with pytest.raises(ValueError):
        stationary_tau(np.ones((4, 2)))
