"""Prepared workloads: the public work that depends on F only, done once and saved (docs/design.md §3.7).

A statistics office releases the same workload F for many tables. The rounding of
``K = F·B₁ⁿ`` (:func:`~knorm.walks.rounding.round_body`: the map T, τ and its chains'
final states, all seeded with the public ``ROUNDING_SEED``) and the certification of the
walk on the rounded body (:func:`~knorm.walks.certify.certify`: seeded with the public
``CERTIFY_SEED``; its certificate, τ, the warm-up W and 64 stationary states) are
deterministic functions of F; :func:`prepare` computes them once and writes them to a
file, and :func:`load_prepared` restores them for the same F, checking that the
certificate meets the thresholds and that the states lie in K (exact oracle). The file
holds nothing computed from data and no state of a chain whose draws became noise: a
release from it starts a chain at one of the public states and runs W steps of fresh
randomness before its first draw (:class:`~knorm.walks.certify.StationarySampler`).
"""

from __future__ import annotations

import json
import os
import time
import typing
import zipfile
import zlib
from collections import OrderedDict
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from .._blas import on_one_blas_thread
from .._io import atomic_write, check_npz_memory, npz_headers
from .._progress import as_progress
from .._validate import check_flag, check_memory, check_path, is_int, is_real, positive_int, short_repr
from ..body.hull import SymmetricHull, validate_matrix
from ..body.marginal import MarginalMatch, match_arrays, match_from_arrays
from ..body.marginal_ops import as_marginal, dense_marginal, fingerprint_of
from . import cache
from .certify import (ON_CERTIFIED, PUBLIC_NOTE, Certificate, Certified, PoolMoments, cache_certified,
                      check_states)
from .certify import certify as certify_walk
from .chains import (body_radius, check_workers, grouped_bases, grouped_gauges, radius_bases, radius_count,
                     walk_id)
from .checkpoint import PublicSnapshot
from .ledger import Ledger, mark, summary_lines
from .rounding import Rounding
from .sampler import DEFAULT_CHAINS, cache_rounding, rounding_of, rounding_progress

FORMAT = "knorm-prepared-workload/4"  # 4: τ about the pooled mean, its bound, W from it (issue 51)
ROW_ARRAY = "row_array:"  # prefix of the saved arrays of recommend's rows
_ROUNDING_KEYS = ("T", "points", "tau", "iterations", "eigen_spread", "span_basis", "unit")


def _version() -> str:
    from .. import __version__  # the package root imports this module: read at call time

    return __version__


Workload = typing.Union[NDArray[np.float64], MarginalMatch]  # a validated F, or a marginal one by its structure


def as_workload(F: Any, name: str = "F") -> tuple[Workload, str, tuple[int, int]]:
    """``(workload, fingerprint, (d, n))``: a marginal workload known by its structure
    (:func:`knorm.body.marginal_ops.as_marginal`: never made dense) or the validated matrix, with
    the SHA-256 of F's float64 bytes, the same either way."""
    match = as_marginal(F)
    if match is not None:
        return match, fingerprint_of(match), match.shape
    F = validate_matrix(F, name)
    return F, SymmetricHull._source_hash(F), (int(F.shape[0]), int(F.shape[1]))


def workload_fingerprint(F: ArrayLike, name: str = "F") -> str:
    """SHA-256 of the validated F (float64: dtype, shape and bytes): the one a body built from it
    carries (:meth:`~knorm.body.hull.SymmetricHull._source_hash`); of a marginal workload known by
    its structure, the same digest from its rows made a piece at a time."""
    return as_workload(F, name)[1]


BODY_CACHE = 4  # bodies kept per process (by F's fingerprint) for mechanisms given neither a body nor a file
_BODIES: OrderedDict[str, SymmetricHull] = OrderedDict()


def body_of(F: Any, fingerprint: str | None = None) -> SymmetricHull:
    """The body of the validated ``F``, shared in this process by every mechanism on the same
    matrix (the last ``BODY_CACHE`` matrices, by fingerprint): its rounding and certification,
    cached with it, are computed once, so a later mechanism on the same F releases after a
    warm-up (docs/design.md §3.5.1). A matrix this process has not seen is looked up in the
    cache of prepared workloads (:mod:`knorm.walks.cache`: certified once per machine), and
    its certification, once made, is written there. ``F``: a validated matrix or a marginal
    workload by its structure; ``fingerprint``: its :func:`workload_fingerprint`, if known."""
    if fingerprint is None:
        F, fp, shape = as_workload(F)
    else:
        fp, shape = fingerprint, F.shape
    body = _BODIES.pop(fp, None)
    if body is None:
        cached = cache.lookup(fp, lambda path: load_prepared(path, F))
        certified = cached is not None and cached.certified is not None
        body = cached.body if certified else SymmetricHull._of(F, fp)
        body._cache_key = (fp, shape)  # certified_of writes it to the cache
    _BODIES[fp] = body
    while len(_BODIES) > BODY_CACHE:
        _BODIES.popitem(last=False)
    return body


