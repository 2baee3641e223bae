"""Durable turns on DBOS and the real PostgreSQL: submitted once per key, events by id, results, failures."""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from agents import function_tool
from dbos import DBOSClient

from agency_swarm import (
    Agency,
    Agent,
    AttachmentError,
    ConfigError,
    Event,
    RunResult,
    SQLThreadStore,
    TurnLockLost,
    image_part,
)
from agency_swarm import durable as durable_package
from agency_swarm.durable import DurableTurns, Observed, TurnFailed, UnknownTurn
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall
from postgres_support import require_postgres

calls: list[str] = []


@function_tool
def record(note: str) -> str:
    """Record a note."""
    calls.append(note)
    return f"recorded {note}"


@function_tool(needs_approval=True)
def guarded(note: str) -> str:
    """Record a note, once a person approved."""
    calls.append(f"guarded {note}")
    return f"recorded {note}"


lost_once: list[bool] = []


def step(call: ModelCall) -> Step:
    if call.last_user_message == "fail":
        raise RuntimeError("the model broke")
    if call.last_user_message == "lose the lock" and not lost_once:
        lost_once.append(True)  # as when this worker was cut off and another took the chat over
        raise TurnLockLost("the turn lock's session ended", chat_id="any")
    if not call.tool_outputs:
        tool = "guarded" if call.last_user_message.startswith("ask") else "record"
        return ToolCall(tool, {"note": call.last_user_message})
    return f"done: {call.last_user_message}"


@pytest.fixture
async def turns() -> AsyncIterator[DurableTurns]:
    url = require_postgres()
    agent = Agent(name="A", model=ScriptedModel(step), tools=[record, guarded])
    agency = Agency(agent, thread_store=SQLThreadStore(url))
    run = uuid.uuid4().hex[:8]
    durable = DurableTurns(agency, database_url=url, executor_id=f"test-{run}", queue_name=f"test_{run}")
    await durable.launch()
    yield durable
    client = DBOSClient(system_database_url=url)
    try:
        await client.delete_queue_async(durable.queue_name)  # the database outlives the tests: leave no queue behind
    finally:
        client.destroy()
    await durable.aclose()
    await agency.aclose()


def chat() -> str:
    return f"durable-{uuid.uuid4().hex[:10]}"


async def test_a_submitted_turn_runs_once_and_its_events_end_with_the_answer(turns: DurableTurns) -> None:
    calls.clear()
    chat_id = chat()
    handle = await turns.submit("hello", chat_id=chat_id)
    result = await handle.result()
    assert result.final_output == "done: hello"
    assert await handle.status() == "done"
    events = [event async for event in handle.events()]
    assert [event.id for event in events] == list(range(len(events)))
    kinds = [event.type for event in events]
    assert kinds[0] == "turn_attempt"
    assert "tool_called" in kinds
    assert "tool_output" in kinds
    assert kinds[-1] == "agent_finished"
    assert calls == ["hello"]
    threads = await turns.agency.get_threads(chat_id)
    assert [item.get("content") for item in threads["user->A"] if item.get("role") == "user"] == ["hello"]


async def test_the_same_key_is_the_same_turn_never_a_second_one(turns: DurableTurns) -> None:
    calls.clear()
    chat_id = chat()
    first = await turns.submit("hello", chat_id=chat_id, key="request-1")
    again = await turns.submit("hello", chat_id=chat_id, key="request-1")
    assert first.turn_id == again.turn_id
    assert (await again.result()).final_output == (await first.result()).final_output == "done: hello"
    other_chat = await turns.submit("hello", chat_id=chat(), key="request-1")
    assert other_chat.turn_id != first.turn_id  # keys are per chat
    await other_chat.result()
    assert calls == ["hello", "hello"]


async def test_events_after_an_id_are_the_rest_exactly_once(turns: DurableTurns) -> None:
    handle = await turns.submit("hello", chat_id=chat())
    await handle.result()
    every = [event async for event in handle.events()]
    for cut in range(len(every)):
        rest = [event async for event in handle.events(after=cut)]
        assert rest == every[cut + 1:]


async def test_a_chats_turns_run_in_the_order_submitted(turns: DurableTurns) -> None:
    chat_id = chat()
    handles = [await turns.submit(f"m{n}", chat_id=chat_id) for n in range(5)]
    for handle in handles:
        await handle.result()
    threads = await turns.agency.get_threads(chat_id)
    users = [item["content"] for item in threads["user->A"] if item.get("role") == "user" and "type" not in item]
    assert users == [f"m{n}" for n in range(5)]


async def test_a_failed_turn_says_why_in_its_result_and_its_events(turns: DurableTurns) -> None:
    handle = await turns.submit("fail", chat_id=chat())
    with pytest.raises(TurnFailed) as failed:
        await handle.result()
    assert failed.value.kind == "internal_error"
    assert await handle.status() == "failed"
    events: list[Any] = [event async for event in handle.events()]
    assert events[-1].type == "turn_failed"
    assert events[-1].data["kind"] == "internal_error"
    assert "model broke" not in str(events[-1].data)  # an internal error's text stays in the log


async def test_a_turn_id_of_another_chat_is_unknown(turns: DurableTurns) -> None:
    handle = await turns.submit("hello", chat_id=chat())
    await handle.result()
    with pytest.raises(UnknownTurn):
        turns.handle(chat(), handle.turn_id)
    assert turns.handle(handle.chat_id, handle.turn_id).turn_id == handle.turn_id


