"""Numba kernels of the random walks over K (docs/design.md §3.2), one chain at a time.

All randomness is drawn outside (numpy Generator) and passed in, so a seeded run is
reproducible bit for bit whatever the threading. A chain's oracle state is
``(basis, Binv, lam, g, ctr)`` (see ``knorm.body._simplex``); it is kept optimal at the
current point (hit-and-run and billiard need that for the parametric chord walk).

Two coordinate systems: the walk's geometry (directions, lengths, reflections, the
optional ball) lives in the frame coordinates ``x`` (isotropic once rounded); the
oracle's LP lives in its own coordinates ``z = T·x`` (T r×r invertible), where F keeps
its sparsity. A direction u becomes ``T·u``; a facet normal λ (``λ·z = 1``) becomes
``Tᵀλ``. Uniformity is preserved by the linear map, so nothing else changes.

Per-step random inputs: ``normals[i]`` (r standard normals; unused by the coordinate
walk) and ``unif[i]`` (two U(0,1) numbers; the billiard's second one draws its radial
refresh).
"""

import numpy as np

from .._jit import kernel
from ..body import _simplex as sx

BALL = 0
HIT_AND_RUN = 1
COORDINATE = 2
BILLIARD = 3

# stats slots
S_REJECTED = 0     # ball walk: proposals outside K; billiard: trajectories with too many reflections
S_REFLECTIONS = 1  # billiard reflections
S_STEPS = 2


# Copies are loops, not ``a[:] = b``: numba's array-to-array assignment checks shapes with a
# formatted error message, and compiling that message (str, join, repr) was ≈ 10% of a cold start.


