"""Ended spans, batched for export: a bounded queue a daemon thread sends from in full batches as soon as one is
full, and empties every schedule delay (the `OTEL_BSP_*` variables) and on demand (`force_flush`, `shutdown`)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

_logger = logging.getLogger(__name__)

DEFAULTS = {"OTEL_BSP_MAX_QUEUE_SIZE": 2048, "OTEL_BSP_SCHEDULE_DELAY": 5000, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512}


def _positive(environ: Mapping[str, str], name: str) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return DEFAULTS[name]
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value > 0:
        return value
    _logger.warning("%s must be a positive integer; using %d.", name, DEFAULTS[name])
    return DEFAULTS[name]


class SpanBatcher:
    """`add` (the hot path: an append, and a signal only when a batch fills) and a thread that hands batches of at
    most `max_batch` spans to `export`. Past `max_queue` waiting spans, a span is dropped and counted; the count is
    logged once per export cycle."""

    def __init__(self, export: Callable[[list[Any]], None], environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.max_queue = _positive(env, "OTEL_BSP_MAX_QUEUE_SIZE")
        self.max_batch = min(_positive(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"), self.max_queue)
        self.delay = _positive(env, "OTEL_BSP_SCHEDULE_DELAY") / 1000
        self.export = export
        self.dropped = 0
        """Spans dropped so far because the queue was full."""
        self._reported = 0
        self._stopped = False
        self.restart()

    def restart(self) -> None:
        """A queue and thread of this process's own (again in a forked child: the parent's thread is not there, and
        its queued spans are the parent's to export)."""
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._flushes: list[threading.Event] = []
        self._thread = threading.Thread(target=self._run, name="agency_swarm-span-export", daemon=True)
        self._thread.start()

    def add(self, span: Any) -> None:
        queue = self._queue
        if len(queue) >= self.max_queue:
            with self._lock:
                self.dropped += 1
            return
        queue.append(span)
        if len(queue) == self.max_batch:
            self._wake.set()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every span added so far; True once it is sent (or failed), False after `timeout_millis`."""
        if self._stopped or not self._thread.is_alive():
            self._export_queued()
            return True
        done = threading.Event()
        with self._lock:
            self._flushes.append(done)
        self._wake.set()
        return done.wait(timeout_millis / 1000)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Export what is queued and stop the thread; spans added later are exported by `force_flush` only."""
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_millis / 1000)

    def _run(self) -> None:
        while True:
            woken = self._wake.wait(self.delay)
            self._wake.clear()  # before taking the flushes: a flush or shutdown asked after this sets it again
            stopping = self._stopped  # read before draining: what was queued before the shutdown goes now
            with self._lock:
                flushes, self._flushes = self._flushes, []
            self._export_queued(everything=not woken or bool(flushes) or stopping)
            for done in flushes:
                done.set()
            if stopping:
                return

    def _export_queued(self, everything: bool = True) -> None:
        """The spans queued, in batches: every one, or (a batch filled) full batches only, so that spans ended while
        a batch is sent wait for the next full batch or the delay, not go out in a small batch of their own; one
        warning per cycle when spans were dropped since the last."""
        dropped = self.dropped - self._reported
        if dropped:
            self._reported += dropped
            _logger.warning("Span export queue full (%d spans): %d spans dropped.", self.max_queue, dropped)
        queue, size = self._queue, self.max_batch
        take = queue.popleft
        while everything or len(queue) >= size:
            batch: list[Any] = []
            with contextlib.suppress(IndexError):  # emptied (by a flush after the thread stopped, too)
                while len(batch) < size:
                    batch.append(take())
            if not batch:
                return
            try:
                self.export(batch)
            except Exception as error:  # the thread must outlive a failed export
                _logger.error("Span export failed: %s", type(error).__name__)

