"""Walk parameters of the Sampler: only values that keep Uniform(K) invariant are accepted
(knorm.walks.chains.check_params), and accepted non-default values still sample Uniform(K)."""

import numpy as np
import pytest

import knorm
from knorm import Sampler
from knorm.walks.chains import WALKS, check_params, default_params, diameter
from knorm.walks.sampler import rounding_of


@pytest.fixture(scope="module")
def K():
    K = knorm.SymmetricHull(np.random.default_rng(20).choice([-1.0, 1.0], size=(5, 10)))
    assert K.exact_structure is None and K.dim == 5
    return K


@pytest.fixture(scope="module")
def frame(K):
    return rounding_of(K).frame


@pytest.mark.parametrize("walk", sorted(WALKS))
def test_the_defaults_pass(frame, walk):
    p = default_params(walk, frame)
    np.testing.assert_array_equal(check_params(walk, p, frame.r, frame), p)


INF = np.inf
BAD = [
    ("hit_and_run", [1e-3], "ball clip"),           # the attack: K ∩ 0.001·B₂ instead of K
    ("coordinate", [5.0], "ball clip"),
    ("hit_and_run", [], r"must be \[inf\]"),
    ("hit_and_run", [INF, INF], r"must be \[inf\]"),
    ("ball", [0.0], "positive and finite"),
    ("ball", [-1.0], "positive and finite"),
    ("ball", [INF], "positive and finite"),
    ("ball", [np.nan], "positive and finite"),
    ("ball", ["1"], "real numbers"),
    ("ball", [1 + 0j], "real numbers"),
    ("ball", [True], r"must be \[radius\]"),
    ("ball", [[1.0]], r"must be \[radius\]"),
    ("billiard", [-1.0], "5 real numbers"),         # the case: draws with gauge 90 outside K
    ("billiard", [-1.0, 50, INF, 0.5, 1], "length"),
    ("billiard", [INF, 50, INF, 0.5, 1], "length"),
    ("billiard", [1.0, 0, INF, 0.5, 1], "reflection cap"),
    ("billiard", [1.0, 2.5, INF, 0.5, 1], "reflection cap"),
    ("billiard", [1.0, 501, INF, 0.5, 1], "reflection cap"),  # above 100·r, r = 5
    ("billiard", [1.0, np.nan, INF, 0.5, 1], "reflection cap"),
    ("billiard", [1.0, 50, 3.0, 0.5, 1], "ball clip"),
    ("billiard", [1.0, 50, INF, 1.0, 1], "jitter"),
    ("billiard", [1.0, 50, INF, -0.5, 1], "jitter"),
    ("billiard", [1.0, 50, INF, 0.5, 2], "radial"),
    ("billiard", [1.0, 50, INF, 0.5, np.nan], "radial"),
    ("billiard", "abc", "real numbers"),
]


@pytest.mark.parametrize("walk, params, match", BAD, ids=[f"{w}-{p}" for w, p, _ in BAD])
def test_bad_params_are_refused_by_name(K, walk, params, match):
    with pytest.raises(ValueError, match=match) as e:
        Sampler(K, walk=walk, params=params)
    msg = str(e.value)
    assert msg.startswith(f"params of the {walk} walk") and "\n" not in msg


def test_a_ball_radius_beyond_the_diameter_is_refused_before_any_step(K, frame):
    s = Sampler(K, walk="ball", rng=1, params=[1.01 * diameter(frame)])
    with pytest.raises(ValueError, match="params of the ball walk: the radius must be at most K's diameter"):
        s.run(10)
    assert s.chains is None and s.last_info is None
    Sampler(K, walk="ball", rng=1, params=[diameter(frame)], max_steps=10).run(10)  # the bound itself is accepted


def test_a_billiard_length_that_always_exceeds_the_cap_is_refused_before_any_step(K, frame):
    """Legs between reflections are at most K's diameter D, so a trajectory longer than
    (m+1)·D needs more than m reflections: always discarded, the walk never moves."""
    D = diameter(frame)
    s = Sampler(K, rng=1, params=[1e300, 500, INF, 0.5, 1])
    with pytest.raises(ValueError, match="params of the billiard walk: a length of 1e.300 needs more than 500"):
        s.run(10)
    assert s.chains is None
    Sampler(K, rng=1, params=[4 * D, 3, INF, 0.0, 1], max_steps=10).run(10)  # (m+1)·D itself is accepted


# Accepted non-default values (each a Uniform(K)-invariant walk, docs/design.md §3.2).
def _variants(frame):
    ball = default_params("ball", frame)
    bil = default_params("billiard", frame)
    return {
        "ball-3x": ("ball", 3 * ball),
        "ball-half": ("ball", 0.5 * ball),
        "billiard-fixed-length-no-radial": ("billiard", np.array([bil[0] / 2, bil[1], INF, 0.0, 0.0])),
        "billiard-cap-3": ("billiard", np.array([bil[0], 3, INF, 0.9, 1.0])),
    }


@pytest.mark.parametrize("case", ["ball-3x", "ball-half", "billiard-fixed-length-no-radial", "billiard-cap-3"])
def test_accepted_params_sample_uniform_K(K, frame, case):
    """For z ~ Uniform(K), r-dimensional, P(‖z‖_K ≤ t) = t^r (vol(tK) = t^r vol K), so
    u = ‖z‖_K^r ~ U(0, 1): E u = 1/2, Var u = 1/12; E 1[u < 0.2] = 0.2, variance 0.16.
    A certified run has pool ESS ≥ half its records and releases half of them, so the n
    draws carry at least ≈ n/2 effective samples: means are tested within 4.5 standard
    errors computed with n/2. (Hit-and-run in K ∩ 0.001·B₂, the refused attack, moves
    E u to ≈ 0.)"""
    walk, p = _variants(frame)[case]
    if walk == "ball":
        assert p[0] <= diameter(frame)
    z, info = Sampler(K, walk=walk, rng=7, params=p).sample(4000, return_info=True)
    assert info.converged
    u = K.gauge(z) ** K.dim
    neff = len(u) / 2
    assert abs(u.mean() - 0.5) < 4.5 * np.sqrt(1 / 12 / neff), u.mean()
    assert abs(np.mean(u < 0.2) - 0.2) < 4.5 * np.sqrt(0.16 / neff), np.mean(u < 0.2)


def test_the_length_scale_takes_fewer_directions_only_above_rank_256(monkeypatch):
    """radius_count: 64 up to rank 256 (every body below keeps its bits); above, whole groups of 8
    with r·k ≥ 64·256, at least two groups: ⌈16384/(8r)⌉ groups (56 at 299 and 332, 24 at 697, 16
    from 1,024 on); the directions are the first k of the fixed 64; body_radius solves exactly k."""
    from knorm.walks import chains as C

    assert [C.radius_count(r) for r in (1, 40, 256)] == [64, 64, 64]
    assert [C.radius_count(r) for r in (257, 299, 332, 697, 1024, 5000)] == [64, 56, 56, 24, 16, 16]
    np.testing.assert_array_equal(C.radius_directions(300), C.radius_directions(300, 64)[:56])
    seen = []
    real = C.grouped_bases
    monkeypatch.setattr(C, "grouped_bases", lambda frame, Z, workers=None: seen.append(len(Z)) or real(frame, Z, workers))
    monkeypatch.setattr(C, "radius_count", lambda r: 24)
    frame = knorm.SymmetricHull(np.random.default_rng(0).choice([-1.0, 1.0], size=(6, 20))).frame
    C.body_radius(frame)
    assert seen == [24] and C.radius_bases(frame).shape == (24, 6)
