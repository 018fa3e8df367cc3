"""The numba kernels' decorator, cold-cache check and compile timer; a guard against stale caches.

numba's ``cache=True`` keys a cached function on its own source file only: when a
kernel in another file changes (``body/_marginal.py`` called from ``body/_simplex.py``,
called from ``walks/_kernels.py``), the caller's cached machine code silently keeps the old
callee. Before any kernel module is imported, this hashes all kernel sources and,
when the hash differs from the one stamped beside the caches, deletes the cached
files so that everything recompiles consistently.
"""

import hashlib
from pathlib import Path

from numba import njit, types
from numba.core import event as _event
from numba.core.registry import CPUDispatcher

_ROOT = Path(__file__).resolve().parent
KERNEL_SOURCES = ("body/_marginal.py", "body/_spectral.py", "body/_columns.py", "body/_crash.py", "body/_simplex.py",
                  "walks/_kernels.py")
_STAMP = "knorm-kernels.sha1"


def kernel_hash():
    h = hashlib.sha1(Path(__file__).read_bytes())  # this file decides how they compile (``kernel``)
    for rel in KERNEL_SOURCES:
        h.update((_ROOT / rel).read_bytes())
    return h.hexdigest()


def _cache_dirs():
    """The folders where numba keeps the kernels' caches now, and the others it could use: for each
    kernel source folder, the places numba's source-file cache locators would use (the package's
    ``__pycache__``; under a user-set ``NUMBA_CACHE_DIR``, or the user-wide cache of a read-only
    install, the sub-folder numba names after that source folder: knorm's alone, never another
    package's). Returns ``(active, others)``, lists of ``(folder, module stems)``.

    Before 2026-12-02 only ``__pycache__`` was checked: with ``NUMBA_CACHE_DIR`` set, a caller's
    cached machine code (``walks/_kernels.py``) kept an edited callee's old code
    (``body/_simplex.py``), and an upgrade of knorm could run the previous version's kernels.
    Locators whose folder does not come from the source file (IPython's one shared
    ``numba_cache``, zip imports) are never looked at.
    """
    from numba.core import caching

    # numba tries these in this order and uses the first that applies (it makes that folder)
    locators = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)
    folders: dict[Path, set[str]] = {}  # a locator's folder depends on the source's folder only
    for rel in KERNEL_SOURCES:
        folders.setdefault((_ROOT / rel).parent, set()).add(Path(rel).stem)
    active: list[tuple[Path, set[str]]] = []
    others: list[tuple[Path, set[str]]] = []
    for folder, stems in sorted(folders.items()):
        src = str(folder / (sorted(stems)[0] + ".py"))
        chosen = None
        for cls in locators:
            try:
                if chosen is None:
                    chosen = cls.from_function(_cache_dirs, src)
                    if chosen is not None:
                        active.append((Path(chosen.get_cache_path()), stems))
                        continue
                path = Path(cls(_cache_dirs, src).get_cache_path())  # the path only: nothing made
            except Exception:  # a locator that does not apply here
                continue
            if path.is_absolute():  # (a user cache folder that is not set is the empty path)
                others.append((path, stems))
    return active, others


def invalidate_stale_caches():
    """Delete the numba cache files of knorm's kernel modules if the kernel sources changed (in the
    folders numba uses now, stamped; and in any other of :func:`_cache_dirs` that exists)."""
    digest = kernel_hash()
    active, others = _cache_dirs()
    for d, stems in active + [(d, st) for d, st in others if d.exists()]:
        stamp = d / _STAMP
        try:
            if stamp.exists() and stamp.read_text() == digest:
                continue
            if d.exists():
                for stem in stems:  # knorm's kernel modules' caches only (``module.function-line.…``)
                    for f in list(d.glob(f"{stem}.*.nbi")) + list(d.glob(f"{stem}.*.nbc")):
                        f.unlink()
            d.mkdir(parents=True, exist_ok=True)
            stamp.write_text(digest)
        except OSError:
            # read-only install: numba falls back to compiling in memory when it cannot cache
            pass


