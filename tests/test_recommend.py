"""knorm.recommend: every row is rms = √E‖noise‖₂² on the answers, from F alone; the best row
is the argmin and comes back as a ready mechanism built with the caller's rng."""

import importlib
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knorm import workloads as W
from knorm import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism, LaplaceMechanism,
                   NIMechanism, PIdentityMechanism, Recommendation, recommend)
from knorm.mechanisms.additive import analytic_gaussian_sigma
from knorm.recommend import CANDIDATES, GAUSSIAN, TIE

EPS = 0.7
CLASSES = {"laplace": LaplaceMechanism, "gaussian": GaussianMechanism, "identity": IdentityMechanism,
           "hierarchical": HierarchicalMechanism, "p-identity": PIdentityMechanism, "knorm": KNormMechanism,
           "nim": NIMechanism}


@pytest.fixture(scope="module")
def prefix4():
    return recommend(W.prefix(4), epsilon=EPS, delta=1e-6, rng=1)


def test_exact_rows_equal_the_formulas(prefix4):
    """prefix(4): d = n = 4, Δ₁ = 4 (first column), Δ₂ = 2, ‖F‖_F² = 1+2+3+4 = 10.

    Laplace: E‖Lap(Δ₁/ε)^d‖² = 2d(Δ₁/ε)² → √(2·4)·4/ε. Gaussian: d σ². Identity: F·Lap(1/ε)ⁿ,
    E‖·‖² = 2/ε²·‖F‖_F² = 20/ε². F is injective, so ‖Fw‖_K = ‖w‖₁ and K-norm noise is
    F·Lap(1/ε)ⁿ too: the same 20/ε² (and NIM, one level, is K-norm).
    """
    t = prefix4.table
    assert "kron-p-identity" not in t and "kron-hierarchical" not in t  # product domains' rows (an explicit F
    # is one attribute)
    assert all(t[k].exact and t[k].stderr == 0 for k in t)
    assert t["laplace"].rms == pytest.approx(np.sqrt(8) * 4 / EPS, rel=1e-12)
    sigma = analytic_gaussian_sigma(2.0, EPS, 1e-6)
    assert t["gaussian"].rms == pytest.approx(2 * sigma, rel=1e-12) and t["gaussian"].notion == "(ε, δ)-DP"
    assert t["identity"].rms == pytest.approx(np.sqrt(20) / EPS, rel=1e-12)
    assert t["knorm"].rms == pytest.approx(np.sqrt(20) / EPS, rel=1e-9)
    assert t["nim"].rms == pytest.approx(np.sqrt(20) / EPS, rel=1e-9)
    assert t["knorm"].per_query_rmse == pytest.approx(np.sqrt(20 / 4) / EPS, rel=1e-9)
    # the strategies' rows are their own exact expected_squared_error()
    for name, cls in (("hierarchical", HierarchicalMechanism), ("p-identity", PIdentityMechanism)):
        assert t[name].rms == pytest.approx(np.sqrt(cls(W.prefix(4), epsilon=EPS).expected_squared_error()),
                                            rel=1e-12)


def test_hierarchical_row_on_two_cells():
    """F = I₂: the tree without its root (HB, the default) at b = 2 measures the two cells only, the
    identity strategy: Δ₁ = 1, E‖noise‖² = 2·2/ε², rms 2/ε, tied with the identity row (which wins,
    earlier in CANDIDATES)."""
    r = recommend(np.eye(2), epsilon=EPS, candidates=["hierarchical", "identity"])
    assert r.table["hierarchical"].rms == pytest.approx(2 / EPS, rel=1e-12)
    assert r.table["identity"].rms == pytest.approx(2 / EPS, rel=1e-12)
    assert r.best == "identity" and list(r.table) == ["identity", "hierarchical"]


@pytest.mark.parametrize("F", [W.prefix(6), W.all_range(5)], ids=["prefix6", "all_range5"])
def test_strategy_rows_against_brute_force(F):
    """Each strategy row is √(2(Δ₁/ε)²‖F A⁺‖_F²) with A its mechanism's dense strategy matrix, Δ₁ its
    largest column ℓ₁ norm and A⁺ numpy's pinv (brute force; all_range(5) is tall: its rows go
    through the Gram matrix)."""
    r = recommend(F, epsilon=EPS, candidates=["identity", "hierarchical", "p-identity"], rng=0)
    for name, cls in (("hierarchical", HierarchicalMechanism), ("p-identity", PIdentityMechanism)):
        A = cls(F, epsilon=EPS).strategy_matrix()
        A = A.toarray() if hasattr(A, "toarray") else A
        delta1 = np.abs(A).sum(axis=0).max()
        want = np.sqrt(2 * (delta1 / EPS) ** 2 * np.sum((F @ np.linalg.pinv(A)) ** 2))
        assert r.table[name].rms == pytest.approx(want, rel=1e-9), name
    assert r.table["identity"].rms == pytest.approx(np.sqrt(2 * np.sum(F**2)) / EPS, rel=1e-12)


