"""``knorm publish``: published tables from records, in one command (issue 50 item 6).

Records (``--records``: a CSV with a header line, or Parquet with pandas and pyarrow) and a domain
file declared without looking at them (``--domain``: JSON, a list of attributes as
:class:`knorm.data.Attribute` takes them: ``name`` and ``categories`` or ``edges``, optionally
``labels``, ``right`` and ``clip``) → one histogram per declared region (``--by NAME``: the attribute
of the file whose categories are the regions; :func:`knorm.data.histograms` knows the regions are
disjoint, so the batch costs one answer's ε by parallel composition) → one release of every k-way
marginal of the other attributes (``--k``; ``--prepared``: ``knorm prepare`` of that workload) →
post-processing (``--post``) → a tidy CSV, one row per cell of every table of every region:
``region, table, cell, value, standard_error, standard_error_of``.

Privacy: the histograms never leave this process; the only thing computed from the records that is
written or printed is the released values (noisy, then post-processed). Every input is checked
before the release; the release is recorded in ``--budget`` (by the mechanism, before its answers are
returned) and its claim written beside the table (``OUT`` with the suffix ``.claim.json``) before the
table. The standard errors are functions of F, ε and public seeds only.
"""

import argparse
import csv
import io
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

from .. import __version__
from .._io import atomic_write
from ..walks.chains import WALKS
from ._common import (MECHANISMS, CLIError, Progress, UsageError, _add_debug, _add_workers, _positive_float,
                      _positive_int, _probability, _seed, _warn, _workload_shape, check_memory, check_output)
from .budget import add_budget_options, budget_line, budget_summary, open_budget

POSTS = ("none", "least-squares", "nonnegative", "integer")
KEYS = ("name", "categories", "edges", "labels", "right", "clip")  # Attribute's arguments, and clip
COLUMNS = ("region", "table", "cell", "value", "standard_error", "standard_error_of")
NO_REGION = "all"  # the region column without --by: one table set over all the records
SEP = "×"  # joins the attributes of a table ("sex×age") and the labels of a cell ("F×[0, 25)")
PARQUET = (".parquet", ".pq")
SE_OF = {"none": "raw answer", "least-squares": "least-squares answer",
         "nonnegative": "raw answer, before the non-negative projection",
         "integer": "raw answer, before integer rounding"}
NOT_SHOWN = "which, and how many, is not shown: they come from the private records"


def _gap(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text}")
    return v


def claim_path(out):
    """The claim's file beside the table: ``tables.csv`` → ``tables.claim.json``."""
    return out.with_name(out.stem + ".claim.json")


# ---- the domain file ------------------------------------------------------------------------

def _edges(values):
    """JSON edges, with the strings "-inf" and "inf" for open ends (JSON has no infinity)."""
    if not isinstance(values, list):
        return values
    ends = {"-inf": -math.inf, "inf": math.inf, "+inf": math.inf, "-infinity": -math.inf, "infinity": math.inf}
    return [ends.get(v.lower(), v) if isinstance(v, str) else v for v in values]


