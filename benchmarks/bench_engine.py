"""asv benchmarks of the sampling engine on random ±1 F.

Run from this folder: ``asv run --quick --python=same`` (current environment) or
``asv run --quick`` (asv builds its own). Sizes: d ∈ {10, 20, 40}, n ∈ {d, 5d, 25d}
(``KNORM_ASV_SMALL=1``: d = 10, n = 50 only, as CI runs it).
"""

import os

import numpy as np

import knorm
from knorm.walks.chains import Chain, default_params, run_chains
from knorm.walks.sampler import _start_points, rounding_of

# KNORM_ASV_SMALL=1 (CI): one small size, so the whole suite runs in about a minute
SMALL = os.environ.get("KNORM_ASV_SMALL") == "1"
DS = [10] if SMALL else [10, 20, 40]
NS = [5] if SMALL else [1, 5, 25]  # n = factor · d
WALKS = ["billiard", "hit_and_run", "coordinate", "ball"]


def _body(d, factor):
    F = np.random.default_rng(d * 100 + factor).choice([-1.0, 1.0], size=(d, factor * d))
    return knorm.SymmetricHull(F)


class Oracle:
    params = (DS, NS)
    param_names = ["d", "n/d"]

    def setup(self, d, factor):
        self.K = _body(d, factor)
        rng = np.random.default_rng(0)
        v = rng.standard_normal((64, d))
        self.x = 0.5 * v / self.K.gauge(v)[:, None]
        self.u = rng.standard_normal((64, d))
        self.i = 0
        self.K.gauge(self.x[0])

    def time_gauge_nearby_point(self, d, factor):
        """One gauge, warm-started from a point at distance ~1% (a walk's typical query)."""
        self.K.gauge(self.x[0] * (1 + 0.01 * (self.i % 2)))
        self.i += 1

    def time_gauge_random_point(self, d, factor):
        self.K.gauge(self.x[self.i % 64])
        self.i += 1

    def time_chord(self, d, factor):
        """Both ends of a chord through an interior point (exact ray shooting)."""
        self.K.chord(self.x[self.i % 64], self.u[self.i % 64])
        self.i += 1


class WalkStep:
    """Time of 10 steps of one chain of each walk in the rounded frame."""

    params = (DS, NS, WALKS)
    param_names = ["d", "n/d", "walk"]
    timeout = 300

    def setup(self, d, factor, walk):
        K = _body(d, factor)
        self.frame = rounding_of(K).frame
        rng = np.random.default_rng(1)
        self.params_ = default_params(walk, self.frame)
        self.chain = Chain(self.frame, _start_points(self.frame, 1, rng)[0], rng)
        run_chains([self.chain], walk, 20, 20, self.params_, workers=1)

    def time_10_steps(self, d, factor, walk):
        run_chains([self.chain], walk, 10, 10, self.params_, workers=1)


class Rounding:
    """Rounding a fresh body (covariance estimation by billiard walks)."""

    params = (DS, NS)
    param_names = ["d", "n/d"]
    timeout = 300

    def setup(self, d, factor):
        rounding_of(_body(d, factor))  # JIT warm-up

    def time_rounding(self, d, factor):
        rounding_of(_body(d, factor))


class SampleUniform:
    """Min-coordinate bulk ESS per second of ``sample_uniform`` (rounding cached)."""

    params = (DS, NS)
    param_names = ["d", "n/d"]
    timeout = 600
    unit = "ESS/s"

    def setup(self, d, factor):
        self.K = _body(d, factor)
        rounding_of(self.K)
        knorm.sample_uniform(self.K, 50, rng=0)

    def track_ess_per_second(self, d, factor):
        _, info = knorm.sample_uniform(self.K, 1000, rng=1, return_info=True)
        return info.ess_per_second

    track_ess_per_second.unit = "ESS/s"

    def track_ess_per_second_per_core(self, d, factor):
        _, info = knorm.sample_uniform(self.K, 1000, rng=1, return_info=True)
        import os

        return info.ess_per_second / min(os.cpu_count() or 1, info.chains)

    track_ess_per_second_per_core.unit = "ESS/s/core"
