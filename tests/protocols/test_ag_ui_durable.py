"""`POST /ag-ui` in durable mode (`serve --durable --ag-ui`, PostgreSQL): every event has an id, and a client that
lost the stream sends the same input with Last-Event-ID and gets the rest, every event once, the same as before."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from ag_ui.core import EventType

from ag_ui_support import EVENT, check_well_formed, client_messages, run_input, sse_blocks
from postgres_support import require_postgres
from serving_support import Server, start_serve

BOUND_S = 60.0  # a safety net for reads, never a pause


@pytest.fixture(scope="module")
def durable_ag_ui() -> Iterator[Server]:
    url = require_postgres()
    server = start_serve(["--factory", "ag_ui_app:build_agency", "--store", url, "--durable", "--ag-ui"])
    yield server
    server.stop()


def blocks(server: Server, body: dict[str, object], last: str | None = None) -> list[tuple[str | None, str]]:
    headers = {} if last is None else {"Last-Event-ID": last}
    response = httpx.post(f"{server.url}/ag-ui", json=body, headers=headers, timeout=BOUND_S)
    assert response.status_code == 200, response.text
    return sse_blocks(response.text)


def test_a_lost_stream_goes_on_from_its_last_event_id(durable_ag_ui: Server) -> None:
    body = run_input(f"agui-{uuid.uuid4().hex[:12]}", "run-1", "Build it")
    with httpx.stream("POST", f"{durable_ag_ui.url}/ag-ui", json=body, timeout=BOUND_S) as response:
        assert response.headers["turn-id"]
        lines = response.iter_lines()
        seen: list[tuple[str | None, str]] = []
        while len(seen) < 3:  # then the client's connection is cut
            line = next(lines)
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                seen.append((event_id, line[6:]))
    rest = blocks(durable_ag_ui, body, last=seen[-1][0])
    every = blocks(durable_ag_ui, body)

    assert seen + rest == every
    assert [event_id for event_id, _ in every] == [str(n) for n in range(len(every))]
    events = [EVENT.validate_json(data) for _, data in every]
    check_well_formed(events)
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result == "CEO: Dev: QA checked"
    assert blocks(durable_ag_ui, body, last=str(len(every) - 1)) == []  # nothing after the last


def test_a_durable_approval_interrupts_and_resumes(durable_ag_ui: Server) -> None:
    thread = f"agui-{uuid.uuid4().hex[:12]}"
    user = {"id": "u1", "role": "user", "content": "approve it"}
    first = run_input(thread, "run-1", messages=[user])
    paused = [EVENT.validate_json(data) for _, data in blocks(durable_ag_ui, first)]
    check_well_formed(paused)
    [interrupt] = paused[-1].outcome.interrupts
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    body = run_input(thread, "run-2", messages=client_messages(paused, user), resume=resume)

    resumed = [EVENT.validate_json(data) for _, data in blocks(durable_ag_ui, body)]
    check_well_formed(resumed)
    assert resumed[-1].result == "CEO: Dev: QA: deployed prod"
    again = [EVENT.validate_json(data) for _, data in blocks(durable_ag_ui, body)]
    assert [e.model_dump() for e in again] == [e.model_dump() for e in resumed]  # the same resume, read again


def test_a_bad_last_event_id_is_refused(durable_ag_ui: Server) -> None:
    response = httpx.post(
        f"{durable_ag_ui.url}/ag-ui", json=run_input("agui-bad", "run-1", "hi"), headers={"Last-Event-ID": "x1"},
        timeout=BOUND_S,
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "bad_request"
