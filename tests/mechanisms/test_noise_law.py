"""The K-norm mechanism's released noise follows its law, whatever options it accepts;
walk parameters (which could move the target away from Uniform(K)) are refused.

The law. The noise is ``w = R·z``, ``R ~ Gamma(r+1, scale 1/ε)`` independent of
``z ~ Uniform(K)``, r = rank F. ``vol(tK) = t^r vol(K)`` gives ``P(‖z‖_K ≤ t) = t^r``: the
gauge ``G = ‖z‖_K`` has density ``r·g^{r−1}`` on [0, 1]. Then ``‖w‖_K = R·G`` has density

    f(w) = ∫₀¹ ε^{r+1} (w/g)^r e^{−εw/g} / Γ(r+1) · r g^{r−1} / g dg
         = ε^{r+1} w^r / Γ(r) · ∫₁^∞ e^{−εwu} du        (u = 1/g)
         = ε^r w^{r−1} e^{−εw} / Γ(r),

i.e. ``‖w‖_K ~ Gamma(r, scale 1/ε)``: mean r/ε, variance r/ε².

Tolerances. Released MCMC draws are not independent, but only G carries the chains'
correlation: ``Cov(R_i G_i, R_j G_j) = E[R]² Cov(G_i, G_j)`` and ``E[R]² Var G =
((r+1)/ε)² · r/((r+1)²(r+2)) = Var(w-gauge)/(r+2)``, so neighbouring gauges correlate at
most 1/(r+2) = 1/7 (r = 5). Even if the sum of G's autocorrelations over the release
order were 3.5 (certified runs have far less: records keep ≥ 0.5 ESS each and released
draws are two records apart), the variance of the mean grows by at most 1 + 2·3.5/7 = 2:
the mean is tested within 4 standard errors of √2·√r/ε/√n. The KS test is against the
exact Gamma(r, 1/ε) CDF at p > 10⁻³.
"""

import numpy as np
import pytest
from scipy import stats

import knorm
from knorm import KNormMechanism, NIMechanism, Sampler, recommend
from knorm.walks.chains import WALKS

EPS = 1.0
N = 3000


@pytest.fixture(scope="module")
def body():
    F = np.random.default_rng(20).choice([-1.0, 1.0], size=(5, 10))
    K = knorm.SymmetricHull(F)
    assert K.exact_structure is None and K.dim == 5  # the MCMC engine draws z
    return F, K


def check_gamma_gauge(K, noise, r, eps):
    g = K.gauge(noise)
    se = np.sqrt(2.0) * np.sqrt(r) / eps / np.sqrt(len(g))
    assert abs(g.mean() - r / eps) < 4 * se, (g.mean(), r / eps, se)
    assert stats.kstest(g, stats.gamma(a=r, scale=1.0 / eps).cdf).pvalue > 1e-3


OPTIONS = [(w, {}, 1000) for w in WALKS] + [
    ("billiard", {"chains": 3, "min_draws": 400}, 300),  # fewer chains, small pools: several refills
    ("billiard", {"workers": 2, "max_steps": 400_000}, 1000),
    ("hit_and_run", {"chains": 4, "min_draws": 2000}, 700),
]


@pytest.mark.parametrize("case", range(len(OPTIONS)), ids=[f"{w}-{o}-{b}" for w, o, b in OPTIONS])
def test_noise_gauge_is_gamma_r(body, case):
    """Each case its own seed: the cases are independent checks (one seed would share the R draws)."""
    F, K = body
    walk, options, bank = OPTIONS[case]
    m = KNormMechanism(F, epsilon=EPS, walk=walk, rng=100 + case, body=K, bank_size=bank, sampler_options=options)
    noise = m.sample_noise(N)
    assert m.privacy.sampling == "mcmc-approximate"
    check_gamma_gauge(K, noise, K.dim, EPS)


def test_the_test_detects_a_shrunk_noise(body):
    """The check fails on noise whose z is uniform in ½K (gauge law Gamma(r)/2)."""
    F, K = body
    m = KNormMechanism(F, epsilon=EPS, rng=6, body=K)
    with pytest.raises(AssertionError):
        check_gamma_gauge(K, 0.5 * m.sample_noise(N), K.dim, EPS)


ATTACK = {"params": [1e-3]}  # hit-and-run in K ∩ 0.001·B₂: noise gauge ≈ 0.002 instead of ≈ r/ε


def test_the_ball_clip_attack_is_refused_at_every_entry_point(body):
    F, K = body
    with pytest.raises(ValueError, match=r"^sampler_options: 'params' is not accepted"):
        KNormMechanism(F, epsilon=1, walk="hit_and_run", sampler_options=ATTACK)
    with pytest.raises(ValueError, match=r"^sampler_options: 'params' is not accepted"):
        NIMechanism(F, epsilon=1, walk="hit_and_run", sampler_options=ATTACK)
    with pytest.raises(ValueError, match=r"^mechanism_options\['sampler_options'\]: 'params' is not accepted"):
        recommend(F, epsilon=1, mechanism_options={"walk": "hit_and_run", "sampler_options": ATTACK})
    with pytest.raises(ValueError, match="params of the hit_and_run walk: params.0. is a ball clip"):
        Sampler(F, walk="hit_and_run", params=[1e-3])
    with pytest.raises(ValueError, match="params of the billiard walk"):
        Sampler(F, walk="billiard", params=[-1.0])
    # even the walk's own defaults: mechanisms take no params at all
    with pytest.raises(ValueError, match="'params' is not accepted"):
        KNormMechanism(F, epsilon=1, sampler_options={"params": None})


def test_the_cli_has_no_option_for_walk_parameters():
    """The command line builds sampler_options itself (workers, checkpoint, progress): no
    option of any subcommand reaches the sampler's ``params``."""
    import argparse

    from knorm.cli import build_parser

    p = build_parser()
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    flags = [o for s in subs.choices.values() for a in s._actions for o in a.option_strings]
    assert "--walk" in flags and "--workers" in flags
    assert not [f for f in flags if any(w in f for w in ("param", "clip", "radius", "length", "reflection"))]
