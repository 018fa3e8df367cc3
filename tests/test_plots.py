"""knorm.plots and ``knorm plot``: figures, their contents, saving, and the CLI's output rules."""

import sys
from types import SimpleNamespace

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.colors import to_rgba  # noqa: E402

from knorm import Sampler, cli, plots  # noqa: E402
from knorm.mechanisms import ErrorEstimate  # noqa: E402
from knorm.mechanisms.additive import analytic_gaussian_sigma, expected_norm_gaussian, l2_sensitivity  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sampler():
    F = np.random.default_rng(0).choice([-1.0, 1.0], size=(5, 12))
    s = Sampler(F, rng=4, chains=3, min_draws=300)
    s.run(100)
    return s


from cli_helpers import run  # noqa: E402


def test_chain_plots_from_a_sampler_and_from_an_array(sampler, tmp_path):
    z = sampler.get_chain()
    m, n, r = z.shape
    fig = plots.trace(sampler, 2)
    (ax,) = fig.axes
    assert len(ax.lines) == m
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), z[1, :, 2])
    fig = plots.rank(z, 1, bins=10)
    assert len(fig.axes[0].patches) >= m  # one step histogram per chain (plus the band)
    fig = plots.autocorrelation(z, coords=[0, 3], max_lag=7)
    lines = [ln for ln in fig.axes[0].lines if len(ln.get_xdata()) == 8]
    assert len(lines) == 2 and lines[0].get_ydata()[0] == pytest.approx(1.0)
    fig = plots.ess_rhat(sampler)
    assert len(fig.axes) == 2
    np.testing.assert_allclose(fig.axes[1].lines[0].get_ydata(), sampler.chain_diagnostics().rhat)
    fig = plots.chains(sampler, path=tmp_path / "c.png")
    assert len(fig.axes) == 5
    assert (tmp_path / "c.png").read_bytes().startswith(PNG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png"]  # atomic: no temporary file left


def test_rank_histograms_hold_every_draw(sampler):
    z = sampler.get_chain()
    fig = plots.rank(z, 0, bins=7)
    steps = [p for p in fig.axes[0].patches if hasattr(p, "get_data")]
    assert len(steps) == z.shape[0]
    for st in steps:
        assert st.get_data().values.sum() == z.shape[1]


def test_chain_plots_refuse_bad_input(sampler):
    with pytest.raises(ValueError, match="coord"):
        plots.trace(sampler, 99)
    with pytest.raises(ValueError, match="draws"):
        plots.trace(np.zeros((2, 3, 1)))  # fewer than 4 draws per chain
    fig, _ = plots._figure(1, 1)
    with pytest.raises(ValueError, match="ax must hold 2"):
        plots.ess_rhat(sampler, ax=fig.axes[0])


def test_drawing_into_given_axes(sampler):
    fig, axes = plots._figure(1, 3)
    assert plots.trace(sampler, ax=axes[0, 0]) is fig
    assert plots.ess_rhat(sampler, ax=axes[0, 1:]) is fig


def test_error_vs_epsilon_uses_each_mechanism_s_own_estimate():
    """Gaussian: exact E‖N(0, σ²I_d)‖₂ with the analytic σ(Δ₂, ε, δ). Laplace: Monte Carlo of
    E‖Lap(Δ₁/ε)^d‖₂ = (Δ₁/ε)·E‖Lap(1)^d‖₂, so ε·value is the same at every ε (within 4 SE)."""
    F = np.random.default_rng(1).choice([-1.0, 1.0], size=(4, 9))
    eps = [0.5, 2.0]
    errs = plots.expected_errors(F, eps, mechanisms=("laplace", "gaussian"), delta=1e-5, n_samples=20_000)
    for e, est in zip(eps, errs["gaussian"]):
        assert est.exact
        assert est.value == pytest.approx(expected_norm_gaussian(4, analytic_gaussian_sigma(l2_sensitivity(F), e,
                                                                                             1e-5)), rel=1e-12)
    a, b = errs["laplace"]
    assert abs(a.value * eps[0] - b.value * eps[1]) < 4 * np.hypot(a.stderr * eps[0], b.stderr * eps[1])
    fig = plots.error_vs_epsilon(errors=errs)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["Laplace Δ₁/ε", "Gaussian (ε, δ) (exact)"]
    with pytest.raises(ValueError, match="delta"):
        plots.expected_errors(F, eps, mechanisms=("gaussian",))
    with pytest.raises(ValueError, match="mechanisms"):
        plots.expected_errors(F, eps, mechanisms=("lapalce",))
    with pytest.raises(ValueError, match="epsilon"):
        plots.expected_errors(F, [0.0], mechanisms=("laplace",))
    with np.errstate(over="raise"), pytest.raises(ValueError, match="epsilons"):  # found by the fuzz in CI:
        plots.error_vs_epsilon(F, [1.0, 3.8e293], mechanisms=("laplace",))  # the log axis's margin overflowed


def test_nim_spectrum_plots_each_level_s_eigenvalues():
    levels = [SimpleNamespace(dim=4, eigenvalues=np.array([4.0, 3.0, 2.0, 1.0])),
              SimpleNamespace(dim=2, eigenvalues=np.array([0.5, 0.25])),
              SimpleNamespace(dim=1, eigenvalues=np.array([np.nan]))]
    fig = plots.nim_spectrum(SimpleNamespace(levels=levels))
    lines = fig.axes[0].lines
    assert len(lines) == 2
    np.testing.assert_array_equal(lines[1].get_ydata(), [0.5, 0.25])
    with pytest.raises(ValueError, match="level"):
        plots.nim_spectrum(SimpleNamespace(levels=levels[2:]))


def test_table3_figure_draws_the_invalid_baseline_last_and_marked():
    names = ["Laplace 2/ε (not ε-DP)", "Laplace Δ₁/ε", "K-norm"]
    rows = [{"d": d, "epsilon": e, "mechanism": m, "mean_l2_error": 10.0 / e * (i + 1), "stderr": 0.5}
            for d in (20, 10) for e in (0.1, 1.0) for i, m in enumerate(names)]
    fig = plots.table3_figure(rows, n=100, releases=30)
    assert len(fig.axes) == 2
    leg = fig.axes[0].get_legend()
    texts = [t.get_text() for t in leg.get_texts()]
    assert texts[-1].endswith("NOT ε-DP (invalid)") and "±2 SE over 30 releases" in leg.get_title().get_text()
    last = fig.axes[0].containers[-1].lines[0]  # the data line of the last errorbar drawn
    assert last.get_linestyle() == "--" and to_rgba(last.get_color()) == to_rgba("0.45")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0.1", "1"]


def test_scaling_figure_colours_by_walk_and_plots_tau():
    rows = [{"d": d, "n": f * d, "walk": w, "ess_per_s": 100.0 / d, "pivots_per_step": d, "tau_steps": 2.0 + f,
             "reliable": d > 10} for d in (10, 20) for f in (1, 5) for w in ("billiard", "ball")]
    fig = plots.scaling_figure(rows)
    assert [a.get_ylabel() for a in fig.axes][2].startswith("τ")
    colours = {}
    for ln in fig.axes[0].lines:
        colours.setdefault(to_rgba(ln.get_color()), set()).add(len(ln.get_xdata()))
    assert len(colours) == 2  # one colour per walk, whatever n
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["billiard", "ball"]
    assert fig.axes[1].get_legend() is not None


def test_plots_without_matplotlib_name_the_extra(monkeypatch, sampler):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"knorm\[plot\]"):
        plots.trace(sampler)


