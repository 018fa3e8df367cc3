"""Prepared workloads (knorm.prepare / knorm.load_prepared): the F-only rounding, done once and saved."""

import numpy as np
import pytest

import knorm
from knorm import KNormMechanism, NIMechanism, PreparedWorkload, Sampler, load_prepared, prepare, workloads
from knorm.walks import prepared as P
from knorm.walks.sampler import WARMUP_TAUS, rounding_of

F = workloads.marginals((2, 2, 2, 2, 2), 2)  # rank 16, no exact structure: MCMC with a rounding


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("prepared") / "w.knorm"
    return prepare(F, path, recommend=False), path  # recommend's rows: test_prepare_keeps_recommends_rows_by_default


def test_the_file_holds_only_public_f_derived_data(saved):
    w, path = saved
    with np.load(path, allow_pickle=False) as z:
        keys = set(z.files)
        assert keys == {"format", "knorm", "fingerprint", "shape", "has_rounding", "T", "points", "point_bases", "radius_bases", "tau",
                        "iterations", "eigen_spread", "span_basis", "unit", "certificate", "states", "state_bases",
                        "public", "pool_moments", "pool_second",
                        "marginal_sizes", "marginal_cliques", "marginal_scale", "marginal_rows"}  # F itself
        # (public), a marginal workload by its structure
        assert "public" in str(z["public"]) and "no data" in str(z["public"])
        assert str(z["fingerprint"]) == w.fingerprint == P.workload_fingerprint(F)
        assert str(z["knorm"]) == knorm.__version__ and str(z["format"]) == P.FORMAT
        # the rounding of a fresh body of F (seeded with the public ROUNDING_SEED) is what was saved
        fresh = rounding_of(knorm.SymmetricHull(F))
        assert np.array_equal(z["T"], fresh.T) and np.array_equal(z["points"], fresh.points)


def test_seeded_runs_from_a_loaded_file_equal_runs_that_compute_the_rounding(saved):
    _, path = saved
    w = load_prepared(path, F)
    assert isinstance(w, PreparedWorkload) and w.shape == F.shape
    for seed in (1, 2):
        a = KNormMechanism(F, epsilon=0.7, rng=seed, bank_size=300).sample_noise(40)
        b = KNormMechanism(F, epsilon=0.7, rng=seed, bank_size=300, prepared=w).sample_noise(40)
        assert np.array_equal(a, b)
    da, ia = Sampler(F, rng=5, min_draws=200).run(100)
    db, ib = Sampler(w.body, rng=5, min_draws=200).run(100)
    assert np.array_equal(da, db) and ia.steps == ib.steps


def test_nim_from_a_loaded_file_has_the_same_plan_and_noise(saved):
    _, path = saved
    kw = {"epsilon": 1.0, "bank_size": 300, "max_levels": 2, "max_estimates": 1}
    a = NIMechanism(F, rng=3, **kw)
    b = NIMechanism(F, rng=3, prepared=load_prepared(path, F), **kw)
    assert [lv.dim for lv in a.levels] == [lv.dim for lv in b.levels]
    assert np.array_equal(a.sample_noise(10), b.sample_noise(10))


def test_the_warm_up_still_runs_after_loading(saved):
    """The rounding's end points are public starts: a sampler on a loaded body must still
    run ⌈20τ⌉ steps per chain before its first record (its chains forget the public start)."""
    _, path = saved
    w = load_prepared(path, F)
    _, info = Sampler(w.body, rng=0, min_draws=100).run(50)
    assert info.warmup == int(np.ceil(WARMUP_TAUS * w.rounding.tau)) >= WARMUP_TAUS
    assert info.extra["tau"] == w.rounding.tau


def test_another_matrix_is_refused(saved):
    _, path = saved
    G = F.copy()
    G[0, 0] = 2.0
    with pytest.raises(ValueError, match="another matrix") as e:
        load_prepared(path, G)
    assert "\n" not in str(e.value)
    w = load_prepared(path, F)
    with pytest.raises(ValueError, match="^prepared: .*another matrix"):
        KNormMechanism(G, epsilon=1.0, prepared=w)
    with pytest.raises(ValueError, match="^prepared: .*another matrix"):
        NIMechanism(G, epsilon=1.0, prepared=w)
    with pytest.raises(ValueError, match="^prepared: .*another matrix"):
        knorm.recommend(G, epsilon=1.0, prepared=w)
    with pytest.raises(TypeError, match="^prepared must be"):
        KNormMechanism(F, epsilon=1.0, prepared=str(path))
    with pytest.raises(ValueError, match="^prepared: .*not both"):
        KNormMechanism(F, epsilon=1.0, prepared=w, body=w.body)


