"""Benchmarks and experiments shared by ``knorm bench`` and ``scripts/``.

* :func:`compare_oracles` -- ESS/s of hit-and-run with the facet-walk oracle vs the
  HiGHS LP oracle (same chain, same inputs), and the default walk's ESS/s per core.
* :func:`table3` -- the corrected reference experiment of docs/design.md §8.

Arguments are checked before anything runs: sizes and counts are positive integers
(memory-checked where they size an allocation), durations are seconds in (0, 86400],
seeds are non-negative integers; anything else is a one-line ValueError naming it.
"""

import csv
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import workloads as W
from ._validate import check_memory, is_int, is_real, positive_int, short_repr
from .body import ReferenceOracle, SymmetricHull
from .body.hull import validate_matrix
from .diagnostics import ess as _ess
from .mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
from .mechanisms._base import check_epsilon
from .privacy import _real
from .walks.chains import BLOCK, WALKS, Chain, block_inputs, check_workers, default_workers, n_workers, run_chains
from .walks.reference import hit_and_run_reference
from .walks.sampler import _start_points, rounding_of, sample_uniform

NO_CLIP = np.array([np.inf])  # hit-and-run over all of K (no ball clip)
MAX_SECONDS = 86400.0  # a duration argument: at most a day per configuration
MAX_CHAINS = 1024  # chains run one thread each


def _chains(chains):
    chains = positive_int("chains", chains)
    if chains > MAX_CHAINS:
        raise ValueError(f"chains must be at most {MAX_CHAINS} (one thread each), got {chains}")
    return chains


def _seconds(name, value):
    """A duration in (0, MAX_SECONDS] seconds as float, or a ValueError naming ``name``."""
    if not is_real(value) or not 0 < _real(name, value) <= MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds in (0, {MAX_SECONDS:g}], got {short_repr(value)}")
    return float(value)


def _seed(seed):
    if not is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {short_repr(seed)}")
    return int(seed)


def _ints(name, values):
    """A non-empty sequence of positive integers as a list, or a ValueError naming ``name``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, got {short_repr(values)}")
    return [positive_int(f"{name}[{i}]", v) for i, v in enumerate(values)]


def _epsilons(name, values):
    """A non-empty sequence of positive finite ε's as a list, or a ValueError naming ``name``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of positive numbers, got {short_repr(values)}")
    out = []
    for i, e in enumerate(values):
        try:
            out.append(check_epsilon(e))
        except ValueError as exc:
            raise ValueError(f"{name}[{i}]: {exc}") from None
    return out


def _write_csv(out_dir, name, rows):
    """Write rows (dicts) as CSV into ``out_dir`` (created if needed); returns the folder."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return folder


def _pyplot(out):
    """matplotlib.pyplot with a file backend, or None (and a hint) without the plot extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        out("matplotlib is not installed: pip install 'knorm[plot]' for the plot")
        return None
    return plt


