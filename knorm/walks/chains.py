"""Chains of the random walks: state, randomness and parallel execution."""

import os
import time
import weakref
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validate import as_real_array, is_int, short_repr
from . import _kernels as kn
from . import ledger

BALL_RADIUS = 1.5  # tuned at d = 20: acceptance ≈ 0.4, best ESS per second
# Billiard trajectory length: uniform on [(1−a)·L, (1+a)·L], L = BILLIARD_LENGTH·R,
# a = BILLIARD_JITTER. Tuned on random ±1 F (n = 5r, r = 40–80, rounded): pivots per
# step grow linearly in L (≈ 136, 245, 380 per R at r = 40, 60, 80); at the same mean 2R
# the uniform law gives τ ≈ 1.2–1.3 (coordinates) and 1.4–1.6 (|z|²) per step against
# 2.2–2.9 and 2.4–2.8 for Exp(mean 2R), the previous default: ≈ 2× the ESS per pivot,
# and thinning 1 instead of 2 in the sampler. Means of 1.25–1.5R lose more in τ than
# they save in pivots; 2.5–3R cost more pivots for little τ.
# (Measured before the radial refresh of _billiard_params; with it, on the rounding's
# records, coordinates' τ stays 0.85–0.90 (median) at 2R and rises to ≈ 2 at 1.5R.)
# At rank 197 (2-way marginals over (2,3,4,5,6,7), scripts/tune_billiard_length.py) the
# default's warm-up W·pivots/step is the lowest of U[0.75R, 2.25R] (1.30×), U[1.25R, 3.75R]
# (1.50×), U[0.2R, 3.8R] (1.42×) and volesti's U(0, 1)·diameter (≥ 2.1×): design §3.2.
BILLIARD_LENGTH = 2.0
BILLIARD_JITTER = 0.5
BILLIARD_MAX_REFLECTIONS = 10  # per dimension; never reached at r = 40–80 (6–9 reflections per step)
BLOCK = 512  # steps of random inputs drawn at a time per chain


# frame -> (body_radius, the optimal bases it was solved from): the sampling layer's cache, not the frame's state
_RADII = weakref.WeakKeyDictionary()


RADIUS_DIRECTIONS = 64
# body_radius solves its directions in this many fixed groups, each from a copy of one crash basis and
# warm-started along the group, in threads: the same bases, so the same bits, on any number of them
RADIUS_GROUPS = 8
# Up to this rank the median radius takes all RADIUS_DIRECTIONS directions; above it, fewer (radius_count)
RADIUS_FULL_RANK = 256


