"""asv benchmarks of the mechanisms' releases and of the CLI's throughput."""

import os
import tempfile

import numpy as np

os.environ.setdefault("KNORM_CACHE", "off")  # a fresh F's cost every time (the cache has its own benchmark below)

import knorm  # noqa: E402
from knorm import cli  # noqa: E402
from knorm import workloads as W  # noqa: E402

SMALL = os.environ.get("KNORM_ASV_SMALL") == "1"
DS = [10] if SMALL else [20, 40]
MECHS = ["laplace", "gaussian", "knorm", "nim"]


def _mechanism(name, F, seed):
    if name == "laplace":
        return knorm.LaplaceMechanism(F, epsilon=1.0, rng=seed)
    if name == "gaussian":
        return knorm.GaussianMechanism(F, epsilon=1.0, delta=1e-6, rng=seed)
    if name == "knorm":
        return knorm.KNormMechanism(F, epsilon=1.0, rng=seed)
    return knorm.NIMechanism(F, epsilon=1.0, rng=seed)


class Release:
    """100 releases on the Table-3 workload (random ±1 F, n = 200), mechanism built fresh.

    For K-norm / NIM this includes rounding and one certified sampler run per body.
    """

    params = (DS, MECHS)
    param_names = ["d", "mechanism"]
    timeout = 600
    number = 1
    repeat = 1

    def setup(self, d, name):
        self.F = W.random_pm1(d, 200, rng=2019)
        self.x = np.random.default_rng(1).integers(22, 39, 200).astype(float)
        _mechanism(name, W.random_pm1(4, 10, rng=0), 0).release(np.ones(10), size=2)  # JIT warm-up

    def time_100_releases(self, d, name):
        _mechanism(name, self.F, 0).release(self.x, size=100)

    def track_knorm_error_ratio_to_laplace(self, d, name):
        """Mean ℓ₂ error of this mechanism over Laplace's (1000 releases)."""
        m = _mechanism(name, self.F, 1)
        lap = _mechanism("laplace", self.F, 2)
        err = np.linalg.norm(m.sample_noise(1000), axis=1).mean()
        return float(err / np.linalg.norm(lap.sample_noise(1000), axis=1).mean())

    track_knorm_error_ratio_to_laplace.unit = "ratio"


class PreparedRelease:
    """A release from a certified prepared workload (random ±1 F, n = 200): a fresh mechanism's
    first answer is one chain's warm-up W from a public stationary state (no pool), and 100
    more answers continue the bank. The prepare itself (rounding + certification) is set-up."""

    params = DS
    param_names = ["d"]
    timeout = 600
    number = 1
    repeat = 3

    def setup(self, d):
        self.F = W.random_pm1(d, 200, rng=2019)
        self.x = np.random.default_rng(1).integers(22, 39, 200).astype(float)
        self.w = knorm.prepare(self.F)

    def time_first_release(self, d):
        knorm.KNormMechanism(self.F, epsilon=1.0, prepared=self.w).release(self.x)

    def time_first_and_100_more(self, d):
        m = knorm.KNormMechanism(self.F, epsilon=1.0, prepared=self.w)
        for _ in range(101):
            m.release(self.x)


class PreparedQuestions:
    """Questions about a prepared workload answered from its file (issue 35): load + the
    expected error, load + ``recommend`` (the file keeps the certified pool's moments, and with
    ``recommend=True`` recommend's ε-free rows). 2-way marginals over (2, 3, 3, 4) or, small,
    (2, 2, 3); the prepare is set-up."""

    timeout = 900
    number = 1
    repeat = 3

    def setup(self):
        self.F = W.marginals((2, 2, 3) if SMALL else (2, 3, 3, 4), 2)
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "w.knorm")
        knorm.prepare(self.F, self.path, recommend=True)

    def time_load_and_expected_error(self):
        w = knorm.load_prepared(self.path, self.F)
        knorm.KNormMechanism(self.F, epsilon=1.0, prepared=w).expected_error()

    def time_load_and_recommend(self):
        knorm.recommend(self.F, epsilon=1.0, prepared=knorm.load_prepared(self.path, self.F))


class CLIThroughput:
    """``knorm sample`` end to end (in-process): draws per second, K-norm, d = 20, n = 100."""

    timeout = 600
    number = 1
    repeat = 1
    unit = "samples/s"

    def setup(self):
        self.dir = tempfile.mkdtemp()
        cli.main(["sample", "--count", "10", "--quiet"])  # JIT warm-up

    def track_samples_per_second(self):
        import time

        count = 2000 if SMALL else 20000
        out = os.path.join(self.dir, "o.npy")
        t = time.perf_counter()
        cli.main(["sample", "--d", "20", "--n", "100", "--count", str(count), "--quiet", "--force", "--out", out])
        return count / (time.perf_counter() - t)

    track_samples_per_second.unit = "samples/s"
