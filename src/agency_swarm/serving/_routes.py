"""The HTTP routes: /healthz, and the chat routes that run, resume, read and delete chats."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, Path, Query, Request, Response

from .._agency._agency import Agency
from .._base._errors import ConfigError
from .._threads._manager import check_chat_id
from .._threads._store import ThreadStore
from .._threads._thread_items import without_call_marks
from ._auth._context import turn_options
from ._bodies import (
    ErrorResponse,
    HealthResponse,
    MessageRequest,
    ResumeRequest,
    RunResultResponse,
    ThreadsResponse,
    error_response,
    failure_response,
    message_input,
    result_response,
)
from ._health import StoreHealth
from ._openapi import form_body, route_docs
from ._sse import StreamTurns, event_stream
from ._text import model_response

ChatId = Annotated[
    str,
    Path(
        description=(
            "Names the chat: 1 to 200 printable characters (at most 255 UTF-8 bytes; percent-encode the UTF-8 bytes), "
            "not only whitespace, no '/' or '\\', not '.' or '..', not 'agency_swarm.healthz' (the health check's); "
            "any other id is 400 invalid_chat_id. A chat exists once something is stored in it."
        ),
        json_schema_extra={"maxLength": 200},
    ),
]
RawEvents = Annotated[
    bool,
    Query(
        description=(
            "Also send each model's raw Responses-API stream events (`event: raw`). Off by default: they are most "
            "of a short turn's bytes, and every other event already carries what a client shows."
        ),
    ),
]

Marks = Annotated[
    bool,
    Query(
        description=(
            "Also return the bookkeeping items stored between a thread's messages (`agency_swarm.turn_started`, "
            "`agency_swarm.awaiting_approval`, `agency_swarm.approved_run`). Off by default: no model is handed "
            "them, and a client showing or re-sending a thread has no use for them."
        ),
    ),
]


def _entry_point(agency: Agency, name: str | None) -> str | None:
    """The chart's rule, as in Python and on the command line: only its entry points may be addressed (400)."""
    if name is None:
        return None
    try:
        return agency.entry_point(name).name
    except ConfigError as error:
        raise ConfigError(f"recipient_agent: {error}") from None


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key", min_length=1, max_length=255, pattern=r"\S",
        description=(
            "The same key on the same chat is the same turn: a retry returns the first request's result (or "
            "continues its turn), never a second turn."
        ),
    ),
]


def key_turn_id(key: str | None) -> str | None:
    """The turn id an Idempotency-Key stands for (fixed length, whatever the key holds)."""
    if key is None:
        return None
    if not key.strip():
        raise ConfigError("Idempotency-Key must not be blank.")
    return "key-" + hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()



def add_routes(
    app: FastAPI, agency: Agency, health: StoreHealth, streams: StreamTurns, *, protected: bool, durable: bool = False
) -> None:
    """Every route but durable mode's own (`_durable.add_durable_routes` adds those, and the message routes)."""
    health_errors: dict[int | str, dict[str, Any]] = {
        503: {
            "model": ErrorResponse,
            "description": "store_unavailable: the thread store does not answer, or cannot write",
        }
    }

    @app.get(
        "/healthz", response_model=HealthResponse, tags=["server"], responses=health_errors, operation_id="healthz"
    )
    async def healthz() -> Response:
        """The worker answers and its thread store reads and writes (checked at most once a second). No
        authentication. HEAD answers the same status without a body."""
        problem = await health.problem()
        if problem is not None:
            return error_response(503, "store_unavailable", problem)
        return model_response(HealthResponse(status="ok"))

    app.head("/healthz", include_in_schema=False)(healthz)  # balancers that probe with HEAD

    if not durable:
        _add_message_routes(app, agency, streams, protected=protected)
        _add_resume_routes(app, agency, streams, protected=protected)
    _add_chat_routes(app, agency, health.store, protected=protected)