def test_monte_carlo_knorm_row_on_a_hexagon():
    """F = [[1,0,1],[0,1,1]]: K = conv(±(1,0), ±(0,1), ±(1,1)), a hexagon (no exact structure).
    Uniform on it, by triangles from 0 (∫_T ‖z‖² = area·(‖a‖²+‖b‖²+a·b)/6): ∫‖z‖² = 5/3 over
    area 3, so E‖z‖² = 5/9 and E‖noise‖² = (k+1)(k+2)/ε²·5/9 = 20/(3ε²) (k = 2)."""
    r = recommend(np.array([[1.0, 0, 1], [0, 1, 1]]), epsilon=EPS, candidates=["knorm", "laplace"], n_samples=4000)
    row = r.table["knorm"]
    assert not row.exact and row.stderr > 0 and "Monte Carlo" in row.method
    assert abs(row.rms - np.sqrt(20 / 3) / EPS) < 4 * row.stderr
    assert r.best == "knorm"  # Laplace: √(2·2)·2/ε = 4/ε > 2.58/ε


def test_best_is_the_argmin_and_its_mechanism(prefix4):
    t = prefix4.table
    low = min(r.rms for r in t.values())
    assert t[prefix4.best].rms <= low * (1 + TIE)
    assert isinstance(prefix4, Recommendation)
    assert type(prefix4.mechanism) is CLASSES[prefix4.best]
    assert prefix4.mechanism.privacy.noise_source == "seed" and not prefix4.mechanism.privacy.private
    text = str(prefix4)
    assert f"recommended: {prefix4.best}" in text and "(ε, δ)-DP" in text and "per query" in text


def test_mechanism_follows_rng_and_the_table_does_not():
    F = np.array([[1.0, 0, 1], [0, 1, 1]])
    private = recommend(F, epsilon=1.0, candidates=["knorm", "laplace"])
    seeded = recommend(F, epsilon=1.0, candidates=["knorm", "laplace"], rng=7)
    assert isinstance(private.mechanism, KNormMechanism) and isinstance(seeded.mechanism, KNormMechanism)
    assert private.mechanism.privacy.noise_source == "os-entropy" and private.mechanism.privacy.private
    assert seeded.mechanism.privacy.noise_source == "seed" and not seeded.mechanism.privacy.private
    # the table is seeded by mc_seed (a function of F only), whatever the rng
    assert private.table["knorm"].rms == seeded.table["knorm"].rms
    assert private.mechanism.epsilon == 1.0 and private.mechanism.answers == 0


def test_gaussian_only_with_delta():
    F = W.prefix(3)
    assert "gaussian" not in recommend(F, epsilon=1.0).table
    no_svd = [c for c in CANDIDATES if c != "gaussian-svd"]
    r = recommend(F, epsilon=1.0, delta=0.5, candidates=no_svd)  # a huge δ: the Gaussian row wins and is built
    assert r.best == "gaussian" and isinstance(r.mechanism, GaussianMechanism)
    assert r.mechanism.privacy_per_answer.delta == 0.5 and "(ε, δ)-DP with δ = 0.5" in r.reason
    # prefix sums are not a marginal workload: no gaussian-marginal row (a row for marginal workloads only)
    default = recommend(F, epsilon=1.0, delta=0.5)
    assert "gaussian-marginal" not in default.table and default.best == "gaussian-svd"
    with pytest.raises(ValueError, match="^candidates: 'gaussian-marginal' is only for a marginal workload"):
        recommend(F, epsilon=1.0, delta=0.5, candidates=["gaussian-marginal"])
    with pytest.raises(ValueError, match="candidates: 'gaussian' need delta"):
        recommend(F, epsilon=1.0, candidates=["gaussian"])
    with pytest.raises(ValueError, match="candidates: 'gaussian-svd' need delta"):
        recommend(F, epsilon=1.0, candidates=["gaussian-svd"])


