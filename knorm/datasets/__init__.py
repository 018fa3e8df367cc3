"""Public data sets shipped with knorm, for examples, tests and benchmarks.

:func:`nltcs`: the US National Long-Term Care Survey as used across the differential-privacy
literature (PrivBayes, HDMM, PrivMRF, AIM): 21,574 records × 16 binary attributes, each a 0/1
indicator of a limitation in an activity of daily living, no personal identifiers. Source:
``data/nltcs.csv`` of the public repository caicre/PrivMRF (Apache License 2.0, the text in
``knorm/datasets/NLTCS-LICENSE``), taken unchanged and stored gzip-compressed; its SHA-256 is
checked on every load. Its workloads: all 2-way marginals (120 tables, rank 137) and all ≤3-way
marginals (rank 1 + 16 + 120 + 560 = 697) over 2¹⁶ = 65,536 cells.
"""

from __future__ import annotations

import gzip
import hashlib
import io
from importlib import resources

import numpy as np
from numpy.typing import NDArray

from ..data import Attribute, Domain

__all__ = ["nltcs", "nltcs_domain", "NLTCS_SHA256"]

NLTCS_SHA256 = "31d23617ba74786d2d163c9c31a841e11e5a5f5f8266918d8021ec4e562684b4"  # of the uncompressed CSV


def nltcs_domain() -> Domain:
    """The public domain of :func:`nltcs`: 16 binary attributes named ``"0"`` … ``"15"``, values 0 and 1."""
    return Domain([Attribute(str(i), categories=[0, 1]) for i in range(16)])


def nltcs() -> NDArray[np.int64]:
    """The NLTCS records, ``(21574, 16)`` int64 of 0/1 (module docstring). A private table
    in the examples' story: only a mechanism's release may let anything computed from it out.
    ``knorm.data.histogram(nltcs(), nltcs_domain())`` is its count vector over 65,536 cells."""
    raw = gzip.decompress(resources.files(__package__).joinpath("nltcs.csv.gz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != NLTCS_SHA256:
        raise ValueError("knorm/datasets/nltcs.csv.gz: the file is damaged (its SHA-256 differs from the source's); "
                         "reinstall knorm")
    return np.loadtxt(io.BytesIO(raw), delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
