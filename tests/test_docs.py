"""The examples of README.md and docs/ run, and the outputs they show are what the code prints.

Conventions (README.md "Development" points here):

- A ```python block is executed. The blocks of one page share a namespace and a working
  folder (a fresh temporary one, with ``examples/`` and ``scripts/`` linked in), in order.
- A ```text block right after a python block, marked ``<!-- docs-test: stdout -->``, is
  that block's printed output and is compared with it.
- A ```console block holds ``$ command`` lines, each followed by its output. The command
  is run by bash in the page's folder (``knorm`` is this environment's) and its stdout is
  compared with the lines shown.
- Marker comments on the lines just before a block: ``<!-- docs-test: skip (reason) -->``
  (the block is not run; the reason is required), ``<!-- docs-test: rtol=0.2 -->`` (the
  block's numbers without ± may differ by that relative amount: Monte-Carlo diagnostics
  such as R-hat and ESS), ``<!-- docs-test: time-column="time s" -->`` (in a table whose
  header holds that name, the number right-aligned under it is a timing and is ignored),
  ``<!-- docs-test: stdout -->`` (above).
- ``KNORM_DOCS_UPDATE=1 python -m pytest tests/test_docs.py`` rewrites every stale output
  block with what the code prints now (then review the diff: a changed number may be a bug).

Comparison (``compare``): line by line, runs of spaces collapsed; the text between numbers
must be identical. A number followed by a time unit (s, ms, µs, samples/s, ESS/s) is a
timing and is ignored. A shown ``a ± s`` is a Monte-Carlo estimate with its standard error:
the new ``a' ± s'`` must satisfy ``|a' − a| ≤ 5·√(s² + s'²)`` (five standard deviations of
the difference of two independent estimates, plus half a unit of the last shown digit) and
``s/2 ≤ s' ≤ 2s``. Every other number must be equal (or within the block's rtol).

MCMC-derived numbers (README "Reproducibility", design §3.6): a seeded MCMC run is bit for bit
reproducible on one machine (same versions, same BLAS kernels), not across machines — the
rounding's covariance, Cholesky and SVD go through the CPU's BLAS/LAPACK kernels, and one last
bit sends a chain elsewhere. So the numbers a certificate or a Monte-Carlo estimate prints are
compared as their laws allow, and still fail when the law or the code changes:

- A diagnostic is recognised by its label (``DIAGNOSTICS``): ``R-hat`` within 0.01 (the
  certificate's bar is < 1.01); an ``ESS`` within 25% (five standard deviations of the min-ESS
  estimate from 2000 records: 1547–1713, sd ≈ 5%, across five OpenBLAS kernels); ``W =`` steps
  within 25% + 1 (W = ⌈20τ⌉, τ ∝ 1/min ESS); a ``KS p`` is Uniform(0, 1) under the law, so
  both must be ≥ 0.001 (the certificate's level), whatever else they are.
- In a table whose header has a ``± SE`` column, the number under it is the standard error of
  the number before it (the ± rule applies), and the number under ``per query`` (rms/√d)
  has the same relative standard error.
- ``<!-- docs-test: draws="REGEX" -->``: the output lines matching REGEX show one seeded
  random draw (noisy counts, synthetic records, one release's error); across machines they
  are other draws of the same law, so only their ``a ± s`` estimates are compared (± rule),
  and that the line is there, matches REGEX too and has as many numbers.
- ``ESS a/p`` and ``ESS a of p`` compare the fraction a/p: a certifying pool's size p is
  adaptive (2000 records, more when its thinning grows).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_LANGS = {"python", "console"}

FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
NUM = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
TOKEN = re.compile(rf"(?P<value>{NUM})(?:\s*±\s*(?P<se>{NUM}))?(?P<unit>\s*(?:samples/s|ESS/s|ms|µs|s)(?![\w/]))?")


@dataclass
class Block:
    lang: str
    body: str
    line: int  # 1-based line of the opening fence
    end: int = 0  # 1-based line of the closing fence
    indent: str = ""
    skip: str | None = None
    rtol: float = 0.0
    stdout: bool = False
    time_column: str | None = None
    draws: re.Pattern | None = None


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, with the docs-test markers just above each."""
    blocks: list[Block] = []
    lines = text.split("\n")
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line.strip())
        fence = FENCE.match(line)
        if marker:
            pending.append(marker.group(1))
        elif fence:
            indent, ticks, lang = fence.groups()
            j = i + 1
            while j < len(lines) and lines[j].strip() != ticks:
                j += 1
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : j]]
            block = Block(lang.lower(), "\n".join(body), i + 1, j + 1, indent)
            for m in pending:
                if m.startswith("skip"):
                    reason = m[4:].strip()
                    if not (reason.startswith("(") and reason.endswith(")") and len(reason) > 2):
                        raise ValueError(f"line {i + 1}: docs-test skip needs a reason: skip (why)")
                    block.skip = reason[1:-1]
                elif m.startswith("rtol="):
                    block.rtol = float(m[5:])
                elif m == "stdout":
                    block.stdout = True
                elif m.startswith("time-column="):
                    block.time_column = m[len("time-column="):].strip('"')
                elif m.startswith("draws="):
                    block.draws = re.compile(m[len("draws="):].strip('"'))
                else:
                    raise ValueError(f"line {i + 1}: unknown docs-test marker {m!r}")
            blocks.append(block)
            pending = []
            i = j
        elif line.strip():
            pending = []
        i += 1
    return blocks


