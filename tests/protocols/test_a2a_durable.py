"""A2A tasks with durable turns: `agency-swarm serve --a2a --durable` on PostgreSQL, driven by the a2a-sdk's client.
A task's turn is a durable turn (read back on the HTTP turn routes); it completes, is canceled, pauses for an
approval and resumes; and a worker killed with -9 mid-turn, once restarted, finishes the turn and ends the task
COMPLETED with its answer once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from dbos import DBOSClient
from google.protobuf.json_format import MessageToDict

from agency_swarm.serving._a2a._tasks import new_task_id
from postgres_support import require_postgres
from serving_support import BOUND, Gate, Server, _in_own_loop, chat_prefix, delete_chats, start_serve, text_of
from test_a2a_workers import artifact_text, client_for, drain, message, states


@pytest.fixture
def prefix() -> Iterator[str]:
    require_postgres()
    value = chat_prefix("a2a-durable")
    yield value
    delete_chats(value)


@pytest.fixture
def gate() -> Iterator[Gate]:
    opened = Gate()
    yield opened
    opened.close()


@pytest.fixture
def queue() -> Iterator[str]:
    """A queue of this test's own: its turns are its workers' alone, and a restarted worker takes the same slot."""
    name = f"a2a_durable_{uuid.uuid4().hex[:10]}"
    yield name
    _in_own_loop(_forget_queue(name))


async def _forget_queue(name: str) -> None:
    client = DBOSClient(system_database_url=require_postgres())
    try:
        await client.delete_queue_async(name)
    finally:
        client.destroy()


def worker(gate: Gate, queue: str) -> Server:
    return start_serve([
        "--factory", "a2a_app:build_remote", "--store", require_postgres(), "--a2a", "--durable",
        "--durable-queue", queue,
    ], env=gate.env)


@pytest.fixture
def server(gate: Gate, queue: str, prefix: str) -> Iterator[Server]:
    started = worker(gate, queue)
    yield started
    started.stop()


def turn_of(task: Task) -> str:
    """The durable turn running the task, as its metadata names it."""
    turn_id = MessageToDict(task.metadata)["agency_swarm"]["turn_id"]
    assert isinstance(turn_id, str)
    return turn_id


async def read(server: Server, path: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=BOUND) as http:
        found: dict[str, Any] = (await http.get(f"{server.url}{path}")).json()
        return found


async def turn_status(server: Server, chat: str, turn_id: str) -> str:
    """The durable turn's status, as the HTTP turn route reads it."""
    status = (await read(server, f"/chats/{chat}/turns/{turn_id}"))["status"]
    assert isinstance(status, str)
    return status


def last_state(found: list[StreamResponse]) -> int:
    last = found[-1]
    return last.task.status.state if last.WhichOneof("payload") == "task" else last.status_update.status.state


async def test_a_task_runs_as_a_durable_turn_and_completes_with_its_answer(
    server: Server, gate: Gate, prefix: str
) -> None:
    gate.open()
    chat = f"{prefix}done"
    async with client_for(server.url) as client:
        streamed = await drain(client.send_message(message("[qa] the report", chat)))
        task = await client.get_task(GetTaskRequest(id=streamed[0].task.id))
    assert states(streamed)[-1] == TaskState.TASK_STATE_COMPLETED
    progress = [r.status_update.status.message for r in streamed if r.WhichOneof("payload") == "status_update"]
    agents = {MessageToDict(m.metadata)["agency_swarm"]["agent"] for m in progress if m.metadata.fields}
    assert {"Developer", "QA"} <= agents  # the nested agent's progress too, tagged with its agent
    answer = "Developer did: [qa] the report (QA checked: check: [qa] the report) [seen 1]"
    assert artifact_text(streamed) == answer
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [artifact.parts[0].text for artifact in task.artifacts] == [answer]
    assert await turn_status(server, chat, turn_of(task)) == "done"  # a durable turn: the HTTP turn routes read it


async def test_the_same_message_sent_again_while_its_turn_runs_is_the_same_task_and_one_turn(
    server: Server, gate: Gate, prefix: str
) -> None:
    chat = f"{prefix}again"
    async with client_for(server.url) as client:
        request = message("[hold] only once", chat)
        first = asyncio.create_task(drain(client.send_message(request)))
        _, held = await gate.next_arrival()
        again = await client.get_task(GetTaskRequest(id=new_task_id(chat, request.message.message_id)))
        second = asyncio.create_task(drain(client.send_message(request)))  # a client's retry: it follows the task
        held.sendall(b"go\n")
        held.close()
        sent, resent = await asyncio.wait_for(asyncio.gather(first, second), BOUND)
        threads = (await read(server, f"/chats/{chat}/threads"))["threads"]
    assert again.status.state == TaskState.TASK_STATE_WORKING
    assert sent[0].task.id == resent[0].task.id == again.id
    assert last_state(sent) == last_state(resent) == TaskState.TASK_STATE_COMPLETED
    assert gate.arrivals.empty()  # one model call: the retry queued no second turn
    thread = threads["user->Developer"]
    assert [item["content"] for item in thread if item.get("role") == "user"] == ["[hold] only once"]


