"""Shared pieces of the mechanisms: validation, accounting of answers, error estimates (the privacy
claim itself is :class:`knorm.privacy.PrivacyClaim`)."""

from __future__ import annotations

import functools
import threading
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._rng import as_generator, noise_source
from .._validate import as_real_array, check_flag, check_memory, is_real, positive_int, short_repr
from ..data import RegionHistograms
from ..errors import LargeEpsilonWarning
from ..privacy import LARGE_EPSILON, BudgetAccountant, PrivacyClaim
from ..body.hull import _exponent, _ldexp, validate_matrix
from ..body.marginal_ops import answers, as_marginal, dense_marginal, fingerprint_of
from ..postprocess import least_squares_matrix
from .uncertainty import AnswerErrors, DrawsLaw, NoiseLaw, check_level, intervals
from ._grid import GRID_BITS, RANGE_BITS, grid_details, grid_exponent_of, row_extent, snap_sum

MAX_N_SAMPLES = 10**7  # Monte-Carlo draws one error estimate may ask for
TINY = float(np.finfo(np.float64).tiny)  # below this a float64 has lost precision (subnormal) or is 0

_V = TypeVar("_V")


def finite_real(name: str, value: Any, what: str = "a finite number") -> float:
    """``value`` as a finite float (bools, strings, complex, None, ints beyond float64 refused),
    else a one-line ValueError naming ``name`` (``what`` says what was expected)."""
    try:
        v = float(value) if is_real(value) else float("nan")
    except OverflowError:  # a Python int beyond float64
        v = float("inf")
    if not np.isfinite(v):
        raise ValueError(f"{name} must be {what}, got {short_repr(value)}")
    return v


def check_positive(name: str, value: Any) -> float:
    """``value`` as a positive finite float, else a one-line ValueError naming ``name``."""
    v = finite_real(name, value, "a positive finite number")
    if not v > 0:
        raise ValueError(f"{name} must be a positive finite number, got {short_repr(value)}")
    return v


def check_epsilon(epsilon: float) -> float:
    """ε as a positive finite float (else a ValueError naming epsilon); past
    ``knorm.privacy.LARGE_EPSILON`` (20) a ``knorm.errors.LargeEpsilonWarning``: the answers
    would be essentially exact."""
    eps = check_positive("epsilon", epsilon)
    if eps > LARGE_EPSILON:
        warnings.warn(f"epsilon = {eps:g} > {LARGE_EPSILON:g}: the noise is negligible, the answers essentially "
                      "exact (no meaningful privacy); the claim says so", LargeEpsilonWarning, stacklevel=3)
    return eps


def unit_exponent(F: NDArray[np.float64]) -> int:
    """The ``e`` with ``max|F|·2^-e`` in [1, 2): ``F·2^-e`` is F at unit scale, exactly (a 0/±1 matrix
    is its own unit form)."""
    return int(_exponent(F)) - 1


def scaled(unit_value: float, e: int, epsilon: float = 1.0, power: int = 1) -> float:
    """``unit_value·(2^e/ε)^power`` with no intermediate over- or underflow (a quantity computed
    on ``F·2^-e`` at ε = 1, in F's units at ε): ±inf or 0 only where the result itself leaves float64."""
    m, k = np.frexp(epsilon)  # ε = m·2^k, m in [0.5, 1)
    mv, kv = np.frexp(unit_value)  # the value's own exponent too: mv/m^power stays in (0.5, 4]
    return float(_ldexp(float(mv) / float(m) ** power, int(kv) + power * (e - int(k))))


def row_norms(X: ArrayLike) -> NDArray[np.float64]:
    """``‖x‖₂`` of every row of X, computed at unit scale (``X·2^-e``): no square over- or underflows;
    inf only where a norm itself exceeds float64."""
    X = np.asarray(X, dtype=np.float64)
    e = _exponent(X)
    with np.errstate(over="ignore"):
        return np.ldexp(np.linalg.norm(np.ldexp(X, -e), axis=-1), e)


def mean_stderr(values: ArrayLike) -> tuple[float, float | None]:
    """Mean of non-negative ``values`` and its standard error (None for one value), computed on
    ``values/max`` so that no square overflows."""
    v = np.asarray(values, dtype=np.float64)
    top = float(v.max()) if v.size else 0.0
    u = v / top if 0.0 < top < np.inf else v
    s = top if 0.0 < top < np.inf else 1.0
    se = s * float(u.std(ddof=1) / np.sqrt(len(u))) if len(u) > 1 else None
    return s * float(u.mean()), se