def radius_count(r):
    """How many directions :func:`body_radius` solves at rank r: ``RADIUS_DIRECTIONS`` up to
    ``RADIUS_FULL_RANK``; above it the fewest whole groups with ``r·k ≥ 64·256`` (at least two).
    The spread of ``1/‖v‖_K`` over random directions shrinks with the rank (its sd/median was
    5.0%, 4.3%, 3.0% and 1.3% at ranks 46, 101, 137 and 299 on marginal workloads, about
    ``∝ 1/√r``), so the median's relative standard error, ``≈ 1.25·sd/√k``, stays at or below
    its value at rank 256 with 64 directions: 56 directions at ranks 299–332, 24 at rank 697 (each
    solve there costs a chain step's pivots)."""
    if r <= RADIUS_FULL_RANK:
        return RADIUS_DIRECTIONS
    groups = -(-RADIUS_DIRECTIONS * RADIUS_FULL_RANK // (RADIUS_GROUPS * r))
    return RADIUS_GROUPS * max(2, groups)


def radius_directions(r, k=None):
    """The ``k`` fixed random unit directions (seed 12345) of :func:`body_radius`, ``(k, r)``
    (default :func:`radius_count`; a smaller k takes the first k of a larger one's)."""
    V = np.random.default_rng(12345).standard_normal((radius_count(r) if k is None else k, r))
    return V / np.linalg.norm(V, axis=1, keepdims=True)


def body_radius(frame, bases=None, workers=None):
    """Median over :func:`radius_count` fixed random unit directions v of ``1/‖v‖_K`` (64 up to
    rank 256): a scale-free size of K.

    Each gauge is solved from its own optimal basis (``bases``: saved ones, e.g. a prepared
    workload's, as warm starts; else :meth:`~knorm.body.hull.Frame.optimal_bases` in
    ``RADIUS_GROUPS`` fixed groups of directions, each from a copy of one crash basis, in threads) by
    :meth:`~knorm.body.hull.Frame.gauges_from_bases`: exact, and the same to the last bit from
    computed or saved bases, so walk parameters never depend on earlier queries, on the threads
    or on where the bases came from. The groups run on ``workers`` as :func:`local_map` takes
    them. Cached per frame. (At rank 197 the 64 solves take 8 CPU s
    per frame, and every frame the rounding walks needs them: serial, they were a sixth of a
    16-core preparation's rounding.)
    """
    if frame not in _RADII:
        V = radius_directions(frame.r)
        # in the oracle's coordinates, mapped here: the threads make no BLAS call (a call from a
        # thread other than the main one escapes the one-BLAS-thread limit, design §3.6, and
        # OpenBLAS's own threads then spin beside the chains: 9% more chain CPU at rank 197)
        Z = frame.to_oracle(V)
        if bases is None:
            bases = grouped_bases(frame, Z, workers)
        g, states = grouped_gauges(frame, Z, bases, workers)
        _RADII[frame] = (float(np.median(1.0 / g)), np.array([st.basis for st in states], dtype=np.int64))
    return _RADII[frame][0]


def _groups(k):
    """Rows ``0 … k−1`` in ``RADIUS_GROUPS`` fixed groups (fewer if k is smaller): a function of k only."""
    return np.array_split(np.arange(k), max(1, min(RADIUS_GROUPS, k)))


def grouped_bases(frame, Z, workers=None):
    """Optimal bases at the rows of Z (the oracle's coordinates, mapped by the caller), ``(k, r)``
    codes: in ``RADIUS_GROUPS`` fixed groups of rows, each solved from a copy of the body's one
    crash basis and warm-started along the group (:meth:`~knorm.body.hull.Frame.optimal_bases`),
    the groups on ``workers`` as :func:`local_map` takes them: the same bases on any number of
    threads."""
    groups = _groups(len(Z))
    start = frame.crash_basis()
    return np.concatenate(local_map(lambda k: frame.optimal_bases(Z[k], start, True), groups, workers))


def grouped_gauges(frame, Z, bases, workers=None):
    """:meth:`~knorm.body.hull.Frame.gauges_from_bases` at the rows of Z (the oracle's coordinates,
    mapped by the caller), each from its own basis, in ``RADIUS_GROUPS`` groups on ``workers``
    threads (:func:`local_map`): ``(gauges, states)``, the same bits on any number of them (no
    solve depends on another)."""
    groups = _groups(len(Z))
    parts = local_map(lambda k: frame.gauges_from_bases(Z[k], bases[k], True), groups, workers)
    return np.concatenate([p[0] for p in parts]), [st for p in parts for st in p[1]]


def radius_bases(frame):
    """The optimal bases at :func:`radius_directions` that :func:`body_radius` solved from (saved by
    a prepared workload: its :func:`body_radius` then costs one refactorisation per direction on
    load); computed with the radius, once per frame."""
    body_radius(frame)
    return _RADII[frame][1]


def _ball_params(frame):
    """Ball walk: radius δ = BALL_RADIUS·R/√r."""
    return np.array([BALL_RADIUS * body_radius(frame) / np.sqrt(frame.r)])


def _billiard_params(frame):
    """Trajectory length uniform on ``[(1−a)L, (1+a)L]``, L = BILLIARD_LENGTH·R,
    a = BILLIARD_JITTER, at most BILLIARD_MAX_REFLECTIONS·r reflections, and the exact
    radial refresh of every step (``[L, 10·r, inf, a, 1]``; see ``_kernels.run_chain``)."""
    return np.array([BILLIARD_LENGTH * body_radius(frame), BILLIARD_MAX_REFLECTIONS * frame.r, np.inf,
                     BILLIARD_JITTER, 1.0])


def _chord_params(frame):
    """Hit-and-run walks need none (``[inf]``: all of K, no ball clip)."""
    return np.array([np.inf])


@dataclass(frozen=True)
class Walk:
    """A registered walk: ``kernel``, its branch in ``knorm.walks._kernels.run_chain``;
    ``params(frame)``, its default parameters; ``summary``, one line for users.

    A new walk is one kernel (a step function and its branch in ``run_chain``) plus one
    entry in :data:`WALKS`; the CLI, the experiments and the docs take the names from here.
    """

    name: str
    kernel: int
    params: Callable[..., np.ndarray]
    summary: str


WALKS = {w.name: w for w in (
    Walk("billiard", kn.BILLIARD, _billiard_params,
         "billiard walk (default): straight trajectories of random length, reflected off K's facets, "
         "and an exact redraw of the radius"),
    Walk("hit_and_run", kn.HIT_AND_RUN, _chord_params, "hit-and-run: uniform point on a random chord"),
    Walk("coordinate", kn.COORDINATE, _chord_params, "coordinate hit-and-run: chords along the frame's axes"),
    Walk("ball", kn.BALL, _ball_params, "ball walk: uniform proposal in a small ball, stays on rejection"),
)}


def sampling_kernels_cached():
    """False if the first MCMC sampling run in this process compiles its kernels (see
    :func:`knorm._jit.kernels_cached`)."""
    from .._jit import kernels_cached
    from ..body import _simplex as sx

    return kernels_cached((sx.crash, sx.refactor_c, sx.gauge_many, sx.move, kn.run_chain))  # the kernels Python calls


def walk_id(walk):
    """The kernel branch of a walk name (ValueError naming ``walk`` if unknown)."""
    if not isinstance(walk, str) or walk not in WALKS:
        raise ValueError(f"walk must be one of {sorted(WALKS)}, got {short_repr(walk)}")
    return WALKS[walk].kernel


def default_params(walk, frame, workers=None):
    """Walk parameters from the body's size R (:func:`body_radius`, its solves on ``workers``, as
    :func:`run_chains` takes them) and dimension r (see each walk's ``params`` in :data:`WALKS`)."""
    walk_id(walk)
    if walk in ("billiard", "ball"):
        body_radius(frame, workers=workers)
    return WALKS[walk].params(frame)


MAX_REFLECTIONS_PER_DIM = 100  # a billiard reflection cap above 100·r (10× the default) is refused: bounded work
PARAMS_LAYOUT = {"ball": "[radius]", "hit_and_run": "[inf]", "coordinate": "[inf]",
                 "billiard": "[length, max_reflections, inf, jitter, radial]"}


def diameter(frame):
    """K's diameter in frame units: ``2·max‖column‖₂`` (K = conv(±columns of F))."""
    return 2.0 * float(np.sqrt(np.max(np.sum(frame.Ft**2, axis=1))))


def check_params(walk, params, r, frame=None):
    """``params`` of ``walk`` (dimension ``r``) as a float64 array, if they keep Uniform(K)
    invariant; else a one-line ValueError naming ``params`` and the walk.

    ball ``[δ]``, ``0 < δ``: a symmetric proposal with rejection (Metropolis) for any δ;
    given the ``frame``, also ``δ ≤`` K's :func:`diameter` (a longer step only adds
    proposals outside K, and far ones overflow). hit_and_run / coordinate ``[inf]``: the
    slot is a ball clip, which samples ``K ∩ ρB₂`` instead of K; only ``inf`` (no clip) is a
    proven no-op. billiard ``[L, m, inf, a, f]``: ``0 < L < inf``, m an integer in
    ``[1, 100·r]``, no clip, jitter ``a ∈ [0, 1)``, radial refresh ``f ∈ {0, 1}``: a length
    law independent of the state, a cap that discards whole trajectories and the exact
    radial move all keep the walk reversible (docs/design.md §3.2); given the ``frame``,
    also ``(1−a)·L ≤ (m+1)·diam K`` (a leg is at most the diameter, so a longer trajectory
    always exceeds the cap and the walk never moves).
    """
    walk_id(walk)
    layout = PARAMS_LAYOUT[walk]
    where = f"params of the {walk} walk"
    p = as_real_array(where, params)
    k = len(layout.split(","))
    if p.dtype.kind == "b" or p.ndim != 1 or len(p) != k:
        raise ValueError(f"{where} must be {layout} ({k} real number{'s' if k > 1 else ''}), got {short_repr(params)}")
    p = p.astype(np.float64)
    if walk != "billiard":
        x = float(p[0])
        if walk == "ball" and not (np.isfinite(x) and x > 0):
            raise ValueError(f"{where}: the radius must be positive and finite, got {short_repr(x)}")
        if walk == "ball" and frame is not None and x > diameter(frame):
            raise ValueError(f"{where}: the radius must be at most K's diameter {diameter(frame):.6g} (frame "
                             f"units), got {short_repr(x)}")
        if walk != "ball" and x != np.inf:
            raise ValueError(f"{where}: params[0] is a ball clip, which changes the target from Uniform(K) to "
                             f"Uniform(K ∩ ball); only inf (no clip) is accepted, got {short_repr(x)}")
        return p
    length, cap, clip, jitter, radial = map(float, p)
    if not (np.isfinite(length) and length > 0):
        raise ValueError(f"{where}: the length params[0] must be positive and finite, got {short_repr(length)}")
    if not (cap == np.floor(cap) and 1 <= cap <= MAX_REFLECTIONS_PER_DIM * r):
        raise ValueError(f"{where}: the reflection cap params[1] must be an integer in [1, "
                         f"{MAX_REFLECTIONS_PER_DIM * r}] (100·r), got {short_repr(cap)}")
    if clip != np.inf:
        raise ValueError(f"{where}: params[2] is a ball clip, which changes the target from Uniform(K) to "
                         f"Uniform(K ∩ ball); only inf (no clip) is accepted, got {short_repr(clip)}")
    if not 0 <= jitter < 1:
        raise ValueError(f"{where}: the jitter params[3] must be in [0, 1), got {short_repr(jitter)}")
    if radial not in (0.0, 1.0):
        raise ValueError(f"{where}: the radial-refresh flag params[4] must be 0 or 1, got {short_repr(radial)}")
    if frame is not None and (1 - jitter) * length > (cap + 1) * diameter(frame):
        raise ValueError(f"{where}: a length of {length!r} needs more than {cap:.0f} reflections on every "
                         f"trajectory (K's diameter is {diameter(frame):.6g} frame units): the walk could never move")
    return p


def start_states(frame, X, workers=None):
    """The oracle state a :class:`Chain` at each row x of X starts with (a crash basis towards x, made
    optimal at x), the rows in threads (:func:`local_map`): the same bits as ``Chain(frame, x)``'s own,
    on any number of them. Each row's oracle image is computed here, one by one as the chain would:
    the threads make no BLAS call (design §3.6). At census size a crash is seconds: a certification's
    64 chains made theirs one after another."""
    X = [np.array(x, dtype=np.float64) for x in X]
    Z = [np.ascontiguousarray(frame.to_oracle(x)) for x in X]

    def one(i):
        return frame.solve(Z[i], frame.crash_basis(Z[i], oracle=True) if np.any(X[i]) else frame.crash_basis(), True)

    return local_map(one, range(len(X)), workers)


def block_inputs(rng, r):
    """One block of per-step random inputs: ``BLOCK`` × r normals, then ``BLOCK`` × 2 uniforms."""
    return rng.standard_normal((BLOCK, r)), rng.random((BLOCK, 2))


class Chain:
    """One chain on a :class:`knorm.body.hull.Frame`: point ``x`` and its oracle state.

    Random inputs are drawn in fixed blocks of ``BLOCK`` steps (r normals and two
    uniforms per step, whatever the walk) and buffered, so a chain's trajectory depends
    only on its generator and its step count, never on how the steps are split into
    calls. :meth:`state_dict` / :meth:`load_state_dict` capture everything needed to
    continue bit for bit (checkpoints).
    """

    def __init__(self, frame, x0, rng, state=None):
        self.frame = frame
        self.x = np.array(x0, dtype=np.float64)
        if state is None:
            state = frame.crash_basis(direction=self.x if np.any(self.x) else None)
            frame.solve(self.x, state)
        self.state = state  # given: optimal at x already (e.g. carried over from a frame of the same body)
        self.rng = rng
        self.stats = np.zeros(3, np.int64)
        self._normals = np.zeros((BLOCK, frame.r))  # zeros, not garbage: checkpoint fingerprints hash them
        self._unif = np.zeros((BLOCK, 2))
        self._pos = BLOCK
        self._block_rng = None  # the generator's state before it drew the current block (None: not known)
        self.record_gauges = None  # the last run's records' gauges (billiard), else None

    @property
    def pivots(self):
        return int(self.state.ctr[1])

    def run(self, walk, steps, thin, params):
        """Advance ``steps`` steps (a multiple of ``thin``); return the (steps//thin, r) record.

        The billiard walk also leaves each record's exact gauge in :attr:`record_gauges` (its oracle
        state is optimal at every step's end point: ``‖x‖_K = λ·(T x)``, no pivot); other walks
        leave None there."""
        wid = walk_id(walk)
        out = np.empty((steps // thin, self.frame.r))
        gout = np.empty(steps // thin if walk == "billiard" else 0)
        params = np.asarray(params, np.float64)
        done = 0
        while done < steps:
            if self._pos == BLOCK:
                self._block_rng = self.rng.bit_generator.state
                self._normals, self._unif = block_inputs(self.rng, self.frame.r)
                self._pos = 0
            k = min(BLOCK - self._pos, steps - done)
            sl = slice(self._pos, self._pos + k)
            status = kn.run_chain(
                wid, self.frame.A, self.frame.fmax, self.frame.T, *self.state.args(), self.x, self._normals[sl], self._unif[sl],
                thin, done, params, self.frame.max_pivots, out, self.stats, gout,
            )
            self.frame.check(status, f"a {walk} step")
            self._pos += k
            done += k
        self.record_gauges = gout if gout.shape[0] == out.shape[0] else None
        return out

    @classmethod
    def from_state(cls, frame, state):
        """A chain on ``frame`` continuing exactly from ``state`` (see :meth:`state_dict`)."""
        chain = cls.__new__(cls)
        chain.frame = frame
        r, n = frame.r, frame.n
        from ..body.hull import OracleState

        chain.state = OracleState(np.empty(r, np.int64), np.empty((r, r)), np.empty(r), np.empty(n),
                                  np.zeros(4, np.int64))
        chain.stats = np.zeros(3, np.int64)
        chain.record_gauges = None
        chain.rng = _generator(state["rng"])
        chain.load_state_dict(state)
        return chain

    def state_dict(self):
        """Arrays and generator state that determine the chain's future exactly."""
        basis, Binv, lam, g, ctr = self.state.args()
        return {"x": self.x.copy(), "basis": basis.copy(), "Binv": Binv.copy(), "lam": lam.copy(), "g": g.copy(),
                "ctr": ctr.copy(), "stats": self.stats.copy(), "normals": self._normals.copy(),
                "unif": self._unif.copy(), "pos": self._pos, "rng": self.rng.bit_generator.state}

    def compact_state(self):
        """:meth:`state_dict` for shipping to another process: the buffered block of random inputs
        (``BLOCK`` × (r + 2) numbers, most of the state) replaced by the generator's state before it
        drew that block (``block_rng``), from which :meth:`load_state_dict` draws it again, the same
        bits. The whole state where that is not known (a chain loaded from a checkpoint before its
        next block)."""
        d = self.state_dict()
        if self._block_rng is not None:
            del d["normals"], d["unif"]
            d["block_rng"] = self._block_rng
        return d

    def load_state_dict(self, d):
        """Continue from ``d``: a :meth:`state_dict` or a :meth:`compact_state`."""
        self.x = np.array(d["x"], dtype=np.float64)
        for name, arr in zip(("basis", "Binv", "lam", "g", "ctr"), self.state.args()):
            arr[...] = d[name]
        self.stats[...] = d["stats"]
        self._block_rng = d.get("block_rng")
        if "normals" in d:
            self._normals = np.array(d["normals"], dtype=np.float64)
            self._unif = np.array(d["unif"], dtype=np.float64)
        else:  # compact: the block drawn again from the generator's state before it
            self._normals, self._unif = block_inputs(_generator(self._block_rng), self.frame.r)
        self._pos = int(d["pos"])
        self.rng.bit_generator.state = d["rng"]


def _generator(state):
    """A generator at the bit-generator ``state`` (a dict of ``bit_generator.state``)."""
    gen = np.random.Generator(getattr(np.random, state["bit_generator"])())
    gen.bit_generator.state = state
    return gen


def check_workers(workers):
    """``workers`` as given, if valid: None, a positive int (threads), a
    :class:`concurrent.futures.Executor`, or an object with a ``run_chains`` method (the
    protocol of knorm 0.x, kept for compatibility)."""
    if workers is None or isinstance(workers, Executor) or hasattr(workers, "run_chains"):
        return workers
    if is_int(workers) and workers >= 1:
        return int(workers)
    raise ValueError("workers must be None, a positive integer or a concurrent.futures.Executor, got "
                     f"{short_repr(workers)}")


def default_workers():
    """Threads knorm starts when ``workers`` is None: the CPUs this process may run on
    (``os.sched_getaffinity`` where the platform has it, e.g. under ``taskset`` or a job
    scheduler's cpuset; else ``os.cpu_count()``), at most ``NUMBA_NUM_THREADS`` when that
    environment variable is set. Read at each call, so a change of either takes effect."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform (macOS, Windows)
        cpus = os.cpu_count() or 1
    env = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"the environment variable NUMBA_NUM_THREADS must be a positive integer, got {env!r}")
        cpus = min(cpus, int(env))
    return max(1, cpus)


def n_workers(workers=None):
    """Threads for ``workers`` None (:func:`default_workers`) or an int."""
    return default_workers() if workers is None else max(1, int(workers))


def local_map(fn, items, workers=None):
    """``[fn(x) for x in items]`` on threads of this process: at most ``workers`` of them (None: one
    per CPU, :func:`default_workers`; an int), never more than there are items; 1, an executor or a
    0.x ``run_chains`` object run them in the calling thread (work that is not a chain's run stays
    here). ``fn`` should call numba kernels only: a BLAS call from a thread other than the main one
    escapes the one-BLAS-thread limit (design §3.6)."""
    items = list(items)
    workers = check_workers(workers)
    w = min(n_workers(workers), len(items)) if workers is None or is_int(workers) else 1
    if w <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=w) as ex:
        return list(ex.map(fn, items))


def advance_chain(frame, state, walk, steps, thin, params):
    """Worker side of an out-of-process executor: rebuild a chain from its state
    (:meth:`Chain.state_dict` or :meth:`Chain.compact_state`), advance it, return ``(record, new
    state)`` (compact if ``state`` was; with the records' gauges, :attr:`Chain.record_gauges`, under
    ``"record_gauges"``, which loading a state ignores)."""
    chain = Chain.from_state(frame, state)
    rec = chain.run(walk, steps, thin, params)
    out = chain.compact_state() if "block_rng" in state else chain.state_dict()
    out["record_gauges"] = chain.record_gauges
    return rec, out


def advance_chains(frame, states, walk, steps, thin, params):
    """:func:`advance_chain` for each of ``states`` in turn (one task of an executor with fewer slots
    than chains: :func:`run_chains`); returns the list of ``(record, new state)``."""
    return [advance_chain(frame, state, walk, steps, thin, params) for state in states]


def run_chains(chains, walk, steps, thin, params, workers=None):
    """Run every chain ``steps`` steps in parallel; returns an array (chains, steps // thin, r).

    ``workers``: None (:func:`default_workers`: one thread per CPU the process may use), an
    int (at most that many threads; 1 runs the chains in the calling thread; the kernels
    release the GIL), or any :class:`concurrent.futures.Executor`. A
    :class:`~concurrent.futures.ThreadPoolExecutor` advances the chains in place; any
    other executor (a :class:`~concurrent.futures.ProcessPoolExecutor`, Dask's
    ``client.get_executor()``, :class:`knorm.distributed.DaskExecutor`) is sent each
    chain's exact state (:meth:`Chain.compact_state`) and the frame (:func:`advance_chain`)
    and the chains load the states that come back; an executor with a ``slots`` attribute
    (:class:`~knorm.distributed.DaskExecutor`: the cluster's threads) fewer than the chains
    gets that many tasks, each a run of consecutive chains (:func:`advance_chains`), so a
    batch costs a few tasks' latency, not one per chain. The states are exact and every chain draws its randomness
    from its own generator, so seeded results never depend on ``workers``. Each call is a batch of
    the active :class:`~knorm.walks.ledger.Ledger`, if any (a prepare's account of its stages).
    """
    workers = check_workers(workers)
    led = ledger.active()
    if led is None:
        return _run_chains(chains, walk, steps, thin, params, workers)
    t, c = time.perf_counter(), time.process_time()
    try:
        return _run_chains(chains, walk, steps, thin, params, workers)
    finally:
        local = workers is None or is_int(workers) or isinstance(workers, ThreadPoolExecutor)
        led.batch(len(chains), int(steps), time.perf_counter() - t, time.process_time() - c, local)


def _run_chains(chains, walk, steps, thin, params, workers):
    params = np.asarray(params, np.float64)
    if isinstance(workers, ThreadPoolExecutor):
        return np.stack(list(workers.map(lambda c: c.run(walk, steps, thin, params), chains)))
    if isinstance(workers, Executor):
        slots = getattr(workers, "slots", None)
        if is_int(slots) and 1 <= slots < len(chains) and all(c.frame is chains[0].frame for c in chains):
            groups = np.array_split(np.arange(len(chains)), slots)
            futures = [workers.submit(advance_chains, chains[g[0]].frame, [chains[i].compact_state() for i in g],
                                      walk, steps, thin, params) for g in groups]
            results = [out for f in futures for out in f.result()]
        else:
            futures = [workers.submit(advance_chain, c.frame, c.compact_state(), walk, steps, thin, params)
                       for c in chains]
            results = [f.result() for f in futures]
        for c, (_, state) in zip(chains, results):
            c.load_state_dict(state)
            c.record_gauges = state.get("record_gauges")
        return np.stack([rec for rec, _ in results])
    if workers is not None and not is_int(workers):  # the 0.x protocol: an object with run_chains
        for c in chains:
            c.record_gauges = None
        return workers.run_chains(chains, walk, steps, thin, params)
    return np.stack(local_map(lambda c: c.run(walk, steps, thin, params), chains, workers))
