"""``--budget FILE``: a release's privacy budget kept in a ledger file (:class:`knorm.budget_ledger.FileAccountant`).

The ledger's budget is set once, when the file is created: ``--budget FILE --budget-epsilon E
[--budget-delta D]`` on first use; later runs give ``--budget FILE`` alone (restating the same budget is
accepted, another is refused). Every release made with it is recorded (with its claim) before its
answers are written; one that would pass the budget is refused before anything is drawn (exit 1).
"""

from pathlib import Path

from ._common import CLIError, UsageError, _positive_float, _probability


def add_budget_options(parser, what="with --data: record the release in this budget ledger"):
    parser.add_argument("--budget", metavar="FILE",
                        help=f"{what} (one per data set; JSON lines, 0600) and refuse it, before anything is drawn, "
                             "if it would pass the ledger's budget")
    parser.add_argument("--budget-epsilon", type=_positive_float, default=None, metavar="E",
                        help="with --budget: the total ε of a new ledger (required when FILE does not exist yet; "
                             "set once)")
    parser.add_argument("--budget-delta", type=_probability, default=None, metavar="D",
                        help="with --budget: the total δ of a new ledger (default 0: pure ε-DP releases only)")


def open_budget(args):
    """The run's :class:`~knorm.budget_ledger.FileAccountant` (``--budget``), or a one-line error."""
    from ..budget_ledger import FileAccountant

    path = Path(args.budget)
    if not path.exists() and args.budget_epsilon is None:
        raise UsageError(f"--budget {args.budget!r} does not exist yet: give --budget-epsilon E (and "
                         "--budget-delta D) to create it with that total budget")
    try:
        return FileAccountant(path, epsilon=args.budget_epsilon, delta=args.budget_delta)
    except (OSError, ValueError) as exc:
        raise CLIError(f"--budget: {exc}".splitlines()[0]) from None


def budget_summary(accountant):
    """The ledger after the run, JSON-ready (public claims only)."""
    (eps, delta), spends = accountant.total, accountant.spends
    return {"file": str(accountant.path), "epsilon": accountant.epsilon, "delta": accountant.delta,
            "spent_epsilon": eps, "spent_delta": delta, "releases": len(spends)}


def budget_line(b):
    spent = f"ε = {b['spent_epsilon']:g}" + (f", δ = {b['spent_delta']:g}" if b["delta"] else "")
    total = f"ε = {b['epsilon']:g}" + (f", δ = {b['delta']:g}" if b["delta"] else "")
    return f"budget {b['file']}: spent {spent} of {total} ({b['releases']} release(s) recorded)"