@kernel()
def _copy(dst, src):
    """``dst[i] = src[i]`` for a 1-D array (same length)."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@kernel()
def _copy_state(b0, B0, l0, g0, c0, b1, B1, l1, g1, c1):
    """Copy oracle state 0 into state 1, with its pivots-since-refactorisation count
    (so refactorisation timing, hence every last bit, depends only on the trajectory)."""
    _copy(b1, b0)
    for i in range(B0.shape[0]):
        for j in range(B0.shape[1]):
            B1[i, j] = B0[i, j]
    _copy(l1, l0)
    _copy(g1, g0)
    c1[0] = c0[0]


@kernel(fastmath={"reassoc", "contract"})
def _tmul_t(T, v, out):
    """``out ← Tᵀ·v``."""
    r = v.shape[0]
    for i in range(r):
        out[i] = 0.0
    for k in range(r):
        vk = v[k]
        for i in range(r):
            out[i] += T[k, i] * vk


@kernel()
def _ball_chord(x, u, radius):
    """Both distances ``s >= 0`` to the sphere ``‖x + s·u‖ = radius`` along +u and −u."""
    if radius == np.inf:
        return np.inf, np.inf
    uu = 0.0
    xu = 0.0
    xx = 0.0
    for i in range(x.shape[0]):
        uu += u[i] * u[i]
        xu += x[i] * u[i]
        xx += x[i] * x[i]
    root = np.sqrt(max(xu * xu - uu * (xx - radius * radius), 0.0))
    return max((-xu + root) / uu, 0.0), max((xu + root) / uu, 0.0)


@kernel(inline=True)
def _chord_step(A, fmax, T, b0, B0, l0, g0, c0, b1, B1, l1, g1, c1, x, u, v, radius, max_piv, out):
    """Hit-and-run move along u: uniform point on the chord of ``K ∩ radius·B₂``, v ~ U(0,1).

    The ball clip is free: the parametric walk simply stops at the sphere.
    """
    bp, bm = _ball_chord(x, u, radius)
    r = x.shape[0]
    z = np.empty(r)
    uz = np.empty(r)
    sx._matvec(T, x, z)
    sx._matvec(T, u, uz)
    _copy_state(b0, B0, l0, g0, c0, b1, B1, l1, g1, c1)
    st = sx.move(A, fmax, b1, B1, l1, g1, c1, z, uz, bp, max_piv, out)
    if st != sx.OK:
        return st
    tp = out[0]
    neg = -uz
    st = sx.move(A, fmax, b0, B0, l0, g0, c0, z, neg, bm, max_piv, out)
    if st != sx.OK:
        return st
    tm = out[0]
    t = -tm + v * (tp + tm)
    y = np.empty(r)
    if t >= 0.0:
        # S1 sits at the + end: walk back inward to z + t uz
        for i in range(r):
            y[i] = z[i] + tp * uz[i]
        st = sx.move(A, fmax, b1, B1, l1, g1, c1, y, neg, tp - t, max_piv, out)
        _copy_state(b1, B1, l1, g1, c1, b0, B0, l0, g0, c0)
    else:
        for i in range(r):
            y[i] = z[i] - tm * uz[i]
        st = sx.move(A, fmax, b0, B0, l0, g0, c0, y, uz, t + tm, max_piv, out)
    for i in range(r):
        x[i] += t * u[i]
    return st


@kernel()
def _reflect(u, nrm):
    """u ← u − 2 (u·n / n·n) n."""
    un = 0.0
    nn = 0.0
    for i in range(u.shape[0]):
        un += u[i] * nrm[i]
        nn += nrm[i] * nrm[i]
    f = 2.0 * un / nn
    for i in range(u.shape[0]):
        u[i] -= f * nrm[i]


@kernel()
def _radial(T, lam, x, radius, v, z):
    """Radial Gibbs move: ``x ← c·x`` with ``c = c_max·v^{1/r}``, ``v`` ~ U(0, 1].

    Along the half-line {c·x : c > 0} the body ``K ∩ radius·B₂`` is ``c ∈ (0, c_max]``,
    ``c_max = min(1/‖x‖_K, radius/|x|)``, and the uniform law restricted to it has density
    ∝ c^{r−1} (polar coordinates), whose inverse CDF is ``c_max·v^{1/r}``: an exact draw
    of the radius given the direction, so Uniform(K ∩ radius·B₂) is invariant. ``‖x‖_K =
    λ·(T x)`` with the oracle state optimal at ``T x``, which stays optimal at ``c·T x``
    (a basis is optimal on a whole cone), so the move needs no pivot. At the origin
    (no direction) nothing moves. ``z``: work space (r).
    """
    r = x.shape[0]
    sx._matvec(T, x, z)
    gx = sx._dot(lam, z)
    if not gx > 0.0:
        return
    cmax = 1.0 / gx
    if radius < np.inf:
        cmax = min(cmax, radius / np.sqrt(sx._dot(x, x)))
    c = cmax * v ** (1.0 / r)
    for i in range(r):
        x[i] *= c


@kernel(inline=True)
def _billiard_step(A, fmax, T, b0, B0, l0, g0, c0, b1, B1, l1, g1, c1, x, u, length, max_refl, radius, max_piv, out,
                   stats):
    """Billiard walk in ``K ∩ radius·B₂``: travel ``length`` along unit u, reflecting off
    K's facets (normal λ) and off the sphere (normal x); ``radius = inf``: all of K.

    A trajectory needing more than ``max_refl`` reflections is discarded: the chain
    stays where it was (keeps the walk reversible).
    """
    r = x.shape[0]
    x0 = x.copy()
    z = np.empty(r)
    uz = np.empty(r)
    nz = np.empty(r)
    sx._matvec(T, x, z)
    sx._matvec(T, u, uz)
    _copy_state(b0, B0, l0, g0, c0, b1, B1, l1, g1, c1)
    rem = length
    nref = 0
    while True:
        s_ball = _ball_chord(x, u, radius)[0]
        at_sphere = s_ball < rem  # the sphere, not the remaining length, limits this leg
        st = sx.move(A, fmax, b0, B0, l0, g0, c0, z, uz, s_ball if at_sphere else rem, max_piv, out)
        if st != sx.OK:
            return st
        s = out[0]
        for i in range(r):
            x[i] += s * u[i]
            z[i] += s * uz[i]
        rem -= s
        if out[1] == 0.0 and not at_sphere:
            break
        nref += 1
        if nref > max_refl:
            _copy(x, x0)
            _copy_state(b1, B1, l1, g1, c1, b0, B0, l0, g0, c0)
            stats[S_REJECTED] += 1
            return sx.OK
        if out[1] != 0.0:
            _tmul_t(T, l0, nz)
            _reflect(u, nz)  # facet of K: normal Tᵀλ in frame coordinates
        else:
            _reflect(u, x)   # the sphere: outward normal x
        sx._matvec(T, u, uz)
    stats[S_REFLECTIONS] += nref
    return sx.OK


@kernel(inline=True)
def _ball_step(A, fmax, T, b0, B0, l0, g0, c0, x, v, delta, radius_u, max_piv, stats):
    """Ball walk: propose x + δ·(uniform point of the unit ball); stay if outside K."""
    r = x.shape[0]
    nrm = 0.0
    for i in range(r):
        nrm += v[i] * v[i]
    scale = delta * radius_u ** (1.0 / r) / np.sqrt(nrm)
    y = np.empty(r)
    yz = np.empty(r)
    for i in range(r):
        y[i] = x[i] + scale * v[i]
    sx._matvec(T, y, yz)
    st = sx.solve(A, fmax, b0, B0, l0, g0, c0, yz, max_piv)
    if st != sx.OK:
        return st
    gy = 0.0
    for i in range(r):
        gy += l0[i] * yz[i]
    if gy <= 1.0:
        _copy(x, y)
    else:
        stats[S_REJECTED] += 1
    return sx.OK


@kernel(entry=True)
def run_chain(walk, A, fmax, T, b0, B0, l0, g0, c0, x, normals, unif, thin, offset, params, max_piv, out, stats,
              gout):
    """Advance one chain ``unif.shape[0]`` steps; store x after every ``thin``-th step.

    ``offset``: steps of the current run already taken (the record counts from the run's
    start, so a run may be split into several calls).

    ``params``: ball ``[δ]``; billiard ``[L, max_reflections, radius(, a(, refresh))]``:
    trajectory length uniform on ``[(1−a)L, (1+a)L]`` (``0 <= a <= 1``) or, without ``a``
    or with ``a < 0``, ~ Exp(mean L); in ``K ∩ radius·B₂`` (``inf``: all of K); with
    ``refresh > 0`` each step also redraws the radius exactly (:func:`_radial`), before or
    after the trajectory with probability 1/2 each. Any length law independent of the
    state keeps the walk reversible (the billiard flow is), and so does the random order;
    hit-and-run / coordinate ``[radius]``: sample ``K ∩ radius·B₂`` (``inf``: all of K).
    ``gout`` (empty: none): each record's gauge ``‖x‖_K = λ·(T x)``, exact and free where the
    state is optimal at x after every step (the billiard walk: its radial move relies on it).
    Returns a status of ``knorm.body._simplex``.
    """
    r = x.shape[0]
    steps = unif.shape[0]
    b1 = b0.copy()
    B1 = B0.copy()
    l1 = l0.copy()
    g1 = g0.copy()
    c1 = np.zeros(4, np.int64)
    u = np.empty(r)
    mv = np.zeros(2)
    st = sx.OK
    refresh = walk == BILLIARD and params.shape[0] > 4 and params[4] > 0.0
    zr = np.empty(r)  # the radial move's work space
    for i in range(steps):
        if walk == BALL:
            st = _ball_step(A, fmax, T, b0, B0, l0, g0, c0, x, normals[i], params[0], unif[i, 1], max_piv, stats)
        elif walk == COORDINATE:
            u[:] = 0.0
            k = min(int(unif[i, 1] * r), r - 1)
            u[k] = 1.0
            st = _chord_step(A, fmax, T, b0, B0, l0, g0, c0, b1, B1, l1, g1, c1, x, u, unif[i, 0], params[0],
                             max_piv, mv)
        elif walk == HIT_AND_RUN:
            _copy(u, normals[i])
            st = _chord_step(A, fmax, T, b0, B0, l0, g0, c0, b1, B1, l1, g1, c1, x, u, unif[i, 0], params[0],
                             max_piv, mv)
        else:
            nrm = 0.0
            for j in range(r):
                nrm += normals[i, j] * normals[i, j]
            nrm = np.sqrt(nrm)
            for j in range(r):
                u[j] = normals[i, j] / nrm
            if params.shape[0] > 3 and params[3] >= 0.0:
                length = params[0] * (1.0 - params[3] + 2.0 * params[3] * unif[i, 0])
            else:
                length = -params[0] * np.log(1.0 - unif[i, 0])
            # radial refresh: one radial move before or after the trajectory, in random
            # order (a mixture of P_B·P_R and P_R·P_B: reversible), both from unif[i, 1]
            w = 2.0 * unif[i, 1]
            first = w < 1.0
            v = 1.0 - w if first else 2.0 - w  # U(0, 1], independent of the order
            if refresh and first:
                _radial(T, l0, x, params[2], v, zr)
            st = _billiard_step(
                A, fmax, T, b0, B0, l0, g0, c0, b1, B1, l1, g1, c1, x, u, length, params[1], params[2], max_piv, mv,
                stats,
            )
            if refresh and not first and st == sx.OK:
                _radial(T, l0, x, params[2], v, zr)
        if st != sx.OK:
            break
        stats[S_STEPS] += 1
        j = offset + i + 1
        if j % thin == 0:
            _copy(out[j // thin - 1], x)
            if gout.shape[0] > 0:
                sx._matvec(T, x, zr)
                gout[j // thin - 1] = sx._dot(l0, zr)
    c0[1] += c1[1]
    c0[2] += c1[2]
    c0[3] += c1[3]
    return st
