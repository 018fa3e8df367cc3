"""Argument checks shared across the package."""

import numpy as np


def positive_int(name, value, *, allow_none=False):
    """``value`` as an int >= 1 (bools and floats refused), or None if ``allow_none``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be {'None or ' if allow_none else ''}a positive integer, got {value!r}")
    return int(value)