def test_rows_that_cannot_be_built_say_why(monkeypatch):
    rec_module = importlib.import_module("knorm.recommend")  # the module (knorm.recommend is the function)

    r = recommend(W.prefix(8), epsilon=1.0, candidates=["identity", "p-identity"], p_identity_max_n=4)
    assert r.table["p-identity"].rms is None and "p_identity_max_n = 4" in r.table["p-identity"].skipped
    assert r.best == "identity" and "skipped" in str(r)

    def broken(self):
        raise MemoryError("no room")

    monkeypatch.setattr(rec_module._Builder, "hierarchical", broken)
    r = recommend(W.prefix(8), epsilon=1.0, candidates=["identity", "hierarchical"])
    assert r.table["hierarchical"].skipped == "MemoryError: no room" and r.best == "identity"
    with pytest.raises(ValueError, match="no candidate mechanism could be built"):
        recommend(W.prefix(8), epsilon=1.0, candidates=["hierarchical"])


@pytest.mark.parametrize("kwargs,match", [
    ({"epsilon": 0}, "epsilon"),
    ({"epsilon": float("inf")}, "epsilon"),
    ({"epsilon": 1, "delta": 1.5}, "delta"),
    ({"epsilon": 1, "candidates": ["knorm", "exponential"]}, "candidates"),
    ({"epsilon": 1, "candidates": []}, "candidates"),
    ({"epsilon": 1, "n_samples": 1}, "n_samples"),
    ({"epsilon": 1, "mc_seed": -1}, "mc_seed"),
    ({"epsilon": 1, "walk": "teleport"}, "walk"),
    ({"epsilon": 1, "p_identity_max_n": 0}, "p_identity_max_n"),
    ({"epsilon": 1, "budget_s": 0}, "budget_s"),
    ({"epsilon": 1, "budget_s": -1.0}, "budget_s"),
    ({"epsilon": 1, "budget_s": float("inf")}, "budget_s"),
    ({"epsilon": 1, "budget_s": "10"}, "budget_s"),
    ({"epsilon": 1, "mechanism_options": {"chains": 3}}, "mechanism_options"),
    ({"epsilon": 1, "rng": -1}, "rng"),
    ({"epsilon": 1, "rng": "os"}, "rng"),
    ({"epsilon": 1, "accountant": 3}, "accountant"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        recommend(W.prefix(3), **kwargs)


def test_bad_matrix():
    with pytest.raises(ValueError):
        recommend(np.array([[1.0, np.nan]]), epsilon=1.0)
    with pytest.raises(ValueError):
        recommend("F", epsilon=1.0)


# ---- extreme scales (issue 17): rows are scale-free; rows leaving float64 are skipped, never ranked

def test_rows_are_homogeneous_in_the_scale_of_f_and_epsilon():
    """Every row's rms is c·rms(F, ε) for F·c and for ε/c (the noise is linear in F and ∝ 1/ε;
    the Gaussian's σ is ∝ Δ₂ at fixed ε, δ): c = 2^±990 shifts the exponent only, so the rows
    match to the last bit, and the choice is the same (ZeroDivisionError / 0.0 / inf rows before)."""
    F = W.prefix(4)
    base = recommend(F, epsilon=1.0, delta=1e-6, rng=1)
    for Fc, eps, delta, k in ((np.ldexp(F, 990), 1.0, 1e-6, 990), (np.ldexp(F, -990), 1.0, 1e-6, -990),
                              (F, 2.0**990, None, -990), (F, 2.0**-990, None, 990)):
        r = recommend(Fc, epsilon=eps, delta=delta, rng=1)
        for name, row in r.table.items():
            assert row.skipped is None and row.rms == np.ldexp(base.table[name].rms, k), (name, k)
        assert r.best == base.best or (delta is None and base.best == "gaussian")


def test_rows_that_leave_float64_are_skipped_with_the_reason():
    """F·1e8 at ε = 1e-300: the pure-DP rows' rms (≈ √(2d)·Δ₁/ε ≈ 1e309) overflows float64, the
    Gaussian's (σ bounded by δ alone as ε → 0) does not: it alone is ranked."""
    r = recommend(W.prefix(4) * 1e8, epsilon=1e-300, delta=1e-6, rng=1)
    assert r.best in GAUSSIAN and np.isfinite(r.table["gaussian"].rms)
    for name in ("laplace", "identity", "hierarchical", "knorm"):
        assert r.table[name].rms is None and "overflows float64" in r.table[name].skipped, r.table[name]
    assert "skipped" in str(r) and "inf" not in str(r)


def test_nothing_representable_is_one_line_naming_f():
    with pytest.raises(ValueError) as info:
        recommend(W.prefix(3) * 1e300, epsilon=1e-300)
    msg = str(info.value)
    assert msg.startswith("F: no candidate") and "\n" not in msg and "epsilon" in msg


@pytest.mark.parametrize("argv", [["info", "--epsilon", "1e300"], ["info", "--epsilon", "1e-300"],
                                  ["info", "--epsilon", "1", "--delta", "1e-6", "--no-nim"]])
def test_cli_info_at_extreme_epsilon(argv, capsys, tmp_path):
    """`knorm info` (a ZeroDivisionError at ε = 1e300 before): every number printed is finite."""
    from cli_helpers import run

    np.save(tmp_path / "F.npy", W.prefix(4) * (1e300 if "--delta" in argv else 1.0))
    rc, out, err = run(argv + ["--matrix", str(tmp_path / "F.npy"), "--json"], capsys)
    assert rc == 0, err
    facts = __import__("json").loads(out)
    assert facts["recommendation"]["mechanism"] in CANDIDATES
    assert all(v is None or np.isfinite(v) for v in (facts["mean_l2_uniform_K"], facts["l1_sensitivity"]))
    for e in facts["expected_l2_error"].values():
        assert np.isfinite(e["value"]) and e["value"] > 0


def test_cli_auto_mechanism_refusal_is_one_line(capsys, tmp_path):
    from cli_helpers import run

    np.save(tmp_path / "F.npy", W.prefix(4))
    rc, out, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--epsilon", "1e-320", "--mechanism",
                        "auto", "--count", "2", "--out", str(tmp_path / "a.npy")], capsys)
    assert rc == 1 and err.count("\n") == 1 and "epsilon" in err, err
    assert not (tmp_path / "a.npy").exists()


ODD = [0, 0.0, 1e-300, -1e-300, 1e300, -1e300, 5e-324, 1.7e308, float("nan"), float("inf"), "1", 1j, True, None,
       10**400, 10**12, -1, 2, 0.5, np.float32(0.5), np.int64(3)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arg=st.sampled_from(["epsilon", "delta", "n_samples", "mc_seed", "p_identity_max_n", "budget_s"]),
       value=st.one_of(st.sampled_from(ODD), st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**6)))
