"""Synthetic records from released marginals (issue 29; the optional extra ``synth``).

Released marginal answers (any mechanism's) → private-pgm (PyPI ``mbi``; McKenna, Sheldon &
Miklau 2019) fits a graphical model over the declared domain to the noisy tables, each
measurement weighted by its noise scale → a synthetic table of records over that domain, and
the model's marginal tables, consistent with each other (one distribution).

Post-processing only: nothing here reads the data, so the result is covered by the release's
privacy claim, unchanged (:attr:`Synthetic.privacy`; basic composition over releases is the
caller's, as always). The synthetic records' randomness (private-pgm's rounding) is drawn from
``rng``; it carries no privacy (it never touches the data) but makes a run reproducible.

The noise scale of each measured table is ``√(mean variance of its answers / times F answers
it)``, from ``noise``: a mechanism (exact variances for Laplace, Gaussian and the residual
Gaussian; for K-norm, NIM and the other mechanisms the empirical variances of ``noise_draws``
draws of its noise, which touch no data and cost no privacy), a number (the standard deviation
of every answer), or one number per answer.

private-pgm runs on JAX, which starts threads when imported: a process pool forked afterwards in
the same process (e.g. knorm's process executors with the "fork" start method) may deadlock;
use threads or the "spawn" start method there.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._rng import as_generator
from ._validate import as_real_array, check_memory, positive_int, short_repr
from .body.hull import validate_matrix
from .body.marginal import MarginalStructure, recognise
from .privacy import PrivacyClaim

__all__ = ["synthesize", "Synthetic", "answer_variances", "NOTE"]

NOTE = "post-processing of the release (no data read): the claim is the release's, unchanged"
NOISE_DRAWS = 2000


def _mbi() -> Any:
    try:
        with warnings.catch_warnings():  # mbi warns at import that JAX runs in float32 (ample for counts here)
            warnings.simplefilter("ignore")
            import mbi
    except ImportError:
        raise ImportError("synthesize needs private-pgm: pip install 'knorm[synth]' (PyPI mbi, Python >= 3.11)") \
            from None
    return mbi


@dataclass
class Synthetic:
    """``synthesize``'s answer. ``records``: (rows, attributes) ints over the declared domain
    (column j in ``0..shape[j]−1``); ``names``, ``shape``: the domain; ``tables``: clique (names)
    → the model's marginal table, shape ``shape[clique]`` (consistent: one distribution);
    ``answers``: F's answers from those tables (F's row order); ``noise_scales``: the scale
    each measured table was weighted by; ``privacy``: the release's claim (unchanged; ``note``)."""

    records: NDArray[np.int64]
    names: tuple[str, ...]
    shape: tuple[int, ...]
    tables: dict[tuple[str, ...], NDArray[np.float64]]
    answers: NDArray[np.float64]
    noise_scales: dict[tuple[str, ...], float]
    total: float
    privacy: PrivacyClaim | None
    note: str = NOTE
    model: Any = field(default=None, repr=False)

    def record_tables(self) -> dict[tuple[str, ...], NDArray[np.float64]]:
        """The synthetic records' own marginal tables (counts), same cliques as ``tables``."""
        out = {}
        for clique in self.tables:
            idx = [self.names.index(a) for a in clique]
            sizes = [self.shape[i] for i in idx]
            flat = np.ravel_multi_index(self.records[:, idx].T, sizes) if idx else np.zeros(len(self.records), int)
            out[clique] = np.bincount(flat, minlength=math.prod(sizes)).reshape(sizes).astype(np.float64)
        return out

    def dataframe(self, categories: dict[str, Sequence[Any]] | None = None) -> Any:
        """The records as a pandas DataFrame (``categories``: name → the labels of its values)."""
        import pandas as pd

        cols = {}
        for j, name in enumerate(self.names):
            col = self.records[:, j]
            if categories and name in categories:
                labels = list(categories[name])
                if len(labels) != self.shape[j]:
                    raise ValueError(f"categories[{name!r}] must have {self.shape[j]} labels, got {len(labels)}")
                col = pd.Categorical.from_codes(col, categories=labels)
            cols[name] = col
        return pd.DataFrame(cols)


