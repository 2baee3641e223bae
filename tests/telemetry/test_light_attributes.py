"""Attribute values of every kind, valid and not, set on a light span and on an OpenTelemetry SDK span: what the
OTLP receiver decodes from the light pipeline is what the SDK keeps and its own encoder would send."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agency_swarm._telemetry._otlp import LightPipeline
from observability_support import Receiver, otlp_receiver


class Printable:
    def __str__(self) -> str:
        return "printable"


class Opaque:
    """No __str__ or __repr__ of its own: the SDK keeps None."""


OBJECTS = st.sampled_from([Printable(), Opaque(), 3 + 4j, frozenset({1}), range(2), bytearray(b"ab")])
SCALARS = st.one_of(
    st.text(max_size=12), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.none(),
    st.binary(max_size=6),
)
VALUES = st.recursive(
    st.one_of(SCALARS, OBJECTS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 2)), inner, max_size=3),
    ),
    max_leaves=6,
)
KEYS = st.one_of(st.text(max_size=10), st.sampled_from(["", "same", "gen_ai.usage.input_tokens"]), st.integers(0, 2))


@pytest.fixture(scope="module")
def light() -> Iterator[tuple[LightPipeline, Receiver]]:
    with otlp_receiver() as receiver:
        provider = TracerProvider(resource=Resource.create({}), shutdown_on_exit=False)
        pipeline = LightPipeline(provider, ("agency_swarm", "test"), {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
        yield pipeline, receiver
        pipeline.shutdown()


@pytest.fixture(scope="module")
def oracle() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("oracle"), exporter


def encoded(attributes: Any) -> dict[str, bytes]:
    return {item.key: item.value.SerializeToString(deterministic=True) for item in attributes}


def sdk_sends(
    tracer: Any, exporter: InMemorySpanExporter, initial: dict[Any, Any], later: list[Any]
) -> dict[str, bytes]:
    span = tracer.start_span("oracle", attributes=initial)
    for key, value in later:
        span.set_attribute(key, value)
    span.set_attributes(dict(later[:2]))
    span.end()
    [finished] = exporter.get_finished_spans()
    exporter.clear()
    return encoded(encode_spans([finished]).resource_spans[0].scope_spans[0].spans[0].attributes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.dictionaries(KEYS, VALUES, max_size=5), later=st.lists(st.tuples(KEYS, VALUES), max_size=5))
def test_the_receiver_decodes_what_the_sdk_keeps(
    light: tuple[LightPipeline, Receiver], oracle: tuple[Any, InMemorySpanExporter], initial: dict[Any, Any],
    later: list[Any],
) -> None:
    logging.disable(logging.WARNING)  # both sides say what they convert or drop; the outcome is the check
    try:
        expected = sdk_sends(*oracle, initial, later)
        pipeline, receiver = light
        name = uuid.uuid4().hex
        span = pipeline.tracer.start_span(name, attributes=initial)
        for key, value in later:
            span.set_attribute(key, value)
        span.set_attributes(dict(later[:2]))
        span.end()
        assert pipeline.force_flush()
    finally:
        logging.disable(logging.NOTSET)
    [received] = [span for request in receiver.requests for span in request.resource_spans[0].scope_spans[0].spans
                  if span.name == name]
    assert encoded(received.attributes) == expected


LIMITS = {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "3", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "4",
          "OTEL_SPAN_EVENT_COUNT_LIMIT": "2", "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "1"}


def test_the_span_limits_of_the_environment_bound_what_is_sent_as_the_sdk_bounds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in LIMITS.items():
        monkeypatch.setenv(name, value)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with otlp_receiver() as receiver:
        light = LightPipeline(TracerProvider(shutdown_on_exit=False), ("agency_swarm", "test"),
                              {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
        for tracer in (provider.get_tracer("oracle"), light.tracer):
            span = tracer.start_span("limited", attributes={"a": "first", "b": ["long", "longer"]})
            span.set_attribute("c", "truncated")
            span.set_attribute("a", "again")  # replaced: now the newest
            span.set_attribute("d", 7)  # past the limit: the oldest ("b") goes
            for index in range(3):
                span.add_event(f"event {index}", {"x": index, "y": "dropped"})
            span.end()
        light.force_flush()
        light.shutdown()
    [sent] = encode_spans(exporter.get_finished_spans()).resource_spans[0].scope_spans[0].spans
    [received] = receiver.requests[0].resource_spans[0].scope_spans[0].spans
    assert encoded(received.attributes) == encoded(sent.attributes)
    assert set(encoded(received.attributes)) == {"c", "a", "d"}
    assert [(event.name, encoded(event.attributes)) for event in received.events] == [
        (event.name, encoded(event.attributes)) for event in sent.events]
    assert [event.name for event in received.events] == ["event 1", "event 2"]
