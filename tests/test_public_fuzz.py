"""Every public function of the accounting, discrete, audit, data, post-processing,
functional, workload, diagnostics, plotting and experiment modules, fed odd values in
each numeric (or array) argument: 0, ±1, ±1e±300, NaN, ±inf, wrong types (str, complex,
bool, None, lists), huge sizes (10**12, 10**400), and arrays holding NaN, inf, 1e±300,
complex numbers, strings, objects, bools or nothing.

Property (issue 17): the call either returns a finite valid result (no NaN, no ±inf,
unless the function documents inf) or raises a ValueError/TypeError whose message is one
line and names the argument; never another exception type (MemoryError, OverflowError,
ZeroDivisionError, FloatingPointError, scipy's internal errors) and never a hang (each call
runs under a 20 s alarm). The special values are swept exhaustively; hypothesis adds
random floats, integers, text and complex numbers on top.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import math
import os
import pkgutil
import re
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import knorm
from knorm import audit as A
from knorm import data as D
from knorm import diagnostics as G
from knorm import discrete as R
from knorm import experiments as E
from knorm import functional as Fn
from knorm import implicit as I
from knorm.body.marginal import MarginalMatch, MarginalStructure
from knorm import mechanisms as M
from knorm import postprocess as PP
from knorm import privacy as P
from knorm import workloads as W

NAN, INF = float("nan"), float("inf")
SCALARS = [0, 1, -1, 0.5, 2, 1e300, -1e300, 1e-300, -1e-300, 5e-324, NAN, INF, -INF, np.float64(NAN), "1", "abc",
           1j, 1 + 0j, True, False, None, [1.0], [[1.0, 2.0]], 10**12, 10**400, np.int64(2**62), np.array([1.0, NAN])]


def array_variants(base):
    """Odd versions of a valid array argument (same shape unless the point is the shape)."""
    b = np.asarray(base, dtype=float)
    out = [b * 1e300, b * 1e-300, b + 1e308, -b - 1e308, b.astype(complex) + 1j, b.astype(complex), b.astype(str),
           b.astype(object), b.astype(bool), b.tolist(), b.ravel()[:0], b.ravel()[:1], np.zeros((2, 2, 2)), 5.0, None,
           "x", b.astype(np.float32), b.astype(np.int64)]
    for bad in (NAN, INF, -INF):
        c = b.copy()
        c.flat[0] = bad
        out.append(c)
    for odd in (None, 10**400):  # a missing value; a Python int past float64
        o = b.astype(object)
        o.flat[0] = odd
        out.append(o)
    return out


class Case:
    """``call(**kwargs)`` with valid ``base`` arguments; ``names[arg]``: words one of which the
    error message must contain when ``arg`` is bad; ``arrays``: arguments taking arrays."""

    def __init__(self, label, call, base, names, arrays=(), allow_inf=False, refuse_only=False, none_ok=()):
        self.label, self.call, self.base, self.names = label, call, base, names
        self.arrays, self.allow_inf, self.refuse_only, self.none_ok = set(arrays), allow_inf, refuse_only, none_ok

    def values(self, arg):
        return array_variants(self.base[arg]) + SCALARS if arg in self.arrays else SCALARS


def _rr():
    return R.RandomizedResponse(k=3, epsilon=1.0, rng=0)


def _fd():
    return R.FiniteDomainMechanism(3, epsilon=1.0, delta=0.1, rng=0)


def _result():
    return A.audit_event(A.repeated_answer(), lambda k: np.arange(k, dtype=float), lambda k: np.arange(k, dtype=float),
                         windows=3, window=3)


DOMAIN = D.Domain([D.Attribute("a", edges=[0.0, 1.0, 2.0]), D.Attribute("b", categories=[0, 1, "x"])])
F23 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
DRAWS = np.random.default_rng(0).standard_normal((2, 8))
KDE = Fn.GaussianKDEMechanism([0.0, 1.0, 2.0], bandwidth=1.0, epsilon=0.5, delta=1e-3, rng=0)


def _sampler(k):
    return np.random.default_rng(k).standard_normal(k)


def _plots():
    pytest.importorskip("matplotlib")
    from knorm import plots

    return plots


CASES = [
    # knorm.privacy
    Case("tradeoff_eps_delta", P.tradeoff_eps_delta, dict(alpha=0.5, epsilon=1.0, delta=0.0),
         dict(alpha="alpha", epsilon="epsilon", delta="delta"), arrays=["alpha"]),
    Case("tradeoff_gdp", P.tradeoff_gdp, dict(alpha=0.5, mu=1.0), dict(alpha="alpha", mu="mu"), arrays=["alpha"]),
    Case("gdp_delta", P.gdp_delta, dict(epsilon=1.0, mu=1.0), dict(epsilon="epsilon", mu="mu"), arrays=["epsilon"]),
    Case("gdp_epsilon", P.gdp_epsilon, dict(delta=1e-5, mu=1.0), dict(delta="delta", mu="mu")),
    Case("gdp_mu_for", P.gdp_mu_for, dict(epsilon=1.0, delta=1e-5), dict(epsilon="epsilon", delta="delta")),
    Case("gdp_compose", lambda mus: P.gdp_compose(mus), dict(mus=[1.0, 2.0]), dict(mus="mus"), arrays=["mus"]),
    Case("group_gdp", P.group_gdp, dict(mu=1.0, k=2), dict(mu="mu", k="k")),
    Case("basic_composition", P.basic_composition, dict(epsilons=[1.0, 2.0], deltas=[0.0, 0.1]),
         dict(epsilons="epsilons", deltas="deltas"), arrays=["epsilons", "deltas"]),
    Case("advanced_composition", P.advanced_composition, dict(epsilon=0.1, delta=0.0, k=10, delta_prime=1e-6),
         dict(epsilon="epsilon", delta="delta", k="k", delta_prime="delta_prime")),
    Case("group_privacy", P.group_privacy, dict(epsilon=1.0, delta=1e-6, k=3),
         dict(epsilon="epsilon", delta="delta", k="k")),
    Case("gaussian_mu", P.gaussian_mu, dict(sensitivity=1.0, sigma=2.0), dict(sensitivity="sensitivity", sigma="sigma")),
    Case("epsilon_delta_dp_event", P.epsilon_delta_dp_event, dict(epsilon=1.0, delta=0.0),
         dict(epsilon="epsilon", delta="delta")),
    Case("BudgetAccountant", P.BudgetAccountant, dict(epsilon=1.0, delta=0.5), dict(epsilon="epsilon", delta="delta")),
    Case("BudgetAccountant.spend", lambda epsilon, delta: P.BudgetAccountant(epsilon=2.0, delta=0.5).spend(epsilon, delta),
         dict(epsilon=1.0, delta=0.1), dict(epsilon="epsilon", delta="delta")),
    Case("Spend", P.Spend, dict(epsilon=1.0, delta=0.1), dict(epsilon="epsilon", delta="delta")),
    # knorm.discrete
    Case("RandomizedResponse", lambda k, epsilon: R.RandomizedResponse(k=k, epsilon=epsilon).p_truth,
         dict(k=3, epsilon=1.0), dict(k="k", epsilon="epsilon")),
    Case("RandomizedResponse.release", lambda values: _rr().release(values), dict(values=[0.0, 1.0, 2.0]),
         dict(values="values"), arrays=["values"]),
    Case("RandomizedResponse.estimate_frequencies", lambda reports, epsilon=1.0, k=3:
         R.RandomizedResponse(k=k, epsilon=epsilon).estimate_frequencies(reports),
         dict(reports=[0.0, 1.0, 1.0], epsilon=1.0, k=3), dict(reports="reports", epsilon="epsilon", k="k"),
         arrays=["reports"]),
    Case("FiniteDomainMechanism", lambda m, epsilon, delta: R.FiniteDomainMechanism(m, epsilon=epsilon, delta=delta).p,
         dict(m=3, epsilon=1.0, delta=0.1), dict(m="m", epsilon="epsilon", delta="delta")),
    Case("FiniteDomainMechanism.estimate_frequencies", lambda reports, epsilon=1.0, m=3, delta=0.0:
         R.FiniteDomainMechanism(m, epsilon=epsilon, delta=delta).estimate_frequencies(reports),
         dict(reports=[0.0, 1.0, 3.0], epsilon=1.0, m=3, delta=0.0),
         dict(reports="reports", epsilon="epsilon", m=("m", "reports"), delta="delta"), arrays=["reports"]),
    Case("FiniteDomainMechanism.privacy_profile", lambda epsilon: _fd().privacy_profile(epsilon), dict(epsilon=1.0),
         dict(epsilon="epsilon")),
    Case("FiniteDomainMechanism.lower_bound", lambda kappa: _fd().lower_bound(kappa), dict(kappa=1.0),
         dict(kappa="kappa")),
    # knorm.audit
    Case("clopper_pearson", A.clopper_pearson, dict(k=3, n=10, alpha=0.05), dict(k="k", n="n", alpha="alpha")),
    Case("audit_event", lambda windows, window, delta, alpha: A.audit_event(
        A.repeated_answer(), _sampler, _sampler, windows=windows, window=window, delta=delta, alpha=alpha),
         dict(windows=3, window=3, delta=0.0, alpha=0.05),
         dict(windows="windows", window="window", delta="delta", alpha="alpha")),
    Case("audit", lambda n, delta, alpha, n_proj: A.audit(_sampler, _sampler, n=n, delta=delta, alpha=alpha,
                                                          n_proj=n_proj, rng=0),
         dict(n=100, delta=0.0, alpha=0.05, n_proj=1), dict(n="n", delta="delta", alpha="alpha", n_proj="n_proj")),
    Case("audit outputs", lambda out: A.audit(lambda k: np.resize(np.asarray(out), k), _sampler, n=100, rng=0),
         dict(out=[0.5, 1.5]), dict(out="sample_p"), arrays=["out"], allow_inf=True),
    Case("repeated_answer", A.repeated_answer, dict(atol=0.0), dict(atol="atol")),
    Case("fx_on_line", A.fx_on_line, dict(fx=[1.0, 2.0], tol=1e-9), dict(fx="fx", tol="tol"), arrays=["fx"]),
    Case("AuditResult.refutes", lambda claimed_epsilon: _result().refutes(claimed_epsilon), dict(claimed_epsilon=1.0),
         dict(claimed_epsilon="claimed_epsilon")),
    Case("AuditResult.delta_lower_bound", lambda epsilon: _result().delta_lower_bound(epsilon), dict(epsilon=1.0),
         dict(epsilon="epsilon")),
    # knorm.data
    Case("Attribute(edges)", lambda edges: D.Attribute("a", edges=edges), dict(edges=[0.0, 1.0, 2.0]),
         dict(edges="edges"), arrays=["edges"]),
    Case("Attribute(categories)", lambda categories: D.Attribute("a", categories=categories),
         dict(categories=[0.0, 1.0]), dict(categories=("categories", "category")), arrays=["categories"]),
    Case("Attribute.discretise", lambda values: DOMAIN["a"].discretise(values), dict(values=[0.5, 1.5]),
         dict(values=("values", "attribute")), arrays=["values"]),
    Case("histogram", lambda table: D.histogram(table, DOMAIN), dict(table=[[0.5, 1.0], [1.5, 0.0]]),
         dict(table=("table", "attribute")), arrays=["table"]),
    Case("marginal_keys", lambda k: D.marginal_keys(DOMAIN, k), dict(k=1), dict(k="k")),
    Case("marginal_workload", lambda k: D.marginal_workload(DOMAIN, k), dict(k=1), dict(k="k")),
    Case("split_marginals", lambda k, answers: D.split_marginals(DOMAIN, k, answers),
         dict(k=1, answers=[1.0, 2.0, 3.0, 4.0, 5.0]), dict(k=("k", "answers"), answers="answers"), arrays=["answers"]),
    # knorm.postprocess
    Case("least_squares", lambda F, answers, covariance: PP.least_squares(F, answers, covariance=covariance),
         dict(F=F23, answers=[1.0, 2.0], covariance=[1.0, 2.0]), dict(F="F", answers="answers", covariance="covariance"),
         arrays=["F", "answers", "covariance"]),
    Case("nonnegative", PP.nonnegative, dict(F=F23, answers=[1.0, 2.0]), dict(F="F", answers="answers"),
         arrays=["F", "answers"]),
    Case("project_to_total", PP.project_to_total, dict(F=F23, answers=[1.0, 2.0], total=3.0),
         dict(F="F", answers="answers", total="total"), arrays=["F", "answers"]),
    # knorm.functional
    Case("GaussianKDEMechanism", lambda data, bandwidth, epsilon, delta: Fn.GaussianKDEMechanism(
        data, bandwidth=bandwidth, epsilon=epsilon, delta=delta, rng=0).kde([0.5]),
         dict(data=[0.0, 1.0, 2.0], bandwidth=1.0, epsilon=0.5, delta=1e-3),
         dict(data=("data", "points"), bandwidth="bandwidth", epsilon="epsilon", delta="delta"), arrays=["data"]),
    Case("GaussianKDEMechanism.kde", lambda t: KDE.kde(t), dict(t=[0.5, 1.5]), dict(t="points"), arrays=["t"]),
    Case("PrivateDensity", lambda t: KDE.release()(t), dict(t=[0.5, 1.5]), dict(t="points"), arrays=["t"]),
    # knorm.workloads
    Case("identity", W.identity, dict(n=3), dict(n="n")),
    Case("prefix", W.prefix, dict(n=3), dict(n="n")),
    Case("all_range", W.all_range, dict(n=3), dict(n="n")),
    Case("width_range", W.width_range, dict(n=4, k=2), dict(n="n", k="k")),
    Case("marginals", W.marginals, dict(shape=[2, 3], k=1), dict(shape="shape", k="k"), arrays=["shape"]),
    Case("clique_marginals", W.clique_marginals, dict(shape=[2, 3], cliques=[[0], [0, 1]]),
         dict(shape=("shape", "cliques"), cliques="cliques")),
    Case("random_pm1", lambda d, n, rng: W.random_pm1(d, n, rng=rng), dict(d=2, n=3, rng=0),
         dict(d="d", n="n", rng="rng")),
    Case("random_bernoulli", lambda d, n, p: W.random_bernoulli(d, n, p=p, rng=0), dict(d=2, n=3, p=0.5),
         dict(d="d", n="n", p="p")),
    Case("by_name", lambda n, k: W.by_name("width_range", n=n, k=k), dict(n=4, k=2), dict(n="n", k="k")),
    # knorm.diagnostics
    Case("rhat", G.rhat, dict(draws=DRAWS), dict(draws="draws"), arrays=["draws"], allow_inf=True),
    Case("ess", G.ess, dict(draws=DRAWS, method="bulk"), dict(draws="draws", method="method"), arrays=["draws"]),
    Case("autocorrelation_time", G.autocorrelation_time, dict(draws=DRAWS), dict(draws="draws"), arrays=["draws"]),
    # knorm.experiments: only refusals are checked (a valid value runs a benchmark)
    Case("compare_oracles", lambda d, n, highs_steps, ess_steps: E.compare_oracles(
        d, n, highs_steps=highs_steps, ess_steps=ess_steps, out=lambda s: None),
         dict(d=4, n=8, highs_steps=5, ess_steps=50),
         dict(d="d", n="n", highs_steps="highs_steps", ess_steps="ess_steps"), refuse_only=True, none_ok=["ess_steps"]),
    Case("table3", lambda ds, n, eps_list, releases: E.table3(ds, n, eps_list, releases=releases, out_dir="/nonexistent",
                                                              plot_path=False, out=lambda s: None),
         dict(ds=[4], n=8, eps_list=[1.0], releases=2),
         dict(ds="ds", n="n", eps_list="eps_list", releases="releases"), refuse_only=True),
    Case("scaling", lambda ds, factors, seconds, chains: E.scaling(ds, factors, seconds=seconds, chains=chains,
                                                                   out_dir="/nonexistent", out=lambda s: None),
         dict(ds=[4], factors=[1], seconds=0.1, chains=1),
         dict(ds="ds", factors="factors", seconds="seconds", chains="chains"), refuse_only=True),
    Case("family_workload", lambda size: E.family_workload("pm1", size), dict(size=3), dict(size="size")),
    Case("measure_workload", lambda seconds, pivot_seconds, chains: E.measure_workload(
        F23, seconds=seconds, pivot_seconds=pivot_seconds, chains=chains),
         dict(seconds=0.1, pivot_seconds=0.1, chains=1),
         dict(seconds="seconds", pivot_seconds="pivot_seconds", chains="chains"), refuse_only=True),
    Case("measure_with_timeout", E.measure_with_timeout, dict(limit=10.0), dict(limit="limit"), refuse_only=True),
]

PLOT_CASES = [
    Case("plots.trace", lambda coord: _plots().trace(np.random.default_rng(0).standard_normal((2, 8, 2)), coord),
         dict(coord=0), dict(coord="coord")),
    Case("plots.rank", lambda coord, bins: _plots().rank(np.random.default_rng(0).standard_normal((2, 8, 2)), coord,
                                                         bins=bins),
         dict(coord=0, bins=4), dict(coord="coord", bins="bins")),
    Case("plots.autocorrelation", lambda max_lag: _plots().autocorrelation(
        np.random.default_rng(0).standard_normal((2, 8, 2)), max_lag=max_lag), dict(max_lag=3), dict(max_lag="max_lag")),
    Case("plots.ess_rhat", lambda source: _plots().ess_rhat(source), dict(source=DRAWS), dict(source="draws"),
         arrays=["source"]),
    Case("plots.expected_errors", lambda epsilons, n_samples: _plots().expected_errors(
        np.eye(2), epsilons, mechanisms=("laplace",), n_samples=n_samples),
         dict(epsilons=[1.0], n_samples=10), dict(epsilons=("epsilon", "epsilons"), n_samples="n_samples"), arrays=["epsilons"]),
]

ALL = CASES + PLOT_CASES
ARGS = [(c, arg) for c in ALL for arg in c.names]


@contextmanager
def alarm(seconds=20):
    """A hang fails the test (SIGALRM) instead of stalling the suite."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _finite(out, allow_inf):
    """Every number in ``out`` (nested tuples, lists, dicts, arrays, dataclasses) is finite."""
    if isinstance(out, (bool, np.bool_, str, type(None))) or callable(out):
        return True
    if isinstance(out, (int, float, np.number)):
        return not math.isnan(out) and (allow_inf or math.isfinite(out))
    if isinstance(out, np.ndarray):
        if out.dtype.kind in "iub":
            return True
        if out.dtype.kind == "f":
            return not np.isnan(out).any() and (allow_inf or np.isfinite(out).all())
        return all(_finite(v, allow_inf) for v in out.ravel().tolist())
    if isinstance(out, (tuple, list)):
        return all(_finite(v, allow_inf) for v in out)
    if isinstance(out, dict):
        return all(_finite(v, allow_inf) for v in out.values())
    if hasattr(out, "__dataclass_fields__"):  # AuditResult (p_hat is NaN on a documented failure), Spend
        return _finite(getattr(out, "epsilon_lower_bound", getattr(out, "epsilon", 0.0)), True)
    return True  # other objects (figures, DpEvents, mechanisms, accountants)


