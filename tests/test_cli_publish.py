"""``knorm publish``: records + a declared domain file → one release of every k-way marginal per declared
region → post-processing → a tidy CSV with standard errors and its claim (issue 50 item 6).

The true tables are counted here from the records, label by label, independently of knorm.data; the
released values are compared with them within tolerances derived from the known noise scale.
"""

import csv
import itertools
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run

from knorm.budget_ledger import FileAccountant

SEXES, PARTIES, EDU = ["F", "M"], ["1", "2.0", "3"], ["none", "school", "degree", "higher"]
AGES = ["[0, 25)", "[25, 45)", "[45, 65)", "[65, inf)"]
COUNTIES = 8
DOMAIN = [{"name": "sex", "categories": ["F", "M"]},
          {"name": "age", "edges": [0, 25, 45, 65, "inf"], "clip": True},  # ages below 0 in the first bin
          {"name": "party", "categories": [1, 2, 3]},  # "2.0" in the records is 2
          {"name": "edu", "categories": EDU},
          {"name": "county", "categories": [float(c) for c in range(1, COUNTIES + 1)]}]  # labelled "1" … "8"
ATTRS = ["sex", "age", "party", "edu"]
TABLES = 2 * 4 + 2 * 3 + 2 * 4 + 4 * 3 + 4 * 4 + 3 * 4  # d: the cells of the six 2-way tables
PLANTED = ("PLANTED", "7919", "583")  # values and counts planted in bad records: never in a message


def _label(attr, row):
    if attr == "age":
        a = max(float(row["age"]), 0.0)
        return AGES[0 if a < 25 else 1 if a < 45 else 2 if a < 65 else 3]
    if attr == "party":
        return str(int(float(row["party"])))
    return row[attr]


def write_inputs(folder, n=2000, seed=0, domain=DOMAIN):
    """The records (CSV, an extra column, ages below the first edge) and the domain file; the rows."""
    rng = np.random.default_rng(seed)
    rows = [{"id": str(i), "sex": str(rng.choice(SEXES)), "age": f"{rng.uniform(-3, 99):.1f}",
             "party": str(rng.choice(PARTIES)), "edu": str(rng.choice(EDU, p=[0.1, 0.4, 0.3, 0.2])),
             "county": str(rng.integers(1, COUNTIES + 1))} for i in range(n)]
    write_csv(folder / "people.csv", rows)
    (folder / "domain.json").write_text(json.dumps(domain))
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def true_tables(rows, attrs=ATTRS):
    """{(region, table, cell): count} of every 2-way table, counted from the records."""
    c = Counter()
    for r in rows:
        for a, b in itertools.combinations(attrs, 2):
            c[(r["county"], f"{a}×{b}", f"{_label(a, r)}×{_label(b, r)}")] += 1
    return c


