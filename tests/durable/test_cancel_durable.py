"""Cancelling durable turns (DBOS on the real PostgreSQL): a running turn in a slow tool or streaming text, and a
queued one; in this process, and through `agency-swarm serve --durable` with 2 workers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from dbos import DBOSClient

from agency_swarm import SQLThreadStore, TurnCancelled, TurnNotRunning
from agency_swarm.durable import DurableTurns, UnknownTurn
from durable_app import make_side_effects_table
from faults.harness import check_threads
from postgres_support import require_postgres
from serving_support import BOUND, Server, _in_own_loop, start_serve
from test_cancel import INTERRUPTED, Gates, agency_on


@pytest.fixture
async def durable() -> AsyncIterator[tuple[DurableTurns, Gates]]:
    url = require_postgres()
    gates = Gates()
    agency = agency_on(SQLThreadStore(url), gates)
    run = uuid.uuid4().hex[:8]
    turns = DurableTurns(agency, database_url=url, executor_id=f"cancel-{run}", queue_name=f"cancel_{run}")
    await turns.launch()
    yield turns, gates
    client = DBOSClient(system_database_url=url)
    try:
        await client.delete_queue_async(turns.queue_name)
    finally:
        client.destroy()
    await turns.aclose()
    await agency.aclose()


def chat() -> str:
    return f"dcancel-{uuid.uuid4().hex[:10]}"


async def test_a_durable_turn_in_a_slow_tool_is_cancelled(durable: tuple[DurableTurns, Gates]) -> None:
    turns, gates = durable
    chat_id = chat()
    handle = await turns.submit("be slow", chat_id=chat_id)
    queued = await turns.submit("hello", chat_id=chat_id)  # behind it: the chat runs one turn at a time
    await asyncio.wait_for(gates.in_tool.wait(), BOUND)
    await turns.cancel(chat_id, handle.turn_id)
    assert await handle.status() == "cancelled"
    with pytest.raises(TurnCancelled):
        await handle.result()
    assert [event.type for event in [event async for event in handle.events()]][-1] == "cancelled"
    with pytest.raises(TurnNotRunning):
        await turns.cancel(chat_id, handle.turn_id)
    with pytest.raises(UnknownTurn):
        await turns.cancel(chat_id, "nope")
    assert (await queued.result()).final_output == "echo hello"  # the next turn of the chat runs
    threads = await turns.agency.get_threads(chat_id)
    assert check_threads(threads, final=True) == []
    assert INTERRUPTED in [item.get("output") for item in threads["user->CEO"]]


async def test_a_durable_turn_streaming_text_and_a_queued_one_are_cancelled(
    durable: tuple[DurableTurns, Gates],
) -> None:
    turns, gates = durable
    chat_id = chat()
    handle = await turns.submit("halt here", chat_id=chat_id)
    queued = await turns.submit("never runs", chat_id=chat_id)
    await asyncio.wait_for(gates.in_text.wait(), BOUND)
    await turns.cancel(chat_id, queued.turn_id)
    await turns.cancel(chat_id, handle.turn_id)
    for cancelled in (handle, queued):
        assert await cancelled.status() == "cancelled"
        with pytest.raises(TurnCancelled):
            await cancelled.result()
    events = [event.type async for event in handle.events()]
    assert "text_delta" in events
    assert events[-1] == "cancelled"
    assert [event async for event in queued.events()] == []
    assert (await (await turns.submit("after", chat_id=chat_id)).result()).final_output == "echo after"
    assert check_threads(await turns.agency.get_threads(chat_id), final=True) == []


# -- over HTTP, 2 durable workers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def durable_server() -> Iterator[Server]:
    url = require_postgres()
    _in_own_loop(make_side_effects_table())
    server = start_serve(["--factory", "durable_app:build_agency", "--store", url, "--durable"], workers=2)
    yield server
    server.stop()


async def test_a_background_durable_turn_is_cancelled_over_http(durable_server: Server) -> None:
    chat_id = chat()
    gate = uuid.uuid4().hex
    async with httpx.AsyncClient(base_url=durable_server.url, timeout=BOUND,
                                 limits=httpx.Limits(max_keepalive_connections=0)) as http:
        accepted = await http.post(f"/chats/{chat_id}/messages", json={"message": f"block {gate}", "background": True})
        assert accepted.status_code == 202
        turn = accepted.headers["location"]
        events: list[dict[str, object]] = []
        async with http.stream("GET", f"{turn}/events") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if events[-1]["type"] == "tool_called":  # the tool runs now, on either worker, until cancelled
                        cancelled = await http.post(f"{turn}:cancel")
                        assert cancelled.status_code == 200, cancelled.text
        assert events[-1]["type"] == "cancelled"
        assert (await http.get(turn)).json()["status"] == "cancelled"
        again = await http.post(f"{turn}:cancel")
        assert again.status_code == 409
        threads = (await http.get(f"/chats/{chat_id}/threads")).json()["threads"]
        assert check_threads(threads, final=True) == []
        answer = await http.post(f"/chats/{chat_id}/messages", json={"message": "next"})
        assert answer.json()["final_output"] == "done: next"