def check(case, arg, value):
    kwargs = dict(case.base, **{arg: value})
    names = case.names[arg] if isinstance(case.names[arg], tuple) else (case.names[arg],)
    try:
        with np.errstate(over="raise", divide="raise", invalid="raise"), alarm():  # a silent overflow is a finding
            out = case.call(**kwargs)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert "\n" not in msg, f"{case.label}({arg}={value!r}): message over several lines: {msg!r}"
        assert any(re.search(rf"(^|\W){re.escape(n)}(\W|$)", msg) for n in names), \
            f"{case.label}({arg}={value!r}): {names} not named in: {msg}"
        return "refused"
    except FileNotFoundError as exc:  # a file name that names no file: open()'s own error, documented
        assert isinstance(value, str) and exc.filename == value, f"{case.label}({arg}={value!r}): {exc}"
        return "refused"
    except FloatingPointError as exc:
        pytest.fail(f"{case.label}({arg}={value!r}): silent floating-point trouble: {exc}")
    except Exception as exc:  # noqa: BLE001 - the point: no other type
        pytest.fail(f"{case.label}({arg}={value!r}): {type(exc).__name__}: {exc}")
    assert not case.refuse_only, f"{case.label}({arg}={value!r}) was accepted"
    assert _finite(out, case.allow_inf), f"{case.label}({arg}={value!r}) returned a non-finite result: {out!r}"
    return "answered"


