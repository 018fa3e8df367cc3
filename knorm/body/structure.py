"""Exact structure of K: linear images of the cross-polytope and of the cube.

Uniformity is preserved by linear maps, so when ``K = G·B₁^r`` or ``K = G·[-1,1]^r``
(G invertible, in span coordinates) uniform draws are exact: no MCMC. This covers the
identity, signed / permuted / diagonally scaled identities, any invertible square F
(e.g. the prefix workload) with or without extra interior columns, and boxes.
"""

from dataclasses import dataclass

import numpy as np

from ..errors import OracleError

CROSS = "cross-polytope"
BOX = "box"


@dataclass
class ExactStructure:
    """``K = G·C`` in frame coordinates, C the unit cross-polytope or cube of dim r."""

    kind: str
    G: np.ndarray  # (r, r), frame coordinates

    def sample_frame(self, size, rng):
        """Exact uniform draws in frame coordinates (docs/design.md §3.1 for the ℓ1 ball)."""
        r = self.G.shape[0]
        if self.kind == CROSS:
            g = rng.laplace(size=(size, r))  # density ∝ exp(-|t|)
            e = rng.standard_exponential((size, 1))
            c = g / (np.abs(g).sum(axis=1, keepdims=True) + e)
        else:
            c = rng.uniform(-1.0, 1.0, size=(size, r))
        return c @ self.G.T

    def covariance_frame(self):
        """Exact covariance of Uniform(K) in frame coordinates."""
        r = self.G.shape[0]
        s = 2.0 / ((r + 1) * (r + 2)) if self.kind == CROSS else 1.0 / 3.0
        return s * self.G @ self.G.T


# above this many columns per dimension, gauging every column (n solves) costs more than
# the detection is worth: only the one-solve sufficient test of _cross_fast is tried
FULL_CROSS_COLUMNS = 16

# a column with |f·λ| above 1 - SIMPLE_FACET_TOL counts as on the facet (generous: counting
# one too many only sends detection to the full test)
SIMPLE_FACET_TOL = 1e-7


def _cross_fast(frame, tol):
    """One solve at a fixed generic direction: ``(structure or None, simple)``.

    If K = G·B₁^r, the optimal basis is G up to signs unless K has boundary columns that
    are not vertices. Verified: every column must have coefficients of ℓ1 norm <= 1 in that
    basis. ``simple``: the facet found has exactly r columns on it (its basis). A facet holds at
    least r vertices of K, and every vertex is a ± column, so those r columns are then vertices
    of K, one of each ± pair if K = G·B₁^r, i.e. G itself: a failed check proves there is no
    cross-polytope structure, and the n-solve test of :func:`_cross` is not needed."""
    Ft = frame.Ft
    n, r = Ft.shape
    y = np.random.default_rng(1).standard_normal(r)
    st = frame.solve(y, frame.crash_basis())
    G = Ft[st.basis % n].T
    W = np.linalg.solve(G, Ft.T)
    if np.all(np.abs(W).sum(axis=0) <= 1.0 + tol):
        return ExactStructure(CROSS, G), True
    signs = np.where(st.basis < n, 1.0, -1.0)  # code c >= n is the column -f_(c-n)
    on_facet = np.abs(Ft @ np.linalg.solve(G.T, signs)) >= 1.0 - SIMPLE_FACET_TOL
    return None, int(np.count_nonzero(on_facet)) == r


def _more_than_r_vertices(Ft, tol, chunk=64):
    """True when more than r columns are certified vertices of K, so K (which then has more
    than 2r vertices) is no image of the cross-polytope. Column j is one when the functional
    ``f_j`` exposes it: ``f_j·f_j > |f_j·f_k|`` for every other column k (with a margin of
    ``tol`` relative), so ``f_j`` is the only maximiser of ``f_j·x`` over the ± columns. Columns go
    ``chunk`` at a time and the count stops once it passes r (all 0/1 columns with the same
    number of ones, or all ±1 columns, are exposed: r + 1 columns decide)."""
    n, r = Ft.shape
    norms = np.sqrt(np.einsum("ij,ij->i", Ft, Ft))
    top = float(norms.max())
    exposed = 0
    for start in range(0, n, chunk):
        rows = np.arange(start, min(start + chunk, n))
        gram = np.abs(Ft[rows] @ Ft.T)
        gram[np.arange(len(rows)), rows] = -np.inf
        exposed += int(np.count_nonzero(norms[rows] ** 2 - gram.max(axis=1) > tol * norms[rows] * top))
        if exposed > r:
            return True
    return False


