"""A2A tasks across workers: two `agency-swarm serve --a2a` processes on one PostgreSQL store serve the same tasks.
A task one runs is read, listed, followed to its end and canceled through the other, and outlives both; and
`serve --a2a --workers 2` answers every request for a running task, whichever worker takes it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol

from agency_swarm.serving._a2a._tasks import new_task_id
from postgres_support import require_postgres
from serving_support import Gate, Server, chat_prefix, delete_chats, start_serve

BOUND = 60


@pytest.fixture
def prefix() -> Iterator[str]:
    require_postgres()
    value = chat_prefix("a2a-workers")
    yield value
    delete_chats(value)


@pytest.fixture
def gate() -> Iterator[Gate]:
    opened = Gate()
    yield opened
    opened.close()


def worker(gate: Gate) -> Server:
    return start_serve(["--factory", "a2a_app:build_remote", "--store", require_postgres(), "--a2a"], env=gate.env)


@pytest.fixture
def workers(prefix: str, gate: Gate) -> Iterator[tuple[Server, Server]]:
    first = worker(gate)
    try:
        second = worker(gate)
    except BaseException:
        first.stop()
        raise
    yield first, second
    first.stop()
    second.stop()


@contextlib.asynccontextmanager
async def client_for(url: str) -> AsyncIterator[Client]:
    """An a2a-sdk client whose every request opens a new connection: behind `--workers N`, any worker may take it."""
    async with httpx.AsyncClient(timeout=BOUND, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=True,
                              supported_protocol_bindings=[TransportProtocol.JSONRPC.value])
        yield ClientFactory(config).create(card)


def message(text: str, context_id: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, context_id=context_id,
                                              parts=[Part(text=text)]))


async def drain(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [response async for response in stream]


def states(found: list[StreamResponse]) -> list[int]:
    return [r.status_update.status.state for r in found if r.WhichOneof("payload") == "status_update"]


def artifact_text(found: list[StreamResponse]) -> str:
    return next(r.artifact_update.artifact.parts[0].text for r in found if r.WhichOneof("payload") == "artifact_update")


async def start_held_turn(client: Client, gate: Gate, text: str, chat: str) -> tuple[asyncio.Task[Any], str, Any]:
    """Send `text` (holding [hold]) to `client`'s worker; once its model waits at the gate: the sending task, the
    task id, and the gate's connection that lets it go on."""
    request = message(text, chat)
    sending = asyncio.create_task(drain(client.send_message(request)))
    _, held = await gate.next_arrival()
    return sending, new_task_id(chat, request.message.message_id), held


async def test_a_task_running_on_one_worker_is_read_listed_and_followed_on_another(
    workers: tuple[Server, Server], gate: Gate, prefix: str
) -> None:
    running, other = workers
    chat = f"{prefix}follow"
    async with client_for(running.url) as a, client_for(other.url) as b:
        sending, task_id, held = await start_held_turn(a, gate, "[hold] the report", chat)
        seen = await b.get_task(GetTaskRequest(id=task_id))
        listed = await b.list_tasks(ListTasksRequest(context_id=chat))
        subscription = aiter(b.subscribe(SubscribeToTaskRequest(id=task_id)))
        first = await anext(subscription)  # B serves the stored task first, then what A saves from here on
        held.sendall(b"go\n")
        held.close()
        followed = await asyncio.wait_for(drain(subscription), BOUND)
        sent = await asyncio.wait_for(sending, BOUND)
    assert seen.status.state == TaskState.TASK_STATE_WORKING
    assert [task.id for task in listed.tasks] == [task_id]
    assert first.task.id == task_id
    assert states(followed)[-1] == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(followed) == artifact_text(sent) == "Developer did: [hold] the report [seen 1]"


async def test_a_cancel_on_another_worker_stops_the_task_and_the_chat_goes_on(
    workers: tuple[Server, Server], gate: Gate, prefix: str
) -> None:
    running, other = workers
    chat = f"{prefix}cancel"
    async with client_for(running.url) as a, client_for(other.url) as b:
        sending, task_id, held = await start_held_turn(a, gate, "[hold] the long job", chat)
        canceled = await b.cancel_task(CancelTaskRequest(id=task_id))
        ended = await asyncio.wait_for(sending, BOUND)  # A stops its turn, held at the gate, without a word from it
        held.close()
        stored_a = await a.get_task(GetTaskRequest(id=task_id))
        gate.open()
        after = await drain(b.send_message(message("next", chat)))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    last = ended[-1].task.status if ended[-1].WhichOneof("payload") == "task" else ended[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_CANCELED  # A's own reader hears of the cancel
    assert stored_a.status.state == TaskState.TASK_STATE_CANCELED
    assert states(after)[-1] == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(after).startswith("Developer did: next")


async def test_a_task_outlives_both_workers(workers: tuple[Server, Server], gate: Gate, prefix: str) -> None:
    running, other = workers
    chat = f"{prefix}kept"
    gate.open()
    async with client_for(running.url) as a:
        sent = await drain(a.send_message(message("keep this", chat)))
    task_id = sent[0].task.id
    running.stop()
    other.stop()
    again = worker(gate)
    try:
        async with client_for(again.url) as c:
            stored = await c.get_task(GetTaskRequest(id=task_id))
    finally:
        again.stop()
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED
    assert stored.artifacts[0].parts[0].text == "Developer did: keep this [seen 1]"


async def test_serve_with_two_workers_answers_for_a_running_task_on_every_connection(gate: Gate, prefix: str) -> None:
    chat = f"{prefix}two"
    server = start_serve(["--factory", "a2a_app:build_remote", "--store", require_postgres(), "--a2a"], workers=2,
                         env=gate.env)
    try:
        async with client_for(server.url) as client:
            sending, task_id, held = await start_held_turn(client, gate, "[hold] for all", chat)
            seen = [await client.get_task(GetTaskRequest(id=task_id)) for _ in range(4)]
            subscriptions = [aiter(client.subscribe(SubscribeToTaskRequest(id=task_id))) for _ in range(4)]
            firsts = [await anext(subscription) for subscription in subscriptions]
            held.sendall(b"go\n")
            held.close()
            followed = await asyncio.wait_for(asyncio.gather(*map(drain, subscriptions)), BOUND)
            sent = await asyncio.wait_for(sending, BOUND)
    finally:
        server.stop()
    assert {task.status.state for task in seen} == {TaskState.TASK_STATE_WORKING}
    assert {first.task.id for first in firsts} == {task_id}
    assert [states(found)[-1] for found in followed] == [TaskState.TASK_STATE_COMPLETED] * 4
    assert {artifact_text(found) for found in followed} == {artifact_text(sent)}