@pytest.mark.parametrize("case,arg", ARGS, ids=[f"{c.label}-{a}" for c, a in ARGS])
def test_special_values(case, arg):
    if case.refuse_only:
        # only values that must be refused: running with a valid one is a benchmark
        values = [v for v in case.values(arg) if _must_refuse(v) and not (v is None and arg in case.none_ok)]
    else:
        values = case.values(arg)
    for value in values:
        check(case, arg, value)


def _must_refuse(v):
    """Values no size, count, duration or list argument of an experiment accepts."""
    if isinstance(v, (str, complex, bool, type(None))):
        return True
    if isinstance(v, (int, np.integer)):
        return v <= 0 or v >= 10**12  # a million-million steps, cells or releases: refused before the run
    if isinstance(v, (float, np.floating)):
        return not math.isfinite(v) or v <= 0
    return False


RANDOM = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70),
                   st.text(max_size=3), st.complex_numbers(max_magnitude=1e300), st.booleans(), st.none(),
                   st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3))
SCALAR_ARGS = [(c, a) for c, a in ARGS if not c.refuse_only and a not in c.arrays and "plots" not in c.label
               and c.label not in ("audit", "audit_event")]  # those two run a sampler: swept above


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SCALAR_ARGS), RANDOM)
def test_random_values(case_arg, value):
    case, arg = case_arg
    check(case, arg, value)


