"""The paths users walk, each in a fresh process, this checkout against others in one run (issue 35).

Every path is timed as a whole process (wall seconds from before ``import knorm`` to its last
answer; the numba kernels already compiled: ``--cold`` times the first import with an empty
numba cache instead). Checkouts alternate path by path, repeat by repeat, so a shared
machine's load falls on both; the table gives each checkout's median and its ratio to the
first checkout's. Run it before a change that touches the engine or the mechanisms:

    git worktree add /tmp/knorm-prev HEAD~1
    python scripts/user_paths.py --checkout /tmp/knorm-prev . --repeats 3

Paths (``--paths`` picks some):

- ``prepared-error``: load the survey workload's prepared file, ``expected_error()``;
- ``prepared-recommend``: load it, ``knorm.recommend(F, epsilon=1, prepared=W)``;
- ``prepared-recommend-kept``: the same from a file written by ``knorm prepare --recommend``
  (recommend's ε-free rows kept in it);
- ``prepared-info``: ``knorm info --prepared W.knorm --matrix F.npy --epsilon 1``;
- ``prepared-info-kept``: the same with the file of ``knorm prepare --recommend``;
- ``prepared-release``: load it, one K-norm release;
- ``fresh-100``: 100 K-norm releases on a random ±1 F 40×200 never seen by this process
  (a new seed each repeat, the same for every checkout), no file;
- ``again-100``: the same 100 releases on one random ±1 F 40×200 that an earlier process has
  seen: with the cache of prepared workloads (``KNORM_CACHE`` set to a folder under ``--dir``,
  filled by one process before the repeats) it loads the certification instead of making it;
- ``uniform-100x500``: ``sample_uniform`` of 2000 draws on a random ±1 F 100×500 (rounding
  included), with its ESS/s.

The survey workload: all 2-way marginals of a 6-attribute table with (2, 3, 3, 4, 4, 4) levels
(165 queries, 1,152 cells), rows shuffled with ``default_rng(1)``; each checkout prepares its
own files once into ``--dir`` (``knorm prepare``, and ``knorm prepare --recommend``; files are
reused: preparing is deterministic).
"""

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time

SHAPE = (2, 3, 3, 4, 4, 4)

HEAD = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import numpy as np
import knorm
"""

SNIPPETS = {

    "prepared-error": HEAD + r"""
F = np.load(sys.argv[2])
w = knorm.load_prepared(sys.argv[3], F)
e = knorm.KNormMechanism(F, epsilon=1.0, prepared=w).expected_error()
print(f"RESULT {time.perf_counter() - t0:.3f} {e}")
""",
    "prepared-recommend": HEAD + r"""
F = np.load(sys.argv[2])
w = knorm.load_prepared(sys.argv[3], F)
rec = knorm.recommend(F, epsilon=1.0, prepared=w)
print(f"RESULT {time.perf_counter() - t0:.3f} best {rec.best}")
""",
    "prepared-release": HEAD + r"""
F = np.load(sys.argv[2])
w = knorm.load_prepared(sys.argv[3], F)
a = knorm.KNormMechanism(F, epsilon=1.0, prepared=w).release(np.zeros(F.shape[1], dtype=np.int64))
print(f"RESULT {time.perf_counter() - t0:.3f}")
""",
    "fresh-100": HEAD + r"""
F = np.random.default_rng(int(sys.argv[4])).choice([-1.0, 1.0], size=(40, 200))
m = knorm.KNormMechanism(F, epsilon=1.0)
x = np.zeros(200, dtype=np.int64)
for _ in range(100):
    m.release(x)
print(f"RESULT {time.perf_counter() - t0:.3f}")
""",
    "uniform-100x500": HEAD + r"""
