"""What the public views of a chat show: the items its models read, the bookkeeping marks between them only when asked
(`include_marks=True`, `?marks=true`), on every store; and a thread `agents.Runner` takes as it is (`model_input`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import Agent as SDKAgent
from agents import Runner
from agents.exceptions import UserError
from agents.models.chatcmpl_converter import Converter

from agency_swarm import (
    Agency,
    Agent,
    FileThreadStore,
    MemoryThreadStore,
    SQLThreadStore,
    ThreadStore,
    function_tool,
    model_input,
)
from agency_swarm.serving import create_app
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message
from postgres_support import require_postgres

Threads = dict[str, list[dict[str, Any]]]
RUN = uuid.uuid4().hex[:10]  # PostgreSQL outlives the test: chat ids of this run are its own


@function_tool(needs_approval=True)
def deploy() -> str:
    """Deploys the site."""
    return "deployed"


def ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return send_message("Developer", f"do: {call.last_user_message}")
    return f"done: {call.tool_outputs[-1]}"


def developer_script(call: ModelCall) -> Step:
    if "deploy" in call.last_user_message and not call.tool_outputs:
        return ToolCall("deploy")
    return f"built: {call.last_user_message}"


def team(store: ThreadStore | None) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    ceo_model, developer_model = ScriptedModel(ceo_script), ScriptedModel(developer_script)
    ceo = Agent(name="CEO", model=ceo_model)
    developer = Agent(name="Developer", tools=[deploy], model=developer_model)
    return Agency([ceo, [ceo, developer]], thread_store=store), ceo_model, developer_model


async def marked_chat(agency: Agency, chat_id: str) -> str:
    """Two turns with turn ids (a `turn_started` mark each), the second paused in the Developer's thread for an
    approval and resumed (an `awaiting_approval` and an `approved_run` mark). Returns the approved call's id."""
    first = await agency.get_response("build the site", chat_id=chat_id, turn_id="t1")
    assert first.final_output == "done: built: do: build the site"
    paused = await agency.get_response("deploy it", chat_id=chat_id, turn_id="t2")
    assert paused.paused
    [waiting] = paused.interruptions
    finished = await agency.resume(chat_id, approve=[waiting.call_id])
    assert finished.final_output == "done: built: do: deploy it"
    return waiting.call_id


def marks_of(threads: Threads) -> dict[str, list[dict[str, Any]]]:
    return {key: [item for item in items if str(item.get("type", "")).startswith("agency_swarm.")]
            for key, items in threads.items()}


def expected_marks(call_id: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "user->CEO": [{"type": "agency_swarm.turn_started", "turn_id": "t1"},
                      {"type": "agency_swarm.turn_started", "turn_id": "t2"}],
        "CEO->Developer": [{"type": "agency_swarm.awaiting_approval", "call_id": call_id, "steps": 1},
                           {"type": "agency_swarm.approved_run", "call_id": call_id}],
    }


def assert_views(shown: Threads, marked: Threads, call_id: str) -> None:
    """`shown` has no marks and is `marked` without its marks; `marked` has the chat's marks."""
    assert marks_of(shown) == {"user->CEO": [], "CEO->Developer": []}
    assert marks_of(marked) == expected_marks(call_id)
    assert shown == {key: [item for item in items if item not in marks_of(marked)[key]]
                     for key, items in marked.items()}
    assert [item.get("role") or item.get("type") for item in shown["user->CEO"]] == [
        "user", "function_call", "function_call_output", "assistant"
    ] * 2


# -- every store -----------------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "file", "sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[], ThreadStore]]:
    """Opens a store on the same place each call (the memory store: the same one), as a restarted process would."""
    kind = request.param
    shared = MemoryThreadStore()
    url = require_postgres() if kind == "postgres" else f"sqlite:///{tmp_path}/chats.db"

    def open_store() -> ThreadStore:
        if kind == "memory":
            return shared
        if kind == "file":
            return FileThreadStore(tmp_path / "chats")
        return SQLThreadStore(url)

    yield open_store
    if kind == "postgres":
        cleaner = SQLThreadStore(url)
        try:
            for chat_id in await cleaner.list_chats():
                if chat_id.startswith(RUN):
                    await cleaner.delete(chat_id)
        finally:
            await cleaner.aclose()


async def test_get_threads_shows_no_marks_unless_asked_on_every_store(opener: Callable[[], ThreadStore]) -> None:
    chat_id = f"{RUN}-{uuid.uuid4().hex[:8]}"
    async with team(opener())[0] as agency:
        call_id = await marked_chat(agency, chat_id)
        shown = await agency.get_threads(chat_id)
        assert marks_of(shown) == {"user->CEO": [], "CEO->Developer": []}
        marked = await agency.get_threads(chat_id, include_marks=True)
        assert_views(shown, marked, call_id)
        assert agency.thread_manager.get_threads(chat_id) == shown
        assert agency.thread_manager.get_threads(chat_id, include_marks=True) == marked
    async with team(opener())[0] as restarted:  # a new process reads what the store holds
        assert await restarted.get_threads(chat_id) == shown
        assert await restarted.get_threads(chat_id, include_marks=True) == marked
        assert restarted.thread_manager.get_threads(chat_id) == shown
        assert restarted.thread_manager.get_threads(chat_id, include_marks=True) == marked


