"""Helpers shared by the CLI tests (imported as a plain module: pytest puts tests/ on sys.path)."""

from knorm import cli


def run(argv, capsys):
    """(exit status, stdout, stderr) of ``knorm argv`` in-process (argparse's usage errors exit 2)."""
    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def interrupt_progress(monkeypatch, after):
    """Make the CLI's progress callback raise KeyboardInterrupt on its ``after``-th call;
    returns the original ``Progress.__call__`` (to restore with monkeypatch.setattr)."""
    real = cli._common.Progress.__call__
    calls = []

    def interrupting(self, done, target):
        calls.append(done)
        if len(calls) == after:
            raise KeyboardInterrupt
        return real(self, done, target)

    monkeypatch.setattr(cli._common.Progress, "__call__", interrupting)
    return real
