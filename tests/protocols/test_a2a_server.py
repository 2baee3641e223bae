"""An agency served over A2A, driven by the a2a-sdk's own client over real HTTP, on both transports."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

import a2a_app
from agency_swarm import SQLThreadStore
from agency_swarm.serving import create_app
from serving_support import live

TOKEN = "a2a-test-token"
BINDINGS = [TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value]


@contextlib.asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Any]]:
    store = SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    app = create_app(a2a_app.build_remote, store=store, auth_token=TOKEN, a2a=True, max_body_bytes=64 * 1024)
    async with app.router.lifespan_context(app), live(app) as url:
        yield url, app


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, Any]]:
    async with served(tmp_path) as running:
        yield running


@contextlib.asynccontextmanager
async def client_for(url: str, binding: str, *, streaming: bool) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
        yield ClientFactory(config).create(card)


def message(text: str, context_id: str, *, task_id: str = "", depth: int | None = None) -> SendMessageRequest:
    metadata = Struct()
    if depth is not None:
        metadata.update({"agency_swarm": {"depth": depth}})
    sent = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, context_id=context_id, task_id=task_id,
                   parts=[Part(text=text)], metadata=metadata)
    return SendMessageRequest(message=sent)


async def responses(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(request)]


def final_task(found: list[StreamResponse]) -> Task:
    assert found[-1].WhichOneof("payload") == "task", found[-1]
    return found[-1].task


def text_of(task: Task) -> str:
    return "\n".join(part.text for artifact in task.artifacts for part in artifact.parts if part.text)


async def test_the_agent_card_names_the_entry_agents_both_transports_and_the_bearer_scheme(server: Any) -> None:
    url, _ = server
    async with httpx.AsyncClient() as http:  # no token: discovery is public
        response = await http.get(f"{url}/.well-known/agent-card.json")
        card = await A2ACardResolver(http, url).get_agent_card()
    assert response.status_code == 200
    assert card.name == "Developer"
    assert card.description == "Writes and deploys code."
    assert [skill.name for skill in card.skills] == ["Developer"]
    assert card.capabilities.streaming
    assert {(i.protocol_binding, i.url) for i in card.supported_interfaces} == {
        ("JSONRPC", f"{url}/a2a/jsonrpc"), ("HTTP+JSON", f"{url}/a2a/rest"),
    }
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_blocking_message_runs_one_turn_in_the_chat_its_context_names(server: Any, binding: str) -> None:
    url, app = server
    chat = f"a2a-{uuid.uuid4().hex[:8]}"
    async with client_for(url, binding, streaming=False) as client:
        task = final_task(await responses(client, message("write the parser", chat)))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.context_id == chat
        assert text_of(task) == "Developer did: write the parser [seen 1]"
        again = final_task(await responses(client, message("and its tests", chat)))  # the same context goes on
        assert text_of(again) == "Developer did: and its tests [seen 2]"
        stored = await client.get_task(GetTaskRequest(id=task.id))
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED
        assert text_of(stored) == text_of(task)
        listed = await client.list_tasks(ListTasksRequest(context_id=chat))
    assert {item.id for item in listed.tasks} == {task.id, again.id}
    threads = await app.state.agency.get_threads(chat)
    assert [item["content"] for item in threads["user->Developer"] if item.get("role") == "user"] == [
        "write the parser", "and its tests",
    ]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_streamed_message_reports_nested_progress_tagged_with_agent_and_depth(
    server: Any, binding: str
) -> None:
    url, _ = server
    async with client_for(url, binding, streaming=True) as client:
        found = await responses(client, message("[qa] the login page", f"s-{uuid.uuid4().hex[:8]}", depth=1))
    kinds = [response.WhichOneof("payload") for response in found]
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    assert "artifact_update" in kinds
    progress = [MessageToDict(r.status_update.status.message.metadata)["agency_swarm"] for r in found
                if r.WhichOneof("payload") == "status_update" and r.status_update.status.message.parts]
    tagged = [(meta["event"]["type"], meta["agent"], meta["depth"]) for meta in progress if "event" in meta]
    assert tagged == [  # depths count from the sender's: this message came at depth 1
        ("agent_started", "Developer", 1), ("tool_called", "Developer", 1), ("message_sent", "Developer", 1),
        ("agent_started", "QA", 2), ("agent_finished", "QA", 2), ("tool_output", "Developer", 1),
        ("agent_finished", "Developer", 1),
    ]
    assert found[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifact = next(r.artifact_update.artifact for r in found if r.WhichOneof("payload") == "artifact_update")
    assert artifact.parts[0].text.startswith("Developer did: [qa] the login page (QA checked: check: [qa]")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_input_required_is_answered_by_the_next_message(server: Any, binding: str) -> None:
    url, _ = server
    chat = f"ir-{uuid.uuid4().hex[:8]}"
    a2a_app.deployed.clear()
    async with client_for(url, binding, streaming=True) as client:
        first = await responses(client, message("[deploy] v2", chat))
        paused = first[-1].status_update
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        waiting = MessageToDict(paused.status.message.metadata)["agency_swarm"]["interruptions"]
        assert [(item["agent"], item["tool"]) for item in waiting] == [("Developer", "deploy")]
        assert a2a_app.deployed == []
        unclear = await responses(client, message("maybe?", chat, task_id=paused.task_id))
        assert unclear[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # still waiting
        answered = await responses(client, message("approve", chat, task_id=paused.task_id))
        task = await client.get_task(GetTaskRequest(id=paused.task_id))
    assert answered[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert a2a_app.deployed == ["prod"]
    assert text_of(task) == "Developer did: [deploy] v2 (deployed to prod) [seen 1]"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_canceling_a_paused_task_rejects_its_calls_and_the_chat_goes_on(server: Any, binding: str) -> None:
    url, _ = server
    chat = f"c-{uuid.uuid4().hex[:8]}"
    a2a_app.deployed.clear()
    async with client_for(url, binding, streaming=False) as client:
        paused = final_task(await responses(client, message("[deploy] v3", chat)))
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=paused.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        after = final_task(await responses(client, message("next", chat)))
    assert a2a_app.deployed == []
    assert after.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(after).startswith("Developer did: next")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_missing_task_or_one_of_another_chat_is_not_found(server: Any, binding: str) -> None:
    url, _ = server
    async with client_for(url, binding, streaming=False) as client:
        with pytest.raises((TaskNotFoundError, A2AClientError)) as missing:
            await client.get_task(GetTaskRequest(id="0" * 32))
        assert "not found" in str(missing.value).lower()
        with pytest.raises(A2AError):  # (the REST client resolves the dots: another route's 404)
            await client.get_task(GetTaskRequest(id="../../etc"))
        task = final_task(await responses(client, message("mine", "chat-a")))
        with pytest.raises((TaskNotFoundError, A2AClientError)) as other:
            await responses(client, message("approve", "chat-b", task_id=task.id))
    assert "not found" in str(other.value).lower()


async def test_a_message_past_the_depth_limit_is_rejected_and_nothing_runs(server: Any) -> None:
    url, app = server
    async with client_for(url, BINDINGS[0], streaming=False) as client:
        task = final_task(await responses(client, message("too deep", "deep", depth=6)))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "depth limit" in task.status.message.parts[0].text
    assert await app.state.agency.get_threads("deep") == {}


async def test_a2a_wants_the_token_and_refuses_a_body_over_the_limit(server: Any) -> None:
    url, app = server
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "contextId": "big", "parts": [{"text": "x" * 70_000}]}}}
    async with httpx.AsyncClient() as http:
        anonymous = await http.post(f"{url}/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"})
        large = await http.post(f"{url}/a2a/jsonrpc", json=body,
                                headers={"A2A-Version": "1.0", "Authorization": f"Bearer {TOKEN}"})
    assert anonymous.status_code == 401
    assert large.status_code == 413
    assert await app.state.agency.get_threads("big") == {}


async def test_the_same_message_sent_again_is_the_same_task_and_one_turn(server: Any) -> None:
    url, app = server
    request = message("only once", "retry")
    async with client_for(url, BINDINGS[0], streaming=False) as client:
        first = final_task(await responses(client, request))
        second = final_task(await responses(client, request))
    assert second.id == first.id
    assert text_of(second) == text_of(first)
    threads = await app.state.agency.get_threads("retry")
    assert [item["content"] for item in threads["user->Developer"] if item.get("role") == "user"] == ["only once"]


async def test_tasks_outlive_the_worker_that_ran_them(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, _), client_for(url, BINDINGS[1], streaming=False) as client:
        task = final_task(await responses(client, message("kept", "kept")))
    async with served(tmp_path) as (url, _), client_for(url, BINDINGS[0], streaming=False) as client:
        again = await client.get_task(GetTaskRequest(id=task.id))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(again) == text_of(task)
    assert next(entry.parts[0].text for entry in again.history) == "kept"
