"""Checkpoints of sampler runs: resume an interrupted run to the identical result.

A run is identified by a fingerprint of everything that determines it (the frame's
matrix, walk, sizes, budgets and the generator's starting state). Snapshots are taken
at chunk boundaries, at most every ``every`` seconds, and written atomically (temporary
file, then rename). Because the chunking is fixed and chains draw their randomness in
fixed blocks, *when* snapshots are taken never changes the result.
"""

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from .._io import atomic_write

CHAIN_KEYS = ("x", "basis", "Binv", "lam", "g", "ctr", "stats", "normals", "unif", "pos")


def fingerprint(*parts):
    h = hashlib.sha1()
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(np.ascontiguousarray(p).tobytes())
            h.update(str(p.shape).encode())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()


class Checkpoint:
    """Where and how often to save sampler snapshots, and whether to resume from them.

    ``Checkpoint(directory, every=30.0, resume=False)``: snapshots go to
    ``directory/sample-<fingerprint>.npz``; with ``resume=True`` a run whose snapshot
    exists continues from it (a finished run is loaded whole). ``loaded`` counts the
    snapshots resumed from and ``resumed_seconds`` adds up the sampler time they had
    already spent (the resumed run's ``info.seconds`` includes it).
    """

    def __init__(self, directory, *, every=30.0, resume=False):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.every = float(every)
        self.resume = bool(resume)
        self._last = time.monotonic()
        self.loaded = 0  # snapshots resumed from (for reporting)
        self.resumed_seconds = 0.0  # sampler seconds spent before those snapshots were taken

    def path(self, fp):
        return self.directory / f"sample-{fp[:20]}.npz"

    def load(self, fp):
        if not self.resume or not self.path(fp).exists():
            return None
        with np.load(self.path(fp), allow_pickle=False) as z:
            snap = {k: z[k] for k in z.files}
        if str(snap["fingerprint"]) != fp:
            raise ValueError(f"checkpoint {self.path(fp)} belongs to a different run")
        self.loaded += 1
        self.resumed_seconds += float(snap.get("seconds", 0.0))
        snap["chains"] = [
            {**{k: snap[f"chain_{k}"][i] for k in CHAIN_KEYS}, "rng": json.loads(str(snap["chain_rng"][i]))}
            for i in range(len(snap["chain_x"]))
        ]
        return snap

    def save(self, fp, chains, scalars, draws, force=False):
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        states = [c.state_dict() for c in chains]
        arrays = {f"chain_{k}": np.stack([np.asarray(s[k]) for s in states]) for k in CHAIN_KEYS}
        arrays["chain_rng"] = np.array([json.dumps(s["rng"]) for s in states])
        arrays.update({k: np.asarray(v) for k, v in scalars.items()})
        atomic_write(self.path(fp), lambda f: np.savez(f, fingerprint=np.array(fp), draws=draws, **arrays))
        self._last = now
