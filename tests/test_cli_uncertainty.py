"""Per-answer uncertainty on the command line (issue 50 item 3): knorm info's standard-error summary
and knorm sample --data --json's standard errors and interval half-widths, against exact values."""

import json

import numpy as np

from cli_helpers import run


def test_info_reports_per_answer_standard_errors(capsys):
    """Prefix workload, n = 6, ε = 0.5: Laplace b = Δ₁/ε = 6/0.5, SE √2·b for every answer; K-norm's
    body is an exact cross-polytope image, so its SE is exact too."""
    rc, stdout, _ = run(["info", "--workload", "prefix", "--n", "6", "--epsilon", "0.5", "--no-nim",
                         "--vollb-max-dim", "0", "--json"], capsys)
    assert rc == 0
    se = json.loads(stdout)["per_answer_standard_error"]
    lap = se["laplace"]
    assert lap["exact"] and np.isclose(lap["min"], np.sqrt(2) * 12.0) and np.isclose(lap["max"], np.sqrt(2) * 12.0)
    assert se["knorm"]["exact"] and 0 < se["knorm"]["min"] <= se["knorm"]["median"] <= se["knorm"]["max"]


def test_sample_json_gives_standard_errors_and_half_widths(tmp_path, capsys):
    np.save(tmp_path / "F.npy", 2.0 * np.eye(3))
    np.save(tmp_path / "x.npy", np.array([3, 0, 5]))
    rc, stdout, _ = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "x.npy"),
                         "--count", "1", "--mechanism", "laplace", "--epsilon", "0.5", "--level", "0.8",
                         "--json", "--quiet"], capsys)
    assert rc == 0
    u = json.loads(stdout)["uncertainty"]
    b = 2.0 / 0.5
    assert u["level"] == 0.8 and np.allclose(u["standard_errors"], np.sqrt(2) * b)
    assert np.allclose(u["half_widths"], b * np.log(1 / 0.2))
    rc, _, err = run(["sample", "--matrix", str(tmp_path / "F.npy"), "--data", str(tmp_path / "x.npy"),
                      "--count", "1", "--level", "1.5", "--json"], capsys)
    assert rc == 2 and "--level" in err
