"""Checkpoints of sampler runs: continue an interrupted run to the identical result, never replay one.

A checkpoint folder holds secrets: each unfinished sampler run's snapshot
(``sample-<fingerprint>.npz``: the chains' states and generator states and the pool the
noise is drawn from) and, when the caller asks for it (:meth:`Checkpoint.entropy`, the
command line), the OS entropy behind the noise (``noise-entropy.json``). With one
released answer either one gives away the noise, hence Fx. So the folder is created
0700 (an existing folder open to other users is refused), every file in it is created
0600, a run's snapshot is deleted when the run finishes, and :meth:`Checkpoint.retire`
deletes what is left once the answers are final, before they are written anywhere.

Resuming is a continuation, never a replay: a Checkpoint with ``resume=False`` refuses a
folder that holds a checkpoint, and one with ``resume=True`` refuses unless the folder
holds an unfinished snapshot made with the same ``context``, by the same mechanism and
sampler settings (ε, walk, matrix, seed, …: :meth:`Checkpoint.bind`), at the same run.
Snapshots are taken at chunk boundaries, at most every ``every`` seconds, and written
atomically (temporary file, then rename). Because the chunking is fixed and chains draw
their randomness in fixed blocks, *when* snapshots are taken never changes the result.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._fingerprint import fingerprint
from .._io import atomic_write, check_npz_memory, npz_headers
from .._validate import is_real, short_repr
from ..errors import CheckpointConflict

CHAIN_KEYS = ("x", "basis", "Binv", "lam", "g", "ctr", "stats", "normals", "unif", "pos")
ENTROPY_FILE = "noise-entropy.json"
SNAPSHOTS = "sample-*.npz"
_META = ("fingerprint", "session", "context", "run", "calls")


def _private_folder(path: Path, create: bool) -> None:
    """Check that ``path`` is a folder only its owner can enter (creating it 0700 if
    ``create`` and it is missing)."""
    if create:
        try:
            path.mkdir(mode=0o700, parents=True)  # the mode applies to the folder itself; umask can only narrow it
            return
        except FileExistsError:
            pass
    if not path.is_dir():
        raise ValueError(f"checkpoint folder {str(path)!r} is a file, not a folder")
    if os.name == "posix":
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise ValueError(f"checkpoint folder {str(path)!r} is open to other users (mode "
                             f"{st.st_mode & 0o777:04o}{'' if st.st_uid == os.getuid() else ', another owner'}); "
                             "it would hold secrets: use a new path (created 0700) or make it private (chmod 700)")


def _check_every(every: Any) -> None:
    if not is_real(every) or not (every >= 0 and (every == math.inf or every < 2.0**1000)):
        raise ValueError(f"every must be a number of seconds >= 0, got {short_repr(every)}")


def write_run(path: Path, meta: dict[str, Any], chains: Any, scalars: dict[str, Any], draws: Any, *,
              private: bool) -> None:
    """Write a sampler run's snapshot atomically: ``meta`` arrays, each chain's
    :meth:`~knorm.walks.chains.Chain.state_dict` (``chain_<key>`` stacked, ``chain_rng`` as JSON), the run's
    ``scalars`` and its pool ``draws``; ``private``: 0600 (secrets), else the usual permissions."""
    states = [c.state_dict() for c in chains]
    arrays: dict[str, Any] = {f"chain_{k}": np.stack([np.asarray(s[k]) for s in states]) for k in CHAIN_KEYS}
    arrays["chain_rng"] = np.array([json.dumps(s["rng"]) for s in states])
    arrays.update({k: np.asarray(v) for k, v in scalars.items()})
    atomic_write(path, lambda f: np.savez(f, draws=draws, **meta, **arrays), private=private)


def read_run(path: Path, skip: tuple[str, ...] = _META) -> dict[str, Any]:
    """A snapshot written by :func:`write_run`, less the ``skip`` keys, with ``chains``: the chains'
    state dicts (for :meth:`~knorm.walks.chains.Chain.load_state_dict`)."""
    with np.load(path, allow_pickle=False) as z:
        check_npz_memory(npz_headers(z), f"{str(path)!r}: its arrays")  # every size, before any array is made
        snap = {k: z[k] for k in z.files if k not in skip}
    snap["chains"] = [
        {**{k: snap[f"chain_{k}"][j] for k in CHAIN_KEYS}, "rng": json.loads(str(snap["chain_rng"][j]))}
        for j in range(len(snap["chain_x"]))
    ]
    return snap


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {"fingerprint": str(z["fingerprint"]), "session": str(z["session"]), "context": str(z["context"]),
                    "run": int(z["run"]), "calls": list(json.loads(str(z["calls"])))}
    except (OSError, ValueError, KeyError, TypeError):
        raise CheckpointConflict(f"{str(path)!r} is not a snapshot of this knorm version; delete the checkpoint "
                                 "folder and start again") from None


class Checkpoint:
    """Where and how often to save sampler snapshots, and whether to continue an interrupted run.

    ``Checkpoint(directory, every=30.0, resume=False, context=None)``: snapshots of the
    unfinished sampler run go to ``directory/sample-<fingerprint>.npz``, at most every
    ``every`` seconds; a run's snapshot is deleted when the run finishes. ``context``
    (arrays, numbers, strings, lists and dicts) names what the run is for, e.g. the data
    (only a hash is stored): a resume must give the same. Mechanisms and samplers add their
    own settings (:meth:`bind`: ε, walk, matrix, generator state, …).

    ``resume=False`` (a new run) refuses a folder that holds a checkpoint and creates a
    missing folder 0700; ``resume=True`` refuses (:class:`CheckpointConflict`, a
    ValueError) unless the folder holds one unfinished snapshot with the same context, and
    its first run refuses unless the settings bound match; earlier runs of the session (whose
    snapshots were deleted when they finished) run again, identically for the same seed, and
    the saved run continues bit for bit. A mechanism tells its checkpoint of every release
    (:meth:`note`: the data and size): a resumed session must repeat the interrupted one's
    releases on the same data, in order (the same answers again), so draws already released
    never reach other data. A folder open to other users is refused.

    Call :meth:`retire` (or use ``with Checkpoint(...) as ck:``) once the answers are final:
    it deletes the saved entropy and any snapshot left. ``loaded`` counts the snapshots
    resumed from and ``resumed_seconds`` adds up the sampler time they had already spent.

    A private run that can be resumed takes its noise generator from the checkpoint:
    ``KNormMechanism(F, epsilon=1, rng=np.random.default_rng(np.random.SeedSequence(
    ck.entropy())), sampler_options={"checkpoint": ck})``. With fresh entropy (``rng=None``)
    a run is checkpointed but can never be resumed (its generator state differs).
    """

    def __init__(self, directory: str | os.PathLike[str], *, every: float = 30.0, resume: bool = False,
                 context: Any = None) -> None:
        if not isinstance(directory, (str, os.PathLike)) or not str(directory):
            raise TypeError(f"directory must be a path, got {short_repr(directory)}")
        _check_every(every)
        if not isinstance(resume, (bool, np.bool_)):
            raise TypeError(f"resume must be True or False, got {short_repr(resume)}")
        self.directory = Path(directory)
        self.every = float(every)
        self.resume = bool(resume)
        self.context = fingerprint(context)
        self._parts: list[Any] = []
        self._session: str | None = None  # fixed when the first run starts
        self._runs = 0  # sampler runs started with this checkpoint
        self._current: int | None = None  # index of the run in progress
        self._pending: dict[str, Any] | None = None  # resume: the snapshot to continue
        self._calls: list[str] = []  # fingerprints of the noise-drawing calls of this session (note())
        self._entropy: int | None = None
        self._entropy_saved = False
        self.retired = False
        self.loaded = 0  # snapshots resumed from (for reporting)
        self.resumed_seconds = 0.0  # sampler seconds spent before those snapshots were taken
        where = str(self.directory)
        if self.resume:
            if not self.directory.exists():
                raise CheckpointConflict(f"checkpoint folder {where!r} does not exist: nothing to resume")
            _private_folder(self.directory, create=False)
            snaps = sorted(self.directory.glob(SNAPSHOTS))
            if not snaps:
                raise CheckpointConflict(f"{where!r} holds no unfinished run to resume (a run's checkpoint is deleted "
                                         "when it finishes)")
            if len(snaps) > 1:
                raise CheckpointConflict(f"{where!r} holds {len(snaps)} snapshots, not one unfinished run; delete "
                                         "the folder and start again")
            meta = _read_meta(snaps[0])
            if meta["context"] != self.context:
                raise CheckpointConflict(f"the unfinished run in {where!r} was for other inputs or settings; resume "
                                         "only with the identical ones")
            self._pending = {**meta, "path": snaps[0]}
        else:
            _private_folder(self.directory, create=True)
            held = self._files()
            if held:
                raise CheckpointConflict(f"{where!r} holds the checkpoint of another run ({held[0].name}); resume it "
                                         "(resume=True, --resume) or delete the folder")
        self._last = time.monotonic()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        if kind is None:  # an exception keeps the checkpoint: the run can be resumed
            self.retire()

    def _files(self) -> list[Path]:
        """The checkpoint's files in the folder, temporary ones included (secrets all)."""
        d = self.directory
        names = [d / ENTROPY_FILE, *sorted(d.glob(SNAPSHOTS)), *sorted(d.glob(f".{ENTROPY_FILE}.*.tmp")),
                 *sorted(d.glob(".sample-*.npz.*.tmp"))]
        return [p for p in names if p.exists()]

    @property
    def resumable(self) -> bool:
        """Whether the folder holds an unfinished run's snapshot (``resume=True`` continues it)."""
        return any(self.directory.glob(SNAPSHOTS))

    def path(self, fp: str) -> Path:
        return self.directory / f"sample-{fp[:20]}.npz"

    def entropy(self) -> int:
        """128 bits of OS entropy for the run's noise generator: fresh for a new run (saved,
        0600, with its first snapshot, so that the run can be resumed), the saved value on
        resume. Deleted by :meth:`retire`."""
        if self._entropy is None:
            if self.resume:
                path = self.directory / ENTROPY_FILE
                try:
                    self._entropy = int(json.loads(path.read_text())["entropy"])
                except FileNotFoundError:
                    raise CheckpointConflict(f"{str(self.directory)!r} holds no saved entropy: its run was not "
                                             "checkpointed with one") from None
                except (OSError, ValueError, KeyError, TypeError):
                    raise CheckpointConflict(f"cannot read {str(path)!r}; it is not a knorm checkpoint") from None
                self._entropy_saved = True
            else:
                self._entropy = secrets.randbits(128)
        return self._entropy

    def bind(self, *parts: Any) -> None:
        """Add settings that determine the run (a mechanism's ε and walk, a sampler's matrix
        and generator state) to the checkpoint's fingerprint; before the first run only."""
        if self._session is not None:
            raise ValueError("this checkpoint's run has started: a Checkpoint serves one mechanism or sampler "
                             "session; make a new one (in a new folder)")
        self._parts.append(parts)

    def _open(self) -> None:
        if self._session is not None:
            return
        self._session = fingerprint(self.context, self._parts)
        if self._pending is not None and self._pending["session"] != self._session:
            raise CheckpointConflict(f"the unfinished run in {str(self.directory)!r} was made with other settings "
                                     "(ε, δ, walk, matrix, seed or sampler options); resume only the identical run")

    def note(self, *parts: Any) -> None:
        """Record a call that draws noise (a mechanism's release: its data and size; a noise
        draw: its size) before any noise is drawn. A resumed session must repeat the
        interrupted session's calls, in order, with the same data, up to the interrupted one:
        the runs it re-runs then hand their draws to the same data they were released on
        (the same answers again), never to other data (a replay); anything else raises
        :class:`CheckpointConflict`, nothing drawn."""
        if self.retired:
            return
        h = fingerprint(*parts)
        p, i = self._pending, len(self._calls)
        if p is not None and (i >= len(p["calls"]) or p["calls"][i] != h):
            raise CheckpointConflict(f"the unfinished run in {str(self.directory)!r} was reached by other releases: a "
                                     "resumed session must repeat the interrupted one's releases (same data, same "
                                     "sizes, in order); its noise is never used on other data")
        self._calls.append(h)

    def load(self, fp: str) -> dict[str, Any] | None:
        """Start a sampler run with fingerprint ``fp``: its snapshot if this is the
        unfinished run being resumed, else None (a fresh run)."""
        if self.retired:
            return None
        self._open()
        i = self._current = self._runs
        self._runs += 1
        p = self._pending
        if p is None:
            return None
        if i < p["run"]:  # finished before the interrupt: run again, unsaved (the saved run stays the one)
            self._current = None
            return None
        if p["fingerprint"] != fp or p["calls"] != self._calls:
            raise CheckpointConflict(f"the unfinished run in {str(self.directory)!r} does not match this run (sizes, "
                                     "options or seed differ); resume only the identical run")
        snap = read_run(p["path"])
        self._pending = None
        self.loaded += 1
        self.resumed_seconds += float(snap.get("seconds", 0.0))
        return snap

    def save(self, fp: str, chains: Any, scalars: dict[str, Any], draws: Any, force: bool = False) -> None:
        """Snapshot the run in progress (0600, atomically), at most every ``every`` seconds."""
        now = time.monotonic()
        if self.retired or self._current is None or not force and now - self._last < self.every:
            return
        if self._entropy is not None and not self._entropy_saved:  # the entropy first: a snapshot needs it
            text = json.dumps({"entropy": str(self._entropy)}).encode()
            atomic_write(self.directory / ENTROPY_FILE, lambda f: f.write(text), private=True)
            self._entropy_saved = True
        meta: dict[str, Any] = {"fingerprint": np.array(fp), "session": np.array(self._session),
                                "context": np.array(self.context), "run": np.array(self._current),
                                "calls": np.array(json.dumps(self._calls))}
        write_run(self.path(fp), meta, chains, scalars, draws, private=True)
        self._last = now

    def finish(self, fp: str) -> None:
        """The run ``fp`` is done: delete its snapshot (a finished run is never loaded again)."""
        self.path(fp).unlink(missing_ok=True)
        self._current = None

    def retire(self) -> None:
        """The session is over: delete the saved entropy, then every snapshot left (secrets
        all). Call it before the answers are written anywhere; later runs save nothing."""
        self.retired = True
        for p in self._files():
            p.unlink(missing_ok=True)


