"""The ``knorm`` command line.

* ``knorm sample``  -- differentially private noise or releases (``Fx + noise``) in bulk.
* ``knorm info``    -- facts about a workload's body and which mechanism to use.
* ``knorm uniform`` -- the engine alone: uniform draws from K with mixing diagnostics.
* ``knorm bench``   -- the oracle comparison and the Table-3 reproduction.
* ``knorm plot``    -- figures: a run's chains, error vs ε, NIM's spectrum (no data).
* ``knorm prepare`` -- the work that depends on F only (the rounding), done once and saved.
* ``knorm synth``   -- synthetic records from released marginals (post-processing, private-pgm).
* ``knorm publish`` -- records + a declared domain → private, consistent marginal tables (a tidy CSV).

Each subcommand is a module of this package (``sample.py``, ``info.py``, …) holding its
parser (``add_parser``) and its ``cmd_*``; the options, checks and output helpers they
share are in ``_common.py``.

Privacy: mechanism noise comes from OS entropy; ``--nonprivate-seed`` makes a
reproducible run that is NOT private (a warning is printed and the outputs record it).
With ``--data`` nothing computed from the data is printed except the answers
themselves; the summary states the total claim of all answers (basic composition).

Errors end with one line on stderr, exit status 2 for usage errors and 1 otherwise,
never a traceback (``knorm --debug ...`` shows it). Arguments, inputs, outputs and
optional imports are checked before any sampling; an existing output file is never
overwritten without ``--force``; output is written atomically (temporary file, then
rename).
"""

import os
import sys
import traceback
import warnings
from pathlib import Path

from .. import __version__
from ..errors import ConvergenceError
from ..walks.checkpoint import SNAPSHOTS
from ..walks.prepared import snapshot_path
from . import bench, info, plot, prepare, publish, sample, synth, uniform
from ._common import CLIError, UsageError, _add_debug, _Parser, _warn

SUBCOMMANDS = (sample, publish, info, uniform, bench, plot, prepare, synth)


def build_parser():
    """The ``knorm`` parser: each subcommand's module adds its own."""
    p = _Parser(prog="knorm", description="K-norm and NIM differential privacy on an exact sampling engine.")
    p.add_argument("--version", action="version", version=f"knorm {__version__}")
    _add_debug(p, False)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in SUBCOMMANDS:
        command.add_parser(sub)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None):
    _warn(_one_line(message))


def _one_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv=None):
    """Run the command line; returns the exit status (2: usage error, 1: any other error)."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            if not args.debug:  # warnings as one line each, without source lines
                warnings.showwarning = _show_warning
            return args.func(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        resumable = getattr(args, "checkpoint", None) and any(Path(args.checkpoint).glob(SNAPSHOTS))
        partial = snapshot_path(args.out) if args.command == "prepare" and getattr(args, "out", None) else None
        hint = (" (resume with --resume)" if resumable else
                f" (the same command continues from {str(partial)!r}; --restart discards it)"
                if partial is not None and partial.is_dir() else "")
        sys.stderr.write(f"knorm: interrupted{hint}\n")
        return 130
    except BrokenPipeError:  # the reader went away (`knorm ... | head`): stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except Exception as exc:  # the one top-level handler: one line, or the traceback with --debug
        if args.debug:
            traceback.print_exc()
            return 2 if isinstance(exc, UsageError) else 1
        prog = f"knorm {args.command}"
        if isinstance(exc, UsageError):
            sys.stderr.write(f"{prog}: error: {exc}\n")
            return 2
        if isinstance(exc, CLIError):
            sys.stderr.write(f"knorm: error: {exc}\n")
            return 1
        msg = _one_line(exc)
        if isinstance(exc, ConvergenceError):
            msg += " (--accept-uncertified releases anyway, under an UNCERTIFIED claim)"
        elif isinstance(exc, MemoryError):
            msg = "out of memory" + (f": {msg}" if msg != "MemoryError" else "") + "; ask for fewer draws"
        elif not isinstance(exc, (ValueError, OSError)):
            msg = f"{type(exc).__name__}: {msg}"
        sys.stderr.write(f"knorm: error: {msg}\n")
        return 1