def test_the_durable_package_exports_a_sorted_public_surface() -> None:
    exported = [
        "DurableEvent", "DurableTurns", "Observed", "TurnFailed", "TurnHandle", "TurnObserver", "TurnStatus",
        "UnknownTurn",
    ]
    assert durable_package.__all__ == sorted(durable_package.__all__) == exported


async def test_a_turn_that_lost_its_lock_is_run_again_in_its_step_and_finishes(turns: DurableTurns) -> None:
    lost_once.clear()
    chat_id = chat()
    handle = await turns.submit("lose the lock", chat_id=chat_id)
    result = await handle.result()
    assert lost_once == [True]
    assert result.final_output == "done: lose the lock"
    threads = await turns.agency.get_threads(chat_id)
    users = [item for item in threads["user->A"] if item.get("role") == "user" and "type" not in item]
    assert len(users) == 1  # run again by its turn id: the message is not stored twice


async def test_a_durable_resume_keeps_the_rejection_message_for_the_model(turns: DurableTurns) -> None:
    calls.clear()
    chat_id = chat()
    paused = await (await turns.submit("ask first", chat_id=chat_id)).result()
    [waiting] = paused.interruptions
    with pytest.raises(ConfigError):
        await turns.resume(chat_id=chat_id, reject={waiting.call_id: 5})
    resumed = await turns.resume(chat_id=chat_id, reject={waiting.call_id: "Not before Monday."})
    assert (await resumed.result()).final_output == "done: ask first"
    assert calls == []
    threads = await turns.agency.get_threads(chat_id)
    outputs = [item["output"] for item in threads["user->A"] if item.get("type") == "function_call_output"]
    assert outputs == ["Not before Monday."]


async def test_a_durable_resume_applies_its_decisions_once_per_key(turns: DurableTurns) -> None:
    calls.clear()
    chat_id = chat()
    paused = await (await turns.submit("ask first", chat_id=chat_id)).result()
    [waiting] = paused.interruptions
    first = await turns.resume(chat_id=chat_id, approve=[waiting.call_id], key="go")
    again = await turns.resume(chat_id=chat_id, approve=[waiting.call_id], key="go")
    assert first.turn_id == again.turn_id
    assert (await first.result()).final_output == "done: ask first"
    assert calls == ["guarded ask first"]
    wrong = await turns.resume(chat_id=chat_id, approve=["call_nobody_made"])
    with pytest.raises(TurnFailed) as failed:
        await wrong.result()
    assert failed.value.kind in ("bad_request", "nothing_to_resume")


async def test_a_submitted_image_is_stored_before_it_is_queued_and_the_model_gets_it(turns: DurableTurns) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    chat_id = chat()
    message = [{"role": "user", "content": [{"type": "input_text", "text": "hello"}, image_part(png)]}]
    handle = await turns.submit(message, chat_id=chat_id)  # type: ignore[arg-type]
    result = await handle.result()
    assert result.final_output == "done: hello"
    assert result.new_items[0]["content"][1]["attachment"]["sha256"] == hashlib.sha256(png).hexdigest()
    model = turns.agency.entry_points[0].model
    assert isinstance(model, ScriptedModel)
    assert model.calls[-1].input[0]["content"][1]["image_url"] == message[0]["content"][1]["image_url"]
    with pytest.raises(AttachmentError, match="not valid base64"):
        await turns.submit([{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,@@", "detail": "auto"}]}], chat_id=chat_id)
    await turns.agency.thread_manager.delete_chat(chat_id)


class Recorder:
    """A TurnObserver keeping what it is told (one that fails, with `broken`)."""

    def __init__(self, *, broken: bool = False) -> None:
        self.broken, self.events, self.ends = broken, list[tuple[dict[str, Any], str]](), list[Any]()

    async def event(self, data: Mapping[str, Any], event: Event) -> None:
        self.events.append((dict(data), event.type))
        if self.broken:
            raise RuntimeError("the observer broke")

    async def ended(self, data: Mapping[str, Any], outcome: RunResult | Exception) -> None:
        self.ends.append((dict(data), outcome))
        if self.broken:
            raise RuntimeError("the observer broke")


async def test_an_observer_is_told_an_observed_turns_events_and_end_and_its_failure_fails_nothing(
    turns: DurableTurns,
) -> None:
    seen, broken = Recorder(), Recorder(broken=True)
    turns.observe("seen", seen)
    turns.observe("broken", broken)
    chat_id = f"observed-{uuid.uuid4().hex[:8]}"
    done = await (await turns.submit("note", chat_id=chat_id, observed=Observed("seen", {"task": "t1"}))).result()
    failed = await turns.submit("fail", chat_id=chat_id, observed=Observed("seen", {"task": "t2"}))
    with pytest.raises(TurnFailed):
        await failed.result()
    despite = await (await turns.submit("again", chat_id=chat_id, observed=Observed("broken"))).result()
    unobserved = await (await turns.submit("quiet", chat_id=chat_id)).result()
    assert {data["task"] for data, _ in seen.events} == {"t1", "t2"}
    assert ({"task": "t1"}, "tool_called") in seen.events
    assert [data for data, _ in seen.ends] == [{"task": "t1"}, {"task": "t2"}]
    assert seen.ends[0][1].final_output == done.final_output == "done: note"
    assert isinstance(seen.ends[1][1], TurnFailed)
    assert despite.final_output == "done: again"  # the broken observer's errors are logged, the turn goes on
    assert len(broken.ends) == 1
    assert unobserved.final_output == "done: quiet"
    assert turns.turn_id(chat_id, "k") == turns.turn_id(chat_id, "k") != turns.turn_id(chat_id, "k", resume=True)
