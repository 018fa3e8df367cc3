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


def npz_headers(z):
    """``{name: (shape, dtype)}`` of every array in an open ``numpy.lib.npyio.NpzFile``, read from its
    ``.npy`` header alone (no array is made). A ValueError where a header cannot be read."""
    import numpy as np
    from numpy.lib import format as npformat

    names = set(z.zip.namelist())
    out = {}
    for name in z.files:
        with z.zip.open(name + ".npy" if name + ".npy" in names else name) as f:
            version = npformat.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = npformat.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = npformat.read_array_header_2_0(f)
            else:
                raise ValueError(f"{name}: an .npy header of version {version}")
        out[name] = (tuple(int(s) for s in shape), np.dtype(dtype))
    return out


def check_npz_memory(headers, name):
    """Refuse (:func:`knorm._validate.check_memory`, a ValueError naming ``name``) arrays whose headers
    (:func:`npz_headers`) declare more bytes than this machine allows, before any is read."""
    import math

    from ._validate import check_memory

    check_memory(name, None, sum(math.prod(shape) * dtype.itemsize for shape, dtype in headers.values()))