# -- what a cold start compiles ------------------------------------------------------
# numba compiles a kernel once per distinct argument types, and a constant argument in a
# call from another kernel (``_pivot(..., -1, ...)``, ``bland = False``) is typed as a
# literal: the cold `knorm sample` compiled _pivot four times, _pivot_out three times and
# seven more kernels twice, each with its whole call tree. ``kernel`` types constant
# arguments, numeric and boolean, as plain values: one version per kernel (a flag such as
# ``_pivot``'s ``clamp`` is tested once per pivot, not per column).
#
# Each compiled kernel is a library into which numba links the code of every kernel it
# calls, optimises the whole and emits its machine code again (numba's codegen): a kernel
# deep in the simplex's call tree was compiled once for itself and once more inside each
# caller up the tree. So the call tree is kept shallow: a kernel with one or two callers
# and no life of its own (a walk's step, a phase of ``solve``) is ``inline=True``, typed
# into its callers, not compiled on its own; and a kernel only other kernels call
# (``entry=False``, the default) gets no CPython and no C wrapper, which a call from
# Python would need (it raises a TypeError instead). Seeded results keep every bit: no
# fastmath kernel is inlined (the caller's flags would apply to its operations). Measured
# in docs/benchmarks.md ("A cold start"); docs/design.md §3.6.


def _widen(t):
    """A literal type (numeric or boolean) as its plain type; other types as they are."""
    return types.unliteral(t)


class _InnerKernel(CPUDispatcher):
    """A kernel compiled without the wrappers a call from Python needs."""

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.py_func.__qualname__} is a numba kernel called from other kernels only "
                        "(compiled without a Python wrapper; knorm._jit.kernel(entry=True) makes one callable)")


def kernel(entry=False, inline=False, **options):
    """``numba.njit(cache=True, nogil=True, **options)`` that types constant arguments like
    variables (``f(x, -1)``, ``f(x, j)`` and ``f(x, True)`` share one compiled version).

    ``entry``: called from Python (compiled with numba's wrappers); otherwise only from
    other kernels. ``inline``: typed into each calling kernel (numba's ``inline="always"``),
    never compiled on its own; not with ``fastmath`` (the caller's flags would apply)."""
    if inline and ("fastmath" in options or entry):
        raise ValueError("an inline kernel is compiled with its caller's flags: no fastmath, no entry")

    def decorate(fn):
        opts = {"cache": True, "nogil": True, **options}
        if inline:
            opts["inline"] = "always"
        if not entry:
            opts.update(no_cpython_wrapper=True, no_cfunc_wrapper=True)
        disp = njit(**opts)(fn)
        if not entry:
            disp.__class__ = _InnerKernel
        compile_exact = disp.compile

        def compile(sig):
            if not isinstance(sig, tuple):  # an explicit signature: numba's own path
                return compile_exact(sig)
            return compile_exact(tuple(_widen(a) for a in sig))

        disp.compile = compile
        return disp

    return decorate


# -- cold cache and compile time --------------------------------------------------------


def kernels_cached(dispatchers):
    """False if any of the kernels ``dispatchers`` has no valid numba cache index (missing,
    from other sources or another numba): its first call compiles. Reads the index files only."""
    for disp in dispatchers:
        try:
            cache_file = disp._cache._cache_file
            if not cache_file._load_index():  # {} when missing or stale (numba's own check)
                return False
        except (AttributeError, OSError, EOFError, ValueError, TypeError):
            return False  # no disk cache (read-only install, numba internals changed): compiles
    return True


class CompileTimer:
    """Seconds numba spends compiling (not loading cached code) between ``start()`` and
    ``stop()`` (or inside ``with CompileTimer() as ct:``); ``seconds`` is readable at any time."""

    def __init__(self):
        self._listener = _event.TimingListener()

    def start(self):
        _event.register("numba:compile", self._listener)
        return self

    def stop(self):
        _event.unregister("numba:compile", self._listener)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    @property
    def seconds(self):
        return self._listener.duration if self._listener.done else 0.0
