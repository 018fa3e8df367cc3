"""Run chain batches on a Dask distributed cluster (``pip install 'knorm[dask]'``).

Any :class:`concurrent.futures.Executor` runs chains (``workers=`` of
:class:`~knorm.walks.sampler.Sampler`, :func:`~knorm.sample_uniform` and the
mechanisms), Dask's own ``client.get_executor()`` included. :class:`DaskExecutor` is
that executor plus two conveniences: it connects to a scheduler address (and closes
the client it opened), and it broadcasts each frame to the workers once instead of
sending it with every batch.

Each batch ships every chain's complete state (:meth:`Chain.compact_state`: its buffered
block of random inputs as the generator state that draws it again) to a worker, which
rebuilds the chain, advances it and returns the record and the new state
(:func:`~knorm.walks.chains.advance_chain`). The states are exact, so a seeded run
gives the same draws on a cluster as on one machine; a batch is a pure function of its
input, so Dask can run again the batch of a worker that died, with the same result.
"""

from concurrent.futures import Executor

from .body.hull import Frame
from .walks.chains import advance_chain, run_chains

__all__ = ["DaskExecutor", "advance_chain"]


class DaskExecutor(Executor):
    """A :class:`concurrent.futures.Executor` on a Dask cluster:
    ``DaskExecutor("tcp://host:8786")`` or ``DaskExecutor(client)``.

    ``submit`` is ``client.submit(..., pure=False)`` with every
    :class:`~knorm.body.hull.Frame` argument replaced by a future of it scattered
    (broadcast) once. :meth:`shutdown` (or leaving a ``with`` block) closes the
    client if this executor opened it.
    """

    def __init__(self, address_or_client, timeout=10):
        try:
            from dask.distributed import Client
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError("the Dask backend needs dask.distributed: pip install 'knorm[dask]'") from exc
        if isinstance(address_or_client, Client):
            self.client, self._own = address_or_client, False
        else:
            self.client, self._own = Client(address_or_client, timeout=timeout), True
        self._scattered = {}

    @property
    def slots(self):
        """The cluster's threads now: :func:`~knorm.walks.chains.run_chains` sends a batch of more
        chains than that as this many tasks, each a run of consecutive chains."""
        return max(1, sum(self.client.nthreads().values()))

    def _frame_future(self, frame):
        """The frame's scattered future, sent again if the cluster lost it (scattered data has no
        lineage: gone with its workers, or forgotten in a restart). A random key (``hash=False``):
        a content-hashed key that another executor released just before is a known race in which
        the scheduler forgets the new copy (dask/distributed#3703, #8576)."""
        key = id(frame)
        hit = self._scattered.get(key)  # the entry keeps the frame alive, so its id is never reused
        if hit is None or hit[1].status != "finished":
            self._scattered[key] = (frame, self.client.scatter(frame, broadcast=True, hash=False))
        return self._scattered[key][1]

    def _submit_now(self, fn, args, kwargs):
        args = [self._frame_future(a) if isinstance(a, Frame) else a for a in args]
        return self.client.submit(fn, *args, pure=False, **kwargs)

    def submit(self, fn, /, *args, **kwargs):
        """``client.submit(fn, *args, pure=False)``, as a future whose ``result()`` submits the call
        again when the cluster cancelled it (:class:`_Resubmitting`)."""
        return _Resubmitting(self, fn, args, kwargs)

    def shutdown(self, wait=True, *, cancel_futures=False):
        self._scattered = {}
        if self._own:
            self.client.close()

    def close(self):
        """Close the client if this executor opened it (same as :meth:`shutdown`)."""
        self.shutdown()

    def run_chains(self, chains, walk, steps, thin, params):
        """``run_chains(chains, …, workers=self)`` (the knorm 0.x protocol, kept for compatibility)."""
        return run_chains(chains, walk, steps, thin, params, workers=self)


class _Resubmitting:
    """A Dask future that the cluster may cancel, submitted again up to ``RESUBMITS`` times.

    A loaded or shrinking cluster can drop a task it had accepted: "cancelled for reason: already
    forgotten" when a worker died holding the only copy of a dependency, or the scheduler
    released a key under a race. A batch is a pure function of its inputs (exact chain states
    and the frame, scattered again if lost), so running it again returns the same bits; only a
    cancel asked for here (``cancel()``) is final. ``result``/``exception``/``cancel``/``done``
    behave as :class:`concurrent.futures.Future`'s (a ``timeout`` bounds the whole wait).
    """

    RESUBMITS = 3

    def __init__(self, executor, fn, args, kwargs):
        self._executor, self._call = executor, (fn, args, kwargs)
        self._cancelled = False
        self._future = executor._submit_now(fn, args, kwargs)

    def result(self, timeout=None):
        """The call's result, waiting at most ``timeout`` seconds in all (resubmissions included)."""
        import time
        from concurrent.futures import CancelledError

        end = None if timeout is None else time.monotonic() + timeout
        for attempt in range(self.RESUBMITS + 1):
            try:
                left = None if end is None else max(0.0, end - time.monotonic())
                return self._future.result(timeout=left)
            except CancelledError:  # distributed's FutureCancelledError is one
                if self._cancelled or attempt == self.RESUBMITS:
                    raise
                self._future = self._executor._submit_now(*self._call)

    def exception(self, timeout=None):
        """The call's exception (None if it returned), as :meth:`result` waits for it."""
        from concurrent.futures import CancelledError

        try:
            self.result(timeout)
        except CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the call's own error, returned as concurrent.futures does
            return exc
        return None

    def cancel(self):
        """Cancel the call unless it has finished (True when it was cancelled, as concurrent.futures)."""
        if self._future.done():
            return False
        self._future.cancel()
        self._cancelled = True
        return True

    def cancelled(self):
        return self._cancelled

    def done(self):
        return self._cancelled or self._future.done()

    def running(self):
        return not self.done()