def read_table(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def publish(folder, *extra, out="tables.csv", records="people.csv"):
    return ["publish", "--records", str(folder / records), "--domain", str(folder / "domain.json"),
            "--out", str(folder / out), *extra]


def margins(table_rows):
    """{(region, attribute, label): [the margin from each table holding the attribute]}."""
    m = {}
    for r in table_rows:
        names, labels = r["table"].split("×"), r["cell"].split("×")
        for i, (a, lab) in enumerate(zip(names, labels)):
            key = (r["region"], a, lab)
            m.setdefault(key, {}).setdefault(r["table"], 0.0)
            m[key][r["table"]] += float(r["value"])
    return {k: list(v.values()) for k, v in m.items()}


def test_seeded_flow_is_reproducible_labelled_and_near_the_truth(tmp_path, capsys):
    """A seeded (NOT PRIVATE) Laplace run: reproducible, labelled as declared, and its values within the
    noise's known law of the counted tables.

    Laplace on the 6 two-way tables: Δ₁ = 6 (a record is in one cell of each table), b = Δ₁/ε = 0.6 at
    ε = 10, each answer's noise e ~ Lap(b) independent, SE = √2·b. Then z = e/SE has E z² = 1 and
    Var z² = E e⁴/SE⁴ − 1 = 24b⁴/4b⁴ − 1 = 5, so the mean of z² over the m = 8 regions × 62 cells is
    1 ± √(5/m) (0.100): it must be within 5 of those SDs of 1 (a swapped cell, off by counts of
    tens, would put it far above). The grid's rounding (≤ 2⁻¹⁰·b) is negligible.
    """
    rows = write_inputs(tmp_path)
    argv = publish(tmp_path, "--by", "county", "--mechanism", "laplace", "--epsilon", "10", "--post", "none",
                   "--nonprivate-seed", "7")
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    assert "NOT PRIVATE" in err and "NOT PRIVATE" in out
    first = (tmp_path / "tables.csv").read_bytes()
    rc, _, err = run(argv + ["--force"], capsys)
    assert rc == 0 and (tmp_path / "tables.csv").read_bytes() == first  # the seed reproduces the table
    claim = json.loads((tmp_path / "tables.claim.json").read_text())
    assert claim["private"] is False and claim["noise_source"] == "seed"
    table = read_table(tmp_path / "tables.csv")
    assert list(table[0]) == ["region", "table", "cell", "value", "standard_error", "standard_error_of"]
    assert len(table) == COUNTIES * TABLES
    assert sorted({r["region"] for r in table}) == [str(c) for c in range(1, COUNTIES + 1)]  # "1", not "1.0"
    truth = true_tables(rows)
    b = 6 / 10
    z2 = []
    for r in table:
        assert float(r["standard_error"]) == pytest.approx(math.sqrt(2) * b, rel=1e-12)
        assert r["standard_error_of"] == "raw answer"
        z2.append(((float(r["value"]) - truth[(r["region"], r["table"], r["cell"])]) / (math.sqrt(2) * b)) ** 2)
    assert abs(np.mean(z2) - 1) <= 5 * math.sqrt(5 / len(z2)), np.mean(z2)


def test_private_knorm_run_shapes_and_claim(tmp_path, capsys):
    """The default mechanism (K-norm) from OS entropy: one answer's ε for every declared region
    (parallel composition), the claim beside the table, every region's tables consistent."""
    small = [a for a in DOMAIN if a["name"] != "edu"]  # records with a column the domain does not declare
    write_inputs(tmp_path, n=300, domain=small)
    rc, out, err = run(publish(tmp_path, "--by", "county", "--post", "least-squares", "--json"), capsys)
    assert rc == 0, err
    summary = json.loads(out)
    claim = json.loads((tmp_path / "tables.claim.json").read_text())
    assert claim == summary
    p = claim["privacy"]
    assert claim["private"] and claim["noise_source"] == "os-entropy" and p["mechanism"] == "K-norm"
    assert p["epsilon"] == 1.0 and p["datasets"] == COUNTIES and p["answers"] == 1
    assert "parallel composition" in p["composition"]
    assert claim["tables"] == ["sex×age", "sex×party", "age×party"] and claim["regions"] == [str(c) for c in
                                                                                             range(1, 9)]
    table = read_table(tmp_path / "tables.csv")
    assert len(table) == COUNTIES * (8 + 6 + 12) and claim["rows"] == len(table)
    assert {r["standard_error_of"] for r in table} == {"least-squares answer"}
    assert all(float(r["standard_error"]) > 0 for r in table)
    for key, ms in margins(table).items():
        assert np.ptp(ms) <= 1e-6 * max(1.0, max(abs(v) for v in ms)), key


def test_least_squares_standard_errors_propagate_exactly(tmp_path, capsys):
    """Laplace answers after least squares: SE_i = √2·b·‖P_i‖₂, P = F F⁺ the projection onto F's range,
    F built here cell by cell; the tables agree (margins, totals) in every region."""
    write_inputs(tmp_path, n=500)
    rc, _, err = run(publish(tmp_path, "--by", "county", "--mechanism", "laplace", "--post", "least-squares",
                             "--quiet"), capsys)
    assert rc == 0, err
    shape = [2, 4, 3, 4]
    cells = list(itertools.product(*(range(s) for s in shape)))
    F = np.array([[float(c[a] == i and c[b] == j) for c in cells]
                  for a, b in itertools.combinations(range(4), 2)
                  for i in range(shape[a]) for j in range(shape[b])])
    P = F @ np.linalg.pinv(F)
    se = math.sqrt(2) * 6.0 * np.linalg.norm(P, axis=1)  # b = Δ₁/ε = 6 at ε = 1
    table = read_table(tmp_path / "tables.csv")
    for r, want in zip(table, np.tile(se, COUNTIES)):
        assert float(r["standard_error"]) == pytest.approx(want, rel=1e-9)
    for key, ms in margins(table).items():
        assert np.ptp(ms) <= 1e-6 * max(1.0, max(abs(v) for v in ms)), key


@pytest.mark.parametrize("post", ["integer", "nonnegative"])
def test_projected_tables_agree_and_say_which_error(tmp_path, capsys, post):
    """--post integer: non-negative integers whose margins agree exactly; nonnegative: ≥ 0 and
    consistent; both give the raw answers' SE, labelled as such."""
    write_inputs(tmp_path, n=500)
    rc, out, err = run(publish(tmp_path, "--by", "county", "--mechanism", "laplace", "--post", post), capsys)
    assert rc == 0, err
    table = read_table(tmp_path / "tables.csv")
    values = [float(r["value"]) for r in table]
    assert min(values) >= 0
    if post == "integer":
        assert all(r["value"].isdigit() for r in table)
        assert all(len(set(ms)) == 1 for ms in margins(table).values())
        assert {r["standard_error_of"] for r in table} == {"raw answer, before integer rounding"}
        assert "integer tables: exact; largest gap to the ℓ₁ bound" in out
    else:
        assert all(np.ptp(ms) <= 1e-6 * max(1.0, max(ms)) for ms in margins(table).values())
        assert {r["standard_error_of"] for r in table} == {"raw answer, before the non-negative projection"}
    assert "standard_error: of the raw answer" in out


def test_without_regions_and_with_declared_labels(tmp_path, capsys):
    """No --by: one set of tables, region "all", one answer's claim; labels as the domain file gives them."""
    domain = [{"name": "sex", "categories": ["F", "M"], "labels": ["female", "male"]},
              {"name": "age", "edges": [0, 25, 45, 65, "inf"], "clip": True}]
    write_inputs(tmp_path, n=100, domain=domain)
    rc, out, err = run(publish(tmp_path, "--mechanism", "gaussian", "--delta", "1e-6", "--k", "1"), capsys)
    assert rc == 0, err
    table = read_table(tmp_path / "tables.csv")
    assert [(r["region"], r["table"], r["cell"]) for r in table] == \
        [("all", "sex", "female"), ("all", "sex", "male")] + [("all", "age", a) for a in AGES]
    claim = json.loads((tmp_path / "tables.claim.json").read_text())
    assert claim["regions"] is None and claim["privacy"]["answers"] == 1 and claim["privacy"]["delta"] == 1e-6
    assert "privacy (total, 1 answer)" in out


def test_budget_is_recorded_and_refuses_an_overspend_before_writing(tmp_path, capsys):
    write_inputs(tmp_path, n=200)
    ledger = tmp_path / "survey.ledger"
    base = ["--by", "county", "--mechanism", "laplace", "--budget", str(ledger)]
    rc, out, err = run(publish(tmp_path, *base, "--budget-epsilon", "1", "--epsilon", "0.75"), capsys)
    assert rc == 0 and "spent ε = 0.75 of ε = 1" in out, err
    spend = FileAccountant(ledger).spends[0].claim
    assert spend.epsilon == 0.75 and spend.datasets == COUNTIES  # parallel composition over the regions
    rc, out, err = run(publish(tmp_path, *base, "--epsilon", "0.5", out="more.csv"), capsys)
    assert rc == 1 and err.count("\n") == 1 and err.startswith("knorm: error: --budget") and "exceeded" in err
    assert not (tmp_path / "more.csv").exists() and not (tmp_path / "more.claim.json").exists()
    assert FileAccountant(ledger).total == (0.75, 0.0)


def _bad_records(rows, column, value, count=583):
    rows = [dict(r) for r in rows]
    for r in rows[:count]:
        r[column] = value
    return rows


BAD = {  # name: (what to change, the option the one line must name)
    "records missing": (lambda f, rows: (f / "people.csv").unlink(), [], "--records"),
    "records not csv": (lambda f, rows: (f / "people.csv").rename(f / "people.txt"), [], "--records"),
    "records not utf-8": (lambda f, rows: (f / "people.csv").write_bytes(
        b"id,sex,age,party,edu,county\n1,\xff,3,1,none,2\n"), [], "--records"),
    "records empty": (lambda f, rows: (f / "people.csv").write_text(""), [], "--records"),
    "column missing": (lambda f, rows: write_csv(f / "people.csv", [{k: v for k, v in r.items() if k != "edu"}
                                                                    for r in rows]), [], "--records"),
    "ragged row": (lambda f, rows: (f / "people.csv").write_text("id,sex,age,party,edu,county\n1,F,3,1,none,2,PLANTED\n"),
                   [], "--records"),
    "undeclared category": (lambda f, rows: write_csv(f / "people.csv", _bad_records(rows, "sex", "PLANTED-zz")), [],
                            "--records"),
    "not a number": (lambda f, rows: write_csv(f / "people.csv", _bad_records(rows, "age", "PLANTED")), [],
                     "--records"),
    "undeclared region": (lambda f, rows: write_csv(f / "people.csv", _bad_records(rows, "county", "7919")), [],
                          "--records"),
    "outside the edges": (lambda f, rows: (write_csv(f / "people.csv", _bad_records(rows, "age", "7919.5")),
                                           (f / "domain.json").write_text(json.dumps(
                                               [{"name": "age", "edges": [0, 25, 45, 65, 120]} if a["name"] == "age"
                                                else a for a in DOMAIN]))),
                          [], "--records"),
    "domain missing": (lambda f, rows: (f / "domain.json").unlink(), [], "--domain"),
    "domain bad json": (lambda f, rows: (f / "domain.json").write_text("[{"), [], "--domain"),
    "domain not a list": (lambda f, rows: (f / "domain.json").write_text('{"sex": ["F", "M"]}'), [], "--domain"),
    "domain unknown key": (lambda f, rows: (f / "domain.json").write_text('[{"name": "sex", "cats": ["F"]}]'), [],
                           "--domain"),
    "domain clip on categories": (lambda f, rows: (f / "domain.json").write_text(
        '[{"name": "sex", "categories": ["F", "M"], "clip": true}]'), [], "--domain"),
    "domain repeated name": (lambda f, rows: (f / "domain.json").write_text(json.dumps(DOMAIN + DOMAIN[:1])), [],
                             "--domain"),
    "domain bad edges": (lambda f, rows: (f / "domain.json").write_text('[{"name": "age", "edges": [5, 1]}]'), [],
                         "--domain"),
    "by unknown": (None, ["--by", "district"], "--by"),
    "by binned": (None, ["--by", "age"], "--by"),
    "k too large": (None, ["--by", "county", "--k", "5"], "--k"),
    "k zero": (None, ["--k", "0"], "--k"),
    "post unknown": (None, ["--post", "rounded"], "--post"),
    "gaussian without delta": (None, ["--mechanism", "gaussian"], "--delta"),
    "delta with laplace": (None, ["--delta", "1e-6"], "--delta"),
    "prepared with laplace": (None, ["--prepared", "w.knorm"], "--prepared"),
    "budget epsilon alone": (None, ["--budget-epsilon", "1"], "--budget-epsilon"),
    "integer gap without integer": (None, ["--integer-gap", "0.1"], "--integer-gap"),
    "integer gap of 1": (None, ["--post", "integer", "--integer-gap", "1"], "--integer-gap"),
    "out exists": (lambda f, rows: (f / "tables.csv").write_text("keep"), [], "--out"),
    "claim exists": (lambda f, rows: (f / "tables.claim.json").write_text("keep"), [], "--out"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_one_line_naming_the_option_nothing_spent(tmp_path, capsys, case):
    change, extra, option = BAD[case]
    rows = write_inputs(tmp_path, n=600)
    if change is not None:
        change(tmp_path, rows)
    ledger = tmp_path / "ledger"
    budget = [] if "--budget-epsilon" in extra else ["--budget", str(ledger), "--budget-epsilon", "1"]
    mech = [] if "--mechanism" in extra else ["--mechanism", "laplace"]
    records = "people.txt" if case == "records not csv" else "people.csv"
    rc, out, err = run(publish(tmp_path, *mech, *budget, *extra, records=records), capsys)
    assert rc in (1, 2) and err.count("\n") == 1 and option in err, (case, rc, err)
    assert not any(p in err for p in PLANTED), err  # no value, no count of the records
    assert "Traceback" not in err and out == ""
    if case not in ("out exists", "claim exists"):
        assert not (tmp_path / "tables.csv").exists() and not (tmp_path / "tables.claim.json").exists()
    assert not ledger.exists() or FileAccountant(ledger).total == (0.0, 0.0)


def test_prepared_file_of_another_workload_is_refused_with_the_command_that_makes_it(tmp_path, capsys):
    import knorm

    write_inputs(tmp_path, n=50)
    knorm.prepare(np.eye(3), tmp_path / "other.knorm")
    rc, _, err = run(publish(tmp_path, "--by", "county", "--prepared", str(tmp_path / "other.knorm")), capsys)
    assert rc == 1 and err.count("\n") == 1 and "--prepared" in err
    assert "knorm prepare --workload marginals --shape 2 4 3 4 --k 2" in err


def _has_parquet():
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(_has_parquet(), reason="pandas and pyarrow are installed: the Parquet path is tested instead")
def test_parquet_without_its_readers_is_refused_by_name(tmp_path, capsys):
    write_inputs(tmp_path, n=10)
    (tmp_path / "people.parquet").write_bytes(b"PAR1")
    rc, _, err = run(["publish", "--records", str(tmp_path / "people.parquet"), "--domain",
                      str(tmp_path / "domain.json"), "--out", str(tmp_path / "t.csv")], capsys)
    assert rc == 1 and err.count("\n") == 1 and "--records" in err and "pyarrow" in err


@pytest.mark.skipif(not _has_parquet(), reason="needs pandas and pyarrow")
def test_parquet_gives_the_csv_table(tmp_path, capsys):
    import pandas as pd

    rows = write_inputs(tmp_path, n=300)
    frame = pd.read_csv(tmp_path / "people.csv")
    frame.to_parquet(tmp_path / "people.parquet")
    args = ["--by", "county", "--mechanism", "laplace", "--nonprivate-seed", "3", "--quiet"]
    rc, _, err = run(publish(tmp_path, *args), capsys)
    assert rc == 0, err
    argv = publish(tmp_path, *args, out="p.csv")
    argv[argv.index("--records") + 1] = str(tmp_path / "people.parquet")
    rc, _, err = run(argv, capsys)
    assert rc == 0 and (tmp_path / "p.csv").read_bytes() == (tmp_path / "tables.csv").read_bytes(), err
    assert len(rows) == 300


def test_sample_points_records_to_publish(tmp_path, capsys):
    write_inputs(tmp_path, n=10)
    np.save(tmp_path / "F.npy", np.eye(4))
    rc, _, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "people.csv"),
                      "--count", "1", "--json"], capsys)
    assert rc == 1 and "knorm publish --records" in err


