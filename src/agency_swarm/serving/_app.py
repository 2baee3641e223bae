"""The FastAPI app, its request and response models, the SSE pump and `serve` (uvicorn)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import importlib
import json
import logging
import os
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Annotated, Any, Literal

import anyio
from fastapi import Body, Depends, FastAPI, Path, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._agency._agency import Agency
from .._base._errors import (
    ChatPaused,
    ConfigError,
    InvalidChatId,
    NothingToResume,
    RunError,
    StoreError,
)
from .._base._events import Event
from .._threads._manager import check_chat_id
from .._threads._sql_store import POSTGRES_SCHEMES, SQLITE_SCHEMES, SQLThreadStore, redact_url
from .._threads._store import MemoryThreadStore, ThreadStore
from .._turn._results import ResponseStream, RunResult

logger = logging.getLogger("agency_swarm.serving")

AgencyFactory = Callable[[ThreadStore], Agency]
"""Builds one worker process's agency on the store it is given: `factory(store) -> Agency(..., thread_store=store)`.
One argument, always: the app owns the store, so every worker process opens its own connections."""

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
SSE_KEEPALIVE_SECONDS = 15.0
"""A comment line is sent when a stream has been silent this long, so proxies keep the connection open."""
SSE_QUEUE_EVENTS = 64
"""Events buffered between a running turn and a slow client; beyond this the turn waits for the client."""
PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json"})
HEALTH_CACHE_SECONDS = 1.0
"""/healthz reuses the store check's answer this long: a load balancer polling often costs one query a second."""
HEALTH_TIMEOUT_SECONDS = 2.0
"""A store check that has not answered by then is a failure (so /healthz answers before a balancer gives up)."""
HEALTH_PROBE_CHAT = "agency_swarm.healthz"
"""/healthz loads this chat id, which no one uses: an indexed read of nothing on SQL stores, a file lookup on files."""

ENV_FACTORY = "AGENCY_SWARM_SERVE_FACTORY"
ENV_CONFIG = "AGENCY_SWARM_SERVE_CONFIG"
ENV_STORE = "AGENCY_SWARM_SERVE_STORE"
ENV_AUTH_TOKEN_ENV = "AGENCY_SWARM_SERVE_AUTH_TOKEN_ENV"
ENV_MAX_BODY_BYTES = "AGENCY_SWARM_SERVE_MAX_BODY_BYTES"
ENV_MODELS = "AGENCY_SWARM_SERVE_MODELS"
ENV_TOOLKITS = "AGENCY_SWARM_SERVE_TOOLKITS"
ChatId = Annotated[
    str,
    Path(
        description=(
            "Names the chat: 1 to 200 printable characters (at most 255 UTF-8 bytes), no '/' or '\\', not '.' or "
            "'..'; any other id is 400 invalid_chat_id. A chat exists once something is stored in it."
        ),
        json_schema_extra={"maxLength": 200},
    ),
]
_FACTORY_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


# -- request and response bodies ------------------------------------------------------------------------


class MessageRequest(BaseModel):
    """A user message for one of the agency's entry points."""

    model_config = ConfigDict(extra="forbid")
    message: str = Field(description="What the user says.")
    recipient_agent: str | None = Field(
        default=None, description="An entry point of the agency by name; default: the first entry point."
    )


class ResumeRequest(BaseModel):
    """Decisions on tool calls waiting for approval; both lists may be empty (e.g. to resume after a crash)."""

    model_config = ConfigDict(extra="forbid")
    approve: list[str] = Field(default_factory=list, description="Call ids to run.")
    reject: list[str] = Field(default_factory=list, description="Call ids to refuse; the model reads the refusal.")


