"""The pivot's product ``Fᵀv`` of a marginal workload three ways, timed in one run.

For each marginal workload (2- and 3-way, binary and categorical, 256 to 65,536 cells) it
times, in numba loops over one random vector v, the operators as a body lays them out (in the
characters' coordinates, :mod:`knorm.body.characters`):

* ``dense``     -- ``n·r`` multiply-adds over the stored columns (skipped above 2 GB);
* ``tables``    -- :mod:`knorm.body._marginal` (``ŝ = g∘Rᵀv`` spread over the tables, then broadcast tables);
* ``transform`` -- :mod:`knorm.body._spectral` (``ŝ = g∘Rᵀv``, then the product transform);

and prints each one's µs, the tables / transform ratio measured and predicted
(:func:`knorm.body.marginal.plan_ops`, :func:`knorm.body.spectral.spectral_cost`), and which
the body chooses. The best of five alternating repetitions is reported (the machine is shared).

    python scripts/marginal_operators.py              # all twelve, a markdown table
    python scripts/marginal_operators.py --only 0     # 3-way marginals of 16 binary attributes (rank 697)
"""

import argparse
import itertools
import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm.body._marginal import marginal_dots  # noqa: E402
from knorm.body._spectral import spectral_dots  # noqa: E402
from knorm.body.characters import character_coordinates  # noqa: E402
from knorm.body.marginal import MarginalMatch, MarginalStructure, marginal_operator, plan_ops  # noqa: E402
from knorm.body.spectral import span_of, spectral_cost, spectral_operator, spectrum  # noqa: E402


@njit
def _tables(M, v, out, reps):
    for _ in range(reps):
        marginal_dots(M, v, out)


@njit
def _transform(S, v, out, reps):
    for _ in range(reps):
        spectral_dots(S, v, out)


@njit(fastmath={"reassoc", "contract"})
def _dense(D, v, out, reps):
    n, r = D.shape
    for _ in range(reps):
        for j in range(n):
            s = 0.0
            for i in range(r):
                s += D[j, i] * v[i]
            out[j] = s


def _cliques(k, j):
    return tuple(itertools.combinations(range(k), j))


CASES = [((2,) * 16, 3), ((2,) * 12, 3), ((2,) * 16, 2), ((2, 2, 3, 4, 5, 5, 6, 8), 2), ((3,) * 8, 2),
         ((4,) * 5, 2), ((2, 3, 4, 5, 6), 2), ((2, 3, 4, 5, 6), 3), ((2,) * 10, 2), ((2,) * 8, 3), ((3,) * 7, 3),
         ((5,) * 5, 3)]


def _timed(f, op, v, out, reps):
    t = time.perf_counter()
    f(op, v, out, reps)
    return (time.perf_counter() - t) / reps * 1e6


def measure(shape, k, rng):
    S = MarginalStructure(shape, _cliques(len(shape), k))
    r = len(spectrum(S))
    # the operators as a body lays them out: in the characters' coordinates (full rank)
    m = MarginalMatch(S, 1.0, np.arange(S.rows))
    _, _, lift, into = character_coordinates(m, 0, span_of(m, 0)[0][:, :r])
    ops = {"tables": (_tables, marginal_operator(S, None, into=into)),
           "transform": (_transform, spectral_operator(S, None, lift=lift))}
    if S.cells * r * 8 <= 2e9:
        ops["dense"] = (_dense, np.ascontiguousarray(rng.standard_normal((S.cells, r))))
    v, out = rng.standard_normal(r), np.empty(S.cells)
    for f, op in ops.values():
        f(op, v, out, 1)  # compile
    reps = max(3, int(2e8 / (S.cells * r)))
    times = {name: min(_timed(f, op, v, out, reps if name != "dense" else max(1, reps // 20)) for _ in range(5))
             for name, (f, op) in ops.items()}
    pt, ps = plan_ops(S, r), spectral_cost(S, r)
    return {"workload": f"{k}-way {'×'.join(map(str, shape))}", "r": r, "n": S.cells, **times,
            "measured": times["tables"] / times["transform"], "predicted": pt / ps,
            "chosen": "transform" if ps < pt else "tables"}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", type=int, nargs="+", default=None, help="indices into the list of workloads")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    print("| workload | r | n | dense µs | tables µs | transform µs | tables/transform measured | predicted | chosen |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, (shape, k) in enumerate(CASES):
        if a.only is not None and i not in a.only:
            continue
        m = measure(shape, k, rng)
        dense = f"{m['dense']:.1f}" if "dense" in m else "—"
        print(f"| {m['workload']} | {m['r']} | {m['n']} | {dense} | {m['tables']:.1f} | {m['transform']:.1f} | "
              f"{m['measured']:.2f} | {m['predicted']:.2f} | {m['chosen']} |", flush=True)