async def test_get_chat_threads_over_http_shows_marks_only_with_marks_true(opener: Callable[[], ThreadStore]) -> None:
    chat_id = f"{RUN}-{uuid.uuid4().hex[:8]}"
    app = create_app(lambda store: team(store)[0], store=opener())
    agency: Agency = app.state.agency
    try:
        call_id = await marked_chat(agency, chat_id)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            plain = await client.get(f"/chats/{chat_id}/threads")
            unmarked = await client.get(f"/chats/{chat_id}/threads", params={"marks": "false"})
            marked = await client.get(f"/chats/{chat_id}/threads", params={"marks": "true"})
        assert plain.status_code == unmarked.status_code == marked.status_code == 200
        assert marks_of(plain.json()["threads"]) == {"user->CEO": [], "CEO->Developer": []}
        assert plain.json() == unmarked.json() == {"chat_id": chat_id, "threads": await agency.get_threads(chat_id)}
        assert marked.json()["threads"] == await agency.get_threads(chat_id, include_marks=True)
        assert_views(plain.json()["threads"], marked.json()["threads"], call_id)
    finally:
        await agency.aclose()


def test_the_openapi_schema_documents_the_marks_parameter() -> None:
    app = create_app(lambda store: team(store)[0], store=MemoryThreadStore())
    [parameter] = [p for p in app.openapi()["paths"]["/chats/{chat_id}/threads"]["get"]["parameters"]
                   if p["name"] == "marks"]
    assert parameter["in"] == "query"
    assert parameter["schema"]["default"] is False
    assert "bookkeeping" in parameter["description"]


# -- handing a thread to a model ---------------------------------------------------------------------------------


async def test_a_thread_from_get_threads_is_what_runner_hands_its_model_as_our_loop_does() -> None:
    """`model_input(thread)` + a new message, run by `agents.Runner`, reaches its model exactly as the same message
    reaches the agent's model in our loop: no marks, no `send_call_id`; and the SDK's converter takes it."""
    agency, ceo_model, developer_model = team(None)
    await marked_chat(agency, "c")
    threads = await agency.get_threads("c")
    assert any("send_call_id" in item for item in threads["CEO->Developer"])  # kept, as documented
    ceo_calls, developer_calls = len(ceo_model.calls), len(developer_model.calls)
    await agency.get_response("report", chat_id="c")
    ours = {"user->CEO": ceo_model.calls[ceo_calls].input,
            "CEO->Developer": developer_model.calls[developer_calls].input}
    for key, new_message in (("user->CEO", "report"), ("CEO->Developer", "do: report")):
        without_send_call_ids = [{name: value for name, value in item.items() if name != "send_call_id"}
                                 for item in threads[key]]
        assert model_input(threads[key]) == without_send_call_ids  # nothing else to strip: no marks
        given = [*model_input(threads[key]), {"role": "user", "content": new_message}]
        runner_model = ScriptedModel(["fine"])
        await Runner.run(SDKAgent(name=key.split("->")[1], model=runner_model), given)
        assert runner_model.calls[0].input == ours[key]
        assert Converter.items_to_messages(model_input(threads[key]))  # a Chat Completions model takes it too


async def test_the_marked_view_and_send_call_ids_are_what_a_model_refuses() -> None:
    """Why the public view leaves marks out and `model_input` strips `send_call_id`: the SDK refuses both."""
    agency, _, _ = team(None)
    await marked_chat(agency, "c")
    marked = await agency.get_threads("c", include_marks=True)
    shown = await agency.get_threads("c")
    with pytest.raises(UserError):
        Converter.items_to_messages(marked["user->CEO"])  # a turn mark
    Converter.items_to_messages(shown["user->CEO"])
    with pytest.raises(UserError):
        Converter.items_to_messages(shown["CEO->Developer"])  # a message with its send_call_id
    assert model_input(marked["CEO->Developer"]) == model_input(shown["CEO->Developer"])


def test_model_input_leaves_the_given_items_as_they_are() -> None:
    message = {"role": "user", "content": "hi", "send_call_id": "call_1"}
    answer = {"type": "message", "role": "assistant", "content": []}
    items = [{"type": "agency_swarm.turn_started", "turn_id": "t"}, message, answer]
    assert model_input(items) == [{"role": "user", "content": "hi"}, answer]
    assert model_input(items)[1] is answer
    assert message == {"role": "user", "content": "hi", "send_call_id": "call_1"}
    assert len(items) == 3
