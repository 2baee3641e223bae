"""The export's protobuf, written directly (`_wire`), against opentelemetry-proto's own messages: for generated spans
(every kind, ids, trace states, attributes of every cleaned type, events, links, statuses) the bytes are the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from agency_swarm._telemetry._otlp import Encoder
from agency_swarm._telemetry._wire import SPAN_ATTRIBUTES, KeyValues, delimited, varint

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SCALARS = st.one_of(
    st.none(), st.booleans(), INT64, st.floats(), st.text(max_size=300), st.binary(max_size=200),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(tuple), st.dictionaries(st.text(max_size=4), inner, max_size=3),
    ),
    max_leaves=5,
)
ATTRIBUTES = st.dictionaries(st.text(min_size=1, max_size=12), VALUES, max_size=5)
TIMES = st.integers(min_value=0, max_value=2**64 - 1)
STATES = st.one_of(st.none(), st.just(TraceState([("vendor", "value"), ("other", "x-1")])))
CONTEXTS = st.builds(
    SpanContext, st.integers(0, 2**128 - 1), st.integers(0, 2**64 - 1), st.booleans(),
    st.integers(0, 255).map(TraceFlags), STATES,
)
STATUSES = st.one_of(
    st.none(), st.builds(Status, st.sampled_from([StatusCode.OK, StatusCode.ERROR]), st.one_of(st.none(), st.text())),
)
SPANS = st.builds(
    SimpleNamespace, trace_id=st.integers(1, 2**128 - 1), span_id=st.integers(1, 2**64 - 1),
    parent_id=st.one_of(st.just(0), st.integers(1, 2**64 - 1)), trace_state=STATES, name=st.text(max_size=40),
    kind=st.sampled_from(list(SpanKind)), start_time=TIMES, end_time=TIMES, attributes=ATTRIBUTES,
    events=st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=8), TIMES, ATTRIBUTES), max_size=2)),
    links=st.one_of(st.none(), st.lists(st.tuples(CONTEXTS, ATTRIBUTES), max_size=2)), status=STATUSES,
    trace_flags=st.integers(0, 255), remote_parent=st.booleans(),
)
USUAL_SPANS = st.builds(  # what a turn's spans are: written on the encoder's short path
    SimpleNamespace, trace_id=st.integers(1, 2**128 - 1), span_id=st.integers(1, 2**64 - 1),
    parent_id=st.one_of(st.just(0), st.integers(1, 2**64 - 1)), trace_state=st.none(), name=st.text(max_size=40),
    kind=st.sampled_from(list(SpanKind)), start_time=st.integers(1, 2**64 - 1), end_time=st.integers(1, 2**64 - 1),
    attributes=st.one_of(ATTRIBUTES, st.dictionaries(st.text(min_size=1, max_size=12), SCALARS, max_size=5)),
    events=st.sampled_from([None, []]), links=st.sampled_from([None, []]), status=st.none(),
    trace_flags=st.integers(0, 255), remote_parent=st.booleans(),
)


def reference_value(value: Any) -> AnyValue:
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[reference_value(item) for item in value]))
    assert isinstance(value, Mapping)
    return AnyValue(kvlist_value=KeyValueList(
        values=[KeyValue(key=str(key), value=reference_value(item)) for key, item in value.items()]))


def pairs(attributes: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=reference_value(value)) for key, value in attributes.items()]


def flags(trace_flags: int, remote: bool) -> int:
    return trace_flags & 0xFF | 0x100 | (0x200 if remote else 0)


def state(trace_state: Any) -> str:
    return ",".join(f"{key}={value}" for key, value in trace_state.items()) if trace_state else ""


def reference(spans: list[Any], resource: Mapping[str, Any], scope: tuple[str, str]) -> bytes:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.CopyFrom(Resource(attributes=pairs(resource)))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.CopyFrom(InstrumentationScope(name=scope[0], version=scope[1]))
    for span in spans:
        encoded = scope_spans.spans.add(
            trace_id=span.trace_id.to_bytes(16, "big"), span_id=span.span_id.to_bytes(8, "big"), name=span.name,
            kind=span.kind.value + 1, start_time_unix_nano=span.start_time, end_time_unix_nano=span.end_time,
            attributes=pairs(span.attributes), flags=flags(span.trace_flags, span.remote_parent),
            trace_state=state(span.trace_state),
        )
        if span.parent_id:
            encoded.parent_span_id = span.parent_id.to_bytes(8, "big")
        if span.status is not None:
            encoded.status.code = span.status.status_code.value  # type: ignore[assignment]
            if span.status.description:
                encoded.status.message = span.status.description
        for name, timestamp, attributes in span.events or ():
            encoded.events.add(name=name, time_unix_nano=timestamp, attributes=pairs(attributes))
        for context, attributes in span.links or ():
            encoded.links.add(
                trace_id=context.trace_id.to_bytes(16, "big"), span_id=context.span_id.to_bytes(8, "big"),
                trace_state=state(context.trace_state), attributes=pairs(attributes),
                flags=flags(context.trace_flags, context.is_remote),
            )
    return request.SerializeToString()


@settings(max_examples=300, deadline=None)
@given(
    spans=st.lists(st.one_of(SPANS, USUAL_SPANS), min_size=1, max_size=3), resource=ATTRIBUTES,
    scope=st.tuples(st.text(), st.text()),
)
def test_the_written_request_is_byte_for_byte_what_opentelemetry_proto_serializes(
    spans: list[Any], resource: dict[str, Any], scope: tuple[str, str]
) -> None:
    encoder = Encoder(lambda: SimpleNamespace(attributes=resource), scope)
    expected = reference(spans, resource, scope)
    assert encoder.encode(spans) == expected
    assert encoder.encode(spans) == expected  # again, from what the encoder keeps


def test_values_equal_in_python_but_of_other_types_are_written_as_their_own_type() -> None:
    kinds = [True, 1, 1.0, "1", False, 0, 0.0, ""]
    spans = [SimpleNamespace(
        trace_id=1, span_id=index + 1, parent_id=0, trace_state=None, name="s", kind=SpanKind.INTERNAL,
        start_time=1, end_time=2, events=None, links=None, status=None, trace_flags=1, remote_parent=False,
        attributes={"value": value},
    ) for index, value in enumerate(kinds * 2)]
    encoder = Encoder(lambda: SimpleNamespace(attributes={}), ("scope", "1"))
    assert encoder.encode(spans) == reference(spans, {}, ("scope", "1"))


def test_an_attribute_protobuf_cannot_hold_is_left_out_and_the_rest_is_sent() -> None:
    span = SimpleNamespace(
        trace_id=1, span_id=2, parent_id=0, trace_state=None, name="s", kind=SpanKind.INTERNAL, start_time=1,
        end_time=2, events=None, links=None, status=None, trace_flags=1, remote_parent=False,
        attributes={"big": 2**64, "surrogate": "\udc80", "kept": "yes"},
    )
    encoder = Encoder(lambda: SimpleNamespace(attributes={}), ("scope", "1"))
    request = ExportTraceServiceRequest.FromString(encoder.encode([span]))
    [sent] = request.resource_spans[0].scope_spans[0].spans
    assert [(item.key, item.value.string_value) for item in sent.attributes] == [("kept", "yes")]


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**63 - 1, -1, -(2**63)])
def test_varints_match_protobuf(value: int) -> None:
    expected = AnyValue(int_value=value).SerializeToString()
    assert b"\x18" + varint(value) == expected


def test_keys_past_the_cache_bound_are_still_written() -> None:
    values = KeyValues(SPAN_ATTRIBUTES, None)
    for index in range(5000):  # more distinct keys than the key cache keeps
        values.one(f"key-{index}", 1.5)
    for key in ("key-4999", "late"):
        assert values.one(key, 2.5) == delimited(SPAN_ATTRIBUTES, KeyValue(key=key, value=AnyValue(
            double_value=2.5)).SerializeToString())
