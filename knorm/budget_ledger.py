"""A privacy budget that persists: :class:`FileAccountant`, a :class:`~knorm.privacy.BudgetAccountant`
backed by a ledger file (one per data set), shared by every process that releases from that data.

The ledger is JSON lines: a header ``{"knorm_budget_ledger": 1, "epsilon": ε, "delta": δ, "created": …}``
written once, when the file is created (the budget is fixed then), and one line per release:
``{"epsilon", "delta", "label", "claim", "time", "pid"}`` (``claim``: the release's
:class:`~knorm.privacy.PrivacyClaim` as :meth:`~knorm.privacy.PrivacyClaim.as_dict` gives it).
It holds public claims only, never data or answers; it is kept private anyway (file 0600; a folder
the library creates for it 0700): who released what, and when, is the office's business.

How it never loses or over-counts a release, with any number of processes at once:

* every check and every spend runs under an exclusive ``fcntl.flock`` on a lock file beside the
  ledger (``<ledger>.lock``), and re-reads the whole ledger under that lock: no process decides on a
  stale total;
* a spend appends its one line with a single ``write`` to a descriptor opened ``O_APPEND`` and
  fsyncs it before it returns; mechanisms spend after drawing and before returning the answers,
  so every answer ever returned is on disk first (a release whose spend is refused returns nothing);
* a process killed mid-write leaves at most a torn last line (no newline): reading ignores it (its
  release never returned answers) and the next spend cuts it off before appending;
* the header is written to a temporary file and renamed into place (``os.replace``): a ledger either
  exists whole or not at all.

A mechanism checks the ledger before drawing anything (a release that would pass the budget is
refused then) and spends on it after drawing; should another process spend in between, the spend
refuses (:class:`~knorm.privacy.BudgetExceededError`) and the drawn answers are discarded, never
returned. POSIX only (``fcntl``); the lock assumes a local file system (``flock`` over NFS is not
reliable).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from ._validate import check_path, check_str
from .privacy import BudgetAccountant, PrivacyClaim, Spend, _nonneg, _prob

__all__ = ["FileAccountant", "LEDGER_VERSION"]

LEDGER_VERSION = 1
_CLAIM_FIELDS = {f.name for f in fields(PrivacyClaim)}


def _jsonable(value: Any) -> Any:
    """numpy scalars and arrays as Python numbers and lists (a claim's details); anything else as text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class _Lock:
    """An exclusive ``flock`` on ``path`` (created 0600) for the duration of a ``with`` block."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _Lock:
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        import fcntl

        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)


class FileAccountant(BudgetAccountant):
    """A :class:`~knorm.privacy.BudgetAccountant` whose spends live in the ledger file ``path`` (see the module).

    ``FileAccountant(path, epsilon=ε, delta=δ)`` creates the ledger with the budget ``(ε, δ)`` (``ε``
    finite, required then; ``δ`` default 0) and the folders above it that are missing (0700); the file
    is 0600. Opening an existing ledger reads its budget from its header; ``epsilon``/``delta``, if
    given, must equal it (a ValueError otherwise: the budget is set once, when the file is created).
    Pass it to any mechanism as ``accountant=``, in as many processes as you like: every release is
    recorded with its claim before its answers are returned, and a release that would pass the budget
    is refused before anything is drawn. :attr:`spends`, :attr:`total` and :attr:`remaining` read the
    ledger afresh. :meth:`reset` is refused: a persistent budget is never forgotten (a new data set
    gets a new file).
    """

    def __init__(self, path: str | os.PathLike[str], *, epsilon: float | None = None,
                 delta: float | None = None) -> None:
        check_path("path", path)
        self.path = Path(path).absolute()  # bound to its file, not to the working folder
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        eps = None if epsilon is None else _nonneg("epsilon", epsilon)
        dl = None if delta is None else _prob("delta", delta)
        if self.path.is_dir():
            raise ValueError(f"path {str(self.path)!r} is a folder, not a ledger file")
        if not self.path.exists() and eps is None:
            raise ValueError(f"path {str(self.path)!r}: no ledger there yet; give epsilon (and delta) to create "
                             "one with that budget")
        if not self.path.parent.exists():
            self._make_folders(self.path.parent)
        with _Lock(self.lock_path):
            if not self.path.exists():
                assert eps is not None
                self._create(eps, 0.0 if dl is None else dl)
            header, _ = self._read()
        self.epsilon, self.delta = float(header["epsilon"]), float(header["delta"])
        for name, given, have in (("epsilon", eps, self.epsilon), ("delta", dl, self.delta)):
            if given is not None and given != have:
                raise ValueError(f"{name} = {given:g} differs from the budget {name} = {have:g} the ledger "
                                 f"{str(self.path)!r} was created with (a budget is set once)")

    @staticmethod
    def _make_folders(folder: Path) -> None:
        """The missing folders above the ledger, each 0700 (whatever the umask)."""
        missing = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for f in reversed(missing):
            try:
                os.mkdir(f, 0o700)
            except FileExistsError:  # another process made it first
                continue
            os.chmod(f, 0o700)

    def _create(self, epsilon: float, delta: float) -> None:
        """Write the header to a temporary file (0600) and rename it into place (under the lock)."""
        if not np.isfinite(epsilon):
            raise ValueError("epsilon must be finite for a ledger's budget (a persistent budget sets a limit)")
        header = {"knorm_budget_ledger": LEDGER_VERSION, "epsilon": epsilon, "delta": delta, "created": _now()}
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(header) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _fsync_folder(self.path.parent)

    def _read(self) -> tuple[dict[str, Any], list[Spend]]:
        """The header and every complete entry (a torn last line, from a writer killed mid-way, ignored)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"path {str(self.path)!r}: the ledger file has disappeared") from None
        lines = text.split("\n")
        lines.pop()  # "" after a final newline, else the torn last line: its release never returned answers
        where = f"ledger {str(self.path)!r}"
        if not lines:
            raise ValueError(f"{where} has no header: not a knorm budget ledger")
        try:
            header = json.loads(lines[0])
            ok = (isinstance(header, dict) and header.get("knorm_budget_ledger") == LEDGER_VERSION
                  and _nonneg("epsilon", header.get("epsilon")) >= 0 and _prob("delta", header.get("delta")) >= 0)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{where}: line 1 is not a knorm budget ledger's header (version {LEDGER_VERSION})")
        spends = []
        for i, line in enumerate(lines[1:], start=2):
            try:
                spends.append(self._entry(json.loads(line)))
            except (ValueError, TypeError, KeyError):
                raise ValueError(f"{where}: line {i} is not a ledger entry (the file was edited or damaged)") from None
        return header, spends

    @staticmethod
    def _entry(e: dict[str, Any]) -> Spend:
        claim = None
        if e.get("claim") is not None:
            claim = PrivacyClaim(**{k: v for k, v in e["claim"].items() if k in _CLAIM_FIELDS})
        return Spend(e["epsilon"], e["delta"], str(e.get("label", "")), claim)

    @property
    def spends(self) -> list[Spend]:
        """Every release recorded in the ledger, in order (read afresh, under the lock)."""
        with _Lock(self.lock_path):
            return self._read()[1]

    @spends.setter
    def spends(self, value: list[Spend]) -> None:
        raise AttributeError("a FileAccountant's spends are its ledger's: record releases with spend()")

    def check(self, epsilon: float, delta: float = 0.0) -> tuple[float, float]:
        """:meth:`BudgetAccountant.check` against the ledger as it is now (read under the lock)."""
        with _Lock(self.lock_path):
            return self._check_against(self._read()[1], epsilon, delta)

    def _check_against(self, spends: list[Spend], epsilon: float, delta: float) -> tuple[float, float]:
        """The base class's check on ``spends`` (a snapshot read under the lock)."""
        snapshot = BudgetAccountant(epsilon=self.epsilon, delta=self.delta)
        snapshot.spends = spends
        return snapshot.check(epsilon, delta)

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              claim: PrivacyClaim | None = None) -> tuple[float, float]:
        """Check against the ledger and append the release (one fsync'd line), all under the lock;
        returns the new total. Refused (:class:`~knorm.privacy.BudgetExceededError`, nothing written)
        past the budget."""
        check_str("label", label)
        if claim is not None and not isinstance(claim, PrivacyClaim):
            raise TypeError(f"claim must be None or a knorm.PrivacyClaim, got {type(claim).__name__}")
        with _Lock(self.lock_path):
            spends = self._read()[1]
            eps, dl = self._check_against(spends, epsilon, delta)
            entry = {"epsilon": eps, "delta": dl, "label": label,
                     "claim": None if claim is None else claim.as_dict(), "time": _now(), "pid": os.getpid()}
            self._append(json.dumps(entry, default=_jsonable, ensure_ascii=False) + "\n")
            spends.append(Spend(eps, dl, label, claim))
        snapshot = BudgetAccountant(epsilon=self.epsilon, delta=self.delta)
        snapshot.spends = spends
        return snapshot.total

    def _append(self, line: str) -> None:
        """One ``write`` of ``line`` on an O_APPEND descriptor, fsync'd; a torn last line cut off first."""
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a writer killed mid-line: cut its torn line off
                with open(self.path, "rb") as f:
                    keep = f.read().rfind(b"\n") + 1
                os.ftruncate(fd, keep)
            data = line.encode("utf-8")
            if os.write(fd, data) != len(data):
                raise OSError(f"ledger {str(self.path)!r}: a short write")
            os.fsync(fd)
        finally:
            os.close(fd)

    def reset(self) -> None:
        """Refused: a persistent budget is never forgotten (a new data set gets a new ledger file)."""
        raise ValueError("a FileAccountant's ledger is never reset: for a new data set, open a new ledger file")

    def __repr__(self) -> str:
        e, d = self.total
        return (f"FileAccountant({str(self.path)!r}: spent ε = {e:g}, δ = {d:g} of ε = {self.epsilon:g}, "
                f"δ = {self.delta:g})")


def _fsync_folder(folder: Path) -> None:
    """fsync a folder (its new entry durable), where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