async def test_a_canceled_task_cancels_its_durable_turn_and_the_chat_goes_on(
    server: Server, gate: Gate, prefix: str
) -> None:
    chat = f"{prefix}cancel"
    async with client_for(server.url) as client:
        request = message("[hold] the long job", chat)
        sending = asyncio.create_task(drain(client.send_message(request)))
        _, held = await gate.next_arrival()
        task_id = new_task_id(chat, request.message.message_id)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        ended = await asyncio.wait_for(sending, BOUND)
        held.close()
        stored = await client.get_task(GetTaskRequest(id=task_id))
        gate.open()
        after = await drain(client.send_message(message("next", chat)))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert last_state(ended) == TaskState.TASK_STATE_CANCELED  # the sender's stream hears of it
    assert stored.status.state == TaskState.TASK_STATE_CANCELED
    assert not stored.artifacts
    assert await turn_status(server, chat, turn_of(stored)) == "cancelled"
    assert states(after)[-1] == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(after).startswith("Developer did: next")


async def test_an_approval_pauses_the_task_as_input_required_and_the_answer_resumes_it(
    server: Server, gate: Gate, prefix: str
) -> None:
    gate.open()
    chat = f"{prefix}approve"
    async with client_for(server.url) as client:
        paused = await drain(client.send_message(message("[deploy] the build", chat)))
        task_id = paused[0].task.id
        waiting = await client.get_task(GetTaskRequest(id=task_id))
        answer = SendMessageRequest(message=Message(
            role=Role.ROLE_USER, message_id=uuid.uuid4().hex, context_id=chat, task_id=task_id,
            parts=[Part(text="approve")],
        ))
        resumed = await drain(client.send_message(answer))
        done = await client.get_task(GetTaskRequest(id=task_id))
    assert states(paused)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
    calls = MessageToDict(waiting.status.message.metadata)["agency_swarm"]["interruptions"]
    assert [(call["agent"], call["tool"]) for call in calls] == [("Developer", "deploy")]
    assert states(resumed)[-1] == TaskState.TASK_STATE_COMPLETED
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "Developer did: [deploy] the build (deployed to prod) [seen 1]"


async def test_a_worker_killed_mid_turn_and_restarted_ends_the_task_completed_once(
    gate: Gate, queue: str, prefix: str
) -> None:
    chat = f"{prefix}killed"
    first = worker(gate, queue)
    try:
        async with client_for(first.url) as client:
            request = message("[hold] the report", chat)
            sending = asyncio.create_task(drain(client.send_message(request)))
            killed_pid, cut = await gate.next_arrival()  # the turn's model call waits at the gate
            first.process.kill()  # -9, mid-turn
            first.process.wait()
            cut.close()
            with pytest.raises(Exception):  # noqa: B017, PT011 - the transport's error, whichever it is
                await asyncio.wait_for(sending, BOUND)
    finally:
        first.stop()
    task_id = new_task_id(chat, request.message.message_id)
    again = worker(gate, queue)  # the same slot: DBOS recovers the dead worker's turn at launch
    try:
        recovered_pid, held = await gate.next_arrival()  # the recovered turn calls the model again
        async with client_for(again.url) as client:
            running = await client.get_task(GetTaskRequest(id=task_id))
            subscription = aiter(client.subscribe(SubscribeToTaskRequest(id=task_id)))
            await anext(subscription)
            held.sendall(b"go\n")
            held.close()
            followed = await asyncio.wait_for(drain(subscription), BOUND)
            done = await client.get_task(GetTaskRequest(id=task_id))
        status = await turn_status(again, chat, turn_of(done))
        threads = (await read(again, f"/chats/{chat}/threads"))["threads"]
    finally:
        again.stop()
    assert killed_pid == first.worker_pids[0]
    assert recovered_pid == again.worker_pids[0]
    assert gate.arrivals.empty()  # two model calls in all: the one cut by the kill, and the recovered one
    assert running.status.state == TaskState.TASK_STATE_WORKING
    assert states(followed)[-1] == TaskState.TASK_STATE_COMPLETED
    answer = "Developer did: [hold] the report [seen 1]"  # [seen 1]: the turn's message is in the chat once
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [artifact.parts[0].text for artifact in done.artifacts] == [answer]
    assert status == "done"
    thread = threads["user->Developer"]
    assert [item["content"] for item in thread if item.get("role") == "user"] == ["[hold] the report"]
    assert [text_of(item) for item in thread if item.get("role") == "assistant"] == [answer]


async def test_a_durable_task_sent_to_one_worker_is_read_and_followed_to_its_end_on_another(
    gate: Gate, queue: str, prefix: str
) -> None:
    """Two workers on one queue: whichever runs the turn, the other reads the task working, follows it, and both the
    sender and the follower end with the same answer."""
    first = worker(gate, queue)
    try:
        second = worker(gate, queue)
    except BaseException:
        first.stop()
        raise
    chat = f"{prefix}across"
    try:
        async with client_for(first.url) as a, client_for(second.url) as b:
            request = message("[hold] across workers", chat)
            sending = asyncio.create_task(drain(a.send_message(request)))
            runner_pid, held = await gate.next_arrival()
            task_id = new_task_id(chat, request.message.message_id)
            seen = await b.get_task(GetTaskRequest(id=task_id))
            subscription = aiter(b.subscribe(SubscribeToTaskRequest(id=task_id)))
            first_seen = await anext(subscription)
            held.sendall(b"go\n")
            held.close()
            followed = await asyncio.wait_for(drain(subscription), BOUND)
            sent = await asyncio.wait_for(sending, BOUND)
    finally:
        first.stop()
        second.stop()
    assert runner_pid in first.worker_pids + second.worker_pids
    assert seen.status.state == TaskState.TASK_STATE_WORKING
    assert first_seen.task.id == task_id
    assert last_state(sent) == last_state(followed) == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(followed) == artifact_text(sent) == "Developer did: [hold] across workers [seen 1]"
    assert gate.arrivals.empty()  # one model call