def _rewrite(src, dst, **changes):
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    with open(dst, "wb") as f:
        np.savez(f, **arrays)
    return dst


def test_stale_or_foreign_files_are_refused(saved, tmp_path, monkeypatch):
    _, path = saved
    cases = {
        "format": _rewrite(path, tmp_path / "f.knorm", format=np.array("knorm-prepared-workload/0")),
        "version": _rewrite(path, tmp_path / "v.knorm", knorm=np.array("0.0.1")),
    }
    for what, p in cases.items():
        with pytest.raises(ValueError, match="prepare it again"):
            load_prepared(p, F)
    np.save(tmp_path / "a.npy", np.zeros(3))
    (tmp_path / "t.knorm").write_text("not a file of ours")
    for p in (tmp_path / "a.npy", tmp_path / "t.knorm"):
        with pytest.raises(ValueError, match="not a prepared-workload file"):
            load_prepared(p, F)
    w = load_prepared(path, F)
    bad = {"T": np.eye(3), "tau": np.array(0.5), "points": 3.0 * w.rounding.points,  # starts outside K
           "span_basis": np.full_like(w.body.span_basis, np.nan)}
    for key, value in bad.items():
        with pytest.raises(ValueError, match="damaged"):
            load_prepared(_rewrite(path, tmp_path / f"d-{key}.knorm", **{key: value}), F)
    # recommend's kept rows: not JSON, a non-positive rms, a missing field, a non-finite Θ
    import json

    good = {"options": {"n_samples": 10, "walk": "billiard", "mc_seed": 0},
            "rows": {"identity": {"unit_rms": 2.0, "unit_stderr": 0.0, "exact": True, "method": "m",
                                  "notion": "pure ε-DP", "params": {}}}}
    ok = load_prepared(_rewrite(path, tmp_path / "r-ok.knorm", recommend_rows=np.array(json.dumps(good))), F)
    assert ok.rows == good
    bad_rows = [np.array("{"), np.array(json.dumps({**good, "rows": {"identity": {**good["rows"]["identity"],
                                                                                   "unit_rms": -1.0}}})),
                np.array(json.dumps({**good, "rows": {"identity": {"unit_rms": 2.0}}})),
                np.array(json.dumps({**good, "rows": {"hierarchical": {**good["rows"]["identity"],
                                                                       "params": {"x": 1}}}})),
                np.array(json.dumps({**good, "rows": {"p-identity": {**good["rows"]["identity"],
                                                                     "params": {"p": 2}}}}))]  # no Θ
    for i, value in enumerate(bad_rows):
        with pytest.raises(ValueError, match="damaged"):
            load_prepared(_rewrite(path, tmp_path / f"r-{i}.knorm", recommend_rows=value), F)
    with pytest.raises(ValueError, match="damaged"):
        load_prepared(_rewrite(path, tmp_path / "r-t.knorm", recommend_rows=np.array(json.dumps(good)),
                               **{P.ROW_ARRAY + "p-identity.theta": np.full((1, 3), np.inf)}), F)
    # a rounding map whose determinant underflows float64 (as at rank ≈ 200) is not singular
    tiny = w.rounding.T * 1e-25
    assert np.linalg.det(tiny) == 0.0
    small = load_prepared(_rewrite(path, tmp_path / "tiny.knorm", T=tiny), F)
    assert np.array_equal(small.rounding.T, tiny)
    with pytest.raises(ValueError, match="damaged"):  # a singular one is
        load_prepared(_rewrite(path, tmp_path / "sing.knorm", T=np.zeros_like(tiny)), F)
    monkeypatch.setattr(knorm, "__version__", "9.9.9")  # this knorm is newer than the file
    with pytest.raises(ValueError, match="prepare it again"):
        load_prepared(path, F)


