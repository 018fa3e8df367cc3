"""Randomness conventions: every public function takes ``rng=``."""

import numpy as np


def as_generator(rng):
    """Return a ``numpy.random.Generator`` from a Generator, an int seed or None.

    None draws fresh OS entropy; an int or a Generator makes runs reproducible.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng is not None and rng < 0:
            raise ValueError(f"rng seed must be non-negative, got {rng}")
        return np.random.default_rng(rng)
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    raise ValueError(
        f"rng must be a numpy.random.Generator, a non-negative int seed or None; got {type(rng).__name__}"
    )


def spawn(rng, k):
    """``k`` independent child generators of ``rng`` (deterministic given its state)."""
    gen = as_generator(rng)
    return gen.spawn(k)


def noise_source(rng):
    """How a mechanism's noise generator was made, for its privacy claim.

    ``"os-entropy"`` (None: private), ``"seed"`` (an int or SeedSequence: the noise is
    reproducible by anyone who knows the seed, so the run is NOT private) or
    ``"generator"`` (a caller-supplied Generator: private only if it was seeded from
    OS entropy, which the library cannot check).
    """
    if rng is None:
        return "os-entropy"
    if isinstance(rng, np.random.Generator):
        return "generator"
    return "seed"
