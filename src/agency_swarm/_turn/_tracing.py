"""Traces through the SDK's tracing API: one trace per top-level turn; spans for agent runs, tools and sends.

Spans are started with explicit parents and never made "current" across a yield: an async generator's code runs
in whatever context consumes it, so a current span set there would leak into the caller's code between events.
Only around a model call is the agent span made current, so the model's own response span nests under it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agents import Span, SpanError, Trace, trace
from agents.tracing import get_trace_provider
from agents.tracing.processors import default_exporter
from agents.tracing.provider import DefaultTraceProvider
from agents.tracing.scope import Scope
from agents.tracing.traces import NoOpTrace

from .._base import _sdk
from ._channel import ReaderLeft


@dataclass(slots=True)
class TurnTrace:
    trace: Trace
    owned: bool
    """False when the caller opened the trace (`with agents.trace(...)`): the turn adds spans, never closes it."""


def open_trace(entry_agent: str, chat_id: str) -> TurnTrace | None:
    """The trace of one top-level turn, or None when tracing is off (then nothing else is traced either)."""
    provider = get_trace_provider()
    if _sdk.SHORTCUTS and type(provider) is DefaultTraceProvider:  # it would only ask the Scope itself
        current = Scope.get_current_trace()
    else:
        current = provider.get_current_trace()
    if current is None and _sdk.tracing_switched_off(provider):  # known without a throw-away trace
        return None
    if current is not None:
        return None if isinstance(current, NoOpTrace) else TurnTrace(current, owned=False)
    opened = trace(
        workflow_name=f"agency_swarm turn: {entry_agent}", group_id=chat_id,
        metadata={"chat_id": chat_id, "entry_agent": entry_agent},
    )
    if isinstance(opened, NoOpTrace) or _exports_nowhere():
        return None
    opened.start(mark_as_current=False)
    return TurnTrace(opened, owned=True)


def close_trace(turn_trace: TurnTrace) -> None:
    if turn_trace.owned:
        turn_trace.trace.finish(reset_current=False)


def started(span: Span[Any]) -> Span[Any]:
    span.start(mark_as_current=False)
    return span


def finish(span: Span[Any], error: BaseException | None = None) -> None:
    if error is not None and not isinstance(error, GeneratorExit | ReaderLeft):
        span.set_error(SpanError(message=f"{type(error).__name__}: {error}", data=None))
    span.finish(reset_current=False)


@contextmanager
def current(turn_trace: TurnTrace, span: Span[Any]) -> Iterator[None]:
    """Make `span` the parent of spans the model creates itself (its response or generation span)."""
    trace_token = Scope.set_current_trace(turn_trace.trace)
    span_token = Scope.set_current_span(span)
    try:
        yield
    finally:
        try:
            Scope.reset_current_span(span_token)
            Scope.reset_current_trace(trace_token)
        except ValueError:  # an abandoned stream closed from another context: nothing of ours is current there
            pass


def _exports_nowhere() -> bool:
    """Only the SDK's OpenAI exporter is installed and it has no key: it would drop the trace with a warning.

    Offline runs (scripted models, no OPENAI_API_KEY) then stay quiet. Any other processor (the user's own, or a
    key set with `set_tracing_export_api_key`) keeps tracing on. The SDK keeps its processor list private; if it
    cannot be read, tracing simply stays on.
    """
    exporters = _sdk.trace_exporters(get_trace_provider())
    if not exporters:
        return False
    exporter = default_exporter()
    if any(found is not exporter for found in exporters):
        return False
    return not exporter.api_key
