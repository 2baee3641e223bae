"""Text that is not valid UTF-8 over HTTP.

A JSON body may spell a lone UTF-16 surrogate (`"\\ud800"`): valid JSON, but not text, and no UTF-8 encoder takes
it. The app refuses such a body at the door (422 naming the field) before anything runs or is stored; and a chat
that already holds one (stored through the Python API) reads fine on every endpoint: responses carry U+FFFD in
its place, the store keeps what it holds. Both on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agency_swarm import Agency, Agent, MemoryThreadStore, SQLThreadStore, ThreadStore, function_tool
from agency_swarm.serving import create_app
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall
from postgres_support import require_postgres
from serving_support import chat_prefix, delete_chats

LONE = "\ud800"
REPLACED = "\ufffd"
JSON_TYPE = {"content-type": "application/json"}


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(has_surrogate(key) or has_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(has_surrogate(item) for item in value)
    return False


def strict_json(raw: bytes) -> Any:
    """The body as JSON, decoded as strict UTF-8, holding no surrogate (not even a `\\ud800` escape)."""
    parsed = json.loads(raw.decode("utf-8"))
    assert not has_surrogate(parsed), raw
    return parsed


def sse_data(raw: bytes) -> list[dict[str, Any]]:
    text = raw.decode("utf-8")
    return [
        strict_json(line.removeprefix("data: ").encode()) for line in text.split("\n") if line.startswith("data: ")
    ]


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed to {target}"


def user_messages(call: ModelCall) -> list[str]:
    return [str(item["content"]) for item in call.input if item.get("role") == "user" and "type" not in item]


def echo_script(call: ModelCall) -> Step:
    """Answers with every user message of the chat; `deploy` asks to deploy to the chat's first message."""
    if call.tool_outputs:
        return f"after: {call.tool_outputs[-1]}"
    if call.last_user_message == "deploy":
        return ToolCall("deploy", '{"target": "' + user_messages(call)[0] + '"}')  # raw text, the surrogate as is
    return "heard: " + " | ".join(user_messages(call))


def echo_agency(store: ThreadStore) -> Agency:
    return Agency(Agent(name="CEO", tools=[deploy], model=ScriptedModel(echo_script)), thread_store=store)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    if request.param == "sqlite":
        opened = SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
        yield opened
        await opened.aclose()
        return
    url = require_postgres()
    opened = SQLThreadStore(url)
    yield opened
    await opened.aclose()


@pytest.fixture
def prefix() -> AsyncIterator[str]:
    made = chat_prefix("text")
    yield made
    delete_chats(made)


# -- refused at the door ----------------------------------------------------------------------------------------


REFUSED: list[tuple[str, bytes, list[Any]]] = [
    ("messages", b'{"message": "\\ud800"}', ["body", "message"]),
    ("messages:stream", b'{"message": "a\\uDFFFb"}', ["body", "message"]),
    ("messages", b'{"message": "hi", "recipient_agent": "\\udc00"}', ["body", "recipient_agent"]),
    ("messages", b'{"message": "\\ude00\\ud83d"}', ["body", "message"]),  # a pair in the wrong order
    ("resume", b'{"approve": ["call_1", "\\ud800"]}', ["body", "approve", 1]),
    ("resume:stream", b'{"reject": ["\\udbff"]}', ["body", "reject", 0]),
    ("messages", b'{"message": "hi", "\\ud800": "x"}', ["body"]),  # a key: named by where it is, not echoed
    ("messages", b'{"message": "\xed\xa0\x80"}', ["body"]),  # the surrogate as raw bytes (CESU-8), not UTF-8
    ("messages", b'{"message": "\xff"}', ["body"]),
    ("messages", '{"message": "hi"}'.encode("utf-16"), ["body"]),  # RFC 8259: JSON on the wire is UTF-8
    ("messages", '{"message": "\\ud800"}'.encode("utf-16-le"), ["body"]),  # no BOM, no escape to see in bytes
]


@pytest.mark.parametrize(("path", "body", "loc"), REFUSED)
async def test_text_that_is_not_utf8_is_refused_before_anything_is_stored(
    store: ThreadStore, prefix: str, path: str, body: bytes, loc: list[Any]
) -> None:
    chat = prefix + "refused"
    app = create_app(echo_agency, store=store)
    async with client_for(app) as client:
        response = await client.post(f"/chats/{chat}/{path}", content=body, headers=JSON_TYPE)
        assert response.status_code == 422, response.text
        error = strict_json(response.content)["error"]
        assert error["type"] == "invalid_request"
        assert "valid UTF-8" in error["message"]
        (detail,) = error["details"]
        assert detail["loc"] == loc
        assert detail["type"] == "invalid_utf8"
        assert "must be valid UTF-8" in detail["msg"]
        threads = await client.get(f"/chats/{chat}/threads")
        assert (threads.status_code, strict_json(threads.content)["threads"]) == (200, {})
    assert chat not in await store.list_chats()


