"""Precision-based attacks on released floats (docs/design.md §10.1).

Three attacks on neighbouring inputs ``x ∈ {x₀, x₁}`` (the empty histogram and one record in the
first cell), each given the released answers and the public F, ε:

* :func:`certain_attack` -- Mironov's (CCS 2012) on numpy's Laplace sampler: for each answer
  a and each candidate x, can a be released from x by some noise the sampler can produce?
  numpy draws ``n = loc − b·log(2 − 2U)`` (U >= 1/2) or ``loc + b·log(2U)``, U on the 2⁻⁵³ grid
  (``random_laplace`` in numpy's ``distributions.c``; reproduced here with libm's ``log``, as
  numpy's C code calls it). Where exactly one candidate can, the attacker names it *with
  certainty*; else it guesses by the likelihood (the nearer answer). A pure ε-DP mechanism
  allows no certain answer and at most ``e^ε/(1 + e^ε)`` accuracy.
* :func:`granularity_attack` -- for any mechanism, knowing nothing of its sampler: a candidate
  x is impossible when an answer coordinate a cannot be ``fl((Fx)ᵢ + n)`` for *any* float n
  (e.g. ``fl(1 + n)`` is a multiple of 2⁻⁵³ wherever ``|a| < 1/2``, while noise alone, as
  from x₀ = 0, has finer bits there); named with certainty where one candidate is left.
* :func:`low_bits_attack` -- for any mechanism: a naive-Bayes classifier on the 8 lowest
  bits of the float64 answer and of ``fl(a − F x₁)`` (first coordinate), trained on half the
  answers and scored on the other half (on grid answers: the low bits of the grid integers
  ``a/γ``). The low bits carry no likelihood information, so a release with no
  floating-point channel leaves it at chance (50%).

``undefended()`` puts back, for the duration of a ``with``, the float release of knorm
before issue #37 (``fl(Fx + noise)``, no grid): the harness's control. ``scripts/fp_attack.py``
runs both attacks against every mechanism, controlled and defended.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .mechanisms._grid import snap_sum

TWO53 = 2.0**53


def numpy_laplace(u: float, b: float) -> float:
    """numpy's Laplace(0, b) draw from its uniform ``u`` (a multiple of 2⁻⁵³ in (0, 1)), bit for bit."""
    return 0.0 - b * math.log(2.0 - u - u) if u >= 0.5 else 0.0 + b * math.log(u + u)


def _u_of(t: float, b: float) -> float:
    """The (real) uniform whose Laplace(0, b) draw is t: the inverse of :func:`numpy_laplace`."""
    return 1.0 - 0.5 * math.exp(-t / b) if t >= 0 else 0.5 * math.exp(t / b)