def answer_variances(mechanism: Any, d: int, noise_draws: int = NOISE_DRAWS) -> NDArray[np.float64]:
    """Each answer's noise variance: exact for Laplace (2b²), Gaussian (σ²) and the residual Gaussian
    (:meth:`~knorm.mechanisms.residual.ResidualGaussianMechanism.table_variances`); for K-norm
    ``(k+1)(k+2)/ε²·E z_i²`` from its exact or certified-pool covariance
    (:meth:`~knorm.mechanisms.KNormMechanism.noise_variances`: no draws); otherwise the
    empirical variance of ``noise_draws`` draws of ``mechanism.sample_noise`` (no data, no privacy)."""
    from .mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism
    from .mechanisms.residual import ResidualGaussianMechanism

    d, noise_draws = positive_int("d", d), positive_int("noise_draws", noise_draws)
    check_memory("d", d, 8 * d)
    if isinstance(mechanism, LaplaceMechanism):
        return np.full(d, 2.0 * mechanism.scale ** 2)
    if isinstance(mechanism, GaussianMechanism):
        return np.full(d, mechanism.sigma ** 2)
    if isinstance(mechanism, ResidualGaussianMechanism):
        per = mechanism.table_variances()
        s = mechanism._m.structure
        cell = np.zeros(s.rows)
        i = 0
        for c in s.cliques:
            size = math.prod(s.shape[a] for a in c)
            cell[i:i + size] = per.get(c, 0.0)
            i += size
        rows = mechanism._m.rows
        return np.where(rows >= 0, cell[np.maximum(rows, 0)], 0.0)
    if isinstance(mechanism, KNormMechanism) and mechanism.d == d:
        known = mechanism.noise_variances()
        if known is not None:
            return known
    if not callable(getattr(mechanism, "sample_noise", None)):
        raise ValueError(f"noise: {type(mechanism).__name__} has no noise scale (give a mechanism with sample_noise, "
                         "a number or one number per answer)")
    if noise_draws < 2:
        raise ValueError(f"noise_draws must be at least 2, got {noise_draws}")
    z = np.atleast_2d(mechanism.sample_noise(noise_draws))
    if z.shape[1] != d:
        raise ValueError(f"noise: the mechanism's answers have {z.shape[1]} entries, F has {d} rows")
    return np.asarray(z.var(axis=0, ddof=1), dtype=np.float64)


def _noise_variances(noise: Any, d: int, noise_draws: int) -> NDArray[np.float64]:
    if isinstance(noise, (int, float, np.integer, np.floating)) and not isinstance(noise, bool):
        if not (0 < float(noise) < np.inf):
            raise ValueError(f"noise must be a positive finite standard deviation, got {short_repr(noise)}")
        return np.full(d, float(noise) ** 2)
    if isinstance(noise, (list, tuple, np.ndarray)):
        arr = as_real_array("noise", noise).astype(np.float64)
        if arr.shape != (d,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(f"noise must be {d} positive finite standard deviations (one per answer), got shape "
                             f"{arr.shape}")
        return arr ** 2
    if noise is None:
        raise ValueError("noise: give the release's mechanism, a standard deviation, or one per answer")
    return answer_variances(noise, d, noise_draws)


def _declared(match: Any, shape: Sequence[int] | None, n: int) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """The declared shape and each recognised clique in its attributes. The recognised attributes
    are runs of declared ones (recognition merges adjacent attributes always measured together;
    a table's C-order layout is the same either way), so each recognised boundary must be one."""
    found = match.structure.shape
    if shape is None:
        return found, [tuple(c) for c in match.structure.cliques]
    try:
        decl = tuple(int(s) for s in shape)
        ok = all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1 for s in shape) and decl
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"shape must be a non-empty sequence of positive integers, got {short_repr(shape)}")
    if math.prod(decl) != n:
        raise ValueError(f"shape: {decl} holds {math.prod(decl)} cells, F has {n} columns")
    bounds = np.cumprod((1,) + decl[::-1])  # strides from the innermost attribute
    runs, j = [], len(decl)
    for size in found[::-1]:  # each recognised attribute: the declared attributes it spans
        stride = math.prod(decl[j:])
        k = j
        while k > 0 and math.prod(decl[k - 1:j]) <= size:
            k -= 1
            if math.prod(decl[k:j]) == size:
                break
        if math.prod(decl[k:j]) != size or int(stride * size) not in bounds:
            raise ValueError(f"shape: F's tables do not fit the declared domain {decl} (F's attributes have sizes "
                             f"{found})")
        runs.append(tuple(range(k, j)))
        j = k
    runs = runs[::-1]
    return decl, [tuple(a for r in c for a in runs[r]) for c in match.structure.cliques]


