"""knorm against HDMM's own optimiser, side by side on identical workloads (issue 20, item 5).

    .venv/bin/python scripts/compare_hdmm.py [--workloads KEY ...] [--out compare_hdmm.md]
        [--hdmm-path /tmp/hdmm/src] [--restarts 25] [--hdmm-seconds S] [--quick] [--side both|hdmm|knorm]

HDMM (McKenna et al., VLDB 2018; https://github.com/dpcomp-org/hdmm) is AGPL and never a
dependency of knorm: this script imports it only when it is importable (``--hdmm-path``, the
``HDMM_PATH`` environment variable, ``/tmp/hdmm/src``, or an installed ``hdmm``), and says so
when it is not (its column then reads "HDMM not importable"). Get it with::

    git clone https://github.com/dpcomp-org/hdmm /tmp/hdmm     # then --hdmm-path /tmp/hdmm/src

Measure: per-query RMSE ``√(E‖noise‖₂²/d)`` at ε = √2 (HDMM's ``error.rootmse``), pure ε-DP.

* **HDMM**: its templates as ``hdmm.mechanism.HDMM.optimize`` chooses them — p-Identity with
  ``p = max(1, n // 16)`` on a 1-D domain; on a product domain Kronecker p-Identity
  (``KronPIdentity``, ``p_i = max(1, n_i // 16)``) and the ``Marginals`` template, plus
  p-Identity (``p = n // 16``) on the flattened cells when n ≤ 1024 (it wins on 2-D ranges) —
  each optimised from ``--restarts`` seeded random starts (25, HDMM's default) up to n = 512 and
  ``max(1, 4096 // n)`` beyond (one start at n = 2048 takes minutes), keeping the least loss
  (``--hdmm-seconds`` can also stop starting new ones). Its best is the least exact error among them:
  ``2Δ₁(A)²/ε² · tr(WᵀW (AᵀA)⁺) / d`` with dense n × n matrices (HDMM's formula; its
  ``rootmse`` approximates WᵀW for a marginals strategy, so it is only cross-checked).
  The workloads are built from HDMM's classes (``Prefix``, ``AllRange``, ``Kronecker``,
  ``DimKMarginals``, ``WidthKRange``; the random ±1 matrix is knorm's, wrapped); their query
  count and Gram matrix WᵀW are checked against knorm's F (``FᵀF``) wherever knorm's side runs
  and HDMM is importable (also with ``--side knorm``).
* **knorm**: :func:`knorm.recommend` at ε = √2 with its defaults (``n_samples`` 2000, or 200
  with ``--quick``), on one BLAS thread and ``workers=1`` (``--workers``), as HDMM runs;
  its best row, the mechanism, and ± SE for a Monte-Carlo row. A workload whose explicit F is
  too large (more than ``--max-entries`` entries) uses :mod:`knorm.implicit` when this checkout
  has it, else its row says why it was not run.

The ratio is knorm/HDMM (below 1: knorm better). HDMM's published numbers (VLDB 2018, ε = √2,
n = 1024) are cited under the table, not rerun. Compatibility: recent scipy's LinearOperator
(HDMM's matrix base; scipy 1.17 here) refuses numpy ufuncs, so ``EkteloMatrix.sensitivity`` (``np.abs(self)``)
is rebound to the same formula with Python's ``abs``; nothing else of HDMM is touched.
``--side hdmm`` runs HDMM alone (``--side knorm`` knorm alone). Runs on subsets write
``--json``; ``--merge A.json B.json ...`` writes one table from them (nothing rerun).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one core, both sides;
    os.environ.setdefault(_var, "1")  # a multi-threaded BLAS on a loaded machine was 6x slower here

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's knorm

from knorm import recommend  # noqa: E402
from knorm import workloads as KW  # noqa: E402

EPS = math.sqrt(2.0)
MAX_ENTRIES = 2 * 10**8  # explicit F above this (1.6 GB) goes to knorm.implicit, or is not run
# HDMM, VLDB 2018 (McKenna et al.), published per-query RMSE at ε = √2, n = 1024: cited, not rerun
PUBLISHED = {"prefix-1024": {"identity": 22.64, "HB": 9.10, "HDMM": 6.78},
             "allrange-1024": {"identity": 18.49, "HB": 9.06, "HDMM": 7.85}}


@dataclass
class Workload:
    label: str
    d: int
    n: int
    domain: int | tuple[int, ...]
    explicit: Callable[[], np.ndarray]  # knorm's F
    hdmm: Callable[[Any, Callable[[], np.ndarray]], Any]  # (hdmm.workload, F builder) -> HDMM workload
    implicit: tuple[str, Any] = field(default=("", None))  # (kind, argument) for knorm.implicit


def _marg_rows(shape: tuple[int, ...], k: int) -> int:
    import itertools
    return sum(math.prod(shape[a] for a in c) for c in itertools.combinations(range(len(shape)), k))


def _pm1() -> np.ndarray:
    return KW.random_pm1(40, 200, rng=1)


def _catalogue() -> dict[str, Workload]:
    w: dict[str, Workload] = {}
    for n in (256, 1024, 2048):
        w[f"prefix-{n}"] = Workload(f"prefix, n = {n}", n, n, n, lambda n=n: KW.prefix(n),
                                    lambda hw, F, n=n: hw.Prefix(n), ("prefix", n))
    for n in (256, 1024, 2048):
        w[f"allrange-{n}"] = Workload(f"all ranges, n = {n}", n * (n + 1) // 2, n, n, lambda n=n: KW.all_range(n),
                                      lambda hw, F, n=n: hw.AllRange(n), ("all_range", n))
    for m in (16, 32):
        w[f"range2d-{m}"] = Workload(f"2-D ranges {m}×{m}", (m * (m + 1) // 2) ** 2, m * m, (m, m),
                                     lambda m=m: np.kron(KW.all_range(m), KW.all_range(m)),
                                     lambda hw, F, m=m: hw.Kronecker([hw.AllRange(m), hw.AllRange(m)]),
                                     ("ranges", (m, m)))
    w["width16-128"] = Workload("width-16 ranges, n = 128", 113, 128, 128, lambda: KW.width_range(128, 16),
                                lambda hw, F: hw.WidthKRange(128, 16))
    for key, shape, k, label in (("marg2-10bin", (2,) * 10, 2, "2-way marginals, 10 binary attributes"),
                                 ("marg2-23456", (2, 3, 4, 5, 6), 2, "2-way marginals, domain (2,3,4,5,6)"),
                                 ("marg3-8bin", (2,) * 8, 3, "3-way marginals, 8 binary attributes")):
        w[key] = Workload(label, _marg_rows(shape, k), math.prod(shape), shape,
                          lambda shape=shape, k=k: KW.marginals(shape, k),
                          lambda hw, F, shape=shape, k=k: hw.DimKMarginals(shape, k))
    w["pm1-40x200"] = Workload("random ±1, 40 × 200", 40, 200, 200, _pm1,
                               lambda hw, F: hw.EkteloMatrix(F()))
    return w


WORKLOADS = _catalogue()


# ---------------------------------------------------------------- HDMM side (optional import)

def load_hdmm(path: str | None) -> tuple[Any, str]:
    """HDMM's modules (a namespace) or None, and a one-line note of where they came from / why not."""
    if path is not None and not os.path.isdir(os.path.join(path, "hdmm")):
        return None, f"HDMM not importable: no hdmm package in --hdmm-path {path}"
    tries = [p for p in (path, os.environ.get("HDMM_PATH"), "/tmp/hdmm/src") if p]
    for p in tries:
        if os.path.isdir(os.path.join(p, "hdmm")) and p not in sys.path:
            sys.path.insert(0, p)
            break
    try:
        mods = {m: importlib.import_module(f"hdmm.{m}") for m in ("workload", "templates", "error", "matrix")}
    except ImportError as exc:
        return None, (f"HDMM not importable ({type(exc).__name__}: {exc}); get it with `git clone "
                      "https://github.com/dpcomp-org/hdmm /tmp/hdmm` and pass --hdmm-path /tmp/hdmm/src")
    Ekt = mods["matrix"].EkteloMatrix
    try:
        np.abs(Ekt(np.eye(2)))
    except TypeError:  # scipy's LinearOperator sets __array_ufunc__ = None: same formula, builtin abs
        Ekt.sensitivity = lambda self: float(np.max(abs(self).sum(axis=0)))
    src = os.path.dirname(os.path.dirname(mods["workload"].__file__))
    commit = ""
    try:
        commit = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except OSError:
        pass
    return argparse.Namespace(**mods), f"HDMM from {src}" + (f" (commit {commit})" if commit else "")


