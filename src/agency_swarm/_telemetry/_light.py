"""Light spans behind the OpenTelemetry API: a Tracer and Span that record only what export needs, with the SDK's
sampler, ids and attribute rules, and hand each ended sampled span to a batcher (`_batch`).

Sampling: a span whose parent is a LightSpan (a local, recorded span) takes its parent's trace and sampled decision
without asking the sampler, and so does a span whose parent is a local span sampled out (it is sampled out too), as
a parent-based sampler would answer; a custom sampler that is not parent-based is consulted for roots, remote
parents and local parents that are sampled but not recorded only.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from time import time_ns
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util import types

_logger = logging.getLogger(__name__)

SAMPLED, RANDOM_TRACE_ID = 0x01, 0x02
_SCALARS = frozenset((str, bool, int, float))
_get_current_span = trace.get_current_span
_INTERNAL, _RECORDED = SpanKind.INTERNAL, (True, True)  # module globals: read faster than an Enum member


class Limits(Protocol):
    """What a span keeps at most (the SDK's `SpanLimits`; None: no bound)."""

    max_span_attributes: int | None
    max_events: int | None
    max_links: int | None
    max_event_attributes: int | None
    max_link_attributes: int | None


def _own_str(value: object) -> bool:
    """Whether the value's type says how to print it (the SDK keeps such a value as its str())."""
    kind = type(value)
    return kind.__str__ is not object.__str__ or kind.__repr__ is not object.__repr__


def clean_value(value: Any) -> Any:
    """An attribute value as the OpenTelemetry SDK keeps it: None, bool, int, float, bytes and str as they are,
    sequences as tuples and mappings as dicts (both cleaned through), anything else its str() or None."""
    if value is None or isinstance(value, bool | int | float | bytes | str):
        return value
    if isinstance(value, Sequence):
        return tuple(clean_value(item) for item in value)
    if isinstance(value, Mapping):
        return clean_attributes(value, sys.maxsize)
    return str(value) if _own_str(value) else None


def _clean_key(key: Any) -> str | None:
    if not key:
        return None
    if isinstance(key, str):
        return key
    return str(key) if _own_str(key) else None


def clean_attributes(attributes: Mapping[Any, Any] | None, limit: int) -> dict[str, Any]:
    """A mapping's attributes as the SDK keeps them (an empty or unprintable key dropped; past `limit` the oldest
    go)."""
    kept: dict[str, Any] = {}
    if not attributes:
        return kept
    for key, value in attributes.items():
        if value.__class__ not in _SCALARS or key.__class__ is not str or not key:
            key = _clean_key(key)
            if key is None:
                continue
            value = clean_value(value)
        kept[key] = value
    if len(kept) > limit:
        kept = dict(list(kept.items())[len(kept) - limit:])
    return kept


def _bound(limit: int | None) -> int:
    return sys.maxsize if limit is None else limit


class LightTracer(trace.Tracer):
    """Starts LightSpans; sampled-out spans are `NonRecordingSpan`s with ids of their own in the same trace, so a
    `traceparent` still propagates the trace and its decision."""

    def __init__(
        self, sampler: Any, id_generator: Any, limits: Limits, on_end: Callable[[LightSpan], None], *,
        roots_sampled: bool = False,
    ) -> None:
        self.sampler = sampler
        self.roots_sampled = roots_sampled
        """The sampler records and samples every root with its attributes as given (the SDK's `ALWAYS_ON` and
        `DEFAULT_ON`): a root is made without asking it."""
        self.on_end = on_end
        self.new_span_id: Callable[[], int] = id_generator.generate_span_id
        self.new_trace_id: Callable[[], int] = id_generator.generate_trace_id
        self.random_bits: Callable[[int], int] | None = (
            random.getrandbits if type(id_generator) is RandomIdGenerator else None)
        """The SDK's random ids drawn here without a call into the generator (zero, never an id, is drawn again by
        it)."""
        random_ids = getattr(id_generator, "is_trace_id_random", None)
        self.root_flags = RANDOM_TRACE_ID if random_ids is not None and random_ids() else 0
        self.max_attributes = _bound(limits.max_span_attributes)
        self.max_events, self.max_links = _bound(limits.max_events), _bound(limits.max_links)
        self.max_event_attributes = _bound(limits.max_event_attributes)
        self.max_link_attributes = _bound(limits.max_link_attributes)

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        parent = _get_current_span(context)
        if parent.__class__ is LightSpan:  # local and recorded: its trace and decision, as parent-based sampling
            return self.child(parent, name, kind, attributes, start_time, (record_exception, set_status_on_exception)
                              )._with_links(links)
        parent_context = parent.get_span_context()
        if parent_context.is_valid and not parent_context.is_remote and not parent_context.trace_flags.sampled:
            return self._sampled_out_under(parent_context)
        return self._sampled(name, context, parent_context, kind, attributes, links, start_time,
                             (record_exception, set_status_on_exception))

    def _sampled_out_under(self, parent: SpanContext) -> trace.Span:
        """A span under a local span sampled out: sampled out as well, with ids of its own in the same trace."""
        return trace.NonRecordingSpan(SpanContext(
            parent.trace_id, self.new_span_id(), False, parent.trace_flags, parent.trace_state,
        ))

    def child(
        self, parent: LightSpan, name: str, kind: SpanKind = SpanKind.INTERNAL, attributes: types.Attributes = None,
        start_time: int | None = None, on_exception: tuple[bool, bool] = (True, True),
    ) -> LightSpan:
        """A span under `parent` (a span of this process, recorded): what `start_span` makes for a context holding
        it, without the context."""
        return LightSpan(
            self, name, parent.trace_id, self.new_span_id(), parent.trace_flags, parent.trace_state, parent.span_id,
            False, kind, clean_attributes(attributes, self.max_attributes), start_time or time_ns(), on_exception,
        )

    def root(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> trace.Span:
        """What `start_span` makes with an empty context (a new trace); `attributes` a new dict of str keys and
        plain values, kept as it is (within the attribute limit) when the sampler need not be asked."""
        if not self.roots_sampled:
            no_parent = trace.INVALID_SPAN_CONTEXT
            return self._sampled(name, Context(), no_parent, kind, attributes, None, None, (True, True))
        if len(attributes) > self.max_attributes:
            attributes = clean_attributes(attributes, self.max_attributes)
        bits = self.random_bits
        return self._root((bits(128) if bits is not None else 0) or self.new_trace_id(), name, kind, attributes,
                          time_ns(), _RECORDED)

    def _root(
        self, trace_id: int, name: str, kind: SpanKind, attributes: dict[str, Any], start_time: int,
        on_exception: tuple[bool, bool],
    ) -> LightSpan:
        """A recorded and sampled root (`roots_sampled`): no parent, no trace state."""
        bits = self.random_bits
        return LightSpan(
            self, name, trace_id, (bits(64) if bits is not None else 0) or self.new_span_id(),
            self.root_flags | SAMPLED, None, 0, False, kind, attributes, start_time, on_exception,
        )

    def internal(self, parent: LightSpan, name: str, attributes: dict[str, Any]) -> LightSpan:
        """`child` for a span this package makes: `attributes` is a new dict of str keys and str, bool, int or float
        values, kept as it is (within the attribute limit)."""
        if len(attributes) > self.max_attributes:
            attributes = clean_attributes(attributes, self.max_attributes)
        bits = self.random_bits
        return LightSpan(
            self, name, parent.trace_id, (bits(64) if bits is not None else 0) or self.new_span_id(),
            parent.trace_flags, parent.trace_state, parent.span_id, False, _INTERNAL, attributes, time_ns(), _RECORDED,
        )

    def _sampled(
        self, name: str, context: Context | None, parent: SpanContext, kind: SpanKind, attributes: types.Attributes,
        links: Sequence[Link] | None, start_time: int | None, on_exception: tuple[bool, bool],
    ) -> trace.Span:
        """A span whose decision the sampler makes: a root, or a child of a remote or non-recorded parent."""
        if parent.is_valid:
            trace_id, flags = parent.trace_id, parent.trace_flags & RANDOM_TRACE_ID
        else:
            trace_id, flags = self.new_trace_id(), self.root_flags
            if self.roots_sampled:
                kept = clean_attributes(attributes, self.max_attributes)
                return self._root(trace_id, name, kind, kept, start_time or time_ns(), on_exception)._with_links(links)
        result = self.sampler.should_sample(context, trace_id, name, kind, attributes, links)
        decision = result.decision
        if decision.is_sampled():
            flags |= SAMPLED
        if not decision.is_recording():
            return trace.NonRecordingSpan(SpanContext(
                trace_id, self.new_span_id(), False, TraceFlags(flags), result.trace_state,
            ))
        parent_id, remote = (parent.span_id, parent.is_remote) if parent.is_valid else (0, False)
        return LightSpan(
            self, name, trace_id, self.new_span_id(), flags, result.trace_state, parent_id, remote, kind,
            clean_attributes(result.attributes, self.max_attributes), start_time or time_ns(), on_exception,
        )._with_links(links)

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time, record_exception,
                               set_status_on_exception)
        with trace.use_span(span, end_on_exit=end_on_exit, record_exception=record_exception,
                            set_status_on_exception=set_status_on_exception) as current:
            yield current


class LightSpan(trace.Span):
    """A recording span: plain fields, no lock (one owner writes it; `end` hands it to the batcher once)."""

    __slots__ = (
        "_context", "attributes", "end_time", "events", "kind", "links", "name", "on_exception", "parent_id",
        "remote_parent", "span_id", "start_time", "status", "trace_flags", "trace_id", "trace_state", "tracer",
    )

    def __init__(
        self, tracer: LightTracer, name: str, trace_id: int, span_id: int, trace_flags: int,
        trace_state: TraceState | None, parent_id: int, remote_parent: bool, kind: SpanKind,
        attributes: dict[str, Any], start_time: int, on_exception: tuple[bool, bool],
    ) -> None:
        self.tracer, self.name, self.trace_id, self.span_id = tracer, name, trace_id, span_id
        self.trace_flags, self.trace_state, self.parent_id, self.remote_parent = (
            trace_flags, trace_state, parent_id, remote_parent)
        self.kind, self.attributes, self.start_time, self.on_exception = kind, attributes, start_time, on_exception
        self.end_time: int | None = None
        self.events: list[tuple[str, int, dict[str, Any]]] | None = None
        self.links: list[tuple[SpanContext, dict[str, Any]]] | None = None
        self.status: Status | None = None
        self._context: SpanContext | None = None

    def _with_links(self, links: Sequence[Link] | None) -> LightSpan:
        if links:
            for link in links:
                if link:
                    self.add_link(link.context, link.attributes)
        return self

    def get_span_context(self) -> SpanContext:
        context = self._context
        if context is None:
            context = self._context = SpanContext(
                self.trace_id, self.span_id, False, TraceFlags(self.trace_flags), self.trace_state,
            )
        return context

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self.end_time is not None:
            return
        if value.__class__ not in _SCALARS or key.__class__ is not str or not key:
            if not key or not isinstance(key, str):
                return
            value = clean_value(value)
        attributes = self.attributes
        if key in attributes:
            del attributes[key]  # the SDK moves a replaced key to the end: the oldest goes first past the limit
        elif len(attributes) >= self.tracer.max_attributes:
            if not attributes:
                return
            del attributes[next(iter(attributes))]
        attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        if self.end_time is not None:
            return
        for key, value in clean_attributes(attributes, sys.maxsize).items():
            self.set_attribute(key, value)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        if self.end_time is not None:
            return
        events = self.events
        if events is None:
            events = self.events = []
        elif len(events) >= self.tracer.max_events:
            if not events:
                return
            del events[0]
        tracer = self.tracer
        events.append((name, timestamp or time_ns(), clean_attributes(attributes, tracer.max_event_attributes)))

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self.end_time is not None or not (context and (context.is_valid or attributes or context.trace_state)):
            return
        links = self.links
        if links is None:
            links = self.links = []
        elif len(links) >= self.tracer.max_links:
            if not links:
                return
            del links[0]
        links.append((context, clean_attributes(attributes, self.tracer.max_link_attributes)))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK: OK is final, UNSET is ignored, a description goes with ERROR only."""
        if self.end_time is not None or (self.status is not None and self.status.status_code is StatusCode.OK):
            return
        if isinstance(status, Status):
            if status.status_code is not StatusCode.UNSET:
                self.status = status
        elif status is not StatusCode.UNSET:
            self.status = Status(status, description)

    def record_exception(
        self, exception: BaseException, attributes: types.Attributes = None, timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """An `exception` event (type, message, stack trace), as the SDK writes it."""
        kind = type(exception)
        module = kind.__module__
        recorded: dict[str, Any] = {
            "exception.type": f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            return
        self.end_time = end_time or time_ns()
        if self.trace_flags & SAMPLED:
            self.tracer.on_end(self)

    def __exit__(self, exc_type: Any, exc_val: BaseException | None, exc_tb: Any) -> None:
        if exc_val is not None and self.end_time is None:
            record, set_status = self.on_exception
            if record:
                self.record_exception(exc_val, escaped=True)
            if set_status:
                self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        self.end()

    def __repr__(self) -> str:
        return f"LightSpan({self.name!r}, trace_id={self.trace_id:032x}, span_id={self.span_id:016x})"