def _read_json(path):
    p = Path(path)
    if not p.exists():
        raise CLIError(f"--domain file {path!r} does not exist")
    if p.is_dir():
        raise CLIError(f"--domain file {path!r} is a directory")
    try:
        return json.loads(p.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise CLIError(f"--domain file {path!r} is not UTF-8 text (a JSON list of attributes)") from None
    except json.JSONDecodeError as exc:
        raise CLIError(f"--domain file {path!r} is not valid JSON: {exc.msg} at line {exc.lineno} column "
                       f"{exc.colno}") from None
    except OSError as exc:
        raise CLIError(f"--domain: cannot read {path!r} ({exc.strerror or exc})") from None


def load_domain(path, by=None):
    """(the tables' :class:`~knorm.data.Domain`, the region attribute or None, {name: clip}) from the
    ``--domain`` file: a JSON list of attributes (or ``{"attributes": [...]}``), each an object with
    the keys of :class:`knorm.data.Attribute` (``name``, ``categories`` or ``edges``, ``labels``,
    ``right``) and ``clip`` (binned attributes: values outside the edges counted in the end bins).
    ``by``: the name of the attribute whose categories are the regions (taken out of the domain)."""
    from ..data import Attribute, Domain

    spec = _read_json(path)
    if isinstance(spec, dict) and set(spec) == {"attributes"}:
        spec = spec["attributes"]
    if not isinstance(spec, list) or not spec:
        raise CLIError(f"--domain {path!r}: expected a JSON list of attributes, each "
                       '{"name": ..., "categories": [...]} or {"name": ..., "edges": [...]}')
    attrs, clips = [], {}
    for i, entry in enumerate(spec, 1):
        if not isinstance(entry, dict):
            raise CLIError(f"--domain {path!r}: attribute {i} is not a JSON object with a name and categories or "
                           "edges")
        name = entry.get("name")
        who = f"attribute {name!r}" if isinstance(name, str) and name else f"attribute {i}"
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            raise CLIError(f"--domain {path!r}: {who}: unknown key {unknown[0]!r} (the keys: {', '.join(KEYS)})")
        clip = entry.get("clip", False)
        if not isinstance(clip, bool):
            raise CLIError(f"--domain {path!r}: {who}: clip must be true or false")
        if clip and "edges" not in entry:
            raise CLIError(f"--domain {path!r}: {who}: clip applies to edges (bins), not to categories")
        try:
            a = Attribute(name, categories=entry.get("categories"), edges=_edges(entry.get("edges")),
                          labels=entry.get("labels"), right=entry.get("right", False))
        except ValueError as exc:
            raise CLIError(f"--domain {path!r}: {exc}".splitlines()[0]) from None
        attrs.append(a)
        clips[a.name] = clip
    names = [a.name for a in attrs]
    region = None
    if by is not None:
        if by not in names:
            raise CLIError(f"--by {by!r} is not an attribute of --domain {path!r} (its attributes: "
                           f"{', '.join(names)})")
        region = attrs.pop(names.index(by))
        if region.edges is not None:
            raise CLIError(f"--by {by!r}: the regions must be declared as categories, not edges")
        if not attrs:
            raise CLIError(f"--domain {path!r}: no attribute besides --by {by!r} to tabulate")
    try:
        return Domain(attrs), region, clips
    except ValueError as exc:
        raise CLIError(f"--domain {path!r}: {exc}".splitlines()[0]) from None


# ---- the records ----------------------------------------------------------------------------

def _require_parquet(path):
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise CLIError(f"--records {path!r}: a Parquet file needs pandas and pyarrow, which are not both installed: "
                       "pip install pandas pyarrow, or give the records as a .csv") from None


def check_records(path):
    """``--records``, checked before anything is read: exists, a file, a .csv or a Parquet file whose
    readers are installed."""
    p = Path(path)
    if not p.exists():
        raise CLIError(f"--records file {path!r} does not exist")
    if p.is_dir():
        raise CLIError(f"--records file {path!r} is a directory")
    if p.suffix.lower() in PARQUET:
        _require_parquet(path)
    elif p.suffix.lower() != ".csv":
        raise CLIError(f"--records {path!r} must end in .csv (a header line naming the columns) or .parquet")
    return str(path)


def _read_csv(path, names):
    """{name: list of str}: the columns ``names`` of the CSV (each named in its header line)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise CLIError(f"--records {path!r} has no header line: a CSV of records starts with the names of "
                               "its columns")
            idx = _header_columns(path, header, names)
            width, rows = len(header), []
            for row in reader:
                if len(row) != width:
                    if not row:  # a blank line
                        continue
                    raise CLIError(f"--records {path!r}: some rows do not have as many fields as the header line "
                                   f"({width}) ({NOT_SHOWN})")
                rows.append([row[j] for j in idx])
    except UnicodeDecodeError:
        raise CLIError(f"--records {path!r} is not UTF-8 text (a CSV with a header line)") from None
    except csv.Error as exc:
        raise CLIError(f"--records {path!r} is not a readable CSV file ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise CLIError(f"--records: cannot read {path!r} ({exc.strerror or exc})") from None
    columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in names]
    return dict(zip(names, columns))


def _header_columns(path, header, names):
    missing = [n for n in names if n not in header]
    if missing:
        raise CLIError(f"--records {path!r}: no column {missing[0]!r} (an attribute of --domain) among the columns "
                       "of its header line")
    twice = [n for n in names if header.count(n) > 1]
    if twice:
        raise CLIError(f"--records {path!r}: column {twice[0]!r} appears twice in its header line")
    return [header.index(n) for n in names]


def _read_parquet(path, names):
    """{name: 1-D array}: the columns ``names`` of the Parquet file (numbers as float64, missing as NaN)."""
    import pandas as pd

    from ..data import _frame_column

    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow's errors are of many types: one line, the file named
        raise CLIError(f"--records {path!r} is not a readable Parquet file ({type(exc).__name__})") from None
    _header_columns(path, [str(c) for c in frame.columns], names)
    return {n: _frame_column(frame[n]) for n in names}


def _numbers(attr, values, path):
    """A binned attribute's values as float64 (missing: NaN); one line naming it where some are not
    numbers."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        return values.astype(np.float64)
    try:
        return np.array(values, dtype=np.float64)  # numbers and their text ("1.5", " 2", "nan")
    except (ValueError, TypeError):
        pass
    out = np.empty(len(values))
    for i, v in enumerate(values):
        try:
            out[i] = np.nan if v is None or (isinstance(v, str) and not v.strip()) else float(v)
        except (ValueError, TypeError):
            raise CLIError(f"--records {path!r}: attribute {attr.name!r} is binned (edges), but some of its values are not "
                           f"numbers ({NOT_SHOWN})") from None
    return out


def _category_of(text, strings, numeric, booleans):
    """A CSV field as the declared category it spells: itself (a string category), its number (a numeric
    category: "1" and "1.0" are 1), true/false (a bool category), else the text (not declared)."""
    if text in strings:
        return text
    if booleans and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    if numeric:
        try:
            return float(text)
        except ValueError:
            pass
    return text


def _categories(attr, values):
    if isinstance(values, np.ndarray):  # Parquet: typed values, compared as knorm.data.histogram compares them
        return values
    cats = attr.categories
    strings = {c for c in cats if isinstance(c, str)}
    booleans = any(isinstance(c, bool) for c in cats)
    numeric = any(not isinstance(c, (str, bool)) for c in cats)
    if not values:
        return np.array([], dtype=object)
    unique, inverse = np.unique(np.array(values, dtype=str), return_inverse=True)
    spelled = np.empty(len(unique), dtype=object)
    spelled[:] = [_category_of(str(u), strings, numeric, booleans) for u in unique]
    return spelled[inverse.reshape(-1)]


def _column(attr, values, clip, path):
    """One column as :func:`knorm.data.histograms` takes it."""
    if attr.edges is None:
        return _categories(attr, values)
    num = _numbers(attr, values, path)
    return np.clip(num, attr.edges[0], attr.edges[-1]) if clip else num  # NaN stays NaN: refused, named


def read_histograms(path, domain, region, clips):
    """(X (regions, cells), region labels): one histogram per declared region (``region`` None: one
    row, labelled :data:`NO_REGION`). X is private: only a mechanism's release may let anything
    computed from it out. Errors name the option and the attribute, never a value or a count."""
    from ..data import histogram, histograms

    names = [*domain.names, *([region.name] if region is not None else [])]
    raw = _read_parquet(path, names) if Path(path).suffix.lower() in PARQUET else _read_csv(path, names)
    attrs = [*domain.attributes, *([region] if region is not None else [])]
    columns = {a.name: _column(a, raw[a.name], clips.get(a.name, False), path) for a in attrs}
    try:
        if region is None:
            return histogram(columns, domain)[None, :], (NO_REGION,)
        return histograms(columns, domain, by=region)
    except ValueError as exc:
        msg = str(exc).splitlines()[0].replace("(pass clip=True to count them in the end bins;",
                                               '(add "clip": true to its entry in --domain to count them in the '
                                               "end bins;")
        raise CLIError(f"--records {path!r}: {msg}") from None


# ---- post-processing and the table ------------------------------------------------------------

def post_process(F, A, post, time_limit=60.0, mip_gap=0.01):
    """The published values (regions, d) from the released answers A (regions, d), and what the
    integer path reports (None otherwise; ``time_limit`` and ``mip_gap`` are its solver's). Reads only
    A and F: no privacy cost."""
    from .. import postprocess

    if post == "none":
        return A, None
    if post == "least-squares":
        return np.atleast_2d(postprocess.least_squares(F, A)), None
    if post == "nonnegative":
        return np.atleast_2d(postprocess.nonnegative(F, A)), None
    from ..integer import integer_tables

    t = integer_tables(F, A, time_limit=time_limit, mip_gap=mip_gap)
    info = {"method": sorted({str(m) for m in np.atleast_1d(t.method)}),
            "max_gap": float(np.max(t.gap)), "all_optimal": bool(np.all(t.optimal)), "time_limit": time_limit,
            "mip_gap": mip_gap}
    return np.atleast_2d(t.tables).astype(np.int64), info


def standard_errors(mech, post):
    """Each answer's standard error (d,) for ``post`` (least squares: exact propagation P Σ Pᵀ; the
    non-linear projections: the raw answers', as :data:`SE_OF` labels it) and its description."""
    e = mech.standard_errors(postprocess="least_squares" if post == "least-squares" else None)
    return e.value, {"of": SE_OF[post], "method": e.method, "exact": bool(e.exact),
                     "max_monte_carlo_stderr": float(e.stderr.max())}


def cell_names(domain, k):
    """(table, cell) of every answer of ``marginal_workload(domain, k)``, in its row order: the tables
    in :func:`~knorm.data.marginal_keys` order, the cells of each in C order of the declared labels."""
    from ..data import marginal_keys

    out = []
    for key in marginal_keys(domain, k):
        for combo in itertools.product(*(domain[n].labels for n in key)):
            out.append((SEP.join(key), SEP.join(combo)))
    return out


def _value(v):
    return str(int(v)) if isinstance(v, (int, np.integer)) else repr(float(v))


def write_table(path, labels, cells, values, se, se_of):
    def write(f):
        text = io.TextIOWrapper(f, encoding="utf-8", newline="")
        w = csv.writer(text, lineterminator="\n")
        w.writerow(COLUMNS)
        ses = [repr(float(s)) for s in se]
        for label, row in zip(labels, values):
            for (table, cell), v, s in zip(cells, row.tolist(), ses):
                w.writerow((label, table, cell, _value(v), s, se_of))
        text.flush()
        text.detach()

    atomic_write(path, write)


# ---- the command ------------------------------------------------------------------------------

def _check_args(args):
    if args.mechanism == "gaussian" and args.delta is None:
        raise UsageError("--mechanism gaussian needs --delta")
    if args.delta is not None and args.mechanism != "gaussian":
        raise UsageError(f"--delta applies only to --mechanism gaussian; {args.mechanism} is pure ε-DP (δ = 0)")
    for option, value in (("--budget-epsilon", args.budget_epsilon), ("--budget-delta", args.budget_delta)):
        if value is not None and not args.budget:
            raise UsageError(f"{option} applies only with --budget FILE (it sets the budget of a new ledger)")
    for option, value in (("--integer-time-limit", args.integer_time_limit != 60.0),
                          ("--integer-gap", args.integer_gap != 0.01)):
        if value and args.post != "integer":
            raise UsageError(f"{option} applies only with --post integer")
    mcmc_only = [o for o, v in (("--prepared", args.prepared), ("--workers", args.workers),
                                ("--accept-uncertified", args.accept_uncertified)) if v]
    if mcmc_only and args.mechanism not in ("knorm", "nim"):
        raise UsageError(f"{mcmc_only[0]} applies only to the MCMC mechanisms (knorm, nim), not to --mechanism "
                         f"{args.mechanism}")


def _workload(args, domain):
    """F of every k-way marginal of the domain (checked: --k, memory) and the --prepared file for it."""
    from ..data import marginal_workload
    from .prepare import load_prepared_option

    k = args.k if args.k is not None else min(2, len(domain))
    if k > len(domain):
        raise CLIError(f"--k {k} exceeds the {len(domain)} attribute(s) of --domain"
                       + (f" besides --by {args.by!r}" if args.by else ""))
    rows, cols = _workload_shape("marginals", 0, 0, k, domain.shape)
    check_memory("--domain", rows, cols, 4, what="the marginals' F (rows × cells)", hint="declare fewer cells")
    F = marginal_workload(domain, k)
    try:
        prepared = load_prepared_option(args, F)
    except CLIError as exc:
        raise CLIError(f"{exc}; for this domain: knorm prepare --workload marginals --shape "
                       f"{' '.join(map(str, domain.shape))} --k {k} --out {args.prepared}") from None
    return k, F, prepared


def cmd_publish(args):
    from ..errors import BudgetExceededError
    from .prepare import prepare_chains
    from .sample import _claim_dict, _claim_terms, build_mechanism

    _check_args(args)
    records = check_records(args.records)
    out = check_output(args.out, args.force, inputs=(args.records, args.domain), suffixes=(".csv",))
    sidecar = check_output(str(claim_path(out)), args.force, "--out (its claim)", inputs=(args.records, args.domain),
                           suffixes=(".json",))
    if args.prepared and Path(args.prepared).resolve() in (out.resolve(), sidecar.resolve()):
        raise CLIError(f"--out {args.out!r} would overwrite --prepared")
    domain, region, clips = load_domain(args.domain, args.by)
    k, F, prepared = _workload(args, domain)
    X, labels = read_histograms(records, domain, region, clips)  # private: never printed or saved
    accountant = open_budget(args) if args.budget else None
    if args.nonprivate_seed is not None:
        _warn(f"--nonprivate-seed {args.nonprivate_seed}: the noise is reproducible from this seed, "
              "so the output is NOT PRIVATE")
    noise_source = "seed" if args.nonprivate_seed is not None else "os-entropy"
    progress = Progress(not args.quiet and sys.stderr.isatty(), f"{args.mechanism} ε={args.epsilon:g}")
    opts = {"progress": progress, **({"workers": args.workers} if args.workers else {})}
    from ..walks.sampler import DEFAULT_CHAINS

    if (chains := prepare_chains(args, None)) > DEFAULT_CHAINS:
        opts["chains"] = chains
    try:
        mech = build_mechanism(args.mechanism, F, args, args.nonprivate_seed, opts, prepared, accountant)
        se, se_info = standard_errors(mech, args.post)  # F, ε and public seeds only: known before anything is spent
        if region is not None:  # histograms(by=...): disjoint regions, one answer's ε in all
            A = mech.release_each(X)
        else:
            A = np.atleast_2d(mech.release(X[0]))
    except BudgetExceededError as exc:  # refused before anything was drawn: nothing released, nothing recorded
        raise CLIError(f"--budget {args.budget}: {exc}") from None
    finally:
        progress.close()
    del X
    post, failed = args.post, None
    try:
        values, integer = post_process(F, A, post, args.integer_time_limit, args.integer_gap)
    except (ValueError, ArithmeticError) as exc:  # the answers are paid for: written raw, and the error said
        failed = (f"--post {post} failed ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); the "
                  f"released answers were written unprocessed (--post none) to {str(out)!r}")
        values, integer, post = A, None, "none"
        se, se_info = standard_errors(mech, post) if args.post == "least-squares" else \
            (se, {**se_info, "of": SE_OF[post]})
    total = _claim_dict(mech.privacy, noise_source)
    cells = cell_names(domain, k)
    summary = {
        "knorm": __version__, "command": "publish", "records": str(records), "domain": str(args.domain),
        "attributes": {a.name: a.size for a in domain.attributes}, "by": args.by,
        "regions": list(labels) if region is not None else None, "k": k,
        "tables": list(dict.fromkeys(t for t, _ in cells)), "d": int(F.shape[0]), "n": int(F.shape[1]),
        "mechanism": args.mechanism, "epsilon": args.epsilon, "delta": args.delta, "post": post,
        "post_failed": failed,
        "private": total["private"], "noise_source": total["noise_source"], "privacy": total,
        "standard_error": se_info, "integer": integer,
        "budget": budget_summary(accountant) if accountant is not None else None,
        "columns": list(COLUMNS), "rows": len(labels) * len(cells), "out": str(out), "claim": str(sidecar),
    }
    # the claim first (the spend is in --budget already: the mechanism recorded it before answering)
    atomic_write(sidecar, lambda f: f.write(json.dumps(summary, indent=2, default=float,
                                                       ensure_ascii=False).encode("utf-8")))
    write_table(out, labels, cells, values, se, se_info["of"])
    if failed:
        raise CLIError(failed)
    if args.json:
        print(json.dumps(summary, indent=2, default=float, ensure_ascii=False))
    elif not args.quiet:
        _print_summary(summary, _claim_terms)
    return 0


def _print_summary(s, claim_terms):
    attrs = ", ".join(f"{n}: {size}" for n, size in s["attributes"].items())
    regions = f"; --by {s['by']}: {len(s['regions'])} declared regions" if s["by"] else ""
    print(f"knorm {s['knorm']} publish: {s['records']} over ({attrs}){regions}; {len(s['tables'])} tables of "
          f"{s['k']} attribute(s), {s['d']} cells per region; {s['mechanism']}, then --post {s['post']}")
    p = s["privacy"]
    if not s["private"]:
        print("NOT PRIVATE: the noise came from --nonprivate-seed and is reproducible from it")
    if s["by"]:
        print(f"privacy (total, one answer on each of {len(s['regions'])} disjoint regions, parallel composition: "
              f"every record is in one region of --by {s['by']}): " + claim_terms(p))
    else:
        print("privacy (total, 1 answer): " + claim_terms(p))
    e = s["standard_error"]
    print(f"standard_error: of the {e['of']}; {e['method']}"
          + ("" if e["exact"] else f" (Monte-Carlo SE ≤ {e['max_monte_carlo_stderr']:.2g})"))
    if s["integer"]:
        i = s["integer"]
        print(f"integer tables: {', '.join(i['method'])}; largest gap to the ℓ₁ bound {100 * i['max_gap']:.2f}%"
              + (" (every region proved optimal)" if i["all_optimal"] else ""))
    if s["budget"]:
        print(budget_line(s["budget"]))
    print("nothing computed from the records is shown; the table holds the released values only")
    print(f"wrote {s['claim']} (the claim) and {s['out']} ({s['rows']} rows: {', '.join(s['columns'])})")


def add_parser(sub):
    """Add ``knorm publish`` to the subparsers ``sub``."""
    s = sub.add_parser("publish", help="records + a declared domain → private, consistent tables (tidy CSV)",
                       description="From records (CSV or Parquet) and a domain file declared without looking at "
                                   "them to published tables: one histogram per declared region (--by), one "
                                   "release of every --k-way marginal, post-processing (--post), and a tidy CSV "
                                   "(region, table, cell, value, standard_error, standard_error_of) with its "
                                   "claim beside it (OUT.claim.json). Nothing computed from the records is "
                                   "printed or written except the released values; the noise comes from OS "
                                   "entropy (--nonprivate-seed: a reproducible run that is NOT private).")
    _add_debug(s, argparse.SUPPRESS)
    s.add_argument("--records", required=True, metavar="FILE",
                   help="the private records: a .csv with a header line naming the columns, or a .parquet file "
                        "(needs pandas and pyarrow); one column per attribute of --domain, named like it")
    s.add_argument("--domain", required=True, metavar="FILE",
                   help="the declared domain (JSON): a list of attributes, each {\"name\": …, \"categories\": [...]} "
                        "or {\"name\": …, \"edges\": [...]} (knorm.data.Attribute's keys: also labels, right), and "
                        "\"clip\": true to count binned values outside the edges in the end bins")
    s.add_argument("--by", metavar="NAME",
                   help="the attribute of --domain whose categories are the regions: one set of tables per "
                        "declared region, at the ε of one answer (parallel composition: every record is in one "
                        "region)")
    s.add_argument("--k", type=_positive_int, default=None,
                   help="publish every k-way marginal table of the attributes (besides --by) (default 2)")
    s.add_argument("--mechanism", choices=MECHANISMS, default="knorm", help="default knorm")
    s.add_argument("--epsilon", type=_positive_float, default=1.0,
                   help="ε of the release (with --by: of the whole batch of regions) (default 1)")
    s.add_argument("--delta", type=_probability, default=None, help="δ in (0, 1), for --mechanism gaussian")
    s.add_argument("--post", choices=POSTS, default="nonnegative",
                   help="post-processing of the released answers (no privacy cost): none, least-squares "
                        "(consistent tables), nonnegative (consistent and non-negative; the default) or integer "
                        "(consistent non-negative integer counts, knorm.integer.integer_tables)")
    s.add_argument("--integer-time-limit", type=_positive_float, default=60.0, metavar="SECONDS",
                   help="with --post integer: seconds for each solver call of each region (default 60; the best "
                        "tables found by then are published, their gap to the bound in the claim)")
    s.add_argument("--integer-gap", type=_gap, default=0.01, metavar="G",
                   help="with --post integer: stop each region's MILP at this relative gap to its bound, in [0, 1) "
                        "(default 0.01; 0 proves the optimum, however long --integer-time-limit allows)")
    s.add_argument("--prepared", metavar="FILE",
                   help="a prepared file of this workload (knorm prepare --workload marginals --shape SIZES --k K, "
                        "SIZES those of --domain besides --by): the rounding and certificate are loaded")
    s.add_argument("--walk", choices=list(WALKS), default="billiard",
                   help="the MCMC walk of knorm and nim (default billiard); every walk targets the same law")
    s.add_argument("--nonprivate-seed", type=_seed, default=None, metavar="N",
                   help="seed the noise: a reproducible run that is NOT PRIVATE (tests, debugging)")
    s.add_argument("--accept-uncertified", action="store_true",
                   help="release even if the walk does not certify (the claim then says UNCERTIFIED)")
    s.add_argument("--out", required=True, metavar="FILE",
                   help="the tidy table to write (.csv); its claim is written beside it (FILE's stem + .claim.json)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file and its claim")
    s.add_argument("--json", action="store_true", help="print the summary (the claim's file) as JSON")
    s.add_argument("--quiet", action="store_true", help="no progress bar and no summary (unless --json)")
    add_budget_options(s, "record the release in this budget ledger")
    _add_workers(s)
    s.set_defaults(func=cmd_publish)
    return s
