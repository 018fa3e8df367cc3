"""The first `knorm sample` after install: it says up front that it compiles its kernels, reports the
compile time apart, and its speed counts no compiling; kernels compile one version per argument types."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba.core import event

import knorm
from knorm import _jit
from knorm.walks import chains
from knorm.cli import main
from knorm.cli import sample as cli_sample

NOTICE = "knorm: compiling the sampling kernels once"
SMALL = ["--d", "6", "--n", "20"]


@_jit.kernel(cache=False)
def _inner(x, flag, k):
    return x[k] if flag else -x[k]


@_jit.kernel(cache=False, entry=True)
def _outer(x, flag, k):
    # numeric constants, a variable, and a boolean constant
    return _inner(x, flag, 0) + _inner(x, flag, k) + _inner(x, flag, -1) + _inner(x, True, k)


def test_kernel_compiles_one_version_per_argument_types():
    x = np.arange(3.0)
    assert _outer(x, False, 1) == -0.0 - 1.0 - 2.0 + 1.0
    # njit alone compiles _inner four times here (k = literal 0, int64, literal -1; flag = literal
    # True); numeric and boolean literals are widened: one
    sigs = sorted(str(s[1:]) for s in _inner.signatures)
    assert sigs == ["(bool, int64)"], sigs


def test_kernels_only_kernels_call_refuse_a_python_call():
    """They are compiled without numba's Python wrapper: a call from Python is a clear TypeError
    (not a jump to a null address); an inline kernel takes its caller's flags, so no fastmath."""
    from knorm.body import _simplex as sx

    with pytest.raises(TypeError, match="called from other kernels only"):
        sx._dot(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="no fastmath"):
        _jit.kernel(inline=True, fastmath=True)


def test_compile_time_is_reported_apart_and_not_in_the_speed(monkeypatch, capsys):
    """A fake clock: the sampling phase spends 7 s inside a numba compile event and 0.25 s outside
    it; the summary's seconds are exactly the 0.25 s and its compile_seconds the 7 s."""
    clock = [1000.0]
    monkeypatch.setattr(cli_sample.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(event, "timer", lambda: clock[0])
    build = cli_sample.build_mechanism

    def build_then_tick(*args, **kwargs):
        mech = build(*args, **kwargs)
        sample_noise = mech.sample_noise

        def compiling_sample_noise(size):
            with event.trigger_event("numba:compile", data={}):
                clock[0] += 7.0
            clock[0] += 0.25
            return sample_noise(size=size)

        monkeypatch.setattr(mech, "sample_noise", compiling_sample_noise)
        return mech

    monkeypatch.setattr(cli_sample, "build_mechanism", build_then_tick)
    assert main(["sample", *SMALL, "--mechanism", "laplace", "--count", "5", "--json"]) == 0
    out, err = capsys.readouterr()
    s = json.loads(out)
    assert s["seconds"] == 0.25 and s["samples_per_second"] == 20.0
    assert s["compile_seconds"] == 7.0
    assert "compiled the kernels in 7.0 s" in err and err.count("\n") == 1


def _run(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the copy's own __pycache__
    env["PYTHONPATH"] = str(cwd)
    return subprocess.run([sys.executable, "-m", "knorm", "sample", *SMALL, "--count", "50", "--json", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_compile_notice_only_when_the_cache_is_cold(tmp_path):
    """A copy of the package with its numba caches (mtimes kept, so they stay valid), less the
    index of run_chain: the first run says it compiles (run_chain alone, its callees load) and
    reports the time; the second finds every index and says nothing."""
    if not chains.sampling_kernels_cached():  # the caches this copies: made here if no test made them yet
        assert main(["sample", *SMALL, "--count", "5", "--quiet"]) == 0
    assert chains.sampling_kernels_cached()
    pkg = Path(knorm.__file__).parent
    # numba's cache files in the making (``*.tmp.<uid>``, renamed into place when written) are left
    # out: under ``pytest -n 2`` another process may be compiling a kernel while this copies
    shutil.copytree(pkg, tmp_path / "knorm", copy_function=shutil.copy2, ignore=shutil.ignore_patterns("*.tmp.*"))
    copied = tmp_path / "knorm" / "walks" / "__pycache__"
    dropped = list(copied.glob("_kernels.run_chain-*.nbi"))
    assert len(dropped) == 1, "run_chain's cache index is not in the package's __pycache__"
    dropped[0].unlink()

    cold = _run(tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.startswith(NOTICE) and cold.stderr.count(NOTICE) == 1
    assert "compiled the kernels in" in cold.stderr
    assert json.loads(cold.stdout)["compile_seconds"] > 0

    warm = _run(tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert NOTICE not in warm.stderr and "compiled the kernels" not in warm.stderr
    assert json.loads(warm.stdout)["compile_seconds"] < 0.5
    quiet = _run(tmp_path, "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""
