"""What the grid of docs/design.md §10.1 costs: per-query RMSE and release time, float answers
(knorm before issue #37, ``knorm.audit_fp.undefended()``) against answers on the grid.

    python scripts/fp_cost.py [--answers 2000] [--repeats 5]

Both variants draw the same noise (the same seed), so the RMSE difference is paired: the
grid answer is the float answer's exact sum rounded to 2^k. Workloads as the held-out ones:
2-way marginals of a 2×2×2×2 table, all ranges of 8 cells, random ±1 (8 × 20). Release
time: the best of ``repeats`` runs of ``release(x, size=answers)`` on a fresh, identically
seeded mechanism, the two variants interleaved (MCMC bodies certified before timing). ``--check-against DIR``: also run
the float variant from a checkout of the old commit at DIR (in a subprocess) and check its
answers equal this run's bit for bit. First line: the rounding pass alone, ns per coordinate
(``--pass-only``: that line only).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
import timeit

import numpy as np

import knorm.workloads as W
from knorm import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism

EPS = 1.0
WORKLOADS = {
    "2-way marginals 2^4": lambda: W.marginals((2, 2, 2, 2), 2),
    "all ranges 8": lambda: W.all_range(8),
    "random ±1 8×20": lambda: W.random_pm1(8, 20, rng=7),
}
MECHS = {
    "Laplace": lambda F, r: LaplaceMechanism(F, epsilon=EPS, rng=r),
    "Gaussian": lambda F, r: GaussianMechanism(F, epsilon=EPS, delta=1e-6, rng=r),
    "K-norm": lambda F, r: KNormMechanism(F, epsilon=EPS, rng=r),
    "NIM": lambda F, r: NIMechanism(F, epsilon=EPS, rng=r),
}


def data(F):
    return np.random.default_rng(11).integers(0, 50, F.shape[1]).astype(float)


def releases(wl: str, mech: str, answers: int, seed: int = 5):
    F = WORKLOADS[wl]()
    m = MECHS[mech](F, seed)
    t0 = time.perf_counter()
    out = m.release(data(F), size=answers)
    return F, out, time.perf_counter() - t0


def old_answers(root: str, answers: int) -> dict:
    """The float answers of the checkout at ``root`` (its own knorm), as lists, by (workload, mechanism)."""
    code = (f"import sys, json; sys.path.insert(0, {root!r}); sys.path.insert(1, {sys.path[0]!r})\n"
            "import knorm; assert knorm.__file__.startswith(" + repr(root) + ")\n"
            "import fp_cost\n"
            f"print(json.dumps({{f'{{w}}|{{m}}': fp_cost.releases(w, m, {answers})[1].tolist() "
            "for w in fp_cost.WORKLOADS for m in fp_cost.MECHS}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def pass_alone(repeats: int = 50) -> None:
    """ns per coordinate of the rounding pass alone (2000 answers × 36 queries), against numpy's Laplace draw."""
    from knorm.mechanisms._grid import snap_sum
    rng = np.random.default_rng(0)
    a, n = rng.integers(0, 50, 36).astype(float), rng.laplace(0.0, 1.0, (2000, 36))
    snap_sum(a, n, -10)  # compiled (or loaded from the cache) before timing

    def best(f) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return min(times) / n.size * 1e9
    one = min(timeit.repeat(lambda: snap_sum(a, n[0], -10), number=2000, repeat=repeats // 5)) / 2000 * 1e6
    print(f"rounding pass alone: {best(lambda: snap_sum(a, n, -10)):.1f} ns per coordinate (numpy's Laplace draw: "
          f"{best(lambda: rng.laplace(0.0, 1.0, n.shape)):.1f} ns); {one:.2f} µs for one answer of 36 queries")


def main() -> None:
    from knorm.audit_fp import undefended
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--check-against", default=None, help="a checkout of the old commit (float answers)")
    ap.add_argument("--pass-only", action="store_true", help="only time the rounding pass alone")
    args = ap.parse_args()
    pass_alone()
    if args.pass_only:
        return
    old = old_answers(args.check_against, args.answers) if args.check_against else None
    print(f"{'workload':<22} {'mechanism':<9} {'grid':>9} {'RMSE float':>11} {'RMSE grid':>11} {'change':>9} "
          f"{'time float s':>12} {'time grid s':>12} {'ratio':>6}")
    for wl in WORKLOADS:
        for mech in MECHS:
            releases(wl, mech, 2)  # certify the body, compile: not timed
            res, times = {}, {"float": [], "grid": []}
            for rep in range(args.repeats):  # interleaved, alternating which goes first: drift hits both
                for variant in (("float", "grid") if rep % 2 == 0 else ("grid", "float")):
                    ctx = undefended() if variant == "float" else contextlib.nullcontext()
                    with ctx:
                        _, out, t = releases(wl, mech, args.answers)
                    times[variant].append(t)
                    res[variant] = out
            res = {v: (res[v], min(times[v])) for v in res}
            F = WORKLOADS[wl]()
            fx = F @ data(F)
            rm = {v: float(np.sqrt(np.mean((res[v][0] - fx) ** 2))) for v in res}
            grid = MECHS[mech](F, 0).privacy_per_answer.details["grid"]
            assert np.all(np.abs(res["grid"][0] - res["float"][0]) <= grid / 2 + 1e-9)
            if old is not None:
                assert np.array_equal(np.asarray(old[f"{wl}|{mech}"]), res["float"][0]), (wl, mech)
            print(f"{wl:<22} {mech:<9} {grid:>9.3g} {rm['float']:>11.6f} {rm['grid']:>11.6f} "
                  f"{100 * (rm['grid'] / rm['float'] - 1):>+8.5f}% {res['float'][1]:>12.4f} {res['grid'][1]:>12.4f} "
                  f"{res['grid'][1] / res['float'][1]:>6.3f}")
    if old is not None:
        print("the float answers equal the old commit's bit for bit (same seeds)")


if __name__ == "__main__":
    main()