def laplace_attainable(a: float, c: float, b: float, k: int | None = None, probes: int = 400) -> bool:
    """Can the answer a be released from the true answer c by numpy's Laplace(0, b)?

    ``k`` None: the float release ``fl(c + n)``; else the grid release ``round_{2^k}(c + n)``
    (:func:`~knorm.mechanisms._grid.snap_sum`). The noises that could give a lie in an interval
    (``a − c ± ulp(a)``, or ``± 2^k``); its uniforms ``j·2⁻⁵³`` are found by the inverse CDF and
    tried (every one if at most ``probes``, else ``probes`` evenly spread: a wide interval is
    attainable at its interior points)."""
    a, c = float(a), float(c)
    if k is None:
        w = 2.0 * math.ulp(a) + 2.0 * math.ulp(c)
        def release(n: float) -> float:
            return c + n
    else:
        w = 2.0 * math.ldexp(1.0, k)
        def release(n: float) -> float:
            return float(snap_sum(c, n, k))
    lo, hi = _u_of(a - c - w, b), _u_of(a - c + w, b)
    jlo, jhi = max(1, math.floor(lo * TWO53) - 2), min(int(TWO53) - 1, math.ceil(hi * TWO53) + 2)
    if jhi < jlo:
        return False
    js = np.arange(jlo, jhi + 1) if jhi - jlo <= probes else np.linspace(jlo, jhi, probes).astype(np.int64)
    js = js[np.argsort(np.abs(js - (jlo + jhi) // 2), kind="stable")]  # the interior first: a wide interval hits at once
    return any(release(numpy_laplace(int(j) / TWO53, b)) == a for j in js)


@dataclass
class AttackResult:
    """Rates over the attacked answers: ``certain_right``/``certain_wrong`` (fractions named with
    certainty, rightly / wrongly; None where the attack has no certainty test) and ``accuracy``."""

    name: str
    answers: int
    certain_right: float | None
    certain_wrong: float | None
    accuracy: float

    def row(self) -> str:
        def pct(v: float | None) -> str:
            return "      —" if v is None else f"{100 * v:6.1f}%"
        return f"{self.name:<44} {self.answers:>6} {pct(self.certain_right)} {pct(self.certain_wrong)} " \
               f"{100 * self.accuracy:6.1f}%"


def certain_attack(name: str, answers: ArrayLike, truth: ArrayLike, fx0: float, fx1: float, b: float,
                   k: int | None = None) -> AttackResult:
    """Mironov's attack on first coordinates ``answers`` (true inputs ``truth`` ∈ {0, 1}; true
    answers fx0, fx1 there; Laplace scale b; the grid ``2^k`` the attacker assumes, None: floats)."""
    answers, truth = np.asarray(answers, float), np.asarray(truth, int)
    right = wrong = correct = 0
    for a, t in zip(answers, truth):
        can0, can1 = laplace_attainable(a, fx0, b, k), laplace_attainable(a, fx1, b, k)
        if can0 != can1:
            guess = 0 if can0 else 1
            right += guess == t
            wrong += guess != t
        else:
            guess = 0 if abs(a - fx0) < abs(a - fx1) else 1
        correct += guess == t
    m = len(answers)
    return AttackResult(name, m, float(right / m), float(wrong / m), float(correct / m))


def float_attainable(a: float, c: float, k: int | None = None) -> bool:
    """Is there ANY float64 noise n with ``fl(c + n) = a`` (``k`` None) or ``round_{2^k}(c + n) = a``?

    Generous to the mechanism (every float is taken as a possible noise value), exact: ``fl(c + n)``
    is monotone in n, so the floats nearest the real ``a − c`` (and their neighbours) decide."""
    a, c = float(a), float(c)
    t = Fraction(a) - Fraction(c)
    n0 = float(t)  # the nearest float (ties to even)
    if not math.isfinite(n0):
        return False
    near = [n0, math.nextafter(n0, math.inf), math.nextafter(n0, -math.inf),
            math.nextafter(math.nextafter(n0, math.inf), math.inf), math.nextafter(math.nextafter(n0, -math.inf), -math.inf)]
    if k is None:
        return any(c + n == a for n in near)
    return any(float(snap_sum(c, n, k)) == a for n in near)


def granularity_attack(name: str, answers: ArrayLike, truth: ArrayLike, fx0: ArrayLike, fx1: ArrayLike,
                       k: int | None = None) -> AttackResult:
    """For any mechanism: candidate x is excluded when some coordinate of its answer cannot be
    ``fl((Fx)ᵢ + n)`` for any float n (:func:`float_attainable`); where exactly one candidate is
    left it is named with certainty, else the nearer first coordinate is guessed. ``answers``
    (m, d), ``fx0``/``fx1`` the true answers (d,) of x₀ and x₁ (``k``: the grid the attacker assumes)."""
    A = np.atleast_2d(np.asarray(answers, float))
    if A.shape[0] == 1 and np.ndim(answers) == 1:
        A = A.T
    f0, f1 = np.atleast_1d(np.asarray(fx0, float)), np.atleast_1d(np.asarray(fx1, float))
    truth = np.asarray(truth, int)
    right = wrong = correct = 0
    for a, t in zip(A, truth):
        can0 = all(float_attainable(ai, ci, k) for ai, ci in zip(a, f0))
        can1 = all(float_attainable(ai, ci, k) for ai, ci in zip(a, f1))
        if can0 != can1:
            guess = 0 if can0 else 1
            right += guess == t
            wrong += guess != t
        else:
            guess = 0 if abs(a[0] - f0[0]) < abs(a[0] - f1[0]) else 1
        correct += guess == t
    m = len(A)
    return AttackResult(name, m, float(right / m), float(wrong / m), float(correct / m))


def _low_bits(v: NDArray[np.float64]) -> NDArray[np.int64]:
    """The 8 lowest bits of each float64's pattern, as an (m, 8) 0/1 array."""
    u = np.ascontiguousarray(v, dtype=np.float64).view(np.uint64)
    return ((u[:, None] >> np.arange(8, dtype=np.uint64)) & np.uint64(1)).astype(np.int64)


def low_bits_attack(name: str, answers: ArrayLike, truth: ArrayLike, fx1: float, k: int | None = None
                    ) -> AttackResult:
    """Naive Bayes on the 8 lowest bits of a and of ``fl(a − fx1)`` (first coordinates; 16 Bernoulli
    features): trained on the even-numbered answers, scored on the odd ones (``truth`` ∈ {0, 1}).
    ``k``: answers on the grid ``2^k``; the bits are then those of the grid integers ``a·2^-k``
    (the float's own low bits are all zero there)."""
    a, t = np.asarray(answers, float), np.asarray(truth, int)
    if k is None:
        bits = np.hstack([_low_bits(a), _low_bits(a - fx1)])
    else:
        q = [np.rint(np.ldexp(v, -k)).astype(np.int64).view(np.float64) for v in (a, a - fx1)]
        bits = np.hstack([_low_bits(v) for v in q])  # the int64 patterns' low bits
    train, test = np.arange(0, len(a), 2), np.arange(1, len(a), 2)
    logp = np.log(np.bincount(t[train], minlength=2) + 1.0)[None, :].repeat(len(test), axis=0)
    for c in (0, 1):
        rows = bits[train][t[train] == c]
        p1 = (rows.sum(axis=0) + 1.0) / (len(rows) + 2.0)  # Laplace smoothing
        logp[:, c] += bits[test] @ np.log(p1) + (1 - bits[test]) @ np.log(1 - p1)
    guess = np.argmax(logp, axis=1)
    return AttackResult(name, len(test), None, None, float(np.mean(guess == t[test])))


@contextlib.contextmanager
def undefended() -> Iterator[None]:
    """Within the ``with``: every release as before issue #37, ``fl(a + n)`` with no grid (the control)."""
    from . import functional
    from .mechanisms import _base, bounded, strategy

    def float_sum(a: ArrayLike, n: ArrayLike, k: int) -> NDArray[np.float64]:
        return np.asarray(a, dtype=np.float64) + n

    def float_value(v: ArrayLike, k: int) -> NDArray[np.float64]:
        return np.asarray(v, dtype=np.float64)

    saved = [(m, name, getattr(m, name)) for m, name in
             [(_base, "snap_sum"), (bounded, "snap_sum"), (strategy, "snap_sum"), (strategy, "snap"),
              (functional, "snap_sum")]]
    try:
        for m, name, _ in saved:
            setattr(m, name, float_value if name == "snap" else float_sum)
        yield
    finally:
        for m, name, f in saved:
            setattr(m, name, f)