def test_a_rotated_span_basis_is_carried_over(saved, tmp_path):
    """Another LAPACK may return another orthonormal basis U·R of F's span (R orthogonal, e.g.
    within a repeated singular value). Saved span coordinates c_s = Rᵀc, so T_s = Rᵀ·T; loading
    maps them back with Q = Uᵀ(U·R) = R: T = R·Rᵀ·T, equal up to rounding error."""
    w, path = saved
    U, T = w.body.span_basis, w.rounding.T
    R, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((w.body.dim, w.body.dim)))
    p = _rewrite(path, tmp_path / "rot.knorm", span_basis=U @ R, T=R.T @ T)
    got = load_prepared(p, F).rounding
    assert np.allclose(got.T, T, rtol=0, atol=1e-12 * np.abs(T).max())
    # the pool's moments are carried to this basis too: the same answers from either file
    m0, m1 = w.certified.moments, load_prepared(_rewrite(p, tmp_path / "rot2.knorm", pool_second=R.T @
                                                         w.certified.moments.second @ R), F).certified.moments
    assert np.allclose(m1.second, m0.second, rtol=0, atol=1e-12 * np.abs(m0.second).max())
    assert m1.sq == pytest.approx(m0.sq, rel=1e-12) and m1.norm == pytest.approx(m0.norm, rel=1e-12)
    other = np.linalg.qr(np.random.default_rng(1).standard_normal(U.shape))[0]  # not F's span
    with pytest.raises(ValueError, match="does not span"):
        load_prepared(_rewrite(path, tmp_path / "off.knorm", span_basis=other), F)


def test_exact_structure_needs_no_rounding(tmp_path):
    w = prepare(np.eye(4), tmp_path / "eye.knorm")
    assert w.rounding is None
    v = load_prepared(tmp_path / "eye.knorm", np.eye(4))
    assert v.rounding is None
    a = KNormMechanism(np.eye(4), epsilon=1.0, rng=2).sample_noise(5)
    assert np.array_equal(a, KNormMechanism(np.eye(4), epsilon=1.0, rng=2, prepared=v).sample_noise(5))


def test_recommend_takes_the_prepared_body(saved):
    w, _ = saved
    rec = knorm.recommend(F, epsilon=1.0, candidates=["knorm"], n_samples=200, prepared=w)
    assert rec.best == "knorm" and rec.mechanism.body is w.body


# ---- the certified pool's moments: every question about the error answered from the file ----

def test_the_pool_moments_agree_with_independent_draws(saved):
    """E‖z‖₂², E‖z‖₂ and E[zzᵀ] of the certified pool (kept in the file) against a separate run of
    6000 draws of the release sampler (other randomness): within five standard errors of the
    difference, each side's from its own ESS; E[zzᵀ]'s trace is E|z|² exactly."""
    w, path = saved
    mom = load_prepared(path, F).certified.moments
    assert mom.records == w.certificate.pool and np.trace(mom.second) == pytest.approx(mom.sq[0], rel=1e-9)
    m = KNormMechanism(F, epsilon=1.0, prepared=w, rng=11)
    z = m.sample_uniform(6000)
    ess = m.last_info.min_ess * 6000 / m.last_info.draws
    Z = (z @ w.body.span_basis) / w.body._scale  # span coordinates, frame units
    for (mean, se, _), v in ((mom.sq, np.sum(Z**2, axis=1)), (mom.norm, np.linalg.norm(Z, axis=1))):
        se2 = v.std(ddof=1) / np.sqrt(ess)
        assert abs(v.mean() - mean) <= 5 * np.hypot(se, se2), (mean, v.mean(), se, se2)
    # each query's variance (what synthetic records weight by): 5 SE of a variance from ESS draws
    var_pool, var_run = np.diag(mom.second), np.mean(Z**2, axis=0)
    se_var = np.sqrt(2 / ess) * np.maximum(var_pool, var_run) * np.sqrt(2)
    assert np.all(np.abs(var_pool - var_run) <= 5 * se_var)


