"""Figures of chains, errors and spectra (matplotlib: ``pip install 'knorm[plot]'``).

Chain plots take a :class:`~knorm.Sampler` after a run (its :meth:`~knorm.Sampler.get_chain`)
or an array ``(chains, draws, dim)``:

* :func:`trace` -- one coordinate against the draw index, a line per chain;
* :func:`rank` -- ranks of one coordinate in the pooled draws, a histogram per chain
  (flat when the chains agree);
* :func:`autocorrelation` -- autocorrelation against lag, a line per coordinate;
* :func:`ess_rhat` -- bulk ESS and split R-hat per coordinate with the sampler's targets;
* :func:`chains` -- the four above in one figure.

Data-independent figures of a workload F: :func:`error_vs_epsilon` (expected ℓ₂ error of
each mechanism, exact or Monte Carlo) and :func:`nim_spectrum` (eigenvalues of
Cov(Uniform K) per NIM level). :func:`table3_figure` and :func:`scaling_figure` draw the
rows of :func:`knorm.experiments.table3` and :func:`knorm.experiments.scaling`.

Every function returns the matplotlib ``Figure``. ``ax``: draw into these axes (the
figure is then theirs); otherwise a new ``Figure`` is made without pyplot (no global
state, any backend). ``path``: also save the figure there (written atomically; the
format follows the suffix).
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ._io import atomic_write
from ._rng import as_generator
from ._validate import as_list, as_real_array, check_memory, check_path, is_int, positive_int, short_repr
from .diagnostics import _as_chains, _autocov, autocorrelation_time, ess, rhat

__all__ = ["trace", "rank", "autocorrelation", "ess_rhat", "chains", "expected_errors", "error_vs_epsilon",
           "nim_spectrum", "table3_figure", "scaling_figure", "save"]

RHAT_TARGET = 1.01  # the sampler's certification (knorm.walks.sampler.Sampler)
DPI = 110
MECHANISM_LABELS = {"laplace": "Laplace Δ₁/ε", "gaussian": "Gaussian (ε, δ)", "knorm": "K-norm", "nim": "NIM"}
WALK_COLOURS = {"billiard": "C0", "hit_and_run": "C1", "coordinate": "C2", "ball": "C3"}


def _figure(nrows=1, ncols=1, size=(6.0, 3.6), **kw):
    """A new Figure (no pyplot) with an ``nrows × ncols`` array of axes."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("knorm.plots needs matplotlib, which is not installed: pip install 'knorm[plot]'") from None
    fig = Figure(figsize=size, layout="constrained")
    return fig, np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False, **kw))


def _axes(ax, count, size):
    """(figure, flat list of ``count`` axes): the given ``ax`` (one Axes, or a sequence) or new ones."""
    if ax is None:
        fig, axes = _figure(1, count, size)
        return fig, list(axes.ravel())
    from matplotlib.axes import Axes  # matplotlib is loaded already: ax holds its Axes

    axes = list(np.ravel(np.asarray(ax, dtype=object)))
    if len(axes) != count:
        raise ValueError(f"ax must hold {count} Axes for this plot, got {len(axes)}")
    odd = [type(a).__name__ for a in axes if not isinstance(a, Axes)]
    if odd:
        raise TypeError(f"ax must be matplotlib Axes (or a sequence of {count}), got {', '.join(odd)}")
    return axes[0].figure, axes


def save(fig, path):
    """Save ``fig`` to ``path`` (unless None) atomically, in the format of its suffix; returns ``fig``."""
    if not callable(getattr(fig, "savefig", None)):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if path is not None:
        path = Path(check_path("path", path))
        fmt = path.suffix.lstrip(".").lower() or None
        atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=DPI))
    return fig


def _chain_array(source):
    """Records ``(chains, draws, dim)`` of a Sampler (after a run) or of an array (a 2-d
    array is one coordinate); at least 4 draws per chain, finite."""
    if hasattr(source, "get_chain"):
        return source.get_chain()
    a = _as_chains(source)
    return a[..., None] if a.ndim == 2 else a


def _coord(z, coord, name="coord"):
    if not is_int(coord) or not 0 <= coord < z.shape[2]:
        raise ValueError(f"{name} must be an integer in [0, {z.shape[2]}), got {short_repr(coord)}")
    return int(coord)


def _coords(z, coords, default=4):
    if coords is None:
        return list(range(min(default, z.shape[2])))
    ks = [_coord(z, c, "coords") for c in np.atleast_1d(np.asarray(coords, dtype=object)).ravel().tolist()]
    if not ks:
        raise ValueError("coords must name at least one coordinate (None: the first 4)")
    return ks