def test_cli_plot_writes_once_and_refuses_to_overwrite_without_force(tmp_path, capsys):
    out = tmp_path / "trace.png"
    argv = ["plot", "trace", "--d", "4", "--n", "10", "--count", "200", "--out", str(out)]
    rc, stdout, _ = run(argv, capsys)
    assert rc == 0 and out.read_bytes().startswith(PNG) and "wrote" in stdout
    out.write_bytes(b"keep me")
    rc, _, err = run(argv, capsys)
    assert rc == 1 and "--force" in err and out.read_bytes() == b"keep me"
    rc, _, _ = run(argv + ["--force"], capsys)
    assert rc == 0 and out.read_bytes().startswith(PNG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.png"]


def test_cli_plot_error_vs_epsilon_and_nim_spectrum(tmp_path, capsys):
    out = tmp_path / "e.svg"
    rc, stdout, _ = run(["plot", "error-vs-epsilon", "--d", "3", "--n", "8", "--mechanisms", "laplace", "gaussian",
                         "--delta", "1e-6", "--eps", "0.5", "1", "--out", str(out)], capsys)
    assert rc == 0 and out.read_text().lstrip().startswith("<?xml") and "gaussian" in stdout
    out = tmp_path / "s.pdf"
    rc, _, _ = run(["plot", "nim-spectrum", "--d", "4", "--n", "10", "--out", str(out)], capsys)
    assert rc == 0 and out.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("argv, rc, text", [
    (["plot", "trace", "--out", "x.npy"], 1, "must end in .png, .pdf or .svg"),
    (["plot", "nim-spectrum", "--coord", "1", "--out", "x.png"], 2, "--coord does not apply"),
    (["plot", "chains", "--eps", "1", "--out", "x.png"], 2, "--eps does not apply"),
    (["plot", "error-vs-epsilon", "--mechanisms", "gaussian", "--out", "x.png"], 2, "needs --delta"),
    (["plot", "trace", "--d", "3", "--n", "8", "--coord", "5", "--out", "x.png"], 1, "--coord 5"),
])
def test_cli_plot_bad_arguments_give_one_line(argv, rc, text, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got, _, err = run(argv, capsys)
    assert got == rc and text in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_cli_plot_without_matplotlib_fails_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, stdout, err = run(["plot", "chains", "--out", str(tmp_path / "c.png")], capsys)
    assert rc == 1 and "knorm[plot]" in err and stdout == ""


def test_experiments_write_their_figures(tmp_path):
    from knorm.experiments import scaling, table3

    table3((4,), 10, (0.5, 1.0), releases=5, out_dir=tmp_path, out=lambda *a: None)
    scaling((4,), (1, 2), ("billiard", "ball"), seconds=0.05, out_dir=tmp_path, out=lambda *a: None)
    for name in ("table3.png", "scaling.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG)
