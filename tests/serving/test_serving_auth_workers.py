"""Two principals through real `agency-swarm serve` processes on PostgreSQL, 2 workers each, plain and durable: every
chat route of the server's own OpenAPI document answers another principal's chat as one that does not exist, on
whichever worker takes the request; GET /chats; the request's context reaches the tool on the worker that runs the
turn (in durable mode, stored with the turn)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from auth_support import AUDIENCE, ISSUER, SECRET, chat_routes, hs256
from postgres_support import require_postgres
from serving_support import Server, chat_prefix, delete_chats, start_serve

SECRET_ENV = "AUTH_TEST_JWT_SECRET"
WORKERS = 2
TRIES = 3
"""Each refused request is sent this often, on a new connection each time: any worker may take it."""
NOT_FOUND = {"error": {"type": "not_found", "message": "No chat of that id."}}
BOUND_S = 120.0  # a safety net for requests, never a pause


@pytest.fixture(scope="module")
def prefix() -> Iterator[str]:
    value = chat_prefix("auth")
    yield value
    delete_chats(value)


def serve(*extra: str) -> Server:
    return start_serve(
        [
            "--factory", "auth_app:build_agency", "--store", require_postgres(), "--jwt-secret-env", SECRET_ENV,
            "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, "--context-schema", "auth_app:Tenant", *extra,
        ],
        workers=WORKERS, env={SECRET_ENV: SECRET},
    )


@pytest.fixture(scope="module", params=["plain", "durable"])
def server(request: pytest.FixtureRequest, prefix: str) -> Iterator[Server]:
    running = serve() if request.param == "plain" else serve("--durable")
    yield running
    running.stop()


def as_principal(server: Server, name: str) -> httpx.Client:
    fresh = httpx.Limits(max_keepalive_connections=0)  # a new connection per request: either worker may take it
    headers = {"authorization": f"Bearer {hs256(name)}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=BOUND_S, limits=fresh)


def answer(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


def test_another_principals_chat_is_a_404_on_every_route_of_every_worker(server: Server, prefix: str) -> None:
    alice_name, bob_name = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    chat = f"{prefix}{uuid.uuid4().hex[:8]}"
    spec = httpx.get(f"{server.url}/openapi.json", timeout=BOUND_S).json()
    routes = list(chat_routes(spec))
    durable = "/chats/{chat_id}/turns/{turn_id}" in spec["paths"]
    with as_principal(server, alice_name) as alice, as_principal(server, bob_name) as bob:
        paused = alice.post(f"/chats/{chat}/messages", json={"message": "ask"})
        assert paused.json()["paused"] is True, paused.text
        turn_id = paused.headers.get("turn-id", "no-such-turn")
        before = alice.get(f"/chats/{chat}/threads", params={"marks": "true"}).json()
        for route in routes:
            for _ in range(TRIES):
                theirs = bob.request(route.method, route.url(chat, turn_id), json=route.body)
                assert answer(theirs) == (404, NOT_FOUND), (route, theirs.text)
                if not route.creates:
                    nobody = bob.request(route.method, route.url(f"{prefix}none-{uuid.uuid4().hex}", turn_id),
                                         json=route.body)
                    assert answer(nobody) == answer(theirs), route
        assert alice.get(f"/chats/{chat}/threads", params={"marks": "true"}).json() == before
        if durable:
            assert alice.get(f"/chats/{chat}/turns/{turn_id}").json()["status"] == "done"
        listed = alice.get("/chats").json()["chats"]
        assert [entry["chat_id"] for entry in listed] == [chat]
        assert listed[0]["title"] == "ask"
        assert bob.get("/chats").json()["chats"] == []
        call_id = paused.json()["interruptions"][0]["call_id"]
        resumed = alice.post(f"/chats/{chat}/resume", json={"approve": [call_id]})
        assert resumed.json()["final_output"] == f"tool: asked for {alice_name}", resumed.text
    assert any(route.operation == "get_turn" for route in routes) == durable


def test_the_context_reaches_the_tool_on_the_worker_that_runs_the_turn(server: Server, prefix: str) -> None:
    name = f"carol-{uuid.uuid4().hex[:8]}"
    durable = "/chats/{chat_id}/turns/{turn_id}" in httpx.get(f"{server.url}/openapi.json", timeout=BOUND_S).json()[
        "paths"
    ]
    with as_principal(server, name) as carol:
        for number in range(4):
            chat = f"{prefix}ctx-{number}-{uuid.uuid4().hex[:6]}"
            body: dict[str, Any] = {"message": "whoami", "context": {"tenant": f"t{number}"}}
            if durable and number % 2:
                body["background"] = True  # queued: any worker runs it, with the context stored with the turn
                accepted = carol.post(f"/chats/{chat}/messages", json=body)
                assert accepted.status_code == 202, accepted.text
                with carol.stream("GET", f"{accepted.headers['location']}/events") as events:
                    assert list(events.iter_lines())  # read to the end: the turn is done
                result = carol.get(accepted.headers["location"]).json()["result"]
            else:
                result = carol.post(f"/chats/{chat}/messages", json=body).json()
            assert result["final_output"] == f"tool: {name} of t{number} in {chat}"
