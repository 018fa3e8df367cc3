"""NIM's plan against K-norm (and, optionally, an earlier NIM from git) on standard workloads.

    python scripts/nim_plan.py [--epsilon 1] [--draws 1000] [--before acd53c7] [--only NAME ...]
    python scripts/nim_plan.py --plan-only [--profile 25] [--before 882d022] --only prefix-1024

For each workload: K-norm's predicted RMS error ``√((k+1)(k+2)·tr Cov(Uniform K))/ε`` (a
one-level NIM's ``predicted_error``) and its ``E‖noise‖₂`` (``expected_error``), NIM's plan (levels as
dim/kept@ε_i), its predicted RMS error ``√E‖noise‖₂²`` and its Monte-Carlo ``E‖noise‖₂``
(± standard error), and build times. ``--before REV`` also runs the NIM of ``knorm/mechanisms/nim.py``
at git revision REV (same engine). Noise is seeded (``--seed``): these are measurements,
not private releases. ``--plan-only``: the plan search alone (its time, the plan, its predicted
RMS error and how many covariance estimates it made; no K-norm or Monte Carlo), and with
``--profile N`` the N most expensive calls of the search (cProfile, cumulative time).
"""

import argparse
import cProfile
import importlib.util
import pathlib
import pstats
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from knorm import KNormMechanism, NIMechanism  # noqa: E402
from knorm import workloads as W  # noqa: E402

WORKLOADS = {
    "pm1-24x120": lambda: W.random_pm1(24, 120, rng=1),
    "pm1-40x200": lambda: W.random_pm1(40, 200, rng=1),
    "prefix-64": lambda: W.prefix(64),
    "width16-128": lambda: W.width_range(128, 16),
    "prefix2d-8x8": lambda: np.kron(W.prefix(8), W.prefix(8)),
}
# run only when named with --only (NIM 0.1 did not finish prefix-256 in 10 minutes)
EXTRA = {"prefix-128": lambda: W.prefix(128), "prefix-256": lambda: W.prefix(256),
         "all-range-128": lambda: W.all_range(128), "all-range-256": lambda: W.all_range(256),
         "prefix-1024": lambda: W.prefix(1024), "marginals2-8bin": lambda: W.marginals((2,) * 8, 2)}


def nim_at(rev):
    """The NIMechanism class of ``knorm/mechanisms/nim.py`` at git revision ``rev``."""
    src = subprocess.run(["git", "show", f"{rev}:knorm/mechanisms/nim.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    name = "knorm.mechanisms._nim_before"
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    mod.__package__ = "knorm.mechanisms"
    sys.modules[name] = mod
    exec(compile(src, f"{rev}:knorm/mechanisms/nim.py", "exec"), mod.__dict__)
    return mod.NIMechanism


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def plan_only(name, F, a, Before):
    """The plan search alone, now (and at --before), one worker: time, plan, prediction, estimates."""
    classes = [("now", NIMechanism)] + ([(a.before, Before)] if Before is not None else [])
    for label, cls in classes:
        prof = cProfile.Profile() if a.profile else None
        t = time.perf_counter()
        if prof is not None:
            prof.enable()
        m = cls(F, epsilon=a.epsilon, sampler_options={"workers": 1})
        if prof is not None:
            prof.disable()
        dt = time.perf_counter() - t
        levels = " ".join(f"{p['dim']}/{p['kept_dim']}" for p in m.plan)
        print(f"{name} ({F.shape[0]}x{F.shape[1]}) NIM@{label}: plan [{levels}], predicted RMS {m.predicted_error:.4g} "
              f"(per query {m.predicted_error / np.sqrt(F.shape[0]):.4g}); {m.covariance_estimates} screening + "
              f"{m.precise_estimates} precise estimates; {dt:.1f} s", flush=True)
        if prof is not None:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(a.profile)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--before", default=None, help="git revision of an earlier NIM to run too")
    p.add_argument("--only", nargs="*", choices=sorted({**WORKLOADS, **EXTRA}), default=None)
    p.add_argument("--plan-only", action="store_true", help="time the plan search alone (no Monte Carlo)")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="with --plan-only: the N costliest calls")
    a = p.parse_args(argv)
    Before = nim_at(a.before) if a.before else None
    if a.plan_only:  # compile the kernels outside the timings
        NIMechanism(W.random_pm1(4, 8, rng=0), epsilon=1.0, sampler_options={"workers": 1})
    for name in a.only or WORKLOADS:
        F = {**WORKLOADS, **EXTRA}[name]()
        if a.plan_only:
            plan_only(name, F, a, Before)
            continue
        k, tk = timed(lambda: KNormMechanism(F, epsilon=a.epsilon, rng=a.seed))
        ke, tke = timed(lambda: k.expected_error(a.draws))
        rms = NIMechanism(F, epsilon=a.epsilon, max_levels=1).predicted_error  # one level: K-norm's prediction
        print(f"{name} ({F.shape[0]}x{F.shape[1]}): K-norm predicted RMS {rms:.4g}, Monte Carlo {ke.value:.4g} ± "
              f"{ke.stderr:.2g} [{'exact' if k.structure is not None else 'mcmc'}; {tk + tke:.1f} s]", flush=True)
        m, tm = timed(lambda: NIMechanism(F, epsilon=a.epsilon, rng=a.seed))
        me, tme = timed(lambda: m.expected_error(a.draws))
        levels = " ".join(f"{p['dim']}/{p['kept_dim']}@{p['epsilon']:.3g}" for p in m.plan)
        print(f"  NIM plan [{levels}] ({m.covariance_estimates} screening + {m.precise_estimates} precise covariance "
              f"estimates): predicted RMS "
              f"{m.predicted_error:.4g}, Monte Carlo {me.value:.4g} ± {me.stderr:.2g}; NIM/K-norm "
              f"{me.value / ke.value:.3f} [build {tm:.1f} s, draws {tme:.1f} s]", flush=True)
        if Before is not None:
            b, tb = timed(lambda: Before(F, epsilon=a.epsilon, rng=a.seed))
            be, tbe = timed(lambda: b.expected_error(a.draws))
            print(f"  NIM@{a.before} levels {[lv.dim for lv in b.levels]}: Monte Carlo {be.value:.4g} ± "
                  f"{be.stderr:.2g}; /K-norm {be.value / ke.value:.3f} [build {tb:.1f} s, draws {tbe:.1f} s]",
                  flush=True)


if __name__ == "__main__":
    main()