def in_float_range(value: float, what: str, epsilon: float) -> float:
    """``value`` if it is a normal positive float64, else a one-line ValueError naming epsilon
    (``what`` overflowed to inf, or underflowed to 0 or a subnormal)."""
    if np.isfinite(value) and value >= TINY:
        return float(value)
    way = "overflows" if not value < np.inf else "underflows"
    raise ValueError(f"{what} {way} float64 at epsilon = {epsilon:g}: "
                     f"{'a smaller' if way == 'underflows' else 'a larger'} epsilon (or rescaled inputs) is needed")


def check_noise_scale(scale: float, epsilon: float, what: str = "the noise scale") -> float:
    """A mechanism's noise scale (answer units) if it is a normal float64, else a one-line ValueError
    naming epsilon: noise that overflows, or underflows to nothing, cannot be released."""
    return in_float_range(scale, what, epsilon)


def check_delta(delta: float) -> float:
    if not is_real(delta):
        raise ValueError(f"delta must be a number in (0, 1), got {short_repr(delta)}")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {short_repr(delta)}")
    return float(delta)


def check_size(size: int | None, dim: int | None = None) -> int | None:
    """``size`` as None or an int >= 1; with ``dim``, refuse (before allocating) a request
    whose (size, dim) float64 output and working copies cannot fit in memory."""
    m = positive_int("size", size, allow_none=True)
    if m is not None and dim is not None:
        check_memory("size", m, 8 * 4 * m * dim)
    return m


def check_n_samples(n_samples: int, name: str = "n_samples") -> int:
    """A Monte-Carlo sample count: an int in [2, MAX_N_SAMPLES] (a standard error needs two
    draws; more than 10⁷ is refused before anything is drawn)."""
    n = positive_int(name, n_samples)
    if not 2 <= n <= MAX_N_SAMPLES:
        raise ValueError(f"{name} must be an integer in [2, {MAX_N_SAMPLES:.0e}] (a standard error needs two "
                         f"draws), got {n}")
    return n


def check_finite_output(values: _V, what: str) -> _V:
    """A ValueError instead of returning NaN or ±inf (e.g. noise that overflowed)."""
    arr = np.asarray(values)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} overflowed to a non-finite value; epsilon is too small "
                         "(or the query too large) for float64 noise")
    return values


MAX_MC_VALUES = 2**30  # values one Monte-Carlo error estimate may draw (seconds to a minute)
CHUNK_BYTES = 2**25  # working memory of one batch of noise draws or tree solves (32 MiB)


