"""A knorm mechanism as an OpenDP measurement (issue 29; the optional extra ``opendp``).

:func:`make_measurement` wraps a mechanism in ``opendp.measurements.make_user_measurement``
so that OpenDP's compositors, filters and odometers account for its releases:

* input domain: vectors of n finite floats (the histogram x), metric ``L1Distance<f64>``: the
  adjacency of every knorm claim, ``‖x − x'‖₁ ≤ d_in``;
* pure ε-DP mechanisms (K-norm, NIM, Laplace, the strategies): measure ``MaxDivergence``, privacy
  map ``d_in ↦ ε·d_in`` — exact, since each one's privacy loss is at most ε times a norm of
  ``F(x − x')`` that is at most ``‖x − x'‖₁`` (K-norm: ``ε‖F(x − x')‖_K``; NIM: ``Σ ε_i`` of that);
* the Gaussian mechanisms: measure ``ZeroConcentratedDivergence``, map ``d_in ↦ (μ·d_in)²/2``
  with μ the mechanism's GDP parameter (Δ₂/σ; the residual and SVD strategies' ``mu``), exact for
  a Gaussian (convert with ``opendp.combinators.make_zCDP_to_approxDP``).

The measurement's function is ``Fx + noise`` with fresh noise from the mechanism's generator,
accounted by OpenDP (not by the mechanism's own answer counter, which it leaves alone: an OpenDP
function has no side effects). A claim that is approximate (MCMC sampling) is refused unless
``accept_approximate=True`` (OpenDP then accounts for it as if it were exact: the claim's
``approximate`` flag stays the caller's to carry); a claim from a known seed (NOT private) is
refused.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._validate import short_repr

__all__ = ["make_measurement"]


def _opendp() -> Any:
    try:
        import opendp.prelude as dp
    except ImportError:
        raise ImportError("make_measurement needs OpenDP: pip install 'knorm[opendp]'") from None
    dp.enable_features("contrib", "honest-but-curious")  # make_user_measurement's features (the map is ours)
    return dp


def make_measurement(mechanism: Any, *, accept_approximate: bool = False) -> Any:
    """``mechanism`` (a knorm :class:`~knorm.mechanisms.Mechanism`) as an OpenDP Measurement:
    ``x ↦ Fx + noise`` on vectors of n floats under the ℓ₁ distance, with privacy map
    ``d_in ↦ ε·d_in`` (pure ε-DP, MaxDivergence) or ``d_in ↦ (μ·d_in)²/2`` (Gaussian,
    ZeroConcentratedDivergence). Module docstring: what is exact, what is refused."""
    from ..mechanisms._base import Mechanism

    if not isinstance(mechanism, Mechanism):
        raise ValueError(f"mechanism must be a knorm Mechanism, got {type(mechanism).__name__}")
    if not isinstance(accept_approximate, bool):
        raise ValueError(f"accept_approximate must be True or False, got {short_repr(accept_approximate)}")
    claim = mechanism.privacy_per_answer
    if not claim.private:
        raise ValueError("mechanism: its noise comes from a known seed (a reproducible run, NOT private); build it "
                         "with rng=None for OpenDP")
    if claim.approximate:
        if not accept_approximate:
            raise ValueError(f"mechanism: its claim is approximate ({claim.sampling}); accept_approximate=True "
                             "accounts for it in OpenDP as if exact")
        warnings.warn(f"{claim.mechanism}: an approximate (MCMC) claim accounted by OpenDP as if exact",
                      stacklevel=2)
    dp = _opendp()
    details = claim.details or {}
    if claim.notion == "pure ε-DP" and claim.delta == 0.0:
        eps = float(claim.epsilon)
        measure = dp.max_divergence()

        def privacy_map(d_in: float) -> float:
            return eps * float(d_in)
    elif "mu" in details or (claim.mechanism == "Gaussian" and "sigma" in details):
        mu = float(details["mu"]) if "mu" in details else float(details["l2_sensitivity"]) / float(details["sigma"])
        measure = dp.zero_concentrated_divergence()

        def privacy_map(d_in: float) -> float:
            return (mu * float(d_in)) ** 2 / 2.0
    else:
        raise ValueError(f"mechanism: {claim.mechanism} ({claim.notion}) has no OpenDP measure here (pure ε-DP and "
                         "Gaussian mechanisms only)")
    n = mechanism.n
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n)

    def function(x: Any) -> Any:
        x = mechanism.check_x(np.asarray(x, dtype=np.float64))
        return mechanism.F @ x + mechanism.sample_noise()

    return dp.m.make_user_measurement(domain, dp.l1_distance(T=float), measure, function, privacy_map)