def compare_oracles(d=40, n=200, *, seed=0, highs_steps=60, ess_steps=None, workers=None, out=print):
    """Measure, in one run, hit-and-run ESS/s with the facet walk and with HiGHS.

    Both are the same Markov chain (same rounded frame, same random inputs); the two
    trajectories are checked to coincide, so ESS per step is shared and measured on a
    long facet-walk run; they run on the calling thread. ``workers`` bounds the threads of
    the last measurement, the default walk through :func:`sample_uniform` (None: one per CPU
    the process may use). Returns a dict of the numbers printed.
    """
    d, n, seed = positive_int("d", d), positive_int("n", n), _seed(seed)
    workers = check_workers(workers)
    highs_steps = positive_int("highs_steps", highs_steps)
    if highs_steps > BLOCK:
        raise ValueError(f"highs_steps must be at most {BLOCK} (one block of random inputs), got {highs_steps}")
    rng = np.random.default_rng(seed)
    F = W.random_pm1(d, n, rng=rng)  # the draws of rng.choice([-1.0, 1.0], size=(d, n)), size-checked
    ess_steps = positive_int("ess_steps", ess_steps, allow_none=True)
    if ess_steps is not None:
        check_memory("ess_steps", ess_steps, 8 * 4 * ess_steps * d)  # 4 chains' records of rank <= d
    K = SymmetricHull(F)
    t0 = time.perf_counter()
    frame = rounding_of(K).frame
    out(f"random ±1 F, d={d}, n={n}: rank {K.dim}; rounding {time.perf_counter() - t0:.2f} s")
    r = frame.r
    ref = ReferenceOracle(frame.Ft.T, method="highs")
    x0 = _start_points(frame, 1, np.random.default_rng(seed + 1))[0]

    # 1. same inputs -> same trajectory; and steps/s of each oracle on one core
    k = highs_steps
    chain = Chain(frame, x0, np.random.default_rng(seed + 2))
    run_chains([chain], "hit_and_run", 1, 1, NO_CLIP, workers=1)  # JIT warm-up step
    chain = Chain(frame, x0, np.random.default_rng(seed + 2))
    t = time.perf_counter()
    fast_path = run_chains([chain], "hit_and_run", k, 1, NO_CLIP, workers=1)[0]
    t_fast_k = time.perf_counter() - t
    normals, unif = block_inputs(np.random.default_rng(seed + 2), r)  # exactly what the chain used
    t = time.perf_counter()
    highs_path = hit_and_run_reference(ref, x0, normals[:k], unif[:k])
    t_highs = time.perf_counter() - t
    dev = np.max(np.abs(fast_path - highs_path)) / np.max(np.abs(highs_path))
    out(f"same inputs, {k} steps: max relative deviation of the two trajectories {dev:.1e}")

    # 2. ESS per step (same chain for both oracles) and facet-walk steps/s on one core
    steps = ess_steps or 300 * d
    chains = [Chain(frame, x, np.random.default_rng(seed + 10 + i))
              for i, x in enumerate(_start_points(frame, 4, np.random.default_rng(seed + 3)))]
    run_chains(chains, "hit_and_run", 20 * d, 20 * d, NO_CLIP)  # warm-up
    t = time.perf_counter()
    rec = run_chains(chains, "hit_and_run", steps, 1, NO_CLIP, workers=1)
    t_fast = time.perf_counter() - t
    amb = K.to_ambient(rounding_of(K).to_span(rec))
    ess = float(np.min(_ess(amb)))
    ess_per_step = ess / (4 * steps)
    fast_sps = 4 * steps / t_fast
    highs_sps = k / t_highs
    out(f"hit-and-run ESS per step (min coordinate, {4 * steps} steps): {ess_per_step:.2e}"
        f"  (τ ≈ {1 / ess_per_step:.0f} steps)")
    out(f"facet walk : {fast_sps:10.1f} steps/s/core  -> {fast_sps * ess_per_step:10.3f} ESS/s/core"
        f"  (pivots/step {chains[0].pivots / chains[0].stats[2]:.0f})")
    out(f"HiGHS LP   : {highs_sps:10.1f} steps/s/core  -> {highs_sps * ess_per_step:10.3f} ESS/s/core"
        f"  ({1e3 / highs_sps:.1f} ms/step, 2 LPs)")
    out(f"ratio facet walk / HiGHS (ESS/s): {fast_sps / highs_sps:.0f}x"
        f"   [check: {k / t_fast_k:.0f} steps/s on the short run]")

    # 3. the default walk (billiard) through the public API
    x, info = sample_uniform(K, 4000, rng=seed, return_info=True, workers=workers)
    cores = min(n_workers(workers), info.chains) if workers is None or is_int(workers) else info.chains
    out(f"default walk: {info.summary()}")
    out(f"default walk: {info.ess_per_second / cores:.0f} min-coordinate ESS/s per core ({cores} cores), "
        f"end to end (pilot and warm-up included)")

    return {"d": d, "n": n, "trajectory_deviation": float(dev), "ess_per_step": ess_per_step,
            "facet_steps_per_s": fast_sps, "highs_steps_per_s": highs_sps, "ratio": fast_sps / highs_sps,
            "default_walk_ess_per_s_per_core": info.ess_per_second / cores}


COLUMNS = ["Laplace 2/ε (not ε-DP)", "Laplace Δ₁/ε", "Gaussian δ=1e-6", "K-norm", "NIM"]


def run_cell(name, F, eps, x, releases, rng, body, workers=None):
    t0 = time.perf_counter()
    options = {"sampler_options": {"workers": workers}} if workers is not None else {}
    if name.startswith("Laplace 2"):
        out = F @ x + rng.laplace(0.0, 2.0 / eps, size=(releases, F.shape[0]))
    elif name.startswith("Laplace"):
        out = LaplaceMechanism(F, epsilon=eps, rng=rng).release(x, size=releases)
    elif name.startswith("Gaussian"):
        out = GaussianMechanism(F, epsilon=eps, delta=1e-6, rng=rng).release(x, size=releases)
    elif name == "K-norm":
        out = KNormMechanism(F, epsilon=eps, rng=rng, body=body, **options).release(x, size=releases)
    else:
        out = NIMechanism(F, epsilon=eps, rng=rng, **options).release(x, size=releases)
    seconds = time.perf_counter() - t0
    err = np.linalg.norm(out - F @ x, axis=1)
    return err.mean(), err.std(ddof=1) / np.sqrt(releases), seconds


