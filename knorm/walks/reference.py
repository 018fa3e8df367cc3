"""Hit-and-run driven by a cold-start reference oracle (HiGHS LP: two LPs per step).

The same Markov chain as the ``hit_and_run`` kernel, fed the same random inputs; only
the chord oracle differs. Used to measure what the facet walk buys (``scripts/
compare_oracles.py``) and to check that both oracles trace the same trajectory.
"""

import numpy as np


def hit_and_run_reference(oracle, x0, normals, unif):
    """Run ``len(unif)`` hit-and-run steps with ``oracle.chord``; returns the (steps, r) path.

    ``normals[i]`` is the direction, ``unif[i, 0]`` the position on the chord, exactly as
    the numba kernel uses them (``Chain.run`` draws ``normals`` then ``unif`` per chunk).
    """
    x = np.array(x0, dtype=np.float64)
    path = np.empty((len(unif), x.size))
    for i in range(len(unif)):
        u = normals[i]
        t_minus, t_plus = oracle.chord(x, u)
        x = x + (t_minus + unif[i, 0] * (t_plus - t_minus)) * u
        path[i] = x
    return path
