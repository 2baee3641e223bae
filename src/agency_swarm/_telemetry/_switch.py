"""The one switch the turn loop reads: `ACTIVE`, the process's telemetry, or None when none is on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._metrics import Metrics


@dataclass(slots=True)
class Telemetry:
    """What is on in this process: spans (`tracer`, an OpenTelemetry Tracer), metrics, and message text on spans."""

    tracer: Any = None
    metrics: Metrics | None = None
    content: bool = False
    """Put message text (a send's message, tool arguments and outputs, final outputs) on spans."""


ACTIVE: Telemetry | None = None


def switch_on(*, tracer: Any = None, metrics: Metrics | None = None, content: bool | None = None) -> Telemetry:
    """Turn spans and/or metrics on for every later turn of the process (what is on stays on)."""
    global ACTIVE
    active = ACTIVE or Telemetry()
    if tracer is not None:
        active.tracer = tracer
    if metrics is not None:
        active.metrics = metrics
    if content is not None:
        active.content = content
    ACTIVE = active
    return active


def switch_off() -> None:
    """No spans and no metrics from later turns (tests)."""
    global ACTIVE
    ACTIVE = None
