"""Guard against stale numba caches.

numba's ``cache=True`` keys a cached function on its own source file only: when a
kernel in another file changes (``body/_simplex.py`` called from
``walks/_kernels.py``), the caller's cached machine code silently keeps the old
callee. Before any kernel module is imported, this hashes all kernel sources and,
when the hash differs from the one stamped beside the caches, deletes the cached
files so that everything recompiles consistently.
"""

import hashlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
KERNEL_SOURCES = ("body/_simplex.py", "walks/_kernels.py")
_STAMP = "knorm-kernels.sha1"


def kernel_hash():
    h = hashlib.sha1()
    for rel in KERNEL_SOURCES:
        h.update((_ROOT / rel).read_bytes())
    return h.hexdigest()


def _cache_dirs():
    """The package's own ``__pycache__`` folders holding kernel caches.

    A user-set ``NUMBA_CACHE_DIR`` is shared with other packages and left alone.
    """
    return sorted({_ROOT / rel.rsplit("/", 1)[0] / "__pycache__" for rel in KERNEL_SOURCES})


def invalidate_stale_caches():
    """Delete numba cache files of knorm's kernels if the kernel sources changed."""
    digest = kernel_hash()
    for d in _cache_dirs():
        stamp = d / _STAMP
        try:
            if stamp.exists() and stamp.read_text() == digest:
                continue
            if d.exists():
                for f in list(d.glob("*.nbi")) + list(d.glob("*.nbc")):
                    f.unlink()
            d.mkdir(parents=True, exist_ok=True)
            stamp.write_text(digest)
        except OSError:
            # read-only install: numba falls back to compiling in memory when it cannot cache
            pass