def synthesize(F: ArrayLike, answers: ArrayLike, *, noise: Any, shape: Sequence[int] | None = None,
               names: Sequence[str] | None = None, rows: int | None = None, iters: int = 1000,
               noise_draws: int = NOISE_DRAWS, privacy: PrivacyClaim | None = None,
               rng: np.random.Generator | int | None = None) -> Synthetic:
    """Synthetic records and consistent marginal tables from released marginal ``answers`` of ``F``.

    ``F``: the released workload, marginal tables over a product domain (recognised from its
    entries, rows in any order, repeated or partial tables allowed), ``answers`` its noisy answers
    (d,). ``shape``: the declared attribute sizes (default: as recognised from F); F's tables must
    fit it. ``names``: attribute names (default ``a0, a1, …``). ``noise``: the release's mechanism,
    or a standard deviation, or one per answer (module docstring). private-pgm's mirror descent
    (``iters`` steps) fits a graphical model minimising ``Σ_tables ‖(table − y)/scale‖²``; ``rows``
    synthetic records (default: its estimated total, rounded) are drawn with ``rng``.
    ``privacy``: the release's claim (default: ``noise.privacy`` for a mechanism), returned as is:
    this is post-processing.
    """
    mbi = _mbi()
    F = validate_matrix(F)
    d, n = F.shape
    y = as_real_array("answers", answers).astype(np.float64)
    if y.ndim == 2 and y.shape[0] == 1:
        y = y[0]
    if y.shape != (d,) or not np.all(np.isfinite(y)):
        raise ValueError(f"answers must be {d} finite numbers (one per row of F), got shape {y.shape}")
    match = recognise(F)
    if match is None:
        raise ValueError("F: not a marginal workload (rows must be marginal-table indicators of one value, any "
                         "order); synthesize needs marginal tables")
    decl, cliques = _declared(match, shape, n)
    k = len(decl)
    if names is None:
        names_t = tuple(f"a{i}" for i in range(k))
    else:
        names_t = tuple(names)
        if len(names_t) != k or not all(isinstance(s, str) and s for s in names_t) or len(set(names_t)) != k:
            raise ValueError(f"names must be {k} distinct non-empty strings (one per attribute), got "
                             f"{short_repr(names)}")
    rows = positive_int("rows", rows, allow_none=True)
    iters = positive_int("iters", iters)
    gen = as_generator(rng)
    var = _noise_variances(noise, d, noise_draws)
    if privacy is None:
        privacy = getattr(noise, "privacy", None)
    if privacy is not None and not isinstance(privacy, PrivacyClaim):
        raise ValueError(f"privacy must be a knorm PrivacyClaim or None, got {type(privacy).__name__}")

    # each table: the mean of its answers (repeated rows averaged, partial tables' cells left out)
    s: MarginalStructure = match.structure
    offs = np.cumsum([0] + [math.prod(s.shape[a] for a in c) for c in s.cliques])
    live = match.rows >= 0
    counts = np.bincount(match.rows[live], minlength=s.rows).astype(float)
    sums = np.bincount(match.rows[live], weights=y[live] / match.scale, minlength=s.rows)
    vsum = np.bincount(match.rows[live], weights=var[live] / match.scale ** 2, minlength=s.rows)
    measurements, scales = [], {}
    for q, c in enumerate(cliques):
        sl = slice(offs[q], offs[q + 1])
        cnt = counts[sl]
        if not cnt.any():
            continue
        clique = tuple(names_t[a] for a in c)
        seen = cnt > 0
        ints = tuple(int(a) for a in c)  # private-pgm's attributes are 0..k−1: a set of ints iterates in the
        # same order in every process (strings' hash order varies), so seeded records are reproducible
        scale = float(np.sqrt(np.mean(vsum[sl][seen] / cnt[seen] ** 2)))  # √(mean var / times answered)
        table = np.where(seen, sums[sl] / np.maximum(cnt, 1), 0.0)
        if seen.all():
            query = mbi.LinearMeasurement(table, ints, stddev=scale)
        else:  # a partial table: only its answered cells are measured
            idx = np.flatnonzero(seen)
            query = mbi.LinearMeasurement(table[idx], ints, stddev=scale,
                                          query=lambda f, idx=idx: f.datavector()[idx])
        measurements.append(query)
        scales[clique] = scale
    domain = mbi.Domain(tuple(range(k)), decl)
    model = mbi.estimation.MirrorDescent().estimate(domain, measurements, iters=iters)
    tables = {}
    for q, c in enumerate(cliques):
        if counts[offs[q]:offs[q + 1]].any():
            clique = tuple(names_t[a] for a in c)
            ints = tuple(int(a) for a in c)
            tables[clique] = np.asarray(model.project(ints).datavector(flatten=False), dtype=np.float64).reshape(
                tuple(decl[a] for a in c))
    # F's answers from the model's tables (F = scale·M[rows])
    cell = np.zeros(s.rows)
    for q, c in enumerate(cliques):
        clique = tuple(names_t[a] for a in c)
        if clique in tables:
            cell[offs[q]:offs[q + 1]] = tables[clique].reshape(-1)
    fitted = np.where(live, cell[np.maximum(match.rows, 0)] * match.scale, 0.0)
    total = float(model.total)
    m = rows if rows is not None else max(1, int(round(total)))
    state = np.random.get_state()  # private-pgm rounds with numpy's global generator: seeded from rng, restored
    try:
        np.random.seed(int(gen.integers(2**32)))
        data = model.synthetic_data(m).to_dict()
    finally:
        np.random.set_state(state)
    records = np.stack([np.asarray(data[a], dtype=np.int64) for a in range(k)], axis=1)
    records = records[gen.permutation(len(records))]  # private-pgm emits them grouped: in random order
    return Synthetic(records, names_t, decl, tables, fitted, scales, total, privacy, NOTE, model)