def test_the_fuzz_can_fail():
    """The checker itself: a silent NaN, a raw exception type and an unnamed argument are caught."""
    bad = [Case("nan", lambda x: float("nan"), dict(x=1.0), dict(x="x")),
           Case("overflow", lambda x: math.exp(1e300 * x), dict(x=1.0), dict(x="x")),
           Case("unnamed", lambda x: (_ for _ in ()).throw(ValueError("bad value")), dict(x=1.0), dict(x="x"))]
    for case in bad:
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check(case, "x", 1.0)


def test_a_private_density_refuses_a_grid_too_large_for_its_kernel_matrix():
    """200 000 new points need a 200 000² joint kernel matrix (320 GB): refused by name before
    allocating (was MemoryError, or the machine swapping); nothing is drawn."""
    f = KDE.release()
    with pytest.raises(ValueError, match=r"^points needs about"):
        f(np.zeros((200_000, 1)))
    assert f(np.array([[0.5]])).shape == (1,)  # the release still answers small grids


def test_a_private_density_counts_the_memory_its_draw_really_takes(monkeypatch):
    """Issue 34: 20,000 points passed the estimate (3 k² floats) on a 23 GiB machine and raised a raw
    MemoryError in the draw, whose peak is ≈ 7 k² (kernel temporaries, the eigendecomposition's
    copies). At a 40 MB limit 1,000 points (≈ 56 MB at the peak) are refused before allocating."""
    import knorm._validate as V

    monkeypatch.setattr(V, "memory_limit", lambda: 40e6)
    f = KDE.release()
    with pytest.raises(ValueError, match=r"^points needs about"):
        f(np.linspace(0.0, 1.0, 1000))
    assert f(np.linspace(0.0, 1.0, 300)).shape == (300,)  # ≈ 6 MB: still answered


# ---- issue 34's reported inputs: each a one-line error naming the argument, or a documented result ----

def _named(names, call):
    """``call()`` raises a one-line ValueError/TypeError whose message names one of ``names``."""
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg and any(re.search(rf"(^|\W){re.escape(n)}(\W|$)", msg) for n in names), msg


def test_recommend_refuses_mechanism_options_that_are_not_a_mapping():
    import knorm

    for bad in ([1], "walk", 3):
        _named(["mechanism_options"], lambda: knorm.recommend(F23, epsilon=1, mechanism_options=bad))
    _named(["sampler_options"], lambda: knorm.KNormMechanism(F23, epsilon=1.0, sampler_options=[("walk", "ball")]))


@pytest.mark.parametrize("fn", [PP.least_squares, PP.nonnegative,
                                lambda F, a, **k: PP.project_to_total(F, a, 3.0, **k)])
def test_an_empty_batch_of_answers_is_an_empty_result(fn):
    """(0, d) answers (LAPACK's "illegal value in 4-th argument of internal gelsd", a matmul error
    before): an empty batch in, an empty batch out, as for any m."""
    out = fn(F23, np.zeros((0, 2)))
    assert out.shape == (0, 2)
    out, x = fn(F23, np.zeros((0, 2)), return_x=True)
    assert out.shape == (0, 2) and x.shape == (0, 3)


def test_histogram_of_a_mapping_of_scalars_names_the_table():
    for table in ({"a": 0.5, "b": 1}, {"a": [0.5], "b": 1}):
        _named(["table"], lambda: D.histogram(table, DOMAIN))


def test_get_chain_refuses_a_flag_that_is_not_a_bool():
    from knorm import Sampler

    s = Sampler(np.eye(3), rng=0, chains=2, min_draws=40)
    s.run(20)
    for bad in ("yes", 1, None):
        _named(["flat"], lambda: s.get_chain(flat=bad))
        _named(["per_chain"], lambda: s.chain_diagnostics(per_chain=bad))
    assert s.get_chain(flat=np.True_).ndim == 2


def test_plots_refuse_an_ax_or_path_of_the_wrong_type_and_a_mechanism_without_levels():
    plots = _plots()
    import knorm

    z = np.random.default_rng(0).standard_normal((2, 8, 2))
    for bad in (5, "ax", [None]):
        _named(["ax"], lambda: plots.trace(z, ax=bad))
    _named(["path"], lambda: plots.trace(z, path=5))
    _named(["mechanism"], lambda: plots.nim_spectrum(knorm.KNormMechanism(F23, epsilon=1.0)))


# ---- every public callable, found by enumeration (issue 34) ------------------------------------
#
# The public API is read from the package itself: ``knorm.__all__``, each top-level module's and
# subpackage's ``__all__`` (or, without one, the public names the module defines). Each callable
# found must have a valid call in API (below) or a reason in API_EXEMPT: a new public function or
# class fails test_every_public_callable_is_fuzzed until it is given one, and from then on every
# parameter of its signature is fed wrong types, wrong shapes (0-length included), non-finite and
# extreme values by test_every_parameter_refuses_wrong_types_and_shapes (a fixed sweep) and
# test_every_parameter_refuses_or_answers_finite_on_random_values (hypothesis). Each call runs in a
# scratch folder under a 20 s alarm.
# Records the library returns (dataclasses: results, claims, levels) are not entry points unless
# they check their fields (Attribute: in API).

P3 = W.prefix(3)  # exact draws: every mechanism builds in milliseconds
Z3 = np.random.default_rng(0).standard_normal((2, 8, 2))

