"""The chains a Sampler keeps: get_chain, record indices, diagnostics, ArviZ export."""

import sys

import numpy as np
import pytest

from knorm import Sampler
from knorm.diagnostics import ess, rhat


@pytest.fixture(scope="module")
def run():
    """A sampler after two runs on a small random ±1 body, and the second run's output."""
    F = np.random.default_rng(0).choice([-1.0, 1.0], size=(6, 15))
    s = Sampler(F, rng=11, chains=4, min_draws=400)
    first, info1 = s.run(100)
    x, info = s.run(150)
    return s, x, info, info1


def test_shapes_discard_thin_and_flat(run):
    s, _, info, _ = run
    z = s.get_chain()
    assert z.shape == (4, info.draws // 4, s.body.dim)
    np.testing.assert_array_equal(s.get_chain(discard=3, thin=2), z[:, 3::2])
    np.testing.assert_array_equal(s.get_chain(flat=True), z.reshape(-1, s.body.dim))  # chain by chain
    flat = s.get_chain(flat=True, discard=5, thin=4)
    assert flat.shape == (4 * len(range(5, z.shape[1], 4)), s.body.dim)
    assert np.all(np.isfinite(z))


def test_released_draws_are_their_source_records(run):
    s, x, info, _ = run
    src = info.extra["sources"]
    idx = s.get_record_index()
    assert idx.shape == (s.get_chain().shape[1],)
    np.testing.assert_array_equal(np.diff(idx), 1)
    pos = src[:, 1] - idx[0]
    assert pos.min() >= 0 and pos.max() < len(idx)
    rec = s.body.to_ambient(s.get_chain()[src[:, 0], pos])
    np.testing.assert_allclose(rec, x, rtol=0, atol=1e-12 * np.abs(x).max())
    np.testing.assert_array_equal(s.get_record_index(discard=2, thin=3), idx[2::3])


def test_only_the_last_run_is_kept_and_indices_continue(run):
    s, _, info, info1 = run
    first_src = info1.extra["sources"][:, 1]
    assert s.get_record_index()[0] > first_src.max()  # the second run's records come after the first's


def test_records_are_uniform_on_the_cross_polytope():
    """F = I_r: K = B₁^r. For x uniform on B₁^r, (|x_1|, …, |x_r|, 1 − Σ|x_i|) ~ Dirichlet(1, …, 1)
    (r+1 ones), so E x_i² = 1·2/((r+1)(r+2)) and E x_i⁴ = 4!/((r+1)(r+2)(r+3)(r+4)). Each
    coordinate's mean of x_i² over the records must lie within 4 standard errors,
    SE = √(Var x_i² / ESS), ESS the mean-ESS of x_i² over the chains."""
    r = 5
    s = Sampler(np.eye(r), rng=2, min_draws=4000)
    s.run(2000)
    z2 = s.body.to_ambient(s.get_chain()) ** 2
    m2 = 2.0 / ((r + 1) * (r + 2))
    m4 = 24.0 / ((r + 1) * (r + 2) * (r + 3) * (r + 4))
    se = np.sqrt((m4 - m2**2) / ess(z2, method="mean"))
    assert np.all(np.abs(z2.mean(axis=(0, 1)) - m2) < 4 * se)


def test_chain_diagnostics_pooled_and_per_chain(run):
    s, _, _, _ = run
    z = s.get_chain()
    d = s.chain_diagnostics()
    np.testing.assert_array_equal(d.ess, ess(z))
    np.testing.assert_array_equal(d.rhat, rhat(z))
    assert d.ess.shape == d.rhat.shape == (s.body.dim,)
    p = s.chain_diagnostics(per_chain=True, discard=2)
    assert p.ess.shape == p.rhat.shape == (4, s.body.dim)
    np.testing.assert_array_equal(p.ess[1], ess(z[1:2, 2:]))
    assert np.all(p.ess > 0) and np.all(np.isfinite(p.rhat))


def test_no_chain_before_a_run_and_bad_arguments(run):
    s = Sampler(np.eye(3), rng=0)
    with pytest.raises(RuntimeError, match="run"):
        s.get_chain()
    s, _, _, _ = run
    for kw, name in (({"discard": -1}, "discard"), ({"discard": 1.5}, "discard"), ({"thin": 0}, "thin"),
                     ({"discard": 10**6}, "discard"), ({"thin": True}, "thin")):
        with pytest.raises(ValueError, match=name):
            s.get_chain(**kw)


def test_to_inference_data_dims_and_values(run):
    pytest.importorskip("arviz")
    s, _, _, _ = run
    idata = s.to_inference_data(discard=1, thin=2)
    post = idata.posterior
    assert post["z"].dims == ("chain", "draw", "coordinate")
    z = s.get_chain(discard=1, thin=2)
    assert post["z"].shape == z.shape
    np.testing.assert_array_equal(post["z"].values, z)
    np.testing.assert_array_equal(post["draw"].values, s.get_record_index(discard=1, thin=2))
    assert post.attrs["walk"] == "billiard"


def test_to_inference_data_without_arviz_names_the_extra(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # import arviz now raises ImportError
    s, _, _, _ = run
    with pytest.raises(ImportError, match=r"knorm\[arviz\]"):
        s.to_inference_data()