def mc_expected_norm(draw: Callable[[int], NDArray[np.float64]], n_samples: int, width: int, factor: float,
                     method: str) -> ErrorEstimate:
    """``E‖noise‖₂ = factor·E‖draw‖₂`` by Monte Carlo over ``draw(m)`` (m exact unit-scale draws at a
    time, each a vector whose computation holds ``width`` floats): memory bounded by chunks of 32 MiB,
    ``n_samples``·``width`` capped before anything is drawn; ``factor`` (the noise scale) is applied to
    the mean, so no square overflows."""
    n_samples = check_n_samples(n_samples)
    if n_samples * width > MAX_MC_VALUES:
        raise ValueError(f"n_samples={n_samples} draws of {width} values each exceed the {MAX_MC_VALUES:.2g} "
                         "values one Monte-Carlo estimate may draw: ask for fewer")
    step = max(1, CHUNK_BYTES // (8 * width))
    norms = np.concatenate([np.linalg.norm(draw(min(step, n_samples - i)), axis=1)
                            for i in range(0, n_samples, step)])
    with np.errstate(over="ignore", under="ignore"):
        value, stderr = float(factor * norms.mean()), float(factor * (norms.std(ddof=1) / np.sqrt(n_samples)))
    check_finite_output([value, stderr], "the expected error")
    return ErrorEstimate(value, stderr, False, method)


def check_accountant(accountant: BudgetAccountant | None) -> BudgetAccountant | None:
    if accountant is not None and not isinstance(accountant, BudgetAccountant):
        raise ValueError(f"accountant must be a knorm.privacy.BudgetAccountant or None, got "
                         f"{type(accountant).__name__}")
    return accountant


@dataclass(frozen=True)
class ErrorEstimate:
    """Expected ℓ₂ error ``E‖M(x) − Fx‖₂``: exact (``stderr == 0``) or Monte Carlo."""

    value: float
    stderr: float
    exact: bool
    method: str

    def __float__(self) -> float:
        return float(self.value)

    def __str__(self) -> str:
        return f"{self.value:.6g}" + ("" if self.exact else f" ± {self.stderr:.2g}") + f" ({self.method})"


def rms_from_mean_square(m: float, se_m: float, factor: float) -> tuple[float, float]:
    """``factor·√m`` and its delta-method SE ``factor·se_m/(2√m)``, for a mean square ``m`` ± ``se_m``."""
    return factor * np.sqrt(m), (factor * se_m / (2.0 * np.sqrt(m)) if m > 0 else 0.0)


def rms_from_draws(norms: ArrayLike, factor: float, ess: float) -> tuple[float, float]:
    """:func:`rms_from_mean_square` of the draws' norms (in units where they are O(1)) with ``ess``
    effective draws."""
    sq = np.asarray(norms, float) ** 2
    return rms_from_mean_square(float(sq.mean()), float(sq.std(ddof=1) / np.sqrt(ess)), factor)


def mc_norm_estimate(draws: ArrayLike, factor: float = 1.0, ess: float | None = None,
                     method: str = "") -> ErrorEstimate:
    """Mean ℓ₂ norm of draws × factor, with its standard error (``ess`` effective draws)."""
    draws = np.asarray(draws, float)
    if len(draws) < 2:
        raise ValueError(f"a Monte-Carlo error estimate needs at least 2 draws, got {len(draws)}")
    # ‖v‖ = s·‖v/s‖ with s = max|v|: no overflow or underflow of squares (F may be 1e±300)
    s = float(np.max(np.abs(draws)))
    unit = np.linalg.norm(draws / s, axis=1) if s > 0 else np.zeros(len(draws))
    m = len(unit) if ess is None else ess
    with np.errstate(over="ignore", under="ignore"):  # s·factor first: s may be tiny and factor huge
        value, stderr = s * factor * float(unit.mean()), s * factor * float(unit.std(ddof=1) / np.sqrt(m))
    check_finite_output([value, stderr], "the expected error")
    return ErrorEstimate(value, stderr, False, method)

# the methods that draw noise or change a mechanism's state: one call at a time per mechanism (a lock)
SERIALISED = ("release", "release_each", "release_estimate", "sample_noise", "sample_uniform", "expected_error",
              "expected_squared_error", "pool_moments", "noise_variances", "reset", "standard_errors",
              "interval_half_widths", "confidence_intervals")


def _serialised(method: Callable[..., _V]) -> Callable[..., _V]:
    """``method`` run while holding its mechanism's (re-entrant) lock."""
    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> _V:
        with self._lock:
            return method(self, *args, **kwargs)
    locked._serialised = True  # type: ignore[attr-defined]
    return locked


class Accounted:
    """Privacy accounting shared by every mechanism (docs/design.md §1, §7, §10; basic composition).

    A subclass sets ``self._claim``, the :class:`PrivacyClaim` of ONE answer, and calls
    :meth:`_spend` with the number of answers each release gives (after checking with
    :meth:`_check_budget` before drawing anything). Then

    * ``privacy_per_answer``: the claim of one answer;
    * ``privacy``: the claim of everything released since the last :meth:`reset`:
      ``answers`` = k answers on the same data are ``(kε, min(1, kδ))``-DP; a batch of
      ``release_each`` over R disjoint data sets counts one answer on each (parallel
      composition: ``datasets`` = R), and any other release after it one more on each;
    * ``accountant``: an optional shared :class:`knorm.privacy.BudgetAccountant` (in the
      manner of diffprivlib's): a release that would exceed its budget raises
      :class:`knorm.privacy.BudgetExceededError` before any noise is drawn.

    Noise drawn with ``sample_noise`` touches no data and is never counted: adding it to
    data yourself is a release the library cannot see.

    One mechanism may be shared by threads: its releases, noise draws and error estimates
    (``SERIALISED``, in every subclass) run one at a time under its lock, so each draw is used
    once and every answer is counted. A mechanism whose noise is not from a known seed cannot be
    copied or pickled (a TypeError): the copy would replay its noise (:meth:`__reduce_ex__`).
    """

    _claim: PrivacyClaim
    _grid_k: int | None = None  # the exponent of the release grid 2^k (None: releases are not floats)
    _lock: threading.RLock

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in SERIALISED:  # every subclass's own definition too: overrides are locked as well
            f = cls.__dict__.get(name)
            if callable(f) and not getattr(f, "_serialised", False):
                setattr(cls, name, _serialised(f))

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Copies and pickles of a seeded mechanism only: the copy of one drawing OS entropy (or a
        caller's Generator) would continue from the same generator and chain states and replay
        the original's noise (``b − a = F(x' − x)`` on two releases): refused with a TypeError."""
        if getattr(self, "noise_source", "seed") != "seed":
            raise TypeError(f"a {type(self).__name__} whose noise comes from {self.noise_source} cannot be copied or "
                            "pickled: the copy would replay its noise; make a new mechanism in each process (rng=None), "
                            "or pass an int seed for reproducible, NOT private noise")
        return super().__reduce_ex__(protocol)

    def __getstate__(self) -> dict[str, Any]:
        """A seeded mechanism's state, less its lock (a copy gets its own)."""
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def _init_accounting(self, rng: np.random.Generator | int | None,
                         accountant: BudgetAccountant | None) -> None:
        self._lock = threading.RLock()
        self.noise_source = noise_source(rng)
        self.accountant = check_accountant(accountant)
        self.answers = 0
        self.datasets = 1  # the most disjoint data sets one batch (release_each) answered at once
        self._disjoint_by = ""  # why those data sets are known to be disjoint (release_each)
        self._certified = True

    @property
    def privacy_per_answer(self) -> PrivacyClaim:
        """The claim of a single answer (see :class:`PrivacyClaim`)."""
        claim = replace(self._claim, answers=1, noise_source=self.noise_source, certified=self._certified)
        k = self._grid_if_any()
        return claim if k is None else replace(claim, details={**claim.details, **grid_details(k)})

    def _grid_if_any(self) -> int | None:
        """:attr:`grid_exponent`, or None where there is no grid (no float releases, or a noise
        scale that no release may use: :meth:`_check_grid` refuses those releases)."""
        try:
            return self.grid_exponent
        except ValueError:
            return None

    @property
    def grid_exponent(self) -> int | None:
        """The k of the public grid ``γ = 2^k`` every released number lies on (docs/design.md §10.1,
        :mod:`knorm.mechanisms._grid`); None for a mechanism whose releases are not floats."""
        if self._grid_k is None:
            self._grid_k = self._grid_k_of()
        return self._grid_k

    def _check_grid(self) -> None:
        """Refuse a release (a one-line ValueError naming epsilon) whose noise scale has no grid in
        float64 (:func:`~knorm.mechanisms._grid.grid_exponent_of`), before anything is drawn. Not at
        construction: a mechanism's errors, plans and noise draws stay available at any scale."""
        self.grid_exponent  # noqa: B018 (computed and cached, or the ValueError)

    def _release_grid(self) -> int:
        """:attr:`grid_exponent` of a mechanism that releases floats (never None there)."""
        k = self.grid_exponent
        if k is None:
            raise TypeError(f"{type(self).__name__} releases no floats: it has no release grid")
        return k

    def _grid_k_of(self) -> int | None:
        """The grid's exponent from the public noise scale (a subclass that releases floats overrides)."""
        return None

    @property
    def privacy(self) -> PrivacyClaim:
        """The claim covering every answer released since the last :meth:`reset` (basic composition
        of the answers per data set; with batches over disjoint data sets, parallel composition
        across them: every release counted as one more answer on each data set)."""
        return self.privacy_per_answer.parallel(self.datasets, self._disjoint_by).composed(self.answers)

    @_serialised
    def reset(self) -> None:
        """Start accounting for new data: the answer count returns to 0.

        Only for answers on a different data set; answers on the same data compose
        whatever you call. A shared ``accountant`` is the caller's and is left alone.
        """
        self.answers = 0
        self.datasets = 1
        self._disjoint_by = ""
        self._certified = True

    def _check_budget(self, k: int) -> None:
        """Before any release draws its noise: the release grid exists, and the accountant allows k answers."""
        self._check_grid()
        if self.accountant is not None:
            self.accountant.check(k * self._claim.epsilon, k * self._claim.delta)

    def _spend(self, k: int, datasets: int = 1, basis: str = "") -> None:
        """Count k answers on each of ``datasets`` disjoint data sets (1: one data set; more: one
        batch of :meth:`Mechanism.release_each`, parallel composition, disjoint by ``basis``) and spend them.
        The accountant first: if another thread's release passed the budget since :meth:`_check_budget`,
        its refusal leaves this mechanism's count as it was (the answers are not returned)."""
        if self.accountant is not None:
            self.accountant.spend(k * self._claim.epsilon, k * self._claim.delta, label=self._claim.mechanism,
                                  claim=self.privacy_per_answer.parallel(datasets, basis).composed(k))
        self.answers += k
        self.datasets = max(self.datasets, datasets)
        if basis and basis not in self._disjoint_by:
            self._disjoint_by = f"{self._disjoint_by}; {basis}" if self._disjoint_by else basis