def test_error_questions_about_a_prepared_workload_draw_nothing(saved, monkeypatch):
    """expected_error, expected_squared_error and recommend's K-norm row come from the file's pool:
    the mechanisms' samplers are never run (they would raise here)."""
    w, path = saved
    v = load_prepared(path, F)

    def no_draws(*args, **kwargs):
        raise AssertionError("drew new samples")

    monkeypatch.setattr(KNormMechanism, "sample_uniform", no_draws)
    monkeypatch.setattr(Sampler, "run", no_draws)
    m = KNormMechanism(F, epsilon=2.0, prepared=v)
    e = m.expected_error()
    mean, se, ess = v.certified.moments.norm
    unit = (m.dim + 1) * w.body._scale / 2.0  # (dim+1)/ε·‖z‖, ‖z‖ = scale·|Z|
    assert e.value == pytest.approx(unit * mean, rel=1e-12) and e.stderr == pytest.approx(unit * se, rel=1e-12)
    assert "certified pool (MCMC, billiard): ESS" in e.method and not e.exact
    sq = v.certified.moments.sq[0]
    assert m.expected_squared_error() == pytest.approx((m.dim + 1) * (m.dim + 2) * w.body._scale**2 * sq / 4, rel=1e-12)
    rec = knorm.recommend(F, epsilon=1.0, candidates=["knorm", "nim"], prepared=v)
    assert "certified pool (MCMC, billiard): ESS" in rec.table["knorm"].method
    with pytest.raises(AssertionError, match="drew"):  # an explicit number of draws still draws
        m.expected_error(100)


def test_damaged_or_missing_pool_moments(saved, tmp_path):
    import json

    w, path = saved
    mom = w.certified.moments
    good = json.loads(json.dumps(mom.as_dict()))
    bad = [dict(pool_moments=np.array("{")),
           dict(pool_moments=np.array(json.dumps({**good, "sq": [-1.0, 0.0, 10.0]}))),
           dict(pool_moments=np.array(json.dumps({**good, "norm": [mom.norm[0], 0.0, 1e9]}))),  # ESS > pool
           dict(pool_moments=np.array(json.dumps({**good, "records": 7}))),
           dict(pool_second=2 * mom.second),                                   # trace ≠ E|Z|²
           dict(pool_second=mom.second[:-1, :-1]),
           dict(pool_second=mom.second + np.diag([2 * mom.second[1, 1], -2 * mom.second[1, 1]]
                                                 + [0.0] * (len(mom.second) - 2)))]  # same trace, not PSD
    for i, change in enumerate(bad):
        with pytest.raises(ValueError, match="damaged"):
            load_prepared(_rewrite(path, tmp_path / f"m{i}.knorm", **change), F)
    # a file written before the moments were kept loads, and its questions fall back to draws
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k not in ("pool_moments", "pool_second")}
    with open(tmp_path / "old.knorm", "wb") as f:
        np.savez(f, **arrays)
    old = load_prepared(tmp_path / "old.knorm", F)
    assert old.certified.moments is None
    e = KNormMechanism(F, epsilon=1.0, prepared=old, rng=3).expected_error()
    assert "4000" in e.method


def test_a_new_matrix_is_hashed_once(monkeypatch, tmp_path):
    """body_of, prepare and load_prepared fingerprint F once and give the body that fingerprint
    (a census-size F takes about 0.4 s to hash); the body's is the prepared workloads' own."""
    import knorm._fingerprint as leaf
    from knorm.body import hull

    calls = []

    def counted(*parts):
        calls.append(1)
        return leaf.fingerprint(*parts)

    monkeypatch.setattr(hull, "fingerprint", counted)  # the one place F is hashed
    monkeypatch.setenv("KNORM_CACHE", "off")
    F = np.random.default_rng(7).standard_normal((4, 9))
    body = P.body_of(F)
    assert len(calls) == 1 and body._source == leaf.fingerprint(np.ascontiguousarray(F))
    calls.clear()
    w = prepare(F, tmp_path / "w.knorm", certify=False, recommend=False)  # recommend's mechanisms check F again
    assert len(calls) == 1 and w.body._source == w.fingerprint
    calls.clear()
    assert load_prepared(tmp_path / "w.knorm", F).body._source == w.fingerprint and len(calls) == 1