API_EXEMPT = {  # qualified name -> why it is not fuzzed here
    "knorm.cli.main": "the command line: test_every_cli_option_refuses_bad_values",
    "knorm.cli.build_parser": "takes no argument",
    "knorm.datasets.nltcs": "takes no argument (tests/test_datasets.py)",
    "knorm.datasets.nltcs_domain": "takes no argument (tests/test_datasets.py)",
    "knorm.distributed.DaskExecutor": "connects to a Dask cluster (tests/walks/test_prepare_scale.py)",
    "knorm.experiments": "benchmarks (a valid call runs minutes): their refusals are CASES above (refuse_only)",
    "knorm.walks.chains": "engine pieces exported for cluster workers: their inputs are built by the Sampler",
    "knorm.walks.rounding.round_body": "engine piece: its input is a frame the Sampler builds",
    "knorm.bounds.inner_radius": "engine piece: its input is a frame the Sampler builds",
    "knorm.mechanisms._base.Mechanism": "the abstract base of the mechanisms (each fuzzed itself)",
    "knorm.functional.PrivateDensity": "made by GaussianKDEMechanism.release() (its points are CASES above)",
    "knorm.walks.prepared.PreparedWorkload": "made by prepare() and load_prepared() (both fuzzed)",
    "knorm.synth.synthesize": "needs the optional private-pgm (tests/synth; the CLI fuzz runs knorm synth)",
    "knorm.audit_fp": "the floating-point attack harness (scripts/fp_attack.py, design §10.1): a research tool "
                      "on answers a mechanism made, exercised by tests/mechanisms/test_fp_side_channel.py",
}


class Lazy:
    """A base argument built at the call (a file, a figure, a mechanism), not at import."""

    def __init__(self, make):
        self.make = make


@functools.lru_cache(maxsize=None)
def _public():
    return _public_callables()


