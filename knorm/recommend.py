"""Which mechanism for a workload? ``recommend`` compares them all from F alone (issue 10).

Every row of the table is the same measure of the noise on the released answers
``a ∈ R^d``: the total root-mean-squared error

    rms = √E‖a − Fx‖₂²     (and per query: rms/√d, HDMM's "per-query RMSE")

which never depends on x. Exact where a formula exists:

* Laplace: ``E‖·‖₂² = 2d(Δ₁/ε)²``; Gaussian: ``dσ²``;
* with δ, the optimal Gaussian strategies (:mod:`knorm.mechanisms.residual`, all ``c/μ`` with
  μ = 1/σ₁(ε, δ) the analytic calibration's GDP parameter): ``gaussian-marginal`` (only for a
  marginal workload, found from F's entries: ResidualPlanner's ``scale·Σ_S √(v_S p_S)/μ``) and
  ``gaussian-svd`` (any F: ``√(max diag G^½·tr G^½)/μ``, the SVD bound where G^½'s diagonal is
  constant); and ``knorm_wins_below``, the δ under which K-norm has less error than all of them;
* strategies (identity, hierarchical, p-identity, and on a product domain Kronecker
  p-identity): ``2(Δ₁(A)/ε)²‖F A⁺‖_F²``, from FᵀF alone (so also for an implicit workload of
  :mod:`knorm.implicit`, on which the rows needing W's entries are skipped);
* K-norm: ``(k+1)(k+2)/ε² · E‖z‖₂²``, z ~ Uniform(K), exact when K has exact structure
  (``tr Cov(Uniform K)``), else Monte Carlo over uniform draws with its standard error;
* NIM: ``Σ_i c_i/ε_i²`` (its plan's prediction) when every level's covariance is exact,
  else Monte Carlo over its noise with its standard error.

The Monte Carlo of the table uses the fixed seed ``mc_seed`` (reproducible; it depends on
F only and releases nothing, so it costs no privacy). The chosen mechanism
(``Recommendation.mechanism``) is built with the caller's ``rng`` (None is OS entropy,
private; an int a reproducible run that is NOT private): the exact rows' mechanisms draw
nothing to fill the table (the least-error searched strategy's is kept as built, the O(dn)
ones are built again); K-norm and NIM are built afresh (the same body; NIM the same plan).

A prepared workload (``prepared=``, :func:`knorm.prepare`) keeps the table: every pure ε-DP
row scales exactly as 1/ε (the strategy searches, the body, the NIM plan and the Monte
Carlo draws are functions of F and fixed seeds), so recommend stores ``rms·ε`` and
``stderr·ε`` of each row it computes in the prepared workload (with what rebuilding the
chosen mechanism needs: a hierarchy's branching, a searched p-Identity's Θ), and a later
call with it — any ε, the same ``n_samples``, ``walk`` and ``mc_seed`` — divides them by
its ε instead of computing the row again (the row's method says "prepared"). Gaussian
rows (which depend on δ) are always computed; ``PreparedWorkload.save`` writes the rows.

Cost: before a row runs, its time and memory are estimated from the shapes (:func:`row_cost`:
flop counts at ``FLOP_RATE``; MCMC work at ``MCMC_STEP``); rows run cheapest first, a row
whose memory estimate exceeds half the physical memory is skipped with that
reason, and with ``budget_s`` a row whose estimate exceeds the time left is dropped
(``Recommendation.dropped`` says which and why). Every computed row records its measured
``seconds``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
import time
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._blas import on_one_blas_thread
from ._progress import as_progress
from ._rng import as_generator
from ._validate import as_list, check_flag, check_memory, check_options, is_int, memory_limit, positive_int, short_repr
from .body.hull import validate_matrix
from .mechanisms import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism,
                         LaplaceMechanism, NIMechanism, PIdentityMechanism)
from .mechanisms._base import (CHUNK_BYTES, rms_from_draws, check_accountant, check_delta, check_epsilon, check_n_samples,
                               finite_real, in_float_range, scaled)
from .mechanisms.knorm_mechanism import check_sampler_options
from .walks.certify import known_moments
from .mechanisms.residual import ResidualGaussianMechanism, SVDGaussianMechanism, gaussian_mu, marginal_plan
from .mechanisms._p_identity import _check_starts, _factor_pays
from .mechanisms.strategy import KroneckerHierarchicalMechanism, KroneckerPIdentityMechanism
from .body.marginal import MarginalMatch
from .body.marginal_ops import ROW_CHUNK, dense_marginal
from .implicit import ImplicitWorkload, from_marginal_match, from_matrix
from .walks.chains import check_workers, walk_id
from .privacy import gdp_delta
from .walks import prepared as _prepared
from .walks.prepared import PreparedWorkload, body_of, check_prepared

__all__ = ["recommend", "Recommendation", "ErrorRow", "CANDIDATES", "row_cost", "knorm_crossover_delta"]

# the order also breaks ties (within TIE of each other): the simpler, exact mechanism first
CANDIDATES = ("laplace", "gaussian", "gaussian-marginal", "gaussian-svd", "identity", "hierarchical", "p-identity", "kron-hierarchical", "kron-p-identity",
              "knorm", "nim")
# rows that need W's entries (an implicit workload skips them) and the one for product domains only
NEED_W = ("laplace", "gaussian", "gaussian-marginal", "gaussian-svd", "knorm", "nim")
# the (ε, δ)-DP rows (computed only with delta; never kept in a prepared workload: they depend on δ)
GAUSSIAN = ("gaussian", "gaussian-marginal", "gaussian-svd")
PRODUCT_ONLY = ("kron-hierarchical", "kron-p-identity")
# exact rows whose mechanism searches its strategy: the least-error one is kept for the answer
SEARCHED = ("hierarchical", "p-identity", "kron-hierarchical", "kron-p-identity")
TIE = 1e-6  # relative: rows this close are equal (K-norm of an injective F *is* the identity strategy)
MECHANISM_OPTIONS = ("walk", "bank_size", "sampler_options", "accept_uncertified")
# the cost model of the estimates (one core): dense linear algebra at FLOP_RATE flop/s; an MCMC
# estimate of E‖z‖² from m uniform draws in dimension r with n generators ≈ m·r²·n·MCMC_STEP s
# (about r billiard steps per released draw, each an O(r·n) oracle update; fitted on width-16
# ranges over 128 cells, random ±1 40×200 and 2-way marginals of 8 binary attributes)
FLOP_RATE = 5e9
MCMC_STEP = 5e-9
P_IDENTITY_MAXITER = 500  # PIdentityMechanism's default


@dataclass(frozen=True)
class ErrorRow:
    """One mechanism's ``rms = √E‖noise‖₂²`` on the answers (``None`` when it was not computed:
    ``skipped`` says why); ``stderr`` 0 for an exact value; ``notion`` "pure ε-DP" or "(ε, δ)-DP"."""

    mechanism: str
    rms: float | None
    stderr: float | None
    exact: bool
    method: str
    notion: str
    d: int
    skipped: str | None = None
    seconds: float | None = None

    @property
    def per_query_rmse(self) -> float | None:
        """``√(E‖noise‖₂²/d)``."""
        return None if self.rms is None else self.rms / np.sqrt(self.d)

    @property
    def per_query_stderr(self) -> float | None:
        return None if self.stderr is None else self.stderr / np.sqrt(self.d)

    def as_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "rms": self.rms, "stderr": self.stderr,
                "per_query_rmse": self.per_query_rmse, "exact": self.exact, "method": self.method,
                "notion": self.notion, "skipped": self.skipped, "seconds": self.seconds}

    def __str__(self) -> str:
        if self.rms is None:
            return f"{self.mechanism}: skipped ({self.skipped})"
        se = "" if self.exact else f" ± {self.stderr:.2g}"
        return f"{self.mechanism}: {self.rms:.6g}{se} ({self.method})"


@dataclass
class Recommendation:
    """``recommend``'s answer: ``table`` (name → :class:`ErrorRow`), ``best`` (the name of the
    least-error row), ``mechanism`` (a ready mechanism for it, built with the caller's rng);
    ``dropped``: rows not computed for lack of time (``budget_s``) or memory, name → why;
    ``knorm_wins_below``: with δ, the largest δ at which K-norm (pure ε-DP) still has less error
    than every Gaussian row of the table at this ε (:func:`knorm_crossover_delta`), else None."""

    table: dict[str, ErrorRow]
    best: str
    mechanism: Any
    epsilon: float
    delta: float | None
    d: int
    n: int
    reason: str
    dropped: dict[str, str] = field(default_factory=dict)
    budget_s: float | None = None
    knorm_wins_below: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"best": self.best, "reason": self.reason, "epsilon": self.epsilon, "delta": self.delta,
                "measure": "rms = √E‖noise‖₂² on the d answers (per query: rms/√d)",
                "budget_s": self.budget_s, "dropped": dict(self.dropped),
                "knorm_wins_below_delta": self.knorm_wins_below,
                "table": {k: r.as_dict() for k, r in self.table.items()}}

    def __str__(self) -> str:
        head = f"expected error at ε = {self.epsilon:g}" + (f", δ = {self.delta:g}" if self.delta else "")
        lines = [f"{head} ({self.d} queries, {self.n} cells); rms = √E‖noise‖₂² on the answers, "
                 "per query = rms/√d:",
                 f"  {'mechanism':17s} {'rms':>12s} {'± SE':>9s} {'per query':>11s}  notion       how"]
        for name, r in self.table.items():
            mark = "*" if name == self.best else " "
            if r.rms is None:
                lines.append(f"{mark} {name:17s} {'—':>12s} {'':>9s} {'—':>11s}  {r.notion:12s} "
                             f"skipped: {r.skipped}")
                continue
            se = "exact" if r.exact else f"{r.stderr:.2g}"
            lines.append(f"{mark} {name:17s} {r.rms:12.5g} {se:>9s} {r.per_query_rmse:11.5g}  {r.notion:12s} "
                         f"{r.method}")
        if self.knorm_wins_below is not None:
            approx = "" if self.table["knorm"].exact else " (K-norm's row is Monte Carlo: approximate)"
            lines.append(f"K-norm (pure ε-DP) has less error than every Gaussian row at ε = {self.epsilon:g} for "
                         f"δ < {self.knorm_wins_below:.3g}{approx}")
        lines.append(f"recommended: {self.best} ({self.reason})")
        return "\n".join(lines)


def _check_candidates(candidates, delta, product):
    """The rows to compute, in CANDIDATES order; the Kronecker row only on a product domain."""
    if candidates is None:
        names = [c for c in CANDIDATES if c not in GAUSSIAN or delta is not None]
    else:
        names = [candidates] if isinstance(candidates, str) else as_list("candidates", candidates, "a list of names")
        bad = [c for c in names if not isinstance(c, str) or c not in CANDIDATES]
        if bad or not names:
            raise ValueError(f"candidates must be a non-empty list from {list(CANDIDATES)}, got "
                             f"{short_repr(candidates)}")
        gauss = [c for c in names if c in GAUSSIAN]
        if gauss and delta is None:
            raise ValueError(f"candidates: {', '.join(repr(c) for c in gauss)} need delta (they are (ε, δ)-DP)")
    out = [c for c in CANDIDATES if c in names and (product or c not in PRODUCT_ONLY)]
    if not out:
        raise ValueError(f"candidates: {names} hold only rows for a product domain (an implicit workload with two "
                         "or more attributes)")
    return out


def _check_options(options):
    opts = check_options("mechanism_options", options, MECHANISM_OPTIONS)
    if "sampler_options" in opts:  # refused at the call (walk params, unknown keys), not as a skipped row
        check_sampler_options(opts["sampler_options"], "mechanism_options['sampler_options']")
    return opts


def _merge_workers(options, workers):
    """``workers`` into ``options['sampler_options']`` (the chosen K-norm or NIM mechanism's);
    returns the workers the table's Monte Carlo runs use (None: the default)."""
    given = (options.get("sampler_options") or {}).get("workers")
    try:  # refused at the call, not as a skipped row
        check_workers(given)
    except ValueError as exc:
        raise ValueError(f"mechanism_options['sampler_options']: {exc}") from None
    if workers is None:
        return given
    if given is not None and given is not workers and given != workers:
        raise ValueError(f"workers={short_repr(workers)} and mechanism_options['sampler_options']['workers']="
                         f"{short_repr(given)} disagree: give it once")
    options["sampler_options"] = {**(options.get("sampler_options") or {}), "workers": workers}
    return workers


def _p_identity_flops(n: int, p: int | None = None, rank: int | None = None) -> float:
    """p-Identity's search: ``starts·maxiter·(npm + 6p²n + p³)`` plus ``5n³`` for A⁺ (QR and
    triangular solves), with ``m = n``, or ``2·rank`` where the search uses the Gram's factor
    (rank <= n/3). Fitted at :data:`FLOP_RATE` on one BLAS thread, as the search runs (2 shared
    cores: the survey workload of ``scripts/user_paths.py``, 2-way marginals over (2,3,3,4,4,4),
    6.7 s estimated, 6.1 s measured; prefix over 1024 cells, ``scripts/strategy_cost.py --cost``,
    10.7 against 8.4 s)."""
    p = max(1, n // 16) if p is None else p
    m = 2 * rank if rank is not None and _factor_pays(n, rank) else n
    return _check_starts(None, n) * P_IDENTITY_MAXITER * (1.0 * n * p * m + 6.0 * p * p * n + p**3) + 5.0 * n**3


def row_cost(name: str, d: int, n: int, *, n_samples: int = 2000, rank: int | None = None,
             p: int | None = None, shape: Sequence[int] | None = None,
             exact: bool = False) -> tuple[float, float]:
    """``(seconds, bytes)``: the estimated time (one core) and peak memory of recommend's row
    ``name`` on a d × n workload of the given rank (default min(d, n)), before it runs.

    A model from the shapes alone (:data:`FLOP_RATE`, :data:`MCMC_STEP`): e.g. p-Identity
    ``starts·maxiter·(npm + 6p²n + p³)`` flops for its search (``m = n``, or twice the rank when
    it is at most n/3) plus ``2dn² + 5n³`` for FᵀF and A⁺; K-norm the SVD of F plus ``n_samples·r²·n·MCMC_STEP`` seconds of MCMC (none when K has
    exact structure, ``exact``); NIM twice K-norm's (its plan and its levels' draws; with an exact
    K its MCMC levels are taken to have 2√r dimensions).
    ``shape``: the attribute sizes of an implicit workload (nothing of size d·n is then held or
    computed: its Gram matrices are; K-norm, NIM and the SVD Gaussian of a marginal one hold the
    body's or WᵀF's r × n, by its structure); None: an explicit d × n matrix. The SVD Gaussian: F's
    span (an SVD), ``WᵀF`` and its SVD (``4r²n``).
    """
    if not isinstance(name, str) or name not in CANDIDATES:
        raise ValueError(f"name must be one of {list(CANDIDATES)}, got {short_repr(name)}")
    d, n = positive_int("d", d), positive_int("n", n)
    r = min(d, n) if rank is None else positive_int("rank", rank)
    p = positive_int("p", p, allow_none=True)
    if shape is not None:
        sizes = as_list("shape", shape, "a sequence of attribute sizes")
        shape = tuple(positive_int(f"shape[{i}]", s) for i, s in enumerate(sizes))
    exact = check_flag("exact", exact)
    dn, m = float(d) * n, float(positive_int("n_samples", n_samples))
    gram = 0.0 if shape is not None else 2 * dn * min(d, n)  # FᵀF of an explicit F
    held = 0.0 if shape is not None else 16 * dn  # a mechanism's copy of F and one temporary
    if name in ("laplace", "gaussian"):
        flops, nbytes = 3 * dn, 32 * dn  # a copy of F, |F| at unit scale, temporaries
    elif name == "gaussian-marginal":  # recognise F: a pass over F per divisor of n tried
        flops, nbytes = 3 * dn * (1 + math.log2(n + 1)), 24 * dn
    elif name == "gaussian-svd":  # F = W·R (tall: FᵀF or a QR; a marginal workload: its span and WᵀF), R's SVD
        span, held_f = (4.0 * d * r * r, 3.0 * d * r) if shape is not None else (4 * dn * min(d, n), 3 * dn)
        flops, nbytes = span + 2 * dn * r + 4.0 * r * r * n, 8.0 * (held_f + 5.0 * r * n + 2 * ROW_CHUNK * n)
    elif name == "identity":
        flops, nbytes = (3 * dn, 24 * dn) if shape is None else (float(sum(s * s for s in shape)), 0.0)
    elif name == "hierarchical":  # all b from FᵀF (HB) in O(n² log n)
        flops = gram + 50.0 * n * n * math.log2(n + 1)
        nbytes = held + 32.0 * n * n + 4 * CHUNK_BYTES
    elif name == "p-identity":
        p = max(1, n // 16) if p is None else p
        flops = _p_identity_flops(n, p, r) + gram  # r: the rank, or min(d, n) above it
        nbytes = held + 8.0 * (8 * n * n + 4 * p * n + 3 * p * p) + 8.0 * n * (n + p)
    elif name == "kron-hierarchical":  # an HB tree per attribute, every b (a union: up to 10 rounds)
        sizes = list(shape) if shape is not None else [n]
        flops = sum(50.0 * s * s * math.log2(s + 1) for s in sizes) + 4.0 * n * max(sizes)
        nbytes = 8.0 * sum(12 * s * s for s in sizes) + 8.0 * 4 * n
    elif name == "kron-p-identity":  # a p-Identity per attribute (a union: up to 10 rounds of them)
        sizes = list(shape) if shape is not None else [n]
        flops = sum(_p_identity_flops(s) for s in sizes) + 4.0 * n * max(sizes)
        nbytes = 8.0 * sum(10 * s * s for s in sizes) + 8.0 * 4 * n
    else:
        svd = 4 * dn * min(d, n)
        # K with exact structure: K-norm draws nothing, NIM's MCMC levels are below (≈ 2√r dimensions)
        k = 0 if exact and name == "knorm" else min(r, 2 * int(np.sqrt(r))) if exact else r
        mcmc = m * k * k * n * MCMC_STEP
        flops = svd * (2 if name == "nim" else 1)
        # a marginal workload by its structure (shape): the body's r × n columns, never F (docs/design.md §2.2)
        body = 6 * dn if shape is None else n * (3.0 * r + ROW_CHUNK)
        nbytes = 8 * (body + 4 * m * d) * (2 if name == "nim" else 1)
        return flops / FLOP_RATE + mcmc * (2 if name == "nim" else 1), nbytes
    return flops / FLOP_RATE, nbytes


class _Builder:
    """The rows, from F alone; keeps what the chosen mechanism can reuse (the body, the
    least-error searched strategy's mechanism)."""

    def __init__(self, F, epsilon, delta, n_samples, walk, mc_seed, p_identity_max_n, options, rng, accountant,
                 workers=None, prepared=None):
        self.F, self.epsilon, self.delta = F, epsilon, delta
        self.workload = F if isinstance(F, ImplicitWorkload) else None
        self._strategy_F = None
        self.plan = None  # F's marginal plan (the gaussian-marginal row), found by recommend
        self.prepared = prepared  # a PreparedWorkload of F (checked): its body and rounding are reused
        self.sampler_options = {} if workers is None else {"workers": workers}  # the table's MCMC runs
        # the rows of these are exact formulas (no draws): built once, with the caller's rng; the
        # least-error one is kept (each holds a copy of F)
        self.common = {"epsilon": epsilon, "rng": rng, "accountant": accountant}
        self.built: dict[str, Any] = {}
        self.built_rms: dict[str, float] = {}
        self.last: Any = None  # the exact row's mechanism built last
        self.d, self.n = (F.d, F.n) if self.workload is not None else F.shape
        self.n_samples, self.walk, self.mc_seed = n_samples, walk, mc_seed
        self.p_identity_max_n, self.options = p_identity_max_n, options
        self.body = None if prepared is None else prepared.body
        self.nim_levels, self.nim_plan = None, None
        self.key = {"n_samples": int(n_samples), "walk": str(walk), "mc_seed": int(mc_seed)}  # what the rows depend on
        stored = None if prepared is None else prepared.rows
        self.stored = stored["rows"] if stored and stored.get("options") == self.key else {}

    def usable(self, name):
        """Whether the prepared workload holds ``name``'s row and what rebuilding its mechanism
        needs (and p-Identity is not capped off by ``p_identity_max_n``, as a fresh row would be)."""
        if name not in self.stored or name in GAUSSIAN:
            return False
        params = self.stored[name]["params"]
        if name == "hierarchical":
            return "branching" in params and "root" in params
        if name == "p-identity":
            theta = self.prepared.row_arrays.get("p-identity.theta")
            capped = self.p_identity_max_n is not None and self.n > self.p_identity_max_n
            return not capped and theta is not None and theta.shape == (params.get("p"), self.n)
        return True

    def from_stored(self, name, table):
        """The row kept in the prepared workload (ε-free: ``rms·ε``), at this ε; a one-level NIM
        row is K-norm's when the table has one (as when it is computed)."""
        u = self.stored[name]
        if name == "nim" and u["params"].get("levels") == 1:
            row = self.nim_as_knorm(table.get("knorm"), " (prepared)")
            if row is not None:
                return row
        with np.errstate(over="ignore", under="ignore"):
            rms, se = np.float64(u["unit_rms"]) / self.epsilon, np.float64(u["unit_stderr"]) / self.epsilon
        row = self.row(name, rms, se if np.isfinite(se) else 0.0, u["exact"],
                       f"{u['method']} (prepared)", u["notion"])
        return row

    def nim_as_knorm(self, knorm_row, note=""):
        """A one-level NIM **is** K-norm: its row is K-norm's, when the table has one (else None)."""
        if knorm_row is None or knorm_row.rms is None:
            return None
        return ErrorRow("nim", knorm_row.rms, knorm_row.stderr, knorm_row.exact,
                        "its plan has one level: the K-norm mechanism (K-norm's row)" + note, "pure ε-DP", self.d)

    def store(self, name, row):
        """Keep a computed pure ε-DP row in the prepared workload (ε-free), with what rebuilding
        its mechanism needs; rows computed under other options are replaced."""
        if self.prepared is None or row.rms is None or name in GAUSSIAN:
            return
        with np.errstate(over="ignore", under="ignore"):
            unit, use = np.float64(row.rms) * self.epsilon, np.float64(row.stderr) * self.epsilon
        if not (np.isfinite(unit) and unit > 0.0 and np.isfinite(use)):
            return  # not representable at ε = 1: computed again next time
        rows = self.prepared.rows
        if rows.get("options") != self.key:
            rows.clear()
            rows.update(options=dict(self.key), rows={})
            self.prepared.row_arrays.clear()
        entry = {"unit_rms": float(unit), "unit_stderr": float(use), "exact": bool(row.exact),
                 "method": row.method, "notion": row.notion, "params": {}}
        m = self.last  # the exact row's mechanism just built (strategies)
        if name == "hierarchical" and isinstance(m, HierarchicalMechanism):
            entry["params"] = {"branching": int(m.branching), "root": bool(m.root)}
        elif name == "p-identity" and isinstance(m, PIdentityMechanism):
            entry["params"] = {"p": int(m.p)}
            self.prepared.row_arrays["p-identity.theta"] = m.theta
        elif name == "nim" and self.nim_levels is not None:
            entry["params"] = {"levels": int(self.nim_levels)}
        rows["rows"][name] = entry
        self.stored = rows["rows"]

    def rebuild(self, name):
        """The searched strategy of a row taken from the prepared workload (``hierarchical``,
        ``p-identity``), from its kept parameters, not searched again; with the caller's rng and
        accountant."""
        params = self.stored[name]["params"]  # complete: usable(name) was checked
        if name == "hierarchical":
            return HierarchicalMechanism(self.strategy_F, branching=params["branching"], root=params["root"],
                                         **self.common)
        return PIdentityMechanism(self.strategy_F, theta=self.prepared.row_arrays["p-identity.theta"], **self.common)

    def row(self, name, rms, stderr, exact, method, notion="pure ε-DP"):
        """A ranked row; a ValueError (the row is skipped with it) where rms leaves float64."""
        rms = in_float_range(float(rms), "the rms error", self.epsilon)
        return ErrorRow(name, rms, float(stderr), bool(exact), method, notion, self.d)

    def skipped(self, name, why):
        notion = "(ε, δ)-DP" if name in GAUSSIAN else "pure ε-DP"
        return ErrorRow(name, None, None, False, "", notion, self.d, skipped=why)

    def keep(self, name, mech, rms):
        """Keep ``mech`` if its row is the least so far (the others' copies of F are let go)."""
        if all(rms < r for r in self.built_rms.values()):
            self.built, self.built_rms = {name: mech}, {name: rms}

    def cost(self, name):
        """``(seconds, bytes)`` estimated for the row (:func:`row_cost`)."""
        rank = None if self.body is None else self.body.dim
        exact = self.body is not None and self.body.exact_structure is not None
        shape = None if self.workload is None else self.workload.shape
        seconds, nbytes = row_cost(name, self.d, self.n, n_samples=self.n_samples, rank=rank, shape=shape,
                                   exact=exact)
        if name == "knorm" and self._pooled():  # the certified pool answers it: no draws (knorm.knorm)
            seconds = 0.0
        if self.workload is not None and len(self.workload.terms) > 1 and name in PRODUCT_ONLY:
            seconds *= 10  # a union: up to 10 rounds of per-attribute searches
        return seconds, nbytes

    def _pooled(self) -> bool:
        """The body's certified pool (a prepared file's, or this process's) holds at least
        ``n_samples`` records: K-norm's row then draws nothing (:meth:`knorm`)."""
        if self.body is None:
            return False
        mom = known_moments(self.body, self.walk)
        return mom is not None and self.n_samples <= mom.records

    def laplace(self):
        m = LaplaceMechanism(self.F, **self.common)
        return self._exact("laplace", m, "exact: √(2d)·Δ₁/ε")

    def gaussian(self):
        m = GaussianMechanism(self.F, delta=self.delta, **self.common)
        return self._exact("gaussian", m, "exact: √d·σ (analytic calibration)", notion="(ε, δ)-DP")

    def gaussian_marginal(self):
        m = ResidualGaussianMechanism(self.F, delta=self.delta, **self.common)
        return self._exact("gaussian-marginal", m, f"exact: scale·Σ_S √(v_S p_S)/μ, ResidualPlanner's optimal "
                                                   f"strategy, {len(m.plan.subsets)} residual sets",
                           notion="(ε, δ)-DP")

    def gaussian_svd(self):
        m = SVDGaussianMechanism(self.F, delta=self.delta, **self.common)
        how = ("attains the SVD bound (tr G^½)²/n" if m.attains_bound else
               f"{m.bound_ratio:.4g}× the SVD bound's root (diag G^½ not constant)")
        return self._exact("gaussian-svd", m, f"exact: √(max diag G^½·tr G^½)/μ, A = (FᵀF)^¼; {how}",
                           notion="(ε, δ)-DP")

    def _exact(self, name, m, how, notion="pure ε-DP"):
        row = self.row(name, m.rms_error(), 0.0, True, how, notion)
        self.last = m
        if name in SEARCHED or name == "gaussian-svd":  # the others cost O(dn) to build again
            self.keep(name, m, row.rms)
        return row

    @property
    def strategy_F(self):
        """What the strategy rows get: an implicit workload as it is; a tall explicit F (d > n) as
        :func:`knorm.implicit.from_matrix` of it, made once (FᵀF computed once for all the rows,
        no copy of F per mechanism; the answers are still F x̂)."""
        if self._strategy_F is None:
            self._strategy_F = self.F if self.workload is not None or self.d <= self.n else from_matrix(self.F)
        return self._strategy_F

    def identity(self):
        m = IdentityMechanism(self.strategy_F, **self.common)
        return self._exact("identity", m, "exact: √2/ε·‖F‖_F")

    def hierarchical(self):
        m = HierarchicalMechanism(self.strategy_F, **self.common)
        return self._exact("hierarchical", m, f"exact: √2·levels/ε·‖F A⁺‖_F, b = {m.branching}, {m.levels} levels"
                                              + ("" if m.root else " (no root)"))

    def p_identity(self):
        if self.p_identity_max_n is not None and self.n > self.p_identity_max_n:
            return self.skipped("p-identity", f"n = {self.n} > p_identity_max_n = {self.p_identity_max_n}")
        m = PIdentityMechanism(self.strategy_F, **self.common)
        return self._exact("p-identity", m, f"exact: √2/ε·‖F A⁺‖_F, p = {m.p}, {m.starts} start(s)")

    def kron_hierarchical(self):
        m = KroneckerHierarchicalMechanism(self.strategy_F, **self.common)
        return self._exact("kron-hierarchical", m, f"exact: √2·Π levels/ε·‖F A⁺‖_F, A = ⊗ HB trees, b = {m.branchings}")

    def kron_p_identity(self):
        m = KroneckerPIdentityMechanism(self.strategy_F, **self.common)
        return self._exact("kron-p-identity", m, f"exact: √2/ε·‖F A⁺‖_F, A = ⊗ p-Identity, p = {m.p}")

    def _body(self):
        if self.body is None:  # this process's body of F: rounded and certified once for every question
            self.body = body_of(self.F)
        return self.body

    def knorm(self):
        body = self._body()
        m = KNormMechanism(self.F, epsilon=self.epsilon, walk=self.walk, rng=self.mc_seed, body=body,
                           sampler_options=self.sampler_options, accept_uncertified=True)
        e = m.expected_error(self.n_samples, rms=True, pool=True)  # the certified pool's where it suffices
        return self.row("knorm", e.value, e.stderr, e.exact, e.method)

    def nim(self, knorm_row):
        m = NIMechanism(self.F, epsilon=self.epsilon, rng=self.mc_seed, walk=self.walk,
                        sampler_options=self.sampler_options, accept_uncertified=True, prepared=self.prepared,
                        body=None if self.prepared is not None else self.body)  # K-norm's body: its rounding
        self.nim_levels, self.nim_plan = len(m.levels), m
        if self.body is None:
            self.body = m._stages[0].body
        if len(m.levels) == 1:
            if knorm_row is None and m.levels[0].kept_dim == m.levels[0].dim:
                knorm_row = self.knorm()  # K-norm's row (from the certified pool where there is one)
            row = self.nim_as_knorm(knorm_row)
            if row is not None:
                return row
        if all(lv.exact_covariance for lv in m.levels):
            return self.row("nim", m.predicted_error, 0.0, True,
                            f"exact: √Σ c_i/ε_i², {len(m.levels)} level(s) {[lv.dim for lv in m.levels]}")
        body = self._body()
        step = max(1, CHUNK_BYTES // (8 * self.d))  # answers of all ranges: d = n(n+1)/2 per draw
        norms, fracs = [], [1.0]
        for i in range(0, self.n_samples, step):
            noise = np.ldexp(m.sample_noise(min(step, self.n_samples - i)), -body._exp)  # unit scale
            norms.append(np.linalg.norm(noise, axis=1) / body._unit)
            fracs += [lv.mechanism.last_info.min_ess / lv.mechanism.last_info.draws for lv in m.levels
                      if lv.mechanism.last_info is not None]
        ess = max(2.0, self.n_samples * min(fracs))
        rms, se = rms_from_draws(np.concatenate(norms), body._scale, ess)
        return self.row("nim", rms, se, False, f"Monte Carlo over {self.n_samples} noise draws (ESS {ess:.0f}), "
                                                f"{len(m.levels)} level(s) {[lv.dim for lv in m.levels]}")


def knorm_crossover_delta(epsilon: float, delta: float, knorm_rms: float, gaussian_rms: float) -> float:
    """The δ* at which a Gaussian row (``gaussian_rms`` at (ε, δ)) has K-norm's error: every
    Gaussian row here is ``rms = c/μ`` with c free of δ and μ = 1/σ₁(ε, δ) its GDP parameter,
    so at δ* its μ* = c/knorm_rms and ``δ* = Φ(−ε/μ* + μ*/2) − e^ε Φ(−ε/μ* − μ*/2)`` (exact;
    the rms decreases as δ grows, so K-norm wins for every δ < δ*)."""
    mu, _ = gaussian_mu(epsilon, delta)
    for arg, value in (("knorm_rms", knorm_rms), ("gaussian_rms", gaussian_rms)):
        if not finite_real(arg, value, "a positive finite number") > 0:
            raise ValueError(f"{arg} must be a positive finite number, got {short_repr(value)}")
    with np.errstate(over="ignore", divide="ignore"):
        mu_star = float(np.float64(gaussian_rms) * mu / np.float64(knorm_rms))
    return float(gdp_delta(epsilon, mu_star)) if np.isfinite(mu_star) else 0.0


def _one_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: " + (text.splitlines()[0] if text else "no message")


def _check_budget(budget_s):
    if budget_s is None:
        return None
    what = "None or a positive number of seconds"
    value = finite_real("budget_s", budget_s, what)
    if not value > 0.0:
        raise ValueError(f"budget_s must be {what}, got {short_repr(budget_s)}")
    return value


@on_one_blas_thread
def recommend(F: ArrayLike | ImplicitWorkload, *, epsilon: float, delta: float | None = None,
              rng: np.random.Generator | int | None = None, candidates: Sequence[str] | None = None,
              n_samples: int = 2000, walk: str = "billiard", mc_seed: int = 0,
              budget_s: float | None = None, p_identity_max_n: int | None = None,
              mechanism_options: Mapping[str, Any] | None = None,
              accountant: Any = None, workers: int | Executor | None = None,
              prepared: PreparedWorkload | None = None, progress: Any = None) -> Recommendation:
    """The expected error of every applicable mechanism on ``F`` and the least-error one.

    From F alone (never data). ``table``: name → :class:`ErrorRow` with ``rms = √E‖noise‖₂²``
    on the d answers (module docstring: exact formulas, or Monte Carlo with its SE from
    ``n_samples`` draws seeded by ``mc_seed``), in :data:`CANDIDATES` order, each with the
    ``seconds`` it took. ``candidates`` (default: all of :data:`CANDIDATES`; ``"gaussian"``
    only with ``delta``, then marked (ε, δ)-DP and competing: giving δ says (ε, δ)-DP is
    acceptable; so are ``"gaussian-marginal"``, a row only when F is a marginal workload, and
    ``"gaussian-svd"``; then ``knorm_wins_below`` is the largest δ at which K-norm still has less
    error than every Gaussian row); ``"kron-hierarchical"`` (an HB tree per attribute) and ``"kron-p-identity"``
    (HDMM's Kronecker p-Identity) only on a product domain.
    A row that cannot be built (too large, an oracle error) says why (``skipped``) instead of
    failing the call. ``F``: an explicit d × n matrix, or a :class:`knorm.implicit.ImplicitWorkload`
    (Gram matrix, Kronecker products or unions of them; W is never built): then the strategy
    rows are computed from its Gram matrices and the rows that need W's entries (Laplace,
    Gaussian, K-norm, NIM) are skipped with that reason.

    Cost: each row's time and memory are estimated first (:func:`row_cost`); the rows run
    cheapest first; one whose memory estimate exceeds half the physical memory is skipped
    (and if every row is, a one-line ValueError naming F comes before anything is
    allocated); ``budget_s`` (None: no limit) drops a row whose estimated time exceeds the
    time left (the first row always runs): ``Recommendation.dropped`` and the row say so.
    ``p_identity_max_n`` (None: no cap; the former default was 512) skips p-Identity above
    that many cells.

    ``best``: the least ``rms`` (ties within 1e-6 relative go to the earlier name of
    :data:`CANDIDATES`, so a one-level NIM never beats K-norm); ``mechanism``: that mechanism,
    built with ``rng`` (None: OS entropy; an int: reproducible and NOT private) and
    ``accountant``; ``mechanism_options`` (``walk``, ``bank_size``, ``sampler_options``,
    ``accept_uncertified``) go to a chosen K-norm or NIM mechanism. ``workers`` bounds the
    threads of every sampler run, the table's and the chosen mechanism's (None: one per CPU
    the process may use, :func:`~knorm.walks.chains.default_workers`; an int; or an
    executor); it may also be given as ``mechanism_options['sampler_options']['workers']``.
    ``prepared``: a :class:`~knorm.walks.prepared.PreparedWorkload` of this F (its body and
    rounding are reused by the K-norm and NIM rows and the chosen mechanism); the rows computed
    are kept in it ε-free and a later call with it takes them instead of computing them again
    (same ``n_samples``, ``walk`` and ``mc_seed``; module docstring); ``prepared.save(path)``
    writes them. ``progress`` (True: bars on stderr; or a callable, as a sampler's): the stages of
    the table's MCMC runs (K-norm's rounding and one certification, where no file holds them).
    """
    W: ImplicitWorkload | NDArray[np.float64]
    marginal = False
    if isinstance(F, MarginalMatch):  # a marginal workload by its structure: as an implicit one where it is
        try:                          # one (tables in order), else made dense (memory checked) for every row
            F = from_marginal_match(F)
        except ValueError:
            F = dense_marginal(F)
    if isinstance(F, ImplicitWorkload):
        W, implicit = F, True
        marginal = F.marginal_match() is not None  # its mechanisms take it, never dense (K-norm, NIM, Laplace, Gaussian, SVD)
    else:
        if isinstance(F, np.ndarray) and F.ndim == 2 and F.size:  # before the validated copy: the least a row needs
            check_memory("F", None, 8.0 * F.size + min(row_cost(c, *F.shape)[1] for c in ("laplace", "identity")))
        W, implicit = validate_matrix(F), False
    epsilon = check_epsilon(epsilon)
    delta = None if delta is None else check_delta(delta)
    names = _check_candidates(candidates, delta, isinstance(W, ImplicitWorkload) and len(W.shape) > 1)
    plan = None
    if "gaussian-marginal" in names and (marginal or not implicit):
        plan = marginal_plan(W)
    if plan is None and "gaussian-marginal" in names:  # a row for marginal workloads only (as Kronecker's for
        names.remove("gaussian-marginal")              # product domains)
        if not names:
            raise ValueError("candidates: 'gaussian-marginal' is only for a marginal workload (complete marginal "
                             "tables, any row order), and F is not one")
    n_samples = check_n_samples(n_samples)
    walk_id(walk)
    if not is_int(mc_seed) or mc_seed < 0:
        raise ValueError(f"mc_seed must be a non-negative integer, got {short_repr(mc_seed)}")
    budget_s = _check_budget(budget_s)
    p_identity_max_n = positive_int("p_identity_max_n", p_identity_max_n, allow_none=True)
    options = _check_options(mechanism_options)
    workers = _merge_workers(options, check_workers(workers))
    if rng is not None:
        as_generator(rng)  # refuses a bad rng here, not as a failure of every row
    check_accountant(accountant)
    if prepared is not None:
        if implicit and not marginal:
            raise ValueError("prepared: a prepared workload is of an explicit F or a marginal workload (K-norm and "
                             "NIM need W's entries)")
        check_prepared(prepared, W)
    options.setdefault("walk", walk)

    shown = as_progress(progress)
    b = _Builder(W, epsilon, delta, n_samples, walk, int(mc_seed), p_identity_max_n, options, rng, accountant,
                 workers, prepared)
    if shown is not None:
        b.sampler_options["progress"] = shown
    b.plan = plan
    limit = memory_limit()
    costs = {name: b.cost(name) for name in names}
    table: dict[str, ErrorRow] = {}
    dropped: dict[str, str] = {}
    t0 = time.perf_counter()
    for name in sorted(names, key=lambda k: costs[k][0]):  # cheapest first (stable: CANDIDATES order)
        seconds, nbytes = b.cost(name)  # again: K-norm's rank is known once its body is built
        if b.usable(name):
            t = time.perf_counter()
            try:
                row = b.from_stored(name, table)
            except ValueError as exc:  # leaves float64 at this ε
                row = b.skipped(name, _one_line(exc))
            table[name] = replace(row, seconds=time.perf_counter() - t)
            continue
        if implicit and name in NEED_W and not marginal:  # a marginal one: every row by its structure (K-norm,
                                                          # NIM, Laplace, Gaussians), never made dense
            table[name] = b.skipped(name, "needs W's entries: F is an implicit workload (Gram/Kronecker terms)")
            continue
        if nbytes > limit:
            why = (f"needs about {nbytes / 2**30:.3g} GiB (estimated), more than the {limit / 2**30:.3g} GiB "
                   "allowed (half the physical memory)")
            table[name], dropped[name] = b.skipped(name, why), why
            continue
        left = None if budget_s is None else budget_s - (time.perf_counter() - t0)
        if left is not None and table and seconds > left:
            why = f"budget_s = {budget_s:g}: estimated {seconds:.3g} s, {max(left, 0.0):.3g} s left"
            table[name], dropped[name] = b.skipped(name, why), why
            continue
        t = time.perf_counter()
        try:
            row = b.nim(table.get("knorm")) if name == "nim" else getattr(b, name.replace("-", "_"))()
        except Exception as exc:  # one mechanism failing must not lose the others' rows
            row = b.skipped(name, _one_line(exc))
        table[name] = replace(row, seconds=time.perf_counter() - t)
        b.store(name, table[name])
    table = {name: table[name] for name in names}  # CANDIDATES order
    rms = {r.mechanism: float(r.rms) for r in table.values() if r.rms is not None}
    if not rms:
        raise ValueError("F: no candidate mechanism could be built: "
                         + "; ".join(f"{r.mechanism}: {r.skipped}" for r in table.values()))
    low = min(rms.values())
    best = next(k for k, v in rms.items() if v <= low * (1.0 + TIE))
    tied = [k for k, v in rms.items() if k != best and v <= low * (1.0 + TIE)]
    others = {k: v for k, v in rms.items() if v > low * (1.0 + TIE)}
    reason = f"least rms √E‖noise‖₂² = {rms[best]:.4g} at ε = {epsilon:g}"
    if tied:
        reason += f"; tied with {', '.join(tied)} (the first of the list wins)"
    if others:
        runner = min(others, key=lambda k: others[k])
        with np.errstate(over="ignore"):  # rows are normal floats (in_float_range): low > 0
            ratio = np.float64(others[runner]) / low
        reason += f"; next {runner} {others[runner]:.4g} ({ratio:.3g}×)"
    if table[best].notion != "pure ε-DP":
        reason += f"; (ε, δ)-DP with δ = {delta:g}"
    if dropped:
        reason += f"; not computed (time budget or memory): {', '.join(dropped)}"
    if best in b.built:  # built with the caller's rng, nothing drawn yet
        mech = b.built[best]
    elif best == "knorm":  # the table's K-norm drew seeded uniform draws: a fresh one (same body)
        mech = KNormMechanism(W, body=b._body(), **options, **b.common)
    elif best == "nim":  # the table's plan (a function of F), fresh levels with the caller's rng
        mech = (NIMechanism(W, **options, **b.common, plan_of=b.nim_plan) if b.nim_plan is not None else
                NIMechanism(W, **options, **b.common, prepared=prepared))  # a prepared row: the plan searched again
    elif best in ("hierarchical", "p-identity") and b.usable(best):
        mech = b.rebuild(best)
    else:  # an exact row whose mechanism was not kept: built again (never K-norm or NIM: handled above)
        getattr(b, best.replace("-", "_"))()
        mech = b.last
    crossover = None
    gauss = [rms[g] for g in GAUSSIAN if g in rms]
    if delta is not None and gauss and "knorm" in rms:
        crossover = knorm_crossover_delta(epsilon, delta, rms["knorm"], min(gauss))
    return Recommendation(table, best, mech, epsilon, delta, b.d, b.n, reason, dropped, budget_s, crossover)


def _prepared_rows(F: NDArray[np.float64], w: PreparedWorkload, walk: str, workers: Any) -> None:
    """``prepare(F, recommend=True)``: compute :func:`recommend`'s ε-free rows into ``w.rows``."""
    recommend(F, epsilon=1.0, prepared=w, walk=walk, workers=workers)


_prepared.ROW_MAKERS.append(_prepared_rows)
