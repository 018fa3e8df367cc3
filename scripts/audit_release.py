"""Pre-registered privacy audit of MCMC releases (issue 8, item 6).

A user holds one mechanism object and releases many answers on the same data. This
script does exactly that on a data set x and on a neighbour x' (one cell + 1): it cuts
each stream of consecutive releases into ``--windows`` windows of ``--window`` answers
and counts the windows in which a pre-registered event fires:

* line:   the true answer Fx (of x, the hypothesis) lies on the line through two answers
          of the window (a reused uniform draw z with a fresh radius r does this);
* repeat: two answers of the window are identical.

With one-sided Clopper–Pearson bounds at 1 − α/2 each, ε_LB = ln(P_low / Q_high) is a
lower bound (probability >= 1 − α, each event on its own) on the ε of the WINDOW: a
window holds ``window`` answers on the same data, so the claim it is compared with is
``window · ε`` (basic composition), not the ε of one answer. An exact mechanism
(``--mechanism laplace``) never fires either event.

    python scripts/audit_release.py                       # K-norm, ball walk, defaults below
    python scripts/audit_release.py --mechanism laplace   # exact mechanism: not caught
    python scripts/audit_release.py --estimate-only       # pilot run and time estimate only

Windows from one mechanism's consecutive releases are independent only approximately
(releases come from banks of pooled MCMC draws); the bound assumes independence.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's knorm, not an installed one
import knorm  # noqa: E402
from knorm.audit import audit_event, fx_on_line, repeated_answer  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--mechanism", choices=["knorm", "laplace"], default="knorm")
    p.add_argument("--walk", default="ball", help="KNormMechanism walk")
    p.add_argument("--shape", default="4x8", help="d x n of the random ±1 workload F")
    p.add_argument("--workload-seed", type=int, default=0, help="seeds F and the data x (not the noise)")
    p.add_argument("--epsilon", type=float, default=0.01, help="ε of one answer")
    p.add_argument("--window", type=int, default=100, help="answers per window (consecutive releases)")
    p.add_argument("--windows", type=int, default=1000, help="windows under x and under x' each")
    p.add_argument("--bank-size", type=int, default=1000, help="KNormMechanism bank_size")
    p.add_argument("--alpha", type=float, default=0.05, help="1 − confidence of each bound")
    p.add_argument("--tol", type=float, default=1e-9, help="angle tolerance of the line event (radians)")
    p.add_argument("--pilot", type=int, default=20, help="windows timed before the estimate (at least two banks)")
    p.add_argument("--accept-uncertified", action="store_true",
                   help="pass accept_uncertified=True (sampler versions that certify runs)")
    p.add_argument("--estimate-only", action="store_true", help="print the time estimate and stop")
    return p.parse_args(argv)


def make_mechanism(args, F):
    if args.mechanism == "laplace":
        return knorm.LaplaceMechanism(F, epsilon=args.epsilon, rng=None)
    kw = {"accept_uncertified": True} if args.accept_uncertified else {}
    return knorm.KNormMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=None, bank_size=args.bank_size, **kw)


def draw_windows(mech, x, count, window, label):
    """``count`` windows of ``window`` consecutive releases of one mechanism object."""
    out, t0, last = [], time.perf_counter(), time.perf_counter()
    for i in range(count):
        out.append(np.asarray(mech.release(x, size=window), float))
        now = time.perf_counter()
        if now - last > 30:
            print(f"  {label}: {i + 1}/{count} windows, {now - t0:.0f} s", flush=True)
            last = now
    return out


def replay(ws):
    it = iter(ws)
    return lambda k: next(it)


def main(argv=None):
    args = parse_args(argv)
    if args.window < 2 or args.windows < 1 or args.pilot < 1:
        sys.exit("audit_release.py: --window must be >= 2, --windows and --pilot >= 1")
    try:
        d, n = (int(v) for v in args.shape.lower().split("x"))
    except ValueError:
        sys.exit(f"audit_release.py: --shape must look like 4x8, got {args.shape!r}")
    wrng = np.random.default_rng(args.workload_seed)
    F = knorm.workloads.random_pm1(d, n, rng=wrng)
    x = wrng.integers(0, 10, n).astype(float)
    x2 = x.copy()
    x2[int(np.argmax(np.abs(F).sum(0)))] += 1.0  # the most sensitive cell: ‖x − x'‖₁ = 1
    fx = F @ x
    claim = args.window * args.epsilon
    print(f"knorm {knorm.__file__}")
    print(f"mechanism {args.mechanism}" + (f" (walk={args.walk}, bank_size={args.bank_size})"
                                           if args.mechanism == "knorm" else "")
          + f", F random ±1 {d}x{n} (workload seed {args.workload_seed}), ε = {args.epsilon:g} per answer")
    print(f"{args.windows} windows of {args.window} consecutive releases under x and under x'; "
          f"claim of one window (basic composition): {args.window} × {args.epsilon:g} = {claim:g}")

    t0 = time.perf_counter()
    try:
        mp, mq = make_mechanism(args, F), make_mechanism(args, F)
        first = draw_windows(mp, x, 1, args.window, "x")  # setup: rounding, compilation, first bank
        t_setup = time.perf_counter() - t0
        t1 = time.perf_counter()
        # the pilot spans at least two bank refills, so that refills are in the per-window time
        n_pilot = min(max(args.pilot, -(-2 * args.bank_size // args.window) + 1), args.windows)
        pilot = first + draw_windows(mp, x, n_pilot - 1, args.window, "x")
        per = (time.perf_counter() - t1) / max(len(pilot) - 1, 1)
        sampling = getattr(getattr(mp, "privacy", None), "sampling", "?")
        print(f"setup {t_setup:.1f} s (sampling: {sampling}); about {per * 1e3:.1f} ms per window; "
              f"estimated time {2 * t_setup + 2 * args.windows * per:.0f} s", flush=True)
        if args.estimate_only:
            return 0
        P = pilot + draw_windows(mp, x, args.windows - len(pilot), args.window, "x")
        Q = draw_windows(mq, x2, args.windows, args.window, "x'")
    except Exception as exc:  # e.g. knorm.ConvergenceError from a sampler that certifies its runs
        sys.exit(f"audit_release.py: release failed: {type(exc).__name__}: {exc}")
    print(f"sampled in {time.perf_counter() - t0:.0f} s")

    print(f"\n{'event':<48} {'hits x':>8} {'hits x′':>8} {'ε_LB':>7}  {'δ_LB at claim':>13}  verdict")
    verdicts = []
    for event in (fx_on_line(fx, tol=args.tol), repeated_answer()):
        r = audit_event(event, replay(P), replay(Q), windows=args.windows, window=args.window, alpha=args.alpha)
        if r.failure is not None:
            print(f"{event.__name__:<48} FAILURE: {r.failure}")
            verdicts.append(True)
            continue
        caught = r.refutes(claim)
        verdicts.append(caught)
        print(f"{event.__name__:<48} {r.event['hits_p']:>8} {r.event['hits_q']:>8} {r.epsilon_lower_bound:>7.3f}  "
              f"{r.delta_lower_bound(claim):>13.2e}  {'REFUTES' if caught else 'consistent with'} ε = {claim:g}")
    print(f"\n{100 * (1 - args.alpha):g}% lower bounds on the ε of a window of {args.window} answers "
          f"(each event pre-registered; Clopper–Pearson, one-sided at 1 − α/2 each)")
    return 1 if any(verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
