"""Pivots per independent draw of the billiard walk against its trajectory-length law (issue 28, part 2).

For each length law, ``--chains`` chains start at a body's public stationary states (a prepared
file's certified states, else the rounding's end points), run ``--burn`` steps, then ``--steps``
steps recorded after every step, in the rounded frame. Per law it prints:

- pivots per step;
- τ per step (records / bulk ESS over the chains, as the certificate measures it) of the slowest
  ambient coordinate, of ``|z|²`` (frame), of the exact gauge ``‖z‖_K`` (every record solved),
  and of the slowest table block energy ``Σ_{i ∈ table} z_i²`` (ambient; a marginal workload's
  tables, recognised from F's entries); ``|z|²``, the gauge and the block energies are invariant
  under the body's value permutations, so symmetry moves could not speed them up;
- ``τ_cert = max(1, τ of coordinates, |z|², gauge, blocks)`` (the certificate's), its spread over the
  two halves of the chains, and the costs it sets: pivots per ESS (``τ·pivots/step``, a pool's
  cost per independent record) and a release's warm-up ``W·pivots/step``, ``W = max(20, ⌈20τ⌉)``.

Laws: ``M`` or ``M:a`` — uniform on ``[(1−a)·M·R, (1+a)·M·R]`` (R = ``body_radius``; the default
is ``2:0.5``); ``diam`` — volesti's ``U(0, 1)·diameter`` (``a = 1``, mean diameter/2, diameter
``2·max‖column‖₂`` in the rounded frame). Pivots are counted, not timed, so the numbers do not
depend on the machine's load.

    python scripts/tune_billiard_length.py --shape 2 3 4 5 6 7 --prepared W.knorm --F F.npy \\
        --laws 2:0.5 1.5:0.5 1:0.5 3:0.5 2:0.9 diam --chains 8 --steps 300
    python scripts/tune_billiard_length.py --binary 10 --laws 2 1.5 3 --steps 400

Without ``--prepared`` the body is rounded here (``rounding_of``) and the chains start at the
rounding's end points.
"""

import argparse
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from knorm import workloads as W  # noqa: E402
from knorm.diagnostics import ess  # noqa: E402
from knorm.walks.certify import block_energies, warmup_steps  # noqa: E402
from knorm.walks.chains import Chain, default_params, default_workers, diameter, run_chains  # noqa: E402


def parse_law(s, R, diam):
    """(name, params' length L, jitter a) of a law spec."""
    if s == "diam":
        return "U(0,1)·diam", diam / 2.0, 1.0
    m, _, a = s.partition(":")
    a = float(a) if a else 0.5
    return f"U[{(1 - a) * float(m):.3g}R, {(1 + a) * float(m):.3g}R]", float(m) * R, a