class UsageResponse(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


class InterruptionResponse(BaseModel):
    """A tool call waiting for approval."""

    agent: str
    caller: str
    depth: int
    chat_id: str
    call_id: str
    tool: str
    arguments: str


class RunResultResponse(BaseModel):
    """One top-level turn's result (the SSE `done` event carries the same object as `result`)."""

    chat_id: str
    agent: str = Field(description="The entry agent that answered.")
    final_output: Any = Field(description="The entry agent's final output; null while the turn is paused.")
    new_items: list[dict[str, Any]] = Field(description="Items this turn added to the user's thread with `agent`.")
    usage: UsageResponse
    usage_by_agent: dict[str, UsageResponse]
    paused: bool = Field(description="The turn waits for approvals: see `interruptions`, then POST .../resume.")
    interruptions: list[InterruptionResponse]


class ThreadsResponse(BaseModel):
    chat_id: str
    threads: dict[str, list[dict[str, Any]]] = Field(
        description='Stored items per thread key ("user->CEO", "CEO->Developer"); {} for an unknown chat.'
    )


class ErrorDetail(BaseModel):
    type: str = Field(description="Machine-readable kind, e.g. invalid_chat_id, chat_paused, unauthorized.")
    message: str
    details: list[dict[str, Any]] | None = Field(default=None, description="Which fields of the body are wrong.")
    interruptions: list[InterruptionResponse] | None = Field(default=None, description="With chat_paused.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthResponse(BaseModel):
    status: Literal["ok"]


# -- text: valid UTF-8 in, valid UTF-8 out -------------------------------------------------------------------

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate (\\uD800-\\uDFFF): the only way valid UTF-8 JSON can spell a lone one."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_TEXT_PROBLEMS = 20


def _well_formed(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (two code points that form a pair become its character)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # stored before the entry check, or through the Python API: replaced in this response
        return _well_formed(text).encode()


def _json_bytes(content: Any) -> bytes:
    """Compact JSON as strict UTF-8, whatever the text in it: lone surrogates come out as U+FFFD."""
    return _utf8(json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


class _JSONBody(JSONResponse):
    """A JSONResponse that never fails on text a stored chat holds (`_json_bytes`)."""

    def render(self, content: Any) -> bytes:
        return _json_bytes(content)


def _model_response(model: BaseModel, status_code: int = 200) -> Response:
    try:
        body = model.model_dump_json().encode()  # pydantic's own encoder, fast: the usual case
    except PydanticSerializationError:  # a lone surrogate pydantic cannot encode
        body = _json_bytes(model.model_dump(mode="json"))
    return Response(body, status_code=status_code, media_type="application/json")


def _not_utf8(loc: list[str | int], what: str) -> dict[str, Any]:
    return {"loc": loc, "msg": f"Text must be valid UTF-8: {what}.", "type": "invalid_utf8"}


def _surrogate_locations(value: Any) -> list[list[str | int]]:
    """Where, in a parsed JSON body, a string holds a lone surrogate (a key: where its object is); in order."""
    found: list[list[str | int]] = []
    pending: deque[tuple[list[str | int], Any]] = deque([(["body"], value)])
    while pending and len(found) < _MAX_TEXT_PROBLEMS:
        loc, current = pending.popleft()
        if isinstance(current, str) and _SURROGATE.search(current):
            found.append(loc)
        elif isinstance(current, dict):
            if any(_SURROGATE.search(key) for key in current):
                found.append(loc)  # the key itself is not echoed back
            pending.extend(([*loc, key], item) for key, item in current.items() if not _SURROGATE.search(key))
        elif isinstance(current, list):
            pending.extend(([*loc, index], item) for index, item in enumerate(current))
    return found


def _text_problems(body: bytes) -> list[dict[str, Any]]:
    """What makes a request body's text invalid UTF-8, as validation details; [] for a fine body (or one that is not
    JSON: the route says so). Bytes that are not UTF-8 (RFC 8259: JSON on the wire is UTF-8), or a string spelling a
    lone surrogate, `"\\ud800"`: valid JSON, but no text, and no UTF-8 encoder takes it."""
    if json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):  # what json.loads would decode it as: UTF-16/32
        return [_not_utf8(["body"], "the body is not UTF-8")]
    if not body.isascii():
        try:
            body.decode("utf-8")  # strict: surrogates encoded as bytes (CESU-8) fail here too
        except UnicodeDecodeError:
            return [_not_utf8(["body"], "the body holds bytes that are not UTF-8")]
    if _SURROGATE_ESCAPE.search(body) is None:
        return []
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return []
    return [_not_utf8(loc, "this holds a lone surrogate (\\uD800-\\uDFFF without its pair)") for loc in
            _surrogate_locations(parsed)]


# -- results and errors as JSON ----------------------------------------------------------------------------


def _usage(usage: Any) -> UsageResponse:
    return UsageResponse(
        requests=usage.requests, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens, cached_tokens=usage.input_tokens_details.cached_tokens or 0,
        reasoning_tokens=usage.output_tokens_details.reasoning_tokens or 0,
    )


def _interruptions(items: Iterable[Any]) -> list[InterruptionResponse]:
    return [
        InterruptionResponse(
            agent=item.agent, caller=item.caller, depth=item.depth, chat_id=item.chat_id, call_id=item.call_id,
            tool=item.tool, arguments=item.arguments,
        )
        for item in items
    ]


def result_response(result: RunResult) -> RunResultResponse:
    """A RunResult as the JSON body the API returns."""
    return RunResultResponse(
        chat_id=result.chat_id, agent=result.agent, final_output=jsonable_encoder(result.final_output),
        new_items=result.new_items, usage=_usage(result.usage),
        usage_by_agent={name: _usage(usage) for name, usage in result.usage_by_agent.items()},
        paused=result.paused, interruptions=_interruptions(result.interruptions),
    )


def _error(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    detail = ErrorDetail(type=kind, message=message, **extra)
    sent = dict(headers or {})
    if status == 401:
        sent["www-authenticate"] = "Bearer"
    return _JSONBody({"error": detail.model_dump(mode="json", exclude_none=True)}, status_code=status, headers=sent)


def error_status(exc: BaseException) -> tuple[int, ErrorDetail]:
    """The HTTP status and body for an exception a turn raised; the message never holds a stack trace."""
    if isinstance(exc, InvalidChatId):
        return 400, ErrorDetail(type="invalid_chat_id", message=str(exc))
    if isinstance(exc, ChatPaused):
        return 409, ErrorDetail(type="chat_paused", message=str(exc), interruptions=_interruptions(exc.interruptions))
    if isinstance(exc, NothingToResume):
        return 409, ErrorDetail(type="nothing_to_resume", message=str(exc))
    if isinstance(exc, ConfigError):
        return 400, ErrorDetail(type="bad_request", message=str(exc))
    if isinstance(exc, StoreError):  # its message names the database: the log gets it, the client does not
        return 503, ErrorDetail(type="store_unavailable", message="The thread store is unavailable; try again.")
    if isinstance(exc, RunError):
        return 500, ErrorDetail(type="run_failed", message=str(exc))
    return 500, ErrorDetail(type="internal_error", message="The turn failed inside the server; see its log.")


def _failure(exc: Exception, chat_id: str) -> JSONResponse:
    status, detail = error_status(exc)
    if status >= 500:
        logger.error("Chat %r: %s", chat_id, detail.type, exc_info=exc)
    return _JSONBody({"error": detail.model_dump(mode="json", exclude_none=True)}, status_code=status)


def _sse(kind: str, data: Any) -> bytes:
    return _utf8(f"event: {kind}\ndata: {json.dumps(data, default=jsonable_encoder, ensure_ascii=False)}\n\n")


# -- Server-Sent Events -----------------------------------------------------------------------------------


class _EventPump:
    """Runs a streamed turn in its own task and hands its events, as SSE chunks, to the response.

    Its own task, because the response's task is cancelled by anyio when the client leaves, and anyio cancels
    every later await of that task too: the turn's clean-up (stored outputs, saved threads, released locks) would be
    cut short. Here a disconnect cancels the turn once, and `stop` waits, shielded, until its clean-up is done.
    """

    def __init__(self, stream: ResponseStream, events: AsyncIterator[Event], first: Event | None, chat_id: str) -> None:
        self._stream, self._events, self._first, self._chat_id = stream, events, first, chat_id
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(SSE_QUEUE_EVENTS)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async with self._stream:  # leaving it calls stream.aclose(): a cancelled turn is cleaned up and saved
                if self._first is not None:
                    await self._queue.put(_sse(self._first.type, self._first.to_dict()))
                async for event in self._events:
                    await self._queue.put(_sse(event.type, event.to_dict()))
            done = {"type": "done", "result": result_response(self._stream.result).model_dump(mode="json")}
            await self._queue.put(_sse("done", done))
        except Exception as exc:  # the turn failed after the response began: the failure is the last event
            status, detail = error_status(exc)
            if status >= 500:
                logger.error("Chat %r (stream): %s", self._chat_id, detail.type, exc_info=exc)
            await self._queue.put(_sse("error", {"type": "error", "error": detail.model_dump(exclude_none=True)}))
        await self._queue.put(None)

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            try:
                chunk = await asyncio.wait_for(self._queue.get(), SSE_KEEPALIVE_SECONDS)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if chunk is None:
                return
            yield chunk

    async def stop(self) -> None:
        """Cancel the turn if it still runs (the client left) and wait until it has been cleaned up."""
        with anyio.CancelScope(shield=True):
            if self._task is None:  # never started: close the turn its first event opened
                await self._stream.aclose()
                return
            if not self._task.done():
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class EventStreamResponse(StreamingResponse):
    """`text/event-stream` of a turn's events; the client leaving cancels the turn (what it stored stays)."""

    media_type = "text/event-stream"

    def __init__(self, pump: _EventPump) -> None:
        super().__init__(pump.chunks(), headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        self._pump = pump

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Always watch for the client leaving, whatever ASGI version the server speaks: a turn waiting on a slow
        # model sends nothing for a long time, so a failing send() would notice too late.
        self._pump.start()
        try:
            async with anyio.create_task_group() as group:

                async def stream_then_stop() -> None:
                    with contextlib.suppress(OSError):  # the client left while we wrote
                        await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream_then_stop)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            await self._pump.stop()


async def _event_stream(stream: ResponseStream, chat_id: str) -> EventStreamResponse:
    """Start the turn up to its first event, so failures before it (paused chat, store down) get a real status."""
    events = aiter(stream)
    try:
        first: Event | None = await anext(events)
    except StopAsyncIteration:
        first = None
    return EventStreamResponse(_EventPump(stream, events, first, chat_id))


def _when_type(kind: str, field: str, schema: str) -> dict[str, Any]:
    return {
        "if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
        "then": {"required": [field], "properties": {field: {"$ref": f"#/components/schemas/{schema}"}}},
    }


_SSE_EVENT_SCHEMA: dict[str, Any] = {
    "description": "One event (OpenAPI 3.1 has no itemSchema: as in 3.2's, this schema describes each event).",
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "description": "The event's type, the same as its data's `type`."},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string"}},
                "allOf": [
                    _when_type("done", "result", "RunResultResponse"), _when_type("error", "error", "ErrorDetail")
                ],
            },
        },
    },
}
_SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-Sent Events, one per turn event in order: `event: <type>` and `data: <JSON of the event>` "
            "(type, agent, caller, depth, chat_id and the type's fields). The last event is `done` (data: "
            '{"type": "done", "result": RunResultResponse}) or `error` (data: {"type": "error", "error": '
            "ErrorDetail}). Comment lines (`: keep-alive`) may come between events."
        ),
        "content": {"text/event-stream": {"schema": _SSE_EVENT_SCHEMA}},
    }
}