def _vectors(name: str, value: ArrayLike, width: int) -> NDArray[np.float64]:
    """``value`` as finite float64 of shape (width,) or (m, width), else a ValueError naming ``name``."""
    arr = as_real_array(name, value)
    if arr.ndim not in (1, 2) or arr.shape[-1] != width:
        raise ValueError(f"{name} must have shape ({width},) or (m, {width}), got {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _finite(name: str, out: NDArray[np.float64]) -> NDArray[np.float64]:
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} is too large: the result overflows float64")
    return out


def _real_array(x: ArrayLike, message: str) -> NDArray[Any]:
    """``x`` as a real numeric numpy array, else a ValueError with ``message`` (never numpy's own, which
    would state a ragged input's shape: the data's)."""
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError):
        raise ValueError(message) from None
    if arr.dtype == object or np.iscomplexobj(arr) or arr.dtype.kind not in "biuf":
        raise ValueError(message)
    return arr


def _finite_counts(arr: NDArray[Any], name: str, allow_noncounts: bool, why: str) -> NDArray[np.float64]:
    """``arr`` as float64 if finite and (unless ``allow_noncounts``) non-negative integers, else a one-line
    ValueError naming ``name`` and saying ``why`` (nothing of the data's values)."""
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    if not allow_noncounts and not (np.all(arr >= 0) and np.all(arr == np.floor(arr))):
        raise ValueError(f"{name} has negative or non-integer entries, and {why}")
    return arr


