"""Whose chat it is, in-process on every store (memory, file, SQLite, PostgreSQL): another principal gets the same
404 on every chat route (read from the app's own OpenAPI document) as for a chat that does not exist; GET /chats;
and what a request carries to its turn (principal, `context`, `additional_instructions`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agency_swarm import FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm.serving import AuthSettings, create_app
from auth_app import SEEN, Tenant, build_agency
from auth_support import AUDIENCE, ISSUER, SECRET, chat_routes, hs256
from postgres_support import require_postgres

STORES = ["memory", "file", "sqlite", "postgres"]
NOT_FOUND = {"error": {"type": "not_found", "message": "No chat of that id."}}


def open_store(kind: str, tmp_path: Path) -> ThreadStore:
    if kind == "memory":
        return MemoryThreadStore()
    if kind == "file":
        return FileThreadStore(tmp_path / "threads")
    if kind == "sqlite":
        return SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    return SQLThreadStore(require_postgres())


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=STORES)
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    settings = AuthSettings(jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE, admin_scope="chats:admin")
    built = create_app(build_agency, store=open_store(request.param, tmp_path), auth=settings, context_schema=Tenant)
    built.state.access.clock = Clock()
    yield built
    await built.state.agency.aclose()


def as_principal(app: Any, name: str, **claims: Any) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {hs256(name, **claims)}"}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app", headers=headers)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


# -- two principals, every route -----------------------------------------------------------------------------------


async def test_another_principals_chat_answers_every_route_as_one_that_does_not_exist(app: Any) -> None:
    alice_name, bob_name, chat = unique("alice"), unique("bob"), unique("chat")
    routes = list(chat_routes(app.openapi()))
    assert {route.operation for route in routes} >= {
        "post_message", "stream_message", "resume", "resume_stream", "get_threads", "delete_chat"
    }
    async with as_principal(app, alice_name) as alice, as_principal(app, bob_name) as bob:
        paused = await alice.post(f"/chats/{chat}/messages", json={"message": "ask"})  # waits for approval
        assert paused.json()["paused"] is True
        before = (await alice.get(f"/chats/{chat}/threads", params={"marks": "true"})).json()
        for route in routes:
            theirs = await bob.request(route.method, route.url(chat), json=route.body)
            assert (theirs.status_code, theirs.json()) == (404, NOT_FOUND), route
            if not route.creates:  # a POST of a message to an id nobody holds starts a chat: that one differs
                nobody = await bob.request(route.method, route.url(unique("none")), json=route.body)
                assert (nobody.status_code, nobody.headers["content-type"], nobody.json()) == (
                    theirs.status_code, theirs.headers["content-type"], theirs.json()
                ), route
        after = (await alice.get(f"/chats/{chat}/threads", params={"marks": "true"})).json()
        assert after == before  # nothing bob sent ran, approved or deleted anything
        call_id = paused.json()["interruptions"][0]["call_id"]
        resumed = await alice.post(f"/chats/{chat}/resume", json={"approve": [call_id]})
        assert resumed.json()["final_output"] == f"tool: asked for {alice_name}"
        assert [c["chat_id"] for c in (await alice.get("/chats")).json()["chats"]] == [chat]
        assert (await bob.get("/chats")).json()["chats"] == []
        assert (await alice.delete(f"/chats/{chat}")).status_code == 204
        assert (await bob.post(f"/chats/{chat}/messages", json={"message": "hi"})).status_code == 404  # still hers
        assert (await alice.get("/chats")).json()["chats"] == []


# -- GET /chats ----------------------------------------------------------------------------------------------------


async def test_get_chats_lists_the_callers_chats_newest_activity_first_a_page_at_a_time(app: Any) -> None:
    clock, owner, other = app.state.access.clock, unique("owner"), unique("other")
    first, second, third = unique("c1"), unique("c2"), unique("c3")
    async with as_principal(app, owner) as client, as_principal(app, other) as stranger:
        for chat, message in ((first, "Plan the\n  launch"), (second, "second chat"), (third, "third chat")):
            clock.now += 1
            assert (await client.post(f"/chats/{chat}/messages", json={"message": message})).status_code == 200
        clock.now += 1
        assert (await stranger.post(f"/chats/{unique('s')}/messages", json={"message": "mine"})).status_code == 200
        clock.now += 1
        await client.post(f"/chats/{first}/messages", json={"message": "again"})  # the first is the newest now
        page = (await client.get("/chats", params={"limit": 2})).json()
        assert [(chat["chat_id"], chat["title"]) for chat in page["chats"]] == [
            (first, "Plan the launch"), (third, "third chat")
        ]
        assert page["chats"][0]["last_activity_at"] == "2023-11-14T22:13:25Z"
        assert page["chats"][0]["created_at"] == "2023-11-14T22:13:21Z"
        rest = (await client.get("/chats", params={"limit": 2, "cursor": page["next_cursor"]})).json()
        assert ([chat["chat_id"] for chat in rest["chats"]], rest["next_cursor"]) == ([second], None)
        assert (await client.delete(f"/chats/{third}")).status_code == 204
        assert [chat["chat_id"] for chat in (await client.get("/chats")).json()["chats"]] == [first, second]
        bad = await client.get("/chats", params={"cursor": "not-a-cursor"})
        assert (bad.status_code, bad.json()["error"]["type"]) == (400, "bad_request")
        assert (await client.get("/chats", params={"limit": 0})).status_code == 422
        assert (await client.get("/chats", params={"limit": 101})).status_code == 422


# -- what a request carries ------------------------------------------------------------------------------------------


@pytest.fixture
async def memory_app() -> AsyncIterator[Any]:
    settings = AuthSettings(jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE)
    built = create_app(
        build_agency, store=MemoryThreadStore(), auth=settings, context_schema=Tenant,
        allow_additional_instructions=True,
    )
    yield built
    await built.state.agency.aclose()


async def test_tools_guardrails_and_instructions_see_the_caller_and_the_context(memory_app: Any) -> None:
    SEEN.clear()
    pro = {"tenant": "acme", "plan": "pro"}
    async with as_principal(memory_app, "alice", scope="billing:read") as alice, \
            as_principal(memory_app, "bob") as bob:
        billed = await alice.post("/chats/a/messages", json={"message": "billing", "context": pro})
        assert billed.json()["final_output"] == "tool: bill of alice: 42"
        refused = await bob.post("/chats/b/messages", json={"message": "billing", "context": pro})
        assert refused.json()["final_output"] == "tool: refused: the billing:read scope is needed"
        free = await alice.post("/chats/a/messages", json={"message": "billing", "context": {"tenant": "acme"}})
        assert free.json()["final_output"] == "tool: refused: the pro plan is needed"
        heard = await bob.post("/chats/b/messages", json={"message": "hi"})
        assert heard.json()["final_output"] == "heard: hi | You serve bob."
        streamed = await alice.post("/chats/a/messages:stream", json={"message": "whoami", "context": pro})
        done = json.loads(streamed.text.strip().split("\n")[-1].removeprefix("data: "))
        assert done["result"]["final_output"] == "tool: alice of acme in a"
    assert SEEN == [("alice", "acme"), ("bob", "acme"), ("alice", "acme"), ("bob", None), ("alice", "acme")]


async def test_a_resume_carries_its_own_callers_context(memory_app: Any) -> None:
    async with as_principal(memory_app, "alice") as alice:
        paused = (await alice.post("/chats/r/messages", json={"message": "ask", "context": {"tenant": "t"}})).json()
        decision = {"approve": [paused["interruptions"][0]["call_id"]], "context": {"tenant": "t"}}
        resumed = await alice.post("/chats/r/resume", json=decision)
        assert resumed.json()["final_output"] == "tool: asked for alice"


async def test_a_context_must_match_the_declared_schema(memory_app: Any) -> None:
    async with as_principal(memory_app, "alice") as alice:
        for context, problem in (
            ({"tenant": 5}, "context.tenant: Input should be a valid string"),
            ({"plan": "gold"}, "context.tenant: Field required; context.plan: Input should be 'free' or 'pro'"),
        ):
            response = await alice.post("/chats/v/messages", json={"message": "hi", "context": context})
            assert (response.status_code, response.json()["error"]["type"]) == (400, "bad_request")
            assert problem in response.json()["error"]["message"]
        assert (await alice.get("/chats/v/threads")).json()["threads"] == {}  # nothing ran


async def test_additional_instructions_reach_the_model_only_where_allowed(memory_app: Any, tmp_path: Path) -> None:
    body = {"message": "hi", "additional_instructions": "Answer in French."}
    async with as_principal(memory_app, "alice") as alice:
        heard = (await alice.post("/chats/i/messages", json=body)).json()["final_output"]
        assert heard.startswith("heard: hi | You serve alice.")
        assert "Answer in French." in heard
    strict = create_app(build_agency, store=MemoryThreadStore(), auth=AuthSettings(
        jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE,
    ))
    async with as_principal(strict, "alice") as alice:
        for extra in ({"additional_instructions": "Answer in French."}, {"context": {"tenant": "t"}}):
            response = await alice.post("/chats/i/messages", json={"message": "hi", **extra})
            assert (response.status_code, response.json()["error"]["type"]) == (400, "bad_request")
            assert "This server takes no" in response.json()["error"]["message"]
    await strict.state.agency.aclose()


def test_the_openapi_document_shows_the_declared_context_schema(memory_app: Any) -> None:
    spec = memory_app.openapi()
    schemas = spec["components"]["schemas"]
    context = schemas["MessageRequest"]["properties"]["context"]
    assert context["anyOf"][0] == {"$ref": "#/components/schemas/Tenant"}
    assert schemas["Tenant"]["required"] == ["tenant"]
    assert schemas["ResumeRequest"]["properties"]["context"]["anyOf"][0] == {"$ref": "#/components/schemas/Tenant"}
    listing = spec["paths"]["/chats"]["get"]
    assert listing["operationId"] == "list_chats"
    assert listing["security"] == [{"HTTPBearer": []}]
    assert "404" in spec["paths"]["/chats/{chat_id}/threads"]["get"]["responses"]
