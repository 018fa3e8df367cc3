"""No floating-point side channel (issue #37, docs/design.md §10.1): every release lies on a public
power-of-two grid, computed exactly; Mironov's attack names x with certainty against float
Laplace (the control, written here) and never against the defended mechanisms."""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from knorm import LaplaceMechanism
from knorm.audit_fp import certain_attack, float_attainable, laplace_attainable, low_bits_attack, numpy_laplace, undefended
from knorm.mechanisms._grid import GRID_BITS, MIN_EXP, RANGE_BITS, grid_details, grid_exponent, on_grid, snap, snap_sum

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("fp_attack", ROOT / "scripts" / "fp_attack.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _exact_round(a: float, n: float, k: int) -> float:
    """round-half-even of the real a + n onto the float64 multiples of 2^k, in rationals: onto 2^k Z
    below 2^(k+52) in size; above, every float64 is such a multiple (their spacing is at least 2^k),
    and Python's float of a Fraction is the correctly rounded (ties-to-even) one."""
    y = Fraction(a) + Fraction(n)
    if abs(y) >= Fraction(2) ** (k + 52):
        return float(y)
    q = y / Fraction(2) ** k
    f = q.numerator // q.denominator
    rem = q - f
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and f % 2):
        f += 1
    return float(f * Fraction(2) ** k)


def test_snap_sum_is_the_exact_rounding_of_the_real_sum():
    """Every size of sum, the grid's range ±2^(k+53) and far past it (issue 42: nothing clamped)."""
    rng = np.random.default_rng(0)
    for t in range(6000):
        k = int(rng.integers(-30, 6))
        a = float(rng.integers(0, 10**7)) if t % 2 else float(rng.normal() * 10.0 ** rng.integers(-2, 8))
        n = float(rng.laplace() * 10.0 ** rng.integers(-4, 3))
        if t % 3 == 0:  # a tie of the float sum, pushed either way (or not) by bits below it
            a = float(rng.integers(0, 1000))
            n = float((rng.integers(-100, 100) + 0.5) * 2.0**k) + float(rng.choice([0.0, 2.0**(k - 60), -2.0**(k - 60)]))
        elif t % 5 == 0:  # near the range's edges 2^(k+51..54), where the float spacing passes γ/2, γ, 2γ
            a = float(rng.choice([-1, 1]) * (2.0 ** (k + int(rng.integers(51, 55))) + float(rng.integers(-64, 64)) * 2.0**k))
            n = float(rng.integers(-8, 8)) * 2.0 ** (k - 2) + float(rng.laplace()) * 2.0 ** (k - int(rng.integers(0, 60)))
        elif t % 7 == 0:  # far beyond the range: sums of 10^13..10^300 on grids down to 2^-30
            a = float(rng.normal() * 10.0 ** rng.integers(13, 300))
        assert snap_sum(a, n, k) == _exact_round(a, n, k), (a, n, k)


def test_snap_edges():
    assert np.signbit(snap(-1e-3, 0)) == False  # noqa: E712  (−0.0 would tell the sign)
    assert snap_sum(1e300, 1e300, 0) == 2e300  # far past the grid's range: float64's spacing, never clamped
    assert snap_sum(2.0**60, 0.75, 0) == 2.0**60 and snap_sum(2.0**52, 0.75, 0) == 2.0**52 + 1
    assert not np.isfinite(snap_sum(1e308, 1e308, 0))  # an overflow stays visible (the callers refuse it)
    for s in (1e-290, 0.37, 1.0, 3.0, 7.9e12, 1e300):
        k = grid_exponent(s)
        assert 2.0**k <= s * 2.0**-GRID_BITS < 2.0 ** (k + 1)
        assert grid_details(k)["grid_range"] == (2.0 ** (k + RANGE_BITS) if k + RANGE_BITS < 1024 else np.finfo(float).max)
    assert grid_exponent(2.0 ** (MIN_EXP + GRID_BITS)) == MIN_EXP  # γ stays far above the subnormals
    with pytest.raises(ValueError, match=r"^epsilon=1e\+300 gives a noise scale that is below 2\^-990"):
        grid_exponent(1e-305, epsilon=1e300)  # no grid 2^10 below the noise: refused, not coarsened
    with np.errstate(all="raise"):  # noise scales near float64's top: the range stays finite
        assert grid_details(1013)["grid_range"] == np.finfo(float).max
        assert snap_sum(1e308, -3e307, 1000) == _exact_round(1e308, -3e307, 1000)


def test_mironov_certain_against_float_laplace_control():
    """The control: float Laplace ``x + Lap(1)`` as numpy draws it; the attack must succeed on it."""
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, 400)
    a = truth + rng.laplace(0.0, 1.0, size=400)
    r = certain_attack("float Laplace", a, truth, 0.0, 1.0, 1.0)
    assert r.certain_right >= 0.6 and r.certain_wrong == 0.0
    g, h = np.random.default_rng(5), np.random.default_rng(5)  # the attacker's model of numpy's sampler: bit-exact
    assert np.array_equal(g.laplace(0.0, 1.7, size=1000), [numpy_laplace(u, 1.7) for u in h.random(1000)])
    assert laplace_attainable(a[0], float(truth[0]), 1.0)  # the truth is always attainable


