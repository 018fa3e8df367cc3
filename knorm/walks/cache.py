"""Prepared workloads cached in the user's cache folder: certified once per F on a machine (issue 35).

Without a prepared file, the first K-norm question on a matrix F (a release, an expected error,
``recommend``, ``knorm info``) rounds K and certifies its walk (docs/design.md §3.5.1), and
every later one in that process reuses them (:func:`~knorm.walks.prepared.body_of`). This cache
keeps that work across processes: once certified, the body is written as
:func:`~knorm.walks.prepared.prepare` would write it (the default walk and chain count, public
seeds: the same file, bit for bit, on this machine) to ``<cache>/prepared/<fingerprint>.knorm``,
and a later process on the same F loads it instead of certifying again.

The files are public, like every prepared file: functions of F and public seeds, no data, no
noise; but a file someone else planted would be loaded, so the folder must be this user's and
writable by no one else (it is created 0700; another is not used). A file is loaded with every check of :func:`~knorm.walks.prepared.load_prepared`
(format, version, fingerprint of F, certificate thresholds, states inside K); one that fails
them (corrupt, another version, another matrix under this name) is deleted and rebuilt.

``KNORM_CACHE``: unset, the user's cache folder (``platformdirs.user_cache_dir("knorm")``);
``off`` (or ``0``, ``false``, ``no``), no cache; anything else, that folder.
``KNORM_CACHE_MAX_MB`` (default 512): after each write the least recently used files beyond
this size are deleted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "KNORM_CACHE"
MAX_ENV = "KNORM_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512.0
OFF = {"off", "0", "false", "no"}


def cache_folder() -> Path | None:
    """The folder of cached prepared workloads, or None when ``KNORM_CACHE`` turns the cache off.
    A bad ``KNORM_CACHE_MAX_MB`` is refused here, before any work (ValueError naming it)."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    max_bytes()
    if value:
        return Path(value).expanduser() / "prepared"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("knorm")) / "prepared"


def _trusted(folder: Path) -> bool:
    """The folder is this user's and no one else may write to it (a planted file would be loaded)."""
    try:
        st = folder.stat()
    except OSError:
        return False
    return (not hasattr(os, "getuid") or st.st_uid == os.getuid()) and not st.st_mode & 0o022


def max_bytes() -> float:
    """``KNORM_CACHE_MAX_MB`` in bytes (a value that is not a number ≥ 0 is refused, naming it)."""
    raw = os.environ.get(MAX_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        raise ValueError(f"{MAX_ENV} must be a number of megabytes >= 0, got {raw!r}") from None
    if not mb >= 0.0:
        raise ValueError(f"{MAX_ENV} must be a number of megabytes >= 0, got {raw!r}")
    return mb * 2**20


def _path(fingerprint: str) -> Path | None:
    folder = cache_folder()
    return None if folder is None else folder / f"{fingerprint}.knorm"


def lookup(fingerprint: str, load: Callable[[Path], Any]) -> Any:
    """``load(path)`` of the cached file named by ``fingerprint`` (:func:`~knorm.walks.prepared.body_of`
    passes :func:`~knorm.walks.prepared.load_prepared`, which checks it as any prepared file), or
    None: no cache, no file, or a file that does not load (deleted: it is rebuilt)."""
    path = _path(fingerprint)
    if path is None or not path.is_file() or not _trusted(path.parent):
        return None
    try:
        found = load(path)
    except Exception:  # noqa: BLE001 - any file that does not load is rebuilt: the cache is never an error
        try:
            path.unlink()
        except OSError:
            pass
        return None
    try:
        os.utime(path)  # recently used: kept longest
    except OSError:
        pass
    return found


def store(fingerprint: str, write: Callable[[Path], Any]) -> Path | None:
    """``write(path)`` of the file named by ``fingerprint`` in the cache (the caller writes a prepared
    workload, atomically), then the bound kept; None when there is no cache or it cannot be written
    (a read-only home: the cache is an optimisation, never an error)."""
    path = _path(fingerprint)
    if path is None:
        return None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(path.parent):
            return None
        write(path)
        prune(path.parent, max_bytes())
    except OSError:
        return None
    return path


def prune(folder: Path, limit: float) -> None:
    """Delete the least recently used ``*.knorm`` files of ``folder`` until they fit in ``limit`` bytes."""
    files = []
    for p in folder.glob("*.knorm"):
        try:
            st = p.stat()
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in files)
    for _, size, p in sorted(files):
        if total <= limit:
            break
        try:
            p.unlink()
            total -= size
        except OSError:
            pass