@contextmanager
def _scratch_folder():
    """The working folder is a fresh temporary one for the call (then removed)."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            yield
        finally:
            os.chdir(here)


@functools.lru_cache(maxsize=None)
def _prepared_file():
    path = Path(tempfile.mkdtemp()) / "eye.knorm"
    knorm.prepare(np.eye(2), path)
    return str(path)


API = {  # qualified name -> (valid keyword arguments, {parameter: other words its error may use})
    "knorm.body.hull.SymmetricHull": (dict(F=P3), {}),
    "knorm.body.hull.validate_matrix": (dict(F=P3, name="F"), {"name": ("name", "F")}),
    "knorm.body.reference.ReferenceOracle": (dict(F=P3, method="highs"), {}),
    "knorm.walks.sampler.Sampler": (dict(body_or_F=np.eye(2), rng=0), {"body_or_F": ("F", "body")}),
    "knorm.walks.sampler.sample_uniform": (dict(body_or_F=np.eye(2), size=4, rng=0, min_draws=40),
                                           {"body_or_F": ("F", "body")}),
    "knorm.walks.prepared.prepare": (dict(F=np.eye(2)), {}),
    "knorm.walks.prepared.load_prepared": (dict(path=Lazy(_prepared_file), F=np.eye(2)),
                                           {"path": ("path", "prepared")}),
    "knorm.mechanisms.additive.LaplaceMechanism": (dict(F=P3, epsilon=1.0), {}),
    "knorm.mechanisms.additive.GaussianMechanism": (dict(F=P3, epsilon=1.0, delta=1e-6), {}),
    "knorm.mechanisms.knorm_mechanism.KNormMechanism": (dict(F=P3, epsilon=1.0, rng=0), {}),
    "knorm.mechanisms.nim.NIMechanism": (dict(F=P3, epsilon=1.0, rng=0), {}),
    "knorm.mechanisms.bounded.BoundedLaplaceMechanism": (dict(lower=0.0, upper=1.0, epsilon=1.0, delta=1e-6), {}),
    "knorm.mechanisms.bounded.CovarianceGaussianMechanism": (
        dict(M=np.eye(2), sensitivity=1.0, epsilon=0.5, delta=1e-6), {}),
    "knorm.mechanisms.strategy.IdentityMechanism": (dict(F=P3, epsilon=1.0), {}),
    "knorm.mechanisms.strategy.HierarchicalMechanism": (dict(F=P3, epsilon=1.0), {}),
    "knorm.mechanisms.strategy.PIdentityMechanism": (dict(F=P3, epsilon=1.0, maxiter=20), {}),
    "knorm.mechanisms.strategy.KroneckerStrategyMechanism": (dict(F=P3, epsilon=1.0, strategies=[np.eye(3)]), {}),
    "knorm.mechanisms.strategy.KroneckerPIdentityMechanism": (dict(F=P3, epsilon=1.0, maxiter=20), {}),
    "knorm.mechanisms.strategy.KroneckerHierarchicalMechanism": (dict(F=P3, epsilon=1.0), {}),
    "knorm.mechanisms.residual.ResidualGaussianMechanism": (dict(F=W.marginals([2, 2], 1), epsilon=1.0,
                                                                 delta=1e-6), {}),
    "knorm.mechanisms.residual.SVDGaussianMechanism": (dict(F=P3, epsilon=1.0, delta=1e-6), {}),
    "knorm.mechanisms.additive.analytic_gaussian_sigma": (dict(sensitivity=1.0, epsilon=1.0, delta=1e-6), {}),
    "knorm.mechanisms.additive.l1_sensitivity": (dict(F=P3), {}),
    "knorm.mechanisms.additive.l2_sensitivity": (dict(F=P3), {}),
    "knorm.recommend.recommend": (dict(F=P3, epsilon=1.0, candidates=["laplace", "identity"]), {}),
    "knorm.recommend.row_cost": (dict(name="laplace", d=3, n=3), {}),
    "knorm.recommend.knorm_crossover_delta": (dict(epsilon=1.0, delta=1e-6, knorm_rms=1.0, gaussian_rms=2.0), {}),
    "knorm.data.Attribute": (dict(name="a", edges=[0.0, 1.0, 2.0]), {}),
    "knorm.data.Domain": (dict(attributes=list(DOMAIN.attributes)), {}),
    "knorm.data.histogram": (dict(table=[[0.5, 1.0], [1.5, 0.0]], domain=DOMAIN), {"table": ("table", "attribute")}),
    "knorm.data.histograms": (dict(table={"a": [0.5, 1.5], "b": [0, 1], "r": ["n", "s"]}, domain=DOMAIN,
                                   by=D.Attribute("r", categories=["n", "s"])),
                              {"table": ("table", "attribute", "columns"), "by": ("by", "attribute")}),
    "knorm.data.marginal_keys": (dict(domain=DOMAIN, k=1), {}),
    "knorm.data.marginal_workload": (dict(domain=DOMAIN, k=1), {}),
    "knorm.data.split_marginals": (dict(domain=DOMAIN, k=1, answers=[1.0, 2.0, 3.0, 4.0, 5.0]),
                                   {"k": ("k", "answers")}),
    "knorm.diagnostics.rhat": (dict(draws=DRAWS), {}),
    "knorm.diagnostics.rhat_nested": (dict(draws=DRAWS, superchains=2), {}),
    "knorm.diagnostics.ess": (dict(draws=DRAWS, method="bulk"), {}),
    "knorm.diagnostics.autocorrelation_time": (dict(draws=DRAWS), {}),
    "knorm.diagnostics.stationary_tau": (dict(draws=DRAWS), {}),
    "knorm.discrete.RandomizedResponse": (dict(k=3, epsilon=1.0), {}),
    "knorm.discrete.FiniteDomainMechanism": (dict(m=3, epsilon=1.0, delta=0.1), {}),
    "knorm.audit.audit": (dict(sample_p=_sampler, sample_q=_sampler, n=100, rng=0), {}),
    "knorm.audit.audit_event": (dict(event=A.repeated_answer(), sample_p=_sampler, sample_q=_sampler,
                                     windows=3, window=3), {}),
    "knorm.audit.clopper_pearson": (dict(k=3, n=10, alpha=0.05), {}),
    "knorm.audit.fx_on_line": (dict(fx=[1.0, 2.0]), {}),
    "knorm.audit.repeated_answer": (dict(atol=0.0), {}),
    "knorm.bounds.log_ball_volume": (dict(r=3), {}),
    "knorm.bounds.volume": (dict(body_or_F=P3, rng=0), {"body_or_F": ("F", "body")}),
    "knorm.bounds.vol_lower_bound": (dict(F=P3, epsilon=1.0, rng=0), {}),
    "knorm.bounds.gvol_lower_bound": (dict(F=P3, epsilon=1.0, rng=0), {}),
    "knorm.functional.GaussianKDEMechanism": (dict(data=[0.0, 1.0, 2.0], bandwidth=1.0, epsilon=0.5, delta=1e-3),
                                              {"data": ("data", "points")}),
    "knorm.implicit.all_range": (dict(n=3), {}),
    "knorm.implicit.as_workload": (dict(W=P3, name="F"), {"W": ("W", "F"), "name": ("name", "F")}),
    "knorm.implicit.from_gram": (dict(gram=np.eye(3), queries=3), {}),
    "knorm.implicit.from_matrix": (dict(W=P3), {}),
    "knorm.implicit.identity": (dict(n=3), {}),
    "knorm.implicit.kron": (dict(workloads=(P3, np.eye(2))), {}),
    "knorm.implicit.union": (dict(workloads=(P3, np.eye(3))), {}),
    "knorm.implicit.marginals": (dict(shape=[2, 3], cliques=[[0], [1]]), {"shape": ("shape", "cliques")}),
    "knorm.implicit.prefix": (dict(n=3), {}),
    "knorm.implicit.from_marginal_match": (dict(match=MarginalMatch(MarginalStructure((2, 3), ((0,), (1,))), 1.0,
                                                                    np.arange(5))), {}),
    "knorm.implicit.ranges": (dict(shape=[3]), {}),
    "knorm.implicit.total": (dict(n=3), {}),
    "knorm.implicit.width_range": (dict(n=4, k=2), {}),
    "knorm.implicit.ImplicitWorkload": (dict(terms=I.prefix(3).terms), {}),
    "knorm.plots.trace": (dict(source=Z3), {"source": ("source", "draws")}),
    "knorm.plots.rank": (dict(source=Z3), {"source": ("source", "draws")}),
    "knorm.plots.autocorrelation": (dict(source=Z3), {"source": ("source", "draws")}),
    "knorm.plots.ess_rhat": (dict(source=Z3), {"source": ("source", "draws")}),
    "knorm.plots.chains": (dict(source=Z3), {"source": ("source", "draws")}),
    "knorm.plots.error_vs_epsilon": (dict(F=P3, epsilons=(1.0,), mechanisms=("laplace",)),
                                     {"epsilons": ("epsilons", "epsilon")}),
    "knorm.plots.expected_errors": (dict(F=P3, epsilons=[1.0], mechanisms=("laplace",), n_samples=10),
                                    {"epsilons": ("epsilons", "epsilon")}),
    "knorm.plots.nim_spectrum": (dict(mechanism=Lazy(lambda: M.NIMechanism(P3, epsilon=1.0, rng=0))), {}),
    "knorm.plots.save": (dict(fig=Lazy(lambda: _plots().trace(Z3)), path=None), {}),
    "knorm.plots.table3_figure": (dict(rows=[{"d": 4, "epsilon": 1.0, "mechanism": "K-norm", "mean_l2_error": 1.0,
                                              "stderr": 0.1}]), {}),
    "knorm.plots.scaling_figure": (dict(rows=[{"d": 4, "n": 8, "walk": "ball", "ess_per_s": 1.0, "pivots_per_step": 2,
                                               "tau_steps": 2.0, "reliable": True}]), {}),
    "knorm.postprocess.least_squares": (dict(F=F23, answers=[1.0, 2.0]), {}),
    "knorm.postprocess.nonnegative": (dict(F=F23, answers=[1.0, 2.0]), {}),
    "knorm.postprocess.project_to_total": (dict(F=F23, answers=[1.0, 2.0], total=3.0), {}),
    "knorm.postprocess.least_squares_matrix": (dict(F=F23), {}),
    "knorm.postprocess.propagate": (dict(P=np.eye(2), covariance=[1.0, 2.0]), {}),
    "knorm.privacy.BudgetAccountant": (dict(epsilon=1.0, delta=0.5), {}),
    "knorm.integer.integer_tables": (dict(F=F23, answers=[1.0, 2.0]), {}),
    "knorm.budget_ledger.FileAccountant": (dict(path=Lazy(lambda: os.path.join(tempfile.mkdtemp(prefix="knorm-fuzz-"),
                                                                    "survey.ledger")), epsilon=1.0, delta=0.5), {}),
    "knorm.privacy.advanced_composition": (dict(epsilon=0.1, delta=0.0, k=10, delta_prime=1e-6), {}),
    "knorm.privacy.basic_composition": (dict(epsilons=[1.0, 2.0], deltas=[0.0, 0.1]), {}),
    "knorm.privacy.epsilon_delta_dp_event": (dict(epsilon=1.0, delta=0.0), {}),
    "knorm.privacy.gaussian_mu": (dict(sensitivity=1.0, sigma=2.0), {}),
    "knorm.privacy.gdp_compose": (dict(mus=(1.0, 2.0)), {}),
    "knorm.privacy.gdp_delta": (dict(epsilon=1.0, mu=1.0), {}),
    "knorm.privacy.gdp_epsilon": (dict(delta=1e-5, mu=1.0), {}),
    "knorm.privacy.gdp_mu_for": (dict(epsilon=1.0, delta=1e-5), {}),
    "knorm.privacy.group_gdp": (dict(mu=1.0, k=2), {}),
    "knorm.privacy.group_privacy": (dict(epsilon=1.0, delta=1e-6, k=3), {}),
    "knorm.privacy.tradeoff_eps_delta": (dict(alpha=0.5, epsilon=1.0, delta=0.0), {}),
    "knorm.privacy.tradeoff_gdp": (dict(alpha=0.5, mu=1.0), {}),
    "knorm.synth.answer_variances": (dict(mechanism=Lazy(lambda: M.LaplaceMechanism(P3, epsilon=1.0)), d=3,
                                          noise_draws=10), {}),
    "knorm.workloads.all_range": (dict(n=3), {}),
    "knorm.workloads.by_name": (dict(name="width_range", n=4, k=2), {}),
    "knorm.workloads.clique_marginals": (dict(shape=[2, 3], cliques=[[0], [0, 1]]), {"shape": ("shape", "cliques")}),
    "knorm.workloads.identity": (dict(n=3), {}),
    "knorm.workloads.marginals": (dict(shape=[2, 3], k=1), {}),
    "knorm.workloads.prefix": (dict(n=3), {}),
    "knorm.workloads.random_bernoulli": (dict(d=2, n=3, p=0.5, rng=0), {}),
    "knorm.workloads.random_pm1": (dict(d=2, n=3, rng=0), {}),
    "knorm.workloads.width_range": (dict(n=4, k=2), {}),
}


def _public_callables():
    """{qualified name: object} of every callable the public modules export."""
    names = ["knorm"] + [m.name for m in pkgutil.walk_packages(knorm.__path__, prefix="knorm.")
                         if not any(part.startswith("_") for part in m.name.split("."))]
    found = {}
    for name in names:
        if name.startswith("knorm.cli."):
            continue  # the subcommands' modules: the command line is fuzzed through its parser
        mod = importlib.import_module(name)
        exported = getattr(mod, "__all__", None)
        if name.count(".") > 1:
            continue  # a subpackage's inner module: public only through its package's __all__
        if exported is None:
            exported = [k for k, v in vars(mod).items()
                        if not k.startswith("_") and getattr(v, "__module__", None) == name]
        for attr in exported:
            obj = getattr(mod, attr)
            if inspect.ismodule(obj) or not callable(obj):
                continue
            if isinstance(obj, type) and issubclass(obj, BaseException):
                continue
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def _exempt(qualname):
    return any(qualname == k or qualname.startswith(k + ".") for k in API_EXEMPT)


def test_every_public_callable_is_fuzzed():
    """A new public function or class is fuzzed once it is given a valid call in API (or a reason in
    API_EXEMPT); API and API_EXEMPT name nothing that is gone."""
    public = _public_callables()
    missing = sorted(q for q, obj in public.items()
                     if q not in API and not _exempt(q) and not dataclasses.is_dataclass(obj))
    assert not missing, f"public callables without a valid call in API (or a reason in API_EXEMPT): {missing}"
    assert not sorted(set(API) - set(public)), "API names callables that are no longer public"


WRONG = [1j, "x?", True, None, float("nan"), float("inf"), -1, 1e300, -1e300, 10**12, np.zeros(0), np.zeros((0, 2)),
         np.full((2, 2), np.nan), [[1.0], [1.0, 2.0]]]


def _api_case(qualname, param):
    obj = _public()[qualname]
    base, aliases = API[qualname]
    sig = inspect.signature(obj)
    var = {p.name for p in sig.parameters.values() if p.kind is p.VAR_POSITIONAL}

    def call(**kwargs):
        kwargs = {k: v.make() if isinstance(v, Lazy) else v for k, v in kwargs.items()}
        args = []  # *workloads, *mus: the valid ones, or the one odd value
        for v in var:
            args = [kwargs.pop(v)] if v == param else list(kwargs.pop(v))
        with _scratch_folder():  # a text value in a path argument writes a file: never into the checkout
            return obj(*args, **kwargs)

    names = (param,) + tuple(aliases.get(param, ()))
    return Case(qualname, call, dict(base), {param: names})


def _params(qualname):
    sig = inspect.signature(_public()[qualname])
    return [p.name for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]


API_ARGS = [(q, p) for q in sorted(API) for p in _params(q)]


@pytest.mark.parametrize("qualname,param", API_ARGS, ids=[f"{q.rsplit('.', 1)[-1]}-{p}" for q, p in API_ARGS])
def test_every_parameter_refuses_wrong_types_and_shapes(qualname, param):
    """``object()`` in any parameter: a one-line ValueError/TypeError naming it, never accepted.
    Complex, text, bools, None, NaN, inf, −1, ±1e300, 10^12 (a size that must be refused before
    allocating or running for days), empty arrays (0-length and (0, 2)), an array of NaN, ragged
    lists: a one-line error naming the parameter, or a finite result."""
    case = _api_case(qualname, param)
    assert check(case, param, object()) == "refused"
    for value in WRONG:
        check(case, param, value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(API_ARGS), RANDOM)
def test_every_parameter_refuses_or_answers_finite_on_random_values(qualname_param, value):
    """Random floats (NaN, ±inf included), integers up to 2^70, text, complex numbers, bools, None and
    short lists in any parameter of any public callable: the same property."""
    qualname, param = qualname_param
    check(_api_case(qualname, param), param, value)


# ---- every option of every subcommand of the command line (issue 34) ----------------------------
#
# Read from the parser: a new subcommand fails test_every_subcommand_is_fuzzed until it has a
# cheap valid command line in CLI_BASE (or a reason in CLI_EXEMPT); a new option is fed odd values
# at once. Each run ends with status 0 (the value is valid) or 1/2 and one line on stderr naming the
# option, never a traceback or a raw exception type.

CLI_BASE = {  # subcommand -> a valid, quick command line (run in a temporary folder)
    "sample": ["sample", "--workload", "identity", "--n", "3", "--count", "2", "--nonprivate-seed", "1", "--quiet",
               "--out", "a.npz"],
    "info": ["info", "--workload", "identity", "--n", "3", "--epsilon", "1", "--no-nim"],
    "uniform": ["uniform", "--workload", "identity", "--n", "3", "--size", "20", "--nonprivate-seed", "1",
                "--out", "u.npz"],
    "plot": ["plot", "nim-spectrum", "--workload", "identity", "--n", "3", "--out", "p.png"],
    "prepare": ["prepare", "--workload", "identity", "--n", "3", "--out", "w.knorm", "--quiet"],
    "synth": ["synth", "--workload", "marginals", "--shape", "2", "2", "--k", "1", "--answers", "rel.npz",
              "--out", "s.npz", "--iters", "20", "--seed", "1"],
    "publish": ["publish", "--records", "r.csv", "--domain", "d.json", "--by", "g", "--mechanism", "laplace",
                "--post", "integer", "--nonprivate-seed", "1", "--out", "t.csv", "--force", "--quiet"],
}
CLI_EXEMPT = {"bench": "runs benchmarks (minutes) once its options pass: knorm.experiments' refusals are CASES above"}
CLI_ODD = ["x?", "nan", "-1", "1e400", "", "0"]


def _subparsers():
    import argparse

    from knorm import cli

    parser = cli.build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _cli_options():
    out = []
    for name, sub in sorted(_subparsers().items()):
        if name in CLI_EXEMPT:
            continue
        for a in sub._actions:
            if a.option_strings and a.nargs != 0 and "--help" not in a.option_strings:
                out.append((name, a.option_strings[-1]))
    return out


CLI_OPTIONS = _cli_options()


def test_every_subcommand_is_fuzzed():
    assert sorted(CLI_BASE) == sorted(set(_subparsers()) - set(CLI_EXEMPT))


def _with(argv, option, value):
    """``argv`` with ``option`` set to ``value`` (replacing its value there, else added)."""
    argv = list(argv)
    if option in argv:
        i = argv.index(option) + 1
        j = i
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        return argv[:i] + [value] + argv[j:]
    return argv + [option, value]


@pytest.fixture
def cli_folder(tmp_path, monkeypatch, capsys):
    """A temporary working folder holding what the base command lines read (synth's release)."""
    from cli_helpers import run

    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.arange(4, dtype=float))
    Path("r.csv").write_text("a,b,g\nx,1.5,n\ny,0.5,s\n")  # knorm publish's records and domain
    Path("d.json").write_text('[{"name": "a", "categories": ["x", "y"]}, {"name": "b", "edges": [0, 1, 2]}, '
                              '{"name": "g", "categories": ["n", "s"]}]')
    rc, _, err = run(["sample", "--workload", "marginals", "--shape", "2", "2", "--k", "1", "--data", "x.npy",
                      "--count", "1", "--mechanism", "laplace", "--out", "rel.npz", "--quiet", "--nonprivate-seed",
                      "1"], capsys)
    assert rc == 0, err
    return tmp_path


