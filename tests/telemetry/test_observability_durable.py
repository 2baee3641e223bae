"""`agency-swarm serve --durable --metrics` with tracing, 2 workers on PostgreSQL: a durable turn's spans are in its
request's trace (whichever worker runs it), with the workflow's id on them, decoded from the OTLP export; and
/metrics says how many durable turns wait to start, read with prometheus_client's parser."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from durable_app import make_side_effects_table
from observability_support import Receiver, Span, otlp_receiver
from postgres_support import require_postgres
from serving_support import Server, _in_own_loop, start_serve
from test_observability import metric_values

WORKFLOW_ID = "agency_swarm.durable.workflow_id"
TURNS = 4
BOUND_S = 60.0  # a safety net for waits, never a pause


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as found:
        yield found


@pytest.fixture(scope="module")
def server(receiver: Receiver) -> Iterator[Server]:
    url = require_postgres()
    _in_own_loop(make_side_effects_table())
    running = start_serve(
        ["--factory", "durable_app:build_agency", "--store", url, "--durable", "--metrics"], workers=2,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"},
    )
    yield running
    running.stop()


def chat() -> str:
    return f"obs-dur-{uuid.uuid4().hex[:12]}"


def of_turn(spans: list[Span], name: str, turn_id: str) -> list[Span]:
    return [span for span in spans if span.name == name and span.attributes.get(WORKFLOW_ID) == turn_id]


def test_a_durable_turns_spans_are_in_its_requests_trace_with_the_workflow_id(
    server: Server, receiver: Receiver
) -> None:
    with httpx.Client(base_url=server.url, timeout=BOUND_S) as client:
        answers = [client.post(f"/chats/{chat()}/messages", json={"message": "note"}) for _ in range(TURNS)]
    assert all(answer.status_code == 200 for answer in answers), [answer.text for answer in answers]
    turn_ids = [answer.headers["turn-id"] for answer in answers]

    def exported(spans: list[Span]) -> bool:
        return all(
            of_turn(spans, "POST /chats/{chat_id}/messages", turn_id) and of_turn(spans, "turn A", turn_id)
            for turn_id in turn_ids
        )

    assert receiver.wait_for(exported, BOUND_S)
    spans = list(receiver.spans)
    for turn_id in turn_ids:
        [request] = of_turn(spans, "POST /chats/{chat_id}/messages", turn_id)
        [turn] = of_turn(spans, "turn A", turn_id)
        assert request.parent_id == b""  # the request is the trace's root, the turn its child
        assert (turn.trace_id, turn.parent_id) == (request.trace_id, request.span_id)
        [agent] = [span for span in spans if span.name == "invoke_agent A" and span.parent_id == turn.span_id]
        under_agent = {span.name for span in spans if span.parent_id == agent.span_id}
        assert {"chat scripted-model", "execute_tool record"} <= under_agent, under_agent
        assert all(span.trace_id == request.trace_id for span in spans if span.parent_id == agent.span_id)


def depth(client: httpx.Client) -> float:
    text = client.get("/metrics", headers={"connection": "close"}).text  # a new connection: either worker answers
    [(key, value)] = [(key, value) for key, value in metric_values(text).items()
                      if key[0] == "agency_swarm_durable_queue_depth"]
    assert key[1][0][0] == "queue"
    return value


def test_the_queue_depth_counts_turns_waiting_to_start_once_for_every_worker(server: Server) -> None:
    """A chat's turns run one at a time: behind a turn that waits on a gate, its next three wait in the queue."""
    chat_id, gate = chat(), uuid.uuid4().hex[:8]
    with httpx.Client(base_url=server.url, timeout=BOUND_S) as client:
        assert depth(client) == 0
        with client.stream("POST", f"/chats/{chat_id}/messages:stream", json={"message": f"block {gate}"}) as first:
            assert first.status_code == 200
            next(line for line in first.iter_lines() if line.startswith("data:"))  # it runs: it wrote an event
            queued = [
                client.post(f"/chats/{chat_id}/messages", json={"message": f"after {index}", "background": True})
                for index in range(3)
            ]
            assert [answer.status_code for answer in queued] == [202] * 3
            assert [depth(client) for _ in range(4)] == [3] * 4  # the same on either worker: never summed twice
            with psycopg.connect(require_postgres(), autocommit=True) as connection:
                connection.execute("SELECT pg_notify('durable_gate', %s)", (gate,))
        last = queued[-1].headers["turn-id"]
        with client.stream("GET", f"/chats/{chat_id}/turns/{last}/events") as events:
            assert any('"done"' in line for line in events.iter_lines())  # read to the end: every turn ran
        assert depth(client) == 0
