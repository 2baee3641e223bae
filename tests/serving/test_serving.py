"""The HTTP app in-process (httpx over ASGI) for every endpoint and error, plus a real uvicorn for disconnects."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from agency_swarm import (
    Agency,
    Agent,
    ConfigError,
    MemoryThreadStore,
    SQLThreadStore,
    StoreError,
    ThreadStore,
    function_tool,
)
from agency_swarm.serving import ServeSettings, _sse, app_from_env, create_app
from agency_swarm.serving import _serve as serving
from agency_swarm.testing import Fail, ScriptedModel, ToolCall
from serving_app import build_agency, ceo_answer, developer_script
from serving_support import Blocking, blocking_agency, live

TOKEN = "s3cret-t0ken-value"
BOUND = 60  # seconds: a safety net for awaits on events, never a pause


def client_for(app: Any, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app", headers=headers)


@pytest.fixture
async def app() -> AsyncIterator[Any]:
    built = create_app(build_agency, store=MemoryThreadStore())
    yield built
    await built.state.agency.aclose()


@pytest.fixture
async def client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as opened:
        yield opened


def sse_events(text: str) -> list[dict[str, Any]]:
    """Parse an SSE body: every event's `event:` name must match the `type` in its data."""
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        assert lines[0].startswith("event: "), block
        assert lines[1].startswith("data: "), block
        assert len(lines) == 2, block
        data = json.loads(lines[1].removeprefix("data: "))
        assert data["type"] == lines[0].removeprefix("event: ")
        events.append(data)
    return events