def test_numeric_arguments_give_a_ranked_table_or_a_named_error(arg, value):
    """Every numeric argument of recommend: a table whose ranked rows are normal positive floats
    (skipped rows carry a reason), or a one-line ValueError naming the argument (or F, when every
    row leaves float64). prefix(3) has exact rows only: no Monte Carlo runs."""
    kwargs = {"epsilon": 1.0, "delta": 1e-6, "n_samples": 200, arg: value}
    try:
        r = recommend(W.prefix(3), **kwargs)
    except ValueError as exc:
        msg = str(exc)
        assert "\n" not in msg and (arg in msg or msg.startswith("F:")), msg
        return
    ranked = [row.rms for row in r.table.values() if row.rms is not None]
    assert ranked and all(np.isfinite(v) and v >= np.finfo(float).tiny for v in ranked)
    assert all(row.skipped for row in r.table.values() if row.rms is None)
    assert r.table[r.best].rms == min(ranked) or r.table[r.best].rms <= min(ranked) * (1 + TIE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(-1070, 1018), e=st.integers(-1070, 1020))
def test_every_scale_gives_shifted_rows_or_skips(k, e):
    """F·2^k at ε = 2^e: each ranked row is exactly 2^(k−e) times its unit-scale value; a row
    that is not is skipped with a reason naming epsilon; never a 0.0 or inf row."""
    F = W.prefix(3)
    base = recommend(F, epsilon=1.0, delta=1e-6, rng=1)
    try:
        r = recommend(np.ldexp(F, k), epsilon=2.0**e, delta=1e-6, rng=1)
    except ValueError as exc:
        assert str(exc).startswith("F: no candidate") and "\n" not in str(exc)
        return
    for name, row in r.table.items():
        if row.rms is None:
            assert "epsilon" in row.skipped or "F" in row.skipped, row.skipped
        elif name not in GAUSSIAN:  # the Gaussian's σ is not ∝ 1/ε
            assert row.rms == np.ldexp(base.table[name].rms, k - e), (name, row.rms)


# ---- cost: estimates before running, the time budget, memory (issue 20) ----------------------------