# MCMC diagnostics, by the label just before the number: (label, shown, now) → agree?
DIAGNOSTICS = [
    (re.compile(r"R-hat\s*$"), lambda a, b: abs(b - a) <= 0.01),
    (re.compile(r"ESS\s*$"), lambda a, b: abs(b - a) <= 0.25 * a),
    (re.compile(r"\bW\s*=\s*$"), lambda a, b: abs(b - a) <= 0.25 * a + 1),
    (re.compile(r"KS p\s*$"), lambda a, b: a >= 0.001 and b >= 0.001),
]


def _tokens(line: str):
    """(text parts, numbers) of a line; numbers as (value, se or None, is_timing, label), the
    label being the text between the previous number and this one."""
    texts, numbers, pos = [], [], 0
    for m in TOKEN.finditer(line):
        texts.append(line[pos : m.start()])
        se = m.group("se")
        texts.append("±" if se is not None else "")
        texts.append(m.group("unit") or "")
        numbers.append((m.group("value"), se, m.group("unit") is not None, line[pos : m.start()]))
        pos = m.end()
    texts.append(line[pos:])
    return [re.sub(r"\s+", " ", t).strip() for t in texts], numbers


def _half_ulp(shown: str) -> float:
    mantissa = re.split(r"[eE]", shown)[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(re.split(r"[eE]", shown)[1]) if re.search(r"[eE]", shown) else 0
    return 0.5 * 10.0 ** (exponent - decimals)


def _number_ok(shown, got, rtol: float) -> bool:
    (value, se, timing, label), (value2, se2, _, _) = shown, got
    if timing:
        return True
    a, b = float(value), float(value2)
    if se is None:
        for pattern, agree in DIAGNOSTICS:
            if pattern.search(label):
                return agree(a, b)
        return a == b or abs(b - a) <= rtol * abs(a)
    s, s2 = float(se), float(se2)
    if s == 0:
        return s2 == 0 and abs(b - a) <= _half_ulp(value)
    return abs(b - a) <= 5 * math.hypot(s, s2) + _half_ulp(value) and s / 2 <= s2 <= 2 * s


def mask_time_column(text: str, name: str) -> str:
    """Replace, below each header line holding ``name``, the number ending in its last column by ``<time>``."""
    out, end = [], None
    for line in text.split("\n"):
        if name in line:
            end = line.index(name) + len(name)
        elif end is not None:
            for m in re.finditer(NUM, line):
                if m.end() == end:
                    line = line[: m.start()] + "<time>" + line[m.end() :]
                    break
        out.append(line)
    return "\n".join(out)


def _column_end(header: str, name: str) -> int | None:
    return header.index(name) + len(name) if name in header else None


def _number_ending_at(line: str, end: int):
    return next((m for m in re.finditer(NUM, line) if m.end() == end), None)


def join_se_column(text: str) -> str:
    """In a table with a ``± SE`` column, write each row's ``rms  se`` as ``rms ± se`` and its
    ``per query`` value as ``pq ± se·pq/rms`` (per query = rms/√d: the same relative error)."""
    out, se_end, pq_end = [], None, None
    for line in text.split("\n"):
        if "± SE" in line:
            se_end, pq_end = _column_end(line, "± SE"), _column_end(line, "per query")
        elif not line.strip() or not re.match(r"^[ *] \S", line):  # the table ends: no row of it
            se_end = pq_end = None
        elif se_end is not None:
            se = _number_ending_at(line, se_end)
            est = se and list(re.finditer(NUM, line[: se.start()]))
            if se and est and not line[est[-1].end() : se.start()].strip():
                rms, s = float(est[-1].group()), float(se.group())
                pq = _number_ending_at(line, pq_end) if pq_end else None
                if pq and rms > 0:
                    pq_se = s * float(pq.group()) / rms
                    line = f"{line[: pq.end()]} ± {pq_se:.2g}{line[pq.end() :]}"
                line = f"{line[: est[-1].end()]} ± {line[se.start() :]}"
        out.append(line)
    return "\n".join(out)


def _estimates(line: str) -> list:
    """What a line of one random draw must keep: its ``a ± s`` estimates."""
    return [n[:2] for n in _tokens(line)[1] if n[1] is not None]


ESS_OF_POOL = re.compile(r"ESS (\d+)(/| of )(\d+)")


def ess_fractions(text: str) -> str:
    """``ESS a/p`` (or ``a of p``) as ``ESS f of the pool`` (f = a/p): a certifying pool's size is
    adaptive (2000 records, more when its thinning grows), the fraction is what is certified."""
    return ESS_OF_POOL.sub(lambda m: f"ESS {int(m[1]) / int(m[3]):.4f} of the pool", text)


def compare(expected: str, actual: str, rtol: float = 0.0, time_column: str | None = None,
            draws: re.Pattern | None = None) -> list[str]:
    """Where ``actual`` differs from the ``expected`` text shown in the docs (empty: they agree)."""
    if time_column:
        expected, actual = mask_time_column(expected, time_column), mask_time_column(actual, time_column)
    expected, actual = ess_fractions(join_se_column(expected)), ess_fractions(join_se_column(actual))
    exp = expected.rstrip().strip("\n").split("\n") if expected.strip() else []
    act = actual.rstrip().strip("\n").split("\n") if actual.strip() else []
    problems = []
    for k in range(max(len(exp), len(act))):
        e = exp[k] if k < len(exp) else "<no line>"
        a = act[k] if k < len(act) else "<no line>"
        if draws is not None and draws.search(e):
            es, ea = _estimates(e), _estimates(a)
            same = draws.search(a) is not None and len(_tokens(e)[1]) == len(_tokens(a)[1]) and len(es) == len(
                ea) and all(_number_ok((*x, False, ""), (*y, False, ""), rtol) for x, y in zip(es, ea))
            if not same:
                problems.append(f"line {k + 1} (one random draw: its ± estimates):\n  shown: {e}\n  now:   {a}")
            continue
        te, ne = _tokens(e)
        ta, na = _tokens(a)
        same = te == ta and len(ne) == len(na)
        if same:
            same = all(((x[1] is None) == (y[1] is None)) and _number_ok(x, y, rtol) for x, y in zip(ne, na))
        if not same:
            problems.append(f"line {k + 1}:\n  shown: {e}\n  now:   {a}")
    return problems


def console_commands(body: str) -> list[tuple[str, str]]:
    """(command, shown output) pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in body.split("\n"):
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"console block: output before any '$ ' command: {line!r}")
    return [(cmd, "\n".join(out)) for cmd, out in pairs]


def run_command(cmd: str, cwd: Path) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               MPLBACKEND="Agg", COLUMNS="100")
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"`{cmd}` exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return proc.stdout


def check_page(path: Path, workdir: Path, update: bool = False) -> list[str]:
    """Run every block of a page; the list of failures (each naming page, line and difference).

    With ``update``, a block whose output differs is rewritten in the page with the output the
    code prints now (review the diff before committing it), and nothing is reported."""
    for name in ("examples", "scripts"):
        if not (workdir / name).exists():
            (workdir / name).symlink_to(ROOT / name)
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    failures: list[str] = []
    rewrites: list[tuple[Block, str]] = []
    namespace: dict = {"__name__": "__docs__"}
    last_stdout: str | None = None
    old = os.getcwd()
    os.chdir(workdir)
    try:
        for block in parse_blocks(path.read_text(encoding="utf-8")):
            where = f"{rel}:{block.line}"
            if block.skip is not None:
                last_stdout = None
                continue
            if block.stdout:
                if last_stdout is None:
                    failures.append(f"{where}: a docs-test stdout block must follow a python block that ran")
                else:
                    found = [f"{where}: {p}" for p in compare(block.body, last_stdout, block.rtol, block.time_column, block.draws)]
                    failures += found
                    if found:
                        rewrites.append((block, last_stdout.rstrip("\n")))
                last_stdout = None
            elif block.lang == "python":
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    exec(compile(block.body, where, "exec"), namespace)
                last_stdout = buffer.getvalue()
            elif block.lang == "console":
                now, stale = [], False
                for cmd, shown in console_commands(block.body):
                    out = run_command(cmd, workdir)
                    found = [f"{where}: `{cmd}` {p}" for p in compare(shown, out, block.rtol, block.time_column, block.draws)]
                    failures += found
                    stale = stale or bool(found)
                    now.append(f"$ {cmd}\n{out.rstrip(chr(10))}")
                if stale:
                    rewrites.append((block, "\n".join(now)))
                last_stdout = None
            else:
                last_stdout = None
    finally:
        os.chdir(old)
    if update and rewrites:
        lines = path.read_text(encoding="utf-8").split("\n")
        for block, text in sorted(rewrites, key=lambda r: -r[0].line):
            lines[block.line : block.end - 1] = [block.indent + t if t else t for t in text.split("\n")]
        path.write_text("\n".join(lines), encoding="utf-8")
        return []
    return failures


@pytest.mark.parametrize("path", [p for p in PAGES if any(b.lang in RUN_LANGS for b in parse_blocks(p.read_text(encoding="utf-8")))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run_and_match(path, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    failures = check_page(path, tmp_path, update=os.environ.get("KNORM_DOCS_UPDATE") == "1")
    assert not failures, (
        "docs output differs from what the code prints now:\n" + "\n".join(failures) + "\n(if the code is "
        "right, regenerate the shown output: KNORM_DOCS_UPDATE=1 python -m pytest tests/test_docs.py, then "
        "review the diff)")


# --- the checker itself ------------------------------------------------------------------


def test_compare_rules():
    # text must match exactly, up to runs of spaces
    assert compare("knorm  0.1.0: workload pm1 8×40", "knorm 0.1.0: workload pm1 8×40") == []
    assert compare("rank 8 of 8", "rank 8 of 8\nextra line")
    assert compare("K is cross-polytope", "K is cube")
    # plain numbers are exact unless the block states a tolerance
    assert compare("mean norm 1.0041", "mean norm 1.0052")
    assert compare("mean norm 1.0041", "mean norm 1.0052", rtol=0.01) == []
    # timings are ignored, counts next to them are not
    assert compare("speed: 3 samples in 0.00 s (16380.6 samples/s)", "speed: 3 samples in 0.41 s (7.3 samples/s)") == []
    assert compare("speed: 3 samples in 0.00 s", "speed: 4 samples in 0.00 s")
    # a ± s: within 5·√(s² + s'²), and the standard error within a factor 2
    assert compare("norm 38.03 ± 0.28", "norm 38.45 ± 0.3") == []
    assert compare("norm 38.03 ± 0.28", "norm 40.50 ± 0.3")
    assert compare("norm 38.03 ± 0.28", "norm 38.03 ± 0.9")
    assert compare("norm 38.03 ± 0.28", "norm 38.03")
    assert compare("VolLB 24.04 ± 0", "VolLB 24.04 ± 0") == []
    assert compare("VolLB 24.04 ± 0", "VolLB 24.05 ± 0")
    # a timing column of a table
    shown, now = "  name  err  time s\n  a    12.1     2.6", "  name  err  time s\n  a    12.1    13.0"
    assert compare(shown, now) and compare(shown, now, time_column="time s") == []
    assert compare(shown, now.replace("12.1", "12.2"), time_column="time s")


def test_mcmc_numbers_are_compared_as_their_laws_allow():
    """Design §3.6: other BLAS kernels give other chains; the certificate's numbers then move
    within their Monte-Carlo error, and a changed law still fails."""
    cert = "(max R-hat 1.0069, min ESS 1713/2000, gauge KS p 0.031), W = 24 steps"
    other = "(max R-hat 1.0084, min ESS 1638/2000, gauge KS p 0.921), W = 25 steps"  # OPENBLAS_CORETYPE=Haswell
    assert compare(cert, other) == []
    assert compare(cert, other.replace("1.0084", "1.0251"))      # R-hat off by more than 0.01
    assert compare(cert, other.replace("1638/", "1100/"))        # ESS 36% lower
    assert compare(cert, other.replace("1638/2000", "1638/3000"))  # the same ESS of a larger pool
    assert compare(cert, other.replace("0.921", "0.0002"))       # a KS p below the certificate's level
    assert compare(cert, other.replace("W = 25", "W = 36"))      # τ half again as long
    # a table's ± SE column: the estimate before it and the per-query value move within it
    head = "  mechanism      rms      ± SE   per query  how\n"
    shown = head + "* knorm       14.814     0.083      2.7508  Monte Carlo, ESS 1098"
    assert compare(shown, head + "* knorm       14.834     0.077      2.7546  Monte Carlo, ESS 1271") == []
    assert compare(shown, head + "* knorm       15.834     0.077      2.9403  Monte Carlo, ESS 1271")
    assert compare(shown, head + "* knorm       14.834     0.277      2.7546  Monte Carlo, ESS 1271")
    exact = head + "  laplace     30.463     exact      5.6569  exact"
    assert compare(exact, exact.replace("30.463", "30.464"))     # exact rows stay exact
    # lines of one random draw: their shape, and their ± estimates
    draws = re.compile(r"^  K-norm |^0 ")
    assert compare("  K-norm  10.7 ± 0.024   9.4   8.7\n0   good  strongly",
                   "  K-norm  10.7 ± 0.025   7.7   6.9\n0   very good  not", draws=draws) == []
    assert compare("  K-norm  10.7 ± 0.024   9.4", "  K-norm  12.7 ± 0.024   9.4", draws=draws)
    assert compare("0   good  strongly", "", draws=draws)  # the line must be there
    assert compare("0   good  strongly", "Traceback: ValueError", draws=draws)  # and be a draw's line
    assert compare("  K-norm  10.7 ± 0.024   9.4", "  K-norm  10.7 ± 0.024   9.4  1.0", draws=draws)
    # a ± SE column ends with its table: a later line is compared as it is
    table = "  mechanism      rms      ± SE   per query\n* knorm       14.814     0.083      2.7508\n\n"
    assert compare(table + "queries kept  8              16", table + "queries kept 40             16")
    # a pool's size is adaptive: its ESS fraction is compared
    assert compare("min ESS 2248/2992 records", "min ESS 1349/2000 records") == []
    assert compare("min ESS 2248/2992 records", "min ESS 1049/2000 records")
    assert compare("  Laplace  10.7   9.4", "  Laplace  10.7   9.5", draws=draws)  # not a draw line


def test_markers_are_parsed_and_checked():
    page = "<!-- docs-test: skip (needs a cluster) -->\n```python\nimport nowhere\n```\n\n" \
           "<!-- docs-test: rtol=0.2 -->\n<!-- docs-test: draws=\"^[0-9] \" -->\n```console\n$ true\n```\n"
    skip, tol = parse_blocks(page)
    assert skip.skip == "needs a cluster" and tol.rtol == 0.2 and tol.skip is None
    assert tol.draws is not None and tol.draws.search("3 good") and skip.draws is None
    with pytest.raises(ValueError, match="needs a reason"):
        parse_blocks("<!-- docs-test: skip -->\n```python\n```\n")
    with pytest.raises(ValueError, match="unknown docs-test marker"):
        parse_blocks("<!-- docs-test: skp (typo) -->\n```python\n```\n")
    (listed,) = parse_blocks("- an item:\n\n  ```python\n  x = 1\n    y = 2\n  ```\n")  # inside a list
    assert listed.lang == "python" and listed.body == "x = 1\n  y = 2"


def test_a_stale_output_fails(tmp_path):
    """A console block whose shown Monte-Carlo estimate is stale (46.98 ± 0.36 where the command
    now prints 13.40 ± 0.10: 65 standard deviations apart) fails, naming the line; ``update``
    rewrites it with what the command prints, and the rewritten page passes. (The command is a
    plain ``printf``: the checker is under test here; every page's real commands run in
    ``test_page_examples_run_and_match``.)"""
    now = "printf '  knorm     eps=1: 13.40 +- 0.10\\n  nim       eps=1: 13.40 ± 0.10\\n'"
    page = tmp_path / "stale.md"
    page.write_text(f"```console\n$ {now}\n  knorm     eps=1: 13.40 +- 0.10\n  nim       eps=1: 46.98 ± 0.36\n```\n",
                    encoding="utf-8")
    for name in ("work", "update", "again"):
        (tmp_path / name).mkdir()
    failures = check_page(page, tmp_path / "work")
    assert len(failures) == 1 and "46.98" in failures[0] and "nim" in failures[0], failures
    assert check_page(page, tmp_path / "update", update=True) == []
    assert "46.98" not in page.read_text(encoding="utf-8")
    assert check_page(page, tmp_path / "again") == []  # the regenerated block agrees with the command


def test_readme_links_point_to_files():
    """README.md is read on GitHub and PyPI, outside the site: its relative links must name files."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert targets
    missing = [t for t in targets if "://" not in t and not t.startswith("#") and not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_listed_commands_parse():
    """The `knorm …` lines of bash blocks (command listings, not run) are valid: the parser accepts
    each one that has no placeholder (``...``) or alternatives (``a|b``)."""
    import shlex

    from knorm.cli import build_parser

    checked, bad = 0, []
    for path in PAGES:
        for block in parse_blocks(path.read_text(encoding="utf-8")):
            if block.lang != "bash":
                continue
            for line in block.body.replace("\\\n", " ").split("\n"):  # continued lines joined
                cmd = line.split("  #")[0].strip()
                if not cmd.startswith("knorm ") or "..." in cmd or "|" in cmd:
                    continue
                try:
                    with contextlib.redirect_stderr(io.StringIO()):
                        build_parser().parse_args(shlex.split(cmd)[1:])
                    checked += 1
                except SystemExit:
                    bad.append(f"{path.relative_to(ROOT)}:{block.line}: {cmd}")
    assert checked >= 5 and not bad, bad


def test_every_documented_release_on_data_states_its_count():
    """Every `knorm sample … --data …` command in README.md and docs/ (listings and runs) says how many
    answers it releases (--count, or --regions: one per region at one answer's ε): a copied command
    never spends ε more times than its text says."""
    import shlex

    found, missing = 0, []
    for path in PAGES:
        for block in parse_blocks(path.read_text(encoding="utf-8")):
            for line in block.body.replace("\\\n", " ").split("\n"):  # continued lines joined
                cmd = line.split("  #")[0].strip().removeprefix("$ ")
                if not cmd.startswith("knorm sample") or "--data" not in cmd:
                    continue
                found += 1
                words = shlex.split(cmd)
                if "--count" not in words and "--regions" not in words:  # --regions: one answer per region
                    missing.append(f"{path.relative_to(ROOT)}:{block.line}: {cmd}")
    assert found >= 3 and not missing, missing