# -- chains -----------------------------------------------------------------------------------

def trace(source, coord=0, *, ax=None, path=None):
    """Trace plot: coordinate ``coord`` of every chain against the draw index."""
    z = _chain_array(source)
    k = _coord(z, coord)
    fig, (a,) = _axes(ax, 1, (6.0, 3.0))
    for c in range(z.shape[0]):
        a.plot(z[c, :, k], lw=0.7, alpha=0.8, color=f"C{c % 10}", label=f"chain {c}")
    a.set_xlabel("draw (record) in chain")
    a.set_ylabel(f"z[{k}]")
    a.set_title(f"trace of z[{k}], {z.shape[0]} chains × {z.shape[1]} draws")
    if z.shape[0] <= 10:
        a.legend(fontsize=7, ncol=min(z.shape[0], 5), loc="upper right")
    return save(fig, path)


def rank(source, coord=0, *, bins=20, ax=None, path=None):
    """Rank plot: ranks of ``coord`` among all draws, a histogram per chain.

    When the chains sample the same law the ranks of each chain are uniform, so each
    bin holds ``Binomial(draws, 1/bins)`` draws: mean ``draws/bins`` (dashed) and the
    band ±2 sd, ``sd = √(draws·p(1−p))``, p = 1/bins.
    """
    z = _chain_array(source)
    k = _coord(z, coord)
    bins = positive_int("bins", bins)
    check_memory("bins", bins, 8 * 4 * bins)  # edges, counts and the drawn steps per chain
    m, n = z.shape[:2]
    from scipy.stats import rankdata

    r = rankdata(z[:, :, k], axis=None).reshape(m, n)
    edges = np.linspace(0.5, m * n + 0.5, bins + 1)
    fig, (a,) = _axes(ax, 1, (6.0, 3.0))
    p = 1.0 / bins
    mean, sd = n * p, np.sqrt(n * p * (1 - p))
    a.axhspan(mean - 2 * sd, mean + 2 * sd, color="0.85", label="±2 sd if uniform")
    a.axhline(mean, color="0.3", ls="--", lw=1)
    for c in range(m):
        counts, _ = np.histogram(r[c], edges)
        a.stairs(counts, edges, color=f"C{c % 10}", lw=1)
    a.set_xlabel("rank among all draws")
    a.set_ylabel("draws per bin")
    a.set_title(f"rank plot of z[{k}] ({m} chains; flat = chains agree)")
    a.legend(fontsize=7, loc="upper right")
    return save(fig, path)


def autocorrelation(source, coords=None, *, max_lag=None, ax=None, path=None):
    """Autocorrelation against lag (mean of the chains' autocovariances over their mean
    variance), a line per coordinate (default the first 4); legend: τ per draw
    (:func:`knorm.diagnostics.autocorrelation_time`)."""
    z = _chain_array(source)
    ks = _coords(z, coords)
    n = z.shape[1]
    max_lag = min(n - 1, 50) if max_lag is None else min(positive_int("max_lag", max_lag), n - 1)
    fig, (a,) = _axes(ax, 1, (6.0, 3.0))
    lags = np.arange(max_lag + 1)
    for k in ks:
        acov = _autocov(z[:, :, k]).mean(axis=0)
        acf = acov / acov[0] if acov[0] > 0 else np.zeros_like(acov)
        tau = float(np.atleast_1d(autocorrelation_time(z[:, :, k]))[0])
        a.plot(lags, acf[: max_lag + 1], marker=".", ms=3, lw=1, label=f"z[{k}] (τ = {tau:.2f})")
    a.axhline(0.0, color="0.3", lw=0.8)
    a.set_xlabel("lag (draws)")
    a.set_ylabel("autocorrelation")
    a.set_title(f"autocorrelation, {z.shape[0]} chains")
    a.legend(fontsize=7)
    return save(fig, path)


