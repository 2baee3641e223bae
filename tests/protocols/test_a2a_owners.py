"""Whose A2A tasks are whose, with three principals (static tokens; `root` an admin), on every store, over real HTTP:
a task is its chat's (its context id). Another principal's task answers every method (get, cancel, subscribe, a
message on it) exactly as a task that does not exist, a message into another principal's context is refused, and
listing shows the caller's tasks only. A generated sequence of operations by two principals is checked against a
model of who owns what."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
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
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from dbos import DBOSClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import a2a_app
import auth_app
from agency_swarm import FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm.serving import AuthSettings, create_app
from postgres_support import require_postgres
from serving_support import live

ALICE, BOB, ROOT = "alice", "bob", "root"
STORES = ["memory", "file", "sqlite", "postgres"]
MISSING = "0" * 32
BINDINGS = [TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value]
NOT_FOUND = -32001
NOT_CANCELABLE = -32002
NOT_FOUND_TEXT = r"(?i)not found"


def open_store(kind: str, tmp_path: Path) -> ThreadStore:
    if kind == "memory":
        return MemoryThreadStore()
    if kind == "file":
        return FileThreadStore(tmp_path / "threads")
    if kind == "sqlite":
        return SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    return SQLThreadStore(require_postgres())


@dataclass(frozen=True)
class Served:
    """A running server, and the tokens of its principals (alice, bob, root: names of this server only, since a
    shared database keeps the tasks of earlier ones)."""

    url: str
    app: Any
    tokens: dict[str, str]
    names: dict[str, str]


@contextlib.asynccontextmanager
async def served(
    store: ThreadStore, *, authenticated: bool = True, factory: Any = a2a_app.build_remote, durable: bool = False
) -> AsyncIterator[Served]:
    """With `durable`: tasks' turns are durable turns, on a queue of this server's own (forgotten after it)."""
    names = {role: f"{role}-{uuid.uuid4().hex[:8]}" for role in (ALICE, BOB, ROOT)}
    tokens = {role: f"token-{uuid.uuid4().hex}" for role in names}
    auth = AuthSettings(tokens={names[role]: tokens[role] for role in names}, admins=(names[ROOT],))
    queue = f"a2a_owners_{uuid.uuid4().hex[:10]}"
    turns = {"database_url": require_postgres(), "queue_name": queue} if durable else False
    app = create_app(factory, store=store, auth=auth if authenticated else None, a2a=True, durable=turns)
    async with app.router.lifespan_context(app), live(app) as url:
        try:
            yield Served(url, app, tokens, names)
        finally:
            if durable:
                await forget_queue(queue)


async def forget_queue(name: str) -> None:
    """The database outlives the tests: leave no queue behind (while the app's DBOS still runs)."""
    client = DBOSClient(system_database_url=require_postgres())
    try:
        await client.delete_queue_async(name)
    finally:
        client.destroy()


@pytest.fixture(params=[*STORES, "postgres-durable"])
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    durable = request.param == "postgres-durable"
    async with served(open_store(request.param.removesuffix("-durable"), tmp_path), durable=durable) as running:
        yield running


def headers(server: Served, who: str | None) -> dict[str, str]:
    return {"A2A-Version": "1.0"} | ({} if who is None else {"Authorization": f"Bearer {server.tokens[who]}"})


@contextlib.asynccontextmanager
async def client_for(
    server: Served, who: str, binding: str = BINDINGS[0], *, streaming: bool = False
) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers=headers(server, who), timeout=60) as http:
        card = await A2ACardResolver(http, server.url).get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
        yield ClientFactory(config).create(card)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


