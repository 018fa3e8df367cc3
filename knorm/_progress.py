"""Progress of a release, stage by stage: the rounding of K, the chains' warm-up, the pool of draws.

A :class:`StageProgress` is a sampler's ``progress`` (``sampler_options={"progress": True}`` on a
mechanism makes one; the command line's bar is one): the sampler calls ``rounding(it, total)``
while it rounds K (iterations, at most ``total``), ``warmup(done, total)`` during the warm-up
(steps per chain), ``pilot(done, total)`` during a thinning-1 pilot (steps per chain),
``progress(done, target)`` with the pooled records, and ``certify(done, target)`` with the
records of a workload's one certification. Each stage is one tqdm
bar with its count and one estimate of the time left (from this stage's own rate; none of tqdm's
own), a rounding's in whole iterations ("iteration 2 of at most 8") while its bar moves within
each; in a log, a stage that will take more than ``SLOW`` seconds says so once, with roughly how
long. With ``plain=True`` (a log, not a terminal) each
stage is lines instead: one as it starts (its total), its count at most every ``PLAIN_EVERY``
seconds while it runs, and one as it ends (its count and time).
Nothing shown depends on data: only counts of iterations, steps and draws, and times.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, TextIO

SLOW = 5.0  # seconds: a stage expected to take longer says roughly how long, once
SETTLE = 1.0  # seconds of a stage before its rate is trusted for that estimate
PLAIN_EVERY = 60.0  # seconds: in plain mode, an open stage writes its count at most this often
# iterations a rounding usually takes (docs/benchmarks.md: 1 or 2 on marginals and ±1; the first, with its
# warm-up, the dearer): an estimate for 1.5 is within 1.5x of either
TYPICAL_ROUNDING = 1.5
MIN_BAR = 10  # columns a bar keeps on a narrow terminal (its description and text are cut first)
MIN_DESC = 16  # characters of a bar's description kept before its text is cut further
MIN_INFO = 24  # characters of a bar's text (its count first) kept before its description is cut
TICK = 1.0  # seconds between redraws of an open bar (its elapsed time moves between the sampler's reports)

STAGES = {"rounding": ("rounding K", "iteration"), "warmup": ("warm-up", "step"),
          "pilot": ("thinning-1 pilot (kept as records if it mixes)", "step"), "pool": ("draws", "draw"),
          "certify": ("certifying the walk (once per workload)", "record"),
          "certify_warmup": ("certification's warm-up (20τ, the rounding's τ)", "step"), "release": ("draws", "draw")}


def _count(k: int, unit: str) -> str:
    return f"{k} {unit}{'s' * (k != 1)}"


def rough_time(seconds: float) -> str:
    """``seconds`` as a rough duration: "about 40 s", "about 3 min", "about 1.5 h"."""
    if seconds < 90:
        return f"about {max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


class StageProgress:
    """tqdm bars for the stages of a sampler run (see the module docstring).

    ``enabled``: False shows nothing (the calls still cost nothing); ``desc``: the bars' prefix;
    ``file``: where they go (default: stderr at the time of each bar); ``clock``: seconds (for tests);
    ``plain``: no bars, a line as each stage starts and as it ends, and its count at most every
    ``PLAIN_EVERY`` seconds between (for a log file or a pipe); ``width``: the bars' columns (default:
    the terminal's, followed as it changes). On a narrow terminal a bar's description, then the tail
    of its text, are cut (ending "…") so that the bar keeps ``MIN_BAR`` columns.
    """

    def __init__(self, enabled: bool = True, desc: str = "knorm", file: TextIO | None = None,
                 clock: Callable[[], float] = time.perf_counter, plain: bool = False,
                 width: int | None = None) -> None:
        self.enabled, self.desc, self.file, self.clock = bool(enabled), desc, file, clock
        self.width = width  # the bars' columns; None: the terminal's, as it changes
        self.plain = bool(plain)
        self._open = False  # plain: a stage has started and not ended
        self._line_at = 0.0  # plain: when the open stage last wrote a line
        self.bar: Any = None
        self.stage: str | None = None
        self.runs = 0  # pool stages started (one per sampler run)
        self._t0 = 0.0
        self._said = False  # this stage's time was announced
        self._done = False  # this stage reached its total (its bar is closed)
        self._total = self._last = 0
        self._first = 0  # the count this stage opened with
        self._w = 0  # a release's W (its claim's), for its bar's label
        self._ticker: threading.Thread | None = None
        self._lock = threading.Lock()  # the ticker's start and end against a new bar

    def __call__(self, done: int, target: int) -> None:
        """The pool: ``done`` records of ``target``."""
        self._update("pool", done, target)

    def rounding(self, it: int, total: int) -> None:
        """The rounding of K: ``it`` iterations done of at most ``total``; ``rounding(k, k)`` after fewer
        than ``total``: it stopped after ``k`` iterations (its bar closes at ``k``, as its summary says)."""
        self._update("rounding", it, total)

    def warmup(self, done: int, total: int) -> None:
        """The warm-up: ``done`` steps per chain of ``total``."""
        self._update("warmup", done, total)

    def pilot(self, done: int, total: int) -> None:
        """A run's thinning-1 pilot after the warm-up (:meth:`~knorm.walks.sampler.Sampler._pilot`):
        ``done`` steps per chain of ``total``."""
        self._update("pilot", done, total)

    def certify(self, done: int, total: int) -> None:
        """The certification's pool (once per workload: :func:`knorm.walks.certify.certify`): ``done``
        records of ``total``."""
        self._update("certify", done, total)

    def certify_warmup(self, done: int, total: int) -> None:
        """The certification's warm-up: ``done`` steps per chain of ``total`` (⌈20τ⌉ at the rounding's
        τ; a release's W is the certificate's, from the certified pool's bound on τ)."""
        self._update("certify_warmup", done, total)

    def release(self, done: int, total: int, warmup: int) -> None:
        """A release from a certified body (:class:`~knorm.walks.certify.StationarySampler`): ``done``
        draws of ``total``, each at least ``warmup`` (the claim's W) steps after its chain's
        public start or its previous draw (there is no other warm-up)."""
        self._w = int(warmup)
        self._update("release", done, total)

    def note(self, text: str) -> None:
        """One line of its own (a whole prepare's up-front estimate), above any bar."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(f"{self.desc}: {text}", file=self.file or sys.stderr)
        else:
            self._line(text)

    def close(self) -> None:
        """Close the open bar (the stage is over)."""
        if self._open:
            self._open = False
            label, unit = self._label()
            # a rounding that stopped early has its total set to the iterations it ran (as its summary says)
            count = f" {_count(self._total, unit)}" if self.stage == "rounding" and self._last >= self._total else \
                f" {self._last:g} of {self._total} {unit}s"
            self._line(f"{label}: {'done' if self._last >= self._total else 'stopped'}{count and ','}{count} in "
                       f"{self.clock() - self._t0:.1f} s")
        bar, self.bar = self.bar, None
        if bar is not None:
            bar.close()

    def _label(self) -> tuple[str, str]:
        label, unit = STAGES[self.stage or "pool"]
        if self.stage == "release":
            return (f"{label} (run {self.runs}, each W = {self._w} steps after its chain's last)", unit)
        return (label + (f" (run {self.runs})" if self.stage == "pool" else ""), unit)

    def _line(self, text: str) -> None:
        self._line_at = self.clock()
        out = self.file or sys.stderr
        out.write(f"{self.desc}: {text}\n")
        out.flush()

    def _tick(self) -> None:
        """Redraw the open bar every TICK seconds, so that its elapsed time moves while the sampler
        works between two reports (a pool chunk, a rounding iteration); ends when no bar is open."""
        while True:
            time.sleep(TICK)
            with self._lock:
                bar = self.bar
                if bar is None:
                    self._ticker = None
                    return
            try:
                bar.refresh()
            except Exception:  # a bar closed meanwhile: the next loop sees it gone
                pass

    def _update(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if (stage == self.stage == "rounding" and not self._done and done == total < self._total
                and done >= self._last):  # a rounding that stopped before its bound: ``total`` is what ran
            self._total = total
            if self.bar is not None:
                self.bar.total = total
        new = stage != self.stage or total != self._total or done < self._last
        if not new and self._done:  # a finished stage reported again (a pool extended past its target)
            self._last = done
            return
        if new:
            # the same stage with a larger total from where it was: a public pool extended past its
            # target (a certification's: its sampler says so; a pool of noise never does)
            more = stage == self.stage != "release" and total > self._total and done >= self._last > 0
            self._start(stage, total, done if more else None)
            self._first = done
        self._last = done
        if self.plain:
            if done >= total:
                self.close()
                self._done = True
            elif (now := self.clock()) - self._line_at >= PLAIN_EVERY:
                label, unit = self._label()
                if self.stage == "rounding":  # it reports shares of an iteration: whole ones are said
                    self._line(f"{label}: {int(done)} of at most {total} {unit}s done in {now - self._t0:.0f} s")
                else:
                    self._line(f"{label}: {done:g} of {total} {unit}s in {now - self._t0:.0f} s")
            return
        self.bar.info = self._postfix(done, total)
        self.bar.update(done - self.bar.n)
        self.bar.refresh()  # the new count and estimate now (reports are seconds apart, tqdm's own pacing aside)
        if done >= total:
            self.close()
            self._done = True

    def _start(self, stage: str, total: int, more: int | None = None) -> None:
        """Open a stage's bar (or its first line); ``more``: the stage goes on past its total, from
        ``more`` done (a pool extended: the same stage and run, a new total)."""
        self.close()
        if stage in ("pool", "release") and more is None:
            self.runs += 1
        self.stage, self._total, self._t0, self._said, self._done = stage, total, self.clock(), False, False
        label, unit = self._label()
        if self.plain:
            self._open = True
            self._line(f"{label}: {'at most ' if stage == 'rounding' else ''}{total} {unit}s" if more is None else
                       f"{label}: more {unit}s, {total} in all ({more:g} so far)")
            return
        with self._lock:
            # one estimate per bar: the postfix's (this stage's rate; a rounding's for 1-2 iterations),
            # never tqdm's own remaining time, which for a rounding would count every allowed iteration
            self.bar = _Bar(total=total, initial=more or 0, desc=f"{self.desc}: {label}" + (" (more)" if more else ""),
                            unit=unit, file=self.file or sys.stderr, leave=False, dynamic_ncols=self.width is None,
                            ncols=self.width,
                            bar_format="{l_bar}{bar}| {info} [{elapsed}]")
            self.bar.info = self._postfix(more or 0, total)
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, name="knorm-progress", daemon=True)
                self._ticker.start()

    def _postfix(self, done: float, total: int) -> str:
        """The bar's text: its count (a rounding's in whole iterations) and, once the stage's own rate
        is known (after SETTLE seconds) and the stage is slow, its one estimate of the time left."""
        unit = STAGES[self.stage or "pool"][1]
        if self.stage == "rounding":  # reports shares of an iteration: the count is the iteration under way
            it = min(int(done) + 1, total)
            count = f"{unit} {it} of at most {total}" if done < total else _count(total, unit)
        else:
            count = f"{int(done)}/{total} {unit}s"
        spent = self.clock() - self._t0
        # the rate of what this stage did itself: a pool may open with records it already holds
        # (a kept thinning-1 pilot's), which took no time here
        if done <= self._first or spent < SETTLE or done >= total:
            return count
        per = spent / (done - self._first)
        left = (total - done) * per
        if self.stage == "rounding":  # it stops when the frame is isotropic: its total is a bound
            left = max(min(total, TYPICAL_ROUNDING) - done, 0.0) * per
            return count + (f", {rough_time(left)} left if it stops after 1-2 {unit}s as most do"
                            if spent + left > SLOW else "")
        return count + (f", {rough_time(left)} left" if spent + left > SLOW else "")


def _bar_class() -> Any:
    from tqdm import tqdm

    class Bar(tqdm):  # type: ignore[misc]
        """A tqdm bar whose format has ``{info}``: the stage's count and its one estimate."""

        info = ""

        @property
        def format_dict(self) -> dict[str, Any]:
            d = {**super().format_dict, "info": self.info}
            if d.get("ncols"):  # a narrow terminal: the description, then the count's tail, give way to the bar
                d["prefix"], d["info"] = fit(d["prefix"] or "", self.info, d["ncols"],
                                             len(tqdm.format_interval(d["elapsed"])))
            return d

    return Bar