def ess_rhat(source, *, ax=None, path=None):
    """Bulk ESS (left) and split R-hat (right) per coordinate, with the sampler's targets:
    ESS ≥ draws/2 and R-hat < 1.01 (:class:`~knorm.Sampler`'s certification)."""
    z = _chain_array(source)
    e, rh = np.atleast_1d(ess(z)), np.atleast_1d(rhat(z))
    fig, (a, b) = _axes(ax, 2, (8.0, 3.0))
    idx = np.arange(z.shape[2])
    total = z.shape[0] * z.shape[1]
    a.bar(idx, e, color="C0")
    a.axhline(total / 2, color="C3", ls="--", label=f"target {total / 2:g} (draws/2)")
    a.set_ylim(0, 1.3 * max(float(np.max(e)), total / 2))  # room for the legend above the bars
    a.set_ylabel("bulk ESS")
    a.set_title(f"bulk ESS of {total} draws")
    b.plot(idx, rh, "o", color="C0", ms=4)
    b.axhline(RHAT_TARGET, color="C3", ls="--", label=f"target < {RHAT_TARGET}")
    b.axhline(1.0, color="0.5", lw=0.8)
    finite = rh[np.isfinite(rh)]
    lo, hi = min(1.0, *finite), max(RHAT_TARGET, *finite)
    b.set_ylim(lo - 0.1 * (hi - lo), hi + 0.3 * (hi - lo))  # room for the legend above the target
    b.set_ylabel("split R-hat")
    b.set_title("rank-normalised split R-hat" + (f" ({len(rh) - len(finite)} infinite)" if len(finite) < len(rh)
                                                 else ""))
    for ax_ in (a, b):
        ax_.set_xlabel("coordinate")
        ax_.legend(fontsize=7, loc="upper right")
        if len(idx) <= 20:
            ax_.set_xticks(idx)
    return save(fig, path)


def chains(source, coord=0, *, path=None):
    """One figure: :func:`trace` and :func:`rank` of ``coord``, :func:`autocorrelation`
    of the first coordinates, :func:`ess_rhat` of all."""
    z = _chain_array(source)
    fig, axes = _figure(3, 2, (10.0, 8.5))
    gs = axes[0, 0].get_gridspec()
    for a in axes[0]:
        a.remove()
    top = fig.add_subplot(gs[0, :])
    trace(z, coord, ax=top)
    rank(z, coord, ax=axes[1, 0])
    autocorrelation(z, ax=axes[1, 1])
    ess_rhat(z, ax=axes[2])
    return save(fig, path)


# -- errors and spectra of a workload -------------------------------------------------------------

def expected_errors(F, epsilons, *, mechanisms=("laplace", "knorm", "nim"), delta=None, n_samples=2000,
                    walk="billiard", rng=0, workers=None):
    """``{mechanism: [ErrorEstimate per ε]}``: each mechanism's own ``expected_error()``,
    built afresh at every ε (exact for the Gaussian, Monte Carlo otherwise).

    These depend on F alone, never on data, and the mechanisms release nothing, so a
    seeded ``rng`` (default 0, reproducible figures) costs no privacy. ``"gaussian"``
    needs ``delta``. K-norm reuses one body (and its rounding) across ε. ``workers`` bounds the
    sampler threads of K-norm and NIM (None: one per CPU the process may use).
    """
    from .body import SymmetricHull
    from .mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
    from .mechanisms._base import check_delta, check_epsilon, check_n_samples
    from .walks.chains import check_workers, walk_id

    eps = [check_epsilon(e) for e in np.atleast_1d(as_real_array("epsilons", epsilons)).tolist()]
    if not eps:
        raise ValueError("epsilons must hold at least one ε")
    names = [mechanisms] if isinstance(mechanisms, str) else as_list("mechanisms", mechanisms, "a list of names")
    if not names or any(not isinstance(m, str) or m not in MECHANISM_LABELS for m in names):
        raise ValueError(f"mechanisms must be among {sorted(MECHANISM_LABELS)}, got {short_repr(mechanisms)}")
    if "gaussian" in names or delta is not None:  # a delta given is checked even where unused
        delta = check_delta(delta)
    walk_id(walk)
    n_samples = check_n_samples(n_samples)
    options = {"workers": check_workers(workers)}
    gen = as_generator(rng)
    body = SymmetricHull(F) if "knorm" in names else None
    out = {}
    for name in names:
        row = []
        for e in eps:
            g = gen.spawn(1)[0]
            if name == "laplace":
                row.append(LaplaceMechanism(F, epsilon=e, rng=g).expected_error(n_samples=max(n_samples, 20_000)))
            elif name == "gaussian":
                row.append(GaussianMechanism(F, epsilon=e, delta=delta, rng=g).expected_error())
            elif name == "knorm":
                row.append(KNormMechanism(F, epsilon=e, walk=walk, rng=g, body=body,
                                          sampler_options=options).expected_error(n_samples))
            else:
                row.append(NIMechanism(F, epsilon=e, walk=walk, rng=g,
                                       sampler_options=options).expected_error(n_samples))
        out[name] = row
    out["epsilons"] = eps
    return out


