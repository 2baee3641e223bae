"""A trace carried across processes: the W3C `traceparent` of the span current where a durable turn is queued, so
the worker that runs it (any worker, or a recovery) starts the turn's span in the request's trace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import _switch

WORKFLOW_ID = "agency_swarm.durable.workflow_id"


def _tracing() -> bool:
    active = _switch.ACTIVE
    return active is not None and active.tracer is not None


def carried_trace(workflow_id: str) -> dict[str, str] | None:
    """The current span's W3C trace context (`traceparent`, `tracestate`), or None when tracing is off or no span is
    current. The current span gets the workflow's id: the request's span names the turn it queued."""
    if not _tracing():
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return None
    if span.is_recording():
        span.set_attribute(WORKFLOW_ID, workflow_id)
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


@contextlib.contextmanager
def continued_trace(carrier: object) -> Iterator[None]:
    """Within: the span of `carrier` (a `carried_trace`) is current, so a turn started here is its child. Nothing
    when tracing is off or the carrier is missing or malformed (the turn starts a trace of its own)."""
    if not isinstance(carrier, dict) or not _tracing():
        yield
        return
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    strings = {key: value for key, value in carrier.items() if isinstance(key, str) and isinstance(value, str)}
    token = context.attach(TraceContextTextMapPropagator().extract(strings))
    try:
        yield
    finally:
        context.detach(token)
