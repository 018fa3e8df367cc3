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
