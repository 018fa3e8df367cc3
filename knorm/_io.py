"""Atomic file writes: a temporary file in the same folder, then a rename."""

import os
import tempfile
from pathlib import Path


def atomic_write(path, write, *, private=False):
    """Call ``write(fileobj)`` on a temporary file beside ``path``, then rename it over ``path``.

    An interrupted write never leaves a truncated ``path``. ``private=True`` (secrets) keeps
    the temporary file's mode 0600, set when it was created (mkstemp), never widened;
    otherwise the file gets the usual permissions (0666 less the umask).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        if not private:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