def test_the_saved_point_bases_are_optimal_and_the_same_on_any_number_of_threads():
    """The rounding's end points' bases (warm starts for the check on load) are solved in fixed
    groups on threads: optimal at their points (a solve from one makes no pivot), and the same
    codes with one thread or two."""
    a = prepare(F, certify=False, workers=1)
    b = prepare(F, certify=False, workers=2)
    assert np.array_equal(a.point_bases, b.point_bases)
    frame = a.rounding.frame
    assert a.point_bases.shape == (len(a.rounding.points), frame.r)
    for x, basis in zip(frame.to_oracle(a.rounding.points), a.point_bases):
        st = frame.basis_state(basis)
        frame.solve(x, st, True)
        assert st.ctr[1] == 0 and np.array_equal(np.sort(st.basis), np.sort(basis))


def test_the_file_holds_f_and_load_prepared_needs_nothing_else(tmp_path):
    """Issue 44: F is kept in the file (public; its non-zero entries, here of a matrix that is no
    marginal workload), so load_prepared(path) and `knorm info --prepared FILE` need no other file;
    the stored F is checked against the file's fingerprint; a user's F with shuffled rows is another
    matrix (refused as before)."""
    F = np.random.default_rng(1).choice([-1.0, 0.0, 0.0, 1.0], size=(8, 40))
    path = tmp_path / "m.knorm"
    knorm.prepare(F, path, recommend=False)
    w = knorm.load_prepared(path)
    assert np.array_equal(w.F, F) and w.fingerprint == knorm.load_prepared(path, F).fingerprint
    with np.load(path) as z:
        assert z["matrix_data"].dtype == np.int8 and z["matrix_indices"].dtype == np.uint16
        assert z["matrix_data"].size == np.count_nonzero(F)
    Fr = np.round(np.random.default_rng(0).normal(size=(4, 7)), 3)  # real entries: stored as float64, exactly
    knorm.prepare(Fr, tmp_path / "r.knorm", certify=False, recommend=False)
    assert np.array_equal(knorm.load_prepared(tmp_path / "r.knorm").F, Fr)
    with np.load(path) as z:  # an edited F no longer matches the fingerprint: refused
        arrays = {k: z[k] for k in z.files}
    arrays["matrix_data"] = arrays["matrix_data"].copy()
    arrays["matrix_data"][0] = 2
    with open(tmp_path / "edited.knorm", "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match="was prepared for another matrix"):
        knorm.load_prepared(tmp_path / "edited.knorm")
    for key, bad in (("matrix_indptr", arrays["matrix_indptr"][::-1].copy()),  # pointers out of order
                     ("matrix_indices", (arrays["matrix_indices"] + 50).astype(np.uint16))):  # past n
        with open(tmp_path / "damaged.knorm", "wb") as f:
            np.savez(f, **{**arrays, key: bad})
        with pytest.raises(ValueError, match="is damaged .its F cannot be read"):
            P.prepared_matrix(tmp_path / "damaged.knorm")
    assert np.array_equal(P.prepared_matrix(path), F)  # F alone, no body built
    del arrays["matrix_data"]
    with open(tmp_path / "old.knorm", "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match="holds no F .* give F, or prepare it again"):
        knorm.load_prepared(tmp_path / "old.knorm")
    assert knorm.load_prepared(tmp_path / "old.knorm", F).F is not None  # F given: as before


def test_prepare_keeps_recommends_rows_by_default(tmp_path):
    """Issue 44: a plain prepare keeps recommend's ε-free rows, so recommend from its file draws
    and searches nothing (p-Identity's search took minutes at 4,800 cells); recommend=False skips."""
    from knorm import workloads as W

    F = W.marginals([2, 3, 4], 2)
    w = knorm.prepare(F, tmp_path / "m.knorm")
    assert {"laplace", "identity", "hierarchical", "p-identity", "knorm", "nim"} <= set(w.rows["rows"])
    rec = knorm.recommend(F, epsilon=1.0, prepared=knorm.load_prepared(tmp_path / "m.knorm"))
    assert rec.table and all("(prepared)" in r.method for r in rec.table.values())
    assert not knorm.prepare(F, recommend=False).rows
