"""The HTTP API fuzzed from its own OpenAPI schema (schemathesis), in-process over ASGI, on a SQLite store.

Every operation on its own (`test_every_operation`: schemathesis' examples, coverage and fuzzing phases, positive
and negative data), then sequences that follow the schema's links (`test_sequences`: the state machine — a
message, the paused chat's resume with the waiting call's id, threads, delete...). Checks: schemathesis' own (no
5xx, status codes, content types and bodies conform to the schema, Allow on 405...) and ours: a body holding a lone
surrogate is refused with 422 invalid_utf8, and after every call its chat still reads (GET .../threads 200), as
does every chat in the store at the end.

Schemathesis leaves lone surrogates out of the strings it generates (they have no UTF-8 form), so the body hook
below puts them back, in one string out of five (keys included): a JSON body can spell them, and this is exactly
the text a server must survive (a lone surrogate, which this suite finds on its own without the fix).
Bounded: MAX_EXAMPLES per operation and phase, STATEFUL_EXAMPLES sequences of up to MAX_STEPS calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from schemathesis.specs.openapi.checks import positive_data_acceptance

from agency_swarm import Agency, Agent, InvalidChatId, MemoryThreadStore, ThreadStore, function_tool
from agency_swarm._threads._manager import check_chat_id
from agency_swarm.serving import create_app
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

MAX_EXAMPLES = 50
STATEFUL_EXAMPLES = 50
MAX_STEPS = 10
SURROGATE_ODDS = 5
"""One generated string in this many gets a lone surrogate."""
ENTRY_POINTS = ("CEO",)
_CHAT_PATH = re.compile(
    r"/chats/([^/]+?)(?:/(?:messages|messages:stream|resume|resume:stream|threads|turns/[^/]+:cancel))?"
)


# -- the agency: every path of a turn, chosen by the message --------------------------------------------------


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed to {target}"


def ceo_script(call: ModelCall) -> Step:
    """Echoes the message (so responses carry what the fuzzer sent); by its length, delegates or pauses too."""
    message = call.last_user_message
    if call.tool_outputs:
        return f"done: {call.tool_outputs[-1]}"
    if len(message) % 3 == 1:
        return send_message("Developer", f"Please do: {message}")
    if len(message) % 3 == 2:
        return ToolCall("deploy", {"target": message})  # waits for approval: the chat pauses
    return f"heard: {message}"


class FuzzContext(BaseModel):
    """The context schema the fuzzed app declares: requests' `context` is fuzzed against it too."""

    tenant: str
    seats: int = 1


def build(store: ThreadStore) -> Agency:
    ceo = Agent(name="CEO", description="Talks to the user.", tools=[deploy], model=ScriptedModel(ceo_script))
    developer = Agent(name="Developer", model=ScriptedModel(lambda call: f"did: {call.last_user_message}"))
    return Agency([ceo, [ceo, developer]], thread_store=store)


def make_app(store: ThreadStore | str) -> Any:
    """The fuzzed app: a declared context schema and additional instructions allowed, so both are fuzzed too."""
    return create_app(build, store=store, context_schema=FuzzContext, allow_additional_instructions=True)


# -- the schema, and what the fuzzer sends ---------------------------------------------------------------------


def has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(key) or has_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    return False


@st.composite
def with_lone_surrogates(draw: st.DrawFn, body: Any) -> Any:
    """`body` with, in some of its strings (keys too), a lone surrogate at some place."""
    if isinstance(body, str):
        if draw(st.integers(1, SURROGATE_ODDS)) > 1:
            return body
        at = draw(st.integers(0, len(body)))
        return body[:at] + draw(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)) + body[at:]
    if isinstance(body, dict):
        return {draw(with_lone_surrogates(key)): draw(with_lone_surrogates(value)) for key, value in body.items()}
    if isinstance(body, list):
        return [draw(with_lone_surrogates(value)) for value in body]
    return body