def test_rows_run_cheapest_first_and_record_their_seconds():
    r = recommend(W.prefix(8), epsilon=1.0, rng=0)
    assert list(r.table) == [c for c in CANDIDATES if c not in GAUSSIAN + ("kron-hierarchical", "kron-p-identity")]
    assert all(row.seconds is not None and row.seconds >= 0 for row in r.table.values())
    assert r.dropped == {} and r.budget_s is None
    assert r.as_dict()["table"]["identity"]["seconds"] == r.table["identity"].seconds


def test_p_identity_has_no_size_cap_by_default():
    """p_identity_max_n defaults to None (the former default skipped n > 512); an int still caps it."""
    assert recommend(W.prefix(8), epsilon=1.0, candidates=["p-identity"]).table["p-identity"].rms is not None
    r = recommend(W.prefix(8), epsilon=1.0, candidates=["identity", "p-identity"], p_identity_max_n=7)
    assert "p_identity_max_n = 7" in r.table["p-identity"].skipped


def test_the_budget_drops_rows_estimated_to_be_too_slow():
    """A budget no row fits: the cheapest row (estimates from the shapes: Laplace's 3dn flops,
    the least) still runs, every other row is dropped with its estimate, and the Recommendation
    says so."""
    r = recommend(W.prefix(8), epsilon=1.0, rng=0, budget_s=1e-12)
    assert [k for k, row in r.table.items() if row.rms is not None] == ["laplace"]
    assert set(r.dropped) == set(CANDIDATES) - {"laplace", "kron-hierarchical", "kron-p-identity", *GAUSSIAN}
    for name in r.dropped:
        assert r.table[name].skipped.startswith("budget_s = 1e-12: estimated") and r.table[name].seconds is None
    assert r.best == "laplace" and "not computed" in r.reason and r.as_dict()["dropped"] == r.dropped
    # a generous budget changes nothing
    full, roomy = recommend(W.prefix(8), epsilon=1.0, rng=0), recommend(W.prefix(8), epsilon=1.0, rng=0, budget_s=1e6)
    assert {k: v.rms for k, v in full.table.items()} == {k: v.rms for k, v in roomy.table.items()}


def test_row_cost_orders_the_rows():
    from knorm.recommend import row_cost

    d, n = 500, 256
    secs = {c: row_cost(c, d, n)[0] for c in CANDIDATES}
    assert secs["laplace"] <= secs["identity"] < secs["hierarchical"] < secs["p-identity"] < secs["knorm"] < secs["nim"]
    # p-Identity: starts·maxiter·(npm + 6p²n + p³) + 5n³ + 2dn² flops (PIdentityMechanism's default
    # number of starts at this n, p = n/16 = 16), m = n; m = 2·rank where the search works on the
    # Gram's factor (rank <= n/3): a d = 500 F of rank 40
    from knorm.mechanisms._p_identity import _check_starts

    starts = _check_starts(None, n)
    flops = starts * 500 * (n * 16 * n + 6 * 16 * 16 * n + 16**3) + 5 * n**3 + 2 * d * n * n
    assert row_cost("p-identity", d, n)[0] == pytest.approx(flops / 5e9, rel=1e-12)
    low = starts * 500 * (n * 16 * 80 + 6 * 16 * 16 * n + 16**3) + 5 * n**3 + 2 * d * n * n
    assert row_cost("p-identity", d, n, rank=40)[0] == pytest.approx(low / 5e9, rel=1e-12)
    # an implicit workload holds no d × n matrix: no FᵀF to form, nothing of size dn in memory
    assert row_cost("p-identity", d, n, shape=(16, 16))[1] < row_cost("p-identity", d, n)[1]
    assert row_cost("kron-p-identity", d, n, shape=(16, 16))[0] < row_cost("p-identity", d, n, shape=(16, 16))[0]
    # K with exact structure: K-norm draws nothing (its SVD alone: 4·d·n·min(d, n) flops); NIM's MCMC
    # levels are smaller than r
    assert row_cost("knorm", d, n, exact=True)[0] == pytest.approx(4 * d * n * n / 5e9, rel=1e-12)
    assert row_cost("nim", d, n, exact=True)[0] < row_cost("nim", d, n)[0]
    with pytest.raises(ValueError, match="name"):
        row_cost("exponential", d, n)