def _cross(frame, tol):
    Ft = frame.Ft  # (n, r): columns of F as rows
    n, r = Ft.shape
    if n == r:
        return ExactStructure(CROSS, Ft.T.copy())
    found, simple = _cross_fast(frame, tol)
    if n > FULL_CROSS_COLUMNS * r:
        return found
    if found is None and (simple or _more_than_r_vertices(Ft, tol)):
        return None
    # a structure, or no proof that there is none: the n-solve test (which also picks the G
    # that detection has always returned here, so seeded exact draws keep their bits)
    g, _ = frame.gauges(Ft)
    cand = np.flatnonzero(g >= 1.0 - tol)
    if len(cand) < r:
        return None
    # r independent boundary columns (pivoted QR), then every column must lie in G·B₁^r
    _, R, piv = _qr_pivot(Ft[cand].T)
    if abs(R[r - 1, r - 1]) < 1e-9 * abs(R[0, 0]):
        return None
    G = Ft[cand[piv[:r]]].T
    W = np.linalg.solve(G, Ft.T)
    if np.all(np.abs(W).sum(axis=0) <= 1.0 + tol):
        return ExactStructure(CROSS, G)
    return None


def _qr_pivot(A):
    from scipy.linalg import qr

    return qr(A, pivoting=True, mode="economic")


def _box(frame, tol, max_dim, rng):
    n, r = frame.Ft.shape
    if r > max_dim or n != 2 ** (r - 1):
        # a box G·[-1,1]^r has 2^r vertices (2^(r-1) ± pairs); any other column count
        # means extra columns, which we do not try to prune here
        return None
    # probes whitened by the columns' second moment: each facet of a box is then hit
    # with probability ≈ 1/(2r) per probe, so 40r probes miss one with prob ≈ e^-20
    S = frame.Ft.T @ frame.Ft / n
    Y = rng.standard_normal((40 * r, r)) @ np.linalg.cholesky(S + 1e-12 * np.eye(r)).T
    _, normals = frame.gauges(Y)
    scale = np.max(np.abs(normals))
    key = normals / scale
    # K is symmetric: canonicalise each normal up to sign (first clearly non-zero entry positive;
    # the largest entry is no key: two entries of equal size, e.g. ±0.57, tie up to rounding noise)
    lead = np.argmax(np.abs(key) > 1e-6 * np.abs(key).max(axis=1, keepdims=True), axis=1)
    key *= np.sign(key[np.arange(len(key)), lead])[:, None]
    _, first = np.unique(np.round(key, 9), axis=0, return_index=True)
    half = key[first]  # unrounded representatives
    if len(half) != r:
        return None
    Lam = np.array(half) * scale  # rows: facet normals λ_i, |λ_iᵀy| <= 1 on K
    try:
        G = np.linalg.inv(Lam)
    except np.linalg.LinAlgError:
        return None
    signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * r)).reshape(r, -1).T
    g, _ = frame.gauges(signs @ G.T)
    if np.all(g <= 1.0 + tol):
        return ExactStructure(BOX, G)
    return None


def detect(frame, *, tol=1e-9, max_box_dim=16):
    """The exact structure of a frame's body, or None (then sample by MCMC).

    Never fails on a body it cannot classify: any numerical failure inside (oracle error,
    singular or non-finite linear algebra) means "no exact structure", and the caller
    samples by MCMC instead. A structure is only returned once verified.
    """
    for probe in (lambda: _cross(frame, tol), lambda: _box(frame, tol, max_box_dim, np.random.default_rng(0))):
        try:
            with np.errstate(all="ignore"):
                found = probe()
        except (OracleError, np.linalg.LinAlgError, ValueError, FloatingPointError, ZeroDivisionError):
            found = None
        if found is not None and np.all(np.isfinite(found.G)):
            return found
    return None
