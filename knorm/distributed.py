"""Run chain batches on a Dask distributed cluster (``pip install 'knorm[dask]'``).

Each batch ships every chain's complete state (:meth:`Chain.state_dict`) to a worker,
which rebuilds the chain, advances it and returns the record and the new state. The
states are exact, so a seeded run gives the same draws on a cluster as on one machine,
and the usual diagnostics are computed on the merged records.
"""

import numpy as np

from .walks.chains import Chain


def advance_chain(frame, state, walk, steps, thin, params):
    """Worker side: rebuild a chain from its state, advance it, return (record, new state)."""
    chain = Chain.from_state(frame, state)
    rec = chain.run(walk, steps, thin, params)
    return rec, chain.state_dict()


class DaskExecutor:
    """Chains on a Dask cluster: ``DaskExecutor("tcp://host:8786")`` or ``DaskExecutor(client)``."""

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

    def close(self):
        """Close the client if this executor opened it."""
        if self._own:
            self.client.close()

    def _frame_future(self, frame):
        key = id(frame)
        if key not in self._scattered:
            self._scattered[key] = (frame, self.client.scatter(frame, broadcast=True))
        return self._scattered[key][1]

    def run_chains(self, chains, walk, steps, thin, params):
        ft = self._frame_future(chains[0].frame)
        futures = [self.client.submit(advance_chain, ft, c.state_dict(), walk, steps, thin, np.asarray(params),
                                      pure=False) for c in chains]
        results = self.client.gather(futures)
        for c, (_, state) in zip(chains, results):
            c.load_state_dict(state)
        return np.stack([rec for rec, _ in results])
