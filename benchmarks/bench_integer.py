"""asv benchmarks of integer, non-negative, consistent tables (``knorm.integer.integer_tables``, issue 50 item 4).

2-way marginals of noisy counts (Laplace noise of scale 2·(number of tables), counts Poisson of a
gamma mean: many small cells, a few large), over the domains (2, 4, 4, 7, 7) (1,568 cells, d = 221),
(2, 3, 4, 5, 5, 8) (4,800 cells, d = 293) and (4, 4, 4, 4, 8, 8, 4) (65,536 cells, d = 544).
``method="auto"``: the exact MILP at 1,568 cells, two-stage at 4,800 and 65,536; the default
``mip_gap`` of 1%. Targets (issue 50): ≤ 2 s at 1,568 cells, ≤ 60 s at 65,536.
``KNORM_ASV_SMALL=1`` (CI): 1,568 cells only. The track_ benchmarks record the ℓ₁ gap to the bound.
"""

import itertools
import math
import os

import numpy as np
from scipy import sparse

from knorm.integer import integer_tables

SMALL = os.environ.get("KNORM_ASV_SMALL") == "1"
SHAPES = ["2,4,4,7,7"] if SMALL else ["2,4,4,7,7", "2,3,4,5,5,8", "4,4,4,4,8,8,4"]


def sparse_marginals(shape, k=2):
    """All k-way marginals of the product domain ``shape`` as a sparse 0/1 matrix (cells in C order, as
    ``knorm.workloads.marginals`` orders them; no dense (d, n) array at 65,536 cells)."""
    n = math.prod(shape)
    idx = np.indices(shape).reshape(len(shape), n)
    rows, off = [], 0
    for attrs in itertools.combinations(range(len(shape)), k):
        r = np.zeros(n, dtype=np.int64)
        for a in attrs:
            r = r * shape[a] + idx[a]
        rows.append(off + r)
        off += math.prod(shape[a] for a in attrs)
    rr = np.concatenate(rows)
    return sparse.csr_array((np.ones(rr.size), (rr, np.tile(np.arange(n), len(rows)))), shape=(off, n))


def noisy_answers(shape):
    """(F, answers) of 2-way marginals over ``shape``: public, seeded, a benchmark's input only."""
    F = sparse_marginals(shape)
    rng = np.random.default_rng(0)
    x = rng.poisson(rng.gamma(0.3, 30, size=F.shape[1]))
    return F, F @ x + rng.laplace(scale=2 * math.comb(len(shape), 2), size=F.shape[0])


class IntegerTables:
    params = [SHAPES]
    param_names = ["shape"]
    timeout = 600
    number = 1
    repeat = 1

    def setup(self, shape):
        self.F, self.a = noisy_answers(tuple(int(s) for s in shape.split(",")))

    def time_integer_tables(self, shape):
        integer_tables(self.F, self.a)

    def track_relative_gap(self, shape):
        """``(distance − bound)/distance``: how far from proven optimal the result may be."""
        return float(integer_tables(self.F, self.a).gap)

    track_relative_gap.unit = "fraction"
