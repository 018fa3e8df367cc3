"""SHA-256 fingerprints of arrays and plain values (a leaf module: the body, the checkpoints and
the prepared workloads all name matrices and runs by them, one implementation)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def _feed(h: Any, p: Any) -> None:
    if isinstance(p, np.ndarray):
        h.update(f"a{p.dtype.str}{p.shape}:".encode())
        h.update(np.ascontiguousarray(p).tobytes())
    elif isinstance(p, dict):
        h.update(f"d{len(p)}:".encode())
        for k in sorted(p, key=str):
            _feed(h, str(k))
            _feed(h, p[k])
    elif isinstance(p, (list, tuple)):
        h.update(f"l{len(p)}:".encode())
        for q in p:
            _feed(h, q)
    else:
        s = json.dumps(p, default=str).encode()
        h.update(f"s{len(s)}:".encode() + s)


def fingerprint(*parts: Any) -> str:
    """SHA-256 of ``parts``: arrays by dtype, shape and bytes; dicts, lists and tuples
    element by element (whole, never a printed summary); anything else as JSON."""
    h = hashlib.sha256()
    _feed(h, parts)
    return h.hexdigest()
