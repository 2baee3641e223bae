"""Durable mode's routes (`create_app(durable=True)`): turns submitted to DBOS once per Idempotency-Key, run by any
worker, read back by id; their events are Server-Sent Events with ids, resumable with Last-Event-ID."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, Header, Query, Request, Response
from pydantic import BaseModel, Field

from .._agency._agency import Agency
from .._base._errors import TurnCancelled
from ..durable import DurableTurns, TurnFailed, TurnHandle, UnknownTurn
from ._auth._context import turn_options
from ._bodies import (
    DurableMessageRequest,
    ErrorDetail,
    ResumeRequest,
    RunResultResponse,
    error_response,
    failure_response,
    id_for_header,
    message_input,
    paused_over_http,
    result_response,
)
from ._openapi import form_body, route_docs
from ._routes import ChatId, IdempotencyKey
from ._sse import EventStreamResponse, Feed, _sse_chunk, error_chunk
from ._text import model_response

_FAILURE_STATUS = {"bad_request": 400, "chat_paused": 409, "nothing_to_resume": 409}


class TurnResponse(BaseModel):
    """A durable turn: where it stands, and its result (or error) once it ended."""

    turn_id: str
    chat_id: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    result: RunResultResponse | None = Field(default=None, description="Once `status` is done.")
    error: ErrorDetail | None = Field(default=None, description="Once `status` is failed.")


def failed_message(failed: TurnFailed, chat_id: str) -> str:
    """A failed durable turn's message, told as HTTP tells it (a paused chat: `POST /chats/{id}/resume`)."""
    return paused_over_http(str(failed), chat_id) if failed.kind == "chat_paused" else str(failed)


def failed_response(failed: TurnFailed, chat_id: str) -> Response:
    return error_response(_FAILURE_STATUS.get(failed.kind, 500), failed.kind, failed_message(failed, chat_id))


async def turn_response(handle: TurnHandle) -> TurnResponse:
    status = await handle.status()
    response = TurnResponse(turn_id=handle.turn_id, chat_id=handle.chat_id, status=status)
    if status == "done":
        response.result = result_response(await handle.result())
    elif status == "failed":
        try:
            await handle.result()
        except TurnFailed as failed:
            response.error = ErrorDetail(type=failed.kind, message=failed_message(failed, handle.chat_id))
    return response


async def _answered(submitted: Awaitable[TurnHandle], chat_id: str, *, background: bool = False) -> Response:
    """A submitted turn's answer: its result once it ends, or (`background`) 202 at once with where to read it."""
    try:
        handle = await submitted
        if background:
            response = model_response(await turn_response(handle), status_code=202)
            where = f"/chats/{id_for_header(chat_id)}/turns/{id_for_header(handle.turn_id)}"
            response.headers["location"] = where
        else:
            response = model_response(result_response(await handle.result()))
        response.headers["turn-id"] = id_for_header(handle.turn_id)
        return response
    except TurnFailed as failed:
        return failed_response(failed, chat_id)
    except Exception as exc:
        return failure_response(exc, chat_id)


def add_durable_routes(
    app: FastAPI, agency: Agency, turns: DurableTurns, *, protected: bool, write_timeout: float
) -> None:
    turn = (400, 401, 409, 413, 415, 422, 500, 503)

    @app.post(
        "/chats/{chat_id}/messages", response_model=RunResultResponse, operation_id="post_message",
        **route_docs(*turn, protected=protected, result="", extra=form_body(durable=True)),
    )
    async def post_message(
        chat_id: ChatId, request: DurableMessageRequest, http: Request, idempotency_key: IdempotencyKey = None
    ) -> Any:
        """Run one turn (durably: any worker finishes it) and return its result once complete; with `background`,
        202 at once with the turn's id (GET /chats/{chat_id}/turns/{turn_id} for its status and result)."""
        try:
            options = turn_options(http, chat_id, request)
        except Exception as exc:
            return failure_response(exc, chat_id)
        submitted = turns.submit(
            message_input(request), chat_id=chat_id, recipient_agent=request.recipient_agent, key=idempotency_key,
            **options,
        )
        return await _answered(submitted, chat_id, background=request.background)

    @app.post(
        "/chats/{chat_id}/messages:stream", operation_id="stream_message",
        **route_docs(*turn, protected=protected, sse=True, extra=form_body(durable=True)),
    )
    async def stream_message(
        chat_id: ChatId, request: DurableMessageRequest, http: Request, idempotency_key: IdempotencyKey = None
    ) -> Any:
        """Run one turn durably, streaming its events, each with an `id`: a client that lost the stream reconnects
        to GET /chats/{chat_id}/turns/{turn_id}/events with Last-Event-ID. Leaving does not stop the turn."""
        try:
            handle = await turns.submit(
                message_input(request), chat_id=chat_id, recipient_agent=request.recipient_agent, key=idempotency_key,
                **turn_options(http, chat_id, request),
            )
        except Exception as exc:
            return failure_response(exc, chat_id)
        return durable_event_stream(handle, None, write_timeout)

    _add_durable_resume_routes(app, turns, protected=protected, write_timeout=write_timeout)
    _add_turn_routes(app, turns, protected=protected, write_timeout=write_timeout)