def exact_rmse(G: np.ndarray, AtA: np.ndarray, sens: float, d: int) -> float:
    """``√(2Δ₁²/ε² · tr(G (AᵀA)⁺) / d)``; inf when A does not support W (G (AᵀA)⁺ AᵀA ≠ G)."""
    P = np.linalg.pinv(AtA, hermitian=True)
    X = G @ P
    if not np.allclose(X @ AtA, G, rtol=1e-6, atol=1e-8 * max(1.0, float(np.abs(G).max()))):
        return math.inf
    return math.sqrt(2.0 * sens**2 / EPS**2 * float(np.trace(X)) / d)


def starts_for(n: int, restarts: int) -> int:
    """Random starts of a template over n cells: ``restarts`` up to n = 512, then ``max(1, 4096 // n)``
    (4 at 1024, 2 at 2048: one L-BFGS start of p-Identity at n = 2048 takes minutes)."""
    return restarts if n <= 512 else max(1, min(restarts, 4096 // n))


def run_hdmm(hd: Any, wl: Workload, restarts: int, seconds_cap: float | None, seed: int) -> dict[str, Any]:
    """HDMM's templates on wl (module docstring), its best by exact error, and the wall time."""
    t0 = time.perf_counter()
    Wh = wl.hdmm(hd.workload, wl.explicit)
    G = Wh.gram().dense_matrix()
    cands: dict[str, tuple[float, Any, int]] = {}  # template -> (least loss, template object, starts)

    def keep(name: str, make: Callable[[int], Any], cells: int) -> None:
        start = time.perf_counter()
        for r in range(starts_for(cells, restarts)):
            if r and seconds_cap is not None and time.perf_counter() - start > seconds_cap:
                break
            t = make(seed + r)
            loss = t.optimize(Wh)
            if name not in cands or loss < cands[name][0]:
                cands[name] = (loss, t, r + 1)
            else:
                cands[name] = (*cands[name][:2], r + 1)

    p = max(1, wl.n // 16)
    if isinstance(wl.domain, int):
        keep(f"p-Identity, p = {p}", lambda s: hd.templates.PIdentity(p, wl.n, seed=s), wl.n)
    else:
        ns = list(wl.domain)
        ps = [max(1, k // 16) for k in ns]

        def kron(s: int) -> Any:
            np.random.seed(s)  # KronPIdentity's inner templates draw their seeds from numpy's global state
            return hd.templates.KronPIdentity(ps, ns)

        keep(f"Kronecker p-Identity, p = {ps}", kron, max(ns))
        keep("Marginals", lambda s: hd.templates.Marginals(ns, seed=s), max(ns))
        if wl.n <= 1024:  # p-Identity on the flattened domain: O(n²p) per step
            keep(f"p-Identity on the {wl.n} cells, p = {p}", lambda s: hd.templates.PIdentity(p, wl.n, seed=s),
                 wl.n)
    seconds = time.perf_counter() - t0
    errors, starts = {}, {}
    for name, (_, t, k) in cands.items():
        A = t.strategy()
        errors[name] = exact_rmse(G, A.gram().dense_matrix(), float(A.sensitivity()), wl.d)
        starts[name] = k
    best = min(errors, key=lambda k: errors[k])
    A = cands[best][1].strategy()
    own = float(hd.error.rootmse(Wh, A, eps=EPS))
    return {"rmse": errors[best], "template": best, "seconds": seconds, "starts": starts,
            "templates": errors, "hdmm_rootmse": own, "gram": G}


# ---------------------------------------------------------------- knorm side

def knorm_input(wl: Workload, max_entries: int) -> tuple[Any, str]:
    """knorm's F (explicit), an implicit workload from knorm.implicit, or None and why not."""
    entries = wl.d * wl.n
    if entries <= max_entries:
        return wl.explicit(), "explicit"
    try:
        implicit = importlib.import_module("knorm.implicit")
    except ImportError:
        return None, (f"not run: the explicit F has {entries:.2g} entries (> {max_entries:.2g}) "
                      "and this checkout has no knorm.implicit")
    kind, arg = wl.implicit
    make = getattr(implicit, kind, None)
    if make is None:
        return None, f"not run: the explicit F has {entries:.2g} entries and knorm.implicit has no {kind}()"
    return make(arg), "implicit"


def knorm_gram(F: Any) -> np.ndarray | None:
    if isinstance(F, np.ndarray):
        return F.T @ F
    g = getattr(F, "gram", None)
    if g is None:
        return None
    G = g() if callable(g) else g
    return np.asarray(G, dtype=float)


def run_knorm(F: Any, samples: int, workers: int, budget: float | None) -> dict[str, Any]:
    kw: dict[str, Any] = {"epsilon": EPS, "n_samples": samples, "mc_seed": 0, "workers": workers}
    if budget is not None and "budget_s" in inspect.signature(recommend).parameters:
        kw["budget_s"] = budget
    t0 = time.perf_counter()
    rec = recommend(F, **kw)
    seconds = time.perf_counter() - t0
    row = rec.table[rec.best]
    rows = {k: (r.per_query_rmse, r.per_query_stderr, r.skipped, getattr(r, "seconds", None))
            for k, r in rec.table.items()}
    return {"rmse": float(row.per_query_rmse), "se": float(row.per_query_stderr or 0.0), "mechanism": rec.best,
            "seconds": seconds, "rows": rows, "dropped": dict(getattr(rec, "dropped", None) or {})}


# ---------------------------------------------------------------- table

def _f(v: float | None) -> str:
    return "—" if v is None else ("∞" if math.isinf(v) else f"{v:.4g}")


def _ratio(h: dict[str, Any] | None, k: dict[str, Any] | None) -> str:
    """knorm/HDMM ± SE; bold when knorm is worse by more than 2 SE and 0.05%."""
    if h is None or k is None or not math.isfinite(h["rmse"]):
        return ""
    ratio = f"{k['rmse'] / h['rmse']:.3f}" + (f" ± {k['se'] / h['rmse']:.3f}" if k["se"] else "")
    return f"**{ratio}**" if k["rmse"] > h["rmse"] * 1.0005 + 2 * k["se"] else ratio


def brief(results: dict[str, dict[str, Any]]) -> str:
    """The short table (README): workload, HDMM's best, knorm's best and mechanism, the ratio."""
    lines = ["| workload (d × n) | HDMM | knorm (mechanism) | knorm/HDMM |", "|---|---|---|---|"]
    for key, r in results.items():
        wl, h, k = WORKLOADS[key], r.get("hdmm"), r.get("knorm")
        hcell = _f(h["rmse"]) if h else r.get("hdmm_note", "—")
        kcell = (f"{_f(k['rmse'])}" + (f" ± {k['se']:.2g}" if k["se"] else "") + f" ({k['mechanism']})" if k
                 else r.get("knorm_note", "—"))
        lines.append(f"| {wl.label} ({wl.d} × {wl.n}) | {hcell} | {kcell} | {_ratio(h, k)} |")
    return "\n".join(lines) + "\n"


def markdown(results: dict[str, dict[str, Any]], header: str) -> str:
    lines = [header, "",
             "| workload (d × n) | HDMM best (template) | HDMM s | knorm best (mechanism) | knorm s | knorm/HDMM |",
             "|---|---|---|---|---|---|"]
    for key, r in results.items():
        wl = WORKLOADS[key]
        h, k = r.get("hdmm"), r.get("knorm")
        hcell = (r.get("hdmm_note", "—") if h is None
                 else f"{_f(h['rmse'])} ({h['template']}; {h['starts'][h['template']]} start{'s' if h['starts'][h['template']] > 1 else ''})")
        hs = "" if h is None else f"{h['seconds']:.1f}"
        if k is None:
            kcell, ks = r.get("knorm_note", "—"), ""
        else:
            se = f" ± {k['se']:.2g}" if k["se"] else ""
            kcell, ks = f"{_f(k['rmse'])}{se} ({k['mechanism']})", f"{k['seconds']:.1f}"
        lines.append(f"| {wl.label} ({wl.d} × {wl.n}) | {hcell} | {hs} | {kcell} | {ks} | {_ratio(h, k)} |")
    lines.append("")
    lines.append("HDMM, published (McKenna et al., VLDB 2018; ε = √2, n = 1024; cited, not rerun): "
                 + "; ".join(f"{k.replace('-', ' ').replace('allrange', 'all ranges')}: "
                             + ", ".join(f"{m} {v:g}" for m, v in row.items()) for k, row in PUBLISHED.items())
                 + ".")
    notes = []
    for key, r in results.items():
        h = r.get("hdmm")
        if h is not None:
            other = ", ".join(f"{t} {_f(v)}" for t, v in h["templates"].items() if t != h["template"])
            rel = abs(h["hdmm_rootmse"] - h["rmse"]) / h["rmse"] if math.isfinite(h["rmse"]) else 0.0
            if other or rel > 1e-6:
                notes.append(f"- {WORKLOADS[key].label}: HDMM's other templates: {other or 'none'}"
                             + (f"; HDMM's own rootmse {_f(h['hdmm_rootmse'])}" if rel > 1e-6 else ""))
        k = r.get("knorm")
        if k and k.get("dropped"):
            notes.append(f"- {WORKLOADS[key].label}: recommend dropped "
                         + "; ".join(f"{m} ({why})" for m, why in k["dropped"].items()))
        if r.get("gram_note"):
            notes.append(f"- {WORKLOADS[key].label}: {r['gram_note']}")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS), metavar="KEY",
                   help="subset, of: " + " ".join(WORKLOADS))
    p.add_argument("--out", default="compare_hdmm.md", help="markdown table (default compare_hdmm.md)")
    p.add_argument("--json", default=None, help="also write the numbers as JSON here")
    p.add_argument("--hdmm-path", default=None, help="folder holding HDMM's hdmm package (its src/)")
    p.add_argument("--restarts", type=int, default=25,
                   help="HDMM's random starts per template up to n = 512 (default 25, its own); beyond, "
                        "max(1, 4096 // n)")
    p.add_argument("--hdmm-seconds", type=float, default=None,
                   help="no further HDMM start of a template after this many seconds on it (default: no limit)")
    p.add_argument("--seed", type=int, default=0, help="HDMM's starts' seed")
    p.add_argument("--side", choices=("both", "hdmm", "knorm"), default="both")
    p.add_argument("--quick", action="store_true", help="K-norm / NIM Monte Carlo with 200 draws, not 2000")
    p.add_argument("--samples", type=int, default=None, help="recommend's n_samples (default 2000; --quick 200)")
    p.add_argument("--workers", type=int, default=1, help="recommend's sampler threads (default 1)")
    p.add_argument("--budget-s", type=float, default=None, help="recommend's budget_s, where it has one")
    p.add_argument("--max-entries", type=int, default=MAX_ENTRIES,
                   help=f"largest explicit F given to recommend (default {MAX_ENTRIES:.0e})")
    p.add_argument("--brief", default=None, metavar="PATH", help="also write the short table (README's) here")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="write one table from earlier runs' --json files (runs nothing)")
    a = p.parse_args(argv)
    if a.merge:
        headers, merged = [], {}
        for path in a.merge:
            with open(path) as f:
                run = json.load(f)
            headers.append(run["header"])
            for k, v in run["results"].items():  # a --side hdmm run and a --side knorm run combine
                if k in WORKLOADS:
                    merged.setdefault(k, {}).update({f: x for f, x in v.items() if x is not None})
        order = {k: i for i, k in enumerate(WORKLOADS)}
        merged = dict(sorted(merged.items(), key=lambda kv: order[kv[0]]))
        md = markdown(merged, "\n\n".join(f"Run {i + 1}: {h}" for i, h in enumerate(headers))
                      if len(headers) > 1 else headers[0])
        with open(a.out, "w") as f:
            f.write(md)
        if a.brief:
            with open(a.brief, "w") as f:
                f.write(brief(merged))
        print(md)
        return 0
    if a.restarts < 1:
        p.error("--restarts must be at least 1")
    samples = a.samples or (200 if a.quick else 2000)

    hd, hnote = load_hdmm(a.hdmm_path)  # with --side knorm only to check the Gram matrices
    print(hnote, flush=True)
    if a.side == "knorm":
        hnote = "HDMM not run (--side knorm)"
    results: dict[str, dict[str, Any]] = {}

    def write(final: bool) -> str:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        try:
            commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, timeout=10).stdout.strip()
            if subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "knorm"], capture_output=True,
                              text=True, timeout=10).stdout.strip():
                commit += " + uncommitted changes to knorm/"
        except OSError:
            commit = "?"
        parts = [f"measured {when} at knorm {commit or '?'}"]
        if a.side != "knorm":
            parts.append(f"{hnote}" + ("" if hd is None else f"; HDMM: {a.restarts} starts per template "
                                       "up to n = 512, 4096 // n beyond (seeds from "
                                       f"{a.seed})" + ("" if a.hdmm_seconds is None else
                                                       f", none begun after {a.hdmm_seconds:g} s")))
        if a.side != "hdmm":
            parts.append(f"recommend: n_samples {samples}, workers {a.workers}"
                         + (f", budget_s {a.budget_s:g}" if a.budget_s is not None else ""))
        header = ("Per-query RMSE √(E‖noise‖₂²/d) at ε = √2, pure ε-DP; one BLAS thread; " + "; ".join(parts)
                  + "; bold ratio: knorm worse by more than 2 SE (and 0.05%)." + ("" if final else " (partial)"))
        md = markdown(results, header)
        with open(a.out, "w") as f:
            f.write(md)
        if a.brief:
            with open(a.brief, "w") as f:
                f.write(brief(results))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"header": header, "results": results}, f, indent=1, default=str)
        return md

    for key in a.workloads:
        wl = WORKLOADS[key]
        r: dict[str, Any] = {}
        if hd is not None and a.side != "knorm":
            r["hdmm"] = run_hdmm(hd, wl, a.restarts, a.hdmm_seconds, a.seed)
            h = r["hdmm"]
            print(f"{key}: HDMM {h['rmse']:.4f} ({h['template']}; starts {h['starts']}) in {h['seconds']:.1f} s; "
                  f"templates {h['templates']}", flush=True)
        else:
            r["hdmm_note"] = "not run" if a.side == "knorm" or hd is not None else "HDMM not importable"
        if a.side != "hdmm":
            F, how = knorm_input(wl, a.max_entries)
            if F is None:
                r["knorm_note"] = how
            else:
                G = knorm_gram(F)
                if hd is not None and G is not None:
                    Wh = wl.hdmm(hd.workload, wl.explicit)
                    H = r["hdmm"]["gram"] if "hdmm" in r else Wh.gram().dense_matrix()
                    d = F.shape[0] if isinstance(F, np.ndarray) else getattr(F, "d", None)
                    ok = (d == Wh.shape[0] == wl.d and G.shape == H.shape
                          and np.allclose(G, H, rtol=1e-9, atol=1e-9))
                    r["gram_note"] = None if ok else "HDMM's workload DIFFERS from knorm's (query count or WᵀW)"
                    r["gram_checked"] = ok
                    print(f"{key}: " + (f"knorm's F and HDMM's W: {d} queries, FᵀF = WᵀW" if ok else r["gram_note"]), flush=True)
                try:
                    r["knorm"] = run_knorm(F, samples, a.workers, a.budget_s)
                except (ValueError, TypeError, MemoryError) as exc:  # e.g. recommend refusing F
                    r["knorm_note"] = f"recommend refused: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                    print(f"{key}: {r['knorm_note']}", flush=True)
                else:
                    k = r["knorm"]
                    print(f"{key}: knorm {k['rmse']:.4f} ({k['mechanism']}, {how}) in {k['seconds']:.1f} s",
                          flush=True)
            del F
        r.get("hdmm", {}).pop("gram", None)
        results[key] = r
        write(False)  # what is done so far survives an interrupted run
    md = write(True)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