def taus(x):
    """Per-step τ (records / min bulk ESS) of ``x`` (chains, k, p)."""
    n = x.shape[0] * x.shape[1]
    return n / float(np.min(ess(x)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", type=int, nargs="+", help="2-way marginals over this domain (rows shuffled)")
    ap.add_argument("--binary", type=int, help="2-way marginals of this many binary attributes")
    ap.add_argument("--pm1", type=int, help="a random ±1 matrix of this many rows and 5× as many columns")
    ap.add_argument("--F", help="the workload matrix (.npy) instead of building it")
    ap.add_argument("--prepared", help="a prepared file of this F (its rounding and certified states)")
    ap.add_argument("--laws", nargs="+", default=["2:0.5", "1.5:0.5", "3:0.5", "diam"])
    ap.add_argument("--chains", type=int, default=8)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--burn", type=int, default=10)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--order", type=int, default=1, help="seed of the row shuffle")
    a = ap.parse_args()

    if a.F:
        F = np.load(a.F)
    elif a.shape or a.binary:
        F = W.marginals(tuple(a.shape) if a.shape else (2,) * a.binary, 2)
        F = F[np.random.default_rng(a.order).permutation(F.shape[0])]
    elif a.pm1:
        F = W.random_pm1(a.pm1, 5 * a.pm1, rng=np.random.default_rng(0))
    else:
        ap.error("give --F, --shape, --binary or --pm1")

    t0 = time.perf_counter()
    import knorm

    if a.prepared:
        w = knorm.load_prepared(a.prepared, F)
        body, rnd = w.body, w.rounding
        if w.certified is not None:
            starts = w.certified.states
            states = w.certified.oracle_states(rnd.frame)
            print(f"loaded {a.prepared}: {w.certificate.summary()}")
        else:
            starts, states = rnd.points, [None] * len(rnd.points)
    else:
        from knorm.body.hull import SymmetricHull
        from knorm.walks.sampler import rounding_of

        body = SymmetricHull(F)
        rnd = rounding_of(body)
        starts, states = rnd.points, [None] * len(rnd.points)
    fr = rnd.frame
    print(f"F {F.shape}, rank {fr.r}, n {fr.n}; body and rounding in {time.perf_counter() - t0:.1f} s", flush=True)

    tables = body.tables  # per row of F its table (a marginal workload, recognised from F's entries), else None

    base = default_params("billiard", fr)
    R = base[0] / 2.0  # the default L is 2R
    diam = diameter(fr)
    print(f"R = {R:.4g}, diameter = {diam:.4g} ({diam / R:.1f} R); {a.chains} chains, {a.burn} + {a.steps} steps")
    rows = []
    for spec in a.laws:
        name, L, jit = parse_law(spec, R, diam)
        p = base.copy()
        p[0], p[3] = L, jit
        cs = []
        for i in range(a.chains):
            j = i % len(starts)
            st = None if states[j] is None else states[j].copy()
            cs.append(Chain(fr, starts[j], np.random.default_rng(1000 + i), state=st))
        t = time.perf_counter()
        run_chains(cs, "billiard", a.burn, a.burn, p, a.workers)
        p0 = sum(c.pivots for c in cs)
        rec = run_chains(cs, "billiard", a.steps, 1, p, a.workers)
        piv = (sum(c.pivots for c in cs) - p0) / (a.chains * a.steps)
        with ThreadPoolExecutor(max_workers=a.workers or default_workers()) as ex:  # the kernels release the GIL
            g = np.array(list(ex.map(lambda i: fr.gauges(np.ascontiguousarray(rec[i]), cs[i].state.copy())[0],
                                     range(a.chains))))
        amb = body.to_ambient(rnd.to_span(rec))
        sq = np.sum(rec**2, axis=2)[..., None]
        t_amb, t_sq, t_g = taus(amb), taus(sq), taus(g[..., None])
        t_blk = float("nan")
        if tables is not None:
            E = block_energies(amb, tables)
            t_blk = taus(E)
        tau = max(1.0, t_amb, t_sq, t_g, 0.0 if tables is None else t_blk)
        h = a.chains // 2
        halves = [max(1.0, taus(amb[s]), taus(sq[s]), taus(g[s][..., None]), 0.0 if tables is None else taus(E[s]))
                  for s in (slice(0, h), slice(h, None))]
        Wst = warmup_steps(tau)
        rows.append((name, piv, tau, Wst * piv))
        print(f"{name:>18}: {piv:8.0f} pivots/step | τ coord {t_amb:.2f}, |z|² {t_sq:.2f}, gauge {t_g:.2f}, "
              f"blocks {t_blk:.2f} | τ_cert {tau:.2f} (halves {halves[0]:.2f}, {halves[1]:.2f}) | "
              f"pivots/ESS {tau * piv:8.0f}, W {Wst} → warm-up {Wst * piv:9.0f} pivots | "
              f"{time.perf_counter() - t:.0f} s", flush=True)
    b = rows[0]
    print(f"relative to {b[0]}: " + "; ".join(
        f"{n}: pivots/ESS {t * p / (b[2] * b[1]):.2f}×, warm-up {w / b[3]:.2f}×" for n, p, t, w in rows[1:]))


if __name__ == "__main__":
    main()
