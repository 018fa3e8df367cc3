"""Argument checks shared across the package."""

import os
from collections.abc import Mapping, Sequence

import numpy as np


def is_real(value):
    """A real scalar: Python or numpy int or float (bools are refused: True is not a number here)."""
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


def is_int(value):
    """A Python or numpy integer (bools refused)."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer))


def short_repr(value, limit=80):
    """``repr(value)`` on one line, cut to about ``limit`` characters (for error messages)."""
    r = " ".join(repr(value).split())
    return r if len(r) <= limit else r[: limit - 3] + "..."


def positive_int(name, value, *, allow_none=False):
    """``value`` as an int >= 1 (bools and floats refused), or None if ``allow_none``."""
    if value is None and allow_none:
        return None
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be {'None or ' if allow_none else ''}a positive integer, got {short_repr(value)}")
    return int(value)


MEMORY_FRACTION = 0.5  # a request may use at most half the physical memory
FALLBACK_MEMORY = 8 * 2**30  # bytes, when the physical memory is unknown


def memory_limit():
    """Bytes one request may use: ``MEMORY_FRACTION`` (1/2) of the physical memory (8 GiB if unknown)."""
    try:
        return MEMORY_FRACTION * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return FALLBACK_MEMORY


def check_memory(name, value, nbytes):
    """ValueError naming ``name`` (and ``value``, unless None) if ``nbytes`` (estimated
    before allocating) exceeds :func:`memory_limit`."""
    limit = memory_limit()
    if nbytes > limit:
        need = f"{nbytes / 2**30:.3g}" if nbytes < 10**300 else "more than 1e290"
        label = name if value is None else f"{name}={value!r}"
        raise ValueError(f"{label} needs about {need} GiB, more than the "
                         f"{limit / 2**30:.3g} GiB allowed (half the physical memory)")


def as_real_array(name, value, *, allow_object=False):
    """``np.asarray(value)`` if it holds real numbers (bool, int, float), else a one-line
    ValueError naming ``name`` (complex, strings, ragged input; object arrays unless
    ``allow_object``, for callers that convert them element by element)."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None
    if np.iscomplexobj(arr) or arr.dtype.kind not in ("biufO" if allow_object else "biuf"):
        raise ValueError(f"{name} must be real numbers (a numeric array), got dtype {arr.dtype}")
    return arr


def records_array(name, values):
    """``np.asarray(values)``, or a ValueError naming ``name`` without numpy's message (a ragged
    input's message states shapes that count the records: private)."""
    try:
        return np.asarray(values)
    except (ValueError, TypeError):
        raise ValueError(f"{name} could not be read as an array of one value per record (ragged or mixed "
                         "rows?)") from None


def check_options(name, options, allowed):
    """``options`` (None or a mapping) as a dict whose keys are all in ``allowed``; else a
    ValueError naming ``name``, the unknown keys and the allowed ones (a TypeError if it is
    not a mapping)."""
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"{name}: expected a mapping of option name to value, got {type(options).__name__}")
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise ValueError(f"{name}: unknown keys {unknown}; allowed: {list(allowed)}")
    return opts


def check_flag(name, value):
    """``value`` as a bool if it is True or False (numpy's too), else a ValueError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {short_repr(value)}")
    return bool(value)


def check_str(name, value, *, allow_none=False):
    """``value`` if it is a str (or None, if ``allow_none``), else a TypeError naming ``name``."""
    if not (isinstance(value, str) or (value is None and allow_none)):
        raise TypeError(f"{name} must be {'None or ' if allow_none else ''}a str, got {type(value).__name__}")
    return value


def check_path(name, value, *, allow_none=False):
    """``value`` if it is a file name (str or os.PathLike; or None, if ``allow_none``), else a
    TypeError naming ``name``; an empty name or a folder is a ValueError naming it."""
    if value is None and allow_none:
        return value
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be {'None or ' if allow_none else ''}a file name (str or path), got "
                        f"{type(value).__name__}")
    if not os.fspath(value) or os.path.isdir(value):
        raise ValueError(f"{name} must name a file, got {short_repr(value)} (empty, or a folder)")
    return value


def as_list(name, value, what="a list"):
    """``value`` (a list, tuple, array or other sequence; not a str or a mapping) as a list, else a
    TypeError naming ``name`` (``what`` says what was expected)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    return list(value)
