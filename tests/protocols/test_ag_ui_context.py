"""`POST /ag-ui` with the app's `context_schema`: the run's context (`forwardedProps.context`, or AG-UI's `context`
entries) is validated as a /chats request's `context` is; a bad one is a RUN_ERROR before anything runs, a good one
reaches the tools as `RequestContext.data`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, EventType

from ag_ui_support import check_well_formed, events_of, of_type, run_input
from agency_swarm.serving import create_app
from auth_app import Tenant, build_agency


def client_of(**options: Any) -> httpx.AsyncClient:
    app = create_app(build_agency, store="memory", ag_ui=True, **options)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://ag-ui.test")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(context_schema=Tenant) as http:
        yield http


async def run(client: httpx.AsyncClient, body: dict[str, Any]) -> list[BaseEvent]:
    response = await client.post("/ag-ui", json=body)
    assert response.status_code == 200, response.text
    events = events_of(response.text)
    check_well_formed(events)
    return events


def tool_result(events: list[BaseEvent]) -> str:
    [result] = of_type(events, EventType.TOOL_CALL_RESULT)
    return str(result.content)


async def test_forwarded_props_context_reaches_the_tools(client: httpx.AsyncClient) -> None:
    props = {"context": {"tenant": "acme", "plan": "pro"}}
    events = await run(client, run_input("ctx-1", "run-1", "whoami", forwardedProps=props))
    assert tool_result(events).endswith("of acme in ctx-1")
    assert events[-1].type == EventType.RUN_FINISHED


async def test_ag_ui_context_entries_are_the_fields_of_the_context(client: httpx.AsyncClient) -> None:
    entries = [{"description": "tenant", "value": "globex"}, {"description": "plan", "value": "pro"}]
    events = await run(client, run_input("ctx-2", "run-1", "whoami", context=entries))
    assert tool_result(events).endswith("of globex in ctx-2")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"forwardedProps": {"context": {"plan": "pro"}}}, "context.tenant: Field required"),
        ({"forwardedProps": {"context": {"tenant": 7}}}, "context.tenant: Input should be a valid string"),
        ({"context": [{"description": "tenant", "value": "a"}, {"description": "plan", "value": "gold"}]},
         "context.plan: Input should be 'free' or 'pro'"),
        ({"context": [{"description": "tenant", "value": "a"}], "forwardedProps": {"context": {"tenant": "a"}}},
         "send the context one way"),
    ],
)
async def test_a_bad_context_is_a_run_error_before_anything_runs(
    client: httpx.AsyncClient, extra: dict[str, Any], said: str
) -> None:
    events = await run(client, run_input("ctx-bad", "run-1", "whoami", **extra))
    assert [event.type for event in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert events[-1].code == "bad_request"
    assert said in events[-1].message
    assert (await client.get("/chats/ctx-bad/threads")).json()["threads"] == {}  # nothing ran, nothing stored


async def test_without_a_schema_entries_are_not_read_and_forwarded_context_is_refused() -> None:
    async with client_of() as client:
        entries = [{"description": "the page the user is on", "value": "/billing"}]
        events = await run(client, run_input("ctx-3", "run-1", "whoami", context=entries))
        assert tool_result(events).endswith("of - in ctx-3")
        refused = await run(client, run_input("ctx-4", "run-1", "whoami", forwardedProps={"context": {"a": 1}}))
        assert refused[-1].type == EventType.RUN_ERROR
        assert "takes no `context`" in refused[-1].message