def message_body(text: str, *, context_id: str = "", task_id: str = "", message_id: str = "") -> dict[str, Any]:
    body = {"messageId": message_id or uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    return body | ({"contextId": context_id} if context_id else {}) | ({"taskId": task_id} if task_id else {})


async def rpc(http: httpx.AsyncClient, server: Served, who: str | None, method: str, params: dict[str, Any]) -> Any:
    """The JSON-RPC answer (its `result` or its `error`, whole) to `who`'s call."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post(f"{server.url}/a2a/jsonrpc", json=body, headers=headers(server, who))
    assert response.status_code == 200, response.text
    return response.json()


async def rest(
    http: httpx.AsyncClient, server: Served, who: str, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    response = await http.request(method, f"{server.url}/a2a/rest{path}", headers=headers(server, who), json=body)
    return response.status_code, response.json()


def sent(text: str, context_id: str, *, message_id: str = "", task_id: str = "") -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=message_id or uuid.uuid4().hex, context_id=context_id,
                      task_id=task_id, parts=[Part(text=text)])
    return SendMessageRequest(message=message)


async def task_of(client: Client, request: SendMessageRequest) -> Any:
    found = [response async for response in client.send_message(request)]
    assert found[-1].WhichOneof("payload") == "task", found[-1]
    return found[-1].task


def user_texts(threads: dict[str, Any]) -> list[str]:
    return [item["content"] for item in threads.get("user->Developer", []) if item.get("role") == "user"]


# -- two principals, every method --------------------------------------------------------------------------------------


async def alices_tasks(server: Served) -> tuple[str, str, str, str, str]:
    """Alice's paused task and chat, her completed task and chat, and the message id that started the latter."""
    paused_chat, done_chat, first = unique("paused"), unique("done"), uuid.uuid4().hex
    async with client_for(server, ALICE) as alice:
        paused = await task_of(alice, sent("[deploy] v1", paused_chat))
        done = await task_of(alice, sent("the parser", done_chat, message_id=first))
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    return paused.id, paused_chat, done.id, done_chat, first


RPC_CALLS = {
    "GetTask": lambda task: {"id": task},
    "CancelTask": lambda task: {"id": task},
    "SubscribeToTask": lambda task: {"id": task},
    "SendMessage": lambda task: {"message": message_body("approve", task_id=task)},
    "SendStreamingMessage": lambda task: {"message": message_body("approve", task_id=task)},
}
REST_CALLS = [("GET", "/tasks/{}"), ("POST", "/tasks/{}:cancel"), ("POST", "/tasks/{}:subscribe"),
              ("GET", "/tasks/{}:subscribe"), ("GET", "/tasks/{}/pushNotificationConfigs"),
              ("GET", "/tasks/{}/pushNotificationConfigs/c1"), ("DELETE", "/tasks/{}/pushNotificationConfigs/c1")]
"""With the message routes and GET /tasks: every A2A route (`test_ag_ui_owners` lists them)."""


async def test_another_principals_task_answers_every_method_as_a_missing_one(server: Any) -> None:
    app = server.app
    a2a_app.deployed.clear()
    paused, paused_chat, done, done_chat, _ = await alices_tasks(server)
    async with httpx.AsyncClient(timeout=60) as http:
        for task in (paused, done):
            for method, params in RPC_CALLS.items():
                theirs = await rpc(http, server, BOB, method, params(task))
                assert theirs == await rpc(http, server, BOB, method, params(MISSING)), (method, task)
                assert theirs["error"]["code"] == NOT_FOUND
            for verb, path in REST_CALLS:
                theirs_rest = await rest(http, server, BOB, verb, path.format(task))
                assert theirs_rest == await rest(http, server, BOB, verb, path.format(MISSING)), (verb, path, task)
                assert theirs_rest[0] in (400, 404)  # push notifications: not served to anyone
    async with client_for(server, ALICE) as alice:
        still = await alice.get_task(GetTaskRequest(id=paused))
        assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # neither canceled nor approved
        assert {task.id for task in (await alice.list_tasks(ListTasksRequest())).tasks} == {paused, done}
    assert a2a_app.deployed == []
    async with httpx.AsyncClient(timeout=60) as http:
        listed = {who: (await http.get(f"{server.url}/chats", headers=headers(server, who))).json()["chats"]
                  for who in (ALICE, BOB)}
    assert {(chat["chat_id"], chat["title"]) for chat in listed[ALICE]} == {
        (paused_chat, "[deploy] v1"), (done_chat, "the parser")
    }
    assert listed[BOB] == []
    assert user_texts(await app.state.agency.get_threads(done_chat)) == ["the parser"]
    assert user_texts(await app.state.agency.get_threads(paused_chat)) == ["[deploy] v1"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_official_client_sees_another_principals_task_as_missing(server: Any, binding: str) -> None:
    paused, paused_chat, done, _, _ = await alices_tasks(server)
    async with client_for(server, BOB, binding) as bob, client_for(server, BOB, binding, streaming=True) as streams:
        for task in (paused, done, MISSING):
            with pytest.raises((TaskNotFoundError, A2AClientError), match=NOT_FOUND_TEXT):
                await bob.get_task(GetTaskRequest(id=task))
            with pytest.raises((TaskNotFoundError, A2AClientError), match=NOT_FOUND_TEXT):
                await bob.cancel_task(CancelTaskRequest(id=task))
            with pytest.raises((TaskNotFoundError, A2AClientError), match=NOT_FOUND_TEXT):
                _ = [event async for event in streams.subscribe(SubscribeToTaskRequest(id=task))]
        assert list((await bob.list_tasks(ListTasksRequest())).tasks) == []
        assert list((await bob.list_tasks(ListTasksRequest(context_id=paused_chat))).tasks) == []
        mine = await task_of(bob, sent("mine", unique("bob")))
        assert [task.id for task in (await bob.list_tasks(ListTasksRequest())).tasks] == [mine.id]
    async with client_for(server, ALICE, binding) as alice:
        assert {task.id for task in (await alice.list_tasks(ListTasksRequest())).tasks} == {paused, done}
        canceled = await alice.cancel_task(CancelTaskRequest(id=paused))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_message_into_another_principals_context_is_refused_and_nothing_runs(server: Any) -> None:
    app = server.app
    a2a_app.deployed.clear()
    paused, paused_chat, _, done_chat, first = await alices_tasks(server)
    before = await app.state.agency.get_threads(done_chat)
    async with httpx.AsyncClient(timeout=60) as http:
        for method in ("SendMessage", "SendStreamingMessage"):
            for body in (message_body("hi", context_id=done_chat),
                         message_body("again", context_id=done_chat, message_id=first),  # her message's task id
                         message_body("approve", context_id=paused_chat)):
                refused = await rpc(http, server, BOB, method, {"message": body})
                assert refused["error"]["message"] == "contextId: No chat of that id.", refused
        for path in ("/message:send", "/message:stream"):
            new = {"message": message_body("hi", context_id=done_chat)}
            into = await rest(http, server, BOB, "POST", path, new)
            assert (into[0], into[1]["error"]["message"]) == (400, "contextId: No chat of that id."), path
            answers = [
                await rest(http, server, BOB, "POST", path,
                           {"message": message_body("approve", task_id=task, message_id="m")})
                for task in (paused, MISSING)
            ]
            assert answers[0] == answers[1]
            assert answers[0][0] == 404
    async with client_for(server, BOB) as bob:
        with pytest.raises((InvalidParamsError, A2AClientError), match="No chat of that id"):
            await task_of(bob, sent("hi", done_chat))
        with pytest.raises((TaskNotFoundError, A2AClientError), match=NOT_FOUND_TEXT):
            await task_of(bob, sent("approve", paused_chat, task_id=paused))
    assert await app.state.agency.get_threads(done_chat) == before
    assert a2a_app.deployed == []
    async with client_for(server, ALICE) as alice:
        again = await task_of(alice, sent("its tests", done_chat))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED  # her chat goes on


async def test_an_admin_reads_every_task_but_writes_only_its_own(server: Any) -> None:
    paused, paused_chat, done, _, _ = await alices_tasks(server)
    async with client_for(server, ROOT) as root:
        assert (await root.get_task(GetTaskRequest(id=done))).status.state == TaskState.TASK_STATE_COMPLETED
        listed = await root.list_tasks(ListTasksRequest(context_id=paused_chat))
        assert [task.id for task in listed.tasks] == [paused]
    async with httpx.AsyncClient(timeout=60) as http:
        for method in ("CancelTask", "SendMessage"):
            params = RPC_CALLS[method]
            assert await rpc(http, server, ROOT, method, params(paused)) == await rpc(
                http, server, ROOT, method, params(MISSING)
            )
        refused = await rpc(http, server, ROOT, "SendMessage", {"message": message_body("hi", context_id=paused_chat)})
        assert refused["error"]["message"] == "contextId: No chat of that id."
    async with client_for(server, ALICE) as alice:
        assert (await alice.get_task(GetTaskRequest(id=paused))).status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_without_authentication_the_one_caller_has_every_task(tmp_path: Path) -> None:
    store = SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    async with served(store, authenticated=False) as server, httpx.AsyncClient(timeout=60) as http:
        started = await rpc(http, server, None, "SendMessage", {"message": message_body("[deploy] v9")})
        task = started["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        got = await rpc(http, server, None, "GetTask", {"id": task["id"]})
        listed = await rpc(http, server, None, "ListTasks", {"contextId": task["contextId"]})
        canceled = await rpc(http, server, None, "CancelTask", {"id": task["id"]})
    assert got["result"]["id"] == task["id"]
    assert [item["id"] for item in listed["result"]["tasks"]] == [task["id"]]
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_tools_of_an_a2a_turn_see_the_caller(tmp_path: Path) -> None:
    store = SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    async with served(store, factory=auth_app.build_agency) as server, client_for(server, ALICE) as alice:
        chat = unique("who")
        task = await task_of(alice, sent("whoami", chat))
    said = "\n".join(part.text for artifact in task.artifacts for part in artifact.parts if part.text)
    assert said == f"tool: {server.names[ALICE]} of - in {chat}"


# -- generated sequences against a model ---------------------------------------------------------------------------

PRINCIPALS = (ALICE, BOB)
CONTEXTS = 3


@dataclass
class Model:
    """Who owns each context, each task's context and state, and the paused task of each context."""

    owners: dict[int, str] = field(default_factory=dict)
    tasks: list[tuple[str, int, str]] = field(default_factory=list)  # (id, context, state)
    paused: dict[int, int] = field(default_factory=dict)  # context -> index of its INPUT_REQUIRED task

    def owner_of(self, index: int) -> str | None:
        return self.owners[self.tasks[index][1]] if index < len(self.tasks) else None


Op = tuple[str, int, int]  # (operation, principal number, context or task number)
OPERATIONS = st.tuples(
    st.sampled_from(["send", "deploy", "get", "list", "list_context", "cancel", "subscribe", "answer"]),
    st.integers(0, 1), st.integers(0, 3),
)


@dataclass
class Run:
    http: httpx.AsyncClient
    server: Served
    run: str
    model: Model = field(default_factory=Model)
    missing: dict[str, Any] = field(default_factory=dict)

    def task_id(self, number: int) -> str:
        return self.model.tasks[number][0] if number < len(self.model.tasks) else MISSING

    async def call(self, who: str, method: str, params: dict[str, Any]) -> Any:
        return await rpc(self.http, self.server, who, method, params)

    async def as_missing(self, who: str, method: str, params: Any) -> Any:
        """What `method` answers `who` for a task that does not exist (asked once per caller and method)."""
        key = f"{who} {method}"
        if key not in self.missing:
            self.missing[key] = await self.call(who, method, params(MISSING))
        return self.missing[key]


async def send(run: Run, who: str, context: int, text: str) -> None:
    model = run.model
    answer = await run.call(who, "SendMessage", {"message": message_body(text, context_id=f"{run.run}-{context}")})
    if model.owners.get(context, who) != who:
        assert answer["error"]["message"] == "contextId: No chat of that id.", answer
        return
    model.owners[context] = who
    task = answer["result"]["task"]
    if context in model.paused:
        state = "TASK_STATE_REJECTED"  # the chat waits for approval on its paused task
    elif "[deploy]" in text:
        state = "TASK_STATE_INPUT_REQUIRED"
        model.paused[context] = len(model.tasks)
    else:
        state = "TASK_STATE_COMPLETED"
    assert task["status"]["state"] == state, answer
    model.tasks.append((task["id"], context, state))


async def on_task(run: Run, who: str, method: str, number: int) -> None:
    """GetTask, CancelTask, SubscribeToTask or an answer on a task: as a missing task's unless it is `who`'s."""
    model = run.model
    mine = model.owner_of(number) == who
    state = model.tasks[number][2] if mine else ""
    if method in ("subscribe", "answer") and state == "TASK_STATE_INPUT_REQUIRED":
        return  # a subscription stays open, and approving runs the deploy: the other methods cover the owner
    rpc_method = {"get": "GetTask", "cancel": "CancelTask", "subscribe": "SubscribeToTask", "answer": "SendMessage"}
    params = RPC_CALLS[rpc_method[method]]
    answer = await run.call(who, rpc_method[method], params(run.task_id(number)))
    if not mine:
        assert answer == await run.as_missing(who, rpc_method[method], params), (method, answer)
        return
    if method == "get":
        assert answer["result"]["status"]["state"] == state
    elif method == "cancel" and state == "TASK_STATE_INPUT_REQUIRED":
        assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        task_id, context, _ = model.tasks[number]
        model.tasks[number] = (task_id, context, "TASK_STATE_CANCELED")
        del model.paused[context]
    elif method == "cancel":
        assert answer["error"]["code"] == NOT_CANCELABLE, answer
    else:  # a finished task: nothing to subscribe to or answer, and no "not found"
        assert answer.get("error", {}).get("code") != NOT_FOUND, answer


async def listing(run: Run, who: str, context: int | None) -> None:
    params = {} if context is None else {"contextId": f"{run.run}-{context}"}
    answer = await run.call(who, "ListTasks", params)
    want = {task_id for task_id, where, _ in run.model.tasks
            if run.model.owners[where] == who and context in (None, where)}
    assert {task["id"] for task in answer["result"]["tasks"]} == want
    assert answer["result"].get("totalSize", 0) == len(want)


async def play(store: ThreadStore, ops: list[Op]) -> None:
    async with served(store) as server, httpx.AsyncClient(timeout=60) as http:
        run = Run(http, server, unique("gen"))
        for operation, principal, number in ops:
            who = PRINCIPALS[principal]
            if operation in ("send", "deploy"):
                await send(run, who, number % CONTEXTS, "[deploy] x" if operation == "deploy" else "note")
            elif operation.startswith("list"):
                await listing(run, who, number % CONTEXTS if operation == "list_context" else None)
            else:
                await on_task(run, who, operation, number)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPERATIONS, min_size=1, max_size=14))
def test_generated_operations_of_two_principals_keep_each_to_its_own_tasks(
    kind: str, tmp_path: Path, ops: list[Op]
) -> None:
    directory = tmp_path / uuid.uuid4().hex[:10]
    directory.mkdir()
    asyncio.run(play(open_store(kind, directory), ops))