def test_rows_over_memory_are_skipped_and_none_left_is_one_line_naming_f(monkeypatch):
    rec_module = importlib.import_module("knorm.recommend")
    monkeypatch.setattr(rec_module, "memory_limit", lambda: 40 * 8 * 64.0)  # 40 copies of prefix(8)
    r = recommend(W.prefix(8), epsilon=1.0, rng=0)
    assert r.table["laplace"].rms is not None and r.table["identity"].rms is not None
    assert "GiB" in r.table["nim"].skipped and "nim" in r.dropped
    monkeypatch.setattr(rec_module, "memory_limit", lambda: 8.0)
    with pytest.raises(ValueError) as info:
        recommend(W.prefix(8), epsilon=1.0)
    assert str(info.value).startswith("F") and "\n" not in str(info.value)


# ---- implicit workloads and Kronecker strategies (issue 20) -----------------------------------------

def test_an_implicit_workload_gets_the_strategy_rows_and_skips_the_rest():
    """2-D ranges over 4×4 given implicitly (⊗ of 1-D all ranges, W never built) and explicitly: the
    strategy rows agree (both from FᵀF); Laplace, K-norm and NIM need W's entries and are skipped;
    the Kronecker p-Identity row is the mechanism's own exact error."""
    from knorm import KroneckerHierarchicalMechanism, KroneckerPIdentityMechanism
    from knorm import implicit as I

    wl = I.ranges((4, 4))
    dense = np.kron(W.all_range(4), W.all_range(4))
    imp = recommend(wl, epsilon=EPS, rng=0)
    exp = recommend(dense, epsilon=EPS, rng=0, candidates=["identity", "hierarchical", "p-identity"])
    assert (imp.d, imp.n) == dense.shape
    for name in ("identity", "hierarchical", "p-identity"):
        assert imp.table[name].rms == pytest.approx(exp.table[name].rms, rel=1e-9), name
    for name in ("laplace", "knorm", "nim"):
        assert "implicit workload" in imp.table[name].skipped
    for name, cls in (("kron-p-identity", KroneckerPIdentityMechanism), ("kron-hierarchical",
                                                                        KroneckerHierarchicalMechanism)):
        assert imp.table[name].rms == pytest.approx(cls(wl, epsilon=EPS).rms_error(), rel=1e-12) and imp.table[name].exact
    # the chosen mechanism answers the d queries (W x̂, by the workload's operator)
    x = np.arange(16.0)
    assert imp.mechanism.release(x).shape == (dense.shape[0],)


def test_implicit_workload_refusals():
    from knorm import implicit as I

    with pytest.raises(ValueError, match="prepared"):
        recommend(I.prefix(8), epsilon=1.0, prepared=knorm_prepare(W.prefix(8)))
    with pytest.raises(ValueError, match="candidates"):  # an explicit F is one attribute: no product domain
        recommend(W.prefix(8), epsilon=1.0, candidates=["kron-p-identity", "kron-hierarchical"])
    with pytest.raises(ValueError, match="^F: no candidate") as info:  # only rows that need W's entries
        recommend(I.prefix(8), epsilon=1.0, candidates=["knorm", "laplace"])
    assert "\n" not in str(info.value)


def knorm_prepare(F):
    from knorm import prepare

    return prepare(F)


def test_a_matrix_too_large_for_any_row_is_refused_before_it_is_copied(monkeypatch):
    """The least a row needs (recommend's validated copy plus Laplace's or identity's copies and
    temporaries, 8·(1 + 3)·dn bytes) is checked on the caller's array before anything is copied."""
    validate = importlib.import_module("knorm._validate")
    monkeypatch.setattr(validate, "memory_limit", lambda: 8.0 * 64 * 3)  # 3 copies of prefix(8): too few
    with pytest.raises(ValueError) as info:
        recommend(W.prefix(8), epsilon=1.0)
    msg = str(info.value)
    assert msg.startswith("F needs about") and "\n" not in msg


