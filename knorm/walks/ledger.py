"""Where a prepare's seconds go: the chain batches and the work between them, stage by stage.

A :class:`Ledger`, active in a ``with`` block (this thread only), records every
:func:`~knorm.walks.chains.run_chains` batch made in the block: its chains ``c``, steps per
chain ``s``, wall seconds and process CPU seconds, under the stage last opened with
:func:`mark` (:func:`~knorm.walks.prepared.prepare` opens its stages; without an active ledger
:func:`mark` does nothing). Per stage:

- ``serial_s``: its wall seconds outside its batches (building the body, the covariance updates,
  the radius and end-point solves, the pool's diagnostics, the file): the work more chains do
  not spread (some of it runs in fixed groups on threads: measured here, an upper bound on more
  cores);
- ``steps``: the steps each chain ran in its batches, summed: the stage's critical path in chain
  steps (every chain of a batch runs its ``s`` steps);
- ``chain_cpu_s``: the batches' CPU seconds (chains on local threads only; a cluster's workers
  spend theirs elsewhere, and then there is no projection).

The projection to ``p`` cores (not a measurement): each batch takes its CPU seconds times
``⌈c/p⌉/c`` (``c`` equal chains, at most ``p`` at once), and the serial seconds as measured:
``T(p) = Σ_batches cpu·⌈c/p⌉/c + Σ serial_s``: equal for every ``p`` at or above the most chains
of a batch (``c`` chains keep at most ``c`` cores busy), which the summary's line says.

Nothing here depends on data: a prepare is a function of F and public seeds, and these are its
counts and times.
"""

from __future__ import annotations

import contextvars
import math
import time
from dataclasses import dataclass, field
from typing import Any

PROJECT_CORES = (8, 16, 64)

_ACTIVE: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar("knorm_ledger", default=None)


@dataclass
class Stage:
    """One stage's record (see the module docstring): its wall and CPU seconds, and its batches
    ``(chains, steps per chain, wall s, CPU s)`` (the CPU 0 for a batch on a cluster), from which
    the rest follows."""

    name: str
    wall_s: float = 0.0
    cpu_s: float = 0.0
    batches: list[tuple[int, int, float, float]] = field(default_factory=list)

    @property
    def steps(self) -> int:
        """Steps each chain ran: the stage's critical path."""
        return sum(s for _, s, _, _ in self.batches)

    @property
    def chain_cpu_s(self) -> float:
        return sum(cpu for _, _, _, cpu in self.batches)

    @property
    def serial_s(self) -> float:
        return max(0.0, self.wall_s - sum(wall for _, _, wall, _ in self.batches))

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.name, "wall_s": round(self.wall_s, 3), "serial_s": round(self.serial_s, 3),
                "serial_cpu_s": round(max(0.0, self.cpu_s - self.chain_cpu_s), 3),
                "chain_cpu_s": round(self.chain_cpu_s, 3), "steps_per_chain": self.steps,
                "chain_steps": sum(c * s for c, s, _, _ in self.batches)}


