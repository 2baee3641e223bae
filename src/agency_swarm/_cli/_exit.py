"""How the command-line process ends: the SDK's log lines kept out of the terminal, queued traces given a bounded
time to be exported, and a Ctrl-C while it ends stopping it at once."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from types import FrameType

TRACE_EXPORT_SECONDS = 3.0
"""How long the process waits, at its end, for traces still queued to reach the tracing backend. Without a network
the SDK's exporter would retry for ~10 s and log each failure; the traces are dropped instead."""
SDK_LOGGER = "openai.agents"


def quiet_sdk_logs() -> None:
    """Unless logging was set up (a handler on the root logger), the SDK's log records are not printed: without a
    handler Python prints its warnings and errors ("Error streaming response", "[non-fatal] Tracing request failed")
    to stderr, next to the command's own one-line report of the same failure."""
    if not logging.getLogger().handlers:
        logging.getLogger(SDK_LOGGER).addHandler(logging.NullHandler())


def finish_traces(seconds: float = TRACE_EXPORT_SECONDS) -> None:
    """Export what the SDK's trace processors still hold, in one try, for at most `seconds`; then drop the rest, so
    the SDK's exit handler has nothing left to send (or wait for)."""
    tracing = sys.modules.get("agents.tracing.setup")
    provider = getattr(tracing, "GLOBAL_TRACE_PROVIDER", None)
    if provider is None:  # no turn ran, or tracing was never used: nothing queued
        return
    from agents.tracing.processors import default_exporter

    default_exporter().max_retries = 0  # the process is ending: one try (without a network, retries only wait)
    flushing = threading.Thread(target=provider.force_flush, name="agency-swarm-trace-flush", daemon=True)
    flushing.start()
    flushing.join(seconds)
    import agents

    agents.set_trace_processors([])


def stop_quietly_on_ctrl_c() -> None:
    """From now on (the process is ending), Ctrl-C exits at once, with 130, not a traceback from an exit handler."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_now)


def _exit_now(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(130)
