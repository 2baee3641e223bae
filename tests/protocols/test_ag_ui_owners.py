"""Whose chat a run of `POST /ag-ui` is on, with three principals (static tokens; `root` an admin): `threadId` is
ruled as a chat route's path is, so another principal's thread answers the chat routes' 404 before any stream, and
a run on a new thread claims it. Every operation of the app that names a chat in its body, not its path, is listed
here, and each is checked like the chat routes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, EventType

from ag_ui_support import check_well_formed, events_of, run_input
from agency_swarm import MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm.serving import AuthSettings, create_app
from auth_app import build_agency

NOT_FOUND = {"error": {"type": "not_found", "message": "No chat of that id."}}
TOKENS = {name: f"{name}-token-{uuid.uuid4().hex}" for name in ("alice", "bob", "root")}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    store: ThreadStore = (
        MemoryThreadStore() if request.param == "memory" else SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    )
    built = create_app(build_agency, store=store, auth=AuthSettings(tokens=TOKENS, admins=("root",)), ag_ui=True)
    built.state.access.clock = Clock()
    yield built
    await built.state.agency.aclose()


def client(app: Any, name: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://app",
        headers={"authorization": f"Bearer {TOKENS[name]}"},
    )


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


async def run(http: httpx.AsyncClient, body: dict[str, Any]) -> list[BaseEvent]:
    response = await http.post("/ag-ui", json=body)
    assert response.status_code == 200, response.text
    events = events_of(response.text)
    check_well_formed(events)
    return events


def resume_body(thread: str, call_id: str) -> dict[str, Any]:
    resume = [{"interruptId": call_id, "status": "resolved", "payload": {"approved": True}}]
    return run_input(thread, unique("run"), resume=resume)


async def refused(http: httpx.AsyncClient, body: dict[str, Any]) -> None:
    answer = await http.post("/ag-ui", json=body)
    assert answer.headers["content-type"] == "application/json"
    assert (answer.status_code, answer.json()) == (404, NOT_FOUND)


async def test_another_principal_cannot_run_or_resume_on_a_thread_it_does_not_own(app: Any) -> None:
    thread = unique("thread")
    async with client(app, "alice") as alice, client(app, "bob") as bob, client(app, "root") as root:
        paused = await run(alice, run_input(thread, "run-1", "ask"))  # `ask` waits for approval
        [interrupt] = paused[-1].outcome.interrupts
        before = (await alice.get(f"/chats/{thread}/threads", params={"marks": "true"})).json()
        for stranger in (bob, root):  # an admin reads every chat, but a run writes
            await refused(stranger, run_input(thread, "run-1", "ask"))  # alice's runId too: not her turn again
            await refused(stranger, run_input(thread, unique("run"), "whoami"))
            await refused(stranger, resume_body(thread, interrupt.id))
        await refused(bob, resume_body(unique("nobodys"), interrupt.id))  # the same answer as for no chat at all
        assert (await root.get(f"/chats/{thread}/threads")).status_code == 200
        after = (await alice.get(f"/chats/{thread}/threads", params={"marks": "true"})).json()
        assert after == before  # nothing bob or root sent ran, approved or claimed anything
        assert (await bob.get("/chats")).json()["chats"] == []
        assert (await root.get("/chats")).json()["chats"] == []
        assert [(c["chat_id"], c["title"]) for c in (await alice.get("/chats")).json()["chats"]] == [(thread, "ask")]
        resumed = await run(alice, resume_body(thread, interrupt.id))
        assert resumed[-1].result == "tool: asked for alice"  # the tool sees the caller of the run


async def test_a_run_on_a_new_thread_claims_it_for_the_caller(app: Any) -> None:
    clock, mine, hers = app.state.access.clock, unique("bobs"), unique("alices")
    async with client(app, "alice") as alice, client(app, "bob") as bob:
        await run(alice, run_input(hers, "run-1", "hello"))
        clock.now += 5
        events = await run(bob, run_input(mine, "run-1", "  who\n am I?  "))
        assert events[-1].type == EventType.RUN_FINISHED
        clock.now += 5
        events = await run(bob, run_input(mine, "run-2", "whoami"))
        assert events[-1].result == f"tool: bob of - in {mine}"
        [chat] = (await bob.get("/chats")).json()["chats"]
        assert (chat["chat_id"], chat["title"]) == (mine, "who am I?")
        assert (chat["created_at"], chat["last_activity_at"]) == ("2023-11-14T22:13:25Z", "2023-11-14T22:13:30Z")
        assert (await alice.get(f"/chats/{mine}/threads")).status_code == 404  # bob's, on every route
        assert (await alice.post(f"/chats/{mine}/messages", json={"message": "mine now?"})).status_code == 404
        threads = (await bob.get(f"/chats/{mine}/threads")).json()["threads"]
        assert [item.get("content") for item in threads["user->A"] if item.get("role") == "user"] == [
            "  who\n am I?  ", "whoami"
        ]


async def test_a_thread_started_on_a_chat_route_is_its_owners_on_ag_ui_too(app: Any) -> None:
    chat = unique("chat")
    async with client(app, "alice") as alice, client(app, "bob") as bob:
        assert (await alice.post(f"/chats/{chat}/messages", json={"message": "hi"})).status_code == 200
        await refused(bob, run_input(chat, "run-1", "whoami"))
        events = await run(alice, run_input(chat, "run-1", "whoami"))
        assert events[-1].result == f"tool: alice of - in {chat}"


# -- every operation that names a chat in its body ---------------------------------------------------------------------

BODY_ADDRESSED: dict[str, tuple[str, Callable[[str], dict[str, Any]]]] = {
    "ag_ui_run": ("threadId", lambda chat: run_input(chat, unique("run"), "whoami")),
}
"""operationId: (the body field holding the chat id, a valid body for a chat id). Its route checks the owner."""
NOT_A_CHATS = frozenset({"healthz", "list_chats"})
"""Operations that name no chat at all (GET /chats lists the caller's own)."""


def test_every_operation_names_its_chat_in_its_path_or_is_listed_here(app: Any) -> None:
    spec = app.openapi()
    operations = {
        operation["operationId"]: (path, operation)
        for path, methods in spec["paths"].items() for operation in methods.values()
    }
    unlisted = sorted(
        name for name, (path, _) in operations.items()
        if "{chat_id}" not in path and name not in BODY_ADDRESSED and name not in NOT_A_CHATS
    )
    assert unlisted == [], "a new route outside /chats/{chat_id}: check its chat's owner, then list it here"
    schemas = spec["components"]["schemas"]
    for name, (field, _) in BODY_ADDRESSED.items():
        _, operation = operations[name]
        body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        assert field in schemas[body]["properties"], (name, "the listed field is not in its body any more")


PUBLIC_PAGES = frozenset({"/openapi.json", "/.well-known/agent-card.json", "/", "/ui", "/ui/app.js", "/ui/app.css",
                          "/ui/chart.svg"})
"""Routes outside the OpenAPI document that name no chat: the document, the Agent Card, the web chat's files."""
A2A_ROUTES = frozenset({
    "/a2a/jsonrpc", "/a2a/rest/message:send", "/a2a/rest/message:stream", "/a2a/rest/tasks",
    "/a2a/rest/tasks/{id}", "/a2a/rest/tasks/{id}:cancel", "/a2a/rest/tasks/{id}:subscribe",
    "/a2a/rest/tasks/{id}/pushNotificationConfigs", "/a2a/rest/tasks/{id}/pushNotificationConfigs/{push_id}",
    "/a2a/rest/extendedAgentCard",
})
"""The A2A routes (outside the OpenAPI document: A2A has its own). A task is its chat's (its context id): each route
that names a task answers another principal's one as a missing one, a message into another's context is refused,
and the listing holds the caller's tasks only (tests/protocols/test_a2a_owners.py drives each with two principals; the
extended card names no task, and this server serves none)."""


def test_every_route_outside_the_openapi_document_is_public_or_ruled_by_task_owners() -> None:
    built = create_app(build_agency, store=MemoryThreadStore(), auth=AuthSettings(tokens=TOKENS), ag_ui=True,
                       a2a=True, ui=True)
    documented = set(built.openapi()["paths"])
    outside = {route.path for route in built.router.routes if getattr(route, "path", None) not in documented}
    assert outside == PUBLIC_PAGES | A2A_ROUTES, "a new route: rule its chat's owner, then list it here"
    assert not any("{chat_id}" in path for path in outside)


@pytest.mark.parametrize("operation", sorted(BODY_ADDRESSED))
async def test_a_body_addressed_route_answers_another_principals_chat_as_the_chat_routes_do(
    app: Any, operation: str
) -> None:
    field, body_for = BODY_ADDRESSED[operation]
    path, method = next(
        (path, method.upper()) for path, methods in app.openapi()["paths"].items()
        for method, spec in methods.items() if spec["operationId"] == operation
    )
    chat = unique("chat")
    async with client(app, "alice") as alice, client(app, "bob") as bob:
        assert (await alice.post(f"/chats/{chat}/messages", json={"message": "ask"})).json()["paused"] is True
        before = (await alice.get(f"/chats/{chat}/threads", params={"marks": "true"})).json()
        body = body_for(chat)
        assert body[field] == chat
        theirs = await bob.request(method, path, json=body)
        assert (theirs.status_code, theirs.json()) == (404, NOT_FOUND)
        route = await bob.get(f"/chats/{chat}/threads")
        assert (route.status_code, route.json()) == (theirs.status_code, theirs.json())
        assert (await alice.get(f"/chats/{chat}/threads", params={"marks": "true"})).json() == before