class Ledger:
    """Stages of one run, in the order they opened: ``with Ledger() as led: …; led.summary()``."""

    def __init__(self, clock: Any = time.perf_counter, cpu_clock: Any = time.process_time) -> None:
        self.clock, self.cpu_clock = clock, cpu_clock
        self.stages: list[Stage] = []
        self.remote = False  # a batch ran on another executor (a cluster): its CPU is not here
        self._open: Stage | None = None
        self._t = self._c = 0.0
        self._token: Any = None

    def __enter__(self) -> Ledger:
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()
        _ACTIVE.reset(self._token)

    def mark(self, name: str) -> None:
        """Close the open stage and open ``name`` (stages of one name add up)."""
        self._close()
        self._open = next((s for s in self.stages if s.name == name), None) or Stage(name)
        if self._open not in self.stages:
            self.stages.append(self._open)
        self._t, self._c = self.clock(), self.cpu_clock()

    def _close(self) -> None:
        if self._open is not None:
            self._open.wall_s += self.clock() - self._t
            self._open.cpu_s += self.cpu_clock() - self._c
            self._open = None

    def batch(self, chains: int, steps: int, wall: float, cpu: float, local: bool) -> None:
        """A :func:`~knorm.walks.chains.run_chains` batch: ``chains`` chains of ``steps`` steps."""
        if self._open is None:
            self.mark("other")
        assert self._open is not None
        self._open.batches.append((chains, steps, wall, cpu if local else 0.0))
        self.remote |= not local

    def projection(self, cores: int) -> float | None:
        """Projected seconds on ``cores`` cores (module docstring); None if a batch ran remotely."""
        if self.remote:
            return None
        return sum(cpu * math.ceil(c / cores) / c for s in self.stages for c, _, _, cpu in s.batches if c) + \
            sum(s.serial_s for s in self.stages)

    def summary(self) -> dict[str, Any]:
        """The stages (:meth:`Stage.as_dict`) and totals: wall, CPU, serial seconds and their share of the
        CPU, the longest chain's steps, the projection to ``PROJECT_CORES``; of the stages closed so far
        (all of them once the ``with`` block is left)."""
        wall = sum(s.wall_s for s in self.stages)
        cpu = sum(s.cpu_s for s in self.stages)
        serial = sum(s.serial_s for s in self.stages)
        proj = {str(p): None if (v := self.projection(p)) is None else round(v, 1) for p in PROJECT_CORES}
        return {"stages": [s.as_dict() for s in self.stages], "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                "serial_s": round(serial, 3), "serial_share_of_cpu": round(serial / cpu, 4) if cpu > 0 else None,
                "longest_chain_steps": sum(s.steps for s in self.stages), "projected_s": proj,
                "chains": max((c for s in self.stages for c, _, _, _ in s.batches), default=0)}



def summary_lines(sm: dict[str, Any]) -> list[str]:
    """A :meth:`Ledger.summary` as progress lines: one per stage, then the totals and the projection."""
    out = []
    for s in sm["stages"]:
        steps = f", {s['steps_per_chain']} steps per chain" if s["steps_per_chain"] else ""
        out.append(f"stage {s['stage']}: {s['wall_s']:.1f} s, serial {s['serial_s']:.1f} s{steps}")
    share = sm["serial_share_of_cpu"]
    out.append(f"serial {sm['serial_s']:.1f} s in all" + (f" ({100 * share:.1f}% of {sm['cpu_s']:.0f} CPU s)"
                                                         if share is not None else "")
               + f"; the longest chain ran {sm['longest_chain_steps']} steps")
    if sm["projected_s"][str(PROJECT_CORES[0])] is not None:
        out.append("projected (chain CPU over the cores, plus the serial seconds; not a measurement): "
                   + projection_text(sm["projected_s"], sm.get("chains")))
    return out


def projection_text(projected: dict[str, float], chains: int | None) -> str:
    """The projection's seconds per core count; where the chains are no more than the cores the
    seconds stop falling (``c`` chains keep at most ``c`` cores busy), said once, with why."""
    pairs = [(int(p), v) for p, v in projected.items()]
    if chains is None:
        return ", ".join(f"{v:.3g} s on {p} cores" for p, v in pairs)
    fewer = [(p, v) for p, v in pairs if p < chains]
    rest = [(p, v) for p, v in pairs if p >= chains]
    parts = [f"{v:.3g} s on {p} cores" for p, v in fewer]
    if len(rest) == 1:
        parts.append(f"{rest[0][1]:.3g} s on {rest[0][0]} cores")
    elif rest:  # equal: the chains are no more than the fewest of these cores
        why = "no chain work" if chains == 0 else \
            f"{chains} chain{'s' * (chains != 1)}: more cores do not help; --chains N"
        parts.append(f"{rest[0][1]:.3g} s on {rest[0][0]} or more cores ({why})")
    return ", ".join(parts)


def active() -> Ledger | None:
    """This thread's active :class:`Ledger`, or None."""
    return _ACTIVE.get()


def mark(name: str) -> None:
    """Open stage ``name`` in the active ledger (nothing without one)."""
    led = _ACTIVE.get()
    if led is not None:
        led.mark(name)
