"""Ended spans as an OTLP `ExportTraceServiceRequest` in protobuf's wire format, written directly: byte for byte what
opentelemetry-proto's messages serialize to (the tests compare the two), at a fraction of the cost of building those
messages, which cost more than the rest of a traced turn's spans together."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from struct import Struct
from typing import Any

from opentelemetry.trace import SpanKind

_logger = logging.getLogger(__name__)

_FIXED64, _DOUBLE, _FIXED32 = Struct("<Q"), Struct("<d"), Struct("<I")
_IDS, _TIMES, _FLAGS = Struct("<BB16sBB8s"), Struct("<BQBQ"), Struct("<BBI")
_INT64_MIN, _INT64_MAX, _UINT64 = -(1 << 63), (1 << 63) - 1, 1 << 64
HAS_IS_REMOTE, IS_REMOTE = 0x100, 0x200
_LOCAL, _REMOTE = HAS_IS_REMOTE, HAS_IS_REMOTE | IS_REMOTE  # a span's flags past the trace flags
KINDS = {kind: kind.value + 1 for kind in SpanKind}  # OTLP counts from UNSPECIFIED = 0
_CACHED_TYPES = frozenset((str, int, bool))
_CACHE_ENTRIES = 4096
_VALUE_ENTRIES = 3 * _CACHE_ENTRIES  # strings, ints and bools share one cache
_CACHED_STR_LENGTH = 256
_ENCODING_ERRORS = (ValueError, TypeError, OverflowError)

# A tag is (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32), as one byte here
# except the span's flags (field 16).
_ANY_STRING, _ANY_BOOL, _ANY_INT, _ANY_DOUBLE, _ANY_ARRAY, _ANY_KVLIST, _ANY_BYTES = (
    b"\x0a", b"\x10", b"\x18", b"\x21", b"\x2a", b"\x32", b"\x3a")
SPAN_ATTRIBUTES, EVENT_ATTRIBUTES, LINK_ATTRIBUTES, RESOURCE_ATTRIBUTES = b"\x4a", b"\x1a", b"\x22", b"\x0a"


_ONE_BYTE = tuple(bytes((size,)) for size in range(0x80))


def varint(value: int) -> bytes:
    """An unsigned varint; a negative int64 as its 64-bit two's complement (ten bytes), as protobuf writes it."""
    if 0 <= value < 0x4000:
        return _ONE_BYTE[value] if value < 0x80 else bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0:
        value += _UINT64
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def delimited(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    size = len(payload)
    return tag + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + payload


def _text(tag: bytes, value: str) -> bytes:
    """A string field, left out when empty (proto3)."""
    return delimited(tag, value.encode()) if value else b""


def any_value(value: Any) -> bytes:
    """An attribute value as an `AnyValue` message (the order of the OpenTelemetry SDK's encoder: bool before int).
    Raises ValueError for what protobuf cannot hold (an int past 64 bits, a string that is not UTF-8)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return _ANY_BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return delimited(_ANY_STRING, value.encode())
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError("an int attribute past 64 bits")
        return _ANY_INT + varint(value)
    if isinstance(value, float):
        return _ANY_DOUBLE + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return delimited(_ANY_BYTES, value)
    if isinstance(value, Sequence):
        return delimited(_ANY_ARRAY, b"".join(delimited(b"\x0a", any_value(item)) for item in value))
    if isinstance(value, Mapping):
        pairs = b"".join(delimited(b"\x0a", key_value(str(key), item)) for key, item in value.items())
        return delimited(_ANY_KVLIST, pairs)
    raise TypeError(f"an attribute value of type {type(value).__name__}")


def key_value(key: str, value: Any) -> bytes:
    """A `KeyValue` message."""
    return _text(b"\x0a", key) + delimited(b"\x12", any_value(value))


def truncated(value: Any, limit: int) -> Any:
    """Strings (also inside sequences and mappings) cut to `limit` characters, as the SDK's length limits do."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, tuple):
        return tuple(truncated(item, limit) for item in value)
    if isinstance(value, dict):
        return {key: truncated(item, limit) for key, item in value.items()}
    return value


class KeyValues:
    """Attributes as the repeated `KeyValue` field `tag` of a message; those of short strings, ints and bools are
    kept encoded and reused (the same operation names, models and routes recur on every turn). Used by the export
    thread only."""

    def __init__(self, tag: bytes, length_limit: int | None) -> None:
        self.tag, self.length_limit = tag, length_limit
        self.cached: dict[tuple[str, Any, type], bytes] = {}
        """Encoded `KeyValue` fields by (key, value, the value's type): the type keeps True apart from 1."""
        self.keys: dict[str, bytes] = {}
        """Each key's field in a `KeyValue` (tag, length, UTF-8)."""

    def one(self, key: str, value: Any) -> bytes:
        if self.length_limit is not None:
            value = truncated(value, self.length_limit)
        kind = value.__class__
        if kind not in _CACHED_TYPES:
            return delimited(self.tag, key_value(key, value))
        pair = (key, value, kind)
        found = self.cached.get(pair)
        if found is not None:
            return found
        # the usual miss is a string (an id): written without `any_value`'s type checks
        encoded = delimited(_ANY_STRING, value.encode()) if kind is str else any_value(value)
        named = self.keys.get(key)
        if named is None:
            named = _text(b"\x0a", key)
            if len(self.keys) < _CACHE_ENTRIES:
                self.keys[key] = named
        found = delimited(self.tag, named + delimited(b"\x12", encoded))
        if kind is not str or len(value) <= _CACHED_STR_LENGTH:
            if len(self.cached) >= _VALUE_ENTRIES:
                self.cached.clear()
            self.cached[pair] = found
        return found

    def all(self, attributes: Mapping[str, Any]) -> bytes:
        """Every attribute protobuf can hold (one it refuses, such as an int past 64 bits, is left out, as the SDK's
        encoder leaves it)."""
        one = self.one
        try:
            if self.length_limit is None:  # what is kept is found without a call (an encoded field is never empty)
                found = self.cached.get
                return b"".join([found((key, value, value.__class__)) or one(key, value)
                                 for key, value in attributes.items()])
            return b"".join([one(key, value) for key, value in attributes.items()])
        except _ENCODING_ERRORS:  # an unhashable value (TypeError) too: each attribute on its own then
            return b"".join(self._or_empty(key, value) for key, value in attributes.items())

    def _or_empty(self, key: str, value: Any) -> bytes:
        try:
            return self.one(key, value)
        except _ENCODING_ERRORS:
            _logger.debug("Attribute %s is left out of the export: protobuf cannot hold its value.", key)
            return b""


def _ids(span: Any) -> bytes:
    """A `Span` message's first two fields: its trace id and span id."""
    return _IDS.pack(0x0A, 0x10, span.trace_id.to_bytes(16, "big"), 0x12, 0x08, span.span_id.to_bytes(8, "big"))


def flags(trace_flags: int, remote: bool) -> int:
    return (trace_flags & 0xFF) | HAS_IS_REMOTE | (IS_REMOTE if remote else 0)


def trace_state(state: Any) -> str:
    return ",".join(f"{key}={value}" for key, value in state.items()) if state else ""


class SpanWriter:
    """Writes LightSpans as `Span` messages, and batches of them as one request under a resource and a scope."""

    def __init__(self, span_length_limit: int | None, length_limit: int | None) -> None:
        self.span_values = KeyValues(SPAN_ATTRIBUTES, span_length_limit)
        self.event_values = KeyValues(EVENT_ATTRIBUTES, length_limit)
        self.link_values = KeyValues(LINK_ATTRIBUTES, length_limit)
        self.resource_values = KeyValues(RESOURCE_ATTRIBUTES, length_limit)
        self._names: dict[tuple[str, int], bytes] = {}

    def resource(self, attributes: Mapping[str, Any]) -> bytes:
        """A `Resource` message."""
        return self.resource_values.all(attributes)

    @staticmethod
    def scope(name: str, version: str) -> bytes:
        """An `InstrumentationScope` message."""
        return _text(b"\x0a", name) + _text(b"\x12", version)

    @staticmethod
    def request(resource: bytes, scope: bytes, spans: bytes) -> bytes:
        """An `ExportTraceServiceRequest` of one `ResourceSpans` holding one `ScopeSpans` (`spans`: from `spans`)."""
        scope_spans = delimited(b"\x0a", scope) + spans
        return delimited(b"\x0a", delimited(b"\x0a", resource) + delimited(b"\x12", scope_spans))

    def spans(self, spans: Iterable[Any]) -> bytes:
        """The spans as a `ScopeSpans`' repeated `spans` field, each a `Span` message with its fields in field-number
        order as protobuf writes them. The usual span (a start and an end; no trace state, events, links or status)
        is written here in one step, the rest by `_any_span`."""
        written: list[bytes] = []
        for span in spans:
            start, end = span.start_time, span.end_time
            if start and end and span.status is None and not (span.trace_state or span.events or span.links):
                parent = span.parent_id
                body = b"".join((
                    _ids(span), b"\x22\x08" + parent.to_bytes(8, "big") if parent else b"",
                    self._name_and_kind(span.name, span.kind), _TIMES.pack(0x39, start, 0x41, end),
                    self.span_values.all(span.attributes),
                    _FLAGS.pack(0x85, 0x01, span.trace_flags & 0xFF | (_REMOTE if span.remote_parent else _LOCAL)),
                ))
            else:
                body = self._any_span(span)
            size = len(body)
            written.append(b"\x12" + (_ONE_BYTE[size] if size < 0x80 else bytes((size & 0x7F | 0x80, size >> 7))
                                        if size < 0x4000 else varint(size)) + body)
        return b"".join(written)

    def _any_span(self, span: Any) -> bytes:
        parts = [_ids(span)]
        if span.trace_state:
            parts.append(_text(b"\x1a", trace_state(span.trace_state)))
        if span.parent_id:
            parts.append(b"\x22\x08" + span.parent_id.to_bytes(8, "big"))
        parts.append(self._name_and_kind(span.name, span.kind))
        start, end = span.start_time, span.end_time
        if start and end:
            parts.append(_TIMES.pack(0x39, start, 0x41, end))
        elif start or end:
            parts.append(b"\x39" + _FIXED64.pack(start) if start else b"\x41" + _FIXED64.pack(end))
        parts.append(self.span_values.all(span.attributes))
        if span.events:
            parts += [delimited(b"\x5a", self._event(*event)) for event in span.events]
        if span.links:
            parts += [delimited(b"\x6a", self._link(*link)) for link in span.links]
        status = span.status
        if status is not None:
            code = status.status_code.value
            parts.append(delimited(b"\x7a", _text(b"\x12", status.description or "") + (
                b"\x18" + varint(code) if code else b"")))
        parts.append(_FLAGS.pack(0x85, 0x01, flags(span.trace_flags, span.remote_parent)))
        return b"".join(parts)

    def _name_and_kind(self, name: str, kind: SpanKind) -> bytes:
        """The name and kind fields; kept per pair (span names recur: the routes, agents and models)."""
        pair = (name, kind._value_)  # the member's value: hashed without calling Enum.__hash__
        found = self._names.get(pair)
        if found is None:
            found = _text(b"\x2a", name) + bytes((0x30, KINDS[kind]))
            if len(self._names) < _CACHE_ENTRIES and len(name) <= _CACHED_STR_LENGTH:
                self._names[pair] = found
        return found

    def _event(self, name: str, timestamp: int, attributes: Mapping[str, Any]) -> bytes:
        time = b"\x09" + _FIXED64.pack(timestamp) if timestamp else b""
        return time + _text(b"\x12", name) + self.event_values.all(attributes)

    def _link(self, context: Any, attributes: Mapping[str, Any]) -> bytes:
        return b"".join((
            b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big"),
            _text(b"\x1a", trace_state(context.trace_state)), self.link_values.all(attributes),
            b"\x35", _FIXED32.pack(flags(context.trace_flags, context.is_remote)),
        ))