# -- a prepared workload keeps the table -------------------------------------------------------------
def test_prepared_rows_are_reused_at_any_epsilon_and_equal_a_fresh_table(monkeypatch, tmp_path):
    """Every pure ε-DP row scales exactly as 1/ε (the searches, the body, the plan and the Monte
    Carlo draws depend on F and fixed seeds only), so a row kept ε-free must equal the row computed
    afresh at another ε; and the second call must compute nothing: the searches and the sampler
    are made to fail, and every row still comes back (from the prepared workload)."""
    from knorm import load_prepared, prepare
    from knorm.mechanisms import strategy

    F = W.marginals((2, 2, 3), 2)  # K-norm by MCMC (no exact structure)
    P = prepare(F)
    first = recommend(F, epsilon=1.0, prepared=P, n_samples=300)
    assert set(P.rows["rows"]) == set(first.table) - set(GAUSSIAN)
    fresh = recommend(F, epsilon=3.0, delta=1e-6, n_samples=300)
    P.save(tmp_path / "w.knorm")
    loaded = load_prepared(tmp_path / "w.knorm", F)

    def fail(*args, **kwargs):
        raise AssertionError("computed again")

    monkeypatch.setattr(strategy, "_search_p_identity", fail)
    monkeypatch.setattr(strategy, "hierarchy_errors", fail)
    monkeypatch.setattr(KNormMechanism, "sample_uniform", fail)
    for prepared in (P, loaded):
        again = recommend(F, epsilon=3.0, delta=1e-6, prepared=prepared, n_samples=300)
        for name, row in fresh.table.items():
            got = again.table[name]
            assert got.rms == pytest.approx(row.rms, rel=1e-12) and got.stderr == pytest.approx(row.stderr, rel=1e-12)
            assert got.exact == row.exact and got.notion == row.notion
            assert got.method.endswith("(prepared)") == (name not in GAUSSIAN)
        assert again.best == fresh.best == "knorm" and isinstance(again.mechanism, KNormMechanism)
    monkeypatch.undo()
    # other Monte Carlo options: the rows are computed again (and replace the kept ones)
    other = recommend(F, epsilon=1.0, prepared=P, n_samples=200, candidates=["identity", "knorm"])
    assert not other.table["knorm"].method.endswith("(prepared)")
    assert P.rows["options"]["n_samples"] == 200 and set(P.rows["rows"]) == {"identity", "knorm"}