def fit(desc: str, info: str, ncols: int, elapsed: int = 5) -> tuple[str, str]:
    """A bar's description and text cut so that ``desc: 100%|bar| info [elapsed]`` leaves the bar
    ``MIN_BAR`` columns of ``ncols``: the text's tail down to ``MIN_INFO`` characters (its count
    comes first), then the description's parenthesis, then its tail down to ``MIN_DESC``
    characters, then the text's tail again; each cut ends "…"."""
    over = len(desc) + len(info) + elapsed + len(": 100%|| []") + 1 + MIN_BAR - ncols

    def cut(text: str, keep: int) -> str:
        nonlocal over
        if over <= 0 or len(text) <= keep:
            return text
        k = max(keep, len(text) - over - 1)
        over -= len(text) - k - 1
        return text[:k] + "…"

    info = cut(info, MIN_INFO)
    if over > 0 and " (" in desc:
        short = desc[:desc.index(" (")] + "…"
        over -= len(desc) - len(short)
        desc = short
    desc = cut(desc, MIN_DESC)
    return desc, cut(info, 0)


def _Bar(**kwargs: Any) -> Any:
    global _BAR
    if _BAR is None:
        _BAR = _bar_class()
    return _BAR(**kwargs)


_BAR: Any = None  # tqdm is imported with the first bar


def as_progress(progress: Any) -> Any:
    """A mechanism's ``sampler_options['progress']``: True is a :class:`StageProgress` on stderr,
    False or None nothing; a callable is kept as it is."""
    if progress is True:
        return StageProgress(True)
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise ValueError(f"progress must be True, False, None or callable, got {type(progress).__name__}")
    return progress
