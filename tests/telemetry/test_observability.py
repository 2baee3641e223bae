"""What operators see: OpenTelemetry spans over OTLP (decoded by a real receiver), Prometheus metrics parsed with
prometheus_client's own parser, cost in results and responses, and JSON log lines."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import agency_swarm
from agency_swarm import model_price, set_model_price
from agency_swarm._model._prices import MODEL_PRICES, PRICES_AS_OF
from agency_swarm._telemetry import _switch
from agency_swarm._telemetry._otel import flush_traces
from agency_swarm._telemetry._request import REQUEST, RequestNote
from agency_swarm.serving import create_app
from agency_swarm.serving._logs import JSONFormatter, log_config
from observability_support import (
    SECRET_TEXT,
    Receiver,
    Span,
    build_nested_agency,
    build_priced_agency,
    drop_pipelines,
    otlp_receiver,
)


@pytest.fixture(autouse=True)
def telemetry_off() -> Iterator[None]:
    yield
    _switch.switch_off()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with otlp_receiver() as found:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
        yield found
        drop_pipelines()


def client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


def one(spans: list[Span], name: str) -> Span:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, [span.name for span in spans])
    return found[0]


def assert_nested_tree(spans: list[Span], route: str) -> None:
    """One trace: HTTP request -> turn -> CEO -> send -> Developer -> send -> QA -> tool, model calls per agent."""
    assert len({span.trace_id for span in spans}) == 1
    http = one(spans, f"POST {route}")
    assert http.parent_id == b""
    assert http.attributes["http.response.status_code"] == 200
    turn = one(spans, "turn CEO")
    ceo, dev, qa = (one(spans, f"invoke_agent {name}") for name in ("CEO", "Developer", "QA"))
    to_dev, to_qa = one(spans, "send_message Developer"), one(spans, "send_message QA")
    tool = one(spans, "execute_tool run_checks")
    chain = [(turn, http), (ceo, turn), (to_dev, ceo), (dev, to_dev), (to_qa, dev), (qa, to_qa), (tool, qa)]
    for child, parent in chain:
        assert child.parent_id == parent.span_id, (child.name, parent.name)
    for model, span in (("gpt-4o", ceo), ("gpt-4o-mini", dev), ("house-model", qa)):
        calls = [found for found in spans if found.name == f"chat {model}"]
        assert len(calls) == 2
        assert all(call.parent_id == span.span_id for call in calls)
        assert calls[0].attributes["gen_ai.operation.name"] == "chat"
        assert calls[0].attributes["gen_ai.request.model"] == model
        assert "gen_ai.agent.name" not in calls[0].attributes  # its agent's span is its parent
        assert calls[0].attributes["gen_ai.usage.input_tokens"] > 0
        assert calls[0].attributes["gen_ai.usage.output_tokens"] > 0
        assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert tool.attributes["gen_ai.tool.name"] == "run_checks"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert to_qa.attributes["agency_swarm.recipient"] == "QA"
    assert turn.attributes["agency_swarm.turn.outcome"] == "completed"


async def test_a_nested_turn_over_http_is_one_trace_of_spans_without_message_text(receiver: Receiver) -> None:
    app = create_app(build_nested_agency, store="memory")
    async with client_of(app) as client:
        response = await client.post("/chats/traced/messages", json={"message": SECRET_TEXT})
    assert response.status_code == 200, response.text
    flush_traces()
    assert receiver.paths
    assert set(receiver.paths) == {"/v1/traces"}
    assert_nested_tree(receiver.spans, "/chats/{chat_id}/messages")
    assert not any(SECRET_TEXT.encode() in body for body in receiver.raw)  # no message text by default
    assert response.headers["x-request-id"] == one(receiver.spans, "POST /chats/{chat_id}/messages").attributes[
        "agency_swarm.request_id"]


async def test_a_streamed_turn_is_traced_the_same_and_text_only_when_enabled(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    app = create_app(build_nested_agency, store="memory")
    async with client_of(app) as client:
        response = await client.post("/chats/streamed/messages:stream", json={"message": SECRET_TEXT})
    assert response.status_code == 200
    assert "event: done" in response.text
    flush_traces()
    assert_nested_tree(receiver.spans, "/chats/{chat_id}/messages:stream")
    assert SECRET_TEXT in one(receiver.spans, "send_message Developer").attributes["agency_swarm.message"]
    assert one(receiver.spans, "execute_tool run_checks").attributes["gen_ai.tool.call.result"] == "smoke: all green"


CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.mark.parametrize("sampled", [True, False])
async def test_a_callers_traceparent_continues_its_trace_and_its_sampling_decision(
    receiver: Receiver, sampled: bool
) -> None:
    """The caller's trace goes on in the server's spans; a caller that sampled its trace out gets no spans, and its
    turn runs the same."""
    app = create_app(build_nested_agency, store="memory")
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-{'01' if sampled else '00'}"
    async with client_of(app) as client:
        answer = await client.post("/chats/continued/messages", json={"message": "hi"},
                                   headers={"TraceParent": traceparent, "x-other": "x"})
        marker = await client.post("/chats/marker/messages", json={"message": "hi"})  # its own trace: sampled
    assert (answer.status_code, marker.status_code) == (200, 200)
    flush_traces()
    by_trace = {span.trace_id for span in receiver.spans}
    assert (bytes.fromhex(CALLER_TRACE) in by_trace) is sampled
    assert len(by_trace) == (2 if sampled else 1)
    if sampled:
        request = one([span for span in receiver.spans if span.trace_id == bytes.fromhex(CALLER_TRACE)],
                      "POST /chats/{chat_id}/messages")
        assert request.parent_id == bytes.fromhex(CALLER_SPAN)


def metric_values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, parsed by prometheus_client's own parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }


def scrape_until(
    scrape: Callable[[], str], done: Callable[[dict[tuple[str, tuple[tuple[str, str], ...]], float]], bool],
    timeout: float = 30.0,
) -> str:
    """/metrics read (`scrape`) again and again until its values are `done`: another worker process writes its
    values up to one flush interval (AGENCY_SWARM_METRICS_FLUSH_SECONDS) late. Fails with the last text read once
    `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        text = scrape()
        if done(metric_values(text)):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"/metrics did not show the expected values within {timeout} s:\n{text}")


def assert_turn_metrics(values: dict[tuple[str, tuple[tuple[str, str], ...]], float], turns: int) -> None:
    assert values[("agency_swarm_turns_total", (("outcome", "completed"),))] >= turns
    assert values[("agency_swarm_turn_duration_seconds_count", (("agent", "CEO"),))] >= turns
    assert values[("agency_swarm_active_turns", ())] == 0
    for agent, model in (("CEO", "gpt-4o"), ("Developer", "gpt-4o-mini")):
        labels = (("agent", agent), ("model", model))
        assert values[("agency_swarm_model_call_duration_seconds_count", labels)] >= turns
        assert values[("agency_swarm_tokens_total", (*labels[:1], ("kind", "input"), labels[1]))] > 0
        assert values[("agency_swarm_cost_usd_total", labels)] > 0


async def test_metrics_count_turns_model_calls_tokens_cost_and_rejections(receiver: Receiver) -> None:
    app = create_app(build_priced_agency, store="memory", metrics=True)
    async with client_of(app) as client:
        for index in range(2):
            assert (await client.post(f"/chats/m{index}/messages", json={"message": "go"})).status_code == 200
        assert (await client.post("/chats/m0/messages", json={"wrong": 1})).status_code == 422
        assert (await client.post("/chats/m0/messages", content=b"x" * (2 * 1024 * 1024))).status_code == 413
        text = (await client.get("/metrics")).text
    values = metric_values(text)
    assert_turn_metrics(values, 2)
    assert values[("agency_swarm_rejected_requests_total", (("reason", "invalid_request"),))] >= 1
    assert values[("agency_swarm_rejected_requests_total", (("reason", "request_too_large"),))] >= 1


async def test_without_the_setting_there_is_no_metrics_route_and_no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    app = create_app(build_priced_agency, store="memory")
    assert _switch.ACTIVE is None
    async with client_of(app) as client:
        assert (await client.get("/metrics")).status_code == 404
        response = await client.post("/chats/plain/messages", json={"message": "go"})
    assert "x-request-id" not in response.headers  # no middleware at all


def test_the_price_table_is_dated_public_and_extensible() -> None:
    assert PRICES_AS_OF == "2025-08-07"
    assert model_price("gpt-4o") == MODEL_PRICES["gpt-4o"]
    assert model_price("gpt-4o-2024-08-06") == model_price("openai/gpt-4o") == MODEL_PRICES["gpt-4o"]
    assert model_price("house-model") is None
    assert model_price("vendor/house-model-2026-01-02") is None
    set_model_price("house-model", input=1.0, output=2.0)
    try:
        assert model_price("house-model") == agency_swarm.ModelPrice(input=1.0, output=2.0)
        # a snapshot of it asked for before its price was set finds the price now
        assert model_price("vendor/house-model-2026-01-02") == agency_swarm.ModelPrice(input=1.0, output=2.0)
    finally:
        del MODEL_PRICES["house-model"]
    assert model_price("vendor/house-model-2026-01-02") is None


async def test_results_and_responses_carry_cost_per_agent_null_when_unknown() -> None:
    app = create_app(build_nested_agency, store="memory")
    async with client_of(app) as client:
        body = (await client.post("/chats/costs/messages", json={"message": "go"})).json()
        streamed = (await client.post("/chats/costs2/messages:stream", json={"message": "go"})).text
    ceo = MODEL_PRICES["gpt-4o"]
    assert body["cost_by_agent"]["CEO"] == pytest.approx(2 * (1000 * ceo.input + 100 * ceo.output) / 1e6)
    assert body["cost_by_agent"]["Developer"] > 0
    assert body["cost_by_agent"]["QA"] is None
    assert body["cost_usd"] is None
    done = json.loads(streamed.split("event: done\n", 1)[1].split("data: ", 1)[1].split("\n", 1)[0])
    assert done["result"]["cost_by_agent"] == body["cost_by_agent"]
    assert done["result"]["cost_usd"] is None
    priced = build_priced_agency(agency_swarm.MemoryThreadStore())
    result = await priced.get_response("go", chat_id="python")
    cost = result.cost()
    assert cost.by_agent["CEO"] == pytest.approx(body["cost_by_agent"]["CEO"])
    assert cost.total == pytest.approx(sum(cost.by_agent.values()))


def test_json_log_lines_carry_the_request_id_and_principal_and_no_secrets() -> None:
    formatter = JSONFormatter()
    key_shaped = "-".join(("sk", "abcdefghijkl"))  # built here: no string in the tree looks like a real key
    record = logging.LogRecord("agency_swarm.serving", logging.INFO, __file__, 1, "key %s", (key_shaped,), None)
    token = REQUEST.set(RequestNote("req-1", principal="alice"))
    try:
        line = json.loads(formatter.format(record))
    finally:
        REQUEST.reset(token)
    assert line["request_id"] == "req-1"
    assert line["principal"] == "alice"
    assert line["level"] == "INFO"
    assert line["logger"] == "agency_swarm.serving"
    assert "time" in line
    assert "abcdefghijkl" not in line["message"]
    assert "request_id" not in json.loads(formatter.format(record))  # outside a request: none
    config = log_config("json")
    assert config is not None
    assert log_config("text") is None
    assert config["loggers"]["uvicorn.access"]["handlers"] == ["default"]