F = np.random.default_rng(0).choice([-1.0, 1.0], size=(100, 500))
z, info = knorm.sample_uniform(F, 2000, rng=1, return_info=True)
t = time.perf_counter() - t0
print(f"RESULT {t:.3f} min ESS {info.min_ess:.0f}, {info.min_ess / t:.1f} ESS/s")
""",
}
SNIPPETS["prepared-recommend-kept"] = SNIPPETS["prepared-recommend"]
SNIPPETS["again-100"] = SNIPPETS["fresh-100"]
PATHS = [p for p in SNIPPETS if p != "uniform-100x500"] + ["prepared-info", "prepared-info-kept"]


NO_CACHE = dict(os.environ, KNORM_CACHE="off")  # every path but again-100: what a new F costs


def run(snippet, checkout, args, env=None):
    out = subprocess.run([sys.executable, "-c", snippet, checkout, *args], capture_output=True, text=True,
                         check=False, env=NO_CACHE if env is None else env, timeout=3600)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"{checkout}: {tail[0]}")
    seconds, *note = line.split()[1:]
    return float(seconds), " ".join(note)


def run_cli(checkout, args):
    """``python -m knorm ARGS`` of that checkout, wall seconds of the whole process. Run in the
    checkout: ``-m`` puts the working folder first on sys.path, before PYTHONPATH, so from another
    checkout's folder it ran that one's knorm (every path's files are absolute)."""
    env = dict(NO_CACHE, PYTHONPATH=checkout)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "knorm", *args], capture_output=True, text=True, env=env,
                         check=False, timeout=3600, cwd=checkout)
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: knorm {' '.join(args)}: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return time.perf_counter() - t, ""


def survey_matrix(folder):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import numpy as np

    from knorm import workloads

    F = workloads.marginals(SHAPE, 2)
    F = F[np.random.default_rng(1).permutation(F.shape[0])]
    path = os.path.join(folder, "survey.npy")
    np.save(path, F)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", nargs="+", default=["."], help="checkouts to compare (the first is the baseline)")
    ap.add_argument("--paths", nargs="+", default=PATHS, choices=[*PATHS, "uniform-100x500"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/knorm-user-paths", help="where prepared files are kept (reused)")
    args = ap.parse_args()
    args.dir = os.path.abspath(args.dir)  # the CLI paths run in each checkout's folder
    os.makedirs(args.dir, exist_ok=True)
    checkouts = [os.path.abspath(c) for c in args.checkout]
    F = survey_matrix(args.dir)
    files, kept = {}, {}
    for c in checkouts:
        head = subprocess.run(["git", "-C", c, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        tag = hashlib.sha1(f"{c}@{head}".encode()).hexdigest()[:8]  # a file per checkout and commit: never stale
        files[c] = os.path.join(args.dir, f"survey-{tag}.knorm")
        kept[c] = os.path.join(args.dir, f"survey-{tag}-rows.knorm")
        for path, extra, wanted in ((files[c], [], any(p.startswith("prepared") for p in args.paths)),
                                    (kept[c], ["--recommend"], any(p.endswith("-kept") for p in args.paths))):
            if wanted and not os.path.exists(path):
                sec, _ = run_cli(c, ["prepare", "--matrix", F, "--out", path, "--quiet", *extra])
                print(f"prepare {' '.join(extra)} {c}: {sec:.1f} s", flush=True)
    cache_env = dict(os.environ, KNORM_CACHE=os.path.join(args.dir, "cache"))
    if "again-100" in args.paths:
        for c in checkouts:  # one process fills the cache (a checkout without one just runs)
            run(SNIPPETS["again-100"], c, [F, files[c], "7"], env=cache_env)
    times = {(p, c): [] for p in args.paths for c in checkouts}
    notes = {}
    for rep in range(args.repeats):
        for p in args.paths:
            for c in checkouts:
                if p.startswith("prepared-info"):
                    sec, note = run_cli(c, ["info", "--prepared", kept[c] if p.endswith("-kept") else files[c],
                                            "--matrix", F, "--epsilon", "1"])
                elif p == "again-100":
                    sec, note = run(SNIPPETS[p], c, [F, files[c], "7"], env=cache_env)
                else:
                    sec, note = run(SNIPPETS[p], c, [F, kept[c] if p.endswith("-kept") else files[c], str(1000 + rep)])
                times[p, c].append(sec)
                notes[p, c] = note
                print(f"  {p:20s} {os.path.basename(c) or c:>20s} {sec:8.2f} s  {note}", flush=True)
    print(f"\nmedian wall seconds of {args.repeats} fresh processes; ratio to {checkouts[0]}")
    print(f"{'path':20s}" + "".join(f"{os.path.basename(c)[:18]:>20s}" for c in checkouts) + "   ratios")
    for p in args.paths:
        med = [statistics.median(times[p, c]) for c in checkouts]
        print(f"{p:20s}" + "".join(f"{m:20.2f}" for m in med) + "   "
              + " ".join(f"{m / med[0]:.2f}×" for m in med[1:]))


if __name__ == "__main__":
    main()
