"""``knorm sample --budget FILE``: releases recorded in a ledger, refused past its budget."""

import json
import stat

import numpy as np
from cli_helpers import run

from knorm.budget_ledger import FileAccountant

SMALL = ["--d", "6", "--n", "20", "--mechanism", "laplace"]


def _sample(tmp_path, *extra, eps="0.25", count="1"):
    return ["sample", *SMALL, "--epsilon", eps, "--count", count, "--data", str(tmp_path / "x.npy"),
            "--out", str(tmp_path / "a.npy"), "--force", *extra]


def test_budget_ledger_records_every_release_and_refuses_past_it(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.arange(20.0))
    ledger = tmp_path / "office" / "survey.ledger"
    rc, _, err = run(_sample(tmp_path, "--budget", str(ledger)), capsys)
    assert rc == 2 and "--budget-epsilon" in err and err.count("\n") == 1 and not ledger.exists()
    rc, out, _ = run(_sample(tmp_path, "--budget", str(ledger), "--budget-epsilon", "1"), capsys)
    assert rc == 0 and "spent ε = 0.25 of ε = 1 (1 release(s) recorded)" in out
    assert stat.S_IMODE(ledger.stat().st_mode) == 0o600
    assert stat.S_IMODE(ledger.parent.stat().st_mode) == 0o700
    rc, out, _ = run(_sample(tmp_path, "--budget", str(ledger), count="2") + ["--json"], capsys)
    assert rc == 0 and json.loads(out)["budget"]["spent_epsilon"] == 0.75
    before = (tmp_path / "a.npy").read_bytes()
    rc, _, err = run(_sample(tmp_path, "--budget", str(ledger), count="2"), capsys)
    last = err.splitlines()[-1]  # after the announced total: one error line
    assert rc == 1 and last.startswith("knorm: error: --budget") and "budget exceeded" in last
    assert (tmp_path / "a.npy").read_bytes() == before  # nothing written
    acc = FileAccountant(ledger)
    assert acc.total == (0.75, 0.0) and len(acc.spends) == 2
    assert acc.spends[1].claim.answers == 2
    rc, _, err = run(_sample(tmp_path, "--budget", str(ledger), "--budget-epsilon", "5"), capsys)
    assert rc == 1 and "differs" in err and FileAccountant(ledger).total == (0.75, 0.0)


def test_budget_options_need_data_and_budget(tmp_path, capsys):
    rc, _, err = run(["sample", *SMALL, "--count", "3", "--budget", str(tmp_path / "l")], capsys)
    assert rc == 2 and "--budget applies only with --data" in err
    np.save(tmp_path / "x.npy", np.arange(20.0))
    rc, _, err = run(_sample(tmp_path, "--budget-epsilon", "1"), capsys)
    assert rc == 2 and "--budget-epsilon applies only with --budget" in err


def test_large_epsilon_warned_on_one_line(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.arange(20.0))
    rc, out, err = run(_sample(tmp_path, eps="100") + ["--json"], capsys)
    assert rc == 0 and "knorm: warning: epsilon = 100 > 20" in err and "essentially exact" in err
    assert "essentially exact" in json.loads(out)["privacy"]["text"]  # the claim says so too