def magnitude_limit(k: int) -> float:
    """``2^(k+52)``: the answers' magnitude below which float64's spacing is at most ``2^(k−1)``, half
    the public grid ``γ = 2^k <= s·2^-10`` (s the noise scale): no coarser than ``s·2^-11``."""
    return float(np.ldexp(1.0, k + RANGE_BITS - 1)) if k + RANGE_BITS - 1 <= 1023 else float("inf")


def check_magnitude(bound: float, k: int, name: str, what: str = "max|F|·‖x‖₁") -> None:
    """Refuse (a one-line ValueError naming ``name``) answers whose magnitude ``bound`` (a bound on
    |Fx| computed from the data: ``what``) reaches :func:`magnitude_limit`: there float64's spacing
    is not far below the noise and the answers would carry less noise than the claim says (a
    neighbour's answer told apart by its rounding). The message names the limit, a public number,
    never the data's value. Called before anything is drawn or counted."""
    limit = magnitude_limit(k)
    if not bound < limit:
        raise ValueError(f"{name}: the answers' magnitude ({what}) reaches 2^{k + RANGE_BITS - 1}, where float64's "
                         f"spacing exceeds 1/{2 ** (GRID_BITS + 1)} of the noise scale: such answers would lose their "
                         "noise; refused before anything was drawn (rescale the counts or use a smaller epsilon; "
                         "docs/privacy.md, 'Huge counts')")


DECLARED = "disjoint by the caller's declaration"
MADE_DISJOINT = "disjoint: rows of knorm.data.histograms(by=...), every record in one row"


def disjoint_basis(X: Any, disjoint: Any) -> str:
    """Why the rows of ``X`` are known to be disjoint data sets, for the claim; "" where they are not
    known to be (rows then compose as answers on the same data). ``disjoint``: True (the caller's
    declaration), False (not disjoint, whatever X is) or None (known only of the histograms
    :func:`knorm.data.histograms` makes, :class:`~knorm.data.RegionHistograms`)."""
    if disjoint is not None and not isinstance(disjoint, (bool, np.bool_)):
        raise ValueError(f"disjoint must be None, True or False, got {short_repr(disjoint)}")
    if disjoint is not None:
        return DECLARED if disjoint else ""
    return MADE_DISJOINT if isinstance(X, RegionHistograms) and X.disjoint else ""