RAW = re.compile(r"Traceback|error: [A-Z]\w*(Error|Exception)\b")


@pytest.mark.parametrize("command,option", CLI_OPTIONS, ids=[f"{c}{o}" for c, o in CLI_OPTIONS])
def test_every_cli_option_refuses_odd_values_by_name(command, option, cli_folder, capsys):
    from cli_helpers import run

    for value in CLI_ODD:
        argv = _with(CLI_BASE[command], option, value)
        for leftover in ("a.npz", "u.npz", "p.png", "w.knorm", "s.npz", "x?"):  # no --force needed
            if Path(leftover).is_file():
                Path(leftover).unlink()
        with alarm(60):
            rc, out, err = run(argv, capsys)
        if rc == 0:
            continue
        *warned, msg = err.strip().splitlines() or [""]  # warnings (a seeded run's) come first, a line each
        assert all(w.startswith("knorm: warning:") for w in warned), (argv, err)
        assert rc in (1, 2) and not RAW.search(msg), (argv, rc, err)
        assert option in msg or option.lstrip("-").replace("-", "_") in msg, (argv, msg)


# ---- every public method of the classes above (issue 34: get_chain(flat='yes') was a method) -----
#
# Each public method of a class in API is called on a fresh instance (built from its valid call;
# a Sampler after a short run) with the same odd values in each parameter. Required parameters take
# the valid values in METHOD_ARGS (by method, else by parameter name): a new method with a
# required parameter no entry covers fails test_every_public_method_is_fuzzed.

