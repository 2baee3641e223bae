"""Cancelling a turn that another process runs, on one PostgreSQL store: two stores in this process (each its own
lock session, as two workers have), and `agency-swarm serve` with 2 workers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from agency_swarm import SQLThreadStore, TurnCancelled, TurnNotRunning, UnknownTurn
from faults.harness import check_threads
from postgres_support import require_postgres
from serving_app import HOLD
from serving_support import BOUND, Gate, Server, chat_prefix, delete_chats, start_server
from test_cancel import INTERRUPTED, Gates, agency_on


@pytest.fixture(scope="module")
def postgres() -> str:
    return require_postgres()


@pytest.fixture(scope="module")
def prefix(postgres: str) -> Iterator[str]:
    value = chat_prefix("cancel")
    yield value
    delete_chats(value)


async def test_a_cancel_reaches_the_turn_another_store_runs(postgres: str, prefix: str) -> None:
    gates = Gates()
    runner, other = agency_on(SQLThreadStore(postgres), gates), agency_on(SQLThreadStore(postgres), Gates())
    chat_id = f"{prefix}{uuid.uuid4().hex[:8]}"
    try:
        running = asyncio.create_task(runner.get_response("be slow", chat_id=chat_id, turn_id="w-1"))
        await asyncio.wait_for(gates.in_tool.wait(), BOUND)
        assert other.thread_manager.running.find(chat_id) is None  # it runs in the other "worker" only
        await other.cancel(chat_id, "w-1")
        with pytest.raises(TurnCancelled):
            await running
        assert gates.tool_cancelled
        with pytest.raises(TurnNotRunning):
            await other.cancel(chat_id, "w-1")
        with pytest.raises(UnknownTurn):
            await other.cancel(chat_id, "w-2")
        threads = await other.get_threads(chat_id)
        assert threads["user->CEO"][-1]["output"] == INTERRUPTED
        assert check_threads(threads, final=True) == []
        assert (await other.get_response("hello", chat_id=chat_id)).final_output == "echo hello"
        assert check_threads(await runner.get_threads(chat_id), final=True) == []
    finally:
        await runner.aclose()
        await other.aclose()


async def test_a_cancel_reaches_a_turn_streaming_text_in_another_store(postgres: str, prefix: str) -> None:
    gates = Gates()
    runner, other = agency_on(SQLThreadStore(postgres), gates), agency_on(SQLThreadStore(postgres), Gates())
    chat_id = f"{prefix}{uuid.uuid4().hex[:8]}"
    try:
        stream = runner.get_response_stream("halt here", chat_id=chat_id)
        seen: list[str] = []

        async def read() -> None:
            async for event in stream:
                seen.append(event.type)

        reading = asyncio.create_task(read())
        await asyncio.wait_for(gates.in_text.wait(), BOUND)
        assert stream.turn_id is not None
        await other.cancel(chat_id, stream.turn_id)
        await reading
        assert "text_delta" in seen
        assert seen[-1] == "cancelled"
        marks = await other.get_threads(chat_id, include_marks=True)
        assert marks["user->CEO"][-1] == {"type": "agency_swarm.turn_cancelled", "turn_id": stream.turn_id}
        with pytest.raises(TurnNotRunning):  # its id is stored with its cancel mark
            await other.cancel(chat_id, stream.turn_id)
        assert (await other.get_response("hello", chat_id=chat_id)).final_output == "echo hello"
        assert check_threads(await other.get_threads(chat_id), final=True) == []
    finally:
        await runner.aclose()
        await other.aclose()


@pytest.fixture(scope="module")
def gate() -> Iterator[Gate]:
    opened = Gate()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def server(postgres: str, gate: Gate) -> Iterator[Server]:
    running = start_server(workers=2, store=postgres, env=gate.env)
    yield running
    running.stop()


async def test_cancels_over_http_stop_turns_on_either_worker(server: Server, gate: Gate, prefix: str) -> None:
    """Four turns held in the Developer's model call (the gate), spread over both workers, each cancelled through
    whichever worker takes the cancel; each stream ends `cancelled`, and each chat takes its next turn."""
    chats = [f"{prefix}http-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    limits = httpx.Limits(max_keepalive_connections=0)  # a new connection per request: any worker may take it
    async with httpx.AsyncClient(base_url=server.url, timeout=BOUND * 2, limits=limits) as http:

        async def turn(chat_id: str) -> list[dict[str, object]]:
            async with http.stream("POST", f"/chats/{chat_id}/messages:stream", json={"message": f"{HOLD} go"},
                                   headers={"idempotency-key": chat_id}) as response:
                assert response.status_code == 200
                turn_id = response.headers["turn-id"]
                _, held = await gate.next_arrival()
                try:
                    cancelled = await http.post(f"/chats/{chat_id}/turns/{turn_id}:cancel")
                    assert cancelled.status_code == 200, cancelled.text
                finally:
                    held.close()
                return [json.loads(line[6:]) async for line in response.aiter_lines() if line.startswith("data: ")]

        for chat_id in chats:  # one at a time: each gate arrival is that chat's
            events = await turn(chat_id)
            assert events[-1]["type"] == "cancelled"
        gate.open()
        for chat_id in chats:
            threads = (await http.get(f"/chats/{chat_id}/threads")).json()["threads"]
            assert check_threads(threads, final=True) == []
            answer = await http.post(f"/chats/{chat_id}/messages", json={"message": "next"})
            assert answer.status_code == 200, answer.text