class PublicSnapshot:
    """Snapshots of one *public* sampler run, :func:`knorm.prepare`'s certification (docs/design.md §3.7).

    ``PublicSnapshot(path, every=30.0)``: the run's chains, generator states and pool go to the
    file ``path`` (:func:`write_run`, atomically, the usual permissions) at most every ``every``
    seconds; a run started with the same fingerprint (the sampler's settings, seed and chain
    states: :meth:`bind` and the run's own) continues from it bit for bit. Nothing in it is
    secret: the run is seeded with a public seed, never touches data and none of its draws
    becomes noise. Unlike :class:`Checkpoint` (a release's secrets: a 0700 folder, 0600 files,
    OS entropy, deleted as soon as the run ends) it holds one run, has no entropy and no
    session of releases, and is kept when the run finishes (``finish`` deletes nothing): the
    caller deletes it once what it computes is saved, so an interrupt between the two
    re-runs nothing. A snapshot of another run is refused (ValueError).
    """

    def __init__(self, path: str | os.PathLike[str], *, every: float = 30.0) -> None:
        _check_every(every)
        self.path = Path(path)
        self.every = float(every)
        self._parts: list[Any] = []
        self._last = time.monotonic()
        self.loaded = False  # the run continued from a snapshot

    def bind(self, *parts: Any) -> None:
        """Add settings that determine the run (the sampler's matrix, walk, sizes, seed) to its fingerprint."""
        self._parts.append(parts)

    def _fp(self, fp: str) -> str:
        return fingerprint(fp, self._parts)

    def load(self, fp: str) -> dict[str, Any] | None:
        """The snapshot of the run ``fp``, or None if there is none (a fresh run)."""
        if not self.path.exists():
            return None
        try:
            with np.load(self.path, allow_pickle=False) as z:
                saved = str(z["fingerprint"])
            snap = read_run(self.path, ("fingerprint",))
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            raise ValueError(f"{str(self.path)!r} is not a snapshot of this knorm version") from None
        if saved != self._fp(fp):
            raise ValueError(f"{str(self.path)!r} is the snapshot of another run (other settings or seed)")
        self.loaded = True
        return snap

    def save(self, fp: str, chains: Any, scalars: dict[str, Any], draws: Any, force: bool = False) -> None:
        """Snapshot the run in progress, at most every ``every`` seconds (unless ``force``)."""
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        write_run(self.path, {"fingerprint": np.array(self._fp(fp))}, chains, scalars, draws, private=False)
        self._last = now

    def finish(self, fp: str) -> None:
        """The run is done: its snapshot stays until the caller deletes it (see the class)."""