def _add_durable_resume_routes(app: FastAPI, turns: DurableTurns, *, protected: bool, write_timeout: float) -> None:
    turn = (400, 401, 409, 413, 415, 422, 500, 503)

    @app.post(
        "/chats/{chat_id}/resume", response_model=RunResultResponse, operation_id="resume",
        **route_docs(*turn, protected=protected, result=""),
    )
    async def resume(
        chat_id: ChatId, http: Request, request: Annotated[ResumeRequest | None, Body()] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """Continue the chat's unfinished turn (durably; the same Idempotency-Key is the same resume)."""
        decisions = request or ResumeRequest()
        try:
            context = turn_options(http, chat_id, request)["context"]
        except Exception as exc:
            return failure_response(exc, chat_id)
        submitted = turns.resume(
            chat_id=chat_id, approve=decisions.approve, reject=decisions.reject, key=idempotency_key, context=context
        )
        return await _answered(submitted, chat_id)

    @app.post(
        "/chats/{chat_id}/resume:stream", operation_id="resume_stream",
        **route_docs(*turn, protected=protected, sse=True),
    )
    async def resume_stream(
        chat_id: ChatId, http: Request, request: Annotated[ResumeRequest | None, Body()] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """`resume` as Server-Sent Events with ids, like messages:stream in durable mode."""
        decisions = request or ResumeRequest()
        try:
            handle = await turns.resume(
                chat_id=chat_id, approve=decisions.approve, reject=decisions.reject, key=idempotency_key,
                context=turn_options(http, chat_id, request)["context"],
            )
        except Exception as exc:
            return failure_response(exc, chat_id)
        return durable_event_stream(handle, None, write_timeout)


def _add_turn_routes(app: FastAPI, turns: DurableTurns, *, protected: bool, write_timeout: float) -> None:
    read = (400, 401, 404, 422, 500, 503)

    @app.get(
        "/chats/{chat_id}/turns/{turn_id}", response_model=TurnResponse, operation_id="get_turn",
        **route_docs(*read, protected=protected),
    )
    async def get_turn(chat_id: ChatId, turn_id: str) -> Any:
        """A durable turn's status, and its result or error once it ended."""
        try:
            return model_response(await turn_response(turns.handle(chat_id, turn_id)))
        except UnknownTurn as unknown:
            return error_response(404, "not_found", str(unknown))
        except Exception as exc:
            return failure_response(exc, chat_id)

    @app.get(
        "/chats/{chat_id}/turns/{turn_id}/events", operation_id="turn_events",
        **route_docs(*read, protected=protected, sse=True),
    )
    async def turn_events(
        chat_id: ChatId, turn_id: str, last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
        after: Annotated[int | None, Query(ge=-1, description="Like Last-Event-ID: the events after this id.")] = None,
    ) -> Any:
        """The turn's events after Last-Event-ID (or `after`; all without either), live until it ends, then `done`."""
        try:
            handle = turns.handle(chat_id, turn_id)
            await handle.status()  # a turn nobody submitted is a 404 now, not an empty stream
        except UnknownTurn as unknown:
            return error_response(404, "not_found", str(unknown))
        except Exception as exc:
            return failure_response(exc, chat_id)
        if last_event_id is not None:
            if not last_event_id.strip().lstrip("-").isdigit():
                return error_response(400, "bad_request", "Last-Event-ID must be the id of an event of this turn.")
            after = int(last_event_id)
        return durable_event_stream(handle, after, write_timeout)


class DurableFeed(Feed):
    """A durable turn's events after `after` as `id:`/`event:`/`data:` blocks, then `done` (the result) or `error`,
    read for one reader while its response lasts. A reader dropped for taking nothing is read for no longer: the
    turn goes on, and the reader picks it up again with Last-Event-ID."""

    def __init__(self, handle: TurnHandle, after: int | None, write_timeout: float) -> None:
        super().__init__(handle.chat_id, write_timeout)
        self._handle, self._after = handle, after
        self._cancelled = False

    async def run(self) -> None:
        try:
            await self._read()
        except TurnFailed as failed:
            error = {"type": failed.kind, "message": failed_message(failed, self.chat_id)}
            await self.put(_sse_chunk("error", {"type": "error", "error": error}))
        except TurnCancelled:  # cancelled before it ran (or before its `cancelled` event was written)
            if not self._cancelled:
                data = {"type": "cancelled", "chat_id": self.chat_id, "turn_id": self._handle.turn_id}
                await self.put(_sse_chunk("cancelled", data))
        except Exception as exc:  # reading failed (the database): the stream still ends with an `error`
            await self.put(error_chunk(exc, self.chat_id))
        finally:
            self.outbox.end()

    async def _read(self) -> None:
        async for event in self._handle.events(self._after):
            await self.put(_sse_chunk(event.type, event.data, event.id))
            if self.outbox.dropped:
                return
            if event.type == "cancelled":
                self._cancelled = True
        result = result_response(await self._handle.ended_result()).model_dump(mode="json")
        await self.put(_sse_chunk("done", {"type": "done", "result": result}))


def durable_event_stream(handle: TurnHandle, after: int | None, write_timeout: float) -> EventStreamResponse:
    """The response streaming a durable turn's events: read while it lasts, through the plain mode's bounded
    Outbox and write timeout (serving.md)."""
    feed = DurableFeed(handle, after, write_timeout)
    return EventStreamResponse(feed, headers={"turn-id": id_for_header(handle.turn_id)}, producer=feed.run)