@pytest.mark.parametrize(
    ("body", "stored"),
    [
        (b'{"message": "\\ud83d\\ude00 ok"}', "\U0001f600 ok"),  # a surrogate pair is one character: fine
        (b'{"message": "\\\\ud800"}', "\\ud800"),  # an escaped backslash, then plain letters
        ('{"message": "caf\u00e9 \u2028"}'.encode(), "caf\u00e9 \u2028"),
    ],
)
async def test_valid_text_that_looks_close_is_accepted(body: bytes, stored: str) -> None:
    store = MemoryThreadStore()
    app = create_app(echo_agency, store=store)
    async with client_for(app) as client:
        response = await client.post("/chats/c/messages", content=body, headers=JSON_TYPE)
        assert response.status_code == 200, response.text
        assert strict_json(response.content)["final_output"] == f"heard: {stored}"
    assert (await store.load("c"))["user->CEO"][0] == {"role": "user", "content": stored}


async def test_the_refusal_needs_no_content_type_and_comes_after_auth() -> None:
    app = create_app(echo_agency, store=MemoryThreadStore(), auth_token="t0ken")
    async with client_for(app) as client:
        body = b'{"message": "\\ud800"}'
        assert (await client.post("/chats/c/messages", content=body)).status_code == 401
        refused = await client.post("/chats/c/messages", content=body, headers={"authorization": "Bearer t0ken"})
        assert refused.status_code == 422
        assert strict_json(refused.content)["error"]["details"][0]["loc"] == ["body", "message"]


# -- a chat that already holds such text reads fine -------------------------------------------------------------


async def test_a_chat_holding_a_lone_surrogate_reads_fine_on_every_endpoint(store: ThreadStore, prefix: str) -> None:
    chat, paused = prefix + "held", prefix + "paused"
    app = create_app(echo_agency, store=store)
    agency: Agency = app.state.agency
    await agency.get_response(f"{LONE} first", chat_id=chat)  # the Python API stores what it is given
    await agency.get_response(f"{LONE} first", chat_id=paused)
    assert (await agency.get_response("deploy", chat_id=paused)).paused
    async with client_for(app) as client:
        threads = strict_json((await client.get(f"/chats/{chat}/threads")).content)["threads"]
        assert threads["user->CEO"][0] == {"role": "user", "content": f"{REPLACED} first"}

        result = await client.post(f"/chats/{chat}/messages", json={"message": "second"})
        assert result.status_code == 200
        assert strict_json(result.content)["final_output"] == f"heard: {REPLACED} first | second"

        streamed = await client.post(f"/chats/{chat}/messages:stream", json={"message": "third"})
        assert streamed.status_code == 200
        events = sse_data(streamed.content)
        assert events[-1]["result"]["final_output"] == f"heard: {REPLACED} first | second | third"

        blocked = await client.post(f"/chats/{paused}/messages", json={"message": "more"})
        assert blocked.status_code == 409
        (waiting,) = strict_json(blocked.content)["error"]["interruptions"]
        assert json.loads(waiting["arguments"]) == {"target": f"{REPLACED} first"}
        resumed = await client.post(f"/chats/{paused}/resume", json={"approve": [waiting["call_id"]]})
        assert strict_json(resumed.content)["final_output"] == f"after: deployed to {REPLACED} first"

        again = strict_json((await client.post(f"/chats/{paused}/messages", json={"message": "deploy"})).content)
        (waiting,) = again["interruptions"]  # paused again, over HTTP this time
        assert json.loads(waiting["arguments"]) == {"target": f"{REPLACED} first"}
        streamed = await client.post(f"/chats/{paused}/resume:stream", json={"approve": [waiting["call_id"]]})
        assert sse_data(streamed.content)[-1]["result"]["final_output"] == f"after: deployed to {REPLACED} first"

        assert (await client.delete(f"/chats/{chat}")).status_code == 204
        assert strict_json((await client.get(f"/chats/{chat}/threads")).content)["threads"] == {}
    held = await store.load(paused)
    assert held["user->CEO"][0]["content"] == f"{LONE} first"  # the store keeps what it holds; only responses change
    await agency.aclose()


async def test_an_sse_event_holding_a_lone_surrogate_is_strict_utf8() -> None:
    def build(store: ThreadStore) -> Agency:
        return Agency(Agent(name="CEO", model=ScriptedModel([f"says {LONE}"])), thread_store=store)

    app = create_app(build, store=MemoryThreadStore())
    async with client_for(app) as client:
        streamed = await client.post("/chats/c/messages:stream", json={"message": "hi"})
        events = sse_data(streamed.content)
    deltas = "".join(event["delta"] for event in events if event["type"] == "text_delta")
    assert deltas == f"says {REPLACED}"
    assert events[-1]["result"]["final_output"] == f"says {REPLACED}"

