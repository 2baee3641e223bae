"""`POST /ag-ui` in process: every event validated by ag_ui.core's types, each run's sequence well formed, for a
nested CEO -> Developer -> QA turn, an approval and its resume, a tool error, model errors, a retried run; bad input."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, EventType
from agents import WebSearchTool
from openai.types.responses import ResponseFunctionWebSearch

from ag_ui_app import SECRET, build_agency
from ag_ui_support import check_well_formed, client_messages, events_of, of_type, run_input
from agency_swarm import Agency, Agent, ConfigError
from agency_swarm.serving import create_app
from agency_swarm.testing import ScriptedModel, send_message

TOKEN = "ag-ui-test-token"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(build_agency, store="memory", ag_ui=True, auth_token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://ag-ui.test", headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        yield http


async def run(client: httpx.AsyncClient, body: dict[str, Any]) -> list[BaseEvent]:
    response = await client.post("/ag-ui", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response.text)
    check_well_formed(events)
    return events


def first(events: list[BaseEvent], kind: EventType, **fields: Any) -> Any:
    return next(e for e in of_type(events, kind) if all(getattr(e, k) == v for k, v in fields.items()))


async def test_a_nested_turn_shows_each_recipient_as_a_sub_agent_under_its_send(client: httpx.AsyncClient) -> None:
    events = await run(client, run_input("nested-1", "run-1", "Build it"))

    developer = first(events, EventType.SUBAGENT_STARTED, name="Developer")
    qa = first(events, EventType.SUBAGENT_STARTED, name="QA")
    ceo_send = first(events, EventType.TOOL_CALL_START, subagent_run_id=None)
    dev_send = first(events, EventType.TOOL_CALL_START, subagent_run_id=developer.subagent_run_id)
    assert (ceo_send.tool_call_name, dev_send.tool_call_name) == ("send_message", "send_message")
    assert developer.parent_tool_call_id == ceo_send.tool_call_id
    assert developer.parent_subagent_run_id is None
    assert qa.parent_tool_call_id == dev_send.tool_call_id
    assert qa.parent_subagent_run_id == developer.subagent_run_id
    assert developer.description == "Writes the code."
    assert developer.metadata == {"agency_swarm": {"caller": "CEO", "depth": 1, "message": "Build it"}}
    texts = {
        start.name: "".join(c.delta for c in of_type(events, EventType.TEXT_MESSAGE_CONTENT)
                            if c.message_id == start.message_id)
        for start in of_type(events, EventType.TEXT_MESSAGE_START)
    }
    assert texts == {"QA": "QA checked", "Developer": "Dev: QA checked", "CEO": "CEO: Dev: QA checked"}
    assert first(events, EventType.TEXT_MESSAGE_START, name="QA").subagent_run_id == qa.subagent_run_id
    finished = {e.subagent_run_id: e.result for e in of_type(events, EventType.SUBAGENT_FINISHED)}
    assert finished == {qa.subagent_run_id: "QA checked", developer.subagent_run_id: "Dev: QA checked"}
    end = events[-1]
    assert end.type == EventType.RUN_FINISHED
    assert (end.thread_id, end.run_id) == ("nested-1", "run-1")
    assert end.result == "CEO: Dev: QA checked"
    assert end.outcome.type == "success"
    assert [(usage.model, usage.input_tokens) for usage in end.usage] == [("scripted-model", 50)]
    threads = (await client.get("/chats/nested-1/threads")).json()["threads"]
    assert sorted(threads) == ["CEO->Developer", "Developer->QA", "user->CEO"]  # the stored threads are the record


async def test_an_approval_interrupts_the_run_and_the_next_input_resumes_it(client: httpx.AsyncClient) -> None:
    user = {"id": "u1", "role": "user", "content": "please approve"}
    paused = await run(client, run_input("approve-1", "run-1", messages=[user]))

    qa = first(paused, EventType.SUBAGENT_STARTED, name="QA")
    developer = first(paused, EventType.SUBAGENT_STARTED, name="Developer")
    end = paused[-1]
    assert end.type == EventType.RUN_FINISHED
    assert end.outcome.type == "interrupt"
    [interrupt] = end.outcome.interrupts
    deploy = first(paused, EventType.TOOL_CALL_START, tool_call_name="deploy")
    assert (interrupt.id, interrupt.tool_call_id, interrupt.reason) == (deploy.tool_call_id,) * 2 + ("tool_call",)
    assert interrupt.subagent_run_id == qa.subagent_run_id
    assert interrupt.response_schema["required"] == ["approved"]
    assert interrupt.metadata["agency_swarm"]["tool"] == "deploy"
    suspended = {e.subagent_run_id: e.outcome for e in of_type(paused, EventType.SUBAGENT_FINISHED)}
    assert suspended[qa.subagent_run_id].interrupt_ids == [interrupt.id]
    assert suspended[developer.subagent_run_id].type == "suspended"
    assert not of_type(paused, EventType.TOOL_CALL_RESULT) or all(
        result.tool_call_id != deploy.tool_call_id for result in of_type(paused, EventType.TOOL_CALL_RESULT)
    )

    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    body = run_input("approve-1", "run-2", messages=client_messages(paused, user), resume=resume)
    resumed = await run(client, body)

    assert not of_type(resumed, EventType.TOOL_CALL_START)  # the client holds every call the resume reports again
    result = first(resumed, EventType.TOOL_CALL_RESULT, tool_call_id=interrupt.id)
    assert (result.content, result.subagent_run_id) == ("deployed prod", qa.subagent_run_id)
    again = first(resumed, EventType.SUBAGENT_STARTED, name="QA")
    assert again.subagent_run_id == qa.subagent_run_id  # the same invocation goes on
    assert resumed[-1].result == "CEO: Dev: QA: deployed prod"


@pytest.mark.parametrize(
    ("payload", "status", "model_reads"),
    [
        ({"approved": False, "message": "Not on a Friday."}, "resolved", "Not on a Friday."),
        ({"approved": False}, "resolved", "Tool execution was not approved."),
        (None, "cancelled", "Tool execution was not approved."),
    ],
)
async def test_a_rejection_and_a_cancelled_interrupt_reach_the_model(
    client: httpx.AsyncClient, payload: Any, status: str, model_reads: str
) -> None:
    paused = await run(client, run_input("reject-1", "run-1", "approve please"))
    [interrupt] = paused[-1].outcome.interrupts
    entry = {"interruptId": interrupt.id, "status": status, **({"payload": payload} if payload else {})}

    resumed = await run(client, run_input("reject-1", "run-2", resume=[entry]))

    assert first(resumed, EventType.TOOL_CALL_RESULT, tool_call_id=interrupt.id).content == model_reads
    assert resumed[-1].result == f"CEO: Dev: QA: {model_reads}"


async def test_a_tool_error_is_the_calls_result_and_the_run_goes_on(client: httpx.AsyncClient) -> None:
    events = await run(client, run_input("tool-1", "run-1", "toolerror now"))

    broken = first(events, EventType.TOOL_CALL_START, tool_call_name="broken")
    result = first(events, EventType.TOOL_CALL_RESULT, tool_call_id=broken.tool_call_id)
    assert result.content.startswith("Error: tool 'broken' failed")  # what the model reads, as stored
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result.startswith("CEO: Dev: Error")


async def test_a_recipients_model_error_is_a_sub_agent_error_and_the_caller_goes_on(client: httpx.AsyncClient) -> None:
    events = await run(client, run_input("sub-1", "run-1", "suberror now"))

    developer = first(events, EventType.SUBAGENT_STARTED, name="Developer")
    [error] = of_type(events, EventType.SUBAGENT_ERROR)
    assert error.subagent_run_id == developer.subagent_run_id
    assert error.code == "agent_failed"
    assert SECRET not in error.message
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result.startswith("CEO: Error")


async def test_a_model_error_ends_the_run_with_a_code_and_no_internals(client: httpx.AsyncClient) -> None:
    response = await client.post("/ag-ui", json=run_input("model-1", "run-1", "modelerror now"))

    events = events_of(response.text)
    check_well_formed(events)
    start = first(events, EventType.TEXT_MESSAGE_START, name="CEO")  # the text streamed before the failure ends
    assert first(events, EventType.TEXT_MESSAGE_END, message_id=start.message_id)
    end = events[-1]
    assert (end.type, end.code) == (EventType.RUN_ERROR, "internal_error")
    assert SECRET not in response.text
    assert "Traceback" not in response.text


async def test_a_retried_run_is_the_same_turn(client: httpx.AsyncClient) -> None:
    agents = client._transport.app.state.agency.agents  # type: ignore[attr-defined]
    body = run_input("retry-1", "run-1", "Build it")
    events = await run(client, body)
    calls = {name: len(agent.model.calls) for name, agent in agents.items()}
    retry = run_input("retry-1", "run-1", messages=client_messages(events, body["messages"][0]))  # as clients retry
    again = await run(client, retry)

    assert {name: len(agent.model.calls) for name, agent in agents.items()} == calls  # no model ran again
    assert again[-1].result == events[-1].result == "CEO: Dev: QA checked"
    threads = (await client.get("/chats/retry-1/threads")).json()["threads"]
    assert [item["content"] for item in threads["user->CEO"] if item.get("role") == "user"] == ["Build it"]
    assert not of_type(again, EventType.TOOL_CALL_START)  # the client holds every call already
    shown = first(again, EventType.TEXT_MESSAGE_START, name="CEO")  # the answer, in a message of its own
    assert shown.message_id not in {m["id"] for m in retry["messages"]}
    other = await run(client, run_input("retry-1", "run-2", "Build it"))  # another runId: another turn
    assert other[-1].result == "CEO: Dev: QA checked"
    threads = (await client.get("/chats/retry-1/threads")).json()["threads"]
    assert [item["content"] for item in threads["user->CEO"] if item.get("role") == "user"] == ["Build it"] * 2


async def test_a_recipient_named_in_forwarded_props_gets_the_message(client: httpx.AsyncClient) -> None:
    events = await run(client, run_input("recipient-1", "run-1", "hi", forwardedProps={"recipient_agent": "CEO"}))
    assert events[-1].type == EventType.RUN_FINISHED
    refused = await run(client, run_input("recipient-2", "run-1", "hi", forwardedProps={"recipient_agent": "QA"}))
    assert (refused[-1].type, refused[-1].code) == (EventType.RUN_ERROR, "bad_request")
    assert "entry point" in refused[-1].message


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (run_input("bad-1", "run-1", messages=[{"id": "a", "role": "assistant", "content": "hi"}]), "bad_request",
         "no user message"),
        (run_input("bad/2", "run-1", "hi"), "invalid_chat_id", "chat"),
        (run_input("agency_swarm.healthz", "run-1", "hi"), "invalid_chat_id", "reserved"),
        (run_input("bad-3", " ", "hi"), "bad_request", "runId"),
        (run_input("bad-4", "run-1", messages=[{"id": "u", "role": "user", "content": [
            {"type": "image", "source": {"type": "url", "value": "https://example.test/a.png"}}]}]),
         "bad_request", "text parts"),
        (run_input("bad-5", "run-1", resume=[{"interruptId": "call_x", "status": "resolved", "payload": "yes"}]),
         "bad_request", "payload must be"),
        (run_input("bad-6", "run-1", resume=[{"interruptId": "call_x", "status": "resolved",
                                              "payload": {"approved": True}}]), "nothing_to_resume", ""),
    ],
)
async def test_input_it_cannot_run_ends_the_run_with_run_error(
    client: httpx.AsyncClient, body: dict[str, Any], code: str, says: str
) -> None:
    events = await run(client, body)
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert events[-1].code == code
    assert says in events[-1].message


async def test_a_paused_chat_refuses_a_new_message_and_an_unknown_interrupt(client: httpx.AsyncClient) -> None:
    paused = await run(client, run_input("paused-1", "run-1", "approve please"))
    [interrupt] = paused[-1].outcome.interrupts

    refused = await run(client, run_input("paused-1", "run-2", "something else"))
    assert refused[-1].code == "chat_paused"
    unknown = [{"interruptId": "call_nope", "status": "resolved", "payload": {"approved": True}}]
    wrong = await run(client, run_input("paused-1", "run-3", resume=unknown))
    assert wrong[-1].code == "bad_request"
    assert interrupt.id in wrong[-1].message


async def test_the_endpoint_wants_the_token_and_an_agui_body(client: httpx.AsyncClient) -> None:
    body = run_input("auth-1", "run-1", "hi")
    assert (await client.post("/ag-ui", json=body, headers={"Authorization": "Bearer wrong"})).status_code == 401
    malformed = await client.post("/ag-ui", json={"threadId": "x"})
    assert malformed.status_code == 422
    assert malformed.json()["error"]["type"] == "invalid_request"
    form = await client.post("/ag-ui", content=b'{"threadId": "t", "runId": "r", "messages": []}',
                             headers={"content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 200  # a JSON body is taken whatever its Content-Type, as on every route
    assert "/ag-ui" in (await client.get("/openapi.json")).json()["paths"]


async def test_without_ag_ui_there_is_no_endpoint() -> None:
    app = create_app(build_agency, store="memory")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as http:
        assert (await http.post("/ag-ui", json=run_input("t", "r", "hi"))).status_code == 404
    with pytest.raises(ConfigError, match="ag_ui must be True or False"):
        create_app(build_agency, store="memory", ag_ui="yes")  # type: ignore[arg-type]


async def test_a_hosted_item_is_an_activity_of_its_agents_lane() -> None:
    search = ResponseFunctionWebSearch.model_validate({
        "id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "news"},
    })

    def factory(store: Any) -> Agency:
        boss = Agent(name="Boss", model=ScriptedModel.each_turn([send_message("Searcher", "look"), "summed up"]))
        searcher = Agent(name="Searcher", tools=[WebSearchTool()], model=ScriptedModel([[search, "Found it."]]))
        return Agency([boss, [boss, searcher]], thread_store=store)

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(create_app(factory, store="memory", ag_ui=True)), base_url="http://t"
    ) as http:
        events = await run(http, run_input("hosted-1", "run-1", "go"))

    [activity] = of_type(events, EventType.ACTIVITY_SNAPSHOT)
    searcher = first(events, EventType.SUBAGENT_STARTED, name="Searcher")
    assert (activity.activity_type, activity.subagent_run_id) == ("web_search_call", searcher.subagent_run_id)
    assert activity.content["action"]["query"] == "news"


def test_without_the_extra_the_endpoint_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.startswith("agency_swarm.serving._ag_ui")]:
        monkeypatch.delitem(sys.modules, name)
    for name in [name for name in sys.modules if name == "ag_ui" or name.startswith("ag_ui.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if ag-ui-protocol were not installed
    with pytest.raises(ConfigError, match=r'pip install "\.\[ag-ui\]" in a clone'):
        create_app(build_agency, store="memory", ag_ui=True)
