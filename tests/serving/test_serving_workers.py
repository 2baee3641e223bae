"""`agency-swarm serve` with 4 uvicorn workers on one PostgreSQL store: many chats, one busy chat, a killed worker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import uuid
from collections.abc import Iterator

import httpx
import pytest

from agency_swarm._threads._sql_store import SQLThreadStore
from postgres_support import require_postgres
from serving_app import HOLD, ceo_answer
from serving_support import (
    Gate,
    Server,
    assert_complete_turns,
    chat_prefix,
    delete_chats,
    start_server,
    text_of,
    user_messages_in_order,
)

WORKERS = 4
TOKEN_ENV = "SERVING_TEST_TOKEN"
TOKEN = f"token-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def postgres() -> str:
    return require_postgres()


@pytest.fixture(scope="module")
def prefix(postgres: str) -> Iterator[str]:
    value = chat_prefix("workers")
    yield value
    delete_chats(value)


@pytest.fixture(scope="module")
def gate() -> Iterator[Gate]:
    opened = Gate()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def server(postgres: str, prefix: str, gate: Gate) -> Iterator[Server]:
    """One server for the module; the tests that kill a worker come last in the file."""
    running = start_server(
        workers=WORKERS, store=postgres, env={**gate.env, TOKEN_ENV: TOKEN}, auth_token_env=TOKEN_ENV
    )
    yield running
    running.stop()


async def load(postgres: str, chat_id: str) -> dict[str, list[dict[str, object]]]:
    store = SQLThreadStore(postgres)
    try:
        return await store.load(chat_id)
    finally:
        await store.aclose()


def client(server: Server) -> httpx.AsyncClient:
    # A connection per request: a kept-alive one can be closed by uvicorn (5 s idle) just as a request goes out
    # on it, and on a loaded machine the client's own idle clock cannot be trusted to avoid that.
    limits = httpx.Limits(max_connections=250, max_keepalive_connections=0)
    headers = {"authorization": f"Bearer {TOKEN}"}
    return httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits, headers=headers)


async def test_the_workers_are_separate_processes(server: Server) -> None:
    assert len(set(server.worker_pids)) == WORKERS
    assert server.process.pid not in server.worker_pids


async def test_every_worker_wants_the_token_and_none_logs_it(server: Server) -> None:
    fresh = httpx.Limits(max_keepalive_connections=0)  # a new connection each time: any worker may take it
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=fresh) as anonymous:
        for _ in range(2 * WORKERS):
            response = await anonymous.post("/chats/x/messages", json={"message": "hi"})
            assert response.status_code == 401
            assert response.json() == {"error": {"type": "unauthorized", "message": "Unauthorized."}}
        assert (await anonymous.get("/healthz")).status_code == 200
    assert TOKEN not in "".join(server.log)


async def test_200_concurrent_chats_of_5_turns_each_are_complete_and_in_order(
    server: Server, postgres: str, prefix: str
) -> None:
    chats = [f"{prefix}many-{number}" for number in range(200)]

    async def five_turns(http: httpx.AsyncClient, chat_id: str) -> None:
        for turn in range(1, 6):
            message = f"{chat_id} turn {turn}"
            response = await http.post(f"/chats/{chat_id}/messages", json={"message": message})
            assert response.status_code == 200, response.text
            assert re.fullmatch(ceo_answer(turn, message), response.json()["final_output"])

    async with client(server) as http:
        await asyncio.gather(*(five_turns(http, chat_id) for chat_id in chats))
    store = SQLThreadStore(postgres)
    try:
        for chat_id in chats:
            assert_complete_turns(await store.load(chat_id), [f"{chat_id} turn {turn}" for turn in range(1, 6)])
    finally:
        await store.aclose()


async def test_20_concurrent_requests_to_one_chat_run_one_after_another(
    server: Server, postgres: str, prefix: str
) -> None:
    chat_id = f"{prefix}busy"
    messages = [f"request {number}" for number in range(20)]
    async with client(server) as http:
        responses = await asyncio.gather(
            *(http.post(f"/chats/{chat_id}/messages", json={"message": message}) for message in messages)
        )
    assert [response.status_code for response in responses] == [200] * 20
    threads = await load(postgres, chat_id)
    order = user_messages_in_order(threads)
    assert sorted(order) == sorted(messages)
    assert_complete_turns(threads, order)  # each turn saw every earlier one: no worker read a stale chat
    for message, response in zip(messages, responses, strict=True):
        turn = order.index(message) + 1
        assert re.fullmatch(ceo_answer(turn, message), response.json()["final_output"])


async def test_streams_on_several_workers_keep_their_own_order(server: Server, prefix: str) -> None:
    chat_id = f"{prefix}streams"
    async with client(server) as http:
        for turn in range(1, 4):
            response = await http.post(f"/chats/{chat_id}/messages:stream", json={"message": f"streamed {turn}"})
            events = [json.loads(data) for data in re.findall(r"^data: (.*)$", response.text, flags=re.MULTILINE)]
            assert events[0]["type"] == "agent_started"
            assert events[-1]["type"] == "done"
            tags = {(event["agent"], event["caller"], event["depth"]) for event in events[:-1]}
            assert tags == {("CEO", "user", 0), ("Developer", "CEO", 1)}
            answer = text_of(events[-1]["result"]["new_items"][-1])
            assert re.fullmatch(ceo_answer(turn, f"streamed {turn}"), answer)


# -- a worker killed in the middle of a nested turn ----------------------------------------------------------------


async def kill_during_nested_turn(server: Server, gate: Gate, chat_id: str, message: str) -> int:
    """Send `message`; when the Developer's model (one level down) is reached, kill -9 that worker. Its pid."""
    gate.shut()
    async with client(server) as http:
        request = asyncio.create_task(http.post(f"/chats/{chat_id}/messages", json={"message": message}))
        pid, held = await gate.next_arrival()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(httpx.TransportError):  # the connection dies with the worker
            await request
        held.close()
    return pid


