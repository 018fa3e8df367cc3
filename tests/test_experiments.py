"""The shared experiments behind scripts/ and `knorm bench` run and write their files."""

import csv

from knorm.experiments import scaling, table3


def test_scaling_writes_a_row_per_walk_and_configuration(tmp_path):
    rows = scaling((4,), (1, 2), ("billiard", "ball"), seconds=0.05, out_dir=tmp_path, plot_path=False,
                   out=lambda *a: None)
    assert len(rows) == 4
    with open(tmp_path / "scaling.csv") as f:
        got = list(csv.DictReader(f))
    assert [(r["n"], r["walk"]) for r in got] == [("4", "billiard"), ("4", "ball"), ("8", "billiard"), ("8", "ball")]
    assert all(float(r["ess_per_s"]) > 0 and float(r["pivots_per_step"]) > 0 for r in got)


def test_table3_small(tmp_path):
    rows = table3((4,), 10, (1.0,), releases=20, out_dir=tmp_path, plot_path=False, out=lambda *a: None)
    assert {r["mechanism"] for r in rows} >= {"K-norm", "NIM", "Laplace Δ₁/ε"}
    assert (tmp_path / "table3.md").read_text().count("\n") == 3


def test_scaling_family_measures_each_size_and_records_failures(tmp_path, monkeypatch):
    from knorm import experiments as E
    from knorm.body.hull import OracleError

    real = E.rounding_of

    def flaky(body):  # the second size fails in rounding, as marginals of 8+ attributes do today
        if body.dim > 8:
            raise OracleError("facet-walk oracle exceeded its pivot limit (test)")
        return real(body)

    monkeypatch.setattr(E, "rounding_of", flaky)
    rows = E.scaling_family("pm1", [8, 10], seconds=0.05, pivot_seconds=0.02, out_dir=tmp_path, out=lambda *a: None)
    with open(tmp_path / "scaling_pm1.csv") as f:
        got = list(csv.DictReader(f))
    assert [r["size"] for r in got] == ["8", "10"] and len(rows) == 2
    ok, bad = got
    assert ok["status"] == "ok" and ok["stage"] == "done" and ok["rank"] == "8" and ok["n"] == "40"
    for key in ("rounding_s", "first_release_s", "release_1000_s", "pivots_per_step", "us_per_pivot", "tau_steps",
                "ess_per_s"):
        assert float(ok[key]) > 0, key
    assert float(ok["first_release_s"]) >= float(ok["rounding_s"])
    assert bad["status"] == "failed" and bad["stage"] == "rounding" and "OracleError" in bad["error"]
    assert "pivot limit" in E.format_family_row(rows[1])


def test_measure_with_timeout_records_a_timeout():
    from knorm import experiments as E

    row = E.measure_with_timeout(0.001)("pm1", 6, seconds=0.05, pivot_seconds=0.02, chains=2, seed=0)
    assert row["status"] == "timeout" and "timeout after" in row["error"]
    assert set(row) == set(E.FAMILY_FIELDS)