# -- request guard: auth and size before any body is read, then its text ----------------------------------


class _Guard:
    """Bearer auth (constant-time compare), the request size limit and UTF-8 text, as plain ASGI around the app."""

    def __init__(self, app: ASGIApp, *, auth_token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self._token = auth_token.encode() if auth_token is not None else None
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value for key, value in scope["headers"]}
        if self._token is not None and scope["path"] not in PUBLIC_PATHS and not self._authorized(headers):
            await _error(401, "unauthorized", "Unauthorized.")(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            await _error(400, "bad_request", "Content-Length is not a number.")(scope, receive, send)
            return
        body = await self._read_body(headers, receive)
        if body is None:
            limit = self.max_body_bytes
            await _error(413, "request_too_large", f"The request body is over {limit} bytes.")(scope, receive, send)
            return
        problems = _text_problems(body)
        if problems:  # refused before any route runs: nothing is stored that no response could encode
            where = ".".join(str(part) for part in problems[0]["loc"])
            message = f"{where}: the request's text must be valid UTF-8; see details."
            await _error(422, "invalid_request", message, details=problems)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the client's disconnect

        await self.app(scope, replay, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        expected = self._token or b""
        # compare_digest on every request, even a malformed one, so timing says nothing about the token
        matches = hmac.compare_digest(token.strip(), expected)
        return matches and scheme.lower() == b"bearer"

    async def _read_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes | None:
        """The whole body, or None when it is over the limit (by Content-Length, or counted as it arrives)."""
        declared = headers.get(b"content-length")
        if declared is not None and int(declared) > self.max_body_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


# -- health ---------------------------------------------------------------------------------------------------


class StoreHealth:
    """Whether the app's store answers, as /healthz says: one cheap read (`load` of HEALTH_PROBE_CHAT), shared by
    concurrent requests and reused for HEALTH_CACHE_SECONDS after it came, so polling stays cheap.

    `clock` (seconds, monotonic) is there for tests. The problem it reports names the failure's kind, never the
    store's address; the log gets a line when the store goes down or comes back, not one per poll.
    """

    def __init__(self, store: ThreadStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._checked_at: float | None = None
        self._problem: str | None = None
        self._check: asyncio.Task[str | None] | None = None

    async def problem(self) -> str | None:
        """None when the store answered; otherwise what is wrong, fit for the client."""
        if self._checked_at is not None and self.clock() - self._checked_at < HEALTH_CACHE_SECONDS:
            return self._problem
        if self._check is None or self._check.done():
            self._check = asyncio.create_task(self._run())
        return await asyncio.shield(self._check)  # a client that leaves does not cancel the others' check

    async def _run(self) -> str | None:
        problem: str | None = None
        try:
            await asyncio.wait_for(self.store.load(HEALTH_PROBE_CHAT), HEALTH_TIMEOUT_SECONDS)
        except TimeoutError:
            problem = f"The thread store did not answer within {HEALTH_TIMEOUT_SECONDS:g} s."
        except Exception as exc:
            cause = exc if exc.__cause__ is None else exc.__cause__
            problem = f"The thread store is unavailable ({type(cause).__name__})."
        if problem != self._problem or self._checked_at is None:
            if problem is None:
                logger.info("Health check: the thread store answers.")
            else:  # its type only: a driver's message may name the host, the user or the database
                logger.warning("Health check: %s", problem)
        self._checked_at, self._problem = self.clock(), problem
        return problem


# -- the app ------------------------------------------------------------------------------------------------


def open_store(url: str) -> ThreadStore:
    """A store from a URL: `memory` (one process only), `sqlite:///path.db`, `postgresql://user@host/db`."""
    if not isinstance(url, str) or not url:
        raise ConfigError("The store must be a ThreadStore or a URL like 'postgresql://user@host:5432/db'.")
    if url == "memory":
        return MemoryThreadStore()
    return SQLThreadStore(url)


def _entry_point(agency: Agency, name: str | None) -> str | None:
    if name is None:
        return None
    entries = [agent.name for agent in agency.entry_points]
    if name not in entries:
        raise ConfigError(
            f"recipient_agent {name!r} is not an entry point of this agency; the user may address: "
            f"{', '.join(entries)}."
        )
    return name


def create_app(
    agency_factory: AgencyFactory,
    *,
    store: ThreadStore | str,
    auth_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """A FastAPI app serving the agency `agency_factory(store)` builds (once, now).

    `store` is a ThreadStore or a URL (`open_store`); share one PostgreSQL database between worker processes,
    each building its own app. With `auth_token`, every endpoint but /healthz and /openapi.json wants
    `Authorization: Bearer <auth_token>`. Bodies over `max_body_bytes` get 413. The app closes the store when it
    shuts down.
    """
    if not callable(agency_factory):
        raise ConfigError(f"agency_factory must be a function store -> Agency, got {type(agency_factory).__name__}.")
    if auth_token is not None and (not isinstance(auth_token, str) or not auth_token.strip()):
        raise ConfigError("auth_token must be a non-empty str, or None to serve without authentication.")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ConfigError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}.")
    thread_store = open_store(store) if isinstance(store, str) else store
    agency = agency_factory(thread_store)
    if not isinstance(agency, Agency):
        raise ConfigError(f"agency_factory must return an Agency, got {type(agency).__name__}.")
    if agency.thread_manager.store is not thread_store:
        raise ConfigError(
            "agency_factory must build the agency on the store it is given: Agency(..., thread_store=store). "
            "Otherwise each worker keeps its own chats."
        )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await agency.aclose()

    app = FastAPI(
        title="agency_swarm", summary="Chats with an agency of agents.", docs_url=None, redoc_url=None,
        lifespan=lifespan,
    )
    app.state.agency = agency
    app.state.store = thread_store
    app.state.health = StoreHealth(thread_store)
    _add_error_handlers(app)
    _add_routes(app, agency, app.state.health, protected=auth_token is not None)
    app.add_middleware(_Guard, auth_token=auth_token, max_body_bytes=max_body_bytes)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    async def invalid_body(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        details = [
            {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}
            for error in exc.errors()
        ]  # the client's input is not echoed back
        return _error(422, "invalid_request", "The request body is not valid; see details.", details=details)

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, kind, str(exc.detail), headers=exc.headers)  # a 405's Allow (RFC 9110)

    app.add_exception_handler(RequestValidationError, invalid_body)
    app.add_exception_handler(StarletteHTTPException, http_error)


_ERROR_DOCS = {
    400: "invalid_chat_id, or bad_request: a recipient that is not an entry point, resume decisions for calls that "
    "do not wait, a Content-Length that is not a number",
    401: "unauthorized: missing or wrong bearer token",
    409: "chat_paused: the chat waits for approvals (see interruptions); nothing_to_resume: its last turn finished",
    413: "request_too_large: the body is over the server's limit",
    422: "invalid_request: the body is not JSON of the expected shape, or its text is not valid UTF-8 (bytes that "
    "are not, or a lone surrogate escape like \\ud800)",
    500: "run_failed: the turn failed (max steps, model error...); internal_error: the server failed",
    503: "store_unavailable: the thread store cannot be reached",
}


def _error_docs(*statuses: int, protected: bool, sse: bool = False) -> dict[int | str, dict[str, Any]]:
    shown = [status for status in statuses if protected or status != 401]
    if sse:  # a `model` would be documented as the route's media type, text/event-stream: errors are JSON
        json_error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
        return {status: {"description": _ERROR_DOCS[status], "content": json_error} for status in shown}
    return {status: {"model": ErrorResponse, "description": _ERROR_DOCS[status]} for status in shown}


_CHAT_OPERATIONS = ("post_message", "stream_message", "resume", "resume_stream", "get_threads", "delete_chat")


def _chat_links(approve: str | None = None) -> dict[str, Any]:
    """OpenAPI links from a response about a chat to what may follow on that chat (clients and fuzzers follow them);
    `approve`: where the response holds the call id of a tool call waiting for approval."""
    chat = {"chat_id": "$request.path.chat_id"}
    links: dict[str, Any] = {name: {"operationId": name, "parameters": chat} for name in _CHAT_OPERATIONS}
    if approve is not None:
        body = {"approve": [approve]}
        links["approve_waiting_call"] = {"operationId": "resume", "parameters": chat, "requestBody": body}
    return links


def _route_docs(*statuses: int, protected: bool, result: str | None = None, sse: bool = False) -> dict[str, Any]:
    """The keyword arguments of a chat route: tags, the documented bearer scheme, its responses with their links."""
    responses = _error_docs(*statuses, protected=protected, sse=sse)
    ok: dict[str, Any] = dict(_SSE_DOC[200]) if sse else {}
    ok["links"] = _chat_links(None if result is None else f"$response.body#{result}/interruptions/0/call_id")
    responses[200] = ok
    if 409 in responses:  # chat_paused lists the calls waiting for approval
        responses[409] = {**responses[409], "links": _chat_links("$response.body#/error/interruptions/0/call_id")}
    bearer = [Depends(HTTPBearer(auto_error=False))] if protected else []  # documents the scheme; _Guard checks
    docs: dict[str, Any] = {"tags": ["chats"], "dependencies": bearer, "responses": responses}
    if sse:
        docs.update(status_code=200, response_class=EventStreamResponse)
    return docs


def _add_routes(app: FastAPI, agency: Agency, health: StoreHealth, *, protected: bool) -> None:
    health_errors: dict[int | str, dict[str, Any]] = {
        503: {"model": ErrorResponse, "description": "store_unavailable: the thread store does not answer"}
    }

    @app.get(
        "/healthz", response_model=HealthResponse, tags=["server"], responses=health_errors, operation_id="healthz"
    )
    async def healthz() -> Response:
        """The worker answers and so does its thread store (checked at most once a second). No authentication."""
        problem = await health.problem()
        if problem is not None:
            return _error(503, "store_unavailable", problem)
        return _model_response(HealthResponse(status="ok"))

    _add_message_routes(app, agency, protected=protected)
    _add_resume_routes(app, agency, protected=protected)
    _add_chat_routes(app, agency, health.store, protected=protected)


def _add_message_routes(app: FastAPI, agency: Agency, *, protected: bool) -> None:
    turn = (400, 401, 409, 413, 422, 500, 503)

    @app.post(
        "/chats/{chat_id}/messages", response_model=RunResultResponse, operation_id="post_message",
        **_route_docs(*turn, protected=protected, result=""),
    )
    async def post_message(chat_id: ChatId, request: MessageRequest) -> Any:
        """Run one turn and return its result once it is complete."""
        try:
            recipient = _entry_point(agency, request.recipient_agent)
            result = await agency.get_response(request.message, recipient, chat_id=chat_id)
            return _model_response(result_response(result))
        except Exception as exc:
            return _failure(exc, chat_id)

    @app.post(
        "/chats/{chat_id}/messages:stream", operation_id="stream_message",
        **_route_docs(*turn, protected=protected, sse=True),
    )
    async def stream_message(chat_id: ChatId, request: MessageRequest) -> Response:
        """Run one turn, streaming every event of every agent as it happens; leaving cancels the turn."""
        try:
            recipient = _entry_point(agency, request.recipient_agent)
            stream = agency.get_response_stream(request.message, recipient, chat_id=chat_id)
            return await _event_stream(stream, chat_id)
        except Exception as exc:
            return _failure(exc, chat_id)


def _add_resume_routes(app: FastAPI, agency: Agency, *, protected: bool) -> None:
    turn = (400, 401, 409, 413, 422, 500, 503)

    @app.post(
        "/chats/{chat_id}/resume", response_model=RunResultResponse, operation_id="resume",
        **_route_docs(*turn, protected=protected, result=""),
    )
    async def resume(chat_id: ChatId, request: Annotated[ResumeRequest | None, Body()] = None) -> Any:
        """Continue the chat's unfinished turn: after a pause for approvals, or after a worker died mid-turn."""
        decisions = request or ResumeRequest()
        try:
            result = await agency.resume(chat_id, approve=decisions.approve, reject=decisions.reject)
            return _model_response(result_response(result))
        except Exception as exc:
            return _failure(exc, chat_id)

    @app.post(
        "/chats/{chat_id}/resume:stream", operation_id="resume_stream",
        **_route_docs(*turn, protected=protected, sse=True),
    )
    async def resume_stream(chat_id: ChatId, request: Annotated[ResumeRequest | None, Body()] = None) -> Response:
        """`resume` as Server-Sent Events, like messages:stream."""
        decisions = request or ResumeRequest()
        try:
            stream = agency.resume_stream(chat_id, approve=decisions.approve, reject=decisions.reject)
            return await _event_stream(stream, chat_id)
        except Exception as exc:
            return _failure(exc, chat_id)


def _add_chat_routes(app: FastAPI, agency: Agency, store: ThreadStore, *, protected: bool) -> None:
    read = (400, 401, 422, 500, 503)

    @app.get(
        "/chats/{chat_id}/threads", response_model=ThreadsResponse, operation_id="get_threads",
        **_route_docs(*read, protected=protected),
    )
    async def get_threads(chat_id: ChatId) -> Any:
        """What the store holds for the chat now (a running turn's items included, as they are stored)."""
        try:
            threads = await store.load(check_chat_id(chat_id))
            return _model_response(ThreadsResponse(chat_id=chat_id, threads=threads))
        except Exception as exc:
            return _failure(exc, chat_id)

    docs = _route_docs(*read, protected=protected)
    docs["responses"][204] = docs["responses"].pop(200)

    @app.delete("/chats/{chat_id}", status_code=204, response_class=Response, operation_id="delete_chat", **docs)
    async def delete_chat(chat_id: ChatId) -> Response:
        """Forget the chat, after any turn of it that is running (on any worker) has finished."""
        try:
            await agency.thread_manager.delete_chat(chat_id)
        except Exception as exc:
            return _failure(exc, chat_id)
        return Response(status_code=204)


# -- running it: settings shared with worker processes through the environment ---------------------------


@dataclass(kw_only=True)
class ServeSettings:
    """What `agency-swarm serve` passes to each worker process (through environment variables)."""

    config: str | None = None
    """An agency file (YAML/JSON) for `Agency.from_config`."""
    factory: str | None = None
    """Or `module:function`, a function store -> Agency importable in the workers."""
    store: str = "memory"
    auth_token_env: str | None = None
    """The NAME of the environment variable holding the bearer token (the token itself never goes on a command
    line, where other users of the machine could read it)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    models: str | None = None
    """With `config`: `FILE.py:NAME` or `module:NAME` giving the agents' models (as `agency-swarm run --models`)."""
    toolkits: str | None = None
    """With `config`: `FILE.py:NAME` or `module:NAME` giving the toolkits the file names (as `--toolkits`)."""

    def check(self) -> None:
        if (self.config is None) == (self.factory is None):
            raise ConfigError("Serve either an agency file (agency.yaml) or --factory module:function, not both.")
        if self.factory is not None and (self.models is not None or self.toolkits is not None):
            raise ConfigError("--models and --toolkits go with an agency file; a --factory builds its own agents.")
        scheme = self.store.partition("://")[0].lower()
        if self.store != "memory" and ("://" not in self.store or scheme not in SQLITE_SCHEMES + POSTGRES_SCHEMES):
            raise ConfigError(
                f"--store {redact_url(self.store)!r} is not a store: use postgresql://user@host:5432/db, "
                "sqlite:///chats.db or memory."
            )
        if self.factory is not None and not _FACTORY_PATH.fullmatch(self.factory):
            raise ConfigError(f"--factory {self.factory!r} must look like 'package.module:function'.")
        if self.config is not None and not FilePath(self.config).is_file():
            raise ConfigError(f"Agency file {self.config!r} does not exist (or is not a file).")
        if self.auth_token_env is not None and not os.environ.get(self.auth_token_env, "").strip():
            raise ConfigError(
                f"--auth-token-env names {self.auth_token_env!r}, but that environment variable is empty or unset; "
                "export the token in it first."
            )
        if isinstance(self.max_body_bytes, bool) or not isinstance(self.max_body_bytes, int) or self.max_body_bytes < 1:
            raise ConfigError(f"max_body_bytes must be an int >= 1, got {self.max_body_bytes!r}.")

    def to_env(self) -> dict[str, str]:
        env = {ENV_STORE: self.store, ENV_MAX_BODY_BYTES: str(self.max_body_bytes)}
        if self.config is not None:
            env[ENV_CONFIG] = str(FilePath(self.config).resolve())
        if self.factory is not None:
            env[ENV_FACTORY] = self.factory
        optional = {ENV_AUTH_TOKEN_ENV: self.auth_token_env, ENV_MODELS: self.models, ENV_TOOLKITS: self.toolkits}
        env.update({name: value for name, value in optional.items() if value is not None})
        return env

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServeSettings:
        env = dict(os.environ) if environ is None else environ
        size = env.get(ENV_MAX_BODY_BYTES, str(DEFAULT_MAX_BODY_BYTES))
        if not size.isdigit():
            raise ConfigError(f"{ENV_MAX_BODY_BYTES} must be a whole number of bytes, got {size!r}.")
        if ENV_STORE not in env:
            raise ConfigError(f"{ENV_STORE} is not set; start the server with `agency-swarm serve`.")
        return cls(
            config=env.get(ENV_CONFIG), factory=env.get(ENV_FACTORY), store=env[ENV_STORE],
            auth_token_env=env.get(ENV_AUTH_TOKEN_ENV), max_body_bytes=int(size), models=env.get(ENV_MODELS),
            toolkits=env.get(ENV_TOOLKITS),
        )

    def agency_factory(self) -> AgencyFactory:
        if self.factory is not None:
            return _import_factory(self.factory)
        config, models, toolkits = str(self.config), self.models, self.toolkits

        def from_config(store: ThreadStore) -> Agency:
            from .._config._python_object import load_python_object  # the same FILE.py:NAME rules as `agency-swarm run`

            return Agency.from_config(
                config, thread_store=store,
                models=None if models is None else load_python_object("--models", models),
                toolkits=None if toolkits is None else load_python_object("--toolkits", toolkits),
            )

        return from_config

    def auth_token(self) -> str | None:
        return None if self.auth_token_env is None else os.environ.get(self.auth_token_env)


def _import_factory(path: str) -> AgencyFactory:
    module_name, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--factory {path!r}: cannot import {module_name!r} ({exc}); is it on PYTHONPATH?") from exc
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigError(f"--factory {path!r}: module {module_name!r} has no {attribute!r}.")
    if not callable(target):
        raise ConfigError(f"--factory {path!r} is not a function store -> Agency.")
    factory: AgencyFactory = target
    return factory


def app_from_env() -> FastAPI:
    """The app of one worker process, from the settings `serve` put in the environment (uvicorn --factory)."""
    settings = ServeSettings.from_env()
    settings.check()
    app = create_app(
        settings.agency_factory(), store=settings.store, auth_token=settings.auth_token(),
        max_body_bytes=settings.max_body_bytes,
    )
    # Everything built so far (modules, openai's thousand pydantic schemas, the agency) lives as long as the
    # process: out of the collector's sight, a full collection takes a few ms instead of ~150 ms (see
    # docs/design/performance.md, W6).
    gc.collect()
    gc.freeze()
    return app


def _shared_between_processes(url: str) -> bool:
    return url.partition("://")[0].lower() in POSTGRES_SCHEMES


def serve(
    settings: ServeSettings,
    *,
    workers: int = 1,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Run the app with uvicorn until interrupted; `workers` processes share the store (PostgreSQL for > 1)."""
    settings.check()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"--workers must be an int >= 1, got {workers!r}.")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {port!r}.")
    if workers > 1 and not _shared_between_processes(settings.store):
        scheme = settings.store.partition("://")[0] if "://" in settings.store else settings.store
        sqlite = " (SQLite cannot lock a turn across processes)" if scheme in SQLITE_SCHEMES else ""
        raise ConfigError(
            f"--workers {workers} needs a store the workers share and lock turns in: --store "
            f"postgresql://user@host:5432/db, not {scheme!r}{sqlite}."
        )
    settings.agency_factory()(MemoryThreadStore())  # a bad file or factory fails here, once, not in every worker
    import uvicorn

    os.environ.update(settings.to_env())  # worker processes inherit it
    logger.info("Serving on %s:%d with %d worker(s), store %s", host, port, workers, redact_url(settings.store))
    uvicorn.run(
        "agency_swarm.serving:app_from_env", factory=True, host=host, port=port, workers=workers,
        log_level=log_level, access_log=access_log,
    )