def error_vs_epsilon(F=None, epsilons=(0.1, 0.3, 1.0, 3.0), *, errors=None, ax=None, path=None, **options):
    """Expected ℓ₂ error against ε per mechanism, log-log, for the workload F.

    ``errors``: the result of :func:`expected_errors` (else it is computed from F,
    ``epsilons`` and ``options``, its keywords). Error bars: ±2 standard errors of the
    Monte-Carlo estimates (none for exact values).
    """
    if errors is None:
        if F is None:
            raise ValueError("error_vs_epsilon needs F (or errors from expected_errors)")
        errors = expected_errors(F, epsilons, **options)
    elif not isinstance(errors, Mapping) or "epsilons" not in errors:
        raise TypeError(f"errors must be the dict expected_errors returns, got {type(errors).__name__}")
    eps = errors["epsilons"]
    if min(eps) < 1e-100 or max(eps) > 1e100:  # a log axis's margins would overflow a float
        raise ValueError(f"epsilons must lie within [1e-100, 1e100] to be drawn on a log axis, got "
                         f"{min(eps):.3g} … {max(eps):.3g}")
    fig, (a,) = _axes(ax, 1, (6.0, 4.0))
    for i, (name, row) in enumerate((k, v) for k, v in errors.items() if k != "epsilons"):
        y = np.array([r.value for r in row])
        se = np.array([r.stderr for r in row])
        exact = all(r.exact for r in row)
        label = MECHANISM_LABELS.get(name, name) + (" (exact)" if exact else "")
        a.errorbar(eps, y, yerr=None if exact else 2 * se, marker="o", ms=4, capsize=3, color=f"C{i}",
                   label=label)
    a.set_xscale("log")
    a.set_yscale("log")
    _plain_ticks(a.xaxis, eps)
    a.set_xlabel("ε")
    a.set_ylabel("expected ℓ₂ error E‖noise‖₂")
    a.set_title("expected error vs ε (data-independent)")
    a.legend(fontsize=8, title="error bars: ±2 SE (Monte Carlo)", title_fontsize=7)
    a.grid(True, which="both", alpha=0.3)
    return save(fig, path)


def nim_spectrum(mechanism, *, ax=None, path=None):
    """Eigenvalues of Cov(Uniform K) at each NIM level (``levels[i].eigenvalues``, descending),
    log scale, a line per level of dimension > 1."""
    if not hasattr(mechanism, "levels"):  # a NIMechanism (or anything with its levels)
        raise TypeError(f"mechanism must be a knorm.NIMechanism (its levels are plotted), got "
                        f"{type(mechanism).__name__}")
    levels = [lv for lv in mechanism.levels if lv.dim > 1 and np.all(np.isfinite(lv.eigenvalues))]
    if not levels:
        raise ValueError("mechanism has no level of dimension > 1 with eigenvalues to plot")
    fig, (a,) = _axes(ax, 1, (6.0, 3.6))
    for i, lv in enumerate(levels):
        ev = np.sort(np.asarray(lv.eigenvalues, float))[::-1]
        a.plot(np.arange(1, len(ev) + 1), ev, marker="o", ms=3, lw=1, color=f"C{i}",
               label=f"level {i} (dim {lv.dim})")
    a.set_yscale("log")
    a.set_xlabel("eigenvalue index (descending)")
    a.set_ylabel("eigenvalue of Cov(Uniform K)")
    a.set_title("NIM: spectrum per level")
    a.legend(fontsize=7)
    a.grid(True, which="both", alpha=0.3)
    return save(fig, path)


# -- the figures of the experiments ---------------------------------------------------------------