def test_attack_harness_defended_at_chance_controls_succeed():
    """Every mechanism of scripts/fp_attack.py, 300 answers each: defended, no certain answer (≤ 1%),
    certainty attacks' accuracy within e/(1 + e) and low bits within 4 standard errors of chance;
    controls (the float release of before): the granularity attack names x with certainty, never
    wrongly, on every mechanism, and Mironov's on the Laplace-noise ones in most answers."""
    results = {r.name: r for r in _script().run(300, seed=3, log=lambda s: None)}
    assert len(results) == 54
    for name, r in results.items():
        if name.endswith("defended"):
            if r.certain_right is not None:
                assert r.certain_right <= 0.01 and r.certain_wrong <= 0.01, name
                assert r.accuracy <= np.e / (1 + np.e) + 4 * np.sqrt(0.25 / r.answers), name
            else:  # the low-bit classifier
                assert abs(r.accuracy - 0.5) <= 4 * np.sqrt(0.25 / r.answers), name
        elif "Mironov" in name:
            assert r.certain_right >= 0.6 and r.certain_wrong == 0.0, name
        elif "granularity" in name:
            assert r.certain_right >= 0.02 and r.certain_wrong == 0.0, name


def test_granularity_exclusions_are_exact():
    """fl(1 + n) is a multiple of 2⁻⁵³ wherever it is below 1/2: 0.3 cannot come from x = 1; on the
    grid every cell holds floats, so a grid answer comes from either x."""
    assert not float_attainable(0.3, 1.0) and float_attainable(0.3, 0.0) and float_attainable(0.25, 1.0)
    assert float_attainable(1.3, 1.0) and not float_attainable(0.3, 1.0, -10)
    assert float_attainable(307 * 2.0**-10, 1.0, -10) and float_attainable(307 * 2.0**-10, 0.0, -10)


@pytest.mark.parametrize("i", range(12))
def test_every_release_is_on_its_grid_and_the_claim_says_it(i):
    mod = _script()
    name, F, make, _ = mod.cases()[i]
    truth = np.array([0, 1, 1, 0])
    mech, a, _, _ = mod.answers_of(F, make, truth, np.random.default_rng(i))
    k = mech.grid_exponent
    assert on_grid(a, k), name
    claim = json.loads(json.dumps(mech.privacy.as_dict()))
    assert claim["details"]["grid"] == 2.0**k and claim["details"]["grid_exponent"] == k, name
    assert claim["details"]["grid_range"] == 2.0 ** (k + RANGE_BITS) and "nothing clamped" in claim["details"]["rounding"]


def test_release_is_the_rounded_float_release_and_seeded_runs_repeat():
    F, x = np.array([[1.0, 1.0], [0.5, 0.0]]), np.array([3.0, 4.0])
    one = LaplaceMechanism(F, epsilon=0.9, rng=4).release(x, size=50)
    assert np.array_equal(one, LaplaceMechanism(F, epsilon=0.9, rng=4).release(x, size=50))
    with undefended():
        raw = LaplaceMechanism(F, epsilon=0.9, rng=4).release(x, size=50)
    g = LaplaceMechanism(F, epsilon=0.9).privacy_per_answer.details["grid"]
    assert np.all(np.abs(one - raw) <= g / 2) and not on_grid(raw, grid_exponent(g * 2**GRID_BITS))


def test_low_bits_classifier_finds_planted_low_bits():
    """The classifier is not blind: answers whose lowest bit is x itself are named."""
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 2, 400)
    a = (rng.normal(size=400) + 10.0).view(np.uint64)
    a = ((a & ~np.uint64(1)) | truth.astype(np.uint64)).view(np.float64)
    assert low_bits_attack("planted", a, truth, 1.0).accuracy > 0.95


@pytest.mark.parametrize("i", [2, 3])  # K-norm exact: one cell, prefix(4)
def test_low_bits_name_x_from_float_knorm_answers_and_not_from_grid_ones(i):
    """Correlated noise leaks too: on float K-norm answers ``fl(Fx + r·z)`` (the control) the low-bit
    classifier beats chance by many standard errors; on the grid it is at chance."""
    mod = _script()
    name, F, make, _ = mod.cases()[i]
    truth = np.random.default_rng(9).permutation(np.arange(4000) % 2)
    with undefended():
        _, a, _, fx1 = mod.answers_of(F, make, truth, np.random.default_rng(10))
    assert low_bits_attack(name, a[:, 0], truth, fx1[0]).accuracy >= 0.5 + 4 * np.sqrt(0.25 / 2000)
    mech, a, _, fx1 = mod.answers_of(F, make, truth, np.random.default_rng(10))  # the grid integers' low bits
    r = low_bits_attack(name, a[:, 0], truth, fx1[0], mech.grid_exponent)
    assert abs(r.accuracy - 0.5) <= 4 * np.sqrt(0.25 / 2000)


@pytest.mark.parametrize("mech", ["laplace", "knorm"])
def test_command_line_answers_on_the_grid_and_the_json_says_it(mech, tmp_path, capsys):
    from knorm import cli
    np.save(tmp_path / "x.npy", np.arange(20.0))
    out = tmp_path / "r.npz"
    rc = cli.main(["sample", "--d", "6", "--n", "20", "--mechanism", mech, "--count", "3", "--json",
                   "--data", str(tmp_path / "x.npy"), "--out", str(out)])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0
    details = summary["privacy_per_answer"]["details"]
    assert details["grid"] == 2.0 ** details["grid_exponent"] and details["grid_range"] == 2.0 ** (details["grid_exponent"] + RANGE_BITS)
    with np.load(out) as z:
        assert on_grid(z["samples"], details["grid_exponent"])
        assert json.loads(str(z["privacy"]))["details"]["grid"] == details["grid"]
