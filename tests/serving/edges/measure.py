"""One hostile request against a real server, with its bounds: an answer in time, /healthz meanwhile, peak memory.

`hostile(server, shape, send)` runs `send()` (which must fail loudly past its own timeout: REQUEST_BOUND_S) while a
thread asks `/healthz` again and again, each within HEALTH_BOUND_S, and reads the worker's peak RSS (VmHWM) before
and after. It records the worst time and growth per store and shape for the session's table (conftest.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx

from serving_support import Server
from test_serving_edges import PEAK_RSS_GROWTH_BOUND_KIB, peak_rss_kib

T = TypeVar("T")
REQUEST_BOUND_S = 30.0
"""Every hostile request's own timeout: past it the request fails the test (a hang is a failure, not a slow run)."""
HEALTH_BOUND_S = 1.0
"""A `/healthz` asked while a hostile request is in flight answers within this, or the event loop was stalled."""
PROBE_EVERY_S = 0.02
"""The prober's pace: often enough to catch a stall of the loop, not so often that it takes a core from the worker."""


@dataclass
class Worst:
    """What one shape did to one store's server, at worst over every generated example."""

    examples: int = 0
    seconds: float = 0.0
    rss_growth_kib: int = 0
    health_probes: int = 0
    statuses: set[str] = field(default_factory=set)


TABLE: dict[tuple[str, str], Worst] = {}
"""(store, shape) -> the worst seen; printed at the end of the session."""


class HealthProber:
    """A thread asking `/healthz` until stopped, each answer within HEALTH_BOUND_S; failures are kept, not raised."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.probes = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthProber:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(REQUEST_BOUND_S)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=HEALTH_BOUND_S) as client:
            while self.probes == 0 or not self._stop.is_set():
                try:
                    status = client.get("/healthz").status_code
                except httpx.HTTPError as error:
                    self.failures.append(f"{type(error).__name__}: {error}")
                    return
                self.probes += 1
                if status != 200:
                    self.failures.append(f"/healthz answered {status}")
                    return
                self._stop.wait(PROBE_EVERY_S)  # returns at once when the hostile request is done


def reset_peak_rss(pid: int) -> None:
    """Start the worker's VmHWM again from its current RSS (Linux: `5` to /proc/PID/clear_refs), so each request's
    growth is its own, not hidden under an earlier request's higher peak. Where that is refused, the growth measured
    is that of the process's lifetime peak: still a bound, a looser one."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def hostile(server: Server, store: str, shape: str, send: Callable[[], T], describe: Callable[[T], str]) -> T:
    """`send()` under the bounds; its result (described for the table's status column) is returned for the test's
    own checks."""
    (pid,) = server.worker_pids
    reset_peak_rss(pid)
    before = peak_rss_kib(pid)
    with HealthProber(server.url) as prober:
        started = time.monotonic()
        result = send()
        seconds = time.monotonic() - started
    growth = peak_rss_kib(pid) - before
    worst = TABLE.setdefault((store, shape), Worst())
    worst.examples += 1
    worst.seconds = max(worst.seconds, seconds)
    worst.rss_growth_kib = max(worst.rss_growth_kib, growth)
    worst.health_probes += prober.probes
    worst.statuses.add(describe(result))
    assert prober.failures == [], f"{shape} on {store}: /healthz failed meanwhile: {prober.failures}"
    assert growth < PEAK_RSS_GROWTH_BOUND_KIB, f"{shape} on {store}: peak RSS grew by {growth} KiB"
    assert server.process.poll() is None, f"{shape} on {store}: the server exited"
    return result
