"""Metric values added up in memory as turns run and written to prometheus_client in one pass (`Buffers`).

Every prometheus_client write takes a lock and, in multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`), writes the value
to the process's file; a turn makes about nine. Here a turn only adds to plain counts of its thread's `Pending`, and
they are written together: on the thread's event loop `interval` seconds after the first value not written yet,
before `/metrics` renders (`flush_everywhere`), and at exit. No lock: a thread's `Pending` is added to and written by
that thread alone (another thread asks its loop to write it), or by anyone once the thread is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import threading
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

_logger = logging.getLogger(__name__)

FLUSH_VARIABLE = "AGENCY_SWARM_METRICS_FLUSH_SECONDS"
DEFAULT_FLUSH_SECONDS = 1.0
FOREIGN_FLUSH_WAIT_SECONDS = 1.0
"""How long a scrape waits for another thread's loop to write that thread's values before it renders without them."""


def flush_interval(environ: Mapping[str, str]) -> float:
    """Seconds between a first value not written yet and its flush: `AGENCY_SWARM_METRICS_FLUSH_SECONDS`, a positive
    number (anything else is warned about and the default used)."""
    raw = environ.get(FLUSH_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_FLUSH_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if value > 0 and math.isfinite(value):
        return value
    _logger.warning("%s must be a positive number of seconds; using %s.", FLUSH_VARIABLE, DEFAULT_FLUSH_SECONDS)
    return DEFAULT_FLUSH_SECONDS


def add_observations(child: Any, counts: list[int], total: float) -> None:
    """Many observations added to a prometheus_client Histogram child at once: `counts[i]` more in its i-th bucket
    (per bucket, not cumulative: as the child keeps them, `+Inf` last) and `total` more in its sum.

    prometheus_client has no public call that adds several observations (only `observe`, one lock and one file
    write per value and bucket), so this adds to the child's own bucket and sum values (`_buckets`, `_sum`) as
    `observe` does. tests/telemetry/test_metrics_buffer.py pins it: the exposition after these adds equals that of
    a histogram fed the same values by `observe`.
    """
    child._sum.inc(total)
    for bucket, count in zip(child._buckets, counts, strict=True):
        if count:
            bucket.inc(count)


class Observed:
    """A histogram child's observations not written yet: a count per bucket and their sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.total = 0.0


class Pending:
    """One thread's values not written yet: amounts to add to counter and gauge children, and each histogram
    child's observations. `loop` is the loop a flush is scheduled on (None when none is)."""

    __slots__ = ("adds", "loop", "observed", "thread", "timer")

    def __init__(self) -> None:
        self.adds: dict[Any, float] = {}
        self.observed: dict[Any, Observed] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.thread = threading.current_thread()

    def add(self, child: Any, amount: float) -> None:
        adds = self.adds
        adds[child] = adds.get(child, 0) + amount

    def observe(self, child: Any, amount: float) -> None:
        """As `child.observe(amount)` will count it: in the first bucket whose upper bound is >= amount."""
        observed = self.observed.get(child)
        if observed is None:
            observed = self.observed[child] = Observed(child._upper_bounds)
        observed.counts[bisect_left(observed.bounds, amount)] += 1
        observed.total += amount

    def write(self) -> None:
        """Everything pending written to the children, and nothing pending any more (a scheduled flush cancelled)."""
        adds, observed, timer = self.adds, self.observed, self.timer
        self.adds, self.observed, self.loop, self.timer = {}, {}, None, None
        if timer is not None:
            timer.cancel()
        for child, amount in adds.items():
            if amount:
                _guarded(child.inc, amount)
        for child, seen in observed.items():
            _guarded(add_observations, child, seen.counts, seen.total)

    def forget(self) -> None:
        """Nothing pending, nothing written (a forked child's copy of its parent's values)."""
        self.adds, self.observed, self.loop, self.timer = {}, {}, None, None


def _guarded(write: Any, *values: Any) -> None:
    """One child's values written; a value prometheus_client refuses (a counter told to go down) is logged and left
    out, and the other children's values are still written."""
    try:
        write(*values)
    except ValueError as refused:
        _logger.warning("A metric value was left out: %s", refused)


class _Local(threading.local):
    def __init__(self, everyone: list[Pending]) -> None:
        self.pending = Pending()
        everyone.append(self.pending)


class Buffers:
    """Every thread's `Pending`. The hot path: `pending()`, adds to it, then `written(pending)`."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._everyone: list[Pending] = []
        self._local = _Local(self._everyone)

    def pending(self) -> Pending:
        """This thread's values not written yet."""
        pending: Pending = self._local.pending
        return pending

    def written(self, pending: Pending) -> None:
        """After adding to this thread's `pending`: its flush scheduled on the running loop unless one is scheduled
        there already (one scheduled on a loop that no longer runs may never run); with no loop running, written
        now. A thread runs one loop at a time: the loop a flush is scheduled on runs if it is this thread's running
        loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            pending.write()
            return
        if pending.loop is running:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        pending.loop, pending.timer = running, running.call_later(self.interval, pending.write)

    def flush(self) -> None:
        """This thread's pending values written now."""
        self._local.pending.write()

    async def flush_everywhere(self, wait: float = FOREIGN_FLUSH_WAIT_SECONDS) -> None:
        """Every thread's pending values written (before a scrape): this thread's now, a finished thread's now, and
        the values of a thread whose loop runs by that loop, waited for at most `wait` seconds."""
        self.flush()
        here = threading.current_thread()
        asked = []
        for pending in list(self._everyone):
            if pending.thread is here:
                continue
            if not pending.thread.is_alive():
                pending.write()
                with contextlib.suppress(ValueError):  # a scrape on another loop dropped it first
                    self._everyone.remove(pending)
            elif (written := _ask_loop(pending)) is not None:
                asked.append(written)
        if asked:
            await asyncio.wait(asked, timeout=wait)

    def flush_all_now(self) -> None:
        """Every thread's pending values written from here (at exit: the other threads are done or about to be)."""
        for pending in list(self._everyone):
            pending.write()

    def forget(self) -> None:
        """In a forked child: the parent's pending values are the parent's to write, never the child's."""
        for pending in self._everyone:
            pending.forget()
        self._everyone = []
        self._local = _Local(self._everyone)


def _ask_loop(pending: Pending) -> asyncio.Future[None] | None:
    """`pending` written by its own thread's loop; None when nothing is pending or that loop does not run."""
    loop = pending.loop
    if loop is None or not loop.is_running():
        return None
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def write_there() -> None:
        try:
            pending.write()
        finally:
            done.set_result(None)

    try:
        loop.call_soon_threadsafe(write_there)
    except RuntimeError:  # closed since
        return None
    return asyncio.wrap_future(done)