def test_a_prepared_searched_strategy_is_rebuilt_from_its_kept_parameters(monkeypatch):
    """p-Identity wins on prefix sums; from a prepared table its mechanism is built from the kept Θ
    (no search: the search is made to fail) and has the searched mechanism's exact error."""
    from knorm import prepare
    from knorm.mechanisms import strategy

    F = W.prefix(16)
    P = prepare(F)
    first = recommend(F, epsilon=1.0, prepared=P, candidates=["identity", "hierarchical", "p-identity"])
    assert first.best == "p-identity"
    monkeypatch.setattr(strategy, "_search_p_identity", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    again = recommend(F, epsilon=2.0, prepared=P, candidates=["identity", "hierarchical", "p-identity"], rng=3)
    m = again.mechanism
    assert isinstance(m, PIdentityMechanism) and np.array_equal(m.theta, first.mechanism.theta)
    assert m.rms_error() == pytest.approx(first.mechanism.rms_error() / 2.0, rel=1e-12)
    assert again.table["p-identity"].rms == pytest.approx(m.rms_error(), rel=1e-12)


def test_p_identity_with_a_given_theta():
    F = W.prefix(16)
    m = PIdentityMechanism(F, epsilon=1.0, rng=0)
    g = PIdentityMechanism(F, epsilon=1.0, rng=0, theta=m.theta)
    assert g.p == m.p and g.starts == 0 and g.rms_error() == pytest.approx(m.rms_error(), rel=1e-12)
    assert g.sensitivity == pytest.approx(1.0)
    for bad, p, match in ((np.ones((2, 15)), None, "theta must have shape"), (-np.ones((1, 16)), None, "theta must hold"),
                          (np.full((1, 16), np.nan), None, "theta must hold"),
                          (np.ones((2, 16)), 1, r"shape \(1, 16\)"), ([["a"] * 16], None, "theta must be real"),
                          (np.ones((1, 16), bool), None, "dtype bool"), (np.full((2, 16), 1e308), None, "column sums")):
        with pytest.raises(ValueError, match=match):
            PIdentityMechanism(F, epsilon=1.0, theta=bad, p=p)


def test_prepared_rows_follow_the_rules_a_fresh_table_follows():
    """A kept row is used only where a fresh call would compute it the same way: p-Identity capped
    off by ``p_identity_max_n`` is skipped as in a fresh call (never a kept row without its Θ),
    and a one-level NIM row is K-norm's row, with K-norm in the table or not (so NIM never beats
    K-norm by Monte Carlo noise: both come from the certified pool)."""
    from knorm import prepare

    F = W.prefix(16)
    P = prepare(F)
    recommend(F, epsilon=1.0, prepared=P, candidates=["identity", "p-identity"])
    capped = recommend(F, epsilon=1.0, prepared=P, candidates=["identity", "p-identity"], p_identity_max_n=8)
    assert capped.table["p-identity"].rms is None and "p_identity_max_n" in capped.table["p-identity"].skipped
    assert capped.best == "identity" and isinstance(capped.mechanism, IdentityMechanism)

    G = W.marginals((2, 2, 3), 2)
    Q = prepare(G)
    alone = recommend(G, epsilon=1.0, prepared=Q, n_samples=300, candidates=["nim"])
    both = recommend(G, epsilon=1.0, prepared=Q, n_samples=300, candidates=["knorm", "nim"])
    assert Q.rows["rows"]["nim"]["params"] == {"levels": 1}
    assert both.table["nim"].rms == both.table["knorm"].rms and both.best == "knorm"
    assert alone.table["nim"].rms == both.table["knorm"].rms and "K-norm's row" in alone.table["nim"].method


def test_gaussian_rows_on_a_marginal_workload_and_the_knorm_crossover():
    """2-way marginals over (2, 3, 2), rows shuffled: the gaussian-marginal row is ResidualPlanner's
    closed form scale·Σ_S √(v_S p_S)·σ₁ (here Σ_S √(v_S p_S) from the formulas of
    tests/mechanisms/test_residual.py: S = ∅: v = 1/6+1/4+1/6, p = 1; S = {0}: v = 1/3+1/2, p = 1/2;
    S = {1}: v = 2(1/2+1/2), p = 2/3; S = {2}: v = 1/2+1/3, p = 1/2; pairs: v = (n_i−1)(n_j−1),
    p = v/(n_i n_j)), equal to the gaussian-svd row (the SVD bound is attained on marginals); and
    at δ* = knorm_wins_below the best Gaussian row's rms equals K-norm's (the crossover is exact)."""
    from knorm.mechanisms.residual import ResidualGaussianMechanism

    F = W.marginals((2, 3, 2), 2)
    F = F[np.random.default_rng(5).permutation(len(F))] * 3.0
    root = (math.sqrt(1 / 6 + 1 / 4 + 1 / 6) + math.sqrt((1 / 3 + 1 / 2) / 2) + math.sqrt(2 * 2 / 3)
            + math.sqrt((1 / 2 + 1 / 3) / 2) + math.sqrt(2 * 2 / 6) + math.sqrt(1 / 4) + math.sqrt(2 * 2 / 6))
    eps, delta = 1.0, 1e-6
    r = recommend(F, epsilon=eps, delta=delta, rng=0, candidates=["gaussian", "gaussian-marginal", "gaussian-svd",
                                                                    "knorm"])
    sigma1 = analytic_gaussian_sigma(1.0, eps, delta)
    assert r.table["gaussian-marginal"].rms == pytest.approx(3.0 * root * sigma1, rel=1e-9)
    assert r.table["gaussian-svd"].rms == pytest.approx(3.0 * root * sigma1, rel=1e-7)
    assert r.table["gaussian-marginal"].notion == "(ε, δ)-DP"
    star = r.knorm_wins_below
    assert star is not None and delta < star < 1 and "δ < " in str(r)
    at = recommend(F, epsilon=eps, delta=star, rng=0, candidates=["gaussian-marginal", "knorm"])
    assert at.table["gaussian-marginal"].rms == pytest.approx(r.table["knorm"].rms, rel=1e-6)
    # the chosen Gaussian mechanism, when it wins (a large δ), is the residual one, built with the rng
    big = recommend(F, epsilon=eps, delta=0.2, rng=0, candidates=["gaussian-marginal", "knorm"])
    assert big.best == "gaussian-marginal" and isinstance(big.mechanism, ResidualGaussianMechanism)
    assert big.knorm_wins_below is not None and big.knorm_wins_below < 0.2


def test_a_time_budget_keeps_the_rows_a_prepared_pool_answers_at_once():
    """recommend(budget_s=…) with a prepared workload estimated K-norm's row as fresh MCMC draws
    (2.5 s here, 104 s for the rank-95 survey) and dropped it, recommending another mechanism,
    though the certified pool answers it with no draw; now its estimate is 0 there."""
    F = W.marginals([2, 3, 4, 5], 2)
    from knorm import prepare
    w = prepare(F, recommend=False)
    rec = recommend(F, epsilon=1.0, prepared=w, budget_s=1.0)
    assert "knorm" not in rec.dropped and "certified pool" in rec.table["knorm"].method
