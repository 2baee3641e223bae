"""OpenTelemetry spans with explicit parents (imported only once a tracer is on: the `otel` extra).

A span is never made current inside a turn: an async generator's code runs in whatever context consumes it, so a
current span set there would leak into the caller's code. Each span names its parent; the turn's own span takes
the span current where the turn starts (the HTTP request's), so a request is one trace.
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._light import LightSpan, LightTracer

AttributeValue = str | int | float | bool


def start(tracer: Any, name: str, parent: Any, attributes: dict[str, AttributeValue]) -> Any:
    """A started span under `parent` (a span), or under the current context's span when `parent` is None;
    `attributes` a new dict the span may keep."""
    if parent.__class__ is LightSpan and tracer.__class__ is LightTracer:
        return tracer.internal(parent, name, attributes)
    context = None if parent is None else trace.set_span_in_context(parent)
    return tracer.start_span(name, context=context, kind=SpanKind.INTERNAL, attributes=attributes)


def annotate(span: Any, attributes: dict[str, AttributeValue]) -> None:
    """Attributes the package adds to a span it made (plain values, keys it does not hold yet): into a LightSpan's
    own attributes while within its limit, else through `set_attribute` (which keeps the SDK's rules)."""
    if span.__class__ is LightSpan and span.end_time is None:
        held = span.attributes
        if len(held) + len(attributes) <= span.tracer.max_attributes and held.keys().isdisjoint(attributes):
            held.update(attributes)
            return
    for key, value in attributes.items():
        span.set_attribute(key, value)


def end(span: Any, error: BaseException | None = None) -> None:
    """End `span`; a failure sets its status and `error.type` (the exception's class, never its message: it may
    hold message text)."""
    if error is not None and not isinstance(error, GeneratorExit):
        kind = "cancelled" if isinstance(error, asyncio.CancelledError) else type(error).__name__
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, kind))
    span.end()


def current_span() -> Any:
    """The span current here (the HTTP request's), or None."""
    span = trace.get_current_span()
    if span.__class__ is LightSpan:  # its ids are never zero: valid, without making its SpanContext
        return span
    return span if span.get_span_context().is_valid else None


class _ScopeHeaders(Getter[list[tuple[bytes, bytes]]]):
    """The propagators' view of an ASGI scope's headers: a header decoded only when a propagator asks for it."""

    def get(self, carrier: list[tuple[bytes, bytes]], key: str) -> list[str] | None:
        wanted = key.encode("latin-1")
        found = [value.decode("latin-1") for name, value in carrier if name.lower() == wanted]
        return found or None

    def keys(self, carrier: list[tuple[bytes, bytes]]) -> list[str]:
        return [name.decode("latin-1").lower() for name, _ in carrier]


SCOPE_HEADERS = _ScopeHeaders()
