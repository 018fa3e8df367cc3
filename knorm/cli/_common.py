"""What the subcommands share: argument types and options, workload and data loading,
output checks and writing, the memory check, the progress bar, and the two error types."""

import argparse
import itertools
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

from .._io import atomic_write
from .._progress import StageProgress
from .._validate import check_memory as _check_memory

MECHANISMS = ("knorm", "nim", "laplace", "gaussian")
WORKLOADS = ("pm1", "bernoulli", "identity", "prefix", "all_range", "width_range", "marginals")
WORKLOAD_DEFAULTS = {"d": 20, "n": 100}
WORKLOAD_OPTIONS = {"pm1": ("d", "n"), "bernoulli": ("d", "n"), "identity": ("d", "n"), "prefix": ("d", "n"),
                    "all_range": ("n",), "width_range": ("n", "k"), "marginals": ("shape", "k")}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


class UsageError(CLIError):
    """Arguments that cannot go together: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # no prefix of an option is accepted silently
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, exit 2 (argparse's convention for usage errors)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _int_type(low, what):
    """An argparse type: an int >= ``low``, else a one-line usage error saying ``what``."""

    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    return parse


_positive_int = _int_type(1, "a positive integer")
_seed = _int_type(0, "a non-negative integer seed")
_nonneg_int = _int_type(0, "a non-negative integer")


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return v


def _probability(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text}")
    return v


# ---- inputs ---------------------------------------------------------------------------------

def _load_npy(path, what):
    p = Path(path)
    if not p.exists():
        raise CLIError(f"{what} file {path!r} does not exist")
    if p.is_dir():
        raise CLIError(f"{what} file {path!r} is a directory")
    if p.stat().st_size == 0:
        raise CLIError(f"{what} file {path!r} is empty (0 bytes), not a .npy array")
    try:
        with open(p, "rb") as f:
            head = f.read(6)
    except OSError as exc:
        raise CLIError(f"{what}: cannot read {path!r} ({exc.strerror or exc})") from None
    if head[:2] == b"PK":
        raise CLIError(f"{what} file {path!r} is an .npz archive; give a .npy array")
    if head != b"\x93NUMPY":  # not numpy's header: a CSV, text or other file (its content is never shown)
        stem = Path(path).stem or "array"
        if what == "--data":  # records are not x: their histogram over the declared domain is
            raise CLIError(f"--data file {path!r} is not a .npy array; --data takes the histogram x (one count per "
                           "column of F), not records: make it in Python with knorm.data.histogram, e.g. "
                           f"np.save('x.npy', knorm.data.histogram(pandas.read_csv({path!r}), domain)) with the "
                           "knorm.data.Domain declared for F (docs/worked-example.md), or publish marginal tables "
                           f"from the records with knorm publish --records {path!r} --domain DOMAIN.json")
        raise CLIError(f"{what} file {path!r} is not a .npy array; make one in Python with numpy.save, e.g. "
                       f"np.save('{stem}.npy', np.loadtxt({path!r}, delimiter=','))")
    try:
        arr = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if "pickled" in str(exc):
            raise CLIError(f"{what} file {path!r} holds Python objects, not numbers: save a numeric array "
                           "(np.save(path, np.asarray(values, dtype=float)))") from None
        raise CLIError(f"cannot read {what} file {path!r} as .npy: {exc}".splitlines()[0]) from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise CLIError(f"{what} file {path!r} is an .npz archive; give a .npy array")
    return arr


def check_prepared_file(path, option="--prepared"):
    """A missing file (or a folder) given as ``option`` named like a missing --data or --matrix,
    not as a raw OSError."""
    p = Path(path)
    if not p.exists():
        raise CLIError(f"{option} file {path!r} does not exist; make it with knorm prepare (same workload options) "
                       f"--out {path}")
    if p.is_dir():
        raise CLIError(f"{option} file {path!r} is a directory")


def load_workload(args, dense=False):
    """F from ``--matrix``, from ``--workload`` with its sizes, or (neither given) from the
    ``--prepared`` file, which holds it (public, checked against the file's fingerprint);
    returns (F, label). A marginal workload comes as its structure (never made dense), unless
    ``dense`` (for a command that needs F's entries; memory checked)."""
    F, label = _load_workload(args)
    if dense and not isinstance(F, np.ndarray):
        from ..body.marginal_ops import dense_marginal

        try:  # the option F came from: --workload marginals, or a marginal workload's --prepared file
            F = dense_marginal(F, "--workload marginals" if getattr(args, "workload", None) else "--prepared")
        except ValueError as exc:
            raise CLIError(f"{exc}; choose smaller sizes") from None
    return F, label


def _load_workload(args):
    from .. import workloads as W
    from ..body.hull import validate_matrix

    prepared = getattr(args, "prepared", None)
    if prepared and not args.matrix and all(getattr(args, k, None) is None for k in ("workload", "d", "n", "k", "shape")):
        from ..walks.prepared import prepared_matrix

        check_prepared_file(prepared)
        try:  # F alone: --prepared then loads the whole file (its body and rounding) once; a marginal
            F = prepared_matrix(prepared, dense=False)  # workload stays its structure (never made dense)
        except (OSError, ValueError) as exc:
            raise CLIError(f"--prepared: {str(exc).removeprefix('prepared: ')}".splitlines()[0]) from None
        return F, f"F of {prepared} {F.shape[0]}×{F.shape[1]}"

    if args.matrix:
        given = [f"--{k}" for k in ("workload", "d", "n", "k", "shape") if getattr(args, k) is not None]
        if given:
            raise UsageError(f"--matrix gives F; it cannot be combined with {', '.join(given)}")
        F = _load_npy(args.matrix, "--matrix")
        try:
            F = validate_matrix(F)
        except ValueError as exc:
            raise CLIError(f"--matrix {args.matrix!r}: {exc}") from None
        return F, f"matrix {args.matrix} {F.shape[0]}×{F.shape[1]}"
    name = args.workload or "pm1"
    allowed = WORKLOAD_OPTIONS[name]
    given = [k for k in ("d", "n", "k", "shape") if getattr(args, k) is not None]
    stray = [f"--{k}" for k in given if k not in allowed]
    if stray:
        raise UsageError(f"{', '.join(stray)} does not apply to --workload {name} "
                         f"(it takes {', '.join('--' + k for k in allowed)})")
    if name in ("identity", "prefix") and args.d is not None and args.n is not None and args.d != args.n:
        raise UsageError(f"--workload {name} is square: give --n (or --d), not two different sizes")
    d = args.d if args.d is not None else WORKLOAD_DEFAULTS["d"]
    n = args.n if args.n is not None else (args.d if name in ("identity", "prefix") and args.d is not None
                                           else WORKLOAD_DEFAULTS["n"])
    if name == "marginals" and args.shape is None:
        raise UsageError("--workload marginals needs --shape (the attribute sizes)")
    if name == "marginals" and args.k is None:
        raise UsageError("--workload marginals needs --k (the marginal order: --k 2 for every 2-way table)")
    if name == "width_range" and args.k is None:
        raise UsageError("--workload width_range needs --k (the range width)")
    shape = tuple(args.shape) if args.shape else None
    if name == "marginals":  # by its structure: never made dense (issue 49), the same F as workloads.marginals
        return _marginals(shape, args.k)
    rows, cols = _workload_shape(name, d, n, args.k, shape)
    check_memory(f"--workload {name}", rows, cols, 4, what="F's entries (rows × columns)",
                 hint="choose smaller sizes")
    try:
        F = W.by_name(name, d=d, n=n, k=args.k, shape=shape, rng=args.workload_seed)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"--workload {name!r}: {exc}") from None
    return F, f"workload {name} {F.shape[0]}×{F.shape[1]}"


def _marginals(shape, k):
    """``--workload marginals``: every k-way table of the domain ``shape`` (rows as
    :func:`knorm.workloads.marginals`), as its structure (a :class:`~knorm.body.marginal.MarginalMatch`);
    the mechanisms, the body and prepare take it without making F dense."""
    from .. import workloads as W
    from ..body.marginal import MarginalMatch, MarginalStructure
    from ..body.marginal_ops import check_body_memory

    try:
        shape = W._shape(shape)
    except ValueError as exc:
        raise CLIError(f"--workload 'marginals': {exc}") from None
    if k > len(shape):
        raise CLIError(f"--workload 'marginals': k={k} exceeds the number of attributes {len(shape)}")
    st = MarginalStructure(tuple(shape), tuple(itertools.combinations(range(len(shape)), k)))
    F = MarginalMatch(st, 1.0, np.arange(st.rows, dtype=np.int64))
    try:  # before anything of F's size is made: the body's columns (rank × cells)
        check_body_memory(F, "--workload marginals")
    except ValueError as exc:
        raise CLIError(f"{exc}; choose smaller sizes") from None
    return F, f"workload marginals {st.rows}×{st.cells}"


def _workload_shape(name, d, n, k, shape):
    """(rows, columns) of a named workload, computed before building it."""
    if name in ("pm1", "bernoulli"):
        return d, n
    if name in ("identity", "prefix"):
        return n, n
    if name == "all_range":
        return n * (n + 1) // 2, n
    if name == "width_range":
        return max(n - (k or 1) + 1, 1), n
    cells = math.prod(shape)
    k = min(k or 1, len(shape))
    e = [1] + [0] * k  # rows = e_k(shape), the k-th elementary symmetric polynomial of the sizes
    for size in shape:
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * size
    return e[k], cells


DATA_2D = ("a 2-D array holds one histogram per region (a row each); pass --regions to release one answer per row "
           "(--disjoint if every record is in one row)")


def load_data(path, n, allow_noncounts=False, regions=False):
    """x from ``--data``: a finite vector of n counts (non-negative integers; any real vector with
    ``allow_noncounts``), checked before any sampling; with ``regions``, X: one such histogram per
    row (regions × n). The data is in hand: no message shows a value, a count or a length of it,
    only what F declares (n)."""
    x = _load_npy(path, "--data")
    if x.dtype == object or np.iscomplexobj(x) or x.dtype.kind not in "biuf":
        raise CLIError(f"--data {path!r}: x must be a real numeric vector (the histogram: one count per column of "
                       "F)")
    if regions:
        if x.ndim != 2 or x.shape[1] != n or x.shape[0] == 0:
            got = f"a {x.ndim}-D array" if x.ndim != 2 else "rows of another length or no row"
            raise CLIError(f"--data {path!r}: with --regions, X must be a 2-D array with one histogram of {n} counts "
                           f"per row (one row per region); got {got} (knorm.data.histograms makes it from records)")
    elif x.ndim == 2 and x.shape[1] == n:
        raise CLIError(f"--data {path!r}: {DATA_2D}")
    elif x.ndim != 1 or x.shape[0] != n:
        got = "a vector of another length" if x.ndim == 1 else f"a {x.ndim}-D array"
        raise CLIError(f"--data {path!r}: x must be a vector of length {n}, one count per column of F; got {got} "
                       "(knorm.data.histogram makes it from records)")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise CLIError(f"--data {path!r}: x contains NaN or infinite entries")
    if not allow_noncounts and not (np.all(x >= 0) and np.all(x == np.floor(x))):
        raise CLIError(f"--data {path!r}: x has negative or non-integer entries, and a histogram holds counts of "
                       "records (non-negative integers); --allow-noncounts releases another real vector")
    return x


def _check_writable(folder, what):
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CLIError(f"{what}: cannot write in folder {str(folder)!r} ({exc.strerror or exc})") from None


def check_output(path, force, option="--out", inputs=(), suffixes=(".npy", ".npz")):
    """The output path, checked before any work: suffix, not a folder, not an input, no
    silent overwrite, an existing writable parent folder."""
    if path is None:
        return None
    p = Path(path)
    if p.suffix not in suffixes:
        ends = " or ".join(filter(None, (", ".join(suffixes[:-1]), suffixes[-1])))
        raise CLIError(f"{option} {path!r} must end in {ends}")
    if p.is_dir():
        raise CLIError(f"{option} {path!r} is a directory")
    if p.exists() and not force:
        raise CLIError(f"{option} {path!r} exists; use --force to overwrite it")
    for q in inputs:
        if q and p.exists() and Path(q).exists() and p.resolve() == Path(q).resolve():
            raise CLIError(f"{option} {path!r} is also an input file")
    parent = p.parent
    if not parent.exists():
        raise CLIError(f"{option}: output folder {str(parent)!r} does not exist")
    if not parent.is_dir():
        raise CLIError(f"{option}: {str(parent)!r} is not a folder")
    _check_writable(parent, option)
    return p


def write_samples(path, array, meta=None):
    """Write .npy (array) or .npz (array + JSON metadata) atomically."""
    if path.suffix == ".npy":
        atomic_write(path, lambda f: np.save(f, array))
    else:
        meta = {k: np.array(json.dumps(v, default=float, ensure_ascii=False)) for k, v in (meta or {}).items()}
        atomic_write(path, lambda f: np.savez(f, samples=array, **meta))


def _num(v):
    return str(v) if v < 10**15 else (f"{float(v):.3g}" if v < 10**300 else "more than 1e300")


def check_memory(option, count, d, copies, what=None, hint="ask for fewer, in several runs if need be"):
    """Refuse, before allocating, a request whose ``count × d`` float64 values, times the
    working copies the computation holds, exceed the memory allowed
    (:func:`knorm._validate.check_memory`: half the physical memory)."""
    try:
        _check_memory(option, count if what is None else None, count * d * 8 * copies)
    except ValueError as exc:
        raise CLIError(f"{exc}: {what or 'the output'}, {_num(count)} × {_num(d)} values in {copies} working "
                       f"copies; {hint}") from None


class Progress(StageProgress):
    """The command line's bars (:class:`knorm._progress.StageProgress`: the rounding, the warm-up and
    the draws, each with its count and, when slow, roughly how long), none with --quiet; ``plain``:
    a line as each stage starts and ends instead (stderr is not a terminal)."""

    def __init__(self, enabled, desc, plain=False):
        super().__init__(enabled, desc, plain=plain)


def _require_dask():
    """Fail before any work when the Dask extra is missing."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        raise CLIError("--scheduler needs dask.distributed, which is not installed: "
                       "pip install 'knorm[dask]'") from None


def _dask_executor(address):
    from ..distributed import DaskExecutor

    try:
        return DaskExecutor(address)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CLIError(f"--scheduler: cannot reach the Dask scheduler at {address!r}: {exc}".splitlines()[0]) from None


def _warn(message):
    sys.stderr.write(f"knorm: warning: {message}\n")


def _laplace_draws(d):
    """Draws for the Laplace Monte Carlo: 50 000, fewer where d is so large that they would pass the
    cap on values drawn (‖noise‖ concentrates as d grows: its relative SD is O(1/√d))."""
    from ..mechanisms._base import MAX_MC_VALUES

    return max(2, min(50_000, MAX_MC_VALUES // d))


def _add_workload(p):
    g = p.add_argument_group("workload")
    g.add_argument("--workload", choices=WORKLOADS, default=None, help="named workload (default: pm1, random ±1)")
    g.add_argument("--d", type=_positive_int, default=None, help="number of queries (default 20)")
    g.add_argument("--n", type=_positive_int, default=None, help="number of cells (default 100)")
    g.add_argument("--k", type=_positive_int, default=None, help="range width / marginal order")
    g.add_argument("--shape", type=_positive_int, nargs="+", help="attribute sizes for --workload marginals")
    g.add_argument("--matrix", help="load F (d × n) from a .npy file instead (not with the options above)")
    g.add_argument("--workload-seed", type=_seed, default=0, metavar="N",
                   help="seed of the random workloads pm1 and bernoulli only, never of noise (default 0)")


def _add_workers(p):
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="at most N threads running chains (default: one per CPU this process may use, e.g. "
                        "under taskset, and at most NUMBA_NUM_THREADS)")


def sampler_options(args):
    """``--workers`` as mechanisms' ``sampler_options`` ({} without it: the default)."""
    return {"workers": args.workers} if args.workers is not None else {}


def _add_debug(p, default):
    p.add_argument("--debug", action="store_true", default=default,
                   help="on an error, show the Python traceback instead of one line")