class Current:
    """The app under test behind one stable ASGI callable: the schema is loaded at import, each test builds its app."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


CONFIG = schemathesis.Config.from_dict(
    {
        "base-url": "http://testserver",
        # Read every stream to its end (schemathesis stops after 20 events by default): a client that leaves
        # cancels the turn, at a point that depends on timing, and replays must get the same answers.
        "max-stream-events": 100_000,
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
        "phases": {"stateful": {"max-steps": MAX_STEPS}},
        # A chat is not a resource one creates: any id reads as {} until something is stored, and again once
        # deleted (docs/design/serving.md). "Deleted resource still available" would be that contract, not a bug.
        "checks": {"use_after_free": {"enabled": False}},
    }
)


def load_schema(*, surrogates_in: tuple[str, ...] | None) -> Any:
    """The app's schema, calling CURRENT; bodies of the operations `surrogates_in` (None: all) get lone surrogates."""
    schema = schemathesis.openapi.from_dict(make_app(MemoryThreadStore()).openapi(), config=CONFIG)
    schema.app = CURRENT

    def widen(context: schemathesis.HookContext, body: Any) -> Any:
        operation = context.operation
        if surrogates_in is None or (operation is not None and operation.path in surrogates_in):
            return with_lone_surrogates(body)
        return st.just(body)

    def plain_forms(context: schemathesis.HookContext, case: Any) -> Any:
        if "multipart" in str(case.media_type or ""):  # a form's text is bytes on the wire: no lone surrogates
            case.body = without_lone_surrogates(case.body)
        return case

    schema.hook("flatmap_body")(widen)
    schema.hook("map_case")(plain_forms)
    return schema


def without_lone_surrogates(body: Any) -> Any:
    if isinstance(body, str):
        return re.sub("[\ud800-\udfff]", "\ufffd", body)
    if isinstance(body, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(value) for key, value in body.items()}
    if isinstance(body, list):
        return [without_lone_surrogates(value) for value in body]
    return body


CURRENT = Current()
SCHEMA = load_schema(surrogates_in=None)
SEQUENCES = load_schema(surrogates_in=("/chats/{chat_id}/messages", "/chats/{chat_id}/messages:stream"))
"""Sequences put lone surrogates in messages only: when a link sets `approve` in a resume body that holds one,
schemathesis (4.32) revalidates it with jsonschema_rs, which cannot take a surrogate, and crashes itself."""


def serve(database: Path) -> None:
    """A fresh app (a worker that just started) on `database`, called through CURRENT from now on."""
    CURRENT.app = make_app(f"sqlite:///{database}")