METHOD_SETUP = {"knorm.walks.sampler.Sampler": lambda s: s.run(20)}
METHOD_ARGS = {  # "Class.method" or a parameter name -> a valid value
    "x": lambda o: np.ones(getattr(o, "n", None) or np.shape(o.F)[1]),  # counts, one per cell
    "X": lambda o: np.ones((3, getattr(o, "n", None) or np.shape(o.F)[1])),  # one histogram per region
    "size": lambda o: 4, "value": lambda o: 0.5, "answer": lambda o: np.ones(2),
    "answers": lambda o: np.ones(np.shape(o.F)[0]),  # a mechanism's released answers, one per query
    "BudgetAccountant.epsilon": lambda o: 0.1, "BudgetAccountant.delta": lambda o: 0.0,
    "FileAccountant.epsilon": lambda o: 0.1, "FileAccountant.delta": lambda o: 0.0,
    "BoundedLaplaceMechanism.epsilon": lambda o: 1.0,
    "CovarianceGaussianMechanism.F": lambda o: P3, "CovarianceGaussianMechanism.M": lambda o: np.eye(3),
    "CovarianceGaussianMechanism.epsilon": lambda o: 0.5, "CovarianceGaussianMechanism.delta": lambda o: 1e-6,
    **{f"{body}.{arg}": make for body in ("SymmetricHull", "ReferenceOracle")
       for arg, make in (("y", lambda o: np.full(3, 0.1)), ("x", lambda o: np.zeros(3)), ("u", lambda o: np.ones(3)),
                         ("Z", lambda o: np.zeros(3)))},
    "Attribute.values": lambda o: [0.5, 1.5], "Domain.table": lambda o: [[0.5, 1.0]],
    "values": lambda o: [0, 1, 2], "reports": lambda o: [0.0, 1.0], "FiniteDomainMechanism.epsilon": lambda o: 1.0,
    "GaussianKDEMechanism.t": lambda o: [0.5], "GaussianKDEMechanism.s": lambda o: np.zeros((1, 1)),
}
METHOD_EXEMPT = {"ImplicitWorkload.kron_trace": "the strategy search's inner product (its inverses are built there)",
                 "ReferenceOracle.distance": "needs method='osqp' (the optional osqp); refused by name otherwise"}
METHOD_ALIASES = {"Attribute.discretise.values": ("attribute",), "Domain.discretise.table": ("attribute",),
                  "GaussianKDEMechanism.kde.t": ("points",)}


def _methods():
    """[(class qualified name, method name, [parameter names])] of the API's classes."""
    out = []
    for q in sorted(API):
        cls = _public()[q]
        if not isinstance(cls, type):
            continue
        for name, fn in inspect.getmembers(cls):
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
            out.append((q, name, params))
    return out


def _arg(cls_name, method, param):
    for key in (f"{cls_name}.{method}.{param}", f"{cls_name}.{param}", param):
        if key in METHOD_ARGS:
            return METHOD_ARGS[key]
    return None


METHODS = _methods()
METHOD_PARAMS = [(q, m, p.name) for q, m, params in METHODS for p in params
                 if f"{q.rsplit('.', 1)[-1]}.{m}" not in METHOD_EXEMPT]


def test_every_public_method_is_fuzzed():
    missing = [f"{q}.{m}({p.name})" for q, m, params in METHODS for p in params
               if p.default is p.empty and _arg(q.rsplit(".", 1)[-1], m, p.name) is None
               and f"{q.rsplit('.', 1)[-1]}.{m}" not in METHOD_EXEMPT]
    assert not missing, f"required parameters without a valid value in METHOD_ARGS: {missing}"


@functools.lru_cache(maxsize=None)
def _instance(qualname):
    """One instance per class, from its valid call (a p-Identity search is seconds): its methods'
    refusals leave it as it was, and an accepted odd value only draws or charges nothing."""
    obj = _api_case(qualname, "__none__").call(**API[qualname][0])
    METHOD_SETUP.get(qualname, lambda o: None)(obj)
    return obj


def _method_case(qualname, method, param):
    cls_name = qualname.rsplit(".", 1)[-1]
    params = next(ps for q, m, ps in METHODS if q == qualname and m == method)

    def call(**kwargs):
        obj = _instance(qualname)
        base = {p.name: _arg(cls_name, method, p.name)(obj) for p in params if p.default is p.empty}
        with _scratch_folder():
            return getattr(obj, method)(**{**base, **kwargs})

    aliases = METHOD_ALIASES.get(f"{cls_name}.{method}.{param}", ())
    return Case(f"{cls_name}.{method}", call, {}, {param: (param, *aliases)})


@pytest.mark.parametrize("qualname,method,param", METHOD_PARAMS,
                         ids=[f"{q.rsplit('.', 1)[-1]}.{m}-{p}" for q, m, p in METHOD_PARAMS])
def test_every_method_parameter_refuses_wrong_types_and_shapes(qualname, method, param):
    case = _method_case(qualname, method, param)
    assert check(case, param, object()) == "refused"
    for value in WRONG:
        check(case, param, value)