def table3(ds=(40, 20), n=200, eps_list=(0.1, 1.0, 2.0), *, releases=100, seed=2019, out_dir=".",
           plot_path=True, workers=None, out=print):
    """The corrected reference experiment (docs/design.md §8): table, CSV and optional plot.

    Writes ``table3.csv`` and ``table3.md`` (and ``table3.png`` with matplotlib) to
    ``out_dir``; returns the rows. ``workers`` bounds the sampler threads of K-norm and NIM
    (None: one per CPU the process may use).
    """
    workers = check_workers(workers)
    ds, n, eps_list = _ints("ds", ds), positive_int("n", n), _epsilons("eps_list", eps_list)
    releases, seed = positive_int("releases", releases), _seed(seed)
    check_memory("n", n, 8 * n * (1 + max(ds)))  # x and each F
    check_memory("releases", releases, 8 * 4 * releases * max(ds))  # one cell's answers and errors
    rng = np.random.default_rng(seed)
    x = rng.integers(22, 39, size=n).astype(float)  # synthetic ages 22–38
    rows = []
    for d in ds:
        F = W.random_pm1(d, n, rng=rng)
        body = SymmetricHull(F)
        for eps in eps_list:
            for name in COLUMNS:
                mean, se, sec = run_cell(name, F, eps, x, releases, rng, body, workers)
                rows.append({"d": d, "epsilon": eps, "mechanism": name, "mean_l2_error": mean, "stderr": se,
                             "seconds": sec})
                out(f"d={d:3d} ε={eps:<4g} {name:24s} error {mean:10.2f} ± {se:7.2f}   {sec:7.2f} s")
    folder = _write_csv(out_dir, "table3.csv", rows)
    lines = ["| d | ε | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for d in ds:
        for eps in eps_list:
            cells = [r for r in rows if r["d"] == d and r["epsilon"] == eps]
            lines.append(f"| {d} | {eps:g} | " + " | ".join(
                f"{r['mean_l2_error']:.1f} ± {r['stderr']:.1f} ({r['seconds']:.2f} s)" for r in cells) + " |")
    (folder / "table3.md").write_text("\n".join(lines) + "\n")
    out("\n".join(lines))
    if plot_path:
        plot(rows, ds, n, releases, folder / "table3.png", out)
    return rows


def plot(rows, ds, n, releases, path, out=print):
    """``table3.png``: :func:`knorm.plots.table3_figure` (invalid baseline last and marked)."""
    if _pyplot(out) is None:
        return
    from .plots import table3_figure

    table3_figure([r for r in rows if r["d"] in ds], n=n, releases=releases, path=path)
    out(f"wrote {path}")


def scaling(ds=(10, 20, 40, 80), factors=(1, 5, 25), walks=tuple(WALKS), *,
            seconds=3.0, chains=2, seed=0, workers=None, out_dir=".", plot_path=True, out=print):
    """ESS/s, steps/s and pivots per step of each walk on random ±1 F, d × (factor·d).

    Per configuration: round the body (timed separately), then run ``chains`` chains on
    one thread each (at most ``workers`` threads; None: one per CPU the process may use),
    recording every step, until ``seconds`` have passed; ESS is the
    min-coordinate bulk ESS of the records. ``reliable`` is False when the run was
    shorter than 20 autocorrelation times (the ESS estimate is then rough).
    Writes ``scaling.csv`` row by row as configurations finish (an interrupted study
    keeps what it measured), then ``scaling.png``; returns the rows.
    """
    ds, factors = _ints("ds", ds), _ints("factors", factors)
    seconds, chains, seed = _seconds("seconds", seconds), _chains(chains), _seed(seed)
    workers = check_workers(workers)
    if isinstance(walks, str) or not isinstance(walks, Sequence) or not walks or any(w not in WALKS for w in walks):
        raise ValueError(f"walks must be a non-empty sequence of walk names from {sorted(WALKS)}, "
                         f"got {short_repr(walks)}")
    rows = []
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    fields = ["d", "n", "walk", "rank", "steps_per_s", "ess_per_s", "tau_steps", "pivots_per_step", "rounding_s",
              "reliable"]
    with open(folder / "scaling.csv", "w", newline="") as csv_file:
        writer = csv.DictWriter(csv_file, fieldnames=fields)
        writer.writeheader()
        for d in ds:
            for fac in factors:
                n = fac * d
                K = SymmetricHull(W.random_pm1(d, n, rng=seed + d * 1000 + n))
                t = time.perf_counter()
                rnd = rounding_of(K, workers)
                t_round = time.perf_counter() - t
                for walk in walks:
                    row = {"d": d, "n": n, "walk": walk, "rank": K.dim, "rounding_s": t_round,
                           **_measure_walk(rnd, walk, seconds, chains, seed, workers)}
                    rows.append(row)
                    writer.writerow(row)
                    csv_file.flush()
                    out(f"d={d:3d} n={n:5d} {walk:12s} {row['steps_per_s']:10.0f} steps/s  "
                        f"{row['ess_per_s']:9.1f} ESS/s  τ={row['tau_steps']:8.1f}  "
                        f"pivots/step={row['pivots_per_step']:7.1f}" + ("" if row["reliable"] else "  (short run)"))
    if plot_path:
        _plot_scaling(rows, walks, factors, folder / "scaling.png", out)
    return rows


def _measure_walk(rnd, walk, seconds, chains, seed, workers=None):
    """Run ``chains`` chains from the rounding's states for ``seconds`` (on at most ``workers``
    threads, :func:`~knorm.walks.chains.run_chains`); speed and mixing."""
    from .walks.chains import default_params

    params = default_params(walk, rnd.frame, workers)
    cs = [Chain(rnd.frame, x, np.random.default_rng(seed + i)) for i, x in enumerate(rnd.points[:chains])]
    recs, steps, block, t = [], 0, 32, time.perf_counter()
    while time.perf_counter() - t < seconds:
        recs.append(run_chains(cs, walk, block, 1, params, workers=workers))
        steps += block
        block = min(block * 2, 4096)
    elapsed = time.perf_counter() - t
    e = float(np.min(_ess(np.concatenate(recs, axis=1))))
    tau = chains * steps / e
    return {"steps_per_s": chains * steps / elapsed, "ess_per_s": e / elapsed, "tau_steps": tau,
            "pivots_per_step": sum(c.pivots for c in cs) / (chains * steps), "reliable": bool(steps >= 20 * tau)}


def _plot_scaling(rows, walks, factors, path, out=print):
    """``scaling.png``: :func:`knorm.plots.scaling_figure` (colour by walk; ESS/s, pivots per step, τ)."""
    if _pyplot(out) is None or not rows:
        return
    from .plots import scaling_figure

    scaling_figure([r for r in rows if r["walk"] in walks and r["n"] // r["d"] in factors], path=path)
    out(f"wrote {path}")


# -- workload families of the engine issue: 2-way marginals of binary attributes, ±1 F at n = 5d ------------------

FAMILY_FIELDS = ["family", "size", "d", "n", "rank", "status", "stage", "error", "body_s", "structure_s",
                 "rounding_s", "rounding_cpu_s", "rounding_iterations", "first_release_s", "first_release_cpu_s",
                 "first_run_s", "first_run_steps", "first_run_pivots_per_step", "release_1000_s", "release_1000_cpu_s",
                 "release_1000_ess_per_s", "pivots_per_step", "us_per_pivot", "us_per_pivot_wall",
                 "refactors_per_pivot", "tau_steps", "ess_per_s", "ess_per_cpu_s", "steps_per_s", "reliable", "chains",
                 "cores", "loadavg"]


def family_workload(family, size, seed=0):
    """F of one size of a family: ``marginals`` (2-way marginals of ``size`` binary
    attributes, n = 2^size) or ``pm1`` (random ±1, d = size, n = 5·size)."""
    size, seed = positive_int("size", size), _seed(seed)
    if family == "marginals":
        if 2 ** min(size, 64) > W.MAX_ENTRIES:  # n = 2^size cells alone pass the workload cap
            raise ValueError(f"size={size}: 2-way marginals of {size} binary attributes have 2^{size} cells, "
                             f"over knorm.workloads.MAX_ENTRIES = {W.MAX_ENTRIES}")
        return W.marginals((2,) * size, 2)
    if family == "pm1":
        W._fits("size", size, size, 5 * size, "the pm1 family's F (size × 5·size)")
        return W.random_pm1(size, 5 * size, rng=seed + size)
    raise ValueError(f"unknown family {short_repr(family)}; choose marginals or pm1")


def _single_chain_pivot_time(rnd, seconds, seed):
    """CPU seconds per pivot, wall seconds per pivot and refactorisations per pivot of one
    billiard chain on this thread (CPU time is robust to other processes sharing the cores)."""
    from .walks.chains import default_params

    params = default_params("billiard", rnd.frame, 1)
    chain = Chain(rnd.frame, rnd.points[0], np.random.default_rng(seed + 99))
    run_chains([chain], "billiard", 4, 4, params, workers=1)
    p0, f0, steps, elapsed = chain.pivots, int(chain.state.ctr[2]), 4, 0.0
    t, c = time.perf_counter(), time.thread_time()
    while elapsed < seconds:
        run_chains([chain], "billiard", steps, steps, params, workers=1)  # one chain: runs on this thread
        steps = min(2 * steps, 4096)
        elapsed = time.perf_counter() - t
    cpu = time.thread_time() - c
    piv = max(chain.pivots - p0, 1)
    return cpu / piv, elapsed / piv, (int(chain.state.ctr[2]) - f0) / piv


def measure_workload(F, *, family="", size="", seconds=5.0, pivot_seconds=2.0, chains=4, seed=0, report=None):
    """Cost of K-norm on one workload, from a cold body (JIT compiled already).

    Stages, each timed: the body (:class:`SymmetricHull`), exact-structure detection,
    rounding, the first certified release of a fresh :class:`KNormMechanism` (warm-up and
    one certified sampler run of 1000 draws: ``first_release_s`` is the sum of all four),
    1000 further releases (one more run), then the billiard walk at steady state from the
    rounding's states: ``chains`` chains on one thread each (at most one thread per CPU the
    process may use) for ``seconds`` (pivots per step, τ, min-coordinate ESS/s), and one
    chain on one thread for ``pivot_seconds`` (µs per pivot in CPU time, and in wall time;
    refactorisations per pivot). ``*_cpu_s``: CPU seconds of the process (all threads) for
    a stage, less sensitive than wall time to other processes on a shared machine;
    ``loadavg``: the 1-minute load at the start; ``ess_per_cpu_s``: ESS per CPU second of
    the steady-state run (all threads). A failure (``OracleError``, ``LinAlgError``, …) ends
    the measurement: ``status`` is "failed", ``stage`` says where, ``error`` the message.
    ``report(row)`` is called after every stage with the row so far. Returns the row (a dict
    over :data:`FAMILY_FIELDS`).
    """
    F = validate_matrix(F)
    seconds, pivot_seconds = _seconds("seconds", seconds), _seconds("pivot_seconds", pivot_seconds)
    chains, seed = _chains(chains), _seed(seed)
    row = dict.fromkeys(FAMILY_FIELDS, "")
    row.update(family=family, size=size, d=F.shape[0], n=F.shape[1], chains=chains, cores=default_workers(),
               status="running", loadavg=f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "")
    report = report or (lambda r: None)

    cpu = {}

    def stage(name, fn):
        row["stage"] = name
        report(dict(row))
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        cpu[name] = time.process_time() - c
        return out, time.perf_counter() - t

    try:
        K, row["body_s"] = stage("body", lambda: SymmetricHull(F))
        row["rank"] = K.dim
        structure, row["structure_s"] = stage("structure", lambda: K.exact_structure)
        if structure is not None:
            row.update(status="exact", error=f"exact structure {structure.kind}: no MCMC")
            row["stage"] = "done"
            return row
        rnd, row["rounding_s"] = stage("rounding", lambda: rounding_of(K))
        row["rounding_cpu_s"] = cpu["rounding"]
        row["rounding_iterations"] = rnd.iterations
        x = np.zeros(F.shape[1])
        mech = KNormMechanism(F, epsilon=1.0, rng=seed, body=K)
        _, row["first_run_s"] = stage("first release", lambda: mech.release(x))
        info = mech.last_info
        row["first_run_steps"] = info.steps
        row["first_run_pivots_per_step"] = info.pivots / max(info.steps, 1)
        row["first_release_s"] = row["body_s"] + row["structure_s"] + row["rounding_s"] + row["first_run_s"]
        row["first_release_cpu_s"] = sum(cpu.values())
        _, row["release_1000_s"] = stage("1000 releases", lambda: mech.release(x, size=1000))
        row["release_1000_cpu_s"] = cpu["1000 releases"]
        row["release_1000_ess_per_s"] = mech.last_info.ess_per_second
        walk, wall = stage("billiard walk", lambda: _measure_walk(rnd, "billiard", seconds, chains, seed))
        row.update(walk)
        row["ess_per_cpu_s"] = walk["ess_per_s"] * wall / max(cpu["billiard walk"], 1e-9)
        (sec, wall, refac), _ = stage("pivot time", lambda: _single_chain_pivot_time(rnd, pivot_seconds, seed))
        row["us_per_pivot"] = 1e6 * sec
        row["us_per_pivot_wall"] = 1e6 * wall
        row["refactors_per_pivot"] = refac
        row.update(status="ok", stage="done")
    except Exception as exc:  # noqa: BLE001 - a failure is a measurement too
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}".replace("\n", " "))
    return row


def scaling_family(family, sizes, *, seconds=5.0, pivot_seconds=2.0, chains=4, seed=0, out_dir=".",
                   csv_name=None, out=print, measure=None):
    """:func:`measure_workload` for each size of a family; writes ``scaling_<family>.csv``
    row by row (a failed size is a row with its status and message; the study goes on).

    ``measure(family, size, seconds=, pivot_seconds=, chains=, seed=)`` returns a row
    (default: build the workload and :func:`measure_workload`; scripts/scaling.py runs
    each size in a child process with a time limit instead)."""
    sizes = _ints("sizes", sizes)
    seconds, pivot_seconds = _seconds("seconds", seconds), _seconds("pivot_seconds", pivot_seconds)
    chains, seed = _chains(chains), _seed(seed)
    measure = measure or _measure_family_size
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(folder / (csv_name or f"scaling_{family}.csv"), "w", newline="") as csv_file:
        writer = csv.DictWriter(csv_file, fieldnames=FAMILY_FIELDS)
        writer.writeheader()
        for size in sizes:
            row = measure(family, size, seconds=seconds, pivot_seconds=pivot_seconds, chains=chains, seed=seed)
            rows.append(row)
            writer.writerow(row)
            csv_file.flush()
            out(format_family_row(row))
    return rows


def _measure_family_size(family, size, **kw):
    return measure_workload(family_workload(family, size, kw.get("seed", 0)), family=family, size=size, **kw)


def _measure_child(conn, family, size, kw):
    try:
        row = measure_workload(family_workload(family, size, kw["seed"]), family=family, size=size,
                               report=conn.send, **kw)
        conn.send(row)
    finally:
        conn.close()


def measure_with_timeout(limit):
    """A ``measure`` for :func:`scaling_family` running each size in a
    forked child killed after ``limit`` seconds (the row then says how far it got)."""
    limit = _seconds("limit", limit)

    import multiprocessing as mp

    def measure(family, size, **kw):
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_measure_child, args=(child, family, size, kw))
        t0 = time.perf_counter()
        p.start()
        child.close()
        row = None
        while True:
            left = limit - (time.perf_counter() - t0)
            if left <= 0:
                break
            if parent.poll(min(left, 1.0)):
                try:
                    row = parent.recv()
                except EOFError:  # the child died
                    break
                if row.get("status") != "running":
                    break
            elif not p.is_alive():
                break
        if p.is_alive():
            p.kill()
        p.join()
        if row is None:
            row = dict.fromkeys(FAMILY_FIELDS, "")
            row.update(family=family, size=size, stage="start")
        if row.get("status") in ("running", ""):
            why = f"timeout after {limit:.0f} s" if time.perf_counter() - t0 >= limit else \
                f"child process died (exit code {p.exitcode})"
            row.update(status="timeout" if "timeout" in why else "failed", error=f"{why} in stage {row['stage']}")
        return row

    return measure


def format_family_row(row):
    """One line for the console."""
    def f(key, fmt):
        v = row.get(key, "")
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    head = f"{row['family']} {row['size']}: {row['d']}×{row['n']} rank {row['rank'] or '?'}"
    if row["status"] not in ("ok",):
        return f"{head}: {row['status']} in {row['stage']}: {row['error']}"
    return (f"{head}: rounding {f('rounding_s', '.1f')} s, first release {f('first_release_s', '.1f')} s, "
            f"1000 more {f('release_1000_s', '.1f')} s; billiard {f('pivots_per_step', '.0f')} pivots/step, "
            f"{f('us_per_pivot', '.1f')} µs/pivot, τ {f('tau_steps', '.1f')}, {f('ess_per_s', '.1f')} ESS/s")