async def test_a_worker_killed_during_a_nested_turn_is_resumed_on_another(
    server: Server, gate: Gate, postgres: str, prefix: str
) -> None:
    chat_id = f"{prefix}killed"
    async with client(server) as http:
        first = await http.post(f"/chats/{chat_id}/messages", json={"message": "warm up"})
        assert first.status_code == 200
    message = f"build it {HOLD}"
    killed = await kill_during_nested_turn(server, gate, chat_id, message)

    stored = await load(postgres, chat_id)  # the dead turn's progress is in the store, its calls unanswered
    assert stored["user->CEO"][4:] == [{"role": "user", "content": message}, stored["user->CEO"][5]]
    assert stored["user->CEO"][5]["name"] == "send_message"
    assert stored["CEO->Developer"][2:] == [
        {"role": "user", "content": f"Please do: {message}", "send_call_id": stored["user->CEO"][5]["call_id"]}
    ]

    gate.open()
    passed_before = len(gate.passed)
    async with client(server) as http:
        resumed = await http.post(f"/chats/{chat_id}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        body = resumed.json()
        assert re.fullmatch(ceo_answer(2, message), body["final_output"])
        assert f"done by {killed} " not in body["final_output"]  # another worker finished it
        again = await http.post(f"/chats/{chat_id}/resume", json={})
        assert again.status_code == 409
        assert again.json()["error"]["type"] == "nothing_to_resume"
    assert len(gate.passed) == passed_before + 1
    assert gate.passed[-1] != killed
    gate.shut()
    assert_complete_turns(await load(postgres, chat_id), ["warm up", message])  # no call run twice, none lost


async def test_a_new_message_after_a_killed_worker_repairs_the_chat(
    server: Server, gate: Gate, postgres: str, prefix: str
) -> None:
    chat_id = f"{prefix}repaired"
    message = f"first {HOLD}"
    await kill_during_nested_turn(server, gate, chat_id, message)
    async with client(server) as http:
        response = await http.post(f"/chats/{chat_id}/messages", json={"message": "second"})
        assert response.status_code == 200, response.text
        threads = (await http.get(f"/chats/{chat_id}/threads")).json()["threads"]
    ceo = threads["user->CEO"]
    assert ceo[0] == {"role": "user", "content": message}
    assert ceo[2]["call_id"] == ceo[1]["call_id"]  # the interrupted call got an output, stored
    assert "interrupted" in ceo[2]["output"]
    calls = [item["call_id"] for item in ceo if item.get("type") == "function_call"]
    outputs = [item["call_id"] for item in ceo if item.get("type") == "function_call_output"]
    assert calls == outputs  # every call answered exactly once, in order
    assert ceo[3] == {"role": "user", "content": "second"}
    assert text_of(ceo[-1]).startswith("turn 2: ")  # the model saw both user messages
    assert TOKEN not in "".join(server.log)
