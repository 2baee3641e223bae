"""How durable turns are waited for and streamed without polling: events written in batches (one database write for
a quick turn, and a held event written on time while the turn waits), a waiter told by the worker that ran the turn,
and a waiter in another process woken by the turn's stream."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from agents import function_tool

from agency_swarm import Agency, Agent, SQLThreadStore
from agency_swarm.durable import DurableTurns, TurnHandle
from agency_swarm.durable import _stream as durable_stream
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall
from postgres_support import require_postgres
from test_durable_recovery import Worker, finished, forget_queue

gates: dict[str, asyncio.Event] = {}


@function_tool
async def wait_for(gate: str) -> str:
    """Wait until the test opens the gate."""
    await gates[gate].wait()
    return f"opened {gate}"


def step(call: ModelCall) -> Step:
    message = call.last_user_message
    if message.startswith("gate ") and not call.tool_outputs:
        return ToolCall("wait_for", {"gate": message.removeprefix("gate ")})
    return f"done: {message}"


@pytest.fixture
async def turns() -> AsyncIterator[DurableTurns]:
    url = require_postgres()
    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[wait_for]), thread_store=SQLThreadStore(url))
    run = uuid.uuid4().hex[:8]
    durable = DurableTurns(agency, database_url=url, executor_id=f"waits-{run}", queue_name=f"waits_{run}")
    await durable.launch()
    yield durable
    await forget_queue(url, durable.queue_name)
    await durable.aclose()
    await agency.aclose()


async def stream_entries(turn_id: str) -> int:
    connection = await asyncpg.connect(require_postgres())
    try:
        return int(await connection.fetchval("SELECT count(*) FROM dbos.streams WHERE workflow_uuid = $1", turn_id))
    finally:
        await connection.close()


def chat() -> str:
    return f"waits-{uuid.uuid4().hex[:10]}"


async def test_a_turns_events_within_the_batch_time_are_one_write_with_the_end(
    turns: DurableTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(durable_stream, "BATCH_SECONDS", 600.0)  # every event of the turn falls in one batch
    handle = await turns.submit("hello", chat_id=chat())
    result = await asyncio.wait_for(handle.result(), 30)
    events = [event async for event in handle.events()]
    assert result.final_output == "done: hello"
    assert [event.type for event in events] == ["turn_attempt", "agent_started", "text_delta", "agent_finished"]
    assert [event.id for event in events] == [0, 1, 2, 3]
    assert await stream_entries(handle.turn_id) == 1  # the batch, written as the turn ended, with the stream's end


async def test_a_held_event_is_written_while_the_turn_waits(turns: DurableTurns) -> None:
    gate = uuid.uuid4().hex
    gates[gate] = asyncio.Event()
    handle = await turns.submit(f"gate {gate}", chat_id=chat())
    seen: list[str] = []
    async with asyncio.timeout(30):
        async for event in handle.events():
            seen.append(event.type)
            if event.type == "tool_called":
                assert not gates[gate].is_set()  # written on its batch's time, not when the turn moved on
                gates[gate].set()
        result = await handle.result()
    assert result.final_output == f"done: gate {gate}"
    assert seen == [
        "turn_attempt", "agent_started", "tool_called", "tool_output", "text_delta", "agent_finished"
    ]


async def test_waiters_here_are_told_the_result_and_each_gets_it(turns: DurableTurns) -> None:
    gate = uuid.uuid4().hex
    gates[gate] = asyncio.Event()
    handle = await turns.submit(f"gate {gate}", chat_id=chat())
    waiting = [asyncio.ensure_future(handle.result()) for _ in range(3)]
    async with asyncio.timeout(30):
        async for event in handle.events():
            if event.type == "tool_called":
                gates[gate].set()
        results = await asyncio.gather(*waiting)
        stored = await handle.ended_result()
    assert {result.final_output for result in results} == {stored.final_output} == {f"done: gate {gate}"}


async def test_a_waiter_in_another_process_is_woken_by_the_turns_stream(turns: DurableTurns) -> None:
    url = require_postgres()
    queue = f"waits_elsewhere_{uuid.uuid4().hex[:8]}"
    worker = uuid.uuid4().hex[:8]
    other = Worker(url, f"waits-worker-{worker}", queue)
    chat_id, gate = chat(), uuid.uuid4().hex
    try:
        turn_id = other.submit(chat_id, uuid.uuid4().hex, f"block {gate}")
        assert other.read().startswith("blocked ")
        # This process never runs it (the other worker's queue is not its own, and neither are its turn ids: a handle
        # of its own, not `turns.handle`, which refuses another queue's turn).
        waiter = asyncio.ensure_future(TurnHandle(turn_id, chat_id).result())
        connection = await asyncpg.connect(url)
        try:
            await asyncio.sleep(0)
            assert not waiter.done()
            await connection.execute("SELECT pg_notify('durable_gate', $1)", gate)
        finally:
            await connection.close()
        result = await asyncio.wait_for(waiter, 30)
        assert result.final_output == f"done: block {gate}"
        _, executor = await finished(url, turn_id)
        assert executor == f"waits-worker-{worker}"
    finally:
        other.stop()
        await forget_queue(url, queue)