def _plain_ticks(axis, values):
    """Ticks at ``values`` with plain labels (0.1, 1, 20), no minor labels (log axes)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    vals = sorted(set(float(v) for v in values))
    axis.set_major_locator(FixedLocator(vals))
    axis.set_ticklabels([f"{v:g}" for v in vals])
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def _rows(rows, keys, source):
    """``rows`` as a list of mappings holding ``keys`` (the rows of ``source``), else a one-line
    error naming rows."""
    rows = as_list("rows", rows, f"a list of the dicts {source} returns")
    if not rows:
        raise ValueError("rows is empty: nothing to draw")
    for r in rows:
        if not isinstance(r, Mapping) or any(k not in r for k in keys):
            raise ValueError(f"rows must be dicts with the keys {list(keys)} (as {source} returns), got "
                             f"{short_repr(r)}")
    return rows


def table3_figure(rows, *, n=None, releases=None, ax=None, path=None):
    """Rows of :func:`knorm.experiments.table3`: mean ℓ₂ error against ε, a panel per d
    (``n`` records, ``releases`` per cell: for the titles).

    Bars: ±2 standard errors over the releases. The invalid baseline (Laplace with
    scale 2/ε, not ε-DP for this F) is drawn last, grey and dashed, and marked so.
    """
    rows = _rows(rows, ("d", "epsilon", "mechanism", "mean_l2_error", "stderr"), "knorm.experiments.table3")
    n, releases = positive_int("n", n, allow_none=True), positive_int("releases", releases, allow_none=True)
    ds = list(dict.fromkeys(r["d"] for r in rows))
    names = list(dict.fromkeys(r["mechanism"] for r in rows))
    invalid = [m for m in names if "not" in m]
    valid = [m for m in names if m not in invalid]
    fig, axes = _axes(ax, len(ds), (5.0 * len(ds), 4.0))
    for a, d in zip(axes, ds):
        for i, name in enumerate(valid + invalid):
            pts = [r for r in rows if r["d"] == d and r["mechanism"] == name]
            bad = name in invalid
            a.errorbar([r["epsilon"] for r in pts], [r["mean_l2_error"] for r in pts],
                       yerr=[2 * r["stderr"] for r in pts], capsize=3, ms=5, lw=1.2,
                       marker="x" if bad else "o", ls="--" if bad else "-", color="0.45" if bad else f"C{i}",
                       label=(name.replace("(not ε-DP)", "").strip() + ": NOT ε-DP (invalid)") if bad else name)
        a.set_xscale("log")
        a.set_yscale("log")
        _plain_ticks(a.xaxis, [r["epsilon"] for r in rows])
        a.set_xlabel("ε")
        a.set_ylabel("mean ℓ₂ error")
        a.set_title(f"random ±1 F, d = {d}" + (f", n = {n}" if n else ""))
        a.grid(True, which="both", alpha=0.3)
    bars = "bars: ±2 SE" + (f" over {releases} releases" if releases else " over the releases")
    axes[0].legend(fontsize=7, title=bars, title_fontsize=7)
    return save(fig, path)


def scaling_figure(rows, *, ax=None, path=None):
    """Rows of :func:`knorm.experiments.scaling`: ESS/s, pivots per step and τ (steps)
    against d. Colour: walk; line style and marker: n/d; hollow markers: runs shorter
    than 20τ (a rough ESS)."""
    rows = _rows(rows, ("d", "n", "walk", "ess_per_s", "pivots_per_step", "tau_steps"), "knorm.experiments.scaling")
    walks = list(dict.fromkeys(r["walk"] for r in rows))
    factors = sorted({r["n"] // r["d"] for r in rows})
    styles = ["-", "--", ":", "-."]
    marks = ["o", "s", "^", "D"]
    fig, axes = _axes(ax, 3, (13.0, 4.0))
    panels = [("ess_per_s", "min-coordinate ESS/s"), ("pivots_per_step", "pivots per step"),
              ("tau_steps", "τ (autocorrelation time, steps)")]
    for a, (key, label) in zip(axes, panels):
        for j, walk in enumerate(walks):
            colour = WALK_COLOURS.get(walk, f"C{4 + j}")
            for f, fac in enumerate(factors):
                pts = sorted((r for r in rows if r["walk"] == walk and r["n"] == fac * r["d"]), key=lambda r: r["d"])
                if not pts:
                    continue
                x = [r["d"] for r in pts]
                y = [float(r[key]) for r in pts]
                a.plot(x, y, styles[f % 4], color=colour, lw=1.2)
                for xi, yi, r in zip(x, y, pts):
                    ok = str(r.get("reliable", True)) not in ("False", "false", "0")
                    a.plot(xi, yi, marks[f % 4], color=colour, ms=5, mfc=colour if ok else "none")
        a.set_xscale("log")
        a.set_yscale("log")
        _plain_ticks(a.xaxis, [r["d"] for r in rows])
        a.set_xlabel("d (queries)")
        a.set_ylabel(label)
        a.set_title(label)
        a.grid(True, which="both", alpha=0.3)
    from matplotlib.lines import Line2D

    walk_handles = [Line2D([], [], color=WALK_COLOURS.get(w, f"C{4 + j}"), lw=2, label=w) for j, w in enumerate(walks)]
    fac_handles = [Line2D([], [], color="0.3", ls=styles[f % 4], marker=marks[f % 4], label=f"n = {fac}d")
                   for f, fac in enumerate(factors)]
    fac_handles.append(Line2D([], [], color="0.3", ls="", marker="o", mfc="none", label="run < 20τ"))
    axes[0].legend(handles=walk_handles, fontsize=7, title="walk", title_fontsize=7)
    axes[1].legend(handles=fac_handles, fontsize=7, title="n (columns of F)", title_fontsize=7)
    return save(fig, path)
