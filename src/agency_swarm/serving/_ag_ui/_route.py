"""`POST /ag-ui`: an agency's turns for AG-UI clients, as Server-Sent Events of `ag_ui.core` events."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from ag_ui.core import BaseEvent, RunAgentInput
from fastapi import FastAPI, Header, Request, Response

from ..._agency._agency import Agency
from ..._base._errors import TurnLockLost
from ..._threads._chat_index import title_of
from ..._turn._results import ResponseStream
from .._auth._context import context_data, rules_of
from .._auth._owners import ChatOwners
from .._auth._principal import RequestContext, principal_of
from .._bodies import error_response, error_status, id_for_header
from .._openapi import bearer_extra
from .._routes import _entry_point, key_turn_id
from .._sse import LOCK_LOST, EventPump, EventStreamResponse, Feed, StreamTurns, logger
from .._text import utf8
from ._input import RunRequest, request_context, run_request
from ._translate import Translator

_RAW = "raw"
_DOC = (
    "Server-Sent Events, one AG-UI event (`ag_ui.core`, protocol 1.0) per `data:` line, camelCase JSON: RUN_STARTED "
    "first; each agent's text, tool calls and hosted items; each recipient's turn between SUBAGENT_STARTED and "
    "SUBAGENT_FINISHED or SUBAGENT_ERROR; then RUN_FINISHED (with the result, or with interrupts for calls waiting for "
    "approval) or RUN_ERROR (a `code` and a message without internals). In durable mode each event has an `id`: the "
    "same input sent again with Last-Event-ID gives the events after it. Comment lines (`: keep-alive`) may come "
    "between events."
)
_ERRORS = {
    400: "bad_request: Last-Event-ID is not the id of an event of this run (durable mode)",
    401: "unauthorized: missing or wrong bearer token",
    404: "not_found: `threadId` is another principal's chat (as every route of it answers), or a resume names a "
    "chat the caller does not own",
    413: "request_too_large: the body is over the server's limit",
    422: "invalid_request: the body is not an AG-UI RunAgentInput, or its text is not valid UTF-8",
}


def chunk(event: BaseEvent, event_id: int | None = None) -> bytes:
    """One event as an SSE block: `data: <JSON>` (and `id: N` in durable mode)."""
    head = "" if event_id is None else f"id: {event_id}\n"
    return utf8(f"{head}data: {event.model_dump_json(by_alias=True)}\n\n")


def failure(exc: BaseException, chat_id: str) -> tuple[str, str]:
    """(code, message) of a failed run as RUN_ERROR carries them: what the HTTP API would answer, never internals
    (a 5xx's cause goes to the log)."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, str):  # a durable turn's TurnFailed: its message is already the client's
        return kind, str(exc)
    status, detail = error_status(exc)
    message = LOCK_LOST if isinstance(exc, TurnLockLost) else detail.message
    if status >= 500:
        logger.error("Chat %r (AG-UI run): %s", chat_id, detail.type, exc_info=exc)
    return detail.type, message


class AgUiPump(EventPump):
    """A plain streamed turn in its own task (as `EventPump`: a lost lock stops it, a reader that leaves does not),
    its events translated to AG-UI's."""

    def __init__(self, stream: ResponseStream, translator: Translator, chat_id: str, write_timeout: float) -> None:
        super().__init__(stream, chat_id, raw=False, write_timeout=write_timeout)
        self._translator = translator
        self.opened.set_result(None)  # the response starts at once: a failure is a RUN_ERROR in the stream

    async def run(self) -> None:
        translator = self._translator
        try:
            await self.put_all(translator.started())
            async with self._stream:
                self._running = True
                async for event in self._stream:
                    if event.type != _RAW:
                        await self.put_all(translator.event(event.to_dict()))
                self._running = False
            await self.put_all(translator.finished(self._stream.result))
        except Exception as exc:
            self._running = False
            await self.put_all(translator.failed(*failure(exc, self.chat_id)))
        finally:
            self._running = False
            self.outbox.end()

    async def put_all(self, events: list[BaseEvent]) -> None:
        for event in events:
            await self.put(chunk(event))


class AgUiDurableFeed(Feed):
    """A durable turn's events, read from its start and translated (the translation is the same each time), sent
    from position `after` on with their positions as ids; then RUN_FINISHED or RUN_ERROR."""

    def __init__(self, handle: Any, translator: Translator, after: int, write_timeout: float) -> None:
        super().__init__(handle.chat_id, write_timeout)
        self._handle, self._translator, self._after = handle, translator, after
        self._position = -1

    async def run(self) -> None:
        translator = self._translator
        try:
            await self.put_all(translator.started())
            async for event in self._handle.events(None):
                await self.put_all(translator.event(event.data))
                if self.outbox.dropped:
                    return  # the reader picks the run up again with Last-Event-ID
            await self.put_all(translator.finished(await self._handle.ended_result()))
        except Exception as exc:
            await self.put_all(translator.failed(*failure(exc, self.chat_id)))
        finally:
            self.outbox.end()

    async def put_all(self, events: list[BaseEvent]) -> None:
        for event in events:
            self._position += 1
            if self._position > self._after:
                await self.put(chunk(event, self._position))


async def failed_run(translator: Translator, exc: BaseException, chat_id: str, write_timeout: float) -> Response:
    """The stream of a run that failed before its turn began: RUN_STARTED, then RUN_ERROR."""
    feed = Feed(chat_id, write_timeout)
    for event in [*translator.started(), *translator.failed(*failure(exc, chat_id))]:
        await feed.put(chunk(event))
    feed.outbox.end()
    return EventStreamResponse(feed)


def _last_event_id(value: str | None) -> int | None:
    """-1 (from the start) without the header; None when it is not an event id."""
    if value is None:
        return -1
    value = value.strip()
    return int(value) if value.lstrip("-").isdigit() and int(value) >= -1 else None


def add_ag_ui_route(
    app: FastAPI, agency: Agency, streams: StreamTurns, turns: Any, owners: ChatOwners, *, protected: bool
) -> None:
    """`POST /ag-ui` on the app; `turns`: durable mode's DurableTurns, or None. `threadId` names a chat as a chat
    route's path does, and `owners` rules it the same way: a run with a new message claims the chat (or is refused
    with the same 404 as a chat route of another principal's chat), a resume writes to one the caller owns."""
    descriptions = {name: str(getattr(agent, "description", "") or "") for name, agent in agency.agents.items()}
    shown = [status for status in _ERRORS if protected or status != 401]
    json_error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    responses: dict[int | str, dict[str, Any]] = {
        status: {"description": _ERRORS[status], "content": json_error} for status in shown
    }
    responses[200] = {"description": _DOC, "content": {"text/event-stream": {"schema": {"type": "string"}}}}

    @app.post(
        "/ag-ui", operation_id="ag_ui_run", tags=["ag-ui"], responses=responses, status_code=200,
        response_class=EventStreamResponse, openapi_extra=bearer_extra(protected=protected),
    )
    async def ag_ui_run(
        http: Request, run: RunAgentInput,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> Response:
        """Run one AG-UI run on the chat `threadId`: a new turn with the last message (the user's), or, with `resume`
        entries, the chat's paused turn with those decisions. The same `runId` again is the same turn."""
        after = _last_event_id(last_event_id)
        if after is None:
            return error_response(400, "bad_request", "Last-Event-ID must be the id of an event of this run.")
        translator = Translator(run.thread_id, run.run_id, descriptions=descriptions)
        try:
            request = run_request(run)
            rules = rules_of(http)
            data = context_data(rules, request_context(run, rules.context_schema is not None))
            context: RequestContext[Any] = RequestContext(principal_of(http.scope), request.chat_id, data)
            refusal = await _refusal(owners, request, context)
            if refusal is not None:
                return refusal  # before the stream starts: nothing tells another principal's chat from none
            once = None if turns is not None else f"{run.run_id}:{uuid.uuid4().hex[:8]}"  # durable: read again
            translator = Translator(
                run.thread_id, run.run_id, known_calls=request.known_calls, known_results=request.known_results,
                descriptions=descriptions, id_prefix=once,
            )
            if turns is not None:
                return await _durable_run(turns, request, context, translator, after, streams.write_timeout)
            stream = _turn_stream(agency, request, context)
            pump = AgUiPump(stream, translator, request.chat_id, streams.write_timeout)
        except Exception as exc:
            return await failed_run(translator, exc, run.thread_id, streams.write_timeout)
        streams.start(pump)
        return EventStreamResponse(pump)


async def _refusal(owners: ChatOwners, request: RunRequest, context: RequestContext[Any]) -> Response | None:
    """What a chat route of the thread would answer its caller, when not allowed: a run with a new message claims
    the chat (as a POST of a message does); a resume writes to the caller's own."""
    claiming = request.message is not None
    return await owners.refusal(
        request.chat_id, context.principal, claiming=claiming, title=title_of(request.message)
    )


def _turn_stream(agency: Agency, request: RunRequest, context: RequestContext[Any]) -> ResponseStream:
    turn_id = key_turn_id(request.key)
    if request.message is None:
        return agency.resume_stream(
            request.chat_id, approve=request.approve, reject=dict(request.reject), turn_id=turn_id, context=context
        )
    recipient = _entry_point(agency, request.recipient_agent)
    return agency.get_response_stream(
        request.message, recipient, chat_id=request.chat_id, turn_id=turn_id, context=context
    )


async def _durable_run(
    turns: Any, request: RunRequest, context: RequestContext[Any], translator: Translator, after: int,
    write_timeout: float,
) -> Response:
    if request.message is None:
        handle = await turns.resume(
            chat_id=request.chat_id, approve=request.approve, reject=dict(request.reject), key=request.key,
            context=context,
        )
    else:
        handle = await turns.submit(
            request.message, chat_id=request.chat_id, recipient_agent=request.recipient_agent, key=request.key,
            context=context,
        )
    feed = AgUiDurableFeed(handle, translator, after, write_timeout)
    return EventStreamResponse(feed, headers={"turn-id": id_for_header(handle.turn_id)}, producer=feed.run)