def _add_message_routes(app: FastAPI, agency: Agency, streams: StreamTurns, *, protected: bool) -> None:
    turn = (400, 401, 409, 413, 415, 422, 500, 503)

    @app.post(
        "/chats/{chat_id}/messages", response_model=RunResultResponse, operation_id="post_message",
        **route_docs(*turn, protected=protected, result="", extra=form_body(durable=False)),
    )
    async def post_message(
        chat_id: ChatId, request: MessageRequest, http: Request, idempotency_key: IdempotencyKey = None
    ) -> Any:
        """Run one turn and return its result once it is complete (a retry with its Idempotency-Key: the same turn)."""
        try:
            recipient = _entry_point(agency, request.recipient_agent)
            result = await agency.get_response(
                message_input(request), recipient, chat_id=chat_id, turn_id=key_turn_id(idempotency_key),
                **turn_options(http, chat_id, request),
            )
            return model_response(result_response(result))
        except Exception as exc:
            return failure_response(exc, chat_id)

    @app.post(
        "/chats/{chat_id}/messages:stream", operation_id="stream_message",
        **route_docs(*turn, protected=protected, sse=True, extra=form_body(durable=False)),
    )
    async def stream_message(
        chat_id: ChatId, request: MessageRequest, http: Request, raw: RawEvents = False,
        idempotency_key: IdempotencyKey = None,
    ) -> Response:
        """Run one turn, streaming every event of every agent as it happens; the turn runs to its end whether the
        client reads, lags or leaves (a client that takes nothing for the write timeout is dropped)."""
        try:
            recipient = _entry_point(agency, request.recipient_agent)
            stream = agency.get_response_stream(
                message_input(request), recipient, chat_id=chat_id, turn_id=key_turn_id(idempotency_key),
                **turn_options(http, chat_id, request),
            )
            return await event_stream(stream, chat_id, streams, raw=raw)
        except Exception as exc:
            return failure_response(exc, chat_id)


def _add_resume_routes(app: FastAPI, agency: Agency, streams: StreamTurns, *, protected: bool) -> None:
    turn = (400, 401, 409, 413, 415, 422, 500, 503)

    @app.post(
        "/chats/{chat_id}/resume", response_model=RunResultResponse, operation_id="resume",
        **route_docs(*turn, protected=protected, result=""),
    )
    async def resume(
        chat_id: ChatId, http: Request, request: Annotated[ResumeRequest | None, Body()] = None
    ) -> Any:
        """Continue the chat's unfinished turn: after a pause for approvals, or after a worker died mid-turn."""
        decisions = request or ResumeRequest()
        try:
            result = await agency.resume(
                chat_id, approve=decisions.approve, reject=decisions.reject, **turn_options(http, chat_id, request)
            )
            return model_response(result_response(result))
        except Exception as exc:
            return failure_response(exc, chat_id)

    @app.post(
        "/chats/{chat_id}/resume:stream", operation_id="resume_stream",
        **route_docs(*turn, protected=protected, sse=True),
    )
    async def resume_stream(
        chat_id: ChatId, http: Request, request: Annotated[ResumeRequest | None, Body()] = None,
        raw: RawEvents = False,
    ) -> Response:
        """`resume` as Server-Sent Events, like messages:stream."""
        decisions = request or ResumeRequest()
        try:
            stream = agency.resume_stream(
                chat_id, approve=decisions.approve, reject=decisions.reject, **turn_options(http, chat_id, request)
            )
            return await event_stream(stream, chat_id, streams, raw=raw)
        except Exception as exc:
            return failure_response(exc, chat_id)


def _add_chat_routes(app: FastAPI, agency: Agency, store: ThreadStore, *, protected: bool) -> None:
    read = (400, 401, 422, 500, 503)

    @app.get(
        "/chats/{chat_id}/threads", response_model=ThreadsResponse, operation_id="get_threads",
        **route_docs(*read, protected=protected),
    )
    async def get_threads(chat_id: ChatId, marks: Marks = False) -> Any:
        """What the store holds for the chat now (a running turn's items included, as they are stored): the items
        the models read, and the bookkeeping marks between them only with `?marks=true`."""
        try:
            threads = await store.load(check_chat_id(chat_id))
            if not marks:
                threads = {key: without_call_marks(items) for key, items in threads.items()}
            return model_response(ThreadsResponse(chat_id=chat_id, threads=threads))
        except Exception as exc:
            return failure_response(exc, chat_id)

    docs = route_docs(*read, protected=protected)
    docs["responses"][204] = docs["responses"].pop(200)

    @app.delete("/chats/{chat_id}", status_code=204, response_class=Response, operation_id="delete_chat", **docs)
    async def delete_chat(chat_id: ChatId) -> Response:
        """Forget the chat, after any turn of it that is running (on any worker) has finished."""
        try:
            await agency.thread_manager.delete_chat(chat_id)
        except Exception as exc:
            return failure_response(exc, chat_id)
        return Response(status_code=204)