def test_a_failed_post_processing_still_writes_the_paid_answers_and_says_so(tmp_path, capsys, monkeypatch):
    """The release is spent: if post-processing fails, the raw answers are written (labelled as such)
    and the one error line says so; the standard errors, known from F and ε alone, are computed
    before anything is spent (their failure spends nothing)."""
    from knorm.cli import publish as P

    write_inputs(tmp_path, n=200)
    ledger = tmp_path / "ledger"
    argv = publish(tmp_path, "--by", "county", "--mechanism", "laplace", "--post", "integer", "--budget", str(ledger),
                   "--budget-epsilon", "5")

    def broken(*args, **kwargs):
        raise ValueError("the solver broke")

    monkeypatch.setattr(P, "standard_errors", broken)
    rc, _, err = run(argv, capsys)
    assert rc == 1 and "the solver broke" in err and FileAccountant(ledger).total == (0.0, 0.0)
    assert not (tmp_path / "tables.csv").exists()
    monkeypatch.undo()
    monkeypatch.setattr(P, "post_process", broken)
    rc, _, err = run(argv, capsys)
    assert rc == 1 and err.count("\n") == 1 and "--post integer failed (the solver broke)" in err
    claim = json.loads((tmp_path / "tables.claim.json").read_text())
    assert claim["post"] == "none" and "--post integer failed" in claim["post_failed"]
    assert {r["standard_error_of"] for r in read_table(tmp_path / "tables.csv")} == {"raw answer"}
    assert FileAccountant(ledger).total == (1.0, 0.0)