def error_of(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"]["type"] == kind, body
    assert "Traceback" not in response.text
    return body["error"]


# -- turns ------------------------------------------------------------------------------------------------


async def test_a_message_returns_the_turns_result(client: httpx.AsyncClient) -> None:
    response = await client.post("/chats/c1/messages", json={"message": "build it"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "chat_id", "agent", "final_output", "new_items", "usage", "usage_by_agent", "cost_usd", "cost_by_agent",
        "paused", "interruptions",
    }
    assert body["cost_usd"] is None
    assert body["cost_by_agent"] == {"CEO": None, "Developer": None}
    assert (body["chat_id"], body["agent"], body["paused"], body["interruptions"]) == ("c1", "CEO", False, [])
    assert re.fullmatch(ceo_answer(1, "build it"), body["final_output"])
    assert [item.get("type", "user") for item in body["new_items"]] == [
        "user", "function_call", "function_call_output", "message"
    ]
    assert body["usage"] == {
        "requests": 3, "input_tokens": 30, "output_tokens": 15, "total_tokens": 45, "cached_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert {name: usage["requests"] for name, usage in body["usage_by_agent"].items()} == {"CEO": 2, "Developer": 1}
    second = await client.post("/chats/c1/messages", json={"message": "again", "recipient_agent": "CEO"})
    assert re.fullmatch(ceo_answer(2, "again"), second.json()["final_output"])


async def test_raw_model_events_are_sent_when_asked_for(client: httpx.AsyncClient) -> None:
    plain = sse_events((await client.post("/chats/c1/messages:stream", json={"message": "build it"})).text)
    response = await client.post("/chats/c2/messages:stream", params={"raw": "true"}, json={"message": "build it"})
    events = sse_events(response.text)
    assert any(e["type"] == "raw" and e["data"]["type"] == "response.completed" for e in events)
    assert [e["type"] for e in events if e["type"] != "raw"] == [e["type"] for e in plain]
    assert len(response.content) > 2 * len("".join(str(e) for e in plain))  # raw events are most of the bytes


async def test_the_stream_is_every_event_in_order_then_done(client: httpx.AsyncClient) -> None:
    response = await client.post("/chats/c1/messages:stream", json={"message": "build it"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    events = sse_events(response.text)
    for event in events[:-1]:
        assert event["chat_id"] == "c1"
        assert (event["agent"], event["caller"], event["depth"]) in {("CEO", "user", 0), ("Developer", "CEO", 1)}
    steps = [
        (event["type"], event.get("agent"), event.get("caller"), event.get("depth"))
        for event in events if event["type"] not in ("raw", "text_delta")
    ]
    assert steps == [
        ("agent_started", "CEO", "user", 0),
        ("tool_called", "CEO", "user", 0),
        ("message_sent", "CEO", "user", 0),
        ("agent_started", "Developer", "CEO", 1),
        ("agent_finished", "Developer", "CEO", 1),
        ("tool_output", "CEO", "user", 0),
        ("agent_finished", "CEO", "user", 0),
        ("done", None, None, None),
    ]
    developer_text = "".join(e["delta"] for e in events if e["type"] == "text_delta" and e["agent"] == "Developer")
    finished = {e["agent"]: e["output"] for e in events if e["type"] == "agent_finished"}
    assert developer_text == finished["Developer"]
    assert not any(e["type"] == "raw" for e in events)  # asked for with ?raw=true only
    result = events[-1]["result"]
    assert result["final_output"] == finished["CEO"]
    assert re.fullmatch(ceo_answer(1, "build it"), result["final_output"])
    assert result["usage"]["requests"] == 3


async def test_threads_are_what_the_store_holds_and_delete_forgets_them(client: httpx.AsyncClient) -> None:
    assert (await client.get("/chats/c1/threads")).json() == {"chat_id": "c1", "threads": {}}
    await client.post("/chats/c1/messages", json={"message": "one"})
    await client.post("/chats/c1/messages", json={"message": "two"})
    await client.post("/chats/other/messages", json={"message": "kept"})
    threads = (await client.get("/chats/c1/threads")).json()["threads"]
    assert {key: len(items) for key, items in threads.items()} == {"user->CEO": 8, "CEO->Developer": 4}
    assert threads["user->CEO"][4] == {"role": "user", "content": "two"}
    deleted = await client.delete("/chats/c1")
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert (await client.get("/chats/c1/threads")).json()["threads"] == {}
    assert (await client.get("/chats/other/threads")).json()["threads"] != {}
    again = await client.post("/chats/c1/messages", json={"message": "fresh"})
    assert re.fullmatch(ceo_answer(1, "fresh"), again.json()["final_output"])  # a new chat from scratch


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_unknown_paths_and_methods_are_json_errors(client: httpx.AsyncClient) -> None:
    error_of(await client.get("/nowhere"), 404, "not_found")
    not_allowed = await client.get("/chats/c1/messages")
    error_of(not_allowed, 405, "method_not_allowed")
    assert not_allowed.headers["allow"] == "POST"  # RFC 9110: a 405 names the methods that are allowed
    assert (await client.get("/docs")).status_code == 404  # no CDN-backed docs page: this may run offline


# -- the OpenAPI schema matches what the app does ------------------------------------------------------------


async def test_openapi_lists_every_endpoint_with_its_real_shapes() -> None:
    app = create_app(build_agency, store=MemoryThreadStore(), auth_token=TOKEN)
    async with client_for(app) as client:
        spec = (await client.get("/openapi.json")).json()  # no token needed to read it
        assert {path: sorted(methods) for path, methods in spec["paths"].items()} == {
            "/healthz": ["get"],
            "/chats/{chat_id}/messages": ["post"],
            "/chats/{chat_id}/messages:stream": ["post"],
            "/chats/{chat_id}/resume": ["post"],
            "/chats/{chat_id}/resume:stream": ["post"],
            "/chats/{chat_id}/threads": ["get"],
            "/chats/{chat_id}": ["delete"],
            "/chats/{chat_id}/turns/{turn_id}:cancel": ["post"],
            "/chats": ["get"],
        }
        schemas = spec["components"]["schemas"]
        post = spec["paths"]["/chats/{chat_id}/messages"]["post"]
        assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("RunResultResponse")
        assert post["security"] == [{"HTTPBearer": []}]
        assert spec["components"]["securitySchemes"] == {"HTTPBearer": {"type": "http", "scheme": "bearer"}}
        assert set(post["responses"]) == {"200", "400", "401", "404", "409", "413", "415", "422", "500", "503"}
        assert list(post["requestBody"]["content"]) == ["application/json", "multipart/form-data"]  # files too
        assert set(schemas["MessageRequest"]["properties"]) == {
            "message", "recipient_agent", "context", "additional_instructions"
        }
        assert schemas["MessageRequest"]["required"] == ["message"]
        stream = spec["paths"]["/chats/{chat_id}/messages:stream"]["post"]
        assert list(stream["responses"]["200"]["content"]) == ["text/event-stream"]
        assert "healthz" not in str(spec["paths"]["/healthz"]["get"].get("security", ""))

        headers = {"authorization": f"Bearer {TOKEN}"}
        result = (await client.post("/chats/c/messages", json={"message": "hi"}, headers=headers)).json()
        assert set(result) == set(schemas["RunResultResponse"]["properties"])
        assert set(result["usage"]) == set(schemas["UsageResponse"]["properties"])
        threads = (await client.get("/chats/c/threads", headers=headers)).json()
        assert set(threads) == set(schemas["ThreadsResponse"]["properties"])
        error = (await client.post("/chats/c/messages", json={}, headers=headers)).json()
        assert set(error) == set(schemas["ErrorResponse"]["properties"])
        assert set(error["error"]) <= set(schemas["ErrorDetail"]["properties"])
    await app.state.agency.aclose()


def test_openapi_links_lead_from_a_chat_to_what_may_follow() -> None:
    spec = create_app(build_agency, store=MemoryThreadStore()).openapi()
    operations = {op["operationId"]: op for methods in spec["paths"].values() for op in methods.values()}
    assert set(operations) == {
        "healthz", "post_message", "stream_message", "resume", "resume_stream", "get_threads", "delete_chat",
        "list_chats", "cancel_turn",
    }
    same_chat = {"chat_id": "$request.path.chat_id"}
    for name, op in operations.items():
        if name in ("healthz", "list_chats"):
            continue
        ok = op["responses"]["204" if name == "delete_chat" else "200"]
        chat_operations = set(operations) - {"healthz", "list_chats", "cancel_turn"}  # a cancel needs a turn id
        assert {link["operationId"] for link in ok["links"].values()} >= chat_operations
        assert all(link["parameters"] == same_chat for link in ok["links"].values())
        assert "Names the chat" in op["parameters"][0]["schema"]["description"]
    approve = operations["post_message"]["responses"]["409"]["links"]["approve_waiting_call"]
    assert approve == {
        "operationId": "resume", "parameters": same_chat,
        "requestBody": {"approve": ["$response.body#/error/interruptions/0/call_id"]},
    }
    assert operations["resume"]["responses"]["200"]["links"]["approve_waiting_call"]["requestBody"] == {
        "approve": ["$response.body#/interruptions/0/call_id"]
    }
    stream = operations["stream_message"]["responses"]
    event = stream["200"]["content"]["text/event-stream"]["schema"]  # each event, as OpenAPI 3.2's itemSchema
    assert event["required"] == ["event", "data"]
    assert event["properties"]["data"]["contentMediaType"] == "application/json"
    assert list(stream["409"]["content"]) == ["application/json"]  # errors of a stream route are JSON
    assert set(operations["healthz"]["responses"]) == {"200", "503"}


async def test_without_a_token_openapi_shows_no_security() -> None:
    app = create_app(build_agency, store=MemoryThreadStore())
    spec = app.openapi()
    assert "securitySchemes" not in spec.get("components", {})
    assert "401" not in spec["paths"]["/chats/{chat_id}/messages"]["post"]["responses"]


# -- auth and size ---------------------------------------------------------------------------------------------


async def test_a_token_is_required_everywhere_but_health_and_schema(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    app = create_app(build_agency, store=MemoryThreadStore(), auth_token=TOKEN)
    async with client_for(app) as client:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {TOKEN}"},
                        {"authorization": TOKEN}, {"authorization": f"Bearer {TOKEN}x"}):
            for method, path in (("POST", "/chats/c/messages"), ("POST", "/chats/c/messages:stream"),
                                 ("GET", "/chats/c/threads"), ("DELETE", "/chats/c"), ("POST", "/chats/c/resume")):
                response = await client.request(method, path, json={"message": "hi"}, headers=headers)
                assert error_of(response, 401, "unauthorized") == {"type": "unauthorized", "message": "Unauthorized."}
                assert response.headers["www-authenticate"] == "Bearer"
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200
        for scheme in ("Bearer", "bearer"):
            headers = {"authorization": f"{scheme} {TOKEN}"}
            assert (await client.post("/chats/c/messages", json={"message": "hi"}, headers=headers)).status_code == 200
        assert (await client.get("/chats/c/threads", headers={"authorization": f"Bearer {TOKEN}"})).status_code == 200
    await app.state.agency.aclose()
    assert TOKEN not in caplog.text


async def test_bodies_over_the_limit_get_413_before_anything_runs() -> None:
    store = MemoryThreadStore()
    app = create_app(build_agency, store=store, max_body_bytes=200)
    async with client_for(app) as client:
        big = {"message": "x" * 300}
        error_of(await client.post("/chats/c/messages", json=big), 413, "request_too_large")

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"message": "'
            for _ in range(10):
                yield b"y" * 50
            yield b'"}'

        json_type = {"content-type": "application/json"}
        error_of(await client.post("/chats/c/messages", content=chunked(), headers=json_type), 413, "request_too_large")
        error_of(
            await client.post("/chats/c/messages", content=b"{}", headers={"content-length": "x"}), 400, "bad_request"
        )
        assert await store.list_chats() == []
        assert (await client.post("/chats/c/messages", json={"message": "small"})).status_code == 200


# -- bad input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chat_id", ["bad%00id", "x" * 201, "%E2%80%8Ebad%0A"])
async def test_bad_chat_ids_are_400_on_every_endpoint(client: httpx.AsyncClient, chat_id: str) -> None:
    for method, path in (("POST", "messages"), ("POST", "messages:stream"), ("GET", "threads"),
                         ("POST", "resume"), ("POST", "resume:stream")):
        body = {"message": "hi"} if path.startswith("messages") else None
        response = await client.request(method, f"/chats/{chat_id}/{path}", json=body)
        assert "chat_id" in error_of(response, 400, "invalid_chat_id")["message"]
    error_of(await client.delete(f"/chats/{chat_id}"), 400, "invalid_chat_id")


@pytest.mark.parametrize("chat_id", ["a%2Fb", "a%2fb", "a%5Cb", "%2F", "..%2F..%2Fetc"])
async def test_an_encoded_slash_in_a_chat_id_is_the_400_of_a_bad_chat_id_not_a_404(
    client: httpx.AsyncClient, chat_id: str
) -> None:
    """Decoded, `a%2Fb` splits the path into segments no route matches: still the documented 400 invalid_chat_id."""
    for method, path in (("POST", "/messages"), ("POST", "/messages:stream"), ("GET", "/threads"),
                         ("POST", "/resume"), ("POST", "/resume:stream"), ("DELETE", "")):
        body = {"message": "hi"} if "messages" in path else None
        response = await client.request(method, f"/chats/{chat_id}{path}", json=body)
        assert "chat_id" in error_of(response, 400, "invalid_chat_id")["message"]
    error_of(await client.get("/chats/c/no-such-route"), 404, "not_found")  # other unknown paths stay 404


async def test_only_entry_points_may_be_addressed(client: httpx.AsyncClient) -> None:
    for name, problem in (("Nobody", "No such agent: 'Nobody'"), ("Developer", "'Developer' is not an entry point")):
        for path in ("messages", "messages:stream"):  # Developer exists, but only CEO may message it
            response = await client.post(f"/chats/c/{path}", json={"message": "hi", "recipient_agent": name})
            message = error_of(response, 400, "bad_request")["message"]
            assert message.startswith(f"recipient_agent: {problem}")
            assert "the user may address: CEO" in message
    assert (await client.get("/chats/c/threads")).json()["threads"] == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", None),
        (b"[]", None),
        (b'{"recipient_agent": "CEO"}', "message"),
        (b'{"message": 42}', "message"),
        (b'{"message": "hi", "extra": "CANARY-123"}', "extra"),
        (b'{"message": "hi", "recipient_agent": ["CEO"]}', "recipient_agent"),
    ],
)
async def test_malformed_bodies_are_422_naming_the_field(
    client: httpx.AsyncClient, body: bytes, field: str | None
) -> None:
    for path in ("messages", "messages:stream"):
        response = await client.post(f"/chats/c/{path}", content=body, headers={"content-type": "application/json"})
        error = error_of(response, 422, "invalid_request")
        assert error["details"]
        if field is not None:
            assert any(detail["loc"][-1] == field for detail in error["details"]), error
        assert "CANARY-123" not in response.text  # what the client sent is not echoed
    bad_resume = await client.post("/chats/c/resume", json={"approve": "call_1"})
    assert error_of(bad_resume, 422, "invalid_request")["details"][0]["loc"] == ["body", "approve"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-www-form-urlencoded",  # what `curl -d` declares: the README's curl line
        None, "text/plain", "application/octet-stream", "application/json; charset=utf-8", "application/vnd.x+json",
    ],
)
async def test_a_json_body_is_taken_whatever_content_type_it_declares(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    body = b'{"message": "Build it"}'
    response = await client.post("/chats/c/messages", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert re.fullmatch(ceo_answer(1, "Build it"), response.json()["final_output"])
    streamed = await client.post("/chats/s/messages:stream", content=body, headers=headers)
    assert sse_events(streamed.text)[-1]["type"] == "done"
    resumed = await client.post("/chats/c/resume", content=b'{"approve": [], "reject": []}', headers=headers)
    error_of(resumed, 409, "nothing_to_resume")  # the body was read: decisions, not a 415


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"message=Build+it", "application/x-www-form-urlencoded"),
        (b"Build it", "text/plain"),
        (b"Build it", None),
    ],
)
async def test_a_body_that_is_not_json_is_415_saying_to_send_json(
    client: httpx.AsyncClient, body: bytes, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    for path in ("messages", "messages:stream", "resume", "resume:stream"):
        error = error_of(await client.post(f"/chats/c/{path}", content=body, headers=headers), 415,
                         "unsupported_media_type")
        assert "Content-Type: application/json" in error["message"]
        assert "--json" in error["message"]
    assert (await client.get("/chats/c/threads")).json()["threads"] == {}  # nothing ran
    declared_json = await client.post("/chats/c/messages", content=body, headers={"content-type": "application/json"})
    error_of(declared_json, 422, "invalid_request")  # declared JSON but is not: the body is wrong, not its type


# -- approvals and resume --------------------------------------------------------------------------------------


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed to {target}"


def approvals_agency(store: ThreadStore) -> Agency:
    def script(call: Any) -> Any:
        outputs = call.tool_outputs
        if not outputs:
            return ToolCall("deploy", {"target": "prod"})
        return f"after deploy: {outputs[-1]}"

    return Agency(Agent(name="CEO", tools=[deploy], model=ScriptedModel(script)), thread_store=store)


async def test_a_paused_chat_is_409_until_resumed_with_decisions() -> None:
    app = create_app(approvals_agency, store=MemoryThreadStore())
    async with client_for(app) as client:
        paused = (await client.post("/chats/c/messages", json={"message": "ship it"})).json()
        assert paused["paused"] is True
        assert paused["final_output"] is None
        (waiting,) = paused["interruptions"]
        assert {key: waiting[key] for key in ("agent", "caller", "depth", "chat_id", "tool")} == {
            "agent": "CEO", "caller": "user", "depth": 0, "chat_id": "c", "tool": "deploy"
        }
        assert json.loads(waiting["arguments"]) == {"target": "prod"}

        for path in ("messages", "messages:stream"):
            blocked = error_of(await client.post(f"/chats/c/{path}", json={"message": "more"}), 409, "chat_paused")
            assert blocked["interruptions"] == [waiting]
            assert blocked["message"] == (  # the HTTP way to go on, not the Python call
                f"Chat 'c' is waiting for approval of {waiting['call_id']} (CEO.deploy); POST /chats/c/resume with "
                '{"approve": [call ids], "reject": [call ids]} before sending a new message.'
            )
        unknown = await client.post("/chats/c/resume", json={"approve": ["call_nope"]})
        assert "call_nope" in error_of(unknown, 400, "bad_request")["message"]

        done = await client.post("/chats/c/resume", json={"approve": [waiting["call_id"]]})
        assert done.status_code == 200
        assert done.json()["final_output"] == "after deploy: deployed to prod"
        assert done.json()["paused"] is False
        error_of(await client.post("/chats/c/resume"), 409, "nothing_to_resume")  # no body at all is fine
        error_of(await client.post("/chats/c/resume:stream", json={}), 409, "nothing_to_resume")
        error_of(await client.post("/chats/never/resume", json={}), 409, "nothing_to_resume")
    await app.state.agency.aclose()


async def test_streams_pause_with_approval_requested_and_resume_as_a_stream() -> None:
    app = create_app(approvals_agency, store=MemoryThreadStore())
    async with client_for(app) as client:
        events = sse_events((await client.post("/chats/c/messages:stream", json={"message": "ship"})).text)
        requested = [event for event in events if event["type"] == "approval_requested"]
        assert len(requested) == 1
        assert (requested[0]["agent"], requested[0]["tool"]) == ("CEO", "deploy")
        assert events[-1]["type"] == "done"
        assert events[-1]["result"]["paused"] is True
        call_id = requested[0]["call_id"]
        assert events[-1]["result"]["interruptions"][0]["call_id"] == call_id

        resumed = sse_events((await client.post("/chats/c/resume:stream", json={"reject": [call_id]})).text)
        assert resumed[-1]["type"] == "done"
        assert resumed[-1]["result"]["final_output"].startswith("after deploy: ")
        assert "deployed to prod" not in resumed[-1]["result"]["final_output"]  # rejected: it never ran
    await app.state.agency.aclose()


async def test_resume_rejects_with_the_message_the_client_gives() -> None:
    app = create_app(approvals_agency, store=MemoryThreadStore())
    async with client_for(app) as client:
        for chat, reject in (("a", "Not on a Friday."), ("b", None)):
            paused = (await client.post(f"/chats/{chat}/messages", json={"message": "ship"})).json()
            call_id = paused["interruptions"][0]["call_id"]
            error_of(await client.post(f"/chats/{chat}/resume", json={"reject": {call_id: 5}}), 422, "invalid_request")
            done = await client.post(f"/chats/{chat}/resume", json={"reject": {call_id: reject}})
            assert done.json()["final_output"] == f"after deploy: {reject or 'Tool execution was not approved.'}"
    await app.state.agency.aclose()


# -- failures --------------------------------------------------------------------------------------------------


def failing_agency(error: BaseException, *, max_steps: int = 50) -> Callable[[ThreadStore], Agency]:
    def build(store: ThreadStore) -> Agency:
        model = ScriptedModel([Fail(error)]) if max_steps == 50 else ScriptedModel(lambda call: ToolCall("nope"))
        return Agency(Agent(name="CEO", model=model, max_steps=max_steps), thread_store=store)

    return build


async def test_turn_failures_are_500_without_internals(caplog: pytest.LogCaptureFixture) -> None:
    internal = create_app(failing_agency(RuntimeError("secret internals at /srv/app.py")), store=MemoryThreadStore())
    async with client_for(internal) as client:
        response = await client.post("/chats/c/messages", json={"message": "hi"})
        error = error_of(response, 500, "internal_error")
        assert "secret" not in response.text
        assert error["message"] == "The turn failed inside the server; see its log."
    assert "secret internals" in caplog.text  # the server's log has what the client does not

    looping = create_app(failing_agency(RuntimeError(), max_steps=2), store=MemoryThreadStore())
    async with client_for(looping) as client:
        error = error_of(await client.post("/chats/c/messages", json={"message": "hi"}), 500, "run_failed")
        assert "max_steps=2" in error["message"]


async def test_a_failure_after_the_stream_began_is_its_last_event() -> None:
    app = create_app(failing_agency(RuntimeError("secret internals")), store=MemoryThreadStore())
    async with client_for(app) as client:
        response = await client.post("/chats/c/messages:stream", json={"message": "hi"})
        assert response.status_code == 200  # the response had begun: the failure is an event
        events = sse_events(response.text)
        assert events[0]["type"] == "agent_started"
        assert events[-1] == {
            "type": "error",
            "error": {"type": "internal_error", "message": "The turn failed inside the server; see its log."},
        }
        assert "secret" not in response.text


class BrokenStore(MemoryThreadStore):
    async def load(self, chat_id: str) -> dict[str, list[dict[str, Any]]]:
        raise StoreError("Thread store postgresql://app:hunter2@db/app could not load: connection refused")


async def test_a_store_that_is_down_is_503_without_its_address() -> None:
    app = create_app(lambda store: Agency(Agent(name="CEO", model=ScriptedModel(["hi"])), thread_store=store),
                     store=BrokenStore())
    async with client_for(app) as client:
        for method, path in (("POST", "/chats/c/messages"), ("POST", "/chats/c/messages:stream"),
                             ("GET", "/chats/c/threads")):
            response = await client.request(method, path, json={"message": "hi"})
            error_of(response, 503, "store_unavailable")
            assert "hunter2" not in response.text
            assert "db/app" not in response.text


# -- create_app and the settings serve passes to workers ---------------------------------------------------------


def test_create_app_rejects_bad_setups(tmp_path: Path) -> None:
    store = MemoryThreadStore()
    with pytest.raises(ConfigError, match="agency_factory must be a function"):
        create_app("not callable", store=store)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must return an Agency"):
        create_app(lambda store: "nope", store=store)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="on the store it is given"):
        create_app(lambda store: Agency(Agent(name="CEO", model=ScriptedModel([]))), store=store)
    for token in ("", "   "):
        with pytest.raises(ConfigError, match="auth_token must be a non-empty str"):
            create_app(build_agency, store=store, auth_token=token)
    for size in (0, -1, True, 1.5):
        with pytest.raises(ConfigError, match="max_body_bytes must be an int >= 1"):
            create_app(build_agency, store=store, max_body_bytes=size)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Unsupported thread store URL scheme 'redis'"):
        create_app(build_agency, store="redis://localhost")
    app = create_app(build_agency, store=f"sqlite:///{tmp_path / 'chats.db'}")
    assert isinstance(app.state.store, SQLThreadStore)
    assert app.state.agency.thread_manager.store is app.state.store


async def test_the_app_closes_its_store_when_it_shuts_down() -> None:
    closed: list[bool] = []

    class Tracked(MemoryThreadStore):
        async def aclose(self) -> None:
            closed.append(True)

    app = create_app(build_agency, store=Tracked())
    async with app.router.lifespan_context(app):
        assert closed == []
    assert closed == [True]


def test_serve_settings_are_checked_before_any_worker_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="either an agency file"):
        ServeSettings().check()
    with pytest.raises(ConfigError, match="either an agency file"):
        ServeSettings(config="a.yaml", factory="m:f").check()
    with pytest.raises(ConfigError, match=r"write module:function or FILE\.py:function"):
        ServeSettings(factory="not a path").check()
    with pytest.raises(ConfigError, match="does not exist"):
        ServeSettings(config=str(tmp_path / "missing.yaml")).check()
    monkeypatch.delenv("SERVE_TEST_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="'SERVE_TEST_TOKEN', but that environment variable is empty or unset"):
        ServeSettings(factory="serving_app:build_agency", auth_token_env="SERVE_TEST_TOKEN").check()
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module'"):
        ServeSettings(factory="no_such_module:build").agency_factory()
    with pytest.raises(ConfigError, match="has no attribute 'missing'"):
        ServeSettings(factory="serving_app:missing").agency_factory()
    with pytest.raises(ConfigError, match="is not a function"):
        ServeSettings(factory="serving_app:HOLD").agency_factory()
    settings = ServeSettings(factory="serving_app:build_agency", store=f"sqlite:///{tmp_path / 'a.db'}")
    for workers, store in ((4, settings.store), (2, "memory")):
        with pytest.raises(ConfigError, match=f"--workers {workers} needs a store the workers share"):
            serving.serve(ServeSettings(factory=settings.factory, store=store), workers=workers)
    with pytest.raises(ConfigError, match="SQLite cannot lock a turn across processes"):
        serving.serve(settings, workers=2)
    with pytest.raises(ConfigError, match="--workers must be an int >= 1"):
        serving.serve(settings, workers=0)
    with pytest.raises(ConfigError, match="--port must be between 0 and 65535"):
        serving.serve(settings, port=70000)


async def test_a_worker_builds_its_app_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ServeSettings(factory="serving_app:build_agency", store="memory", auth_token_env="SERVE_TEST_TOKEN",
                             max_body_bytes=4096)
    monkeypatch.setenv("SERVE_TEST_TOKEN", TOKEN)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    assert ServeSettings.from_env() == settings
    gc.unfreeze()
    app = app_from_env()
    assert gc.get_freeze_count() > 0  # a worker's long-lived objects are out of the collector's way
    gc.unfreeze()  # (this is the test process, not a worker)
    async with client_for(app, {"authorization": f"Bearer {TOKEN}"}) as client:
        response = await client.post("/chats/c/messages", json={"message": "hi"})
        assert re.fullmatch(ceo_answer(1, "hi"), response.json()["final_output"])
        error_of(await client.post("/chats/c/messages", json={"message": "x" * 5000}), 413, "request_too_large")
    await app.state.agency.aclose()
    monkeypatch.setenv(serving.ENV_MAX_BODY_BYTES, "lots")
    with pytest.raises(ConfigError, match="must be a whole number of bytes"):
        ServeSettings.from_env()
    monkeypatch.delenv(serving.ENV_STORE)
    monkeypatch.delenv(serving.ENV_MAX_BODY_BYTES)
    with pytest.raises(ConfigError, match="start the server with `agency-swarm serve`"):
        app_from_env()


async def test_an_agency_file_is_built_on_the_workers_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "agency.yaml"
    config.write_text(
        "agents:\n"
        "  CEO: {description: Talks to the user., model: gpt-4.1-mini, instructions: Delegate.}\n"
        "  Developer: {description: Does the work., model: gpt-4.1-mini}\n"
        "chart: {entry_points: [CEO], flows: [[CEO, Developer]]}\n"
    )
    settings = ServeSettings(config=str(config), store="memory", models="serving_app:config_models")
    settings.check()
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    assert monkeypatch.delenv(serving.ENV_FACTORY, raising=False) is None
    assert ServeSettings.from_env() == ServeSettings(
        config=str(config.resolve()), store="memory", models="serving_app:config_models"
    )
    store = MemoryThreadStore()
    agency = settings.agency_factory()(store)
    assert [agent.name for agent in agency.entry_points] == ["CEO"]
    assert agency.thread_manager.store is store
    app = app_from_env()  # as a worker does: the file, the models from Python, offline
    async with client_for(app) as client:
        response = await client.post("/chats/c/messages", json={"message": "hi"})
        assert re.fullmatch(ceo_answer(1, "hi"), response.json()["final_output"])
    await app.state.agency.aclose()


AGENCY_FILE = (
    "agents:\n"
    "  CEO: {description: Talks to the user., model: gpt-4.1-mini, instructions: Delegate.}\n"
    "  Developer: {description: Does the work., model: gpt-4.1-mini}\n"
    "chart: {entry_points: [CEO], flows: [[CEO, Developer]]}\n"
)


def test_serve_uses_the_agency_files_store_so_chats_survive_a_restart(tmp_path: Path) -> None:
    from serving_support import start_serve

    config = tmp_path / "agency.yaml"
    config.write_text(AGENCY_FILE + "store: {type: file, dir: threads}\n")
    arguments = [str(config), "--models", "serving_app:config_models"]  # no --store: the file says where chats live
    server = start_serve(arguments)
    try:
        answer = httpx.post(f"{server.url}/chats/c42/messages", json={"message": "Build it"}, timeout=BOUND)
        assert re.fullmatch(ceo_answer(1, "Build it"), answer.json()["final_output"])
    finally:
        server.stop()
    assert "kept in memory" not in "".join(server.log)
    assert [path.name for path in (tmp_path / "threads").glob("*.jsonl")]  # next to the file, as from_config puts it
    restarted = start_serve(arguments)
    try:
        threads = httpx.get(f"{restarted.url}/chats/c42/threads", timeout=BOUND).json()["threads"]
    finally:
        restarted.stop()
    assert threads["user->CEO"][0] == {"role": "user", "content": "Build it"}
    assert set(threads) == {"user->CEO", "CEO->Developer"}


def test_serve_says_when_chats_are_kept_in_memory_and_uses_the_files_store_in_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import os

    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # everything up to starting the workers
    monkeypatch.setattr(os, "environ", os.environ.copy())  # serve() exports the workers' settings: not to later tests
    config = tmp_path / "agency.yaml"
    config.write_text(AGENCY_FILE)
    with caplog.at_level(logging.INFO, logger="agency_swarm.serving"):
        serving.serve(ServeSettings(config=str(config), models="serving_app:config_models"))
    assert "Chats are kept in memory and lost when the server stops" in caplog.text
    caplog.clear()
    config.write_text(AGENCY_FILE + "store: {type: sqlite, path: chats.db}\n")
    settings = ServeSettings(config=str(config), models="serving_app:config_models")
    with caplog.at_level(logging.INFO, logger="agency_swarm.serving"):
        serving.serve(settings)
    assert "kept in memory" not in caplog.text
    assert "the agency file's store" in caplog.text
    assert ServeSettings.from_env() == ServeSettings(config=str(config.resolve()), models=settings.models)
    serving.serve(ServeSettings(factory="serving_app:build_agency"))
    assert ServeSettings.from_env() == ServeSettings(factory="serving_app:build_agency")  # no file left over
    settings = ServeSettings(config=str(config), models="serving_app:config_models")
    serving.serve(settings)
    store = ServeSettings.from_env().thread_store()  # what a worker serves on
    assert isinstance(store, SQLThreadStore)
    asyncio.run(store.aclose())


@pytest.mark.parametrize(
    ("store", "problem"),
    [
        ("", "the agency file's store keeps chats in memory (it has no `store:`)"),
        ("store: {type: file, dir: threads}\n", "the agency file's store is a file store"),
        ("store: {type: sqlite, path: chats.db}\n", "is SQLite, which cannot lock a turn across processes"),
    ],
)
def test_serve_with_workers_refuses_a_file_store_they_cannot_share_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str, problem: str
) -> None:
    from agency_swarm._cli._commands import run_app

    config = tmp_path / "agency.yaml"
    config.write_text(AGENCY_FILE + store)
    assert run_app(["serve", str(config), "--models", "serving_app:config_models", "--workers", "2"]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert error.startswith("Error: --workers 2 needs a store the workers share")
    assert problem in error
    assert "pass --store postgresql://user@host:5432/db, or set `store: {type: sql, url_env: VAR}`" in error
    assert not (tmp_path / "threads").exists()  # refused before any store was opened


def test_serve_with_workers_takes_a_postgresql_store_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "agency.yaml"
    config.write_text(AGENCY_FILE + "store: {type: sql, url_env: SERVE_TEST_DB}\n")
    monkeypatch.setenv("SERVE_TEST_DB", "postgresql://app@db.invalid:5432/app")
    serving._check_shared_store(ServeSettings(config=str(config)), 4)  # no error, and no connection made
    with pytest.raises(ConfigError, match="not 'sqlite'"):
        serving._check_shared_store(ServeSettings(config=str(config), store="sqlite:///x.db"), 4)  # --store wins


# -- a real server: the client leaving does not stop the turn ---------------------------------------------


async def test_a_client_that_leaves_does_not_stop_the_turn(tmp_path: Path) -> None:
    """The turn runs to its end without its reader (as a blocking POST's does) and releases the chat after it."""
    developer = Blocking(developer_script)
    app = create_app(blocking_agency(developer), store=f"sqlite:///{tmp_path / 'chats.db'}")
    async with live(app) as url, httpx.AsyncClient(base_url=url, timeout=BOUND) as client:
        async with client.stream("POST", "/chats/c/messages:stream", json={"message": "first"}) as response:
            assert response.status_code == 200
            # held in a name: a dropped iterator is finalized soon after `break`, and that closes the connection
            lines = response.aiter_lines()
            async for line in lines:
                if line == "event: message_sent":
                    break
            async with asyncio.timeout(BOUND):
                await developer.reached.wait()
        # leaving the block closed the connection while the Developer's model was working
        developer.release.set()
        second = await client.post("/chats/c/messages", json={"message": "second"})  # waits for the first turn
        assert second.status_code == 200
        threads = (await client.get("/chats/c/threads")).json()["threads"]
    assert not developer.cancelled.is_set()
    ceo = threads["user->CEO"]
    turn = ["user", "function_call", "function_call_output", "message"]
    assert [item.get("type", "user") for item in ceo] == turn * 2
    assert ceo[0] == {"role": "user", "content": "first"}
    assert "Please do: first" in ceo[2]["output"]  # the Developer's whole answer, not an "interrupted" output
    assert text_ends(ceo[3], "Please do: first")
    assert text_ends(ceo[-1], "Please do: second")
    await app.state.agency.aclose()


async def test_a_silent_stream_sends_keep_alive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sse, "SSE_KEEPALIVE_SECONDS", 0.01)
    developer = Blocking(developer_script)
    app = create_app(blocking_agency(developer), store=MemoryThreadStore())
    async with (
        live(app) as url,
        httpx.AsyncClient(base_url=url, timeout=BOUND) as client,
        client.stream("POST", "/chats/c/messages:stream", json={"message": "slow"}) as response,
    ):
        lines = response.aiter_lines()
        async for line in lines:
            if line == ": keep-alive":
                break
        developer.release.set()  # the model answers only once the client has seen a keep-alive
        rest = [line async for line in lines]
    events = sse_events("\n".join(rest))
    assert events[-1]["type"] == "done"
    assert re.fullmatch(ceo_answer(1, "slow"), events[-1]["result"]["final_output"])
    await app.state.agency.aclose()