class Mechanism(Accounted, ABC):
    """Base: holds F, validates x, and turns noise into releases ``Fx + noise``."""

    _checkpoint: Any = None  # the MCMC mechanisms' Checkpoint (sampler_options), told of each release

    def __init__(self, F: ArrayLike, rng: np.random.Generator | int | None,
                 accountant: BudgetAccountant | None = None) -> None:
        # a marginal workload known by its structure (knorm.implicit.marginals) is kept as its structure:
        # answers by marginal sums, sensitivities by cell counts, the body without F (issue 49); F itself
        # is made dense only where something asks for it (memory checked)
        self._match = as_marginal(F)
        self._F: NDArray[np.float64] | None = None
        if self._match is None:
            self._F = validate_matrix(F)
            self.d, self.n = self._F.shape
        else:
            self.d, self.n = self._match.shape
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)

    @property
    def F(self) -> NDArray[np.float64]:
        """The workload matrix (d, n); a workload known by its marginal structure is made dense on the
        first request (memory checked: a one-line ValueError naming F where it does not fit)."""
        if self._F is None:
            self._F = dense_marginal(self._match)  # type: ignore[arg-type]
        return self._F

    @F.setter
    def F(self, value: NDArray[np.float64]) -> None:
        self._F, self._match = value, None

    @property
    def workload_source(self) -> Any:
        """What the body is built from: the structure where F is known by one, else the matrix."""
        return self._match if self._match is not None else self.F

    def workload_fingerprint(self) -> str:
        """SHA-256 of F's float64 bytes (the prepared workloads' and bodies' name of F), once."""
        fp = getattr(self, "_fingerprint", None)
        if fp is None:
            from ..body.hull import SymmetricHull

            fp = self._fingerprint = (fingerprint_of(self._match) if self._match is not None
                                      else SymmetricHull._source_hash(self.F))
        return fp

    def _fx(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``F x`` (x of shape (n,)) or ``X Fᵀ`` (rows), by marginal sums where F is known by its structure."""
        if self._match is not None:
            return answers(self._match, X)
        return self.F @ X if X.ndim == 1 else X @ self.F.T

    def check_x(self, x: ArrayLike, allow_noncounts: bool = False) -> NDArray[np.float64]:
        """``x`` as a finite float64 vector of length n, else a one-line ValueError naming ``x``.

        The data is in hand here, so no message names a value, a count or a length of it: only
        what F declares (n) and what was wrong. A histogram holds counts (non-negative integers);
        other vectors are refused unless ``allow_noncounts`` (the claim's neighbours
        ``‖x − x'‖₁ ≤ 1`` hold for any real x, but negative or fractional counts are usually a
        mistake: a difference of tables, weights, a column of records).
        """
        check_flag("allow_noncounts", allow_noncounts)
        arr = _real_array(x, "x must be a real numeric vector (the histogram: one count per column of F)")
        if arr.ndim != 1 or arr.shape[0] != self.n:
            got = "a vector of another length" if arr.ndim == 1 else f"a {arr.ndim}-D array"
            raise ValueError(f"x must be a vector of length {self.n} (one count per column of F), got {got}; "
                             "knorm.data.histogram(table, domain) makes one from records")
        return _finite_counts(arr, "x", allow_noncounts,
                              "a histogram holds counts of records (non-negative integers); pass allow_noncounts=True "
                              "to release another real vector (the claim covers any x whose neighbours differ by "
                              "‖x − x'‖₁ ≤ 1)")

    def _entry_bound(self) -> float:
        """``max|F_ij|`` (public, computed once; no |F| copy of F)."""
        if getattr(self, "workload", None) is not None:  # an implicit F (strategies): 2^(e+1) from its scale 2^e
            return float(np.ldexp(1.0, self._exp + 1))  # type: ignore[attr-defined]
        top = getattr(self, "_f_top", None)
        if top is None and self._match is not None:
            top = self._f_top = abs(self._match.scale) if np.any(self._match.rows >= 0) else 0.0
        if top is None:
            top = self._f_top = float(max(self.F.max(), -self.F.min())) if self.F.size else 0.0
        return top

    def _check_magnitude(self, X: NDArray[np.float64], name: str, k: int | None = None) -> None:
        """:func:`check_magnitude` of ``max|F|·max_i ‖x_i‖₁`` (X one vector or rows of them; a bound on
        every ``|(F x_i)_j|`` and on each term and partial sum of it), on the release grid (or ``k``)."""
        k = self._release_grid() if k is None else k
        with np.errstate(over="ignore", invalid="ignore"):
            l1 = float(np.max(np.sum(np.abs(X), axis=-1))) if X.size else 0.0
            bound = self._entry_bound() * l1
        check_magnitude(bound if np.isfinite(bound) else float("inf"), k, name)

    @abstractmethod
    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        """Noise vector(s) of the mechanism: (d,) or (size, d)."""

    def release(self, x: ArrayLike, size: int | None = None, *,
                allow_noncounts: bool = False) -> NDArray[np.float64]:
        """``Fx + noise`` on the public grid ``2^k`` (``grid_exponent``): one answer (d,) or ``size``
        answers (size, d), each with fresh noise, each the exact sum ``fl(Fx) + noise`` rounded to the
        nearest multiple of ``2^k`` (docs/design.md §10.1: no floating-point side channel).

        The answers are counted in :attr:`privacy` (``size`` answers on the same data cost
        ``size·ε``) and spent on the ``accountant``, which is checked before any noise is
        drawn. Non-finite answers raise instead of being returned. ``x`` must hold counts
        (non-negative integers) unless ``allow_noncounts=True`` (:meth:`check_x`).
        """
        x = self.check_x(x, allow_noncounts)
        m = check_size(size, self.d)
        with np.errstate(over="ignore", invalid="ignore"):
            fx = self._fx(x)
        if not np.all(np.isfinite(fx)):
            raise ValueError("x is too large: Fx overflows float64")
        self._check_grid()
        self._check_magnitude(x, "x")
        self._check_budget(m or 1)
        if self._checkpoint is not None:  # a resumed session may only repeat its releases on the same data
            self._checkpoint.note("release", x, m)
        noise = self.sample_noise(size)
        out = check_finite_output(snap_sum(fx, noise, self._release_grid()), "the answer")
        self._spend(m or 1)
        return out

    def check_regions(self, X: ArrayLike, allow_noncounts: bool = False) -> NDArray[np.float64]:
        """``X`` as a finite float64 (regions, n) array, one histogram per row, else a one-line
        ValueError naming ``X`` (no value, row or count of the data is named: only F's n and
        what was wrong, as :meth:`check_x`)."""
        check_flag("allow_noncounts", allow_noncounts)
        arr = _real_array(X, "X must be a real numeric array (regions × cells: one histogram per row)")
        if arr.ndim != 2 or arr.shape[1] != self.n or arr.shape[0] == 0:
            got = f"a {arr.ndim}-D array" if arr.ndim != 2 else "rows of another length or no row"
            raise ValueError(f"X must be a 2-D array with at least one row of {self.n} counts (one histogram per "
                             f"region, one count per column of F), got {got}; knorm.data.histograms(table, domain, "
                             "by=...) makes one from records")
        check_size(arr.shape[0], self.n + self.d)  # X as float64, its answers and their noise: refused if too large
        return _finite_counts(arr, "X", allow_noncounts, "histograms hold counts of records (non-negative integers); "
                              "pass allow_noncounts=True to release other real vectors")

    def release_each(self, X: ArrayLike, *, allow_noncounts: bool = False,
                     disjoint: bool | None = None) -> NDArray[np.float64]:
        """One answer ``F x_i + noise_i`` per row of ``X`` (regions, n): (regions, d), on the public grid.

        Each row gets its own noise, drawn as consecutive single releases would be (for K-norm and
        NIM from the bank, no draw used twice, consecutive rows from different chains). What the
        batch costs depends on what is known of the rows:

        * **disjoint** data sets (regions: every record in one row) cost one answer's ε and δ
          (parallel composition: :meth:`PrivacyClaim.parallel`; :attr:`privacy` then says
          ``datasets`` and why they are disjoint). The library knows it of the histograms
          :func:`knorm.data.histograms` makes (``by=``: they carry the fact, as do their row
          slices ``X[a:b]``), and takes the caller's word for ``disjoint=True`` (the claim says
          "disjoint by the caller's declaration").
        * otherwise (a plain array, or ``disjoint=False``) the rows count as R answers on the same
          data: R·ε, checked against the accountant before anything is drawn.

        Releasing on the same regions again composes as usual: k batches cost kε. ``X`` holds
        counts unless ``allow_noncounts=True``.
        """
        basis = disjoint_basis(X, disjoint)
        X = self.check_regions(X, allow_noncounts)
        R = len(X)
        with np.errstate(over="ignore", invalid="ignore"):
            fx = self._answers_of(X)
        if not np.all(np.isfinite(fx)):
            raise ValueError("X is too large: its answers F x overflow float64")
        self._check_grid()
        self._check_magnitude(X, "X")
        self._check_budget(1 if basis else R)
        if self._checkpoint is not None:  # a resumed session may only repeat its releases on the same data
            self._checkpoint.note("release_each", X)
        out = check_finite_output(self._noisy_rows(fx, X), "the answer")
        self._spend(1, datasets=R, basis=basis) if basis else self._spend(R)
        return out

    def _answers_of(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``F x_i`` for each row of X: (regions, d)."""
        return self._fx(X)

    def _noisy_rows(self, fx: NDArray[np.float64], X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each row's answers plus its own noise, on the grid (one noise draw per row, in order)."""
        noise = np.atleast_2d(self.sample_noise(len(fx)))
        return snap_sum(fx, noise, self._release_grid())

    def _rms_estimate(self, n_samples: int | None = None) -> ErrorEstimate:
        """``√E‖noise‖₂²`` as an :class:`ErrorEstimate`: exact, from the mechanism's ``rms_error()``
        (K-norm and NIM override it)."""
        return ErrorEstimate(float(self.rms_error()), 0.0, True,  # type: ignore[attr-defined]
                             "exact: √E‖noise‖₂² (rms_error)")

    # -- per-answer uncertainty (issue 50 item 3: knorm.mechanisms.uncertainty) ---------------------
    def _noise_law(self) -> NoiseLaw:
        """The law of this mechanism's noise: by default Monte Carlo over its own noise draws (never
        released); Laplace, Gaussian, the strategies and K-norm override it with exact laws."""
        return DrawsLaw(lambda m: np.atleast_2d(self.sample_noise(m)), False, "noise draws of the mechanism")

    def _postprocess_map(self, postprocess: Any) -> NDArray[np.float64] | None:
        """None (raw answers), the least-squares matrix of F (``"least_squares"``) or a caller's linear
        map P (k, d), validated; a one-line ValueError naming ``postprocess`` otherwise."""
        if postprocess is None:
            return None
        if isinstance(postprocess, str):
            if postprocess != "least_squares":
                raise ValueError(f"postprocess must be None, 'least_squares' or a (k, {self.d}) matrix, got "
                                 f"{short_repr(postprocess)}")
            if getattr(self, "workload", None) is not None:
                raise ValueError("postprocess='least_squares' needs F as a matrix (this mechanism holds an implicit F)")
            return least_squares_matrix(self.F)
        P = as_real_array("postprocess", postprocess).astype(np.float64)
        if P.ndim != 2 or P.shape[1] != self.d or not np.all(np.isfinite(P)):
            raise ValueError(f"postprocess must be None, 'least_squares' or a finite (k, {self.d}) matrix (a linear "
                             f"map of the answers), got shape {P.shape}")
        return P

    def standard_errors(self, *, postprocess: Any = None, n_samples: int | None = None) -> AnswerErrors:
        """Each answer's standard error ``√Var(noise_i)`` (d,), as an :class:`AnswerErrors` (with each
        value's Monte-Carlo SE where it is estimated). ``postprocess``: ``"least_squares"`` (the
        answers of :func:`knorm.postprocess.least_squares`, a linear map P of the raw ones: ``√diag(P Σ
        Pᵀ)``) or any linear map P (k, d). ``n_samples``: draws of a simulation (None: the default).
        A function of F, ε and public seeds only, never of the data: it costs no privacy."""
        P = self._postprocess_map(postprocess)
        n = None if n_samples is None else check_n_samples(n_samples)
        return self._noise_law().standard_errors(P, n)

    def interval_half_widths(self, *, level: float = 0.9, postprocess: Any = None,
                             n_samples: int | None = None) -> AnswerErrors:
        """Per answer the q with ``Pr(|noise_i| <= q) = level``: the central ``level`` confidence
        interval of ``(Fx)_i`` is ``answer_i ± q`` (exact for Laplace and Gaussian noise, else by
        simulation: ``method`` says which). ``postprocess`` and ``n_samples`` as :meth:`standard_errors`.
        A function of F, ε and public seeds only, never of the data."""
        lv = check_level(level)
        P = self._postprocess_map(postprocess)
        n = None if n_samples is None else check_n_samples(n_samples)
        return self._noise_law().half_widths(lv, P, n)

    def confidence_intervals(self, answers: ArrayLike, *, level: float = 0.9, postprocess: Any = None,
                             n_samples: int | None = None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(lo, hi)``: the central ``level`` confidence interval of every true answer, ``answers ±``
        :meth:`interval_half_widths` (answers (d,) or (m, d): released, or post-processed by
        ``postprocess``). Post-processing of released answers: no privacy cost."""
        return intervals(answers, self.interval_half_widths(level=level, postprocess=postprocess,
                                                            n_samples=n_samples))

    def _grid_k_of(self) -> int | None:
        """The grid from the public scale ``min_i max_j |F_ij| / ε`` (K's extent along its thinnest
        answer coordinate over ε; a lower bound on the noise of every coordinate of a pure ε-DP
        K-norm answer); Laplace and Gaussian use their own scale."""
        extent = abs(self._match.scale) if self._match is not None else row_extent(self.F)  # every live row: max |scale|
        return grid_exponent_of(extent, self.epsilon, self.epsilon)  # type: ignore[attr-defined]

    def _one_or_many(self, draws: NDArray[np.float64], size: int | None) -> NDArray[np.float64]:
        return draws[0] if size is None else draws