def stop() -> None:
    schemathesis.python.asgi.shutdown_lifespans()  # the lifespan closes the agency; also when schemathesis did it
    asyncio.run(CURRENT.app.state.agency.aclose())  # a lifespan that never started closed nothing
    CURRENT.app = None


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite file for the module: what a test stored, the next one reads."""
    return tmp_path_factory.mktemp("fuzz") / "chats.db"


@pytest.fixture
def app(database: Path) -> Iterator[None]:
    """A fresh app per test (schemathesis ends an ASGI app's lifespan, which closes its store, with each test);
    after it, every chat in the database reads on another fresh app."""
    serve(database)
    yield
    stop()
    serve(database)
    try:
        chats = stored_chats(database)
        for chat in chats:
            read_back(chat)
    finally:
        stop()


# -- our checks --------------------------------------------------------------------------------------------------


def chat_of(response: schemathesis.Response) -> str | None:
    """The chat id the app read from the request's path (schemathesis sends some ids percent-encoded already)."""
    found = _CHAT_PATH.fullmatch(unquote(urlsplit(response.request.url).path))
    return None if found is None else found.group(1)


def valid_chat_id(chat_id: str) -> bool:
    try:
        check_chat_id(chat_id)
    except InvalidChatId:
        return False
    return True


def error_of(response: schemathesis.Response) -> tuple[int, str | None]:
    try:
        kind = response.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        kind = None
    return response.status_code, kind


def allowed_refusals(case: Any, response: schemathesis.Response) -> set[tuple[int, str]]:
    """Refusals the API's documented rules give to requests JSON Schema cannot tell from good ones: chat ids it
    refuses (beyond their length), a recipient that is not an entry point, decisions on calls that do not wait."""
    body = case.body if isinstance(case.body, dict) else {}
    allowed: set[tuple[int, str]] = set()
    chat = chat_of(response)
    if chat is not None and not valid_chat_id(chat):
        allowed |= {(400, "invalid_chat_id"), (422, "invalid_request")}  # the path's rules or the body's first
    if body.get("recipient_agent") not in (None, *ENTRY_POINTS):
        allowed.add((400, "bad_request"))
    if case.operation.path.startswith("/chats/{chat_id}/resume") and (body.get("approve") or body.get("reject")):
        allowed.add((400, "bad_request"))
    if case.operation.path == "/chats" and (case.query or {}).get("cursor") is not None:
        allowed.add((400, "bad_request"))  # a cursor this server did not give
    form = "multipart" in str(getattr(case, "media_type", ""))
    if form or isinstance(body.get("message"), list):  # images and files: their bytes, URLs and ids are checked
        allowed |= ATTACHMENT_REFUSALS
    if form:  # a form's `context` must be JSON text, and it needs a message or a file: no schema says so
        allowed.add((422, "invalid_request"))
    return allowed


ATTACHMENT_REFUSALS = {
    (400, kind) for kind in ("bad_part", "bad_url", "not_base64", "ambiguous", "bad_file_id", "unknown_attachment")
} | {(413, "too_large"), (413, "too_many"), (413, "message_too_large"), (413, "request_too_large")} | {
    (415, "unsupported_type"), (415, "type_mismatch"),
}


def refused_as_not_utf8(ctx: schemathesis.CheckContext, response: schemathesis.Response, case: Any) -> bool:
    """A body holding a lone surrogate is refused at the door, whatever else is wrong with the request."""
    if has_lone_surrogate(case.body):
        assert error_of(response) == (422, "invalid_request"), f"{response.status_code}: {response.text}"
        assert any(detail["type"] == "invalid_utf8" for detail in response.json()["error"]["details"])
    return True


def validate(case: schemathesis.Case, response: schemathesis.Response) -> None:
    # Valid to JSON Schema, refused by this API by rules the schema cannot state: schemathesis must not object.
    refused = has_lone_surrogate(case.body) or error_of(response) in allowed_refusals(case, response)
    excluded = [positive_data_acceptance] if refused else []
    case.validate_response(response, additional_checks=[refused_as_not_utf8], excluded_checks=excluded)


def read_back(chat_id: str) -> None:
    """The chat still reads: 200 on its threads (400 only for an id the API refuses)."""
    expected = 200 if valid_chat_id(chat_id) else 400
    with schemathesis.python.asgi.get_client(CURRENT) as client:
        response = client.get(f"http://testserver/chats/{quote(chat_id, safe='')}/threads")
    assert response.status_code == expected, f"GET /chats/{chat_id!r}/threads: {response.status_code} {response.text}"


def stored_chats(database: Path) -> list[str]:
    if not database.exists():
        return []  # nothing was ever stored
    with contextlib.closing(sqlite3.connect(database)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'agency_swarm_items'").fetchone() is None:
            return []
        return [row[0] for row in conn.execute("SELECT DISTINCT chat_id FROM agency_swarm_items")]


# -- the runs ----------------------------------------------------------------------------------------------------


@SCHEMA.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the app is meant to outlive examples
def test_every_operation(case: schemathesis.Case, app: None) -> None:
    response = case.call()
    validate(case, response)
    chat = chat_of(response)
    if chat is not None:
        read_back(chat)


def test_sequences(tmp_path: Path) -> None:
    scenarios = iter(range(10**6))

    class Sequences(SEQUENCES.as_state_machine()):  # type: ignore[misc]
        """Each scenario on a fresh app and database, so that hypothesis can replay one and get the same answers;
        at its end, every chat it stored reads."""

        def setup(self) -> None:
            self.database = tmp_path / f"scenario-{next(scenarios)}.db"
            serve(self.database)

        def validate_response(self, response: Any, case: Any, *_: Any, **__: Any) -> None:
            validate(case, response)
            chat = chat_of(response)
            if chat is not None:
                read_back(chat)

        def teardown(self) -> None:
            try:
                for chat in stored_chats(self.database):
                    read_back(chat)
            finally:
                stop()

    Sequences.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES, stateful_step_count=MAX_STEPS, deadline=None, database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],  # no shrinking: a failing sequence is shown as it was found
        )
    )