class PreparedWorkload:
    """The public, F-only part of a release: the body of F with its rounding.

    Built by :func:`prepare` or :func:`load_prepared`; pass it to a mechanism
    (``KNormMechanism(F, epsilon=…, prepared=W)``, ``NIMechanism(…, prepared=W)``,
    ``knorm.recommend(…, prepared=W)``) or sample its ``body``
    (``Sampler(W.body)``): the rounding is then never recomputed, and seeded results are
    identical to those of a run that computed it. ``fingerprint``: SHA-256 of the
    validated F; ``rounding``: None when K has exact structure (no MCMC, nothing to round);
    ``certified``: the walk's :class:`~knorm.walks.certify.Certified` (certificate and public
    stationary states), None if not certified (exact structure, or ``prepare(certify=False)``).
    """

    def __init__(self, body: SymmetricHull, fingerprint: str, shape: tuple[int, int], rounding: Rounding | None,
                 rows: dict[str, Any] | None = None, row_arrays: dict[str, NDArray[np.float64]] | None = None,
                 certified: Certified | None = None, F: Workload | None = None) -> None:
        self.body, self.fingerprint, self.rounding = body, fingerprint, rounding
        self.workload = F  # what it was prepared for: F (public; saved in the file, sparse) or its structure
        self.certified = certified
        self.point_bases: NDArray[np.int64] | None = None  # oracle bases at the rounding's end points (saved)
        self.radius_bases: NDArray[np.int64] | None = None  # and at body_radius's directions (saved)
        self.shape = shape  # (d, n) of the F it was prepared for
        # knorm.recommend's ε-free rows ({"options": …, "rows": {name: …}}, JSON-ready) and the arrays
        # they need (a searched p-Identity's Θ): filled by recommend(…, prepared=self), saved with it
        self.rows: dict[str, Any] = {} if rows is None else rows
        self.row_arrays: dict[str, NDArray[np.float64]] = {} if row_arrays is None else row_arrays
        # where the prepare that made it spent its time (:meth:`knorm.walks.ledger.Ledger.summary`);
        # None when loaded from a file (timings belong to a machine, not to the file)
        self.stages: dict[str, Any] | None = None
        if rounding is not None:
            cache_rounding(body, rounding)
        if certified is not None:
            cache_certified(body, certified)

    @property
    def F(self) -> NDArray[np.float64] | None:
        """The matrix it was prepared for (a marginal workload's made dense on request, memory checked)."""
        if isinstance(self.workload, MarginalMatch):
            self.workload = dense_marginal(self.workload)
        return self.workload

    @property
    def certificate(self) -> Certificate | None:
        return None if self.certified is None else self.certified.certificate

    def __repr__(self) -> str:
        rows = sorted(self.rows.get("rows", {}))
        return (f"PreparedWorkload(shape={self.shape}, dim={self.body.dim}, fingerprint={self.fingerprint[:12]}…, "
                f"rounding={'none (exact structure)' if self.rounding is None else 'T, τ and end points'}, "
                f"certified={'no' if self.certified is None else self.certified.certificate.summary()}"
                + (f", recommend rows {rows}" if rows else "") + ")")

    def body_for(self, F: Any, name: str = "prepared", fingerprint: str | None = None) -> SymmetricHull:
        """The prepared body, if it was prepared for ``F`` (already validated, or a marginal workload;
        ``fingerprint``: its fingerprint if known); else a ValueError."""
        if (workload_fingerprint(F) if fingerprint is None else fingerprint) != self.fingerprint:
            raise ValueError(f"{name}: the prepared workload was made for another matrix (its fingerprint "
                             f"{self.fingerprint[:12]}… differs from F's): prepare this F")
        return self.body

    def solve_point_bases(self, workers: int | Executor | None = None) -> None:
        """The oracle bases at the rounding's end points (:func:`~knorm.walks.chains.grouped_bases`),
        saved as the warm starts that make the check of the end points cheap on load; once."""
        if self.rounding is not None and self.point_bases is None:
            rnd = self.rounding
            self.point_bases = grouped_bases(rnd.frame, rnd.frame.to_oracle(rnd.points), workers)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the file (numpy ``.npz``, no pickles), atomically; returns its path.

        It holds the format, the knorm version, F itself (public; its non-zero entries, or for a
        marginal workload recognised from its entries its structure, a few kilobytes, so that
        ``load_prepared(path)`` needs no other file) with its fingerprint and shape, (unless K has
        exact structure) the rounding: T, its chains' end points, τ, iterations, eigenvalue
        spread, and the span basis and unit it was computed in; and the ε-free rows of
        :func:`knorm.recommend` computed with this workload so far (:attr:`rows`, with a
        searched p-Identity's Θ); and, if certified, the certificate (JSON) and the 64 public
        stationary states. All public: functions of F and fixed seeds.
        """
        path = Path(path)
        arrays: dict[str, Any] = {"format": np.array(FORMAT), "knorm": np.array(_version()),
                                  "fingerprint": np.array(self.fingerprint), "shape": np.array(self.shape),
                                  "has_rounding": np.array(self.rounding is not None)}
        if isinstance(self.workload, MarginalMatch):
            arrays.update(match_arrays(self.workload))
        elif self.workload is not None:
            F = self.workload
            match = self.body._match if self.body.n_columns == F.shape[1] else None  # of F itself
            arrays.update(sparse_matrix(F) if match is None else match_arrays(match))
        if self.rounding is not None:
            rnd = self.rounding
            self.solve_point_bases()
            if self.radius_bases is None:  # and the walk's length scale (body_radius)
                self.radius_bases = radius_bases(rnd.frame)
            arrays.update(T=rnd.T, points=rnd.points, point_bases=self.point_bases, radius_bases=self.radius_bases,
                          tau=np.array(rnd.tau),
                          iterations=np.array(rnd.iterations),
                          eigen_spread=np.array(rnd.eigen_spread), span_basis=self.body.span_basis,
                          unit=np.array(self.body._unit))
        if self.certified is not None:
            arrays.update(certificate=np.array(json.dumps(self.certified.certificate.as_dict(), sort_keys=True)),
                          states=self.certified.states, state_bases=self.certified.bases,
                          public=np.array(PUBLIC_NOTE))
            mom = self.certified.moments
            if mom is not None:
                arrays.update(pool_moments=np.array(json.dumps(mom.as_dict(), sort_keys=True)),
                              pool_second=mom.second)
        if self.rows:
            arrays["recommend_rows"] = np.array(json.dumps(self.rows, sort_keys=True))
            arrays.update({ROW_ARRAY + k: v for k, v in self.row_arrays.items()})
        atomic_write(path, lambda f: np.savez(f, **arrays))  # public: the usual permissions
        return path


SNAPSHOT_FORMAT = "knorm-prepare-snapshot/1"
_SNAPSHOT_FILES = ("prepare.json", "rounding.knorm", "certify.npz")


def snapshot_path(path: str | os.PathLike[str]) -> Path:
    """Where :func:`prepare` keeps the snapshot of an unfinished prepare for ``path``: ``path.partial``."""
    return Path(str(path) + ".partial")


class _Partial:
    """The folder ``W.knorm.partial`` of an unfinished prepare (public: F's fingerprint, the rounding
    once done, the certification run's chains and pool; no data, no noise)."""

    def __init__(self, folder: Path, key: dict[str, Any], resume: bool, every: float) -> None:
        self.folder, self.key = folder, key
        where = str(folder)
        if folder.exists() and not (folder.is_dir() and (folder / "prepare.json").is_file()):
            raise ValueError(f"{where!r} exists and is not the snapshot of a prepare: move it away")
        if folder.exists() and not resume:
            self.discard()
        if folder.exists():
            try:
                saved = json.loads((folder / "prepare.json").read_text())
            except (OSError, ValueError):
                saved = None
            if saved != key:
                raise ValueError(f"{where!r} holds the snapshot of another prepare (another F, chain count, walk "
                                 "or knorm version): discard it with resume=False (knorm prepare --restart)")
        else:
            folder.mkdir()
            text = json.dumps(key, sort_keys=True).encode()
            atomic_write(folder / "prepare.json", lambda f: f.write(text))
        self.certify = PublicSnapshot(folder / "certify.npz", every=every)

    def rounding(self, F: Workload) -> PreparedWorkload | None:
        """The workload with its saved rounding (checked as a prepared file is), if it was saved."""
        path = self.folder / "rounding.knorm"
        return load_prepared(path, F) if path.exists() else None

    def save_rounding(self, w: PreparedWorkload) -> None:
        w.save(self.folder / "rounding.knorm")

    def discard(self) -> None:
        """Delete the snapshot's files (and their temporaries), then the folder."""
        for p in self.folder.iterdir():
            if p.name in _SNAPSHOT_FILES or p.name.startswith(tuple(f".{n}." for n in _SNAPSHOT_FILES)):
                p.unlink()
        self.folder.rmdir()


@on_one_blas_thread
def prepare(F: Any, path: str | os.PathLike[str] | None = None, *, chains: int = DEFAULT_CHAINS,
            workers: int | Executor | None = None, progress: Any = None, certify: bool = True,
            walk: str = "billiard", resume: bool = True, snapshot_every: float = 30.0,
            recommend: bool = True) -> PreparedWorkload:
    """Do the work that depends on F only (its body, rounding and, with ``certify``, the
    certification of ``walk`` on the rounded body) and, given ``path``, save it.

    ``chains``: chains of the rounding and of the certified run (default ``DEFAULT_CHAINS`` = 8;
    more keep more cores or cluster workers busy: the certified pool is :func:`~knorm.walks.
    certify.certify_pool`, 2000 records split across the chains). The result is a
    function of F, ``chains`` and ``walk`` (public seeds); ``workers`` (threads, or an executor:
    :class:`~knorm.distributed.DaskExecutor`) and ``progress`` (True: the rounding's and the
    certification's bars on stderr, as ``sampler_options={"progress": True}``; or a callable as
    for :class:`~knorm.walks.sampler.Sampler`) never change it.

    Given ``path``, an unfinished prepare keeps a public snapshot in :func:`snapshot_path`
    (``path.partial``: the rounding once done, the certification run's chains and pool at most
    every ``snapshot_every`` seconds), and a later call with the same F, ``chains``, ``walk``
    and knorm version (``resume=True``) continues from it to the same file bit for bit; the
    snapshot is deleted once the file is written. A snapshot of another prepare is refused
    (ValueError); ``resume=False`` discards any snapshot first.

    ``recommend`` (default True): also compute :func:`knorm.recommend`'s ε-free rows (every pure
    ε-DP candidate, default options; K-norm's and a one-level NIM's from the certified pool) and
    keep them in the file, so that ``recommend(F, epsilon=…, prepared=load_prepared(path))``
    answers at once at any ε (the Gaussian rows, which depend on δ, are exact formulas computed
    then); at 4,800 cells p-Identity's search alone takes minutes, which a plain file would
    leave to every later ``recommend``. ``False`` skips them.

    Raises :class:`~knorm.ConvergenceError` if the walk cannot be certified. Returns the
    :class:`PreparedWorkload`; later releases load the file with :func:`load_prepared`.
    """
    walk_id(walk)
    chains = positive_int("chains", chains)
    for name, flag in (("certify", certify), ("resume", resume), ("recommend", recommend)):
        check_flag(name, flag)
    check_path("path", path, allow_none=True)
    workers = check_workers(workers)
    report = as_progress(progress)  # True: bars on stderr (closed at the end), as a mechanism's sampler_options
    if not is_real(snapshot_every) or not snapshot_every >= 0:
        raise ValueError(f"snapshot_every must be a number of seconds >= 0, got {short_repr(snapshot_every)}")
    F, fp, shape = as_workload(F)
    partial = None
    if path is not None:
        key = {"format": SNAPSHOT_FORMAT, "knorm": _version(), "fingerprint": fp, "chains": chains, "walk": walk,
               "certify": bool(certify)}
        partial = _Partial(snapshot_path(path), key, bool(resume), float(snapshot_every))
    with Ledger() as led:  # where the time goes, stage by stage: w.stages, and the progress's last lines
        w = _prepare(F, fp, shape, path, partial, chains, workers, report, certify, walk, recommend)
    w.stages = led.summary()
    if hasattr(report, "note"):
        for line in summary_lines(w.stages):
            report.note(line)
    if progress is True:  # the bars made here
        report.close()
    return w


def _prepare(F: Workload, fp: str, shape: tuple[int, int], path: str | os.PathLike[str] | None,
             partial: _Partial | None, chains: int, workers: Any, report: Any, certify: bool, walk: str,
             recommend: bool) -> PreparedWorkload:
    """:func:`prepare`'s work, its stages marked in the active ledger."""
    mark("body")
    w = None if partial is None else partial.rounding(F)
    if w is None:
        body = SymmetricHull._of(F, fp)
        if body.exact_structure is None and hasattr(report, "note"):  # the whole prepare, up front (issue 44)
            report.note(prepare_estimate(body.dim, shape[1], workers, chains))
        mark("rounding")
        rnd = None if body.exact_structure is not None else rounding_of(body, workers, rounding_progress(report),
                                                                         chains=chains)
        w = PreparedWorkload(body, fp, shape, rnd, F=F)
        mark("end-point bases")
        w.solve_point_bases(workers)  # on the given workers (save would use one thread per CPU)
        if partial is not None and rnd is not None:
            partial.save_rounding(w)
    if w.rounding is not None and certify:
        mark("certification: set-up")
        w.certified = certify_walk(w.body, walk=walk, workers=workers, progress=report, chains=chains,
                                   checkpoint=None if partial is None else partial.certify)
        cache_certified(w.body, w.certified)
    if recommend:  # knorm.recommend's ε-free rows, kept in w.rows (ROW_MAKERS: registered by knorm.recommend)
        mark("recommend's rows")
        noting = hasattr(report, "note")
        if noting:  # minutes at 4,800 cells (p-Identity's strategy search), with no count to show
            report.note("recommend's ε-free rows: every mechanism's expected error (p-Identity's strategy search "
                        "is the long one)")
        t_rows = time.perf_counter()
        for make_rows in ROW_MAKERS:
            make_rows(_rows_workload(F), w, walk, workers)
        if noting:
            report.note(f"recommend's rows: done in {time.perf_counter() - t_rows:.1f} s")
    mark("file")
    if path is not None:
        w.save(path)
    if partial is not None:
        partial.discard()
    return w


# seconds of a prepare on 2 cores with 8 chains ≈ PREPARE_FIT·r²·(n + r²) (rank r, n cells): a fit to the
# prepares measured in docs/benchmarks.md (rank 95 … 332, 720 … 57,600 cells), each within 2× of it
PREPARE_FIT = 3.2e-7


def prepare_estimate(rank: int, n: int, workers: Any = None, chains: int = DEFAULT_CHAINS) -> str:
    """A rough up-front estimate of a whole prepare (the rounding and the certification of an MCMC
    body of rank r over n cells), as text: ``PREPARE_FIT·r²·(n + r²)`` seconds on 2 cores, the chain
    work shared by ``min(chains, threads)`` cores (threads: ``workers``, or this process's CPUs)."""
    from .chains import default_workers

    slots = workers if is_int(workers) else getattr(workers, "slots", None) if workers is not None else None
    cores = max(1, min(int(slots or default_workers()), chains))
    seconds = PREPARE_FIT * rank**2 * (n + rank**2) * 2.0 / cores
    from .._progress import rough_time

    return (f"rank {rank}, {n} cells: the rounding and the certification roughly "
            f"{rough_time(seconds).removeprefix('about ')} on {cores} core{'s' if cores != 1 else ''} (a fit to "
            "measured prepares, within about 2×)")


# knorm.recommend registers the function that fills a prepared workload's rows (prepare(recommend=True))
ROW_MAKERS: list[Any] = []


def _write_cache(body: SymmetricHull, certified: Certified) -> None:
    """``certified_of``'s hook: the certified body of a matrix seen through :func:`body_of` (it
    carries F's fingerprint and shape), written to the cache of prepared workloads as
    :func:`prepare` would write it (the default walk and chain count only: the same file)."""
    key = body._cache_key
    if key is None or body.exact_structure is not None or certified.certificate.walk != "billiard" \
            or certified.certificate.chains != DEFAULT_CHAINS:
        return
    fp, shape = key
    cache.store(fp, lambda path: PreparedWorkload(body, fp, shape, rounding_of(body), certified=certified).save(path))


ON_CERTIFIED.append(_write_cache)


def _read(path: Path) -> dict[str, NDArray[Any]]:
    bad = ValueError(f"prepared: {str(path)!r} is not a prepared-workload file (knorm prepare writes one)")
    try:
        z = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error):
        raise bad from None
    if not isinstance(z, np.lib.npyio.NpzFile):  # a .npy array
        raise bad
    with z:
        try:
            headers = npz_headers(z)
        except (ValueError, OSError, EOFError, KeyError, SyntaxError, zipfile.BadZipFile, zlib.error):
            raise bad from None
        _check_headers(headers, path)  # every size checked before any array is made
        try:
            return {k: z[k] for k in z.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error):  # truncated, or a bad CRC
            raise bad from None


# fields whose shape the header must give: (ndim, the dtype kinds allowed); sizes are checked against
# `shape` (F's d × n) before the dense F is made (_stored_matrix)
_FIELDS = {"shape": (1, "iu"), "matrix_shape": (1, "iu"), "matrix_indptr": (1, "iu"), "matrix_indices": (1, "iu"),
           "marginal_sizes": (1, "iu"), "marginal_rows": (1, "iu"), "marginal_scale": (0, "f"),
           "marginal_cliques": (0, "U"),
           "matrix_data": (1, "iuf"), "T": (2, "f"), "points": (2, "f"), "span_basis": (2, "f"),
           "states": (2, "f"), "pool_second": (2, "f")}


def _check_headers(headers: dict[str, Any], path: Path) -> None:
    """The arrays' headers against what the format declares and this machine's memory, before any
    is read: a one-line ValueError naming the field."""
    try:
        check_npz_memory(headers, f"prepared: {str(path)!r}: its arrays")
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    for name, (ndim, kinds) in _FIELDS.items():
        if name in headers:
            shape, dtype = headers[name]
            if len(shape) != ndim or dtype.kind not in kinds or (name.endswith("shape") and shape != (2,)):
                raise ValueError(f"prepared: {str(path)!r} is damaged (its {name} has shape {shape} and dtype "
                                 f"{dtype}, not what the format declares)")


def _declared_shape(z: dict[str, NDArray[Any]], path: Path, field: str = "shape") -> tuple[int, int]:
    """The file's ``shape`` (or ``matrix_shape``): two positive whole numbers (checked by its header's
    dtype in :func:`_check_headers`), else a one-line ValueError naming it."""
    if field not in z:
        raise ValueError(f"prepared: {str(path)!r} is damaged (it has no {field})")
    d, n = (int(v) for v in z[field])
    if d < 1 or n < 1:
        raise ValueError(f"prepared: {str(path)!r} is damaged (its {field} is not two positive whole numbers)")
    return d, n


def _nonsingular(T: NDArray[Any]) -> bool:
    """T is square-invertible: by its log-determinant (``det`` itself underflows to 0 at rank
    ≈ 200, where T's entries are ≈ 0.01: (2,3,4,5,6,7) marginals, log|det T| ≈ −800)."""
    sign, logdet = np.linalg.slogdet(T)
    return bool(sign != 0.0 and np.isfinite(logdet))


def _span_change(z: dict[str, NDArray[Any]], body: SymmetricHull, path: Path) -> tuple[NDArray[Any], float] | None:
    """How the file's span coordinates map to this body's, or None when they are the same: span
    coordinates c = Uᵀy/unit, so ``c_here = s·Q·c_saved`` with ``Q = U_hereᵀU_saved`` and
    ``s = unit_saved/unit_here`` (another LAPACK may rotate the basis of a repeated singular
    value); a saved basis that does not span F's answer space is refused."""
    U, unit = z["span_basis"], float(z["unit"])
    if np.array_equal(U, body.span_basis) and unit == body._unit:
        return None
    Q = body.span_basis.T @ U
    if np.max(np.abs(body.span_basis @ Q - U)) > 1e-8:
        raise ValueError(f"prepared: {str(path)!r} does not span this F's answer space")
    return Q, unit / body._unit


def _rounding(z: dict[str, NDArray[Any]], body: SymmetricHull, path: Path) -> Rounding:
    """The saved rounding for ``body``, checked: shapes, finite entries, τ ≥ 1, end points in K."""
    damaged = ValueError(f"prepared: {str(path)!r} is damaged (its rounding does not fit the body of F)")
    r = body.dim
    if any(k not in z for k in _ROUNDING_KEYS):
        raise damaged
    U, T, pts = z["span_basis"], z["T"], z["points"]
    shapes = U.shape == body.span_basis.shape and T.shape == (r, r) and pts.ndim == 2 and pts.shape[1] == r
    if not (shapes and all(np.all(np.isfinite(a)) for a in (U, T, pts, z["unit"], z["tau"], z["eigen_spread"]))
            and float(z["tau"]) >= 1.0 and float(z["unit"]) > 0.0 and _nonsingular(T)):
        raise damaged
    change = _span_change(z, body, path)
    if change is not None:
        Q, s = change
        T = (Q * s) @ T
    frame = body.frame.mapped(T)
    if len(pts):  # the end points lie in K (exact oracle; their saved bases are warm starts)
        b = z.get("point_bases")
        try:
            g = (frame.gauges(pts, frame.crash_basis())[0] if b is None or b.shape != pts.shape else
                 grouped_gauges(frame, frame.to_oracle(pts), b)[0])
        except ValueError:
            raise damaged from None
        if not np.all(g <= 1.0 + 1e-9):
            raise damaged
    return Rounding(T=T, frame=frame, covariance=T @ T.T, iterations=int(z["iterations"]),
                    eigen_spread=float(z["eigen_spread"]), points=pts, tau=float(z["tau"]))


def _rows_workload(F: Workload) -> Any:
    """What recommend's rows are computed from: F, or a marginal workload's canonical implicit form
    (:func:`knorm.implicit.marginals`-like terms, never dense)."""
    if not isinstance(F, MarginalMatch):
        return F
    from ..implicit import from_marginal_match

    return from_marginal_match(F)


@on_one_blas_thread
def load_prepared(path: str | os.PathLike[str], F: Any = None) -> PreparedWorkload:
    """The prepared workload saved at ``path`` by :func:`prepare`, for this ``F`` (None: the F
    the file holds, checked against its fingerprint; :attr:`PreparedWorkload.F`).

    Refused (one-line ValueError) if the file is not one, was written by another knorm
    version or format (prepare again), or was prepared for another matrix (fingerprint); a
    missing file raises FileNotFoundError, as ``open`` does.
    The body of F is built here (its SVD and structure); the rounding is restored, not
    recomputed. If this machine's span basis of F differs from the one saved (another
    LAPACK may rotate the basis of a repeated singular value), T is carried over to it
    exactly in real arithmetic: the same rounded body, the same noise law.
    """
    path, z = _current(path)
    F, fp = _matrix_of(z, path, F)
    body = SymmetricHull._of(F, fp)
    rnd = None
    if bool(z.get("has_rounding", False)):
        # prepare found no exact structure (else it would not have rounded): not searched again here
        # (a file that says so of an exact body only routes it to MCMC, whose claim says approximate)
        body._structure = None
        rnd = _rounding(z, body, path)
    cert = _certified(z, rnd, body, path) if "certificate" in z else None
    rows, arrays = _rows(z, path, F.shape[1])
    w = PreparedWorkload(body, fp, F.shape, rnd, rows, arrays, cert, F=F)
    if rnd is not None and "point_bases" in z and z["point_bases"].shape == rnd.points.shape:
        w.point_bases = np.asarray(z["point_bases"], dtype=np.int64)  # checked in _rounding
    if rnd is not None and "radius_bases" in z:
        try:  # the walk's length scale, exact from the saved warm starts (computed anew if they do not fit)
            fits = z["radius_bases"].shape == (radius_count(rnd.frame.r), rnd.frame.r)
            body_radius(rnd.frame, z["radius_bases"] if fits else None)
        except ValueError:
            raise ValueError(f"prepared: {str(path)!r} is damaged (its radius bases are not bases)") from None
        w.radius_bases = radius_bases(rnd.frame)  # the saved ones where they fit (solved from), else the new
    return w


def _current(path: str | os.PathLike[str]) -> tuple[Path, dict[str, NDArray[Any]]]:
    """The arrays of the prepared file at ``path``, refused if it is not one of this format and knorm version."""
    path = Path(check_path("path", path))
    z = _read(path)
    fmt = str(z.get("format", ""))
    version = str(z.get("knorm", ""))
    if fmt != FORMAT or version != _version():
        raise ValueError(f"prepared: {str(path)!r} is in format {fmt or '?'} of knorm {version or '?'}; this is "
                         f"{FORMAT} of knorm {_version()}: prepare it again")
    return path, z


def _matrix_of(z: dict[str, NDArray[Any]], path: Path, F: Any) -> tuple[Workload, str]:
    """``(F, its fingerprint)``: the given F (a matrix or a marginal workload), or (None) the one the
    file holds (a marginal workload's structure is kept as structure); refused unless the file was
    prepared for it."""
    shape = _declared_shape(z, path)
    if F is not None:
        match = as_marginal(F)
        F = validate_matrix(F) if match is None else match
        if F.shape != shape:
            raise ValueError(f"prepared: {str(path)!r} was prepared for another matrix (its shape {shape}), not for "
                             f"this F {F.shape}: prepare this F")
    F = _stored_matrix(z, path, shape) if F is None else F
    fp = workload_fingerprint(F)
    if str(z["fingerprint"]) != fp:
        raise ValueError(f"prepared: {str(path)!r} was prepared for another matrix (shape "
                         f"{tuple(int(s) for s in z['shape'])}, fingerprint {str(z['fingerprint'])[:12]}…), not for "
                         f"this F {F.shape} ({fp[:12]}…): prepare this F")
    return F, fp


def prepared_matrix(path: str | os.PathLike[str], *, dense: bool = True) -> Any:
    """The F a prepared file holds, checked against its fingerprint, without building its body or
    restoring its rounding (what :func:`load_prepared` with ``F=None`` then does). ``dense=False``:
    a marginal workload stays its structure (a :class:`~knorm.body.marginal.MarginalMatch`)."""
    path, z = _current(path)
    F = _matrix_of(z, path, None)[0]
    return dense_marginal(F) if dense and isinstance(F, MarginalMatch) else F


def sparse_matrix(F: NDArray[np.float64]) -> dict[str, NDArray[Any]]:
    """F's non-zero entries for the file, row by row (CSR: ``matrix_indptr``, ``matrix_indices`` in
    the smallest unsigned type that holds n, ``matrix_data`` as int8 where every entry is an
    integer in [-128, 127], else float64) and its shape: a 0/1 marginal workload costs 3 bytes a
    non-zero entry."""
    m = sparse.csr_matrix(F)
    small = bool(np.all(m.data == np.rint(m.data)) and np.all(np.abs(m.data) <= 127))
    kind = np.uint16 if F.shape[1] <= 2**16 else np.uint32
    return {"matrix_shape": np.array(F.shape, dtype=np.int64), "matrix_indptr": m.indptr.astype(np.int64),
            "matrix_indices": m.indices.astype(kind), "matrix_data": m.data.astype(np.int8 if small else np.float64)}


def _stored_matrix(z: dict[str, NDArray[Any]], path: Path, shape: tuple[int, int]) -> Workload:
    """The F a file holds (its marginal structure, :func:`~knorm.body.marginal.match_arrays`, or
    :func:`sparse_matrix`), validated; the caller checks its fingerprint. Its
    ``matrix_shape`` must be the file's ``shape``, its CSR arrays of the sizes that shape declares,
    and the dense F must fit in memory, before F is made."""
    keys = ("matrix_shape", "matrix_indptr", "matrix_indices", "matrix_data")
    marginal = ("marginal_sizes", "marginal_cliques", "marginal_scale", "marginal_rows")
    if all(k in z for k in marginal):  # a marginal workload: its structure (match_arrays), never made dense here
        d, n = shape
        return match_from_arrays(z, d, n, f"prepared: {str(path)!r} is damaged")
    if not all(k in z for k in keys):
        raise ValueError(f"prepared: {str(path)!r} holds no F (written before F was kept in the file): give F, "
                         "or prepare it again")
    d, n = _declared_shape(z, path, "matrix_shape")
    where = f"prepared: {str(path)!r} is damaged"
    if (d, n) != shape:
        raise ValueError(f"{where} (its matrix_shape is not its shape)")
    nnz = len(z["matrix_indices"])
    if z["matrix_indptr"].shape != (d + 1,) or len(z["matrix_data"]) != nnz or nnz > d * n:
        raise ValueError(f"{where} (its matrix_indptr, matrix_indices or matrix_data do not have the sizes its "
                         "matrix_shape declares)")
    check_memory(f"prepared: {str(path)!r}: its matrix_shape", None, 8 * 3 * d * n)  # F, its copy, the body's
    damaged = ValueError(f"{where} (its F cannot be read)")
    try:
        m = sparse.csr_matrix((z["matrix_data"].astype(np.float64), z["matrix_indices"].astype(np.int64),
                               z["matrix_indptr"]), shape=(d, n))
        m.check_format(full_check=True)  # pointers, index range and order: scipy's own checks
        F = m.toarray()
    except (ValueError, TypeError, IndexError, MemoryError):
        raise damaged from None
    return validate_matrix(F)


_CERT_TYPES = typing.get_type_hints(Certificate)  # each field's type (str, int or float), from its declaration


def _moments(z: dict[str, NDArray[Any]], body: SymmetricHull, pool: int, path: Path,
             damaged: ValueError) -> PoolMoments | None:
    """The saved :class:`~knorm.walks.certify.PoolMoments`, checked (None in a file written before
    they were kept): finite; standard errors ≥ 0 and ESS in [2, pool]; E|Z|² = tr E[ZZᵀ] (to
    1e-9, relative); (E|Z|)² ≤ E|Z|²; E[ZZᵀ] symmetric and positive semi-definite. Carried to
    this body's span coordinates as the rounding is (:func:`_span_change`): ``Z_here = s·Q·Z_saved``."""
    r = body.dim
    if "pool_moments" not in z and "pool_second" not in z:
        return None
    try:
        d = json.loads(str(z["pool_moments"]))
        second = np.asarray(z["pool_second"], dtype=np.float64)
        sq, nrm = (tuple(float(v) for v in d[k]) for k in ("sq", "norm"))
        records = d["records"]
    except (KeyError, ValueError, TypeError):
        raise damaged from None
    ok = (is_int(records) and records == pool and len(sq) == 3 and len(nrm) == 3 and second.shape == (r, r)
          and all(np.isfinite(v) for v in (*sq, *nrm)) and bool(np.all(np.isfinite(second)))
          and sq[0] > 0 and nrm[0] > 0 and min(sq[1], nrm[1]) >= 0 and all(2 <= e <= pool for e in (sq[2], nrm[2]))
          and nrm[0] ** 2 <= sq[0] * (1 + 1e-12) and np.allclose(second, second.T, rtol=0, atol=1e-12 * sq[0])
          and abs(float(np.trace(second)) - sq[0]) <= 1e-9 * sq[0])
    if ok:
        second = (second + second.T) / 2
        ok = float(np.min(np.linalg.eigvalsh(second))) >= -1e-12 * sq[0]
    if not ok:
        raise damaged
    change = _span_change(z, body, path)
    if change is not None:
        Q, s = change
        second = s**2 * (Q @ second @ Q.T)
        second = (second + second.T) / 2
        sq, nrm = (s**2 * sq[0], s**2 * sq[1], sq[2]), (s * nrm[0], s * nrm[1], nrm[2])
    return PoolMoments(sq=sq, norm=nrm, second=second, records=int(records))  # type: ignore[arg-type]


def _certified(z: dict[str, NDArray[Any]], rnd: Rounding | None, body: SymmetricHull, path: Path) -> Certified:
    """The saved certification, checked: its fields, the thresholds (W and the spacing must
    follow from its own ESS: :meth:`~knorm.walks.certify.Certificate.failures`), this knorm
    version, and the states inside K by the exact oracle."""
    damaged = ValueError(f"prepared: {str(path)!r} is damaged (its certificate cannot be read)")
    if rnd is None or "states" not in z or "state_bases" not in z:
        raise damaged
    try:
        d = json.loads(str(z["certificate"]))
    except ValueError:
        raise damaged from None
    if not (isinstance(d, dict) and set(d) == set(_CERT_TYPES)
            and all(isinstance(d[k], t) and not isinstance(d[k], bool) for k, t in _CERT_TYPES.items())):
        raise damaged
    cert = Certificate(**d)
    bad = cert.failures()
    if bad or cert.version != _version():
        why = "; ".join(bad) if bad else f"made by knorm {cert.version}, this is {_version()}"
        raise ValueError(f"prepared: {str(path)!r} has a certificate that is refused ({why}): prepare it again, "
                         "or knorm prepare --verify")
    certified = Certified(cert, z["states"], z["state_bases"], _moments(z, body, cert.pool, path, damaged))
    if not check_states(certified, rnd):
        raise ValueError(f"prepared: {str(path)!r} is damaged (its stationary states are not points of K)")
    return certified


def _row_ok(name: Any, r: Any, arrays: dict[str, NDArray[np.float64]], n: int) -> bool:
    """A kept row of recommend: finite rms·ε > 0, stderr·ε >= 0, its flags and texts, and the
    parameters its mechanism is rebuilt from (a hierarchy's branching; p-Identity's p with a
    Θ of shape (p, n), finite, >= 0; NIM's level count)."""
    if not (isinstance(name, str) and isinstance(r, dict) and isinstance(r.get("unit_rms"), float)
            and 0.0 < r["unit_rms"] < np.inf and isinstance(r.get("unit_stderr"), float)
            and 0.0 <= r["unit_stderr"] < np.inf and isinstance(r.get("exact"), bool)
            and isinstance(r.get("method"), str) and isinstance(r.get("notion"), str)
            and isinstance(r.get("params"), dict)):
        return False
    params = r["params"]
    if name == "hierarchical" and params:
        return is_int(params.get("branching")) and params["branching"] >= 2 and isinstance(params.get("root"), bool)
    if name == "p-identity" and params:
        theta = arrays.get("p-identity.theta")
        return (is_int(params.get("p")) and params["p"] >= 1 and theta is not None and theta.shape == (params["p"], n)
                and bool(np.all(theta >= 0.0)))
    if name == "nim" and params:
        return is_int(params.get("levels")) and params["levels"] >= 1
    return True


def _rows(z: dict[str, NDArray[Any]], path: Path, n: int) -> tuple[dict[str, Any], dict[str, NDArray[np.float64]]]:
    """The saved rows of recommend (checked: :func:`_row_ok`) and their arrays (real, finite)."""
    damaged = ValueError(f"prepared: {str(path)!r} is damaged (its recommend rows cannot be read)")
    saved = {k[len(ROW_ARRAY):]: v for k, v in z.items() if k.startswith(ROW_ARRAY)}
    if "recommend_rows" not in z:
        if saved:
            raise damaged
        return {}, {}
    if not all(v.dtype.kind in "iuf" and np.all(np.isfinite(v)) for v in saved.values()):
        raise damaged
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in saved.items()}
    try:
        rows = json.loads(str(z["recommend_rows"]))
        ok = (isinstance(rows, dict) and isinstance(rows.get("options"), dict) and isinstance(rows.get("rows"), dict)
              and all(_row_ok(k, r, arrays, n) for k, r in rows["rows"].items()))
    except (ValueError, TypeError):
        raise damaged from None
    if not ok:
        raise damaged
    return rows, arrays


def check_prepared(prepared: Any, F: Any, name: str = "prepared", fingerprint: str | None = None) -> SymmetricHull:
    """The body of ``prepared`` for the validated ``F``; a TypeError if it is not a
    :class:`PreparedWorkload`, a ValueError if it was made for another F."""
    if not isinstance(prepared, PreparedWorkload):
        raise TypeError(f"{name} must be None or a knorm.PreparedWorkload (knorm.prepare / knorm.load_prepared), "
                        f"got {type(prepared).__name__}")
    return prepared.body_for(F, name, fingerprint)