def text_ends(item: dict[str, Any], suffix: str) -> bool:
    return "".join(part["text"] for part in item["content"]).endswith(suffix)


# -- the command -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["serve"], "Serve either an agency file (agency.yaml) or --factory module:function"),
        (["serve", "--factory", "serving_app:build_agency", "--workers", "3"], "--workers 3 needs a store"),
        (["serve", "--factory", "serving_app:build_agency", "--store", "sqlite:///x.db", "--workers", "2"],
         "SQLite cannot lock a turn across processes"),
        (["serve", "--factory", "serving_app:nothing"], "'serving_app:nothing': serving_app has no attribute"),
        (["serve", "--factory", "nowhere:build"], "cannot import module 'nowhere'"),
        (["serve", "--factory", "nowhere.py:build"], "--factory: the file nowhere.py does not exist"),
        (["serve", "--factory", "serving_app"], "write module:function or FILE.py:function"),
        (["serve", "--factory", "serving_app:build_agency", "--models", "m:f"], "--models and --toolkits go with"),
        (["serve", "missing.yaml"], "Agency file 'missing.yaml' does not exist"),
        (["serve", "--factory", "serving_app:build_agency", "--auth-token-env", "SERVE_TEST_UNSET"],
         "'SERVE_TEST_UNSET', but that environment variable is empty or unset"),
        (["serve", "--factory", "serving_app:build_agency", "--store", "redis://h"], "is not a store: use postgresql://"),
    ],
)
def test_serve_refuses_bad_settings_with_one_line(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from agency_swarm._cli._commands import run_app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SERVE_TEST_UNSET", raising=False)
    assert run_app(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("Error: ")
    assert problem in " ".join(error.split())
    assert "Traceback" not in error


def test_a_durable_turn_refused_for_a_paused_chat_names_the_resume_route() -> None:
    """In durable mode the worker stores the refusal's text; the HTTP answer tells it as HTTP does too."""
    from agency_swarm import ChatPaused
    from agency_swarm.durable import TurnFailed
    from agency_swarm.serving._durable import failed_message

    stored = TurnFailed(f"Chat 'a b' is waiting for approval of call_1 (CEO.deploy); {ChatPaused.RESUME_HINT}",
                        "chat_paused", "ChatPaused")
    assert failed_message(stored, "a b") == (
        "Chat 'a b' is waiting for approval of call_1 (CEO.deploy); POST /chats/a%20b/resume with "
        '{"approve": [call ids], "reject": [call ids]} before sending a new message.'
    )
    other = TurnFailed("Agent 'CEO' ran out of steps.", "run_failed", "MaxStepsExceeded")
    assert failed_message(other, "a b") == "Agent 'CEO' ran out of steps."
