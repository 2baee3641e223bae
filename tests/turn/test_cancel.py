"""Cancelling a running turn (`Agency.cancel`, `POST /chats/{id}/turns/{turn_id}:cancel`): a turn in a slow tool and
a turn streaming text stop where they stand, the chat stays well-formed, and its next turn works."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agency_swarm import (
    Agency,
    Agent,
    ThreadStore,
    TurnCancelled,
    TurnNotRunning,
    UnknownTurn,
    function_tool,
)
from agency_swarm.serving import AuthSettings, create_app
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message
from faults.harness import check_threads
from serving_support import BOUND, live

INTERRUPTED = "Error: this call was interrupted before it finished; its result is unknown."


class Gates:
    """Where a turn waits for the test: inside the `slow` tool, or half-way through a streamed text."""

    def __init__(self) -> None:
        self.in_tool, self.in_text, self.never = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.tool_cancelled = False


class HaltingModel(ScriptedModel):
    """A streamed reply of `halt ...` stops after its first text delta until the turn is cancelled."""

    def __init__(self, script: Any, gates: Gates) -> None:
        super().__init__(script, name="halting")
        self.gates = gates

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        halting = "halt" in self._last_user(args[1])
        async for event in super().stream_response(*args, **kwargs):
            yield event
            if halting and event.type == "response.output_text.delta":
                self.gates.in_text.set()
                await self.gates.never.wait()

    @staticmethod
    def _last_user(items: Any) -> str:
        users = [item for item in items if isinstance(item, dict) and item.get("role") == "user"]
        return str(users[-1].get("content")) if users else ""


def script(call: ModelCall) -> Step:
    message = call.last_user_message
    if call.tool_outputs:
        return f"after the tool: {call.tool_outputs[-1]}"
    if "slow" in message:
        return ToolCall("slow")
    if "delegate" in message:
        return send_message("Developer", "please work slowly")
    if "halt" in message:
        return "halting words that take a while to arrive"
    return f"echo {message}"


def developer_script(call: ModelCall) -> Step:
    return "dev done" if call.tool_outputs else ToolCall("slow")


def agency_on(store: ThreadStore | None, gates: Gates) -> Agency:
    @function_tool
    async def slow() -> str:
        """Takes as long as the test wants."""
        gates.in_tool.set()
        try:
            await gates.never.wait()
        except asyncio.CancelledError:
            gates.tool_cancelled = True
            raise
        return "never"

    ceo = Agent(name="CEO", model=HaltingModel(script, gates), tools=[slow])
    developer = Agent(name="Developer", model=ScriptedModel(developer_script), tools=[slow])
    return Agency([ceo, [ceo, developer]], thread_store=store)


def assert_well_formed(threads: dict[str, list[dict[str, Any]]]) -> None:
    assert check_threads(threads, final=True) == []


def chat() -> str:
    return f"cancel-{uuid.uuid4().hex[:12]}"


async def test_a_turn_in_a_slow_tool_is_cancelled_and_the_chat_goes_on() -> None:
    gates = Gates()
    agency = agency_on(None, gates)
    chat_id = chat()
    running = asyncio.create_task(agency.get_response("be slow", chat_id=chat_id, turn_id="t-1"))
    await asyncio.wait_for(gates.in_tool.wait(), BOUND)
    await agency.cancel(chat_id, "t-1")
    with pytest.raises(TurnCancelled) as cancelled:
        await running
    assert (cancelled.value.chat_id, cancelled.value.turn_id) == (chat_id, "t-1")
    assert gates.tool_cancelled
    threads = await agency.get_threads(chat_id, include_marks=True)
    entry = threads["user->CEO"]
    assert [item.get("type") for item in entry] == [
        "agency_swarm.turn_started", None, "function_call", "function_call_output", "agency_swarm.turn_cancelled"
    ]
    assert entry[-2]["output"] == INTERRUPTED
    assert_well_formed(await agency.get_threads(chat_id))
    with pytest.raises(TurnNotRunning):
        await agency.cancel(chat_id, "t-1")
    with pytest.raises(TurnCancelled):  # the id names a cancelled turn: it is not run again
        await agency.get_response("be slow", chat_id=chat_id, turn_id="t-1")
    result = await agency.get_response("hello", chat_id=chat_id)
    assert result.final_output == "echo hello"
    assert_well_formed(await agency.get_threads(chat_id))


async def test_a_turn_streaming_text_ends_with_a_cancelled_event() -> None:
    gates = Gates()
    agency = agency_on(None, gates)
    chat_id = chat()
    stream = agency.get_response_stream("halt now", chat_id=chat_id)
    seen: list[str] = []

    async def read() -> None:
        async for event in stream:
            seen.append(event.type)

    reading = asyncio.create_task(read())
    await asyncio.wait_for(gates.in_text.wait(), BOUND)
    assert stream.turn_id is not None
    assert stream.turn_id.startswith("run-")
    await agency.cancel(chat_id)  # whichever turn of the chat runs
    await reading
    assert "text_delta" in seen
    assert seen[-1] == "cancelled"
    assert stream.cancelled
    with pytest.raises(TurnCancelled):
        _ = stream.result
    threads = await agency.get_threads(chat_id, include_marks=True)
    assert [item.get("type") for item in threads["user->CEO"]] == [None, "agency_swarm.turn_cancelled"]
    assert (await agency.get_response("next", chat_id=chat_id)).final_output == "echo next"
    assert_well_formed(await agency.get_threads(chat_id))


async def test_a_nested_turn_is_cancelled_in_the_tool_of_the_agent_it_messaged() -> None:
    gates = Gates()
    agency = agency_on(None, gates)
    chat_id = chat()
    running = asyncio.create_task(agency.get_response("delegate it", chat_id=chat_id))
    await asyncio.wait_for(gates.in_tool.wait(), BOUND)
    await agency.cancel(chat_id)
    with pytest.raises(TurnCancelled):
        await running
    threads = await agency.get_threads(chat_id)
    assert_well_formed(threads)
    assert threads["CEO->Developer"][-1] == {
        "type": "function_call_output", "call_id": threads["CEO->Developer"][-2]["call_id"], "output": INTERRUPTED,
    }
    assert (await agency.get_response("hello", chat_id=chat_id)).final_output == "echo hello"


async def test_cancel_refuses_unknown_and_ended_turns() -> None:
    agency = agency_on(None, Gates())
    chat_id = chat()
    with pytest.raises(UnknownTurn):
        await agency.cancel(chat_id, "nope")
    with pytest.raises(TurnNotRunning):
        await agency.cancel(chat_id)
    await agency.get_response("hi", chat_id=chat_id, turn_id="done-1")
    with pytest.raises(TurnNotRunning):
        await agency.cancel(chat_id, "done-1")
    with pytest.raises(UnknownTurn):
        await agency.cancel(chat_id, "done-2")


# -- over HTTP -----------------------------------------------------------------------------------------------


ALICE, BOB = f"alice-{uuid.uuid4().hex}", f"bob-{uuid.uuid4().hex}"


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


async def test_http_cancel_stops_a_streamed_turn_for_its_owner_only() -> None:
    gates = Gates()
    app = create_app(lambda store: agency_on(store, gates), store="memory",
                     auth=AuthSettings(tokens={"alice": ALICE, "bob": BOB}))
    chat_id = chat()
    async with live(app) as url, httpx.AsyncClient(base_url=url, timeout=BOUND) as http:
        alice, bob = {"authorization": f"Bearer {ALICE}"}, {"authorization": f"Bearer {BOB}"}
        async with http.stream("POST", f"/chats/{chat_id}/messages:stream", json={"message": "be slow"},
                               headers=alice) as response:
            turn_id = response.headers["turn-id"]
            await asyncio.wait_for(gates.in_tool.wait(), BOUND)
            where = f"/chats/{chat_id}/turns/{turn_id}:cancel"
            assert (await http.post(where, headers=bob)).status_code == 404  # not bob's chat
            assert (await http.post(f"/chats/{chat_id}/turns/other:cancel", headers=alice)).status_code == 404
            cancelled = await http.post(where, headers=alice)
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json() == {"turn_id": turn_id, "chat_id": chat_id, "status": "cancelled"}
            events = [event async for event in sse_events(response)]
        assert (events[-1]["type"], events[-1]["turn_id"]) == ("cancelled", turn_id)
        assert not any(event["type"] == "done" for event in events)
        again = await http.post(where, headers=alice)
        assert (again.status_code, again.json()["error"]["type"]) == (409, "turn_not_running")
        unknown = await http.post(f"/chats/{chat_id}/turns/nope:cancel", headers=alice)
        assert unknown.status_code == 404
        threads = (await http.get(f"/chats/{chat_id}/threads", headers=alice)).json()["threads"]
        assert_well_formed(threads)
        answer = await http.post(f"/chats/{chat_id}/messages", json={"message": "hello"}, headers=alice)
        assert answer.json()["final_output"] == "echo hello"


async def test_http_cancel_of_a_blocking_turn_answers_it_409_cancelled() -> None:
    gates = Gates()
    app = create_app(lambda store: agency_on(store, gates), store="memory")
    chat_id = chat()
    async with live(app) as url, httpx.AsyncClient(base_url=url, timeout=BOUND) as http:
        posted = asyncio.create_task(http.post(
            f"/chats/{chat_id}/messages", json={"message": "be slow"}, headers={"idempotency-key": "k1"}
        ))
        await asyncio.wait_for(gates.in_tool.wait(), BOUND)
        running = app.state.agency.thread_manager.running.find(chat_id)
        assert running is not None
        assert (await http.post(f"/chats/{chat_id}/turns/{running.turn_id}:cancel")).status_code == 200
        answer = await posted
        assert (answer.status_code, answer.json()["error"]["type"]) == (409, "cancelled")
        retried = await http.post(f"/chats/{chat_id}/messages", json={"message": "be slow"},
                                  headers={"idempotency-key": "k1"})
        assert retried.status_code == 409  # the key names the cancelled turn
